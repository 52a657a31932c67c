// impulse::Client: the thin game-side client of an Impulse server: a ClientCore (the protocol,
// sans-IO) plus one non-blocking UDP socket. It runs no physics and no thread of its own. The game
// loop calls poll() once per frame (netcode.io's client model:
// https://github.com/networkprotocol/netcode, "client_update" driven by the caller).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "impulse/client_core.h"
#include "impulse/diagnostics.h"
#include "impulse/types.h"
#include "shared/net/link_conditions.h"

namespace impulse {

/// Impairments of a simulated link (loss, latency, jitter, duplication, reordering) for
/// Client::set_link_conditions; see shared/net/link_conditions.h.
using LinkConditions = net::LinkConditions;

/// Thin client of an Impulse server. Not thread-safe: one thread owns it (the game loop).
/// Request methods return a request id (>= 1) that the matching RequestResult echoes, or 0 when
/// nothing was sent because the client is not connected. Nothing blocks except connect() and a
/// poll() given a non-zero max_wait; a game loop uses connect_async() and watches state().
class Client {
 public:
  /// The local clock of every time argument (the clock the Client stamps arrivals with).
  using TimePoint = std::chrono::steady_clock::time_point;

  Client();
  ~Client();  ///< disconnects if still connected
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Starts opening a session and returns at once: resolves host (a numeric address never
  /// blocks; a name may, for the resolver's time), opens the socket, sends Connect and moves to
  /// ConnectionState::SendingConnect. poll() then drives the handshake (Connect resent every
  /// 250 ms) to Connected or Failed (connection_error() says why, after params.timeout at most).
  /// Replaces any previous session, which is told. Returns false, with state() Failed, when the
  /// host does not resolve or no socket can be opened.
  bool connect_async(std::string_view host, uint16_t port, ConnectParams params = {});
  /// Where the connection stands; Failed with the reason in connection_error().
  ConnectionState state() const;
  const ConnectionError& connection_error() const;

  /// Blocking convenience over connect_async(): resolves host, sends Connect (protocol version,
  /// client name) and resends it every 250 ms until ConnectAccepted or ConnectRejected arrives
  /// or `timeout` passes. Blocks for at most `timeout` (plus name resolution). Replaces any
  /// previous session.
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
  /// This client's live-object quota from ConnectAccepted (0 = none).
  uint32_t max_objects() const;
  uint32_t client_id() const;    ///< assigned by the server; 0 when not connected
  /// The newest server tick this client has heard of (ConnectAccepted, snapshot, pong, event).
  uint64_t server_tick() const;
  /// Tick of the newest complete snapshot (the one objects() reflects); 0 before the first.
  uint64_t snapshot_tick() const;
  uint16_t tick_hz() const;      ///< server physics steps per second; 0 when not connected
  uint16_t snapshot_hz() const;  ///< server snapshots per second; 0 when not connected

  // ------------------------------------------------------------ diagnostics and testing
  // Not needed every frame: for overlays, logs, tools and tests.

  /// RTT, jitter and loss of the link to the server, from the packet acks.
  LinkEstimates link() const;
  /// The last measured ping round trip (user or keepalive pings); nullopt before any.
  std::optional<std::chrono::microseconds> last_rtt() const;
  const ClientStats& stats() const;
  /// The local UDP port (0 when no socket is open), for logs and tests.
  uint16_t local_port() const;

  /// Requests sent (or waiting to be sent) and not yet answered. Each is resent until answered.
  size_t requests_in_flight() const;
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
  /// reordering (tests and demos of bad links; LinkConditions). Held datagrams go out from
  /// poll(). A perfect `conditions` removes the simulation (what it held is sent at once).
  /// Returns false with *error naming the field when `conditions` is invalid.
  bool set_link_conditions(const LinkConditions& conditions, std::string* error = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace impulse
