// Shape-level segment casts checked against closed forms (hand-computed hits and near misses on
// every shape kind) and, on seeded random segments, against the shapes' exact signed distance
// functions evaluated in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "server/physics/raycast.h"
#include "tests/support/rng.h"

namespace impulse::physics {
namespace {

using ::impulse::test::Rng;

// Tolerances. Inputs are O(1-10) m and the float results carry a few ulps of relative error,
// so 1e-5 relative (of the segment length for points and of 1 for fractions) is ~100 ulps of
// headroom yet far below the 1 mm of the near-miss cases.
constexpr float kFractionTol = 1.0e-5f;
constexpr float kNormalTol = 1.0e-5f;

void expect_vec_near(Vec3 got, Vec3 want, float tol, const char* what) {
  EXPECT_NEAR(got.x, want.x, tol) << what;
  EXPECT_NEAR(got.y, want.y, tol) << what;
  EXPECT_NEAR(got.z, want.z, tol) << what;
}

/// Asserts a hit at `fraction` with `normal`, and point = origin + fraction * translation.
void expect_hit(const Shape& shape, const Transform& tf, Vec3 origin, Vec3 translation, float fraction, Vec3 normal) {
  ShapeRayHit hit;
  ASSERT_TRUE(raycast_shape(shape, tf, origin, translation, 1.0f, hit));
  EXPECT_NEAR(hit.fraction, fraction, kFractionTol);
  const float len = length(translation);
  expect_vec_near(hit.point, origin + translation * fraction, kFractionTol * len, "point");
  expect_vec_near(hit.normal, normal, kNormalTol, "normal");
}

void expect_miss(const Shape& shape, const Transform& tf, Vec3 origin, Vec3 translation) {
  ShapeRayHit hit;
  EXPECT_FALSE(raycast_shape(shape, tf, origin, translation, 1.0f, hit))
      << "hit at fraction " << hit.fraction << " point " << hit.point.x << ", " << hit.point.y << ", " << hit.point.z;
}

const Transform kIdentity{Vec3{}, Quat{}};
constexpr float kSqrt2 = 1.41421356237309504880f;

// --- Closed forms --------------------------------------------------------------------------------

TEST(RaycastSphere, HitsAtTheQuadraticRoot) {
  const Shape sphere = make_sphere(0.75f);
  const Transform tf{Vec3{1, 2, 3}, quat_from_axis_angle(Vec3{0, 0, 1}, 0.7f)};  // rotation is irrelevant
  // A ray along +x offset by (dy, dz) from the centre enters at x = cx - sqrt(r^2 - dy^2 - dz^2).
  const double dy = 0.2;
  const double dz = -0.3;
  const double root = std::sqrt(0.75 * 0.75 - dy * dy - dz * dz);
  const Vec3 origin{-4.0f, static_cast<float>(2 + dy), static_cast<float>(3 + dz)};
  const Vec3 translation{10, 0, 0};
  const double hit_x = 1.0 - root;
  const auto fraction = static_cast<float>((hit_x - (-4.0)) / 10.0);
  const Vec3 normal{static_cast<float>(-root / 0.75), static_cast<float>(dy / 0.75), static_cast<float>(dz / 0.75)};
  expect_hit(sphere, tf, origin, translation, fraction, normal);

  // Tangent: the line touching the sphere at its top is a hit (closed solid) with normal +Y.
  const Shape half = make_sphere(0.5f);
  expect_hit(half, kIdentity, Vec3{-5, 0.5f, 0}, Vec3{10, 0, 0}, 0.5f, Vec3{0, 1, 0});
  // Along a diagonal, from far away: the entry point lies at distance |o - c| - r.
  const Vec3 dir{1 / kSqrt2, 0, 1 / kSqrt2};
  expect_hit(half, kIdentity, dir * -20.0f, dir * 40.0f, (20.0f - 0.5f) / 40.0f, -dir);
}

TEST(RaycastSphere, NearMissesAndSegmentEnds) {
  const Shape sphere = make_sphere(0.5f);
  const Transform tf{Vec3{0, 1, 0}, Quat{}};
  expect_miss(sphere, tf, Vec3{-5, 1.501f, 0}, Vec3{10, 0, 0});  // 1 mm above the top
  const Vec3 side = Vec3{0, 1, 0} + Vec3{1, 0, -1} * ((0.5f + 0.001f) / kSqrt2);
  expect_miss(sphere, tf, side - Vec3{3, 0, 3}, Vec3{6, 0, 6});     // 1 mm beside, diagonal
  expect_miss(sphere, tf, Vec3{-5, 1, 0}, Vec3{4.49f, 0, 0});       // ends 1 cm short
  expect_miss(sphere, tf, Vec3{0.6f, 1, 0}, Vec3{5, 0, 0});         // starts beyond, moving away
  ShapeRayHit hit;
  EXPECT_FALSE(raycast_sphere(sphere, tf, Vec3{-5, 1, 0}, Vec3{10, 0, 0}, 0.44f, hit));  // hit at 0.45
  ASSERT_TRUE(raycast_sphere(sphere, tf, Vec3{-5, 1, 0}, Vec3{10, 0, 0}, 0.46f, hit));
  EXPECT_NEAR(hit.fraction, 0.45f, kFractionTol);
}

TEST(RaycastBox, AxisAlignedFacesAndRotatedBox) {
  const Shape box = make_box(Vec3{1.0f, 0.5f, 0.25f});
  const Transform tf{Vec3{2, 0, 0}, Quat{}};
  expect_hit(box, tf, Vec3{-3, 0.1f, 0.1f}, Vec3{10, 0, 0}, 0.4f, Vec3{-1, 0, 0});   // -x face at x = 1
  expect_hit(box, tf, Vec3{2.5f, 5, -0.2f}, Vec3{0, -10, 0}, 0.45f, Vec3{0, 1, 0});  // +y face
  expect_hit(box, tf, Vec3{1.5f, 0, -2.25f}, Vec3{0, 0, 4}, 0.5f, Vec3{0, 0, -1});   // -z face

  // Rotated 30 degrees about +Z: the x axis through the centre meets the tilted local +Y face
  // where dot(p, n) = h_y with n = (-sin 30, cos 30, 0), i.e. x = -h_y / sin 30 = -1.
  const Shape tilted = make_box(Vec3{1.0f, 0.5f, 0.5f});
  const float angle = 3.14159265358979f / 6.0f;
  const Transform rot{Vec3{}, quat_from_axis_angle(Vec3{0, 0, 1}, angle)};
  expect_hit(tilted, rot, Vec3{-5, 0, 0}, Vec3{10, 0, 0}, 0.4f, Vec3{-std::sin(angle), std::cos(angle), 0});

  // Rotated 45 degrees about +Y: a ray towards the centre along the rotated local -x face
  // normal n, at height 0.2, enters that face at h = 0.5 from the centre.
  const Shape cube = make_box(Vec3{0.5f, 0.5f, 0.5f});
  const Transform yaw{Vec3{}, quat_from_axis_angle(Vec3{0, 1, 0}, 3.14159265358979f / 4.0f)};
  const Vec3 n = rotate(yaw.rotation, Vec3{-1, 0, 0});
  expect_hit(cube, yaw, n * 5.0f + Vec3{0, 0.2f, 0}, n * -10.0f, 0.45f, n);
}

TEST(RaycastBox, NearMissesAtEdgesAndParallelSlabs) {
  const Shape box = make_box(Vec3{0.5f, 0.5f, 0.5f});
  // Parallel to the x slab, 1 mm above the top face: miss; exactly on the face plane: hit
  // (closed), entering through the -x face.
  expect_miss(box, kIdentity, Vec3{-5, 0.501f, 0}, Vec3{10, 0, 0});
  expect_hit(box, kIdentity, Vec3{-5, 0.5f, 0}, Vec3{10, 0, 0}, 0.45f, Vec3{-1, 0, 0});
  expect_hit(box, kIdentity, Vec3{-5, 0.499f, 0.499f}, Vec3{10, 0, 0}, 0.45f, Vec3{-1, 0, 0});
  // Diagonal in xz past the vertical edge (0.5, y, -0.5): the box's largest projection on
  // (1, -1)/sqrt(2) is 1/sqrt(2); a line offset 1 mm beyond misses, 1 mm inside clips the edge.
  const Vec3 across{1 / kSqrt2, 0, -1 / kSqrt2};
  const Vec3 along{1 / kSqrt2, 0, 1 / kSqrt2};
  expect_miss(box, kIdentity, across * (1 / kSqrt2 + 0.001f) - along * 5.0f, along * 10.0f);
  // 1 mm inside, it clips the corner: with p(s) = c across + s along, z = (s - c) / sqrt(2)
  // reaches -0.5 (the -z face) at s = c - 1/sqrt(2) = -0.001, before x reaches 0.5.
  expect_hit(box, kIdentity, across * (1 / kSqrt2 - 0.001f) - along * 5.0f, along * 10.0f, (5.0f - 0.001f) / 10.0f,
             Vec3{0, 0, -1});
  // A segment entirely inside a slab on two axes and crossing the third: the classic axis ray.
  expect_hit(box, kIdentity, Vec3{0, 0, 3}, Vec3{0, 0, -6}, 2.5f / 6.0f, Vec3{0, 0, 1});
  // Exactly through an edge: both slabs are entered at the same fraction; the lower axis (x)
  // gives the normal, as documented.
  expect_hit(box, kIdentity, Vec3{-1.5f, -1.5f, 0.25f}, Vec3{4, 4, 0}, 0.25f, Vec3{-1, 0, 0});
  // Behind the origin and pointing away: miss.
  expect_miss(box, kIdentity, Vec3{0, 0, 3}, Vec3{0, 0, 6});
}

TEST(RaycastCapsule, SideCapsAndRotation) {
  const Shape capsule = make_capsule(0.5f, 1.0f);  // core from y = -1 to 1
  // Side: a horizontal ray at y = 0.3 enters at x = -0.5, normal -x.
  expect_hit(capsule, kIdentity, Vec3{-5, 0.3f, 0}, Vec3{10, 0, 0}, 0.45f, Vec3{-1, 0, 0});
  // Side, oblique in xz at offset z = 0.3: x = -sqrt(0.25 - 0.09) = -0.4.
  expect_hit(capsule, kIdentity, Vec3{-5, -0.9f, 0.3f}, Vec3{10, 0, 0}, 0.46f, Vec3{-0.8f, 0, 0.6f});
  // Top cap: a vertical ray at x = 0.2 meets the sphere around (0, 1, 0) at y = 1 + sqrt(0.21).
  const float cap_y = std::sqrt(0.21f);
  expect_hit(capsule, kIdentity, Vec3{0.2f, 5, 0}, Vec3{0, -10, 0}, (4.0f - cap_y) / 10.0f,
             Vec3{0.4f, 2.0f * cap_y, 0});
  // Straight down the axis: the pole of the top cap.
  expect_hit(capsule, kIdentity, Vec3{0, 4, 0}, Vec3{0, -4, 0}, 0.625f, Vec3{0, 1, 0});
  // Bottom cap from below, oblique.
  const Vec3 dir{0.6f, 0.8f, 0};
  expect_hit(capsule, kIdentity, Vec3{0, -1, 0} - dir * 3.0f, dir * 6.0f, 2.5f / 6.0f, -dir);

  // Lying along world x (90 degrees about +Z maps local +Y to -X): the same cap case, moved.
  const Transform lying{Vec3{3, 1, -2}, quat_from_axis_angle(Vec3{0, 0, 1}, 3.14159265358979f / 2.0f)};
  expect_hit(capsule, lying, Vec3{3 + 1.2f, 6, -2}, Vec3{0, -10, 0}, (5.0f - cap_y) / 10.0f,
             Vec3{0.4f, 2.0f * cap_y, 0});
  // And its side from above, between the caps.
  expect_hit(capsule, lying, Vec3{3 - 0.7f, 6, -2}, Vec3{0, -10, 0}, 0.45f, Vec3{0, 1, 0});
}

TEST(RaycastCapsule, NearMisses) {
  const Shape capsule = make_capsule(0.5f, 1.0f);
  expect_miss(capsule, kIdentity, Vec3{0.501f, 0.2f, -5}, Vec3{0, 0, 10});   // 1 mm beside the side
  expect_miss(capsule, kIdentity, Vec3{-5, 1.501f, 0}, Vec3{10, 0, 0});      // 1 mm over the top cap
  expect_miss(capsule, kIdentity, Vec3{0.501f, 5, 0}, Vec3{0, -10, 0});      // parallel to the axis, 1 mm out
  // Parallel to the axis and 1 mm inside the radius: enters through the top cap.
  ShapeRayHit hit;
  ASSERT_TRUE(raycast_capsule(capsule, kIdentity, Vec3{0.499f, 5, 0}, Vec3{0, -10, 0}, 1.0f, hit));
  const float y = 1.0f + std::sqrt(0.25f - 0.499f * 0.499f);
  EXPECT_NEAR(hit.fraction, (5.0f - y) / 10.0f, kFractionTol);
  // Diagonal past the rim where the side meets the cap: 1 mm outside the cap sphere.
  const Vec3 dir{1 / kSqrt2, -1 / kSqrt2, 0};
  const Vec3 off{1 / kSqrt2, 1 / kSqrt2, 0};
  expect_miss(capsule, kIdentity, Vec3{0, 1, 0} + off * 0.501f - dir * 5.0f, dir * 10.0f);
}

TEST(RaycastPlane, HalfSpace) {
  const Shape plane = make_plane();
  // Tilted plane through (0, 1, 0) with normal n: t = dot(n, p - o) / dot(n, d).
  const Quat q = quat_from_axis_angle(Vec3{1, 0, 0}, 0.4f);
  const Transform tf{Vec3{0, 1, 0}, q};
  const Vec3 n = rotate(q, Vec3{0, 1, 0});
  const Vec3 origin{0.3f, 6, -1};
  const Vec3 translation{1, -10, 2};
  const float t = dot(n, tf.position - origin) / dot(n, translation);
  expect_hit(plane, tf, origin, translation, t, n);
  expect_miss(plane, tf, origin, -translation);                      // moving away
  const Vec3 along = cross(n, Vec3{1, 0, 0}) * 10.0f;
  expect_miss(plane, tf, tf.position + n * 0.001f, along);           // parallel, 1 mm above
  expect_miss(plane, kIdentity, Vec3{0, 1, 0}, Vec3{0, -0.999f, 0}); // ends 1 mm short
}

TEST(RaycastAllShapes, StartInsideIsFractionZeroAgainstTheMotion) {
  const Transform tf{Vec3{1, -2, 0.5f}, quat_from_axis_angle(Vec3{0.6f, 0, 0.8f}, 1.1f)};
  const Shape shapes[] = {make_sphere(0.5f), make_box(Vec3{0.5f, 0.3f, 0.2f}), make_capsule(0.3f, 0.6f), make_plane()};
  const Vec3 translation{3, 4, 0};  // |t| = 5
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(static_cast<int>(shape.kind));
    ShapeRayHit hit;
    ASSERT_TRUE(raycast_shape(shape, tf, tf.position, translation, 1.0f, hit));
    EXPECT_EQ(hit.fraction, 0.0f);
    EXPECT_EQ(hit.point, tf.position);
    expect_vec_near(hit.normal, Vec3{-0.6f, -0.8f, 0}, kNormalTol, "normal");
    // Even with a max_fraction of 0.
    EXPECT_TRUE(raycast_shape(shape, tf, tf.position, translation, 0.0f, hit));
  }
  // On the surface counts as inside (closed solid): the top of a unit sphere, moving outward.
  ShapeRayHit hit;
  ASSERT_TRUE(raycast_shape(make_sphere(0.5f), kIdentity, Vec3{0, 0.5f, 0}, Vec3{0, 1, 0}, 1.0f, hit));
  EXPECT_EQ(hit.fraction, 0.0f);
  expect_vec_near(hit.normal, Vec3{0, -1, 0}, kNormalTol, "normal");
}

TEST(RaycastAllShapes, DegenerateInputsNeverHit) {
  const Shape shapes[] = {make_sphere(0.5f), make_box(Vec3{0.5f, 0.5f, 0.5f}), make_capsule(0.3f, 0.6f), make_plane()};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(static_cast<int>(shape.kind));
    ShapeRayHit hit;
    // Zero translation, even from inside.
    EXPECT_FALSE(raycast_shape(shape, kIdentity, Vec3{}, Vec3{}, 1.0f, hit));
    EXPECT_FALSE(raycast_shape(shape, kIdentity, Vec3{}, Vec3{1e-13f, 0, 0}, 1.0f, hit));
    EXPECT_FALSE(raycast_shape(shape, kIdentity, Vec3{0, 3, 0}, Vec3{}, 1.0f, hit));
    // Non-finite inputs and a negative or NaN max_fraction.
    EXPECT_FALSE(raycast_shape(shape, kIdentity, Vec3{nan, 3, 0}, Vec3{0, -6, 0}, 1.0f, hit));
    EXPECT_FALSE(raycast_shape(shape, kIdentity, Vec3{0, 3, 0}, Vec3{0, -inf, 0}, 1.0f, hit));
    EXPECT_FALSE(raycast_shape(shape, kIdentity, Vec3{0, 3, 0}, Vec3{0, -6, 0}, -0.1f, hit));
    EXPECT_FALSE(raycast_shape(shape, kIdentity, Vec3{0, 3, 0}, Vec3{0, -6, 0}, nan, hit));
    // While the same segment with a usable max_fraction hits, and an infinite one casts a ray.
    EXPECT_TRUE(raycast_shape(shape, kIdentity, Vec3{0, 3, 0}, Vec3{0, -6, 0}, 1.0f, hit));
    EXPECT_TRUE(raycast_shape(shape, kIdentity, Vec3{0, 3, 0}, Vec3{0, -0.1f, 0}, inf, hit));
  }
  Shape bogus = make_sphere(1.0f);
  bogus.kind = ShapeKind::Count;
  ShapeRayHit hit;
  EXPECT_FALSE(raycast_shape(bogus, kIdentity, Vec3{0, 3, 0}, Vec3{0, -6, 0}, 1.0f, hit));
}

// --- Randomised: against exact signed distance functions ----------------------------------------

struct DVec {
  double x, y, z;
};
DVec to_d(Vec3 v) { return {v.x, v.y, v.z}; }
double dlen(DVec v) { return std::sqrt(v.x * v.x + v.y * v.y + v.z * v.z); }

/// Exact signed distance [m] from world point p to the shape (negative inside), in double.
/// The world-to-local rotation uses the float quaternion's matrix in double.
double signed_distance(const Shape& shape, const Transform& tf, DVec p) {
  const Quat q = tf.rotation;
  const DVec w{p.x - tf.position.x, p.y - tf.position.y, p.z - tf.position.z};
  // Columns of R are the rotated local axes; local = R^T w.
  const Vec3 cols[3] = {rotate(q, Vec3{1, 0, 0}), rotate(q, Vec3{0, 1, 0}), rotate(q, Vec3{0, 0, 1})};
  double l[3];
  for (int i = 0; i < 3; ++i) l[i] = cols[i].x * w.x + cols[i].y * w.y + cols[i].z * w.z;
  switch (shape.kind) {
    case ShapeKind::Sphere:
      return dlen(w) - shape.radius;
    case ShapeKind::Box: {
      const double h[3] = {shape.half_extents.x, shape.half_extents.y, shape.half_extents.z};
      double outside = 0;
      double inside = -std::numeric_limits<double>::infinity();
      for (int i = 0; i < 3; ++i) {
        const double qi = std::abs(l[i]) - h[i];
        outside += std::max(qi, 0.0) * std::max(qi, 0.0);
        inside = std::max(inside, qi);
      }
      return std::sqrt(outside) + std::min(inside, 0.0);
    }
    case ShapeKind::Capsule: {
      const double hh = shape.half_height;
      const double y = std::clamp(l[1], -hh, hh);
      return dlen(DVec{l[0], l[1] - y, l[2]}) - shape.radius;
    }
    case ShapeKind::Plane:
    default:
      return l[1];
  }
}

/// True when p lies within 1 mm of two of a box's face planes (near an edge or corner), where
/// the normal is ambiguous and a finite-difference gradient mixes faces.
bool on_box_edge(const Shape& shape, const Transform& tf, DVec p) {
  if (shape.kind != ShapeKind::Box) return false;
  const Vec3 l = inverse_rotate(tf.rotation, Vec3{static_cast<float>(p.x), static_cast<float>(p.y),
                                                  static_cast<float>(p.z)} - tf.position);
  int near_faces = 0;
  for (int i = 0; i < 3; ++i) near_faces += std::abs(component(l, i)) > component(shape.half_extents, i) - 1e-3f;
  return near_faces > 1;
}

DVec at(DVec o, DVec d, double t) { return {o.x + d.x * t, o.y + d.y * t, o.z + d.z * t}; }

/// Minimum of the signed distance over the segment's parameters [t0, t1]: the SDF of a convex
/// solid is convex, so along a line it is convex in t and a ternary search converges to it.
double min_distance_on(const Shape& shape, const Transform& tf, DVec o, DVec d, double t0, double t1) {
  double lo = t0;
  double hi = t1;
  for (int i = 0; i < 200; ++i) {
    const double m1 = lo + (hi - lo) / 3;
    const double m2 = hi - (hi - lo) / 3;
    if (signed_distance(shape, tf, at(o, d, m1)) < signed_distance(shape, tf, at(o, d, m2))) {
      hi = m2;
    } else {
      lo = m1;
    }
  }
  return std::min({signed_distance(shape, tf, at(o, d, t0)), signed_distance(shape, tf, at(o, d, t1)),
                   signed_distance(shape, tf, at(o, d, 0.5 * (lo + hi)))});
}

Quat random_rotation(Rng& rng) {
  return normalize(Quat{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)});
}

Shape random_shape(Rng& rng, ShapeKind kind) {
  switch (kind) {
    case ShapeKind::Sphere:
      return make_sphere(rng.uniform(0.1f, 2.0f));
    case ShapeKind::Box:
      return make_box(Vec3{rng.uniform(0.05f, 2.0f), rng.uniform(0.05f, 2.0f), rng.uniform(0.05f, 2.0f)});
    case ShapeKind::Capsule:
      return make_capsule(rng.uniform(0.1f, 1.0f), rng.uniform(0.0f, 2.0f));
    case ShapeKind::Plane:
    default:
      return make_plane();
  }
}

class RaycastRandom : public ::testing::TestWithParam<ShapeKind> {};

TEST_P(RaycastRandom, AgreesWithTheSignedDistance) {
  // Tolerance on distances [m]: segments are ~10 m long, so float rounding is ~1e-6 m.
  constexpr double kTol = 2.0e-5;
  Rng rng(1000 + static_cast<uint64_t>(GetParam()));
  int hits = 0;
  int misses = 0;
  int inside = 0;
  for (int i = 0; i < 4000; ++i) {
    const Shape shape = random_shape(rng, GetParam());
    const Transform tf{Vec3{rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-3, 3)}, random_rotation(rng)};
    // Origins around the shape, aimed near its centre so that hits, grazes and misses all occur.
    // One case in ten starts near the centre, so start-inside cases are common for every kind.
    const Vec3 origin = i % 10 == 0 ? tf.position + Vec3{rng.uniform(-0.1f, 0.1f), rng.uniform(-0.1f, 0.1f),
                                                         rng.uniform(-0.1f, 0.1f)}
                                    : Vec3{rng.uniform(-6, 6), rng.uniform(-6, 6), rng.uniform(-6, 6)};
    const Vec3 aim = tf.position + Vec3{rng.uniform(-1.5f, 1.5f), rng.uniform(-1.5f, 1.5f), rng.uniform(-1.5f, 1.5f)};
    const Vec3 translation = (aim - origin) * rng.uniform(0.5f, 2.5f);
    const DVec o = to_d(origin);
    const DVec d = to_d(translation);
    const double len = dlen(d);
    SCOPED_TRACE(::testing::Message() << "case " << i);

    ShapeRayHit hit;
    if (!raycast_shape(shape, tf, origin, translation, 1.0f, hit)) {
      ++misses;
      // No point of the segment is inside.
      ASSERT_GT(min_distance_on(shape, tf, o, d, 0.0, 1.0), -kTol);
      continue;
    }
    ASSERT_GE(hit.fraction, 0.0f);
    ASSERT_LE(hit.fraction, 1.0f);
    EXPECT_NEAR(length(hit.normal), 1.0f, kNormalTol);
    if (hit.fraction == 0.0f) {
      ++inside;
      ASSERT_LE(signed_distance(shape, tf, o), kTol);
      expect_vec_near(hit.normal, translation * (-1.0f / length(translation)), kNormalTol, "inside normal");
      continue;
    }
    ++hits;
    const DVec p = at(o, d, hit.fraction);
    // On the surface, and nothing before it is inside.
    ASSERT_NEAR(signed_distance(shape, tf, p), 0.0, kTol);
    ASSERT_GT(min_distance_on(shape, tf, o, d, 0.0, hit.fraction), -kTol);
    expect_vec_near(hit.point, origin + translation * hit.fraction, kFractionTol * static_cast<float>(len), "point");
    // The normal is the SDF gradient (central differences), away from the box's edges where it
    // is undefined; there it must still face the incoming segment.
    if (on_box_edge(shape, tf, p)) {
      EXPECT_LE(dot(hit.normal, translation), 0.0f);
      continue;
    }
    const double e = 1.0e-4;
    const DVec g{(signed_distance(shape, tf, {p.x + e, p.y, p.z}) - signed_distance(shape, tf, {p.x - e, p.y, p.z})) / (2 * e),
                 (signed_distance(shape, tf, {p.x, p.y + e, p.z}) - signed_distance(shape, tf, {p.x, p.y - e, p.z})) / (2 * e),
                 (signed_distance(shape, tf, {p.x, p.y, p.z + e}) - signed_distance(shape, tf, {p.x, p.y, p.z - e})) / (2 * e)};
    EXPECT_NEAR(hit.normal.x, g.x, 1e-3);
    EXPECT_NEAR(hit.normal.y, g.y, 1e-3);
    EXPECT_NEAR(hit.normal.z, g.z, 1e-3);
    EXPECT_LE(dot(hit.normal, translation), 0.0f);
  }
  // The sampling must exercise every outcome (planes have no "miss" from above only when aimed away).
  EXPECT_GT(hits, 400);
  EXPECT_GT(misses, GetParam() == ShapeKind::Plane ? 100 : 400);
  EXPECT_GT(inside, 20);
}

std::string shape_name(const ::testing::TestParamInfo<ShapeKind>& info) {
  switch (info.param) {
    case ShapeKind::Sphere: return "Sphere";
    case ShapeKind::Box: return "Box";
    case ShapeKind::Capsule: return "Capsule";
    default: return "Plane";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RaycastRandom,
                         ::testing::Values(ShapeKind::Sphere, ShapeKind::Box, ShapeKind::Capsule, ShapeKind::Plane),
                         shape_name);

}  // namespace
}  // namespace impulse::physics
