// The admin HTTP endpoint (--admin-port): /metrics in the Prometheus text format, /healthz,
// /readyz and /objects/<id>, served by an event-driven front (admin_http.h) on a thread of its own. The tick thread never waits for it: it
// publishes a once-per-wake-up copy of its figures with try_lock (skipped when a scrape is
// copying it, so the next wake-up publishes instead) and health through atomics; the HTTP
// threads only read those.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "server/app/admin_http.h"
#include "server/app/assets.h"
#include "server/app/metrics_text.h"
#include "server/app/server.h"
#include "server/net/reject_log.h"

namespace impulse::server {

/// Bucket bounds of impulse_tick_duration_seconds [s]: around the 60 Hz budget (16.7 ms).
metrics::Histogram make_tick_histogram();
/// Bucket bounds of impulse_client_rtt_seconds [s]: loopback to intercontinental.
metrics::Histogram make_rtt_histogram();

/// What the tick thread publishes after each wake-up: one consistent set of figures. Plain
/// values only (copied under a lock that the tick thread only ever try_locks).
struct MetricsSnapshot {
  bool published = false;  ///< false until the first wake-up
  bool playback = false;   ///< impulse-replay serve
  uint64_t steps = 0;      ///< steps taken (in playback: ticks played) since start
  uint64_t world_tick = 0;
  uint64_t steps_dropped = 0;
  uint32_t clients = 0, max_clients = 0, bodies = 0, awake = 0;
  uint64_t datagrams_in = 0, bytes_in = 0, datagrams_out = 0, bytes_out = 0;
  uint64_t datagrams_invalid = 0, datagrams_unauthenticated = 0;
  std::array<uint64_t, static_cast<size_t>(RejectReason::Count)> drops{};  ///< RejectLog::count by reason
  std::array<uint64_t, ServerStats::kResultCodes> results{};               ///< by wire::ResultCode
  uint64_t requests_duplicate = 0, requests_unsequenced = 0;
  // Ticks (protocol 10): ServerStats' fields of the same names.
  uint64_t input_frames_applied = 0, input_frames_repeated = 0, inputs_relayed = 0, input_frames_late = 0, inputs_refused = 0;
  uint64_t input_buffered_ticks = 0, actions_held = 0, actions_late = 0, raycasts_compensated = 0;
  uint64_t lag_compensation_bytes = 0;
  uint64_t snapshot_bytes = 0, event_bytes = 0, events_queued = 0;
  uint64_t bodies_removed_non_finite = 0;
  uint64_t bodies_restored_non_finite = 0;
  uint64_t snapshots_held_silent = 0;
  uint64_t snapshots_held_throttled = 0;
  uint64_t bodies_put_to_sleep_over_budget = 0;
  uint64_t step_ns = 0, record_ns = 0, events_ns = 0, snapshots_ns = 0;
  metrics::Histogram tick_seconds = make_tick_histogram();
  metrics::Histogram rtt_seconds = make_rtt_histogram();
  bool recording = false;
  uint64_t record_frames_encoded = 0, record_bytes_encoded = 0, record_bytes_written = 0, record_files = 0;
  uint64_t record_frames_dropped = 0, record_write_errors = 0, record_backlog_events = 0;
};

/// The hand-over of MetricsSnapshot from the tick thread to the HTTP threads.
class MetricsExchange {
 public:
  /// Tick thread: copies `s` in unless a reader holds the lock (then this wake-up's figures are
  /// skipped; the next wake-up publishes). Never blocks. Returns whether it published.
  bool publish(const MetricsSnapshot& s);
  /// HTTP threads: a copy of the latest published snapshot.
  MetricsSnapshot read() const;

 private:
  mutable std::mutex mutex_;
  MetricsSnapshot latest_;
};

/// One session as GET /clients shows it (no address: the logs have those; the name only with
/// --admin-owner-names, as for /objects).
struct ClientFigures {
  uint32_t client_id = 0;
  std::string name;
  double connected_s = 0;       ///< since the handshake [s]
  double rtt_ms = -1;           ///< smoothed from acks (as impulse_client_rtt_seconds); < 0: none yet
  uint64_t received_bytes = 0;  ///< accepted from the client [bytes]
  uint64_t sent_bytes = 0;      ///< sent to the client, sealed [bytes]
};

/// The /clients JSON: an array of objects, one per session, by client id; "name" only when
/// `with_names`.
std::string render_clients(std::span<const ClientFigures> clients, bool with_names);

/// The latest /clients document, handed from the tick thread (once a second) to the HTTP threads.
class ClientsExchange {
 public:
  /// Tick thread: replaces the document unless a reader holds the lock (then the next second's does).
  void publish(std::string document);
  std::string read() const;

 private:
  mutable std::mutex mutex_;
  std::string document_ = "[]\n";
};

/// GET /objects/<index>[:<generation>]: who owns one object. The admin thread may not touch the
/// world or the session table (they belong to the tick thread), so it posts the id here and the
/// tick thread answers at its next wake-up. Lock-free on the tick side: one atomic state word
/// hands the question and the answer back and forth; the tick thread only ever loads it and
/// compare-exchanges it, never waits. One question at a time (a timed mutex on the HTTP side).
class ObjectQueryBox {
 public:
  struct Answer {
    bool found = false;            ///< a live object with that id (false: unknown or stale)
    uint32_t index = 0, generation = 0;
    uint32_t owner = 0;            ///< the owning client id; 0 = the scene (or a playback world)
    bool owner_connected = false;  ///< the owner's session is still open
    /// Whether owner_name is filled in (--admin-owner-names): off by default, since anyone who
    /// can reach the port would otherwise read every player's chosen name.
    bool owner_name_shown = false;
    std::string owner_name;        ///< the owner's client_name when connected and shown
    bool shared = true;
  };
  enum class Outcome { Answered, Busy, Timeout };

  /// HTTP thread: asks about `index` (with `generation`, or the live object there when
  /// !has_generation) and waits up to `timeout` for the tick thread's answer. Busy: another
  /// question held the box past the deadline; Timeout: the tick did not answer in time.
  Outcome ask(uint32_t index, uint32_t generation, bool has_generation, std::chrono::milliseconds timeout, Answer* out);

  /// Tick thread: the question waiting, if any (then it must call answer()). Never blocks.
  bool take(uint32_t* index, uint32_t* generation, bool* has_generation);
  /// Tick thread: after take() returned true. Never blocks.
  void answer(const Answer& a);

 private:
  enum : uint32_t { kIdle = 0, kAsked = 1, kAnswering = 2, kAnswered = 3 };
  std::timed_mutex askers_;            // HTTP threads: one question at a time
  std::atomic<uint32_t> state_{kIdle};
  // Written only by the side that owns the state (asker: question while idle; tick: answer
  // while answering), read by the other after an acquire load of state_.
  uint32_t index_ = 0, generation_ = 0;
  bool has_generation_ = false;
  Answer answer_;
};

/// The JSON body of GET /objects/... for a found object (owner null for the scene's).
std::string render_object_json(const ObjectQueryBox::Answer& a);
/// Parses "<index>" or "<index>:<generation>" (decimal, each fitting 32 bits); false otherwise.
bool parse_object_id(std::string_view text, uint32_t* index, uint32_t* generation, bool* has_generation);

/// Health and readiness, written by the server's threads and read by the HTTP threads.
struct HealthState {
  std::atomic<bool> ready{false};     ///< the scene is loaded, the UDP socket bound, the loop running
  std::atomic<bool> draining{false};  ///< stop() was called (SIGTERM/SIGINT): shutting down
  /// steady_clock time [ns since its epoch] when the last wake-up completed; 0 = none yet.
  std::atomic<int64_t> last_progress_ns{0};
};

/// An HTTP status and a one-line plain-text body.
struct Verdict {
  int status = 200;
  std::string body;
};
/// /healthz: 200 while the last wake-up completed within `stall_seconds` of `now_ns` (or while
/// draining: a loop stopped on purpose is not stuck); 503 when it is older, or before the loop ran.
Verdict check_health(const HealthState& h, int64_t now_ns, double stall_seconds);
/// /readyz: 200 when ready and not draining, else 503.
Verdict check_ready(const HealthState& h);

/// The process's own figures (the Prometheus client libraries' process_* metrics), from
/// getrusage, /proc/self/statm, /proc/self/stat and /proc/self/fd.
struct ProcessFigures {
  bool cpu_ok = false, memory_ok = false, start_ok = false, fds_ok = false;
  double cpu_seconds = 0;
  uint64_t resident_bytes = 0, virtual_bytes = 0;
  double start_time_seconds = 0;  ///< Unix time
  uint64_t open_fds = 0;
};
ProcessFigures read_process_figures();

/// The /metrics body for `s` and `p` (metric names and meanings: docs in /metrics' HELP lines).
std::string render_metrics(const MetricsSnapshot& s, const ProcessFigures& p);

/// The HTTP side: the routes on an HttpFront (one thread, bounded connections, head sizes and
/// deadlines; admin_http.h) plus one worker thread for /objects, whose answer comes from the
/// tick thread. Only GET and HEAD of /metrics, /healthz, /readyz and /objects/<id>; other paths
/// 404, other methods 405.
class AdminServer {
 public:
  struct Options {
    std::string bind = "127.0.0.1";
    int port = 0;  ///< -1 or 0 here: an ephemeral port (the caller decides whether to start at all)
    double stall_seconds = 2.0;
    /// GET /assets and /assets/<id> (assets.h); empty: no assets.
    AssetDocuments assets;
  };
  /// Binds (synchronously, so a taken port fails the server's start) and starts the threads.
  /// `exchange` and `health` must outlive the AdminServer. On failure returns null with *error
  /// saying what to do.
  static std::unique_ptr<AdminServer> start(const Options& options, const MetricsExchange& exchange,
                                            const HealthState& health, ObjectQueryBox& objects,
                                            const ClientsExchange& clients, std::string* error);
  ~AdminServer();  ///< stops listening and joins the threads
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  uint16_t port() const { return port_; }
  /// What the front refused so far (evictions, deadlines, oversized heads).
  HttpFrontStats front_stats() const;

 private:
  AdminServer() = default;
  struct Http;
  std::unique_ptr<Http> http_;
  uint16_t port_ = 0;
};

}  // namespace impulse::server
