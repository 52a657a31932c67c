// Output of impulse-bench: the human table, one JSON object per scene, and a Markdown summary of a
// file of such objects (JSON Lines).
#pragma once

#include <cstdio>
#include <string>

#include "bench/paired_run.h"

namespace impulse::bench {

/// The human-readable report of one scene: ms/step, ratio, RSS, awake counts, sleep time, S1 drift
/// and Impulse's per-stage profile.
void print_human(std::FILE* out, const SceneResult& result);

/// One line of JSON (no newline) with the fields the targets need first (docs/BENCHMARKS.md,
/// "Targets"), in this order — scene, n, sleep, impulse_ms_median, impulse_ms_p95,
/// bullet_ms_median, bullet_ms_p95, ratio_median, impulse_rss_kib, awake_end, top_drift_m (S1
/// only) — followed by the extra fields listed in
/// docs/BENCHMARKS.md. Times in ms, RSS in KiB, distances in m, times of sleep in simulated s;
/// a figure that was not measured is null.
std::string to_json_line(const SceneResult& result);

/// Writes result.trace as CSV: step, simulated time, both engines' ms and awake counts, and
/// Impulse's per-stage ms and counters. @return false when the file cannot be written.
bool write_trace_csv(const std::string& path, const SceneResult& result);

/// Reads a JSON Lines file written by --json-out and prints one Markdown table row per scene.
/// Lines that are not JSON objects with the required fields are skipped with a message on stderr.
/// @return the number of rows printed, or -1 when the file cannot be opened.
int print_summary(std::FILE* out, const std::string& path);

}  // namespace impulse::bench
