// Hostile and invalid input against a real server over loopback UDP. Raw datagrams come from a
// second "attacker" socket; invalid requests come from the well-behaved client itself. Every case
// checks three things: the bad input got a clear answer (a RequestResult / ConnectRejected with
// the right code, or a counted drop), the world is unchanged, and the good client is still served.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <tuple>

#include "integration/harness.h"

namespace impulse::test {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Bytes to_bytes(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

/// A Connect with an arbitrary envelope version, field version and name (bypasses the codec's
/// builders, which would truncate the name and always write kProtocolVersion in the envelope).
Bytes make_connect(uint16_t envelope_version, uint16_t field_version, const std::string& name) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto name_offset = fbb.CreateString(name);
  const auto connect = wire::CreateConnect(fbb, field_version, name_offset);
  wire::FinishEnvelopeBuffer(fbb, wire::CreateEnvelope(fbb, envelope_version, wire::Message::Connect, connect.Union()));
  return Bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.started()) << server.error();
    std::string error;
    ASSERT_TRUE(good.connect(server.port(), &error, "good")) << error;
    ASSERT_NE(good.wait_snapshot_after(0), 0u);
    ground = good.snapshots.rbegin()->second.at(0).id;
    // A dynamic body resting on the ground: the target of forces, impulses and velocities.
    target = good.create_ok(make_sphere(0.5f, {0.0f, 0.5f, 0.0f}, 2.0f));
    ASSERT_FALSE(target.is_null());
    ASSERT_TRUE(good.wait_snapshot_where(0, [&](const auto& objects) { return find_in(objects, target); }));
    baseline_ids = {ground, target};
    ASSERT_EQ(server.stats().objects.load(), 2u);
  }

  uint64_t dropped() const { return server.stats().datagrams_dropped.load(); }
  asio::ip::udp::endpoint server_endpoint() const { return RawSocket::server_endpoint(server.port()); }

  /// Sends each datagram from the attacker and waits until the server counted every one as a
  /// drop. Batches keep the burst within the kernel's socket buffer, so nothing is lost before
  /// the server sees it.
  void send_expecting_drops(const std::vector<Bytes>& datagrams) {
    constexpr size_t kBatch = 16;
    for (size_t i = 0; i < datagrams.size(); i += kBatch) {
      const size_t end = std::min(i + kBatch, datagrams.size());
      const uint64_t target_drops = dropped() + (end - i);
      for (size_t j = i; j < end; ++j) attacker.send(datagrams[j], server_endpoint());
      ASSERT_TRUE(good.poll_until([&] { return dropped() >= target_drops; }))
          << "server counted " << (dropped() + (end - i) - target_drops) << " of " << (end - i)
          << " drops in the batch starting at datagram " << i << " (size " << datagrams[i].size() << ")";
      EXPECT_EQ(dropped(), target_drops);
    }
  }

  /// The request got a RequestResult with `code` and a message naming the problem.
  void expect_rejected(uint32_t request_id, wire::ResultCode code, const char* what) {
    SCOPED_TRACE(what);
    ASSERT_NE(request_id, 0u);
    const std::optional<RequestResult> r = good.wait_result(request_id);
    ASSERT_TRUE(r.has_value()) << "no RequestResult";
    EXPECT_EQ(r->code, code) << "got " << wire::EnumNameResultCode(r->code) << ": " << r->message;
    EXPECT_FALSE(r->message.empty());
  }

  /// The world holds exactly the baseline objects, the good client still gets fresh snapshots,
  /// and a fresh request of it succeeds.
  void expect_unchanged_and_serving() {
    const uint64_t last = good.snapshots.rbegin()->first;
    const uint64_t next = good.wait_snapshot_after(last + 1);
    ASSERT_NE(next, 0u) << "the good client stopped receiving snapshots";
    std::set<ObjectID> ids;
    for (const ObjectState& o : good.snapshots[next]) ids.insert(o.id);
    EXPECT_EQ(ids, baseline_ids);
    EXPECT_EQ(server.stats().objects.load(), baseline_ids.size());
    const ObjectState* t = find_in(good.snapshots[next], target);
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(is_finite(t->position) && is_finite(t->velocity));
    EXPECT_LT(length(t->velocity), 0.5f) << "the resting target was pushed";

    const ObjectID probe = good.create_ok(make_sphere(0.25f, {10.0f, 5.0f, 10.0f}));
    ASSERT_FALSE(probe.is_null());
    const std::optional<RequestResult> r = good.wait_result(good.client.destroy(probe));
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->ok()) << r->message;
    EXPECT_TRUE(good.client.connected());
    EXPECT_EQ(good.client.stats().datagrams_dropped, 0u);
    EXPECT_EQ(server.stats().clients.load(), 1u) << "the attacker must not have a session";
  }

  RunningServer server;
  ClientDriver good;
  RawSocket attacker;
  ObjectID ground;
  ObjectID target;
  std::set<ObjectID> baseline_ids;
};

// ---------------------------------------------------------------------- unparseable datagrams

TEST_F(BadInput, RandomBytesAreDroppedAndCounted) {
  std::mt19937 rng(20240607);  // fixed seed: the same bytes every run
  std::uniform_int_distribution<size_t> size(1, wire::kMaxDatagramBytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<Bytes> datagrams;
  for (int i = 0; i < 160; ++i) {
    Bytes d(size(rng));
    for (uint8_t& b : d) b = static_cast<uint8_t>(byte(rng));
    if (i % 2 == 1 && d.size() >= 8) std::copy_n("IMPL", 4, d.begin() + 4);  // reach the Verifier
    datagrams.push_back(std::move(d));
  }
  send_expecting_drops(datagrams);
  expect_unchanged_and_serving();
  EXPECT_EQ(attacker.drain(), 0) << "garbage must get no reply";
}

TEST_F(BadInput, TruncatedDatagramsAreDropped) {
  // Every proper prefix of valid requests, including the empty datagram. Cutting only the
  // trailing alignment padding of a string (< 4 bytes) leaves a valid buffer, which is no
  // truncation: those prefixes are skipped, and nothing else may verify.
  wire::CreateObjectArgs args;
  args.position = {1.0f, 2.0f, 3.0f};
  const Bytes create = to_bytes(wire::build_create_object(attacker.fbb, 1, args));
  const Bytes connect = to_bytes(wire::build_connect(attacker.fbb, "attacker"));
  std::vector<Bytes> datagrams;
  for (const Bytes* full : {&create, &connect}) {
    for (size_t n = 0; n < full->size(); ++n) {
      Bytes prefix(full->begin(), full->begin() + n);
      alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> aligned{};
      std::copy(prefix.begin(), prefix.end(), aligned.begin());
      const wire::Verified v = wire::verify_datagram({aligned.data(), n}, wire::Direction::ClientToServer);
      if (v.reason == wire::DropReason::None) {
        EXPECT_GE(n + 3, full->size()) << "a prefix that cuts real content verified";
        continue;
      }
      datagrams.push_back(std::move(prefix));
    }
  }
  ASSERT_GE(datagrams.size(), create.size() + connect.size() - 6);
  send_expecting_drops(datagrams);
  expect_unchanged_and_serving();
  EXPECT_EQ(attacker.drain(), 0);
}

TEST_F(BadInput, OversizedDatagramsAreDroppedUnread) {
  std::vector<Bytes> datagrams;
  // A structurally valid Connect that is simply too big: it must not open a session.
  datagrams.push_back(make_connect(wire::kProtocolVersion, wire::kProtocolVersion, std::string(1400, 'x')));
  ASSERT_GT(datagrams.back().size(), wire::kMaxDatagramBytes);
  Bytes just_over(wire::kMaxDatagramBytes + 1, 0);
  std::copy_n("IMPL", 4, just_over.begin() + 4);
  datagrams.push_back(just_over);
  datagrams.emplace_back(9000, 0xAB);
  datagrams.emplace_back(60000, 0x00);
  send_expecting_drops(datagrams);
  expect_unchanged_and_serving();
  EXPECT_EQ(attacker.drain(), 0);
}

TEST_F(BadInput, WellFormedButMeaninglessDatagramsAreDropped) {
  std::vector<Bytes> datagrams;
  // A server->client message sent to the server (wrong direction).
  datagrams.push_back(to_bytes(wire::build_connect_accepted(attacker.fbb, 1, 60, 30, 0)));
  datagrams.push_back(to_bytes(wire::build_pong(attacker.fbb, 1, 2)));
  // An envelope with no message, and one with an unknown union type.
  for (const auto type : {wire::Message::NONE, static_cast<wire::Message>(200)}) {
    flatbuffers::FlatBufferBuilder fbb;
    const auto ping = wire::CreatePing(fbb, 5);
    wire::FinishEnvelopeBuffer(
        fbb, wire::CreateEnvelope(fbb, wire::kProtocolVersion, type, type == wire::Message::NONE ? 0 : ping.Union()));
    datagrams.emplace_back(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }
  // A valid request in an envelope of another protocol version (only Connect gets an answer).
  {
    flatbuffers::FlatBufferBuilder fbb;
    const auto ping = wire::CreatePing(fbb, 5);
    wire::FinishEnvelopeBuffer(fbb,
                               wire::CreateEnvelope(fbb, wire::kProtocolVersion + 1, wire::Message::Ping, ping.Union()));
    datagrams.emplace_back(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }
  send_expecting_drops(datagrams);
  expect_unchanged_and_serving();
  EXPECT_EQ(attacker.drain(), 0);
}

// ---------------------------------------------------------------------- sessions

TEST_F(BadInput, WrongProtocolVersionConnectIsRejectedWithVersionMismatch) {
  const std::string name(wire::kMaxClientNameBytes, 'v');  // room for the reply (anti-amplification)
  constexpr uint16_t kOurs = wire::kProtocolVersion;
  constexpr uint16_t kNext = wire::kProtocolVersion + 1;
  // A newer client, a Connect whose field disagrees with its envelope, a version-1 client (no
  // rotation), and garbage.
  for (const auto& [envelope_version, field_version] :
       {std::pair<uint16_t, uint16_t>{kNext, kNext}, {kOurs, kNext}, {1, 1}, {0, 0}}) {
    SCOPED_TRACE(testing::Message() << "envelope v" << envelope_version << ", Connect v" << field_version);
    attacker.send(make_connect(envelope_version, field_version, name), server_endpoint());
    const wire::Envelope* reply = attacker.wait_from_server(wire::Message::ConnectRejected);
    ASSERT_NE(reply, nullptr) << "no ConnectRejected";
    EXPECT_EQ(reply->message_as_ConnectRejected()->reason(), wire::ResultCode::VersionMismatch);
    EXPECT_EQ(server.stats().clients.load(), 1u);
  }
  expect_unchanged_and_serving();
}

TEST_F(BadInput, RequestsFromAnAddressWithoutASessionAreRefused) {
  wire::CreateObjectArgs args;
  args.position = {0.0f, 3.0f, 0.0f};
  attacker.send(wire::build_create_object(attacker.fbb, 77, args), server_endpoint());
  const wire::Envelope* reply = attacker.wait_from_server(wire::Message::RequestResult);
  ASSERT_NE(reply, nullptr) << "no RequestResult for a request without a session";
  EXPECT_EQ(reply->message_as_RequestResult()->request_id(), 77u);
  EXPECT_EQ(reply->message_as_RequestResult()->code(), wire::ResultCode::NotConnected);
  // Nor may a stranger push or destroy someone else's objects.
  attacker.send(wire::build_destroy_object(attacker.fbb, 78, target), server_endpoint());
  attacker.send(wire::build_apply_impulse(attacker.fbb, 79, target, {0.0f, 50.0f, 0.0f}), server_endpoint());
  for (uint32_t id : {78u, 79u}) {
    const wire::Envelope* r = attacker.wait_from_server(wire::Message::RequestResult);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->message_as_RequestResult()->request_id(), id);
    EXPECT_EQ(r->message_as_RequestResult()->code(), wire::ResultCode::NotConnected);
  }
  expect_unchanged_and_serving();
}

// ---------------------------------------------------------------------- parseable, invalid requests

TEST_F(BadInput, UnknownAndStaleIdsAreRejectedWithStaleId) {
  Client& c = good.client;
  expect_rejected(c.destroy(ObjectID{}), wire::ResultCode::StaleId, "null id");
  expect_rejected(c.destroy(ObjectID{999, 1}), wire::ResultCode::StaleId, "index never used");
  expect_rejected(c.apply_force(ObjectID{0xFFFFFFFFu, 0xFFFFFFFFu}, {1, 0, 0}), wire::ResultCode::StaleId,
                  "maximal id");
  expect_rejected(c.set_velocity(ObjectID{target.index, target.generation + 1}, {1, 0, 0}), wire::ResultCode::StaleId,
                  "live slot, wrong generation");
  // An id that was live and was destroyed stays stale.
  const ObjectID gone = good.create_ok(make_sphere(0.5f, {5.0f, 5.0f, 5.0f}));
  ASSERT_FALSE(gone.is_null());
  const std::optional<RequestResult> r = good.wait_result(c.destroy(gone));
  ASSERT_TRUE(r.has_value() && r->ok());
  expect_rejected(c.apply_impulse(gone, {0, 1, 0}), wire::ResultCode::StaleId, "destroyed id");
  expect_rejected(c.destroy(gone), wire::ResultCode::StaleId, "destroyed twice");
  // Forces act on dynamic bodies only.
  expect_rejected(c.apply_force(ground, {0, 100, 0}), wire::ResultCode::NotDynamic, "force on static ground");
  expect_rejected(c.apply_impulse(ground, {0, 100, 0}), wire::ResultCode::NotDynamic, "impulse on static ground");
  expect_unchanged_and_serving();
}

TEST_F(BadInput, NonFiniteNumbersAreRejectedWithInvalidArgument) {
  Client& c = good.client;
  const wire::ResultCode invalid = wire::ResultCode::InvalidArgument;
  ObjectDesc d = make_sphere(0.5f, {0.0f, 5.0f, 0.0f});
  d.position.y = kNaN;
  expect_rejected(c.create_object(d), invalid, "NaN position");
  d = make_sphere(0.5f, {0.0f, 5.0f, 0.0f});
  d.velocity.x = kInf;
  expect_rejected(c.create_object(d), invalid, "Inf velocity");
  expect_rejected(c.create_object(make_sphere(kNaN, {0.0f, 5.0f, 0.0f})), invalid, "NaN radius");
  expect_rejected(c.create_object(make_box({1.0f, kInf, 1.0f}, {0.0f, 5.0f, 0.0f})), invalid, "Inf half extent");
  expect_rejected(c.create_object(make_sphere(0.5f, {0.0f, 5.0f, 0.0f}, kNaN)), invalid, "NaN mass");
  expect_rejected(c.create_object(make_sphere(0.5f, {0.0f, 5.0f, 0.0f}, 1.0f, kNaN)), invalid, "NaN restitution");
  expect_rejected(c.apply_force(target, {kNaN, 0, 0}), invalid, "NaN force");
  expect_rejected(c.apply_force(target, {0, 1, 0}, Vec3{0, kInf, 0}), invalid, "Inf force point");
  expect_rejected(c.apply_impulse(target, {0, -kInf, 0}), invalid, "-Inf impulse");
  expect_rejected(c.apply_impulse(target, {0, 1, 0}, Vec3{kNaN, 0, 0}), invalid, "NaN impulse point");
  expect_rejected(c.set_velocity(target, {0, 0, kNaN}), invalid, "NaN velocity");
  expect_unchanged_and_serving();
}

TEST_F(BadInput, ZeroAndNegativeMassAreRejectedWithInvalidArgument) {
  Client& c = good.client;
  const wire::ResultCode invalid = wire::ResultCode::InvalidArgument;
  for (const float mass : {0.0f, -0.0f, -1.0f, -1e30f, 2e6f, std::numeric_limits<float>::denorm_min() * -1.0f}) {
    SCOPED_TRACE(mass);
    expect_rejected(c.create_object(make_sphere(0.5f, {0.0f, 5.0f, 0.0f}, mass)), invalid, "bad mass");
  }
  expect_rejected(c.create_object(make_sphere(0.5f, {0.0f, 5.0f, 0.0f}, 1.0f, -0.1f)), invalid, "restitution < 0");
  expect_rejected(c.create_object(make_sphere(0.5f, {0.0f, 5.0f, 0.0f}, 1.0f, 1.5f)), invalid, "restitution > 1");
  ObjectDesc unknown_kind = make_sphere(0.5f, {0.0f, 5.0f, 0.0f});
  unknown_kind.kind = static_cast<wire::BodyKind>(7);
  expect_rejected(c.create_object(unknown_kind), invalid, "unknown body kind");
  ObjectDesc unknown_shape = make_sphere(0.5f, {0.0f, 5.0f, 0.0f});
  unknown_shape.shape = static_cast<wire::ShapeKind>(9);
  expect_rejected(c.create_object(unknown_shape), invalid, "unknown shape");
  expect_unchanged_and_serving();
}

TEST_F(BadInput, RotationShapeAndRaycastFieldsAreRangeChecked) {
  Client& c = good.client;
  const wire::ResultCode invalid = wire::ResultCode::InvalidArgument;
  ObjectDesc d = make_box({0.5f, 0.5f, 0.5f}, {0.0f, 5.0f, 0.0f});
  d.orientation = Quat{0, 0, 0, 0};
  expect_rejected(c.create_object(d), invalid, "zero quaternion");
  d.orientation = Quat{0, 0, 0.5f, 0.5f};
  expect_rejected(c.create_object(d), invalid, "non-unit quaternion");
  d.orientation = Quat{kNaN, 0, 0, 1};
  expect_rejected(c.create_object(d), invalid, "NaN quaternion");
  d = make_box({0.5f, 0.5f, 0.5f}, {0.0f, 5.0f, 0.0f});
  d.angular_velocity = {0, 0, 150};
  expect_rejected(c.create_object(d), invalid, "angular velocity out of range");
  d.angular_velocity = {};
  d.angular_damping = -1.0f;
  expect_rejected(c.create_object(d), invalid, "negative angular damping");
  ObjectDesc plane;
  plane.shape = wire::ShapeKind::Plane;  // kind Dynamic: refused
  expect_rejected(c.create_object(plane), invalid, "dynamic plane");
  ObjectDesc capsule = make_box({0.25f, -0.5f, 0.0f}, {0.0f, 5.0f, 0.0f});
  capsule.shape = wire::ShapeKind::Capsule;
  expect_rejected(c.create_object(capsule), invalid, "negative capsule half height");
  expect_rejected(c.apply_torque(target, {0, kNaN, 0}), invalid, "NaN torque");
  expect_rejected(c.apply_torque(target, {0, 2e9f, 0}), invalid, "torque out of range");
  expect_rejected(c.apply_torque(ground, {0, 1, 0}), wire::ResultCode::NotDynamic, "torque on static ground");
  expect_rejected(c.set_angular_velocity(target, {kInf, 0, 0}), invalid, "Inf angular velocity");
  expect_rejected(c.set_angular_velocity(ground, {0, 1, 0}), wire::ResultCode::NotDynamic, "spin on static ground");
  for (const auto& [origin, translation, what] :
       {std::tuple{Vec3{0, 5, 0}, Vec3{0, 0, 0}, "zero-length ray"}, std::tuple{Vec3{0, 5, 0}, Vec3{0, -3000, 0}, "long ray"},
        std::tuple{Vec3{kNaN, 5, 0}, Vec3{0, -1, 0}, "NaN origin"}}) {
    SCOPED_TRACE(what);
    const std::optional<ClientDriver::Raycast> r = good.wait_raycast(c.raycast(origin, translation, true));
    ASSERT_TRUE(r.has_value()) << "no RaycastResult";
    EXPECT_EQ(r->result.code, invalid);
    EXPECT_FALSE(r->result.message.empty());
    EXPECT_TRUE(r->hits.empty());
  }
  // A stranger's raycast is refused in kind (and no larger than its request).
  const auto request = to_bytes(wire::build_raycast(attacker.fbb, 80, {0, 5, 0}, {0, -10, 0}, true));
  attacker.send(request, server_endpoint());
  const wire::Envelope* reply = attacker.wait_from_server(wire::Message::RaycastResult);
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->message_as_RaycastResult()->request_id(), 80u);
  EXPECT_EQ(reply->message_as_RaycastResult()->code(), wire::ResultCode::NotConnected);
  expect_unchanged_and_serving();
}

TEST_F(BadInput, AbsurdSizesAndMagnitudesAreRejectedWithInvalidArgument) {
  Client& c = good.client;
  const wire::ResultCode invalid = wire::ResultCode::InvalidArgument;
  expect_rejected(c.create_object(make_sphere(0.0f, {0.0f, 5.0f, 0.0f})), invalid, "zero radius");
  expect_rejected(c.create_object(make_sphere(-1.0f, {0.0f, 5.0f, 0.0f})), invalid, "negative radius");
  expect_rejected(c.create_object(make_sphere(1e9f, {0.0f, 5.0f, 0.0f})), invalid, "planet-sized radius");
  expect_rejected(c.create_object(make_box({1.0f, 0.0f, 1.0f}, {0.0f, 5.0f, 0.0f})), invalid, "flat box");
  expect_rejected(c.create_object(make_box({2000.0f, 1.0f, 1.0f}, {0.0f, 5.0f, 0.0f})), invalid, "huge box");
  expect_rejected(c.create_object(make_sphere(0.5f, {1e6f, 5.0f, 0.0f})), invalid, "position out of range");
  ObjectDesc fast = make_sphere(0.5f, {0.0f, 5.0f, 0.0f});
  fast.velocity = {0.0f, 0.0f, -1e5f};
  expect_rejected(c.create_object(fast), invalid, "velocity out of range");
  expect_rejected(c.apply_force(target, {1e10f, 0, 0}), invalid, "force out of range");
  expect_rejected(c.apply_impulse(target, {0, 1e8f, 0}), invalid, "impulse out of range");
  expect_rejected(c.set_velocity(target, {2e4f, 0, 0}), invalid, "velocity out of range");
  expect_unchanged_and_serving();
}

}  // namespace
}  // namespace impulse::test
