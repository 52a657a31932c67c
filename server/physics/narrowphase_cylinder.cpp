// Cylinder pairs. The contact normal comes from GJK (gjk.h) between the shapes' cores: the
// cylinder shrunk by its rounding (kCylinderRounding), a sphere's centre, a capsule's segment, a
// box or hull itself. Their distance minus the roundings is the separation, exact while the cores
// are apart, that is while the shapes overlap by less than the roundings (resting contact always
// does). Deeper, a separating-axis search over the pair's candidate axes stands in for EPA. The
// manifold then clips the two shapes' supporting features (a cap polygon, a side segment, a face,
// an edge or a point) against each other and projects the points onto the reference feature
// along the normal, as Jolt's ManifoldBetweenTwoFaces does (JoltPhysics, Jolt/Physics/Collision/
// ManifoldBetweenTwoFaces.cpp), so a cylinder standing or lying on a face gets up to 4 exact
// points on its sharp rim.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "server/physics/gjk.h"
#include "server/physics/narrowphase.h"
#include "server/physics/narrowphase_detail.h"

namespace impulse::physics {

namespace {

using detail::Frame;

// A supporting feature is taken as a cap, a side line or a face when the direction is within
// about 5.7 degrees of its normal (cosine 0.995, sine 0.1). Wider than the parallel tolerance of
// the capsule pairs because the points are projected onto the reference exactly: a slightly
// tilted cap gives one touching point and speculative ones beyond, never a wrong depth.
constexpr float kFeatureCos = 0.995f;
constexpr float kFeatureSin = 0.1f;
constexpr int kCapPoints = 8;
// How far apart a deeply overlapping pair is moved along its axis to find its witnesses [m].
constexpr float kClearance = 0.01f;
// The largest feature: a hull face (at most kMaxHullVertices) or a cap's 8 points plus its
// support point. Clipping adds at most one point per side plane.
constexpr int kMaxFeature = static_cast<int>(kMaxHullVertices) + 1;
constexpr int kMaxClipped = 2 * kMaxFeature + 8;

// Feature ids: bits 0-7 the point (0-63 a feature vertex, 64 + 2 side + entering: a crossing of a
// reference side plane), bits 8-15 the incident feature, 16-23 the reference feature, bit 31 the
// reference is B. Cylinder features: 0x40 | 0x20 (top cap) | k for cap point k, 0x48 for a cap's
// exact support point, 0x50 + end for a side line, 0x58 for a rim point; polytope faces are their
// index (< 0x40 after masking), edges 0x80 | edge, vertices 0xC0.
struct Feature {
  Vec3 p[kMaxFeature];
  uint8_t id[kMaxFeature];
  int count = 0;
  uint8_t which = 0;  ///< the feature's own id (see above)
  void add(Vec3 q, uint8_t i) {
    p[count] = q;
    id[count] = i;
    ++count;
  }
};

struct CylinderGeom {
  Vec3 c;  ///< centre, world [m]
  Vec3 u;  ///< axis (local +Y), world, unit
  Vec3 x;  ///< local +X, world
  Vec3 z;  ///< local +Z, world
  float r = 0;
  float h = 0;
};

CylinderGeom cylinder_geom(const Shape& s, const Transform& t) {
  const Mat3 m = to_mat3(t.rotation);
  return {t.position, m.c1, m.c0, m.c2, s.radius, s.half_height};
}

/// The point of the cylinder (radius r, half height h, about g's centre and axis) farthest along d.
/// The radial part is taken in the local X-Z plane (d's components along x and z), not as d
/// minus its axial part: for d nearly along the axis that difference cancels, and its leftover
/// axial rounding, normalised, would lift the point off the cap.
Vec3 cylinder_point(const CylinderGeom& g, float r, float h, Vec3 d) {
  const float a = dot(d, g.u);
  const float dx = dot(d, g.x);
  const float dz = dot(d, g.z);
  const float len_sq = dx * dx + dz * dz;
  Vec3 p = g.c + g.u * (a >= 0.0f ? h : -h);
  if (len_sq > 1.0e-12f * dot(d, d)) {
    const float k = r / std::sqrt(len_sq);
    p += g.x * (dx * k) + g.z * (dz * k);
  }
  return p;
}

enum class SideKind : uint8_t { Point, Segment, Polytope, Cylinder };

/// One shape of a cylinder pair in the world frame: its core and the rounding around it.
struct Side {
  SideKind kind = SideKind::Point;
  float rounding = 0;  ///< [m] added around the core
  Vec3 p0;             ///< point; segment start
  Vec3 p1;             ///< segment end
  CylinderGeom cyl;
  HullView view;       ///< polytope, in `frame`
  Frame frame;
  Vec3 centre;         ///< an interior point [m]
};

/// `rounded`: the core is shrunk by cylinder_rounding. Against a sphere or capsule it is not: their
/// own radius leaves GJK the room, and the sharp rim gives the exact distance.
Side cylinder_side(const Shape& s, const Transform& t, bool rounded = true) {
  Side side;
  side.kind = SideKind::Cylinder;
  side.cyl = cylinder_geom(s, t);
  side.rounding = rounded ? cylinder_rounding(s) : 0.0f;
  side.centre = t.position;
  return side;
}

Side polytope_side(const HullView& view, const Frame& frame) {
  Side side;
  side.kind = SideKind::Polytope;
  side.view = view;
  side.frame = frame;
  side.centre = frame.origin;
  return side;
}

Vec3 core_support(const Side& s, Vec3 d) {
  switch (s.kind) {
    case SideKind::Point: return s.p0;
    case SideKind::Segment: return dot(s.p0, d) >= dot(s.p1, d) ? s.p0 : s.p1;
    case SideKind::Polytope:
      return detail::to_world(s.frame, hull_support(s.view, detail::to_local_dir(s.frame, d)));
    case SideKind::Cylinder: return cylinder_point(s.cyl, s.cyl.r - s.rounding, s.cyl.h - s.rounding, d);
  }
  return s.centre;
}

/// The shape's own (sharp) support point along the unit direction d.
Vec3 full_support(const Side& s, Vec3 d) {
  if (s.kind == SideKind::Cylinder) return cylinder_point(s.cyl, s.cyl.r, s.cyl.h, d);
  return core_support(s, d) + d * s.rounding;
}

/// The gap between the shapes along the unit axis n (A towards B); negative: overlap on it.
float axis_separation(const Side& a, const Side& b, Vec3 n) {
  return dot(full_support(b, -n), n) - dot(full_support(a, n), n);
}

/// The supporting feature of the cylinder along the unit direction d (sharp rim).
void cylinder_feature(const CylinderGeom& g, Vec3 d, Feature& f) {
  const float a = dot(d, g.u);
  const float abs_a = std::fabs(a);
  if (abs_a >= kFeatureCos) {
    const float sign = a >= 0.0f ? 1.0f : -1.0f;
    const Vec3 cap = g.c + g.u * (sign * g.h);
    const uint8_t top = a >= 0.0f ? 0x20 : 0x00;
    f.which = static_cast<uint8_t>(0x40 | top);
    // Fixed points on the rim, 45 degrees apart, counter-clockwise about the outward normal.
    constexpr float kC = 0.70710678f;
    static constexpr float kCos[kCapPoints] = {1.0f, kC, 0.0f, -kC, -1.0f, -kC, 0.0f, kC};
    static constexpr float kSin[kCapPoints] = {0.0f, kC, 1.0f, kC, 0.0f, -kC, -1.0f, -kC};
    // A tilted cap's farthest rim point usually lies between two of them: it goes in too, in
    // its place on the rim, so the polygon stays convex and ordered. `after`: the position it
    // follows (-1: none). The rim angle from local +X towards +Z is in sector floor(angle / 45).
    const float rx = dot(d, g.x);
    const float rz = dot(d, g.z);
    int after = -1;
    if (rx * rx + rz * rz > 1.0e-6f) {
      const float angle = std::atan2(rz, rx);  // (-pi, pi]
      int sector = static_cast<int>(std::floor(angle * (4.0f / 3.14159265f)));
      sector = ((sector % kCapPoints) + kCapPoints) % kCapPoints;
      // The top cap lists angles upwards (position = angle index), the bottom one downwards
      // (position of angle index j: (8 - j) % 8), each counter-clockwise about its outward normal.
      after = sign > 0.0f ? sector : (kCapPoints - (sector + 1) % kCapPoints) % kCapPoints;
    }
    for (int k = 0; k < kCapPoints; ++k) {
      const int j = sign > 0.0f ? k : (kCapPoints - k) % kCapPoints;
      f.add(cap + (g.x * kCos[j] + g.z * kSin[j]) * g.r, static_cast<uint8_t>(0x40 | top | j));
      if (k == after) f.add(cylinder_point(g, g.r, g.h, d), static_cast<uint8_t>(0x48 | top));
    }
    return;
  }
  if (abs_a <= kFeatureSin) {
    const Vec3 radial = normalize_or(g.x * dot(d, g.x) + g.z * dot(d, g.z), g.x) * g.r;
    f.which = 0x50;
    f.add(g.c - g.u * g.h + radial, 0x50);
    f.add(g.c + g.u * g.h + radial, 0x51);
    return;
  }
  f.which = 0x58;
  f.add(cylinder_point(g, g.r, g.h, d), 0x58);
}

/// The supporting feature of a polytope along the unit world direction d: the face around the
/// support vertex whose normal is within kFeatureCos of d, else an edge at that vertex within
/// kFeatureSin of perpendicular to d, else the vertex.
void polytope_feature(const HullView& v, const Frame& fr, Vec3 d, Feature& f) {
  const Vec3 dl = detail::to_local_dir(fr, d);
  const uint32_t sv = hull_support_index(v, dl);
  uint32_t face = 0;
  float face_cos = -2.0f;
  for (uint32_t k = 0; k < v.face_count; ++k) {
    const HullFace hf = v.faces[k];
    bool around = false;
    for (int i = 0; i < hf.count && !around; ++i) around = v.face_vertices[hf.first + i] == sv;
    const float c = dot(v.planes[k].normal, dl);
    if (around && c > face_cos) {
      face_cos = c;
      face = k;
    }
  }
  if (face_cos >= kFeatureCos) {
    const HullFace hf = v.faces[face];
    f.which = static_cast<uint8_t>(face & 0x3Fu);
    for (int i = 0; i < hf.count && f.count < kMaxFeature; ++i) {
      f.add(detail::to_world(fr, v.vertices[v.face_vertices[hf.first + i]]), static_cast<uint8_t>(i));
    }
    return;
  }
  uint32_t edge = 0;
  float edge_sin = 2.0f;
  for (uint32_t k = 0; k < v.edge_count; ++k) {
    const HullEdge& e = v.edges[k];
    if (e.v0 != sv && e.v1 != sv) continue;
    const Vec3 dir = normalize_or(v.vertices[e.v1] - v.vertices[e.v0], Vec3{});
    const float s = std::fabs(dot(dir, dl));
    if (s < edge_sin) {
      edge_sin = s;
      edge = k;
    }
  }
  if (edge_sin <= kFeatureSin) {
    const HullEdge& e = v.edges[edge];
    f.which = static_cast<uint8_t>(0x80 | (edge & 0x3Fu));
    f.add(detail::to_world(fr, v.vertices[e.v0]), 0);
    f.add(detail::to_world(fr, v.vertices[e.v1]), 1);
    return;
  }
  f.which = 0xC0;
  f.add(detail::to_world(fr, v.vertices[sv]), 0);
}

void feature_of(const Side& s, Vec3 d, Feature& f) {
  f.count = 0;
  switch (s.kind) {
    case SideKind::Point:
      f.which = 0xE0;
      f.add(s.p0 + d * s.rounding, 0);
      return;
    case SideKind::Segment: {
      const Vec3 dir = normalize_or(s.p1 - s.p0, Vec3{});
      f.which = 0xE8;
      if (std::fabs(dot(dir, d)) <= kFeatureSin) {
        f.add(s.p0 + d * s.rounding, 0);
        f.add(s.p1 + d * s.rounding, 1);
      } else {
        f.add(full_support(s, d), 2);
      }
      return;
    }
    case SideKind::Polytope: return polytope_feature(s.view, s.frame, d, f);
    case SideKind::Cylinder: return cylinder_feature(s.cyl, d, f);
  }
}

struct ClipPlane {
  Vec3 n;  ///< outward
  Vec3 o;  ///< a point on it
};

/// Clips the incident feature (1 point, a segment or a polygon) against the planes, keeping what
/// is behind all of them. Crossings get ids 64 + 2 plane + entering.
int clip_feature(const Feature& inc, const ClipPlane* planes, int plane_count, Vec3* out, uint8_t* ids) {
  Vec3 poly[kMaxClipped];
  uint8_t pid[kMaxClipped];
  int count = inc.count;
  for (int i = 0; i < count; ++i) {
    poly[i] = inc.p[i];
    pid[i] = inc.id[i];
  }
  if (count <= 2) {  // a point or a segment: a parameter range
    float t0 = 0.0f;
    float t1 = count == 2 ? 1.0f : 0.0f;
    uint8_t id0 = pid[0];
    uint8_t id1 = count == 2 ? pid[1] : pid[0];
    const Vec3 a = poly[0];
    const Vec3 ab = count == 2 ? poly[1] - poly[0] : Vec3{};
    for (int k = 0; k < plane_count; ++k) {
      const float da = dot(planes[k].n, a - planes[k].o);
      const float dd = dot(planes[k].n, ab);
      if (dd == 0.0f) {
        if (da > 0.0f) return 0;
        continue;
      }
      const float t = -da / dd;
      if (dd < 0.0f) {  // entering
        if (t > t0) {
          t0 = t;
          id0 = static_cast<uint8_t>(64 + 2 * k + 1);
        }
      } else if (t < t1) {
        t1 = t;
        id1 = static_cast<uint8_t>(64 + 2 * k);
      }
      if (t0 > t1) return 0;
    }
    out[0] = a + ab * t0;
    ids[0] = id0;
    if (count == 1 || t1 - t0 <= 1.0e-6f) return 1;
    out[1] = a + ab * t1;
    ids[1] = id1;
    return 2;
  }
  Vec3 next[kMaxClipped];
  uint8_t nid[kMaxClipped];
  for (int k = 0; k < plane_count && count > 0; ++k) {
    int n = 0;
    for (int i = 0; i < count && n + 2 <= kMaxClipped; ++i) {
      const Vec3 p = poly[i];
      const Vec3 q = poly[(i + 1) % count];
      const float dp = dot(planes[k].n, p - planes[k].o);
      const float dq = dot(planes[k].n, q - planes[k].o);
      if (dp <= 0.0f) {
        next[n] = p;
        nid[n] = pid[i];
        ++n;
      }
      if ((dp <= 0.0f) != (dq <= 0.0f)) {
        next[n] = p + (q - p) * (dp / (dp - dq));
        nid[n] = static_cast<uint8_t>(64 + 2 * k + (dp <= 0.0f ? 0 : 1));
        ++n;
      }
    }
    std::copy(next, next + n, poly);
    std::copy(nid, nid + n, pid);
    count = n;
  }
  std::copy(poly, poly + count, out);
  std::copy(pid, pid + count, ids);
  return count;
}

/// The reference feature's side planes (a polygon's edges, a segment's ends) and its plane
/// (point o, unit normal pn towards the outside of its shape, along `outward`). False when the
/// feature has no usable plane (a point, or a degenerate polygon).
bool reference_planes(const Feature& ref, Vec3 outward, ClipPlane* planes, int& plane_count, Vec3& o, Vec3& pn) {
  plane_count = 0;
  o = ref.p[0];
  if (ref.count == 2) {
    const Vec3 axis = ref.p[1] - ref.p[0];
    const float len_sq = dot(axis, axis);
    if (!(len_sq > detail::kDegenerateSq)) return false;
    pn = normalize_or(outward - axis * (dot(outward, axis) / len_sq), Vec3{});
    planes[plane_count++] = ClipPlane{axis, ref.p[1]};
    planes[plane_count++] = ClipPlane{-axis, ref.p[0]};
    return dot(pn, pn) > 0.0f;
  }
  if (ref.count < 3) return false;
  Vec3 newell{};
  Vec3 centroid{};
  for (int i = 0; i < ref.count; ++i) {
    const Vec3 p = ref.p[i];
    const Vec3 q = ref.p[(i + 1) % ref.count];
    newell += cross(p, q);
    centroid += p;
  }
  centroid = centroid * (1.0f / static_cast<float>(ref.count));
  pn = normalize_or(newell, Vec3{});
  if (dot(pn, pn) == 0.0f) return false;
  if (dot(pn, outward) < 0.0f) pn = -pn;
  for (int i = 0; i < ref.count; ++i) {
    const Vec3 p = ref.p[i];
    Vec3 side = cross(ref.p[(i + 1) % ref.count] - p, pn);
    if (dot(side, centroid - p) > 0.0f) side = -side;  // outward, whatever the winding
    planes[plane_count++] = ClipPlane{side, p};
  }
  o = centroid;
  return true;
}

/// The contact points of features fa (A's, along n) and fb (B's, along -n): the one with more
/// points (A on ties, or B when ref_b) is the reference; the other is clipped to its side planes
/// and each point's separation is its distance to the reference plane along n. Points beyond the
/// margin are dropped and at most 4 kept. False when nothing is left.
bool clip_features(const Feature& fa, const Feature& fb, Vec3 n, bool ref_b, float margin, Manifold& out) {
  const bool b_is_ref = ref_b || fb.count > fa.count;
  const Feature& ref = b_is_ref ? fb : fa;
  const Feature& inc = b_is_ref ? fa : fb;
  const Vec3 outward = b_is_ref ? -n : n;
  ClipPlane planes[kMaxFeature];
  int plane_count = 0;
  Vec3 o;
  Vec3 pn;
  // A two-point reference is a line on a curved side or an edge: its plane stands for the surface
  // only along the line, so it takes a parallel line alone (a side lying along an edge or side).
  if (ref.count == 2) {
    if (inc.count != 2) return false;
    const Vec3 dr = normalize_or(ref.p[1] - ref.p[0], Vec3{});
    const Vec3 di = normalize_or(inc.p[1] - inc.p[0], Vec3{});
    if (!(length(cross(dr, di)) <= kFeatureSin)) return false;
  }
  if (!reference_planes(ref, outward, planes, plane_count, o, pn)) return false;
  const float along = dot(outward, pn);
  if (!(along >= 0.1f)) return false;  // the reference plane is too steep to the normal
  Vec3 clipped[kMaxClipped];
  uint8_t ids[kMaxClipped];
  const int count = clip_feature(inc, planes, plane_count, clipped, ids);
  Vec3 points[kMaxClipped];
  float separations[kMaxClipped];
  uint32_t features[kMaxClipped];
  int kept = 0;
  for (int i = 0; i < count; ++i) {
    const float s = dot(clipped[i] - o, pn) / along;
    if (s > margin) continue;
    points[kept] = clipped[i] - outward * (0.5f * s);
    separations[kept] = s;
    features[kept] = (b_is_ref ? 1u << 31 : 0u) | (static_cast<uint32_t>(ref.which) << 16) |
                     (static_cast<uint32_t>(inc.which) << 8) | ids[i];
    ++kept;
  }
  if (kept == 0) return false;
  out.normal = n;
  int selected[kMaxManifoldPoints];
  const int chosen = detail::reduce_manifold(points, separations, kept, n, selected);
  for (int i = 0; i < chosen; ++i) detail::push_point(out, points[selected[i]], separations[selected[i]], features[selected[i]]);
  return out.point_count > 0;
}

/// The candidate axis of least penetration (the separating-axis search for cores that overlap):
/// the centre line, the cylinder's axis, B's face normals or axis, the cylinder's axis crossed
/// with B's edges, segment or axis, and the radial directions from the cylinder's axis to B's
/// vertices or centre. A is the cylinder. Each candidate's separation is exact for that axis,
/// so the best one bounds the penetration from above and pushes the shapes apart.
Vec3 least_penetration_axis(const Side& a, const Side& b, float& separation) {
  const Vec3 u = a.cyl.u;
  const Vec3 centres = b.centre - a.centre;
  Vec3 best_n = normalize_or(centres, u);
  float best = axis_separation(a, b, best_n);
  auto consider = [&](Vec3 n, bool orient) {
    const float len_sq = dot(n, n);
    if (!(len_sq > 1.0e-10f)) return;
    n = n * (1.0f / std::sqrt(len_sq));
    if (orient && dot(n, centres) < 0.0f) n = -n;
    const float s = axis_separation(a, b, n);
    if (s > best) {
      best = s;
      best_n = n;
    }
  };
  consider(u, true);
  auto radial_to = [&](Vec3 p) {
    const Vec3 d = p - a.cyl.c;
    consider(d - u * dot(d, u), false);
  };
  switch (b.kind) {
    case SideKind::Point: radial_to(b.p0); break;
    case SideKind::Segment:
      consider(cross(u, b.p1 - b.p0), true);
      radial_to(b.p0);
      radial_to(b.p1);
      break;
    case SideKind::Cylinder:
      consider(b.cyl.u, true);
      consider(cross(u, b.cyl.u), true);
      radial_to(b.cyl.c);
      break;
    case SideKind::Polytope:
      for (uint32_t f = 0; f < b.view.face_count; ++f) consider(-detail::to_world_dir(b.frame, b.view.planes[f].normal), false);
      for (uint32_t e = 0; e < b.view.edge_count; ++e) {
        const Vec3 dir = b.view.vertices[b.view.edges[e].v1] - b.view.vertices[b.view.edges[e].v0];
        consider(cross(u, detail::to_world_dir(b.frame, dir)), true);
      }
      for (uint32_t v = 0; v < b.view.vertex_count; ++v) radial_to(detail::to_world(b.frame, b.view.vertices[v]));
      break;
  }
  separation = best;
  return best_n;
}

bool inside_cylinder(const CylinderGeom& g, Vec3 p) {
  const Vec3 d = p - g.c;
  const float x = dot(d, g.x);
  const float z = dot(d, g.z);
  return x * x + z * z <= g.r * g.r && std::fabs(dot(d, g.u)) <= g.h;
}

/// A cylinder (A) against any other side: normal, separation and witness points, then the
/// clipped features or, failing them, one point midway between the witnesses.
bool collide_sides(const Side& a, const Side& b, float margin, Manifold& out) {
  out.point_count = 0;
  const auto support_a = [&a](Vec3 d) { return core_support(a, d); };
  const auto support_b = [&b](Vec3 d) { return core_support(b, d); };
  const gjk::Result g = gjk::distance(support_a, support_b, b.centre - a.centre);
  Vec3 n;
  float separation;
  Vec3 pa;
  Vec3 pb;
  if (!g.overlap) {
    // Normalised afresh: the witnesses' difference loses digits when they are close.
    n = normalize_or(g.on_b - g.on_a, normalize_or(b.centre - a.centre, a.cyl.u));
    separation = g.distance - a.rounding - b.rounding;
    if (separation > margin) return false;
    pa = g.on_a + n * a.rounding;
    pb = g.on_b - n * b.rounding;
  } else {
    n = least_penetration_axis(a, b, separation);
    if (separation > margin) return false;
    pa = full_support(a, n);
    pb = full_support(b, -n);
    // Witnesses: B moved apart along n until just clear (1 cm), GJK between the whole shapes,
    // then B moved back. The closest points of the cleared pair are where the shapes meet along
    // n, so they lie on both surfaces and face each other (the supports along n need not).
    const Vec3 shift = n * (kClearance - separation);
    const auto whole_a = [&a](Vec3 d) { return full_support(a, normalize_or(d, a.cyl.u)); };
    const auto whole_b = [&b, shift](Vec3 d) { return full_support(b, normalize_or(d, Vec3{0.0f, 1.0f, 0.0f})) + shift; };
    const gjk::Result cleared = gjk::distance(whole_a, whole_b, n);
    if (!cleared.overlap) {
      pa = cleared.on_a;
      pb = cleared.on_b - shift;
      separation = dot(pb - pa, n);
    }
  }
  // A sphere touches at one point: the witnesses are exact.
  if (b.kind != SideKind::Point) {
    Feature fa;
    Feature fb;
    feature_of(a, n, fa);
    feature_of(b, -n, fb);
    if ((fa.count >= 2 || fb.count >= 2) && clip_features(fa, fb, n, false, margin, out)) return true;
  }
  out.point_count = 0;
  out.normal = n;
  Vec3 point = (pa + pb) * 0.5f;
  // A rounded rim sits inside the sharp one (by up to 29 % of the rounding, at 45 degrees), so
  // two rims that cross are closer than their cores say: the sharp shapes' gap along n, which
  // never exceeds their distance, keeps an overlap from passing as a gap.
  // The point stays between the rounded witnesses, within 29 % of the rounding of the sharp
  // surfaces.
  if (!g.overlap && a.rounding + b.rounding > 0.0f) separation = std::min(separation, axis_separation(a, b, n));
  if (g.overlap) {
    // The supports along n may lie far apart sideways, so their midpoint need not be near either
    // surface. B's deepest point moved halfway into the overlap along n lies inside B; if it is
    // inside the cylinder too it is the contact, else A's deepest point moved halfway back.
    const Vec3 from_b = pb - n * (0.5f * separation);
    point = inside_cylinder(a.cyl, from_b) ? from_b : pa + n * (0.5f * separation);
  }
  detail::push_point(out, point, separation, 0x58u << 8);
  return true;
}

}  // namespace

float cylinder_rounding(const Shape& cylinder) {
  return std::min(kCylinderRounding, 0.5f * std::min(cylinder.radius, cylinder.half_height));
}

Vec3 cylinder_support(const Shape& cylinder, const Transform& t, Vec3 d) {
  return cylinder_point(cylinder_geom(cylinder, t), cylinder.radius, cylinder.half_height, d);
}

Aabb cylinder_aabb(const Shape& cylinder, const Transform& t) {
  // Extent on world axis k: the axis' half length |u_k| h plus the rim disc's r sqrt(1 - u_k^2).
  const Vec3 u = rotate(t.rotation, Vec3{0.0f, 1.0f, 0.0f});
  const float r = cylinder.radius;
  const float h = cylinder.half_height;
  const auto extent = [r, h](float uk) { return std::fabs(uk) * h + r * std::sqrt(std::max(0.0f, 1.0f - uk * uk)); };
  const Vec3 e{extent(u.x), extent(u.y), extent(u.z)};
  return {t.position - e, t.position + e};
}

bool collide_cylinder_sphere(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                             Manifold& out) {
  Side sb;
  sb.kind = SideKind::Point;
  sb.p0 = tb.position;
  sb.rounding = b.radius;
  sb.centre = tb.position;
  return collide_sides(cylinder_side(a, ta, false), sb, margin, out);
}

bool collide_cylinder_capsule(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                              Manifold& out) {
  const detail::Segment seg = detail::capsule_segment(b, tb);
  Side sb;
  sb.kind = SideKind::Segment;
  sb.p0 = seg.p0;
  sb.p1 = seg.p1;
  sb.rounding = b.radius;
  sb.centre = tb.position;
  return collide_sides(cylinder_side(a, ta, false), sb, margin, out);
}

bool collide_cylinder_box(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                          Manifold& out) {
  const detail::BoxHull box(b.half_extents);
  return collide_sides(cylinder_side(a, ta), polytope_side(box.view(), detail::make_frame(tb)), margin, out);
}

bool collide_cylinder_hull(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                           Manifold& out) {
  return collide_sides(cylinder_side(a, ta), polytope_side(b.hull->view(), detail::make_frame(tb)), margin, out);
}

bool collide_cylinder_cylinder(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
                               Manifold& out) {
  return collide_sides(cylinder_side(a, ta), cylinder_side(b, tb), margin, out);
}

bool collide_plane_cylinder(const Shape& /*a*/, const Transform& ta, const Shape& b, const Transform& tb,
                            float margin, Manifold& out) {
  out.point_count = 0;
  const Vec3 n = rotate(ta.rotation, Vec3{0.0f, 1.0f, 0.0f});
  const float offset = dot(n, ta.position);
  Feature f;
  cylinder_feature(cylinder_geom(b, tb), -n, f);
  Vec3 points[kMaxFeature];
  float separations[kMaxFeature];
  uint32_t features[kMaxFeature];
  int count = 0;
  for (int i = 0; i < f.count; ++i) {
    const float s = dot(n, f.p[i]) - offset;
    if (s > margin) continue;
    points[count] = f.p[i] - n * (0.5f * s);
    separations[count] = s;
    features[count] = f.id[i];
    ++count;
  }
  out.normal = n;
  int selected[kMaxManifoldPoints];
  const int kept = detail::reduce_manifold(points, separations, count, n, selected);
  for (int i = 0; i < kept; ++i) detail::push_point(out, points[selected[i]], separations[selected[i]], features[selected[i]]);
  return out.point_count > 0;
}

namespace detail {

bool collide_cylinder_polytope(const Shape& a, const Transform& ta, const HullView& b, const Transform& tb,
                               float margin, Manifold& out) {
  return collide_sides(cylinder_side(a, ta), polytope_side(b, make_frame(tb)), margin, out);
}

bool collide_cylinder_polytope_face(const Shape& a, const Transform& ta, const HullView& b, uint32_t face,
                                    const Transform& tb, float margin, Manifold& out) {
  out.point_count = 0;
  const Frame fb = make_frame(tb);
  const Vec3 n = to_world_dir(fb, -b.planes[face].normal);  // from the cylinder to the face
  Feature fa;
  cylinder_feature(cylinder_geom(a, ta), n, fa);
  Feature fb_face;
  const HullFace hf = b.faces[face];
  fb_face.which = static_cast<uint8_t>(face & 0x3Fu);
  for (int i = 0; i < hf.count && fb_face.count < kMaxFeature; ++i) {
    fb_face.add(to_world(fb, b.vertices[b.face_vertices[hf.first + i]]), static_cast<uint8_t>(i));
  }
  if (clip_features(fa, fb_face, n, true, margin, out)) return true;
  // The cylinder lies beside this face's prism: its deepest point alone.
  out.point_count = 0;
  out.normal = n;
  const Vec3 deep = cylinder_support(a, ta, n);
  const float s = dot(-n, deep) - b.planes[face].offset - dot(-n, fb.origin);
  if (s > margin) return false;
  push_point(out, deep + n * (0.5f * s), s, face);
  return true;
}

}  // namespace detail

}  // namespace impulse::physics
