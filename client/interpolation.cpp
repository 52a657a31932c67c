// Snapshot interpolation (Fiedler, "Snapshot Interpolation", 2014) with slerp (Shoemake,
// SIGGRAPH 1985), capped extrapolation and Edyn's decaying discontinuity offset; see
// interpolation.h.
#include "impulse/interpolation.h"

#include <algorithm>
#include <cmath>

namespace impulse {
namespace {

/// Corrections below this (metres or radians) are not counted in Stats::corrections.
constexpr float kCountedCorrection = 1.0e-6f;
/// A correction factor below this contributes nothing visible (1e-9 of 10 m is 10 nm).
constexpr double kNegligibleFactor = 1.0e-9;

Vec3 lerp(Vec3 a, Vec3 b, float u) { return a + (b - a) * u; }

/// The rotation a constant angular velocity w [rad/s] (world frame) turns through in dt [s]:
/// angle |w| dt about w / |w|. Exact integration (not the first-order update of the solver),
/// computed in double.
Quat rotation_over(Vec3 w, double dt) {
  const double wx = w.x;
  const double wy = w.y;
  const double wz = w.z;
  const double speed = std::sqrt(wx * wx + wy * wy + wz * wz);
  const double half_angle = 0.5 * speed * dt;
  if (!(speed > 0.0) || half_angle == 0.0) return Quat{};
  const double s = std::sin(half_angle) / speed;
  return Quat{static_cast<float>(wx * s), static_cast<float>(wy * s), static_cast<float>(wz * s),
              static_cast<float>(std::cos(half_angle))};
}

/// Rotation angle of a unit quaternion [rad], in [0, pi] (q and -q give the same angle).
float rotation_angle(Quat q) {
  const double v = std::sqrt(static_cast<double>(q.x) * q.x + static_cast<double>(q.y) * q.y +
                             static_cast<double>(q.z) * q.z);
  return static_cast<float>(2.0 * std::atan2(v, std::abs(static_cast<double>(q.w))));
}

bool valid_rate(double hz) { return std::isfinite(hz) && hz > 0.0 && hz <= 10000.0; }

}  // namespace

double default_delay_ticks(double tick_hz, double snapshot_hz, double jitter_s) {
  if (!valid_rate(tick_hz) || !valid_rate(snapshot_hz) || !std::isfinite(jitter_s) || jitter_s < 0.0) {
    return 0.0;
  }
  return kDefaultDelaySnapshotIntervals * tick_hz / snapshot_hz + jitter_s * tick_hz;
}

Quat slerp(Quat a, Quat b, float u) {
  double ax = a.x, ay = a.y, az = a.z, aw = a.w;
  double bx = b.x, by = b.y, bz = b.z, bw = b.w;
  if (ax * bx + ay * by + az * bz + aw * bw < 0.0) {  // shorter arc: b and -b are one rotation
    bx = -bx;
    by = -by;
    bz = -bz;
    bw = -bw;
  }
  const double t = u;
  // Arc angle between the 4D unit vectors: |b - a| = 2 sin(arc/2), |b + a| = 2 cos(arc/2).
  const double dx = bx - ax, dy = by - ay, dz = bz - az, dw = bw - aw;
  const double sx = bx + ax, sy = by + ay, sz = bz + az, sw = bw + aw;
  const double arc = 2.0 * std::atan2(std::sqrt(dx * dx + dy * dy + dz * dz + dw * dw),
                                      std::sqrt(sx * sx + sy * sy + sz * sz + sw * sw));
  const double sin_arc = std::sin(arc);
  double wa = 1.0 - t;
  double wb = t;
  if (sin_arc > 1.0e-9) {  // otherwise a and b coincide to double precision: lerp is exact
    wa = std::sin((1.0 - t) * arc) / sin_arc;
    wb = std::sin(t * arc) / sin_arc;
  }
  const double x = wa * ax + wb * bx, y = wa * ay + wb * by, z = wa * az + wb * bz, w = wa * aw + wb * bw;
  const double len = std::sqrt(x * x + y * y + z * z + w * w);
  if (!(len > 1.0e-12)) return Quat{};
  return Quat{static_cast<float>(x / len), static_cast<float>(y / len), static_cast<float>(z / len),
              static_cast<float>(w / len)};
}

SnapshotInterpolator::SnapshotInterpolator(const InterpolationConfig& config) { reset(config); }

bool SnapshotInterpolator::reset(const InterpolationConfig& config) {
  const InterpolationConfig defaults;
  InterpolationConfig c = config;
  bool ok = true;
  const auto check = [&ok](double& value, double fallback, bool valid) {
    if (!valid) {
      value = fallback;
      ok = false;
    }
  };
  check(c.tick_hz, defaults.tick_hz, valid_rate(c.tick_hz));
  check(c.max_extrapolation_s, defaults.max_extrapolation_s,
        std::isfinite(c.max_extrapolation_s) && c.max_extrapolation_s >= 0.0 && c.max_extrapolation_s <= 10.0);
  check(c.correction_time_constant_s, defaults.correction_time_constant_s,
        std::isfinite(c.correction_time_constant_s) && c.correction_time_constant_s > 0.0 &&
            c.correction_time_constant_s <= 10.0);
  check(c.max_correction_m, defaults.max_correction_m,
        std::isfinite(c.max_correction_m) && c.max_correction_m > 0.0 && c.max_correction_m <= 1.0e6);
  check(c.max_interpolation_gap_s, defaults.max_interpolation_gap_s,
        std::isfinite(c.max_interpolation_gap_s) && c.max_interpolation_gap_s > 0.0 &&
            c.max_interpolation_gap_s <= 10.0);
  if (c.history < 2 || c.history > 256) {
    c.history = defaults.history;
    ok = false;
  }
  config_ = c;
  extrapolation_ticks_ = c.max_extrapolation_s * c.tick_hz;
  tau_ticks_ = c.correction_time_constant_s * c.tick_hz;
  gap_ticks_ = c.max_interpolation_gap_s * c.tick_hz;
  clear();
  return ok;
}

void SnapshotInterpolator::clear() {
  index_.clear();
  tracks_.clear();
  states_.clear();
  free_slots_.clear();
}

const SnapshotInterpolator::State& SnapshotInterpolator::state(uint32_t slot, uint32_t i) const {
  const Track& track = tracks_[slot];
  return states_[static_cast<size_t>(slot) * config_.history + (track.first + i) % config_.history];
}

int64_t SnapshotInterpolator::find(ObjectID id) const {
  const auto it = std::lower_bound(index_.begin(), index_.end(), id,
                                   [](const IndexEntry& e, ObjectID key) { return e.id < key; });
  if (it == index_.end() || it->id != id) return -1;
  return it - index_.begin();
}

Pose SnapshotInterpolator::extrapolate(const State& s, double t, PoseSource* source) const {
  const double ahead = t - static_cast<double>(s.tick);
  PoseSource how = PoseSource::Interpolated;
  double dt_ticks = 0.0;
  if (ahead > 0.0) {
    if (s.at_rest) {
      how = PoseSource::Held;
    } else if (ahead <= extrapolation_ticks_) {
      how = PoseSource::Extrapolated;
      dt_ticks = ahead;
    } else {
      how = PoseSource::Held;
      dt_ticks = extrapolation_ticks_;
    }
  }
  if (source) *source = how;
  if (dt_ticks == 0.0) return Pose{s.position, s.orientation};
  const double dt = dt_ticks / config_.tick_hz;
  return Pose{s.position + s.velocity * static_cast<float>(dt),
              normalize(rotation_over(s.angular_velocity, dt) * s.orientation)};
}

Pose SnapshotInterpolator::raw_pose(uint32_t slot, double t, PoseSource* source) const {
  const Track& track = tracks_[slot];
  const State& newest = state(slot, track.count - 1);
  if (t >= static_cast<double>(newest.tick)) return extrapolate(newest, t, source);
  const State& oldest = state(slot, 0);
  if (t <= static_cast<double>(oldest.tick)) {
    if (source) *source = t == static_cast<double>(oldest.tick) ? PoseSource::Interpolated : PoseSource::BeforeOldest;
    return Pose{oldest.position, oldest.orientation};
  }
  // The first state newer than t: oldest.tick < t < newest.tick, so it is in [1, count - 1].
  uint32_t lo = 1;
  uint32_t hi = track.count - 1;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(state(slot, mid).tick) > t) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const State& a = state(slot, lo - 1);
  const State& b = state(slot, lo);
  const double a_tick = static_cast<double>(a.tick);
  const double b_tick = static_cast<double>(b.tick);
  Pose from{a.position, a.orientation};
  double from_tick = a_tick;
  if (b_tick - a_tick > gap_ticks_) {
    // A long gap (deferred or asleep): a's motion continues until gap_ticks_ before b, then
    // blends into b over the last gap_ticks_.
    from_tick = b_tick - gap_ticks_;
    if (t <= from_tick) return extrapolate(a, t, source);
    from = extrapolate(a, from_tick, nullptr);
  }
  if (source) *source = PoseSource::Interpolated;
  const float u = static_cast<float>((t - from_tick) / (b_tick - from_tick));
  return Pose{lerp(from.position, b.position, u), slerp(from.orientation, b.orientation, u)};
}

Pose SnapshotInterpolator::shown_pose(uint32_t slot, double t, PoseSource* source) const {
  return corrected(slot, raw_pose(slot, t, source), t);
}

Pose SnapshotInterpolator::corrected(uint32_t slot, Pose pose, double t) const {
  const Correction& c = tracks_[slot].correction;
  if (!c.active) return pose;
  // Render time before the correction began (the render clock stepped back): full offset.
  const double factor = std::exp(-std::max(0.0, t - c.start_tick) / tau_ticks_);
  if (factor < kNegligibleFactor) return pose;
  const float f = static_cast<float>(factor);
  pose.position += c.position * f;
  pose.orientation = normalize(slerp(Quat{}, c.rotation, f) * pose.orientation);
  return pose;
}

void SnapshotInterpolator::add(uint64_t tick, std::optional<double> shown_tick,
                               std::span<const InterpolationSample> objects) {
  for (const InterpolationSample& object : objects) add_state(tick, shown_tick, object);
}

bool SnapshotInterpolator::add_state(uint64_t tick, std::optional<double> shown_tick,
                                     const InterpolationSample& sample) {
  if (!is_finite(sample.position) || !is_finite(sample.orientation) || !is_finite(sample.velocity) ||
      !is_finite(sample.angular_velocity) || !(dot(sample.orientation, sample.orientation) > 1.0e-12f)) {
    ++stats_.states_rejected;
    return false;
  }
  const State s{tick, sample.position, normalize(sample.orientation), sample.velocity, sample.angular_velocity,
                sample.at_rest};
  const uint32_t history = config_.history;

  const int64_t at = find(sample.id);
  if (at < 0) {
    uint32_t slot = 0;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(tracks_.size());
      tracks_.emplace_back();
      states_.resize(states_.size() + history);
    }
    tracks_[slot] = Track{0, 1, Correction{}};
    states_[static_cast<size_t>(slot) * history] = s;
    const auto pos = std::lower_bound(index_.begin(), index_.end(), sample.id,
                                      [](const IndexEntry& e, ObjectID key) { return e.id < key; });
    index_.insert(pos, IndexEntry{sample.id, slot});
    ++stats_.states_added;
    return true;
  }

  const uint32_t slot = index_[static_cast<size_t>(at)].slot;
  Track& track = tracks_[slot];
  if (tick <= state(slot, track.count - 1).tick) {
    ++stats_.states_ignored;
    return false;
  }
  const bool correct = shown_tick.has_value() && std::isfinite(*shown_tick);
  Pose raw_before;
  Pose before;
  if (correct) {
    raw_before = raw_pose(slot, *shown_tick, nullptr);
    before = corrected(slot, raw_before, *shown_tick);
  }

  const size_t base = static_cast<size_t>(slot) * history;
  if (track.count < history) {
    states_[base + (track.first + track.count) % history] = s;
    ++track.count;
  } else {
    states_[base + track.first] = s;
    track.first = (track.first + 1) % history;
  }
  ++stats_.states_added;

  if (correct) {
    // The new state may change the pose at the shown tick (it was extrapolated or held there);
    // the difference is carried as an offset that decays from the shown tick on, so the shown
    // pose is continuous. Memoryless: an older correction still decaying is folded in.
    const Pose after = raw_pose(slot, *shown_tick, nullptr);
    const Vec3 offset = before.position - after.position;
    Quat rotation = normalize(before.orientation * conjugate(after.orientation));
    if (rotation.w < 0.0f) rotation = Quat{-rotation.x, -rotation.y, -rotation.z, -rotation.w};
    const float distance = length(offset);
    const float angle = rotation_angle(rotation);
    if (distance > config_.max_correction_m) {
      track.correction = Correction{};
      ++stats_.snaps;
    } else {
      track.correction = Correction{offset, rotation, *shown_tick, distance > 0.0f || angle > 0.0f};
      // Count only corrections this state caused, not the refolding of one still decaying.
      const float moved = length(after.position - raw_before.position);
      const float turned = rotation_angle(after.orientation * conjugate(raw_before.orientation));
      if (moved > kCountedCorrection || turned > kCountedCorrection) ++stats_.corrections;
    }
  }
  return true;
}

std::optional<Pose> SnapshotInterpolator::pose_at(ObjectID id, double render_tick, PoseSource* source) const {
  if (!std::isfinite(render_tick)) return std::nullopt;
  const int64_t at = find(id);
  if (at < 0) return std::nullopt;
  return shown_pose(index_[static_cast<size_t>(at)].slot, render_tick, source);
}

bool SnapshotInterpolator::remove(ObjectID id) {
  const int64_t at = find(id);
  if (at < 0) return false;
  free_slots_.push_back(index_[static_cast<size_t>(at)].slot);
  index_.erase(index_.begin() + at);
  return true;
}

bool SnapshotInterpolator::contains(ObjectID id) const { return find(id) >= 0; }

std::optional<uint64_t> SnapshotInterpolator::newest_tick(ObjectID id) const {
  const int64_t at = find(id);
  if (at < 0) return std::nullopt;
  const uint32_t slot = index_[static_cast<size_t>(at)].slot;
  return state(slot, tracks_[slot].count - 1).tick;
}

}  // namespace impulse
