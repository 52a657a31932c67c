// World's joints (joint.h): creation and validation, destruction (with either body), the pair
// filter for jointed bodies that must not collide, and each step's preparation for the solver.
#include <algorithm>
#include <cmath>

#include "server/physics/world.h"
#include "server/physics/world_internal.h"

namespace impulse::physics {

using detail::within;
using detail::is_finite_non_negative;

namespace {

std::pair<uint64_t, uint64_t> pair_key(ObjectID a, ObjectID b) {
  const uint64_t x = to_wire(a), y = to_wire(b);
  return x < y ? std::pair{x, y} : std::pair{y, x};
}

}  // namespace

World::JointResult World::create_joint(const JointDesc& desc) {
  JointResult result;
  const uint32_t da = slots_.find(desc.body_a);
  const uint32_t db = desc.body_b.is_null() ? SlotMap::kNone : slots_.find(desc.body_b);
  if (da == SlotMap::kNone || (!desc.body_b.is_null() && db == SlotMap::kNone)) {
    result.error = Error::StaleId;
    return result;
  }
  result.error = Error::InvalidArgument;
  if (desc.body_a == desc.body_b) return result;
  const bool a_dynamic = bodies_.info[da].kind == BodyKind::Dynamic;
  const bool b_dynamic = db != SlotMap::kNone && bodies_.info[db].kind == BodyKind::Dynamic;
  if (!a_dynamic && !b_dynamic) return result;
  const float bound = settings_.max_coordinate;
  if (!within(desc.anchor, bound)) return result;
  if (!is_finite_non_negative(desc.break_force) || !is_finite_non_negative(desc.break_torque)) return result;
  if (!is_finite_non_negative(desc.spring_hertz) || !is_finite_non_negative(desc.spring_damping_ratio)) return result;

  JointRecord j;
  j.kind = desc.kind;
  j.a = desc.body_a;
  j.b = desc.body_b;
  j.collide_connected = desc.collide_connected;
  j.break_force = desc.break_force;
  j.break_torque = desc.break_torque;
  const Pose& pa = bodies_.pose[da];
  const Quat qa = pa.orientation;
  const Quat qb = db != SlotMap::kNone ? bodies_.pose[db].orientation : Quat{};
  // A body's point in its own frame; the world's in the world frame.
  auto local_b = [&](Vec3 world) {
    return db != SlotMap::kNone ? inverse_rotate(qb, world - bodies_.pose[db].position) : world;
  };
  j.local_a = inverse_rotate(qa, desc.anchor - pa.position);
  j.local_b = local_b(desc.anchor);
  switch (desc.kind) {
    case JointKind::Point:
      break;
    case JointKind::Hinge: {
      const float len = is_finite(desc.axis) ? length(desc.axis) : 0.0f;
      if (!(len > 1e-6f)) return result;
      const Vec3 axis = desc.axis * (1.0f / len);
      j.axis_a = inverse_rotate(qa, axis);
      j.axis_b = inverse_rotate(qb, axis);
      Vec3 ref, unused;
      tangent_basis(axis, ref, unused);
      j.ref_a = inverse_rotate(qa, ref);
      j.ref_b = inverse_rotate(qb, ref);
      auto angle = [&](float x) { return std::isfinite(x) && std::fabs(x) <= kMaxHingeAngle; };
      if (desc.enable_limit && !(angle(desc.lower_angle) && angle(desc.upper_angle) && desc.lower_angle <= desc.upper_angle)) {
        return result;
      }
      if (desc.enable_motor && !(std::isfinite(desc.motor_speed) && std::fabs(desc.motor_speed) <= settings_.max_angular_speed &&
                                 is_finite_non_negative(desc.max_motor_torque))) {
        return result;
      }
      if (!angle(desc.target_angle) || (desc.position_motor && !angle(desc.motor_target_angle))) return result;
      j.enable_limit = desc.enable_limit;
      j.lower = desc.enable_limit ? desc.lower_angle : 0.0f;
      j.upper = desc.enable_limit ? desc.upper_angle : 0.0f;
      j.enable_motor = desc.enable_motor;
      j.motor_speed = desc.enable_motor ? desc.motor_speed : 0.0f;
      j.max_motor = desc.enable_motor ? desc.max_motor_torque : 0.0f;
      j.position_motor = desc.enable_motor && desc.position_motor;
      j.motor_target = j.position_motor ? desc.motor_target_angle : 0.0f;
      j.spring_hertz = desc.spring_hertz;
      j.spring_damping_ratio = desc.spring_damping_ratio;
      j.spring_target = desc.target_angle;
      break;
    }
    case JointKind::Fixed:
      j.relative = normalize(conjugate(qa) * qb);
      break;
    case JointKind::SwingTwist: {
      const float len = is_finite(desc.axis) ? length(desc.axis) : 0.0f;
      if (!(len > 1e-6f)) return result;
      auto angle = [&](float x) { return std::isfinite(x) && std::fabs(x) <= kMaxHingeAngle; };
      if (desc.enable_limit && !(angle(desc.cone_angle) && desc.cone_angle >= 0.0f && angle(desc.lower_angle) &&
                                 angle(desc.upper_angle) && desc.lower_angle <= desc.upper_angle)) {
        return result;
      }
      if (!is_finite_non_negative(desc.friction_torque)) return result;
      const Vec3 axis = desc.axis * (1.0f / len);
      j.axis_a = inverse_rotate(qa, axis);
      j.axis_b = inverse_rotate(qb, axis);
      j.relative = normalize(conjugate(qa) * qb);  // the twist's zero
      j.enable_limit = desc.enable_limit;
      j.cone = desc.enable_limit ? desc.cone_angle : 0.0f;
      j.lower = desc.enable_limit ? desc.lower_angle : 0.0f;
      j.upper = desc.enable_limit ? desc.upper_angle : 0.0f;
      j.max_motor = desc.friction_torque;
      break;
    }
    case JointKind::Slider: {
      const float len = is_finite(desc.axis) ? length(desc.axis) : 0.0f;
      if (!(len > 1e-6f)) return result;
      const auto within_bound = [&](float x) { return std::isfinite(x) && std::fabs(x) <= bound; };
      if (desc.enable_limit && !(within_bound(desc.lower_translation) && within_bound(desc.upper_translation) &&
                                 desc.lower_translation <= desc.upper_translation)) {
        return result;
      }
      if (desc.enable_motor && !(std::isfinite(desc.motor_speed) && std::fabs(desc.motor_speed) <= settings_.max_speed &&
                                 is_finite_non_negative(desc.max_motor_force))) {
        return result;
      }
      if (!within_bound(desc.target_translation) || (desc.position_motor && !within_bound(desc.motor_target_translation))) {
        return result;
      }
      j.axis_a = inverse_rotate(qa, desc.axis * (1.0f / len));
      j.relative = normalize(conjugate(qa) * qb);
      // The rows act at a dynamic body's centre (B's, else A's) rather than at the anchor: with
      // the rotation locked every point of B slides along a parallel line, and at the centre the
      // rows across the axis do not turn the body, so they do not fight the angular rows (at the
      // anchor, 1.5 m off B's centre under gravity, Gauss-Seidel left 1.2 cm/s between them).
      const Vec3 at = b_dynamic ? bodies_.pose[db].position : pa.position;
      j.local_a = inverse_rotate(qa, at - pa.position);
      j.local_b = local_b(at);
      j.enable_limit = desc.enable_limit;
      j.lower = desc.enable_limit ? desc.lower_translation : 0.0f;
      j.upper = desc.enable_limit ? desc.upper_translation : 0.0f;
      j.enable_motor = desc.enable_motor;
      j.position_motor = desc.enable_motor && desc.position_motor;
      j.motor_speed = desc.enable_motor && !j.position_motor ? desc.motor_speed : 0.0f;
      j.max_motor = desc.enable_motor ? desc.max_motor_force : 0.0f;
      j.motor_target = j.position_motor ? desc.motor_target_translation : 0.0f;
      j.spring_hertz = desc.spring_hertz;
      j.spring_damping_ratio = desc.spring_damping_ratio;
      j.spring_target = desc.target_translation;
      break;
    }
    case JointKind::Distance: {
      if (!within(desc.anchor_b, bound)) return result;
      if (!is_finite_non_negative(desc.min_length) || !is_finite_non_negative(desc.max_length) ||
          desc.min_length > desc.max_length || desc.max_length > 2.0f * bound) {
        return result;
      }
      const float now = length(desc.anchor_b - desc.anchor);
      if (!(now > 1e-6f)) return result;  // no direction to act along
      j.local_b = local_b(desc.anchor_b);
      const bool fixed_length = desc.min_length == 0.0f && desc.max_length == 0.0f;
      j.min_length = fixed_length ? now : desc.min_length;
      j.max_length = fixed_length ? now : desc.max_length;
      j.length = std::clamp(now, j.min_length, j.max_length);
      j.spring_hertz = desc.spring_hertz;
      j.spring_damping_ratio = desc.spring_damping_ratio;
      break;
    }
    default:
      return result;
  }

  uint32_t slot;
  if (!free_joints_.empty()) {
    slot = free_joints_.back();
    free_joints_.pop_back();
    ++joints_[slot].generation;
  } else {
    slot = static_cast<uint32_t>(joints_.size());
    joints_.push_back(JointSlot{});
    joints_[slot].generation = 1;
  }
  joints_[slot].joint = j;
  joints_[slot].live = true;
  ++live_joints_;
  // Jointed bodies sleep and wake together: a sleeping one wakes (with its island).
  if (bodies_.info[da].sleeping) wake_body(da);
  if (db != SlotMap::kNone && bodies_.info[db].sleeping) wake_body(db);
  if (!j.collide_connected && !j.b.is_null()) rebuild_joint_filter();
  invalidate_queries();
  result.id = ObjectID{slot, joints_[slot].generation};
  result.error = Error::Ok;
  return result;
}

Error World::destroy_joint(ObjectID joint) { return remove_joint(joint, JointRemoval::Destroyed); }

Error World::set_joint_motor(ObjectID joint, const JointMotor& motor) {
  if (joint.index >= joints_.size() || !joints_[joint.index].live || joints_[joint.index].generation != joint.generation) {
    return Error::StaleId;
  }
  JointRecord& j = joints_[joint.index].joint;
  if (j.kind != JointKind::Hinge && j.kind != JointKind::Slider) return Error::InvalidArgument;
  const bool slider = j.kind == JointKind::Slider;
  const float most_speed = slider ? settings_.max_speed : settings_.max_angular_speed;
  const float most_target = slider ? settings_.max_coordinate : kMaxHingeAngle;
  if (motor.enable && !(std::isfinite(motor.speed) && std::fabs(motor.speed) <= most_speed &&
                        is_finite_non_negative(motor.max_force) && std::isfinite(motor.target) &&
                        std::fabs(motor.target) <= most_target)) {
    return Error::InvalidArgument;
  }
  const bool position = motor.enable && motor.position;
  if (j.enable_motor != motor.enable || j.position_motor != position) j.motor_impulse = 0.0f;
  j.enable_motor = motor.enable;
  j.position_motor = position;
  j.motor_speed = motor.enable && !position ? motor.speed : 0.0f;
  j.motor_target = position ? motor.target : 0.0f;
  j.max_motor = motor.enable ? motor.max_force : 0.0f;
  for (const ObjectID body : {j.a, j.b}) {
    const uint32_t d = body.is_null() ? SlotMap::kNone : slots_.find(body);
    if (d != SlotMap::kNone && bodies_.info[d].sleeping) wake_body(d);
  }
  return Error::Ok;
}

Error World::remove_joint(ObjectID joint, JointRemoval reason) {
  if (joint.index >= joints_.size() || !joints_[joint.index].live || joints_[joint.index].generation != joint.generation) {
    return Error::StaleId;
  }
  JointSlot& slot = joints_[joint.index];
  joint_removals_.push_back(RemovedJoint{joint, slot.joint.a, slot.joint.b, reason});
  slot.live = false;
  --live_joints_;
  free_joints_.push_back(joint.index);
  for (const ObjectID body : {slot.joint.a, slot.joint.b}) {
    const uint32_t d = body.is_null() ? SlotMap::kNone : slots_.find(body);
    if (d != SlotMap::kNone && bodies_.info[d].sleeping) wake_body(d);
  }
  rebuild_joint_filter();
  return Error::Ok;
}

void World::break_joints() {
  broken_joints_.clear();
  if (breaking_.empty()) return;
  std::sort(breaking_.begin(), breaking_.end(),
            [](const BrokenJoint& x, const BrokenJoint& y) { return x.joint.index < y.joint.index; });
  for (const BrokenJoint& b : breaking_) {
    if (remove_joint(b.joint, JointRemoval::Broken) == Error::Ok) broken_joints_.push_back(b);
  }
  breaking_.clear();
}

std::optional<JointRecord> World::get_joint(ObjectID joint) const {
  if (joint.index >= joints_.size() || !joints_[joint.index].live || joints_[joint.index].generation != joint.generation) {
    return std::nullopt;
  }
  return joints_[joint.index].joint;
}

void World::destroy_joints_of(ObjectID body) {
  for (uint32_t k = 0; k < joints_.size(); ++k) {
    const JointSlot& slot = joints_[k];
    if (slot.live && (slot.joint.a == body || slot.joint.b == body)) {
      remove_joint(ObjectID{k, slot.generation}, JointRemoval::BodyGone);
    }
  }
}

void World::rebuild_joint_filter() {
  no_collide_pairs_.clear();
  for (const JointSlot& slot : joints_) {
    if (slot.live && !slot.joint.collide_connected && !slot.joint.b.is_null()) {
      no_collide_pairs_.push_back(pair_key(slot.joint.a, slot.joint.b));
    }
  }
  std::sort(no_collide_pairs_.begin(), no_collide_pairs_.end());
}

bool World::jointed_without_collision(ObjectID a, ObjectID b) const {
  return std::binary_search(no_collide_pairs_.begin(), no_collide_pairs_.end(), pair_key(a, b));
}

uint32_t World::joint_solver_index(ObjectID body, uint32_t movable) const {
  if (body.is_null()) return movable;
  const uint32_t d = slots_.find(body);
  return is_parked(d) ? movable : scratch_.solver_index[d];
}

SolverJoint World::prepare_joint(uint32_t record, uint32_t ia, uint32_t ib) const {
  const JointRecord& j = joints_[record].joint;
  SolverJoint s;
  s.kind = j.kind;
  s.body_a = ia;
  s.body_b = ib;
  s.record = record;
  const Pose& pa = bodies_.pose[slots_.find(j.a)];
  Vec3 center_b;
  Quat qb;
  if (!j.b.is_null()) {
    const Pose& pb = bodies_.pose[slots_.find(j.b)];
    center_b = pb.position;
    qb = pb.orientation;
  }
  s.anchor_a = rotate(pa.orientation, j.local_a);
  s.anchor_b = rotate(qb, j.local_b);  // the world's anchor as it is, about the origin
  s.delta_center = center_b - pa.position;
  if (j.kind == JointKind::SwingTwist) {
    s.axis_a = rotate(pa.orientation, j.axis_a);
    s.axis_b = rotate(qb, j.axis_b);
    s.ref_b = j.axis_b;  // the twist axis in B's frame
    s.orientation_a = pa.orientation;
    s.enable_limit = j.enable_limit;
    s.cone = j.cone;
    s.lower = j.lower;
    s.upper = j.upper;
    s.max_motor = j.max_motor;
  }
  if (j.kind == JointKind::Hinge || j.kind == JointKind::Slider) {
    s.axis_a = rotate(pa.orientation, j.axis_a);
    if (j.kind == JointKind::Hinge) {
      tangent_basis(rotate(qb, j.axis_b), s.perp_b[0], s.perp_b[1]);
      s.ref_a = rotate(pa.orientation, j.ref_a);
      s.ref_b = rotate(qb, j.ref_b);
    }
    s.enable_limit = j.enable_limit;
    s.enable_motor = j.enable_motor;
    s.lower = j.lower;
    s.upper = j.upper;
    s.motor_speed = j.motor_speed;
    s.max_motor = j.max_motor;
    s.position_motor = j.position_motor;
    s.motor_target = j.motor_target;
    s.spring_target = j.spring_target;
  }
  s.target = pa.orientation * j.relative;
  s.orientation_b = qb;
  s.length = j.length;
  s.min_length = j.min_length;
  s.max_length = j.max_length;
  s.rigid = j.kind == JointKind::Distance && j.min_length == j.max_length;
  s.spring = j.spring_hertz > 0.0f;
  s.spring_hertz = j.spring_hertz;
  s.spring_damping_ratio = j.spring_damping_ratio;
  s.linear_impulse = j.linear_impulse;
  s.angular_impulse = j.angular_impulse;
  s.axial_impulse = j.axial_impulse;
  s.lower_impulse = j.lower_impulse;
  s.upper_impulse = j.upper_impulse;
  s.motor_impulse = j.motor_impulse;
  return s;
}

}  // namespace impulse::physics
