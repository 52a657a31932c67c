// Plain data types of the physics world: body kinds, shapes, descriptions, contacts, errors.
#pragma once

#include <cstdint>

#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse::physics {

enum class BodyKind : uint8_t {
  Dynamic = 0,    ///< moved by gravity, forces and collisions
  Static = 1,     ///< never moves; infinite mass
  Kinematic = 2,  ///< moves at its set velocity, pushes dynamic bodies, ignores forces; infinite mass
};

/// Shape kinds index the narrowphase dispatch table. New kinds (oriented box, capsule, plane)
/// are appended before Count; nothing else in the step switches on them.
enum class ShapeKind : uint8_t {
  Sphere = 0,
  Box = 1,  ///< axis-aligned box (rotation arrives with the rigid-body issue)
  Count,
};

/// Collision shape in the body's local frame, centred on the body's position.
struct Shape {
  ShapeKind kind = ShapeKind::Sphere;
  float radius = 0.5f;           ///< sphere radius [m]
  Vec3 half_extents{0.5f, 0.5f, 0.5f};  ///< box half extents [m]
};

constexpr Shape make_sphere(float radius) { return Shape{ShapeKind::Sphere, radius, {radius, radius, radius}}; }
constexpr Shape make_box(Vec3 half_extents) { return Shape{ShapeKind::Box, 0.0f, half_extents}; }

/// Everything needed to create an object. Validated by World::create_object.
struct BodyDesc {
  BodyKind kind = BodyKind::Dynamic;
  Shape shape;
  Vec3 position;             ///< world frame [m]
  Vec3 velocity;             ///< world frame [m/s]; ignored for static bodies
  float mass = 1.0f;         ///< [kg], > 0; dynamic only (static and kinematic have infinite mass)
  float restitution = 0.0f;  ///< [0, 1]; mixed with max(e_a, e_b)
  /// Coulomb friction coefficient, >= 0; mixed with sqrt(mu_a * mu_b), so 0 on either body makes
  /// the contact frictionless. Linear-only bodies slide (they cannot roll), spheres included.
  float friction = 0.5f;
  float linear_damping = 0.0f;  ///< [1/s], >= 0: v *= 1 / (1 + dt * damping) each step
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
  Vec3 position;    ///< [m]
  Vec3 velocity;    ///< [m/s]
  float mass = 0;   ///< [kg]; 0 for static and kinematic (infinite)
  float restitution = 0;
  float friction = 0;
  bool sleeping = false;
};

/// One contact between two bodies after a step. a < b (by ObjectID order).
struct Contact {
  ObjectID a;
  ObjectID b;
  Vec3 point;   ///< world frame [m], midway between the surfaces
  Vec3 normal;  ///< world frame, unit, pointing from a towards b
  float depth;  ///< penetration [m], >= 0
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

}  // namespace impulse::physics
