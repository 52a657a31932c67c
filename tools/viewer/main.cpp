// impulse-viewer: watch an Impulse world in a browser. A client of the protocol on the client SDK
// (impulse::Client), connected to a live impulse-server or to impulse-replay serve, that serves a
// three.js page over HTTP and streams the world to it as Server-Sent Events (viewer/http.h says
// why SSE). Read-only unless --drive: it creates nothing; against a replay the page's controls
// pause, resume, seek and change the speed through ReplayControl. With --drive it creates a car
// (drive/car.h) that the page's keys steer, and the page draws the car's predicted pose against
// the server's.
//
// Threads: the main thread runs the SDK's network loop (poll, reconnect, build a frame at
// --frame-hz, drain the page's controls); cpp-httplib's accept thread and a bounded pool of
// workers serve the pages (and ask the server's admin endpoint for a clicked body's owner, --admin). They meet only in FrameSlot (latest frame, older ones dropped),
// ControlQueue (bounded) and ReplayFacts, none of which is held across I/O.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "impulse/client.h"
#include "drive/car.h"
#include "shared/hex.h"
#include "viewer/frame.h"
#include "viewer/http.h"
#include "shared/version.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace impulse;
using namespace impulse::viewer;

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) { g_stop = 1; }

/// Contact Begins the frames repeat, so a page that skipped frames still flashes them.
constexpr size_t kRecentContacts = 64;
/// How long a Begin stays in the frames [s].
constexpr double kContactWindowS = 0.5;
constexpr auto kReconnectEvery = std::chrono::seconds(1);

struct Options {
  std::string server = "127.0.0.1:7777";
  HttpOptions http;
  int frame_hz = 30;
  std::string name = "impulse-viewer";
  std::string token_hex;
  std::string admin;  ///< the server's admin endpoint, for owners; empty: owners unknown
  bool drive = false;  ///< create a car the page's keys steer (drive/car.h)
  bool predict = true; ///< --drive: predict the car (else the page sees only the server's)
};

/// Controls older than this are released: the page sends them at least every 250 ms.
constexpr std::chrono::milliseconds kDriveControlsMaxAge{600};

/// The viewer's car over its sessions: created after each connect, fed every snapshot.
struct DrivenCar {
  std::unique_ptr<drive::Car> car;
  uint32_t create_request = 0;
  drive::Controls controls;
  std::string problem;  // why there is no car, for the log (once)
}; 

std::string describe(const ConnectionError& e) { return e.message.empty() ? std::string("not connected") : e.message; }

/// kbit/s received over a sliding window of about a second.
class RateMeter {
 public:
  double update(Clock::time_point now, uint64_t bytes_total) {
    samples_.push_back({now, bytes_total});
    while (samples_.size() > 2 && now - samples_[1].first >= std::chrono::seconds(1)) samples_.pop_front();
    const auto& [t0, b0] = samples_.front();
    const double dt = std::chrono::duration<double>(now - t0).count();
    return dt > 0.05 && bytes_total >= b0 ? static_cast<double>(bytes_total - b0) * 8.0 / 1000.0 / dt : 0.0;
  }
  void reset() { samples_.clear(); }

 private:
  std::deque<std::pair<Clock::time_point, uint64_t>> samples_;
};

const char* action_name(ReplayAction a) {
  switch (a) {
    case ReplayAction::Pause: return "pause";
    case ReplayAction::Resume: return "resume";
    case ReplayAction::Seek: return "seek";
    case ReplayAction::SetSpeed: return "speed";
  }
  return "control";
}

int run(const Options& o) {
  std::string host;
  uint16_t port = 0;
  std::string error;
  if (!parse_host_port(o.server, &host, &port, &error)) {
    fmt::print(stderr, "impulse-viewer: bad --server value: {}\n", error);
    return 2;
  }
  std::vector<uint8_t> token;
  if (!o.token_hex.empty() && !from_hex(o.token_hex, &token)) {
    fmt::print(stderr, "impulse-viewer: bad --token: expected an even number of hex digits (as printed by "
                       "impulse-server token)\n");
    return 2;
  }

  HttpOptions http_options = o.http;
  if (!o.admin.empty() &&
      !parse_admin_address(o.admin, &http_options.admin_host, &http_options.admin_port, &error)) {
    fmt::print(stderr, "impulse-viewer: bad --admin value: {}\n", error);
    return 2;
  }

  FrameSlot frames;
  ControlQueue controls;
  ReplayFacts replay_facts;
  DriveSlot drive_slot;
  std::unique_ptr<HttpServer> http =
      HttpServer::start(http_options, frames, controls, replay_facts, o.drive ? &drive_slot : nullptr, &error);
  if (!http) {
    fmt::print(stderr, "impulse-viewer: {}\n", error);
    return 1;
  }
  // The tests read this line to find the port when --http-port 0 picks one.
  fmt::print("impulse-viewer: watching {} ; open http://{}:{}/ in a browser\n", o.server,
             o.http.bind == "0.0.0.0" || o.http.bind == "::" ? std::string("127.0.0.1") : o.http.bind, http->port());

  Client client;
  ConnectParams params;
  params.name = o.name;
  params.token = token;
  params.timeout = milliseconds{3000};
  params.server_label = o.server;

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  const auto frame_every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / o.frame_hz));
  Clock::time_point next_frame = Clock::now();
  Clock::time_point next_connect = Clock::now();
  RateMeter rate;
  std::deque<FrameContact> recent;
  std::vector<FrameBody> bodies;
  std::vector<FrameContact> contacts;
  std::vector<FrameJoint> joints;
  FrameInfo info;
  info.server = o.server;
  std::vector<std::pair<uint32_t, std::string>> pending_controls;  // request id -> what was asked
  bool was_connected = false;
  std::string problem;  // why the last session ended or the last connect failed; empty: none yet
  DrivenCar driven;
  std::optional<FrameCar> frame_car;
  uint64_t snapshots_seen = 0;
  Clock::time_point last_snapshot_at = Clock::now();

  while (g_stop == 0) {
    const Clock::time_point now = Clock::now();
    const ConnectionState state = client.state();
    if ((state == ConnectionState::Disconnected || state == ConnectionState::Failed) && now >= next_connect) {
      if (state == ConnectionState::Failed) problem = describe(client.connection_error());
      client.connect_async(host, port, params);
      next_connect = now + kReconnectEvery;
      rate.reset();
      recent.clear();
    }
    // The SDK's poll waits up to 5 ms for a datagram: the loop's only wait.
    const PollResult& r = client.poll(milliseconds{5});
    // Without a socket (the host did not resolve) poll returns at once: pace the retries.
    if (client.local_port() == 0) std::this_thread::sleep_for(milliseconds{20});
    if (client.connected() && !was_connected) {
      fmt::print("impulse-viewer: connected to {} as client {} ({} Hz physics, {} Hz snapshots){}\n", o.server,
                 client.client_id(), client.tick_hz(), client.snapshot_hz(),
                 client.replay_range() ? fmt::format(", a replay of ticks [{}, {}]", client.replay_range()->first_tick,
                                                     client.replay_range()->last_tick)
                                       : std::string());
      replay_facts.set(client.replay_range());
      if (o.drive && !client.replay_range()) {
        drive::CarConfig config;
        config.predict = o.predict;
        config.predictor.tick_hz = client.tick_hz();
        driven.car = std::make_unique<drive::Car>(config);
        driven.create_request = client.create_object(driven.car->desc());
        fmt::print("impulse-viewer: creating the car (prediction {}); drive it with the page's keys\n",
                   o.predict ? "on" : "off");
      } else if (o.drive) {
        fmt::print(stderr, "impulse-viewer: --drive: a replay cannot be driven; watching it\n");
      }
      info.replay_speed = 1;
      info.replay_paused = false;
      info.control.clear();
    }
    if (r.server_disconnected) {
      fmt::print(stderr, "impulse-viewer: {} closed the session: {}; reconnecting\n", o.server, r.disconnect_reason);
      problem = fmt::format("the server closed the session ({})", r.disconnect_reason);
    }
    if (!client.connected() && was_connected) {
      replay_facts.set(std::nullopt);
      pending_controls.clear();
      driven = DrivenCar{};  // the server destroys a session's bodies with it (by default, --on-disconnect)
    }
    was_connected = client.connected();

    for (const CollisionEvent& e : r.collisions) {
      if (e.type != ContactEventType::Begin) continue;
      if (recent.size() == kRecentContacts) recent.pop_front();
      recent.push_back({e.tick, e.a, e.b, e.point});
    }
    for (const RequestResult& result : r.results) {
      if (driven.car && result.request_id == driven.create_request) {
        if (result.ok()) {
          driven.car->created(result.id);
          fmt::print("impulse-viewer: the car is {}:{}\n", result.id.index, result.id.generation);
        } else {
          fmt::print(stderr, "impulse-viewer: the server refused the car: {} ({})\n", to_string(result.code),
                     result.message);
          driven.car.reset();
        }
      }
      const auto it = std::find_if(pending_controls.begin(), pending_controls.end(),
                                   [&](const auto& p) { return p.first == result.request_id; });
      if (it == pending_controls.end()) continue;
      info.control = fmt::format("{}: {}{}", it->second, to_string(result.code), result.ok() ? "" : " (" + result.message + ")");
      pending_controls.erase(it);
    }
    while (const std::optional<ControlRequest> c = controls.pop()) {
      if (!client.connected() || !client.replay_range()) continue;  // the server changed under the page
      std::string what = action_name(c->action);
      if (c->action == ReplayAction::Seek) what += fmt::format(" {}", c->tick);
      if (c->action == ReplayAction::SetSpeed) what += fmt::format(" {:g}x", c->speed);
      const uint32_t id = client.replay_control(c->action, c->tick, c->speed);
      if (id == 0) continue;
      if (pending_controls.size() >= ControlQueue::kCapacity) pending_controls.erase(pending_controls.begin());
      pending_controls.emplace_back(id, what);
      if (c->action == ReplayAction::SetSpeed) info.replay_speed = c->speed;
      if (c->action == ReplayAction::Pause) info.replay_paused = true;
      if (c->action == ReplayAction::Resume) info.replay_paused = false;
    }

    if (driven.car) {
      for (const SnapshotRange& snap : r.snapshots) driven.car->snapshot(snap.tick, r.objects_of(snap), now, r.inputs_of(snap));
      const DriveRequest d = drive_slot.get(now, kDriveControlsMaxAge);
      driven.controls = drive::Controls{d.throttle, d.steer};
      if (const std::optional<uint64_t> tick = client.input_tick(now)) {
        if (const std::optional<drive::Car::Input> in = driven.car->input(*tick, driven.controls)) {
          client.send_input(driven.car->id(), InputMode::Velocity, in->linear, in->angular, in->tick);
        }
      }
    }

    if (now < next_frame) continue;
    next_frame = std::max(next_frame + frame_every, now);

    bodies.clear();
    contacts.clear();
    joints.clear();
    info.awake = 0;
    if (client.connected()) {
      info.status = "connected";
      info.tick = client.snapshot_tick();
      info.tick_hz = client.tick_hz();
      info.snapshot_hz = client.snapshot_hz();
      info.replay = client.replay_range();
      info.interpolation_delay_ms = client.interpolation_delay_s() * 1e3;
      const auto rtt = client.last_rtt();
      info.rtt_ms = rtt ? static_cast<double>(rtt->count()) / 1e3 : -1.0;
      info.kbit_s = rate.update(now, client.stats().bytes_in);
      if (client.stats().snapshots_completed != snapshots_seen) {
        snapshots_seen = client.stats().snapshots_completed;
        last_snapshot_at = now;
      }
      info.data_age_s = std::chrono::duration<double>(now - last_snapshot_at).count();
      info.stop_in_s = client.server_stops_in_s(now);
      // A live world is drawn at the render tick (the interpolation delay behind the newest
      // snapshot), interpolated; a replay at the snapshot's own tick, so a seek or a pause shows
      // exactly the recorded state.
      const std::optional<double> render_tick = client.render_tick(now);
      const bool interpolate = !info.replay && render_tick.has_value();
      info.render_tick = interpolate ? *render_tick : static_cast<double>(info.tick);
      for (const ObjectState& s : client.objects()) {
        FrameBody b{s, s.position, s.orientation};
        if (interpolate) {
          if (const std::optional<Pose> pose = client.pose_at(s.id, now)) {
            b.position = pose->position;
            b.orientation = pose->orientation;
          }
        }
        info.awake += s.kind == BodyKind::Dynamic && !s.sleeping;
        bodies.push_back(b);
      }
      // Each joint between its anchors at the drawn poses (bodies is sorted by id, as objects()).
      auto drawn = [&](ObjectID id) -> const FrameBody* {
        const auto it = std::lower_bound(bodies.begin(), bodies.end(), id,
                                         [](const FrameBody& x, ObjectID y) { return x.state.id < y; });
        return it != bodies.end() && it->state.id == id ? &*it : nullptr;
      };
      for (const JointEvent& j : client.joints()) {
        const FrameBody* a = drawn(j.a);
        const FrameBody* b = j.b.is_null() ? nullptr : drawn(j.b);
        if (a == nullptr || (!j.b.is_null() && b == nullptr)) continue;  // a body out of view
        const Vec3 end_a = a->position + rotate(a->orientation, j.local_anchor_a);
        const Vec3 end_b = b ? b->position + rotate(b->orientation, j.local_anchor_b) : j.local_anchor_b;
        joints.push_back(FrameJoint{end_a, end_b});
      }
      const double window_ticks = kContactWindowS * std::max<double>(info.tick_hz, 1.0);
      for (const FrameContact& c : recent) {
        if (static_cast<double>(c.tick) + window_ticks >= static_cast<double>(info.tick) && c.tick <= info.tick) {
          contacts.push_back(c);
        }
      }
    } else {
      info.stop_in_s.reset();
      info.status = problem.empty() ? "connecting" : "reconnecting: " + problem;
      info.replay.reset();
    }
    frame_car.reset();
    if (driven.car && driven.car->server_state()) {
      const ObjectState& server_car = *driven.car->server_state();
      FrameCar c;
      c.id = driven.car->id();
      c.half_extents = server_car.dims;
      c.predicted = driven.car->predicted_pose(now);
      c.server = Pose{server_car.position, server_car.orientation};
      c.speed = length(server_car.velocity);
      c.commanded = driven.car->commanded_speed();
      c.throttle = driven.controls.throttle;
      c.steer = driven.controls.steer;
      frame_car = c;
    }
    frames.publish(std::make_shared<const std::string>(
        frame_json(info, bodies, contacts, joints, frame_car ? &*frame_car : nullptr)));
  }

  fmt::print("impulse-viewer: stopping\n");
  if (driven.car && !driven.car->id().is_null()) client.destroy(driven.car->id());
  client.disconnect("viewer closed");
  http.reset();  // stops the streams and joins the HTTP threads
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // line-buffered when piped (docker logs, tests)
  Options o;
  CLI::App app{"impulse-viewer: watch a live Impulse server or a replay (impulse-replay serve) in a browser"};
  app.set_version_flag("--version", impulse::version_line("impulse-viewer"));
  app.add_option("--server", o.server, "server or replay server to watch, HOST:PORT")
      ->envname("IMPULSE_SERVER")
      ->capture_default_str();
  app.add_option("--http-bind", o.http.bind,
                 "address the page is served on. Loopback by default: the page has no login, shows the whole world "
                 "and controls a replay's shared timeline; bind 0.0.0.0 only inside a container or a trusted network")
      ->envname("IMPULSE_VIEWER_HTTP_BIND")
      ->capture_default_str();
  app.add_option("--http-port", o.http.port, "TCP port of the page (0 = any free port, printed at start)")
      ->envname("IMPULSE_VIEWER_HTTP_PORT")
      ->capture_default_str();
  app.add_option("--max-pages", o.http.max_streams,
                 "pages streaming the world at once (each holds one HTTP thread); more are answered 503")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--frame-hz", o.frame_hz, "frames streamed to each page per second")
      ->check(CLI::Range(1, 60))
      ->capture_default_str();
  app.add_option("--three-dir", o.http.three_dir,
                 "three.js install holding build/three.min.js and examples/js/controls/OrbitControls.js (Debian's "
                 "libjs-three)")
      ->capture_default_str();
  app.add_option("--admin", o.admin,
                 "the server's admin endpoint (its --admin-port), HOST:PORT or http://HOST:PORT: a clicked body's "
                 "owner is asked there (snapshots do not carry owners). Empty: owners are shown as unknown")
      ->envname("IMPULSE_VIEWER_ADMIN");
  app.add_flag("--drive", o.drive,
               "create a car on the server that the page's keys drive (w/s or the arrows: throttle, a/d: steer), "
               "and draw its predicted pose against the server's");
  app.add_flag("!--no-predict", o.predict, "--drive: draw only the server's car (no prediction)");
  app.add_option("--name", o.name, "client name shown in the server's log")->capture_default_str();
  app.add_option("--token", o.token_hex,
                 "client token (hex) for a server run with --token-key, as printed by `impulse-server token`")
      ->envname("IMPULSE_TOKEN");
  CLI11_PARSE(app, argc, argv);
  return run(o);
}
