// impulse-bench: runs a reference scene (docs/BENCHMARKS.md, "Scenes") through Impulse and Bullet
// in one process, alternating the engines, and reports ms/step, the paired ratio, RSS, sleep and
// drift.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bench/net/latency.h"
#include "bench/net/n1.h"
#include "bench/paired_run.h"
#include "bench/report.h"
#include "tests/scenes/bench_scenes.h"
#include "shared/version.h"

namespace {

using namespace impulse;

constexpr int kExitBadArgument = 2;
constexpr int kExitRunFailed = 3;

struct Options {
  std::string scene;
  std::optional<int> n;
  std::string sleep;  // "", "on" or "off"
  int steps = 600;
  int rounds = 1;
  int chunk_steps = 10;
  bool json = false;
  std::string json_out;
  std::string trace_csv;
  std::string rss = "fork";
  std::string friction_mix = "product";
  int threads = 1;
  std::string bullet = "on";
  bool quiet = false;
  std::string summary;
  // Solver tuning for experiments; the defaults are WorldSettings{}'s.
  physics::WorldSettings impulse;
  // Network scenes (bench/net/): N1 and latency.
  bench::N1Options n1;
  int latency_samples = 300;
  std::optional<int> latency_snapshot_hz;  // unset: 60 Hz, then 20 Hz
};

// Appends `line` to --json-out's file when one was given. False (with a message) when it cannot.
bool append_json_out(const Options& o, const std::string& line) {
  if (o.json_out.empty()) return true;
  std::ofstream out(o.json_out, std::ios::app);
  out << line << '\n';
  if (out) return true;
  std::fprintf(stderr, "impulse-bench: cannot append to %s\n", o.json_out.c_str());
  return false;
}

// impulse-bench --scene N1 (bench/net/n1.h): bandwidth and pose error of the snapshots.
int run_n1_scene(const Options& o) {
  bench::N1Options options = o.n1;
  options.progress = !o.quiet;
  std::string error;
  const std::optional<bench::N1Result> result = bench::run_n1(options, &error);
  if (!result) {
    std::fprintf(stderr, "impulse-bench: N1 failed: %s\n", error.c_str());
    return kExitRunFailed;
  }
  const std::string line = bench::to_json_line(*result);
  if (o.json) {
    std::printf("%s\n", line.c_str());
  } else {
    bench::print_human(stdout, *result);
  }
  return append_json_out(o, line) ? 0 : kExitRunFailed;
}

// impulse-bench --scene latency (bench/net/latency.h): request -> first snapshot showing it.
int run_latency_scene(const Options& o) {
  constexpr int kTickHz = 60;
  std::vector<int> snapshot_rates = {60, 20};
  if (o.latency_snapshot_hz) snapshot_rates = {*o.latency_snapshot_hz};
  std::vector<bench::LatencyRun> runs;
  for (const int snapshot_hz : snapshot_rates) {
    std::string error;
    const std::optional<bench::LatencyRun> run =
        bench::run_latency(kTickHz, snapshot_hz, o.latency_samples, !o.quiet, &error);
    if (!run) {
      std::fprintf(stderr, "impulse-bench: latency at %d Hz snapshots failed: %s\n", snapshot_hz, error.c_str());
      return kExitRunFailed;
    }
    runs.push_back(*run);
  }
  const std::string line = bench::to_json_line(runs);
  if (o.json) {
    std::printf("%s\n", line.c_str());
  } else {
    bench::print_human(stdout, runs);
  }
  return append_json_out(o, line) ? 0 : kExitRunFailed;
}

// Builds the scene the flags ask for, or explains why not.
std::optional<scenes::BenchScene> make_scene(const Options& o, std::string& error) {
  if (o.scene == "S1") {
    const int base = o.n.value_or(20);
    if (base < 1 || base > scenes::kMaxPyramidBase) {
      error = "--n for S1 is the pyramid's base row, 1.." + std::to_string(scenes::kMaxPyramidBase) + ", got " +
              std::to_string(base);
      return std::nullopt;
    }
    return scenes::make_s1_pyramid(base);
  }
  if (o.scene == "S2") {
    const int n = o.n.value_or(4000);
    if (n < 1 || n > scenes::kMaxPileCount) {
      error = "--n for S2 is the box count, 1.." + std::to_string(scenes::kMaxPileCount) +
              " (more would rise above the 80 m walls), got " + std::to_string(n);
      return std::nullopt;
    }
    return scenes::make_s2_pile(n);
  }
  if (o.scene == "S3") {
    const int n = o.n.value_or(10000);
    if (n < 1 || n > scenes::kMaxSphereCount) {
      error = "--n for S3 is the sphere count, 1.." + std::to_string(scenes::kMaxSphereCount) + ", got " +
              std::to_string(n);
      return std::nullopt;
    }
    return scenes::make_s3_spheres(n);
  }
  if (o.scene == "J1") {
    const int side = o.n.value_or(100);
    if (side < 8 || side > scenes::kMaxJointGridSide) {
      error = "--n for J1 is the grid's side, 8.." + std::to_string(scenes::kMaxJointGridSide) + ", got " +
              std::to_string(side);
      return std::nullopt;
    }
    return scenes::make_j1_joint_grid(side);
  }
  if (o.scene == "J2") {
    const int count = o.n.value_or(160);
    if (count < 1 || count > scenes::kMaxRagdolls) {
      error = "--n for J2 is the ragdoll count, 1.." + std::to_string(scenes::kMaxRagdolls) + ", got " +
              std::to_string(count);
      return std::nullopt;
    }
    return scenes::make_j2_ragdolls(count);
  }
  if (o.scene == "H1") {
    const int n = o.n.value_or(2000);
    if (n < 1 || n > scenes::kMaxHullPileCount) {
      error = "--n for H1 is the hull count, 1.." + std::to_string(scenes::kMaxHullPileCount) + ", got " +
              std::to_string(n);
      return std::nullopt;
    }
    return scenes::make_h1_hull_pile(n);
  }
  if (o.scene == "C1") {
    const int n = o.n.value_or(2000);
    if (n < 1 || n > scenes::kMaxPileCount) {
      error = "--n for C1 is the cylinder count, 1.." + std::to_string(scenes::kMaxPileCount) + ", got " +
              std::to_string(n);
      return std::nullopt;
    }
    return scenes::make_c1_cylinder_pile(n);
  }
  if (o.scene == "M1" || o.scene == "M2") {
    const int n = o.n.value_or(o.scene == "M1" ? 1764 : 4000);
    if (n < 1 || n > scenes::kMaxTerrainBodies) {
      error = "--n for " + o.scene + " is the body count, 1.." + std::to_string(scenes::kMaxTerrainBodies) + ", got " +
              std::to_string(n);
      return std::nullopt;
    }
    return o.scene == "M1" ? scenes::make_m1_mesh_terrain(n) : scenes::make_m2_heightfield(n);
  }
  error = "unknown scene '" + o.scene + "' (expected S1, S2, S3, J1, J2, H1, C1, M1 or M2)";
  return std::nullopt;
}

// MB: building a 1M-triangle mesh (scenes::terrain_grid, 708 x 708 cells) in both engines, three
// times each, alternating; medians of the build time and the bytes per triangle.
int run_mesh_build(const Options& o) {
  std::vector<Vec3> vertices;
  std::vector<uint32_t> indices;
  scenes::terrain_grid(o.n.value_or(708), 0.5f, &vertices, &indices);
  const size_t triangles = indices.size() / 3;
  std::vector<double> ours_ms;
  std::vector<double> bullet_ms;
  size_t ours_bytes = 0;
  bench::BulletMeshFigures bullet;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    const physics::MeshBuild built = physics::build_triangle_mesh(vertices, indices);
    ours_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!built.ok()) {
      std::fprintf(stderr, "impulse-bench: %s\n", built.error.c_str());
      return kExitRunFailed;
    }
    ours_bytes = built.mesh.memory_bytes();
    bullet = bench::measure_bullet_mesh(vertices, indices);
    bullet_ms.push_back(bullet.build_ms);
    if (!o.quiet) std::fprintf(stderr, "[impulse-bench] MB: round %d of 3\n", round + 1);
  }
  std::sort(ours_ms.begin(), ours_ms.end());
  std::sort(bullet_ms.begin(), bullet_ms.end());
  const double t = static_cast<double>(triangles);
  std::printf("MB: %zu triangles, %zu vertices\n", triangles, vertices.size());
  std::printf("  Impulse: build %.0f ms (median of 3), %.1f bytes per triangle, all included\n", ours_ms[1],
              static_cast<double>(ours_bytes) / t);
  std::printf("  Bullet:  build %.0f ms (median of 3), %.1f bytes per triangle (BVH %.1f + arrays %.1f)\n", bullet_ms[1],
              static_cast<double>(bullet.bvh_bytes + bullet.array_bytes) / t, static_cast<double>(bullet.bvh_bytes) / t,
              static_cast<double>(bullet.array_bytes) / t);
  std::printf("  ratio Impulse / Bullet: build %.2f, memory %.2f\n", ours_ms[1] / bullet_ms[1],
              static_cast<double>(ours_bytes) / static_cast<double>(bullet.bvh_bytes + bullet.array_bytes));
  return 0;
}

int run(const Options& o) {
  if (!o.summary.empty()) {
    const int rows = bench::print_summary(stdout, o.summary);
    if (rows < 0) {
      std::fprintf(stderr, "impulse-bench: cannot open %s\n", o.summary.c_str());
      return kExitBadArgument;
    }
    return 0;
  }
  if (o.scene.empty()) {
    std::fprintf(stderr, "impulse-bench: --scene S1|S2|S3|J1|J2|N1|latency is required (or --summary FILE)\n");
    return kExitBadArgument;
  }
  if (o.scene == "N1") return run_n1_scene(o);
  if (o.scene == "MB") return run_mesh_build(o);
  if (o.scene == "latency") return run_latency_scene(o);
  std::string error;
  const std::optional<scenes::BenchScene> scene = make_scene(o, error);
  if (!scene) {
    std::fprintf(stderr, "impulse-bench: %s\n", error.c_str());
    return kExitBadArgument;
  }

  bench::RunConfig config;
  config.sleep = o.sleep.empty() ? scene->sleep : o.sleep == "on";
  config.steps = o.steps;
  config.rounds = o.rounds;
  config.chunk_steps = o.chunk_steps;
  config.bullet.friction_mix =
      o.friction_mix == "geometric" ? bench::BulletFrictionMix::GeometricMean : bench::BulletFrictionMix::Product;
  config.impulse = o.impulse;
  config.impulse_threads = o.threads;
  config.run_bullet = o.bullet == "on";
  config.progress = !o.quiet;
  config.keep_trace = !o.trace_csv.empty();

  // RSS first, in children, while this process's heap holds no engine's freed pages.
  std::optional<bench::RssMeasurement> rss[2];
  if (o.rss == "fork") {
    for (const bench::Engine engine : {bench::Engine::Impulse, bench::Engine::Bullet}) {
      if (engine == bench::Engine::Bullet && !config.run_bullet) continue;
      if (!o.quiet) {
        std::fprintf(stderr, "[impulse-bench] %s: measuring %s RSS in a child process (%d steps)\n",
                     scene->name.c_str(), bench::to_string(engine), o.steps);
      }
      rss[static_cast<int>(engine)] = bench::measure_rss_in_child(engine, *scene, config, error);
      if (!rss[static_cast<int>(engine)]) std::fprintf(stderr, "impulse-bench: %s (RSS reported as null)\n", error.c_str());
    }
  }

  std::optional<bench::SceneResult> result = bench::run_paired(*scene, config, error);
  if (!result) {
    std::fprintf(stderr, "impulse-bench: %s\n", error.c_str());
    return kExitRunFailed;
  }
  result->impulse.rss = rss[0];
  result->bullet.rss = rss[1];

  const std::string line = bench::to_json_line(*result);
  if (o.json) {
    std::printf("%s\n", line.c_str());
  } else {
    bench::print_human(stdout, *result);
  }
  if (!o.trace_csv.empty() && !bench::write_trace_csv(o.trace_csv, *result)) {
    std::fprintf(stderr, "impulse-bench: cannot write %s\n", o.trace_csv.c_str());
    return kExitRunFailed;
  }
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out, std::ios::app);
    out << line << '\n';
    if (!out) {
      std::fprintf(stderr, "impulse-bench: cannot append to %s\n", o.json_out.c_str());
      return kExitRunFailed;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"impulse-bench: the reference scenes through Impulse and Bullet, alternating, in one run"};
  app.set_version_flag("--version", impulse::version_line("impulse-bench"));
  app.add_option("--scene", o.scene,
                 "S1 (pyramid), S2 (pile), S3 (spheres), J1 (joint grid), J2 (ragdolls), H1 (hull pile), C1 (cylinder pile), M1 (convex vs "
                 "mesh), M2 (heightfield); MB (1M-triangle mesh build); N1 (network bandwidth) or latency (request -> snapshot)")
      ->transform(CLI::IsMember({"S1", "S2", "S3", "J1", "J2", "H1", "C1", "M1", "M2", "MB", "N1", "latency"}, CLI::ignore_case));
  app.add_option("--n", o.n, "S1: base row (default 20); S2: boxes (default 4000); S3: spheres (default 10000); "
                             "J1: grid side (default 100); J2: ragdolls (default 160)");
  app.add_option("--sleep", o.sleep, "on|off (default: the scene's: S1 off, S2 and S3 on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--steps", o.steps, "timed steps of 1/60 s per round")->check(CLI::Range(1, 1000000));
  app.add_option("--rounds", o.rounds, "repeat the scene with fresh worlds; medians across rounds")
      ->check(CLI::Range(1, 100));
  app.add_option("--chunk", o.chunk_steps, "steps per engine before switching to the other")
      ->check(CLI::Range(1, 100000));
  app.add_flag("--json", o.json, "print one JSON object per scene instead of the table");
  app.add_option("--json-out", o.json_out, "also append the JSON object as one line to this file");
  app.add_option("--trace-csv", o.trace_csv, "write every step of round 1 (both engines, Impulse's stages) as CSV");
  app.add_option("--rss", o.rss, "fork: measure each engine's RSS in a child process; off: skip")
      ->check(CLI::IsMember({"fork", "off"}));
  app.add_option("--bullet-friction-mix", o.friction_mix,
                 "product (Bullet's default, 0.6 x 0.6 = 0.36) or geometric (Impulse's, 0.6)")
      ->check(CLI::IsMember({"product", "geometric"}));
  app.add_option("--threads", o.threads,
                 "Impulse step threads: > 1 steps the world on a WorkerPool of that many (World::set_worker_pool); "
                 "Bullet always runs single-threaded")
      ->check(CLI::Range(1, 64));
  app.add_option("--bullet", o.bullet, "on: step Bullet alongside (default); off: Impulse alone, e.g. to compare --threads")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--substeps", o.impulse.substeps, "Impulse solver substeps per step (WorldSettings::substeps)")
      ->check(CLI::Range(1, 64));
  app.add_option("--relax-iterations", o.impulse.relax_iterations,
                 "Impulse bias-free sweeps per substep (WorldSettings::relax_iterations)")
      ->check(CLI::Range(0, 64));
  app.add_option("--contact-hertz", o.impulse.contact_hertz,
                 "Impulse contact stiffness [Hz] (WorldSettings::contact_hertz; capped at substep rate / 4)")
      ->check(CLI::Range(1.0f, 1000.0f));
  app.add_option("--contact-damping-ratio", o.impulse.contact_damping_ratio,
                 "Impulse contact damping ratio (WorldSettings::contact_damping_ratio)")
      ->check(CLI::Range(0.0f, 100.0f));
  app.add_option("--seconds", o.n1.seconds, "N1: measured time [s] after the warm-up")->check(CLI::Range(1.0, 3600.0));
  app.add_option("--warmup", o.n1.warmup_s, "N1: warm-up [s] before measuring")->check(CLI::Range(0.0, 600.0));
  app.add_flag("--reliable-forces", o.n1.reliable_forces,
               "N1: send the player's per-tick force as sequenced, answered requests instead of fire-and-forget");
  app.add_option("--record", o.n1.record_file,
                 "N1: record the server's session into this file while measuring (what recording costs the tick)");
  app.add_option("--kbps", o.n1.kbps, "N1: the server's per-client send budget [kbit/s] (default: the server's, 1024)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--samples", o.latency_samples, "latency: requests per snapshot rate")->check(CLI::Range(1, 100000));
  app.add_option("--snapshot-hz", o.latency_snapshot_hz, "latency: only this snapshot rate (default: 60, then 20)")
      ->check(CLI::Range(1, 60));
  app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
  app.add_option("--summary", o.summary, "print a Markdown table of a --json-out file and exit");
  CLI11_PARSE(app, argc, argv);
  return run(o);
}
