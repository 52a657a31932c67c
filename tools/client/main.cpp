// impulse-client: command-line client of an Impulse server.
//   demo:  spawns a tower of boxes, reports its top box's height and tilt, raycasts down onto it,
//          shoves it over with an impulse at a point, and prints the collision events it causes.
//   drive: a car driven from the keyboard or a script, with client prediction on or off (drive.h).
//   ping:  measures one round trip (the Docker HEALTHCHECK).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <poll.h>
#include <vector>

#include <asio.hpp>
#include <flatbuffers/flatbuffers.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "drive.h"  // tools/client/drive.h
#include "impulse/client.h"
#include "shared/hex.h"
#include "shared/wire/codec.h"
#include "shared/version.h"

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

/// The --token value, hex-decoded (empty when not given).
std::vector<uint8_t> g_token;

bool connect_or_explain(impulse::Client& client, const std::string& host, uint16_t port,
                        milliseconds timeout, const std::string& name) {
  std::string error;
  if (client.connect(host, port, timeout, &error, name, g_token)) return true;
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

constexpr double kRadToDeg = 57.29577951308232;

/// Angle [degrees] between the body's local +Y axis and the world's +Y: 0 for an upright box.
/// rotate(q, +Y).y = 1 - 2 (x^2 + z^2) for a unit quaternion.
double tilt_degrees(impulse::Quat q) {
  const double up_y = 1.0 - 2.0 * (static_cast<double>(q.x) * q.x + static_cast<double>(q.z) * q.z);
  return std::acos(std::clamp(up_y, -1.0, 1.0)) * kRadToDeg;
}

/// The demo's tower: kTowerHeight boxes of 0.8 m, resting on each other on the ground (y = 0) of
/// the demo scene (or any scene whose ground is the plane y = 0), away from the scene's bodies.
constexpr int kTowerHeight = 6;
constexpr float kHalf = 0.4f;                       // box half extent [m]
constexpr impulse::Vec3 kTowerBase{0.0f, 0.0f, 8.0f};  // centre of the tower's footprint [m]
/// The shove: an impulse on the 5th box, 0.3 m above its centre, so it also spins it. 6 N·s
/// (6 m/s on a 1 kg box) knocks it out from under the top box, and the upper tower topples.
constexpr int kShovedBox = 4;
constexpr impulse::Vec3 kShove{6.0f, 0.0f, 0.0f};    // [N·s]
constexpr impulse::Vec3 kShoveOffset{0.0f, 0.3f, 0.0f};  // from the box's centre [m]

/// The demo scene's joints (scene_demo_joints.cpp), found by shape: the car is the body with
/// four hinges (its axles), the sign the box hung from the world by a point joint.
constexpr float kCarWheelSpeed = 6.0f;   // [rad/s] about the axles; the car rolls at about 2 m/s
constexpr float kCarMotorTorque = 60.0f; // [N·m] per wheel
/// A pull for one step: with the sign's 98 N weight the hook must hold 498 N, past its 250 N.
/// (A joint breaks on its reaction at the step's last substep, so a force held through the step
/// breaks it; an impulse is absorbed in the first substep and does not.)
constexpr impulse::Vec3 kSignPull{0.0f, -400.0f, 0.0f};  // [N]

struct DemoTimeline {
  std::chrono::milliseconds report_every{500};
  std::chrono::milliseconds drive_car{1000};
  std::chrono::milliseconds pull_sign{1500};
  std::chrono::milliseconds first_raycast{2000};   // after the tower has settled
  std::chrono::milliseconds shove{2500};
  std::chrono::milliseconds second_raycast{5000};  // after it toppled
};

int run_demo(const std::string& server, int seconds, const std::string& name, bool keep_bodies) {
  std::string host;
  uint16_t port = 0;
  if (!parse_server(server, &host, &port)) return 2;
  impulse::Client client;
  if (!connect_or_explain(client, host, port, milliseconds{3000}, name)) return 1;
  fmt::print("connected to {}:{} as client {} (server tick {}, {} Hz physics, {} Hz snapshots)\n", host, port,
             client.client_id(), client.server_tick(), client.tick_hz(), client.snapshot_hz());

  // Spawn the tower; each box's label is its height in the stack.
  std::vector<impulse::ObjectID> boxes(kTowerHeight);
  std::map<uint32_t, int> pending_create;  // request id -> box index
  for (int k = 0; k < kTowerHeight; ++k) {
    impulse::ObjectDesc box;
    box.shape = impulse::ShapeKind::Box;
    box.dims = {kHalf, kHalf, kHalf};
    box.position = kTowerBase + impulse::Vec3{0.0f, kHalf * static_cast<float>(2 * k + 1), 0.0f};
    box.mass = 1.0f;
    box.friction = 0.6f;
    pending_create[client.create_object(box)] = k;
  }
  fmt::print("spawning a tower of {} boxes ({:.1f} m cubes, 1 kg) at {}\n", kTowerHeight, 2 * kHalf,
             format_vec(kTowerBase));
  auto label_of = [&](impulse::ObjectID id) -> std::string {
    for (int k = 0; k < kTowerHeight; ++k) {
      if (boxes[k] == id && !id.is_null()) return fmt::format("box{}", k);
    }
    return format_id(id);
  };
  auto is_mine = [&](impulse::ObjectID id) {
    return !id.is_null() && std::find(boxes.begin(), boxes.end(), id) != boxes.end();
  };

  std::map<uint32_t, std::string> pending_raycast;  // request id -> what it asked
  std::optional<uint32_t> shove_request;
  const DemoTimeline timeline;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::seconds(seconds);
  Clock::time_point next_report = start + timeline.report_every;
  bool first_raycast_sent = false, shove_sent = false, second_raycast_sent = false;
  uint64_t other_events = 0;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  // The joints of the scene: the car's axles and the sign's hook, and the car's start.
  std::vector<impulse::ObjectID> axles;
  impulse::ObjectID car, sign;
  std::optional<impulse::Vec3> car_start;
  bool car_driven = false, sign_pulled = false;
  auto find_scene_joints = [&] {
    std::map<impulse::ObjectID, std::vector<impulse::ObjectID>> hinges_of;
    for (const impulse::JointEvent& j : client.joints()) {
      if (j.kind == impulse::JointKind::Hinge) hinges_of[j.a].push_back(j.joint);
      const impulse::ObjectState* body = client.find(j.a);
      if (j.kind == impulse::JointKind::Point && j.b.is_null() && body != nullptr && body->shape == impulse::ShapeKind::Box) {
        sign = j.a;
      }
    }
    for (const auto& [body, hinges] : hinges_of) {
      if (hinges.size() == 4) {
        car = body;
        axles = hinges;
      }
    }
  };

  auto cast_down = [&](const char* why) {
    // Straight down through the tower's axis from 20 m up, 25 m long: past the ground.
    const impulse::Vec3 origin = kTowerBase + impulse::Vec3{0.0f, 20.0f, 0.0f};
    const impulse::Vec3 down{0.0f, -25.0f, 0.0f};
    pending_raycast[client.raycast(origin, down, false)] = fmt::format("{}: closest hit", why);
    pending_raycast[client.raycast(origin, down, true)] = fmt::format("{}: all hits", why);
  };

  while (Clock::now() < end && g_interrupted == 0) {
    const impulse::PollResult& r = client.poll(milliseconds{5});
    for (const impulse::RequestResult& result : r.results) {
      if (const auto it = pending_create.find(result.request_id); it != pending_create.end()) {
        if (!result.ok()) {
          fmt::print(stderr, "impulse-client: creating box{} failed: {}: {}\n", it->second,
                     impulse::to_string(result.code), result.message);
          return 1;
        }
        boxes[it->second] = result.id;
        fmt::print("box{} is object {}\n", it->second, format_id(result.id));
        pending_create.erase(it);
      } else if (shove_request && result.request_id == *shove_request) {
        fmt::print("shove -> {}{}\n", impulse::to_string(result.code),
                   result.ok() ? "" : ": " + result.message);
      }
    }
    for (const impulse::RaycastResult& ray : r.raycasts) {
      const auto it = pending_raycast.find(ray.request_id);
      const std::string what = it != pending_raycast.end() ? it->second : "raycast";
      if (!ray.ok()) {
        fmt::print("{} -> {}: {}\n", what, impulse::to_string(ray.code), ray.message);
      } else if (ray.count == 0) {
        fmt::print("{} -> miss\n", what);
      } else {
        fmt::print("{} -> {} hit(s){}\n", what, ray.count, ray.truncated ? " (truncated)" : "");
        for (const impulse::RayHit& h : r.hits_of(ray)) {
          fmt::print("    {} at {} normal {} fraction {:.4f}\n", label_of(h.id), format_vec(h.point),
                     format_vec(h.normal), h.fraction);
        }
      }
      if (it != pending_raycast.end()) pending_raycast.erase(it);
    }
    for (const impulse::CollisionEvent& e : r.collisions) {
      if (!is_mine(e.a) && !is_mine(e.b)) {
        ++other_events;  // the scene's own bodies; not printed
        continue;
      }
      fmt::print("tick {} {} {} <-> {} at {}\n", e.tick,
                 e.type == impulse::ContactEventType::Begin ? "begin" : "end  ", label_of(e.a), label_of(e.b),
                 format_vec(e.point));
    }
    for (const impulse::JointEvent& j : r.joints) {
      if (j.added) continue;  // summarised when the car is driven
      static constexpr const char* kReasons[] = {"destroyed", "broken", "its body gone"};
      fmt::print("tick {} joint {} between {} and {} removed: {}\n", j.tick, format_id(j.joint), format_id(j.a),
                 j.b.is_null() ? std::string("the world") : format_id(j.b),
                 kReasons[static_cast<size_t>(j.removed_reason) % 3]);
    }
    if (r.server_disconnected) {
      fmt::print(stderr, "impulse-client: server closed the session: {}\n", r.disconnect_reason);
      return 1;
    }

    const Clock::time_point now = Clock::now();
    const bool spawned = pending_create.empty();
    if (!car_driven && now >= start + timeline.drive_car) {
      car_driven = true;
      find_scene_joints();
      fmt::print("heard of {} joints\n", client.joints().size());
      if (const impulse::ObjectState* c = car.is_null() ? nullptr : client.find(car)) {
        car_start = c->position;
        for (const impulse::ObjectID axle : axles) {
          client.set_joint_motor(axle, impulse::JointMotorMode::Velocity, kCarWheelSpeed, 0.0f, kCarMotorTorque);
        }
        fmt::print("driving the car ({}) from {}: 4 axle motors at {} rad/s, at most {} N·m each\n", format_id(car),
                   format_vec(c->position), kCarWheelSpeed, kCarMotorTorque);
      } else {
        fmt::print("no car in this scene (a body with four hinges): not driving\n");
      }
    }
    if (!sign_pulled && now >= start + timeline.pull_sign) {
      sign_pulled = true;
      if (const impulse::ObjectState* g = sign.is_null() ? nullptr : client.find(sign)) {
        client.apply_force(sign, kSignPull, g->position);
        fmt::print("pulling the sign ({}) down with {} N for a step: its hook breaks past 250 N\n", format_id(sign),
                   format_vec(kSignPull));
      }
    }
    if (spawned && !first_raycast_sent && now >= start + timeline.first_raycast) {
      cast_down("ray down onto the standing tower");
      first_raycast_sent = true;
    }
    if (spawned && !shove_sent && now >= start + timeline.shove) {
      if (const impulse::ObjectState* s = client.find(boxes[kShovedBox])) {
        const impulse::Vec3 point = s->position + kShoveOffset;
        shove_request = client.apply_impulse(boxes[kShovedBox], kShove, point);
        fmt::print("shoving box{} with {} N·s at {} (0.3 m above its centre)\n", kShovedBox, format_vec(kShove),
                   format_vec(point));
        shove_sent = true;
      }
    }
    if (spawned && !second_raycast_sent && now >= start + timeline.second_raycast) {
      cast_down("ray down after the shove");
      second_raycast_sent = true;
    }
    if (now >= next_report) {
      next_report += timeline.report_every;
      const double t = std::chrono::duration<double>(now - start).count();
      const impulse::ObjectState* top = spawned ? client.find(boxes[kTowerHeight - 1]) : nullptr;
      if (top == nullptr) {
        fmt::print("t={:4.1f} s tick {}: waiting for the tower\n", t, client.snapshot_tick());
        continue;
      }
      size_t awake = 0;
      for (const impulse::ObjectState& o : client.objects()) {
        awake += o.kind == impulse::BodyKind::Dynamic && !o.sleeping;
      }
      fmt::print("t={:4.1f} s tick {}: top box y={:.3f} m tilt={:5.1f} deg |w|={:.2f} rad/s{} | {} bodies, {} awake\n",
                 t, client.snapshot_tick(), top->position.y, tilt_degrees(top->orientation),
                 impulse::length(top->angular_velocity), top->sleeping ? " (asleep)" : "", client.objects().size(),
                 awake);
      // What a renderer would draw now: the interpolated pose, a delay behind the newest data.
      const impulse::ClockEstimate clock = client.clock_estimate(now);
      if (const auto pose = client.pose_at(boxes[kTowerHeight - 1], now)) {
        fmt::print("    clock: offset {:+.3f} ms, rtt {:.3f} ms, jitter {:.3f} ms, server tick {}, render tick {:.2f} "
                   "({:.0f} ms delay): top box rendered at y={:.3f} m tilt={:5.1f} deg\n",
                   clock.offset_s * 1e3, clock.rtt_s * 1e3, clock.jitter_s * 1e3,
                   clock.server_tick ? fmt::format("{:.2f}", *clock.server_tick) : std::string("(syncing)"),
                   clock.render_tick.value_or(0.0), clock.interpolation_delay_s * 1e3, pose->position.y,
                   tilt_degrees(pose->orientation));
      }
    }
  }

  if (car_start) {
    if (const impulse::ObjectState* c = client.find(car)) {
      fmt::print("the car drove {:.2f} m (from {} to {})\n", impulse::length(c->position - *car_start),
                 format_vec(*car_start), format_vec(c->position));
    }
    for (const impulse::ObjectID axle : axles) client.set_joint_motor(axle, impulse::JointMotorMode::Off, 0, 0, 0);
  }
  if (!keep_bodies) {
    for (const impulse::ObjectID id : boxes) {
      if (!id.is_null()) client.destroy(id);
    }
    // Give the destroys a moment to be answered, bounded, so the server applies them.
    const Clock::time_point deadline = Clock::now() + milliseconds(300);
    while (Clock::now() < deadline && !client.poll(milliseconds{5}).server_disconnected) {
    }
  }
  const impulse::ClientStats& s = client.stats();
  client.disconnect("demo finished");
  fmt::print("disconnected: sent {} datagrams ({} bytes), received {} ({} bytes), dropped {}, "
             "{} snapshots; {} collision events between other bodies not shown\n",
             s.datagrams_out, s.bytes_out, s.datagrams_in, s.bytes_in, s.datagrams_dropped, s.snapshots_completed,
             other_events);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered even when piped (docker logs, CI), so a watcher sees events as they happen.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"impulse-client: command-line client of an Impulse physics server"};
  app.set_version_flag("--version", impulse::version_line("impulse-client"));
  app.require_subcommand(1);

  std::string server = "127.0.0.1:7777";
  int seconds = 10;
  std::string name = "impulse-client demo";
  bool keep_bodies = false;
  CLI::App* demo =
      app.add_subcommand("demo", "spawn a tower of boxes, raycast onto it, shove it over, print what happens");
  demo->add_option("--server", server, "server address HOST:PORT")->envname("IMPULSE_SERVER")->capture_default_str();
  demo->add_option("--seconds", seconds, "how long to run [s]")->check(CLI::Range(1, 86400))->capture_default_str();
  demo->add_option("--name", name, "client name shown in the server's log")->capture_default_str();
  demo->add_flag("--keep", keep_bodies, "leave the spawned bodies in the world when done");
  std::string token_hex;
  demo->add_option("--token", token_hex,
                   "client token (hex: the connect token and its session secret) from the game's backend or "
                   "`impulse-server token`, for servers run with --token-key")
      ->envname("IMPULSE_TOKEN");

  int timeout_ms = 1000;
  CLI::App* ping = app.add_subcommand("ping", "ping the server without opening a session; print the round-trip time (exit 0 on pong)");
  ping->add_option("--server", server, "server address HOST:PORT")->envname("IMPULSE_SERVER")->capture_default_str();
  ping->add_option("--timeout-ms", timeout_ms, "give up after this long [ms]")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();

  impulse::drive::DriveOptions drive_options;
  bool no_predict = false;
  CLI::App* drive = app.add_subcommand(
      "drive", "drive a car on the demo scene from the keyboard or a --script, with client prediction on or off");
  drive->add_option("--server", server, "server address HOST:PORT")->envname("IMPULSE_SERVER")->capture_default_str();
  drive->add_option("--script", drive_options.script,
                    "drive unattended: \"THROTTLE STEER SECONDS; ...\" (each of throttle and steer in [-1, 1], steer "
                    "+1 full left), e.g. \"1 0 3; 1 0.6 2; 0 0 2\"; without it the keyboard drives");
  drive->add_flag("--no-predict", no_predict,
                  "draw the server's car (interpolated) instead of predicting it: the thin client's view");
  drive->add_option("--settle-seconds", drive_options.settle_s,
                    "after the script, wait at most this long for the car to come to rest [s]")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  drive->add_option("--name", drive_options.name, "client name shown in the server's log")->capture_default_str();
  drive->add_flag("--keep", drive_options.keep, "leave the car in the world when done");
  drive->add_option("--token", token_hex, "client token (hex), as for demo")->envname("IMPULSE_TOKEN");

  CLI11_PARSE(app, argc, argv);
  if (!token_hex.empty() && !impulse::from_hex(token_hex, &g_token)) {
    fmt::print(stderr, "impulse-client: bad --token: expected an even number of hex digits (as printed by "
                       "impulse-server token)\n");
    return 2;
  }
  if (demo->parsed()) return run_demo(server, seconds, name, keep_bodies);
  if (ping->parsed()) return run_ping(server, timeout_ms);
  if (drive->parsed()) {
    if (!parse_server(server, &drive_options.host, &drive_options.port)) return 2;
    drive_options.token = g_token;
    drive_options.predict = !no_predict;
    return impulse::drive::run_drive(drive_options);
  }
  return 2;
}
