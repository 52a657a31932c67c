// Per-body sleep: falling asleep, staying bit-identical while asleep, and every wake condition.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::box_desc;
using test::sphere_desc;
using test::state;

constexpr float kDt = 1.0f / 60.0f;

// Steps until every listed body sleeps; fails the test after max_steps.
void settle(World& world, std::initializer_list<ObjectID> ids, int max_steps = 600) {
  const int steps = test::step_until(world, kDt, max_steps, [&] {
    for (const ObjectID id : ids) {
      if (!state(world, id).sleeping) return false;
    }
    return true;
  });
  ASSERT_LT(steps, max_steps) << "bodies did not fall asleep";
}

bool same_bits(Vec3 a, Vec3 b) {
  return std::bit_cast<uint32_t>(a.x) == std::bit_cast<uint32_t>(b.x) &&
         std::bit_cast<uint32_t>(a.y) == std::bit_cast<uint32_t>(b.y) &&
         std::bit_cast<uint32_t>(a.z) == std::bit_cast<uint32_t>(b.z);
}

TEST(Sleep, SleepingBodiesAreNotTouchedByTheStep) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.55f, 0.0f}));
  settle(world, {box});
  const BodyState before = state(world, box);
  EXPECT_EQ(before.velocity, (Vec3{}));
  // Something else keeps moving far away; the sleeper must stay bit-identical.
  BodyDesc mover = sphere_desc({50.0f, 10.0f, 0.0f});
  mover.velocity = {0.0f, 0.0f, 3.0f};
  mover.friction = 0.0f;  // lands and keeps sliding (15 m in 5 s) instead of stopping to sleep
  const ObjectID other = add(world, mover);
  for (int i = 0; i < 300; ++i) {
    world.step(kDt);
    const BodyState now = state(world, box);
    ASSERT_TRUE(now.sleeping);
    ASSERT_TRUE(same_bits(now.position, before.position));
    ASSERT_TRUE(same_bits(now.velocity, before.velocity));
    ASSERT_EQ(world.profile().awake_count, 1u);  // only the mover is integrated
  }
  EXPECT_FALSE(state(world, other).sleeping);
}

TEST(Sleep, FallingAsleepKeepsContactsAndEmitsNoEnd) {
  World world;
  const ObjectID ground = add_ground(world);
  const ObjectID lower = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  const ObjectID upper = add(world, box_desc({0.0f, 1.5f, 0.0f}));
  int ends = 0;
  const int steps = test::step_until(world, kDt, 600, [&] {
    for (const ContactEvent& e : world.contact_events()) ends += e.type == ContactEventType::End;
    return state(world, lower).sleeping && state(world, upper).sleeping;
  });
  ASSERT_LT(steps, 600);
  EXPECT_EQ(ends, 0);
  EXPECT_TRUE(world.are_colliding(ground, lower));
  EXPECT_TRUE(world.are_colliding(lower, upper));
  EXPECT_EQ(world.get_collisions().size(), 2u);
  EXPECT_EQ(world.resting_contact_count(), 2u);
  for (int i = 0; i < 60; ++i) {
    world.step(kDt);
    ASSERT_TRUE(world.contact_events().empty());
    ASSERT_TRUE(world.is_colliding(upper));
  }
}

TEST(Sleep, SleepingBodyWakesWhenAnotherFallsOnIt) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  settle(world, {box});
  const ObjectID ball = add(world, sphere_desc({0.0f, 4.0f, 0.0f}, 0.5f, 1.0f));
  bool woke = false;
  for (int i = 0; i < 120 && !woke; ++i) {
    world.step(kDt);
    woke = !state(world, box).sleeping;
    if (!woke) {
      ASSERT_FALSE(world.are_colliding(box, ball));  // not woken before the impact
    }
  }
  EXPECT_TRUE(woke);
  EXPECT_TRUE(world.are_colliding(box, ball));
}

// Islands (Box2D's rule): a body set down on a sleeping one touches it while awake, which wakes
// the sleeper's island; the two form one island and fall asleep together once both rest for
// sleep_time_s. The lower body is barely disturbed (< 1 mm), and the stack stays stacked.
TEST(Sleep, BodySetOnSleeperJoinsItsIslandAndBothSleep) {
  World world;
  add_ground(world);
  const ObjectID lower = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  settle(world, {lower});
  const ObjectID upper = add(world, box_desc({0.0f, 1.5f, 0.0f}));  // touching, at rest
  const BodyState lower_before = state(world, lower);
  world.step(kDt);
  EXPECT_FALSE(state(world, lower).sleeping);  // woken by the awake body touching it
  const int steps = test::step_until(world, kDt, 600, [&] { return world.awake_count() == 0; });
  ASSERT_LT(steps, 600);
  EXPECT_TRUE(state(world, lower).sleeping);
  EXPECT_TRUE(state(world, upper).sleeping);
  EXPECT_LT(length(state(world, lower).position - lower_before.position), 1e-3f);
  EXPECT_TRUE(world.are_colliding(lower, upper));
  EXPECT_NEAR(state(world, upper).position.y, 1.5f, 2e-3f);
}

// Warm starting carries each contact's impulse across steps, so a tall stack converges and
// sleeps instead of sinking into itself. Each soft contact settles at a small penetration (its
// static deflection under the load above it, well below the 5 mm linear slop), so the top box
// ends at most 10 slops below its ideal height, and no box wanders sideways by 1 cm (the required
// stack-drift bound, as for the S1 top box; sequential impulses over 4 points per manifold lean
// the stack by a few mm).
TEST(Sleep, StackOfTenSettlesAndFallsAsleep) {
  World world;
  add_ground(world);
  std::vector<ObjectID> boxes;
  for (int i = 0; i < 10; ++i) boxes.push_back(add(world, box_desc({0.0f, 0.5f + i, 0.0f})));
  const int steps = test::step_until(world, kDt, 300, [&] { return world.awake_count() == 0; });
  ASSERT_LT(steps, 300) << "a 10-box stack should sleep within 5 s";
  const float top = state(world, boxes.back()).position.y;
  EXPECT_LE(top, 9.5f);
  EXPECT_GE(top, 9.5f - 10 * world.settings().linear_slop);
  for (const ObjectID b : boxes) EXPECT_LT(std::fabs(state(world, b).position.x), 1e-2f);
}

// A ball rolling into a sleeping box wakes it no later than the step it hits it (the speculative
// contact, whose margin grows by the approach within the step, may wake it one step before), and
// the box takes part in that step's solve with its real mass: momentum along x is conserved
// (frictionless ground; tolerance 1e-4 relative, float rounding of a few impulses).
TEST(Sleep, BodyWokenByImpactTakesMomentumAtOnce) {
  World world;
  add_ground(world);
  BodyDesc box_d = box_desc({0.0f, 0.5f, 0.0f}, {0.5f, 0.5f, 0.5f}, 2.0f);
  box_d.friction = 0.0f;  // mu = sqrt(mu_a mu_b): 0 on the bodies makes the ground frictionless
  const ObjectID box = add(world, box_d);
  settle(world, {box});
  BodyDesc bd = sphere_desc({-3.0f, 0.5f, 0.0f}, 0.5f, 1.0f);
  bd.velocity = {6.0f, 0.0f, 0.0f};
  bd.friction = 0.0f;
  const ObjectID ball = add(world, bd);
  const float p0 = 6.0f;  // ball mass 1 kg * 6 m/s; the box is at rest
  const int steps = test::step_until(world, kDt, 60, [&] { return !state(world, box).sleeping; });
  ASSERT_LT(steps, 60);
  if (state(world, ball).velocity.x == 6.0f) world.step(kDt);  // woken before the hit: the hit is next
  ASSERT_LT(state(world, ball).velocity.x, 6.0f);
  const float p = 1.0f * state(world, ball).velocity.x + 2.0f * state(world, box).velocity.x;
  EXPECT_NEAR(p, p0, 1e-4f * p0);
  EXPECT_GT(state(world, box).velocity.x, 1.0f);  // it did not act as an immovable wall
}

TEST(Sleep, DestroyingNeighbourWakesBodyRestingOnIt) {
  World world;
  const ObjectID ground = add_ground(world);
  const ObjectID lower = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  const ObjectID upper = add(world, box_desc({0.0f, 1.5f, 0.0f}));
  settle(world, {lower, upper});
  ASSERT_EQ(world.destroy_object(lower), Error::Ok);
  EXPECT_FALSE(state(world, upper).sleeping);
  EXPECT_FALSE(world.are_colliding(lower, upper));  // gone from the queries at once
  world.step(kDt);
  // End events of the destroyed body come with the next step, sorted by (a, b).
  const auto events = world.contact_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, ContactEventType::End);
  EXPECT_EQ(events[0].a, ground);
  EXPECT_EQ(events[0].b, lower);
  EXPECT_EQ(events[1].type, ContactEventType::End);
  EXPECT_EQ(events[1].a, lower);
  EXPECT_EQ(events[1].b, upper);
  // The upper box falls 1 m onto the ground and settles there.
  for (int i = 0; i < 120; ++i) world.step(kDt);
  EXPECT_NEAR(state(world, upper).position.y, 0.5f, world.settings().linear_slop + 1e-3f);
  EXPECT_TRUE(world.are_colliding(ground, upper));
}

TEST(Sleep, CommandsWakeTheBody) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  settle(world, {box});
  ASSERT_EQ(world.apply_impulse(box, {0.0f, 2.0f, 0.0f}), Error::Ok);
  EXPECT_FALSE(state(world, box).sleeping);
  EXPECT_EQ(world.awake_count(), 1u);
  settle(world, {box});
  ASSERT_EQ(world.set_velocity(box, {1.0f, 0.0f, 0.0f}), Error::Ok);
  EXPECT_FALSE(state(world, box).sleeping);
  world.step(kDt);
  EXPECT_GT(state(world, box).position.x, 0.0f);
  EXPECT_TRUE(world.contact_events().empty());  // still on the ground: no End, no Begin
}

// A static body created overlapping a sleeping body wakes it (parked proxies never pair).
TEST(Sleep, StaticCreatedOverSleeperWakesIt) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  settle(world, {box});
  const ObjectID wall = add(world, box_desc({0.9f, 0.5f, 0.0f}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Static));
  EXPECT_FALSE(state(world, box).sleeping);
  world.step(kDt);
  EXPECT_TRUE(world.are_colliding(box, wall));
}

// A sleeping body is infinite mass in the solve, but being lifted is not being sat on: a box
// driven up by a steady force wakes the sleeping sphere on top of it instead of being held down.
// Together they accelerate at a = F / (m_box + m_ball) - g = 6.19 m/s^2: over 0.5 s they rise
// about a t^2 / 2 = 0.77 m; the wake costs a step, so require 0.5 m.
TEST(Sleep, ForceLiftsBoxCarryingSleepingSphere) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}, {0.5f, 0.5f, 0.5f}, 2.0f));
  const ObjectID ball = add(world, sphere_desc({0.0f, 1.3f, 0.0f}, 0.3f, 0.5f));
  settle(world, {box, ball});
  const float box_y0 = state(world, box).position.y;
  const float ball_y0 = state(world, ball).position.y;
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(world.apply_force(box, {0.0f, 40.0f, 0.0f}), Error::Ok);
    world.step(kDt);
  }
  EXPECT_FALSE(state(world, ball).sleeping);
  EXPECT_GT(state(world, box).position.y, box_y0 + 0.5f);
  EXPECT_GT(state(world, ball).position.y, ball_y0 + 0.5f);
  // Still stacked: the ball rides on the box (gap = radius + half height, within the slop).
  const float gap = state(world, ball).position.y - state(world, box).position.y;
  EXPECT_NEAR(gap, 0.8f, world.settings().linear_slop + 1e-3f);
}

// A weak but steady sideways push still wakes a sleeper: the impulse it absorbs accumulates.
// 1 N on two 1 kg boxes (frictionless floor): a = 0.5 m/s^2, about 1 m in 2 s; require 0.5 m.
TEST(Sleep, SteadyWeakPushWakesSleeper) {
  World world;
  add_ground(world);
  // mu = sqrt(mu_a mu_b): friction 0 on the boxes makes the floor frictionless for them.
  BodyDesc pusher_d = box_desc({0.0f, 0.5f, 0.0f});
  pusher_d.friction = 0.0f;
  BodyDesc pushed_d = box_desc({1.0f, 0.5f, 0.0f});
  pushed_d.friction = 0.0f;
  const ObjectID pusher = add(world, pusher_d);
  const ObjectID pushed = add(world, pushed_d);
  settle(world, {pusher, pushed});
  const float x0 = state(world, pushed).position.x;
  for (int i = 0; i < 120; ++i) {
    ASSERT_EQ(world.apply_force(pusher, {1.0f, 0.0f, 0.0f}), Error::Ok);
    world.step(kDt);
  }
  EXPECT_GT(state(world, pushed).position.x, x0 + 0.5f);
  EXPECT_GE(state(world, pushed).position.x - state(world, pusher).position.x,
            1.0f - world.settings().linear_slop - 1e-3f);
}

// A kinematic body keeps its set velocity however slow: it never falls asleep while moving, and
// even below sleep_speed it wakes what it touches instead of pushing into a sleeper.
TEST(Sleep, SlowKinematicKeepsMovingAndWakesSleeper) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  settle(world, {box});
  BodyDesc kd = box_desc({-1.01f, 0.5f, 0.0f}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Kinematic);
  kd.velocity = {0.02f, 0.0f, 0.0f};  // below sleep_speed (0.05)
  const ObjectID pusher = add(world, kd);
  for (int i = 0; i < 120; ++i) world.step(kDt);
  EXPECT_FALSE(state(world, pusher).sleeping);
  EXPECT_EQ(state(world, pusher).velocity.x, 0.02f);
  EXPECT_FALSE(state(world, box).sleeping);
  // No deeper than the slop plus one step of motion.
  EXPECT_GE(state(world, box).position.x - state(world, pusher).position.x,
            1.0f - world.settings().linear_slop - 0.001f);
}

// The kinematic platform rule: a moving kinematic body wakes what it touches.
TEST(Sleep, MovingKinematicWakesSleeper) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  BodyDesc kd = box_desc({-3.0f, 0.5f, 0.0f}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Kinematic);
  const ObjectID pusher = add(world, kd);
  settle(world, {box, pusher});  // a kinematic body at rest sleeps too
  ASSERT_EQ(world.set_velocity(pusher, {2.0f, 0.0f, 0.0f}), Error::Ok);
  const int steps = test::step_until(world, kDt, 120, [&] { return !state(world, box).sleeping; });
  ASSERT_LT(steps, 120);
  for (int i = 0; i < 30; ++i) world.step(kDt);
  EXPECT_GT(state(world, box).position.x, 0.5f);
}

// BodyDesc::asleep: a dynamic box created asleep in mid-air stays there bit for bit (and costs no
// awake slot) until an awake ball falls onto it, which wakes it; a kinematic body created asleep
// ignores its velocity until commanded.
TEST(Sleep, ABodyCreatedAsleepStaysPutUntilTouched) {
  World world;
  add_ground(world);
  BodyDesc d = box_desc({0.0f, 3.0f, 0.0f});
  d.asleep = true;
  d.velocity = {4.0f, 0.0f, 0.0f};  // ignored
  const ObjectID box = add(world, d);
  BodyDesc k = box_desc({5.0f, 1.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Kinematic);
  k.asleep = true;
  k.velocity = {1.0f, 0.0f, 0.0f};  // ignored
  const ObjectID door = add(world, k);
  EXPECT_EQ(world.awake_count(), 0u);
  const Vec3 start = state(world, box).position;
  for (int i = 0; i < 60; ++i) world.step(kDt);
  EXPECT_TRUE(state(world, box).sleeping);
  EXPECT_TRUE(same_bits(state(world, box).position, start));
  EXPECT_TRUE(same_bits(state(world, box).velocity, Vec3{}));
  EXPECT_TRUE(same_bits(state(world, door).position, Vec3{5.0f, 1.0f, 0.0f}));

  const ObjectID ball = add(world, sphere_desc({0.0f, 5.0f, 0.0f}, 0.4f, 1.0f));
  bool woke = false;
  for (int i = 0; i < 120 && !woke; ++i) {
    world.step(kDt);
    woke = !state(world, box).sleeping;
  }
  EXPECT_TRUE(woke) << "the falling ball did not wake the box";
  EXPECT_TRUE(world.are_colliding(box, ball));
  for (int i = 0; i < 120; ++i) world.step(kDt);
  EXPECT_LT(state(world, box).position.y, 1.0f) << "woken, it falls to the ground";

  EXPECT_EQ(world.set_velocity(door, {1.0f, 0.0f, 0.0f}), Error::Ok);  // a command wakes it
  for (int i = 0; i < 60; ++i) world.step(kDt);
  EXPECT_NEAR(state(world, door).position.x, 6.0f, 1.0e-3f);
}

// A row of `count` unit boxes created asleep on the ground along +x, `gap` apart (inside the
// speculative margin: touching as far as contacts go), each on an island of its own.
std::vector<ObjectID> sleeping_row(World& world, int count, float gap) {
  std::vector<ObjectID> row;
  for (int i = 0; i < count; ++i) {
    BodyDesc d = box_desc({static_cast<float>(i) * (1.0f + gap), 0.5f, 0.0f});
    d.asleep = true;
    row.push_back(add(world, d));
  }
  return row;
}

// A wake spreads through the whole contact graph in the step it happens (Jolt's
// TestPhysicsActivateDuringStep; Box2D wakes touching islands in the step too): a box sliding
// into the first of 100 boxes created asleep wakes all 100 in the step of its first contact.
// Before, each step woke one more box. Swept over the hitting speed (which moves the first
// contact within and across steps) and the gap between the sleepers (0 to 1.5 cm, under the
// 2 cm margin).
TEST(Sleep, AWakeCrossesAWholeRowOfSleepersInOneStep) {
  for (const float speed : {0.5f, 3.0f, 12.0f, 40.0f}) {
    for (const float gap : {0.0f, 0.005f, 0.015f}) {
      World world;
      add_ground(world);
      const std::vector<ObjectID> row = sleeping_row(world, 100, gap);
      BodyDesc hitter = box_desc({-3.0f, 0.5f, 0.0f});
      hitter.velocity = {speed, 0.0f, 0.0f};
      hitter.friction = 0.0f;
      const ObjectID h = add(world, hitter);
      int woke_step = -1;
      for (int i = 0; i < 600 && woke_step < 0; ++i) {
        world.step(kDt);
        if (!state(world, row[0]).sleeping) woke_step = i;
      }
      ASSERT_GE(woke_step, 0) << "speed " << speed << " gap " << gap << ": never touched";
      int awake = 0;
      for (const ObjectID id : row) awake += state(world, id).sleeping ? 0 : 1;
      EXPECT_EQ(awake, 100) << "speed " << speed << " gap " << gap << ": woken in the step of the first contact";
      EXPECT_TRUE(world.are_colliding(row[98], row[99])) << "the front's contacts are in this step's list";
      EXPECT_LT(state(world, h).position.x, state(world, row[0]).position.x);
    }
  }
}

// Jolt's TestPhysicsActivateDuringStep, with Impulse's numbers: a 500 m/s bullet into a row of 10
// boxes created asleep, in zero gravity. The whole row wakes in the step the bullet reaches it,
// and the bullet stays behind the first box: before, 2 of 10 were awake after that step and the
// bullet passed through boxes 2 to 4, which had not woken yet.
TEST(Sleep, AShotIntoSleepingBoxesWakesTheRowAndDoesNotPassThrough) {
  WorldSettings settings;
  settings.gravity = {};
  World world(settings);
  const std::vector<ObjectID> row = sleeping_row(world, 10, 0.0f);
  BodyDesc shot = sphere_desc({-2.0f, 0.5f, 0.0f}, 0.1f, 1.0f);
  shot.velocity = {500.0f, 0.0f, 0.0f};
  shot.bullet = true;
  const ObjectID s = add(world, shot);
  int hit_step = -1;
  for (int i = 0; i < 10; ++i) {
    world.step(kDt);
    for (const ObjectID id : row) {
      if (hit_step < 0 && !state(world, id).sleeping) hit_step = i;
    }
    if (hit_step >= 0) {
      int awake = 0;
      for (const ObjectID id : row) awake += state(world, id).sleeping ? 0 : 1;
      EXPECT_EQ(awake, 10) << "step " << i;
      EXPECT_LT(state(world, s).position.x, state(world, row[0]).position.x) << "step " << i;
      for (const ObjectID id : row) EXPECT_TRUE(std::isfinite(state(world, id).position.x));
    }
  }
  ASSERT_GE(hit_step, 0) << "the shot never reached the row";
}

// put_to_sleep's hold (the server's tick budget): a held body is an immovable obstacle that no
// contact wakes, neither a 20 m/s sphere striking it nor the crowd around it, until the hold
// ends; then the next touch wakes it as usual. A command wakes it at once and ends the hold.
// Swept over strike speeds and mass ratios: the held body never moves, the striker rebounds
// from it as from a static box (|v| never grows: no energy from the hold).
TEST(Sleep, AHeldBodyIsWokenByNoContactUntilItsHoldEnds) {
  for (const float speed : {1.0f, 5.0f, 20.0f}) {
    for (const float mass : {0.1f, 1.0f, 100.0f}) {
      World world(WorldSettings{.gravity = {0, 0, 0}});
      const ObjectID held = add(world, box_desc({0.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f));
      BodyDesc d = sphere_desc({-1.0f, 0.0f, 0.0f}, 0.25f, mass, 0.5f);
      d.velocity = {speed, 0.0f, 0.0f};
      const ObjectID ball = add(world, d);
      const int hold = 90;
      ASSERT_EQ(world.put_to_sleep(held, hold), Error::Ok);
      const Vec3 at = state(world, held).position;
      bool touched = false;
      for (int i = 0; i < hold - 1; ++i) {
        world.step(kDt);
        touched = touched || world.are_colliding(held, ball);
        ASSERT_TRUE(state(world, held).sleeping) << "speed " << speed << " mass " << mass << " step " << i;
        ASSERT_TRUE(world.is_held_asleep(held));
        ASSERT_TRUE(same_bits(state(world, held).position, at));
        ASSERT_LE(length(state(world, ball).velocity), speed * (1 + 1e-5f));
      }
      EXPECT_TRUE(touched) << "speed " << speed;
      EXPECT_LT(state(world, ball).velocity.x, 0.0f) << "the ball rebounds from the held box";
      // The hold over, a touch wakes it: send the ball back at it.
      world.step(kDt);
      EXPECT_FALSE(world.is_held_asleep(held));
      ASSERT_EQ(world.set_velocity(ball, {speed, 0.0f, 0.0f}), Error::Ok);
      bool woke = false;
      for (int i = 0; i < 240 && !woke; ++i) {
        world.step(kDt);
        woke = !state(world, held).sleeping;
      }
      EXPECT_TRUE(woke) << "speed " << speed << " mass " << mass;
    }
  }
  // A command ends the hold.
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  ASSERT_EQ(world.put_to_sleep(box, 600), Error::Ok);
  EXPECT_TRUE(world.is_held_asleep(box));
  ASSERT_EQ(world.apply_impulse(box, {0.0f, 2.0f, 0.0f}), Error::Ok);
  EXPECT_FALSE(world.is_held_asleep(box));
  EXPECT_FALSE(state(world, box).sleeping);
}

}  // namespace
}  // namespace impulse::physics
