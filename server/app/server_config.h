// The server's configuration: every setting of impulse-server, its unit, default and reason
// (the flags, IMPULSE_* variables and --config keys that fill it are server/app/config.h).
#pragma once

#include <cstdint>
#include <string>

namespace impulse::server {

/// Server configuration. Every field has a CLI flag and an IMPULSE_<FLAG> environment variable.
struct ServerConfig {
  std::string bind = "0.0.0.0";  ///< --bind: local address to listen on
  uint16_t port = 7777;          ///< --port: UDP port; 0 picks an ephemeral port
  int tick_hz = 60;              ///< --tick-hz: physics steps per second, 1..1000
  int snapshot_hz = 30;          ///< --snapshot-hz: snapshots per second, 1..tick_hz
  std::string scene = "demo";    ///< --scene: "demo" or a JSON scene file path
  int max_clients = 64;          ///< --max-clients: sessions at most, 1..4096
  double client_timeout_s = 10;  ///< --client-timeout: silence [s] before a session is dropped
  /// --drain-seconds: on SIGTERM or SIGINT, keep serving the players already in for this long [s]
  /// (no new sessions, /readyz 503) or until the last one leaves, then stop; a second signal stops
  /// at once. -1 = 30 s under Agones (its pods get SIGTERM on scale-down), 0 otherwise.
  double drain_seconds = -1;
  int max_steps_per_frame = 4;   ///< steps at most per wake-up; the accumulator drops the rest
  double stats_interval_s = 5;   ///< seconds between stats log lines
  /// --threads: threads for the physics step's contact batches and the snapshot writes, 0..256;
  /// 0 = one per CPU core (at most 64). The world and the datagrams are bit-identical for every value.
  int threads = 0;
  std::string log_level = "info";  ///< --log-level: trace, debug, info, warn, error, off
  /// --log-format: "text" (spdlog's lines) or "json" (one object per line; server/app/log_format.h).
  /// Server::start installs it on spdlog's loggers, process-wide.
  std::string log_format = "text";
  /// --record: record the session into this file (docs/RECORDING.md); empty = no recording.
  std::string record_file;
  /// --record-dir: record into this directory, one file per run (named by its UTC start time),
  /// rotated by record_rotate_mb / record_rotate_minutes. Exclusive with record_file.
  std::string record_dir;
  double record_rotate_mb = 0;       ///< --record-rotate-mb: new file after this many MB; 0 = never
  double record_rotate_minutes = 0;  ///< --record-rotate-minutes: new file after this long [min]; 0 = never
  double keyframe_seconds = 10;      ///< --keyframe-seconds: keyframe interval [s] of simulated time

  // --- Netcode (docs/PROTOCOL.md) ---
  /// --token-key: a key file (impulse-server keygen); clients must then present a connect token
  /// sealed with it. Empty = anonymous clients are accepted (local use).
  std::string token_key_file;
  /// --authority: "owner" = a client may push or destroy only objects it created, and push shared
  /// ones and the scene's (scene bodies cannot be destroyed by clients); "any" = every client may
  /// touch every object.
  std::string authority = "owner";
  // What one client's bodies may cost the step (docs/SECURITY.md; the defaults are sized to the
  // capacity benchmark on a 2-core machine: 256 clients, 5,000 bodies, tick p99 11.5 ms).
  int max_objects_per_client = 256;       ///< --max-objects-per-client: live objects a client may own; 0 = no limit
  /// --max-client-objects: live objects all clients together may own (the scene's are not
  /// counted); then WorldFull. 0 = no limit. 5,000 = the capacity benchmark's bodies.
  int max_client_objects = 5000;
  /// --max-client-extent: largest sphere or capsule radius, box half extent or capsule half
  /// height + radius [m] of a body a client creates; clients may not create planes. 4 m keeps a
  /// body within 4 x 4 x 4 cells of the 2 m broadphase grid (max_cells_per_body = 64): a larger one is
  /// tested against every moving body each step. 0 = the world's limit (1000 m).
  double max_client_extent = 4.0;
  /// --max-spawn-overlaps: a body a client creates may overlap (AABB with the speculative margin) at
  /// most this many dynamic or kinematic bodies (static ones are not counted); more is
  /// QuotaExceeded. Bounds the contact pairs one burst of creates can add (N bodies piled in one
  /// spot make N^2/2). 0 = no limit.
  int max_spawn_overlaps = 8;
  /// --max-joints-per-client: live joints one client may own (anonymous mode: all sessions of
  /// one address together, as --max-objects-per-address); 0 = no limit. A joint costs a row
  /// block of the solve, about what a contact costs.
  int max_joints_per_client = 128;
  /// --max-client-joints: live joints all clients together may own (the scene's not counted);
  /// then WorldFull. 0 = no limit.
  int max_client_joints = 4096;
  /// --max-objects-per-address: anonymous mode only (no --token-key): live objects all sessions
  /// from one IP address may own together, objects kept after their creator left included, so
  /// reconnecting (a new port, a new session) does not reset the quota. -1 = the same as
  /// max_objects_per_client; 0 = no limit.
  int max_objects_per_address = -1;
  /// --max-sessions-per-address: anonymous mode: sessions one address (IPv4, or an IPv6 /64:
  /// server/net/address_prefix.h) may hold at once; 0 = no limit. One address took all 64 default
  /// slots in 0.1 s. Loopback addresses are exempt: bots, load generators and tests on this machine.
  int max_sessions_per_address = 4;
  /// --tick-budget-ms: when one step takes longer than this [ms] and holds at least
  /// tick_budget_min_work work units, the clients over their fair share of it are throttled
  /// (server/app/tick_budget.h): their awake bodies are put to sleep and their pushes and creates
  /// answered OverBudget for kThrottleHold. 0 = off. 6 ms: the capacity benchmark (256 clients,
  /// 5,000 bodies) never reaches it on a 2-core machine (docs/BENCHMARKS.md, "Tick budget"), and
  /// a step over it leaves too little of the 16.7 ms period for the events and snapshots of many
  /// clients (attack B from 64 addresses: tick p99 15.8 ms at 6 ms, 28.9 ms at 10 ms).
  double tick_budget_ms = 6.0;
  /// --tick-budget-min-work: below this many work units (awake bodies + 3 per contact) a step is
  /// never charged, however long it took (a stalled machine is no client's doing).
  int tick_budget_min_work = 1500;
  /// --max-wakes-per-tick: sleeping bodies the pushes of one tick may wake, shared fairly among
  /// the clients pushing (max-min, as the tick budget); a push over its client's share is
  /// answered OverBudget and may be resent next tick. 0 = no limit. Attack B woke 4,097 bullet
  /// spheres at 60 m/s in one tick: 21-48 ms of step, events and snapshots for that tick alone,
  /// before any step could be charged (docs/BENCHMARKS.md, "Tick budget"); 512 is an eighth.
  int max_wakes_per_tick = 512;
  /// --lag-compensation-ms: how far back a Raycast's seen_tick may reach [ms] (poses of every
  /// movable body kept per tick: 32 bytes a slot; 250 ms at 60 Hz is 15 ticks back plus the
  /// present, 16 kept, 2.56 MB for 5,000 bodies). 0 = off (seen_tick is refused). 250 is Photon Fusion's hitbox history (200 ms) with
  /// room for a 100 ms interpolation delay plus a 150 ms round trip's half.
  int lag_compensation_ms = 250;
  /// --max-input-lead-ms: how far ahead of the server an action (Envelope.apply_tick) or an Input
  /// frame may be stamped [ms]; further is TickOutOfRange. 500 ms is Unity Netcode's prediction
  /// cap; a held action costs its session a request window slot until its tick.
  int max_input_lead_ms = 500;
  /// --relay-inputs: other clients' inputs one snapshot may relay (Snapshot.inputs), 0..8. Each
  /// costs 40 bytes of the datagram's room for states; 8 covers a team game's visible players.
  int relay_inputs = 8;
  /// --temporary-ownership: accept SetState, a client's own state of a body whose island holds no
  /// other client's body (seed 001's temporary ownership). Off by default: it trades the server's
  /// authority over that island for the player's feel (docs/SECURITY.md).
  bool temporary_ownership = false;
  /// --on-disconnect: what happens to a client's objects when its session ends (Disconnect or
  /// timeout; not when a token's client id replaces its own session): "destroy" (default: a
  /// departed player's things leave with it, and nothing accumulates) or "keep".
  std::string on_disconnect = "destroy";
  int max_requests_per_second = 1000;     ///< --max-requests-per-second: per client; over it: RateLimited
  int max_kbytes_in_per_second = 256;     ///< --max-kbytes-in-per-second: per client received [KiB/s]; over it: dropped
  int max_kbps_per_client = 1024;         ///< --max-kbps-per-client: send budget per client [kbit/s]
  double world_bound = 1024;              ///< --world-bound: snapshots carry objects with |coordinate| <= this [m]
  int position_fraction_bits = 9;         ///< --position-bits: snapshot position step 2^-bits m (9 = 1/512 m)
  /// Network conditions injected on the send path (testing only): --sim-loss, --sim-latency-ms,
  /// --sim-jitter-ms, --sim-duplicate, --sim-reorder, --sim-seed.
  double sim_loss = 0, sim_latency_ms = 0, sim_jitter_ms = 0, sim_duplicate = 0, sim_reorder = 0;
  uint64_t sim_seed = 1;

  // --- Agones (server/app/agones.h) ---
  /// --agones: run the Agones lifecycle (Ready, Health, Shutdown) against the SDK sidecar on
  /// localhost:agones_port, or 9358 when agones_port is 0.
  bool agones = false;
  /// --agones-port, or the environment variable AGONES_SDK_HTTP_PORT (which Agones sets in every
  /// game server's pod): the sidecar's REST port; a non-zero value also turns the lifecycle on.
  uint16_t agones_port = 0;
  double agones_health_interval_s = 2;     ///< --agones-health-interval: seconds between Health calls
  /// --agones-shutdown-when-empty: call Shutdown once no client has been connected for this long
  /// after the last one left [s]; 0 = never (a server nobody has joined yet is never shut down).
  double agones_shutdown_when_empty_s = 0;
  // --- Admin HTTP endpoint (/metrics, /healthz, /readyz; server/app/admin.h) ---
  /// --admin-bind: local address of the admin endpoint. Loopback by default: the figures are for
  /// the operator's scraper, so binding wider (0.0.0.0 in a container) is the operator's choice.
  std::string admin_bind = "127.0.0.1";
  /// --admin-port: TCP port of the admin endpoint; 0 = off (the default: nothing new listens
  /// unless asked); -1 = an ephemeral port (tests; logged, Server::admin_port()).
  int admin_port = 0;
  /// --health-stall-seconds: /healthz answers 503 once the last completed tick is older than this [s].
  double health_stall_seconds = 2.0;
  /// --admin-owner-names: GET /objects/<id> also gives the owner's client name. Off by default:
  /// anyone who can reach the port would read every player's chosen name.
  bool admin_owner_names = false;

  /// Field by field (--dump-config checks that its file loads back to the same settings).
  friend bool operator==(const ServerConfig&, const ServerConfig&) = default;
};

/// Whether the Agones lifecycle is on (--agones, --agones-port or AGONES_SDK_HTTP_PORT).
inline bool agones_enabled(const ServerConfig& c) { return c.agones || c.agones_port != 0; }

/// --drain-seconds with its -1 resolved [s].
inline double drain_seconds_of(const ServerConfig& c) {
  return c.drain_seconds >= 0 ? c.drain_seconds : (agones_enabled(c) ? 30.0 : 0.0);
}

}  // namespace impulse::server
