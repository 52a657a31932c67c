// World's stage 6b: continuous collision. A dynamic body that moved more than half its inner extent
// in this step ("fast", Box2D v3's test in b2FinalizeBodiesTask) is swept from its start position
// to its end position, at its end orientation (a linear cast, as Jolt's EMotionQuality::LinearCast),
// against the static bodies its swept box overlaps; a bullet (BodyDesc::bullet) is swept also
// against the non-bullet dynamic and kinematic bodies, at their end poses (Box2D v3's bullets,
// solved after the other bodies are final). If the body ends this step penetrating a shape it met
// on the way (deeper than linear_slop along the axis of first contact, which includes having
// passed right through it), it is moved back to the time of impact with a gap of about
// linear_slop, keeping its velocity: the next step's speculative contact stops it at the surface.
// A body that ends at or outside the surface (the solver already stopped it) is left alone, so
// the stage changes nothing unless a body would tunnel or sink.
//
// Time of impact by conservative advancement along a separating axis (Mirtich, "Impulse-based
// Dynamic Simulation of Rigid Body Systems", 1996, ch. 4; Catto, "Continuous Collision", GDC 2013):
// at each iterate the separation d along the best of a few candidate axes n is a lower bound of
// the distance, and under pure translation it falls at exactly dot(delta, n) per unit time, so
// advancing by (d - target) / dot(delta, n) can never step past the first contact. A body already
// touching a shape at the start of the step sweeps its core instead, a sphere of a quarter of its
// inner extent (Box2D v3's fallback in b2ContinuousQueryCallback), so sliding fast along a floor
// is not stopped but a centre that would cross a wall is.
//
// Deterministic: bodies in awake-list order, candidates in ascending slot order, on the calling
// thread after every batch of the solve; non-bullets meet only static bodies and bullets only
// final non-bullet poses, so the order among fast bodies does not matter. No allocation: the
// fast list and the query output are reused scratch buffers.
#include <algorithm>
#include <cmath>
#include <vector>

#include "server/physics/narrowphase.h"
#include "server/physics/world.h"
#include "server/physics/world_internal.h"

namespace impulse::physics {

using detail::fat_aabb;

namespace {

constexpr int kMaxSweepIterations = 20;  // conservative advancement converges in a few
// Bullets swept against the awake bodies per step, at most; later fast bullets (in awake-list
// order) meet only static and parked bodies, as ordinary fast bodies do. A bullet scans the whole
// awake list, so without a bound one client's 1000 fast bullets in a 20000-body world would cost
// 2e7 box tests a step; 64 bound it near 1.3e6 (a few ms at worst) whatever the clients send.
constexpr uint32_t kMaxBulletSweepsPerStep = 64;
constexpr float kCoreFraction = 0.25f;   // of the inner extent: the core swept when touching at t = 0

// The largest dot(x, n) over the shape placed at `t` (n unit, world frame). Planes never reach
// here (they are skipped: a half-space cannot be passed through).
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

// The first time in [0, 1] at which shape `a` (orientation q, centre start + t * delta) comes within
// `target` (+ tolerance) of shape b at tb; no hit if it never does within the step.
Impact time_of_impact(const Shape& a, Quat q, Vec3 start, Vec3 delta, const Shape& b, const Transform& tb,
                      float target, float tolerance, float reach) {
  float t = 0.0f;
  for (int k = 0; k < kMaxSweepIterations; ++k) {
    const Gap g = gap(a, Transform{start + delta * t, q}, b, tb, reach);
    if (g.distance <= target + tolerance) return Impact{true, t, g.normal};
    const float closing = dot(delta, g.normal);
    if (!(closing > 0.0f)) return Impact{};  // moving apart along a separating axis: never meets
    t += (g.distance - target) / closing;
    if (!(t < 1.0f)) return Impact{};
  }
  // Not converged (a grazing pass): stop where the advancement got to, which is still apart.
  return Impact{true, t, gap(a, Transform{start + delta * t, q}, b, tb, reach).normal};
}

}  // namespace

void World::sweep_fast_bodies() {
  const std::vector<FastBody>& fast = scratch_.fast_bodies;
  if (fast.empty()) return;
  const float margin = settings_.speculative_margin;
  const float target = settings_.linear_slop;  // the gap left at the time of impact (Box2D's target)
  const float tolerance = 0.25f * target;
  std::vector<uint32_t>& candidates = scratch_.sweep_candidates;

  // Non-bullets first (against static bodies), then bullets against everything final.
  uint32_t bullet_sweeps = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const bool bullets = pass == 1;
    for (const FastBody& f : fast) {
      const BodyInfo& info = bodies_.info[f.dense];
      if (info.sensor || info.bullet != bullets) continue;
      const Shape& shape = bodies_.shape[f.dense];
      Pose& pose = bodies_.pose[f.dense];
      const Quat q = pose.orientation;
      const Vec3 end = pose.position;
      const float reach = length(f.delta) + info.extent + margin;
      const Vec3 pad{info.extent + margin, info.extent + margin, info.extent + margin};
      const Aabb swept{min(f.start, end) - pad, max(f.start, end) + pad};
      const Shape core = make_sphere(kCoreFraction * detail::inner_extent(shape));
      float first = 1.0f;

      auto sweep_against = [&](uint32_t other) {
        const BodyInfo& oi = bodies_.info[other];
        if (other == f.dense || oi.sensor || !should_collide(info.filter, oi.filter)) return;
        const Shape& os = bodies_.shape[other];
        if (os.kind == ShapeKind::Plane) return;  // a half-space cannot be passed through
        const Transform to{bodies_.pose[other].position, bodies_.pose[other].orientation};
        const Shape* swept_shape = &shape;
        Impact hit = time_of_impact(shape, q, f.start, f.delta, os, to, target, tolerance, reach);
        if (hit.hit && hit.t == 0.0f) {  // touching at the start: sweep the core instead
          swept_shape = &core;
          hit = time_of_impact(core, q, f.start, f.delta, os, to, target, tolerance, reach);
          if (hit.hit && hit.t == 0.0f) return;  // the centre starts inside: the solver's case
        }
        if (!hit.hit || !(hit.t < first)) return;
        // Act only if the body ends the step sunk into (or through) the shape along that axis.
        if (separation_along(*swept_shape, Transform{end, q}, os, to, hit.normal) < -target) first = hit.t;
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
        pose.position = f.start + f.delta * first;
        pose.aabb = fat_aabb(shape, Transform{pose.position, q}, margin);
        ++profile_.continuous_hits;
      }
    }
  }
  profile_.fast_bodies = static_cast<uint32_t>(fast.size());
}

}  // namespace impulse::physics
