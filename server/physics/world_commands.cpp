// World's commands: forces, torques, impulses, velocities, kinematic targets, material pairs and
// collision filters. Each validates its own input against the settings (world.h, "Bounds of the
// commands") and answers an Error; nothing here can make a body's state non-finite.
#include <algorithm>
#include <cmath>

#include "server/physics/world.h"
#include "server/physics/world_internal.h"

namespace impulse::physics {

using detail::is_finite_non_negative;
using detail::length_within;
using detail::within;

namespace {

float mix(MixRule rule, float a, float b) {
  switch (rule) {
    case MixRule::GeometricMean: return std::sqrt(a * b);
    case MixRule::Max: return std::max(a, b);
    case MixRule::Min: return std::min(a, b);
    case MixRule::Average: return 0.5f * (a + b);
    case MixRule::Multiply: return a * b;
  }
  return std::sqrt(a * b);
}

// The push rule (settings.h, kMaxPushRate): the step's accumulated force and torque may change the
// body's velocity by at most the speed caps per 1 / kMaxPushRate seconds.
bool push_within(const Motion& m, const Pose& p, Vec3 force, Vec3 torque, const WorldSettings& s) {
  const Mat3 inv_inertia = rotate_diagonal(to_mat3(p.orientation), m.inv_inertia);
  return length_within(force * m.inv_mass, kMaxPushRate * s.max_speed) &&
         length_within(inv_inertia * torque, kMaxPushRate * s.max_angular_speed);
}

}  // namespace

Error World::check_command_target(ObjectID id, uint32_t& dense) const {
  dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind != BodyKind::Dynamic) return Error::NotDynamic;
  return Error::Ok;
}

Error World::apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point) {
  uint32_t dense = 0;
  if (const Error e = check_command_target(id, dense); e != Error::Ok) return e;
  if (!within(force, max_force(settings_))) return Error::InvalidArgument;
  Vec3 torque{};
  if (point) {
    if (!within(*point, settings_.max_coordinate)) return Error::InvalidArgument;
    torque = cross(*point - bodies_.pose[dense].position, force);
    if (!within(torque, max_torque(settings_))) return Error::InvalidArgument;
  }
  Motion& m = bodies_.motion[dense];
  if (!push_within(m, bodies_.pose[dense], m.force + force, m.torque + torque, settings_)) {
    return Error::InvalidArgument;
  }
  m.force += force;
  m.torque += torque;
  wake_body(dense);
  return Error::Ok;
}

Error World::apply_torque(ObjectID id, Vec3 torque) {
  uint32_t dense = 0;
  if (const Error e = check_command_target(id, dense); e != Error::Ok) return e;
  if (!within(torque, max_torque(settings_))) return Error::InvalidArgument;
  Motion& m = bodies_.motion[dense];
  if (!push_within(m, bodies_.pose[dense], m.force, m.torque + torque, settings_)) return Error::InvalidArgument;
  m.torque += torque;
  wake_body(dense);
  return Error::Ok;
}

Error World::apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point) {
  uint32_t dense = 0;
  if (const Error e = check_command_target(id, dense); e != Error::Ok) return e;
  if (!within(impulse, max_impulse(settings_))) return Error::InvalidArgument;
  Motion& m = bodies_.motion[dense];
  const Vec3 velocity = m.velocity + impulse * m.inv_mass;
  if (!length_within(velocity, settings_.max_speed)) return Error::InvalidArgument;
  Vec3 angular_velocity = m.angular_velocity;
  if (point) {
    if (!within(*point, settings_.max_coordinate)) return Error::InvalidArgument;
    const Pose& p = bodies_.pose[dense];
    const Vec3 angular_impulse = cross(*point - p.position, impulse);
    const Mat3 inv_inertia = rotate_diagonal(to_mat3(p.orientation), m.inv_inertia);
    angular_velocity += inv_inertia * angular_impulse;
    if (!length_within(angular_velocity, settings_.max_angular_speed)) return Error::InvalidArgument;
  }
  m.velocity = velocity;
  m.angular_velocity = angular_velocity;
  wake_body(dense);
  return Error::Ok;
}

Error World::set_velocity(ObjectID id, Vec3 velocity) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind == BodyKind::Static) return Error::NotDynamic;
  if (!length_within(velocity, settings_.max_speed)) return Error::InvalidArgument;
  bodies_.motion[dense].velocity = velocity;
  wake_body(dense);
  return Error::Ok;
}

Error World::put_to_sleep(ObjectID id, uint32_t hold_steps) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  BodyInfo& info = bodies_.info[dense];
  if (info.kind == BodyKind::Static) return Error::NotDynamic;
  if (hold_steps > 0) info.held_until = std::max(info.held_until, tick_ + hold_steps);
  if (info.sleeping) return Error::Ok;
  const uint32_t members[1] = {dense};
  sleep_island(members);
  freeze_pending_ = true;  // its contacts with parked bodies freeze at the next step's start
  return Error::Ok;
}

Error World::set_angular_velocity(ObjectID id, Vec3 angular_velocity) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind == BodyKind::Static) return Error::NotDynamic;
  if (!length_within(angular_velocity, settings_.max_angular_speed)) return Error::InvalidArgument;
  bodies_.motion[dense].angular_velocity = angular_velocity;
  wake_body(dense);
  return Error::Ok;
}

Error World::move_kinematic(ObjectID id, Vec3 target_position, Quat target_orientation, float dt) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind != BodyKind::Kinematic) return Error::NotDynamic;
  if (!(std::isfinite(dt) && dt > 0.0f)) return Error::InvalidArgument;
  if (!within(target_position, settings_.max_coordinate)) return Error::InvalidArgument;
  if (!is_finite(target_orientation) ||
      std::fabs(std::sqrt(dot(target_orientation, target_orientation)) - 1.0f) > 1.0e-3f) {
    return Error::InvalidArgument;
  }
  const Pose& pose = bodies_.pose[dense];
  const Vec3 velocity = (target_position - pose.position) * (1.0f / dt);
  // Shortest arc: q and -q are the same rotation; the one with w >= 0 turns by at most pi.
  Quat delta = normalize(target_orientation) * conjugate(pose.orientation);
  if (delta.w < 0.0f) delta = Quat{-delta.x, -delta.y, -delta.z, -delta.w};
  const Vec3 axis_sin{delta.x, delta.y, delta.z};
  const float sin_half = length(axis_sin);
  Vec3 angular_velocity;
  if (sin_half > 0.0f) {
    // Each substep of h turns by 2 atan(|w| h / 2) (integrate_rotation: q + h/2 w q, normalised),
    // so `substeps` of them turn by the delta's angle 2 atan2(sin_half, w) when |w| = (2 / h)
    // tan(half angle / substeps). In double, through the C library (libm gives the same bits to
    // any compiler), then rounded once; a request, not the step.
    const double n = static_cast<double>(settings_.substeps);
    const double h = static_cast<double>(dt) / n;
    const double half_angle = std::atan2(static_cast<double>(sin_half), static_cast<double>(delta.w));
    const double speed = (2.0 / h) * std::tan(half_angle / n);
    angular_velocity = axis_sin * static_cast<float>(speed / static_cast<double>(sin_half));
  }
  if (!length_within(velocity, settings_.max_speed) || !length_within(angular_velocity, settings_.max_angular_speed)) {
    return Error::InvalidArgument;
  }
  Motion& m = bodies_.motion[dense];
  m.velocity = velocity;
  m.angular_velocity = angular_velocity;
  wake_body(dense);
  return Error::Ok;
}

Error World::set_state(ObjectID id, Vec3 position, Quat orientation, Vec3 velocity, Vec3 angular_velocity) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind != BodyKind::Dynamic) return Error::NotDynamic;
  if (!within(position, settings_.max_coordinate) || !length_within(velocity, settings_.max_speed) ||
      !length_within(angular_velocity, settings_.max_angular_speed) || !is_finite(orientation) ||
      std::fabs(std::sqrt(dot(orientation, orientation)) - 1.0f) > 1.0e-3f) {
    return Error::InvalidArgument;
  }
  wake_body(dense);  // first: a parked body leaves the grid at its old place
  Pose& p = bodies_.pose[dense];
  p.position = position;
  p.orientation = normalize(orientation);
  p.aabb = detail::fat_aabb(bodies_.shape[dense], Transform{p.position, p.orientation}, settings_.speculative_margin);
  Motion& m = bodies_.motion[dense];
  m.velocity = velocity;
  m.angular_velocity = angular_velocity;
  return Error::Ok;
}

Error World::set_material_pair(uint16_t a, uint16_t b, const MaterialPair& pair) {
  if (!is_finite_non_negative(pair.friction) || !(pair.restitution >= 0 && pair.restitution <= 1)) {
    return Error::InvalidArgument;
  }
  const uint32_t key = (static_cast<uint32_t>(std::min(a, b)) << 16) | std::max(a, b);
  auto it = std::lower_bound(material_pairs_.begin(), material_pairs_.end(), key,
                             [](const auto& e, uint32_t k) { return e.first < k; });
  if (it != material_pairs_.end() && it->first == key) {
    it->second = pair;
  } else {
    material_pairs_.insert(it, {key, pair});
  }
  return Error::Ok;
}

Error World::set_filter(ObjectID id, const Filter& filter) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  bodies_.info[dense].filter = filter;
  if (bodies_.info[dense].kind != BodyKind::Static) {
    wake_body(dense);
  } else {
    // A static body never wakes, but the sleeping bodies resting on it must be re-collided for
    // a contact the new filter forbids to end (resting contacts are not re-tested while asleep).
    for (size_t i = 0; i < resting_.size(); ++i) {
      const Contact& c = resting_[i].contact;
      if (c.a != id && c.b != id) continue;
      const uint32_t other = slots_.find(c.a == id ? c.b : c.a);
      if (other != SlotMap::kNone) wake_body(other);  // only marks resting_ dirty
    }
  }
  return Error::Ok;
}

MaterialPair World::mix_materials(uint32_t da, uint32_t db) const {
  const Material& a = bodies_.material[da];
  const Material& b = bodies_.material[db];
  if (!material_pairs_.empty()) {
    const uint32_t key = (static_cast<uint32_t>(std::min(a.id, b.id)) << 16) | std::max(a.id, b.id);
    auto it = std::lower_bound(material_pairs_.begin(), material_pairs_.end(), key,
                               [](const auto& e, uint32_t k) { return e.first < k; });
    if (it != material_pairs_.end() && it->first == key) return it->second;
  }
  return MaterialPair{mix(settings_.friction_mix, a.friction, b.friction),
                      mix(settings_.restitution_mix, a.restitution, b.restitution)};
}

}  // namespace impulse::physics
