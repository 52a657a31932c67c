// server::Scene -> schemas/scene.fbs JSON (nlohmann-json), for the network benchmarks' servers.
#include "bench/net/scene_file.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace impulse::bench {
namespace {

using nlohmann::json;

json to_json(Vec3 v) { return json{{"x", v.x}, {"y", v.y}, {"z", v.z}}; }

const char* kind_name(physics::BodyKind kind) {
  switch (kind) {
    case physics::BodyKind::Dynamic: return "Dynamic";
    case physics::BodyKind::Static: return "Static";
    case physics::BodyKind::Kinematic: return "Kinematic";
  }
  return "Dynamic";
}

// The scene schema's shape name and dims (see schemas/scene.fbs, ShapeKind).
void write_shape(const physics::Shape& shape, json& body) {
  switch (shape.kind) {
    case physics::ShapeKind::Sphere:
      body["shape"] = "Sphere";
      body["dims"] = to_json({shape.radius, shape.radius, shape.radius});
      return;
    case physics::ShapeKind::Box:
      body["shape"] = "Box";
      body["dims"] = to_json(shape.half_extents);
      return;
    case physics::ShapeKind::Capsule:
      body["shape"] = "Capsule";
      body["dims"] = to_json({shape.radius, shape.half_height, shape.radius});
      return;
    case physics::ShapeKind::Cylinder:
      body["shape"] = "Cylinder";
      body["dims"] = to_json({shape.radius, shape.half_height, shape.radius});
      return;
    case physics::ShapeKind::Hull:  // bench scenes have no hulls or meshes; a scene file names their data
    case physics::ShapeKind::Mesh:
    case physics::ShapeKind::HeightField:
    case physics::ShapeKind::Plane:
    case physics::ShapeKind::Count:
      body["shape"] = "Plane";
      return;
  }
}

// Axis-angle of a unit quaternion; nothing for the identity (the schema's default).
void write_rotation(Quat q, json& body) {
  if (q.x == 0.0f && q.y == 0.0f && q.z == 0.0f) return;
  const double s = std::sqrt(static_cast<double>(q.x) * q.x + static_cast<double>(q.y) * q.y +
                             static_cast<double>(q.z) * q.z);
  const double degrees = 2.0 * std::atan2(s, static_cast<double>(q.w)) * (180.0 / 3.14159265358979323846);
  body["rotation"] = json{{"axis", to_json({q.x, q.y, q.z})}, {"degrees", degrees}};
}

}  // namespace

std::string scene_to_json(const server::Scene& scene) {
  json bodies = json::array();
  for (size_t i = 0; i < scene.bodies.size(); ++i) {
    const physics::BodyDesc& b = scene.bodies[i];
    json body;
    if (i < scene.body_names.size() && !scene.body_names[i].empty()) body["name"] = scene.body_names[i];
    body["kind"] = kind_name(b.kind);
    write_shape(b.shape, body);
    body["position"] = to_json(b.position);
    write_rotation(b.orientation, body);
    if (b.kind == physics::BodyKind::Dynamic) body["mass"] = b.mass;
    body["velocity"] = to_json(b.velocity);
    body["angular_velocity"] = to_json(b.angular_velocity);
    body["restitution"] = b.restitution;
    body["friction"] = b.friction;
    body["angular_damping"] = b.angular_damping;
    body["material"] = b.material;
    body["sensor"] = b.sensor;
    bodies.push_back(std::move(body));
  }
  json root{{"name", scene.name}, {"gravity", to_json(scene.gravity)}, {"bodies", std::move(bodies)}};
  return root.dump();
}

TempSceneFile::~TempSceneFile() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

bool TempSceneFile::write(const server::Scene& scene, const std::string& tag, std::string* error) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) {
    if (error) *error = "no temporary directory for the scene file: " + ec.message() + " (set TMPDIR)";
    return false;
  }
  const std::string path = (dir / ("impulse-bench-" + tag + "-" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << scene_to_json(scene);
  out.close();
  if (!out) {
    if (error) *error = "cannot write the scene file " + path + " (check TMPDIR's free space and permissions)";
    std::filesystem::remove(path, ec);
    return false;
  }
  path_ = path;
  return true;
}

}  // namespace impulse::bench
