// Narrowphase for spheres, capsules and planes by closest points (Ericson, "Real-Time Collision
// Detection", 2005, §5.1.2, §5.1.9), plus AABBs and the dispatch table. Box pairs: narrowphase_box.cpp.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "server/physics/narrowphase.h"
#include "server/physics/narrowphase_detail.h"
#include "server/physics/heightfield.h"
#include "server/physics/triangle_mesh.h"

namespace impulse::physics {

using detail::kFallbackNormal;

namespace {

/// Half-size of a plane's AABB on its unbounded axes [m]: far beyond any body, finite so that
/// AABB arithmetic (centres, sizes) stays finite.
constexpr float kPlaneExtent = 1.0e18f;
/// A plane normal whose two other components are within this of 0 counts as axis-aligned and
/// gets a finite bound on that axis. The bound then errs by at most 1e-6 x (distance from the
/// plane's origin): 1 mm at 1 km, well inside the World's speculative margin.
constexpr float kAxisAlignedTol = 1.0e-6f;

/// One contact between two spheres (centres ca, cb, radii ra, rb) at distance^2 dist_sq already
/// known to be within reach; `fallback` is the normal when the centres coincide.
void emit_sphere_pair(Vec3 ca, float ra, Vec3 cb, float rb, float dist_sq, Vec3 fallback, uint32_t feature,
                      Manifold& out) {
  Vec3 n = fallback;
  float dist = 0.0f;
  if (dist_sq > detail::kDegenerateSq) {
    dist = std::sqrt(dist_sq);
    n = (cb - ca) * (1.0f / dist);
  }
  out.normal = n;
  // Midway between A's surface point ca + n ra and B's surface point cb - n rb.
  detail::push_point(out, ((ca + n * ra) + (cb - n * rb)) * 0.5f, dist - ra - rb, feature);
}

/// Fallback normal for a sphere centre on a capsule core (segment direction d): perpendicular to
/// the segment, oriented from A's centre towards B's where that is defined.
Vec3 perpendicular_fallback(Vec3 d, Vec3 centre_a, Vec3 centre_b) {
  const Vec3 n = detail::any_perpendicular(d);
  return dot(n, centre_b - centre_a) < 0.0f ? -n : n;
}

struct PlaneFrame {
  Vec3 normal;   ///< world, unit, outward
  float offset;  ///< dot(normal, x) = offset on the plane [m]
};
PlaneFrame make_plane(const Transform& t) {
  const Vec3 n = rotate(t.rotation, Vec3{0.0f, 1.0f, 0.0f});
  return {n, dot(n, t.position)};
}

/// Emits the point of a sphere (centre c, radius r) against a plane if within the margin.
void emit_plane_sphere(const PlaneFrame& plane, Vec3 c, float r, float margin, uint32_t feature, Manifold& out) {
  const float separation = dot(plane.normal, c) - plane.offset - r;
  if (separation > margin) return;
  // Sphere surface point c - n r; the plane is a further `separation` along -n.
  detail::push_point(out, c - plane.normal * (r + 0.5f * separation), separation, feature);
}

}  // namespace

Aabb compute_aabb(const Shape& shape, const Transform& transform) {
  const Vec3 p = transform.position;
  switch (shape.kind) {
    case ShapeKind::Sphere: {
      const Vec3 r{shape.radius, shape.radius, shape.radius};
      return {p - r, p + r};
    }
    case ShapeKind::Box: {
      // Extent on world axis k = sum_j |R_kj| h_j (the rotated box's support along e_k).
      const Mat3 m = to_mat3(transform.rotation);
      const Vec3 h = shape.half_extents;
      const Vec3 e = abs(m.c0) * h.x + abs(m.c1) * h.y + abs(m.c2) * h.z;
      return {p - e, p + e};
    }
    case ShapeKind::Capsule: {
      const detail::Segment s = detail::capsule_segment(shape, transform);
      const Vec3 r{shape.radius, shape.radius, shape.radius};
      return {min(s.p0, s.p1) - r, max(s.p0, s.p1) + r};
    }
    case ShapeKind::Plane: {
      const Vec3 n = rotate(transform.rotation, Vec3{0.0f, 1.0f, 0.0f});
      Aabb box{{-kPlaneExtent, -kPlaneExtent, -kPlaneExtent}, {kPlaneExtent, kPlaneExtent, kPlaneExtent}};
      // The half-space below an axis-aligned plane is bounded on that axis: normal +e_k bounds
      // max_k, normal -e_k bounds min_k, at the plane's coordinate.
      const Vec3 an = abs(n);
      if (an.y <= kAxisAlignedTol && an.z <= kAxisAlignedTol) {
        if (n.x > 0.0f) box.max.x = p.x; else box.min.x = p.x;
      } else if (an.x <= kAxisAlignedTol && an.z <= kAxisAlignedTol) {
        if (n.y > 0.0f) box.max.y = p.y; else box.min.y = p.y;
      } else if (an.x <= kAxisAlignedTol && an.y <= kAxisAlignedTol) {
        if (n.z > 0.0f) box.max.z = p.z; else box.min.z = p.z;
      }
      return box;
    }
    case ShapeKind::Hull:
      return hull_aabb(*shape.hull, transform);
    case ShapeKind::Cylinder:
      return cylinder_aabb(shape, transform);
    case ShapeKind::Mesh:
    case ShapeKind::HeightField: {
      // The data's bounds turned by the rotation (|R| times the half size, about the centre).
      const Aabb& b = shape.kind == ShapeKind::Mesh ? shape.mesh->bounds : shape.heightfield->bounds;
      const Mat3 m = to_mat3(transform.rotation);
      const Vec3 c = p + m * ((b.min + b.max) * 0.5f);
      const Vec3 h = (b.max - b.min) * 0.5f;
      const Vec3 e = abs(m.c0) * h.x + abs(m.c1) * h.y + abs(m.c2) * h.z;
      return {c - e, c + e};
    }
    case ShapeKind::Count:
      break;
  }
  return {p, p};
}

bool collide_sphere_sphere(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                           float margin, Manifold& out) {
  out.point_count = 0;
  const float dist_sq = length_squared(tb.position - ta.position);
  const float reach = a.radius + b.radius + margin;
  if (dist_sq > reach * reach) return false;
  emit_sphere_pair(ta.position, a.radius, tb.position, b.radius, dist_sq, kFallbackNormal, 0, out);
  return true;
}

bool collide_sphere_capsule(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                            float margin, Manifold& out) {
  out.point_count = 0;
  const detail::Segment seg = detail::capsule_segment(b, tb);
  // Closest point of B's core segment to A's centre (Ericson §5.1.2).
  const Vec3 d = seg.p1 - seg.p0;
  const float dd = dot(d, d);
  const float t = dd > detail::kDegenerateSq ? detail::clamp01(dot(ta.position - seg.p0, d) / dd) : 0.0f;
  const Vec3 closest = seg.p0 + d * t;
  const float dist_sq = length_squared(closest - ta.position);
  const float reach = a.radius + b.radius + margin;
  if (dist_sq > reach * reach) return false;
  const Vec3 fallback = perpendicular_fallback(d, ta.position, tb.position);
  // Feature: which part of the capsule (cap 0, cylinder, cap 1) is touched.
  const uint32_t feature = t <= 0.0f ? 0u : (t >= 1.0f ? 2u : 1u);
  emit_sphere_pair(ta.position, a.radius, closest, b.radius, dist_sq, fallback, feature, out);
  return true;
}

bool collide_capsule_capsule(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb,
                             float margin, Manifold& out) {
  out.point_count = 0;
  const detail::Segment sa = detail::capsule_segment(a, ta);
  const detail::Segment sb = detail::capsule_segment(b, tb);
  const detail::SegmentClosest c = detail::closest_segment_segment(sa.p0, sa.p1, sb.p0, sb.p1);
  const float radii = a.radius + b.radius;
  const float reach = radii + margin;
  const float dist_sq = length_squared(c.c2 - c.c1);
  if (dist_sq > reach * reach) return false;

  const Vec3 da = sa.p1 - sa.p0;
  const Vec3 db = sb.p1 - sb.p0;
  const float len_sq_a = dot(da, da);
  const float len_sq_b = dot(db, db);
  const float cross_sq = length_squared(cross(da, db));
  const bool parallel = len_sq_a > detail::kDegenerateSq && len_sq_b > detail::kDegenerateSq &&
                        cross_sq <= detail::kParallelSinSq * len_sq_a * len_sq_b;

  // Normal: along the closest points; when the cores touch, the common perpendicular of the two
  // directions, else a perpendicular of A's core (deterministic, oriented from A towards B).
  Vec3 n;
  if (dist_sq > detail::kDegenerateSq) {
    n = (c.c2 - c.c1) * (1.0f / std::sqrt(dist_sq));
  } else if (!parallel && cross_sq > detail::kDegenerateSq * detail::kDegenerateSq) {
    n = normalize_or(cross(da, db), kFallbackNormal);
    if (dot(n, tb.position - ta.position) < 0.0f) n = -n;
  } else {
    n = perpendicular_fallback(len_sq_a > detail::kDegenerateSq ? da : db, ta.position, tb.position);
  }
  out.normal = n;

  if (parallel) {
    // Project B's end points onto A's core and clip to A's extent: the overlap [lo, hi] of the
    // two cores along A. Two points at its ends keep a capsule lying on a capsule from rocking.
    const float inv = 1.0f / len_sq_a;
    const float s0 = dot(sb.p0 - sa.p0, da) * inv;
    const float s1 = dot(sb.p1 - sa.p0, da) * inv;
    const float lo = std::max(0.0f, std::min(s0, s1));
    const float hi = std::min(1.0f, std::max(s0, s1));
    // Overlap longer than epsilon (in metres along A).
    if ((hi - lo) * (hi - lo) * len_sq_a > detail::kDegenerateSq) {
      const float ends[2] = {lo, hi};
      for (int k = 0; k < 2; ++k) {
        const Vec3 pa = sa.p0 + da * ends[k];
        const float t = detail::clamp01(dot(pa - sb.p0, db) / len_sq_b);
        const Vec3 pb = sb.p0 + db * t;
        const float separation = dot(pb - pa, n) - radii;
        if (separation > margin) continue;
        // Midway between A's surface (pa + n ra) and B's (pb - n rb).
        detail::push_point(out, ((pa + n * a.radius) + (pb - n * b.radius)) * 0.5f, separation,
                           static_cast<uint32_t>(k + 1));
      }
      if (out.point_count > 0) return true;
    }
  }
  const float dist = dist_sq > detail::kDegenerateSq ? std::sqrt(dist_sq) : 0.0f;
  detail::push_point(out, ((c.c1 + n * a.radius) + (c.c2 - n * b.radius)) * 0.5f, dist - radii, 0);
  return true;
}

bool collide_plane_sphere(const Shape& /*a*/, const Transform& ta, const Shape& b, const Transform& tb,
                          float margin, Manifold& out) {
  out.point_count = 0;
  const PlaneFrame plane = make_plane(ta);
  out.normal = plane.normal;
  emit_plane_sphere(plane, tb.position, b.radius, margin, 0, out);
  return out.point_count > 0;
}

bool collide_plane_capsule(const Shape& /*a*/, const Transform& ta, const Shape& b, const Transform& tb,
                           float margin, Manifold& out) {
  out.point_count = 0;
  const PlaneFrame plane = make_plane(ta);
  const detail::Segment seg = detail::capsule_segment(b, tb);
  out.normal = plane.normal;
  emit_plane_sphere(plane, seg.p0, b.radius, margin, 0, out);
  // A zero-length core has one end point, not two coincident ones.
  if (b.half_height > 0.0f) emit_plane_sphere(plane, seg.p1, b.radius, margin, 1, out);
  return out.point_count > 0;
}

bool collide_plane_box(const Shape& /*a*/, const Transform& ta, const Shape& b, const Transform& tb,
                       float margin, Manifold& out) {
  out.point_count = 0;
  const PlaneFrame plane = make_plane(ta);
  out.normal = plane.normal;
  const Mat3 m = to_mat3(tb.rotation);
  const Vec3 hx = m.c0 * b.half_extents.x;
  const Vec3 hy = m.c1 * b.half_extents.y;
  const Vec3 hz = m.c2 * b.half_extents.z;
  Vec3 points[8];
  float separations[8];
  uint32_t features[8];
  int count = 0;
  for (uint32_t v = 0; v < 8; ++v) {
    // Vertex v has local signs (bit 0: x, bit 1: y, bit 2: z; set = negative).
    const Vec3 p = tb.position + ((v & 1u) ? -hx : hx) + ((v & 2u) ? -hy : hy) + ((v & 4u) ? -hz : hz);
    const float separation = dot(plane.normal, p) - plane.offset;
    if (separation > margin) continue;
    points[count] = p - plane.normal * (0.5f * separation);
    separations[count] = separation;
    features[count] = v;
    ++count;
  }
  int selected[kMaxManifoldPoints];
  const int kept = detail::reduce_manifold(points, separations, count, plane.normal, selected);
  for (int i = 0; i < kept; ++i) {
    const int k = selected[i];
    detail::push_point(out, points[k], separations[k], features[k]);
  }
  return out.point_count > 0;
}

namespace {

using CollideFn = bool (*)(const Shape&, const Transform&, const Shape&, const Transform&, float, Manifold&);

/// (B, A) entry: runs F with the shapes swapped and flips the normal. Points (midway) and
/// separations are symmetric; feature ids are kept as F made them, so they stay stable.
template <CollideFn F>
bool collide_swapped(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                     Manifold& out) {
  const bool hit = F(b, tb, a, ta, margin, out);
  out.normal = -out.normal;
  return hit;
}

bool collide_nothing(const Shape&, const Transform&, const Shape&, const Transform&, float, Manifold& out) {
  out.point_count = 0;
  return false;
}

/// Convex A against mesh B through the single-manifold interface: the manifold holding the
/// deepest point (the continuous pass and other single-pair callers; the World keeps them all).
bool collide_convex_mesh(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                         Manifold& out) {
  out.point_count = 0;
  MeshManifolds all;
  if (!collide_mesh(a, ta, b, tb, margin, all)) return false;
  int best = 0;
  float deepest = 1.0e30f;
  for (int g = 0; g < all.count; ++g) {
    for (int i = 0; i < all.manifolds[g].point_count; ++i) {
      if (all.manifolds[g].points[i].separation < deepest) {
        deepest = all.manifolds[g].points[i].separation;
        best = g;
      }
    }
  }
  out = all.manifolds[best];
  return true;
}

constexpr std::size_t kKinds = static_cast<std::size_t>(ShapeKind::Count);

// Indexed [a.kind][b.kind]: Sphere, Box, Capsule, Plane, Hull, Mesh, HeightField, Cylinder.
constexpr CollideFn kConvexSurface = collide_convex_mesh;
constexpr CollideFn kSurfaceConvex = collide_swapped<collide_convex_mesh>;
constexpr std::array<std::array<CollideFn, kKinds>, kKinds> kCollideTable{{
    {collide_sphere_sphere, collide_sphere_box, collide_sphere_capsule, collide_swapped<collide_plane_sphere>,
     collide_sphere_hull, kConvexSurface, kConvexSurface, collide_swapped<collide_cylinder_sphere>},
    {collide_swapped<collide_sphere_box>, collide_box_box, collide_swapped<collide_capsule_box>,
     collide_swapped<collide_plane_box>, collide_box_hull, kConvexSurface, kConvexSurface,
     collide_swapped<collide_cylinder_box>},
    {collide_swapped<collide_sphere_capsule>, collide_capsule_box, collide_capsule_capsule,
     collide_swapped<collide_plane_capsule>, collide_capsule_hull, kConvexSurface, kConvexSurface,
     collide_swapped<collide_cylinder_capsule>},
    {collide_plane_sphere, collide_plane_box, collide_plane_capsule, collide_nothing, collide_plane_hull,
     collide_nothing, collide_nothing, collide_plane_cylinder},
    {collide_swapped<collide_sphere_hull>, collide_swapped<collide_box_hull>, collide_swapped<collide_capsule_hull>,
     collide_swapped<collide_plane_hull>, collide_hull_hull, kConvexSurface, kConvexSurface,
     collide_swapped<collide_cylinder_hull>},
    {kSurfaceConvex, kSurfaceConvex, kSurfaceConvex, collide_nothing, kSurfaceConvex, collide_nothing,
     collide_nothing, kSurfaceConvex},
    {kSurfaceConvex, kSurfaceConvex, kSurfaceConvex, collide_nothing, kSurfaceConvex, collide_nothing,
     collide_nothing, kSurfaceConvex},
    {collide_cylinder_sphere, collide_cylinder_box, collide_cylinder_capsule, collide_swapped<collide_plane_cylinder>,
     collide_cylinder_hull, kConvexSurface, kConvexSurface, collide_cylinder_cylinder},
}};

static_assert(static_cast<int>(ShapeKind::Sphere) == 0 && static_cast<int>(ShapeKind::Box) == 1 &&
                  static_cast<int>(ShapeKind::Capsule) == 2 && static_cast<int>(ShapeKind::Plane) == 3 &&
                  static_cast<int>(ShapeKind::Hull) == 4 && static_cast<int>(ShapeKind::Mesh) == 5 &&
                  static_cast<int>(ShapeKind::HeightField) == 6 && static_cast<int>(ShapeKind::Cylinder) == 7,
              "kCollideTable rows follow ShapeKind order");

}  // namespace

bool collide(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
             Manifold& out) {
  const auto ka = static_cast<std::size_t>(a.kind);
  const auto kb = static_cast<std::size_t>(b.kind);
  if (ka >= kKinds || kb >= kKinds) {
    out.point_count = 0;
    return false;
  }
  return kCollideTable[ka][kb](a, ta, b, tb, margin, out);
}

}  // namespace impulse::physics
