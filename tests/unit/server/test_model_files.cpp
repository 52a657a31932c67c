// Scene geometry from model files: an OBJ cube as a hull and as a mesh, a glTF quad placed by its
// node's transform, the scene's xxh64 pin, and hostile files (out-of-range indices, NaN positions,
// accessors past their buffers, 1e8 declared elements, truncated JSON, cyclic nodes) refused with
// errors that name the file and the element.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "server/app/asset_files.h"
#include "server/app/scene.h"
#include "server/physics/convex_hull.h"
#include "server/physics/triangle_mesh.h"

namespace impulse::server {
namespace {

/// A directory in the temp directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("impulse-models-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  std::filesystem::path path_;
};

constexpr const char* kCubeObj =
    "# a 2 m cube, quads\n"
    "mtllib cube.mtl\n"
    "v -1 -1 -1\nv 1 -1 -1\nv 1 1 -1\nv -1 1 -1\nv -1 -1 1\nv 1 -1 1\nv 1 1 1\nv -1 1 1\n"
    "f 1 4 3 2\nf 5 6 7 8\nf 1 2 6 5\nf 4 8 7 3\nf 1 5 8 4\nf 2 3 7 6\n";

std::string base64(const std::vector<uint8_t>& bytes) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) | (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kDigits[(n >> 18) & 63];
    out += kDigits[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[n & 63] : '=';
  }
  return out;
}

/// A glTF 2.0 file with one quad (4 float positions, 6 uint16 indices) in an embedded buffer,
/// under a node placed by `node_fields` (JSON members), with `position_count` declared for the
/// POSITION accessor and `first_x` as the first position's x.
std::string quad_gltf(const std::string& node_fields, uint64_t position_count = 4, float first_x = 0.0f) {
  std::vector<uint8_t> buffer;
  auto put_f32 = [&](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int k = 0; k < 4; ++k) buffer.push_back(static_cast<uint8_t>(u >> (8 * k)));
  };
  // A 1 m square in the x-z plane, front face up (+y), counter-clockwise seen from above.
  for (const float p : {first_x, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f}) put_f32(p);
  for (const uint16_t i : {0, 1, 2, 0, 2, 3}) {
    buffer.push_back(static_cast<uint8_t>(i));
    buffer.push_back(static_cast<uint8_t>(i >> 8));
  }
  return R"({"asset":{"version":"2.0"},"scene":0,"scenes":[{"nodes":[0]}],"nodes":[{"mesh":0)" + node_fields +
         R"(}],"meshes":[{"primitives":[{"attributes":{"POSITION":0},"indices":1}]}],)"
         R"("buffers":[{"byteLength":60,"uri":"data:application/octet-stream;base64,)" +
         base64(buffer) +
         R"("}],"bufferViews":[{"buffer":0,"byteOffset":0,"byteLength":48},{"buffer":0,"byteOffset":48,"byteLength":12}],)"
         R"("accessors":[{"bufferView":0,"componentType":5126,"count":)" +
         std::to_string(position_count) +
         R"(,"type":"VEC3","min":[0,0,0],"max":[1,0,1]},{"bufferView":1,"componentType":5123,"count":6,"type":"SCALAR"}]})";
}

std::string body_scene(const std::string& shape, const std::string& kind, const std::string& fields) {
  return R"({ "name": "models", "bodies": [ { "name": "thing", "shape": ")" + shape + R"(", "kind": ")" + kind +
         R"(", "position": { "x": 0, "y": 2, "z": 0 })" + fields + " } ] }";
}

TEST(ModelFiles, AnObjCubeLoadsAsAHullAndAsAMesh) {
  const TempDir dir;
  dir.write("cube.obj", kCubeObj);
  ModelFile model;
  ASSERT_EQ(load_model_file(dir.write("cube2.obj", kCubeObj), &model), "");
  EXPECT_EQ(model.vertices.size(), 8u);
  EXPECT_EQ(model.indices.size(), 36u);  // 6 quads, 2 triangles each

  Scene hull_scene;
  std::string error;
  ASSERT_TRUE(load_scene_file(dir.write("hull.json", body_scene("Hull", "Dynamic", R"(, "file": "cube.obj")")), &hull_scene,
                              &error))
      << error;
  ASSERT_EQ(hull_scene.hulls.size(), 1u);
  EXPECT_NEAR(hull_scene.hulls[0]->volume, 8.0f, 1e-4f);
  EXPECT_EQ(hull_scene.hulls[0]->vertices.size(), 8u);

  Scene mesh_scene;
  ASSERT_TRUE(load_scene_file(dir.write("mesh.json", body_scene("Mesh", "Static", R"(, "file": "cube.obj")")), &mesh_scene,
                              &error))
      << error;
  ASSERT_EQ(mesh_scene.meshes.size(), 1u);
  EXPECT_EQ(mesh_scene.meshes[0]->triangle_count(), 12u);
  // The same triangles, outward: every face's normal points away from the cube's centre.
  const physics::TriangleMesh& m = *mesh_scene.meshes[0];
  for (uint32_t t = 0; t < m.triangle_count(); ++t) {
    const Vec3 a = m.vertices[m.indices[3 * t]], b = m.vertices[m.indices[3 * t + 1]], c = m.vertices[m.indices[3 * t + 2]];
    EXPECT_GT(dot(cross(b - a, c - a), (a + b + c) * (1.0f / 3.0f)), 0.0f) << "triangle " << t;
  }
}

TEST(ModelFiles, AGltfQuadIsPlacedByItsNodesTransform) {
  const TempDir dir;
  // Scaled 2x, then turned 90 degrees about +y, then moved 10 m along x.
  const std::string node = R"(,"translation":[10,0,0],"rotation":[0,0.70710678,0,0.70710678],"scale":[2,2,2])";
  dir.write("quad.gltf", quad_gltf(node));
  Scene scene;
  std::string error;
  ASSERT_TRUE(load_scene_file(dir.write("s.json", body_scene("Mesh", "Static", R"(, "file": "quad.gltf")")), &scene, &error))
      << error;
  ASSERT_EQ(scene.meshes.size(), 1u);
  const physics::TriangleMesh& m = *scene.meshes[0];
  EXPECT_EQ(m.triangle_count(), 2u);
  // (x, z) in [0, 1]^2 scaled to [0, 2]^2, turned +90 degrees about y: x' = z, z' = -x.
  EXPECT_NEAR(m.bounds.min.x, 10.0f, 1e-4f);
  EXPECT_NEAR(m.bounds.max.x, 12.0f, 1e-4f);
  EXPECT_NEAR(m.bounds.min.z, -2.0f, 1e-4f);
  EXPECT_NEAR(m.bounds.max.z, 0.0f, 1e-4f);
  // Still facing up.
  const Vec3 a = m.vertices[m.indices[0]], b = m.vertices[m.indices[1]], c = m.vertices[m.indices[2]];
  EXPECT_GT(cross(b - a, c - a).y, 0.0f);
}

TEST(ModelFiles, TheScenesXxh64PinsTheFilesBytes) {
  const TempDir dir;
  const std::string path = dir.write("cube.obj", kCubeObj);
  ModelFile model;
  ASSERT_EQ(load_model_file(path, &model), "");
  const std::string right = xxh64_hex(model.xxh64);
  ASSERT_EQ(right.size(), 16u);
  Scene scene;
  std::string error;
  EXPECT_TRUE(load_scene_file(
      dir.write("ok.json", body_scene("Hull", "Dynamic", R"(, "file": "cube.obj", "xxh64": ")" + right + "\"")), &scene, &error))
      << error;
  // One changed byte in the file: refused, naming the file and both hashes.
  std::string edited = kCubeObj;
  edited.append("# edited\n");  // (not operator+: GCC 12's -Warray-bounds misreads it at -O1)
  dir.write("cube.obj", edited);
  EXPECT_FALSE(load_scene_file(
      dir.write("stale.json", body_scene("Hull", "Dynamic", R"(, "file": "cube.obj", "xxh64": ")" + right + "\"")), &scene,
      &error));
  EXPECT_NE(error.find("cube.obj hashes to"), std::string::npos) << error;
  EXPECT_NE(error.find(right), std::string::npos) << error;
  EXPECT_NE(error.find("bodies[0] (\"thing\").xxh64"), std::string::npos) << error;
}

TEST(ModelFiles, HostileFilesAreRefusedWithTheFileAndTheElement) {
  const TempDir dir;
  struct Case {
    const char* what;
    std::string name;
    std::string bytes;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"index past the vertices", "far.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n", "far.obj"},
      // tinyobjloader reads "nan" as 0; a glTF buffer holds any bit pattern.
      {"NaN position", "nan.gltf", quad_gltf("", 4, std::nanf("")), "POSITION 0"},
      {"huge vertex", "huge.obj", "v 0 0 0\nv 1e30 0 0\nv 0 1 0\nf 1 2 3\n", "vertex 2"},
      {"no faces", "empty.obj", "v 0 0 0\n", "no triangles"},
      {"truncated glTF", "cut.gltf", quad_gltf("").substr(0, 120), "not a glTF 2.0 file"},
      {"1e8 positions declared", "many.gltf", quad_gltf("", 100000000), "POSITION accessor"},
      {"5 positions in a 4-position view", "past.gltf", quad_gltf("", 5), "reads past its buffer view"},
      {"cyclic nodes", "cycle.gltf", [] {
         std::string g = quad_gltf(R"(,"children":[0])");
         return g;
       }(), "not a tree"},
      {"unknown format", "model.stl", "solid x\n", "unknown model format"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.write(c.name, c.bytes);
    ModelFile model;
    const std::string problem = load_model_file(path, &model);
    EXPECT_NE(problem.find(path), std::string::npos) << c.what << ": " << problem;
    EXPECT_NE(problem.find(c.expected), std::string::npos) << c.what << ": " << problem;
  }
  // Through a scene: the body and field first, then the file's reason.
  Scene scene;
  std::string error;
  EXPECT_FALSE(load_scene_file(dir.write("s.json", body_scene("Mesh", "Static", R"(, "file": "nan.gltf")")), &scene, &error));
  EXPECT_NE(error.find("bodies[0] (\"thing\").file: "), std::string::npos) << error;
  EXPECT_FALSE(load_scene_file(dir.write("t.json", body_scene("Mesh", "Static", R"(, "file": "absent.obj")")), &scene, &error));
  EXPECT_NE(error.find("cannot open the model file"), std::string::npos) << error;
  EXPECT_FALSE(load_scene_file(dir.write("u.json", body_scene("Box", "Static", R"(, "dims": {"x":1,"y":1,"z":1}, "file": "nan.gltf")")),
                               &scene, &error));
  EXPECT_NE(error.find("only a Hull or a Mesh takes a model file"), std::string::npos) << error;
}

}  // namespace
}  // namespace impulse::server
