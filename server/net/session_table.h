// Sessions keyed by the client's UDP endpoint (address + port), as in netcode.io's server: the
// endpoint is the identity; a session lives until Disconnect, timeout, replacement by a new
// session of the same client id, or shutdown. Each session owns its packet acks, its
// exactly-once request window, its reliable event channel and its snapshot sender.
#pragma once

#include <chrono>
#include <cstdint>
#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/net/event_channel.h"
#include "server/net/input_buffer.h"
#include "server/net/outbox.h"
#include "server/net/request_window.h"
#include "server/net/snapshot_sender.h"
#include "shared/wire/codec.h"
#include "shared/net/packet_acks.h"
#include "shared/net/packet_crypto.h"

namespace impulse::server {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

/// A token bucket: `tokens` refill at `rate` per second up to `burst` (Turner, "New
/// directions in communications", 1986 — the classic traffic shaper).
struct TokenBucket {
  double rate = 0;    ///< tokens per second; 0 = unlimited
  double burst = 0;   ///< capacity
  double tokens = 0;
  TimePoint last{};

  /// Refills for the time since the last call, then takes `n` tokens if there are enough.
  bool take(double n, TimePoint now) {
    if (rate <= 0) return true;
    refill(now);
    if (tokens < n) return false;
    tokens -= n;
    return true;
  }
  /// Takes `n` tokens even when there are not enough, but leaves a debt of at most `burst`: a
  /// burst of sends that must go out delays later ones by at most burst / rate seconds, so a flood
  /// of them cannot starve the bucket's owner after it ends.
  void charge(double n, TimePoint now) {
    if (rate <= 0) return;
    refill(now);
    tokens = std::max(tokens - n, -burst);
  }
  void refill(TimePoint now) {
    const double dt = std::chrono::duration<double>(now - last).count();
    last = now;
    if (dt > 0) tokens = std::min(burst, tokens + dt * rate);
  }
};

/// One connected client.
struct Session {
  Endpoint endpoint;
  uint32_t client_id = 0;    ///< >= 1: the token's client id, or assigned by the table
  std::string name;          ///< client_name from Connect, sanitised for logs (<= 64 bytes)
  TimePoint connected_at{};
  TimePoint last_heard{};    ///< arrival of the latest datagram from this endpoint
  uint32_t max_objects = 0;  ///< live-object quota (0 = none): the token's, else the server's
  net::PacketAcks acks;      ///< sequences sent and received, RTT and loss
  /// Packet keys and replay window: every datagram after ConnectAccepted is sealed (docs/PROTOCOL.md).
  net::PacketProtection protection;
  net::KxPublicKey server_kx_public{};  ///< resent in ConnectAccepted
  net::KxPublicKey client_kx_public{};  ///< from the Connect that made the session
  bool token_bound = false;  ///< the packet keys mix in the connect token's session secret
  RequestWindow requests;    ///< exactly-once admission of this client's requests
  EventChannel events;       ///< collision events until acked
  InputBuffer inputs;        ///< tick-stamped Input frames until their tick (protocol 10)
  uint32_t held_actions = 0; ///< this session's actions waiting for their tick (ServerCore::held_)
  /// Joints that existed when the session began are announced (JointAdded) a few per update:
  /// the next joint slot to look at, and the server's joint serial at the start (joints with a
  /// lower serial are announced by this walk, later ones as they are created).
  uint32_t joint_cursor = 0;
  uint64_t joint_serial_at_start = 0;
  std::unique_ptr<SnapshotSender> snapshots;  ///< baselines, interest and priorities of this client
  wire::InterestArgs interest;                 ///< the area set by SetInterest (All by default)
  TokenBucket request_rate;  ///< requests per second
  TokenBucket bytes_in;      ///< received bytes per second
  TokenBucket bytes_out;     ///< the bandwidth budget (--max-kbps-per-client), bytes
  uint64_t bytes_sent = 0;   ///< every datagram sent to this session [bytes]
  uint64_t bytes_received = 0;  ///< every datagram from this session accepted by its byte rate [bytes]
  /// A sealed datagram from the client was authenticated: the client has its ConnectAccepted and
  /// its keys, so a later Connect from this address is a stale duplicate or forged and gets no
  /// answer. Until then the session gets no snapshots, has no SnapshotSender (a half-open session
  /// costs sizeof(Session) and its replay window, no baselines), and lives at most
  /// kUnconfirmedSessionLifetime (server_core.h).
  bool confirmed = false;
  /// Live servers send this session's snapshots at the ticks t where is_snapshot_tick(t + phase):
  /// sessions are spread over the tick_hz / snapshot_hz ticks between snapshots, so each tick
  /// writes a share of them instead of one tick writing all.
  uint16_t snapshot_phase = 0;
  /// Object indices visited by this session's last snapshot write (SnapshotWriteStats::visits):
  /// what serving it costs, for its share of an overrunning tick (ServerCore, send share).
  uint32_t snapshot_visits = 0;
  /// Until send_every_until, the session gets one in send_every of its snapshot and event rounds
  /// (1 = all): its snapshots cost more than its share of a tick that overran.
  uint32_t send_every = 1;
  TimePoint send_every_until{};
};

/// Fixed-capacity table of sessions. Sessions are stored densely (iteration order is insertion
/// order with swap-removal, deterministic for the same inputs); lookup by endpoint is O(log n).
class SessionTable {
 public:
  /// @param max_sessions  capacity, >= 1 (ServerConfig::max_clients)
  explicit SessionTable(uint32_t max_sessions);

  /// The session of `endpoint`, or nullptr. The pointer is valid until the next add/remove.
  Session* find(const Endpoint& endpoint);
  /// Adds a session with `client_id` (0: the table's next id), or returns nullptr when full or
  /// already present. The caller fills in the rest of the session.
  Session* add(const Endpoint& endpoint, std::string name, TimePoint now, uint32_t client_id = 0);
  /// The confirmed session of `client_id` (token mode may briefly hold an unconfirmed second one
  /// of the same id), or nullptr. Valid until the next add/remove.
  Session* find_client(uint32_t client_id);
  /// Removes the session of `endpoint`; false when there is none.
  bool remove(const Endpoint& endpoint);
  /// Moves into *expired (appended) every session whose last_heard is before `deadline`, and
  /// every unconfirmed one (no sealed datagram from the client yet) that was created before
  /// `unconfirmed_deadline`: a resent Connect refreshes last_heard but not that.
  void take_expired(TimePoint deadline, TimePoint unconfirmed_deadline, std::vector<Session>* expired);
  /// Moves every session into *all (appended), leaving the table empty.
  void take_all(std::vector<Session>* all);

  std::span<const Session> sessions() const { return sessions_; }
  std::span<Session> sessions() { return sessions_; }
  uint32_t size() const { return static_cast<uint32_t>(sessions_.size()); }
  bool full() const { return sessions_.size() >= max_sessions_; }

 private:
  void remove_at(uint32_t index);

  uint32_t max_sessions_;
  uint32_t next_client_id_ = 1;
  std::vector<Session> sessions_;
  std::map<Endpoint, uint32_t> index_;  // endpoint -> position in sessions_
};

/// Copies a client-supplied string for logs: at most max_bytes, every byte outside printable
/// ASCII replaced by '?', so a hostile name cannot forge log lines or terminal escapes.
std::string sanitize_for_log(std::string_view text, size_t max_bytes);

/// "1.2.3.4:5678" or "[::1]:5678".
std::string to_string(const Endpoint& endpoint);

}  // namespace impulse::server
