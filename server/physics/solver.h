// Contact solver: sequential impulses with a clamped accumulated normal impulse and warm starting
// (Catto, "Iterative Dynamics with Temporal Coherence", GDC 2005), linear only, and Baumgarte
// positional correction (seed 004: slop and percentage of the penetration beyond it).
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
};

/// Fills normal_mass and target_speed. The caller has filled the bodies, normal, depth, inverse
/// masses and the seed impulse. Restitution uses the approach speed before any impulse of this
/// step, v0 = -dot(v_b - v_a, n): target = e * v0 when v0 > restitution_threshold, else 0, with
/// e = max(e_a, e_b) (the bouncier surface wins, as in Box2D's default mixing).
/// Contacts whose both inverse masses are 0 get normal_mass 0 and are ignored by the solver.
void prepare_contacts(std::span<SolverContact> contacts, std::span<const Motion> motion,
                      std::span<const Material> material, float restitution_threshold);

/// Warm starting: applies each contact's seed impulse to the velocities, so a resting contact
/// starts from last step's answer and a stack converges over steps instead of within one step's
/// few iterations. Call after prepare_contacts (restitution must see the unmodified velocities).
void warm_start(std::span<const SolverContact> contacts, std::span<Motion> motion);

/// Runs `iterations` Gauss-Seidel sweeps over the contacts in order. Each sweep computes the
/// impulse that brings the relative normal speed to target_speed, clamps the accumulated impulse
/// to >= 0 (contacts push, never pull) and applies the change to both velocities. Writes only
/// the velocities of bodies with inverse mass > 0.
void solve_contacts(std::span<SolverContact> contacts, std::span<Motion> motion, int iterations);

/// Baumgarte-style positional correction, once per step after position integration: each dynamic
/// body moves along the normal by percent * max(depth - slop, 0) / (inv_mass_a + inv_mass_b),
/// scaled by its inverse mass (A backwards, B forwards). Uses the narrowphase depth. Writes only
/// the positions of bodies with inverse mass > 0; the caller refreshes their AABBs.
void correct_positions(std::span<const SolverContact> contacts, std::span<Pose> pose, float percent,
                       float slop);

}  // namespace impulse::physics
