// ClientCore against a real ServerCore on a virtual clock, through simulated links: the connection
// state machine, the connect timeout and its resends, rejections, requests under loss (exactly
// once, in order), snapshots that converge to the server's world, clock sync against a known
// delay, interpolated poses that follow the server's trajectory, and the ways a session ends.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "tests/unit/client/virtual_network.h"

namespace impulse::client_test {
namespace {

ObjectDesc ball_at(Vec3 position) {
  ObjectDesc d;
  d.shape = ShapeKind::Sphere;
  d.dims = {0.25f, 0.25f, 0.25f};
  d.position = position;
  return d;
}

net::LinkConditions lossy(double loss, uint64_t seed) {
  net::LinkConditions c;
  c.loss = loss;
  c.latency_ms = 30;
  c.jitter_ms = 10;
  c.duplicate = 0.05;
  c.reorder = 0.05;
  c.seed = seed;
  return c;
}

net::LinkConditions fixed_delay(double ms) {
  net::LinkConditions c;
  c.latency_ms = ms;
  return c;
}

TEST(ClientCore, ConnectWalksTheStatesAndSendsOnlyThroughItsOutbox) {
  VirtualNetwork net;
  const size_t c = net.add_client(fixed_delay(20), fixed_delay(20));
  EXPECT_EQ(net.client(c).state(), ConnectionState::Disconnected);
  net.connect(c);
  EXPECT_EQ(net.client(c).state(), ConnectionState::SendingConnect);
  EXPECT_EQ(net.peer(c).sent, 1u);  // the first Connect, at once

  std::vector<ConnectionState> seen{ConnectionState::SendingConnect};
  net.on_frame = [&](size_t i) {
    if (net.client(i).state() != seen.back()) seen.push_back(net.client(i).state());
  };
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 2s));
  EXPECT_EQ(seen, (std::vector<ConnectionState>{ConnectionState::SendingConnect, ConnectionState::SendingCookie,
                                                ConnectionState::Connected}));
  EXPECT_EQ(net.client(c).connection_error().kind, ConnectFailure::None);
  EXPECT_NE(net.client(c).client_id(), 0u);
  EXPECT_EQ(net.client(c).tick_hz(), 60);
  EXPECT_EQ(net.client(c).snapshot_hz(), 30);
  EXPECT_EQ(net.server().sessions().size(), 1u);
}

TEST(ClientCore, ConnectToNobodyResendsEvery250msThenFailsAtItsTimeout) {
  VirtualNetwork net;
  net::LinkConditions black_hole;
  black_hole.loss = 1.0;
  const size_t c = net.add_client(black_hole, {});
  const auto start = net.now();
  net.connect(c, 1000ms);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).state() == ConnectionState::Failed; }, 5s));
  const auto took = net.now() - start;
  EXPECT_GE(took, 1000ms);
  EXPECT_LE(took, 1000ms + VirtualNetwork::kFrame);
  // Connects at 0, 250, 500 and 750 ms: four, none after the deadline.
  EXPECT_EQ(net.peer(c).sent, 4u);
  const ConnectionError& e = net.client(c).connection_error();
  EXPECT_EQ(e.kind, ConnectFailure::TimedOut);
  EXPECT_NE(e.message.find("no answer from 127.0.0.1:7777 within 1000 ms"), std::string::npos) << e.message;
  net.client(c).update(net.now() + 1s);  // stays Failed, sends nothing more
  EXPECT_EQ(net.client(c).state(), ConnectionState::Failed);
  EXPECT_TRUE(net.client(c).outbox().empty());
}

TEST(ClientCore, AFullServerRejectsWithItsReasonCode) {
  auto config = VirtualNetwork::default_config();
  config.max_clients = 1;
  VirtualNetwork net(config);
  const size_t first = net.add_client();
  const size_t second = net.add_client();
  net.connect(first);
  ASSERT_TRUE(net.run_until([&] { return net.client(first).connected(); }, 1s));
  net.connect(second);
  ASSERT_TRUE(net.run_until([&] { return net.client(second).state() == ConnectionState::Failed; }, 2s));
  const ConnectionError& e = net.client(second).connection_error();
  EXPECT_EQ(e.kind, ConnectFailure::Rejected);
  EXPECT_EQ(e.code, ResultCode::ServerFull);
  EXPECT_NE(e.message.find("--max-clients"), std::string::npos) << e.message;
  EXPECT_TRUE(net.client(first).connected());
}

TEST(ClientCore, RequestsUnderLossAreAnsweredExactlyOnceAndAppliedOnce) {
  VirtualNetwork net;
  const size_t c = net.add_client(lossy(0.25, 3), lossy(0.25, 4));
  net.connect(c, 10s);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 10s));

  constexpr int kRequests = 60;
  std::set<uint32_t> asked;
  for (int k = 0; k < kRequests; ++k) {
    const uint32_t id = net.client(c).create_object(ball_at({static_cast<float>(k % 10) - 5.0f, 1.0f + k / 10, 3.0f}));
    ASSERT_NE(id, 0u);
    asked.insert(id);
  }
  std::map<uint32_t, int> answers;
  std::set<ObjectID> created;
  net.on_frame = [&](size_t) {
    for (const RequestResult& r : net.client(c).take_result().results) {
      ++answers[r.request_id];
      EXPECT_TRUE(r.ok()) << r.message;
      created.insert(r.id);
    }
  };
  ASSERT_TRUE(net.run_until([&] { return answers.size() == asked.size(); }, 30s));
  net.run_for(2s);  // late duplicates of answers must not show up either
  for (const auto& [id, count] : answers) {
    EXPECT_TRUE(asked.count(id)) << id;
    EXPECT_EQ(count, 1) << "request " << id;
  }
  EXPECT_EQ(created.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(net.server().world().object_count(), static_cast<uint32_t>(kRequests) + 1);  // + the ground
  EXPECT_EQ(net.server().live_objects_of(net.client(c).client_id()), static_cast<uint32_t>(kRequests));
  EXPECT_GT(net.client(c).stats().requests_resent, 0u);  // the loss was real
  EXPECT_EQ(net.client(c).requests_in_flight(), 0u);
}

TEST(ClientCore, OnResultHandsEachAnswerToItsCallbackOnceEvenUnderLoss) {
  VirtualNetwork net;
  const size_t c = net.add_client(lossy(0.25, 5), lossy(0.25, 6));
  net.connect(c, 10s);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 10s));
  ClientCore& client = net.client(c);
  EXPECT_FALSE(client.on_result(0, [](const RequestResult&) {})) << "request id 0 was never sent";

  // A created ball's id, and a chained request from inside the callback: destroy it again.
  std::map<uint32_t, ObjectID> seen_in_results;  // what the PollResults carried
  ObjectID created;
  int create_calls = 0, destroy_calls = 0;
  ResultCode destroyed = ResultCode::InvalidArgument;
  const uint32_t create = client.create_object(ball_at({0, 2, 0}));
  ASSERT_TRUE(client.on_result(create, [&](const RequestResult& r) {
    ++create_calls;
    created = r.id;
    EXPECT_TRUE(client.on_result(client.destroy(r.id), [&](const RequestResult& d) {
      ++destroy_calls;
      destroyed = d.code;
    }));
  }));
  net.on_frame = [&](size_t) {
    for (const RequestResult& r : client.take_result().results) seen_in_results[r.request_id] = r.id;
  };
  ASSERT_TRUE(net.run_until([&] { return destroy_calls > 0; }, 30s));
  net.run_for(2s);  // resent answers must not call again
  EXPECT_EQ(create_calls, 1);
  EXPECT_EQ(destroy_calls, 1);
  EXPECT_FALSE(created.is_null());
  EXPECT_EQ(seen_in_results.at(create), created) << "the answer is in the PollResult too";
  EXPECT_EQ(destroyed, ResultCode::Ok);
  EXPECT_EQ(net.server().live_objects_of(client.client_id()), 0u);

  // A session's end drops the callbacks still waiting: the next session reuses request ids.
  int stale_calls = 0;
  ASSERT_TRUE(client.on_result(client.create_object(ball_at({1, 2, 0})), [&](const RequestResult&) { ++stale_calls; }));
  client.disconnect("bye", net.now());
  net.connect(c, 10s);
  ASSERT_TRUE(net.run_until([&] { return client.connected(); }, 10s));
  const uint32_t again = client.create_object(ball_at({2, 2, 0}));
  ASSERT_TRUE(net.run_until([&] { return seen_in_results.count(again) > 0 && client.requests_in_flight() == 0; }, 30s));
  EXPECT_EQ(stale_calls, 0) << "a callback of the old session was called with the new session's answer";
}

TEST(ClientCore, SnapshotsUnderLossConvergeToTheServersWorld) {
  VirtualNetwork net;
  const size_t c = net.add_client(lossy(0.2, 5), lossy(0.2, 6));
  net.connect(c, 10s);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 10s));
  for (int k = 0; k < 8; ++k) net.client(c).create_object(ball_at({static_cast<float>(k) - 4.0f, 2.0f + k, 0.0f}));
  net.run_for(6s);  // they fall, bounce and come to rest
  ASSERT_EQ(net.server().world().object_count(), 9u);
  const double step = std::ldexp(1.0, -9);  // the default position precision, 1/512 m
  size_t compared = 0;
  net.server().world().for_each_object([&](const physics::BodyState& b) {
    const ObjectState* o = net.client(c).find(b.id);
    ASSERT_NE(o, nullptr) << "object " << b.id.index << " missing from the client's view";
    EXPECT_NEAR(o->position.x, b.position.x, step);
    EXPECT_NEAR(o->position.y, b.position.y, step);
    EXPECT_NEAR(o->position.z, b.position.z, step);
    ++compared;
  });
  EXPECT_EQ(compared, 9u);
  EXPECT_GT(net.client(c).stats().snapshots_completed, 100u);
}

TEST(ClientCore, ClockSyncMeasuresAKnownRoundTrip) {
  VirtualNetwork net;
  const size_t c = net.add_client(fixed_delay(40), fixed_delay(40));
  net.connect(c);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 2s));
  ASSERT_TRUE(net.run_until([&] { return net.client(c).clock_estimate(net.now()).ready; }, 3s));
  net.run_for(3s);
  const ClockEstimate e = net.client(c).clock_estimate(net.now());
  // 80 ms on the links, plus at most one server wake-up and one client frame of waiting.
  EXPECT_GE(e.rtt_s, 0.080);
  EXPECT_LE(e.rtt_s, 0.080 + 2 * std::chrono::duration<double>(VirtualNetwork::kFrame).count() + 0.017);
  ASSERT_TRUE(e.server_tick.has_value());
  // The estimate of the tick being stepped now, against the server's tick: within two ticks.
  EXPECT_NEAR(*e.server_tick, static_cast<double>(net.server().world().tick()), 2.0);
}

TEST(ClientCore, InterpolatedPosesFollowTheServersTrajectory) {
  VirtualNetwork net;
  const size_t c = net.add_client(fixed_delay(25), fixed_delay(25));
  net.connect(c);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 2s));
  net.client(c).create_object(ball_at({0.0f, 30.0f, 0.0f}));  // 2.4 s of free fall
  ObjectID ball;
  ASSERT_TRUE(net.run_until(
      [&] {
        for (const RequestResult& r : net.client(c).take_result().results) ball = r.id;
        return !ball.is_null();
      },
      1s));
  // The server's height per tick, recorded as it steps.
  std::map<uint64_t, float> server_y;
  std::vector<std::pair<double, float>> rendered;  // (render tick, rendered y)
  net.on_frame = [&](size_t) {
    net.server().world().for_each_object([&](const physics::BodyState& b) {
      if (b.id == ball) server_y[net.server().world().tick()] = b.position.y;
    });
    const auto tick = net.client(c).render_tick(net.now());
    const auto pose = net.client(c).pose_at(ball, net.now());
    if (tick && pose) rendered.emplace_back(*tick, pose->position.y);
  };
  net.run_for(1500ms);
  ASSERT_GT(rendered.size(), 200u);
  size_t compared = 0;
  float previous = 1e9f;
  for (const auto& [tick, y] : rendered) {
    EXPECT_LE(y, previous + 1e-4f) << "a falling ball rose at render tick " << tick;
    previous = y;
    const auto lo = server_y.find(static_cast<uint64_t>(std::floor(tick)));
    const auto hi = server_y.find(static_cast<uint64_t>(std::floor(tick)) + 1);
    if (lo == server_y.end() || hi == server_y.end()) continue;
    const double f = tick - std::floor(tick);
    const double expected = lo->second + f * (hi->second - lo->second);
    // Linear interpolation of a parabola between snapshots 2 ticks apart errs by at most
    // g dt^2 / 8 = 9.81 * (1/30)^2 / 8 = 1.4 mm, plus the position quantisation.
    EXPECT_NEAR(y, expected, 0.0014 + 0.002) << "render tick " << tick;
    ++compared;
  }
  EXPECT_GT(compared, 150u);
}

TEST(ClientCore, AServerThatFallsSilentEndsTheSessionAfterTenSeconds) {
  VirtualNetwork net;
  const size_t c = net.add_client();
  net.connect(c);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 1s));
  net.peer(c).down = net::LinkSimulator<int>(net::LinkConditions{1.0});  // the server's packets stop
  const auto cut = net.now();
  bool told = false;
  net.on_frame = [&](size_t) { told = told || net.client(c).take_result().server_disconnected; };
  ASSERT_TRUE(net.run_until([&] { return net.client(c).state() == ConnectionState::Failed; }, 15s));
  EXPECT_GE(net.now() - cut, ClientCore::kServerSilenceTimeout - 100ms);
  EXPECT_LE(net.now() - cut, ClientCore::kServerSilenceTimeout + 100ms);
  EXPECT_EQ(net.client(c).connection_error().kind, ConnectFailure::ConnectionLost);
  EXPECT_TRUE(told);
  EXPECT_EQ(net.client(c).create_object(ball_at({0, 1, 0})), 0u);  // nothing is sent any more
}

TEST(ClientCore, AServerShutdownDisconnectsWithItsReason) {
  VirtualNetwork net;
  const size_t c = net.add_client(fixed_delay(10), fixed_delay(10));
  net.connect(c);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 1s));
  net.shut_down_server("maintenance");
  std::string reason;
  net.on_frame = [&](size_t) {
    const PollResult& r = net.client(c).take_result();
    if (r.server_disconnected) reason = r.disconnect_reason;
  };
  ASSERT_TRUE(net.run_until([&] { return !reason.empty(); }, 1s));
  EXPECT_NE(reason.find("maintenance"), std::string::npos) << reason;
  EXPECT_EQ(net.client(c).state(), ConnectionState::Disconnected);
}

TEST(ClientCore, DisconnectTellsTheServerWhichDropsTheSession) {
  VirtualNetwork net;
  const size_t c = net.add_client(lossy(0.3, 9), {});
  net.connect(c, 10s);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 10s));
  ASSERT_EQ(net.server().sessions().size(), 1u);
  net.client(c).disconnect("bye", net.now());
  EXPECT_EQ(net.client(c).state(), ConnectionState::Disconnected);
  // Three copies through a link that loses 30 %: at least one arrives (seeded, so always).
  ASSERT_TRUE(net.run_until([&] { return net.server().sessions().size() == 0u; }, 1s));
}

TEST(ClientCore, TakeResultKeepsTheHandedOutResultValidWhileRequestsAreMade) {
  VirtualNetwork net;
  const size_t c = net.add_client();
  net.connect(c);
  ASSERT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 1s));
  net.client(c).create_object(ball_at({0, 1, 0}));
  net.client(c).create_object(ball_at({1, 1, 0}));
  std::vector<ObjectID> created;
  ASSERT_TRUE(net.run_until(
      [&] {
        const PollResult& r = net.client(c).take_result();
        // Requests made while reading the result must not disturb it.
        for (const RequestResult& res : r.results) {
          net.client(c).destroy(res.id);
          net.client(c).update(net.now());
          created.push_back(res.id);
        }
        return created.size() == 2;
      },
      1s));
  ASSERT_TRUE(net.run_until([&] { return net.server().world().object_count() == 1; }, 1s));
}

}  // namespace
}  // namespace impulse::client_test
