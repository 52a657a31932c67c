// Request-to-snapshot latency on loopback: set_velocity on the client's own body in a
// zero-gravity scene, timed until the first applied snapshot shows the new velocity.
#include "bench/net/latency.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "bench/net/net_util.h"
#include "bench/net/scene_file.h"
#include "bench/stats.h"
#include "impulse/client.h"
#include "tests/scenes/bench_scenes.h"
#include "tools/loadgen/inproc_server.h"

namespace impulse::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;

constexpr std::chrono::milliseconds kSampleTimeout{1000};
constexpr std::chrono::milliseconds kSetupTimeout{3000};
constexpr uint64_t kPhaseSeed = 2024;
// Velocity step of the snapshot encoding with the server's default 7 fraction bits [m/s]: the
// client sees the sent velocity to within this.
constexpr float kVelocityStep = 1.0f / 128.0f;

// The velocity of sample k [m/s] along x: alternating sign (the body stays near the origin), at
// least 0.25 m/s (far above the 0.05 m/s sleep threshold), and never equal to the previous one.
// Multiples of 1/8 m/s, which the encoding carries exactly.
Vec3 sample_velocity(int k) {
  const float speed = 0.25f + 0.125f * static_cast<float>(k % 4);
  return {(k % 2 == 0) ? speed : -speed, 0.0f, 0.0f};
}

bool shows(const ObjectState& o, Vec3 v) {
  return std::fabs(o.velocity.x - v.x) <= kVelocityStep && std::fabs(o.velocity.y - v.y) <= kVelocityStep &&
         std::fabs(o.velocity.z - v.z) <= kVelocityStep;
}

nlohmann::ordered_json to_json(const LatencyRun& r) {
  nlohmann::ordered_json j;
  j["tick_hz"] = r.tick_hz;
  j["snapshot_hz"] = r.snapshot_hz;
  j["samples"] = r.samples;
  j["timeouts"] = r.timeouts;
  j["p50_ms"] = r.p50_ms;
  j["p99_ms"] = r.p99_ms;
  j["max_ms"] = r.max_ms;
  j["mean_ms"] = r.mean_ms;
  j["p50_ticks"] = r.p50_ticks;
  j["p99_ticks"] = r.p99_ticks;
  j["result_p50_ms"] = r.result_p50_ms;
  j["result_p99_ms"] = r.result_p99_ms;
  j["target_ms"] = r.target_ms;
  j["target_met"] = r.met;
  return j;
}

}  // namespace

std::optional<LatencyRun> run_latency(int tick_hz, int snapshot_hz, int samples, bool progress, std::string* error) {
  auto fail = [error](std::string text) -> std::optional<LatencyRun> {
    if (error) *error = std::move(text);
    return std::nullopt;
  };
  server::Scene scene;
  scene.name = "latency";
  scene.gravity = {0.0f, 0.0f, 0.0f};  // the sent velocity stays until the next request changes it
  TempSceneFile scene_file;
  if (!scene_file.write(scene, "latency", error)) return std::nullopt;

  server::ServerConfig config;
  config.bind = "127.0.0.1";
  config.port = 0;
  config.tick_hz = tick_hz;
  config.snapshot_hz = snapshot_hz;
  config.scene = scene_file.path();
  config.max_clients = 4;
  config.log_level = "warn";
  std::string start_error;
  auto server = tools::InprocServer::start(config, {}, &start_error);
  if (!server) return fail("the server did not start: " + start_error);

  Client client;
  std::string connect_error;
  if (!client.connect("127.0.0.1", server->port(), kSetupTimeout, &connect_error, "impulse-bench-latency")) {
    return fail("the client could not connect to the in-process server: " + connect_error);
  }
  ObjectDesc desc;
  desc.shape = ShapeKind::Box;
  desc.dims = {0.25f, 0.25f, 0.25f};
  std::string request_error;
  const std::optional<RequestResult> created =
      await_result(client, client.create_object(desc), kSetupTimeout, &request_error);
  if (!created) return fail("creating the body: " + request_error);
  if (!created->ok()) return fail("the server refused the body: " + created->message);
  const ObjectID body = created->id;
  const Clock::time_point setup_deadline = Clock::now() + kSetupTimeout;
  while (client.find(body) == nullptr) {
    if (Clock::now() >= setup_deadline) return fail("the body never appeared in a snapshot");
    client.poll(std::chrono::milliseconds{2});
  }

  scenes::Lcg phase(kPhaseSeed);
  const double snapshot_interval_ms = 1000.0 / snapshot_hz;
  std::vector<double> latency_ms, result_ms;
  LatencyRun run;
  run.tick_hz = tick_hz;
  run.snapshot_hz = snapshot_hz;
  for (int k = 0; k < samples; ++k) {
    // A random phase relative to the server's tick, so the figures cover every send time.
    const Clock::time_point send_at =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(Ms(phase.range(0.0, snapshot_interval_ms)));
    while (Clock::now() < send_at) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(send_at - Clock::now());
      if (client.poll(std::min(left, std::chrono::milliseconds{1})).server_disconnected) {
        return fail("the server closed the session");
      }
    }
    const Vec3 v = sample_velocity(k);
    const Clock::time_point sent = Clock::now();
    const uint32_t request = client.set_velocity(body, v);
    if (request == 0) return fail("the client lost its session");
    bool seen = false, answered = false;
    while (!seen && Clock::now() - sent < kSampleTimeout) {
      const PollResult& r = client.poll(std::chrono::milliseconds{1});
      const Clock::time_point now = Clock::now();
      if (r.server_disconnected) return fail("the server closed the session: " + r.disconnect_reason);
      for (const RequestResult& result : r.results) {
        if (result.request_id == request && !answered) {
          answered = true;
          result_ms.push_back(Ms(now - sent).count());
        }
      }
      for (const SnapshotRange& s : r.snapshots) {
        const auto view = r.objects_of(s);
        const auto it = std::lower_bound(view.begin(), view.end(), body,
                                         [](const ObjectState& o, ObjectID id) { return o.id < id; });
        if (it != view.end() && it->id == body && shows(*it, v)) {
          seen = true;
          latency_ms.push_back(Ms(now - sent).count());
          break;
        }
      }
    }
    if (!seen) ++run.timeouts;
    if (progress && (k + 1) % 100 == 0) {
      std::fprintf(stderr, "[impulse-bench] latency %d/%d Hz: %d/%d samples\n", tick_hz, snapshot_hz, k + 1, samples);
    }
  }
  client.disconnect("benchmark done");
  server->stop();

  run.samples = static_cast<int>(latency_ms.size());
  if (run.samples == 0) return fail("no request's effect was seen in a snapshot within 1 s");
  run.p50_ms = percentile(latency_ms, 50);
  run.p99_ms = percentile(latency_ms, 99);
  run.max_ms = *std::max_element(latency_ms.begin(), latency_ms.end());
  double sum = 0;
  for (const double ms : latency_ms) sum += ms;
  run.mean_ms = sum / static_cast<double>(run.samples);
  run.p50_ticks = run.p50_ms * tick_hz / 1000.0;
  run.p99_ticks = run.p99_ms * tick_hz / 1000.0;
  run.result_p50_ms = percentile(result_ms, 50);
  run.result_p99_ms = percentile(result_ms, 99);
  run.target_ms = 2.0 * 1000.0 / tick_hz + snapshot_interval_ms;
  run.met = run.p99_ms <= run.target_ms && run.timeouts == 0;
  return run;
}

std::string to_json_line(const std::vector<LatencyRun>& runs) {
  nlohmann::ordered_json j;
  j["scene"] = "latency";
  if (!runs.empty()) {
    j["tick_hz"] = runs.front().tick_hz;
    j["snapshot_hz"] = runs.front().snapshot_hz;
    j["samples"] = runs.front().samples;
    j["p50_ms"] = runs.front().p50_ms;
    j["p99_ms"] = runs.front().p99_ms;
    j["p50_ticks"] = runs.front().p50_ticks;
    j["p99_ticks"] = runs.front().p99_ticks;
  }
  j["runs"] = nlohmann::ordered_json::array();
  for (const LatencyRun& r : runs) j["runs"].push_back(to_json(r));
  return j.dump();
}

void print_human(std::FILE* out, const std::vector<LatencyRun>& runs) {
  std::fprintf(out, "Latency on loopback UDP: request (set_velocity) sent -> first applied snapshot showing it\n");
  std::fprintf(out, "  tick Hz  snap Hz  samples  p50 ms  p99 ms  max ms  p50 ticks  p99 ticks  result p50 ms  "
               "target ms (2 ticks + 1 snapshot)\n");
  for (const LatencyRun& r : runs) {
    std::fprintf(out, "  %7d  %7d  %7d  %6.2f  %6.2f  %6.2f  %9.2f  %9.2f  %13.2f  %6.2f %s%s\n", r.tick_hz,
                 r.snapshot_hz, r.samples, r.p50_ms, r.p99_ms, r.max_ms, r.p50_ticks, r.p99_ticks, r.result_p50_ms,
                 r.target_ms, r.met ? "met" : "NOT met",
                 r.timeouts > 0 ? (" (" + std::to_string(r.timeouts) + " timeouts)").c_str() : "");
  }
}

}  // namespace impulse::bench
