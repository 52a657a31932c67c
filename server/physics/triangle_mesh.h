// Static triangle meshes: welded vertices, triangles with per-triangle material ids, a bounding
// volume hierarchy over them, and the active-edge flags that keep bodies from bumping on the
// seams between coplanar triangles.
//
//  - BVH: median split of the triangles' centroids on the widest axis, down to leaves of at most
//    kMeshLeafTriangles (Ericson, "Real-Time Collision Detection", 2005, §6.2.1, top-down
//    construction), with each node's box quantised to 16 bits per coordinate on the mesh's
//    bounds, rounded outwards so every query stays exact (Mahovsky and Wyvill, "Memory-Conserving
//    Bounding Volume Hierarchies with Coherent Raytracing", 2006). A node is 16 bytes.
//  - Active edges: an edge shared by two triangles is inactive when it is concave, or convex by
//    less than kMeshActiveEdgeAngle; a contact whose normal comes from an inactive edge or from a
//    vertex whose edges are all inactive uses the triangle's face normal instead (the rule of
//    Jolt's Jolt/Geometry/ActiveEdges.h; Terdiman, "Internal edges", 2011, explains why edges of
//    a flat floor otherwise stop a sliding box).
//
// A mesh is one-sided: its front faces are counter-clockwise about their outward normal. A body
// whose centre is behind a triangle's plane does not touch that triangle.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shared/math.h"

namespace impulse::physics {

/// Most triangles one mesh may hold (about 64 MB at the mesh's ~30 bytes per triangle): bounds
/// what one scene file can make a server allocate.
inline constexpr uint32_t kMaxMeshTriangles = 2u << 20;
/// Most vertices one mesh may hold before welding.
inline constexpr uint32_t kMaxMeshVertices = 3u * kMaxMeshTriangles;
/// Most triangles in one BVH leaf.
inline constexpr uint32_t kMeshLeafTriangles = 4;
/// Cosine of the largest angle [rad] between two triangles' normals at a convex edge that still
/// counts as flat (inactive): 5 degrees, Jolt's default (PhysicsSettings::mActiveEdgeCosThresholdAngle).
inline constexpr float kMeshActiveEdgeCos = 0.9961947f;
/// Coordinates of a mesh's vertices are bounded by this in magnitude [m].
inline constexpr float kMaxMeshCoordinate = 1.0e5f;

/// A BVH node's box, quantised on the mesh bounds: min = bounds.min + lo * step (rounded down),
/// max = bounds.min + hi * step (rounded up).
struct MeshNode {
  uint16_t lo[3];
  uint16_t hi[3];
  /// first << 3 | count. count = 0: an internal node whose children are nodes first and first + 1;
  /// count in [1, kMeshLeafTriangles]: a leaf of triangles [first, first + count).
  uint32_t data = 0;
  uint32_t first() const { return data >> 3; }
  uint32_t count() const { return data & 7u; }
};
static_assert(sizeof(MeshNode) == 16);

/// One triangle as the narrowphase and queries see it (mesh frame [m]).
struct HeightField;
struct MeshTriangle {
  Vec3 v[3];            ///< counter-clockwise about the front normal
  uint32_t index = 0;   ///< in the mesh's (BVH-ordered) triangle list
  uint8_t active = 0;   ///< bit k: edge v[k] -> v[(k + 1) % 3] is active (see active_edges)
  uint8_t material = 0; ///< the triangle's material id
  /// A heightfield's triangle leaves `active` unset and names its field instead: its active
  /// edges are found from the neighbouring cells only when a contact needs them.
  const HeightField* field = nullptr;
};

/// The triangle's active edges (MeshTriangle::active, or its heightfield's answer).
uint8_t active_edges(const MeshTriangle& tri);

/// A static triangle mesh in its body's frame [m]. Built by build_triangle_mesh; a World keeps
/// the ones its bodies use (World::add_mesh) for as long as the World lives.
struct TriangleMesh {
  std::vector<Vec3> vertices;       ///< body frame [m], welded (no two equal)
  std::vector<uint32_t> indices;    ///< 3 per triangle, counter-clockwise about the front normal, in BVH leaf order
  std::vector<uint8_t> edge_flags;  ///< per triangle: bit k set when edge k is active
  std::vector<uint8_t> materials;   ///< per triangle material id; empty when every triangle has id 0
  std::vector<MeshNode> nodes;      ///< the BVH; nodes[0] is the root
  Aabb bounds;                      ///< of every vertex [m]
  Vec3 step;                        ///< the node quantisation step per axis [m]
  /// XXH3-64 of the source data (vertices, indices, materials as stored): what world hashes and
  /// asset lists name the mesh by. Not compared (it follows from the data).
  uint64_t content_hash = 0;
  /// Index in the World's mesh table, set by World::add_mesh (0xFFFFFFFF before). Not compared.
  uint32_t id = 0xFFFFFFFFu;

  uint32_t triangle_count() const { return static_cast<uint32_t>(indices.size() / 3); }
  MeshTriangle triangle(uint32_t t) const {
    MeshTriangle out;
    out.v[0] = vertices[indices[3 * t]];
    out.v[1] = vertices[indices[3 * t + 1]];
    out.v[2] = vertices[indices[3 * t + 2]];
    out.index = t;
    out.active = edge_flags[t];
    out.material = materials.empty() ? 0 : materials[t];
    return out;
  }
  /// The node's box, decoded (conservative: contains every triangle below it).
  Aabb node_box(const MeshNode& n) const {
    return {{bounds.min.x + step.x * n.lo[0], bounds.min.y + step.y * n.lo[1], bounds.min.z + step.z * n.lo[2]},
            {bounds.min.x + step.x * n.hi[0], bounds.min.y + step.y * n.hi[1], bounds.min.z + step.z * n.hi[2]}};
  }
  /// Bytes the mesh's arrays hold (capacity not counted).
  size_t memory_bytes() const;
  /// Equal source data (vertices, triangles, materials), which is all a mesh is made from.
  bool operator==(const TriangleMesh&) const;
};

/// What build_triangle_mesh returns: the mesh or an error naming the bad element.
struct MeshBuild {
  TriangleMesh mesh;
  std::string error;          ///< empty on success
  uint32_t welded = 0;        ///< vertices merged into an equal earlier one
  uint32_t degenerate = 0;    ///< triangles dropped: a repeated vertex or an area under 1e-12 m^2
  bool ok() const { return error.empty(); }
};

/// Builds a mesh from vertices [m, body frame] and 3 indices per triangle (counter-clockwise about
/// the front face's outward normal), with an optional material id per triangle (empty: all 0).
/// Equal vertices are welded, so seams are found between triangles that repeat vertices; degenerate
/// triangles are dropped (counted). The result is canonical: vertices in position order, triangles
/// in an order that depends only on the set of triangles (so a saved mesh rebuilds to itself, and
/// the input's triangle order is not kept). Fails, naming the element, on: no triangles, an index count
/// not a multiple of 3, an index out of range, a non-finite coordinate or one beyond
/// kMaxMeshCoordinate, more than kMaxMeshVertices vertices or kMaxMeshTriangles triangles, a
/// material count that is neither 0 nor the triangle count, or no triangle left. Deterministic:
/// the same input gives the same mesh, bit for bit, on the same binary. O(T log T).
MeshBuild build_triangle_mesh(std::span<const Vec3> vertices, std::span<const uint32_t> indices,
                              std::span<const uint8_t> materials = {});

/// Checks a mesh read from a saved world (which may be hostile) by rebuilding it from its source
/// data: returns the first problem or an empty string.
std::string check_mesh(const TriangleMesh& mesh);

/// Whether the edge from triangle 1 to triangle 2 is active, with n1 and n2 their unit normals and
/// `across` triangle 2's vertex off the shared edge minus a point on it: back-to-back triangles
/// and edges not shared count as active, concave edges as inactive, convex edges as active
/// beyond kMeshActiveEdgeCos (Jolt's rule, ActiveEdges.h).
bool edge_is_active(Vec3 n1, Vec3 n2, Vec3 across);

/// Calls f(const MeshTriangle&) for every triangle whose box overlaps `box` (mesh frame [m]), in
/// BVH order (deterministic). Stops early when f returns false.
template <class F>
void for_each_triangle(const TriangleMesh& mesh, const Aabb& box, F&& f) {
  if (mesh.nodes.empty() || !overlaps(mesh.bounds, box)) return;
  // The query box in quantised units, rounded outwards, clamped to the node range.
  auto quant = [&](float v, float lo, float step, bool up) -> int {
    const float q = step > 0.0f ? (v - lo) / step : 0.0f;
    if (!(q > 0.0f)) return 0;
    if (q >= 65535.0f) return 65535;
    const int i = static_cast<int>(q);
    return up && static_cast<float>(i) < q ? i + 1 : i;
  };
  const int qlo[3] = {quant(box.min.x, mesh.bounds.min.x, mesh.step.x, false),
                      quant(box.min.y, mesh.bounds.min.y, mesh.step.y, false),
                      quant(box.min.z, mesh.bounds.min.z, mesh.step.z, false)};
  const int qhi[3] = {quant(box.max.x, mesh.bounds.min.x, mesh.step.x, true),
                      quant(box.max.y, mesh.bounds.min.y, mesh.step.y, true),
                      quant(box.max.z, mesh.bounds.min.z, mesh.step.z, true)};
  uint32_t stack[64];
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    const MeshNode& n = mesh.nodes[stack[--top]];
    if (n.lo[0] > qhi[0] || n.hi[0] < qlo[0] || n.lo[1] > qhi[1] || n.hi[1] < qlo[1] || n.lo[2] > qhi[2] ||
        n.hi[2] < qlo[2]) {
      continue;
    }
    const uint32_t count = n.count();
    if (count == 0) {
      if (top + 2 > 64) continue;  // deeper than any mesh build_triangle_mesh makes
      stack[top++] = n.first() + 1;
      stack[top++] = n.first();
      continue;
    }
    for (uint32_t t = n.first(); t < n.first() + count; ++t) {
      const MeshTriangle tri = mesh.triangle(t);
      const Aabb tb{min(min(tri.v[0], tri.v[1]), tri.v[2]), max(max(tri.v[0], tri.v[1]), tri.v[2])};
      if (!overlaps(tb, box)) continue;
      if (!f(tri)) return;
    }
  }
}

/// A segment cast's first hit on a mesh's front faces.
struct MeshRayHit {
  float fraction = 0;  ///< along the translation, in [0, max_fraction]
  Vec3 normal;         ///< the triangle's front normal (mesh frame), unit
  uint32_t triangle = 0;
};

/// The first front face the segment origin + t * translation, t in [0, max_fraction], crosses
/// (mesh frame [m]); back faces and segments lying in a triangle's plane are not hit. Möller and
/// Trumbore, "Fast, Minimum Storage Ray/Triangle Intersection", JGT 2(1), 1997, over the BVH's
/// nodes nearest first. False when nothing is hit.
bool raycast_mesh(const TriangleMesh& mesh, Vec3 origin, Vec3 translation, float max_fraction, MeshRayHit& out);

/// The same test against one triangle (front face only); the fraction in `t`.
bool ray_triangle(Vec3 origin, Vec3 translation, const Vec3 v[3], float max_fraction, float& t);

}  // namespace impulse::physics
