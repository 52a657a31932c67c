// The Impulse side of impulse-bench: a reference scene in a physics::World, with the same small
// interface as BulletWorld so the paired runner drives both alike.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "server/physics/world.h"
#include "shared/parallel.h"
#include "tests/scenes/bench_scenes.h"

namespace impulse::bench {

/// A physics::World built from a scene with the given settings (gravity forced to kSceneGravity).
/// Bodies are created in scene order.
class ImpulseWorld {
 public:
  /// @param settings  the world's settings; the benchmark's defaults are WorldSettings{} with
  ///                  allow_sleep from the scene or --sleep
  /// @param threads   > 1: the world steps on a WorkerPool of that many threads (its own, made
  ///                  here, so a forked RSS child builds its arena after the fork); 1: no pool
  ImpulseWorld(const scenes::BenchScene& scene, physics::WorldSettings settings, int threads = 1);

  /// Bodies and joints the world rejected at creation (0 for the reference scenes; anything else is a bug
  /// in the scene or the world, and the benchmark refuses to run).
  uint32_t rejected_count() const { return rejected_; }
  /// One World::step(dt) [s].
  void step(float dt) { world_.step(dt); }
  /// World::awake_count(): non-static bodies awake. O(1).
  uint32_t awake_count() const { return world_.awake_count(); }
  /// Centre of mass [m], world frame, of scene body `index`; the origin for a rejected body.
  Vec3 position(uint32_t index) const;
  /// Per-stage timings and counters of the last step.
  const physics::StepProfile& profile() const { return world_.profile(); }

 private:
  std::unique_ptr<WorkerPool> pool_;  // before world_: the world keeps a pointer to it
  physics::World world_;
  std::vector<ObjectID> ids_;  // index-aligned with scene.bodies
  uint32_t rejected_ = 0;
};

}  // namespace impulse::bench
