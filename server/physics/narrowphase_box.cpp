// Box contacts: box-box by the separating axis test over 15 axes with face-biased axis choice,
// Sutherland-Hodgman clipping and reduction to 4 points (Gregorius, "The Separating Axis Test
// between Convex Polyhedra", GDC 2013; "Robust Contact Creation for Physics Simulations", GDC 2015);
// sphere-box and capsule-box by closest points in the box frame (Ericson, "Real-Time Collision
// Detection", 2005, §5.1.3, §5.1.9, §5.2.5) with a segment-box SAT for a core inside the box.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "server/physics/narrowphase.h"
#include "server/physics/narrowphase_detail.h"

namespace impulse::physics {

namespace {

using detail::kDegenerateSq;
using detail::kFallbackNormal;
using detail::kEdgeAbsTol;
using detail::kEdgeParallelSq;
using detail::kEdgeRelTol;
using detail::kFaceAbsTol;
using detail::kFaceRelTol;
using detail::wins;

/// An oriented box in the world frame.
struct BoxFrame {
  Vec3 center;
  Vec3 axis[3];  ///< unit local axes in the world frame
  float half[3];
};

BoxFrame make_box_frame(const Shape& s, const Transform& t) {
  const Mat3 m = to_mat3(t.rotation);
  return {t.position, {m.c0, m.c1, m.c2}, {s.half_extents.x, s.half_extents.y, s.half_extents.z}};
}

// --- Feature ids -------------------------------------------------------------------------------
// Box-box face contact: bits 0-4 the point's feature (0-3 incident face vertex, 4-7 reference face
// corner, 8 + 4 incident edge + side plane: where an incident edge crosses a side plane of the
// reference face), 5-7 incident face, 8-10 reference face (face = 2 axis + (normal along -axis)),
// bit 11 reference box (0 = A, 1 = B). Box-box edge contact: bit 23 set, bits 0-3 B's edge, 4-7
// A's edge (edge = 4 axis + sign bits of the other two axes).
constexpr uint32_t kEdgeContactBit = 1u << 23;

constexpr uint32_t face_feature(uint32_t ref_is_b, uint32_t ref_face, uint32_t inc_face, uint32_t point) {
  return (ref_is_b << 11) | (ref_face << 8) | (inc_face << 5) | point;
}

/// Clipped points within this fraction of the linear scale of an incident vertex or a reference
/// corner are welded onto it (1 % of the mean half extent: 5 mm for a 1 m cube). Equal boxes stacked
/// flush have incident vertices exactly on the reference side planes; float jitter moves them in
/// and out, and without welding each step would alternate between "vertex" and "two crossings"
/// ids and lose the warm start. Welded points keep the deepest.
constexpr float kWeldFraction = 0.01f;

// --- Box-box ------------------------------------------------------------------------------------


/// A vertex of the clip polygon in the reference face's frame (x along u, y along v, z = height
/// above the face along its normal) and the two lines it lies on: 0-3 the incident face's edges
/// (edge m runs from vertex m to m + 1), 4-7 the reference face's sides x = +hu, -hu, y = +hv, -hv.
struct ClipVertex {
  Vec3 p;
  uint8_t l_in = 0;
  uint8_t l_out = 0;
};

/// Upper bound on the clip polygon: 4 vertices + at most 1 per clip line for a convex polygon;
/// doubled so numerically non-convex input cannot overflow (extra vertices are dropped).
constexpr int kMaxClip = 16;

/// Keeps the part of `in` with sign * p[axis] <= limit (axis 0 = x, 1 = y): Sutherland-Hodgman
/// against one side of the reference face. `line` is recorded in the new vertices.
int clip_polygon(const ClipVertex* in, int count, int axis, float sign, float limit, uint8_t line, ClipVertex* out) {
  int out_count = 0;
  if (count == 0) return 0;
  ClipVertex prev = in[count - 1];
  float d_prev = sign * (axis == 0 ? prev.p.x : prev.p.y) - limit;
  for (int i = 0; i < count; ++i) {
    const ClipVertex cur = in[i];
    const float d_cur = sign * (axis == 0 ? cur.p.x : cur.p.y) - limit;
    const bool prev_in = d_prev <= 0.0f;
    const bool cur_in = d_cur <= 0.0f;
    if (prev_in != cur_in && out_count < kMaxClip) {
      // The edge prev -> cur lies on line prev.l_out (= cur.l_in) and crosses the side.
      const float t = d_prev / (d_prev - d_cur);
      ClipVertex x;
      x.p = prev.p + (cur.p - prev.p) * t;
      x.l_in = prev_in ? prev.l_out : line;
      x.l_out = prev_in ? line : prev.l_out;
      out[out_count++] = x;
    }
    if (cur_in && out_count < kMaxClip) out[out_count++] = cur;
    prev = cur;
    d_prev = d_cur;
  }
  return out_count;
}

constexpr float length_squared_xy(Vec3 a) { return a.x * a.x + a.y * a.y; }

/// Weld targets (features 4-7) on each side line 4 + s: x = +hu holds corners 4 (+,+) and 7 (+,-),
/// x = -hu holds 5 and 6, y = +hv holds 4 and 5, y = -hv holds 6 and 7.
constexpr int kSideCorners[4][2] = {{4, 7}, {5, 6}, {4, 5}, {6, 7}};

/// Face contact: `ref` owns the winning face (axis ref_axis, outward normal ref_sign axis, pointing
/// towards `inc`); writes up to 4 points to `out`. `normal_ab` is the manifold normal (A to B).
/// Works in the reference face's frame, where the side planes are |x| <= hu, |y| <= hv and a
/// point's separation is its z.
void build_face_contact(const BoxFrame& ref, int ref_axis, float ref_sign, const BoxFrame& inc, uint32_t ref_is_b,
                        Vec3 normal_ab, float margin, Manifold& out) {
  const int ua = (ref_axis + 1) % 3;
  const int va = (ref_axis + 2) % 3;
  const Vec3 u = ref.axis[ua];
  const Vec3 v = ref.axis[va];
  const Vec3 n_ref = ref.axis[ref_axis] * ref_sign;
  const float hu = ref.half[ua];
  const float hv = ref.half[va];
  const Vec3 face_center = ref.center + n_ref * ref.half[ref_axis];
  auto to_face_dir = [&](Vec3 d) { return Vec3{dot(d, u), dot(d, v), dot(d, n_ref)}; };

  // Incident face: the face of `inc` whose outward normal is most anti-parallel to n_ref.
  Vec3 inc_axes[3];
  for (int k = 0; k < 3; ++k) inc_axes[k] = to_face_dir(inc.axis[k]);
  int inc_axis = 0;
  for (int k = 1; k < 3; ++k) {
    if (std::fabs(inc_axes[k].z) > std::fabs(inc_axes[inc_axis].z)) inc_axis = k;
  }
  const float inc_sign = inc_axes[inc_axis].z > 0.0f ? -1.0f : 1.0f;
  const int iua = (inc_axis + 1) % 3;
  const int iva = (inc_axis + 2) % 3;
  const Vec3 ic = to_face_dir(inc.center - face_center) + inc_axes[inc_axis] * (inc_sign * inc.half[inc_axis]);
  const Vec3 iu = inc_axes[iua] * inc.half[iua];
  const Vec3 iv = inc_axes[iva] * inc.half[iva];

  // Incident polygon as a cycle: vertex m lies on edges (lines) m - 1 and m.
  ClipVertex poly_a[kMaxClip];
  ClipVertex poly_b[kMaxClip];
  poly_a[0] = {ic + iu + iv, 3, 0};
  poly_a[1] = {ic - iu + iv, 0, 1};
  poly_a[2] = {ic - iu - iv, 1, 2};
  poly_a[3] = {ic + iu - iv, 2, 3};
  int count = 4;
  count = clip_polygon(poly_a, count, 0, 1.0f, hu, 4, poly_b);
  count = clip_polygon(poly_b, count, 0, -1.0f, hu, 5, poly_a);
  count = clip_polygon(poly_a, count, 1, 1.0f, hv, 6, poly_b);
  count = clip_polygon(poly_b, count, 1, -1.0f, hv, 7, poly_a);

  const uint32_t ref_face = static_cast<uint32_t>(2 * ref_axis + (ref_sign < 0.0f ? 1 : 0));
  const uint32_t inc_face = static_cast<uint32_t>(2 * inc_axis + (inc_sign < 0.0f ? 1 : 0));
  // Weld targets in the face plane: the incident vertices (features 0-3), the reference corners (4-7).
  const Vec3 targets[8] = {ic + iu + iv, ic - iu + iv, ic - iu - iv, ic + iu - iv,
                           {hu, hv, 0},  {-hu, hv, 0}, {-hu, -hv, 0}, {hu, -hv, 0}};
  const float weld = kWeldFraction * std::min(ref.half[0] + ref.half[1] + ref.half[2],
                                              inc.half[0] + inc.half[1] + inc.half[2]) * (1.0f / 3.0f);
  const float weld_sq = weld * weld;

  Vec3 points[kMaxClip];  // face frame, z = separation / 2 (midway)
  float separations[kMaxClip];
  uint32_t features[kMaxClip];
  int kept = 0;
  for (int i = 0; i < count; ++i) {
    const ClipVertex& c = poly_a[i];
    const float separation = c.p.z;
    if (separation > margin) continue;
    uint32_t point_id = 0;
    const int lo = std::min(c.l_in, c.l_out);
    const int hi = std::max(c.l_in, c.l_out);
    if (hi < 4) {
      point_id = c.l_out;  // an unclipped incident vertex (on edges m - 1 and m)
    } else if (lo >= 4) {
      // A reference corner: one of lines 4/5 (x sides) with one of 6/7 (y sides).
      point_id = 4u + (lo == 4 ? (hi == 6 ? 0u : 3u) : (hi == 6 ? 1u : 2u));
      for (int k = 0; k < 4; ++k) {  // welded onto an incident vertex sitting on the corner
        if (length_squared_xy(c.p - targets[k]) <= weld_sq) {
          point_id = static_cast<uint32_t>(k);
          break;
        }
      }
    } else {
      // Incident edge lo crosses side hi: weld onto the edge's end vertices (lo, lo + 1), else
      // onto the side's two corners, else it is its own feature.
      const int side = hi - 4;
      const int near[4] = {lo, (lo + 1) & 3, kSideCorners[side][0], kSideCorners[side][1]};
      point_id = 8u + 4u * static_cast<uint32_t>(lo) + static_cast<uint32_t>(side);
      for (const int k : near) {
        if (length_squared_xy(c.p - targets[k]) <= weld_sq) {
          point_id = static_cast<uint32_t>(k);
          break;
        }
      }
    }
    const uint32_t feature = face_feature(ref_is_b, ref_face, inc_face, point_id);
    const Vec3 mid{c.p.x, c.p.y, 0.5f * separation};
    int same = -1;
    for (int k = 0; k < kept && same < 0; ++k) {
      if (features[k] == feature) same = k;
    }
    if (same >= 0) {  // welded: keep the deeper
      if (separation < separations[same]) {
        points[same] = mid;
        separations[same] = separation;
      }
      continue;
    }
    points[kept] = mid;
    separations[kept] = separation;
    features[kept] = feature;
    ++kept;
  }
  int selected[kMaxManifoldPoints];
  const int n = detail::reduce_manifold(points, separations, kept, Vec3{0.0f, 0.0f, 1.0f}, selected);
  out.normal = normal_ab;
  for (int i = 0; i < n; ++i) {
    const Vec3 p = points[selected[i]];
    detail::push_point(out, face_center + u * p.x + v * p.y + n_ref * p.z, separations[selected[i]],
                       features[selected[i]]);
  }
}

/// Edge contact along axis `normal` (unit, A to B) between edge axis i of A and edge axis j of B:
/// one point, midway between the closest points of A's and B's support edges.
void build_edge_contact(const BoxFrame& a, int i, const BoxFrame& b, int j, Vec3 normal, float separation,
                        Manifold& out) {
  // A's support edge in direction +normal, B's in direction -normal; sign bits name the edge.
  Vec3 ca = a.center;
  Vec3 cb = b.center;
  uint32_t bits_a = 0;
  uint32_t bits_b = 0;
  for (int k = 0, bit = 0; k < 3; ++k) {
    if (k == i) continue;
    const bool neg = dot(a.axis[k], normal) < 0.0f;
    ca += a.axis[k] * (neg ? -a.half[k] : a.half[k]);
    bits_a |= static_cast<uint32_t>(neg) << bit++;
  }
  for (int k = 0, bit = 0; k < 3; ++k) {
    if (k == j) continue;
    const bool neg = dot(b.axis[k], normal) > 0.0f;  // support in -normal
    cb += b.axis[k] * (neg ? -b.half[k] : b.half[k]);
    bits_b |= static_cast<uint32_t>(neg) << bit++;
  }
  const Vec3 ea = a.axis[i] * a.half[i];
  const Vec3 eb = b.axis[j] * b.half[j];
  const detail::SegmentClosest c = detail::closest_segment_segment(ca - ea, ca + ea, cb - eb, cb + eb);
  out.normal = normal;
  const uint32_t edge_a = static_cast<uint32_t>(4 * i) | bits_a;
  const uint32_t edge_b = static_cast<uint32_t>(4 * j) | bits_b;
  detail::push_point(out, (c.c1 + c.c2) * 0.5f, separation, kEdgeContactBit | (edge_a << 4) | edge_b);
}

}  // namespace

bool collide_box_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                     Manifold& out) {
  out.point_count = 0;
  const BoxFrame A = make_box_frame(a, ta);
  const BoxFrame B = make_box_frame(b, tb);
  // Gottschalk's OBB form: everything in A's frame. c[i][j] = a_i . b_j (B's axes in A's frame are
  // the columns of c), t = B's centre in A's frame.
  const Vec3 d = B.center - A.center;
  const float t[3] = {dot(d, A.axis[0]), dot(d, A.axis[1]), dot(d, A.axis[2])};
  float c[3][3];
  float abs_c[3][3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      c[i][j] = dot(A.axis[i], B.axis[j]);
      abs_c[i][j] = std::fabs(c[i][j]);
    }
  }

  // Face axes of A: separation = the gap between the projected intervals along a_i (> 0 apart);
  // the axis is oriented from A to B by the sign of t_i.
  float face_a_sep = -1.0e30f;
  int face_a = 0;
  for (int i = 0; i < 3; ++i) {
    const float rb = B.half[0] * abs_c[i][0] + B.half[1] * abs_c[i][1] + B.half[2] * abs_c[i][2];
    const float separation = std::fabs(t[i]) - A.half[i] - rb;
    if (separation > margin) return false;
    if (separation > face_a_sep) {
      face_a_sep = separation;
      face_a = i;
    }
  }
  float face_b_sep = -1.0e30f;
  int face_b = 0;
  float face_b_dist = 0.0f;  // t . b_j of the best
  for (int j = 0; j < 3; ++j) {
    const float dist = t[0] * c[0][j] + t[1] * c[1][j] + t[2] * c[2][j];
    const float ra = A.half[0] * abs_c[0][j] + A.half[1] * abs_c[1][j] + A.half[2] * abs_c[2][j];
    const float separation = std::fabs(dist) - ra - B.half[j];
    if (separation > margin) return false;
    if (separation > face_b_sep) {
      face_b_sep = separation;
      face_b = j;
      face_b_dist = dist;
    }
  }
  const float scale = std::min(A.half[0] + A.half[1] + A.half[2], B.half[0] + B.half[1] + B.half[2]) * (1.0f / 3.0f);
  const bool use_b_face = wins(face_b_sep, face_a_sep, kFaceRelTol, kFaceAbsTol * scale);
  const float face_sep = use_b_face ? face_b_sep : face_a_sep;
  // An edge axis is used only if its separation beats this (see wins()).
  const float edge_threshold = face_sep + kEdgeRelTol * std::fabs(face_sep) + kEdgeAbsTol * scale;

  // Edge axes L = a_i x b_j; in A's frame L = (L_i, L_i1, L_i2) = (0, -c[i2][j], c[i1][j]), so
  // |L|^2 = c[i1][j]^2 + c[i2][j]^2 without cancellation. Projection radii: A's is
  // h_i1 |c[i2][j]| + h_i2 |c[i1][j]|, B's is h_j1 |c[i][j2]| + h_j2 |c[i][j1]| (b_k . (a_i x b_j) =
  // +-a_i . b_l). Near-parallel pairs are skipped. With s = the unnormalised separation, the tests
  // s / |L| > x are done on squares, so the sqrt is only taken for an axis that could win.
  auto exceeds = [](float s, float x, float len_sq) {  // s / sqrt(len_sq) > x
    if (x >= 0.0f) return s > 0.0f && s * s > x * x * len_sq;
    return s >= 0.0f || s * s < x * x * len_sq;
  };
  float edge_sep = -1.0e30f;
  int edge_i = -1;
  int edge_j = -1;
  float edge_dist = 0.0f;
  constexpr int kNext[3] = {1, 2, 0};
  constexpr int kPrev[3] = {2, 0, 1};
  for (int i = 0; i < 3; ++i) {
    const int i1 = kNext[i];
    const int i2 = kPrev[i];
    for (int j = 0; j < 3; ++j) {
      const int j1 = kNext[j];
      const int j2 = kPrev[j];
      const float len_sq = c[i1][j] * c[i1][j] + c[i2][j] * c[i2][j];
      if (len_sq < kEdgeParallelSq) continue;
      const float dist = t[i2] * c[i1][j] - t[i1] * c[i2][j];
      const float ra = A.half[i1] * abs_c[i2][j] + A.half[i2] * abs_c[i1][j];
      const float rb = B.half[j1] * abs_c[i][j2] + B.half[j2] * abs_c[i][j1];
      const float s_unit = std::fabs(dist) - ra - rb;  // separation times |L|
      if (exceeds(s_unit, margin, len_sq)) return false;
      if (!exceeds(s_unit, edge_threshold, len_sq)) continue;
      const float separation = s_unit / std::sqrt(len_sq);
      if (separation > edge_sep) {
        edge_sep = separation;
        edge_i = i;
        edge_j = j;
        edge_dist = dist;
      }
    }
  }

  if (edge_i >= 0) {
    // World axis: a_i x b_j, oriented from A to B.
    const Vec3 l = normalize_or(cross(A.axis[edge_i], B.axis[edge_j]), kFallbackNormal);
    build_edge_contact(A, edge_i, B, edge_j, edge_dist < 0.0f ? -l : l, edge_sep, out);
    return true;
  }
  if (!use_b_face) {
    const float sign = t[face_a] < 0.0f ? -1.0f : 1.0f;
    build_face_contact(A, face_a, sign, B, 0, A.axis[face_a] * sign, margin, out);
  } else {
    // B's reference face points from B towards A: against the A-to-B normal.
    const float sign = face_b_dist < 0.0f ? -1.0f : 1.0f;
    build_face_contact(B, face_b, -sign, A, 1, B.axis[face_b] * sign, margin, out);
  }
  return out.point_count > 0;
}

// --- Sphere-box ----------------------------------------------------------------------------------

namespace {

/// Region of a clamped local point: per axis 0 = inside the slab, 1 = clamped to +h, 2 = to -h,
/// combined in base 3 (0..26). A stable feature id for closest-point contacts on a box.
uint32_t clamp_region(Vec3 p, Vec3 h) {
  uint32_t code = 0;
  for (int k = 2; k >= 0; --k) {
    const float c = component(p, k);
    const float e = component(h, k);
    code = code * 3u + (c > e ? 1u : (c < -e ? 2u : 0u));
  }
  return code;
}

constexpr Vec3 clamp_box(Vec3 p, Vec3 h) { return max(-h, min(p, h)); }

constexpr Vec3 unit_axis(int k, float sign) {
  return k == 0 ? Vec3{sign, 0.0f, 0.0f} : (k == 1 ? Vec3{0.0f, sign, 0.0f} : Vec3{0.0f, 0.0f, sign});
}

}  // namespace

bool collide_sphere_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                        Manifold& out) {
  out.point_count = 0;
  const detail::Frame box = detail::make_frame(tb);
  const Vec3 h = b.half_extents;
  const Vec3 c = detail::to_local(box, ta.position);  // sphere centre in B's frame
  const Vec3 closest = clamp_box(c, h);               // Ericson §5.1.3
  const Vec3 d = c - closest;                          // box surface -> sphere centre
  const float dist_sq = dot(d, d);
  const float r = a.radius;
  const float reach = r + margin;
  if (dist_sq > reach * reach) return false;

  if (dist_sq > kDegenerateSq) {
    const float dist = std::sqrt(dist_sq);
    const Vec3 n_out = d * (1.0f / dist);  // B's outward normal, local
    // Midway between the box point and the sphere's surface point c - n_out r.
    const Vec3 mid = (closest + (c - n_out * r)) * 0.5f;
    out.normal = -detail::to_world_dir(box, n_out);
    detail::push_point(out, detail::to_world(box, mid), dist - r, clamp_region(c, h));
    return true;
  }
  // Centre inside (or on) the box: leave through the face of least penetration. Ties go to the
  // axis order Y, X, Z and a centre on a mid-plane exits through +axis, so a sphere at the centre of
  // a cube leaves through the box's local +Y face (normal from A to B = the box's -Y).
  constexpr int kOrder[3] = {1, 0, 2};
  int axis = 1;
  float depth = 0.0f;  // distance from the centre to the nearest face [m]
  for (int n = 0; n < 3; ++n) {
    const int k = kOrder[n];
    const float to_face = component(h, k) - std::fabs(component(c, k));
    if (n == 0 || to_face < depth) {
      depth = to_face;
      axis = k;
    }
  }
  const float sign = component(c, axis) < 0.0f ? -1.0f : 1.0f;
  const Vec3 n_out = unit_axis(axis, sign);
  const float separation = -depth - r;
  // Face point: c moved out to the face; sphere surface point: c - n_out r.
  const Vec3 face_point = c + n_out * depth;
  const Vec3 mid = (face_point + (c - n_out * r)) * 0.5f;
  out.normal = -detail::to_world_dir(box, n_out);
  detail::push_point(out, detail::to_world(box, mid), separation, 27u + static_cast<uint32_t>(2 * axis + (sign < 0.0f)));
  return true;
}

// --- Capsule-box ---------------------------------------------------------------------------------

namespace {

struct SegmentBoxClosest {
  float t = 0;     ///< segment parameter in [0, 1]
  Vec3 on_segment;  ///< local [m]
  Vec3 on_box;      ///< local [m], clamp(on_segment)
  float dist_sq = 0;
};

/// Closest points of segment p0 + t d (box-local) and the box [-h, h]. The squared distance from
/// p(t) to the box is convex and piecewise quadratic in t, with pieces bounded by the t where p(t)
/// crosses a slab plane (+-h_k); on each piece the clamped axes are fixed, so its minimum is
/// closed form. Evaluates every piece (at most 7) and keeps the smallest, lowest t on ties.
SegmentBoxClosest closest_segment_box(Vec3 p0, Vec3 d, Vec3 h) {
  float breaks[8];
  int count = 0;
  breaks[count++] = 0.0f;
  for (int k = 0; k < 3; ++k) {
    const float dk = component(d, k);
    if (dk == 0.0f) continue;
    for (const float face : {-component(h, k), component(h, k)}) {
      const float t = (face - component(p0, k)) / dk;
      if (t > 0.0f && t < 1.0f) breaks[count++] = t;
    }
  }
  breaks[count++] = 1.0f;
  // Insertion sort: at most 8 values.
  for (int i = 1; i < count; ++i) {
    const float x = breaks[i];
    int j = i - 1;
    while (j >= 0 && breaks[j] > x) {
      breaks[j + 1] = breaks[j];
      --j;
    }
    breaks[j + 1] = x;
  }
  SegmentBoxClosest best;
  best.dist_sq = -1.0f;
  auto consider = [&](float t) {
    const Vec3 p = p0 + d * t;
    const Vec3 q = clamp_box(p, h);
    const float dsq = length_squared(p - q);
    if (best.dist_sq < 0.0f || dsq < best.dist_sq) best = {t, p, q, dsq};
  };
  consider(0.0f);
  for (int i = 0; i + 1 < count; ++i) {
    const float t0 = breaks[i];
    const float t1 = breaks[i + 1];
    if (!(t1 > t0)) continue;
    const Vec3 mid = p0 + d * (0.5f * (t0 + t1));
    // f(t) = sum over clamped axes (p0_k - c_k + d_k t)^2; minimum at t = -sum d_k e_k / sum d_k^2.
    float quad = 0.0f;
    float lin = 0.0f;
    for (int k = 0; k < 3; ++k) {
      const float m = component(mid, k);
      const float e = component(h, k);
      if (m > e || m < -e) {
        const float dk = component(d, k);
        quad += dk * dk;
        lin += dk * (component(p0, k) - (m > e ? e : -e));
      }
    }
    float t = t0;
    if (quad > 0.0f) t = std::min(t1, std::max(t0, -lin / quad));
    consider(t);
  }
  consider(1.0f);
  return best;
}

/// Clips the segment p0 + t d to the slabs |p_k| <= h_k for the axes k != skip_axis (Liang-Barsky).
/// Returns false when nothing is left; [t0, t1] otherwise.
bool clip_segment_to_slabs(Vec3 p0, Vec3 d, Vec3 h, int skip_axis, float& t0, float& t1) {
  t0 = 0.0f;
  t1 = 1.0f;
  for (int k = 0; k < 3; ++k) {
    if (k == skip_axis) continue;
    const float pk = component(p0, k);
    const float dk = component(d, k);
    const float e = component(h, k);
    if (std::fabs(dk) <= kNarrowphaseEpsilon) {
      if (pk > e || pk < -e) return false;
      continue;
    }
    float enter = (-e - pk) / dk;
    float exit = (e - pk) / dk;
    if (enter > exit) std::swap(enter, exit);
    t0 = std::max(t0, enter);
    t1 = std::min(t1, exit);
    if (t0 > t1) return false;
  }
  return true;
}

// Capsule-box feature ids: closest point = clamp region (0..26); face contact 32 + 2 face + end;
// deep edge contact 64 + 4 axis + sign bits.
constexpr uint32_t kCapsuleFaceFeature = 32;
constexpr uint32_t kCapsuleEdgeFeature = 64;

/// Face contact of the capsule core (local p0 + t d, radius r) on box face `axis` with outward
/// normal `sign` e_axis: the core clipped to the face's side slabs; both ends when the core lies
/// flat (sin angle to the face <= kParallelSin), else only the lower end. Returns the point count.
int emit_capsule_face(const detail::Frame& box, Vec3 p0, Vec3 d, Vec3 h, float r, int axis, float sign, float margin,
                      Manifold& out) {
  float t0 = 0.0f;
  float t1 = 0.0f;
  if (!clip_segment_to_slabs(p0, d, h, axis, t0, t1)) return 0;
  const Vec3 f = unit_axis(axis, sign);
  const float dk = component(d, axis);
  const bool flat = dk * dk <= detail::kParallelSinSq * dot(d, d);
  const float ends[2] = {t0, t1};
  const float heights[2] = {dot(p0 + d * t0, f), dot(p0 + d * t1, f)};
  const uint32_t face = static_cast<uint32_t>(2 * axis + (sign < 0.0f));
  out.normal = -detail::to_world_dir(box, f);
  const int first = out.point_count;
  for (int e = 0; e < 2; ++e) {
    if (e == 1 && (t1 - t0) * (t1 - t0) * dot(d, d) <= kDegenerateSq) break;  // one point
    if (!flat && heights[e] > heights[1 - e]) continue;                          // the lower end only
    if (!flat && e == 1 && heights[0] == heights[1]) continue;
    const Vec3 p = p0 + d * ends[e];
    const float separation = heights[e] - component(h, axis) - r;
    if (separation > margin) continue;
    // Capsule surface p - f r; the face a further `separation` below.
    const Vec3 mid = p - f * (r + 0.5f * separation);
    detail::push_point(out, detail::to_world(box, mid), separation,
                       kCapsuleFaceFeature + 2u * face + static_cast<uint32_t>(e));
  }
  return out.point_count - first;
}

}  // namespace

bool collide_capsule_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                         Manifold& out) {
  out.point_count = 0;
  const detail::Frame box = detail::make_frame(tb);
  const detail::Segment seg = detail::capsule_segment(a, ta);
  const Vec3 p0 = detail::to_local(box, seg.p0);
  const Vec3 d = detail::to_local(box, seg.p1) - p0;
  const Vec3 h = b.half_extents;
  const float r = a.radius;
  const SegmentBoxClosest c = closest_segment_box(p0, d, h);
  const float reach = r + margin;
  if (c.dist_sq > reach * reach) return false;

  if (c.dist_sq > kDegenerateSq) {
    // The core is outside the box. Normal from the core towards the box (A to B), local.
    const float dist = std::sqrt(c.dist_sq);
    const Vec3 n = (c.on_box - c.on_segment) * (1.0f / dist);
    // Lying on a face: the normal is within ~18 degrees of a face normal (cos >= 0.95) and the core
    // is parallel to that face: clip the core to the face for up to two points.
    const Vec3 an = abs(n);
    const int axis = an.x >= an.y && an.x >= an.z ? 0 : (an.y >= an.z ? 1 : 2);
    if (component(an, axis) >= 0.95f) {
      const float dk = component(d, axis);
      if (dk * dk <= detail::kParallelSinSq * dot(d, d)) {
        const float sign = component(n, axis) > 0.0f ? -1.0f : 1.0f;  // face towards the capsule
        if (emit_capsule_face(box, p0, d, h, r, axis, sign, margin, out) > 0) return true;
      }
    }
    const Vec3 mid = ((c.on_segment + n * r) + c.on_box) * 0.5f;
    out.normal = detail::to_world_dir(box, n);
    detail::push_point(out, detail::to_world(box, mid), dist - r, clamp_region(c.on_segment, h));
    return true;
  }

  // The core touches or crosses the box: separating axis test of the segment against the box over
  // the 3 face normals and the 3 crosses d x e_k, face-biased as in box-box. Separation along a unit
  // axis L = (the larger gap between the core's interval and the box's [-h.|L|, h.|L|]) - r.
  const float scale = std::min((h.x + h.y + h.z) * (1.0f / 3.0f), a.half_height + r);
  float face_sep = -1.0e30f;
  int face_axis = 0;
  float face_sign = 1.0f;  // the box face normal pointing at the capsule
  for (int k = 0; k < 3; ++k) {
    const float s0 = component(p0, k);
    const float s1 = s0 + component(d, k);
    const float hk = component(h, k);
    const float above = std::min(s0, s1) - hk;   // core on the +k side
    const float below = -hk - std::max(s0, s1);  // core on the -k side
    const float separation = std::max(above, below) - r;
    if (separation > face_sep) {
      face_sep = separation;
      face_axis = k;
      face_sign = above >= below ? 1.0f : -1.0f;
    }
  }
  float edge_sep = -1.0e30f;
  int edge_axis = -1;
  Vec3 edge_normal;  // local, from the box towards the capsule
  for (int k = 0; k < 3; ++k) {
    const Vec3 l = cross(d, unit_axis(k, 1.0f));
    const float len_sq = dot(l, l);
    if (len_sq < kEdgeParallelSq * dot(d, d) || len_sq <= kDegenerateSq) continue;
    const Vec3 u = l * (1.0f / std::sqrt(len_sq));
    const float rb = dot(h, abs(u));
    const float s0 = dot(p0, u);  // d . u = 0: the core projects to one value
    const float above = s0 - rb;
    const float below = -rb - s0;
    const float separation = std::max(above, below) - r;
    if (separation > edge_sep) {
      edge_sep = separation;
      edge_axis = k;
      edge_normal = above >= below ? u : -u;
    }
  }
  if (edge_axis >= 0 && wins(edge_sep, face_sep, kEdgeRelTol, kEdgeAbsTol * scale)) {
    // The box edge parallel to e_k that is extreme along the normal, against the core.
    Vec3 center;
    uint32_t bits = 0;
    for (int k = 0, bit = 0; k < 3; ++k) {
      if (k == edge_axis) continue;
      const bool neg = component(edge_normal, k) < 0.0f;
      center = center + unit_axis(k, neg ? -component(h, k) : component(h, k));
      bits |= static_cast<uint32_t>(neg) << bit++;
    }
    const Vec3 half_edge = unit_axis(edge_axis, component(h, edge_axis));
    const detail::SegmentClosest e =
        detail::closest_segment_segment(p0, p0 + d, center - half_edge, center + half_edge);
    // The capsule surface lies r beyond its core along -normal... midway towards the box edge.
    const Vec3 mid = ((e.c1 - edge_normal * r) + e.c2) * 0.5f;
    out.normal = -detail::to_world_dir(box, edge_normal);
    detail::push_point(out, detail::to_world(box, mid), edge_sep,
                       kCapsuleEdgeFeature + 4u * static_cast<uint32_t>(edge_axis) + bits);
    return true;
  }
  if (emit_capsule_face(box, p0, d, h, r, face_axis, face_sign, margin, out) > 0) return true;
  // The clipped core left the face region (numerically): fall back to the closest core point.
  const Vec3 f = unit_axis(face_axis, face_sign);
  const Vec3 mid = c.on_segment - f * (r + 0.5f * face_sep);
  out.normal = -detail::to_world_dir(box, f);
  out.point_count = 0;
  detail::push_point(out, detail::to_world(box, mid), face_sep, kCapsuleFaceFeature + 2u * static_cast<uint32_t>(2 * face_axis + (face_sign < 0.0f)));
  return true;
}

}  // namespace impulse::physics
