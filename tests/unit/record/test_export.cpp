// impulse-replay export (record::to_scene_json) never writes a non-finite number: issue 16 row H,
// where a NaN body was exported as "-nan" and the server then refused the scene.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "server/app/scene.h"
#include "server/physics/world.h"
#include "server/record/replay.h"
#include "tests/support/world_test_access.h"

namespace impulse::record {
namespace {

TEST(Export, BodiesWithNonFiniteStateAreLeftOutAndTheSceneLoads) {
  physics::World world;
  physics::BodyDesc d;
  d.shape = physics::make_box({0.5f, 0.5f, 0.5f});
  d.position = {0, 0.5f, 0};
  const ObjectID good = world.create_object(d).id;
  d.position = {3, 0.5f, 0};
  const ObjectID bad = world.create_object(d).id;
  ASSERT_FALSE(good.is_null());
  // No validated path makes a body non-finite (the step's guard would remove it): the test hook
  // stands in for a world restored from an old recording.
  ASSERT_TRUE(physics::WorldTestAccess::set_velocity_unchecked(world, bad, {-std::numeric_limits<float>::quiet_NaN(), 0, 0}));
  uint32_t skipped = 0;
  const std::string json = to_scene_json(world, {}, "export\ntest", &skipped);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
  EXPECT_EQ(json.find("inf"), std::string::npos) << json;
  server::Scene scene;
  std::string error;
  ASSERT_TRUE(server::parse_scene_json(json, "exported.json", &scene, &error)) << error << "\n" << json;
  ASSERT_EQ(scene.bodies.size(), 1u);
  EXPECT_EQ(scene.bodies[0].position, (impulse::Vec3{0, 0.5f, 0}));
}

}  // namespace
}  // namespace impulse::record
