// Narrowphase internals shared by narrowphase.cpp and narrowphase_box.cpp: closest points of two
// segments (Ericson, "Real-Time Collision Detection", 2005, §5.1.9), manifold reduction to 4 points
// (Gregorius, "Robust Contact Creation for Physics Simulations", GDC 2015) and small helpers.
// Not part of the public API; exposed in a header so the unit tests can check the pieces directly.
#pragma once

#include <algorithm>
#include <cstdint>

#include "server/physics/convex_hull.h"
#include "server/physics/narrowphase.h"

namespace impulse::physics::detail {

/// Fallback normal for undefined directions (concentric spheres, a point on a segment): world +Y.
inline constexpr Vec3 kFallbackNormal{0.0f, 1.0f, 0.0f};

/// Segments whose directions satisfy |d1 x d2|^2 <= kParallelSinSq |d1|^2 |d2|^2 (sin angle <= 0.02,
/// about 1.1 degrees) are treated as parallel where a manifold needs two points (capsule lying on
/// a capsule or on a box face). Large enough to absorb the tilt of a resting capsule that sinks a
/// few mm more at one end; small enough that a visibly tilted capsule rests on its lower end only.
inline constexpr float kParallelSin = 0.02f;
inline constexpr float kParallelSinSq = kParallelSin * kParallelSin;

/// Squared lengths and areas [m^2] below this are degenerate (kNarrowphaseEpsilon squared).
inline constexpr float kDegenerateSq = kNarrowphaseEpsilon * kNarrowphaseEpsilon;

// Axis-choice tolerances (Gregorius GDC 2013/2015, Box2D's b2CollidePolygons; qu3e). Exact ties
// and float noise between near-equal axes would otherwise flip the reference face or switch
// between face and edge contacts from one step to the next, so warm starting would lose its
// points. Sign-agnostic form: a candidate wins only if its separation exceeds the incumbent's by
// rel * |incumbent| + abs * scale, scale = the smaller shape's size [m] (a box's mean half
// extent; a hull's mean of its inner and outer radius).
// - B's face beats A's face: 2 % + 0.1 % of the scale (prefer A as reference within noise).
// - An edge axis beats the best face: 5 % + 1 % of the scale (5 mm for a 1 m box). An edge contact
//   is one point; when a face contact is nearly as good, its 2-4 points are far more stable.
inline constexpr float kFaceRelTol = 0.02f;
inline constexpr float kFaceAbsTol = 0.001f;
inline constexpr float kEdgeRelTol = 0.05f;
inline constexpr float kEdgeAbsTol = 0.01f;
/// Edge pairs with |a_i x b_j|^2 below this (angle under ~1e-3 rad) are skipped: their axis is
/// numerically meaningless, and for parallel edges the face axes already cover the test.
inline constexpr float kEdgeParallelSq = 1.0e-6f;

inline constexpr bool wins(float candidate, float incumbent, float rel, float abs_tol) {
  return candidate > incumbent + rel * (incumbent < 0.0f ? -incumbent : incumbent) + abs_tol;
}

constexpr float clamp01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }

/// The world-frame rotation matrix columns and the position of a body: x_local -> x_world.
struct Frame {
  Vec3 origin;  ///< world [m]
  Mat3 basis;   ///< columns = local axes in the world frame
};

inline Frame make_frame(const Transform& t) { return {t.position, to_mat3(t.rotation)}; }
/// World point -> local point (R^T (p - origin)).
constexpr Vec3 to_local(const Frame& f, Vec3 p) {
  const Vec3 d = p - f.origin;
  return {dot(d, f.basis.c0), dot(d, f.basis.c1), dot(d, f.basis.c2)};
}
/// Local point -> world point.
constexpr Vec3 to_world(const Frame& f, Vec3 p) { return f.origin + f.basis * p; }
/// World direction -> local direction (R^T d).
constexpr Vec3 to_local_dir(const Frame& f, Vec3 d) { return {dot(d, f.basis.c0), dot(d, f.basis.c1), dot(d, f.basis.c2)}; }
/// Local direction -> world direction.
constexpr Vec3 to_world_dir(const Frame& f, Vec3 d) { return f.basis * d; }

/// World end points of a capsule's core segment (local (0, -+half_height, 0)).
struct Segment {
  Vec3 p0;
  Vec3 p1;
};
inline Segment capsule_segment(const Shape& capsule, const Transform& t) {
  const Vec3 half_axis = rotate(t.rotation, Vec3{0.0f, capsule.half_height, 0.0f});
  return {t.position - half_axis, t.position + half_axis};
}

/// Closest points of segments p1 + s d1 and p2 + t d2, s, t in [0, 1] (Ericson §5.1.9).
/// Degenerate (point) segments are handled; (near-)parallel segments take s = 0 and then clamp,
/// which is one of the equally close pairs: deterministic, never NaN.
struct SegmentClosest {
  float s = 0;
  float t = 0;
  Vec3 c1;  ///< on segment 1, world [m]
  Vec3 c2;  ///< on segment 2
};
inline SegmentClosest closest_segment_segment(Vec3 p1, Vec3 q1, Vec3 p2, Vec3 q2) {
  const Vec3 d1 = q1 - p1;
  const Vec3 d2 = q2 - p2;
  const Vec3 r = p1 - p2;
  const float a = dot(d1, d1);
  const float e = dot(d2, d2);
  const float f = dot(d2, r);
  float s = 0.0f;
  float t = 0.0f;
  if (a <= kDegenerateSq && e <= kDegenerateSq) {
    // Both are points.
  } else if (a <= kDegenerateSq) {
    t = clamp01(f / e);
  } else {
    const float c = dot(d1, r);
    if (e <= kDegenerateSq) {
      s = clamp01(-c / a);
    } else {
      const float b = dot(d1, d2);
      const float denom = a * e - b * b;  // |d1 x d2|^2 >= 0
      // Relative test: below sin^2 = 1e-6 the lines are parallel and any s works; take 0.
      if (denom > 1.0e-6f * a * e) s = clamp01((b * f - c * e) / denom);
      t = (b * s + f) / e;
      if (t < 0.0f) {
        t = 0.0f;
        s = clamp01(-c / a);
      } else if (t > 1.0f) {
        t = 1.0f;
        s = clamp01((b - c) / a);
      }
    }
  }
  return {s, t, p1 + d1 * s, p2 + d2 * t};
}

/// A unit vector perpendicular to d (|d| > 0), chosen deterministically: d x (the world axis along
/// which d has its smallest component, lowest index on ties). +Y for a zero d.
inline Vec3 any_perpendicular(Vec3 d) {
  const Vec3 ad = abs(d);
  Vec3 axis{1.0f, 0.0f, 0.0f};
  if (ad.y < ad.x && ad.y <= ad.z) {
    axis = {0.0f, 1.0f, 0.0f};
  } else if (ad.z < ad.x && ad.z < ad.y) {
    axis = {0.0f, 0.0f, 1.0f};
  }
  return normalize_or(cross(d, axis), kFallbackNormal);
}

// --- A box seen as a hull -------------------------------------------------------------------------
// Vertex v has x = +hx if bit 0 is set, else -hx; bit 1 for y, bit 2 for z. Faces +X, -X, +Y, -Y,
// +Z, -Z, each counter-clockwise about its outward normal.
inline constexpr uint8_t kBoxLoops[24] = {1, 3, 7, 5, 0, 4, 6, 2, 2, 6, 7, 3, 0, 1, 5, 4, 4, 5, 7, 6, 0, 2, 3, 1};
inline constexpr HullFace kBoxFaces[6] = {{0, 4}, {4, 4}, {8, 4}, {12, 4}, {16, 4}, {20, 4}};

/// The box's 12 edges, derived once from its face loops as build_convex_hull derives a hull's.
const HullEdge* box_edges();

struct BoxHull {
  Vec3 vertices[8];
  HullPlane planes[6];
  explicit BoxHull(Vec3 h) {
    for (uint32_t v = 0; v < 8; ++v) {
      vertices[v] = {(v & 1u) ? h.x : -h.x, (v & 2u) ? h.y : -h.y, (v & 4u) ? h.z : -h.z};
    }
    planes[0] = {{1, 0, 0}, h.x};
    planes[1] = {{-1, 0, 0}, h.x};
    planes[2] = {{0, 1, 0}, h.y};
    planes[3] = {{0, -1, 0}, h.y};
    planes[4] = {{0, 0, 1}, h.z};
    planes[5] = {{0, 0, -1}, h.z};
  }
  HullView view() const { return {vertices, planes, kBoxFaces, kBoxLoops, box_edges(), 8, 6, 12, length(vertices[7])}; }
};

/// A hull's size for the axis-choice tolerances [m].
inline float hull_scale(const ConvexHull& h) { return 0.5f * (h.inner_radius + h.radius); }
inline float box_scale(Vec3 h) { return (h.x + h.y + h.z) * (1.0f / 3.0f); }

/// The convex shape's own view (box or hull) and size, for the polytope entry points below.
struct ConvexView {
  BoxHull box;
  HullView view;
  float size;
  explicit ConvexView(const Shape& a)
      : box(a.kind == ShapeKind::Box ? a.half_extents : Vec3{}),
        view(a.kind == ShapeKind::Hull ? a.hull->view() : box.view()),
        size(a.kind == ShapeKind::Hull ? hull_scale(*a.hull) : box_scale(a.half_extents)) {}
};

/// Convex shape `a` (sphere, capsule, box or hull) at `ta` against the convex polytope seen
/// through `b` (its vertices and planes in the frame `tb` places, whose origin must be inside it:
/// edge axes are oriented from it), with b_size its size for the axis-choice tolerances [m].
/// Normal from a to b. Used for hulls and for the prisms that stand for mesh triangles.
bool collide_convex_polytope(const Shape& a, const Transform& ta, const HullView& b, float b_size, const Transform& tb,
                             float margin, Manifold& out);

/// The same pair with b's face `face` forced as the reference: the points of `a` over that face's
/// prism, their separations along its normal (normal from a to b: minus the face normal). A mesh
/// contact that would otherwise take its normal from an inactive edge uses this.
bool collide_convex_polytope_face(const Shape& a, const Transform& ta, const HullView& b, uint32_t face,
                                  const Transform& tb, float margin, Manifold& out);

/// A cylinder `a` against a convex polytope (a hull view placed by `tb`), and the same with b's
/// face `face` forced as the reference (narrowphase_cylinder.cpp); as collide_convex_polytope
/// and collide_convex_polytope_face, which call them for a cylinder.
bool collide_cylinder_polytope(const Shape& a, const Transform& ta, const HullView& b, const Transform& tb,
                               float margin, Manifold& out);
bool collide_cylinder_polytope_face(const Shape& a, const Transform& ta, const HullView& b, uint32_t face,
                                    const Transform& tb, float margin, Manifold& out);

/// Depth [m] of the prism that stands for a mesh triangle behind its front face: a body sunk less
/// than half of it is pushed out through the front (its centre must be in front anyway).
inline constexpr float kTriangleDepth = 0.2f;

/// A mesh triangle as a convex polytope: the triangle and a copy kTriangleDepth behind it, with
/// vertices relative to the prism's centre (so the centre is inside, as hull views require).
/// Face 0 is the front face (outward normal: the triangle's), face 1 the back, faces 2 + k the
/// side over edge k (v[k] -> v[k + 1]).
struct TrianglePrism {
  Vec3 vertices[6];
  HullPlane planes[5];
  Vec3 centre;  ///< in the triangle's frame (the mesh's) [m]
  float radius = 0;
  HullView view() const;
};

/// The prism of triangle v (counter-clockwise about its front normal n, unit).
TrianglePrism make_triangle_prism(const Vec3 v[3], Vec3 n);

/// Appends a point (no capacity check: callers emit at most kMaxManifoldPoints).
inline void push_point(Manifold& m, Vec3 point, float separation, uint32_t feature) {
  m.points[m.point_count] = ManifoldPoint{point, separation, feature};
  ++m.point_count;
}

/// Picks at most 4 of `count` candidate points (Gregorius, GDC 2015): the deepest (smallest
/// separation); then the point farthest from it; then the one maximising the triangle's area; then
/// the one farthest outside the triangle (the largest added quad area). Ties go to the lowest index.
/// Fewer are returned when the rest are degenerate (coincident or collinear within
/// kDegenerateSq). `normal` is the manifold normal (unit) for signed areas. Writes the chosen
/// indices to `selected` (deepest first) and returns their number; count <= 4 returns 0..count-1.
inline int reduce_manifold(const Vec3* points, const float* separations, int count, Vec3 normal,
                           int selected[kMaxManifoldPoints]) {
  if (count <= kMaxManifoldPoints) {
    for (int i = 0; i < count; ++i) selected[i] = i;
    return count;
  }
  int i0 = 0;
  for (int i = 1; i < count; ++i) {
    if (separations[i] < separations[i0]) i0 = i;
  }
  const Vec3 p0 = points[i0];
  int i1 = -1;
  float best = kDegenerateSq;
  for (int i = 0; i < count; ++i) {
    const float d2 = length_squared(points[i] - p0);
    if (i != i0 && d2 > best) {
      best = d2;
      i1 = i;
    }
  }
  selected[0] = i0;
  if (i1 < 0) return 1;
  selected[1] = i1;
  const Vec3 e01 = points[i1] - p0;
  int i2 = -1;
  float best_area = kDegenerateSq;  // twice the triangle area [m^2]
  float signed_area = 0.0f;
  for (int i = 0; i < count; ++i) {
    if (i == i0 || i == i1) continue;
    const float area = dot(cross(e01, points[i] - p0), normal);
    const float abs_area = area < 0.0f ? -area : area;
    if (abs_area > best_area) {
      best_area = abs_area;
      signed_area = area;
      i2 = i;
    }
  }
  if (i2 < 0) return 2;
  selected[2] = i2;
  // Wind the triangle counter-clockwise about the normal so "outside an edge" has one sign.
  const int tri[3] = {i0, signed_area >= 0.0f ? i1 : i2, signed_area >= 0.0f ? i2 : i1};
  int i3 = -1;
  float best_outside = kDegenerateSq;  // twice the area the point adds to the triangle [m^2]
  for (int i = 0; i < count; ++i) {
    if (i == i0 || i == i1 || i == i2) continue;
    float outside = 0.0f;
    for (int e = 0; e < 3; ++e) {
      const Vec3 a = points[tri[e]];
      const Vec3 b = points[tri[(e + 1) % 3]];
      outside = std::max(outside, -dot(cross(b - a, points[i] - a), normal));
    }
    if (outside > best_outside) {
      best_outside = outside;
      i3 = i;
    }
  }
  if (i3 < 0) return 3;
  selected[3] = i3;
  return 4;
}

}  // namespace impulse::physics::detail
