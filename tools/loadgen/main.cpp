// impulse-loadgen: N bot clients connect to an Impulse server, spawn M bodies between them, push
// them for S seconds, destroy them and disconnect; then it reports the server's tick time and CPU
// use (with --server inproc, which runs the server in this process), bytes per client, RTT and
// the errors (the capacity target, docs/BENCHMARKS.md "Targets": 256 clients and 5,000 bodies
// with a server tick p99 <= 16.6 ms).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "impulse/client.h"
#include "tools/loadgen/bots.h"
#include "tools/loadgen/inproc_server.h"
#include "shared/version.h"

namespace {

using namespace impulse;

constexpr int kExitBadArgument = 2;
constexpr int kExitRunFailed = 3;

struct Options {
  std::string server = "inproc";
  tools::LoadOptions load;
  bool json = false;
  // In-process server only.
  int tick_hz = 60;
  int snapshot_hz = 20;
  std::string scene = "demo";
  int kbps = 0;  // 0 = the server's default
  int server_threads = 0;  // --server-threads: 0 = one per core
  std::string log_level = "warn";
  int admin_port = 0;  // --admin-port: the server's admin endpoint (0 = off), to measure scraping's cost
};

int run(Options& o) {
  std::unique_ptr<tools::InprocServer> server;
  if (o.server == "inproc") {
    server::ServerConfig config;
    config.bind = "127.0.0.1";
    config.port = 0;
    config.tick_hz = o.tick_hz;
    config.snapshot_hz = o.snapshot_hz;
    config.scene = o.scene;
    config.max_clients = o.load.clients;
    config.stats_interval_s = 1.0;  // ServerStats::tick_ns_p50/p99 are per stats window
    config.log_level = o.log_level;
    if (o.kbps > 0) config.max_kbps_per_client = o.kbps;
    config.threads = o.server_threads;
    // Every bot shares 127.0.0.1: the per-address quota of anonymous clients would cap them all
    // together. Each bot keeps its own --max-objects-per-client quota.
    config.max_objects_per_address = 0;
    config.admin_port = o.admin_port;
    std::string error;
    server = tools::InprocServer::start(config, {}, &error);
    if (!server) {
      std::fprintf(stderr, "impulse-loadgen: the in-process server did not start: %s\n", error.c_str());
      return kExitRunFailed;
    }
    o.load.host = "127.0.0.1";
    o.load.port = server->port();
  } else {
    std::string error;
    if (!parse_host_port(o.server, &o.load.host, &o.load.port, &error)) {
      std::fprintf(stderr, "impulse-loadgen: --server: %s (expected HOST:PORT or inproc)\n", error.c_str());
      return kExitBadArgument;
    }
  }
  if (o.load.progress) {
    std::fprintf(stderr, "[impulse-loadgen] %d clients, %d bodies, %.0f s against %s\n", o.load.clients, o.load.bodies,
                 o.load.seconds, server ? "an in-process server" : o.server.c_str());
  }
  const tools::LoadReport report = tools::run_load(o.load, server.get());
  if (server) server->stop();
  if (o.json) {
    std::printf("%s\n", tools::to_json_line(report).c_str());
  } else {
    tools::print_human(stdout, report);
  }
  if (report.clients_connected == 0) {
    std::fprintf(stderr, "impulse-loadgen: no client could connect: %s\n", report.first_connect_error.c_str());
    return kExitRunFailed;
  }
  if (report.connect_failures > 0) {
    std::fprintf(stderr, "impulse-loadgen: %d of %d clients could not connect\n", report.connect_failures, report.clients);
    return kExitRunFailed;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"impulse-loadgen: bot clients that connect, spawn and push bodies for a bounded time, then report"};
  app.set_version_flag("--version", impulse::version_line("impulse-loadgen"));
  app.add_option("--server", o.server, "HOST:PORT of a running server, or inproc to run one in this process");
  app.add_option("--clients", o.load.clients, "bot clients")->check(CLI::Range(1, 4096));
  app.add_option("--bodies", o.load.bodies, "bodies spawned in total, spread over the clients (within their quotas)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--seconds", o.load.seconds, "length of the measured push phase [s]")->check(CLI::Range(1.0, 3600.0));
  app.add_option("--threads", o.load.threads, "threads polling the bots")->check(CLI::Range(1, 64));
  app.add_option("--push-interval", o.load.push_interval_s, "each body is pushed once per this many seconds")
      ->check(CLI::Range(0.01, 600.0));
  app.add_option("--push-speed", o.load.push_speed, "speed change of a push [m/s]")->check(CLI::Range(0.0f, 100.0f));
  app.add_flag("--inputs", o.load.inputs,
               "each bot also drives its first body with one tick-stamped Input a tick (0.5 N), as a player would");
  app.add_option("--interest-radius", o.load.interest_radius,
                 "each bot's area of interest: a sphere of this radius [m] about its bodies; 0 = the whole world")
      ->check(CLI::Range(0.0f, 10000.0f));
  app.add_option("--spawn-x0", o.load.spawn_x0, "x [m] of the first column of the spawn grid (clear of the demo scene)")
      ->check(CLI::Range(-900.0f, 900.0f));
  app.add_option("--spawn-height", o.load.spawn_height, "height [m] of the bodies' centres at spawn")
      ->check(CLI::Range(-900.0f, 900.0f));
  app.add_option("--spacing", o.load.spacing, "spawn grid pitch [m]")->check(CLI::Range(0.6f, 100.0f));
  app.add_option("--max-request-rate", o.load.max_requests_per_second, "requests per second at most per bot")
      ->check(CLI::Range(1.0, 100000.0));
  int frame_ms = 5;
  app.add_option("--bot-nice", o.load.bot_nice,
                 "nice value of the bot threads, so they take the CPU the server leaves (0: compete as equals)")
      ->check(CLI::Range(0, 19));
  app.add_option("--frame-ms", frame_ms, "each bot thread sweeps its bots this often [ms]")->check(CLI::Range(1, 1000));
  app.add_option("--phase-timeout", o.load.phase_timeout_s, "deadline [s] of each of the connect, spawn and destroy phases")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--settle", o.load.settle_s,
                 "after spawning, poll for at most this long [s] so the bodies land and sleep before the measured "
                 "push phase (inproc: ends once <= 1 % are awake); 0 = none")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--tick-hz", o.tick_hz, "inproc: physics steps per second")->check(CLI::Range(1, 1000));
  app.add_option("--snapshot-hz", o.snapshot_hz, "inproc: snapshots per second")->check(CLI::Range(1, 1000));
  app.add_option("--scene", o.scene, "inproc: the server's scene (demo or a JSON scene file)");
  app.add_option("--kbps", o.kbps, "inproc: per-client send budget [kbit/s] (default: the server's, 1024)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--server-threads", o.server_threads,
                 "inproc: the server's --threads (physics solve and snapshot writes); 0 = one per core")
      ->check(CLI::Range(0, 256));
  app.add_option("--admin-port", o.admin_port,
                 "inproc: serve the server's admin endpoint (/metrics) on 127.0.0.1 at this TCP port; 0 = off")
      ->check(CLI::Range(0, 65535));
  app.add_option("--log-level", o.log_level, "inproc: the server's log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_flag("--json", o.json, "print one JSON object instead of the summary");
  bool quiet = false;
  app.add_flag("--quiet", quiet, "no progress lines on stderr");
  CLI11_PARSE(app, argc, argv);
  o.load.progress = !quiet;
  o.load.frame = std::chrono::milliseconds{frame_ms};
  if (o.server == "inproc" && o.snapshot_hz > o.tick_hz) {
    std::fprintf(stderr, "impulse-loadgen: --snapshot-hz must be <= --tick-hz\n");
    return kExitBadArgument;
  }
  return run(o);
}
