// Reliable collision events (see event_channel.h).
#include "server/net/event_channel.h"

#include <algorithm>

namespace impulse::server {

// The ring starts small and doubles up to kMaxPendingEvents: most sessions never hold more
// than a few dozen events.
constexpr size_t kInitialRing = 64;
static_assert((kMaxPendingEvents & (kMaxPendingEvents - 1)) == 0 && kInitialRing <= kMaxPendingEvents,
              "the ring indexes by sequence modulo a power of two");

EventChannel::EventChannel() : ring_(kInitialRing), packets_(kEventPacketHistory) {}

void EventChannel::push(const wire::CollisionEvent& e, const wire::JointEventFields& joint) {
  const uint32_t held = next_sequence_ - first_;
  if (held == ring_.size() && ring_.size() < kMaxPendingEvents) {
    std::vector<Slot> grown(ring_.size() * 2);
    for (uint32_t q = first_; q != next_sequence_; ++q) grown[q % grown.size()] = slot(q);
    ring_.swap(grown);
  } else if (held == ring_.size()) {  // full: the oldest gives way
    if (!slot(first_).acked) {
      --unacked_;
      ++dropped_;
    }
    ++first_;
    if (next_unsent_ - first_ > next_sequence_ - first_) next_unsent_ = first_;  // it was never sent
  }
  Slot& s = slot(next_sequence_);
  s.event = wire::CollisionEvent(e.tick(), e.a(), e.b(), e.point(), e.normal(), next_sequence_, e.type());
  s.joint = joint;
  s.last_sent = TimePoint{};
  s.sent = false;
  s.acked = false;
  ++next_sequence_;
  ++unacked_;
}

void EventChannel::collect_due(TimePoint now, std::chrono::nanoseconds resend_after, size_t max,
                               std::vector<wire::CollisionEvent>* batch,
                               std::vector<wire::JointEventFields>* joints) {
  batch->clear();
  if (joints != nullptr) joints->clear();
  last_batch_.clear();
  while (!resends_.empty() && !is_live(resends_.front())) resends_.pop_front();
  // Resends: the queue is in send order, so the first entry not yet due ends the search.
  for (size_t i = 0; i < resends_.size() && batch->size() < max; ++i) {
    const Resend& r = resends_[i];
    if (!is_live(r)) continue;
    if (now - r.sent_at < resend_after) break;
    batch->push_back(slot(r.sequence).event);
    if (joints != nullptr) joints->push_back(slot(r.sequence).joint);
    last_batch_.push_back(r.sequence);
  }
  for (uint32_t q = next_unsent_; q != next_sequence_ && batch->size() < max; ++q) {
    batch->push_back(slot(q).event);
    if (joints != nullptr) joints->push_back(slot(q).joint);
    last_batch_.push_back(q);
  }
}

void EventChannel::mark_sent(uint32_t sequence, TimePoint now) {
  SentPacket& packet = packets_[sequence % kEventPacketHistory];
  packet.packet = sequence;
  packet.events.clear();
  for (const uint32_t q : last_batch_) {
    if (!holds(q)) continue;
    Slot& s = slot(q);
    s.sent = true;
    s.last_sent = now;
    resends_.push_back(Resend{q, now});
    packet.events.push_back(q);
    if (q - first_ >= next_unsent_ - first_) next_unsent_ = q + 1;
  }
  last_batch_.clear();
}

void EventChannel::on_acked(uint32_t sequence) {
  if (sequence == 0) return;
  SentPacket& packet = packets_[sequence % kEventPacketHistory];
  if (packet.packet != sequence) return;  // carried no events, or too old to remember
  for (const uint32_t q : packet.events) {
    if (!holds(q)) continue;
    Slot& s = slot(q);
    if (s.acked) continue;
    s.acked = true;
    --unacked_;
  }
  packet.packet = 0;
  packet.events.clear();
  pop_acked_front();
}

void EventChannel::pop_acked_front() {
  // Only sent events are acked, and they all precede next_unsent_, so first_ stops at or
  // before it.
  while (first_ != next_sequence_ && slot(first_).acked) ++first_;
}

}  // namespace impulse::server
