// Small 3D vector, quaternion, 3x3 matrix and AABB maths. Plain structs and free functions; float,
// SI units. Determinism: the build uses -ffp-contract=off, so a*b+c is never fused and results are
// bit-identical for the same binary and inputs. Nothing here calls library trigonometry, whose
// results may differ between C libraries; only sqrt (correctly rounded by IEEE 754) is used.
#pragma once

#include <algorithm>
#include <cmath>

namespace impulse {

struct Vec3 {
  float x = 0.0f;
  float y = 0.0f;
  float z = 0.0f;

  friend constexpr bool operator==(const Vec3&, const Vec3&) = default;
};

constexpr Vec3 operator+(Vec3 a, Vec3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
constexpr Vec3 operator-(Vec3 a, Vec3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
constexpr Vec3 operator-(Vec3 a) { return {-a.x, -a.y, -a.z}; }
constexpr Vec3 operator*(Vec3 a, float s) { return {a.x * s, a.y * s, a.z * s}; }
constexpr Vec3 operator*(float s, Vec3 a) { return {a.x * s, a.y * s, a.z * s}; }
constexpr Vec3& operator+=(Vec3& a, Vec3 b) { a = a + b; return a; }
constexpr Vec3& operator-=(Vec3& a, Vec3 b) { a = a - b; return a; }
constexpr Vec3& operator*=(Vec3& a, float s) { a = a * s; return a; }

constexpr float dot(Vec3 a, Vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
constexpr Vec3 cross(Vec3 a, Vec3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
/// Component-wise product.
constexpr Vec3 mul(Vec3 a, Vec3 b) { return {a.x * b.x, a.y * b.y, a.z * b.z}; }
constexpr float length_squared(Vec3 a) { return dot(a, a); }
inline float length(Vec3 a) { return std::sqrt(dot(a, a)); }
constexpr Vec3 min(Vec3 a, Vec3 b) { return {std::min(a.x, b.x), std::min(a.y, b.y), std::min(a.z, b.z)}; }
constexpr Vec3 max(Vec3 a, Vec3 b) { return {std::max(a.x, b.x), std::max(a.y, b.y), std::max(a.z, b.z)}; }
constexpr Vec3 abs(Vec3 a) { return {a.x < 0 ? -a.x : a.x, a.y < 0 ? -a.y : a.y, a.z < 0 ? -a.z : a.z}; }
inline bool is_finite(Vec3 a) { return std::isfinite(a.x) && std::isfinite(a.y) && std::isfinite(a.z); }
/// a / |a|, or `fallback` when |a| is below 1e-12 (no division by ~0, no NaN).
inline Vec3 normalize_or(Vec3 a, Vec3 fallback) {
  const float len_sq = length_squared(a);
  return len_sq > 1.0e-24f ? a * (1.0f / std::sqrt(len_sq)) : fallback;
}
/// a scaled down to length `max_length` when it is longer (a speed cap); else a unchanged.
inline Vec3 clamp_length(Vec3 a, float max_length) {
  const float len_sq = length_squared(a);
  return len_sq > max_length * max_length ? a * (max_length / std::sqrt(len_sq)) : a;
}
/// Component i (0 = x, 1 = y, 2 = z).
constexpr float component(Vec3 a, int i) { return i == 0 ? a.x : (i == 1 ? a.y : a.z); }

/// Unit quaternion for rotations: v' = q v q*. w is the scalar part. Identity by default.
/// Hamilton convention (as in Eigen, Jolt and Bullet): q1 * q2 applies q2 first.
struct Quat {
  float x = 0.0f;
  float y = 0.0f;
  float z = 0.0f;
  float w = 1.0f;

  friend constexpr bool operator==(const Quat&, const Quat&) = default;
};

constexpr Quat operator*(Quat a, Quat b) {
  return {a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
          a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
          a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w,
          a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z};
}
constexpr Quat conjugate(Quat q) { return {-q.x, -q.y, -q.z, q.w}; }
constexpr float dot(Quat a, Quat b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }
inline bool is_finite(Quat q) {
  return std::isfinite(q.x) && std::isfinite(q.y) && std::isfinite(q.z) && std::isfinite(q.w);
}
/// q / |q|; the identity when |q| is below 1e-12 (a degenerate input cannot produce NaN).
inline Quat normalize(Quat q) {
  const float len_sq = dot(q, q);
  if (!(len_sq > 1.0e-24f)) return Quat{};
  const float s = 1.0f / std::sqrt(len_sq);
  return {q.x * s, q.y * s, q.z * s, q.w * s};
}
/// Rotates v by the unit quaternion q: v + 2w (u x v) + 2 u x (u x v), u = (x, y, z).
constexpr Vec3 rotate(Quat q, Vec3 v) {
  const Vec3 u{q.x, q.y, q.z};
  const Vec3 t = cross(u, v) * 2.0f;
  return v + t * q.w + cross(u, t);
}
/// Rotates v by the inverse of the unit quaternion q (world to local).
constexpr Vec3 inverse_rotate(Quat q, Vec3 v) { return rotate(conjugate(q), v); }
/// Semi-implicit quaternion integration: q + (dt/2) (w, 0) q, renormalised. w is the angular
/// velocity [rad/s] in the world frame. First order; the renormalisation keeps |q| = 1.
inline Quat integrate_rotation(Quat q, Vec3 w, float dt) {
  const Quat spin{w.x, w.y, w.z, 0.0f};
  const Quat dq = spin * q;
  const float h = 0.5f * dt;
  return normalize(Quat{q.x + dq.x * h, q.y + dq.y * h, q.z + dq.z * h, q.w + dq.w * h});
}
/// Quaternion from a unit axis and an angle [rad], using std::sin/std::cos. For set-up code only
/// (scenes, tests): it is outside the step, so library trigonometry cannot affect determinism of
/// a recorded session.
inline Quat quat_from_axis_angle(Vec3 unit_axis, float angle) {
  const float s = std::sin(0.5f * angle);
  return {unit_axis.x * s, unit_axis.y * s, unit_axis.z * s, std::cos(0.5f * angle)};
}

/// 3x3 matrix stored as three columns.
struct Mat3 {
  Vec3 c0{1.0f, 0.0f, 0.0f};
  Vec3 c1{0.0f, 1.0f, 0.0f};
  Vec3 c2{0.0f, 0.0f, 1.0f};
};

constexpr Vec3 operator*(const Mat3& m, Vec3 v) { return m.c0 * v.x + m.c1 * v.y + m.c2 * v.z; }
/// Rotation matrix of a unit quaternion; its columns are the rotated local axes.
constexpr Mat3 to_mat3(Quat q) {
  return {rotate(q, {1.0f, 0.0f, 0.0f}), rotate(q, {0.0f, 1.0f, 0.0f}), rotate(q, {0.0f, 0.0f, 1.0f})};
}
/// R diag(d) R^T: a diagonal local tensor (e.g. inverse inertia [1/(kg m^2)]) in the world frame.
constexpr Mat3 rotate_diagonal(const Mat3& r, Vec3 d) {
  // Column j of R D R^T is sum_k R[:,k] d_k R[j,k].
  const Vec3 rx{r.c0.x, r.c1.x, r.c2.x};  // row 0 of R
  const Vec3 ry{r.c0.y, r.c1.y, r.c2.y};
  const Vec3 rz{r.c0.z, r.c1.z, r.c2.z};
  auto column = [&](Vec3 row) { return r.c0 * (d.x * row.x) + r.c1 * (d.y * row.y) + r.c2 * (d.z * row.z); };
  return {column(rx), column(ry), column(rz)};
}

/// Axis-aligned bounding box in the world frame [m]. Invariant: min <= max on every axis.
struct Aabb {
  Vec3 min;
  Vec3 max;
};

/// True when the boxes overlap or touch (closed intervals on every axis).
constexpr bool overlaps(const Aabb& a, const Aabb& b) {
  return a.min.x <= b.max.x && b.min.x <= a.max.x &&
         a.min.y <= b.max.y && b.min.y <= a.max.y &&
         a.min.z <= b.max.z && b.min.z <= a.max.z;
}
/// True when `outer` contains `inner` (closed).
constexpr bool contains(const Aabb& outer, const Aabb& inner) {
  return outer.min.x <= inner.min.x && outer.min.y <= inner.min.y && outer.min.z <= inner.min.z &&
         inner.max.x <= outer.max.x && inner.max.y <= outer.max.y && inner.max.z <= outer.max.z;
}

}  // namespace impulse
