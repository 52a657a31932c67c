// The value types of the Impulse client API: the protocol's enums, what a game sends
// (ObjectDesc, InterestArea), what arrives (ObjectState, results, raycasts, collision events,
// pongs, PollResult) and the client's tuning (ClientConfig). Diagnostics are in diagnostics.h.
// Standalone: standard headers, shared/math.h and shared/object_id.h only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse {

// The protocol's enums, with the values of schemas/impulse.fbs (the library checks that they
// match at compile time), so a game needs no generated header.

/// How a body moves (schemas/impulse.fbs BodyKind).
enum class BodyKind : uint8_t {
  Dynamic = 0,    ///< moved by gravity, forces and collisions
  Static = 1,     ///< never moves
  Kinematic = 2,  ///< moves at its set velocity; pushes dynamic bodies; ignores forces
};

/// A body's collision shape (schemas/impulse.fbs ShapeKind); ObjectDesc::dims gives its size.
/// Hull (protocol 8), Mesh and HeightField (protocol 9): assets of the world's scene (a convex
/// hull; a static triangle mesh or heightfield); ObjectState::asset names it, and its geometry
/// comes out of band (docs/PROTOCOL.md, "Assets"). Clients cannot create them.
enum class ShapeKind : uint8_t {
  Sphere = 0,
  Box = 1,
  Capsule = 2,
  Plane = 3,
  Hull = 4,
  Mesh = 5,
  HeightField = 6,
  Cylinder = 7,  ///< dims (radius, half_height, radius): flat caps, axis along local Y
};

/// The server's answer code to a request or a connect (schemas/impulse.fbs ResultCode, where
/// each is explained).
enum class ResultCode : uint16_t {
  Ok = 0,
  StaleId = 1,          ///< the ObjectID is null, out of range or no longer live
  NotDynamic = 2,       ///< forces and impulses only act on dynamic bodies
  InvalidArgument = 3,  ///< a number is not finite or out of its documented range
  WorldFull = 4,        ///< the server's object limit is reached
  NotConnected = 5,     ///< a request arrived from an address with no session
  VersionMismatch = 6,  ///< the protocol version is not the server's
  ServerFull = 7,       ///< max clients reached
  ShuttingDown = 8,     ///< the server is stopping
  NotOwner = 9,         ///< the object belongs to another client and was not created as shared
  QuotaExceeded = 10,   ///< the client's live-object quota is used up
  RateLimited = 11,     ///< more requests or bytes per second than the server allows
  TokenRequired = 12,   ///< the server wants a connect token (it runs with --token-key)
  TokenInvalid = 13,    ///< the token is malformed, forged, or sealed with another key
  TokenExpired = 14,    ///< the token's expiry has passed
  RequestTooOld = 15,   ///< the request's sequence is below the server's dedup window; not applied
  ReadOnly = 16,        ///< the server plays a recording: spectators cannot change the world
  NotAReplay = 17,      ///< ReplayControl sent to a live server
  NotController = 18,   ///< ReplayControl from a spectator that may not control the shared timeline
  OverBudget = 19,      ///< this client's bodies cost more than its share of the tick: pushes refused for 2 s
  TickOutOfRange = 20,  ///< an action stamped too far ahead, or a raycast's seen tick outside the server's lag-compensation window
};
/// The code's name ("Ok", "StaleId", ...); "unknown" for a value this build does not know.
const char* to_string(ResultCode code);

/// Whether two objects started or stopped touching (schemas/impulse.fbs ContactEventType).
enum class ContactEventType : uint8_t { Begin = 0, End = 1 };

/// What replay_control() asks a replay server to do (schemas/impulse.fbs ReplayAction).
enum class ReplayAction : uint8_t {
  Pause = 0,     ///< stop at the current tick (snapshots of it keep coming)
  Resume = 1,    ///< play on from the current tick (from the first tick when at the end)
  Seek = 2,      ///< jump to the given tick
  SetSpeed = 3,  ///< play at the given speed times the recorded tick rate
};

/// The ticks a replay server can play and seek to (ClientCore::replay_range), inclusive.
struct ReplayRange {
  uint64_t first_tick = 0;  ///< the recording's initial state
  uint64_t last_tick = 0;   ///< its last complete tick
};

/// The shape of a client's area of interest (schemas/impulse.fbs InterestKind).
enum class InterestKind : uint8_t {
  All = 0,     ///< every object within the world bound (the default)
  Sphere = 1,  ///< center and radius
  Box = 2,     ///< min and max corners
};

/// A client's area of interest (Client::set_interest): snapshots and collision events cover only
/// the objects inside it. World frame [m].
struct InterestArea {
  InterestKind kind = InterestKind::All;
  Vec3 center;      ///< Sphere
  float radius = 0; ///< Sphere, (0, 1e5]
  Vec3 min;         ///< Box
  Vec3 max;         ///< Box
};

/// What create_object() asks the server to create. Every value is sent as given: the server is
/// authoritative and answers an out-of-range value with ResultCode::InvalidArgument (the ranges
/// are documented in schemas/impulse.fbs and repeated here).
struct ObjectDesc {
  BodyKind kind = BodyKind::Dynamic;
  /// Sphere, Box, Capsule, or Plane (Static bodies only: the plane through `position` whose
  /// outward normal is `orientation` applied to +Y; everything below it is solid).
  ShapeKind shape = ShapeKind::Sphere;
  /// Sphere: x = radius [m] (y, z ignored); box: half extents [m] along the local axes; capsule:
  /// x = radius, y = half height of the core segment along local Y [m]; plane: ignored. Radii and
  /// half extents in [0.001, 1000], a capsule half height in [0, 1000]. The server may lower the
  /// upper bound for clients (--max-client-extent, default 4 m: radius, half extent, or capsule
  /// half height + radius) and refuse client planes.
  Vec3 dims{0.5f, 0.5f, 0.5f};
  Vec3 position;             ///< centre of mass, world frame [m]; |component| <= 1e5
  /// Local to world, Hamilton convention, w the scalar part; | |q| - 1 | <= 1e-3 (the server
  /// normalises it). Identity by default.
  Quat orientation;
  Vec3 velocity;             ///< world frame [m/s]; |component| <= 1e4
  Vec3 angular_velocity;     ///< world frame [rad/s]; |component| <= 100
  float mass = 1.0f;         ///< [kg], dynamic bodies only, in (0, 1e6]
  float restitution = 0.0f;  ///< coefficient of restitution, [0, 1]
  /// Coulomb friction coefficient (dimensionless), [0, 10]; a contact uses sqrt(mu_a * mu_b).
  float friction = 0.5f;
  float angular_damping = 0.05f;  ///< [1/s], [0, 100]: w *= 1 / (1 + dt * damping) per step
  uint16_t material = 0;     ///< id in the server's material-pair table; 0 = default
  bool sensor = false;       ///< reports Begin/End collision events but gets no contact response
  /// Any client may push or destroy it. Otherwise only its creator may (unless the server runs
  /// with --authority any); others get ResultCode::NotOwner.
  bool shared = false;
  /// Dynamic or kinematic: the body starts asleep where it is, with zero velocities (velocity and
  /// angular_velocity are ignored), and stays put until something wakes it: an awake body or a
  /// moving kinematic body touching it, or a push. For props placed at rest.
  bool asleep = false;
  /// Collision filter (Box2D's b2Filter rules): two bodies touch (contact or sensor event) iff
  /// they share a non-zero `group` that is positive, or, with no common group, each one's
  /// `category` has a bit in the other's `mask`. A shared negative group never touches. The
  /// defaults touch every other default body. Change it later with ClientCore::set_filter.
  uint32_t category = 1;     ///< the categories this body belongs to (bits; usually one)
  uint32_t mask = ~0u;       ///< the categories it touches
  int32_t group = 0;         ///< 0 = no group
  /// Dynamic: continuous collision also against dynamic and kinematic bodies (Box2D's bullets).
  /// Every fast dynamic body is already swept against static bodies so it cannot pass through
  /// walls; set this for projectiles that must not pass through other moving bodies either.
  bool bullet = false;
};

/// One object as the server last reported it, dequantised from the delta snapshots (positions to
/// 2^-position_bits m, orientation to about 0.1 degree: docs/PROTOCOL.md, "Snapshot payload").
struct ObjectState {
  ObjectID id;
  Vec3 position;          ///< centre of mass, world frame [m]
  Vec3 velocity;          ///< world frame [m/s]
  Vec3 dims;              ///< as ObjectDesc::dims [m]; capsule (radius, half_height, radius); plane 0
  Quat orientation;       ///< local to world (x_world = position + rotate(orientation, x_local))
  Vec3 angular_velocity;  ///< world frame [rad/s]
  BodyKind kind = BodyKind::Dynamic;
  ShapeKind shape = ShapeKind::Sphere;
  bool sleeping = false;   ///< at rest on the server (velocities are then zero)
  bool sensor = false;
  uint16_t asset = 0;      ///< Hull, Mesh, HeightField: the world's asset id (dims: its bounding half extents)
  /// The snapshot tick whose payload last carried this state. Older than the snapshot it is read
  /// from when the server sent nothing new for the object: unchanged (at rest, or quantised to
  /// the same values) or deferred by the snapshot's byte budget while it moves.
  uint64_t tick = 0;
};

/// The server's answer to one request (create, destroy, force, torque, impulse, velocity,
/// angular velocity). Raycasts are answered by RaycastResult instead.
struct RequestResult {
  uint32_t request_id = 0;                  ///< as returned by the call that sent the request
  ResultCode code = ResultCode::Ok;
  ObjectID id;                              ///< the created (or addressed) object; null when none
  std::string message;                      ///< human-readable reason; empty on Ok
  /// A world-changing request: the server tick whose step it was applied before (its effect is
  /// first in that tick's snapshot); 0 when it was not applied. For an action (set_action_tick)
  /// tick - the stamped tick is how late it was.
  uint64_t tick = 0;

  bool ok() const { return code == ResultCode::Ok; }
};

/// A raycast's filter (Box2D's b2QueryFilter): a body is considered only if its category has a bit
/// in `mask` and `category` has a bit in the body's mask (ObjectDesc). Groups do not apply.
struct RayFilter {
  uint32_t category = 1;  ///< what the ray "is", tested against each body's mask
  uint32_t mask = ~0u;    ///< the body categories it hits
};

/// One raycast hit.
struct RayHit {
  ObjectID id;          ///< the object hit
  Vec3 point;           ///< world frame [m], on the object's surface
  Vec3 normal;          ///< world frame, unit: the surface's outward normal at `point`
  float fraction = 0;   ///< point = origin + fraction * translation, in [0, 1]
};

/// The server's answer to one raycast(). Its hits are PollResult::ray_hits[first, first + count),
/// sorted by (fraction, id): the closest hit only (count <= 1), or every hit when asked for all.
struct RaycastResult {
  uint32_t request_id = 0;                  ///< as returned by raycast()
  ResultCode code = ResultCode::Ok;
  uint64_t tick = 0;                        ///< server tick whose state the hits describe (0 on error)
  std::string message;                      ///< human-readable reason; empty on Ok
  uint32_t first = 0;
  uint32_t count = 0;                       ///< 0 = the ray hit nothing (or an error)
  /// More hits were found than one datagram holds (about 28): the nearest ones are listed.
  bool truncated = false;

  bool ok() const { return code == ResultCode::Ok; }
};

/// Two objects started (Begin) or stopped (End) touching during a server tick. a < b. Tick,
/// ids, type and sequence are exact; point and normal arrive quantised (protocol 4,
/// docs/PROTOCOL.md "Collision events").
struct CollisionEvent {
  uint64_t tick = 0;  ///< server tick of the step that produced the event
  ContactEventType type = ContactEventType::Begin;
  ObjectID a;
  ObjectID b;
  /// World contact point [m]; for End, the last known point. A multiple of the snapshot position
  /// step 2^-position_bits m (ConnectAccepted.quantization; 1/512 m by default), within half a
  /// step (0.98 mm by default) of the server's point per axis. A point beyond the world bound
  /// arrives clamped to it.
  Vec3 point;
  /// World frame, unit (to float rounding), from a towards b; octahedral 2 x 12 bits, within
  /// 0.0594 degrees (1.04e-3 rad, wire::max_normal_error_rad) of the server's normal. Axis-aligned
  /// normals (a contact with a level ground) are exact.
  Vec3 normal;
  uint32_t sequence = 0;  ///< the session's event number (each is delivered once)
};

/// The joint kinds (schemas/impulse.fbs JointKind; docs/PROTOCOL.md, "Joints").
enum class JointKind : uint8_t {
  Point = 0,     ///< ball and socket
  Hinge = 1,     ///< revolute about one axis, with limits, motor and spring
  Distance = 2,  ///< the anchors stay within [min_length, max_length] (or rigid), with a spring
  Fixed = 3,     ///< weld
  Slider = 4,    ///< prismatic along one axis, with limits, motor and spring in metres and newtons
  SwingTwist = 5,  ///< ragdoll joint: a point, the swing within a cone, the twist within a range, friction
};

/// How the server maps an input frame onto its body (schemas/impulse.fbs InputMode).
enum class InputMode : uint8_t {
  Force = 0,     ///< linear = force [N], angular = torque [N·m], for that tick's step
  Velocity = 1,  ///< linear = velocity [m/s], angular = angular velocity [rad/s], set before that tick's step
};

/// A hinge motor's mode (schemas/impulse.fbs JointMotorMode).
enum class JointMotorMode : uint8_t {
  Off = 0,
  Velocity = 1,  ///< drives the angle's rate to `speed` [rad/s]
  Position = 2,  ///< drives the angle to `target_angle` [rad] (a 2 Hz spring, damping ratio 1)
};

/// What create_joint() asks the server to join. Anchors and the axis are world-frame, at the
/// bodies' poses when the server applies it; every value is sent as given and range-checked by
/// the server (docs/PROTOCOL.md, "Joints").
struct JointDesc {
  JointKind kind = JointKind::Point;
  ObjectID body_a;                  ///< a live body
  ObjectID body_b;                  ///< a live body, or null: the static world
  Vec3 anchor;                      ///< [m]; Distance: A's end
  std::optional<Vec3> anchor_b;     ///< Distance only: B's end [m] (required there)
  std::optional<Vec3> axis;         ///< Hinge: the axis (default +Y)
  float min_length = 0, max_length = 0;              ///< Distance [m]; both 0 = rigid
  float spring_hertz = 0, spring_damping_ratio = 0;  ///< Distance, Hinge; 0 Hz = no spring
  bool enable_limit = false;
  float lower_angle = 0, upper_angle = 0;  ///< Hinge [rad], within +-0.99 pi
  JointMotorMode motor_mode = JointMotorMode::Off;
  float motor_speed = 0;         ///< Velocity motor [rad/s]
  float max_motor_torque = 0;    ///< [N·m]
  float target_angle = 0;        ///< the hinge spring's rest angle [rad]
  float motor_target_angle = 0;  ///< Position motor [rad]
  float break_force = 0, break_torque = 0;  ///< [N], [N·m]; 0 = unbreakable
  bool collide_connected = false;           ///< the two bodies keep colliding
  /// Slider only: B's anchor's offset from A's along the axis [m], 0 at creation.
  float lower_translation = 0, upper_translation = 0;
  float max_motor_force = 0;                                   ///< [N]; motor_speed is then in m/s
  float target_translation = 0, motor_target_translation = 0;  ///< spring rest and motor target [m]
  /// SwingTwist only (`axis` is the twist axis; with enable_limit the twist stays within
  /// [lower_angle, upper_angle]): the swing's cone [rad], and the friction torque [N·m].
  float cone_angle = 0;
  float friction_torque = 0;
};

/// Why a joint was removed (JointEvent::removed_reason).
enum class JointRemovedReason : uint8_t { Destroyed = 0, Broken = 1, BodyGone = 2 };

/// A joint the client learned of (JointEvent::added) or that left the world. Reliable and
/// delivered once each, like collision events; every session hears of every joint, not only
/// those in its area of interest. Anchors arrive quantised like collision points.
struct JointEvent {
  uint64_t tick = 0;       ///< the server tick of the change (of the announcement for a joint older than the session)
  bool added = false;      ///< true: JointAdded; false: JointRemoved
  ObjectID joint;
  ObjectID a, b;           ///< its bodies; b null = the static world
  JointKind kind = JointKind::Point;            ///< added only
  JointRemovedReason removed_reason = JointRemovedReason::Destroyed;  ///< removed only
  Vec3 local_anchor_a;     ///< added only: A's anchor in A's frame, relative to its centre [m]
  Vec3 local_anchor_b;     ///< added only: B's anchor in B's frame (world frame when b is null) [m]
  uint32_t sequence = 0;   ///< the session's event number
};

/// A Pong that answered one of this client's ping() calls.
struct PongInfo {
  uint64_t nonce = 0;                     ///< as returned by ping()
  uint64_t server_tick = 0;               ///< the server's tick when it answered
  std::chrono::microseconds rtt{0};       ///< round-trip time measured on this client's clock
};

/// Another client's input for one body, relayed by the server in a snapshot: the frame the
/// server applied to `id` before its step to the snapshot's tick (send_input's arguments, as that
/// client sent them). A game that predicts can run the body on with it (predict::Predictor);
/// what it means is up to the game, as for send_input.
struct RelayedInput {
  ObjectID id;
  InputMode mode = InputMode::Force;
  Vec3 linear;             ///< Force: [N]; Velocity: [m/s]; world frame
  Vec3 angular;            ///< Force: [N·m]; Velocity: [rad/s]; world frame
  /// 0: the frame its owner sent for this tick; n >= 1: its last frame, repeated by the server for
  /// the n-th tick because no newer one had arrived.
  uint8_t repeats = 0;
};

/// One snapshot that completed (every part of its tick arrived) during a poll().
/// Its objects are PollResult::snapshot_objects[first, first + count), sorted by ObjectID; the
/// other clients' inputs it relayed are PollResult::snapshot_inputs[inputs_first, + inputs_count)
/// (nearest the area's centre first; at most 8).
struct SnapshotRange {
  uint64_t tick = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t inputs_first = 0;
  uint32_t inputs_count = 0;
};

/// Everything that arrived during one poll(). Owned by the Client and reused (vectors are
/// cleared, not freed): the reference returned by poll() and every span/pointer into it stay
/// valid until the next call to poll() or connect(), or the Client's destruction.
struct PollResult {
  /// Completed snapshots, oldest first. Usually zero or one per frame; objects() holds the latest.
  std::vector<SnapshotRange> snapshots;
  std::vector<ObjectState> snapshot_objects;  ///< backing store of `snapshots`
  std::vector<RelayedInput> snapshot_inputs;  ///< backing store of `snapshots`' relayed inputs
  std::vector<RequestResult> results;         ///< in arrival order
  std::vector<RaycastResult> raycasts;        ///< answers to raycast(), in arrival order
  std::vector<RayHit> ray_hits;               ///< backing store of `raycasts`
  std::vector<CollisionEvent> collisions;     ///< in arrival order (server order within a tick)
  std::vector<JointEvent> joints;             ///< joints added and removed, in arrival order
  std::vector<PongInfo> pongs;                ///< answers to ping(); keepalive and clock-sync pings are not listed
  bool server_disconnected = false;           ///< the server closed the session (see reason)
  std::string disconnect_reason;

  /// The objects of one completed snapshot of this result, sorted by ObjectID.
  std::span<const ObjectState> objects_of(const SnapshotRange& s) const {
    return std::span<const ObjectState>(snapshot_objects).subspan(s.first, s.count);
  }
  /// Other clients' inputs relayed with one completed snapshot of this result.
  std::span<const RelayedInput> inputs_of(const SnapshotRange& s) const {
    return std::span<const RelayedInput>(snapshot_inputs).subspan(s.inputs_first, s.inputs_count);
  }
  /// The hits of one raycast answer of this result, sorted by (fraction, id).
  std::span<const RayHit> hits_of(const RaycastResult& r) const {
    return std::span<const RayHit>(ray_hits).subspan(r.first, r.count);
  }
  bool empty() const {
    return snapshots.empty() && results.empty() && raycasts.empty() && collisions.empty() && joints.empty() &&
           pongs.empty() &&
           !server_disconnected;
  }
};

/// Tuning of a Client's clock sync and interpolation buffer (Client::set_config). The defaults:
/// a delay of two snapshot intervals plus the measured jitter, 250 ms of extrapolation on loss,
/// a 100 ms decaying correction.
struct ClientConfig {
  /// Fixed interpolation delay [s], in [0, 5]: how far behind a typical snapshot arrival the
  /// render tick runs (Client::render_tick). nullopt = the default, two snapshot intervals plus
  /// the measured jitter (default_delay_ticks, ClockSync::jitter_s), which follows the link.
  std::optional<double> interpolation_delay_s;
  /// Longest extrapolation past the newest state [s], in [0, 10]
  /// (InterpolationConfig::max_extrapolation_s).
  double max_extrapolation_s = 0.25;
  /// Time constant of the correction that blends an extrapolated pose into late data [s], in
  /// (0, 10] (InterpolationConfig::correction_time_constant_s).
  double correction_time_constant_s = 0.1;
  /// States kept per object by the interpolation buffer, in [2, 256]
  /// (InterpolationConfig::history).
  uint32_t interpolation_history = 32;
  /// false: keep no interpolation buffer, so pose_at and pose_at_tick return nullopt and each
  /// snapshot costs only its decode. For headless clients (bots, load generators, tools) that
  /// read objects() and never render; the clock sync still runs.
  bool interpolation = true;
  /// false: PollResult::snapshots still lists each completed snapshot, with count 0, and
  /// snapshot_objects stays empty: the whole view is not copied per snapshot. objects() holds
  /// the latest view either way. For headless clients that read only objects().
  bool snapshot_views = true;

  /// True when every field is in range; otherwise false and, if `error` is not null, a message
  /// naming the first bad field.
  bool validate(std::string* error) const;
};

/// Splits "HOST:PORT" ("127.0.0.1:7777", "localhost:7777", "[::1]:7777") into its parts.
/// Returns false and sets *error to a message naming the problem on a bad value.
bool parse_host_port(std::string_view text, std::string* host, uint16_t* port, std::string* error);

}  // namespace impulse
