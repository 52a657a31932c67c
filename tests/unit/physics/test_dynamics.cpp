// Linear dynamics against closed forms and conservation laws: free fall, damping, forces,
// restitution bounce height, momentum, resting contact, kinematic and static bodies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::box_desc;
using test::sphere_desc;
using test::state;

WorldSettings zero_gravity() {
  WorldSettings s;
  s.gravity = {0, 0, 0};
  return s;
}

// A body in free flight moves by the trapezoid rule over the solver's substeps of h = dt / substeps
// (solver.cpp): v_k = v0 + k g h, x_N = x0 + h * sum((v_(k-1) + v_k) / 2) = x0 + v0 t + g t^2 / 2,
// t = N h, the continuous parabola. With dt = 1/64, 4 substeps (h = 1/256) and g = -8 m/s^2 every
// intermediate value is a multiple of 2^-14 below 2^7, so float arithmetic is exact and the
// simulation must equal the closed form bit for bit.
TEST(Dynamics, FreeFallEqualsDiscreteClosedFormExactly) {
  WorldSettings s;
  s.gravity = {0.0f, -8.0f, 0.0f};
  World world(s);
  const Vec3 x0{1.0f, 50.0f, -2.0f};
  const Vec3 v0{0.5f, 3.0f, -0.25f};
  BodyDesc d = sphere_desc(x0);
  d.velocity = v0;
  const ObjectID id = add(world, d);
  const float dt = 1.0f / 64.0f;
  ASSERT_EQ(world.settings().substeps, 4);
  for (int n = 1; n <= 128; ++n) {
    world.step(dt);
    const double t = n * static_cast<double>(dt);
    const double y = x0.y + v0.y * t + 0.5 * s.gravity.y * t * t;
    const BodyState b = state(world, id);
    ASSERT_EQ(b.position.y, static_cast<float>(y)) << "step " << n;
    ASSERT_EQ(b.position.x, static_cast<float>(x0.x + v0.x * t));
    ASSERT_EQ(b.position.z, static_cast<float>(x0.z + v0.z * t));
    ASSERT_EQ(b.velocity.y, static_cast<float>(v0.y + s.gravity.y * t));
  }
}

// Realistic g and dt, where float rounding enters: the trapezoid rule has no bias under constant
// gravity (semi-implicit Euler would be g t h / 2 = 0.04 m low here), so only rounding is left.
// Each of the N = 480 position and velocity updates rounds by at most half an ulp (a few
// operations each); with |x| <= 30 m and |v| <= 25 m/s that bounds the error by
// N * eps * (max|x| + t * max|v|) = 480 * 1.19e-7 * (30 + 2 * 25) = 4.6e-3 m.
TEST(Dynamics, FreeFallMatchesClosedFormsWithinIntegratorError) {
  World world;  // g = -9.81
  const Vec3 x0{0.0f, 0.0f, 0.0f};
  const Vec3 v0{1.0f, 4.0f, 0.0f};
  BodyDesc d = sphere_desc(x0);
  d.velocity = v0;
  const ObjectID id = add(world, d);
  const double g = world.settings().gravity.y;
  const float dt = 1.0f / 60.0f;
  const int n = 120;
  const int substeps = world.settings().substeps;
  const double rounding = n * substeps * std::numeric_limits<float>::epsilon() * (30.0 + 2.0 * 25.0);
  for (int i = 1; i <= n; ++i) {
    world.step(dt);
    const double t = i * static_cast<double>(dt);
    const double continuous = x0.y + v0.y * t + 0.5 * g * t * t;
    const double y = state(world, id).position.y;
    ASSERT_NEAR(y, continuous, rounding) << "step " << i;
    ASSERT_NEAR(state(world, id).position.x, v0.x * t, rounding);
  }
}

// Damping acts per substep: v = v0 / (1 + h c)^(n substeps), h = dt / substeps; 240
// multiplications by a rounded factor (each <= 1 ulp): relative tolerance 240 * 1.2e-7 < 3e-5.
TEST(Dynamics, LinearDampingMatchesClosedForm) {
  World world(zero_gravity());
  BodyDesc d = sphere_desc({0, 0, 0});
  d.velocity = {10.0f, 0.0f, -4.0f};
  d.linear_damping = 2.0f;
  const ObjectID id = add(world, d);
  const float dt = 1.0f / 60.0f;
  for (int n = 1; n <= 60; ++n) world.step(dt);
  const int substeps = world.settings().substeps;
  const double h = dt / static_cast<double>(substeps);
  const double factor = std::pow(1.0 / (1.0 + h * 2.0), 60 * substeps);
  EXPECT_NEAR(state(world, id).velocity.x, 10.0 * factor, 3e-5 * 10.0);
  EXPECT_NEAR(state(world, id).velocity.z, -4.0 * factor, 3e-5 * 4.0);
}

TEST(Dynamics, ForcesAccumulateForOneStepOnly) {
  World world(zero_gravity());
  const ObjectID id = add(world, sphere_desc({0, 0, 0}, 0.5f, 2.0f));
  ASSERT_EQ(world.apply_force(id, {4.0f, 0.0f, 0.0f}), Error::Ok);
  ASSERT_EQ(world.apply_force(id, {4.0f, 2.0f, 0.0f}), Error::Ok);
  const float dt = 0.125f;  // binary fractions: exact arithmetic, exact expectations
  world.step(dt);
  // dv = (F_total / m) dt = (8, 2, 0) / 2 * 0.125
  EXPECT_EQ(state(world, id).velocity.x, 0.5f);
  EXPECT_EQ(state(world, id).velocity.y, 0.125f);
  world.step(dt);  // accumulator was cleared: no further change
  EXPECT_EQ(state(world, id).velocity.x, 0.5f);
  EXPECT_EQ(state(world, id).velocity.y, 0.125f);
}

TEST(Dynamics, ImpulseChangesVelocityImmediately) {
  World world(zero_gravity());
  const ObjectID id = add(world, sphere_desc({0, 0, 0}, 0.5f, 4.0f));
  ASSERT_EQ(world.apply_impulse(id, {2.0f, -8.0f, 1.0f}), Error::Ok);
  const BodyState b = state(world, id);  // before any step: dv = J / m
  EXPECT_EQ(b.velocity.x, 0.5f);
  EXPECT_EQ(b.velocity.y, -2.0f);
  EXPECT_EQ(b.velocity.z, 0.25f);
  ASSERT_EQ(world.set_velocity(id, {1.0f, 1.0f, 1.0f}), Error::Ok);
  EXPECT_EQ(state(world, id).velocity, (Vec3{1.0f, 1.0f, 1.0f}));
}

// Drop height h (bottom of the sphere above the floor), restitution e: the first bounce peaks
// at e^2 h (energy ratio e^2). Tolerance 5 %: the contact is detected after up to one step of
// penetration (v dt = 4 cm here) and Baumgarte moves the ball by up to 20 % of that depth.
TEST(Dynamics, BounceHeightIsRestitutionSquaredTimesDropHeight) {
  for (const float e : {0.5f, 0.8f}) {
    World world;
    add_ground(world);
    const float radius = 0.5f;
    const float h = 4.0f;
    const ObjectID ball = add(world, sphere_desc({0.0f, radius + h, 0.0f}, radius, 1.0f, e));
    const float dt = 1.0f / 240.0f;
    bool bounced = false;
    float apex = 0;
    for (int i = 0; i < 240 * 4; ++i) {
      world.step(dt);
      const BodyState b = state(world, ball);
      if (!bounced && b.velocity.y > 0) bounced = true;
      if (bounced) {
        apex = std::max(apex, b.position.y - radius);
        if (b.velocity.y < 0) break;  // past the first apex
      }
    }
    ASSERT_TRUE(bounced);
    EXPECT_NEAR(apex, e * e * h, 0.05f * e * e * h) << "e = " << e;
  }
}

// Head-on collision of two spheres in zero gravity: total momentum is conserved to float
// precision (relative 1e-6), and the separating speed is e times the approach speed (Newton's
// restitution law; relative 1e-5, the single contact converges in the first iteration).
TEST(Dynamics, TwoBodyCollisionConservesMomentum) {
  World world(zero_gravity());
  const float ma = 1.0f;
  const float mb = 3.0f;
  const float e = 0.5f;
  BodyDesc da = sphere_desc({-2.0f, 0.0f, 0.0f}, 0.5f, ma, e);
  da.velocity = {3.0f, 0.0f, 0.0f};
  BodyDesc db = sphere_desc({2.0f, 0.0f, 0.0f}, 0.5f, mb, e);
  db.velocity = {-0.5f, 0.0f, 0.0f};
  const ObjectID a = add(world, da);
  const ObjectID b = add(world, db);
  const double p_before = ma * 3.0 + mb * -0.5;
  const double approach = 3.0 - -0.5;
  bool touched = false;
  for (int i = 0; i < 240; ++i) {
    world.step(1.0f / 120.0f);
    touched = touched || world.are_colliding(a, b);
    const double p = ma * state(world, a).velocity.x + mb * state(world, b).velocity.x;
    ASSERT_NEAR(p, p_before, 1e-6 * std::fabs(p_before) + 1e-6) << "step " << i;
  }
  ASSERT_TRUE(touched);
  const double separation = state(world, b).velocity.x - state(world, a).velocity.x;
  EXPECT_NEAR(separation, e * approach, 1e-5 * approach);
}

// A box set down on the ground (sleep disabled, so the solver has to hold it every step) must
// not drift or jitter: after 1 s of settling, its height varies by less than 1 mm over 5 s and it
// wanders sideways less than 1 mm (sequential impulses over its four manifold points are not
// perfectly symmetric, so exact zero is not expected).
TEST(Dynamics, RestingBodyStaysPut) {
  WorldSettings s;
  s.sleep_speed = 0;  // never sleeps: the contact is solved all 6 s
  World world(s);
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.6f, 0.0f}));  // 10 cm drop
  const float dt = 1.0f / 60.0f;
  for (int i = 0; i < 60; ++i) world.step(dt);
  const float settled = state(world, box).position.y;
  EXPECT_NEAR(settled, 0.5f, s.linear_slop + 1e-3f);  // rests within the allowed penetration
  float lo = settled;
  float hi = settled;
  for (int i = 0; i < 300; ++i) {
    world.step(dt);
    const BodyState b = state(world, box);
    lo = std::min(lo, b.position.y);
    hi = std::max(hi, b.position.y);
    ASSERT_LT(std::fabs(b.position.x), 1e-3f);
    ASSERT_LT(std::fabs(b.position.z), 1e-3f);
  }
  EXPECT_LT(hi - lo, 1e-3f);
  EXPECT_FALSE(state(world, box).sleeping);
}

TEST(Dynamics, RestingBodyFallsAsleepAndAForceWakesIt) {
  World world;
  add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.6f, 0.0f}));
  const float dt = 1.0f / 60.0f;
  // Settling takes a few steps, then sleep_time_s (0.5 s) below sleep_speed: well within 2 s.
  const int steps = test::step_until(world, dt, 120, [&] { return state(world, box).sleeping; });
  ASSERT_LT(steps, 120);
  EXPECT_EQ(world.awake_count(), 0u);
  const float rest_y = state(world, box).position.y;
  ASSERT_EQ(world.apply_force(world.get_object(box)->id, {0.0f, 60.0f, 0.0f}), Error::Ok);
  EXPECT_FALSE(state(world, box).sleeping);
  EXPECT_EQ(world.awake_count(), 1u);
  world.step(dt);
  // a = F/m + g = 50.19 m/s^2 upwards for one step
  EXPECT_NEAR(state(world, box).velocity.y, (60.0f - 9.81f) * dt, 1e-5f);
  EXPECT_GT(state(world, box).position.y, rest_y);
}

// A kinematic box moving at 2 m/s pushes a dynamic box ahead of it (e = 0: the dynamic box
// takes the kinematic velocity, up to the soft contact's push-out) and is itself never slowed
// down. Zero gravity, no friction.
TEST(Dynamics, KinematicPushesDynamicBody) {
  World world(zero_gravity());
  BodyDesc kd = box_desc({0.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Kinematic);
  kd.velocity = {2.0f, 0.0f, 0.0f};
  const ObjectID pusher = add(world, kd);
  const ObjectID cargo = add(world, box_desc({1.5f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 5.0f));
  const float dt = 1.0f / 60.0f;
  for (int i = 0; i < 120; ++i) {
    world.step(dt);
    const BodyState k = state(world, pusher);
    const BodyState c = state(world, cargo);
    ASSERT_EQ(k.velocity.x, 2.0f);
    // Never deeper than one step of relative motion (2 m/s * dt = 3.3 cm) plus the slop.
    ASSERT_GE(c.position.x - k.position.x, 1.0f - 2.0f * dt - world.settings().linear_slop) << "step " << i;
  }
  const BodyState k = state(world, pusher);
  const BodyState c = state(world, cargo);
  EXPECT_NEAR(k.position.x, 4.0f, 1e-4f);  // 120 steps of 2/60 m: float rounding only
  // The soft contact pushes penetration out at up to contact_push_max_speed, so the cargo may
  // run slightly ahead of the pusher before it is caught again: within 5 %.
  EXPECT_NEAR(c.velocity.x, 2.0f, 0.1f);
  EXPECT_GT(c.position.x, 4.9f);  // pushed at least 3.4 m from its start
}

TEST(Dynamics, KinematicIgnoresGravityAndForces) {
  World world;
  BodyDesc kd = box_desc({0.0f, 5.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Kinematic);
  kd.velocity = {0.0f, 0.0f, 1.0f};
  const ObjectID k = add(world, kd);
  EXPECT_EQ(world.apply_force(k, {0.0f, 10.0f, 0.0f}), Error::NotDynamic);
  EXPECT_EQ(world.apply_impulse(k, {0.0f, 10.0f, 0.0f}), Error::NotDynamic);
  for (int i = 0; i < 60; ++i) world.step(1.0f / 60.0f);
  EXPECT_EQ(state(world, k).velocity, (Vec3{0.0f, 0.0f, 1.0f}));
  EXPECT_EQ(state(world, k).position.y, 5.0f);
  EXPECT_NEAR(state(world, k).position.z, 1.0f, 1e-5f);
  EXPECT_EQ(state(world, k).mass, 0.0f);
}

// Kinematic-vs-static pairs get no response and no contact.
TEST(Dynamics, KinematicPassesThroughStatic) {
  World world(zero_gravity());
  const ObjectID wall = add(world, box_desc({2.0f, 0.0f, 0.0f}, {0.5f, 2.0f, 2.0f}, 0.0f, BodyKind::Static));
  BodyDesc kd = box_desc({0.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Kinematic);
  kd.velocity = {2.0f, 0.0f, 0.0f};
  const ObjectID k = add(world, kd);
  for (int i = 0; i < 120; ++i) {
    world.step(1.0f / 60.0f);
    ASSERT_FALSE(world.are_colliding(wall, k));
  }
  EXPECT_NEAR(state(world, k).position.x, 4.0f, 1e-4f);
  EXPECT_TRUE(world.get_collisions().empty());
}

// A heavy fast box slams into a static box: the static box stays bit-identical.
TEST(Dynamics, StaticNeverMoves) {
  World world;
  add_ground(world);
  const Vec3 wall_pos{3.0f, 1.0f, 0.0f};
  const ObjectID wall = add(world, box_desc(wall_pos, {0.5f, 1.0f, 1.0f}, 0.0f, BodyKind::Static));
  BodyDesc hd = box_desc({0.0f, 0.6f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0e5f);
  hd.velocity = {20.0f, 0.0f, 0.0f};
  hd.restitution = 1.0f;
  const ObjectID hammer = add(world, hd);
  bool hit = false;
  for (int i = 0; i < 60; ++i) {
    world.step(1.0f / 60.0f);
    hit = hit || world.are_colliding(wall, hammer);
    const BodyState w = state(world, wall);
    ASSERT_EQ(w.position, wall_pos);
    ASSERT_EQ(w.velocity, (Vec3{}));
  }
  EXPECT_TRUE(hit);
  EXPECT_LT(state(world, hammer).velocity.x, 0.0f);  // bounced back
}

}  // namespace
}  // namespace impulse::physics
