// impulse-client: command-line client of an Impulse server.
//   demo: spawns and pushes a few bodies and prints the snapshots, results and collisions it sees.
//   ping: measures one round trip (the Docker HEALTHCHECK).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <string>
#include <poll.h>
#include <vector>

#include <asio.hpp>
#include <flatbuffers/flatbuffers.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "client/client.h"
#include "shared/wire/codec.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_signal(int) { g_interrupted = 1; }

std::string format_id(impulse::ObjectID id) { return fmt::format("{}:{}", id.index, id.generation); }

std::string format_vec(impulse::Vec3 v) { return fmt::format("({:.2f}, {:.2f}, {:.2f})", v.x, v.y, v.z); }

/// Parses --server into host and port; prints a clear error and returns false on a bad value.
bool parse_server(const std::string& server, std::string* host, uint16_t* port) {
  std::string error;
  if (impulse::parse_host_port(server, host, port, &error)) return true;
  fmt::print(stderr, "impulse-client: bad --server value: {}\n", error);
  return false;
}

bool connect_or_explain(impulse::Client& client, const std::string& host, uint16_t port,
                        milliseconds timeout, const std::string& name) {
  std::string error;
  if (client.connect(host, port, timeout, &error, name)) return true;
  fmt::print(stderr, "impulse-client: {}\n", error);
  return false;
}

// ------------------------------------------------------------------------------------------ ping

// A sessionless probe: one Ping padded to kProbeBytes, so that the server (which never answers an
// address without a session with more bytes than it received) may answer it with a Pong. No
// session is created, so a health check every few seconds leaves no connect/disconnect log lines.
constexpr size_t kProbeBytes = 128;

int run_ping(const std::string& server, int timeout_ms) {
  using asio::ip::udp;
  std::string host;
  uint16_t port = 0;
  if (!parse_server(server, &host, &port)) return 2;

  asio::io_context io;
  asio::error_code ec;
  udp::resolver resolver(io);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec || endpoints.empty()) {
    fmt::print(stderr, "impulse-client: cannot resolve host '{}': {}\n", host, ec ? ec.message() : "no address");
    return 1;
  }
  const udp::endpoint target = endpoints.begin()->endpoint();
  udp::socket socket(io);
  socket.open(target.protocol(), ec);
  if (!ec) socket.non_blocking(true, ec);
  if (ec) {
    fmt::print(stderr, "impulse-client: cannot open a UDP socket: {}\n", ec.message());
    return 1;
  }

  const uint64_t nonce = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  flatbuffers::FlatBufferBuilder fbb;
  const auto ping = impulse::wire::build_ping(fbb, nonce);
  std::vector<uint8_t> datagram(ping.begin(), ping.end());
  datagram.resize(std::max(datagram.size(), kProbeBytes), 0);  // trailing bytes are ignored

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + milliseconds{timeout_ms};
  Clock::time_point next_send = start;
  std::vector<uint8_t> buffer(impulse::wire::kMaxDatagramBytes + 1);
  while (Clock::now() < deadline) {
    if (Clock::now() >= next_send) {  // UDP may lose it: resend every 200 ms
      socket.send_to(asio::buffer(datagram), target, 0, ec);
      next_send += milliseconds{200};
    }
    udp::endpoint from;
    const size_t n = socket.receive_from(asio::buffer(buffer), from, 0, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again || ec == asio::error::connection_refused) {
      // Wait until readable, the next resend or the deadline, whichever comes first.
      const auto wake = std::min(deadline, next_send);
      const auto wait_ms = std::chrono::ceil<milliseconds>(wake - Clock::now()).count();
      pollfd fd{socket.native_handle(), POLLIN, 0};
      ::poll(&fd, 1, static_cast<int>(std::max<int64_t>(wait_ms, 0)));
      continue;
    }
    if (ec || from != target) continue;
    const auto v = impulse::wire::verify_datagram(std::span<const uint8_t>(buffer.data(), n),
                                                  impulse::wire::Direction::ServerToClient);
    if (v.reason != impulse::wire::DropReason::None) continue;
    const auto* pong = v.envelope->message_as_Pong();
    if (pong == nullptr || pong->nonce() != nonce) continue;
    const double rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    fmt::print("pong from {}:{}: rtt {:.3f} ms, server tick {}\n", host, port, rtt_ms, pong->tick());
    return 0;
  }
  fmt::print(stderr, "impulse-client: no answer from {}:{} within {} ms: is impulse-server running there?\n",
             host, port, timeout_ms);
  return 1;
}

// ------------------------------------------------------------------------------------------ demo

struct DemoBody {
  const char* label;
  impulse::ObjectDesc desc;
  uint32_t request_id = 0;
  impulse::ObjectID id;
};

std::vector<DemoBody> make_demo_bodies() {
  using impulse::wire::ShapeKind;
  auto sphere = [](float radius, impulse::Vec3 position, float mass, float restitution) {
    impulse::ObjectDesc d;
    d.shape = ShapeKind::Sphere;
    d.dims = {radius, radius, radius};
    d.position = position;
    d.mass = mass;
    d.restitution = restitution;
    return d;
  };
  auto box = [](impulse::Vec3 half_extents, impulse::Vec3 position, float mass) {
    impulse::ObjectDesc d;
    d.shape = ShapeKind::Box;
    d.dims = half_extents;
    d.position = position;
    d.mass = mass;
    return d;
  };
  // Above the ground plane y = 0 of the demo scene; the second sphere drops onto the first box.
  return {
      {"sphere r=0.5 m, bouncy", sphere(0.5f, {-2.0f, 4.0f, 0.0f}, 1.0f, 0.6f), 0, {}},
      {"sphere r=0.3 m", sphere(0.3f, {0.1f, 7.0f, -1.0f}, 0.5f, 0.2f), 0, {}},
      {"box 1x1x1 m", box({0.5f, 0.5f, 0.5f}, {0.0f, 3.0f, -1.0f}, 2.0f), 0, {}},
      {"box 0.8x0.5x1.2 m", box({0.4f, 0.25f, 0.6f}, {2.5f, 5.0f, 1.0f}, 3.0f), 0, {}},
  };
}

int run_demo(const std::string& server, int seconds, const std::string& name, bool keep_bodies) {
  std::string host;
  uint16_t port = 0;
  if (!parse_server(server, &host, &port)) return 2;
  impulse::Client client;
  if (!connect_or_explain(client, host, port, milliseconds{3000}, name)) return 1;
  fmt::print("connected to {}:{} as client {} (server tick {}, {} Hz physics, {} Hz snapshots)\n", host, port,
             client.client_id(), client.server_tick(), client.tick_hz(), client.snapshot_hz());

  std::vector<DemoBody> bodies = make_demo_bodies();
  std::map<uint32_t, std::string> pending;  // request id -> what it asked for, for the printout
  for (DemoBody& b : bodies) {
    b.request_id = client.create_object(b.desc);
    pending[b.request_id] = fmt::format("create {} at {}", b.label, format_vec(b.desc.position));
  }

  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::seconds(seconds);
  Clock::time_point next_report = start + std::chrono::seconds(1);
  const Clock::time_point impulse_at = start + milliseconds(1500);
  const Clock::time_point force_from = start + milliseconds(2500);
  const Clock::time_point force_until = start + milliseconds(3500);
  const auto force_interval = std::chrono::microseconds(1'000'000 / std::max<int>(1, client.tick_hz()));
  Clock::time_point next_force = force_from;
  bool impulse_sent = false;
  bool force_announced = false;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  while (Clock::now() < end && g_interrupted == 0) {
    const impulse::PollResult& r = client.poll(milliseconds{5});
    for (const impulse::RequestResult& result : r.results) {
      const auto it = pending.find(result.request_id);
      if (it == pending.end() && result.ok()) continue;  // the repeated force: only failures print
      const std::string what = it != pending.end() ? it->second : "push";
      if (result.ok()) {
        fmt::print("request {} ({}) -> ok, object {}\n", result.request_id, what, format_id(result.id));
      } else {
        fmt::print("request {} ({}) -> {}: {}\n", result.request_id, what,
                   impulse::wire::EnumNameResultCode(result.code), result.message);
      }
      for (DemoBody& b : bodies) {
        if (b.request_id == result.request_id && result.ok()) b.id = result.id;
      }
      if (it != pending.end()) pending.erase(it);
    }
    for (const impulse::CollisionEvent& e : r.collisions) {
      fmt::print("tick {} {} {} <-> {} at {}\n", e.tick,
                 e.type == impulse::wire::ContactEventType::Begin ? "begin" : "end  ", format_id(e.a),
                 format_id(e.b), format_vec(e.point));
    }
    if (r.server_disconnected) {
      fmt::print(stderr, "impulse-client: server closed the session: {}\n", r.disconnect_reason);
      return 1;
    }

    const Clock::time_point now = Clock::now();
    if (!impulse_sent && now >= impulse_at && !bodies[0].id.is_null()) {
      const impulse::Vec3 j{3.0f, 4.0f, 0.0f};
      const uint32_t rid = client.apply_impulse(bodies[0].id, j);
      pending[rid] = fmt::format("impulse {} N·s on {}", format_vec(j), format_id(bodies[0].id));
      impulse_sent = true;
    }
    if (now >= force_from && now < force_until && now >= next_force && !bodies[3].id.is_null()) {
      // A force lasts one server step, so a steady push is re-sent every tick.
      const impulse::Vec3 f{0.0f, 60.0f, 0.0f};
      client.apply_force(bodies[3].id, f);
      if (!force_announced) {
        fmt::print("pushing {} up with {} N for 1 s (weight 29.4 N)\n", format_id(bodies[3].id), format_vec(f));
        force_announced = true;
      }
      next_force = now + force_interval;
    }
    if (now >= next_report) {
      next_report += std::chrono::seconds(1);
      const auto objects = client.objects();
      size_t awake = 0;
      for (const impulse::ObjectState& o : objects) awake += o.kind == impulse::wire::BodyKind::Dynamic && !o.sleeping;
      std::string mine;
      for (const DemoBody& b : bodies) {
        if (const impulse::ObjectState* s = client.find(b.id)) {
          mine += fmt::format(" {} y={:.2f}", format_id(b.id), s->position.y);
        }
      }
      fmt::print("tick {}: {} bodies, {} awake |{}\n", client.snapshot_tick(), objects.size(), awake, mine);
    }
  }

  if (!keep_bodies) {
    for (const DemoBody& b : bodies) {
      if (!b.id.is_null()) client.destroy(b.id);
    }
    // Give the destroys a moment to be answered, bounded, so the printout shows them.
    const Clock::time_point deadline = Clock::now() + milliseconds(300);
    while (Clock::now() < deadline && !client.poll(milliseconds{5}).server_disconnected) {
    }
  }
  const impulse::ClientStats& s = client.stats();
  client.disconnect("demo finished");
  fmt::print("disconnected: sent {} datagrams ({} bytes), received {} ({} bytes), dropped {}, "
             "{} snapshots\n",
             s.datagrams_out, s.bytes_out, s.datagrams_in, s.bytes_in, s.datagrams_dropped, s.snapshots_completed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered even when piped (docker logs, CI), so a watcher sees events as they happen.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"impulse-client: command-line client of an Impulse physics server"};
  app.require_subcommand(1);

  std::string server = "127.0.0.1:7777";
  int seconds = 10;
  std::string name = "impulse-client demo";
  bool keep_bodies = false;
  CLI::App* demo = app.add_subcommand("demo", "spawn and push a few bodies, print what happens");
  demo->add_option("--server", server, "server address HOST:PORT")->envname("IMPULSE_SERVER")->capture_default_str();
  demo->add_option("--seconds", seconds, "how long to run [s]")->check(CLI::Range(1, 86400))->capture_default_str();
  demo->add_option("--name", name, "client name shown in the server's log")->capture_default_str();
  demo->add_flag("--keep", keep_bodies, "leave the spawned bodies in the world when done");

  int timeout_ms = 1000;
  CLI::App* ping = app.add_subcommand("ping", "ping the server without opening a session; print the round-trip time (exit 0 on pong)");
  ping->add_option("--server", server, "server address HOST:PORT")->envname("IMPULSE_SERVER")->capture_default_str();
  ping->add_option("--timeout-ms", timeout_ms, "give up after this long [ms]")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  if (demo->parsed()) return run_demo(server, seconds, name, keep_bodies);
  if (ping->parsed()) return run_ping(server, timeout_ms);
  return 2;
}
