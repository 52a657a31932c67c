// Joints: constraints between two bodies (or a body and the static world), solved by the contact
// solver's soft step in the same substeps (solver.h): prepared once a step, warm-started, solved
// with a soft position bias, then relaxed without it. The rows follow Box2D v3's joints (Catto,
// "Solver2D", 2024, and box2d/src/*_joint.c) carried to 3D: a point row block with the 3x3
// effective mass solved directly, the hinge's two angular rows of Jolt's
// HingeRotationConstraintPart (axis on A against two perpendiculars on B), the weld's three
// angular rows on the relative rotation error, the distance joint's spring and limit rows, and
// the slider's (Box2D v3's b2SolvePrismaticJoint in 3D): the weld's angular rows, two rows across
// A's axis, and the axial spring, motor and limits; and the swing-twist's point, cone and twist
// rows and its friction (Box3D's spherical joint; Jolt's SwingTwistConstraint).
// Soft joint stiffness: 60 Hz and damping ratio 2, at most a quarter of the substep rate (Box2D
// v3's jointHertz and jointDampingRatio, and its cap).
#pragma once

#include <cstdint>
#include <span>

#include "server/physics/types.h"
#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse::physics {

struct SolverBody;  // solver.h
struct Softness;    // solver.h

enum class JointKind : uint8_t {
  Point,     ///< ball and socket: the two anchors stay together, any rotation
  Hinge,     ///< revolute: a point, and the bodies turn only about one shared axis
  Distance,  ///< the anchors stay between min_length and max_length apart, with an optional spring
  Fixed,     ///< weld: neither relative translation nor rotation
  Slider,    ///< prismatic: B slides along one axis of A, no relative rotation
  SwingTwist,  ///< a point with a cone limit on the swing and a range on the twist (ragdoll joints)
};

/// What World::create_joint takes. Anchors and the axis are given in the world frame at creation;
/// the joint keeps them in each body's frame, so the bodies' poses at creation are the joint's
/// rest pose.
struct JointDesc {
  JointKind kind = JointKind::Point;
  ObjectID body_a;  ///< a live body
  ObjectID body_b;  ///< a live body, or null: attached to the static world at the anchor. One of the two is dynamic
  /// The joint point [m], world frame: shared by both bodies (Point, Hinge, Fixed), or A's end of
  /// the rod (Distance).
  Vec3 anchor;
  Vec3 anchor_b;  ///< Distance only: B's end [m], world frame
  Vec3 axis{0, 1, 0};  ///< Hinge: the turning axis; Slider: the sliding axis; world frame, normalised (length > 1e-6)
  /// Distance only [m]: the allowed range of |anchor_b - anchor|, 0 <= min <= max. Both 0 (the
  /// default): rigid at the length at creation.
  float min_length = 0;
  float max_length = 0;
  /// Distance only: a spring towards the length at creation, within [min_length, max_length],
  /// of this frequency [Hz] (>= 0; 0 = no spring: rigid, or free between the limits when they
  /// differ) and damping ratio (>= 0).
  float spring_hertz = 0;
  float spring_damping_ratio = 0;
  /// Hinge only: B's angle relative to A about the axis [rad], right-handed, 0 at creation (with B
  /// the world: minus A's angle, as for Box2D's revolute joint on a ground body B). With
  /// enable_limit it stays within [lower_angle, upper_angle], -0.99 pi <= lower <= upper <= 0.99 pi
  /// (the angle wraps at pi; Box2D's bound).
  bool enable_limit = false;
  float lower_angle = 0;
  float upper_angle = 0;
  /// Hinge only: a velocity motor driving the angle's rate to motor_speed [rad/s] (|speed| <=
  /// WorldSettings::max_angular_speed) with at most max_motor_torque [N·m] (>= 0).
  bool enable_motor = false;
  float motor_speed = 0;
  float max_motor_torque = 0;
  /// Hinge only: with enable_motor, a position motor instead: it drives the angle to
  /// motor_target_angle [rad] (in [-0.99 pi, 0.99 pi]) as a 2 Hz spring with damping ratio 1 (Jolt's
  /// MotorSettings defaults), with at most max_motor_torque; motor_speed is then unused.
  bool position_motor = false;
  float motor_target_angle = 0;
  /// Hinge only: with spring_hertz > 0 (and spring_damping_ratio) above, a torsion spring pulls
  /// the angle towards target_angle [rad], in [-0.99 pi, 0.99 pi]. Its frequency is on the row's inertia,
  /// the bodies' about their centres (Box2D's revolute spring): a body hinged off its centre
  /// swings slower, by sqrt(I_centre / I_axis).
  float target_angle = 0;
  /// Slider only: B's anchor's offset from A's along the axis [m] (the translation, 0 at
  /// creation). With enable_limit it stays within [lower_translation, upper_translation]
  /// (lower <= upper, each |x| <= WorldSettings::max_coordinate). enable_motor drives it at
  /// motor_speed [m/s] (<= WorldSettings::max_speed), or with position_motor to
  /// motor_target_translation, with at most max_motor_force [N]; spring_hertz > 0 adds a spring
  /// towards target_translation (Box2D's prismatic joint; Jolt's SliderConstraint). Friction
  /// along the axis is a velocity motor at motor_speed 0 with max_motor_force the friction force
  /// [N]: it only ever holds back (Jolt's mMaxFrictionForce; Box2D's motor-as-friction).
  float lower_translation = 0;
  float upper_translation = 0;
  float max_motor_force = 0;
  float motor_target_translation = 0;
  float target_translation = 0;
  /// SwingTwist only: `axis` is the twist axis (world frame, fixed in each body at creation).
  /// With enable_limit, the swing (the angle between A's and B's twist axes) stays within
  /// cone_angle [rad] in [0, 0.99 pi], and the twist (B's turn about it relative to A, 0 at
  /// creation) within [lower_angle, upper_angle]. friction_torque [N·m] >= 0 resists any relative
  /// turn up to that torque (a ragdoll's joints that do not flop).
  float cone_angle = 0;
  float friction_torque = 0;
  /// Breakable: the joint breaks (is destroyed at the end of the step, and reported by
  /// World::broken_joints) when its reaction force passes break_force [N] or its reaction torque
  /// break_torque [N·m] (Box3D's forceThreshold and torqueThreshold). 0 = never. >= 0.
  float break_force = 0;
  float break_torque = 0;
  /// Whether the two bodies still collide with each other (Box2D's collideConnected; off by
  /// default, as in Box2D and Jolt).
  bool collide_connected = false;
};

/// A hinge motor's settings (JointDesc's enable_motor, position_motor, motor_speed,
/// motor_target_angle and max_motor_torque), for World::set_joint_motor.
struct JointMotor {
  bool enable = false;
  bool position = false;  ///< drive the angle (translation) to target, else its rate to speed
  float speed = 0;        ///< Hinge [rad/s], |speed| <= WorldSettings::max_angular_speed; Slider [m/s], <= max_speed
  float target = 0;       ///< Hinge [rad], in [-0.99 pi, 0.99 pi]; Slider [m], |target| <= max_coordinate
  float max_force = 0;    ///< the most the motor applies, >= 0: a torque [N·m] on a hinge, a force [N] on a slider
};

/// [rad] The bound of hinge limits and targets: 0.99 pi, as Box2D's revolute limits (the angle
/// wraps at pi).
inline constexpr float kMaxHingeAngle = 0.99f * 3.14159265358979f;

/// The position motor's spring: 2 Hz, damping ratio 1 (Jolt's MotorSettings defaults).
inline constexpr float kPositionMotorHertz = 2.0f;
inline constexpr float kPositionMotorDampingRatio = 1.0f;

/// Why a joint left the world (World::joint_removals).
enum class JointRemoval : uint8_t {
  Destroyed,  ///< World::destroy_joint
  Broken,     ///< past its break_force or break_torque (World::broken_joints)
  BodyGone,   ///< one of its bodies was destroyed or removed
};

/// A joint that left the world, and why.
struct RemovedJoint {
  ObjectID joint;
  ObjectID a, b;
  JointRemoval reason = JointRemoval::Destroyed;
};

/// A joint that broke in the last step: its force and torque at the last substep [N], [N·m].
struct BrokenJoint {
  ObjectID joint;
  ObjectID a, b;
  float force = 0;
  float torque = 0;
};

/// One joint as the World stores it (and its warm-start impulses). Frames: local_* in each body's
/// frame relative to its centre of mass, or the world frame for a null body.
struct JointRecord {
  JointKind kind = JointKind::Point;
  ObjectID a, b;
  Vec3 local_a, local_b;    ///< anchors [m]
  Vec3 axis_a, axis_b;      ///< Hinge: the axis in each body's frame (unit); Slider: axis_a
  Quat relative;            ///< Fixed, Slider: B's orientation in A's frame at creation (qA^-1 qB)
  float length = 0;         ///< Distance: the rest length at creation [m]
  float min_length = 0, max_length = 0;
  float spring_hertz = 0, spring_damping_ratio = 0;
  bool collide_connected = false;
  // Hinge: a perpendicular of the axis in each body's frame (the same world vector at creation:
  // the angle is measured between them), the limit, motor and spring of JointDesc.
  Vec3 ref_a, ref_b;
  // Hinge: angles [rad] and torque [N·m]; Slider: translations [m] and force [N].
  bool enable_limit = false, enable_motor = false;
  float lower = 0, upper = 0, motor_speed = 0, max_motor = 0, spring_target = 0;
  float break_force = 0, break_torque = 0;  ///< JointDesc's
  bool position_motor = false;
  float motor_target = 0;
  float cone = 0;  ///< SwingTwist: the cone angle [rad]; its friction torque is max_motor [N·m]
  // Accumulated impulses of the last step, for warm starting [N·s], [N·m·s].
  Vec3 linear_impulse;      ///< point block, world frame; Slider: (across row 1, row 2, unused)
  Vec3 angular_impulse;     ///< Fixed, Slider: world frame; Hinge: (row 1, row 2, unused)
  float axial_impulse = 0;  ///< Distance: rigid or spring row; Hinge, Slider: spring
  float lower_impulse = 0, upper_impulse = 0;  ///< Distance, Hinge and Slider limits (each >= 0)
  float motor_impulse = 0;  ///< Hinge and Slider motor
};

/// A joint's slot in the World: ids are (slot, generation); a destroyed joint's slot is reused.
struct JointSlot {
  JointRecord joint;
  uint32_t generation = 0;  ///< of the live joint, or of the last one when free
  bool live = false;
};

/// A joint prepared for one step. Bodies index the solver-body array (the immovable one for a
/// static, sleeping or absent body).
struct SolverJoint {
  JointKind kind = JointKind::Point;
  uint32_t body_a = 0, body_b = 0;
  uint32_t record = 0;
  Vec3 anchor_a, anchor_b;  ///< anchor minus centre at step start, world frame [m]
  Vec3 delta_center;        ///< B's centre minus A's at step start [m]
  Vec3 axis_a;              ///< Hinge, Slider: A's axis at step start, world frame
  Vec3 perp_b[2];           ///< Hinge: two unit perpendiculars of B's axis at step start, world frame
  Quat target;              ///< Fixed, Slider: A's orientation at step start times JointRecord::relative
  Quat orientation_b;       ///< Fixed, Slider: B's orientation at step start
  float length = 0, min_length = 0, max_length = 0;
  bool rigid = false;       ///< Distance: min == max, one row
  bool spring = false;      ///< Distance, Hinge, Slider: spring_hertz > 0
  float spring_hertz = 0, spring_damping_ratio = 0;
  Vec3 ref_a, ref_b;        ///< Hinge: the angle's reference perpendiculars at step start, world frame;
                            ///< SwingTwist: ref_b is the twist axis in B's frame
  bool enable_limit = false, enable_motor = false, position_motor = false;
  float lower = 0, upper = 0, motor_speed = 0, max_motor = 0, spring_target = 0;  ///< as JointRecord's
  float motor_target = 0, cone = 0;
  Vec3 axis_b;              ///< SwingTwist: B's twist axis at step start, world frame
  Quat orientation_a;       ///< SwingTwist: A's orientation at step start (the twist's reference)
  Vec3 linear_impulse, angular_impulse;
  float axial_impulse = 0, lower_impulse = 0, upper_impulse = 0, motor_impulse = 0;
};

/// The joint's reaction at the last substep of length h: force [N] and torque [N·m] that its rows
/// applied to B (the accumulated impulses over h; the point's lever arm not counted as torque).
void joint_reaction(const SolverJoint& j, float h, float* force, float* torque);

/// The joints' softness for substep length h: 60 Hz and damping ratio 2, at most h^-1 / 4.
Softness joint_softness(float h);

/// Applies each joint's accumulated impulses at the start of a substep, in joint order.
void warm_start_joints(std::span<const SolverJoint> joints, std::span<SolverBody> bodies);

/// One Gauss-Seidel sweep over the joints in order. With use_bias the rows push their position
/// error out softly (soft); without it (relax) they only remove relative velocity along them.
/// `h` is the substep [s]. The distance spring acts in both.
void solve_joints(std::span<SolverJoint> joints, std::span<SolverBody> bodies, const Softness& soft, float h,
                  bool use_bias);

}  // namespace impulse::physics
