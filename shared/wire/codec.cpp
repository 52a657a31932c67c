// Wire codec: FlatBuffers verification (flatbuffers::Verifier, "FlatBuffers internals" in the
// official documentation) followed by semantic range checks, and size-bounded message builders.
#include "shared/wire/codec.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "shared/wire/event_codec.h"
#include "shared/wire/messages.h"
#include "shared/wire/snapshot_codec.h"

namespace impulse::wire {
namespace {

// The deepest legal nesting is Envelope -> message table -> vector -> struct; 8 leaves room for
// additive schema changes while bounding the Verifier's recursion on hostile input.
constexpr flatbuffers::uoffset_t kVerifierMaxDepth = 8;
// An Envelope holds exactly two tables (itself and the message).
constexpr flatbuffers::uoffset_t kVerifierMaxTables = 8;
// Root offset + file identifier: anything shorter cannot be a finished buffer.
constexpr size_t kMinDatagramBytes = sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength;

bool is_finite(const wire::Vec3& v) {
  return std::isfinite(v.x()) && std::isfinite(v.y()) && std::isfinite(v.z());
}

// True when every component is finite and |c| <= limit. NaN fails both comparisons.
bool within(const wire::Vec3& v, float limit) {
  return std::fabs(v.x()) <= limit && std::fabs(v.y()) <= limit && std::fabs(v.z()) <= limit;
}

// True when finite with length |v| <= limit, in double (a finite float vector cannot overflow there).
bool length_within(const wire::Vec3& v, float limit) {
  const double x = v.x(), y = v.y(), z = v.z();
  const double l = limit;
  return is_finite(v) && x * x + y * y + z * z <= l * l;
}

bool in_open_closed(float x, float hi) { return x > 0.0f && x <= hi; }
bool in_closed(float x, float lo, float hi) { return x >= lo && x <= hi; }  // NaN fails

bool is_finite(const wire::Quat& q) {
  return std::isfinite(q.x()) && std::isfinite(q.y()) && std::isfinite(q.z()) && std::isfinite(q.w());
}

// | |q| - 1 | <= kQuatNormTolerance, in double so the test itself adds no rounding doubt.
bool is_near_unit(const wire::Quat& q) {
  const double len = std::sqrt(static_cast<double>(q.x()) * q.x() + static_cast<double>(q.y()) * q.y() +
                               static_cast<double>(q.z()) * q.z() + static_cast<double>(q.w()) * q.w());
  return std::fabs(len - 1.0) <= static_cast<double>(kQuatNormTolerance);
}

// A vector of 8-byte-aligned structs must start on an 8-byte boundary of the buffer, or reading
// its u64 members is undefined behaviour. FlatBuffers 2.0.8's Verifier only checks 4 bytes (and
// the builder does not align the data of an empty vector, which is never read).
template <class T>
bool is_struct_vector_aligned(const flatbuffers::Vector<const T*>* v, const uint8_t* base) {
  if (v == nullptr || v->size() == 0) return true;  // nothing is read from an empty vector
  const auto offset = static_cast<size_t>(reinterpret_cast<const uint8_t*>(v->Data()) - base);
  return offset % alignof(T) == 0;
}

// Truncates to at most max_bytes without splitting a UTF-8 sequence.
std::string_view truncate_utf8(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0u) == 0x80u) --n;
  return s.substr(0, n);
}

flatbuffers::Offset<flatbuffers::String> create_string(flatbuffers::FlatBufferBuilder& fbb, std::string_view s) {
  const std::string_view t = truncate_utf8(s, kMaxStringBytes);
  return fbb.CreateString(t.data(), t.size());
}

// Largest n for which build(n) <= kMaxPlaintextBytes, from the measured size of one element's
// message: capacity = (limit - overhead) / element, then confirmed (and corrected) by building.
template <class BuildFn>
uint32_t measure_capacity(size_t element_bytes, BuildFn&& build) {
  const size_t one = build(1);
  const size_t overhead = one - element_bytes;
  uint32_t n = static_cast<uint32_t>((kMaxPlaintextBytes - overhead) / element_bytes);
  while (n > 1 && build(n) > kMaxPlaintextBytes) --n;
  return n;
}

}  // namespace

const char* to_string(DropReason reason) {
  switch (reason) {
    case DropReason::None: return "none";
    case DropReason::Empty: return "empty";
    case DropReason::Oversized: return "oversized";
    case DropReason::BadIdentifier: return "bad identifier";
    case DropReason::VerifyFailed: return "verify failed";
    case DropReason::VersionMismatch: return "version mismatch";
    case DropReason::NoMessage: return "no message";
    case DropReason::WrongDirection: return "wrong direction";
    case DropReason::Count: break;
  }
  return "unknown";
}

bool is_sent_by_client(Message type) { return rule_of(type).from_client; }

bool is_sent_by_server(Message type) { return rule_of(type).from_server; }

Verified verify_datagram(std::span<const uint8_t> bytes, Direction expected) {
  if (bytes.size() < kMinDatagramBytes) return {nullptr, DropReason::Empty};
  if (bytes.size() > kMaxDatagramBytes) return {nullptr, DropReason::Oversized};
  if (reinterpret_cast<uintptr_t>(bytes.data()) % kDatagramAlignment != 0) {
    return {nullptr, DropReason::VerifyFailed};
  }
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), EnvelopeIdentifier())) {
    return {nullptr, DropReason::BadIdentifier};
  }

  flatbuffers::Verifier::Options options;
  options.max_depth = kVerifierMaxDepth;
  options.max_tables = kVerifierMaxTables;
  options.check_alignment = true;
  options.check_nested_flatbuffers = false;  // the schema has none
  // The size bound is the buffer length itself (<= kMaxDatagramBytes, checked above).
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), options);
  if (!VerifyEnvelopeBuffer(verifier)) return {nullptr, DropReason::VerifyFailed};

  // Verified: reading is safe from here on.
  const Envelope* envelope = GetEnvelope(bytes.data());
  if (envelope->protocol_version() != kProtocolVersion) return {envelope, DropReason::VersionMismatch};

  const Message type = envelope->message_type();
  if (type == Message::NONE || type > Message::MAX || envelope->message() == nullptr) {
    return {nullptr, DropReason::NoMessage};
  }
  const bool direction_ok = expected == Direction::ClientToServer ? is_sent_by_client(type) : is_sent_by_server(type);
  if (!direction_ok) return {nullptr, DropReason::WrongDirection};

  if (const CollisionEvents* e = envelope->message_as_CollisionEvents()) {
    if (!is_struct_vector_aligned(e->events(), bytes.data())) return {nullptr, DropReason::VerifyFailed};
  } else if (const RaycastResult* r = envelope->message_as_RaycastResult()) {
    if (!is_struct_vector_aligned(r->hits(), bytes.data())) return {nullptr, DropReason::VerifyFailed};
  }
  return {envelope, DropReason::None};
}

// --- Range checks ----------------------------------------------------------------------------

namespace {

// A bound as the messages write it: powers of ten as "1e5" or "1e-3" (the constants are floats, so
// 1e-3 arrives as the float nearest it), anything else as %g.
std::string bound(double v) {
  for (int e = -9; e <= 38; ++e) {
    const double power = std::pow(10.0, e);
    if ((e <= -1 || e >= 4) && (v == power || v == static_cast<double>(static_cast<float>(power)))) {
      return "1e" + std::to_string(e);
    }
  }
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// The refusal messages that state a bound, formatted once from the constants (the Check points
// into them for the program's lifetime).
struct RangeMessages {
  std::string radius, half_extents, capsule_radius, capsule_half_height, cylinder_radius, cylinder_half_height, position, velocity, mass, friction,
      orientation, angular_velocity, angular_damping, force, impulse, torque, origin, translation, sphere_center,
      sphere_radius, box, client_name, cookie, token, replay_speed;
};

const RangeMessages& range_messages() {
  static const RangeMessages m = [] {
    RangeMessages r;
    const std::string extent = bound(kMaxExtent);
    const std::string coordinate = bound(kMaxCoordinate);
    const std::string least = bound(kMinExtent);
    r.radius = "dims.x (radius): must be in [" + least + ", " + extent + "] m";
    r.half_extents = "dims (half extents): each must be in [" + least + ", " + extent + "] m";
    r.capsule_radius = "dims.x (capsule radius): must be in [" + least + ", " + extent + "] m";
    r.capsule_half_height = "dims.y (capsule half_height): must be in [0, " + extent + "] m";
    r.cylinder_radius = "dims.x (cylinder radius): must be in [" + least + ", " + extent + "] m";
    r.cylinder_half_height = "dims.y (cylinder half_height): must be in [" + least + ", " + extent + "] m";
    r.position = "position: each component must be finite and |x| <= " + coordinate + " m";
    r.velocity = "velocity: must be finite with |v| <= " + bound(kMaxSpeed) + " m/s (its length)";
    r.mass = "mass: must be in (0, " + bound(kMaxMass) + "] kg for a dynamic body";
    r.friction = "friction: must be finite and in [0, " + bound(kMaxFriction) + "]";
    r.orientation = "orientation: must be a finite unit quaternion (| |q| - 1 | <= " + bound(kQuatNormTolerance) + ")";
    r.angular_velocity =
        "angular_velocity: must be finite with |w| <= " + bound(kMaxAngularSpeed) + " rad/s (its length)";
    r.angular_damping = "angular_damping: must be finite and in [0, " + bound(kMaxAngularDamping) + "] 1/s";
    r.force = "force: each component must be finite and |F| <= " + bound(kMaxForce) + " N";
    r.impulse = "impulse: each component must be finite and |J| <= " + bound(kMaxImpulse) + " N*s";
    r.torque = "torque: each component must be finite and |T| <= " + bound(kMaxTorque) + " N*m";
    r.origin = "origin: each component must be finite and |x| <= " + coordinate + " m";
    r.translation = "translation: length must be in (0, " + bound(kMaxRayLength) + "] m";
    r.sphere_center = "center: required for a sphere, |component| <= " + coordinate + " m";
    r.sphere_radius = "radius: must be in (0, " + coordinate + "] m";
    r.box = "min, max: required for a box, |component| <= " + coordinate + " m";
    r.client_name = "client_name: must be at most " + std::to_string(kMaxClientNameBytes) + " bytes";
    r.cookie = "cookie: must be at most " + std::to_string(kMaxCookieBytes) + " bytes";
    r.token = "token: must be at most " + std::to_string(kMaxTokenBytes) + " bytes";
    r.replay_speed = "speed: must be finite and in [1/" + bound(1.0 / kMinReplaySpeed) + ", " + bound(kMaxReplaySpeed) +
                     "] times the recorded tick rate";
    return r;
  }();
  return m;
}

}  // namespace

Check check_request(const CreateObject& m) {
  constexpr auto kInvalid = ResultCode::InvalidArgument;
  if (m.kind() < BodyKind::MIN || m.kind() > BodyKind::MAX) return {kInvalid, "kind: unknown body kind"};
  if (m.shape() < ShapeKind::MIN || m.shape() > ShapeKind::MAX) return {kInvalid, "shape: unknown shape kind"};

  if (m.shape() == ShapeKind::Plane && m.kind() != BodyKind::Static) {
    return {kInvalid, "shape: a Plane must be a Static body (kind = Static)"};
  }

  const wire::Vec3* dims = m.dims();
  if (has_asset(m.shape())) {
    return {kInvalid, "shape: a Hull, Mesh or HeightField is a world asset; clients cannot create one (scene files can)"};
  }
  if (dims == nullptr && m.shape() != ShapeKind::Plane) return {kInvalid, "dims: required"};
  if (dims != nullptr && !is_finite(*dims)) return {kInvalid, "dims: must be finite"};
  switch (m.shape()) {
    case ShapeKind::Sphere:
      if (!in_closed(dims->x(), kMinExtent, kMaxExtent)) return {kInvalid, range_messages().radius};
      break;
    case ShapeKind::Box:
      if (!in_closed(dims->x(), kMinExtent, kMaxExtent) || !in_closed(dims->y(), kMinExtent, kMaxExtent) ||
          !in_closed(dims->z(), kMinExtent, kMaxExtent)) {
        return {kInvalid, range_messages().half_extents};
      }
      break;
    case ShapeKind::Capsule:
      if (!in_closed(dims->x(), kMinExtent, kMaxExtent)) {
        return {kInvalid, range_messages().capsule_radius};
      }
      if (!in_closed(dims->y(), 0.0f, kMaxExtent)) {
        return {kInvalid, range_messages().capsule_half_height};
      }
      break;
    case ShapeKind::Cylinder:
      if (!in_closed(dims->x(), kMinExtent, kMaxExtent)) return {kInvalid, range_messages().cylinder_radius};
      if (!in_closed(dims->y(), kMinExtent, kMaxExtent)) return {kInvalid, range_messages().cylinder_half_height};
      break;
    case ShapeKind::Plane:
      break;  // dims are ignored
    case ShapeKind::Hull:
    case ShapeKind::Mesh:
    case ShapeKind::HeightField:
      return {kInvalid, "shape: a Hull, Mesh or HeightField is a world asset; clients cannot create one (scene files can)"};
  }

  if (m.position() != nullptr && !within(*m.position(), kMaxCoordinate)) {
    return {kInvalid, range_messages().position};
  }
  if (m.velocity() != nullptr && !length_within(*m.velocity(), kMaxSpeed)) {
    return {kInvalid, range_messages().velocity};
  }
  if (!std::isfinite(m.mass())) return {kInvalid, "mass: must be finite"};
  if (m.kind() == BodyKind::Dynamic && !in_open_closed(m.mass(), kMaxMass)) {
    return {kInvalid, range_messages().mass};
  }
  if (!(m.restitution() >= 0.0f && m.restitution() <= 1.0f)) {
    return {kInvalid, "restitution: must be in [0, 1]"};
  }
  if (!(m.friction() >= 0.0f && m.friction() <= kMaxFriction)) {  // also rejects NaN
    return {kInvalid, range_messages().friction};
  }
  if (const wire::Quat* q = m.orientation(); q != nullptr && !(is_finite(*q) && is_near_unit(*q))) {
    return {kInvalid, range_messages().orientation};
  }
  if (m.angular_velocity() != nullptr && !length_within(*m.angular_velocity(), kMaxAngularSpeed)) {
    return {kInvalid, range_messages().angular_velocity};
  }
  if (!in_closed(m.angular_damping(), 0.0f, kMaxAngularDamping)) {
    return {kInvalid, range_messages().angular_damping};
  }
  return {};
}

Check check_request(const ApplyForce& m) {
  if (m.force() == nullptr) return {ResultCode::InvalidArgument, "force: required"};
  if (!within(*m.force(), kMaxForce)) {
    return {ResultCode::InvalidArgument, range_messages().force};
  }
  if (m.point() != nullptr && !is_finite(*m.point())) return {ResultCode::InvalidArgument, "point: must be finite"};
  return {};
}

Check check_request(const ApplyImpulse& m) {
  if (m.impulse() == nullptr) return {ResultCode::InvalidArgument, "impulse: required"};
  if (!within(*m.impulse(), kMaxImpulse)) {
    return {ResultCode::InvalidArgument, range_messages().impulse};
  }
  if (m.point() != nullptr && !is_finite(*m.point())) return {ResultCode::InvalidArgument, "point: must be finite"};
  return {};
}

Check check_request(const ApplyTorque& m) {
  if (m.torque() == nullptr) return {ResultCode::InvalidArgument, "torque: required"};
  if (!within(*m.torque(), kMaxTorque)) {
    return {ResultCode::InvalidArgument, range_messages().torque};
  }
  return {};
}

Check check_request(const SetAngularVelocity& m) {
  if (m.angular_velocity() == nullptr) return {ResultCode::InvalidArgument, "angular_velocity: required"};
  if (!length_within(*m.angular_velocity(), kMaxAngularSpeed)) {
    return {ResultCode::InvalidArgument, range_messages().angular_velocity};
  }
  return {};
}

Check check_request(const Raycast& m) {
  if (m.origin() == nullptr) return {ResultCode::InvalidArgument, "origin: required"};
  if (!within(*m.origin(), kMaxCoordinate)) {
    return {ResultCode::InvalidArgument, range_messages().origin};
  }
  if (m.translation() == nullptr) return {ResultCode::InvalidArgument, "translation: required"};
  const wire::Vec3& t = *m.translation();
  if (!is_finite(t)) return {ResultCode::InvalidArgument, "translation: must be finite"};
  // In double: a finite float vector's squared length cannot overflow there.
  const double length_sq = static_cast<double>(t.x()) * t.x() + static_cast<double>(t.y()) * t.y() +
                           static_cast<double>(t.z()) * t.z();
  const double max_length = static_cast<double>(kMaxRayLength);
  if (!(length_sq > 0.0 && length_sq <= max_length * max_length)) {
    return {ResultCode::InvalidArgument, range_messages().translation};
  }
  if (!(m.seen_fraction() >= 0.0f && m.seen_fraction() < 1.0f)) {
    return {ResultCode::InvalidArgument, "seen_fraction: must be in [0, 1)"};
  }
  return {};
}

Check check_request(const Input& m) {
  if (m.mode() != InputMode::Force && m.mode() != InputMode::Velocity) {
    return {ResultCode::InvalidArgument, "mode: unknown input mode (Force or Velocity)"};
  }
  if (m.first_tick() == 0) return {ResultCode::InvalidArgument, "first_tick: must be >= 1"};
  const auto* frames = m.frames();
  if (frames == nullptr || frames->size() == 0 || frames->size() > kMaxInputFrames) {
    return {ResultCode::InvalidArgument, "frames: 1 to 16 required"};
  }
  if (m.first_tick() > UINT64_MAX - kMaxInputFrames) return {ResultCode::InvalidArgument, "first_tick: out of range"};
  const bool force = m.mode() == InputMode::Force;
  for (const InputFrame* f : *frames) {
    if (force ? !(within(f->linear(), kMaxForce) && within(f->angular(), kMaxTorque))
              : !(length_within(f->linear(), kMaxSpeed) && length_within(f->angular(), kMaxAngularSpeed))) {
      return {ResultCode::InvalidArgument,
              force ? "frames: force |component| <= 1e9 N and torque |component| <= 1e9 N·m, finite"
                    : "frames: |velocity| <= 500 m/s and |angular velocity| <= 47.12 rad/s, finite"};
    }
  }
  return {};
}

Check check_request(const SetState& m) {
  if (m.position() == nullptr) return {ResultCode::InvalidArgument, "position: required"};
  if (!within(*m.position(), kMaxCoordinate)) return {ResultCode::InvalidArgument, range_messages().position};
  const wire::Quat* q = m.orientation();
  if (q == nullptr) return {ResultCode::InvalidArgument, "orientation: required"};
  if (!(is_finite(*q) && is_near_unit(*q))) return {ResultCode::InvalidArgument, range_messages().orientation};
  if (m.velocity() != nullptr && !length_within(*m.velocity(), kMaxSpeed)) {
    return {ResultCode::InvalidArgument, range_messages().velocity};
  }
  if (m.angular_velocity() != nullptr && !length_within(*m.angular_velocity(), kMaxAngularSpeed)) {
    return {ResultCode::InvalidArgument, range_messages().angular_velocity};
  }
  return {};
}

Check check_request(const MoveKinematic& m) {
  if (m.position() == nullptr) return {ResultCode::InvalidArgument, "position: required"};
  if (!within(*m.position(), kMaxCoordinate)) return {ResultCode::InvalidArgument, range_messages().position};
  if (const wire::Quat* q = m.orientation(); q != nullptr && !(is_finite(*q) && is_near_unit(*q))) {
    return {ResultCode::InvalidArgument, range_messages().orientation};
  }
  return {};
}

Check check_request(const SetVelocity& m) {
  if (m.velocity() == nullptr) return {ResultCode::InvalidArgument, "velocity: required"};
  if (!length_within(*m.velocity(), kMaxSpeed)) {
    return {ResultCode::InvalidArgument, range_messages().velocity};
  }
  return {};
}

Check check_request(const Connect& m) {
  if (m.protocol_version() != kProtocolVersion) {
    return {ResultCode::VersionMismatch, "protocol_version: not supported by this server"};
  }
  if (m.client_name() != nullptr && m.client_name()->size() > kMaxClientNameBytes) {
    return {ResultCode::InvalidArgument, range_messages().client_name};
  }
  if (m.cookie() != nullptr && m.cookie()->size() > kMaxCookieBytes) {
    return {ResultCode::InvalidArgument, range_messages().cookie};
  }
  if (m.token() != nullptr && m.token()->size() > kMaxTokenBytes) {
    return {ResultCode::TokenInvalid, range_messages().token};  // as PROTOCOL.md says: no valid token is longer
  }
  if (m.kx_public() == nullptr || m.kx_public()->size() != kKxPublicBytes) {
    return {ResultCode::InvalidArgument, "kx_public: the client's X25519 public key, exactly 32 bytes, is required"};
  }
  return {};
}

Check check_request(const SetInterest& m) {
  constexpr auto kInvalid = ResultCode::InvalidArgument;
  switch (m.kind()) {
    case InterestKind::All:
      return {};
    case InterestKind::Sphere:
      if (m.center() == nullptr || !within(*m.center(), kMaxCoordinate)) {
        return {kInvalid, range_messages().sphere_center};
      }
      if (!in_open_closed(m.radius(), kMaxCoordinate)) return {kInvalid, range_messages().sphere_radius};
      return {};
    case InterestKind::Box:
      if (m.min() == nullptr || m.max() == nullptr || !within(*m.min(), kMaxCoordinate) ||
          !within(*m.max(), kMaxCoordinate)) {
        return {kInvalid, range_messages().box};
      }
      if (m.min()->x() > m.max()->x() || m.min()->y() > m.max()->y() || m.min()->z() > m.max()->z()) {
        return {kInvalid, "min, max: min must be <= max on every axis"};
      }
      return {};
  }
  return {kInvalid, "kind: unknown interest kind"};
}

Check check_request(const CreateJoint& m) {
  constexpr auto kInvalid = ResultCode::InvalidArgument;
  if (m.kind() < JointKind::MIN || m.kind() > JointKind::MAX) return {kInvalid, "kind: unknown joint kind"};
  if (m.body_a() == 0) return {kInvalid, "body_a: required (an ObjectID)"};
  if (m.body_a() == m.body_b()) return {kInvalid, "body_b: must differ from body_a (0 = the static world)"};
  if (m.anchor() == nullptr) return {kInvalid, "anchor: required"};
  if (!within(*m.anchor(), kMaxCoordinate)) return {kInvalid, "anchor: each component must be finite and |x| <= 1e5 m"};
  if (m.kind() == JointKind::Distance) {
    if (m.anchor_b() == nullptr || !within(*m.anchor_b(), kMaxCoordinate)) {
      return {kInvalid, "anchor_b: required for a Distance joint, each component finite and |x| <= 1e5 m"};
    }
    if (!in_closed(m.min_length(), 0.0f, 2.0f * kMaxCoordinate) ||
        !in_closed(m.max_length(), m.min_length(), 2.0f * kMaxCoordinate)) {
      return {kInvalid, "min_length, max_length: need 0 <= min_length <= max_length <= 2e5 m"};
    }
  }
  if (const wire::Vec3* axis = m.axis(); axis != nullptr && !(is_finite(*axis) && !length_within(*axis, 1e-6f))) {
    return {kInvalid, "axis: must be finite with length > 1e-6"};
  }
  auto angle = [](float a) { return in_closed(a, -kMaxJointAngle, kMaxJointAngle); };
  if (!angle(m.lower_angle()) || !angle(m.upper_angle()) || !angle(m.target_angle()) ||
      !angle(m.motor_target_angle())) {
    return {kInvalid, "lower_angle, upper_angle, target_angle, motor_target_angle: each in [-0.99 pi, 0.99 pi] rad"};
  }
  const bool slider = m.kind() == JointKind::Slider;
  if (m.enable_limit() && !slider && m.lower_angle() > m.upper_angle()) {
    return {kInvalid, "lower_angle: must be <= upper_angle"};
  }
  if (m.motor_mode() < JointMotorMode::MIN || m.motor_mode() > JointMotorMode::MAX) {
    return {kInvalid, "motor_mode: unknown motor mode"};
  }
  if (slider ? !in_closed(m.motor_speed(), -kMaxSpeed, kMaxSpeed)
             : !in_closed(m.motor_speed(), -kMaxAngularSpeed, kMaxAngularSpeed)) {
    return {kInvalid, slider ? "motor_speed: must be finite with |speed| <= 500 m/s for a Slider"
                             : "motor_speed: must be finite with |speed| <= 47.12389 rad/s"};
  }
  auto offset = [](float x) { return in_closed(x, -kMaxCoordinate, kMaxCoordinate); };
  if (!offset(m.lower_translation()) || !offset(m.upper_translation()) || !offset(m.target_translation()) ||
      !offset(m.motor_target_translation())) {
    return {kInvalid, "lower_translation, upper_translation, target_translation, motor_target_translation: each "
                      "finite with |x| <= 1e5 m"};
  }
  if (m.enable_limit() && slider && m.lower_translation() > m.upper_translation()) {
    return {kInvalid, "lower_translation: must be <= upper_translation"};
  }
  if (!in_closed(m.max_motor_force(), 0.0f, kMaxForce)) {
    return {kInvalid, "max_motor_force: must be finite, >= 0 and <= 1e9 N"};
  }
  if (!in_closed(m.cone_angle(), 0.0f, kMaxJointAngle)) return {kInvalid, "cone_angle: must be in [0, 0.99 pi] rad"};
  if (!in_closed(m.friction_torque(), 0.0f, kMaxTorque)) {
    return {kInvalid, "friction_torque: must be finite, >= 0 and <= 1e9 N*m"};
  }
  if (!in_closed(m.max_motor_torque(), 0.0f, kMaxTorque) || !in_closed(m.break_force(), 0.0f, kMaxForce) ||
      !in_closed(m.break_torque(), 0.0f, kMaxTorque)) {
    return {kInvalid, "max_motor_torque, break_force, break_torque: each finite, >= 0 and <= 1e9"};
  }
  if (!in_closed(m.spring_hertz(), 0.0f, kMaxSpringHertz) ||
      !in_closed(m.spring_damping_ratio(), 0.0f, kMaxSpringDampingRatio)) {
    return {kInvalid, "spring_hertz, spring_damping_ratio: each in [0, 1000]"};
  }
  return {};
}

Check check_request(const SetJointMotor& m) {
  constexpr auto kInvalid = ResultCode::InvalidArgument;
  if (m.mode() < JointMotorMode::MIN || m.mode() > JointMotorMode::MAX) return {kInvalid, "mode: unknown motor mode"};
  if (!in_closed(m.speed(), -kMaxSpeed, kMaxSpeed)) {
    return {kInvalid, "speed: must be finite with |speed| <= 500 (a hinge's at most 47.12389 rad/s)"};
  }
  if (!in_closed(m.target(), -kMaxCoordinate, kMaxCoordinate)) {
    return {kInvalid, "target: must be finite with |target| <= 1e5 (a hinge's within 0.99 pi rad)"};
  }
  if (!in_closed(m.max_force(), 0.0f, kMaxForce)) return {kInvalid, "max_force: must be finite, >= 0 and <= 1e9"};
  return {};
}

Check check_request(const ReplayControl& m, uint64_t first_tick, uint64_t last_tick) {
  constexpr auto kInvalid = ResultCode::InvalidArgument;
  switch (m.action()) {
    case ReplayAction::Pause:
    case ReplayAction::Resume:
      return {};
    case ReplayAction::SetSpeed:
      if (!in_closed(m.speed(), kMinReplaySpeed, kMaxReplaySpeed)) {
        return {kInvalid, range_messages().replay_speed};
      }
      return {};
    case ReplayAction::Seek:
      if (m.tick() < first_tick || m.tick() > last_tick) {
        return {kInvalid, "tick: outside the recording's tick range (see ConnectAccepted.replay_first_tick and "
                          "replay_last_tick)"};
      }
      return {};
  }
  return {kInvalid, "action: unknown replay action"};
}

// --- Builders --------------------------------------------------------------------------------

namespace {

// finish() without the size assertion, for the capacity probes that measure oversized buffers.
std::span<const uint8_t> finish_unchecked(flatbuffers::FlatBufferBuilder& fbb, Message type,
                                          flatbuffers::Offset<void> message) {
  // Every datagram carries a header slot so the sender can stamp it in place (stamp_header), and
  // every world-changing request an apply_tick slot (stamp_apply_tick), written even at its
  // default 0 so that it can be overwritten in place.
  const PacketHeader unstamped(0, 0, 0);
  EnvelopeBuilder builder(fbb);
  if (is_sent_by_client(type) && changes_world(type)) {
    fbb.ForceDefaults(true);
    builder.add_apply_tick(0);
    fbb.ForceDefaults(false);
  }
  builder.add_header(&unstamped);  // CreateEnvelope's order, so other messages keep their layout
  builder.add_message(message);
  builder.add_protocol_version(kProtocolVersion);
  builder.add_message_type(type);
  FinishEnvelopeBuffer(fbb, builder.Finish());
  return {fbb.GetBufferPointer(), fbb.GetSize()};
}

}  // namespace

std::span<const uint8_t> finish(flatbuffers::FlatBufferBuilder& fbb, Message type,
                                flatbuffers::Offset<void> message) {
  const std::span<const uint8_t> bytes = finish_unchecked(fbb, type, message);
  assert(bytes.size() <= kMaxPlaintextBytes && "a builder produced an oversized datagram");
  return bytes;
}

bool stamp_header(std::span<uint8_t> datagram, const PacketHeader& header) {
  if (datagram.size() < sizeof(flatbuffers::uoffset_t)) return false;
  // The caller built this buffer, so it is trusted; the header's place is read, then overwritten.
  const Envelope* envelope = GetEnvelope(datagram.data());
  const PacketHeader* slot = envelope->header();
  if (slot == nullptr) return false;
  std::memcpy(const_cast<PacketHeader*>(slot), &header, sizeof(PacketHeader));
  return true;
}

bool stamp_apply_tick(std::span<uint8_t> datagram, uint64_t tick) {
  if (datagram.size() < sizeof(flatbuffers::uoffset_t)) return false;
  // The caller built this buffer, so it is trusted; the slot is where the builder wrote it.
  // (Generated tables derive privately from flatbuffers::Table, which finds a field's address.)
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(GetEnvelope(datagram.data()));
  const uint8_t* slot = table->GetAddressOf(Envelope::VT_APPLY_TICK);
  if (slot == nullptr) return false;
  flatbuffers::WriteScalar(const_cast<uint8_t*>(slot), tick);
  return true;
}

PacketHeader header_of(const Envelope& envelope) {
  const PacketHeader* h = envelope.header();
  return h ? *h : PacketHeader(0, 0, 0);
}

size_t min_connect_bytes() {
  // The largest Challenge or ConnectAccepted the server can send: a Connect at least this large
  // can never be amplified by its answer (a resent Connect is answered by ConnectAccepted).
  static const size_t bytes = [] {
    flatbuffers::FlatBufferBuilder fbb(2 * kMaxDatagramBytes);
    const std::vector<uint8_t> cookie(kMaxCookieBytes, 0xFF);
    const size_t challenge = build_challenge(fbb, cookie).size();
    AcceptedArgs a;  // every scalar non-default, so every field is present
    a.client_id = UINT32_MAX;
    a.tick_hz = a.snapshot_hz = UINT16_MAX;
    a.tick = a.replay_first_tick = a.replay_last_tick = UINT64_MAX;
    a.quantization = QuantizationArgs{1, 1, 1, 1, 1, 1, 1};
    a.max_objects = a.first_request_id = UINT32_MAX;
    a.replay = true;
    a.kx_public.fill(0xFF);
    a.client_kx_public.fill(0xFF);
    a.token_bound = true;
    return std::max(challenge, build_connect_accepted(fbb, a).size());
  }();
  return bytes;
}

std::span<const uint8_t> build_connect(flatbuffers::FlatBufferBuilder& fbb, std::string_view client_name,
                                       std::span<const uint8_t> cookie, std::span<const uint8_t> token,
                                       std::span<const uint8_t> kx_public, uint16_t protocol_version) {
  const size_t min_bytes = min_connect_bytes();
  auto build = [&](size_t padding_bytes) {
    fbb.Clear();
    const auto name = create_string(fbb, client_name);
    const auto cookie_vec = cookie.empty() ? flatbuffers::Offset<flatbuffers::Vector<uint8_t>>()
                                           : fbb.CreateVector(cookie.data(), std::min(cookie.size(), kMaxCookieBytes));
    const auto token_vec = token.empty() ? flatbuffers::Offset<flatbuffers::Vector<uint8_t>>()
                                         : fbb.CreateVector(token.data(), std::min(token.size(), kMaxTokenBytes));
    const std::vector<uint8_t> zeros(padding_bytes, 0);
    const auto padding = padding_bytes == 0 ? flatbuffers::Offset<flatbuffers::Vector<uint8_t>>()
                                            : fbb.CreateVector(zeros);
    const auto kx_vec = kx_public.empty()
                            ? flatbuffers::Offset<flatbuffers::Vector<uint8_t>>()
                            : fbb.CreateVector(kx_public.data(), std::min(kx_public.size(), kKxPublicBytes));
    const auto message = CreateConnect(fbb, protocol_version, name, cookie_vec, token_vec, padding, kx_vec);
    return finish(fbb, Message::Connect, message.Union());
  };
  const size_t unpadded = build(0).size();
  if (unpadded >= min_bytes) return build(0);
  // A vector costs 4 length bytes plus alignment; pad generously, then trim to the minimum that fits.
  size_t padding = min_bytes - unpadded;
  while (build(padding).size() > min_bytes + 8 && padding > 0) --padding;
  while (build(padding).size() < min_bytes) ++padding;
  return build(padding);
}

std::span<const uint8_t> build_challenge(flatbuffers::FlatBufferBuilder& fbb, std::span<const uint8_t> cookie) {
  fbb.Clear();
  const auto vec = fbb.CreateVector(cookie.data(), std::min(cookie.size(), kMaxCookieBytes));
  const auto message = CreateChallenge(fbb, vec);
  return finish(fbb, Message::Challenge, message.Union());
}

std::span<const uint8_t> build_set_interest(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                            const InterestArgs& args) {
  fbb.Clear();
  const wire::Vec3 center = to_wire(args.center);
  const wire::Vec3 lo = to_wire(args.min);
  const wire::Vec3 hi = to_wire(args.max);
  const bool sphere = args.kind == InterestKind::Sphere;
  const bool box = args.kind == InterestKind::Box;
  const auto message = CreateSetInterest(fbb, request_id, args.kind, sphere ? &center : nullptr,
                                         sphere ? args.radius : 0.0f, box ? &lo : nullptr, box ? &hi : nullptr);
  return finish(fbb, Message::SetInterest, message.Union());
}

std::span<const uint8_t> build_create_object(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                             const CreateObjectArgs& args) {
  fbb.Clear();
  const wire::Vec3 dims = to_wire(args.dims);
  const wire::Vec3 position = to_wire(args.position);
  const wire::Vec3 velocity = to_wire(args.velocity);
  const wire::Quat orientation = to_wire(args.orientation);
  const wire::Vec3 angular_velocity = to_wire(args.angular_velocity);
  const auto message =
      CreateCreateObject(fbb, request_id, args.kind, args.shape, &dims, &position, &velocity, args.mass,
                         args.restitution, args.friction, &orientation, &angular_velocity, args.sensor,
                         args.angular_damping, args.material, args.shared, args.asleep, args.category,
                         args.mask, args.group, args.bullet);
  return finish(fbb, Message::CreateObject, message.Union());
}

std::span<const uint8_t> build_destroy_object(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ObjectID id) {
  fbb.Clear();
  const auto message = CreateDestroyObject(fbb, request_id, impulse::to_wire(id));
  return finish(fbb, Message::DestroyObject, message.Union());
}

std::span<const uint8_t> build_apply_force(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                           impulse::Vec3 force, std::optional<impulse::Vec3> point) {
  fbb.Clear();
  const wire::Vec3 f = to_wire(force);
  const wire::Vec3 p = to_wire(point.value_or(impulse::Vec3{}));
  const auto message = CreateApplyForce(fbb, request_id, impulse::to_wire(id), &f, point ? &p : nullptr);
  return finish(fbb, Message::ApplyForce, message.Union());
}

std::span<const uint8_t> build_apply_impulse(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                             ObjectID id, impulse::Vec3 impulse, std::optional<impulse::Vec3> point) {
  fbb.Clear();
  const wire::Vec3 j = to_wire(impulse);
  const wire::Vec3 p = to_wire(point.value_or(impulse::Vec3{}));
  const auto message = CreateApplyImpulse(fbb, request_id, impulse::to_wire(id), &j, point ? &p : nullptr);
  return finish(fbb, Message::ApplyImpulse, message.Union());
}

std::span<const uint8_t> build_set_velocity(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                            ObjectID id, impulse::Vec3 velocity) {
  fbb.Clear();
  const wire::Vec3 v = to_wire(velocity);
  const auto message = CreateSetVelocity(fbb, request_id, impulse::to_wire(id), &v);
  return finish(fbb, Message::SetVelocity, message.Union());
}

std::span<const uint8_t> build_apply_torque(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                            impulse::Vec3 torque) {
  fbb.Clear();
  const wire::Vec3 t = to_wire(torque);
  const auto message = CreateApplyTorque(fbb, request_id, impulse::to_wire(id), &t);
  return finish(fbb, Message::ApplyTorque, message.Union());
}

std::span<const uint8_t> build_move_kinematic(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                              impulse::Vec3 position, impulse::Quat orientation) {
  fbb.Clear();
  const wire::Vec3 p = to_wire(position);
  const wire::Quat q(orientation.x, orientation.y, orientation.z, orientation.w);
  const auto message = CreateMoveKinematic(fbb, request_id, impulse::to_wire(id), &p, &q);
  return finish(fbb, Message::MoveKinematic, message.Union());
}

std::span<const uint8_t> build_set_filter(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                          uint32_t category, uint32_t mask, int32_t group) {
  fbb.Clear();
  const auto message = CreateSetFilter(fbb, request_id, impulse::to_wire(id), category, mask, group);
  return finish(fbb, Message::SetFilter, message.Union());
}

std::span<const uint8_t> build_create_joint(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                            const CreateJointArgs& a) {
  fbb.Clear();
  const wire::Vec3 anchor = to_wire(a.anchor);
  const wire::Vec3 anchor_b = to_wire(a.anchor_b.value_or(impulse::Vec3{}));
  const wire::Vec3 axis = to_wire(a.axis.value_or(impulse::Vec3{}));
  const auto message = CreateCreateJoint(
      fbb, request_id, a.kind, impulse::to_wire(a.body_a), impulse::to_wire(a.body_b), &anchor,
      a.anchor_b ? &anchor_b : nullptr, a.axis ? &axis : nullptr, a.min_length, a.max_length, a.spring_hertz,
      a.spring_damping_ratio, a.enable_limit, a.lower_angle, a.upper_angle, a.motor_mode, a.motor_speed,
      a.max_motor_torque, a.target_angle, a.motor_target_angle, a.break_force, a.break_torque, a.collide_connected,
      a.lower_translation, a.upper_translation, a.max_motor_force, a.target_translation, a.motor_target_translation,
      a.cone_angle, a.friction_torque);
  return finish(fbb, Message::CreateJoint, message.Union());
}

std::span<const uint8_t> build_destroy_joint(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                             ObjectID joint) {
  fbb.Clear();
  const auto message = CreateDestroyJoint(fbb, request_id, impulse::to_wire(joint));
  return finish(fbb, Message::DestroyJoint, message.Union());
}

std::span<const uint8_t> build_set_joint_motor(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                               ObjectID joint, const JointMotorArgs& m) {
  fbb.Clear();
  const auto message =
      CreateSetJointMotor(fbb, request_id, impulse::to_wire(joint), m.mode, m.speed, m.target, m.max_force);
  return finish(fbb, Message::SetJointMotor, message.Union());
}

std::span<const uint8_t> build_set_angular_velocity(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                                    ObjectID id, impulse::Vec3 angular_velocity) {
  fbb.Clear();
  const wire::Vec3 w = to_wire(angular_velocity);
  const auto message = CreateSetAngularVelocity(fbb, request_id, impulse::to_wire(id), &w);
  return finish(fbb, Message::SetAngularVelocity, message.Union());
}

std::span<const uint8_t> build_raycast(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                       impulse::Vec3 origin, impulse::Vec3 translation, bool all,
                                       std::optional<std::pair<uint32_t, uint32_t>> filter, bool back_faces,
                                       uint64_t seen_tick, float seen_fraction) {
  fbb.Clear();
  const wire::Vec3 o = to_wire(origin);
  const wire::Vec3 t = to_wire(translation);
  const QueryFilter f = filter ? QueryFilter(filter->first, filter->second) : QueryFilter();
  const auto message =
      CreateRaycast(fbb, request_id, &o, &t, all, filter ? &f : nullptr, back_faces, seen_tick, seen_fraction);
  return finish(fbb, Message::Raycast, message.Union());
}

std::span<const uint8_t> build_replay_control(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ReplayAction action, uint64_t tick, float speed) {
  fbb.Clear();
  const auto message = CreateReplayControl(fbb, request_id, action, tick, speed);
  return finish(fbb, Message::ReplayControl, message.Union());
}

std::span<const uint8_t> build_ping(flatbuffers::FlatBufferBuilder& fbb, uint64_t nonce) {
  fbb.Clear();
  const auto message = CreatePing(fbb, nonce);
  return finish(fbb, Message::Ping, message.Union());
}

std::span<const uint8_t> build_disconnect(flatbuffers::FlatBufferBuilder& fbb, std::string_view reason) {
  fbb.Clear();
  const auto text = create_string(fbb, reason);
  const auto message = CreateDisconnect(fbb, text);
  return finish(fbb, Message::Disconnect, message.Union());
}

std::span<const uint8_t> build_connect_accepted(flatbuffers::FlatBufferBuilder& fbb, const AcceptedArgs& args) {
  fbb.Clear();
  const QuantizationArgs& q = args.quantization;
  const auto quantization =
      CreateQuantization(fbb, q.world_bound, q.position_fraction_bits, q.orientation_bits, q.max_linear_speed,
                         q.linear_velocity_fraction_bits, q.max_angular_speed, q.angular_velocity_fraction_bits);
  const auto kx = fbb.CreateVector(args.kx_public.data(), args.kx_public.size());
  const auto client_kx = fbb.CreateVector(args.client_kx_public.data(), args.client_kx_public.size());
  const auto message =
      CreateConnectAccepted(fbb, args.client_id, args.tick_hz, args.snapshot_hz, args.tick, quantization,
                            args.max_objects, args.first_request_id, args.replay, args.replay_first_tick,
                            args.replay_last_tick, kx, args.token_bound, client_kx);
  return finish(fbb, Message::ConnectAccepted, message.Union());
}

std::span<const uint8_t> build_connect_rejected(flatbuffers::FlatBufferBuilder& fbb, ResultCode reason,
                                                std::string_view message_text) {
  fbb.Clear();
  const auto text = create_string(fbb, message_text);
  const auto message = CreateConnectRejected(fbb, reason, text);
  return finish(fbb, Message::ConnectRejected, message.Union());
}

std::span<const uint8_t> build_request_result(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ResultCode code, ObjectID id, std::string_view message_text,
                                              uint64_t tick) {
  fbb.Clear();
  const auto text = message_text.empty() ? flatbuffers::Offset<flatbuffers::String>() : create_string(fbb, message_text);
  const auto message = CreateRequestResult(fbb, request_id, code, impulse::to_wire(id), text, tick);
  return finish(fbb, Message::RequestResult, message.Union());
}

std::span<const uint8_t> build_set_state(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                         impulse::Vec3 position, impulse::Quat orientation, impulse::Vec3 velocity,
                                         impulse::Vec3 angular_velocity) {
  fbb.Clear();
  const wire::Vec3 p = to_wire(position);
  const wire::Quat q = to_wire(orientation);
  const wire::Vec3 v = to_wire(velocity);
  const wire::Vec3 w = to_wire(angular_velocity);
  const auto message = CreateSetState(fbb, request_id, impulse::to_wire(id), &p, &q, &v, &w);
  return finish(fbb, Message::SetState, message.Union());
}

std::span<const uint8_t> build_input(flatbuffers::FlatBufferBuilder& fbb, ObjectID id, InputMode mode,
                                     uint64_t first_tick, std::span<const InputFrame> frames) {
  fbb.Clear();
  const auto vec = fbb.CreateVectorOfStructs(frames.data(), std::min(frames.size(), kMaxInputFrames));
  const auto message = CreateInput(fbb, impulse::to_wire(id), mode, first_tick, vec);
  return finish(fbb, Message::Input, message.Union());
}

std::span<const uint8_t> build_pong(flatbuffers::FlatBufferBuilder& fbb, uint64_t nonce, uint64_t tick,
                                    uint64_t server_time_us) {
  fbb.Clear();
  const auto message = CreatePong(fbb, nonce, tick, server_time_us);
  return finish(fbb, Message::Pong, message.Union());
}

// --- Snapshots and collision events ------------------------------------------------------------

namespace {

// The probes build at most this many elements; the capacities (about 14-30) stay far below.
constexpr size_t kProbeElements = 64;

std::span<const uint8_t> build_snapshot_unchecked(flatbuffers::FlatBufferBuilder& fbb, uint64_t tick,
                                                  std::span<const uint8_t> data, int16_t input_lead,
                                                  uint32_t stop_in_ms, std::span<const RelayedInput> inputs) {
  fbb.Clear();
  const auto vec = fbb.CreateVector(data.data(), data.size());
  const auto relayed = inputs.empty() ? flatbuffers::Offset<flatbuffers::Vector<const RelayedInput*>>()
                                      : fbb.CreateVectorOfStructs(inputs.data(), inputs.size());
  const auto message = CreateSnapshot(fbb, tick, vec, input_lead, stop_in_ms, relayed);
  return finish_unchecked(fbb, Message::Snapshot, message.Union());
}

std::span<const uint8_t> build_raycast_result_unchecked(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                                        ResultCode code, uint64_t tick,
                                                        std::span<const RayHitEntry> hits, bool truncated,
                                                        std::string_view message_text) {
  fbb.Clear();
  const auto vec = hits.empty() ? flatbuffers::Offset<flatbuffers::Vector<const RayHitEntry*>>()
                                : fbb.CreateVectorOfStructs(hits.data(), hits.size());
  const auto text =
      message_text.empty() ? flatbuffers::Offset<flatbuffers::String>() : create_string(fbb, message_text);
  const auto message = CreateRaycastResult(fbb, request_id, code, tick, vec, truncated, text);
  return finish_unchecked(fbb, Message::RaycastResult, message.Union());
}

std::span<const uint8_t> build_collision_events_block_unchecked(flatbuffers::FlatBufferBuilder& fbb,
                                                                std::span<const uint8_t> block) {
  fbb.Clear();
  const auto vec = fbb.CreateVector(block.data(), block.size());
  const auto message = CreateCollisionEvents(fbb, {}, vec);
  return finish_unchecked(fbb, Message::CollisionEvents, message.Union());
}

}  // namespace

size_t snapshot_payload_capacity(size_t relayed_inputs) {
  // Worst-case header: the largest tick, an input lead and a stop time, so every scalar is present,
  // and each count of relayed inputs.
  static const std::array<size_t, kMaxRelayedInputs + 1> capacity = [] {
    std::array<size_t, kMaxRelayedInputs + 1> out{};
    flatbuffers::FlatBufferBuilder fbb(2 * kMaxDatagramBytes);
    const std::vector<uint8_t> probe(kMaxDatagramBytes, 0);
    const std::vector<RelayedInput> inputs(kMaxRelayedInputs);
    for (size_t k = 0; k <= kMaxRelayedInputs; ++k) {
      const auto size = [&](size_t n) {
        return build_snapshot_unchecked(fbb, UINT64_MAX, std::span<const uint8_t>(probe).first(n), 0, UINT32_MAX,
                                        std::span<const RelayedInput>(inputs).first(k))
            .size();
      };
      const size_t overhead = size(1) - 1;
      size_t n = kMaxPlaintextBytes - overhead;
      while (n > 0 && size(n) > kMaxPlaintextBytes) --n;
      // The 1-byte probe counted up to 3 bytes of vector alignment as overhead: grow back to the largest fit.
      while (size(n + 1) <= kMaxPlaintextBytes) ++n;
      out[k] = n;
    }
    return out;
  }();
  return capacity[std::min(relayed_inputs, kMaxRelayedInputs)];
}

std::span<const uint8_t> build_snapshot(flatbuffers::FlatBufferBuilder& fbb, uint64_t tick,
                                        std::span<const uint8_t> data, int16_t input_lead, uint32_t stop_in_ms,
                                        std::span<const RelayedInput> inputs) {
  inputs = inputs.first(std::min(inputs.size(), kMaxRelayedInputs));
  const size_t room = snapshot_payload_capacity(inputs.size());
  const auto bytes = build_snapshot_unchecked(fbb, tick, data.first(std::min(data.size(), room)), input_lead,
                                              stop_in_ms, inputs);
  assert(bytes.size() <= kMaxPlaintextBytes && "snapshot exceeds the datagram limit");
  return bytes;
}

uint32_t collision_events_per_datagram() {
  // The largest count whose worst-case block fits: the bound is exact arithmetic over the codes'
  // maximal lengths, the envelope overhead is measured by building (vector alignment included).
  static const uint32_t capacity = [] {
    flatbuffers::FlatBufferBuilder fbb(2 * kMaxDatagramBytes);
    const std::vector<uint8_t> probe(max_event_block_bytes(kMaxEventsPerBlock), 0xFF);
    uint32_t n = kMaxEventsPerBlock;
    while (n > 1 && build_collision_events_block_unchecked(
                        fbb, std::span<const uint8_t>(probe).first(max_event_block_bytes(n)))
                            .size() > kMaxPlaintextBytes) {
      --n;
    }
    return n;
  }();
  return capacity;
}

uint32_t raycast_hits_per_datagram() {
  // Worst-case header: every scalar non-default; no message (it is only written without hits).
  static const uint32_t capacity = [] {
    flatbuffers::FlatBufferBuilder fbb(2 * kMaxDatagramBytes);
    const std::vector<RayHitEntry> probe(kProbeElements);
    return measure_capacity(sizeof(RayHitEntry), [&](size_t n) {
      return build_raycast_result_unchecked(fbb, UINT32_MAX, ResultCode::ShuttingDown, UINT64_MAX,
                                            std::span<const RayHitEntry>(probe.data(), std::min(n, probe.size())),
                                            true, {})
          .size();
    });
  }();
  return capacity;
}

std::span<const uint8_t> build_raycast_result(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ResultCode code, uint64_t tick, std::span<const RayHitEntry> hits,
                                              bool truncated, std::string_view message) {
  const bool ok = code == ResultCode::Ok;
  const size_t kept = ok ? std::min<size_t>(hits.size(), raycast_hits_per_datagram()) : 0;
  const bool cut = ok && (truncated || kept < hits.size());
  const auto bytes = build_raycast_result_unchecked(fbb, request_id, code, tick, hits.first(kept), cut,
                                                    ok ? std::string_view{} : message);
  assert(bytes.size() <= kMaxPlaintextBytes && "raycast result exceeds the datagram limit");
  return bytes;
}

std::span<const uint8_t> build_collision_events(flatbuffers::FlatBufferBuilder& fbb,
                                                std::span<const CollisionEvent> events,
                                                const QuantizationConfig& quantization,
                                                std::span<const JointEventFields> joints) {
  const size_t n = std::min<size_t>(events.size(), collision_events_per_datagram());
  const auto batch = events.first(n);
  if (!joints.empty()) joints = joints.first(std::min(joints.size(), n));
  const size_t block_bytes = event_block_bytes(batch, quantization, joints);
  fbb.Clear();
  if (block_bytes == 0) return {};  // invalid quantisation or event type: a caller bug
  // The block is encoded in place, into the vector's bytes inside the builder.
  uint8_t* block = nullptr;
  const auto vec = fbb.CreateUninitializedVector(block_bytes, &block);
  if (!encode_collision_events(batch, quantization, std::span<uint8_t>(block, block_bytes), joints)) {
    fbb.Clear();
    return {};
  }
  const auto message = CreateCollisionEvents(fbb, {}, vec);
  const auto bytes = finish_unchecked(fbb, Message::CollisionEvents, message.Union());
  assert(bytes.size() <= kMaxPlaintextBytes && "collision events exceed the datagram limit");
  return bytes;
}

std::span<const uint8_t> build_collision_events_block(flatbuffers::FlatBufferBuilder& fbb,
                                                      std::span<const uint8_t> block) {
  const size_t limit = max_event_block_bytes(collision_events_per_datagram());
  const auto bytes = build_collision_events_block_unchecked(fbb, block.first(std::min(block.size(), limit)));
  assert(bytes.size() <= kMaxPlaintextBytes && "collision events exceed the datagram limit");
  return bytes;
}

}  // namespace impulse::wire
