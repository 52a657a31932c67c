// Joints over the wire, on ServerCore's fake clock: CreateJoint, DestroyJoint and SetJointMotor
// with --authority owner, the joint quotas and the anchors' reach, and the JointAdded and
// JointRemoved events every session hears once (a session that starts later hears of the joints
// already there).
#include "unit/server/core_fixture.h"

#include <cmath>
#include <limits>
#include <set>

namespace impulse::server {
namespace {

using namespace core_test;

class JointTest : public CoreTest {
 protected:
  static ServerConfig joint_config() {
    ServerConfig c = test_config();
    c.max_clients = 4;
    c.max_joints_per_client = 3;
    c.max_client_joints = 5;
    c.max_client_extent = 4.0;
    return c;
  }
  JointTest() : CoreTest(joint_config()) {}

  ObjectID ball(const Endpoint& from, Vec3 at, bool shared = false) {
    wire::CreateObjectArgs b;
    b.dims = {0.25f, 0.25f, 0.25f};
    b.position = at;
    b.shared = shared;
    return create(from, b);
  }

  /// A hinge at `anchor` between `a` and `b` (null: the world), about +Z.
  static wire::CreateJointArgs hinge(ObjectID a, ObjectID b, Vec3 anchor) {
    wire::CreateJointArgs j;
    j.kind = wire::JointKind::Hinge;
    j.body_a = a;
    j.body_b = b;
    j.anchor = anchor;
    j.axis = Vec3{0, 0, 1};
    return j;
  }

  const wire::RequestResult* create_joint(const Endpoint& from, const wire::CreateJointArgs& args) {
    last_ = apply_in_one_step(from, {copy(wire::build_create_joint(fbb_, next_id(from), args))});
    const auto r = results(last_);
    return r.size() == 1 ? r[0] : nullptr;
  }
  ResultCode request(const Endpoint& from, std::span<const uint8_t> datagram, std::string* message = nullptr) {
    last_ = apply_in_one_step(from, {copy(datagram)});
    const auto r = results(last_);
    if (r.size() != 1) return ResultCode::ShuttingDown;  // none: the test fails on the code
    if (message != nullptr && r[0]->message() != nullptr) *message = r[0]->message()->str();
    return r[0]->code();
  }

  struct JointEventSeen {
    wire::ContactEventType type;
    ObjectID joint, a, b;
    uint8_t detail;
    Vec3 anchor_a, anchor_b;
  };
  /// Joint events delivered to `to` in `sent`, each sequence once (resends are skipped).
  std::vector<JointEventSeen> joint_events(const std::vector<Sent>& sent, const Endpoint& to) {
    std::vector<JointEventSeen> out;
    for (const Sent& s : sent) {
      if (s.to != to || s.type() != Message::CollisionEvents) continue;
      std::vector<wire::JointEventFields> joints;
      const std::vector<wire::CollisionEvent> events = events_of(s, &joints);
      for (size_t i = 0; i < events.size(); ++i) {
        const wire::CollisionEvent& e = events[i];
        if (!seen_[to.port()].insert(e.sequence()).second) continue;
        if (e.type() != wire::ContactEventType::JointAdded && e.type() != wire::ContactEventType::JointRemoved) continue;
        out.push_back(JointEventSeen{e.type(), from_wire(joints[i].joint), from_wire(e.a()), from_wire(e.b()),
                                     joints[i].detail, wire::to_vec3(e.point()), wire::to_vec3(e.normal())});
      }
    }
    return out;
  }
  std::map<uint16_t, std::set<uint32_t>> seen_;  // event sequences delivered, by client port
  std::vector<Sent> last_;
};

TEST_F(JointTest, AJointIsAnnouncedOnceToEverySessionAndItsRemovalToo) {
  const Endpoint a = endpoint(1), b = endpoint(2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  const ObjectID door = ball(a, {0, 3, 0});
  ASSERT_FALSE(door.is_null());
  const auto* r = create_joint(a, hinge(door, ObjectID{}, {0.25f, 3, 0}));
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->code(), ResultCode::Ok) << r->message()->str();
  const ObjectID joint = from_wire(r->id());
  ASSERT_FALSE(joint.is_null());
  ASSERT_TRUE(core_.world().get_joint(joint).has_value());

  for (const Endpoint& to : {a, b}) {
    const auto seen = joint_events(last_, to);
    ASSERT_EQ(seen.size(), 1u) << to.port();
    EXPECT_EQ(seen[0].type, wire::ContactEventType::JointAdded);
    EXPECT_EQ(seen[0].joint, joint);
    EXPECT_EQ(seen[0].a, door);
    EXPECT_TRUE(seen[0].b.is_null());
    EXPECT_EQ(seen[0].detail, static_cast<uint8_t>(wire::JointKind::Hinge));
    // The anchor in the ball's frame (+0.25 m along x) and in the world frame, to the position step.
    EXPECT_NEAR(seen[0].anchor_a.x, 0.25f, 1.0f / 512);
    EXPECT_NEAR(seen[0].anchor_b.y, 3.0f, 1.0f / 512);
  }
  // A session that starts later hears of it too, once.
  const Endpoint c = endpoint(3);
  ASSERT_NE(connect(c), 0u);
  std::vector<JointEventSeen> late;
  for (int i = 0; i < 3; ++i) {
    for (const JointEventSeen& e : joint_events(advance(kStep), c)) late.push_back(e);
  }
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].type, wire::ContactEventType::JointAdded);
  EXPECT_EQ(late[0].joint, joint);

  // Another client may not destroy it; its owner may, and everyone hears why.
  std::string message;
  EXPECT_EQ(request(b, wire::build_destroy_joint(fbb_, next_id(b), joint), &message), ResultCode::NotOwner);
  EXPECT_NE(message.find("another client"), std::string::npos) << message;
  EXPECT_EQ(request(a, wire::build_destroy_joint(fbb_, next_id(a), joint)), ResultCode::Ok);
  EXPECT_FALSE(core_.world().get_joint(joint).has_value());
  for (const Endpoint& to : {a, b, c}) {
    const auto seen = joint_events(last_, to);
    ASSERT_EQ(seen.size(), 1u) << to.port();
    EXPECT_EQ(seen[0].type, wire::ContactEventType::JointRemoved);
    EXPECT_EQ(seen[0].joint, joint);
    EXPECT_EQ(seen[0].detail, static_cast<uint8_t>(wire::JointRemovedReason::Destroyed));
  }
  // Gone: a second destroy is StaleId.
  EXPECT_EQ(request(a, wire::build_destroy_joint(fbb_, next_id(a), joint)), ResultCode::StaleId);
}

TEST_F(JointTest, OwnersJoinOnlyTheirOwnBodiesTheStaticSceneOrTheWorld) {
  const Endpoint a = endpoint(1), b = endpoint(2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  const ObjectID mine = ball(a, {0, 2, 0});
  const ObjectID mine2 = ball(a, {1, 2, 0});
  const ObjectID theirs = ball(b, {3, 2, 0});
  const ObjectID shared = ball(b, {-3, 2, 0}, /*shared=*/true);
  ASSERT_FALSE(mine.is_null() || mine2.is_null() || theirs.is_null() || shared.is_null());
  std::string message;
  auto code = [&](const wire::CreateJointArgs& j) {
    const auto* r = create_joint(a, j);
    if (r == nullptr) return ResultCode::ShuttingDown;
    message = r->message() ? r->message()->str() : "";
    return r->code();
  };
  EXPECT_EQ(code(hinge(mine, theirs, {1.5f, 2, 0})), ResultCode::NotOwner);
  EXPECT_NE(message.find("--authority owner"), std::string::npos) << message;
  EXPECT_EQ(code(hinge(shared, mine, {-1.5f, 2, 0})), ResultCode::NotOwner);  // shared: pushable, not joinable
  // The static ground is the scene's: a body may hang from it.
  wire::CreateJointArgs to_ground = hinge(mine, ground_id_, {0, 1.9f, 0});
  EXPECT_EQ(code(to_ground), ResultCode::Ok) << message;
  EXPECT_EQ(code(hinge(mine, mine2, {0.5f, 2, 0})), ResultCode::Ok) << message;
  // Neither body its own: refused even when both are the world's.
  EXPECT_EQ(code(hinge(ground_id_, ObjectID{}, {0, 0, 0})), ResultCode::NotOwner);
  // A dead body: StaleId from the World.
  EXPECT_EQ(code(hinge(mine, ObjectID{999, 1}, {0, 2, 0})), ResultCode::StaleId);
  // The same body twice is refused at admission.
  const auto answers = receive(a, wire::build_create_joint(fbb_, next_id(a), hinge(mine, mine, {0, 2, 0})));
  ASSERT_EQ(results(answers).size(), 1u);
  EXPECT_EQ(results(answers)[0]->code(), ResultCode::InvalidArgument);
}

TEST_F(JointTest, QuotasPerClientAndForAllClientsNameTheirFlags) {
  // Two addresses: anonymous sessions of one address share its quota.
  const Endpoint a = at("10.0.0.1", 1), b = at("10.0.0.2", 2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  std::vector<ObjectID> balls;
  for (int i = 0; i < 6; ++i) balls.push_back(ball(i < 4 ? a : b, {static_cast<float>(2 * i), 2, 0}));
  auto pin = [&](const Endpoint& from, ObjectID body) {
    const auto* r = create_joint(from, hinge(body, ObjectID{}, core_.world().get_object(body)->position));
    return r == nullptr ? ResultCode::ShuttingDown : r->code();
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pin(a, balls[static_cast<size_t>(i)]), ResultCode::Ok) << i;
  const auto* r = create_joint(a, hinge(balls[3], ObjectID{}, {6, 2, 0}));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::QuotaExceeded);
  EXPECT_NE(r->message()->str().find("--max-joints-per-client"), std::string::npos) << r->message()->str();
  EXPECT_EQ(pin(b, balls[4]), ResultCode::Ok);
  EXPECT_EQ(pin(b, balls[5]), ResultCode::Ok);
  // Five client joints: the server-wide cap, for anyone.
  const ObjectID extra = ball(b, {20, 2, 0});
  r = create_joint(b, hinge(extra, ObjectID{}, {20, 2, 0}));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::WorldFull);
  EXPECT_NE(r->message()->str().find("--max-client-joints 5"), std::string::npos) << r->message()->str();
  // A joint that goes (here with its body) frees its place.
  ASSERT_EQ(request(a, wire::build_destroy_object(fbb_, next_id(a), balls[0])), ResultCode::Ok);
  std::vector<JointEventSeen> removed;
  for (const JointEventSeen& e : joint_events(last_, a)) {
    if (e.type == wire::ContactEventType::JointRemoved) removed.push_back(e);
  }
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].a, balls[0]);
  EXPECT_EQ(removed[0].detail, static_cast<uint8_t>(wire::JointRemovedReason::BodyGone));
  EXPECT_EQ(pin(a, balls[3]), ResultCode::Ok);
}

TEST_F(JointTest, AnchorsOutOfReachOrOutOfRangeAreRefusedWithTheField) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  const ObjectID body = ball(a, {0, 2, 0});
  std::string message;
  // 10 m from a 0.25 m ball: beyond its bounding radius + --max-client-extent 4 m.
  const auto* r = create_joint(a, hinge(body, ObjectID{}, {10, 2, 0}));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::InvalidArgument);
  EXPECT_NE(r->message()->str().find("--max-client-extent"), std::string::npos) << r->message()->str();
  // Hostile numbers are refused at admission with the field's name, and nothing is created.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    wire::CreateJointArgs args;
    const char* field;
  };
  std::vector<Case> cases;
  wire::CreateJointArgs j = hinge(body, ObjectID{}, {0, 2, 0});
  j.anchor = {nan, 2, 0};
  cases.push_back({j, "anchor"});
  j = hinge(body, ObjectID{}, {0, 2, 0});
  j.enable_limit = true;
  j.lower_angle = 1.0f;
  j.upper_angle = -1.0f;
  cases.push_back({j, "lower_angle"});
  j.lower_angle = -4.0f;
  cases.push_back({j, "lower_angle"});
  j = hinge(body, ObjectID{}, {0, 2, 0});
  j.axis = Vec3{0, 0, 0};
  cases.push_back({j, "axis"});
  j = hinge(body, ObjectID{}, {0, 2, 0});
  j.spring_hertz = -1.0f;
  cases.push_back({j, "spring_hertz"});
  j = hinge(body, ObjectID{}, {0, 2, 0});
  j.break_force = std::numeric_limits<float>::infinity();
  cases.push_back({j, "break_force"});
  j = hinge(body, ObjectID{}, {0, 2, 0});
  j.motor_mode = wire::JointMotorMode::Velocity;
  j.motor_speed = 1e6f;
  cases.push_back({j, "motor_speed"});
  j = hinge(body, ObjectID{}, {0, 2, 0});
  j.kind = wire::JointKind::Distance;  // without anchor_b
  cases.push_back({j, "anchor_b"});
  j.anchor_b = Vec3{0, 4, 0};
  j.min_length = 3.0f;
  j.max_length = 1.0f;
  cases.push_back({j, "min_length"});
  for (const Case& c : cases) {
    const auto answers = receive(a, wire::build_create_joint(fbb_, next_id(a), c.args));
    const auto rs = results(answers);
    ASSERT_EQ(rs.size(), 1u) << c.field;
    EXPECT_EQ(rs[0]->code(), ResultCode::InvalidArgument) << c.field;
    EXPECT_NE(rs[0]->message()->str().find(c.field), std::string::npos) << rs[0]->message()->str();
  }
  advance(kStep);
  EXPECT_EQ(core_.world().joint_count(), 0u);
}

TEST_F(JointTest, AMotorIsSetOverTheWireAndABreakReachesEveryone) {
  const Endpoint a = endpoint(1), b = endpoint(2);
  ASSERT_NE(connect(a), 0u);
  ASSERT_NE(connect(b), 0u);
  // A wheel on a hinge to the world, driven at 2 rad/s about +Z.
  const ObjectID wheel = ball(a, {0, 5, 0});
  const auto* r = create_joint(a, hinge(wheel, ObjectID{}, {0, 5, 0}));
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->code(), ResultCode::Ok);
  const ObjectID axle = from_wire(r->id());
  EXPECT_EQ(request(b, wire::build_set_joint_motor(fbb_, next_id(b), axle, {wire::JointMotorMode::Velocity, 2, 0, 100})),
            ResultCode::NotOwner);
  EXPECT_EQ(request(a, wire::build_set_joint_motor(fbb_, next_id(a), axle, {wire::JointMotorMode::Velocity, 2, 0, 100})),
            ResultCode::Ok);
  for (int i = 0; i < 30; ++i) advance(kStep);
  // The hinge's angle is B's relative to A: with the world as B, the wheel turns at -2 rad/s.
  EXPECT_NEAR(core_.world().get_object(wheel)->angular_velocity.z, -2.0f, 0.1f);
  // Out of range: refused at admission.
  std::string message;
  const auto answers = receive(a, wire::build_set_joint_motor(fbb_, next_id(a), axle, {wire::JointMotorMode::Velocity, 1e3f, 0, 1}));
  ASSERT_EQ(results(answers).size(), 1u);
  EXPECT_EQ(results(answers)[0]->code(), ResultCode::InvalidArgument);

  // A 1 kg ball hanging on a point joint that breaks past 5 N: gravity alone pulls 9.81 N.
  const ObjectID weight = ball(a, {4, 5, 0});
  wire::CreateJointArgs hook;
  hook.kind = wire::JointKind::Point;
  hook.body_a = weight;
  hook.anchor = {4, 5.5f, 0};
  hook.break_force = 5.0f;
  r = create_joint(a, hook);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->code(), ResultCode::Ok);
  const ObjectID hook_id = from_wire(r->id());
  std::vector<JointEventSeen> removed;
  for (int i = 0; i < 10 && removed.empty(); ++i) {
    for (const JointEventSeen& e : joint_events(advance(kStep), b)) {
      if (e.type == wire::ContactEventType::JointRemoved) removed.push_back(e);
    }
  }
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].type, wire::ContactEventType::JointRemoved);
  EXPECT_EQ(removed[0].joint, hook_id);
  EXPECT_EQ(removed[0].detail, static_cast<uint8_t>(wire::JointRemovedReason::Broken));
  EXPECT_FALSE(core_.world().get_joint(hook_id).has_value());
}

TEST_F(JointTest, ASliderIsCreatedAndDrivenOverTheWire) {
  // The second joint kind added through docs/ARCHITECTURE.md's checklist: a box on a slider along
  // +X to the world, driven at 1.5 m/s by SetJointMotor, stopped by its limit at 2 m.
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  const ObjectID carriage = ball(a, {0, 3, 0});
  wire::CreateJointArgs s;
  s.kind = wire::JointKind::Slider;
  s.body_a = carriage;
  s.anchor = {0, 3, 0};
  s.axis = Vec3{1, 0, 0};
  s.enable_limit = true;
  s.lower_translation = -1.0f;
  s.upper_translation = 2.0f;
  const auto* r = create_joint(a, s);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->code(), ResultCode::Ok) << r->message()->str();
  const ObjectID rail = from_wire(r->id());
  const auto added = joint_events(last_, a);
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].detail, static_cast<uint8_t>(wire::JointKind::Slider));
  // The world is B, so B's offset from A is minus the carriage's: -1.5 m/s moves it along +X.
  EXPECT_EQ(request(a, wire::build_set_joint_motor(fbb_, next_id(a), rail, {wire::JointMotorMode::Velocity, -1.5f, 0, 1000})),
            ResultCode::Ok);
  for (int i = 0; i < 30; ++i) advance(kStep);
  const physics::BodyState moving = *core_.world().get_object(carriage);
  EXPECT_NEAR(moving.velocity.x, 1.5f, 0.01f);
  EXPECT_NEAR(moving.position.y, 3.0f, 0.01f);  // held on its rail against gravity
  // Faster (beyond a hinge's 47 rad/s bound, within a slider's 500 m/s), into its limit.
  EXPECT_EQ(request(a, wire::build_set_joint_motor(fbb_, next_id(a), rail, {wire::JointMotorMode::Velocity, -60, 0, 1000})),
            ResultCode::Ok);
  for (int i = 0; i < 30; ++i) advance(kStep);
  EXPECT_NEAR(core_.world().get_object(carriage)->position.x, 1.0f, 0.01f);  // its lower limit: -1 m of B from A
  const auto answers = receive(a, wire::build_set_joint_motor(fbb_, next_id(a), rail, {wire::JointMotorMode::Velocity, 600, 0, 10}));
  ASSERT_EQ(results(answers).size(), 1u);
  EXPECT_EQ(results(answers)[0]->code(), ResultCode::InvalidArgument);
}

}  // namespace
}  // namespace impulse::server
