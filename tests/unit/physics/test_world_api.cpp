// World API contracts: every call rejects stale, forged and out-of-range ids with the world
// unchanged; invalid descriptions and commands are rejected; step(dt) ignores a bad dt.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::box_desc;
using test::sphere_desc;
using test::state;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A world with some history: a destroyed slot that was reused, contacts, sleepers.
struct Fixture {
  World world;
  ObjectID ground;
  ObjectID box;
  ObjectID ball;
  ObjectID stale;

  Fixture() {
    ground = add_ground(world);
    box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
    stale = add(world, sphere_desc({3.0f, 2.0f, 0.0f}));
    EXPECT_EQ(world.destroy_object(stale), Error::Ok);
    ball = add(world, sphere_desc({0.0f, 1.5f, 0.0f}));  // reuses stale's slot
    EXPECT_EQ(ball.index, stale.index);
    for (int i = 0; i < 20; ++i) world.step(1.0f / 60.0f);
  }
};

TEST(WorldApi, BadIdsAreRejectedByEveryCallWithWorldUnchanged) {
  Fixture f;
  World& w = f.world;
  ASSERT_TRUE(w.is_colliding(f.box));
  const std::vector<ObjectID> bad = {
      ObjectID{},                                   // null
      f.stale,                                      // destroyed, slot reused since
      ObjectID{f.box.index, f.box.generation + 1},  // forged generation
      ObjectID{f.box.index, 0},
      ObjectID{999, 1},  // slot never allocated
      from_wire(~0ull),
  };
  for (const ObjectID id : bad) {
    const uint64_t hash = w.world_hash();
    const uint32_t count = w.object_count();
    const size_t contacts = w.get_collisions().size();
    EXPECT_FALSE(w.is_valid(id));
    EXPECT_FALSE(w.get_object(id).has_value());
    EXPECT_EQ(w.destroy_object(id), Error::StaleId);
    EXPECT_EQ(w.apply_force(id, {1, 2, 3}), Error::StaleId);
    EXPECT_EQ(w.apply_impulse(id, {1, 2, 3}), Error::StaleId);
    EXPECT_EQ(w.set_velocity(id, {1, 2, 3}), Error::StaleId);
    EXPECT_FALSE(w.is_colliding(id));
    EXPECT_FALSE(w.are_colliding(id, f.box));
    EXPECT_FALSE(w.are_colliding(f.ground, id));
    EXPECT_TRUE(w.get_collisions_for(id).empty());
    EXPECT_EQ(w.world_hash(), hash);
    EXPECT_EQ(w.object_count(), count);
    EXPECT_EQ(w.get_collisions().size(), contacts);
  }
  EXPECT_FALSE(w.are_colliding(f.box, f.box));
}

TEST(WorldApi, InvalidDescriptionsAreRejected) {
  Fixture f;
  World& w = f.world;
  const WorldSettings& s = w.settings();
  std::vector<std::pair<std::string, BodyDesc>> cases;
  auto with = [&](std::string name, auto&& edit) {
    BodyDesc d = sphere_desc({0.0f, 5.0f, 0.0f});
    edit(d);
    cases.emplace_back(std::move(name), d);
  };
  with("kind out of range", [](BodyDesc& d) { d.kind = static_cast<BodyKind>(7); });
  with("shape kind out of range", [](BodyDesc& d) { d.shape.kind = static_cast<ShapeKind>(9); });
  with("shape kind Count", [](BodyDesc& d) { d.shape.kind = ShapeKind::Count; });
  with("radius 0", [](BodyDesc& d) { d.shape = make_sphere(0.0f); });
  with("radius negative", [](BodyDesc& d) { d.shape = make_sphere(-1.0f); });
  with("radius NaN", [](BodyDesc& d) { d.shape = make_sphere(kNaN); });
  with("radius > max_extent", [&](BodyDesc& d) { d.shape = make_sphere(s.max_extent * 2); });
  with("box extent 0", [](BodyDesc& d) { d.shape = make_box({1.0f, 0.0f, 1.0f}); });
  with("box extent inf", [](BodyDesc& d) { d.shape = make_box({1.0f, kInf, 1.0f}); });
  with("box extent > max", [&](BodyDesc& d) { d.shape = make_box({1.0f, 1.0f, s.max_extent * 2}); });
  with("position NaN", [](BodyDesc& d) { d.position.x = kNaN; });
  with("position inf", [](BodyDesc& d) { d.position.z = -kInf; });
  with("position beyond max", [&](BodyDesc& d) { d.position.y = s.max_coordinate * 2; });
  with("velocity NaN", [](BodyDesc& d) { d.velocity.y = kNaN; });
  with("velocity beyond max", [&](BodyDesc& d) { d.velocity.x = -s.max_speed * 2; });
  with("mass 0", [](BodyDesc& d) { d.mass = 0.0f; });
  with("mass negative", [](BodyDesc& d) { d.mass = -1.0f; });
  with("mass NaN", [](BodyDesc& d) { d.mass = kNaN; });
  with("mass beyond max", [&](BodyDesc& d) { d.mass = s.max_mass * 2; });
  with("mass subnormal", [](BodyDesc& d) { d.mass = std::numeric_limits<float>::denorm_min(); });
  with("restitution negative", [](BodyDesc& d) { d.restitution = -0.1f; });
  with("restitution > 1", [](BodyDesc& d) { d.restitution = 1.1f; });
  with("restitution NaN", [](BodyDesc& d) { d.restitution = kNaN; });
  with("friction negative", [](BodyDesc& d) { d.friction = -0.5f; });
  with("friction inf", [](BodyDesc& d) { d.friction = kInf; });
  with("damping negative", [](BodyDesc& d) { d.linear_damping = -1.0f; });
  with("static mass NaN", [](BodyDesc& d) {
    d.kind = BodyKind::Static;
    d.mass = kNaN;
  });
  for (const auto& [name, desc] : cases) {
    const uint64_t hash = w.world_hash();
    const uint32_t count = w.object_count();
    const CreateResult r = w.create_object(desc);
    EXPECT_EQ(r.error, Error::InvalidArgument) << name;
    EXPECT_TRUE(r.id.is_null()) << name;
    EXPECT_EQ(w.world_hash(), hash) << name;
    EXPECT_EQ(w.object_count(), count) << name;
  }
  // Static and kinematic bodies ignore the mass field (finite values only).
  BodyDesc st = box_desc({10.0f, 1.0f, 0.0f}, {1, 1, 1}, 0.0f, BodyKind::Static);
  EXPECT_EQ(w.create_object(st).error, Error::Ok);
  BodyDesc kin = box_desc({20.0f, 1.0f, 0.0f}, {1, 1, 1}, -5.0f, BodyKind::Kinematic);
  EXPECT_EQ(w.create_object(kin).error, Error::Ok);
  // Boundary values are accepted.
  BodyDesc edge = sphere_desc({s.max_coordinate, 0.0f, -s.max_coordinate}, 10.0f, s.max_mass, 1.0f);
  edge.velocity = {s.max_speed, 0.0f, 0.0f};
  edge.angular_velocity = {0.0f, 0.0f, -s.max_angular_speed};
  EXPECT_EQ(w.create_object(edge).error, Error::Ok);
  BodyDesc widest = sphere_desc({0.0f, 0.0f, 5000.0f}, s.max_extent, 0.0f);
  widest.kind = BodyKind::Static;
  EXPECT_EQ(w.create_object(widest).error, Error::Ok);
  // Speeds are bounded by their length: each component within the cap, the length beyond it.
  BodyDesc diagonal = sphere_desc({0.0f, 0.0f, 7000.0f});
  diagonal.velocity = Vec3{1.0f, 1.0f, 0.0f} * (0.8f * s.max_speed);
  EXPECT_EQ(w.create_object(diagonal).error, Error::InvalidArgument);
  diagonal.velocity = Vec3{};
  diagonal.angular_velocity = Vec3{1.0f, 1.0f, 1.0f} * (0.6f * s.max_angular_speed);
  EXPECT_EQ(w.create_object(diagonal).error, Error::InvalidArgument);
}

TEST(WorldApi, WorldFullLeavesWorldUnchanged) {
  WorldSettings s;
  s.max_objects = 3;
  World w(s);
  for (int i = 0; i < 3; ++i) add(w, sphere_desc({static_cast<float>(3 * i), 0.0f, 0.0f}));
  const uint64_t hash = w.world_hash();
  const CreateResult r = w.create_object(sphere_desc({20.0f, 0.0f, 0.0f}));
  EXPECT_EQ(r.error, Error::WorldFull);
  EXPECT_TRUE(r.id.is_null());
  EXPECT_EQ(w.world_hash(), hash);
  EXPECT_EQ(w.object_count(), 3u);
}

TEST(WorldApi, CommandValidation) {
  Fixture f;
  World& w = f.world;
  const uint64_t hash = w.world_hash();
  // Kind checks.
  EXPECT_EQ(w.apply_force(f.ground, {0, 1, 0}), Error::NotDynamic);
  EXPECT_EQ(w.apply_impulse(f.ground, {0, 1, 0}), Error::NotDynamic);
  EXPECT_EQ(w.set_velocity(f.ground, {0, 1, 0}), Error::NotDynamic);
  // Non-finite and absurd values.
  const float big_force = max_force(w.settings()) * 2;
  const float big_impulse = max_impulse(w.settings()) * 2;
  for (const Vec3 v : {Vec3{kNaN, 0, 0}, Vec3{0, kInf, 0}, Vec3{0, 0, -kInf}}) {
    EXPECT_EQ(w.apply_force(f.box, v), Error::InvalidArgument);
    EXPECT_EQ(w.apply_impulse(f.box, v), Error::InvalidArgument);
    EXPECT_EQ(w.set_velocity(f.box, v), Error::InvalidArgument);
    EXPECT_EQ(w.apply_force(f.box, {1, 0, 0}, v), Error::InvalidArgument);  // bad point
    EXPECT_EQ(w.apply_impulse(f.box, {1, 0, 0}, v), Error::InvalidArgument);
  }
  EXPECT_EQ(w.apply_force(f.box, {big_force, 0, 0}), Error::InvalidArgument);
  EXPECT_EQ(w.apply_impulse(f.box, {0, big_impulse, 0}), Error::InvalidArgument);
  // An impulse within the bound that would push a 1 kg body past max_speed.
  EXPECT_EQ(w.apply_impulse(f.box, {w.settings().max_speed * 1.5f, 0, 0}), Error::InvalidArgument);
  EXPECT_EQ(w.set_velocity(f.box, {0, w.settings().max_speed * 1.5f, 0}), Error::InvalidArgument);
  EXPECT_EQ(w.world_hash(), hash);
  // Valid commands change the world.
  EXPECT_EQ(w.apply_force(f.box, {1, 0, 0}, Vec3{0, 1, 0}), Error::Ok);
  EXPECT_NE(w.world_hash(), hash);
}

// A push is bounded by what it does to its body (settings.h, kMaxPushRate): the step's forces may
// change the velocity by at most max_speed per 1/60 s, the torques the angular velocity by at most
// max_angular_speed per 1/60 s. On the lightest body the density rule allows (a 0.1 m sphere at
// 1e-3 kg/m^3), the largest accepted force and torque, every step, leave the state finite and at
// the caps; anything more is refused, whatever the wire allowed.
TEST(WorldApi, PushesAreBoundedByWhatTheyDoToTheBody) {
  WorldSettings s;
  s.gravity = {0, 0, 0};
  World w(s);
  const float radius = 0.1f;
  const float mass = kMinDensity * (4.0f / 3.0f) * 3.14159265f * radius * radius * radius * 1.001f;
  const ObjectID feather = add(w, sphere_desc({0, 0, 0}, radius, mass));
  const float inertia = 0.4f * mass * radius * radius;
  const float force = 0.999f * kMaxPushRate * s.max_speed * mass;           // along one axis
  const float torque = 0.999f * kMaxPushRate * s.max_angular_speed * inertia;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(w.apply_force(feather, {force, 0, 0}), Error::Ok);
    ASSERT_EQ(w.apply_torque(feather, {0, 0, torque}), Error::Ok);
    // The accumulators count: a second push that takes the sum over the bound is refused.
    EXPECT_EQ(w.apply_force(feather, {0.01f * force, 0, 0}), Error::InvalidArgument);
    EXPECT_EQ(w.apply_torque(feather, {0, 0, 0.01f * torque}), Error::InvalidArgument);
    w.step(1.0f / 60.0f);
  }
  const BodyState b = state(w, feather);
  EXPECT_TRUE(is_finite(b.position) && is_finite(b.orientation));
  EXPECT_NEAR(length(b.velocity), s.max_speed, 1e-3f * s.max_speed);
  EXPECT_LE(length(b.velocity), s.max_speed * (1.0f + 1e-6f));
  EXPECT_NEAR(length(b.angular_velocity), s.max_angular_speed, 1e-3f * s.max_angular_speed);
  EXPECT_LE(length(b.angular_velocity), s.max_angular_speed * (1.0f + 1e-6f));
  // The wire's largest values, and a force at a point whose torque breaks the rule.
  EXPECT_EQ(w.apply_force(feather, {1.0e9f, 0, 0}), Error::InvalidArgument);
  EXPECT_EQ(w.apply_torque(feather, {1.0e9f, 0, 0}), Error::InvalidArgument);
  EXPECT_EQ(w.apply_force(feather, {0, 0.5f * force, 0}, b.position + Vec3{radius, 0, 0}), Error::InvalidArgument);
  // The same force on a body 1e4 times heavier is nothing.
  const ObjectID heavy = add(w, sphere_desc({5, 0, 0}, radius, mass * 1.0e4f));
  EXPECT_EQ(w.apply_force(heavy, {100.0f * force, 0, 0}), Error::Ok);
}

TEST(WorldApi, BadDtIsANoOp) {
  Fixture f;
  World& w = f.world;
  const uint64_t hash = w.world_hash();
  const uint64_t tick = w.tick();
  const size_t events = w.contact_events().size();
  for (const float dt : {0.0f, -1.0f / 60.0f, kNaN, kInf, -kInf}) {
    w.step(dt);
    EXPECT_EQ(w.tick(), tick);
    EXPECT_EQ(w.world_hash(), hash);
    EXPECT_EQ(w.contact_events().size(), events);
  }
  w.step(1.0f / 60.0f);
  EXPECT_EQ(w.tick(), tick + 1);
}

TEST(WorldApi, GetObjectReportsState) {
  World w;
  BodyDesc d = sphere_desc({1.0f, 2.0f, 3.0f}, 0.25f, 2.5f, 0.4f);
  d.velocity = {0.5f, 0.0f, 0.0f};
  d.friction = 0.7f;
  d.shape.half_extents = {9, 9, 9};  // unused by a sphere: normalised to the radius
  const ObjectID id = add(w, d);
  const BodyState s = state(w, id);
  EXPECT_EQ(s.id, id);
  EXPECT_EQ(s.kind, BodyKind::Dynamic);
  EXPECT_EQ(s.shape.kind, ShapeKind::Sphere);
  EXPECT_EQ(s.shape.radius, 0.25f);
  EXPECT_EQ(s.shape.half_extents, (Vec3{0.25f, 0.25f, 0.25f}));
  EXPECT_EQ(s.position, (Vec3{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(s.velocity, (Vec3{0.5f, 0.0f, 0.0f}));
  EXPECT_EQ(s.mass, 2.5f);
  EXPECT_EQ(s.restitution, 0.4f);
  EXPECT_EQ(s.friction, 0.7f);
  EXPECT_FALSE(s.sleeping);
  BodyDesc sd = box_desc({0, -5, 0}, {1, 1, 1}, 3.0f, BodyKind::Static);
  sd.velocity = {1, 1, 1};  // ignored for static bodies
  const BodyState st = state(w, add(w, sd));
  EXPECT_EQ(st.mass, 0.0f);
  EXPECT_EQ(st.velocity, (Vec3{}));
  EXPECT_EQ(w.awake_count(), 1u);
}

TEST(WorldApi, ForEachObjectVisitsExactlyTheLiveSet) {
  World w;
  std::set<ObjectID> live;
  for (int i = 0; i < 20; ++i) live.insert(add(w, sphere_desc({3.0f * i, 0.0f, 0.0f})));
  int n = 0;
  for (const ObjectID id : std::set<ObjectID>(live)) {
    if (n++ % 3 == 0) {
      ASSERT_EQ(w.destroy_object(id), Error::Ok);
      live.erase(id);
    }
  }
  std::set<ObjectID> visited;
  w.for_each_object([&](const BodyState& s) { EXPECT_TRUE(visited.insert(s.id).second); });
  EXPECT_EQ(visited, live);
  EXPECT_EQ(w.object_count(), live.size());
}

TEST(WorldApi, ErrorStrings) {
  std::set<std::string> seen;
  for (const Error e :
       {Error::Ok, Error::StaleId, Error::NotDynamic, Error::InvalidArgument, Error::WorldFull}) {
    const std::string s = to_string(e);
    EXPECT_FALSE(s.empty());
    EXPECT_TRUE(seen.insert(s).second);
  }
  EXPECT_STRNE(to_string(static_cast<Error>(200)), "");
}

TEST(WorldApi, SettingsAreCheckedAndSanitised) {
  EXPECT_EQ(check_settings(WorldSettings{}), nullptr);
  WorldSettings bad;
  bad.cell_size = -1.0f;
  EXPECT_NE(check_settings(bad), nullptr);
  bad.cell_size = kNaN;
  bad.gravity.y = kInf;
  bad.max_objects = 0;
  bad.max_cells_per_body = 0x53747974;  // a saved world's hostile value: a step would bin that many cells
  const World w(bad);  // falls back to the defaults of the unusable fields
  EXPECT_EQ(w.settings().cell_size, WorldSettings{}.cell_size);
  EXPECT_EQ(w.settings().max_cells_per_body, WorldSettings{}.max_cells_per_body);
  for (const float cell : {0.009f, 1001.0f}) {
    WorldSettings s;
    s.cell_size = cell;
    EXPECT_NE(check_settings(s), nullptr) << cell;
  }
  for (const uint32_t cells : {0u, 4097u}) {
    WorldSettings s;
    s.max_cells_per_body = cells;
    EXPECT_NE(check_settings(s), nullptr) << cells;
  }
  EXPECT_EQ(w.settings().gravity.y, WorldSettings{}.gravity.y);
  EXPECT_EQ(w.settings().max_objects, WorldSettings{}.max_objects);
  EXPECT_EQ(check_settings(w.settings()), nullptr);
}

}  // namespace
}  // namespace impulse::physics
