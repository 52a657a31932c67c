// ServerCore's bounds on what one client's bodies may cost (issue 16, rows B and G) and its side
// of the World's non-finite guard (row A2), on a fake clock.
#include "unit/server/core_fixture.h"
#include "server/app/server_core_internal.h"
#include "tests/support/world_test_access.h"

#include <limits>

namespace impulse::server {
namespace {

using namespace core_test;

class LimitTest : public CoreTest {
 protected:
  static ServerConfig limit_config() {
    ServerConfig c = test_config();
    c.max_objects_per_client = 10;
    c.max_client_objects = 3;
    c.max_client_extent = 4.0;
    c.max_spawn_overlaps = 1;
    return c;
  }
  LimitTest() : CoreTest(limit_config()) {}

  wire::RequestResult const* create_result(const Endpoint& from, const wire::CreateObjectArgs& args) {
    last_ = apply_in_one_step(from, {copy(wire::build_create_object(fbb_, next_id(from), args))});
    const auto r = results(last_);
    return r.size() == 1 ? r[0] : nullptr;
  }
  std::vector<Sent> last_;
};

TEST_F(LimitTest, AClientBodyBeyondTheExtentLimitIsRefusedNamingTheFlag) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs huge;
  huge.shape = wire::ShapeKind::Box;
  huge.dims = {1000, 1000, 1000};  // attack B's boxes
  huge.position = {0, 2000, 0};
  const auto* r = create_result(a, huge);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::InvalidArgument);
  EXPECT_NE(r->message()->str().find("--max-client-extent 4 m"), std::string::npos) << r->message()->str();
  wire::CreateObjectArgs capsule;
  capsule.shape = wire::ShapeKind::Capsule;
  capsule.dims = {1, 3.5f, 0};  // half height + radius 4.5 m
  capsule.position = {0, 20, 0};
  r = create_result(a, capsule);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::InvalidArgument);
  capsule.dims = {1, 3, 0};  // exactly 4 m
  r = create_result(a, capsule);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::Ok) << r->message()->str();
  EXPECT_EQ(core_.world().object_count(), 2u);  // the ground and the capsule
}

TEST_F(LimitTest, APileInOneSpotIsRefusedBeyondTheSpawnOverlapLimit) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs box;
  box.shape = wire::ShapeKind::Box;
  box.position = {0, 0.5f, 0};  // on the ground, which is static and not counted
  for (int k = 0; k < 2; ++k) {  // overlapping 0, then 1 box
    const auto* r = create_result(a, box);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->code(), ResultCode::Ok) << k;
  }
  const auto* r = create_result(a, box);  // 2 > 1
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::QuotaExceeded);
  EXPECT_NE(r->message()->str().find("overlap 2 dynamic or kinematic bodies, more than --max-spawn-overlaps 1"),
            std::string::npos)
      << r->message()->str();
  EXPECT_EQ(core_.live_objects_of(1), 2u);
}

// Refusals are formatted into a buffer the next refusal overwrites: the exactly-once window keeps
// its own copy, so a resent request (its answer lost) gets the text it was first answered with.
TEST_F(LimitTest, AResentRequestIsAnsweredWithItsOwnRefusalAfterLaterOnes) {
  const Endpoint a = endpoint(1);
  ASSERT_NE(connect(a), 0u);
  wire::CreateObjectArgs huge;
  huge.shape = wire::ShapeKind::Box;
  huge.dims = {1000, 1000, 1000};
  huge.position = {0, 2000, 0};
  const uint32_t first_id = next_id(a);
  const Bytes first = copy(wire::build_create_object(fbb_, first_id, huge));
  auto sent = apply_in_one_step(a, {first});
  auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  const std::string original = r[0]->message()->str();
  ASSERT_NE(original.find("--max-client-extent"), std::string::npos) << original;
  wire::CreateObjectArgs box;
  box.shape = wire::ShapeKind::Box;
  box.position = {0, 0.5f, 0};
  for (int k = 0; k < 3; ++k) create_result(a, box);  // the third is refused: --max-spawn-overlaps
  ASSERT_NE(create_result(a, box)->message()->str().find("--max-spawn-overlaps"), std::string::npos);
  sent = receive(a, first);  // the same datagram again: answered from the window at once
  r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->request_id(), first_id);
  EXPECT_EQ(r[0]->code(), ResultCode::InvalidArgument);
  EXPECT_EQ(r[0]->message()->str(), original);
}

TEST_F(LimitTest, TheServerWideCapCountsEveryClientsObjects) {
  const Endpoint a = endpoint(1), b = endpoint(2);
  const uint32_t ida = connect(a), idb = connect(b);
  ASSERT_NE(ida, 0u);
  ASSERT_NE(idb, 0u);
  wire::CreateObjectArgs ball;
  ball.position = {0, 10, 0};
  ASSERT_FALSE(create(a, ball).is_null());
  ball.position = {5, 10, 0};
  ASSERT_FALSE(create(a, ball).is_null());
  ball.position = {10, 10, 0};
  const ObjectID third = create(b, ball);
  ASSERT_FALSE(third.is_null());
  ball.position = {15, 10, 0};
  const auto* r = create_result(b, ball);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), ResultCode::WorldFull);
  EXPECT_NE(r->message()->str().find("--max-client-objects 3"), std::string::npos) << r->message()->str();
  // Destroying one makes room for anyone.
  const auto sent = apply_in_one_step(b, {copy(wire::build_destroy_object(fbb_, next_id(b), third))});
  ASSERT_EQ(results(sent).size(), 1u);
  ASSERT_EQ(results(sent)[0]->code(), ResultCode::Ok);
  EXPECT_FALSE(create(a, ball).is_null());
}

// The guard's server side: the body leaves the world and its owner's count, the stats count it,
// and a request on it is answered StaleId with the reason.
TEST_F(LimitTest, ABodyRemovedAsNonFiniteIsCountedFreedAndExplainedToItsOwner) {
  const Endpoint a = endpoint(1);
  const uint32_t id_a = connect(a);
  ASSERT_NE(id_a, 0u);
  wire::CreateObjectArgs ball;
  ball.position = {0, 5, 0};
  const ObjectID id = create(a, ball);
  ASSERT_FALSE(id.is_null());
  EXPECT_EQ(core_.live_objects_of(id_a), 1u);
  // No validated path yields a non-finite body; the test hook stands in for the bug it guards.
  auto& world = const_cast<physics::World&>(core_.world());
  ASSERT_TRUE(physics::WorldTestAccess::set_velocity_unchecked(world, id, {0, std::numeric_limits<float>::quiet_NaN(), 0}));
  advance(kStep);
  EXPECT_FALSE(core_.world().is_valid(id));
  EXPECT_EQ(stats_.bodies_removed_non_finite.load(), 1u);
  EXPECT_EQ(core_.live_objects_of(id_a), 0u);
  const auto sent = apply_in_one_step(a, {copy(wire::build_set_velocity(fbb_, next_id(a), id, {1, 0, 0}))});
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::StaleId);
  EXPECT_NE(r[0]->message()->str().find("its state was not finite"), std::string::npos) << r[0]->message()->str();
}

// The refusals name the World's own limits (settings.h), written there once.
TEST(InvalidArgumentMessages, NameTheWorldsOwnLimits) {
  const physics::WorldSettings s;
  const std::string speeds = fmt::format("{:g} m/s or {:.1f} rad/s", s.max_speed, s.max_angular_speed);
  EXPECT_EQ(speeds, "500 m/s or 47.1 rad/s");
  using core_rules::invalid_argument_message;
  EXPECT_NE(invalid_argument_message(wire::Message::ApplyImpulse).find(speeds), std::string_view::npos);
  EXPECT_NE(invalid_argument_message(wire::Message::MoveKinematic).find(speeds), std::string_view::npos);
  EXPECT_NE(invalid_argument_message(wire::Message::ApplyForce).find(speeds + " per 1/60 s"), std::string_view::npos);
  EXPECT_NE(invalid_argument_message(wire::Message::CreateObject).find("[0.001, 100000] kg/m^3"),
            std::string_view::npos)
      << invalid_argument_message(wire::Message::CreateObject);
}

}  // namespace
}  // namespace impulse::server
