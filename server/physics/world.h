// The physics world: slotmap storage (seed 000) with columns of body data, and the fixed step.
// Knows nothing about networking. SI units; world frame right-handed, +Y up.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "server/physics/body_columns.h"
#include "server/physics/broadphase.h"
#include "server/physics/contact_list.h"
#include "server/physics/settings.h"
#include "server/physics/slotmap.h"
#include "server/physics/solver.h"
#include "server/physics/types.h"

namespace impulse::physics {

/// Per-stage wall-clock timings of the last step [ms]. The stages are listed in world.cpp.
struct StepProfile {
  double integrate_ms = 0;    ///< velocity integration + position integration + AABB refresh
  double broadphase_ms = 0;   ///< gathering moving proxies + SpatialHash::find_pairs
  double narrowphase_ms = 0;  ///< collide() per pair + wake decisions + resting-contact reactivation
  double solve_ms = 0;        ///< contact preparation + velocity iterations + position correction
  double sleep_ms = 0;        ///< sleep timers, parking + freezing resting contacts
  double events_ms = 0;       ///< Begin/End merge-diff
  double total_ms = 0;
  uint32_t pair_count = 0;     ///< broadphase candidate pairs
  uint32_t contact_count = 0;  ///< touching pairs after narrowphase (awake)
  uint32_t awake_count = 0;    ///< bodies integrated this step
  uint32_t woken_count = 0;    ///< sleeping bodies woken during this step
  uint32_t slept_count = 0;    ///< bodies that fell asleep this step
};

/// Bounds of the commands, derived from the settings so that anything a valid body can do is
/// accepted and anything absurd is rejected:
///  - |impulse component| <= max_mass * max_speed [N·s]: enough to take the heaviest body from
///    rest to max_speed at once;
///  - |force component| <= max_mass * max_speed * 1/s [N]: the same velocity change over 1 s;
///  - after an impulse, |velocity component| must stay <= max_speed, else InvalidArgument.
/// (The wire limits kMaxForce, kMaxImpulse in shared/wire/codec.h lie inside these bounds.)
float max_force(const WorldSettings& settings);
float max_impulse(const WorldSettings& settings);

/// Reason a setting is unusable (e.g. "cell_size must be finite and > 0"), or nullptr when all are
/// usable. World's constructor replaces each unusable field by its default instead of failing;
/// callers that load settings from a file or flags should call this first and report the reason.
const char* check_settings(const WorldSettings& settings);

struct CreateResult {
  Error error = Error::Ok;
  ObjectID id;  ///< valid only when error == Ok
};

/// The simulation: storage, commands, the fixed step, queries and contact events.
/// Single-threaded: not safe for concurrent calls, including concurrent const queries (they may
/// fill an internal cache). Spans returned by queries stay valid until the next non-const call.
///
/// Sleep (per body, seed 000): a dynamic body slower than sleep_speed for sleep_time_s (a
/// kinematic body: stopped for sleep_time_s) sleeps: velocity zeroed, parked in the broadphase,
/// skipped by every stage, an immovable partner in contacts, contacts kept. It wakes on
/// apply_force, apply_impulse or set_velocity; on contact with an awake body that was moving
/// (dynamic: faster than sleep_speed; kinematic: any velocity); when it loses a contact with an
/// awake body or a touching body is destroyed; when a static body is created over it; and when
/// the impulse it absorbs as an immovable partner, beyond the load pressing it down along
/// gravity, would have moved it faster than sleep_speed (lifted or shoved, not merely sat on).
class World {
 public:
  /// @param settings  copied; unusable fields (see check_settings) are replaced by defaults
  explicit World(const WorldSettings& settings = {});

  // --- Storage ------------------------------------------------------------------------------
  /// Creates an object. Validation: a known kind and shape kind; every float finite;
  /// 0 < radius (sphere) or half extents (box) <= max_extent; 0 < mass <= max_mass with a finite
  /// 1 / mass for dynamic bodies (ignored otherwise); restitution in [0, 1]; friction >= 0; damping >= 0;
  /// |position component| <= max_coordinate; |velocity component| <= max_speed.
  /// Dynamic and kinematic bodies start awake; a static body wakes the sleeping bodies its AABB
  /// overlaps (they were never tested against it). O(1) amortised, plus one broadphase query for
  /// a static body.
  /// @return InvalidArgument or WorldFull (max_objects, or slot indices exhausted) with a null id
  ///         and the world unchanged, else Ok and the new id.
  CreateResult create_object(const BodyDesc& desc);
  /// Destroys an object. Its contacts disappear from the queries at once; their End events are
  /// reported with the next step's events. Sleeping bodies that were touching it are woken.
  /// Cost O(1) for a body without contacts, else O(contacts in the world).
  /// @return StaleId (world unchanged) or Ok.
  Error destroy_object(ObjectID id);
  /// True when id names a live object.
  bool is_valid(ObjectID id) const;
  /// A copy of the object's state, or nullopt for a stale id.
  std::optional<BodyState> get_object(ObjectID id) const;
  /// Live objects. O(1).
  uint32_t object_count() const;
  /// Non-static bodies that are awake. O(1).
  uint32_t awake_count() const;
  /// Calls fn(const BodyState&) for every live object. Cost O(live), in a deterministic order.
  template <class Fn>
  void for_each_object(Fn&& fn) const {
    for (uint32_t d = 0; d < object_count(); ++d) fn(state_at_dense(d));
  }

  // --- Commands (take effect at the next step) -------------------------------------------------
  /// Adds a force [N, world frame] for the next step only (forces accumulate until then).
  /// `point` (world frame [m]) is accepted for forward compatibility; without rotation a force
  /// acts at the centre of mass. Wakes the body.
  /// @return StaleId, NotDynamic, InvalidArgument (non-finite, |component| > max_force(), or a
  ///         point that is non-finite or beyond max_coordinate) or Ok. On error nothing changes.
  Error apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point = std::nullopt);
  /// Changes velocity by impulse / mass [N·s, world frame] immediately. Wakes the body.
  /// @return StaleId, NotDynamic, InvalidArgument (non-finite, |component| > max_impulse(), a
  ///         resulting |velocity component| > max_speed, or a bad point) or Ok.
  Error apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point = std::nullopt);
  /// Sets the velocity [m/s, world frame] of a dynamic or kinematic body. Wakes it.
  /// @return StaleId, NotDynamic (static body), InvalidArgument (non-finite or |component| >
  ///         max_speed) or Ok.
  Error set_velocity(ObjectID id, Vec3 velocity);

  // --- Step ----------------------------------------------------------------------------------
  /// Advances the world by dt [s] (fixed, typically 1/60). A dt that is not finite or <= 0 makes
  /// the call a no-op (no tick, no events change). The stages are listed in world.cpp.
  /// After force integration each velocity component of a dynamic body is clamped to
  /// max_speed, so no sequence of accepted commands can drive the state to infinity.
  /// No heap allocation once the scratch buffers have grown to the scene.
  void step(float dt);
  /// Steps taken so far.
  uint64_t tick() const { return tick_; }
  const StepProfile& profile() const { return profile_; }
  const WorldSettings& settings() const { return settings_; }
  /// Hash of all body state (ids, kinds, shapes, positions, velocities, accumulated forces, mass,
  /// damping, materials, sleep state and timers), bit-exact. 64-bit FNV-1a (Fowler, Noll, Vo)
  /// over the dense columns in storage order. O(live).
  uint64_t world_hash() const;

  // --- Queries (seed 000), answered from the last step's contact data ---------------------------
  /// Every touching pair after the last step, sorted by (a, b). Includes resting contacts of
  /// sleeping bodies (a body falling asleep does not end its contacts; their geometry is frozen
  /// as of the step it fell asleep). Merged lazily from the active and resting lists: O(contacts)
  /// on the first call after a change, then O(1).
  std::span<const Contact> get_collisions() const;
  /// True when the object touched anything after the last step (false for a stale id). O(1):
  /// a per-body contact count.
  bool is_colliding(ObjectID id) const;
  /// True when a and b touched after the last step (either order; false for stale ids).
  /// O(log contacts): binary search of the sorted lists.
  bool are_colliding(ObjectID a, ObjectID b) const;
  /// The contacts of one object after the last step, sorted by (a, b); empty for a stale id or
  /// a body without contacts (O(1)). Otherwise O(log contacts + result), plus the one-off
  /// O(contacts log contacts) cache build of get_collisions() after a step or destroy.
  std::vector<Contact> get_collisions_for(ObjectID id) const;
  /// Begin and end events of the last step, sorted by (a, b). A pair never gets both in one step.
  /// Includes End events of bodies destroyed since the step before (with their old ids).
  std::span<const ContactEvent> contact_events() const;
  /// Contacts frozen because both bodies sleep (or one is static). Diagnostics. O(1).
  uint32_t resting_contact_count() const { return static_cast<uint32_t>(resting_.size()); }

 private:
  BodyState state_at_dense(uint32_t dense) const;
  bool is_parked(uint32_t dense) const;  // static or sleeping: a parked broadphase proxy
  void add_awake(uint32_t dense);
  void remove_awake(uint32_t dense);
  void wake_body(uint32_t dense);
  void reactivate_resting(std::vector<ContactRecord>& out);
  void invalidate_queries() { query_cache_.valid = false; }
  void build_query_cache() const;

  // Stages of step(), in order (see world.cpp).
  void integrate_velocities(float dt);
  void update_broadphase();
  void collide_pairs();
  void update_events();
  void apply_wakes();
  void solve(float dt);
  void wake_pushed_sleepers(std::span<const SolverContact> contacts);
  void update_sleep(float dt);

  WorldSettings settings_;
  uint64_t tick_ = 0;
  StepProfile profile_;

  SlotMap slots_;
  BodyColumns bodies_;           // dense columns, indexed by SlotMap dense index
  std::vector<uint32_t> awake_;  // slot indices of awake dynamic and kinematic bodies
  SpatialHash broadphase_;       // proxy id = slot index

  // Contacts, both sorted by (a, b) and disjoint. Active: pairs with an awake body, computed by
  // the last step. Resting: pairs of two parked bodies, frozen when the later one fell asleep.
  // Each keeps its last normal and friction impulses for warm starting.
  std::vector<ContactRecord> contacts_;
  std::vector<ContactRecord> resting_;
  bool resting_dirty_ = false;                // a body woke since the resting list was last partitioned
  std::vector<ContactEvent> events_;          // of the last step, sorted
  std::vector<ContactEvent> pending_events_;  // End events of destroyed bodies, for the next step

  // Per-step scratch, reused so the step does not allocate in steady state.
  struct Scratch {
    std::vector<uint32_t> moving_ids;
    std::vector<Aabb> moving_aabbs;
    std::vector<ProxyPair> pairs;
    std::vector<ContactRecord> found;  // narrowphase output, sorted
    std::vector<ContactRecord> merged;
    std::vector<ContactRecord> reactivated;
    std::vector<uint32_t> wake_requests;  // dense indices
    std::vector<float> start_speed_sq;    // per dense index, valid for awake bodies [m^2/s^2]
    std::vector<SolverContact> solver_contacts;
    std::vector<ContactEvent> events;
    std::vector<uint32_t> query_hits;
  } scratch_;

  // Lazily built union of contacts_ and resting_ and a (b, a)-ordered index into it.
  struct QueryCache {
    bool valid = false;
    std::vector<Contact> all;
    std::vector<uint32_t> by_b;
  };
  mutable QueryCache query_cache_;
};

}  // namespace impulse::physics
