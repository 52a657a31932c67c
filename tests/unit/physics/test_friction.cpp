// Coulomb friction in the sequential-impulse solver (Catto, GDC 2005/2006), checked against the
// closed forms of a block sliding on a level floor: a = mu g, stop time v0 / (mu g), stop distance
// v0^2 / (2 mu g).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "server/physics/solver.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::box_desc;
using test::sphere_desc;
using test::state;

constexpr float kDt = 1.0f / 60.0f;
constexpr float kG = 9.81f;

// A 1 m box resting exactly on the floor (y = 0.5), sliding along `direction` at v0.
BodyDesc sliding_box(Vec3 velocity, float friction) {
  BodyDesc d = box_desc({0.0f, 0.5f, 0.0f});
  d.velocity = velocity;
  d.friction = friction;
  return d;
}

ObjectID add_floor(World& world, float friction) {
  BodyDesc d = box_desc({0.0f, -1.0f, 0.0f}, {100.0f, 1.0f, 100.0f}, 0.0f, BodyKind::Static);
  d.friction = friction;
  return add(world, d);
}

float horizontal_speed(Vec3 v) { return std::sqrt(v.x * v.x + v.z * v.z); }

// With rotation the box keeps a residue of angular and sideways motion of order 1e-4 m/s from the
// sequential point order, so "stopped" and "never rose" are judged with these tolerances.
constexpr float kStoppedSpeed = 1.0e-2f;  // [m/s]
constexpr float kSpeedNoise = 1.0e-3f;    // [m/s]

struct SlideResult {
  int stop_step = -1;      // first step after which the horizontal speed is below kStoppedSpeed
  float distance = 0;      // horizontal distance travelled until then [m]
  bool energy_rose = false;
  bool direction_kept = true;  // velocity never reversed or turned
};

SlideResult slide(World& world, ObjectID box, Vec3 v0, int max_steps) {
  SlideResult r;
  const Vec3 start = state(world, box).position;
  const float v0_len = horizontal_speed(v0);
  float speed = v0_len;
  for (int i = 0; i < max_steps; ++i) {
    world.step(kDt);
    const BodyState s = state(world, box);
    const float now = horizontal_speed(s.velocity);
    if (now > speed + kSpeedNoise) r.energy_rose = true;  // kinetic energy of the horizontal motion
    // Parallel to v0 and in the same sense: friction only opposes the slip.
    const float along = (s.velocity.x * v0.x + s.velocity.z * v0.z) / v0_len;
    if (along < -kSpeedNoise || std::fabs(along - now) > kSpeedNoise) r.direction_kept = false;
    speed = now;
    if (now < kStoppedSpeed) {
      r.stop_step = i + 1;
      const Vec3 d = s.position - start;
      r.distance = std::sqrt(d.x * d.x + d.z * d.z);
      return r;
    }
  }
  return r;
}

// mu = sqrt(0.5 * 0.5) = 0.5 on both sides: a = 4.905 m/s^2, so from 5 m/s the box stops after
// t = v0 / (mu g) = 1.019 s (61.2 steps) and s = v0^2 / (2 mu g) = 2.548 m. Semi-implicit Euler
// removes mu g dt per step exactly (the resting normal impulse is m g dt), so the stop step is
// within one step of the closed form; the distance is short by about v0 dt / 2 = 4 cm (1.6 %),
// inside the 5 % tolerance.
TEST(Friction, SlidingBoxStopsAtClosedFormDistanceAndTime) {
  for (const Vec3 v0 : {Vec3{5.0f, 0.0f, 0.0f}, Vec3{0.0f, 0.0f, -5.0f}, Vec3{3.0f, 0.0f, 4.0f}}) {
    World world;
    add_floor(world, 0.5f);
    const ObjectID box = add(world, sliding_box(v0, 0.5f));
    const float mu = 0.5f;
    const float v = horizontal_speed(v0);
    const SlideResult r = slide(world, box, v0, 600);
    ASSERT_GT(r.stop_step, 0) << "never stopped";
    const float t_stop = v / (mu * kG);
    EXPECT_NEAR(r.stop_step * kDt, t_stop, 2 * kDt);
    const float s_stop = v * v / (2 * mu * kG);
    EXPECT_NEAR(r.distance, s_stop, 0.05f * s_stop);
    EXPECT_FALSE(r.energy_rose);
    // Circular cone: a diagonal slide (3, 4) decelerates like an axis-aligned one and keeps its
    // direction (a box clamp per tangent would turn it towards an axis).
    EXPECT_TRUE(r.direction_kept);
    // Still resting on the floor, not lifted or sunk.
    EXPECT_NEAR(state(world, box).position.y, 0.5f, world.settings().linear_slop);
  }
}

// The deceleration each step is mu g dt, for a few mu, while sliding. Tolerances: 2 % per step
// in the first two steps, while the soft contact takes up the box's weight (the normal impulse of
// a step misses m g dt by up to 1.5 % at mu = 1); 0.5 % per step after that, where
// the friction at the floor tips the box forward by a fraction of a degree and shifts load between
// its manifold points; and 0.5 % for the mean over the 11 steps.
TEST(Friction, DecelerationIsMuG) {
  for (const float mu : {0.1f, 0.5f, 1.0f}) {
    World world;
    add_floor(world, mu);
    const ObjectID box = add(world, sliding_box({8.0f, 0.0f, 0.0f}, mu));
    const float expected = mu * kG * kDt;
    float prev = 8.0f;
    constexpr int kSteps = 11;
    for (int i = 0; i < kSteps; ++i) {
      world.step(kDt);
      const float now = state(world, box).velocity.x;
      const float tolerance = (i < 2 ? 2e-2f : 0.5e-2f) * expected;
      EXPECT_NEAR(prev - now, expected, tolerance) << "mu " << mu << " step " << i;
      prev = now;
    }
    EXPECT_NEAR((8.0f - prev) / kSteps, expected, 0.5e-2f * expected) << "mu " << mu;
  }
}

// Mixing sqrt(mu_a mu_b): 0 on either side makes the contact frictionless (the speed is kept
// exactly), and mu_a = 0.2, mu_b = 0.8 gives mu = 0.4.
TEST(Friction, MixingRuleGeometricMean) {
  for (const auto& [floor_mu, box_mu] : {std::pair{0.0f, 0.5f}, std::pair{0.5f, 0.0f}, std::pair{0.0f, 0.0f}}) {
    World world;
    add_floor(world, floor_mu);
    const ObjectID box = add(world, sliding_box({5.0f, 0.0f, 0.0f}, box_mu));
    for (int i = 0; i < 120; ++i) world.step(kDt);
    const BodyState s = state(world, box);
    EXPECT_EQ(s.velocity.x, 5.0f) << floor_mu << " " << box_mu;
    EXPECT_NEAR(s.position.x, 5.0f * 120 * kDt, 1e-3f);
  }
  World world;
  add_floor(world, 0.2f);
  const ObjectID box = add(world, sliding_box({5.0f, 0.0f, 0.0f}, 0.8f));
  for (int i = 0; i < 30; ++i) world.step(kDt);
  EXPECT_NEAR(5.0f - state(world, box).velocity.x, 0.4f * kG * 30 * kDt, 1e-3f);
}

// Static friction: a horizontal force below mu m g does not move a resting box at all; above it,
// the box accelerates at (F - mu m g) / m. 2 kg, mu 0.5: the limit is 9.81 N.
TEST(Friction, StaticFrictionHoldsBelowTheLimit) {
  World world;
  add_floor(world, 0.5f);
  BodyDesc d = sliding_box({}, 0.5f);
  d.mass = 2.0f;
  const ObjectID box = add(world, d);
  for (int i = 0; i < 60; ++i) {
    ASSERT_EQ(world.apply_force(box, {9.0f, 0.0f, 0.0f}), Error::Ok);
    world.step(kDt);
    ASSERT_LT(std::fabs(state(world, box).velocity.x), kSpeedNoise) << "step " << i;
  }
  EXPECT_LT(std::fabs(state(world, box).position.x), 1e-3f);
  const float force = 15.0f;
  for (int i = 0; i < 60; ++i) {
    ASSERT_EQ(world.apply_force(box, {force, 0.0f, 0.0f}), Error::Ok);
    world.step(kDt);
  }
  const float a = (force - 0.5f * 2.0f * kG) / 2.0f;  // 2.595 m/s^2
  EXPECT_NEAR(state(world, box).velocity.x, a * 60 * kDt, 1e-2f * a);
}

// A pushed box comes to rest and falls asleep (stop within v0 / (mu g) < 0.82 s, then
// sleep_time_s 0.5 s: within 1.5 s), at the stop distance v0^2 / (2 mu g) within 5 %.
// A pushed sphere slides until friction has spun it up to rolling without slipping; for a solid
// sphere (I = 2/5 m r^2) that happens at v = 5/7 v0 (Goldstein-style closed form: friction
// impulse J gives v0 - J/m = r w = 5 J / (2 m)), after which it rolls on (within 2 %).
TEST(Friction, PushedBoxStopsAndSleepsPushedSphereRolls) {
  World world;
  add_ground(world);  // default friction 0.5
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  BodyDesc bd = sphere_desc({0.0f, 0.5f, 30.0f});
  bd.angular_damping = 0.0f;
  const ObjectID ball = add(world, bd);
  ASSERT_EQ(world.apply_impulse(box, {4.0f, 0.0f, 0.0f}), Error::Ok);
  ASSERT_EQ(world.apply_impulse(ball, {-3.0f, 0.0f, 2.0f}), Error::Ok);
  const int steps = test::step_until(world, kDt, 90, [&] { return state(world, box).sleeping; });
  EXPECT_LT(steps, 90);
  EXPECT_NEAR(state(world, box).position.x, 16.0f / (2 * 0.5f * kG), 0.05f * 16.0f / kG);
  const float v0 = std::sqrt(13.0f);
  EXPECT_NEAR(horizontal_speed(state(world, ball).velocity), 5.0f / 7.0f * v0, 0.02f * v0);
  EXPECT_FALSE(state(world, ball).sleeping);
}

// Friction between two dynamic bodies is an internal force. A 1 kg box slides at 3 m/s on a
// 3 kg slab that rests on a frictionless floor (mu_floor = 0 mixes to 0): horizontal momentum is
// conserved (tolerance 1e-4 relative, float rounding), horizontal kinetic energy never rises, and
// both end at the common velocity m_u v0 / (m_u + m_l) = 0.75 m/s, reached after
// v0 / (mu g (1/m_u + 1/m_l)) = 0.46 s (checked after 2 s, within 1e-3 m/s).
TEST(Friction, DynamicPairConservesMomentumAndReachesCommonVelocity) {
  World world;
  add_floor(world, 0.0f);
  const ObjectID lower = add(world, box_desc({0.0f, 0.5f, 0.0f}, {2.0f, 0.5f, 2.0f}, 3.0f));
  BodyDesc ud = box_desc({0.0f, 1.5f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f);
  ud.velocity = {3.0f, 0.0f, 0.0f};
  const ObjectID upper = add(world, ud);
  const float p0 = 3.0f;
  auto energy = [&] {
    const float vl = horizontal_speed(state(world, lower).velocity);
    const float vu = horizontal_speed(state(world, upper).velocity);
    return 0.5f * (3.0f * vl * vl + 1.0f * vu * vu);
  };
  float e = energy();
  for (int i = 0; i < 120; ++i) {
    world.step(kDt);
    const float now = energy();
    ASSERT_LE(now, e * (1 + 1e-6f)) << "step " << i;
    e = now;
    const float p = 3.0f * state(world, lower).velocity.x + 1.0f * state(world, upper).velocity.x;
    ASSERT_NEAR(p, p0, 1e-4f * p0) << "step " << i;
  }
  EXPECT_NEAR(state(world, lower).velocity.x, 0.75f, 1e-3f);
  EXPECT_NEAR(state(world, upper).velocity.x, 0.75f, 1e-3f);
  EXPECT_LT(std::fabs(state(world, upper).velocity.z), 1e-6f);  // no sideways drift
}

// The tangent basis is orthonormal and right-handed for normals in every octant and on the axes.
TEST(Friction, TangentBasisIsOrthonormal) {
  const Vec3 normals[] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1},
                          {0.57735027f, 0.57735027f, 0.57735027f}, {-0.6f, 0.0f, 0.8f}, {0.0f, -0.8f, 0.6f}};
  for (const Vec3 n : normals) {
    Vec3 t0;
    Vec3 t1;
    tangent_basis(n, t0, t1);
    EXPECT_NEAR(length(t0), 1.0f, 1e-6f);
    EXPECT_NEAR(length(t1), 1.0f, 1e-6f);
    EXPECT_NEAR(dot(n, t0), 0.0f, 1e-6f);
    EXPECT_NEAR(dot(n, t1), 0.0f, 1e-6f);
    EXPECT_NEAR(dot(t0, t1), 0.0f, 1e-6f);
    const Vec3 c = cross(t0, t1);  // right-handed: t0 x t1 = n
    EXPECT_NEAR(c.x, n.x, 1e-6f);
    EXPECT_NEAR(c.y, n.y, 1e-6f);
    EXPECT_NEAR(c.z, n.z, 1e-6f);
  }
}

}  // namespace
// Jolt's TestFriction (UnitTests/Physics/PhysicsTests.cpp): a 2 m box starting 1 mm into the
// floor slides at 20 m/s in 12 directions 30 degrees apart, mu = sqrt(0.9 * 0.8); after 60 steps
// its position and velocity match v' = v - mu g h v / |v| integrated by semi-implicit Euler over
// the world's substeps h (Jolt's reference uses its own step, dt; Impulse's substeps travel
// mu g t (dt - h) / 2 = 5.2 cm farther in 1 s, nearer the closed form), and it neither turned
// nor spins. Jolt's tolerances: 1 cm, 2 cm/s, 0.01 (quaternion), 0.01 rad/s.
// The speed is swept too (5 to 20 m/s).
//
// Friction rows run only in the relax sweeps (solver.cpp, as Box2D v3 since its PR #1050). When
// they also ran in the biased sweep, the friction impulse at the bottom face turned the box
// forward before the next normal rows could answer, and the positions were integrated with that
// turn: the leading edge sank 0.2 mm a substep against the soft push, the trailing edge lifted
// off, and the box rocked at up to 0.049 rad/s when sliding along +x or +z (the trailing pair of
// points, with a gap, fell freely through the last relax of each step).
TEST(Friction, SlidingBoxNeitherTurnsNorSpinsInAnyDirection) {
  const float mu = std::sqrt(0.9f * 0.8f);
  float worst = 0;
  // Jolt's start, 1 mm into the floor, and resting exactly on it. From 1 mm in, the overlap
  // recovery turns the box at up to 0.027 rad/s in the first steps, decaying (Jolt checks the end
  // only); rocking is judged from step 15 (0.25 s) on, and from the start when it rests exactly.
  for (const float start_y : {0.999f, 1.0f}) {
  for (const float speed : {5.0f, 10.0f, 20.0f}) {
    for (int degrees = 0; degrees < 360; degrees += 30) {
      World world;
      add_floor(world, 0.9f);
      const float angle = static_cast<float>(degrees) * 3.14159265f / 180.0f;
      BodyDesc d = box_desc({0.0f, start_y, 0.0f}, {1.0f, 1.0f, 1.0f});
      d.friction = 0.8f;
      d.linear_damping = 0.0f;
      d.velocity = Vec3{std::sin(angle), 0.0f, std::cos(angle)} * speed;
      const ObjectID box = add(world, d);
      Vec3 velocity = d.velocity;
      Vec3 position = d.position;
      const int substeps = world.settings().substeps;
      const float h = kDt / static_cast<float>(substeps);
      float worst_spin = 0;
      for (int i = 0; i < 60; ++i) {
        world.step(kDt);
        for (int k = 0; k < substeps; ++k) {
          const float v = length(velocity);
          velocity = v > mu * kG * h ? velocity - velocity * (mu * kG * h / v) : Vec3{};
          position += velocity * h;
        }
        if (start_y == 1.0f || i >= 15) worst_spin = std::max(worst_spin, length(state(world, box).angular_velocity));
      }
      const BodyState s = state(world, box);
      const std::string where = "start y " + std::to_string(start_y) + " speed " + std::to_string(speed) +
                                " direction " + std::to_string(degrees);
      EXPECT_LE(length(s.position - position), 1e-2f) << where;
      EXPECT_LE(length(s.velocity - velocity), 2e-2f) << where;
      EXPECT_LE(std::fabs(s.orientation.x) + std::fabs(s.orientation.y) + std::fabs(s.orientation.z), 1e-2f) << where;
      EXPECT_LE(length(s.angular_velocity), 1e-2f) << where;
      EXPECT_LE(worst_spin, 1e-2f) << where << " (rocking)";
      worst = std::max(worst, worst_spin);
    }
  }
  }
  std::printf("[ measured ] sliding box: worst |w| %.3g rad/s over 72 slides\n", worst);
}

}  // namespace impulse::physics
