// A ServerCore and any number of ClientCores joined by simulated links, on one virtual clock: no
// socket, no thread, no sleep. Each client has an up-link and a down-link (net::LinkSimulator:
// loss, latency, jitter, duplication, reordering, all seeded), so every test is deterministic and
// a minute of virtual time runs in milliseconds.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "impulse/client_core.h"
#include "server/app/server_core.h"
#include "shared/net/link_simulator.h"
#include "tests/unit/client/virtual_clock.h"

namespace impulse::client_test {

using namespace std::chrono_literals;

/// A link of `latency_ms` each way, +- `jitter_ms`, losing `loss` of its datagrams.
inline net::LinkConditions jittery_link(double latency_ms, double jitter_ms, double loss, uint64_t seed) {
  net::LinkConditions c;
  c.latency_ms = latency_ms;
  c.jitter_ms = jitter_ms;
  c.loss = loss;
  c.seed = seed;
  return c;
}

class VirtualNetwork {
 public:
  using TimePoint = ClientCore::TimePoint;
  /// The tick the harness advances by: one frame of a 240 Hz game loop.
  static constexpr std::chrono::nanoseconds kFrame{1'000'000'000LL / 240};

  struct Peer {
    ClientCore core;
    net::LinkSimulator<int> up;    ///< client -> server
    net::LinkSimulator<int> down;  ///< server -> client
    server::Endpoint endpoint;     ///< the client's address as the server sees it
    uint64_t sent = 0;             ///< datagrams the client put on its up-link
    Peer(const net::LinkConditions& up_link, const net::LinkConditions& down_link, server::Endpoint e)
        : up(up_link), down(down_link), endpoint(std::move(e)) {}
  };

  static server::ServerConfig default_config() {
    server::ServerConfig c;
    c.tick_hz = 60;
    c.snapshot_hz = 30;
    c.max_clients = 4;
    c.client_timeout_s = 5;
    return c;
  }

  explicit VirtualNetwork(server::ServerConfig config = default_config())
      : config_(config), server_(config_, {0, -9.81f, 0}, stats_) {
    physics::BodyDesc ground;  // top face at y = 0
    ground.kind = physics::BodyKind::Static;
    ground.shape = physics::make_box({50, 0.5f, 50});
    ground.position = {0, -0.5f, 0};
    std::string error;
    EXPECT_TRUE(server_.add_bodies(std::span(&ground, 1), &error)) << error;
    std::string security_error;
    EXPECT_TRUE(server_.init_security(&security_error)) << security_error;
    server_.start(now_);
  }

  /// The server's address as the clients see it.
  static PeerAddress server_address() {
    PeerAddress a;
    a.family = 4;
    a.bytes[0] = 127;
    a.bytes[3] = 1;
    a.port = 7777;
    return a;
  }

  /// Adds a client behind the given links (perfect by default); returns its index.
  size_t add_client(const net::LinkConditions& up = {}, const net::LinkConditions& down = {}) {
    const auto port = static_cast<uint16_t>(40000 + peers_.size());
    peers_.push_back(std::make_unique<Peer>(up, down, server::Endpoint(asio::ip::make_address("127.0.0.1"), port)));
    return peers_.size() - 1;
  }
  ClientCore& client(size_t i) { return peers_[i]->core; }
  Peer& peer(size_t i) { return *peers_[i]; }

  /// Starts client i's connect at the current virtual time.
  void connect(size_t i, std::chrono::milliseconds timeout = 5000ms, std::string name = "virtual") {
    ConnectParams params;
    params.name = std::move(name);
    params.timeout = timeout;
    params.server_label = "127.0.0.1:7777";
    peers_[i]->core.connect(server_address(), now_, std::move(params));
    flush_client(i);
  }

  /// Advances the virtual clock by one frame: links deliver what is due, the server wakes up,
  /// every client updates and sends. `on_frame` (if set) runs for every client after its update.
  void frame() {
    now_ += kFrame;
    for (size_t i = 0; i < peers_.size(); ++i) {
      Peer& p = *peers_[i];
      p.up.deliver_due(now_, [&](int, std::span<const uint8_t> bytes) {
        server_.handle_datagram(p.endpoint, bytes, now_, out_);
      });
    }
    server_.update(now_, out_);
    route_server_out();
    for (size_t i = 0; i < peers_.size(); ++i) {
      Peer& p = *peers_[i];
      p.down.deliver_due(now_, [&](int, std::span<const uint8_t> bytes) {
        p.core.receive(bytes, server_address(), now_);
      });
      p.core.update(now_);
      if (on_frame) on_frame(i);
      flush_client(i);
    }
  }

  /// Runs frames until `done()` or `limit` of virtual time passes. True when done() held.
  bool run_until(const std::function<bool()>& done, std::chrono::nanoseconds limit) {
    return step_until(now_, limit, done, [this] { frame(); });
  }
  void run_for(std::chrono::nanoseconds span) {
    run_until([] { return false; }, span);
  }

  /// The server sends Disconnect to everyone (as on SIGTERM).
  void shut_down_server(std::string_view reason) {
    server_.shut_down(reason, out_);
    route_server_out();
  }

  server::ServerCore& server() { return server_; }
  const server::ServerStats& stats() const { return stats_; }
  TimePoint now() const { return now_; }
  std::function<void(size_t)> on_frame;

 private:
  void flush_client(size_t i) {
    Peer& p = *peers_[i];
    DatagramQueue& out = p.core.outbox();
    for (size_t k = 0; k < out.size(); ++k) {
      p.up.submit(0, out[k], now_);
      ++p.sent;
    }
    out.clear();
  }

  void route_server_out() {
    for (const server::Outbox::Datagram& d : out_.datagrams()) {
      for (auto& p : peers_) {
        if (p->endpoint == d.to) p->down.submit(0, out_.bytes_of(d), now_);
      }
    }
    out_.clear();
  }

  server::ServerConfig config_;
  server::ServerStats stats_;
  server::ServerCore server_;
  server::Outbox out_;
  TimePoint now_ = TimePoint{} + 1h;
  std::vector<std::unique_ptr<Peer>> peers_;
};

}  // namespace impulse::client_test
