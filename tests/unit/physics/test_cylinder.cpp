// Cylinders: GJK distances against closed forms, contact manifolds against exact resting depths,
// mass properties, rolling down an incline and across a plane against the closed form, resting,
// stacking and sleeping, bounce and friction thresholds, continuous collision, raycasts against a
// brute-force march, AABBs, and save and restore.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "server/physics/convex_hull.h"
#include "server/physics/gjk.h"
#include "server/physics/narrowphase.h"
#include "server/physics/raycast.h"
#include "server/physics/world.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::add_ground_plane;
using test::state;

constexpr float kDt = 1.0f / 60.0f;
constexpr float kPi = 3.14159265f;

BodyDesc cylinder_desc(Vec3 position, float radius, float half_height, float mass = 1.0f, Quat orientation = {}) {
  BodyDesc d;
  d.shape = make_cylinder(radius, half_height);
  d.position = position;
  d.orientation = orientation;
  d.mass = mass;
  return d;
}

/// Distance from p to the solid cylinder (radius r, half height h) along local Y at the origin.
float distance_to_cylinder(Vec3 p, float r, float h) {
  const float radial = std::sqrt(p.x * p.x + p.z * p.z);
  const float dr = std::max(radial - r, 0.0f);
  const float dy = std::max(std::fabs(p.y) - h, 0.0f);
  return std::sqrt(dr * dr + dy * dy);
}

bool inside_cylinder(Vec3 p, float r, float h) { return p.x * p.x + p.z * p.z <= r * r && std::fabs(p.y) <= h; }

Quat random_rotation(std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  Quat q{n(rng), n(rng), n(rng), n(rng)};
  return normalize(q);
}

// --- GJK ------------------------------------------------------------------------------------------

// A point against a rotated box and against a rotated cylinder: GJK's distance and closest point
// equal the closed forms (Ericson §5.1.4 for the box; the clamped radial and axial offsets for
// the cylinder), over 2000 random placements.
TEST(Gjk, DistanceFromAPointToABoxAndACylinderMatchesTheClosedForm) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const Vec3 h{0.7f, 0.3f, 1.1f};
  const float r = 0.6f;
  const float hh = 0.4f;
  int checked = 0;
  for (int i = 0; i < 2000; ++i) {
    const Quat q = random_rotation(rng);
    const Vec3 c{u(rng), u(rng), u(rng)};
    const Vec3 p{u(rng), u(rng), u(rng)};
    const Vec3 local = inverse_rotate(q, p - c);
    const auto point = [p](Vec3) { return p; };
    // Box.
    const auto box = [&](Vec3 d) {
      const Vec3 l = inverse_rotate(q, d);
      return c + rotate(q, Vec3{l.x >= 0 ? h.x : -h.x, l.y >= 0 ? h.y : -h.y, l.z >= 0 ? h.z : -h.z});
    };
    const Vec3 clamped{std::clamp(local.x, -h.x, h.x), std::clamp(local.y, -h.y, h.y), std::clamp(local.z, -h.z, h.z)};
    const float box_distance = length(local - clamped);
    const gjk::Result gb = gjk::distance(point, box, c - p);
    if (box_distance > 1e-3f) {
      ASSERT_FALSE(gb.overlap) << i;
      EXPECT_NEAR(gb.distance, box_distance, 1e-4f * (1.0f + box_distance)) << i;
      EXPECT_LT(length(gb.on_b - (c + rotate(q, clamped))), 2e-3f) << i;
      ++checked;
    } else if (box_distance == 0.0f) {
      EXPECT_TRUE(gb.overlap) << i;
    }
    // Cylinder.
    const Shape cyl = make_cylinder(r, hh);
    const Transform t{c, q};
    const auto cylinder = [&](Vec3 d) { return cylinder_support(cyl, t, d); };
    const float cyl_distance = distance_to_cylinder(local, r, hh);
    const gjk::Result gc = gjk::distance(point, cylinder, c - p);
    if (cyl_distance > 1e-3f) {
      ASSERT_FALSE(gc.overlap) << i;
      EXPECT_NEAR(gc.distance, cyl_distance, 2e-4f * (1.0f + cyl_distance)) << i;
      ++checked;
    } else if (inside_cylinder(local, r, hh)) {
      EXPECT_TRUE(gc.overlap) << i;
    }
  }
  EXPECT_GT(checked, 3000);
}

// --- Shape properties -----------------------------------------------------------------------------

// Mass properties: an off-centre impulse J at r from the centre turns a free cylinder at
// I^-1 (r x J), with I the closed form m r^2 / 2 (axis) and m (3 r^2 + 4 h^2) / 12 (diameter).
TEST(CylinderShape, InertiaMatchesTheClosedFormAboutTheAxisAndADiameter) {
  World world;
  const float r = 0.4f;
  const float hh = 0.9f;
  const float m = 7.0f;
  const ObjectID id = add(world, cylinder_desc({0.0f, 10.0f, 0.0f}, r, hh, m));
  const float axial = 0.5f * m * r * r;
  const float transverse = m * (3.0f * r * r + 4.0f * hh * hh) / 12.0f;
  // About the axis: an impulse along +X at +Z from the centre.
  ASSERT_EQ(world.apply_impulse(id, {1.0f, 0.0f, 0.0f}, Vec3{0.0f, 10.0f, r}), Error::Ok);
  BodyState s = state(world, id);
  EXPECT_NEAR(s.angular_velocity.y, (r * 1.0f) / axial, 1e-5f);  // (0, 0, r) x (1, 0, 0) = (0, r, 0)
  EXPECT_NEAR(s.angular_velocity.x, 0.0f, 1e-6f);
  EXPECT_NEAR(s.velocity.x, 1.0f / m, 1e-6f);
  // About a diameter: an impulse along +Z at +Y gives (0, hh, 0) x (0, 0, 1) = (hh, 0, 0).
  ASSERT_EQ(world.apply_impulse(id, {0.0f, 0.0f, 1.0f}, Vec3{0.0f, 10.0f + hh, 0.0f}), Error::Ok);
  s = state(world, id);
  EXPECT_NEAR(s.angular_velocity.x, hh / transverse, 1e-5f);
}

TEST(CylinderShape, TheAabbHoldsEverySupportPointAndTouchesTheFarthest) {
  std::mt19937 rng(8);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const Shape cyl = make_cylinder(0.3f, 0.8f);
  for (int i = 0; i < 200; ++i) {
    const Transform t{{n(rng), n(rng), n(rng)}, random_rotation(rng)};
    const Aabb box = compute_aabb(cyl, t);
    for (int k = 0; k < 3; ++k) {
      Vec3 e{};
      (k == 0 ? e.x : k == 1 ? e.y : e.z) = 1.0f;
      const Vec3 hi = cylinder_support(cyl, t, e);
      const Vec3 lo = cylinder_support(cyl, t, -e);
      const float max_k = k == 0 ? box.max.x : k == 1 ? box.max.y : box.max.z;
      const float min_k = k == 0 ? box.min.x : k == 1 ? box.min.y : box.min.z;
      EXPECT_NEAR(k == 0 ? hi.x : k == 1 ? hi.y : hi.z, max_k, 1e-5f);
      EXPECT_NEAR(k == 0 ? lo.x : k == 1 ? lo.y : lo.z, min_k, 1e-5f);
    }
    for (int j = 0; j < 20; ++j) {
      const Vec3 p = cylinder_support(cyl, t, Vec3{n(rng), n(rng), n(rng)});
      EXPECT_TRUE(p.x >= box.min.x - 1e-5f && p.x <= box.max.x + 1e-5f && p.y >= box.min.y - 1e-5f &&
                  p.y <= box.max.y + 1e-5f && p.z >= box.min.z - 1e-5f && p.z <= box.max.z + 1e-5f);
    }
  }
}

TEST(CylinderShape, BadDimensionsAreRefused) {
  World world;
  for (const Shape& s : {make_cylinder(0.0f, 0.5f), make_cylinder(0.5f, 0.0f), make_cylinder(0.5f, 1e9f),
                         make_cylinder(NAN, 0.5f), make_cylinder(0.5f, -1.0f)}) {
    BodyDesc d;
    d.shape = s;
    EXPECT_EQ(world.create_object(d).error, Error::InvalidArgument);
  }
}

// --- Raycasts --------------------------------------------------------------------------------------

// 10,000 random segments: a reported hit lies on the surface and no earlier point of a fine march
// is inside; a reported miss has no inside point along the march.
TEST(CylinderRaycast, AgreesWithABruteForceMarch) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const float r = 0.5f;
  const float hh = 0.7f;
  const Shape cyl = make_cylinder(r, hh);
  int hits = 0;
  for (int i = 0; i < 10000; ++i) {
    const Transform t{{u(rng) * 0.2f, u(rng) * 0.2f, u(rng) * 0.2f}, random_rotation(rng)};
    const Vec3 o{u(rng), u(rng), u(rng)};
    const Vec3 d = Vec3{u(rng), u(rng), u(rng)} * 2.0f;
    const Vec3 lo = inverse_rotate(t.rotation, o - t.position);
    if (inside_cylinder(lo, r, hh)) continue;
    ShapeRayHit hit;
    const bool found = raycast_shape(cyl, t, o, d, 1.0f, hit);
    constexpr int kSteps = 400;
    const float end = found ? hit.fraction : 1.0f;
    bool earlier_inside = false;
    for (int k = 0; k < kSteps; ++k) {
      const float f = end * static_cast<float>(k) / kSteps;
      const Vec3 q = inverse_rotate(t.rotation, o + d * f - t.position);
      // Within a hair of the surface does not count (the march's own rounding).
      if (inside_cylinder(q, r - 1e-4f, hh - 1e-4f) && f < end - 1e-4f) earlier_inside = true;
    }
    EXPECT_FALSE(earlier_inside) << i;
    if (found) {
      ++hits;
      const Vec3 q = inverse_rotate(t.rotation, hit.point - t.position);
      const float radial = std::sqrt(q.x * q.x + q.z * q.z);
      const float on_side = std::fabs(radial - r);
      const float on_cap = std::fabs(std::fabs(q.y) - hh);
      EXPECT_LT(std::min(on_side, on_cap), 1e-4f) << i;
      EXPECT_LT(dot(hit.normal, d), 0.0f) << i;
    }
  }
  EXPECT_GT(hits, 300);
}

// --- Contact manifolds -----------------------------------------------------------------------------

// A cylinder standing on a box face over a sweep of depths and turns about its axis: 4 points on
// the rim, normal -Y (from the cylinder to the box below), each separation the exact gap.
TEST(CylinderContacts, StandingOnABoxGivesFourRimPointsAtTheExactDepth) {
  const Shape cyl = make_cylinder(0.5f, 0.4f);
  const Shape box = make_box({2.0f, 0.5f, 2.0f});
  const Transform tb{{0.0f, -0.5f, 0.0f}, {}};
  for (int k = 0; k < 22; ++k) {
    const float gap = -0.045f + 0.003f * static_cast<float>(k);  // up to 0.018: within the 0.02 margin
    const Quat turn = quat_from_axis_angle({0, 1, 0}, 0.29f * static_cast<float>(k));
    const Transform tc{{0.1f, 0.4f + gap, -0.2f}, turn};
    Manifold m;
    ASSERT_TRUE(collide(cyl, tc, box, tb, 0.02f, m)) << gap;
    EXPECT_EQ(m.point_count, 4) << gap;
    EXPECT_NEAR(m.normal.y, -1.0f, 1e-5f);
    for (int i = 0; i < m.point_count; ++i) {
      EXPECT_NEAR(m.points[i].separation, gap, 1e-5f) << gap;
      const Vec3 p = m.points[i].point - tc.position;
      EXPECT_NEAR(std::sqrt(p.x * p.x + p.z * p.z), 0.5f, 1e-4f);  // on the rim
    }
    // The swapped pair: the same points, the normal flipped.
    Manifold s;
    ASSERT_TRUE(collide(box, tb, cyl, tc, 0.02f, s));
    EXPECT_NEAR(s.normal.y, 1.0f, 1e-5f);
    EXPECT_EQ(s.point_count, 4);
  }
}

// Lying on a box (axis along X, then turned about Y): 2 points at the side line's ends.
TEST(CylinderContacts, LyingOnABoxGivesTheSideLinesTwoEnds) {
  const Shape cyl = make_cylinder(0.3f, 0.6f);
  const Shape box = make_box({2.0f, 0.5f, 2.0f});
  const Transform tb{{0.0f, -0.5f, 0.0f}, {}};
  for (int k = 0; k < 12; ++k) {
    const float gap = -0.02f + 0.003f * static_cast<float>(k);
    const Quat q = quat_from_axis_angle({0, 1, 0}, 0.5f * static_cast<float>(k)) *
                   quat_from_axis_angle({0, 0, 1}, kPi / 2.0f);
    const Transform tc{{0.0f, 0.3f + gap, 0.0f}, q};
    Manifold m;
    ASSERT_TRUE(collide(cyl, tc, box, tb, 0.02f, m));
    ASSERT_EQ(m.point_count, 2) << k;
    EXPECT_NEAR(m.normal.y, -1.0f, 1e-5f);
    EXPECT_NEAR(length(m.points[0].point - m.points[1].point), 1.2f, 1e-3f);
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(m.points[i].separation, gap, 1e-5f);
  }
}

// Tilted on its rim, on a box and on a plane, over tilts and tilt directions: one deepest point,
// the rim's exact lowest point, at its exact height.
TEST(CylinderContacts, TiltedOnTheRimTouchesAtTheExactLowestPoint) {
  const Shape cyl = make_cylinder(0.5f, 0.4f);
  const Shape box = make_box({3.0f, 0.5f, 3.0f});
  const Shape plane = make_plane();
  for (int k = 0; k < 40; ++k) {
    const float tilt = 0.15f + 0.03f * static_cast<float>(k % 10);
    const float heading = 0.7f * static_cast<float>(k);
    const Quat q = quat_from_axis_angle({std::cos(heading), 0.0f, std::sin(heading)}, tilt);
    const Transform tc{{0.2f, 0.0f, 0.1f}, q};
    const Vec3 low = cylinder_support(cyl, tc, {0.0f, -1.0f, 0.0f});
    const float gap = -0.01f;
    const Transform placed{{tc.position.x, tc.position.y - low.y + gap, tc.position.z}, q};
    for (int which = 0; which < 2; ++which) {
      Manifold m;
      const bool hit = which == 0 ? collide(cyl, placed, box, Transform{{0.0f, -0.5f, 0.0f}, {}}, 0.02f, m)
                                  : collide(plane, Transform{}, cyl, placed, 0.02f, m);
      ASSERT_TRUE(hit) << k;
      float deepest = 1e9f;
      for (int i = 0; i < m.point_count; ++i) deepest = std::min(deepest, m.points[i].separation);
      EXPECT_NEAR(deepest, gap, 2e-4f) << "tilt " << tilt << " heading " << heading << " which " << which;
      EXPECT_NEAR(std::fabs(m.normal.y), 1.0f, 1e-4f);
    }
  }
}

// Against a sphere: the separation is the closed-form distance minus the radius, apart and
// overlapping by less than the rounding, over random placements.
TEST(CylinderContacts, SphereSeparationMatchesTheClosedForm) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  const Shape cyl = make_cylinder(0.5f, 0.6f);
  const Shape ball = make_sphere(0.3f);
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const Transform tc{{0.0f, 0.0f, 0.0f}, random_rotation(rng)};
    const Vec3 c{u(rng), u(rng), u(rng)};
    const float d = distance_to_cylinder(inverse_rotate(tc.rotation, c), 0.5f, 0.6f);
    const float expected = d - 0.3f;
    if (d < 1e-3f || expected > 0.1f || expected < -0.04f) continue;
    Manifold m;
    ASSERT_TRUE(collide(cyl, tc, ball, Transform{c, {}}, 0.1f, m)) << i;
    ASSERT_EQ(m.point_count, 1);
    EXPECT_NEAR(m.points[0].separation, expected, 2e-4f) << i;
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

// Cap on cap (4 points), side by side lying parallel (2 points), crossed (1 point), each at the
// exact depth; and a cylinder sunk deeper than its rounding into a box is pushed out upwards.
TEST(CylinderContacts, CylinderPairsAndDeepPenetration) {
  const Shape a = make_cylinder(0.5f, 0.3f);
  const Shape b = make_cylinder(0.4f, 0.3f);
  Manifold m;
  ASSERT_TRUE(collide(a, Transform{{0, 0.29f, 0}, {}}, b, Transform{{0.05f, -0.3f, 0}, quat_from_axis_angle({0, 1, 0}, 0.3f)}, 0.02f, m));
  EXPECT_EQ(m.point_count, 4);
  EXPECT_NEAR(m.normal.y, -1.0f, 1e-5f);
  for (int i = 0; i < m.point_count; ++i) EXPECT_NEAR(m.points[i].separation, -0.01f, 1e-5f);

  const Quat lying = quat_from_axis_angle({0, 0, 1}, kPi / 2.0f);
  ASSERT_TRUE(collide(a, Transform{{0, 0, 0}, lying}, b, Transform{{0, 0.89f, 0}, lying}, 0.02f, m));
  EXPECT_EQ(m.point_count, 2);
  for (int i = 0; i < m.point_count; ++i) EXPECT_NEAR(m.points[i].separation, -0.01f, 1e-4f);

  const Quat crossed = quat_from_axis_angle({1, 0, 0}, kPi / 2.0f);
  ASSERT_TRUE(collide(a, Transform{{0, 0, 0}, lying}, b, Transform{{0, 0.91f, 0}, crossed}, 0.02f, m));
  EXPECT_EQ(m.point_count, 1);
  EXPECT_NEAR(m.points[0].separation, 0.01f, 1e-4f);

  const Shape box = make_box({2.0f, 0.5f, 2.0f});
  for (const float depth : {0.08f, 0.15f, 0.25f}) {
    ASSERT_TRUE(collide(a, Transform{{0, 0.3f - depth, 0}, {}}, box, Transform{{0, -0.5f, 0}, {}}, 0.02f, m));
    EXPECT_NEAR(m.normal.y, -1.0f, 1e-4f) << depth;
    float deepest = 1e9f;
    for (int i = 0; i < m.point_count; ++i) deepest = std::min(deepest, m.points[i].separation);
    EXPECT_NEAR(deepest, -depth, 1e-4f) << depth;
  }
}

// --- In the world -----------------------------------------------------------------------------------

// Rolling without slipping down an incline: a solid cylinder accelerates at g sin(theta) / (1 + I
// / (m r^2)) = 2/3 g sin(theta), and its spin keeps v = w r. Swept over slopes and headings.
TEST(CylinderWorld, RollsDownAnInclineAtTwoThirdsGSinTheta) {
  for (const float degrees : {5.0f, 10.0f, 20.0f}) {
    for (const float heading : {0.0f, 0.8f, 2.1f}) {
      World world;
      const float theta = degrees * kPi / 180.0f;
      // The slope descends along the heading's direction h; the cylinder's axis is across it.
      const Vec3 h{std::cos(heading), 0.0f, std::sin(heading)};
      const Vec3 across = cross({0, 1, 0}, h);  // horizontal, perpendicular to h
      const Quat tilt = quat_from_axis_angle(across, theta);  // the normal leans towards +h: downhill
      BodyDesc ground;
      ground.kind = BodyKind::Static;
      ground.shape = make_plane();
      ground.orientation = tilt;
      ground.friction = 1.0f;
      add(world, ground);
      const Vec3 up = rotate(tilt, Vec3{0, 1, 0});
      const Vec3 down_slope = normalize_or(cross(across, up), Vec3{});  // along the slope, downwards
      ASSERT_LT(down_slope.y, 0.0f);
      const float r = 0.4f;
      // Axis (local Y) along `across`: rotate +Y onto it.
      const Quat axis_to_across = quat_from_axis_angle(normalize_or(cross({0, 1, 0}, across), Vec3{}), kPi / 2.0f);
      BodyDesc c = cylinder_desc(up * (r - 0.001f), r, 0.5f, 2.0f, axis_to_across);
      c.friction = 1.0f;
      c.angular_damping = 0.0f;
      const ObjectID id = add(world, c);
      for (int i = 0; i < 30; ++i) world.step(kDt);  // settle onto the slope
      const float v0 = dot(state(world, id).velocity, down_slope);
      constexpr int kSteps = 60;
      for (int i = 0; i < kSteps; ++i) world.step(kDt);
      const BodyState s = state(world, id);
      const float a = (dot(s.velocity, down_slope) - v0) / (kSteps * kDt);
      const float expected = (2.0f / 3.0f) * 9.81f * std::sin(theta);
      EXPECT_NEAR(a, expected, 0.02f * expected) << degrees << " deg heading " << heading;
      EXPECT_NEAR(std::fabs(dot(s.angular_velocity, across)) * r, length(s.velocity), 0.02f * length(s.velocity) + 1e-3f)
          << degrees << " deg heading " << heading;
      EXPECT_LT(std::fabs(dot(s.velocity, across)), 0.01f) << "no sideways drift";
    }
  }
}

// Rolling across a flat plane from v = w r: a straight line at constant speed (no rolling
// resistance, no damping), in eight headings.
TEST(CylinderWorld, RollsInAStraightLineAtConstantSpeed) {
  for (int k = 0; k < 8; ++k) {
    World world;
    add_ground_plane(world, 0.8f);
    const float heading = 0.785398f * static_cast<float>(k) + 0.1f;
    const Vec3 dir{std::cos(heading), 0.0f, std::sin(heading)};
    // Rolling: the contact point's velocity v + w x (-r up) is zero, so w = (up x v) / r, and the
    // axis (local Y) lies along up x dir.
    const Vec3 axis = cross({0, 1, 0}, dir);
    const float r = 0.3f;
    const Quat q = quat_from_axis_angle(normalize_or(cross({0, 1, 0}, axis), Vec3{}), kPi / 2.0f);
    BodyDesc c = cylinder_desc({0.0f, r, 0.0f}, r, 0.25f, 1.0f, q);
    c.angular_damping = 0.0f;
    c.friction = 0.8f;
    const float speed = 3.0f;
    c.velocity = dir * speed;
    c.angular_velocity = axis * (speed / r);
    const ObjectID id = add(world, c);
    for (int i = 0; i < 120; ++i) world.step(kDt);
    const BodyState s = state(world, id);
    const Vec3 travelled = s.position - Vec3{0.0f, r, 0.0f};
    const float along = dot(travelled, dir);
    const Vec3 off = travelled - dir * along;
    EXPECT_NEAR(along, speed * 2.0f, 0.02f * speed * 2.0f) << k;
    EXPECT_LT(std::sqrt(off.x * off.x + off.z * off.z), 1e-3f) << k;
    EXPECT_NEAR(length(s.velocity), speed, 2e-3f * speed) << k;
    EXPECT_NEAR(s.position.y, r, 5e-3f) << k;
  }
}

// Dropped standing, lying and tilted from a sweep of heights: it comes to rest on the ground at
// the closed-form height, and it never bounces above its drop height (no energy gain).
TEST(CylinderWorld, ComesToRestStandingOrLyingOverASweepOfDropHeights) {
  for (int k = 0; k < 18; ++k) {
    World world;
    if (k % 2 == 0) {
      add_ground(world);
    } else {
      add_ground_plane(world);
    }
    const float r = 0.35f;
    const float hh = 0.5f;
    const int pose = (k / 2) % 3;  // 0 standing, 1 lying, 2 slightly tilted (falls onto its cap)
    const Quat q = pose == 0 ? Quat{} : pose == 1 ? quat_from_axis_angle({1, 0, 0}, kPi / 2.0f)
                                                 : quat_from_axis_angle({1, 0, 0}, 0.05f);
    const float rest = pose == 1 ? r : hh;
    const float drop = 0.05f + 0.173f * static_cast<float>(k);
    const ObjectID id = add(world, cylinder_desc({0.3f, rest + drop, -0.2f}, r, hh, 3.0f, q));
    float highest_after_touch = -1.0f;
    bool touched = false;
    for (int i = 0; i < 240; ++i) {
      world.step(kDt);
      const BodyState s = state(world, id);
      if (s.position.y < rest + 0.02f) touched = true;
      if (touched) highest_after_touch = std::max(highest_after_touch, s.position.y);
    }
    const BodyState s = state(world, id);
    EXPECT_NEAR(s.position.y, rest, 0.01f) << "pose " << pose << " drop " << drop;
    EXPECT_LT(length(s.velocity), 0.02f) << "pose " << pose << " drop " << drop;
    EXPECT_LT(highest_after_touch, rest + drop + 1e-3f) << "pose " << pose << " drop " << drop;
    EXPECT_NEAR(s.position.x, 0.3f, pose == 1 ? 0.05f : 0.02f) << "pose " << pose << " drop " << drop;
  }
}

// Bounce: a standing cylinder with restitution e dropped from h rises to about e^2 h, over drop
// heights that put the impact at different phases within a step.
TEST(CylinderWorld, BounceHeightFollowsTheRestitutionOverASweepOfDrops) {
  const float e = 0.6f;
  for (int k = 0; k < 10; ++k) {
    World world;
    add_ground_plane(world, 0.5f, e);
    const float hh = 0.3f;
    const float drop = 1.0f + 0.0731f * static_cast<float>(k);
    BodyDesc c = cylinder_desc({0.0f, hh + drop, 0.0f}, 0.4f, hh, 1.0f);
    c.restitution = e;
    const ObjectID id = add(world, c);
    bool falling = true;
    float peak = 0.0f;
    for (int i = 0; i < 240; ++i) {
      world.step(kDt);
      const BodyState s = state(world, id);
      if (falling && s.velocity.y > 0.0f) falling = false;
      if (!falling) {
        peak = std::max(peak, s.position.y - hh);
        if (s.velocity.y < 0.0f) break;
      }
    }
    EXPECT_NEAR(peak, e * e * drop, 0.12f * e * e * drop) << "drop " << drop;
    EXPECT_LT(peak, drop) << "drop " << drop;
  }
}

// Friction threshold: a standing cylinder on a slope of angle theta with mu stays put when tan
// theta < mu and slides when tan theta > mu, at 0.9 and 1.1 times the threshold angle.
TEST(CylinderWorld, StandingOnASlopeItSlidesOnlyPastTheFrictionAngle) {
  for (const float mu : {0.3f, 0.6f}) {
    for (const float factor : {0.9f, 1.1f}) {
      World world;
      const float theta = factor * std::atan(mu);
      const Quat tilt = quat_from_axis_angle({0, 0, 1}, theta);
      BodyDesc ground;
      ground.kind = BodyKind::Static;
      ground.shape = make_plane();
      ground.orientation = tilt;
      ground.friction = mu;
      add(world, ground);
      const Vec3 up = rotate(tilt, Vec3{0, 1, 0});
      // Squat (r 0.5, h 0.2): it slides before it would tip.
      BodyDesc c = cylinder_desc(up * 0.2f, 0.5f, 0.2f, 1.0f, tilt);
      c.friction = mu;
      const ObjectID id = add(world, c);
      for (int i = 0; i < 120; ++i) world.step(kDt);
      const float moved = length(state(world, id).position - up * 0.2f);
      if (factor < 1.0f) {
        EXPECT_LT(moved, 0.02f) << "mu " << mu;
      } else {
        EXPECT_GT(moved, 0.2f) << "mu " << mu;
      }
    }
  }
}

// A stack of five standing cylinders, and cylinders on a hull and a box, settle and sleep.
TEST(CylinderWorld, AStackOfFiveSettlesAndSleeps) {
  World world;
  add_ground(world);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(add(world, cylinder_desc({0.0f, 0.25f + 0.501f * static_cast<float>(i), 0.0f}, 0.4f, 0.25f, 1.0f,
                                           quat_from_axis_angle({0, 1, 0}, 0.4f * static_cast<float>(i)))));
  }
  std::vector<Vec3> cube;
  for (int v = 0; v < 8; ++v) cube.push_back({(v & 1) ? 0.5f : -0.5f, (v & 2) ? 0.5f : -0.5f, (v & 4) ? 0.5f : -0.5f});
  const HullBuild hb = build_convex_hull(cube);
  ASSERT_TRUE(hb.ok());
  BodyDesc rock;
  rock.kind = BodyKind::Static;
  rock.shape = make_hull(*world.add_hull(hb.hull));
  rock.position = {3.0f, 0.5f, 0.0f};
  add(world, rock);
  ids.push_back(add(world, cylinder_desc({3.0f, 1.35f, 0.0f}, 0.3f, 0.35f)));
  ids.push_back(add(world, cylinder_desc({3.0f, 1.3f, 2.0f}, 0.3f, 0.3f, 1.0f, quat_from_axis_angle({1, 0, 0}, kPi / 2))));
  bool asleep = false;
  for (int i = 0; i < 900 && !asleep; ++i) {
    world.step(kDt);
    asleep = std::all_of(ids.begin(), ids.end(), [&](ObjectID id) { return state(world, id).sleeping; });
  }
  EXPECT_TRUE(asleep);
  for (int i = 0; i < 5; ++i) {
    const BodyState s = state(world, ids[static_cast<size_t>(i)]);
    EXPECT_NEAR(s.position.y, 0.25f + 0.5f * static_cast<float>(i), 0.02f) << i;
    EXPECT_LT(std::fabs(s.position.x) + std::fabs(s.position.z), 0.02f) << i;
  }
  EXPECT_NEAR(state(world, ids[5]).position.y, 1.35f, 0.01f);
}

// Continuous collision: a 0.1 m cylinder at 300 m/s never passes a 2 cm static wall, from 20
// starting phases and turns.
TEST(CylinderWorld, AFastCylinderDoesNotTunnelThroughAThinWall) {
  for (int k = 0; k < 20; ++k) {
    WorldSettings settings;
    settings.gravity = {};
    World world(settings);
    add(world, test::box_desc({0.0f, 0.0f, 0.0f}, {0.01f, 3.0f, 3.0f}, 1.0f, BodyKind::Static));
    BodyDesc c = cylinder_desc({-3.0f - 0.37f * static_cast<float>(k), 0.1f * static_cast<float>(k % 5), 0.0f}, 0.1f,
                               0.1f, 1.0f, quat_from_axis_angle({0, 0, 1}, 0.3f * static_cast<float>(k)));
    c.velocity = {300.0f, 0.0f, 0.0f};
    const ObjectID id = add(world, c);
    for (int i = 0; i < 20; ++i) world.step(kDt);
    EXPECT_LT(state(world, id).position.x, 0.0f) << k;
  }
}

TEST(CylinderWorld, SaveAndRestoreReplayBitExactly) {
  World world;
  add_ground(world);
  for (int i = 0; i < 6; ++i) {
    add(world, cylinder_desc({0.3f * static_cast<float>(i), 1.0f + 0.8f * static_cast<float>(i), 0.0f}, 0.3f, 0.3f, 1.0f,
                             quat_from_axis_angle({1, 0, 0}, 0.4f * static_cast<float>(i))));
  }
  for (int i = 0; i < 40; ++i) world.step(kDt);
  std::vector<uint8_t> bytes;
  world.save_state(bytes);
  World copy;
  std::string error;
  ASSERT_TRUE(copy.restore_state(bytes, &error)) << error;
  for (int i = 0; i < 60; ++i) {
    world.step(kDt);
    copy.step(kDt);
  }
  EXPECT_EQ(world.world_hash(), copy.world_hash());
}

}  // namespace
}  // namespace impulse::physics
