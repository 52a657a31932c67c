// Rejected-input accounting: a counter per reason, individual lines at debug level, and at most
// one summary line per reason per second (the netcode.io/yojimbo practice of "drop, count, one
// debug line", plus rate limiting so a flood cannot flood the log).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "server/net/session_table.h"
#include "shared/wire/codec.h"

namespace impulse::server {

/// Why input from the network was refused. The first block mirrors wire::DropReason.
enum class RejectReason : uint8_t {
  Empty,
  Oversized,
  BadIdentifier,
  VerifyFailed,
  VersionMismatch,
  NoMessage,
  WrongDirection,
  NotConnected,     ///< a request or ping from an address without a session
  StrayDisconnect,  ///< a Disconnect from an address without a session (clients send it 2-3 times)
  InvalidArgument,  ///< a request failed wire::check_request
  StaleId,          ///< the World rejected a request's ObjectID
  NotDynamic,       ///< force/impulse on a static or kinematic body, velocity on a static one
  WorldFull,        ///< create refused at the World's object limit
  ServerFull,       ///< Connect refused at max_clients
  ShuttingDown,     ///< Connect refused during shutdown
  BadConnect,       ///< Connect with an over-long name or another protocol_version
  QueueFull,        ///< request dropped: the per-tick request queue is full
  EventsDropped,    ///< collision events beyond the per-wake-up cap were not sent
  ReceiveError,     ///< the socket reported an error on receive (e.g. ICMP port unreachable)
  SendError,        ///< send_to failed; the datagram is lost
  BadCookie,        ///< a Connect echoed a cookie that is stale, forged or for another address
  BadToken,         ///< a Connect without a token (when required), or with a bad or expired one
  RateLimited,      ///< over the per-client request or byte rate
  NotOwner,         ///< a request touched another client's unshared object
  QuotaExceeded,    ///< a create beyond the client's live-object quota
  RequestTooOld,    ///< a request id below the exactly-once window
  RequestTooFarAhead,  ///< a request id beyond the window (dropped; the client resends)
  ReadOnly,         ///< a world-changing request to a server that plays a recording (spectators)
  Unauthenticated,  ///< at a session's address: a seal that does not verify, or plaintext other than Connect.
                    ///< Dropped unanswered
  Replayed,         ///< a sealed datagram whose sequence the replay window already accepted (or too old)
  NonFiniteBody,    ///< the step's guard removed a body whose state was not finite
  SealedWithoutSession,  ///< a sealed datagram from an address without a session: usually one that just
                         ///< ended (the extra copies of a Disconnect, a timeout). Dropped unanswered
  Unconfirmed,      ///< a session ended unconfirmed: no sealed datagram within kUnconfirmedSessionLifetime
  RestoredNonFinite,  ///< a body whose solve was not finite; its contact group was put back
                      ///< (World::restored_non_finite)
  ReplayedConnect,  ///< a Connect whose key share already made a session (security::SpentKeyShares)
  NotController,    ///< a spectator's ReplayControl on a serve whose timeline it may not control
  OverBudget,       ///< a client over its share of the tick: its bodies slept, its pushes refused, or a
                    ///< session over its share of the sends: fewer snapshot rounds
  TickOutOfRange,   ///< an action or Input stamped too far ahead, or a Raycast's seen_tick outside the
                    ///< lag-compensation window
  InputRefused,     ///< an Input for a body the client may not push, or beyond its input channels
  Count,
};
const char* to_string(RejectReason reason);
/// The enumerator's name ("BadCookie"): a stable identifier, e.g. a metrics label value.
const char* name_of(RejectReason reason);
/// The RejectReason of a verification failure (reason != None).
RejectReason to_reject_reason(wire::DropReason reason);

/// Counts and logs refused input. Not thread-safe (owned by the server's single thread).
class RejectLog {
 public:
  /// Counts one occurrence at `now`; logs it individually at debug level (`from` and `detail`
  /// are only formatted when debug logging is on).
  void note(RejectReason reason, const Endpoint& from, std::string_view detail, TimePoint now);
  /// Counts one occurrence without a sender (internal drops).
  void note(RejectReason reason, std::string_view detail, TimePoint now);
  /// Logs a summary line per reason with occurrences not yet summarised, if its last summary is
  /// at least one second old. Call once per wake-up.
  void flush(TimePoint now);

  /// Total occurrences of `reason` since construction.
  uint64_t count(RejectReason reason) const { return totals_[static_cast<size_t>(reason)]; }

 private:
  static constexpr size_t kReasons = static_cast<size_t>(RejectReason::Count);
  std::array<uint64_t, kReasons> totals_{};
  std::array<uint64_t, kReasons> pending_{};       // since the last summary of that reason
  std::array<TimePoint, kReasons> last_summary_{};
  std::array<TimePoint, kReasons> first_pending_{};
};

}  // namespace impulse::server
