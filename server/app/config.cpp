// Flag parsing with CLI11 (each option also reads IMPULSE_<FLAG> via ->envname()), the --config
// file (CLI11's TOML reader, applied after the flags and the environment so that they win), then
// explicit range checks with messages that name the flag (and the file's line), its range and what
// was given.
// Over 700 lines on purpose: one add() per flag with its help text and one range check per flag;
// the flag list is the file.
#include "server/app/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "server/app/agones.h"
#include "server/app/log_format.h"
#include "shared/version.h"
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

/// An IPv4 or IPv6 address literal (an IPv6 scope, "%eth0", allowed): what --bind and
/// --admin-bind must be, checked here so that --dump-config and a config check catch a name or a
/// typo rather than the bind at start-up.
bool is_ip_address(const std::string& text) {
  const std::string address = text.substr(0, text.find('%'));
  in6_addr buffer{};
  return ::inet_pton(AF_INET, address.c_str(), &buffer) == 1 || ::inet_pton(AF_INET6, address.c_str(), &buffer) == 1;
}

bool is_log_level(std::string_view level) {
  for (std::string_view known : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    if (level == known) return true;
  }
  return false;
}

}  // namespace

namespace {

/// The largest count a per-client or per-server limit may be set to (objects, joints, requests
/// a second, ...): far beyond any real use, small enough that sums of them stay in an int.
constexpr int kMaxLimit = 1'000'000;
/// The largest --tick-budget-min-work and --max-wakes-per-tick [work units, bodies].
constexpr int kMaxWorkUnits = 10'000'000;

/// "" when `value` is in 0..kMaxLimit; else the error naming `flag` (0 means no limit).
std::string no_limit_or_count(std::string_view flag, int value) {
  if (value >= 0 && value <= kMaxLimit) return {};
  return fmt::format("{} must be in 0..{} (0 = no limit; got {})", flag, kMaxLimit, value);
}

}  // namespace

std::string validate_config(const ServerConfig& c) {
  if (!is_ip_address(c.bind)) {
    return fmt::format("--bind must be an IP address, e.g. 0.0.0.0 or ::1 (got \"{}\")", json_escape(c.bind));
  }
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
  if (std::string e = no_limit_or_count("--max-objects-per-client", c.max_objects_per_client); !e.empty()) return e;
  if (std::string e = no_limit_or_count("--max-client-objects", c.max_client_objects); !e.empty()) return e;
  if (!(c.max_client_extent >= 0.0 && c.max_client_extent <= wire::kMaxExtent)) {
    return fmt::format("--max-client-extent must be in [0, {:g}] m (0 = the world's limit; got {})",
                       static_cast<double>(wire::kMaxExtent), c.max_client_extent);
  }
  if (c.max_client_extent > 0.0 && c.max_client_extent < wire::kMinExtent) {
    return fmt::format("--max-client-extent must be at least the smallest body, {:g} m (got {})",
                       static_cast<double>(wire::kMinExtent), c.max_client_extent);
  }
  if (!(c.tick_budget_ms >= 0.0 && c.tick_budget_ms <= 1000.0)) {
    return fmt::format("--tick-budget-ms must be in [0, 1000] (0 = off; got {})", c.tick_budget_ms);
  }
  if (c.tick_budget_min_work < 0 || c.tick_budget_min_work > kMaxWorkUnits) {
    return fmt::format("--tick-budget-min-work must be in 0..{} (got {})", kMaxWorkUnits, c.tick_budget_min_work);
  }
  if (c.max_wakes_per_tick < 0 || c.max_wakes_per_tick > kMaxWorkUnits) {
    return fmt::format("--max-wakes-per-tick must be in 0..{} (0 = no limit; got {})", kMaxWorkUnits, c.max_wakes_per_tick);
  }
  if (c.lag_compensation_ms < 0 || c.lag_compensation_ms > 1000) {
    return fmt::format("--lag-compensation-ms must be in 0..1000 (0 = off; got {})", c.lag_compensation_ms);
  }
  if (c.relay_inputs < 0 || c.relay_inputs > static_cast<int>(wire::kMaxRelayedInputs)) {
    return fmt::format("--relay-inputs must be in 0..{} (got {})", wire::kMaxRelayedInputs, c.relay_inputs);
  }
  if (c.max_input_lead_ms < 0 || c.max_input_lead_ms > 1000) {
    return fmt::format("--max-input-lead-ms must be in 0..1000 (got {})", c.max_input_lead_ms);
  }
  if (std::string e = no_limit_or_count("--max-joints-per-client", c.max_joints_per_client); !e.empty()) return e;
  if (std::string e = no_limit_or_count("--max-client-joints", c.max_client_joints); !e.empty()) return e;
  if (std::string e = no_limit_or_count("--max-spawn-overlaps", c.max_spawn_overlaps); !e.empty()) return e;
  if (c.max_objects_per_address < -1 || c.max_objects_per_address > kMaxLimit) {
    return fmt::format("--max-objects-per-address must be in -1..{} (-1 = as --max-objects-per-client, 0 = no "
                       "limit; got {})",
                       kMaxLimit, c.max_objects_per_address);
  }
  if (c.max_sessions_per_address < 0 || c.max_sessions_per_address > 100000) {
    return fmt::format("--max-sessions-per-address must be in 0..100000 (0 = no limit; got {})",
                       c.max_sessions_per_address);
  }
  if (c.on_disconnect != "destroy" && c.on_disconnect != "keep") {
    return fmt::format("--on-disconnect must be \"destroy\" or \"keep\" (got \"{}\")", c.on_disconnect);
  }
  if (std::string e = no_limit_or_count("--max-requests-per-second", c.max_requests_per_second); !e.empty()) return e;
  if (std::string e = no_limit_or_count("--max-kbytes-in-per-second", c.max_kbytes_in_per_second); !e.empty()) return e;
  if (c.max_kbps_per_client < 16 || c.max_kbps_per_client > kMaxLimit) {
    return fmt::format("--max-kbps-per-client must be in 16..{} kbit/s (got {})", kMaxLimit, c.max_kbps_per_client);
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
  if (!(c.drain_seconds == -1.0 || (c.drain_seconds >= 0.0 && c.drain_seconds <= 3600.0))) {
    return fmt::format("--drain-seconds must be -1 (30 with Agones, 0 otherwise) or in [0, 3600] (got {})",
                       c.drain_seconds);
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
  if (!is_ip_address(c.admin_bind)) {
    return fmt::format("--admin-bind must be an IP address, e.g. 127.0.0.1 or 0.0.0.0 (got \"{}\")",
                       json_escape(c.admin_bind));
  }
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
  if (LogFormat format{}; !parse_log_format(c.log_format, &format)) {
    return fmt::format("--log-format must be text or json (got \"{}\")", c.log_format);
  }
  return {};
}

namespace {

/// "--tick-hz" -> "IMPULSE_TICK_HZ".
std::string env_name_of(std::string_view flag) {
  std::string env = "IMPULSE_";
  for (char c : flag.substr(2)) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

/// Adds `flag` bound to `field`, also read from IMPULSE_<FLAG> when `with_env`. Its default string
/// (shown by --help, written by --dump-config) is the field's value with the shortest digits that
/// read back exactly: CLI11's own capture_default_str keeps only 6 significant digits of a double.
/// A bool is a flag (--agones, or agones = true in a file). `env` replaces IMPULSE_<FLAG> when given.
template <class T>
CLI::Option* add_setting(CLI::App& app, bool with_env, const std::string& flag, T& field, const std::string& description,
                         const std::string& env = {}) {
  CLI::Option* option = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    option = app.add_flag(flag, field, description);
  } else {
    option = app.add_option(flag, field, description);
  }
  if (with_env) option->envname(env.empty() ? env_name_of(flag) : env);
  option->default_str(fmt::format("{}", field));
  return option;
}

/// The settings held as uint16_t in ServerConfig, parsed as int so that an out-of-range value gets
/// our message, not a conversion error.
struct PortSettings {
  int port = 0;
  int agones_port = 0;
  explicit PortSettings(const ServerConfig& c) : port(c.port), agones_port(c.agones_port) {}
};

/// Every setting of ServerConfig as an option of `app`, bound to `config` (and `ports`). The
/// option's long name without "--" is also its key in a config file, and --dump-config writes
/// exactly these: a new setting must be added here.
void add_settings(CLI::App& app, ServerConfig& config, PortSettings& ports, bool with_env) {
  auto add = [&](const std::string& flag, auto& field, const std::string& description) {
    return add_setting(app, with_env, flag, field, description);
  };
  add("--bind", config.bind, "Local IP address to listen on (IPv4 or IPv6)");
  add("--port", ports.port, "UDP port, 0..65535; 0 picks a free ephemeral port");
  add("--tick-hz", config.tick_hz, "Physics steps per second [Hz], 1..1000");
  add("--snapshot-hz", config.snapshot_hz, "Snapshots sent to each client per second [Hz], 1..tick-hz");
  add("--scene", config.scene, "\"demo\" (built in) or the path of a JSON scene file (schemas/scene.fbs)");
  add("--max-clients", config.max_clients, "Sessions at most, 1..4096; more get ServerFull");
  add("--client-timeout", config.client_timeout_s, "Silence [s] before a session is dropped, (0, 3600]");
  add("--drain-seconds", config.drain_seconds,
      "On SIGTERM/SIGINT keep serving the players already in for this long [s] (no new sessions, /readyz 503) or "
      "until the last leaves, then stop; a second signal stops at once. -1 = 30 with Agones, 0 otherwise; "
      "[-1, 3600]");
  add("--max-steps-per-frame", config.max_steps_per_frame,
      "Physics steps at most per wake-up, 1..100; time beyond is dropped and counted");
  add("--threads", config.threads,
      "Threads for the physics step and the snapshot writes, 0..256; 0 = one per CPU core "
      "(results are identical for any value)");
  add("--stats-interval", config.stats_interval_s, "Seconds between stats log lines [s], (0, 3600]");
  add("--log-level", config.log_level, "trace, debug, info, warn, error, critical or off");
  add("--log-format", config.log_format,
      "text, or json: one JSON object per line (time, level, message; the stats line's figures as fields)");

  add("--record", config.record_file, "Record the session into this file (docs/RECORDING.md); replay with impulse-replay");
  add("--record-dir", config.record_dir, "Record into this directory: one file per run, named by its UTC start time");
  add("--record-rotate-mb", config.record_rotate_mb, "With --record-dir: start a new file after this many MB; 0 = never");
  add("--record-rotate-minutes", config.record_rotate_minutes,
      "With --record-dir: start a new file after this many minutes; 0 = never");
  add("--keyframe-seconds", config.keyframe_seconds,
      "Seconds of simulated time between full keyframes in a recording, (0, 3600]");

  add("--token-key", config.token_key_file,
      "Key file (impulse-server keygen): clients must present a connect token sealed with it; "
      "without it anonymous clients are accepted");
  add("--authority", config.authority,
      "owner: clients push/destroy only objects they created (and push shared ones and the scene's, which no "
      "client may destroy); any: every object");
  add("--max-objects-per-client", config.max_objects_per_client,
      fmt::format("Live objects one client may own, 0..{} (0 = no limit; a token may set its own)", kMaxLimit));
  add("--max-client-objects", config.max_client_objects,
      fmt::format("Live objects all clients together may own (the scene's not counted), 0..{}; then WorldFull "
      "(0 = no limit)", kMaxLimit));
  add("--max-client-extent", config.max_client_extent,
      "Largest radius, half extent or capsule half height + radius [m] of a client's body, [0, 1000] "
      "(0 = the world's 1000 m, and clients may create static planes); else clients may not create planes");
  add("--max-joints-per-client", config.max_joints_per_client,
      fmt::format("Live joints one client may own (anonymous mode: all sessions of one address together), 0..{} "
      "(0 = no limit)", kMaxLimit));
  add("--max-client-joints", config.max_client_joints,
      fmt::format("Live joints all clients together may own (the scene's not counted), 0..{}; then WorldFull (0 = no limit)", kMaxLimit));
  add("--max-spawn-overlaps", config.max_spawn_overlaps,
      "Dynamic and kinematic bodies a client's new body may overlap when created; more is QuotaExceeded (0 = no limit)");
  add("--max-objects-per-address", config.max_objects_per_address,
      fmt::format("Anonymous mode: live objects all sessions from one address (IPv4, or an IPv6 /64) may own together, kept objects "
      "included, -1..{} (-1 = as --max-objects-per-client, 0 = no limit)", kMaxLimit));
  add("--tick-budget-ms", config.tick_budget_ms,
      "A step longer than this [ms] (with at least --tick-budget-min-work) throttles the clients whose bodies cost "
      "more than their fair share of it: their bodies sleep and their pushes get OverBudget for 2 s; 0 = off, [0, 1000]");
  add("--tick-budget-min-work", config.tick_budget_min_work,
      fmt::format("Work units (awake bodies + 3 per contact) below which a step is never charged to clients, 0..{}", kMaxWorkUnits));
  add("--max-wakes-per-tick", config.max_wakes_per_tick,
      fmt::format("Sleeping bodies the pushes of one tick may wake, shared fairly among the clients pushing; a push over its "
      "client's share gets OverBudget and may be resent next tick, 0..{} (0 = no limit)", kMaxWorkUnits));
  add("--lag-compensation-ms", config.lag_compensation_ms,
      "How far back a lag-compensated Raycast (seen_tick) may reach [ms]; the server keeps every movable body's pose "
      "for that long, 0..1000 (0 = off)");
  add("--max-input-lead-ms", config.max_input_lead_ms,
      "How far ahead of the server an action (apply_tick) or an Input may be stamped [ms]; further is TickOutOfRange, "
      "0..1000");
  add("--relay-inputs", config.relay_inputs,
      fmt::format("Other clients' inputs each snapshot may relay (Snapshot.inputs: bodies in the client's area, nearest "
                  "first, 40 bytes each, taken from the snapshot's room for states), 0..{} (0 = none)",
                  wire::kMaxRelayedInputs));
  add("--temporary-ownership", config.temporary_ownership,
      "Accept SetState: a client's own state of a body whose island holds no other client's body, within what its "
      "speed allows (off: the server alone decides every body's state)");
  add("--max-sessions-per-address", config.max_sessions_per_address,
      "Anonymous mode: sessions one address (IPv4, or an IPv6 /64) may hold at once, 0..100000 (0 = no limit; "
      "loopback addresses are exempt)");
  add("--on-disconnect", config.on_disconnect,
      "destroy: a client's objects are destroyed when its session ends; keep: they stay");
  add("--max-requests-per-second", config.max_requests_per_second,
      "Requests per second per client before RateLimited answers (0 = no limit)");
  add("--max-kbytes-in-per-second", config.max_kbytes_in_per_second,
      "KiB per second received per client before datagrams are dropped (0 = no limit)");
  add("--max-kbps-per-client", config.max_kbps_per_client,
      fmt::format("Send budget per client [kbit/s], 16..{}; snapshots are cut to fit it", kMaxLimit));
  add("--world-bound", config.world_bound,
      fmt::format("Snapshots carry objects with every |coordinate| <= this [m], [1, {:g}]; "
                  "this times 2^position-bits must be <= 2^24",
                  wire::kMaxWorldBoundM));
  add("--position-bits", config.position_fraction_bits, "Snapshot position precision: 2^-bits m, 4..14 (9 = 1/512 m)");
  auto* admin = app.add_option_group(
      "Admin HTTP", "Prometheus /metrics, /healthz and /readyz over HTTP (docs: README, \"Operating Impulse\")");
  auto add_admin = [&](const std::string& flag, auto& field, const std::string& description) {
    return add_setting(*admin, with_env, flag, field, description);
  };
  add_admin("--admin-port", config.admin_port,
            "TCP port of the admin endpoint, 0..65535; 0 = off, the default, so nothing new listens unless asked "
            "(-1 = any free port, logged)");
  add_admin("--admin-bind", config.admin_bind,
            "Address of the admin endpoint: loopback by default, so only this machine can scrape it unless the "
            "operator binds wider (0.0.0.0 in a container)");
  add_admin("--health-stall-seconds", config.health_stall_seconds,
            "/healthz answers 503 once the last completed tick is older than this [s], [0.05, 3600]");
  add_admin("--admin-owner-names", config.admin_owner_names,
            "GET /objects/<id> also shows the owner's client name (off by default: anyone who can reach the "
            "port would read every player's name)");
  auto* sim = app.add_option_group("Network simulation", "Testing only: impair every datagram the server sends");
  auto add_sim = [&](const std::string& flag, auto& field, const std::string& description) {
    return add_setting(*sim, with_env, flag, field, description);
  };
  add_sim("--sim-loss", config.sim_loss, "Probability a datagram is lost, [0, 1]");
  add_sim("--sim-latency-ms", config.sim_latency_ms, "Added one-way latency [ms]");
  add_sim("--sim-jitter-ms", config.sim_jitter_ms, "Latency jitter, +- [ms]");
  add_sim("--sim-duplicate", config.sim_duplicate, "Probability a datagram is sent twice, [0, 1]");
  add_sim("--sim-reorder", config.sim_reorder, "Probability a datagram is delayed past later ones, [0, 1]");
  add_sim("--sim-seed", config.sim_seed, "Seed of the simulation's random numbers");

  auto* agones = app.add_option_group("Agones", "The Agones game-server lifecycle through the SDK sidecar's REST API");
  auto add_agones = [&](const std::string& flag, auto& field, const std::string& description, const std::string& env = {}) {
    return add_setting(*agones, with_env, flag, field, description, env);
  };
  add_agones("--agones", config.agones,
             "Call Ready, then Health on a timer, and Shutdown on SIGTERM, on the SDK sidecar at "
             "localhost:--agones-port (on by itself when AGONES_SDK_HTTP_PORT is set)");
  // Agones sets AGONES_SDK_HTTP_PORT in every game server's pod, so that variable (not an IMPULSE_
  // one) is --agones-port's fallback: inside a fleet the lifecycle turns itself on.
  add_agones("--agones-port", ports.agones_port,
             "The SDK sidecar's REST port, 0..65535; non-zero turns the lifecycle on (0 = 9358 with --agones)",
             "AGONES_SDK_HTTP_PORT");
  add_agones("--agones-health-interval", config.agones_health_interval_s,
             "Seconds between Health calls, [0.05, 300]; keep it below the fleet's health periodSeconds");
  add_agones("--agones-shutdown-when-empty", config.agones_shutdown_when_empty_s,
             "Call Shutdown when no client has been connected for this many seconds after the last one "
             "left (0 = never)");
}

constexpr size_t kMaxConfigFileBytes = 1 << 20;  // a config file is a few KiB; refuse anything absurd

/// Reads a whole file of at most kMaxConfigFileBytes. False and *error ("cannot read ...") on failure.
bool read_config_file(const std::string& path, std::string* text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = fmt::format("--config {}: cannot open it ({}); give the path of a TOML file", path, std::strerror(errno));
    return false;
  }
  text->clear();
  char buffer[4096];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text->append(buffer, static_cast<size_t>(in.gcount()));
    if (text->size() > kMaxConfigFileBytes) {
      *error = fmt::format("--config {}: larger than {} bytes; is it the right file?", path, kMaxConfigFileBytes);
      return false;
    }
  }
  if (in.bad()) {
    *error = fmt::format("--config {}: read error", path);
    return false;
  }
  return true;
}

/// Where each setting read from a config file came from: key -> line.
using FileLines = std::map<std::string, int, std::less<>>;

/// Applies the config file `text` (named `label` in errors) to the options of `app` that neither the
/// command line nor the environment set (flag > environment > file > default). `app` has parsed
/// already. Returns an empty string, or the first problem as "FILE:LINE: ...".
std::string apply_config_text(CLI::App& app, std::string_view text, const std::string& label, FileLines* lines) {
  std::vector<ConfigFileKey> keys;
  std::string problem;
  if (!scan_config_file(text, &keys, &problem)) return fmt::format("{}:{}", label, problem);
  std::map<std::string, int, std::less<>> line_of;
  std::map<std::string, std::string, std::less<>> raw_of;
  for (const ConfigFileKey& k : keys) {
    line_of[k.key] = k.line;
    raw_of[k.key] = k.value;
  }

  // CLI11 reads the values (its TOML subset: quotes removed, '#' starts a comment); the scan above
  // has already refused what it would misread and knows each key's line, which CLI11 does not.
  std::istringstream in{std::string(text)};
  const std::vector<CLI::ConfigItem> items = CLI::ConfigTOML().from_config(in);
  for (const CLI::ConfigItem& item : items) {
    const std::string key = item.fullname();
    const auto found = line_of.find(key);
    const std::string where = found != line_of.end() ? fmt::format("{}:{}", label, found->second) : label;
    CLI::Option* option = app.get_option_no_throw("--" + key);
    if (option == nullptr) {
      return fmt::format("{}: unknown key \"{}\": keys are impulse-server's long flag names without \"--\" (e.g. "
                         "tick-hz = 60); impulse-server --help lists them, --dump-config writes a complete file",
                         where, json_escape(key));
    }
    if (!option->get_configurable()) {
      return fmt::format("{}: \"{}\" cannot be set in a config file (give it on the command line)", where, key);
    }
    if (item.inputs.size() != 1) {
      return fmt::format("{}: {}: the value reads as {} values (split at spaces or commas); put a string in quotes",
                         where, key, item.inputs.size());
    }
    // A switch takes a TOML boolean only: CLI11 would also read "yes", 1 or "on" as true, and a
    // typo'd "flase" as an error only by luck.
    if (const auto raw = raw_of.find(key); option->get_expected_max() == 0 && raw != raw_of.end() &&
                                           raw->second != "true" && raw->second != "false") {
      return fmt::format("{}: {} must be true or false, unquoted (got {})", where, key, raw->second);
    }
    if (option->count() > 0) continue;  // the command line or the environment set it: they win
    try {
      option->add_result(item.inputs);
      option->run_callback();
    } catch (const CLI::Error& e) {
      return fmt::format("{}: bad value for {}: {}", where, key, e.what());
    }
    if (found != line_of.end()) (*lines)[key] = found->second;
  }
  return {};
}

/// A range error of validate_config ("--tick-hz must be ...") for a setting the file gave, prefixed
/// with the file, the line and the key; other errors unchanged.
std::string locate_problem(std::string problem, const std::string& label, const FileLines& lines) {
  if (problem.rfind("--", 0) != 0) return problem;
  const size_t end = problem.find_first_of(" ,:;", 2);
  const std::string_view key = std::string_view(problem).substr(2, end == std::string::npos ? end : end - 2);
  const auto found = lines.find(key);
  if (found == lines.end()) return problem;
  return fmt::format("{}:{}: {}: {}", label, found->second, key, problem);
}

/// Checks the ports' ranges and validate_config, naming the file's line when the value came from it.
std::string check_settings(ServerConfig& config, const PortSettings& ports, const std::string& label,
                           const FileLines& lines) {
  if (ports.port < 0 || ports.port > 65535) {
    return locate_problem(fmt::format("--port must be in 0..65535 (got {})", ports.port), label, lines);
  }
  config.port = static_cast<uint16_t>(ports.port);
  if (ports.agones_port < 0 || ports.agones_port > 65535) {
    return locate_problem(
        fmt::format("--agones-port (or AGONES_SDK_HTTP_PORT) must be in 0..65535 (got {})", ports.agones_port), label,
        lines);
  }
  config.agones_port = static_cast<uint16_t>(ports.agones_port);
  return locate_problem(validate_config(config), label, lines);
}

constexpr std::string_view kDumpHeader = "# impulse-server settings, written by --dump-config: load them with --config FILE.\n";
constexpr std::string_view kDumpDescription =
    "Keys are the long flag names; a flag or an IMPULSE_* environment variable overrides a key.";

}  // namespace

bool scan_config_file(std::string_view text, std::vector<ConfigFileKey>* keys, std::string* error) {
  keys->clear();
  auto trim = [](std::string_view s) {
    const size_t first = s.find_first_not_of(" \t\r\f\v");
    if (first == std::string_view::npos) return std::string_view{};
    return s.substr(first, s.find_last_not_of(" \t\r\f\v") - first + 1);
  };
  auto fail = [&](int line, std::string message) {
    *error = fmt::format("{}: {}", line, message);
    return false;
  };
  int number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string_view raw = text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    ++number;
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      return fail(number, fmt::format("\"{}\": sections are not used; write every key at the top level",
                                      json_escape(line)));
    }
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos) {
      return fail(number, fmt::format("\"{}\" is not `key = value`", json_escape(line)));
    }
    std::string_view key = trim(line.substr(0, equals));
    if (key.size() >= 2 && (key.front() == '"' || key.front() == '\'') && key.back() == key.front()) {
      key = key.substr(1, key.size() - 2);
    }
    if (key.empty()) return fail(number, "no key before '='");
    std::string_view value = trim(line.substr(equals + 1));
    if (const size_t hash = value.find('#'); hash != std::string_view::npos) {
      const char quote = value.front();
      if ((quote == '"' || quote == '\'') && value.find(quote, 1) > hash) {
        return fail(number, fmt::format("{}: a '#' inside a quoted value is read as the start of a comment; "
                                        "rename the file or directory, or give it as a flag",
                                        json_escape(key)));
      }
      value = trim(value.substr(0, hash));  // a trailing comment
    }
    if (value.empty()) return fail(number, fmt::format("{} has no value (write {} = \"\" for an empty string)", key, key));
    if (value.front() == '[') return fail(number, fmt::format("{}: arrays are not used; every key takes one value", key));
    if (value.front() == '"' || value.front() == '\'') {
      if (value.size() < 2 || value.back() != value.front()) {
        return fail(number, fmt::format("{}: the quoted value has no closing {}", key, value.front()));
      }
    }
    for (const ConfigFileKey& earlier : *keys) {
      if (earlier.key == key) {
        return fail(number, fmt::format("{} is given twice (first on line {}); keep one", key, earlier.line));
      }
    }
    keys->push_back(ConfigFileKey{std::string(key), number, std::string(value)});
  }
  return true;
}

/// `problem` with the environment variable named when the setting it blames ("--tick-hz ...", or
/// CLI11's "... --tick-hz ...") was read from one: the operator set IMPULSE_TICK_HZ, not the flag.
std::string blame_environment(const CLI::App& app, int argc, const char* const* argv, std::string problem) {
  for (const CLI::Option* option : app.get_options()) {
    const std::string& env = option->get_envname();
    if (env.empty() || std::getenv(env.c_str()) == nullptr || option->get_lnames().empty()) continue;
    const std::string flag = "--" + option->get_lnames().front();
    const size_t at = problem.find(flag);
    if (at == std::string::npos) continue;
    const size_t end = at + flag.size();
    if (end < problem.size() && (std::isalnum(static_cast<unsigned char>(problem[end])) || problem[end] == '-')) continue;
    bool on_command_line = false;
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      on_command_line = on_command_line || arg == flag || arg.rfind(flag + "=", 0) == 0;
    }
    if (on_command_line) continue;
    return fmt::format("{} (from the environment variable {}={})", problem, env, json_escape(std::getenv(env.c_str())));
  }
  return problem;
}

ParseStatus parse_config(int argc, const char* const* argv, ServerConfig& config, std::string* message) {
  auto set_message = [&](std::string text) {
    if (message) *message = std::move(text);
  };

  CLI::App app{fmt::format("impulse-server: authoritative 3D rigid-body physics over UDP (FlatBuffers, protocol v{}).\n"
                           "Each setting comes from, first found: its flag --foo-bar; the environment variable "
                           "IMPULSE_FOO_BAR; the key foo-bar of the --config file (TOML); the default.\n"
                           "Connect tokens: impulse-server keygen --out FILE, then impulse-server token --key FILE "
                           "--client-id N --ttl SECONDS (each with --help).",
                           wire::kProtocolVersion),
               "impulse-server"};
  app.set_version_flag("--version", version_line("impulse-server"));
  app.get_formatter()->column_width(34);

  PortSettings ports(config);
  add_settings(app, config, ports, /*with_env=*/true);
  std::string config_file;
  app.add_option("--config", config_file,
                 "Read settings from this TOML file (key = value; keys are the long flag names, e.g. tick-hz = 60); "
                 "flags and IMPULSE_* variables override it")
      ->envname("IMPULSE_CONFIG")
      ->configurable(false);
  bool dump = false;
  app.add_flag("--dump-config", dump,
               "Print the effective settings (flags, environment, --config file, defaults) as a config file and exit")
      ->configurable(false);

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
    set_message(fmt::format("{} (run impulse-server --help for every flag, its range and default)",
                            blame_environment(app, argc, argv, e.what())));
    return ParseStatus::Error;
  }

  FileLines file_lines;
  if (!config_file.empty()) {
    std::string text, problem;
    if (!read_config_file(config_file, &text, &problem)) {
      set_message(std::move(problem));
      return ParseStatus::Error;
    }
    if (problem = apply_config_text(app, text, config_file, &file_lines); !problem.empty()) {
      set_message(std::move(problem));
      return ParseStatus::Error;
    }
  }
  if (std::string problem = check_settings(config, ports, config_file, file_lines); !problem.empty()) {
    set_message(blame_environment(app, argc, argv, std::move(problem)));
    return ParseStatus::Error;
  }
  if (dump) {
    std::string problem;
    std::string text = dump_config(config, &problem);
    if (!problem.empty()) {
      set_message(std::move(problem));
      return ParseStatus::Error;
    }
    set_message(std::move(text));
    return ParseStatus::Exit;
  }
  return ParseStatus::Run;
}

ParseStatus load_config_text(std::string_view text, const std::string& label, ServerConfig& config,
                             std::string* message) {
  CLI::App app{"impulse-server configuration", "impulse-server"};
  PortSettings ports(config);
  add_settings(app, config, ports, /*with_env=*/false);
  const char* argv[] = {"impulse-server"};
  FileLines file_lines;
  std::string problem;
  try {
    app.parse(1, argv);
    problem = apply_config_text(app, text, label, &file_lines);
  } catch (const CLI::Error& e) {
    problem = e.what();
  }
  if (problem.empty()) problem = check_settings(config, ports, label, file_lines);
  if (!problem.empty()) {
    if (message) *message = std::move(problem);
    return ParseStatus::Error;
  }
  return ParseStatus::Run;
}

std::string dump_config(const ServerConfig& config, std::string* error) {
  ServerConfig copy = config;
  PortSettings ports(copy);
  CLI::App app{std::string(kDumpDescription), "impulse-server"};
  add_settings(app, copy, ports, /*with_env=*/false);
  // Each option's default string is the value in `config`; CLI11 writes it with the option's help as a comment.
  std::string text = std::string(kDumpHeader) + app.config_to_str(/*default_also=*/true, /*write_description=*/true);
  // A value this dialect cannot hold (e.g. a path with a '#', or both kinds of quotes) must not
  // make a file that loads as something else: load it back and compare.
  ServerConfig loaded;
  std::string problem;
  if (load_config_text(text, "--dump-config", loaded, &problem) != ParseStatus::Run) {
    if (error) *error = fmt::format("--dump-config: the settings cannot be written as a config file: {}", problem);
    return {};
  }
  if (!(loaded == config)) {
    if (error) {
      *error = fmt::format("--dump-config: the settings cannot be written as a config file that reads back the same "
                           "(a string with both kinds of quotes, or leading or trailing spaces?): {}",
                           describe_config(loaded));
    }
    return {};
  }
  return text;
}

std::string describe_config(const ServerConfig& c) {
  return fmt::format(
      "bind={} port={} tick_hz={} snapshot_hz={} scene={} max_clients={} client_timeout={}s drain={}s "
      "max_steps_per_frame={} threads={} stats_interval={}s log_level={} log_format={} record={} record_dir={} record_rotate_mb={} "
      "record_rotate_minutes={} keyframe_seconds={} token_key={} authority={} max_objects_per_client={} "
      "max_client_objects={} max_client_extent={}m max_joints_per_client={} max_client_joints={} max_spawn_overlaps={} "
      "max_objects_per_address={} max_sessions_per_address={} tick_budget={} max_wakes_per_tick={} lag_compensation={}ms max_input_lead={}ms relay_inputs={} temporary_ownership={} on_disconnect={} max_requests_per_second={} max_kbytes_in_per_second={} max_kbps_per_client={} world_bound={}m "
      "position_bits={} agones={} admin={}{}",
      c.bind, c.port, c.tick_hz, c.snapshot_hz, c.scene, c.max_clients, c.client_timeout_s, drain_seconds_of(c),
      c.max_steps_per_frame,
      c.threads == 0 ? std::string("auto") : std::to_string(c.threads), c.stats_interval_s, c.log_level, c.log_format, c.record_file.empty() ? "-" : c.record_file,
      c.record_dir.empty() ? "-" : c.record_dir, c.record_rotate_mb, c.record_rotate_minutes, c.keyframe_seconds,
      c.token_key_file.empty() ? "-" : c.token_key_file, c.authority, c.max_objects_per_client,
      c.max_client_objects, c.max_client_extent, c.max_joints_per_client, c.max_client_joints, c.max_spawn_overlaps,
      c.max_objects_per_address, c.max_sessions_per_address,
      c.tick_budget_ms > 0 ? fmt::format("{}ms(min_work={})", c.tick_budget_ms, c.tick_budget_min_work) : std::string("off"),
      c.max_wakes_per_tick, c.lag_compensation_ms, c.max_input_lead_ms, c.relay_inputs, c.temporary_ownership, c.on_disconnect, c.max_requests_per_second, c.max_kbytes_in_per_second, c.max_kbps_per_client, c.world_bound,
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
