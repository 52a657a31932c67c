// The Impulse server: one Asio io_context drives the UDP endpoint and a fixed-timestep tick loop
// (read datagrams -> apply requests -> step x n, capped -> write snapshots -> send).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/app/server_config.h"

namespace impulse::physics {
class World;
}
namespace impulse::net {
struct LinkConditions;
}

namespace impulse::server {

/// Called on the server's thread after each wake-up that wrote snapshots, with the world they
/// describe (benchmarks compare clients' views with it). Must not block.
using SnapshotObserver = std::function<void(const physics::World& world)>;

/// impulse-replay serve: play a recording to read-only spectators instead of simulating a scene
/// (docs/RECORDING.md, "Serving a recording"). The server then takes tick_hz from the recording
/// and ignores scene and the recording flags of its ServerConfig.
struct ReplayOptions {
  std::string file;                   ///< the recording (impulse-server --record)
  double speed = 1;                   ///< times the recorded tick rate, in [1/16, 16]
  std::optional<uint64_t> from_tick;  ///< start at this tick (default: the recording's first)
  bool loop = false;                  ///< at the end restart from the first tick instead of pausing
  int snapshot_hz = 0;                ///< snapshots per second; 0 = the recording's rate
  double status_interval_s = 10;      ///< seconds between status log lines
  bool check_hashes = true;           ///< compare every played tick's world_hash with the recorded one
  /// Who may pause, resume, seek or change the speed of the one shared timeline (ReplayControl;
  /// others get NotController). --controller: connect-token client ids (needs --token-key, so
  /// that the id is proven); --anyone-controls: every spectator (a trusted audience, or tests).
  /// Neither: nobody, and the timeline plays as started (--speed, --from, --loop).
  std::vector<uint32_t> controllers;
  bool anyone_controls = false;
};

/// Monotonic counters, readable from any thread while the server runs.
struct ServerStats {
  std::atomic<uint64_t> tick{0};
  std::atomic<uint32_t> objects{0};
  std::atomic<uint32_t> awake{0};
  std::atomic<uint32_t> clients{0};
  std::atomic<uint64_t> datagrams_in{0};
  std::atomic<uint64_t> datagrams_out{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> datagrams_dropped{0};  ///< failed verification (any DropReason)
  /// Datagrams at a session's address that failed authentication: forged or corrupted seal,
  /// replayed sequence, plaintext other than Connect, or sealed without a session. Dropped unanswered.
  std::atomic<uint64_t> datagrams_unauthenticated{0};
  std::atomic<uint64_t> requests_applied{0};   ///< requests answered with Ok
  std::atomic<uint64_t> requests_rejected{0};  ///< requests answered with an error code
  std::atomic<uint64_t> requests_duplicate{0}; ///< resent requests deduplicated (answered again or ignored)
  std::atomic<uint64_t> requests_unsequenced{0};  ///< fire-and-forget pushes (request_id 0) queued
  // Ticks (protocol 10): Input frames by what became of them, the ticks of input buffered beyond
  // each applied frame (their mean is the input buffer), actions held for their tick and those
  // that arrived after it, and lag-compensated raycasts.
  std::atomic<uint64_t> input_frames_applied{0};
  std::atomic<uint64_t> input_frames_repeated{0};
  std::atomic<uint64_t> inputs_relayed{0};  ///< Snapshot.inputs entries sent (other clients' inputs)
  std::atomic<uint64_t> input_frames_late{0};
  std::atomic<uint64_t> inputs_refused{0};
  std::atomic<uint64_t> input_buffered_ticks{0};
  std::atomic<uint64_t> actions_held{0};
  std::atomic<uint64_t> actions_late{0};
  std::atomic<uint64_t> raycasts_compensated{0};
  std::atomic<uint64_t> lag_compensation_bytes{0};  ///< the pose history's memory
  std::atomic<uint64_t> world_hash{0};         ///< World::world_hash() at world_hash_tick
  /// The tick of world_hash: refreshed once per second of ticks.
  std::atomic<uint64_t> world_hash_tick{0};
  std::atomic<uint64_t> steps_dropped{0};      ///< steps discarded by the max_steps_per_frame cap
  /// Bodies the World's step guard removed because their state was not finite (World::removed_non_finite).
  std::atomic<uint64_t> bodies_removed_non_finite{0};
  /// Bodies whose contact group the World put back because its solve was not finite (World::restored_non_finite).
  std::atomic<uint64_t> bodies_restored_non_finite{0};
  std::atomic<uint64_t> tick_ns_p50{0};        ///< median tick time [ns] over the last stats interval
  std::atomic<uint64_t> tick_ns_p99{0};        ///< 99th percentile tick time [ns] over the last stats interval
  /// Every wake-up that ran steps since start, by its tick time: bin i counts times in
  /// [i, i + 1) * kTickHistogramBinNs, the last bin everything longer. Two copies taken some time
  /// apart give the exact distribution between them (tick_time_quantile).
  static constexpr size_t kTickHistogramBins = 512;
  static constexpr uint64_t kTickHistogramBinNs = 250'000;  // 0.25 ms: the last bin starts at 127.75 ms
  std::array<std::atomic<uint64_t>, kTickHistogramBins> tick_histogram{};
  std::atomic<uint64_t> snapshot_bytes{0};     ///< snapshot datagram bytes sent, all clients
  /// Snapshots not sent because their session had been silent for kSilentSessionSnapshotHold.
  std::atomic<uint64_t> snapshots_held_silent{0};
  std::atomic<uint64_t> snapshots_held_throttled{0};  ///< skipped: the session's sends were reduced
  /// Bodies put to sleep because their owner was over its share of the tick (tick_budget.h).
  std::atomic<uint64_t> bodies_put_to_sleep_over_budget{0};
  std::atomic<uint64_t> event_bytes{0};        ///< collision-event datagram bytes sent, all clients (as snapshot_bytes: before sealing)
  std::atomic<uint64_t> events_queued{0};      ///< collision events queued for delivery, all sessions
  /// Request results by wire::ResultCode value (the index): every answer counted in
  /// requests_applied (Ok) or requests_rejected (the rest). kResultCodes = ResultCode::MAX + 1,
  /// checked against the schema in server_core.cpp.
  static constexpr size_t kResultCodes = 21;
  std::array<std::atomic<uint64_t>, kResultCodes> request_results{};
  // Where the live tick's time goes, summed over all updates [ns] (wall clock of the server thread).
  std::atomic<uint64_t> step_ns{0};            ///< physics steps (and recording)
  std::atomic<uint64_t> record_ns{0};          ///< of step_ns: world hashes, tick frames and keyframes for --record
  std::atomic<uint64_t> events_ns{0};          ///< raycasts and collision-event datagrams
  std::atomic<uint64_t> snapshots_ns{0};       ///< snapshot source and per-client snapshot writes
  /// Timer wake-ups of the tick loop (with or without steps): its heartbeat, read by the Agones
  /// thread, which withholds Health while it stands still.
  std::atomic<uint64_t> wakeups{0};
  std::atomic<uint64_t> agones_calls_ok{0};      ///< Agones SDK calls (Ready, Health, Shutdown) answered 2xx
  std::atomic<uint64_t> agones_calls_failed{0};  ///< Agones SDK calls that failed (each retry counts)
};

/// The q-quantile (q in [0, 1]) of the tick times counted in `counts` (a difference of two
/// ServerStats::tick_histogram copies) [ms]: the upper edge of the bin that holds it, so it is at
/// most one bin (0.25 ms) above the exact value; the last bin reports its lower edge. nullopt when
/// `counts` is all zero.
std::optional<double> tick_time_quantile(std::span<const uint64_t> counts, double q);

class Server {
 public:
  explicit Server(ServerConfig config);
  /// A server that plays the recording `replay` (impulse-replay serve) to read-only spectators.
  Server(ServerConfig config, ReplayOptions replay);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Loads the scene and binds the socket. On failure returns false and sets *error to a message
  /// that says what to do (e.g. "port 7777 in use: pick another with --port").
  /// Also sets the spdlog default logger's level to config.log_level and logs the configuration.
  bool start(std::string* error);
  /// The bound UDP port (useful with port 0). Valid after start().
  uint16_t local_port() const;
  /// Runs the tick loop on the calling thread until stop() is called. Returns at once when start()
  /// did not succeed. Call at most once.
  void run();
  /// Thread-safe and signal-safe to request: sends Disconnect to every client, then run() returns.
  void stop();
  const ServerStats& stats() const;
  /// Thread-safe: replaces the simulated network conditions on the server's send path (testing;
  /// --sim-* at start-up). Datagrams the old conditions still hold are sent at once. Invalid
  /// conditions are logged and ignored.
  void set_link_conditions(const net::LinkConditions& conditions);
  /// Installs `observer` (see SnapshotObserver). Call after a successful start() and before run().
  void set_snapshot_observer(SnapshotObserver observer);
  /// The bound TCP port of the admin endpoint; 0 when it is off. Valid after start().
  uint16_t admin_port() const;

  /// TEST ONLY: holds the tick thread (as a stuck step would) until test_only_release_stall()
  /// or `at_most` has passed, so /healthz can be seen to go 503. Never called by the server.
  void test_only_stall(std::chrono::milliseconds at_most);
  /// TEST ONLY: ends a test_only_stall() hold early.
  void test_only_release_stall();

 private:
  bool start_replay(std::string* error);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Runs `server` (started) on the calling thread until SIGINT or SIGTERM, which call
/// Server::stop() (Disconnect to every client), or until stop() is called otherwise. The signals
/// are caught on a helper thread's io_context, so nothing runs in signal context.
void run_until_signal(Server& server);

}  // namespace impulse::server
