// Client clock synchronisation: NTP's on-wire offset estimate (D. Mills, RFC 5905 section 8,
// "On-Wire Protocol": offset = ts - (t0 + t1) / 2, uncertainty (t1 - t0) / 2) over the
// time_req/time_res exchange of Edyn's networking (https://github.com/xissburg/edyn), combined by
// intersecting the samples' uncertainty intervals (K. Marzullo's interval intersection, as in
// NTP's selection algorithm, RFC 5905 section 11.2.1) with the median of the lowest-round-trip
// half as fallback (NTP's clock filter, RFC 5905 section 10: low-delay samples err least), plus a
// playout clock from snapshot arrival times for the interpolation buffer.
//
// Ping cadence (what the Client should do): while !ready(), send a Ping every 100 ms (the burst
// at connect; kReadySamples answers take about one RTT + 400 ms); once ready, one Ping every
// 2 s, which refreshes the kPingWindow samples every 32 s, well inside the drift of two quartz
// clocks (50 ppm is 1.6 ms in 32 s). next_ping_interval() returns that cadence.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace impulse {

/// Estimates the offset between this client's steady clock and the server's simulation clock
/// (tick t is stepped at server time t / tick_hz [s]), the link's round trip and jitter, and the
/// render tick of the interpolation buffer. Time is passed in, never read. Fixed-size rings: no
/// allocation after construction. Single-threaded (the game loop that owns the Client).
///
/// Reported offsets change smoothly: a new estimate is reached by slewing at kSlewRate (the
/// clocks run at most 5 % fast or slow meanwhile), so server_time_s() and render_tick() never jump
/// for small corrections; a change larger than kStepThresholdS is applied at once (a server
/// restart, a stalled server, the first estimate).
class ClockSync {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  /// Ping samples kept [samples]. The offset is estimated from the kPingWindow most recent.
  static constexpr size_t kPingWindow = 16;
  /// Samples needed before ready() [samples].
  static constexpr size_t kReadySamples = 4;
  /// Snapshot arrivals kept for the playout clock and the snapshot jitter [samples]: 3.2 s at
  /// 20 snapshots/s, 1.07 s at 60.
  static constexpr size_t kSnapshotWindow = 64;
  /// Snapshot arrivals needed before jitter_s() uses them instead of the ping jitter [samples].
  static constexpr size_t kSnapshotJitterSamples = 8;
  /// Round trips above this are rejected as garbage [s] (a Pong matched to a long-forgotten Ping).
  static constexpr double kMaxRttS = 10.0;
  /// Consecutive ping samples whose uncertainty interval [offset - rtt/2, offset + rtt/2],
  /// widened by kOutlierMarginS, excludes the current estimate before the estimate is declared
  /// stale (the server's clock stepped: restart or stall) and the older samples are dropped.
  static constexpr size_t kStepSamples = 3;
  /// Slack on a sample's uncertainty interval [s] for timestamp rounding (server_time_us is
  /// whole microseconds; the Client stamps arrivals when it polls).
  static constexpr double kOutlierMarginS = 0.002;
  /// Largest rate at which a reported offset moves towards a new estimate [s/s].
  static constexpr double kSlewRate = 0.05;
  /// Corrections larger than this [s] are applied at once instead of slewed (at kSlewRate a
  /// 100 ms correction already takes 2 s).
  static constexpr double kStepThresholdS = 0.1;
  /// Ping cadence before ready() and after it (see the file comment).
  static constexpr std::chrono::milliseconds kBurstPingInterval{100};
  static constexpr std::chrono::milliseconds kSteadyPingInterval{2000};

  /// Counters since construction (reset() keeps them).
  struct Stats {
    uint64_t ping_samples = 0;        ///< accepted by add_ping_sample
    uint64_t ping_rejected = 0;       ///< negative, non-finite or > kMaxRttS round trips
    uint64_t offset_steps = 0;        ///< times kStepSamples outliers replaced the estimate
    uint64_t snapshot_samples = 0;    ///< accepted by add_snapshot_arrival
    uint64_t snapshot_rejected = 0;   ///< tick_hz not finite and positive
  };

  /// Forgets every sample (a new connection, or a server known to have restarted). ready() is
  /// false afterwards and the next estimate is applied at once. Keeps the stats and
  /// set_playout_jitter().
  void reset();

  /// Whether render_tick's playout lag includes jitter_s() (default true: the default delay
  /// of two snapshot intervals plus the measured jitter). A client configured with a fixed
  /// interpolation delay turns it off, so the whole delay is its buffer_ticks. Takes effect at
  /// the next sample (the playout lag is slewed towards the new value).
  void set_playout_jitter(bool include) { playout_jitter_ = include; }
  bool playout_jitter() const { return playout_jitter_; }

  /// One time_req/time_res exchange: a Ping sent at local `sent`, answered by a Pong carrying
  /// the server's simulation clock `server_time_us` [µs], received at local `received`.
  /// offset = server_time - (sent + received) / 2, round trip = received - sent. O(kPingWindow).
  /// @return false (sample ignored, counted in Stats::ping_rejected) when received < sent or the
  ///         round trip exceeds kMaxRttS.
  bool add_ping_sample(TimePoint sent, uint64_t server_time_us, TimePoint received);

  /// One complete snapshot of server tick `tick` that arrived at local time `arrival`. Feeds
  /// the playout clock (render_tick) and the snapshot jitter. Report each snapshot once, when it
  /// is applied (duplicates and stale snapshots the Client drops are not reported). O(window).
  /// @param tick_hz  the server's ticks per second (ConnectAccepted); not finite or <= 0:
  ///                 sample ignored and counted in Stats::snapshot_rejected
  void add_snapshot_arrival(uint64_t tick, double tick_hz, TimePoint arrival);

  /// True once kReadySamples ping samples are held: server_time_s() is then meaningful.
  /// After a step (kStepSamples outliers replaced the estimate) it stays ready on the samples
  /// that showed the step: the stepped estimate is the best there is, and a client that stamps
  /// inputs with it must not stall until the next steady ping, seconds later.
  bool ready() const { return ping_count_ >= kReadySamples || (stepped_ && ping_count_ >= kStepSamples); }
  /// Ping samples held, <= kPingWindow.
  size_t ping_sample_count() const { return ping_count_; }
  /// Snapshot arrivals held, <= kSnapshotWindow.
  size_t snapshot_sample_count() const { return snapshot_count_; }
  /// The Client's cadence for time_req pings: kBurstPingInterval until ready(), then
  /// kSteadyPingInterval.
  std::chrono::milliseconds next_ping_interval() const {
    return ready() ? kSteadyPingInterval : kBurstPingInterval;
  }

  /// The current estimate of server clock - local clock [s], unslewed. 0 before any sample.
  /// Each sample bounds the true offset to [offset - rtt/2, offset + rtt/2]; the estimate is the
  /// midpoint of the intersection of the held samples' intervals, which errs by half the
  /// difference between the shortest outbound and the shortest return leg (queueing spikes only
  /// widen intervals). When the intervals do not intersect (the server clock moved within the
  /// window), it is the median offset of the lowest-round-trip half (ties favour newer ones).
  double offset_s() const { return offset_s_; }
  /// Median round trip of that same lowest half [s]; 0 before any sample.
  double rtt_s() const { return rtt_s_; }
  /// Mean absolute deviation of the one-way delay estimate (round trip / 2) from its median,
  /// over the held ping samples [s]; 0 with fewer than two samples.
  double ping_jitter_s() const { return ping_jitter_s_; }
  /// Mean absolute deviation of the snapshot arrival lateness (arrival - tick / tick_hz) from its
  /// median over the held arrivals [s]; 0 before any.
  double snapshot_jitter_s() const { return snapshot_jitter_s_; }
  /// The jitter the interpolation delay should cover [s]: snapshot_jitter_s() once
  /// kSnapshotJitterSamples arrivals are held, ping_jitter_s() before.
  double jitter_s() const;
  /// Median lateness of snapshots: the server time of a tick's snapshot arrival minus the tick's
  /// server time [s] (one-way delay plus the server's send time). nullopt until a snapshot
  /// arrival and a ping sample are both held.
  std::optional<double> snapshot_lateness_s() const;

  /// The server's simulation clock at local time `local_now` [s]: local + slewed offset.
  /// Strictly increasing in local_now between steps. Meaningful only when ready().
  double server_time_s(TimePoint local_now) const;
  /// server_time_s(local_now) * tick_hz: the server tick being stepped at local_now, fractional.
  double server_tick(TimePoint local_now, double tick_hz) const;

  /// The server tick the interpolation buffer should show at local time `local_now`
  /// (fractional; pass it to SnapshotInterpolator::pose_at):
  ///   render_tick = (local_now - A(local_now)) * tick_hz - buffer_ticks
  /// where A is the playout lag (median snapshot arrival - tick time, on the local clock) plus
  /// jitter_s() (unless set_playout_jitter(false)), slewed as one value. With buffer_ticks = kDefaultDelaySnapshotIntervals *
  /// tick_hz / snapshot_hz this is the default delay behind a typical arrival: two
  /// snapshot intervals plus the measured jitter (see default_delay_ticks in interpolation.h);
  /// any other buffer configures it. It uses snapshot arrivals only, so the ping offset, its
  /// errors and its asymmetry cancel out. Strictly increasing in local_now between steps.
  /// @return nullopt before the first snapshot arrival, or when tick_hz is not finite and > 0.
  std::optional<double> render_tick(TimePoint local_now, double tick_hz, double buffer_ticks) const;

  const Stats& stats() const { return stats_; }

 private:
  /// A value reached by slewing: starts at `from` at local time `start_s`, moves towards `to`
  /// at kSlewRate. Continuous in time.
  struct Slewed {
    double from = 0;
    double to = 0;
    double start_s = 0;
    bool set = false;

    double at(double local_s) const;
    /// New target at local time `local_s`; the first one, or one more than kStepThresholdS away
    /// from the current value, is taken at once.
    void retarget(double local_s, double target);
  };
  struct PingSample {
    double offset_s = 0;
    double rtt_s = 0;
  };

  void estimate_offset();
  void estimate_playout(double local_s);

  std::array<PingSample, kPingWindow> pings_{};  // ring, pings_[(ping_head_ + i) % K] oldest first
  size_t ping_head_ = 0;
  size_t ping_count_ = 0;
  size_t outlier_run_ = 0;  // consecutive samples inconsistent with the estimate
  bool stepped_ = false;    // the estimate was replaced by a step since the last reset()
  double offset_s_ = 0;
  double rtt_s_ = 0;
  double ping_jitter_s_ = 0;
  Slewed offset_;

  // Snapshot lateness on the local clock: arrival - tick / tick_hz [s] (= lateness - offset).
  std::array<double, kSnapshotWindow> lateness_{};
  size_t snapshot_head_ = 0;
  size_t snapshot_count_ = 0;
  double lateness_median_s_ = 0;
  double snapshot_jitter_s_ = 0;
  Slewed playout_lag_;  // lateness median (+ jitter_s() when playout_jitter_), local clock [s]
  bool playout_jitter_ = true;

  Stats stats_;
};

}  // namespace impulse
