// Contact solver: sequential impulses with clamped accumulated normal and Coulomb friction impulses
// and warm starting (Catto, "Iterative Dynamics with Temporal Coherence", GDC 2005; "Fast and
// Simple Physics using Sequential Impulses", GDC 2006), linear only, and Baumgarte positional
// correction (seed 004: slop and percentage of the penetration beyond it).
//
// Friction model. Each contact has two tangent directions built from the normal alone
// (tangent_basis(), Catto's "Computing a Basis", 2014), so a persisting contact with an unchanged
// normal keeps the same basis from step to step. The two tangent impulses are solved together as
// one 2D block and their accumulated vector is clamped to the disc |lambda_t| <= mu * lambda_n
// (circular friction cone, isotropic: the box clamp per tangent would let a body sliding along a
// diagonal feel up to sqrt(2) times the friction of one sliding along a tangent). mu =
// sqrt(mu_a * mu_b): either surface at 0 makes the contact frictionless. Per contact and sweep
// friction is solved before the normal, as in Box2D, so non-penetration, solved last, wins.
// Angular terms (rotation issue): the effective masses become 1 / (J M^-1 J^T) per direction with
// the r x n / r x t rows; tangent_mass is per direction so they slot in without changing the
// layout, and the 2D block then takes the per-direction diagonal approximation.
#pragma once

#include <cstdint>
#include <span>

#include "server/physics/body_columns.h"

namespace impulse::physics {

/// One contact prepared for the solver. Bodies are dense indices into the World's columns.
/// A body that must not move here (static, kinematic, sleeping) has inverse mass 0.
struct SolverContact {
  uint32_t body_a = 0;
  uint32_t body_b = 0;
  uint32_t record = 0;     ///< index of the caller's contact record (to store the impulse back)
  Vec3 normal;             ///< unit, world frame, from a towards b
  float depth = 0;         ///< penetration [m] from the narrowphase
  float inv_mass_a = 0;    ///< [1/kg]
  float inv_mass_b = 0;    ///< [1/kg]
  float normal_mass = 0;   ///< 1 / (inv_mass_a + inv_mass_b) [kg]
  float target_speed = 0;  ///< desired separating normal speed [m/s] (restitution), >= 0
  /// Accumulated normal impulse [N·s], >= 0. The caller seeds it with the last step's value for
  /// a persisting contact (0 for a new one); after solve_contacts it holds this step's total.
  float accumulated_impulse = 0;
  /// Accumulated friction impulse [N·s, world frame, in the tangent plane], applied to b (and its
  /// negative to a), like accumulated_impulse along the normal. The caller seeds it with the last
  /// step's value (0 for a new contact); prepare_contacts projects it onto this step's tangent
  /// plane, so a normal that turned a little still warm-starts; after solve_contacts it holds this
  /// step's total, |friction_impulse| <= friction * accumulated_impulse.
  Vec3 friction_impulse;

  // Filled by prepare_contacts.
  float friction = 0;         ///< Coulomb coefficient mu = sqrt(mu_a * mu_b), >= 0
  Vec3 tangent[2];            ///< unit, world frame; {normal, tangent[0], tangent[1]} orthonormal
  float tangent_mass[2] = {}; ///< effective mass along each tangent [kg]; linear: = normal_mass
  float tangent_impulse[2] = {};  ///< friction_impulse in the tangent basis during the solve [N·s]
};

/// Two unit tangents t0, t1 such that {n, t0, t1} is a right-handed orthonormal basis, a function
/// of the unit normal n alone (deterministic): t0 is built perpendicular to n from the two
/// components of n that are not both small (|n.x| >= 1/sqrt(3) picks (n.y, -n.x, 0), else
/// (0, n.z, -n.y)), normalised, then t1 = n x t0. Catto, "Computing a Basis", Box2D blog, 2014.
void tangent_basis(Vec3 n, Vec3& t0, Vec3& t1);

/// Fills normal_mass, target_speed, friction, tangent, tangent_mass and tangent_impulse. The
/// caller has filled the bodies, normal, depth, inverse masses and the seed impulses. Friction
/// mixes as mu = sqrt(mu_a * mu_b) (the geometric mean, as in Box2D: a frictionless surface
/// makes any contact on it frictionless); the friction seed is projected onto the tangent plane
/// and clamped to the cone mu * (seed normal impulse). Restitution uses the approach speed before any impulse of this
/// step, v0 = -dot(v_b - v_a, n): target = e * v0 when v0 > restitution_threshold, else 0, with
/// e = max(e_a, e_b) (the bouncier surface wins, as in Box2D's default mixing).
/// Contacts whose both inverse masses are 0 get normal_mass 0 and are ignored by the solver.
void prepare_contacts(std::span<SolverContact> contacts, std::span<const Motion> motion,
                      std::span<const Material> material, float restitution_threshold);

/// Warm starting: applies each contact's seed impulses (normal and friction) to the velocities, so a resting contact
/// starts from last step's answer and a stack converges over steps instead of within one step's
/// few iterations. Call after prepare_contacts (restitution must see the unmodified velocities).
void warm_start(std::span<const SolverContact> contacts, std::span<Motion> motion);

/// Runs `iterations` Gauss-Seidel sweeps over the contacts in order. Per contact, a sweep first
/// solves friction: the 2D tangent impulse that brings the relative tangential velocity to zero,
/// with the accumulated tangent impulse vector clamped to the disc of radius
/// friction * accumulated_impulse (Coulomb: sticking inside the cone, sliding on its edge, never
/// accelerating the pair). Then the normal: the impulse that brings the relative normal speed to
/// target_speed, with the accumulated impulse clamped to >= 0 (contacts push, never pull). Each
/// change is applied to both velocities. Finally writes friction_impulse back in world frame.
/// Writes only the velocities of bodies with inverse mass > 0.
void solve_contacts(std::span<SolverContact> contacts, std::span<Motion> motion, int iterations);

/// Baumgarte-style positional correction, once per step after position integration: each dynamic
/// body moves along the normal by percent * max(depth - slop, 0) / (inv_mass_a + inv_mass_b),
/// scaled by its inverse mass (A backwards, B forwards). Uses the narrowphase depth. Writes only
/// the positions of bodies with inverse mass > 0; the caller refreshes their AABBs.
void correct_positions(std::span<const SolverContact> contacts, std::span<Pose> pose, float percent,
                       float slop);

}  // namespace impulse::physics
