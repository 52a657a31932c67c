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

#include <span>

#include "server/physics/solver.h"

namespace impulse::physics {

/// Sweeps over the manifolds per step in propagate_restitution. Sweeps alternate direction, so a
/// chain whose manifolds are stored in chain order (either way round) is resolved in at most two
/// sweeps; branching or bouncing-back configurations use the rest. A sweep over manifolds whose
/// bodies did not change is a cheap scan (see changed_at), and the pass ends at the first sweep
/// that changes nothing. Measured on Jolt's 1240-box pyramid: a layer landing on a stack that has
/// not settled is a chain 15 layers deep and Gauss-Seidel carries the impulse about one layer per
/// sweep; stopped at 8 sweeps it left the boxes below moving down unevenly (0.2-2.3 m/s), tilting
/// them, and boxes slid 5-18 cm (43 over 5 cm); with 128 sweeps and no commit cap, none did.
inline constexpr int kRestitutionSweeps = 128;
/// Times one manifold's visit may change the bodies in one pass (see propagate_restitution): the
/// work bound on a pile that keeps colliding. A converging lattice of 250 bodies ran all 128
/// sweeps (server tick p99 25 ms); with 16: p99 6.5-8 ms, and the pyramid above has 26 boxes
/// over 5 cm (worst 6.7 cm); with 32: p99 11-16.5 ms, 10 boxes (worst 9.4 cm).
inline constexpr int kRestitutionCommits = 16;

/// Projected Gauss-Seidel iterations over the points of one manifold resolved as a block (a box
/// face landing on four points bounces as a whole, without the spin a point-by-point resolution
/// would inject). One iteration is exact for a single point.
inline constexpr int kRestitutionBlockIterations = 4;

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
/// alternating directions, repeat until one resolves nothing or `max_sweeps` ran.
///
/// Time of impact: an approaching point is hit at t = s / (-vn) [s] from step start, clamped to
/// [-dt, dt]: t > 0 if the gap is still open, t < 0 if the bodies already overlap (the contact was
/// beyond the speculative margin a step ago). Its impulse moves the bodies' `delta_position` by
/// -dv t, as if applied at t rather than at step start: a ball does not rebound from mid-air, and
/// an overlap found at step start is undone instead of being pushed out by the soft solve (whose
/// push would add energy along a chain). Linear part only; the small rotation lag of an
/// off-centre hit is not corrected.
///
/// Energy: for each block the kinetic energy change sum(lambda_i (vn_i + vn_i') / 2) is checked;
/// if a multi-point block would create energy (Newton's law per point can, for some geometries),
/// its impulses are undone and it is resolved inelastically (targets 0) instead.
///
/// Deterministic (fixed order), allocation-free, bounded (max_sweeps x manifolds blocks). Points
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
/// @param gravity world gravity [m/s^2], integrated by the soft step after this pass: a bounce at
///        time of impact t gets the approach speed gravity gave it by t (and the pass leaves the
///        velocity that, after the step's gravity, is the rebound at t plus gravity over dt - t).
/// @param max_sweeps sweep cap (>= 0).
/// @param changed_at optional scratch, one entry per body: 1 + the last sweep that applied an
///        impulse to the body. With it, a manifold neither of whose bodies changed since the
///        sweep before is skipped: its last visit applied nothing to the same inputs, so visiting
///        it again would apply nothing either (same result, much less work once a few chains are
///        left). Empty: every manifold is visited every sweep.
/// @param commits optional scratch, one entry per manifold: with it, a manifold changes the bodies
///        at most kRestitutionCommits times per pass, which bounds the pass's work on a pile
///        that keeps colliding (a converging lattice of 250 bodies ran all 128 sweeps).
/// @return the number of manifold blocks resolved (0 when nothing bounced).
int propagate_restitution(std::span<SolverManifold> manifolds, std::span<SolverBody> bodies, float threshold,
                          float dt, Vec3 gravity, int max_sweeps = kRestitutionSweeps,
                          std::span<uint32_t> changed_at = {}, std::span<uint8_t> commits = {});

}  // namespace impulse::physics
