// Bounces against their closed forms, swept over drop heights (and so over the phase of the impact
// within a step): a ball dropped from h with restitution e rebounds at e sqrt(2 g h) and peaks at
// e^2 h. Peer: Jolt's TestPhysicsCollisionElastic (UnitTests/Physics/PhysicsTests.cpp), which
// checks one e = 1 drop's rebound velocity and position to 1e-4.
#include <cmath>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics::test {
namespace {

constexpr float kDt = 1.0f / 60.0f;
constexpr float kG = 9.81f;
constexpr float kRadius = 0.5f;

struct Bounce {
  bool bounced = false;
  float rebound = 0;  // upward speed just after the impact, extrapolated back to the impact [m/s]
  float apex = 0;     // highest bottom height after the bounce [m]
};

// Drops a sphere (bottom at height h above a plane with restitution 0: the default mix rule, Max,
// gives the ball's e)
// and follows it to the first apex. With `as_force`, the world has no gravity and the ball is
// pushed by m g every step (apply_force), which must bounce the same.
Bounce drop(float h, float e, bool as_force) {
  WorldSettings settings;
  if (as_force) settings.gravity = Vec3{};
  World world(settings);
  add_ground_plane(world, 0.5f, 0.0f);
  const float mass = 2.0f;
  const ObjectID ball = add(world, sphere_desc({0.0f, kRadius + h, 0.0f}, kRadius, mass, e));
  Bounce out;
  for (int i = 0; i < 60 * 8; ++i) {
    if (as_force && world.apply_force(ball, {0.0f, -kG * mass, 0.0f}) != Error::Ok) {
      ADD_FAILURE() << "apply_force refused";
      return out;
    }
    world.step(kDt);
    const BodyState b = state(world, ball);
    if (!out.bounced && b.velocity.y > 0) {
      out.bounced = true;
      // The ball hit at T = sqrt(2 h / g) after the start and then rose under gravity for the rest
      // of this step, (i + 1) dt - T: the speed it left the floor with, as Jolt checks it.
      const double impact = std::sqrt(2.0 * h / kG);
      out.rebound = b.velocity.y + kG * static_cast<float>((i + 1) * static_cast<double>(kDt) - impact);
    }
    if (out.bounced) {
      out.apex = std::max(out.apex, b.position.y - kRadius);
      if (b.velocity.y < 0) break;
    }
  }
  return out;
}

// 200 drop heights from 1 m to 3 m: the impact lands at every phase within a step. Every drop
// bounces; the rebound speed is within 1e-5 relative of e sqrt(2 g h) (Jolt: 1e-4 m/s on one
// drop of 4.9 m that hits at a step's start), the apex within 1e-3 relative of e^2 h plus
// g dt^2 / 8 (0.3 mm: the apex is sampled once per step).
TEST(Bounce, EveryDropHeightBouncesByTheClosedForm) {
  for (const float e : {1.0f, 0.99f, 0.95f, 0.8f}) {
    int lost = 0;
    float worst_speed = 0;
    float worst_apex = 0;
    for (int k = 0; k < 200; ++k) {
      const float h = 1.0f + 2.0f * static_cast<float>(k) / 199.0f;
      const Bounce b = drop(h, e, false);
      if (!b.bounced) {
        ++lost;
        continue;
      }
      const float speed = e * std::sqrt(2.0f * kG * h);
      worst_speed = std::max(worst_speed, std::fabs(b.rebound - speed) / speed);
      const float sampling = kG * kDt * kDt / 8.0f;
      worst_apex = std::max(worst_apex, std::max(std::fabs(b.apex - e * e * h) - sampling, 0.0f) / (e * e * h));
    }
    EXPECT_EQ(lost, 0) << "e = " << e;
    EXPECT_LT(worst_speed, 1e-5f) << "e = " << e;
    EXPECT_LT(worst_apex, 1e-3f) << "e = " << e;
    std::printf("e = %.2f: lost %d of 200, worst rebound error %.2e, worst apex error %.2e\n", e, lost, worst_speed,
                worst_apex);
  }
}

// Gravity applied as a force bounces as world gravity does: the impact prediction uses every
// acceleration the body has this step. Swept over 50 heights; both runs agree within 1e-3
// relative and match the closed form.
TEST(Bounce, GravityAppliedAsAForceBouncesLikeWorldGravity) {
  for (int k = 0; k < 50; ++k) {
    const float h = 1.0f + 4.0f * static_cast<float>(k) / 49.0f;
    const Bounce world_gravity = drop(h, 1.0f, false);
    const Bounce force_gravity = drop(h, 1.0f, true);
    ASSERT_TRUE(world_gravity.bounced && force_gravity.bounced) << "h = " << h;
    const float speed = std::sqrt(2.0f * kG * h);
    EXPECT_NEAR(force_gravity.rebound, speed, 1e-4f * speed) << "h = " << h;
    EXPECT_NEAR(force_gravity.rebound, world_gravity.rebound, 1e-4f * speed) << "h = " << h;
    EXPECT_NEAR(force_gravity.apex, world_gravity.apex, 1e-3f * h) << "h = " << h;
  }
}

// Long bodies struck end-on (issue row: an e = 1 rod, beam or plank left a wall at -0.13 to
// -0.30 m/s, spinning, against -10.0 for a cube). The four points of the end face have nearly
// parallel rows, so point-by-point iterations put the impulse on one corner and the energy check
// then made the bounce inelastic; the block is now solved exactly (restitution.cpp). Closed form:
// the rebound is -e v, without spin or sideways drift; tolerance 2 % of v (the issue's) and
// 0.01 rad/s (Jolt's sliding-box tolerance for spin). Swept over shapes, e, speeds and the phase
// of the impact within a step; zero g, a static wall 0.5 m thick.
TEST(Bounce, LongBodiesStruckEndOnReboundWholeWithoutSpin) {
  struct Body {
    const char* name;
    Vec3 half;
  };
  const Body bodies[] = {{"cube", {0.5f, 0.5f, 0.5f}},  {"rod", {1.0f, 0.05f, 0.05f}},
                         {"beam", {1.0f, 0.1f, 0.1f}},  {"plank", {1.0f, 0.2f, 0.02f}},
                         {"long rod", {2.0f, 0.05f, 0.05f}}};
  float worst_speed = 0;
  float worst_spin = 0;
  for (const Body& body : bodies) {
    for (const float e : {1.0f, 0.8f, 0.5f}) {
      for (const float v : {2.0f, 10.0f, 30.0f}) {
        for (int phase = 0; phase < 4; ++phase) {
          WorldSettings settings;
          settings.gravity = Vec3{};
          World world(settings);
          BodyDesc wall = box_desc({5.0f, 0.0f, 0.0f}, {0.5f, 5.0f, 5.0f}, 1.0f, BodyKind::Static);
          add(world, wall);
          BodyDesc d = box_desc({0.0f - v * kDt * static_cast<float>(phase) / 4.0f, 0.0f, 0.0f}, body.half, 3.0f);
          d.velocity = {v, 0.0f, 0.0f};
          d.restitution = e;
          const ObjectID id = add(world, d);
          // Long enough to reach the wall (4.5 m less the half length) and leave it.
          const int steps = static_cast<int>((4.5f / v + 0.3f) / kDt) + 10;
          for (int i = 0; i < steps; ++i) world.step(kDt);
          const BodyState st = state(world, id);
          const std::string where = std::string(body.name) + " e " + std::to_string(e) + " v " + std::to_string(v) +
                                    " phase " + std::to_string(phase);
          ASSERT_LT(st.velocity.x, 0.0f) << where << ": did not rebound";
          const float speed_error = std::fabs(st.velocity.x + e * v) / v;
          const float drift = std::hypot(st.velocity.y, st.velocity.z) / v;
          const float spin = length(st.angular_velocity);
          EXPECT_LT(speed_error, 0.02f) << where << ": left at " << st.velocity.x;
          EXPECT_LT(drift, 1e-3f) << where;
          EXPECT_LT(spin, 0.01f) << where;
          worst_speed = std::max(worst_speed, speed_error);
          worst_spin = std::max(worst_spin, spin);
        }
      }
    }
  }
  std::printf("[ measured ] end-on rebounds: worst speed error %.2e of v, worst spin %.2e rad/s\n", worst_speed,
              worst_spin);
}

// The same end-on, rod against a resting rod (zero g): the closed form of a collinear impact,
// v1' = (m1 - e m2) v / (m1 + m2), v2' = (1 + e) m1 v / (m1 + m2), over mass ratios and e.
TEST(Bounce, RodsMeetingEndOnExchangeMomentumByTheClosedForm) {
  for (const float ratio : {0.25f, 1.0f, 4.0f}) {
    for (const float e : {1.0f, 0.8f, 0.5f}) {
      WorldSettings settings;
      settings.gravity = Vec3{};
      World world(settings);
      const float m1 = 2.0f;
      const float m2 = m1 * ratio;
      const float v = 8.0f;
      BodyDesc a = box_desc({-2.5f, 0.0f, 0.0f}, {1.0f, 0.05f, 0.05f}, m1);
      a.velocity = {v, 0.0f, 0.0f};
      a.restitution = e;
      BodyDesc b = box_desc({0.0f, 0.0f, 0.0f}, {1.0f, 0.05f, 0.05f}, m2);
      b.restitution = e;
      const ObjectID ia = add(world, a);
      const ObjectID ib = add(world, b);
      for (int i = 0; i < 30; ++i) world.step(kDt);
      const BodyState sa = state(world, ia);
      const BodyState sb = state(world, ib);
      const float va = (m1 - e * m2) * v / (m1 + m2);
      const float vb = (1.0f + e) * m1 * v / (m1 + m2);
      EXPECT_NEAR(sa.velocity.x, va, 0.02f * v) << "ratio " << ratio << " e " << e;
      EXPECT_NEAR(sb.velocity.x, vb, 0.02f * v) << "ratio " << ratio << " e " << e;
      EXPECT_LT(length(sa.angular_velocity) + length(sb.angular_velocity), 0.01f) << "ratio " << ratio << " e " << e;
    }
  }
}

// No energy from a landing: a 2 kg unit box with e = 1 (and e = 0.5) dropped from 2 m onto a
// static floor at 24 tilts about two axes (corner, edge and face landings), frictionless, 2 s.
// The kinetic plus potential energy may never grow by more than 5e-4 of the start. Tilt 8 at
// e = 1 gained 1.2 % (0.47 J) in its impact step, and tilts 2 and 19 0.05 %: the restitution
// pass moved the box back to its time of impact but not its turn, so the 12 rad/s spin of the
// corner hit turned it over the whole step and drove its next corner into the floor. Bouncing
// blocks now turn back by dw t too (restitution.h): largest change 1.4e-5.
TEST(Bounce, TiltedBoxLandingsGainNoEnergy) {
  float worst = -1.0f;
  for (const float e : {1.0f, 0.5f}) {
    for (int k = 0; k < 24; ++k) {
      World world;
      add_ground(world, e);
      BodyDesc d = box_desc({0.0f, 2.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 2.0f);
      const float a = 0.13f * static_cast<float>(k);
      const float b = 0.07f * static_cast<float>(k % 7);
      d.orientation = normalize(Quat{std::sin(0.5f * a), 0.0f, std::sin(0.5f * b), std::cos(0.5f * a) + std::cos(0.5f * b)});
      d.restitution = e;
      d.friction = 0.0f;
      d.angular_damping = 0.0f;
      const ObjectID id = add(world, d);
      (void)id;
      const double start = total_energy(world);
      double highest = start;
      for (int i = 0; i < 60 * 2; ++i) {
        world.step(kDt);
        highest = std::max(highest, total_energy(world));
      }
      EXPECT_LE(highest, start * (1.0 + 5e-4)) << "e " << e << " tilt " << k;
      worst = std::max(worst, static_cast<float>((highest - start) / start));
    }
  }
  std::printf("[ measured ] tilted box landings: largest energy change %.2e of the start\n", worst);
}

}  // namespace
}  // namespace impulse::physics::test
