// Scene loading: the demo and a checked-in JSON file load; every kind of bad scene is refused with
// an error that names the file and the field (or the parser's line and reason).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "server/app/scene.h"
#include "server/physics/world.h"
#include "shared/wire/codec.h"

namespace impulse::server {
namespace {

/// tests/scenes/, found from this source file so the test runs from any working directory.
std::filesystem::path scenes_dir() { return std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "scenes"; }

/// A scene file in the temp directory, removed at the end of the test.
class TempScene {
 public:
  explicit TempScene(const std::string& json) {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("impulse-scene-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json"))
                .string();
    std::ofstream(path_, std::ios::binary) << json;
  }
  ~TempScene() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A body JSON object with the given extra fields (", \"mass\": 2").
std::string body(const std::string& extra = {}) {
  return R"({ "shape": "Box", "dims": { "x": 0.5, "y": 0.5, "z": 0.5 }, "position": { "x": 0, "y": 1, "z": 0 })" + extra +
         " }";
}
std::string scene_with(const std::string& bodies) { return R"({ "name": "t", "bodies": [ )" + bodies + " ] }"; }

TEST(Scene, DemoLoadsAndEveryBodyIsAcceptedByTheWorld) {
  Scene scene;
  std::string error;
  ASSERT_TRUE(load_scene("demo", &scene, &error)) << error;
  EXPECT_EQ(scene.name, "demo");
  EXPECT_GE(scene.bodies.size(), 30u);
  EXPECT_LE(scene.bodies.size(), 60u);
  EXPECT_EQ(scene.bodies.front().kind, physics::BodyKind::Static);  // the ground
  int spheres = 0, bouncy = 0;
  for (const physics::BodyDesc& b : scene.bodies) {
    if (b.shape.kind == physics::ShapeKind::Sphere) ++spheres;
    if (b.restitution > 0.5f) ++bouncy;
  }
  EXPECT_GT(spheres, 0);
  EXPECT_GT(bouncy, 0);

  physics::WorldSettings settings;
  settings.gravity = scene.gravity;
  physics::World world(settings);
  for (const physics::BodyDesc& b : scene.bodies) EXPECT_EQ(world.create_object(b).error, physics::Error::Ok);
  // "A handful of datagrams" per snapshot.
  EXPECT_LE(wire::plan_snapshot(world.object_count()).part_count, 4);
}

TEST(Scene, CheckedInFileLoads) {
  const std::string path = (scenes_dir() / "two_boxes.json").string();
  Scene scene;
  std::string error;
  ASSERT_TRUE(load_scene(path, &scene, &error)) << error;
  EXPECT_EQ(scene.name, "two boxes");
  EXPECT_EQ(scene.gravity, (Vec3{0.0f, -9.81f, 0.0f}));
  ASSERT_EQ(scene.bodies.size(), 3u);
  EXPECT_EQ(scene.bodies[0].kind, physics::BodyKind::Static);
  EXPECT_EQ(scene.bodies[0].shape.kind, physics::ShapeKind::Box);
  EXPECT_EQ(scene.bodies[0].shape.half_extents, (Vec3{20, 1, 20}));
  EXPECT_EQ(scene.bodies[0].position, (Vec3{0, -1, 0}));
  EXPECT_EQ(scene.bodies[1].kind, physics::BodyKind::Dynamic);  // the schema default
  EXPECT_EQ(scene.bodies[1].mass, 2.0f);
  EXPECT_EQ(scene.bodies[2].shape.kind, physics::ShapeKind::Sphere);
  EXPECT_EQ(scene.bodies[2].shape.radius, 0.4f);
  EXPECT_EQ(scene.bodies[2].restitution, 0.7f);
  EXPECT_EQ(scene.bodies[2].mass, 1.0f);  // the schema default
}

TEST(Scene, DefaultsForOptionalFields) {
  Scene scene;
  std::string error;
  ASSERT_TRUE(parse_scene_json(R"({ "bodies": [ { "dims": {"x":1,"y":1,"z":1}, "position": {"x":0,"y":0,"z":0} } ] })",
                               "inline", &scene, &error))
      << error;
  EXPECT_EQ(scene.gravity, (Vec3{0.0f, -9.81f, 0.0f}));
  ASSERT_EQ(scene.bodies.size(), 1u);
  EXPECT_EQ(scene.bodies[0].shape.kind, physics::ShapeKind::Box);
  EXPECT_EQ(scene.bodies[0].velocity, (Vec3{}));
  EXPECT_EQ(scene.bodies[0].restitution, 0.0f);
  EXPECT_EQ(scene.bodies[0].friction, 0.5f);

  ASSERT_TRUE(parse_scene_json("{}", "empty", &scene, &error)) << error;
  EXPECT_TRUE(scene.bodies.empty());
}

TEST(Scene, FrictionIsReadAndItsBoundsAreInclusive) {
  Scene scene;
  std::string error;
  ASSERT_TRUE(parse_scene_json(scene_with(body(R"(, "friction": 0)") + ", " + body(R"(, "friction": 10)") + ", " +
                                          body(R"(, "friction": 0.8)")),
                               "inline", &scene, &error))
      << error;
  ASSERT_EQ(scene.bodies.size(), 3u);
  EXPECT_EQ(scene.bodies[0].friction, 0.0f);
  EXPECT_EQ(scene.bodies[1].friction, 10.0f);
  EXPECT_EQ(scene.bodies[2].friction, 0.8f);
}

struct BadScene {
  const char* what;
  std::string json;
  const char* expected;  // must appear in the error, after the file name
};

TEST(Scene, BadScenesNameTheFileAndTheField) {
  const BadScene cases[] = {
      {"malformed JSON", R"({ "bodies": [ )", "error"},
      {"trailing garbage", scene_with(body()) + " }", "error"},
      {"unknown field", scene_with(body(R"(, "colour": "red")")), "unknown field: colour"},
      {"unknown top-level field", R"({ "bodies": [], "gravityy": {"x":0,"y":0,"z":0} })", "unknown field: gravityy"},
      {"wrong type", scene_with(body(R"(, "mass": "heavy")")), "heavy"},
      {"wrong struct", scene_with(R"({ "dims": {"x":1,"y":1}, "position": {"x":0,"y":0,"z":0} })"), "Vec3"},
      {"missing position", scene_with(R"({ "dims": {"x":1,"y":1,"z":1} })"), "required field is missing: position"},
      {"unknown enum name", scene_with(body(R"(, "kind": "Floaty")")), "Floaty"},
      {"unknown enum number", scene_with(body(R"(, "kind": 7)")), "bodies[0].kind"},
      {"unknown shape number",
       scene_with(R"({ "shape": 4, "dims": {"x":1,"y":1,"z":1}, "position": {"x":0,"y":0,"z":0} })"),
       "bodies[0].shape"},
      {"negative mass", scene_with(body() + ", " + body(R"(, "mass": -1)")), "bodies[1].mass: must be > 0"},
      {"zero mass", scene_with(body(R"(, "mass": 0)")), "bodies[0].mass"},
      {"huge mass", scene_with(body(R"(, "mass": 2e6)")), "bodies[0].mass"},
      {"NaN mass", scene_with(body(R"(, "mass": nan)")), "bodies[0].mass: must be finite"},
      {"overflowing mass", scene_with(body(R"(, "mass": 1e39)")), "bodies[0].mass"},
      {"zero extent",
       scene_with(R"({ "dims": {"x":1,"y":0,"z":1}, "position": {"x":0,"y":0,"z":0} })"), "bodies[0].dims.y"},
      {"negative radius",
       scene_with(R"({ "shape": "Sphere", "dims": {"x":-1,"y":0,"z":0}, "position": {"x":0,"y":0,"z":0} })"),
       "bodies[0].dims.x"},
      {"huge extent",
       scene_with(R"({ "dims": {"x":1,"y":1,"z":1001}, "position": {"x":0,"y":0,"z":0} })"), "bodies[0].dims.z"},
      {"NaN position", scene_with(R"({ "dims": {"x":1,"y":1,"z":1}, "position": {"x":0,"y":nan,"z":0} })"),
       "bodies[0].position.y"},
      {"far position", scene_with(R"({ "dims": {"x":1,"y":1,"z":1}, "position": {"x":2e5,"y":0,"z":0} })"),
       "bodies[0].position.x"},
      {"infinite velocity", scene_with(body(R"(, "velocity": {"x":0,"y":0,"z":inf})")), "bodies[0].velocity.z"},
      {"restitution above 1", scene_with(body(R"(, "restitution": 1.5)")), "bodies[0].restitution"},
      {"negative restitution", scene_with(body(R"(, "restitution": -0.1)")), "bodies[0].restitution"},
      {"negative friction", scene_with(body(R"(, "friction": -0.1)")), "bodies[0].friction"},
      {"friction above 10", scene_with(body() + ", " + body(R"(, "friction": 10.5)")), "bodies[1].friction"},
      {"NaN friction", scene_with(body(R"(, "friction": nan)")), "bodies[0].friction"},
      {"NaN gravity", R"({ "gravity": {"x":0,"y":nan,"z":0} })", "gravity.y"},
      {"not an object", "[1, 2]", "error"},
  };
  for (const BadScene& c : cases) {
    const TempScene file(c.json);
    Scene scene;
    scene.name = "untouched";
    std::string error;
    EXPECT_FALSE(load_scene(file.path(), &scene, &error)) << c.what;
    EXPECT_EQ(error.rfind(file.path(), 0), 0u) << c.what << ": error does not start with the file name: " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.what << ": \"" << c.expected << "\" not in: " << error;
    EXPECT_EQ(scene.name, "untouched") << c.what << ": a failed load must not modify the scene";
  }
}

TEST(Scene, ParserErrorsCarryTheLine) {
  const TempScene file("{\n  \"bodies\": [\n    { \"nonsense\": 1 }\n  ]\n}\n");
  Scene scene;
  std::string error;
  ASSERT_FALSE(load_scene(file.path(), &scene, &error));
  EXPECT_NE(error.find(file.path() + ":3:"), std::string::npos) << error;
}

TEST(Scene, NamedBodiesAreNamedInErrors) {
  Scene scene;
  std::string error;
  ASSERT_FALSE(parse_scene_json(scene_with(R"({ "name": "crate", "dims": {"x":1,"y":1,"z":1},
                                              "position": {"x":0,"y":0,"z":0}, "mass": -2 })"),
                                "s.json", &scene, &error));
  EXPECT_NE(error.find("s.json: bodies[0] (\"crate\").mass"), std::string::npos) << error;
}

TEST(Scene, MissingFileIsAnErrorNamingIt) {
  Scene scene;
  std::string error;
  EXPECT_FALSE(load_scene("/nonexistent/impulse/scene.json", &scene, &error));
  EXPECT_NE(error.find("/nonexistent/impulse/scene.json"), std::string::npos) << error;
}

}  // namespace
}  // namespace impulse::server
