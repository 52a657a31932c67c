#include "server/app/playback_driver.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "shared/wire/codec.h"

namespace impulse::server {

bool PlaybackDriver::may_control(uint32_t client_id, bool token_bound) const {
  if (options_.anyone_controls) return true;
  // An anonymous session's id is the server's own numbering: it proves nothing.
  return token_bound &&
         std::find(options_.controllers.begin(), options_.controllers.end(), client_id) != options_.controllers.end();
}

std::unique_ptr<PlaybackDriver> PlaybackDriver::open(physics::World& world, const ReplayOptions& options,
                                                     std::string* error) {
  auto fail = [&](std::string text) -> std::unique_ptr<PlaybackDriver> {
    if (error) *error = std::move(text);
    return nullptr;
  };
  if (!(options.speed >= wire::kMinReplaySpeed && options.speed <= wire::kMaxReplaySpeed)) {
    return fail(fmt::format("--speed must be in [1/16, 16] (got {})", options.speed));
  }
  std::unique_ptr<PlaybackDriver> d(new PlaybackDriver(world));
  if (!d->playback_.open(options.file, error)) return nullptr;
  d->playback_.set_check_hashes(options.check_hashes);
  d->tick_hz_ = static_cast<int>(d->playback_.tick_hz());  // 1..1000, checked by open()
  d->snapshot_hz_ = options.snapshot_hz;
  if (d->snapshot_hz_ == 0) d->snapshot_hz_ = std::clamp(static_cast<int>(d->playback_.snapshot_hz()), 1, d->tick_hz_);
  if (d->snapshot_hz_ < 1 || d->snapshot_hz_ > d->tick_hz_) {
    return fail(fmt::format("--snapshot-hz must be in 1..{} (the recording's tick rate; got {})", d->tick_hz_,
                            options.snapshot_hz));
  }
  if (options.from_tick) {
    std::string seek_error;
    if (!d->playback_.seek(*options.from_tick, &seek_error)) return fail(fmt::format("--from: {}", seek_error));
  }
  d->options_ = options;
  if (options.anyone_controls) {
    spdlog::info("replay: every spectator may pause, seek and change the speed (--anyone-controls)");
  } else if (!options.controllers.empty()) {
    spdlog::info("replay: the timeline is controlled by client id(s) {} (--controller)", fmt::join(options.controllers, ", "));
  } else {
    spdlog::info("replay: nobody controls the timeline: it plays as started (--controller or --anyone-controls to allow it)");
  }
  d->speed_ = options.speed;
  d->step_ = std::chrono::nanoseconds(1'000'000'000LL / d->tick_hz_);
  return d;
}

void PlaybackDriver::start(TimePoint now) {
  seek_tokens_at_ = now;
  last_ = now;
  last_snapshot_ = now;
  last_status_ = now;
}

int PlaybackDriver::take_due(TimePoint now, StepClock& clock, int max_steps_per_frame) {
  const std::chrono::nanoseconds wall = now > last_ ? now - last_ : std::chrono::nanoseconds{0};
  if (now > last_) last_ = now;
  clock.last = last_;  // answers and shutdown messages are stamped with it
  if (paused_) return 0;
  // Recorded time advances at `speed` times the wall clock (exact in integer ns at speed 1).
  accumulator_ += speed_ == 1.0 ? wall
                                : std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(wall.count()) * speed_));
  const int64_t due = accumulator_ / step_;
  accumulator_ -= step_ * due;
  // A stall (or a speed the CPU cannot keep) plays slower instead of spiralling: the cap keeps
  // every recorded tick (none is skipped) and drops the wall time beyond it.
  const int64_t cap = static_cast<int64_t>(max_steps_per_frame) * 16;
  if (due > cap) {
    clock.dropped_steps += static_cast<uint64_t>(due - cap);
    return static_cast<int>(cap);
  }
  return static_cast<int>(due);
}

std::chrono::nanoseconds PlaybackDriver::time_to_next_tick(const StepClock& clock) const {
  if (paused_) return clock.step;  // sessions still expire, paused snapshots still go out
  // Wall time until the accumulator holds one more recorded tick, rounded up.
  const double wall_ns = static_cast<double>((step_ - accumulator_).count()) / speed_;
  const auto next = std::chrono::nanoseconds(static_cast<int64_t>(std::ceil(wall_ns)));
  return std::clamp<std::chrono::nanoseconds>(next, std::chrono::nanoseconds{0}, clock.step);
}

PlaybackDriver::Played PlaybackDriver::play_one() {
  if (paused_) return Played::Stopped;
  const record::AdvanceStatus status = playback_.advance();
  if (status == record::AdvanceStatus::Error) {
    paused_ = true;
    spdlog::error("replay: paused at tick {}: {}", playback_.tick(), playback_.error());
    return Played::Stopped;
  }
  if (status == record::AdvanceStatus::End) {
    end_of_recording();
    return Played::Stopped;
  }
  // Pause right on the last tick, not one wake-up later.
  if (playback_.tick() >= playback_.last_tick()) end_of_recording();
  return Played::Tick;
}

bool PlaybackDriver::seek(uint64_t tick, std::string* error) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t from = playback_.tick();
  const uint64_t keyframe = playback_.keyframe_at_or_before(tick);
  const bool ok = playback_.seek(tick, error);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (ok) {
    spdlog::info("replay: seek from tick {} to tick {} ({} from the keyframe of tick {}, {:.1f} ms)", from, tick,
                 tick >= from && keyframe <= from ? "played on" : "re-simulated", keyframe, ms);
  } else {
    spdlog::error("replay: seek to tick {} failed: {}; now at tick {}", tick, error ? *error : std::string{},
                  playback_.tick());
  }
  // The world jumped: spectators get the new state at once, and the clock starts afresh.
  accumulator_ = std::chrono::nanoseconds{0};
  snapshot_now_ = true;
  return ok;
}

void PlaybackDriver::end_of_recording() {
  if (options_.loop) {
    spdlog::info("replay: end of the recording at tick {}: looping to tick {}", playback_.tick(),
                 playback_.first_tick());
    std::string error;
    if (!seek(playback_.first_tick(), &error)) paused_ = true;
    return;
  }
  paused_ = true;
  spdlog::info("replay: end of the recording at tick {}: paused (a controller may seek, or resume to play it from "
               "the start)",
               playback_.tick());
}

wire::ResultCode PlaybackDriver::control(wire::ReplayAction action, uint64_t tick, float speed, const std::string& who,
                                         std::string* message, TimePoint now) {
  switch (action) {
    case wire::ReplayAction::Pause:
      paused_ = true;
      spdlog::info("replay: paused at tick {} by {}", playback_.tick(), who);
      return wire::ResultCode::Ok;
    case wire::ReplayAction::Resume:
      if (playback_.tick() >= playback_.last_tick()) {
        std::string error;
        if (!seek(playback_.first_tick(), &error)) {
          *message = "resume: cannot restart the recording: " + error;
          return wire::ResultCode::InvalidArgument;
        }
      }
      if (paused_) accumulator_ = std::chrono::nanoseconds{0};
      paused_ = false;
      spdlog::info("replay: resumed at tick {} by {}", playback_.tick(), who);
      return wire::ResultCode::Ok;
    case wire::ReplayAction::SetSpeed:
      speed_ = speed;  // range-checked by check_request
      spdlog::info("replay: speed {}x at tick {} by {}", speed_, playback_.tick(), who);
      return wire::ResultCode::Ok;
    case wire::ReplayAction::Seek: {
      if (tick < playback_.first_tick() || tick > playback_.last_tick()) {
        *message = fmt::format("seek failed: tick {} is outside the recording's ticks {}..{}", tick,
                               playback_.first_tick(), playback_.last_tick());
        return wire::ResultCode::InvalidArgument;
      }
      if (pending_seek_) ++coalesced_seeks_;
      pending_seek_ = tick;
      pending_seek_by_ = who;
      seek_step(now);  // starts at once when the start rate allows; a short seek also ends here
      return wire::ResultCode::Ok;
    }
  }
  *message = "action: unknown replay action";
  return wire::ResultCode::InvalidArgument;
}

bool PlaybackDriver::snapshot_due(TimePoint now, bool crossed_snapshot_tick) const {
  const auto period = std::chrono::nanoseconds(1'000'000'000LL / snapshot_hz_);
  const auto since = now - last_snapshot_;
  // A quarter period of slack while paused (or seeking, when no tick is played) absorbs wake-up
  // jitter.
  return snapshot_now_ || (crossed_snapshot_tick && (speed_ <= 1.0 || since >= period / 2)) ||
         ((paused_ || seeking()) && since >= period - period / 4);
}

bool PlaybackDriver::seek_step(TimePoint now) {
  using SteadyClock = std::chrono::steady_clock;
  if (pending_seek_) {
    const double elapsed = now > seek_tokens_at_ ? std::chrono::duration<double>(now - seek_tokens_at_).count() : 0.0;
    seek_tokens_ = std::min(kSeekStartBurst, seek_tokens_ + elapsed * kSeekStartsPerSecond);
    if (now > seek_tokens_at_) seek_tokens_at_ = now;
    if (seek_tokens_ >= 1.0) {
      seek_tokens_ -= 1.0;
      const uint64_t tick = *pending_seek_;
      pending_seek_.reset();
      seek_from_ = playback_.tick();
      seek_started_ = SteadyClock::now();
      std::string error;
      if (playback_.seek_start(tick, &error)) {
        seek_target_ = tick;
        spdlog::info("replay: seek from tick {} to tick {} by {} (from tick {})", seek_from_, tick, pending_seek_by_,
                     playback_.tick());
      } else {
        seek_target_.reset();
        spdlog::error("replay: seek to tick {} by {} failed: {}; now at tick {}", tick, pending_seek_by_, error,
                      playback_.tick());
        accumulator_ = std::chrono::nanoseconds{0};
        snapshot_now_ = true;
      }
    }
  }
  if (seek_target_) {
    // A quarter of a recorded tick period of work per wake-up, at least one tick: the rest of the
    // wake-up (events, snapshots) keeps its time.
    const auto budget = step_ / 4;
    const auto t0 = SteadyClock::now();
    while (playback_.tick() < *seek_target_) {
      if (playback_.advance() != record::AdvanceStatus::Ticked) {
        spdlog::error("replay: seek to tick {} stopped at tick {}: {}", *seek_target_, playback_.tick(),
                      playback_.error());
        seek_target_.reset();
        break;
      }
      if (SteadyClock::now() - t0 >= budget) break;
    }
    if (seek_target_ && playback_.tick() >= *seek_target_) {
      spdlog::info("replay: at tick {} after {:.1f} ms (seek from tick {})", playback_.tick(),
                   std::chrono::duration<double, std::milli>(SteadyClock::now() - seek_started_).count(), seek_from_);
      seek_target_.reset();
    }
    if (!seek_target_) {
      // The world jumped: spectators get the new state at once, and the clock starts afresh.
      accumulator_ = std::chrono::nanoseconds{0};
      snapshot_now_ = true;
    }
  }
  return seeking();
}

void PlaybackDriver::snapshot_written(TimePoint now) {
  last_snapshot_ = now;
  snapshot_now_ = false;
}

void PlaybackDriver::note_played(TimePoint now, int ticks, uint32_t spectators) {
  played_ticks_ += static_cast<uint64_t>(ticks);
  if (now - last_status_ < std::chrono::duration<double>(options_.status_interval_s)) return;
  const double seconds = std::chrono::duration<double>(now - last_status_).count();
  std::string hashes;
  if (playback_.mismatches() > 0) {
    hashes = fmt::format("; {} ticks differ from the recording, first: {}", playback_.mismatches(),
                         playback_.first_mismatch());
  }
  spdlog::info("replay: tick {} (recording {}..{}), speed {}x, {}, {} spectators, {} ticks played in {:.1f} s{}",
               playback_.tick(), playback_.first_tick(), playback_.last_tick(), speed_, paused_ ? "paused" : "playing",
               spectators, played_ticks_, seconds, hashes);
  played_ticks_ = 0;
  last_status_ = now;
}

}  // namespace impulse::server
