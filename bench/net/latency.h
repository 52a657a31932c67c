// Benchmark "latency": the time from a client sending a request to the first snapshot that
// reflects it, on loopback UDP, with the real server and client in this process. The target
// (docs/BENCHMARKS.md, "Targets") is p99 <= 2 ticks + 1 snapshot interval.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace impulse::bench {

/// One latency run at one tick rate and snapshot rate.
struct LatencyRun {
  int tick_hz = 0;
  int snapshot_hz = 0;
  int samples = 0;      ///< samples measured (requests whose effect was seen)
  int timeouts = 0;     ///< requests whose effect no snapshot showed within 1 s (not in the figures)
  /// Request sent -> first applied snapshot whose velocity of the body equals the one sent
  /// (within one quantisation step) [ms]; nearest-rank percentiles.
  double p50_ms = 0, p99_ms = 0, max_ms = 0, mean_ms = 0;
  double p50_ticks = 0, p99_ticks = 0;  ///< the same in server ticks (ms * tick_hz / 1000)
  /// Request sent -> its RequestResult [ms] (the server answers after applying it).
  double result_p50_ms = 0, result_p99_ms = 0;
  double target_ms = 0;  ///< 2 ticks + 1 snapshot interval
  bool met = false;      ///< p99_ms <= target_ms
};

/// Runs `samples` requests against a fresh server at `tick_hz` / `snapshot_hz`. Each sample waits
/// a pseudo-random time in [0, one snapshot interval) (fixed seed) so sends fall at every phase of
/// the tick, then sets a distinct velocity on the client's own box in a zero-gravity scene
/// (nothing else changes its velocity) and polls until a snapshot shows it.
/// @return nullopt with *error when the server cannot start, the client cannot connect or the
///         body cannot be created
std::optional<LatencyRun> run_latency(int tick_hz, int snapshot_hz, int samples, bool progress, std::string* error);

/// One JSON object (one line): scene, samples, the first run's p50_ms / p99_ms / p50_ticks /
/// p99_ticks at the top level, and every run under "runs".
std::string to_json_line(const std::vector<LatencyRun>& runs);

/// The human-readable table of the runs, with the target per run.
void print_human(std::FILE* out, const std::vector<LatencyRun>& runs);

}  // namespace impulse::bench
