// Narrowphase contacts checked against hand-computed closed forms, plus the separation law:
// moving B by normal * depth leaves the shapes touching, a hair further separates them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "server/physics/narrowphase.h"

namespace impulse::physics {
namespace {

constexpr float kTol = 1e-5f;  // [m]; inputs are O(1) m, so a few float ulps

void expect_vec_near(Vec3 actual, Vec3 expected, float tol = kTol) {
  EXPECT_NEAR(actual.x, expected.x, tol);
  EXPECT_NEAR(actual.y, expected.y, tol);
  EXPECT_NEAR(actual.z, expected.z, tol);
}

void expect_unit(Vec3 n) {
  ASSERT_TRUE(is_finite(n));
  EXPECT_NEAR(length(n), 1.0f, 1e-6f);
}

/// collide() in both orders: same hit, same depth and point, opposite normals.
ContactPoint collide_both_ways(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb) {
  ContactPoint ab;
  ContactPoint ba;
  const bool hit_ab = collide(a, pa, b, pb, ab);
  const bool hit_ba = collide(b, pb, a, pa, ba);
  EXPECT_EQ(hit_ab, hit_ba);
  if (hit_ab && hit_ba) {
    EXPECT_NEAR(ab.depth, ba.depth, kTol);
    expect_vec_near(ab.point, ba.point);
  }
  return ab;
}

// --- compute_aabb ------------------------------------------------------------------------------

TEST(Narrowphase, ComputeAabbSphere) {
  const Aabb box = compute_aabb(make_sphere(0.5f), Vec3{1, -2, 3});
  EXPECT_EQ(box.min, (Vec3{0.5f, -2.5f, 2.5f}));
  EXPECT_EQ(box.max, (Vec3{1.5f, -1.5f, 3.5f}));
  EXPECT_LT(box.min.x, box.max.x);
  EXPECT_LT(box.min.y, box.max.y);
  EXPECT_LT(box.min.z, box.max.z);
}

TEST(Narrowphase, ComputeAabbBox) {
  const Aabb box = compute_aabb(make_box(Vec3{1, 2, 0.25f}), Vec3{-1, 0, 4});
  EXPECT_EQ(box.min, (Vec3{-2, -2, 3.75f}));
  EXPECT_EQ(box.max, (Vec3{0, 2, 4.25f}));
  EXPECT_LT(box.min.x, box.max.x);
  EXPECT_LT(box.min.y, box.max.y);
  EXPECT_LT(box.min.z, box.max.z);
}

// --- sphere-sphere -------------------------------------------------------------------------------

TEST(Narrowphase, SphereSphereSeparated) {
  ContactPoint c;
  EXPECT_FALSE(collide_sphere_sphere(make_sphere(1), Vec3{}, make_sphere(0.5f), Vec3{1.6f, 0, 0}, c));
  EXPECT_FALSE(collide(make_sphere(1), Vec3{}, make_sphere(0.5f), Vec3{0, 0, -1.6f}, c));
}

TEST(Narrowphase, SphereSphereTouching) {
  ContactPoint c;
  ASSERT_TRUE(collide_sphere_sphere(make_sphere(1), Vec3{}, make_sphere(0.5f), Vec3{1.5f, 0, 0}, c));
  EXPECT_EQ(c.depth, 0.0f);
  expect_vec_near(c.normal, Vec3{1, 0, 0});
  expect_vec_near(c.point, Vec3{1, 0, 0});
}

TEST(Narrowphase, SphereSphereOverlapping) {
  // Centres 1 m apart along (0.6, 0.8, 0), radii 1 and 0.5: depth 0.5; surfaces at 1 and 0.5
  // along the normal, so the point is pa + 0.75 n.
  const Vec3 pa{1, 2, 3};
  const Vec3 n{0.6f, 0.8f, 0.0f};
  const ContactPoint c = collide_both_ways(make_sphere(1), pa, make_sphere(0.5f), pa + n);
  expect_unit(c.normal);
  expect_vec_near(c.normal, n);
  EXPECT_NEAR(c.depth, 0.5f, kTol);
  expect_vec_near(c.point, pa + n * 0.75f);
}

TEST(Narrowphase, SphereSphereDeep) {
  ContactPoint c;
  ASSERT_TRUE(collide(make_sphere(1), Vec3{}, make_sphere(0.5f), Vec3{0, 0, -0.1f}, c));
  expect_vec_near(c.normal, Vec3{0, 0, -1});
  EXPECT_NEAR(c.depth, 1.4f, kTol);
  expect_vec_near(c.point, Vec3{0, 0, -0.3f});  // midway between z = -1 (A) and z = 0.4 (B)
}

TEST(Narrowphase, SphereSphereConcentricFallsBackToUp) {
  ContactPoint c;
  ASSERT_TRUE(collide(make_sphere(1), Vec3{5, 5, 5}, make_sphere(0.5f), Vec3{5, 5, 5}, c));
  expect_unit(c.normal);
  EXPECT_EQ(c.normal, (Vec3{0, 1, 0}));
  EXPECT_NEAR(c.depth, 1.5f, kTol);
}

// --- sphere-box and box-sphere -------------------------------------------------------------------

const Shape kBall = make_sphere(0.5f);
const Shape kSlab = make_box(Vec3{1, 2, 3});

TEST(Narrowphase, SphereBoxSeparated) {
  ContactPoint c;
  EXPECT_FALSE(collide_sphere_box(kBall, Vec3{1.6f, 0, 0}, kSlab, Vec3{}, c));
  // Near a corner the sphere is outside although its AABB overlaps the box.
  EXPECT_FALSE(collide(kBall, Vec3{1.4f, 2.4f, 3.0f}, kSlab, Vec3{}, c));
  EXPECT_FALSE(collide(kSlab, Vec3{}, kBall, Vec3{1.4f, 2.4f, 3.0f}, c));
}

TEST(Narrowphase, SphereBoxTouching) {
  ContactPoint c;
  ASSERT_TRUE(collide_sphere_box(kBall, Vec3{1.5f, 0, 0}, kSlab, Vec3{}, c));
  EXPECT_EQ(c.depth, 0.0f);
  expect_vec_near(c.normal, Vec3{-1, 0, 0});  // from the sphere towards the box
  expect_vec_near(c.point, Vec3{1, 0, 0});
}

TEST(Narrowphase, SphereBoxOverlappingFace) {
  const ContactPoint c = collide_both_ways(kBall, Vec3{1.25f, 0.5f, 0}, kSlab, Vec3{});
  expect_vec_near(c.normal, Vec3{-1, 0, 0});
  EXPECT_NEAR(c.depth, 0.25f, kTol);
  expect_vec_near(c.point, Vec3{0.875f, 0.5f, 0});  // between x = 0.75 (sphere) and x = 1 (face)
}

TEST(Narrowphase, SphereBoxOverlappingEdge) {
  // Closest point is the edge (1, 2, z): offset (-0.18, -0.24) has length 0.3, depth 0.2.
  const ContactPoint c = collide_both_ways(kBall, Vec3{1.18f, 2.24f, 0.5f}, kSlab, Vec3{});
  expect_unit(c.normal);
  expect_vec_near(c.normal, Vec3{-0.6f, -0.8f, 0});
  EXPECT_NEAR(c.depth, 0.2f, kTol);
  expect_vec_near(c.point, Vec3{0.94f, 1.92f, 0.5f});  // between (0.88, 1.84) and (1, 2)
}

TEST(Narrowphase, SphereBoxDeepCentreInside) {
  // Centre 0.2 m inside the +X face: pushed out through it, depth = r + 0.2.
  ContactPoint c;
  ASSERT_TRUE(collide_sphere_box(kBall, Vec3{0.8f, 0, 0}, kSlab, Vec3{}, c));
  expect_vec_near(c.normal, Vec3{-1, 0, 0});
  EXPECT_NEAR(c.depth, 0.7f, kTol);
  expect_vec_near(c.point, Vec3{0.65f, 0, 0});  // between x = 1 (face) and x = 0.3 (sphere)
}

TEST(Narrowphase, SphereBoxConcentric) {
  ContactPoint c;
  ASSERT_TRUE(collide(kBall, Vec3{2, 3, 4}, kSlab, Vec3{2, 3, 4}, c));
  expect_unit(c.normal);
  expect_vec_near(c.normal, Vec3{1, 0, 0});  // the thinnest axis (half extent 1) wins
  EXPECT_NEAR(c.depth, 1.5f, kTol);
  // A cube has no thinnest axis: the documented tie order picks +Y.
  ASSERT_TRUE(collide(kBall, Vec3{}, make_box(Vec3{1, 1, 1}), Vec3{}, c));
  EXPECT_EQ(c.normal, (Vec3{0, 1, 0}));
  EXPECT_NEAR(c.depth, 1.5f, kTol);
}

TEST(Narrowphase, BoxSphereDispatchFlipsTheNormal) {
  const Vec3 ball_pos{1.25f, 0.5f, 0};
  ContactPoint sphere_first;
  ContactPoint box_first;
  ASSERT_TRUE(collide_sphere_box(kBall, ball_pos, kSlab, Vec3{}, sphere_first));
  ASSERT_TRUE(collide(kSlab, Vec3{}, kBall, ball_pos, box_first));
  // A = box, B = sphere: the normal points from the box towards the sphere (+X).
  expect_vec_near(box_first.normal, Vec3{1, 0, 0});
  EXPECT_EQ(box_first.normal, -sphere_first.normal);
  EXPECT_EQ(box_first.depth, sphere_first.depth);
  EXPECT_EQ(box_first.point, sphere_first.point);
  EXPECT_GT(dot(box_first.normal, ball_pos - Vec3{}), 0.0f);

  ContactPoint touching;
  ASSERT_TRUE(collide(kSlab, Vec3{}, kBall, Vec3{0, -2.5f, 0}, touching));
  EXPECT_EQ(touching.depth, 0.0f);
  expect_vec_near(touching.normal, Vec3{0, -1, 0});
  ContactPoint separated;
  EXPECT_FALSE(collide(kSlab, Vec3{}, kBall, Vec3{0, 0, 3.6f}, separated));
  ContactPoint deep;
  ASSERT_TRUE(collide(kSlab, Vec3{}, kBall, Vec3{0, 0, 2.9f}, deep));
  expect_vec_near(deep.normal, Vec3{0, 0, 1});
  EXPECT_NEAR(deep.depth, 0.6f, kTol);
  ContactPoint concentric;
  ASSERT_TRUE(collide(kSlab, Vec3{}, kBall, Vec3{}, concentric));
  expect_unit(concentric.normal);
  expect_vec_near(concentric.normal, Vec3{-1, 0, 0});  // the flip of the sphere-first fallback
}

// --- box-box -------------------------------------------------------------------------------------

const Shape kUnit = make_box(Vec3{1, 1, 1});
const Shape kSmall = make_box(Vec3{0.5f, 0.5f, 0.5f});

TEST(Narrowphase, BoxBoxSeparated) {
  ContactPoint c;
  EXPECT_FALSE(collide_box_box(kUnit, Vec3{}, kSmall, Vec3{1.6f, 0, 0}, c));
  EXPECT_FALSE(collide(kUnit, Vec3{}, kSmall, Vec3{0, 0.2f, -1.6f}, c));
}

TEST(Narrowphase, BoxBoxTouching) {
  ContactPoint c;
  ASSERT_TRUE(collide_box_box(kUnit, Vec3{}, kSmall, Vec3{1.5f, 0.25f, 0}, c));
  EXPECT_EQ(c.depth, 0.0f);
  EXPECT_EQ(c.normal, (Vec3{1, 0, 0}));
  expect_vec_near(c.point, Vec3{1, 0.25f, 0});  // y: centre of the overlap [-0.25, 0.75]
}

TEST(Narrowphase, BoxBoxOverlapping) {
  // Separating translations: x 0.2 (+), y 0.7 (+), z 1.4 (-): x wins.
  const ContactPoint c = collide_both_ways(kUnit, Vec3{}, kSmall, Vec3{1.3f, 0.8f, -0.1f});
  EXPECT_EQ(c.normal, (Vec3{1, 0, 0}));
  EXPECT_NEAR(c.depth, 0.2f, kTol);
  expect_vec_near(c.point, Vec3{0.9f, 0.65f, -0.1f});
}

TEST(Narrowphase, BoxBoxDeepContained) {
  // B inside A: the depth is the translation that gets B out (1.2 m down), not its overlap width.
  ContactPoint c;
  ASSERT_TRUE(collide_box_box(kUnit, Vec3{}, kSmall, Vec3{0, -0.3f, 0.1f}, c));
  EXPECT_EQ(c.normal, (Vec3{0, -1, 0}));
  EXPECT_NEAR(c.depth, 1.2f, kTol);
  expect_vec_near(c.point, Vec3{0, -0.4f, 0.1f});  // y midway between faces -1 (A) and 0.2 (B)
}

TEST(Narrowphase, BoxBoxConcentric) {
  ContactPoint c;
  ASSERT_TRUE(collide(kUnit, Vec3{3, 3, 3}, kSmall, Vec3{3, 3, 3}, c));
  expect_unit(c.normal);
  EXPECT_EQ(c.normal, (Vec3{0, 1, 0}));  // all axes tie: +Y
  EXPECT_NEAR(c.depth, 1.5f, kTol);
  ASSERT_TRUE(collide(kSlab, Vec3{}, kSlab, Vec3{}, c));
  EXPECT_EQ(c.normal, (Vec3{1, 0, 0}));  // thinnest axis
  EXPECT_NEAR(c.depth, 2.0f, kTol);
}

TEST(Narrowphase, DispatchRejectsUnknownKinds) {
  Shape bogus = make_sphere(1);
  bogus.kind = ShapeKind::Count;
  ContactPoint c;
  EXPECT_FALSE(collide(bogus, Vec3{}, make_sphere(1), Vec3{}, c));
  EXPECT_FALSE(collide(make_box(Vec3{1, 1, 1}), Vec3{}, bogus, Vec3{}, c));
}

// --- separation law on random configurations ----------------------------------------------------

/// Tiny portable generator for reproducible random configurations.
float next_uniform(uint64_t& state, float lo, float hi) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * static_cast<float>(state >> 40) * (1.0f / 16777216.0f);
}

TEST(Narrowphase, PushingOutAlongNormalByDepthSeparates) {
  uint64_t state = 12345;
  int hits = 0;
  for (int i = 0; i < 4000; ++i) {
    const auto random_shape = [&] {
      return next_uniform(state, 0, 1) < 0.5f
                 ? make_sphere(next_uniform(state, 0.1f, 2))
                 : make_box(Vec3{next_uniform(state, 0.1f, 2), next_uniform(state, 0.1f, 2),
                                 next_uniform(state, 0.1f, 2)});
    };
    const Shape a = random_shape();
    const Shape b = random_shape();
    const Vec3 pa{next_uniform(state, -2, 2), next_uniform(state, -2, 2), next_uniform(state, -2, 2)};
    const Vec3 pb{next_uniform(state, -2, 2), next_uniform(state, -2, 2), next_uniform(state, -2, 2)};
    ContactPoint c;
    const bool hit = collide(a, pa, b, pb, c);
    // The contact must agree with the AABB overlap for the shapes whose AABB is exact.
    if (a.kind == ShapeKind::Box && b.kind == ShapeKind::Box) {
      EXPECT_EQ(hit, overlaps(compute_aabb(a, pa), compute_aabb(b, pb)));
    }
    if (!hit) continue;
    ++hits;
    SCOPED_TRACE(::testing::Message() << "case " << i);
    expect_unit(c.normal);
    EXPECT_GE(c.depth, 0.0f);
    // Exact touching is not representable after rounding: stop 0.1 mm short instead.
    constexpr float kShort = 1e-4f;
    ContactPoint after;
    if (c.depth > kShort) {
      ASSERT_TRUE(collide(a, pa, b, pb + c.normal * (c.depth - kShort), after));
      EXPECT_NEAR(after.depth, kShort, 1e-5f);
      expect_vec_near(after.normal, c.normal, 1e-3f);
    }
    EXPECT_FALSE(collide(a, pa, b, pb + c.normal * (c.depth + 1e-3f), after));
  }
  EXPECT_GT(hits, 500);
}

}  // namespace
}  // namespace impulse::physics
