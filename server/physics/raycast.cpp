// Closed-form segment casts per shape kind: robust ray-sphere quadratic (Haines et al., Ray
// Tracing Gems, 2019, ch. 7), Kay-Kajiya slab test (Ericson, "Real-Time Collision Detection",
// 2005, §5.3.3), capsule as cylinder side plus end spheres (Ericson §5.3.7), plane by division.
#include "server/physics/raycast.h"

#include "server/physics/convex_hull.h"
#include "server/physics/heightfield.h"
#include "server/physics/triangle_mesh.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

namespace impulse::physics {
namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();

/// The shared preconditions: finite origin and translation, a usable length, max_fraction >= 0.
bool is_usable_segment(Vec3 origin, Vec3 translation, float max_fraction) {
  const float len_sq = length_squared(translation);
  return is_finite(origin) && is_finite(translation) && len_sq > 1.0e-24f && len_sq <= std::numeric_limits<float>::max() &&
         max_fraction >= 0.0f;
}

/// The start-inside hit: fraction 0 at the origin, normal opposing the motion.
bool report_inside(Vec3 origin, Vec3 translation, ShapeRayHit& out) {
  out.point = origin;
  out.normal = normalize_or(-translation, Vec3{0.0f, 1.0f, 0.0f});  // |translation| > 1e-12: never the fallback
  out.fraction = 0.0f;
  return true;
}

/// Distance s >= 0 along the unit direction u at which a ray from an origin outside the sphere
/// (m = origin - centre, |m| > radius) enters it, or false. Haines et al.'s forms: the
/// discriminant from the perpendicular offset (no b^2 - c cancellation for distant origins) and
/// the near root as c / q (no -b - sqrt(disc) cancellation for origins near the surface).
bool enter_sphere(Vec3 m, Vec3 u, float radius, float c, float& s) {
  const float b = dot(m, u);
  if (!(b < 0.0f)) return false;  // moving away from (or past) the centre: an outside origin never enters
  const Vec3 perp = m - u * b;    // centre to the closest point of the line
  const float disc = radius * radius - length_squared(perp);
  if (!(disc >= 0.0f)) return false;
  s = c / (std::sqrt(disc) - b);  // -b > 0 and sqrt(disc) >= 0: no cancellation
  return true;
}

/// Distance s along the unit direction u at which the line through an origin (m = origin -
/// centre) leaves the sphere, or false when the line misses it. The far root of s^2 + 2bs + c = 0,
/// as -b + sqrt(disc) when b <= 0 and as c / q's partner -c / (b + sqrt(disc)) when b > 0, so an
/// origin on the surface moving outward gets s = 0 without cancellation (Haines et al.).
bool exit_sphere(Vec3 m, Vec3 u, float radius, float& s) {
  const float b = dot(m, u);
  const Vec3 perp = m - u * b;
  const float disc = radius * radius - length_squared(perp);
  if (!(disc >= 0.0f)) return false;
  const float root = std::sqrt(disc);
  if (b <= 0.0f) {
    s = root - b;
  } else {
    const float c = length_squared(m) - radius * radius;
    s = -c / (b + root);
  }
  return std::isfinite(s);
}

/// Writes a hit at `fraction` with a world-frame normal, if fraction <= max_fraction.
bool report_hit(Vec3 origin, Vec3 translation, float fraction, float max_fraction, Vec3 normal, ShapeRayHit& out) {
  if (!(fraction >= 0.0f && fraction <= max_fraction)) return false;  // also rejects NaN
  out.point = origin + translation * fraction;
  out.normal = normal;
  out.fraction = fraction;
  return true;
}

}  // namespace

bool raycast_sphere(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                    float max_fraction, ShapeRayHit& out, bool back_faces) {
  if (!is_usable_segment(origin, translation, max_fraction)) return false;
  const float radius = shape.radius;
  const Vec3 m = origin - transform.position;
  const float c = length_squared(m) - radius * radius;
  const float len = length(translation);
  const Vec3 u = translation * (1.0f / len);
  if (c <= 0.0f) {
    if (!back_faces) return report_inside(origin, translation, out);
    float s;
    if (!exit_sphere(m, u, radius, s)) return false;
    return report_hit(origin, translation, std::max(s, 0.0f) / len, max_fraction, normalize_or(m + u * s, u), out);
  }
  float s;
  if (!enter_sphere(m, u, radius, c, s)) return false;
  const Vec3 normal = normalize_or(m + u * s, -u);
  return report_hit(origin, translation, s / len, max_fraction, normal, out);
}

bool raycast_box(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                 float max_fraction, ShapeRayHit& out, bool back_faces) {
  if (!is_usable_segment(origin, translation, max_fraction)) return false;
  const Vec3 o = inverse_rotate(transform.rotation, origin - transform.position);
  const Vec3 d = inverse_rotate(transform.rotation, translation);
  if (!is_finite(o) || !is_finite(d)) return false;  // overflow far beyond any world: no NaN comparisons below

  // Kay-Kajiya: intersect the parameter intervals of the three slabs |o_i + t d_i| <= h_i.
  float t_enter = -kInfinity;
  float t_exit = kInfinity;
  int enter_axis = -1;
  int exit_axis = -1;
  for (int axis = 0; axis < 3; ++axis) {
    const float oi = component(o, axis);
    const float di = component(d, axis);
    const float hi = component(shape.half_extents, axis);
    if (di == 0.0f) {
      // Parallel to the slab: inside it for every t, or never (0 * inf would give NaN below).
      if (oi < -hi || oi > hi) return false;
      continue;
    }
    float t0 = (-hi - oi) / di;
    float t1 = (hi - oi) / di;
    if (t0 > t1) std::swap(t0, t1);
    if (t0 > t_enter) {  // strict: at an exact edge or corner the lower axis keeps the normal
      t_enter = t0;
      enter_axis = axis;
    }
    if (t1 < t_exit) {  // strict, as for the entry
      t_exit = t1;
      exit_axis = axis;
    }
    if (t_enter > t_exit) return false;
  }
  if (t_exit < 0.0f) return false;  // the box lies behind the origin
  if (t_enter <= 0.0f) {
    if (!back_faces) return report_inside(origin, translation, out);
    // Some axis has d != 0 (|translation| > 0), so t_exit is finite and exit_axis set. The
    // outward normal of the exit face points along the ray on that axis.
    const float sign = component(d, exit_axis) > 0.0f ? 1.0f : -1.0f;
    const Vec3 local_normal{exit_axis == 0 ? sign : 0.0f, exit_axis == 1 ? sign : 0.0f, exit_axis == 2 ? sign : 0.0f};
    return report_hit(origin, translation, t_exit, max_fraction, rotate(transform.rotation, local_normal), out);
  }
  // t_enter > 0 is finite here, so some axis set it.
  const float sign = component(d, enter_axis) > 0.0f ? -1.0f : 1.0f;
  const Vec3 local_normal{enter_axis == 0 ? sign : 0.0f, enter_axis == 1 ? sign : 0.0f, enter_axis == 2 ? sign : 0.0f};
  return report_hit(origin, translation, t_enter, max_fraction, rotate(transform.rotation, local_normal), out);
}

namespace {

// Where a line first enters (kExit false, origin outside) or last leaves (kExit true, origin
// inside) a capsule, in its local frame (o, d); false when it never does. The capsule is convex,
// so the line's interval inside it is the union of its intervals in the three convex pieces
// (finite cylinder, two end spheres): the entry is the earliest piece entry and the exit the
// latest piece exit. The cylinder's flat ends lie inside the spheres, so only its side counts.
// `normal` is outward, in the local frame.
template <bool kExit>
bool capsule_crossing(Vec3 o, Vec3 d, float radius, float hh, float& fraction, Vec3& normal) {
  const float r_sq = radius * radius;
  float best = kExit ? -kInfinity : kInfinity;
  const auto better = [&](float t) { return kExit ? t > best : t < best; };
  // Distance s along the unit u from m (origin - centre) to the sphere's surface, or false. An
  // entry needs the origin outside that piece (c > 0).
  const auto cross_sphere = [&](Vec3 m, Vec3 u, float& s) {
    if constexpr (kExit) {
      return exit_sphere(m, u, radius, s);
    } else {
      const float c = length_squared(m) - r_sq;
      return c > 0.0f && enter_sphere(m, u, radius, c, s);
    }
  };
  const auto keep = [&](float t, Vec3 m, Vec3 u, float s) {
    best = t;
    normal = normalize_or(m + u * s, kExit ? u : -u);
  };

  // Side of the infinite cylinder x^2 + z^2 = r^2, kept when the crossing lies within |y| <= hh:
  // the sphere's robust quadratic in the xz plane, in distances along the projected direction (a
  // translation parallel to the axis never crosses the side).
  const float a = d.x * d.x + d.z * d.z;
  if (a > 0.0f) {
    const float len_xz = std::sqrt(a);
    const Vec3 m{o.x, 0.0f, o.z};
    const Vec3 u{d.x / len_xz, 0.0f, d.z / len_xz};
    float s;
    if (cross_sphere(m, u, s)) {  // a circle in the plane y = 0
      const float t = s / len_xz;
      const float y = o.y + d.y * t;
      if (y >= -hh && y <= hh) keep(t, m, u, s);
    }
  }
  // End spheres.
  const float len = length(d);
  const Vec3 u = d * (1.0f / len);
  for (const float cap_y : {-hh, hh}) {
    const Vec3 m{o.x, o.y - cap_y, o.z};
    float s;
    if (cross_sphere(m, u, s) && better(s / len)) keep(s / len, m, u, s);
  }
  if (best == (kExit ? -kInfinity : kInfinity)) return false;
  fraction = kExit ? std::max(best, 0.0f) : best;
  return true;
}

}  // namespace

bool raycast_capsule(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                     float max_fraction, ShapeRayHit& out, bool back_faces) {
  if (!is_usable_segment(origin, translation, max_fraction)) return false;
  const float radius = shape.radius;
  const float hh = shape.half_height;
  const Vec3 o = inverse_rotate(transform.rotation, origin - transform.position);
  const Vec3 d = inverse_rotate(transform.rotation, translation);
  if (!is_finite(o) || !is_finite(d)) return false;

  // Inside: the origin is within radius of the core segment (closest point: o.y clamped).
  const Vec3 off_core{o.x, o.y - std::clamp(o.y, -hh, hh), o.z};
  const bool inside = length_squared(off_core) <= radius * radius;
  if (inside && !back_faces) return report_inside(origin, translation, out);
  float fraction = 0.0f;
  Vec3 normal;
  // An inside origin always leaves through some piece (its own piece contains it).
  const bool crossed = inside ? capsule_crossing<true>(o, d, radius, hh, fraction, normal)
                              : capsule_crossing<false>(o, d, radius, hh, fraction, normal);
  if (!crossed) return false;
  return report_hit(origin, translation, fraction, max_fraction, rotate(transform.rotation, normal), out);
}

bool raycast_cylinder(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                      float max_fraction, ShapeRayHit& out, bool back_faces) {
  if (!is_usable_segment(origin, translation, max_fraction)) return false;
  const Vec3 o = inverse_rotate(transform.rotation, origin - transform.position);
  const Vec3 d = inverse_rotate(transform.rotation, translation);
  if (!is_finite(o) || !is_finite(d)) return false;
  const float r = shape.radius;
  const float h = shape.half_height;
  // The line's interval inside the slab |y| <= h and inside the infinite side x^2 + z^2 <= r^2,
  // each entry and exit with its normal (Haines' interval method, as raycast_hull).
  float t_enter = -kInfinity;
  float t_exit = kInfinity;
  Vec3 enter_normal{0.0f, 1.0f, 0.0f};
  Vec3 exit_normal{0.0f, 1.0f, 0.0f};
  if (d.y == 0.0f) {
    if (std::fabs(o.y) > h) return false;
  } else {
    const float inv = 1.0f / d.y;
    float t0 = (-h - o.y) * inv;
    float t1 = (h - o.y) * inv;
    Vec3 n0{0.0f, -1.0f, 0.0f};
    Vec3 n1{0.0f, 1.0f, 0.0f};
    if (t0 > t1) {
      std::swap(t0, t1);
      std::swap(n0, n1);
    }
    t_enter = t0;
    t_exit = t1;
    enter_normal = n0;
    exit_normal = n1;
  }
  const float a = d.x * d.x + d.z * d.z;
  const float b = o.x * d.x + o.z * d.z;
  const float c = o.x * o.x + o.z * o.z - r * r;
  if (a == 0.0f) {
    if (c > 0.0f) return false;  // parallel to the axis, outside the side
  } else {
    const float disc = b * b - a * c;
    if (!(disc >= 0.0f)) return false;
    // Roots without cancellation: q = -(b + sign(b) sqrt(disc)), t = q / a and c / q.
    const float q = -(b + std::copysign(std::sqrt(disc), b));
    float t0 = q / a;
    float t1 = q != 0.0f ? c / q : t0;
    if (t0 > t1) std::swap(t0, t1);
    if (t0 > t_enter) {
      t_enter = t0;
      const Vec3 p = o + d * t0;
      enter_normal = normalize_or(Vec3{p.x, 0.0f, p.z}, Vec3{1.0f, 0.0f, 0.0f});
    }
    if (t1 < t_exit) {
      t_exit = t1;
      const Vec3 p = o + d * t1;
      exit_normal = normalize_or(Vec3{p.x, 0.0f, p.z}, Vec3{1.0f, 0.0f, 0.0f});
    }
  }
  if (!(t_enter <= t_exit) || t_exit < 0.0f) return false;
  if (t_enter <= 0.0f) {
    if (!back_faces) return report_inside(origin, translation, out);
    return report_hit(origin, translation, t_exit, max_fraction, rotate(transform.rotation, exit_normal), out);
  }
  return report_hit(origin, translation, t_enter, max_fraction, rotate(transform.rotation, enter_normal), out);
}

bool raycast_plane(const Shape&, const Transform& transform, Vec3 origin, Vec3 translation, float max_fraction,
                   ShapeRayHit& out, bool back_faces) {
  if (!is_usable_segment(origin, translation, max_fraction)) return false;
  const Vec3 normal = normalize_or(rotate(transform.rotation, Vec3{0.0f, 1.0f, 0.0f}), Vec3{0.0f, 1.0f, 0.0f});
  const float height = dot(normal, origin - transform.position);  // signed distance above the plane
  if (!std::isfinite(height)) return false;
  if (height <= 0.0f) {
    if (!back_faces) return report_inside(origin, translation, out);
    const float rise = dot(normal, translation);  // > 0 when leaving the half-space
    if (!(rise > 0.0f)) return false;
    return report_hit(origin, translation, -height / rise, max_fraction, normal, out);
  }
  const float approach = -dot(normal, translation);  // > 0 when moving towards the plane
  if (!(approach > 0.0f)) return false;
  return report_hit(origin, translation, height / approach, max_fraction, normal, out);
}

namespace {

bool raycast_hull(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation, float max_fraction,
                  ShapeRayHit& out, bool back_faces) {
  if (!is_usable_segment(origin, translation, max_fraction)) return false;
  const Vec3 o = inverse_rotate(transform.rotation, origin - transform.position);
  const Vec3 d = inverse_rotate(transform.rotation, translation);
  if (!is_finite(o) || !is_finite(d)) return false;
  // Haines, "Fast Ray-Convex Polyhedron Intersection", Graphics Gems II, 1991: the line's
  // interval inside every face's half-space.
  const ConvexHull& hull = *shape.hull;
  float t_enter = -kInfinity;
  float t_exit = kInfinity;
  size_t enter_face = 0;
  size_t exit_face = 0;
  for (size_t f = 0; f < hull.planes.size(); ++f) {
    const HullPlane& p = hull.planes[f];
    const float dist = dot(p.normal, o) - p.offset;  // > 0: in front of the face
    const float denom = dot(p.normal, d);
    if (denom == 0.0f) {
      if (dist > 0.0f) return false;
      continue;
    }
    const float t = -dist / denom;
    if (denom < 0.0f) {
      if (t > t_enter) {
        t_enter = t;
        enter_face = f;
      }
    } else if (t < t_exit) {
      t_exit = t;
      exit_face = f;
    }
    if (t_enter > t_exit) return false;
  }
  if (t_exit < 0.0f) return false;
  if (t_enter <= 0.0f) {
    if (!back_faces) return report_inside(origin, translation, out);
    return report_hit(origin, translation, t_exit, max_fraction, rotate(transform.rotation, hull.planes[exit_face].normal), out);
  }
  return report_hit(origin, translation, t_enter, max_fraction, rotate(transform.rotation, hull.planes[enter_face].normal), out);
}

// A mesh or heightfield is a one-sided surface, not a solid: only front faces are hit, from either side of the
// body's volume, and back_faces changes nothing (there is no inside to start in).
bool raycast_mesh_shape(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                        float max_fraction, ShapeRayHit& out, bool /*back_faces*/) {
  if (!is_usable_segment(origin, translation, max_fraction)) return false;
  const Vec3 o = inverse_rotate(transform.rotation, origin - transform.position);
  const Vec3 d = inverse_rotate(transform.rotation, translation);
  if (!is_finite(o) || !is_finite(d)) return false;
  MeshRayHit hit;
  const bool found = shape.kind == ShapeKind::Mesh ? raycast_mesh(*shape.mesh, o, d, max_fraction, hit)
                                                   : raycast_heightfield(*shape.heightfield, o, d, max_fraction, hit);
  if (!found) return false;
  return report_hit(origin, translation, hit.fraction, max_fraction, rotate(transform.rotation, hit.normal), out);
}

using RaycastFn = bool (*)(const Shape&, const Transform&, Vec3, Vec3, float, ShapeRayHit&, bool);

// Indexed by ShapeKind; the order must follow the enum.
constexpr std::array<RaycastFn, static_cast<std::size_t>(ShapeKind::Count)> kRaycastTable{
    raycast_sphere,   // ShapeKind::Sphere
    raycast_box,      // ShapeKind::Box
    raycast_capsule,  // ShapeKind::Capsule
    raycast_plane,    // ShapeKind::Plane
    raycast_hull,     // ShapeKind::Hull
    raycast_mesh_shape,  // ShapeKind::Mesh
    raycast_mesh_shape,  // ShapeKind::HeightField
    raycast_cylinder,    // ShapeKind::Cylinder
};
static_assert(static_cast<int>(ShapeKind::Sphere) == 0 && static_cast<int>(ShapeKind::Box) == 1 &&
                  static_cast<int>(ShapeKind::Capsule) == 2 && static_cast<int>(ShapeKind::Plane) == 3 &&
                  static_cast<int>(ShapeKind::Hull) == 4 && static_cast<int>(ShapeKind::Mesh) == 5 &&
                  static_cast<int>(ShapeKind::HeightField) == 6 && static_cast<int>(ShapeKind::Cylinder) == 7,
              "kRaycastTable follows the ShapeKind order");

}  // namespace

bool raycast_shape(const Shape& shape, const Transform& transform, Vec3 origin, Vec3 translation,
                   float max_fraction, ShapeRayHit& out, bool back_faces) {
  const auto kind = static_cast<std::size_t>(shape.kind);
  if (kind >= kRaycastTable.size()) return false;
  return kRaycastTable[kind](shape, transform, origin, translation, max_fraction, out, back_faces);
}

}  // namespace impulse::physics
