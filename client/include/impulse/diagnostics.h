// What a client knows about itself and its link, for logs, overlays and tests: counters
// (ClientStats), the clock estimate (ClockEstimate) and the ack-based link estimate
// (LinkEstimates). Apart from the calls a game makes every frame (client.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "shared/net/link_estimates.h"

namespace impulse {

/// RTT, jitter and loss of the link to the server, from the packet acks (Client::link).
using LinkEstimates = net::LinkEstimates;

/// Sizes of ClientStats' per-reason arrays (the library checks them against the protocol's enums).
inline constexpr size_t kDropReasonCount = 8;
inline constexpr size_t kSnapshotErrorCount = 9;
inline constexpr size_t kEventBlockErrorCount = 5;

/// Monotonic counters of one Client (never reset by connect()).
struct ClientStats {
  uint64_t datagrams_in = 0;   ///< every datagram received, good or bad
  uint64_t datagrams_out = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t datagrams_dropped = 0;  ///< failed verification, came from a stranger, or made no sense
  /// Drops by reason, index = None, Empty, Oversized, BadIdentifier, VerifyFailed,
  /// VersionMismatch, NoMessage, WrongDirection (wire::DropReason, shared/wire/codec.h). None counts
  /// datagrams that verified but were dropped later (unexpected sender, a message the client
  /// never asked for, a bad snapshot payload or event block).
  std::array<uint64_t, kDropReasonCount> drops_by_reason{};
  /// Datagrams from the server's address dropped unread because they failed authentication: a
  /// seal that does not verify (forged, corrupted), a replayed sequence, or plaintext other than
  /// ConnectAccepted after the handshake. Not in datagrams_dropped.
  uint64_t datagrams_unauthenticated = 0;
  uint64_t send_errors = 0;           ///< send_to failed (the datagram is lost)
  uint64_t snapshots_completed = 0;
  uint64_t snapshots_superseded = 0;  ///< incomplete snapshots abandoned for a newer tick
  uint64_t snapshot_parts_stale = 0;  ///< snapshots older than the latest applied one (not acked)
  uint64_t snapshots_rejected = 0;    ///< snapshot payloads that failed decoding (never applied)
  /// Rejections by snapshot payload error, index = the SnapshotError value (docs/PROTOCOL.md,
  /// "Rejections (SnapshotError)").
  std::array<uint64_t, kSnapshotErrorCount> snapshot_errors{};
  uint64_t requests_resent = 0;       ///< requests sent again because no answer came in time
  uint64_t inputs_sent = 0;           ///< Input datagrams sent (send_input)
  uint64_t relayed_inputs = 0;        ///< other clients' inputs received in snapshots (RelayedInput)
  /// Relayed inputs dropped unread: a null id, an unknown mode or a non-finite value.
  uint64_t relayed_inputs_rejected = 0;
  uint64_t results_duplicate = 0;     ///< answers to resends of requests already answered (dropped)
  uint64_t events_duplicate = 0;      ///< collision events received again (dropped)
  /// CollisionEvents blocks that failed decoding (none of their events delivered, the datagram not
  /// acked, so the server resends them).
  uint64_t event_blocks_rejected = 0;
  /// Rejections by event block error, index = None, Truncated, BadHeader, BadRecord,
  /// ChecksumMismatch (docs/PROTOCOL.md, "Collision events").
  std::array<uint64_t, kEventBlockErrorCount> event_block_errors{};
  /// Pings the client sent on its own for clock sync (ClockSync::next_ping_interval cadence);
  /// their Pongs are not listed in PollResult::pongs.
  uint64_t time_pings_sent = 0;
  uint64_t clock_samples = 0;         ///< Pongs (any nonzero-nonce Ping) fed to the clock sync
  /// Snapshots whose tick went back (a replay server seeked back): the clock sync and the
  /// interpolation buffer started over from that snapshot.
  uint64_t timeline_restarts = 0;
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

}  // namespace impulse
