// ServerCore's budgets on a fake clock (issue 16, rows C, E, E2): anonymous quotas follow the IP
// address, a departed client's objects follow --on-disconnect, scene bodies cannot be destroyed
// under --authority owner, a Connect at a live session's address pays its minimum size and
// receive budget and is answered only with its cookie before the session is confirmed, duplicates
// of answered requests count against the request rate, and the send budget's debt is bounded.
#include <limits>

#include "server/app/tick_budget.h"
#include "tests/support/timing_checks.h"
#include "unit/server/core_fixture.h"

namespace impulse::server {
namespace {

using namespace core_test;

size_t total_bytes(const std::vector<Sent>& sent) {
  size_t n = 0;
  for (const Sent& s : sent) n += s.bytes.size();
  return n;
}

class BudgetTest : public CoreTest {
 protected:
  static ServerConfig budget_config(std::string on_disconnect) {
    ServerConfig c = test_config();
    c.max_clients = 8;
    c.max_objects_per_client = 3;
    c.max_requests_per_second = 50;
    c.on_disconnect = std::move(on_disconnect);
    return c;
  }
  explicit BudgetTest(std::string on_disconnect = "destroy") : CoreTest(budget_config(std::move(on_disconnect))) {}

  /// The result of one CreateObject applied in its own step.
  std::pair<ResultCode, std::string> try_create(const Endpoint& from) {
    wire::CreateObjectArgs ball;
    ball.position = {static_cast<float>(from.port() % 40), 2, 0};
    const auto sent = apply_in_one_step(from, {copy(wire::build_create_object(fbb_, next_id(from), ball))});
    const auto r = results(sent);
    if (r.size() != 1) return {ResultCode::InvalidArgument, "no answer"};
    return {r[0]->code(), r[0]->message() ? r[0]->message()->str() : std::string{}};
  }
  void disconnect(const Endpoint& from) { receive(from, wire::build_disconnect(fbb_, "bye")); }
};

class KeepTest : public BudgetTest {
 protected:
  KeepTest() : BudgetTest("keep") {}
};

TEST_F(KeepTest, AnonymousSessionsOfOneAddressShareItsQuotaAndReconnectingDoesNotResetIt) {
  const Endpoint a = at("127.0.0.1", 1), b = at("127.0.0.1", 2), other = at("127.0.0.2", 9);  // the fixture counts request ids by port
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(try_create(a).first, ResultCode::Ok);
  // Another port of the same address: the address's quota is used up.
  const auto [code, message] = try_create(b);
  EXPECT_EQ(code, ResultCode::QuotaExceeded);
  EXPECT_NE(message.find("--max-objects-per-address"), std::string::npos) << message;
  EXPECT_NE(message.find("3 objects"), std::string::npos) << message;
  // Leaving and coming back from a new port: the kept objects still count.
  disconnect(a);
  disconnect(b);
  advance(kStep);
  EXPECT_EQ(core_.world().object_count(), 4u);  // the ground and the three kept
  const Endpoint again = at("127.0.0.1", 3);
  ASSERT_NE(connect(again), 0u);
  EXPECT_EQ(try_create(again).first, ResultCode::QuotaExceeded);
  EXPECT_EQ(core_.live_objects_of_address(a.address()), 3u);
  // Another address has its own quota.
  ASSERT_NE(connect(other), 0u);
  EXPECT_EQ(try_create(other).first, ResultCode::Ok);
}

TEST_F(BudgetTest, ADepartedClientsObjectsAreDestroyedAtTheNextTick) {
  const Endpoint a = at("127.0.0.1", 1), b = at("127.0.0.1", 2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  ASSERT_EQ(try_create(a).first, ResultCode::Ok);
  ASSERT_EQ(try_create(b).first, ResultCode::Ok);
  // A leaves with a create still queued: it is applied, then everything of A's goes.
  wire::CreateObjectArgs ball;
  EXPECT_TRUE(receive(a, wire::build_create_object(fbb_, next_id(a), ball)).empty());
  disconnect(a);
  advance(kStep);
  EXPECT_EQ(core_.world().object_count(), 2u);  // the ground and B's
  EXPECT_EQ(core_.live_objects_of(1), 0u);
  EXPECT_EQ(core_.live_objects_of_address(a.address()), 1u);
  EXPECT_EQ(try_create(b).first, ResultCode::Ok);  // the address has room again
  EXPECT_EQ(try_create(b).first, ResultCode::Ok);
  EXPECT_EQ(try_create(b).first, ResultCode::QuotaExceeded);

  // A session that times out: the same.
  for (int i = 0; i < 3 * kTickHz; ++i) advance(kStep);
  EXPECT_EQ(core_.sessions().size(), 0u);
  advance(kStep);
  EXPECT_EQ(core_.world().object_count(), 1u);  // B's three went with it
  EXPECT_EQ(core_.live_objects_of_address(a.address()), 0u);
}

TEST_F(CoreTest, SceneBodiesCannotBeDestroyedByClientsUnderOwnerAuthority) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  const auto sent = apply_in_one_step(a, {copy(wire::build_destroy_object(fbb_, next_id(a), ground_id_))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::NotOwner);
  EXPECT_NE(r[0]->message()->str().find("scene"), std::string::npos);
  EXPECT_TRUE(core_.world().is_valid(ground_id_));
  // Pushing it is still everyone's right (a static body answers NotDynamic, not NotOwner).
  const auto push_sent = apply_in_one_step(a, {copy(wire::build_apply_impulse(fbb_, next_id(a), ground_id_, {0, 1, 0}))});
  const auto push = results(push_sent);
  ASSERT_EQ(push.size(), 1u);
  EXPECT_NE(push[0]->code(), ResultCode::NotOwner);
}

TEST_F(CoreTest, AConnectAtALiveSessionIsAnsweredOnlyWithItsCookieAndNeverOnceConfirmed) {
  const Endpoint a = endpoint(7000);
  ASSERT_NE(connect(a, "tester", /*confirm=*/false), 0u);
  // Forged (no cookie, or another address's cookie): nothing goes back.
  const Bytes forged = copy(build_connect("forged"));
  EXPECT_TRUE(receive(a, forged).empty());
  ASSERT_NE(connect(endpoint(7001)), 0u);
  EXPECT_TRUE(receive(a, build_connect("forged", cookies_[endpoint(7001)])).empty());
  // The client's own resend (its ConnectAccepted was lost) is answered.
  const auto resent = receive(a, build_connect("tester", cookies_[a]));
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].type(), Message::ConnectAccepted);
  // Once the client has spoken, a Connect from its address gets nothing, not even with the cookie.
  EXPECT_TRUE(receive(a, wire::build_ping(fbb_, 0)).empty());
  EXPECT_TRUE(receive(a, build_connect("tester", cookies_[a])).empty());
  EXPECT_GE(core_.rejects().count(RejectReason::BadConnect), 1u);
  EXPECT_EQ(core_.sessions().size(), 2u);
}

TEST_F(BudgetTest, AConnectFloodAtALiveSessionDrawsNothingAndLeavesItsSnapshots) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  EXPECT_TRUE(receive(a, wire::build_ping(fbb_, 0)).empty());  // confirmed
  const Bytes forged = copy(build_connect("forged"));
  size_t in = 0, out = 0, snapshots = 0;
  for (int tick = 0; tick < kTickHz; ++tick) {  // 2000 per second for one second
    for (int i = 0; i < 2000 / kTickHz; ++i) {
      in += forged.size();
      out += total_bytes(receive(a, forged));
    }
    for (const Sent& s : advance(kStep)) snapshots += s.type() == Message::Snapshot;
    receive(a, wire::build_ping(fbb_, 0));
  }
  EXPECT_EQ(out, 0u) << "bytes in " << in;
  EXPECT_EQ(snapshots, 30u);
  EXPECT_EQ(core_.rejects().count(RejectReason::BadConnect), static_cast<uint64_t>(kTickHz * (2000 / kTickHz)));
}

TEST_F(BudgetTest, AConnectBeforeConfirmationPaysTheSessionsReceiveBudget) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a, "tester", /*confirm=*/false), 0u);
  const double full = core_.sessions().sessions()[0].bytes_in.tokens;
  const Bytes forged = copy(build_connect("forged"));
  EXPECT_TRUE(receive(a, forged).empty());
  EXPECT_LE(core_.sessions().sessions()[0].bytes_in.tokens, full - static_cast<double>(forged.size()) + 1.0);
}

TEST_F(BudgetTest, DuplicatesOfAnAnsweredRequestCountAgainstTheRequestRate) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  const Bytes request = copy(wire::build_destroy_object(fbb_, next_id(a), ObjectID{4000, 1}));
  const auto first = apply_in_one_step(a, {request});
  ASSERT_EQ(results(first).size(), 1u);
  // 1000 duplicates within one second against 50 requests per second.
  size_t answers = 0;
  for (int tick = 0; tick < kTickHz; ++tick) {
    for (int i = 0; i < 1000 / kTickHz; ++i) {
      const auto sent = receive(a, request);
      answers += results(sent).size();
    }
    advance(kStep);
  }
  EXPECT_LE(answers, 50u + 50u + 1u);  // the burst and one second's refill
  EXPECT_GE(answers, 40u);
  EXPECT_GT(core_.rejects().count(RejectReason::RateLimited), 800u);
}

TEST_F(BudgetTest, TheSendBudgetsDebtIsBoundedByItsBurst) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  // Pings are answered at once and charged to the send budget: 20,000 Pongs in one wake-up.
  for (int i = 0; i < 20000; ++i) receive(a, wire::build_ping(fbb_, static_cast<uint64_t>(i + 1)));
  const TokenBucket& out = core_.sessions().sessions()[0].bytes_out;
  EXPECT_GE(out.tokens, -out.burst);
  // Once the burst has refilled (burst / rate seconds after the flood), snapshots are full size
  // again: the debt does not outlive the flood by more than that.
  const auto refill = std::chrono::duration<double>(2.0 * out.burst / out.rate);
  advance(std::chrono::duration_cast<std::chrono::nanoseconds>(refill));
  EXPECT_GT(core_.sessions().sessions()[0].bytes_out.tokens, 0.0);
}

// Session slots (attack C: one address took all 64 default slots in 0.1 s, and silent sessions
// received full-rate snapshots). Sans-IO on the fixture's virtual clock.
class SessionSlotTest : public CoreTest {
 protected:
  static ServerConfig slot_config() {
    ServerConfig c = test_config();
    c.max_clients = 64;
    c.client_timeout_s = 10.0;
    return c;  // max_sessions_per_address: the default, 4
  }
  SessionSlotTest() : CoreTest(slot_config()) {}
  // The Connect's answer after the cookie round trip: ConnectAccepted, or ConnectRejected's text.
  std::string try_connect(const Endpoint& from) {
    const auto sent = handshake(from, "flood");
    if (sent.size() != 1) return "no answer";
    if (sent[0].type() == Message::ConnectAccepted) return "accepted";
    const auto* r = sent[0].envelope()->message_as_ConnectRejected();
    return r != nullptr && r->message() != nullptr ? r->message()->str() : "rejected";
  }
};

TEST_F(SessionSlotTest, OneAddressOrOneIpv6Slash64HoldsAtMostFourSessionsAndOthersStillGetIn) {
  ASSERT_EQ(ServerConfig{}.max_sessions_per_address, 4);
  int accepted = 0;
  for (uint16_t port = 100; port < 140; ++port) {  // one IPv4 address floods
    const std::string answer = try_connect(at("203.0.113.5", port));
    if (answer == "accepted") {
      ++accepted;
    } else {
      EXPECT_NE(answer.find("--max-sessions-per-address 4"), std::string::npos) << answer;
    }
  }
  EXPECT_EQ(accepted, 4);
  accepted = 0;
  for (uint16_t port = 200; port < 240; ++port) {  // one /64, a new address every time
    const std::string address = "2001:db8:7:8::" + std::to_string(port);
    if (try_connect(at(address.c_str(), port)) == "accepted") ++accepted;
  }
  EXPECT_EQ(accepted, 4);
  // A real player from elsewhere gets in at once (no time passed), and so does the next /64.
  EXPECT_EQ(try_connect(at("198.51.100.7", 300)), "accepted");
  EXPECT_EQ(try_connect(at("2001:db8:7:9::1", 301)), "accepted");
  // Loopback is exempt (bots, load generators and tests on the server's machine).
  for (uint16_t port = 400; port < 406; ++port) EXPECT_EQ(try_connect(endpoint(port)), "accepted") << port;
  EXPECT_EQ(core_.sessions().size(), 16u);
}

TEST_F(SessionSlotTest, AHalfOpenSessionGetsNoSnapshotsAndEndsTwoSecondsAfterItsConnect) {
  const Endpoint silent = at("203.0.113.9", 500);
  const Endpoint player = at("198.51.100.7", 501);
  ASSERT_NE(connect(silent, "silent", /*confirm=*/false), 0u);
  ASSERT_NE(connect(player), 0u);
  size_t to_silent = 0, to_player = 0;
  auto run = [&](std::chrono::milliseconds span, bool player_acks) {
    for (auto t = std::chrono::milliseconds{0}; t < span; t += std::chrono::milliseconds{1000 / kTickHz}) {
      for (const Sent& s : advance(kStep)) {
        if (s.type() != Message::Snapshot) continue;
        (s.to == silent ? to_silent : to_player) += 1;
      }
      if (player_acks) receive(player, wire::build_ping(fbb_, 0));
    }
  };
  run(std::chrono::milliseconds{1500}, true);
  EXPECT_EQ(to_silent, 0u) << "an unconfirmed session gets no snapshots";
  EXPECT_GE(to_player, 40u);
  // Its resent Connect is answered (its ConnectAccepted may have been lost) but does not extend it.
  const auto resent = receive(silent, build_connect("silent", cookies_[silent]));
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].type(), Message::ConnectAccepted);
  run(std::chrono::milliseconds{600}, true);
  EXPECT_EQ(core_.sessions().size(), 1u) << "gone 2 s after it was created";
  EXPECT_EQ(core_.rejects().count(RejectReason::Unconfirmed), 1u);
  EXPECT_EQ(to_silent, 0u);
  // A session that confirms late (within the 2 s) is an ordinary one from then on.
  const Endpoint late = at("198.51.100.8", 502);
  ASSERT_NE(connect(late, "late", /*confirm=*/false), 0u);
  run(std::chrono::milliseconds{1000}, true);
  receive(late, wire::build_ping(fbb_, 0));
  size_t to_late = 0;
  for (int i = 0; i < kTickHz * 3; ++i) {
    for (const Sent& s : advance(kStep)) to_late += s.type() == Message::Snapshot && s.to == late ? 1 : 0;
    receive(late, wire::build_ping(fbb_, 0));
    receive(player, wire::build_ping(fbb_, 0));
  }
  EXPECT_GE(to_late, 80u);
  EXPECT_EQ(core_.sessions().size(), 2u);
}

// Attack C, the rest: a session that confirmed and then went silent got full-rate snapshots
// until --client-timeout (10 s; 80 KB/s each). They stop once it has been silent for 2 s, the
// session stays until its timeout, and its next datagram brings them back.
TEST_F(SessionSlotTest, AConfirmedSessionThatGoesSilentStopsGettingSnapshotsAfterTwoSeconds) {
  const Endpoint quiet = at("203.0.113.10", 510);
  const Endpoint player = at("198.51.100.9", 511);
  ASSERT_NE(connect(quiet, "quiet"), 0u);  // confirmed: its Ping authenticated
  ASSERT_NE(connect(player), 0u);
  // Per 100 ms window after the quiet one's last datagram: snapshots to it, and to the player.
  std::vector<size_t> to_quiet, to_player;
  for (int window = 0; window < 40; ++window) {  // 4 s
    size_t q = 0, p = 0;
    for (int i = 0; i < kTickHz / 10; ++i) {
      for (const Sent& s : advance(kStep)) {
        if (s.type() != Message::Snapshot) continue;
        (s.to == quiet ? q : p) += 1;
      }
      receive(player, wire::build_ping(fbb_, 0));
    }
    to_quiet.push_back(q);
    to_player.push_back(p);
  }
  size_t quiet_first_2s = 0, quiet_last_1_5s = 0, player_last_1_5s = 0;
  for (int w = 0; w < 19; ++w) quiet_first_2s += to_quiet[w];
  for (int w = 25; w < 40; ++w) {
    quiet_last_1_5s += to_quiet[w];
    player_last_1_5s += to_player[w];
  }
  EXPECT_GE(quiet_first_2s, 50u) << "a live session's snapshots before the hold";
  EXPECT_EQ(quiet_last_1_5s, 0u) << "silent for over 2 s: held";
  EXPECT_GE(player_last_1_5s, 40u) << "the player's snapshots go on";
  EXPECT_GT(stats_.snapshots_held_silent.load(), 0u);
  EXPECT_EQ(core_.sessions().size(), 2u) << "held, not ended: the client timeout is 10 s";
  // Its next datagram brings them back.
  receive(quiet, wire::build_ping(fbb_, 0));
  size_t after = 0;
  for (int i = 0; i < kTickHz / 2; ++i) {
    for (const Sent& s : advance(kStep)) after += s.type() == Message::Snapshot && s.to == quiet ? 1 : 0;
  }
  EXPECT_GE(after, 10u);
}

// --- The tick budget (server/app/tick_budget.h) -------------------------------------------------

// The player's box in the attack-B tests: flying along +z at 3 m/s, away from the attack, so
// that a throttle that touched it would show as a sleeping box or a changed velocity.
wire::CreateObjectArgs flying_box(Vec3 position) {
  wire::CreateObjectArgs box;
  box.shape = wire::ShapeKind::Box;
  box.position = position;
  box.velocity = {0, 0, 3};
  return box;
}

TEST(TickBudget, FairShareLevelIsMaxMinFair) {
  const std::vector<uint64_t> costs{100, 1, 2, 100};
  EXPECT_EQ(fair_share_level(costs, 1000), UINT64_MAX) << "the costs fit: nobody is over";
  EXPECT_EQ(fair_share_level(costs, 203), UINT64_MAX);
  EXPECT_EQ(fair_share_level(costs, 53), 25u) << "1 and 2 in full, then (53 - 3) / 2 each";
  EXPECT_EQ(fair_share_level(costs, 5), 1u) << "(5 - 1) / 3: the 2 is over too";
  EXPECT_EQ(fair_share_level(costs, 0), 0u);
  EXPECT_EQ(fair_share_level({}, 0), UINT64_MAX);
  // Capped at the level, the costs never exceed the target.
  for (uint64_t target = 0; target < 250; ++target) {
    const uint64_t level = fair_share_level(costs, target);
    uint64_t sum = 0;
    for (const uint64_t c : costs) sum += std::min(c, level);
    EXPECT_LE(sum, target) << target;
  }
}

// Attack B, by mechanism: several anonymous addresses each send a lattice of spheres at one
// point while a player's two boxes fly elsewhere. Each step is over budget (the step time is
// pinned at twice the budget), so each account is charged its awake bodies and contacts: the
// attackers, over their fair share, are put to sleep and refused; the player, far under it,
// is not touched, and after kThrottleHold the attackers may push again.
// The cost-based throttle's fixtures: a 10 ms budget, charged from 50 work units.
class BudgetFixture : public CoreTest {
 protected:
  static ServerConfig budget_config(int max_clients) {
    ServerConfig c = test_config();
    c.max_clients = max_clients;
    c.tick_budget_ms = 10;
    c.tick_budget_min_work = 50;
    c.max_wakes_per_tick = 0;  // every push wakes its body: these are the cost-based throttle's tests
    c.client_timeout_s = 60;   // the set-up takes up to 4 s of ticks without pings
    return c;
  }
  explicit BudgetFixture(int max_clients) : CoreTest(budget_config(max_clients)) {}
};

class TickBudgetTest : public BudgetFixture, public ::testing::WithParamInterface<int> {
 protected:
  TickBudgetTest() : BudgetFixture(16) { core_.set_step_time_for_test(std::chrono::milliseconds(20)); }
  ResultCode push(const Endpoint& from, ObjectID id, Vec3 v) {
    // A refusal is answered at once; an accepted push after the step.
    std::vector<Sent> sent = receive(from, wire::build_set_velocity(fbb_, next_id(from), id, v));
    for (Sent& s : advance(kStep)) sent.push_back(std::move(s));
    const auto r = results(sent);
    EXPECT_EQ(r.size(), 1u);
    return r.size() == 1 ? r[0]->code() : ResultCode::StaleId;
  }
};

TEST_P(TickBudgetTest, AttackersOverTheirShareSleepAndAreRefusedAndThePlayerIsNot) {
  const int attackers = GetParam();
  // Each over kMinShareWork when they meet: the floor below which nobody is throttled.
  constexpr int kSpheres = 96;
  const Endpoint player = at("198.51.100.1", 1);
  ASSERT_NE(connect(player), 0u);
  std::vector<ObjectID> own;
  for (int i = 0; i < 2; ++i) {
    own.push_back(create(player, flying_box({100.0f + 5.0f * static_cast<float>(i), 0, 0})));
    ASSERT_FALSE(own.back().is_null());
  }
  std::vector<Endpoint> hostile;
  std::vector<std::vector<ObjectID>> bodies(static_cast<size_t>(attackers));
  for (int a = 0; a < attackers; ++a) {
    hostile.push_back(at("203.0.113." + std::to_string(a + 1), static_cast<uint16_t>(10 + a)));  // the fixture keys peers by port
    ASSERT_NE(connect(hostile.back()), 0u);
    const float angle = 6.2831853f * static_cast<float>(a) / static_cast<float>(attackers);
    const Vec3 base{12.0f * std::cos(angle), 0, 12.0f * std::sin(angle)};
    for (int k = 0; k < kSpheres; ++k) {  // a 4 x 4 x 6 lattice
      wire::CreateObjectArgs sphere;
      sphere.position = base + Vec3{1.5f * static_cast<float>(k % 4), 1.5f * static_cast<float>((k / 4) % 4),
                                    1.5f * static_cast<float>(k / 16)};
      sphere.asleep = true;
      bodies[static_cast<size_t>(a)].push_back(create(hostile.back(), sphere));
      ASSERT_FALSE(bodies[static_cast<size_t>(a)].back().is_null());
    }
  }
  // All at the centre, 20 m/s.
  for (int a = 0; a < attackers; ++a) {
    std::vector<Bytes> sends;
    for (const ObjectID id : bodies[static_cast<size_t>(a)]) {
      const Vec3 p = core_.world().get_object(id)->position;
      sends.push_back(copy(wire::build_set_velocity(fbb_, next_id(hostile[static_cast<size_t>(a)]), id,
                                                    normalize_or(Vec3{0, 1, 0} - p, Vec3{0, 1, 0}) * 20.0f)));
    }
    for (const Bytes& b : sends) receive(hostile[static_cast<size_t>(a)], b);
  }
  for (int i = 0; i < 30; ++i) advance(kStep);  // 0.5 s: they meet

  EXPECT_GE(core_.rejects().count(RejectReason::OverBudget), static_cast<uint64_t>(attackers));
  for (const auto& list : bodies) {
    for (const ObjectID id : list) EXPECT_TRUE(core_.world().get_object(id)->sleeping) << "an attacker's body is awake";
  }
  for (const ObjectID id : own) {
    const auto b = core_.world().get_object(id);
    EXPECT_FALSE(b->sleeping) << "the player's body was put to sleep";
    EXPECT_NEAR(b->velocity.z, 3.0f, 1e-4f) << "the player's body was slowed";
  }
  EXPECT_GE(stats_.bodies_put_to_sleep_over_budget.load(), static_cast<uint64_t>(kSpheres * attackers));
  EXPECT_EQ(push(hostile[0], bodies[0][0], {0, 0, 1}), ResultCode::OverBudget);
  EXPECT_EQ(push(player, own[0], {0, 0, 4}), ResultCode::Ok);

  // After the hold the attackers may push again (the bodies are asleep: nothing is over budget).
  for (int i = 0; i < kTickHz * 2 + 2; ++i) advance(kStep);
  EXPECT_EQ(push(hostile[0], bodies[0][0], {0, 0, 1}), ResultCode::Ok);
}

INSTANTIATE_TEST_SUITE_P(Attackers, TickBudgetTest, ::testing::Values(2, 4, 8));

TEST(TickBudget, TheFloorUnderTheShareShrinksOnlyWhenTheStepOverrunsItsTick) {
  const double tick = 1000.0 / 60.0;
  const uint32_t past = kOverrunGrace + 1;  // the first overrun of a streak past the grace
  EXPECT_EQ(min_share_work(5.0, tick, past), kMinShareWork);
  EXPECT_EQ(min_share_work(tick, tick, past), kMinShareWork);
  EXPECT_EQ(min_share_work(2.0 * tick, tick, kOverrunGrace), kMinShareWork) << "within the grace";
  EXPECT_EQ(min_share_work(2.0 * tick, tick, past), kMinShareWork / 2);
  EXPECT_EQ(min_share_work(2.0 * tick, tick, past + 1), kMinShareWork / 4) << "halved for each further overrun";
  EXPECT_EQ(min_share_work(2.0 * tick, tick, past + 4), kMinShareWorkOverrun);
  EXPECT_EQ(min_share_work(1e6, tick, past), kMinShareWorkOverrun);
  EXPECT_EQ(min_share_work(std::numeric_limits<double>::quiet_NaN(), tick, past), kMinShareWork);
  for (double step = 1.0; step < 400.0; step *= 1.1) {
    EXPECT_LE(min_share_work(step * 1.1, tick, past), min_share_work(step, tick, past)) << "a longer wake-up never raises it";
  }
}

TEST(TickBudget, TheSendShareReducesOnlySessionsAboveItAndLoosensStepByStep) {
  EXPECT_EQ(send_every_for(500, 1024), 1u);
  EXPECT_EQ(send_every_for(1024, 1024), 1u);
  EXPECT_EQ(send_every_for(2048, 1024), 2u);
  EXPECT_EQ(send_every_for(2049, 1024), 3u) << "rounded up: the session costs at most the level a round";
  EXPECT_EQ(send_every_for(1'000'000, 1024), kMaxSendEvery) << "never fewer than one round in kMaxSendEvery";
  EXPECT_EQ(send_every_for(5, 0), kMaxSendEvery);
  // Two sessions watching a crowd and a player watching its surroundings, in a wake-up whose sends
  // must halve: the player is met in full, the watchers share the rest.
  const std::vector<uint64_t> costs{4000, 4000, 10};
  const std::vector<uint32_t> all{1, 1, 1};
  const uint64_t level = send_share_level(costs, all, 0.5);
  EXPECT_EQ(level, (8010 / 2 - 10) / 2);
  EXPECT_EQ(send_every_for(4000, level), 3u);
  EXPECT_EQ(send_every_for(10, level), 1u);
  // Served one round in four, the same sessions with twice the time: one round in two, not all
  // at once (the load that made the share would come straight back).
  const std::vector<uint32_t> quarter{4, 4, 1};
  EXPECT_EQ(send_every_for(4000, send_share_level(costs, quarter, 2.0)), 2u);
  // However short the tick, a session under the floor keeps every round.
  EXPECT_EQ(send_share_level(costs, all, 0.0), kMinSendShareVisits);
  EXPECT_EQ(send_share_level(costs, all, std::numeric_limits<double>::quiet_NaN()), kMinSendShareVisits);
  EXPECT_EQ(send_every_for(kMinSendShareVisits, send_share_level(costs, all, 0.0)), 1u);
}

// The send share on the core, by mechanism: four sessions whose areas cover 1,500 moving bodies and
// a player whose area holds none of them, with the sends pinned at 20 ms of a 16.7 ms tick. The
// watchers get fewer snapshot rounds, spread over the rounds whatever their snapshot phase; the
// player keeps every one; once the sends are cheap again the watchers get all of theirs back.
class SendShareTest : public CoreTest {
 protected:
  static ServerConfig share_config() {
    ServerConfig c = test_config();
    c.max_clients = 8;
    c.client_timeout_s = 60;
    return c;
  }
  SendShareTest() : CoreTest(share_config()) {
    auto_ack_ = true;
    std::vector<physics::BodyDesc> crowd;
    for (int i = 0; i < 1500; ++i) {
      physics::BodyDesc b;
      b.kind = physics::BodyKind::Kinematic;  // moves for good, at no cost to the step
      b.shape = physics::make_sphere(0.4f);
      b.position = {-30.0f + 1.5f * static_cast<float>(i % 40), 10.0f + 1.5f * static_cast<float>(i / 40 % 10),
                    -20.0f + 1.5f * static_cast<float>(i / 400)};
      b.velocity = {0, 0, 1};
      crowd.push_back(b);
    }
    std::string error;
    EXPECT_TRUE(core_.add_bodies(crowd, &error)) << error;
    core_.set_step_time_for_test(std::chrono::milliseconds(2));
  }
  // Snapshots each endpoint got over `ticks` ticks, everyone pinging every tick.
  std::map<Endpoint, size_t> run(int ticks, const std::vector<Endpoint>& clients) {
    std::map<Endpoint, size_t> got;
    for (int t = 0; t < ticks; ++t) {
      for (const Sent& s : advance(kStep)) got[s.to] += s.type() == Message::Snapshot ? 1 : 0;
      for (const Endpoint& c : clients) receive(c, wire::build_ping(fbb_, 0));
    }
    return got;
  }
};

TEST_F(SendShareTest, SessionsWhoseSnapshotsCostMostGetFewerRoundsAndGetThemBackWhenTheLoadEnds) {
  std::vector<Endpoint> watchers, clients;
  for (int k = 0; k < 4; ++k) {
    watchers.push_back(at("203.0.113." + std::to_string(10 + k), static_cast<uint16_t>(100 + k)));
    ASSERT_NE(connect(watchers.back()), 0u);
  }
  const Endpoint player = at("198.51.100.1", 1);
  ASSERT_NE(connect(player), 0u);
  wire::InterestArgs area;
  area.kind = wire::InterestKind::Sphere;
  area.center = {300, 0, 0};
  area.radius = 20;
  receive(player, wire::build_set_interest(fbb_, next_id(player), area));
  clients = watchers;
  clients.push_back(player);
  run(kTickHz, clients);  // every session has written: each knows its cost
  const uint64_t held0 = stats_.snapshots_held_throttled.load();
  core_.set_send_time_for_test(std::chrono::milliseconds(20));
  run(kTickHz / 2, clients);  // the share settles
  std::map<Endpoint, size_t> got = run(2 * kTickHz, clients);
  EXPECT_GE(got[player], 57u) << "the player's 30 Hz (60 in 2 s) are not the watchers' cost";
  for (const Endpoint& w : watchers) {
    EXPECT_LE(got[w], 36u) << "a watcher over the share kept its snapshot rate";
    EXPECT_GE(got[w], 60u / kMaxSendEvery - 1) << "a watcher's sends are spread, never stopped";
  }
  EXPECT_GT(stats_.snapshots_held_throttled.load(), held0);
  EXPECT_GT(core_.rejects().count(RejectReason::OverBudget), 0u) << "the reduction is counted and logged";
  // The sends cost little again: after the hold the watchers are served in full.
  core_.set_send_time_for_test(std::chrono::milliseconds(1));
  run(kSendShareHold.count() * kTickHz + kTickHz / 2, clients);
  got = run(kTickHz, clients);
  for (const Endpoint& w : watchers) EXPECT_GE(got[w], 29u) << "a watcher's snapshots did not come back";
  EXPECT_GE(got[player], 29u);
}

// Attack B from many addresses, by mechanism: 32 accounts of 12 spheres each, every one under
// kMinShareWork, meet while the step is pinned at three ticks. After kOverrunGrace such
// wake-ups in a row the floor yields to the overrun, so they are throttled; their bodies are held asleep (World::put_to_sleep's hold), so
// the crowd they were sent into does not wake them again, and the player is untouched.
class ManyAccountsTest : public BudgetFixture {
 protected:
  ManyAccountsTest() : BudgetFixture(40) { core_.set_step_time_for_test(std::chrono::milliseconds(50)); }
};

TEST_F(ManyAccountsTest, AccountsEachUnderTheFloorAreThrottledWhenTheStepOverrunsAndStayAsleep) {
  constexpr int kAttackers = 32;
  constexpr int kSpheres = 12;
  const Endpoint player = at("198.51.100.1", 1);
  ASSERT_NE(connect(player), 0u);
  const ObjectID own = create(player, flying_box({100.0f, 0, 0}));
  ASSERT_FALSE(own.is_null());
  std::vector<Endpoint> hostile;
  std::vector<ObjectID> spheres;
  for (int a = 0; a < kAttackers; ++a) {
    hostile.push_back(at("203.0.113." + std::to_string(a + 1), static_cast<uint16_t>(10 + a)));
    ASSERT_NE(connect(hostile.back()), 0u);
    for (int k = 0; k < kSpheres; ++k) {
      const int n = a * kSpheres + k;  // an 8 x 8 x 6 lattice, 1.5 m apart
      wire::CreateObjectArgs sphere;
      sphere.position = {1.5f * static_cast<float>(n % 8 - 4), 10.0f + 1.5f * static_cast<float>((n / 8) % 8 - 4),
                         1.5f * static_cast<float>(n / 64 - 3)};
      sphere.asleep = true;
      spheres.push_back(create(hostile.back(), sphere));
      ASSERT_FALSE(spheres.back().is_null());
    }
  }
  for (size_t i = 0; i < spheres.size(); ++i) {
    const Endpoint& from = hostile[i / kSpheres];
    const Vec3 p = core_.world().get_object(spheres[i])->position;
    receive(from, wire::build_set_velocity(fbb_, next_id(from), spheres[i],
                                           normalize_or(Vec3{0, 10, 0} - p, Vec3{0, 1, 0}) * 20.0f));
  }
  uint64_t held_seen = 0;
  for (int i = 0; i < 45; ++i) {
    advance(kStep);
    for (const ObjectID id : spheres) held_seen += core_.world().is_held_asleep(id) ? 1 : 0;
  }
  EXPECT_GE(core_.rejects().count(RejectReason::OverBudget), static_cast<uint64_t>(kAttackers) / 2);
  size_t awake = 0;
  for (const ObjectID id : spheres) awake += core_.world().get_object(id)->sleeping ? 0 : 1;
  EXPECT_EQ(awake, 0u) << "of " << spheres.size() << " spheres";
  EXPECT_GT(held_seen, 0u);
  // Put to sleep about once each: a held body is not woken and put back every tick.
  EXPECT_LE(stats_.bodies_put_to_sleep_over_budget.load(), 2 * spheres.size());
  const auto b = core_.world().get_object(own);
  EXPECT_FALSE(b->sleeping) << "the player's body was put to sleep";
  EXPECT_NEAR(b->velocity.z, 3.0f, 1e-4f);
}

// --max-wakes-per-tick: the pushes of one tick that would wake sleeping bodies share the
// allowance max-min fairly. An attacker pushing 60 of its sleeping spheres in one tick gets its
// share of 16 and OverBudget for the rest (each may be resent next tick); a player pushing its
// one sleeping box in the same tick is under its share and never refused. Pushes on awake
// bodies are not counted.
class WakeAllowanceTest : public CoreTest {
 protected:
  static ServerConfig wake_config() {
    ServerConfig c = test_config();
    c.max_wakes_per_tick = 16;
    c.tick_budget_ms = 0;  // the cost-based throttle off: only the wake allowance acts
    c.max_clients = 3;
    return c;
  }
  WakeAllowanceTest() : CoreTest(wake_config()) {}
};

TEST_F(WakeAllowanceTest, PushesThatWakeSleepersShareTheAllowanceFairly) {
  const Endpoint player = at("198.51.100.1", 1);
  const Endpoint attacker = at("203.0.113.7", 2);
  ASSERT_NE(connect(player), 0u);
  ASSERT_NE(connect(attacker), 0u);
  wire::CreateObjectArgs box;
  box.shape = wire::ShapeKind::Box;
  box.position = {40.0f, 0.5f, 0.0f};
  box.asleep = true;
  const ObjectID own = create(player, box);
  ASSERT_FALSE(own.is_null());
  std::vector<ObjectID> spheres;
  for (int k = 0; k < 60; ++k) {
    wire::CreateObjectArgs sphere;
    sphere.position = {2.0f * static_cast<float>(k % 10), 5.0f, 2.0f * static_cast<float>(k / 10)};
    sphere.asleep = true;
    spheres.push_back(create(attacker, sphere));
    ASSERT_FALSE(spheres.back().is_null());
  }
  std::vector<Sent> sent;
  for (const ObjectID id : spheres) {
    for (Sent& s : receive(attacker, wire::build_set_velocity(fbb_, next_id(attacker), id, {0, 1, 0}))) sent.push_back(std::move(s));
  }
  for (Sent& s : receive(player, wire::build_set_velocity(fbb_, next_id(player), own, {0, 0, 1}))) sent.push_back(std::move(s));
  for (Sent& s : advance(kStep)) sent.push_back(std::move(s));
  size_t ok = 0, over = 0, player_ok = 0;
  for (const Sent& s : sent) {
    const auto* r = s.envelope()->message_as_RequestResult();
    if (r == nullptr) continue;
    if (s.to == player) {
      player_ok += r->code() == ResultCode::Ok ? 1 : 0;
      continue;
    }
    ok += r->code() == ResultCode::Ok ? 1 : 0;
    over += r->code() == ResultCode::OverBudget ? 1 : 0;
  }
  EXPECT_EQ(player_ok, 1u) << "the player's one wake is under its share";
  EXPECT_EQ(ok, 15u) << "the attacker's share: (16 - 1) / 1";
  EXPECT_EQ(over, 45u);
  size_t awake = 0;
  for (const ObjectID id : spheres) awake += core_.world().get_object(id)->sleeping ? 0 : 1;
  EXPECT_EQ(awake, 15u);
  EXPECT_FALSE(core_.world().get_object(own)->sleeping);
  // A push on an awake body is not a wake: the 15 may be pushed again, all of them, at once.
  sent.clear();
  for (const ObjectID id : spheres) {
    if (core_.world().get_object(id)->sleeping) continue;
    for (Sent& s : receive(attacker, wire::build_set_velocity(fbb_, next_id(attacker), id, {0, 2, 0}))) sent.push_back(std::move(s));
  }
  for (Sent& s : advance(kStep)) sent.push_back(std::move(s));
  size_t again = 0;
  for (const auto* r : results(sent)) again += r->code() == ResultCode::Ok ? 1 : 0;
  EXPECT_EQ(again, 15u);
}

// An account the plan never saw: a newcomer's first body, created asleep, and a push on its
// (predictable) id, both in the queue of a tick whose wakes are over the allowance. The push is
// planned for nobody, so it takes its grant under the same level: answered Ok, the body awake.
TEST_F(WakeAllowanceTest, AnAccountFirstSeenInTheQueueTakesItsShareToo) {
  const Endpoint attacker = at("203.0.113.7", 2);
  const Endpoint newcomer = at("198.51.100.9", 3);
  ASSERT_NE(connect(attacker), 0u);
  ASSERT_NE(connect(newcomer), 0u);
  std::vector<ObjectID> spheres;
  for (int k = 0; k < 40; ++k) {
    wire::CreateObjectArgs sphere;
    sphere.position = {2.0f * static_cast<float>(k % 10), 5.0f, 2.0f * static_cast<float>(k / 10)};
    sphere.asleep = true;
    spheres.push_back(create(attacker, sphere));
    ASSERT_FALSE(spheres.back().is_null());
  }
  for (const ObjectID id : spheres) receive(attacker, wire::build_set_velocity(fbb_, next_id(attacker), id, {0, 1, 0}));
  // Slots were only ever taken (nothing destroyed): the next body gets the next index, generation 1.
  const ObjectID predicted{core_.world().object_count(), 1};
  wire::CreateObjectArgs box;
  box.shape = wire::ShapeKind::Box;
  box.position = {-30.0f, 0.5f, 0.0f};
  box.asleep = true;
  std::vector<Sent> sent = receive(newcomer, wire::build_create_object(fbb_, next_id(newcomer), box));
  const uint32_t push_id = next_id(newcomer);
  for (Sent& s : receive(newcomer, wire::build_set_velocity(fbb_, push_id, predicted, {0, 0, 1}))) sent.push_back(std::move(s));
  for (Sent& s : advance(kStep)) sent.push_back(std::move(s));
  const wire::RequestResult* push = nullptr;
  for (const auto* r : results(sent)) {
    if (r->request_id() == push_id) push = r;
  }
  ASSERT_NE(push, nullptr);
  EXPECT_EQ(push->code(), ResultCode::Ok);
  const auto b = core_.world().get_object(predicted);
  ASSERT_TRUE(b.has_value()) << "the id was not the predicted one";
  EXPECT_FALSE(b->sleeping);
}

// Attack B as measured in the review, on the sans-IO core with real step times: 19, 64 or 256
// anonymous addresses share 4,864 asleep bullet spheres (256, 76 or 19 each; the server-wide cap
// allows 5,000), then every 2 s send all of them at one point at 60 m/s, acking every tick, while
// a player's box flies elsewhere. Before the budget: a tick p99 of 30 to 125 ms. `make test`
// checks the mechanism and prints the figures; the timing stage (IMPULSE_TIMING_CHECKS=1, alone
// on the machine) asserts the wake-ups' p99, snapshots included, within one 60 Hz period.
class TickBudgetTiming : public CoreTest, public ::testing::WithParamInterface<int> {
 protected:
  static ServerConfig timing_config() {
    ServerConfig c = test_config();
    c.max_clients = 300;
    c.client_timeout_s = 60;
    c.max_requests_per_second = 100000;
    c.max_kbytes_in_per_second = 1 << 20;
    return c;  // the tick budget: the defaults (6 ms, 1,500 units)
  }
  TickBudgetTiming() : CoreTest(timing_config()) { auto_ack_ = true; }  // real clients ack: delta snapshots
};

TEST_P(TickBudgetTiming, AttackBFromManyAddressesStaysWithinTheTick) {
  if (test::kSanitized) GTEST_SKIP() << "a timing scenario; the mechanism is TickBudgetTest's";
  const int addresses = GetParam();
  const int per_address = 4864 / addresses;
  const Endpoint player = at("198.51.100.1", 1);
  ASSERT_NE(connect(player), 0u);
  const ObjectID own = create(player, flying_box({300, 0, 0}));
  ASSERT_FALSE(own.is_null());
  // A game client watches its surroundings, not the whole world: 50 m about its box.
  wire::InterestArgs area;
  area.kind = wire::InterestKind::Sphere;
  area.center = {300, 0, 0};
  area.radius = 50;
  receive(player, wire::build_set_interest(fbb_, next_id(player), area));
  std::vector<Endpoint> hostile;
  std::vector<ObjectID> spheres;
  const int side = static_cast<int>(std::ceil(std::cbrt(4864.0)));
  int placed = 0;
  for (int a = 0; a < addresses; ++a) {
    hostile.push_back(at("10.0." + std::to_string(a / 250) + "." + std::to_string(a % 250 + 1), static_cast<uint16_t>(1000 + a)));
    ASSERT_NE(connect(hostile.back()), 0u);
    for (int k = 0; k < per_address; k += 32) {
      for (int j = k; j < std::min(k + 32, per_address); ++j, ++placed) {
        wire::CreateObjectArgs sphere;
        sphere.position = {2.5f * static_cast<float>(placed % side - side / 2),
                           30.0f + 2.5f * static_cast<float>((placed / side) % side - side / 2),
                           2.5f * static_cast<float>(placed / (side * side) - side / 2)};
        sphere.asleep = true;
        sphere.bullet = true;
        receive(hostile.back(), wire::build_create_object(fbb_, next_id(hostile.back()), sphere));
      }
      const std::vector<Sent> answers = advance(kStep);
      for (const auto* r : results(answers)) {
        if (r->code() == ResultCode::Ok) spheres.push_back(from_wire(r->id()));
      }
    }
  }
  ASSERT_GE(spheres.size(), 4800u);
  std::map<uint32_t, size_t> owner_of;  // sphere index -> its address, in creation order
  {
    size_t s = 0;
    for (int a = 0; a < addresses; ++a) {
      for (int k = 0; k < per_address && s < spheres.size(); ++k) owner_of[spheres[s++].index] = static_cast<size_t>(a);
    }
  }
  std::vector<double> wake_ms;
  const auto attack = [&] {
    for (const ObjectID id : spheres) {
      const auto b = core_.world().get_object(id);
      if (!b) continue;
      const Endpoint& from = hostile[owner_of[id.index]];
      receive(from, wire::build_set_velocity(fbb_, next_id(from), id,
                                            normalize_or(Vec3{0, 30, 0} - b->position, Vec3{0, 1, 0}) * 60.0f));
    }
  };
  const uint64_t step_ns0 = stats_.step_ns.load(), snap_ns0 = stats_.snapshots_ns.load(), events_ns0 = stats_.events_ns.load();
  size_t player_snapshots = 0;
  uint64_t dbg_s = stats_.step_ns.load(), dbg_e = stats_.events_ns.load(), dbg_n = stats_.snapshots_ns.load();
  for (int tick = 0; tick < 6 * kTickHz; ++tick) {
    if (tick % (2 * kTickHz) == 0) attack();
    // The server's wake-up alone: drain() opens every datagram, which is the clients' work.
    now_ += kStep;
    const auto t0 = std::chrono::steady_clock::now();
    core_.update(now_, out_);
    wake_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (std::getenv("DBG_TRACE") && wake_ms.back() > 14) { size_t awake = 0; for (const ObjectID id : spheres) { auto bb = core_.world().get_object(id); if (bb && !bb->sleeping) ++awake; }
      std::printf("tick %d ms %.2f step %.2f ev %.2f snap %.2f awake %zu\n", tick, wake_ms.back(), 1e-6*(stats_.step_ns.load()-dbg_s), 1e-6*(stats_.events_ns.load()-dbg_e), 1e-6*(stats_.snapshots_ns.load()-dbg_n), awake); }
    dbg_s = stats_.step_ns.load(); dbg_e = stats_.events_ns.load(); dbg_n = stats_.snapshots_ns.load();
    for (const Sent& d : drain()) player_snapshots += d.to == player && d.type() == Message::Snapshot ? 1 : 0;
    receive(player, wire::build_ping(fbb_, 0));
    for (const Endpoint& h : hostile) receive(h, wire::build_ping(fbb_, 0));
  }
  const auto b = core_.world().get_object(own);
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(b->sleeping) << "the player's box was put to sleep";
  EXPECT_NEAR(b->velocity.z, 3.0f, 1e-4f);
  // 30 Hz for 6 s: whatever the machine, the player's snapshots are not what the attack costs.
  EXPECT_GE(player_snapshots, 180u * 95 / 100) << "the player lost snapshots to the attack";
  std::vector<double> sorted = wake_ms;
  std::sort(sorted.begin(), sorted.end());
  const double p99 = sorted[sorted.size() * 99 / 100], worst = sorted.back();
  std::printf("[ figures  ] attack B, %d addresses x %d bullet spheres at 60 m/s every 2 s: wake-up p50 %.2f ms, "
              "p99 %.2f ms, max %.2f ms over %zu ticks (step %.2f ms, events %.2f ms, snapshots %.2f ms a tick on average); %llu "
              "refusals and throttles, %llu bodies put to sleep; the player got %zu of 180 snapshots\n",
              addresses, per_address, sorted[sorted.size() / 2], p99, worst, sorted.size(),
              1e-6 * static_cast<double>(stats_.step_ns.load() - step_ns0) / static_cast<double>(sorted.size()),
              1e-6 * static_cast<double>(stats_.events_ns.load() - events_ns0) / static_cast<double>(sorted.size()),
              1e-6 * static_cast<double>(stats_.snapshots_ns.load() - snap_ns0) / static_cast<double>(sorted.size()),
              static_cast<unsigned long long>(core_.rejects().count(RejectReason::OverBudget)),
              static_cast<unsigned long long>(stats_.bodies_put_to_sleep_over_budget.load()), player_snapshots);
  if (test::timing_checks()) {
    EXPECT_LE(p99, 16.6);
  }
}

INSTANTIATE_TEST_SUITE_P(Addresses, TickBudgetTiming, ::testing::Values(19, 64, 256));

}  // namespace
}  // namespace impulse::server
