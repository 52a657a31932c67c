// Lag compensation's memory: the poses of every dynamic and kinematic body at each of the last N
// ticks, so that a query can be answered against what a client saw (its render tick, which lags
// the server by its interpolation delay plus half its round trip). Source engine lag compensation
// (Valve Developer Community, "Lag Compensation": the server rewinds to the shooter's view time,
// at most sv_maxunlag, 1 s) keeps hitboxes the same way; Impulse keeps whole poses, 250 ms by default.
#pragma once

#include <cstdint>
#include <vector>

#include "server/physics/world.h"

namespace impulse::server {

class PoseHistory {
 public:
  /// Keeps the last `ticks` ticks (0: none; every lookup is then Off).
  explicit PoseHistory(uint32_t ticks = 0);

  /// Notes the world's movable poses at world.tick(): call after every step. Reuses the oldest
  /// tick's buffer. O(slots).
  void record(const physics::World& world);
  /// Forgets every tick (a replay seek moved the world).
  void clear();

  enum class Lookup : uint8_t { Ok, Off, TooOld, Future };
  /// The poses at `tick` + `fraction` into *out (World::raycast_closest_at's input): those of
  /// `tick`, moved towards tick + 1 by fraction in [0, 1) when tick + 1 is kept (positions lerped,
  /// orientations normalised-lerped on the short arc; a body missing at tick + 1 stays at tick).
  /// TooOld: tick is before the oldest kept tick; Future: after the newest.
  Lookup poses_at(uint64_t tick, float fraction, std::vector<physics::IndexedPose>* out) const;

  uint32_t capacity() const { return static_cast<uint32_t>(ring_.size()); }
  /// The oldest and the newest tick kept (0 when none).
  uint64_t oldest_tick() const;
  uint64_t newest_tick() const { return newest_; }
  /// Bytes held by the kept poses: sizeof(IndexedPose) (32) per slot of the world per tick.
  size_t memory_bytes() const;

 private:
  struct Tick {
    uint64_t tick = 0;  ///< 0: unused
    std::vector<physics::IndexedPose> poses;
  };
  const Tick* find(uint64_t tick) const;

  std::vector<Tick> ring_;
  uint64_t newest_ = 0;
};

}  // namespace impulse::server
