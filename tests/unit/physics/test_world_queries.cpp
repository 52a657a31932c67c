// World::raycast_closest, raycast_all and overlap_aabb: closed-form hits on a small scene, the
// current pose of bodies that moved since the broadphase last ran, sleeping bodies, and random
// worlds checked against a brute-force cast over every object.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "server/physics/narrowphase.h"
#include "server/physics/raycast.h"
#include "server/physics/world.h"
#include "tests/support/rng.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using ::impulse::test::Rng;
using test::add;
using test::state;

constexpr float kTol = 1.0e-5f;  // fractions and unit normals; points scale with the 20 m rays

void expect_vec_near(Vec3 got, Vec3 want, float tol) {
  EXPECT_NEAR(got.x, want.x, tol);
  EXPECT_NEAR(got.y, want.y, tol);
  EXPECT_NEAR(got.z, want.z, tol);
}

BodyDesc static_desc(const Shape& shape, Vec3 position, Quat orientation = {}) {
  BodyDesc d;
  d.kind = BodyKind::Static;
  d.shape = shape;
  d.position = position;
  d.orientation = orientation;
  return d;
}

BodyDesc dynamic_desc(const Shape& shape, Vec3 position, Quat orientation = {}) {
  BodyDesc d = static_desc(shape, position, orientation);
  d.kind = BodyKind::Dynamic;
  return d;
}

/// Every object the segment hits, by raycast_shape on each object's state: what the World's
/// broadphase-filtered answer must equal exactly.
std::vector<RayHit> brute_force_all(const World& world, Vec3 origin, Vec3 translation) {
  std::vector<RayHit> hits;
  world.for_each_object([&](const BodyState& s) {
    ShapeRayHit h;
    if (raycast_shape(s.shape, Transform{s.position, s.orientation}, origin, translation, 1.0f, h)) {
      hits.push_back(RayHit{s.id, h.point, h.normal, h.fraction});
    }
  });
  std::sort(hits.begin(), hits.end(), [](const RayHit& l, const RayHit& r) {
    return l.fraction != r.fraction ? l.fraction < r.fraction : l.id < r.id;
  });
  return hits;
}

/// Every object whose shape AABB, enlarged by the speculative margin, overlaps `box`.
std::vector<ObjectID> brute_force_overlap(const World& world, const Aabb& box) {
  std::vector<ObjectID> ids;
  const float m = world.settings().speculative_margin;
  world.for_each_object([&](const BodyState& s) {
    const Aabb tight = compute_aabb(s.shape, Transform{s.position, s.orientation});
    const Aabb fat{tight.min - Vec3{m, m, m}, tight.max + Vec3{m, m, m}};
    if (overlaps(fat, box)) ids.push_back(s.id);
  });
  std::sort(ids.begin(), ids.end());
  return ids;
}

void expect_same_hits(const std::vector<RayHit>& got, const std::vector<RayHit>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << i;
    EXPECT_EQ(got[i].fraction, want[i].fraction) << i;
    EXPECT_EQ(got[i].point, want[i].point) << i;
    EXPECT_EQ(got[i].normal, want[i].normal) << i;
  }
}

constexpr float kPi = 3.14159265358979f;

TEST(WorldQueries, ClosedFormsOnASmallScene) {
  World world;
  const ObjectID ground = add(world, static_desc(make_plane(), Vec3{0, 0, 0}));
  const ObjectID box = add(world, static_desc(make_box(Vec3{1, 1, 1}), Vec3{5, 1, 0}));
  const ObjectID ball = add(world, dynamic_desc(make_sphere(0.5f), Vec3{0, 3, 0}));
  // Lying along world x (90 degrees about +Z maps local +Y to -X): core from x = -5 to -3.
  const ObjectID capsule = add(world, dynamic_desc(make_capsule(0.5f, 1.0f), Vec3{-4, 1.2f, 0},
                                                   quat_from_axis_angle(Vec3{0, 0, 1}, kPi / 2)));
  BodyDesc sensor_desc = dynamic_desc(make_sphere(0.5f), Vec3{0, 6, 0});
  sensor_desc.sensor = true;
  const ObjectID sensor = add(world, sensor_desc);

  // Straight down through the sensor (top y = 6.5), the ball (3.5) and the ground (0).
  const Vec3 origin{0, 10, 0};
  const Vec3 down{0, -20, 0};
  const std::optional<RayHit> first = world.raycast_closest(origin, down);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->id, sensor);  // sensors are included
  EXPECT_NEAR(first->fraction, 3.5f / 20.0f, kTol);
  expect_vec_near(first->point, Vec3{0, 6.5f, 0}, 20 * kTol);
  expect_vec_near(first->normal, Vec3{0, 1, 0}, kTol);

  std::vector<RayHit> all;
  world.raycast_all(origin, down, all);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, sensor);
  EXPECT_EQ(all[1].id, ball);
  EXPECT_NEAR(all[1].fraction, 6.5f / 20.0f, kTol);
  EXPECT_EQ(all[2].id, ground);
  EXPECT_NEAR(all[2].fraction, 0.5f, kTol);
  expect_vec_near(all[2].normal, Vec3{0, 1, 0}, kTol);
  expect_same_hits(all, brute_force_all(world, origin, down));

  // Along +x at y = 1: the capsule's end sphere around (-5, 1.2, 0) at x = -5 - sqrt(0.21),
  // then the box's -x face at x = 4.
  const Vec3 east{20, 0, 0};
  world.raycast_all(Vec3{-10, 1, 0}, east, all);
  ASSERT_EQ(all.size(), 2u);
  const float root = std::sqrt(0.21f);
  EXPECT_EQ(all[0].id, capsule);
  EXPECT_NEAR(all[0].fraction, (5 - root) / 20, kTol);
  expect_vec_near(all[0].normal, Vec3{-root / 0.5f, -0.4f, 0}, kTol);
  EXPECT_EQ(all[1].id, box);
  EXPECT_NEAR(all[1].fraction, 14.0f / 20.0f, kTol);
  expect_vec_near(all[1].normal, Vec3{-1, 0, 0}, kTol);

  // A 1 mm near miss over the box's top face (y = 2) finds nothing.
  EXPECT_FALSE(world.raycast_closest(Vec3{2, 2.001f, 0}, Vec3{6, 0, 0}).has_value());

  // Starting inside the box: fraction 0, normal against the motion.
  const std::optional<RayHit> inside = world.raycast_closest(Vec3{5, 1, 0}, Vec3{0, 0, 3});
  ASSERT_TRUE(inside.has_value());
  EXPECT_EQ(inside->id, box);
  EXPECT_EQ(inside->fraction, 0.0f);
  expect_vec_near(inside->normal, Vec3{0, 0, -1}, kTol);

  // Degenerate rays: nothing, and `out` is cleared.
  EXPECT_FALSE(world.raycast_closest(origin, Vec3{}).has_value());
  world.raycast_all(origin, Vec3{}, all);
  EXPECT_TRUE(all.empty());
  EXPECT_FALSE(world.raycast_closest(Vec3{std::numeric_limits<float>::quiet_NaN(), 0, 0}, down).has_value());

  // AABB overlap: the ball alone, then everything above the ground's top (the plane's AABB
  // reaches y = margin).
  std::vector<ObjectID> ids;
  world.overlap_aabb(Aabb{Vec3{-0.1f, 2.9f, -0.1f}, Vec3{0.1f, 3.1f, 0.1f}}, ids);
  EXPECT_EQ(ids, (std::vector<ObjectID>{ball}));
  world.overlap_aabb(Aabb{Vec3{-100, 0.5f, -100}, Vec3{100, 100, 100}}, ids);
  EXPECT_EQ(ids, (std::vector<ObjectID>{box, ball, capsule, sensor}));
  const float inf = std::numeric_limits<float>::infinity();
  const Aabb everything{Vec3{-inf, -inf, -inf}, Vec3{inf, inf, inf}};
  world.overlap_aabb(everything, ids);
  EXPECT_EQ(ids, (std::vector<ObjectID>{ground, box, ball, capsule, sensor}));
  world.overlap_aabb(Aabb{Vec3{1, 1, 1}, Vec3{0, 0, 0}}, ids);  // inverted: nothing
  EXPECT_TRUE(ids.empty());
}

TEST(WorldQueries, TiesGoToTheSmallerIdAndDestroyedBodiesVanish) {
  World world;
  const ObjectID a = add(world, static_desc(make_box(Vec3{1, 1, 1}), Vec3{0, 0, 0}));
  const ObjectID b = add(world, static_desc(make_box(Vec3{1, 1, 1}), Vec3{0, 0, 0}));
  const ObjectID c = add(world, dynamic_desc(make_box(Vec3{1, 1, 1}), Vec3{0, 0, 0}));
  ASSERT_LT(a, b);
  ASSERT_LT(b, c);
  const Vec3 origin{-5, 0, 0};
  const Vec3 translation{10, 0, 0};
  std::optional<RayHit> hit = world.raycast_closest(origin, translation);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, a);
  std::vector<RayHit> all;
  world.raycast_all(origin, translation, all);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, a);
  EXPECT_EQ(all[1].id, b);
  EXPECT_EQ(all[2].id, c);
  EXPECT_EQ(all[0].fraction, all[2].fraction);

  ASSERT_EQ(world.destroy_object(a), Error::Ok);
  hit = world.raycast_closest(origin, translation);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, b);
  // The freed slot is reused by a new body elsewhere: a stale candidate must not alias it.
  const ObjectID d = add(world, static_desc(make_sphere(0.5f), Vec3{0, 10, 0}));
  world.raycast_all(origin, translation, all);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, b);
  EXPECT_EQ(all[1].id, c);
  std::vector<ObjectID> ids;
  world.overlap_aabb(Aabb{Vec3{-0.1f, -0.1f, -0.1f}, Vec3{0.1f, 0.1f, 0.1f}}, ids);
  EXPECT_EQ(ids, (std::vector<ObjectID>{b, c}));
  world.overlap_aabb(Aabb{Vec3{-0.1f, 9.9f, -0.1f}, Vec3{0.1f, 10.1f, 0.1f}}, ids);
  EXPECT_EQ(ids, (std::vector<ObjectID>{d}));
}

TEST(WorldQueries, BodiesAreFoundWhereTheyAreNowNotWhereTheBroadphaseLastSawThem) {
  // A ball falling at 100 m/s moves 1.67 m per step, far more than its AABB's size: the
  // broadphase's copy of its AABB is one step old after every step.
  World world;
  BodyDesc desc = dynamic_desc(make_sphere(0.5f), Vec3{0, 500, 0});
  desc.velocity = Vec3{0, -100, 0};
  const ObjectID ball = add(world, desc);
  const float dt = 1.0f / 60.0f;
  for (int i = 0; i < 3; ++i) world.step(dt);
  const Vec3 now = state(world, ball).position;
  ASSERT_LT(now.y, 500 - 3 * 100 * dt + 1.0f);

  // Through the centre, along z: enters at z = -0.5.
  const std::optional<RayHit> hit = world.raycast_closest(now - Vec3{0, 0, 5}, Vec3{0, 0, 10});
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, ball);
  EXPECT_NEAR(hit->fraction, 0.45f, kTol);
  // One step's fall above it: empty now.
  EXPECT_FALSE(world.raycast_closest(now + Vec3{0, 100 * dt, -5}, Vec3{0, 0, 10}).has_value());
  std::vector<ObjectID> ids;
  world.overlap_aabb(Aabb{now, now}, ids);
  EXPECT_EQ(ids, (std::vector<ObjectID>{ball}));

  // A body created after the last step is found before the next one.
  const ObjectID late = add(world, dynamic_desc(make_box(Vec3{0.5f, 0.5f, 0.5f}), Vec3{20, 0, 0}));
  const std::optional<RayHit> late_hit = world.raycast_closest(Vec3{20, 5, 0}, Vec3{0, -10, 0});
  ASSERT_TRUE(late_hit.has_value());
  EXPECT_EQ(late_hit->id, late);
  EXPECT_NEAR(late_hit->fraction, 0.45f, kTol);
}

TEST(WorldQueries, SleepingBodiesAreFoundThroughTheParkedGrid) {
  World world;
  add(world, static_desc(make_box(Vec3{20, 0.5f, 20}), Vec3{0, -0.5f, 0}));
  const ObjectID crate = add(world, dynamic_desc(make_box(Vec3{0.5f, 0.5f, 0.5f}), Vec3{0, 0.5f, 0}));
  const int steps = test::step_until(world, 1.0f / 60.0f, 600, [&] { return state(world, crate).sleeping; });
  ASSERT_LT(steps, 600) << "the resting crate never fell asleep";
  const Vec3 p = state(world, crate).position;
  const std::optional<RayHit> hit = world.raycast_closest(p + Vec3{0, 5, 0.2f}, Vec3{0, -10, 0});
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, crate);
  expect_vec_near(hit->normal, rotate(state(world, crate).orientation, Vec3{0, 1, 0}), 1e-3f);
  const std::vector<RayHit> want = brute_force_all(world, p + Vec3{0, 5, 0.2f}, Vec3{0, -10, 0});
  ASSERT_FALSE(want.empty());
  expect_same_hits(std::vector<RayHit>{*hit}, std::vector<RayHit>{want.front()});
  std::vector<ObjectID> ids;
  world.overlap_aabb(Aabb{p, p}, ids);
  EXPECT_EQ(ids, (std::vector<ObjectID>{crate}));
}

TEST(WorldQueries, RandomWorldsMatchBruteForce) {
  Rng rng(2718);
  World world;
  add(world, static_desc(make_plane(), Vec3{0, -20, 0}, quat_from_axis_angle(Vec3{1, 0, 0}, 0.1f)));
  std::vector<ObjectID> live;
  const auto random_quat = [&] {
    return normalize(Quat{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)});
  };
  const auto random_shape = [&] {
    switch (rng.below(3)) {
      case 0: return make_sphere(rng.uniform(0.1f, 1.5f));
      case 1: return make_box(Vec3{rng.uniform(0.1f, 2), rng.uniform(0.1f, 2), rng.uniform(0.1f, 2)});
      default: return make_capsule(rng.uniform(0.1f, 1), rng.uniform(0, 2));
    }
  };
  for (int i = 0; i < 300; ++i) {
    const Vec3 p{rng.uniform(-30, 30), rng.uniform(-15, 15), rng.uniform(-30, 30)};
    BodyDesc d = rng.below(3) == 0 ? static_desc(random_shape(), p, random_quat()) : dynamic_desc(random_shape(), p, random_quat());
    if (rng.below(10) == 0) d.sensor = true;
    if (i % 37 == 0) d = static_desc(make_box(Vec3{rng.uniform(20, 60), 0.5f, rng.uniform(20, 60)}), p);  // large
    live.push_back(add(world, d));
  }

  std::vector<RayHit> all;
  std::vector<ObjectID> ids;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    for (int q = 0; q < 150; ++q) {
      const Vec3 origin{rng.uniform(-35, 35), rng.uniform(-25, 20), rng.uniform(-35, 35)};
      const float reach = q % 10 == 0 ? 150.0f : 15.0f;  // some long rays take the linear fallback
      const Vec3 translation{rng.uniform(-reach, reach), rng.uniform(-reach, reach), rng.uniform(-reach, reach)};
      const std::vector<RayHit> want = brute_force_all(world, origin, translation);
      world.raycast_all(origin, translation, all);
      expect_same_hits(all, want);
      const std::optional<RayHit> closest = world.raycast_closest(origin, translation);
      ASSERT_EQ(closest.has_value(), !want.empty());
      if (closest) expect_same_hits(std::vector<RayHit>{*closest}, std::vector<RayHit>{want.front()});

      const Vec3 c{rng.uniform(-35, 35), rng.uniform(-25, 20), rng.uniform(-35, 35)};
      const Vec3 h{rng.uniform(0, 6), rng.uniform(0, 6), rng.uniform(0, 6)};
      world.overlap_aabb(Aabb{c - h, c + h}, ids);
      ASSERT_EQ(ids, brute_force_overlap(world, Aabb{c - h, c + h}));
    }
    // Change the world: some bodies go, some come, everything awake moves for a few steps.
    for (int k = 0; k < 30 && !live.empty(); ++k) {
      const std::size_t i = rng.below(static_cast<uint32_t>(live.size()));
      ASSERT_EQ(world.destroy_object(live[i]), Error::Ok);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (int k = 0; k < 20; ++k) {
      const Vec3 p{rng.uniform(-30, 30), rng.uniform(-15, 15), rng.uniform(-30, 30)};
      live.push_back(add(world, dynamic_desc(random_shape(), p, random_quat())));
    }
    for (int s = 0; s < 10; ++s) world.step(1.0f / 60.0f);
  }
}

}  // namespace
}  // namespace impulse::physics
