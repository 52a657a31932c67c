// Order statistics of timing samples and /proc readings of the benchmark (median, nearest-rank
// percentile, VmRSS/VmHWM from proc(5)).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace impulse::bench {

/// Median of the samples (mean of the two middle values for an even count); 0 for none.
/// Sorts a copy: O(n log n).
double median(std::span<const double> samples);
/// Nearest-rank percentile, p in [0, 100]: the smallest sample with at least p % of the samples
/// at or below it (p95 of 600 steps = the 570th smallest). 0 for no samples.
double percentile(std::span<const double> samples, double p);

/// A "Name:   1234 kB" field of /proc/self/status in KiB (e.g. "VmRSS", "VmHWM"), or nullopt when
/// the file or the field cannot be read (non-Linux, restricted /proc).
std::optional<uint64_t> read_status_kib(std::string_view field);
/// Resets this process's peak resident set (VmHWM) to its current RSS by writing "5" to
/// /proc/self/clear_refs (Linux >= 4.0). False when that is not possible.
bool reset_peak_rss();

}  // namespace impulse::bench
