// The Bullet side of impulse-bench: a reference scene built through Bullet's own API. Bullet's
// headers stay inside bullet_runner.cpp, so only that file depends on their include path.
#pragma once

#include <cstdint>
#include <memory>

#include "shared/math.h"
#include "tests/scenes/bench_scenes.h"

namespace impulse::bench {

/// How Bullet combines two bodies' friction coefficients into a contact's.
enum class BulletFrictionMix : uint8_t {
  Product = 0,        ///< Bullet's default, mu_a * mu_b: 0.6 on both bodies gives 0.36
  GeometricMean = 1,  ///< sqrt(mu_a mu_b), Impulse's default: 0.6 on both bodies gives 0.6
};

const char* to_string(BulletFrictionMix mix);

struct BulletOptions {
  /// true: Bullet's default deactivation (2 s below 0.8 m/s and 1 rad/s); false: every dynamic
  /// body DISABLE_DEACTIVATION (static bodies keep Bullet's default: they never move, and marking
  /// them would only change which broadphase set they live in).
  bool sleep = true;
  int solver_iterations = 10;
  /// Installed in Bullet's global gCalculateCombinedFrictionCallback when the world is built
  /// (so two worlds with different mixes must not coexist).
  BulletFrictionMix friction_mix = BulletFrictionMix::Product;
};

/// One scene in a btDiscreteDynamicsWorld: btDbvtBroadphase, btDefaultCollisionConfiguration,
/// btCollisionDispatcher, btSequentialImpulseConstraintSolver with split impulse, default margins;
/// btBoxShape, btSphereShape, btCapsuleShape (local Y, like Impulse's) and btStaticPlaneShape,
/// one shape object per distinct size; no motion states (poses are read from the bodies' world
/// transforms). Gravity kSceneGravity. Owns every Bullet object; not copyable.
/// Bullet's figures for a static triangle mesh built as a user would (btTriangleIndexVertexArray
/// over int indices and float vertices, btBvhTriangleMeshShape with quantised AABB compression):
/// the build time [ms] and bytes: its BVH (btOptimizedBvh::calculateSerializeBufferSize, the
/// quantised nodes and subtree headers) and the vertex and index arrays Bullet reads.
struct BulletMeshFigures {
  double build_ms = 0;
  size_t bvh_bytes = 0;
  size_t array_bytes = 0;
};
BulletMeshFigures measure_bullet_mesh(const std::vector<Vec3>& vertices, const std::vector<uint32_t>& indices);

class BulletWorld {
 public:
  BulletWorld(const scenes::BenchScene& scene, const BulletOptions& options);
  ~BulletWorld();
  BulletWorld(const BulletWorld&) = delete;
  BulletWorld& operator=(const BulletWorld&) = delete;

  /// Exactly one internal step of dt [s]: stepSimulation(dt, 0), which with maxSubSteps = 0 takes
  /// dt as the fixed step and runs it once, without interpolation.
  void step(float dt);
  /// Dynamic bodies for which btCollisionObject::isActive() holds (not ISLAND_SLEEPING). O(bodies).
  uint32_t awake_count() const;
  /// Centre of mass [m], world frame, of scene body `index` (index into scene.bodies).
  Vec3 position(uint32_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace impulse::bench
