// The reference benchmark scenes S1 (pyramid), S2 (pile), S3 (spheres) and J1 (joint grid), as an engine-neutral
// list of bodies shared by the unit tests and impulse-bench (Bullet gets the same list). This file
// and bench_scenes.cpp define them; docs/BENCHMARKS.md, "Scenes", describes them.
#pragma once

#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "server/physics/convex_hull.h"
#include "server/physics/heightfield.h"
#include "server/physics/joint.h"
#include "server/physics/triangle_mesh.h"
#include "server/physics/types.h"
#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse::physics {
class World;
}

namespace impulse::scenes {

/// The scenes' 64-bit linear congruential generator (constants of Knuth's MMIX), so every engine
/// starts from the same random layout. next() advances the state, then returns its top 53 bits.
struct Lcg {
  uint64_t state = 0;

  explicit constexpr Lcg(uint64_t seed) : state(seed) {}
  /// Uniform in [0, 1): s = s * 6364136223846793005 + 1442695040888963407 (mod 2^64), then
  /// (s >> 11) * 2^-53.
  constexpr double next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  }
  /// Uniform in [lo, hi): lo + (hi - lo) * next().
  constexpr double range(double lo, double hi) { return lo + (hi - lo) * next(); }
};

/// One body of a scene, in the world frame, in the units of physics::BodyDesc.
struct SceneBody {
  physics::BodyKind kind = physics::BodyKind::Dynamic;
  physics::Shape shape;
  Vec3 position;      ///< centre of mass [m]
  Quat orientation;   ///< local to world, unit
  float mass = 1.0f;  ///< [kg]; meaningful for dynamic bodies only
  float friction = 0.6f;
  float restitution = 0.0f;
  Vec3 velocity;  ///< [m/s] at the start
  /// Collision filter (Box2D's b2Filter; Bullet's group and mask): two bodies collide when each
  /// one's category is in the other's mask.
  uint32_t category = 1;
  uint32_t mask = ~0u;
};

/// A joint between bodies a and b (indices into BenchScene::bodies) at `anchor` [m], world
/// frame, at the scene's poses; the two bodies do not collide with each other. Point: Impulse's
/// JointKind::Point, Bullet's btPoint2PointConstraint. Hinge: about `axis` within [lower, upper]
/// [rad] (btHingeConstraint with its limit). SwingTwist: the swing within `cone` [rad] of `axis`,
/// the twist within [lower, upper] (btConeTwistConstraint with both swing spans `cone` and the
/// twist span max(|lower|, |upper|): Bullet's twist limit is symmetric).
struct SceneJoint {
  physics::JointKind kind = physics::JointKind::Point;
  uint32_t a = 0, b = 0;
  Vec3 anchor;
  Vec3 axis{0, 1, 0};
  float lower = 0, upper = 0, cone = 0;
  /// SwingTwist: friction torque [N·m] (Impulse only: Bullet's cone-twist has none; J2 uses 0).
  float friction = 0;
};

/// A whole scene: its static level first, then the dynamic bodies in a fixed order.
struct BenchScene {
  std::string name;               ///< "S1", "S2" or "S3"
  std::vector<SceneBody> bodies;  ///< creation order; engines create them in this order
  bool sleep = true;              ///< the scene's specified sleep setting (S1 is run both ways)
  /// S1 only: index into `bodies` of the pyramid's top box (the one whose drift is reported).
  uint32_t top_body = 0;
  std::vector<SceneJoint> joints;  ///< created after every body, in this order
  /// The hulls that hull bodies' shapes point at (load_into adds each to the World).
  std::vector<std::shared_ptr<const physics::ConvexHull>> hulls;
  /// Likewise the meshes and heightfields of mesh and heightfield bodies.
  std::vector<std::shared_ptr<const physics::TriangleMesh>> meshes;
  std::vector<std::shared_ptr<const physics::HeightField>> heightfields;
};

/// Box half-extent and sphere radius of every dynamic body of the scenes [m].
inline constexpr float kBodyHalfExtent = 0.5f;
/// Mass [kg], friction and restitution of every dynamic body (and of the static level).
inline constexpr float kBodyMass = 1.0f;
inline constexpr float kBodyFriction = 0.6f;
inline constexpr float kBodyRestitution = 0.0f;
/// Step of the scenes [s] and gravity [m/s^2], world frame, Y up.
inline constexpr float kSceneDt = 1.0f / 60.0f;
inline constexpr Vec3 kSceneGravity{0.0f, -9.81f, 0.0f};

/// Largest accepted arguments: beyond them the layout leaves its container (S2's walls are 80 m
/// high) or becomes absurd for a benchmark.
inline constexpr int kMaxPyramidBase = 200;
inline constexpr int kMaxPileCount = 18000;
inline constexpr int kMaxSphereCount = 100000;

/// S1: a static ground box (half-extents 50, 1, 50 at (0, -1, 0)) and a 2D pyramid of unit boxes
/// in the XY plane, `base` boxes in the bottom row, one less per row up: base (base + 1) / 2 boxes,
/// touching, unrotated. top_body is the single box of the last row. sleep = false.
/// @param base  in [1, kMaxPyramidBase]; values outside are clamped (check before calling).
BenchScene make_s1_pyramid(int base = 20);
/// S2: a 30 x 30 m container (ground box and four 80 m walls) and n boxes in layers of 19 x 19,
/// 1.5 m apart, jittered by up to 5 cm and tilted by up to 0.3 rad from Lcg(12345). sleep = true.
/// @param n  in [1, kMaxPileCount]; values outside are clamped.
BenchScene make_s2_pile(int n);
/// S3: a static plane y = 0 and n spheres of radius 0.5 m in layers of 25 x 25, 1.5 m apart,
/// jittered by up to 10 cm from Lcg(6789). sleep = true.
/// @param n  in [1, kMaxSphereCount]; values outside are clamped.
BenchScene make_s3_spheres(int n);

/// Largest J1 grid side: 200 x 200 = 40,000 spheres and 79,600 joints.
inline constexpr int kMaxJointGridSide = 200;

/// J1: Box2D v3's joint_grid benchmark (shared/benchmarks.c, CreateJointGrid) in 3D: side x side
/// spheres of radius 0.4 m (density 1000 kg/m^3: 268 kg) 1 m apart in the XY plane (column k at
/// x = k, row i at y = -i), each joined by a point joint at the midpoint to the sphere above and
/// the one to its left (2 side (side - 1) joints, less the 6 between the pinned spheres: 19,794
/// for 100); the 7 spheres at the middle of the top row are static, so the grid hangs and swings
/// from them. The spheres do not collide
/// with each other (category 2, mask ~2). sleep = false.
/// @param side  in [8, kMaxJointGridSide]; values outside are clamped.
BenchScene make_j1_joint_grid(int side = 100);

/// Appends a 15-body ragdoll (pelvis, abdomen, chest, neck, head; upper arms, forearms; thighs,
/// shins, feet; 74 kg), standing with its feet at `base` and moving at `velocity`, with 14 joints:
/// swing-twist at the waist, spine, neck, skull, shoulders and hips, hinges at the elbows, knees
/// and ankles. Used by J2 (without friction) and by the ragdoll tests
/// (tests/unit/physics/test_ragdoll.cpp, with friction torques of 0.5-2 N·m so that it settles).
void append_ragdoll(BenchScene* scene, Vec3 base, Vec3 velocity, bool joint_friction = false);

/// J2: Jolt's Ragdoll performance scene in shape: `count` ragdolls (15 bodies each) dropped in
/// columns of 10 onto a static plane, where they pile up. sleep = true.
/// @param count  in [1, kMaxRagdolls]; values outside are clamped.
inline constexpr int kMaxRagdolls = 2000;
BenchScene make_j2_ragdolls(int count = 160);

/// C1: S2's container and layout with n cylinders instead of boxes, four sizes in turn (radius
/// 0.25 to 0.45 m, half height 0.2 to 0.5 m), standing as dropped: they land on caps and rims,
/// topple and pile.
/// @param n  in [1, kMaxPileCount]; values outside are clamped.
BenchScene make_c1_cylinder_pile(int n);

/// Most H1 bodies (the S2 container's limit).
inline constexpr int kMaxHullPileCount = kMaxPileCount;
/// H1: S2's container and layout with n convex hulls ("rocks") instead of boxes: 8 hull shapes,
/// each the hull of 24 points drawn from Lcg(2468) in a 0.5 x 0.4 x 0.45 m half-size box
/// (12-20 hull vertices), cycled through the pile. sleep = true. Bullet gets btConvexHullShape of
/// the same vertices.
/// @param n  in [1, kMaxHullPileCount]; values outside are clamped.
BenchScene make_h1_hull_pile(int n);

/// Most M1 and M2 bodies.
inline constexpr int kMaxTerrainBodies = 20000;

/// The 1M-triangle grid of the mesh build figures: `cells` x `cells` cells of 0.5 m, two triangles
/// each, over rolling ground y = 2 sin(0.05 x) cos(0.04 z) + 0.5 sin(0.3 x + 0.2 z) (centred on the
/// origin). Vertices shared; 708 cells give 1,002,528 triangles.
void terrain_grid(int cells, float cell_size, std::vector<Vec3>* vertices, std::vector<uint32_t>* indices);

/// M1: convex bodies onto a triangle mesh (Jolt's ConvexVsMesh performance scene, scaled up):
/// a 224 x 224-cell terrain_grid of 0.9 m cells (100,352 triangles, 201.6 m square) and n dynamic
/// bodies, 8 in 9 the H1 hulls and every 9th a box of half-size 0.5 m, in a 42-wide grid 3 m apart
/// at y = 6 m (one layer for n <= 1764, then more layers 3 m up). sleep = true. Bullet gets a
/// btBvhTriangleMeshShape of the same triangles (quantised BVH).
/// @param n  in [1, kMaxTerrainBodies]; values outside are clamped.
BenchScene make_m1_mesh_terrain(int n = 1764);

/// M2: n mixed bodies (box, sphere, capsule, H1 hull in turn) onto a 512 x 512-sample heightfield
/// of 0.5 m spacing (255.5 m square, centred; y = 3 sin(0.04 x) cos(0.05 z) + 0.4 sin(0.25 x)),
/// in a 64-wide grid 3 m apart at y = 8 m, layers 3 m apart. sleep = true. Bullet gets a
/// btHeightfieldTerrainShape of the same (dequantised) heights.
/// @param n  in [1, kMaxTerrainBodies]; values outside are clamped.
BenchScene make_m2_heightfield(int n = 4000);

/// Number of dynamic bodies of a scene.
uint32_t count_dynamic(const BenchScene& scene);

/// Creates every body of the scene in `world`, in order, then its joints (the world's settings
/// are the caller's: set WorldSettings::allow_sleep from scene.sleep or the benchmark flag).
/// @return the ids, index-aligned with scene.bodies; a body the world rejected gets a null id
///         (cannot happen for the scenes above within the limits, and the caller should check,
///         with World::joint_count() against scene.joints.size() for the joints).
std::vector<ObjectID> load_into(physics::World& world, const BenchScene& scene);

}  // namespace impulse::scenes
