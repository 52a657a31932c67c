// The reference scenes S1-S3 follow their description (docs/BENCHMARKS.md, "Scenes"): the LCG's
// values, counts, layouts and the random draws, against values computed independently (Python,
// exact 64-bit integer arithmetic).
#include <gtest/gtest.h>

#include <cmath>

#include "server/physics/world.h"
#include "tests/scenes/bench_scenes.h"

namespace impulse::scenes {
namespace {

using physics::BodyKind;
using physics::ShapeKind;

// Positions are float: 2 ulp at |x| ~ 16 m is about 4e-6 m.
constexpr float kPositionTolerance = 1.0e-5f;

TEST(BenchScenesLcg, FirstValuesMatchTheSpecifiedRecurrence) {
  Lcg lcg(0);
  // s1 = 1442695040888963407; (s1 >> 11) * 2^-53, and so on (Python reference).
  EXPECT_DOUBLE_EQ(lcg.next(), 0.07820865487829387);
  EXPECT_DOUBLE_EQ(lcg.next(), 0.10169876029679303);
  EXPECT_DOUBLE_EQ(lcg.next(), 0.6053233226252335);
}

TEST(BenchScenesLcg, RangeStaysInsideItsHalfOpenIntervalWithUniformMean) {
  Lcg lcg(42);
  constexpr int kDraws = 100000;
  double sum = 0.0;
  for (int i = 0; i < kDraws; ++i) {
    const double v = lcg.range(-0.3, 0.3);
    ASSERT_GE(v, -0.3);
    ASSERT_LT(v, 0.3);
    sum += v;
  }
  // Uniform on [-0.3, 0.3): sd 0.173, so the mean of 1e5 draws has sd 5.5e-4; allow 5 sd.
  EXPECT_NEAR(sum / kDraws, 0.0, 2.75e-3);
}

TEST(BenchScenesS1, PyramidOf210TouchingBoxesOnTheGround) {
  const BenchScene scene = make_s1_pyramid();
  EXPECT_EQ(scene.name, "S1");
  EXPECT_FALSE(scene.sleep);
  ASSERT_EQ(scene.bodies.size(), 211u);
  EXPECT_EQ(count_dynamic(scene), 210u);

  const SceneBody& ground = scene.bodies[0];
  EXPECT_EQ(ground.kind, BodyKind::Static);
  EXPECT_EQ(ground.shape.kind, ShapeKind::Box);
  EXPECT_EQ(ground.shape.half_extents, (Vec3{50.0f, 1.0f, 50.0f}));
  EXPECT_EQ(ground.position, (Vec3{0.0f, -1.0f, 0.0f}));

  // Row r has 20 - r boxes at x = i - (count - 1) / 2, y = 0.5 + r: exact in float.
  size_t index = 1;
  for (int row = 0; row < 20; ++row) {
    const int count = 20 - row;
    for (int i = 0; i < count; ++i, ++index) {
      const SceneBody& box = scene.bodies[index];
      EXPECT_EQ(box.kind, BodyKind::Dynamic);
      EXPECT_EQ(box.shape.half_extents, (Vec3{0.5f, 0.5f, 0.5f}));
      EXPECT_EQ(box.position, (Vec3{static_cast<float>(i) - 0.5f * static_cast<float>(count - 1),
                                    0.5f + static_cast<float>(row), 0.0f}));
      EXPECT_EQ(box.orientation, Quat{});
      EXPECT_EQ(box.mass, 1.0f);
      EXPECT_EQ(box.friction, 0.6f);
      EXPECT_EQ(box.restitution, 0.0f);
    }
  }
  ASSERT_EQ(scene.top_body, 210u);
  EXPECT_EQ(scene.bodies[scene.top_body].position, (Vec3{0.0f, 19.5f, 0.0f}));
}

TEST(BenchScenesS2, ContainerAndFirstBoxesFromLcg12345) {
  const BenchScene scene = make_s2_pile(1000);
  EXPECT_EQ(scene.name, "S2");
  EXPECT_TRUE(scene.sleep);
  ASSERT_EQ(scene.bodies.size(), 1005u);
  EXPECT_EQ(count_dynamic(scene), 1000u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(scene.bodies[i].kind, BodyKind::Static);
  EXPECT_EQ(scene.bodies[0].shape.half_extents, (Vec3{16.0f, 1.0f, 16.0f}));
  EXPECT_EQ(scene.bodies[1].position, (Vec3{15.5f, 40.0f, 0.0f}));
  EXPECT_EQ(scene.bodies[4].shape.half_extents, (Vec3{16.0f, 40.0f, 0.5f}));

  // Box 0 and box 1: x, z jitter, then the tilt axis and angle, in that order (Python reference).
  struct Expected {
    Vec3 position;
    Vec3 axis;
    double angle;
  };
  const Expected expected[2] = {
      {{-13.53904213940145f, 1.0f, -13.523461470408225f},
       {0.7138370420283251f, 0.6214908926325624f, -0.32277817119971436f},
       0.036283338338055915},
      {{-11.970613156483845f, 1.0f, -13.510850612493368f},
       {0.47695788511795795f, -0.47189155153651735f, 0.7415049152987884f},
       0.2898342628574789},
  };
  for (int i = 0; i < 2; ++i) {
    const SceneBody& box = scene.bodies[5 + static_cast<size_t>(i)];
    EXPECT_NEAR(box.position.x, expected[i].position.x, kPositionTolerance) << "box " << i;
    EXPECT_EQ(box.position.y, expected[i].position.y) << "box " << i;
    EXPECT_NEAR(box.position.z, expected[i].position.z, kPositionTolerance) << "box " << i;
    // q = (sin(a/2) axis, cos(a/2)); float trig, so 1e-6.
    const float s = static_cast<float>(std::sin(0.5 * expected[i].angle));
    EXPECT_NEAR(box.orientation.x, s * expected[i].axis.x, 1.0e-6f);
    EXPECT_NEAR(box.orientation.y, s * expected[i].axis.y, 1.0e-6f);
    EXPECT_NEAR(box.orientation.z, s * expected[i].axis.z, 1.0e-6f);
    EXPECT_NEAR(box.orientation.w, std::cos(0.5 * expected[i].angle), 1.0e-6);
  }
}

TEST(BenchScenesS2, EveryBoxStartsInsideTheContainerTiltedAtMostPoint3Rad) {
  const BenchScene scene = make_s2_pile(10000);
  ASSERT_EQ(count_dynamic(scene), 10000u);
  for (size_t i = 5; i < scene.bodies.size(); ++i) {
    const SceneBody& box = scene.bodies[i];
    const size_t k = i - 5;
    // Grid +-13.5 m plus 5 cm of jitter; the walls' inner faces are at +-15 m.
    ASSERT_LE(std::abs(box.position.x), 13.55f) << k;
    ASSERT_LE(std::abs(box.position.z), 13.55f) << k;
    ASSERT_EQ(box.position.y, 1.0f + static_cast<float>(k / 361) * 1.5f) << k;
    const Quat q = box.orientation;
    ASSERT_NEAR(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w, 1.0f, 1.0e-5f) << k;
    // Rotation angle 2 acos(|w|) <= 0.3 rad.
    ASSERT_LE(2.0 * std::acos(std::min(1.0, std::abs(static_cast<double>(q.w)))), 0.3 + 1.0e-5) << k;
  }
}

TEST(BenchScenesS3, PlaneAndSpheresFromLcg6789) {
  const BenchScene scene = make_s3_spheres(10000);
  EXPECT_EQ(scene.name, "S3");
  EXPECT_TRUE(scene.sleep);
  ASSERT_EQ(scene.bodies.size(), 10001u);
  EXPECT_EQ(scene.bodies[0].kind, BodyKind::Static);
  EXPECT_EQ(scene.bodies[0].shape.kind, ShapeKind::Plane);
  EXPECT_EQ(scene.bodies[0].position, Vec3{});

  const SceneBody& first = scene.bodies[1];
  EXPECT_EQ(first.shape.kind, ShapeKind::Sphere);
  EXPECT_EQ(first.shape.radius, 0.5f);
  EXPECT_NEAR(first.position.x, -18.04265765180171f, kPositionTolerance);
  EXPECT_NEAR(first.position.z, -18.092811031410378f, kPositionTolerance);
  EXPECT_NEAR(scene.bodies[2].position.x, -16.444557672470925f, kPositionTolerance);
  EXPECT_NEAR(scene.bodies[2].position.z, -17.93920650462459f, kPositionTolerance);
  for (size_t i = 1; i < scene.bodies.size(); ++i) {
    const size_t k = i - 1;
    const Vec3 p = scene.bodies[i].position;
    const float grid_x = (static_cast<float>(k % 625 % 25) - 12.0f) * 1.5f;
    const float grid_z = (static_cast<float>(k % 625 / 25) - 12.0f) * 1.5f;
    ASSERT_LE(std::abs(p.x - grid_x), 0.1f + kPositionTolerance) << k;
    ASSERT_LE(std::abs(p.z - grid_z), 0.1f + kPositionTolerance) << k;
    ASSERT_EQ(p.y, 1.0f + static_cast<float>(k / 625) * 1.5f) << k;
  }
}

TEST(BenchScenes, SameArgumentsGiveIdenticalScenesAndCountsAreClamped) {
  const BenchScene a = make_s2_pile(4000);
  const BenchScene b = make_s2_pile(4000);
  ASSERT_EQ(a.bodies.size(), b.bodies.size());
  for (size_t i = 0; i < a.bodies.size(); ++i) {
    ASSERT_EQ(a.bodies[i].position, b.bodies[i].position) << i;
    ASSERT_EQ(a.bodies[i].orientation, b.bodies[i].orientation) << i;
  }
  EXPECT_EQ(count_dynamic(make_s2_pile(0)), 1u);
  EXPECT_EQ(count_dynamic(make_s2_pile(kMaxPileCount + 1)), static_cast<uint32_t>(kMaxPileCount));
  EXPECT_EQ(count_dynamic(make_s1_pyramid(-3)), 1u);
}

TEST(BenchScenes, LoadIntoCreatesEveryBodyInOrder) {
  for (const BenchScene& scene : {make_s1_pyramid(), make_s2_pile(400), make_s3_spheres(700)}) {
    physics::World world;
    const std::vector<ObjectID> ids = load_into(world, scene);
    ASSERT_EQ(ids.size(), scene.bodies.size()) << scene.name;
    EXPECT_EQ(world.object_count(), scene.bodies.size()) << scene.name;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::optional<physics::BodyState> state = world.get_object(ids[i]);
      ASSERT_TRUE(state.has_value()) << scene.name << " body " << i;
      EXPECT_EQ(state->kind, scene.bodies[i].kind);
      EXPECT_EQ(state->position, scene.bodies[i].position);
      EXPECT_EQ(state->friction, scene.bodies[i].friction);
    }
  }
}

}  // namespace
}  // namespace impulse::scenes
