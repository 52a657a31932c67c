// Narrowphase: contact manifolds per shape pair, dispatched through a table of free functions
// indexed by ShapeKind (no virtual calls). Box-box uses the separating axis test over 15 axes
// with a face-axis bias, Sutherland-Hodgman clipping of the incident face against the reference
// face's side planes, and reduction to 4 points (Gregorius, "The Separating Axis Test between
// Convex Polyhedra", GDC 2013; "Robust Contact Creation for Physics Simulations", GDC 2015).
// Closest-point tests follow Ericson, "Real-Time Collision Detection", 2005 (§5.1, §5.2, §5.3).
#pragma once

#include <cstdint>

#include "server/physics/types.h"

namespace impulse::physics {

/// Points per manifold at most.
inline constexpr int kMaxManifoldPoints = 4;

/// One point of a contact manifold.
struct ManifoldPoint {
  Vec3 point;  ///< world frame [m], midway between the two surfaces along the normal
  /// Signed distance between the surfaces along the manifold normal [m]: < 0 penetrating,
  /// > 0 a gap (a speculative point, kept while the gap is <= the margin passed to collide()).
  float separation = 0;
  /// Identifies the pair of features (vertex, edge, face indices of A and B) that made this point,
  /// so the World can match it with last step's point and warm-start it. Stable while the same
  /// features touch; any value is allowed, but distinct points of one manifold differ. Encodings
  /// are per pair kind (see narrowphase_box.cpp); the World should match ids within one pair only.
  uint32_t feature = 0;
};

/// All contact points of one shape pair, sharing one normal.
struct Manifold {
  Vec3 normal;              ///< world frame, unit, from A towards B
  int point_count = 0;      ///< 0..kMaxManifoldPoints; 0 = no contact
  ManifoldPoint points[kMaxManifoldPoints];
};

/// The exact world-frame AABB of a shape under a transform [m], without any margin (the World adds
/// the speculative margin). Box: the half extents through |R|; capsule: the core's end points +-
/// radius. A plane gets +-1e18 m on its unbounded axes; when its normal is axis-aligned (the other
/// two components within 1e-6) that axis is bounded at the plane: normal +Y at y = h gives
/// max.y = h, min.y = -1e18. A hull: its vertices rotated. A cylinder: cylinder_aabb. A kind outside [0, ShapeKind::Count) gives the point AABB at the position.
Aabb compute_aabb(const Shape& shape, const Transform& transform);

/// Distance [m] below which a direction is treated as undefined (concentric spheres, a point on
/// a segment). Degenerate geometry gets a documented, deterministic normal, never NaN.
inline constexpr float kNarrowphaseEpsilon = 1.0e-6f;

// Each collide_* fills `out` with every contact point whose separation is <= margin [m, >= 0]
// and returns true when out.point_count > 0; otherwise returns false (out.point_count = 0).
// Shapes are in their local frames, placed by the transforms. The caller passes shapes of the
// kinds named by the function (use collide() to dispatch). Normal from A to B.

/// Sphere-sphere: one point. Concentric spheres get normal +Y.
bool collide_sphere_sphere(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                           float margin, Manifold& out);
/// Sphere A vs oriented box B: one point (Ericson §5.2.5 in B's frame); a centre inside the box
/// is pushed out through the face of least penetration.
bool collide_sphere_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                        float margin, Manifold& out);
/// Sphere A vs capsule B: one point, sphere centre vs the closest point of B's segment.
bool collide_sphere_capsule(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                            float margin, Manifold& out);
/// Capsule-capsule: the closest points of the two segments (Ericson §5.1.9); two points when the
/// segments are parallel and overlap along their length (so a capsule lying on another is stable).
bool collide_capsule_capsule(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                             float margin, Manifold& out);
/// Capsule A vs oriented box B, in B's frame. Closest points of the core segment and the box: the
/// squared distance is convex and piecewise quadratic in the segment parameter, minimised exactly
/// on each piece between slab crossings (Ericson §5.1.3 per piece). When the normal is within ~18
/// degrees of a face normal and the core is parallel to that face (sin <= 0.02), the core is
/// clipped to the face's side planes for two points (a capsule lying on a box is stable); else one
/// point. A core touching or inside the box uses a SAT over the 3 face normals and the 3 crosses
/// core x box axis, face-biased like box-box.
bool collide_capsule_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                         float margin, Manifold& out);
/// Oriented box-box by SAT over the 15 axes (3 face normals of each box, 9 edge cross products;
/// near-parallel edge pairs skipped), preferring a face axis unless an edge axis separates or
/// penetrates clearly less, and A's face over B's within a tolerance (constants and reasons in
/// narrowphase_box.cpp), for frame-to-frame coherence. Face contact: the incident face (the face of
/// the other box most anti-parallel to the reference normal) is clipped against the side planes of
/// the reference face (Sutherland-Hodgman), points beyond the margin are dropped, clipped points
/// within 1 % of the box size of an incident vertex or reference corner are welded onto it (stable
/// ids for flush stacks), and at most 4 are kept: the deepest, then those maximising the manifold's
/// area. Edge contact: one point, midway between the closest points of the two edges.
bool collide_box_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                     float margin, Manifold& out);
/// Any shape B vs plane A (the plane must be A): sphere 1 point, capsule 2 (segment end points),
/// box up to 4 (the deepest vertices within the margin). Normal = the plane's outward normal.
bool collide_plane_sphere(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                          float margin, Manifold& out);
bool collide_plane_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                       float margin, Manifold& out);
bool collide_plane_capsule(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                           float margin, Manifold& out);

/// Convex hull pairs (narrowphase_hull.cpp; the hull is always B, or both). Hull-hull and box-hull
/// (the box seen as a hull): SAT over both face sets and the edge pairs that form a Minkowski face
/// (the Gauss-map test), face-biased like box-box; a face contact clips the incident face against
/// the reference face's side planes and keeps up to 4 points; an edge contact is one point.
/// Sphere-hull: the closest point on the faces in front of the centre, or, for a centre inside,
/// out through the least-penetrated face. Capsule-hull: exact closest points of the core and the
/// faces in front of it; two points (the core clipped to the face) when the core lies along a
/// face within kParallelSin; a core inside uses the SAT (faces, hull edges x core). Plane-hull: up
/// to 4 of the vertices within the margin. Feature ids are per pair kind (narrowphase_hull.cpp).
bool collide_sphere_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                         Manifold& out);
bool collide_box_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                      Manifold& out);
bool collide_capsule_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                          Manifold& out);
bool collide_hull_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                       Manifold& out);
bool collide_plane_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                        Manifold& out);

/// Cylinder pairs (narrowphase_cylinder.cpp; the cylinder is always A, or both, and B the plane
/// for collide_plane_cylinder). The normal is GJK's (Gilbert, Johnson and Keerthi 1988; gjk.h)
/// between the cores: the cylinder shrunk by cylinder_rounding, a sphere's centre, a capsule's
/// segment, a box or hull itself; so the separation is exact while the shapes overlap by less
/// than their roundings. Deeper, the least-penetrating of the pair's candidate axes (centre line,
/// axes, face normals, axis x edges, radial directions) stands in for EPA. The manifold clips the
/// two supporting features (a cap polygon of the 8 rim points 45 degrees apart plus the exact
/// farthest rim point, a side line, a face, an edge, a point) against each other and measures
/// each point to the reference feature along the normal (Jolt's ManifoldBetweenTwoFaces), so a
/// cylinder standing or lying on a face rests on up to 4 points of its sharp rim; failing that,
/// one point midway between the witnesses. Plane: the cap, side line or rim point within the
/// margin. Features: narrowphase_cylinder.cpp.
bool collide_cylinder_sphere(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                             Manifold& out);
bool collide_cylinder_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                          Manifold& out);
bool collide_cylinder_capsule(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                              Manifold& out);
bool collide_cylinder_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                           Manifold& out);
bool collide_cylinder_cylinder(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                               Manifold& out);
bool collide_plane_cylinder(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                            Manifold& out);

/// Largest rounding of a cylinder's GJK core [m]: 5 cm, Jolt's default convex radius
/// (cDefaultConvexRadius). Contacts that sink deeper than the roundings take the slower
/// candidate-axis search, so the rounding is as large as the shape allows.
inline constexpr float kCylinderRounding = 0.05f;
/// The rounding of this cylinder's core [m]: kCylinderRounding, or half its smaller dimension.
float cylinder_rounding(const Shape& cylinder);
/// The point of a cylinder at t farthest along d (world frame, any length) [m]: its sharp rim
/// (a cap's centre when d is along the axis).
Vec3 cylinder_support(const Shape& cylinder, const Transform& t, Vec3 d);
/// The exact world-frame AABB of a cylinder [m]: on world axis k, |u_k| h + r sqrt(1 - u_k^2)
/// about the centre, u the axis.
Aabb cylinder_aabb(const Shape& cylinder, const Transform& t);

/// The exact world-frame AABB of a hull under a transform (its vertices rotated) [m].
Aabb hull_aabb(const ConvexHull& hull, const Transform& transform);

/// Most manifolds one body-mesh pair yields: one per distinct normal (a box in a corner of the
/// level touches a floor and two walls); beyond it the closest normal's manifold takes the points.
inline constexpr int kMaxMeshManifolds = 4;

/// A convex body's contacts with a mesh: one manifold per group of triangle contacts whose
/// normals agree within kMeshMergeCos (the group's normal is their mean, or their common normal
/// when all are equal), each reduced to at most 4 points.
struct MeshManifolds {
  int count = 0;
  Manifold manifolds[kMaxMeshManifolds];
};

/// Cosine of the largest angle between a triangle contact's normal and a manifold's first normal
/// for the contact to join that manifold: 1 degree. Jolt merges within 5 degrees
/// (mContactNormalCosMaxDeltaRotation); here a manifold has one normal for all its points, and a
/// box resting across 5 degrees of curvature then crept downhill, so only near-coplanar contacts
/// share one.
inline constexpr float kMeshMergeCos = 0.99985f;

/// Convex `a` (sphere, box, capsule or hull) at ta against the static mesh or heightfield `b` at
/// tb (narrowphase_mesh.cpp; a heightfield's cells are two triangles each, heightfield.h). Each triangle the convex's box (grown by the margin) overlaps is seen
/// as a prism of depth kTriangleDepth behind its front face and collided as a hull; a triangle
/// whose plane has a's centre behind it is skipped (meshes are one-sided). A contact whose normal
/// comes from an inactive edge or vertex (triangle_mesh.h) is redone with the triangle's front
/// face as the reference, so seams of a flat or concave surface never push sideways. The
/// triangle contacts are then grouped by normal (MeshManifolds). Normals from a to b; features
/// mix the triangle index with the hull feature. Deterministic (triangles in BVH order).
bool collide_mesh(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                  MeshManifolds& out);

struct MeshTriangle;
/// One triangle of collide_mesh: convex a at ta, both in the mesh's frame; the same prism, one-
/// sidedness and active-edge rule. The continuous pass uses it to judge a triangle it hits.
bool collide_mesh_triangle(const Shape& a, const Transform& ta, const MeshTriangle& tri, float margin, Manifold& m);

/// Dispatches on (a.kind, b.kind) through the table; a pair stored as (B, A) is swapped and its
/// normal flipped so the result always points from A towards B. Returns false (point_count 0) for
/// plane-plane and for a kind outside [0, ShapeKind::Count). A mesh pair gives the deepest of its
/// collide_mesh manifolds (the World's narrowphase keeps them all); mesh-mesh and mesh-plane
/// give nothing.
bool collide(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
             Manifold& out);

}  // namespace impulse::physics
