// One session's tick-stamped inputs (protocol 10's Input): frames arrive redundantly, ahead of
// the tick they are for, and are taken at that tick. A missing frame repeats the channel's last
// one for a while (Rocket League, GDC 2018: the server keeps playing the last input); a frame
// that arrives after its tick is counted late and never applied. The lead of each arrival (how
// many ticks before its newest frame is due) is kept as a sliding minimum, which the session's
// snapshots report back so that the client can move its clock (Overwatch, GDC 2017: the client
// runs ahead by RTT/2 plus a jitter margin). No clock, no world: the caller passes ticks.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "impulse/schemas/impulse_generated.h"
#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse::server {

/// One tick's input for one body (wire::InputFrame as maths vectors, and its mode).
struct InputValue {
  wire::InputMode mode = wire::InputMode::Force;
  Vec3 linear;   ///< Force: [N]; Velocity: [m/s]; world frame
  Vec3 angular;  ///< Force: [N·m]; Velocity: [rad/s]; world frame
};

/// Counters of one buffer (and, summed, of the server).
struct InputCounts {
  uint64_t applied = 0;    ///< frames taken at their own tick
  uint64_t repeated = 0;   ///< ticks that reused the last frame because theirs had not arrived
  uint64_t late = 0;       ///< frames that arrived after their tick (never applied)
  uint64_t refused = 0;    ///< Input datagrams dropped: too far ahead, or no free channel
  uint64_t buffered_sum = 0;  ///< over the applied frames: ticks of input held beyond the tick taken
};

class InputBuffer {
 public:
  /// Bodies one session may drive by Input at once. A channel whose last frame has been repeated
  /// kMaxRepeatTicks times, with nothing newer buffered, is idle and may be reused by another body.
  static constexpr size_t kMaxChannels = 4;
  /// Ticks of frames kept per channel (a power of two). The ring must hold the furthest future
  /// frame and the oldest redundant one: max_lead + kMaxInputFrames < kRingTicks.
  static constexpr uint64_t kRingTicks = 128;
  /// Most ticks a missing frame is replaced by the last one (250 ms at 60 Hz); then the body gets
  /// no input until frames arrive again.
  static constexpr uint32_t kMaxRepeatTicks = 15;
  /// Largest lead accepted [ticks]: what the ring can hold.
  static constexpr uint64_t kMaxLeadTicks = kRingTicks - 16 - 1;
  /// The lead is reported as the minimum over windows of this many ticks (the current and the last).
  static constexpr uint64_t kLeadWindowTicks = 30;

  enum class Receipt : uint8_t { Ok, TooFarAhead, NoFreeChannel };

  /// Buffers the frames of one Input for body `id`: frames[i] is for tick first_tick + i.
  /// `next_tick` is the tick the server steps next; frames for earlier ticks are late (counted
  /// once each, unless already received) and frames beyond next_tick + max_lead refuse the whole
  /// datagram (TooFarAhead). max_lead is clamped to kMaxLeadTicks. O(frames).
  Receipt receive(ObjectID id, uint64_t first_tick, std::span<const InputValue> frames, uint64_t next_tick,
                  uint64_t max_lead);

  /// The inputs for tick `tick` (call once per tick, in tick order): fn(ObjectID, const
  /// InputValue&, uint32_t repeats) for each channel with a frame for it (repeats 0), or with its
  /// last frame while that may still repeat (repeats: the ticks it has stood in, 1..kMaxRepeatTicks).
  template <class Fn>
  void take(uint64_t tick, Fn&& fn) {
    for (Channel& c : channels_) {
      const Slot& slot = c.ring[tick % kRingTicks];
      if (slot.tick == tick) {
        c.last = slot.value;
        c.has_last = true;
        c.repeats = 0;
        ++counts_.applied;
        counts_.buffered_sum += c.newest > tick ? c.newest - tick : 0;
        fn(c.id, c.last, uint32_t{0});
      } else if (c.has_last && c.repeats < kMaxRepeatTicks) {
        ++c.repeats;
        ++counts_.repeated;
        fn(c.id, c.last, c.repeats);
      }
      c.taken = tick;
    }
  }

  /// The smallest lead [ticks] of the arrivals in the current and the previous window of
  /// kLeadWindowTicks ticks ending at `next_tick`, clamped to int16; INT16_MIN when none.
  int16_t min_lead(uint64_t next_tick) const;
  const InputCounts& counts() const { return counts_; }
  size_t channels() const { return channels_.size(); }

 private:
  struct Slot {
    uint64_t tick = 0;  ///< 0: empty
    InputValue value;
  };
  struct Channel {
    ObjectID id;
    std::array<Slot, kRingTicks> ring{};
    InputValue last;
    bool has_last = false;
    uint32_t repeats = 0;
    uint64_t newest = 0;  ///< the newest tick received
    uint64_t taken = 0;   ///< the last tick taken
  };
  bool idle(const Channel& c) const { return c.newest <= c.taken && (!c.has_last || c.repeats >= kMaxRepeatTicks); }
  void note_lead(uint64_t next_tick, int64_t lead);

  std::vector<Channel> channels_;
  InputCounts counts_;
  // Sliding minimum of the leads: the window [window_start, window_start + kLeadWindowTicks) and
  // the one before it.
  uint64_t window_start_ = 0;
  int64_t lead_current_ = INT64_MAX;
  int64_t lead_previous_ = INT64_MAX;
};

}  // namespace impulse::server
