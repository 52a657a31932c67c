// impulse-viewer's pure parts, unit-tested without a network: the JSON of one frame streamed to
// the page (one Server-Sent Event), and the validation of the page's control requests (HTTP input
// is hostile: every field is checked and a bad one named in a 4xx answer).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "impulse/interpolation.h"
#include "impulse/types.h"

namespace impulse::viewer {

/// One body as the page draws it: the SDK's state, with the pose to draw (interpolated for a live
/// server, the snapshot's own for a replay).
struct FrameBody {
  ObjectState state;
  Vec3 position;     ///< pose to draw [m]
  Quat orientation;  ///< local to world
};

/// A contact Begin the page flashes.
struct FrameContact {
  uint64_t tick = 0;
  ObjectID a, b;
  Vec3 point;
};

/// A joint the page draws as a line between its anchors, world frame [m] (at the drawn poses).
struct FrameJoint {
  Vec3 a, b;
};

/// The viewer's own car (--drive): the pose its prediction draws against the server's newest.
struct FrameCar {
  ObjectID id;
  Vec3 half_extents;              ///< [m]
  std::optional<Pose> predicted;  ///< nullopt before the first reconciliation
  Pose server;                    ///< the newest snapshot's pose (one-way latency old)
  float speed = 0;                ///< the server's car [m/s]
  float commanded = 0;            ///< the forward speed the inputs command [m/s]
  float throttle = 0, steer = 0;  ///< the page's controls now, each in [-1, 1]
};

/// The figures and status lines of one frame.
struct FrameInfo {
  std::string status;            ///< "connected", "connecting", or why not
  std::string server;            ///< HOST:PORT
  uint64_t tick = 0;             ///< newest snapshot's tick
  double render_tick = 0;        ///< the tick drawn (live: the newest tick minus the interpolation delay)
  uint16_t tick_hz = 0, snapshot_hz = 0;
  double interpolation_delay_ms = 0;
  double rtt_ms = -1;            ///< < 0: not measured yet
  double kbit_s = 0;             ///< snapshot and event traffic received, kbit/s over the last second
  /// Seconds since the last snapshot completed (0 when one just did): a server that died without a
  /// Disconnect shows here long before the session times out.
  double data_age_s = 0;
  std::optional<double> stop_in_s;  ///< the server is draining: seconds until it disconnects everyone
  uint32_t awake = 0;            ///< dynamic bodies not asleep
  std::optional<ReplayRange> replay;
  double replay_speed = 1;       ///< the last speed asked for by a control (the protocol does not echo it)
  bool replay_paused = false;    ///< likewise, the last Pause/Resume asked for
  std::string control;           ///< the last control's answer, e.g. "seek 120: Ok"
};

/// The frame as one line of JSON (no newline inside, so it is one SSE `data:` line). Bodies are
/// arrays [index, generation, kind, shape, flags (1 sleeping, 2 sensor), dims xyz, position xyz,
/// orientation xyzw, velocity xyz, asset id (hull, mesh, heightfield; else 0)]; contacts [tick, a index, a generation, b index, b generation,
/// point xyz]; joints [a xyz, b xyz]; "car" null or {id "i:g", half xyz, predicted null or
/// [position xyz, orientation xyzw], server likewise, speed, commanded, throttle, steer}.
/// Non-finite numbers are written as 0 (JSON has no NaN).
std::string frame_json(const FrameInfo& info, std::span<const FrameBody> bodies, std::span<const FrameContact> contacts,
                       std::span<const FrameJoint> joints = {}, const FrameCar* car = nullptr);

/// Escapes `text` for a JSON string (quotes, backslash, control characters as \u00XX).
void append_json_string(std::string* out, std::string_view text);

/// A control asked for by the page (POST /control).
struct ControlRequest {
  ReplayAction action = ReplayAction::Pause;
  uint64_t tick = 0;
  float speed = 1.0f;
};

/// The page's controls of the viewer's car (POST /drive).
struct DriveRequest {
  float throttle = 0;  ///< [-1, 1]
  float steer = 0;     ///< [-1, 1], +1 full left
};

/// Validates the form fields of POST /drive: throttle and steer, decimal numbers in [-1, 1].
/// Returns nullopt with *error saying what is wrong.
std::optional<DriveRequest> parse_drive(std::string_view throttle, std::string_view steer, std::string* error);

/// Validates the form fields of POST /control: action = pause | resume | seek | speed; seek needs
/// tick = a decimal integer inside `range`; speed needs speed = a decimal number in [1/16, 16].
/// Without a range (a live server, or not connected) every action is refused. Returns nullopt
/// with *error saying what is wrong.
std::optional<ControlRequest> parse_control(std::string_view action, std::string_view tick, std::string_view speed,
                                            std::optional<ReplayRange> range, std::string* error);

}  // namespace impulse::viewer
