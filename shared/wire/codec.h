// Wire codec shared by server and client: datagram verification, range checks and message
// builders over the FlatBuffers schema in schemas/impulse.fbs. Nothing here asserts or throws on
// wire data: every failure is a reason code the caller counts and logs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include <flatbuffers/flatbuffers.h>

#include "impulse/schemas/impulse_generated.h"
#include "shared/math.h"
#include "shared/object_id.h"
#include "shared/wire/event_codec.h"
#include "shared/wire/quantize.h"

namespace impulse::wire {

/// Version 2 added rotation, capsules, planes, sensors, materials and raycasts; version 3 the
/// packet header, the cookie handshake, tokens, exactly-once requests, ownership, areas of
/// interest and delta-compressed snapshots; version 4 bit-packed collision events
/// (CollisionEvents.packed); version 5 sealed packets after the handshake (Connect.kx_public,
/// ConnectAccepted.kx_public, shared/net/packet_crypto.h) (docs/PROTOCOL.md).
/// Version 10 added ticks: Envelope.apply_tick (actions), Input, Snapshot.input_lead,
/// RequestResult.tick and lag-compensated raycasts (Raycast.seen_tick, seen_fraction).
/// Version 11 added the Cylinder shape kind (7).
inline constexpr uint16_t kProtocolVersion = 11;
/// Most frames one Input carries: 16 ticks (267 ms at 60 Hz) of redundancy.
inline constexpr size_t kMaxInputFrames = 16;
/// Snapshot.input_lead when the session sent no Input in the window (the field's default).
inline constexpr int16_t kNoInputLead = INT16_MIN;
/// No datagram larger than this is ever sent or accepted [bytes].
inline constexpr size_t kMaxDatagramBytes = 1200;
/// Bytes a sealed session datagram adds to its FlatBuffers plaintext: an 8-byte prefix and a
/// 16-byte tag (net::kSealOverheadBytes, asserted equal in packet_crypto.cpp) [bytes].
inline constexpr size_t kSealOverheadBytes = 24;
/// Largest datagram any builder writes, so that it still fits kMaxDatagramBytes once sealed [bytes].
inline constexpr size_t kMaxPlaintextBytes = kMaxDatagramBytes - kSealOverheadBytes;
/// Size of Connect.kx_public and ConnectAccepted.kx_public, an X25519 public key [bytes].
inline constexpr size_t kKxPublicBytes = 32;
/// Longest client name or message string accepted [bytes].
inline constexpr size_t kMaxStringBytes = 256;
/// Longest Connect.client_name accepted [bytes]; check_request(Connect) rejects longer ones.
inline constexpr size_t kMaxClientNameBytes = 64;
/// Longest Connect.cookie / Challenge.cookie accepted [bytes].
inline constexpr size_t kMaxCookieBytes = 64;
/// Longest Connect.token accepted [bytes].
inline constexpr size_t kMaxTokenBytes = 256;
/// Receive buffers must be aligned to this [bytes]: the widest scalar in the schema (u64) is read
/// in place, so an unaligned buffer would make those reads undefined behaviour.
inline constexpr size_t kDatagramAlignment = 8;

// Range limits of check_request. They equal the physics WorldSettings defaults, so a request
// that passes here is not rejected by the World for range reasons; server/request/
// decode_request.cpp ties them with static_asserts (this layer cannot see physics).
inline constexpr float kMaxExtent = 1000.0f;      ///< radius, half extent or capsule half height [m]
/// Smallest sphere or capsule radius and box half extent [m]: physics::kMinExtent (1 mm, a fifth
/// of the contact slop; a smaller, light body's inertia underflows and its inverse is infinite).
inline constexpr float kMinExtent = 1.0e-3f;
inline constexpr float kMaxCoordinate = 1.0e5f;   ///< |position component| [m]
inline constexpr float kMaxSpeed = 500.0f;        ///< |velocity| (length) [m/s]
inline constexpr float kMaxMass = 1.0e6f;         ///< dynamic body mass [kg]
inline constexpr float kMaxFriction = 10.0f;      ///< Coulomb friction coefficient (dimensionless)
inline constexpr float kMaxForce = 1.0e9f;        ///< |force component| [N] (the World also bounds force / mass)
inline constexpr float kMaxImpulse = 1.0e7f;      ///< |impulse component| [N·s]
inline constexpr float kMaxAngularSpeed = 47.12389f; ///< |angular velocity| (length) [rad/s]: 0.25 pi x 60
inline constexpr float kMaxTorque = 1.0e9f;       ///< |torque component| [N·m] (the World also bounds I^-1 torque)
inline constexpr float kMaxAngularDamping = 100.0f;  ///< angular damping [1/s]
/// Largest accepted | |q| - 1 | of an orientation; the server normalises what it accepts.
inline constexpr float kQuatNormTolerance = 1.0e-3f;
/// Longest raycast [m]: |translation| of a Raycast. Bounds the broadphase cells one ray visits.
inline constexpr float kMaxRayLength = 2000.0f;

/// Why a datagram was dropped before any use. Each is counted by the receiver.
enum class DropReason : uint8_t {
  None = 0,
  Empty,            ///< zero bytes, or too short to hold a root offset
  Oversized,        ///< larger than kMaxDatagramBytes
  BadIdentifier,    ///< file identifier is not "IMPL"
  VerifyFailed,     ///< the FlatBuffers Verifier rejected the buffer
  VersionMismatch,  ///< envelope protocol_version != kProtocolVersion
  NoMessage,        ///< the union is empty or of an unknown type
  WrongDirection,   ///< a server message sent to the server, or the reverse
  Count,
};
const char* to_string(DropReason reason);

enum class Direction : uint8_t { ClientToServer, ServerToClient };

/// The direction a message type travels in. Disconnect travels both ways; NONE and unknown
/// types travel in neither (verify_datagram reports them as NoMessage first).
bool is_sent_by_client(Message type);
bool is_sent_by_server(Message type);

/// A datagram that passed verification; `envelope` points into the caller's buffer and lives as
/// long as that buffer. When reason != None, envelope is null except for VersionMismatch, where
/// it is kept so a server can answer a Connect with ConnectRejected.
struct Verified {
  const Envelope* envelope = nullptr;
  DropReason reason = DropReason::None;
};

/// Verifies size, identifier, FlatBuffers structure (Verifier with depth and table limits),
/// protocol version and message direction. O(size). Reads nothing before the Verifier passed.
/// `bytes.data()` must be aligned to kDatagramAlignment (a caller bug otherwise; reported as
/// VerifyFailed, never read). Vectors of 8-byte-aligned structs (Snapshot.objects,
/// CollisionEvents.events) must be 8-byte aligned within the buffer; the stock Verifier does not
/// check this, so verify_datagram does (VerifyFailed). The same holds for RaycastResult.hits.
Verified verify_datagram(std::span<const uint8_t> bytes, Direction expected);

/// Result of a semantic range check on a verified request.
struct Check {
  ResultCode code = ResultCode::Ok;
  std::string_view message;  ///< static string naming the field, e.g. "mass must be > 0 and finite"

  bool ok() const { return code == ResultCode::Ok; }
};

/// Range checks that Verifier cannot do: finite numbers, documented bounds, mass > 0, extents,
/// known enum values, required fields. Each failure returns InvalidArgument (VersionMismatch for
/// a Connect of another protocol version) and a static message naming the field.
///  - CreateObject: kind and shape known; a Plane only with kind Static; dims present (except
///    for a plane, where they are ignored and may be absent) and finite, each used component in
///    range: sphere dims.x (radius) in [kMinExtent, kMaxExtent]; box all three in [kMinExtent,
///    kMaxExtent]; capsule dims.x (radius) in [kMinExtent, kMaxExtent] and dims.y (half height)
///    in [0, kMaxExtent]; cylinder dims.x (radius) and dims.y (half height) in [kMinExtent,
///    kMaxExtent];
///    |position component| <= kMaxCoordinate; |velocity| <= kMaxSpeed; mass finite, and in (0, kMaxMass]
///    for a dynamic body; restitution in [0, 1]; friction finite and in [0, kMaxFriction];
///    orientation finite with | |q| - 1 | <= kQuatNormTolerance; |angular_velocity|
///    <= kMaxAngularSpeed; angular_damping in [0, kMaxAngularDamping]. Absent position,
///    velocity and angular_velocity mean zero, an absent orientation the identity. Sensor and
///    material take any value, for any kind.
///  - ApplyForce: force present, |component| <= kMaxForce; point (optional) finite.
///  - ApplyImpulse: impulse present, |component| <= kMaxImpulse; point (optional) finite.
///  - ApplyTorque: torque present, |component| <= kMaxTorque.
///  - SetVelocity: velocity present, finite, |velocity| <= kMaxSpeed (its length).
///  - SetAngularVelocity: angular_velocity present, finite, |angular_velocity| <= kMaxAngularSpeed.
///  - Raycast: origin present, |component| <= kMaxCoordinate; translation present, finite, with
///    0 < |translation| <= kMaxRayLength (a zero-length ray has no direction).
///  - Connect: protocol_version == kProtocolVersion; client_name <= kMaxClientNameBytes.
///  - MoveKinematic: position present, |component| <= kMaxCoordinate; orientation (optional)
///    finite with | |q| - 1 | <= kQuatNormTolerance. (The speed it implies is checked by the World.)
Check check_request(const MoveKinematic& m);
Check check_request(const CreateObject& m);
Check check_request(const ApplyForce& m);
Check check_request(const ApplyImpulse& m);
Check check_request(const ApplyTorque& m);
Check check_request(const SetVelocity& m);
Check check_request(const SetAngularVelocity& m);
Check check_request(const Raycast& m);
Check check_request(const Connect& m);
///  - Raycast (v10): seen_fraction in [0, 1) (seen_tick is the server's to range-check).
///  - Input: mode known; first_tick >= 1; 1..kMaxInputFrames frames; Force: |component| <=
///    kMaxForce (linear) and kMaxTorque (angular); Velocity: |linear| <= kMaxSpeed and
///    |angular| <= kMaxAngularSpeed (lengths); all finite.
Check check_request(const Input& m);
///  - SetState: position present, |component| <= kMaxCoordinate; orientation present, finite,
///    | |q| - 1 | <= kQuatNormTolerance; velocity (optional) |v| <= kMaxSpeed; angular_velocity
///    (optional) |w| <= kMaxAngularSpeed.
Check check_request(const SetState& m);
///  - SetInterest: Sphere: center present with |component| <= kMaxCoordinate and radius in
///    (0, kMaxCoordinate]; Box: min and max present, |component| <= kMaxCoordinate, min <= max.
///  - Connect (v3): cookie <= kMaxCookieBytes, token <= kMaxTokenBytes.
Check check_request(const SetInterest& m);

/// [rad] Hinge limits, spring and motor targets: |angle| <= 0.99 pi (the angle wraps at pi).
inline constexpr float kMaxJointAngle = 0.99f * 3.14159265358979f;
/// Joint springs: frequency [Hz] and damping ratio at most this (a stiffer spring is rigid at
/// any tick rate: the solver caps it at a quarter of the substep rate).
inline constexpr float kMaxSpringHertz = 1000.0f;
inline constexpr float kMaxSpringDampingRatio = 1000.0f;
///  - CreateJoint: kind known; anchor present, |component| <= kMaxCoordinate; body_a not null
///    and not body_b; Distance: anchor_b present, within kMaxCoordinate, 0 <= min_length <=
///    max_length <= 2 kMaxCoordinate; Hinge, Slider: axis (optional) finite with length > 1e-6;
///    angles finite, |angle| <= kMaxJointAngle, lower <= upper; motor_mode known, |motor_speed|
///    <= kMaxAngularSpeed (Slider: kMaxSpeed), max_motor_torque, max_motor_force, break_force,
///    break_torque, friction_torque finite in [0, 1e9]; cone_angle in [0, kMaxJointAngle];
///    translations |x| <= kMaxCoordinate, lower <= upper; spring
///    hertz in [0, kMaxSpringHertz], damping ratio in [0, kMaxSpringDampingRatio]. (That the
///    bodies are live, different and one of them dynamic is the World's to answer.)
///  - SetJointMotor: mode known, |speed| <= kMaxSpeed, |target| <= kMaxCoordinate, max_force in
///    [0, 1e9] (the World answers the joint kind's own ranges: a hinge's speed and angle).
Check check_request(const CreateJoint& m);
Check check_request(const SetJointMotor& m);

/// Playback speeds a ReplayControl may ask for: [kMinReplaySpeed, kMaxReplaySpeed] times the
/// recorded tick rate (dimensionless).
inline constexpr float kMinReplaySpeed = 1.0f / 16.0f;
inline constexpr float kMaxReplaySpeed = 16.0f;
///  - ReplayControl: action known; SetSpeed: speed finite and in [kMinReplaySpeed,
///    kMaxReplaySpeed]; Seek: tick in [first_tick, last_tick], the recording's tick range (a
///    server without a recording answers NotAReplay before checking).
Check check_request(const ReplayControl& m, uint64_t first_tick, uint64_t last_tick);

/// Converts between wire and maths vectors. (Inside this namespace an unqualified `Vec3` is the
/// wire struct, hence the qualified return types.)
inline impulse::Vec3 to_vec3(const wire::Vec3& v) { return {v.x(), v.y(), v.z()}; }
inline wire::Vec3 to_wire(const impulse::Vec3& v) { return wire::Vec3(v.x, v.y, v.z); }
/// Converts an optional wire vector (absent = nullptr) to an optional maths vector.
inline std::optional<impulse::Vec3> to_optional_vec3(const wire::Vec3* v) {
  return v ? std::optional<impulse::Vec3>(to_vec3(*v)) : std::nullopt;
}
/// Converts between wire and maths quaternions (same layout: x, y, z, then the scalar w).
inline impulse::Quat to_quat(const wire::Quat& q) { return {q.x(), q.y(), q.z(), q.w()}; }
inline wire::Quat to_wire(const impulse::Quat& q) { return wire::Quat(q.x, q.y, q.z, q.w); }

/// Overwrites the packet header of a finished datagram built by this codec (every builder writes
/// a zeroed header slot). The sender stamps each datagram just before it goes out, when its
/// sequence is known. Returns false when the buffer has no header slot (not built here).
bool stamp_header(std::span<uint8_t> datagram, const PacketHeader& header);
/// Overwrites Envelope.apply_tick of a finished world-changing request built by this codec (its
/// builders write the slot, at 0): the request then applies before the step of tick `tick`
/// (docs/PROTOCOL.md, "Ticks"). Returns false when the datagram has no slot (another type).
bool stamp_apply_tick(std::span<uint8_t> datagram, uint64_t tick);
/// The header of a verified envelope; all zeros (sequence 0 = none) when absent.
PacketHeader header_of(const Envelope& envelope);

/// Builders: each resets `fbb`, writes one finished Envelope (with identifier and version) and
/// returns its bytes, valid until `fbb` is next used. Every builder's output is at most
/// kMaxDatagramBytes (asserted in debug builds); strings are truncated to kMaxStringBytes (at a
/// byte boundary) so that holds for any argument.
std::span<const uint8_t> finish(flatbuffers::FlatBufferBuilder& fbb, Message type,
                                flatbuffers::Offset<void> message);

// --- Client -> server ----------------------------------------------------------------------------

/// Everything a CreateObject carries besides its request id. Units as in impulse.fbs.
struct CreateObjectArgs {
  BodyKind kind = BodyKind::Dynamic;
  ShapeKind shape = ShapeKind::Sphere;
  /// Sphere: x = radius; box: half extents; capsule and cylinder: x = radius, y = half height [m];
  /// plane: unused.
  impulse::Vec3 dims{0.5f, 0.5f, 0.5f};
  impulse::Vec3 position;                 ///< world frame [m]
  impulse::Vec3 velocity;                 ///< world frame [m/s]
  float mass = 1.0f;                      ///< [kg], dynamic only
  float restitution = 0.0f;               ///< [0, 1]
  float friction = 0.5f;                  ///< Coulomb coefficient, [0, 10]; mixed sqrt(mu_a * mu_b)
  impulse::Quat orientation;              ///< local to world (Hamilton, w scalar); identity default
  impulse::Vec3 angular_velocity;         ///< world frame [rad/s]
  float angular_damping = 0.05f;          ///< [1/s], [0, 100]
  uint16_t material = 0;                  ///< material-pair table id; 0 = default
  bool sensor = false;                    ///< events only, no contact response
  bool shared = false;                    ///< any client may push or destroy it, not only its creator
  bool asleep = false;                    ///< dynamic or kinematic: starts asleep, velocities ignored
  uint32_t category = 1;                  ///< collision filter: the body's categories (bits)
  uint32_t mask = ~0u;                    ///< collision filter: the categories it touches
  int32_t group = 0;                      ///< collision filter: 0 none, > 0 always, < 0 never within a group
  bool bullet = false;                    ///< dynamic: continuous collision against dynamic bodies too
};

/// A CreateJoint request (schemas/impulse.fbs, "joints"): every field as the table names it.
struct CreateJointArgs {
  JointKind kind = JointKind::Point;
  ObjectID body_a;                        ///< a live body
  ObjectID body_b;                        ///< a live body, or null: the static world
  impulse::Vec3 anchor;                   ///< [m], world frame
  std::optional<impulse::Vec3> anchor_b;  ///< Distance: B's end [m], world frame
  std::optional<impulse::Vec3> axis;      ///< Hinge: world frame; nullopt = +Y
  float min_length = 0, max_length = 0;   ///< Distance [m]
  float spring_hertz = 0, spring_damping_ratio = 0;
  bool enable_limit = false;
  float lower_angle = 0, upper_angle = 0;  ///< Hinge [rad]
  JointMotorMode motor_mode = JointMotorMode::Off;
  float motor_speed = 0;                  ///< [rad/s]
  float max_motor_torque = 0;             ///< [N·m]
  float target_angle = 0;                 ///< the spring's rest angle [rad]
  float motor_target_angle = 0;           ///< the position motor's target [rad]
  float break_force = 0, break_torque = 0;  ///< [N], [N·m]; 0 = unbreakable
  bool collide_connected = false;
  float lower_translation = 0, upper_translation = 0;  ///< Slider [m]
  float max_motor_force = 0;                           ///< Slider [N]
  float target_translation = 0, motor_target_translation = 0;  ///< Slider [m]
  float cone_angle = 0;       ///< SwingTwist [rad]
  float friction_torque = 0;  ///< SwingTwist [N·m]
};

/// A SetJointMotor request's motor.
struct JointMotorArgs {
  JointMotorMode mode = JointMotorMode::Off;
  float speed = 0;      ///< Velocity: hinge [rad/s], slider [m/s]
  float target = 0;     ///< Position: hinge [rad], slider [m]
  float max_force = 0;  ///< hinge: torque [N·m]; slider: force [N]
};

/// A SetInterest request's area, world frame [m].
struct InterestArgs {
  InterestKind kind = InterestKind::All;
  impulse::Vec3 center;   ///< Sphere
  float radius = 0;       ///< Sphere, (0, 1e5]
  impulse::Vec3 min;      ///< Box
  impulse::Vec3 max;      ///< Box
};

/// The snapshot quantisation a server announces in ConnectAccepted (schemas/impulse.fbs).
struct QuantizationArgs {
  float world_bound = 0;               ///< [m]
  uint8_t position_fraction_bits = 0;  ///< position step 2^-bits m
  uint8_t orientation_bits = 0;        ///< bits per smallest-three component
  float max_linear_speed = 0;          ///< [m/s]
  uint8_t linear_velocity_fraction_bits = 0;///< step 2^-bits m/s
  float max_angular_speed = 0;         ///< [rad/s]
  uint8_t angular_velocity_fraction_bits = 0;///< step 2^-bits rad/s
};

/// Everything a ConnectAccepted carries.
struct AcceptedArgs {
  uint32_t client_id = 0;
  uint16_t tick_hz = 0;          ///< [Hz]
  uint16_t snapshot_hz = 0;      ///< [Hz]
  uint64_t tick = 0;             ///< the server's current tick
  QuantizationArgs quantization;
  uint32_t max_objects = 0;      ///< the client's live-object quota; 0 = none
  uint32_t first_request_id = 1; ///< the request sequence the server expects first
  bool replay = false;           ///< the server plays a recording; the client is a read-only spectator
  uint64_t replay_first_tick = 0;  ///< replay: the recording's first tick
  uint64_t replay_last_tick = 0;   ///< replay: the recording's last complete tick
  std::array<uint8_t, kKxPublicBytes> kx_public{};  ///< the server's X25519 public key of this session
  bool token_bound = false;      ///< the packet keys mix in the connect token's session secret
  /// The client's key share (Connect.kx_public) this answers, echoed so that the client can tell
  /// an answer to its own Connect from an answer to a replayed one (protocol 6).
  std::array<uint8_t, kKxPublicBytes> client_kx_public{};
};

/// The smallest Connect the server answers [bytes]: the size of the largest possible Challenge,
/// so the answer to an unvalidated address is never larger than what it sent.
size_t min_connect_bytes();
/// Connect with `client_name` (for logs; truncated to kMaxStringBytes here, and the server
/// rejects names longer than kMaxClientNameBytes), the server's `cookie` (empty on the first
/// Connect) and a connect `token` (empty = anonymous), padded to min_connect_bytes().
/// `protocol_version` is overridable for tests.
/// `kx_public` is the client's X25519 public key (kKxPublicBytes; empty leaves the field absent,
/// which the server refuses: for tests).
std::span<const uint8_t> build_connect(flatbuffers::FlatBufferBuilder& fbb, std::string_view client_name,
                                       std::span<const uint8_t> cookie = {}, std::span<const uint8_t> token = {},
                                       std::span<const uint8_t> kx_public = {},
                                       uint16_t protocol_version = kProtocolVersion);
/// SetInterest: the client's area of interest (units of InterestArgs).
std::span<const uint8_t> build_set_interest(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                            const InterestArgs& args);
/// CreateObject with every field of `args` written as given (the server range-checks them).
std::span<const uint8_t> build_create_object(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                             const CreateObjectArgs& args);
/// DestroyObject of `id` (sent in its u64 wire form).
std::span<const uint8_t> build_destroy_object(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ObjectID id);
/// force [N], point [m] (world frame; nullopt = centre of mass).
std::span<const uint8_t> build_apply_force(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                           impulse::Vec3 force,
                                           std::optional<impulse::Vec3> point = std::nullopt);
/// impulse [N·s], point [m] (world frame; nullopt = centre of mass).
std::span<const uint8_t> build_apply_impulse(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                             ObjectID id, impulse::Vec3 impulse,
                                             std::optional<impulse::Vec3> point = std::nullopt);
/// torque [N·m], world frame, for the next step only.
std::span<const uint8_t> build_apply_torque(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                            impulse::Vec3 torque);
/// velocity [m/s], world frame.
std::span<const uint8_t> build_set_velocity(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                            ObjectID id, impulse::Vec3 velocity);
/// angular_velocity [rad/s], world frame.
std::span<const uint8_t> build_set_angular_velocity(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                                    ObjectID id, impulse::Vec3 angular_velocity);
/// MoveKinematic: the target pose of kinematic body `id` (position [m], orientation), world frame.
std::span<const uint8_t> build_move_kinematic(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                              impulse::Vec3 position, impulse::Quat orientation);
/// SetFilter: replaces the collision filter of `id` (any values; see CreateObjectArgs).
std::span<const uint8_t> build_set_filter(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                          uint32_t category, uint32_t mask, int32_t group);
/// CreateJoint with every field of `args` written as given (the server range-checks them).
std::span<const uint8_t> build_create_joint(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                            const CreateJointArgs& args);
/// DestroyJoint of `joint` (a JointID, sent in its u64 wire form like an ObjectID).
std::span<const uint8_t> build_destroy_joint(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                             ObjectID joint);
/// SetJointMotor: replaces the motor of hinge `joint`.
std::span<const uint8_t> build_set_joint_motor(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                               ObjectID joint, const JointMotorArgs& motor);
/// Raycast of the segment origin + t * translation, t in [0, 1] (world frame [m]); `all` asks
/// for every hit instead of the closest.
/// `filter` (optional): {category, mask} of the query (schemas/impulse.fbs QueryFilter).
std::span<const uint8_t> build_raycast(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                       impulse::Vec3 origin, impulse::Vec3 translation, bool all,
                                       std::optional<std::pair<uint32_t, uint32_t>> filter = std::nullopt,
                                       bool back_faces = false, uint64_t seen_tick = 0, float seen_fraction = 0.0f);
/// SetState (temporary ownership): body `id`'s position [m], orientation, velocity [m/s] and
/// angular velocity [rad/s], world frame.
std::span<const uint8_t> build_set_state(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id, ObjectID id,
                                         impulse::Vec3 position, impulse::Quat orientation, impulse::Vec3 velocity,
                                         impulse::Vec3 angular_velocity);
/// Input (fire-and-forget): frames[i] is the input of body `id` for tick first_tick + i; at most
/// kMaxInputFrames are written.
std::span<const uint8_t> build_input(flatbuffers::FlatBufferBuilder& fbb, ObjectID id, InputMode mode,
                                     uint64_t first_tick, std::span<const InputFrame> frames);
/// ReplayControl (impulse-replay serve): `tick` is used by Seek, `speed` (times the recorded
/// tick rate) by SetSpeed; the server range-checks both.
std::span<const uint8_t> build_replay_control(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ReplayAction action, uint64_t tick = 0, float speed = 1.0f);
/// Ping carrying `nonce`, echoed by the Pong.
std::span<const uint8_t> build_ping(flatbuffers::FlatBufferBuilder& fbb, uint64_t nonce);

// --- Either direction ---------------------------------------------------------------------------

/// Disconnect with a human-readable reason (truncated to kMaxStringBytes).
std::span<const uint8_t> build_disconnect(flatbuffers::FlatBufferBuilder& fbb, std::string_view reason);

// --- Server -> client ----------------------------------------------------------------------------

/// Challenge carrying `cookie` (at most kMaxCookieBytes are written).
std::span<const uint8_t> build_challenge(flatbuffers::FlatBufferBuilder& fbb, std::span<const uint8_t> cookie);
/// ConnectAccepted: the session's client id, the server's rates, tick, quantisation and quota.
std::span<const uint8_t> build_connect_accepted(flatbuffers::FlatBufferBuilder& fbb, const AcceptedArgs& args);
/// ConnectRejected with `reason` (VersionMismatch, ServerFull, ShuttingDown, InvalidArgument) and
/// a human-readable message (may be empty; truncated to kMaxStringBytes).
std::span<const uint8_t> build_connect_rejected(flatbuffers::FlatBufferBuilder& fbb, ResultCode reason,
                                                std::string_view message);
/// `id` is the created or addressed object (null ObjectID{} when none); `message` is empty on Ok.
std::span<const uint8_t> build_request_result(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ResultCode code, ObjectID id, std::string_view message,
                                              uint64_t tick = 0);
/// Pong echoing `nonce`, stamped with the server's current tick and its simulation clock [µs]
/// (tick t is stepped at t * 1e6 / tick_hz µs).
std::span<const uint8_t> build_pong(flatbuffers::FlatBufferBuilder& fbb, uint64_t nonce, uint64_t tick,
                                    uint64_t server_time_us);

/// Raycast hits that fit in one RaycastResult datagram (measured like the snapshot's capacity,
/// with a worst-case header). Proven by a unit test.
uint32_t raycast_hits_per_datagram();
/// RaycastResult. On Ok, `hits` (sorted by (fraction, id) by the caller) are written, at most
/// raycast_hits_per_datagram() of them: the first ones are kept and `truncated` is set when
/// some were cut (or when the caller passes truncated = true); `message` is not written. On any
/// other code, `message` (truncated to kMaxStringBytes) is written and `hits` are not. So the
/// datagram always fits.
/// `tick` is the server tick whose state the hits describe (0 with an error).
std::span<const uint8_t> build_raycast_result(flatbuffers::FlatBufferBuilder& fbb, uint32_t request_id,
                                              ResultCode code, uint64_t tick, std::span<const RayHitEntry> hits,
                                              bool truncated, std::string_view message);

/// Most RelayedInput entries one Snapshot carries (Snapshot.inputs).
inline constexpr size_t kMaxRelayedInputs = 8;

/// The largest Snapshot.data payload whose datagram fits kMaxDatagramBytes [bytes] next to
/// `relayed_inputs` (at most kMaxRelayedInputs) Snapshot.inputs entries, measured once per count
/// with a worst-case tick, input lead and stop_in_ms. Proven by a unit test.
size_t snapshot_payload_capacity(size_t relayed_inputs = 0);
/// Snapshot at `tick` carrying the bit-packed payload `data` (docs/PROTOCOL.md, "Snapshot
/// payload") and the relayed `inputs` (the first kMaxRelayedInputs; absent when empty); at most
/// snapshot_payload_capacity(inputs.size()) bytes of `data` are written (callers budget for it).
/// `input_lead` is Snapshot.input_lead [ticks] (kNoInputLead: none); `stop_in_ms` is
/// Snapshot.stop_in_ms, the time left of a drain [ms] (0: not stopping).
std::span<const uint8_t> build_snapshot(flatbuffers::FlatBufferBuilder& fbb, uint64_t tick,
                                        std::span<const uint8_t> data, int16_t input_lead = kNoInputLead,
                                        uint32_t stop_in_ms = 0, std::span<const RelayedInput> inputs = {});

/// Collision events that always fit in one CollisionEvents datagram: the largest n whose
/// worst-case block (event_codec.h, max_event_block_bytes: any event values, any valid
/// quantisation) still fits kMaxDatagramBytes with the envelope and a worst-case packet header.
/// Measured by building once; proven by a unit test with worst-case events.
uint32_t collision_events_per_datagram();
/// Builds one CollisionEvents datagram of `events` as a bit-packed block in `packed`
/// (docs/PROTOCOL.md, "Collision events"; `events` is left absent), quantising points with
/// `quantization` (the session's, as announced in ConnectAccepted). At most
/// collision_events_per_datagram() events are written: larger spans are truncated to that
/// capacity (callers split them). Writes the block straight into the builder, allocating nothing
/// beyond `fbb`. Returns an empty span, building nothing, when `quantization` is invalid or an
/// event's type is unknown (caller bugs).
/// `joints` is the joint column of event_codec.h (empty when no event is a joint's).
std::span<const uint8_t> build_collision_events(flatbuffers::FlatBufferBuilder& fbb,
                                                std::span<const CollisionEvent> events,
                                                const QuantizationConfig& quantization,
                                                std::span<const JointEventFields> joints = {});
/// A CollisionEvents datagram carrying `block` verbatim as `packed` (at most
/// max_event_block_bytes(collision_events_per_datagram()) bytes are written): for tests, fuzz
/// corpora and relays that already hold an encoded block.
std::span<const uint8_t> build_collision_events_block(flatbuffers::FlatBufferBuilder& fbb,
                                                      std::span<const uint8_t> block);

}  // namespace impulse::wire
