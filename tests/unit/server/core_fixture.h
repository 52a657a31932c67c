// The ServerCore test fixture: a core on a fake clock (no sockets, no sleeps), a static ground,
// and helpers that run the handshake, send requests with per-session ids and decode snapshots.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/app/server_core.h"
#include "server/app/step_clock.h"
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

  /// Feeds one datagram at the current fake time; returns what the core queued in reply.
  std::vector<Sent> receive(const Endpoint& from, std::span<const uint8_t> bytes) {
    const Bytes aligned = copy(bytes);
    core_.handle_datagram(from, aligned, now_, out_);
    return drain();
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
      Sent s{d.to, copy(out_.bytes_of(d))};
      EXPECT_LE(s.bytes.size(), wire::kMaxDatagramBytes);
      EXPECT_EQ(wire::verify_datagram(s.bytes, wire::Direction::ServerToClient).reason, wire::DropReason::None);
      sent.push_back(std::move(s));
    }
    out_.clear();
    return sent;
  }

  /// Runs the cookie round trip: Connect, expect a Challenge no larger than the Connect, then
  /// Connect with its cookie. Returns the answers to the second Connect.
  std::vector<Sent> handshake(const Endpoint& from, std::string_view name = "tester") {
    const Bytes first = copy(wire::build_connect(fbb_, name));
    const auto challenge = receive(from, first);
    if (challenge.size() != 1 || challenge[0].type() != Message::Challenge) {
      ADD_FAILURE() << "no Challenge for the first Connect";
      return challenge;
    }
    EXPECT_LE(challenge[0].bytes.size(), first.size());
    const auto* cookie = challenge[0].envelope()->message_as_Challenge()->cookie();
    cookies_[from] = Bytes(cookie->begin(), cookie->end());
    return receive(from, wire::build_connect(fbb_, name, cookies_[from]));
  }

  /// Connects `from` and returns its client id (0 on failure). Keeps a snapshot receiver with
  /// the announced quantisation for snapshot_row().
  uint32_t connect(const Endpoint& from, std::string_view name = "tester") {
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
    return accepted->client_id();
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
  std::vector<wire::CollisionEvent> events_of(const Sent& s) {
    std::vector<wire::CollisionEvent> events;
    const auto* m = s.envelope()->message_as_CollisionEvents();
    const auto it = receivers_.find(s.to.port());
    if (m == nullptr || it == receivers_.end()) return events;
    const std::span<const uint8_t> block =
        m->packed() ? std::span<const uint8_t>(m->packed()->data(), m->packed()->size()) : std::span<const uint8_t>{};
    const wire::EventBlockError e = wire::decode_collision_events(block, it->second.config(), &events);
    EXPECT_EQ(e, wire::EventBlockError::None) << wire::to_string(e);
    return events;
  }
  std::map<uint16_t, wire::SnapshotReceiver> receivers_;  // by client port
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
