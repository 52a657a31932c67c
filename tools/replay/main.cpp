// impulse-replay: inspect, verify and export session recordings (docs/RECORDING.md).
//   impulse-replay info FILE
//   impulse-replay verify FILE
//   impulse-replay export FILE --tick N --out scene.json
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "server/record/replay.h"

namespace {

using namespace impulse::record;

int run_info(const std::string& path) {
  RecordingInfo info;
  std::string error;
  if (!read_info(path, &info, &error)) {
    std::fprintf(stderr, "impulse-replay: %s\n", error.c_str());
    return 1;
  }
  std::fputs(format_info(info).c_str(), stdout);
  return info.problem.empty() ? 0 : 1;
}

int run_verify(const std::string& path) {
  VerifyOptions options;
  if (::isatty(STDERR_FILENO)) options.progress = stderr;
  const VerifyResult r = verify_recording(path, options);
  if (!r.error.empty()) {
    std::fprintf(stderr, "impulse-replay: %s\n", r.error.c_str());
    return 2;
  }
  const double rate = r.seconds > 0 ? static_cast<double>(r.ticks) / r.seconds : 0.0;
  const std::string tail = r.truncated ? " (the file ends in a truncated frame: verified up to its last complete frame)"
                                       : std::string{};
  if (!r.ok) {
    if (!r.report.empty()) std::fputs(r.report.c_str(), stdout);
    if (!r.read_problem.empty()) std::printf("unreadable frame: %s\n", r.read_problem.c_str());
    std::printf("FAILED: %s after %llu ticks (ticks %llu..%llu)%s\n",
                r.diverged_tick ? fmt::format("diverged at tick {}", *r.diverged_tick).c_str() : "stopped",
                static_cast<unsigned long long>(r.ticks), static_cast<unsigned long long>(r.start_tick + 1),
                static_cast<unsigned long long>(r.last_tick), tail.c_str());
    return 1;
  }
  std::printf("OK: %llu ticks (%llu..%llu), %llu requests, %llu keyframes match the recording; %.2f s, %.0f ticks/s%s\n",
              static_cast<unsigned long long>(r.ticks), static_cast<unsigned long long>(r.start_tick + 1),
              static_cast<unsigned long long>(r.last_tick), static_cast<unsigned long long>(r.requests),
              static_cast<unsigned long long>(r.keyframes), r.seconds, rate, tail.c_str());
  return 0;
}

int run_export(const std::string& path, uint64_t tick, const std::string& out_path) {
  ReplayedWorld replayed;
  std::string error;
  if (!replay_to_tick(path, tick, &replayed, &error)) {
    std::fprintf(stderr, "impulse-replay: %s\n", error.c_str());
    return 1;
  }
  const std::string json = to_scene_json(*replayed.world, replayed.dampings, replayed.scene_name);
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << json) || !out.flush()) {
    std::fprintf(stderr, "impulse-replay: cannot write %s\n", out_path.c_str());
    return 1;
  }
  std::printf("wrote %s: %u bodies at tick %llu (from the %s at tick %llu, re-simulated %llu ticks); start a server "
              "from it with: impulse-server --scene %s\n",
              out_path.c_str(), replayed.world->object_count(), static_cast<unsigned long long>(tick),
              replayed.keyframe_tick == tick ? "keyframe" : "nearest keyframe",
              static_cast<unsigned long long>(replayed.keyframe_tick),
              static_cast<unsigned long long>(tick - replayed.keyframe_tick), out_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"impulse-replay: inspect, verify and export Impulse session recordings (impulse-server --record)",
               "impulse-replay"};
  app.require_subcommand(1);
  std::string path;
  auto* info = app.add_subcommand("info", "Header, duration, ticks, clients, requests, keyframes and size");
  info->add_option("FILE", path, "Recording file")->required();
  auto* verify = app.add_subcommand(
      "verify", "Re-simulate from the initial state with the recorded requests and compare every tick's hash");
  verify->add_option("FILE", path, "Recording file")->required();
  uint64_t tick = 0;
  std::string out_path;
  auto* exp = app.add_subcommand("export", "Write the world at a tick as a scene file (impulse-server --scene)");
  exp->add_option("FILE", path, "Recording file")->required();
  exp->add_option("--tick", tick, "The tick to export")->required();
  exp->add_option("--out", out_path, "Scene file to write (JSON, schemas/scene.fbs)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (info->parsed()) return run_info(path);
  if (verify->parsed()) return run_verify(path);
  return run_export(path, tick, out_path);
}
