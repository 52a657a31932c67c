// Client::pose_at over real loopback UDP against a real server: the interpolated pose of a body in
// free fall matches the closed form of the server's integrator (the exact parabola: a body in
// free flight moves by the trapezoid rule) at the render tick; a spinning sphere's orientation matches
// the constant-rate rotation; the clock estimate tracks the server's tick and the render tick
// trails the newest snapshot by the interpolation delay; after a hostile link clears, pose_at
// converges to the server's state within one interpolation delay plus a stated slack.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "integration/harness.h"
#include "server/physics/settings.h"
#include "server/physics/world.h"

namespace impulse::test {
namespace {

/// No ground: bodies fall freely for the whole test.
constexpr std::string_view kFreeFallScene = R"({
  "name": "integration-free-fall",
  "gravity": { "x": 0.0, "y": -9.81, "z": 0.0 },
  "bodies": []
})";

constexpr int kTickHz = 60;
constexpr int kSnapshotHz = 20;  // 3 ticks per snapshot: interpolation has real work to do
constexpr double kDt = 1.0 / kTickHz;
constexpr double kSnapshotInterval = 1.0 / kSnapshotHz;
/// Position step of the default quantisation (QuantizationConfig::position_fraction_bits = 9).
constexpr double kPositionStep = 1.0 / 512.0;
constexpr double kPi = 3.14159265358979323846;

/// Closed form of the server's integrator for a body in free flight under gravity only: per
/// substep h, v1 = v0 + g h and p += (v0 + v1) / 2 h (the trapezoid rule, solver.cpp), so after
/// n ticks p(n) = p0 + v0 n dt - g (n dt)^2 / 2, the continuous parabola; a lerp between the
/// ticks of two snapshot states misses it by at most |g| (snapshot interval)^2 / 8.
struct Ballistic {
  Vec3 p0;
  Vec3 v0;
  double g = 9.81f;  // the scene's float gravity, as the server holds it

  Vec3 at(double n) const {
    const double t = n * kDt;
    const double drop = 0.5 * g * t * t;
    return Vec3{static_cast<float>(p0.x + v0.x * n * kDt), static_cast<float>(p0.y + v0.y * n * kDt - drop),
                static_cast<float>(p0.z + v0.z * n * kDt)};
  }
  /// Vertical velocity after n ticks [m/s].
  double vy(double n) const { return v0.y - g * n * kDt; }
};

/// Angle of the rotation between two unit quaternions [rad], in [0, pi].
double angle_between(Quat a, Quat b) {
  const double d = std::min(1.0, std::abs(static_cast<double>(dot(a, b))));
  return 2.0 * std::acos(d);
}

/// A thrown, spinning sphere: no angular damping, so |w| and its axis stay constant (a sphere's
/// inertia is isotropic: no gyroscopic torque).
ObjectDesc thrown_sphere(Vec3 position, Vec3 velocity, Vec3 angular_velocity) {
  ObjectDesc d = make_sphere(0.5f, position);
  d.velocity = velocity;
  d.angular_velocity = angular_velocity;
  d.angular_damping = 0.0f;
  return d;
}

ServerOptions pose_server_options() {
  ServerOptions options;
  options.scene_json = kFreeFallScene;
  options.tick_hz = kTickHz;
  options.snapshot_hz = kSnapshotHz;
  return options;
}

TEST(ClientPose, FreeFallAndSpinMatchTheClosedFormAtTheRenderTick) {
  RunningServer server(pose_server_options());
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver driver;
  std::string error;
  ASSERT_TRUE(driver.connect(server.port(), &error)) << error;

  const Vec3 p0{0.0f, 20.0f, 0.0f};
  const Vec3 v0{1.0f, 12.0f, -0.5f};
  const Vec3 w{1.0f, 2.0f, 2.0f};  // |w| = 3 rad/s about (1, 2, 2) / 3
  const ObjectID id = driver.create_ok(thrown_sphere(p0, v0, w));
  ASSERT_FALSE(id.is_null());

  // The tick the body was created at: from the vertical velocity of its first snapshot state
  // (v_y = v0_y - g n dt; the velocity step 1/128 m/s is far below g dt = 0.16 m/s).
  const std::optional<uint64_t> first =
      driver.wait_snapshot_where(0, [&](const std::vector<ObjectState>& objects) { return find_in(objects, id) != nullptr; });
  ASSERT_TRUE(first.has_value());
  const ObjectState* s0 = find_in(driver.snapshots[*first], id);
  Ballistic ballistic{p0, v0};
  const double steps = std::round((v0.y - s0->velocity.y) / (ballistic.g * kDt));
  ASSERT_GE(steps, 0.0);
  const double created = static_cast<double>(*first) - steps;  // p(n) is the state at tick created + n
  // The model matches the snapshots themselves to the quantisation (rounding: half a step).
  for (const auto& [tick, objects] : driver.snapshots) {
    if (const ObjectState* o = find_in(objects, id)) {
      const Vec3 err = abs(o->position - ballistic.at(static_cast<double>(tick) - created));
      EXPECT_LE(std::max({err.x, err.y, err.z}), 0.5 * kPositionStep + 1e-4) << "tick " << tick;
    }
  }

  // Let the clock get ready and the playout clock see a few arrivals.
  ASSERT_TRUE(driver.poll_until([&] {
    return driver.client.clock_sync().ready() && driver.client.clock_sync().snapshot_sample_count() >= 8;
  })) << "clock not ready: " << driver.client.clock_sync().ping_sample_count() << " pings";

  // Render for 1 s of wall time, as a game loop would: pose_at(now) after every poll, plus a sweep
  // of earlier render times now and then.
  const double axis_norm = length(w);
  const Vec3 axis = w * (1.0f / static_cast<float>(axis_norm));
  const double lerp_error = ballistic.g * kSnapshotInterval * kSnapshotInterval / 8.0;  // 3.07 mm
  const double tolerance_xz = kPositionStep;
  const double tolerance_y = kPositionStep + lerp_error;
  const double tolerance_angle = 0.5 * kPi / 180.0;  // smallest-three error is ~0.15 degree
  double max_err_xz = 0;
  double max_err_y = 0;
  double max_excess_y = -1;  // y error minus its bound for the actual snapshot gap [m]
  double max_err_angle = 0;
  double min_tick = 1e300;
  double max_tick = -1e300;
  int checked = 0;
  int not_interpolated = 0;
  // Ticks of the snapshots around render tick r (the interpolation's two samples), as a gap [ticks].
  auto snapshot_gap_ticks = [&](double r) {
    const auto after = driver.snapshots.lower_bound(static_cast<uint64_t>(std::ceil(r)));
    if (after == driver.snapshots.end() || after == driver.snapshots.begin()) {
      return static_cast<double>(kTickHz) / kSnapshotHz;
    }
    const auto before = std::prev(after);
    return static_cast<double>(after->first - before->first);
  };
  auto check = [&](Clock::time_point t) {
    const std::optional<double> r = driver.client.render_tick(t);
    ASSERT_TRUE(r.has_value());
    PoseSource source{};
    const std::optional<Pose> pose = driver.client.pose_at(id, t, &source);
    ASSERT_TRUE(pose.has_value());
    const std::optional<Pose> same = driver.client.pose_at_tick(id, *r);
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(pose->position, same->position);  // pose_at is pose_at_tick at render_tick
    if (*r < static_cast<double>(*first)) return;  // before the body's first state
    if (source != PoseSource::Interpolated) {
      ++not_interpolated;
      return;
    }
    const double n = *r - created;
    const Vec3 expected = ballistic.at(n);
    const Vec3 err = abs(pose->position - expected);
    max_err_xz = std::max({max_err_xz, static_cast<double>(err.x), static_cast<double>(err.z)});
    // The lerp's error grows with the gap between the two snapshots around r: a wake-up that runs
    // two steps stamps a snapshot one tick late, so gaps of 2..4 ticks occur at 20 Hz.
    const double gap_s = snapshot_gap_ticks(*r) * kDt;
    max_err_y = std::max(max_err_y, static_cast<double>(err.y));
    max_excess_y = std::max(max_excess_y, static_cast<double>(err.y) - (tolerance_y - lerp_error + ballistic.g * gap_s * gap_s / 8.0));
    const Quat q = quat_from_axis_angle(axis, static_cast<float>(axis_norm * n * kDt));
    max_err_angle = std::max(max_err_angle, angle_between(pose->orientation, q));
    min_tick = std::min(min_tick, *r);
    max_tick = std::max(max_tick, *r);
    ++checked;
  };
  const Clock::time_point end = Clock::now() + milliseconds{1000};
  for (int i = 0; i < kMaxIterations && Clock::now() < end; ++i) {
    driver.poll_once();
    const Clock::time_point now = Clock::now();
    check(now);
    if (i % 50 == 0) {
      for (int k = 1; k <= 15; ++k) check(now - milliseconds{10 * k});
    }
  }
  std::printf("[pose_at] %d poses checked over render ticks %.1f..%.1f (%d not interpolated): max error "
              "x/z %.3f mm (tol %.3f), y %.3f mm (tol %.3f at a 3-tick gap; %.3f mm under the bound of its gap), orientation %.3f deg (tol %.2f); delay %.1f ms\n",
              checked, min_tick, max_tick, not_interpolated, max_err_xz * 1e3, tolerance_xz * 1e3, max_err_y * 1e3,
              tolerance_y * 1e3, -max_excess_y * 1e3, max_err_angle * 180.0 / kPi, tolerance_angle * 180.0 / kPi,
              driver.client.interpolation_delay_s() * 1e3);
  EXPECT_GE(checked, 200);
  EXPECT_LE(not_interpolated, checked / 20) << "the render tick should stay inside the buffer on loopback";
  EXPECT_GE(max_tick - min_tick, 3.0 * kTickHz / kSnapshotHz) << "render ticks should span several snapshots";
  EXPECT_LE(max_err_xz, tolerance_xz + 1e-4);
  EXPECT_LE(max_excess_y, 1e-4);
  EXPECT_LE(max_err_angle, tolerance_angle);
}

TEST(ClientPose, ClockSyncTracksTheServerTickAndRenderTrailsByTheDelay) {
  RunningServer server(pose_server_options());
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver driver;
  std::string error;
  ASSERT_TRUE(driver.connect(server.port(), &error)) << error;
  // Something moving, so every snapshot carries data.
  ASSERT_FALSE(driver.create_ok(thrown_sphere({0.0f, 20.0f, 0.0f}, {0.0f, 12.0f, 0.0f}, {})).is_null());

  // The burst: four answered time pings make the clock ready within ~0.4 s + RTT.
  const Clock::time_point connected = Clock::now();
  ASSERT_TRUE(driver.poll_until([&] { return driver.client.clock_sync().ready(); }, milliseconds{2000}));
  const double ready_ms = std::chrono::duration<double, std::milli>(Clock::now() - connected).count();
  EXPECT_GE(driver.client.stats().time_pings_sent, ClockSync::kReadySamples);
  EXPECT_TRUE(driver.pongs.empty()) << "clock-sync pongs must not be listed as the user's";

  // The estimated server tick against the server's own (read just before and after).
  int compared = 0;
  double max_dev = 0;
  const Clock::time_point end = Clock::now() + milliseconds{500};
  for (int i = 0; i < kMaxIterations && Clock::now() < end; ++i) {
    driver.poll_once();
    const double before = static_cast<double>(server.stats().tick.load());
    const std::optional<double> estimate = driver.client.estimated_server_tick(Clock::now());
    const double after = static_cast<double>(server.stats().tick.load());
    ASSERT_TRUE(estimate.has_value());
    // The tick being stepped is in [world tick, world tick + 1).
    const double dev = *estimate < before ? before - *estimate : std::max(0.0, *estimate - (after + 1.0));
    max_dev = std::max(max_dev, dev);
    EXPECT_LE(dev, 2.0) << "estimate " << *estimate << ", server tick " << before << ".." << after;
    ++compared;
  }
  EXPECT_GE(compared, 50);

  // A user ping is still answered through PollResult::pongs (and feeds the clock too).
  const uint64_t nonce = driver.client.ping();
  ASSERT_NE(nonce, 0u);
  ASSERT_TRUE(driver.poll_until([&] { return !driver.pongs.empty(); }));
  EXPECT_EQ(driver.pongs.front().nonce, nonce);

  // The render tick trails the newest snapshot by the delay, measured as each snapshot arrives.
  auto median_lag = [&](int samples) {
    std::vector<double> lags;
    uint64_t seen = driver.client.snapshot_tick();
    driver.poll_until(
        [&] {
          if (driver.client.snapshot_tick() != seen) {
            seen = driver.client.snapshot_tick();
            lags.push_back(static_cast<double>(seen) - driver.client.render_tick(Clock::now()).value_or(0.0));
          }
          return lags.size() >= static_cast<size_t>(samples);
        },
        milliseconds{4000});
    if (lags.empty()) return -1.0;
    std::sort(lags.begin(), lags.end());
    return lags[lags.size() / 2];
  };
  const double default_delay_ticks = driver.client.interpolation_delay_s() * kTickHz;
  EXPECT_NEAR(default_delay_ticks, kDefaultDelaySnapshotIntervals * kTickHz / kSnapshotHz, 1.0)
      << "two snapshot intervals plus a loopback's jitter";
  const double lag_default = median_lag(12);
  EXPECT_NEAR(lag_default, default_delay_ticks, 1.0);

  ClientConfig config;
  config.interpolation_delay_s = 0.2;  // 12 ticks
  ASSERT_TRUE(driver.client.set_config(config, &error)) << error;
  EXPECT_DOUBLE_EQ(driver.client.interpolation_delay_s(), 0.2);
  const double lag_fixed = median_lag(12);
  EXPECT_NEAR(lag_fixed, 0.2 * kTickHz, 1.0);
  config.interpolation_delay_s = -1.0;
  EXPECT_FALSE(driver.client.set_config(config, &error));
  EXPECT_NE(error.find("interpolation_delay_s"), std::string::npos) << error;

  const ClockEstimate e = driver.client.clock_estimate(Clock::now());
  std::printf("[clock] ready after %.0f ms, offset %+.3f ms, rtt %.3f ms, jitter %.3f ms; server tick within "
              "%.2f ticks over %d reads; render lag %.2f ticks (delay %.2f), %.2f ticks with a fixed 200 ms\n",
              ready_ms, e.offset_s * 1e3, e.rtt_s * 1e3, e.jitter_s * 1e3, max_dev, compared, lag_default,
              default_delay_ticks, lag_fixed);

  // Disconnect forgets it all.
  driver.client.disconnect();
  EXPECT_FALSE(driver.client.render_tick(Clock::now()).has_value());
  EXPECT_FALSE(driver.client.estimated_server_tick(Clock::now()).has_value());
  EXPECT_EQ(driver.client.interpolator().size(), 0u);
}

/// Server truth at snapshot ticks, recorded on the server's thread by the snapshot observer.
struct PoseTruth {
  std::mutex mutex;
  std::map<uint64_t, std::map<uint64_t, Pose>> poses;  // tick -> wire id -> pose

  void record(const physics::World& world) {
    std::map<uint64_t, Pose> now;
    world.for_each_object([&](const physics::BodyState& b) { now[to_wire(b.id)] = Pose{b.position, b.orientation}; });
    std::lock_guard lock(mutex);
    poses[world.tick()] = std::move(now);
    while (poses.size() > 4096) poses.erase(poses.begin());
  }
  /// The server's pose of `id` at fractional tick r: lerp/slerp between the recorded snapshot
  /// ticks around it (the same ticks the client interpolates between when it has them all).
  std::optional<Pose> at(uint64_t id, double r) {
    std::lock_guard lock(mutex);
    const auto hi = poses.lower_bound(static_cast<uint64_t>(std::ceil(r)));
    if (hi == poses.end() || hi == poses.begin()) return std::nullopt;
    const auto b = hi->second.find(id);
    if (b == hi->second.end()) return std::nullopt;
    if (static_cast<double>(hi->first) == r) return b->second;
    const auto lo = std::prev(hi);
    const auto a = lo->second.find(id);
    if (a == lo->second.end()) return std::nullopt;
    const float u = static_cast<float>((r - static_cast<double>(lo->first)) /
                                       static_cast<double>(hi->first - lo->first));
    return Pose{a->second.position + (b->second.position - a->second.position) * u,
                slerp(a->second.orientation, b->second.orientation, u)};
  }
};

TEST(ClientPose, ConvergesToTheServerWithinOneDelayAfterAHostileLinkClears) {
  PoseTruth truth;
  ServerOptions options = pose_server_options();
  options.link = hostile_link(21);
  options.observer = [&truth](const physics::World& world) { truth.record(world); };
  RunningServer server(options);
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver driver;
  ASSERT_TRUE(driver.client.set_link_conditions(hostile_link(23)));
  std::string error;
  ASSERT_TRUE(driver.connect(server.port(), &error, "hostile-pose", milliseconds{10000})) << error;

  // Three thrown, spinning balls: in flight for the whole test (apex ~27 m, back at ~5 m after
  // 4 s), so the extrapolation on loss is wrong by g t^2 / 2 and needs correcting.
  const std::vector<uint32_t> requests = {
      driver.client.create_object(thrown_sphere({-5.0f, 20.0f, 0.0f}, {1.0f, 12.0f, 0.0f}, {0.0f, 3.0f, 0.0f})),
      driver.client.create_object(thrown_sphere({0.0f, 20.0f, 0.0f}, {0.0f, 11.0f, 1.0f}, {2.0f, 0.0f, 1.0f})),
      driver.client.create_object(thrown_sphere({5.0f, 20.0f, 0.0f}, {-1.0f, 13.0f, -1.0f}, {0.0f, 0.0f, 4.0f}))};
  std::vector<ObjectID> balls;
  for (const uint32_t request : requests) {
    const std::optional<RequestResult> r = driver.wait_result(request, milliseconds{10000});
    ASSERT_TRUE(r.has_value() && r->ok());
    balls.push_back(r->id);
  }

  // A stretch under the hostile link: poses stay defined and finite while data is lost.
  const Clock::time_point hostile_end = Clock::now() + milliseconds{1500};
  for (int i = 0; i < kMaxIterations && Clock::now() < hostile_end; ++i) {
    driver.poll_once();
    for (const ObjectID id : balls) {
      if (const std::optional<Pose> pose = driver.client.pose_at(id, Clock::now())) {
        ASSERT_TRUE(is_finite(pose->position) && is_finite(pose->orientation));
      }
    }
  }
  const uint64_t corrections_before = driver.client.interpolator().stats().corrections;

  // Clear both directions. The interpolation delay the client shows by then: how far its render
  // tick trails the server's clock (buffer + jitter + the hostile link's snapshot lateness).
  server.server().set_link_conditions(net::LinkConditions{});
  ASSERT_TRUE(driver.client.set_link_conditions(net::LinkConditions{}));
  const Clock::time_point cleared = Clock::now();
  const std::optional<double> server_tick = driver.client.estimated_server_tick(cleared);
  const std::optional<double> render_tick = driver.client.render_tick(cleared);
  ASSERT_TRUE(server_tick && render_tick) << "the clock should be ready after 1.5 s even on this link";
  const double delay_s = (*server_tick - *render_tick) / kTickHz;
  // Slack: the correction started at the clear decays as e^(-t / 100 ms) (2 % after 0.4 s), and
  // the playout clock slews back from the hostile link's lateness at 5 %.
  const double slack_s = 0.4;
  const double tolerance_m = 2.0 * kPositionStep;          // both ends quantised, plus rounding
  const double tolerance_rad = 1.0 * kPi / 180.0;

  // Measure until delay + slack + 0.5 s after the clear: the last moment any ball was off.
  const Clock::time_point end = cleared + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(delay_s + slack_s + 0.5));
  Clock::time_point last_bad = cleared;
  double max_err_late = 0;
  int compared_late = 0;
  for (int i = 0; i < kMaxIterations && Clock::now() < end; ++i) {
    driver.poll_once();
    const Clock::time_point now = Clock::now();
    const std::optional<double> r = driver.client.render_tick(now);
    ASSERT_TRUE(r.has_value());
    for (const ObjectID id : balls) {
      const std::optional<Pose> pose = driver.client.pose_at(id, now);
      const std::optional<Pose> want = truth.at(to_wire(id), *r);
      if (!pose || !want) {
        last_bad = now;
        continue;
      }
      const double err = length(pose->position - want->position);
      const double turn = angle_between(pose->orientation, want->orientation);
      if (err > tolerance_m || turn > tolerance_rad) last_bad = now;
      if (now - cleared > std::chrono::duration<double>(delay_s + slack_s)) {
        max_err_late = std::max(max_err_late, err);
        ++compared_late;
      }
    }
  }
  const double converged_s = std::chrono::duration<double>(last_bad - cleared).count();
  std::printf("[hostile pose] delay %.0f ms at the clear; pose_at matched the server %.0f ms after the link cleared "
              "(bound %.0f ms); afterwards max error %.3f mm over %d poses; %llu corrections under loss\n",
              delay_s * 1e3, converged_s * 1e3, (delay_s + slack_s) * 1e3, max_err_late * 1e3, compared_late,
              static_cast<unsigned long long>(corrections_before));
  EXPECT_GE(compared_late, 100);
  EXPECT_LE(converged_s, delay_s + slack_s);
  EXPECT_LE(max_err_late, tolerance_m);
}

}  // namespace
}  // namespace impulse::test
