#include "viewer/frame.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace impulse::viewer {
namespace {

constexpr float kMinSpeed = 1.0f / 16.0f;  // as wire::check_request's ReplayControl range
constexpr float kMaxSpeed = 16.0f;
constexpr size_t kMaxNumberChars = 24;     // longer is not a number we would accept anyway

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

void append_vec(std::string* out, Vec3 v, int decimals) {
  fmt::format_to(std::back_inserter(*out), ",{:.{}f},{:.{}f},{:.{}f}", finite_or_zero(v.x), decimals,
                 finite_or_zero(v.y), decimals, finite_or_zero(v.z), decimals);
}

bool parse_u64(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > kMaxNumberChars) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc{} && end == text.data() + text.size();
}

bool parse_double(std::string_view text, double* value) {
  if (text.empty() || text.size() > kMaxNumberChars) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc{} && end == text.data() + text.size() && std::isfinite(*value);
}

}  // namespace

void append_json_string(std::string* out, std::string_view text) {
  out->push_back('"');
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      fmt::format_to(std::back_inserter(*out), "\\u{:04x}", u);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void append_pose(std::string* out, const Pose& p) {
  std::string seven;
  append_vec(&seven, p.position, 3);
  fmt::format_to(std::back_inserter(seven), ",{:.4f},{:.4f},{:.4f},{:.4f}", finite_or_zero(p.orientation.x),
                 finite_or_zero(p.orientation.y), finite_or_zero(p.orientation.z), finite_or_zero(p.orientation.w));
  out->push_back('[');
  out->append(seven, 1);  // without the leading comma
  out->push_back(']');
}

std::string frame_json(const FrameInfo& info, std::span<const FrameBody> bodies, std::span<const FrameContact> contacts,
                       std::span<const FrameJoint> joints, const FrameCar* car) {
  std::string out;
  out.reserve(256 + bodies.size() * 120 + contacts.size() * 64);
  auto it = std::back_inserter(out);
  out += "{\"status\":";
  append_json_string(&out, info.status);
  out += ",\"server\":";
  append_json_string(&out, info.server);
  fmt::format_to(it,
                 ",\"tick\":{},\"render_tick\":{:.2f},\"tick_hz\":{},\"snapshot_hz\":{},\"delay_ms\":{:.1f},"
                 "\"rtt_ms\":{:.2f},\"kbit_s\":{:.1f},\"data_age_s\":{:.2f},\"bodies\":{},\"awake\":{}",
                 info.tick, finite_or_zero(info.render_tick), info.tick_hz, info.snapshot_hz,
                 finite_or_zero(info.interpolation_delay_ms), finite_or_zero(info.rtt_ms), finite_or_zero(info.kbit_s),
                 finite_or_zero(info.data_age_s),
                 bodies.size(), info.awake);
  if (info.stop_in_s) {
    fmt::format_to(it, ",\"stop_in_s\":{:.1f}", finite_or_zero(*info.stop_in_s));
  } else {
    out += ",\"stop_in_s\":null";
  }
  if (info.replay) {
    fmt::format_to(it, ",\"replay\":{{\"first\":{},\"last\":{},\"speed\":{:.4f},\"paused\":{}}}", info.replay->first_tick,
                   info.replay->last_tick, finite_or_zero(info.replay_speed), info.replay_paused);
  } else {
    out += ",\"replay\":null";
  }
  out += ",\"control\":";
  append_json_string(&out, info.control);
  out += ",\"objs\":[";
  bool first = true;
  for (const FrameBody& b : bodies) {
    if (!first) out.push_back(',');
    first = false;
    const ObjectState& s = b.state;
    const int flags = (s.sleeping ? 1 : 0) | (s.sensor ? 2 : 0);
    fmt::format_to(it, "[{},{},{},{},{}", s.id.index, s.id.generation, static_cast<int>(s.kind),
                   static_cast<int>(s.shape), flags);
    append_vec(&out, s.dims, 3);
    append_vec(&out, b.position, 3);
    fmt::format_to(it, ",{:.4f},{:.4f},{:.4f},{:.4f}", finite_or_zero(b.orientation.x), finite_or_zero(b.orientation.y),
                   finite_or_zero(b.orientation.z), finite_or_zero(b.orientation.w));
    append_vec(&out, s.velocity, 2);
    fmt::format_to(it, ",{}]", s.asset);
  }
  out += "],\"begins\":[";
  first = true;
  for (const FrameContact& c : contacts) {
    if (!first) out.push_back(',');
    first = false;
    fmt::format_to(it, "[{},{},{},{},{}", c.tick, c.a.index, c.a.generation, c.b.index, c.b.generation);
    append_vec(&out, c.point, 2);
    out.push_back(']');
  }
  out += "],\"joints\":[";
  first = true;
  for (const FrameJoint& j : joints) {
    if (!first) out.push_back(',');
    first = false;
    std::string six;
    append_vec(&six, j.a, 3);
    append_vec(&six, j.b, 3);
    out.push_back('[');
    out.append(six, 1);  // without the leading comma
    out.push_back(']');
  }
  out += "],\"car\":";
  if (car == nullptr) {
    out += "null}";
    return out;
  }
  fmt::format_to(it, "{{\"id\":\"{}:{}\",\"half\":[", car->id.index, car->id.generation);
  std::string half;
  append_vec(&half, car->half_extents, 3);
  out.append(half, 1);
  out += "],\"predicted\":";
  if (car->predicted) {
    append_pose(&out, *car->predicted);
  } else {
    out += "null";
  }
  out += ",\"server\":";
  append_pose(&out, car->server);
  fmt::format_to(it, ",\"speed\":{:.2f},\"commanded\":{:.2f},\"throttle\":{:.2f},\"steer\":{:.2f}}}}}",
                 finite_or_zero(car->speed), finite_or_zero(car->commanded), finite_or_zero(car->throttle),
                 finite_or_zero(car->steer));
  return out;
}

std::optional<DriveRequest> parse_drive(std::string_view throttle, std::string_view steer, std::string* error) {
  double t = 0, s = 0;
  if (!parse_double(throttle, &t) || !parse_double(steer, &s) || std::fabs(t) > 1.0 || std::fabs(s) > 1.0) {
    *error = "drive needs throttle=X and steer=Y, decimal numbers in [-1, 1]";
    return std::nullopt;
  }
  return DriveRequest{static_cast<float>(t), static_cast<float>(s)};
}

std::optional<ControlRequest> parse_control(std::string_view action, std::string_view tick, std::string_view speed,
                                            std::optional<ReplayRange> range, std::string* error) {
  if (!range) {
    *error = "the viewer is not watching a replay (impulse-replay serve): a live server has no timeline to control";
    return std::nullopt;
  }
  ControlRequest r;
  if (action == "pause") {
    r.action = ReplayAction::Pause;
  } else if (action == "resume") {
    r.action = ReplayAction::Resume;
  } else if (action == "seek") {
    r.action = ReplayAction::Seek;
    if (!parse_u64(tick, &r.tick)) {
      *error = "seek needs tick=N, a decimal integer";
      return std::nullopt;
    }
    if (r.tick < range->first_tick || r.tick > range->last_tick) {
      *error = fmt::format("tick {} is outside the recording's ticks [{}, {}]", r.tick, range->first_tick,
                           range->last_tick);
      return std::nullopt;
    }
  } else if (action == "speed") {
    r.action = ReplayAction::SetSpeed;
    double value = 0;
    if (!parse_double(speed, &value) || value < kMinSpeed || value > kMaxSpeed) {
      *error = "speed needs speed=X, a decimal number in [0.0625, 16] (times the recorded tick rate)";
      return std::nullopt;
    }
    r.speed = static_cast<float>(value);
  } else {
    *error = "action must be pause, resume, seek or speed";
    return std::nullopt;
  }
  return r;
}

}  // namespace impulse::viewer
