// Narrowphase contact generation by closest points and axis-aligned SAT (Ericson, "Real-Time
// Collision Detection", 2005, §4.2, §5.1.3, §5.2.5), dispatched through a function table.
#include "server/physics/narrowphase.h"

#include <array>
#include <cmath>
#include <cstddef>

namespace impulse::physics {
namespace {

// Axis visiting order for ties: Y first, so a concentric or perfectly symmetric overlap resolves
// along +Y (up), the same fallback as concentric spheres.
constexpr std::array<int, 3> kAxisOrder{1, 0, 2};
constexpr Vec3 kFallbackNormal{0.0f, 1.0f, 0.0f};

constexpr float get(Vec3 v, int axis) { return axis == 0 ? v.x : (axis == 1 ? v.y : v.z); }

constexpr Vec3 axis_vector(int axis, float sign) {
  return axis == 0 ? Vec3{sign, 0.0f, 0.0f} : (axis == 1 ? Vec3{0.0f, sign, 0.0f} : Vec3{0.0f, 0.0f, sign});
}

constexpr Vec3 clamp(Vec3 p, Vec3 lo, Vec3 hi) { return max(lo, min(p, hi)); }

}  // namespace

Aabb compute_aabb(const Shape& shape, Vec3 position) {
  const Vec3 extent = shape.kind == ShapeKind::Sphere ? Vec3{shape.radius, shape.radius, shape.radius}
                                                      : shape.half_extents;
  return Aabb{position - extent, position + extent};
}

bool collide_sphere_sphere(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out) {
  const Vec3 d = pb - pa;
  const float dist2 = length_squared(d);
  const float r = a.radius + b.radius;
  if (dist2 > r * r) return false;
  const float dist = std::sqrt(dist2);
  const Vec3 n = dist > kNarrowphaseEpsilon ? d * (1.0f / dist) : kFallbackNormal;
  // Surfaces along the normal: A's at pa + n ra, B's at pb - n rb; the point is their midpoint.
  const Vec3 surface_a = pa + n * a.radius;
  const Vec3 surface_b = pb - n * b.radius;
  out.point = (surface_a + surface_b) * 0.5f;
  out.normal = n;
  out.depth = std::max(r - dist, 0.0f);
  return true;
}

bool collide_sphere_box(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out) {
  const Vec3 box_min = pb - b.half_extents;
  const Vec3 box_max = pb + b.half_extents;
  const Vec3 closest = clamp(pa, box_min, box_max);  // Ericson §5.1.3
  const Vec3 d = closest - pa;
  const float dist2 = length_squared(d);
  const float r = a.radius;
  if (dist2 > r * r) return false;

  const float dist = std::sqrt(dist2);
  if (dist > kNarrowphaseEpsilon) {
    // Centre outside the box: the normal runs from the centre to its closest point on the box.
    const Vec3 n = d * (1.0f / dist);
    out.normal = n;
    out.depth = std::max(r - dist, 0.0f);
    out.point = ((pa + n * r) + closest) * 0.5f;
    return true;
  }

  // Centre inside, on, or within epsilon of the box: push the sphere out through the nearest
  // face. Signed face distances stay valid for a centre a hair outside (they go negative).
  int best_axis = kAxisOrder[0];
  float best_face = 0.0f;
  float best_outward = 1.0f;  // outward normal sign of the nearest face
  bool first = true;
  for (const int axis : kAxisOrder) {
    const float to_max = get(box_max, axis) - get(pa, axis);
    const float to_min = get(pa, axis) - get(box_min, axis);
    // Equal distances (centre on the mid-plane) exit through the -axis face, so normal = +axis.
    const float face = std::min(to_max, to_min);
    const float outward = to_max < to_min ? 1.0f : -1.0f;
    if (first || face < best_face) {
      best_axis = axis;
      best_face = face;
      best_outward = outward;
      first = false;
    }
  }
  // The sphere leaves along the outward normal, so B moves the opposite way relative to A.
  const Vec3 outward = axis_vector(best_axis, best_outward);
  out.normal = -outward;
  out.depth = std::max(r + best_face, 0.0f);
  // Box face point: pa + outward * face; deepest sphere point along the normal: pa - outward * r.
  out.point = pa + outward * ((best_face - r) * 0.5f);
  return true;
}

bool collide_box_box(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out) {
  const Vec3 a_min = pa - a.half_extents;
  const Vec3 a_max = pa + a.half_extents;
  const Vec3 b_min = pb - b.half_extents;
  const Vec3 b_max = pb + b.half_extents;

  int best_axis = kAxisOrder[0];
  float best_depth = 0.0f;
  float best_sign = 1.0f;
  bool first = true;
  for (const int axis : kAxisOrder) {
    // Translation of B along +axis (resp. -axis) that separates the boxes on this axis.
    const float push_pos = get(a_max, axis) - get(b_min, axis);
    const float push_neg = get(b_max, axis) - get(a_min, axis);
    if (push_pos < 0.0f || push_neg < 0.0f) return false;  // separating axis
    // push_pos <= push_neg exactly when centre_a <= centre_b: the sign follows the centres.
    const float depth = std::min(push_pos, push_neg);
    const float sign = push_pos <= push_neg ? 1.0f : -1.0f;
    if (first || depth < best_depth) {
      best_axis = axis;
      best_depth = depth;
      best_sign = sign;
      first = false;
    }
  }

  // Centre of the overlap region on every axis...
  Vec3 point = (max(a_min, b_min) + min(a_max, b_max)) * 0.5f;
  // ...except the normal axis, where it is the midpoint between the two touching faces.
  const float face_a = best_sign > 0.0f ? get(a_max, best_axis) : get(a_min, best_axis);
  const float face_b = best_sign > 0.0f ? get(b_min, best_axis) : get(b_max, best_axis);
  const float mid = (face_a + face_b) * 0.5f;
  if (best_axis == 0) point.x = mid;
  if (best_axis == 1) point.y = mid;
  if (best_axis == 2) point.z = mid;

  out.point = point;
  out.normal = axis_vector(best_axis, best_sign);
  out.depth = best_depth;
  return true;
}

namespace {

using CollideFn = bool (*)(const Shape&, Vec3, const Shape&, Vec3, ContactPoint&);

/// One table cell: the function and whether it was written for (B, A) and needs swapping.
struct DispatchEntry {
  CollideFn fn;
  bool swap;
};

constexpr std::size_t kKinds = static_cast<std::size_t>(ShapeKind::Count);
using DispatchTable = std::array<std::array<DispatchEntry, kKinds>, kKinds>;

// Row = kind of A, column = kind of B. Each new shape kind adds a row, a column and functions.
constexpr DispatchTable kDispatch{{
    /* Sphere */ {{{collide_sphere_sphere, false}, {collide_sphere_box, false}}},
    /* Box    */ {{{collide_sphere_box, true}, {collide_box_box, false}}},
}};
static_assert(kDispatch.size() == kKinds && kDispatch[0].size() == kKinds,
              "the dispatch table must cover every ShapeKind");

}  // namespace

bool collide(const Shape& a, Vec3 pa, const Shape& b, Vec3 pb, ContactPoint& out) {
  const auto ka = static_cast<std::size_t>(a.kind);
  const auto kb = static_cast<std::size_t>(b.kind);
  if (ka >= kKinds || kb >= kKinds) return false;
  const DispatchEntry& entry = kDispatch[ka][kb];
  if (!entry.swap) return entry.fn(a, pa, b, pb, out);
  if (!entry.fn(b, pb, a, pa, out)) return false;
  out.normal = -out.normal;
  return true;
}

}  // namespace impulse::physics
