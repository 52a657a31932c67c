// Integration-test harness: a real impulse::server::Server on an ephemeral loopback port, run on its
// own thread (RAII), and a recording driver around impulse::Client. Every wait is bounded by a
// deadline AND an iteration cap, and waits on the socket (1 ms), never on a fixed sleep.
#pragma once

#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "impulse/client.h"
#include "impulse/schemas/impulse_generated.h"
#include "server/app/server.h"
#include "server/net/handshake.h"
#include "tests/support/timing_checks.h"
#include "shared/net/packet_crypto.h"
#include "shared/wire/codec.h"

namespace impulse::test {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Default bound of every wait in the suite. Generous for sanitizer builds; a passing wait
/// usually ends within a few snapshot periods.
inline constexpr milliseconds kWaitTimeout{3000};
/// Iteration cap of every bounded loop: each iteration either handles a datagram or waits up to
/// 1 ms, so at ~100 datagrams/s this is never reached before the deadline unless a loop spins.
inline constexpr int kMaxIterations = 50'000;
inline constexpr float kGravity = 9.81f;  ///< |g| of the test scenes [m/s^2]

/// A connect-token key file in a fresh temporary directory, removed with the object.
struct TempTokenKey {
  TempTokenKey() {
    static std::atomic<int> counter{0};
    dir = std::filesystem::temp_directory_path() /
          ("impulse-token-key-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    path = (dir / "game.key").string();
    key = server::security::make_token_key();
    std::string error;
    EXPECT_TRUE(server::security::write_token_key(path, key, &error, true)) << error;
  }
  ~TempTokenKey() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempTokenKey(const TempTokenKey&) = delete;
  TempTokenKey& operator=(const TempTokenKey&) = delete;
  /// A client token (token || session secret) for `client_id`, valid for 10 minutes.
  std::vector<uint8_t> client_token(uint64_t client_id) const {
    server::security::TokenClaims claims;
    claims.client_id = client_id;
    claims.expires_unix_s = static_cast<uint64_t>(std::time(nullptr)) + 600;
    return server::security::issue_client_token(key, claims);
  }
  std::filesystem::path dir;
  std::string path;
  server::security::TokenKey key;
};

/// A scene with one static ground box: 100 m x 1 m x 100 m, top face at y = 0.
inline constexpr std::string_view kGroundScene = R"({
  "name": "integration-ground",
  "gravity": { "x": 0.0, "y": -9.81, "z": 0.0 },
  "bodies": [
    { "name": "ground", "kind": "Static", "shape": "Box",
      "dims": { "x": 50.0, "y": 0.5, "z": 50.0 }, "position": { "x": 0.0, "y": -0.5, "z": 0.0 } }
  ]
})";
inline constexpr Vec3 kGroundHalfExtents{50.0f, 0.5f, 50.0f};

/// A file in the temp directory with the given contents, removed on destruction.
class TempFile {
 public:
  TempFile(std::string_view stem, std::string_view contents) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            (std::string(stem) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json");
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << contents;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// Test-sized server settings: fast ticks so waits are short, quiet logs.
struct ServerOptions {
  std::string_view scene_json = kGroundScene;
  int tick_hz = 60;
  int snapshot_hz = 60;
  int max_clients = 8;
  // Session recording (ServerConfig's fields of the same names; empty / 0 = the server's default).
  std::string record_file;
  std::string record_dir;
  double record_rotate_minutes = 0;
  double keyframe_seconds = 0;
  /// Simulated conditions on the server's send path (ServerConfig's sim_* fields).
  net::LinkConditions link;
  /// Installed before the server runs (Server::set_snapshot_observer); empty = none.
  server::SnapshotObserver observer;
  /// --token-key: connect tokens required (empty = anonymous clients).
  std::string token_key_file;
  /// Changes any other ServerConfig field after the ones above are set; empty = none.
  std::function<void(server::ServerConfig&)> configure;
};

/// A real Server bound to 127.0.0.1 on an ephemeral port, running on its own thread.
/// Construction starts it (check started()); destruction (or stop()) stops it and joins.
class RunningServer {
 public:
  explicit RunningServer(const ServerOptions& options = {})
      : scene_("impulse-scene", options.scene_json), server_(make_config(options, scene_.path())) {
    started_ = server_.start(&error_);
    if (started_ && options.observer) server_.set_snapshot_observer(options.observer);
    if (started_) thread_ = std::thread([this] { server_.run(); });
  }
  ~RunningServer() { stop(); }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;

  /// Stops the server (it sends Disconnect to every client) and joins its thread. Idempotent.
  void stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }

  bool started() const { return started_; }
  const std::string& error() const { return error_; }
  uint16_t port() const { return server_.local_port(); }
  const server::ServerStats& stats() const { return server_.stats(); }
  server::Server& server() { return server_; }

 private:
  static server::ServerConfig make_config(const ServerOptions& options, const std::string& scene_path) {
    server::ServerConfig config;
    config.bind = "127.0.0.1";
    config.port = 0;
    config.tick_hz = options.tick_hz;
    config.snapshot_hz = options.snapshot_hz;
    config.scene = scene_path;
    config.max_clients = options.max_clients;
    config.stats_interval_s = 3600;
    config.log_level = "off";
    config.record_file = options.record_file;
    config.token_key_file = options.token_key_file;
    config.record_dir = options.record_dir;
    if (options.record_rotate_minutes > 0) config.record_rotate_minutes = options.record_rotate_minutes;
    if (options.keyframe_seconds > 0) config.keyframe_seconds = options.keyframe_seconds;
    config.sim_loss = options.link.loss;
    config.sim_latency_ms = options.link.latency_ms;
    config.sim_jitter_ms = options.link.jitter_ms;
    config.sim_duplicate = options.link.duplicate;
    config.sim_reorder = options.link.reorder;
    config.sim_seed = options.link.seed;
    if (options.configure) options.configure(config);
    return config;
  }

  TempFile scene_;
  server::Server server_;
  bool started_ = false;
  std::string error_;
  std::thread thread_;
};

/// An impulse::Client that records everything poll() hands back, so tests can wait for and then
/// inspect results, events and snapshots by tick.
class ClientDriver {
 public:
  /// Snapshots kept per driver (oldest dropped first) [count].
  static constexpr size_t kSnapshotHistory = 512;

  bool connect(uint16_t port, std::string* error = nullptr, std::string_view name = "integration-test",
               milliseconds timeout = milliseconds{2000}) {
    std::string message;
    const bool ok = client.connect("127.0.0.1", port, timeout, &message, name);
    if (error != nullptr) *error = message;
    return ok;
  }

  /// One poll that waits at most `wait` for a datagram; records what arrived.
  void poll_once(milliseconds wait = milliseconds{1}) {
    const PollResult& r = client.poll(wait);
    for (const SnapshotRange& s : r.snapshots) {
      const auto objects = r.objects_of(s);
      snapshots[s.tick].assign(objects.begin(), objects.end());
      if (snapshots.size() > kSnapshotHistory) snapshots.erase(snapshots.begin());
    }
    results.insert(results.end(), r.results.begin(), r.results.end());
    for (const RaycastResult& ray : r.raycasts) {
      const auto hits = r.hits_of(ray);
      raycasts.push_back(Raycast{ray, std::vector<RayHit>(hits.begin(), hits.end())});
    }
    collisions.insert(collisions.end(), r.collisions.begin(), r.collisions.end());
    joint_events.insert(joint_events.end(), r.joints.begin(), r.joints.end());
    pongs.insert(pongs.end(), r.pongs.begin(), r.pongs.end());
    if (r.server_disconnected) {
      server_disconnected = true;
      disconnect_reason = r.disconnect_reason;
    }
  }

  /// Polls until done() holds, the deadline passes or kMaxIterations is reached.
  template <class Done>
  bool poll_until(Done done, milliseconds timeout = kWaitTimeout) {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (int i = 0; i < kMaxIterations && Clock::now() < deadline; ++i) {
      if (done()) return true;
      poll_once();
    }
    return done();
  }

  const RequestResult* find_result(uint32_t request_id) const {
    for (const RequestResult& r : results) {
      if (r.request_id == request_id) return &r;
    }
    return nullptr;
  }

  /// Waits for the result of one request; nullopt on timeout.
  std::optional<RequestResult> wait_result(uint32_t request_id, milliseconds timeout = kWaitTimeout) {
    if (request_id == 0) return std::nullopt;
    if (!poll_until([&] { return find_result(request_id) != nullptr; }, timeout)) return std::nullopt;
    return *find_result(request_id);
  }

  /// A raycast answer with a copy of its hits (PollResult's storage is reused by the next poll).
  struct Raycast {
    RaycastResult result;
    std::vector<RayHit> hits;
  };

  /// Waits for the answer to one raycast(); nullopt on timeout.
  std::optional<Raycast> wait_raycast(uint32_t request_id, milliseconds timeout = kWaitTimeout) {
    if (request_id == 0) return std::nullopt;
    auto find = [&]() -> const Raycast* {
      for (const Raycast& r : raycasts) {
        if (r.result.request_id == request_id) return &r;
      }
      return nullptr;
    };
    if (!poll_until([&] { return find() != nullptr; }, timeout)) return std::nullopt;
    return *find();
  }

  /// Creates an object and waits for Ok; returns its id, or a null id (with a test failure).
  ObjectID create_ok(const ObjectDesc& desc) {
    const std::optional<RequestResult> r = wait_result(client.create_object(desc));
    if (!r) {
      ADD_FAILURE() << "no RequestResult for create_object within " << kWaitTimeout.count() << " ms";
      return {};
    }
    if (!r->ok()) {
      ADD_FAILURE() << "create_object failed: " << to_string(r->code) << ": " << r->message;
      return {};
    }
    return r->id;
  }

  /// Waits for a complete snapshot newer than `tick`; returns its tick (0 on timeout).
  uint64_t wait_snapshot_after(uint64_t tick, milliseconds timeout = kWaitTimeout) {
    if (!poll_until([&] { return !snapshots.empty() && snapshots.rbegin()->first > tick; }, timeout)) return 0;
    return snapshots.rbegin()->first;
  }

  /// Waits for the first snapshot newer than `tick` in which pred(objects) holds.
  template <class Pred>
  std::optional<uint64_t> wait_snapshot_where(uint64_t after_tick, Pred pred, milliseconds timeout = kWaitTimeout) {
    std::optional<uint64_t> found;
    poll_until(
        [&] {
          for (auto it = snapshots.upper_bound(after_tick); it != snapshots.end(); ++it) {
            if (pred(it->second)) {
              found = it->first;
              return true;
            }
          }
          return false;
        },
        timeout);
    return found;
  }

  Client client;
  std::vector<RequestResult> results;
  std::vector<Raycast> raycasts;
  std::vector<CollisionEvent> collisions;
  std::vector<JointEvent> joint_events;
  std::vector<PongInfo> pongs;
  std::map<uint64_t, std::vector<ObjectState>> snapshots;  ///< tick -> objects, sorted by id
  bool server_disconnected = false;
  std::string disconnect_reason;
};

/// A bare UDP socket on 127.0.0.1 for hand-made datagrams: a fake server, or an attacker.
class RawSocket {
 public:
  RawSocket() : socket_(io_) {
    std::error_code ec;
    socket_.open(asio::ip::udp::v4(), ec);
    socket_.bind(asio::ip::udp::endpoint(asio::ip::address_v4::loopback(), 0), ec);
    EXPECT_FALSE(ec) << ec.message();
  }

  uint16_t port() const {
    std::error_code ec;
    return socket_.local_endpoint(ec).port();
  }

  /// The server's address as seen from this socket.
  static asio::ip::udp::endpoint server_endpoint(uint16_t port) {
    return asio::ip::udp::endpoint(asio::ip::address_v4::loopback(), port);
  }

  /// Waits up to `timeout` for one datagram; returns its size (0 on timeout) and sender.
  size_t receive(milliseconds timeout, asio::ip::udp::endpoint* from) {
    pollfd fd{socket_.native_handle(), POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(timeout.count())) <= 0) return 0;
    std::error_code ec;
    const size_t n = socket_.receive_from(asio::buffer(buffer_), *from, 0, ec);
    return ec ? 0 : n;
  }
  std::span<const uint8_t> last(size_t n) const { return {buffer_.data(), n}; }

  /// Receives until a verified client->server datagram of `type` arrives (bounded); returns its
  /// sender, or nullopt. Other datagrams are consumed and ignored.
  std::optional<asio::ip::udp::endpoint> wait_for(wire::Message type, milliseconds timeout = kWaitTimeout) {
    asio::ip::udp::endpoint from;
    if (wait_verified(type, wire::Direction::ClientToServer, timeout, &from) == nullptr) return std::nullopt;
    return from;
  }

  /// Receives until a verified server->client datagram of `type` arrives (bounded); returns its
  /// envelope (valid until the next receive on this socket), or null.
  const wire::Envelope* wait_from_server(wire::Message type, milliseconds timeout = kWaitTimeout) {
    asio::ip::udp::endpoint from;
    return wait_verified(type, wire::Direction::ServerToClient, timeout, &from);
  }

  /// Receives until a verified client->server datagram of `type` arrives (bounded); returns its
  /// envelope (valid until the next receive on this socket) and sender, or null.
  const wire::Envelope* wait_from_client(wire::Message type, asio::ip::udp::endpoint* from,
                                         milliseconds timeout = kWaitTimeout) {
    return wait_verified(type, wire::Direction::ClientToServer, timeout, from);
  }

  /// Receives everything queued now, without waiting; returns the datagram count.
  int drain() {
    int count = 0;
    asio::ip::udp::endpoint from;
    while (receive(milliseconds{0}, &from) != 0) ++count;
    return count;
  }

  void send(std::span<const uint8_t> bytes, const asio::ip::udp::endpoint& to) {
    std::error_code ec;
    socket_.send_to(asio::buffer(bytes.data(), bytes.size()), to, 0, ec);
    EXPECT_FALSE(ec) << ec.message();
  }

  flatbuffers::FlatBufferBuilder fbb{2048};

 private:
  const wire::Envelope* wait_verified(wire::Message type, wire::Direction direction, milliseconds timeout,
                                      asio::ip::udp::endpoint* from) {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (int i = 0; i < kMaxIterations && Clock::now() < deadline; ++i) {
      const size_t n = receive(milliseconds{5}, from);
      if (n == 0) continue;
      const wire::Verified v = wire::verify_datagram(last(n), direction);
      if (v.reason == wire::DropReason::None && v.envelope->message_type() == type) return v.envelope;
    }
    return nullptr;
  }

  asio::io_context io_;
  asio::ip::udp::socket socket_;
  alignas(wire::kDatagramAlignment) std::array<uint8_t, 65536> buffer_{};
};

/// The state of `id` in a snapshot's objects, or null.
inline const ObjectState* find_in(const std::vector<ObjectState>& objects, ObjectID id) {
  for (const ObjectState& o : objects) {
    if (o.id == id) return &o;
  }
  return nullptr;
}

inline ObjectDesc make_sphere(float radius, Vec3 position, float mass = 1.0f, float restitution = 0.0f) {
  ObjectDesc d;
  d.shape = ShapeKind::Sphere;
  d.dims = {radius, radius, radius};
  d.position = position;
  d.mass = mass;
  d.restitution = restitution;
  return d;
}

inline ObjectDesc make_box(Vec3 half_extents, Vec3 position, float mass = 1.0f) {
  ObjectDesc d;
  d.shape = ShapeKind::Box;
  d.dims = half_extents;
  d.position = position;
  d.mass = mass;
  return d;
}

/// The hostile link the netcode must survive (test_hostile_link.cpp): 25 % loss, 100 ± 50 ms
/// latency, 5 % duplication and 5 % reordering, each direction drawn from `seed`.
inline net::LinkConditions hostile_link(uint64_t seed) {
  net::LinkConditions c;
  c.loss = 0.25;
  c.latency_ms = 100;
  c.jitter_ms = 50;
  c.duplicate = 0.05;
  c.reorder = 0.05;
  c.seed = seed;
  return c;
}

}  // namespace impulse::test
