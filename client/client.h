// impulse::Client: the thin game-side client of an Impulse server. It owns one non-blocking UDP
// socket, sends requests and assembles what the server sends back; it runs no physics and no
// thread of its own. The game loop calls poll() once per frame (netcode.io's client model:
// https://github.com/networkprotocol/netcode, "client_update" driven by the caller).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/clock_sync.h"
#include "client/interpolation.h"
#include "impulse/schemas/impulse_generated.h"
#include "shared/math.h"
#include "shared/net/link_simulator.h"
#include "shared/net/packet_acks.h"
#include "shared/object_id.h"
#include "shared/wire/codec.h"
#include "shared/wire/event_codec.h"
#include "shared/wire/snapshot_codec.h"

namespace impulse {

/// What create_object() asks the server to create. Every value is sent as given: the server is
/// authoritative and answers an out-of-range value with ResultCode::InvalidArgument (the ranges
/// are documented in schemas/impulse.fbs and repeated here).
struct ObjectDesc {
  wire::BodyKind kind = wire::BodyKind::Dynamic;
  /// Sphere, Box, Capsule, or Plane (Static bodies only: the plane through `position` whose
  /// outward normal is `orientation` applied to +Y; everything below it is solid).
  wire::ShapeKind shape = wire::ShapeKind::Sphere;
  /// Sphere: x = radius [m] (y, z ignored); box: half extents [m] along the local axes; capsule:
  /// x = radius, y = half height of the core segment along local Y [m]; plane: ignored. Radii and
  /// half extents in (0, 1000], a capsule half height in [0, 1000].
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
  wire::BodyKind kind = wire::BodyKind::Dynamic;
  wire::ShapeKind shape = wire::ShapeKind::Sphere;
  bool sleeping = false;   ///< at rest on the server (velocities are then zero)
  bool sensor = false;
};

/// The server's answer to one request (create, destroy, force, torque, impulse, velocity,
/// angular velocity). Raycasts are answered by RaycastResult instead.
struct RequestResult {
  uint32_t request_id = 0;                  ///< as returned by the call that sent the request
  wire::ResultCode code = wire::ResultCode::Ok;
  ObjectID id;                              ///< the created (or addressed) object; null when none
  std::string message;                      ///< human-readable reason; empty on Ok

  bool ok() const { return code == wire::ResultCode::Ok; }
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
  wire::ResultCode code = wire::ResultCode::Ok;
  uint64_t tick = 0;                        ///< server tick whose state the hits describe (0 on error)
  std::string message;                      ///< human-readable reason; empty on Ok
  uint32_t first = 0;
  uint32_t count = 0;                       ///< 0 = the ray hit nothing (or an error)
  /// More hits were found than one datagram holds (about 28): the nearest ones are listed.
  bool truncated = false;

  bool ok() const { return code == wire::ResultCode::Ok; }
};

/// Two objects started (Begin) or stopped (End) touching during a server tick. a < b. Tick,
/// ids, type and sequence are exact; point and normal arrive quantised (protocol 4,
/// docs/PROTOCOL.md "Collision events").
struct CollisionEvent {
  uint64_t tick = 0;  ///< server tick of the step that produced the event
  wire::ContactEventType type = wire::ContactEventType::Begin;
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

/// A Pong that answered one of this client's ping() calls.
struct PongInfo {
  uint64_t nonce = 0;                     ///< as returned by ping()
  uint64_t server_tick = 0;               ///< the server's tick when it answered
  std::chrono::microseconds rtt{0};       ///< round-trip time measured on this client's clock
};

/// One snapshot that completed (every part of its tick arrived) during a poll().
/// Its objects are PollResult::snapshot_objects[first, first + count), sorted by ObjectID.
struct SnapshotRange {
  uint64_t tick = 0;
  uint32_t first = 0;
  uint32_t count = 0;
};

/// Everything that arrived during one poll(). Owned by the Client and reused (vectors are
/// cleared, not freed): the reference returned by poll() and every span/pointer into it stay
/// valid until the next call to poll() or connect(), or the Client's destruction.
struct PollResult {
  /// Completed snapshots, oldest first. Usually zero or one per frame; objects() holds the latest.
  std::vector<SnapshotRange> snapshots;
  std::vector<ObjectState> snapshot_objects;  ///< backing store of `snapshots`
  std::vector<RequestResult> results;         ///< in arrival order
  std::vector<RaycastResult> raycasts;        ///< answers to raycast(), in arrival order
  std::vector<RayHit> ray_hits;               ///< backing store of `raycasts`
  std::vector<CollisionEvent> collisions;     ///< in arrival order (server order within a tick)
  std::vector<PongInfo> pongs;                ///< answers to ping(); keepalive and clock-sync pings are not listed
  bool server_disconnected = false;           ///< the server closed the session (see reason)
  std::string disconnect_reason;

  /// The objects of one completed snapshot of this result, sorted by ObjectID.
  std::span<const ObjectState> objects_of(const SnapshotRange& s) const {
    return std::span<const ObjectState>(snapshot_objects).subspan(s.first, s.count);
  }
  /// The hits of one raycast answer of this result, sorted by (fraction, id).
  std::span<const RayHit> hits_of(const RaycastResult& r) const {
    return std::span<const RayHit>(ray_hits).subspan(r.first, r.count);
  }
  bool empty() const {
    return snapshots.empty() && results.empty() && raycasts.empty() && collisions.empty() && pongs.empty() &&
           !server_disconnected;
  }
};

/// Monotonic counters of one Client (never reset by connect()).
struct ClientStats {
  uint64_t datagrams_in = 0;   ///< every datagram received, good or bad
  uint64_t datagrams_out = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t datagrams_dropped = 0;  ///< failed verification, came from a stranger, or made no sense
  /// Drops by wire::DropReason (index = the enum value); None counts datagrams that verified but
  /// were dropped later (unexpected sender, message the client never asked for, bad snapshot payload or
  /// event block).
  std::array<uint64_t, static_cast<size_t>(wire::DropReason::Count)> drops_by_reason{};
  uint64_t send_errors = 0;           ///< send_to failed (the datagram is lost)
  uint64_t snapshots_completed = 0;
  uint64_t snapshots_superseded = 0;  ///< incomplete snapshots abandoned for a newer tick
  uint64_t snapshot_parts_stale = 0;  ///< snapshots older than the latest applied one (not acked)
  uint64_t snapshots_rejected = 0;    ///< snapshot payloads that failed decoding (never applied)
  /// Rejections by wire::SnapshotError (index = the enum value).
  std::array<uint64_t, static_cast<size_t>(wire::SnapshotError::Count)> snapshot_errors{};
  uint64_t requests_resent = 0;       ///< requests sent again because no answer came in time
  uint64_t results_duplicate = 0;     ///< answers to resends of requests already answered (dropped)
  uint64_t events_duplicate = 0;      ///< collision events received again (dropped)
  /// CollisionEvents blocks that failed decoding (none of their events delivered, the datagram not
  /// acked, so the server resends them).
  uint64_t event_blocks_rejected = 0;
  /// Rejections by wire::EventBlockError (index = the enum value).
  std::array<uint64_t, static_cast<size_t>(wire::EventBlockError::Count)> event_block_errors{};
  /// Pings the client sent on its own for clock sync (ClockSync::next_ping_interval cadence);
  /// their Pongs are not listed in PollResult::pongs.
  uint64_t time_pings_sent = 0;
  uint64_t clock_samples = 0;         ///< Pongs (any nonzero-nonce Ping) fed to the clock sync
  /// Snapshots whose tick went back (a replay server seeked back): the clock sync and the
  /// interpolation buffer started over from that snapshot.
  uint64_t timeline_restarts = 0;
};

/// Tuning of a Client's clock sync and interpolation buffer (Client::set_config). The defaults
/// are the issue's: two snapshot intervals plus the measured jitter of delay, 250 ms of
/// extrapolation on loss, a 100 ms decaying correction.
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

/// The client's clock estimates at one local time (Client::clock_estimate).
struct ClockEstimate {
  bool ready = false;         ///< enough Pongs for the offset (ClockSync::ready)
  size_t ping_samples = 0;    ///< Pong samples held, <= ClockSync::kPingWindow
  double offset_s = 0;        ///< server simulation clock - local steady clock [s]; 0 before any
  double rtt_s = 0;           ///< round trip of the lowest-delay pings [s]; 0 before any
  double jitter_s = 0;        ///< the jitter the default delay covers (ClockSync::jitter_s) [s]
  double interpolation_delay_s = 0;  ///< Client::interpolation_delay_s() [s]
  /// The server tick being stepped at that local time (fractional); nullopt until ready.
  std::optional<double> server_tick;
  /// Client::render_tick at that local time; nullopt before the first snapshot.
  std::optional<double> render_tick;
};

/// Splits "HOST:PORT" ("127.0.0.1:7777", "localhost:7777", "[::1]:7777") into its parts.
/// Returns false and sets *error to a message naming the problem on a bad value.
bool parse_host_port(std::string_view text, std::string* host, uint16_t* port, std::string* error);

/// Thin client of an Impulse server. Not thread-safe: one thread owns it (the game loop).
/// Request methods return a request id (>= 1) that the matching RequestResult echoes, or 0 when
/// nothing was sent because the client is not connected. Nothing blocks except connect() and a
/// poll() given a non-zero max_wait.
class Client {
 public:
  /// The local clock of every time argument (the clock the Client stamps arrivals with).
  using TimePoint = std::chrono::steady_clock::time_point;

  Client();
  ~Client();  ///< disconnects if still connected
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Opens a session: resolves host, sends Connect (protocol version, client name) and resends it
  /// every 250 ms until ConnectAccepted or ConnectRejected arrives or `timeout` passes. Blocks
  /// for at most `timeout` (plus name resolution). Replaces any previous session.
  /// @param name  client name for the server's logs, truncated to 64 bytes
  /// @return true when accepted; otherwise false with *error saying what to do (may be null).
  /// @param token  a connect token from the game's backend (impulse-server token for tests);
  ///                empty for a server without --token-key
  bool connect(std::string_view host, uint16_t port, std::chrono::milliseconds timeout,
               std::string* error, std::string_view name = "impulse-client", std::span<const uint8_t> token = {});

  /// Closes the session: sends Disconnect three times (UDP may lose any one) and forgets the
  /// server's state. Safe to call when not connected.
  void disconnect(std::string_view reason = "client closed");

  bool connected() const;

  /// Asks the server to create an object; the new ObjectID arrives in a RequestResult.
  uint32_t create_object(const ObjectDesc& desc);
  /// Asks the server to destroy an object. A stale id is answered with ResultCode::StaleId.
  uint32_t destroy(ObjectID id);
  /// Adds a force [N] (world frame) for the server's next step only, at `point` (world frame
  /// [m]) or at the centre of mass when absent. Dynamic bodies only (else NotDynamic).
  uint32_t apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point = std::nullopt);
  /// Fire-and-forget apply_force: sent once with request_id 0, never resent, never answered (the
  /// server counts and logs a refusal). For per-tick controls, where the next tick's force
  /// supersedes a lost one; unordered with respect to sequenced requests.
  /// @return false when not connected
  bool apply_force_unreliable(ObjectID id, Vec3 force, std::optional<Vec3> point = std::nullopt);
  /// Adds an instantaneous impulse [N·s] (world frame): Δv = impulse / mass.
  /// `point` as apply_force. Dynamic bodies only.
  uint32_t apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point = std::nullopt);
  /// Adds a torque [N·m] (world frame) for the server's next step only. Dynamic bodies only.
  uint32_t apply_torque(ObjectID id, Vec3 torque);
  /// Sets the linear velocity [m/s] (world frame) of a dynamic or kinematic body.
  uint32_t set_velocity(ObjectID id, Vec3 velocity);
  /// Sets the angular velocity [rad/s] (world frame) of a dynamic or kinematic body.
  uint32_t set_angular_velocity(ObjectID id, Vec3 angular_velocity);
  /// Asks the server to cast the segment origin + t * translation, t in [0, 1] (world frame
  /// [m]; 0 < |translation| <= 2000 m) against every shape, sensors included. The answer arrives
  /// through poll() as a RaycastResult (PollResult::raycasts) with the returned request id: the
  /// closest hit, or every hit (nearest first) when `all`. The server answers at its next tick
  /// boundary, against the world after that tick's steps (RaycastResult::tick, the state of the
  /// snapshot of that tick), so requests sent before it are included. 0 = not sent.
  uint32_t raycast(Vec3 origin, Vec3 translation, bool all = false);
  /// Sets this client's area of interest: snapshots and collision events then cover only objects
  /// inside it (objects leave the view once outside it by the server's hysteresis margin).
  /// Answered by a RequestResult. The default area is the whole world.
  uint32_t set_interest(const wire::InterestArgs& area);
  /// A sphere of `radius` [m] about `center` (world frame).
  uint32_t set_interest_sphere(Vec3 center, float radius);
  /// An axis-aligned box from `min` to `max` [m] (world frame).
  uint32_t set_interest_box(Vec3 min, Vec3 max);
  /// Controls the playback of a server that plays a recording (impulse-replay serve): Pause,
  /// Resume, Seek to `tick` (in the recording's range), or SetSpeed to `speed` times the recorded
  /// tick rate ([1/16, 16]). One shared timeline: every spectator sees the effect. Answered by a
  /// RequestResult: Ok, InvalidArgument for a value out of range, NotAReplay from a live server.
  uint32_t replay_control(wire::ReplayAction action, uint64_t tick = 0, float speed = 1.0f);
  /// Sends a Ping; the PongInfo with the returned nonce (>= 1) arrives via poll(). 0 = not sent.
  uint64_t ping();

  /// Receives and processes every queued datagram: verifies each (bad ones are dropped and
  /// counted, never thrown), assembles multi-part snapshots, records results, events and pongs.
  /// Also sends a keepalive Ping when the client has sent nothing for a second, so an idle
  /// session is not timed out by the server, and the clock-sync Pings when due (see pose_at).
  /// Every applied snapshot is stamped with the time it was received here and fed to the clock
  /// sync and the interpolation buffer, so call poll() often (every frame).
  /// @param max_wait  when nothing is queued, wait up to this long for the first datagram
  ///                  (0 = never block; a game loop passes 0, tools and tests a few ms)
  /// @return what arrived since the last poll(); valid until the next poll()/connect().
  const PollResult& poll(std::chrono::milliseconds max_wait = std::chrono::milliseconds{0});

  /// Latest state of every object, from the newest complete snapshot, sorted by ObjectID.
  /// Valid until the next poll()/connect()/disconnect().
  std::span<const ObjectState> objects() const;
  /// The object's latest state, or null if the newest complete snapshot did not contain it.
  /// O(log n). The pointer is valid until the next poll()/connect()/disconnect().
  const ObjectState* find(ObjectID id) const;

  // ------------------------------------------------------------ clock sync and interpolation
  // The client pings the server on its own (a burst of 100 ms at connect, then every 2 s) and
  // estimates the offset of the server's simulation clock (ClockSync, NTP's on-wire estimate);
  // every applied snapshot feeds a playout clock and the interpolation buffer
  // (SnapshotInterpolator, Fiedler's snapshot interpolation). A game renders each frame at
  // pose_at(id, now): poses a fixed delay behind the newest data, lerped/slerped between received
  // states, briefly extrapolated on loss and corrected without a snap when data comes back.

  /// Replaces the clock-sync and interpolation tuning. An invalid config is refused (false, with
  /// *error naming the field) and nothing changes. A new delay applies at once (the render tick
  /// moves by the change; the jitter part, added or removed, is slewed at ClockSync::kSlewRate);
  /// new buffer settings rebuild the buffer from the current view (earlier states are dropped).
  /// Any time, connected or not.
  bool set_config(const ClientConfig& config, std::string* error = nullptr);
  const ClientConfig& config() const;

  /// The server tick to show at local time `now` (fractional): the newest snapshot's tick
  /// minus about interpolation_delay_s() * tick_hz at a typical snapshot's arrival, advancing
  /// at tick_hz ticks per second of local time (ClockSync::render_tick). Continuous; a later
  /// `now` gives a later tick. nullopt when not connected or before the first snapshot.
  std::optional<double> render_tick(TimePoint now) const;
  /// The object's pose to render at local time `render_time` (usually the frame's now): its
  /// pose at render_tick(render_time), world frame: position lerped [m], orientation slerped
  /// (local to world) between the two received states around that tick; past the newest state
  /// it is extrapolated with the state's velocities for at most max_extrapolation_s, then held;
  /// data that arrives late is blended in by a decaying correction (no snap below 10 m).
  /// nullopt for an object not in the view (unknown, exited or destroyed), before the first
  /// snapshot, or when not connected. O(log n); const, so any number of objects per frame.
  /// @param source  if not null, receives how the pose was derived
  std::optional<Pose> pose_at(ObjectID id, TimePoint render_time, PoseSource* source = nullptr) const;
  /// The object's pose at an explicit server tick (fractional), as pose_at but without the
  /// clock: tests, spectators and replays that choose their own timeline. nullopt for an
  /// unknown object or a non-finite tick.
  std::optional<Pose> pose_at_tick(ObjectID id, double tick, PoseSource* source = nullptr) const;
  /// The server tick being stepped at local time `now` (fractional), from the ping offset;
  /// nullopt until the clock is ready (four Pongs after connect, about 0.4 s + one RTT).
  std::optional<double> estimated_server_tick(TimePoint now) const;
  /// The current interpolation delay [s]: ClientConfig::interpolation_delay_s, or two snapshot
  /// intervals plus the measured jitter. 0 when not connected.
  double interpolation_delay_s() const;
  /// Offset, round trip, jitter, delay and the estimated server and render ticks at `now`.
  ClockEstimate clock_estimate(TimePoint now) const;
  /// The clock estimator and the interpolation buffer themselves (their stats, details).
  /// Valid for the Client's lifetime; reset by connect().
  const ClockSync& clock_sync() const;
  const SnapshotInterpolator& interpolator() const;

  /// Processes one datagram as if it came from the server (tests and fuzzing). An idle client
  /// first acts as if it were connecting, so a ConnectAccepted starts a session without a
  /// socket (anything it would send then fails and is counted in send_errors). Never throws.
  void process_datagram(std::span<const uint8_t> bytes);
  /// Impairs every datagram this client sends from now on: loss, latency, jitter, duplication,
  /// reordering (tests and demos of bad links; net::LinkConditions). Held datagrams go out from
  /// poll(). A perfect `conditions` removes the simulation (what it held is sent at once).
  /// Returns false with *error naming the field when `conditions` is invalid.
  bool set_link_conditions(const net::LinkConditions& conditions, std::string* error = nullptr);
  /// Requests sent (or waiting to be sent) and not yet answered. Each is resent until answered.
  size_t requests_in_flight() const;
  /// This client's live-object quota from ConnectAccepted (0 = none).
  uint32_t max_objects() const;
  /// RTT, jitter and loss of the link to the server, from the packet acks.
  net::LinkEstimates link() const;
  uint32_t client_id() const;    ///< assigned by the server; 0 when not connected
  /// The newest server tick this client has heard of (ConnectAccepted, snapshot, pong, event).
  uint64_t server_tick() const;
  /// Tick of the newest complete snapshot (the one objects() reflects); 0 before the first.
  uint64_t snapshot_tick() const;
  uint16_t tick_hz() const;      ///< server physics steps per second; 0 when not connected
  uint16_t snapshot_hz() const;  ///< server snapshots per second; 0 when not connected
  /// The last measured ping round trip (user or keepalive pings); nullopt before any.
  std::optional<std::chrono::microseconds> last_rtt() const;
  const ClientStats& stats() const;
  /// The local UDP port (0 when no socket is open), for logs and tests.
  uint16_t local_port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace impulse
