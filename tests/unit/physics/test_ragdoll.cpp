// Swing-twist joints and ragdolls: the cone and twist limits as closed forms, a 15-body ragdoll
// thrown down stairs (the test: every joint within 2 cm after settling, nothing
// non-finite, asleep), and Box3D's ragdoll determinism test in spirit (test/test_determinism.c:
// groups of ragdolls falling until all sleep): the same sleep step and hash on 1 and 2 threads.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "server/physics/world.h"
#include "shared/parallel.h"
#include "tests/scenes/bench_scenes.h"
#include "unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::box_desc;

constexpr float kDt = 1.0f / 60.0f;
constexpr float kPi = 3.14159265358979f;

BodyState state(const World& w, ObjectID id) { return *w.get_object(id); }

BodyDesc capsule_desc(Vec3 position, float radius, float half_height, float mass) {
  BodyDesc d;
  d.shape = make_capsule(radius, half_height);
  d.position = position;
  d.mass = mass;
  return d;
}

JointDesc swing_twist(ObjectID a, ObjectID b, Vec3 anchor, Vec3 axis, float cone, float lower, float upper,
                      float friction = 0.0f) {
  JointDesc d;
  d.kind = JointKind::SwingTwist;
  d.body_a = a;
  d.body_b = b;
  d.anchor = anchor;
  d.axis = axis;
  d.enable_limit = true;
  d.cone_angle = cone;
  d.lower_angle = lower;
  d.upper_angle = upper;
  d.friction_torque = friction;
  return d;
}

// The angle between the rod (its centre from the pivot) and the world's -Y [rad]: 0 hanging.
float swing_from_down(const World& w, ObjectID id, Vec3 pivot) {
  const Vec3 d = normalize_or(state(w, id).position - pivot, Vec3{0, -1, 0});
  return std::acos(std::clamp(-d.y, -1.0f, 1.0f));
}

TEST(SwingTwist, TheConeHoldsASwingingRodAtItsAngle) {
  // A 1 m rod hanging from the world on a swing-twist joint (twist axis -Y), thrown sideways at
  // speeds from a nudge to 8 m/s and in 4 directions: the swing never passes the cone (30 or 60
  // degrees) by more than 2 degrees, and the rod comes to rest on it or inside it.
  for (const float cone_degrees : {30.0f, 60.0f}) {
    for (const float speed : {0.5f, 2.0f, 8.0f}) {
      for (int direction = 0; direction < 4; ++direction) {
        World w;
        const float yaw = 0.5f * kPi * static_cast<float>(direction);
        BodyDesc rod = capsule_desc({0, 4.5f, 0}, 0.05f, 0.45f, 1.0f);
        rod.velocity = Vec3{std::cos(yaw), 0, std::sin(yaw)} * speed;
        rod.angular_velocity = Vec3{-std::sin(yaw), 0, std::cos(yaw)} * (speed / 0.5f);  // r x v / r^2 about the pivot
        const ObjectID r = add(w, rod);
        // A is the rod, B the world: the rod's axis from the pivot is -Y.
        ASSERT_EQ(w.create_joint(swing_twist(r, ObjectID{}, {0, 5, 0}, {0, -1, 0}, cone_degrees * kPi / 180.0f,
                                             -0.5f, 0.5f))
                      .error,
                  Error::Ok);
        float widest = 0;
        for (int k = 0; k < 180; ++k) {
          w.step(kDt);
          widest = std::max(widest, swing_from_down(w, r, {0, 5, 0}));
        }
        EXPECT_LE(widest, (cone_degrees + 2.0f) * kPi / 180.0f)
            << cone_degrees << " deg cone, " << speed << " m/s, direction " << direction;
        if (speed >= 2.0f) {
          EXPECT_GT(widest, (cone_degrees - 2.0f) * kPi / 180.0f) << "it should reach its cone";
        }
      }
    }
  }
}

TEST(SwingTwist, TheTwistStaysInItsRangeAndFrictionSlowsIt) {
  // A disc spun about the twist axis at 5 rad/s: the range [-0.4, 0.7] rad stops it; with friction
  // torque tau it slows at tau / I (I = m r^2 / 2 for a thin disc, here a flat box about Y).
  for (const float spin : {-5.0f, 5.0f}) {
    World w(WorldSettings{.gravity = {0, 0, 0}});
    BodyDesc disc = box_desc({0, 5, 0}, {0.5f, 0.05f, 0.5f}, 2.0f);
    disc.angular_velocity = {0, spin, 0};
    const ObjectID d = add(w, disc);
    ASSERT_EQ(w.create_joint(swing_twist(d, ObjectID{}, {0, 5, 0}, {0, 1, 0}, 0.5f, -0.4f, 0.7f)).error, Error::Ok);
    float lo = 0, hi = 0;
    for (int k = 0; k < 120; ++k) {
      w.step(kDt);
      const Quat q = state(w, d).orientation;
      const float turn = 2.0f * std::atan2(q.y, q.w);  // the disc's turn about +Y
      lo = std::min(lo, turn);
      hi = std::max(hi, turn);
    }
    // The world is B: the twist (B's relative to A) is minus the disc's turn.
    EXPECT_GE(lo, -0.7f - 0.03f) << spin;
    EXPECT_LE(hi, 0.4f + 0.03f) << spin;
  }
  World w(WorldSettings{.gravity = {0, 0, 0}});
  BodyDesc disc = box_desc({0, 5, 0}, {0.5f, 0.05f, 0.5f}, 2.0f);
  disc.angular_velocity = {0, 3.0f, 0};
  disc.angular_damping = 0.0f;  // only the friction slows it
  const ObjectID d = add(w, disc);
  const JointDesc free_spin = [&] {
    JointDesc j = swing_twist(d, ObjectID{}, {0, 5, 0}, {0, 1, 0}, 0, 0, 0, 0.5f);
    j.enable_limit = false;
    return j;
  }();
  ASSERT_EQ(w.create_joint(free_spin).error, Error::Ok);
  for (int k = 0; k < 30; ++k) w.step(kDt);
  const float inertia = 2.0f * (0.25f + 0.25f) / 3.0f;  // a box about Y: m (x^2 + z^2) / 3 with half extents
  EXPECT_NEAR(state(w, d).angular_velocity.y, 3.0f - 0.5f / inertia * 0.5f, 0.02f);  // 0.5 s of tau / I
}

// Six static steps descending along +z, 0.2 m high and 0.4 m deep, and a ground box under them.
void add_stairs(scenes::BenchScene* scene, float x, bool ground) {
  auto stat = [&](Vec3 at, Vec3 half) {
    scenes::SceneBody b;
    b.kind = BodyKind::Static;
    b.shape = make_box(half);
    b.position = at;
    scene->bodies.push_back(b);
  };
  if (ground) stat({0, -1, 0}, {50, 1, 50});
  for (int k = 0; k < 6; ++k) {
    const float height = 0.2f * static_cast<float>(6 - k);
    stat({x, 0.5f * height, 0.4f * static_cast<float>(k)}, {1.0f, 0.5f * height, 0.2f});
  }
}

// The largest distance between a joint's two anchors [m], over every joint of the world.
float worst_joint_gap(const World& w, uint32_t joints) {
  float worst = 0;
  for (uint32_t k = 0; k < joints; ++k) {
    const std::optional<JointRecord> j = w.get_joint(ObjectID{k, 1});
    if (!j) continue;
    auto end = [&](ObjectID body, Vec3 local) {
      if (body.is_null()) return local;
      const BodyState b = state(w, body);
      return b.position + rotate(b.orientation, local);
    };
    worst = std::max(worst, length(end(j->a, j->local_a) - end(j->b, j->local_b)));
  }
  return worst;
}

TEST(SwingTwist, ARagdollThrownDownStairsHoldsTogetherAndSleeps) {
  // The ragdoll of the J2 benchmark (tests/scenes/bench_scenes.h), with its joints' friction.
  scenes::BenchScene scene;
  add_stairs(&scene, 0.0f, true);
  const auto first = static_cast<uint32_t>(scene.bodies.size());
  scenes::append_ragdoll(&scene, {0, 1.25f, -0.1f}, {0, 0, 1.5f}, /*joint_friction=*/true);
  World w;
  const std::vector<ObjectID> ids = scenes::load_into(w, scene);
  const std::vector<ObjectID> parts(ids.begin() + first, ids.end());
  ASSERT_EQ(parts.size(), 15u);
  ASSERT_EQ(w.joint_count(), 14u);
  int asleep_at = -1;
  float worst_late = 0;
  for (int k = 0; k < 900 && asleep_at < 0; ++k) {
    w.step(kDt);
    for (const ObjectID id : parts) {
      const BodyState b = state(w, id);
      ASSERT_TRUE(is_finite(b.position) && is_finite(b.velocity) && is_finite(b.angular_velocity)) << "step " << k;
    }
    if (k >= 240) worst_late = std::max(worst_late, worst_joint_gap(w, 14));
    bool all = true;
    for (const ObjectID id : parts) all = all && w.is_asleep(id);
    if (all) asleep_at = k;
  }
  EXPECT_LT(worst_late, 0.02f) << "a joint pulled apart after settling";
  EXPECT_GE(asleep_at, 0) << "the ragdoll should sleep within 15 s";
  // It went down the stairs, not through them.
  const BodyState pelvis = state(w, parts[0]);
  EXPECT_GT(pelvis.position.z, 0.3f);
  EXPECT_GT(pelvis.position.y, 0.0f);
}

TEST(SwingTwist, RagdollsSleepAtTheSameStepWithTheSameHashOnOneAndTwoThreads) {
  // Box3D's determinism test in spirit: 2 x 2 groups of 2 ragdolls (8 ragdolls, 120 bodies) on
  // stairs, stepped until all sleep, on one thread and on a pool of two.
  scenes::BenchScene scene;
  for (int g = 0; g < 2; ++g) {
    add_stairs(&scene, 3.0f * static_cast<float>(g), g == 0);
    for (int r = 0; r < 4; ++r) {
      scenes::append_ragdoll(&scene,
                             {3.0f * static_cast<float>(g) + 0.5f * static_cast<float>(r % 2) - 0.25f,
                              1.25f + 2.2f * static_cast<float>(r / 2), -0.1f},
                             {0, 0, 1.0f + 0.25f * static_cast<float>(r)}, /*joint_friction=*/true);
    }
  }
  auto build = [&](World& w) { scenes::load_into(w, scene); };
  WorkerPool two(2);
  World one, pooled;
  pooled.set_worker_pool(&two);
  build(one);
  build(pooled);
  int asleep_one = -1, asleep_two = -1;
  for (int k = 0; k < 1200 && (asleep_one < 0 || asleep_two < 0); ++k) {
    one.step(kDt);
    pooled.step(kDt);
    ASSERT_EQ(one.world_hash(), pooled.world_hash()) << "step " << k;
    if (asleep_one < 0 && one.awake_count() == 0) asleep_one = k;
    if (asleep_two < 0 && pooled.awake_count() == 0) asleep_two = k;
  }
  EXPECT_EQ(asleep_one, asleep_two);
  EXPECT_GE(asleep_one, 0) << "the ragdolls should sleep within 20 s";
}

}  // namespace
}  // namespace impulse::physics
