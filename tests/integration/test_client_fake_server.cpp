// impulse::Client against a scripted fake server over loopback UDP: connect timeouts and
// rejections, multi-part snapshot reassembly (out of order, duplicated, superseded, stale,
// malformed), and hostile datagrams. The fake sends exactly what each case needs, so the client's
// rules are tested without depending on the real server's timing.
#include <array>
#include <set>
#include <thread>

#include "integration/harness.h"

namespace impulse::test {
namespace {

using asio::ip::udp;
using FakeServer = RawSocket;

wire::ObjectState make_wire_object(uint32_t index, float y) {
  return wire::ObjectState(to_wire(ObjectID{index, 1}), wire::Vec3(static_cast<float>(index), y, 0.0f),
                           wire::Vec3(0.0f, -1.0f, 0.0f), wire::Vec3(0.5f, 0.5f, 0.5f), wire::Quat(0, 0, 0, 1),
                           wire::Vec3(0.0f, 0.0f, 0.0f), wire::BodyKind::Dynamic, wire::ShapeKind::Sphere, false,
                           false);
}

/// An object count whose snapshot takes exactly three parts (2.5 parts' worth).
uint32_t three_parts_of_objects() {
  return 2 * wire::snapshot_objects_per_part() + wire::snapshot_objects_per_part() / 2;
}

/// A client connected to a FakeServer that answered with ConnectAccepted.
class FakeSession : public ::testing::Test {
 protected:
  void SetUp() override {
    std::thread answer([this] {
      const std::optional<udp::endpoint> from = fake.wait_for(wire::Message::Connect);
      if (!from) return;
      client_endpoint = *from;
      fake.send(wire::build_connect_accepted(fake.fbb, 42, 120, 30, 1000), client_endpoint);
    });
    std::string error;
    const bool ok = client.connect("127.0.0.1", fake.port(), milliseconds{2000}, &error);
    answer.join();
    ASSERT_TRUE(ok) << error;
  }

  /// Polls the client until it has received `count` more datagrams (bounded); returns the
  /// merged results of those polls' snapshots as ticks.
  std::vector<uint64_t> deliver(uint64_t count) {
    std::vector<uint64_t> completed;
    const uint64_t target = client.stats().datagrams_in + count;
    const Clock::time_point deadline = Clock::now() + kWaitTimeout;
    for (int i = 0; i < kMaxIterations && Clock::now() < deadline && client.stats().datagrams_in < target; ++i) {
      const PollResult& r = client.poll(milliseconds{1});
      for (const SnapshotRange& s : r.snapshots) completed.push_back(s.tick);
      last_results.insert(last_results.end(), r.results.begin(), r.results.end());
      last_collisions.insert(last_collisions.end(), r.collisions.begin(), r.collisions.end());
      last_pongs.insert(last_pongs.end(), r.pongs.begin(), r.pongs.end());
      if (r.server_disconnected) disconnected_reason = r.disconnect_reason;
    }
    EXPECT_EQ(client.stats().datagrams_in, target) << "datagrams did not arrive in time";
    return completed;
  }

  void send_part(uint64_t tick, const std::vector<wire::ObjectState>& objects, uint16_t part) {
    const wire::SnapshotPlan plan = wire::plan_snapshot(objects.size());
    fake.send(wire::build_snapshot_part(fake.fbb, tick, objects, plan, part), client_endpoint);
  }

  FakeServer fake;
  Client client;
  udp::endpoint client_endpoint;
  std::vector<RequestResult> last_results;
  std::vector<CollisionEvent> last_collisions;
  std::vector<PongInfo> last_pongs;
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

TEST(ClientConnect, TimesOutWithAHelpfulMessageAndResendsConnect) {
  FakeServer silent;  // receives, never answers (no ICMP either: the port is open)
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

  // Connect was resent (every 250 ms: at 0, 250 and 500 ms), each a valid v1 Connect.
  int connects = 0;
  udp::endpoint from;
  for (size_t n = silent.receive(milliseconds{0}, &from); n != 0; n = silent.receive(milliseconds{0}, &from)) {
    const wire::Verified v = wire::verify_datagram(silent.last(n), wire::Direction::ClientToServer);
    ASSERT_EQ(v.reason, wire::DropReason::None);
    ASSERT_EQ(v.envelope->message_type(), wire::Message::Connect);
    EXPECT_EQ(v.envelope->message_as_Connect()->protocol_version(), wire::kProtocolVersion);
    EXPECT_EQ(v.envelope->message_as_Connect()->client_name()->str(), "impulse-client");
    ++connects;
  }
  EXPECT_EQ(connects, 3);
  EXPECT_EQ(client.stats().datagrams_out, 3u);
}

TEST(ClientConnect, ReportsARejectionWithItsReason) {
  FakeServer fake;
  std::thread answer([&] {
    if (const auto from = fake.wait_for(wire::Message::Connect)) {
      fake.send(wire::build_connect_rejected(fake.fbb, wire::ResultCode::ServerFull, "64 of 64 clients"), *from);
    }
  });
  Client client;
  std::string error;
  EXPECT_FALSE(client.connect("localhost", fake.port(), milliseconds{2000}, &error));
  answer.join();
  EXPECT_NE(error.find("rejected the connection: ServerFull (64 of 64 clients)"), std::string::npos) << error;
  EXPECT_NE(error.find("--max-clients"), std::string::npos) << error;
  EXPECT_FALSE(client.connected());
}

TEST(ClientConnect, RequestsAreNotSentWithoutASession) {
  Client client;
  EXPECT_EQ(client.create_object(ObjectDesc{}), 0u);
  EXPECT_EQ(client.destroy(ObjectID{1, 1}), 0u);
  EXPECT_EQ(client.apply_force(ObjectID{1, 1}, {1, 0, 0}), 0u);
  EXPECT_EQ(client.apply_impulse(ObjectID{1, 1}, {1, 0, 0}), 0u);
  EXPECT_EQ(client.set_velocity(ObjectID{1, 1}, {1, 0, 0}), 0u);
  EXPECT_EQ(client.ping(), 0u);
  EXPECT_TRUE(client.poll().empty());
  EXPECT_EQ(client.stats().datagrams_out, 0u);
  client.disconnect();  // harmless when idle
}

// ------------------------------------------------------------------------------ a session

TEST_F(FakeSession, ConnectAcceptedFillsTheSessionInfo) {
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.client_id(), 42u);
  EXPECT_EQ(client.tick_hz(), 120);
  EXPECT_EQ(client.snapshot_hz(), 30);
  EXPECT_EQ(client.server_tick(), 1000u);
  EXPECT_EQ(client.snapshot_tick(), 0u);
  EXPECT_TRUE(client.objects().empty());
}

TEST_F(FakeSession, AssemblesMultiPartSnapshotsInAnyOrder) {
  const uint32_t n = three_parts_of_objects();
  std::vector<wire::ObjectState> objects;
  for (uint32_t i = n; i > 0; --i) objects.push_back(make_wire_object(i, 10.0f));  // unsorted on purpose
  const wire::SnapshotPlan plan = wire::plan_snapshot(objects.size());
  ASSERT_GE(plan.part_count, 3) << "the case needs at least three parts";
  ASSERT_EQ(plan.part_count, 3) << "adjust the sends below to the plan";

  send_part(1010, objects, 2);
  send_part(1010, objects, 0);
  send_part(1010, objects, 0);  // a duplicated datagram is harmless
  EXPECT_TRUE(deliver(3).empty()) << "incomplete snapshot reported";
  EXPECT_TRUE(client.objects().empty());

  send_part(1010, objects, 1);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1010});
  EXPECT_EQ(client.snapshot_tick(), 1010u);
  const auto latest = client.objects();
  ASSERT_EQ(latest.size(), n);
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(latest[i].id, (ObjectID{i + 1, 1}));  // sorted by ObjectID
    EXPECT_EQ(latest[i].position, (Vec3{static_cast<float>(i + 1), 10.0f, 0.0f}));
    EXPECT_EQ(latest[i].velocity, (Vec3{0.0f, -1.0f, 0.0f}));
  }
  ASSERT_NE(client.find(ObjectID{17, 1}), nullptr);
  EXPECT_EQ(client.find(ObjectID{17, 1})->position.x, 17.0f);
  EXPECT_EQ(client.find(ObjectID{17, 2}), nullptr);  // same slot, other generation
  EXPECT_EQ(client.stats().snapshots_completed, 1u);
  EXPECT_EQ(client.stats().datagrams_dropped, 0u);
}

TEST_F(FakeSession, NewerTickSupersedesAnIncompleteOneAndStalePartsAreIgnored) {
  std::vector<wire::ObjectState> objects;
  for (uint32_t i = 1; i <= three_parts_of_objects(); ++i) objects.push_back(make_wire_object(i, 5.0f));
  ASSERT_EQ(wire::plan_snapshot(objects.size()).part_count, 3);

  send_part(1012, objects, 0);  // tick 1012 never completes
  send_part(1013, objects, 1);
  send_part(1013, objects, 0);
  send_part(1013, objects, 2);
  EXPECT_EQ(deliver(4), std::vector<uint64_t>{1013});
  EXPECT_EQ(client.stats().snapshots_superseded, 1u);

  send_part(1012, objects, 1);  // late parts of older ticks: ignored, never mixed in
  send_part(1012, objects, 2);
  send_part(1011, objects, 0);
  send_part(1013, objects, 0);  // a duplicate of a completed tick
  EXPECT_TRUE(deliver(4).empty());
  EXPECT_EQ(client.stats().snapshot_parts_stale, 4u);
  EXPECT_EQ(client.snapshot_tick(), 1013u);

  // A complete snapshot is the whole world: objects absent from it are gone.
  objects.resize(5);
  send_part(1014, objects, 0);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1014});
  EXPECT_EQ(client.objects().size(), 5u);
  EXPECT_EQ(client.find(ObjectID{6, 1}), nullptr);
  EXPECT_NE(client.find(ObjectID{5, 1}), nullptr);
  EXPECT_EQ(client.server_tick(), 1014u);
  EXPECT_EQ(client.stats().datagrams_dropped, 0u);
}

TEST_F(FakeSession, SnapshotWithoutAnObjectsVectorIsAnEmptyWorld) {
  std::vector<wire::ObjectState> objects{make_wire_object(1, 1.0f)};
  send_part(1050, objects, 0);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1050});
  ASSERT_EQ(client.objects().size(), 1u);

  fake.fbb.Clear();  // objects field absent altogether: legal FlatBuffers, no objects
  const auto snapshot = wire::CreateSnapshot(fake.fbb, 1051, 0, 1, 0);
  fake.send(wire::finish(fake.fbb, wire::Message::Snapshot, snapshot.Union()), client_endpoint);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1051});
  EXPECT_TRUE(client.objects().empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 0u);
}

TEST_F(FakeSession, DropsMalformedSnapshotsAndHostileDatagrams) {
  std::vector<wire::ObjectState> objects{make_wire_object(1, 1.0f), make_wire_object(2, 2.0f)};
  auto send_raw_snapshot = [&](uint64_t tick, uint16_t part, uint16_t part_count, uint32_t object_count) {
    flatbuffers::FlatBufferBuilder& fbb = fake.fbb;
    fbb.Clear();
    const auto vec = fbb.CreateVectorOfStructs(objects.data(), objects.size());
    const auto snapshot = wire::CreateSnapshot(fbb, tick, part, part_count, object_count, vec);
    fake.send(wire::finish(fbb, wire::Message::Snapshot, snapshot.Union()), client_endpoint);
  };
  send_raw_snapshot(1020, 3, 2, 2);         // part out of range
  send_raw_snapshot(1021, 0, 0, 2);         // zero parts
  send_raw_snapshot(1022, 0, 1, 1);         // more objects than it claims
  send_raw_snapshot(1023, 0, 1, 3);         // complete, but the totals disagree
  send_raw_snapshot(1024, 0, 1, 1000000);   // a claim no datagram count could carry
  const std::array<uint8_t, 16> garbage{0xde, 0xad, 0xbe, 0xef, 'I', 'M', 'P', 'X', 1, 2, 3, 4, 5, 6, 7, 8};
  fake.send(garbage, client_endpoint);
  fake.send(std::span<const uint8_t>(garbage.data(), 3), client_endpoint);  // too short
  fake.send(wire::build_ping(fake.fbb, 7), client_endpoint);                // wrong direction
  fake.send(wire::build_pong(fake.fbb, 999, 1), client_endpoint);           // a pong nobody asked for

  EXPECT_TRUE(deliver(9).empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 9u);
  const auto& by_reason = client.stats().drops_by_reason;
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::None)], 6u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::BadIdentifier)], 1u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::Empty)], 1u);
  EXPECT_EQ(by_reason[static_cast<size_t>(wire::DropReason::WrongDirection)], 1u);
  EXPECT_TRUE(client.objects().empty());
  EXPECT_TRUE(client.connected());

  // A stranger's datagrams are dropped even when well formed.
  FakeServer stranger;
  const wire::SnapshotPlan plan = wire::plan_snapshot(objects.size());
  stranger.send(wire::build_snapshot_part(stranger.fbb, 1030, objects, plan, 0),
                udp::endpoint(asio::ip::address_v4::loopback(), client.local_port()));
  EXPECT_TRUE(deliver(1).empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 10u);

  // The session still works after all that.
  send_part(1031, objects, 0);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1031});
  EXPECT_EQ(client.objects().size(), 2u);
}

TEST_F(FakeSession, DeliversResultsEventsPongsAndServerDisconnect) {
  fake.send(wire::build_request_result(fake.fbb, 7, wire::ResultCode::StaleId, ObjectID{3, 2}, "id 3:2 is stale"),
            client_endpoint);
  const std::array<wire::CollisionEvent, 2> events{
      wire::CollisionEvent(1040, to_wire(ObjectID{1, 1}), to_wire(ObjectID{2, 1}), wire::Vec3(0, 0.5f, 0),
                           wire::Vec3(0, 1, 0), wire::ContactEventType::Begin),
      wire::CollisionEvent(1041, to_wire(ObjectID{1, 1}), to_wire(ObjectID{3, 1}), wire::Vec3(1, 0, 0),
                           wire::Vec3(1, 0, 0), wire::ContactEventType::End)};
  fake.send(wire::build_collision_events(fake.fbb, events), client_endpoint);
  const uint64_t nonce = client.ping();
  ASSERT_TRUE(fake.wait_for(wire::Message::Ping).has_value());
  fake.send(wire::build_pong(fake.fbb, nonce, 1042), client_endpoint);
  fake.send(wire::build_pong(fake.fbb, nonce, 1042), client_endpoint);  // duplicated: dropped
  deliver(4);

  ASSERT_EQ(last_results.size(), 1u);
  EXPECT_EQ(last_results[0].request_id, 7u);
  EXPECT_EQ(last_results[0].code, wire::ResultCode::StaleId);
  EXPECT_EQ(last_results[0].id, (ObjectID{3, 2}));
  EXPECT_EQ(last_results[0].message, "id 3:2 is stale");
  ASSERT_EQ(last_collisions.size(), 2u);
  EXPECT_EQ(last_collisions[0].tick, 1040u);
  EXPECT_EQ(last_collisions[0].type, wire::ContactEventType::Begin);
  EXPECT_EQ(last_collisions[0].b, (ObjectID{2, 1}));
  EXPECT_EQ(last_collisions[0].point, (Vec3{0, 0.5f, 0}));
  EXPECT_EQ(last_collisions[1].type, wire::ContactEventType::End);
  EXPECT_EQ(last_collisions[1].normal, (Vec3{1, 0, 0}));
  ASSERT_EQ(last_pongs.size(), 1u);
  EXPECT_EQ(last_pongs[0].nonce, nonce);
  EXPECT_EQ(last_pongs[0].server_tick, 1042u);
  EXPECT_EQ(client.server_tick(), 1042u);
  EXPECT_EQ(client.stats().datagrams_dropped, 1u);

  fake.send(wire::build_disconnect(fake.fbb, "server shutting down"), client_endpoint);
  deliver(1);
  EXPECT_EQ(disconnected_reason, std::optional<std::string>("server shutting down"));
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.client_id(), 0u);
}

TEST_F(FakeSession, SnapshotsCarryOrientationAngularVelocityAndTheSensorFlag) {
  const std::vector<wire::ObjectState> objects{
      wire::ObjectState(to_wire(ObjectID{4, 2}), wire::Vec3(1, 2, 3), wire::Vec3(0, 0, 0), wire::Vec3(0.25f, 0.5f, 0.25f),
                        wire::Quat(0.0f, 0.6f, 0.0f, 0.8f), wire::Vec3(0.5f, -1.5f, 2.5f), wire::BodyKind::Dynamic,
                        wire::ShapeKind::Capsule, false, false),
      wire::ObjectState(to_wire(ObjectID{5, 1}), wire::Vec3(0, 0, 0), wire::Vec3(0, 0, 0), wire::Vec3(0, 0, 0),
                        wire::Quat(0, 0, 0, 1), wire::Vec3(0, 0, 0), wire::BodyKind::Static, wire::ShapeKind::Plane,
                        false, true)};
  send_part(1060, objects, 0);
  EXPECT_EQ(deliver(1), std::vector<uint64_t>{1060});
  const ObjectState* capsule = client.find(ObjectID{4, 2});
  ASSERT_NE(capsule, nullptr);
  EXPECT_EQ(capsule->shape, wire::ShapeKind::Capsule);
  EXPECT_EQ(capsule->dims, (Vec3{0.25f, 0.5f, 0.25f}));
  EXPECT_EQ(capsule->orientation, (Quat{0.0f, 0.6f, 0.0f, 0.8f}));
  EXPECT_EQ(capsule->angular_velocity, (Vec3{0.5f, -1.5f, 2.5f}));
  EXPECT_FALSE(capsule->sensor);
  const ObjectState* plane = client.find(ObjectID{5, 1});
  ASSERT_NE(plane, nullptr);
  EXPECT_EQ(plane->shape, wire::ShapeKind::Plane);
  EXPECT_TRUE(plane->sensor);
}

TEST_F(FakeSession, SendsTorqueAngularVelocityAndRaycastRequestsAndDeliversRaycastResults) {
  // The requests reach the server as built, each with its own request id.
  const ObjectID id{9, 3};
  const uint32_t torque_id = client.apply_torque(id, {0, 5, 0});
  const uint32_t spin_id = client.set_angular_velocity(id, {1, 0, 0});
  const uint32_t closest_id = client.raycast({0, 10, 0}, {0, -20, 0});
  const uint32_t all_id = client.raycast({0, 10, 0}, {0, -20, 0}, true);
  const uint32_t bad_id = client.raycast({0, 10, 0}, {0, 0, 0});  // sent as is: the server judges
  EXPECT_EQ(std::set<uint32_t>({torque_id, spin_id, closest_id, all_id, bad_id}).size(), 5u);
  {
    asio::ip::udp::endpoint from;
    std::vector<wire::Message> types;
    for (int i = 0; i < 50 && types.size() < 5; ++i) {
      const size_t n = fake.receive(milliseconds{50}, &from);
      if (n == 0) continue;
      const wire::Verified v = wire::verify_datagram(fake.last(n), wire::Direction::ClientToServer);
      ASSERT_EQ(v.reason, wire::DropReason::None);
      const wire::Envelope& e = *v.envelope;
      types.push_back(e.message_type());
      if (const auto* m = e.message_as_ApplyTorque()) {
        EXPECT_EQ(m->request_id(), torque_id);
        EXPECT_EQ(from_wire(m->id()), id);
        EXPECT_EQ(wire::to_vec3(*m->torque()), (Vec3{0, 5, 0}));
      } else if (const auto* m = e.message_as_SetAngularVelocity()) {
        EXPECT_EQ(m->request_id(), spin_id);
        EXPECT_EQ(wire::to_vec3(*m->angular_velocity()), (Vec3{1, 0, 0}));
      } else if (const auto* m = e.message_as_Raycast()) {
        EXPECT_EQ(wire::to_vec3(*m->origin()), (Vec3{0, 10, 0}));
        EXPECT_EQ(m->all(), m->request_id() == all_id);
      }
    }
    EXPECT_EQ(types, (std::vector<wire::Message>{wire::Message::ApplyTorque, wire::Message::SetAngularVelocity,
                                                 wire::Message::Raycast, wire::Message::Raycast,
                                                 wire::Message::Raycast}));
  }

  // The answers: one hit, three hits flagged as truncated, and an error with its message.
  const std::vector<wire::RayHitEntry> hits{
      wire::RayHitEntry(to_wire(ObjectID{2, 1}), wire::Vec3(0, 6.5f, 0), wire::Vec3(0, 1, 0), 0.175f),
      wire::RayHitEntry(to_wire(ObjectID{3, 1}), wire::Vec3(0, 3.5f, 0), wire::Vec3(0, 1, 0), 0.325f),
      wire::RayHitEntry(to_wire(ObjectID{1, 1}), wire::Vec3(0, 0, 0), wire::Vec3(0, 1, 0), 0.5f)};
  fake.send(wire::build_raycast_result(fake.fbb, closest_id, wire::ResultCode::Ok, 1070, std::span(hits).first(1),
                                       false, {}),
            client_endpoint);
  fake.send(wire::build_raycast_result(fake.fbb, all_id, wire::ResultCode::Ok, 1070, hits, true, {}), client_endpoint);
  fake.send(wire::build_raycast_result(fake.fbb, bad_id, wire::ResultCode::InvalidArgument, 0, {}, false,
                                       "translation: length must be in (0, 2000] m"),
            client_endpoint);
  std::vector<RaycastResult> answers;
  std::vector<std::vector<RayHit>> answer_hits;
  const uint64_t target = client.stats().datagrams_in + 3;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && client.stats().datagrams_in < target; ++i) {
    const PollResult& r = client.poll(milliseconds{1});
    for (const RaycastResult& ray : r.raycasts) {
      answers.push_back(ray);
      const auto h = r.hits_of(ray);
      answer_hits.emplace_back(h.begin(), h.end());
    }
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
  EXPECT_EQ(answers[2].code, wire::ResultCode::InvalidArgument);
  EXPECT_EQ(answers[2].message, "translation: length must be in (0, 2000] m");
  EXPECT_TRUE(answer_hits[2].empty());
  EXPECT_EQ(client.stats().datagrams_dropped, 0u);
}

TEST_F(FakeSession, SendsKeepalivePingsWhenIdleAndDisconnectRedundantly) {
  // Nothing sent since Connect: within ~1 s poll() sends a keepalive Ping on its own.
  std::optional<udp::endpoint> ping;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && !ping; ++i) {
    client.poll(milliseconds{1});
    ping = fake.wait_for(wire::Message::Ping, milliseconds{5});
  }
  ASSERT_TRUE(ping.has_value()) << "no keepalive ping";

  client.disconnect("bye");
  int disconnects = 0;
  while (fake.wait_for(wire::Message::Disconnect, milliseconds{50})) ++disconnects;
  EXPECT_EQ(disconnects, 3);
  EXPECT_FALSE(client.connected());
}

}  // namespace
}  // namespace impulse::test
