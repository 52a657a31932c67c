// Joint rows for the soft step (joint.h). Every row has the same shape as a contact row: the
// relative velocity along it (Cdot), with use_bias a soft position bias on its error (C), and an
// impulse -mass_scale * K^-1 (Cdot + bias) - impulse_scale * accumulated, accumulated for warm
// starting (Catto, "Solver2D", 2024; Box2D v3's b2SolveRevoluteJoint and b2SolveDistanceJoint).
// The anchors and axes turn with each body's rotation since the step began (delta_rotation), as
// Box2D v3's joints do with deltaRotation, so one preparation per step serves every substep.
#include "server/physics/joint.h"

#include <algorithm>
#include <cmath>

#include "server/physics/solver.h"

namespace impulse::physics {
namespace {

// Box2D v3's b2DefaultWorldDef: jointHertz 60, jointDampingRatio 2.
constexpr float kJointHertz = 60.0f;
constexpr float kJointDampingRatio = 2.0f;

// The change of the anchors' relative velocity for an impulse x on B at rB and -x on A at rA:
// (1/mA + 1/mB) x + (IA^-1 (rA x x)) x rA + (IB^-1 (rB x x)) x rB.
Vec3 point_response(const SolverBody& a, const SolverBody& b, Vec3 ra, Vec3 rb, Vec3 x) {
  return x * (a.inv_mass + b.inv_mass) + cross(a.inv_inertia * cross(ra, x), ra) +
         cross(b.inv_inertia * cross(rb, x), rb);
}

// x with (c0 c1 c2) x = rhs, by Cramer's rule; zero when the matrix is singular (both bodies
// immovable along some direction: nothing to solve there).
Vec3 solve3(Vec3 c0, Vec3 c1, Vec3 c2, Vec3 rhs) {
  const Vec3 c12 = cross(c1, c2);
  const float det = dot(c0, c12);
  if (!(std::fabs(det) > 1e-30f)) return Vec3{};
  const float inv = 1.0f / det;
  return Vec3{dot(rhs, c12) * inv, dot(c0, cross(rhs, c2)) * inv, dot(c0, cross(c1, rhs)) * inv};
}

void apply_linear(SolverBody& a, SolverBody& b, Vec3 ra, Vec3 rb, Vec3 p) {
  a.velocity = a.velocity - p * a.inv_mass;
  a.angular_velocity = a.angular_velocity - a.inv_inertia * cross(ra, p);
  b.velocity = b.velocity + p * b.inv_mass;
  b.angular_velocity = b.angular_velocity + b.inv_inertia * cross(rb, p);
}

void apply_angular(SolverBody& a, SolverBody& b, Vec3 l) {
  a.angular_velocity = a.angular_velocity - a.inv_inertia * l;
  b.angular_velocity = b.angular_velocity + b.inv_inertia * l;
}

Vec3 anchor_velocity(const SolverBody& body, Vec3 r) { return body.velocity + cross(body.angular_velocity, r); }

// B's anchor minus A's, now [m].
Vec3 separation(const SolverJoint& j, const SolverBody& a, const SolverBody& b, Vec3 ra, Vec3 rb) {
  return (b.delta_position - a.delta_position) + (rb - ra) + j.delta_center;
}

struct Rows {  // what one sweep applies to a row block: bias factor, mass scale, impulse scale
  float bias_rate = 0, mass_scale = 1, impulse_scale = 0;
};
Rows rows_of(const Softness& soft, bool use_bias) {
  return use_bias ? Rows{soft.bias_rate, soft.mass_scale, soft.impulse_scale} : Rows{};
}

// One limit row (Box2D v3's joint limits): `room` >= 0 is how far the limit is, `rate` how fast
// it closes (negative closing); `mass` the row's effective mass. While there is room the row only
// stops the approach within the substep (speculative); past the limit it pushes back softly
// (with use_bias). Returns the impulse to apply along the row, keeping *accumulated >= 0.
float limit_impulse(float room, float rate, float mass, const Softness& soft, bool use_bias, float h,
                    float* accumulated) {
  Rows rows;
  if (room <= 0 && use_bias) rows = rows_of(soft, true);
  const float bias = room > 0 ? room / h : room * rows.bias_rate;
  const float lambda = -rows.mass_scale * mass * (rate + bias) - rows.impulse_scale * *accumulated;
  const float total = std::max(*accumulated + lambda, 0.0f);
  const float applied = total - *accumulated;
  *accumulated = total;
  return applied;
}

// The hinge's accumulated impulse about its axis: spring, motor and limits together.
float hinge_axial_impulse(const SolverJoint& j) {
  return j.axial_impulse + j.motor_impulse + j.lower_impulse - j.upper_impulse;
}

// The point block: the anchors coincide (three rows, solved together).
void solve_point(SolverJoint& j, SolverBody& a, SolverBody& b, Vec3 ra, Vec3 rb, Rows rows) {
  const Vec3 cdot = anchor_velocity(b, rb) - anchor_velocity(a, ra);
  const Vec3 bias = separation(j, a, b, ra, rb) * rows.bias_rate;
  const Vec3 x = solve3(point_response(a, b, ra, rb, {1, 0, 0}), point_response(a, b, ra, rb, {0, 1, 0}),
                        point_response(a, b, ra, rb, {0, 0, 1}), cdot + bias);
  const Vec3 p = x * -rows.mass_scale - j.linear_impulse * rows.impulse_scale;
  j.linear_impulse = j.linear_impulse + p;
  apply_linear(a, b, ra, rb, p);
}

// The hinge's two angular rows: C_k = a . b_k for A's axis a and B's perpendiculars b_k, whose
// rate is (wB - wA) . (b_k x a) (Jolt's HingeRotationConstraintPart).
void hinge_rows(const SolverJoint& j, const SolverBody& a, const SolverBody& b, Vec3* u0, Vec3* u1, float* c0,
                float* c1) {
  const Vec3 axis = rotate(a.delta_rotation, j.axis_a);
  const Vec3 p0 = rotate(b.delta_rotation, j.perp_b[0]);
  const Vec3 p1 = rotate(b.delta_rotation, j.perp_b[1]);
  *u0 = cross(p0, axis);
  *u1 = cross(p1, axis);
  *c0 = dot(axis, p0);
  *c1 = dot(axis, p1);
}

void solve_hinge_angular(SolverJoint& j, SolverBody& a, SolverBody& b, Rows rows) {
  Vec3 u0, u1;
  float c0, c1;
  hinge_rows(j, a, b, &u0, &u1, &c0, &c1);
  const Vec3 w = b.angular_velocity - a.angular_velocity;
  const Vec3 iu0 = a.inv_inertia * u0 + b.inv_inertia * u0;
  const Vec3 iu1 = a.inv_inertia * u1 + b.inv_inertia * u1;
  const float k00 = dot(u0, iu0), k01 = dot(u0, iu1), k11 = dot(u1, iu1);
  const float det = k00 * k11 - k01 * k01;
  if (!(det > 1e-30f)) return;
  const float r0 = dot(w, u0) + c0 * rows.bias_rate;
  const float r1 = dot(w, u1) + c1 * rows.bias_rate;
  const float inv = 1.0f / det;
  const float l0 = -rows.mass_scale * (k11 * r0 - k01 * r1) * inv - rows.impulse_scale * j.angular_impulse.x;
  const float l1 = -rows.mass_scale * (k00 * r1 - k01 * r0) * inv - rows.impulse_scale * j.angular_impulse.y;
  j.angular_impulse.x += l0;
  j.angular_impulse.y += l1;
  apply_angular(a, b, u0 * l0 + u1 * l1);
}

// B's angle relative to A about the hinge axis [rad], in (-pi, pi]: between the two reference
// perpendiculars, turned by each body's rotation since the step began.
float hinge_angle(const SolverJoint& j, const SolverBody& a, const SolverBody& b, Vec3 axis) {
  const Vec3 ra = rotate(a.delta_rotation, j.ref_a);
  const Vec3 rb = rotate(b.delta_rotation, j.ref_b);
  return std::atan2(dot(cross(ra, rb), axis), dot(ra, rb));
}

// The spring, motor and limit rows along one direction, on its coordinate x (a hinge's angle, a
// slider's translation) with effective mass `mass`, in Box2D v3's revolute and prismatic order:
// spring, motor, then the limits (each speculative while it has room). rate() is x's rate now;
// push(l) applies the impulse l along the direction.
template <class Rate, class Push>
void solve_axial_rows(SolverJoint& j, float x, float mass, const Softness& soft, float h, bool use_bias, Rate rate,
                      Push push) {
  if (j.spring) {
    const Softness spring = make_softness(j.spring_hertz, j.spring_damping_ratio, h);
    const float lambda = -spring.mass_scale * mass * (rate() + (x - j.spring_target) * spring.bias_rate) -
                         spring.impulse_scale * j.axial_impulse;
    j.axial_impulse += lambda;
    push(lambda);
  }
  if (j.enable_motor) {
    // Velocity motor: the rate to motor_speed. Position motor: a soft row towards the target
    // (Jolt's position motor). Both within the motor's torque or force.
    const float most = j.max_motor * h;
    float want = -mass * (rate() - j.motor_speed);
    if (j.position_motor) {
      const Softness drive = make_softness(kPositionMotorHertz, kPositionMotorDampingRatio, h);
      want = -drive.mass_scale * mass * (rate() + (x - j.motor_target) * drive.bias_rate) -
             drive.impulse_scale * j.motor_impulse;
    }
    const float total = std::clamp(j.motor_impulse + want, -most, most);
    push(total - j.motor_impulse);
    j.motor_impulse = total;
  }
  if (j.enable_limit) {
    push(limit_impulse(x - j.lower, rate(), mass, soft, use_bias, h, &j.lower_impulse));
    push(-limit_impulse(j.upper - x, -rate(), mass, soft, use_bias, h, &j.upper_impulse));
  }
}

// The hinge's axial rows, on the rate of its angle (wB - wA) . axis.
void solve_hinge_axial(SolverJoint& j, SolverBody& a, SolverBody& b, const Softness& soft, float h, bool use_bias) {
  if (!j.spring && !j.enable_motor && !j.enable_limit) return;
  const Vec3 axis = rotate(a.delta_rotation, j.axis_a);
  const float k = dot(axis, a.inv_inertia * axis + b.inv_inertia * axis);
  if (!(k > 0)) return;
  solve_axial_rows(
      j, hinge_angle(j, a, b, axis), 1.0f / k, soft, h, use_bias,
      [&] { return dot(b.angular_velocity - a.angular_velocity, axis); },
      [&](float lambda) { apply_angular(a, b, axis * lambda); });
}

// The weld's three angular rows: the rotation from where B should be to where it is, as the
// vector part of q_B q_target^-1 doubled (small-angle), with rate wB - wA.
void solve_fixed_angular(SolverJoint& j, SolverBody& a, SolverBody& b, Rows rows) {
  const Quat target = a.delta_rotation * j.target;
  const Quat now = b.delta_rotation * j.orientation_b;
  Quat e = now * conjugate(target);
  if (e.w < 0) e = Quat{-e.x, -e.y, -e.z, -e.w};
  const Vec3 c{2.0f * e.x, 2.0f * e.y, 2.0f * e.z};
  const Vec3 w = b.angular_velocity - a.angular_velocity;
  auto response = [&](Vec3 x) { return a.inv_inertia * x + b.inv_inertia * x; };
  const Vec3 x = solve3(response({1, 0, 0}), response({0, 1, 0}), response({0, 0, 1}), w + c * rows.bias_rate);
  const Vec3 l = x * -rows.mass_scale - j.angular_impulse * rows.impulse_scale;
  j.angular_impulse = j.angular_impulse + l;
  apply_angular(a, b, l);
}

// The distance joint along the anchors' line: rigid, or a spring plus a lower and an upper limit
// (Box2D v3's b2SolveDistanceJoint: a limit with room left only stops the approach within the
// substep; the spring acts in the relax sweeps too, it is physical).
void solve_distance(SolverJoint& j, SolverBody& a, SolverBody& b, Vec3 ra, Vec3 rb, const Softness& soft, float h,
                    bool use_bias) {
  const Vec3 d = separation(j, a, b, ra, rb);
  const float len = length(d);
  if (!(len > 1e-6f)) return;  // coincident anchors: no direction to act along
  const Vec3 n = d * (1.0f / len);
  const Vec3 ran = cross(ra, n), rbn = cross(rb, n);
  const float k = a.inv_mass + b.inv_mass + dot(ran, a.inv_inertia * ran) + dot(rbn, b.inv_inertia * rbn);
  if (!(k > 0)) return;
  const float mass = 1.0f / k;
  auto cdot = [&] { return dot(n, anchor_velocity(b, rb) - anchor_velocity(a, ra)); };
  if (j.rigid) {
    const Rows rows = rows_of(soft, use_bias);
    const float lambda = -rows.mass_scale * mass * (cdot() + (len - j.length) * rows.bias_rate) -
                         rows.impulse_scale * j.axial_impulse;
    j.axial_impulse += lambda;
    apply_linear(a, b, ra, rb, n * lambda);
    return;
  }
  if (j.spring) {
    const Softness spring = make_softness(j.spring_hertz, j.spring_damping_ratio, h);
    const float lambda = -spring.mass_scale * mass * (cdot() + (len - j.length) * spring.bias_rate) -
                         spring.impulse_scale * j.axial_impulse;
    j.axial_impulse += lambda;
    apply_linear(a, b, ra, rb, n * lambda);
  }
  const float lower = limit_impulse(len - j.min_length, cdot(), mass, soft, use_bias, h, &j.lower_impulse);
  apply_linear(a, b, ra, rb, n * lower);
  const float upper = limit_impulse(j.max_length - len, -cdot(), mass, soft, use_bias, h, &j.upper_impulse);
  apply_linear(a, b, ra, rb, n * -upper);
}

// The slider's frame at this point of the substep: A's axis and two perpendiculars, the
// translation d (B's anchor minus A's) and A's lever ra + d (the axis turns with A, so A's side of
// every translation row acts at B's anchor).
struct SliderFrame {
  Vec3 axis, n0, n1, d, lever_a;
};
SliderFrame slider_frame(const SolverJoint& j, const SolverBody& a, const SolverBody& b, Vec3 ra, Vec3 rb) {
  SliderFrame f;
  f.axis = rotate(a.delta_rotation, j.axis_a);
  tangent_basis(f.axis, f.n0, f.n1);
  f.d = separation(j, a, b, ra, rb);
  f.lever_a = ra + f.d;
  return f;
}

// The response of the anchors' relative velocity along n to a unit impulse along m.
float slider_k(const SolverBody& a, const SolverBody& b, Vec3 la, Vec3 rb, Vec3 n, Vec3 m) {
  return dot(n, m) * (a.inv_mass + b.inv_mass) + dot(cross(la, n), a.inv_inertia * cross(la, m)) +
         dot(cross(rb, n), b.inv_inertia * cross(rb, m));
}

// The slider's axial rows, on x = axis . d and its rate.
void solve_slider_axial(SolverJoint& j, SolverBody& a, SolverBody& b, Vec3 ra, Vec3 rb, const Softness& soft, float h,
                        bool use_bias) {
  if (!j.spring && !j.enable_motor && !j.enable_limit) return;
  const SliderFrame f = slider_frame(j, a, b, ra, rb);
  const float k = slider_k(a, b, f.lever_a, rb, f.axis, f.axis);
  if (!(k > 0)) return;
  solve_axial_rows(
      j, dot(f.axis, f.d), 1.0f / k, soft, h, use_bias,
      [&] { return dot(f.axis, anchor_velocity(b, rb) - anchor_velocity(a, f.lever_a)); },
      [&](float lambda) { apply_linear(a, b, f.lever_a, rb, f.axis * lambda); });
}

// The slider's two rows across the axis: d . n_k = 0, solved together (2x2).
void solve_slider_across(SolverJoint& j, SolverBody& a, SolverBody& b, Vec3 ra, Vec3 rb, Rows rows) {
  const SliderFrame f = slider_frame(j, a, b, ra, rb);
  const float k00 = slider_k(a, b, f.lever_a, rb, f.n0, f.n0);
  const float k01 = slider_k(a, b, f.lever_a, rb, f.n0, f.n1);
  const float k11 = slider_k(a, b, f.lever_a, rb, f.n1, f.n1);
  const float det = k00 * k11 - k01 * k01;
  if (!(det > 1e-30f)) return;
  const Vec3 v = anchor_velocity(b, rb) - anchor_velocity(a, f.lever_a);
  const float r0 = dot(f.n0, v) + dot(f.n0, f.d) * rows.bias_rate;
  const float r1 = dot(f.n1, v) + dot(f.n1, f.d) * rows.bias_rate;
  const float inv = 1.0f / det;
  const float l0 = -rows.mass_scale * (k11 * r0 - k01 * r1) * inv - rows.impulse_scale * j.linear_impulse.x;
  const float l1 = -rows.mass_scale * (k00 * r1 - k01 * r0) * inv - rows.impulse_scale * j.linear_impulse.y;
  j.linear_impulse.x += l0;
  j.linear_impulse.y += l1;
  apply_linear(a, b, f.lever_a, rb, f.n0 * l0 + f.n1 * l1);
}

// The swing-twist's rows (Box3D's spherical joint; Jolt's SwingTwistConstraint): friction on the
// relative spin (three rows, their impulse kept within friction * h), the cone limit on the swing
// angle between A's and B's twist axes, then the twist range about their mean.
struct SwingTwistFrame {
  Vec3 a, b;          // the twist axes now, world frame
  Vec3 swing_axis;    // (a x b) / |a x b|: the swing angle grows turning B about it; zero when aligned
  float swing = 0;    // the angle between a and b [rad]
  Vec3 twist_axis;    // normalize(a + b)
  float twist = 0;    // B's turn about its twist axis relative to A since creation [rad], in (-pi, pi]
};
SwingTwistFrame swing_twist_frame(const SolverJoint& j, const SolverBody& a, const SolverBody& b) {
  SwingTwistFrame f;
  f.a = rotate(a.delta_rotation, j.axis_a);
  f.b = rotate(b.delta_rotation, j.axis_b);
  const Vec3 c = cross(f.a, f.b);
  const float s = length(c);
  f.swing = std::atan2(s, dot(f.a, f.b));
  f.swing_axis = s > 1e-6f ? c * (1.0f / s) : Vec3{};
  const Vec3 mean = f.a + f.b;
  const float m = length(mean);
  f.twist_axis = m > 1e-6f ? mean * (1.0f / m) : f.a;
  // B's rotation from its rest pose relative to A, in B's frame; its twist about B's axis.
  const Quat rest = a.delta_rotation * j.target;
  Quat q = conjugate(rest) * (b.delta_rotation * j.orientation_b);
  if (q.w < 0) q = Quat{-q.x, -q.y, -q.z, -q.w};
  f.twist = 2.0f * std::atan2(dot(Vec3{q.x, q.y, q.z}, j.ref_b), q.w);
  return f;
}

float angular_mass(const SolverBody& a, const SolverBody& b, Vec3 n) {
  const float k = dot(n, a.inv_inertia * n + b.inv_inertia * n);
  return k > 0 ? 1.0f / k : 0.0f;
}

void solve_swing_twist(SolverJoint& j, SolverBody& a, SolverBody& b, const Softness& soft, float h, bool use_bias) {
  if (j.max_motor > 0) {
    const Vec3 w = b.angular_velocity - a.angular_velocity;
    auto response = [&](Vec3 x) { return a.inv_inertia * x + b.inv_inertia * x; };
    const Vec3 want = solve3(response({1, 0, 0}), response({0, 1, 0}), response({0, 0, 1}), w) * -1.0f;
    Vec3 total = j.angular_impulse + want;
    const float most = j.max_motor * h;
    const float size = length(total);
    if (size > most) total = total * (most / size);
    apply_angular(a, b, total - j.angular_impulse);
    j.angular_impulse = total;
  }
  if (!j.enable_limit) return;
  const SwingTwistFrame f = swing_twist_frame(j, a, b);
  if (f.swing_axis != Vec3{}) {
    const float mass = angular_mass(a, b, f.swing_axis);
    const float rate = dot(b.angular_velocity - a.angular_velocity, f.swing_axis);
    const float cone = limit_impulse(j.cone - f.swing, -rate, mass, soft, use_bias, h, &j.axial_impulse);
    apply_angular(a, b, f.swing_axis * -cone);
  }
  const float mass = angular_mass(a, b, f.twist_axis);
  auto rate = [&] { return dot(b.angular_velocity - a.angular_velocity, f.twist_axis); };
  const float lower = limit_impulse(f.twist - j.lower, rate(), mass, soft, use_bias, h, &j.lower_impulse);
  apply_angular(a, b, f.twist_axis * lower);
  const float upper = limit_impulse(j.upper - f.twist, -rate(), mass, soft, use_bias, h, &j.upper_impulse);
  apply_angular(a, b, f.twist_axis * -upper);
}

}  // namespace

void joint_reaction(const SolverJoint& j, float h, float* force, float* torque) {
  const float inv_h = 1.0f / h;
  switch (j.kind) {
    case JointKind::Point:
      *force = length(j.linear_impulse) * inv_h;
      *torque = 0;
      break;
    case JointKind::Hinge: {
      // The two perpendicular rows and the axial ones are orthogonal directions (near the hinge's
      // alignment), so the torque's size is their root sum of squares.
      const float axial = hinge_axial_impulse(j);
      *force = length(j.linear_impulse) * inv_h;
      *torque = std::sqrt(j.angular_impulse.x * j.angular_impulse.x + j.angular_impulse.y * j.angular_impulse.y +
                          axial * axial) * inv_h;
      break;
    }
    case JointKind::Fixed:
      *force = length(j.linear_impulse) * inv_h;
      *torque = length(j.angular_impulse) * inv_h;
      break;
    case JointKind::Distance:
      *force = std::fabs(j.axial_impulse + j.lower_impulse - j.upper_impulse) * inv_h;
      *torque = 0;
      break;
    case JointKind::SwingTwist: {
      const float twist = j.lower_impulse - j.upper_impulse;
      *force = length(j.linear_impulse) * inv_h;
      *torque = std::sqrt(dot(j.angular_impulse, j.angular_impulse) + j.axial_impulse * j.axial_impulse +
                          twist * twist) * inv_h;
      break;
    }
    case JointKind::Slider: {
      const float axial = hinge_axial_impulse(j);  // the same sum along the axis
      *force = std::sqrt(j.linear_impulse.x * j.linear_impulse.x + j.linear_impulse.y * j.linear_impulse.y +
                         axial * axial) * inv_h;
      *torque = length(j.angular_impulse) * inv_h;
      break;
    }
  }
}

Softness joint_softness(float h) { return make_softness(std::min(kJointHertz, 0.25f / h), kJointDampingRatio, h); }

void warm_start_joints(std::span<const SolverJoint> joints, std::span<SolverBody> bodies) {
  for (const SolverJoint& j : joints) {
    SolverBody& a = bodies[j.body_a];
    SolverBody& b = bodies[j.body_b];
    const Vec3 ra = rotate(a.delta_rotation, j.anchor_a);
    const Vec3 rb = rotate(b.delta_rotation, j.anchor_b);
    switch (j.kind) {
      case JointKind::Point:
        apply_linear(a, b, ra, rb, j.linear_impulse);
        break;
      case JointKind::Hinge: {
        apply_linear(a, b, ra, rb, j.linear_impulse);
        Vec3 u0, u1;
        float c0, c1;
        hinge_rows(j, a, b, &u0, &u1, &c0, &c1);
        const Vec3 axis = rotate(a.delta_rotation, j.axis_a);
        apply_angular(a, b, u0 * j.angular_impulse.x + u1 * j.angular_impulse.y + axis * hinge_axial_impulse(j));
        break;
      }
      case JointKind::Fixed:
        apply_linear(a, b, ra, rb, j.linear_impulse);
        apply_angular(a, b, j.angular_impulse);
        break;
      case JointKind::Distance: {
        const Vec3 d = separation(j, a, b, ra, rb);
        const float len = length(d);
        if (!(len > 1e-6f)) break;
        const float total = j.axial_impulse + j.lower_impulse - j.upper_impulse;
        apply_linear(a, b, ra, rb, d * (total / len));
        break;
      }
      case JointKind::SwingTwist: {
        apply_linear(a, b, ra, rb, j.linear_impulse);
        const SwingTwistFrame f = swing_twist_frame(j, a, b);
        apply_angular(a, b, j.angular_impulse - f.swing_axis * j.axial_impulse +
                                f.twist_axis * (j.lower_impulse - j.upper_impulse));
        break;
      }
      case JointKind::Slider: {
        const SliderFrame f = slider_frame(j, a, b, ra, rb);
        apply_linear(a, b, f.lever_a, rb,
                     f.n0 * j.linear_impulse.x + f.n1 * j.linear_impulse.y + f.axis * hinge_axial_impulse(j));
        apply_angular(a, b, j.angular_impulse);
        break;
      }
    }
  }
}

void solve_joints(std::span<SolverJoint> joints, std::span<SolverBody> bodies, const Softness& soft, float h,
                  bool use_bias) {
  const Rows rows = rows_of(soft, use_bias);
  for (SolverJoint& j : joints) {
    SolverBody& a = bodies[j.body_a];
    SolverBody& b = bodies[j.body_b];
    const Vec3 ra = rotate(a.delta_rotation, j.anchor_a);
    const Vec3 rb = rotate(b.delta_rotation, j.anchor_b);
    switch (j.kind) {
      case JointKind::Point:
        solve_point(j, a, b, ra, rb, rows);
        break;
      case JointKind::Hinge:
        // Spring, motor and limits, the axis rows, then the point (Box2D v3's revolute order: the
        // point last, it matters most).
        solve_hinge_axial(j, a, b, soft, h, use_bias);
        solve_hinge_angular(j, a, b, rows);
        solve_point(j, a, b, ra, rb, rows);
        break;
      case JointKind::Fixed:
        solve_fixed_angular(j, a, b, rows);
        solve_point(j, a, b, ra, rb, rows);
        break;
      case JointKind::Distance:
        solve_distance(j, a, b, ra, rb, soft, h, use_bias);
        break;
      case JointKind::SwingTwist:
        solve_swing_twist(j, a, b, soft, h, use_bias);
        solve_point(j, a, b, ra, rb, rows);
        break;
      case JointKind::Slider:
        // Box2D v3's prismatic order: spring, motor and limits, then the rows that hold it.
        solve_slider_axial(j, a, b, ra, rb, soft, h, use_bias);
        solve_fixed_angular(j, a, b, rows);
        solve_slider_across(j, a, b, ra, rb, rows);
        break;
    }
  }
}

}  // namespace impulse::physics
