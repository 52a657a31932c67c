// Reliable collision events per session: each event gets a sequence number, rides in
// CollisionEvents datagrams and is resent until a datagram that carried it is acked; the client
// delivers each sequence once. Reliability over packet acks as in Fiedler's "Reliable Ordered
// Messages" (gafferongames.com, 2016), without the ordering (events carry their own tick).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "impulse/schemas/impulse_generated.h"
#include "shared/wire/event_codec.h"

namespace impulse::server {

/// Events kept per session: the oldest unacked event is less than this many sequences behind the
/// newest; older ones are dropped and counted (the client sees a gap in the sequence).
inline constexpr size_t kMaxPendingEvents = 4096;

/// Datagrams whose events are remembered for their acks. A datagram older than this many sends
/// is never matched to an ack; its events are resent instead.
inline constexpr size_t kEventPacketHistory = 1024;

/// O(1) per event pushed, acked or sent: the unacked events live in a ring indexed by sequence,
/// each sent datagram remembers the sequences it carried, and resends come from a queue in send
/// order (so the oldest send is the first due). With thousands of events pending for each of
/// hundreds of sessions, nothing scans the backlog.
class EventChannel {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  EventChannel();

  /// Queues `e` for delivery, stamping its sequence (1, 2, ...), with its joint fields for a
  /// joint event (wire::JointEventFields). Drops the oldest pending event when kMaxPendingEvents
  /// are waiting.
  void push(const wire::CollisionEvent& e, const wire::JointEventFields& joint = {});

  /// Copies into *batch (cleared first) at most `max` pending events: first those last sent at
  /// least `resend_after` before `now` (oldest send first), then those never sent (in sequence
  /// order), and their joint fields into *joints (one per event). mark_sent() then records the
  /// datagram they went out in; without it, the next call chooses the same events.
  void collect_due(TimePoint now, std::chrono::nanoseconds resend_after, size_t max,
                   std::vector<wire::CollisionEvent>* batch, std::vector<wire::JointEventFields>* joints = nullptr);
  /// The batch of the last collect_due() left in packet `sequence` at `now`.
  void mark_sent(uint32_t sequence, TimePoint now);
  /// The peer acked packet `sequence`: every event it carried is delivered and forgotten.
  void on_acked(uint32_t sequence);

  /// Events queued and not yet acked.
  size_t pending() const { return unacked_; }
  uint64_t dropped() const { return dropped_; }
  uint32_t last_sequence() const { return next_sequence_ - 1; }

 private:
  struct Slot {
    wire::CollisionEvent event;
    wire::JointEventFields joint;
    TimePoint last_sent{};
    bool sent = false;
    bool acked = false;
  };
  struct Resend {
    uint32_t sequence = 0;  ///< event sequence
    TimePoint sent_at{};    ///< stale once the event is acked, dropped or sent again
  };
  struct SentPacket {
    uint32_t packet = 0;           ///< datagram sequence (0 = none)
    std::vector<uint32_t> events;  ///< event sequences it carried
  };

  bool holds(uint32_t sequence) const { return sequence - first_ < next_sequence_ - first_; }
  Slot& slot(uint32_t sequence) { return ring_[sequence & (ring_.size() - 1)]; }
  bool is_live(const Resend& r) {
    if (!holds(r.sequence)) return false;
    const Slot& s = slot(r.sequence);
    return !s.acked && s.last_sent == r.sent_at;
  }
  void pop_acked_front();

  std::vector<Slot> ring_;              // a power of two of slots; sequences [first_, next_sequence_)
  std::deque<Resend> resends_;          // send order = last_sent order
  std::vector<SentPacket> packets_;     // kEventPacketHistory slots, by datagram sequence
  std::vector<uint32_t> last_batch_;    // event sequences of the last collect_due()
  uint32_t first_ = 1;                  // oldest sequence held
  uint32_t next_sequence_ = 1;
  uint32_t next_unsent_ = 1;            // sequences from here on were never sent
  size_t unacked_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace impulse::server
