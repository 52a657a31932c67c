// Replay of a recording (impulse-replay): summarise it (info), re-simulate it from its initial
// state through the same apply function as the server and compare every tick's awake_hash and
// every keyframe's world_hash (verify, Box2D 3.2's recorded-call replay validated by a per-step
// hash), and rebuild the world at a tick from the nearest keyframe (export).
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/physics/world.h"
#include "server/record/format.h"

namespace impulse::record {

/// One session seen in a recording.
struct ClientSummary {
  uint32_t client_id = 0;
  std::string address;
  std::string name;
  uint64_t connect_tick = 0;
  std::optional<uint64_t> end_tick;  ///< tick of the Disconnect/Timeout/ServerShutdown event
  std::string end_reason;            ///< "disconnect", "timeout", "server shutdown"; empty if open
};

/// What `impulse-replay info` prints.
struct RecordingInfo {
  // Header.
  uint32_t format_version = 0;
  std::string build_id;
  int64_t started_unix_ms = 0;
  uint32_t part = 0;
  std::string scene_name;
  std::string scene_spec;  ///< --scene as given
  uint32_t tick_hz = 0;
  uint32_t snapshot_hz = 0;
  uint32_t max_clients = 0;
  uint32_t keyframe_interval = 0;
  physics::WorldSettings settings;
  uint64_t start_tick = 0;
  uint64_t state_bytes = 0;
  // Body of the file.
  uint64_t file_bytes = 0;
  uint64_t frames = 0;
  uint64_t ticks = 0;
  uint64_t first_tick = 0;  ///< of the first Tick frame (0 when none)
  uint64_t last_tick = 0;   ///< of the last Tick frame (start_tick when none)
  uint64_t tick_bytes = 0;  ///< bytes of all Tick frames
  uint64_t keyframes = 0;
  uint64_t keyframe_bytes = 0;
  uint64_t requests = 0;
  std::map<std::string, uint64_t> requests_by_type;
  std::map<std::string, uint64_t> requests_by_result;
  std::vector<ClientSummary> clients;
  bool truncated = false;
  uint64_t truncated_bytes = 0;
  std::string problem;  ///< a corrupt frame or an unexpected frame order; empty when clean
};

/// Reads the whole file. Returns false with *error when it cannot be opened or does not start
/// with a valid Header; a corrupt frame later only sets info->problem.
bool read_info(const std::string& path, RecordingInfo* info, std::string* error);
/// The multi-line report of `impulse-replay info`.
std::string format_info(const RecordingInfo& info);

struct VerifyOptions {
  /// Print a progress bar with ticks per second to this stream (normally stderr when it is a
  /// terminal); null = none.
  std::FILE* progress = nullptr;
};

struct VerifyResult {
  bool ok = false;               ///< every tick, request result and keyframe matched
  std::string error;             ///< the file could not be replayed at all (open, header, restore)
  uint64_t start_tick = 0;
  uint64_t last_tick = 0;        ///< last tick re-simulated
  uint64_t ticks = 0;            ///< Tick frames re-simulated
  uint64_t requests = 0;         ///< requests re-applied
  uint64_t keyframes = 0;        ///< keyframes compared
  uint64_t frames = 0;           ///< complete frames read
  bool truncated = false;        ///< the file ends inside a frame (a crash); verified up to it
  std::string read_problem;      ///< a corrupt frame ended the replay early (then ok = false)
  std::optional<uint64_t> diverged_tick;  ///< first tick whose hash or request results differ
  std::string report;            ///< on a divergence: what differed, objects included
  double seconds = 0;            ///< wall time of the replay
};

/// Re-simulates the recording and compares every tick (see the file comment). Never throws.
VerifyResult verify_recording(const std::string& path, const VerifyOptions& options = {});

/// A world rebuilt at one tick of a recording.
struct ReplayedWorld {
  std::unique_ptr<physics::World> world;
  std::vector<BodyDamping> dampings;  ///< damping of every live body, sorted by id
  std::string scene_name;
  uint64_t keyframe_tick = 0;         ///< the keyframe (or header) it started from
};

/// Seeks to the nearest keyframe at or before `tick` (or the header) and re-simulates to `tick`.
/// Returns false with *error when the tick is not in the recording or the file is unreadable.
bool replay_to_tick(const std::string& path, uint64_t tick, ReplayedWorld* out, std::string* error);

/// The world as a scene file (schemas/scene.fbs JSON) the server can start from with --scene.
/// Each body keeps its id in its name ("object/<index>.<generation>"). Orientation goes through
/// axis-angle degrees (the scene format), so it is exact to about 1e-7; sleep state, contact
/// caches and material pairs are not part of a scene. Never writes a non-finite number: a body
/// whose state is not finite is left out, and counted in *skipped when it is not null.
std::string to_scene_json(const physics::World& world, std::span<const BodyDamping> dampings,
                          std::string_view scene_name, uint32_t* skipped = nullptr);

}  // namespace impulse::record
