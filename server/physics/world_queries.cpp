// World spatial queries: broadphase candidates (SpatialHash grid; rays walk its cells after
// Amanatides and Woo, Eurographics 1987) confirmed by closed-form shape casts (raycast.h) or by
// the AABB overlap test (Ericson, "Real-Time Collision Detection", 2005, §4.2).
//
// Where the candidates come from:
//  - parked bodies (static and sleeping) from the broadphase grid: their proxies are current,
//    since a parked body never moves and every park, unpark and static creation updates the
//    hash at once;
//  - awake bodies from the awake list, each AABB tested directly against the current pose. The
//    broadphase's moving proxies are the AABBs of the last find_pairs, taken before that step
//    moved the bodies, and bodies created since are not in it yet, so they cannot answer a
//    query about the present. The direct test costs O(awake), the same order as the step's own
//    proxy gathering.
// Every candidate's slot is mapped to its current dense index, so a destroyed or reused slot
// cannot leak a stale body. Queries allocate only their local candidate and pose lists and `out`.
// The lag-compensated casts (raycast_*_at) take static bodies from the grid and every movable
// body from the caller's past poses, behind a bounding-sphere test: O(movable bodies), since the
// grid does not know where bodies were.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "server/physics/raycast.h"
#include "server/physics/world.h"

namespace impulse::physics {
namespace {

bool is_usable_ray(Vec3 origin, Vec3 translation) {
  const float len_sq = length_squared(translation);
  return is_finite(origin) && is_finite(translation) && len_sq > 1.0e-24f && std::isfinite(len_sq);
}

/// Order of raycast_all and the tie-break of raycast_closest: fraction, then ObjectID.
bool precedes(const RayHit& l, const RayHit& r) {
  return l.fraction != r.fraction ? l.fraction < r.fraction : l.id < r.id;
}

}  // namespace

void World::gather_ray_candidates(Vec3 origin, Vec3 translation, const std::optional<QueryFilter>& filter,
                                  std::vector<uint32_t>& dense_out) const {
  dense_out.clear();
  const auto accepted = [&](uint32_t dense) { return !filter || query_accepts(*filter, bodies_.info[dense].filter); };
  // Parked bodies come from the grid. Awake bodies are tested directly: the grid's copy of them
  // is taken before the step moves them, and bodies created since the last step are not in it.
  std::vector<uint32_t> slots;
  broadphase_.query_ray(origin, translation, slots);
  for (const uint32_t slot : slots) {
    const uint32_t dense = slots_.dense_of_slot(slot);
    if (dense != SlotMap::kNone && is_parked(dense) && accepted(dense)) dense_out.push_back(dense);
  }
  for (const uint32_t slot : awake_) {
    const uint32_t dense = slots_.dense_of_slot(slot);
    if (accepted(dense) && segment_overlaps_aabb(origin, translation, bodies_.pose[dense].aabb)) {
      dense_out.push_back(dense);
    }
  }
}

namespace {

/// Every hit of the candidates (each placed by its transform), sorted by (fraction, id).
template <class IdAt>
void cast_all(std::span<const uint32_t> candidates, std::span<const Transform> transforms,
              std::span<const Shape> shapes, IdAt&& id_at, Vec3 origin, Vec3 translation, bool back_faces,
              std::vector<RayHit>& out) {
  for (size_t k = 0; k < candidates.size(); ++k) {
    ShapeRayHit hit;
    if (raycast_shape(shapes[candidates[k]], transforms[k], origin, translation, 1.0f, hit, back_faces)) {
      out.push_back(RayHit{id_at(candidates[k]), hit.point, hit.normal, hit.fraction});
    }
  }
  std::sort(out.begin(), out.end(), precedes);
}

/// The first hit of the candidates; each cast stops at the best fraction so far.
template <class IdAt>
std::optional<RayHit> cast_closest(std::span<const uint32_t> candidates, std::span<const Transform> transforms,
                                   std::span<const Shape> shapes, IdAt&& id_at, Vec3 origin, Vec3 translation,
                                   bool back_faces) {
  std::optional<RayHit> best;
  float max_fraction = 1.0f;
  for (size_t k = 0; k < candidates.size(); ++k) {
    ShapeRayHit hit;
    if (!raycast_shape(shapes[candidates[k]], transforms[k], origin, translation, max_fraction, hit, back_faces)) {
      continue;
    }
    const RayHit candidate{id_at(candidates[k]), hit.point, hit.normal, hit.fraction};
    if (!best || precedes(candidate, *best)) {
      best = candidate;
      max_fraction = hit.fraction;
    }
  }
  return best;
}

/// Whether the segment passes within `radius` of `centre` (Ericson §5.1.2, closest point on a segment).
bool segment_near_point(Vec3 origin, Vec3 translation, Vec3 centre, float radius) {
  const Vec3 d = centre - origin;
  const float len_sq = length_squared(translation);
  const float t = std::clamp(dot(d, translation) / len_sq, 0.0f, 1.0f);
  return length_squared(d - translation * t) <= radius * radius;
}

}  // namespace

void World::raycast_all(Vec3 origin, Vec3 translation, std::vector<RayHit>& out,
                        std::optional<QueryFilter> filter, bool back_faces) const {
  out.clear();
  if (!is_usable_ray(origin, translation)) return;
  std::vector<uint32_t> candidates;
  gather_ray_candidates(origin, translation, filter, candidates);
  std::vector<Transform> transforms;
  transforms.reserve(candidates.size());
  for (const uint32_t dense : candidates) transforms.push_back({bodies_.pose[dense].position, bodies_.pose[dense].orientation});
  cast_all(candidates, transforms, bodies_.shape, [&](uint32_t d) { return slots_.id_at(d); }, origin, translation,
           back_faces, out);
}

std::optional<RayHit> World::raycast_closest(Vec3 origin, Vec3 translation, std::optional<QueryFilter> filter,
                                             bool back_faces) const {
  if (!is_usable_ray(origin, translation)) return std::nullopt;
  std::vector<uint32_t> candidates;
  gather_ray_candidates(origin, translation, filter, candidates);
  std::vector<Transform> transforms;
  transforms.reserve(candidates.size());
  for (const uint32_t dense : candidates) transforms.push_back({bodies_.pose[dense].position, bodies_.pose[dense].orientation});
  return cast_closest(candidates, transforms, bodies_.shape, [&](uint32_t d) { return slots_.id_at(d); }, origin,
                      translation, back_faces);
}

void World::movable_poses(std::vector<IndexedPose>& out) const {
  out.assign(slots_.slot_count(), IndexedPose{});
  for (uint32_t dense = 0; dense < slots_.size(); ++dense) {
    if (bodies_.info[dense].kind == BodyKind::Static) continue;
    const ObjectID id = slots_.id_at(dense);
    out[id.index] = IndexedPose{id.generation, bodies_.pose[dense].position, bodies_.pose[dense].orientation};
  }
}

void World::gather_posed_ray_candidates(Vec3 origin, Vec3 translation, std::span<const IndexedPose> poses,
                                        const std::optional<QueryFilter>& filter, std::vector<uint32_t>& dense_out,
                                        std::vector<Transform>& transforms_out) const {
  dense_out.clear();
  transforms_out.clear();
  const auto accepted = [&](uint32_t dense) { return !filter || query_accepts(*filter, bodies_.info[dense].filter); };
  std::vector<uint32_t> slots;
  broadphase_.query_ray(origin, translation, slots);
  for (const uint32_t slot : slots) {
    const uint32_t dense = slots_.dense_of_slot(slot);
    if (dense != SlotMap::kNone && bodies_.info[dense].kind == BodyKind::Static && accepted(dense)) {
      dense_out.push_back(dense);
      transforms_out.push_back({bodies_.pose[dense].position, bodies_.pose[dense].orientation});
    }
  }
  const uint32_t n = std::min<uint32_t>(static_cast<uint32_t>(poses.size()), slots_.slot_count());
  for (uint32_t index = 0; index < n; ++index) {
    const IndexedPose& p = poses[index];
    if (p.generation == 0) continue;
    const uint32_t dense = slots_.find(ObjectID{index, p.generation});
    if (dense == SlotMap::kNone || bodies_.info[dense].kind == BodyKind::Static || !accepted(dense)) continue;
    // extent bounds the surface from the centre of mass; the slack covers rounding.
    if (!segment_near_point(origin, translation, p.position, bodies_.info[dense].extent * 1.001f + 1.0e-4f)) continue;
    dense_out.push_back(dense);
    transforms_out.push_back({p.position, p.orientation});
  }
}

std::optional<RayHit> World::raycast_closest_at(Vec3 origin, Vec3 translation, std::span<const IndexedPose> poses,
                                                std::optional<QueryFilter> filter, bool back_faces) const {
  if (!is_usable_ray(origin, translation)) return std::nullopt;
  std::vector<uint32_t> candidates;
  std::vector<Transform> transforms;
  gather_posed_ray_candidates(origin, translation, poses, filter, candidates, transforms);
  return cast_closest(candidates, transforms, bodies_.shape, [&](uint32_t d) { return slots_.id_at(d); }, origin,
                      translation, back_faces);
}

void World::raycast_all_at(Vec3 origin, Vec3 translation, std::span<const IndexedPose> poses,
                           std::vector<RayHit>& out, std::optional<QueryFilter> filter, bool back_faces) const {
  out.clear();
  if (!is_usable_ray(origin, translation)) return;
  std::vector<uint32_t> candidates;
  std::vector<Transform> transforms;
  gather_posed_ray_candidates(origin, translation, poses, filter, candidates, transforms);
  cast_all(candidates, transforms, bodies_.shape, [&](uint32_t d) { return slots_.id_at(d); }, origin, translation,
           back_faces, out);
}

void World::overlap_aabb(const Aabb& box, std::vector<ObjectID>& out, std::optional<QueryFilter> filter) const {
  out.clear();
  const auto accepted = [&](uint32_t dense) { return !filter || query_accepts(*filter, bodies_.info[dense].filter); };
  // NaN or inverted bounds overlap nothing; infinite bounds are allowed (a box around everything).
  if (!(box.min.x <= box.max.x && box.min.y <= box.max.y && box.min.z <= box.max.z)) return;

  std::vector<uint32_t> candidates;
  broadphase_.query(box, candidates);
  for (const uint32_t slot : candidates) {
    const uint32_t dense = slots_.dense_of_slot(slot);
    if (dense != SlotMap::kNone && is_parked(dense) && accepted(dense)) out.push_back(slots_.id_at(dense));
  }
  for (const uint32_t slot : awake_) {
    const uint32_t dense = slots_.dense_of_slot(slot);
    if (accepted(dense) && overlaps(bodies_.pose[dense].aabb, box)) out.push_back(slots_.id_at(dense));
  }
  std::sort(out.begin(), out.end());
}

// --- Contact queries -------------------------------------------------------------------------------------

void World::build_query_cache() const {
  QueryCache& q = query_cache_;
  if (q.valid) return;
  q.all.clear();
  size_t i = 0;
  size_t j = 0;
  while (i < contacts_.size() || j < resting_.size()) {
    const bool take_active =
        j == resting_.size() || (i < contacts_.size() && record_less(contacts_[i], resting_[j]));
    q.all.push_back(take_active ? contacts_[i++].contact : resting_[j++].contact);
  }
  q.by_b.resize(q.all.size());
  std::iota(q.by_b.begin(), q.by_b.end(), 0u);
  std::sort(q.by_b.begin(), q.by_b.end(), [&](uint32_t x, uint32_t y) {
    return pair_less(q.all[x].b, q.all[x].a, q.all[y].b, q.all[y].a);
  });
  q.valid = true;
}

std::span<const Contact> World::get_collisions() const {
  build_query_cache();
  return query_cache_.all;
}

bool World::is_colliding(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  return dense != SlotMap::kNone && bodies_.info[dense].contact_count > 0;
}

bool World::are_colliding(ObjectID a, ObjectID b) const {
  if (!slots_.contains(a) || !slots_.contains(b) || a == b) return false;
  if (b < a) std::swap(a, b);
  return find_record(contacts_, a, b) != nullptr || find_record(resting_, a, b) != nullptr;
}

std::vector<Contact> World::get_collisions_for(ObjectID id) const {
  std::vector<Contact> out;
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone || bodies_.info[dense].contact_count == 0) return out;
  build_query_cache();
  const QueryCache& q = query_cache_;
  out.reserve(bodies_.info[dense].contact_count);
  // Pairs where id is b have a < id and come first in (a, b) order; by_b lists them by a.
  auto first = std::lower_bound(q.by_b.begin(), q.by_b.end(), id,
                                [&](uint32_t i, ObjectID key) { return q.all[i].b < key; });
  for (; first != q.by_b.end() && q.all[*first].b == id; ++first) out.push_back(q.all[*first]);
  for (const Contact& c : find_contacts_with_a(q.all, id)) out.push_back(c);
  return out;
}

std::span<const ContactEvent> World::contact_events() const { return events_; }

}  // namespace impulse::physics
