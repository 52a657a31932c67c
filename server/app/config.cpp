// Flag parsing with CLI11 (each option also reads IMPULSE_<FLAG> via ->envname()), then explicit
// range checks with messages that name the flag, its range and what was given.
#include "server/app/config.h"

#include <cmath>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "server/app/agones.h"
#include "shared/wire/codec.h"
#include "shared/wire/quantize.h"

namespace impulse::server {
namespace {

constexpr int kMaxTickHz = 1000;
constexpr int kMaxClientsLimit = 4096;
constexpr int kMaxStepsPerFrameLimit = 100;
constexpr int kMaxThreadsLimit = 256;
constexpr double kMaxClientTimeoutS = 3600.0;
constexpr double kMaxStatsIntervalS = 3600.0;
constexpr double kMaxKeyframeSeconds = 3600.0;
constexpr double kMaxRotateMb = 1.0e6;
constexpr double kMaxRotateMinutes = 1.0e5;
constexpr double kMinAgonesHealthIntervalS = 0.05;
constexpr double kMaxAgonesHealthIntervalS = 300.0;
constexpr double kMaxAgonesShutdownWhenEmptyS = 7 * 24 * 3600.0;

bool is_log_level(std::string_view level) {
  for (std::string_view known : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    if (level == known) return true;
  }
  return false;
}

}  // namespace

std::string validate_config(const ServerConfig& c) {
  if (c.bind.empty()) return "--bind must be an IP address, e.g. 0.0.0.0 or ::1 (got an empty string)";
  if (c.tick_hz < 1 || c.tick_hz > kMaxTickHz) return fmt::format("--tick-hz must be in 1..{} (got {})", kMaxTickHz, c.tick_hz);
  if (c.snapshot_hz < 1 || c.snapshot_hz > c.tick_hz) {
    return fmt::format("--snapshot-hz must be in 1..{} (1..--tick-hz; got {})", c.tick_hz, c.snapshot_hz);
  }
  if (c.scene.empty()) return "--scene must be \"demo\" or the path of a JSON scene file (got an empty string)";
  if (c.max_clients < 1 || c.max_clients > kMaxClientsLimit) {
    return fmt::format("--max-clients must be in 1..{} (got {})", kMaxClientsLimit, c.max_clients);
  }
  if (!std::isfinite(c.client_timeout_s) || c.client_timeout_s <= 0.0 || c.client_timeout_s > kMaxClientTimeoutS) {
    return fmt::format("--client-timeout must be in (0, {}] seconds (got {})", kMaxClientTimeoutS, c.client_timeout_s);
  }
  if (c.max_steps_per_frame < 1 || c.max_steps_per_frame > kMaxStepsPerFrameLimit) {
    return fmt::format("--max-steps-per-frame must be in 1..{} (got {})", kMaxStepsPerFrameLimit, c.max_steps_per_frame);
  }
  if (c.threads < 0 || c.threads > kMaxThreadsLimit) {
    return fmt::format("--threads must be in 0..{} (0 = one per CPU core; got {})", kMaxThreadsLimit, c.threads);
  }
  if (!std::isfinite(c.stats_interval_s) || c.stats_interval_s <= 0.0 || c.stats_interval_s > kMaxStatsIntervalS) {
    return fmt::format("--stats-interval must be in (0, {}] seconds (got {})", kMaxStatsIntervalS, c.stats_interval_s);
  }
  if (!c.record_file.empty() && !c.record_dir.empty()) {
    return "--record and --record-dir are exclusive: give a file or a directory, not both";
  }
  if (!(c.keyframe_seconds > 0.0 && c.keyframe_seconds <= kMaxKeyframeSeconds)) {
    return fmt::format("--keyframe-seconds must be in (0, {}] seconds (got {})", kMaxKeyframeSeconds, c.keyframe_seconds);
  }
  if (!(c.record_rotate_mb >= 0.0 && c.record_rotate_mb <= kMaxRotateMb)) {
    return fmt::format("--record-rotate-mb must be in [0, {}] (0 = never; got {})", kMaxRotateMb, c.record_rotate_mb);
  }
  if (!(c.record_rotate_minutes >= 0.0 && c.record_rotate_minutes <= kMaxRotateMinutes)) {
    return fmt::format("--record-rotate-minutes must be in [0, {}] (0 = never; got {})", kMaxRotateMinutes,
                       c.record_rotate_minutes);
  }
  if (c.record_dir.empty() && (c.record_rotate_mb > 0.0 || c.record_rotate_minutes > 0.0)) {
    return "--record-rotate-mb and --record-rotate-minutes need --record-dir (a single --record file is never rotated)";
  }
  if (c.authority != "owner" && c.authority != "any") {
    return fmt::format("--authority must be \"owner\" or \"any\" (got \"{}\")", c.authority);
  }
  if (c.max_objects_per_client < 0 || c.max_objects_per_client > 1000000) {
    return fmt::format("--max-objects-per-client must be in 0..1000000 (0 = no limit; got {})", c.max_objects_per_client);
  }
  if (c.max_client_objects < 0 || c.max_client_objects > 1000000) {
    return fmt::format("--max-client-objects must be in 0..1000000 (0 = no limit; got {})", c.max_client_objects);
  }
  if (!(c.max_client_extent >= 0.0 && c.max_client_extent <= wire::kMaxExtent)) {
    return fmt::format("--max-client-extent must be in [0, {:g}] m (0 = the world's limit; got {})",
                       static_cast<double>(wire::kMaxExtent), c.max_client_extent);
  }
  if (c.max_client_extent > 0.0 && c.max_client_extent < wire::kMinExtent) {
    return fmt::format("--max-client-extent must be at least the smallest body, {:g} m (got {})",
                       static_cast<double>(wire::kMinExtent), c.max_client_extent);
  }
  if (c.max_spawn_overlaps < 0 || c.max_spawn_overlaps > 1000000) {
    return fmt::format("--max-spawn-overlaps must be in 0..1000000 (0 = no limit; got {})", c.max_spawn_overlaps);
  }
  if (c.max_objects_per_address < -1 || c.max_objects_per_address > 1000000) {
    return fmt::format("--max-objects-per-address must be in -1..1000000 (-1 = as --max-objects-per-client, 0 = no "
                       "limit; got {})",
                       c.max_objects_per_address);
  }
  if (c.on_disconnect != "destroy" && c.on_disconnect != "keep") {
    return fmt::format("--on-disconnect must be \"destroy\" or \"keep\" (got \"{}\")", c.on_disconnect);
  }
  if (c.max_requests_per_second < 0 || c.max_requests_per_second > 1000000) {
    return fmt::format("--max-requests-per-second must be in 0..1000000 (0 = no limit; got {})", c.max_requests_per_second);
  }
  if (c.max_kbytes_in_per_second < 0 || c.max_kbytes_in_per_second > 1000000) {
    return fmt::format("--max-kbytes-in-per-second must be in 0..1000000 (0 = no limit; got {})",
                       c.max_kbytes_in_per_second);
  }
  if (c.max_kbps_per_client < 16 || c.max_kbps_per_client > 1000000) {
    return fmt::format("--max-kbps-per-client must be in 16..1000000 kbit/s (got {})", c.max_kbps_per_client);
  }
  if (!(c.world_bound >= 1.0 && c.world_bound <= wire::kMaxWorldBoundM)) {
    return fmt::format("--world-bound must be in [1, {:g}] m (got {})", wire::kMaxWorldBoundM, c.world_bound);
  }
  if (c.position_fraction_bits < 4 || c.position_fraction_bits > 14) {
    return fmt::format("--position-bits must be in 4..14 (step 2^-bits m; got {})", c.position_fraction_bits);
  }
  {
    wire::QuantizationConfig q;
    q.world_bound_m = static_cast<float>(c.world_bound);
    q.position_fraction_bits = static_cast<uint8_t>(c.position_fraction_bits);
    if (std::string problem; !q.validate(&problem)) {
      return fmt::format("--world-bound {} with --position-bits {} cannot be quantised: {}", c.world_bound,
                         c.position_fraction_bits, problem);
    }
  }
  for (const auto& [flag, value] : {std::pair{"--sim-loss", c.sim_loss}, std::pair{"--sim-duplicate", c.sim_duplicate},
                                    std::pair{"--sim-reorder", c.sim_reorder}}) {
    if (!(value >= 0.0 && value <= 1.0)) return fmt::format("{} must be a probability in [0, 1] (got {})", flag, value);
  }
  for (const auto& [flag, value] : {std::pair{"--sim-latency-ms", c.sim_latency_ms}, std::pair{"--sim-jitter-ms", c.sim_jitter_ms}}) {
    if (!(value >= 0.0 && value <= 10000.0)) return fmt::format("{} must be in [0, 10000] ms (got {})", flag, value);
  }
  if (!(c.agones_health_interval_s >= kMinAgonesHealthIntervalS && c.agones_health_interval_s <= kMaxAgonesHealthIntervalS)) {
    return fmt::format("--agones-health-interval must be in [{}, {}] seconds, and below the fleet's health "
                       "periodSeconds (got {})",
                       kMinAgonesHealthIntervalS, kMaxAgonesHealthIntervalS, c.agones_health_interval_s);
  }
  if (!(c.agones_shutdown_when_empty_s >= 0.0 && c.agones_shutdown_when_empty_s <= kMaxAgonesShutdownWhenEmptyS)) {
    return fmt::format("--agones-shutdown-when-empty must be in [0, {}] seconds (0 = never; got {})",
                       kMaxAgonesShutdownWhenEmptyS, c.agones_shutdown_when_empty_s);
  }
  if (c.admin_bind.empty()) return "--admin-bind must be an IP address, e.g. 127.0.0.1 or 0.0.0.0 (got an empty string)";
  if (c.admin_port < -1 || c.admin_port > 65535) {
    return fmt::format("--admin-port must be in 0..65535 (0 = off; -1 = an ephemeral port; got {})", c.admin_port);
  }
  if (c.admin_port != 0 && c.port != 0 && c.admin_port == c.port) {
    // Not a conflict for the kernel (TCP and UDP), but certainly a typo in a deployment.
    return fmt::format("--admin-port {} is the game's --port: give the admin endpoint a port of its own", c.admin_port);
  }
  if (!(c.health_stall_seconds >= 0.05 && c.health_stall_seconds <= 3600.0)) {
    return fmt::format("--health-stall-seconds must be in [0.05, 3600] s (got {})", c.health_stall_seconds);
  }
  if (!is_log_level(c.log_level)) {
    return fmt::format("--log-level must be one of trace, debug, info, warn, error, critical, off (got \"{}\")",
                       c.log_level);
  }
  return {};
}

ParseStatus parse_config(int argc, const char* const* argv, ServerConfig& config, std::string* message) {
  auto set_message = [&](std::string text) {
    if (message) *message = std::move(text);
  };

  CLI::App app{fmt::format("impulse-server: authoritative 3D rigid-body physics over UDP (FlatBuffers, protocol v{}).\n"
                           "Every flag --foo-bar can also be set as the environment variable IMPULSE_FOO_BAR; the "
                           "flag wins.\n"
                           "Connect tokens: impulse-server keygen --out FILE, then impulse-server token --key FILE "
                           "--client-id N --ttl SECONDS (each with --help).",
                           wire::kProtocolVersion),
               "impulse-server"};
  app.set_version_flag("--version", "impulse-server 0.1.0");
  app.get_formatter()->column_width(34);

  // Ports are parsed as int so that an out-of-range value gets our message, not a conversion error.
  int port = config.port;
  app.add_option("--bind", config.bind, "Local IP address to listen on (IPv4 or IPv6)")
      ->envname("IMPULSE_BIND")->capture_default_str();
  app.add_option("--port", port, "UDP port, 0..65535; 0 picks a free ephemeral port")
      ->envname("IMPULSE_PORT")->capture_default_str();
  app.add_option("--tick-hz", config.tick_hz, "Physics steps per second [Hz], 1..1000")
      ->envname("IMPULSE_TICK_HZ")->capture_default_str();
  app.add_option("--snapshot-hz", config.snapshot_hz, "Snapshots sent to each client per second [Hz], 1..tick-hz")
      ->envname("IMPULSE_SNAPSHOT_HZ")->capture_default_str();
  app.add_option("--scene", config.scene, "\"demo\" (built in) or the path of a JSON scene file (schemas/scene.fbs)")
      ->envname("IMPULSE_SCENE")->capture_default_str();
  app.add_option("--max-clients", config.max_clients, "Sessions at most, 1..4096; more get ServerFull")
      ->envname("IMPULSE_MAX_CLIENTS")->capture_default_str();
  app.add_option("--client-timeout", config.client_timeout_s, "Silence [s] before a session is dropped, (0, 3600]")
      ->envname("IMPULSE_CLIENT_TIMEOUT")->capture_default_str();
  app.add_option("--max-steps-per-frame", config.max_steps_per_frame,
                 "Physics steps at most per wake-up, 1..100; time beyond is dropped and counted")
      ->envname("IMPULSE_MAX_STEPS_PER_FRAME")->capture_default_str();
  app.add_option("--threads", config.threads,
                 "Threads for the physics step and the snapshot writes, 0..256; 0 = one per CPU core "
                 "(results are identical for any value)")
      ->envname("IMPULSE_THREADS")->capture_default_str();
  app.add_option("--stats-interval", config.stats_interval_s, "Seconds between stats log lines [s], (0, 3600]")
      ->envname("IMPULSE_STATS_INTERVAL")->capture_default_str();
  app.add_option("--log-level", config.log_level, "trace, debug, info, warn, error, critical or off")
      ->envname("IMPULSE_LOG_LEVEL")->capture_default_str();

  app.add_option("--record", config.record_file,
                 "Record the session into this file (docs/RECORDING.md); replay with impulse-replay")
      ->envname("IMPULSE_RECORD");
  app.add_option("--record-dir", config.record_dir,
                 "Record into this directory: one file per run, named by its UTC start time")
      ->envname("IMPULSE_RECORD_DIR");
  app.add_option("--record-rotate-mb", config.record_rotate_mb,
                 "With --record-dir: start a new file after this many MB; 0 = never")
      ->envname("IMPULSE_RECORD_ROTATE_MB")->capture_default_str();
  app.add_option("--record-rotate-minutes", config.record_rotate_minutes,
                 "With --record-dir: start a new file after this many minutes; 0 = never")
      ->envname("IMPULSE_RECORD_ROTATE_MINUTES")->capture_default_str();
  app.add_option("--keyframe-seconds", config.keyframe_seconds,
                 "Seconds of simulated time between full keyframes in a recording, (0, 3600]")
      ->envname("IMPULSE_KEYFRAME_SECONDS")->capture_default_str();

  app.add_option("--token-key", config.token_key_file,
                 "Key file (impulse-server keygen): clients must present a connect token sealed with it; "
                 "without it anonymous clients are accepted")
      ->envname("IMPULSE_TOKEN_KEY");
  app.add_option("--authority", config.authority,
                 "owner: clients push/destroy only objects they created (and push shared ones and the scene's, which no "
                 "client may destroy); any: every object")
      ->envname("IMPULSE_AUTHORITY")->capture_default_str();
  app.add_option("--max-objects-per-client", config.max_objects_per_client,
                 "Live objects one client may own, 0..1000000 (0 = no limit; a token may set its own)")
      ->envname("IMPULSE_MAX_OBJECTS_PER_CLIENT")->capture_default_str();
  app.add_option("--max-client-objects", config.max_client_objects,
                 "Live objects all clients together may own (the scene's not counted), 0..1000000; then WorldFull "
                 "(0 = no limit)")
      ->envname("IMPULSE_MAX_CLIENT_OBJECTS")->capture_default_str();
  app.add_option("--max-client-extent", config.max_client_extent,
                 "Largest radius, half extent or capsule half height + radius [m] of a client's body, [0, 1000] "
                 "(0 = the world's 1000 m); clients may not create planes")
      ->envname("IMPULSE_MAX_CLIENT_EXTENT")->capture_default_str();
  app.add_option("--max-spawn-overlaps", config.max_spawn_overlaps,
                 "Bodies a client's new body may overlap when created; more is QuotaExceeded (0 = no limit)")
      ->envname("IMPULSE_MAX_SPAWN_OVERLAPS")->capture_default_str();
  app.add_option("--max-objects-per-address", config.max_objects_per_address,
                 "Anonymous mode: live objects all sessions from one IP address may own together, kept objects "
                 "included, -1..1000000 (-1 = as --max-objects-per-client, 0 = no limit)")
      ->envname("IMPULSE_MAX_OBJECTS_PER_ADDRESS")->capture_default_str();
  app.add_option("--on-disconnect", config.on_disconnect,
                 "destroy: a client's objects are destroyed when its session ends; keep: they stay")
      ->envname("IMPULSE_ON_DISCONNECT")->capture_default_str();
  app.add_option("--max-requests-per-second", config.max_requests_per_second,
                 "Requests per second per client before RateLimited answers (0 = no limit)")
      ->envname("IMPULSE_MAX_REQUESTS_PER_SECOND")->capture_default_str();
  app.add_option("--max-kbytes-in-per-second", config.max_kbytes_in_per_second,
                 "KiB per second received per client before datagrams are dropped (0 = no limit)")
      ->envname("IMPULSE_MAX_KBYTES_IN_PER_SECOND")->capture_default_str();
  app.add_option("--max-kbps-per-client", config.max_kbps_per_client,
                 "Send budget per client [kbit/s], 16..1000000; snapshots are cut to fit it")
      ->envname("IMPULSE_MAX_KBPS_PER_CLIENT")->capture_default_str();
  app.add_option("--world-bound", config.world_bound,
                 fmt::format("Snapshots carry objects with every |coordinate| <= this [m], [1, {:g}]; "
                             "this times 2^position-bits must be <= 2^24",
                             wire::kMaxWorldBoundM))
      ->envname("IMPULSE_WORLD_BOUND")->capture_default_str();
  app.add_option("--position-bits", config.position_fraction_bits,
                 "Snapshot position precision: 2^-bits m, 4..14 (9 = 1/512 m)")
      ->envname("IMPULSE_POSITION_BITS")->capture_default_str();
  auto* admin = app.add_option_group(
      "Admin HTTP", "Prometheus /metrics, /healthz and /readyz over HTTP (docs: README, \"Operating Impulse\")");
  admin->add_option("--admin-port", config.admin_port,
                    "TCP port of the admin endpoint, 0..65535; 0 = off, the default, so nothing new listens unless "
                    "asked (-1 = any free port, logged)")
      ->envname("IMPULSE_ADMIN_PORT")->capture_default_str();
  admin->add_option("--admin-bind", config.admin_bind,
                    "Address of the admin endpoint: loopback by default, so only this machine can scrape it unless "
                    "the operator binds wider (0.0.0.0 in a container)")
      ->envname("IMPULSE_ADMIN_BIND")->capture_default_str();
  admin->add_option("--health-stall-seconds", config.health_stall_seconds,
                    "/healthz answers 503 once the last completed tick is older than this [s], [0.05, 3600]")
      ->envname("IMPULSE_HEALTH_STALL_SECONDS")->capture_default_str();
  auto* sim = app.add_option_group("Network simulation", "Testing only: impair every datagram the server sends");
  sim->add_option("--sim-loss", config.sim_loss, "Probability a datagram is lost, [0, 1]")->envname("IMPULSE_SIM_LOSS");
  sim->add_option("--sim-latency-ms", config.sim_latency_ms, "Added one-way latency [ms]")->envname("IMPULSE_SIM_LATENCY_MS");
  sim->add_option("--sim-jitter-ms", config.sim_jitter_ms, "Latency jitter, +- [ms]")->envname("IMPULSE_SIM_JITTER_MS");
  sim->add_option("--sim-duplicate", config.sim_duplicate, "Probability a datagram is sent twice, [0, 1]")
      ->envname("IMPULSE_SIM_DUPLICATE");
  sim->add_option("--sim-reorder", config.sim_reorder, "Probability a datagram is delayed past later ones, [0, 1]")
      ->envname("IMPULSE_SIM_REORDER");
  sim->add_option("--sim-seed", config.sim_seed, "Seed of the simulation's random numbers")->envname("IMPULSE_SIM_SEED");

  // Agones sets AGONES_SDK_HTTP_PORT in every game server's pod, so that variable (not an IMPULSE_
  // one) is --agones-port's fallback: inside a fleet the lifecycle turns itself on.
  int agones_port = config.agones_port;
  auto* agones = app.add_option_group("Agones", "The Agones game-server lifecycle through the SDK sidecar's REST API");
  agones->add_flag("--agones", config.agones,
                   "Call Ready, then Health on a timer, and Shutdown on SIGTERM, on the SDK sidecar at "
                   "localhost:--agones-port (on by itself when AGONES_SDK_HTTP_PORT is set)")
      ->envname("IMPULSE_AGONES");
  agones->add_option("--agones-port", agones_port,
                     "The SDK sidecar's REST port, 0..65535; non-zero turns the lifecycle on (0 = 9358 with --agones)")
      ->envname("AGONES_SDK_HTTP_PORT")->capture_default_str();
  agones->add_option("--agones-health-interval", config.agones_health_interval_s,
                     "Seconds between Health calls, [0.05, 300]; keep it below the fleet's health periodSeconds")
      ->envname("IMPULSE_AGONES_HEALTH_INTERVAL")->capture_default_str();
  agones->add_option("--agones-shutdown-when-empty", config.agones_shutdown_when_empty_s,
                     "Call Shutdown when no client has been connected for this many seconds after the last one "
                     "left (0 = never)")
      ->envname("IMPULSE_AGONES_SHUTDOWN_WHEN_EMPTY")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    set_message(app.help());
    return ParseStatus::Exit;
  } catch (const CLI::CallForAllHelp&) {
    set_message(app.help("", CLI::AppFormatMode::All));
    return ParseStatus::Exit;
  } catch (const CLI::CallForVersion& e) {
    set_message(e.what());
    return ParseStatus::Exit;
  } catch (const CLI::ParseError& e) {
    set_message(fmt::format("{} (run impulse-server --help for every flag, its range and default)", e.what()));
    return ParseStatus::Error;
  }

  if (port < 0 || port > 65535) {
    set_message(fmt::format("--port must be in 0..65535 (got {})", port));
    return ParseStatus::Error;
  }
  config.port = static_cast<uint16_t>(port);
  if (agones_port < 0 || agones_port > 65535) {
    set_message(fmt::format("--agones-port (or AGONES_SDK_HTTP_PORT) must be in 0..65535 (got {})", agones_port));
    return ParseStatus::Error;
  }
  config.agones_port = static_cast<uint16_t>(agones_port);
  if (std::string problem = validate_config(config); !problem.empty()) {
    set_message(std::move(problem));
    return ParseStatus::Error;
  }
  return ParseStatus::Run;
}

std::string describe_config(const ServerConfig& c) {
  return fmt::format(
      "bind={} port={} tick_hz={} snapshot_hz={} scene={} max_clients={} client_timeout={}s "
      "max_steps_per_frame={} threads={} stats_interval={}s log_level={} record={} record_dir={} record_rotate_mb={} "
      "record_rotate_minutes={} keyframe_seconds={} token_key={} authority={} max_objects_per_client={} "
      "max_client_objects={} max_client_extent={}m max_spawn_overlaps={} "
      "max_objects_per_address={} on_disconnect={} max_requests_per_second={} max_kbytes_in_per_second={} max_kbps_per_client={} world_bound={}m "
      "position_bits={} agones={} admin={}{}",
      c.bind, c.port, c.tick_hz, c.snapshot_hz, c.scene, c.max_clients, c.client_timeout_s, c.max_steps_per_frame,
      c.threads == 0 ? std::string("auto") : std::to_string(c.threads), c.stats_interval_s, c.log_level, c.record_file.empty() ? "-" : c.record_file,
      c.record_dir.empty() ? "-" : c.record_dir, c.record_rotate_mb, c.record_rotate_minutes, c.keyframe_seconds,
      c.token_key_file.empty() ? "-" : c.token_key_file, c.authority, c.max_objects_per_client,
      c.max_client_objects, c.max_client_extent, c.max_spawn_overlaps,
      c.max_objects_per_address, c.on_disconnect, c.max_requests_per_second, c.max_kbytes_in_per_second, c.max_kbps_per_client, c.world_bound,
      c.position_fraction_bits,
      agones_enabled(c) ? fmt::format("localhost:{} health_interval={}s shutdown_when_empty={}", c.agones_port != 0 ? c.agones_port : kAgonesDefaultHttpPort,
                                      c.agones_health_interval_s,
                                      c.agones_shutdown_when_empty_s > 0 ? fmt::format("{}s", c.agones_shutdown_when_empty_s) : std::string("off"))
                        : std::string("off"),
      c.admin_port == 0 ? std::string("off") : fmt::format("{}:{} stall={}s", c.admin_bind, c.admin_port, c.health_stall_seconds),
      c.sim_loss > 0 || c.sim_latency_ms > 0 || c.sim_jitter_ms > 0 || c.sim_duplicate > 0 || c.sim_reorder > 0
          ? fmt::format(" SIMULATED LINK loss={} latency={}ms jitter={}ms duplicate={} reorder={} seed={}", c.sim_loss,
                        c.sim_latency_ms, c.sim_jitter_ms, c.sim_duplicate, c.sim_reorder, c.sim_seed)
          : std::string{});
}

}  // namespace impulse::server
