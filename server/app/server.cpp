// The Asio shell around ServerCore: one io_context on one thread runs an async UDP receive and a
// steady_timer that wakes at each step boundary (fixed timestep, Fiedler's "Fix Your Timestep!").
// Only this file reads the clock; it passes `now` into the core.
#include "server/app/server.h"

#include <array>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "server/app/config.h"
#include "server/app/scene.h"
#include "server/app/server_core.h"
#include "server/net/udp_endpoint.h"
#include "server/record/recorder.h"

namespace impulse::server {
namespace {

double to_ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

struct Server::Impl {
  explicit Impl(ServerConfig c) : config(std::move(c)) {}

  ServerConfig config;
  ServerStats stats;
  asio::io_context io{1};  // concurrency hint: one thread runs it
  asio::ip::udp::socket socket{io};
  asio::steady_timer timer{io};
  std::unique_ptr<ServerCore> core;
  std::unique_ptr<record::Recorder> recorder;  // null when not recording
  Outbox outbox;
  // One byte more than the limit: a larger datagram is truncated by the kernel to 1201 bytes and
  // then rejected as Oversized. Aligned for in-place FlatBuffers reads (wire::kDatagramAlignment).
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes + 1> receive_buffer{};
  Endpoint receive_from;
  uint16_t port = 0;
  bool started = false;
  bool stopped = false;

  // Stats window for the periodic log line.
  struct Window {
    TimePoint since{};
    double tick_ms_sum = 0;
    double tick_ms_max = 0;
    uint64_t wakeups = 0;
    uint64_t steps = 0;
    uint64_t datagrams_in = 0, bytes_in = 0, datagrams_out = 0, bytes_out = 0, dropped = 0, dropped_steps = 0;
  } window;

  void arm_receive() {
    socket.async_receive_from(asio::buffer(receive_buffer), receive_from,
                              [this](const asio::error_code& ec, size_t n) { on_receive(ec, n); });
  }

  void on_receive(const asio::error_code& ec, size_t n) {
    if (stopped || ec == asio::error::operation_aborted) return;
    const TimePoint now = Clock::now();
    if (ec) {
      // E.g. ECONNREFUSED after an ICMP port-unreachable for an earlier send: harmless for UDP.
      core->rejects().note(RejectReason::ReceiveError, ec.message(), now);
    } else {
      core->handle_datagram(receive_from, std::span<const uint8_t>(receive_buffer.data(), n), now, outbox);
      flush();
    }
    arm_receive();
  }

  void arm_timer(TimePoint at) {
    timer.expires_at(at);
    timer.async_wait([this](const asio::error_code& ec) { on_timer(ec); });
  }

  void on_timer(const asio::error_code& ec) {
    if (stopped || ec == asio::error::operation_aborted) return;
    const TimePoint t0 = Clock::now();
    const int steps = core->update(t0, outbox);
    if (recorder) recorder->hand_off();
    flush();
    const TimePoint t1 = Clock::now();
    if (steps > 0) {
      const double ms = to_ms(t1 - t0);
      window.tick_ms_sum += ms;
      window.tick_ms_max = std::max(window.tick_ms_max, ms);
      ++window.wakeups;
      window.steps += static_cast<uint64_t>(steps);
    }
    if (t1 - window.since >= std::chrono::duration<double>(config.stats_interval_s)) log_stats(t1);
    arm_timer(t0 + core->time_to_next_step());
  }

  void flush() {
    if (outbox.empty()) return;
    const SendTotals sent = send_outbox(socket, outbox);
    stats.datagrams_out.fetch_add(sent.datagrams, std::memory_order_relaxed);
    stats.bytes_out.fetch_add(sent.bytes, std::memory_order_relaxed);
    if (sent.errors > 0) {
      core->rejects().note(RejectReason::SendError, fmt::format("{} datagrams", sent.errors), Clock::now());
    }
    outbox.clear();
  }

  void log_stats(TimePoint now) {
    const auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    const uint64_t in = load(stats.datagrams_in), bin = load(stats.bytes_in);
    const uint64_t out = load(stats.datagrams_out), bout = load(stats.bytes_out);
    const uint64_t dropped = load(stats.datagrams_dropped), dropped_steps = core->dropped_steps();
    const double seconds = std::chrono::duration<double>(now - window.since).count();
    spdlog::info(
        "stats: tick={} bodies={} awake={} clients={} tick_ms mean={:.3f} max={:.3f} (over {} wake-ups, {} steps, "
        "{} dropped) in={} datagrams/{} B out={} datagrams/{} B dropped={} (last {:.1f} s)",
        load(stats.tick), stats.objects.load(std::memory_order_relaxed), stats.awake.load(std::memory_order_relaxed),
        stats.clients.load(std::memory_order_relaxed),
        window.wakeups ? window.tick_ms_sum / static_cast<double>(window.wakeups) : 0.0, window.tick_ms_max,
        window.wakeups, window.steps, dropped_steps - window.dropped_steps, in - window.datagrams_in,
        bin - window.bytes_in, out - window.datagrams_out, bout - window.bytes_out, dropped - window.dropped, seconds);
    window = Window{};
    window.since = now;
    window.datagrams_in = in;
    window.bytes_in = bin;
    window.datagrams_out = out;
    window.bytes_out = bout;
    window.dropped = dropped;
    window.dropped_steps = dropped_steps;
  }

  void shut_down() {
    if (stopped) return;
    stopped = true;
    if (core) {
      core->shut_down("server shutting down", outbox);
      flush();
      spdlog::info("server stopped at tick {}", core->world().tick());
      if (recorder) recorder->finish();
    }
    asio::error_code ignored;
    timer.cancel();
    socket.close(ignored);
    io.stop();
  }
};

Server::Server(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

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
  spdlog::info("impulse-server starting: {}", describe_config(m.config));

  Scene scene;
  std::string scene_error;
  if (!load_scene(m.config.scene, &scene, &scene_error)) {
    return fail(fmt::format("bad scene: {} (fix the file, or start with --scene demo)", scene_error));
  }
  m.core = std::make_unique<ServerCore>(m.config, scene.gravity, m.stats);
  const bool recording = !m.config.record_file.empty() || !m.config.record_dir.empty();
  if (recording) {
    m.recorder = std::make_unique<record::Recorder>(m.config, scene.name.empty() ? m.config.scene : scene.name);
    m.core->set_recorder(m.recorder.get());
  }
  if (!m.core->add_bodies(scene.bodies, &scene_error)) {
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
  m.started = true;
  spdlog::info("listening on UDP {}:{}; scene \"{}\" with {} bodies; {} Hz steps, {} Hz snapshots, "
               "{} objects per snapshot datagram",
               m.config.bind, m.port, scene.name.empty() ? m.config.scene : scene.name, scene.bodies.size(),
               m.config.tick_hz, m.config.snapshot_hz, wire::snapshot_objects_per_part());
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
  // Handlers report errors through error codes and counters; none throws by design.
  m.io.run();
}

void Server::stop() {
  asio::post(impl_->io, [impl = impl_.get()] { impl->shut_down(); });
}

const ServerStats& Server::stats() const { return impl_->stats; }

}  // namespace impulse::server
