// The Asio shell around ServerCore: one io_context on one thread runs an async UDP receive and a
// steady_timer that wakes at each step boundary (fixed timestep, Fiedler's "Fix Your Timestep!").
// Only this file reads the clock; it passes `now` into the core.
// Over 700 lines on purpose: the one file that owns the io_context, where the receive loop, the
// step timer, signals and the admin and Agones threads' start and stop meet.
#include "server/app/server.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <asio/post.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "server/app/agones.h"
#include "server/app/admin.h"
#include "server/app/config.h"
#include "server/app/log_format.h"
#include "server/app/scene.h"
#include "server/app/server_core.h"
#include "server/net/udp_endpoint.h"
#include "server/record/playback.h"
#include "server/record/recorder.h"
#include "shared/net/link_simulator.h"

namespace impulse::server {
namespace {

// How long run() waits, after the clients were told, for the Agones sidecar to acknowledge
// Shutdown (the call is retried meanwhile). Well inside Kubernetes' default 30 s grace period.
constexpr std::chrono::milliseconds kAgonesShutdownWait{5000};

// Datagrams read per drain of the socket. 2 MiB of receive buffer holds about 2,000 small
// datagrams; a drain of this many takes a few milliseconds.
constexpr size_t kMaxDrainDatagrams = 1024;

double to_ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

net::LinkConditions link_conditions_of(const ServerConfig& c) {
  net::LinkConditions l;
  l.loss = c.sim_loss;
  l.latency_ms = c.sim_latency_ms;
  l.jitter_ms = c.sim_jitter_ms;
  l.duplicate = c.sim_duplicate;
  l.reorder = c.sim_reorder;
  l.seed = c.sim_seed;
  return l;
}

// The part of the configuration a recording carries and the recorder needs.
record::RecordingConfig recording_config_of(const ServerConfig& c) {
  record::RecordingConfig r;
  r.tick_hz = c.tick_hz;
  r.snapshot_hz = c.snapshot_hz;
  r.max_clients = c.max_clients;
  r.max_steps_per_frame = c.max_steps_per_frame;
  r.client_timeout_s = c.client_timeout_s;
  r.scene = c.scene;
  r.record_file = c.record_file;
  r.record_dir = c.record_dir;
  r.record_rotate_mb = c.record_rotate_mb;
  r.record_rotate_minutes = c.record_rotate_minutes;
  r.keyframe_seconds = c.keyframe_seconds;
  return r;
}

AgonesSettings agones_settings_of(const ServerConfig& c) {
  AgonesSettings a;
  a.port = c.agones_port != 0 ? c.agones_port : kAgonesDefaultHttpPort;
  a.health_interval = std::chrono::milliseconds(std::llround(c.agones_health_interval_s * 1000.0));
  a.shutdown_when_empty = std::chrono::milliseconds(std::llround(c.agones_shutdown_when_empty_s * 1000.0));
  return a;
}

// The q-quantile of `samples` (reordered in place); 0 when empty.
uint64_t quantile(std::vector<uint64_t>& samples, double q) {
  if (samples.empty()) return 0;
  const auto k = static_cast<size_t>(q * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(k), samples.end());
  return samples[k];
}

}  // namespace

struct Server::Impl {
  explicit Impl(ServerConfig c)
      : config(std::move(c)), link(std::make_unique<net::LinkSimulator<Endpoint>>(link_conditions_of(config))) {}

  ServerConfig config;
  std::optional<ReplayOptions> replay;  // impulse-replay serve: play this instead of a scene
  ServerStats stats;
  asio::io_context io{1};  // concurrency hint: one thread runs it
  asio::ip::udp::socket socket{io};
  asio::steady_timer timer{io};
  asio::steady_timer link_timer{io};  // delivers datagrams held by the link simulator
  std::unique_ptr<net::LinkSimulator<Endpoint>> link;  // active only with --sim-* flags (testing)
  Outbox delayed;                     // one datagram at a time, from the simulator to the socket
  std::unique_ptr<ServerCore> core;
  std::unique_ptr<record::Recorder> recorder;  // null when not recording
  std::unique_ptr<AgonesLifecycle> agones;     // null without --agones / AGONES_SDK_HTTP_PORT
  Outbox outbox;
  // One byte more than the limit: a larger datagram is truncated by the kernel to 1201 bytes and
  // then rejected as Oversized. Aligned for in-place FlatBuffers reads (wire::kDatagramAlignment).
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes + 1> receive_buffer{};
  Endpoint receive_from;
  uint16_t port = 0;
  bool started = false;
  bool stopped = false;
  std::optional<TimePoint> drain_until;  // a drain's deadline (--drain-seconds); unset: not draining

  // The admin endpoint (--admin-port): the tick side publishes into `exchange` and `health`
  // and never waits on the HTTP threads.
  HealthState health;
  MetricsExchange exchange;
  ObjectQueryBox objects;              // GET /objects: asked by the HTTP threads, answered here
  ClientsExchange clients_document;    // GET /clients: rendered here once a second
  std::vector<ClientFigures> client_figures;
  std::unique_ptr<AdminServer> admin;  // null when --admin-port is 0
  MetricsSnapshot metrics_snapshot;    // filled on the tick thread, then published
  metrics::Histogram tick_seconds = make_tick_histogram();
  metrics::Histogram rtt_seconds = make_rtt_histogram();
  uint64_t steps_total = 0;
  TimePoint next_rtt_sample{};
  std::atomic<bool> stall_release{false};  // test_only_stall()

  // Stats window for the periodic log line.
  struct Window {
    TimePoint since{};
    double tick_ms_sum = 0;
    double tick_ms_max = 0;
    uint64_t wakeups = 0;
    uint64_t steps = 0;
    uint64_t datagrams_in = 0, bytes_in = 0, datagrams_out = 0, bytes_out = 0, dropped = 0, dropped_steps = 0;
    uint64_t step_ns = 0, events_ns = 0, snapshots_ns = 0;  // ServerStats totals at the window's start
    std::vector<uint64_t> tick_ns;  // per wake-up with steps, for the percentiles
  } window;

  // Readiness, not data: the handler drains the socket itself. An async_receive_from would read
  // one datagram per handler, and when ticks run late every due timer handler is queued ahead
  // of it, so the server read one datagram per tick while the kernel dropped the rest.
  void arm_receive() {
    socket.async_wait(asio::socket_base::wait_read, [this](const asio::error_code& ec) { on_readable(ec); });
  }

  void on_readable(const asio::error_code& ec) {
    if (stopped || ec == asio::error::operation_aborted) return;
    const TimePoint now = Clock::now();
    if (ec) {
      core->rejects().note(RejectReason::ReceiveError, ec.message(), now);
    } else {
      drain_socket(now);
    }
    arm_receive();
  }

  // Reads and handles what the socket holds, at most kMaxDrainDatagrams (a flood must not starve
  // the step; the rest waits for the next wake-up), then sends the replies.
  void drain_socket(TimePoint now) {
    for (size_t i = 0; i < kMaxDrainDatagrams; ++i) {
      asio::error_code ec;
      const size_t n = socket.receive_from(asio::buffer(receive_buffer), receive_from, 0, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) break;
      if (ec) {
        // E.g. ECONNREFUSED after an ICMP port-unreachable for an earlier send: harmless for UDP.
        core->rejects().note(RejectReason::ReceiveError, ec.message(), now);
        continue;
      }
      core->handle_datagram(receive_from, std::span<const uint8_t>(receive_buffer.data(), n), now, outbox);
    }
    flush();
  }

  void arm_timer(TimePoint at) {
    timer.expires_at(at);
    timer.async_wait([this](const asio::error_code& ec) { on_timer(ec); });
  }

  void on_timer(const asio::error_code& ec) {
    if (stopped || ec == asio::error::operation_aborted) return;
    stats.wakeups.fetch_add(1, std::memory_order_relaxed);  // the heartbeat the Agones thread watches
    drain_socket(Clock::now());  // what arrived during the last update is applied in this one
    const TimePoint t0 = Clock::now();  // the tick time covers the update, not the reads
    const int steps = core->update(t0, outbox);
    if (recorder) recorder->hand_off();
    flush();
    const TimePoint t1 = Clock::now();
    if (steps > 0) {
      const double ms = to_ms(t1 - t0);
      window.tick_ms_sum += ms;
      window.tick_ms_max = std::max(window.tick_ms_max, ms);
      const auto tick_ns = static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count());
      window.tick_ns.push_back(tick_ns);
      const size_t bin = std::min<uint64_t>(tick_ns / ServerStats::kTickHistogramBinNs, ServerStats::kTickHistogramBins - 1);
      stats.tick_histogram[bin].fetch_add(1, std::memory_order_relaxed);
      ++window.wakeups;
      window.steps += static_cast<uint64_t>(steps);
      tick_seconds.observe(std::chrono::duration<double>(t1 - t0).count());
      steps_total += static_cast<uint64_t>(steps);
    }
    if (t1 - window.since >= std::chrono::duration<double>(config.stats_interval_s)) log_stats(t1);
    health.last_progress_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count(),
                                  std::memory_order_release);
    if (admin) {
      publish_metrics(t1);
      answer_object_query();
    }
    if (drain_until && (core->sessions().size() == 0 || t1 >= *drain_until)) {
      spdlog::info("drain over: {}", core->sessions().size() == 0 ? "every player has left"
                                                                   : fmt::format("{} players still in", core->sessions().size()));
      shut_down();
      return;
    }
    arm_timer(t0 + core->time_to_next_step());
  }

  /// Server::stop(), on the tick thread. The first stop drains (--drain-seconds) while players are
  /// in: no new sessions, the others play on until they leave or the time is up. A second stop,
  /// or a stop with nobody to wait for, stops now.
  void stop_or_drain() {
    if (stopped) return;
    const double seconds = drain_seconds_of(config);
    const uint32_t players = core ? core->sessions().size() : 0;
    if (drain_until || seconds <= 0.0 || players == 0) {
      if (drain_until) spdlog::info("stopped again while draining: stopping now");
      shut_down();
      return;
    }
    drain_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    core->begin_drain(*drain_until);
    spdlog::info("draining: no new sessions; the {} players in play on for up to {:g} s, or until the last leaves "
                 "(stop again to stop now)",
                 players, seconds);
  }

  // Once per wake-up, on the tick thread: one consistent copy of the figures for /metrics.
  void publish_metrics(TimePoint now) {
    const auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    if (now >= next_rtt_sample) {  // each session's smoothed RTT, and /clients, once per second
      client_figures.clear();
      for (const Session& s : core->sessions().sessions()) {
        const net::LinkEstimates e = s.acks.estimates();
        if (e.acked > 0) rtt_seconds.observe(static_cast<double>(e.rtt_ms) * 1e-3);
        client_figures.push_back(ClientFigures{s.client_id, s.name, std::chrono::duration<double>(now - s.connected_at).count(),
                                               e.acked > 0 ? static_cast<double>(e.rtt_ms) : -1.0, s.bytes_received,
                                               s.bytes_sent});
      }
      std::sort(client_figures.begin(), client_figures.end(),
                [](const ClientFigures& a, const ClientFigures& b) { return a.client_id < b.client_id; });
      clients_document.publish(render_clients(client_figures, config.admin_owner_names));
      next_rtt_sample = now + std::chrono::seconds(1);
    }
    MetricsSnapshot& m = metrics_snapshot;
    m.published = true;
    m.playback = replay.has_value();
    m.steps = steps_total;
    m.world_tick = load(stats.tick);
    m.steps_dropped = core->dropped_steps();
    m.clients = stats.clients.load(std::memory_order_relaxed);
    m.max_clients = static_cast<uint32_t>(config.max_clients);
    m.bodies = stats.objects.load(std::memory_order_relaxed);
    m.awake = stats.awake.load(std::memory_order_relaxed);
    m.datagrams_in = load(stats.datagrams_in);
    m.bytes_in = load(stats.bytes_in);
    m.datagrams_out = load(stats.datagrams_out);
    m.bytes_out = load(stats.bytes_out);
    m.datagrams_invalid = load(stats.datagrams_dropped);
    m.datagrams_unauthenticated = load(stats.datagrams_unauthenticated);
    for (size_t i = 0; i < m.drops.size(); ++i) m.drops[i] = core->rejects().count(static_cast<RejectReason>(i));
    for (size_t i = 0; i < m.results.size(); ++i) m.results[i] = load(stats.request_results[i]);
    m.requests_duplicate = load(stats.requests_duplicate);
    m.requests_unsequenced = load(stats.requests_unsequenced);
    m.input_frames_applied = load(stats.input_frames_applied);
    m.input_frames_repeated = load(stats.input_frames_repeated);
    m.inputs_relayed = load(stats.inputs_relayed);
    m.input_frames_late = load(stats.input_frames_late);
    m.inputs_refused = load(stats.inputs_refused);
    m.input_buffered_ticks = load(stats.input_buffered_ticks);
    m.actions_held = load(stats.actions_held);
    m.actions_late = load(stats.actions_late);
    m.raycasts_compensated = load(stats.raycasts_compensated);
    m.lag_compensation_bytes = load(stats.lag_compensation_bytes);
    m.snapshot_bytes = load(stats.snapshot_bytes);
    m.event_bytes = load(stats.event_bytes);
    m.events_queued = load(stats.events_queued);
    m.bodies_removed_non_finite = load(stats.bodies_removed_non_finite);
    m.bodies_restored_non_finite = load(stats.bodies_restored_non_finite);
    m.snapshots_held_silent = load(stats.snapshots_held_silent);
    m.snapshots_held_throttled = load(stats.snapshots_held_throttled);
    m.bodies_put_to_sleep_over_budget = load(stats.bodies_put_to_sleep_over_budget);
    m.step_ns = load(stats.step_ns);
    m.record_ns = load(stats.record_ns);
    m.events_ns = load(stats.events_ns);
    m.snapshots_ns = load(stats.snapshots_ns);
    m.tick_seconds = tick_seconds;
    m.rtt_seconds = rtt_seconds;
    m.recording = recorder != nullptr;
    if (recorder) {
      const record::RecorderStats& r = recorder->stats();
      m.record_frames_encoded = load(r.frames_encoded);
      m.record_bytes_encoded = load(r.bytes_encoded);
      m.record_bytes_written = load(r.bytes_written);
      m.record_files = load(r.files);
      m.record_frames_dropped = load(r.frames_dropped);
      m.record_write_errors = load(r.write_errors);
      m.record_backlog_events = load(r.backlog_events);
    }
    exchange.publish(m);
  }

  // Once per wake-up, on the tick thread: answers a waiting GET /objects (never waits itself).
  void answer_object_query() {
    uint32_t index = 0, generation = 0;
    bool has_generation = false;
    if (!objects.take(&index, &generation, &has_generation)) return;
    ObjectQueryBox::Answer a;
    a.index = index;
    a.generation = generation;
    if (const auto o = core->ownership(index, generation, has_generation)) {
      a.found = true;
      a.generation = o->id.generation;
      a.owner = o->owner;
      a.shared = o->shared;
      if (o->owner != 0) {
        for (const Session& s : core->sessions().sessions()) {
          if (s.client_id != o->owner) continue;
          a.owner_connected = true;
          a.owner_name_shown = config.admin_owner_names;
          if (a.owner_name_shown) a.owner_name = s.name;
          break;
        }
      }
    }
    objects.answer(a);
  }

  // After the scene is loaded and the UDP socket bound: the admin endpoint, when asked for.
  bool start_admin(std::string* error) {
    if (config.admin_port == 0) return true;
    AdminServer::Options o;
    o.bind = config.admin_bind;
    o.port = config.admin_port;
    o.stall_seconds = config.health_stall_seconds;
    o.assets = render_asset_documents(core->world());
    admin = AdminServer::start(o, exchange, health, objects, clients_document, error);
    if (!admin) return false;
    spdlog::info("admin HTTP on {}:{}: /metrics (Prometheus), /healthz, /readyz, /clients, /objects/<id>, /assets ({} hulls)",
                 config.admin_bind, admin->port(), core->world().hulls().size());
    return true;
  }

  void flush() {
    if (outbox.empty()) return;
    if (link->conditions().active()) {
      const TimePoint now = Clock::now();
      for (const Outbox::Datagram& d : outbox.datagrams()) link->submit(d.to, outbox.bytes_of(d), now);
      outbox.clear();
      arm_link_timer();
      return;
    }
    const SendTotals sent = send_outbox(socket, outbox);
    stats.datagrams_out.fetch_add(sent.datagrams, std::memory_order_relaxed);
    stats.bytes_out.fetch_add(sent.bytes, std::memory_order_relaxed);
    if (sent.errors > 0) {
      core->rejects().note(RejectReason::SendError, fmt::format("{} datagrams", sent.errors), Clock::now());
    }
    outbox.clear();
  }

  void arm_link_timer() {
    const std::optional<TimePoint> due = link->next_due();
    if (!due) return;
    link_timer.expires_at(*due);
    link_timer.async_wait([this](const asio::error_code& ec) {
      if (stopped || ec == asio::error::operation_aborted) return;
      send_due_link(Clock::now());
      arm_link_timer();
    });
  }

  // Sends what the link simulator holds that is due at `until`.
  void send_due_link(TimePoint until) {
    link->deliver_due(until, [this](const Endpoint& to, std::span<const uint8_t> bytes) { delayed.push(to, bytes); });
    const SendTotals sent = send_outbox(socket, delayed);
    stats.datagrams_out.fetch_add(sent.datagrams, std::memory_order_relaxed);
    stats.bytes_out.fetch_add(sent.bytes, std::memory_order_relaxed);
    delayed.clear();
  }

  void change_link(const net::LinkConditions& conditions) {
    send_due_link(TimePoint::max());  // what the old link held arrives now, late
    link = std::make_unique<net::LinkSimulator<Endpoint>>(conditions);
    spdlog::warn("simulated link changed: loss={} latency={}ms jitter={}ms duplicate={} reorder={}{}", conditions.loss,
                 conditions.latency_ms, conditions.jitter_ms, conditions.duplicate, conditions.reorder,
                 conditions.active() ? "" : " (a perfect link)");
  }

  void log_stats(TimePoint now) {
    const auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    const uint64_t in = load(stats.datagrams_in), bin = load(stats.bytes_in);
    const uint64_t out = load(stats.datagrams_out), bout = load(stats.bytes_out);
    const uint64_t dropped = load(stats.datagrams_dropped), dropped_steps = core->dropped_steps();
    const double seconds = std::chrono::duration<double>(now - window.since).count();
    const uint64_t p50 = quantile(window.tick_ns, 0.50), p99 = quantile(window.tick_ns, 0.99);
    stats.tick_ns_p50.store(p50, std::memory_order_relaxed);
    stats.tick_ns_p99.store(p99, std::memory_order_relaxed);
    const uint64_t step_ns = load(stats.step_ns), events_ns = load(stats.events_ns);
    const uint64_t snapshots_ns = load(stats.snapshots_ns);
    const double per_wakeup = window.wakeups ? 1e-6 / static_cast<double>(window.wakeups) : 0.0;  // ns -> ms
    const auto to_us = [](double ms) { return std::round(ms * 1000.0) / 1000.0; };  // ms, to 1 us: no noise digits
    const uint64_t tick = load(stats.tick);
    const uint32_t bodies = stats.objects.load(std::memory_order_relaxed);
    const uint32_t awake = stats.awake.load(std::memory_order_relaxed);
    const uint32_t clients = stats.clients.load(std::memory_order_relaxed);
    const double mean_ms = to_us(window.wakeups ? window.tick_ms_sum / static_cast<double>(window.wakeups) : 0.0);
    const double steps_ms = to_us(static_cast<double>(step_ns - window.step_ns) * per_wakeup);
    const double events_ms = to_us(static_cast<double>(events_ns - window.events_ns) * per_wakeup);
    const double snapshots_ms = to_us(static_cast<double>(snapshots_ns - window.snapshots_ns) * per_wakeup);
    const double p50_ms = to_us(static_cast<double>(p50) / 1e6), p99_ms = to_us(static_cast<double>(p99) / 1e6);
    const double max_ms = to_us(window.tick_ms_max), interval_s = to_us(seconds);
    // --log-format json carries the same figures as fields (per interval except tick, bodies, awake, clients).
    const LogField fields[] = {
        {"event", std::string_view("stats")},
        {"tick", tick},
        {"bodies", bodies},
        {"awake", awake},
        {"clients", clients},
        {"tick_ms_mean", mean_ms},
        {"tick_ms_steps", steps_ms},
        {"tick_ms_events", events_ms},
        {"tick_ms_snapshots", snapshots_ms},
        {"tick_ms_p50", p50_ms},
        {"tick_ms_p99", p99_ms},
        {"tick_ms_max", max_ms},
        {"wakeups", window.wakeups},
        {"steps", window.steps},
        {"steps_dropped", dropped_steps - window.dropped_steps},
        {"datagrams_in", in - window.datagrams_in},
        {"bytes_in", bin - window.bytes_in},
        {"datagrams_out", out - window.datagrams_out},
        {"bytes_out", bout - window.bytes_out},
        {"datagrams_dropped", dropped - window.dropped},
        {"interval_s", interval_s},
    };
    const ScopedLogFields scope(fields);
    spdlog::info(
        "stats: tick={} bodies={} awake={} clients={} tick_ms mean={:.3f} (steps {:.3f} events {:.3f} snapshots "
        "{:.3f}) p50={:.3f} p99={:.3f} max={:.3f} (over {} wake-ups, {} steps, {} dropped) in={} datagrams/{} B "
        "out={} datagrams/{} B dropped={} (last {:.1f} s)",
        tick, bodies, awake, clients, mean_ms, steps_ms, events_ms, snapshots_ms, p50_ms, p99_ms, max_ms,
        window.wakeups, window.steps, dropped_steps - window.dropped_steps, in - window.datagrams_in, bin - window.bytes_in,
        out - window.datagrams_out, bout - window.bytes_out, dropped - window.dropped, seconds);
    std::vector<uint64_t> keep = std::move(window.tick_ns);
    keep.clear();
    window = Window{};
    window.tick_ns = std::move(keep);  // reuse the capacity
    window.since = now;
    window.datagrams_in = in;
    window.bytes_in = bin;
    window.datagrams_out = out;
    window.bytes_out = bout;
    window.dropped = dropped;
    window.dropped_steps = dropped_steps;
    window.step_ns = step_ns;
    window.events_ns = events_ns;
    window.snapshots_ns = snapshots_ns;
  }

  // Called once the scene is loaded and the socket bound; start() in run() sends Ready.
  void make_agones() {
    if (!agones_enabled(config)) return;
    agones = std::make_unique<AgonesLifecycle>(agones_settings_of(config), stats.wakeups, stats.clients,
                                               stats.agones_calls_ok, stats.agones_calls_failed);
    const AgonesSettings& a = agones->settings();
    spdlog::info("agones: lifecycle on: SDK sidecar at {}:{}, Health every {:g} s, Shutdown on SIGTERM{}", a.host, a.port,
                 config.agones_health_interval_s,
                 config.agones_shutdown_when_empty_s > 0
                     ? fmt::format(" and after {:g} s without clients", config.agones_shutdown_when_empty_s)
                     : std::string{});
  }

  void shut_down() {
    if (stopped) return;
    stopped = true;
    if (core) {
      core->shut_down("server shutting down", outbox);
      flush();
      send_due_link(TimePoint::max());  // a simulated link must not swallow the goodbyes
      // The clients are told (their Disconnects are sent): now Agones may tear the pod down.
      if (agones) agones->request_shutdown();
      spdlog::info("{} stopped at tick {}", replay ? "replay server" : "server", core->world().tick());
      if (recorder) recorder->finish();
    }
    asio::error_code ignored;
    timer.cancel();
    link_timer.cancel();
    socket.close(ignored);
    io.stop();
  }
};

std::optional<double> tick_time_quantile(std::span<const uint64_t> counts, double q) {
  uint64_t total = 0;
  for (const uint64_t c : counts) total += c;
  if (total == 0) return std::nullopt;
  // The smallest bin whose cumulative count reaches ceil(q * total) (nearest-rank definition).
  const auto rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(total))));
  uint64_t seen = 0;
  const double bin_ms = 1e-6 * static_cast<double>(ServerStats::kTickHistogramBinNs);
  for (size_t i = 0; i < counts.size(); ++i) {
    seen += counts[i];
    if (seen >= rank) return bin_ms * static_cast<double>(i + 1 < counts.size() ? i + 1 : i);
  }
  return bin_ms * static_cast<double>(counts.size() - 1);
}

Server::Server(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

Server::Server(ServerConfig config, ReplayOptions replay) : impl_(std::make_unique<Impl>(std::move(config))) {
  impl_->replay = std::move(replay);
}

Server::~Server() = default;

bool Server::start(std::string* error) {
  Impl& m = *impl_;
  auto fail = [&](std::string text) {
    if (error) *error = std::move(text);
    return false;
  };
  if (m.started) return fail("the server is already started");
  if (std::string problem = validate_config(m.config); !problem.empty()) return fail(problem);
  spdlog::set_level(spdlog::level::from_str(m.config.log_level));  // validated above
  LogFormat log_format = LogFormat::Text;
  parse_log_format(m.config.log_format, &log_format);  // validated above
  set_log_format(log_format);
  if (m.replay) return start_replay(error);
  spdlog::info("impulse-server starting: {}", describe_config(m.config));

  Scene scene;
  std::string scene_error;
  if (!load_scene(m.config.scene, &scene, &scene_error)) {
    return fail(fmt::format("bad scene: {} (fix the file, or start with --scene demo)", scene_error));
  }
  m.core = std::make_unique<ServerCore>(m.config, scene.gravity, m.stats);
  if (std::string security_error; !m.core->init_security(&security_error)) {
    return fail(fmt::format("cannot start the handshake: {}", security_error));
  }
  if (m.link->conditions().active()) {
    spdlog::warn("SIMULATED LINK on every datagram sent: loss={} latency={}ms jitter={}ms duplicate={} reorder={} "
                 "(testing only; drop the --sim-* flags in production)",
                 m.config.sim_loss, m.config.sim_latency_ms, m.config.sim_jitter_ms, m.config.sim_duplicate,
                 m.config.sim_reorder);
  }
  const bool recording = !m.config.record_file.empty() || !m.config.record_dir.empty();
  if (recording) {
    m.recorder = std::make_unique<record::Recorder>(recording_config_of(m.config), scene.name.empty() ? m.config.scene : scene.name);
    m.core->set_recorder(m.recorder.get());
  }
  std::vector<ObjectID> scene_ids;
  if (!m.core->add_material_pairs(scene.material_pairs, &scene_error) ||
      !m.core->add_bodies(scene.bodies, &scene_error, &scene_ids) ||
      !m.core->add_joints(scene.joints, scene_ids, &scene_error)) {
    return fail(fmt::format("bad scene: {}: {}", m.config.scene, scene_error));
  }
  if (recording) {
    std::string record_error;
    if (!m.recorder->start(m.core->world(), &record_error)) {
      // Recording is an aid, not the service: serve without it and say so loudly.
      spdlog::error("recording disabled: {}", record_error);
      m.core->set_recorder(nullptr);
      m.recorder.reset();
    }
  }
  if (!open_udp_socket(m.socket, m.config.bind, m.config.port, error)) return false;
  asio::error_code ec;
  m.port = m.socket.local_endpoint(ec).port();
  if (ec) return fail(fmt::format("cannot read the bound UDP port: {}", ec.message()));
  if (!m.start_admin(error)) return false;
  m.started = true;
  m.make_agones();
  spdlog::info("listening on UDP {}:{}; scene \"{}\" with {} bodies, {} joints and {} material pairs; {} Hz steps, {} Hz snapshots, "
               "snapshots of at most {} payload bytes, budget {} kbit/s per client",
               m.config.bind, m.port, escape_for_log(scene.name.empty() ? m.config.scene : scene.name), scene.bodies.size(),
               scene.joints.size(), scene.material_pairs.size(), m.config.tick_hz, m.config.snapshot_hz, wire::snapshot_payload_capacity(), m.config.max_kbps_per_client);
  spdlog::info("budget: clients may own {} live objects together (--max-client-objects), {} each "
               "(--max-objects-per-client) in up to {} sessions; a client's body at most {} m (--max-client-extent), "
               "overlapping at most {} bodies when created (--max-spawn-overlaps); sized to the capacity benchmark "
               "(5,000 bodies, 256 clients, tick p99 <= 16.6 ms on 2 cores, docs/SECURITY.md)",
               m.config.max_client_objects == 0 ? std::string("unlimited") : std::to_string(m.config.max_client_objects),
               m.config.max_objects_per_client == 0 ? std::string("unlimited")
                                                     : std::to_string(m.config.max_objects_per_client),
               m.config.max_clients,
               m.config.max_client_extent == 0 ? std::string("1000") : fmt::format("{:g}", m.config.max_client_extent),
               m.config.max_spawn_overlaps == 0 ? std::string("unlimited")
                                                : std::to_string(m.config.max_spawn_overlaps));
  return true;
}

bool Server::start_replay(std::string* error) {
  Impl& m = *impl_;
  auto fail = [&](std::string text) {
    if (error) *error = std::move(text);
    return false;
  };
  m.core = std::make_unique<ServerCore>(m.config, Vec3{}, m.stats);
  // The recording first: a bad file, --from or --speed is then the only line printed.
  if (std::string replay_error; !m.core->start_playback(*m.replay, &replay_error)) return fail(replay_error);
  if (std::string security_error; !m.core->init_security(&security_error)) {
    return fail(fmt::format("cannot start the handshake: {}", security_error));
  }
  if (!open_udp_socket(m.socket, m.config.bind, m.config.port, error)) return false;
  asio::error_code ec;
  m.port = m.socket.local_endpoint(ec).port();
  if (ec) return fail(fmt::format("cannot read the bound UDP port: {}", ec.message()));
  if (!m.start_admin(error)) return false;
  m.started = true;
  m.make_agones();
  const record::Playback& p = *m.core->playback();
  const double hz = static_cast<double>(p.tick_hz());
  spdlog::info("serving {}: scene \"{}\", ticks {}..{} ({:.1f} s at {} Hz, {} keyframes){}{}", p.path(), escape_for_log(p.scene_name()),
               p.first_tick(), p.last_tick(), static_cast<double>(p.last_tick() - p.first_tick()) / hz, p.tick_hz(),
               p.keyframes(), p.truncated() ? "; the file ends in a truncated frame (a crash?)" : "",
               p.problem().empty() ? "" : "; playback ends early at a bad frame: " + p.problem());
  spdlog::info("listening on UDP {}:{} for read-only spectators; starting at tick {}, speed {}x{}, {} Hz snapshots",
               m.config.bind, m.port, p.tick(), m.replay->speed, m.replay->loop ? ", looping" : "",
               m.core->config().snapshot_hz);
  return true;
}

uint16_t Server::local_port() const { return impl_->port; }

void Server::run() {
  Impl& m = *impl_;
  if (!m.started || m.stopped) return;
  const TimePoint now = Clock::now();
  m.core->start(now);
  m.window.since = now;
  m.arm_receive();
  m.arm_timer(now + m.core->time_to_next_step());
  if (m.agones) m.agones->start();  // Ready: the scene is loaded, the socket bound, the loop starting
  m.health.last_progress_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
                                  std::memory_order_release);
  if (!m.stopped && !m.health.draining.load()) m.health.ready.store(true, std::memory_order_release);
  // Handlers report errors through error codes and counters; none throws by design.
  m.io.run();
  if (m.agones) {
    // The tick loop is over, so waiting here blocks nothing; shut_down() asked for Shutdown after
    // telling the clients (asked again in case the loop ended some other way).
    m.agones->request_shutdown();
    if (!m.agones->wait_for_shutdown(kAgonesShutdownWait)) {
      spdlog::warn("agones: Shutdown not acknowledged within {} s; exiting anyway (Agones deletes the pod on its own)",
                   std::chrono::duration<double>(kAgonesShutdownWait).count());
    }
    m.agones.reset();
  }
}

void Server::stop() {
  impl_->health.draining.store(true, std::memory_order_release);  // /readyz answers 503 from now on
  asio::post(impl_->io, [impl = impl_.get()] { impl->stop_or_drain(); });
}

uint16_t Server::admin_port() const { return impl_->admin ? impl_->admin->port() : 0; }

void Server::test_only_stall(std::chrono::milliseconds at_most) {
  impl_->stall_release.store(false);
  asio::post(impl_->io, [impl = impl_.get(), at_most] {
    // Holds the tick thread as a stuck step would; bounded by at_most.
    const TimePoint until = Clock::now() + at_most;
    while (!impl->stall_release.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
}

void Server::test_only_release_stall() { impl_->stall_release.store(true); }

const ServerStats& Server::stats() const { return impl_->stats; }

void Server::set_link_conditions(const net::LinkConditions& conditions) {
  std::string problem;
  if (!conditions.validate(&problem)) {
    spdlog::error("simulated link not changed: {}", problem);
    return;
  }
  asio::post(impl_->io, [impl = impl_.get(), conditions] {
    if (!impl->stopped) impl->change_link(conditions);
  });
}

void Server::set_snapshot_observer(SnapshotObserver observer) {
  if (impl_->core) impl_->core->set_snapshot_observer(std::move(observer));
}

void run_until_signal(Server& server) {
  asio::io_context signal_io(1);
  // SIGHUP too: a closed terminal or an ssh session that ended must not kill a server with players
  // in it silently (its default action); it is logged and ignored.
  asio::signal_set signals(signal_io, SIGINT, SIGTERM, SIGHUP);
  std::function<void(const asio::error_code&, int)> on_signal = [&](const asio::error_code& ec, int signal_number) {
    if (ec) return;
    if (signal_number == SIGHUP) {
      spdlog::warn("received SIGHUP (the terminal closed?): ignored, the server keeps running; SIGTERM or SIGINT "
                   "stops it");
    } else {
      spdlog::info("received {}: shutting down", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
      server.stop();  // posted to the server's own io_context; a second signal while draining stops now
    }
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  std::thread signal_thread([&signal_io] { signal_io.run(); });
  server.run();
  asio::error_code ignored;
  signals.cancel(ignored);
  signal_io.stop();
  signal_thread.join();
}

}  // namespace impulse::server
