// Helpers shared by the files of World (world.cpp, world_commands.cpp, world_solve.cpp,
// world_islands.cpp, world_hash.cpp, ...): not part of the physics API.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "server/physics/narrowphase.h"
#include "server/physics/settings.h"
#include "server/physics/types.h"
#include "shared/math.h"

namespace impulse::physics::detail {

// Union-find over [0, n) in `parent` (path halving; the smaller index becomes the root, so
// parent[x] <= x always and a root is the lowest index of its set).
inline void union_find_reset(std::vector<uint32_t>& parent, uint32_t n) {
  parent.resize(n);
  std::iota(parent.begin(), parent.end(), 0u);
}
inline uint32_t union_find_root(std::vector<uint32_t>& parent, uint32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}
inline void union_find_join(std::vector<uint32_t>& parent, uint32_t a, uint32_t b) {
  const uint32_t ra = union_find_root(parent, a);
  const uint32_t rb = union_find_root(parent, b);
  if (ra != rb) parent[std::max(ra, rb)] = std::min(ra, rb);
}

/// A shape's AABB at `t`, grown by `margin` [m] on every side (the speculative margin).
inline Aabb fat_aabb(const Shape& shape, const Transform& t, float margin) {
  Aabb box = compute_aabb(shape, t);
  const Vec3 m{margin, margin, margin};
  box.min -= m;
  box.max += m;
  return box;
}

/// The radius of the largest sphere about the centre inside the shape [m] (Box2D's minExtent):
/// the continuous-collision fast test compares a body's motion with half of it.
inline float inner_extent(const Shape& s) {
  if (s.kind == ShapeKind::Box) return std::min(s.half_extents.x, std::min(s.half_extents.y, s.half_extents.z));
  if (s.kind == ShapeKind::Hull) return s.hull->inner_radius;
  if (s.kind == ShapeKind::Cylinder) return std::min(s.radius, s.half_height);
  return s.radius;  // sphere, capsule (a plane is never dynamic)
}

inline bool is_finite_positive(float x) { return std::isfinite(x) && x > 0; }
inline bool is_finite_non_negative(float x) { return std::isfinite(x) && x >= 0; }

/// Every component finite and within [-bound, bound].
inline bool within(Vec3 v, float bound) {
  return is_finite(v) && std::fabs(v.x) <= bound && std::fabs(v.y) <= bound && std::fabs(v.z) <= bound;
}

/// Volume [m^3] of a solid sphere, box, capsule, cylinder or hull (0 for a plane).
inline float shape_volume(const Shape& s) {
  constexpr float kPi = 3.14159265f;
  switch (s.kind) {
    case ShapeKind::Sphere: return (4.0f / 3.0f) * kPi * s.radius * s.radius * s.radius;
    case ShapeKind::Box: return 8.0f * s.half_extents.x * s.half_extents.y * s.half_extents.z;
    case ShapeKind::Capsule:
      return kPi * s.radius * s.radius * (2.0f * s.half_height + (4.0f / 3.0f) * s.radius);
    case ShapeKind::Cylinder: return kPi * s.radius * s.radius * 2.0f * s.half_height;
    case ShapeKind::Hull: return s.hull->volume;
    default: return 0.0f;
  }
}

/// The density rule of a dynamic body (settings.h, kMinDensity / kMaxDensity), as a mass range:
/// mass / volume in [kMinDensity, kMaxDensity]. NaN fails.
inline bool density_within(const Shape& s, float mass) {
  const double volume = static_cast<double>(shape_volume(s));
  const double m = static_cast<double>(mass);
  return m >= kMinDensity * volume && m <= kMaxDensity * volume;
}

/// Finite, with length |v| <= bound (a huge finite v squares to infinity and fails).
inline bool length_within(Vec3 v, float bound) { return is_finite(v) && length_squared(v) <= bound * bound; }

/// Component-wise 1 / v, with 0 for a component that is not positive (an axis the body cannot
/// turn about).
inline Vec3 safe_inverse(Vec3 v) {
  return {v.x > 0 ? 1.0f / v.x : 0.0f, v.y > 0 ? 1.0f / v.y : 0.0f, v.z > 0 ? 1.0f / v.z : 0.0f};
}

/// Wall time of the step's stages (StepProfile).
class StageTimer {
 public:
  StageTimer() : start_(std::chrono::steady_clock::now()) {}
  /// Milliseconds since construction or the previous lap.
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - start_).count();
    start_ = now;
    return ms;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace impulse::physics::detail
