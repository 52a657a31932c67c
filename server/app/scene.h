// Scene loading: JSON validated against schemas/scene.fbs by FlatBuffers' own parser, then range
// checks per body with the same bounds as the wire protocol; plus the built-in demo scene.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/physics/convex_hull.h"
#include "server/physics/heightfield.h"
#include "server/physics/triangle_mesh.h"
#include "server/physics/joint.h"
#include "server/physics/types.h"
#include "shared/math.h"

namespace impulse::physics {
class World;
}  // namespace impulse::physics

namespace impulse::server {

/// One entry of a scene's material-pair table (World::set_material_pair).
struct SceneMaterialPair {
  uint16_t a = 0;             ///< material ids, either order
  uint16_t b = 0;
  float friction = 0.5f;      ///< [0, 10]
  float restitution = 0.0f;   ///< [0, 1]
};

/// A joint of a scene: its description (JointDesc's anchors and axis in the world frame at the
/// bodies' scene poses; body_a and body_b left null) and its bodies as indices into
/// Scene::bodies (body_b -1: the static world).
struct SceneJoint {
  physics::JointDesc desc;
  int body_a = -1;
  int body_b = -1;
  std::string name;  ///< "" when unnamed; for logs
};

/// A scene ready to be loaded into a World. Plain data; no physics state.
struct Scene {
  std::string name;
  Vec3 gravity{0.0f, -9.81f, 0.0f};        ///< world frame [m/s^2]
  std::vector<physics::BodyDesc> bodies;   ///< in file order; each passed the range checks
  /// The hulls that hull bodies' shapes point at (ServerCore::add_bodies adds each to its World).
  std::vector<std::shared_ptr<const physics::ConvexHull>> hulls;
  /// The meshes and heightfields that such bodies' shapes point at (likewise added by add_bodies).
  std::vector<std::shared_ptr<const physics::TriangleMesh>> meshes;
  std::vector<std::shared_ptr<const physics::HeightField>> heightfields;
  /// bodies[i]'s name ("" when unnamed); same length as `bodies`. For logs and tests only.
  std::vector<std::string> body_names;
  /// The material-pair table, in file order; each passed the range checks, no pair twice.
  std::vector<SceneMaterialPair> material_pairs;
  /// Joints, in file order; each passed the range checks and names existing bodies.
  std::vector<SceneJoint> joints;
};

/// `text` with backslash, double quote and control characters (< 0x20, 0x7f) escaped (\\, \",
/// \xNN), for a log line: a name from a file or a recording must not reach the log raw (a
/// newline or an escape sequence there forges lines or drives the terminal).
std::string escape_for_log(std::string_view text);

/// The index in scene.bodies of the body named `name`, or -1 when none is. O(bodies).
int find_body(const Scene& scene, std::string_view name);

/// Largest scene file accepted [bytes]; bigger files are refused before parsing.
inline constexpr size_t kMaxSceneFileBytes = 64u << 20;
/// Most material pairs a scene may define (a bound on hostile files; 4096 is 64 materials
/// fully paired).
inline constexpr size_t kMaxSceneMaterialPairs = 4096;
/// Most joints a scene may define (a bound on hostile files; a 100 x 100 grid of point joints
/// to its neighbours is 19,800).
inline constexpr size_t kMaxSceneJoints = 65536;
/// Largest |gravity component| accepted [m/s^2].
inline constexpr float kMaxGravity = 1000.0f;

/// Parses a JSON scene. `source` names it in errors (a file path, or "demo").
/// On failure returns false and sets *error to a message naming the source, and either the
/// parser's position and reason ("x.json:3: 12: error: unknown field: foo") or the body and field
/// ("x.json:7: bodies[3].mass: must be in (0, 1e6] kg for a dynamic body", the line where that
/// body's object starts; "x.json:12: material_pairs[1].friction: ..." for a material pair).
/// *scene is then unchanged.
bool parse_scene_json(std::string_view json, std::string_view source, Scene* scene, std::string* error);

/// Reads and parses a scene file (see parse_scene_json). File errors name the path and the cause.
bool load_scene_file(const std::string& path, Scene* scene, std::string* error);

/// Appends a named body to `scene` (the demo's builders); returns its index in scene->bodies.
inline int add_named_body(Scene* scene, std::string name, const physics::BodyDesc& desc) {
  scene->bodies.push_back(desc);
  scene->body_names.push_back(std::move(name));
  return static_cast<int>(scene->bodies.size()) - 1;
}

/// A scene body's shape made `world`'s own: a hull, mesh or heightfield from a Scene's tables is
/// added to the world (World::add_hull, add_mesh, add_heightfield) and the returned shape points
/// at the world's copy, valid for the world's lifetime; any other shape comes back as it is.
/// nullopt, with *why ("hull: reason"), when the world refuses the data.
std::optional<physics::Shape> adopt_shape(physics::World& world, const physics::Shape& shape, std::string* why);

/// The demo's joint showcase (scene_demo_joints.cpp), appended to `scene` by make_demo_scene:
/// a hinged door with limits, a 20-link chain with a wrecking ball, a plank bridge, a car on four
/// motor-driven hinge wheels ("car/wheel/<i>": joints "car/axle/<i>"), a 15-body ragdoll on six
/// steps ("ragdoll/...", "stairs/<k>") and a sign on a breakable hook ("sign/hook").
void add_joint_showcase(Scene* scene);

/// The demo's level geometry (scene_demo_level.cpp), appended by make_demo_scene: a heightfield
/// valley at x in [16, 32] ("valley") with three rocks, convex hulls, rolling into it ("rock/<i>"),
/// and a triangle-mesh building at x in [-24, -16] ("building": a platform reached by a ramp and
/// stairs) with a crate, a barrel and a ball on it ("building/crate", "building/barrel",
/// "building/ball").
void add_level_showcase(Scene* scene);

/// The built-in demo (`make run`), built in code so the server needs no source tree at run time.
/// Deterministic, 146 bodies and 52 joints, every body named ("tower_a/3" is the 4th box from the
/// bottom):
///  - a static ground plane through the origin (normal +Y);
///  - towers of unit boxes, 8, 6 and 7 high ("tower_a" .. "tower_c"); a heavy ball ("wrecking_ball")
///    flies into the upper half of tower_a and topples it in the first second;
///  - a 21-box pyramid (base 6, "pyramid/<row>/<i>");
///  - 12 dominoes ("domino/0" ..) that a thrown ball ("domino_ball") tips over in sequence, the
///    last one falling into a static sensor zone ("finish_zone", events only);
///  - a static ramp tilted 20 degrees ("ramp") with a high-friction box that stays put
///    ("ramp_box_sticky", tan 20° = 0.36 < mu) and a low-friction one that slides off
///    ("ramp_box_slippery");
///  - capsules dropped lying, tilted and nearly upright, barrels (cylinders) stacked, lying and
///    dropped tilted ("barrel/0" .. "barrel/3"), and spheres, some bouncy;
///  - the joint showcase and the level showcase (below).
Scene make_demo_scene();

/// "demo" gives make_demo_scene(); anything else is a file path for load_scene_file().
bool load_scene(const std::string& spec, Scene* scene, std::string* error);

}  // namespace impulse::server
