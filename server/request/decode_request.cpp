// One decoder per request type, each after the same pattern: the fields every request has, the
// range check, then the payload.
#include "server/request/decode_request.h"

#include <array>

#include "shared/wire/messages.h"

namespace impulse::server {

namespace {

using wire::Message;

// The wire's range limits (shared/wire/codec.h) are the world's default limits, so a request that
// passes wire::check_request is not refused by the World for a range the wire could see. The wire
// layer cannot see physics (docs/ARCHITECTURE.md, "Layers"); this layer sees both and ties them.
constexpr physics::WorldSettings kWorldDefaults{};
static_assert(wire::kMaxExtent == kWorldDefaults.max_extent);
static_assert(wire::kMinExtent == physics::kMinExtent);
static_assert(wire::kMaxCoordinate == kWorldDefaults.max_coordinate);
static_assert(wire::kMaxSpeed == kWorldDefaults.max_speed);
static_assert(wire::kMaxMass == kWorldDefaults.max_mass);
static_assert(wire::kMaxAngularSpeed == kWorldDefaults.max_angular_speed);
// World::apply_force accepts up to max_force() = max_mass * max_speed * kMaxPushRate, torques that
// times max_extent, impulses up to max_mass * max_speed (server/physics/world.cpp); the wire is no
// looser. (The World also bounds each push by what it does to its body: settings.h.)
static_assert(wire::kMaxForce <= kWorldDefaults.max_mass * kWorldDefaults.max_speed * physics::kMaxPushRate);
static_assert(wire::kMaxImpulse <= kWorldDefaults.max_mass * kWorldDefaults.max_speed);
static_assert(wire::kMaxJointAngle == physics::kMaxHingeAngle);
static_assert(wire::kMaxAngularSpeed <= kWorldDefaults.max_angular_speed);  // a hinge motor's speed
static_assert(wire::kMaxTorque <=
              kWorldDefaults.max_mass * kWorldDefaults.max_speed * physics::kMaxPushRate * kWorldDefaults.max_extent);

physics::Shape to_shape(wire::ShapeKind kind, const wire::Vec3* wire_dims) {
  const Vec3 dims = wire_dims ? wire::to_vec3(*wire_dims) : Vec3{};  // only a plane may lack dims
  switch (kind) {
    case wire::ShapeKind::Sphere: return physics::make_sphere(dims.x);
    case wire::ShapeKind::Box: return physics::make_box(dims);
    case wire::ShapeKind::Capsule: return physics::make_capsule(dims.x, dims.y);
    case wire::ShapeKind::Cylinder: return physics::make_cylinder(dims.x, dims.y);
    case wire::ShapeKind::Plane: return physics::make_plane();
    case wire::ShapeKind::Hull:  // refused by check_request: world assets
    case wire::ShapeKind::Mesh:
    case wire::ShapeKind::HeightField: break;
  }
  return physics::make_sphere(dims.x);  // unreachable: check_request admits known kinds only
}

using Decoder = void (*)(const wire::Envelope&, const DecodeContext&, DecodedRequest&);

void decode_create(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_CreateObject();
  d.request.request_id = m->request_id();
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  d.request.desc = to_body_desc(*m);
  d.request.shared = m->shared();
}

void decode_destroy(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_DestroyObject();
  d.request.request_id = m->request_id();
  d.request.id = from_wire(m->id());
}

/// A push: an addressed object, one vector, and for forces and impulses an optional point.
template <class M, const wire::Vec3* (M::*Vector)() const>
void decode_push(const M* m, DecodedRequest& d) {
  d.request.request_id = m->request_id();
  d.request.id = from_wire(m->id());
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  d.request.vector = wire::to_vec3(*(m->*Vector)());
  if constexpr (requires { m->point(); }) d.request.point = wire::to_optional_vec3(m->point());
}

void decode_force(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  decode_push<wire::ApplyForce, &wire::ApplyForce::force>(e.message_as_ApplyForce(), d);
}
void decode_impulse(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  decode_push<wire::ApplyImpulse, &wire::ApplyImpulse::impulse>(e.message_as_ApplyImpulse(), d);
}
void decode_velocity(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  decode_push<wire::SetVelocity, &wire::SetVelocity::velocity>(e.message_as_SetVelocity(), d);
}
void decode_torque(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  decode_push<wire::ApplyTorque, &wire::ApplyTorque::torque>(e.message_as_ApplyTorque(), d);
}
void decode_angular_velocity(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  decode_push<wire::SetAngularVelocity, &wire::SetAngularVelocity::angular_velocity>(
      e.message_as_SetAngularVelocity(), d);
}

// Any bit pattern is a valid filter (physics::Filter), so there is nothing to range-check.
void decode_filter(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_SetFilter();
  d.request.request_id = m->request_id();
  d.request.id = from_wire(m->id());
  d.request.filter = physics::Filter{m->category(), m->mask(), m->group()};
}

void decode_move_kinematic(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_MoveKinematic();
  d.request.request_id = m->request_id();
  d.request.id = from_wire(m->id());
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  d.request.vector = wire::to_vec3(*m->position());
  d.request.orientation = m->orientation() ? normalize(wire::to_quat(*m->orientation())) : Quat{};
}

void decode_set_state(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_SetState();
  d.request.request_id = m->request_id();
  d.request.id = from_wire(m->id());
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  d.request.vector = wire::to_vec3(*m->position());
  d.request.orientation = normalize(wire::to_quat(*m->orientation()));
  d.request.state_velocity = m->velocity() ? wire::to_vec3(*m->velocity()) : Vec3{};
  d.request.state_angular_velocity = m->angular_velocity() ? wire::to_vec3(*m->angular_velocity()) : Vec3{};
}

void decode_create_joint(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_CreateJoint();
  d.request.request_id = m->request_id();
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  physics::JointDesc& j = d.request.joint;
  j.kind = static_cast<physics::JointKind>(m->kind());
  j.body_a = from_wire(m->body_a());
  j.body_b = from_wire(m->body_b());
  j.anchor = wire::to_vec3(*m->anchor());
  j.anchor_b = m->anchor_b() ? wire::to_vec3(*m->anchor_b()) : j.anchor;
  if (m->axis()) j.axis = wire::to_vec3(*m->axis());
  j.min_length = m->min_length();
  j.max_length = m->max_length();
  j.spring_hertz = m->spring_hertz();
  j.spring_damping_ratio = m->spring_damping_ratio();
  j.enable_limit = m->enable_limit();
  j.lower_angle = m->lower_angle();
  j.upper_angle = m->upper_angle();
  j.enable_motor = m->motor_mode() != wire::JointMotorMode::Off;
  j.position_motor = m->motor_mode() == wire::JointMotorMode::Position;
  j.motor_speed = m->motor_speed();
  j.max_motor_torque = m->max_motor_torque();
  j.target_angle = m->target_angle();
  j.motor_target_angle = m->motor_target_angle();
  j.break_force = m->break_force();
  j.break_torque = m->break_torque();
  j.collide_connected = m->collide_connected();
  j.lower_translation = m->lower_translation();
  j.upper_translation = m->upper_translation();
  j.max_motor_force = m->max_motor_force();
  j.target_translation = m->target_translation();
  j.motor_target_translation = m->motor_target_translation();
  j.cone_angle = m->cone_angle();
  j.friction_torque = m->friction_torque();
}

void decode_destroy_joint(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_DestroyJoint();
  d.request.request_id = m->request_id();
  d.request.id = from_wire(m->id());
}

void decode_set_joint_motor(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_SetJointMotor();
  d.request.request_id = m->request_id();
  d.request.id = from_wire(m->id());
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  d.request.motor = physics::JointMotor{m->mode() != wire::JointMotorMode::Off,
                                        m->mode() == wire::JointMotorMode::Position, m->speed(), m->target(),
                                        m->max_force()};
}

void decode_raycast(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_Raycast();
  d.request.request_id = m->request_id();
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  d.request.vector = wire::to_vec3(*m->origin());
  d.request.translation = wire::to_vec3(*m->translation());
  d.request.all_hits = m->all();
  if (const wire::QueryFilter* f = m->filter()) d.request.query_filter = physics::QueryFilter{f->category(), f->mask()};
  d.request.back_faces = m->back_faces();
  d.request.seen_tick = m->seen_tick();
  d.request.seen_fraction = m->seen_fraction();
}

void decode_interest(const wire::Envelope& e, const DecodeContext&, DecodedRequest& d) {
  const auto* m = e.message_as_SetInterest();
  d.request.request_id = m->request_id();
  d.check = wire::check_request(*m);
  if (!d.check.ok()) return;
  wire::InterestArgs& a = d.request.interest;
  a.kind = m->kind();
  if (m->center()) a.center = wire::to_vec3(*m->center());
  a.radius = m->radius();
  if (m->min()) a.min = wire::to_vec3(*m->min());
  if (m->max()) a.max = wire::to_vec3(*m->max());
}

void decode_replay_control(const wire::Envelope& e, const DecodeContext& context, DecodedRequest& d) {
  const auto* m = e.message_as_ReplayControl();
  d.request.request_id = m->request_id();
  if (!context.replay_ticks) {
    d.check = {wire::ResultCode::NotAReplay,
               "this server is live, not playing a recording: ReplayControl is only for impulse-replay serve"};
    return;
  }
  d.check = wire::check_request(*m, context.replay_ticks->first, context.replay_ticks->second);
  if (!d.check.ok()) return;
  d.request.replay_action = m->action();
  d.request.replay_tick = m->tick();
  d.request.replay_speed = m->speed();
}

constexpr std::array<Decoder, wire::kMessageTypeCount> make_decoders() {
  std::array<Decoder, wire::kMessageTypeCount> t{};
  t[static_cast<size_t>(Message::CreateObject)] = decode_create;
  t[static_cast<size_t>(Message::DestroyObject)] = decode_destroy;
  t[static_cast<size_t>(Message::ApplyForce)] = decode_force;
  t[static_cast<size_t>(Message::ApplyImpulse)] = decode_impulse;
  t[static_cast<size_t>(Message::SetVelocity)] = decode_velocity;
  t[static_cast<size_t>(Message::ApplyTorque)] = decode_torque;
  t[static_cast<size_t>(Message::SetAngularVelocity)] = decode_angular_velocity;
  t[static_cast<size_t>(Message::Raycast)] = decode_raycast;
  t[static_cast<size_t>(Message::SetInterest)] = decode_interest;
  t[static_cast<size_t>(Message::ReplayControl)] = decode_replay_control;
  t[static_cast<size_t>(Message::SetFilter)] = decode_filter;
  t[static_cast<size_t>(Message::MoveKinematic)] = decode_move_kinematic;
  t[static_cast<size_t>(Message::SetState)] = decode_set_state;
  t[static_cast<size_t>(Message::CreateJoint)] = decode_create_joint;
  t[static_cast<size_t>(Message::DestroyJoint)] = decode_destroy_joint;
  t[static_cast<size_t>(Message::SetJointMotor)] = decode_set_joint_motor;
  return t;
}
constexpr std::array<Decoder, wire::kMessageTypeCount> kDecoders = make_decoders();

/// Every request row of wire::kMessageRules has a decoder, and nothing else has one.
constexpr bool decoders_match_rules() {
  for (size_t i = 0; i < wire::kMessageTypeCount; ++i) {
    const bool request = wire::kMessageRules[i].kind == wire::ClientMessageKind::Request;
    if (request != (kDecoders[i] != nullptr)) return false;
  }
  return true;
}
static_assert(decoders_match_rules(), "each request type in wire::kMessageRules needs a decoder here");

}  // namespace

bool decode_request(const wire::Envelope& envelope, const DecodeContext& context, DecodedRequest* out) {
  const Decoder decode = kDecoders[static_cast<size_t>(wire::rule_of(envelope.message_type()).type)];
  if (decode == nullptr) return false;
  *out = DecodedRequest{};
  out->request.type = envelope.message_type();
  // Only world-changing requests are held for a tick; on any other type the field means nothing.
  if (wire::changes_world(out->request.type)) out->request.apply_tick = envelope.apply_tick();
  decode(envelope, context, *out);
  return true;
}

physics::BodyDesc to_body_desc(const wire::CreateObject& m) {
  physics::BodyDesc desc;
  desc.kind = static_cast<physics::BodyKind>(m.kind());
  desc.shape = to_shape(m.shape(), m.dims());
  desc.position = m.position() ? wire::to_vec3(*m.position()) : Vec3{};
  // Within 1e-3 of unit length (checked); normalised here so the World gets an exact rotation.
  desc.orientation = m.orientation() ? normalize(wire::to_quat(*m.orientation())) : Quat{};
  desc.velocity = m.velocity() ? wire::to_vec3(*m.velocity()) : Vec3{};
  desc.angular_velocity = m.angular_velocity() ? wire::to_vec3(*m.angular_velocity()) : Vec3{};
  desc.mass = m.mass();
  desc.restitution = m.restitution();
  desc.friction = m.friction();
  desc.angular_damping = m.angular_damping();
  desc.material = m.material();
  desc.sensor = m.sensor();
  desc.asleep = m.asleep();
  desc.bullet = m.bullet();
  desc.filter = physics::Filter{m.category(), m.mask(), m.group()};
  return desc;
}

}  // namespace impulse::server
