#include "drive.h"  // tools/client/drive.h

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <fmt/core.h>

#include "drive/car.h"
#include "drive/script.h"
#include "impulse/client.h"

namespace impulse::drive {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_drive_signal(int) { g_stop = 1; }

/// How far the drawn car must move from where it stood for the throttle to count as answered [m]:
/// well above the snapshots' position quantum, well below what a player notices.
constexpr float kMovedM = 0.05f;
/// A tap of a steering key holds it this long [s]: longer than a terminal's auto-repeat delay,
/// so a held key steers without gaps.
constexpr double kSteerHoldS = 0.6;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

float angle_between(Quat a, Quat b) {
  const float d = std::fabs(a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w);
  return 2.0f * std::acos(std::min(1.0f, d));
}

/// The terminal in raw mode (no echo, no line buffering) while it lives; restored on destruction.
class RawTerminal {
 public:
  RawTerminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool active() const { return active_; }

 private:
  termios saved_{};
  bool active_ = false;
};

/// The keyboard's controls: w/s (or the up/down arrows) step the throttle through -1, 0, +1 and
/// it stays there; a/d (left/right) steer while held; space centres both; q or Esc quits.
class Keyboard {
 public:
  /// Reads the keys waiting on stdin; false when the player quit.
  bool read(Clock::time_point now) {
    pollfd fd{STDIN_FILENO, POLLIN, 0};
    while (::poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN) != 0) {
      char c = 0;
      if (::read(STDIN_FILENO, &c, 1) != 1) return false;
      if (escape_ == 1) {
        escape_ = c == '[' ? 2 : 0;
        if (escape_ == 0) return false;  // a lone Esc
        continue;
      }
      if (escape_ == 2) {
        escape_ = 0;
        key(c == 'A' ? 'w' : c == 'B' ? 's' : c == 'D' ? 'a' : c == 'C' ? 'd' : '\0', now);
        continue;
      }
      if (c == 27) {
        escape_ = 1;
        continue;
      }
      if (c == 'q' || c == 'Q' || c == 3) return false;
      key(c, now);
    }
    // An arrow key's bytes arrive together: an Esc with nothing after it is the Esc key itself.
    return escape_ != 1;
  }
  Controls controls(Clock::time_point now) const {
    Controls c;
    c.throttle = throttle_;
    if (seconds_between(steer_at_, now) < kSteerHoldS) c.steer = steer_;
    return c;
  }

 private:
  void key(char c, Clock::time_point now) {
    switch (c) {
      case 'w': case 'W': throttle_ = std::min(throttle_ + 1.0f, 1.0f); break;
      case 's': case 'S': throttle_ = std::max(throttle_ - 1.0f, -1.0f); break;
      case 'a': case 'A': steer_ = 1.0f; steer_at_ = now; break;
      case 'd': case 'D': steer_ = -1.0f; steer_at_ = now; break;
      case ' ': throttle_ = 0.0f; steer_ = 0.0f; break;
      default: break;
    }
  }
  float throttle_ = 0.0f;
  float steer_ = 0.0f;
  Clock::time_point steer_at_{};
  int escape_ = 0;  // 1 after Esc, 2 after Esc [
};

/// How soon the drawn car answers the throttle: from the first frame a throttle is held with the
/// car at rest to the frame the drawn car has moved kMovedM from where it stood.
struct ResponseMeter {
  std::optional<Clock::time_point> pressed_at;
  Vec3 stood_at;
  std::optional<double> seconds;
  void frame(Clock::time_point now, const Controls& c, const std::optional<Pose>& drawn) {
    if (seconds || !drawn) return;
    if (!pressed_at) {
      if (c.throttle == 0.0f) return;
      pressed_at = now;
      stood_at = drawn->position;
      return;
    }
    if (length(drawn->position - stood_at) >= kMovedM) seconds = seconds_between(*pressed_at, now);
  }
};

}  // namespace

int run_drive(const DriveOptions& o) {
  std::vector<ScriptStep> steps;
  std::string error;
  if (!o.script.empty() && !parse_script(o.script, &steps, &error)) {
    fmt::print(stderr, "impulse-client drive: bad --script: {}\n", error);
    return 2;
  }
  const bool interactive = steps.empty();
  if (interactive && isatty(STDIN_FILENO) == 0) {
    fmt::print(stderr, "impulse-client drive: stdin is not a terminal: run it in one, or give --script, e.g. "
                       "--script \"1 0 3; 1 0.6 2; 0 0 2\"\n");
    return 2;
  }

  Client client;
  if (!client.connect(o.host, o.port, milliseconds{3000}, &error, o.name, o.token)) {
    fmt::print(stderr, "impulse-client drive: {}\n", error);
    return 1;
  }
  CarConfig config;
  config.predict = o.predict;
  config.predictor.tick_hz = client.tick_hz();
  // Several drivers on one server: each client its own lane, 4 m apart, so no two cars are
  // created inside each other.
  static constexpr float kLanes[] = {0.0f, 4.0f, -4.0f, 8.0f, -8.0f};
  config.spawn.x += kLanes[(client.client_id() + std::size(kLanes) - 1) % std::size(kLanes)];
  Car car(config);
  const uint32_t create = client.create_object(car.desc());
  fmt::print("connected to {}:{} as client {} ({} Hz); creating the car ({:.1f} x {:.1f} x {:.1f} m, {:.0f} kg) at "
             "({:.1f}, {:.2f}, {:.1f}), prediction {}\n",
             o.host, o.port, client.client_id(), client.tick_hz(), 2 * config.half_extents.x,
             2 * config.half_extents.y, 2 * config.half_extents.z, config.mass, config.spawn.x, config.spawn.y,
             config.spawn.z, o.predict ? "on" : "off");

  std::signal(SIGINT, on_drive_signal);
  std::signal(SIGTERM, on_drive_signal);
  std::optional<RawTerminal> terminal;
  if (interactive) {
    terminal.emplace();
    fmt::print("keys: w/s throttle (it stays), a/d steer (while held), space stop, q quit\n");
  }
  Keyboard keyboard;
  ResponseMeter response;
  bool told_stopping = false;

  const Clock::time_point connected_at = Clock::now();
  std::optional<Clock::time_point> ready_at;     // the car is known and inputs can be stamped
  std::optional<Clock::time_point> settle_from;  // the script ended
  Clock::time_point next_report = connected_at;
  int rc = 0;
  while (g_stop == 0) {
    const Clock::time_point now = Clock::now();
    const PollResult& r = client.poll(milliseconds{1});
    if (r.server_disconnected) {
      fmt::print(stderr, "\nimpulse-client drive: the server closed the session: {}\n", r.disconnect_reason);
      return 1;
    }
    if (const std::optional<double> left = client.server_stops_in_s(now); left && !told_stopping) {
      fmt::print("\nthe server is shutting down: it disconnects everyone in {:.0f} s\n", *left);
      told_stopping = true;
    }
    for (const RequestResult& result : r.results) {
      if (result.request_id != create) continue;
      if (!result.ok()) {
        fmt::print(stderr, "impulse-client drive: the server refused the car: {} ({})\n", to_string(result.code),
                   result.message);
        return 1;
      }
      car.created(result.id);
    }
    for (const SnapshotRange& s : r.snapshots) car.snapshot(s.tick, r.objects_of(s), now, r.inputs_of(s));

    const std::optional<uint64_t> input_tick = client.input_tick(now);
    if (!ready_at) {
      if (car.server_state() && input_tick) {
        ready_at = now;
        fmt::print("the car is {}:{}; {}\n", car.id().index, car.id().generation,
                   interactive ? "drive" : fmt::format("running the script ({} steps)", steps.size()));
      } else if (seconds_between(connected_at, now) > 5.0) {
        fmt::print(stderr, "impulse-client drive: the car did not appear in a snapshot within 5 s\n");
        return 1;
      }
      continue;
    }

    Controls controls;
    if (interactive) {
      if (!keyboard.read(now)) break;
      controls = keyboard.controls(now);
    } else if (!script_controls(steps, seconds_between(*ready_at, now), &controls)) {
      if (!settle_from) settle_from = now;
      const bool at_rest = car.server_state()->sleeping || length(car.server_state()->velocity) < 0.01f;
      if ((at_rest && seconds_between(*settle_from, now) > 0.5) || seconds_between(*settle_from, now) > o.settle_s) {
        break;
      }
    }
    if (input_tick) {
      if (const std::optional<Car::Input> in = car.input(*input_tick, controls)) {
        client.send_input(car.id(), InputMode::Velocity, in->linear, in->angular, in->tick);
      }
    }
    // What the player sees: the prediction, or (off) the server's car, interpolated.
    const std::optional<Pose> drawn = o.predict ? car.predicted_pose(now) : client.pose_at(car.id(), now);
    response.frame(now, controls, drawn);

    if (now >= next_report) {
      next_report = now + milliseconds{interactive ? 100 : 500};
      const ObjectState& s = *car.server_state();
      const std::string line = fmt::format(
          "t={:5.1f} s throttle {:+.1f} steer {:+.1f} | speed {:5.2f} m/s (commanded {:5.2f}) | server car at ({:.2f}, "
          "{:.2f}) | drawn {:.2f} m from it | input lead {}",
          seconds_between(*ready_at, now), controls.throttle, controls.steer, length(s.velocity),
          car.commanded_speed(), s.position.x, s.position.z, drawn ? length(drawn->position - s.position) : 0.0f,
          client.input_lead() ? fmt::format("{:+d} ticks", *client.input_lead()) : std::string("-"));
      if (interactive) {
        fmt::print("\r{}   ", line);
        std::fflush(stdout);
      } else {
        fmt::print("{}\n", line);
      }
    }
  }
  terminal.reset();
  if (interactive) fmt::print("\n");

  const Clock::time_point end = Clock::now();
  if (!ready_at || !car.server_state()) {
    fmt::print(stderr, "impulse-client drive: stopped before the car was ready\n");
    rc = 1;
  } else {
    const ObjectState& s = *car.server_state();
    const std::optional<Pose> drawn = o.predict ? car.predicted_pose(end) : client.pose_at(car.id(), end);
    fmt::print("drove {:.1f} m (the server's car) with {} inputs; {} snapshots\n", car.stats().distance_m,
               car.stats().inputs, car.stats().snapshots);
    if (response.seconds) {
      fmt::print("response: the drawn car moved {:.0f} cm {:.0f} ms after the throttle (prediction {})\n", 100 * kMovedM,
                 1e3 * *response.seconds, o.predict ? "on" : "off");
    } else {
      fmt::print("response: the drawn car never moved {:.0f} cm under throttle\n", 100 * kMovedM);
    }
    if (o.predict) {
      const predict::PredictorStats& p = car.predictor_stats();
      fmt::print("prediction: {} reconciliations, {} ticks replayed, {} over budget, {} from a deferred state, "
                 "largest correction {:.1f} mm\n",
                 p.reconciliations, p.ticks_replayed, p.over_budget, p.stale_states, 1e3 * p.max_correction_m);
    }
    if (drawn) {
      fmt::print("at the end: the drawn car is {:.1f} mm and {:.2f} deg from the server's ({}, {:.2f} m/s)\n",
                 1e3 * length(drawn->position - s.position),
                 angle_between(drawn->orientation, s.orientation) * 57.29577951308232,
                 s.sleeping ? "asleep" : "awake", length(s.velocity));
    }
  }
  if (!car.id().is_null() && !o.keep) {
    client.destroy(car.id());
    const Clock::time_point deadline = Clock::now() + milliseconds(300);
    while (Clock::now() < deadline && !client.poll(milliseconds{5}).server_disconnected) {
    }
  }
  client.disconnect("drive finished");
  return rc;
}

}  // namespace impulse::drive
