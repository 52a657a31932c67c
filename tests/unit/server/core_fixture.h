// The ServerCore test fixture: a core on a fake clock (no sockets, no sleeps), a static ground,
// and helpers that run the handshake, send requests with per-session ids and decode snapshots.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/app/server_core.h"
#include "server/app/step_clock.h"
#include "shared/net/packet_crypto.h"
#include "shared/wire/event_codec.h"
#include "shared/wire/snapshot_codec.h"

namespace impulse::server::core_test {

using namespace std::chrono_literals;
using wire::Message;
using wire::ResultCode;

using Bytes = std::vector<uint8_t>;
inline Bytes copy(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

/// One datagram the core queued, verified and copied so it outlives the Outbox.
struct Sent {
  Endpoint to;
  Bytes bytes;
  const wire::Envelope* envelope() const { return wire::GetEnvelope(bytes.data()); }
  Message type() const { return envelope()->message_type(); }
};

class CoreTest : public ::testing::Test {
 protected:
  static constexpr int kTickHz = 60;
  static constexpr std::chrono::nanoseconds kStep{1'000'000'000LL / kTickHz};

  explicit CoreTest(ServerConfig config = test_config()) : config_(config), core_(config, {0, -9.81f, 0}, stats_) {
    physics::BodyDesc ground;
    ground.kind = physics::BodyKind::Static;
    ground.shape = physics::make_box({50, 0.5f, 50});
    ground.position = {0, -0.5f, 0};
    std::string error;
    EXPECT_TRUE(core_.add_bodies(std::span(&ground, 1), &error)) << error;
    ground_id_ = ObjectID{0, 1};
    core_.world().for_each_object([this](const physics::BodyState& b) { ground_id_ = b.id; });
    core_.start(now_);
  }

  static ServerConfig test_config() {
    ServerConfig c;
    c.tick_hz = kTickHz;
    c.snapshot_hz = 30;
    c.max_clients = 2;
    c.client_timeout_s = 2.0;
    c.max_steps_per_frame = 4;
    return c;
  }

  static Endpoint endpoint(uint16_t port) { return Endpoint(asio::ip::make_address("127.0.0.1"), port); }
  /// A peer at another address. The fixture keys its peers by port: give each its own.
  static Endpoint at(const std::string& address, uint16_t port) { return Endpoint(asio::ip::make_address(address), port); }

  /// Feeds one datagram at the current fake time; returns what the core queued in reply. Like a
  /// real client, a peer with a session numbers (its own next sequence; the test's acks are kept)
  /// and seals everything but Connect; receive_raw sends the bytes as given.
  std::vector<Sent> receive(const Endpoint& from, std::span<const uint8_t> bytes) {
    return receive_raw(from, seal_for(from, bytes));
  }
  std::vector<Sent> receive_raw(const Endpoint& from, std::span<const uint8_t> bytes) {
    const Bytes aligned = copy(bytes);
    core_.handle_datagram(from, aligned, now_, out_);
    return drain();
  }
  /// A Connect carrying the fixture's key share (the same for every test peer).
  std::span<const uint8_t> build_connect(std::string_view name, std::span<const uint8_t> cookie = {},
                                         std::span<const uint8_t> token = {}) {
    return wire::build_connect(fbb_, name, cookie, token, kx().public_key);
  }
  /// The placeholder key share build_connect() writes: seal_for() replaces it with the sending
  /// peer's own share (peer_kx), so that tests need not say which peer a Connect is for.
  static const net::KxKeyPair& kx() {
    static const net::KxKeyPair pair = [] {
      net::KxKeyPair p;
      EXPECT_TRUE(net::make_kx_keypair(&p));
      return p;
    }();
    return pair;
  }
  /// The key pair of each test peer's current connect attempt, by client port. A client makes a
  /// fresh pair for each attempt (the server drops a Connect whose share already made a
  /// session), so a Connect without a cookie from a peer without a session starts a new one.
  std::map<uint16_t, std::unique_ptr<net::KxKeyPair>> peer_kx_;
  /// Every pair handed out, by public key: ConnectAccepted echoes the share it answers.
  std::map<net::KxPublicKey, const net::KxKeyPair*> kx_by_public_;
  const net::KxKeyPair& peer_kx(const Endpoint& from, bool new_attempt) {
    auto& slot = peer_kx_[from.port()];
    if (!slot || new_attempt) {
      auto pair = std::make_unique<net::KxKeyPair>();
      EXPECT_TRUE(net::make_kx_keypair(pair.get()));
      kx_by_public_[pair->public_key] = pair.get();
      retired_kx_.push_back(std::move(slot));  // answers to the old attempt may still arrive
      slot = std::move(pair);
    }
    return *slot;
  }
  std::vector<std::unique_ptr<net::KxKeyPair>> retired_kx_;
  /// Replaces the placeholder share in a Connect from `from` with the peer's own.
  void use_peer_share(const Endpoint& from, const wire::Connect& m, Bytes& plain) {
    const net::KxPublicKey& placeholder = kx().public_key;
    const auto at = std::search(plain.begin(), plain.end(), placeholder.begin(), placeholder.end());
    if (at == plain.end()) return;  // a test's own share: sent as given
    const auto& sessions = core_.sessions().sessions();
    const bool has_session =
        std::any_of(sessions.begin(), sessions.end(), [&](const Session& s) { return s.endpoint == from; });
    const bool new_attempt = (m.cookie() == nullptr || m.cookie()->size() == 0) && !has_session;
    const net::KxKeyPair& pair = peer_kx(from, new_attempt);
    std::copy(pair.public_key.begin(), pair.public_key.end(), at);
  }
  /// The packet protection of each test peer, keyed when the core sent it ConnectAccepted.
  struct PeerKeys {
    net::PacketProtection protection;
    uint32_t next_sequence = 0;
    uint32_t newest_received = 0;  // the newest sealed sequence from the core
  };
  bool auto_ack_ = false;  // see seal_for
  std::map<uint16_t, PeerKeys> peers_;        // by client port
  std::map<uint16_t, net::BindingSecret> binding_;  // token session secrets, by client port (default zeros)
  Bytes seal_for(const Endpoint& from, std::span<const uint8_t> bytes) {
    Bytes plain = copy(bytes);  // aligned (a builder's span may not be)
    const auto it = peers_.find(from.port());
    const wire::Verified v = wire::verify_datagram(plain, wire::Direction::ClientToServer);
    if (v.reason == wire::DropReason::None && v.envelope->message_type() == Message::Connect) {
      use_peer_share(from, *v.envelope->message_as_Connect(), plain);
      return plain;
    }
    if (it == peers_.end() || !it->second.protection.keyed || v.reason != wire::DropReason::None) return plain;
    // The peer numbers its datagrams itself, as a client does (a test's own sequence would
    // collide with the ones given before); the acks the test stamped are kept.
    const wire::PacketHeader given = wire::header_of(*v.envelope);
    PeerKeys& peer = it->second;
    // With auto_ack_, a datagram whose test left the acks at zero acks everything the peer has
    // received, as a client does (then snapshots are deltas, as in a real session).
    const bool ack_all = auto_ack_ && given.ack() == 0 && peer.newest_received != 0;
    const wire::PacketHeader h(++peer.next_sequence, ack_all ? peer.newest_received : given.ack(),
                               ack_all ? ~0u : given.ack_bits());
    EXPECT_TRUE(wire::stamp_header(plain, h));
    Bytes sealed(plain.size() + net::kSealOverheadBytes);
    EXPECT_NE(net::seal_packet(peer.protection.send_key, h.sequence(), plain, sealed), 0u);
    return sealed;
  }
  /// Opens a datagram to a keyed test peer (every session datagram but ConnectAccepted is sealed);
  /// derives the peer's keys from a ConnectAccepted.
  Bytes unseal_for(const Endpoint& to, std::span<const uint8_t> bytes) {
    const auto it = peers_.find(to.port());
    if (!net::is_sealed(bytes)) {
      const wire::Verified v = wire::verify_datagram(bytes, wire::Direction::ServerToClient);
      if (v.reason == wire::DropReason::None && v.envelope->message_type() == Message::ConnectAccepted) {
        const auto* kx_public = v.envelope->message_as_ConnectAccepted()->kx_public();
        net::KxPublicKey server_public{};
        if (kx_public != nullptr && kx_public->size() == server_public.size()) {
          std::copy(kx_public->begin(), kx_public->end(), server_public.begin());
        }
        net::SessionKeys keys;
        const bool bound = v.envelope->message_as_ConnectAccepted()->token_bound();
        // The pair whose share it echoes (protocol 6); the placeholder when it echoes none.
        const auto* echoed = v.envelope->message_as_ConnectAccepted()->client_kx_public();
        net::KxPublicKey client_public = kx().public_key;
        if (echoed != nullptr && echoed->size() == client_public.size()) {
          std::copy(echoed->begin(), echoed->end(), client_public.begin());
        }
        const auto pair = kx_by_public_.find(client_public);
        const net::KxKeyPair& own = pair != kx_by_public_.end() ? *pair->second : kx();
        EXPECT_TRUE(net::client_session_keys(own, server_public, bound ? binding_[to.port()] : net::BindingSecret{},
                                             &keys));
        PeerKeys peer;
        peer.protection.send_key = keys.client_to_server;
        peer.protection.receive_key = keys.server_to_client;
        peer.protection.keyed = true;
        // A resent ConnectAccepted of the same session keeps the peer's state.
        const auto old = peers_.find(to.port());
        if (old == peers_.end() || old->second.protection.receive_key != peer.protection.receive_key) {
          peers_.insert_or_assign(to.port(), peer);
        }
      }
      return copy(bytes);
    }
    if (it == peers_.end()) {
      ADD_FAILURE() << "a sealed datagram to a peer without keys";
      return {};
    }
    Bytes plain(bytes.size());
    size_t n = 0;
    uint32_t sequence = 0;
    const net::OpenError e = net::open_session_packet(it->second.protection, bytes, plain, &n, &sequence);
    EXPECT_EQ(e, net::OpenError::None) << "the core sealed a datagram its peer cannot open";
    if (e == net::OpenError::None) it->second.newest_received = std::max(it->second.newest_received, sequence);
    plain.resize(e == net::OpenError::None ? n : 0);
    // A Disconnect ends the session: like a client, the peer forgets its keys (and then sends
    // plaintext again, which an address without a session is answered for).
    const wire::Verified v = wire::verify_datagram(plain, wire::Direction::ServerToClient);
    if (v.reason == wire::DropReason::None && v.envelope->message_type() == Message::Disconnect) peers_.erase(it);
    return plain;
  }
  /// Advances the fake clock and runs one wake-up; returns what was queued.
  std::vector<Sent> advance(std::chrono::nanoseconds dt, int* steps = nullptr) {
    now_ += dt;
    const int n = core_.update(now_, out_);
    if (steps) *steps = n;
    return drain();
  }
  std::vector<Sent> drain() {
    std::vector<Sent> sent;
    for (const Outbox::Datagram& d : out_.datagrams()) {
      EXPECT_LE(out_.bytes_of(d).size(), wire::kMaxDatagramBytes);
      last_wire_bytes_ = out_.bytes_of(d).size();
      Sent s{d.to, unseal_for(d.to, out_.bytes_of(d))};
      EXPECT_EQ(wire::verify_datagram(s.bytes, wire::Direction::ServerToClient).reason, wire::DropReason::None);
      sent.push_back(std::move(s));
    }
    out_.clear();
    return sent;
  }

  /// Runs the cookie round trip: Connect, expect a Challenge no larger than the Connect, then
  /// Connect with its cookie. Returns the answers to the second Connect.
  std::vector<Sent> handshake(const Endpoint& from, std::string_view name = "tester") {
    const Bytes first = copy(build_connect(name));
    const auto challenge = receive(from, first);
    if (challenge.size() != 1 || challenge[0].type() != Message::Challenge) {
      ADD_FAILURE() << "no Challenge for the first Connect";
      return challenge;
    }
    EXPECT_LE(challenge[0].bytes.size(), first.size());
    const auto* cookie = challenge[0].envelope()->message_as_Challenge()->cookie();
    cookies_[from] = Bytes(cookie->begin(), cookie->end());
    return receive(from, build_connect(name, cookies_[from]));
  }

  /// Connects `from` and returns its client id (0 on failure). Keeps a snapshot receiver with
  /// the announced quantisation for snapshot_row().
  uint32_t connect(const Endpoint& from, std::string_view name = "tester", bool confirm = true) {
    const auto sent = handshake(from, name);
    if (sent.size() != 1 || sent[0].type() != Message::ConnectAccepted) return 0;
    const auto* accepted = sent[0].envelope()->message_as_ConnectAccepted();
    const auto* q = accepted->quantization();
    wire::QuantizationConfig config;
    config.world_bound_m = q->world_bound();
    config.position_fraction_bits = q->position_fraction_bits();
    config.orientation_bits = q->orientation_bits();
    config.max_linear_speed = q->max_linear_speed();
    config.linear_velocity_fraction_bits = q->linear_velocity_fraction_bits();
    config.max_angular_speed = q->max_angular_speed();
    config.angular_velocity_fraction_bits = q->angular_velocity_fraction_bits();
    receivers_.insert_or_assign(from.port(), wire::SnapshotReceiver(config));
    const uint32_t id = accepted->client_id();
    // As a client does at once (docs/PROTOCOL.md): a sealed datagram confirms the session, which
    // gets no snapshots until then. An ack-only Ping (nonce 0) is answered by nothing.
    if (confirm) receive(from, wire::build_ping(fbb_, 0));
    return id;
  }

  static std::vector<const wire::RequestResult*> results(const std::vector<Sent>& sent) {
    std::vector<const wire::RequestResult*> r;
    for (const Sent& s : sent) {
      if (const auto* m = s.envelope()->message_as_RequestResult()) r.push_back(m);
    }
    return r;
  }
  // The results point into the datagrams: a temporary vector would leave them dangling.
  static std::vector<const wire::RequestResult*> results(std::vector<Sent>&&) = delete;
  static std::vector<const wire::RaycastResult*> raycasts(const std::vector<Sent>& sent) {
    std::vector<const wire::RaycastResult*> r;
    for (const Sent& s : sent) {
      if (const auto* m = s.envelope()->message_as_RaycastResult()) r.push_back(m);
    }
    return r;
  }
  static std::vector<const wire::RaycastResult*> raycasts(std::vector<Sent>&&) = delete;

  /// Connects a client, sends `requests` (built datagrams) and runs one step; returns what the
  /// step sent. Every request must be queued (none answered at once).
  std::vector<Sent> apply_in_one_step(const Endpoint& from, const std::vector<Bytes>& requests) {
    for (const Bytes& r : requests) EXPECT_TRUE(receive(from, r).empty());
    return advance(kStep);
  }
  /// Creates one object in its own step; returns its id (null on failure, with a test failure).
  ObjectID create(const Endpoint& from, const wire::CreateObjectArgs& args) {
    const auto sent = apply_in_one_step(from, {copy(wire::build_create_object(fbb_, next_id(from), args))});
    const auto r = results(sent);
    if (r.size() != 1 || r[0]->code() != ResultCode::Ok) {
      ADD_FAILURE() << "create failed" << (r.size() == 1 && r[0]->message() ? ": " + r[0]->message()->str() : "");
      return {};
    }
    return from_wire(r[0]->id());
  }
  /// Applies every snapshot in `sent` to its recipient's receiver (none acked, so each carries
  /// entries) and returns `id`'s row in the last one that held it, or nullopt.
  std::optional<wire::SnapshotObject> snapshot_row(const std::vector<Sent>& sent, ObjectID id) {
    std::optional<wire::SnapshotObject> row;
    for (const Sent& s : sent) {
      const auto* snap = s.envelope()->message_as_Snapshot();
      const auto it = receivers_.find(s.to.port());
      if (snap == nullptr || it == receivers_.end()) continue;
      const auto* data = snap->data();
      const wire::SnapshotError e = it->second.apply(wire::header_of(*s.envelope()).sequence(), snap->tick(),
                                                     std::span<const uint8_t>(data->data(), data->size()));
      // Stale: this datagram was applied by an earlier call on the same `sent`.
      EXPECT_TRUE(e == wire::SnapshotError::None || e == wire::SnapshotError::Stale) << wire::to_string(e);
      if (const wire::SnapshotObject* o = it->second.find(id)) row = *o;
    }
    return row;
  }
  /// The collision events of a CollisionEvents datagram in `s`, decoded with its recipient's
  /// quantisation (from its ConnectAccepted); empty for any other message. A block that does not
  /// decode fails the test.
  std::vector<wire::CollisionEvent> events_of(const Sent& s, std::vector<wire::JointEventFields>* joints = nullptr) {
    std::vector<wire::CollisionEvent> events;
    const auto* m = s.envelope()->message_as_CollisionEvents();
    const auto it = receivers_.find(s.to.port());
    if (m == nullptr || it == receivers_.end()) return events;
    const std::span<const uint8_t> block =
        m->packed() ? std::span<const uint8_t>(m->packed()->data(), m->packed()->size()) : std::span<const uint8_t>{};
    const wire::EventBlockError e = wire::decode_collision_events(block, it->second.config(), &events, joints);
    EXPECT_EQ(e, wire::EventBlockError::None) << wire::to_string(e);
    return events;
  }
  std::map<uint16_t, wire::SnapshotReceiver> receivers_;  // by client port
  size_t last_wire_bytes_ = 0;  // size on the wire (sealed) of the last datagram drained
  std::map<Endpoint, Bytes> cookies_;  // the cookie of each endpoint's last handshake()
  /// The next request id of `from`: each session's requests count from 1 (exactly-once window).
  uint32_t next_id(const Endpoint& from) { return ++next_request_[from.port()]; }
  std::map<uint16_t, uint32_t> next_request_;

  ServerConfig config_;
  ServerStats stats_;
  ServerCore core_;
  Outbox out_;
  flatbuffers::FlatBufferBuilder fbb_;
  TimePoint now_ = TimePoint{} + 1h;
  ObjectID ground_id_;
};

}  // namespace impulse::server::core_test
