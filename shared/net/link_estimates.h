// LinkEstimates: what one side of a connection knows about its outgoing link from the packet acks
// (RTT, jitter, loss, counts). Standalone (standard headers only) so the client's public API can
// return it; net::PacketAcks computes it.
#pragma once

#include <cstdint>

namespace impulse::net {

/// What one side knows about its outgoing link. Counters are totals since construction.
struct LinkEstimates {
  float rtt_ms = 0;         ///< smoothed round-trip time [ms], 0 before the first ack
  float rtt_jitter_ms = 0;  ///< smoothed |sample - rtt| [ms]
  float loss = 0;           ///< smoothed fraction of sent datagrams lost, [0, 1]
  uint64_t sent = 0;        ///< datagrams sent (on_send calls that returned a sequence)
  uint64_t acked = 0;       ///< datagrams acked by the peer (each counted once)
  uint64_t lost = 0;        ///< datagrams past the loss timeout and never acked so far
  uint64_t sent_bytes = 0;   ///< sum of on_send's `bytes` [bytes]
  uint64_t acked_bytes = 0;  ///< sum of the acked datagrams' `bytes` [bytes]
  uint64_t ignored_acks = 0;  ///< on_acks calls whose fields were malformed or hostile
};

}  // namespace impulse::net
