// Scene loading: flatbuffers::Parser checks the JSON against the embedded scene.fbs (syntax,
// unknown fields, types, required fields), the Verifier checks the resulting buffer, then each
// body is range-checked with the wire protocol's bounds.
#include "server/app/scene.h"

#include <cmath>
#include <fstream>
#include <iterator>

#include <flatbuffers/idl.h>
#include <fmt/format.h>

#include "impulse/schemas/scene_generated.h"
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

// Range checks one body and converts it. Returns an empty string or "field: reason".
std::string convert_body(const scene::Body& b, physics::BodyDesc* out) {
  if (b.kind() < scene::BodyKind::MIN || b.kind() > scene::BodyKind::MAX) {
    return fmt::format("kind: unknown body kind {} (Dynamic, Static or Kinematic)", static_cast<int>(b.kind()));
  }
  if (b.shape() < scene::ShapeKind::MIN || b.shape() > scene::ShapeKind::MAX) {
    return fmt::format("shape: unknown shape kind {} (Sphere or Box)", static_cast<int>(b.shape()));
  }
  const char* axis = "";
  // dims and position are (required) in the schema, so the parser guarantees they exist; the
  // null checks keep a hand-built buffer from crashing us.
  if (b.dims() == nullptr) return "dims: required";
  if (b.position() == nullptr) return "position: required";
  const Vec3 dims = to_vec3(*b.dims());
  const bool sphere = b.shape() == scene::ShapeKind::Sphere;
  if (sphere) {
    if (!(dims.x > 0.0f && dims.x <= wire::kMaxExtent)) return "dims.x: sphere radius must be in (0, 1000] m";
    if (!std::isfinite(dims.y) || !std::isfinite(dims.z)) return "dims: must be finite";
  } else {
    if (!(dims.x > 0.0f && dims.x <= wire::kMaxExtent)) return "dims.x: box half extent must be in (0, 1000] m";
    if (!(dims.y > 0.0f && dims.y <= wire::kMaxExtent)) return "dims.y: box half extent must be in (0, 1000] m";
    if (!(dims.z > 0.0f && dims.z <= wire::kMaxExtent)) return "dims.z: box half extent must be in (0, 1000] m";
  }
  const Vec3 position = to_vec3(*b.position());
  if (!check_components(position, wire::kMaxCoordinate, &axis)) {
    return fmt::format("position.{}: must be finite and in [-1e5, 1e5] m", axis);
  }
  const Vec3 velocity = b.velocity() ? to_vec3(*b.velocity()) : Vec3{};
  if (!check_components(velocity, wire::kMaxSpeed, &axis)) {
    return fmt::format("velocity.{}: must be finite and in [-1e4, 1e4] m/s", axis);
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

  out->kind = kind;
  out->shape = sphere ? physics::make_sphere(dims.x) : physics::make_box(dims);
  out->position = position;
  out->velocity = velocity;
  out->mass = b.mass();
  out->restitution = b.restitution();
  out->friction = b.friction();
  return {};
}

}  // namespace

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
    for (flatbuffers::uoffset_t i = 0; i < bodies->size(); ++i) {
      const scene::Body* body = bodies->Get(i);
      physics::BodyDesc desc;
      if (std::string problem = convert_body(*body, &desc); !problem.empty()) {
        const std::string label = body->name() ? fmt::format(" (\"{}\")", body->name()->string_view()) : "";
        return fail(fmt::format("{}: bodies[{}]{}.{}", source, i, label, problem));
      }
      result.bodies.push_back(desc);
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

Scene make_demo_scene() {
  Scene scene;
  scene.name = "demo";

  physics::BodyDesc ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_box({20.0f, 0.5f, 20.0f});
  ground.position = {0.0f, -0.5f, 0.0f};  // top face at y = 0
  scene.bodies.push_back(ground);

  // Four stacks of six unit boxes resting on the ground, in touching contact.
  constexpr int kStacks = 4;
  constexpr int kStackHeight = 6;
  for (int s = 0; s < kStacks; ++s) {
    for (int k = 0; k < kStackHeight; ++k) {
      physics::BodyDesc box;
      box.shape = physics::make_box({0.5f, 0.5f, 0.5f});
      box.position = {-6.0f + 4.0f * static_cast<float>(s), 0.5f + static_cast<float>(k), -3.0f};
      box.mass = 1.0f;
      scene.bodies.push_back(box);
    }
  }

  // 14 spheres dropping in: some onto the stacks, some onto open ground; every third is bouncy.
  constexpr int kSpheres = 14;
  for (int i = 0; i < kSpheres; ++i) {
    physics::BodyDesc ball;
    const float radius = 0.3f + 0.05f * static_cast<float>(i % 4);
    ball.shape = physics::make_sphere(radius);
    const float x = -7.0f + 1.0f * static_cast<float>(i);
    const float z = (i % 2 == 0) ? -3.0f : 2.0f;
    ball.position = {x, 8.0f + 0.75f * static_cast<float>(i % 5), z};
    ball.mass = 0.5f + 0.25f * static_cast<float>(i % 3);
    ball.restitution = (i % 3 == 0) ? 0.8f : 0.2f;
    scene.bodies.push_back(ball);
  }
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
