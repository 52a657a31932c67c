// Snapshot interpolation buffer: Glenn Fiedler, "Snapshot Interpolation" (gafferongames.com,
// 2014: render a fixed delay behind the newest snapshot, lerp between the two around the render
// time, extrapolate briefly on loss), slerp from Ken Shoemake, "Animating Rotation with
// Quaternion Curves" (SIGGRAPH 1985), and Edyn's decaying "discontinuity" offset
// (https://github.com/xissburg/edyn, its client-side extrapolation) so that late data corrects the shown pose without a snap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse {

/// Snapshot intervals in the default interpolation delay (plus the measured jitter: enough to
/// ride out one lost snapshot; docs/PROTOCOL.md, "Client side: clock sync and interpolation").
inline constexpr double kDefaultDelaySnapshotIntervals = 2.0;

/// The default interpolation delay [ticks]: kDefaultDelaySnapshotIntervals snapshot intervals
/// plus the measured jitter, behind a typical snapshot arrival:
///   2 * tick_hz / snapshot_hz + jitter_s * tick_hz.
/// ClockSync::render_tick applies the same delay, with the jitter part inside its slewed playout
/// lag (so pass it buffer_ticks = default_delay_ticks(tick_hz, snapshot_hz, 0)).
/// @return 0 when a rate is not finite and positive or jitter_s is not finite and >= 0.
double default_delay_ticks(double tick_hz, double snapshot_hz, double jitter_s);

/// Spherical linear interpolation between unit quaternions a (u = 0) and b (u = 1) along the
/// shorter arc (b is negated when dot(a, b) < 0, since q and -q are the same rotation): Ken
/// Shoemake, "Animating Rotation with Quaternion Curves", SIGGRAPH 1985. Constant angular speed:
/// for a rotation about a fixed axis the result is exact. The arc angle is computed as
/// 2 atan2(|b - a|, |b + a|), accurate for nearly equal inputs (where it falls back to a
/// normalised lerp). Uses library trigonometry (std::sin, std::atan2): client-side presentation
/// only, never part of the simulation. The result is normalised.
Quat slerp(Quat a, Quat b, float u);

/// A rendered pose. World frame.
struct Pose {
  Vec3 position;    ///< centre of mass [m]
  Quat orientation; ///< unit, local to world
};

/// How pose_at derived a pose.
enum class PoseSource : uint8_t {
  Interpolated,  ///< between two received states (or exactly at one)
  Extrapolated,  ///< past the newest state, moved by its velocities for < max_extrapolation_s
  Held,          ///< past the newest state by more than max_extrapolation_s, or at rest there
  BeforeOldest,  ///< before the oldest state still held: that state's pose
};

/// One object's state in one snapshot, dequantised. World frame, SI units.
struct InterpolationSample {
  ObjectID id;
  Vec3 position;          ///< centre of mass [m]
  Quat orientation;       ///< local to world; normalised on add (a zero quaternion is rejected)
  Vec3 velocity;          ///< [m/s]
  Vec3 angular_velocity;  ///< [rad/s], world frame
  bool at_rest = false;   ///< sleeping on the server: never extrapolated
};

/// Tuning of a SnapshotInterpolator. Invalid fields are replaced by their defaults (see
/// SnapshotInterpolator::reset).
struct InterpolationConfig {
  /// The server's physics ticks per second (ConnectAccepted), in (0, 10000]: converts the times
  /// below into ticks.
  double tick_hz = 60.0;
  /// Longest extrapolation past the newest state [s], in [0, 10]. 250 ms bridges a few lost
  /// snapshots at 20 Hz; beyond it constant-velocity guesses drift too far (a body falling at
  /// 10 m/s is off by 0.31 m after 250 ms if it landed at the start), so the pose holds.
  double max_extrapolation_s = 0.25;
  /// Time constant of the correction that blends a shown pose into newly arrived data [s], in
  /// (0, 10]: the remaining offset is e^(-dt/tau) of the initial one after render time dt (37 %
  /// after 100 ms, 5 % after 300 ms). Short enough to converge within a few snapshot intervals,
  /// long enough that a 10 cm correction moves at most 1 m/s extra.
  double correction_time_constant_s = 0.1;
  /// Corrections farther than this [m], in (0, 1e6], are applied at once (a teleport, or an
  /// object that reappeared far away): blending them would fly the object across the scene.
  double max_correction_m = 10.0;
  /// Two states further apart than this [s], in (0, 10], are not lerped across the whole gap
  /// (an object deferred by the server's priority accumulator, or asleep): the older one is
  /// extrapolated (capped as above) until this long before the newer one, then blended into it.
  /// For motion at constant velocity both give the same pose.
  double max_interpolation_gap_s = 0.25;
  /// States kept per object, in [2, 256]. 32 is 1.6 s at 20 snapshots/s, 0.53 s at 60: several
  /// times the interpolation delay, so render ticks stay inside the history.
  uint32_t history = 32;
};

/// The client's interpolation buffer: per object, the last `history` received states sorted by
/// tick; poses at any fractional render tick by lerp/slerp between states, capped extrapolation
/// past the newest, and an exponentially decaying correction that keeps the shown pose continuous
/// when new data disagrees with it. Deterministic for the same inputs. Single-threaded.
///
/// Memory: about 64 bytes x history per object (2 KB at the default 32), in one pool reused
/// after remove(); an object seen for the first time grows the pool unless a removed object's
/// slot is free. Lookups are O(log n) (a sorted id index).
class SnapshotInterpolator {
 public:
  /// Counters since construction (clear() and reset() keep them).
  struct Stats {
    uint64_t states_added = 0;
    uint64_t states_ignored = 0;   ///< tick not newer than the object's newest state (stale/duplicate)
    uint64_t states_rejected = 0;  ///< non-finite value or zero orientation
    uint64_t corrections = 0;      ///< new data moved the pose at shown_tick (> 1e-6 m or rad)
    uint64_t snaps = 0;            ///< corrections over max_correction_m, applied at once
  };

  explicit SnapshotInterpolator(const InterpolationConfig& config = {});

  /// Forgets every object and takes a new config (connect: the server's tick_hz).
  /// @return false when a field was out of range and its default was used instead.
  bool reset(const InterpolationConfig& config);
  /// Forgets every object (keeps the config and the stats).
  void clear();

  /// Adds the states of one snapshot of server tick `tick`. Each object's state is handled as
  /// by add_state. Pass only the objects this snapshot carried (entered or updated); an object
  /// the server deferred keeps its last state, which is still valid.
  /// @param shown_tick  the render tick on screen when the snapshot arrived
  ///                    (ClockSync::render_tick at its arrival time), or nullopt when nothing is
  ///                    rendered yet: the pose shown there is kept continuous by a correction.
  void add(uint64_t tick, std::optional<double> shown_tick, std::span<const InterpolationSample> objects);
  /// Adds one object's state at server tick `tick`. Ignored (false, Stats::states_ignored) when
  /// not newer than the object's newest state; rejected (false, Stats::states_rejected) when a
  /// value is not finite or the orientation is zero. When the new state changes the pose at
  /// `shown_tick` (it arrived while that pose was extrapolated or held), the difference becomes
  /// a correction that decays with correction_time_constant_s of render time from shown_tick.
  bool add_state(uint64_t tick, std::optional<double> shown_tick, const InterpolationSample& state);

  /// The object's pose at server tick `render_tick` (fractional; from ClockSync::render_tick),
  /// or nullopt when the object is unknown or render_tick is not finite. Continuous in
  /// render_tick, and across add_state at its shown_tick (except a snap beyond
  /// max_correction_m). Const: any number of
  /// objects and times may be queried per frame.
  /// @param source  if not null, receives how the pose was derived
  std::optional<Pose> pose_at(ObjectID id, double render_tick, PoseSource* source = nullptr) const;

  /// Forgets one object (it left the area of interest or was destroyed). False if unknown.
  bool remove(ObjectID id);

  bool contains(ObjectID id) const;
  size_t size() const { return index_.size(); }
  /// Tick of the object's newest state; nullopt when unknown.
  std::optional<uint64_t> newest_tick(ObjectID id) const;
  const InterpolationConfig& config() const { return config_; }
  const Stats& stats() const { return stats_; }

 private:
  struct State {
    uint64_t tick = 0;
    Vec3 position;
    Quat orientation;
    Vec3 velocity;
    Vec3 angular_velocity;
    bool at_rest = false;
  };
  /// Offset added to the raw pose, decaying as e^(-(t - start_tick) / tau).
  struct Correction {
    Vec3 position;      ///< [m]
    Quat rotation;      ///< world frame, composed onto the raw orientation: shown = rotation * raw
    double start_tick = 0;
    bool active = false;
  };
  struct Track {
    uint32_t first = 0;  // ring slot of the oldest state
    uint32_t count = 0;  // states held, <= history
    Correction correction;
  };
  struct IndexEntry {
    ObjectID id;
    uint32_t slot = 0;
  };

  const State& state(uint32_t slot, uint32_t i) const;  // i-th oldest state of a track
  Pose raw_pose(uint32_t slot, double t, PoseSource* source) const;
  Pose shown_pose(uint32_t slot, double t, PoseSource* source) const;
  Pose corrected(uint32_t slot, Pose raw, double t) const;  // raw plus the decaying correction
  Pose extrapolate(const State& s, double t, PoseSource* source) const;
  int64_t find(ObjectID id) const;  // position in index_, or -1

  InterpolationConfig config_;
  double extrapolation_ticks_ = 0;
  double tau_ticks_ = 0;
  double gap_ticks_ = 0;
  std::vector<IndexEntry> index_;  // sorted by id
  std::vector<Track> tracks_;      // by slot
  std::vector<State> states_;      // slot * history + ring position
  std::vector<uint32_t> free_slots_;
  Stats stats_;
};

}  // namespace impulse
