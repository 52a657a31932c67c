// Convex hull contacts. Hull-hull (and box-hull, the box seen as a hull) by the separating axis
// test over both hulls' face normals and the edge pairs that form a face of the Minkowski
// difference (the Gauss-map test), face-biased, then Sutherland-Hodgman clipping of the incident
// face against the reference face's side planes and reduction to 4 points (Gregorius, "The
// Separating Axis Test between Convex Polyhedra", GDC 2013; "Robust Contact Creation for Physics
// Simulations", GDC 2015). Sphere-hull and capsule-hull by exact closest points to the faces'
// polygons when the centre or core is outside (Ericson, "Real-Time Collision Detection", 2005,
// §5.1.2, §5.1.9), by the same SAT when it is inside. Plane-hull: the deepest vertices.
// Over 700 lines on purpose: the SAT, the clipping and the closest-point pairs share the hull view
// and the feature ids that warm starting matches.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "server/physics/convex_hull.h"
#include "server/physics/narrowphase.h"
#include "server/physics/narrowphase_detail.h"

namespace impulse::physics {

namespace {

using detail::Frame;
using detail::kDegenerateSq;
using detail::kEdgeAbsTol;
using detail::kEdgeParallelSq;
using detail::kEdgeRelTol;
using detail::kFaceAbsTol;
using detail::kFaceRelTol;
using detail::wins;

// --- Feature ids ------------------------------------------------------------------------------------
// Hull-hull face contact: bits 0-7 the point (0-63 an incident face vertex, 64 + 2 side + exiting:
// where the incident polygon crosses a reference side plane), 16-23 the incident face, 24-30 the
// reference face (< 128), bit 31 the reference hull (0 = A, 1 = B). Edge contact: bits 24-30 all
// set (no face has index 127), bits 8-15 A's edge, 0-7 B's edge.
constexpr uint32_t face_feature(uint32_t ref_is_b, uint32_t ref_face, uint32_t inc_face, uint32_t point) {
  return (ref_is_b << 31) | (ref_face << 24) | (inc_face << 16) | point;
}
constexpr uint32_t kHullEdgeContact = 0x7Fu << 24;

constexpr int kMaxPolygon = 2 * static_cast<int>(kMaxHullVertices) + 8;  // incident face + one per side plane

/// The unit axis normal to edge directions u and v, pointing out of the hull whose centre is the
/// origin, as seen from a point `on_edge` of its edge; false for (nearly) parallel edges, whose
/// axis means nothing (the face axes cover them).
bool edge_pair_axis(Vec3 u, Vec3 v, Vec3 on_edge, Vec3& axis) {
  axis = cross(u, v);
  const float len_sq = length_squared(axis);
  if (len_sq < kEdgeParallelSq * length_squared(u) * length_squared(v) || len_sq <= kDegenerateSq) return false;
  axis = axis * (1.0f / std::sqrt(len_sq));
  if (dot(axis, on_edge) < 0.0f) axis = -axis;
  return true;
}

/// Closest point to `p` on the convex polygon `face` of `hull` (all in the hull's frame).
Vec3 closest_on_face(const HullView& hull, uint32_t f, Vec3 p) {
  const HullFace face = hull.faces[f];
  const HullPlane& plane = hull.planes[f];
  const Vec3 projected = p - plane.normal * (dot(plane.normal, p) - plane.offset);
  bool inside = true;
  for (int i = 0; i < face.count && inside; ++i) {
    const Vec3 a = hull.vertices[hull.face_vertices[face.first + i]];
    const Vec3 b = hull.vertices[hull.face_vertices[face.first + (i + 1) % face.count]];
    if (dot(cross(b - a, plane.normal), projected - a) > 0.0f) inside = false;
  }
  if (inside) return projected;
  Vec3 best = projected;
  float best_sq = 1.0e30f;
  for (int i = 0; i < face.count; ++i) {
    const Vec3 a = hull.vertices[hull.face_vertices[face.first + i]];
    const Vec3 b = hull.vertices[hull.face_vertices[face.first + (i + 1) % face.count]];
    const Vec3 ab = b - a;
    const float len_sq = dot(ab, ab);
    const float t = len_sq > kDegenerateSq ? detail::clamp01(dot(p - a, ab) / len_sq) : 0.0f;
    const Vec3 q = a + ab * t;
    const float d_sq = length_squared(p - q);
    if (d_sq < best_sq) {
      best_sq = d_sq;
      best = q;
    }
  }
  return best;
}

/// The face whose plane the point is farthest in front of (the deepest-penetrated face when inside).
struct FaceQuery {
  float separation = -1.0e30f;
  uint32_t face = 0;
};
FaceQuery max_face_separation(const HullView& hull, Vec3 p) {
  FaceQuery q;
  for (uint32_t f = 0; f < hull.face_count; ++f) {
    const float s = dot(hull.planes[f].normal, p) - hull.planes[f].offset;
    if (s > q.separation) q = {s, f};
  }
  return q;
}

/// Closest pair of a point-or-segment (p0, p1) and the hull's surface, when the segment is
/// outside the hull: the faces it is in front of hold the closest point.
struct SurfaceClosest {
  Vec3 on_hull;
  Vec3 on_segment;
  float distance_sq = 1.0e30f;
};
SurfaceClosest closest_to_segment(const HullView& hull, Vec3 p0, Vec3 p1) {
  SurfaceClosest best;
  const bool is_point = length_squared(p1 - p0) <= kDegenerateSq;
  for (uint32_t f = 0; f < hull.face_count; ++f) {
    const HullPlane& plane = hull.planes[f];
    if (std::max(dot(plane.normal, p0), dot(plane.normal, p1)) - plane.offset <= 0.0f) continue;
    auto consider = [&](Vec3 on_hull, Vec3 on_segment) {
      const float d_sq = length_squared(on_segment - on_hull);
      if (d_sq < best.distance_sq) best = {on_hull, on_segment, d_sq};
    };
    consider(closest_on_face(hull, f, p0), p0);
    if (is_point) continue;
    consider(closest_on_face(hull, f, p1), p1);
    const HullFace face = hull.faces[f];
    for (int i = 0; i < face.count; ++i) {
      const Vec3 a = hull.vertices[hull.face_vertices[face.first + i]];
      const Vec3 b = hull.vertices[hull.face_vertices[face.first + (i + 1) % face.count]];
      const detail::SegmentClosest c = detail::closest_segment_segment(p0, p1, a, b);
      consider(c.c2, c.c1);
    }
  }
  return best;
}

/// Clips the segment (p0, p1) to the prism over face f (its side planes). Returns false when
/// nothing is left.
bool clip_segment_to_face(const HullView& hull, uint32_t f, Vec3& p0, Vec3& p1) {
  const HullFace face = hull.faces[f];
  const Vec3 n = hull.planes[f].normal;
  float t0 = 0.0f;
  float t1 = 1.0f;
  const Vec3 d = p1 - p0;
  for (int i = 0; i < face.count; ++i) {
    const Vec3 a = hull.vertices[hull.face_vertices[face.first + i]];
    const Vec3 b = hull.vertices[hull.face_vertices[face.first + (i + 1) % face.count]];
    const Vec3 side = cross(b - a, n);  // outward
    const float d0 = dot(side, p0 - a);
    const float dd = dot(side, d);
    if (std::fabs(dd) <= 1.0e-12f) {
      if (d0 > 0.0f) return false;
      continue;
    }
    const float t = -d0 / dd;
    if (dd > 0.0f) {
      t1 = std::min(t1, t);
    } else {
      t0 = std::max(t0, t);
    }
    if (t0 > t1) return false;
  }
  const Vec3 q0 = p0 + d * t0;
  const Vec3 q1 = p0 + d * t1;
  p0 = q0;
  p1 = q1;
  return true;
}

/// Emits up to 4 of `count` candidate points (already in the world frame) into `out`.
void emit_reduced(const Vec3* points, const float* separations, const uint32_t* features, int count, Manifold& out) {
  int selected[kMaxManifoldPoints];
  const int kept = detail::reduce_manifold(points, separations, count, out.normal, selected);
  for (int i = 0; i < kept; ++i) {
    const int k = selected[i];
    detail::push_point(out, points[k], separations[k], features[k]);
  }
}

/// A face contact: `ref`'s face `ref_face` as the reference, the incident face of `inc` clipped
/// against its side planes (both views in A's frame `fa`; ref_is_b: the reference is B, so the
/// normal is flipped). False, `out` empty, when no clipped point is within the margin.
bool face_contact(const HullView& ref, const HullView& inc, uint32_t ref_face, bool ref_is_b, const Frame& fa,
                  float margin, Manifold& out) {
  out.point_count = 0;
  const HullPlane ref_plane = ref.planes[ref_face];
  // Incident face: the most anti-parallel of the faces around the incident hull's deepest vertex
  // (Gregorius 2015). Any face of the hull could be more anti-parallel yet lie elsewhere, away
  // from the reference face, and clip to nothing.
  uint32_t deepest = 0;
  for (uint32_t v = 1; v < inc.vertex_count; ++v) {
    if (dot(inc.vertices[v], ref_plane.normal) < dot(inc.vertices[deepest], ref_plane.normal)) deepest = v;
  }
  uint32_t inc_face = 0;
  float most_anti = 1.0e30f;
  for (uint32_t f = 0; f < inc.face_count; ++f) {
    const HullFace face = inc.faces[f];
    bool around = false;
    for (int i = 0; i < face.count && !around; ++i) around = inc.face_vertices[face.first + i] == deepest;
    const float c = dot(inc.planes[f].normal, ref_plane.normal);
    if (around && c < most_anti) {
      most_anti = c;
      inc_face = f;
    }
  }
  Vec3 poly[kMaxPolygon];
  uint32_t ids[kMaxPolygon];
  int count = 0;
  {
    const HullFace face = inc.faces[inc_face];
    for (int i = 0; i < face.count; ++i) {
      poly[count] = inc.vertices[inc.face_vertices[face.first + i]];
      ids[count] = static_cast<uint32_t>(i);
      ++count;
    }
  }
  Vec3 clipped[kMaxPolygon];
  uint32_t clipped_ids[kMaxPolygon];
  const HullFace rface = ref.faces[ref_face];
  for (int s = 0; s < rface.count && count > 0; ++s) {
    const Vec3 r0 = ref.vertices[ref.face_vertices[rface.first + s]];
    const Vec3 r1 = ref.vertices[ref.face_vertices[rface.first + (s + 1) % rface.count]];
    const Vec3 side = cross(r1 - r0, ref_plane.normal);  // outward of the reference face
    int n = 0;
    for (int i = 0; i < count && n + 2 <= kMaxPolygon; ++i) {
      const Vec3 p = poly[i];
      const Vec3 q = poly[(i + 1) % count];
      const float dp = dot(side, p - r0);
      const float dq = dot(side, q - r0);
      if (dp <= 0.0f) {
        clipped[n] = p;
        clipped_ids[n] = ids[i];
        ++n;
      }
      if ((dp <= 0.0f) != (dq <= 0.0f)) {
        clipped[n] = p + (q - p) * (dp / (dp - dq));
        clipped_ids[n] = 64u + 2u * static_cast<uint32_t>(s) + (dp <= 0.0f ? 1u : 0u);
        ++n;
      }
    }
    std::copy(clipped, clipped + n, poly);
    std::copy(clipped_ids, clipped_ids + n, ids);
    count = n;
  }
  // Points below the reference plane (within the margin), moved midway between the surfaces.
  const Vec3 normal_a = ref_is_b ? -ref_plane.normal : ref_plane.normal;  // from A towards B
  out.normal = detail::to_world_dir(fa, normal_a);
  Vec3 points[kMaxPolygon];
  float separations[kMaxPolygon];
  uint32_t features[kMaxPolygon];
  int kept = 0;
  for (int i = 0; i < count; ++i) {
    const float s = dot(ref_plane.normal, poly[i]) - ref_plane.offset;
    if (s > margin) continue;
    points[kept] = detail::to_world(fa, poly[i] - ref_plane.normal * (0.5f * s));
    separations[kept] = s;
    features[kept] = face_feature(ref_is_b ? 1u : 0u, ref_face, inc_face, ids[i]);
    ++kept;
  }
  if (kept == 0) return false;
  emit_reduced(points, separations, features, kept, out);
  return out.point_count > 0;
}

/// The last resort of a hull pair whose faces clip to nothing (a corner beside a small face): one
/// point from features found by brute force (O(V F + E^2), rare). Apart (sat_separation > 0): the
/// exact closest points (vertices against face polygons, edges against edges). Overlapping: the
/// vertex of either hull inside the other that lies deepest along n (A towards B, A's frame);
/// failing that, B's support point along -n. The point is midway between the surfaces.
bool single_point_contact(const HullView& a, const HullView& b, Vec3 n, float sat_separation, const Frame& fa,
                          float margin, Manifold& out) {
  out.point_count = 0;
  constexpr uint32_t kFeature = kHullEdgeContact | 0xFFFFu;
  if (sat_separation > 0.0f) {
    Vec3 pa{};
    Vec3 pb{};
    float best = 1.0e30f;
    auto consider = [&](Vec3 on_a, Vec3 on_b) {
      const float d = length_squared(on_b - on_a);
      if (d < best) {
        best = d;
        pa = on_a;
        pb = on_b;
      }
    };
    for (uint32_t f = 0; f < a.face_count; ++f) {
      for (uint32_t v = 0; v < b.vertex_count; ++v) consider(closest_on_face(a, f, b.vertices[v]), b.vertices[v]);
    }
    for (uint32_t f = 0; f < b.face_count; ++f) {
      for (uint32_t v = 0; v < a.vertex_count; ++v) consider(a.vertices[v], closest_on_face(b, f, a.vertices[v]));
    }
    for (uint32_t i = 0; i < a.edge_count; ++i) {
      for (uint32_t j = 0; j < b.edge_count; ++j) {
        const detail::SegmentClosest c =
            detail::closest_segment_segment(a.vertices[a.edges[i].v0], a.vertices[a.edges[i].v1],
                                            b.vertices[b.edges[j].v0], b.vertices[b.edges[j].v1]);
        consider(c.c1, c.c2);
      }
    }
    const float dist = std::sqrt(best);
    if (dist > margin) return false;
    out.normal = detail::to_world_dir(fa, dist > kNarrowphaseEpsilon ? (pb - pa) * (1.0f / dist) : n);
    detail::push_point(out, detail::to_world(fa, (pa + pb) * 0.5f), dist, kFeature);
    return true;
  }
  const float a_top = dot(hull_support(a, n), n);
  const float b_bottom = dot(hull_support(b, -n), n);
  float deepest = 1.0e30f;
  Vec3 point{};
  for (uint32_t v = 0; v < b.vertex_count; ++v) {  // B's vertices inside A: separation along n
    if (max_face_separation(a, b.vertices[v]).separation > 0.0f) continue;
    const float s = dot(n, b.vertices[v]) - a_top;
    if (s < deepest) {
      deepest = s;
      point = b.vertices[v] - n * (0.5f * s);
    }
  }
  for (uint32_t v = 0; v < a.vertex_count; ++v) {  // A's vertices inside B
    if (max_face_separation(b, a.vertices[v]).separation > 0.0f) continue;
    const float s = b_bottom - dot(n, a.vertices[v]);
    if (s < deepest) {
      deepest = s;
      point = a.vertices[v] + n * (0.5f * s);
    }
  }
  if (deepest > 1.0e29f) {  // edges crossing, no vertex inside: B's support point
    const Vec3 p = hull_support(b, -n);
    deepest = dot(n, p) - a_top;
    point = p - n * (0.5f * deepest);
  }
  if (deepest > margin) return false;
  out.normal = detail::to_world_dir(fa, n);
  detail::push_point(out, detail::to_world(fa, point), deepest, kFeature);
  return true;
}

/// Hull A (at fa) against hull B (at fb), everything in A's frame until the output.
bool collide_hull_views(const HullView& a, const Frame& fa, const HullView& b, const Frame& fb, float scale,
                        float margin, Manifold& out) {
  out.point_count = 0;
  // Bounding spheres apart by more than the margin: no contact (most broadphase pairs of a pile).
  const float reach = a.radius + b.radius + margin;
  if (length_squared(fb.origin - fa.origin) > reach * reach) return false;
  // B in A's frame.
  Vec3 vb[kMaxHullVertices];
  HullPlane pb[2 * kMaxHullVertices];
  for (uint32_t i = 0; i < b.vertex_count; ++i) vb[i] = detail::to_local(fa, detail::to_world(fb, b.vertices[i]));
  for (uint32_t f = 0; f < b.face_count; ++f) {
    const Vec3 n = detail::to_local_dir(fa, detail::to_world_dir(fb, b.planes[f].normal));
    const Vec3 on_plane = detail::to_local(fa, detail::to_world(fb, b.planes[f].normal * b.planes[f].offset));
    pb[f] = {n, dot(n, on_plane)};
  }
  HullView bv = b;
  bv.vertices = vb;
  bv.planes = pb;

  // Face axes of A: B's deepest vertex below each plane.
  FaceQuery face_a;
  for (uint32_t f = 0; f < a.face_count; ++f) {
    const Vec3 n = a.planes[f].normal;
    const float s = dot(hull_support(bv, -n), n) - a.planes[f].offset;
    if (s > margin) return false;
    if (s > face_a.separation) face_a = {s, f};
  }
  FaceQuery face_b;
  for (uint32_t f = 0; f < bv.face_count; ++f) {
    const Vec3 n = pb[f].normal;
    const float s = dot(hull_support(a, -n), n) - pb[f].offset;
    if (s > margin) return false;
    if (s > face_b.separation) face_b = {s, f};
  }
  // Edge pairs whose arcs cross on the Gauss map (Gregorius 2013, IsMinkowskiFace). B's arcs'
  // plane normals (d x c, c and d its faces' negated normals) once per edge.
  Vec3 b_arcs[3 * kMaxHullVertices];
  for (uint32_t j = 0; j < bv.edge_count; ++j) b_arcs[j] = cross(pb[bv.edges[j].f1].normal, pb[bv.edges[j].f0].normal);
  float edge_sep = -1.0e30f;
  uint32_t edge_a = 0;
  uint32_t edge_b = 0;
  Vec3 edge_axis{};
  for (uint32_t i = 0; i < a.edge_count; ++i) {
    const HullEdge& ea = a.edges[i];
    const Vec3 pa = a.vertices[ea.v0];
    const Vec3 ua = a.vertices[ea.v1] - pa;
    const Vec3 na0 = a.planes[ea.f0].normal;
    const Vec3 na1 = a.planes[ea.f1].normal;
    const Vec3 bxa = cross(na1, na0);
    // Which side of A's arc plane each of B's (negated) face normals lies on, once per A edge:
    // the pair loop then mostly compares two of these and moves on.
    float side[2 * kMaxHullVertices];
    for (uint32_t f = 0; f < bv.face_count; ++f) side[f] = -dot(pb[f].normal, bxa);
    for (uint32_t j = 0; j < bv.edge_count; ++j) {
      const HullEdge& eb = bv.edges[j];
      const float cba = side[eb.f0];
      const float dba = side[eb.f1];
      if (!(cba * dba < 0.0f)) continue;
      const Vec3 dxc = b_arcs[j];
      const float adc = dot(na0, dxc);
      const float bdc = dot(na1, dxc);
      if (!(adc * bdc < 0.0f && cba * bdc > 0.0f)) continue;
      const Vec3 pbv = vb[eb.v0];
      Vec3 axis;
      if (!edge_pair_axis(ua, vb[eb.v1] - pbv, pa, axis)) continue;
      const float s = dot(axis, pbv - pa);
      if (s > margin) return false;
      if (s > edge_sep) {
        edge_sep = s;
        edge_a = i;
        edge_b = j;
        edge_axis = axis;
      }
    }
  }

  const bool ref_is_b = wins(face_b.separation, face_a.separation, kFaceRelTol, kFaceAbsTol * scale);
  const float face_sep = ref_is_b ? face_b.separation : face_a.separation;
  if (edge_sep > -1.0e29f && wins(edge_sep, face_sep, kEdgeRelTol, kEdgeAbsTol * scale)) {
    const HullEdge& ea = a.edges[edge_a];
    const HullEdge& eb = bv.edges[edge_b];
    const detail::SegmentClosest c =
        detail::closest_segment_segment(a.vertices[ea.v0], a.vertices[ea.v1], vb[eb.v0], vb[eb.v1]);
    out.normal = detail::to_world_dir(fa, edge_axis);
    // Apart, the edges' closest points may sit at an edge's end: their distance, not its
    // projection on the axis, is then the gap (the point stays midway between the surfaces).
    float separation = dot(edge_axis, c.c2 - c.c1);
    if (separation > 0.0f) separation = length(c.c2 - c.c1);
    detail::push_point(out, detail::to_world(fa, (c.c1 + c.c2) * 0.5f), separation,
                       kHullEdgeContact | (edge_a << 8) | edge_b);
    return true;
  }

  // Face contact: the reference face, else the other hull's best face (a small reference face
  // whose incident face lies beside it clips to nothing), else the deepest incident vertex.
  const HullView& ref = ref_is_b ? bv : a;
  const HullView& inc = ref_is_b ? a : bv;
  const uint32_t ref_face = ref_is_b ? face_b.face : face_a.face;
  if (face_contact(ref, inc, ref_face, ref_is_b, fa, margin, out)) return true;
  if (face_contact(inc, ref, ref_is_b ? face_a.face : face_b.face, !ref_is_b, fa, margin, out)) return true;
  return single_point_contact(a, bv, ref_is_b ? -ref.planes[ref_face].normal : ref.planes[ref_face].normal,
                              face_sep, fa, margin, out);
}

/// A sphere (centre c, radius r, hull frame) against a hull; the normal from the sphere to the hull.
bool collide_point_hull(Vec3 c, float r, const HullView& hull, const Frame& fh, float margin, Manifold& out) {
  out.point_count = 0;
  const FaceQuery q = max_face_separation(hull, c);
  if (q.separation > r + margin) return false;
  if (q.separation <= 0.0f) {  // centre inside: out through the face of least penetration
    const Vec3 n = hull.planes[q.face].normal;
    out.normal = detail::to_world_dir(fh, -n);
    detail::push_point(out, detail::to_world(fh, c - n * (0.5f * (q.separation + r))), q.separation - r, q.face);
    return true;
  }
  const SurfaceClosest s = closest_to_segment(hull, c, c);
  const float dist = std::sqrt(s.distance_sq);
  if (dist > r + margin) return false;
  const Vec3 n = dist > kNarrowphaseEpsilon ? (c - s.on_hull) * (1.0f / dist) : hull.planes[q.face].normal;
  out.normal = detail::to_world_dir(fh, -n);
  detail::push_point(out, detail::to_world(fh, (s.on_hull + (c - n * r)) * 0.5f), dist - r, q.face);
  return true;
}

}  // namespace

bool collide_sphere_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                         Manifold& out) {
  const Frame fb = detail::make_frame(tb);
  return collide_point_hull(detail::to_local(fb, ta.position), a.radius, b.hull->view(), fb, margin, out);
}

namespace {

/// A capsule against a hull view at fb; `hull_size` is the hull's hull_scale.
bool collide_capsule_view(const Shape& a, const Transform& ta, const HullView& hull, float hull_size, const Frame& fb,
                          float margin, Manifold& out) {
  out.point_count = 0;
  const detail::Segment seg = detail::capsule_segment(a, ta);
  const Vec3 p0 = detail::to_local(fb, seg.p0);
  const Vec3 p1 = detail::to_local(fb, seg.p1);
  const Vec3 d = p1 - p0;
  const float r = a.radius;
  const float reach = r + margin;
  if (a.half_height <= 0.0f) return collide_point_hull(p0, r, hull, fb, margin, out);

  // SAT of the core against the hull: face normals, then hull edge x core.
  FaceQuery face;
  for (uint32_t f = 0; f < hull.face_count; ++f) {
    const HullPlane& pl = hull.planes[f];
    const float s = std::min(dot(pl.normal, p0), dot(pl.normal, p1)) - pl.offset;
    if (s > reach) return false;
    if (s > face.separation) face = {s, f};
  }
  float edge_sep = -1.0e30f;
  uint32_t edge = 0;
  Vec3 edge_axis{};
  for (uint32_t i = 0; i < hull.edge_count; ++i) {
    const HullEdge& e = hull.edges[i];
    // The core's Gauss map is the great circle normal to d: the edge's arc must cross it.
    if (dot(hull.planes[e.f0].normal, d) * dot(hull.planes[e.f1].normal, d) >= 0.0f) continue;
    const Vec3 v0 = hull.vertices[e.v0];
    Vec3 axis;
    if (!edge_pair_axis(hull.vertices[e.v1] - v0, d, v0, axis)) continue;
    const float s = dot(axis, p0 - v0);
    if (s > reach) return false;
    if (s > edge_sep) {
      edge_sep = s;
      edge = i;
      edge_axis = axis;
    }
  }
  const float scale = std::min(r + a.half_height, hull_size);
  const Vec3 n_face = hull.planes[face.face].normal;
  const float d_len = std::sqrt(dot(d, d));
  const bool parallel = std::fabs(dot(n_face, d)) <= detail::kParallelSin * d_len;

  // Two points where the core lies along the reference face: clip it to the face's prism.
  auto face_points = [&]() {
    Vec3 q0 = p0;
    Vec3 q1 = p1;
    if (!clip_segment_to_face(hull, face.face, q0, q1)) return false;
    out.normal = detail::to_world_dir(fb, -n_face);
    const Vec3 ends[2] = {q0, q1};
    for (int k = 0; k < 2; ++k) {
      const float s = dot(n_face, ends[k]) - hull.planes[face.face].offset;
      if (s - r > margin) continue;
      detail::push_point(out, detail::to_world(fb, ends[k] - n_face * (0.5f * (s + r))), s - r, (face.face << 8) | k);
    }
    return out.point_count > 0;
  };

  if (std::max(face.separation, edge_sep) > 0.0f) {  // the core is outside: exact closest points
    const SurfaceClosest s = closest_to_segment(hull, p0, p1);
    const float dist = std::sqrt(s.distance_sq);
    if (dist > reach) return false;
    if (parallel && face.separation >= dist - 1.0e-3f * scale && face_points()) return true;
    out.point_count = 0;
    const Vec3 n = dist > kNarrowphaseEpsilon ? (s.on_segment - s.on_hull) * (1.0f / dist) : n_face;
    out.normal = detail::to_world_dir(fb, -n);
    detail::push_point(out, detail::to_world(fb, (s.on_hull + (s.on_segment - n * r)) * 0.5f), dist - r, 1u << 16);
    return true;
  }
  if (!(edge_sep > -1.0e29f && wins(edge_sep, face.separation, kEdgeRelTol, kEdgeAbsTol * scale))) {
    if (face_points()) return true;
    // The core crosses the face's prism nowhere (it enters through a neighbour): its deeper end.
    out.point_count = 0;
    const Vec3 deep = dot(n_face, p0) <= dot(n_face, p1) ? p0 : p1;
    const float s = dot(n_face, deep) - hull.planes[face.face].offset;
    out.normal = detail::to_world_dir(fb, -n_face);
    detail::push_point(out, detail::to_world(fb, deep - n_face * (0.5f * (s + r))), s - r, face.face << 8);
    return true;
  }
  const HullEdge& e = hull.edges[edge];
  const detail::SegmentClosest c = detail::closest_segment_segment(p0, p1, hull.vertices[e.v0], hull.vertices[e.v1]);
  out.normal = detail::to_world_dir(fb, -edge_axis);
  const float s = dot(edge_axis, c.c1 - c.c2);
  detail::push_point(out, detail::to_world(fb, (c.c2 + (c.c1 - edge_axis * r)) * 0.5f), s - r, (1u << 17) | edge);
  return true;
}

/// Hull B's vertices and planes in A's frame (collide_hull_views' first step).
struct ViewInFrame {
  Vec3 vertices[kMaxHullVertices];
  HullPlane planes[2 * kMaxHullVertices];
  HullView view;
  ViewInFrame(const HullView& b, const Frame& fb, const Frame& fa) : view(b) {
    for (uint32_t i = 0; i < b.vertex_count; ++i) vertices[i] = detail::to_local(fa, detail::to_world(fb, b.vertices[i]));
    for (uint32_t f = 0; f < b.face_count; ++f) {
      const Vec3 n = detail::to_local_dir(fa, detail::to_world_dir(fb, b.planes[f].normal));
      const Vec3 on_plane = detail::to_local(fa, detail::to_world(fb, b.planes[f].normal * b.planes[f].offset));
      planes[f] = {n, dot(n, on_plane)};
    }
    view.vertices = vertices;
    view.planes = planes;
  }
};

}  // namespace

bool collide_capsule_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                          Manifold& out) {
  return collide_capsule_view(a, ta, b.hull->view(), detail::hull_scale(*b.hull), detail::make_frame(tb), margin, out);
}

namespace detail {

/// The box's 12 edges, derived once from its face loops as build_convex_hull derives a hull's.
const HullEdge* box_edges() {
  static const auto edges = [] {
    std::array<HullEdge, 12> out{};
    int n = 0;
    for (uint8_t f = 0; f < 6; ++f) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t a = kBoxLoops[4 * f + i];
        const uint8_t b = kBoxLoops[4 * f + (i + 1) % 4];
        if (a < b) out[static_cast<size_t>(n++)] = HullEdge{a, b, f, 0};
      }
    }
    for (uint8_t f = 0; f < 6; ++f) {  // the face that walks b -> a
      for (int i = 0; i < 4; ++i) {
        const uint8_t a = kBoxLoops[4 * f + i];
        const uint8_t b = kBoxLoops[4 * f + (i + 1) % 4];
        if (a > b) {
          for (HullEdge& e : out) {
            if (e.v0 == b && e.v1 == a) e.f1 = f;
          }
        }
      }
    }
    return out;
  }();
  return edges.data();
}

bool collide_convex_polytope(const Shape& a, const Transform& ta, const HullView& b, float b_size, const Transform& tb,
                             float margin, Manifold& out) {
  const Frame fb = make_frame(tb);
  switch (a.kind) {
    case ShapeKind::Sphere: return collide_point_hull(to_local(fb, ta.position), a.radius, b, fb, margin, out);
    case ShapeKind::Capsule: return collide_capsule_view(a, ta, b, b_size, fb, margin, out);
    case ShapeKind::Cylinder: return collide_cylinder_polytope(a, ta, b, tb, margin, out);
    case ShapeKind::Box:
    case ShapeKind::Hull: {
      const detail::ConvexView av(a);
      return collide_hull_views(av.view, make_frame(ta), b, fb, std::min(av.size, b_size), margin, out);
    }
    default: out.point_count = 0; return false;
  }
}

bool collide_convex_polytope_face(const Shape& a, const Transform& ta, const HullView& b, uint32_t face,
                                  const Transform& tb, float margin, Manifold& out) {
  out.point_count = 0;
  const Frame fb = make_frame(tb);
  const Vec3 n = b.planes[face].normal;
  const float offset = b.planes[face].offset;
  out.normal = to_world_dir(fb, -n);
  switch (a.kind) {
    case ShapeKind::Cylinder: return collide_cylinder_polytope_face(a, ta, b, face, tb, margin, out);
    case ShapeKind::Sphere: {
      const Vec3 c = to_local(fb, ta.position);
      const float s = dot(n, c) - offset - a.radius;
      if (s > margin) return false;
      push_point(out, to_world(fb, c - n * (a.radius + 0.5f * s)), s, face);
      return true;
    }
    case ShapeKind::Capsule: {
      const Segment seg = capsule_segment(a, ta);
      Vec3 q0 = to_local(fb, seg.p0);
      Vec3 q1 = to_local(fb, seg.p1);
      // The part of the core over the face; none: its deeper end, which some neighbour covers.
      if (!clip_segment_to_face(b, face, q0, q1)) q0 = q1 = dot(n, q0) <= dot(n, q1) ? q0 : q1;
      const int ends = length_squared(q1 - q0) > kDegenerateSq ? 2 : 1;
      const Vec3 e[2] = {q0, q1};
      for (int k = 0; k < ends; ++k) {
        const float s = dot(n, e[k]) - offset - a.radius;
        if (s > margin) continue;
        push_point(out, to_world(fb, e[k] - n * (a.radius + 0.5f * s)), s, (face << 8) | static_cast<uint32_t>(k));
      }
      return out.point_count > 0;
    }
    case ShapeKind::Box:
    case ShapeKind::Hull: {
      const detail::ConvexView av(a);
      const Frame fa = make_frame(ta);
      const ViewInFrame bv(b, fb, fa);
      if (face_contact(bv.view, av.view, face, true, fa, margin, out)) return true;
      // The incident face lies beside this face's prism: the deepest vertex alone.
      out.point_count = 0;
      out.normal = to_world_dir(fb, -n);
      const Vec3 nl = bv.planes[face].normal;
      const Vec3 deep = hull_support(av.view, -nl);
      const float s = dot(nl, deep) - bv.planes[face].offset;
      if (s > margin) return false;
      push_point(out, to_world(fa, deep - nl * (0.5f * s)), s, face);
      return true;
    }
    default: return false;
  }
}

}  // namespace detail

bool collide_box_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                      Manifold& out) {
  const detail::BoxHull box(a.half_extents);
  const float scale = std::min(detail::box_scale(a.half_extents), detail::hull_scale(*b.hull));
  return collide_hull_views(box.view(), detail::make_frame(ta), b.hull->view(), detail::make_frame(tb), scale,
                            margin, out);
}

bool collide_hull_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                       Manifold& out) {
  const float scale = std::min(detail::hull_scale(*a.hull), detail::hull_scale(*b.hull));
  return collide_hull_views(a.hull->view(), detail::make_frame(ta), b.hull->view(), detail::make_frame(tb), scale,
                            margin, out);
}

bool collide_plane_hull(const Shape& /*a*/, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                        Manifold& out) {
  out.point_count = 0;
  const Vec3 n = rotate(ta.rotation, Vec3{0.0f, 1.0f, 0.0f});
  const float offset = dot(n, ta.position);
  out.normal = n;
  const Frame fb = detail::make_frame(tb);
  const ConvexHull& hull = *b.hull;
  Vec3 points[kMaxHullVertices];
  float separations[kMaxHullVertices];
  uint32_t features[kMaxHullVertices];
  int count = 0;
  for (uint32_t v = 0; v < hull.vertices.size(); ++v) {
    const Vec3 p = detail::to_world(fb, hull.vertices[v]);
    const float s = dot(n, p) - offset;
    if (s > margin) continue;
    points[count] = p - n * (0.5f * s);
    separations[count] = s;
    features[count] = v;
    ++count;
  }
  emit_reduced(points, separations, features, count, out);
  return out.point_count > 0;
}

Aabb hull_aabb(const ConvexHull& hull, const Transform& t) {
  const Mat3 m = to_mat3(t.rotation);
  Vec3 lo{1.0e30f, 1.0e30f, 1.0e30f};
  Vec3 hi{-1.0e30f, -1.0e30f, -1.0e30f};
  for (const Vec3& v : hull.vertices) {
    const Vec3 p = m * v;
    lo = min(lo, p);
    hi = max(hi, p);
  }
  return {t.position + lo, t.position + hi};
}

}  // namespace impulse::physics
