// impulse-consumer-predict HOST:PORT: what a game that predicts its player's body does with the
// installed Impulse::predict. Connects, creates a box on the demo scene, drives it with
// tick-stamped Velocity inputs, applying each to a Predictor in the same frame, and reconciles on
// every snapshot. Checks that the predicted box answers the first input at once (before any
// snapshot could), and that after the inputs stop the prediction and the server agree within
// 5 cm. Exit 0 on success; 1 with a message on stderr otherwise. Every wait has a deadline.
#include <impulse/client.h>
#include <impulse/predict.h>

#include <poll.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

int fail(const std::string& message) {
  std::fprintf(stderr, "impulse-consumer-predict: %s\n", message.c_str());
  return 1;
}

void next_frame() { ::poll(nullptr, 0, 5); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: impulse-consumer-predict HOST:PORT");
  std::string host, error;
  uint16_t port = 0;
  if (!impulse::parse_host_port(argv[1], &host, &port, &error)) return fail(error);
  impulse::Client client;
  if (!client.connect(host, port, std::chrono::seconds(3), &error, "consumer-predict")) return fail(error);

  impulse::ObjectDesc box;
  box.shape = impulse::ShapeKind::Box;
  box.dims = {0.5f, 0.5f, 0.5f};
  box.position = {-40.0f, 0.5f, -40.0f};  // resting on the demo scene's ground (y = 0)
  box.mass = 50.0f;
  impulse::predict::PredictorConfig config;
  config.tick_hz = client.tick_hz();
  impulse::predict::Predictor predictor(config);
  const uint32_t request = client.create_object(box);
  impulse::ObjectID id;
  std::optional<double> moved_before_snapshot_m;
  uint64_t inputs_sent = 0, last_input_tick = 0, snapshots_after = 0;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(15);
  while (snapshots_after < 60) {  // one second of snapshots after the last input
    if (Clock::now() > deadline) return fail("did not finish in time");
    const Clock::time_point now = Clock::now();
    const impulse::PollResult& update = client.poll();
    if (update.server_disconnected) return fail("server closed the session: " + update.disconnect_reason);
    for (const impulse::RequestResult& r : update.results) {
      if (r.request_id != request) continue;
      if (!r.ok()) return fail(std::string("create refused: ") + r.message);
      id = r.id;
      predictor.drive(id, box);
    }
    for (const impulse::SnapshotRange& s : update.snapshots) {
      predictor.reconcile(s.tick, update.objects_of(s), now);
      if (inputs_sent == 60) ++snapshots_after;
    }
    const std::optional<uint64_t> tick = client.input_tick(now);
    if (id.is_null() || !tick || predictor.local_tick() == 0) {
      next_frame();
      continue;
    }
    if (inputs_sent < 60 && *tick > last_input_tick) {
      const std::optional<impulse::ObjectState> before = predictor.predicted(id);
      const impulse::Vec3 velocity{2.0f, 0.0f, 0.0f};  // 2 m/s along +x for one second
      client.send_input(id, impulse::InputMode::Velocity, velocity, {}, *tick);
      predictor.input(id, impulse::InputMode::Velocity, velocity, {}, *tick);
      const std::optional<impulse::ObjectState> after = predictor.predicted(id);
      if (inputs_sent == 0 && before && after) moved_before_snapshot_m = after->position.x - before->position.x;
      last_input_tick = *tick;
      ++inputs_sent;
    } else if (inputs_sent == 60) {
      predictor.advance(*tick);
    }
    next_frame();
  }
  const impulse::ObjectState* server = client.find(id);
  const std::optional<impulse::ObjectState> predicted = predictor.predicted(id);
  if (server == nullptr || !predicted) return fail("the box is not in the snapshots");
  if (!moved_before_snapshot_m || *moved_before_snapshot_m <= 0.0) {
    return fail("the first input did not move the predicted box in its own frame");
  }
  const float dx = predicted->position.x - server->position.x;
  const float dz = predicted->position.z - server->position.z;
  const double apart = std::sqrt(static_cast<double>(dx * dx + dz * dz));
  std::printf("impulse-consumer-predict: first input moved the prediction %.1f mm in its own frame; "
              "server x %.3f m, predicted %.3f m (%.1f mm apart); %llu reconciliations\n",
              *moved_before_snapshot_m * 1000.0, static_cast<double>(server->position.x),
              static_cast<double>(predicted->position.x), apart * 1000.0,
              static_cast<unsigned long long>(predictor.stats().reconciliations));
  client.disconnect();
  if (apart > 0.05) return fail("the prediction ends more than 5 cm from the server");
  return 0;
}
