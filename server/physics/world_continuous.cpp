// World's stage 6b: continuous collision. A dynamic body whose surface moved more than half its
// inner extent in this step ("fast": its displacement plus, unless it is a sphere, its turn times
// its extent; Box2D v3's test in b2FinalizeBodiesTask) is swept from its start pose to its end
// pose, turning at a constant rate about the step's axis, against the static bodies (planes
// included) its swept box overlaps; a bullet (BodyDesc::bullet) is swept also against the
// non-bullet dynamic and kinematic bodies, at their end poses (Box2D v3's bullets, solved after
// the other bodies are final; Jolt's EMotionQuality::LinearCast). If the body ends this step
// penetrating a shape it met on the way (deeper than linear_slop along the axis of first contact,
// which includes having passed right through it), it is moved back to the time of impact with a
// gap of about linear_slop, plus the motion along the surface up to the contact, keeping its
// velocity: the next step's speculative contact stops it at the surface, at the right place
// sideways. A body that ends at or outside the surface (the solver already stopped it) is left
// alone, so the stage changes nothing unless a body would tunnel or sink.
//
// Time of impact by conservative advancement along a separating axis (Mirtich, "Impulse-based
// Dynamic Simulation of Rigid Body Systems", 1996, ch. 4; Catto, "Continuous Collision", GDC 2013):
// at each iterate the separation d along the best of a few candidate axes n is a lower bound of
// the distance, and it falls by at most dot(delta, n) + angle * extent per unit time, so advancing
// by (d - target) over that can never step past the first contact. A body already touching a
// shape at the start of the step sweeps its core instead, a sphere of a quarter of its inner
// extent (Box2D v3's fallback in b2ContinuousQueryCallback), so sliding fast along a floor is not
// stopped but a centre that would cross a wall is; a turning body touching at the start is also
// stopped at the latest pose no deeper than it started plus linear_slop (bisection), so a plank
// pivoting on one end does not swing its other end through the floor (Jolt's HighSpeedTest).
//
// Deterministic: bodies in awake-list order, candidates in ascending slot order, on the calling
// thread after every batch of the solve; non-bullets meet only static bodies and bullets only
// final non-bullet poses, so the order among fast bodies does not matter. No allocation: the
// fast list and the query output are reused scratch buffers.
#include <algorithm>
#include <cmath>
#include <vector>

#include "server/physics/narrowphase.h"
#include "server/physics/narrowphase_detail.h"
#include "server/physics/world.h"
#include "server/physics/world_internal.h"

namespace impulse::physics {

using detail::fat_aabb;
using detail::FastBody;

namespace {

constexpr int kMaxSweepIterations = 20;  // conservative advancement converges in a few
// Bullets swept against the awake bodies per step, at most; later fast bullets (in awake-list
// order) meet only static and parked bodies, as ordinary fast bodies do. A bullet scans the whole
// awake list, so without a bound one client's 1000 fast bullets in a 20000-body world would cost
// 2e7 box tests a step; 64 bound it near 1.3e6 (a few ms at worst) whatever the clients send.
constexpr uint32_t kMaxBulletSweepsPerStep = 64;
constexpr float kCoreFraction = 0.25f;   // of the inner extent: the core swept when touching at t = 0

// The largest dot(x, n) over the shape placed at `t` (n unit, world frame). A plane gives its
// origin's projection: only its own normal (gap) is ever asked of it.
float support(const Shape& s, const Transform& t, Vec3 n) {
  const float base = dot(t.position, n);
  switch (s.kind) {
    case ShapeKind::Sphere: return base + s.radius;
    case ShapeKind::Box: {
      const Vec3 l = inverse_rotate(t.rotation, n);
      return base + std::fabs(l.x) * s.half_extents.x + std::fabs(l.y) * s.half_extents.y +
             std::fabs(l.z) * s.half_extents.z;
    }
    case ShapeKind::Capsule: {
      const Vec3 l = inverse_rotate(t.rotation, n);
      return base + std::fabs(l.y) * s.half_height + s.radius;
    }
    case ShapeKind::Hull: {
      const Vec3 l = inverse_rotate(t.rotation, n);
      return base + dot(hull_support(s.hull->view(), l), l);
    }
    case ShapeKind::Cylinder: return dot(cylinder_support(s, t, n), n);
    default: return base;
  }
}

// The gap between the two shapes' projections on the unit axis n, pointing from A towards B
// (negative: they overlap on it). For convex shapes it never exceeds their distance.
float separation_along(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, Vec3 n) {
  return -support(b, tb, -n) - support(a, ta, n);
}

struct Gap {
  float distance;  // a lower bound of the distance between the shapes [m]
  Vec3 normal;     // the axis that gives it, unit, from A towards B
};

// The largest projection gap over the candidate axes: the narrowphase's normal (the closest-point
// direction for round shapes, the SAT axis for boxes), the centre line, and both bodies' local
// axes with either sign (the face normals of boxes). Each candidate is a lower bound of the
// distance, so their maximum is too.
Gap gap(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float reach) {
  if (b.kind == ShapeKind::Plane) {  // a half-space: only its normal separates (outward is local +y)
    const Vec3 n = -rotate(tb.rotation, Vec3{0.0f, 1.0f, 0.0f});
    return Gap{separation_along(a, ta, b, tb, n), n};
  }
  Gap best{-1.0e30f, Vec3{0.0f, 1.0f, 0.0f}};
  auto consider = [&](Vec3 n) {
    const float d = separation_along(a, ta, b, tb, n);
    if (d > best.distance) best = Gap{d, n};
  };
  Manifold m;
  if (collide(a, ta, b, tb, reach, m)) consider(m.normal);
  const Vec3 centres = tb.position - ta.position;
  if (length_squared(centres) > kNarrowphaseEpsilon * kNarrowphaseEpsilon) consider(normalize_or(centres, Vec3{0.0f, 1.0f, 0.0f}));
  const Vec3 unit[3] = {{1.0f, 0.0f, 0.0f}, {0.0f, 1.0f, 0.0f}, {0.0f, 0.0f, 1.0f}};
  for (const Vec3& e : unit) {
    const Vec3 ua = rotate(ta.rotation, e);
    const Vec3 ub = rotate(tb.rotation, e);
    consider(ua);
    consider(-ua);
    consider(ub);
    consider(-ub);
  }
  return best;
}

struct Impact {
  bool hit = false;
  float t = 1.0f;  // fraction of the step's displacement
  Vec3 normal;     // axis of first contact, from the swept shape towards the obstacle
};

// The pose at fraction t of the step: the centre moves along delta, and the orientation turns by
// t * angle about the fixed axis (a rotation at constant angular velocity, as one step's is).
Transform pose_at(const FastBody& f, float t) {
  if (f.angle == 0.0f) return Transform{f.start + f.delta * t, f.start_orientation};
  return Transform{f.start + f.delta * t, normalize(quat_from_axis_angle(f.axis, f.angle * t) * f.start_orientation)};
}

// The first time in [0, 1] at which shape `a` (moving as `f`) comes within `target` (+ tolerance)
// of shape b at tb; no hit if it never does within the step. The gap along a fixed axis n closes
// at most at dot(delta, n) + angle * extent per unit t (the rotation moves no surface point by
// more than its distance from the centre times the angle: Mirtich's bound for conservative
// advancement), so advancing by the gap over that bound never steps past the first contact.
// `extent`: a's largest distance from the centre to its surface [m] (0 for a sphere, whose turn
// moves no surface point along any normal).
Impact time_of_impact(const Shape& a, const FastBody& f, float extent, const Shape& b, const Transform& tb,
                      float target, float tolerance, float reach) {
  const float turn = f.angle * extent;
  float t = 0.0f;
  for (int k = 0; k < kMaxSweepIterations; ++k) {
    const Gap g = gap(a, pose_at(f, t), b, tb, reach);
    if (g.distance <= target + tolerance) return Impact{true, t, g.normal};
    const float closing = dot(f.delta, g.normal) + turn;
    if (!(closing > 0.0f)) return Impact{};  // moving apart along a separating axis: never meets
    t += (g.distance - target) / closing;
    if (!(t < 1.0f)) return Impact{};
  }
  // Not converged (a grazing pass): stop where the advancement got to, which is still apart.
  return Impact{true, t, gap(a, pose_at(f, t), b, tb, reach).normal};
}

// A mesh triangle that shape b stands for, and its mesh's pose; tri null for any other shape.
struct MeshPart {
  const MeshTriangle* tri = nullptr;
  Transform mesh_pose;
};

// How deep shape a at ta overlaps shape b at tb [m] (its deepest contact point; <= 0 apart). For
// a mesh triangle, as the narrowphase sees it (collide_mesh_triangle: one-sided, active edges).
float overlap(const Shape& a, const Transform& ta, const Shape& b, const Transform& tb, float margin,
              const MeshPart& part) {
  Manifold m;
  bool touching = false;
  if (part.tri != nullptr) {
    const Quat inv = conjugate(part.mesh_pose.rotation);
    const Transform local{rotate(inv, ta.position - part.mesh_pose.position), normalize(inv * ta.rotation)};
    touching = collide_mesh_triangle(a, local, *part.tri, margin, m);
  } else {
    touching = collide(a, ta, b, tb, margin, m);
  }
  if (!touching) return -margin;
  float deepest = -margin;
  for (int i = 0; i < m.point_count; ++i) deepest = std::max(deepest, -m.points[i].separation);
  return deepest;
}

// A fraction of the step in [0, until] at which shape a, moving as f, overlaps b by at most
// `allowed` and just after which it overlaps by more, by bisection (a at t = 0 is within it, and
// at `until` beyond it): kBisections halvings.
constexpr int kBisections = 10;
float latest_within(const Shape& a, const FastBody& f, float until, const Shape& b, const Transform& tb,
                    float margin, float allowed, const MeshPart& part) {
  float lo = 0.0f;
  float hi = until;
  for (int k = 0; k < kBisections; ++k) {
    const float mid = 0.5f * (lo + hi);
    if (overlap(a, pose_at(f, mid), b, tb, margin, part) > allowed) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return lo;
}

}  // namespace

void World::sweep_fast_bodies() {
  const std::vector<FastBody>& fast = scratch_.fast_bodies;
  if (fast.empty()) return;
  const float margin = settings_.speculative_margin;
  const float target = settings_.linear_slop;  // the gap left at the time of impact (Box2D's target)
  const float tolerance = 0.25f * target;
  std::vector<uint32_t>& candidates = scratch_.sweep_candidates;
  ConvexHull prism_hull;  // a mesh triangle's prism, refilled per triangle (the pass is rare)

  // Non-bullets first (against static bodies), then bullets against everything final.
  uint32_t bullet_sweeps = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const bool bullets = pass == 1;
    for (const FastBody& f : fast) {
      const BodyInfo& info = bodies_.info[f.dense];
      if (info.sensor || info.bullet != bullets) continue;
      const Shape& shape = bodies_.shape[f.dense];
      Pose& pose = bodies_.pose[f.dense];
      const Transform end_pose{pose.position, pose.orientation};
      const Vec3 end = pose.position;
      const float extent = f.angle > 0.0f ? info.extent : 0.0f;
      const float reach = length(f.delta) + info.extent + margin;
      const Vec3 pad{info.extent + margin, info.extent + margin, info.extent + margin};
      const Aabb swept{min(f.start, end) - pad, max(f.start, end) + pad};
      const Shape core = make_sphere(kCoreFraction * detail::inner_extent(shape));
      float first = 1.0f;
      Vec3 slide;  // added to the pose at `first`: the motion along the surface up to the contact

      // tri: the mesh triangle `os` stands for (its mesh at mesh_pose), or null. A triangle hit
      // takes the normal the narrowphase would give the contact there, so a seam of a flat or
      // concave surface (an inactive edge) never stops a body sliding over it.
      auto sweep_shape = [&](const Shape& os, const Transform& to, const MeshTriangle* tri, const Transform& mesh_pose) {
        auto judge = [&](const Shape& swept_body, Impact& hit) {
          if (tri == nullptr || !hit.hit) return;
          const Transform at = pose_at(f, hit.t);
          const Quat inv = conjugate(mesh_pose.rotation);
          const Transform local{rotate(inv, at.position - mesh_pose.position), normalize(inv * at.rotation)};
          Manifold m;
          if (collide_mesh_triangle(swept_body, local, *tri, target + tolerance + margin, m)) {
            hit.normal = rotate(mesh_pose.rotation, m.normal);
          }
        };
        const Shape* swept_shape = &shape;
        Impact hit = time_of_impact(shape, f, extent, os, to, target, tolerance, reach);
        judge(shape, hit);
        if (hit.hit && hit.t == 0.0f) {  // touching at the start: sweep the core instead
          swept_shape = &core;
          hit = time_of_impact(core, f, 0.0f, os, to, target, tolerance, reach);
          judge(core, hit);
          if (hit.hit && hit.t == 0.0f) return;  // the centre starts inside: the solver's case
          if (extent > 0.0f) {
            // A turn can swing a far part of a long body through the surface it touches (a plank
            // struck at one end pivots on it), which the core does not see: stop at the latest
            // pose, up to the core's time of impact, no deeper than it started plus the slop.
            float until = 1.0f;
            if (hit.hit && separation_along(core, end_pose, os, to, hit.normal) < -target) until = hit.t;
            const MeshPart part{tri, mesh_pose};
            const float allowed = std::max(overlap(shape, pose_at(f, 0.0f), os, to, margin, part), 0.0f) + target;
            if (overlap(shape, pose_at(f, until), os, to, margin, part) > allowed) {
              until = latest_within(shape, f, until, os, to, margin, allowed, part);
            }
            if (until < first) {
              first = until;
              slide = Vec3{};
            }
            return;
          }
        }
        if (!hit.hit || !(hit.t < first)) return;
        // Act only if the body ends the step sunk into (or through) the shape along that axis.
        if (separation_along(*swept_shape, end_pose, os, to, hit.normal) < -target) {
          first = hit.t;
          slide = Vec3{};
          if (swept_shape != &shape) return;
          // Backed off along the path, an oblique hit stops short of the contact sideways too (1 cm
          // for Jolt's angled linear cast), and the off-centre contact then spins both bodies.
          // Keep the motion along the surface up to where the path touches: the gap along the
          // normal stays, the sideways lag goes (at most half the inner extent, and the step).
          const float closing = dot(f.delta, hit.normal);
          const float gap_left = separation_along(shape, pose_at(f, hit.t), os, to, hit.normal);
          if (!(closing > 0.0f) || !(gap_left > 0.0f)) return;
          const Vec3 along = (f.delta - hit.normal * closing) * std::min(gap_left / closing, 1.0f - hit.t);
          slide = clamp_length(along, 0.5f * detail::inner_extent(shape));
        }
      };
      auto sweep_against = [&](uint32_t other) {
        const BodyInfo& oi = bodies_.info[other];
        if (other == f.dense || oi.sensor || !should_collide(info.filter, oi.filter)) return;
        const Shape& os = bodies_.shape[other];
        const Transform to{bodies_.pose[other].position, bodies_.pose[other].orientation};
        if (!is_triangle_surface(os.kind)) {
          sweep_shape(os, to, nullptr, to);
          return;
        }
        // A mesh: each triangle under the swept box whose front the body starts in front of, as
        // the prism the narrowphase sees (narrowphase.h, collide_mesh), swept like a hull.
        const Quat inv = conjugate(to.rotation);
        const Vec3 centre = inverse_rotate(to.rotation, (swept.min + swept.max) * 0.5f - to.position);
        const Vec3 half = (swept.max - swept.min) * 0.5f;
        const Mat3 m = to_mat3(inv);
        const Vec3 e = abs(m.c0) * half.x + abs(m.c1) * half.y + abs(m.c2) * half.z;
        const Vec3 start_local = inverse_rotate(to.rotation, f.start - to.position);
        auto sweep_triangle = [&](const MeshTriangle& tri) {
          const Vec3 n = normalize_or(cross(tri.v[1] - tri.v[0], tri.v[2] - tri.v[0]), Vec3{0.0f, 1.0f, 0.0f});
          if (dot(start_local - tri.v[0], n) < 0.0f) return true;
          const detail::TrianglePrism prism = detail::make_triangle_prism(tri.v, n);
          const HullView v = prism.view();
          prism_hull.vertices.assign(v.vertices, v.vertices + v.vertex_count);
          prism_hull.planes.assign(v.planes, v.planes + v.face_count);
          prism_hull.faces.assign(v.faces, v.faces + v.face_count);
          prism_hull.face_vertices.assign(v.face_vertices, v.face_vertices + 18);
          prism_hull.edges.assign(v.edges, v.edges + v.edge_count);
          prism_hull.radius = prism.radius;
          prism_hull.inner_radius = 0.5f * detail::kTriangleDepth;
          sweep_shape(make_hull(prism_hull), Transform{to.position + rotate(to.rotation, prism.centre), to.rotation}, &tri,
                      to);
          return true;
        };
        const Aabb local_box{centre - e, centre + e};
        if (os.kind == ShapeKind::Mesh) {
          for_each_triangle(*os.mesh, local_box, sweep_triangle);
        } else {
          for_each_triangle(*os.heightfield, local_box, sweep_triangle);
        }
      };

      broadphase_.query(swept, candidates);
      for (const uint32_t slot : candidates) {
        const uint32_t other = slots_.dense_of_slot(slot);
        if (other == SlotMap::kNone || !is_parked(other)) continue;
        const BodyKind kind = bodies_.info[other].kind;
        if (kind == BodyKind::Static || (bullets && kind == BodyKind::Dynamic)) sweep_against(other);
      }
      if (bullets && bullet_sweeps < kMaxBulletSweepsPerStep) {  // awake partners at their end poses (the grid holds their start boxes)
        ++bullet_sweeps;
        for (const uint32_t slot : awake_) {
          const uint32_t other = slots_.dense_of_slot(slot);
          if (bodies_.info[other].bullet || !overlaps(bodies_.pose[other].aabb, swept)) continue;
          sweep_against(other);
        }
      }
      if (first < 1.0f) {
        Transform back = pose_at(f, first);
        back.position += slide;
        pose.position = back.position;
        pose.orientation = back.rotation;
        pose.aabb = fat_aabb(shape, back, margin);
        ++profile_.continuous_hits;
      }
    }
  }
  profile_.fast_bodies = static_cast<uint32_t>(fast.size());
}

}  // namespace impulse::physics
