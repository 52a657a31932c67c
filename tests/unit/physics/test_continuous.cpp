// Continuous collision (issue "Physics right at the edges", item 2): fast bodies never pass thin
// static walls; bullets (Box2D v3's isBullet, Jolt's EMotionQuality::LinearCast) never pass
// dynamic bodies either; a fast body sliding along a floor is not held back; the bullet flag is
// saved, restored and hashed; the step is the same for any thread count.
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "shared/parallel.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics::test {
namespace {

constexpr float kDt = 1.0f / 60.0f;
constexpr float kSpeeds[] = {10, 15, 20, 30, 50, 100, 200, 300};
constexpr int kStarts = 20;
constexpr float kWallHalf = 0.1f;  // a 0.2 m thick static wall, its faces at x = -0.1 and 0.1

ObjectID add_wall(World& world) {
  return add(world, box_desc({0, 0, 0}, {kWallHalf, 5.0f, 5.0f}, 1.0f, BodyKind::Static));
}

// Fires `desc` along +x at `speed` from 20 start positions (spread over one step's travel, so the
// step ends at every phase relative to the wall, and over y and z) and counts how many end beyond
// the wall's near face: its centre closer to the face than `inner` (its inner extent; a body
// outside the wall is at least that far from it) less 1 cm. `reach` (its outer extent) places it.
// Zero g; each run lasts until well after the body would reach the wall.
int tunnelled(BodyDesc desc, float speed, float inner, float reach) {
  int through = 0;
  for (int k = 0; k < kStarts; ++k) {
    WorldSettings settings;
    settings.gravity = {0, 0, 0};
    World world(settings);
    add_wall(world);
    const float phase = speed * kDt * static_cast<float>(k) / kStarts;
    desc.position = {-1.0f - reach - phase, 0.1f * static_cast<float>(k % 5) - 0.2f, 0.05f * static_cast<float>(k % 4)};
    desc.velocity = {speed, 0, 0};
    const ObjectID id = add(world, desc);
    for (int s = 0; s < 30; ++s) world.step(kDt);
    const BodyState st = state(world, id);
    if (st.position.x + inner > -kWallHalf + 0.01f) ++through;
  }
  return through;
}

// The table: a 0.1 m sphere tunnelled 3 of 20 at 15 m/s up to 18 of 20 at 100 m/s.
// Continuous collision: 0 of 20 at every speed up to 300 m/s, for radius 0.1 m and 0.05 m.
TEST(PhysicsEdges, ASphereUpTo300MetresPerSecondNeverPassesAThinStaticWall) {
  for (const float radius : {0.1f, 0.05f}) {
    for (const float speed : kSpeeds) {
      const int n = tunnelled(sphere_desc({}, radius), speed, radius, radius);
      EXPECT_EQ(n, 0) << "sphere r " << radius << " at " << speed << " m/s";
      std::printf("[ measured ] sphere r %g m at %g m/s: %d of %d tunnelled\n", radius, speed, n, kStarts);
    }
  }
}

// Boxes and capsules too, tilted and spinning, so the end orientation is not axis-aligned.
TEST(ContinuousCollision, BoxesAndCapsulesUpTo300MetresPerSecondNeverPassAThinStaticWall) {
  BodyDesc box = box_desc({}, {0.05f, 0.05f, 0.05f});
  box.orientation = normalize(Quat{0.1f, 0.2f, 0.05f, 1.0f});
  box.angular_velocity = {3.0f, 5.0f, 1.0f};
  BodyDesc capsule = sphere_desc({}, 0.04f);
  capsule.shape = make_capsule(0.04f, 0.1f);
  capsule.orientation = normalize(Quat{0.0f, 0.0f, 0.7f, 0.7f});  // lying along x
  BodyDesc upright = capsule;
  upright.orientation = Quat{};
  for (const float speed : kSpeeds) {
    EXPECT_EQ(tunnelled(box, speed, 0.05f, 0.0866f), 0) << "box at " << speed << " m/s";
    EXPECT_EQ(tunnelled(capsule, speed, 0.04f, 0.14f), 0) << "capsule along x at " << speed << " m/s";
    EXPECT_EQ(tunnelled(upright, speed, 0.04f, 0.14f), 0) << "upright capsule at " << speed << " m/s";
  }
}

// A box sliding fast along a static floor touches it at every step start: it is swept by its core
// (Box2D's fallback), so the floor does not hold it back. Frictionless, so it keeps its speed.
TEST(ContinuousCollision, AFastBodySlidingAlongAFloorIsNotHeldBack) {
  World world;
  const ObjectID ground = add_ground(world);
  (void)ground;
  BodyDesc d = box_desc({0, 0.1f, 0}, {0.1f, 0.1f, 0.1f});
  d.friction = 0;
  d.velocity = {30.0f, 0, 0};
  const ObjectID box = add(world, d);
  // Settle on the floor, then slide for a second.
  world.step(kDt);
  const float x0 = state(world, box).position.x;
  uint32_t fast = 0;
  for (int s = 0; s < 60; ++s) {
    world.step(kDt);
    fast += world.profile().fast_bodies;
    EXPECT_EQ(world.profile().continuous_hits, 0u) << "step " << s;
  }
  const BodyState st = state(world, box);
  EXPECT_EQ(fast, 60u);  // it was swept every step
  EXPECT_NEAR(st.position.x - x0, 30.0f, 0.3f);
  EXPECT_NEAR(st.position.y, 0.1f, 0.01f);
}

// A plank 0.1 m thick, dynamic and heavy, and a small sphere at 300 m/s. Without the bullet flag
// the sphere goes straight through it (fast bodies are swept against static bodies only); as a
// bullet it is swept against the plank's end pose and stops at it, pushing it: its centre stays
// a radius in front of the plank's face (1 cm slack), in the plank's frame.
TEST(ContinuousCollision, ABulletDoesNotPassThroughADynamicBody) {
  auto run = [](bool bullet) {
    WorldSettings settings;
    settings.gravity = {0, 0, 0};
    World world(settings);
    const ObjectID plank = add(world, box_desc({0, 0, 0}, {0.05f, 1.0f, 1.0f}, 100.0f));
    BodyDesc d = sphere_desc({-2.0f, 0.1f, 0}, 0.05f);
    d.velocity = {300.0f, 0, 0};
    d.bullet = bullet;
    const ObjectID ball = add(world, d);
    EXPECT_EQ(state(world, ball).bullet, bullet);
    uint32_t hits = 0;
    for (int s = 0; s < 20; ++s) {
      world.step(kDt);
      hits += world.profile().continuous_hits;
    }
    // The ball's centre in the plank's frame (the off-centre hit turns the plank).
    const BodyState ps = state(world, plank);
    return std::pair{inverse_rotate(ps.orientation, state(world, ball).position - ps.position).x, hits};
  };
  const auto [plain_dx, plain_hits] = run(false);
  const auto [bullet_dx, bullet_hits] = run(true);
  EXPECT_GT(plain_dx, 0.0f) << "without the flag a fast body is not swept against dynamic ones";
  EXPECT_EQ(plain_hits, 0u);
  EXPECT_LT(bullet_dx, -0.05f - 0.05f + 0.01f) << "the bullet passed the plank";
  EXPECT_GE(bullet_hits, 1u);
  std::printf("[ measured ] sphere minus plank x after 20 steps: plain %.3f m, bullet %.3f m\n", plain_dx, bullet_dx);
}

// At most 64 bullets a step are swept against awake bodies (kMaxBulletSweepsPerStep), so one
// client's many bullets cannot make the step arbitrarily slow: of 70 bullets fired in one step at
// 70 dynamic planks, the first 64 in creation (awake-list) order stop and the last 6 pass.
TEST(ContinuousCollision, AtMost64BulletsAStepAreSweptAgainstDynamicBodies) {
  WorldSettings settings;
  settings.gravity = {0, 0, 0};
  World world(settings);
  std::vector<ObjectID> balls;
  for (int i = 0; i < 70; ++i) {
    const float z = 3.0f * static_cast<float>(i);
    add(world, box_desc({0, 0, z}, {0.05f, 1.0f, 1.0f}, 100.0f));
    BodyDesc d = sphere_desc({-2.0f, 0.0f, z}, 0.05f);
    d.velocity = {300.0f, 0, 0};
    d.bullet = true;
    balls.push_back(add(world, d));
  }
  world.step(kDt);
  int passed = 0, first_passed = -1;
  for (int i = 0; i < 70; ++i)
    if (state(world, balls[static_cast<size_t>(i)]).position.x > 0.0f) {
      ++passed;
      if (first_passed < 0) first_passed = i;
    }
  EXPECT_EQ(world.profile().continuous_hits, 64u);
  EXPECT_EQ(passed, 6);
  EXPECT_EQ(first_passed, 64);
}

// The bullet flag travels through save_state / restore_state and the hash; a world without
// bullets saves as before (one flags byte where the sensor bool was), and the step with bullets is
// bit-identical for 1, 2 and 3 threads.
TEST(ContinuousCollision, TheBulletFlagIsSavedAndHashedAndTheStepIsTheSameForAnyThreadCount) {
  auto build = [](World& world) {
    add_ground(world);
    add_wall(world);
    for (int i = 0; i < 80; ++i) {  // enough movable bodies for the pool to split the solve
      BodyDesc d = box_desc({-3.0f + 0.3f * static_cast<float>(i % 10), 0.2f + 0.3f * static_cast<float>(i / 10), 2.0f},
                            {0.1f, 0.1f, 0.1f});
      d.velocity = {static_cast<float>(i % 7) * 20.0f, 0, -5.0f};
      d.bullet = i % 3 == 0;
      add(world, d);
    }
  };
  std::vector<uint64_t> hashes;
  for (int threads = 1; threads <= 3; ++threads) {
    WorkerPool pool(threads);
    World world;
    if (threads > 1) world.set_worker_pool(&pool);
    build(world);
    for (int s = 0; s < 90; ++s) world.step(kDt);
    hashes.push_back(world.world_hash());
  }
  EXPECT_EQ(hashes[0], hashes[1]);
  EXPECT_EQ(hashes[0], hashes[2]);

  World a;
  build(a);
  for (int s = 0; s < 10; ++s) a.step(kDt);
  expect_restore_steps_identically(a, 30, kDt);

  // The flag is part of the hash.
  World c;
  World d;
  BodyDesc plain = sphere_desc({0, 1, 0});
  add(c, plain);
  plain.bullet = true;
  add(d, plain);
  EXPECT_NE(c.world_hash(), d.world_hash());
}

}  // namespace
}  // namespace impulse::physics::test
