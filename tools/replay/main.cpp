// impulse-replay: inspect, verify, export and serve session recordings (docs/RECORDING.md).
//   impulse-replay info FILE
//   impulse-replay verify FILE
//   impulse-replay export FILE --tick N --out scene.json
//   impulse-replay serve FILE --port P [--speed X] [--from TICK] [--bind ADDR] [--snapshot-hz N] [--loop]
//                        [--token-key KEY --controller ID ... | --anyone-controls]
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/app/server.h"
#include "server/record/replay.h"
#include "shared/version.h"

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
  uint32_t skipped = 0;
  const std::string json = to_scene_json(*replayed.world, replayed.dampings, replayed.scene_name, &skipped);
  if (skipped > 0) {
    std::fprintf(stderr, "impulse-replay: warning: left out %u bodies whose state is not finite (a scene holds only "
                 "finite numbers)\n", skipped);
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << json) || !out.flush()) {
    std::fprintf(stderr, "impulse-replay: cannot write %s\n", out_path.c_str());
    return 1;
  }
  std::printf("wrote %s: %u bodies at tick %llu (from the %s at tick %llu, re-simulated %llu ticks); start a server "
              "from it with: impulse-server --scene %s\n",
              out_path.c_str(), replayed.world->object_count() - skipped, static_cast<unsigned long long>(tick),
              replayed.keyframe_tick == tick ? "keyframe" : "nearest keyframe",
              static_cast<unsigned long long>(replayed.keyframe_tick),
              static_cast<unsigned long long>(tick - replayed.keyframe_tick), out_path.c_str());
  return 0;
}

struct ServeArgs {
  std::string bind = "0.0.0.0";
  int port = 7777;
  double speed = 1;
  std::optional<uint64_t> from;
  int snapshot_hz = 0;
  bool loop = false;
  int max_clients = 64;
  std::string log_level = "info";
  std::string token_key;                 // spectators need a connect token sealed with this key
  std::vector<uint32_t> controllers;     // token client ids that may control the shared timeline
  bool anyone_controls = false;
  int admin_port = 0;                    // /metrics, /healthz, /readyz; 0 = off
  std::string admin_bind = "127.0.0.1";
};

// Plays the recording to spectators until SIGINT/SIGTERM (caught on a helper io_context, as in
// impulse-server: the handler only asks the server to stop, which disconnects every spectator).
int run_serve(const std::string& path, const ServeArgs& a) {
  if (a.port < 0 || a.port > 65535) {
    std::fprintf(stderr, "impulse-replay: --port must be in 0..65535 (0 = any free port; got %d)\n", a.port);
    return 2;
  }
  if (!a.controllers.empty() && a.token_key.empty()) {
    std::fprintf(stderr, "impulse-replay: --controller needs --token-key: without tokens a client id proves nothing "
                         "(or use --anyone-controls for a trusted audience)\n");
    return 2;
  }
  if (!a.controllers.empty() && a.anyone_controls) {
    std::fprintf(stderr, "impulse-replay: give --controller or --anyone-controls, not both\n");
    return 2;
  }
  impulse::server::ServerConfig config;
  config.token_key_file = a.token_key;
  config.bind = a.bind;
  config.port = static_cast<uint16_t>(a.port);
  config.max_clients = a.max_clients;
  config.log_level = a.log_level;
  config.stats_interval_s = 3600;  // the replay's own status line (every 10 s) says what matters
  config.admin_port = a.admin_port;
  config.admin_bind = a.admin_bind;
  impulse::server::ReplayOptions replay;
  replay.file = path;
  replay.speed = a.speed;
  replay.from_tick = a.from;
  replay.snapshot_hz = a.snapshot_hz;
  replay.loop = a.loop;
  replay.controllers = a.controllers;
  replay.anyone_controls = a.anyone_controls;
  impulse::server::Server server(config, replay);
  std::string error;
  if (!server.start(&error)) {
    std::fprintf(stderr, "impulse-replay: %s\n", error.c_str());
    return 2;
  }
  impulse::server::run_until_signal(server);
  spdlog::info("bye");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"impulse-replay: inspect, verify, export and serve Impulse session recordings (impulse-server --record)",
               "impulse-replay"};
  app.set_version_flag("--version", impulse::version_line("impulse-replay"));
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
  ServeArgs serve_args;
  auto* serve = app.add_subcommand(
      "serve", "Play the recording to read-only spectators over the normal protocol; its controllers may pause, "
               "seek and change the speed of the one shared timeline");
  serve->add_option("FILE", path, "Recording file")->required();
  serve->add_option("--port", serve_args.port, "UDP port to listen on (0 = any free port)")->capture_default_str();
  serve->add_option("--bind", serve_args.bind, "Local address to listen on")->capture_default_str();
  serve->add_option("--speed", serve_args.speed, "Playback speed, times the recorded tick rate, in [1/16, 16]")
      ->capture_default_str();
  serve->add_option("--from", serve_args.from, "Start at this tick (default: the recording's first)");
  serve->add_option("--snapshot-hz", serve_args.snapshot_hz,
                    "Snapshots per second (default 0 = the recording's rate, so spectators see the recorded ticks)")
      ->capture_default_str();
  serve->add_flag("--loop", serve_args.loop, "At the end restart from the first tick instead of pausing");
  serve->add_option("--max-clients", serve_args.max_clients, "Spectators at most")->capture_default_str();
  serve->add_option("--log-level", serve_args.log_level, "trace, debug, info, warn, error, off")->capture_default_str();
  serve->add_option("--token-key", serve_args.token_key,
                    "Spectators need a connect token sealed with this key file (impulse-server keygen / token), as "
                    "with impulse-server --token-key");
  serve->add_option("--controller", serve_args.controllers,
                    "A token client id that may pause, seek and change the speed of the shared timeline "
                    "(repeatable; needs --token-key). Without it nobody may: the timeline plays as started")
      ->check(CLI::Range(1u, 4294967295u));
  serve->add_flag("--anyone-controls", serve_args.anyone_controls,
                  "Every spectator may control the shared timeline (a trusted audience, e.g. on loopback)");
  serve->add_option("--admin-port", serve_args.admin_port,
                    "TCP port of the admin endpoint (/metrics, /healthz, /readyz, as impulse-server's); 0 = off, "
                    "-1 = any free port")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  serve->add_option("--admin-bind", serve_args.admin_bind, "Local address of the admin endpoint")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // --help is not an error; a bad flag or value is a usage error
  }
  if (info->parsed()) return run_info(path);
  if (verify->parsed()) return run_verify(path);
  if (serve->parsed()) return run_serve(path, serve_args);
  return run_export(path, tick, out_path);
}
