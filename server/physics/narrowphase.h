// Narrowphase: exact contact generation per shape pair, dispatched through a table of free
// functions indexed by ShapeKind (no virtual calls). Closest-point tests follow Ericson,
// "Real-Time Collision Detection", 2005, §4.2 (AABBs), §5.1.3 (point-AABB), §5.2.5 (sphere-AABB).
#pragma once

#include "server/physics/types.h"

namespace impulse::physics {

/// The contact between two shapes: one point, the normal from A towards B, the depth.
/// Convention: moving B by +normal * depth (or A by -normal * depth) separates the shapes.
struct ContactPoint {
  Vec3 point;   ///< world frame [m], midway between the two surfaces
  Vec3 normal;  ///< world frame, unit, from A towards B (always defined, even when concentric)
  float depth = 0;  ///< penetration [m] >= 0; 0 when exactly touching
};

/// The world-frame AABB of a shape at `position` [m]: min = position - extent, max = position + extent,
/// where extent is the radius on every axis (sphere) or the half extents (box).
Aabb compute_aabb(const Shape& shape, Vec3 position);

/// Distance [m] below which a centre-to-centre direction is treated as undefined.
inline constexpr float kNarrowphaseEpsilon = 1.0e-6f;

// Each collide_* returns true and fills `out` when the shapes overlap or touch (distance <= 0);
// otherwise returns false and leaves `out` untouched. Shapes are in their local frame, centred
// on the world positions pa, pb [m]. The caller passes shapes of the kinds named by the
// function (use collide() to dispatch).
//
// Degenerate geometry has a documented, deterministic normal so the solver never sees NaN:
//  - a direction shorter than kNarrowphaseEpsilon (concentric spheres) falls back to +Y;
//  - ties between axes of equal penetration prefer Y, then X, then Z;
//  - centres equal along the chosen axis give the +axis direction.

/// Sphere A vs sphere B. normal = (pb - pa) / |pb - pa|, depth = ra + rb - |pb - pa|.
bool collide_sphere_sphere(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);

/// Sphere A vs axis-aligned box B (Ericson §5.2.5). With the sphere centre outside the box the
/// normal points from the centre to its closest point on the box. With the centre inside (or on
/// the surface) the sphere is pushed out through the face of least penetration:
/// depth = radius + distance to that face, normal = minus that face's outward normal.
bool collide_sphere_box(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);

/// Axis-aligned box A vs axis-aligned box B (separating axis test on the three world axes,
/// Ericson §4.2). On each axis the translation that separates the boxes is min(a.max - b.min,
/// b.max - a.min); the axis with the smallest one is the normal, its sign from the centre
/// difference, and that translation is the depth (it equals the overlap width unless one box
/// spans the other on that axis). Point: on the normal axis the midpoint between the two
/// touching faces, on the other axes the centre of the overlap region.
bool collide_box_box(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);

/// Dispatches on (a.kind, b.kind) through the table; a pair stored as (B, A) is swapped and its
/// normal flipped so the result always points from A towards B. Returns false for a kind outside
/// [0, ShapeKind::Count). Adding a shape kind means adding functions and table entries only.
bool collide(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out);

}  // namespace impulse::physics
