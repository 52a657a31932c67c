// Benchmark N1: bandwidth and pose error of delta-compressed snapshots, after Glenn Fiedler,
// "Snapshot Compression" (gafferongames.com, 2015). Ground truth per snapshot tick comes from the
// server's snapshot observer; the player cube follows a circle under a PD controller.
#include "bench/net/n1.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/net/net_util.h"
#include "bench/net/scene_file.h"
#include "bench/stats.h"
#include "impulse/client.h"
#include "bench/net/scene_n1.h"
#include "server/physics/world.h"
#include "shared/wire/snapshot_codec.h"
#include "tools/loadgen/inproc_server.h"

namespace impulse::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// --- The player's path and controller ------------------------------------------------------
constexpr float kPathRadius = 10.0f;  // [m], about the origin, in the XZ plane
constexpr float kPathSpeed = 6.0f;    // [m/s] along the circle
constexpr float kGravity = 9.81f;     // [m/s^2], the scene's
// PD gains per unit mass: radial stiffness [1/s^2] and damping [1/s] (natural frequency 2 rad/s,
// critically damped), and the gain of the speed along the path [1/s].
constexpr float kRadialStiffness = 4.0f;
constexpr float kRadialDamping = 4.0f;
constexpr float kSpeedGain = 8.0f;
constexpr float kMaxControlAccel = 12.0f;  // [m/s^2]: the feedback part is clamped to this
// The force acts this far below the player's centre [m], near its base where the ground's
// friction acts, so pushing does not tip the 2 m cube over.
constexpr float kForcePointDrop = 0.8f;

// --- Measurement -----------------------------------------------------------------------------
constexpr size_t kTruthTicks = 256;  // 4.3 s of snapshot ticks at 60 Hz: far beyond a loopback round trip
constexpr Seconds kWindow{1.0};      // rate windows for the p95
constexpr Seconds kProgressEvery{5.0};
constexpr double kErrorThresholdMm = 2.0;  // target for the position error (docs/BENCHMARKS.md)
constexpr double kTargetKbps = 256.0;

/// One object's pose on the server at one tick.
struct TruthPose {
  uint32_t generation = 0;  // 0: no object at this index
  Vec3 position;            // [m]
  Quat orientation;
};

/// The server's poses at its recent snapshot ticks: written on the server's thread by the
/// snapshot observer, read on the client's thread. Slots are indexed by tick modulo the ring
/// size and each holds poses indexed by ObjectID::index (capacity reserved up front, so the
/// server thread does not allocate in steady state).
class TruthRing {
 public:
  TruthRing(size_t ticks, size_t objects_hint) : slots_(ticks) {
    for (Slot& s : slots_) s.poses.reserve(objects_hint);
  }

  void record(const physics::World& world) {
    std::lock_guard lock(mutex_);
    Slot& slot = slots_[world.tick() % slots_.size()];
    slot.valid = true;
    slot.tick = world.tick();
    std::fill(slot.poses.begin(), slot.poses.end(), TruthPose{});
    world.for_each_object([&slot](const physics::BodyState& b) {
      if (slot.poses.size() <= b.id.index) slot.poses.resize(b.id.index + 1);
      slot.poses[b.id.index] = TruthPose{b.id.generation, b.position, b.orientation};
    });
  }

  /// Copies the poses of `tick` into *out. False when that tick is not (or no longer) held.
  bool copy(uint64_t tick, std::vector<TruthPose>* out) const {
    std::lock_guard lock(mutex_);
    const Slot& slot = slots_[tick % slots_.size()];
    if (!slot.valid || slot.tick != tick) return false;
    out->assign(slot.poses.begin(), slot.poses.end());
    return true;
  }

 private:
  struct Slot {
    bool valid = false;
    uint64_t tick = 0;
    std::vector<TruthPose> poses;
  };
  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
};

/// Running pose error over object samples.
struct PoseErrors {
  double max_mm = 0, sum_sq_mm = 0, max_deg = 0;
  uint64_t samples = 0, over_threshold = 0;
};

/// Adds every object of `view` compared with `truth`. Returns how many had no truth (an id the
/// server did not hold at that tick: never expected, counted rather than trusted).
uint64_t add_pose_errors(std::span<const ObjectState> view, const std::vector<TruthPose>& truth, PoseErrors* e) {
  uint64_t unmatched = 0;
  for (const ObjectState& o : view) {
    if (o.id.index >= truth.size() || truth[o.id.index].generation != o.id.generation) {
      ++unmatched;
      continue;
    }
    const TruthPose& t = truth[o.id.index];
    const double dx = static_cast<double>(o.position.x) - t.position.x;
    const double dy = static_cast<double>(o.position.y) - t.position.y;
    const double dz = static_cast<double>(o.position.z) - t.position.z;
    const double mm = 1000.0 * std::sqrt(dx * dx + dy * dy + dz * dz);
    e->max_mm = std::max(e->max_mm, mm);
    e->sum_sq_mm += mm * mm;
    if (mm > kErrorThresholdMm) ++e->over_threshold;
    e->max_deg = std::max(e->max_deg, rotation_angle_deg(o.orientation, t.orientation));
    ++e->samples;
  }
  return unmatched;
}

/// The horizontal force [N] (world frame) that steers the player along the circle of radius
/// kPathRadius about the origin at kPathSpeed, counter-clockwise seen from above (+Y): PD on the
/// radial distance with the centripetal term, P on the speed along the path, plus the ground's
/// kinetic friction (mu = 0.6 on both sides) fed forward along the path.
Vec3 control_force(const ObjectState& player) {
  const float x = player.position.x, z = player.position.z;
  const float r = std::sqrt(x * x + z * z);
  const Vec3 radial = r > 1e-3f ? Vec3{x / r, 0.0f, z / r} : Vec3{1.0f, 0.0f, 0.0f};
  const Vec3 tangent{radial.z, 0.0f, -radial.x};  // 90 degrees about +Y from radial
  const float v_radial = dot(player.velocity, radial);
  const float v_tangent = dot(player.velocity, tangent);
  const float a_radial = kRadialStiffness * (kPathRadius - r) - kRadialDamping * v_radial -
                         v_tangent * v_tangent / std::max(r, 1.0f);
  const float a_tangent = kSpeedGain * (kPathSpeed - v_tangent);
  Vec3 a = radial * a_radial + tangent * a_tangent;
  const float a_length = length(a);
  if (a_length > kMaxControlAccel) a *= kMaxControlAccel / a_length;
  return (a + tangent * (server::kN1Friction * kGravity)) * server::kN1PlayerMass;
}

const ObjectState* find_in(std::span<const ObjectState> view, ObjectID id) {
  const auto it = std::lower_bound(view.begin(), view.end(), id,
                                   [](const ObjectState& o, ObjectID x) { return o.id < x; });
  return it != view.end() && it->id == id ? &*it : nullptr;
}

double kbps_of(uint64_t bytes, double seconds) { return seconds > 0 ? 8.0 * static_cast<double>(bytes) / seconds / 1000.0 : 0.0; }

}  // namespace

std::optional<N1Result> run_n1(const N1Options& options, std::string* error) {
  auto fail = [error](std::string text) -> std::optional<N1Result> {
    if (error) *error = std::move(text);
    return std::nullopt;
  };

  const server::Scene scene = server::make_n1_scene();
  TempSceneFile scene_file;
  if (!scene_file.write(scene, "n1", error)) return std::nullopt;

  server::ServerConfig config;
  config.bind = "127.0.0.1";
  config.port = 0;
  config.tick_hz = 60;
  config.snapshot_hz = 60;
  config.scene = scene_file.path();
  config.max_clients = 4;
  config.stats_interval_s = 1.0;  // ServerStats::tick_ns_p50/p99 are per stats window
  config.log_level = "warn";
  if (options.kbps > 0) config.max_kbps_per_client = options.kbps;
  config.record_file = options.record_file;

  TruthRing truth(kTruthTicks, scene.bodies.size() + 16);
  std::string start_error;
  auto server = tools::InprocServer::start(
      config, [&truth](const physics::World& world) { truth.record(world); }, &start_error);
  if (!server) return fail("the server did not start: " + start_error);

  Client client;
  std::string connect_error;
  if (!client.connect("127.0.0.1", server->port(), std::chrono::milliseconds{3000}, &connect_error, "impulse-bench-n1")) {
    return fail("the client could not connect to the in-process server: " + connect_error);
  }

  ObjectDesc player_desc;
  player_desc.kind = BodyKind::Dynamic;
  player_desc.shape = ShapeKind::Box;
  player_desc.dims = {server::kN1PlayerHalfExtent, server::kN1PlayerHalfExtent, server::kN1PlayerHalfExtent};
  player_desc.position = server::kN1PlayerStart;
  player_desc.mass = server::kN1PlayerMass;
  player_desc.friction = server::kN1Friction;
  std::string request_error;
  const std::optional<RequestResult> created =
      await_result(client, client.create_object(player_desc), std::chrono::milliseconds{3000}, &request_error);
  if (!created) return fail("creating the player cube: " + request_error);
  if (!created->ok()) return fail("the server refused the player cube: " + created->message);
  const ObjectID player = created->id;

  N1Result out;
  out.warmup_s = options.warmup_s;
  out.kbps_budget = config.max_kbps_per_client;
  out.reliable_forces = options.reliable_forces;
  out.tick_hz = config.tick_hz;
  out.snapshot_hz = config.snapshot_hz;

  const Clock::time_point begin = Clock::now();
  const Clock::time_point measure_from = begin + std::chrono::duration_cast<Clock::duration>(Seconds(options.warmup_s));
  const Clock::time_point end = measure_from + std::chrono::duration_cast<Clock::duration>(Seconds(options.seconds));

  // Totals over the measured time, and the current 1 s window.
  bool measuring = false;
  Clock::time_point window_start{}, next_progress{};
  uint64_t bytes_in_at_start = 0, snapshot_bytes_at_start = 0, steps_dropped_at_start = 0;
  uint64_t work_ns_at_start = 0, step_ns_at_start = 0, record_ns_at_start = 0, tick_at_start = 0;
  auto work_ns = [&server] {
    const server::ServerStats& st = server->stats();
    return st.step_ns.load(std::memory_order_relaxed) + st.events_ns.load(std::memory_order_relaxed) +
           st.snapshots_ns.load(std::memory_order_relaxed);
  };
  uint64_t window_bytes_in = 0, window_full_bytes = 0, full_bytes = 0;
  std::vector<double> window_kbps, window_full_kbps, tick_p50_ms, tick_p99_ms;
  PoseErrors errors;
  double speed_sum = 0, path_err_sq_sum = 0;
  uint64_t player_samples = 0, events = 0, results = 0;
  std::vector<TruthPose> truth_at_tick;

  auto close_window = [&](Clock::time_point now) {
    const double s = Seconds(now - window_start).count();
    const uint64_t bytes_in = client.stats().bytes_in;
    window_kbps.push_back(kbps_of(bytes_in - window_bytes_in, s));
    window_full_kbps.push_back(kbps_of(window_full_bytes, s));
    const server::ServerStats& st = server->stats();
    if (const uint64_t p50 = st.tick_ns_p50.load(std::memory_order_relaxed)) tick_p50_ms.push_back(1e-6 * static_cast<double>(p50));
    if (const uint64_t p99 = st.tick_ns_p99.load(std::memory_order_relaxed)) tick_p99_ms.push_back(1e-6 * static_cast<double>(p99));
    window_start = now;
    window_bytes_in = bytes_in;
    window_full_bytes = 0;
  };

  for (Clock::time_point now = Clock::now(); now < end; now = Clock::now()) {
    const PollResult& r = client.poll(std::chrono::milliseconds{1});
    now = Clock::now();
    if (r.server_disconnected) return fail("the server closed the session: " + r.disconnect_reason);
    if (measuring) {
      for (const RequestResult& result : r.results) {
        if (!result.ok()) ++out.request_errors;
      }
      events += r.collisions.size();
      results += r.results.size();
    }
    if (!measuring && now >= measure_from) {
      measuring = true;
      window_start = now;
      next_progress = now + std::chrono::duration_cast<Clock::duration>(kProgressEvery);
      bytes_in_at_start = window_bytes_in = client.stats().bytes_in;
      snapshot_bytes_at_start = server->stats().snapshot_bytes.load(std::memory_order_relaxed);
      steps_dropped_at_start = server->stats().steps_dropped.load(std::memory_order_relaxed);
      work_ns_at_start = work_ns();
      step_ns_at_start = server->stats().step_ns.load(std::memory_order_relaxed);
      record_ns_at_start = server->stats().record_ns.load(std::memory_order_relaxed);
      tick_at_start = server->stats().tick.load(std::memory_order_relaxed);
    }
    if (!r.snapshots.empty()) {
      // Steer from the newest state: one force per snapshot (60 Hz), applied at the next step.
      if (const ObjectState* p = find_in(r.objects_of(r.snapshots.back()), player)) {
        const Vec3 at = p->position - Vec3{0.0f, kForcePointDrop, 0.0f};
        if (options.reliable_forces) {
          client.apply_force(player, control_force(*p), at);
        } else {
          client.apply_force_unreliable(player, control_force(*p), at);
        }
      }
    }
    if (measuring) {
      for (const SnapshotRange& s : r.snapshots) {
        const std::span<const ObjectState> view = r.objects_of(s);
        ++out.snapshots;
        const uint64_t bytes = wire::uncompressed_snapshot_bytes(view.size());
        full_bytes += bytes;
        window_full_bytes += bytes;
        if (truth.copy(s.tick, &truth_at_tick)) {
          add_pose_errors(view, truth_at_tick, &errors);
        } else {
          ++out.snapshots_unmatched;
        }
        if (const ObjectState* p = find_in(view, player)) {
          speed_sum += std::sqrt(p->velocity.x * p->velocity.x + p->velocity.z * p->velocity.z);
          const double radius = std::sqrt(p->position.x * p->position.x + p->position.z * p->position.z);
          path_err_sq_sum += (radius - kPathRadius) * (radius - kPathRadius);
          ++player_samples;
        }
      }
      if (now - window_start >= kWindow) close_window(now);
      if (options.progress && now >= next_progress) {
        const double t = Seconds(now - measure_from).count();
        std::fprintf(stderr,
                     "[impulse-bench] N1 %5.1f s: %.1f kbit/s (UDP payload) vs %.1f kbit/s full state; position "
                     "error max %.2f mm; player %.1f m/s\n",
                     t, kbps_of(client.stats().bytes_in - bytes_in_at_start, t), kbps_of(full_bytes, t), errors.max_mm,
                     player_samples ? speed_sum / static_cast<double>(player_samples) : 0.0);
        next_progress += std::chrono::duration_cast<Clock::duration>(kProgressEvery);
      }
    }
  }
  const Clock::time_point stopped = Clock::now();
  if (measuring && stopped - window_start >= kWindow / 2) close_window(stopped);

  out.seconds = measuring ? Seconds(stopped - measure_from).count() : 0.0;
  out.objects = static_cast<uint32_t>(client.objects().size());
  out.kbps_avg = kbps_of(client.stats().bytes_in - bytes_in_at_start, out.seconds);
  out.kbps_p95 = percentile(window_kbps, 95);
  out.kbps_snapshots_avg =
      kbps_of(server->stats().snapshot_bytes.load(std::memory_order_relaxed) - snapshot_bytes_at_start, out.seconds);
  out.kbps_full_state_avg = kbps_of(full_bytes, out.seconds);
  out.kbps_full_state_p95 = percentile(window_full_kbps, 95);
  out.pos_err_mm_max = errors.max_mm;
  out.pos_err_mm_rms = errors.samples ? std::sqrt(errors.sum_sq_mm / static_cast<double>(errors.samples)) : 0.0;
  out.rot_err_deg_max = errors.max_deg;
  out.pose_samples = errors.samples;
  out.pos_err_over_2mm_fraction =
      errors.samples ? static_cast<double>(errors.over_threshold) / static_cast<double>(errors.samples) : 0.0;
  out.server_tick_ms_p50 = median(tick_p50_ms);
  out.server_tick_ms_p99 = tick_p99_ms.empty() ? 0.0 : *std::max_element(tick_p99_ms.begin(), tick_p99_ms.end());
  out.server_steps_dropped = server->stats().steps_dropped.load(std::memory_order_relaxed) - steps_dropped_at_start;
  if (const uint64_t ticks = server->stats().tick.load(std::memory_order_relaxed) - tick_at_start) {
    out.server_work_ms_per_tick = 1e-6 * static_cast<double>(work_ns() - work_ns_at_start) / static_cast<double>(ticks);
    out.server_step_ms_per_tick =
        1e-6 * static_cast<double>(server->stats().step_ns.load(std::memory_order_relaxed) - step_ns_at_start) /
        static_cast<double>(ticks);
    out.server_record_ms_per_tick =
        1e-6 * static_cast<double>(server->stats().record_ns.load(std::memory_order_relaxed) - record_ns_at_start) /
        static_cast<double>(ticks);
    if (out.server_work_ms_per_tick > 0) out.recording_share = out.server_record_ms_per_tick / out.server_work_ms_per_tick;
  }
  out.recording = !options.record_file.empty();
  out.player_speed_avg = player_samples ? speed_sum / static_cast<double>(player_samples) : 0.0;
  out.player_path_err_m_rms = player_samples ? std::sqrt(path_err_sq_sum / static_cast<double>(player_samples)) : 0.0;
  out.events_per_s = out.seconds > 0 ? static_cast<double>(events) / out.seconds : 0.0;
  out.results_per_s = out.seconds > 0 ? static_cast<double>(results) / out.seconds : 0.0;
  out.client_resends = client.stats().requests_resent;
  out.snapshots_rejected = client.stats().snapshots_rejected;

  client.disconnect("benchmark done");
  server->stop();
  if (out.snapshots == 0) return fail("no snapshot arrived in the measured time (is the machine overloaded?)");
  return out;
}

std::string to_json_line(const N1Result& r) {
  nlohmann::ordered_json j;
  j["scene"] = "N1";
  j["kbps_avg"] = r.kbps_avg;
  j["kbps_p95"] = r.kbps_p95;
  j["kbps_full_state_avg"] = r.kbps_full_state_avg;
  j["pos_err_mm_max"] = r.pos_err_mm_max;
  j["pos_err_mm_rms"] = r.pos_err_mm_rms;
  j["rot_err_deg_max"] = r.rot_err_deg_max;
  j["seconds"] = r.seconds;
  j["warmup_s"] = r.warmup_s;
  j["snapshots"] = r.snapshots;
  j["objects"] = r.objects;
  j["server_tick_ms_p50"] = r.server_tick_ms_p50;
  j["server_tick_ms_p99"] = r.server_tick_ms_p99;
  j["player_speed_avg"] = r.player_speed_avg;
  j["client_resends"] = r.client_resends;
  j["snapshots_rejected"] = r.snapshots_rejected;
  j["kbps_budget"] = r.kbps_budget;
  j["forces"] = r.reliable_forces ? "reliable" : "unreliable";
  j["tick_hz"] = r.tick_hz;
  j["snapshot_hz"] = r.snapshot_hz;
  j["kbps_snapshots_avg"] = r.kbps_snapshots_avg;
  j["kbps_full_state_p95"] = r.kbps_full_state_p95;
  j["bytes_counted"] = "UDP payload, without IP/UDP headers";
  j["pos_err_over_2mm_fraction"] = r.pos_err_over_2mm_fraction;
  j["pose_samples"] = r.pose_samples;
  j["snapshots_unmatched"] = r.snapshots_unmatched;
  j["server_steps_dropped"] = r.server_steps_dropped;
  j["server_work_ms_per_tick"] = r.server_work_ms_per_tick;
  j["server_step_ms_per_tick"] = r.server_step_ms_per_tick;
  j["recording"] = r.recording;
  j["server_record_ms_per_tick"] = r.server_record_ms_per_tick;
  j["recording_share"] = r.recording_share;
  j["player_path_err_m_rms"] = r.player_path_err_m_rms;
  j["request_errors"] = r.request_errors;
  j["events_per_s"] = r.events_per_s;
  j["results_per_s"] = r.results_per_s;
  j["target_kbps_met"] = r.kbps_avg <= kTargetKbps;
  j["target_pos_err_met"] = r.pos_err_mm_max <= kErrorThresholdMm;
  return j.dump();
}

void print_human(std::FILE* out, const N1Result& r) {
  const double snapshot_rate = r.seconds > 0 ? static_cast<double>(r.snapshots) / r.seconds : 0.0;
  std::fprintf(out,
               "N1 cubes (after Fiedler's \"Snapshot Compression\"): %u objects in view, %d Hz ticks, %d Hz snapshots, "
               "budget %d kbit/s per client, %s player forces; %.1f s measured after a %.1f s warm-up\n",
               r.objects, r.tick_hz, r.snapshot_hz, r.kbps_budget, r.reliable_forces ? "reliable" : "fire-and-forget",
               r.seconds, r.warmup_s);
  std::fprintf(out, "  server -> client, UDP payload (no IP/UDP headers): avg %8.1f kbit/s  p95 %8.1f kbit/s\n",
               r.kbps_avg, r.kbps_p95);
  std::fprintf(out, "    of which snapshot datagrams %.1f kbit/s avg; the rest: %.0f collision events/s and %.0f request "
               "results/s (and pongs)\n",
               r.kbps_snapshots_avg, r.events_per_s, r.results_per_s);
  std::fprintf(out, "  same snapshots as full uncompressed state:        avg %8.1f kbit/s  p95 %8.1f kbit/s  "
               "(%zu B per object; %.0fx the compressed rate)\n",
               r.kbps_full_state_avg, r.kbps_full_state_p95, wire::uncompressed_snapshot_bytes(1),
               r.kbps_avg > 0 ? r.kbps_full_state_avg / r.kbps_avg : 0.0);
  std::fprintf(out, "  pose error vs the server at the same tick, %llu object samples: position max %.2f mm, RMS %.3f mm, "
               "%.3f %% over 2 mm; orientation max %.3f deg\n",
               static_cast<unsigned long long>(r.pose_samples), r.pos_err_mm_max, r.pos_err_mm_rms,
               100.0 * r.pos_err_over_2mm_fraction, r.rot_err_deg_max);
  std::fprintf(out, "  snapshots applied %llu (%.1f/s), without truth %llu, rejected %llu; request resends %llu, "
               "errors %llu\n",
               static_cast<unsigned long long>(r.snapshots), snapshot_rate,
               static_cast<unsigned long long>(r.snapshots_unmatched), static_cast<unsigned long long>(r.snapshots_rejected),
               static_cast<unsigned long long>(r.client_resends), static_cast<unsigned long long>(r.request_errors));
  std::fprintf(out, "  player: %.2f m/s average, %.2f m RMS off the 10 m circle; server tick p50 %.3f ms, p99 %.3f ms "
               "(largest 1 s window p99), %llu steps dropped\n",
               r.player_speed_avg, r.player_path_err_m_rms, r.server_tick_ms_p50, r.server_tick_ms_p99,
               static_cast<unsigned long long>(r.server_steps_dropped));
  std::fprintf(out, "  server thread work per tick %.3f ms (of which steps%s %.3f ms)\n", r.server_work_ms_per_tick,
               r.recording ? " and recording" : "", r.server_step_ms_per_tick);
  if (r.recording) {
    std::fprintf(out, "  recording: %.4f ms per tick in hashes, tick frames and keyframes, %.1f %% of the work per tick\n",
                 r.server_record_ms_per_tick, 100.0 * r.recording_share);
  }
  std::fprintf(out, "  targets: average <= %.0f kbit/s: %s (%.1f); position error <= %.0f mm: %s (max %.2f)\n", kTargetKbps,
               r.kbps_avg <= kTargetKbps ? "met" : "NOT met", r.kbps_avg, kErrorThresholdMm,
               r.pos_err_mm_max <= kErrorThresholdMm ? "met" : "NOT met", r.pos_err_mm_max);
}

}  // namespace impulse::bench
