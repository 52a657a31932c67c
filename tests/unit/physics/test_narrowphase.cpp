// Narrowphase manifolds checked against hand-computed contact points, normals and separations,
// plus randomised laws: every point lies within |separation|/2 of both surfaces, overlapping shapes
// are always reported, results are finite and deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "server/physics/convex_hull.h"
#include "server/physics/narrowphase.h"
#include "server/physics/narrowphase_detail.h"
#include "tests/support/rng.h"

namespace impulse::physics {
namespace {

constexpr float kTol = 1e-5f;      // [m]; inputs are O(1) m, so a few float ulps
constexpr float kMargin = 0.02f;   // [m], the World's default speculative margin
constexpr float kPi = 3.14159265358979f;

const Vec3 kX{1, 0, 0};
const Vec3 kY{0, 1, 0};
const Vec3 kZ{0, 0, 1};

Transform at(Vec3 p, Quat q = {}) { return Transform{p, q}; }
Quat about(Vec3 axis, float degrees) { return quat_from_axis_angle(axis, degrees * kPi / 180.0f); }

void expect_vec_near(Vec3 actual, Vec3 expected, float tol = kTol) {
  EXPECT_NEAR(actual.x, expected.x, tol);
  EXPECT_NEAR(actual.y, expected.y, tol);
  EXPECT_NEAR(actual.z, expected.z, tol);
}

Manifold run(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin = kMargin) {
  Manifold m;
  const bool hit = collide(a, ta, b, tb, margin, m);
  EXPECT_EQ(hit, m.point_count > 0);
  return m;
}

/// Index of the manifold point nearest to `p`.
int nearest_point(const Manifold& m, Vec3 p) {
  int best = 0;
  for (int i = 1; i < m.point_count; ++i) {
    if (length_squared(m.points[i].point - p) < length_squared(m.points[best].point - p)) best = i;
  }
  return best;
}

/// Expects each of `expected` to be matched by a manifold point within tol, with the separation.
void expect_points(const Manifold& m, std::initializer_list<Vec3> expected, float separation, float tol = kTol) {
  ASSERT_EQ(m.point_count, static_cast<int>(expected.size()));
  for (const Vec3 p : expected) {
    const ManifoldPoint& mp = m.points[nearest_point(m, p)];
    expect_vec_near(mp.point, p, tol);
    EXPECT_NEAR(mp.separation, separation, tol);
  }
}

std::vector<uint32_t> sorted_features(const Manifold& m) {
  std::vector<uint32_t> ids;
  for (int i = 0; i < m.point_count; ++i) ids.push_back(m.points[i].feature);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void expect_distinct_features(const Manifold& m) {
  const std::vector<uint32_t> ids = sorted_features(m);
  EXPECT_TRUE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
}

// --- compute_aabb ------------------------------------------------------------------------------

TEST(NarrowphaseAabb, Sphere) {
  const Aabb box = compute_aabb(make_sphere(0.5f), at({1, -2, 3}, about(kX, 30)));
  EXPECT_EQ(box.min, (Vec3{0.5f, -2.5f, 2.5f}));
  EXPECT_EQ(box.max, (Vec3{1.5f, -1.5f, 3.5f}));
}

TEST(NarrowphaseAabb, RotatedBoxIsTight) {
  // 45 deg about Y: x and z extents are (hx + hz) cos 45, y stays hy.
  const Aabb box = compute_aabb(make_box({1.0f, 0.5f, 0.25f}), at({1, 2, 3}, about(kY, 45)));
  const float e = (1.0f + 0.25f) * std::sqrt(0.5f);
  expect_vec_near(box.min, {1 - e, 1.5f, 3 - e}, 1e-6f);
  expect_vec_near(box.max, {1 + e, 2.5f, 3 + e}, 1e-6f);
  // Unrotated: exactly the half extents.
  const Aabb plain = compute_aabb(make_box({1.0f, 0.5f, 0.25f}), at({0, 0, 0}));
  EXPECT_EQ(plain.max, (Vec3{1.0f, 0.5f, 0.25f}));
}

TEST(NarrowphaseAabb, RotatedCapsuleIsTight) {
  // 90 deg about Z: the core runs along X, from -hh to +hh.
  const Aabb box = compute_aabb(make_capsule(0.3f, 1.0f), at({0, 1, 0}, about(kZ, 90)));
  expect_vec_near(box.min, {-1.3f, 0.7f, -0.3f}, 1e-6f);
  expect_vec_near(box.max, {1.3f, 1.3f, 0.3f}, 1e-6f);
  // 30 deg about Z: core end points (-+hh sin30, +-hh cos30).
  const Aabb tilted = compute_aabb(make_capsule(0.3f, 1.0f), at({0, 0, 0}, about(kZ, 30)));
  expect_vec_near(tilted.max, {0.5f + 0.3f, std::sqrt(0.75f) + 0.3f, 0.3f}, 1e-6f);
}

TEST(NarrowphaseAabb, PlaneIsBoundedOnlyOnAnAxisAlignedNormal) {
  const Aabb up = compute_aabb(make_plane(), at({5, 2, -1}));
  EXPECT_EQ(up.max.y, 2.0f);
  EXPECT_EQ(up.min.y, -1e18f);
  EXPECT_EQ(up.min.x, -1e18f);
  EXPECT_EQ(up.max.z, 1e18f);
  // Normal -Y (upside down): bounded below.
  const Aabb down = compute_aabb(make_plane(), at({0, 3, 0}, about(kX, 180)));
  EXPECT_EQ(down.min.y, 3.0f);
  EXPECT_EQ(down.max.y, 1e18f);
  // Normal -X (90 deg about Z): bounded on x from below.
  const Aabb side = compute_aabb(make_plane(), at({4, 0, 0}, about(kZ, 90)));
  EXPECT_EQ(side.min.x, 4.0f);
  EXPECT_EQ(side.max.x, 1e18f);
  EXPECT_EQ(side.max.y, 1e18f);
  // Tilted: unbounded everywhere.
  const Aabb tilted = compute_aabb(make_plane(), at({0, 0, 0}, about(kZ, 30)));
  EXPECT_EQ(tilted.max.y, 1e18f);
  EXPECT_EQ(tilted.min.y, -1e18f);
}

// --- spheres -------------------------------------------------------------------------------------

TEST(NarrowphaseSphere, SphereSphereOverlapSpeculativeAndConcentric) {
  const Shape s = make_sphere(0.5f);
  Manifold m = run(s, at({0, 0, 0}), s, at({0.9f, 0, 0}));
  expect_points(m, {{0.45f, 0, 0}}, -0.1f);
  expect_vec_near(m.normal, kX);
  // Gap 0.01 m within the 0.02 m margin: a speculative point; 0.03 m: none.
  m = run(s, at({0, 0, 0}), s, at({0, 0, 1.01f}));
  expect_points(m, {{0, 0, 0.505f}}, 0.01f);
  EXPECT_EQ(run(s, at({0, 0, 0}), s, at({0, 0, 1.03f})).point_count, 0);
  // Concentric: documented fallback +Y.
  m = run(s, at({1, 1, 1}), make_sphere(0.25f), at({1, 1, 1}));
  ASSERT_EQ(m.point_count, 1);
  EXPECT_EQ(m.normal, kY);
  EXPECT_NEAR(m.points[0].separation, -0.75f, kTol);
}

TEST(NarrowphaseSphere, SphereBoxFaceEdgeAndInside) {
  const Shape box = make_box({1, 1, 1});
  // Above the +Y face: box point (0, 1, 0), sphere surface (0, 0.9, 0).
  Manifold m = run(make_sphere(0.5f), at({0, 1.4f, 0}), box, at({0, 0, 0}));
  expect_points(m, {{0, 0.95f, 0}}, -0.1f);
  expect_vec_near(m.normal, -kY);
  // Off the edge x = y = 1: closest point (1, 1, 0), distance 0.2 sqrt2.
  m = run(make_sphere(0.5f), at({1.2f, 1.2f, 0}), box, at({0, 0, 0}));
  const float d = 0.2f * std::sqrt(2.0f);
  const Vec3 n{std::sqrt(0.5f), std::sqrt(0.5f), 0};
  expect_points(m, {Vec3{1, 1, 0} + n * (0.5f * (d - 0.5f))}, d - 0.5f);
  expect_vec_near(m.normal, -n);
  // Centre inside, 0.2 below the +Y face: out through +Y, separation -(0.2 + r).
  m = run(make_sphere(0.5f), at({0, 0.8f, 0}), box, at({0, 0, 0}));
  expect_points(m, {{0, 0.65f, 0}}, -0.7f);
  expect_vec_near(m.normal, -kY);
  // Centre at the centre of a cube: the documented +Y face.
  m = run(make_sphere(0.5f), at({0, 0, 0}), box, at({0, 0, 0}));
  ASSERT_EQ(m.point_count, 1);
  expect_vec_near(m.normal, -kY);
  EXPECT_NEAR(m.points[0].separation, -1.5f, kTol);
}

TEST(NarrowphaseSphere, SphereOnRotatedBoxCorner) {
  // A cube rotated 45 deg about Z has its edge at (0, sqrt2, z) on top; sphere r 0.2 at y = 1.5.
  const float top = std::sqrt(2.0f);
  const Manifold m = run(make_sphere(0.2f), at({0, 1.5f, 0.3f}), make_box({1, 1, 1}), at({0, 0, 0}, about(kZ, 45)));
  const float separation = 1.5f - 0.2f - top;
  expect_points(m, {{0, top + 0.5f * separation, 0.3f}}, separation, 2e-5f);
  expect_vec_near(m.normal, -kY, 2e-5f);
  // The same with the box moved and turned 90 deg about Y first: only the pose changes.
  const Quat q = about(kY, 90) * about(kZ, 45);
  // The top edge now runs along X through (3, sqrt2, -2).
  const Manifold moved = run(make_sphere(0.2f), at({3.3f, 1.5f, -2}), make_box({1, 1, 1}), at({3, 0, -2}, q));
  ASSERT_EQ(moved.point_count, 1);
  EXPECT_NEAR(moved.points[0].separation, separation, 2e-5f);
  expect_vec_near(moved.points[0].point, {3.3f, top + 0.5f * separation, -2}, 2e-5f);
}

TEST(NarrowphaseSphere, SphereCapsuleSideCapAndAxis) {
  const Shape capsule = make_capsule(0.3f, 1.0f);  // core y in [-1, 1]
  Manifold m = run(make_sphere(0.5f), at({0.7f, 0.5f, 0}), capsule, at({0, 0, 0}));
  expect_points(m, {{0.25f, 0.5f, 0}}, -0.1f);
  expect_vec_near(m.normal, -kX);
  m = run(make_sphere(0.5f), at({0, 1.7f, 0}), capsule, at({0, 0, 0}));
  expect_points(m, {{0, 1.25f, 0}}, -0.1f);
  expect_vec_near(m.normal, -kY);
  // Centre on the core: a unit normal perpendicular to the core, separation -(ra + rb).
  m = run(make_sphere(0.5f), at({0, 0.5f, 0}), capsule, at({0, 0, 0}));
  ASSERT_EQ(m.point_count, 1);
  EXPECT_NEAR(length(m.normal), 1.0f, 1e-6f);
  EXPECT_NEAR(m.normal.y, 0.0f, 1e-6f);
  EXPECT_NEAR(m.points[0].separation, -0.8f, kTol);
}

// --- capsules ------------------------------------------------------------------------------------

TEST(NarrowphaseCapsule, CrossingCapsulesOnePoint) {
  const Shape c = make_capsule(0.3f, 1.0f);
  // A along X, B along Z 0.5 above: cores closest at (0,0,0) and (0,0.5,0).
  const Manifold m = run(c, at({0, 0, 0}, about(kZ, 90)), c, at({0, 0.5f, 0}, about(kX, 90)));
  expect_points(m, {{0, 0.25f, 0}}, -0.1f);
  expect_vec_near(m.normal, kY);
  // Cores crossing through one point: normal along the common perpendicular of the core
  // directions, (-X) x Z = +Y (local +Y turned 90 deg about Z is -X; about X it is +Z); the
  // centres coincide, so its sign is kept. Separation -(ra + rb).
  const Manifold through = run(c, at({0, 0, 0}, about(kZ, 90)), c, at({0, 0, 0}, about(kX, 90)));
  ASSERT_EQ(through.point_count, 1);
  expect_vec_near(through.normal, kY);
  EXPECT_NEAR(through.points[0].separation, -0.6f, kTol);
}

TEST(NarrowphaseCapsule, ParallelCapsulesTwoPointsAtTheOverlapEnds) {
  const Shape c = make_capsule(0.3f, 1.0f);
  // Both along X; B shifted by 0.5 in x: cores overlap on x in [-0.5, 1].
  const Manifold m = run(c, at({0, 0, 0}, about(kZ, 90)), c, at({0.5f, 0.5f, 0}, about(kZ, 90)));
  expect_points(m, {{-0.5f, 0.25f, 0}, {1.0f, 0.25f, 0}}, -0.1f);
  expect_vec_near(m.normal, kY);
  expect_distinct_features(m);
  // Coaxial overlapping cores: no NaN, a unit normal perpendicular to the core.
  const Manifold coaxial = run(c, at({0, 0, 0}), c, at({0, 0.5f, 0}));
  ASSERT_GT(coaxial.point_count, 0);
  EXPECT_NEAR(length(coaxial.normal), 1.0f, 1e-6f);
  EXPECT_NEAR(coaxial.normal.y, 0.0f, 1e-6f);
  for (int i = 0; i < coaxial.point_count; ++i) EXPECT_NEAR(coaxial.points[i].separation, -0.6f, kTol);
}

TEST(NarrowphaseCapsule, CapsuleLyingOnBoxGivesTwoPoints) {
  const Shape box = make_box({1, 1, 1});
  const Shape c = make_capsule(0.25f, 0.5f);
  // Core along X at y = 1.2 over the +Y face (y = 1): separation 0.2 - 0.25.
  Manifold m = run(c, at({0, 1.2f, 0.3f}, about(kZ, 90)), box, at({0, 0, 0}));
  expect_points(m, {{-0.5f, 0.975f, 0.3f}, {0.5f, 0.975f, 0.3f}}, -0.05f);
  expect_vec_near(m.normal, -kY);
  expect_distinct_features(m);
  // Overhanging the x = 1 edge: the core is clipped to the face, points at x = 0.5 and 1.
  m = run(c, at({1.0f, 1.2f, 0}, about(kZ, 90)), box, at({0, 0, 0}));
  expect_points(m, {{0.5f, 0.975f, 0}, {1.0f, 0.975f, 0}}, -0.05f);
  // Swapped order (box, capsule): same points, flipped normal.
  const Manifold swapped = run(box, at({0, 0, 0}), c, at({1.0f, 1.2f, 0}, about(kZ, 90)));
  expect_points(swapped, {{0.5f, 0.975f, 0}, {1.0f, 0.975f, 0}}, -0.05f);
  expect_vec_near(swapped.normal, kY);
}

TEST(NarrowphaseCapsule, CapsuleStandingOnBoxGivesOnePoint) {
  const Shape c = make_capsule(0.25f, 0.5f);
  // Lower core end at y = 1.2, 0.2 above the face: one point under it.
  const Manifold m = run(c, at({0.2f, 1.7f, 0}), make_box({1, 1, 1}), at({0, 0, 0}));
  expect_points(m, {{0.2f, 0.975f, 0}}, -0.05f);
  expect_vec_near(m.normal, -kY);
}

TEST(NarrowphaseCapsule, CapsuleBesideBoxEdgeAndCoreInsideBox) {
  const Shape box = make_box({1, 1, 1});
  // Core along Z at (1.2, 1.2): closest to the edge x = y = 1, diagonal normal, one point.
  Manifold m = run(make_capsule(0.3f, 0.5f), at({1.2f, 1.2f, 0}, about(kX, 90)), box, at({0, 0, 0}));
  const float d = 0.2f * std::sqrt(2.0f);
  ASSERT_EQ(m.point_count, 1);
  EXPECT_NEAR(m.points[0].separation, d - 0.3f, kTol);
  expect_vec_near(m.normal, {-std::sqrt(0.5f), -std::sqrt(0.5f), 0});
  // Core along X at y = 0.9, inside the box: pushed out through +Y, 2 points, separation
  // (0.9 - 1) - r.
  m = run(make_capsule(0.25f, 0.5f), at({0, 0.9f, 0}, about(kZ, 90)), box, at({0, 0, 0}));
  ASSERT_EQ(m.point_count, 2);
  expect_vec_near(m.normal, -kY);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(m.points[i].separation, -0.35f, kTol);
}

// --- planes ------------------------------------------------------------------------------------

TEST(NarrowphasePlane, PlaneSphereIncludingRotatedPlane) {
  Manifold m = run(make_plane(), at({0, 0, 0}), make_sphere(0.5f), at({1, 0.4f, 2}));
  expect_points(m, {{1, -0.05f, 2}}, -0.1f);
  EXPECT_EQ(m.normal, kY);
  // Plane turned 90 deg about Z: outward normal -X, through x = 3.
  m = run(make_plane(), at({3, 0, 0}, about(kZ, 90)), make_sphere(0.5f), at({2.6f, 0.7f, 0}));
  expect_points(m, {{3.05f, 0.7f, 0}}, -0.1f);
  expect_vec_near(m.normal, -kX, 1e-6f);
  // Beyond the margin: nothing.
  EXPECT_EQ(run(make_plane(), at({0, 0, 0}), make_sphere(0.5f), at({0, 0.53f, 0})).point_count, 0);
}

TEST(NarrowphasePlane, PlaneBoxFlatAndOnAnEdge) {
  const Shape box = make_box({0.5f, 0.5f, 0.5f});
  Manifold m = run(make_plane(), at({0, 0, 0}), box, at({0, 0.49f, 0}));
  expect_points(m, {{0.5f, -0.005f, 0.5f}, {-0.5f, -0.005f, 0.5f}, {0.5f, -0.005f, -0.5f}, {-0.5f, -0.005f, -0.5f}},
                -0.01f);
  expect_distinct_features(m);
  // On its edge (45 deg about Z): the two vertices at x = 0, z = +-0.5.
  const float r = std::sqrt(0.5f);
  m = run(make_plane(), at({0, 0, 0}), box, at({0, r - 0.01f, 0}, about(kZ, 45)));
  expect_points(m, {{0, -0.005f, 0.5f}, {0, -0.005f, -0.5f}}, -0.01f, 2e-5f);
  // A thin plate: all 8 vertices within the margin, reduced to 4 with the deepest kept.
  m = run(make_plane(), at({0, 0, 0}), make_box({0.5f, 0.005f, 0.5f}), at({0, 0.004f, 0}, about(kX, 0.1f)));
  ASSERT_EQ(m.point_count, 4);
  float deepest = 1.0f;
  for (int i = 0; i < m.point_count; ++i) deepest = std::min(deepest, m.points[i].separation);
  const float expected_deepest = 0.004f - 0.005f * std::cos(0.1f * kPi / 180) - 0.5f * std::sin(0.1f * kPi / 180);
  EXPECT_NEAR(deepest, expected_deepest, 1e-6f);
  expect_distinct_features(m);
}

TEST(NarrowphasePlane, PlaneCapsuleLyingAndStanding) {
  const Shape c = make_capsule(0.25f, 0.5f);
  Manifold m = run(make_plane(), at({0, 0, 0}), c, at({0, 0.2f, 0}, about(kZ, 90)));
  expect_points(m, {{-0.5f, -0.025f, 0}, {0.5f, -0.025f, 0}}, -0.05f);
  expect_distinct_features(m);
  m = run(make_plane(), at({0, 0, 0}), c, at({0, 0.7f, 0}));
  expect_points(m, {{0, -0.025f, 0}}, -0.05f);
  // Plane-plane: never a contact.
  EXPECT_EQ(run(make_plane(), at({0, 0, 0}), make_plane(), at({0, 0, 0})).point_count, 0);
}

// --- box-box -----------------------------------------------------------------------------------

const Shape kGround = make_box({2.0f, 0.5f, 2.0f});  // top face at y = 0.5
const Shape kCube = make_box({0.5f, 0.5f, 0.5f});

TEST(NarrowphaseBoxBox, FaceFaceRestingGivesTheFourCorners) {
  // Cube penetrating 0.01 m; bottom corners at (0.3 +- 0.5, 0.49, -0.2 +- 0.5).
  const Manifold m = run(kGround, at({0, 0, 0}), kCube, at({0.3f, 0.99f, -0.2f}));
  expect_points(m, {{-0.2f, 0.495f, -0.7f}, {0.8f, 0.495f, -0.7f}, {-0.2f, 0.495f, 0.3f}, {0.8f, 0.495f, 0.3f}},
                -0.01f);
  EXPECT_EQ(m.normal, kY);
  expect_distinct_features(m);
  // Cube as A on top: A's bottom face is the reference (A preferred on ties), the ground's top face
  // is clipped to it: the same four corners, normal -Y.
  const Manifold flipped = run(kCube, at({0.3f, 0.99f, -0.2f}), kGround, at({0, 0, 0}));
  expect_points(flipped,
                {{-0.2f, 0.495f, -0.7f}, {0.8f, 0.495f, -0.7f}, {-0.2f, 0.495f, 0.3f}, {0.8f, 0.495f, 0.3f}}, -0.01f);
  EXPECT_EQ(flipped.normal, -kY);
}

TEST(NarrowphaseBoxBox, RotatedFaceFaceOctagonReducedToTheLargestSquare) {
  // Two unit cubes, the top one turned 45 deg about Y: the overlap is a regular octagon with
  // vertices (+-0.5, +-(sqrt(1/2) - 0.5)) and permutations, circumradius^2 R2 = 0.25 + (sqrt(1/2)
  // - 0.5)^2. The best 4 of its 8 vertices form a square of area 2 R2.
  const Manifold m = run(kCube, at({0, 0, 0}), kCube, at({0, 0.99f, 0}, about(kY, 45)));
  ASSERT_EQ(m.point_count, 4);
  EXPECT_EQ(m.normal, kY);
  const float c = std::sqrt(0.5f);
  for (int i = 0; i < 4; ++i) {
    const Vec3 p = m.points[i].point;
    EXPECT_NEAR(p.y, 0.495f, kTol);  // on the contact plane, midway
    EXPECT_NEAR(m.points[i].separation, -0.01f, kTol);
    // An octagon vertex: on the square's boundary and on the rotated square's boundary.
    EXPECT_NEAR(std::max(std::fabs(p.x), std::fabs(p.z)), 0.5f, 1e-5f);
    EXPECT_NEAR(std::fabs(p.x) + std::fabs(p.z), c, 1e-5f);
  }
  // Area of the quad (the points are the reduction's order: deepest, farthest, triangle, fourth;
  // compute the convex area as half the diagonal cross product of the sorted-by-angle points).
  std::array<Vec3, 4> q{m.points[0].point, m.points[1].point, m.points[2].point, m.points[3].point};
  std::sort(q.begin(), q.end(), [](Vec3 a, Vec3 b) { return std::atan2(a.z, a.x) < std::atan2(b.z, b.x); });
  const float area = 0.5f * std::fabs(cross(q[2] - q[0], q[3] - q[1]).y);
  const float r2 = 0.25f + (c - 0.5f) * (c - 0.5f);
  EXPECT_NEAR(area, 2.0f * r2, 1e-4f);
  expect_distinct_features(m);
}

TEST(NarrowphaseBoxBox, BoxOnItsEdgeGivesTwoPoints) {
  // Cube turned 30 deg about Z: its lowest edge is local (-0.5, -0.5, z), at world
  // x = -0.5 cos30 + 0.5 sin30, y = -0.5 sin30 - 0.5 cos30 relative to its centre.
  const float c30 = std::cos(30 * kPi / 180);
  const float s30 = std::sin(30 * kPi / 180);
  const float ex = -0.5f * c30 + 0.5f * s30;
  const float ey = -0.5f * s30 - 0.5f * c30;
  const float cy = 0.5f - ey - 0.01f;  // edge 0.01 m into the ground's top face
  const Manifold m = run(kGround, at({0, 0, 0}), kCube, at({0, cy, 0}, about(kZ, 30)));
  expect_points(m, {{ex, 0.495f, 0.5f}, {ex, 0.495f, -0.5f}}, -0.01f, 2e-5f);
  EXPECT_EQ(m.normal, kY);
  expect_distinct_features(m);
  // Swapped arguments: the ground's face is now B's and wins clearly; same points, normal -Y.
  const Manifold swapped = run(kCube, at({0, cy, 0}, about(kZ, 30)), kGround, at({0, 0, 0}));
  expect_points(swapped, {{ex, 0.495f, 0.5f}, {ex, 0.495f, -0.5f}}, -0.01f, 2e-5f);
  EXPECT_EQ(swapped.normal, -kY);
}

TEST(NarrowphaseBoxBox, BoxOnItsCornerGivesOnePoint) {
  // Turned 30 deg about Z then 25 deg about X: one corner is lowest by far.
  const Quat q = about(kX, 25) * about(kZ, 30);
  Vec3 lowest{0, 1e9f, 0};
  for (int v = 0; v < 8; ++v) {
    const Vec3 corner{(v & 1) ? -0.5f : 0.5f, (v & 2) ? -0.5f : 0.5f, (v & 4) ? -0.5f : 0.5f};
    const Vec3 w = rotate(q, corner);
    if (w.y < lowest.y) lowest = w;
  }
  const float cy = 0.5f - lowest.y - 0.01f;
  const Manifold m = run(kGround, at({0.1f, 0, 0}), kCube, at({0.1f, cy, 0.2f}, q));
  expect_points(m, {{0.1f + lowest.x, 0.495f, 0.2f + lowest.z}}, -0.01f, 2e-5f);
  EXPECT_EQ(m.normal, kY);
}

TEST(NarrowphaseBoxBox, CrossedEdgesGiveOnePointAtTheirCrossing) {
  // A turned 45 deg about X: top edge along X at y = sqrt(1/2), z = 0. B turned 45 deg about Z:
  // bottom edge along Z at x = B.x, y = B.y - sqrt(1/2). They cross at (0.1, ., 0), 0.02 deep.
  const float r = std::sqrt(0.5f);
  const Manifold m = run(kCube, at({0, 0, 0}, about(kX, 45)), kCube, at({0.1f, 2 * r - 0.02f, 0.2f}, about(kZ, 45)));
  expect_points(m, {{0.1f, r - 0.01f, 0}}, -0.02f, 2e-5f);
  expect_vec_near(m.normal, kY, 1e-5f);
  EXPECT_NE(m.points[0].feature & (1u << 23), 0u);  // an edge-edge feature
}

TEST(NarrowphaseBoxBox, SpeculativeWithinMarginAndNothingBeyond) {
  Manifold m = run(kGround, at({0, 0, 0}), kCube, at({0, 1.01f, 0}));
  expect_points(m, {{0.5f, 0.505f, 0.5f}, {-0.5f, 0.505f, 0.5f}, {0.5f, 0.505f, -0.5f}, {-0.5f, 0.505f, -0.5f}},
                0.01f);
  EXPECT_EQ(run(kGround, at({0, 0, 0}), kCube, at({0, 1.03f, 0})).point_count, 0);
  // Beyond the margin sideways too.
  EXPECT_EQ(run(kGround, at({0, 0, 0}), kCube, at({2.53f, 0.5f, 0})).point_count, 0);
}

TEST(NarrowphaseBoxBox, SlightlyTiltedRestingBoxKeepsTheFaceAxis) {
  // Tilted 0.002 rad about a diagonal: several edge axes are within float noise of the face
  // axis; the bias must keep A's +Y face (normal exactly A's axis, 4 points).
  const Vec3 diag{std::sqrt(0.5f), 0, std::sqrt(0.5f)};
  for (const float tilt : {0.0005f, 0.002f, -0.002f}) {
    const Manifold m = run(kGround, at({0, 0, 0}), kCube, at({0.2f, 0.99f, 0}, quat_from_axis_angle(diag, tilt)));
    EXPECT_EQ(m.point_count, 4) << "tilt " << tilt;
    EXPECT_EQ(m.normal, kY) << "tilt " << tilt;
  }
  // Against a same-size cube too (the two face axes tie).
  const Manifold m = run(kCube, at({0, 0, 0}), kCube, at({0.1f, 0.99f, 0}, quat_from_axis_angle(diag, 0.002f)));
  EXPECT_EQ(m.point_count, 4);
  EXPECT_EQ(m.normal, kY);
}

TEST(NarrowphaseBoxBox, FeatureIdsStableUnderSmallMotion) {
  struct Case {
    Transform tb;
  };
  const Case cases[] = {
      {at({0.3f, 0.99f, -0.2f})},
      {at({0, 0.99f, 0})},  // flush: incident vertices exactly on the reference side planes
      {at({0, 0.99f, 0}, about(kY, 45))},
      {at({0, 0.5f + 0.5f * std::cos(30 * kPi / 180) + 0.5f * std::sin(30 * kPi / 180) - 0.01f, 0}, about(kZ, 30))},
  };
  for (const Case& c : cases) {
    const Shape& bottom = kCube;
    const Manifold before = run(bottom, at({0, 0, 0}), kCube, c.tb);
    Transform moved = c.tb;
    moved.position += Vec3{0.001f, -0.001f, 0.001f};  // 1 mm on each axis
    const Manifold after = run(bottom, at({0, 0, 0}), kCube, moved);
    ASSERT_GT(before.point_count, 0);
    EXPECT_EQ(sorted_features(before), sorted_features(after));
    expect_distinct_features(before);
  }
}

// --- reduction, dispatch ---------------------------------------------------------------------------

TEST(NarrowphaseReduce, KeepsDeepestAndMaximisesArea) {
  // 8 points on a circle of radius 1 (every 45 deg) in the XZ plane; point 5 is the deepest.
  Vec3 pts[8];
  float seps[8];
  for (int i = 0; i < 8; ++i) {
    const float a = static_cast<float>(i) * kPi / 4;
    pts[i] = {std::cos(a), 0, std::sin(a)};
    seps[i] = i == 5 ? -0.03f : -0.01f;
  }
  int sel[kMaxManifoldPoints];
  ASSERT_EQ(detail::reduce_manifold(pts, seps, 8, kY, sel), 4);
  EXPECT_EQ(sel[0], 5);
  EXPECT_EQ(sel[1], 1);  // diametrically opposite
  // Then the two points at 90 deg from that diameter: 3 and 7 (3 first: lowest index on the tie).
  EXPECT_EQ(sel[2], 3);
  EXPECT_EQ(sel[3], 7);
  // Degenerate input: coincident points keep 1, collinear keep 2.
  Vec3 same[6];
  float zero[6] = {};
  for (Vec3& p : same) p = {1, 2, 3};
  EXPECT_EQ(detail::reduce_manifold(same, zero, 6, kY, sel), 1);
  Vec3 line[6];
  for (int i = 0; i < 6; ++i) line[i] = {static_cast<float>(i), 0, 0};
  EXPECT_EQ(detail::reduce_manifold(line, zero, 6, kY, sel), 2);
  EXPECT_EQ(sel[0], 0);
  EXPECT_EQ(sel[1], 5);
}

TEST(NarrowphaseDispatch, SwappedPairsFlipTheNormalAndKeepPointsAndIds) {
  const Shape shapes[] = {make_sphere(0.4f), make_box({0.5f, 0.3f, 0.4f}), make_capsule(0.3f, 0.5f)};
  const Transform ta = at({0, 0, 0}, about(kZ, 20));
  const Transform tb = at({0.3f, 0.6f, 0.1f}, about(kX, 35));
  for (const Shape& a : shapes) {
    for (const Shape& b : shapes) {
      if (a.kind == b.kind) continue;  // same-kind pairs are not swapped by the table
      const Manifold ab = run(a, ta, b, tb);
      const Manifold ba = run(b, tb, a, ta);
      ASSERT_GT(ab.point_count, 0);
      ASSERT_EQ(ab.point_count, ba.point_count);
      EXPECT_EQ(ab.normal, -ba.normal);
      for (int i = 0; i < ab.point_count; ++i) {
        EXPECT_EQ(ab.points[i].point, ba.points[i].point);
        EXPECT_EQ(ab.points[i].separation, ba.points[i].separation);
        EXPECT_EQ(ab.points[i].feature, ba.points[i].feature);
      }
    }
  }
  // Plane as B: flipped to (plane, shape), normal = minus the plane's normal.
  const Manifold m = run(make_sphere(0.5f), at({0, 0.4f, 0}), make_plane(), at({0, 0, 0}));
  ASSERT_EQ(m.point_count, 1);
  EXPECT_EQ(m.normal, -kY);
  // A kind outside the table: no contact.
  Shape bad = make_sphere(1);
  bad.kind = ShapeKind::Count;
  Manifold none;
  EXPECT_FALSE(collide(bad, ta, make_sphere(1), ta, kMargin, none));
  EXPECT_EQ(none.point_count, 0);
}

// --- randomised laws -------------------------------------------------------------------------------

/// Signed distance from p to the shape's surface [m], negative inside.
/// Closest point of triangle abc to p (Ericson, "Real-Time Collision Detection", §5.1.5).
Vec3 closest_on_triangle(Vec3 p, Vec3 a, Vec3 b, Vec3 c) {
  const Vec3 ab = b - a, ac = c - a, ap = p - a;
  const float d1 = dot(ab, ap), d2 = dot(ac, ap);
  if (d1 <= 0 && d2 <= 0) return a;
  const Vec3 bp = p - b;
  const float d3 = dot(ab, bp), d4 = dot(ac, bp);
  if (d3 >= 0 && d4 <= d3) return b;
  const float vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) return a + ab * (d1 / (d1 - d3));
  const Vec3 cp = p - c;
  const float d5 = dot(ab, cp), d6 = dot(ac, cp);
  if (d6 >= 0 && d5 <= d6) return c;
  const float vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) return a + ac * (d2 / (d2 - d6));
  const float va = d3 * d6 - d5 * d4;
  if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) return b + (c - b) * ((d4 - d3) / ((d4 - d3) + (d5 - d6)));
  const float denom = 1.0f / (va + vb + vc);
  return a + ab * (vb * denom) + ac * (vc * denom);
}

float signed_distance(const Shape& s, const Transform& t, Vec3 p) {
  switch (s.kind) {
    case ShapeKind::Sphere:
      return length(p - t.position) - s.radius;
    case ShapeKind::Box: {
      const Vec3 q = abs(inverse_rotate(t.rotation, p - t.position)) - s.half_extents;
      const float inside = std::min(std::max(q.x, std::max(q.y, q.z)), 0.0f);
      return length(max(q, Vec3{})) + inside;
    }
    case ShapeKind::Capsule: {
      const detail::Segment seg = detail::capsule_segment(s, t);
      const Vec3 d = seg.p1 - seg.p0;
      const float dd = dot(d, d);
      const float u = dd > 0 ? std::clamp(dot(p - seg.p0, d) / dd, 0.0f, 1.0f) : 0.0f;
      return length(p - (seg.p0 + d * u)) - s.radius;
    }
    case ShapeKind::Plane:
      return dot(rotate(t.rotation, kY), p - t.position);
    case ShapeKind::Hull: {
      // Inside: the nearest face plane; outside: the nearest point of the face triangles.
      const ConvexHull& h = *s.hull;
      const Vec3 l = inverse_rotate(t.rotation, p - t.position);
      float inside = -1e30f;
      for (const HullPlane& pl : h.planes) inside = std::max(inside, dot(pl.normal, l) - pl.offset);
      if (inside <= 0.0f) return inside;
      float best = 1e30f;
      for (const HullFace& f : h.faces) {
        const Vec3 a = h.vertices[h.face_vertices[f.first]];
        for (int i = 1; i + 1 < f.count; ++i) {
          const Vec3 q = closest_on_triangle(l, a, h.vertices[h.face_vertices[f.first + i]],
                                             h.vertices[h.face_vertices[f.first + i + 1]]);
          best = std::min(best, length(l - q));
        }
      }
      return best;
    }
    case ShapeKind::Cylinder: {
      const Vec3 l = inverse_rotate(t.rotation, p - t.position);
      const float radial = std::sqrt(l.x * l.x + l.z * l.z) - s.radius;
      const float axial = std::fabs(l.y) - s.half_height;
      const float outside = length(Vec3{std::max(radial, 0.0f), std::max(axial, 0.0f), 0.0f});
      return outside + std::min(std::max(radial, axial), 0.0f);
    }
    case ShapeKind::Mesh:  // not solids: their tests check their contacts (test_triangle_mesh.cpp, test_heightfield.cpp)
    case ShapeKind::HeightField:
    case ShapeKind::Count:
      break;
  }
  return 0;
}

/// Random convex hulls for the property tests (the narrowphase needs no World).
const std::vector<ConvexHull>& hull_pool() {
  static const std::vector<ConvexHull> pool = [] {
    std::vector<ConvexHull> out;
    test::Rng rng(4242);
    for (int k = 0; k < 16; ++k) {
      std::vector<Vec3> points;
      const Vec3 size{rng.uniform(0.08f, 0.6f), rng.uniform(0.08f, 0.6f), rng.uniform(0.08f, 0.6f)};
      const int n = 4 + static_cast<int>(rng.below(40));
      for (int i = 0; i < n; ++i) {
        points.push_back(mul(size, Vec3{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)}));
      }
      HullBuild b = build_convex_hull(points);
      if (b.ok()) out.push_back(std::move(b.hull));
    }
    return out;
  }();
  return pool;
}

Shape random_shape(test::Rng& rng, bool allow_plane, bool allow_hull = false, bool allow_cylinder = false) {
  if (allow_cylinder && rng.below(2) == 0) return make_cylinder(rng.uniform(0.05f, 0.5f), rng.uniform(0.02f, 0.6f));
  if (allow_hull && rng.below(2) == 0) {
    const auto& pool = hull_pool();
    return make_hull(pool[rng.below(static_cast<uint32_t>(pool.size()))]);
  }
  const uint32_t kind = rng.below(allow_plane ? 4 : 3);
  if (kind == 0) return make_sphere(rng.uniform(0.1f, 0.6f));
  if (kind == 1) return make_box({rng.uniform(0.05f, 0.7f), rng.uniform(0.05f, 0.7f), rng.uniform(0.05f, 0.7f)});
  if (kind == 2) return make_capsule(rng.uniform(0.05f, 0.4f), rng.uniform(0.0f, 0.7f));
  return make_plane();
}

Transform random_pose(test::Rng& rng, float spread) {
  const Quat q = normalize(Quat{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)});
  return at({rng.uniform(-spread, spread), rng.uniform(-spread, spread), rng.uniform(-spread, spread)}, q);
}

// Laws every pair obeys: unit normal, distinct features, points midway between the surfaces
// (within |separation| / 2 of each), overlapping shapes reported as penetrating, and the same
// inputs giving bit-identical output. `with_hulls`: half the shapes are random convex hulls;
// `with_cylinders`: half are cylinders (and a quarter hulls when both).
void check_random_pairs(uint32_t seed, bool with_hulls, bool with_cylinders = false) {
  test::Rng rng(seed);
  constexpr int kPairs = 20000;
  constexpr float kSurfaceTol = 2e-4f;  // [m] float noise at ~1 m plus the tilt of near-parallel pairs
  int hits = 0;
  int overlaps_found = 0;
  for (int n = 0; n < kPairs; ++n) {
    const Shape a = random_shape(rng, true, with_hulls, with_cylinders);
    const Shape b = random_shape(rng, false, with_hulls, with_cylinders);
    const Transform ta = random_pose(rng, 0.8f);
    const Transform tb = random_pose(rng, 0.8f);
    Manifold m;
    const bool hit = collide(a, ta, b, tb, kMargin, m);
    ASSERT_EQ(hit, m.point_count > 0);
    ASSERT_GE(m.point_count, 0);
    ASSERT_LE(m.point_count, kMaxManifoldPoints);
    float min_sep = 1e9f;
    if (hit) {
      ++hits;
      ASSERT_TRUE(is_finite(m.normal));
      ASSERT_NEAR(length(m.normal), 1.0f, 1e-4f) << "pair " << n;
      expect_distinct_features(m);
      for (int i = 0; i < m.point_count; ++i) {
        const ManifoldPoint& p = m.points[i];
        ASSERT_TRUE(is_finite(p.point));
        ASSERT_TRUE(std::isfinite(p.separation));
        EXPECT_LE(p.separation, kMargin + 1e-6f);
        min_sep = std::min(min_sep, p.separation);
        // The point is |separation| / 2 from a surface point of each shape. A cylinder pair's
        // single point where no features clip (rim against rim, edge or vertex) lies between the
        // witnesses of its rounded cores, whose rims sit up to 29 % of the rounding inside the
        // sharp ones: that much more is allowed there.
        const bool rim_point = (a.kind == ShapeKind::Cylinder || b.kind == ShapeKind::Cylinder) && m.point_count == 1 &&
                               (p.feature & 0xFFFFu) == 0x5800u;
        const float half = 0.5f * std::fabs(p.separation) + kSurfaceTol + (rim_point ? 0.3f * kCylinderRounding : 0.0f);
        EXPECT_LE(signed_distance(a, ta, p.point), half) << "pair " << n << " kinds " << int(a.kind) << ","
                                                         << int(b.kind) << " sep " << p.separation << " feature "
                                                         << std::hex << p.feature << std::dec << " of " << m.point_count;
        EXPECT_LE(signed_distance(b, tb, p.point), half) << "pair " << n << " kinds " << int(a.kind) << ","
                                                         << int(b.kind) << " sep " << p.separation << " feature "
                                                         << std::hex << p.feature << std::dec << " of " << m.point_count;
      }
    }
    // Law: shapes that share an interior point are reported, penetrating. Sample B's AABB.
    const Aabb box = compute_aabb(b, tb);
    bool overlap = false;
    for (int s = 0; s < 32 && !overlap; ++s) {
      const Vec3 p{rng.uniform(box.min.x, box.max.x), rng.uniform(box.min.y, box.max.y),
                   rng.uniform(box.min.z, box.max.z)};
      overlap = signed_distance(a, ta, p) < -1e-3f && signed_distance(b, tb, p) < -1e-3f;
    }
    if (overlap) {
      ++overlaps_found;
      EXPECT_TRUE(hit) << "pair " << n << " kinds " << int(a.kind) << "," << int(b.kind);
      EXPECT_LT(min_sep, 0.0f) << "pair " << n << " kinds " << int(a.kind) << "," << int(b.kind);
    }
    // Same inputs, bit-identical output.
    Manifold again;
    collide(a, ta, b, tb, kMargin, again);
    ASSERT_EQ(std::memcmp(&m, &again, sizeof(Manifold)), 0);
  }
  // The sampling actually exercised contacts.
  EXPECT_GT(hits, kPairs / 10);
  EXPECT_GT(overlaps_found, kPairs / 20);
}

TEST(NarrowphaseProperties, RandomPairsAreConsistent) { check_random_pairs(20240601, false); }
TEST(NarrowphaseProperties, RandomPairsWithHullsAreConsistent) { check_random_pairs(20261129, true); }
TEST(NarrowphaseProperties, RandomPairsWithCylindersAreConsistent) { check_random_pairs(20261130, true, true); }

TEST(NarrowphaseProperties, SameKindPairsAreSymmetric) {
  // Sphere-sphere and capsule-capsule are computed independently in each order: same separation
  // and opposite normal. Box-box may pick the other box's face on near-ties, so only its deepest
  // separation is compared, and only when not within the face tolerance.
  test::Rng rng(77);
  const ShapeKind kinds[] = {ShapeKind::Sphere, ShapeKind::Capsule, ShapeKind::Box};
  for (int n = 0; n < 6000; ++n) {
    Shape a;
    Shape b;
    do {
      a = random_shape(rng, false);
    } while (a.kind != kinds[n % 3]);
    do {
      b = random_shape(rng, false);
    } while (b.kind != kinds[n % 3]);
    const Transform ta = random_pose(rng, 0.6f);
    const Transform tb = random_pose(rng, 0.6f);
    Manifold ab;
    Manifold ba;
    const bool hit_ab = collide(a, ta, b, tb, kMargin, ab);
    const bool hit_ba = collide(b, tb, a, ta, kMargin, ba);
    auto deepest = [](const Manifold& m) {
      float s = 1e9f;
      for (int i = 0; i < m.point_count; ++i) s = std::min(s, m.points[i].separation);
      return s;
    };
    if (a.kind == ShapeKind::Box) {
      if (hit_ab && hit_ba && ab.point_count == 1 && ba.point_count == 1) {
        EXPECT_NEAR(deepest(ab), deepest(ba), 1e-4f);  // both the edge-edge axis
      }
      continue;
    }
    ASSERT_EQ(hit_ab, hit_ba) << "pair " << n;
    if (!hit_ab) continue;
    EXPECT_NEAR(deepest(ab), deepest(ba), 1e-4f) << "pair " << n;
    if (ab.point_count == 1 && ba.point_count == 1) expect_vec_near(ab.normal, -ba.normal, 1e-3f);
  }
}

}  // namespace
}  // namespace impulse::physics
