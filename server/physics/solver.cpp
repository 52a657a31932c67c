// Sequential impulses with clamped accumulated normal and Coulomb friction impulses and warm
// starting (Catto, GDC 2005 and GDC 2006) and Baumgarte positional correction (seed 004), linear
// only.
#include "server/physics/solver.h"

#include <algorithm>
#include <cmath>

namespace impulse::physics {

void tangent_basis(Vec3 n, Vec3& t0, Vec3& t1) {
  // 0.57735 ~ 1/sqrt(3): a unit vector has at least one component that large, so whichever pair
  // is used, the vector built from it has length >= 1/sqrt(3): no cancellation, no division by ~0.
  const Vec3 b = std::fabs(n.x) >= 0.57735027f ? Vec3{n.y, -n.x, 0.0f} : Vec3{0.0f, n.z, -n.y};
  t0 = b * (1.0f / length(b));
  t1 = cross(n, t0);
}

namespace {

// Scales (x, y) onto the disc of radius r if it lies outside. r >= 0.
void clamp_to_disc(float& x, float& y, float r) {
  const float len_sq = x * x + y * y;
  if (len_sq <= r * r) return;
  const float s = r / std::sqrt(len_sq);  // len_sq > r^2 >= 0, so no division by 0
  x *= s;
  y *= s;
}

}  // namespace

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

    c.friction = std::sqrt(material[c.body_a].friction * material[c.body_b].friction);
    tangent_basis(c.normal, c.tangent[0], c.tangent[1]);
    // Linear only: J M^-1 J^T along any unit direction is inv_mass_a + inv_mass_b.
    c.tangent_mass[0] = c.normal_mass;
    c.tangent_mass[1] = c.normal_mass;
    // Last step's friction, seen in this step's basis: the part along the (possibly turned)
    // normal is dropped, and the rest stays inside this step's cone.
    c.tangent_impulse[0] = dot(c.friction_impulse, c.tangent[0]);
    c.tangent_impulse[1] = dot(c.friction_impulse, c.tangent[1]);
    clamp_to_disc(c.tangent_impulse[0], c.tangent_impulse[1], c.friction * c.accumulated_impulse);
  }
}

void warm_start(std::span<const SolverContact> contacts, std::span<Motion> motion) {
  for (const SolverContact& c : contacts) {
    if (c.normal_mass == 0) continue;
    const Vec3 p = c.normal * c.accumulated_impulse + c.tangent[0] * c.tangent_impulse[0] +
                   c.tangent[1] * c.tangent_impulse[1];
    if (p == Vec3{}) continue;
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

      // Friction first, bounded by the current normal impulse; the normal, solved last, wins.
      const float max_friction = c.friction * c.accumulated_impulse;
      if (max_friction > 0 || c.tangent_impulse[0] != 0 || c.tangent_impulse[1] != 0) {
        const Vec3 slip = vb - va;
        float t0 = c.tangent_impulse[0] - c.tangent_mass[0] * dot(slip, c.tangent[0]);
        float t1 = c.tangent_impulse[1] - c.tangent_mass[1] * dot(slip, c.tangent[1]);
        // Clamp the accumulated vector, not the increment (as for the normal), to the disc.
        clamp_to_disc(t0, t1, max_friction);
        const Vec3 p = c.tangent[0] * (t0 - c.tangent_impulse[0]) + c.tangent[1] * (t1 - c.tangent_impulse[1]);
        c.tangent_impulse[0] = t0;
        c.tangent_impulse[1] = t1;
        if (c.inv_mass_a > 0) va -= p * c.inv_mass_a;
        if (c.inv_mass_b > 0) vb += p * c.inv_mass_b;
      }

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
  for (SolverContact& c : contacts) {
    c.friction_impulse = c.tangent[0] * c.tangent_impulse[0] + c.tangent[1] * c.tangent_impulse[1];
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
