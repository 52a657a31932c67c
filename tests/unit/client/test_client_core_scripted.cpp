// impulse::ClientCore against a scripted in-memory server, protocol version 4, on a virtual clock:
// the cookie handshake and its refusals, delta snapshots written by the real
// server::SnapshotSender (applied, rejected when corrupted and then not acked, ignored when stale),
// requests resent until answered and delivered once, collision events delivered once per
// sequence, pongs, keepalives, redundant disconnects and hostile datagrams. The fake sends exactly
// what each case needs, so the core's rules are tested without depending on the real server.
// No socket, thread, sleep or steady_clock read: what the core leaves in its outbox goes to the
// fake's inbox, what the fake sends is handed to ClientCore::receive at once, and the test moves a
// ClientCore::TimePoint forward itself (1 ms steps, update() at each), so every timer (connect
// resend and timeout, request resend, keepalive, round trip) is asserted to the millisecond.
// (Client, the UDP transport around the core, keeps its own tests in
// tests/integration/test_client_fake_server.cpp and test_client_async.cpp.)
// GCC 12 with -fsanitize=address reports a bogus -Wstringop-overflow (a memset bound of 2^64-2)
// inside std::vector code this file instantiates; the Release build and clang are clean.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "impulse/client_core.h"
#include "impulse/schemas/impulse_generated.h"
#include "server/net/snapshot_sender.h"
#include "shared/math.h"
#include "shared/net/packet_crypto.h"
#include "shared/object_id.h"
#include "shared/wire/codec.h"
#include "shared/wire/event_codec.h"
#include "shared/wire/quantize.h"
#include "shared/wire/snapshot_codec.h"
#include "tests/unit/client/virtual_clock.h"

namespace impulse::client_test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using Bytes = std::vector<uint8_t>;
using TimePoint = ClientCore::TimePoint;

/// One step of the virtual clock: the core is updated once per step.
constexpr milliseconds kStep{1};
/// Where the virtual clock starts (any value: only differences matter).
const TimePoint kStart = TimePoint{} + 1h;

/// The cookie of every fake Challenge. The client must echo it byte for byte without reading it.
const Bytes kCookie = [] {
  Bytes b(32);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(0xC0 + i);
  return b;
}();

/// The fake server's address as the client sees it.
PeerAddress server_address() {
  PeerAddress a;
  a.family = 4;
  a.bytes[0] = 127;
  a.bytes[3] = 1;
  a.port = 7777;
  return a;
}

Bytes to_bytes(const flatbuffers::Vector<uint8_t>* v) { return v ? Bytes(v->begin(), v->end()) : Bytes{}; }

milliseconds ms_since_start(TimePoint t) { return std::chrono::duration_cast<milliseconds>(t - kStart); }

/// The quantisation a server announces, from the codec's config (the defaults unless changed).
wire::QuantizationArgs to_args(const wire::QuantizationConfig& q) {
  return wire::QuantizationArgs{q.world_bound_m,    q.position_fraction_bits,        q.orientation_bits,
                                q.max_linear_speed, q.linear_velocity_fraction_bits, q.max_angular_speed,
                                q.angular_velocity_fraction_bits};
}

/// What a game passes to connect(): labelled like Client does ("host:port").
ConnectParams connect_params(std::string name = "impulse-client", Bytes token = {}, milliseconds timeout = 2000ms) {
  ConnectParams p;
  p.name = std::move(name);
  p.token = std::move(token);
  p.timeout = timeout;
  p.server_label = "127.0.0.1:7777";
  return p;
}

ObjectDesc make_sphere(float radius, Vec3 position) {
  ObjectDesc d;
  d.shape = ShapeKind::Sphere;
  d.dims = {radius, radius, radius};
  d.position = position;
  return d;
}

/// What the fake saw of the client's Connects.
struct HandshakeLog {
  int without_cookie = 0;              ///< first Connects (answered with a Challenge)
  int with_wrong_cookie = 0;
  size_t smallest_connect = SIZE_MAX;  ///< [bytes]
  Bytes cookie;                        ///< of the Connect that completed the round trip
  Bytes token;
  std::string name;
  net::KxPublicKey kx_public{};        ///< the client's key share
};

/// A scripted server, the network between it and one ClientCore, and the virtual clock. The
/// network is perfect and instant: every datagram the core leaves in its outbox lands in the
/// fake's inbox (with the time it left), and every datagram the fake sends is handed to
/// ClientCore::receive at the current virtual time (then the outbox is collected again, since
/// the core may answer at once). Session datagrams are stamped with the next packet sequence
/// (from 1) and no acks, as a server that never hears back would; handshake answers (Challenge,
/// ConnectRejected) go out unstamped, as from a server that keeps no state for the address yet.
class ScriptedServer {
 public:
  explicit ScriptedServer(ClientCore& client) : client_(client) {}

  // ------------------------------------------------------------------ the clock

  TimePoint now() const { return now_; }
  /// One step: the clock moves by kStep, the core updates, what it sends lands in the inbox.
  void step() {
    now_ += kStep;
    client_.update(now_);
    collect();
  }
  /// Steps through `span` of virtual time.
  void advance(std::chrono::nanoseconds span) {
    const TimePoint end = now_ + span;
    while (now_ < end) step();
  }
  /// Steps until `done()` holds (checked before each step) or `limit` passes. True when done.
  bool run_until(const std::function<bool()>& done, std::chrono::nanoseconds limit) {
    return step_until(now_, limit, done, [this] { step(); });
  }

  // ------------------------------------------------------------------ the client's side

  void connect(ConnectParams params) {
    client_.connect(server_address(), now_, std::move(params));
    collect();
  }
  void disconnect(std::string_view reason) {
    client_.disconnect(reason, now_);
    collect();
  }
  /// Moves what the core left in its outbox into the inbox, as its transport would send it.
  void collect() {
    DatagramQueue& out = client_.outbox();
    for (size_t i = 0; i < out.size(); ++i) inbox_.push_back(Sent{Bytes(out[i].begin(), out[i].end()), now_});
    out.clear();
  }

  // ------------------------------------------------------------------ what the client sent

  /// Client datagrams not yet read.
  size_t pending() const { return inbox_.size(); }
  void discard_pending() { inbox_.clear(); }
  /// The oldest unread client datagram, verified as the server would; its envelope is valid
  /// until the next read. Null when none is pending, or (a test failure) when it does not verify.
  const wire::Envelope* next() {
    if (inbox_.empty()) return nullptr;
    const Sent sent = std::move(inbox_.front());
    inbox_.pop_front();
    last_at_ = sent.at;
    last_size_ = sent.bytes.size();
    if (sent.bytes.size() > rx_.size()) {
      ADD_FAILURE() << "the client sent a datagram of " << sent.bytes.size() << " bytes";
      return nullptr;
    }
    size_t size = sent.bytes.size();
    if (net::is_sealed(sent.bytes)) {
      uint32_t sequence = 0;
      const net::OpenError e = net::open_session_packet(protection, sent.bytes, rx_, &size, &sequence);
      EXPECT_EQ(e, net::OpenError::None) << "the client sealed a datagram the server cannot open";
      if (e != net::OpenError::None) return nullptr;
    } else {
      EXPECT_FALSE(protection.keyed) << "the client sent plaintext in a session";
      std::copy(sent.bytes.begin(), sent.bytes.end(), rx_.begin());
    }
    const wire::Verified v =
        wire::verify_datagram(std::span<const uint8_t>(rx_.data(), size), wire::Direction::ClientToServer);
    EXPECT_EQ(v.reason, wire::DropReason::None) << "the client sent a datagram the server would drop";
    if (v.reason == wire::DropReason::None) {
      if (const wire::Connect* c = v.envelope->message_as_Connect(); c && c->kx_public() &&
                                                                     c->kx_public()->size() == log.kx_public.size()) {
        std::copy(c->kx_public()->begin(), c->kx_public()->end(), log.kx_public.begin());  // the key share
      }
    }
    return v.reason == wire::DropReason::None ? v.envelope : nullptr;
  }
  /// Reads until a datagram of `type` (others are read and ignored); null when none is pending.
  const wire::Envelope* next_of(wire::Message type) {
    while (!inbox_.empty()) {
      const wire::Envelope* e = next();
      if (e != nullptr && e->message_type() == type) return e;
    }
    return nullptr;
  }
  /// When the datagram last read left the core, and its size.
  TimePoint last_at() const { return last_at_; }
  size_t last_size() const { return last_size_; }

  // ------------------------------------------------------------------ the server's side

  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }

  /// Sends a copy of `built` with header {sequence, 0, 0} (sequence 0: left unstamped) from `from`;
  /// in a session (once accept() keyed it) a stamped datagram is sealed, as the server seals it.
  void send_as(std::span<const uint8_t> built, uint32_t sequence, const PeerAddress& from = server_address()) {
    ASSERT_LE(built.size(), tx_.size());
    std::copy(built.begin(), built.end(), tx_.begin());
    const std::span<uint8_t> bytes(tx_.data(), built.size());
    if (sequence != 0) {
      ASSERT_TRUE(wire::stamp_header(bytes, wire::PacketHeader(sequence, 0, 0)));
    }
    if (sequence != 0 && protection.keyed) {
      const size_t n = net::seal_packet(protection.send_key, sequence, bytes, sealed_);
      ASSERT_NE(n, 0u);
      last_sealed = Bytes(sealed_.begin(), sealed_.begin() + static_cast<std::ptrdiff_t>(n));
      client_.receive(std::span<const uint8_t>(sealed_.data(), n), from, now_);
    } else {
      client_.receive(bytes, from, now_);
    }
    collect();
  }

  /// The server's key share of the last accept_with() and the session's keys once it sent it;
  /// `binding` is the token's session secret, used when the fake says token_bound.
  net::KxKeyPair server_kx;
  net::PacketProtection protection;
  net::BindingSecret binding{};
  Bytes last_sealed;  ///< the last sealed datagram sent (for replay tests)
  /// Sends `built` stamped with the next sequence; returns that sequence.
  uint32_t send(std::span<const uint8_t> built) {
    const uint32_t sequence = next_sequence++;
    send_as(built, sequence);
    return sequence;
  }
  void send_unstamped(std::span<const uint8_t> built) { send_as(built, 0); }
  /// Sends raw bytes (garbage) to the client.
  void send_raw(std::span<const uint8_t> bytes) {
    client_.receive(bytes, server_address(), now_);
    collect();
  }

  /// The server side of the handshake: answers every Connect without the cookie with a Challenge
  /// until one echoes kCookie, then calls `answer` with it. Other datagrams are read and ignored.
  /// Steps the clock while nothing is pending (bounded by `limit`). False when no such Connect came.
  bool serve_handshake(const std::function<void(ScriptedServer&, const wire::Connect&)>& answer,
                       milliseconds limit = 5000ms) {
    const TimePoint end = now_ + limit;
    // Bounded even if the client answered every Challenge at once without the cookie.
    constexpr int kMaxConnects = 1000;
    for (int connects = 0; connects < kMaxConnects;) {
      while (const wire::Envelope* e = next_of(wire::Message::Connect)) {
        if (++connects >= kMaxConnects) break;
        const wire::Connect& m = *e->message_as_Connect();
        log.smallest_connect = std::min(log.smallest_connect, last_size_);
        const Bytes cookie = to_bytes(m.cookie());
        if (cookie != kCookie) {
          ++(cookie.empty() ? log.without_cookie : log.with_wrong_cookie);
          send_unstamped(wire::build_challenge(fbb_, kCookie));
          continue;
        }
        log.cookie = cookie;
        log.token = to_bytes(m.token());
        log.name = m.client_name() ? m.client_name()->str() : std::string{};
        if (m.kx_public() != nullptr && m.kx_public()->size() == log.kx_public.size()) {
          std::copy(m.kx_public()->begin(), m.kx_public()->end(), log.kx_public.begin());
        }
        answer(*this, m);
        return true;
      }
      if (now_ >= end) return false;
      step();
    }
    ADD_FAILURE() << "the client sent " << kMaxConnects << " Connects without echoing the cookie";
    return false;
  }

  uint32_t next_sequence = 1;  ///< of the next session datagram
  HandshakeLog log;

 private:
  /// A client datagram and the virtual time it left the outbox.
  struct Sent {
    Bytes bytes;
    TimePoint at;
  };

  ClientCore& client_;
  TimePoint now_ = kStart;
  std::deque<Sent> inbox_;
  TimePoint last_at_{};
  size_t last_size_ = 0;
  flatbuffers::FlatBufferBuilder fbb_{2048};
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> tx_{};
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> rx_{};
  std::array<uint8_t, wire::kMaxDatagramBytes> sealed_{};
};

using Answer = std::function<void(ScriptedServer&, const wire::Connect&)>;

/// Sends ConnectAccepted `a` with a fresh key share (plaintext, as the server does) and keys the
/// fake's session, so everything it sends afterwards is sealed.
void accept_with(ScriptedServer& fake, wire::AcceptedArgs a, bool token_bound = false) {
  ASSERT_TRUE(net::make_kx_keypair(&fake.server_kx));
  a.kx_public = fake.server_kx.public_key;
  a.client_kx_public = fake.log.kx_public;  // the share it answers (protocol 6)
  a.token_bound = token_bound;
  fake.protection = net::PacketProtection{};
  fake.send(wire::build_connect_accepted(fake.fbb(), a));
  net::SessionKeys keys;
  ASSERT_TRUE(net::server_session_keys(fake.server_kx, fake.log.kx_public,
                                       token_bound ? fake.binding : net::BindingSecret{}, &keys));
  fake.protection.send_key = keys.server_to_client;
  fake.protection.receive_key = keys.client_to_server;
  fake.protection.keyed = true;
}

/// The ConnectAccepted of the fake sessions: client 42, 120 Hz ticks, 30 Hz snapshots, tick 1000,
/// the given quantisation (the default), a quota of 250 objects.
void accept(ScriptedServer& fake, const wire::QuantizationConfig& quant = {}) {
  wire::AcceptedArgs a;
  a.client_id = 42;
  a.tick_hz = 120;
  a.snapshot_hz = 30;
  a.tick = 1000;
  a.quantization = to_args(quant);
  a.max_objects = 250;
  a.first_request_id = 1;
  accept_with(fake, a);
}


/// A connect (with `token`) through a fake handshake that ends with `answer`; returns the
/// client's error (kind None when it connected). The fake answers at once, so the connect is
/// decided when this returns.
ConnectionError connect_against(ScriptedServer& fake, const ClientCore& client, const Answer& answer,
                                Bytes token = {}) {
  fake.connect(connect_params("impulse-client", std::move(token)));
  EXPECT_TRUE(fake.serve_handshake(answer)) << "no Connect echoed the cookie";
  const ConnectionState s = client.state();
  EXPECT_TRUE(s == ConnectionState::Connected || s == ConnectionState::Failed) << to_string(s);
  EXPECT_EQ(s == ConnectionState::Connected, client.connection_error().kind == ConnectFailure::None)
      << client.connection_error().message;
  return client.connection_error();
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
void expect_view(const ClientCore& client, const FakeWorld& world) {
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

// ------------------------------------------------------------------------------ connect

TEST(ClientCoreScripted, ConnectTimesOutAtItsDeadlineWithAHelpfulMessageAndResendsPaddedConnects) {
  ClientCore client;
  ScriptedServer fake(client);  // reads, never answers
  fake.connect(connect_params("impulse-client", {}, 600ms));
  EXPECT_EQ(client.state(), ConnectionState::SendingConnect);
  ASSERT_TRUE(fake.run_until([&] { return client.state() != ConnectionState::SendingConnect; }, 2s));
  EXPECT_EQ(client.state(), ConnectionState::Failed);
  EXPECT_EQ(ms_since_start(fake.now()), 600ms);  // at the deadline: the update 1 ms before was still connecting
  const ConnectionError& e = client.connection_error();
  EXPECT_EQ(e.kind, ConnectFailure::TimedOut);
  EXPECT_EQ(e.code, ResultCode::Ok);
  EXPECT_NE(e.message.find("no answer from 127.0.0.1:7777 within 600 ms"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("impulse-server running"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("UDP port 7777"), std::string::npos) << e.message;
  EXPECT_FALSE(client.connected());

  // Connect was resent every 250 ms (at 0, 250 and 500 ms): each a first Connect of this protocol
  // version, without a cookie, padded so that no Challenge can be larger.
  std::vector<milliseconds> sent_at;
  while (fake.pending() > 0) {
    const wire::Envelope* env = fake.next();
    ASSERT_NE(env, nullptr);
    ASSERT_EQ(env->message_type(), wire::Message::Connect);
    const wire::Connect& m = *env->message_as_Connect();
    EXPECT_EQ(m.protocol_version(), wire::kProtocolVersion);
    EXPECT_EQ(m.client_name()->str(), "impulse-client");
    EXPECT_EQ(m.cookie(), nullptr);
    EXPECT_EQ(m.token(), nullptr);  // none given
    EXPECT_EQ(wire::header_of(*env).sequence(), 0u);  // no session yet: unstamped
    EXPECT_GE(fake.last_size(), wire::min_connect_bytes());
    sent_at.push_back(ms_since_start(fake.last_at()));
  }
  EXPECT_EQ(sent_at, (std::vector<milliseconds>{0ms, 250ms, 500ms}));

  // Failed is final: however long the game keeps updating, nothing more is sent.
  fake.advance(2s);
  EXPECT_EQ(client.state(), ConnectionState::Failed);
  EXPECT_EQ(fake.pending(), 0u);

  // Without a label the message names "the server".
  ConnectParams unlabelled = connect_params("impulse-client", {}, 100ms);
  unlabelled.server_label.clear();
  fake.connect(unlabelled);
  ASSERT_TRUE(fake.run_until([&] { return client.state() == ConnectionState::Failed; }, 1s));
  EXPECT_NE(client.connection_error().message.find("no answer from the server within 100 ms"), std::string::npos)
      << client.connection_error().message;
}

TEST(ClientCoreScripted, EchoesTheChallengeCookieAndSendsItsToken) {
  ClientCore client;
  ScriptedServer fake(client);
  Bytes token(120);
  for (size_t i = 0; i < token.size(); ++i) token[i] = static_cast<uint8_t>(i * 7);
  fake.connect(connect_params("player-one", token));
  // A client token is the server's token followed by its 32-byte session secret: the secret is
  // never sent, and keys the session's packets when the server says token_bound.
  std::copy(token.end() - 32, token.end(), fake.binding.begin());
  ASSERT_TRUE(fake.serve_handshake([](ScriptedServer& f, const wire::Connect&) {
    wire::AcceptedArgs a;
    a.client_id = 42;
    a.tick_hz = 120;
    a.snapshot_hz = 30;
    a.quantization = to_args(wire::QuantizationConfig{});
    accept_with(f, a, /*token_bound=*/true);
  }));
  ASSERT_TRUE(client.connected()) << client.connection_error().message;
  EXPECT_EQ(fake.log.without_cookie, 1);  // the first Connect carried none (answered at once: not resent)
  EXPECT_EQ(fake.log.with_wrong_cookie, 0);
  EXPECT_EQ(fake.log.cookie, kCookie);
  EXPECT_EQ(fake.log.token, Bytes(token.begin(), token.end() - 32));
  EXPECT_EQ(fake.log.name, "player-one");
  EXPECT_GE(fake.log.smallest_connect, wire::min_connect_bytes());
  EXPECT_EQ(client.client_id(), 42u);
  EXPECT_EQ(fake.now(), kStart);  // each answer was echoed at once: the handshake took no time
  EXPECT_EQ(client.connection_error().kind, ConnectFailure::None);
  // Both ends derived the same bound keys: the client's next datagram opens at the fake server
  // (next() fails the test otherwise), and the fake's sealed Pong is taken.
  const uint64_t nonce = client.ping();
  fake.step();
  ASSERT_NE(fake.next_of(wire::Message::Ping), nullptr);
  fake.send(wire::build_pong(fake.fbb(), nonce, 1001, 1000));
  EXPECT_EQ(client.stats().datagrams_unauthenticated, 0u);
  EXPECT_TRUE(client.last_rtt().has_value());
}

TEST(ClientCoreScripted, ResendsTheEchoedCookieEvery250msUntilAccepted) {
  ClientCore client;
  ScriptedServer fake(client);
  const Bytes token(48, 0x3C);  // 16 bytes sent, a 32-byte secret kept
  fake.connect(connect_params("slow-path", token));
  // The server's Challenge takes 100 ms to arrive; the cookie goes back in the same instant.
  fake.advance(100ms);
  ASSERT_NE(fake.next_of(wire::Message::Connect), nullptr);
  EXPECT_EQ(fake.last_at(), kStart);
  EXPECT_EQ(fake.pending(), 0u);  // not resent yet (next due at 250 ms)
  fake.send_unstamped(wire::build_challenge(fake.fbb(), kCookie));
  EXPECT_EQ(client.state(), ConnectionState::SendingCookie);
  // The accept is withheld until 700 ms: the cookie Connect is resent every 250 ms after it.
  fake.advance(600ms);
  std::vector<milliseconds> sent_at;
  while (const wire::Envelope* e = fake.next_of(wire::Message::Connect)) {
    const wire::Connect& m = *e->message_as_Connect();
    EXPECT_EQ(to_bytes(m.cookie()), kCookie);
    EXPECT_EQ(to_bytes(m.token()), Bytes(16, 0x3C));
    EXPECT_EQ(m.client_name()->str(), "slow-path");
    EXPECT_GE(fake.last_size(), wire::min_connect_bytes());
    sent_at.push_back(ms_since_start(fake.last_at()));
  }
  EXPECT_EQ(sent_at, (std::vector<milliseconds>{100ms, 350ms, 600ms}));
  EXPECT_EQ(client.state(), ConnectionState::SendingCookie);
  accept(fake);
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.client_id(), 42u);
  // A late duplicate of the accept (the answer to a resend) is harmless.
  accept(fake);
  EXPECT_TRUE(client.connected());
}

TEST(ClientCoreScripted, ReportsARejectionWithItsReason) {
  ClientCore client;
  ScriptedServer fake(client);
  const ConnectionError error = connect_against(fake, client, [](ScriptedServer& f, const wire::Connect&) {
    f.send_unstamped(wire::build_connect_rejected(f.fbb(), wire::ResultCode::ServerFull, "64 of 64 clients"));
  });
  EXPECT_EQ(error.kind, ConnectFailure::Rejected);
  EXPECT_EQ(error.code, ResultCode::ServerFull);
  EXPECT_NE(error.message.find("server at 127.0.0.1:7777 rejected the connection: ServerFull (64 of 64 clients)"),
            std::string::npos)
      << error.message;
  EXPECT_NE(error.message.find("--max-clients"), std::string::npos) << error.message;
  EXPECT_EQ(client.state(), ConnectionState::Failed);
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.client_id(), 0u);
}

TEST(ClientCoreScripted, ReportsTokenRefusalsWithWhatToDo) {
  for (const wire::ResultCode code :
       {wire::ResultCode::TokenRequired, wire::ResultCode::TokenInvalid, wire::ResultCode::TokenExpired}) {
    SCOPED_TRACE(wire::EnumNameResultCode(code));
    ClientCore client;
    ScriptedServer fake(client);
    const Bytes token = code == wire::ResultCode::TokenRequired ? Bytes{} : Bytes(48, 0x5A);
    const ConnectionError error = connect_against(
        fake, client,
        [code](ScriptedServer& f, const wire::Connect&) {
          f.send_unstamped(wire::build_connect_rejected(f.fbb(), code, "token check failed"));
        },
        token);
    EXPECT_EQ(fake.log.token, token.empty() ? token : Bytes(token.begin(), token.end() - 32));
    EXPECT_EQ(error.kind, ConnectFailure::Rejected);
    EXPECT_EQ(error.code, static_cast<ResultCode>(code));
    EXPECT_NE(error.message.find(std::string("rejected the connection: ") + wire::EnumNameResultCode(code) +
                                 " (token check failed)"),
              std::string::npos)
        << error.message;
    EXPECT_NE(error.message.find("fresh connect token"), std::string::npos) << error.message;
    EXPECT_FALSE(client.connected());
  }
}

TEST(ClientCoreScripted, ReportsAVersionMismatchEitherWay) {
  {  // the server says so in a ConnectRejected
    ClientCore client;
    ScriptedServer fake(client);
    const ConnectionError error = connect_against(fake, client, [](ScriptedServer& f, const wire::Connect&) {
      f.send_unstamped(wire::build_connect_rejected(f.fbb(), wire::ResultCode::VersionMismatch, {}));
    });
    EXPECT_EQ(error.kind, ConnectFailure::VersionMismatch);
    EXPECT_EQ(error.code, ResultCode::VersionMismatch);
    EXPECT_NE(error.message.find("VersionMismatch"), std::string::npos) << error.message;
    EXPECT_NE(error.message.find("speaks protocol version " + std::to_string(wire::kProtocolVersion)),
              std::string::npos)
        << error.message;
  }
  {  // the server answers in an envelope of another version: dropped, and named at the timeout
    ClientCore client;
    ScriptedServer fake(client);
    fake.connect(connect_params("impulse-client", {}, 600ms));
    ASSERT_NE(fake.next_of(wire::Message::Connect), nullptr);
    flatbuffers::FlatBufferBuilder& fbb = fake.fbb();
    fbb.Clear();
    const auto challenge = wire::CreateChallenge(fbb, fbb.CreateVector(kCookie));
    wire::FinishEnvelopeBuffer(
        fbb, wire::CreateEnvelope(fbb, wire::kProtocolVersion + 1, wire::Message::Challenge, challenge.Union()));
    fake.send_unstamped({fbb.GetBufferPointer(), fbb.GetSize()});
    EXPECT_EQ(client.stats().drops_by_reason[static_cast<size_t>(wire::DropReason::VersionMismatch)], 1u);
    EXPECT_EQ(client.state(), ConnectionState::SendingConnect);  // not decided by one datagram
    ASSERT_TRUE(fake.run_until([&] { return client.state() != ConnectionState::SendingConnect; }, 2s));
    EXPECT_EQ(ms_since_start(fake.now()), 600ms);  // at the connect timeout
    const ConnectionError& error = client.connection_error();
    EXPECT_EQ(error.kind, ConnectFailure::VersionMismatch);
    EXPECT_NE(error.message.find("another protocol version"), std::string::npos) << error.message;
    EXPECT_EQ(client.stats().drops_by_reason[static_cast<size_t>(wire::DropReason::VersionMismatch)], 1u);
  }
}

TEST(ClientCoreScripted, RefusesAnAcceptWithAnUnusableQuantization) {
  ClientCore client;
  ScriptedServer fake(client);
  wire::QuantizationConfig broken;
  broken.world_bound_m = 0.0f;  // validate() requires (0, 32768]
  ASSERT_FALSE(broken.validate(nullptr));
  const ConnectionError error =
      connect_against(fake, client, [&](ScriptedServer& f, const wire::Connect&) { accept(f, broken); });
  EXPECT_EQ(error.kind, ConnectFailure::BadServerConfig);
  EXPECT_NE(error.message.find("unusable snapshot quantisation"), std::string::npos) << error.message;
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.client_id(), 0u);
}

// Attack D: a ConnectAccepted that answers a replay of an earlier Connect (another key share)
// is not this attempt's: the client ignores it, counts it, and keeps waiting for its own, which
// then connects it.
TEST(ClientCoreScripted, IgnoresAConnectAcceptedThatEchoesAnotherKeyShare) {
  ClientCore client;
  ScriptedServer fake(client);
  const ConnectionError error = connect_against(fake, client, [&](ScriptedServer& f, const wire::Connect&) {
    wire::AcceptedArgs replayed;
    replayed.client_id = 41;
    replayed.tick_hz = 120;
    replayed.snapshot_hz = 30;
    replayed.quantization = to_args(wire::QuantizationConfig{});
    replayed.kx_public.fill(0x11);
    replayed.client_kx_public.fill(0x22);  // not the client's share
    f.send_unstamped(wire::build_connect_accepted(f.fbb(), replayed));
    f.step();
    EXPECT_EQ(client.state(), ConnectionState::SendingCookie);
    EXPECT_EQ(client.stats().datagrams_unauthenticated, 1u);
    accept(f);  // the answer to its own Connect
  });
  EXPECT_EQ(error.kind, ConnectFailure::None) << error.message;
  EXPECT_EQ(client.client_id(), 42u);
}

TEST(ClientCoreScripted, RequestsAreNotSentWithoutASession) {
  ClientCore client;
  ScriptedServer fake(client);
  auto expect_refused = [&](const char* when) {
    SCOPED_TRACE(when);
    EXPECT_EQ(client.create_object(ObjectDesc{}), 0u);
    EXPECT_EQ(client.destroy(ObjectID{1, 1}), 0u);
    EXPECT_EQ(client.apply_force(ObjectID{1, 1}, {1, 0, 0}), 0u);
    EXPECT_FALSE(client.apply_force_unreliable(ObjectID{1, 1}, {1, 0, 0}));
    EXPECT_EQ(client.apply_impulse(ObjectID{1, 1}, {1, 0, 0}), 0u);
    EXPECT_EQ(client.apply_torque(ObjectID{1, 1}, {1, 0, 0}), 0u);
    EXPECT_EQ(client.set_velocity(ObjectID{1, 1}, {1, 0, 0}), 0u);
    EXPECT_EQ(client.set_angular_velocity(ObjectID{1, 1}, {1, 0, 0}), 0u);
    EXPECT_EQ(client.move_kinematic(ObjectID{1, 1}, {1, 0, 0}), 0u);
    InterestArea sphere;
    sphere.kind = InterestKind::Sphere;
    sphere.radius = 10.0f;
    EXPECT_EQ(client.set_interest(sphere), 0u);
    EXPECT_EQ(client.raycast({0, 1, 0}, {0, -2, 0}), 0u);
    EXPECT_EQ(client.replay_control(ReplayAction::Pause), 0u);
    EXPECT_EQ(client.ping(), 0u);
    EXPECT_EQ(client.requests_in_flight(), 0u);
  };
  expect_refused("never connected");
  fake.advance(2s);
  EXPECT_EQ(fake.pending(), 0u);  // an idle core sends nothing, not even keepalives
  EXPECT_TRUE(client.take_result().empty());
  fake.disconnect("idle");  // harmless when idle: no Disconnect for nobody
  EXPECT_EQ(fake.pending(), 0u);
  EXPECT_EQ(client.state(), ConnectionState::Disconnected);

  // Neither is a handshake a session, nor a connect that failed.
  fake.connect(connect_params("impulse-client", {}, 300ms));
  expect_refused("connecting");
  ASSERT_TRUE(fake.run_until([&] { return client.state() == ConnectionState::Failed; }, 1s));
  expect_refused("after a failed connect");
  fake.advance(1s);
  size_t connects = 0;
  while (fake.pending() > 0) {
    const wire::Envelope* e = fake.next();
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->message_type(), wire::Message::Connect);
    ++connects;
  }
  EXPECT_EQ(connects, 2u);  // at 0 and 250 ms, and nothing else
  EXPECT_TRUE(client.take_result().empty());
}

// ------------------------------------------------------------------------------ a session

/// A core connected to a ScriptedServer through the full cookie round trip.
class ClientCoreScriptedSession : public ::testing::Test {
 protected:
  void SetUp() override {
    const ConnectionError error =
        connect_against(fake, client, [](ScriptedServer& f, const wire::Connect&) { accept(f); });
    ASSERT_EQ(error.kind, ConnectFailure::None) << error.message;
    ASSERT_TRUE(client.connected());
    (void)client.take_result();  // nothing of the handshake is news
    counted_in_ = client.stats().datagrams_in;
  }

  /// One game frame: checks that exactly `count` datagrams reached the client since the previous
  /// frame (the fake delivers at once), steps the clock (update) and takes the result. Returns the
  /// ticks of the snapshots applied, and collects results, raycasts, events, pongs and a disconnect.
  std::vector<uint64_t> deliver(uint64_t count) {
    EXPECT_EQ(client.stats().datagrams_in, counted_in_ + count) << "not the datagrams the test sent";
    fake.step();
    counted_in_ = client.stats().datagrams_in;
    const PollResult& r = client.take_result();
    last_result = &r;
    std::vector<uint64_t> applied;
    for (const SnapshotRange& s : r.snapshots) applied.push_back(s.tick);
    results.insert(results.end(), r.results.begin(), r.results.end());
    for (const RaycastResult& ray : r.raycasts) {
      raycasts.push_back(ray);
      const auto hits = r.hits_of(ray);
      raycast_hits.emplace_back(hits.begin(), hits.end());
    }
    collisions.insert(collisions.end(), r.collisions.begin(), r.collisions.end());
    joint_events.insert(joint_events.end(), r.joints.begin(), r.joints.end());
    pongs.insert(pongs.end(), r.pongs.begin(), r.pongs.end());
    if (r.server_disconnected) disconnected_reason = r.disconnect_reason;
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
    fake.step();  // the update sends it
    // Skip the client's own clock-sync Pings queued before it (sent with older acks).
    for (const wire::Envelope* ping = fake.next_of(wire::Message::Ping); ping != nullptr;
         ping = fake.next_of(wire::Message::Ping)) {
      if (ping->message_as_Ping()->nonce() == nonce) return wire::header_of(*ping);
    }
    ADD_FAILURE() << "the Ping was not sent";
    return wire::PacketHeader(0, 0, 0);
  }

  ClientCore client;
  ScriptedServer fake{client};
  FakeWorld world;
  std::vector<RequestResult> results;
  std::vector<RaycastResult> raycasts;
  std::vector<std::vector<RayHit>> raycast_hits;  ///< of raycasts[i]
  std::vector<CollisionEvent> collisions;
  std::vector<JointEvent> joint_events;
  std::vector<PongInfo> pongs;
  std::optional<std::string> disconnected_reason;
  const PollResult* last_result = nullptr;  ///< of the latest deliver(), valid until the next

 private:
  uint64_t counted_in_ = 0;
};

TEST_F(ClientCoreScriptedSession, ConnectAcceptedFillsTheSessionInfo) {
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.state(), ConnectionState::Connected);
  EXPECT_EQ(client.client_id(), 42u);
  EXPECT_EQ(client.tick_hz(), 120);
  EXPECT_EQ(client.snapshot_hz(), 30);
  EXPECT_EQ(client.server_tick(), 1000u);
  EXPECT_EQ(client.max_objects(), 250u);
  EXPECT_EQ(client.snapshot_tick(), 0u);
  EXPECT_TRUE(client.objects().empty());
  EXPECT_EQ(client.requests_in_flight(), 0u);
  EXPECT_EQ(fake.log.cookie, kCookie);
  EXPECT_EQ(client.server(), server_address());
}

// ------------------------------------------------------------------------------ snapshots

TEST_F(ClientCoreScriptedSession, SnapshotsApplyEntriesDeltasAndExits) {
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
TEST_F(ClientCoreScriptedSession, AHeadlessClientKeepsTheViewWithoutAPoseBuffer) {
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

// Other clients' inputs relayed in a snapshot arrive with it, in the server's order; hostile
// entries (a null id, an unknown mode, a non-finite value) are counted and skipped, the rest kept.
TEST_F(ClientCoreScriptedSession, RelayedInputsArriveWithTheirSnapshotAndBadOnesAreSkipped) {
  world.set(1010, three_objects());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<wire::RelayedInput> relayed = {
      wire::RelayedInput(to_wire(ObjectID{7, 2}), wire::InputFrame(wire::Vec3(400, 0, 0), wire::Vec3(0, 5, 0)),
                         wire::InputMode::Force, 0),
      wire::RelayedInput(0, wire::InputFrame(wire::Vec3(1, 0, 0), wire::Vec3()), wire::InputMode::Force, 0),
      wire::RelayedInput(to_wire(ObjectID{8, 1}), wire::InputFrame(wire::Vec3(nan, 0, 0), wire::Vec3()),
                         wire::InputMode::Velocity, 0),
      wire::RelayedInput(to_wire(ObjectID{9, 1}), wire::InputFrame(wire::Vec3(), wire::Vec3()),
                         static_cast<wire::InputMode>(7), 0),
      wire::RelayedInput(to_wire(ObjectID{3, 1}), wire::InputFrame(wire::Vec3(0, 0, -6), wire::Vec3()),
                         wire::InputMode::Velocity, 4),
  };
  const uint32_t sequence = fake.next_sequence;
  const Bytes& payload = world.write(sequence);
  EXPECT_EQ(fake.send(wire::build_snapshot(fake.fbb(), world.tick(), payload, wire::kNoInputLead, 0, relayed)),
            sequence);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1010});
  ASSERT_NE(last_result, nullptr);
  ASSERT_EQ(last_result->snapshots.size(), 1u);
  const auto inputs = last_result->inputs_of(last_result->snapshots[0]);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].id, (ObjectID{7, 2}));
  EXPECT_EQ(inputs[0].mode, InputMode::Force);
  EXPECT_EQ(inputs[0].linear, (Vec3{400, 0, 0}));
  EXPECT_EQ(inputs[0].angular, (Vec3{0, 5, 0}));
  EXPECT_EQ(inputs[0].repeats, 0);
  EXPECT_EQ(inputs[1].id, (ObjectID{3, 1}));
  EXPECT_EQ(inputs[1].mode, InputMode::Velocity);
  EXPECT_EQ(inputs[1].linear, (Vec3{0, 0, -6}));
  EXPECT_EQ(inputs[1].repeats, 4);
  EXPECT_EQ(client.stats().relayed_inputs, 2u);
  EXPECT_EQ(client.stats().relayed_inputs_rejected, 3u);
  expect_view(client, world);  // the snapshot itself applied whole

  // The next snapshot without any: none listed.
  world.set(1011, three_objects());
  send_snapshot();
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1011});
  EXPECT_TRUE(last_result->inputs_of(last_result->snapshots[0]).empty());
}

// Without snapshot views a result lists each snapshot with no objects; objects() still follows
// every delta (updated in place at the receiver's positions) and every entry and exit.
TEST_F(ClientCoreScriptedSession, WithoutSnapshotViewsObjectsStillFollowsTheView) {
  ClientConfig config;
  config.interpolation = false;
  config.snapshot_views = false;
  std::string error;
  ASSERT_TRUE(client.set_config(config, &error)) << error;
  world.set(1010, three_objects());
  world.ack(send_snapshot());
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1010});
  ASSERT_NE(last_result, nullptr);
  ASSERT_EQ(last_result->snapshots.size(), 1u);
  EXPECT_EQ(last_result->snapshots[0].tick, 1010u);
  EXPECT_EQ(last_result->snapshots[0].count, 0u);
  EXPECT_TRUE(last_result->snapshot_objects.empty());
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

TEST_F(ClientCoreScriptedSession, CorruptedSnapshotsAreRejectedCountedAndNeverAcked) {
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

TEST_F(ClientCoreScriptedSession, StaleAndDuplicateSnapshotsAreIgnored) {
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
  EXPECT_EQ(client.stats().snapshot_parts_stale, 1u);             // the late one
  EXPECT_EQ(client.stats().datagrams_unauthenticated, 1u);        // the duplicate: the replay window
  EXPECT_EQ(client.stats().snapshots_completed, 1u);
  EXPECT_EQ(client.stats().snapshots_rejected, 0u);
  EXPECT_EQ(client.snapshot_tick(), 1031u);
  expect_view(client, world);  // still the newer state
  EXPECT_EQ(header_of_next_ping().ack(), newer);
}

// ------------------------------------------------------------------------------ requests

TEST_F(ClientCoreScriptedSession, RequestsAreResentUntilAnsweredAndEachResultIsDeliveredOnce) {
  fake.discard_pending();  // the clock-sync Ping sent on the accept
  const uint32_t create = client.create_object(make_sphere(0.5f, {0, 3, 0}));
  InterestArea area;
  area.kind = InterestKind::Sphere;
  area.center = {1, 2, 3};
  area.radius = 40.0f;
  const uint32_t interest = client.set_interest(area);
  const uint32_t destroy = client.destroy(ObjectID{7, 1});
  EXPECT_EQ(create, 1u);  // the session's request sequence
  EXPECT_EQ(interest, 2u);
  EXPECT_EQ(destroy, 3u);
  EXPECT_EQ(client.requests_in_flight(), 3u);
  EXPECT_EQ(fake.pending(), 0u);  // queued: the next update sends them

  // The first sends, in order, all at the next update.
  fake.step();
  const TimePoint first_send = fake.now();
  const wire::Envelope* e = fake.next_of(wire::Message::CreateObject);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->message_as_CreateObject()->request_id(), create);
  const uint32_t first_sequence = wire::header_of(*e).sequence();
  EXPECT_NE(first_sequence, 0u);
  EXPECT_EQ(fake.last_at(), first_send);
  e = fake.next_of(wire::Message::SetInterest);
  ASSERT_NE(e, nullptr);
  const wire::SetInterest& si = *e->message_as_SetInterest();
  EXPECT_EQ(si.request_id(), interest);
  EXPECT_EQ(si.kind(), wire::InterestKind::Sphere);
  EXPECT_EQ(wire::to_vec3(*si.center()), (Vec3{1, 2, 3}));
  EXPECT_EQ(si.radius(), 40.0f);
  e = fake.next_of(wire::Message::DestroyObject);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->message_as_DestroyObject()->request_id(), destroy);
  EXPECT_EQ(fake.last_at(), first_send);

  // Unanswered, each is sent again every 150 ms (1.5 x the 100 ms round trip assumed before any
  // ack), with the same id and a newer sequence.
  fake.advance(300ms);
  std::vector<milliseconds> create_sent_at;
  uint32_t last_sequence = first_sequence;
  while (fake.pending() > 0) {
    const wire::Envelope* d = fake.next();
    ASSERT_NE(d, nullptr);
    if (const auto* m = d->message_as_CreateObject()) {
      EXPECT_EQ(m->request_id(), create);
      EXPECT_GT(wire::header_of(*d).sequence(), last_sequence);
      last_sequence = wire::header_of(*d).sequence();
      create_sent_at.push_back(std::chrono::duration_cast<milliseconds>(fake.last_at() - first_send));
    }
  }
  EXPECT_EQ(create_sent_at, (std::vector<milliseconds>{150ms, 300ms}));
  EXPECT_EQ(client.stats().requests_resent, 6u);  // three requests, twice each
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

  // Answered requests are never sent again: a second holds more than six resend intervals.
  fake.discard_pending();
  const uint64_t resent_before = client.stats().requests_resent;
  fake.advance(1s);
  while (fake.pending() > 0) {
    const wire::Envelope* d = fake.next();
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->message_type(), wire::Message::Ping) << "a request went out after its answer";
  }
  EXPECT_EQ(client.stats().requests_resent, resent_before);
  EXPECT_EQ(client.create_object(make_sphere(0.5f, {0, 3, 0})), 4u);  // the sequence continues
}

TEST_F(ClientCoreScriptedSession, AnAnswerToARequestNeverSentIsDropped) {
  fake.send(wire::build_request_result(fake.fbb(), 77, wire::ResultCode::Ok, ObjectID{1, 1}, {}));
  fake.send(wire::build_raycast_result(fake.fbb(), 78, wire::ResultCode::Ok, 1, {}, false, {}));
  deliver(2);
  EXPECT_TRUE(results.empty());
  EXPECT_TRUE(raycasts.empty());
  EXPECT_EQ(client.stats().results_duplicate, 2u);
}

// ------------------------------------------------------------------------------ events, pongs

TEST_F(ClientCoreScriptedSession, CollisionEventsAreDeliveredOncePerSequence) {
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

TEST_F(ClientCoreScriptedSession, JointEventsKeepTheJointTableAndArriveOnce) {
  // Two joints added (one to the world), a contact between them in the same block, a resend,
  // then one removed (Broken) and a removal of a joint never heard of.
  using wire::ContactEventType;
  auto added = [](uint32_t sequence, ObjectID joint, ObjectID a, ObjectID b, Vec3 anchor_a, Vec3 anchor_b) {
    return std::pair{wire::CollisionEvent(2000 + sequence, to_wire(a), to_wire(b), wire::to_wire(anchor_a),
                                          wire::to_wire(anchor_b), sequence, ContactEventType::JointAdded),
                     wire::JointEventFields{to_wire(joint), static_cast<uint8_t>(wire::JointKind::Hinge)}};
  };
  auto removed = [](uint32_t sequence, ObjectID joint, ObjectID a, ObjectID b) {
    return std::pair{wire::CollisionEvent(2000 + sequence, to_wire(a), to_wire(b), wire::Vec3(0, 0, 0),
                                          wire::Vec3(0, 0, 0), sequence, ContactEventType::JointRemoved),
                     wire::JointEventFields{to_wire(joint), static_cast<uint8_t>(wire::JointRemovedReason::Broken)}};
  };
  const auto j1 = added(1, ObjectID{4, 1}, ObjectID{7, 1}, ObjectID{}, {0.5f, 0, 0}, {2.5f, 3, 0});
  const auto j2 = added(2, ObjectID{1, 1}, ObjectID{7, 1}, ObjectID{8, 1}, {0, 0.25f, 0}, {0, -0.25f, 0});
  const auto contact = std::pair{wire::CollisionEvent(2003, to_wire(ObjectID{7, 1}), to_wire(ObjectID{9, 1}),
                                                      wire::Vec3(1, 0, 0), wire::Vec3(0, 1, 0), 3,
                                                      ContactEventType::Begin),
                                 wire::JointEventFields{}};
  const auto gone = removed(4, ObjectID{4, 1}, ObjectID{7, 1}, ObjectID{});
  const auto unknown = removed(5, ObjectID{9, 3}, ObjectID{7, 1}, ObjectID{});
  auto send = [&](std::initializer_list<std::pair<wire::CollisionEvent, wire::JointEventFields>> batch) {
    std::vector<wire::CollisionEvent> events;
    std::vector<wire::JointEventFields> joints;
    for (const auto& [e, j] : batch) {
      events.push_back(e);
      joints.push_back(j);
    }
    fake.send(wire::build_collision_events(fake.fbb(), events, wire::QuantizationConfig{}, joints));
  };
  send({j1, j2, contact});
  send({j2});  // a resend
  deliver(2);
  ASSERT_EQ(joint_events.size(), 2u);
  ASSERT_EQ(collisions.size(), 1u);
  EXPECT_TRUE(joint_events[0].added);
  EXPECT_EQ(joint_events[0].joint, (ObjectID{4, 1}));
  EXPECT_EQ(joint_events[0].a, (ObjectID{7, 1}));
  EXPECT_TRUE(joint_events[0].b.is_null());
  EXPECT_EQ(joint_events[0].kind, JointKind::Hinge);
  EXPECT_EQ(joint_events[0].local_anchor_a, (Vec3{0.5f, 0, 0}));
  EXPECT_EQ(joint_events[0].local_anchor_b, (Vec3{2.5f, 3, 0}));
  EXPECT_EQ(joint_events[0].tick, 2001u);
  ASSERT_EQ(client.joints().size(), 2u);
  EXPECT_EQ(client.joints()[0].joint, (ObjectID{1, 1}));  // sorted by joint id
  EXPECT_EQ(client.joints()[1].joint, (ObjectID{4, 1}));
  send({gone, unknown});
  deliver(1);
  ASSERT_EQ(joint_events.size(), 4u);
  EXPECT_FALSE(joint_events[2].added);
  EXPECT_EQ(joint_events[2].removed_reason, JointRemovedReason::Broken);
  ASSERT_EQ(client.joints().size(), 1u);
  EXPECT_EQ(client.joints()[0].joint, (ObjectID{1, 1}));
  EXPECT_EQ(client.stats().events_duplicate, 1u);
  EXPECT_EQ(client.stats().event_blocks_rejected, 0u);
}

TEST_F(ClientCoreScriptedSession, CollisionEventsArriveQuantisedWithinTheirStatedBounds) {
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

TEST_F(ClientCoreScriptedSession, CorruptedEventBlocksAreRejectedCountedAndNeverAcked) {
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

TEST_F(ClientCoreScriptedSession, DeliversPongsAndServerDisconnect) {
  const uint64_t nonce = client.ping();
  ASSERT_NE(nonce, 0u);
  fake.step();  // the update sends it
  const wire::Envelope* ping = fake.next_of(wire::Message::Ping);
  while (ping != nullptr && ping->message_as_Ping()->nonce() != nonce) ping = fake.next_of(wire::Message::Ping);
  ASSERT_NE(ping, nullptr);
  const TimePoint sent = fake.last_at();
  fake.advance(30ms);  // the round trip
  fake.send(wire::build_pong(fake.fbb(), nonce, 1042, 8'683'333));
  fake.send(wire::build_pong(fake.fbb(), nonce, 1042, 8'683'333));  // duplicated: dropped
  ASSERT_EQ(fake.now() - sent, 30ms);
  deliver(2);
  ASSERT_EQ(pongs.size(), 1u);
  EXPECT_EQ(pongs[0].nonce, nonce);
  EXPECT_EQ(pongs[0].server_tick, 1042u);
  EXPECT_EQ(pongs[0].rtt, std::chrono::microseconds{30'000});  // exactly the virtual round trip
  EXPECT_EQ(client.last_rtt(), std::optional<std::chrono::microseconds>(30'000));
  EXPECT_EQ(client.server_tick(), 1042u);
  EXPECT_EQ(client.stats().datagrams_dropped, 1u);

  fake.send(wire::build_disconnect(fake.fbb(), "server shutting down"));
  deliver(1);
  EXPECT_EQ(disconnected_reason, std::optional<std::string>("server shutting down"));
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.state(), ConnectionState::Disconnected);
  EXPECT_EQ(client.connection_error().kind, ConnectFailure::None);
  EXPECT_EQ(client.client_id(), 0u);
  EXPECT_EQ(client.create_object(ObjectDesc{}), 0u);  // nothing is sent after the session ended
  fake.discard_pending();
  fake.advance(2s);
  EXPECT_EQ(fake.pending(), 0u);  // no keepalive, clock-sync Ping or goodbye either
}

TEST_F(ClientCoreScriptedSession, DropsMalformedAndHostileDatagrams) {
  const std::array<uint8_t, 16> garbage{0xde, 0xad, 0xbe, 0xef, 'I', 'M', 'P', 'X', 1, 2, 3, 4, 5, 6, 7, 8};
  fake.send_raw(garbage);                                                  // BadIdentifier
  fake.send_raw(std::span<const uint8_t>(garbage.data(), 3));              // Empty (too short)
  fake.send(wire::build_ping(fake.fbb(), 7));                              // WrongDirection
  fake.send(wire::build_pong(fake.fbb(), 999, 1, 2));                      // a pong nobody asked for
  fake.send_unstamped(wire::build_snapshot(fake.fbb(), 1050, Bytes(16, 0)));  // plaintext in a session
  fake.send(wire::build_challenge(fake.fbb(), kCookie));                   // handshake answers mid-session
  fake.send_unstamped(wire::build_connect_rejected(fake.fbb(), wire::ResultCode::ServerFull, "late"));  // plaintext
  wire::AcceptedArgs other;
  other.client_id = 43;
  fake.send(wire::build_connect_accepted(fake.fbb(), other));              // someone else's session
  fake.fbb().Clear();  // a snapshot without its data vector: an empty payload, rejected by the decoder
  fake.send(wire::finish(fake.fbb(), wire::Message::Snapshot, wire::CreateSnapshot(fake.fbb(), 1051).Union()));

  EXPECT_TRUE(deliver(9).empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 7u);
  EXPECT_EQ(client.stats().datagrams_unauthenticated, 2u);  // the two plaintext ones
  const auto& by_reason = client.stats().drops_by_reason;
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::None)], 4u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::BadIdentifier)], 1u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::Empty)], 1u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::WrongDirection)], 1u);
  EXPECT_EQ(client.stats().snapshots_rejected, 1u);
  EXPECT_TRUE(client.objects().empty());
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.client_id(), 42u);

  // Larger than any datagram the protocol allows: dropped unread.
  fake.send_raw(Bytes(wire::kMaxDatagramBytes + 1, 0x00));
  EXPECT_TRUE(deliver(1).empty());
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::Oversized)], 1u);
  EXPECT_EQ(client.stats().datagrams_dropped, 8u);

  // A stranger's datagrams are dropped even when well formed: another port of the server's
  // host, and the server's port on another host.
  world.set(1052, three_objects());
  const Bytes& payload = world.write(fake.next_sequence);
  const auto built = wire::build_snapshot(fake.fbb(), 1052, payload);
  const Bytes datagram(built.begin(), built.end());
  PeerAddress other_port = server_address();
  other_port.port = 7778;
  PeerAddress other_host = server_address();
  other_host.bytes[3] = 2;
  for (const PeerAddress& stranger : {other_port, other_host}) fake.send_as(datagram, fake.next_sequence, stranger);
  EXPECT_TRUE(deliver(2).empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 10u);
  EXPECT_TRUE(client.objects().empty());

  // Forged seals from the server's address: the magic with garbage, and a seal under another key.
  Bytes fake_seal = {'I', 'M', 'P', 'S', 200, 0, 0, 0};
  fake_seal.insert(fake_seal.end(), datagram.begin(), datagram.end());
  fake_seal.resize(fake_seal.size() + net::kSealTagBytes, 0x5A);
  fake.send_raw(fake_seal);
  Bytes wrong_key(datagram.size() + net::kSealOverheadBytes);
  ASSERT_NE(net::seal_packet(net::PacketKey{}, 201, datagram, wrong_key), 0u);
  fake.send_raw(wrong_key);
  EXPECT_TRUE(deliver(2).empty());
  EXPECT_EQ(client.stats().datagrams_unauthenticated, 4u);
  EXPECT_TRUE(client.objects().empty());
  EXPECT_TRUE(client.connected());

  // The session still works after all that: the same datagram from the server applies.
  fake.send_as(datagram, fake.next_sequence++);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1052});
  expect_view(client, world);
}

// ------------------------------------------------------------------------------ other requests

TEST_F(ClientCoreScriptedSession, SendsMoveKinematicAndBackFaceRaycasts) {
  const ObjectID id{9, 3};
  const Quat turn{0, 0.6f, 0, 0.8f};
  const uint32_t move_id = client.move_kinematic(id, {1, 2, 3}, turn);
  const uint32_t ray_id = client.raycast({0, 10, 0}, {0, -20, 0}, false, std::nullopt, /*back_faces=*/true);
  EXPECT_EQ(move_id, 1u);
  EXPECT_EQ(ray_id, 2u);
  fake.discard_pending();
  fake.step();
  int seen = 0;
  while (fake.pending() > 0) {
    const wire::Envelope* e = fake.next();
    ASSERT_NE(e, nullptr);
    if (const auto* m = e->message_as_MoveKinematic()) {
      ++seen;
      EXPECT_EQ(m->request_id(), move_id);
      EXPECT_EQ(from_wire(m->id()), id);
      EXPECT_EQ(wire::to_vec3(*m->position()), (Vec3{1, 2, 3}));
      ASSERT_NE(m->orientation(), nullptr);
      EXPECT_EQ(wire::to_quat(*m->orientation()), turn);
    } else if (const auto* m = e->message_as_Raycast()) {
      ++seen;
      EXPECT_EQ(m->request_id(), ray_id);
      EXPECT_TRUE(m->back_faces());
    }
  }
  EXPECT_EQ(seen, 2);
}

TEST_F(ClientCoreScriptedSession, SendsTorqueAngularVelocityAndRaycastRequestsAndDeliversRaycastResults) {
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
    // One update sends each request once, in request order (clock-sync Pings are ignored).
    fake.discard_pending();
    fake.step();
    std::vector<wire::Message> types;
    std::vector<uint32_t> ids;
    while (fake.pending() > 0) {
      const wire::Envelope* e = fake.next();
      ASSERT_NE(e, nullptr);
      if (const auto* m = e->message_as_ApplyTorque()) {
        ids.push_back(m->request_id());
        EXPECT_EQ(from_wire(m->id()), id);
        EXPECT_EQ(wire::to_vec3(*m->torque()), (Vec3{0, 5, 0}));
      } else if (const auto* m = e->message_as_SetAngularVelocity()) {
        ids.push_back(m->request_id());
        EXPECT_EQ(from_wire(m->id()), id);
        EXPECT_EQ(wire::to_vec3(*m->angular_velocity()), (Vec3{1, 0, 0}));
      } else if (const auto* m = e->message_as_Raycast()) {
        ids.push_back(m->request_id());
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
    EXPECT_EQ(ids, (std::vector<uint32_t>{torque_id, spin_id, closest_id, all_id, bad_id}));
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
  deliver(6);
  ASSERT_EQ(raycasts.size(), 3u);
  EXPECT_EQ(raycasts[0].request_id, closest_id);
  EXPECT_TRUE(raycasts[0].ok());
  EXPECT_EQ(raycasts[0].tick, 1070u);
  EXPECT_FALSE(raycasts[0].truncated);
  ASSERT_EQ(raycast_hits[0].size(), 1u);
  EXPECT_EQ(raycast_hits[0][0].id, (ObjectID{2, 1}));
  EXPECT_EQ(raycast_hits[0][0].point, (Vec3{0, 6.5f, 0}));
  EXPECT_EQ(raycast_hits[0][0].normal, (Vec3{0, 1, 0}));
  EXPECT_EQ(raycast_hits[0][0].fraction, 0.175f);
  EXPECT_EQ(raycasts[1].request_id, all_id);
  EXPECT_TRUE(raycasts[1].truncated);
  ASSERT_EQ(raycast_hits[1].size(), 3u);
  EXPECT_EQ(raycast_hits[1][2].id, (ObjectID{1, 1}));
  EXPECT_EQ(raycasts[2].request_id, bad_id);
  EXPECT_EQ(raycasts[2].code, ResultCode::InvalidArgument);
  EXPECT_EQ(raycasts[2].message, "translation: length must be in (0, 2000] m");
  EXPECT_TRUE(raycast_hits[2].empty());
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

TEST_F(ClientCoreScriptedSession, SendsKeepalivePingsWhenIdleAndDisconnectsRedundantly) {
  // The fake answers every Ping at once, as a server does, so the clock-sync burst (a Ping every
  // 100 ms) ends when the clock is ready; then clock-sync Pings come every 2 s, and an idle client
  // fills the gaps: exactly 1 s after its last datagram it sends a keepalive Ping.
  struct Datagram {
    TimePoint at;
    std::optional<uint64_t> ping_nonce;  ///< empty: not a Ping
  };
  std::vector<Datagram> sent;  // every datagram the client sent, in order
  auto serve = [&] {
    for (size_t n = fake.pending(); n > 0; --n) {  // what is pending now (receiving a Pong sends nothing)
      const wire::Envelope* e = fake.next();
      ASSERT_NE(e, nullptr);
      EXPECT_NE(wire::header_of(*e).sequence(), 0u);  // session datagrams carry a sequence
      const auto* ping = e->message_as_Ping();
      sent.push_back(Datagram{fake.last_at(), ping ? std::optional<uint64_t>(ping->nonce()) : std::nullopt});
      if (ping == nullptr || ping->nonce() == 0) continue;  // nonce 0: an ack-only Ping, not answered
      const auto server_us = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(fake.now() - kStart).count() + 5'000'000);
      fake.send(wire::build_pong(fake.fbb(), ping->nonce(), 1000, server_us));
    }
  };
  ASSERT_TRUE(fake.run_until(
      [&] {
        serve();
        return client.clock_sync().ready();
      },
      2s));
  // Idle from here: the game sends nothing for 6 s.
  sent.clear();
  const uint64_t time_pings_before = client.stats().time_pings_sent;
  for (int i = 0; i < 6000; ++i) {
    fake.step();
    serve();
  }
  EXPECT_EQ(client.stats().time_pings_sent - time_pings_before, 3u);  // one every 2 s
  ASSERT_GE(sent.size(), 2u);
  std::chrono::nanoseconds longest{0};
  int keepalives = 0;
  for (size_t i = 1; i < sent.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "datagram " << i << " at " << ms_since_start(sent[i].at).count() << " ms");
    const auto gap = sent[i].at - sent[i - 1].at;
    longest = std::max<std::chrono::nanoseconds>(longest, gap);
    ASSERT_TRUE(sent[i].ping_nonce.has_value()) << "an idle client sends only Pings";
    if (gap == 1s) {
      EXPECT_NE(*sent[i].ping_nonce, 0u);  // a keepalive is a real Ping, answered by the server
      ++keepalives;
    }
    // Each Pong's packet is acked by an ack-only Ping (nonce 0) one snapshot interval (1000/30
    // = 33 ms) after the client's last datagram, unless something else carried the ack first.
    if (*sent[i].ping_nonce == 0) {
      EXPECT_EQ(gap, 33ms);
    }
  }
  EXPECT_EQ(longest, 1s) << "the client stayed silent longer than the keepalive interval";
  // Between clock-sync Pings 2 s apart (each followed by its ack 33 ms later) there is room for
  // one keepalive: at 1033 ms.
  EXPECT_EQ(keepalives, 3);
  EXPECT_TRUE(client.connected());

  fake.disconnect("bye");
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.state(), ConnectionState::Disconnected);
  EXPECT_EQ(client.requests_in_flight(), 0u);
  int disconnects = 0;
  std::set<uint32_t> sequences;
  while (const wire::Envelope* d = fake.next_of(wire::Message::Disconnect)) {
    ++disconnects;
    EXPECT_EQ(d->message_as_Disconnect()->reason()->str(), "bye");
    EXPECT_EQ(fake.last_at(), fake.now());  // all at once
    sequences.insert(wire::header_of(*d).sequence());
  }
  EXPECT_EQ(disconnects, 3);
  EXPECT_EQ(sequences.size(), 3u);  // three datagrams, not one resent
  EXPECT_EQ(sequences.count(0u), 0u);
  fake.advance(2s);
  EXPECT_EQ(fake.pending(), 0u);  // and nothing after them
}

}  // namespace
}  // namespace impulse::client_test
