// Contact solver: soft-step sequential impulses (Catto, "Solver2D" blog post and GDC 2024 talk
// "Box2D v3"; the soft constraint of Catto, "Soft Constraints", GDC 2011) in 3D. Per step the
// contacts are prepared once; then each of `substeps` substeps integrates velocities, warm starts,
// solves every contact with a soft position bias, integrates positions and relaxes (the same sweep
// without bias, taking the bias's velocity back out). That holds resting contacts, whose overlap
// is the soft spring's fraction of a millimetre. A deep overlap (a body created or moved into
// another) is different: along a chain of bodies the relax sweeps cannot take the push back out,
// and the row flies apart (ten boxes overlapping by 2 cm kept 1.05 m/s). So a contact that starts
// a step deeper than linear_slop is *recovering* (ContactRecord::recovering) until it is shallower
// than a fifth of it, and its overlap is pushed out by split impulses (Catto, "Iterative Dynamics
// with Temporal Coherence", GDC 2005; Bullet's split impulse): in the biased sweep its
// penetrating points solve the soft position bias on per-body pseudo velocities, in the same
// Gauss-Seidel order, positions integrate real + pseudo velocity, and the pseudo velocity is
// discarded, so the push-out never becomes kinetic energy; its real rows are rigid with bias 0.
// The pseudo impulses are warm-started like the real ones (across substeps and, through the
// contact record, steps), so a lasting pressure (an over-packed container) is held instead of
// being re-solved from zero by one sweep a substep, which let it push bodies through walls.
// (Split impulses on every contact made stacks creep: a ten-box stack moved 4.7 cm.)
// Collisions with restitution are resolved first, as events that propagate down chains of
// touching bodies (restitution.h); a Box2D-style restitution sweep at the end catches the rest.
// Sequential impulses with clamped accumulated impulses and warm starting follow Catto,
// "Iterative Dynamics with Temporal Coherence", GDC 2005.
//
// Friction: two tangents per manifold from the normal alone (tangent_basis, Catto "Computing a
// Basis", 2014), per point a 2D tangent impulse clamped to the disc mu * lambda_n (circular
// Coulomb cone). The separation of each point is tracked through the substeps from the bodies'
// position and rotation change since the step began, so a contact found once per step stays
// accurate over its substeps.
#pragma once

#include <cstdint>
#include <span>

#include "server/physics/body_columns.h"
#include "server/physics/contact_list.h"
#include "server/physics/joint.h"
#include "server/physics/narrowphase.h"

namespace impulse::physics {

/// Per-step state of one body that can move in the solver (awake dynamic or kinematic), plus one
/// immovable body (all zero) shared by every static and sleeping partner. The fields the contact
/// sweeps touch come first and fit one 64-byte cache line; the rest is read once per substep.
struct alignas(64) SolverBody {
  Vec3 velocity;          ///< [m/s], world frame
  float inv_mass = 0;     ///< [1/kg]; 0 for kinematic and the immovable body
  Vec3 angular_velocity;  ///< [rad/s], world frame
  Vec3 delta_position;    ///< position change since the step began [m], world frame
  /// Rotation since the step began as the sum of w h over the substeps [rad], world frame: the
  /// first-order rotation the contact sweeps use to track separations (exact for a spinning
  /// sphere, whose surface does not move along the normal).
  Vec3 delta_angle;
  Quat delta_rotation;    ///< the same rotation, integrated exactly (applied after the start orientation)
  Mat3 inv_inertia = Mat3{Vec3{}, Vec3{}, Vec3{}};  ///< world frame [1/(kg·m^2)], fixed over the step
  /// Split impulse (Catto, "Iterative Dynamics with Temporal Coherence", GDC 2005; Bullet's
  /// m_splitImpulse): the push-out of overlapping contacts is solved on these pseudo velocities,
  /// which move the body for one substep's position update and are then discarded, so overlap
  /// recovery never becomes real (kinetic) velocity. Zero outside the biased sweep.
  Vec3 pseudo_velocity;
  Vec3 pseudo_angular_velocity;
};

/// Soft constraint coefficients for one substep length h (Catto, "Soft Constraints", GDC 2011):
/// a spring of frequency hertz and damping ratio zeta solved implicitly.
struct Softness {
  float bias_rate = 0;      ///< [1/s]: velocity bias per metre of penetration
  float mass_scale = 1;     ///< scales the effective mass
  float impulse_scale = 0;  ///< fraction of the accumulated impulse removed per solve
};
/// omega = 2 pi hertz; a1 = 2 zeta + h omega; a2 = h omega a1; a3 = 1 / (1 + a2);
/// bias_rate = omega / a1, mass_scale = a2 a3, impulse_scale = a3. hertz 0 gives a rigid (zero) softness.
Softness make_softness(float hertz, float zeta, float h);

/// One manifold point prepared for the solver. The angular parts of its three constraint rows
/// (normal, two tangents) are precomputed once per step for each body: r x d and I^-1 (r x d), as
/// in Catto's sequential impulses, so a sweep costs dot products and scaled adds only.
struct SolverPoint {
  Vec3 anchor_a;            ///< contact point minus A's centre at step start, world frame [m]
  Vec3 anchor_b;            ///< contact point minus B's centre at step start, world frame [m]
  Vec3 rn_a, rn_b;          ///< anchor x normal for A and B [m]
  Vec3 in_a, in_b;          ///< I^-1 (anchor x normal): angular velocity per unit normal impulse
  Vec3 rt_a[2], rt_b[2];    ///< anchor x tangent[k] [m]
  Vec3 it_a[2], it_b[2];    ///< I^-1 (anchor x tangent[k])
  float base_separation = 0;  ///< separation at step start [m], < 0 overlapping
  float normal_mass = 0;      ///< 1 / (J M^-1 J^T) along the normal [kg]
  float tangent_mass[2] = {}; ///< the same along each tangent [kg]
  float normal_impulse = 0;   ///< accumulated [N·s] of the current substep
  float pseudo_impulse = 0;   ///< accumulated push-out on the pseudo velocities (warm-started)
  float tangent_impulse[2] = {};
  float max_normal_impulse = 0;  ///< largest normal impulse applied this step (restitution test)
  float relative_velocity = 0;   ///< normal velocity at step start [m/s], < 0 approaching
};

/// One manifold prepared for the solver. Bodies index the SolverBody array. Its points live in
/// SolverScratch::manifold_points, not inline: a sphere contact has one point, and four inline
/// points made every manifold 880 bytes (S3's peak memory, docs/BENCHMARKS.md).
struct SolverManifold {
  uint32_t body_a = 0;
  uint32_t body_b = 0;
  uint32_t record = 0;    ///< index of the World's ContactRecord (impulses are stored back)
  Vec3 normal;            ///< unit, world frame, from a towards b
  Vec3 tangent[2];        ///< {normal, tangent[0], tangent[1]} right-handed orthonormal
  float friction = 0;     ///< mixed Coulomb coefficient
  float restitution = 0;  ///< mixed coefficient of restitution
  bool immovable_partner = false;  ///< one side cannot move: the stiffer static softness applies
  bool recovering = false;         ///< ContactRecord::recovering: push out by split impulses
  int point_count = 0;
  /// point_count points in the scratch's manifold_points, bound by prepare_manifolds and valid
  /// until the next prepare_manifolds with the same scratch (so copy manifolds before preparing).
  SolverPoint* points = nullptr;
};

/// Two unit tangents t0, t1 such that {n, t0, t1} is a right-handed orthonormal basis, a function
/// of the unit normal n alone (deterministic): t0 is built perpendicular to n from the two
/// components of n that are not both small, normalised, then t1 = n x t0. Catto, "Computing a
/// Basis", Box2D blog, 2014.
void tangent_basis(Vec3 n, Vec3& t0, Vec3& t1);

/// Solver tuning for one step, from WorldSettings.
struct SolverConfig {
  float dt = 0;                      ///< step [s]
  int substeps = 4;
  int relax_iterations = 2;
  Vec3 gravity;                      ///< [m/s^2]
  float contact_hertz = 60;
  float contact_damping_ratio = 5;
  float contact_push_max_speed = 3;  ///< [m/s]
  float restitution_threshold = 1;   ///< [m/s]
  float max_speed = 500;             ///< |v| cap [m/s] (WorldSettings::max_speed)
  float max_angular_speed = 47.12389f;  ///< |w| cap [rad/s]
  /// false: the same sweeps in the same (colour) order, one manifold at a time in scalar code;
  /// the reference the wide sweeps are tested against. Bit-identical results either way.
  bool wide = true;
};

struct SolverScratch;  // solver_wide.h

/// Binds each manifold's points to `scratch.manifold_points` (as many as its record has) and fills
/// its anchors, base separations, effective masses, tangents and relative
/// velocities from the bodies at step start; seeds the accumulated impulses from `records` (the
/// friction seed projected onto this step's tangent plane and clamped to its cone).
/// `centers` gives each solver body's centre at step start [m] (the immovable body: any value).
void prepare_manifolds(std::span<SolverManifold> manifolds, std::span<const SolverBody> bodies,
                       std::span<const Vec3> centers, std::span<const ContactRecord> records,
                       SolverScratch& scratch);

/// Per-body forces for integrate_velocities: linear acceleration from force / mass and angular
/// acceleration from I^-1 torque, per solver body (the immovable body last, zero).
struct BodyForces {
  Vec3 linear;   ///< [m/s^2], gravity excluded
  Vec3 angular;  ///< [rad/s^2], world frame
  float linear_damping = 0;   ///< [1/s]
  float angular_damping = 0;  ///< [1/s]
  bool dynamic = false;       ///< gravity and damping apply (kinematic bodies keep their velocity)
  /// Principal moments of inertia [kg·m^2] (local) and the orientation at step start, for the
  /// implicit midpoint gyroscopic update each substep (implicit_gyroscopic). Zero inertia skips it.
  Vec3 inertia;
  Quat orientation;
};

/// The torque-free Euler equations I dw/dt = -w x (I w) over h for the body-frame angular velocity
/// w, by the implicit midpoint rule solved with Newton's method. Implicit Euler (one Newton step,
/// Catto, "Numerical Methods", GDC 2015) is stable but dissipative: a box spun at 10 rad/s about
/// its intermediate axis lost 29% of its energy in 10 s. The midpoint rule conserves every
/// quadratic invariant of the flow (Hairer, Lubich, Wanner, "Geometric Numerical Integration",
/// 2006, Thm. IV.2.1), here both the energy w.(I w)/2 and |I w| = |L|, while staying second order,
/// so the intermediate-axis flip still happens. I diagonal [kg·m^2]. Returns w unchanged if the
/// Newton system is singular or the result not finite.
Vec3 implicit_gyroscopic(Vec3 w, Vec3 inertia, float h);

/// Runs the whole soft step: propagate_restitution, then substeps x (integrate velocities, warm
/// start, solve with bias, integrate positions, relax), then the end-of-step restitution sweep,
/// then writes the accumulated impulses back into `records`. `bodies` holds the movable bodies
/// followed by the immovable one (last). The warm start and the sweeps run colour by colour,
/// kSolverLanes manifolds at a time (solver_wide.h), which is Gauss-Seidel in manifold order.
/// `scratch` is reused memory, owned by the caller.
/// `joints` (joint.h), in joint order, are warm-started and solved in the same substeps, before
/// the contacts of each sweep (their accumulated impulses are left in the SolverJoints).
void solve_soft_step(std::span<SolverManifold> manifolds, std::span<SolverBody> bodies,
                     std::span<const BodyForces> forces, std::span<ContactRecord> records,
                     const SolverConfig& config, SolverScratch& scratch, std::span<SolverJoint> joints = {});

}  // namespace impulse::physics
