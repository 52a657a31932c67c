// The physics world: slotmap storage (seed 000) with columns of body data, and the fixed step.
// Knows nothing about networking. SI units; world frame right-handed, +Y up.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "server/physics/broadphase.h"
#include "server/physics/settings.h"
#include "server/physics/slotmap.h"
#include "server/physics/types.h"

namespace impulse::physics {

/// Per-stage wall-clock timings of the last step [ms].
struct StepProfile {
  double integrate_ms = 0;
  double broadphase_ms = 0;
  double narrowphase_ms = 0;
  double solve_ms = 0;
  double sleep_ms = 0;
  double events_ms = 0;
  double total_ms = 0;
  uint32_t pair_count = 0;     ///< broadphase candidate pairs
  uint32_t contact_count = 0;  ///< touching pairs after narrowphase (awake)
};

struct CreateResult {
  Error error = Error::Ok;
  ObjectID id;  ///< valid only when error == Ok
};

class World {
 public:
  explicit World(const WorldSettings& settings = {});

  // --- Storage ------------------------------------------------------------------------------
  /// Creates an object. Validation: finite values, 0 < extents <= max_extent, 0 < mass <= max_mass
  /// for dynamic bodies, restitution in [0, 1], |position| <= max_coordinate, |velocity| <= max_speed.
  /// @return InvalidArgument or WorldFull with a null id, else Ok and the new id.
  CreateResult create_object(const BodyDesc& desc);
  /// Destroys an object and wakes the bodies that were touching it.
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
  /// Adds a force [N, world frame] for the next step only. `point` (world frame [m]) is accepted
  /// for forward compatibility; without rotation a force acts at the centre of mass.
  /// Wakes the body. @return StaleId, NotDynamic, InvalidArgument (non-finite) or Ok.
  Error apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point = std::nullopt);
  /// Changes velocity by impulse / mass [N·s, world frame] immediately. Wakes the body.
  /// @return StaleId, NotDynamic, InvalidArgument or Ok.
  Error apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point = std::nullopt);
  /// Sets the velocity [m/s, world frame] of a dynamic or kinematic body. Wakes it.
  /// @return StaleId, NotDynamic (static body), InvalidArgument or Ok.
  Error set_velocity(ObjectID id, Vec3 velocity);

  // --- Step ----------------------------------------------------------------------------------
  /// Advances the world by dt [s] (fixed, typically 1/60). dt must be finite and > 0.
  void step(float dt);
  /// Steps taken so far.
  uint64_t tick() const { return tick_; }
  const StepProfile& profile() const { return profile_; }
  const WorldSettings& settings() const { return settings_; }
  /// Hash of all body state (ids, kinds, shapes, positions, velocities, sleep), bit-exact.
  /// FNV-1a over the dense columns in storage order.
  uint64_t world_hash() const;

  // --- Queries (seed 000), answered from the last step's contact data ---------------------------
  /// Every touching pair after the last step, sorted by (a, b). Includes resting contacts of
  /// sleeping bodies (a body falling asleep does not end its contacts).
  std::span<const Contact> get_collisions() const;
  /// True when the object touched anything after the last step. O(1).
  bool is_colliding(ObjectID id) const;
  /// True when a and b touched after the last step (either order). O(log contacts).
  bool are_colliding(ObjectID a, ObjectID b) const;
  /// The contacts of one object after the last step. O(log contacts + result).
  std::vector<Contact> get_collisions_for(ObjectID id) const;
  /// Begin and end events of the last step, sorted by (a, b).
  std::span<const ContactEvent> contact_events() const;

 private:
  BodyState state_at_dense(uint32_t dense) const;

  WorldSettings settings_;
  uint64_t tick_ = 0;
  StepProfile profile_;
  // Columns (pose, motion, shape, material, info), the slotmap, broadphase state, contact lists
  // and per-step scratch follow here; they are private to the implementation.
};

}  // namespace impulse::physics
