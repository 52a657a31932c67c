// Reliable collision events (see event_channel.h).
#include "server/net/event_channel.h"

#include <algorithm>

namespace impulse::server {

void EventChannel::push(const wire::CollisionEvent& e) {
  if (pending_.size() >= kMaxPendingEvents) {
    pending_.erase(pending_.begin());
    ++dropped_;
    last_batch_.clear();  // indices shifted
  }
  Pending p;
  p.event = wire::CollisionEvent(e.tick(), e.a(), e.b(), e.point(), e.normal(), next_sequence_++, e.type());
  pending_.push_back(p);
}

void EventChannel::collect_due(TimePoint now, std::chrono::nanoseconds resend_after, size_t max,
                               std::vector<wire::CollisionEvent>* batch) {
  batch->clear();
  last_batch_.clear();
  for (uint32_t i = 0; i < pending_.size() && batch->size() < max; ++i) {
    const Pending& p = pending_[i];
    if (p.sent && now - p.last_sent < resend_after) continue;
    batch->push_back(p.event);
    last_batch_.push_back(i);
  }
}

void EventChannel::mark_sent(uint32_t sequence, TimePoint now) {
  for (const uint32_t i : last_batch_) {
    Pending& p = pending_[i];
    p.sent = true;
    p.last_sent = now;
    p.packets[p.packet_count % p.packets.size()] = sequence;
    if (p.packet_count < 255) ++p.packet_count;
  }
  last_batch_.clear();
}

void EventChannel::on_acked(uint32_t sequence) {
  if (sequence == 0 || pending_.empty()) return;
  const size_t before = pending_.size();
  std::erase_if(pending_, [sequence](const Pending& p) {
    const size_t n = std::min<size_t>(p.packet_count, p.packets.size());
    return std::find(p.packets.begin(), p.packets.begin() + static_cast<std::ptrdiff_t>(n), sequence) !=
           p.packets.begin() + static_cast<std::ptrdiff_t>(n);
  });
  if (pending_.size() != before) last_batch_.clear();
}

}  // namespace impulse::server
