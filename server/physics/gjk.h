// GJK distance between two convex sets given by support mappings (Gilbert, Johnson and Keerthi,
// "A fast procedure for computing the distance between complex objects in three-dimensional
// space", IEEE J. Robotics and Automation, 1988). The closest point of each simplex to the origin
// is found by its Voronoi regions, as in Ericson, "Real-Time Collision Detection", 2005, §5.1.5
// (triangle), §5.1.6 (tetrahedron) and §9.5 (the GJK loop). Header-only so each caller's support
// functors inline; no allocation, fixed iteration bound, deterministic (no FMA contraction: the
// project compiles with -ffp-contract=off).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "shared/math.h"

namespace impulse::physics::gjk {

/// Most GJK iterations; polytopes of up to 64 vertices converge in far fewer, curved shapes
/// (cylinders) reach the relative tolerance in about 10.
inline constexpr int kMaxIterations = 32;
/// Relative convergence: stop when the support point improves |v|^2 by less than this share.
inline constexpr float kRelativeTolerance = 1.0e-5f;
/// Distances below this are treated as touching or overlapping [m]: the caller then takes its
/// penetration path, whose contact is just as good at zero depth.
inline constexpr float kOverlapDistance = 1.0e-5f;

/// The result of distance(): when overlap is false, the closest points of the two sets (world
/// frame [m]) and their distance [m]; when true, the sets touch or overlap (distance 0).
struct Result {
  bool overlap = false;
  float distance = 0;
  Vec3 on_a;
  Vec3 on_b;
  int iterations = 0;
};

namespace detail {

struct Vertex {
  Vec3 w;  ///< a - b: a point of the Minkowski difference
  Vec3 a;
  Vec3 b;
};

struct Simplex {
  Vertex v[4];
  float weight[4] = {};
  int count = 0;
};

/// Keeps the vertices listed (in order) with their barycentric weights.
inline void keep(Simplex& s, int n, const int* idx, const float* weights) {
  Vertex tmp[4];
  for (int i = 0; i < n; ++i) tmp[i] = s.v[idx[i]];
  for (int i = 0; i < n; ++i) {
    s.v[i] = tmp[i];
    s.weight[i] = weights[i];
  }
  s.count = n;
}

/// Reduces the segment s.v[i0], s.v[i1] to the part closest to the origin.
inline void solve_segment(Simplex& s, int i0, int i1) {
  const Vec3 a = s.v[i0].w;
  const Vec3 ab = s.v[i1].w - a;
  const float denom = dot(ab, ab);
  const float t = denom > 0.0f ? -dot(a, ab) / denom : 0.0f;
  if (t <= 0.0f) {
    const int idx[1] = {i0};
    const float w[1] = {1.0f};
    keep(s, 1, idx, w);
  } else if (t >= 1.0f) {
    const int idx[1] = {i1};
    const float w[1] = {1.0f};
    keep(s, 1, idx, w);
  } else {
    const int idx[2] = {i0, i1};
    const float w[2] = {1.0f - t, t};
    keep(s, 2, idx, w);
  }
}

/// Reduces triangle (i0, i1, i2) to the feature closest to the origin (Ericson §5.1.5 with p = 0).
inline void solve_triangle(Simplex& s, int i0, int i1, int i2) {
  const Vec3 a = s.v[i0].w;
  const Vec3 b = s.v[i1].w;
  const Vec3 c = s.v[i2].w;
  const Vec3 ab = b - a;
  const Vec3 ac = c - a;
  const Vec3 ap = -a;
  const float d1 = dot(ab, ap);
  const float d2 = dot(ac, ap);
  if (d1 <= 0.0f && d2 <= 0.0f) {
    const int idx[1] = {i0};
    const float w[1] = {1.0f};
    return keep(s, 1, idx, w);
  }
  const Vec3 bp = -b;
  const float d3 = dot(ab, bp);
  const float d4 = dot(ac, bp);
  if (d3 >= 0.0f && d4 <= d3) {
    const int idx[1] = {i1};
    const float w[1] = {1.0f};
    return keep(s, 1, idx, w);
  }
  const float vc = d1 * d4 - d3 * d2;
  if (vc <= 0.0f && d1 >= 0.0f && d3 <= 0.0f) {
    const float t = d1 / (d1 - d3);
    const int idx[2] = {i0, i1};
    const float w[2] = {1.0f - t, t};
    return keep(s, 2, idx, w);
  }
  const Vec3 cp = -c;
  const float d5 = dot(ab, cp);
  const float d6 = dot(ac, cp);
  if (d6 >= 0.0f && d5 <= d6) {
    const int idx[1] = {i2};
    const float w[1] = {1.0f};
    return keep(s, 1, idx, w);
  }
  const float vb = d5 * d2 - d1 * d6;
  if (vb <= 0.0f && d2 >= 0.0f && d6 <= 0.0f) {
    const float t = d2 / (d2 - d6);
    const int idx[2] = {i0, i2};
    const float w[2] = {1.0f - t, t};
    return keep(s, 2, idx, w);
  }
  const float va = d3 * d6 - d5 * d4;
  if (va <= 0.0f && (d4 - d3) >= 0.0f && (d5 - d6) >= 0.0f) {
    const float t = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    const int idx[2] = {i1, i2};
    const float w[2] = {1.0f - t, t};
    return keep(s, 2, idx, w);
  }
  const float sum = va + vb + vc;
  if (!(sum > 0.0f)) {  // a degenerate (flat) triangle: its best edge
    return solve_segment(s, i0, i1);
  }
  const float denom = 1.0f / sum;
  const int idx[3] = {i0, i1, i2};
  const float w[3] = {va * denom, vb * denom, vc * denom};
  keep(s, 3, idx, w);
}

/// Whether the origin lies on the other side of plane (a, b, c) from d (Ericson §5.1.6). A flat
/// tetrahedron (d on the plane) counts as outside, so its faces are searched instead.
inline bool origin_outside(Vec3 a, Vec3 b, Vec3 c, Vec3 d) {
  const Vec3 n = cross(b - a, c - a);
  const float sign_p = dot(-a, n);
  const float sign_d = dot(d - a, n);
  return sign_d == 0.0f || sign_p * sign_d < 0.0f;
}

inline Vec3 point_of(const Simplex& s) {
  Vec3 p{};
  for (int i = 0; i < s.count; ++i) p += s.v[i].w * s.weight[i];
  return p;
}

/// Reduces the tetrahedron to the face feature closest to the origin; false when the origin is
/// inside (the sets overlap). A nearly flat tetrahedron (volume under 1e-5 of its longest edge
/// cubed) has no trustworthy inside: its plane tests take the sign of rounding noise and would
/// report an overlap of sets that are apart, so its closest face is taken instead, and a true
/// overlap then shows as |v| reaching zero.
inline bool solve_tetrahedron(Simplex& s) {
  static constexpr int kFaces[4][4] = {{0, 1, 2, 3}, {0, 2, 3, 1}, {0, 3, 1, 2}, {1, 3, 2, 0}};
  float longest_sq = 0.0f;
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) {
      const Vec3 e = s.v[j].w - s.v[i].w;
      longest_sq = std::max(longest_sq, dot(e, e));
    }
  }
  const float volume6 = std::fabs(dot(s.v[3].w - s.v[0].w, cross(s.v[1].w - s.v[0].w, s.v[2].w - s.v[0].w)));
  const bool flat = volume6 <= 1.0e-5f * longest_sq * std::sqrt(longest_sq);
  Simplex best;
  float best_d2 = 0.0f;
  bool any = false;
  for (const auto& f : kFaces) {
    if (!flat && !origin_outside(s.v[f[0]].w, s.v[f[1]].w, s.v[f[2]].w, s.v[f[3]].w)) continue;
    Simplex t = s;
    solve_triangle(t, f[0], f[1], f[2]);
    const Vec3 p = point_of(t);
    const float d2 = dot(p, p);
    if (!any || d2 < best_d2) {
      best = t;
      best_d2 = d2;
      any = true;
    }
  }
  if (!any) return false;
  s = best;
  return true;
}

}  // namespace detail

/// The distance between convex sets A and B, given support(d) functors that return the point of
/// each set farthest along the world direction d (not necessarily unit). `initial` is a first
/// search direction from A towards B (the centre line; any non-zero vector). Returns overlap when
/// the sets are within kOverlapDistance; otherwise the closest points and their distance.
template <class SupportA, class SupportB>
Result distance(const SupportA& support_a, const SupportB& support_b, Vec3 initial) {
  using detail::Vertex;
  Result r;
  detail::Simplex s;
  Vec3 d = dot(initial, initial) > 0.0f ? initial : Vec3{0.0f, 1.0f, 0.0f};
  {
    const Vec3 a = support_a(-d);
    const Vec3 b = support_b(d);
    s.v[0] = Vertex{a - b, a, b};
    s.weight[0] = 1.0f;
    s.count = 1;
  }
  Vec3 v = s.v[0].w;
  float vv = dot(v, v);
  constexpr float kOverlapSq = kOverlapDistance * kOverlapDistance;
  for (int it = 0; it < kMaxIterations; ++it) {
    r.iterations = it + 1;
    if (vv <= kOverlapSq) {
      r.overlap = true;
      return r;
    }
    // The Minkowski difference's support along -v: a's along -v, b's along +v.
    const Vec3 a = support_a(-v);
    const Vec3 b = support_b(v);
    const Vec3 w = a - b;
    if (vv - dot(v, w) <= kRelativeTolerance * vv) break;  // w brings v no closer
    bool repeated = false;
    for (int i = 0; i < s.count; ++i) repeated = repeated || (s.v[i].w == w);
    if (repeated) break;
    detail::Simplex next = s;
    next.v[next.count] = Vertex{w, a, b};
    ++next.count;
    switch (next.count) {
      case 2: detail::solve_segment(next, 0, 1); break;
      case 3: detail::solve_triangle(next, 0, 1, 2); break;
      default:
        if (!detail::solve_tetrahedron(next)) {
          r.overlap = true;
          return r;
        }
        break;
    }
    const Vec3 nv = detail::point_of(next);
    const float nvv = dot(nv, nv);
    if (!(nvv < vv)) break;  // no progress: keep the last simplex
    s = next;
    v = nv;
    vv = nvv;
  }
  if (vv <= kOverlapSq) {
    r.overlap = true;
    return r;
  }
  Vec3 pa{};
  Vec3 pb{};
  for (int i = 0; i < s.count; ++i) {
    pa += s.v[i].a * s.weight[i];
    pb += s.v[i].b * s.weight[i];
  }
  r.on_a = pa;
  r.on_b = pb;
  r.distance = std::sqrt(vv);
  return r;
}

}  // namespace impulse::physics::gjk
