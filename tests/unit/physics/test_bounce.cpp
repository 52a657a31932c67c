// Bounces against their closed forms, swept over drop heights (and so over the phase of the impact
// within a step): a ball dropped from h with restitution e rebounds at e sqrt(2 g h) and peaks at
// e^2 h. Peer: Jolt's TestPhysicsCollisionElastic (UnitTests/Physics/PhysicsTests.cpp), which
// checks one e = 1 drop's rebound velocity and position to 1e-4.
#include <cmath>
#include <cstdio>

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

}  // namespace
}  // namespace impulse::physics::test
