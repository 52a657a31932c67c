// Chained restitution: a velocity pass before the soft solve that resolves each engaging contact as
// a collision event and lets the rebound propagate along chains of touching bodies (Edyn's
// restitution solver: xissburg/edyn, src/edyn/dynamics/restitution_solver.cpp and its design doc,
// "Restitution"; collisions as sequential events: Mirtich, "Impulse-based Dynamic Simulation of
// Rigid Body Systems", PhD thesis, 1996; impulses: Catto, "Iterative Dynamics with Temporal
// Coherence", GDC 2005).
//
// Why: the soft step applies restitution once at the end (Box2D v3), with the approach speed each
// point had at step start. In a chain of touching bodies (Newton's cradle) the normal solve turns
// the first impact into a perfectly inelastic push of the whole chain, and the contacts further
// down had no approach speed at step start, so no rebound reaches them. Here every impact is
// resolved on its own, in sequence, at the velocity level, before gravity: the struck contact
// bounces, the next contact then approaches and bounces, and so on down the chain.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "server/physics/solver.h"

namespace impulse::physics {

/// Sweeps per step in propagate_restitution, shock sweeps included. A full sweep (every manifold)
/// alternates direction with the full sweep before it, so a chain whose manifolds are stored in
/// chain order (either way round) is resolved in at most two; branching or bouncing-back
/// configurations use the rest. A sweep over manifolds whose bodies did not change is a cheap scan
/// (see ImpactScratch::changed_at), and the pass ends at the first full sweep that changes nothing.
inline constexpr int kRestitutionSweeps = 128;
/// The pass's work bound on a pile that keeps colliding: from sweep kRestitutionBudgetFrom on,
/// each connected component of the manifolds (over the bodies an impulse moves) may visit its
/// manifolds at most kRestitutionVisitsPerManifold times its manifold count in all, however it
/// spends them. A settled pile lends its share to the one chain in it still converging (a landing
/// on Jolt's pyramid), while a pile whose every manifold keeps colliding stops after about that
/// many sweeps (a converging lattice of 250 bodies ran all 128 sweeps: server tick p99 25 ms).
/// Per component, not per span: the solver batches whole components, and the result must not
/// depend on which ones share a batch. Steps that end before sweep kRestitutionBudgetFrom (most)
/// never build the components.
inline constexpr uint32_t kRestitutionVisitsPerManifold = 16;
inline constexpr int kRestitutionBudgetFrom = 4;

/// Projected Gauss-Seidel iterations over the points of one inelastic manifold (e = 0) resolved
/// as a block (a box face landing on four points stops as a whole, without the spin a
/// point-by-point resolution would inject). One iteration is exact for a single point. A bouncing
/// manifold (e > 0) is solved exactly instead, by enumerating which points push (Box2D v2.x's
/// two-point block solver, b2ContactSolver, extended to four): four iterations left a rod struck
/// end-on spinning, and the energy check then made its e = 1 bounce inelastic.
inline constexpr int kRestitutionBlockIterations = 4;

/// Which body of an inelastic manifold holds the other up in the shock sweep (propagate_restitution).
enum class Support : uint8_t { None, A, B };

/// One entry of the shock sweep's order: a manifold, its upper body's height along up [m], and
/// the side that supports.
struct SupportEntry {
  float height = 0;
  uint32_t manifold = 0;
  Support support = Support::None;
};

/// Reused memory of propagate_restitution (one per solver batch), so a step allocates nothing in
/// steady state.
///
/// Shock sweeps (with gravity and `centers`): after two full sweeps (where most passes end,
/// without sorting anything), the pass repeats two shock sweeps and one full sweep. A shock sweep visits only the inelastic manifolds whose normal
/// is within 45 degrees of up (against gravity), highest upper body first, and solves each for the
/// upper body alone, as if the lower body were held still; the lower body then takes the reaction,
/// and passes it on when its own supports come further down the same sweep. A landing on a settled
/// stack reaches the ground within one shock sweep (shock propagation: Guendelman, Bridson and
/// Fedkiw, "Nonconvex Rigid Bodies with Stacking", SIGGRAPH 2003; here the reaction is
/// kept, so momentum is conserved). Plain Gauss-Seidel hands the impulse down about one layer per
/// sweep: a 1 m box landing at 6 m/s on a column of 12 leaves the landing step with boxes still
/// moving at up to 0.72 m/s without the shock sweeps, at most 0.043 m/s with them; on Jolt's
/// 1240-box pyramid, 14 boxes slide over 5 cm without, none with them (StackingEdges). Where nothing
/// holds the lower body (a column meeting in free fall), the guess throws it on at most at the
/// approach speed (never faster: a lower body lighter than the upper one is solved the plain way),
/// and the full sweeps share that out again: the shock sweeps only choose where the projected
/// Gauss-Seidel iteration on the accumulated impulses starts.
struct ImpactScratch {
  /// Per solver body: centre at step start [m] (the heights of the shock sweeps' order). Set by
  /// prepare_manifolds to its `centers`, which must outlive the step's solve_soft_step.
  std::span<const Vec3> centers;
  std::vector<uint32_t> changed_at;     ///< per body: 1 + the last sweep that changed it
  std::vector<uint32_t> component;      ///< per body: its component's root (from sweep kRestitutionBudgetFrom)
  std::vector<uint32_t> budget;         ///< per root: visits its component has left
  std::vector<SupportEntry> supports;   ///< the shock sweep's order
  /// Per solver body: the acceleration the soft step integrates after the pass [m/s^2] (gravity
  /// plus force / mass for a dynamic body; zero otherwise). Filled by solve_soft_step.
  std::vector<Vec3> acceleration;
};

/// Resolves the collisions of this step before the soft solve, in place on `bodies`' velocities.
///
/// A point *engages* this step when its separation s [m] (step start, plus any time-of-impact
/// shift this pass already made) closes within `dt` at its current normal velocity vn [m/s]
/// (s <= -vn dt; every touching point with vn <= 0). A manifold (any restitution e, 0 included)
/// is resolved when one of its engaging points approaches faster than `threshold` [m/s]: its
/// engaging points are solved as a block for separating speeds e * (-vn) (0 for points approaching
/// slower than the threshold; vn' >= 0 for the others), with fresh impulses clamped >= 0 (these impulses
/// are not warm-started and are not stored in SolverPoint::normal_impulse). Approach speeds are
/// re-read from the current velocities every time a manifold is visited, so momentum handed on by
/// one contact is seen by the next: that is the chain propagation. Sweeps over all manifolds, in
/// alternating directions (with shock sweeps between them: ImpactScratch), repeat until one
/// resolves nothing or `max_sweeps` ran.
///
/// Time of impact: an approaching point is hit at t = s / (-vn) [s] from step start, clamped to
/// [-dt, dt]: t > 0 if the gap is still open, t < 0 if the bodies already overlap (the contact was
/// beyond the speculative margin a step ago). Its impulse moves the bodies' `delta_position` by
/// -dv t, as if applied at t rather than at step start: a ball does not rebound from mid-air, and
/// an overlap found at step start is undone instead of being pushed out by the soft solve (whose
/// push would add energy along a chain). A bouncing block (e > 0) also turns the bodies back by
/// dw t (SolverBody::delta_angle and delta_rotation), so an off-centre bounce does not spin them
/// over the part of the step before it; an inelastic block shifts the position only (turning it
/// back too left a column struck from above moving at 0.056 m/s after the landing step, against
/// 0.043). Separations count the shifts of earlier impacts in the pass, turns included.
///
/// Energy: for each block the kinetic energy change at the impact, sum(lambda_i (u_i + u_i') / 2)
/// with u = vn + a t_i the normal velocity at the point's time of impact, is checked;
/// if a multi-point block would create energy (Newton's law per point can, for some geometries),
/// its impulses are undone and it is resolved inelastically (targets 0) instead.
///
/// Deterministic (fixed order; the same for any split of the components into spans), free of
/// allocation once the scratch has grown, bounded (max_sweeps x manifolds blocks, and with scratch
/// about (kRestitutionBudgetFrom + kRestitutionVisitsPerManifold) x manifolds). Points
/// with zero effective mass get no impulse. An impact with e = 0 is resolved here too: solved as a
/// block, a box landing flat on four points stops without the spin that the soft solve's one
/// point-at-a-time sweep gives it (0.14-0.19 rad/s at 60 m/s before; PhysicsEdges tests).
///
/// After resolving a manifold, sets each of its points' SolverPoint::relative_velocity to the
/// normal velocity after the event, so the end-of-step restitution of solve_soft_step (which
/// bounces points that approached at step start and then pushed) does not bounce it again.
///
/// @param manifolds prepared by prepare_manifolds (anchors, normal_mass, base_separation);
///        relative_velocity is rewritten for resolved manifolds.
/// @param bodies the solver bodies; velocity, angular_velocity and delta_position are updated.
/// @param threshold restitution velocity threshold [m/s] (WorldSettings::restitution_threshold).
/// @param dt step [s].
/// @param acceleration per body of `bodies`, the constant acceleration [m/s^2] the soft step
///        integrates after this pass: world gravity plus applied force / mass for a dynamic body,
///        zero for kinematic and immovable bodies. A bounce at time of impact t gets the approach
///        speed this acceleration gave it by t (and the pass leaves the velocity that, after the
///        step's integration, is the rebound at t plus the acceleration over dt - t). Gravity
///        applied as a force (apply_force) bounces exactly as world gravity does.
/// @param gravity world gravity [m/s^2]: only its direction (up, for the shock sweeps) is used.
/// @param max_sweeps sweep cap (>= 0).
/// @param scratch optional (nullptr: every manifold is visited every sweep, up to max_sweeps, and
///        there is no shock sweep). With it:
///        - a manifold neither of whose bodies changed since its last visit is skipped: that visit
///          applied nothing to the same inputs, so visiting it again would apply nothing either
///          (same result, much less work once a few chains are left);
///        - if `centers` holds every body's centre and gravity is not zero, the shock sweeps run
///          (ImpactScratch);
///        - from sweep kRestitutionBudgetFrom on, each component has its visit budget.
/// @return the number of manifold blocks resolved (0 when nothing bounced).
int propagate_restitution(std::span<SolverManifold> manifolds, std::span<SolverBody> bodies,
                          std::span<const Vec3> acceleration, float threshold, float dt, Vec3 gravity,
                          int max_sweeps = kRestitutionSweeps, ImpactScratch* scratch = nullptr);

}  // namespace impulse::physics
