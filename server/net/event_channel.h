// Reliable collision events per session: each event gets a sequence number, rides in
// CollisionEvents datagrams and is resent until a datagram that carried it is acked; the client
// delivers each sequence once. Reliability over packet acks as in Fiedler's "Reliable Ordered
// Messages" (gafferongames.com, 2016), without the ordering (events carry their own tick).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "impulse/schemas/impulse_generated.h"

namespace impulse::server {

/// Unacked events kept at most per session; beyond it the oldest are dropped and counted (the
/// client sees a gap in the sequence).
inline constexpr size_t kMaxPendingEvents = 4096;

class EventChannel {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  /// Queues `e` for delivery, stamping its sequence (1, 2, ...). Drops the oldest pending event
  /// when kMaxPendingEvents are waiting.
  void push(const wire::CollisionEvent& e);

  /// Copies into *batch (cleared first) at most `max` pending events that were never sent, or
  /// were last sent at least `resend_after` before `now`, oldest first. mark_sent() then records
  /// the datagram they went out in.
  void collect_due(TimePoint now, std::chrono::nanoseconds resend_after, size_t max,
                   std::vector<wire::CollisionEvent>* batch);
  /// The batch of the last collect_due() left in packet `sequence` at `now`.
  void mark_sent(uint32_t sequence, TimePoint now);
  /// The peer acked packet `sequence`: every event it carried is delivered and forgotten.
  void on_acked(uint32_t sequence);

  size_t pending() const { return pending_.size(); }
  uint64_t dropped() const { return dropped_; }
  uint32_t last_sequence() const { return next_sequence_ - 1; }

 private:
  struct Pending {
    wire::CollisionEvent event;
    TimePoint last_sent{};
    bool sent = false;
    uint8_t packet_count = 0;                ///< entries of `packets` in use (a ring of 4)
    std::array<uint32_t, 4> packets{};       ///< the latest datagrams that carried it
  };
  std::vector<Pending> pending_;      // ascending sequence
  std::vector<uint32_t> last_batch_;  // indices into pending_ of the last collect_due()
  uint32_t next_sequence_ = 1;
  uint64_t dropped_ = 0;
};

}  // namespace impulse::server
