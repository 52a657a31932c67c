// Chained restitution pass (Edyn's restitution solver, xissburg/edyn; Catto, "Iterative Dynamics
// with Temporal Coherence", GDC 2005). See restitution.h for the scheme.
#include "server/physics/restitution.h"

#include <algorithm>
#include <cmath>

namespace impulse::physics {

namespace {

// Relative tolerance of the energy check: a block may not raise the kinetic energy by more than
// this fraction of sum(lambda |vn|) (an e = 1 block conserves energy up to float rounding).
constexpr float kEnergyTolerance = 1.0e-4f;

// A visit of a manifold in the impact pass is kept only if it changes some point's normal
// velocity by more than this [m/s] (a thousandth of the restitution threshold's default).
constexpr float kImpactTolerance = 1.0e-3f;

// Normal velocity of b relative to a at point p [m/s]; < 0 approaching.
float normal_velocity(const SolverBody& a, const SolverBody& b, const SolverPoint& p, Vec3 n) {
  const Vec3 vb = b.velocity + cross(b.angular_velocity, p.anchor_b);
  const Vec3 va = a.velocity + cross(a.angular_velocity, p.anchor_a);
  return dot(vb - va, n);
}

// Applies lambda n at p to b and -lambda n to a [N·s]. The immovable body has zero inverse mass
// and inertia, so it stays at zero.
void apply_normal_impulse(SolverBody& a, SolverBody& b, const SolverPoint& p, Vec3 n, float lambda) {
  const Vec3 impulse = n * lambda;
  a.velocity -= impulse * a.inv_mass;
  a.angular_velocity -= a.inv_inertia * cross(p.anchor_a, impulse);
  b.velocity += impulse * b.inv_mass;
  b.angular_velocity += b.inv_inertia * cross(p.anchor_b, impulse);
}

// Projected Gauss-Seidel on the block's points towards vn >= target, accumulated impulses from 0
// and clamped >= 0. Points with active[i] false or zero effective mass are left alone. Returns
// whether any increment was applied: an impulse that grows and shrinks back within the iterations
// ends where it started but has moved the velocities by rounding, and a sweep counted as "no
// change" must leave them bit-identical (propagate_restitution's batching invariance).
bool solve_block(const SolverManifold& m, SolverBody& a, SolverBody& b, const bool* active, const float* target,
                 float* lambda) {
  bool applied = false;
  const int iterations = m.point_count == 1 ? 1 : kRestitutionBlockIterations;
  for (int it = 0; it < iterations; ++it) {
    for (int i = 0; i < m.point_count; ++i) {
      const SolverPoint& p = m.points[i];
      if (!active[i] || p.normal_mass <= 0) continue;
      const float vn = normal_velocity(a, b, p, m.normal);
      const float total = std::max(lambda[i] + p.normal_mass * (target[i] - vn), 0.0f);
      if (total == lambda[i]) continue;
      apply_normal_impulse(a, b, p, m.normal, total - lambda[i]);
      lambda[i] = total;
      applied = true;
    }
  }
  return applied;
}

// Resolves manifold m as one collision event if one of its engaging points approaches faster than
// `threshold`; an inelastic manifold (e = 0) that already pushed in this pass is revisited as
// well, so its impulse can shrink again (see propagate_restitution). Returns whether it applied
// an impulse increment (a sweep that returns false everywhere left every body bit-identical, so
// ending the sweeps there gives the same result for any batching of the manifolds).
bool resolve_manifold(SolverManifold& m, SolverBody& a, SolverBody& b, float threshold, float dt, Vec3 gravity,
                      float& largest_change) {
  largest_change = 0;
  const Vec3 n = m.normal;
  // Relative normal acceleration from gravity, which the soft step integrates after this pass:
  // only dynamic bodies fall (static and kinematic bodies have zero inverse mass).
  const float fall = dot(n, (b.inv_mass > 0 ? gravity : Vec3{}) - (a.inv_mass > 0 ? gravity : Vec3{}));
  const float shift = dot(b.delta_position - a.delta_position, n);  // time-of-impact shifts so far
  bool active[kMaxManifoldPoints] = {};
  float target[kMaxManifoldPoints] = {};
  float before[kMaxManifoldPoints] = {};
  float toi[kMaxManifoldPoints] = {};
  float lambda[kMaxManifoldPoints] = {};
  bool triggered = false;
  for (int i = 0; i < m.point_count; ++i) {
    const SolverPoint& p = m.points[i];
    const float vn = normal_velocity(a, b, p, n);
    const float separation = p.base_separation + shift;  // base_separation: at step start (solver.h)
    before[i] = vn;
    // Closes within the step (always, if touching and vn <= 0), at its velocity or with the fall
    // the step adds: s + vn dt + fall dt^2 / 2 <= 0. Without the fall, a body that reaches the
    // surface late in the step only by falling is stopped dead by the speculative contact and
    // bounced at the end of the step with its start speed, losing up to e g dt of rebound.
    active[i] = separation <= -vn * dt || separation <= -(vn + 0.5f * fall * dt) * dt;
    if (!active[i]) continue;
    // Time of impact t: the first root of s + vn t + fall t^2 / 2 = 0 if the gap is still open
    // (in this step: engaging implies t <= dt), s / -vn before the step if the bodies already
    // overlap (the step before let them pass the surface). Bounded by one step either way, so a
    // deep overlap is not teleported out. The root as 2 s / (-vn + sqrt(vn^2 - 2 fall s)), which
    // has no cancellation for vn < 0.
    float impact_speed = vn;
    if (separation > 0) {
      const float discriminant = vn * vn - 2.0f * fall * separation;
      const float denominator = discriminant >= 0 ? -vn + std::sqrt(discriminant) : 0.0f;
      if (denominator > 0) {
        toi[i] = std::min(2.0f * separation / denominator, dt);
        impact_speed = vn + fall * toi[i];
      }
    } else if (vn < 0) {
      toi[i] = std::max(separation / -vn, -dt);
    }
    if (impact_speed < -threshold) {
      triggered = true;
      // Newton's law at the impact, where gravity has changed the approach speed to vn + fall t;
      // less the fall the soft step will add over [0, t] again, so that at the end of the step
      // the velocity is -e (vn + fall t) + fall (dt - t), as if the bounce happened at t. Found
      // overlapping (t < 0: the bodies touched before the step began), the same formula gives
      // the velocity at step start of a bounce at t: a ball that passed 3 cm into the ground at
      // 5.6 m/s (e = 0.9) bounced 4% too high in energy when the impact was taken at step start.
      if (m.restitution > 0) target[i] = -m.restitution * (vn + fall * toi[i]) - fall * toi[i];
    }
  }
  // An inelastic manifold accumulates its impulses over the pass (kept in max_normal_impulse until
  // the pass ends): projected Gauss-Seidel with clamped accumulated impulses (Catto, GDC 2005), so
  // a push answering a transient approach is taken back once a later contact removed the cause.
  const bool inelastic = m.restitution == 0;
  bool carried = false;
  if (inelastic) {
    for (int i = 0; i < m.point_count; ++i) {
      lambda[i] = m.points[i].max_normal_impulse;
      if (lambda[i] > 0) active[i] = carried = true;
    }
  }
  if (!triggered && !carried) return false;
  float start[kMaxManifoldPoints];
  std::copy(lambda, lambda + kMaxManifoldPoints, start);
  // Changed only if an increment was applied: a triggered block already at its target leaves
  // every input of its next visit as it was (the skip in propagate_restitution relies on it).
  bool changed = solve_block(m, a, b, active, target, lambda);

  // Kinetic energy change of the block: sum lambda_i (vn_i + vn_i') / 2 (exact for impulses along
  // the constraint rows). Newton's law per point can create energy in a multi-point block.
  float gain = 0;
  float scale = 0;
  for (int i = 0; i < m.point_count; ++i) {
    if (lambda[i] == 0) continue;
    gain += lambda[i] * (before[i] + normal_velocity(a, b, m.points[i], n));
    scale += lambda[i] * std::max(-before[i], 0.0f);
  }
  // Inelastic blocks skip the check: each projection towards vn >= 0 only removes energy.
  if (!inelastic && gain > kEnergyTolerance * scale) {
    for (int i = 0; i < m.point_count; ++i) {
      if (lambda[i] != 0) apply_normal_impulse(a, b, m.points[i], n, -lambda[i]);
      lambda[i] = 0;
      target[i] = 0;
    }
    changed = true;
    solve_block(m, a, b, active, target, lambda);  // inelastic: each update only removes energy
  }

  // Shift each impact to its time t: the bodies moved with their old velocities until t, so the
  // step's integration of the new velocities over the whole step overshoots by dv t (t < 0: the
  // overlap found at step start is undone as if the bodies had bounced when they touched).
  for (int i = 0; i < m.point_count; ++i) {
    const float change = lambda[i] - start[i];
    if (change == 0 || toi[i] == 0) continue;
    const Vec3 shift_impulse = n * (change * toi[i]);
    a.delta_position += shift_impulse * a.inv_mass;
    b.delta_position -= shift_impulse * b.inv_mass;
  }
  // This impact is resolved: the end-of-step restitution (solver.cpp) must only see the normal
  // velocities from here on, or it would bounce the same approach a second time.
  for (int i = 0; i < m.point_count; ++i) {
    SolverPoint& p = m.points[i];
    p.relative_velocity = normal_velocity(a, b, p, n);
    if (inelastic) p.max_normal_impulse = lambda[i];
    if (p.normal_mass > 0) largest_change = std::max(largest_change, std::fabs(lambda[i] - start[i]) / p.normal_mass);
  }
  return changed;
}

}  // namespace

int propagate_restitution(std::span<SolverManifold> manifolds, std::span<SolverBody> bodies, float threshold,
                          float dt, Vec3 gravity, int max_sweeps, std::span<uint32_t> changed_at,
                          std::span<uint8_t> commits) {
  const size_t count = manifolds.size();
  const bool skip = changed_at.size() >= bodies.size();
  if (skip) std::fill(changed_at.begin(), changed_at.begin() + static_cast<std::ptrdiff_t>(bodies.size()), 0u);
  const bool capped = commits.size() >= count;
  if (capped) std::fill(commits.begin(), commits.begin() + static_cast<std::ptrdiff_t>(count), uint8_t{0});
  int resolved_total = 0;
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    // Alternate the direction, so a chain stored against the direction of the strike still
    // propagates within two sweeps.
    const bool forward = sweep % 2 == 0;
    int resolved = 0;
    for (size_t k = 0; k < count; ++k) {
      const size_t mi = forward ? k : count - 1 - k;
      SolverManifold& m = manifolds[mi];
      if (capped && commits[mi] >= kRestitutionCommits) continue;  // its share of the pass is spent
      // Skipped: neither body changed in the sweep before or so far in this one (changed_at).
      if (skip && sweep > 0 && changed_at[m.body_a] < static_cast<uint32_t>(sweep) &&
          changed_at[m.body_b] < static_cast<uint32_t>(sweep)) {
        continue;
      }
      // e = 0 too: an impact is resolved as one block here, not point by point in the soft solve.
      // Resolved on copies and kept only if some point's velocity changes by more than
      // kImpactTolerance: Gauss-Seidel on a pile that keeps colliding creeps towards its answer
      // for ever, and without the cut-off every such step would run all the sweeps. A discarded
      // visit leaves everything as it was, so the skip above stays exact.
      SolverBody a = bodies[m.body_a];
      SolverBody b = bodies[m.body_b];
      float saved_relative[kMaxManifoldPoints];
      float saved_max[kMaxManifoldPoints];
      for (int i = 0; i < m.point_count; ++i) {
        saved_relative[i] = m.points[i].relative_velocity;
        saved_max[i] = m.points[i].max_normal_impulse;
      }
      float largest_change = 0;
      const bool applied = resolve_manifold(m, a, b, threshold, dt, gravity, largest_change);
      if (applied && !(largest_change > kImpactTolerance)) {
        for (int i = 0; i < m.point_count; ++i) {
          m.points[i].relative_velocity = saved_relative[i];
          m.points[i].max_normal_impulse = saved_max[i];
        }
      }
      if (applied && largest_change > kImpactTolerance) {
        bodies[m.body_a] = a;
        bodies[m.body_b] = b;
        if (capped) ++commits[mi];
        ++resolved;
        // Only bodies an impulse can move (the immovable and kinematic bodies never change).
        if (skip && bodies[m.body_a].inv_mass > 0) changed_at[m.body_a] = static_cast<uint32_t>(sweep) + 1;
        if (skip && bodies[m.body_b].inv_mass > 0) changed_at[m.body_b] = static_cast<uint32_t>(sweep) + 1;
      }
    }
    resolved_total += resolved;
    if (resolved == 0) break;
  }
  // max_normal_impulse held the inelastic manifolds' accumulated impulses; the soft step starts it
  // from 0 (it marks the points that pushed during the solve, for the end-of-step restitution).
  if (resolved_total > 0) {
    for (SolverManifold& m : manifolds) {
      for (int i = 0; i < m.point_count; ++i) m.points[i].max_normal_impulse = 0;
    }
  }
  return resolved_total;
}

}  // namespace impulse::physics
