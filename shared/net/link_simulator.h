// Network conditions simulator (loss, latency, jitter, duplication, reordering) on the send path,
// after the "network simulator" of Glenn Fiedler's netcode/yojimbo test harnesses: each datagram
// gets an independent fate and delivery time from a seeded PRNG (SplitMix64: Steele, Lea, Flood,
// "Fast Splittable Pseudorandom Number Generators", OOPSLA 2014), and a time-ordered heap
// releases them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shared/net/link_conditions.h"

namespace impulse::net {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

/// SplitMix64: a 64-bit state, one multiply-xorshift chain per draw. Portable and deterministic
/// (std::uniform_real_distribution is implementation-defined, so it is not used).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1), from the top 53 bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// True with probability p (p <= 0 never, p >= 1 always).
  bool chance(double p) { return unit() < p; }

 private:
  uint64_t state_;
};

/// Delays, drops, duplicates and reorders datagrams bound for `Address` (any copyable type: the
/// server uses asio::ip::udp::endpoint, the client its server endpoint). Inject it on the send
/// path: submit() instead of sending, and deliver_due() (which sends for real) at each wake-up,
/// scheduling the next wake-up no later than next_due().
///
/// Memory: the slot table is reserved in the constructor; each slot's byte buffer grows to the
/// largest datagram it held and is then reused, so steady state does not allocate. At most
/// kMaxInFlight copies and kMaxInFlightBytes are held; beyond that new copies are refused and
/// counted in `overflow`. Not thread-safe.
template <class Address>
class LinkSimulator {
 public:
  /// Copies held at most [datagrams].
  static constexpr size_t kMaxInFlight = 4096;
  /// Payload bytes held at most [bytes].
  static constexpr size_t kMaxInFlightBytes = size_t{8} << 20;

  /// Totals since construction. submitted = calls to submit(); every submitted datagram is
  /// either dropped (loss) or yields 1 + (duplicated ? 1 : 0) copies, each of which is delivered,
  /// refused (overflow) or still in flight.
  struct Counters {
    uint64_t submitted = 0;   ///< datagrams passed to submit()
    uint64_t dropped = 0;     ///< datagrams lost by the loss model (no copy made)
    uint64_t duplicated = 0;  ///< datagrams given a second copy
    uint64_t reordered = 0;   ///< copies given the extra reorder delay
    uint64_t delivered = 0;   ///< copies handed to deliver()
    uint64_t overflow = 0;    ///< copies refused because the in-flight cap was reached
  };

  /// @param c  must pass c.validate() (out-of-range values are clamped, never trusted)
  explicit LinkSimulator(const LinkConditions& c) : conditions_(sanitize(c)), rng_(c.seed) {
    // One more slot than the cap: deliver() may submit while the slot it reads is still taken.
    slots_.reserve(kMaxInFlight + 1);
    free_slots_.reserve(kMaxInFlight + 1);
    heap_.reserve(kMaxInFlight);
  }

  const LinkConditions& conditions() const { return conditions_; }

  /// Takes a copy of one datagram; it is delivered (possibly twice, possibly never) at a later
  /// time, never before `now`.
  void submit(const Address& to, std::span<const uint8_t> bytes, TimePoint now) {
    ++counters_.submitted;
    if (rng_.chance(conditions_.loss)) {
      ++counters_.dropped;
      return;
    }
    const bool twice = rng_.chance(conditions_.duplicate);
    if (twice) ++counters_.duplicated;
    schedule(to, bytes, now);
    if (twice) schedule(to, bytes, now);
  }

  /// Moves every copy due at `now` into `deliver(const Address& to, std::span<const uint8_t>
  /// bytes)` calls, in due-time order (ties in submission order). `bytes` is valid during the
  /// call only. deliver may submit() again (but not call deliver_due); what it submits is
  /// delivered by a later call at the earliest, so a zero-latency echo cannot loop forever.
  template <class F>
  void deliver_due(TimePoint now, F&& deliver) {
    const uint64_t first_new = next_serial_;
    while (!heap_.empty() && heap_.front().due <= now && heap_.front().serial < first_new) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      const Pending p = heap_.back();
      heap_.pop_back();
      // slots_ never reallocates (reserved for the cap + this slot), so the reference survives a
      // nested submit.
      Slot& slot = slots_[p.slot];
      ++counters_.delivered;
      deliver(std::as_const(slot.to), std::span<const uint8_t>(slot.bytes));
      bytes_in_flight_ -= slot.bytes.size();
      free_slots_.push_back(p.slot);
    }
  }

  /// When the earliest copy in flight is due; nullopt when none is.
  std::optional<TimePoint> next_due() const {
    if (heap_.empty()) return std::nullopt;
    return heap_.front().due;
  }

  /// Copies in flight (<= kMaxInFlight).
  size_t in_flight() const { return heap_.size(); }
  /// Payload bytes in flight (<= kMaxInFlightBytes).
  size_t bytes_in_flight() const { return bytes_in_flight_; }
  Counters counters() const { return counters_; }

 private:
  struct Slot {
    Address to{};
    std::vector<uint8_t> bytes;
  };
  struct Pending {
    TimePoint due;
    uint64_t serial;  // submission order: breaks ties so delivery order is deterministic
    uint32_t slot;
  };

  /// Heap order for std::*_heap (a max-heap): the latest (due, serial) sinks, so front() is the
  /// earliest.
  static bool later(const Pending& a, const Pending& b) {
    return a.due != b.due ? a.due > b.due : a.serial > b.serial;
  }

  static LinkConditions sanitize(LinkConditions c) {
    const auto probability = [](double p) { return std::isfinite(p) ? std::clamp(p, 0.0, 1.0) : 0.0; };
    const auto delay = [](double ms) {
      return std::isfinite(ms) ? std::clamp(ms, 0.0, LinkConditions::kMaxSimDelayMs) : 0.0;
    };
    c.loss = probability(c.loss);
    c.duplicate = probability(c.duplicate);
    c.reorder = probability(c.reorder);
    c.latency_ms = delay(c.latency_ms);
    c.jitter_ms = delay(c.jitter_ms);
    c.reorder_delay_ms = delay(c.reorder_delay_ms);
    return c;
  }

  /// One copy's delay: latency +- jitter (clamped >= 0), plus the reorder delay if drawn [ns].
  std::chrono::nanoseconds draw_delay() {
    double ms = conditions_.latency_ms;
    if (conditions_.jitter_ms > 0) ms += conditions_.jitter_ms * (2.0 * rng_.unit() - 1.0);
    ms = std::max(ms, 0.0);
    if (rng_.chance(conditions_.reorder)) {
      ++counters_.reordered;
      ms += conditions_.reorder_delay_ms * (1.0 - rng_.unit());  // (0, reorder_delay_ms]
    }
    return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(ms * 1.0e6)));
  }

  void schedule(const Address& to, std::span<const uint8_t> bytes, TimePoint now) {
    const std::chrono::nanoseconds delay = draw_delay();  // drawn first: the PRNG sequence does
                                                          // not depend on the cap
    if (heap_.size() >= kMaxInFlight || bytes.size() > kMaxInFlightBytes - bytes_in_flight_) {
      ++counters_.overflow;
      return;
    }
    uint32_t index;
    if (!free_slots_.empty()) {
      index = free_slots_.back();
      free_slots_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();  // within the reserved capacity: no reallocation
    }
    Slot& slot = slots_[index];
    slot.to = to;
    slot.bytes.assign(bytes.begin(), bytes.end());
    bytes_in_flight_ += bytes.size();
    heap_.push_back(Pending{now + delay, next_serial_++, index});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  LinkConditions conditions_;
  SplitMix64 rng_;
  Counters counters_;
  std::vector<Slot> slots_;          // reserved to kMaxInFlight + 1, never reallocated
  std::vector<uint32_t> free_slots_;
  std::vector<Pending> heap_;        // std::push_heap / pop_heap with later()
  size_t bytes_in_flight_ = 0;
  uint64_t next_serial_ = 0;
};

}  // namespace impulse::net
