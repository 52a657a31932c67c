// ServerCore's protocol-version-3 rules on a fake clock: the cookie handshake (no state and no
// amplification before it), connect tokens, exactly-once in-order requests, ownership, quotas and
// rate limits, reliable collision events and areas of interest.
#include "unit/server/core_fixture.h"

#include <limits>
#include <set>

#include "server/net/handshake.h"

namespace impulse::server {
namespace {

using namespace core_test;

/// Copies `bytes` and stamps a packet header on the copy (what a real client sends).
Bytes stamped(std::span<const uint8_t> bytes, uint32_t sequence, uint32_t ack, uint32_t ack_bits = 0) {
  Bytes b = copy(bytes);
  EXPECT_TRUE(wire::stamp_header(b, wire::PacketHeader(sequence, ack, ack_bits)));
  return b;
}

size_t total_bytes(const std::vector<Sent>& sent) {
  size_t n = 0;
  for (const Sent& s : sent) n += s.bytes.size();
  return n;
}

// --- Handshake ------------------------------------------------------------------------------

TEST_F(CoreTest, NoSessionWithoutTheCookieRoundTripAndNoAmplification) {
  const Endpoint spoofed = endpoint(6000);
  size_t bytes_in = 0, bytes_out = 0;
  auto send = [&](std::span<const uint8_t> datagram) {
    bytes_in += datagram.size();
    const auto sent = receive(spoofed, datagram);
    bytes_out += total_bytes(sent);
    for (const Sent& s : sent) EXPECT_LE(s.bytes.size(), datagram.size()) << "an answer larger than its request";
    return sent;
  };
  // 1. A Connect without a cookie: a Challenge, and no session.
  auto sent = send(build_connect("spoofer"));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type(), Message::Challenge);
  EXPECT_EQ(core_.sessions().size(), 0u);
  // 2. A forged cookie (right length, wrong MAC): challenged again, no session.
  std::vector<uint8_t> forged(security::kCookieBytes, 0x5A);
  sent = send(build_connect("spoofer", forged));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type(), Message::Challenge);
  // 3. A real cookie, but issued to another address: no session.
  const auto other = receive(endpoint(6001), build_connect("other"));
  ASSERT_EQ(other.size(), 1u);
  const auto* cookie = other[0].envelope()->message_as_Challenge()->cookie();
  sent = send(build_connect("spoofer", Bytes(cookie->begin(), cookie->end())));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type(), Message::Challenge);
  // 4. An unpadded Connect is not answered at all.
  flatbuffers::FlatBufferBuilder raw;
  const auto name = raw.CreateString("x");
  wire::FinishEnvelopeBuffer(raw, wire::CreateEnvelope(raw, wire::kProtocolVersion, Message::Connect,
                                                       wire::CreateConnect(raw, wire::kProtocolVersion, name).Union()));
  ASSERT_LT(raw.GetSize(), wire::min_connect_bytes());
  EXPECT_TRUE(send({raw.GetBufferPointer(), raw.GetSize()}).empty());
  // 5. Requests and pings from the unvalidated address: small answers only.
  send(wire::build_create_object(fbb_, 1, wire::CreateObjectArgs{}));
  send(wire::build_ping(fbb_, 1));
  EXPECT_EQ(core_.sessions().size(), 0u);
  EXPECT_LE(bytes_out, bytes_in);
  EXPECT_EQ(core_.rejects().count(RejectReason::BadCookie), 2u);

  // A stale cookie (two slots later) is refused too; a fresh one then connects.
  const auto first = receive(spoofed, build_connect("late"));
  const auto* late_cookie = first[0].envelope()->message_as_Challenge()->cookie();
  const Bytes kept(late_cookie->begin(), late_cookie->end());
  now_ += 2 * security::kCookieSlotLength;
  sent = receive(spoofed, build_connect("late", kept));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type(), Message::Challenge);
  EXPECT_NE(connect(spoofed), 0u);
}

// Attack D: a captured Connect sent again. A client makes a fresh key pair for each attempt, so
// a share that already made a session marks a replay: after the player has gone, from its own
// address (the ghost session that once locked its ip:port out), or from another address with a
// cookie of its own. Neither creates a session or gets an answer; ConnectAccepted echoes the
// share it answers, so a client can tell an answer to its own Connect from one to a replay.
TEST_F(CoreTest, AReplayedConnectCreatesNoSessionAndConnectAcceptedEchoesTheKeyShare) {
  const Endpoint player = endpoint(6200);
  const net::KxKeyPair& pair = peer_kx(player, /*new_attempt=*/true);
  const auto first = receive(player, wire::build_connect(fbb_, "player", {}, {}, pair.public_key));
  ASSERT_EQ(first.size(), 1u);
  const auto* cookie = first[0].envelope()->message_as_Challenge()->cookie();
  const Bytes captured = copy(wire::build_connect(fbb_, "player", Bytes(cookie->begin(), cookie->end()), {}, pair.public_key));
  const auto accepted = receive(player, captured);
  ASSERT_EQ(accepted.size(), 1u);
  const auto* a = accepted[0].envelope()->message_as_ConnectAccepted();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(a->client_kx_public(), nullptr);
  EXPECT_TRUE(std::equal(a->client_kx_public()->begin(), a->client_kx_public()->end(), pair.public_key.begin(),
                         pair.public_key.end()));
  receive(player, wire::build_ping(fbb_, 0));  // confirmed
  ASSERT_EQ(core_.sessions().size(), 1u);
  receive(player, wire::build_disconnect(fbb_, "bye"));
  ASSERT_EQ(core_.sessions().size(), 0u);

  // Replayed from the player's address, within the cookie's life: nothing.
  advance(std::chrono::seconds(1));
  EXPECT_TRUE(receive(player, captured).empty());
  EXPECT_EQ(core_.sessions().size(), 0u);
  // The same share with a cookie of another address (the attacker's own round trip): nothing.
  const Endpoint attacker = endpoint(6201);
  const auto challenge = receive(attacker, wire::build_connect(fbb_, "x", {}, {}, pair.public_key));
  ASSERT_EQ(challenge.size(), 1u);
  const auto* theirs = challenge[0].envelope()->message_as_Challenge()->cookie();
  EXPECT_TRUE(receive(attacker, wire::build_connect(fbb_, "x", Bytes(theirs->begin(), theirs->end()), {}, pair.public_key))
                  .empty());
  EXPECT_EQ(core_.sessions().size(), 0u);
  EXPECT_EQ(core_.rejects().count(RejectReason::ReplayedConnect), 2u);
  // The player's next attempt, with a fresh pair, is welcome.
  EXPECT_NE(connect(player), 0u);
}

class TokenTest : public CoreTest {
 protected:
  TokenTest() {
    key_ = security::make_token_key();
    core_.set_token_key(key_);
    core_.set_unix_time_source([] { return uint64_t{1'800'000'000}; });
  }
  std::vector<Sent> connect_with(const Endpoint& from, std::span<const uint8_t> token) {
    binding_[from.port()] = security::token_session_secret(key_, token);
    const auto challenge = receive(from, build_connect("player", {}, token));
    if (challenge.size() != 1 || challenge[0].type() != Message::Challenge) return challenge;
    const auto* cookie = challenge[0].envelope()->message_as_Challenge()->cookie();
    return receive(from, build_connect("player", Bytes(cookie->begin(), cookie->end()), token));
  }
  static ResultCode rejection(const std::vector<Sent>& sent) {
    if (sent.size() != 1 || sent[0].type() != Message::ConnectRejected) return ResultCode::Ok;
    return sent[0].envelope()->message_as_ConnectRejected()->reason();
  }
  security::TokenKey key_;
};

TEST_F(TokenTest, MissingExpiredForgedAndWrongKeyTokensAreRefused) {
  security::TokenClaims claims{42, 1'800'000'100, 7};
  EXPECT_EQ(rejection(connect_with(endpoint(1), {})), ResultCode::TokenRequired);

  security::TokenClaims expired = claims;
  expired.expires_unix_s = 1'799'999'999;
  EXPECT_EQ(rejection(connect_with(endpoint(2), security::seal_token(key_, expired))), ResultCode::TokenExpired);

  security::Token forged = security::seal_token(key_, claims);
  forged[forged.size() / 2] ^= 0x01;
  EXPECT_EQ(rejection(connect_with(endpoint(3), forged)), ResultCode::TokenInvalid);

  const security::TokenKey other = security::make_token_key();
  EXPECT_EQ(rejection(connect_with(endpoint(4), security::seal_token(other, claims))), ResultCode::TokenInvalid);
  EXPECT_EQ(core_.sessions().size(), 0u);
  EXPECT_EQ(core_.rejects().count(RejectReason::BadToken), 4u);

  // A valid token: the session takes the token's client id and quota.
  const auto sent = connect_with(endpoint(5), security::seal_token(key_, claims));
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].type(), Message::ConnectAccepted);
  EXPECT_EQ(sent[0].envelope()->message_as_ConnectAccepted()->client_id(), 42u);
  EXPECT_EQ(sent[0].envelope()->message_as_ConnectAccepted()->max_objects(), 7u);
}

// The same client id connecting again replaces its session, but only once the new session has
// authenticated a sealed datagram (so holds the token's secret, not just a token seen on the
// wire): until then both live, and a new session that never confirms ends after 2 s and replaces
// nothing (attack D: one replayed Connect replaced the player's live session).
TEST_F(TokenTest, TheSameClientIdConnectingAgainReplacesItsSessionOnceItAuthenticates) {
  const security::TokenClaims claims{42, 1'800'000'100, 0};
  ASSERT_EQ(connect_with(endpoint(1), security::seal_token(key_, claims)).at(0).type(), Message::ConnectAccepted);
  receive(endpoint(1), wire::build_ping(fbb_, 0));  // confirmed
  auto told_old = [&](const std::vector<Sent>& sent) {
    return std::any_of(sent.begin(), sent.end(),
                       [&](const Sent& s) { return s.to == endpoint(1) && s.type() == Message::Disconnect; });
  };
  // A Connect with the token that never authenticates anything: the player stays.
  const auto replayed = connect_with(endpoint(3), security::seal_token(key_, claims));
  EXPECT_FALSE(told_old(replayed));
  EXPECT_EQ(core_.sessions().size(), 2u);
  std::vector<Sent> later;
  for (int i = 0; i < kTickHz * 2 + 2; ++i) {
    for (Sent& s : advance(kStep)) later.push_back(std::move(s));
    receive(endpoint(1), wire::build_ping(fbb_, 0));
  }
  EXPECT_FALSE(told_old(later));
  ASSERT_EQ(core_.sessions().size(), 1u);
  EXPECT_EQ(core_.sessions().sessions()[0].endpoint, endpoint(1));
  // The real player reconnecting from elsewhere: accepted, and it replaces the old session when its
  // first sealed datagram arrives.
  const auto sent = connect_with(endpoint(2), security::seal_token(key_, claims));
  EXPECT_FALSE(told_old(sent));
  EXPECT_TRUE(std::any_of(sent.begin(), sent.end(),
                          [&](const Sent& s) { return s.to == endpoint(2) && s.type() == Message::ConnectAccepted; }));
  EXPECT_TRUE(told_old(receive(endpoint(2), wire::build_ping(fbb_, 0))));
  ASSERT_EQ(core_.sessions().size(), 1u);
  EXPECT_EQ(core_.sessions().sessions()[0].endpoint, endpoint(2));
}

// --- Exactly-once requests ---------------------------------------------------------------------

TEST_F(CoreTest, ADuplicateRequestIsAnsweredAgainButAppliedOnce) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs ball;
  ball.position = {0, 5, 0};
  const Bytes request = copy(wire::build_create_object(fbb_, next_id(a), ball));
  const auto first = apply_in_one_step(a, {request});
  const auto r1 = results(first);
  ASSERT_EQ(r1.size(), 1u);
  ASSERT_EQ(r1[0]->code(), ResultCode::Ok);
  EXPECT_EQ(core_.world().object_count(), 2u);

  // The answer was "lost": the client resends; the stored answer comes back at once.
  const auto again = receive(a, request);
  const auto r2 = results(again);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0]->request_id(), r1[0]->request_id());
  EXPECT_EQ(r2[0]->id(), r1[0]->id());
  advance(kStep);
  EXPECT_EQ(core_.world().object_count(), 2u);  // not created twice
  EXPECT_EQ(stats_.requests_duplicate.load(), 1u);
  // A duplicate still waiting in the queue is ignored (its answer is coming).
  const Bytes second = copy(wire::build_create_object(fbb_, next_id(a), ball));
  EXPECT_TRUE(receive(a, second).empty());
  EXPECT_TRUE(receive(a, second).empty());
  EXPECT_EQ(core_.queued_requests(), 1u);
}

TEST_F(CoreTest, RequestsAreAppliedInTheirSequenceOrderWhateverTheArrivalOrder) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs first, second;
  first.position = {-3, 5, 0};
  second.position = {3, 5, 0};
  const Bytes r1 = copy(wire::build_create_object(fbb_, next_id(a), first));
  const Bytes r2 = copy(wire::build_create_object(fbb_, next_id(a), second));
  EXPECT_TRUE(receive(a, r2).empty());  // ahead of a gap: held
  EXPECT_EQ(core_.queued_requests(), 0u);
  EXPECT_TRUE(receive(a, r1).empty());  // fills the gap: both admitted, in order
  EXPECT_EQ(core_.queued_requests(), 2u);
  const auto sent = advance(kStep);
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]->request_id(), 1u);
  EXPECT_EQ(r[1]->request_id(), 2u);
  const auto a_body = core_.world().get_object(from_wire(r[0]->id()));
  ASSERT_TRUE(a_body.has_value());
  EXPECT_LT(a_body->position.x, 0.0f);  // request 1 made the first object
}

TEST_F(CoreTest, RequestIdsOutsideTheWindowAreRefusedOrDropped) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  // Far ahead: dropped without an answer (the client never has that many in flight).
  EXPECT_TRUE(receive(a, wire::build_set_interest(fbb_, kRequestWindow + 5, wire::InterestArgs{})).empty());
  EXPECT_EQ(core_.rejects().count(RejectReason::RequestTooFarAhead), 1u);
  // SetInterest is answered at admission: 300 of them move the window past id 1.
  for (int i = 0; i < 300; ++i) {
    const auto r = receive(a, wire::build_set_interest(fbb_, next_id(a), wire::InterestArgs{}));
    ASSERT_EQ(results(r).size(), 1u);
  }
  const auto old = receive(a, wire::build_set_interest(fbb_, 1, wire::InterestArgs{}));
  const auto r = results(old);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::RequestTooOld);
  // Id 0 is never a valid sequence.
  const auto zero = receive(a, wire::build_set_interest(fbb_, 0, wire::InterestArgs{}));
  const auto zero_results = results(zero);
  ASSERT_EQ(zero_results.size(), 1u);
  EXPECT_EQ(zero_results[0]->code(), ResultCode::InvalidArgument);
}

TEST_F(CoreTest, UnsequencedPushesAreAppliedAtTheNextTickAndNeverAnswered) {
  const Endpoint a = endpoint(1), b = endpoint(2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  wire::CreateObjectArgs ball;  // 1 kg
  ball.position = {0, 5, 0};
  const ObjectID mine = create(a, ball);
  ASSERT_FALSE(mine.is_null());
  const float vy = core_.world().get_object(mine)->velocity.y;

  // Request id 0 on a push: queued for the next tick, applied once, no RequestResult.
  const auto sent = apply_in_one_step(a, {copy(wire::build_apply_impulse(fbb_, 0, mine, {0, 10, 0}))});
  EXPECT_TRUE(results(sent).empty());
  EXPECT_NEAR(core_.world().get_object(mine)->velocity.y, vy + 10.0f - 9.81f / kTickHz, 1e-4f);
  EXPECT_EQ(stats_.requests_unsequenced.load(), 1u);

  // Refusals are counted and logged, never answered: a NaN impulse at once, another client's push at
  // apply time (it does not move the body).
  const uint64_t rejected = stats_.requests_rejected.load();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(receive(a, wire::build_apply_impulse(fbb_, 0, mine, {nan, 0, 0})).empty());
  EXPECT_EQ(core_.queued_requests(), 0u);
  const float vy2 = core_.world().get_object(mine)->velocity.y;
  const auto pushed = apply_in_one_step(b, {copy(wire::build_apply_impulse(fbb_, 0, mine, {0, 100, 0}))});
  EXPECT_TRUE(results(pushed).empty());
  EXPECT_NEAR(core_.world().get_object(mine)->velocity.y, vy2 - 9.81f / kTickHz, 1e-4f);
  EXPECT_EQ(stats_.requests_rejected.load(), rejected + 2);
  EXPECT_EQ(core_.rejects().count(RejectReason::NotOwner), 1u);

  // Destroy is never unsequenced, and the sequenced window is untouched: a's next id is 2.
  const auto destroy = receive(a, wire::build_destroy_object(fbb_, 0, mine));
  const auto refused = results(destroy);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0]->code(), ResultCode::InvalidArgument);
  const auto own_sent = apply_in_one_step(a, {copy(wire::build_destroy_object(fbb_, next_id(a), mine))});
  const auto own = results(own_sent);
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0]->request_id(), 2u);
  EXPECT_EQ(own[0]->code(), ResultCode::Ok);
}

// --- Ownership, quotas and rate limits ------------------------------------------------------------

TEST_F(CoreTest, AClientCannotDestroyOrPushAnotherClientsObject) {
  const Endpoint a = endpoint(1), b = endpoint(2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  wire::CreateObjectArgs ball;
  ball.position = {0, 5, 0};
  const ObjectID mine = create(a, ball);
  ball.position = {5, 5, 0};
  ball.shared = true;
  const ObjectID common = create(a, ball);
  ASSERT_FALSE(mine.is_null());
  const Vec3 v_before = core_.world().get_object(mine)->velocity;

  const auto sent = apply_in_one_step(b, {copy(wire::build_destroy_object(fbb_, next_id(b), mine)),
                                          copy(wire::build_apply_impulse(fbb_, next_id(b), mine, {0, 100, 0})),
                                          copy(wire::build_apply_impulse(fbb_, next_id(b), common, {0, 10, 0}))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]->code(), ResultCode::NotOwner);
  EXPECT_NE(r[0]->message()->str().find("another client"), std::string::npos);
  EXPECT_EQ(r[1]->code(), ResultCode::NotOwner);
  EXPECT_EQ(r[2]->code(), ResultCode::Ok);  // shared
  ASSERT_TRUE(core_.world().is_valid(mine));
  // One step of gravity, and nothing from B's impulse.
  EXPECT_NEAR(core_.world().get_object(mine)->velocity.y, v_before.y - 9.81f / kTickHz, 1e-4f);
  EXPECT_EQ(core_.owner_of(mine), 1u);
  EXPECT_EQ(core_.rejects().count(RejectReason::NotOwner), 2u);
  // A's own destroy works.
  const auto own_sent = apply_in_one_step(a, {copy(wire::build_destroy_object(fbb_, next_id(a), mine))});
  const auto own = results(own_sent);
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0]->code(), ResultCode::Ok);
}

class AnyAuthorityTest : public CoreTest {
 protected:
  static ServerConfig any_config() {
    ServerConfig c = test_config();
    c.authority = "any";
    return c;
  }
  AnyAuthorityTest() : CoreTest(any_config()) {}
};

TEST_F(AnyAuthorityTest, WithAuthorityAnyEveryClientMayTouchEveryObject) {
  const Endpoint a = endpoint(1), b = endpoint(2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  wire::CreateObjectArgs ball;
  const ObjectID mine = create(a, ball);
  const auto sent = apply_in_one_step(b, {copy(wire::build_destroy_object(fbb_, next_id(b), mine))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::Ok);
}

class QuotaTest : public CoreTest {
 protected:
  static ServerConfig quota_config() {
    ServerConfig c = test_config();
    c.max_objects_per_client = 2;
    c.max_requests_per_second = 50;
    return c;
  }
  QuotaTest() : CoreTest(quota_config()) {}
};

TEST_F(QuotaTest, ObjectQuotaIsPerClientAndFreedByDestroy) {
  // Two IP addresses: anonymous sessions of one address share its quota (test_server_core_budgets).
  const Endpoint a = endpoint(1), b(asio::ip::make_address("127.0.0.2"), 2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  wire::CreateObjectArgs ball;
  const ObjectID first = create(a, ball);
  create(a, ball);
  auto sent = apply_in_one_step(a, {copy(wire::build_create_object(fbb_, next_id(a), ball))});
  auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::QuotaExceeded);
  EXPECT_EQ(core_.live_objects_of(1), 2u);
  EXPECT_FALSE(create(b, ball).is_null());  // B's quota is its own
  sent = apply_in_one_step(a, {copy(wire::build_destroy_object(fbb_, next_id(a), first))});
  r = results(sent);
  ASSERT_EQ(r[0]->code(), ResultCode::Ok);
  EXPECT_FALSE(create(a, ball).is_null());  // room again
}

TEST_F(QuotaTest, AFloodingClientIsRateLimitedAndOthersKeepTheirSnapshots) {
  const Endpoint flood = endpoint(1), calm = endpoint(2);
  ASSERT_NE(connect(flood), 0u);
  ASSERT_NE(connect(calm), 0u);
  size_t limited = 0, calm_snapshots = 0;
  for (int tick = 0; tick < kTickHz; ++tick) {  // one second; 30 Hz snapshots
    for (int i = 0; i < 20; ++i) {  // 1200 requests per second against a limit of 50
      const auto sent = receive(flood, wire::build_apply_force(fbb_, next_id(flood), ground_id_, {1, 0, 0}));
      for (const auto* res : results(sent)) limited += res->code() == ResultCode::RateLimited;
    }
    for (const Sent& s : advance(kStep)) calm_snapshots += s.to == calm && s.type() == Message::Snapshot;
  }
  EXPECT_GT(limited, 1000u);
  EXPECT_EQ(calm_snapshots, 30u);
  EXPECT_GT(core_.rejects().count(RejectReason::RateLimited), 1000u);
}

// --- Reliable events and areas of interest --------------------------------------------------------

TEST_F(CoreTest, CollisionEventsAreResentUntilAckedAndCarryASequence) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs ball;
  ball.position = {0, 1.0f, 0};
  receive(a, wire::build_create_object(fbb_, next_id(a), ball));
  // Run until the landing event is sent, without acking anything.
  uint32_t event_sequence = 0, carried_in = 0;
  for (int i = 0; i < 2 * kTickHz && event_sequence == 0; ++i) {
    for (const Sent& s : advance(kStep)) {
      if (const std::vector<wire::CollisionEvent> events = events_of(s); !events.empty()) {
        event_sequence = events[0].sequence();
        carried_in = wire::header_of(*s.envelope()).sequence();
      }
    }
  }
  ASSERT_EQ(event_sequence, 1u);
  // Unacked: it comes again after the resend interval, with the same event sequence.
  uint32_t resent_in = 0;
  for (int i = 0; i < 10 && resent_in == 0; ++i) {
    for (const Sent& s : advance(kStep)) {
      if (const std::vector<wire::CollisionEvent> events = events_of(s); !events.empty()) {
        EXPECT_EQ(events[0].sequence(), event_sequence);
        resent_in = wire::header_of(*s.envelope()).sequence();
      }
    }
  }
  ASSERT_NE(resent_in, 0u);
  EXPECT_GT(resent_in, carried_in);
  // The client acks the first copy: no more resends.
  receive(a, stamped(wire::build_ping(fbb_, 1), 1, carried_in));
  for (int i = 0; i < kTickHz; ++i) {
    for (const Sent& s : advance(kStep)) EXPECT_NE(s.type(), Message::CollisionEvents) << "resent after its ack";
  }
}

// A crowd's collision burst: 600 spheres land on the ground in one step. One update queues at most
// 512 new events for a session (server_core.cpp, kMaxNewEventsPerSession); the rest are counted
// and never numbered, so the client's sequence has no gap, and every queued event arrives.
TEST_F(CoreTest, ABurstOfEventsIsQueuedUpToTheSessionCapWithoutAGap) {
  auto_ack_ = true;
  std::vector<physics::BodyDesc> crowd;
  for (int i = 0; i < 600; ++i) {
    physics::BodyDesc b;
    b.shape = physics::make_sphere(0.4f);
    b.position = {-36.0f + 1.5f * static_cast<float>(i % 25), 0.45f, -36.0f + 1.5f * static_cast<float>(i / 25)};
    crowd.push_back(b);
  }
  std::string error;
  ASSERT_TRUE(core_.add_bodies(crowd, &error)) << error;
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  std::set<uint32_t> sequences;
  size_t copies = 0;
  for (int i = 0; i < 3 * kTickHz; ++i) {
    for (const Sent& s : advance(kStep)) {
      for (const wire::CollisionEvent& e : events_of(s)) {
        sequences.insert(e.sequence());
        ++copies;
      }
    }
    receive(a, wire::build_ping(fbb_, 0));
  }
  ASSERT_FALSE(sequences.empty());
  EXPECT_EQ(sequences.size(), 512u) << "the landing's 600 Begin events, capped";
  EXPECT_EQ(*sequences.begin(), 1u);
  EXPECT_EQ(*sequences.rbegin(), sequences.size()) << "a gap in the client's sequence";
  EXPECT_GE(copies, sequences.size());
  EXPECT_GE(core_.rejects().count(RejectReason::EventsDropped), 1u) << "the 88 over the cap are counted";
}

TEST_F(CoreTest, SnapshotsHoldOnlyTheAreaOfInterestAndShrinkOnceAcked) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs ball;
  ball.position = {-20, 0.5f, 0};
  const ObjectID west = create(a, ball);
  ball.position = {20, 0.5f, 0};
  const ObjectID east = create(a, ball);
  wire::InterestArgs area;
  area.kind = wire::InterestKind::Sphere;
  area.center = {20, 0, 0};
  area.radius = 5;
  const auto answered = receive(a, wire::build_set_interest(fbb_, next_id(a), area));
  const auto answer = results(answered);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0]->code(), ResultCode::Ok);

  // Ack every snapshot as the client library would: the next datagram's header acks it.
  uint32_t client_sequence = 1;
  size_t last_payload = 0;
  wire::SnapshotReceiver& view = receivers_.at(a.port());
  for (int i = 0; i < 3 * kTickHz; ++i) {
    const auto sent = advance(kStep);
    snapshot_row(sent, east);
    for (const Sent& s : sent) {
      if (const auto* snap = s.envelope()->message_as_Snapshot()) {
        last_payload = snap->data()->size();
        receive(a, stamped(wire::build_ping(fbb_, 9), ++client_sequence, wire::header_of(*s.envelope()).sequence()));
      }
    }
  }
  EXPECT_NE(view.find(east), nullptr);
  EXPECT_EQ(view.find(west), nullptr);
  EXPECT_EQ(view.find(ground_id_), nullptr);  // its centre is 20 m away
  EXPECT_LT(last_payload, 16u) << "an acked world at rest should cost almost nothing";

  // Back to everything: the others enter.
  receive(a, wire::build_set_interest(fbb_, next_id(a), wire::InterestArgs{}));
  for (int i = 0; i < 4; ++i) snapshot_row(advance(kStep), east);
  EXPECT_NE(view.find(west), nullptr);
  EXPECT_NE(view.find(ground_id_), nullptr);
}


// --- Threads ----------------------------------------------------------------------------------

// A core with `threads` worker threads, driven by hand through one scripted session of many
// clients (TestBody is not used: two of these run side by side in one test).
class ThreadedCore : public CoreTest {
 public:
  explicit ThreadedCore(int threads) : CoreTest(config_for(threads)) {}
  void TestBody() override {}

  static ServerConfig config_for(int threads) {
    ServerConfig c = test_config();
    c.max_clients = 16;
    c.threads = threads;
    return c;
  }

  struct Run {
    std::vector<Bytes> snapshots;  // every Snapshot datagram, in send order, with its recipient port first
    std::vector<uint64_t> hashes;  // world_hash after every wake-up
    size_t acks_sent = 0;          // snapshots acked back (so later ones carry deltas)
  };

  // Ten clients each drop twelve balls around their own spot, watch a sphere around it, and ack
  // every snapshot, for 150 wake-ups.
  Run run_script() {
    Run run;
    constexpr int kClients = 10;
    std::vector<Endpoint> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.push_back(endpoint(static_cast<uint16_t>(6000 + c)));
      if (connect(clients.back()) == 0) ADD_FAILURE() << "client " << c << " did not connect";
    }
    for (int c = 0; c < kClients; ++c) {
      const float cx = -18.0f + 4.0f * static_cast<float>(c);
      std::vector<Bytes> requests;
      for (int k = 0; k < 12; ++k) {
        wire::CreateObjectArgs ball;
        ball.position = {cx + 0.3f * static_cast<float>(k % 3), 1.0f + 0.9f * static_cast<float>(k), 0.2f * static_cast<float>(k % 4)};
        ball.velocity = {0.5f * static_cast<float>(k % 3) - 0.5f, 0.0f, 0.0f};
        requests.push_back(copy(wire::build_create_object(fbb_, next_id(clients[c]), ball)));
      }
      wire::InterestArgs area;
      area.kind = wire::InterestKind::Sphere;
      area.center = {cx, 0, 0};
      area.radius = 6;
      requests.push_back(copy(wire::build_set_interest(fbb_, next_id(clients[c]), area)));
      for (const Bytes& r : requests) receive(clients[c], r);
    }
    std::map<uint16_t, uint32_t> client_sequence;
    for (int i = 0; i < 150; ++i) {
      for (const Sent& s : advance(kStep)) {
        const auto* snap = s.envelope()->message_as_Snapshot();
        if (snap == nullptr) continue;
        Bytes tagged{static_cast<uint8_t>(s.to.port() & 0xFF)};
        tagged.insert(tagged.end(), s.bytes.begin(), s.bytes.end());
        run.snapshots.push_back(std::move(tagged));
        receive(s.to, stamped(wire::build_ping(fbb_, 9), ++client_sequence[s.to.port()],
                              wire::header_of(*s.envelope()).sequence()));
        ++run.acks_sent;
      }
      run.hashes.push_back(core_.world().world_hash());
    }
    return run;
  }
};

TEST(ServerThreads, SnapshotsAndTheWorldAreTheSameForAnyThreadCount) {
  ThreadedCore one(1);
  ThreadedCore three(3);
  const ThreadedCore::Run a = one.run_script();
  const ThreadedCore::Run b = three.run_script();
  ASSERT_EQ(a.hashes.size(), b.hashes.size());
  for (size_t i = 0; i < a.hashes.size(); ++i) ASSERT_EQ(a.hashes[i], b.hashes[i]) << "wake-up " << i;
  ASSERT_EQ(a.snapshots.size(), b.snapshots.size());
  for (size_t i = 0; i < a.snapshots.size(); ++i) ASSERT_EQ(a.snapshots[i], b.snapshots[i]) << "snapshot datagram " << i;
  // Every client got snapshots at 30 Hz for 2.5 s, and they were acked (deltas in play).
  EXPECT_GE(a.snapshots.size(), 10u * 70u);
  EXPECT_EQ(a.acks_sent, a.snapshots.size());
}

}  // namespace
}  // namespace impulse::server
