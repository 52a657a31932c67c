// Scene loading: flatbuffers::Parser checks the JSON against the embedded scene.fbs (syntax,
// unknown fields, types, required fields), the Verifier checks the resulting buffer, then each
// body is range-checked with the wire protocol's bounds.
// Over 700 lines on purpose: one converter per scene table (bodies with their meshes and
// heightfields, material pairs, joints), each with its field checks, sharing the parse and the
// error format (file, line, field), and the built-in demo scene they are tested against.
#include "server/app/scene.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>

#include <flatbuffers/idl.h>
#include <fmt/format.h>

#include "impulse/schemas/scene_generated.h"
#include "server/app/asset_files.h"
#include "server/physics/world.h"
#include "shared/wire/codec.h"

extern const char kSceneSchemaText[];  // generated from schemas/scene.fbs (cmake/embed_text.cmake)

namespace impulse::server {
namespace {

// Checks |c| <= limit (NaN fails) for each component; names the first bad one in *field.
bool check_components(const Vec3& v, float limit, const char** axis) {
  const float c[3] = {v.x, v.y, v.z};
  static const char* const kAxes[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    if (!(std::fabs(c[i]) <= limit)) {
      *axis = kAxes[i];
      return false;
    }
  }
  return true;
}

Vec3 to_vec3(const scene::Vec3& v) { return {v.x(), v.y(), v.z()}; }

constexpr float kPi = 3.14159265358979f;
/// Largest |rotation.degrees| accepted: one full turn either way.
constexpr float kMaxRotationDegrees = 360.0f;
/// Shortest accepted rotation axis [dimensionless]; shorter ones have no reliable direction.
constexpr float kMinAxisLength = 1.0e-6f;

// Checks the shape's dims; returns an empty string or "field: reason".
std::string check_dims(scene::ShapeKind shape, const scene::Vec3* wire_dims) {
  if (shape == scene::ShapeKind::Plane || shape == scene::ShapeKind::Hull || shape == scene::ShapeKind::Mesh ||
      shape == scene::ShapeKind::HeightField) {
    if (wire_dims && !is_finite(to_vec3(*wire_dims))) {
      return "dims: must be finite (they are ignored for a plane, hull, mesh or heightfield)";
    }
    return {};
  }
  if (wire_dims == nullptr) return "dims: required for a Sphere, Box, Capsule or Cylinder";
  const Vec3 dims = to_vec3(*wire_dims);
  // [1 mm, 1000 m]: physics::kMinExtent gives the lower bound's reason. NaN fails.
  auto extent_ok = [](float x) { return x >= wire::kMinExtent && x <= wire::kMaxExtent; };
  switch (shape) {
    case scene::ShapeKind::Sphere:
      if (!extent_ok(dims.x)) return "dims.x: sphere radius must be in [0.001, 1000] m";
      if (!std::isfinite(dims.y) || !std::isfinite(dims.z)) return "dims: must be finite";
      return {};
    case scene::ShapeKind::Box:
      if (!extent_ok(dims.x)) return "dims.x: box half extent must be in [0.001, 1000] m";
      if (!extent_ok(dims.y)) return "dims.y: box half extent must be in [0.001, 1000] m";
      if (!extent_ok(dims.z)) return "dims.z: box half extent must be in [0.001, 1000] m";
      return {};
    case scene::ShapeKind::Capsule:
      if (!extent_ok(dims.x)) return "dims.x: capsule radius must be in [0.001, 1000] m";
      if (!(dims.y >= 0.0f && dims.y <= wire::kMaxExtent)) return "dims.y: capsule half height must be in [0, 1000] m";
      if (!std::isfinite(dims.z)) return "dims: must be finite";
      return {};
    case scene::ShapeKind::Cylinder:
      if (!extent_ok(dims.x)) return "dims.x: cylinder radius must be in [0.001, 1000] m";
      if (!extent_ok(dims.y)) return "dims.y: cylinder half height must be in [0.001, 1000] m";
      if (!std::isfinite(dims.z)) return "dims: must be finite";
      return {};
    case scene::ShapeKind::Plane:
    case scene::ShapeKind::Hull:
    case scene::ShapeKind::Mesh:
    case scene::ShapeKind::HeightField: return {};
  }
  return "shape: unknown shape kind";
}

physics::Shape to_shape(scene::ShapeKind shape, const scene::Vec3* wire_dims) {
  const Vec3 dims = wire_dims ? to_vec3(*wire_dims) : Vec3{};
  switch (shape) {
    case scene::ShapeKind::Sphere: return physics::make_sphere(dims.x);
    case scene::ShapeKind::Box: return physics::make_box(dims);
    case scene::ShapeKind::Capsule: return physics::make_capsule(dims.x, dims.y);
    case scene::ShapeKind::Cylinder: return physics::make_cylinder(dims.x, dims.y);
    case scene::ShapeKind::Plane: return physics::make_plane();
    case scene::ShapeKind::Hull:  // convert_body builds these from their data
    case scene::ShapeKind::Mesh:
    case scene::ShapeKind::HeightField: break;
  }
  return physics::make_box(dims);  // unreachable: convert_body checks the kind first
}

// What a body's shape data is built into (its shape points there).
struct BodyData {
  std::shared_ptr<const physics::ConvexHull> hull;
  std::shared_ptr<const physics::TriangleMesh> mesh;
  std::shared_ptr<const physics::HeightField> heightfield;
};

// A body's model file (its `file`, relative to `base_dir`), checked against its `xxh64`; "field:
// reason" on failure, the reason naming the file and the element.
std::string read_model(const scene::Body& b, const std::string& base_dir, ModelFile* model) {
  if (b.points() != nullptr || b.triangles() != nullptr) return "file: give either a file or points (and triangles)";
  const std::string name = b.file()->str();
  const std::string path = name.empty() || name.front() == '/' ? name : base_dir + "/" + name;
  if (std::string problem = load_model_file(path, model); !problem.empty()) return "file: " + problem;
  if (const auto* want = b.xxh64()) {
    std::string lower = want->str();
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower != xxh64_hex(model->xxh64)) {
      return fmt::format("xxh64: {} hashes to {}, not {} (the file changed; update the scene's xxh64 if that is meant)",
                         path, xxh64_hex(model->xxh64), want->string_view());
    }
  }
  return {};
}

// A mesh body's triangles over its points (or its model file's); "field: reason" on failure.
std::string build_mesh(const scene::Body& b, const std::string& base_dir,
                       std::shared_ptr<const physics::TriangleMesh>* mesh) {
  std::vector<Vec3> vertices;
  std::vector<uint32_t> file_indices;
  std::span<const uint32_t> indices;
  if (b.file() != nullptr) {
    ModelFile model;
    if (std::string problem = read_model(b, base_dir, &model); !problem.empty()) return problem;
    vertices = std::move(model.vertices);
    file_indices = std::move(model.indices);
    indices = file_indices;
  } else {
    const auto* points = b.points();
    const auto* triangles = b.triangles();
    if (points == nullptr || triangles == nullptr) return "points, triangles: required for a Mesh (or a file)";
    vertices.reserve(points->size());
    for (const scene::Vec3* p : *points) vertices.push_back(to_vec3(*p));
    indices = std::span<const uint32_t>(triangles->data(), triangles->size());
  }
  const std::span<const uint8_t> materials =
      b.materials() ? std::span<const uint8_t>(b.materials()->data(), b.materials()->size()) : std::span<const uint8_t>{};
  physics::MeshBuild built = physics::build_triangle_mesh(vertices, indices, materials);
  if (!built.ok()) return "triangles: " + built.error;
  *mesh = std::make_shared<const physics::TriangleMesh>(std::move(built.mesh));
  return {};
}

// A heightfield body's grid; "field: reason" on failure.
std::string build_field(const scene::Body& b, std::shared_ptr<const physics::HeightField>* field) {
  const auto* heights = b.heights();
  if (heights == nullptr || b.spacing() == nullptr) return "heights, samples_x, samples_z, spacing: required for a HeightField";
  std::vector<float> h(heights->begin(), heights->end());
  for (const float y : h) {
    if (std::isnan(y)) return "heights: NaN (mark holes with `holes`)";
  }
  if (const auto* holes = b.holes()) {
    for (const uint32_t k : *holes) {
      if (k >= h.size()) return fmt::format("holes: sample {} is beyond the {} heights", k, h.size());
      h[k] = std::nanf("");
    }
  }
  const std::span<const uint8_t> materials =
      b.materials() ? std::span<const uint8_t>(b.materials()->data(), b.materials()->size()) : std::span<const uint8_t>{};
  physics::HeightFieldBuild built =
      physics::build_heightfield(b.samples_x(), b.samples_z(), to_vec3(*b.spacing()), h, materials);
  if (!built.ok()) return "heights: " + built.error;
  *field = std::make_shared<const physics::HeightField>(std::move(built.field));
  return {};
}

// Range checks one body and converts it. Returns an empty string or "field: reason". A hull,
// mesh or heightfield body's data is built into *data (its shape points there).
std::string convert_body(const scene::Body& b, const std::string& base_dir, physics::BodyDesc* out, BodyData* data) {
  if (b.kind() < scene::BodyKind::MIN || b.kind() > scene::BodyKind::MAX) {
    return fmt::format("kind: unknown body kind {} (Dynamic, Static or Kinematic)", static_cast<int>(b.kind()));
  }
  if (b.shape() < scene::ShapeKind::MIN || b.shape() > scene::ShapeKind::MAX) {
    return fmt::format("shape: unknown shape kind {} (Sphere, Box, Capsule, Plane, Hull, Mesh, HeightField or Cylinder)",
                       static_cast<int>(b.shape()));
  }
  if (b.shape() == scene::ShapeKind::Plane && b.kind() != scene::BodyKind::Static) {
    return "shape: a Plane must be a Static body (\"kind\": \"Static\")";
  }
  const char* axis = "";
  // position is (required) in the schema, so the parser guarantees it exists; the null check
  // keeps a hand-built buffer from crashing us.
  if (b.position() == nullptr) return "position: required";
  if (std::string problem = check_dims(b.shape(), b.dims()); !problem.empty()) return problem;
  const Vec3 position = to_vec3(*b.position());
  if (!check_components(position, wire::kMaxCoordinate, &axis)) {
    return fmt::format("position.{}: must be finite and in [-1e5, 1e5] m", axis);
  }
  const Vec3 velocity = b.velocity() ? to_vec3(*b.velocity()) : Vec3{};
  if (!check_components(velocity, wire::kMaxSpeed, &axis)) {
    return fmt::format("velocity.{}: must be finite and in [-1e4, 1e4] m/s", axis);
  }
  const Vec3 angular_velocity = b.angular_velocity() ? to_vec3(*b.angular_velocity()) : Vec3{};
  if (!check_components(angular_velocity, wire::kMaxAngularSpeed, &axis)) {
    return fmt::format("angular_velocity.{}: must be finite and in [-100, 100] rad/s", axis);
  }
  Quat orientation;
  if (const scene::AxisAngle* rotation = b.rotation()) {
    Vec3 rotation_axis = to_vec3(rotation->axis());
    if (!is_finite(rotation_axis)) return "rotation.axis: must be finite";
    // Scaled by its largest |component| first, so |axis| cannot overflow (1e38 squared is
    // infinite in float, which made (1e38, 1e38, 0) silently the identity) and the length test
    // below is about direction, not magnitude.
    const float largest = std::max({std::fabs(rotation_axis.x), std::fabs(rotation_axis.y), std::fabs(rotation_axis.z)});
    if (!(largest >= kMinAxisLength)) return "rotation.axis: must not be zero (it is normalised)";
    rotation_axis = rotation_axis * (1.0f / largest);
    const float axis_length = length(rotation_axis);  // in [1, sqrt 3]
    const float degrees = rotation->degrees();
    if (!(std::fabs(degrees) <= kMaxRotationDegrees)) return "rotation.degrees: must be finite and in [-360, 360]";
    orientation = normalize(quat_from_axis_angle(rotation_axis * (1.0f / axis_length), degrees * (kPi / 180.0f)));
  }
  const auto kind = static_cast<physics::BodyKind>(b.kind());
  if (!std::isfinite(b.mass())) return "mass: must be finite";
  if (kind == physics::BodyKind::Dynamic && !(b.mass() > 0.0f && b.mass() <= wire::kMaxMass)) {
    return "mass: must be > 0 (and <= 1e6 kg) for a dynamic body";
  }
  if (!(b.restitution() >= 0.0f && b.restitution() <= 1.0f)) return "restitution: must be in [0, 1]";
  if (!(b.friction() >= 0.0f && b.friction() <= wire::kMaxFriction)) {  // also rejects NaN
    return "friction: must be finite and in [0, 10]";
  }
  if (!(b.angular_damping() >= 0.0f && b.angular_damping() <= wire::kMaxAngularDamping)) {
    return "angular_damping: must be finite and in [0, 100] 1/s";
  }

  out->kind = kind;
  out->position = position;
  out->orientation = orientation;
  if ((b.file() != nullptr || b.xxh64() != nullptr) && b.shape() != scene::ShapeKind::Hull &&
      b.shape() != scene::ShapeKind::Mesh) {
    return "file, xxh64: only a Hull or a Mesh takes a model file";
  }
  if (b.xxh64() != nullptr && b.file() == nullptr) return "xxh64: only with a file";
  if (b.shape() == scene::ShapeKind::Hull) {
    std::vector<Vec3> cloud;
    if (b.file() != nullptr) {
      ModelFile model;
      if (std::string problem = read_model(b, base_dir, &model); !problem.empty()) return problem;
      cloud = std::move(model.vertices);
    } else {
      const auto* points = b.points();
      if (points == nullptr) return "points: required for a Hull (or a file)";
      cloud.reserve(points->size());
      for (const scene::Vec3* p : *points) cloud.push_back(to_vec3(*p));
    }
    if (cloud.size() > physics::kMaxHullInputPoints) {
      return fmt::format("points: {} points, at most {}", cloud.size(), physics::kMaxHullInputPoints);
    }
    physics::HullBuild built = physics::build_convex_hull(cloud);
    if (!built.ok()) return built.error;  // "points...: reason"
    auto shared = std::make_shared<const physics::ConvexHull>(std::move(built.hull));
    // The body sits at the hull's principal frame: the model pose times the hull's input frame.
    out->position = position + rotate(orientation, shared->origin);
    out->orientation = normalize(orientation * shared->rotation);
    if (!check_components(out->position, wire::kMaxCoordinate, &axis)) {
      return fmt::format("position.{}: the hull's centre of mass must be in [-1e5, 1e5] m", axis);
    }
    out->shape = physics::make_hull(*shared);
    data->hull = std::move(shared);
  } else if (b.shape() == scene::ShapeKind::Mesh || b.shape() == scene::ShapeKind::HeightField) {
    if (kind != physics::BodyKind::Static) return "kind: a Mesh or HeightField must be a Static body";
    if (b.shape() == scene::ShapeKind::Mesh) {
      if (std::string problem = build_mesh(b, base_dir, &data->mesh); !problem.empty()) return problem;
      out->shape = physics::make_mesh(*data->mesh);
    } else {
      if (std::string problem = build_field(b, &data->heightfield); !problem.empty()) return problem;
      out->shape = physics::make_heightfield(*data->heightfield);
    }
  } else {
    out->shape = to_shape(b.shape(), b.dims());
  }
  if (b.points() != nullptr && b.shape() != scene::ShapeKind::Hull && b.shape() != scene::ShapeKind::Mesh) {
    return "points: only a Hull or a Mesh takes points";
  }
  if (b.triangles() != nullptr && b.shape() != scene::ShapeKind::Mesh) return "triangles: only a Mesh takes triangles";
  if ((b.heights() != nullptr || b.holes() != nullptr) && b.shape() != scene::ShapeKind::HeightField) {
    return "heights, holes: only a HeightField takes them";
  }
  out->velocity = velocity;
  out->angular_velocity = angular_velocity;
  out->mass = b.mass();
  out->restitution = b.restitution();
  out->friction = b.friction();
  out->angular_damping = b.angular_damping();
  out->material = b.material();
  out->sensor = b.sensor();
  out->asleep = b.asleep();
  out->bullet = b.bullet();
  out->filter = physics::Filter{b.category(), b.mask(), b.group()};  // any bits are valid
  // What the wire-style checks above cannot see: mass properties (a light, small body whose
  // inverse inertia is not finite). The World would refuse the body at start-up for the same
  // reason; here the error names the file, line and field.
  if (const char* problem = physics::check_body_desc(*out, physics::WorldSettings{})) return problem;
  return {};
}

// Range checks one material pair and converts it. Returns an empty string or "field: reason".
std::string convert_material_pair(const scene::MaterialPair& p, SceneMaterialPair* out) {
  if (!(p.friction() >= 0.0f && p.friction() <= wire::kMaxFriction)) {  // also rejects NaN
    return "friction: must be finite and in [0, 10]";
  }
  if (!(p.restitution() >= 0.0f && p.restitution() <= 1.0f)) return "restitution: must be finite and in [0, 1]";
  *out = SceneMaterialPair{p.a(), p.b(), p.friction(), p.restitution()};
  return {};
}

// The 1-based line of the `index`-th element of the top-level array `key` in `json`, or 0 when
// it cannot be found. A small scanner (strings, nesting depth), run only to report an error.
size_t element_line(std::string_view json, std::string_view key, size_t index) {
  size_t line = 1;
  int depth = 0;
  bool in_string = false;
  bool after_bodies_key = false;  // the last top-level key read was "bodies"
  int bodies_depth = -1;          // depth inside the bodies array, -1 before it
  size_t element = 0;
  bool expect_element = false;
  std::string_view last_string;
  size_t string_start = 0;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        last_string = json.substr(string_start, i - string_start);
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        string_start = i + 1;
        break;
      case ':':
        if (depth == 1) after_bodies_key = last_string == key;
        break;
      case '[':
        ++depth;
        if (after_bodies_key && depth == 2 && bodies_depth < 0) {
          bodies_depth = depth;
          expect_element = true;
        }
        break;
      case '{':
        if (bodies_depth > 0 && depth == bodies_depth && expect_element) {
          if (element == index) return line;
          expect_element = false;
        }
        ++depth;
        break;
      case ']':
      case '}':
        if (bodies_depth > 0 && depth == bodies_depth && c == ']') return 0;
        --depth;
        break;
      case ',':
        if (bodies_depth > 0 && depth == bodies_depth) {
          ++element;
          expect_element = true;
        }
        break;
      default: break;
    }
  }
  return 0;
}

// A joint's fields with the wire protocol's bounds (docs/PROTOCOL.md, "Joints"), angles given in
// degrees; returns an empty string or "field: reason". Its bodies are resolved by the caller.
std::string convert_joint(const scene::Joint& j, physics::JointDesc* out) {
  constexpr float kDegrees = kPi / 180.0f;
  constexpr float kMaxDegrees = wire::kMaxJointAngle / kDegrees;
  physics::JointDesc d;
  d.kind = static_cast<physics::JointKind>(j.kind());
  const char* axis = "";
  d.anchor = to_vec3(*j.anchor());
  if (!check_components(d.anchor, wire::kMaxCoordinate, &axis)) {
    return fmt::format("anchor.{}: must be finite and in [-1e5, 1e5] m", axis);
  }
  if (d.kind == physics::JointKind::Distance) {
    if (j.anchor_b() == nullptr) return "anchor_b: required for a Distance joint";
    d.anchor_b = to_vec3(*j.anchor_b());
    if (!check_components(d.anchor_b, wire::kMaxCoordinate, &axis)) {
      return fmt::format("anchor_b.{}: must be finite and in [-1e5, 1e5] m", axis);
    }
    if (!(j.min_length() >= 0.0f && j.min_length() <= j.max_length() && j.max_length() <= 2.0f * wire::kMaxCoordinate)) {
      return "min_length, max_length: need 0 <= min_length <= max_length <= 2e5 m";
    }
  }
  if (j.axis() != nullptr) {
    d.axis = to_vec3(*j.axis());
    if (!is_finite(d.axis) || !(length(d.axis) > kMinAxisLength)) return "axis: must be finite and not zero";
  }
  auto angle = [&](float degrees, const char* name, float* radians) -> std::string {
    if (!(std::fabs(degrees) <= kMaxDegrees)) return fmt::format("{}: must be in [-178.2, 178.2] degrees", name);
    *radians = degrees * kDegrees;
    return {};
  };
  for (const auto& [degrees, name, radians] :
       {std::tuple{j.lower_degrees(), "lower_degrees", &d.lower_angle},
        std::tuple{j.upper_degrees(), "upper_degrees", &d.upper_angle},
        std::tuple{j.target_degrees(), "target_degrees", &d.target_angle},
        std::tuple{j.motor_target_degrees(), "motor_target_degrees", &d.motor_target_angle},
        std::tuple{j.cone_degrees(), "cone_degrees", &d.cone_angle}}) {
    if (std::string problem = angle(degrees, name, radians); !problem.empty()) return problem;
  }
  const bool slider = d.kind == physics::JointKind::Slider;
  d.enable_limit = j.enable_limit();
  if (d.enable_limit && !slider && d.lower_angle > d.upper_angle) return "lower_degrees: must be <= upper_degrees";
  d.enable_motor = j.motor() != scene::MotorMode::Off;
  d.position_motor = j.motor() == scene::MotorMode::Position;
  d.motor_speed = j.motor_speed();
  if (!(std::fabs(d.motor_speed) <= (slider ? wire::kMaxSpeed : wire::kMaxAngularSpeed))) {
    return slider ? "motor_speed: must be in [-500, 500] m/s for a Slider" : "motor_speed: must be in [-47.12, 47.12] rad/s";
  }
  for (const auto& [value, name, field] :
       {std::tuple{j.lower_translation(), "lower_translation", &d.lower_translation},
        std::tuple{j.upper_translation(), "upper_translation", &d.upper_translation},
        std::tuple{j.target_translation(), "target_translation", &d.target_translation},
        std::tuple{j.motor_target_translation(), "motor_target_translation", &d.motor_target_translation}}) {
    if (!(std::fabs(value) <= wire::kMaxCoordinate)) return fmt::format("{}: must be in [-1e5, 1e5] m", name);
    *field = value;
  }
  if (d.enable_limit && slider && d.lower_translation > d.upper_translation) {
    return "lower_translation: must be <= upper_translation";
  }
  auto non_negative = [](float x, float most) { return x >= 0.0f && x <= most; };  // NaN fails
  d.max_motor_force = j.max_motor_force();
  if (!non_negative(d.max_motor_force, wire::kMaxForce)) return "max_motor_force: must be in [0, 1e9] N";
  if (d.cone_angle < 0.0f) return "cone_degrees: must be in [0, 178.2] degrees";
  d.friction_torque = j.friction_torque();
  if (!non_negative(d.friction_torque, wire::kMaxTorque)) return "friction_torque: must be in [0, 1e9] N m";
  d.max_motor_torque = j.max_motor_torque();
  d.break_force = j.break_force();
  d.break_torque = j.break_torque();
  if (!non_negative(d.max_motor_torque, wire::kMaxTorque)) return "max_motor_torque: must be in [0, 1e9] N m";
  if (!non_negative(d.break_force, wire::kMaxForce)) return "break_force: must be in [0, 1e9] N";
  if (!non_negative(d.break_torque, wire::kMaxTorque)) return "break_torque: must be in [0, 1e9] N m";
  d.spring_hertz = j.spring_hertz();
  d.spring_damping_ratio = j.spring_damping_ratio();
  if (!non_negative(d.spring_hertz, wire::kMaxSpringHertz)) return "spring_hertz: must be in [0, 1000] Hz";
  if (!non_negative(d.spring_damping_ratio, wire::kMaxSpringDampingRatio)) {
    return "spring_damping_ratio: must be in [0, 1000]";
  }
  d.min_length = j.min_length();
  d.max_length = j.max_length();
  d.collide_connected = j.collide_connected();
  *out = d;
  return {};
}

}  // namespace

std::string escape_for_log(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

bool parse_scene_json(std::string_view json, std::string_view source, Scene* scene, std::string* error) {
  auto fail = [&](std::string text) {
    if (error) *error = std::move(text);
    return false;
  };
  const std::string source_name(source);

  flatbuffers::IDLOptions options;
  options.skip_unexpected_fields_in_json = false;  // an unknown field is an error, not silence
  flatbuffers::Parser parser(options);
  if (!parser.Parse(kSceneSchemaText, nullptr, "scene.fbs")) {
    return fail(fmt::format("internal error: embedded scene.fbs does not parse: {}", parser.error_));
  }
  // The parser needs a NUL-terminated string.
  const std::string text(json);
  if (!parser.Parse(text.c_str(), nullptr, source_name.c_str())) {
    // The parser's message already starts with "<source>:<line>: <column>: error: ...".
    return fail(parser.error_);
  }

  flatbuffers::Verifier verifier(parser.builder_.GetBufferPointer(), parser.builder_.GetSize());
  if (!scene::VerifySceneBuffer(verifier)) return fail(fmt::format("{}: internal error: scene buffer does not verify", source));
  const scene::Scene* root = scene::GetScene(parser.builder_.GetBufferPointer());

  // Model files are found relative to the scene file's directory.
  const size_t slash = source_name.find_last_of('/');
  const std::string base_dir = slash == std::string::npos ? "." : source_name.substr(0, slash);
  Scene result;
  if (root->name()) result.name = root->name()->str();
  if (root->gravity()) {
    result.gravity = to_vec3(*root->gravity());
    const char* axis = "";
    if (!check_components(result.gravity, kMaxGravity, &axis)) {
      return fail(fmt::format("{}: gravity.{}: must be finite and in [-1000, 1000] m/s^2", source, axis));
    }
  }
  if (const auto* bodies = root->bodies()) {
    result.bodies.reserve(bodies->size());
    result.body_names.reserve(bodies->size());
    for (flatbuffers::uoffset_t i = 0; i < bodies->size(); ++i) {
      const scene::Body* body = bodies->Get(i);
      physics::BodyDesc desc;
      BodyData data;
      if (std::string problem = convert_body(*body, base_dir, &desc, &data); !problem.empty()) {
        const std::string label =
            body->name() ? fmt::format(" (\"{}\")", escape_for_log(body->name()->string_view())) : "";
        const size_t line = element_line(json, "bodies", i);
        const std::string where = line > 0 ? fmt::format("{}:{}", source, line) : std::string(source);
        return fail(fmt::format("{}: bodies[{}]{}.{}", where, i, label, problem));
      }
      result.bodies.push_back(desc);
      result.body_names.push_back(body->name() ? body->name()->str() : std::string{});
      if (data.hull) result.hulls.push_back(std::move(data.hull));
      if (data.mesh) result.meshes.push_back(std::move(data.mesh));
      if (data.heightfield) result.heightfields.push_back(std::move(data.heightfield));
    }
  }
  if (const auto* pairs = root->material_pairs()) {
    if (pairs->size() > kMaxSceneMaterialPairs) {
      return fail(fmt::format("{}: material_pairs: {} pairs, at most {} are accepted", source, pairs->size(),
                              kMaxSceneMaterialPairs));
    }
    result.material_pairs.reserve(pairs->size());
    for (flatbuffers::uoffset_t i = 0; i < pairs->size(); ++i) {
      SceneMaterialPair pair;
      std::string problem = convert_material_pair(*pairs->Get(i), &pair);
      // The same unordered pair twice would silently keep the last: say which one repeats.
      for (size_t j = 0; problem.empty() && j < result.material_pairs.size(); ++j) {
        const SceneMaterialPair& other = result.material_pairs[j];
        if (std::min(other.a, other.b) == std::min(pair.a, pair.b) && std::max(other.a, other.b) == std::max(pair.a, pair.b)) {
          problem = fmt::format("a, b: the pair ({}, {}) is already defined by material_pairs[{}]", pair.a, pair.b, j);
        }
      }
      if (!problem.empty()) {
        const size_t line = element_line(json, "material_pairs", i);
        const std::string where = line > 0 ? fmt::format("{}:{}", source, line) : std::string(source);
        return fail(fmt::format("{}: material_pairs[{}].{}", where, i, problem));
      }
      result.material_pairs.push_back(pair);
    }
  }
  if (const auto* joints = root->joints()) {
    if (joints->size() > kMaxSceneJoints) {
      return fail(fmt::format("{}: joints: {} joints, at most {} are accepted", source, joints->size(), kMaxSceneJoints));
    }
    // Bodies by name, for the joints: a name two bodies share cannot name a joint's body.
    std::map<std::string_view, int> by_name;
    for (size_t b = 0; b < result.body_names.size(); ++b) {
      const std::string& name = result.body_names[b];
      if (name.empty()) continue;
      const auto [it, added] = by_name.emplace(name, static_cast<int>(b));
      if (!added) it->second = -2;  // ambiguous
    }
    auto resolve = [&](const flatbuffers::String* name, const char* field, int* index) -> std::string {
      const auto it = by_name.find(name->string_view());
      if (it == by_name.end()) return fmt::format("{}: no body is named \"{}\"", field, escape_for_log(name->string_view()));
      if (it->second < 0) return fmt::format("{}: more than one body is named \"{}\"", field, escape_for_log(name->string_view()));
      *index = it->second;
      return {};
    };
    result.joints.reserve(joints->size());
    for (flatbuffers::uoffset_t i = 0; i < joints->size(); ++i) {
      const scene::Joint* joint = joints->Get(i);
      SceneJoint sj;
      std::string problem = convert_joint(*joint, &sj.desc);
      if (problem.empty()) problem = resolve(joint->body_a(), "body_a", &sj.body_a);
      if (problem.empty() && joint->body_b() != nullptr) problem = resolve(joint->body_b(), "body_b", &sj.body_b);
      if (problem.empty() && sj.body_a == sj.body_b) problem = "body_b: must differ from body_a";
      if (!problem.empty()) {
        const std::string label =
            joint->name() ? fmt::format(" (\"{}\")", escape_for_log(joint->name()->string_view())) : "";
        const size_t line = element_line(json, "joints", i);
        const std::string where = line > 0 ? fmt::format("{}:{}", source, line) : std::string(source);
        return fail(fmt::format("{}: joints[{}]{}.{}", where, i, label, problem));
      }
      if (joint->name()) sj.name = joint->name()->str();
      result.joints.push_back(std::move(sj));
    }
  }
  *scene = std::move(result);
  return true;
}

bool load_scene_file(const std::string& path, Scene* scene, std::string* error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    if (error) *error = fmt::format("{}: cannot open the scene file (check the path)", path);
    return false;
  }
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxSceneFileBytes) {
    if (error) *error = fmt::format("{}: not a readable regular file of at most {} bytes", path, kMaxSceneFileBytes);
    return false;
  }
  file.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  if (!file.read(text.data(), size)) {
    if (error) *error = fmt::format("{}: read error", path);
    return false;
  }
  return parse_scene_json(text, path, scene, error);
}

int find_body(const Scene& scene, std::string_view name) {
  for (size_t i = 0; i < scene.body_names.size(); ++i) {
    if (scene.body_names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::optional<physics::Shape> adopt_shape(physics::World& world, const physics::Shape& shape, std::string* why) {
  std::string reason;
  switch (shape.kind) {
    case physics::ShapeKind::Hull:
      if (shape.hull == nullptr) break;
      if (const physics::ConvexHull* hull = world.add_hull(*shape.hull, &reason)) return physics::make_hull(*hull);
      if (why) *why = "hull: " + reason;
      return std::nullopt;
    case physics::ShapeKind::Mesh:
      if (shape.mesh == nullptr) break;
      if (const physics::TriangleMesh* mesh = world.add_mesh(*shape.mesh, &reason)) return physics::make_mesh(*mesh);
      if (why) *why = "mesh: " + reason;
      return std::nullopt;
    case physics::ShapeKind::HeightField:
      if (shape.heightfield == nullptr) break;
      if (const physics::HeightField* field = world.add_heightfield(*shape.heightfield, &reason)) {
        return physics::make_heightfield(*field);
      }
      if (why) *why = "heightfield: " + reason;
      return std::nullopt;
    default: break;
  }
  return shape;
}

Scene make_demo_scene() {
  Scene scene;
  scene.name = "demo";
  auto add = [&scene](std::string name, const physics::BodyDesc& desc) {
    scene.bodies.push_back(desc);
    scene.body_names.push_back(std::move(name));
  };
  auto rotation = [](Vec3 unit_axis, float degrees) {
    return normalize(quat_from_axis_angle(unit_axis, degrees * (kPi / 180.0f)));
  };
  constexpr Vec3 kAxisX{1.0f, 0.0f, 0.0f};
  constexpr Vec3 kAxisZ{0.0f, 0.0f, 1.0f};

  physics::BodyDesc ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_plane();  // through the origin, normal +Y
  add("ground", ground);

  // Towers of unit boxes at z = -6, resting exactly on each other.
  physics::BodyDesc cube;
  cube.shape = physics::make_box({0.5f, 0.5f, 0.5f});
  struct Tower {
    const char* name;
    float x;
    int height;
  };
  constexpr Tower kTowers[] = {{"tower_a", -8.0f, 8}, {"tower_b", -5.0f, 6}, {"tower_c", -2.0f, 7}};
  for (const Tower& t : kTowers) {
    for (int k = 0; k < t.height; ++k) {
      cube.position = {t.x, 0.5f + static_cast<float>(k), -6.0f};
      add(fmt::format("{}/{}", t.name, k), cube);
    }
  }
  // A 4 kg ball thrown at tower_a from 6 m away: 10 m/s along -z, it drops 1.3 m on the way
  // (0.51 s) and strikes the fifth box, so the upper half of the tower topples.
  physics::BodyDesc wrecking_ball;
  wrecking_ball.shape = physics::make_sphere(0.4f);
  wrecking_ball.mass = 4.0f;
  wrecking_ball.position = {-8.0f, 5.5f, 0.0f};
  wrecking_ball.velocity = {0.0f, 0.0f, -10.0f};
  add("wrecking_ball", wrecking_ball);

  // A pyramid, base 6, 2 cm gaps between neighbours of a row so no two start overlapping.
  constexpr int kPyramidBase = 6;
  constexpr float kPyramidPitch = 1.02f;
  for (int row = 0; row < kPyramidBase; ++row) {
    for (int i = 0; i < kPyramidBase - row; ++i) {
      cube.position = {2.0f + (static_cast<float>(i) + 0.5f * static_cast<float>(row)) * kPyramidPitch,
                       0.5f + static_cast<float>(row), -6.0f};
      add(fmt::format("pyramid/{}/{}", row, i), cube);
    }
  }

  // Dominoes 1.2 m tall, 0.7 m apart along +x at z = 4: each falls into the next.
  constexpr int kDominoes = 12;
  constexpr float kDominoX0 = -6.0f;
  constexpr float kDominoPitch = 0.7f;
  physics::BodyDesc domino;
  domino.shape = physics::make_box({0.1f, 0.6f, 0.3f});
  domino.mass = 0.5f;
  for (int i = 0; i < kDominoes; ++i) {
    domino.position = {kDominoX0 + kDominoPitch * static_cast<float>(i), 0.6f, 4.0f};
    add(fmt::format("domino/{}", i), domino);
  }
  // Thrown at 4 m/s from 0.9 m before the first domino: it strikes it 0.9 m up (0.3 m above
  // its centre of mass) after 0.23 s, tipping it towards +x.
  physics::BodyDesc domino_ball;
  domino_ball.shape = physics::make_sphere(0.2f);
  domino_ball.mass = 0.5f;
  domino_ball.position = {kDominoX0 - 1.2f, 1.15f, 4.0f};
  domino_ball.velocity = {4.0f, 0.0f, 0.0f};
  add("domino_ball", domino_ball);
  // The last domino falls into this zone: a static sensor, so only Begin/End events show it.
  physics::BodyDesc finish_zone;
  finish_zone.kind = physics::BodyKind::Static;
  finish_zone.shape = physics::make_box({0.4f, 0.3f, 0.6f});
  finish_zone.position = {kDominoX0 + kDominoPitch * static_cast<float>(kDominoes - 1) + 0.9f, 0.3f, 4.0f};
  finish_zone.sensor = true;
  add("finish_zone", finish_zone);

  // A ramp tilted 20 degrees about +z (its high end towards +x), its low edge on the ground.
  constexpr float kRampDegrees = 20.0f;
  const float ramp_sin = 0.34202014f;  // sin 20°, cos 20°
  const float ramp_cos = 0.93969262f;
  const Vec3 ramp_half{3.0f, 0.25f, 1.5f};
  physics::BodyDesc ramp;
  ramp.kind = physics::BodyKind::Static;
  ramp.shape = physics::make_box(ramp_half);
  ramp.orientation = rotation(kAxisZ, kRampDegrees);
  ramp.position = {10.0f, ramp_half.x * ramp_sin + ramp_half.y * ramp_cos, 4.0f};
  add("ramp", ramp);
  // Two 0.6 m boxes on the ramp, aligned with it, 5 mm above its surface. With the ramp's 0.5,
  // friction 1.0 mixes to mu = 0.71 > tan 20° = 0.36 (it stays), 0.05 to mu = 0.16 (it slides).
  const float up = ramp_half.y + 0.3f + 0.005f;  // along the ramp's normal
  const float along = 0.5f;                      // along its slope, from the centre
  const Vec3 on_ramp = ramp.position + Vec3{along * ramp_cos - up * ramp_sin, along * ramp_sin + up * ramp_cos, 0.0f};
  physics::BodyDesc ramp_box;
  ramp_box.shape = physics::make_box({0.3f, 0.3f, 0.3f});
  ramp_box.orientation = ramp.orientation;
  ramp_box.friction = 1.0f;
  ramp_box.position = on_ramp + Vec3{0.0f, 0.0f, -0.7f};
  add("ramp_box_sticky", ramp_box);
  ramp_box.friction = 0.05f;
  ramp_box.position = on_ramp + Vec3{0.0f, 0.0f, 0.7f};
  add("ramp_box_slippery", ramp_box);

  // Capsules (radius 0.25 m, 1.5 m long): dropped lying, tilted, nearly upright (it topples),
  // and one lying on the ground spinning about the vertical.
  physics::BodyDesc capsule;
  capsule.shape = physics::make_capsule(0.25f, 0.5f);
  capsule.orientation = rotation(kAxisZ, 90.0f);
  capsule.position = {-4.5f, 1.5f, 1.0f};
  add("capsule_lying", capsule);
  capsule.orientation = rotation(kAxisX, 35.0f);
  capsule.position = {-2.5f, 2.5f, 1.0f};
  add("capsule_tilted", capsule);
  capsule.orientation = rotation(kAxisZ, 8.0f);
  capsule.position = {0.0f, 0.8f, 1.0f};
  add("capsule_upright", capsule);
  capsule.orientation = rotation(kAxisZ, 90.0f);
  capsule.position = {2.0f, 0.26f, 1.0f};
  capsule.angular_velocity = {0.0f, 3.0f, 0.0f};
  add("capsule_spinning", capsule);

  // Barrels (cylinders, radius 0.3 m, 0.9 m tall, 20 kg) at z = -3: two stacked standing, one
  // lying, one dropped tilted 30 degrees that lands on its rim and settles.
  physics::BodyDesc barrel;
  barrel.shape = physics::make_cylinder(0.3f, 0.45f);
  barrel.mass = 20.0f;
  barrel.position = {-4.0f, 0.45f, -3.0f};
  add("barrel/0", barrel);
  barrel.position = {-4.0f, 1.351f, -3.0f};
  add("barrel/1", barrel);
  barrel.orientation = rotation(kAxisX, 90.0f);
  barrel.position = {-2.5f, 0.3f, -3.0f};
  add("barrel/2", barrel);
  barrel.orientation = rotation(kAxisZ, 30.0f);
  barrel.position = {-1.0f, 1.2f, -3.0f};
  add("barrel/3", barrel);

  // Spheres dropping onto open ground; every other one bouncy.
  constexpr int kSpheres = 6;
  for (int i = 0; i < kSpheres; ++i) {
    physics::BodyDesc ball;
    ball.shape = physics::make_sphere(0.3f + 0.05f * static_cast<float>(i % 3));
    const float k = static_cast<float>(i);
    ball.position = {5.0f + 1.2f * k, 3.0f + 0.5f * k, -1.0f + 0.4f * static_cast<float>(i % 2)};
    ball.mass = 0.5f + 0.25f * static_cast<float>(i % 3);
    ball.restitution = (i % 2 == 0) ? 0.8f : 0.2f;
    add(fmt::format("sphere/{}", i), ball);
  }
  add_joint_showcase(&scene);
  add_level_showcase(&scene);
  return scene;
}

bool load_scene(const std::string& spec, Scene* scene, std::string* error) {
  if (spec == "demo") {
    *scene = make_demo_scene();
    return true;
  }
  return load_scene_file(spec, scene, error);
}

}  // namespace impulse::server
