// Sorted contact lists: ordering, lookup by binary search, and Begin/End events plus warm-start
// impulses from a sorted merge-diff of two steps' lists (a merge join, O(n + m); Knuth, TAOCP
// vol. 3, §5.2.4).
#pragma once

#include <span>
#include <vector>

#include "server/physics/narrowphase.h"
#include "server/physics/types.h"

namespace impulse::physics {

/// One manifold point as the World keeps it between steps, with its solver state for warm
/// starting (Catto, GDC 2005).
struct ContactPointState {
  Vec3 point;               ///< world frame [m], midway between the surfaces
  float separation = 0;     ///< [m], < 0 penetrating (see ManifoldPoint)
  uint32_t feature = 0;     ///< narrowphase feature id, matched across steps
  float normal_impulse = 0; ///< accumulated normal impulse of the last substep [N·s], >= 0
  /// Accumulated friction impulse of the last substep [N·s, world frame, tangent plane], applied
  /// to b (its negative to a); |friction_impulse| <= mu * normal_impulse.
  Vec3 friction_impulse;
  /// Accumulated split-impulse push-out of the last substep [N·s], >= 0 (recovering contacts only;
  /// solver.h): warm starts the push-out against a lasting pressure.
  float pseudo_impulse = 0;
};

/// A contact manifold as the World keeps it between steps: the public summary plus every point.
struct ContactRecord {
  Contact contact;          ///< summary: ids, deepest point, normal, depth
  uint8_t point_count = 0;  ///< 1..kMaxManifoldPoints
  bool sensor = false;      ///< a sensor is involved: events only, never solved
  /// Recovering from a deep overlap: its push-out is solved by split impulses (solver.h). Set when
  /// the pair starts a step deeper than linear_slop, cleared once it is shallower than a fifth of
  /// it (diff_contacts): the hysteresis keeps the last millimetres on split impulses too.
  bool recovering = false;
  /// Which of the pair's manifolds this is: 0 for every pair but a body against a mesh, which may
  /// have up to kMaxMeshManifolds (one per normal). The list key is (a, b, sub); events, contact
  /// counts and queries treat a pair's records as one touching pair.
  uint8_t sub = 0;
  ContactPointState points[kMaxManifoldPoints];
};

/// Copies the warm-starting impulses of `prev`'s points into the matching points of `cur`: the
/// same feature id, or failing that the nearest unmatched previous point within `match_distance`
/// [m] (a feature id can change while the geometry barely moves, e.g. at a face-axis switch).
void match_points(const ContactRecord& prev, ContactRecord& cur, float match_distance);

/// Strict (a, b) order of contacts and events; a pair key is unique within one list.
inline bool pair_less(ObjectID a0, ObjectID b0, ObjectID a1, ObjectID b1) {
  return a0 != a1 ? a0 < a1 : b0 < b1;
}
inline bool contact_less(const Contact& x, const Contact& y) { return pair_less(x.a, x.b, y.a, y.b); }
/// Strict (a, b, sub) order of records; the key is unique within one list.
inline bool record_less(const ContactRecord& x, const ContactRecord& y) {
  if (x.contact.a != y.contact.a || x.contact.b != y.contact.b) return contact_less(x.contact, y.contact);
  return x.sub < y.sub;
}
/// Whether two records belong to the same pair of bodies.
inline bool same_pair(const ContactRecord& x, const ContactRecord& y) {
  return x.contact.a == y.contact.a && x.contact.b == y.contact.b;
}
inline bool event_less(const ContactEvent& x, const ContactEvent& y) { return pair_less(x.a, x.b, y.a, y.b); }

/// The first record of pair (a, b), a < b, in a list sorted by (a, b, sub), or null. O(log n).
const ContactRecord* find_record(std::span<const ContactRecord> sorted, ObjectID a, ObjectID b);

/// The contiguous run of contacts whose `a` equals id in a list sorted by (a, b). O(log n).
std::span<const Contact> find_contacts_with_a(std::span<const Contact> sorted, ObjectID id);

/// Merge join of the previous and current lists, both sorted by (a, b, sub), a pair's records
/// taken together. O(n + m).
///  - appends to `events` one End per pair only in `prev` (with its first record's point and
///    normal) and one Begin per pair only in `cur`, in (a, b) order;
///  - matches the points of each record of a pair present in both (match_points), so their
///    impulses warm start this step: with the record of the same sub when the pair has one record
///    in each list, else with the previous record whose normal is closest (within about 18
///    degrees), as a mesh pair's manifolds come and go; records without a match keep their
///    impulses (0 from the narrowphase);
///  - sets each `cur` record's `recovering` flag: deeper than `recover_depth` [m], or deeper than
///    a fifth of it if its matched record was recovering in `prev`.
void diff_contacts(std::span<const ContactRecord> prev, std::span<ContactRecord> cur,
                   std::vector<ContactEvent>& events, float match_distance, float recover_depth);

/// Merges two sorted lists into `out` (cleared first). The lists must not share a pair.
void merge_records(std::span<const ContactRecord> x, std::span<const ContactRecord> y,
                   std::vector<ContactRecord>& out);

/// Makes a ContactEvent from a contact.
inline ContactEvent make_event(ContactEventType type, const Contact& c) {
  return ContactEvent{type, c.a, c.b, c.point, c.normal};
}

}  // namespace impulse::physics
