// Benchmark N1 (docs/BENCHMARKS.md, "Scenes"): the bandwidth of delta-compressed snapshots and the
// pose error they leave, after Glenn Fiedler's "Snapshot Compression" (gafferongames.com, 2015: 901
// cubes at 60 Hz, 17.37 Mbit/s uncompressed down to < 0.25 Mbit/s). The real server and a real
// client run in this process and talk over loopback UDP; the server's world at each snapshot tick
// is the ground truth the client's view is compared with.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace impulse::bench {

/// How impulse-bench --scene N1 runs.
struct N1Options {
  double seconds = 60;    ///< measured time [s], after the warm-up
  double warmup_s = 2;    ///< time [s] from the player's creation to the start of measuring
  /// The server's per-client send budget [kbit/s] (--max-kbps-per-client); 0 = the server's default.
  int kbps = 0;
  bool progress = true;   ///< one line on stderr every 5 s
  /// Send the player's per-tick force as a sequenced request (answered, resent until answered)
  /// instead of fire-and-forget (Client::apply_force_unreliable, the default: a game's input).
  bool reliable_forces = false;
  /// Record the server's session into this file while measuring (impulse-server --record), to
  /// measure what recording costs the tick loop; empty = no recording.
  std::string record_file;
};

/// What one N1 run measured. Rates are per client (there is one) over the measured time; kbit =
/// 1000 bits. "UDP payload" means the datagrams' bytes as sent and received, without IP and UDP
/// headers (28 bytes per IPv4 datagram more on the wire).
struct N1Result {
  double seconds = 0;           ///< measured wall-clock time [s]
  double warmup_s = 0;
  int kbps_budget = 0;          ///< the server's --max-kbps-per-client for the run
  bool reliable_forces = false; ///< N1Options::reliable_forces of the run
  int tick_hz = 0, snapshot_hz = 0;
  uint32_t objects = 0;         ///< objects in the client's view at the end (scene + player)
  uint64_t snapshots = 0;       ///< snapshots applied by the client in the measured time
  uint64_t snapshots_unmatched = 0;  ///< applied, but the truth of their tick was no longer held
  /// Server -> client UDP payload [kbit/s] (ClientStats::bytes_in: snapshots, request results,
  /// pongs, events): mean over the run and nearest-rank p95 of the 1 s windows.
  double kbps_avg = 0, kbps_p95 = 0;
  double kbps_snapshots_avg = 0;  ///< of that, snapshot datagrams only (ServerStats::snapshot_bytes)
  /// The same snapshots as full uncompressed state: wire::uncompressed_snapshot_bytes(n) per
  /// applied snapshot, n = objects in the client's view [kbit/s].
  double kbps_full_state_avg = 0, kbps_full_state_p95 = 0;
  /// Client view vs server truth at the snapshot's tick, over every object of every applied
  /// snapshot (objects the budget deferred count with their stale values).
  double pos_err_mm_max = 0, pos_err_mm_rms = 0, rot_err_deg_max = 0;
  double pos_err_over_2mm_fraction = 0;  ///< of the object samples
  uint64_t pose_samples = 0;
  /// Server tick time [ms] (ServerStats, per 1 s stats window): the median of the windows' p50
  /// and the largest of their p99 (an upper bound of the run's p99).
  double server_tick_ms_p50 = 0, server_tick_ms_p99 = 0;
  uint64_t server_steps_dropped = 0;    ///< steps the server's catch-up cap discarded in the run
  /// The server thread's work per tick [ms], mean over the measured time: ServerStats step_ns
  /// (physics and recording) + events_ns + snapshots_ns, divided by the ticks stepped.
  double server_work_ms_per_tick = 0;
  double server_step_ms_per_tick = 0;   ///< of that, step_ns: physics steps and recording
  /// Of that, ServerStats::record_ns: world hashes, tick frames and keyframes for the recording
  /// [ms per tick], and that as a share of the whole work per tick (0 without recording).
  double server_record_ms_per_tick = 0;
  double recording_share = 0;
  bool recording = false;               ///< N1Options::record_file was set
  double player_speed_avg = 0;          ///< horizontal speed of the player [m/s], client view
  double player_path_err_m_rms = 0;     ///< RMS of |distance from origin - 10 m| [m]
  uint64_t client_resends = 0;          ///< ClientStats::requests_resent over the whole session
  uint64_t snapshots_rejected = 0;      ///< ClientStats::snapshots_rejected over the whole session
  uint64_t request_errors = 0;          ///< apply_force answers other than Ok
  /// What else the server sent in the measured time, per second: collision events delivered to
  /// the application (each once; the server resends unacked ones) and request results.
  double events_per_s = 0;
  double results_per_s = 0;
};

/// Runs N1 once: starts the server (127.0.0.1, ephemeral port, 60 Hz ticks and snapshots),
/// connects a client, creates the player and drives it for warmup_s + seconds.
/// @return nullopt with *error saying why when the server cannot start, the client cannot connect,
///         the player cannot be created or the server ends the session
std::optional<N1Result> run_n1(const N1Options& options, std::string* error);

/// One JSON object (one line, no newline) with every field of `result`.
std::string to_json_line(const N1Result& result);

/// The human-readable report, with the targets (<= 256 kbit/s average, position error <= 2 mm).
void print_human(std::FILE* out, const N1Result& result);

}  // namespace impulse::bench
