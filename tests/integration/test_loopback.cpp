// Loopback integration: a real server and real clients over UDP on 127.0.0.1. Physics checks use
// closed forms (free fall, Δv = F·dt/m, Δv = J/m) with stated tolerances.
#include <algorithm>
#include <cmath>
#include <set>

#include "integration/harness.h"

namespace impulse::test {
namespace {

class Loopback : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.started()) << server.error();
    std::string error;
    ASSERT_TRUE(driver.connect(server.port(), &error)) << error;
    ASSERT_NE(driver.wait_snapshot_after(0), 0u) << "no snapshot after connecting";
    ground = driver.snapshots.rbegin()->second.at(0).id;
  }

  float dt() const { return 1.0f / static_cast<float>(driver.client.tick_hz()); }

  RunningServer server;
  ClientDriver driver;
  ObjectID ground;
};

TEST_F(Loopback, ConnectReportsServerRatesAndTheSceneArrivesInSnapshots) {
  EXPECT_NE(driver.client.client_id(), 0u);
  EXPECT_EQ(driver.client.tick_hz(), 60);
  EXPECT_EQ(driver.client.snapshot_hz(), 60);
  EXPECT_EQ(server.stats().clients.load(), 1u);

  // The scene holds exactly the ground box, and objects()/find() reflect the latest snapshot.
  const auto objects = driver.client.objects();
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].kind, BodyKind::Static);
  EXPECT_EQ(objects[0].shape, ShapeKind::Box);
  EXPECT_EQ(objects[0].dims, kGroundHalfExtents);
  EXPECT_EQ(objects[0].position, (Vec3{0.0f, -0.5f, 0.0f}));
  ASSERT_NE(driver.client.find(ground), nullptr);
  EXPECT_EQ(driver.client.find(ObjectID{12345, 1}), nullptr);

  // Snapshots keep coming, with increasing ticks.
  const uint64_t first = driver.client.snapshot_tick();
  const uint64_t later = driver.wait_snapshot_after(first + 3);
  EXPECT_GT(later, first + 3);
  EXPECT_GE(driver.client.server_tick(), later);
  EXPECT_EQ(driver.client.stats().datagrams_dropped, 0u);
}

TEST_F(Loopback, PingIsAnsweredWithPong) {
  const uint64_t nonce = driver.client.ping();
  ASSERT_NE(nonce, 0u);
  ASSERT_TRUE(driver.poll_until([&] { return !driver.pongs.empty(); }));
  EXPECT_EQ(driver.pongs[0].nonce, nonce);
  EXPECT_GT(driver.pongs[0].rtt.count(), 0);
  EXPECT_LT(driver.pongs[0].rtt, std::chrono::microseconds(kWaitTimeout));
  EXPECT_GT(driver.pongs[0].server_tick, 0u);
  EXPECT_TRUE(driver.client.last_rtt().has_value());
}

TEST_F(Loopback, CreatedSphereFallsFreelyInSnapshots) {
  const ObjectID id = driver.create_ok(make_sphere(0.5f, {1.0f, 40.0f, -2.0f}));
  ASSERT_FALSE(id.is_null());
  EXPECT_NE(id, ground);

  const auto first = driver.wait_snapshot_where(0, [&](const auto& objects) { return find_in(objects, id); });
  ASSERT_TRUE(first.has_value());
  const ObjectState s0 = *find_in(driver.snapshots[*first], id);
  EXPECT_EQ(s0.kind, BodyKind::Dynamic);
  EXPECT_EQ(s0.shape, ShapeKind::Sphere);
  EXPECT_FLOAT_EQ(s0.dims.x, 0.5f);

  // At least a quarter second later (15 steps at 60 Hz): still in free fall 30+ m above ground.
  const uint64_t t1 = driver.wait_snapshot_after(*first + 14);
  ASSERT_NE(t1, 0u);
  const ObjectState* s1 = find_in(driver.snapshots[t1], id);
  ASSERT_NE(s1, nullptr);
  EXPECT_LT(s1->position.y, s0.position.y);
  EXPECT_LT(s1->velocity.y, 0.0f);

  // Closed form over n fixed steps: Δv = -g·n·dt exactly up to float rounding (no other force
  // acts), and Δy = v0·T - g·T²/2 up to the integrator's first-order error g·dt·T.
  const auto n = static_cast<float>(t1 - *first);
  const float T = n * dt();
  EXPECT_NEAR(s1->velocity.y - s0.velocity.y, -kGravity * T, 1e-3f);
  EXPECT_NEAR(s1->position.y - s0.position.y, s0.velocity.y * T - 0.5f * kGravity * T * T,
              kGravity * dt() * T + 1e-3f);
  // Nothing moves it sideways.
  EXPECT_EQ(s1->position.x, 1.0f);
  EXPECT_EQ(s1->position.z, -2.0f);
  EXPECT_EQ(s1->velocity.x, 0.0f);
}

TEST_F(Loopback, ForceImpulseAndVelocityChangeTheVelocityAsRequested) {
  const float mass = 2.0f;
  const ObjectID id = driver.create_ok(make_sphere(0.5f, {0.0f, 60.0f, 0.0f}, mass));
  ASSERT_FALSE(id.is_null());

  // A force acts for exactly one step: Δv = F·dt/m along the force, nothing across it.
  const Vec3 force{120.0f, 0.0f, 0.0f};
  const std::optional<RequestResult> rf = driver.wait_result(driver.client.apply_force(id, force));
  ASSERT_TRUE(rf.has_value());
  ASSERT_TRUE(rf->ok()) << rf->message;
  EXPECT_EQ(rf->id, id);
  const auto tf = driver.wait_snapshot_where(0, [&](const auto& objects) {
    const ObjectState* s = find_in(objects, id);
    return s != nullptr && s->velocity.x != 0.0f;
  });
  ASSERT_TRUE(tf.has_value()) << "the force never showed in a snapshot";
  const ObjectState after_force = *find_in(driver.snapshots[*tf], id);
  EXPECT_NEAR(after_force.velocity.x, force.x / mass * dt(), 1e-5f);
  EXPECT_EQ(after_force.velocity.z, 0.0f);
  // It was a single step's worth, not a lasting force: a later snapshot has the same velocity.x.
  const uint64_t t_later = driver.wait_snapshot_after(*tf + 5);
  ASSERT_NE(t_later, 0u);
  EXPECT_EQ(find_in(driver.snapshots[t_later], id)->velocity.x, after_force.velocity.x);

  // An impulse J changes the velocity by J/m at once.
  const Vec3 impulse{0.0f, 0.0f, -3.0f};
  const std::optional<RequestResult> ri = driver.wait_result(driver.client.apply_impulse(id, impulse));
  ASSERT_TRUE(ri.has_value());
  ASSERT_TRUE(ri->ok()) << ri->message;
  const auto ti = driver.wait_snapshot_where(0, [&](const auto& objects) {
    const ObjectState* s = find_in(objects, id);
    return s != nullptr && s->velocity.z != 0.0f;
  });
  ASSERT_TRUE(ti.has_value());
  EXPECT_NEAR(find_in(driver.snapshots[*ti], id)->velocity.z, impulse.z / mass, 1e-5f);

  // SetVelocity replaces the horizontal velocity exactly; gravity only acts on y.
  const std::optional<RequestResult> rv = driver.wait_result(driver.client.set_velocity(id, {-1.5f, 2.0f, 0.25f}));
  ASSERT_TRUE(rv.has_value());
  ASSERT_TRUE(rv->ok()) << rv->message;
  const auto tv = driver.wait_snapshot_where(0, [&](const auto& objects) {
    const ObjectState* s = find_in(objects, id);
    return s != nullptr && s->velocity.x == -1.5f;
  });
  ASSERT_TRUE(tv.has_value());
  const ObjectState after_set = *find_in(driver.snapshots[*tv], id);
  EXPECT_EQ(after_set.velocity.z, 0.25f);
  EXPECT_LE(after_set.velocity.y, 2.0f);
  EXPECT_GT(after_set.velocity.y, 2.0f - kGravity * 0.5f);  // at most half a second of gravity
}

TEST_F(Loopback, SteadyForceResentEveryTickLiftsARestingBox) {
  // A 2 kg box resting on the ground (bottom face on y = 0), pushed up with 40 N > m·g = 19.6 N.
  const float mass = 2.0f;
  const ObjectID box = driver.create_ok(make_box({0.5f, 0.5f, 0.5f}, {-5.0f, 0.5f, 5.0f}, mass));
  ASSERT_FALSE(box.is_null());
  ASSERT_TRUE(driver.wait_snapshot_where(0, [&](const auto& objects) { return find_in(objects, box); }));
  // Let it settle (and possibly fall asleep) for a few snapshots first.
  ASSERT_NE(driver.wait_snapshot_after(driver.snapshots.rbegin()->first + 30), 0u);
  const float y0 = driver.client.find(box)->position.y;
  EXPECT_NEAR(y0, 0.5f, 0.02f);

  // A force lasts one step, so it is re-sent once per tick period for ~0.3 s.
  const auto period = std::chrono::microseconds(1'000'000 / driver.client.tick_hz());
  const Clock::time_point end = Clock::now() + milliseconds{300};
  Clock::time_point next_send = Clock::now();
  std::vector<uint32_t> requests;
  for (int i = 0; i < kMaxIterations && Clock::now() < end; ++i) {
    if (Clock::now() >= next_send) {
      requests.push_back(driver.client.apply_force(box, {0.0f, 40.0f, 0.0f}));
      next_send += period;
    }
    driver.poll_once();
  }
  for (const uint32_t id : requests) {
    const std::optional<RequestResult> r = driver.wait_result(id);
    ASSERT_TRUE(r.has_value());
    ASSERT_TRUE(r->ok()) << r->message;
  }
  // Net upward acceleration (40 - 19.62) / 2 ≈ 10 m/s² for ~0.3 s: it must have left the ground.
  ASSERT_NE(driver.wait_snapshot_after(driver.snapshots.rbegin()->first), 0u);
  EXPECT_GT(driver.client.find(box)->position.y, y0 + 0.05f);
}

TEST_F(Loopback, SteadyForceLiftsABoxCarryingASleepingSphere) {
  // A 2 kg box on the ground with a 0.5 kg sphere resting on it; both fall asleep. Then 40 N up
  // on the box (> (2 + 0.5)·g = 24.5 N) must wake the stack and lift both.
  const ObjectID box = driver.create_ok(make_box({0.5f, 0.5f, 0.5f}, {5.0f, 0.5f, 5.0f}, 2.0f));
  const ObjectID ball = driver.create_ok(make_sphere(0.3f, {5.0f, 1.3f, 5.0f}, 0.5f));
  ASSERT_FALSE(box.is_null());
  ASSERT_FALSE(ball.is_null());
  const auto asleep = driver.wait_snapshot_where(0, [&](const auto& objects) {
    const ObjectState* a = find_in(objects, box);
    const ObjectState* b = find_in(objects, ball);
    return a != nullptr && b != nullptr && a->sleeping && b->sleeping;
  });
  ASSERT_TRUE(asleep.has_value()) << "the stack never fell asleep";
  const float box_y0 = driver.client.find(box)->position.y;
  const float ball_y0 = driver.client.find(ball)->position.y;

  const auto period = std::chrono::microseconds(1'000'000 / driver.client.tick_hz());
  const Clock::time_point end = Clock::now() + milliseconds{400};
  Clock::time_point next_send = Clock::now();
  for (int i = 0; i < kMaxIterations && Clock::now() < end; ++i) {
    if (Clock::now() >= next_send) {
      driver.client.apply_force(box, {0.0f, 40.0f, 0.0f});
      next_send += period;
    }
    driver.poll_once();
  }
  ASSERT_NE(driver.wait_snapshot_after(driver.snapshots.rbegin()->first), 0u);
  EXPECT_GT(driver.client.find(box)->position.y, box_y0 + 0.05f) << "the box is held down by a sleeping sphere";
  EXPECT_GT(driver.client.find(ball)->position.y, ball_y0 + 0.05f);
}

TEST_F(Loopback, FrictionSentOverTheWireReachesTheWorld) {
  // Boxes resting on the ground (friction 0.5, the scene default) and sliding along +x. The
  // contact uses mu = sqrt(mu_box * 0.5): friction 0 keeps the sliding velocity; friction 2 gives
  // mu = 1, so Coulomb friction decelerates it at mu·g (closed form; 5 % tolerance).
  ObjectDesc slippery = make_box({0.5f, 0.5f, 0.5f}, {-20.0f, 0.5f, 10.0f});
  slippery.velocity = {3.0f, 0.0f, 0.0f};
  slippery.friction = 0.0f;
  ObjectDesc rough = make_box({0.5f, 0.5f, 0.5f}, {-20.0f, 0.5f, -10.0f});
  rough.velocity = {8.0f, 0.0f, 0.0f};  // stops after 8 / 9.81 ≈ 0.8 s ≈ 49 ticks
  rough.friction = 2.0f;
  const ObjectID slippery_id = driver.create_ok(slippery);
  const ObjectID rough_id = driver.create_ok(rough);
  ASSERT_FALSE(slippery_id.is_null());
  ASSERT_FALSE(rough_id.is_null());

  // The first snapshot after `tick` that holds `id`, and its state.
  auto state_after = [&](uint64_t tick, ObjectID id) -> std::optional<std::pair<uint64_t, ObjectState>> {
    const auto t = driver.wait_snapshot_where(tick, [&](const auto& objects) { return find_in(objects, id); });
    if (!t) return std::nullopt;
    return std::pair{*t, *find_in(driver.snapshots[*t], id)};
  };
  const auto r_first = state_after(0, rough_id);
  ASSERT_TRUE(r_first.has_value());
  // Skip the first few ticks (contact creation), then measure over >= 20 ticks while it slides.
  const auto r0 = state_after(r_first->first + 4, rough_id);
  ASSERT_TRUE(r0.has_value());
  const auto r1 = state_after(r0->first + 19, rough_id);
  ASSERT_TRUE(r1.has_value());
  ASSERT_GT(r1->second.velocity.x, 0.5f) << "stopped too early to measure the deceleration";
  const float elapsed = static_cast<float>(r1->first - r0->first) * dt();
  const float deceleration = (r0->second.velocity.x - r1->second.velocity.x) / elapsed;
  EXPECT_NEAR(deceleration, 1.0f * kGravity, 0.05f * kGravity);
  EXPECT_NEAR(r1->second.position.y, 0.5f, 0.02f);  // it slid on the ground, not fell through

  // The frictionless box keeps its sliding velocity over the same span of ticks.
  const auto s0 = state_after(0, slippery_id);
  ASSERT_TRUE(s0.has_value());
  const auto s1 = state_after(s0->first + 24, slippery_id);
  ASSERT_TRUE(s1.has_value());
  EXPECT_NEAR(s1->second.velocity.x, 3.0f, 1e-4f);
  EXPECT_GT(s1->second.position.x, slippery.position.x + 3.0f * 24.0f * dt() * 0.99f);
}

TEST_F(Loopback, OrientedBoxCapsuleCylinderAndSpinComeBackInSnapshots) {
  // A unit box yawed 45° about +Y, resting on the ground: it stays put, orientation unchanged.
  const Quat yaw = normalize(quat_from_axis_angle({0, 1, 0}, 0.78539816f));
  ObjectDesc box = make_box({0.5f, 0.5f, 0.5f}, {6.0f, 0.5f, -6.0f});
  box.orientation = yaw;
  const ObjectID box_id = driver.create_ok(box);
  // A capsule (r = 0.25 m, 1.5 m long) lying along x (90° about +Z), dropped from 1 cm.
  ObjectDesc capsule;
  capsule.shape = ShapeKind::Capsule;
  capsule.dims = {0.25f, 0.5f, 0.0f};
  capsule.position = {-6.0f, 0.26f, 6.0f};
  capsule.orientation = normalize(quat_from_axis_angle({0, 0, 1}, 1.5707963f));
  const ObjectID capsule_id = driver.create_ok(capsule);
  // A cylinder (protocol 11; r = 0.3 m, 0.8 m tall) standing, dropped from 1 cm.
  ObjectDesc cylinder;
  cylinder.shape = ShapeKind::Cylinder;
  cylinder.dims = {0.3f, 0.4f, 0.0f};
  cylinder.position = {-6.0f, 0.41f, -6.0f};
  const ObjectID cylinder_id = driver.create_ok(cylinder);
  ASSERT_FALSE(cylinder_id.is_null());
  // A sphere spinning at 2 rad/s about +Y high above everything, without angular damping.
  ObjectDesc spinner = make_sphere(0.5f, {0.0f, 60.0f, 20.0f});
  spinner.angular_velocity = {0.0f, 2.0f, 0.0f};
  spinner.angular_damping = 0.0f;
  const ObjectID spinner_id = driver.create_ok(spinner);
  ASSERT_FALSE(box_id.is_null() || capsule_id.is_null() || spinner_id.is_null());

  auto all_present = [&](const std::vector<ObjectState>& objects) {
    return find_in(objects, box_id) && find_in(objects, capsule_id) && find_in(objects, spinner_id) &&
           find_in(objects, cylinder_id);
  };
  const auto t0 = driver.wait_snapshot_where(0, all_present);
  ASSERT_TRUE(t0.has_value());
  const auto t1 = driver.wait_snapshot_where(*t0 + 20, all_present);  // >= 1/3 s later
  ASSERT_TRUE(t1.has_value());
  const std::vector<ObjectState>& s0 = driver.snapshots[*t0];
  const std::vector<ObjectState>& s1 = driver.snapshots[*t1];

  const ObjectState& b = *find_in(s1, box_id);
  EXPECT_EQ(b.shape, ShapeKind::Box);
  EXPECT_NEAR(std::fabs(dot(b.orientation, yaw)), 1.0f, 1e-4f) << "the resting box turned";
  EXPECT_NEAR(b.position.y, 0.5f, 0.02f);

  const ObjectState& c = *find_in(s1, capsule_id);
  EXPECT_EQ(c.shape, ShapeKind::Capsule);
  EXPECT_EQ(c.dims, (Vec3{0.25f, 0.5f, 0.25f}));
  EXPECT_NEAR(rotate(c.orientation, {0, 1, 0}).y, 0.0f, 0.02f) << "the capsule's axis should stay horizontal";
  EXPECT_NEAR(c.position.y, 0.25f, 0.02f);

  const ObjectState& cyl = *find_in(s1, cylinder_id);
  EXPECT_EQ(cyl.shape, ShapeKind::Cylinder);
  EXPECT_EQ(cyl.dims, (Vec3{0.3f, 0.4f, 0.3f}));
  EXPECT_NEAR(cyl.position.y, 0.4f, 0.02f) << "the cylinder stands on its cap";
  EXPECT_NEAR(rotate(cyl.orientation, {0, 1, 0}).y, 1.0f, 1e-3f) << "the cylinder stays upright";

  // Rigid rotation at constant w: the relative rotation between the two snapshots is a turn
  // about +Y by w * elapsed (2 % tolerance: float integration over tens of steps).
  const ObjectState& a0 = *find_in(s0, spinner_id);
  const ObjectState& a1 = *find_in(s1, spinner_id);
  EXPECT_NEAR(a1.angular_velocity.y, 2.0f, 1e-4f);
  const Quat relative = a1.orientation * conjugate(a0.orientation);
  const float half_angle = std::atan2(std::sqrt(relative.x * relative.x + relative.y * relative.y +
                                                relative.z * relative.z),
                                      std::fabs(relative.w));
  const float elapsed = static_cast<float>(*t1 - *t0) * dt();
  const float expected = std::fmod(2.0f * elapsed, 2.0f * 3.14159265f);
  const float angle = 2.0f * half_angle;  // in [0, pi]: compare the equivalent turn
  const float expected_short = expected > 3.14159265f ? 2.0f * 3.14159265f - expected : expected;
  EXPECT_NEAR(angle, expected_short, 0.02f * expected_short + 1e-3f);
  EXPECT_NEAR(std::fabs(relative.y) / std::sin(half_angle), 1.0f, 1e-3f) << "not a turn about +Y";
}

TEST_F(Loopback, RaycastRoundTripReturnsTheClosestAndAllHits) {
  // A static box whose top face is at y = 2.5 m, over the ground (top face y = 0).
  ObjectDesc pillar = make_box({0.5f, 1.25f, 0.5f}, {3.0f, 1.25f, 10.0f});
  pillar.kind = BodyKind::Static;
  const ObjectID pillar_id = driver.create_ok(pillar);
  ASSERT_FALSE(pillar_id.is_null());

  // Straight down from 10 m, 20 m long: fraction = (10 - y) / 20.
  const Vec3 origin{3.0f, 10.0f, 10.0f}, down{0.0f, -20.0f, 0.0f};
  const std::optional<ClientDriver::Raycast> closest = driver.wait_raycast(driver.client.raycast(origin, down));
  ASSERT_TRUE(closest.has_value()) << "no RaycastResult";
  ASSERT_TRUE(closest->result.ok()) << closest->result.message;
  EXPECT_GT(closest->result.tick, 0u);
  EXPECT_FALSE(closest->result.truncated);
  ASSERT_EQ(closest->hits.size(), 1u);
  EXPECT_EQ(closest->hits[0].id, pillar_id);
  EXPECT_NEAR(closest->hits[0].point.y, 2.5f, 1e-4f);
  EXPECT_NEAR(closest->hits[0].point.x, 3.0f, 1e-5f);
  EXPECT_NEAR(closest->hits[0].normal.y, 1.0f, 1e-5f);
  EXPECT_NEAR(closest->hits[0].fraction, 7.5f / 20.0f, 1e-5f);

  const std::optional<ClientDriver::Raycast> all = driver.wait_raycast(driver.client.raycast(origin, down, true));
  ASSERT_TRUE(all.has_value());
  ASSERT_TRUE(all->result.ok());
  ASSERT_EQ(all->hits.size(), 2u);
  EXPECT_EQ(all->hits[0].id, pillar_id);
  EXPECT_EQ(all->hits[1].id, ground);
  EXPECT_NEAR(all->hits[1].fraction, 0.5f, 1e-5f);
  EXPECT_NEAR(all->hits[1].point.y, 0.0f, 1e-4f);

  // A ray that passes beside the pillar and ends above the ground hits nothing.
  const std::optional<ClientDriver::Raycast> miss =
      driver.wait_raycast(driver.client.raycast({5.0f, 3.0f, 10.0f}, {0.0f, -2.0f, 0.0f}, true));
  ASSERT_TRUE(miss.has_value());
  EXPECT_TRUE(miss->result.ok());
  EXPECT_TRUE(miss->hits.empty());
}

TEST_F(Loopback, DestroyedObjectDisappearsAndItsIdGoesStale) {
  const ObjectID id = driver.create_ok(make_box({0.5f, 0.5f, 0.5f}, {3.0f, 10.0f, 3.0f}));
  ASSERT_FALSE(id.is_null());
  ASSERT_TRUE(driver.wait_snapshot_where(0, [&](const auto& objects) { return find_in(objects, id); }));
  EXPECT_EQ(server.stats().objects.load(), 2u);

  const std::optional<RequestResult> r = driver.wait_result(driver.client.destroy(id));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->message;
  const uint64_t destroyed_after = driver.snapshots.rbegin()->first;
  const auto gone = driver.wait_snapshot_where(destroyed_after, [&](const auto& objects) {
    return find_in(objects, id) == nullptr;
  });
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(driver.snapshots[*gone].size(), 1u);  // only the ground is left
  EXPECT_EQ(driver.client.find(id), nullptr);

  // The old id never addresses anything again.
  const std::optional<RequestResult> again = driver.wait_result(driver.client.destroy(id));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->code, ResultCode::StaleId);
  EXPECT_FALSE(again->message.empty());
  const std::optional<RequestResult> push = driver.wait_result(driver.client.apply_impulse(id, {0, 1, 0}));
  ASSERT_TRUE(push.has_value());
  EXPECT_EQ(push->code, ResultCode::StaleId);

  // A new object may reuse the slot, but never the id.
  const ObjectID next = driver.create_ok(make_box({0.5f, 0.5f, 0.5f}, {3.0f, 10.0f, 3.0f}));
  ASSERT_FALSE(next.is_null());
  EXPECT_NE(next, id);
  EXPECT_EQ(server.stats().objects.load(), 2u);
}

TEST_F(Loopback, LandingOnTheGroundRaisesCollisionBeginAndDestroyRaisesEnd) {
  // Bottom 0.3 m above the ground: lands after sqrt(2·0.3/9.81) ≈ 0.25 s.
  const ObjectID ball = driver.create_ok(make_sphere(0.5f, {4.0f, 0.8f, -3.0f}));
  ASSERT_FALSE(ball.is_null());
  auto involves_ball = [&](const CollisionEvent& e, ContactEventType type) {
    return e.type == type && ((e.a == ground && e.b == ball) || (e.a == ball && e.b == ground));
  };
  ASSERT_TRUE(driver.poll_until([&] {
    return std::any_of(driver.collisions.begin(), driver.collisions.end(),
                       [&](const CollisionEvent& e) { return involves_ball(e, ContactEventType::Begin); });
  })) << "no Begin event between the ball and the ground";
  const CollisionEvent begin = *std::find_if(driver.collisions.begin(), driver.collisions.end(), [&](const auto& e) {
    return involves_ball(e, ContactEventType::Begin);
  });
  // The contact is where the ball meets the ground's top face, and the normal points from a to b.
  EXPECT_NEAR(begin.point.x, 4.0f, 0.05f);
  EXPECT_NEAR(begin.point.z, -3.0f, 0.05f);
  EXPECT_NEAR(begin.point.y, 0.0f, 0.1f);
  const float expected_ny = begin.a == ground ? 1.0f : -1.0f;
  EXPECT_NEAR(begin.normal.y, expected_ny, 1e-4f);
  EXPECT_GT(begin.tick, 0u);

  // Destroying a touching body ends its contacts.
  const std::optional<RequestResult> r = driver.wait_result(driver.client.destroy(ball));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->message;
  ASSERT_TRUE(driver.poll_until([&] {
    return std::any_of(driver.collisions.begin(), driver.collisions.end(),
                       [&](const CollisionEvent& e) { return involves_ball(e, ContactEventType::End); });
  })) << "no End event after destroying the ball";
}

TEST_F(Loopback, TwoClientsSeeTheSameWorldAtTheSameTick) {
  ClientDriver other;
  std::string error;
  ASSERT_TRUE(other.connect(server.port(), &error, "second")) << error;
  EXPECT_NE(other.client.client_id(), driver.client.client_id());

  std::vector<ObjectID> created;
  created.push_back(driver.create_ok(make_sphere(0.5f, {0.0f, 5.0f, 0.0f}, 1.0f, 0.5f)));
  created.push_back(driver.create_ok(make_sphere(0.25f, {0.1f, 8.0f, 0.0f}, 0.5f)));
  created.push_back(driver.create_ok(make_box({0.5f, 0.25f, 0.5f}, {-2.0f, 3.0f, 1.0f}, 4.0f)));
  for (const ObjectID id : created) ASSERT_FALSE(id.is_null());

  auto has_all = [&](const std::vector<ObjectState>& objects) {
    return std::all_of(created.begin(), created.end(), [&](ObjectID id) { return find_in(objects, id); });
  };
  // Poll both until they hold a complete snapshot of one tick that contains every new object.
  std::optional<uint64_t> common;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && !common; ++i) {
    driver.poll_once();
    other.poll_once();
    for (const auto& [tick, objects] : other.snapshots) {
      const auto mine = driver.snapshots.find(tick);
      if (mine != driver.snapshots.end() && has_all(mine->second) && has_all(objects)) common = tick;
    }
  }
  ASSERT_TRUE(common.has_value()) << "the clients never shared a snapshot tick";

  const std::vector<ObjectState>& a = driver.snapshots[*common];
  const std::vector<ObjectState>& b = other.snapshots[*common];
  ASSERT_EQ(a.size(), 4u);  // ground + 3
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].position, b[i].position);  // bit-identical: one authoritative world
    EXPECT_EQ(a[i].velocity, b[i].velocity);
    EXPECT_EQ(a[i].dims, b[i].dims);
    EXPECT_EQ(a[i].kind, b[i].kind);
    EXPECT_EQ(a[i].sleeping, b[i].sleeping);
  }
  EXPECT_EQ(server.stats().clients.load(), 2u);
}

TEST_F(Loopback, DisconnectEndsTheSessionOnTheServer) {
  ASSERT_EQ(server.stats().clients.load(), 1u);
  driver.client.disconnect("test done");
  EXPECT_FALSE(driver.client.connected());
  EXPECT_EQ(driver.client.client_id(), 0u);
  EXPECT_EQ(driver.client.create_object(make_sphere(0.5f, {0, 5, 0})), 0u);  // not sent
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && server.stats().clients.load() != 0; ++i) {
    driver.poll_once();
  }
  EXPECT_EQ(server.stats().clients.load(), 0u);

  // Reconnecting on the same Client opens a fresh session.
  driver.snapshots.clear();
  std::string error;
  ASSERT_TRUE(driver.connect(server.port(), &error)) << error;
  EXPECT_TRUE(driver.client.connected());
  EXPECT_NE(driver.wait_snapshot_after(0), 0u);
}

TEST_F(Loopback, ServerShutdownDisconnectsClients) {
  server.stop();
  ASSERT_TRUE(driver.poll_until([&] { return driver.server_disconnected; }))
      << "no Disconnect from a stopping server";
  EXPECT_FALSE(driver.client.connected());
  EXPECT_EQ(driver.client.apply_force(ground, {1, 0, 0}), 0u);
}

}  // namespace
}  // namespace impulse::test
