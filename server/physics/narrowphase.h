// Narrowphase: exact contact generation per shape pair, dispatched through a table of free
// functions indexed by ShapeKind (no virtual calls). Closest-point tests follow Ericson,
// "Real-Time Collision Detection", 2005, §4.2 (AABBs), §5.1.3 (point-AABB), §5.2.5 (sphere-AABB).
#pragma once

#include "server/physics/types.h"

namespace impulse::physics {

/// The contact between two shapes: one point, the normal from A towards B, the depth.
struct ContactPoint {
  Vec3 point;   ///< world frame [m], midway between the two surfaces
  Vec3 normal;  ///< world frame, unit, from A towards B (always defined, even when concentric)
  float depth = 0;  ///< penetration [m] >= 0; 0 when exactly touching
};

/// The world-frame AABB of a shape at `position` [m]: min = position - extent, max = position + extent.
Aabb compute_aabb(const Shape& shape, Vec3 position);

/// Each returns true and fills `out` when the shapes overlap or touch (distance <= 0).
bool collide_sphere_sphere(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);
bool collide_sphere_box(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);
bool collide_box_box(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);

/// Dispatches on (a.kind, b.kind) through the table; a pair stored as (B, A) is swapped and its
/// normal flipped so the result always points from A towards B.
bool collide(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);

}  // namespace impulse::physics
