// Client-side prediction (impulse/predict.h) against a ServerCore on the virtual clock,
// over a 100 ms round trip: the player's box answers its input in the frame the input is made,
// corrections fade without a jump, and at rest the prediction agrees with the server.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "impulse/predict.h"
#include "tests/unit/client/virtual_network.h"

namespace impulse::client_test {
namespace {

constexpr auto link = jittery_link;

float angle_between(Quat a, Quat b) {
  const float d = std::fabs(a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w);
  return 2.0f * std::acos(std::min(1.0f, d));
}

struct Drive {
  VirtualNetwork net;
  size_t c = 0;
  ObjectID box;
  ObjectDesc desc;
  /// No wall-clock budget in tests (ctest -j2 shares 2 cores): reconciliations always finish,
  /// so every run replays the same ticks. The budget has its own test.
  static predict::PredictorConfig unhurried() {
    predict::PredictorConfig c;
    c.reconcile_budget_s = 10.0;
    return c;
  }
  predict::Predictor predictor{unhurried()};
  uint64_t last_tick = 0;

  explicit Drive(const net::LinkConditions& up, const net::LinkConditions& down,
                 server::ServerConfig config = VirtualNetwork::default_config())
      : net(config) {
    c = net.add_client(up, down);
    net.connect(c, 10s);
    EXPECT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 10s));
    desc.shape = ShapeKind::Box;
    desc.dims = {0.5f, 0.25f, 1.0f};
    desc.position = {0, 0.25f, 0};
    desc.mass = 50.0f;
    net.client(c).create_object(desc);
    EXPECT_TRUE(net.run_until(
        [&] {
          for (const RequestResult& r : net.client(c).take_result().results) box = r.id;
          return !box.is_null() && net.client(c).input_tick(net.now()).has_value();
        },
        10s));
    predictor.drive(box, desc);
    // The level: VirtualNetwork's ground, exactly (its snapshot copy's orientation is quantised).
    ObjectDesc ground;
    ground.kind = BodyKind::Static;
    ground.shape = ShapeKind::Box;
    ground.dims = {50, 0.5f, 50};
    ground.position = {0, -0.5f, 0};
    predictor.set_static(ObjectID{0, 1}, ground);
  }

  /// One frame of the game: snapshots reconcile, then the throttle (force along +x [N]) goes to
  /// the server and to the predictor for each new input tick. Returns true when an input was sent.
  bool frame(float throttle) {
    bool sent = false;
    net.on_frame = [&](size_t i) {
      if (i != c) return;
      const PollResult& r = net.client(c).take_result();
      for (const SnapshotRange& s : r.snapshots) predictor.reconcile(s.tick, r.objects_of(s), net.now());
      const std::optional<uint64_t> tick = net.client(c).input_tick(net.now());
      if (!tick || *tick <= last_tick) return;
      last_tick = *tick;
      net.client(c).send_input(box, InputMode::Force, {throttle, 0, 0}, {}, *tick);
      predictor.input(box, InputMode::Force, {throttle, 0, 0}, {}, *tick);
      sent = true;
    };
    net.frame();
    return sent;
  }
};

TEST(Prediction, TheDrivenBodyAnswersInTheSameFrameAndAgreesWithTheServerAtRest) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    // 50 ms each way, +-10 ms of jitter, 2 % loss.
    Drive d(link(50, 10, 0.02, 40 + seed), link(50, 10, 0.02, 50 + seed));
    // Idle until the predictor has reconciled once (it knows the box).
    for (int f = 0; f < 240 && !d.predictor.predicted(d.box); ++f) d.frame(0.0f);
    ASSERT_TRUE(d.predictor.predicted(d.box).has_value());

    // The first frame with throttle: the prediction moves at once (400 N on 50 kg against
    // kinetic friction 0.5 x 50 x 9.81 = 245 N), while the server has not heard of it.
    bool responded = false;
    for (int f = 0; f < 8 && !responded; ++f) {
      if (!d.frame(400.0f)) continue;
      const auto p = d.predictor.predicted(d.box);
      ASSERT_TRUE(p.has_value());
      EXPECT_GT(p->velocity.x, 0.0f) << "the predicted box did not answer its input in the same frame";
      EXPECT_NEAR(d.net.server().world().get_object(d.box)->velocity.x, 0.0f, 1e-6f)
          << "the server already moved: the test would not show prediction";
      responded = true;
    }
    ASSERT_TRUE(responded);

    // Drive 1.5 s, release, and let it stop; follow the drawn pose frame by frame.
    std::optional<Vec3> drawn_before;
    double worst_jump = 0;
    for (int f = 0; f < 240 * 4; ++f) {
      d.frame(f < 360 ? 400.0f : 0.0f);
      const auto drawn = d.predictor.pose(d.box, d.net.now());
      const auto predicted = d.predictor.predicted(d.box);
      ASSERT_TRUE(drawn && predicted);
      if (drawn_before) {
        // How far the drawn box moved this frame beyond one tick of its own motion (the
        // prediction advances a tick at a time): a snapped correction would show here.
        const double step = length(drawn->position - *drawn_before);
        const double own = length(predicted->velocity) / 60.0;
        worst_jump = std::max(worst_jump, step - own);
      }
      drawn_before = drawn->position;
    }
    EXPECT_LE(worst_jump, 0.05) << "seed " << seed << ": a correction moved the drawn box more than 5 cm in one frame";

    const auto server = d.net.server().world().get_object(d.box);
    const auto drawn = d.predictor.pose(d.box, d.net.now());
    ASSERT_TRUE(server && drawn);
    EXPECT_GT(server->position.x, 2.0f) << "the box should have been driven a few metres";
    EXPECT_LE(length(drawn->position - server->position), 0.01f) << "seed " << seed;
    EXPECT_LE(angle_between(drawn->orientation, server->orientation), 1.0f * 3.14159265f / 180.0f);
    const predict::PredictorStats& s = d.predictor.stats();
    std::printf("[ figures  ] seed %d: %llu reconciliations, %llu ticks replayed (%.1f each), largest correction "
                "%.1f mm, worst step beyond its own motion in one 4.2 ms frame %.2f mm, rest error %.2f mm\n",
                static_cast<int>(seed), static_cast<unsigned long long>(s.reconciliations),
                static_cast<unsigned long long>(s.ticks_replayed),
                static_cast<double>(s.ticks_replayed) / static_cast<double>(std::max<uint64_t>(s.reconciliations, 1)),
                1000.0 * s.max_correction_m, 1000.0 * worst_jump,
                1000.0 * length(drawn->position - server->position));
    EXPECT_EQ(s.over_budget, 0u);
  }
}

TEST(Prediction, AShoveThePlayerDidNotPredictFadesInWithoutAJump) {
  // Another client (--authority any) shoves the driven box sideways at 3 m/s: the predictor learns
  // of it a round trip late, half a metre off, and the drawn box slides over instead of jumping.
  server::ServerConfig config = VirtualNetwork::default_config();
  config.authority = "any";
  Drive d(link(50, 10, 0.0, 61), link(50, 10, 0.0, 62), config);
  const size_t other = d.net.add_client();
  d.net.connect(other);
  for (int f = 0; f < 480 && !(d.predictor.predicted(d.box) && d.net.client(other).connected()); ++f) d.frame(0.0f);
  ASSERT_TRUE(d.predictor.predicted(d.box).has_value());
  std::optional<Vec3> drawn_before;
  double worst_jump = 0;
  for (int f = 0; f < 240 * 4; ++f) {
    if (f == 240) d.net.client(other).apply_impulse(d.box, {0, 0, 150.0f});  // 50 kg: +3 m/s along z
    d.frame(f < 480 ? 400.0f : 0.0f);
    const auto drawn = d.predictor.pose(d.box, d.net.now());
    const auto predicted = d.predictor.predicted(d.box);
    ASSERT_TRUE(drawn && predicted);
    if (drawn_before) {
      worst_jump = std::max(worst_jump, static_cast<double>(length(drawn->position - *drawn_before)) -
                                            static_cast<double>(length(predicted->velocity)) / 60.0);
    }
    drawn_before = drawn->position;
  }
  const predict::PredictorStats& s = d.predictor.stats();
  std::printf("[ figures  ] shove: largest correction %.0f mm, worst step beyond its own motion %.2f mm\n",
              1000.0 * s.max_correction_m, 1000.0 * worst_jump);
  EXPECT_GT(s.max_correction_m, 0.2) << "the shove should have been a real misprediction";
  EXPECT_LE(worst_jump, 0.05);
  const auto server = d.net.server().world().get_object(d.box);
  const auto drawn = d.predictor.pose(d.box, d.net.now());
  ASSERT_TRUE(server && drawn);
  EXPECT_GT(server->position.z, 0.3f);
  const auto predicted = d.predictor.predicted(d.box);
  EXPECT_LE(length(drawn->position - server->position), 0.01f)
      << "server (" << server->position.x << ", " << server->position.y << ", " << server->position.z << ") v "
      << length(server->velocity) << " sleeping " << server->sleeping << "; predicted (" << predicted->position.x
      << ", " << predicted->position.y << ", " << predicted->position.z << ") v " << length(predicted->velocity)
      << " q " << predicted->orientation.x << " " << predicted->orientation.y << " " << predicted->orientation.z << " "
      << predicted->orientation.w << " server q " << server->orientation.x << " " << server->orientation.y << " "
      << server->orientation.z << " " << server->orientation.w << " snapshot y "
      << d.net.client(d.c).find(d.box)->position.y << " dims " << d.net.client(d.c).find(d.box)->dims.y;
}

TEST(Prediction, AReconciliationOverItsTimeBudgetKeepsTheOldPrediction) {
  predict::PredictorConfig config;
  config.reconcile_budget_s = 0.0;  // every replay is over budget at its first tick
  predict::Predictor p(config);
  ObjectDesc desc;
  desc.shape = ShapeKind::Box;
  desc.dims = {0.5f, 0.5f, 0.5f};
  const ObjectID box{1, 1};
  p.drive(box, desc);
  ObjectState seen;
  seen.id = box;
  seen.shape = ShapeKind::Box;
  seen.dims = desc.dims;
  seen.position = {0, 10, 0};
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  p.reconcile(100, std::span(&seen, 1), t0);  // nothing to replay: it completes
  ASSERT_TRUE(p.predicted(box).has_value());
  for (uint64_t t = 101; t <= 110; ++t) p.input(box, InputMode::Force, {0, 0, 0}, {}, t);
  const float before = p.predicted(box)->position.y;
  EXPECT_LT(before, 10.0f) << "ten ticks of free fall";
  seen.position = {0, 50, 0};
  p.reconcile(105, std::span(&seen, 1), t0 + 100ms);  // five ticks to replay: abandoned
  EXPECT_EQ(p.stats().over_budget, 1u);
  EXPECT_EQ(p.predicted(box)->position.y, before) << "an abandoned reconciliation must leave the prediction";
  EXPECT_EQ(p.local_tick(), 110u);
}

TEST(Prediction, ADeferredStateRestartsFromItsOwnTick) {
  // A body moving at 6 m/s in free space (no gravity): the snapshot of tick 120 carries the body's
  // state of tick 115 (the server's byte budget deferred it). Taken as the state of tick 120 it
  // would pull the prediction back five ticks (50 cm); taken at its own tick it agrees.
  predict::PredictorConfig config;
  config.gravity = {0, 0, 0};
  config.reconcile_budget_s = 10.0;
  predict::Predictor p(config);
  ObjectDesc desc;
  desc.shape = ShapeKind::Sphere;
  desc.dims = {0.5f, 0.5f, 0.5f};
  const ObjectID ball{1, 1};
  p.drive(ball, desc);
  const Vec3 v{6, 0, 0};
  auto state_at = [&](uint64_t tick, uint64_t carried) {
    ObjectState s;
    s.id = ball;
    s.shape = ShapeKind::Sphere;
    s.dims = desc.dims;
    s.position = v * (static_cast<float>(carried) / 60.0f);
    s.velocity = v;
    s.tick = carried;
    (void)tick;
    return s;
  };
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  ObjectState seen = state_at(100, 100);
  p.reconcile(100, std::span(&seen, 1), t0);
  for (uint64_t t = 101; t <= 124; ++t) p.input(ball, InputMode::Velocity, v, {}, t);
  const float before = p.predicted(ball)->position.x;
  EXPECT_NEAR(before, 6.0f * 124.0f / 60.0f, 1e-3f);
  seen = state_at(120, 115);
  p.reconcile(120, std::span(&seen, 1), t0 + 50ms);
  EXPECT_EQ(p.stats().stale_states, 1u);
  EXPECT_NEAR(p.predicted(ball)->position.x, before, 1e-3f) << "the deferred state pulled the prediction back";
  EXPECT_LT(p.stats().max_correction_m, 1e-3);
  // The same state again (the next snapshot deferred it too) is not a newer restart: ignored.
  p.reconcile(122, std::span(&seen, 1), t0 + 80ms);
  EXPECT_EQ(p.stats().reconciliations, 2u);
}

TEST(Prediction, ObjectStatesCarryTheTickOfTheSnapshotThatLastCarriedThem) {
  // A resting box is carried once and then left out (unchanged): its tick stays. A pushed box is
  // carried by every snapshot while it moves: its tick is the snapshot's.
  Drive d(link(20, 0, 0.0, 71), link(20, 0, 0.0, 72));
  for (int f = 0; f < 480 && !d.predictor.predicted(d.box); ++f) d.frame(0.0f);
  ASSERT_TRUE(d.predictor.predicted(d.box).has_value());
  for (int f = 0; f < 240 * 3; ++f) d.frame(f < 240 ? 400.0f : 0.0f);  // drive, then come to rest
  const uint64_t rest_tick = d.net.client(d.c).find(d.box)->tick;
  for (int f = 0; f < 240; ++f) d.frame(0.0f);  // a second at rest
  const ObjectState* box = d.net.client(d.c).find(d.box);
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->tick, rest_tick) << "an unchanged box was carried again";
  EXPECT_LT(box->tick + 30, d.net.client(d.c).snapshot_tick());
  const ObjectState* ground = d.net.client(d.c).find(ObjectID{0, 1});
  ASSERT_NE(ground, nullptr);
  EXPECT_GT(ground->tick, 0u);
  EXPECT_LE(ground->tick, box->tick) << "the static ground was carried once, at the first snapshot";
  for (int f = 0; f < 60; ++f) d.frame(400.0f);
  box = d.net.client(d.c).find(d.box);
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->tick, d.net.client(d.c).snapshot_tick()) << "a moving box in a light scene is in every snapshot";
}

// ---------------------------------------------------------------- other players and zones

/// Players on one server, each driving a box with Force inputs on every new input tick.
struct Players {
  VirtualNetwork net;
  std::vector<size_t> c;
  std::vector<ObjectID> box;
  std::vector<uint64_t> last_tick;
  ObjectDesc desc;

  explicit Players(const std::vector<Vec3>& spawns, uint64_t seed = 0,
                   server::ServerConfig config = VirtualNetwork::default_config())
      : net(config) {
    desc.shape = ShapeKind::Box;
    desc.dims = {0.5f, 0.25f, 1.0f};
    desc.mass = 50.0f;
    for (size_t i = 0; i < spawns.size(); ++i) {
      c.push_back(net.add_client(link(50, 10, 0.0, 90 + 10 * seed + i), link(50, 10, 0.0, 95 + 10 * seed + i)));
      net.connect(c[i], 10s);
    }
    EXPECT_TRUE(net.run_until(
        [&] { return std::all_of(c.begin(), c.end(), [&](size_t k) { return net.client(k).connected(); }); }, 10s));
    box.resize(spawns.size());
    last_tick.assign(spawns.size(), 0);
    for (size_t i = 0; i < spawns.size(); ++i) {
      ObjectDesc d = desc;
      d.position = spawns[i];
      net.client(c[i]).create_object(d);
    }
    EXPECT_TRUE(net.run_until(
        [&] {
          bool all = true;
          for (size_t i = 0; i < c.size(); ++i) {
            for (const RequestResult& r : net.client(c[i]).take_result().results) box[i] = r.id;
            all = all && !box[i].is_null() && net.client(c[i]).input_tick(net.now()).has_value();
          }
          return all;
        },
        10s));
  }
};

TEST(RelayedInputs, ASnapshotCarriesOtherPlayersInputsInItsAreaAndNeverTheClientsOwn) {
  // A and B drive near the origin, C far away; B's area is 10 m around the origin.
  Players p({{0, 0.25f, 0}, {0, 0.25f, 4}, {40, 0.25f, 40}});
  p.net.client(p.c[1]).set_interest_sphere({0, 0, 0}, 10.0f);
  const Vec3 push[3] = {{400, 0, 0}, {0, 0, 300}, {-350, 0, 0}};
  std::vector<std::vector<RelayedInput>> seen(3);
  p.net.on_frame = [&](size_t i) {
    const PollResult& r = p.net.client(i).take_result();
    for (const SnapshotRange& s : r.snapshots) {
      for (const RelayedInput& in : r.inputs_of(s)) seen[i].push_back(in);
    }
    const std::optional<uint64_t> tick = p.net.client(i).input_tick(p.net.now());
    if (!tick || *tick <= p.last_tick[i]) return;
    p.last_tick[i] = *tick;
    p.net.client(i).send_input(p.box[i], InputMode::Force, push[i], {0, 1, 0}, *tick);
  };
  p.net.run_for(2s);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_FALSE(seen[i].empty()) << "client " << i << " was relayed nothing";
    for (const RelayedInput& in : seen[i]) {
      const auto k = static_cast<size_t>(std::find(p.box.begin(), p.box.end(), in.id) - p.box.begin());
      ASSERT_LT(k, 3u) << "a relayed input for a body nobody drives";
      EXPECT_NE(k, i) << "client " << i << " was relayed its own input";
      EXPECT_EQ(in.mode, InputMode::Force);
      EXPECT_EQ(in.linear, push[k]) << "relayed exactly as sent";
      EXPECT_EQ(in.angular, (Vec3{0, 1, 0}));
      EXPECT_FALSE(i == 1 && k == 2) << "C's body is 56 m outside B's area";
    }
  }
  const auto relayed_to = [&](size_t i, size_t k) {
    return std::count_if(seen[i].begin(), seen[i].end(), [&](const RelayedInput& in) { return in.id == p.box[k]; });
  };
  EXPECT_GT(relayed_to(1, 0), 30) << "B sees A's input in most of its 60 snapshots";
  EXPECT_GT(relayed_to(0, 2), 30) << "A's area is the whole world: it sees C's";
  EXPECT_GT(p.net.stats().inputs_relayed.load(), 90u);
}

TEST(RelayedInputs, RelayInputsZeroRelaysNone) {
  server::ServerConfig config = VirtualNetwork::default_config();
  config.relay_inputs = 0;
  Players p({{0, 0.25f, 0}, {0, 0.25f, 4}}, 0, config);
  size_t seen = 0, snapshots = 0;
  p.net.on_frame = [&](size_t i) {
    const PollResult& r = p.net.client(i).take_result();
    for (const SnapshotRange& s : r.snapshots) {
      seen += r.inputs_of(s).size();
      ++snapshots;
    }
    const std::optional<uint64_t> tick = p.net.client(i).input_tick(p.net.now());
    if (!tick || *tick <= p.last_tick[i]) return;
    p.last_tick[i] = *tick;
    p.net.client(i).send_input(p.box[i], InputMode::Force, {300, 0, 0}, {}, *tick);
  };
  p.net.run_for(1s);
  EXPECT_GT(snapshots, 40u);
  EXPECT_EQ(seen, 0u);
  EXPECT_EQ(p.net.stats().inputs_relayed.load(), 0u);
}

TEST(Prediction, ZonesOfDetailSimulateNearDescribedBodiesAndLeaveFarOnesOut) {
  predict::PredictorConfig config;
  config.reconcile_budget_s = 10.0;
  config.gravity = {0, 0, 0};
  predict::Predictor predictor(config);
  ObjectDesc car;
  car.shape = ShapeKind::Box;
  car.dims = {0.5f, 0.5f, 0.5f};
  car.mass = 1000.0f;
  const ObjectID own{1, 1}, prop{2, 1}, described_far{3, 1}, stand_in{4, 1}, far{5, 1};
  predictor.drive(own, car);
  ObjectDesc crate;
  crate.shape = ShapeKind::Box;
  crate.dims = {0.25f, 0.25f, 0.25f};
  crate.mass = 5.0f;
  predictor.describe(prop, crate);
  predictor.describe(described_far, crate);
  const auto state = [](ObjectID id, Vec3 position, Vec3 dims) {
    ObjectState o;
    o.id = id;
    o.position = position;
    o.shape = ShapeKind::Box;
    o.dims = dims;
    o.tick = 10;
    return o;
  };
  const std::vector<ObjectState> objects = {
      state(own, {0, 0, 0}, car.dims),         state(prop, {1.0f, 0, 0}, crate.dims),
      state(described_far, {7, 0, 0}, crate.dims), state(stand_in, {0, 0, 7}, crate.dims),
      state(far, {30, 0, 0}, crate.dims),
  };
  const auto now = std::chrono::steady_clock::time_point{} + 1s;
  predictor.reconcile(10, objects, now);
  const predict::PredictorStats& s = predictor.stats();
  EXPECT_EQ(s.proxies, 1u) << "the described crate 1 m away is simulated";
  EXPECT_EQ(s.stand_ins, 2u) << "the described crate at 7 m and the undescribed one are stand-ins";
  EXPECT_EQ(s.left_out, 1u) << "the box 30 m away is left out";
  EXPECT_TRUE(predictor.predicted(prop).has_value());
  EXPECT_FALSE(predictor.predicted(described_far).has_value());
  EXPECT_FALSE(predictor.predicted(stand_in).has_value());

  // Driving into the 5 kg crate pushes it, as the server would: a stand-in would have stopped the car.
  for (uint64_t t = 11; t <= 70; ++t) predictor.input(own, InputMode::Velocity, {2, 0, 0}, {}, t);
  const auto pushed = predictor.predicted(prop);
  const auto driven = predictor.predicted(own);
  ASSERT_TRUE(pushed && driven);
  EXPECT_GT(pushed->position.x, 1.5f) << "the crate was not pushed";
  EXPECT_GT(driven->position.x, 1.5f) << "the car was stopped by the crate";
}

TEST(Prediction, AnotherPlayersBodyFollowsItsRelayedInput) {
  // A drives a box in bursts over a 100 ms round trip; B predicts its own box 4 m away and A's
  // as a described proxy. A's proxy, run on with A's relayed inputs, ends closer to where the
  // server has A at B's local tick than the snapshot extrapolated at its velocity (the stand-in
  // of a body without a described shape), and closer than the proxy without the inputs.
  for (uint64_t seed = 0; seed < 3; ++seed) {
    Players p({{0, 0.25f, 0}, {0, 0.25f, 4}}, seed);
    predict::PredictorConfig config;
    config.reconcile_budget_s = 10.0;
    predict::Predictor relayed(config), blind(config);
    for (predict::Predictor* pr : {&relayed, &blind}) {
      pr->drive(p.box[1], p.desc);
      pr->describe(p.box[0], p.desc);
    }
    std::map<uint64_t, Vec3> truth;  // A's position on the server, by tick
    struct Guess {
      uint64_t tick;
      Vec3 relayed, blind, extrapolated;
    };
    std::vector<Guess> guesses;
    std::optional<ObjectState> last_a;  // A as the newest snapshot had it
    uint64_t last_snapshot = 0;
    int frame = 0;
    p.net.on_frame = [&](size_t i) {
      const std::optional<uint64_t> tick = p.net.client(i).input_tick(p.net.now());
      if (i == 0) {
        (void)p.net.client(i).take_result();
        if (!tick || *tick <= p.last_tick[0]) return;
        p.last_tick[0] = *tick;
        // Half-second bursts that come back where they started: forward, back, back, forward,
        // then the same sideways.
        static constexpr float kPattern[8][2] = {{1, 0}, {-1, 0}, {-1, 0}, {1, 0}, {0, -1}, {0, 1}, {0, 1}, {0, -1}};
        const auto* b = kPattern[(*tick / 30) % 8];
        const Vec3 push{600.0f * b[0], 0, 600.0f * b[1]};
        p.net.client(i).send_input(p.box[0], InputMode::Force, push, {}, *tick);
        return;
      }
      const PollResult& r = p.net.client(i).take_result();
      for (const SnapshotRange& s : r.snapshots) {
        relayed.reconcile(s.tick, r.objects_of(s), p.net.now(), r.inputs_of(s));
        blind.reconcile(s.tick, r.objects_of(s), p.net.now());
        for (const ObjectState& o : r.objects_of(s)) {
          if (o.id == p.box[0]) last_a = o;
        }
        last_snapshot = s.tick;
      }
      if (!tick || *tick <= p.last_tick[1]) return;
      p.last_tick[1] = *tick;
      p.net.client(i).send_input(p.box[1], InputMode::Force, {}, {}, *tick);
      relayed.input(p.box[1], InputMode::Force, {}, {}, *tick);
      blind.input(p.box[1], InputMode::Force, {}, {}, *tick);
      const auto r1 = relayed.predicted(p.box[0]);
      const auto b1 = blind.predicted(p.box[0]);
      if (++frame > 120 && r1 && b1 && last_a && last_a->tick == last_snapshot) {
        const float ahead = static_cast<float>(*tick - last_a->tick) / 60.0f;
        guesses.push_back(Guess{*tick, r1->position, b1->position, last_a->position + last_a->velocity * ahead});
      }
    };
    for (int f = 0; f < 240 * 8; ++f) {
      p.net.frame();
      const auto a = p.net.server().world().get_object(p.box[0]);
      if (a) truth[p.net.server().world().tick()] = a->position;
    }
    double err_relayed = 0, err_blind = 0, err_extrapolated = 0;
    size_t n = 0;
    for (const Guess& g : guesses) {
      const auto t = truth.find(g.tick);
      if (t == truth.end()) continue;
      err_relayed += length(g.relayed - t->second);
      err_blind += length(g.blind - t->second);
      err_extrapolated += length(g.extrapolated - t->second);
      ++n;
    }
    ASSERT_GT(n, 200u);
    err_relayed /= static_cast<double>(n);
    err_blind /= static_cast<double>(n);
    err_extrapolated /= static_cast<double>(n);
    std::printf("[ figures  ] seed %d: A's body at B's local tick, mean error over %zu frames: relayed inputs "
                "%.1f mm, described without inputs %.1f mm, snapshot extrapolated at its velocity %.1f mm\n",
                static_cast<int>(seed), n, 1000.0 * err_relayed, 1000.0 * err_blind, 1000.0 * err_extrapolated);
    EXPECT_LT(err_relayed, 0.8 * err_extrapolated);
    EXPECT_LT(err_relayed, 0.8 * err_blind);
    EXPECT_GT(relayed.stats().proxies_driven, 0u);
  }
}

}  // namespace
}  // namespace impulse::client_test
