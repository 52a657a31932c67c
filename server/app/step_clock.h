// Fixed-timestep accumulator ("Fix Your Timestep!", Glenn Fiedler, Gaffer on Games, 2004), capped
// at max_steps per wake-up like Edyn's max_steps_per_update. Integer nanoseconds: exact and
// deterministic for a given sequence of `now` values. Time is passed in, never read here.
#pragma once

#include <chrono>
#include <cstdint>

namespace impulse::server {

struct StepClock {
  std::chrono::steady_clock::time_point last{};  ///< `now` of the previous call
  std::chrono::nanoseconds step{};               ///< fixed dt
  std::chrono::nanoseconds accumulator{0};       ///< unsimulated time, in [0, step) between calls
  int max_steps = 1;                             ///< steps at most per call, >= 1
  uint64_t dropped_steps = 0;                    ///< whole steps discarded by the cap, ever
};

/// A clock for `tick_hz` steps per second (>= 1) starting at `start`.
inline StepClock make_step_clock(int tick_hz, int max_steps, std::chrono::steady_clock::time_point start) {
  StepClock c;
  c.last = start;
  c.step = std::chrono::nanoseconds(1'000'000'000LL / (tick_hz < 1 ? 1 : tick_hz));
  c.max_steps = max_steps < 1 ? 1 : max_steps;
  return c;
}

/// Adds the time since the last call (a `now` earlier than the last one adds nothing) and returns
/// the steps now due, at most max_steps. Whole steps beyond the cap are dropped and counted in
/// dropped_steps, so a stall (debugger, swapped-out VM) never triggers a spiral of catch-up steps.
inline int take_due_steps(StepClock& c, std::chrono::steady_clock::time_point now) {
  if (now > c.last) {
    c.accumulator += now - c.last;
    c.last = now;
  }
  const int64_t due = c.accumulator / c.step;
  c.accumulator -= c.step * due;
  if (due > c.max_steps) {
    c.dropped_steps += static_cast<uint64_t>(due - c.max_steps);
    return c.max_steps;
  }
  return static_cast<int>(due);
}

/// Time until the next step is due.
inline std::chrono::nanoseconds time_to_next_step(const StepClock& c) { return c.step - c.accumulator; }

/// True when a snapshot is due after the step that produced `tick` (>= 1): snapshots are spread
/// evenly over ticks at snapshot_hz / tick_hz (every 2nd tick for 30 / 60 Hz).
inline bool is_snapshot_tick(uint64_t tick, int tick_hz, int snapshot_hz) {
  if (tick == 0 || tick_hz < 1) return false;
  const auto hz = static_cast<uint64_t>(tick_hz);
  const auto snap = static_cast<uint64_t>(snapshot_hz);
  return (tick * snap) / hz != ((tick - 1) * snap) / hz;
}

}  // namespace impulse::server
