// World::move_kinematic (issue 17, item 5): the velocities that carry a kinematic body to a target
// pose in one step, after Jolt's Body::MoveKinematic (Jolt/Physics/Body/Body.cpp and
// MotionProperties::MoveKinematic: delta position / dt, and the axis-angle of the shortest-arc
// rotation target * conj(current) / dt), with the angle inverted through this world's integrator.
#include <gtest/gtest.h>

#include <cmath>

#include "server/physics/world.h"
#include "world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::box_desc;
using test::sphere_desc;
using test::state;

constexpr float kDt = 1.0f / 60.0f;
constexpr float kPi = 3.14159265358979f;

WorldSettings zero_gravity() {
  WorldSettings s;
  s.gravity = {0.0f, 0.0f, 0.0f};
  return s;
}

Vec3 unit(Vec3 v) { return v * (1.0f / length(v)); }

/// The angle [rad] of the rotation between two unit quaternions (q and -q are the same rotation).
float angle_between(Quat a, Quat b) {
  const float d = std::fabs(dot(a, b));
  return 2.0f * std::acos(std::fmin(d, 1.0f));
}

// One step lands on the target: position to float rounding of |delta| (~1e-6 m here), orientation
// to 1e-4 rad. Jolt's own angle / dt, integrated by four normalised first-order substeps (each
// turning by 2 atan(w h / 2) instead of w h), would miss a 90 degree turn by 0.019 rad, so the
// tolerance shows the inverse. Turns stay under max_angular_speed (47.1 rad/s) for their dt.
TEST(MoveKinematic, OneStepReachesTheTargetPose) {
  struct Case {
    Vec3 target;
    Vec3 axis;
    float degrees;
    float dt;
  };
  const Case cases[] = {
      {{0.3f, 1.2f, -0.1f}, {1.0f, 2.0f, 3.0f}, 40.0f, kDt},
      {{-2.0f, 0.5f, 4.0f}, {0.0f, 1.0f, 0.0f}, 90.0f, 0.05f},
      {{0.0f, 1.0f, 0.0f}, {0.0f, 0.0f, 1.0f}, 0.0f, kDt},       // no turn: zero angular velocity
      {{0.0f, 1.0f, 0.0f}, {1.0f, 0.0f, 0.0f}, -179.0f, 0.1f},  // nearly half a turn, the other way
  };
  for (const Case& c : cases) {
    World world(zero_gravity());
    BodyDesc d = box_desc({0.0f, 1.0f, 0.0f}, {0.5f, 0.25f, 1.0f}, 1.0f, BodyKind::Kinematic);
    d.orientation = normalize(quat_from_axis_angle(unit(Vec3{1.0f, 1.0f, 0.0f}), 0.3f));
    const ObjectID id = add(world, d);
    const Quat target = normalize(quat_from_axis_angle(unit(c.axis), c.degrees * kPi / 180.0f)) * d.orientation;
    ASSERT_EQ(world.move_kinematic(id, c.target, target, c.dt), Error::Ok) << c.degrees;
    world.step(c.dt);
    const BodyState s = state(world, id);
    EXPECT_NEAR(s.position.x, c.target.x, 1.0e-5f) << c.degrees;
    EXPECT_NEAR(s.position.y, c.target.y, 1.0e-5f) << c.degrees;
    EXPECT_NEAR(s.position.z, c.target.z, 1.0e-5f) << c.degrees;
    EXPECT_LT(angle_between(s.orientation, target), 1.0e-4f) << c.degrees;
    // The velocities stay (Jolt's semantics): the linear one is delta / dt.
    EXPECT_NEAR(s.velocity.x, (c.target.x - d.position.x) / c.dt, 1.0e-3f);
    if (c.degrees == 0.0f) {
      EXPECT_EQ(s.angular_velocity, Vec3{});
    }
  }
}

// A target given as -q (w < 0) is the same pose: the shortest arc turns by the small angle.
TEST(MoveKinematic, TheShortestArcIsTaken) {
  World world(zero_gravity());
  const ObjectID id = add(world, box_desc({0.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Kinematic));
  const Quat q = quat_from_axis_angle({0.0f, 1.0f, 0.0f}, 0.2f);
  ASSERT_EQ(world.move_kinematic(id, {}, Quat{-q.x, -q.y, -q.z, -q.w}, kDt), Error::Ok);
  const BodyState s = state(world, id);
  // 0.2 rad in one step: about 12 rad/s about +y, not (2 pi - 0.2) / dt about -y.
  EXPECT_GT(s.angular_velocity.y, 11.0f);
  EXPECT_LT(s.angular_velocity.y, 13.0f);
  world.step(kDt);
  EXPECT_LT(angle_between(state(world, id).orientation, q), 1.0e-4f);
}

// Driven every step along a line at 2 m/s into a free box in zero g, the kinematic body pushes it:
// the box leaves at the kinematic body's speed (or faster: e = 0 against an infinite mass gives
// exactly its speed) and the kinematic body keeps to its targets whatever it hits.
TEST(MoveKinematic, AKinematicBodyDrivenOntoADynamicOnePushesIt) {
  World world(zero_gravity());
  const ObjectID pusher = add(world, box_desc({0.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Kinematic));
  const ObjectID box = add(world, box_desc({1.2f, 0.0f, 0.0f}));
  constexpr float kSpeed = 2.0f;
  for (int i = 1; i <= 60; ++i) {
    const Vec3 target{kSpeed * kDt * static_cast<float>(i), 0.0f, 0.0f};
    ASSERT_EQ(world.move_kinematic(pusher, target, Quat{}, kDt), Error::Ok);
    world.step(kDt);
    EXPECT_NEAR(state(world, pusher).position.x, target.x, 1.0e-4f) << "step " << i;
  }
  const BodyState b = state(world, box);
  EXPECT_GT(b.velocity.x, 0.95f * kSpeed);
  EXPECT_GT(b.position.x, 1.2f + 0.5f * kSpeed * 0.5f);  // it moved at the pusher's speed for at least half the time
  EXPECT_GE(b.position.x - state(world, pusher).position.x, 1.0f - 0.01f);  // ahead, not penetrated
}

// A kinematic body created asleep wakes when given a target.
TEST(MoveKinematic, WakesASleepingKinematicBody) {
  World world(zero_gravity());
  BodyDesc d = box_desc({0.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Kinematic);
  d.asleep = true;
  const ObjectID id = add(world, d);
  ASSERT_TRUE(state(world, id).sleeping);
  ASSERT_EQ(world.move_kinematic(id, {0.1f, 0.0f, 0.0f}, Quat{}, kDt), Error::Ok);
  EXPECT_FALSE(state(world, id).sleeping);
  world.step(kDt);
  EXPECT_NEAR(state(world, id).position.x, 0.1f, 1.0e-6f);
}

TEST(MoveKinematic, RefusalsLeaveTheBodyAlone) {
  World world(zero_gravity());
  const ObjectID kin = add(world, box_desc({0.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Kinematic));
  const ObjectID dyn = add(world, sphere_desc({5.0f, 0.0f, 0.0f}));
  const ObjectID fixed = add(world, box_desc({-5.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Static));
  const float nan = std::nanf("");
  const float inf = INFINITY;
  const Quat half_norm{0.0f, 0.0f, 0.0f, 0.5f};

  EXPECT_EQ(world.move_kinematic(dyn, {5.1f, 0.0f, 0.0f}, Quat{}, kDt), Error::NotDynamic);
  EXPECT_EQ(world.move_kinematic(fixed, {-5.0f, 0.0f, 0.0f}, Quat{}, kDt), Error::NotDynamic);
  EXPECT_EQ(world.move_kinematic(ObjectID{99, 1}, {}, Quat{}, kDt), Error::StaleId);
  EXPECT_EQ(world.move_kinematic(kin, {nan, 0.0f, 0.0f}, Quat{}, kDt), Error::InvalidArgument);
  EXPECT_EQ(world.move_kinematic(kin, {0.0f, inf, 0.0f}, Quat{}, kDt), Error::InvalidArgument);
  EXPECT_EQ(world.move_kinematic(kin, {0.0f, 0.0f, 2.0e5f}, Quat{}, kDt), Error::InvalidArgument);  // beyond max_coordinate
  EXPECT_EQ(world.move_kinematic(kin, {}, Quat{nan, 0.0f, 0.0f, 1.0f}, kDt), Error::InvalidArgument);
  EXPECT_EQ(world.move_kinematic(kin, {}, half_norm, kDt), Error::InvalidArgument);
  EXPECT_EQ(world.move_kinematic(kin, {}, Quat{}, 0.0f), Error::InvalidArgument);
  EXPECT_EQ(world.move_kinematic(kin, {}, Quat{}, nan), Error::InvalidArgument);
  // 1 km in one 60 Hz step is 6e4 m/s, beyond max_speed (1e4); 3 rad in 1 ms beyond max_angular_speed.
  EXPECT_EQ(world.move_kinematic(kin, {1000.0f, 0.0f, 0.0f}, Quat{}, kDt), Error::InvalidArgument);
  EXPECT_EQ(world.move_kinematic(kin, {}, quat_from_axis_angle({0.0f, 1.0f, 0.0f}, 3.0f), 0.001f),
            Error::InvalidArgument);

  const BodyState s = state(world, kin);
  EXPECT_EQ(s.velocity, Vec3{});
  EXPECT_EQ(s.angular_velocity, Vec3{});
  const BodyState d = state(world, dyn);
  EXPECT_EQ(d.velocity, Vec3{});
}

}  // namespace
}  // namespace impulse::physics
