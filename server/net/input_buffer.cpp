#include "server/net/input_buffer.h"

#include <algorithm>

namespace impulse::server {

InputBuffer::Receipt InputBuffer::receive(ObjectID id, uint64_t first_tick, std::span<const InputValue> frames,
                                          uint64_t next_tick, uint64_t max_lead) {
  if (frames.empty()) return Receipt::Ok;
  const uint64_t newest = first_tick + (frames.size() - 1);
  if (newest > next_tick + std::min(max_lead, kMaxLeadTicks)) {
    ++counts_.refused;
    return Receipt::TooFarAhead;
  }
  Channel* channel = nullptr;
  for (Channel& c : channels_) {
    if (c.id == id) channel = &c;
  }
  if (channel == nullptr) {
    for (Channel& c : channels_) {
      if (channel == nullptr && idle(c)) channel = &c;
    }
    if (channel == nullptr) {
      if (channels_.size() == kMaxChannels) {
        ++counts_.refused;
        return Receipt::NoFreeChannel;
      }
      channel = &channels_.emplace_back();
    }
    *channel = Channel{};
    channel->id = id;
    channel->taken = next_tick - 1;
  }
  Channel& c = *channel;
  for (size_t i = 0; i < frames.size(); ++i) {
    const uint64_t tick = first_tick + i;
    Slot& slot = c.ring[tick % kRingTicks];
    if (slot.tick == tick) continue;  // a redundant copy: the first one counts
    if (tick < next_tick && tick + kRingTicks <= next_tick) continue;  // older than the ring
    // A late frame is kept (so its later copies are not counted again) but never taken: take()
    // has passed its tick.
    if (tick < next_tick) ++counts_.late;
    slot.tick = tick;
    slot.value = frames[i];
  }
  c.newest = std::max(c.newest, newest);
  note_lead(next_tick, static_cast<int64_t>(newest) - static_cast<int64_t>(next_tick));
  return Receipt::Ok;
}

void InputBuffer::note_lead(uint64_t next_tick, int64_t lead) {
  if (next_tick >= window_start_ + kLeadWindowTicks) {
    // One window on: the current becomes the previous; two or more: both are stale.
    lead_previous_ = next_tick >= window_start_ + 2 * kLeadWindowTicks ? INT64_MAX : lead_current_;
    lead_current_ = INT64_MAX;
    window_start_ = next_tick - next_tick % kLeadWindowTicks;
  }
  lead_current_ = std::min(lead_current_, lead);
}

int16_t InputBuffer::min_lead(uint64_t next_tick) const {
  int64_t lead = INT64_MAX;
  if (next_tick < window_start_ + 2 * kLeadWindowTicks) lead = lead_current_;
  if (next_tick < window_start_ + kLeadWindowTicks) lead = std::min(lead, lead_previous_);
  if (lead == INT64_MAX) return INT16_MIN;
  return static_cast<int16_t>(std::clamp<int64_t>(lead, INT16_MIN + 1, INT16_MAX));
}

}  // namespace impulse::server
