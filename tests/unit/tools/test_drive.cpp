// The car of impulse-client drive and impulse-viewer --drive (tools/drive/car.h) against a
// ServerCore on the virtual clock over a 100 ms round trip, prediction on and off, and its
// --script parser.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "drive/car.h"
#include "drive/script.h"
#include "tests/unit/client/virtual_network.h"

namespace impulse::client_test {
namespace {

TEST(DriveScript, ParsesStepsAndTellsTheControlsAtATime) {
  std::vector<drive::ScriptStep> steps;
  std::string error;
  ASSERT_TRUE(drive::parse_script(" 1 0 3; 1 0.6 2;;-1 -0.5 0.5 ", &steps, &error)) << error;
  ASSERT_EQ(steps.size(), 3u);
  drive::Controls c;
  EXPECT_TRUE(drive::script_controls(steps, 0.0, &c));
  EXPECT_EQ(c.throttle, 1.0f);
  EXPECT_EQ(c.steer, 0.0f);
  EXPECT_TRUE(drive::script_controls(steps, 4.99, &c));
  EXPECT_EQ(c.steer, 0.6f);
  EXPECT_TRUE(drive::script_controls(steps, 5.2, &c));
  EXPECT_EQ(c.throttle, -1.0f);
  EXPECT_EQ(c.steer, -0.5f);
  EXPECT_FALSE(drive::script_controls(steps, 5.5, &c)) << "the script ends after 5.5 s";
  EXPECT_EQ(c.throttle, 0.0f);
}

TEST(DriveScript, RefusesBadStepsNamingThem) {
  const std::string many = [] {
    std::string s;
    for (int i = 0; i < 1001; ++i) s += "1 0 1;";
    return s;
  }();
  for (const std::string bad : {"", " ; ", "1 0", "1 0 1 4", "2 0 1", "1 -1.5 1", "1 0 0", "1 0 -1", "1 0 3601",
                                "1 0 nan", "1 0 inf", "1e400 0 1", "x 0 1", "1 0 1; 1 0", many.c_str()}) {
    std::vector<drive::ScriptStep> steps;
    std::string error;
    EXPECT_FALSE(drive::parse_script(bad, &steps, &error)) << "accepted \"" << bad.substr(0, 40) << "\"";
    EXPECT_FALSE(error.empty());
  }
  std::vector<drive::ScriptStep> steps;
  std::string error;
  EXPECT_FALSE(drive::parse_script("1 0 1; 1 0 1; 3 0 1", &steps, &error));
  EXPECT_NE(error.find("step 3"), std::string::npos) << error;
  EXPECT_FALSE(drive::parse_script("1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; "
                                   "1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; "
                                   "1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; "
                                   "1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000; 1 0 3000",
                                   &steps, &error))
      << "longer than a day";
}

float angle_between(Quat a, Quat b) {
  const float d = std::fabs(a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w);
  return 2.0f * std::acos(std::min(1.0f, d));
}

/// One drive of the car over the virtual network: the figures the tests check.
struct DriveRun {
  double response_s = -1;  // throttle to the drawn car 5 cm from where it stood; < 0: never
  double worst_jump_m = 0; // largest frame-to-frame move of the drawn car beyond its own motion
  double rest_distance_m = -1;
  double rest_angle_rad = -1;
  double server_travel_m = 0;
  bool same_frame = false;  // prediction on: the predicted car moved in the throttle's first frame
  predict::PredictorStats stats;
};

DriveRun drive_car(bool predict, uint64_t seed) {
  VirtualNetwork net;
  const size_t c = net.add_client(jittery_link(50, 10, 0.02, 80 + seed), jittery_link(50, 10, 0.02, 90 + seed));
  net.connect(c, 10s);
  EXPECT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 10s));
  drive::CarConfig config;
  config.predict = predict;
  config.spawn = {0, 0.35f, 10};
  config.ground_y.reset();  // VirtualNetwork's ground is a box
  config.predictor.reconcile_budget_s = 10.0;  // no wall-clock budget under ctest -j2
  drive::Car car(config);
  ObjectDesc ground;
  ground.kind = BodyKind::Static;
  ground.shape = ShapeKind::Box;
  ground.dims = {50, 0.5f, 50};
  ground.position = {0, -0.5f, 0};
  car.set_static(ObjectID{0, 1}, ground);
  const uint32_t create = net.client(c).create_object(car.desc());

  // The script: 1.5 s ahead, 1 s ahead turning left, 1 s braking, then rest.
  auto controls_at = [](double t) {
    if (t < 1.5) return drive::Controls{1.0f, 0.0f};
    if (t < 2.5) return drive::Controls{1.0f, 0.7f};
    if (t < 3.5) return drive::Controls{-1.0f, 0.0f};
    return drive::Controls{};
  };
  DriveRun run;
  std::optional<VirtualNetwork::TimePoint> ready_at;
  std::optional<VirtualNetwork::TimePoint> pressed_at;
  std::optional<Vec3> stood_at;
  std::optional<Vec3> drawn_before;
  std::optional<Vec3> server_before;
  bool throttle_input_seen = false;
  net.on_frame = [&](size_t i) {
    if (i != c) return;
    ClientCore& client = net.client(c);
    const VirtualNetwork::TimePoint now = net.now();
    const PollResult& r = client.take_result();
    for (const RequestResult& result : r.results) {
      if (result.request_id == create && result.ok()) car.created(result.id);
    }
    for (const SnapshotRange& s : r.snapshots) car.snapshot(s.tick, r.objects_of(s), now, r.inputs_of(s));
    const std::optional<uint64_t> tick = client.input_tick(now);
    if (!ready_at) {
      if (car.server_state() && tick) ready_at = now;
      return;
    }
    const double t = std::chrono::duration<double>(now - *ready_at).count();
    const drive::Controls controls = controls_at(t);
    const std::optional<Pose> before = car.predicted_pose(now);
    bool sent = false;
    if (tick) {
      if (const auto in = car.input(*tick, controls)) {
        client.send_input(car.id(), InputMode::Velocity, in->linear, in->angular, in->tick);
        sent = true;
      }
    }
    if (predict && sent && controls.throttle != 0.0f && !throttle_input_seen) {
      // The first input with throttle: the local car moves in this very frame, while the server
      // has not heard of it.
      throttle_input_seen = true;
      const std::optional<Pose> after = car.predicted_pose(now);
      run.same_frame = before && after && after->position.z - before->position.z > 1e-4f &&
                       length(car.server_state()->velocity) < 1e-3f;
    }
    const std::optional<Pose> drawn = predict ? car.predicted_pose(now) : client.pose_at(car.id(), now);
    if (!drawn) return;
    if (!pressed_at && controls.throttle != 0.0f) {
      pressed_at = now;
      stood_at = drawn->position;
    }
    if (pressed_at && run.response_s < 0 && length(drawn->position - *stood_at) >= 0.05f) {
      run.response_s = std::chrono::duration<double>(now - *pressed_at).count();
    }
    if (drawn_before) {
      // A tick of the car's own motion is what a frame may show (the prediction runs a round
      // trip ahead of the server's speed, at the commanded one).
      const double speed = std::max(length(car.server_state()->velocity), std::fabs(car.commanded_speed()));
      const double own = speed / 60.0 + 0.002;
      run.worst_jump_m = std::max(run.worst_jump_m, static_cast<double>(length(drawn->position - *drawn_before)) - own);
    }
    drawn_before = drawn->position;
    if (server_before) run.server_travel_m += length(car.server_state()->position - *server_before);
    server_before = car.server_state()->position;
  };
  EXPECT_TRUE(net.run_until([&] { return ready_at.has_value(); }, 10s));
  for (int f = 0; f < 240 * 6; ++f) net.frame();  // the script, then 2.5 s to stop and settle
  const auto server = net.server().world().get_object(car.id());
  const auto drawn = predict ? car.predicted_pose(net.now()) : net.client(c).pose_at(car.id(), net.now());
  EXPECT_TRUE(server && drawn);
  if (server && drawn) {
    run.rest_distance_m = length(drawn->position - server->position);
    run.rest_angle_rad = angle_between(drawn->orientation, server->orientation);
  }
  run.stats = car.predictor_stats();
  net.on_frame = nullptr;
  return run;
}

TEST(Drive, PredictionAnswersTheThrottleARoundTripSoonerAndAgreesWithTheServerAtRest) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const DriveRun on = drive_car(true, seed);
    const DriveRun off = drive_car(false, seed);
    std::printf("[ figures  ] seed %d: 5 cm after the throttle in %.0f ms predicted, %.0f ms not; worst frame step "
                "beyond own motion %.1f mm predicted, %.1f mm not; at rest %.1f mm and %.2f deg predicted; largest "
                "correction %.1f mm, %llu deferred states; server drove %.1f m\n",
                static_cast<int>(seed), 1e3 * on.response_s, 1e3 * off.response_s, 1e3 * on.worst_jump_m,
                1e3 * off.worst_jump_m, 1e3 * on.rest_distance_m, on.rest_angle_rad * 57.2957795,
                1e3 * on.stats.max_correction_m, static_cast<unsigned long long>(on.stats.stale_states),
                on.server_travel_m);
    EXPECT_TRUE(on.same_frame) << "seed " << seed;
    ASSERT_GT(on.response_s, 0) << "seed " << seed;
    ASSERT_GT(off.response_s, 0) << "seed " << seed;
    // Without prediction the throttle shows after the round trip (100 ms), the input margin and
    // the interpolation delay on top of the car's own acceleration; with it, only the latter.
    EXPECT_GT(off.response_s - on.response_s, 0.1) << "seed " << seed;
    EXPECT_GT(on.server_travel_m, 10.0) << "seed " << seed << ": the car should have been driven";
    EXPECT_LE(on.worst_jump_m, 0.05) << "seed " << seed << ": a correction moved the drawn car over 5 cm in a frame";
    EXPECT_LE(on.rest_distance_m, 0.01) << "seed " << seed;
    EXPECT_LE(on.rest_angle_rad, 1.0 * 3.14159265 / 180.0) << "seed " << seed;
    EXPECT_EQ(on.stats.over_budget, 0u);
  }
}

}  // namespace
}  // namespace impulse::client_test
