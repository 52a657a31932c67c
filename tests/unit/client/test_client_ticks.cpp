// Ticks (protocol 10) end to end on the virtual clock: a ClientCore stamps inputs and actions for
// the server tick they are for, the ServerCore applies them at that tick, and lag-compensated
// raycasts are answered against what the client saw. Links as in the tests: 100 ms RTT
// with 20 ms jitter and 5 % loss for inputs, 30 % loss for actions, 150 ms RTT for the shot.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>

#include "tests/unit/client/virtual_network.h"

namespace impulse::client_test {
namespace {

constexpr auto link = jittery_link;

ObjectDesc box_at(Vec3 position, BodyKind kind = BodyKind::Dynamic) {
  ObjectDesc d;
  d.kind = kind;
  d.shape = ShapeKind::Box;
  d.dims = {0.25f, 0.25f, 0.25f};
  d.position = position;
  return d;
}

/// Connects client `c`, creates `desc` and waits for the clock to be ready; returns the body.
ObjectID connect_with_body(VirtualNetwork& net, size_t c, const ObjectDesc& desc) {
  net.connect(c, 10s);
  EXPECT_TRUE(net.run_until([&] { return net.client(c).connected(); }, 10s));
  net.client(c).create_object(desc);
  ObjectID body;
  EXPECT_TRUE(net.run_until(
      [&] {
        for (const RequestResult& r : net.client(c).take_result().results) body = r.id;
        return !body.is_null() && net.client(c).input_tick(net.now()).has_value();
      },
      10s));
  return body;
}

struct InputRun {
  uint64_t applied = 0, repeated = 0, late = 0, buffered = 0, sent_ticks = 0;
};

/// Drives `body` with one Force input per new input tick for `span`, counting the server's
/// input statistics over that span only.
InputRun drive(VirtualNetwork& net, size_t c, ObjectID body, std::chrono::nanoseconds span) {
  uint64_t last = 0;
  InputRun run;
  net.on_frame = [&](size_t i) {
    if (i != c) return;
    const std::optional<uint64_t> tick = net.client(c).input_tick(net.now());
    if (!tick || *tick <= last) return;
    // Every tick from the last one sent gets a frame (send_input repeats the last for a skipped tick).
    run.sent_ticks += last == 0 ? 1 : *tick - last;
    EXPECT_TRUE(net.client(c).send_input(body, InputMode::Force, {1.0f, 0, 0}, {}, *tick));
    last = *tick;
  };
  const server::ServerStats& s = net.stats();
  const uint64_t applied0 = s.input_frames_applied, repeated0 = s.input_frames_repeated, late0 = s.input_frames_late,
                 buffered0 = s.input_buffered_ticks;
  net.run_for(span);
  net.on_frame = nullptr;
  run.applied = s.input_frames_applied - applied0;
  run.repeated = s.input_frames_repeated - repeated0;
  run.late = s.input_frames_late - late0;
  run.buffered = s.input_buffered_ticks - buffered0;
  return run;
}

TEST(ClientTicks, InputsStampedForATickApplyAtThatTickOnA100msJitteryLossyLink) {
  // Three seeds of the same link: 50 ms each way (100 ms RTT), +-20 ms jitter, 5 % loss.
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    VirtualNetwork net;
    const size_t c = net.add_client(link(50, 20, 0.05, 10 * seed), link(50, 20, 0.05, 10 * seed + 1));
    const ObjectID body = connect_with_body(net, c, box_at({0, 0.25f, 0}));
    ASSERT_FALSE(body.is_null());
    drive(net, c, body, 3s);  // the margin settles on the server's reports
    const InputRun run = drive(net, c, body, 20s);
    const double on_time = static_cast<double>(run.applied) / static_cast<double>(run.applied + run.repeated);
    const double buffer = static_cast<double>(run.buffered) / static_cast<double>(run.applied);
    RecordProperty("seed", static_cast<int>(seed));
    std::printf("[ figures  ] seed %d: %llu ticks, %.2f %% applied at their tick, %llu late, mean buffer %.2f ticks, "
                "margin %d, last reported lead %d\n",
                static_cast<int>(seed), static_cast<unsigned long long>(run.applied + run.repeated), 100.0 * on_time,
                static_cast<unsigned long long>(run.late), buffer, net.client(c).input_margin(),
                net.client(c).input_lead().value_or(-999));
    EXPECT_GE(run.applied + run.repeated, 1150u) << "20 s at 60 Hz";
    EXPECT_GE(on_time, 0.99) << "seed " << seed;
    EXPECT_LE(buffer, 3.0) << "seed " << seed;
    EXPECT_LE(run.applied, run.sent_ticks);
  }
}

TEST(ClientTicks, TheMarginRisesWhenTheLinkSlowsAndInputsStayOnTime) {
  // 20 ms each way, then 80 ms: the client's clock estimate lags the change, the server's reports
  // of late inputs raise the margin, and inputs are on time again within about 2 s.
  VirtualNetwork net;
  net::LinkConditions fast = link(20, 5, 0.0, 7);
  const size_t c = net.add_client(fast, fast);
  const ObjectID body = connect_with_body(net, c, box_at({0, 0.25f, 0}));
  drive(net, c, body, 3s);
  const int fast_margin = net.client(c).input_margin();
  net.peer(c).up = net::LinkSimulator<int>(link(80, 5, 0.0, 8));
  drive(net, c, body, 3s);
  const InputRun run = drive(net, c, body, 10s);
  const double on_time = static_cast<double>(run.applied) / static_cast<double>(run.applied + run.repeated);
  EXPECT_GE(on_time, 0.99);
  EXPECT_GT(net.client(c).input_margin(), fast_margin) << "the up-link's extra 60 ms is 3.6 ticks of margin";
}

TEST(ClientTicks, VelocityInputsDriveTheClientsOwnBodyAndNobodyElses) {
  VirtualNetwork net;
  const size_t owner = net.add_client();
  const size_t other = net.add_client();
  const ObjectID body = connect_with_body(net, owner, box_at({0, 0.25f, 0}));
  const ObjectID theirs = connect_with_body(net, other, box_at({5, 0.25f, 0}));
  net.run_for(500ms);
  // The other client drives the owner's box (refused, counted) and its own (applied).
  uint64_t last = 0;
  net.on_frame = [&](size_t i) {
    if (i != other) return;
    const std::optional<uint64_t> tick = net.client(other).input_tick(net.now());
    if (!tick || *tick <= last) return;
    last = *tick;
    net.client(other).send_input(body, InputMode::Velocity, {0, 0, 3}, {}, *tick);
    net.client(other).send_input(theirs, InputMode::Velocity, {2, 0, 0}, {}, *tick);
  };
  net.run_for(1s);
  const auto mine = net.server().world().get_object(body);
  const auto driven = net.server().world().get_object(theirs);
  ASSERT_TRUE(mine && driven);
  EXPECT_NEAR(mine->position.z, 0.0f, 1e-4f) << "another client's input moved the owner's box";
  EXPECT_GT(net.stats().inputs_refused.load(), 50u);
  // Set to 2 m/s before each step, then Coulomb friction (mu 0.5, both surfaces' default) takes
  // mu g dt off within the step.
  EXPECT_NEAR(driven->velocity.x, 2.0f - 0.5f * 9.81f / 60.0f, 0.005f);
  EXPECT_GT(driven->position.x, 5.0f + 1.5f);
  // When the inputs stop, the last one repeats for 15 ticks, then friction stops the box.
  net.on_frame = nullptr;
  net.run_for(2s);
  EXPECT_NEAR(net.server().world().get_object(theirs)->velocity.x, 0.0f, 1e-3f);
}

TEST(ClientTicks, AnActionSentOnceUnder30PercentLossAppliesOnceAtItsTick) {
  VirtualNetwork net;
  const size_t c = net.add_client(link(50, 10, 0.3, 21), link(50, 10, 0.3, 22));
  const ObjectID ball = connect_with_body(net, c, box_at({0, 0.25f, 0}));
  ASSERT_FALSE(ball.is_null());
  net.run_for(1s);  // at rest on the ground
  // The server's vertical velocity of the ball at every tick.
  std::map<uint64_t, float> vy;
  net.on_frame = [&](size_t) {
    if (const auto b = net.server().world().get_object(ball)) vy[net.server().world().tick()] = b->velocity.y;
  };
  std::map<uint32_t, uint64_t> stamped;  // request id -> the tick it was stamped for
  std::map<uint32_t, RequestResult> answers;
  for (int k = 0; k < 5; ++k) {
    // A jump every 1.5 s, stamped 20 ticks ahead of the input tick: 330 ms of room for resends.
    const uint64_t tick = *net.client(c).input_tick(net.now()) + 20;
    net.client(c).set_action_tick(tick);
    const uint32_t id = net.client(c).apply_impulse(ball, {0, 4.0f, 0});  // 1 kg box: +4 m/s
    ASSERT_NE(id, 0u);
    stamped[id] = tick;
    ASSERT_TRUE(net.run_until(
        [&] {
          for (const RequestResult& r : net.client(c).take_result().results) {
            EXPECT_EQ(answers.count(r.request_id), 0u) << "answered twice";
            answers[r.request_id] = r;
          }
          return answers.count(id) > 0;
        },
        5s));
    net.run_for(1500ms);
  }
  ASSERT_EQ(answers.size(), 5u);
  int on_time = 0;
  for (const auto& [id, tick] : stamped) {
    const RequestResult& r = answers.at(id);
    EXPECT_TRUE(r.ok()) << r.message;
    // On time, or (every copy of it lost until after its tick) at the first tick after.
    EXPECT_GE(r.tick, tick) << "request " << id << " applied before its tick";
    on_time += r.tick == tick ? 1 : 0;
    // The jump shows in the snapshot of the tick it was applied at and not before: that tick's
    // step starts from the impulse's +4 m/s (minus one step of gravity).
    ASSERT_TRUE(vy.count(r.tick) && vy.count(r.tick - 1));
    EXPECT_NEAR(vy.at(r.tick - 1), 0.0f, 0.05f);
    EXPECT_NEAR(vy.at(r.tick), 4.0f - 9.81f / 60.0f, 0.05f) << "tick " << r.tick;
  }
  EXPECT_GE(on_time, 4) << "20 ticks of room cover 30 % loss with resends every 150 ms but rarely";
  // Exactly once: five take-offs (vertical speed from about 0 to about 4 m/s in one tick).
  int jumps = 0;
  for (auto it = std::next(vy.begin()); it != vy.end(); ++it) {
    jumps += std::prev(it)->second < 0.5f && it->second > 3.0f ? 1 : 0;
  }
  EXPECT_EQ(jumps, 5);
  EXPECT_EQ(net.stats().actions_held.load() + net.stats().actions_late.load(), 5u);
}

TEST(ClientTicks, AnActionStampedTooFarAheadIsRefusedAndALateOneAppliesAtOnce) {
  VirtualNetwork net;
  const size_t c = net.add_client();
  const ObjectID ball = connect_with_body(net, c, box_at({0, 0.25f, 0}));
  const uint64_t now_tick = net.server().world().tick();
  net.client(c).set_action_tick(now_tick + 31);  // --max-input-lead-ms 500 = 30 ticks at 60 Hz
  const uint32_t far = net.client(c).apply_impulse(ball, {0, 1, 0});
  net.client(c).set_action_tick(3);  // long past
  const uint32_t late = net.client(c).apply_impulse(ball, {0, 1, 0});
  std::map<uint32_t, RequestResult> answers;
  ASSERT_TRUE(net.run_until(
      [&] {
        for (const RequestResult& r : net.client(c).take_result().results) answers[r.request_id] = r;
        return answers.size() == 2;
      },
      2s));
  EXPECT_EQ(answers[far].code, ResultCode::TickOutOfRange);
  EXPECT_NE(answers[far].message.find("--max-input-lead-ms"), std::string::npos) << answers[far].message;
  EXPECT_EQ(answers[far].tick, 0u);
  EXPECT_TRUE(answers[late].ok());
  EXPECT_GT(answers[late].tick, now_tick);
  EXPECT_EQ(net.stats().actions_late.load(), 1u);
}

TEST(ClientTicks, ASessionHoldsAtMost32ActionsAndACompensatedRaycastCosts16Requests) {
  server::ServerConfig config = VirtualNetwork::default_config();
  config.max_requests_per_second = 200;  // one second's burst: 200 requests
  VirtualNetwork net(config);
  const size_t c = net.add_client();
  const ObjectID ball = connect_with_body(net, c, box_at({0, 0.25f, 0}));
  net.run_for(1500ms);  // the request bucket refills
  const uint64_t tick = net.server().world().tick() + 25;
  std::vector<uint32_t> actions;
  for (int k = 0; k < 40; ++k) {
    net.client(c).set_action_tick(tick);
    actions.push_back(net.client(c).apply_impulse(ball, {0, 0.01f, 0}));
  }
  std::map<uint32_t, RequestResult> answers;
  ASSERT_TRUE(net.run_until(
      [&] {
        for (const RequestResult& r : net.client(c).take_result().results) answers[r.request_id] = r;
        return answers.size() == actions.size();
      },
      2s));
  int held = 0, refused = 0;
  for (const uint32_t id : actions) {
    const RequestResult& r = answers[id];
    if (r.ok()) {
      ++held;
      EXPECT_EQ(r.tick, tick);
    } else {
      ++refused;
      EXPECT_EQ(r.code, ResultCode::RateLimited) << r.message;
    }
  }
  EXPECT_EQ(held, 32);
  EXPECT_EQ(refused, 8);
  net.run_for(1500ms);
  // 200 tokens buy 12 compensated raycasts (16 each), not 20.
  std::vector<uint32_t> rays;
  for (int k = 0; k < 20; ++k) {
    rays.push_back(net.client(c).raycast_seen({0, 5, 0}, {0, -10, 0}, net.server().world().tick() - 2, 0.0f));
  }
  std::map<uint32_t, RaycastResult> ray_answers;
  ASSERT_TRUE(net.run_until(
      [&] {
        for (const RaycastResult& r : net.client(c).take_result().raycasts) ray_answers[r.request_id] = r;
        return ray_answers.size() == rays.size();
      },
      2s));
  int cast = 0;
  for (const auto& [id, r] : ray_answers) {
    if (r.ok()) ++cast;
    else EXPECT_EQ(r.code, ResultCode::RateLimited) << r.message;
  }
  EXPECT_GE(cast, 11);
  EXPECT_LE(cast, 13) << "the bucket refills 200 a second: a frame or two of refill may buy one more";
}

TEST(ClientTicks, ALagCompensatedRaycastHitsWhereTheClientSawTheBody) {
  // 75 ms each way: the client renders the box about 75 ms + its interpolation delay behind the
  // server, 2-3 m behind at 10 m/s. It shoots straight down through the box as it sees it.
  VirtualNetwork net;
  const size_t c = net.add_client(link(75, 0, 0, 31), link(75, 0, 0, 32));
  ObjectDesc moving = box_at({-20, 1, 0}, BodyKind::Kinematic);
  moving.velocity = {10, 0, 0};
  const ObjectID box = connect_with_body(net, c, moving);
  net.run_for(1s);
  uint64_t seen_tick = 0;
  uint32_t compensated = 0, plain = 0;
  Vec3 seen_at;
  net.on_frame = [&](size_t) {
    if (compensated != 0) return;
    const auto render = net.client(c).render_tick(net.now());
    const auto pose = net.client(c).pose_at(box, net.now());
    if (!render || !pose) return;
    seen_tick = static_cast<uint64_t>(std::floor(*render));
    const float fraction = static_cast<float>(*render - std::floor(*render));
    seen_at = pose->position;
    const Vec3 origin{seen_at.x, 5, 0};
    compensated = net.client(c).raycast_seen(origin, {0, -10, 0}, seen_tick, fraction);
    plain = net.client(c).raycast(origin, {0, -10, 0});
  };
  std::map<uint32_t, RaycastResult> answers;
  std::map<uint32_t, std::vector<RayHit>> hits;
  ASSERT_TRUE(net.run_until(
      [&] {
        const PollResult& p = net.client(c).take_result();
        for (const RaycastResult& r : p.raycasts) {
          answers[r.request_id] = r;
          hits[r.request_id].assign(p.hits_of(r).begin(), p.hits_of(r).end());
        }
        return compensated != 0 && answers.count(compensated) && answers.count(plain);
      },
      2s));
  const RaycastResult& r = answers[compensated];
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.tick, seen_tick) << "the answer names the tick the client rendered";
  ASSERT_EQ(hits[compensated].size(), 1u);
  EXPECT_EQ(hits[compensated][0].id, box);
  EXPECT_NEAR(hits[compensated][0].point.y, 1.25f, 1e-3f);
  // Without compensation the same ray hits the ground: the box has moved on by then.
  ASSERT_TRUE(answers[plain].ok());
  ASSERT_EQ(hits[plain].size(), 1u);
  EXPECT_NE(hits[plain][0].id, box);
  const auto server_box = net.server().world().get_object(box);
  ASSERT_TRUE(server_box.has_value());
  EXPECT_GT(server_box->position.x - seen_at.x, 1.5f) << "the lag must be real for the test to mean anything";
  EXPECT_EQ(net.stats().raycasts_compensated.load(), 1u);
}

TEST(ClientTicks, ASeenTickOutsideTheWindowIsRefusedWithTickOutOfRange) {
  VirtualNetwork net;
  const size_t c = net.add_client();
  connect_with_body(net, c, box_at({0, 0.25f, 0}));
  net.run_for(1s);
  const uint64_t tick = net.server().world().tick();
  // 250 ms = 15 ticks back, plus the present: tick - 15 is kept, tick - 40 is not.
  const uint32_t old = net.client(c).raycast_seen({0, 5, 0}, {0, -10, 0}, tick - 40, 0.0f);
  const uint32_t future = net.client(c).raycast_seen({0, 5, 0}, {0, -10, 0}, tick + 100, 0.0f);
  const uint32_t kept = net.client(c).raycast_seen({0, 5, 0}, {0, -10, 0}, tick - 10, 0.5f);
  std::map<uint32_t, RaycastResult> answers;
  ASSERT_TRUE(net.run_until(
      [&] {
        for (const RaycastResult& r : net.client(c).take_result().raycasts) answers[r.request_id] = r;
        return answers.size() == 3;
      },
      2s));
  EXPECT_EQ(answers[old].code, ResultCode::TickOutOfRange);
  EXPECT_NE(answers[old].message.find("--lag-compensation-ms"), std::string::npos) << answers[old].message;
  EXPECT_EQ(answers[future].code, ResultCode::TickOutOfRange);
  EXPECT_TRUE(answers[kept].ok()) << answers[kept].message;
  EXPECT_EQ(answers[kept].tick, tick - 10);
}

/// Sends one request through `send` and waits for its answer.
template <class Send>
RequestResult answer_of(VirtualNetwork& net, size_t c, Send&& send) {
  const uint32_t id = send(net.client(c));
  std::optional<RequestResult> got;
  EXPECT_TRUE(net.run_until(
      [&] {
        for (const RequestResult& r : net.client(c).take_result().results) {
          if (r.request_id == id) got = r;
        }
        return got.has_value();
      },
      2s));
  return got.value_or(RequestResult{});
}

TEST(ClientTicks, TemporaryOwnershipTakesALoneIslandsStateUntilAnotherClientsBodyJoinsIt) {
  server::ServerConfig config = VirtualNetwork::default_config();
  config.temporary_ownership = true;
  VirtualNetwork net(config);
  const size_t a = net.add_client();
  const size_t b = net.add_client();
  const ObjectID mine = connect_with_body(net, a, box_at({0, 0.25f, 0}));
  net.connect(b);
  net.run_for(1s);  // at rest
  const Quat level{};
  // Another client may not send its state.
  RequestResult r = answer_of(net, b, [&](ClientCore& c) { return c.set_state(mine, {0.05f, 0.25f, 0}, level, {}, {}); });
  EXPECT_EQ(r.code, ResultCode::NotOwner) << r.message;
  // A teleport: 3 m from the server's position, at rest (reach 8 ticks x 0 m/s + 10 cm).
  r = answer_of(net, a, [&](ClientCore& c) { return c.set_state(mine, {3.0f, 0.25f, 0}, level, {}, {}); });
  EXPECT_EQ(r.code, ResultCode::InvalidArgument);
  EXPECT_NE(r.message.find("teleport"), std::string::npos) << r.message;
  EXPECT_NEAR(net.server().world().get_object(mine)->position.x, 0.0f, 1e-3f);
  // Alone in its island: 5 cm over is the client's word.
  r = answer_of(net, a, [&](ClientCore& c) { return c.set_state(mine, {0.05f, 0.25f, 0}, level, {}, {}); });
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_NEAR(net.server().world().get_object(mine)->position.x, 0.05f, 1e-3f);
  // Another client's box lands against it: from the tick it touches, the state is refused.
  ObjectDesc theirs = box_at({0.55f, 0.25f, 0});
  const RequestResult created = answer_of(net, b, [&](ClientCore& c) { return c.create_object(theirs); });
  ASSERT_TRUE(created.ok()) << created.message;
  ASSERT_TRUE(net.server().world().are_colliding(mine, created.id));
  r = answer_of(net, a, [&](ClientCore& c) { return c.set_state(mine, {0.04f, 0.25f, 0}, level, {}, {}); });
  EXPECT_EQ(r.code, ResultCode::NotOwner);
  EXPECT_NE(r.message.find("island"), std::string::npos) << r.message;
}

TEST(ClientTicks, TemporaryOwnershipIsOffByDefault) {
  VirtualNetwork net;
  const size_t a = net.add_client();
  const ObjectID mine = connect_with_body(net, a, box_at({0, 0.25f, 0}));
  const RequestResult r =
      answer_of(net, a, [&](ClientCore& c) { return c.set_state(mine, {0.0f, 0.25f, 0}, Quat{}, {}, {}); });
  EXPECT_EQ(r.code, ResultCode::NotOwner);
  EXPECT_NE(r.message.find("--temporary-ownership"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace impulse::client_test
