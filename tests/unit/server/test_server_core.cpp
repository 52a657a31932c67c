// ServerCore driven by a fake clock (no sockets, no sleeps): sessions, the request queue applied
// at tick boundaries, immediate rejections, anti-amplification, snapshots at their own rate,
// collision events, timeouts, shutdown and the capped fixed-step accumulator.
#include "unit/server/core_fixture.h"

namespace impulse::server {
namespace {

using namespace core_test;

TEST_F(CoreTest, ConnectIsAcceptedAndIdempotent) {
  const Endpoint a = endpoint(5000);
  const auto sent = handshake(a, "alice");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].to, a);
  const auto* accepted = sent[0].envelope()->message_as_ConnectAccepted();
  ASSERT_NE(accepted, nullptr);
  EXPECT_EQ(accepted->client_id(), 1u);
  EXPECT_EQ(accepted->tick_hz(), kTickHz);
  EXPECT_EQ(accepted->snapshot_hz(), 30);
  EXPECT_EQ(accepted->tick(), 0u);

  // A Connect resent with its cookie and key share from a connected address (the first answer
  // may be lost) gets the same session's ConnectAccepted at once; without the cookie nothing
  // (anyone can write the address on a datagram, and answering would reflect at the player).
  EXPECT_TRUE(receive(a, build_connect("alice")).empty());
  const auto again = receive(a, build_connect("alice", cookies_[a]));
  ASSERT_EQ(again.size(), 1u);
  ASSERT_EQ(again[0].type(), Message::ConnectAccepted);
  EXPECT_EQ(again[0].envelope()->message_as_ConnectAccepted()->client_id(), 1u);
  EXPECT_EQ(core_.sessions().size(), 1u);
  EXPECT_EQ(connect(endpoint(5001)), 2u);
  EXPECT_EQ(stats_.clients.load(), 2u);
}

TEST_F(CoreTest, ServerFullAndBadConnectsAreRejected) {
  ASSERT_EQ(connect(endpoint(1)), 1u);
  ASSERT_EQ(connect(endpoint(2)), 2u);
  auto sent = handshake(endpoint(3), "third");
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].type(), Message::ConnectRejected);
  EXPECT_EQ(sent[0].envelope()->message_as_ConnectRejected()->reason(), ResultCode::ServerFull);

  sent = receive(endpoint(1), wire::build_disconnect(fbb_, "leaving"));
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(core_.sessions().size(), 1u);

  sent = receive(endpoint(4), build_connect(std::string(65, 'n')));  // refused before the cookie
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].type(), Message::ConnectRejected);
  EXPECT_EQ(sent[0].envelope()->message_as_ConnectRejected()->reason(), ResultCode::InvalidArgument);
  EXPECT_EQ(core_.sessions().size(), 1u);
}

TEST_F(CoreTest, VersionMismatchConnectGetsASmallRejection) {
  flatbuffers::FlatBufferBuilder fbb;
  constexpr uint16_t kOther = wire::kProtocolVersion + 1;
  const auto name = fbb.CreateString("from the future");
  FinishEnvelopeBuffer(fbb,
                       wire::CreateEnvelope(fbb, kOther, Message::Connect, wire::CreateConnect(fbb, kOther, name).Union()));
  const Bytes request = copy({fbb.GetBufferPointer(), fbb.GetSize()});
  const auto sent = receive(endpoint(9), request);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_LE(sent[0].bytes.size(), request.size());
  ASSERT_EQ(sent[0].type(), Message::ConnectRejected);
  EXPECT_EQ(sent[0].envelope()->message_as_ConnectRejected()->reason(), ResultCode::VersionMismatch);
  EXPECT_EQ(core_.sessions().size(), 0u);
  EXPECT_EQ(stats_.datagrams_dropped.load(), 1u);
}

TEST_F(CoreTest, StrangersGetNotConnectedNoLargerThanTheirRequest) {
  const Bytes request = copy(wire::build_destroy_object(fbb_, 77, ObjectID{1, 1}));
  const auto sent = receive(endpoint(7), request);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_LE(sent[0].bytes.size(), request.size());
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->request_id(), 77u);
  EXPECT_EQ(r[0]->code(), ResultCode::NotConnected);
  EXPECT_EQ(core_.queued_requests(), 0u);

  // A stranger's Ping is answered only when padded to the size of the Pong (which grows once
  // the tick is non-zero: FlatBuffers omits fields equal to their default).
  advance(kStep);
  Bytes ping = copy(wire::build_ping(fbb_, 5));
  ASSERT_GT(wire::build_pong(fbb_, 5, 1, 16667).size(), ping.size());
  EXPECT_TRUE(receive(endpoint(7), ping).empty());
  ping.resize(wire::kMaxDatagramBytes, 0);
  const auto pong = receive(endpoint(7), ping);
  ASSERT_EQ(pong.size(), 1u);
  EXPECT_LE(pong[0].bytes.size(), ping.size());
  EXPECT_EQ(pong[0].envelope()->message_as_Pong()->nonce(), 5u);
  EXPECT_EQ(core_.rejects().count(RejectReason::NotConnected), 2u);
}

TEST_F(CoreTest, PingIsAnsweredAtOnceWithTheTick) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  advance(kStep * 3);
  const auto sent = receive(a, wire::build_ping(fbb_, 0xABCDEF));
  ASSERT_EQ(sent.size(), 1u);
  const auto* pong = sent[0].envelope()->message_as_Pong();
  ASSERT_NE(pong, nullptr);
  EXPECT_EQ(pong->nonce(), 0xABCDEFu);
  EXPECT_EQ(pong->tick(), 3u);
}

TEST_F(CoreTest, RequestsAreAppliedAtTheNextTickInArrivalOrder) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs ball;
  ball.position = {0, 5, 0};
  EXPECT_TRUE(receive(a, wire::build_create_object(fbb_, next_id(a), ball)).empty());
  ball.position = {3, 5, 0};
  EXPECT_TRUE(receive(a, wire::build_create_object(fbb_, next_id(a), ball)).empty());
  EXPECT_TRUE(receive(a, wire::build_apply_force(fbb_, next_id(a), ground_id_, {1, 0, 0})).empty());
  EXPECT_TRUE(receive(a, wire::build_destroy_object(fbb_, next_id(a), ObjectID{1234, 9})).empty());
  EXPECT_EQ(core_.queued_requests(), 4u);
  EXPECT_EQ(core_.world().object_count(), 1u);  // nothing applied before the tick

  advance(kStep / 2);  // no step due yet: still queued
  EXPECT_EQ(core_.queued_requests(), 4u);

  const auto sent = advance(kStep / 2);
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0]->request_id(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::Ok);
  EXPECT_EQ(r[1]->request_id(), 2u);
  EXPECT_EQ(r[1]->code(), ResultCode::Ok);
  EXPECT_NE(r[0]->id(), r[1]->id());
  EXPECT_TRUE(core_.world().is_valid(from_wire(r[0]->id())));
  EXPECT_EQ(r[2]->code(), ResultCode::NotDynamic);  // force on the static ground
  EXPECT_NE(r[2]->message(), nullptr);
  EXPECT_EQ(r[3]->code(), ResultCode::StaleId);
  EXPECT_EQ(core_.world().object_count(), 3u);
  EXPECT_EQ(stats_.requests_applied.load(), 2u);
  EXPECT_EQ(stats_.requests_rejected.load(), 2u);

  // The created object is addressable: destroy it, then its id is stale.
  const ObjectID first = from_wire(r[0]->id());
  receive(a, wire::build_destroy_object(fbb_, next_id(a), first));
  receive(a, wire::build_set_velocity(fbb_, next_id(a), first, {1, 0, 0}));
  const auto sent2 = advance(kStep);
  const auto r2 = results(sent2);
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[0]->code(), ResultCode::Ok);
  EXPECT_EQ(r2[1]->code(), ResultCode::StaleId);
  EXPECT_FALSE(core_.world().is_valid(first));
}

TEST_F(CoreTest, InvalidNumbersAreRejectedImmediatelyNamingTheField) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs bad;
  bad.mass = -1.0f;
  const auto sent = receive(a, wire::build_create_object(fbb_, next_id(a), bad));
  auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::InvalidArgument);
  EXPECT_NE(r[0]->message()->str().find("mass"), std::string::npos);

  const auto sent2 = receive(a, wire::build_apply_impulse(fbb_, next_id(a), ground_id_, {std::nanf(""), 0, 0}));
  r = results(sent2);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::InvalidArgument);
  EXPECT_NE(r[0]->message()->str().find("impulse"), std::string::npos);
  EXPECT_EQ(core_.queued_requests(), 0u);
  EXPECT_EQ(core_.world().object_count(), 1u);
}

TEST_F(CoreTest, MalformedDatagramsAreCountedAndDropped) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  EXPECT_TRUE(receive(a, Bytes{}).empty());
  EXPECT_TRUE(receive(a, Bytes(1500, 0xAB)).empty());
  Bytes bad_id = copy(wire::build_ping(fbb_, 1));
  bad_id[5] = 'Z';
  EXPECT_TRUE(receive(a, bad_id).empty());
  EXPECT_TRUE(receive(a, wire::build_pong(fbb_, 1, 2, 3)).empty());  // wrong direction
  EXPECT_EQ(stats_.datagrams_dropped.load(), 4u);
  EXPECT_EQ(core_.rejects().count(RejectReason::Empty), 1u);
  EXPECT_EQ(core_.rejects().count(RejectReason::Oversized), 1u);
  EXPECT_EQ(core_.rejects().count(RejectReason::BadIdentifier), 1u);
  EXPECT_EQ(core_.rejects().count(RejectReason::WrongDirection), 1u);
  EXPECT_EQ(core_.sessions().size(), 1u);  // the session is unaffected
}

// The 1200-byte limit holds for sealed datagrams too: one of 1201 bytes (an authentic seal over a
// padded Ping) was opened and answered; it is dropped as Oversized, unopened. 1200 is answered.
TEST_F(CoreTest, ASealedDatagramOverTheSizeLimitIsDroppedUnopened) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  for (const size_t total : {wire::kMaxDatagramBytes, wire::kMaxDatagramBytes + 1}) {
    Bytes ping = copy(wire::build_ping(fbb_, 7));
    ping.resize(total - net::kSealOverheadBytes, 0);  // the fixture seals it: total bytes on the wire
    const size_t oversized = core_.rejects().count(RejectReason::Oversized);
    const auto sent = receive(a, ping);
    if (total <= wire::kMaxDatagramBytes) {
      EXPECT_EQ(sent.size(), 1u) << total;
      EXPECT_EQ(core_.rejects().count(RejectReason::Oversized), oversized);
    } else {
      EXPECT_TRUE(sent.empty()) << total;
      EXPECT_EQ(core_.rejects().count(RejectReason::Oversized), oversized + 1);
    }
  }
  EXPECT_EQ(core_.sessions().size(), 1u);
}

TEST_F(CoreTest, SnapshotsAtTheirOwnRateWithEveryObject) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  for (uint32_t i = 0; i < 40; ++i) {
    wire::CreateObjectArgs ball;
    ball.position = {static_cast<float>(i) * 1.5f - 30.0f, 2.0f, 0.0f};
    receive(a, wire::build_create_object(fbb_, next_id(a), ball));
  }
  std::vector<uint64_t> ticks;
  wire::SnapshotReceiver& view = receivers_.at(a.port());
  for (int i = 0; i < kTickHz; ++i) {  // one simulated second, one step per wake-up
    const auto sent = advance(kStep);
    snapshot_row(sent, ground_id_);  // applies them
    for (const Sent& s : sent) {
      const auto* snap = s.envelope()->message_as_Snapshot();
      if (!snap) continue;
      EXPECT_EQ(s.to, a);
      ticks.push_back(snap->tick());
    }
  }
  ASSERT_EQ(ticks.size(), 30u);  // 30 Hz, one datagram each
  for (size_t i = 0; i < ticks.size(); ++i) EXPECT_EQ(ticks[i], 2 * (i + 1));
  EXPECT_EQ(view.objects().size(), 41u);  // the ground and the 40 balls
  EXPECT_EQ(view.tick(), 60u);
}

TEST_F(CoreTest, CollisionEventsAreTickStampedAndOrdered) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs ball;
  ball.dims = {0.5f, 0.5f, 0.5f};
  ball.position = {0, 1.0f, 0};  // 0.5 m above the ground
  receive(a, wire::build_create_object(fbb_, next_id(a), ball));
  std::vector<wire::CollisionEvent> begins;
  uint64_t last_tick = 0;
  for (int i = 0; i < 2 * kTickHz && begins.empty(); ++i) {
    for (const Sent& s : advance(kStep)) {
      if (s.envelope()->message_type() == Message::Snapshot) last_tick = s.envelope()->message_as_Snapshot()->tick();
      for (const wire::CollisionEvent& e : events_of(s)) {
        EXPECT_LT(e.a(), e.b());
        EXPECT_GE(e.tick(), last_tick);
        EXPECT_LE(e.tick(), core_.world().tick());
        if (e.type() == wire::ContactEventType::Begin) begins.push_back(e);
      }
    }
  }
  ASSERT_EQ(begins.size(), 1u);
  // Free fall of 0.5 m takes sqrt(2 * 0.5 / 9.81) = 0.319 s = 19.2 ticks at 60 Hz.
  EXPECT_NEAR(static_cast<double>(begins[0].tick()), 19.2, 3.0);
  // The normal points from a to b: from the ground (lower id) up to the ball, or the reverse.
  const bool ground_is_a = begins[0].a() == impulse::to_wire(ground_id_);
  EXPECT_NEAR(begins[0].normal().y(), ground_is_a ? 1.0f : -1.0f, 1e-3f);
}

TEST_F(CoreTest, SilentSessionsTimeOutAndPingsKeepThemAlive) {
  const Endpoint quiet = endpoint(1), chatty = endpoint(2);
  ASSERT_NE(connect(quiet), 0u);
  ASSERT_NE(connect(chatty), 0u);
  std::vector<Sent> disconnects;
  for (int i = 0; i < 3 * kTickHz; ++i) {  // 3 s > the 2 s timeout
    if (i % kTickHz == 0) receive(chatty, wire::build_ping(fbb_, static_cast<uint64_t>(i)));
    for (Sent& s : advance(kStep)) {
      if (s.type() == Message::Disconnect) disconnects.push_back(std::move(s));
    }
  }
  ASSERT_EQ(disconnects.size(), 1u);
  EXPECT_EQ(disconnects[0].to, quiet);
  ASSERT_EQ(core_.sessions().size(), 1u);
  EXPECT_EQ(core_.sessions().sessions()[0].endpoint, chatty);
  // A request from the timed-out address is now NotConnected.
  const auto refused = receive(quiet, wire::build_destroy_object(fbb_, next_id(quiet), ObjectID{1, 1}));
  const auto r = results(refused);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::NotConnected);
}

TEST_F(CoreTest, ShutdownDisconnectsEveryoneAndRefusesNewClients) {
  ASSERT_NE(connect(endpoint(1)), 0u);
  ASSERT_NE(connect(endpoint(2)), 0u);
  core_.shut_down("server shutting down", out_);
  const auto sent = drain();
  ASSERT_EQ(sent.size(), 2u);
  for (const Sent& s : sent) {
    ASSERT_EQ(s.type(), Message::Disconnect);
    EXPECT_EQ(s.envelope()->message_as_Disconnect()->reason()->str(), "server shutting down");
  }
  EXPECT_EQ(core_.sessions().size(), 0u);
  const auto refused = receive(endpoint(3), build_connect("late"));  // refused before the cookie
  ASSERT_EQ(refused.size(), 1u);
  ASSERT_EQ(refused[0].type(), Message::ConnectRejected);
  EXPECT_EQ(refused[0].envelope()->message_as_ConnectRejected()->reason(), ResultCode::ShuttingDown);
}

TEST_F(CoreTest, AccumulatorIsCappedAndCountsDroppedSteps) {
  int steps = 0;
  advance(1s, &steps);  // a 1 s stall: 60 steps due, 4 allowed
  EXPECT_EQ(steps, 4);
  EXPECT_EQ(core_.dropped_steps(), 56u);
  EXPECT_EQ(stats_.steps_dropped.load(), 56u);
  EXPECT_EQ(core_.world().tick(), 4u);
  EXPECT_EQ(stats_.tick.load(), 4u);
  advance(kStep, &steps);  // back to real time: exactly one step
  EXPECT_EQ(steps, 1);
}

// --- Rotation, shapes, sensors and raycasts (protocol version 2) --------------------------------

constexpr float kPi = 3.14159265f;

TEST_F(CoreTest, CreateObjectCarriesOrientationShapesSensorAndMaterialIntoTheWorld) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  // An oriented cube, its quaternion 0.05 % too long: accepted and normalised by the server. A
  // cube's inertia is isotropic, so its spin stays constant (no gyroscopic drift) and the
  // closed form below holds.
  const Quat tilt = quat_from_axis_angle({0, 0, 1}, kPi / 6.0f);
  wire::CreateObjectArgs box;
  box.shape = wire::ShapeKind::Box;
  box.dims = {0.5f, 0.5f, 0.5f};
  box.position = {0, 50, 0};
  box.orientation = {tilt.x * 1.0005f, tilt.y * 1.0005f, tilt.z * 1.0005f, tilt.w * 1.0005f};
  box.angular_velocity = {0.0f, 1.5f, 0.0f};
  box.angular_damping = 0.0f;
  box.material = 3;
  const ObjectID box_id = create(a, box);
  ASSERT_FALSE(box_id.is_null());
  wire::CreateObjectArgs capsule;
  capsule.shape = wire::ShapeKind::Capsule;
  capsule.dims = {0.25f, 0.75f, 0.0f};
  capsule.position = {5, 50, 0};
  const ObjectID capsule_id = create(a, capsule);
  ASSERT_FALSE(capsule_id.is_null());
  wire::CreateObjectArgs cylinder;
  cylinder.shape = wire::ShapeKind::Cylinder;
  cylinder.dims = {0.3f, 0.45f, 0.0f};
  cylinder.position = {10, 50, 0};
  const ObjectID cylinder_id = create(a, cylinder);
  ASSERT_FALSE(cylinder_id.is_null());
  const std::optional<physics::BodyState> cyl = core_.world().get_object(cylinder_id);
  ASSERT_TRUE(cyl.has_value());
  EXPECT_EQ(cyl->shape.kind, physics::ShapeKind::Cylinder);
  EXPECT_EQ(cyl->shape.radius, 0.3f);
  EXPECT_EQ(cyl->shape.half_height, 0.45f);
  wire::CreateObjectArgs zone;
  zone.kind = wire::BodyKind::Static;
  zone.shape = wire::ShapeKind::Box;
  zone.dims = {1.0f, 0.5f, 2.0f};
  zone.position = {-5, 1, 0};
  zone.sensor = true;
  const ObjectID zone_id = create(a, zone);
  ASSERT_FALSE(zone_id.is_null());

  const std::optional<physics::BodyState> b = core_.world().get_object(box_id);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->shape.kind, physics::ShapeKind::Box);
  EXPECT_EQ(b->shape.half_extents, (Vec3{0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(b->material, 3);
  EXPECT_FALSE(b->sensor);
  // Spinning at 1.5 rad/s about +Y for the steps since creation: the local X axis, tilted 30°
  // up, keeps its height (a rotation about +Y) and turns about Y by 1.5 rad/s * t.
  EXPECT_NEAR(std::sqrt(dot(b->orientation, b->orientation)), 1.0f, 1e-6f);
  const Vec3 local_x = rotate(b->orientation, {1, 0, 0});
  EXPECT_NEAR(local_x.y, 0.5f, 1e-4f);  // sin 30°
  EXPECT_NEAR(b->angular_velocity.y, 1.5f, 1e-5f);

  const std::optional<physics::BodyState> c = core_.world().get_object(capsule_id);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->shape.kind, physics::ShapeKind::Capsule);
  EXPECT_EQ(c->shape.radius, 0.25f);
  EXPECT_EQ(c->shape.half_height, 0.75f);
  EXPECT_EQ(c->orientation, Quat{});  // absent on the wire = identity
  const std::optional<physics::BodyState> z = core_.world().get_object(zone_id);
  ASSERT_TRUE(z.has_value());
  EXPECT_TRUE(z->sensor);
  EXPECT_EQ(z->kind, physics::BodyKind::Static);

  // The snapshot rows carry the pose, the angular velocity, the dims and the sensor flag.
  std::optional<wire::SnapshotObject> box_row, capsule_row, zone_row, cylinder_row;
  for (int i = 0; i < 4 && !(box_row && capsule_row && zone_row && cylinder_row); ++i) {
    const auto sent = advance(kStep);
    box_row = snapshot_row(sent, box_id);
    capsule_row = snapshot_row(sent, capsule_id);
    zone_row = snapshot_row(sent, zone_id);
    cylinder_row = snapshot_row(sent, cylinder_id);
  }
  ASSERT_TRUE(box_row && capsule_row && zone_row && cylinder_row) << "no snapshot with all four rows";
  EXPECT_EQ(cylinder_row->shape, wire::ShapeKind::Cylinder);
  EXPECT_EQ(cylinder_row->dims, (Vec3{0.3f, 0.45f, 0.3f}));
  const physics::BodyState now = *core_.world().get_object(box_id);
  // Quantised on the wire: orientation to the smallest-three bound, angular velocity to 1/128 rad/s.
  EXPECT_GT(std::fabs(dot(box_row->orientation, now.orientation)), static_cast<float>(std::cos(0.5 * wire::max_orientation_error_rad(10))) - 1e-6f);
  EXPECT_NEAR(box_row->angular_velocity.x, now.angular_velocity.x, 1.0f / 256.0f + 1e-6f);
  EXPECT_NEAR(box_row->angular_velocity.y, now.angular_velocity.y, 1.0f / 256.0f + 1e-6f);
  EXPECT_NEAR(box_row->angular_velocity.z, now.angular_velocity.z, 1.0f / 256.0f + 1e-6f);
  EXPECT_EQ(box_row->shape, wire::ShapeKind::Box);
  EXPECT_EQ(capsule_row->shape, wire::ShapeKind::Capsule);
  EXPECT_EQ(capsule_row->dims, (Vec3{0.25f, 0.75f, 0.25f}));  // dims travel as raw floats
  EXPECT_TRUE(zone_row->sensor);
  EXPECT_EQ(zone_row->dims, (Vec3{1.0f, 0.5f, 2.0f}));
  EXPECT_FALSE(box_row->sensor);
}

// Clients may create planes only when --max-client-extent is 0 (a plane is tested against every
// moving body and touches everything below it); by default they are refused with the flag named.
TEST_F(CoreTest, ClientPlanesAreRefusedByDefault) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs plane;
  plane.kind = wire::BodyKind::Static;
  plane.shape = wire::ShapeKind::Plane;
  const auto sent = apply_in_one_step(a, {copy(wire::build_create_object(fbb_, next_id(a), plane))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::InvalidArgument);
  EXPECT_NE(r[0]->message()->str().find("--max-client-extent"), std::string::npos) << r[0]->message()->str();
}

class UnlimitedExtentTest : public CoreTest {
 protected:
  static ServerConfig unlimited_config() {
    ServerConfig c = test_config();
    c.max_client_extent = 0;
    return c;
  }
  UnlimitedExtentTest() : CoreTest(unlimited_config()) {}
};

TEST_F(UnlimitedExtentTest, PlaneIsAcceptedOnlyAsAStaticBody) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs plane;
  plane.shape = wire::ShapeKind::Plane;
  plane.position = {0, -2, 0};
  plane.orientation = quat_from_axis_angle({1, 0, 0}, 0.1f);
  for (const wire::BodyKind kind : {wire::BodyKind::Dynamic, wire::BodyKind::Kinematic}) {
    plane.kind = kind;
    const auto sent = receive(a, wire::build_create_object(fbb_, next_id(a), plane));  // refused at once
    const auto r = results(sent);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0]->code(), ResultCode::InvalidArgument);
    EXPECT_NE(r[0]->message()->str().find("Plane"), std::string::npos) << r[0]->message()->str();
  }
  EXPECT_EQ(core_.queued_requests(), 0u);
  plane.kind = wire::BodyKind::Static;
  const ObjectID id = create(a, plane);
  ASSERT_FALSE(id.is_null());
  const physics::BodyState body = *core_.world().get_object(id);
  EXPECT_EQ(body.shape.kind, physics::ShapeKind::Plane);
  EXPECT_EQ(body.kind, physics::BodyKind::Static);
  std::optional<wire::SnapshotObject> row;
  for (int i = 0; i < 4 && !row; ++i) row = snapshot_row(advance(kStep), id);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->shape, wire::ShapeKind::Plane);
  EXPECT_EQ(row->dims, (Vec3{}));
  EXPECT_GT(std::fabs(dot(row->orientation, body.orientation)), static_cast<float>(std::cos(0.5 * wire::max_orientation_error_rad(10))) - 1e-6f);
}

TEST_F(CoreTest, TorqueActsForOneStepByTheClosedForm) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  // A free-falling solid sphere, m = 2 kg, r = 0.5 m: I = 2/5 m r^2 = 0.2 kg m^2. A torque T for
  // one step of dt = 1/60 s gives dw = T dt / I (no damping, no contact).
  wire::CreateObjectArgs ball;
  ball.dims = {0.5f, 0.5f, 0.5f};
  ball.mass = 2.0f;
  ball.position = {0, 80, 0};
  ball.angular_damping = 0.0f;
  const ObjectID id = create(a, ball);
  ASSERT_FALSE(id.is_null());
  const Vec3 torque{0.0f, 3.0f, -1.2f};
  const auto sent = apply_in_one_step(a, {copy(wire::build_apply_torque(fbb_, next_id(a), id, torque))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0]->code(), ResultCode::Ok);
  EXPECT_EQ(from_wire(r[0]->id()), id);
  const float inertia = 0.4f * 2.0f * 0.25f;
  const Vec3 expected = torque * ((1.0f / kTickHz) / inertia);  // (0, 0.25, -0.1) rad/s
  const Vec3 w = core_.world().get_object(id)->angular_velocity;
  EXPECT_NEAR(w.x, 0.0f, 1e-6f);
  EXPECT_NEAR(w.y, expected.y, 1e-4f * expected.y);
  EXPECT_NEAR(w.z, expected.z, 1e-4f * -expected.z);
  advance(kStep);  // the torque was for one step only: a free sphere keeps its spin
  const Vec3 w_next = core_.world().get_object(id)->angular_velocity;
  EXPECT_NEAR(w_next.x, w.x, 1e-6f);
  EXPECT_NEAR(w_next.y, w.y, 1e-6f);
  EXPECT_NEAR(w_next.z, w.z, 1e-6f);

  // Errors: NotDynamic on the static ground, StaleId, and InvalidArgument at once for NaN.
  const auto sent2 = apply_in_one_step(
      a, {copy(wire::build_apply_torque(fbb_, next_id(a), ground_id_, torque)),
          copy(wire::build_apply_torque(fbb_, next_id(a), ObjectID{999, 7}, torque))});
  const auto r2 = results(sent2);
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[0]->code(), ResultCode::NotDynamic);
  EXPECT_NE(r2[0]->message()->str().find("torque"), std::string::npos);
  EXPECT_EQ(r2[1]->code(), ResultCode::StaleId);
  const auto refused = receive(a, wire::build_apply_torque(fbb_, next_id(a), id, {std::nanf(""), 0, 0}));
  const auto r3 = results(refused);
  ASSERT_EQ(r3.size(), 1u);
  EXPECT_EQ(r3[0]->code(), ResultCode::InvalidArgument);
  EXPECT_NE(r3[0]->message()->str().find("torque"), std::string::npos);
}

TEST_F(CoreTest, SetAngularVelocityIsAppliedAndRefusedForStaticBodies) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs ball;
  ball.position = {0, 80, 0};
  ball.angular_damping = 0.0f;
  const ObjectID id = create(a, ball);
  ASSERT_FALSE(id.is_null());
  const Vec3 w{1.0f, -2.0f, 0.5f};
  const auto sent = apply_in_one_step(a, {copy(wire::build_set_angular_velocity(fbb_, next_id(a), id, w)),
                                          copy(wire::build_set_angular_velocity(fbb_, next_id(a), ground_id_, w))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]->code(), ResultCode::Ok);
  EXPECT_EQ(r[1]->code(), ResultCode::NotDynamic);
  const Vec3 got = core_.world().get_object(id)->angular_velocity;  // a free sphere keeps it
  EXPECT_NEAR(got.x, w.x, 1e-6f);
  EXPECT_NEAR(got.y, w.y, 1e-6f);
  EXPECT_NEAR(got.z, w.z, 1e-6f);
  const auto refused = receive(a, wire::build_set_angular_velocity(fbb_, next_id(a), id, {0, 150.0f, 0}));
  const auto r2 = results(refused);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0]->code(), ResultCode::InvalidArgument);
  EXPECT_NE(r2[0]->message()->str().find("angular_velocity"), std::string::npos);
}

TEST_F(CoreTest, SetFilterReplacesTheFilterAndIsRefusedForStaleAndForeignIds) {
  const Endpoint a = endpoint(5000);
  const Endpoint b = endpoint(5001);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  wire::CreateObjectArgs box;
  box.position = {0, 80, 0};
  box.category = 4;
  box.mask = 0x10;
  box.group = -2;
  const ObjectID id = create(a, box);
  ASSERT_FALSE(id.is_null());
  EXPECT_EQ(core_.world().get_object(id)->filter, (physics::Filter{4, 0x10, -2}));  // CreateObject carries it
  const auto sent = apply_in_one_step(a, {copy(wire::build_set_filter(fbb_, next_id(a), id, 8, 0x3, 5)),
                                          copy(wire::build_set_filter(fbb_, next_id(a), ObjectID{999, 1}, 1, 1, 0))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]->code(), ResultCode::Ok);
  EXPECT_EQ(r[1]->code(), ResultCode::StaleId);
  EXPECT_EQ(core_.world().get_object(id)->filter, (physics::Filter{8, 0x3, 5}));
  // Another client may not change a body it does not own.
  const auto foreign = apply_in_one_step(b, {copy(wire::build_set_filter(fbb_, next_id(b), id, 1, ~0u, 0))});
  const auto r2 = results(foreign);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0]->code(), ResultCode::NotOwner);
  EXPECT_EQ(core_.world().get_object(id)->filter, (physics::Filter{8, 0x3, 5}));
}

TEST_F(CoreTest, MoveKinematicReachesTheTargetInTheNextStepAndIsRefusedForOthers) {
  const Endpoint a = endpoint(5000);
  const Endpoint b = endpoint(5001);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  wire::CreateObjectArgs kinematic;
  kinematic.kind = wire::BodyKind::Kinematic;
  kinematic.position = {0, 80, 0};
  const ObjectID k = create(a, kinematic);
  wire::CreateObjectArgs dynamic;
  dynamic.position = {10, 80, 0};
  const ObjectID d = create(a, dynamic);
  ASSERT_FALSE(k.is_null());
  ASSERT_FALSE(d.is_null());
  const Quat turn = quat_from_axis_angle({0, 1, 0}, 0.3f);
  const auto sent = apply_in_one_step(a, {copy(wire::build_move_kinematic(fbb_, next_id(a), k, {0.1f, 80.2f, 0}, turn)),
                                          copy(wire::build_move_kinematic(fbb_, next_id(a), d, {10, 80, 0}, Quat{})),
                                          copy(wire::build_move_kinematic(fbb_, next_id(a), ObjectID{999, 1}, {}, Quat{}))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]->code(), ResultCode::Ok);
  EXPECT_EQ(r[1]->code(), ResultCode::NotDynamic);
  ASSERT_NE(r[1]->message(), nullptr);
  EXPECT_NE(r[1]->message()->str().find("kinematic"), std::string::npos);
  EXPECT_EQ(r[2]->code(), ResultCode::StaleId);
  // Applied before the step with the server's dt, so the step ends on the target.
  const physics::BodyState s = *core_.world().get_object(k);
  EXPECT_NEAR(s.position.x, 0.1f, 1e-5f);
  EXPECT_NEAR(s.position.y, 80.2f, 1e-5f);
  EXPECT_GT(std::fabs(dot(s.orientation, turn)), 1.0f - 1e-6f);
  // Another client may not move it.
  const auto foreign = apply_in_one_step(b, {copy(wire::build_move_kinematic(fbb_, next_id(b), k, {}, Quat{}))});
  const auto r2 = results(foreign);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0]->code(), ResultCode::NotOwner);
}

TEST_F(CoreTest, RaycastAnswersTheClosestHitOrAllHitsAfterTheStep) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  // Static targets on the vertical line x = z = 0: a sphere (top at 6.5) above a box (top at
  // 3.5) above the ground (top at 0).
  wire::CreateObjectArgs sphere;
  sphere.kind = wire::BodyKind::Static;
  sphere.dims = {0.5f, 0.5f, 0.5f};
  sphere.position = {0, 6, 0};
  const ObjectID sphere_id = create(a, sphere);
  wire::CreateObjectArgs box;
  box.kind = wire::BodyKind::Static;
  box.shape = wire::ShapeKind::Box;
  box.dims = {0.5f, 0.5f, 0.5f};
  box.position = {0, 3, 0};
  const ObjectID box_id = create(a, box);
  ASSERT_FALSE(sphere_id.is_null());
  ASSERT_FALSE(box_id.is_null());

  // Origin 10 m up, 20 m down: fraction = (10 - y_hit) / 20.
  const Vec3 origin{0, 10, 0}, down{0, -20, 0};
  const auto sent = apply_in_one_step(a, {copy(wire::build_raycast(fbb_, next_id(a), origin, down, false)),
                                          copy(wire::build_raycast(fbb_, next_id(a), origin, down, true)),
                                          copy(wire::build_raycast(fbb_, next_id(a), {100, 5, 100}, {0, 0, 10}, true))});
  const auto r = raycasts(sent);
  ASSERT_EQ(r.size(), 3u);
  for (const wire::RaycastResult* m : r) {
    EXPECT_EQ(m->code(), ResultCode::Ok);
    EXPECT_EQ(m->tick(), core_.world().tick());
    EXPECT_FALSE(m->truncated());
    EXPECT_EQ(m->message(), nullptr);
  }
  EXPECT_EQ(r[0]->request_id(), 3u);  // after the two creates
  ASSERT_NE(r[0]->hits(), nullptr);
  ASSERT_EQ(r[0]->hits()->size(), 1u);
  const wire::RayHitEntry* closest = r[0]->hits()->Get(0);
  EXPECT_EQ(from_wire(closest->id()), sphere_id);
  EXPECT_NEAR(closest->point().y(), 6.5f, 1e-4f);
  EXPECT_NEAR(closest->normal().y(), 1.0f, 1e-5f);
  EXPECT_NEAR(closest->fraction(), 3.5f / 20.0f, 1e-5f);

  ASSERT_NE(r[1]->hits(), nullptr);
  ASSERT_EQ(r[1]->hits()->size(), 3u);
  const ObjectID expected_ids[] = {sphere_id, box_id, ground_id_};
  const float expected_y[] = {6.5f, 3.5f, 0.0f};
  for (uint32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const wire::RayHitEntry* h = r[1]->hits()->Get(i);
    EXPECT_EQ(from_wire(h->id()), expected_ids[i]);
    EXPECT_NEAR(h->point().y(), expected_y[i], 1e-4f);
    EXPECT_NEAR(h->fraction(), (10.0f - expected_y[i]) / 20.0f, 1e-5f);
    EXPECT_NEAR(h->normal().y(), 1.0f, 1e-5f);
  }
  EXPECT_EQ(r[2]->hits(), nullptr);  // beyond the ground's edge: a miss

  // A body created earlier in the same wake-up is seen: the raycast runs after the step.
  wire::CreateObjectArgs ball;
  ball.dims = {0.5f, 0.5f, 0.5f};
  ball.position = {20, 30, 0};
  const auto sent2 = apply_in_one_step(a, {copy(wire::build_create_object(fbb_, next_id(a), ball)),
                                           copy(wire::build_raycast(fbb_, next_id(a), {20, 40, 0}, {0, -20, 0}, false))});
  const auto created = results(sent2);
  const auto r2 = raycasts(sent2);
  ASSERT_EQ(created.size(), 1u);
  ASSERT_EQ(r2.size(), 1u);
  ASSERT_NE(r2[0]->hits(), nullptr);
  ASSERT_EQ(r2[0]->hits()->size(), 1u);
  EXPECT_EQ(r2[0]->hits()->Get(0)->id(), created[0]->id());
  EXPECT_EQ(stats_.requests_rejected.load(), 0u);
}

TEST_F(CoreTest, RaycastAllIsTruncatedToTheNearestHitsThatFitOneDatagram) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  // 40 static spheres in a row along +x at y = 5, 1 m apart: more hits than one datagram holds.
  constexpr int kSpheres = 40;
  std::vector<Bytes> creates;
  for (int i = 0; i < kSpheres; ++i) {
    wire::CreateObjectArgs s;
    s.kind = wire::BodyKind::Static;
    s.dims = {0.2f, 0.2f, 0.2f};
    s.position = {1.0f + static_cast<float>(i), 5, 0};
    creates.push_back(copy(wire::build_create_object(fbb_, next_id(a), s)));
  }
  const auto created = apply_in_one_step(a, creates);
  ASSERT_EQ(results(created).size(), static_cast<size_t>(kSpheres));
  const Vec3 origin{0, 5, 0}, along{50, 0, 0};
  const auto sent = apply_in_one_step(a, {copy(wire::build_raycast(fbb_, next_id(a), origin, along, true)),
                                          copy(wire::build_raycast(fbb_, next_id(a), origin, along, false))});
  const auto r = raycasts(sent);
  ASSERT_EQ(r.size(), 2u);
  const uint32_t capacity = wire::raycast_hits_per_datagram();
  ASSERT_LT(capacity, static_cast<uint32_t>(kSpheres));
  ASSERT_NE(r[0]->hits(), nullptr);
  EXPECT_EQ(r[0]->hits()->size(), capacity);
  EXPECT_TRUE(r[0]->truncated());
  for (uint32_t i = 0; i < r[0]->hits()->size(); ++i) {  // the nearest, in order: x = i + 0.8
    EXPECT_NEAR(r[0]->hits()->Get(i)->point().x(), 0.8f + static_cast<float>(i), 1e-4f) << i;
    EXPECT_NEAR(r[0]->hits()->Get(i)->normal().x(), -1.0f, 1e-5f);
  }
  ASSERT_NE(r[1]->hits(), nullptr);
  ASSERT_EQ(r[1]->hits()->size(), 1u);
  EXPECT_FALSE(r[1]->truncated());
  EXPECT_NEAR(r[1]->hits()->Get(0)->fraction(), 0.8f / 50.0f, 1e-6f);
}

TEST_F(CoreTest, BadRaycastsAreAnsweredAtOnceWithARaycastResult) {
  const Endpoint a = endpoint(5000);
  ASSERT_NE(connect(a), 0u);
  const auto sent = receive(a, wire::build_raycast(fbb_, next_id(a), {0, 10, 0}, {0, 0, 0}, false));
  const auto r = raycasts(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->request_id(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::InvalidArgument);
  EXPECT_EQ(r[0]->hits(), nullptr);
  ASSERT_NE(r[0]->message(), nullptr);
  EXPECT_NE(r[0]->message()->str().find("translation"), std::string::npos);
  EXPECT_EQ(core_.queued_requests(), 0u);

  // From a stranger: NotConnected, in a reply no larger than the request.
  const Bytes request = copy(wire::build_raycast(fbb_, next_id(a), {0, 10, 0}, {0, -1, 0}, true));
  const auto stranger = receive(endpoint(9), request);
  ASSERT_EQ(stranger.size(), 1u);
  EXPECT_LE(stranger[0].bytes.size(), request.size());
  const auto r2 = raycasts(stranger);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0]->request_id(), 2u);
  EXPECT_EQ(r2[0]->code(), ResultCode::NotConnected);
}

// --- StepClock and snapshot cadence -------------------------------------------------------------

TEST(StepClock, IntegerAccumulatorIsExact) {
  const TimePoint t0 = TimePoint{} + 1h;
  StepClock c = make_step_clock(60, 4, t0);
  int total = 0;
  // 600 wake-ups at an irregular cadence covering exactly 10 s.
  TimePoint t = t0;
  for (int i = 0; i < 600; ++i) {
    t += (i % 2 == 0) ? 10ms : 23333333ns + 1ns;
    total += take_due_steps(c, t);
  }
  const auto elapsed = t - t0;
  EXPECT_EQ(total, elapsed / c.step);
  EXPECT_EQ(c.dropped_steps, 0u);
  EXPECT_LT(c.accumulator, c.step);
  EXPECT_EQ(take_due_steps(c, t - 1s), 0);  // time going backwards adds nothing
}

TEST(StepClock, SnapshotTicksAreSpreadEvenly) {
  for (const auto& [tick_hz, snapshot_hz] : {std::pair{60, 30}, std::pair{60, 60}, std::pair{60, 7}, std::pair{1000, 30},
                                             std::pair{1, 1}}) {
    int count = 0;
    for (uint64_t t = 1; t <= static_cast<uint64_t>(tick_hz); ++t) count += is_snapshot_tick(t, tick_hz, snapshot_hz);
    EXPECT_EQ(count, snapshot_hz) << tick_hz << "/" << snapshot_hz;
  }
  EXPECT_FALSE(is_snapshot_tick(0, 60, 30));
}

}  // namespace
}  // namespace impulse::server
