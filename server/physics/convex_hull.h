// Convex hulls: built from a point cloud (Qhull, Barber, Dobkin and Huhdanpaa, "The Quickhull
// Algorithm for Convex Hulls", ACM TOMS 22(4), 1996; Debian's libqhull_r), stored as vertices,
// polygonal faces with planes, and edges with their two faces, in the hull's principal frame:
// the origin at the solid's centre of mass and the axes along its principal axes of inertia, so a
// body's diagonal inverse inertia stays exact. Mass properties by summing signed tetrahedra (Blow
// and Binstock, "How to find the inertia tensor (or other mass properties) of a 3D solid body
// represented by a triangle mesh", 2004), principal axes by cyclic Jacobi rotations (Golub and
// Van Loan, "Matrix Computations", 4th ed., §8.5).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shared/math.h"

namespace impulse::physics {

/// Most vertices a hull may keep. The hull-hull separating axis test visits every pair of edges
/// (up to 3V - 6 each), so its worst case grows with V^2: 64 vertices give 186 edges and about
/// 35,000 edge pairs, the most one contact pair may cost in a 60 Hz step. Jolt allows 256 (with
/// GJK, whose cost is linear), Box3D 128. Input with more hull vertices is refused (simplify the
/// mesh) rather than silently decimated, so the server's hull is the one the artist made.
inline constexpr uint32_t kMaxHullVertices = 64;
/// Most input points accepted (the cloud may have interior points that the hull drops): bounds
/// the quickhull's time on hostile input.
inline constexpr uint32_t kMaxHullInputPoints = 4096;

/// A face's plane: dot(normal, x) = offset for x on the face; normal unit and outward.
struct HullPlane {
  Vec3 normal;
  float offset = 0;  ///< [m], > 0: the origin (centre of mass) is inside
};

/// A face: face_vertices[first .. first + count) in counter-clockwise order about its outward normal.
struct HullFace {
  uint16_t first = 0;
  uint16_t count = 0;
};

/// An edge v0 -> v1 between face f0 (which walks v0 -> v1) and face f1 (which walks v1 -> v0).
struct HullEdge {
  uint8_t v0 = 0;
  uint8_t v1 = 0;
  uint8_t f0 = 0;
  uint8_t f1 = 0;
};

/// A read-only view of a hull's arrays; the narrowphase works on views, so a box can be seen as
/// a hull without a heap allocation.
struct HullView {
  const Vec3* vertices = nullptr;
  const HullPlane* planes = nullptr;
  const HullFace* faces = nullptr;
  const uint8_t* face_vertices = nullptr;
  const HullEdge* edges = nullptr;
  uint32_t vertex_count = 0;
  uint32_t face_count = 0;
  uint32_t edge_count = 0;
  float radius = 0;  ///< the farthest vertex from the origin [m] (ConvexHull::radius)
};

/// A convex polyhedron in its principal frame [m]. Built by build_convex_hull; a World keeps the
/// ones its bodies use (World::add_hull) for as long as the World lives.
struct ConvexHull {
  std::vector<Vec3> vertices;           ///< principal frame [m], at most kMaxHullVertices
  std::vector<HullPlane> planes;        ///< one per face
  std::vector<HullFace> faces;
  std::vector<uint8_t> face_vertices;   ///< indices into vertices
  std::vector<HullEdge> edges;
  float volume = 0;                     ///< [m^3]
  Vec3 unit_inertia;                    ///< principal moments per unit mass [m^2]: I = mass * unit_inertia
  float radius = 0;                     ///< the farthest vertex from the centre of mass [m]
  float inner_radius = 0;               ///< the nearest face to the centre of mass [m]
  /// Where the principal frame sits in the frame of the input points: x_input = origin +
  /// rotate(rotation, x_hull). A body built from a model placed at pose P takes the pose
  /// P * input_frame (position P.position + rotate(P.rotation, origin)).
  Vec3 origin;
  Quat rotation;
  /// Index in the World's hull table, set by World::add_hull (0xFFFFFFFF before). Not compared.
  uint32_t id = 0xFFFFFFFFu;

  HullView view() const {
    return {vertices.data(), planes.data(), faces.data(), face_vertices.data(), edges.data(),
            static_cast<uint32_t>(vertices.size()), static_cast<uint32_t>(faces.size()),
            static_cast<uint32_t>(edges.size()), radius};
  }
  bool operator==(const ConvexHull&) const;
};

/// What build_convex_hull returns: the hull, or an error that says what was wrong with the input.
struct HullBuild {
  ConvexHull hull;
  std::string error;  ///< empty on success
  bool ok() const { return error.empty(); }
};

/// The convex hull of `points` [m, any frame]. Fails (error set, hull empty) when there are fewer
/// than 4 or more than kMaxHullInputPoints points, a coordinate is not finite or beyond 1e4 m,
/// the points are coplanar, collinear or nearly so (volume under 1e-9 m^3, or no inscribed
/// sphere of 0.5 mm), or the hull has more than kMaxHullVertices vertices. Near-coplanar facets
/// (within about 1 degree) are merged into one face. Deterministic: the same points give the same
/// hull, bit for bit, on the same binary.
HullBuild build_convex_hull(std::span<const Vec3> points);

/// The hull's vertices as seen by the narrowphase: the support point along `d` (hull frame).
Vec3 hull_support(const HullView& hull, Vec3 d);
/// The index of that support vertex (the lowest index on ties).
uint32_t hull_support_index(const HullView& hull, Vec3 d);

/// Checks a hull's invariants (sizes, indices in range, unit normals, every vertex behind every
/// plane within 1 mm + 1e-4 of its size, each edge shared by its two faces, finite mass
/// properties). Returns the first problem found ("field: rule") or an empty string. Used on hulls
/// read from a saved world, which may be hostile.
std::string check_hull(const ConvexHull& hull);

}  // namespace impulse::physics
