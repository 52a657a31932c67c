// Segment casts against single shapes in closed form, dispatched through a table of free
// functions indexed by ShapeKind (no virtual calls). Sphere: the quadratic in the numerically
// robust form of Haines et al., "Precision Improvements for Ray/Sphere Intersection", Ray Tracing
// Gems, 2019, ch. 7; oriented box: the slab test in the box frame (Kay and Kajiya, "Ray Tracing
// Complex Scenes", SIGGRAPH 1986; Ericson, "Real-Time Collision Detection", 2005, §5.3.3);
// capsule: the infinite cylinder's side clipped to the core segment plus the two end spheres
// (Ericson §5.3.7 decomposes the capsule the same way); plane: one division.
#pragma once

#include "server/physics/types.h"

namespace impulse::physics {

/// Where a segment first enters a shape.
struct ShapeRayHit {
  Vec3 point;          ///< world frame [m]: origin + fraction * translation
  Vec3 normal;         ///< world frame, unit: the surface's outward normal at `point`
  float fraction = 0;  ///< in [0, max_fraction]
};

// Every raycast_* function below casts the segment origin + t * translation, t in
// [0, max_fraction], against the solid shape placed by `transform` (world frame [m]) and
// returns true with the first point of the segment inside the closed solid in `out`, or false
// (out unchanged). Conventions, shared by all kinds:
//  - Start inside: an origin inside the solid or on its surface is a hit at fraction 0, point
//    = origin, normal = -translation / |translation| (there is no entering surface; the normal
//    opposes the motion, as World::raycast_closest promises). This is Jolt's default
//    (RayCastSettings::mTreatConvexAsSolid = true).
//  - back_faces = true treats the shape as a hollow shell whose back faces are hit: an origin
//    inside (or on the surface) reports where the segment exits, with the outward normal there
//    (which points along the ray), or no hit when the segment ends inside. Origins outside are
//    unchanged. This is Jolt's mTreatConvexAsSolid = false with mBackFaceModeConvex =
//    EBackFaceMode::CollideWithBackFaces; for a plane (a half-space) the exit exists only when
//    the segment rises through it.
//  - No hit, whatever the shape, for a zero translation (|translation| <= 1e-12 m: no
//    direction to report; also when its squared length overflows, beyond ~1e19 m), for a
//    max_fraction that is not >= 0 (NaN included; +infinity casts a ray), or for a non-finite
//    origin or translation.
//  - A segment touching the surface tangentially hits it (the solid is closed).
//  - Precision: the fraction is exact to a few float ulps of the distances involved; the
//    box and plane are exact up to rounding, the sphere and capsule use cancellation-free forms.
// The per-kind functions require `shape` to be of their kind (raycast_shape dispatches).
// `transform.rotation` must be a unit quaternion. None allocate.

/// Sphere of shape.radius centred at transform.position (rotation is irrelevant).
bool raycast_sphere(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                    float max_fraction, ShapeRayHit& out, bool back_faces = false);
/// Oriented box of shape.half_extents: the slab test on the segment in the box frame. A segment
/// parallel to a slab hits only when it lies within that slab (closed). The normal is the face
/// of the last slab entered; at an exact edge or corner the lowest axis (x, y, z) wins.
bool raycast_box(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                 float max_fraction, ShapeRayHit& out, bool back_faces = false);
/// Capsule whose core segment runs along the local Y axis from -half_height to +half_height,
/// swept by shape.radius. The first hit is the earliest of the cylinder side (within the core's
/// Y range; normal perpendicular to the axis) and the two end spheres (radial normal).
bool raycast_capsule(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                     float max_fraction, ShapeRayHit& out, bool back_faces = false);
/// Solid cylinder along local Y (|y| <= half_height, x^2 + z^2 <= radius^2): the line's interval
/// inside the cap slab and inside the infinite side; the entry's normal is the cap's (+-Y) or
/// the side's (radial), whichever bounds the interval.
bool raycast_cylinder(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                      float max_fraction, ShapeRayHit& out, bool back_faces = false);
/// Half-space below the local plane y = 0 (outward normal: local +Y). A segment parallel to the
/// plane hits only when its origin is in the half-space (start inside).
bool raycast_plane(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                   float max_fraction, ShapeRayHit& out, bool back_faces = false);

/// Convex hull (shape.hull): the segment clipped by every face's half-space (Haines, "Fast
/// Ray-Convex Polyhedron Intersection", Graphics Gems II, 1991); the normal is the last face entered.
bool raycast_hull(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                  float max_fraction, ShapeRayHit& out, bool back_faces = false);

/// Dispatches on shape.kind through a table of the functions above. A kind outside
/// [0, ShapeKind::Count) is no hit. Conventions as above. O(1), no allocation.
bool raycast_shape(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                   float max_fraction, ShapeRayHit& out, bool back_faces = false);

}  // namespace impulse::physics
