// Paired benchmarking: the two engines alternate in short chunks within one process and the ratio is
// taken chunk by chunk, so slow drifts of a noisy machine cancel (the method of interleaved A/B runs).
#include "bench/paired_run.h"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "bench/impulse_runner.h"
#include "bench/stats.h"

namespace impulse::bench {
namespace {

using Clock = std::chrono::steady_clock;

physics::WorldSettings impulse_settings(const RunConfig& config) {
  physics::WorldSettings settings = config.impulse;
  settings.allow_sleep = config.sleep;
  return settings;
}

double elapsed_ms(Clock::time_point begin, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - begin).count();
}

// Prints a progress line on stderr at most every kProgressPeriod, so minutes-long runs show life.
class Progress {
 public:
  Progress(bool enabled, std::string label) : enabled_(enabled), label_(std::move(label)) {}
  bool due() {
    if (!enabled_) return false;
    const Clock::time_point now = Clock::now();
    if (now - last_ < kProgressPeriod) return false;
    last_ = now;
    return true;
  }
  const std::string& label() const { return label_; }

 private:
  static constexpr std::chrono::seconds kProgressPeriod{5};
  bool enabled_;
  std::string label_;
  Clock::time_point last_ = Clock::now();
};

std::string describe(const scenes::BenchScene& scene, uint32_t n) {
  return scene.name + " n=" + std::to_string(n);
}

// Writes all of `size` bytes, retrying on EINTR and short writes.
bool write_all(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

bool read_all(int fd, void* data, size_t size) {
  auto* bytes = static_cast<unsigned char*>(data);
  while (size > 0) {
    const ssize_t got = ::read(fd, bytes, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

// What a child sends back through its pipe: plain bytes, same binary on both ends.
struct ChildReport {
  uint64_t base_kib = 0;
  uint64_t peak_kib = 0;
  uint64_t growth_kib = 0;
  uint8_t exact_peak = 0;  // 1: VmHWM after a clear_refs reset
  uint8_t ok = 0;
};

template <class EngineWorld>
void step_and_sample(EngineWorld& world, const RunConfig& config, bool sample_rss, uint64_t& max_rss_kib,
                     Progress& progress) {
  for (int s = 0; s < config.steps; ++s) {
    world.step(scenes::kSceneDt);
    if (sample_rss) max_rss_kib = std::max(max_rss_kib, read_status_kib("VmRSS").value_or(0));
    if (progress.due()) {
      std::fprintf(stderr, "[impulse-bench] %s: RSS run, step %d/%d\n", progress.label().c_str(), s + 1,
                   config.steps);
    }
  }
}

// Body of the forked child: never returns.
[[noreturn]] void run_rss_child(int fd, Engine engine, const scenes::BenchScene& scene, const RunConfig& config) {
  ChildReport report;
  const bool exact = reset_peak_rss();
  const std::optional<uint64_t> base = read_status_kib("VmRSS");
  uint64_t max_rss = base.value_or(0);
  Progress progress(config.progress, describe(scene, scenes::count_dynamic(scene)) + " " + to_string(engine));
  if (engine == Engine::Impulse) {
    ImpulseWorld world(scene, impulse_settings(config), config.impulse_threads);
    if (!exact) max_rss = std::max(max_rss, read_status_kib("VmRSS").value_or(0));
    step_and_sample(world, config, !exact, max_rss, progress);
    if (!exact) max_rss = std::max(max_rss, read_status_kib("VmRSS").value_or(0));
  } else {
    BulletOptions options = config.bullet;
    options.sleep = config.sleep;
    BulletWorld world(scene, options);
    if (!exact) max_rss = std::max(max_rss, read_status_kib("VmRSS").value_or(0));
    step_and_sample(world, config, !exact, max_rss, progress);
    if (!exact) max_rss = std::max(max_rss, read_status_kib("VmRSS").value_or(0));
  }
  const std::optional<uint64_t> hwm = read_status_kib("VmHWM");
  if (base && (!exact || hwm)) {
    report.base_kib = *base;
    report.peak_kib = exact ? *hwm : max_rss;
    report.growth_kib = report.peak_kib > *base ? report.peak_kib - *base : 0;
    report.exact_peak = exact ? 1 : 0;
    report.ok = 1;
  }
  const int code = write_all(fd, &report, sizeof report) ? 0 : 1;
  ::close(fd);
  // _exit: the child must not run the parent's atexit handlers or flush its stdio buffers twice.
  ::_exit(code);
}

// Impulse StepProfile stages kept per step, in StageMedians order (the step's): broadphase,
// narrowphase, events, wake, solve, write-back, islands, total.
constexpr int kStageCount = 9;

struct RoundSamples {
  std::vector<double> impulse_ms;
  std::vector<double> bullet_ms;
  // Step time and awake bodies at each step's start, summed: time per awake body-step.
  double impulse_ms_sum = 0, bullet_ms_sum = 0;
  double impulse_awake_sum = 0, bullet_awake_sum = 0;
  std::vector<double> chunk_ratios;
  std::vector<double> stage[kStageCount];
};

}  // namespace

const char* to_string(Engine engine) { return engine == Engine::Impulse ? "impulse" : "bullet"; }

std::optional<RssMeasurement> measure_rss_in_child(Engine engine, const scenes::BenchScene& scene,
                                                   const RunConfig& config, std::string& error) {
  int fds[2];
  if (::pipe(fds) != 0) {
    error = std::string("pipe failed: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    error = std::string("fork failed: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_rss_child(fds[1], engine, scene, config);
  }
  ::close(fds[1]);
  ChildReport report;
  const bool got = read_all(fds[0], &report, sizeof report);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || report.ok == 0) {
    error = std::string("RSS child for ") + to_string(engine) + " failed (status " + std::to_string(status) +
            (got ? ", /proc/self/status unreadable)" : ", no report)");
    return std::nullopt;
  }
  RssMeasurement rss;
  rss.growth_kib = report.growth_kib;
  rss.peak_kib = report.peak_kib;
  rss.method = report.exact_peak != 0 ? "vmhwm" : "vmrss-sampled";
  return rss;
}

std::optional<SceneResult> run_paired(const scenes::BenchScene& scene, const RunConfig& config,
                                      std::string& error) {
  if (config.steps < 1 || config.chunk_steps < 1 || config.rounds < 1) {
    error = "steps, chunk and rounds must be >= 1";
    return std::nullopt;
  }
  SceneResult result;
  result.scene = scene.name;
  result.n = scenes::count_dynamic(scene);
  result.sleep = config.sleep;
  result.steps = config.steps;
  result.rounds = config.rounds;
  result.chunk_steps = config.chunk_steps;
  result.friction_mix = config.bullet.friction_mix;
  result.impulse_threads = config.impulse_threads;
  result.bullet_run = config.run_bullet;
  result.has_top_body = scene.name == "S1" && scene.top_body < scene.bodies.size();

  BulletOptions bullet_options = config.bullet;
  bullet_options.sleep = config.sleep;
  const uint32_t top = scene.top_body;
  const auto steps = static_cast<size_t>(config.steps);

  std::vector<double> round_imp_median, round_imp_p95, round_bt_median, round_bt_p95, round_ratio;
  std::vector<double> round_imp_us_awake, round_bt_us_awake;
  std::vector<double> round_stage[kStageCount];
  RoundSamples samples;
  samples.impulse_ms.reserve(steps);
  samples.bullet_ms.reserve(steps);
  for (std::vector<double>& stage : samples.stage) stage.reserve(steps);

  for (int round = 0; round < config.rounds; ++round) {
    samples.impulse_ms.clear();
    samples.bullet_ms.clear();
    samples.chunk_ratios.clear();
    for (std::vector<double>& stage : samples.stage) stage.clear();

    ImpulseWorld impulse(scene, impulse_settings(config), config.impulse_threads);
    if (impulse.rejected_count() != 0) {
      error = "Impulse rejected " + std::to_string(impulse.rejected_count()) + " bodies of " + scene.name;
      return std::nullopt;
    }
    std::optional<BulletWorld> bullet_world;
    if (config.run_bullet) bullet_world.emplace(scene, bullet_options);
    const bool first_round = round == 0;
    const bool trace = first_round && config.keep_trace;
    if (trace) result.trace.assign(steps, TraceRow{});
    if (first_round && result.has_top_body) {
      result.impulse.top_start = impulse.position(top);
      if (bullet_world) result.bullet.top_start = bullet_world->position(top);
    }
    Progress progress(config.progress, describe(scene, result.n) + " round " + std::to_string(round + 1) + "/" +
                                           std::to_string(config.rounds));

    int done = 0;
    int chunk = 0;
    while (done < config.steps) {
      const int count = std::min(config.chunk_steps, config.steps - done);
      double impulse_chunk_ms = 0;
      double bullet_chunk_ms = 0;
      auto run_impulse = [&] {
        for (int s = 0; s < count; ++s) {
          const Clock::time_point begin = Clock::now();
          impulse.step(scenes::kSceneDt);
          const Clock::time_point end = Clock::now();
          const double ms = elapsed_ms(begin, end);
          samples.impulse_ms.push_back(ms);
          impulse_chunk_ms += ms;
          const physics::StepProfile& p = impulse.profile();
          samples.impulse_ms_sum += ms;
          samples.impulse_awake_sum += p.awake_count;  // awake at the step's start
          const double stage_ms[kStageCount] = {p.broadphase_ms, p.narrowphase_ms, p.events_ms,
                                                p.wake_ms,       p.solve_ms,       p.writeback_ms,
                                                p.continuous_ms, p.islands_ms,     p.total_ms};
          for (int k = 0; k < kStageCount; ++k) samples.stage[k].push_back(stage_ms[k]);
          if (first_round && !result.impulse.asleep_at_s && config.sleep && impulse.awake_count() == 0) {
            result.impulse.asleep_at_s = static_cast<double>(done + s + 1) * scenes::kSceneDt;
          }
          if (trace) {
            TraceRow& row = result.trace[static_cast<size_t>(done + s)];
            row.impulse_ms = ms;
            row.impulse_awake = impulse.awake_count();
            row.impulse_profile = p;
          }
        }
      };
      auto run_bullet = [&] {
        if (!bullet_world) return;
        BulletWorld& bullet = *bullet_world;
        for (int s = 0; s < count; ++s) {
          const uint32_t awake_before = bullet.awake_count();  // outside the timed step
          const Clock::time_point begin = Clock::now();
          bullet.step(scenes::kSceneDt);
          const Clock::time_point end = Clock::now();
          const double ms = elapsed_ms(begin, end);
          samples.bullet_ms.push_back(ms);
          samples.bullet_ms_sum += ms;
          samples.bullet_awake_sum += awake_before;
          bullet_chunk_ms += ms;
          if (first_round && !result.bullet.asleep_at_s && config.sleep && bullet.awake_count() == 0) {
            result.bullet.asleep_at_s = static_cast<double>(done + s + 1) * scenes::kSceneDt;
          }
          if (trace) {
            TraceRow& row = result.trace[static_cast<size_t>(done + s)];
            row.bullet_ms = ms;
            row.bullet_awake = bullet.awake_count();
          }
        }
      };
      // Alternate which engine goes first, so neither always runs on the other's warm caches.
      if (chunk % 2 == 0) {
        run_impulse();
        run_bullet();
      } else {
        run_bullet();
        run_impulse();
      }
      if (bullet_chunk_ms > 0) samples.chunk_ratios.push_back(impulse_chunk_ms / bullet_chunk_ms);
      done += count;
      ++chunk;
      if (progress.due()) {
        std::fprintf(stderr, "[impulse-bench] %s: step %d/%d, last chunk impulse %.3f ms/step, bullet %.3f ms/step\n",
                     progress.label().c_str(), done, config.steps, impulse_chunk_ms / count,
                     bullet_chunk_ms / count);
      }
    }

    round_imp_median.push_back(median(samples.impulse_ms));
    round_imp_p95.push_back(percentile(samples.impulse_ms, 95.0));
    round_bt_median.push_back(median(samples.bullet_ms));  // 0 without Bullet (median of nothing)
    round_bt_p95.push_back(percentile(samples.bullet_ms, 95.0));
    round_ratio.push_back(median(samples.chunk_ratios));
    auto us_per_awake = [](double ms_sum, double awake_sum) { return awake_sum > 0 ? 1000.0 * ms_sum / awake_sum : 0.0; };
    round_imp_us_awake.push_back(us_per_awake(samples.impulse_ms_sum, samples.impulse_awake_sum));
    round_bt_us_awake.push_back(us_per_awake(samples.bullet_ms_sum, samples.bullet_awake_sum));
    for (int k = 0; k < kStageCount; ++k) round_stage[k].push_back(median(samples.stage[k]));
    if (first_round) {
      result.impulse.awake_end = impulse.awake_count();
      if (bullet_world) result.bullet.awake_end = bullet_world->awake_count();
      result.impulse_last_profile = impulse.profile();
      if (result.has_top_body) {
        result.impulse.top_end = impulse.position(top);
        if (bullet_world) result.bullet.top_end = bullet_world->position(top);
      }
    }
  }

  result.impulse.ms_median = median(round_imp_median);
  result.impulse.ms_p95 = median(round_imp_p95);
  result.bullet.ms_median = median(round_bt_median);
  result.bullet.ms_p95 = median(round_bt_p95);
  result.ratio_median = median(round_ratio);
  result.impulse.us_per_awake_body_step = median(round_imp_us_awake);
  result.bullet.us_per_awake_body_step = median(round_bt_us_awake);
  result.ratio_of_medians = result.bullet.ms_median > 0 ? result.impulse.ms_median / result.bullet.ms_median : 0;
  StageMedians& st = result.impulse_stages;
  double* stage_out[kStageCount] = {&st.broadphase_ms, &st.narrowphase_ms, &st.events_ms,
                                    &st.wake_ms,       &st.solve_ms,       &st.writeback_ms,
                                    &st.continuous_ms, &st.islands_ms,     &st.total_ms};
  for (int k = 0; k < kStageCount; ++k) *stage_out[k] = median(round_stage[k]);
  return result;
}

}  // namespace impulse::bench
