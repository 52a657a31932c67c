// The load generator's bots: N impulse::Client sessions driven by a few threads (each thread
// polls its clients without blocking, netcode.io's client model), through four bounded phases:
// connect, spawn bodies, push them for a measured time, destroy them. The server-side figures
// come from the in-process server when there is one (impulse-loadgen --server inproc).
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tools/loadgen/inproc_server.h"

namespace impulse::tools {

/// How the bots run. Every phase has a deadline, so a run always ends.
struct LoadOptions {
  std::string host = "127.0.0.1";  ///< the server's address
  uint16_t port = 7777;
  int clients = 16;                ///< bots, one session each, [1, 4096]
  int bodies = 1000;               ///< bodies to spawn in total, spread evenly over the bots
  double seconds = 30;             ///< length of the measured push phase [s]
  int threads = 1;                 ///< threads polling the bots; bot i belongs to thread i % threads
  /// Nice value [0, 19] the bot threads take (Linux applies nice per thread). The bots stand in
  /// for players on other machines: sharing the server's cores, they should take the CPU the
  /// server leaves rather than preempt its ticks. 0 competes with the server as an equal.
  int bot_nice = 0;
  /// Each body gets one push per interval [s]: an impulse of push_speed [m/s] times its 1 kg mass
  /// in a pseudo-random horizontal direction (so it slides, staying in contact with the ground),
  /// the pushes spread evenly over the interval.
  double push_interval_s = 2.0;
  float push_speed = 1.0f;
  /// Also drive each bot's first body with one Input a tick (protocol 10: Force mode, 0.5 N in a
  /// direction of its own, under static friction), stamped with ClientCore::input_tick, as a
  /// player's client sends its controls.
  bool inputs = false;
  /// > 0: each bot sets a sphere area of interest of this radius [m] about the centre of its
  /// bodies, as a player's client would about its avatar; 0: the default area (the whole world).
  float interest_radius = 20.0f;
  /// Bodies (boxes of half-extent 0.25 m, 1 kg) sit on a square grid in the XZ plane with this
  /// pitch [m], starting at x = spawn_x0 [m] (clear of the demo scene's objects), centred on z = 0,
  /// their centres at spawn_height [m] (1 cm above a ground plane at y = 0).
  float spacing = 1.5f;
  float spawn_x0 = 20.0f;
  float spawn_height = 0.26f;
  /// Requests per second at most per bot (token bucket, burst of 32), below the server's default
  /// --max-requests-per-second of 1000 so pacing, not the server, limits the bots.
  double max_requests_per_second = 500;
  double ping_interval_s = 1.0;                          ///< each bot pings this often (RTT)
  std::chrono::milliseconds frame{5};                    ///< a thread sweeps its bots this often
  std::chrono::milliseconds connect_timeout{2000};       ///< per bot
  double phase_timeout_s = 30;                           ///< connect, spawn and destroy, each [s]
  /// Between spawn and push the bots only poll, for at most this long [s], so the bodies land and
  /// sleep before the measurement; against an in-process server it ends once <= 1 % are awake.
  double settle_s = 10;
  bool progress = true;                                  ///< a line on stderr every 5 s
};

/// Non-Ok RequestResult codes (index = ResultCode value; the last bin counts unknown codes).
using ErrorCounts = std::array<uint64_t, 32>;

/// What a run measured. Per-second rates are over the push phase; "per client" divides by the
/// bots that connected.
struct LoadReport {
  std::string server;          ///< "inproc" or HOST:PORT
  int clients = 0;
  int clients_connected = 0;
  int connect_failures = 0;
  std::string first_connect_error;
  int threads = 0;
  int bodies_requested = 0;
  int bodies_targeted = 0;     ///< after the per-client quotas
  int bodies_spawned = 0;      ///< creations answered Ok
  int bodies_destroyed = 0;    ///< destructions answered Ok
  uint32_t quota_per_client = 0;  ///< smallest Client::max_objects() seen (0 = no limit)
  std::string shortfall;       ///< why bodies_targeted < bodies_requested, or empty
  double seconds = 0;          ///< measured push phase [s]
  double connect_s = 0, spawn_s = 0, settle_s = 0, destroy_s = 0;  ///< how long the other phases took [s]
  int tick_hz = 0, snapshot_hz = 0;  ///< as the bots' sessions report them
  float interest_radius = 0;
  uint64_t requests_sent = 0;  ///< all phases
  uint64_t pushes = 0;         ///< impulses sent in the push phase
  uint64_t inputs = 0;         ///< Input datagrams sent in the push phase (LoadOptions::inputs)
  /// Creates answered RateLimited (the server's per-tick request queue was full) and sent again,
  /// as a client backing off would; they are not in `errors`.
  uint64_t create_retries = 0;
  ErrorCounts errors{};        ///< all phases
  uint64_t error_total = 0;
  uint64_t disconnects = 0;    ///< sessions lost: closed by the server, or gone when a bot sent
  std::map<std::string, uint64_t> disconnect_reasons;  ///< why, with the server's reason text
  uint64_t snapshots = 0;      ///< applied by all bots in the push phase
  uint64_t snapshots_rejected = 0;
  uint64_t relayed_inputs = 0; ///< other bots' inputs the bots received in snapshots (Snapshot.inputs), push phase
  double bytes_in_per_client_per_s = 0;   ///< server -> bot UDP payload
  double bytes_out_per_client_per_s = 0;  ///< bot -> server UDP payload
  /// Ping round trips measured by the bots [ms]; a pong is read at the bot's next frame, so
  /// these include up to frame_ms of waiting.
  double rtt_ms_p50 = 0, rtt_ms_p99 = 0;
  int64_t frame_ms = 0;        ///< LoadOptions::frame
  int bot_nice = 0;            ///< LoadOptions::bot_nice
  /// Share of the machine's CPU time (all CPUs) the hypervisor stole in the push phase [%], from
  /// /proc/stat: a virtual CPU descheduled mid-tick stretches that tick. nullopt off Linux.
  std::optional<double> steal_percent;
  uint64_t rtt_samples = 0;
  double bots_cpu_s = 0;       ///< CPU time of the bot threads in the push phase (per-thread clocks)
  double process_cpu_s = 0;    ///< CPU time of the whole process in the push phase (getrusage)
  /// In-process server only: CPU times (below), tick times, steps the catch-up cap dropped, the
  /// mean awake count and the object count at the end of the push phase.
  std::optional<double> server_cpu_s;         ///< process minus bots: the tick thread and its worker pool [s]
  std::optional<double> server_thread_cpu_s;  ///< the tick thread alone [s]
  /// Tick time (one wake-up's steps, events and snapshots) over every wake-up of the push phase
  /// (ServerStats::tick_histogram, to 0.25 ms): p50, p99 (what the 16.6 ms target is judged on)
  /// and max [ms]; server_wakeups counts them.
  std::optional<double> server_tick_ms_p50, server_tick_ms_p99, server_tick_ms_max;
  uint64_t server_wakeups = 0;
  /// The p99 of each 1 s stats window (ServerStats::tick_ns_p99): their median and their largest
  /// [ms]. With ~60 wake-ups a window, a window's p99 is close to its slowest wake-up.
  std::optional<double> server_tick_ms_p99_median, server_tick_ms_p99_worst_window;
  std::optional<uint64_t> server_steps_dropped;
  /// Where the server thread's tick time went in the push phase [ms per second of it]: physics
  /// steps, collision-event datagrams, snapshot writes (ServerStats::step_ns, events_ns, snapshots_ns).
  std::optional<double> server_step_ms_per_s, server_events_ms_per_s, server_snapshots_ms_per_s;
  std::optional<double> awake_avg;
  std::optional<uint32_t> objects;
};

/// Runs the bots against options.host:options.port through every phase. `server` is the
/// in-process server when there is one (null for an external server): its stats are then sampled.
/// Never throws on network trouble: failures are counted in the report.
LoadReport run_load(const LoadOptions& options, const InprocServer* server);

/// The report as one JSON object (one line, no newline).
std::string to_json_line(const LoadReport& report);

/// The human-readable summary.
void print_human(std::FILE* out, const LoadReport& report);

}  // namespace impulse::tools
