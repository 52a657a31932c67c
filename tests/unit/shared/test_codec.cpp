// Wire codec (protocol version 4): hostile and malformed datagrams are rejected with the right
// DropReason, every check_request bound is enforced, every builder round-trips, the packet header
// is stamped in place, a Connect is never smaller than the largest Challenge, and snapshot,
// collision-event and raycast datagrams never exceed the 1200-byte limit with tight capacities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "shared/wire/codec.h"
#include "shared/wire/event_codec.h"
#include "tests/support/rng.h"

namespace impulse::wire {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using ::impulse::test::Rng;

/// A datagram copied into heap storage (operator new aligns to 16 >= kDatagramAlignment).
using Bytes = std::vector<uint8_t>;
Bytes copy(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

Verified verify(const Bytes& b, Direction d) { return verify_datagram(b, d); }

/// `n` bytes counting up from `first` (a recognisable cookie, token or payload).
Bytes counting_bytes(size_t n, uint8_t first = 1) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(first + i);
  return b;
}

/// The quantisation the server announces by default (the snapshot codec's defaults).
QuantizationArgs default_quantization() {
  return QuantizationArgs{1024.0f, 9, 10, 64.0f, 7, 32.0f, 7};
}

/// An accepted session's details with every field non-default.
AcceptedArgs sample_accepted() {
  AcceptedArgs a;
  a.client_id = 12;
  a.tick_hz = 60;
  a.snapshot_hz = 30;
  a.tick = 1ull << 40;
  a.quantization = default_quantization();
  a.max_objects = 500;
  a.first_request_id = 1;
  return a;
}

InterestArgs sphere_interest(impulse::Vec3 center, float radius) {
  InterestArgs a;
  a.kind = InterestKind::Sphere;
  a.center = center;
  a.radius = radius;
  return a;
}

InterestArgs box_interest(impulse::Vec3 lo, impulse::Vec3 hi) {
  InterestArgs a;
  a.kind = InterestKind::Box;
  a.min = lo;
  a.max = hi;
  return a;
}

/// One valid datagram of every client -> server message type (Connect in each of its forms).
std::vector<Bytes> client_datagrams() {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<Bytes> out;
  out.push_back(copy(build_connect(fbb, "tester")));
  out.push_back(copy(build_connect(fbb, "tester", counting_bytes(kMaxCookieBytes), counting_bytes(100, 7))));
  out.push_back(copy(build_create_object(fbb, 7, CreateObjectArgs{})));
  out.push_back(copy(build_destroy_object(fbb, 8, ObjectID{3, 2})));
  out.push_back(copy(build_apply_force(fbb, 9, ObjectID{1, 1}, {1, 2, 3}, impulse::Vec3{4, 5, 6})));
  out.push_back(copy(build_apply_impulse(fbb, 10, ObjectID{1, 1}, {1, 2, 3})));
  out.push_back(copy(build_set_velocity(fbb, 11, ObjectID{1, 1}, {1, 2, 3})));
  out.push_back(copy(build_apply_torque(fbb, 13, ObjectID{1, 1}, {1, 2, 3})));
  out.push_back(copy(build_set_angular_velocity(fbb, 14, ObjectID{1, 1}, {1, 2, 3})));
  out.push_back(copy(build_set_filter(fbb, 18, ObjectID{1, 1}, 2, 0xFFu, -3)));
  out.push_back(copy(build_move_kinematic(fbb, 19, ObjectID{1, 1}, {1, 2, 3}, impulse::Quat{0, 0.6f, 0, 0.8f})));
  CreateJointArgs joint;
  joint.kind = JointKind::Distance;
  joint.body_a = ObjectID{1, 1};
  joint.anchor = {0, 1, 0};
  joint.anchor_b = impulse::Vec3{0, 3, 0};
  joint.spring_hertz = 4.0f;
  out.push_back(copy(build_create_joint(fbb, 20, joint)));
  out.push_back(copy(build_destroy_joint(fbb, 21, ObjectID{0, 1})));
  out.push_back(copy(build_set_joint_motor(fbb, 22, ObjectID{0, 1}, {JointMotorMode::Velocity, 1.0f, 0.0f, 10.0f})));
  out.push_back(copy(build_raycast(fbb, 20, {0, 10, 0}, {0, -20, 0}, false, std::nullopt, /*back_faces=*/true)));
  out.push_back(copy(build_raycast(fbb, 15, {0, 10, 0}, {0, -20, 0}, true)));
  out.push_back(copy(build_set_interest(fbb, 16, sphere_interest({1, 2, 3}, 40.0f))));
  out.push_back(copy(build_set_interest(fbb, 17, box_interest({-5, 0, -5}, {5, 10, 5}))));
  const std::vector<InputFrame> frames(3, InputFrame(Vec3(1, 2, 3), Vec3(0, 1, 0)));
  out.push_back(copy(build_input(fbb, ObjectID{1, 1}, InputMode::Force, 40, frames)));
  out.push_back(copy(build_set_state(fbb, 24, ObjectID{1, 1}, {1, 2, 3}, impulse::Quat{0, 0.6f, 0, 0.8f}, {1, 0, 0},
                                     {0, 1, 0})));
  out.push_back(copy(build_raycast(fbb, 23, {0, 10, 0}, {0, -20, 0}, false, std::nullopt, false, 35, 0.5f)));
  out.push_back(copy(build_ping(fbb, 12)));
  out.push_back(copy(build_disconnect(fbb, "bye")));
  return out;
}

/// One valid datagram of every server -> client message type.
std::vector<Bytes> server_datagrams() {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<Bytes> out;
  out.push_back(copy(build_challenge(fbb, counting_bytes(kMaxCookieBytes))));
  out.push_back(copy(build_connect_accepted(fbb, sample_accepted())));
  out.push_back(copy(build_connect_rejected(fbb, ResultCode::TokenExpired, "token expired")));
  out.push_back(copy(build_request_result(fbb, 5, ResultCode::StaleId, ObjectID{1, 2}, "stale")));
  out.push_back(copy(build_pong(fbb, 77, 1000, 16'666'666)));
  out.push_back(copy(build_disconnect(fbb, "server shutting down")));
  out.push_back(copy(build_snapshot(fbb, 5, counting_bytes(300))));
  std::vector<CollisionEvent> events;
  for (uint32_t i = 1; i <= 3; ++i) {
    events.emplace_back(100 + i, 1, 2, wire::Vec3(0, 0.5f, 0), wire::Vec3(0, 1, 0), i, ContactEventType::Begin);
  }
  out.push_back(copy(build_collision_events(fbb, events, QuantizationConfig{})));
  const std::vector<RayHitEntry> hits(2);
  out.push_back(copy(build_raycast_result(fbb, 16, ResultCode::Ok, 5, hits, false, {})));
  return out;
}

/// Decodes a builder's output as message T (the test fails if it does not verify).
template <class T>
struct Decoded {
  Bytes bytes;
  const T* message = nullptr;
};
template <class T>
Decoded<T> decode(std::span<const uint8_t> built, Direction d) {
  Decoded<T> out{copy(built), nullptr};
  const Verified v = verify_datagram(out.bytes, d);
  EXPECT_EQ(v.reason, DropReason::None);
  if (v.envelope) out.message = v.envelope->template message_as<T>();
  EXPECT_NE(out.message, nullptr);
  return out;
}

// --- verify_datagram --------------------------------------------------------------------------

TEST(VerifyDatagram, AcceptsEveryBuilderInItsDirection) {
  for (const Bytes& b : client_datagrams()) EXPECT_EQ(verify(b, Direction::ClientToServer).reason, DropReason::None);
  for (const Bytes& b : server_datagrams()) EXPECT_EQ(verify(b, Direction::ServerToClient).reason, DropReason::None);
}

TEST(VerifyDatagram, RejectsWrongDirection) {
  for (const Bytes& b : client_datagrams()) {
    const Verified v = verify(b, Direction::ServerToClient);
    const bool is_disconnect = GetEnvelope(b.data())->message_type() == Message::Disconnect;
    EXPECT_EQ(v.reason, is_disconnect ? DropReason::None : DropReason::WrongDirection);  // Disconnect goes both ways
  }
  for (const Bytes& b : server_datagrams()) {
    const Verified v = verify(b, Direction::ClientToServer);
    const bool is_disconnect = GetEnvelope(b.data())->message_type() == Message::Disconnect;
    EXPECT_EQ(v.reason, is_disconnect ? DropReason::None : DropReason::WrongDirection);
    if (!is_disconnect) {
      EXPECT_EQ(v.envelope, nullptr);
    }
  }
}

TEST(VerifyDatagram, RejectsEmptyAndTooShort) {
  for (size_t n = 0; n < 8; ++n) {
    const Bytes b(n, 0);
    EXPECT_EQ(verify(b, Direction::ClientToServer).reason, DropReason::Empty) << n << " bytes";
  }
}

TEST(VerifyDatagram, RejectsOversizedButAcceptsTrailingPaddingUpToTheLimit) {
  flatbuffers::FlatBufferBuilder fbb;
  Bytes b = copy(build_ping(fbb, 1));
  b.resize(kMaxDatagramBytes, 0);  // FlatBuffers ignores bytes after the buffer's objects
  EXPECT_EQ(verify(b, Direction::ClientToServer).reason, DropReason::None);
  b.resize(kMaxDatagramBytes + 1, 0);
  const Verified v = verify(b, Direction::ClientToServer);
  EXPECT_EQ(v.reason, DropReason::Oversized);
  EXPECT_EQ(v.envelope, nullptr);
  b.resize(65000, 0);
  EXPECT_EQ(verify(b, Direction::ClientToServer).reason, DropReason::Oversized);
}

TEST(VerifyDatagram, RejectsWrongIdentifier) {
  for (Bytes b : client_datagrams()) {
    b[4] = 'X';  // "IMPL" lives in bytes 4..7
    const Verified v = verify(b, Direction::ClientToServer);
    EXPECT_EQ(v.reason, DropReason::BadIdentifier);
    EXPECT_EQ(v.envelope, nullptr);
  }
}

TEST(VerifyDatagram, RejectsEveryTruncationThatCutsData) {
  // A prefix may only verify when all it lost is the zero padding FlatBuffers adds after a
  // string's terminator for alignment (< 8 bytes); nothing a reader uses is ever cut off.
  const std::pair<std::vector<Bytes>, Direction> sets[] = {{client_datagrams(), Direction::ClientToServer},
                                                           {server_datagrams(), Direction::ServerToClient}};
  for (const auto& [set, direction] : sets) {
    for (const Bytes& full : set) {
      for (size_t n = 0; n < full.size(); ++n) {
        const Bytes cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
        const Verified v = verify(cut, direction);
        if (v.reason == DropReason::None) {
          EXPECT_LT(full.size() - n, 8u) << "prefix of " << n << " of " << full.size() << " bytes verified";
          for (size_t k = n; k < full.size(); ++k) EXPECT_EQ(full[k], 0) << "a non-padding byte was cut at " << k;
        } else {
          EXPECT_TRUE(v.reason == DropReason::Empty || v.reason == DropReason::VerifyFailed) << to_string(v.reason);
        }
      }
    }
  }
}

TEST(VerifyDatagram, RejectsRandomBytes) {
  Rng rng(1234);
  for (int i = 0; i < 20000; ++i) {
    Bytes b(rng.below(1300));
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng.next());
    // Half of them carry the right identifier so they reach the Verifier.
    if (i % 2 == 0 && b.size() >= 8) std::copy_n("IMPL", 4, b.begin() + 4);
    const Verified v = verify(b, Direction::ClientToServer);
    EXPECT_NE(v.reason, DropReason::None) << "random datagram " << i << " verified";
  }
}

/// Sums every byte of an optional byte vector, so ASan sees each read.
uint32_t touch(const flatbuffers::Vector<uint8_t>* v) {
  uint32_t sum = 0;
  if (v != nullptr) {
    for (const uint8_t b : *v) sum += b;
  }
  return sum;
}

TEST(VerifyDatagram, MutatedDatagramsAreRejectedOrSafeToRead) {
  // Flip bytes of valid datagrams. Whatever verifies must be fully readable (ASan checks reads).
  Rng rng(99);
  const std::pair<std::vector<Bytes>, Direction> sets[] = {{client_datagrams(), Direction::ClientToServer},
                                                           {server_datagrams(), Direction::ServerToClient}};
  for (const auto& [valid, direction] : sets) {
    int verified = 0;
    uint64_t checksum = 0;  // keeps the reads from being optimised away
    for (int i = 0; i < 20000; ++i) {
      Bytes b = valid[rng.below(static_cast<uint32_t>(valid.size()))];
      const uint32_t flips = 1 + rng.below(4);
      for (uint32_t f = 0; f < flips; ++f) b[rng.below(static_cast<uint32_t>(b.size()))] = static_cast<uint8_t>(rng.next());
      const Verified v = verify(b, direction);
      if (v.reason != DropReason::None) continue;
      ++verified;
      const Envelope* e = v.envelope;
      ASSERT_NE(e->message(), nullptr);
      const PacketHeader h = header_of(*e);
      checksum += h.sequence() + h.ack() + h.ack_bits();
      if (const auto* m = e->message_as_CreateObject()) (void)check_request(*m);
      if (const auto* m = e->message_as_ApplyForce()) (void)check_request(*m);
      if (const auto* m = e->message_as_ApplyImpulse()) (void)check_request(*m);
      if (const auto* m = e->message_as_SetVelocity()) (void)check_request(*m);
      if (const auto* m = e->message_as_ApplyTorque()) (void)check_request(*m);
      if (const auto* m = e->message_as_SetAngularVelocity()) (void)check_request(*m);
      if (const auto* m = e->message_as_Raycast()) (void)check_request(*m);
      if (const auto* m = e->message_as_SetInterest()) (void)check_request(*m);
      if (const auto* m = e->message_as_Connect()) {
        (void)check_request(*m);
        if (m->client_name()) {
          EXPECT_LE(m->client_name()->size(), kMaxDatagramBytes);
        }
        checksum += touch(m->cookie()) + touch(m->token()) + touch(m->padding());
      }
      if (const auto* m = e->message_as_Challenge()) checksum += touch(m->cookie());
      if (const auto* m = e->message_as_Snapshot()) checksum += touch(m->data());
      if (const auto* m = e->message_as_CollisionEvents()) {
        if (m->events()) {
          for (const CollisionEvent* ev : *m->events()) checksum += ev->tick() + ev->sequence();
        }
        checksum += touch(m->packed());
      }
      if (const auto* m = e->message_as_RaycastResult(); m && m->hits()) {
        for (const RayHitEntry* hit : *m->hits()) checksum += hit->id();
      }
      if (const auto* m = e->message_as_ConnectAccepted(); m && m->quantization()) {
        checksum += m->quantization()->position_fraction_bits();
      }
      if (const auto* m = e->message_as_Disconnect(); m && m->reason()) {
        EXPECT_LE(m->reason()->size(), kMaxDatagramBytes);
      }
    }
    EXPECT_GT(verified, 0);  // flips in float payloads keep the structure valid
    volatile uint64_t sink = checksum;  // the reads above must happen
    (void)sink;
  }
}

TEST(VerifyDatagram, KeepsTheEnvelopeOnVersionMismatch) {
  flatbuffers::FlatBufferBuilder fbb;
  constexpr uint16_t kOther = kProtocolVersion + 1;
  const auto name = fbb.CreateString("other client");
  const auto connect = CreateConnect(fbb, kOther, name);
  FinishEnvelopeBuffer(fbb, CreateEnvelope(fbb, kOther, Message::Connect, connect.Union()));
  const Bytes b = copy({fbb.GetBufferPointer(), fbb.GetSize()});
  const Verified v = verify(b, Direction::ClientToServer);
  EXPECT_EQ(v.reason, DropReason::VersionMismatch);
  ASSERT_NE(v.envelope, nullptr);
  EXPECT_EQ(v.envelope->protocol_version(), kOther);
  EXPECT_EQ(v.envelope->message_type(), Message::Connect);
}

TEST(VerifyDatagram, RejectsMissingAndUnknownMessages) {
  flatbuffers::FlatBufferBuilder fbb;
  // No union at all.
  FinishEnvelopeBuffer(fbb, CreateEnvelope(fbb, kProtocolVersion, Message::NONE, 0));
  EXPECT_EQ(verify(copy({fbb.GetBufferPointer(), fbb.GetSize()}), Direction::ClientToServer).reason,
            DropReason::NoMessage);
  // A type tag without a table.
  fbb.Clear();
  FinishEnvelopeBuffer(fbb, CreateEnvelope(fbb, kProtocolVersion, Message::Ping, 0));
  EXPECT_EQ(verify(copy({fbb.GetBufferPointer(), fbb.GetSize()}), Direction::ClientToServer).reason,
            DropReason::NoMessage);
  // A type tag from a future schema (the Verifier lets unknown union types through).
  fbb.Clear();
  const auto ping = CreatePing(fbb, 1);
  FinishEnvelopeBuffer(fbb, CreateEnvelope(fbb, kProtocolVersion, static_cast<Message>(200), ping.Union()));
  EXPECT_EQ(verify(copy({fbb.GetBufferPointer(), fbb.GetSize()}), Direction::ClientToServer).reason,
            DropReason::NoMessage);
}

TEST(VerifyDatagram, RejectsAMisalignedBufferWithoutReadingIt) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto built = build_ping(fbb, 1);
  Bytes storage(built.size() + 1);
  std::copy(built.begin(), built.end(), storage.begin() + 1);
  const std::span<const uint8_t> misaligned(storage.data() + 1, built.size());
  EXPECT_EQ(verify_datagram(misaligned, Direction::ClientToServer).reason, DropReason::VerifyFailed);
}

TEST(DropReason, EveryReasonHasAName) {
  std::set<std::string> names;
  for (int r = 0; r < static_cast<int>(DropReason::Count); ++r) names.insert(to_string(static_cast<DropReason>(r)));
  EXPECT_EQ(names.size(), static_cast<size_t>(DropReason::Count));
}

// --- check_request ---------------------------------------------------------------------------

Check check_create(const CreateObjectArgs& args) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto d = decode<CreateObject>(build_create_object(fbb, 1, args), Direction::ClientToServer);
  return d.message ? check_request(*d.message) : Check{ResultCode::Ok, "decode failed"};
}

CreateObjectArgs box_args() {
  CreateObjectArgs a;
  a.shape = ShapeKind::Box;
  a.dims = {0.5f, 1.0f, 2.0f};
  a.position = {1, 2, 3};
  a.velocity = {0, -1, 0};
  a.mass = 2.0f;
  a.restitution = 0.5f;
  a.friction = 0.75f;
  return a;
}

TEST(CheckCreateObject, AcceptsValidValuesAndInclusiveBounds) {
  EXPECT_TRUE(check_create(box_args()).ok());
  CreateObjectArgs a = box_args();
  a.dims = {kMaxExtent, kMaxExtent, kMaxExtent};
  a.position = {kMaxCoordinate, -kMaxCoordinate, 0};
  a.velocity = {0.6f * kMaxSpeed, -0.8f * kMaxSpeed, 0};  // |v| = kMaxSpeed: the bound is the length
  a.mass = kMaxMass;
  a.restitution = 1.0f;
  EXPECT_TRUE(check_create(a).ok()) << check_create(a).message;
  a.restitution = 0.0f;
  EXPECT_TRUE(check_create(a).ok());
  a.friction = kMaxFriction;  // friction bounds [0, 10] are inclusive
  EXPECT_TRUE(check_create(a).ok());
  a.friction = 0.0f;
  EXPECT_TRUE(check_create(a).ok());
}

TEST(CheckCreateObject, SphereChecksOnlyTheRadiusRange) {
  CreateObjectArgs a;
  a.shape = ShapeKind::Sphere;
  a.dims = {0.4f, 0.0f, 0.0f};  // y and z are ignored for a sphere
  EXPECT_TRUE(check_create(a).ok());
  a.dims = {0.0f, 1.0f, 1.0f};
  EXPECT_EQ(check_create(a).code, ResultCode::InvalidArgument);
  a.dims = {0.4f, kNaN, 0.0f};  // ...but must still be finite
  EXPECT_EQ(check_create(a).code, ResultCode::InvalidArgument);
}

TEST(CheckCreateObject, MassIsCheckedForDynamicBodiesOnly) {
  CreateObjectArgs a = box_args();
  for (float bad : {0.0f, -1.0f, 1.0e6f * 1.5f, kNaN, kInf, -kInf}) {
    a.mass = bad;
    const Check c = check_create(a);
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << bad;
    EXPECT_NE(c.message.find("mass"), std::string_view::npos) << c.message;
  }
  a.kind = BodyKind::Static;
  a.mass = 0.0f;
  EXPECT_TRUE(check_create(a).ok());
  a.kind = BodyKind::Kinematic;
  EXPECT_TRUE(check_create(a).ok());
  a.mass = kNaN;  // ignored by the world, still never accepted as NaN
  EXPECT_EQ(check_create(a).code, ResultCode::InvalidArgument);
}

// Below kMinExtent (1 mm) a light body's inertia underflows; 5e-20 m gave a NaN angular velocity
// (issue 16, attack A). Each shape's smallest dimension is refused at the wire, 1 mm accepted.
TEST(CheckCreateObject, ShapesSmallerThanAMillimetreAreRefused) {
  CreateObjectArgs a = box_args();
  a.dims = {1.0f, 5.0e-20f, 1.0f};
  EXPECT_EQ(check_create(a).code, ResultCode::InvalidArgument);
  a.dims = {kMinExtent, kMinExtent, kMinExtent};
  EXPECT_EQ(check_create(a).code, ResultCode::Ok);
  a.shape = ShapeKind::Sphere;
  a.dims = {5.0e-20f, 0.0f, 0.0f};
  EXPECT_EQ(check_create(a).message, "dims.x (radius): must be in [1e-3, 1000] m");
  a.dims = {kMinExtent, 0.0f, 0.0f};
  EXPECT_EQ(check_create(a).code, ResultCode::Ok);
  a.shape = ShapeKind::Capsule;
  a.dims = {5.0e-20f, 1.0f, 0.0f};
  EXPECT_EQ(check_create(a).code, ResultCode::InvalidArgument);
  a.dims = {kMinExtent, 0.0f, 0.0f};
  EXPECT_EQ(check_create(a).code, ResultCode::Ok);
}

// The messages state their bounds from the constants (formatted once, shared/wire/codec.cpp), so a
// changed limit changes its message too; these pin how they read.
TEST(CheckCreateObject, MessagesStateTheBoundsOfTheConstants) {
  CreateObjectArgs a = box_args();
  a.mass = kMaxMass * 2.0f;
  EXPECT_EQ(check_create(a).message, "mass: must be in (0, 1e6] kg for a dynamic body");
  a = box_args();
  a.dims = {kMaxExtent * 2.0f, 1.0f, 1.0f};
  EXPECT_EQ(check_create(a).message, "dims (half extents): each must be in [1e-3, 1000] m");
  a = box_args();
  a.position = {kMaxCoordinate * 2.0f, 0.0f, 0.0f};
  EXPECT_EQ(check_create(a).message, "position: each component must be finite and |x| <= 1e5 m");
  a = box_args();
  a.orientation = impulse::Quat{0.0f, 0.0f, 0.0f, 2.0f};
  EXPECT_EQ(check_create(a).message, "orientation: must be a finite unit quaternion (| |q| - 1 | <= 1e-3)");
  a = box_args();
  a.friction = kMaxFriction + 1.0f;
  EXPECT_EQ(check_create(a).message, "friction: must be finite and in [0, 10]");
}

TEST(CheckCreateObject, RejectsEveryBadFieldNamingIt) {
  struct Case {
    const char* field;
    void (*mutate)(CreateObjectArgs&);
  };
  const Case cases[] = {
      {"dims", [](CreateObjectArgs& a) { a.dims.x = 0.0f; }},
      {"dims", [](CreateObjectArgs& a) { a.dims.y = -0.5f; }},
      {"dims", [](CreateObjectArgs& a) { a.dims.z = 1000.5f; }},
      {"dims", [](CreateObjectArgs& a) { a.dims.x = kNaN; }},
      {"dims", [](CreateObjectArgs& a) { a.dims.y = kInf; }},
      {"dims", [](CreateObjectArgs& a) { a.dims.z = 1.0e30f; }},
      {"position", [](CreateObjectArgs& a) { a.position.x = 100001.0f; }},
      {"position", [](CreateObjectArgs& a) { a.position.y = -100001.0f; }},
      {"position", [](CreateObjectArgs& a) { a.position.z = kNaN; }},
      {"position", [](CreateObjectArgs& a) { a.position.x = -kInf; }},
      {"velocity", [](CreateObjectArgs& a) { a.velocity.x = 10001.0f; }},
      {"velocity", [](CreateObjectArgs& a) { a.velocity.y = kNaN; }},
      {"velocity", [](CreateObjectArgs& a) { a.velocity.z = kInf; }},
      {"restitution", [](CreateObjectArgs& a) { a.restitution = -0.01f; }},
      {"restitution", [](CreateObjectArgs& a) { a.restitution = 1.01f; }},
      {"restitution", [](CreateObjectArgs& a) { a.restitution = kNaN; }},
      {"friction", [](CreateObjectArgs& a) { a.friction = kNaN; }},
      {"friction", [](CreateObjectArgs& a) { a.friction = -0.01f; }},
      {"friction", [](CreateObjectArgs& a) { a.friction = 10.01f; }},
      {"friction", [](CreateObjectArgs& a) { a.friction = kInf; }},
      {"kind", [](CreateObjectArgs& a) { a.kind = static_cast<BodyKind>(7); }},
      {"shape", [](CreateObjectArgs& a) { a.shape = static_cast<ShapeKind>(9); }},
      {"orientation", [](CreateObjectArgs& a) { a.orientation = impulse::Quat{0, 0, 0, 0}; }},
      {"orientation", [](CreateObjectArgs& a) { a.orientation = impulse::Quat{0, 0, 0, 2}; }},
      {"orientation", [](CreateObjectArgs& a) { a.orientation = impulse::Quat{0, 0, 0, 1.0011f}; }},
      {"orientation", [](CreateObjectArgs& a) { a.orientation = impulse::Quat{0, 0.6f, 0, 0.79f}; }},
      {"orientation", [](CreateObjectArgs& a) { a.orientation = impulse::Quat{kNaN, 0, 0, 1}; }},
      {"orientation", [](CreateObjectArgs& a) { a.orientation = impulse::Quat{0, 0, kInf, 1}; }},
      {"angular_velocity", [](CreateObjectArgs& a) { a.angular_velocity.x = 100.5f; }},
      {"angular_velocity", [](CreateObjectArgs& a) { a.angular_velocity.y = -101.0f; }},
      {"angular_velocity", [](CreateObjectArgs& a) { a.angular_velocity.z = kNaN; }},
      {"angular_damping", [](CreateObjectArgs& a) { a.angular_damping = -0.01f; }},
      {"angular_damping", [](CreateObjectArgs& a) { a.angular_damping = 100.5f; }},
      {"angular_damping", [](CreateObjectArgs& a) { a.angular_damping = kNaN; }},
      {"shape", [](CreateObjectArgs& a) { a.shape = ShapeKind::Plane; }},  // a dynamic plane
  };
  for (const Case& c : cases) {
    CreateObjectArgs a = box_args();
    c.mutate(a);
    const Check check = check_create(a);
    EXPECT_EQ(check.code, ResultCode::InvalidArgument) << c.field;
    EXPECT_NE(check.message.find(c.field), std::string_view::npos) << c.field << " vs " << check.message;
  }
}

TEST(CheckCreateObject, OrientationAngularVelocityAndDampingBoundsAreInclusive) {
  CreateObjectArgs a = box_args();
  // | |q| - 1 | <= 1e-3 is accepted (the server normalises), any rotation of unit length too.
  for (const impulse::Quat q : {impulse::Quat{0, 0, 0, 1.0009f}, impulse::Quat{0, 0, 0, 0.9991f},
                                impulse::Quat{0, 0, 0, -1}, impulse::Quat{0.5f, 0.5f, 0.5f, 0.5f},
                                impulse::Quat{0, 0.6f, 0, 0.8f}}) {
    a.orientation = q;
    EXPECT_TRUE(check_create(a).ok()) << q.x << " " << q.y << " " << q.z << " " << q.w << ": " << check_create(a).message;
  }
  a.angular_velocity = {kMaxAngularSpeed, 0, 0};
  EXPECT_TRUE(check_create(a).ok());
  a.angular_velocity = {0.8f * kMaxAngularSpeed, -0.8f * kMaxAngularSpeed, 0};  // each within, the length not
  EXPECT_FALSE(check_create(a).ok());
  a.angular_velocity = {};
  a.angular_damping = 0.0f;
  EXPECT_TRUE(check_create(a).ok());
  a.angular_damping = kMaxAngularDamping;
  EXPECT_TRUE(check_create(a).ok());
}

// Protocol 11: a cylinder's radius and half height are each in [kMinExtent, kMaxExtent].
TEST(CheckCreateObject, CylinderRadiusAndHalfHeightRanges) {
  CreateObjectArgs a = box_args();
  a.shape = ShapeKind::Cylinder;
  a.dims = {0.3f, 0.45f, 0.0f};  // z is ignored
  EXPECT_TRUE(check_create(a).ok()) << check_create(a).message;
  a.dims = {kMinExtent, kMaxExtent, 0.0f};
  EXPECT_TRUE(check_create(a).ok());
  struct Case {
    impulse::Vec3 dims;
    const char* field;
  };
  for (const Case& c : {Case{{0.0f, 0.5f, 0.0f}, "cylinder radius"}, Case{{1000.5f, 0.5f, 0.0f}, "cylinder radius"},
                        Case{{0.3f, 0.0f, 0.0f}, "cylinder half_height"}, Case{{0.3f, -1.0f, 0.0f}, "cylinder half_height"},
                        Case{{0.3f, 1000.5f, 0.0f}, "cylinder half_height"}, Case{{kNaN, 0.5f, 0.0f}, "dims"}}) {
    a.dims = c.dims;
    const Check check = check_create(a);
    EXPECT_EQ(check.code, ResultCode::InvalidArgument) << c.field;
    EXPECT_NE(check.message.find(c.field), std::string_view::npos) << c.field << " vs " << check.message;
  }
}

TEST(CheckCreateObject, CapsuleRadiusAndHalfHeightRanges) {
  CreateObjectArgs a = box_args();
  a.shape = ShapeKind::Capsule;
  a.dims = {0.25f, 0.5f, 0.0f};  // z is ignored for a capsule
  EXPECT_TRUE(check_create(a).ok()) << check_create(a).message;
  a.dims = {kMaxExtent, kMaxExtent, 0.0f};
  EXPECT_TRUE(check_create(a).ok());
  a.dims = {0.25f, 0.0f, 0.0f};  // half height 0 is a sphere-like capsule, allowed
  EXPECT_TRUE(check_create(a).ok());
  struct Case {
    impulse::Vec3 dims;
    const char* field;
  };
  for (const Case& c : {Case{{0.0f, 0.5f, 0.0f}, "radius"}, Case{{-0.1f, 0.5f, 0.0f}, "radius"},
                        Case{{1000.5f, 0.5f, 0.0f}, "radius"}, Case{{0.25f, -0.01f, 0.0f}, "half_height"},
                        Case{{0.25f, 1000.5f, 0.0f}, "half_height"}, Case{{0.25f, kNaN, 0.0f}, "dims"},
                        Case{{0.25f, 0.5f, kInf}, "dims"}}) {
    a.dims = c.dims;
    const Check check = check_create(a);
    EXPECT_EQ(check.code, ResultCode::InvalidArgument) << c.field;
    EXPECT_NE(check.message.find(c.field), std::string_view::npos) << c.field << " vs " << check.message;
  }
}

TEST(CheckCreateObject, PlaneOnlyAsAStaticBodyAndItsDimsAreIgnored) {
  CreateObjectArgs a;
  a.shape = ShapeKind::Plane;
  a.dims = {0.0f, 0.0f, 0.0f};  // ignored
  a.orientation = impulse::quat_from_axis_angle({0, 0, 1}, 0.3f);
  for (const BodyKind kind : {BodyKind::Dynamic, BodyKind::Kinematic}) {
    a.kind = kind;
    const Check c = check_create(a);
    EXPECT_EQ(c.code, ResultCode::InvalidArgument);
    EXPECT_NE(c.message.find("Plane"), std::string_view::npos) << c.message;
  }
  a.kind = BodyKind::Static;
  EXPECT_TRUE(check_create(a).ok()) << check_create(a).message;
  a.dims = {kNaN, 0.0f, 0.0f};  // ignored, but never accepted as NaN
  EXPECT_EQ(check_create(a).code, ResultCode::InvalidArgument);

  // A plane may leave dims out entirely.
  flatbuffers::FlatBufferBuilder fbb;
  const auto m = CreateCreateObject(fbb, 3, BodyKind::Static, ShapeKind::Plane);
  const auto d = decode<CreateObject>(finish(fbb, Message::CreateObject, m.Union()), Direction::ClientToServer);
  ASSERT_NE(d.message, nullptr);
  EXPECT_TRUE(check_request(*d.message).ok());
}

// Protocol 8: a hull is a world asset from the scene; no client creates one, of any body kind.
TEST(CheckCreateObject, AHullIsRefusedWhateverItsKindAndDims) {
  for (const BodyKind kind : {BodyKind::Dynamic, BodyKind::Static, BodyKind::Kinematic}) {
    CreateObjectArgs a = box_args();
    a.kind = kind;
    a.shape = ShapeKind::Hull;
    const Check c = check_create(a);
    EXPECT_EQ(c.code, ResultCode::InvalidArgument);
    EXPECT_NE(c.message.find("Hull"), std::string_view::npos) << c.message;
  }
}

TEST(CheckCreateObject, SensorAndMaterialAreAcceptedForEveryKind) {
  for (const BodyKind kind : {BodyKind::Dynamic, BodyKind::Static, BodyKind::Kinematic}) {
    CreateObjectArgs a = box_args();
    a.kind = kind;
    a.sensor = true;
    a.material = UINT16_MAX;
    EXPECT_TRUE(check_create(a).ok()) << EnumNameBodyKind(kind);
  }
}

TEST(CheckCreateObject, RequiresDimsButDefaultsPositionAndVelocity) {
  flatbuffers::FlatBufferBuilder fbb;
  CreateObjectBuilder b(fbb);
  b.add_request_id(1);
  const auto m = b.Finish();
  const auto without_dims = decode<CreateObject>(finish(fbb, Message::CreateObject, m.Union()), Direction::ClientToServer);
  ASSERT_NE(without_dims.message, nullptr);
  EXPECT_EQ(check_request(*without_dims.message).code, ResultCode::InvalidArgument);

  fbb.Clear();
  const wire::Vec3 dims(0.5f, 0.5f, 0.5f);
  const auto m2 = CreateCreateObject(fbb, 2, BodyKind::Dynamic, ShapeKind::Sphere, &dims);
  const auto only_dims = decode<CreateObject>(finish(fbb, Message::CreateObject, m2.Union()), Direction::ClientToServer);
  ASSERT_NE(only_dims.message, nullptr);
  EXPECT_TRUE(check_request(*only_dims.message).ok());
  // Absent version-2 fields take their documented defaults.
  EXPECT_EQ(only_dims.message->orientation(), nullptr);  // identity
  EXPECT_EQ(only_dims.message->angular_velocity(), nullptr);  // zero
  EXPECT_FALSE(only_dims.message->sensor());
  EXPECT_EQ(only_dims.message->angular_damping(), 0.05f);
  EXPECT_EQ(only_dims.message->material(), 0);
}

TEST(CheckApplyForce, BoundsAndFiniteness) {
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](impulse::Vec3 f, std::optional<impulse::Vec3> p = std::nullopt) {
    const auto d = decode<ApplyForce>(build_apply_force(fbb, 1, ObjectID{1, 1}, f, p), Direction::ClientToServer);
    return check_request(*d.message);
  };
  EXPECT_TRUE(check({kMaxForce, -kMaxForce, 0}).ok());
  EXPECT_TRUE(check({1, 2, 3}, impulse::Vec3{1e6f, 0, 0}).ok());
  for (float bad : {2.0e9f, -2.0e9f, kNaN, kInf}) {
    const Check c = check({0, bad, 0});
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << bad;
    EXPECT_NE(c.message.find("force"), std::string_view::npos);
  }
  const Check p = check({1, 0, 0}, impulse::Vec3{0, kNaN, 0});
  EXPECT_EQ(p.code, ResultCode::InvalidArgument);
  EXPECT_NE(p.message.find("point"), std::string_view::npos);

  fbb.Clear();  // force is required
  const auto m = CreateApplyForce(fbb, 1, 1);
  const auto d = decode<ApplyForce>(finish(fbb, Message::ApplyForce, m.Union()), Direction::ClientToServer);
  EXPECT_EQ(check_request(*d.message).code, ResultCode::InvalidArgument);
}

TEST(CheckApplyImpulse, BoundsAndFiniteness) {
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](impulse::Vec3 j, std::optional<impulse::Vec3> p = std::nullopt) {
    const auto d = decode<ApplyImpulse>(build_apply_impulse(fbb, 1, ObjectID{1, 1}, j, p), Direction::ClientToServer);
    return check_request(*d.message);
  };
  EXPECT_TRUE(check({kMaxImpulse, 0, -kMaxImpulse}).ok());
  for (float bad : {2.0e7f, -2.0e7f, kNaN, -kInf}) {
    const Check c = check({bad, 0, 0});
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << bad;
    EXPECT_NE(c.message.find("impulse"), std::string_view::npos);
  }
  EXPECT_EQ(check({1, 0, 0}, impulse::Vec3{kInf, 0, 0}).code, ResultCode::InvalidArgument);
}

TEST(CheckSetVelocity, BoundsAndFiniteness) {
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](impulse::Vec3 v) {
    const auto d = decode<SetVelocity>(build_set_velocity(fbb, 1, ObjectID{1, 1}, v), Direction::ClientToServer);
    return check_request(*d.message);
  };
  EXPECT_TRUE(check({0.6f * kMaxSpeed, -0.8f * kMaxSpeed, 0}).ok());
  EXPECT_FALSE(check({0.8f * kMaxSpeed, -0.8f * kMaxSpeed, 0}).ok());  // the bound is the length
  for (float bad : {501.0f, -501.0f, kNaN, kInf}) {
    const Check c = check({0, 0, bad});
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << bad;
    EXPECT_NE(c.message.find("velocity"), std::string_view::npos);
  }
}

TEST(CheckApplyTorque, BoundsAndFiniteness) {
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](impulse::Vec3 t) {
    const auto d = decode<ApplyTorque>(build_apply_torque(fbb, 1, ObjectID{1, 1}, t), Direction::ClientToServer);
    return check_request(*d.message);
  };
  EXPECT_TRUE(check({kMaxTorque, -kMaxTorque, 0}).ok());
  for (float bad : {2.0e9f, -2.0e9f, kNaN, kInf}) {
    const Check c = check({0, 0, bad});
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << bad;
    EXPECT_NE(c.message.find("torque"), std::string_view::npos);
  }
  fbb.Clear();  // torque is required
  const auto m = CreateApplyTorque(fbb, 1, 1);
  const auto d = decode<ApplyTorque>(finish(fbb, Message::ApplyTorque, m.Union()), Direction::ClientToServer);
  const Check missing = check_request(*d.message);
  EXPECT_EQ(missing.code, ResultCode::InvalidArgument);
  EXPECT_NE(missing.message.find("torque"), std::string_view::npos);
}

TEST(CheckSetAngularVelocity, BoundsAndFiniteness) {
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](impulse::Vec3 w) {
    const auto d = decode<SetAngularVelocity>(build_set_angular_velocity(fbb, 1, ObjectID{1, 1}, w),
                                              Direction::ClientToServer);
    return check_request(*d.message);
  };
  EXPECT_TRUE(check({0.7f * kMaxAngularSpeed, 0, -0.7f * kMaxAngularSpeed}).ok());
  EXPECT_FALSE(check({0.8f * kMaxAngularSpeed, 0, -0.8f * kMaxAngularSpeed}).ok());  // the length counts
  for (float bad : {47.2f, -48.0f, kNaN, -kInf}) {
    const Check c = check({bad, 0, 0});
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << bad;
    EXPECT_NE(c.message.find("angular_velocity"), std::string_view::npos);
  }
  fbb.Clear();
  const auto m = CreateSetAngularVelocity(fbb, 1, 1);
  const auto d = decode<SetAngularVelocity>(finish(fbb, Message::SetAngularVelocity, m.Union()),
                                            Direction::ClientToServer);
  EXPECT_EQ(check_request(*d.message).code, ResultCode::InvalidArgument);
}

TEST(CheckRaycast, OriginAndTranslationBounds) {
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](impulse::Vec3 origin, impulse::Vec3 translation) {
    const auto d = decode<Raycast>(build_raycast(fbb, 1, origin, translation, false), Direction::ClientToServer);
    return check_request(*d.message);
  };
  EXPECT_TRUE(check({kMaxCoordinate, -kMaxCoordinate, 0}, {0, -kMaxRayLength, 0}).ok());
  EXPECT_TRUE(check({0, 0, 0}, {1e-3f, 0, 0}).ok());
  // 1200^2 + 1600^2 = 2000^2: a diagonal of exactly the maximum length.
  EXPECT_TRUE(check({0, 0, 0}, {1200.0f, -1600.0f, 0}).ok());
  struct Case {
    impulse::Vec3 origin;
    impulse::Vec3 translation;
    const char* field;
  };
  for (const Case& c : {Case{{100001.0f, 0, 0}, {0, -1, 0}, "origin"}, Case{{0, kNaN, 0}, {0, -1, 0}, "origin"},
                        Case{{0, 0, -kInf}, {0, -1, 0}, "origin"}, Case{{0, 0, 0}, {0, 0, 0}, "translation"},
                        Case{{0, 0, 0}, {0, -2000.5f, 0}, "translation"},
                        Case{{0, 0, 0}, {1200.0f, -1601.0f, 0}, "translation"},
                        Case{{0, 0, 0}, {kNaN, -1, 0}, "translation"}, Case{{0, 0, 0}, {0, kInf, 0}, "translation"},
                        Case{{0, 0, 0}, {3.0e38f, 3.0e38f, 0}, "translation"}}) {
    const Check check_result = check(c.origin, c.translation);
    EXPECT_EQ(check_result.code, ResultCode::InvalidArgument) << c.field;
    EXPECT_NE(check_result.message.find(c.field), std::string_view::npos) << check_result.message;
  }
  fbb.Clear();  // both vectors are required
  const wire::Vec3 v(0, -1, 0);
  using Missing = std::tuple<const wire::Vec3*, const wire::Vec3*, const char*>;
  for (const auto& [origin, translation, field] : {Missing{nullptr, &v, "origin"}, Missing{&v, nullptr, "translation"}}) {
    const auto m = CreateRaycast(fbb, 1, origin, translation);
    const auto d = decode<Raycast>(finish(fbb, Message::Raycast, m.Union()), Direction::ClientToServer);
    const Check missing = check_request(*d.message);
    EXPECT_EQ(missing.code, ResultCode::InvalidArgument);
    EXPECT_NE(missing.message.find(field), std::string_view::npos);
  }
}

TEST(CheckConnect, NameLengthAndProtocolVersion) {
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](std::string_view name, uint16_t version = kProtocolVersion) {
    const Bytes kx(kKxPublicBytes, 9);
    const auto d = decode<Connect>(build_connect(fbb, name, {}, {}, kx, version), Direction::ClientToServer);
    return check_request(*d.message);
  };
  {  // protocol 5: the key share is required, exactly 32 bytes
    const Check absent = check_request(*decode<Connect>(build_connect(fbb, "k"), Direction::ClientToServer).message);
    EXPECT_EQ(absent.code, ResultCode::InvalidArgument);
    EXPECT_NE(absent.message.find("kx_public"), std::string_view::npos);
    const Bytes short_kx(31, 9);
    EXPECT_EQ(check_request(*decode<Connect>(build_connect(fbb, "k", {}, {}, short_kx), Direction::ClientToServer).message).code,
              ResultCode::InvalidArgument);
  }
  EXPECT_TRUE(check("").ok());
  EXPECT_TRUE(check(std::string(kMaxClientNameBytes, 'a')).ok());
  const Check long_name = check(std::string(kMaxClientNameBytes + 1, 'a'));
  EXPECT_EQ(long_name.code, ResultCode::InvalidArgument);
  EXPECT_NE(long_name.message.find("client_name"), std::string_view::npos);
  EXPECT_EQ(check("x", kProtocolVersion + 1).code, ResultCode::VersionMismatch);
  EXPECT_EQ(check("x", 2).code, ResultCode::VersionMismatch);  // version 2 clients lack the packet header
  EXPECT_EQ(check("x", 1).code, ResultCode::VersionMismatch);
}

TEST(CheckConnect, CookieAndTokenLengthBounds) {
  // The builder truncates to the bounds, so oversized fields are written by hand, as an attacker would.
  flatbuffers::FlatBufferBuilder fbb;
  auto check = [&](size_t cookie_bytes, size_t token_bytes) {
    fbb.Clear();
    const auto name = fbb.CreateString("raw");
    const Bytes cookie = counting_bytes(cookie_bytes);
    const Bytes token = counting_bytes(token_bytes);
    const auto kx = fbb.CreateVector(counting_bytes(kKxPublicBytes));
    const auto m = CreateConnect(fbb, kProtocolVersion, name, cookie_bytes ? fbb.CreateVector(cookie) : 0,
                                 token_bytes ? fbb.CreateVector(token) : 0, 0, kx);
    const auto d = decode<Connect>(finish(fbb, Message::Connect, m.Union()), Direction::ClientToServer);
    return check_request(*d.message);
  };
  EXPECT_TRUE(check(0, 0).ok());
  EXPECT_TRUE(check(kMaxCookieBytes, kMaxTokenBytes).ok()) << check(kMaxCookieBytes, kMaxTokenBytes).message;
  const Check long_cookie = check(kMaxCookieBytes + 1, 0);
  EXPECT_EQ(long_cookie.code, ResultCode::InvalidArgument);
  EXPECT_NE(long_cookie.message.find("cookie"), std::string_view::npos) << long_cookie.message;
  const Check long_token = check(0, kMaxTokenBytes + 1);
  EXPECT_EQ(long_token.code, ResultCode::TokenInvalid);  // PROTOCOL.md: no valid token is longer
  EXPECT_NE(long_token.message.find("token"), std::string_view::npos) << long_token.message;
}

Check check_interest(const InterestArgs& args) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto d = decode<SetInterest>(build_set_interest(fbb, 1, args), Direction::ClientToServer);
  return d.message ? check_request(*d.message) : Check{ResultCode::Ok, "decode failed"};
}

TEST(CheckSetInterest, AllIsAlwaysValid) {
  EXPECT_TRUE(check_interest(InterestArgs{}).ok());
  InterestArgs all;
  all.center = {kNaN, 0, 0};  // not written for All: the builder sends only the kind
  all.radius = -1.0f;
  EXPECT_TRUE(check_interest(all).ok());
}

TEST(CheckSetInterest, SphereCentreAndRadiusBounds) {
  EXPECT_TRUE(check_interest(sphere_interest({1, 2, 3}, 10.0f)).ok());
  EXPECT_TRUE(check_interest(sphere_interest({kMaxCoordinate, -kMaxCoordinate, 0}, kMaxCoordinate)).ok());
  EXPECT_TRUE(check_interest(sphere_interest({0, 0, 0}, std::numeric_limits<float>::denorm_min())).ok());
  for (const float radius : {0.0f, -0.0f, -1.0f, 100001.0f, kNaN, kInf}) {
    const Check c = check_interest(sphere_interest({0, 0, 0}, radius));
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << radius;
    EXPECT_NE(c.message.find("radius"), std::string_view::npos) << c.message;
  }
  for (const impulse::Vec3 center : {impulse::Vec3{100001.0f, 0, 0}, impulse::Vec3{0, -100001.0f, 0},
                                     impulse::Vec3{0, 0, kNaN}, impulse::Vec3{kInf, 0, 0}}) {
    const Check c = check_interest(sphere_interest(center, 5.0f));
    EXPECT_EQ(c.code, ResultCode::InvalidArgument);
    EXPECT_NE(c.message.find("center"), std::string_view::npos) << c.message;
  }
  // A sphere without its centre, written by hand.
  flatbuffers::FlatBufferBuilder fbb;
  const auto m = CreateSetInterest(fbb, 1, InterestKind::Sphere, nullptr, 5.0f);
  const auto d = decode<SetInterest>(finish(fbb, Message::SetInterest, m.Union()), Direction::ClientToServer);
  const Check missing = check_request(*d.message);
  EXPECT_EQ(missing.code, ResultCode::InvalidArgument);
  EXPECT_NE(missing.message.find("center"), std::string_view::npos) << missing.message;
}

TEST(CheckSetInterest, BoxCornersBoundsAndOrder) {
  EXPECT_TRUE(check_interest(box_interest({-10, 0, -10}, {10, 5, 10})).ok());
  EXPECT_TRUE(check_interest(box_interest({1, 2, 3}, {1, 2, 3})).ok());  // min == max: a point, allowed
  EXPECT_TRUE(check_interest(box_interest({-kMaxCoordinate, -kMaxCoordinate, -kMaxCoordinate},
                                          {kMaxCoordinate, kMaxCoordinate, kMaxCoordinate}))
                  .ok());
  // min > max on any one axis.
  for (int axis = 0; axis < 3; ++axis) {
    impulse::Vec3 lo{0, 0, 0};
    impulse::Vec3 hi{1, 1, 1};
    (axis == 0 ? lo.x : axis == 1 ? lo.y : lo.z) = 2.0f;
    const Check c = check_interest(box_interest(lo, hi));
    EXPECT_EQ(c.code, ResultCode::InvalidArgument) << "axis " << axis;
    EXPECT_NE(c.message.find("min must be <= max"), std::string_view::npos) << c.message;
  }
  for (const auto& [lo, hi] : {std::pair{impulse::Vec3{-100001.0f, 0, 0}, impulse::Vec3{1, 1, 1}},
                               std::pair{impulse::Vec3{0, 0, 0}, impulse::Vec3{1, 100001.0f, 1}},
                               std::pair{impulse::Vec3{0, kNaN, 0}, impulse::Vec3{1, 1, 1}},
                               std::pair{impulse::Vec3{0, 0, 0}, impulse::Vec3{1, 1, kInf}}}) {
    const Check c = check_interest(box_interest(lo, hi));
    EXPECT_EQ(c.code, ResultCode::InvalidArgument);
    EXPECT_NE(c.message.find("min, max"), std::string_view::npos) << c.message;
  }
  // Corners missing, written by hand.
  flatbuffers::FlatBufferBuilder fbb;
  const wire::Vec3 corner(1, 1, 1);
  for (const auto& [lo, hi] : {std::pair<const wire::Vec3*, const wire::Vec3*>{nullptr, &corner},
                               std::pair<const wire::Vec3*, const wire::Vec3*>{&corner, nullptr}}) {
    fbb.Clear();
    const auto m = CreateSetInterest(fbb, 1, InterestKind::Box, nullptr, 0.0f, lo, hi);
    const auto d = decode<SetInterest>(finish(fbb, Message::SetInterest, m.Union()), Direction::ClientToServer);
    EXPECT_EQ(check_request(*d.message).code, ResultCode::InvalidArgument);
  }
}

TEST(CheckSetInterest, UnknownKindIsRejected) {
  flatbuffers::FlatBufferBuilder fbb;
  const wire::Vec3 c(0, 0, 0);
  const auto m = CreateSetInterest(fbb, 1, static_cast<InterestKind>(7), &c, 5.0f, &c, &c);
  const auto d = decode<SetInterest>(finish(fbb, Message::SetInterest, m.Union()), Direction::ClientToServer);
  const Check check = check_request(*d.message);
  EXPECT_EQ(check.code, ResultCode::InvalidArgument);
  EXPECT_NE(check.message.find("kind"), std::string_view::npos) << check.message;
}

// --- Builders round-trip ------------------------------------------------------------------------

TEST(Builders, ClientMessagesRoundTrip) {
  flatbuffers::FlatBufferBuilder fbb;
  {  // the first Connect: no cookie, no token
    const auto d = decode<Connect>(build_connect(fbb, "alice"), Direction::ClientToServer);
    EXPECT_EQ(d.message->protocol_version(), kProtocolVersion);
    EXPECT_EQ(d.message->client_name()->str(), "alice");
    EXPECT_EQ(d.message->cookie(), nullptr);
    EXPECT_EQ(d.message->token(), nullptr);
  }
  {  // the second Connect echoes the cookie and carries a token
    const Bytes cookie = counting_bytes(40, 9);
    const Bytes token = counting_bytes(120, 200);
    const Bytes kx = counting_bytes(kKxPublicBytes, 1);
    const auto d = decode<Connect>(build_connect(fbb, "bob", cookie, token, kx), Direction::ClientToServer);
    ASSERT_NE(d.message->kx_public(), nullptr);
    EXPECT_EQ(Bytes(d.message->kx_public()->begin(), d.message->kx_public()->end()), kx);
    EXPECT_EQ(d.message->client_name()->str(), "bob");
    ASSERT_NE(d.message->cookie(), nullptr);
    EXPECT_EQ(Bytes(d.message->cookie()->begin(), d.message->cookie()->end()), cookie);
    ASSERT_NE(d.message->token(), nullptr);
    EXPECT_EQ(Bytes(d.message->token()->begin(), d.message->token()->end()), token);
    EXPECT_TRUE(check_request(*d.message).ok());
  }
  {  // oversized cookie and token arguments are cut to their bounds, so check_request passes
    const auto d = decode<Connect>(build_connect(fbb, "carol", counting_bytes(kMaxCookieBytes + 10),
                                                 counting_bytes(kMaxTokenBytes + 10), counting_bytes(kKxPublicBytes + 10)),
                                   Direction::ClientToServer);
    EXPECT_EQ(d.message->cookie()->size(), kMaxCookieBytes);
    EXPECT_EQ(d.message->token()->size(), kMaxTokenBytes);
    EXPECT_TRUE(check_request(*d.message).ok());
  }
  for (const InterestArgs& area : {InterestArgs{}, sphere_interest({1, -2, 3}, 25.5f), box_interest({-1, -2, -3}, {4, 5, 6})}) {
    const auto d = decode<SetInterest>(build_set_interest(fbb, 31, area), Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 31u);
    EXPECT_EQ(d.message->kind(), area.kind);
    // Only the fields of the area's kind are written.
    const bool sphere = area.kind == InterestKind::Sphere;
    const bool box = area.kind == InterestKind::Box;
    EXPECT_EQ(d.message->center() != nullptr, sphere);
    EXPECT_EQ(d.message->min() != nullptr, box);
    EXPECT_EQ(d.message->max() != nullptr, box);
    if (sphere) {
      EXPECT_EQ(to_vec3(*d.message->center()), area.center);
      EXPECT_EQ(d.message->radius(), area.radius);
    }
    if (box) {
      EXPECT_EQ(to_vec3(*d.message->min()), area.min);
      EXPECT_EQ(to_vec3(*d.message->max()), area.max);
    }
    EXPECT_TRUE(check_request(*d.message).ok()) << check_request(*d.message).message;
  }
  for (const bool shared : {false, true}) {
    CreateObjectArgs a = box_args();
    a.shared = shared;
    const auto d = decode<CreateObject>(build_create_object(fbb, 44, a), Direction::ClientToServer);
    EXPECT_EQ(d.message->shared(), shared);
  }
  {
    const CreateObjectArgs a = box_args();
    const auto d = decode<CreateObject>(build_create_object(fbb, 42, a), Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 42u);
    EXPECT_EQ(d.message->kind(), a.kind);
    EXPECT_EQ(d.message->shape(), a.shape);
    EXPECT_EQ(to_vec3(*d.message->dims()), a.dims);
    EXPECT_EQ(to_vec3(*d.message->position()), a.position);
    EXPECT_EQ(to_vec3(*d.message->velocity()), a.velocity);
    EXPECT_EQ(d.message->mass(), a.mass);
    EXPECT_EQ(d.message->restitution(), a.restitution);
    EXPECT_EQ(d.message->friction(), a.friction);
  }
  {
    CreateObjectArgs a;
    a.kind = BodyKind::Kinematic;
    a.shape = ShapeKind::Capsule;
    a.dims = {0.25f, 0.75f, 0.0f};
    a.orientation = impulse::Quat{0.0f, 0.6f, 0.0f, 0.8f};
    a.angular_velocity = {1.5f, -2.5f, 3.5f};
    a.angular_damping = 0.25f;
    a.material = 7;
    a.sensor = true;
    const auto d = decode<CreateObject>(build_create_object(fbb, 43, a), Direction::ClientToServer);
    EXPECT_EQ(d.message->shape(), ShapeKind::Capsule);
    EXPECT_EQ(to_vec3(*d.message->dims()), a.dims);
    ASSERT_NE(d.message->orientation(), nullptr);
    EXPECT_EQ(to_quat(*d.message->orientation()), a.orientation);
    ASSERT_NE(d.message->angular_velocity(), nullptr);
    EXPECT_EQ(to_vec3(*d.message->angular_velocity()), a.angular_velocity);
    EXPECT_EQ(d.message->angular_damping(), 0.25f);
    EXPECT_EQ(d.message->material(), 7);
    EXPECT_TRUE(d.message->sensor());
    EXPECT_TRUE(check_request(*d.message).ok());
  }
  {
    const auto d = decode<ApplyTorque>(build_apply_torque(fbb, 7, ObjectID{2, 3}, {0.5f, -1, 2}),
                                       Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 7u);
    EXPECT_EQ(from_wire(d.message->id()), (ObjectID{2, 3}));
    EXPECT_EQ(to_vec3(*d.message->torque()), (impulse::Vec3{0.5f, -1, 2}));
  }
  {
    const auto d = decode<SetAngularVelocity>(build_set_angular_velocity(fbb, 8, ObjectID{4, 5}, {0, 6.5f, 0}),
                                              Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 8u);
    EXPECT_EQ(from_wire(d.message->id()), (ObjectID{4, 5}));
    EXPECT_EQ(to_vec3(*d.message->angular_velocity()), (impulse::Vec3{0, 6.5f, 0}));
  }
  {
    const auto d = decode<SetFilter>(build_set_filter(fbb, 10, ObjectID{4, 5}, 0x8000'0000u, 0x5u, -7),
                                     Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 10u);
    EXPECT_EQ(from_wire(d.message->id()), (ObjectID{4, 5}));
    EXPECT_EQ(d.message->category(), 0x8000'0000u);
    EXPECT_EQ(d.message->mask(), 0x5u);
    EXPECT_EQ(d.message->group(), -7);
    CreateObjectArgs args;
    args.category = 4;
    args.mask = 0xF0u;
    args.group = 9;
    const auto c = decode<CreateObject>(build_create_object(fbb, 11, args), Direction::ClientToServer);
    EXPECT_EQ(c.message->category(), 4u);
    EXPECT_EQ(c.message->mask(), 0xF0u);
    EXPECT_EQ(c.message->group(), 9);
    const auto defaults = decode<CreateObject>(build_create_object(fbb, 12, CreateObjectArgs{}), Direction::ClientToServer);
    EXPECT_EQ(defaults.message->category(), 1u);  // absent fields read as the defaults
    EXPECT_EQ(defaults.message->mask(), 0xFFFF'FFFFu);
    EXPECT_EQ(defaults.message->group(), 0);
  }
  {
    const auto d = decode<MoveKinematic>(
        build_move_kinematic(fbb, 12, ObjectID{4, 5}, {1.5f, -2, 3}, impulse::Quat{0, 0.6f, 0, 0.8f}),
        Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 12u);
    EXPECT_EQ(from_wire(d.message->id()), (ObjectID{4, 5}));
    EXPECT_EQ(to_vec3(*d.message->position()), (impulse::Vec3{1.5f, -2, 3}));
    EXPECT_EQ(to_quat(*d.message->orientation()), (impulse::Quat{0, 0.6f, 0, 0.8f}));
    EXPECT_TRUE(check_request(*d.message).ok());
    const auto far = decode<MoveKinematic>(build_move_kinematic(fbb, 13, ObjectID{4, 5}, {2e5f, 0, 0}, impulse::Quat{}),
                                           Direction::ClientToServer);
    EXPECT_FALSE(check_request(*far.message).ok());
    const auto bad = decode<MoveKinematic>(build_move_kinematic(fbb, 14, ObjectID{4, 5}, {}, impulse::Quat{0, 0, 0, 1.1f}),
                                           Direction::ClientToServer);
    EXPECT_FALSE(check_request(*bad.message).ok());
  }
  for (const bool back_faces : {false, true}) {
    const auto d = decode<Raycast>(build_raycast(fbb, 9, {1, 20, -3}, {0, -30, 0.5f}, false, std::nullopt, back_faces),
                                   Direction::ClientToServer);
    EXPECT_EQ(d.message->back_faces(), back_faces);
  }
  for (const bool all : {false, true}) {
    const auto d = decode<Raycast>(build_raycast(fbb, 9, {1, 20, -3}, {0, -30, 0.5f}, all), Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 9u);
    EXPECT_EQ(to_vec3(*d.message->origin()), (impulse::Vec3{1, 20, -3}));
    EXPECT_EQ(to_vec3(*d.message->translation()), (impulse::Vec3{0, -30, 0.5f}));
    EXPECT_EQ(d.message->all(), all);
  }
  {
    const ObjectID id{0xFFFFFFFFu, 0xFFFFFFFEu};
    const auto d = decode<DestroyObject>(build_destroy_object(fbb, 3, id), Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 3u);
    EXPECT_EQ(from_wire(d.message->id()), id);
  }
  {
    const auto d = decode<ApplyForce>(build_apply_force(fbb, 4, ObjectID{5, 6}, {1, -2, 3}), Direction::ClientToServer);
    EXPECT_EQ(from_wire(d.message->id()), (ObjectID{5, 6}));
    EXPECT_EQ(to_vec3(*d.message->force()), (impulse::Vec3{1, -2, 3}));
    EXPECT_EQ(d.message->point(), nullptr);  // absent = centre of mass
  }
  {
    const auto d = decode<ApplyImpulse>(build_apply_impulse(fbb, 5, ObjectID{1, 1}, {0, 9, 0}, impulse::Vec3{1, 1, 1}),
                                        Direction::ClientToServer);
    EXPECT_EQ(to_vec3(*d.message->impulse()), (impulse::Vec3{0, 9, 0}));
    ASSERT_NE(d.message->point(), nullptr);
    EXPECT_EQ(to_vec3(*d.message->point()), (impulse::Vec3{1, 1, 1}));
  }
  {
    const auto d = decode<SetVelocity>(build_set_velocity(fbb, 6, ObjectID{1, 1}, {7, 8, 9}), Direction::ClientToServer);
    EXPECT_EQ(d.message->request_id(), 6u);
    EXPECT_EQ(to_vec3(*d.message->velocity()), (impulse::Vec3{7, 8, 9}));
  }
  {
    const auto d = decode<Ping>(build_ping(fbb, 0xDEADBEEFCAFEull), Direction::ClientToServer);
    EXPECT_EQ(d.message->nonce(), 0xDEADBEEFCAFEull);
  }
  {
    const auto d = decode<Disconnect>(build_disconnect(fbb, "bye"), Direction::ClientToServer);
    EXPECT_EQ(d.message->reason()->str(), "bye");
  }
}

TEST(Builders, ServerMessagesRoundTrip) {
  flatbuffers::FlatBufferBuilder fbb;
  {
    const AcceptedArgs a = sample_accepted();
    const auto d = decode<ConnectAccepted>(build_connect_accepted(fbb, a), Direction::ServerToClient);
    EXPECT_EQ(d.message->client_id(), 12u);
    EXPECT_EQ(d.message->tick_hz(), 60);
    EXPECT_EQ(d.message->snapshot_hz(), 30);
    EXPECT_EQ(d.message->tick(), 1ull << 40);
    EXPECT_EQ(d.message->max_objects(), 500u);
    EXPECT_EQ(d.message->first_request_id(), 1u);
    const Quantization* q = d.message->quantization();
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->world_bound(), 1024.0f);
    EXPECT_EQ(q->position_fraction_bits(), 9);
    EXPECT_EQ(q->orientation_bits(), 10);
    EXPECT_EQ(q->max_linear_speed(), 64.0f);
    EXPECT_EQ(q->linear_velocity_fraction_bits(), 7);
    EXPECT_EQ(q->max_angular_speed(), 32.0f);
    EXPECT_EQ(q->angular_velocity_fraction_bits(), 7);
  }
  {
    const Bytes cookie = counting_bytes(kMaxCookieBytes, 0x80);
    const auto d = decode<Challenge>(build_challenge(fbb, cookie), Direction::ServerToClient);
    ASSERT_NE(d.message->cookie(), nullptr);
    EXPECT_EQ(Bytes(d.message->cookie()->begin(), d.message->cookie()->end()), cookie);
    // At most kMaxCookieBytes are written.
    const auto cut = decode<Challenge>(build_challenge(fbb, counting_bytes(kMaxCookieBytes + 1)), Direction::ServerToClient);
    EXPECT_EQ(cut.message->cookie()->size(), kMaxCookieBytes);
  }
  {
    const auto d = decode<ConnectRejected>(build_connect_rejected(fbb, ResultCode::ServerFull, "full"),
                                           Direction::ServerToClient);
    EXPECT_EQ(d.message->reason(), ResultCode::ServerFull);
    EXPECT_EQ(d.message->message()->str(), "full");
  }
  for (const ResultCode code : {ResultCode::TokenRequired, ResultCode::TokenInvalid, ResultCode::TokenExpired}) {
    const auto d = decode<ConnectRejected>(build_connect_rejected(fbb, code, {}), Direction::ServerToClient);
    EXPECT_EQ(d.message->reason(), code);
  }
  {
    const auto d = decode<RequestResult>(build_request_result(fbb, 9, ResultCode::Ok, ObjectID{4, 1}, {}),
                                         Direction::ServerToClient);
    EXPECT_EQ(d.message->request_id(), 9u);
    EXPECT_EQ(d.message->code(), ResultCode::Ok);
    EXPECT_EQ(from_wire(d.message->id()), (ObjectID{4, 1}));
    EXPECT_EQ(d.message->message(), nullptr);  // empty on Ok
  }
  for (const ResultCode code : {ResultCode::NotOwner, ResultCode::QuotaExceeded, ResultCode::RateLimited,
                                ResultCode::RequestTooOld}) {
    const auto d = decode<RequestResult>(build_request_result(fbb, 10, code, ObjectID{4, 1}, "refused"),
                                         Direction::ServerToClient);
    EXPECT_EQ(d.message->code(), code);
    EXPECT_EQ(d.message->message()->str(), "refused");
  }
  {
    const auto d = decode<Pong>(build_pong(fbb, 5, 6, 100'000'123ull), Direction::ServerToClient);
    EXPECT_EQ(d.message->nonce(), 5u);
    EXPECT_EQ(d.message->tick(), 6u);
    EXPECT_EQ(d.message->server_time_us(), 100'000'123ull);
  }
  {
    const Bytes payload = counting_bytes(777, 3);
    const auto d = decode<Snapshot>(build_snapshot(fbb, UINT64_MAX - 1, payload), Direction::ServerToClient);
    EXPECT_EQ(d.message->tick(), UINT64_MAX - 1);
    ASSERT_NE(d.message->data(), nullptr);
    EXPECT_EQ(Bytes(d.message->data()->begin(), d.message->data()->end()), payload);
  }
  {  // an empty payload is still a snapshot (the decoder judges it)
    const auto d = decode<Snapshot>(build_snapshot(fbb, 1, {}), Direction::ServerToClient);
    EXPECT_EQ(d.message->tick(), 1u);
    EXPECT_EQ(d.message->data() ? d.message->data()->size() : 0u, 0u);
  }
}

TEST(Builders, RaycastResultRoundTripsHitsAndErrors) {
  flatbuffers::FlatBufferBuilder fbb;
  const std::vector<RayHitEntry> hits{
      RayHitEntry(impulse::to_wire(ObjectID{3, 1}), wire::Vec3(0, 5, 0), wire::Vec3(0, 1, 0), 0.25f),
      RayHitEntry(impulse::to_wire(ObjectID{1, 2}), wire::Vec3(0, 0, 0), wire::Vec3(0, 1, 0), 0.5f)};
  {
    const auto d = decode<RaycastResult>(build_raycast_result(fbb, 21, ResultCode::Ok, 1234, hits, false, "ignored on Ok"),
                                         Direction::ServerToClient);
    EXPECT_EQ(d.message->request_id(), 21u);
    EXPECT_EQ(d.message->code(), ResultCode::Ok);
    EXPECT_EQ(d.message->tick(), 1234u);
    EXPECT_FALSE(d.message->truncated());
    EXPECT_EQ(d.message->message(), nullptr);
    ASSERT_NE(d.message->hits(), nullptr);
    ASSERT_EQ(d.message->hits()->size(), 2u);
    const RayHitEntry* first = d.message->hits()->Get(0);
    EXPECT_EQ(from_wire(first->id()), (ObjectID{3, 1}));
    EXPECT_EQ(to_vec3(first->point()), (impulse::Vec3{0, 5, 0}));
    EXPECT_EQ(to_vec3(first->normal()), (impulse::Vec3{0, 1, 0}));
    EXPECT_EQ(first->fraction(), 0.25f);
    EXPECT_EQ(d.message->hits()->Get(1)->fraction(), 0.5f);
  }
  {  // a miss: no vector at all
    const auto d = decode<RaycastResult>(build_raycast_result(fbb, 22, ResultCode::Ok, 1, {}, false, {}),
                                         Direction::ServerToClient);
    EXPECT_EQ(d.message->hits(), nullptr);
    EXPECT_FALSE(d.message->truncated());
  }
  {  // an error carries its message and never hits
    const auto d = decode<RaycastResult>(
        build_raycast_result(fbb, 23, ResultCode::InvalidArgument, 0, hits, true, "translation: too long"),
        Direction::ServerToClient);
    EXPECT_EQ(d.message->code(), ResultCode::InvalidArgument);
    EXPECT_EQ(d.message->hits(), nullptr);
    EXPECT_FALSE(d.message->truncated());
    ASSERT_NE(d.message->message(), nullptr);
    EXPECT_EQ(d.message->message()->str(), "translation: too long");
  }
}

TEST(Builders, LongStringsAreTruncatedSoTheDatagramFits) {
  flatbuffers::FlatBufferBuilder fbb;
  const std::string huge(5000, 'x');
  EXPECT_LE(build_connect(fbb, huge).size(), kMaxDatagramBytes);
  EXPECT_LE(build_connect(fbb, huge, counting_bytes(5000), counting_bytes(5000)).size(), kMaxDatagramBytes);
  const auto d = decode<Disconnect>(build_disconnect(fbb, huge), Direction::ServerToClient);
  EXPECT_EQ(d.message->reason()->size(), kMaxStringBytes);
  const auto r = decode<RequestResult>(build_request_result(fbb, 1, ResultCode::InvalidArgument, {}, huge),
                                       Direction::ServerToClient);
  EXPECT_EQ(r.message->message()->size(), kMaxStringBytes);
  // Truncation never splits a UTF-8 sequence: 2-byte characters, limit is even -> 128 chars.
  std::string utf8;
  for (int i = 0; i < 300; ++i) utf8 += "\xC3\xA9";  // é
  utf8 = "a" + utf8;                                 // shift so the limit falls mid-character
  const auto u = decode<Disconnect>(build_disconnect(fbb, utf8), Direction::ServerToClient);
  EXPECT_EQ(u.message->reason()->size(), kMaxStringBytes - 1);
}

// --- Handshake sizes (anti-amplification) ------------------------------------------------------

TEST(HandshakeSizes, MinConnectBytesIsTheLargestChallengeOrConnectAccepted) {
  flatbuffers::FlatBufferBuilder fbb;
  const size_t challenge = build_challenge(fbb, counting_bytes(kMaxCookieBytes, 0xFF)).size();
  AcceptedArgs a;  // every field present and at its widest
  a.client_id = UINT32_MAX;
  a.tick_hz = a.snapshot_hz = UINT16_MAX;
  a.tick = a.replay_first_tick = a.replay_last_tick = UINT64_MAX;
  a.quantization = QuantizationArgs{1, 1, 1, 1, 1, 1, 1};
  a.max_objects = a.first_request_id = UINT32_MAX;
  a.replay = a.token_bound = true;
  a.kx_public.fill(0xFF);
  const size_t accepted = build_connect_accepted(fbb, a).size();
  EXPECT_EQ(min_connect_bytes(), std::max(challenge, accepted));
  EXPECT_GT(accepted, challenge) << "protocol 5: the ConnectAccepted with its key share is the larger";
  // A resent Connect is answered by ConnectAccepted: never larger than it.
  EXPECT_LE(build_connect_accepted(fbb, AcceptedArgs{}).size(), min_connect_bytes());
  // No cookie the server could put in a Challenge makes it larger than the minimum Connect.
  for (size_t n = 0; n <= kMaxCookieBytes + 8; ++n) {
    EXPECT_LE(build_challenge(fbb, counting_bytes(n)).size(), min_connect_bytes()) << n << "-byte cookie";
  }
}

TEST(HandshakeSizes, EveryConnectIsPaddedToTheMinimumAndNoFurther) {
  flatbuffers::FlatBufferBuilder fbb;
  const size_t min_bytes = min_connect_bytes();
  size_t max_excess = 0;
  for (size_t name = 0; name <= kMaxClientNameBytes; ++name) {
    for (const size_t cookie : {size_t{0}, size_t{16}, kMaxCookieBytes}) {
      for (const size_t token : {size_t{0}, size_t{32}, kMaxTokenBytes}) {
        SCOPED_TRACE(testing::Message() << "name " << name << ", cookie " << cookie << ", token " << token);
        const Bytes b = copy(build_connect(fbb, std::string(name, 'n'), counting_bytes(cookie), counting_bytes(token),
                                          counting_bytes(kKxPublicBytes)));
        EXPECT_GE(b.size(), min_bytes);
        const Verified v = verify(b, Direction::ClientToServer);
        ASSERT_EQ(v.reason, DropReason::None);
        const Connect* m = v.envelope->message_as_Connect();
        ASSERT_NE(m, nullptr);
        EXPECT_TRUE(check_request(*m).ok());
        if (m->padding() != nullptr) {
          // Padding only when needed, and then only to the minimum plus what the padding field
          // itself costs (its offset, length, vtable slot and alignment).
          EXPECT_LE(b.size(), min_bytes + 16);
          max_excess = std::max(max_excess, b.size() - min_bytes);
          EXPECT_TRUE(std::all_of(m->padding()->begin(), m->padding()->end(), [](uint8_t x) { return x == 0; }));
        }
      }
    }
  }
  EXPECT_GT(max_excess, 0u);  // some combinations did need padding
  // A Connect that is large on its own carries no padding at all.
  const auto big = decode<Connect>(build_connect(fbb, "big", counting_bytes(kMaxCookieBytes), counting_bytes(kMaxTokenBytes)),
                                   Direction::ClientToServer);
  EXPECT_EQ(big.message->padding(), nullptr);
  // An unpadded Connect is smaller than the minimum: the server drops such datagrams unanswered.
  fbb.Clear();
  const auto name = fbb.CreateString("x");
  const auto unpadded = CreateConnect(fbb, kProtocolVersion, name);
  EXPECT_LT(finish(fbb, Message::Connect, unpadded.Union()).size(), min_bytes);
}

// --- Packet header ----------------------------------------------------------------------------

TEST(PacketHeader, EveryBuilderLeavesAZeroHeaderSlot) {
  for (const auto& [set, direction] : {std::pair{client_datagrams(), Direction::ClientToServer},
                                       std::pair{server_datagrams(), Direction::ServerToClient}}) {
    for (const Bytes& b : set) {
      const Verified v = verify(b, direction);
      ASSERT_EQ(v.reason, DropReason::None);
      ASSERT_NE(v.envelope->header(), nullptr) << EnumNameMessage(v.envelope->message_type());
      const PacketHeader h = header_of(*v.envelope);
      EXPECT_EQ(h.sequence(), 0u);
      EXPECT_EQ(h.ack(), 0u);
      EXPECT_EQ(h.ack_bits(), 0u);
    }
  }
}

TEST(PacketHeader, StampingWritesOnlyTheHeaderAndRoundTrips) {
  Rng rng(7);
  for (const auto& [set, direction] : {std::pair{client_datagrams(), Direction::ClientToServer},
                                       std::pair{server_datagrams(), Direction::ServerToClient}}) {
    for (const Bytes& original : set) {
      Bytes b = original;
      const PacketHeader stamped(static_cast<uint32_t>(rng.next()) | 1u, static_cast<uint32_t>(rng.next()),
                                 static_cast<uint32_t>(rng.next()));
      ASSERT_TRUE(stamp_header(b, stamped));
      ASSERT_EQ(b.size(), original.size());
      // Exactly the 12 header bytes may differ, and they hold the stamped values.
      size_t differing = 0;
      for (size_t i = 0; i < b.size(); ++i) differing += b[i] != original[i];
      EXPECT_LE(differing, sizeof(PacketHeader));
      const Verified v = verify(b, direction);
      ASSERT_EQ(v.reason, DropReason::None);
      const PacketHeader h = header_of(*v.envelope);
      EXPECT_EQ(h.sequence(), stamped.sequence());
      EXPECT_EQ(h.ack(), stamped.ack());
      EXPECT_EQ(h.ack_bits(), stamped.ack_bits());
      EXPECT_EQ(v.envelope->message_type(), GetEnvelope(original.data())->message_type());
      // Stamping again overwrites (a resend gets a new sequence).
      ASSERT_TRUE(stamp_header(b, PacketHeader(UINT32_MAX, 0, UINT32_MAX)));
      const PacketHeader again = header_of(*verify(b, direction).envelope);
      EXPECT_EQ(again.sequence(), UINT32_MAX);
      EXPECT_EQ(again.ack(), 0u);
      EXPECT_EQ(again.ack_bits(), UINT32_MAX);
    }
  }
}

TEST(PacketHeader, AbsentHeaderReadsAsZeroAndCannotBeStamped) {
  // An envelope built without a header slot (not by this codec): verifies, reads as "none", and
  // stamp_header refuses it rather than writing somewhere else.
  flatbuffers::FlatBufferBuilder fbb;
  const auto ping = CreatePing(fbb, 5);
  FinishEnvelopeBuffer(fbb, CreateEnvelope(fbb, kProtocolVersion, Message::Ping, ping.Union()));
  Bytes b = copy({fbb.GetBufferPointer(), fbb.GetSize()});
  const Bytes before = b;
  const Verified v = verify(b, Direction::ClientToServer);
  ASSERT_EQ(v.reason, DropReason::None);
  EXPECT_EQ(v.envelope->header(), nullptr);
  const PacketHeader h = header_of(*v.envelope);
  EXPECT_EQ(h.sequence(), 0u);
  EXPECT_EQ(h.ack(), 0u);
  EXPECT_EQ(h.ack_bits(), 0u);
  EXPECT_FALSE(stamp_header(b, PacketHeader(1, 2, 3)));
  EXPECT_EQ(b, before);
  Bytes tiny(2, 0);
  EXPECT_FALSE(stamp_header(tiny, PacketHeader(1, 2, 3)));
}

// --- Snapshot payloads and event splitting ----------------------------------------------------

/// The size of a Snapshot datagram with `payload_bytes` of data at the worst-case tick and with
/// an input lead (protocol 10), built without the codec's truncation (so an oversized payload
/// shows its true size).
size_t raw_snapshot_bytes(size_t payload_bytes, size_t relayed_inputs = 0) {
  flatbuffers::FlatBufferBuilder fbb(2 * kMaxDatagramBytes);
  const Bytes payload(payload_bytes, 0xA5);
  const std::vector<RelayedInput> inputs(relayed_inputs);
  const auto data = fbb.CreateVector(payload);
  const auto relayed = inputs.empty() ? flatbuffers::Offset<flatbuffers::Vector<const RelayedInput*>>()
                                      : fbb.CreateVectorOfStructs(inputs.data(), inputs.size());
  const auto snapshot = CreateSnapshot(fbb, UINT64_MAX, data, 0, UINT32_MAX, relayed);  // every scalar present
  const PacketHeader header(UINT32_MAX, UINT32_MAX, UINT32_MAX);
  FinishEnvelopeBuffer(fbb, CreateEnvelope(fbb, kProtocolVersion, Message::Snapshot, snapshot.Union(), &header));
  return fbb.GetSize();
}

TEST(CheckRequest, InputFramesAreRangeCheckedByMode) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto check = [&](InputMode mode, uint64_t first_tick, std::vector<InputFrame> frames) {
    const Bytes b = copy(build_input(fbb, ObjectID{1, 1}, mode, first_tick, frames));
    const Verified v = verify(b, Direction::ClientToServer);
    EXPECT_EQ(v.reason, DropReason::None);
    return check_request(*v.envelope->message_as_Input()).code;
  };
  const InputFrame fine(Vec3(1e9f, 0, 0), Vec3(0, 0, -1e9f));
  EXPECT_EQ(check(InputMode::Force, 1, {fine}), ResultCode::Ok);
  EXPECT_EQ(check(InputMode::Force, 0, {fine}), ResultCode::InvalidArgument) << "first_tick 0";
  EXPECT_EQ(check(InputMode::Force, 1, {}), ResultCode::InvalidArgument) << "no frames";
  EXPECT_EQ(check(InputMode::Force, 1, std::vector<InputFrame>(17, fine)), ResultCode::Ok)
      << "the builder keeps 16 of them";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(check(InputMode::Force, 1, {fine, InputFrame(Vec3(nan, 0, 0), Vec3(0, 0, 0))}), ResultCode::InvalidArgument);
  EXPECT_EQ(check(InputMode::Force, 1, {InputFrame(Vec3(2e9f, 0, 0), Vec3(0, 0, 0))}), ResultCode::InvalidArgument);
  // Velocity mode bounds the lengths: 500 m/s and 47.12 rad/s.
  EXPECT_EQ(check(InputMode::Velocity, 1, {InputFrame(Vec3(300, 0, 400), Vec3(0, 47, 0))}), ResultCode::Ok);
  EXPECT_EQ(check(InputMode::Velocity, 1, {InputFrame(Vec3(300, 0, 401), Vec3(0, 0, 0))}), ResultCode::InvalidArgument);
  EXPECT_EQ(check(InputMode::Velocity, 1, {InputFrame(Vec3(0, 0, 0), Vec3(0, 48, 0))}), ResultCode::InvalidArgument);
  EXPECT_EQ(check(static_cast<InputMode>(7), 1, {fine}), ResultCode::InvalidArgument) << "unknown mode";
  EXPECT_EQ(check(InputMode::Force, UINT64_MAX - 3, {fine}), ResultCode::InvalidArgument) << "ticks past 2^64";
}

TEST(SnapshotPayload, CapacityIsTight) {
  const size_t capacity = snapshot_payload_capacity();
  // Measured (1124 before protocol 5's 24-byte seal, 1100 before protocol 10's input lead; the
  // stop time added within version 10 fits in the table's alignment padding);
  // docs/PROTOCOL.md quotes it.
  EXPECT_EQ(capacity, 1092u);
  EXPECT_LE(raw_snapshot_bytes(capacity), kMaxPlaintextBytes);
  // One more byte would not fit; try a few beyond it too (vector alignment is not monotonic).
  for (size_t extra = 1; extra <= 8; ++extra) {
    EXPECT_GT(raw_snapshot_bytes(capacity + extra), kMaxPlaintextBytes) << "capacity + " << extra;
  }
  // The codec's own builder agrees: a full payload fits at the worst-case tick.
  flatbuffers::FlatBufferBuilder fbb;
  const Bytes full = counting_bytes(capacity);
  const Bytes b = copy(build_snapshot(fbb, UINT64_MAX, full, 0));
  EXPECT_LE(b.size(), kMaxPlaintextBytes);
  const Verified v = verify(b, Direction::ServerToClient);
  ASSERT_EQ(v.reason, DropReason::None);
  const Snapshot* s = v.envelope->message_as_Snapshot();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(Bytes(s->data()->begin(), s->data()->end()), full);
}

// Relayed inputs (Snapshot.inputs, 40 bytes each) take their room from the payload: each count's
// capacity is tight, the builder keeps at most kMaxRelayedInputs, and they round-trip exactly.
TEST(SnapshotPayload, RelayedInputsTakeTheirRoomFromThePayload) {
  static_assert(sizeof(RelayedInput) == 40);
  for (size_t k = 0; k <= kMaxRelayedInputs; ++k) {
    const size_t capacity = snapshot_payload_capacity(k);
    EXPECT_LE(raw_snapshot_bytes(capacity, k), kMaxPlaintextBytes) << k;
    for (size_t extra = 1; extra <= 8; ++extra) {
      EXPECT_GT(raw_snapshot_bytes(capacity + extra, k), kMaxPlaintextBytes) << k << " inputs, capacity + " << extra;
    }
    // Each entry costs its 40 bytes; the vector its length, offset, vtable slot and alignment.
    EXPECT_GE(capacity + 40 * k + (k > 0 ? 16 : 0), snapshot_payload_capacity(0)) << "more than the entries' bytes lost";
  }
  EXPECT_EQ(snapshot_payload_capacity(kMaxRelayedInputs + 5), snapshot_payload_capacity(kMaxRelayedInputs));

  std::vector<RelayedInput> inputs;
  for (uint32_t i = 0; i < kMaxRelayedInputs + 3; ++i) {
    inputs.emplace_back(impulse::to_wire(ObjectID{i + 1, 1}),
                        InputFrame(Vec3(static_cast<float>(i), -1.5f, 2), Vec3(0, static_cast<float>(i) * 0.25f, 0)),
                        i % 2 == 0 ? InputMode::Force : InputMode::Velocity, static_cast<uint8_t>(i));
  }
  flatbuffers::FlatBufferBuilder fbb;
  const Bytes full = counting_bytes(snapshot_payload_capacity(0));
  const Bytes b = copy(build_snapshot(fbb, UINT64_MAX, full, 0, UINT32_MAX, inputs));
  EXPECT_LE(b.size(), kMaxPlaintextBytes);
  const Verified v = verify(b, Direction::ServerToClient);
  ASSERT_EQ(v.reason, DropReason::None);
  const Snapshot* s = v.envelope->message_as_Snapshot();
  ASSERT_NE(s, nullptr);
  ASSERT_NE(s->inputs(), nullptr);
  ASSERT_EQ(s->inputs()->size(), kMaxRelayedInputs);
  for (uint32_t i = 0; i < kMaxRelayedInputs; ++i) {
    const RelayedInput& r = *s->inputs()->Get(i);
    EXPECT_EQ(r.id(), inputs[i].id());
    EXPECT_EQ(r.frame().linear().x(), static_cast<float>(i));
    EXPECT_EQ(r.frame().angular().y(), static_cast<float>(i) * 0.25f);
    EXPECT_EQ(r.mode(), inputs[i].mode());
    EXPECT_EQ(r.repeats(), i);
  }
  ASSERT_NE(s->data(), nullptr);
  EXPECT_EQ(s->data()->size(), snapshot_payload_capacity(kMaxRelayedInputs)) << "the payload is cut to fit";
}

TEST(SnapshotPayload, EveryPayloadSizeRoundTripsAndOversizedOnesAreCut) {
  flatbuffers::FlatBufferBuilder fbb;
  const size_t capacity = snapshot_payload_capacity();
  Rng rng(42);
  for (size_t n = 0; n <= capacity + 40; ++n) {
    Bytes payload(n);
    for (uint8_t& x : payload) x = static_cast<uint8_t>(rng.next());
    const uint64_t tick = n % 2 == 0 ? UINT64_MAX - n : n;
    const Bytes b = copy(build_snapshot(fbb, tick, payload));
    ASSERT_LE(b.size(), kMaxPlaintextBytes) << n << "-byte payload";
    const Verified v = verify(b, Direction::ServerToClient);
    ASSERT_EQ(v.reason, DropReason::None) << n;
    const Snapshot* s = v.envelope->message_as_Snapshot();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->tick(), tick);
    const size_t kept = std::min(n, capacity);
    const size_t got = s->data() ? s->data()->size() : 0;
    ASSERT_EQ(got, kept) << n;
    // The first `kept` bytes, unchanged (callers budget for the capacity; this only bounds it).
    EXPECT_TRUE(got == 0 || std::equal(s->data()->begin(), s->data()->end(), payload.begin()));
  }
}

TEST(CollisionEventsSplit, CapacityIsTightForTheWorstCaseBlock) {
  const uint32_t capacity = collision_events_per_datagram();
  ASSERT_GT(capacity, 0u);
  ASSERT_LE(capacity, kMaxEventsPerBlock);
  // A block of `n` worst-case events, built by hand around a worst-case packet header.
  auto raw_size = [](uint32_t n) {
    flatbuffers::FlatBufferBuilder fbb(2 * kMaxDatagramBytes);
    const Bytes block(max_event_block_bytes(n), 0xFF);
    const auto vec = fbb.CreateVector(block.data(), block.size());
    const auto message = CreateCollisionEvents(fbb, {}, vec);
    const PacketHeader header(UINT32_MAX, UINT32_MAX, UINT32_MAX);
    FinishEnvelopeBuffer(fbb, CreateEnvelope(fbb, kProtocolVersion, Message::CollisionEvents, message.Union(), &header));
    return static_cast<size_t>(fbb.GetSize());
  };
  EXPECT_LE(raw_size(capacity), kMaxPlaintextBytes);
  EXPECT_GT(raw_size(capacity + 1), kMaxPlaintextBytes);
  // Measured (16 before protocol 5's seal, 15 before protocol 7's JointAdded records); documented
  // in docs/PROTOCOL.md.
  EXPECT_EQ(capacity, 11u);
}

TEST(CollisionEventsSplit, FitsAndTruncatesAtCapacityKeepingEveryEvent) {
  flatbuffers::FlatBufferBuilder fbb;
  const QuantizationConfig quantization;
  const uint32_t capacity = collision_events_per_datagram();
  ASSERT_GT(capacity, 0u);
  std::vector<CollisionEvent> events, decoded;
  for (uint32_t n = 0; n <= capacity + 5; ++n) {
    events.clear();
    for (uint32_t i = 0; i < n; ++i) {
      // Extreme ids, ticks and sequences; the point and normal are exactly representable.
      events.emplace_back(UINT64_MAX - i, to_wire(ObjectID{i, 1}), to_wire(ObjectID{i + 1, 0xFFFFFFFFu}),
                          wire::Vec3(1, 2, 3), wire::Vec3(0, 1, 0), UINT32_MAX - i,
                          i % 2 == 0 ? ContactEventType::End : ContactEventType::Begin);
    }
    const Bytes b = copy(build_collision_events(fbb, events, quantization));
    ASSERT_LE(b.size(), kMaxPlaintextBytes);
    const Verified v = verify(b, Direction::ServerToClient);
    ASSERT_EQ(v.reason, DropReason::None);
    const auto* e = v.envelope->message_as_CollisionEvents();
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->events(), nullptr) << "protocol 4 sends only the packed block";
    ASSERT_NE(e->packed(), nullptr);
    const std::span<const uint8_t> block(e->packed()->data(), e->packed()->size());
    ASSERT_EQ(decode_collision_events(block, quantization, &decoded), EventBlockError::None);
    const uint32_t got = static_cast<uint32_t>(decoded.size());
    ASSERT_EQ(got, std::min(n, capacity));
    for (uint32_t i = 0; i < got; ++i) {  // the first ones, in order
      const CollisionEvent& ev = decoded[i];
      EXPECT_EQ(ev.tick(), UINT64_MAX - i);
      EXPECT_EQ(from_wire(ev.a()), (ObjectID{i, 1}));
      EXPECT_EQ(from_wire(ev.b()), (ObjectID{i + 1, 0xFFFFFFFFu}));
      EXPECT_EQ(to_vec3(ev.point()), (impulse::Vec3{1, 2, 3}));
      EXPECT_EQ(to_vec3(ev.normal()), (impulse::Vec3{0, 1, 0}));
      EXPECT_EQ(ev.sequence(), UINT32_MAX - i);
      EXPECT_EQ(ev.type(), i % 2 == 0 ? ContactEventType::End : ContactEventType::Begin);
    }
  }
}

TEST(CollisionEventsSplit, InvalidQuantisationBuildsNothing) {
  flatbuffers::FlatBufferBuilder fbb;
  QuantizationConfig bad;
  bad.position_fraction_bits = 30;
  const std::vector<CollisionEvent> events(2);
  EXPECT_TRUE(build_collision_events(fbb, events, bad).empty());
}

TEST(CollisionEventsSplit, RawBlocksAreCarriedVerbatimUpToTheCapacity) {
  flatbuffers::FlatBufferBuilder fbb;
  const size_t limit = max_event_block_bytes(collision_events_per_datagram());
  for (const size_t n : {size_t{0}, size_t{5}, limit, limit + 1, size_t{2000}}) {
    const Bytes block = counting_bytes(n, 7);
    const Bytes b = copy(build_collision_events_block(fbb, block));
    ASSERT_LE(b.size(), kMaxPlaintextBytes) << n;
    const Verified v = verify(b, Direction::ServerToClient);
    ASSERT_EQ(v.reason, DropReason::None) << n;
    const auto* packed = v.envelope->message_as_CollisionEvents()->packed();
    ASSERT_NE(packed, nullptr);
    EXPECT_EQ(Bytes(packed->begin(), packed->end()), Bytes(block.begin(), block.begin() + std::min(n, limit)));
  }
}

TEST(RaycastResultSplit, FitsAndTruncatesToTheNearestHits) {
  flatbuffers::FlatBufferBuilder fbb;
  const uint32_t capacity = raycast_hits_per_datagram();
  EXPECT_EQ(sizeof(RayHitEntry), 40u);
  EXPECT_EQ(capacity, 27u);  // measured (28 before v3 added the packet header); docs/PROTOCOL.md
  std::vector<RayHitEntry> hits;
  for (uint32_t n = 0; n <= capacity + 5; ++n) {
    hits.clear();
    for (uint32_t i = 0; i < n; ++i) {
      hits.emplace_back(impulse::to_wire(ObjectID{i, 0xFFFFFFFFu}), wire::Vec3(-1e5f, 1e5f, -1e5f),
                        wire::Vec3(0, 0, -1), static_cast<float>(i) / static_cast<float>(n));
    }
    for (const bool truncated_by_caller : {false, true}) {
      const Bytes b = copy(build_raycast_result(fbb, UINT32_MAX, ResultCode::Ok, UINT64_MAX, hits, truncated_by_caller, {}));
      ASSERT_LE(b.size(), kMaxPlaintextBytes) << n << " hits";
      const Verified v = verify(b, Direction::ServerToClient);
      ASSERT_EQ(v.reason, DropReason::None);
      const auto* r = v.envelope->message_as_RaycastResult();
      ASSERT_NE(r, nullptr);
      const uint32_t got = r->hits() ? r->hits()->size() : 0;
      EXPECT_EQ(got, std::min(n, capacity));
      EXPECT_EQ(r->truncated(), truncated_by_caller || n > capacity) << n;
      for (uint32_t i = 0; i < got; ++i) {  // the nearest ones, in order
        ASSERT_EQ(from_wire(r->hits()->Get(i)->id()).index, i);
      }
    }
  }
  // The capacity is tight: one more hit would not fit.
  hits.assign(capacity + 1, RayHitEntry());
  const size_t one = build_raycast_result(fbb, UINT32_MAX, ResultCode::Ok, UINT64_MAX, std::span(hits).first(1), true, {}).size();
  EXPECT_GT(one + capacity * sizeof(RayHitEntry), kMaxPlaintextBytes);
}

}  // namespace
}  // namespace impulse::wire
