// impulse::ClientCore: the client side of the Impulse protocol without a socket or a clock
// (sans-IO). The caller hands it each datagram from the server with receive(bytes, from, now),
// calls update(now) every frame, and sends what it leaves in its outbox; every time is an argument,
// so it runs as well on a virtual clock (tests, simulations) as on the steady clock (Client).
// netcode.io's client has the same shape: a connection state machine advanced by
// netcode_client_update(client, time), with the time passed in
// (https://github.com/networkprotocol/netcode, netcode.c).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "impulse/clock_sync.h"
#include "impulse/diagnostics.h"
#include "impulse/interpolation.h"
#include "impulse/types.h"

namespace impulse {

/// Where the client is in its connection (ClientCore::state). A session goes Disconnected ->
/// SendingConnect -> SendingCookie -> Connected, and leaves Connected for Disconnected (the game
/// or the server closed it) or Failed (the server went silent). A connect that does not finish
/// ends in Failed; connection_error() says why. netcode.io's NETCODE_CLIENT_STATE_* are the model.
enum class ConnectionState : uint8_t {
  Disconnected,    ///< no session, and no failure to report: before connect, after a disconnect
  SendingConnect,  ///< Connect sent (resent every 250 ms), waiting for the server's Challenge
  SendingCookie,   ///< the Challenge's cookie echoed in a Connect, waiting for ConnectAccepted
  Connected,       ///< in a session: requests, snapshots and events flow
  Failed,          ///< the last connect failed, or the session was lost: see connection_error()
};

/// Why a connect failed or a session was lost (ConnectionError::kind).
enum class ConnectFailure : uint8_t {
  None,
  TimedOut,          ///< no ConnectAccepted within the connect timeout
  Rejected,          ///< the server refused: ConnectionError::code says why (ServerFull, TokenExpired, ...)
  VersionMismatch,   ///< the server speaks another protocol version
  BadServerConfig,   ///< the server announced a snapshot quantisation this client cannot use
  ResolveFailed,     ///< the host name did not resolve (Client only)
  SocketError,       ///< no UDP socket could be opened (Client only)
  ConnectionLost,    ///< connected, then nothing arrived from the server for kServerSilenceTimeout
};

/// The reason behind ConnectionState::Failed, with a message that says what to do.
struct ConnectionError {
  ConnectFailure kind = ConnectFailure::None;
  /// The server's reason for Rejected (ResultCode::ServerFull, TokenInvalid, ...); Ok otherwise.
  ResultCode code = ResultCode::Ok;
  std::string message;  ///< for a log or the player; empty when kind is None
};

/// The name of a state or failure kind, for logs ("Connected", "TimedOut", ...).
const char* to_string(ConnectionState state);
const char* to_string(ConnectFailure failure);

/// A UDP address as the core compares it: the transport converts its own endpoint type to it.
/// `family` 0 = unspecified (a server addressed as 0.0.0.0 or ::, which answers from a concrete
/// local address: any address with the right port is then taken for the server).
struct PeerAddress {
  uint8_t family = 4;              ///< 4, 6, or 0 = unspecified
  std::array<uint8_t, 16> bytes{};  ///< IPv4 in the first 4 bytes (network order), IPv6 all 16
  uint16_t port = 0;

  friend bool operator==(const PeerAddress&, const PeerAddress&) = default;
};

/// What connect() needs besides the server's address and the time.
struct ConnectParams {
  std::string name = "impulse-client";   ///< for the server's logs; truncated to 64 bytes
  /// A client token from the game's backend (impulse-server token): the server's connect token
  /// followed by its 32-byte session secret, which never leaves the client and keys the
  /// session's packets. Empty = anonymous.
  std::vector<uint8_t> token;
  std::chrono::milliseconds timeout{5000};  ///< give up (Failed, TimedOut) after this long
  std::string server_label;               ///< "host:port" for messages; empty = "the server"
};

/// Datagrams for the server, in the order they were produced. Views are valid until clear().
class DatagramQueue {
 public:
  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  std::span<const uint8_t> operator[](size_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::span<const uint8_t>(bytes_).subspan(begin, ends_[i] - begin);
  }
  void push(std::span<const uint8_t> datagram) {
    bytes_.insert(bytes_.end(), datagram.begin(), datagram.end());
    ends_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  void clear() {
    bytes_.clear();
    ends_.clear();
  }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<uint32_t> ends_;
};

/// The protocol engine of one client: handshake, acks, requests resent until answered, delta
/// snapshots, reliable events, clock sync and interpolation. No socket, no clock, no thread; not
/// thread-safe. Every `now` is the caller's monotonic clock and must not go backwards.
///
/// Request calls (create_object, destroy, ...) queue the request and return its id (>= 1), or 0
/// when not connected; the datagram is built by the next update(now). Answers arrive in the
/// PollResult that take_result() hands out.
class ClientCore {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  /// Connected, a client that has heard nothing from the server for this long gives up
  /// (ConnectFailure::ConnectionLost). A live server answers the keepalive Ping every second.
  static constexpr std::chrono::seconds kServerSilenceTimeout{10};

  ClientCore();
  ~ClientCore();
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;

  /// Starts a connect to `server`: queues a Connect (resent every 250 ms by update) and moves to
  /// SendingConnect. Replaces any previous session without telling its server: call disconnect()
  /// first and send its outbox, because connect() discards the outbox and any result not yet
  /// taken. Never blocks; watch state().
  void connect(const PeerAddress& server, TimePoint now, ConnectParams params);
  /// Ends the session: queues Disconnect three times (UDP may lose any one) and forgets the
  /// server's state. State becomes Disconnected. Safe in any state.
  void disconnect(std::string_view reason, TimePoint now);

  ConnectionState state() const;
  bool connected() const { return state() == ConnectionState::Connected; }
  /// Why the state is Failed (kind None otherwise).
  const ConnectionError& connection_error() const;

  /// Processes one datagram. `from` must be the sender's address: anything not from the server
  /// is dropped and counted. Bad datagrams are counted in stats(), never thrown. `bytes` is read
  /// during the call only; an 8-byte-aligned buffer is read in place, any other is copied.
  void receive(std::span<const uint8_t> bytes, const PeerAddress& from, TimePoint now);
  /// Advances timers to `now`: resends Connect and unanswered requests, sends queued requests,
  /// clock-sync Pings, keepalives and ack-only Pings, and fails a connect past its timeout or a
  /// session whose server went silent.
  void update(TimePoint now);

  /// Datagrams to send to the server, oldest first; the transport sends each and calls
  /// outbox().clear(). (A transport that loses one is like a lossy link: the core recovers.)
  DatagramQueue& outbox();
  /// The server's address given to connect().
  const PeerAddress& server() const;

  /// What arrived since the last call: the PollResult is the core's own and reused; the
  /// reference stays valid until the next take_result(), connect() or the core's destruction.
  const PollResult& take_result();

  // -------------------------------------------------------------- requests
  // Each queues its request and returns its id (>= 1), or 0 when not connected; the next
  // update(now) sends it (a transport that sends at once uses set_queue_listener). The request is
  // resent until its answer arrives, and the server applies it exactly once, in order.
  /// Asks the server to create an object; the new ObjectID arrives in a RequestResult (match it
  /// by request id, or hand the id to on_result).
  uint32_t create_object(const ObjectDesc& desc);
  /// Calls `callback` once with the answer to request `request_id` (any request call's return
  /// value: the RequestResult, e.g. a created object's id), on the caller's thread inside the
  /// take_result() (Client: poll()) that receives it; the answer is in that PollResult too. For
  /// `request_id` 0 (not sent) it is never called. At most kMaxResultCallbacks wait at once
  /// (false beyond, and the callback is dropped); a session's end drops those still waiting.
  bool on_result(uint32_t request_id, std::function<void(const RequestResult&)> callback);
  static constexpr size_t kMaxResultCallbacks = 4096;
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
  /// Moves a kinematic body to a target pose (world frame: position [m], orientation local to
  /// world) in the server's next step (Jolt's MoveKinematic): the server sets the velocities that
  /// reach it, and they stay after that step, so send a target every tick (or set_velocity zero to
  /// stop). NotDynamic for a dynamic or static body; InvalidArgument for a target too far for one
  /// step (the server's speed limits, 500 m/s and 47.1 rad/s by default) or a bad quaternion.
  uint32_t move_kinematic(ObjectID id, Vec3 position, Quat orientation = Quat{});
  /// Temporary ownership (a server run with --temporary-ownership): sends this client's own
  /// state of its dynamic body `id`: position [m], orientation (local to world), velocity [m/s]
  /// and angular velocity [rad/s], world frame. The server accepts it only while no other
  /// client's body is in the body's island (NotOwner then), and only within what the body's speed
  /// covers in 8 ticks plus 10 cm, with the speed changed by at most 5 m/s (InvalidArgument: a
  /// teleport). NotOwner also when the server has it off.
  uint32_t set_state(ObjectID id, Vec3 position, Quat orientation, Vec3 velocity, Vec3 angular_velocity);
  /// Replaces the collision filter of any body (ObjectDesc::category, mask and group; any values).
  /// Wakes it; a contact the new filter forbids ends with an End event at the next step.
  uint32_t set_filter(ObjectID id, uint32_t category, uint32_t mask, int32_t group);
  /// Asks the server to join two bodies (JointDesc); the new JointID arrives in the
  /// RequestResult's id, and every client gets a JointEvent (added). Under --authority owner a
  /// client may join only its own bodies, to each other, to static scene bodies or to the world.
  uint32_t create_joint(const JointDesc& desc);
  /// Asks the server to destroy a joint (StaleId when it is gone); every client gets a JointEvent
  /// (removed, Destroyed).
  uint32_t destroy_joint(ObjectID joint);
  /// Replaces a hinge's or a slider's motor: mode, speed (Velocity: [rad/s] or [m/s]), target
  /// (Position: an angle [rad] or a translation [m]) and the most it applies (a torque [N·m] or a
  /// force [N]). InvalidArgument for another joint kind.
  uint32_t set_joint_motor(ObjectID joint, JointMotorMode mode, float speed, float target, float max_force);
  /// The live joints this client has heard of (JointEvent), sorted by joint id.
  std::span<const JointEvent> joints() const;
  /// Asks the server to cast the segment origin + t * translation, t in [0, 1] (world frame
  /// [m]; 0 < |translation| <= 2000 m) against every shape, sensors included. The answer arrives
  /// in a PollResult as a RaycastResult (PollResult::raycasts) with the returned request id: the
  /// closest hit, or every hit (nearest first) when `all`. The server answers at its next tick
  /// boundary, against the world after that tick's steps (RaycastResult::tick, the state of the
  /// snapshot of that tick), so requests sent before it are included. 0 = not sent.
  /// With `filter`, only bodies the filter accepts are cast against (RayFilter).
  /// By default a ray starting inside a shape hits it at fraction 0 (normal against the ray); with
  /// `back_faces` it hits where it leaves the shape, normal along the ray (Jolt's back faces).
  uint32_t raycast(Vec3 origin, Vec3 translation, bool all = false, std::optional<RayFilter> filter = std::nullopt,
                   bool back_faces = false);
  /// A lag-compensated raycast (protocol 10): cast against the moving bodies where they were at
  /// server tick `seen_tick` plus `seen_fraction` in [0, 1) of the way to the next one (the
  /// render tick the player saw: floor and fraction of render_tick(now)); static bodies as they
  /// are. The answer's RaycastResult::tick is seen_tick. A tick older than the server keeps
  /// (--lag-compensation-ms, 250 ms by default) or newer than its present is answered
  /// TickOutOfRange. 0 = not sent.
  uint32_t raycast_seen(Vec3 origin, Vec3 translation, uint64_t seen_tick, float seen_fraction, bool all = false,
                        std::optional<RayFilter> filter = std::nullopt);

  // -------------------------------------------------------------- ticks: actions and inputs
  // A playing client stamps what it does with the server tick it is for (docs/PROTOCOL.md,
  // "Ticks"), running ahead of the server by half its round trip plus a margin that the server's
  // reports (Snapshot.input_lead) adjust, so that its inputs arrive just before their tick.

  /// The server tick an input or action made at local time `now` should be stamped for: the
  /// server's tick when it arrives (estimated_server_tick + RTT/2), plus 1, plus input_margin().
  /// nullopt until the clock is ready.
  std::optional<uint64_t> input_tick(TimePoint now) const;
  /// The next world-changing request call (create_object, apply_impulse, set_joint_motor, ...) is
  /// an action for tick `tick`: the server holds it until then and applies it before that tick's
  /// step, or at once when it arrives late (RequestResult::tick tells). Exactly once, like every
  /// request. 0 = at arrival (the default). Ticks beyond the server's --max-input-lead-ms
  /// (500 ms) are answered TickOutOfRange.
  void set_action_tick(uint64_t tick);
  /// Sends body `id`'s input for tick `tick` (from input_tick): fire-and-forget, each datagram
  /// carrying the last kInputRedundancy ticks of this body's input, so that a lost one is covered
  /// by the next. Call once per tick; a tick skipped since the last call repeats the last input,
  /// a tick already sent keeps its first value (the server applies the first copy it gets), an
  /// older tick is ignored (false). At most 4 bodies per client (the server's input channels).
  /// Force: linear = force [N], angular = torque [N·m]; Velocity: linear = velocity [m/s],
  /// angular = angular velocity [rad/s]; world frame. Only the client's own (or shared) bodies.
  /// @return false when not connected, or for an older tick
  bool send_input(ObjectID id, InputMode mode, Vec3 linear, Vec3 angular, uint64_t tick);
  /// Ticks of input each Input datagram repeats.
  static constexpr size_t kInputRedundancy = 8;
  /// The margin [ticks] input_tick() adds beyond the estimated arrival: starts at 2 and follows the
  /// server's reports (late inputs raise it at once, a steady surplus lowers it slowly).
  int input_margin() const;
  /// The server's latest report of how early this client's inputs arrive [ticks]: the smallest
  /// lead over its last 30-60 ticks (negative: late); nullopt before any.
  std::optional<int> input_lead() const;
  /// The server is draining (SIGTERM or SIGINT with players in, --drain-seconds): the seconds left
  /// at `now` before it disconnects everyone, from the newest snapshot (Snapshot.stop_in_ms);
  /// nullopt while it is not stopping. Time to save, to tell the player, or to find another server.
  std::optional<double> server_stops_in_s(TimePoint now) const;
  /// Sets this client's area of interest: snapshots and collision events then cover only objects
  /// inside it (objects leave the view once outside it by the server's hysteresis margin).
  /// Answered by a RequestResult. The default area is the whole world.
  uint32_t set_interest(const InterestArea& area);
  /// A sphere of `radius` [m] about `center` (world frame).
  uint32_t set_interest_sphere(Vec3 center, float radius);
  /// An axis-aligned box from `min` to `max` [m] (world frame).
  uint32_t set_interest_box(Vec3 min, Vec3 max);
  /// Controls the playback of a server that plays a recording (impulse-replay serve): Pause,
  /// Resume, Seek to `tick` (in the recording's range), or SetSpeed to `speed` times the recorded
  /// tick rate ([1/16, 16]). One shared timeline: every spectator sees the effect. Answered by a
  /// RequestResult: Ok, InvalidArgument for a value out of range, NotAReplay from a live server.
  uint32_t replay_control(ReplayAction action, uint64_t tick = 0, float speed = 1.0f);
  /// Queues a Ping; the PongInfo with the returned nonce (>= 1) arrives in a later PollResult.
  /// 0 = not connected.
  uint64_t ping();

  /// Called after every request call that queued something, with `context`: a transport that
  /// sends at once (Client) calls update(now) and drains the outbox there. Null: none.
  void set_queue_listener(void (*listener)(void* context), void* context);

  // -------------------------------------------------------------- the world as received
  /// Latest state of every object, from the newest complete snapshot, sorted by ObjectID.
  /// Valid until the next take_result()/connect()/disconnect() (Client: poll()).
  std::span<const ObjectState> objects() const;
  /// The object's latest state, or null if the newest complete snapshot did not contain it.
  /// O(log n). The pointer is valid until the next take_result()/connect()/disconnect()
  /// (Client: poll()).
  const ObjectState* find(ObjectID id) const;

  // -------------------------------------------------------------- clock sync and interpolation
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

  // -------------------------------------------------------------- session facts
  /// This client's live-object quota from ConnectAccepted (0 = none).
  uint32_t max_objects() const;
  uint32_t client_id() const;    ///< assigned by the server; 0 when not connected
  /// The newest server tick this client has heard of (ConnectAccepted, snapshot, pong, event).
  uint64_t server_tick() const;
  /// Tick of the newest complete snapshot (the one objects() reflects); 0 before the first.
  uint64_t snapshot_tick() const;
  uint16_t tick_hz() const;      ///< server physics steps per second; 0 when not connected
  uint16_t snapshot_hz() const;  ///< server snapshots per second; 0 when not connected
  /// The recording's tick range when the server plays one (impulse-replay serve: this client is a
  /// read-only spectator that may use replay_control); nullopt for a live server or when not
  /// connected. From ConnectAccepted.
  std::optional<ReplayRange> replay_range() const;

  // -------------------------------------------------------------- diagnostics
  /// RTT, jitter and loss of the link to the server, from the packet acks.
  LinkEstimates link() const;
  /// The last measured ping round trip (user or keepalive pings); nullopt before any.
  std::optional<std::chrono::microseconds> last_rtt() const;
  const ClientStats& stats() const;
  /// Requests sent (or waiting to be sent) and not yet answered. Each is resent until answered.
  size_t requests_in_flight() const;
  /// Offset, round trip, jitter, delay and the estimated server and render ticks at `now`.
  ClockEstimate clock_estimate(TimePoint now) const;
  /// The clock estimator and the interpolation buffer themselves (their stats, details).
  /// Valid for the core's lifetime; reset by connect().
  const ClockSync& clock_sync() const;
  const SnapshotInterpolator& interpolator() const;

  /// The transport counts its own sends (datagrams_out, bytes_out, send_errors) here.
  ClientStats& mutable_stats();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace impulse
