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
class Client : private ClientCore {
 public:
  /// The local clock of every time argument (the clock the Client stamps arrivals with).
  using TimePoint = ClientCore::TimePoint;

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
  /// @param token  a client token from the game's backend (impulse-server token for tests): the
  ///                connect token followed by its 32-byte session secret; empty for a server
  ///                without --token-key
  bool connect(std::string_view host, uint16_t port, std::chrono::milliseconds timeout,
               std::string* error, std::string_view name = "impulse-client", std::span<const uint8_t> token = {});

  /// Closes the session: sends Disconnect three times (UDP may lose any one) and forgets the
  /// server's state. Safe to call when not connected.
  void disconnect(std::string_view reason = "client closed");

  bool connected() const;

  // ------------------------------------------------------------ requests
  // ClientCore's request calls (documented there). Each returns a request id (>= 1) that the
  // matching RequestResult echoes, or 0 when not connected; the Client sends it at once.
  using ClientCore::create_object;
  using ClientCore::on_result;
  using ClientCore::kMaxResultCallbacks;
  using ClientCore::destroy;
  using ClientCore::apply_force;
  using ClientCore::apply_force_unreliable;
  using ClientCore::apply_impulse;
  using ClientCore::apply_torque;
  using ClientCore::set_velocity;
  using ClientCore::set_angular_velocity;
  using ClientCore::set_filter;
  using ClientCore::set_state;
  using ClientCore::move_kinematic;
  using ClientCore::create_joint;
  using ClientCore::destroy_joint;
  using ClientCore::set_joint_motor;
  using ClientCore::joints;
  using ClientCore::raycast;
  using ClientCore::raycast_seen;
  using ClientCore::set_action_tick;
  using ClientCore::send_input;
  using ClientCore::set_interest;
  using ClientCore::set_interest_sphere;
  using ClientCore::set_interest_box;
  using ClientCore::replay_control;
  using ClientCore::ping;

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

  // ------------------------------------------------------------ the world, the clock, the session
  // ClientCore's accessors (documented there): objects() and find() for the latest state,
  // pose_at() for rendering, the clock-sync and interpolation tuning, the session's facts.
  using ClientCore::objects;
  using ClientCore::find;
  using ClientCore::set_config;
  using ClientCore::config;
  using ClientCore::render_tick;
  using ClientCore::pose_at;
  using ClientCore::pose_at_tick;
  using ClientCore::estimated_server_tick;
  using ClientCore::input_tick;
  using ClientCore::input_margin;
  using ClientCore::input_lead;
  using ClientCore::server_stops_in_s;
  using ClientCore::interpolation_delay_s;
  using ClientCore::max_objects;
  using ClientCore::client_id;
  using ClientCore::server_tick;
  using ClientCore::snapshot_tick;
  using ClientCore::tick_hz;
  using ClientCore::snapshot_hz;
  using ClientCore::replay_range;

  // ------------------------------------------------------------ diagnostics and testing
  // Not needed every frame: for overlays, logs, tools and tests.
  using ClientCore::link;
  using ClientCore::last_rtt;
  using ClientCore::stats;
  using ClientCore::requests_in_flight;
  using ClientCore::clock_estimate;
  using ClientCore::clock_sync;
  using ClientCore::interpolator;
  /// The local UDP port (0 when no socket is open), for logs and tests.
  uint16_t local_port() const;
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
