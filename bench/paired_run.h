// The measurement of impulse-bench: both engines step the same scene in alternating chunks, so both
// see the same machine noise, and each engine's memory is measured in a child process of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/bullet_runner.h"
#include "server/physics/world.h"
#include "tests/scenes/bench_scenes.h"

namespace impulse::bench {

enum class Engine : uint8_t { Impulse = 0, Bullet = 1 };

const char* to_string(Engine engine);

struct RunConfig {
  bool sleep = true;     ///< Impulse WorldSettings::allow_sleep and Bullet deactivation
  int steps = 600;       ///< timed steps per round, each of kSceneDt
  int chunk_steps = 10;  ///< steps per engine per chunk; chunks alternate the engine that goes first
  int rounds = 1;        ///< whole-scene repetitions with fresh worlds; figures are medians across rounds
  BulletOptions bullet;  ///< bullet.sleep is overwritten by `sleep`
  /// Impulse's settings; allow_sleep is overwritten by `sleep` and gravity by the scene's.
  physics::WorldSettings impulse;
  /// Impulse's step threads: > 1 gives the world a WorkerPool of this many (World::set_worker_pool).
  /// Bullet always steps on one thread.
  int impulse_threads = 1;
  /// false: Impulse alone (no Bullet world, no Bullet figures), for comparing Impulse with itself,
  /// e.g. thread counts, without paying for Bullet's much slower steps.
  bool run_bullet = true;
  bool progress = true;  ///< progress lines on stderr every few seconds of wall time
  bool keep_trace = false;  ///< fill SceneResult::trace (round 1), e.g. for a CSV of the run
};

/// Peak growth of the resident set while one engine alone builds the scene and takes `steps`
/// steps, in a forked child (so neither engine's heap, nor the parent's, is counted for the other).
struct RssMeasurement {
  uint64_t growth_kib = 0;  ///< peak RSS during the run minus RSS before building [KiB]
  uint64_t peak_kib = 0;    ///< the child's peak RSS (VmHWM), parent pages it touched included [KiB]
  /// "vmhwm": VmHWM after resetting it through /proc/self/clear_refs (exact peak);
  /// "vmrss-sampled": clear_refs unavailable, so VmRSS sampled after build and after each step.
  const char* method = "";
};

/// Measures one engine's RSS growth in a forked child (fork, build, step, read /proc, report
/// through a pipe). Runs no timing. Call it before the timed rounds, while the parent's heap is
/// small and holds no freed engine pages the child could reuse without growing its RSS.
/// @return nullopt with `error` set when fork, the pipe, /proc or the child failed.
std::optional<RssMeasurement> measure_rss_in_child(Engine engine, const scenes::BenchScene& scene,
                                                   const RunConfig& config, std::string& error);

/// Per-stage medians of Impulse's StepProfile over the timed steps [ms/step].
struct StageMedians {
  double broadphase_ms = 0;
  double narrowphase_ms = 0;
  double events_ms = 0;
  double wake_ms = 0;
  double solve_ms = 0;
  double writeback_ms = 0;
  double continuous_ms = 0;
  double islands_ms = 0;
  double total_ms = 0;
};

struct EngineResult {
  double ms_median = 0;  ///< median step time [ms] (median across rounds of each round's median)
  double ms_p95 = 0;     ///< nearest-rank p95 step time [ms] (median across rounds)
  uint32_t awake_end = 0;  ///< awake dynamic bodies after the last step (round 1)
  /// Step time per awake body [µs]: the round's summed step times over its summed awake counts at
  /// each step's start (median across rounds), so that sleeping sooner cannot hide a slower step.
  double us_per_awake_body_step = 0;
  /// Simulated time [s] after which the awake count first reached 0 (round 1); nullopt if never.
  std::optional<double> asleep_at_s;
  Vec3 top_start;  ///< S1: top box centre before the first step [m]
  Vec3 top_end;    ///< S1: top box centre after the last step [m]
  std::optional<RssMeasurement> rss;
};

/// One step of round 1, for plotting where the time goes over a run.
struct TraceRow {
  double impulse_ms = 0;
  double bullet_ms = 0;
  uint32_t impulse_awake = 0;
  uint32_t bullet_awake = 0;
  physics::StepProfile impulse_profile;
};

struct SceneResult {
  std::string scene;
  uint32_t n = 0;  ///< dynamic bodies
  bool sleep = true;
  int steps = 0;
  int rounds = 0;
  int chunk_steps = 0;
  BulletFrictionMix friction_mix = BulletFrictionMix::Product;
  int impulse_threads = 1;  ///< RunConfig::impulse_threads
  bool bullet_run = true;   ///< RunConfig::run_bullet: false leaves every Bullet figure and ratio at 0
  bool has_top_body = false;  ///< S1: top_start/top_end are meaningful
  EngineResult impulse;
  EngineResult bullet;
  /// Median over chunks of (Impulse chunk time / Bullet chunk time), median across rounds.
  double ratio_median = 0;
  /// impulse.ms_median / bullet.ms_median.
  double ratio_of_medians = 0;
  StageMedians impulse_stages;
  physics::StepProfile impulse_last_profile;  ///< counters of Impulse's last step (round 1)
  std::vector<TraceRow> trace;  ///< per step of round 1 when RunConfig::keep_trace, else empty
};

/// Builds both worlds per round, then for each chunk runs chunk_steps Impulse steps and
/// chunk_steps Bullet steps (the first engine alternates between chunks), timing every step with
/// steady_clock. Awake counts and poses are read outside the timed region.
/// @return nullopt with `error` set when a world rejects the scene or the config is unusable.
std::optional<SceneResult> run_paired(const scenes::BenchScene& scene, const RunConfig& config,
                                      std::string& error);

}  // namespace impulse::bench
