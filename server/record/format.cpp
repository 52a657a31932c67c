// Frame encoders and struct conversions of the recording format (schemas/recording.fbs).
#include "server/record/format.h"

#include <fmt/format.h>

#include "shared/wire/codec.h"

namespace impulse::record {
namespace {

record::Vec3 rec(const impulse::Vec3& v) { return record::Vec3(v.x, v.y, v.z); }
record::Quat rec(const impulse::Quat& q) { return record::Quat(q.x, q.y, q.z, q.w); }
impulse::Vec3 phys(const record::Vec3& v) { return {v.x(), v.y(), v.z()}; }
impulse::Quat phys(const record::Quat& q) { return {q.x(), q.y(), q.z(), q.w()}; }

std::span<const uint8_t> finish(flatbuffers::FlatBufferBuilder& fbb, Payload type, flatbuffers::Offset<void> payload) {
  const auto frame = CreateFrame(fbb, type, payload);
  FinishSizePrefixedFrameBuffer(fbb, frame);
  return {fbb.GetBufferPointer(), fbb.GetSize()};
}

}  // namespace

record::WorldSettings to_record(const physics::WorldSettings& s) {
  return record::WorldSettings(rec(s.gravity), s.cell_size, s.max_cells_per_body, s.speculative_margin, s.substeps,
                               s.relax_iterations, s.contact_hertz, s.contact_damping_ratio,
                               s.contact_push_max_speed, s.linear_slop, s.restitution_threshold, s.sleep_speed,
                               s.sleep_time_s, s.max_coordinate, s.max_speed, s.max_angular_speed, s.max_extent,
                               s.max_mass, s.max_objects, static_cast<uint8_t>(s.friction_mix),
                               static_cast<uint8_t>(s.restitution_mix), s.allow_sleep);
}

physics::WorldSettings to_physics(const record::WorldSettings& r) {
  physics::WorldSettings s;
  s.gravity = phys(r.gravity());
  s.cell_size = r.cell_size();
  s.max_cells_per_body = r.max_cells_per_body();
  s.speculative_margin = r.speculative_margin();
  s.substeps = r.substeps();
  s.relax_iterations = r.relax_iterations();
  s.contact_hertz = r.contact_hertz();
  s.contact_damping_ratio = r.contact_damping_ratio();
  s.contact_push_max_speed = r.contact_push_max_speed();
  s.linear_slop = r.linear_slop();
  s.restitution_threshold = r.restitution_threshold();
  s.sleep_speed = r.sleep_speed();
  s.sleep_time_s = r.sleep_time_s();
  s.max_coordinate = r.max_coordinate();
  s.max_speed = r.max_speed();
  s.max_angular_speed = r.max_angular_speed();
  s.max_extent = r.max_extent();
  s.max_mass = r.max_mass();
  s.max_objects = r.max_objects();
  s.friction_mix = static_cast<physics::MixRule>(r.friction_mix());
  s.restitution_mix = static_cast<physics::MixRule>(r.restitution_mix());
  s.allow_sleep = r.allow_sleep();
  return s;
}

record::BodyDesc to_record(const physics::BodyDesc& d) {
  return record::BodyDesc(rec(d.position), rec(d.orientation), rec(d.velocity), rec(d.angular_velocity),
                          rec(d.shape.half_extents), d.shape.radius, d.shape.half_height, d.mass, d.restitution,
                          d.friction, d.linear_damping, d.angular_damping, d.material, static_cast<uint8_t>(d.kind),
                          static_cast<uint8_t>(d.shape.kind),
                          static_cast<uint8_t>((d.sensor ? 1u : 0u) | (d.asleep ? 2u : 0u) | (d.bullet ? 4u : 0u)));
}

physics::BodyDesc to_physics(const record::BodyDesc& r) {
  physics::BodyDesc d;
  d.kind = static_cast<physics::BodyKind>(r.kind());
  d.shape.kind = static_cast<physics::ShapeKind>(r.shape());
  d.shape.radius = r.radius();
  d.shape.half_extents = phys(r.half_extents());
  d.shape.half_height = r.half_height();
  d.position = phys(r.position());
  d.orientation = phys(r.orientation());
  d.velocity = phys(r.velocity());
  d.angular_velocity = phys(r.angular_velocity());
  d.mass = r.mass();
  d.restitution = r.restitution();
  d.friction = r.friction();
  d.linear_damping = r.linear_damping();
  d.angular_damping = r.angular_damping();
  d.material = r.material();
  d.sensor = (r.flags() & 1u) != 0;
  d.asleep = (r.flags() & 2u) != 0;
  d.bullet = (r.flags() & 4u) != 0;
  return d;
}

record::JointDesc to_record(const physics::JointDesc& j, const physics::JointMotor& motor, bool is_motor) {
  if (is_motor) {
    const uint8_t flags = static_cast<uint8_t>((motor.enable ? 2u : 0u) | (motor.position ? 4u : 0u));
    // The motor in the motor fields: speed, max_force in max_motor_torque, target in motor_target_angle.
    return record::JointDesc(record::Vec3{}, record::Vec3{}, record::Vec3{}, 0, 0, 0, 0, 0, 0, 0, 0, motor.speed,
                             motor.max_force, 0, motor.target, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, flags);
  }
  const uint8_t flags = static_cast<uint8_t>((j.enable_limit ? 1u : 0u) | (j.enable_motor ? 2u : 0u) |
                                             (j.position_motor ? 4u : 0u) | (j.collide_connected ? 8u : 0u));
  return record::JointDesc(rec(j.anchor), rec(j.anchor_b), rec(j.axis), to_wire(j.body_a), to_wire(j.body_b),
                           j.min_length, j.max_length, j.spring_hertz, j.spring_damping_ratio, j.lower_angle,
                           j.upper_angle, j.motor_speed, j.max_motor_torque, j.target_angle, j.motor_target_angle,
                           j.break_force, j.break_torque, j.lower_translation, j.upper_translation,
                           j.max_motor_force, j.target_translation, j.motor_target_translation, j.cone_angle,
                           j.friction_torque, static_cast<uint8_t>(j.kind), flags);
}

void from_record(const record::JointDesc& r, server::PendingRequest* p) {
  const uint8_t flags = r.flags();
  if (p->type == wire::Message::SetJointMotor) {
    p->motor = physics::JointMotor{(flags & 2u) != 0, (flags & 4u) != 0, r.motor_speed(), r.motor_target_angle(),
                                   r.max_motor_torque()};
    return;
  }
  physics::JointDesc& j = p->joint;
  j.kind = static_cast<physics::JointKind>(r.kind());  // the World refuses an unknown kind
  j.body_a = from_wire(r.body_a());
  j.body_b = from_wire(r.body_b());
  j.anchor = phys(r.anchor());
  j.anchor_b = phys(r.anchor_b());
  j.axis = phys(r.axis());
  j.min_length = r.min_length();
  j.max_length = r.max_length();
  j.spring_hertz = r.spring_hertz();
  j.spring_damping_ratio = r.spring_damping_ratio();
  j.lower_angle = r.lower_angle();
  j.upper_angle = r.upper_angle();
  j.motor_speed = r.motor_speed();
  j.max_motor_torque = r.max_motor_torque();
  j.target_angle = r.target_angle();
  j.motor_target_angle = r.motor_target_angle();
  j.break_force = r.break_force();
  j.break_torque = r.break_torque();
  j.lower_translation = r.lower_translation();
  j.upper_translation = r.upper_translation();
  j.max_motor_force = r.max_motor_force();
  j.target_translation = r.target_translation();
  j.motor_target_translation = r.motor_target_translation();
  j.cone_angle = r.cone_angle();
  j.friction_torque = r.friction_torque();
  j.enable_limit = (flags & 1u) != 0;
  j.enable_motor = (flags & 2u) != 0;
  j.position_motor = (flags & 4u) != 0;
  j.collide_connected = (flags & 8u) != 0;
}

server::PendingRequest to_pending(const record::Request& r) {
  server::PendingRequest p;
  p.type = static_cast<wire::Message>(r.type());
  p.client_id = r.client_id();
  p.request_id = r.request_id();
  // A CreateObject's or CreateJoint's recorded id is its result, not an input.
  if (p.type != wire::Message::CreateObject && p.type != wire::Message::CreateJoint) p.id = from_wire(r.id());
  if (const record::JointDesc* j = r.joint()) from_record(*j, &p);
  if (r.vector()) p.vector = phys(*r.vector());
  if (r.point()) p.point = phys(*r.point());
  if (r.body()) p.desc = to_physics(*r.body());
  if (const record::Quat* q = r.orientation()) p.orientation = impulse::Quat{q->x(), q->y(), q->z(), q->w()};
  if (r.velocity()) p.state_velocity = phys(*r.velocity());
  if (r.angular_velocity()) p.state_angular_velocity = phys(*r.angular_velocity());
  if (const record::Filter* f = r.filter()) {
    const physics::Filter filter{f->category(), f->mask(), f->group()};
    if (p.type == wire::Message::SetFilter) {
      p.filter = filter;
    } else {
      p.desc.filter = filter;
    }
  }
  return p;
}

std::span<const uint8_t> encode_header(flatbuffers::FlatBufferBuilder& fbb, const HeaderInfo& info,
                                       const physics::WorldSettings& settings, std::span<const uint8_t> state,
                                       std::span<const BodyDamping> dampings) {
  fbb.Clear();
  const RecordingConfig& c = *info.config;
  const auto config = CreateServerConfig(fbb, static_cast<uint32_t>(c.tick_hz), static_cast<uint32_t>(c.snapshot_hz),
                                         static_cast<uint32_t>(c.max_clients),
                                         static_cast<uint32_t>(c.max_steps_per_frame), c.client_timeout_s,
                                         fbb.CreateString(c.scene));
  const auto build = fbb.CreateString(build_id());
  const auto scene_name = fbb.CreateString(info.scene_name.data(), info.scene_name.size());
  const record::WorldSettings world_settings = to_record(settings);
  const auto blob = fbb.CreateVector(state.data(), state.size());
  const auto damping_vector = fbb.CreateVectorOfStructs(dampings.data(), dampings.size());
  HeaderBuilder h(fbb);
  h.add_format_version(kFormatVersion);
  h.add_build_id(build);
  h.add_started_unix_ms(info.started_unix_ms);
  h.add_part(info.part);
  h.add_config(config);
  h.add_scene_name(scene_name);
  h.add_settings(&world_settings);
  h.add_tick(info.tick);
  h.add_world_hash(info.world_hash);
  h.add_keyframe_interval(info.keyframe_interval);
  h.add_state(blob);
  h.add_dampings(damping_vector);
  return finish(fbb, Payload::Header, h.Finish().Union());
}

std::span<const uint8_t> encode_tick(flatbuffers::FlatBufferBuilder& fbb, uint64_t tick, uint64_t awake_hash,
                                     std::span<const RequestRecord> requests,
                                     std::vector<flatbuffers::Offset<Request>>& scratch) {
  fbb.Clear();
  // Children before parents (FlatBuffers builds back to front): the request tables, then the
  // vector of their offsets, then the Tick.
  scratch.clear();
  for (const RequestRecord& q : requests) {
    const server::PendingRequest& r = q.request;
    const bool has_vector = r.type != wire::Message::CreateObject && r.type != wire::Message::DestroyObject &&
                            r.type != wire::Message::SetFilter && r.type != wire::Message::CreateJoint &&
                            r.type != wire::Message::DestroyJoint && r.type != wire::Message::SetJointMotor;
    const bool has_joint = r.type == wire::Message::CreateJoint || r.type == wire::Message::SetJointMotor;
    const record::JointDesc joint = to_record(r.joint, r.motor, r.type == wire::Message::SetJointMotor);
    const physics::Filter& f = r.type == wire::Message::SetFilter ? r.filter : r.desc.filter;
    const bool has_filter = r.type == wire::Message::SetFilter ||
                            (r.type == wire::Message::CreateObject && f != physics::Filter{});
    const record::Filter filter(f.category, f.mask, f.group);
    const record::Vec3 vector = rec(r.vector);
    const record::Vec3 point = rec(r.point.value_or(impulse::Vec3{}));
    const record::BodyDesc body = to_record(r.desc);
    const record::Quat orientation(r.orientation.x, r.orientation.y, r.orientation.z, r.orientation.w);
    const bool is_state = r.type == wire::Message::SetState;
    const record::Vec3 state_velocity = rec(r.state_velocity);
    const record::Vec3 state_angular_velocity = rec(r.state_angular_velocity);
    RequestBuilder b(fbb);
    b.add_id(to_wire(q.id));
    b.add_client_id(r.client_id);
    b.add_request_id(r.request_id);
    if (has_vector) b.add_vector(&vector);
    if (r.point) b.add_point(&point);
    if (r.type == wire::Message::CreateObject) b.add_body(&body);
    if (has_filter) b.add_filter(&filter);
    if (r.type == wire::Message::MoveKinematic || is_state) b.add_orientation(&orientation);
    if (is_state) {
      b.add_velocity(&state_velocity);
      b.add_angular_velocity(&state_angular_velocity);
    }
    if (has_joint) b.add_joint(&joint);
    b.add_result(static_cast<uint16_t>(q.result));
    b.add_type(static_cast<uint8_t>(r.type));
    scratch.push_back(b.Finish());
  }
  const auto request_vector = requests.empty() ? 0 : fbb.CreateVector(scratch);
  TickBuilder t(fbb);
  t.add_tick(tick);
  t.add_awake_hash(awake_hash);
  if (!requests.empty()) t.add_requests(request_vector);
  return finish(fbb, Payload::Tick, t.Finish().Union());
}

std::span<const uint8_t> encode_keyframe(flatbuffers::FlatBufferBuilder& fbb, uint64_t tick, uint64_t world_hash,
                                         std::span<const uint8_t> state) {
  fbb.Clear();
  const auto blob = fbb.CreateVector(state.data(), state.size());
  const auto keyframe = CreateKeyframe(fbb, tick, world_hash, blob);
  return finish(fbb, Payload::Keyframe, keyframe.Union());
}

std::span<const uint8_t> encode_client_event(flatbuffers::FlatBufferBuilder& fbb, ClientEventType type,
                                             uint32_t client_id, uint64_t tick, std::string_view address,
                                             std::string_view name) {
  fbb.Clear();
  const auto address_offset = fbb.CreateString(address.data(), address.size());
  const auto name_offset = name.empty() ? 0 : fbb.CreateString(name.data(), name.size());
  const auto event = CreateClientEvent(fbb, type, client_id, tick, address_offset, name_offset);
  return finish(fbb, Payload::ClientEvent, event.Union());
}

std::string request_type_name(uint8_t type) {
  if (type == static_cast<uint8_t>(server::kServerSleep)) return "ServerSleep";
  if (type <= static_cast<uint8_t>(wire::Message::MAX)) {
    const char* name = wire::EnumNameMessage(static_cast<wire::Message>(type));
    if (name != nullptr && name[0] != '\0') return name;
  }
  return fmt::format("type {}", type);
}

std::string result_code_name(uint16_t code) {
  if (code <= static_cast<uint16_t>(wire::ResultCode::MAX)) {
    const char* name = wire::EnumNameResultCode(static_cast<wire::ResultCode>(code));
    if (name != nullptr && name[0] != '\0') return name;
  }
  return fmt::format("code {}", code);
}

}  // namespace impulse::record
