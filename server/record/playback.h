// Playback of a recording one tick at a time with random access: the recorded requests of each
// tick are re-applied through server::apply_to_world and the world is stepped (Box2D 3.2's
// recorded-call replay, checked by the per-step hash); seek restores the nearest keyframe at or
// before the target and re-simulates from there (Unreal's replay checkpoints, but bit-exact).
// Shared by impulse-replay verify/export (the per-tick apply function) and serve (ServerCore's
// playback mode).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/physics/world.h"
#include "server/record/format.h"
#include "server/record/reader.h"

namespace impulse::record {

// --- The replay's building blocks (also used by verify and export) -----------------------------

/// Opens `path` and reads its first frame, which must be a Header (then reader.frame() holds it).
/// Returns an empty string on success, else what is wrong, naming the file.
std::string open_recording(const std::string& path, RecordingReader& reader);

/// Checks the header (format version, tick_hz in 1..1000, a state that restores and hashes as
/// recorded) and restores its initial state into `world` (settings included). *dt = 1 / tick_hz
/// [s]. Returns an empty string on success, else the problem (the world is then unspecified).
std::string load_header(const Header& header, physics::World& world, float* dt);

/// Applies one Tick frame's requests in the recorded order through server::apply_to_world and
/// steps once by `dt` [s]. Returns an empty string when everything matched, else the first
/// difference: a tick gap, a request answered otherwise than recorded, or (with check_hash) an
/// awake_hash that differs from the recorded one. The world is stepped in every case except a
/// tick gap. `dampings` (optional, sorted by id) follows the creations and destructions;
/// *requests counts the requests applied.
std::string replay_tick(physics::World& world, const Tick& tick, float dt, bool check_hash,
                        std::vector<BodyDamping>* dampings, uint64_t* requests);

/// Follows one recorded request in `dampings` (sorted by id): an Ok CreateObject adds its body's
/// damping, an Ok DestroyObject removes it; anything else changes nothing.
void update_dampings(const Request& request, std::vector<BodyDamping>& dampings);

// --- Playback ----------------------------------------------------------------------------------

/// What Playback::advance() did.
enum class AdvanceStatus : uint8_t {
  Ticked,    ///< the world is one tick further (see mismatch() for a divergence)
  End,       ///< the world is at last_tick(): nothing to play
  Error,     ///< the file could not be read any more (error() says why); the world is unchanged
};

/// A recording opened for playback on a world it does not own. open() reads the whole file once
/// (frames verified, no simulation) to index its keyframes and find its last complete tick; a file
/// cut by a crash plays up to its last complete frame, a corrupt frame ends it early (reported by
/// problem()). Then advance() plays one tick and seek() jumps to any tick in
/// [first_tick(), last_tick()]. Memory: the header's state blob plus 24 bytes per keyframe. Never
/// throws or asserts on file data. Single-threaded.
class Playback {
 public:
  /// Binds to `world` (not owned; must outlive the playback). The world's state is replaced by
  /// open() and seek() and advanced by advance(); nothing else should change it.
  explicit Playback(physics::World& world) : world_(&world) {}

  /// Opens `path`, indexes it and restores the header's state into the world (tick =
  /// first_tick()). Returns false with *error (naming the file) when it cannot be opened, has no
  /// valid header, or its initial state does not restore.
  bool open(const std::string& path, std::string* error);

  /// Plays the next tick: applies its recorded requests and steps. With check_hashes() the
  /// awake_hash is compared with the recorded one; differences are counted (mismatches()) and
  /// the first is kept (first_mismatch()). At last_tick() returns End and changes nothing.
  AdvanceStatus advance();

  /// Puts the world at `tick` in [first_tick(), last_tick()]: from the current state when `tick`
  /// is ahead and no keyframe lies in between, else from the last keyframe at or before `tick`
  /// (or the header's state) re-simulated to it. The result equals playing from the start
  /// (bit-identical world_hash). Cost: up to one keyframe interval of steps. Returns false with
  /// *error when `tick` is outside the range or the file fails; the world is then at a valid
  /// tick of the recording but not necessarily `tick`.
  bool seek(uint64_t tick, std::string* error);

  /// The first part of seek(): puts the world where re-simulating to `tick` starts (the current
  /// state when `tick` is ahead and no keyframe lies in between, else the last keyframe at or
  /// before it, or the header's state); the caller then calls advance() until tick() == `tick`,
  /// as many at a time as it likes. Cost: one keyframe restore at most. Returns false with *error
  /// as seek() does.
  bool seek_start(uint64_t tick, std::string* error);

  /// The tick of the last keyframe at or before `tick` (first_tick() when none): where a seek
  /// to `tick` from scratch starts re-simulating.
  uint64_t keyframe_at_or_before(uint64_t tick) const;

  /// Whether advance() computes awake_hash and compares it with the recorded one (default on;
  /// costs O(awake bodies + active contacts) per tick).
  void set_check_hashes(bool on) { check_hashes_ = on; }
  bool check_hashes() const { return check_hashes_; }

  const physics::World& world() const { return *world_; }
  uint64_t tick() const { return world_->tick(); }
  uint64_t first_tick() const { return first_tick_; }  ///< the header's tick (its initial state)
  uint64_t last_tick() const { return last_tick_; }    ///< the last complete Tick frame's tick
  uint32_t tick_hz() const { return tick_hz_; }        ///< recorded physics rate [Hz]
  uint32_t snapshot_hz() const { return snapshot_hz_; }  ///< recorded snapshot rate [Hz]
  float dt() const { return dt_; }                     ///< [s], 1 / tick_hz
  const std::string& path() const { return path_; }
  const std::string& scene_name() const { return scene_name_; }
  uint32_t keyframes() const { return static_cast<uint32_t>(keyframes_.size()); }
  /// The file ends inside a frame (a crash): playback stops at the last complete one.
  bool truncated() const { return truncated_; }
  /// A corrupt frame or an unexpected frame order found by open() (playback ends before it);
  /// empty when the file is clean.
  const std::string& problem() const { return problem_; }
  /// Why the last advance() or seek() failed.
  const std::string& error() const { return error_; }
  /// Ticks whose request results or awake_hash differed from the recording since open().
  uint64_t mismatches() const { return mismatches_; }
  /// The first such difference ("tick 120: awake_hash ..."); empty when none.
  const std::string& first_mismatch() const { return first_mismatch_; }
  /// Requests re-applied since open() (seeks included).
  uint64_t requests() const { return requests_; }

 private:
  struct KeyframeEntry {
    uint64_t tick = 0;
    uint64_t offset = 0;  // of the Keyframe frame in the file
    uint64_t frames = 0;  // frames before it
  };
  /// Restores the header's state and positions the reader after the header.
  bool rewind(std::string* error);
  /// Reads frames up to the next Tick frame; null (and error_ set) at the end or on a failure.
  const Tick* next_tick_frame();

  physics::World* world_;
  RecordingReader reader_;
  std::string path_;
  std::string scene_name_;
  std::vector<uint8_t> header_state_;
  std::optional<physics::WorldSettings> header_settings_;
  uint64_t after_header_offset_ = 0;
  uint64_t first_tick_ = 0;
  uint64_t last_tick_ = 0;
  uint32_t tick_hz_ = 0;
  uint32_t snapshot_hz_ = 0;
  float dt_ = 0;
  std::vector<KeyframeEntry> keyframes_;  // ascending tick
  bool truncated_ = false;
  bool check_hashes_ = true;
  std::string problem_;
  std::string error_;
  uint64_t mismatches_ = 0;
  std::string first_mismatch_;
  uint64_t requests_ = 0;
};

}  // namespace impulse::record
