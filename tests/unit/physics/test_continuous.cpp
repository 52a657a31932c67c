// Continuous collision (issue "Physics right at the edges", item 2): fast bodies never pass thin
// static walls; bullets (Box2D v3's isBullet, Jolt's EMotionQuality::LinearCast) never pass
// dynamic bodies either; a fast body sliding along a floor is not held back; the bullet flag is
// saved, restored and hashed; the step is the same for any thread count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
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

// The lowest point of a box body [m] along y (its lowest corner).
float lowest_corner(const BodyState& st, Vec3 half) {
  float lowest = 1.0e30f;
  for (int c = 0; c < 8; ++c) {
    const Vec3 local{(c & 1) ? half.x : -half.x, (c & 2) ? half.y : -half.y, (c & 4) ? half.z : -half.z};
    lowest = std::min(lowest, (rotate(st.orientation, local) + st.position).y);
  }
  return lowest;
}

// Jolt's HighSpeedTest ("long thin shape under 45 degrees"): a 1.6 m x 0.1 m x 0.06 m box, friction
// 1, falling at 100 m/s tilted about x. Struck at one end, it pivots at up to the angular speed cap
// (45 degrees a step), and the turn swung its far end 0.52 m into a static box floor, and the whole
// box 1.25 m into a plane floor (planes were not swept at all). Continuous collision now sweeps the
// turn (and planes), and a body touching at the step's start stops at the latest pose no deeper
// than it started plus the slop. Swept over tilts 0-89 degrees, 20-200 m/s, three phases of the
// first contact within a step, e = 0 and 1, plane and box floors: no corner ever goes deeper than
// the speculative margin (2 cm) in 2 s.
TEST(ContinuousCollision, AThinBoxFallingFastAtAnyTiltStaysWithinTheMarginOfTheFloor) {
  const Vec3 half{0.05f, 0.8f, 0.03f};
  const float margin = WorldSettings{}.speculative_margin;
  float worst = 0;
  for (const bool plane : {false, true}) {
    for (const float e : {0.0f, 1.0f}) {
      for (const float degrees : {0.0f, 15.0f, 30.0f, 45.0f, 60.0f, 75.0f, 89.0f}) {
        for (const float speed : {20.0f, 50.0f, 100.0f, 200.0f}) {
          for (int phase = 0; phase < 3; ++phase) {
            World world;
            if (plane) {
              add_ground_plane(world, 1.0f);
            } else {
              add_ground(world);
            }
            BodyDesc d = box_desc({0.0f, 1.0f + speed * kDt * static_cast<float>(phase) / 3.0f, 0.0f}, half);
            const float angle = degrees * 3.14159265f / 180.0f;
            d.orientation = Quat{std::sin(0.5f * angle), 0.0f, 0.0f, std::cos(0.5f * angle)};
            d.velocity = {0.0f, -speed, 0.0f};
            d.friction = 1.0f;
            d.restitution = e;
            const ObjectID id = add(world, d);
            float deepest = 0;
            for (int s = 0; s < 120; ++s) {
              world.step(kDt);
              deepest = std::max(deepest, -lowest_corner(state(world, id), half));
            }
            EXPECT_LE(deepest, margin) << (plane ? "plane" : "box") << " floor, e " << e << ", " << degrees
                                       << " degrees, " << speed << " m/s, phase " << phase;
            worst = std::max(worst, deepest);
          }
        }
      }
    }
  }
  std::printf("[ measured ] thin box at 20-200 m/s, 0-89 degrees: deepest corner %.4f m (margin %.3f m)\n", worst,
              margin);
}

// Jolt's TestLinearCastBoxVsInactiveDiscreteBoxAngled: a unit box as a bullet (Jolt's LinearCast),
// e = 1 and frictionless, flies at an angle into the centre of a face of an equal box created
// asleep. The bullet stopped 1 cm short sideways (backed off along its path), and the off-centre
// contact left both boxes spinning at 3.6 rad/s. Now the bullet keeps its motion along the surface
// up to the contact, and the collision (the next step's contact, resolved at its time of impact)
// exchanges the normal velocity exactly: Jolt's tolerances, 2e-4 rad/s of spin and 1e-4 m/s of
// velocity per unit of speed (Jolt's 1e-4 m/s at 268 m/s). Swept over the angle (sideways to
// normal speed 0 to 3, both signs), the speed (1.5 to 4 m per step along the normal) and where in
// the step the bullet arrives, always from beyond the speculative contacts' reach (0.52 m here),
// so that the sweep, not a contact, meets the face first (a contact found at the step's start is
// resolved at the start pose's points: see docs/BENCHMARKS.md).
TEST(ContinuousCollision, AnAngledBulletStrikesAFaceCentreAndLeavesNoSpin) {
  for (const float ratio : {0.0f, 0.5f, 1.0f, 2.0f, -2.0f, 3.0f}) {
    for (const float per_step : {1.5f, 2.0f, 4.0f}) {
      for (const float arrive : {0.4f, 0.6f, 0.9f}) {
        WorldSettings settings;
        settings.gravity = {0, 0, 0};
        World world(settings);
        const Vec3 velocity = Vec3{-1.0f, 0.0f, ratio} * (per_step / kDt);
        if (length(velocity) > settings.max_speed) continue;  // over the speed cap: rejected on creation
        // At the contact its centre is at (1, 0, 0): the face centres meet.
        BodyDesc a = box_desc(Vec3{1.0f, 0.0f, 0.0f} - velocity * (arrive * kDt));
        a.velocity = velocity;
        a.restitution = 1.0f;
        a.friction = 0.0f;
        a.bullet = true;
        BodyDesc b = box_desc({0.0f, 0.0f, 0.0f});
        b.restitution = 1.0f;
        b.friction = 0.0f;
        b.asleep = true;
        const ObjectID ia = add(world, a);
        const ObjectID ib = add(world, b);
        const std::string where = "ratio " + std::to_string(ratio) + ", " + std::to_string(per_step) +
                                  " m a step, arriving at " + std::to_string(arrive);
        world.step(kDt);  // the sweep stops the bullet at the face
        const BodyState hit = state(world, ia);
        EXPECT_NEAR(hit.position.x, 1.0f, 2.3f * 0.02f) << where;  // Jolt: 2.3 x its 2 cm slop
        EXPECT_GE(hit.position.x, 1.0f) << where;
        world.step(kDt);  // the contact exchanges the normal velocity
        const BodyState sa = state(world, ia);
        const BodyState sb = state(world, ib);
        const float tolerance = 1.0e-4f * length(velocity);
        EXPECT_FALSE(sb.sleeping) << where;
        EXPECT_NEAR(sa.velocity.x, 0.0f, tolerance) << where;
        EXPECT_NEAR(sa.velocity.z, velocity.z, tolerance) << where;
        EXPECT_NEAR(sb.velocity.x, velocity.x, tolerance) << where;
        EXPECT_NEAR(sb.velocity.z, 0.0f, tolerance) << where;
        EXPECT_LE(length(sa.angular_velocity), 2.0e-4f) << where;
        EXPECT_LE(length(sb.angular_velocity), 2.0e-4f) << where;
      }
    }
  }
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
