// Clock offset from ping round trips (NTP on-wire estimate, RFC 5905 sections 8 and 10) and a
// playout clock from snapshot arrivals; see clock_sync.h.
#include "impulse/clock_sync.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace impulse {
namespace {

double to_seconds(ClockSync::TimePoint t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

/// Median of values[0, n) (sorted in place); the mean of the two middle values when n is even.
/// n >= 1.
template <size_t N>
double median_of(std::array<double, N>& values, size_t n) {
  std::sort(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// Mean absolute deviation of values[0, n) from `center`. n >= 1.
template <size_t N>
double mean_abs_deviation(const std::array<double, N>& values, size_t n, double center) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::abs(values[i] - center);
  return sum / static_cast<double>(n);
}

}  // namespace

double ClockSync::Slewed::at(double local_s) const {
  const double elapsed = std::max(0.0, local_s - start_s);
  const double gap = to - from;
  const double step = kSlewRate * elapsed;
  if (std::abs(gap) <= step) return to;
  return gap > 0 ? from + step : from - step;
}

void ClockSync::Slewed::retarget(double local_s, double target) {
  // Never move the start backwards: a sample stamped before the last retarget must not rewrite
  // values already reported for later times.
  const double t = set ? std::max(local_s, start_s) : local_s;
  const double current = set ? at(t) : target;
  from = std::abs(target - current) > kStepThresholdS ? target : current;
  to = target;
  start_s = t;
  set = true;
}

void ClockSync::reset() {
  const Stats kept = stats_;
  const bool jitter = playout_jitter_;
  *this = ClockSync{};
  stats_ = kept;
  playout_jitter_ = jitter;
}

bool ClockSync::add_ping_sample(TimePoint sent, uint64_t server_time_us, TimePoint received) {
  const double t0 = to_seconds(sent);
  const double t1 = to_seconds(received);
  const double rtt = t1 - t0;
  if (!(rtt >= 0.0) || rtt > kMaxRttS) {
    ++stats_.ping_rejected;
    return false;
  }
  const double server_s = static_cast<double>(server_time_us) * 1.0e-6;
  const PingSample sample{server_s - 0.5 * (t0 + t1), rtt};

  // A true offset always lies in [offset - rtt/2, offset + rtt/2] (the server stamped its clock
  // between our send and receive). Samples that exclude the estimate, several in a row, mean
  // the server's clock stepped: keep only those.
  if (ready()) {
    const bool outlier = std::abs(sample.offset_s - offset_s_) > 0.5 * rtt + kOutlierMarginS;
    outlier_run_ = outlier ? outlier_run_ + 1 : 0;
  }
  pings_[(ping_head_ + ping_count_) % kPingWindow] = sample;
  if (ping_count_ < kPingWindow) {
    ++ping_count_;
  } else {
    ping_head_ = (ping_head_ + 1) % kPingWindow;
  }
  if (outlier_run_ >= kStepSamples) {
    ping_head_ = (ping_head_ + ping_count_ - kStepSamples) % kPingWindow;
    ping_count_ = kStepSamples;
    outlier_run_ = 0;
    stepped_ = true;
    ++stats_.offset_steps;
  }
  ++stats_.ping_samples;

  estimate_offset();
  offset_.retarget(t1, offset_s_);
  if (snapshot_count_ > 0) estimate_playout(t1);
  return true;
}

void ClockSync::estimate_offset() {
  // Indices ordered by round trip, ties newest first (fresher after a drift): deterministic.
  std::array<size_t, kPingWindow> order{};
  for (size_t i = 0; i < ping_count_; ++i) order[i] = (ping_head_ + ping_count_ - 1 - i) % kPingWindow;
  std::stable_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(ping_count_),
                   [this](size_t a, size_t b) { return pings_[a].rtt_s < pings_[b].rtt_s; });
  // The lowest-round-trip half (rounded up): queueing spikes lengthen the round trip and skew
  // the offset by up to half the spike, so they fall out of the estimate.
  const size_t best = (ping_count_ + 1) / 2;
  std::array<double, kPingWindow> offsets{};
  std::array<double, kPingWindow> rtts{};
  for (size_t i = 0; i < best; ++i) {
    offsets[i] = pings_[order[i]].offset_s;
    rtts[i] = pings_[order[i]].rtt_s;
  }
  offset_s_ = median_of(offsets, best);
  rtt_s_ = median_of(rtts, best);

  // Every sample bounds the true offset: the server stamped its clock between our send and our
  // receive, so offset - rtt/2 <= true <= offset + rtt/2. The intersection of all these
  // intervals is [true - shortest return leg, true + shortest outbound leg]; its midpoint errs
  // by half the difference of the two shortest legs, much less than any one sample (queueing
  // only lengthens legs). If the intervals do not intersect (the server's clock moved within
  // the window, or the clocks drifted on a sub-millisecond link), keep the median.
  double lower = -std::numeric_limits<double>::infinity();
  double upper = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < ping_count_; ++i) {
    const PingSample& p = pings_[(ping_head_ + i) % kPingWindow];
    lower = std::max(lower, p.offset_s - 0.5 * p.rtt_s);
    upper = std::min(upper, p.offset_s + 0.5 * p.rtt_s);
  }
  if (lower <= upper) offset_s_ = 0.5 * (lower + upper);

  std::array<double, kPingWindow> one_way{};
  for (size_t i = 0; i < ping_count_; ++i) one_way[i] = 0.5 * pings_[(ping_head_ + i) % kPingWindow].rtt_s;
  if (ping_count_ >= 2) {
    std::array<double, kPingWindow> sorted = one_way;
    const double center = median_of(sorted, ping_count_);
    ping_jitter_s_ = mean_abs_deviation(one_way, ping_count_, center);
  } else {
    ping_jitter_s_ = 0;
  }
}

void ClockSync::add_snapshot_arrival(uint64_t tick, double tick_hz, TimePoint arrival) {
  if (!std::isfinite(tick_hz) || !(tick_hz > 0.0)) {
    ++stats_.snapshot_rejected;
    return;
  }
  const double local_s = to_seconds(arrival);
  lateness_[(snapshot_head_ + snapshot_count_) % kSnapshotWindow] =
      local_s - static_cast<double>(tick) / tick_hz;
  if (snapshot_count_ < kSnapshotWindow) {
    ++snapshot_count_;
  } else {
    snapshot_head_ = (snapshot_head_ + 1) % kSnapshotWindow;
  }
  ++stats_.snapshot_samples;

  std::array<double, kSnapshotWindow> sorted = lateness_;
  lateness_median_s_ = median_of(sorted, snapshot_count_);
  // The ring's order does not matter for the deviation; only the first snapshot_count_ slots
  // are filled until it wraps.
  snapshot_jitter_s_ = mean_abs_deviation(lateness_, snapshot_count_, lateness_median_s_);
  estimate_playout(local_s);
}

void ClockSync::estimate_playout(double local_s) {
  playout_lag_.retarget(local_s, lateness_median_s_ + (playout_jitter_ ? jitter_s() : 0.0));
}

double ClockSync::jitter_s() const {
  return snapshot_count_ >= kSnapshotJitterSamples ? snapshot_jitter_s_ : ping_jitter_s_;
}

std::optional<double> ClockSync::snapshot_lateness_s() const {
  if (snapshot_count_ == 0 || ping_count_ == 0) return std::nullopt;
  return lateness_median_s_ + offset_s_;
}

double ClockSync::server_time_s(TimePoint local_now) const {
  const double local_s = to_seconds(local_now);
  return local_s + (offset_.set ? offset_.at(local_s) : 0.0);
}

double ClockSync::server_tick(TimePoint local_now, double tick_hz) const {
  return server_time_s(local_now) * tick_hz;
}

std::optional<double> ClockSync::render_tick(TimePoint local_now, double tick_hz, double buffer_ticks) const {
  if (!playout_lag_.set || !std::isfinite(tick_hz) || !(tick_hz > 0.0)) return std::nullopt;
  const double local_s = to_seconds(local_now);
  return (local_s - playout_lag_.at(local_s)) * tick_hz - buffer_ticks;
}

}  // namespace impulse
