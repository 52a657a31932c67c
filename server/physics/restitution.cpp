// Chained restitution pass (Edyn's restitution solver, xissburg/edyn; Catto, "Iterative Dynamics
// with Temporal Coherence", GDC 2005). See restitution.h for the scheme.
#include "server/physics/restitution.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace impulse::physics {

namespace {

// Relative tolerance of the energy check: a block may not raise the kinetic energy by more than
// this fraction of sum(lambda |vn|) (an e = 1 block conserves energy up to float rounding).
constexpr float kEnergyTolerance = 1.0e-4f;

// A visit of a manifold in the impact pass is kept only if it changes some point's normal
// velocity by more than this [m/s] (a thousandth of the restitution threshold's default).
constexpr float kImpactTolerance = 1.0e-3f;

// A shock sweep resolves a support whose approach exceeds this fraction of the restitution
// threshold: the momentum a landing hands down is passed on even where it is slower than the
// threshold (or the stack would sink as a whole, shuffling it between unsupported bodies for every
// sweep), while a resting contact's leftover approach (millimetres per second) stays with the soft
// step. Measured on Jolt's pyramid: 0 gives a worst slide of 2.4 cm, 0.25 1.2 cm, 0.5 2.1 cm.
constexpr float kShockThreshold = 0.25f;

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

// Solves the n x n system k x = rhs in place (rhs becomes x) by Gaussian elimination with
// partial pivoting, in double. k is a block of a contact's effective-mass matrix, symmetric and
// positive semi-definite; it is regularised by 1e-10 of its trace so that the four coplanar points
// of a face, whose matrix has rank 3 (one normal force and two torques), give the least-norm
// impulses (equal ones for a symmetric landing) instead of dividing by zero.
void solve_small(double k[kMaxManifoldPoints][kMaxManifoldPoints], double* rhs, int n) {
  double trace = 0;
  for (int i = 0; i < n; ++i) trace += k[i][i];
  for (int i = 0; i < n; ++i) k[i][i] += 1.0e-10 * trace;
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::fabs(k[r][col]) > std::fabs(k[pivot][col])) pivot = r;
    }
    if (pivot != col) {
      for (int c = 0; c < n; ++c) std::swap(k[col][c], k[pivot][c]);
      std::swap(rhs[col], rhs[pivot]);
    }
    for (int r = col + 1; r < n; ++r) {
      const double f = k[r][col] / k[col][col];
      for (int c = col; c < n; ++c) k[r][c] -= f * k[col][c];
      rhs[r] -= f * rhs[col];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    double sum = rhs[r];
    for (int c = r + 1; c < n; ++c) sum -= k[r][c] * rhs[c];
    rhs[r] = sum / k[r][r];
  }
}

// The block's linear complementarity problem solved exactly, by enumerating which points push
// (Catto's two-point block solver in Box2D v2.x, b2ContactSolver::SolveVelocityConstraints,
// extended to four points: at most 16 sets, largest first, so a face landing is one solve).
// Find total impulses lambda >= 0 with vn_i' >= target_i and lambda_i (vn_i' - target_i) = 0 for
// each active point, where vn' = vn + K (lambda - lambda_start) and K is the pair's effective-mass
// matrix at the points, from the prepared rows (SolverPoint::rn_a, in_a, ...: only bouncing blocks
// come here, never a shock sweep's held body). Points with zero effective mass are left alone.
// Applies the increments and returns 1 if it applied one, 0 if none was needed, -1 if no set
// passed (rounding; the caller iterates instead).
//
// Why not Gauss-Seidel: along a long body the points' rows are nearly parallel (a 2 m rod
// end-on: off-diagonal terms within 1.5 % of the diagonal), so four point-by-point iterations
// leave most of the impulse on the first point, which spins the rod, and the energy check then
// makes an e = 1 bounce inelastic (the rod left at -0.13 m/s instead of -10).
int solve_block_exact(const SolverManifold& m, SolverBody& a, SolverBody& b, const bool* active,
                      const float* target, float* lambda) {
  const Vec3 n = m.normal;
  int index[kMaxManifoldPoints];
  int count = 0;
  for (int i = 0; i < m.point_count; ++i) {
    if (active[i] && m.points[i].normal_mass > 0) index[count++] = i;
  }
  if (count == 0) return 0;
  const double linear = static_cast<double>(a.inv_mass) + static_cast<double>(b.inv_mass);
  double k[kMaxManifoldPoints][kMaxManifoldPoints];
  double gap[kMaxManifoldPoints];     // target - vn now
  double start[kMaxManifoldPoints];   // lambda now
  double scale = 1.0e-3;
  for (int r = 0; r < count; ++r) {
    const SolverPoint& pr = m.points[index[r]];
    for (int c = 0; c < count; ++c) {
      const SolverPoint& pc = m.points[index[c]];
      k[r][c] = linear + static_cast<double>(dot(pr.rn_a, pc.in_a)) + static_cast<double>(dot(pr.rn_b, pc.in_b));
    }
    const int i = index[r];
    gap[r] = static_cast<double>(target[i]) - static_cast<double>(normal_velocity(a, b, m.points[i], n));
    start[r] = lambda[i];
    scale = std::max(scale, std::fabs(gap[r]));
  }
  const double velocity_tolerance = 1.0e-5 * scale;
  const int sets = 1 << count;
  // Sets by size, largest first, then by mask: a deterministic order.
  for (int size = count; size >= 0; --size) {
    for (int mask = sets - 1; mask >= 0; --mask) {
      if (std::popcount(static_cast<unsigned>(mask)) != size) continue;
      // Points outside the set end with lambda 0 (increment -start); those in it reach the target.
      double increment[kMaxManifoldPoints];
      double sub[kMaxManifoldPoints][kMaxManifoldPoints];
      double rhs[kMaxManifoldPoints];
      int members[kMaxManifoldPoints];
      int s = 0;
      for (int r = 0; r < count; ++r) {
        increment[r] = -start[r];
        if (mask & (1 << r)) members[s++] = r;
      }
      for (int x = 0; x < s; ++x) {
        const int r = members[x];
        rhs[x] = gap[r];
        for (int c = 0; c < count; ++c) {
          if (!(mask & (1 << c))) rhs[x] += k[r][c] * start[c];
        }
        for (int y = 0; y < s; ++y) sub[x][y] = k[r][members[y]];
      }
      if (s > 0) solve_small(sub, rhs, s);
      double total_scale = 0;
      for (int x = 0; x < s; ++x) {
        increment[members[x]] = rhs[x];
        total_scale += std::fabs(start[members[x]] + rhs[x]);
      }
      bool valid = true;
      for (int x = 0; x < s && valid; ++x) valid = start[members[x]] + rhs[x] >= -1.0e-7 * total_scale;
      for (int r = 0; r < count && valid; ++r) {
        if (mask & (1 << r)) continue;
        double change = 0;
        for (int c = 0; c < count; ++c) change += k[r][c] * increment[c];
        valid = change - gap[r] >= -velocity_tolerance;
      }
      if (!valid) continue;
      bool applied = false;
      for (int r = 0; r < count; ++r) {
        const int i = index[r];
        const float total = std::max(static_cast<float>(start[r] + increment[r]), 0.0f);
        if (total == lambda[i]) continue;
        apply_normal_impulse(a, b, m.points[i], n, total - lambda[i]);
        lambda[i] = total;
        applied = true;
      }
      return applied ? 1 : 0;
    }
  }
  return -1;
}

// Projected Gauss-Seidel on the block's points towards vn >= target, accumulated impulses from 0
// and clamped >= 0. Points with active[i] false or zero effective mass are left alone. Returns
// whether any increment was applied: an impulse that grows and shrinks back within the iterations
// ends where it started but has moved the velocities by rounding, and a sweep counted as "no
// change" must leave them bit-identical (propagate_restitution's batching invariance).
// `mass`: each point's update mass [kg] (nullptr: SolverPoint::normal_mass). Multi-point blocks of
// a bouncing manifold (e > 0) are solved exactly (solve_block_exact); the iterations are its fallback.
bool solve_block(const SolverManifold& m, SolverBody& a, SolverBody& b, const bool* active, const float* target,
                 float* lambda, const float* mass = nullptr) {
  // Inelastic blocks keep the iterations: their impulses accumulate over the pass's visits, and
  // the exact solve's jumps between equivalent impulse sets (a face's matrix is singular) move the
  // time-of-impact shifts along a chain: a box driven into a row of 100 passed the first one.
  if (m.point_count > 1 && m.restitution > 0) {
    const int exact = solve_block_exact(m, a, b, active, target, lambda);
    if (exact >= 0) return exact == 1;
  }
  bool applied = false;
  const int iterations = m.point_count == 1 ? 1 : kRestitutionBlockIterations;
  for (int it = 0; it < iterations; ++it) {
    for (int i = 0; i < m.point_count; ++i) {
      const SolverPoint& p = m.points[i];
      const float point_mass = mass != nullptr ? mass[i] : p.normal_mass;
      if (!active[i] || point_mass <= 0) continue;
      const float vn = normal_velocity(a, b, p, m.normal);
      const float total = std::max(lambda[i] + point_mass * (target[i] - vn), 0.0f);
      if (total == lambda[i]) continue;
      apply_normal_impulse(a, b, p, m.normal, total - lambda[i]);
      lambda[i] = total;
      applied = true;
    }
  }
  return applied;
}

// The first shock sweep of a pass (see ImpactScratch).
constexpr int kFirstShock = 2;

// Equal bodies differ in rounding (a box's inertia turned by its settling): a lower body counts as
// the lighter only beyond this ratio of the two bodies' inverse effective masses at a point.
constexpr float kLighterLower = 1.01f;

// solve_block for the shock sweep: the upper body alone against a lower body held still (its
// inverse mass and inertia zeroed for the iterations), then the lower body takes the reaction of
// the impulses applied. Falls back to solve_block where the lower body is the lighter at some
// active point (beyond rounding: kLighterLower): it would then leave faster than the pair
// approached (energy from nothing). A lower body at least as heavy leaves at most at the approach
// speed (an elastic exchange), which the full sweeps after it share out again if nothing holds it.
bool solve_block_on_support(const SolverManifold& m, SolverBody& a, SolverBody& b, const bool* active,
                            const float* target, float* lambda, Support support) {
  SolverBody& lower = support == Support::A ? a : b;
  float mass[kMaxManifoldPoints] = {};
  for (int i = 0; i < m.point_count; ++i) {
    const SolverPoint& p = m.points[i];
    const float ka = a.inv_mass + dot(p.rn_a, p.in_a);
    const float kb = b.inv_mass + dot(p.rn_b, p.in_b);
    const float k_upper = support == Support::A ? kb : ka;
    const float k_lower = support == Support::A ? ka : kb;
    if (!active[i]) continue;
    if (!(k_upper > 0) || k_lower > kLighterLower * k_upper) return solve_block(m, a, b, active, target, lambda);
    mass[i] = 1.0f / k_upper;
  }
  float start[kMaxManifoldPoints];
  std::copy(lambda, lambda + kMaxManifoldPoints, start);
  const float inv_mass = lower.inv_mass;
  const Mat3 inv_inertia = lower.inv_inertia;
  lower.inv_mass = 0;
  lower.inv_inertia = Mat3{Vec3{}, Vec3{}, Vec3{}};
  const bool applied = solve_block(m, a, b, active, target, lambda, mass);  // moves the upper body only
  lower.inv_mass = inv_mass;
  lower.inv_inertia = inv_inertia;
  SolverBody held;  // stands in for the upper body, which already has its share: zero inverse mass
  for (int i = 0; i < m.point_count; ++i) {
    const float change = lambda[i] - start[i];
    if (change == 0) continue;
    if (support == Support::A) apply_normal_impulse(a, held, m.points[i], m.normal, change);
    if (support == Support::B) apply_normal_impulse(held, b, m.points[i], m.normal, change);
  }
  return applied;
}

// Resolves manifold m as one collision event if one of its engaging points approaches faster than
// `threshold`; an inelastic manifold (e = 0) that already pushed in this pass is revisited as
// well, so its impulse can shrink again (see propagate_restitution). Returns whether it applied
// an impulse increment (a sweep that returns false everywhere left every body bit-identical, so
// ending the sweeps there gives the same result for any batching of the manifolds). `support`:
// in a shock sweep, the side held still while the block is solved (solve_block_on_support).
bool resolve_manifold(SolverManifold& m, SolverBody& a, SolverBody& b, Vec3 accel_a, Vec3 accel_b, float threshold,
                      float dt, Support support, float& largest_change) {
  largest_change = 0;
  const Vec3 n = m.normal;
  // Relative normal acceleration that the soft step integrates after this pass: gravity and the
  // applied forces of each dynamic body (static, kinematic and sleeping bodies have none).
  const float fall = dot(n, accel_b - accel_a);
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
    // base_separation: at step start (solver.h); then the shifts of earlier impacts this pass.
    const float separation = p.base_separation + shift + dot(b.delta_angle, p.rn_b) - dot(a.delta_angle, p.rn_a);
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
  bool changed = inelastic && support != Support::None
                     ? solve_block_on_support(m, a, b, active, target, lambda, support)
                     : solve_block(m, a, b, active, target, lambda);

  // Kinetic energy change of the block at the impact: sum lambda_i (u_i + u_i') / 2 (exact for
  // impulses along the constraint rows), with u = vn + fall t_i the normal velocity at the point's
  // time of impact, before and after. Newton's law per point can create energy in a multi-point
  // block. Judged at step start instead (u = vn), an e = 1 bounce at t > 0 always looked like a
  // gain of lambda * 2 |fall| t and was made inelastic: a ball dropped under gravity stopped dead
  // unless it struck within about 5e-5 s of a step's start (199 of 200 drop heights).
  float gain = 0;
  float scale = 0;
  for (int i = 0; i < m.point_count; ++i) {
    if (lambda[i] == 0) continue;
    const float at_impact = fall * toi[i];
    const float u_before = before[i] + at_impact;
    gain += lambda[i] * (u_before + normal_velocity(a, b, m.points[i], n) + at_impact);
    scale += lambda[i] * std::max(-u_before, 0.0f);
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
  // overlap found at step start is undone as if the bodies had bounced when they touched). A
  // bounce turns the bodies back by dw t as well: without it, a box landing on a corner with e = 1
  // was spun over the whole step, drove its next corner into the floor, and the substeps' answer
  // added 1.2 % to its energy (Bounce.TiltedBoxLandingsGainNoEnergy).
  bool turned = false;
  for (int i = 0; i < m.point_count; ++i) {
    const float change = lambda[i] - start[i];
    if (change == 0 || toi[i] == 0) continue;
    const Vec3 shift_impulse = n * (change * toi[i]);
    a.delta_position += shift_impulse * a.inv_mass;
    b.delta_position -= shift_impulse * b.inv_mass;
    if (!inelastic) {  // and turned back by dw t (an inelastic block keeps the old shift: see restitution.h)
      a.delta_angle += a.inv_inertia * cross(m.points[i].anchor_a, shift_impulse);
      b.delta_angle -= b.inv_inertia * cross(m.points[i].anchor_b, shift_impulse);
      turned = true;
    }
  }
  if (turned) {
    for (SolverBody* body : {&a, &b}) {
      const float angle = length(body->delta_angle);
      body->delta_rotation = angle > 0 ? quat_from_axis_angle(body->delta_angle * (1.0f / angle), angle) : Quat{};
    }
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

// Visits manifold m in the sweep `sweep` of propagate_restitution; returns whether it changed the
// bodies. Resolved on copies and kept only if some point's velocity changes by more than
// kImpactTolerance: Gauss-Seidel on a pile that keeps colliding creeps towards its answer for ever,
// and without the cut-off every such step would run all the sweeps. A discarded visit leaves
// everything as it was, so the skip in propagate_restitution stays exact.
bool visit(SolverManifold& m, std::span<SolverBody> bodies, std::span<const Vec3> acceleration, float threshold,
           float dt, Support support, int sweep, ImpactScratch* scratch) {
  SolverBody a = bodies[m.body_a];
  SolverBody b = bodies[m.body_b];
  float saved_relative[kMaxManifoldPoints];
  float saved_max[kMaxManifoldPoints];
  for (int i = 0; i < m.point_count; ++i) {
    saved_relative[i] = m.points[i].relative_velocity;
    saved_max[i] = m.points[i].max_normal_impulse;
  }
  float largest_change = 0;
  if (!resolve_manifold(m, a, b, acceleration[m.body_a], acceleration[m.body_b], threshold, dt, support,
                        largest_change)) {
    return false;
  }
  if (!(largest_change > kImpactTolerance)) {
    for (int i = 0; i < m.point_count; ++i) {
      m.points[i].relative_velocity = saved_relative[i];
      m.points[i].max_normal_impulse = saved_max[i];
    }
    return false;
  }
  bodies[m.body_a] = a;
  bodies[m.body_b] = b;
  // Only bodies an impulse can move (the immovable and kinematic bodies never change).
  if (scratch != nullptr) {
    if (a.inv_mass > 0) scratch->changed_at[m.body_a] = static_cast<uint32_t>(sweep) + 1;
    if (b.inv_mass > 0) scratch->changed_at[m.body_b] = static_cast<uint32_t>(sweep) + 1;
  }
  return true;
}

// Root of body i's component (path halving; roots are each component's lowest body).
uint32_t find_root(std::span<uint32_t> parent, uint32_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// Splits the manifolds into the connected components of their movable bodies (bodies an impulse
// moves: inv_mass > 0) and gives each component kRestitutionVisitsPerManifold visits per manifold.
// Afterwards component[body] is the body's root and budget[root] the visits its component has left.
void split_into_components(std::span<const SolverManifold> manifolds, std::span<const SolverBody> bodies,
                           std::span<uint32_t> component, std::span<uint32_t> budget) {
  const auto count = static_cast<uint32_t>(bodies.size());
  for (uint32_t i = 0; i < count; ++i) component[i] = i;
  std::fill(budget.begin(), budget.begin() + count, 0u);
  auto movable = [&](uint32_t body) { return bodies[body].inv_mass > 0; };
  for (const SolverManifold& m : manifolds) {
    if (!movable(m.body_a) || !movable(m.body_b)) continue;
    const uint32_t ra = find_root(component, m.body_a);
    const uint32_t rb = find_root(component, m.body_b);
    if (ra < rb) component[rb] = ra;
    if (rb < ra) component[ra] = rb;
  }
  for (uint32_t i = 0; i < count; ++i) component[i] = component[component[i]];  // roots are lower
  for (const SolverManifold& m : manifolds) {
    uint32_t& left = budget[component[movable(m.body_a) ? m.body_a : m.body_b]];
    left += std::min<uint32_t>(kRestitutionVisitsPerManifold, UINT32_MAX - left);
  }
}

// The inelastic manifolds that hold a movable body up against gravity (normal within 45 degrees of
// up), highest upper body first (ties: span order), with the side that supports.
void order_supports(std::span<const SolverManifold> manifolds, std::span<const SolverBody> bodies, Vec3 up,
                    ImpactScratch& scratch) {
  constexpr float kCos45 = 0.70710678f;
  scratch.supports.clear();
  for (size_t k = 0; k < manifolds.size(); ++k) {
    const SolverManifold& m = manifolds[k];
    if (m.restitution != 0) continue;
    const float c = dot(m.normal, up);  // the normal points from a to b
    const uint32_t upper = c >= kCos45 ? m.body_b : c <= -kCos45 ? m.body_a : UINT32_MAX;
    if (upper == UINT32_MAX || bodies[upper].inv_mass <= 0) continue;
    scratch.supports.push_back({dot(scratch.centers[upper], up), static_cast<uint32_t>(k),
                                upper == m.body_b ? Support::A : Support::B});
  }
  std::sort(scratch.supports.begin(), scratch.supports.end(), [](const SupportEntry& x, const SupportEntry& y) {
    return x.height != y.height ? x.height > y.height : x.manifold < y.manifold;
  });
}

}  // namespace

int propagate_restitution(std::span<SolverManifold> manifolds, std::span<SolverBody> bodies,
                          std::span<const Vec3> acceleration, float threshold, float dt, Vec3 gravity, int max_sweeps,
                          ImpactScratch* scratch) {
  const size_t count = manifolds.size();
  const bool skip = scratch != nullptr;
  if (skip) {
    scratch->changed_at.assign(bodies.size(), 0u);
    scratch->component.resize(bodies.size());
    scratch->budget.resize(bodies.size());
  }
  // The shock sweeps need the bodies' heights and a direction of up.
  const float g = length(gravity);
  const bool shock = skip && scratch->centers.size() >= bodies.size() && g > 0;
  // Two full sweeps first (most passes end there, and never sort the supports), then two shock
  // sweeps to every full one.
  auto is_shock = [&](int sweep) { return shock && sweep >= kFirstShock && (sweep - kFirstShock) % 3 != 2; };
  bool split = false;
  // Whether manifold m may be visited: its component's share of the pass is not spent.
  auto within_budget = [&](const SolverManifold& m) {
    if (!split) return true;
    uint32_t& left = scratch->budget[scratch->component[bodies[m.body_a].inv_mass > 0 ? m.body_a : m.body_b]];
    if (left == 0) return false;
    --left;
    return true;
  };
  int resolved_total = 0;
  int direction = 0;
  int last_full = 0;  // the last sweep that visited every manifold
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    // Skipped: neither body changed since the manifold's last visit (changed_at: 1 + the sweep).
    // A shock sweep follows a sweep that visited every support; a full sweep looks back to the
    // last full sweep, as the shock sweeps since then visited only the supports.
    const auto since = static_cast<uint32_t>(is_shock(sweep) ? sweep : last_full + 1);
    auto unchanged = [&](const SolverManifold& m) {
      return skip && sweep > 0 && scratch->changed_at[m.body_a] < since && scratch->changed_at[m.body_b] < since;
    };
    int resolved = 0;
    if (is_shock(sweep)) {
      if (sweep == kFirstShock) order_supports(manifolds, bodies, gravity * (-1.0f / g), *scratch);
      for (const SupportEntry& e : scratch->supports) {
        SolverManifold& m = manifolds[e.manifold];
        if (unchanged(m) || !within_budget(m)) continue;
        resolved += visit(m, bodies, acceleration, kShockThreshold * threshold, dt, e.support, sweep, scratch) ? 1 : 0;
      }
    } else {
      // Alternate the direction, so a chain stored against the direction of the strike still
      // propagates within two sweeps.
      const bool forward = direction++ % 2 == 0;
      last_full = sweep;
      for (size_t k = 0; k < count; ++k) {
        SolverManifold& m = manifolds[forward ? k : count - 1 - k];
        if (unchanged(m) || !within_budget(m)) continue;
        // e = 0 too: an impact is resolved as one block here, not point by point in the soft solve.
        resolved += visit(m, bodies, acceleration, threshold, dt, Support::None, sweep, scratch) ? 1 : 0;
      }
    }
    resolved_total += resolved;
    if (resolved == 0 && !is_shock(sweep)) break;
    // Most steps end within a few sweeps; only a pass that keeps going pays for the components.
    if (skip && !split && sweep + 1 == kRestitutionBudgetFrom) {
      split_into_components(manifolds, bodies, scratch->component, scratch->budget);
      split = true;
    }
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
