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

  /// Applies a spectator's ReplayControl (already range-checked): `who` names it in the log.
  /// Returns the result code and, on failure, sets *message.
  wire::ResultCode control(wire::ReplayAction action, uint64_t tick, float speed, const std::string& who,
                           std::string* message);

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
};

}  // namespace impulse::server
