// Soft-step sequential impulses in 3D (Catto, "Solver2D", 2024; "Soft Constraints", GDC 2011;
// "Iterative Dynamics with Temporal Coherence", GDC 2005). See solver.h for the scheme.
#include "server/physics/solver.h"

#include <algorithm>
#include <cmath>

#include "server/physics/restitution.h"
#include "server/physics/solver_wide.h"

namespace impulse::physics {

namespace {

constexpr float kTwoPi = 6.28318530717958647692f;
// Newton iterations of the implicit midpoint gyroscopic step: from w1 = w0 the error shrinks from
// O(h |w|) to about O((h |w|)^8) relative, below float rounding for |w| h < 0.4 (100 rad/s at 240 Hz).
constexpr int kGyroscopicNewtonIterations = 3;

// Scales (x, y) onto the disc of radius r if it lies outside. r >= 0.
void clamp_to_disc(float& x, float& y, float r) {
  const float len_sq = x * x + y * y;
  if (len_sq <= r * r) return;
  const float s = r / std::sqrt(len_sq);  // len_sq > r^2 >= 0, so no division by 0
  x *= s;
  y *= s;
}

// 1 / (J M^-1 J^T) of one row, from its angular parts ra x d, I_a^-1 (ra x d) and the same for b;
// 0 when nothing can move.
float row_mass(const SolverBody& a, const SolverBody& b, Vec3 ra_x_d, Vec3 ia, Vec3 rb_x_d, Vec3 ib) {
  const float k = a.inv_mass + b.inv_mass + dot(ra_x_d, ia) + dot(rb_x_d, ib);
  return k > 0 ? 1.0f / k : 0.0f;
}

// Relative velocity of b with respect to a along one row: dot(d, vb - va) + wb.(rb x d) - wa.(ra x d).
float row_velocity(const SolverBody& a, const SolverBody& b, Vec3 d, Vec3 ra_x_d, Vec3 rb_x_d) {
  return dot(d, b.velocity - a.velocity) + dot(b.angular_velocity, rb_x_d) - dot(a.angular_velocity, ra_x_d);
}

// Applies impulse lambda along one row: +lambda d to b, -lambda d to a. The immovable body has zero
// inverse mass and zero I^-1 rows, so it stays at exactly zero without a branch.
void apply_row(SolverBody& a, SolverBody& b, Vec3 d, Vec3 ia, Vec3 ib, float lambda) {
  a.velocity -= d * (lambda * a.inv_mass);
  a.angular_velocity -= ia * lambda;
  b.velocity += d * (lambda * b.inv_mass);
  b.angular_velocity += ib * lambda;
}

}  // namespace

Vec3 implicit_gyroscopic(Vec3 w, Vec3 inertia, float h) {
  // Isotropic inertia: w x (I w) = 0, the spin is constant (skipping it avoids rounding drift).
  if (inertia.x == inertia.y && inertia.y == inertia.z) return w;
  auto skew_col = [](Vec3 v, int j) {  // column j of skew(v)
    return j == 0 ? Vec3{0.0f, v.z, -v.y} : (j == 1 ? Vec3{-v.z, 0.0f, v.x} : Vec3{v.y, -v.x, 0.0f});
  };
  // Implicit midpoint: I (w1 - w0) + h wm x (I wm) = 0 with wm = (w0 + w1) / 2, by Newton from
  // w1 = w0; the Jacobian is J = I + h/2 (skew(wm) I - skew(I wm)).
  const float half_h = 0.5f * h;
  Vec3 w1 = w;
  for (int iteration = 0; iteration < kGyroscopicNewtonIterations; ++iteration) {
    const Vec3 wm = (w + w1) * 0.5f;
    const Vec3 iwm = mul(inertia, wm);
    const Vec3 residual = mul(inertia, w1 - w) + cross(wm, iwm) * h;
    Mat3 jm;
    Vec3* cols[3] = {&jm.c0, &jm.c1, &jm.c2};
    for (int j = 0; j < 3; ++j) {
      Vec3 e{};
      if (j == 0) e.x = inertia.x; else if (j == 1) e.y = inertia.y; else e.z = inertia.z;
      *cols[j] = e + (skew_col(wm, j) * component(inertia, j) - skew_col(iwm, j)) * half_h;
    }
    // Cramer's rule on J dw = -residual.
    const Vec3 c12 = cross(jm.c1, jm.c2);
    const float det = dot(jm.c0, c12);
    if (!(std::fabs(det) > 1.0e-30f) || !std::isfinite(det)) return w;
    const Vec3 rhs = -residual;
    const float inv_det = 1.0f / det;
    const Vec3 dw{dot(rhs, c12) * inv_det, dot(jm.c0, cross(rhs, jm.c2)) * inv_det,
                  dot(jm.c0, cross(jm.c1, rhs)) * inv_det};
    w1 = w1 + dw;
  }
  return is_finite(w1) ? w1 : w;
}

namespace {

void integrate_velocities(std::span<SolverBody> bodies, std::span<const BodyForces> forces, float h,
                          const SolverConfig& c) {
  for (size_t i = 0; i < forces.size(); ++i) {
    const BodyForces& f = forces[i];
    if (!f.dynamic) continue;
    SolverBody& b = bodies[i];
    Vec3 v = b.velocity + (c.gravity + f.linear) * h;
    Vec3 w = b.angular_velocity + f.angular * h;
    if (w != Vec3{} && f.inertia != Vec3{}) {
      // Gyroscopic torque -w x (I w), in the body frame at the current orientation (implicit
      // midpoint, see implicit_gyroscopic).
      const Quat q = b.delta_rotation * f.orientation;
      w = rotate(q, implicit_gyroscopic(inverse_rotate(q, w), f.inertia, h));
    }
    v *= 1.0f / (1.0f + h * f.linear_damping);
    w *= 1.0f / (1.0f + h * f.angular_damping);
    // The speed caps (WorldSettings::max_speed, max_angular_speed; Jolt clamps the same way), also
    // the safety net of a server fed by clients: no push drives the state towards infinity.
    b.velocity = clamp_length(v, c.max_speed);
    b.angular_velocity = clamp_length(w, c.max_angular_speed);
  }
}

// A point may act this step unless its gap stays open for the whole step: s + min(vn, 0) dt +
// a dt^2 / 2 > 0, with s the separation after the impact pass's shifts, vn the normal velocity
// after it and a = -(|a_A . n| + |a_B . n|) the worst relative normal acceleration of the two
// bodies' own accelerations (a lower bound on the gap over [0, dt] for a point moving with its
// body's centre, so the test errs towards "may act"). A warm-started or recovering contact always
// may act. What the linear prediction misses of a rotating point's arc (or of a partner struck
// mid-step) costs a body marked in free flight that still gets a contact impulse a h^2 / 2 of
// position per substep, no more than the semi-implicit rule loses in free flight.
bool may_act(const SolverManifold& m, const SolverBody& a, const SolverBody& b, Vec3 accel_a, Vec3 accel_b,
             float dt) {
  if (m.recovering) return true;
  const Vec3 n = m.normal;
  const float shift = dot(b.delta_position - a.delta_position, n);
  // Either body may be held by its other contacts, which the free-fall difference would miss (a
  // card resting on a card: both fall at g, yet the lower one is held): assume the worst closing.
  const float fall = -(std::fabs(dot(n, accel_a)) + std::fabs(dot(n, accel_b)));
  for (int i = 0; i < m.point_count; ++i) {
    const SolverPoint& p = m.points[i];
    if (p.normal_impulse > 0) return true;
    const float vn = dot(b.velocity + cross(b.angular_velocity, p.anchor_b) - a.velocity -
                             cross(a.angular_velocity, p.anchor_a), n);
    if (p.base_separation + shift + std::min(vn, 0.0f) * dt + 0.5f * fall * dt * dt <= 0.0f) return true;
  }
  return false;
}

// in_contact[i] = 1 for each movable body with a manifold that may act this step (may_act); the
// others are in free flight, and integrate_positions moves them by the trapezoid rule. A falling
// ball whose speculative contact with the floor was found a step or two before the impact moved
// by semi-implicit Euler over those steps and hit g h^2 / 2 per substep too low: its rebound was
// 3.4e-4 short of e sqrt(2 g h) (Bounce tests).
void mark_in_contact(std::span<const SolverManifold> manifolds, std::span<const SolverBody> bodies,
                     std::span<const Vec3> acceleration, float dt, std::span<uint8_t> in_contact) {
  const size_t movable = in_contact.size();
  std::fill(in_contact.begin(), in_contact.end(), uint8_t{0});
  for (const SolverManifold& m : manifolds) {
    if ((m.body_a >= movable || in_contact[m.body_a] != 0) && (m.body_b >= movable || in_contact[m.body_b] != 0)) {
      continue;
    }
    if (!may_act(m, bodies[m.body_a], bodies[m.body_b], acceleration[m.body_a], acceleration[m.body_b], dt)) continue;
    if (m.body_a < movable) in_contact[m.body_a] = 1;
    if (m.body_b < movable) in_contact[m.body_b] = 1;
  }
}

// Moves each body by its velocity over the substep (semi-implicit Euler, which the contact rows'
// velocity targets assume), and with split impulses by its pseudo velocity as well, which is then
// dropped. A body with no contact this step is in free flight: its velocity changed only by the
// constant acceleration a (gravity and applied force), and it moves by the trapezoid rule, (v0 +
// v1) / 2 h = (v1 - a h / 2) h, which is exact for constant a. Semi-implicit Euler loses g h^2 / 2
// of the height-plus-kinetic energy y + v^2 / (2 g) per substep, 1.3 cm in a 0.64 s fall at 240 Hz
// substeps: a ball with e = 0.5 bounced 3.3% below its e^4 h second apex from that alone.
// With damping (v1 = (v0 + a h) / (1 + c h)) the rule is off by O(c h^2) and stays second order.
template <bool kSplit>
void integrate_positions(std::span<SolverBody> bodies, std::span<const BodyForces> forces,
                         std::span<const uint8_t> in_contact, Vec3 gravity, float h) {
  const float half_h = 0.5f * h;
  for (size_t i = 0; i < forces.size(); ++i) {
    SolverBody& b = bodies[i];
    Vec3 v = b.velocity;
    Vec3 w = b.angular_velocity;
    if (forces[i].dynamic && in_contact[i] == 0) v -= (gravity + forces[i].linear) * half_h;
    if constexpr (kSplit) {
      v += b.pseudo_velocity;
      w += b.pseudo_angular_velocity;
      b.pseudo_velocity = Vec3{};
      b.pseudo_angular_velocity = Vec3{};
    }
    b.delta_position += v * h;
    b.delta_angle += w * h;
    b.delta_rotation = integrate_rotation(b.delta_rotation, w, h);
  }
}

// The scalar sweeps, one manifold at a time: the overflow of the colouring (solver_wide.h) and
// the reference the wide sweeps are tested against. solver_wide.cpp mirrors them lane by lane.
void warm_start(SolverManifold& m, std::span<SolverBody> bodies) {
  SolverBody& a = bodies[m.body_a];
  SolverBody& b = bodies[m.body_b];
  for (int i = 0; i < m.point_count; ++i) {
    const SolverPoint& p = m.points[i];
    const Vec3 linear = m.normal * p.normal_impulse + m.tangent[0] * p.tangent_impulse[0] +
                        m.tangent[1] * p.tangent_impulse[1];
    a.velocity -= linear * a.inv_mass;
    a.angular_velocity -= p.in_a * p.normal_impulse + p.it_a[0] * p.tangent_impulse[0] + p.it_a[1] * p.tangent_impulse[1];
    b.velocity += linear * b.inv_mass;
    b.angular_velocity += p.in_b * p.normal_impulse + p.it_b[0] * p.tangent_impulse[0] + p.it_b[1] * p.tangent_impulse[1];
  }
}

void solve(SolverManifold& m, std::span<SolverBody> bodies, const Softness& soft, const Softness& static_soft,
           float inv_h, float push_max_speed, bool use_bias) {
  SolverBody& a = bodies[m.body_a];
  SolverBody& b = bodies[m.body_b];
  const Softness& s = m.immovable_partner ? static_soft : soft;
  const Vec3 n = m.normal;
  const float dn = dot(b.delta_position - a.delta_position, n);

  // Non-penetration first, then (relax sweeps only, docs/ARCHITECTURE.md "Solver") friction
  // bounded by this substep's normal impulses.
  for (int i = 0; i < m.point_count; ++i) {
    SolverPoint& p = m.points[i];
    // Separation now, from how far each body moved and (to first order) turned since the step
    // began: base + dot(dp_b + dtheta_b x r_b - dp_a - dtheta_a x r_a, n).
    const float separation =
        dn + dot(b.delta_angle, p.rn_b) - dot(a.delta_angle, p.rn_a) + p.base_separation;
    float bias = 0;
    float mass_scale = 1;
    float impulse_scale = 0;
    if (use_bias && m.recovering) {
      // A recovering contact (solver.h): split impulse. The soft push-out acts on the pseudo
      // velocities only; the real row below stays rigid with bias 0, so recovering an overlap
      // adds no kinetic energy. A point that opened a gap releases its warm-started push-out
      // (rigid, allowed to close exactly the gap this substep, as the real row's speculative
      // case), or the stale impulse would keep pushing the bodies apart every substep.
      const bool open = separation > 0;
      const float push = open ? separation * inv_h : std::max(s.bias_rate * separation, -push_max_speed);
      const float push_mass_scale = open ? 1.0f : s.mass_scale;
      const float push_impulse_scale = open ? 0.0f : s.impulse_scale;
      const float vpn = dot(n, b.pseudo_velocity - a.pseudo_velocity) + dot(b.pseudo_angular_velocity, p.rn_b) -
                        dot(a.pseudo_angular_velocity, p.rn_a);
      const float pseudo =
          -p.normal_mass * push_mass_scale * (vpn + push) - push_impulse_scale * p.pseudo_impulse;
      const float pseudo_total = std::max(p.pseudo_impulse + pseudo, 0.0f);
      const float pseudo_applied = pseudo_total - p.pseudo_impulse;
      p.pseudo_impulse = pseudo_total;
      a.pseudo_velocity -= n * (pseudo_applied * a.inv_mass);
      a.pseudo_angular_velocity -= p.in_a * pseudo_applied;
      b.pseudo_velocity += n * (pseudo_applied * b.inv_mass);
      b.pseudo_angular_velocity += p.in_b * pseudo_applied;
    }
    if (separation > 0) {
      bias = separation * inv_h;  // speculative: allow closing exactly the gap this substep
    } else if (use_bias && !m.recovering) {
      bias = std::max(s.bias_rate * separation, -push_max_speed);
      mass_scale = s.mass_scale;
      impulse_scale = s.impulse_scale;
    }
    const float vn = row_velocity(a, b, n, p.rn_a, p.rn_b);
    const float impulse = -p.normal_mass * mass_scale * (vn + bias) - impulse_scale * p.normal_impulse;
    // Clamp the total, not the increment: the contact as a whole only ever pushes.
    float total = std::max(p.normal_impulse + impulse, 0.0f);
    // A relax sweep may release a point that has a gap but never push it: every position update
    // is preceded by a biased sweep that enforces the gap again, so a push here only brakes a body
    // in mid-air (and counted as a hit, restitution would bounce it off a surface it never reached).
    if (!use_bias && separation > 0) total = std::min(total, p.normal_impulse);
    const float applied = total - p.normal_impulse;
    p.normal_impulse = total;
    p.max_normal_impulse = std::max(p.max_normal_impulse, applied);
    apply_row(a, b, n, p.in_a, p.in_b, applied);
  }

  if (use_bias || m.friction <= 0) return;
  for (int i = 0; i < m.point_count; ++i) {
    SolverPoint& p = m.points[i];
    float t0 = p.tangent_impulse[0] - p.tangent_mass[0] * row_velocity(a, b, m.tangent[0], p.rt_a[0], p.rt_b[0]);
    float t1 = p.tangent_impulse[1] - p.tangent_mass[1] * row_velocity(a, b, m.tangent[1], p.rt_a[1], p.rt_b[1]);
    // Coulomb: the accumulated 2D vector stays inside the disc mu * lambda_n.
    clamp_to_disc(t0, t1, m.friction * p.normal_impulse);
    const float d0 = t0 - p.tangent_impulse[0];
    const float d1 = t1 - p.tangent_impulse[1];
    p.tangent_impulse[0] = t0;
    p.tangent_impulse[1] = t1;
    const Vec3 linear = m.tangent[0] * d0 + m.tangent[1] * d1;
    a.velocity -= linear * a.inv_mass;
    a.angular_velocity -= p.it_a[0] * d0 + p.it_a[1] * d1;
    b.velocity += linear * b.inv_mass;
    b.angular_velocity += p.it_b[0] * d0 + p.it_b[1] * d1;
  }
}

void apply_restitution(std::span<SolverManifold> manifolds, std::span<SolverBody> bodies, float threshold) {
  for (SolverManifold& m : manifolds) {
    if (m.restitution == 0) continue;
    SolverBody& a = bodies[m.body_a];
    SolverBody& b = bodies[m.body_b];
    for (int i = 0; i < m.point_count; ++i) {
      SolverPoint& p = m.points[i];
      // Only points that approached fast enough and actually pushed this step bounce.
      if (p.relative_velocity > -threshold || p.max_normal_impulse == 0) continue;
      const float vn = row_velocity(a, b, m.normal, p.rn_a, p.rn_b);
      const float impulse = -p.normal_mass * (vn + m.restitution * p.relative_velocity);
      const float total = std::max(p.normal_impulse + impulse, 0.0f);
      const float applied = total - p.normal_impulse;
      p.normal_impulse = total;
      p.max_normal_impulse = std::max(p.max_normal_impulse, applied);
      apply_row(a, b, m.normal, p.in_a, p.in_b, applied);
    }
  }
}

}  // namespace

Softness make_softness(float hertz, float zeta, float h) {
  if (hertz == 0) return Softness{0.0f, 1.0f, 0.0f};
  const float omega = kTwoPi * hertz;
  const float a1 = 2.0f * zeta + h * omega;
  const float a2 = h * omega * a1;
  const float a3 = 1.0f / (1.0f + a2);
  return Softness{omega / a1, a2 * a3, a3};
}

void tangent_basis(Vec3 n, Vec3& t0, Vec3& t1) {
  // 0.57735 ~ 1/sqrt(3): a unit vector has at least one component that large, so whichever pair
  // is used, the vector built from it has length >= 1/sqrt(3): no cancellation, no division by ~0.
  const Vec3 b = std::fabs(n.x) >= 0.57735027f ? Vec3{n.y, -n.x, 0.0f} : Vec3{0.0f, n.z, -n.y};
  t0 = b * (1.0f / length(b));
  t1 = cross(n, t0);
}

void prepare_manifolds(std::span<SolverManifold> manifolds, std::span<const SolverBody> bodies,
                       std::span<const Vec3> centers, std::span<const ContactRecord> records,
                       SolverScratch& scratch) {
  scratch.impact.centers = centers;
  size_t point_total = 0;
  for (const SolverManifold& m : manifolds) point_total += records[m.record].point_count;
  scratch.manifold_points.resize(point_total);  // every field is written below
  SolverPoint* next_points = scratch.manifold_points.data();
  for (SolverManifold& m : manifolds) {
    m.points = next_points;
    next_points += records[m.record].point_count;
    const SolverBody& a = bodies[m.body_a];
    const SolverBody& b = bodies[m.body_b];
    const Vec3 ca = centers[m.body_a];
    const Vec3 cb = centers[m.body_b];
    const ContactRecord& rec = records[m.record];
    const Vec3 n = m.normal;
    tangent_basis(n, m.tangent[0], m.tangent[1]);
    m.point_count = rec.point_count;
    for (int i = 0; i < rec.point_count; ++i) {
      const ContactPointState& cp = rec.points[i];
      SolverPoint& p = m.points[i];
      p.anchor_a = cp.point - ca;
      p.anchor_b = cp.point - cb;
      p.base_separation = cp.separation;
      p.rn_a = cross(p.anchor_a, n);
      p.rn_b = cross(p.anchor_b, n);
      p.in_a = a.inv_inertia * p.rn_a;
      p.in_b = b.inv_inertia * p.rn_b;
      p.normal_mass = row_mass(a, b, p.rn_a, p.in_a, p.rn_b, p.in_b);
      for (int k = 0; k < 2; ++k) {
        p.rt_a[k] = cross(p.anchor_a, m.tangent[k]);
        p.rt_b[k] = cross(p.anchor_b, m.tangent[k]);
        p.it_a[k] = a.inv_inertia * p.rt_a[k];
        p.it_b[k] = b.inv_inertia * p.rt_b[k];
        p.tangent_mass[k] = row_mass(a, b, p.rt_a[k], p.it_a[k], p.rt_b[k], p.it_b[k]);
      }
      p.normal_impulse = cp.normal_impulse;
      p.pseudo_impulse = m.recovering ? cp.pseudo_impulse : 0.0f;
      // Last step's friction seen in this step's basis: the part along a turned normal is dropped
      // and the rest stays inside this step's cone.
      p.tangent_impulse[0] = dot(cp.friction_impulse, m.tangent[0]);
      p.tangent_impulse[1] = dot(cp.friction_impulse, m.tangent[1]);
      clamp_to_disc(p.tangent_impulse[0], p.tangent_impulse[1], m.friction * p.normal_impulse);
      p.max_normal_impulse = 0;
      p.relative_velocity = row_velocity(a, b, n, p.rn_a, p.rn_b);
    }
  }
}

void solve_soft_step(std::span<SolverManifold> manifolds, std::span<SolverBody> bodies,
                     std::span<const BodyForces> forces, std::span<ContactRecord> records,
                     const SolverConfig& c, SolverScratch& scratch, std::span<SolverJoint> joints) {
  const int substeps = std::max(c.substeps, 1);
  const float h = c.dt / static_cast<float>(substeps);
  const float inv_h = 1.0f / h;
  // The implicit spring is stable for any stiffness, but above a quarter of the substep rate it
  // stops converging in the few sweeps given (Box2D v3 caps it the same way).
  const float hertz = std::min(c.contact_hertz, 0.25f * inv_h);
  const Softness soft = make_softness(hertz, c.contact_damping_ratio, h);
  const Softness static_soft = make_softness(std::min(2.0f * hertz, 0.25f * inv_h), c.contact_damping_ratio, h);
  const size_t movable = forces.size();

  // Collisions first, before gravity (a resting body must not bounce): the rebound of each
  // impact propagates down chains of touching bodies (restitution.h).
  std::vector<Vec3>& acceleration = scratch.impact.acceleration;
  acceleration.assign(bodies.size(), Vec3{});
  for (size_t i = 0; i < movable; ++i) {
    if (forces[i].dynamic) acceleration[i] = c.gravity + forces[i].linear;
  }
  propagate_restitution(manifolds, bodies, acceleration, c.restitution_threshold, c.dt, c.gravity, kRestitutionSweeps,
                        &scratch.impact);
  // The sweeps run colour by colour, kSolverLanes manifolds at a time, then the manifolds the
  // colouring left over one at a time (solver_wide.h).
  const auto immovable = static_cast<uint32_t>(movable);
  build_wide_contacts(manifolds, immovable, soft, static_soft, c.wide, scratch);
  mark_in_contact(manifolds, bodies, acceleration, c.dt, scratch.in_contact);
  const Softness joint_soft = joint_softness(h);
  auto sweep = [&](bool use_bias) {
    if (!joints.empty()) solve_joints(joints, bodies, joint_soft, h, use_bias);
    solve_wide(scratch, bodies, immovable, inv_h, c.contact_push_max_speed, use_bias);
    for (const uint32_t m : scratch.overflow) {
      solve(manifolds[m], bodies, soft, static_soft, inv_h, c.contact_push_max_speed, use_bias);
    }
  };
  for (int s = 0; s < substeps; ++s) {
    integrate_velocities(bodies, forces, h, c);
    if (!joints.empty()) warm_start_joints(joints, bodies);
    warm_start_wide(scratch, bodies, immovable);
    for (const uint32_t m : scratch.overflow) warm_start(manifolds[m], bodies);
    if (scratch.any_recovering) {
      warm_start_pseudo(scratch, bodies, immovable, manifolds);
      sweep(true);
      integrate_positions<true>(bodies, forces, scratch.in_contact, c.gravity, h);
    } else {
      sweep(true);
      integrate_positions<false>(bodies, forces, scratch.in_contact, c.gravity, h);
    }
    for (int r = 0; r < c.relax_iterations; ++r) sweep(false);
  }
  store_wide_impulses(scratch, manifolds);
  apply_restitution(manifolds, bodies, c.restitution_threshold);

  for (const SolverManifold& m : manifolds) {
    ContactRecord& rec = records[m.record];
    for (int i = 0; i < m.point_count; ++i) {
      const SolverPoint& p = m.points[i];
      rec.points[i].normal_impulse = p.normal_impulse;
      rec.points[i].pseudo_impulse = p.pseudo_impulse;
      rec.points[i].friction_impulse = m.tangent[0] * p.tangent_impulse[0] + m.tangent[1] * p.tangent_impulse[1];
    }
  }
}

}  // namespace impulse::physics
