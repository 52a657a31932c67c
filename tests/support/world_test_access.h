// The World's test hooks, outside its public interface: states that no validated input can
// produce (a NaN velocity, a solve that ends non-finite), for the tests of the step's guard and
// of what the server and the recorder do with its removals and restores. Tests only.
#pragma once

#include "server/physics/world.h"

namespace impulse::physics {

struct WorldTestAccess {
  /// Sets body `id`'s linear velocity with no check at all (NaN included) and wakes it. False
  /// for a stale id.
  static bool set_velocity_unchecked(World& w, ObjectID id, Vec3 velocity) {
    const uint32_t dense = w.slots_.find(id);
    if (dense == SlotMap::kNone) return false;
    w.bodies_.motion[dense].velocity = velocity;
    w.wake_body(dense);
    return true;
  }
  /// Makes the next step's solve of awake body `id` end as NaN, as a solver fault would (the
  /// restore path, World::restored_non_finite). False for a stale or parked id.
  static bool inject_non_finite_solve(World& w, ObjectID id) {
    const uint32_t dense = w.slots_.find(id);
    if (dense == SlotMap::kNone || w.is_parked(dense)) return false;
    w.inject_non_finite_ = id;
    return true;
  }
};

}  // namespace impulse::physics
