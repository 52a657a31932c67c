// Impulse reference world for the benchmark scenes (soft-step sequential impulses, see world.cpp).
#include "bench/impulse_runner.h"

#include <algorithm>

namespace impulse::bench {
namespace {

physics::WorldSettings with_scene_gravity(physics::WorldSettings settings) {
  settings.gravity = scenes::kSceneGravity;
  return settings;
}

}  // namespace

ImpulseWorld::ImpulseWorld(const scenes::BenchScene& scene, physics::WorldSettings settings, int threads)
    : pool_(threads > 1 ? std::make_unique<WorkerPool>(threads) : nullptr),
      world_(with_scene_gravity(settings)),
      ids_(scenes::load_into(world_, scene)) {
  world_.set_worker_pool(pool_.get());
  rejected_ = static_cast<uint32_t>(std::count(ids_.begin(), ids_.end(), ObjectID{})) +
              static_cast<uint32_t>(scene.joints.size() - world_.joint_count());
}

Vec3 ImpulseWorld::position(uint32_t index) const {
  if (index >= ids_.size()) return {};
  const std::optional<physics::BodyState> state = world_.get_object(ids_[index]);
  return state ? state->position : Vec3{};
}

}  // namespace impulse::bench
