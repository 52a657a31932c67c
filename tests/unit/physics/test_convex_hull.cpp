// Convex hulls: construction, mass properties against closed forms, contacts against the box's
// exact results, resting and stacking, raycasts against brute force, save and restore.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "server/physics/convex_hull.h"
#include "server/physics/narrowphase.h"
#include "server/physics/raycast.h"
#include "server/physics/world.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::state;

std::vector<Vec3> box_points(Vec3 h, Vec3 centre = {}) {
  std::vector<Vec3> p;
  for (int v = 0; v < 8; ++v) {
    p.push_back(centre + Vec3{(v & 1) ? h.x : -h.x, (v & 2) ? h.y : -h.y, (v & 4) ? h.z : -h.z});
  }
  return p;
}

ConvexHull built(const std::vector<Vec3>& points) {
  HullBuild b = build_convex_hull(points);
  EXPECT_TRUE(b.ok()) << b.error;
  return b.hull;
}

/// A hull cube's body: the hull added to `world`, at `position`.
BodyDesc hull_desc(World& world, const ConvexHull& hull, Vec3 position, float mass = 1.0f) {
  BodyDesc d;
  const ConvexHull* h = world.add_hull(hull);
  EXPECT_NE(h, nullptr);
  d.shape = make_hull(*h);
  d.position = position;
  d.mass = mass;
  return d;
}

TEST(ConvexHullBuild, ABoxsCornersWithInteriorPointsGiveTheBox) {
  std::vector<Vec3> points = box_points({0.5f, 1.0f, 1.5f}, {2.0f, 3.0f, -1.0f});
  points.push_back({2.0f, 3.0f, -1.0f});  // interior points are dropped
  points.push_back({2.1f, 3.2f, -0.5f});
  const ConvexHull h = built(points);
  EXPECT_EQ(h.vertices.size(), 8u);
  EXPECT_EQ(h.faces.size(), 6u);  // coplanar facets merged into quads
  EXPECT_EQ(h.edges.size(), 12u);
  EXPECT_NEAR(h.volume, 1.0f * 2.0f * 3.0f, 1e-5f);
  // The centre of mass is the box's centre; the principal frame is the input's axes.
  EXPECT_NEAR(h.origin.x, 2.0f, 1e-6f);
  EXPECT_NEAR(h.origin.y, 3.0f, 1e-6f);
  EXPECT_NEAR(h.origin.z, -1.0f, 1e-6f);
  EXPECT_NEAR(std::fabs(h.rotation.w), 1.0f, 1e-6f);
  // Box moments per unit mass: (b^2 + c^2) / 3 for half extents b, c.
  EXPECT_NEAR(h.unit_inertia.x, (1.0f + 2.25f) / 3.0f, 1e-5f);
  EXPECT_NEAR(h.unit_inertia.y, (0.25f + 2.25f) / 3.0f, 1e-5f);
  EXPECT_NEAR(h.unit_inertia.z, (0.25f + 1.0f) / 3.0f, 1e-5f);
  EXPECT_NEAR(h.inner_radius, 0.5f, 1e-6f);
  EXPECT_NEAR(h.radius, std::sqrt(0.25f + 1.0f + 2.25f), 1e-5f);
  EXPECT_EQ(check_hull(h), "");
  for (const HullPlane& p : h.planes) EXPECT_NEAR(length(p.normal), 1.0f, 1e-6f);
}

// The right-angled tetrahedron (0, a e_x, b e_y, c e_z): volume abc/6, centroid (a, b, c)/4, and
// second moments about the origin abc a^2/60 (diagonal) and abc ab/120 (off-diagonal). Principal
// moments are compared through the rotation invariants of the inertia tensor: trace and determinant.
TEST(ConvexHullBuild, ATetrahedronsMassPropertiesMatchTheClosedForm) {
  const double a = 1.0, b = 2.0, c = 3.0;
  const ConvexHull h = built({{0, 0, 0}, {1, 0, 0}, {0, 2, 0}, {0, 0, 3}});
  const double volume = a * b * c / 6.0;
  EXPECT_NEAR(h.volume, volume, 1e-6);
  EXPECT_NEAR(h.origin.x, a / 4, 1e-6);
  EXPECT_NEAR(h.origin.y, b / 4, 1e-6);
  EXPECT_NEAR(h.origin.z, c / 4, 1e-6);
  const double d[3] = {a, b, c};
  double cov[3][3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      cov[i][j] = a * b * c * d[i] * d[j] / (i == j ? 60.0 : 120.0) - volume * (d[i] / 4) * (d[j] / 4);
    }
  }
  const double tr = cov[0][0] + cov[1][1] + cov[2][2];
  double inertia[3][3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) inertia[i][j] = ((i == j) ? tr : 0.0) - cov[i][j];
  }
  const double trace = inertia[0][0] + inertia[1][1] + inertia[2][2];
  const double det = inertia[0][0] * (inertia[1][1] * inertia[2][2] - inertia[1][2] * inertia[2][1]) -
                     inertia[0][1] * (inertia[1][0] * inertia[2][2] - inertia[1][2] * inertia[2][0]) +
                     inertia[0][2] * (inertia[1][0] * inertia[2][1] - inertia[1][1] * inertia[2][0]);
  const Vec3 m = h.unit_inertia * h.volume;
  EXPECT_NEAR(m.x + m.y + m.z, trace, 1e-5 * trace);
  EXPECT_NEAR(double(m.x) * m.y * m.z, det, 1e-4 * det);
}

// The hull's frame maps its vertices back onto input points: x_input = origin + R x_hull.
TEST(ConvexHullBuild, ThePrincipalFrameMapsVerticesBackOntoTheInput) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<Vec3> points;
    for (int i = 0; i < 30; ++i) points.push_back(Vec3{3.0f + 0.7f * u(rng), -2.0f + 0.4f * u(rng), 0.3f * u(rng)});
    const ConvexHull h = built(points);
    ASSERT_FALSE(h.vertices.empty());
    for (const Vec3& v : h.vertices) {
      const Vec3 back = h.origin + rotate(h.rotation, v);
      float best = 1e30f;
      for (const Vec3& p : points) best = std::min(best, length(back - p));
      EXPECT_LT(best, 2e-6f) << "trial " << trial;
    }
    EXPECT_EQ(check_hull(h), "") << "trial " << trial;
    // Euler: V - E + F = 2 and each face's plane has every vertex behind it.
    EXPECT_EQ(h.vertices.size() + h.faces.size(), h.edges.size() + 2);
  }
}

TEST(ConvexHullBuild, DegenerateInputIsRefusedWithAClearError) {
  EXPECT_NE(build_convex_hull(std::vector<Vec3>{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}}).error.find("at least 4"),
            std::string::npos);
  std::vector<Vec3> flat;
  for (int i = 0; i < 10; ++i) flat.push_back({float(i % 3), 0.0f, float(i / 3)});
  EXPECT_FALSE(build_convex_hull(flat).ok());
  std::vector<Vec3> line;
  for (int i = 0; i < 10; ++i) line.push_back({float(i), 2.0f * float(i), 0.0f});
  EXPECT_FALSE(build_convex_hull(line).ok());
  EXPECT_FALSE(build_convex_hull(std::vector<Vec3>(8, Vec3{1, 2, 3})).ok());
  std::vector<Vec3> nan = box_points({1, 1, 1});
  nan[3].y = std::nanf("");
  EXPECT_NE(build_convex_hull(nan).error.find("points[3]"), std::string::npos);
  std::vector<Vec3> far = box_points({1, 1, 1});
  far[0].x = 1e6f;
  EXPECT_FALSE(build_convex_hull(far).ok());
  // A sheet 0.1 mm thick has volume but no solid inside.
  EXPECT_FALSE(build_convex_hull(box_points({1.0f, 0.5e-4f, 1.0f})).ok());
  // 200 points on a sphere make a hull of 200 vertices: over the limit, refused, not decimated.
  std::vector<Vec3> ball;
  for (int i = 0; i < 200; ++i) {
    const float z = 1.0f - 2.0f * (float(i) + 0.5f) / 200.0f;
    const float r = std::sqrt(1.0f - z * z);
    const float phi = 2.399963f * float(i);
    ball.push_back({r * std::cos(phi), r * std::sin(phi), z});
  }
  const HullBuild b = build_convex_hull(ball);
  EXPECT_NE(b.error.find("more than 64"), std::string::npos) << b.error;
  EXPECT_FALSE(build_convex_hull(std::vector<Vec3>(kMaxHullInputPoints + 1, Vec3{})).ok());
}

TEST(ConvexHullBuild, TheSamePointsGiveTheSameHullBitForBit) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<Vec3> points;
  for (int i = 0; i < 40; ++i) points.push_back({u(rng), u(rng), u(rng)});
  EXPECT_TRUE(built(points) == built(points));
}

// A hull box must collide exactly as the box does: same normal, same deepest separation, and the
// same number of points, over a sweep of poses against a ground box, a plane and a sphere.
TEST(HullContacts, AHullBoxCollidesAsTheBoxDoes) {
  World world;
  const Vec3 half{0.5f, 0.3f, 0.4f};
  const ConvexHull* hull = world.add_hull(built(box_points(half)));
  ASSERT_NE(hull, nullptr);
  const Shape as_hull = make_hull(*hull);
  const Shape as_box = make_box(half);
  const Shape others[] = {make_box({2.0f, 0.5f, 2.0f}), make_sphere(0.4f), make_capsule(0.2f, 0.5f), make_box(half)};
  int compared = 0;
  for (int yaw = 0; yaw < 8; ++yaw) {
    for (int tilt = 0; tilt < 5; ++tilt) {
      for (int h = 0; h < 4; ++h) {
        const Quat q = quat_from_axis_angle(Vec3{0, 1, 0}, 0.39f * float(yaw)) *
                       quat_from_axis_angle(normalize_or(Vec3{1, 0, 0.3f}, Vec3{1, 0, 0}), 0.21f * float(tilt));
        const Transform t_moving{{0.1f, 0.95f - 0.03f * float(h), -0.05f}, q};
        for (const Shape& other : others) {
          const Transform t_other{{0.0f, other.kind == ShapeKind::Box && other.half_extents.x > 1.0f ? 0.0f : 0.2f, 0.0f},
                                  Quat{}};
          Manifold mb;
          Manifold mh;
          const bool hb = collide(other, t_other, as_box, t_moving, 0.02f, mb);
          const bool hh = collide(other, t_other, as_hull, t_moving, 0.02f, mh);
          ASSERT_EQ(hb, hh) << "yaw " << yaw << " tilt " << tilt << " h " << h << " kind " << int(other.kind);
          if (!hb) continue;
          float deep_b = 1e30f, deep_h = 1e30f;
          for (int i = 0; i < mb.point_count; ++i) deep_b = std::min(deep_b, mb.points[i].separation);
          for (int i = 0; i < mh.point_count; ++i) deep_h = std::min(deep_h, mh.points[i].separation);
          EXPECT_NEAR(deep_b, deep_h, 2e-4f) << "yaw " << yaw << " tilt " << tilt << " h " << h << " kind "
                                             << int(other.kind);
          EXPECT_GT(dot(mb.normal, mh.normal), 0.999f) << "yaw " << yaw << " tilt " << tilt << " kind " << int(other.kind);
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 200);
  // The plane: the same points as plane-box.
  const Shape plane = make_plane();
  for (int tilt = 0; tilt < 8; ++tilt) {
    const Transform t{{0.0f, 0.45f, 0.0f}, quat_from_axis_angle(Vec3{0, 0, 1}, 0.1f * float(tilt))};
    Manifold mb;
    Manifold mh;
    ASSERT_EQ(collide(plane, Transform{}, as_box, t, 0.02f, mb), collide(plane, Transform{}, as_hull, t, 0.02f, mh));
    ASSERT_EQ(mb.point_count, mh.point_count) << tilt;
  }
}

TEST(HullContacts, HullVsHullFaceContactHasFourPointsAndSeparatedHullsNone) {
  World world;
  const ConvexHull* hull = world.add_hull(built(box_points({0.5f, 0.5f, 0.5f})));
  const Shape s = make_hull(*hull);
  Manifold m;
  // Flush, 1 mm deep, rotated 30 degrees about the normal: an octagon clipped, reduced to 4.
  ASSERT_TRUE(collide(s, Transform{}, s, Transform{{0.0f, 0.999f, 0.0f}, quat_from_axis_angle({0, 1, 0}, 0.5236f)},
                      0.02f, m));
  EXPECT_EQ(m.point_count, 4);
  EXPECT_NEAR(m.normal.y, 1.0f, 1e-5f);
  for (int i = 0; i < m.point_count; ++i) EXPECT_NEAR(m.points[i].separation, -0.001f, 1e-5f);
  EXPECT_FALSE(collide(s, Transform{}, s, Transform{{0.0f, 1.05f, 0.0f}, Quat{}}, 0.02f, m));
  // Edge on edge: both cubes turned 45 degrees about crossing axes.
  const Transform ta{{0, 0, 0}, quat_from_axis_angle({1, 0, 0}, 0.7854f)};
  const Transform tb{{0, 1.40f, 0}, quat_from_axis_angle({0, 0, 1}, 0.7854f)};
  ASSERT_TRUE(collide(s, ta, s, tb, 0.02f, m));
  EXPECT_EQ(m.point_count, 1);
  EXPECT_NEAR(m.normal.y, 1.0f, 1e-4f);
  EXPECT_NEAR(m.points[0].separation, 1.40f - 2.0f * 0.70711f, 1e-4f);
}

TEST(HullWorld, AHullCubeRestsOnTheGroundLikeABoxOverASweepOfDropHeights) {
  for (int k = 0; k < 12; ++k) {
    World world;
    add_ground(world);
    const float drop = 0.5f + 0.137f * float(k);
    const ObjectID cube = add(world, hull_desc(world, built(box_points({0.5f, 0.5f, 0.5f})), {0.0f, drop, 0.0f}));
    for (int i = 0; i < 180; ++i) world.step(1.0f / 60.0f);
    const BodyState s = state(world, cube);
    EXPECT_NEAR(s.position.y, 0.5f, 0.01f) << "drop " << drop;
    EXPECT_LT(length(s.velocity), 0.01f) << "drop " << drop;
    EXPECT_NEAR(std::fabs(s.orientation.w), 1.0f, 1e-3f) << "drop " << drop;
  }
}

// The stack: 10 hulls, each a box 0.1 m narrower than the one below, settle and sleep.
TEST(HullWorld, AStackOfTenHullsSettlesAndSleeps) {
  World world;
  add_ground(world);
  std::vector<ObjectID> ids;
  float y = 0.0f;
  for (int i = 0; i < 10; ++i) {
    const float hx = 0.8f - 0.05f * float(i);
    const float hy = 0.25f;
    ids.push_back(add(world, hull_desc(world, built(box_points({hx, hy, hx})), {0.0f, y + hy + 0.001f, 0.0f})));
    y += 2.0f * hy + 0.002f;
  }
  bool asleep = false;
  for (int i = 0; i < 600 && !asleep; ++i) {
    world.step(1.0f / 60.0f);
    asleep = std::all_of(ids.begin(), ids.end(), [&](ObjectID id) { return state(world, id).sleeping; });
  }
  EXPECT_TRUE(asleep);
  for (int i = 0; i < 10; ++i) {
    const BodyState s = state(world, ids[static_cast<size_t>(i)]);
    EXPECT_NEAR(s.position.y, 0.25f + 0.5f * float(i), 0.02f) << "hull " << i;
    EXPECT_LT(std::fabs(s.position.x) + std::fabs(s.position.z), 0.02f) << "hull " << i;
  }
}

// Irregular rocks (random hulls) dropped on the ground, a box and each other come to rest above
// the ground (no vertex below -1 cm), and the world stays finite.
TEST(HullWorld, RandomRocksComeToRestOnTheGroundAndOnEachOther) {
  World world;
  add_ground(world);
  add(world, test::box_desc({0.0f, 0.5f, 0.0f}, {0.5f, 0.5f, 0.5f}, 2.0f));
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<ObjectID> rocks;
  for (int r = 0; r < 12; ++r) {
    std::vector<Vec3> points;
    for (int i = 0; i < 24; ++i) points.push_back({0.4f * u(rng), 0.3f * u(rng), 0.35f * u(rng)});
    const HullBuild b = build_convex_hull(points);
    ASSERT_TRUE(b.ok()) << b.error;
    rocks.push_back(add(world, hull_desc(world, b.hull, {0.3f * u(rng), 1.5f + 0.8f * float(r), 0.3f * u(rng)},
                                         1.0f + 0.2f * float(r))));
  }
  for (int i = 0; i < 600; ++i) world.step(1.0f / 60.0f);
  for (const ObjectID id : rocks) {
    const BodyState s = state(world, id);
    ASSERT_TRUE(is_finite(s.position));
    EXPECT_LT(length(s.velocity), 0.05f);
    float lowest = 1e30f;
    for (const Vec3& v : s.shape.hull->vertices) lowest = std::min(lowest, (s.position + rotate(s.orientation, v)).y);
    EXPECT_GT(lowest, -0.01f);
  }
}

TEST(HullWorld, SpheresAndCapsulesRestOnAHullWithoutRolling) {
  World world;
  const ConvexHull* h = world.add_hull(built(box_points({2.0f, 0.5f, 2.0f})));
  BodyDesc slab;
  slab.kind = BodyKind::Static;
  slab.shape = make_hull(*h);
  slab.position = {0.0f, -0.5f, 0.0f};
  add(world, slab);
  const ObjectID ball = add(world, test::sphere_desc({-1.0f, 0.6f, 0.0f}, 0.5f));
  BodyDesc cap;
  cap.shape = make_capsule(0.25f, 0.5f);
  cap.position = {1.0f, 0.4f, 0.5f};
  cap.orientation = quat_from_axis_angle({0, 0, 1}, 1.5707963f);  // lying along x
  const ObjectID capsule = add(world, cap);
  for (int i = 0; i < 240; ++i) world.step(1.0f / 60.0f);
  const BodyState b = state(world, ball);
  const BodyState c = state(world, capsule);
  EXPECT_NEAR(b.position.y, 0.5f, 0.01f);
  EXPECT_NEAR(c.position.y, 0.25f, 0.01f);
  EXPECT_NEAR(b.position.x, -1.0f, 1e-3f);
  EXPECT_NEAR(c.position.x, 1.0f, 1e-3f);
  EXPECT_LT(length(c.angular_velocity), 1e-2f);
}

// Raycasts against a hull agree with brute force over its face triangles (Möller-Trumbore).
TEST(HullRaycast, AgreesWithBruteForceOverTheFaceTriangles) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<Vec3> points;
  for (int i = 0; i < 40; ++i) points.push_back({u(rng), 0.6f * u(rng), 0.8f * u(rng)});
  World world;
  const ConvexHull* h = world.add_hull(built(points));
  ASSERT_NE(h, nullptr);
  const Shape s = make_hull(*h);
  const Transform t{{1.0f, 2.0f, -0.5f}, normalize(Quat{0.2f, 0.5f, -0.1f, 0.8f})};
  int hits = 0;
  for (int k = 0; k < 2000; ++k) {
    const Vec3 origin = t.position + Vec3{u(rng), u(rng), u(rng)} * 3.0f;
    if (length(origin - t.position) < 1.8f) continue;  // outside the hull
    const Vec3 target = t.position + Vec3{u(rng), u(rng), u(rng)} * 0.8f;
    const Vec3 translation = (target - origin) * 1.5f;
    // Brute force: every face fan triangle in the world frame.
    float best = 1e30f;
    for (const HullFace& f : h->faces) {
      const Vec3 a = t.position + rotate(t.rotation, h->vertices[h->face_vertices[f.first]]);
      for (int i = 1; i + 1 < f.count; ++i) {
        const Vec3 b = t.position + rotate(t.rotation, h->vertices[h->face_vertices[f.first + i]]);
        const Vec3 c = t.position + rotate(t.rotation, h->vertices[h->face_vertices[f.first + i + 1]]);
        const Vec3 e1 = b - a, e2 = c - a;
        const Vec3 p = cross(translation, e2);
        const float det = dot(e1, p);
        if (std::fabs(det) < 1e-12f) continue;
        const Vec3 tv = origin - a;
        const float uu = dot(tv, p) / det;
        const Vec3 q = cross(tv, e1);
        const float vv = dot(translation, q) / det;
        const float tt = dot(e2, q) / det;
        if (uu >= 0 && vv >= 0 && uu + vv <= 1 && tt >= 0 && tt <= 1) best = std::min(best, tt);
      }
    }
    ShapeRayHit hit;
    const bool got = raycast_shape(s, t, origin, translation, 1.0f, hit);
    if (best > 1.0f) {
      // A miss by brute force may still graze an edge within float noise.
      if (got) {
        EXPECT_GT(hit.fraction, 0.0f);
      }
      continue;
    }
    ASSERT_TRUE(got) << "ray " << k;
    EXPECT_NEAR(hit.fraction, best, 1e-4f) << "ray " << k;
    ++hits;
  }
  EXPECT_GT(hits, 300);
}

TEST(HullWorld, SaveAndRestoreKeepTheHullsAndReplayBitExactly) {
  World world;
  add_ground(world);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int r = 0; r < 6; ++r) {
    std::vector<Vec3> points;
    for (int i = 0; i < 16; ++i) points.push_back({0.3f * u(rng), 0.3f * u(rng), 0.3f * u(rng)});
    add(world, hull_desc(world, built(points), {0.1f * float(r), 0.5f + 0.7f * float(r), 0.0f}));
  }
  for (int i = 0; i < 30; ++i) world.step(1.0f / 60.0f);
  std::vector<uint8_t> blob;
  world.save_state(blob);
  World copy;
  std::string error;
  ASSERT_TRUE(copy.restore_state(blob, &error)) << error;
  EXPECT_EQ(copy.hulls().size(), 6u);
  EXPECT_EQ(copy.world_hash(), world.world_hash());
  for (int i = 0; i < 60; ++i) {
    world.step(1.0f / 60.0f);
    copy.step(1.0f / 60.0f);
  }
  EXPECT_EQ(copy.world_hash(), world.world_hash());
}

TEST(HullWorld, AHullOfAnotherWorldOrNoneIsRefused) {
  World a;
  World b;
  const ConvexHull* h = a.add_hull(built(box_points({0.5f, 0.5f, 0.5f})));
  ASSERT_NE(h, nullptr);
  BodyDesc d;
  d.shape = make_hull(*h);
  EXPECT_EQ(b.create_object(d).error, Error::InvalidArgument);
  EXPECT_EQ(a.create_object(d).error, Error::Ok);
  d.shape.hull = nullptr;
  EXPECT_EQ(a.create_object(d).error, Error::InvalidArgument);
  // Adding an equal hull twice returns the same one.
  EXPECT_EQ(a.add_hull(built(box_points({0.5f, 0.5f, 0.5f}))), h);
  EXPECT_EQ(a.hulls().size(), 1u);
  // A hull with a broken invariant is refused with the reason.
  ConvexHull bad = *h;
  bad.edges[0].f1 = 200;
  std::string error;
  EXPECT_EQ(a.add_hull(bad, &error), nullptr);
  EXPECT_NE(error.find("edges"), std::string::npos) << error;
}

}  // namespace
}  // namespace impulse::physics
