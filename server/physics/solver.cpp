// Sequential impulses with clamped accumulated impulses and warm starting (Catto, GDC 2005) and
// Baumgarte positional correction (seed 004), linear only.
#include "server/physics/solver.h"

#include <algorithm>

namespace impulse::physics {

void prepare_contacts(std::span<SolverContact> contacts, std::span<const Motion> motion,
                      std::span<const Material> material, float restitution_threshold) {
  for (SolverContact& c : contacts) {
    const float inv_mass_sum = c.inv_mass_a + c.inv_mass_b;
    c.normal_mass = inv_mass_sum > 0 ? 1.0f / inv_mass_sum : 0.0f;
    // Restitution from the approach speed before any impulse of this step: computing it inside
    // the iterations would chase a target that moves as the other contacts push.
    const float approach_speed = -dot(motion[c.body_b].velocity - motion[c.body_a].velocity, c.normal);
    const float e = std::max(material[c.body_a].restitution, material[c.body_b].restitution);
    c.target_speed = approach_speed > restitution_threshold ? e * approach_speed : 0.0f;
  }
}

void warm_start(std::span<const SolverContact> contacts, std::span<Motion> motion) {
  for (const SolverContact& c : contacts) {
    if (c.normal_mass == 0 || c.accumulated_impulse == 0) continue;
    const Vec3 p = c.normal * c.accumulated_impulse;
    if (c.inv_mass_a > 0) motion[c.body_a].velocity -= p * c.inv_mass_a;
    if (c.inv_mass_b > 0) motion[c.body_b].velocity += p * c.inv_mass_b;
  }
}

void solve_contacts(std::span<SolverContact> contacts, std::span<Motion> motion, int iterations) {
  for (int it = 0; it < iterations; ++it) {
    for (SolverContact& c : contacts) {
      if (c.normal_mass == 0) continue;
      Vec3& va = motion[c.body_a].velocity;
      Vec3& vb = motion[c.body_b].velocity;
      const float normal_speed = dot(vb - va, c.normal);
      const float impulse = c.normal_mass * (c.target_speed - normal_speed);
      // Clamp the total, not the increment: a later sweep may take back part of an earlier
      // push, but the contact as a whole never pulls the bodies together.
      const float total = std::max(c.accumulated_impulse + impulse, 0.0f);
      const float applied = total - c.accumulated_impulse;
      c.accumulated_impulse = total;
      const Vec3 p = c.normal * applied;
      if (c.inv_mass_a > 0) va -= p * c.inv_mass_a;
      if (c.inv_mass_b > 0) vb += p * c.inv_mass_b;
    }
  }
}

void correct_positions(std::span<const SolverContact> contacts, std::span<Pose> pose, float percent,
                       float slop) {
  for (const SolverContact& c : contacts) {
    if (c.normal_mass == 0) continue;
    const float excess = std::max(c.depth - slop, 0.0f);
    if (excess == 0) continue;
    const Vec3 correction = c.normal * (percent * excess * c.normal_mass);
    if (c.inv_mass_a > 0) pose[c.body_a].position -= correction * c.inv_mass_a;
    if (c.inv_mass_b > 0) pose[c.body_b].position += correction * c.inv_mass_b;
  }
}

}  // namespace impulse::physics
