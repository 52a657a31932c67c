// Joints (server/physics/joint.h) checked against closed forms: pendulum periods, a welded pair in
// free fall, a hinge that turns about its axis only, momentum kept by internal forces, and the
// rules around them (islands, collision between jointed bodies, errors, threads).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/physics/world.h"
#include "shared/parallel.h"
#include "unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::sphere_desc;
using test::state;

constexpr float kDt = 1.0f / 60.0f;
constexpr float kG = 9.81f;
constexpr float kPi = 3.14159265358979f;

World::JointResult joint(World& w, JointKind kind, ObjectID a, ObjectID b, Vec3 anchor) {
  JointDesc d;
  d.kind = kind;
  d.body_a = a;
  d.body_b = b;
  d.anchor = anchor;
  return w.create_joint(d);
}

// The time between the first and the last of `crossings` upward zero crossings of x(t), over the
// periods between them [s]; interpolated within the step.
double period_of(World& w, ObjectID bob, int periods) {
  std::vector<double> up;
  float previous = state(w, bob).position.x;
  for (int k = 1; k < 20000 && static_cast<int>(up.size()) <= periods; ++k) {
    w.step(kDt);
    const float x = state(w, bob).position.x;
    if (previous < 0 && x >= 0) up.push_back((k - 1 + previous / (previous - x)) * kDt);
    previous = x;
  }
  if (static_cast<int>(up.size()) <= periods) return 0;
  return (up.back() - up.front()) / periods;
}

// A sphere of radius r on a massless rod of length L about its centre is a physical pendulum:
// T = 2 pi sqrt(I / (m g L)), I = m L^2 + 2/5 m r^2, times 1 + theta0^2 / 16 for the amplitude.
double pendulum_period(double length, double radius, double theta0) {
  const double inertia = length * length + 0.4 * radius * radius;  // per unit mass
  return 2.0 * 3.14159265358979 * std::sqrt(inertia / (kG * length)) * (1.0 + theta0 * theta0 / 16.0);
}

TEST(Joints, APointPendulumSwingsWithThePhysicalPendulumsPeriod) {
  // Lengths and starting angles swept; the period within 1 %, the rod within 5 mm, no energy gained.
  for (const float rod : {0.5f, 1.0f, 2.0f, 4.0f}) {
    for (const float theta0 : {0.05f, 0.2f}) {
      World w;
      const Vec3 pivot{0, 10, 0};
      const ObjectID bob = add(w, sphere_desc(pivot + Vec3{-rod * std::sin(theta0), -rod * std::cos(theta0), 0}, 0.1f));
      ASSERT_EQ(joint(w, JointKind::Point, bob, ObjectID{}, pivot).error, Error::Ok);
      const float top = state(w, bob).position.y;
      const double t = period_of(w, bob, 4);
      const double expected = pendulum_period(rod, 0.1, theta0);
      EXPECT_NEAR(t, expected, 0.01 * expected) << "L " << rod << " theta0 " << theta0;
      for (int k = 0; k < 300; ++k) {
        w.step(kDt);
        const BodyState s = state(w, bob);
        EXPECT_NEAR(length(s.position - pivot), rod, 0.005f) << "L " << rod;
        EXPECT_LE(s.position.y, top + 1e-3f) << "the bob rose above where it started";
      }
    }
  }
}

TEST(Joints, ARigidDistanceJointIsTheSamePendulum) {
  for (const float rod : {1.0f, 3.0f}) {
    World w;
    const Vec3 pivot{0, 10, 0};
    const float theta0 = 0.1f;
    const ObjectID bob = add(w, sphere_desc(pivot + Vec3{-rod * std::sin(theta0), -rod * std::cos(theta0), 0}, 0.1f));
    JointDesc d;
    d.kind = JointKind::Distance;
    d.body_a = bob;
    d.anchor = state(w, bob).position;
    d.anchor_b = pivot;
    ASSERT_EQ(w.create_joint(d).error, Error::Ok);
    const double t = period_of(w, bob, 3);
    const double expected = pendulum_period(rod, 0.1, theta0);
    EXPECT_NEAR(t, expected, 0.01 * expected) << "L " << rod;
    EXPECT_NEAR(length(state(w, bob).position - pivot), rod, 0.005f);
  }
}

TEST(Joints, ADistanceSpringOscillatesAtItsFrequency) {
  // A 1 kg ball hanging on a 20 Hz... 2 Hz spring without damping: the spring row is implicit
  // (soft step), so its period is the spring's, 1/f, within 2 % (Box2D v3's soft spring).
  for (const float hertz : {1.0f, 2.0f}) {
    World w;
    WorldSettings s = w.settings();
    const Vec3 top{0, 10, 0};
    const ObjectID ball = add(w, sphere_desc(top + Vec3{0, -1.2f, 0}, 0.1f));
    JointDesc d;
    d.kind = JointKind::Distance;
    d.body_a = ball;
    d.anchor = top + Vec3{0, -1.2f, 0};
    d.anchor_b = top;
    d.min_length = 0.1f;
    d.max_length = 3.0f;
    d.spring_hertz = hertz;
    ASSERT_EQ(w.create_joint(d).error, Error::Ok);
    // The rest length is 1.2 m: gravity stretches it by g / omega^2; the ball oscillates about that.
    std::vector<double> downs;
    float previous = 0;
    const float mid = 10.0f - 1.2f - kG / std::pow(2 * kPi * hertz, 2.0f);
    for (int k = 1; k < 600 && downs.size() < 4; ++k) {
      w.step(kDt);
      const float y = state(w, ball).position.y - mid;
      if (k > 1 && previous > 0 && y <= 0) downs.push_back((k - 1 + previous / (previous - y)) * kDt);
      previous = y;
    }
    ASSERT_EQ(downs.size(), 4u) << hertz << " Hz";
    const double period = (downs.back() - downs.front()) / 3.0;
    EXPECT_NEAR(period, 1.0 / hertz, 0.02 / hertz) << hertz << " Hz";
    (void)s;
  }
}

TEST(Joints, AWeldedPairFallsFreelyAsOneBody) {
  World w;
  const ObjectID a = add(w, test::box_desc({0, 20, 0}, {0.5f, 0.2f, 0.3f}, 2.0f));
  const ObjectID b = add(w, sphere_desc({1.0f, 20.3f, 0.2f}, 0.3f, 1.0f));
  ASSERT_EQ(joint(w, JointKind::Fixed, a, b, {0.6f, 20.1f, 0.1f}).error, Error::Ok);
  // A kick off the centre of mass: the pair spins as one and its centre falls as g t^2 / 2.
  ASSERT_EQ(w.apply_impulse(a, {0, 0, 1.0f}), Error::Ok);
  const Vec3 ra = state(w, a).position, rb = state(w, b).position;
  const Vec3 com0 = (ra * 2.0f + rb) * (1.0f / 3.0f);
  const float d0 = length(rb - ra);
  for (int k = 1; k <= 60; ++k) {
    w.step(kDt);
    const BodyState sa = state(w, a), sb = state(w, b);
    EXPECT_NEAR(length(sb.position - sa.position), d0, 0.002f) << "step " << k;
    const Vec3 com = (sa.position * 2.0f + sb.position) * (1.0f / 3.0f);
    const float t = k * kDt;
    EXPECT_NEAR(com.y, com0.y - 0.5f * kG * t * t, 0.005f) << "step " << k;
    EXPECT_NEAR(com.z, com0.z + t / 3.0f, 0.002f) << "the kick moved the pair's centre at 1/3 m/s";
    // The same spin: B's orientation relative to A's holds.
    const Quat rel = conjugate(sa.orientation) * sb.orientation;
    EXPECT_GT(std::fabs(rel.w), 0.9999f) << "step " << k;
  }
}

// A 3 kg door 1 m wide (half extents 0.5, 1, 0.05) about its left edge: m (w^2 / 3 + t^2 / 12).
constexpr float kDoorInertia = 3.0f * (1.0f / 3.0f + 0.01f / 12.0f);

// A door hinged to the world along its left edge at `origin`, axis +Y, turning at `rate` [rad/s].
// The door is body A and the world B, so the joint's angle (B's relative to A) is minus the
// door's: limits, motor speed and spring target are given negated.
ObjectID add_door(World& w, Vec3 origin, JointDesc d, float rate = 0) {
  BodyDesc body = test::box_desc(origin + Vec3{0.5f, 0, 0}, {0.5f, 1.0f, 0.05f}, 3.0f);
  body.angular_velocity = {0, rate, 0};
  body.velocity = {0, 0, -0.5f * rate};
  const ObjectID door = add(w, body);
  d.kind = JointKind::Hinge;
  d.body_a = door;
  d.anchor = origin;
  d.axis = {0, 1, 0};
  EXPECT_EQ(w.create_joint(d).error, Error::Ok);
  return door;
}

// The door's angle about +Y [rad] (it turns about Y only).
float door_angle(const World& w, ObjectID door) {
  const Quat q = state(w, door).orientation;
  return 2.0f * std::atan2(q.y, q.w);
}

TEST(Joints, AHingeLimitStopsTheDoorAtItsAngleWhateverItsSpeed) {
  // Speeds from a nudge to 20 rad/s, both ways: the angle never passes a limit by more than
  // 0.03 rad (the soft limit's give), and the door comes to rest against it.
  for (const float speed : {-20.0f, -8.0f, -2.0f, -0.5f, 0.5f, 2.0f, 8.0f, 20.0f}) {
    World w(WorldSettings{.gravity = {0, 0, 0}});
    JointDesc d;
    d.enable_limit = true;
    d.lower_angle = -0.8f;  // the door between -0.5 and 0.8 rad
    d.upper_angle = 0.5f;
    const ObjectID door = add_door(w, {0, 5, 0}, d, speed);
    float lo = 0, hi = 0;
    for (int k = 0; k < 120; ++k) {
      w.step(kDt);
      lo = std::min(lo, door_angle(w, door));
      hi = std::max(hi, door_angle(w, door));
    }
    EXPECT_GE(lo, -0.5f - 0.03f) << speed << " rad/s";
    EXPECT_LE(hi, 0.8f + 0.03f) << speed << " rad/s";
    // Up to 2 rad/s it rests against the stop; faster it rebounds (not yet: docs/BENCHMARKS.md,
    // "Joints"), but stays inside.
    if (std::fabs(speed) <= 2.0f) {
      EXPECT_NEAR(door_angle(w, door), speed > 0 ? 0.8f : -0.5f, 0.03f) << speed << " rad/s";
    }
  }
}

TEST(Joints, AHingeMotorReachesItsSpeedOrAcceleratesAtItsTorque) {
  // Enough torque: the door turns at the motor's speed. Too little: it accelerates at tau / I,
  // the closed form, until the speed is reached.
  for (const float torque : {100.0f, 0.5f, 0.2f}) {
    World w(WorldSettings{.gravity = {0, 0, 0}});
    JointDesc d;
    d.enable_motor = true;
    d.motor_speed = -2.0f;  // the door at +2 rad/s
    d.max_motor_torque = torque;
    const ObjectID door = add_door(w, {0, 5, 0}, d);
    for (int k = 0; k < 60; ++k) w.step(kDt);
    const float rate = state(w, door).angular_velocity.y;
    const float expected = std::min(2.0f, torque * 1.0f / kDoorInertia);
    EXPECT_NEAR(rate, expected, 0.02f * expected) << torque << " N m";
  }
}

TEST(Joints, AHingePositionMotorReachesItsTargetWithinItsTorque) {
  // Targets both ways and torques from ample to scarce: the door settles on the target (a 2 Hz
  // critically damped drive settles in about a second; one short of torque overshoots, as a
  // saturated drive does, and settles later), the motor's impulse never passes its limit, and
  // the door's angular acceleration stays within tau / I (5 %: the point rows' convergence).
  // Targets stay well inside +-pi: a saturated overshoot past pi wraps the angle, and the drive
  // then pushes the other way (the wrap of Box2D's revolute angle; hence the 0.99 pi bound).
  for (const float target : {-1.2f, -0.4f, 0.7f, 1.5f}) {
    for (const float torque : {200.0f, 2.0f}) {
      World w(WorldSettings{.gravity = {0, 0, 0}});
      JointDesc d;
      d.enable_motor = true;
      d.position_motor = true;
      d.motor_target_angle = -target;  // the door at +target
      d.max_motor_torque = torque;
      const ObjectID door = add_door(w, {0, 5, 0}, d);
      float rate = 0;
      float most_accel = 0;
      float most_impulse = 0;
      for (int k = 0; k < 900; ++k) {
        w.step(kDt);
        const float now = state(w, door).angular_velocity.y;
        most_accel = std::max(most_accel, std::fabs(now - rate) / kDt);
        most_impulse = std::max(most_impulse, std::fabs(w.get_joint(ObjectID{0, 1})->motor_impulse));
        rate = now;
      }
      EXPECT_NEAR(door_angle(w, door), target, 0.01f) << target << " rad, " << torque << " N m";
      EXPECT_LE(most_accel, torque / kDoorInertia * 1.05f) << target << " rad, " << torque << " N m";
      EXPECT_LE(most_impulse, torque * kDt) << target << " rad, " << torque << " N m";
    }
  }
}

TEST(Joints, AMotorIsReplacedAtRunTimeAndBadMotorsAreRefused) {
  World w(WorldSettings{.gravity = {0, 0, 0}});
  const ObjectID door = add_door(w, {0, 5, 0}, JointDesc{});
  const ObjectID hinge{0, 1};
  ASSERT_TRUE(w.get_joint(hinge).has_value());
  // Velocity first, then a position target: each takes over from the other.
  ASSERT_EQ(w.set_joint_motor(hinge, JointMotor{.enable = true, .speed = -1.5f, .max_force = 100.0f}), Error::Ok);
  for (int k = 0; k < 30; ++k) w.step(kDt);
  EXPECT_NEAR(state(w, door).angular_velocity.y, 1.5f, 0.03f);
  ASSERT_EQ(w.set_joint_motor(hinge, JointMotor{.enable = true, .position = true, .target = 0.3f, .max_force = 100.0f}),
            Error::Ok);
  for (int k = 0; k < 180; ++k) w.step(kDt);
  EXPECT_NEAR(door_angle(w, door), -0.3f, 0.01f);
  // Off: the door coasts (no damping about y but the body's own).
  ASSERT_EQ(w.set_joint_motor(hinge, JointMotor{}), Error::Ok);
  EXPECT_FALSE(w.get_joint(hinge)->enable_motor);
  // Refusals leave the motor as it was.
  const JointRecord before = *w.get_joint(hinge);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(w.set_joint_motor(hinge, JointMotor{.enable = true, .speed = nan, .max_force = 1}), Error::InvalidArgument);
  EXPECT_EQ(w.set_joint_motor(hinge, JointMotor{.enable = true, .speed = 1, .max_force = -1}), Error::InvalidArgument);
  EXPECT_EQ(w.set_joint_motor(hinge, JointMotor{.enable = true, .position = true, .target = 3.2f, .max_force = 1}),
            Error::InvalidArgument);
  EXPECT_EQ(w.set_joint_motor(ObjectID{0, 2}, JointMotor{}), Error::StaleId);
  const JointRecord after = *w.get_joint(hinge);
  EXPECT_EQ(after.enable_motor, before.enable_motor);
  EXPECT_EQ(after.position_motor, before.position_motor);
  EXPECT_EQ(after.motor_speed, before.motor_speed);
  EXPECT_EQ(after.max_motor, before.max_motor);
  EXPECT_EQ(after.motor_target, before.motor_target);
  // Only hinges have motors.
  JointDesc point;
  point.body_a = add(w, sphere_desc({5, 5, 0}, 0.25f));
  point.anchor = {5, 5.5f, 0};
  const World::JointResult created = w.create_joint(point);
  ASSERT_EQ(created.error, Error::Ok);
  EXPECT_EQ(w.set_joint_motor(created.id, JointMotor{}), Error::InvalidArgument);
}

// --- Slider: Jolt's SliderConstraintTests (UnitTests/Physics/SliderConstraintTests.cpp), same
// bodies (2 m boxes of 8000 kg, B starting at x = 3 beside a static A at the origin, the anchor
// midway, the axis +X, gravity on) and Jolt's tolerance, 1e-4 on velocities and on the position
// along the axis. Across the axis a soft joint sags under the box's weight where Jolt's rigid
// position solve does not: the rows' 60 Hz, damping ratio 2 hold it 0.27 mm low (kSliderSag).

constexpr float kSliderMass = 8000.0f;  // Jolt's 2 m box at 1000 kg/m^3
constexpr float kSliderSag = 3e-4f;      // [m] below the axis under gravity (see above)

// B's position against the expected one: along the axis within Jolt's 1e-4, across within the sag.
void expect_on_axis_at(const BodyState& b, Vec3 expected, const char* what) {
  EXPECT_NEAR(b.position.x, expected.x, 1e-4f) << what;
  EXPECT_LT(length(Vec3{0, b.position.y - expected.y, b.position.z - expected.z}), kSliderSag) << what;
}

struct SliderRig {
  World w;
  ObjectID a, b, joint;
};

SliderRig make_slider(JointDesc d, Vec3 velocity_b = {}, bool a_dynamic = false, bool gravity = true) {
  SliderRig r{World(WorldSettings{.gravity = gravity ? Vec3{0, -9.81f, 0} : Vec3{}}), {}, {}, {}};
  r.a = add(r.w, test::box_desc({0, 0, 0}, {1, 1, 1}, kSliderMass, a_dynamic ? BodyKind::Dynamic : BodyKind::Static));
  BodyDesc b = test::box_desc({3, 0, 0}, {1, 1, 1}, kSliderMass);
  b.velocity = velocity_b;
  r.b = add(r.w, b);
  d.kind = JointKind::Slider;
  d.body_a = r.a;
  d.body_b = r.b;
  d.anchor = {1.5f, 0, 0};
  d.axis = {1, 0, 0};
  const World::JointResult created = r.w.create_joint(d);
  EXPECT_EQ(created.error, Error::Ok);
  r.joint = created.id;
  return r;
}

// Where a body under constant acceleration `acc` from rest at x0 is after `steps` steps of this
// world's integrator (symplectic Euler per substep): the discrete closed form, as Jolt's
// PredictPosition is for its own.
float predicted_x(float x0, float v0, float acc, int steps) {
  const int substeps = WorldSettings{}.substeps;
  const double h = static_cast<double>(kDt) / substeps;
  double x = x0, v = v0;
  for (int k = 0; k < steps * substeps; ++k) {
    v += acc * h;
    x += v * h;
  }
  return static_cast<float>(x);
}

TEST(Joints, ASliderStopsAtItsLimitsAtJoltsTolerance) {
  // 10 m/s towards a limit 7 m away, both ways: after 1 s at rest on it.
  for (const float direction : {-1.0f, 1.0f}) {
    JointDesc d;
    d.enable_limit = true;
    d.lower_translation = direction < 0 ? -7.0f : 0.0f;
    d.upper_translation = direction < 0 ? 0.0f : 7.0f;
    SliderRig r = make_slider(d, {10.0f * direction, 0, 0});
    for (int k = 0; k < 60; ++k) r.w.step(kDt);
    const BodyState b = state(r.w, r.b);
    EXPECT_LT(length(b.velocity), 1e-4f) << direction;
    expect_on_axis_at(b, Vec3{3.0f + 7.0f * direction, 0, 0}, direction < 0 ? "lower limit" : "upper limit");
    EXPECT_LT(length(b.angular_velocity), 1e-4f) << direction;
  }
}

TEST(Joints, ASliderVelocityMotorAcceleratesAtItsForceThenHoldsItsSpeed) {
  // Jolt's DriveVelocity tests: the force limit m * 2 m/s^2 and a target of 3 m/s, reached at 1.5 s;
  // against a static body, and between two dynamic ones (each then moves at half the rate).
  for (const bool dynamic_pair : {false, true}) {
    JointDesc d;
    d.enable_motor = true;
    d.max_motor_force = kSliderMass * 2.0f;
    d.motor_speed = dynamic_pair ? 6.0f : 3.0f;
    SliderRig r = make_slider(d, {}, dynamic_pair, /*gravity=*/!dynamic_pair);
    for (int k = 0; k < 60; ++k) r.w.step(kDt);
    EXPECT_LT(length(state(r.w, r.b).velocity - Vec3{2, 0, 0}), 1e-4f) << dynamic_pair;
    if (dynamic_pair) {
      EXPECT_LT(length(state(r.w, r.a).velocity - Vec3{-2, 0, 0}), 1e-4f);
    }
    for (int k = 0; k < 60; ++k) r.w.step(kDt);
    EXPECT_LT(length(state(r.w, r.b).velocity - Vec3{3, 0, 0}), 1e-4f) << dynamic_pair;
    // 1.5 s of acceleration, then 0.5 s at 3 m/s.
    const float x = predicted_x(3.0f, 0.0f, 2.0f, 90) + 0.5f * 3.0f;
    expect_on_axis_at(state(r.w, r.b), Vec3{x, 0, 0}, dynamic_pair ? "dynamic pair" : "static A");
    if (dynamic_pair) {
      EXPECT_LT(length(state(r.w, r.a).position - Vec3{predicted_x(0.0f, 0.0f, -2.0f, 90) - 1.5f, 0, 0}), 1e-4f);
    }
  }
}

TEST(Joints, SliderFrictionIsAVelocityMotorAtRestAndSlowsAtItsForce) {
  // Jolt's TestSliderConstraintFriction: 10 m/s along the axis, a friction force of m * 2 m/s^2,
  // 2 s: 6 m/s, and the position of constant deceleration, within Jolt's 1e-4. Friction here is
  // Box2D's and Jolt's motor-as-friction: a velocity motor at 0 m/s whose force limit is the
  // friction force (JointDesc::max_motor_force), so it can never push, only hold back.
  JointDesc d;
  d.enable_motor = true;
  d.motor_speed = 0.0f;
  d.max_motor_force = kSliderMass * 2.0f;
  SliderRig r = make_slider(d, {10.0f, 0, 0});
  for (int k = 0; k < 120; ++k) r.w.step(kDt);
  EXPECT_LT(length(state(r.w, r.b).velocity - Vec3{6, 0, 0}), 1e-4f);
  expect_on_axis_at(state(r.w, r.b), Vec3{predicted_x(3.0f, 10.0f, -2.0f, 120), 0, 0}, "friction");
  // Slowed to rest, it stays there: the friction does not reverse it.
  for (int k = 0; k < 240; ++k) r.w.step(kDt);
  EXPECT_LT(length(state(r.w, r.b).velocity), 1e-4f);
}

TEST(Joints, ASliderPositionMotorSettlesOnItsTarget) {
  // Jolt's DrivePosition: the motor moves B from x = 3 to x = 10 (a translation of 7 m) and holds it.
  JointDesc d;
  d.enable_motor = true;
  d.position_motor = true;
  d.motor_target_translation = 7.0f;
  d.max_motor_force = 1e9f;
  SliderRig r = make_slider(d);
  for (int k = 0; k < 120; ++k) r.w.step(kDt);
  expect_on_axis_at(state(r.w, r.b), Vec3{10, 0, 0}, "position motor");
  // Replaced at run time by a velocity motor going back.
  ASSERT_EQ(r.w.set_joint_motor(r.joint, JointMotor{.enable = true, .speed = -1.0f, .max_force = 1e9f}), Error::Ok);
  for (int k = 0; k < 30; ++k) r.w.step(kDt);
  EXPECT_LT(length(state(r.w, r.b).velocity - Vec3{-1, 0, 0}), 1e-4f);
}

TEST(Joints, ASliderKeepsItsBodiesOnTheAxisWithoutTurning) {
  // A body pushed across and twisted: it only slides, never turns or leaves the axis (the
  // across rows and the weld's angular rows), and its momentum along the axis is its own.
  SliderRig r = make_slider(JointDesc{}, {2.0f, 0, 0});
  ASSERT_EQ(r.w.apply_impulse(r.b, {0, 5000, 8000}, Vec3{3, 0.5f, 0}), Error::Ok);
  ASSERT_EQ(r.w.set_angular_velocity(r.b, {1, 2, 3}), Error::Ok);
  float worst = 0;
  for (int k = 0; k < 60; ++k) {
    r.w.step(kDt);
    const BodyState b = state(r.w, r.b);
    worst = std::max({worst, std::fabs(b.position.y), std::fabs(b.position.z)});
    EXPECT_GT(std::fabs(b.orientation.w), 0.99999f) << k;
  }
  EXPECT_LT(worst, 0.01f);
  EXPECT_NEAR(state(r.w, r.b).velocity.x, 2.0f, 1e-3f);  // no friction along the axis
}

TEST(Joints, AHingeSpringSwingsAtItsFrequencyAboutItsTarget) {
  // The spring's frequency is on the row's own inertia, the bodies' about their centres (as
  // Box2D's revolute spring): a door hinged at its edge swings slower by sqrt(I_centre / I_edge),
  // one hinged through its centre at the spring's frequency.
  const float centre_inertia = 3.0f * (1.0f + 0.01f) / 12.0f;
  for (const bool at_edge : {true, false}) {
  for (const float hertz : {0.5f, 1.0f, 2.0f}) {
    World w(WorldSettings{.gravity = {0, 0, 0}});
    JointDesc d;
    d.spring_hertz = hertz;
    d.target_angle = -0.3f;  // the door at 0.3 rad
    const ObjectID door = add_door(w, at_edge ? Vec3{0, 5, 0} : Vec3{0.5f, 5, 0}, d);
    if (!at_edge) {  // re-hinge it through its centre
      ASSERT_EQ(w.destroy_joint(ObjectID{0, 1}), Error::Ok);
      d.kind = JointKind::Hinge;
      d.body_a = door;
      d.anchor = state(w, door).position;
      d.axis = {0, 1, 0};
      ASSERT_EQ(w.create_joint(d).error, Error::Ok);
    }
    const double expected = (at_edge ? std::sqrt(kDoorInertia / centre_inertia) : 1.0) / hertz;
    std::vector<double> up;
    float previous = door_angle(w, door) - 0.3f;
    for (int k = 1; k < 2400 && up.size() < 4; ++k) {
      w.step(kDt);
      const float x = door_angle(w, door) - 0.3f;
      if (previous < 0 && x >= 0) up.push_back((k - 1 + previous / (previous - x)) * kDt);
      previous = x;
    }
    ASSERT_EQ(up.size(), 4u) << hertz << " Hz";
    EXPECT_NEAR((up.back() - up.front()) / 3.0, expected, 0.02 * expected) << hertz << " Hz, at the edge " << at_edge;
  }
  }
}

TEST(Joints, AHingeTurnsOnlyAboutItsAxis) {
  // A door (a box) hinged to the world along its left edge, axis +Y, pushed in every horizontal
  // direction at its far upper corner: it turns about Y only, its hinge line stays put, and its rate is the
  // closed form J r / I about the edge (kDoorInertia).
  World w(WorldSettings{.gravity = {0, 0, 0}});
  for (int dir = 0; dir < 8; ++dir) {
    const float angle = 2.0f * kPi * static_cast<float>(dir) / 8.0f;
    const Vec3 origin{static_cast<float>(dir) * 10.0f, 5, 0};
    const ObjectID door = add(w, test::box_desc(origin + Vec3{0.5f, 0, 0}, {0.5f, 1.0f, 0.05f}, 3.0f));
    JointDesc d;
    d.kind = JointKind::Hinge;
    d.body_a = door;
    d.anchor = origin;
    d.axis = {0, 1, 0};
    ASSERT_EQ(w.create_joint(d).error, Error::Ok);
    const Vec3 j{0.2f * std::cos(angle), 0, 0.2f * std::sin(angle)};
    // At the far upper corner, so the push also tries to tilt the door off its axis.
    ASSERT_EQ(w.apply_impulse(door, j, origin + Vec3{1.0f, 0.8f, 0}), Error::Ok);
    for (int k = 0; k < 30; ++k) w.step(kDt);
    const BodyState s = state(w, door);
    const float along = s.angular_velocity.y;
    const float off = std::hypot(s.angular_velocity.x, s.angular_velocity.z);
    const float inertia = kDoorInertia;
    EXPECT_NEAR(along, -j.z * 1.0f / inertia, 0.02f * std::fabs(j.z / inertia) + 1e-3f) << "direction " << dir;
    EXPECT_LT(off, 1e-3f) << "direction " << dir;
    // The hinge line: the door's left edge stays on the axis through the origin.
    const Vec3 edge = s.position + rotate(s.orientation, Vec3{-0.5f, 0, 0});
    EXPECT_LT(std::hypot(edge.x - origin.x, edge.z - origin.z), 0.002f) << "direction " << dir;
    EXPECT_NEAR(edge.y, origin.y, 0.002f);
  }
}

TEST(Joints, InternalForcesKeepTheMomentumOfAJointedPair) {
  // Mass ratios swept: a joint's impulses are equal and opposite, so the pair's momentum is what it
  // was (no gravity, no contacts), and its kinetic energy never grows.
  for (const float ratio : {1.0f, 10.0f, 100.0f}) {
    World w(WorldSettings{.gravity = {0, 0, 0}});
    const ObjectID a = add(w, sphere_desc({0, 0, 0}, 0.3f, 1.0f));
    const ObjectID b = add(w, sphere_desc({1.0f, 0, 0}, 0.3f, ratio));
    ASSERT_EQ(joint(w, JointKind::Point, a, b, {0.5f, 0, 0}).error, Error::Ok);
    ASSERT_EQ(w.set_velocity(a, {0, 2.0f, 0.5f}), Error::Ok);
    const Vec3 p0 = Vec3{0, 2.0f, 0.5f};
    const float e0 = 0.5f * (4.0f + 0.25f);
    for (int k = 0; k < 120; ++k) {
      w.step(kDt);
      const BodyState sa = state(w, a), sb = state(w, b);
      const Vec3 p = sa.velocity + sb.velocity * ratio;
      EXPECT_NEAR(length(p - p0), 0.0f, 1e-3f * (1.0f + ratio)) << "ratio " << ratio << " step " << k;
      const float e = 0.5f * length_squared(sa.velocity) + 0.5f * ratio * length_squared(sb.velocity) +
                      0.5f * dot(sa.angular_velocity, sa.angular_velocity) * 0.4f * 0.09f +
                      0.5f * dot(sb.angular_velocity, sb.angular_velocity) * 0.4f * 0.09f * ratio;
      EXPECT_LE(e, e0 * 1.001f) << "ratio " << ratio << " step " << k;
    }
  }
}

TEST(Joints, AHeavyBallOnALightChainHangsWithoutStretching) {
  // Jolt #1392 and #151: a heavy body hanging on light ones. Ten 0.1 kg links and a ball of 0.1, 1
  // or 10 kg (mass ratios up to 100): after 3 s the chain is at rest and each link within 2 cm of
  // its length. Not yet met beyond: the soft rows' stiffness goes with the links' effective mass,
  // so 30 kg stretched each link 4.7 cm and 100 kg 15 cm (still swinging at 0.6 and 2.6 m/s);
  // more sweeps did not change it (docs/BENCHMARKS.md, "Joints").
  for (const float heavy : {0.1f, 1.0f, 10.0f}) {
    World w;
    std::vector<ObjectID> links;
    ObjectID previous;
    for (int k = 0; k <= 10; ++k) {
      const bool last = k == 10;
      links.push_back(add(w, sphere_desc({0, 20.0f - 0.5f * static_cast<float>(k + 1), 0}, last ? 0.2f : 0.1f,
                                         last ? heavy : 0.1f)));
      ASSERT_EQ(joint(w, JointKind::Point, links.back(), previous, {0, 20.0f - 0.5f * static_cast<float>(k), 0}).error,
                Error::Ok);
      previous = links.back();
    }
    for (int k = 0; k < 180; ++k) w.step(kDt);
    const BodyState end = state(w, links.back());
    EXPECT_NEAR(end.position.x, 0.0f, 0.01f);
    EXPECT_NEAR(end.position.y, 20.0f - 5.5f, 0.02f * 11) << heavy << " kg";
    EXPECT_LT(length(end.velocity), 0.05f) << heavy << " kg";
    for (size_t k = 1; k < links.size(); ++k) {
      const float gap = length(state(w, links[k]).position - state(w, links[k - 1]).position);
      EXPECT_NEAR(gap, 0.5f, 0.02f) << heavy << " kg, link " << k;
    }
  }
}

TEST(Joints, ATwentyLinkChainHangsWithinOnePercentAndAHeavyBallWithinFive) {
  // The figures: 20 links of 0.5 m (0.1 kg spheres) from a static anchor, at rest after
  // 8 s. Equal masses: the whole chain within 1 % of its 10 m. A ball of 100 times a link's mass
  // at the end (10 kg on 0.1 kg links): within 5 %, nothing non-finite, nothing faster than it
  // fell. (The soft rows stretch by load / (m_eff w^2): the heavy ball's load on the light links'
  // effective mass is what stretches it; docs/BENCHMARKS.md, "Joints".)
  for (const float ratio : {1.0f, 100.0f}) {
    World w;
    constexpr int kLinks = 20;
    constexpr float kLink = 0.5f;
    const Vec3 top{0, 30, 0};
    std::vector<ObjectID> links;
    ObjectID previous;
    for (int k = 0; k < kLinks; ++k) {
      const bool last = k == kLinks - 1;
      const float mass = last ? 0.1f * ratio : 0.1f;
      links.push_back(add(w, sphere_desc(top - Vec3{0, kLink * static_cast<float>(k + 1), 0}, last ? 0.2f : 0.1f, mass)));
      ASSERT_EQ(joint(w, JointKind::Point, links.back(), previous, top - Vec3{0, kLink * static_cast<float>(k), 0}).error,
                Error::Ok);
      previous = links.back();
    }
    float fastest = 0;
    for (int k = 0; k < 480; ++k) {
      w.step(kDt);
      for (const ObjectID id : links) {
        const BodyState b = state(w, id);
        ASSERT_TRUE(is_finite(b.position) && is_finite(b.velocity)) << ratio;
        fastest = std::max(fastest, length(b.velocity));
      }
    }
    const float hanging = top.y - state(w, links.back()).position.y;
    const float rest = kLink * kLinks;
    EXPECT_LT(hanging / rest - 1.0f, ratio == 1.0f ? 0.01f : 0.05f) << "mass ratio " << ratio;
    EXPECT_LT(fastest, 2.0f) << "mass ratio " << ratio;  // it only settles; nothing is thrown
    EXPECT_LT(length(state(w, links.back()).velocity), 0.05f) << "mass ratio " << ratio;
  }
}

TEST(Joints, AFiftyPlankBridgeWithTenBoxesSettles) {
  // The bridge: 50 planks of 0.5 m (2 kg) hinged end to end, hung with slack between two
  // static pillars 24 m apart (laid along a parabola sagging 3 m: a 25 m chain held straight
  // across 25 m would need infinite tension), ten 5 kg boxes dropped onto it, its hinges with
  // friction. It settles (every hinge's anchors within 2 cm, no box falls through, every body
  // below 0.15 m/s after 30 s).
  World w;
  test::add_ground(w);
  constexpr int kPlanks = 50;
  constexpr float kPlank = 0.5f, kDeck = 8.0f, kSpan = 24.0f, kSag = 3.0f;
  auto arc = [&](float x) { return Vec3{x, kDeck - 4.0f * kSag * x * (kSpan - x) / (kSpan * kSpan), 0}; };
  // The plank ends along the arc, each kPlank from the last (bisection on x).
  std::vector<Vec3> ends{arc(0)};
  for (int k = 0; k < kPlanks; ++k) {
    float lo = ends.back().x, hi = ends.back().x + kPlank;
    for (int i = 0; i < 40; ++i) {
      const float mid = 0.5f * (lo + hi);
      (length(arc(mid) - ends.back()) < kPlank ? lo : hi) = mid;
    }
    ends.push_back(arc(lo));
  }
  const ObjectID left = add(w, test::box_desc({-0.5f, kDeck * 0.5f, 0}, {0.5f, kDeck * 0.5f, 1}, 1.0f, BodyKind::Static));
  const Vec3 last = ends.back();
  const ObjectID right = add(w, test::box_desc({last.x + 0.5f, last.y * 0.5f, 0}, {0.5f, last.y * 0.5f, 1}, 1.0f,
                                               BodyKind::Static));
  ObjectID previous = left;
  for (int k = 0; k <= kPlanks; ++k) {
    JointDesc d;
    d.kind = JointKind::Hinge;
    d.anchor = ends[static_cast<size_t>(k)];
    d.axis = {0, 0, 1};
    d.body_b = previous;
    // Joint friction as Box2D's bridge sample has it: a motor held at speed 0 with a small
    // torque. Without it the hanging bridge sways like a pendulum for minutes (0.09 m/s at 28 s).
    d.enable_motor = true;
    d.max_motor_torque = 5.0f;
    if (k < kPlanks) {
      const Vec3 from = ends[static_cast<size_t>(k)], to = ends[static_cast<size_t>(k) + 1];
      BodyDesc plank = test::box_desc((from + to) * 0.5f, {0.5f * kPlank - 0.01f, 0.05f, 0.6f}, 2.0f);
      plank.orientation = quat_from_axis_angle({0, 0, 1}, std::atan2(to.y - from.y, to.x - from.x));
      d.body_a = add(w, plank);
    } else {
      d.body_a = previous;
      d.body_b = right;
    }
    ASSERT_EQ(w.create_joint(d).error, Error::Ok) << k;
    previous = d.body_a;
  }
  std::vector<ObjectID> boxes;
  for (int k = 0; k < 10; ++k) {
    const Vec3 below = ends[static_cast<size_t>(4 + 4 * k)];
    boxes.push_back(add(w, test::box_desc(below + Vec3{0, 1.0f, 0}, {0.25f, 0.25f, 0.25f}, 5.0f)));
  }
  for (int k = 0; k < 1800; ++k) w.step(kDt);
  float fastest = 0;
  w.for_each_object([&](const BodyState& b) { fastest = std::max(fastest, length(b.velocity)); });
  // Settled, but not asleep: from about 18 s on it keeps a 0.06-0.08 m/s motion, above the
  // 0.05 m/s sleep speed (docs/BENCHMARKS.md, "Joints"). The issue asks for sleep: not met.
  EXPECT_LT(fastest, 0.15f);
  float worst = 0;
  for (uint32_t k = 0; k <= kPlanks; ++k) {
    const JointRecord j = *w.get_joint(ObjectID{k, 1});
    auto end = [&](ObjectID body, Vec3 local) {
      const BodyState b = state(w, body);
      return b.position + rotate(b.orientation, local);
    };
    worst = std::max(worst, length(end(j.a, j.local_a) - end(j.b, j.local_b)));
  }
  EXPECT_LT(worst, 0.02f);
  for (const ObjectID box : boxes) EXPECT_GT(state(w, box).position.y, kDeck - kSag - 2.0f) << "a box fell through";
}

TEST(Joints, AHingeLimitHoldsAHundredKiloDoorWithinOneDegree) {
  // A 100 kg door (1 m x 2 m) on a vertical hinge with its limit at 0, pushed into the stop by a
  // 500 N push at its free edge each step for 2 s: it stays within 1 degree of the stop.
  World w(WorldSettings{.gravity = {0, 0, 0}});
  BodyDesc body = test::box_desc({0.5f, 5, 0}, {0.5f, 1.0f, 0.05f}, 100.0f);
  const ObjectID door = add(w, body);
  JointDesc d;
  d.kind = JointKind::Hinge;
  d.body_a = door;
  d.anchor = {0, 5, 0};
  d.axis = {0, 1, 0};
  d.enable_limit = true;
  d.lower_angle = 0.0f;
  d.upper_angle = 1.5f;
  ASSERT_EQ(w.create_joint(d).error, Error::Ok);
  float worst = 0;
  for (int k = 0; k < 120; ++k) {
    // -z at the free edge turns the door about +y: the joint's angle (minus the door's) below 0.
    ASSERT_EQ(w.apply_force(door, {0, 0, -500.0f}, Vec3{1.0f, 5, 0}), Error::Ok);
    w.step(kDt);
    worst = std::max(worst, door_angle(w, door));
  }
  EXPECT_LT(worst, 1.0f * 3.14159265f / 180.0f);
}

TEST(Joints, AVelocityMotorReachesItsSpeedWithinFivePercentInHalfASecond) {
  // The 3 kg door (I = 1.0 kg m^2 about its hinge): a 20 N m motor reaches 3 rad/s in 0.15 s, so
  // by 0.5 s it holds it within 5 %; and at every step the motor's impulse is within its torque.
  World w(WorldSettings{.gravity = {0, 0, 0}});
  JointDesc d;
  d.enable_motor = true;
  d.motor_speed = -3.0f;  // the door at +3 rad/s
  d.max_motor_torque = 20.0f;
  const ObjectID door = add_door(w, {0, 5, 0}, d);
  for (int k = 0; k < 30; ++k) {
    w.step(kDt);
    EXPECT_LE(std::fabs(w.get_joint(ObjectID{0, 1})->motor_impulse), 20.0f * kDt) << k;
  }
  EXPECT_NEAR(state(w, door).angular_velocity.y, 3.0f, 0.05f * 3.0f);
}

TEST(Joints, AJointBreaksPastItsForceAndNotBefore) {
  // A ball hanging 1 m under a point joint that breaks past 100 N: masses swept across m g = 100 N.
  for (const float mass : {5.0f, 9.0f, 11.0f, 20.0f}) {
    World w;
    const Vec3 pivot{0, 10, 0};
    const ObjectID ball = add(w, sphere_desc(pivot - Vec3{0, 1, 0}, 0.1f, mass));
    JointDesc d;
    d.kind = JointKind::Point;
    d.body_a = ball;
    d.anchor = pivot;
    d.break_force = 100.0f;
    const World::JointResult j = w.create_joint(d);
    ASSERT_EQ(j.error, Error::Ok);
    int broke_at = -1;
    for (int k = 0; k < 120 && broke_at < 0; ++k) {
      w.step(kDt);
      if (!w.broken_joints().empty()) {
        broke_at = k;
        const BrokenJoint& b = w.broken_joints()[0];
        EXPECT_EQ(b.joint, j.id);
        EXPECT_EQ(b.a, ball);
        EXPECT_GT(b.force, 100.0f);
        EXPECT_LT(b.force, 1.5f * mass * kG) << mass << " kg";
      }
    }
    const bool heavy = mass * kG > 100.0f;
    EXPECT_EQ(broke_at >= 0, heavy) << mass << " kg";
    EXPECT_EQ(w.joint_count(), heavy ? 0u : 1u);
    if (!heavy) continue;
    EXPECT_LT(broke_at, 5) << "a load well past the threshold breaks it at once";
    // Free, it falls: g t^2 / 2 from where it was.
    const float y0 = state(w, ball).position.y;
    const float v0 = state(w, ball).velocity.y;
    for (int k = 0; k < 30; ++k) w.step(kDt);
    const float t = 30 * kDt;
    EXPECT_NEAR(state(w, ball).position.y, y0 + v0 * t - 0.5f * kG * t * t, 0.01f) << mass << " kg";
  }
}

TEST(Joints, AWeldBreaksPastItsTorque) {
  // A 1 m beam welded to the world at one end: the weld holds m g L / 2 of torque; it breaks past 20 N m.
  for (const float mass : {3.0f, 5.0f}) {
    World w;
    const ObjectID beam = add(w, test::box_desc({0.5f, 10, 0}, {0.5f, 0.05f, 0.05f}, mass));
    JointDesc d;
    d.kind = JointKind::Fixed;
    d.body_a = beam;
    d.anchor = {0, 10, 0};
    d.break_torque = 20.0f;
    ASSERT_EQ(w.create_joint(d).error, Error::Ok);
    bool broke = false;
    for (int k = 0; k < 120; ++k) {
      w.step(kDt);
      for (const BrokenJoint& b : w.broken_joints()) {
        broke = true;
        EXPECT_GT(b.torque, 20.0f);
      }
    }
    EXPECT_EQ(broke, mass * kG * 0.5f > 20.0f) << mass << " kg";
    if (!broke) {
      EXPECT_NEAR(state(w, beam).position.y, 10.0f, 0.01f) << "the weld held the beam";
    }
  }
}

TEST(Joints, JointedBodiesSleepAndWakeTogetherAndDieWithTheirBodies) {
  World w;
  test::add_ground(w);
  const ObjectID a = add(w, test::box_desc({0, 0.5f, 0}));
  const ObjectID b = add(w, test::box_desc({1.2f, 0.5f, 0}));
  const World::JointResult j = joint(w, JointKind::Point, a, b, {0.6f, 0.5f, 0});
  ASSERT_EQ(j.error, Error::Ok);
  EXPECT_EQ(w.joint_count(), 1u);
  for (int k = 0; k < 240; ++k) w.step(kDt);
  EXPECT_TRUE(w.is_asleep(a));
  EXPECT_TRUE(w.is_asleep(b));
  ASSERT_EQ(w.apply_impulse(a, {0, 0, 0.5f}), Error::Ok);  // wakes a, and b with it
  EXPECT_TRUE(w.is_awake(b));
  ASSERT_EQ(w.destroy_object(b), Error::Ok);
  EXPECT_EQ(w.joint_count(), 0u);
  EXPECT_FALSE(w.get_joint(j.id).has_value());
  EXPECT_EQ(w.destroy_joint(j.id), Error::StaleId);
}

TEST(Joints, JointedBodiesDoNotCollideUnlessAsked) {
  for (const bool collide : {false, true}) {
    World w(WorldSettings{.gravity = {0, 0, 0}});
    const ObjectID a = add(w, sphere_desc({0, 0, 0}, 0.5f));
    const ObjectID b = add(w, sphere_desc({0.8f, 0, 0}, 0.5f));  // overlapping by 0.2 m
    JointDesc d;
    d.kind = JointKind::Point;
    d.body_a = a;
    d.body_b = b;
    d.anchor = {0.4f, 0, 0};
    d.collide_connected = collide;
    ASSERT_EQ(w.create_joint(d).error, Error::Ok);
    w.step(kDt);
    EXPECT_EQ(w.contact_count_of(a), collide ? 1u : 0u);
  }
}

TEST(Joints, BadJointsAreRefusedAndLeaveTheWorldUnchanged) {
  World w;
  const ObjectID a = add(w, sphere_desc({0, 5, 0}));
  const ObjectID s = add(w, test::box_desc({0, -1, 0}, {5, 1, 5}, 1.0f, BodyKind::Static));
  EXPECT_EQ(joint(w, JointKind::Point, ObjectID{99, 1}, ObjectID{}, {}).error, Error::StaleId);
  EXPECT_EQ(joint(w, JointKind::Point, a, a, {}).error, Error::InvalidArgument);
  EXPECT_EQ(joint(w, JointKind::Point, s, ObjectID{}, {}).error, Error::InvalidArgument) << "nothing dynamic";
  EXPECT_EQ(joint(w, JointKind::Point, a, ObjectID{}, {NAN, 0, 0}).error, Error::InvalidArgument);
  EXPECT_EQ(joint(w, JointKind::Point, a, ObjectID{}, {1e9f, 0, 0}).error, Error::InvalidArgument);
  JointDesc hinge;
  hinge.kind = JointKind::Hinge;
  hinge.body_a = a;
  hinge.axis = {0, 0, 0};
  EXPECT_EQ(w.create_joint(hinge).error, Error::InvalidArgument) << "no axis";
  JointDesc rod;
  rod.kind = JointKind::Distance;
  rod.body_a = a;
  rod.anchor = {0, 5, 0};
  rod.anchor_b = {0, 5, 0};
  EXPECT_EQ(w.create_joint(rod).error, Error::InvalidArgument) << "coincident ends";
  rod.anchor_b = {0, 6, 0};
  rod.min_length = 2;
  rod.max_length = 1;
  EXPECT_EQ(w.create_joint(rod).error, Error::InvalidArgument) << "min over max";
  rod.min_length = 0;
  rod.max_length = 0;
  rod.spring_hertz = -1;
  EXPECT_EQ(w.create_joint(rod).error, Error::InvalidArgument);
  rod.spring_hertz = 0;
  rod.break_force = -1;
  EXPECT_EQ(w.create_joint(rod).error, Error::InvalidArgument) << "negative break force";
  rod.break_force = 0;
  rod.break_torque = NAN;
  EXPECT_EQ(w.create_joint(rod).error, Error::InvalidArgument) << "break torque not finite";
  hinge.axis = {0, 1, 0};
  hinge.anchor = {0, 5, 0};
  hinge.enable_limit = true;
  hinge.lower_angle = 0.5f;
  hinge.upper_angle = 0.2f;
  EXPECT_EQ(w.create_joint(hinge).error, Error::InvalidArgument) << "lower over upper";
  hinge.lower_angle = -3.12f;
  EXPECT_EQ(w.create_joint(hinge).error, Error::InvalidArgument) << "beyond -0.99 pi, where the angle wraps";
  hinge.enable_limit = false;
  hinge.enable_motor = true;
  hinge.motor_speed = 1000.0f;
  EXPECT_EQ(w.create_joint(hinge).error, Error::InvalidArgument) << "faster than max_angular_speed";
  hinge.motor_speed = 1.0f;
  hinge.max_motor_torque = -1.0f;
  EXPECT_EQ(w.create_joint(hinge).error, Error::InvalidArgument) << "negative torque";
  EXPECT_EQ(w.joint_count(), 0u);
}

TEST(Joints, AWorldWithJointsSavesAndRestoresBitExactly) {
  World w;
  test::add_ground(w);
  ObjectID previous;
  std::vector<ObjectID> links;
  for (int k = 0; k < 7; ++k) {  // every kind: the slider (k = 4) with its limit, motor and spring,
                                  // the swing-twist (k = 5) with its cone, twist range and friction
    links.push_back(add(w, test::box_desc({0.4f * k, 4.0f, 0}, {0.2f, 0.05f, 0.05f}, 0.5f)));
    JointDesc d;
    d.kind = static_cast<JointKind>(k % 6);
    d.cone_angle = 0.4f;
    d.friction_torque = k == 5 ? 0.01f : 0.0f;
    d.lower_translation = -0.1f;
    d.upper_translation = 0.2f;
    d.max_motor_force = 3.0f;
    d.target_translation = 0.05f;
    if (k == 4) {
      d.enable_limit = true;
      d.enable_motor = true;
      d.motor_speed = 0.5f;
      d.spring_hertz = 2.0f;
    }
    d.body_a = links.back();
    d.body_b = previous;
    d.anchor = {0.4f * k - 0.2f, 4.0f, 0};
    d.anchor_b = d.anchor + Vec3{0, 0.3f, 0};
    d.min_length = 0.1f;
    d.max_length = 0.5f;
    if (k != 4) d.spring_hertz = k == 3 || k == 1 ? 4.0f : 0.0f;
    d.axis = {0, 0, 1};
    d.enable_limit = d.enable_limit || k == 1;  // the hinge: a limit, a motor and a spring, all saved
    d.lower_angle = -0.3f;
    d.upper_angle = 0.3f;
    d.enable_motor = d.enable_motor || k == 1;
    if (k == 1) d.motor_speed = 1.0f;
    d.max_motor_torque = 0.05f;
    d.target_angle = 0.1f;
    d.break_force = k == 2 ? 1e6f : 0.0f;
    d.break_torque = k == 2 ? 1e6f : 0.0f;
    ASSERT_EQ(w.create_joint(d).error, Error::Ok) << k;
    previous = links.back();
  }
  const World::JointResult extra = joint(w, JointKind::Point, links[0], links[6], {1.0f, 4.0f, 0});
  ASSERT_EQ(extra.error, Error::Ok);
  ASSERT_EQ(w.destroy_joint(extra.id), Error::Ok);  // a free slot in the saved list
  for (int k = 0; k < 30; ++k) w.step(kDt);
  std::vector<uint8_t> blob;
  w.save_state(blob);
  World copy;
  std::string error;
  ASSERT_TRUE(copy.restore_state(blob, &error)) << error;
  EXPECT_EQ(copy.joint_count(), w.joint_count());
  EXPECT_EQ(copy.world_hash(), w.world_hash());
  for (int k = 0; k < 60; ++k) {
    w.step(kDt);
    copy.step(kDt);
    ASSERT_EQ(copy.world_hash(), w.world_hash()) << "step " << k;
  }
  // The reused slot is the same one in both.
  EXPECT_EQ(joint(w, JointKind::Point, links[1], links[4], {1, 4, 0}).id,
            joint(copy, JointKind::Point, links[1], links[4], {1, 4, 0}).id);
  // A joint that names a body the blob does not hold is refused, and the target is left as it was.
  std::vector<uint8_t> other;
  World small;
  const ObjectID lone = add(small, sphere_desc({0, 3, 0}));
  ASSERT_EQ(joint(small, JointKind::Point, lone, ObjectID{}, {0, 4, 0}).error, Error::Ok);
  small.save_state(other);
  ASSERT_TRUE(copy.restore_state(other, &error)) << error;
  EXPECT_EQ(copy.joint_count(), 1u);
  EXPECT_EQ(copy.world_hash(), small.world_hash());
}

TEST(Joints, AChainOnTwoThreadsIsBitIdenticalToOne) {
  auto build = [](World& w) {
    test::add_ground(w);
    ObjectID previous;
    for (int c = 0; c < 8; ++c) {
      previous = ObjectID{};
      for (int k = 0; k < 12; ++k) {
        const ObjectID link = add(w, test::box_desc({static_cast<float>(c) * 3.0f + 0.3f * k, 8.0f, 0}, {0.15f, 0.05f, 0.05f}, 0.5f));
        const JointKind kind = k % 3 == 0 ? JointKind::Hinge : (k % 3 == 1 ? JointKind::Point : JointKind::Fixed);
        JointDesc d;
        d.kind = kind;
        d.body_a = link;
        d.body_b = previous;
        d.anchor = {static_cast<float>(c) * 3.0f + 0.3f * k - 0.15f, 8.0f, 0};
        d.axis = {0, 0, 1};
        EXPECT_EQ(w.create_joint(d).error, Error::Ok);
        previous = link;
      }
    }
  };
  WorkerPool two(2);
  World one, pooled;
  pooled.set_worker_pool(&two);
  build(one);
  build(pooled);
  for (int k = 0; k < 120; ++k) {
    one.step(kDt);
    pooled.step(kDt);
    ASSERT_EQ(one.world_hash(), pooled.world_hash()) << "step " << k;
  }
  EXPECT_GT(length(state(one, ObjectID{12, 1}).velocity), 0.0f) << "the chains moved";
}

}  // namespace
}  // namespace impulse::physics
