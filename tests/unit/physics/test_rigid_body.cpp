// Rigid-body laws checked against closed forms: friction on a slope, torque-free rotation, stacks,
// a corner drop, Newton's cradle and chained restitution, energy of a settled pile, determinism,
// island sleep, sensors, rolling, and forces, torques and impulses at a point. Every test states
// its law and tolerance.
// Each simulates with a fixed dt of 1/60 s and prints its measured figures ("[ measured ]").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tests/scenes/bench_scenes.h"
#include "tests/support/rng.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::add_ground_plane;
using test::box_desc;
using test::sphere_desc;
using test::state;

constexpr float kDt = 1.0f / 60.0f;
constexpr float kG = 9.81f;
constexpr float kPi = 3.14159265358979f;
constexpr float kDegree = kPi / 180.0f;

WorldSettings zero_gravity() {
  WorldSettings s;
  s.gravity = {0.0f, 0.0f, 0.0f};
  return s;
}

// Relative error |a - b| / |b| of two vectors (b nonzero).
float relative_error(Vec3 a, Vec3 b) { return length(a - b) / length(b); }

// The rotation taking unit vector `from` onto unit vector `to` (not antiparallel). Set-up only.
Quat rotation_between(Vec3 from, Vec3 to) {
  const Vec3 axis = normalize_or(cross(from, to), {1.0f, 0.0f, 0.0f});
  return quat_from_axis_angle(axis, std::acos(std::clamp(dot(from, to), -1.0f, 1.0f)));
}

// --- Slope -----------------------------------------------------------------------------------------

// A static ramp: a 60 m x 2 m x 10 m box rotated by theta about +Z, so its top face is the plane
// through the origin with normal n = (-sin, cos, 0); downhill is d = (-cos, -sin, 0). A body of the
// same rotation rests on it, touching, 10 m uphill of the origin (30 m of ramp below it).
struct Slope {
  Quat rotation;
  Vec3 normal;
  Vec3 down;
  ObjectID ramp;
  ObjectID body;
  Vec3 start;  // the body's initial centre [m]
};

Slope make_slope(World& world, float theta, float ramp_friction, BodyDesc body, float standoff) {
  Slope s;
  s.rotation = quat_from_axis_angle({0.0f, 0.0f, 1.0f}, theta);
  s.normal = rotate(s.rotation, {0.0f, 1.0f, 0.0f});
  s.down = rotate(s.rotation, {-1.0f, 0.0f, 0.0f});
  BodyDesc ramp = box_desc(s.normal * -1.0f, {30.0f, 1.0f, 5.0f}, 1.0f, BodyKind::Static);
  ramp.orientation = s.rotation;
  ramp.friction = ramp_friction;
  s.ramp = add(world, ramp);
  s.start = s.down * -10.0f + s.normal * standoff;
  body.position = s.start;
  body.orientation = s.rotation;
  s.body = add(world, body);
  return s;
}

Slope make_box_slope(World& world, float theta, float mu) {
  BodyDesc box = box_desc({});
  box.friction = mu;
  return make_slope(world, theta, mu, box, 0.5f);
}

// Coulomb's law on an incline: a block stays put iff tan(theta) <= mu. Checked 1 degree on either
// side of atan(mu) for three mu (both bodies get mu, so the geometric-mean mix gives mu). Below:
// the displacement along the slope over 2 s is < 1 cm (what a soft contact may creep while it
// settles; a true slide 1 degree above moves ~36-44 cm). Above: the box slides the closed-form
// 1/2 a t^2 with a = g (sin - mu cos) (0.18-0.22 m/s^2 here) within 5 %, the required
// acceleration tolerance (semi-implicit Euler itself travels a dt^2 N (N + 1) / 2, 0.8 % further).
TEST(RigidBody, SlopeHoldsIffTanThetaAtMostMu) {
  for (const float mu : {0.3f, 0.5f, 0.8f}) {
    for (const float offset : {-1.0f * kDegree, 1.0f * kDegree}) {
      const float theta = std::atan(mu) + offset;
      World world;
      const Slope slope = make_box_slope(world, theta, mu);
      const int steps = 120;
      for (int i = 0; i < steps; ++i) world.step(kDt);
      const float along = dot(state(world, slope.body).position - slope.start, slope.down);
      const float a = kG * (std::sin(theta) - mu * std::cos(theta));
      const float t = steps * kDt;
      std::printf("[ measured ] slope mu %.1f theta %.2f deg: moved %.5f m along the slope in 2 s "
                  "(closed form %.4f m)\n", mu, theta / kDegree, along, offset < 0 ? 0.0f : 0.5f * a * t * t);
      if (offset < 0) {
        EXPECT_LT(std::fabs(along), 0.01f) << "mu " << mu << ": slid below the friction angle";
      } else {
        EXPECT_NEAR(along, 0.5f * a * t * t, 0.05f * 0.5f * a * t * t) << "mu " << mu << ": above the friction angle";
      }
    }
  }
}

// Sliding well above the friction angle (theta 30 deg, mu 0.2): a = g (sin - mu cos) = 3.207
// m/s^2. Measured from the velocity along the slope between steps 10 and 70 (1 s, after the
// contact has formed and warm-started), within 5 %. The box must also slide without tumbling
// (tipping needs mu > half width / half height = 1): |w| stays below 0.1 rad/s.
TEST(RigidBody, SlopeSlidingAccelerationIsGSinMinusMuCos) {
  const float mu = 0.2f;
  const float theta = 30.0f * kDegree;
  World world;
  const Slope slope = make_box_slope(world, theta, mu);
  for (int i = 0; i < 10; ++i) world.step(kDt);
  const float v0 = dot(state(world, slope.body).velocity, slope.down);
  float max_spin = 0;
  for (int i = 0; i < 60; ++i) {
    world.step(kDt);
    max_spin = std::max(max_spin, length(state(world, slope.body).angular_velocity));
  }
  const float v1 = dot(state(world, slope.body).velocity, slope.down);
  const float a = (v1 - v0) / (60 * kDt);
  const float expected = kG * (std::sin(theta) - mu * std::cos(theta));
  std::printf("[ measured ] slope 30 deg mu 0.2: a = %.4f m/s^2 (closed form %.4f, error %.2f %%), max |w| %.4f\n",
              a, expected, 100 * (a - expected) / expected, max_spin);
  EXPECT_NEAR(a, expected, 0.05f * expected);
  EXPECT_LT(max_spin, 0.1f);
}

// --- Rigid rotation ---------------------------------------------------------------------------------

// Euler's equations without torque conserve the world-frame angular momentum L = R I R^T w and the
// kinetic energy 1/2 w^T I w. A box with three distinct moments (half extents 0.2, 0.5, 1.0, so
// I = m (b^2 + c^2) / 3 = 0.4167, 0.3467, 0.0967 kg m^2), spinning at 3.7 rad/s about a
// non-principal axis so it precesses and nutates, keeps |L - L0| / |L0| < 1 % over 10 s at 60 Hz
// (the required tolerance: the implicit midpoint gyroscopic step keeps |L| and the energy, but the
// direction of L drifts slowly with the rotation's first-order integration; it must not wander),
// and its kinetic energy does not grow by more than 1 %.
TEST(RigidBody, TorqueFreeBoxKeepsAngularMomentum) {
  World world(zero_gravity());
  BodyDesc d = box_desc({}, {0.2f, 0.5f, 1.0f}, 1.0f);
  d.orientation = quat_from_axis_angle(normalize_or({1.0f, 2.0f, 3.0f}, {}), 0.7f);
  d.angular_velocity = {3.0f, 1.0f, -2.0f};
  d.angular_damping = 0.0f;
  const ObjectID box = add(world, d);
  const BodyState s0 = state(world, box);
  const Vec3 l0 = test::angular_momentum(s0);
  const double e0 = test::kinetic_energy(s0);
  float worst_l = 0;
  double worst_e = 0;
  for (int i = 0; i < 600; ++i) {
    world.step(kDt);
    const BodyState s = state(world, box);
    ASSERT_FALSE(s.sleeping);
    worst_l = std::max(worst_l, relative_error(test::angular_momentum(s), l0));
    worst_e = std::max(worst_e, (test::kinetic_energy(s) - e0) / e0);
  }
  const BodyState s = state(world, box);
  std::printf("[ measured ] rigid rotation 10 s: max |L - L0|/|L0| = %.5f, max energy rise %.5f, final energy "
              "change %.5f, centre moved %.2e m\n",
              worst_l, worst_e, (test::kinetic_energy(s) - e0) / e0, length(s.position));
  EXPECT_LT(worst_l, 0.01f);
  EXPECT_LT(worst_e, 0.01);
  EXPECT_EQ(s.position, Vec3{});  // no force: the centre of mass stays put exactly
}

// --- Stack ------------------------------------------------------------------------------------------

// Ten unit boxes stacked on a static ground, touching, unrotated. Sleep off: after 10 s the top box
// has moved less than 1 cm in 3D from where it was created. That bounds the sum of the ten
// contacts' steady overlaps under load (a soft contact settles at (load / effective mass) /
// omega^2: about 0.14 mm per box of load above it at 60 Hz, 7 mm summed over the stack) plus any
// sideways walk. Sleep on: all ten sleep within 10 s, within the same bound.
TEST(RigidBody, StackOfTenStandsAndSleeps) {
  for (const bool allow_sleep : {false, true}) {
    WorldSettings settings;
    settings.allow_sleep = allow_sleep;
    World world(settings);
    add_ground(world);
    std::vector<ObjectID> boxes;
    for (int i = 0; i < 10; ++i) boxes.push_back(add(world, box_desc({0.0f, 0.5f + static_cast<float>(i), 0.0f})));
    const Vec3 top0 = state(world, boxes.back()).position;
    int asleep_at = -1;
    for (int i = 0; i < 600; ++i) {
      world.step(kDt);
      if (asleep_at < 0 && world.awake_count() == 0) asleep_at = i + 1;
    }
    const float drift = length(state(world, boxes.back()).position - top0);
    std::printf("[ measured ] stack of 10, sleep %s: top box moved %.5f m in 10 s; asleep at step %d\n",
                allow_sleep ? "on" : "off", drift, asleep_at);
    EXPECT_LT(drift, 0.01f) << "sleep " << allow_sleep;
    if (allow_sleep) {
      EXPECT_GT(asleep_at, 0) << "the stack never fell asleep";
      EXPECT_EQ(world.awake_count(), 0u);
      for (const ObjectID id : boxes) EXPECT_TRUE(state(world, id).sleeping);
    }
  }
}

// --- Corner drop ------------------------------------------------------------------------------------

// A unit box, its (1, 1, 1) diagonal turned to point down (a corner first), tilted 1 or 3 degrees
// further so the fall is not the unstable balance on the corner that an exact simulation holds
// (with no tilt at all this world keeps the box on its corner and puts it to sleep there), dropped
// from a centre height of 2 m on a static ground box and on a ground plane. After 5 s it rests on
// a face: one of its local axes is within 2 degrees of +-Y, and its centre is at 0.5 m within 1 cm
// (a single box's steady contact overlap is well under 1 mm).
TEST(RigidBody, BoxDroppedOnCornerRestsOnAFace) {
  const Quat corner_down =
      rotation_between(normalize_or({1.0f, 1.0f, 1.0f}, {}), {0.0f, -1.0f, 0.0f});
  struct Case {
    float tilt_degrees;
    bool plane;
  };
  for (const auto& [tilt_degrees, plane] : {Case{1.0f, false}, Case{1.0f, true}, Case{3.0f, false}, Case{3.0f, true}}) {
    const Quat tilt = quat_from_axis_angle({0.0f, 0.0f, 1.0f}, tilt_degrees * kDegree);
    World world;
    if (plane) {
      add_ground_plane(world);
    } else {
      add_ground(world);
    }
    BodyDesc d = box_desc({0.0f, 2.0f, 0.0f});
    d.orientation = tilt * corner_down;
    const ObjectID box = add(world, d);
    const Vec3 diagonal = rotate(d.orientation, normalize_or({1.0f, 1.0f, 1.0f}, {}));
    ASSERT_NEAR(diagonal.y, -std::cos(tilt_degrees * kDegree), 1e-4f);
    for (int i = 0; i < 300; ++i) world.step(kDt);
    const BodyState s = state(world, box);
    // The local axis closest to +-Y, and its angle from Y from its horizontal part (asin keeps
    // full float precision near 0, where acos of a cosine near 1 cannot resolve below ~0.02 deg).
    Vec3 up{};
    for (const Vec3 axis : {Vec3{1.0f, 0.0f, 0.0f}, Vec3{0.0f, 1.0f, 0.0f}, Vec3{0.0f, 0.0f, 1.0f}}) {
      const Vec3 world_axis = rotate(s.orientation, axis);
      if (std::fabs(world_axis.y) > std::fabs(up.y)) up = world_axis;
    }
    const float angle = std::asin(std::min(1.0f, std::sqrt(up.x * up.x + up.z * up.z))) / kDegree;
    std::printf("[ measured ] corner drop (tilt %.0f deg) on %s: up axis %.4f deg from Y, centre height %.5f m, "
                "sleeping %d\n", tilt_degrees, plane ? "plane" : "box", angle, s.position.y, s.sleeping);
    EXPECT_LT(angle, 2.0f) << (plane ? "plane" : "box") << ", tilt " << tilt_degrees;
    EXPECT_NEAR(s.position.y, 0.5f, 0.01f) << (plane ? "plane" : "box") << ", tilt " << tilt_degrees;
  }
}

// --- Newton's cradle and chained restitution (restitution.h) ----------------------------------------

// A row of frictionless spheres on the X axis (radius 0.5 m, zero gravity, sleep off so slow
// spheres are not zeroed): ball i has mass masses[i], centre x[i], velocity v[i] along X, and
// restitution e. Simulates `seconds` at 60 Hz and returns the final states.
std::vector<BodyState> run_row(const std::vector<float>& x, const std::vector<float>& v,
                               const std::vector<float>& masses, float e, float seconds) {
  WorldSettings settings = zero_gravity();
  settings.allow_sleep = false;
  World world(settings);
  std::vector<ObjectID> balls;
  for (size_t i = 0; i < x.size(); ++i) {
    BodyDesc d = sphere_desc({x[i], 0.0f, 0.0f}, 0.5f, masses[i], e);
    d.friction = 0.0f;
    d.velocity = {v[i], 0.0f, 0.0f};
    balls.push_back(add(world, d));
  }
  const int steps = static_cast<int>(seconds / kDt + 0.5f);
  for (int i = 0; i < steps; ++i) world.step(kDt);
  std::vector<BodyState> out;
  for (const ObjectID id : balls) out.push_back(state(world, id));
  return out;
}

// Newton's cradle: five spheres of 1 kg, e = 1, centres 1 m apart (exactly touching); the first is
// struck towards the others at 2 m/s, either in place (touching) or arriving from a gap of 1 cm or
// 2.5 cm at the last step start before impact (inside / outside the 2 cm speculative margin). An
// ideal cradle hands the whole momentum and energy to the last sphere: after 1 s it must leave with
// >= 90 % of 2 m/s and the other four keep <= 2 % of it each (measured: exactly 2 m/s and 0 for
// all three starts). Momentum (2 kg m/s) is conserved to 1e-5 relative (float rounding) and the
// kinetic energy (2 J) never grows by more than 1e-5 relative.
TEST(RigidBody, NewtonsCradlePassesTheStrikeDownTheChain) {
  const float v_strike = 2.0f;
  for (const float gap : {0.0f, 0.51f, 0.525f}) {
    const std::vector<BodyState> s = run_row({-gap, 1.0f, 2.0f, 3.0f, 4.0f}, {v_strike, 0.0f, 0.0f, 0.0f, 0.0f},
                                             {1.0f, 1.0f, 1.0f, 1.0f, 1.0f}, 1.0f, 1.0f);
    double momentum = 0;
    double energy = 0;
    for (const BodyState& b : s) {
      momentum += double{b.mass} * b.velocity.x;
      energy += test::kinetic_energy(b);
    }
    std::printf("[ measured ] Newton's cradle (first ball %.3f m out) after 1 s: vx = %.5f %.5f %.5f %.5f %.5f m/s; "
                "momentum %.6f, energy %.6f J (initial 2)\n", gap, s[0].velocity.x, s[1].velocity.x,
                s[2].velocity.x, s[3].velocity.x, s[4].velocity.x, momentum, energy);
    EXPECT_GE(s[4].velocity.x, 0.9f * v_strike) << "gap " << gap;
    for (int i = 0; i < 4; ++i) {
      EXPECT_LE(length(s[static_cast<size_t>(i)].velocity), 0.02f * v_strike) << "ball " << i << ", gap " << gap;
    }
    EXPECT_NEAR(momentum, v_strike, 1e-5 * v_strike) << "gap " << gap;
    EXPECT_LE(energy, 2.0 * (1 + 1e-5)) << "gap " << gap;
  }
}

// Order independence: three touching 1 kg spheres, e = 1, struck at either end at 2 m/s towards
// the others. The contacts are stored in the same order both times, so one strike runs with the
// stored order and the other against it. Each must hand the whole speed to the far ball (>= 90 %,
// the others <= 2 %), and the two outcomes must mirror each other to 1e-5 m/s.
TEST(RigidBody, ChainStruckFromEitherEndPassesTheStrikeThrough) {
  const float v = 2.0f;
  const std::vector<float> x{0.0f, 1.0f, 2.0f};
  const std::vector<float> masses{1.0f, 1.0f, 1.0f};
  const std::vector<BodyState> fwd = run_row(x, {v, 0.0f, 0.0f}, masses, 1.0f, 0.5f);
  const std::vector<BodyState> back = run_row(x, {0.0f, 0.0f, -v}, masses, 1.0f, 0.5f);
  std::printf("[ measured ] 3-ball chain: struck at the first vx = %.5f %.5f %.5f; at the last vx = %.5f %.5f "
              "%.5f m/s\n",
              fwd[0].velocity.x, fwd[1].velocity.x, fwd[2].velocity.x, back[0].velocity.x, back[1].velocity.x,
              back[2].velocity.x);
  EXPECT_GE(fwd[2].velocity.x, 0.9f * v);
  EXPECT_LE(back[0].velocity.x, -0.9f * v);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_LE(length(fwd[i].velocity), 0.02f * v) << i;
    EXPECT_LE(length(back[i + 1].velocity), 0.02f * v) << i + 1;
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(back[i].velocity.x, -fwd[2 - i].velocity.x, 1e-5f) << i;
}

// Head-on collision of two spheres, e = 0.5, m1 = 1 kg at 3 m/s and m2 = 2 kg at -1 m/s. Newton's
// law and momentum give v1' = (m1 v1 + m2 v2 - m2 e (v1 - v2)) / (m1 + m2) = -1 m/s and v2' =
// (m1 v1 + m2 v2 + m1 e (v1 - v2)) / (m1 + m2) = 1 m/s (tolerance 1e-5 of the 4 m/s approach).
// The gap of 1.01 m closes at t* = 0.2525 s, mid-step (1 cm open at the start of step 15, inside
// the speculative margin), so the impact is resolved at its time of impact: after 1 s the centres
// are at x1 = -1.005 + 3 t* - (1 - t*) = -0.995 m and x2 = 1.005 - t* + (1 - t*) = 1.5 m, to 1e-4 m
// (float rounding of the positions; rebounding from the step start instead would be off by
// (1 + e) x 1 cm shared by the masses: 1 cm and 0.5 cm).
TEST(RigidBody, TwoSpheresHeadOnBounceByNewtonsLawAtTheTimeOfImpact) {
  const std::vector<BodyState> s = run_row({-1.005f, 1.005f}, {3.0f, -1.0f}, {1.0f, 2.0f}, 0.5f, 1.0f);
  std::printf("[ measured ] head-on e = 0.5: v1 = %.6f, v2 = %.6f m/s; x1 = %.6f, x2 = %.6f m\n", s[0].velocity.x,
              s[1].velocity.x, s[0].position.x, s[1].position.x);
  EXPECT_NEAR(s[0].velocity.x, -1.0f, 1e-5f * 4.0f);
  EXPECT_NEAR(s[1].velocity.x, 1.0f, 1e-5f * 4.0f);
  EXPECT_NEAR(s[0].position.x, -0.995f, 1e-4f);
  EXPECT_NEAR(s[1].position.x, 1.5f, 1e-4f);
  EXPECT_EQ(s[0].velocity.y, 0.0f);
  EXPECT_EQ(s[1].angular_velocity, (Vec3{}));
}

// A unit box dropped flat from 1 m onto the ground with e = 0.5 and 0.8 lands on four points at
// once. The restitution pass solves them as one block, so the box bounces straight: its first apex
// is e^2 h within 5 % (measured -2 %: the approach speed is read at step start, before that
// step's gravity) and it never spins faster than 0.01 rad/s (measured < 1e-3; a point-by-point
// bounce would tip it).
TEST(RigidBody, BoxLandingFlatBouncesStraight) {
  for (const float e : {0.5f, 0.8f}) {
    World world;
    add_ground(world);
    const float h = 1.0f;
    BodyDesc d = box_desc({0.0f, 0.5f + h, 0.0f});
    d.restitution = e;
    const ObjectID box = add(world, d);
    bool bounced = false;
    float apex = 0;
    float spin = 0;
    for (int i = 0; i < 240; ++i) {
      world.step(kDt);
      const BodyState s = state(world, box);
      spin = std::max(spin, length(s.angular_velocity));
      bounced = bounced || s.velocity.y > 0;
      if (!bounced) continue;
      apex = std::max(apex, s.position.y - 0.5f);
      if (s.velocity.y < 0) break;  // past the first apex
    }
    std::printf("[ measured ] box landing flat, e = %.1f: apex %.5f m (e^2 h = %.5f), max |w| %.6f rad/s\n", e, apex,
                e * e * h, spin);
    ASSERT_TRUE(bounced) << "e = " << e;
    EXPECT_NEAR(apex, e * e * h, 0.05f * e * e * h) << "e = " << e;
    EXPECT_LT(spin, 0.01f) << "e = " << e;
  }
}

// --- Pile energy ------------------------------------------------------------------------------------

// 50 unit boxes (3 x 3 per layer, 1.05 m apart, layers 1.2 m apart, jittered by up to 5 cm and
// tilted up to 0.3 rad from a seeded Rng) dropped on a ground plane, sleep off. Once settled (after
// 5 s), for 2 s the total energy sum(m g y + 1/2 m v^2 + 1/2 w^T I w) never rises from one step to
// the next by more than eps = 1e-3 J per body (0.05 J in all: the energy of lifting one box by
// 5 mm, the linear slop). A settled pile is only pushed out of its small overlaps by the soft
// contacts, which must not pump energy in.
TEST(RigidBody, SettledPileEnergyNeverRises) {
  WorldSettings settings;
  settings.allow_sleep = false;
  World world(settings);
  add_ground_plane(world, 0.6f);
  impulse::test::Rng rng(2024);
  const int n = 50;
  for (int i = 0; i < n; ++i) {
    const int layer = i / 9;
    const int ix = i % 3;
    const int iz = (i % 9) / 3;
    BodyDesc d = box_desc({(static_cast<float>(ix) - 1.0f) * 1.05f + rng.uniform(-0.05f, 0.05f),
                           0.6f + 1.2f * static_cast<float>(layer),
                           (static_cast<float>(iz) - 1.0f) * 1.05f + rng.uniform(-0.05f, 0.05f)});
    const Vec3 axis{rng.uniform(-1.0f, 1.0f), rng.uniform(-1.0f, 1.0f), rng.uniform(-1.0f, 1.0f)};
    d.orientation = quat_from_axis_angle(normalize_or(axis, {1.0f, 0.0f, 0.0f}), rng.uniform(-0.3f, 0.3f));
    d.friction = 0.6f;
    add(world, d);
  }
  for (int i = 0; i < 300; ++i) world.step(kDt);
  const double eps_total = 1e-3 * n;
  double e_prev = test::total_energy(world);
  const double e_start = e_prev;
  double worst_rise = -1e30;
  int worst_step = -1;
  for (int i = 0; i < 120; ++i) {
    world.step(kDt);
    const double e = test::total_energy(world);
    if (e - e_prev > worst_rise) {
      worst_rise = e - e_prev;
      worst_step = i;
    }
    e_prev = e;
  }
  std::printf("[ measured ] pile of 50: energy %.4f J at 5 s, %.4f J at 7 s; largest step-to-step rise %.3e J "
              "(step %d; bound %.3e J)\n", e_start, e_prev, worst_rise, worst_step, eps_total);
  EXPECT_LE(worst_rise, eps_total);
}

// --- Determinism ------------------------------------------------------------------------------------

// Two worlds built from the same S1 pyramid (base 10, 55 boxes) give identical world_hash() after
// every one of 300 steps, with sleep off and with sleep on (islands going to sleep take part).
// Exact equality: the step is bit-deterministic by construction.
TEST(RigidBody, SamePyramidGivesSameHashEveryStep) {
  const scenes::BenchScene scene = scenes::make_s1_pyramid(10);
  for (const bool allow_sleep : {false, true}) {
    WorldSettings settings;
    settings.gravity = scenes::kSceneGravity;
    settings.allow_sleep = allow_sleep;
    World a(settings);
    World b(settings);
    const std::vector<ObjectID> ids_a = scenes::load_into(a, scene);
    const std::vector<ObjectID> ids_b = scenes::load_into(b, scene);
    ASSERT_EQ(ids_a, ids_b);
    ASSERT_EQ(a.world_hash(), b.world_hash());
    for (int i = 0; i < 300; ++i) {
      a.step(scenes::kSceneDt);
      b.step(scenes::kSceneDt);
      ASSERT_EQ(a.world_hash(), b.world_hash()) << "step " << i << ", sleep " << allow_sleep;
    }
    // The hash does move: a world that stands still would pass trivially.
    World c(settings);
    scenes::load_into(c, scene);
    EXPECT_NE(a.world_hash(), c.world_hash());
  }
}

// awake_hash, which recordings store per tick, sees a divergence at the tick it happens even when
// it starts in a sleeping body: two identical worlds with two sleeping stacks; one world's top box
// of stack B gets a 1e-4 N s impulse (a 0.1 mm/s change). The very next step's awake_hash differs,
// as does world_hash. Before that, the worlds agree on both hashes every step, and while
// everything sleeps awake_hash still changes with the tick.
TEST(RigidBody, AwakeHashSeesADivergenceThatStartsInASleepingBody) {
  World a;
  World b;
  std::vector<ObjectID> stack_b;
  for (World* w : {&a, &b}) {
    add_ground(*w);
    stack_b.clear();
    for (int i = 0; i < 3; ++i) {
      const float y = 0.5f + static_cast<float>(i);
      add(*w, box_desc({-5.0f, y, 0.0f}));
      stack_b.push_back(add(*w, box_desc({5.0f, y, 0.0f})));
    }
  }
  int steps = 0;
  for (; steps < 600 && (a.awake_count() > 0 || b.awake_count() > 0); ++steps) {
    a.step(kDt);
    b.step(kDt);
    ASSERT_EQ(a.awake_hash(), b.awake_hash()) << "step " << steps;
    ASSERT_EQ(a.world_hash(), b.world_hash()) << "step " << steps;
  }
  ASSERT_LT(steps, 600) << "the stacks never fell asleep";
  const uint64_t asleep_hash = a.awake_hash();
  a.step(kDt);
  b.step(kDt);
  EXPECT_NE(a.awake_hash(), asleep_hash) << "the tick is part of awake_hash";
  ASSERT_EQ(a.awake_hash(), b.awake_hash());

  ASSERT_EQ(b.apply_impulse(stack_b.back(), {1e-4f, 0.0f, 0.0f}, std::nullopt), Error::Ok);
  a.step(kDt);
  b.step(kDt);
  EXPECT_NE(a.awake_hash(), b.awake_hash());
  EXPECT_NE(a.world_hash(), b.world_hash());
}

// --- Islands and sleep ------------------------------------------------------------------------------

// Two stacks of three boxes 10 m apart are separate islands (the static ground joins nothing). Once
// both sleep, a box dropped from 1 m onto stack A wakes all of A's island in the same step, while
// every body of stack B stays asleep throughout; then everything falls asleep again (bounded: 10 s).
TEST(RigidBody, LandingWakesOnlyItsIsland) {
  World world;
  add_ground(world);
  std::vector<ObjectID> stack_a;
  std::vector<ObjectID> stack_b;
  for (int i = 0; i < 3; ++i) {
    const float y = 0.5f + static_cast<float>(i);
    stack_a.push_back(add(world, box_desc({-5.0f, y, 0.0f})));
    stack_b.push_back(add(world, box_desc({5.0f, y, 0.0f})));
  }
  const int settle = test::step_until(world, kDt, 600, [&] { return world.awake_count() == 0; });
  ASSERT_LT(settle, 600) << "the stacks never fell asleep";
  const ObjectID dropped = add(world, box_desc({-5.0f, 4.5f, 0.0f}));  // bottom face 1 m above A
  int a_woke_at = -1;
  for (int i = 0; i < 120 && a_woke_at < 0; ++i) {
    world.step(kDt);
    int awake_a = 0;
    for (const ObjectID id : stack_a) awake_a += state(world, id).sleeping ? 0 : 1;
    for (const ObjectID id : stack_b) ASSERT_TRUE(state(world, id).sleeping) << "stack B woke at step " << i;
    if (awake_a > 0) {
      EXPECT_EQ(awake_a, 3) << "only part of island A woke";
      a_woke_at = i;
    }
  }
  ASSERT_GE(a_woke_at, 0) << "stack A never woke";
  bool b_slept_throughout = true;
  const int resleep = test::step_until(world, kDt, 600, [&] {
    for (const ObjectID id : stack_b) b_slept_throughout = b_slept_throughout && state(world, id).sleeping;
    return world.awake_count() == 0;
  });
  std::printf("[ measured ] islands: stacks asleep after %d steps; A woke at step %d after the drop "
              "(free fall of 1 m takes ~27 steps); all asleep again %d steps later; dropped box at y %.4f\n",
              settle, a_woke_at, resleep, state(world, dropped).position.y);
  EXPECT_TRUE(b_slept_throughout);
  EXPECT_LT(resleep, 600) << "did not fall asleep again";
  EXPECT_NEAR(state(world, dropped).position.y, 3.5f, 0.02f);  // landed on A and stayed there
}

// --- Sensors ----------------------------------------------------------------------------------------

// A sphere falls through a static sensor box and gets no contact response: after N steps of dt with
// n substeps of semi-implicit Euler, v = -g N dt (the sum of 4N equal increments g dt / 4), so
// |v_y + g N dt| <= 4N * 2^-24 |v_y| (the worst-case rounding of that running float sum), v_x = v_z
// = 0 and w = 0 exactly. One Begin event and, later, one End event are reported for the pair.
TEST(RigidBody, SensorReportsBeginAndEndWithoutResponse) {
  World world;
  BodyDesc sd = box_desc({0.0f, 5.0f, 0.0f}, {1.0f, 1.0f, 1.0f}, 1.0f, BodyKind::Static);
  sd.sensor = true;
  const ObjectID sensor = add(world, sd);
  const ObjectID ball = add(world, sphere_desc({0.0f, 8.0f, 0.0f}));
  int begin_step = -1;
  int end_step = -1;
  int begins = 0;
  int ends = 0;
  bool overlapped = false;
  for (int i = 0; i < 90; ++i) {
    world.step(kDt);
    const BodyState s = state(world, ball);
    const float n = static_cast<float>(i + 1);
    const float expected = -kG * n * kDt;
    ASSERT_NEAR(s.velocity.y, expected, 4.0f * n * 0x1.0p-24f * std::fabs(expected)) << "step " << i;
    ASSERT_EQ(s.velocity.x, 0.0f);
    ASSERT_EQ(s.velocity.z, 0.0f);
    ASSERT_EQ(s.angular_velocity, Vec3{});
    overlapped = overlapped || world.are_colliding(sensor, ball);
    for (const ContactEvent& e : world.contact_events()) {
      const bool pair = (e.a == sensor && e.b == ball) || (e.a == ball && e.b == sensor);
      ASSERT_TRUE(pair) << "unexpected event";
      if (e.type == ContactEventType::Begin) {
        ++begins;
        begin_step = i;
      } else {
        ++ends;
        end_step = i;
      }
    }
  }
  std::printf("[ measured ] sensor: Begin at step %d (sphere bottom reaches the top y = 6 at ~step 33), End at step "
              "%d (top leaves y = 4 at ~step 58); final vy %.6f m/s\n",
              begin_step, end_step, state(world, ball).velocity.y);
  EXPECT_EQ(begins, 1);
  EXPECT_EQ(ends, 1);
  EXPECT_TRUE(overlapped);
  EXPECT_LT(begin_step, end_step);
  EXPECT_LT(state(world, ball).position.y, 3.5f);  // through and out below
}

// --- Capsule and rolling sphere ---------------------------------------------------------------------

// A capsule (radius 0.3 m, core 1 m) lying on its side on a ground plane, touching, stays put: it
// moves < 1 cm in 2 s (soft-contact settling is about linear_slop = 5 mm), its axis stays within
// 1 degree of horizontal, and it falls asleep within those 2 s (sleep_time_s is 0.5 s).
TEST(RigidBody, CapsuleOnItsSideRestsAndSleeps) {
  World world;
  add_ground_plane(world);
  BodyDesc d;
  d.shape = make_capsule(0.3f, 0.5f);
  d.position = {1.0f, 0.3f, -2.0f};
  d.orientation = quat_from_axis_angle({0.0f, 0.0f, 1.0f}, 0.5f * kPi);
  const ObjectID capsule = add(world, d);
  const int asleep = test::step_until(world, kDt, 120, [&] { return world.awake_count() == 0; });
  const BodyState s = state(world, capsule);
  const float moved = length(s.position - d.position);
  const float tilt = std::asin(std::min(1.0f, std::fabs(rotate(s.orientation, {0.0f, 1.0f, 0.0f}).y))) / kDegree;
  std::printf("[ measured ] capsule on its side: moved %.5f m, axis %.4f deg from horizontal, asleep after %d steps\n",
              moved, tilt, asleep);
  EXPECT_LT(moved, 0.01f);
  EXPECT_LT(tilt, 1.0f);
  EXPECT_LT(asleep, 120);
  EXPECT_TRUE(s.sleeping);
}

// A sphere (radius 0.5 m, no angular damping) released on a 20 degree slope with mu = 0.5 rolls
// without slipping (that needs mu >= 2/7 tan(theta) = 0.104): energy conservation with I = 2/5 m r^2
// gives v = sqrt(10/7 g h) after its centre has dropped by h. Checked after 4 m along the slope,
// with h the measured drop, within 5 %; the rolling condition |w| r = |v| also within 5 %.
TEST(RigidBody, SphereRollsDownSlopeAtRollingSpeed) {
  World world;
  BodyDesc ball = sphere_desc({});
  ball.friction = 0.5f;
  ball.angular_damping = 0.0f;
  const Slope slope = make_slope(world, 20.0f * kDegree, 0.5f, ball, 0.5f);
  const int steps = test::step_until(world, kDt, 600, [&] {
    return dot(state(world, slope.body).position - slope.start, slope.down) >= 4.0f;
  });
  ASSERT_LT(steps, 600) << "the sphere did not roll 4 m";
  const BodyState s = state(world, slope.body);
  const float h = slope.start.y - s.position.y;
  const float v = length(s.velocity);
  const float expected = std::sqrt(10.0f / 7.0f * kG * h);
  const float rolling = length(s.angular_velocity) * 0.5f / v;
  std::printf("[ measured ] rolling sphere: after %d steps, drop %.4f m, v = %.4f m/s (closed form %.4f, sliding "
              "without friction %.4f), |w| r / v = %.4f\n",
              steps, h, v, expected, std::sqrt(2 * kG * h), rolling);
  EXPECT_NEAR(v, expected, 0.05f * expected);
  EXPECT_NEAR(rolling, 1.0f, 0.05f);
}

// --- Forces, torques and impulses at a point ---------------------------------------------------------

// A free box (no gravity, no damping, rotated, distinct moments) given a torque tau for one step
// gets w = I_world^-1 tau dt, I_world = R I R^T from the closed-form box inertia, the torque being
// integrated over the substeps with the inertia at step start. About a principal axis (tau along a
// rotated local axis) w stays on that axis, the gyroscopic term w x (I w) is 0, and the closed form
// holds to float rounding: 1e-5 relative. About a general axis the gyroscopic term already acts in
// the later substeps on the spin built up in the first ones (second order in dt): 1e-3 relative.
TEST(RigidBody, TorqueForOneStepGivesInverseInertiaTimesTorqueDt) {
  {
    World world(zero_gravity());
    BodyDesc d = box_desc({1.0f, 2.0f, 3.0f}, {0.2f, 0.5f, 1.0f}, 2.0f);
    d.orientation = quat_from_axis_angle(normalize_or({-1.0f, 2.0f, 0.5f}, {}), 1.1f);
    d.angular_damping = 0.0f;
    const ObjectID box = add(world, d);
    for (int k = 0; k < 3; ++k) {
      const BodyState s0 = state(world, box);
      const Vec3 local_axis{k == 0 ? 1.0f : 0.0f, k == 1 ? 1.0f : 0.0f, k == 2 ? 1.0f : 0.0f};
      const Vec3 torque = rotate(s0.orientation, local_axis) * 0.4f;
      const Vec3 expected = test::world_inverse_inertia(s0) * torque * kDt;
      ASSERT_EQ(world.set_angular_velocity(box, {}), Error::Ok);
      ASSERT_EQ(world.apply_torque(box, torque), Error::Ok);
      world.step(kDt);
      const float error = relative_error(state(world, box).angular_velocity, expected);
      std::printf("[ measured ] torque about principal axis %d: w relative error %.2e\n", k, error);
      EXPECT_LT(error, 1e-5f) << "axis " << k;
    }
  }
  World world(zero_gravity());
  BodyDesc d = box_desc({1.0f, 2.0f, 3.0f}, {0.2f, 0.5f, 1.0f}, 2.0f);
  d.orientation = quat_from_axis_angle(normalize_or({-1.0f, 2.0f, 0.5f}, {}), 1.1f);
  d.angular_damping = 0.0f;
  const ObjectID box = add(world, d);
  const Vec3 torque{0.3f, -0.2f, 0.5f};
  const Mat3 inv_inertia = test::world_inverse_inertia(state(world, box));
  ASSERT_EQ(world.apply_torque(box, torque), Error::Ok);
  world.step(kDt);
  const BodyState s = state(world, box);
  const Vec3 expected = inv_inertia * torque * kDt;
  std::printf("[ measured ] torque: w relative error %.2e\n", relative_error(s.angular_velocity, expected));
  // 1e-3: within the step the gyroscopic term -w x (I w) already acts on the spin built up in the
  // first substeps (5.7e-5 measured for this box), so the closed form without it is not exact.
  EXPECT_LT(relative_error(s.angular_velocity, expected), 1e-3f);
  EXPECT_EQ(s.velocity, Vec3{});
  // The torque lasts one step only: with no torque the next step keeps |L| (only gyroscopic
  // precession acts), within the same rounding tolerance.
  const Vec3 l1 = test::angular_momentum(s);
  world.step(kDt);
  EXPECT_NEAR(length(test::angular_momentum(state(world, box))), length(l1), 1e-5f * length(l1));
}

// A force F at a point p for one step gives dv = F / m dt and dw = I^-1 ((p - c) x F) dt; an
// impulse J at p gives at once dv = J / m and dw = I^-1 ((p - c) x J). Tolerance 1e-5 relative,
// except the force's dw: 1e-3, for the gyroscopic coupling within the step (see the torque test).
TEST(RigidBody, ForceAndImpulseAtAPointGiveLinearAndAngularChange) {
  World world(zero_gravity());
  BodyDesc d = box_desc({1.0f, 2.0f, 3.0f}, {0.2f, 0.5f, 1.0f}, 2.0f);
  d.orientation = quat_from_axis_angle(normalize_or({0.3f, -1.0f, 2.0f}, {}), 0.8f);
  d.angular_damping = 0.0f;
  const ObjectID box = add(world, d);
  const Vec3 centre = d.position;
  const Mat3 inv_inertia = test::world_inverse_inertia(state(world, box));

  const Vec3 force{0.5f, 1.0f, -3.0f};
  const Vec3 force_at = centre + Vec3{0.4f, 0.3f, -0.1f};
  ASSERT_EQ(world.apply_force(box, force, force_at), Error::Ok);
  world.step(kDt);
  BodyState s = state(world, box);
  const Vec3 dv = force * (kDt / 2.0f);
  const Vec3 dw = inv_inertia * cross(force_at - centre, force) * kDt;
  std::printf("[ measured ] force at a point: dv error %.2e, dw error %.2e\n", relative_error(s.velocity, dv),
              relative_error(s.angular_velocity, dw));
  EXPECT_LT(relative_error(s.velocity, dv), 1e-5f);
  EXPECT_LT(relative_error(s.angular_velocity, dw), 1e-3f);

  // Impulse at a point, checked immediately (it changes the velocities at once).
  const BodyState before = state(world, box);
  const Vec3 impulse{-1.0f, 0.5f, 2.0f};
  const Vec3 impulse_at = before.position + Vec3{-0.1f, 0.45f, 0.8f};
  ASSERT_EQ(world.apply_impulse(box, impulse, impulse_at), Error::Ok);
  s = state(world, box);
  const Vec3 jv = impulse * 0.5f;
  const Vec3 jw = test::world_inverse_inertia(before) * cross(impulse_at - before.position, impulse);
  std::printf("[ measured ] impulse at a point: dv error %.2e, dw error %.2e\n",
              relative_error(s.velocity - before.velocity, jv),
              relative_error(s.angular_velocity - before.angular_velocity, jw));
  EXPECT_LT(relative_error(s.velocity - before.velocity, jv), 1e-5f);
  EXPECT_LT(relative_error(s.angular_velocity - before.angular_velocity, jw), 1e-5f);
}

}  // namespace
}  // namespace impulse::physics
