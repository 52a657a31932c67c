// Convex shapes against static triangle meshes. Each triangle near the convex is a prism (the
// triangle extruded kTriangleDepth backwards) collided by the hull code; contacts whose normal an
// inactive edge or vertex made are redone against the front face (the active-edge rule of Jolt's
// Jolt/Geometry/ActiveEdges.h and MeshShape; Terdiman, "Internal edges", 2011); the triangle
// contacts are then grouped by normal and each group reduced to 4 points (as Jolt's manifold
// reduction merges sub-shape manifolds with equal normals, Jolt/Physics/Collision/
// ManifoldBetweenTwoFaces and ContactConstraintManager).
#include <array>
#include <vector>

#include "server/physics/narrowphase.h"
#include "server/physics/narrowphase_detail.h"
#include "server/physics/heightfield.h"
#include "server/physics/triangle_mesh.h"

namespace impulse::physics {

namespace detail {

namespace {

// Face loops: front (0, 1, 2), back (3, 5, 4), then the side over edge k: k, k + 3, k' + 3, k'.
constexpr uint8_t kPrismLoops[18] = {0, 1, 2, 3, 5, 4, 0, 3, 4, 1, 1, 4, 5, 2, 2, 5, 3, 0};
constexpr HullFace kPrismFaces[5] = {{0, 3}, {3, 3}, {6, 4}, {10, 4}, {14, 4}};

/// The prism's 9 edges with their two faces, derived once from the loops.
const HullEdge* prism_edges() {
  static const auto edges = [] {
    std::array<HullEdge, 9> out{};
    size_t n = 0;
    for (uint8_t f = 0; f < 5; ++f) {
      const HullFace face = kPrismFaces[f];
      for (uint16_t i = 0; i < face.count; ++i) {
        const uint8_t a = kPrismLoops[face.first + i];
        const uint8_t b = kPrismLoops[face.first + (i + 1) % face.count];
        if (a < b) out[n++] = HullEdge{a, b, f, 0};
      }
    }
    for (uint8_t f = 0; f < 5; ++f) {  // the face that walks b -> a
      const HullFace face = kPrismFaces[f];
      for (uint16_t i = 0; i < face.count; ++i) {
        const uint8_t a = kPrismLoops[face.first + i];
        const uint8_t b = kPrismLoops[face.first + (i + 1) % face.count];
        if (a < b) continue;
        for (HullEdge& e : out) {
          if (e.v0 == b && e.v1 == a) e.f1 = f;
        }
      }
    }
    return out;
  }();
  return edges.data();
}

}  // namespace

HullView TrianglePrism::view() const { return {vertices, planes, kPrismFaces, kPrismLoops, prism_edges(), 6, 5, 9, radius}; }

TrianglePrism make_triangle_prism(const Vec3 v[3], Vec3 n) {
  TrianglePrism p;
  const Vec3 back = n * kTriangleDepth;
  p.centre = (v[0] + v[1] + v[2]) * (1.0f / 3.0f) - back * 0.5f;
  for (int k = 0; k < 3; ++k) {
    p.vertices[k] = v[k] - p.centre;
    p.vertices[k + 3] = v[k] - back - p.centre;
    p.radius = std::max(p.radius, length(p.vertices[k]));
    p.radius = std::max(p.radius, length(p.vertices[k + 3]));
  }
  p.planes[0] = {n, dot(n, p.vertices[0])};
  p.planes[1] = {-n, -dot(n, p.vertices[3])};
  for (int k = 0; k < 3; ++k) {
    const Vec3 a = p.vertices[k];
    const Vec3 side = normalize_or(cross(p.vertices[(k + 1) % 3] - a, n), any_perpendicular(n));
    p.planes[2 + k] = {side, dot(side, a)};
  }
  return p;
}

}  // namespace detail

namespace {

constexpr float kFaceNormalCos = 0.9998f;  // a contact normal this close to the face's is the face's
constexpr float kSamePointSq = 1.0e-8f;    // [m^2]: candidates 0.1 mm apart are one point
constexpr float kSeamPointBias = 1.0e-4f;  // [m]: see the reduction in collide_mesh

/// Which feature of triangle v (unit normal n) the triangle's own contact point p lies on, and
/// whether that feature may give a contact its own normal: p's distance outside each edge's line
/// in the plane (within kFeatureTolerance counts as on it) names an edge, two edges their vertex,
/// none the inside. An active edge, or a vertex with an active edge, may; the inside never does.
constexpr float kFeatureTolerance = 1.0e-3f;  // [m]
bool feature_is_active(Vec3 p, const Vec3 v[3], Vec3 n, uint8_t active) {
  uint32_t on = 0;
  for (int k = 0; k < 3; ++k) {
    const Vec3 outward = normalize_or(cross(v[(k + 1) % 3] - v[k], n), Vec3{});
    if (dot(p - v[k], outward) >= -kFeatureTolerance) on |= 1u << k;
  }
  return (on & active) != 0;
}

/// The radius of the convex's bounding sphere about its centre [m].
float convex_radius(const Shape& a) {
  switch (a.kind) {
    case ShapeKind::Box: return length(a.half_extents);
    case ShapeKind::Capsule: return a.half_height + a.radius;
    case ShapeKind::Hull: return a.hull->radius;
    case ShapeKind::Cylinder: return std::sqrt(a.radius * a.radius + a.half_height * a.half_height);
    default: return a.radius;
  }
}

/// The point of triangle v closest to p (Ericson, Real-Time Collision Detection, §5.1.5).
Vec3 closest_on_triangle(Vec3 p, const Vec3 v[3]) {
  const Vec3 ab = v[1] - v[0];
  const Vec3 ac = v[2] - v[0];
  const Vec3 ap = p - v[0];
  const float d1 = dot(ab, ap);
  const float d2 = dot(ac, ap);
  if (d1 <= 0.0f && d2 <= 0.0f) return v[0];
  const Vec3 bp = p - v[1];
  const float d3 = dot(ab, bp);
  const float d4 = dot(ac, bp);
  if (d3 >= 0.0f && d4 <= d3) return v[1];
  const float vc = d1 * d4 - d3 * d2;
  if (vc <= 0.0f && d1 >= 0.0f && d3 <= 0.0f) return v[0] + ab * (d1 / (d1 - d3));
  const Vec3 cp = p - v[2];
  const float d5 = dot(ab, cp);
  const float d6 = dot(ac, cp);
  if (d6 >= 0.0f && d5 <= d6) return v[2];
  const float vb = d5 * d2 - d1 * d6;
  if (vb <= 0.0f && d2 >= 0.0f && d6 <= 0.0f) return v[0] + ac * (d2 / (d2 - d6));
  const float va = d3 * d6 - d5 * d4;
  if (va <= 0.0f && (d4 - d3) >= 0.0f && (d5 - d6) >= 0.0f) return v[1] + (v[2] - v[1]) * ((d4 - d3) / ((d4 - d3) + (d5 - d6)));
  const float denom = 1.0f / (va + vb + vc);
  return v[0] + ab * (vb * denom) + ac * (vc * denom);
}

/// The point of convex `a` at `ta` farthest along the unit direction d.
Vec3 convex_support(const Shape& a, const Transform& ta, Vec3 d) {
  switch (a.kind) {
    case ShapeKind::Sphere: return ta.position + d * a.radius;
    case ShapeKind::Capsule: {
      const detail::Segment seg = detail::capsule_segment(a, ta);
      return (dot(seg.p0, d) >= dot(seg.p1, d) ? seg.p0 : seg.p1) + d * a.radius;
    }
    case ShapeKind::Box: {
      const Vec3 l = inverse_rotate(ta.rotation, d);
      const Vec3 h = a.half_extents;
      return ta.position + rotate(ta.rotation, Vec3{l.x >= 0.0f ? h.x : -h.x, l.y >= 0.0f ? h.y : -h.y, l.z >= 0.0f ? h.z : -h.z});
    }
    case ShapeKind::Hull: return ta.position + rotate(ta.rotation, hull_support(a.hull->view(), inverse_rotate(ta.rotation, d)));
    case ShapeKind::Cylinder: return cylinder_support(a, ta, d);
    default: return ta.position;
  }
}

struct Candidate {
  Vec3 point;
  float separation;  // along `normal`
  uint32_t feature;
  Vec3 normal;       // the triangle contact's own normal
};

}  // namespace

bool collide_mesh_triangle(const Shape& a, const Transform& ta, const MeshTriangle& tri, float margin, Manifold& m) {
  m.point_count = 0;
  const Vec3 n = normalize_or(cross(tri.v[1] - tri.v[0], tri.v[2] - tri.v[0]), Vec3{0.0f, 1.0f, 0.0f});
  if (dot(ta.position - tri.v[0], n) < 0.0f) return false;  // behind a one-sided triangle
  // The convex's deepest point along the face normal: nothing of it within the margin of the
  // plane, no contact (the cheap rejection of most triangles under a body's box).
  if (dot(convex_support(a, ta, -n) - tri.v[0], n) > margin) return false;
  // Nor when the triangle lies beyond the convex's bounding sphere (a triangle beside the body).
  const float reach = convex_radius(a) + margin;
  if (length_squared(closest_on_triangle(ta.position, tri.v) - ta.position) > reach * reach) return false;
  const detail::TrianglePrism prism = detail::make_triangle_prism(tri.v, n);
  const Transform tp{prism.centre, Quat{}};
  const HullView view = prism.view();
  if (!detail::collide_convex_polytope(a, ta, view, 0.5f * detail::kTriangleDepth, tp, margin, m)) return false;
  // Within a degree of the face normal (the convex's own face was the reference): the face's
  // exact normal instead, so every triangle of a flat region gives the same normal and a body
  // sliding across them feels one plane.
  if (dot(m.normal, n) <= -kFaceNormalCos) {
    if (m.normal == -n) return true;
    return detail::collide_convex_polytope_face(a, ta, view, 0, tp, margin, m);
  }
  int deepest = 0;
  for (int i = 1; i < m.point_count; ++i) {
    if (m.points[i].separation < m.points[deepest].separation) deepest = i;
  }
  // The triangle's surface point: half the separation along the normal from the midpoint.
  const ManifoldPoint& p = m.points[deepest];
  if (feature_is_active(p.point + m.normal * (0.5f * p.separation), tri.v, n, active_edges(tri))) return true;
  return detail::collide_convex_polytope_face(a, ta, view, 0, tp, margin, m);
}

bool collide_mesh(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                  MeshManifolds& out) {
  out.count = 0;
  if (!is_triangle_surface(b.kind)) return false;
  // Everything in the surface's frame until the output.
  const Quat inv = conjugate(tb.rotation);
  const Transform local{rotate(inv, ta.position - tb.position), normalize(inv * ta.rotation)};
  Aabb box = compute_aabb(a, local);
  const Vec3 grow{margin, margin, margin};
  box.min -= grow;
  box.max += grow;

  // Candidates grouped by normal; scratch per thread (the World's narrowphase runs on its pool).
  thread_local std::array<std::vector<Candidate>, kMaxMeshManifolds> groups;
  Vec3 normals[kMaxMeshManifolds];  // each group's first normal
  Vec3 sums[kMaxMeshManifolds];
  bool uniform[kMaxMeshManifolds] = {};
  int group_count = 0;
  for (auto& g : groups) g.clear();
  auto visit = [&](const MeshTriangle& tri) {
    Manifold m;
    if (!collide_mesh_triangle(a, local, tri, margin, m)) return true;
    // The first group whose first normal is within kMeshMergeCos, else a new group, else (all
    // taken) the closest; a group's normal is the mean of its members' (Jolt's
    // ReductionCollideShapeCollector in PhysicsSystem.cpp merges sub-shape manifolds the same way).
    int g = -1;
    float best = -2.0f;
    for (int k = 0; k < group_count; ++k) {
      const float c = dot(normals[k], m.normal);
      if (c >= kMeshMergeCos) {
        g = k;
        break;
      }
      if (c > best) {
        best = c;
        g = k;
      }
    }
    if (g < 0 || (dot(normals[g], m.normal) < kMeshMergeCos && group_count < kMaxMeshManifolds)) {
      g = group_count++;
      normals[g] = m.normal;
      sums[g] = Vec3{};
      uniform[g] = true;
    }
    sums[g] += m.normal;
    uniform[g] = uniform[g] && m.normal == normals[g];
    std::vector<Candidate>& group = groups[static_cast<size_t>(g)];
    for (int i = 0; i < m.point_count; ++i) {
      const ManifoldPoint& p = m.points[i];
      // A vertex of the convex on a front face (hull feature: reference B's face 0, point < 64)
      // keeps its id from triangle to triangle, so a corner sliding across seams stays warm
      // started; any other point is tied to its triangle.
      const bool convex_vertex_on_face = (p.feature >> 24) == 0x80u && (p.feature & 0xFFu) < 64u;
      const uint32_t feature = convex_vertex_on_face ? p.feature : p.feature * 0x9E3779B1u + tri.index;
      // The same point from two triangles (a corner on a seam): keep the deeper once.
      bool merged = false;
      for (Candidate& c : group) {
        if (length_squared(c.point - p.point) <= kSamePointSq) {
          if (p.separation < c.separation) c = Candidate{p.point, p.separation, feature, m.normal};
          merged = true;
          break;
        }
      }
      if (!merged) group.push_back({p.point, p.separation, feature, m.normal});
    }
    return true;
  };
  if (b.kind == ShapeKind::Mesh) {
    for_each_triangle(*b.mesh, box, visit);
  } else {
    for_each_triangle(*b.heightfield, box, visit);
  }

  const detail::Frame fm = detail::make_frame(tb);
  for (int g = 0; g < group_count; ++g) {
    const std::vector<Candidate>& c = groups[static_cast<size_t>(g)];
    thread_local std::vector<Vec3> pts;
    thread_local std::vector<float> seps;
    pts.resize(c.size());
    seps.resize(c.size());
    // The reduction starts from the deepest point: among points equally deep (a box flat on the
    // mesh), a vertex of the convex is preferred to a point where a seam crosses its face, so the
    // kept set stays the convex's corners from step to step and keeps its warm start.
    // One flat region keeps its exact normal; a curved one gets the mean, and each point's gap
    // is measured along it: the two surface points (midpoint -+ half the gap along the point's
    // own normal) projected on the mean.
    const Vec3 normal = uniform[g] ? normals[g] : normalize_or(sums[g], normals[g]);
    thread_local std::vector<float> gaps;
    gaps.resize(c.size());
    for (size_t i = 0; i < c.size(); ++i) {
      pts[i] = c[i].point;
      gaps[i] = uniform[g] ? c[i].separation : c[i].separation * dot(c[i].normal, normal);
      const bool convex_vertex = (c[i].feature >> 24) == 0x80u && (c[i].feature & 0xFFu) < 64u;
      seps[i] = gaps[i] + (convex_vertex ? 0.0f : kSeamPointBias);
    }
    int selected[kMaxManifoldPoints];
    const int kept = detail::reduce_manifold(pts.data(), seps.data(), static_cast<int>(c.size()), normal, selected);
    Manifold& m = out.manifolds[out.count++];
    m.point_count = 0;
    m.normal = detail::to_world_dir(fm, normal);
    for (int i = 0; i < kept; ++i) {
      const auto k = static_cast<size_t>(selected[i]);
      detail::push_point(m, detail::to_world(fm, c[k].point), gaps[k], c[k].feature);
    }
  }
  return out.count > 0;
}

}  // namespace impulse::physics
