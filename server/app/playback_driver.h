// PlaybackDriver: what makes a ServerCore serve a recording (impulse-replay serve) instead of
// simulating: the playback clock (recorded ticks at the speed, none while paused), the shared
// timeline's controls (pause, resume, speed, seek, loop) and the status line. It is the playback
// counterpart of the live StepClock and request queue: ServerCore asks either for the ticks due
// at `now` and advances the world by them; events, raycasts, snapshots and sessions are then the
// same code for both modes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/app/server.h"
#include "server/app/step_clock.h"
#include "server/physics/world.h"
#include "server/record/playback.h"

namespace impulse::server {

class PlaybackDriver {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  /// Opens `options.file` into `world` (its initial state; `options.from_tick` seeks there) and
  /// checks the options. On failure returns null with *error saying what to fix.
  static std::unique_ptr<PlaybackDriver> open(physics::World& world, const ReplayOptions& options, std::string* error);

  int tick_hz() const { return tick_hz_; }          ///< the recording's physics rate [Hz]
  int snapshot_hz() const { return snapshot_hz_; }  ///< snapshots per second to spectators
  const record::Playback& playback() const { return playback_; }
  bool paused() const { return paused_; }
  double speed() const { return speed_; }  ///< times the recorded tick rate

  /// Starts the playback clock (and the status interval) at `now`.
  void start(TimePoint now);
  /// Recorded ticks due at `now` (speed applied; 0 while paused), at most 16 wake-ups' worth:
  /// beyond that the wall time is dropped (counted in clock.dropped_steps), never a tick.
  /// clock.last becomes `now`, so answers are stamped with it.
  int take_due(TimePoint now, StepClock& clock, int max_steps_per_frame);
  /// Wall time until the next recorded tick is due (one tick period while paused).
  std::chrono::nanoseconds time_to_next_tick(const StepClock& clock) const;

  /// What playing one tick did.
  enum class Played : uint8_t {
    Tick,     ///< the world advanced one recorded tick (its requests, then a step)
    Stopped,  ///< nothing played: the end (paused there, or looped) or a bad frame (paused, logged)
  };
  /// Plays the next recorded tick; at the last tick pauses or, with --loop, seeks to the first.
  Played play_one();

  /// Whether the session of `client_id` may control the shared timeline (ReplayOptions::
  /// controllers, anyone_controls); `token_bound`: its id was proven by a connect token.
  bool may_control(uint32_t client_id, bool token_bound) const;

  /// Applies a spectator's ReplayControl (already range-checked) at `now`: `who` names it in the
  /// log. Returns the result code and, on failure, sets *message. A Seek is answered Ok once it
  /// is queued; see seek_step() for when the world gets there.
  wire::ResultCode control(wire::ReplayAction action, uint64_t tick, float speed, const std::string& who,
                           std::string* message, TimePoint now);

  /// Spectators' seeks never block the tick: a Seek replaces any seek not yet started (the
  /// latest wins), seeks start at most kSeekStartsPerSecond (burst kSeekStartBurst; a start
  /// restores one keyframe), and a started seek re-simulates from its keyframe to its target at
  /// most a quarter of a recorded tick period of work per wake-up (at least one tick), the
  /// spectators seeing the fast-forward. Call once per wake-up; returns true while a seek is
  /// pending or running (no recorded tick is played then).
  bool seek_step(TimePoint now);
  bool seeking() const { return pending_seek_.has_value() || seek_target_.has_value(); }
  /// Seeks that replaced a pending one before it started, since open().
  uint64_t coalesced_seeks() const { return coalesced_seeks_; }
  static constexpr double kSeekStartsPerSecond = 5;
  static constexpr double kSeekStartBurst = 5;

  /// Whether spectators get a snapshot at this wake-up: at the recording's snapshot ticks
  /// (`crossed_snapshot_tick`; at most two per snapshot period of wall time above speed 1), once
  /// per period while paused (late joiners and acks), and at once after a seek.
  bool snapshot_due(TimePoint now, bool crossed_snapshot_tick) const;
  void snapshot_written(TimePoint now);

  /// Logs the status line when its interval has passed; `ticks` were played since the last call.
  void note_played(TimePoint now, int ticks, uint32_t spectators);

 private:
  explicit PlaybackDriver(physics::World& world) : playback_(world) {}
  bool seek(uint64_t tick, std::string* error);
  void end_of_recording();

  record::Playback playback_;
  ReplayOptions options_;
  int tick_hz_ = 60;
  int snapshot_hz_ = 30;
  bool paused_ = false;
  double speed_ = 1;
  std::chrono::nanoseconds step_{};         // one recorded tick
  std::chrono::nanoseconds accumulator_{0};  // recorded time not yet played
  TimePoint last_{};                        // `now` of the previous take_due
  TimePoint last_snapshot_{};
  TimePoint last_status_{};
  bool snapshot_now_ = false;  // the world jumped (seek): send at once
  uint64_t played_ticks_ = 0;  // since the last status line
  // Spectators' seeks (seek_step): the one not yet started, the one running, the start bucket.
  std::optional<uint64_t> pending_seek_;
  std::string pending_seek_by_;
  std::optional<uint64_t> seek_target_;
  uint64_t seek_from_ = 0;
  std::chrono::steady_clock::time_point seek_started_{};
  double seek_tokens_ = kSeekStartBurst;
  TimePoint seek_tokens_at_{};
  uint64_t coalesced_seeks_ = 0;
};

}  // namespace impulse::server
