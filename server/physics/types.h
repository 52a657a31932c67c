// Plain data types of the physics world: body kinds, shapes, descriptions, contacts, errors.
#pragma once

#include <cstdint>

#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse::physics {

struct ConvexHull;
struct TriangleMesh;
struct HeightField;

enum class BodyKind : uint8_t {
  Dynamic = 0,    ///< moved by gravity, forces and collisions
  Static = 1,     ///< never moves; infinite mass
  Kinematic = 2,  ///< moves at its set velocity, pushes dynamic bodies, ignores forces; infinite mass
};

/// Shape kinds index the narrowphase dispatch table; nothing else in the step switches on them.
enum class ShapeKind : uint8_t {
  Sphere = 0,   ///< radius
  Box = 1,      ///< oriented box: half_extents along the body's local axes
  Capsule = 2,  ///< segment from local (0, -half_height, 0) to (0, +half_height, 0), swept by radius
  Plane = 3,    ///< half-space below the body's local plane y = 0 (outward normal local +Y); static only
  Hull = 4,     ///< convex hull (Shape::hull), in its principal frame: the body's position is its centre of mass
  Mesh = 5,     ///< static triangle mesh (Shape::mesh) in the body's frame; static bodies only
  HeightField = 6,  ///< static heightfield (Shape::heightfield) in the body's frame; static bodies only
  Cylinder = 7,  ///< solid cylinder along local Y from -half_height to +half_height, of radius `radius`
  Count,
};

/// Collision shape in the body's local frame, centred on the body's position (its centre of mass).
/// Only the fields of its kind are meaningful; make_* fill the others consistently.
struct Shape {
  ShapeKind kind = ShapeKind::Sphere;
  float radius = 0.5f;                  ///< sphere, capsule and cylinder radius [m]
  Vec3 half_extents{0.5f, 0.5f, 0.5f};  ///< box half extents [m], local axes
  float half_height = 0.0f;             ///< capsule: half the length of the core segment; cylinder: half its height [m]
  /// The shape's data, for the kinds that have any, owned by the World that returned it
  /// (World::add_hull, add_mesh, add_heightfield) and valid for that World's lifetime; only the
  /// member of the shape's kind is meaningful. half_extents is then half the data's bounding box
  /// size (for display).
  union {
    const ConvexHull* hull = nullptr;  ///< Hull
    const TriangleMesh* mesh;          ///< Mesh
    const HeightField* heightfield;    ///< HeightField
  };
  /// Hull, mesh or heightfield: its index in the World's table of that kind (what saved states
  /// and hashes hold).
  uint32_t data_id = 0;
};

constexpr Shape make_sphere(float radius) {
  return Shape{ShapeKind::Sphere, radius, {radius, radius, radius}, 0.0f, {nullptr}, 0};
}
constexpr Shape make_box(Vec3 half_extents) { return Shape{ShapeKind::Box, 0.0f, half_extents, 0.0f, {nullptr}, 0}; }
/// Capsule along local Y: total height 2 (half_height + radius).
constexpr Shape make_capsule(float radius, float half_height) {
  return Shape{ShapeKind::Capsule, radius, {radius, half_height + radius, radius}, half_height, {nullptr}, 0};
}
/// Solid cylinder along local Y: height 2 half_height, flat caps of radius `radius`.
constexpr Shape make_cylinder(float radius, float half_height) {
  return Shape{ShapeKind::Cylinder, radius, {radius, half_height, radius}, half_height, {nullptr}, 0};
}
/// Infinite plane through the body position, outward normal = the body's local +Y axis.
constexpr Shape make_plane() { return Shape{ShapeKind::Plane, 0.0f, {0.0f, 0.0f, 0.0f}, 0.0f, {nullptr}, 0}; }
/// A convex hull shape; `hull` must come from World::add_hull of the World the body goes into.
Shape make_hull(const ConvexHull& hull);
/// A static triangle mesh shape; `mesh` must come from World::add_mesh of the World the body goes
/// into, and the body must be static.
Shape make_mesh(const TriangleMesh& mesh);
/// A static heightfield shape; `field` must come from World::add_heightfield of the World the
/// body goes into, and the body must be static.
Shape make_heightfield(const HeightField& field);
/// Whether a shape kind is a static surface of triangles (a mesh or a heightfield).
constexpr bool is_triangle_surface(ShapeKind k) { return k == ShapeKind::Mesh || k == ShapeKind::HeightField; }

/// A rigid transform from a body's local frame to the world frame: x_world = position + rotate(rotation, x_local).
struct Transform {
  Vec3 position;  ///< [m], world frame
  Quat rotation;  ///< unit quaternion
};

/// Everything needed to create an object. Validated by World::create_object.
/// Collision filter, with Box2D's b2Filter semantics (box2d v3, include/box2d/types.h b2Filter and
/// src/shape.h b2ShouldShapesCollide). Two bodies touch (contact or sensor event) iff
/// should_collide(a, b): when both have the same non-zero group, a positive group always touches
/// and a negative one never does; otherwise each body's category must be in the other's mask.
/// Bits are the application's own categories (e.g. 1 = world, 2 = player, 4 = debris).
/// The defaults (category 1, every mask bit, group 0) touch every other default body.
struct Filter {
  uint32_t category = 1;     ///< the categories this body belongs to (usually one bit)
  uint32_t mask = ~0u;       ///< the categories this body touches
  int32_t group = 0;         ///< 0 = none; same positive group: always; same negative: never
  bool operator==(const Filter&) const = default;
};

/// The collision rule (our own code after Box2D's b2ShouldShapesCollide). Symmetric.
constexpr bool should_collide(const Filter& a, const Filter& b) {
  if (a.group == b.group && a.group != 0) return a.group > 0;
  return (a.category & b.mask) != 0 && (b.category & a.mask) != 0;
}

/// Filter of a ray or overlap query (Box2D's b2QueryFilter): a body is reported iff
/// (body.category & query.mask) != 0 and (query.category & body.mask) != 0. Groups do not apply.
struct QueryFilter {
  uint32_t category = 1;  ///< what the query "is", tested against each body's mask
  uint32_t mask = ~0u;    ///< the categories the query reports
};

constexpr bool query_accepts(const QueryFilter& q, const Filter& body) {
  return (body.category & q.mask) != 0 && (q.category & body.mask) != 0;
}

struct BodyDesc {
  BodyKind kind = BodyKind::Dynamic;
  Shape shape;
  Vec3 position;             ///< centre of mass, world frame [m]
  Quat orientation;          ///< local to world; normalised on creation (must have |q| near 1)
  Vec3 velocity;             ///< world frame [m/s]; ignored for static bodies
  Vec3 angular_velocity;     ///< world frame [rad/s]; ignored for static bodies
  float mass = 1.0f;         ///< [kg], > 0; dynamic only (static and kinematic have infinite mass)
  /// Coefficient of restitution in [0, 1]. Mixed per WorldSettings::restitution_mix (default max).
  float restitution = 0.0f;
  /// Coulomb friction coefficient, >= 0. Mixed per WorldSettings::friction_mix (default geometric
  /// mean sqrt(mu_a mu_b), so 0 on either body makes the contact frictionless).
  float friction = 0.5f;
  float linear_damping = 0.0f;   ///< [1/s], >= 0: v *= 1 / (1 + dt * damping) each step
  float angular_damping = 0.05f; ///< [1/s], >= 0: w *= 1 / (1 + dt * damping) each step
  /// Material id for the world's material-pair table (World::set_material_pair); 0 = default.
  uint16_t material = 0;
  /// A sensor reports Begin/End contact events but gets and gives no contact response.
  bool sensor = false;
  /// Dynamic and kinematic bodies: start asleep where they are, with zero velocities (velocity
  /// and angular_velocity are ignored). It wakes as any sleeping body does: touched by an awake
  /// body or a moving kinematic one, or pushed by a command. Static bodies ignore it.
  bool asleep = false;
  /// Which bodies this one touches (contacts and sensor events) and which filtered queries see it.
  Filter filter;
  /// Dynamic bodies: continuous collision against dynamic and kinematic bodies too (Box2D v3's
  /// bullets, Jolt's LinearCast motion quality). Every fast dynamic body is swept against static
  /// bodies anyway (World::sweep_fast_bodies); a bullet is also swept, after the other bodies
  /// have moved, against non-bullet dynamic and kinematic bodies: at most 64 bullets a step (in
  /// awake-list order), so the cost of many bullets stays bounded; the rest are swept against
  /// static and sleeping bodies only that step. Ignored for other kinds.
  bool bullet = false;
};

/// Result codes of world operations. A failed operation leaves the world unchanged.
enum class Error : uint8_t {
  Ok = 0,
  StaleId,          ///< null, out of range, or destroyed id
  NotDynamic,       ///< forces and impulses act on dynamic bodies only
  InvalidArgument,  ///< a value is not finite or out of its documented range
  WorldFull,        ///< WorldSettings::max_objects reached
};

const char* to_string(Error e);

/// Read-only copy of one object's state.
struct BodyState {
  ObjectID id;
  BodyKind kind = BodyKind::Dynamic;
  Shape shape;
  Vec3 position;          ///< centre of mass [m], world frame
  Quat orientation;       ///< local to world
  Vec3 velocity;          ///< [m/s], world frame
  Vec3 angular_velocity;  ///< [rad/s], world frame
  float mass = 0;         ///< [kg]; 0 for static and kinematic (infinite)
  float restitution = 0;
  float friction = 0;
  uint16_t material = 0;
  bool sensor = false;
  bool sleeping = false;
  Filter filter;
  bool bullet = false;  ///< BodyDesc::bullet
};

/// One contact between two bodies after a step. a < b (by ObjectID order).
struct Contact {
  ObjectID a;
  ObjectID b;
  Vec3 point;   ///< world frame [m]: the deepest manifold point, midway between the surfaces
  Vec3 normal;  ///< world frame, unit, pointing from a towards b
  /// Largest penetration of the manifold [m]. Contacts are kept within the speculative margin
  /// (WorldSettings::speculative_margin, grown per pair by its approach within the step), so a
  /// negative value is a gap: down to -margin, or further for a pair closing fast enough to
  /// touch within the next step.
  float depth;
};

enum class ContactEventType : uint8_t { Begin = 0, End = 1 };

/// A pair started or stopped touching during the last step. a < b (by ObjectID order).
struct ContactEvent {
  ContactEventType type;
  ObjectID a;
  ObjectID b;
  Vec3 point;   ///< world frame [m]; for End, the last known contact point
  Vec3 normal;  ///< from a towards b
};

/// One raycast hit (World::raycast_closest, World::raycast_all).
struct RayHit {
  ObjectID id;
  Vec3 point;      ///< world frame [m] on the shape's surface
  Vec3 normal;     ///< world frame, unit, the surface's outward normal at `point`
  float fraction;  ///< point = origin + fraction * translation, in [0, 1]
};

}  // namespace impulse::physics
