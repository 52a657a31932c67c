// impulse::Client against a scripted fake server over loopback UDP, protocol version 4: the cookie
// handshake and its refusals, delta snapshots written by the real server::SnapshotSender (applied,
// rejected when corrupted and then not acked, ignored when stale), requests resent until answered
// and delivered once, collision events delivered once per sequence, keepalives, redundant
// disconnects and hostile datagrams. The fake sends exactly what each case needs, so the client's
// rules are tested without depending on the real server's timing.
// GCC 12 with -fsanitize=address reports a bogus -Wstringop-overflow (a memset bound of 2^64-2)
// inside std::vector code this file instantiates; the Release build and clang are clean.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include <algorithm>
#include <array>
#include <functional>
#include <set>
#include <thread>

#include "integration/harness.h"
#include "server/net/snapshot_sender.h"
#include "shared/wire/event_codec.h"
#include "shared/wire/quantize.h"
#include "shared/wire/snapshot_codec.h"

namespace impulse::test {
namespace {

using asio::ip::udp;
using Bytes = std::vector<uint8_t>;

/// The cookie of every fake Challenge. The client must echo it byte for byte without reading it.
const Bytes kCookie = [] {
  Bytes b(32);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(0xC0 + i);
  return b;
}();

Bytes to_bytes(const flatbuffers::Vector<uint8_t>* v) {
  return v ? Bytes(v->begin(), v->end()) : Bytes{};
}

/// The quantisation a server announces, from the codec's config (the defaults unless changed).
wire::QuantizationArgs to_args(const wire::QuantizationConfig& q) {
  return wire::QuantizationArgs{q.world_bound_m,    q.position_fraction_bits,        q.orientation_bits,
                                q.max_linear_speed, q.linear_velocity_fraction_bits, q.max_angular_speed,
                                q.angular_velocity_fraction_bits};
}

/// What the fake saw of the client's Connects.
struct HandshakeLog {
  int without_cookie = 0;          ///< first Connects (answered with a Challenge)
  int with_wrong_cookie = 0;
  size_t smallest_connect = SIZE_MAX;  ///< [bytes]
  Bytes cookie;                    ///< of the Connect that completed the round trip
  Bytes token;
  std::string name;
};

/// A scripted server on a loopback socket. Session datagrams are stamped with the next packet
/// sequence (from 1), as the real server does; handshake answers (Challenge, ConnectRejected) go
/// out unstamped, as from a server that keeps no state for the address yet.
class FakeServer {
 public:
  uint16_t port() const { return socket_.port(); }
  flatbuffers::FlatBufferBuilder& fbb() { return socket_.fbb; }

  /// Sends a copy of `built` with header {sequence, 0, 0} (sequence 0: left unstamped).
  void send_as(std::span<const uint8_t> built, uint32_t sequence) {
    ASSERT_LE(built.size(), buffer_.size());
    std::copy(built.begin(), built.end(), buffer_.begin());
    const std::span<uint8_t> bytes(buffer_.data(), built.size());
    if (sequence != 0) {
      ASSERT_TRUE(wire::stamp_header(bytes, wire::PacketHeader(sequence, 0, 0)));
    }
    socket_.send(bytes, client);
  }
  /// Sends `built` stamped with the next sequence; returns that sequence.
  uint32_t send(std::span<const uint8_t> built) {
    const uint32_t sequence = next_sequence++;
    send_as(built, sequence);
    return sequence;
  }
  void send_unstamped(std::span<const uint8_t> built) { send_as(built, 0); }
  /// Consumes every datagram queued on the socket; returns how many.
  int drain() { return socket_.drain(); }
  /// Sends raw bytes (garbage) to the client.
  void send_raw(std::span<const uint8_t> bytes) { socket_.send(bytes, client); }

  /// Receives until a verified client datagram of `type` arrives (bounded); returns its envelope,
  /// valid until the next receive, or null. Other datagrams are consumed and ignored.
  const wire::Envelope* wait_for(wire::Message type, milliseconds timeout = kWaitTimeout) {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (int i = 0; i < kMaxIterations && Clock::now() < deadline; ++i) {
      udp::endpoint from;
      const size_t n = socket_.receive(milliseconds{5}, &from);
      if (n == 0) continue;
      const wire::Verified v = wire::verify_datagram(socket_.last(n), wire::Direction::ClientToServer);
      if (v.reason == wire::DropReason::None && v.envelope->message_type() == type) {
        client = from;
        return v.envelope;
      }
    }
    return nullptr;
  }

  /// The next verified client datagram (bounded), valid until the next receive, or null.
  const wire::Envelope* next(milliseconds timeout) {
    udp::endpoint from;
    const size_t n = socket_.receive(timeout, &from);
    if (n == 0) return nullptr;
    const wire::Verified v = wire::verify_datagram(socket_.last(n), wire::Direction::ClientToServer);
    return v.reason == wire::DropReason::None ? v.envelope : nullptr;
  }

  /// The server side of the handshake: answers every Connect without the cookie with a Challenge
  /// until one echoes kCookie, then calls `answer` with it (bounded by `timeout`). Returns false
  /// when no such Connect came. Runs on a helper thread while the client blocks in connect().
  bool serve_handshake(const std::function<void(FakeServer&, const wire::Connect&)>& answer,
                       milliseconds timeout = kWaitTimeout) {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (int i = 0; i < kMaxIterations && Clock::now() < deadline; ++i) {
      udp::endpoint from;
      const size_t n = socket_.receive(milliseconds{5}, &from);
      if (n == 0) continue;
      const wire::Verified v = wire::verify_datagram(socket_.last(n), wire::Direction::ClientToServer);
      if (v.reason != wire::DropReason::None || v.envelope->message_type() != wire::Message::Connect) continue;
      const wire::Connect& m = *v.envelope->message_as_Connect();
      client = from;
      log.smallest_connect = std::min(log.smallest_connect, n);
      const Bytes cookie = to_bytes(m.cookie());
      if (cookie != kCookie) {
        ++(cookie.empty() ? log.without_cookie : log.with_wrong_cookie);
        send_unstamped(wire::build_challenge(fbb(), kCookie));
        continue;
      }
      log.cookie = cookie;
      log.token = to_bytes(m.token());
      log.name = m.client_name() ? m.client_name()->str() : std::string{};
      answer(*this, m);
      return true;
    }
    return false;
  }

  udp::endpoint client;
  uint32_t next_sequence = 1;  ///< of the next session datagram
  HandshakeLog log;

 private:
  RawSocket socket_;
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> buffer_{};
};

/// The ConnectAccepted of the fake sessions: client 42, 120 Hz ticks, 30 Hz snapshots, tick 1000,
/// the default quantisation, a quota of 250 objects.
void accept(FakeServer& fake, const wire::QuantizationConfig& quant = {}) {
  wire::AcceptedArgs a;
  a.client_id = 42;
  a.tick_hz = 120;
  a.snapshot_hz = 30;
  a.tick = 1000;
  a.quantization = to_args(quant);
  a.max_objects = 250;
  a.first_request_id = 1;
  fake.send(wire::build_connect_accepted(fake.fbb(), a));
}

/// Runs a fake handshake that ends with `answer` while a fresh client connects (with `token`);
/// returns the client's error message ("" when it connected).
std::string connect_against(FakeServer& fake, Client& client,
                            const std::function<void(FakeServer&, const wire::Connect&)>& answer,
                            std::span<const uint8_t> token = {}, milliseconds timeout = milliseconds{2000}) {
  std::thread server([&] { fake.serve_handshake(answer); });
  std::string error;
  const bool ok = client.connect("127.0.0.1", fake.port(), timeout, &error, "impulse-client", token);
  server.join();
  EXPECT_EQ(ok, error.empty()) << error;
  return ok ? std::string{} : error;
}

// ------------------------------------------------------------------------------ fake world

/// One object of the fake world, in SI units (world frame).
struct FakeObject {
  ObjectID id;
  Vec3 position;
  Vec3 velocity;
  Quat orientation;
  Vec3 angular_velocity;
  wire::BodyKind kind = wire::BodyKind::Dynamic;
  wire::ShapeKind shape = wire::ShapeKind::Box;
  Vec3 dims{0.5f, 0.5f, 0.5f};
  bool at_rest = false;
  bool sensor = false;
};

/// A hand-made server::SnapshotSource and a real SnapshotSender over it, so the payloads the fake
/// sends are exactly what the real server would write.
class FakeWorld {
 public:
  FakeWorld() : sender_(server::SnapshotSenderConfig{}) {}

  /// Replaces the world's objects (given in any order) as of `tick`.
  void set(uint64_t tick, std::vector<FakeObject> objects) {
    std::sort(objects.begin(), objects.end(),
              [](const FakeObject& a, const FakeObject& b) { return a.id.index < b.id.index; });
    objects_ = objects;
    // One source for the fake's lifetime, rebuilt in place and re-indexed (as the server does).
    server::SnapshotSource& s = source_;
    s.ids.clear();
    s.states.clear();
    s.positions.clear();
    s.speeds.clear();
    s.descs.clear();
    s.representable.clear();
    s.tick = tick;
    for (const FakeObject& o : objects) {
      s.ids.push_back(o.id);
      s.states.push_back(wire::quantize_state(o.position, o.orientation, o.velocity, o.angular_velocity, o.at_rest,
                                              quant_));
      s.positions.push_back(o.position);
      s.speeds.push_back(length(o.velocity));
      s.descs.push_back(wire::ObjectDescription{o.kind, o.shape, o.dims, o.sensor});
      s.representable.push_back(wire::is_representable(o.position, quant_) ? 1 : 0);
    }
    server::index_snapshot_source(&s);
  }
  const std::vector<FakeObject>& objects() const { return objects_; }
  uint64_t tick() const { return source_.tick; }

  /// The payload of the snapshot that travels in packet `sequence` (a full datagram's budget).
  const Bytes& write(uint32_t sequence) {
    stats = sender_.write(source_, sequence, wire::snapshot_payload_capacity(), &payload_);
    return payload_;
  }
  /// The client applied (and so acked) packet `sequence`: its states become baselines.
  void ack(uint32_t sequence) { sender_.on_acked(sequence); }

  /// What the client must show for `o`: its state through the wire's quantisation.
  ObjectState expected(const FakeObject& o) const {
    const wire::DequantizedState d = wire::dequantize_state(
        wire::quantize_state(o.position, o.orientation, o.velocity, o.angular_velocity, o.at_rest, quant_), quant_);
    ObjectState s;
    s.id = o.id;
    s.position = d.position;
    s.velocity = d.linear_velocity;
    s.dims = o.dims;
    s.orientation = d.orientation;
    s.angular_velocity = d.angular_velocity;
    s.kind = static_cast<BodyKind>(o.kind);
    s.shape = static_cast<ShapeKind>(o.shape);
    s.sleeping = d.at_rest;
    s.sensor = o.sensor;
    return s;
  }

  server::SnapshotWriteStats stats;

 private:
  wire::QuantizationConfig quant_;
  server::SnapshotSender sender_;
  server::SnapshotSource source_;
  std::vector<FakeObject> objects_;
  Bytes payload_;
};

void expect_same(const ObjectState& got, const ObjectState& want) {
  SCOPED_TRACE(testing::Message() << "object " << want.id.index << ":" << want.id.generation);
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.position, want.position);
  EXPECT_EQ(got.velocity, want.velocity);
  EXPECT_EQ(got.orientation, want.orientation);
  EXPECT_EQ(got.angular_velocity, want.angular_velocity);
  EXPECT_EQ(got.dims, want.dims);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.sleeping, want.sleeping);
  EXPECT_EQ(got.sensor, want.sensor);
}

/// The client's view equals the fake world's objects, through the quantisation, in id order.
void expect_view(const Client& client, const FakeWorld& world) {
  const auto view = client.objects();
  ASSERT_EQ(view.size(), world.objects().size());
  for (size_t i = 0; i < view.size(); ++i) expect_same(view[i], world.expected(world.objects()[i]));
}

/// Three objects of different kinds, shapes and states, at exactly representable positions.
std::vector<FakeObject> three_objects() {
  FakeObject box;
  box.id = ObjectID{1, 1};
  box.position = {1.5f, 2.0f, -3.25f};
  box.velocity = {0.0f, -1.0f, 0.5f};
  box.orientation = quat_from_axis_angle({0, 1, 0}, 0.7f);
  box.angular_velocity = {0.0f, 2.0f, 0.0f};
  FakeObject resting;
  resting.id = ObjectID{2, 3};
  resting.shape = wire::ShapeKind::Sphere;
  resting.dims = {0.25f, 0.25f, 0.25f};
  resting.position = {-4.0f, 0.25f, 8.0f};
  resting.at_rest = true;
  FakeObject sensor;
  sensor.id = ObjectID{5, 1};
  sensor.kind = wire::BodyKind::Kinematic;
  sensor.shape = wire::ShapeKind::Capsule;
  sensor.dims = {0.25f, 0.75f, 0.25f};
  sensor.position = {0.0f, 5.0f, 0.0f};
  sensor.velocity = {1.0f, 0.0f, 0.0f};
  sensor.orientation = quat_from_axis_angle({1, 0, 0}, -1.2f);
  sensor.sensor = true;
  return {sensor, resting, box};  // unsorted on purpose
}

// ------------------------------------------------------------------------------ a session

/// A client connected to a FakeServer through the full cookie round trip.
class FakeSession : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string error = connect_against(fake, client, [](FakeServer& f, const wire::Connect&) { accept(f); });
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_TRUE(client.connected());
  }

  /// Polls the client until it has received `count` more datagrams (bounded); returns the ticks
  /// of the snapshots applied meanwhile, and collects results, events and pongs.
  std::vector<uint64_t> deliver(uint64_t count) {
    std::vector<uint64_t> applied;
    const uint64_t target = client.stats().datagrams_in + count;
    const Clock::time_point deadline = Clock::now() + kWaitTimeout;
    for (int i = 0; i < kMaxIterations && Clock::now() < deadline && client.stats().datagrams_in < target; ++i) {
      const PollResult& r = client.poll(milliseconds{1});
      for (const SnapshotRange& s : r.snapshots) applied.push_back(s.tick);
      results.insert(results.end(), r.results.begin(), r.results.end());
      collisions.insert(collisions.end(), r.collisions.begin(), r.collisions.end());
      pongs.insert(pongs.end(), r.pongs.begin(), r.pongs.end());
      if (r.server_disconnected) disconnected_reason = r.disconnect_reason;
    }
    EXPECT_EQ(client.stats().datagrams_in, target) << "datagrams did not arrive in time";
    return applied;
  }

  /// Sends the world's current snapshot in the next packet; returns its sequence.
  uint32_t send_snapshot() {
    const uint32_t sequence = fake.next_sequence;
    const Bytes& payload = world.write(sequence);
    EXPECT_EQ(fake.send(wire::build_snapshot(fake.fbb(), world.tick(), payload)), sequence);
    return sequence;
  }

  /// The packet header of the client's next datagram, from a Ping it is made to send.
  wire::PacketHeader header_of_next_ping() {
    const uint64_t nonce = client.ping();
    EXPECT_NE(nonce, 0u);
    // Skip the client's own clock-sync Pings queued before it (sent with older acks).
    const wire::Envelope* ping = fake.wait_for(wire::Message::Ping);
    for (int i = 0; i < 64 && ping != nullptr && ping->message_as_Ping()->nonce() != nonce; ++i) {
      ping = fake.wait_for(wire::Message::Ping);
    }
    if (ping == nullptr || ping->message_as_Ping()->nonce() != nonce) {
      ADD_FAILURE() << "no Ping arrived";
      return wire::PacketHeader(0, 0, 0);
    }
    return wire::header_of(*ping);
  }

  FakeServer fake;
  FakeWorld world;
  Client client;
  std::vector<RequestResult> results;
  std::vector<CollisionEvent> collisions;
  std::vector<PongInfo> pongs;
  std::optional<std::string> disconnected_reason;
};

// ------------------------------------------------------------------------------ host:port parsing

TEST(ParseHostPort, AcceptsHostnamesIpv4AndBracketedIpv6) {
  std::string host;
  uint16_t port = 0;
  std::string error;
  ASSERT_TRUE(parse_host_port("127.0.0.1:7777", &host, &port, &error)) << error;
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 7777);
  ASSERT_TRUE(parse_host_port(" impulse-server:1 ", &host, &port, &error)) << error;
  EXPECT_EQ(host, "impulse-server");
  EXPECT_EQ(port, 1);
  ASSERT_TRUE(parse_host_port("[::1]:65535", &host, &port, &error)) << error;
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 65535);
}

TEST(ParseHostPort, RejectsBadValuesWithAReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"localhost", "missing port"},
      {"localhost:", "missing port"},
      {":7777", "missing host"},
      {"host:0", "out of range"},
      {"host:65536", "out of range"},
      {"host:77x", "not a number"},
      {"host:-1", "not a number"},
      {"host:+80", "not a number"},
      {"::1:7777", "brackets"},
      {"[::1]7777", "missing port"},
      {"[::1:7777", "unclosed"},
  };
  for (const auto& [text, reason] : cases) {
    std::string host = "unchanged";
    uint16_t port = 9;
    std::string error;
    EXPECT_FALSE(parse_host_port(text, &host, &port, &error)) << text;
    EXPECT_NE(error.find(reason), std::string::npos) << "'" << text << "' gave: " << error;
    EXPECT_EQ(host, "unchanged");
    EXPECT_EQ(port, 9);
  }
}

// ------------------------------------------------------------------------------ connect

TEST(ClientConnect, TimesOutWithAHelpfulMessageAndResendsPaddedConnects) {
  RawSocket silent;  // receives, never answers (no ICMP either: the port is open)
  Client client;
  std::string error;
  const Clock::time_point start = Clock::now();
  EXPECT_FALSE(client.connect("127.0.0.1", silent.port(), milliseconds{600}, &error));
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds{600});
  EXPECT_LT(elapsed, milliseconds{1500});
  const std::string where = "127.0.0.1:" + std::to_string(silent.port());
  EXPECT_NE(error.find("no answer from " + where + " within 600 ms"), std::string::npos) << error;
  EXPECT_NE(error.find("impulse-server running"), std::string::npos) << error;
  EXPECT_FALSE(client.connected());

  // Connect was resent (every 250 ms: at 0, 250 and 500 ms): each a first Connect of this
  // protocol version, without a cookie, padded so that no Challenge can be larger.
  int connects = 0;
  udp::endpoint from;
  for (size_t n = silent.receive(milliseconds{0}, &from); n != 0; n = silent.receive(milliseconds{0}, &from)) {
    const wire::Verified v = wire::verify_datagram(silent.last(n), wire::Direction::ClientToServer);
    ASSERT_EQ(v.reason, wire::DropReason::None);
    ASSERT_EQ(v.envelope->message_type(), wire::Message::Connect);
    const wire::Connect& m = *v.envelope->message_as_Connect();
    EXPECT_EQ(m.protocol_version(), wire::kProtocolVersion);
    EXPECT_EQ(m.client_name()->str(), "impulse-client");
    EXPECT_EQ(m.cookie(), nullptr);
    EXPECT_EQ(m.token(), nullptr);  // none given
    EXPECT_GE(n, wire::min_connect_bytes());
    ++connects;
  }
  EXPECT_EQ(connects, 3);
  EXPECT_EQ(client.stats().datagrams_out, 3u);
}

TEST(ClientConnect, EchoesTheChallengeCookieAndSendsItsToken) {
  FakeServer fake;
  Client client;
  Bytes token(120);
  for (size_t i = 0; i < token.size(); ++i) token[i] = static_cast<uint8_t>(i * 7);
  std::thread server([&] { fake.serve_handshake([](FakeServer& f, const wire::Connect&) { accept(f); }); });
  std::string error;
  const bool ok = client.connect("127.0.0.1", fake.port(), milliseconds{2000}, &error, "player-one", token);
  server.join();
  ASSERT_TRUE(ok) << error;
  EXPECT_GE(fake.log.without_cookie, 1);  // the first Connect carried none
  EXPECT_EQ(fake.log.with_wrong_cookie, 0);
  EXPECT_EQ(fake.log.cookie, kCookie);
  EXPECT_EQ(fake.log.token, token);
  EXPECT_EQ(fake.log.name, "player-one");
  EXPECT_GE(fake.log.smallest_connect, wire::min_connect_bytes());
  EXPECT_EQ(client.client_id(), 42u);
}

TEST(ClientConnect, ReportsARejectionWithItsReason) {
  FakeServer fake;
  Client client;
  const std::string error = connect_against(fake, client, [](FakeServer& f, const wire::Connect&) {
    f.send_unstamped(wire::build_connect_rejected(f.fbb(), wire::ResultCode::ServerFull, "64 of 64 clients"));
  });
  EXPECT_NE(error.find("rejected the connection: ServerFull (64 of 64 clients)"), std::string::npos) << error;
  EXPECT_NE(error.find("--max-clients"), std::string::npos) << error;
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.client_id(), 0u);
}

TEST(ClientConnect, ReportsTokenRefusalsWithWhatToDo) {
  for (const wire::ResultCode code :
       {wire::ResultCode::TokenRequired, wire::ResultCode::TokenInvalid, wire::ResultCode::TokenExpired}) {
    SCOPED_TRACE(wire::EnumNameResultCode(code));
    FakeServer fake;
    Client client;
    const Bytes token(48, 0x5A);
    const std::string error = connect_against(
        fake, client,
        [code](FakeServer& f, const wire::Connect&) {
          f.send_unstamped(wire::build_connect_rejected(f.fbb(), code, "token check failed"));
        },
        code == wire::ResultCode::TokenRequired ? std::span<const uint8_t>{} : std::span<const uint8_t>(token));
    EXPECT_NE(error.find(std::string("rejected the connection: ") + wire::EnumNameResultCode(code) +
                         " (token check failed)"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("fresh connect token"), std::string::npos) << error;
    EXPECT_FALSE(client.connected());
  }
}

TEST(ClientConnect, ReportsAVersionMismatchEitherWay) {
  {  // the server says so in a ConnectRejected
    FakeServer fake;
    Client client;
    const std::string error = connect_against(fake, client, [](FakeServer& f, const wire::Connect&) {
      f.send_unstamped(wire::build_connect_rejected(f.fbb(), wire::ResultCode::VersionMismatch, {}));
    });
    EXPECT_NE(error.find("VersionMismatch"), std::string::npos) << error;
    EXPECT_NE(error.find("speaks protocol version " + std::to_string(wire::kProtocolVersion)), std::string::npos)
        << error;
  }
  {  // the server answers in an envelope of another version: dropped, and named at the timeout
    FakeServer fake;
    Client client;
    std::thread server([&] {
      if (fake.wait_for(wire::Message::Connect) == nullptr) return;
      flatbuffers::FlatBufferBuilder& fbb = fake.fbb();
      fbb.Clear();
      const auto challenge = wire::CreateChallenge(fbb, fbb.CreateVector(kCookie));
      wire::FinishEnvelopeBuffer(fbb, wire::CreateEnvelope(fbb, wire::kProtocolVersion + 1, wire::Message::Challenge,
                                                           challenge.Union()));
      fake.send_unstamped({fbb.GetBufferPointer(), fbb.GetSize()});
    });
    std::string error;
    EXPECT_FALSE(client.connect("127.0.0.1", fake.port(), milliseconds{600}, &error));
    server.join();
    EXPECT_NE(error.find("another protocol version"), std::string::npos) << error;
    EXPECT_EQ(client.stats().drops_by_reason[static_cast<size_t>(wire::DropReason::VersionMismatch)], 1u);
  }
}

TEST(ClientConnect, RefusesAnAcceptWithAnUnusableQuantization) {
  FakeServer fake;
  Client client;
  wire::QuantizationConfig broken;
  broken.world_bound_m = 0.0f;  // validate() requires (0, 32768]
  ASSERT_FALSE(broken.validate(nullptr));
  const std::string error =
      connect_against(fake, client, [&](FakeServer& f, const wire::Connect&) { accept(f, broken); });
  EXPECT_NE(error.find("unusable snapshot quantisation"), std::string::npos) << error;
  EXPECT_FALSE(client.connected());
}

TEST(ClientConnect, RequestsAreNotSentWithoutASession) {
  Client client;
  EXPECT_EQ(client.create_object(ObjectDesc{}), 0u);
  EXPECT_EQ(client.destroy(ObjectID{1, 1}), 0u);
  EXPECT_EQ(client.apply_force(ObjectID{1, 1}, {1, 0, 0}), 0u);
  EXPECT_EQ(client.apply_impulse(ObjectID{1, 1}, {1, 0, 0}), 0u);
  EXPECT_EQ(client.set_velocity(ObjectID{1, 1}, {1, 0, 0}), 0u);
  EXPECT_EQ(client.set_interest_sphere({0, 0, 0}, 10.0f), 0u);
  EXPECT_EQ(client.raycast({0, 1, 0}, {0, -2, 0}), 0u);
  EXPECT_EQ(client.ping(), 0u);
  EXPECT_TRUE(client.poll().empty());
  EXPECT_EQ(client.requests_in_flight(), 0u);
  EXPECT_EQ(client.stats().datagrams_out, 0u);
  client.disconnect();  // harmless when idle
}

TEST_F(FakeSession, ConnectAcceptedFillsTheSessionInfo) {
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.client_id(), 42u);
  EXPECT_EQ(client.tick_hz(), 120);
  EXPECT_EQ(client.snapshot_hz(), 30);
  EXPECT_EQ(client.server_tick(), 1000u);
  EXPECT_EQ(client.max_objects(), 250u);
  EXPECT_EQ(client.snapshot_tick(), 0u);
  EXPECT_TRUE(client.objects().empty());
  EXPECT_EQ(client.requests_in_flight(), 0u);
  EXPECT_EQ(fake.log.cookie, kCookie);
}

// ------------------------------------------------------------------------------ snapshots

TEST_F(FakeSession, SnapshotsApplyEntriesDeltasAndExits) {
  world.set(1010, three_objects());
  const uint32_t first = send_snapshot();
  EXPECT_EQ(world.stats.entries, 3u);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1010});
  EXPECT_EQ(client.snapshot_tick(), 1010u);
  expect_view(client, world);  // sorted by id, every field through the quantisation
  ASSERT_NE(client.find(ObjectID{1, 1}), nullptr);
  EXPECT_EQ(client.find(ObjectID{1, 1})->position, (Vec3{1.5f, 2.0f, -3.25f}));  // on the 1/512 m grid: exact
  EXPECT_EQ(client.find(ObjectID{2, 1}), nullptr);  // same slot, other generation
  EXPECT_EQ(client.find(ObjectID{3, 1}), nullptr);
  world.ack(first);  // the client applied it, so it acks it

  // The box moves; the resting sphere and the capsule keep their states and cost nothing.
  std::vector<FakeObject> objects = world.objects();
  objects[0].position = {2.0f, 1.75f, -3.0f};
  objects[0].velocity = {0.5f, -2.0f, 0.5f};
  objects[2].velocity = {1.0f, 0.0f, 0.0f};  // unchanged
  world.set(1011, objects);
  const uint32_t second = send_snapshot();
  EXPECT_EQ(world.stats.deltas, 1u);
  EXPECT_EQ(world.stats.records, 1u);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1011});
  expect_view(client, world);
  world.ack(second);

  // The capsule leaves (destroyed): an exit; its index comes back as a new object (new generation).
  objects.pop_back();
  world.set(1012, objects);
  const uint32_t third = send_snapshot();
  EXPECT_EQ(world.stats.exits, 1u);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1012});
  expect_view(client, world);
  EXPECT_EQ(client.find(ObjectID{5, 1}), nullptr);
  world.ack(third);

  FakeObject reborn;
  reborn.id = ObjectID{5, 2};
  reborn.position = {10.0f, 10.0f, 10.0f};
  objects.push_back(reborn);
  world.set(1013, objects);
  send_snapshot();
  EXPECT_EQ(world.stats.entries, 1u);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1013});
  expect_view(client, world);
  ASSERT_NE(client.find(ObjectID{5, 2}), nullptr);
  EXPECT_EQ(client.stats().snapshots_completed, 4u);
  EXPECT_EQ(client.stats().snapshots_rejected, 0u);
  EXPECT_EQ(client.stats().datagrams_dropped, 0u);
  EXPECT_EQ(client.server_tick(), 1013u);
}

// A headless client (interpolation off) keeps the same view and acks, but no pose buffer.
TEST_F(FakeSession, AHeadlessClientKeepsTheViewWithoutAPoseBuffer) {
  ClientConfig headless;
  headless.interpolation = false;
  std::string error;
  ASSERT_TRUE(client.set_config(headless, &error)) << error;
  world.set(1010, three_objects());
  world.ack(send_snapshot());
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1010});
  std::vector<FakeObject> objects = world.objects();
  objects[0].position = {2.0f, 1.75f, -3.0f};
  world.set(1011, objects);
  send_snapshot();
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1011});
  expect_view(client, world);
  EXPECT_EQ(client.interpolator().size(), 0u);
  EXPECT_FALSE(client.pose_at_tick(ObjectID{1, 1}, 1011.0).has_value());

  // Turned back on, the buffer starts from the current view.
  ASSERT_TRUE(client.set_config(ClientConfig{}, &error)) << error;
  EXPECT_EQ(client.interpolator().size(), 3u);
  EXPECT_TRUE(client.pose_at_tick(ObjectID{1, 1}, 1011.0).has_value());
}

// Without snapshot views a poll lists each snapshot with no objects; objects() still follows
// every delta (updated in place at the receiver's positions) and every entry and exit.
TEST_F(FakeSession, WithoutSnapshotViewsObjectsStillFollowsTheView) {
  ClientConfig config;
  config.interpolation = false;
  config.snapshot_views = false;
  std::string error;
  ASSERT_TRUE(client.set_config(config, &error)) << error;
  world.set(1010, three_objects());
  world.ack(send_snapshot());
  const PollResult* last = nullptr;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && client.snapshot_tick() != 1010; ++i) {
    last = &client.poll(milliseconds{1});
    if (!last->snapshots.empty()) break;
  }
  ASSERT_NE(last, nullptr);
  ASSERT_EQ(last->snapshots.size(), 1u);
  EXPECT_EQ(last->snapshots[0].tick, 1010u);
  EXPECT_EQ(last->snapshots[0].count, 0u);
  EXPECT_TRUE(last->snapshot_objects.empty());
  expect_view(client, world);

  std::vector<FakeObject> objects = world.objects();
  for (int step = 0; step < 5; ++step) {  // deltas only: the in-place path
    objects[static_cast<size_t>(step % 3)].position.x += 0.25f;
    objects[2].velocity.y -= 0.5f;
    world.set(1011 + static_cast<uint64_t>(step), objects);
    world.ack(send_snapshot());
    EXPECT_EQ(deliver(1), std::vector<uint64_t>{1011 + static_cast<uint64_t>(step)});
    expect_view(client, world);
  }
  objects.erase(objects.begin() + 1);  // an exit beside a delta: the rebuild path
  objects[0].position.z += 1.0f;
  world.set(1016, objects);
  world.ack(send_snapshot());
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1016});
  expect_view(client, world);
}

TEST_F(FakeSession, CorruptedSnapshotsAreRejectedCountedAndNeverAcked) {
  world.set(1020, three_objects());
  const uint32_t good = send_snapshot();
  ASSERT_EQ(deliver(1), std::vector<uint64_t>{1020});
  world.ack(good);
  const std::vector<ObjectState> before(client.objects().begin(), client.objects().end());

  std::vector<FakeObject> moved = world.objects();
  for (FakeObject& o : moved) o.position.y += 1.0f;
  world.set(1021, moved);
  auto send_corrupted = [&](const std::function<void(Bytes&)>& corrupt) {
    const uint32_t sequence = fake.next_sequence;
    Bytes payload = world.write(sequence);
    corrupt(payload);
    fake.send(wire::build_snapshot(fake.fbb(), world.tick(), payload));
    EXPECT_TRUE(deliver(1).empty()) << "a corrupted snapshot was applied";
    return sequence;
  };
  send_corrupted([](Bytes& p) { p[0] ^= 0x01; });                    // a bit of the checksum
  send_corrupted([](Bytes& p) { p.resize(3); });                     // cut inside the checksum
  send_corrupted([](Bytes& p) { p[p.size() / 2] ^= 0x10; });         // a bit inside the records
  const uint32_t last_bad = send_corrupted([](Bytes& p) { p.assign(p.size(), 0xFF); });  // garbage

  const ClientStats& stats = client.stats();
  EXPECT_EQ(stats.snapshots_rejected, 4u);
  uint64_t by_error = 0;
  for (const uint64_t n : stats.snapshot_errors) by_error += n;
  EXPECT_EQ(by_error, 4u);  // each rejection counted once, under its reason
  EXPECT_EQ(stats.snapshot_errors[static_cast<size_t>(wire::SnapshotError::None)], 0u);
  EXPECT_GE(stats.snapshot_errors[static_cast<size_t>(wire::SnapshotError::ChecksumMismatch)], 1u);
  EXPECT_GE(stats.snapshot_errors[static_cast<size_t>(wire::SnapshotError::Truncated)], 1u);
  EXPECT_EQ(stats.snapshots_completed, 1u);
  EXPECT_EQ(client.snapshot_tick(), 1020u);
  ASSERT_EQ(client.objects().size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) expect_same(client.objects()[i], before[i]);  // view unchanged

  // None of the rejected packets is acked: the newest the client acks is the good snapshot.
  const wire::PacketHeader h = header_of_next_ping();
  EXPECT_EQ(h.ack(), good);
  EXPECT_LT(good, last_bad);

  // The next intact snapshot (deltas against the acked baseline) applies, and only it is acked.
  const uint32_t intact = send_snapshot();
  EXPECT_GT(world.stats.deltas, 0u);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1021});
  expect_view(client, world);
  const wire::PacketHeader after = header_of_next_ping();
  EXPECT_EQ(after.ack(), intact);
  for (uint32_t bad = good + 1; bad < intact; ++bad) {
    EXPECT_EQ((after.ack_bits() >> (intact - 1 - bad)) & 1u, 0u) << "rejected packet " << bad << " was acked";
  }
  EXPECT_EQ((after.ack_bits() >> (intact - 1 - good)) & 1u, 1u) << "the good packet is no longer acked";
}

TEST_F(FakeSession, StaleAndDuplicateSnapshotsAreIgnored) {
  world.set(1030, three_objects());
  const uint32_t older = fake.next_sequence++;
  const Bytes older_payload = world.write(older);
  std::vector<FakeObject> moved = world.objects();
  for (FakeObject& o : moved) o.position.x -= 2.0f;
  world.set(1031, moved);
  const uint32_t newer = fake.next_sequence++;
  const Bytes newer_payload = world.write(newer);

  // Reordered by the network: the newer one first.
  fake.send_as(wire::build_snapshot(fake.fbb(), 1031, newer_payload), newer);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1031});
  expect_view(client, world);
  fake.send_as(wire::build_snapshot(fake.fbb(), 1030, older_payload), older);  // late
  fake.send_as(wire::build_snapshot(fake.fbb(), 1031, newer_payload), newer);  // duplicated
  EXPECT_TRUE(deliver(2).empty());
  EXPECT_EQ(client.stats().snapshot_parts_stale, 2u);
  EXPECT_EQ(client.stats().snapshots_completed, 1u);
  EXPECT_EQ(client.stats().snapshots_rejected, 0u);
  EXPECT_EQ(client.snapshot_tick(), 1031u);
  expect_view(client, world);  // still the newer state
  EXPECT_EQ(header_of_next_ping().ack(), newer);
}

// ------------------------------------------------------------------------------ requests

TEST_F(FakeSession, RequestsAreResentUntilAnsweredAndEachResultIsDeliveredOnce) {
  const uint32_t create = client.create_object(make_sphere(0.5f, {0, 3, 0}));
  const uint32_t interest = client.set_interest_sphere({1, 2, 3}, 40.0f);
  const uint32_t destroy = client.destroy(ObjectID{7, 1});
  EXPECT_EQ(create, 1u);  // the session's request sequence
  EXPECT_EQ(interest, 2u);
  EXPECT_EQ(destroy, 3u);
  EXPECT_EQ(client.requests_in_flight(), 3u);

  // The first sends, in order.
  const wire::Envelope* e = fake.wait_for(wire::Message::CreateObject);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->message_as_CreateObject()->request_id(), create);
  const uint32_t first_sequence = wire::header_of(*e).sequence();
  EXPECT_NE(first_sequence, 0u);
  e = fake.wait_for(wire::Message::SetInterest);
  ASSERT_NE(e, nullptr);
  const wire::SetInterest& si = *e->message_as_SetInterest();
  EXPECT_EQ(si.request_id(), interest);
  EXPECT_EQ(si.kind(), wire::InterestKind::Sphere);
  EXPECT_EQ(wire::to_vec3(*si.center()), (Vec3{1, 2, 3}));
  EXPECT_EQ(si.radius(), 40.0f);
  e = fake.wait_for(wire::Message::DestroyObject);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->message_as_DestroyObject()->request_id(), destroy);

  // Unanswered, the create is sent again (poll() resends), with the same id and a newer sequence.
  const wire::Envelope* resent = nullptr;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && resent == nullptr; ++i) {
    client.poll(milliseconds{1});
    resent = fake.wait_for(wire::Message::CreateObject, milliseconds{5});
  }
  ASSERT_NE(resent, nullptr) << "the unanswered request was never resent";
  EXPECT_EQ(resent->message_as_CreateObject()->request_id(), create);
  EXPECT_GT(wire::header_of(*resent).sequence(), first_sequence);
  EXPECT_GE(client.stats().requests_resent, 1u);
  EXPECT_EQ(client.requests_in_flight(), 3u);

  // The server answers the create twice (it answers every resend), and 3 before 2.
  fake.send(wire::build_request_result(fake.fbb(), create, wire::ResultCode::Ok, ObjectID{9, 1}, {}));
  fake.send(wire::build_request_result(fake.fbb(), create, wire::ResultCode::Ok, ObjectID{9, 1}, {}));
  fake.send(wire::build_request_result(fake.fbb(), destroy, wire::ResultCode::StaleId, ObjectID{7, 1}, "stale"));
  fake.send(wire::build_request_result(fake.fbb(), interest, wire::ResultCode::Ok, ObjectID{}, {}));
  deliver(4);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].request_id, create);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[0].id, (ObjectID{9, 1}));
  EXPECT_EQ(results[1].request_id, destroy);
  EXPECT_EQ(results[1].code, ResultCode::StaleId);
  EXPECT_EQ(results[1].message, "stale");
  EXPECT_EQ(results[2].request_id, interest);
  EXPECT_EQ(client.stats().results_duplicate, 1u);
  EXPECT_EQ(client.requests_in_flight(), 0u);

  // Answered requests are never sent again: after what was queued before the answers, watch for
  // six minimum resend intervals.
  fake.drain();
  const uint64_t resent_before = client.stats().requests_resent;
  const Clock::time_point watch_end = Clock::now() + milliseconds{300};
  for (int i = 0; i < kMaxIterations && Clock::now() < watch_end; ++i) client.poll(milliseconds{1});
  EXPECT_EQ(fake.wait_for(wire::Message::CreateObject, milliseconds{20}), nullptr);
  EXPECT_EQ(client.stats().requests_resent, resent_before);
  EXPECT_EQ(client.create_object(make_sphere(0.5f, {0, 3, 0})), 4u);  // the sequence continues
}

TEST_F(FakeSession, AnAnswerToARequestNeverSentIsDropped) {
  fake.send(wire::build_request_result(fake.fbb(), 77, wire::ResultCode::Ok, ObjectID{1, 1}, {}));
  fake.send(wire::build_raycast_result(fake.fbb(), 78, wire::ResultCode::Ok, 1, {}, false, {}));
  deliver(2);
  EXPECT_TRUE(results.empty());
  EXPECT_EQ(client.stats().results_duplicate, 2u);
}

// ------------------------------------------------------------------------------ events, pongs

TEST_F(FakeSession, CollisionEventsAreDeliveredOncePerSequence) {
  auto event = [](uint32_t sequence) {
    return wire::CollisionEvent(1040 + sequence, to_wire(ObjectID{1, 1}), to_wire(ObjectID{sequence + 1, 1}),
                                wire::Vec3(0, 0.5f * static_cast<float>(sequence), 0), wire::Vec3(0, 1, 0), sequence,
                                sequence % 2 == 1 ? wire::ContactEventType::Begin : wire::ContactEventType::End);
  };
  // Events are resent until acked, so the same sequence can arrive several times and out of order.
  const std::vector<std::vector<uint32_t>> datagrams{{1, 2}, {2, 3}, {1, 3}, {5}, {4, 5}, {1, 2, 3, 4, 5}};
  for (const std::vector<uint32_t>& sequences : datagrams) {
    std::vector<wire::CollisionEvent> events;
    for (const uint32_t s : sequences) events.push_back(event(s));
    fake.send(wire::build_collision_events(fake.fbb(), events, wire::QuantizationConfig{}));
  }
  deliver(datagrams.size());
  ASSERT_EQ(collisions.size(), 5u);
  const std::vector<uint32_t> order{1, 2, 3, 5, 4};  // arrival order of first copies
  for (size_t i = 0; i < order.size(); ++i) {
    const uint32_t s = order[i];
    EXPECT_EQ(collisions[i].sequence, s);
    EXPECT_EQ(collisions[i].tick, 1040u + s);
    EXPECT_EQ(collisions[i].a, (ObjectID{1, 1}));
    EXPECT_EQ(collisions[i].b, (ObjectID{s + 1, 1}));
    EXPECT_EQ(collisions[i].point, (Vec3{0, 0.5f * static_cast<float>(s), 0}));
    EXPECT_EQ(collisions[i].normal, (Vec3{0, 1, 0}));
    EXPECT_EQ(collisions[i].type, s % 2 == 1 ? ContactEventType::Begin : ContactEventType::End);
  }
  EXPECT_EQ(client.stats().events_duplicate, 9u);  // 14 received, 5 delivered
  EXPECT_EQ(client.stats().event_blocks_rejected, 0u);
  EXPECT_EQ(client.server_tick(), 1045u);
}

TEST_F(FakeSession, CollisionEventsArriveQuantisedWithinTheirStatedBounds) {
  // A point off the 1/512 m grid and a tilted normal: the client sees them within half a
  // position step per axis and within max_normal_error_rad.
  const Vec3 point{1.23456f, 0.0012f, -7.65432f};
  const Vec3 normal = normalize_or(Vec3{0.3f, 0.9f, -0.2f}, Vec3{0, 1, 0});
  const std::vector<wire::CollisionEvent> events{
      wire::CollisionEvent(2000, to_wire(ObjectID{0, 1}), to_wire(ObjectID{7, 3}), wire::to_wire(point),
                           wire::to_wire(normal), 1, wire::ContactEventType::Begin)};
  fake.send(wire::build_collision_events(fake.fbb(), events, wire::QuantizationConfig{}));
  deliver(1);
  ASSERT_EQ(collisions.size(), 1u);
  const CollisionEvent& e = collisions[0];
  EXPECT_EQ(e.tick, 2000u);
  EXPECT_EQ(e.a, (ObjectID{0, 1}));
  EXPECT_EQ(e.b, (ObjectID{7, 3}));
  EXPECT_EQ(e.sequence, 1u);
  const float half_step = 0.5f / 512.0f;
  EXPECT_LE(std::fabs(e.point.x - point.x), half_step);
  EXPECT_LE(std::fabs(e.point.y - point.y), half_step);
  EXPECT_LE(std::fabs(e.point.z - point.z), half_step);
  const double cos_angle = std::min(1.0, static_cast<double>(dot(e.normal, normal)));
  EXPECT_LE(std::acos(cos_angle), wire::max_normal_error_rad() * 1.01);
}

TEST_F(FakeSession, CorruptedEventBlocksAreRejectedCountedAndNeverAcked) {
  const wire::QuantizationConfig quant;
  const std::vector<wire::CollisionEvent> events{
      wire::CollisionEvent(1500, to_wire(ObjectID{1, 1}), to_wire(ObjectID{2, 1}), wire::Vec3(0, 0.5f, 0),
                           wire::Vec3(0, 1, 0), 1, wire::ContactEventType::Begin),
      wire::CollisionEvent(1501, to_wire(ObjectID{1, 1}), to_wire(ObjectID{3, 1}), wire::Vec3(1, 0.5f, 0),
                           wire::Vec3(0, 1, 0), 2, wire::ContactEventType::End)};
  Bytes block;
  ASSERT_TRUE(wire::encode_collision_events(events, quant, &block));
  auto send_corrupted = [&](const std::function<void(Bytes&)>& corrupt) {
    Bytes bad = block;
    corrupt(bad);
    const uint32_t sequence = fake.send(wire::build_collision_events_block(fake.fbb(), bad));
    deliver(1);
    return sequence;
  };
  send_corrupted([](Bytes& b) { b[0] ^= 0x01; });               // a bit of the checksum
  send_corrupted([](Bytes& b) { b.resize(b.size() - 1); });     // truncated
  send_corrupted([](Bytes& b) { b[b.size() / 2] ^= 0x10; });    // a bit inside the events
  const uint32_t last_bad = send_corrupted([](Bytes& b) { b.clear(); });  // no block at all
  EXPECT_TRUE(collisions.empty()) << "an event of a corrupted block was delivered";
  const ClientStats& stats = client.stats();
  EXPECT_EQ(stats.event_blocks_rejected, 4u);
  uint64_t by_error = 0;
  for (const uint64_t n : stats.event_block_errors) by_error += n;
  EXPECT_EQ(by_error, 4u);
  EXPECT_EQ(stats.event_block_errors[static_cast<size_t>(wire::EventBlockError::ChecksumMismatch)], 3u);
  EXPECT_EQ(stats.event_block_errors[static_cast<size_t>(wire::EventBlockError::Truncated)], 1u);

  // None of them is acked; the intact copy (the server's resend) is delivered and acked.
  const uint32_t intact = fake.send(wire::build_collision_events_block(fake.fbb(), block));
  deliver(1);
  ASSERT_EQ(collisions.size(), 2u);
  EXPECT_EQ(collisions[0].sequence, 1u);
  EXPECT_EQ(collisions[1].sequence, 2u);
  EXPECT_EQ(collisions[1].tick, 1501u);
  const wire::PacketHeader after = header_of_next_ping();
  EXPECT_EQ(after.ack(), intact);
  for (uint32_t bad = last_bad - 3; bad <= last_bad; ++bad) {
    EXPECT_EQ((after.ack_bits() >> (intact - 1 - bad)) & 1u, 0u) << "rejected packet " << bad << " was acked";
  }
}

TEST_F(FakeSession, DeliversPongsAndServerDisconnect) {
  const uint64_t nonce = client.ping();
  ASSERT_NE(fake.wait_for(wire::Message::Ping), nullptr);
  fake.send(wire::build_pong(fake.fbb(), nonce, 1042, 8'683'333));
  fake.send(wire::build_pong(fake.fbb(), nonce, 1042, 8'683'333));  // duplicated: dropped
  deliver(2);
  ASSERT_EQ(pongs.size(), 1u);
  EXPECT_EQ(pongs[0].nonce, nonce);
  EXPECT_EQ(pongs[0].server_tick, 1042u);
  EXPECT_GT(pongs[0].rtt.count(), 0);
  ASSERT_TRUE(client.last_rtt().has_value());
  EXPECT_EQ(client.server_tick(), 1042u);
  EXPECT_EQ(client.stats().datagrams_dropped, 1u);

  fake.send(wire::build_disconnect(fake.fbb(), "server shutting down"));
  deliver(1);
  EXPECT_EQ(disconnected_reason, std::optional<std::string>("server shutting down"));
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.client_id(), 0u);
  EXPECT_EQ(client.create_object(ObjectDesc{}), 0u);  // nothing is sent after the session ended
}

TEST_F(FakeSession, DropsMalformedAndHostileDatagrams) {
  const std::array<uint8_t, 16> garbage{0xde, 0xad, 0xbe, 0xef, 'I', 'M', 'P', 'X', 1, 2, 3, 4, 5, 6, 7, 8};
  fake.send_raw(garbage);                                                  // BadIdentifier
  fake.send_raw(std::span<const uint8_t>(garbage.data(), 3));              // Empty (too short)
  fake.send(wire::build_ping(fake.fbb(), 7));                              // WrongDirection
  fake.send(wire::build_pong(fake.fbb(), 999, 1, 2));                      // a pong nobody asked for
  fake.send_unstamped(wire::build_snapshot(fake.fbb(), 1050, Bytes(16, 0)));  // a snapshot without a sequence
  fake.send(wire::build_challenge(fake.fbb(), kCookie));                   // handshake answers mid-session
  fake.send_unstamped(wire::build_connect_rejected(fake.fbb(), wire::ResultCode::ServerFull, "late"));
  wire::AcceptedArgs other;
  other.client_id = 43;
  fake.send(wire::build_connect_accepted(fake.fbb(), other));              // someone else's session
  fake.fbb().Clear();  // a snapshot without its data vector: an empty payload, rejected by the decoder
  fake.send(wire::finish(fake.fbb(), wire::Message::Snapshot, wire::CreateSnapshot(fake.fbb(), 1051).Union()));

  EXPECT_TRUE(deliver(9).empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 9u);
  const auto& by_reason = client.stats().drops_by_reason;
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::None)], 6u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::BadIdentifier)], 1u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::Empty)], 1u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::WrongDirection)], 1u);
  EXPECT_EQ(client.stats().snapshots_rejected, 1u);
  EXPECT_TRUE(client.objects().empty());
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.client_id(), 42u);

  // A stranger's datagrams are dropped even when well formed.
  RawSocket stranger;
  world.set(1052, three_objects());
  const Bytes& payload = world.write(fake.next_sequence);
  const auto built = wire::build_snapshot(stranger.fbb, 1052, payload);
  Bytes datagram(built.begin(), built.end());
  ASSERT_TRUE(wire::stamp_header(datagram, wire::PacketHeader(fake.next_sequence, 0, 0)));
  stranger.send(datagram, udp::endpoint(asio::ip::address_v4::loopback(), client.local_port()));
  EXPECT_TRUE(deliver(1).empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 10u);
  EXPECT_TRUE(client.objects().empty());

  // The session still works after all that: the same datagram from the server applies.
  fake.send_as(datagram, fake.next_sequence++);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1052});
  expect_view(client, world);
}

// ------------------------------------------------------------------------------ other requests

TEST_F(FakeSession, SendsTorqueAngularVelocityAndRaycastRequestsAndDeliversRaycastResults) {
  // The requests reach the server as built, each with the next request id.
  const ObjectID id{9, 3};
  const uint32_t torque_id = client.apply_torque(id, {0, 5, 0});
  const uint32_t spin_id = client.set_angular_velocity(id, {1, 0, 0});
  const uint32_t closest_id = client.raycast({0, 10, 0}, {0, -20, 0});
  const uint32_t all_id = client.raycast({0, 10, 0}, {0, -20, 0}, true);
  const uint32_t bad_id = client.raycast({0, 10, 0}, {0, 0, 0});  // sent as is: the server judges
  EXPECT_EQ((std::vector<uint32_t>{torque_id, spin_id, closest_id, all_id, bad_id}),
            (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  {
    // The first copy of each request, in request order (later copies are resends; keepalive
    // pings are ignored).
    std::vector<wire::Message> types;
    std::set<uint32_t> seen;
    const Clock::time_point deadline = Clock::now() + kWaitTimeout;
    for (int i = 0; i < kMaxIterations && Clock::now() < deadline && seen.size() < 5; ++i) {
      const wire::Envelope* e = fake.next(milliseconds{5});
      if (e == nullptr) continue;
      if (const auto* m = e->message_as_ApplyTorque()) {
        if (!seen.insert(m->request_id()).second) continue;
        EXPECT_EQ(m->request_id(), torque_id);
        EXPECT_EQ(from_wire(m->id()), id);
        EXPECT_EQ(wire::to_vec3(*m->torque()), (Vec3{0, 5, 0}));
      } else if (const auto* m = e->message_as_SetAngularVelocity()) {
        if (!seen.insert(m->request_id()).second) continue;
        EXPECT_EQ(m->request_id(), spin_id);
        EXPECT_EQ(wire::to_vec3(*m->angular_velocity()), (Vec3{1, 0, 0}));
      } else if (const auto* m = e->message_as_Raycast()) {
        if (!seen.insert(m->request_id()).second) continue;
        EXPECT_EQ(wire::to_vec3(*m->origin()), (Vec3{0, 10, 0}));
        EXPECT_EQ(m->all(), m->request_id() == all_id);
      } else {
        continue;
      }
      types.push_back(e->message_type());
    }
    EXPECT_EQ(types, (std::vector<wire::Message>{wire::Message::ApplyTorque, wire::Message::SetAngularVelocity,
                                                 wire::Message::Raycast, wire::Message::Raycast,
                                                 wire::Message::Raycast}));
  }

  // The answers: one hit, three hits flagged as truncated, an error with its message, and the
  // torque and spin results. The closest-hit answer comes twice (a resend's): delivered once.
  const std::vector<wire::RayHitEntry> hits{
      wire::RayHitEntry(to_wire(ObjectID{2, 1}), wire::Vec3(0, 6.5f, 0), wire::Vec3(0, 1, 0), 0.175f),
      wire::RayHitEntry(to_wire(ObjectID{3, 1}), wire::Vec3(0, 3.5f, 0), wire::Vec3(0, 1, 0), 0.325f),
      wire::RayHitEntry(to_wire(ObjectID{1, 1}), wire::Vec3(0, 0, 0), wire::Vec3(0, 1, 0), 0.5f)};
  for (int copy = 0; copy < 2; ++copy) {
    fake.send(wire::build_raycast_result(fake.fbb(), closest_id, wire::ResultCode::Ok, 1070, std::span(hits).first(1),
                                         false, {}));
  }
  fake.send(wire::build_raycast_result(fake.fbb(), all_id, wire::ResultCode::Ok, 1070, hits, true, {}));
  fake.send(wire::build_raycast_result(fake.fbb(), bad_id, wire::ResultCode::InvalidArgument, 0, {}, false,
                                       "translation: length must be in (0, 2000] m"));
  fake.send(wire::build_request_result(fake.fbb(), torque_id, wire::ResultCode::Ok, id, {}));
  fake.send(wire::build_request_result(fake.fbb(), spin_id, wire::ResultCode::NotOwner, id, "not yours"));
  std::vector<RaycastResult> answers;
  std::vector<std::vector<RayHit>> answer_hits;
  const uint64_t target = client.stats().datagrams_in + 6;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && client.stats().datagrams_in < target; ++i) {
    const PollResult& r = client.poll(milliseconds{1});
    for (const RaycastResult& ray : r.raycasts) {
      answers.push_back(ray);
      const auto h = r.hits_of(ray);
      answer_hits.emplace_back(h.begin(), h.end());
    }
    results.insert(results.end(), r.results.begin(), r.results.end());
  }
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].request_id, closest_id);
  EXPECT_TRUE(answers[0].ok());
  EXPECT_EQ(answers[0].tick, 1070u);
  EXPECT_FALSE(answers[0].truncated);
  ASSERT_EQ(answer_hits[0].size(), 1u);
  EXPECT_EQ(answer_hits[0][0].id, (ObjectID{2, 1}));
  EXPECT_EQ(answer_hits[0][0].point, (Vec3{0, 6.5f, 0}));
  EXPECT_EQ(answer_hits[0][0].normal, (Vec3{0, 1, 0}));
  EXPECT_EQ(answer_hits[0][0].fraction, 0.175f);
  EXPECT_EQ(answers[1].request_id, all_id);
  EXPECT_TRUE(answers[1].truncated);
  ASSERT_EQ(answer_hits[1].size(), 3u);
  EXPECT_EQ(answer_hits[1][2].id, (ObjectID{1, 1}));
  EXPECT_EQ(answers[2].request_id, bad_id);
  EXPECT_EQ(answers[2].code, ResultCode::InvalidArgument);
  EXPECT_EQ(answers[2].message, "translation: length must be in (0, 2000] m");
  EXPECT_TRUE(answer_hits[2].empty());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].request_id, torque_id);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].request_id, spin_id);
  EXPECT_EQ(results[1].code, ResultCode::NotOwner);
  EXPECT_EQ(results[1].message, "not yours");
  EXPECT_EQ(client.stats().results_duplicate, 1u);
  EXPECT_EQ(client.requests_in_flight(), 0u);
  EXPECT_EQ(client.stats().datagrams_dropped, 0u);
}

// ------------------------------------------------------------------------------ keepalive, disconnect

TEST_F(FakeSession, SendsKeepalivePingsWhenIdleAndDisconnectRedundantly) {
  // Nothing sent since Connect: within about 1 s poll() sends a keepalive Ping on its own.
  const wire::Envelope* ping = nullptr;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && ping == nullptr; ++i) {
    client.poll(milliseconds{1});
    ping = fake.wait_for(wire::Message::Ping, milliseconds{5});
  }
  ASSERT_NE(ping, nullptr) << "no keepalive ping";
  EXPECT_NE(wire::header_of(*ping).sequence(), 0u);  // session datagrams carry a sequence

  client.disconnect("bye");
  int disconnects = 0;
  std::set<uint32_t> sequences;
  for (const wire::Envelope* d = fake.wait_for(wire::Message::Disconnect, milliseconds{100}); d != nullptr;
       d = fake.wait_for(wire::Message::Disconnect, milliseconds{100})) {
    ++disconnects;
    EXPECT_EQ(d->message_as_Disconnect()->reason()->str(), "bye");
    sequences.insert(wire::header_of(*d).sequence());
  }
  EXPECT_EQ(disconnects, 3);
  EXPECT_EQ(sequences.size(), 3u);  // three datagrams, not one resent
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.requests_in_flight(), 0u);
}

}  // namespace
}  // namespace impulse::test
