// Contact events and collision queries: Begin/End exactly once, and every query agreeing with
// get_collisions() and with a reference diff on a random scene with sleep, wakes and destroys.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::add_ground;
using test::box_desc;
using test::sphere_desc;
using test::state;

constexpr float kDt = 1.0f / 60.0f;

struct EventCount {
  int begins = 0;
  int ends = 0;
  uint64_t begin_tick = 0;
  uint64_t end_tick = 0;
};

EventCount count_events(const World& world, ObjectID a, ObjectID b, EventCount c) {
  for (const ContactEvent& e : world.contact_events()) {
    if (!((e.a == a && e.b == b) || (e.a == b && e.b == a))) continue;
    if (e.type == ContactEventType::Begin) {
      ++c.begins;
      c.begin_tick = world.tick();
    } else {
      ++c.ends;
      c.end_tick = world.tick();
    }
  }
  return c;
}

TEST(Events, BeginOnceOnContactEndOnceOnSeparation) {
  WorldSettings s;
  s.gravity = {0, 0, 0};
  World world(s);
  BodyDesc da = sphere_desc({-2.0f, 0.0f, 0.0f}, 0.5f, 1.0f, 1.0f);
  da.velocity = {2.0f, 0.0f, 0.0f};
  BodyDesc db = sphere_desc({2.0f, 0.0f, 0.0f}, 0.5f, 1.0f, 1.0f);
  db.velocity = {-2.0f, 0.0f, 0.0f};
  const ObjectID a = add(world, da);
  const ObjectID b = add(world, db);
  EventCount c;
  for (int i = 0; i < 180; ++i) {
    world.step(kDt);
    c = count_events(world, a, b, c);
    if (c.begins == 1 && c.ends == 0) {
      ASSERT_TRUE(world.are_colliding(a, b));
    }
    if (c.ends == 1) {
      ASSERT_FALSE(world.are_colliding(a, b));
    }
  }
  EXPECT_EQ(c.begins, 1);
  EXPECT_EQ(c.ends, 1);
  EXPECT_LT(c.begin_tick, c.end_tick);
}

// A resting contact lasting many steps begins once; lifting the box ends it once.
TEST(Events, PersistentContactBeginsOnce) {
  World world;
  const ObjectID ground = add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.7f, 0.0f}));
  EventCount c;
  for (int i = 0; i < 120; ++i) {
    world.step(kDt);
    c = count_events(world, ground, box, c);
  }
  EXPECT_EQ(c.begins, 1);
  EXPECT_EQ(c.ends, 0);
  const auto events = world.contact_events();
  EXPECT_TRUE(events.empty());
  ASSERT_EQ(world.apply_impulse(box, {0.0f, 5.0f, 0.0f}), Error::Ok);
  for (int i = 0; i < 30; ++i) {
    world.step(kDt);
    c = count_events(world, ground, box, c);
  }
  EXPECT_EQ(c.begins, 1);
  EXPECT_EQ(c.ends, 1);
  // End carries the last known contact: normal from ground (a) up to the box (b).
  EXPECT_FALSE(world.is_colliding(box));
}

using PairKey = std::pair<ObjectID, ObjectID>;

std::set<PairKey> pair_set(std::span<const Contact> contacts) {
  std::set<PairKey> out;
  for (const Contact& c : contacts) out.insert({c.a, c.b});
  return out;
}

// Checks every query against get_collisions() for the current state; are_colliding over all
// pairs of `ids` when `all_pairs` (quadratic, so not every step). `reach` [m]: how far any two
// bodies could close within the step just taken, by which the margin grows (World::collide_pair).
void check_queries(const World& world, const std::vector<ObjectID>& ids, bool all_pairs, float reach = 0.0f) {
  const auto all = world.get_collisions();
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_LT(all[i].a, all[i].b);
    if (i > 0) {
      ASSERT_TRUE(all[i - 1].a < all[i].a || (all[i - 1].a == all[i].a && all[i - 1].b < all[i].b));
    }
    ASSERT_TRUE(world.is_valid(all[i].a) && world.is_valid(all[i].b));
    // Speculative contacts: a gap of up to the margin, grown by the pair's approach within the
    // step, is reported as a negative depth.
    ASSERT_GE(all[i].depth, -(world.settings().speculative_margin + reach));
  }
  const std::set<PairKey> pairs = pair_set(all);
  for (const ObjectID id : ids) {
    std::vector<Contact> expected;
    for (const Contact& c : all) {
      if (c.a == id || c.b == id) expected.push_back(c);
    }
    const std::vector<Contact> got = world.get_collisions_for(id);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].a, expected[i].a);
      ASSERT_EQ(got[i].b, expected[i].b);
    }
    ASSERT_EQ(world.is_colliding(id), !expected.empty() && world.is_valid(id));
  }
  for (const Contact& c : all) {
    ASSERT_TRUE(world.are_colliding(c.a, c.b));
    ASSERT_TRUE(world.are_colliding(c.b, c.a));
  }
  if (!all_pairs) return;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = i + 1; j < ids.size(); ++j) {
      const ObjectID lo = std::min(ids[i], ids[j]);
      const ObjectID hi = std::max(ids[i], ids[j]);
      const bool expected = pairs.count({lo, hi}) > 0;
      ASSERT_EQ(world.are_colliding(ids[i], ids[j]), expected);
      ASSERT_EQ(world.are_colliding(ids[j], ids[i]), expected);
    }
  }
}

// Random pile in a walled pit: bodies fall, collide, settle and sleep. Every 40 steps an impulse
// wakes one body, one is destroyed and one created, a kinematic pusher reverses, and a temporary
// static box appears or disappears (waking what it overlaps or supported). After every step the
// queries must agree with get_collisions(), and the events must equal the diff between the
// collisions after the previous step (before any destroy) and now.
TEST(Queries, AgreeWithGetCollisionsOnRandomScene) {
  World world;
  std::vector<ObjectID> statics;
  std::vector<ObjectID> dynamics;
  statics.push_back(add_ground(world));
  const float wall_h = 4.0f;
  for (const Vec3 p : {Vec3{-6.5f, wall_h, 0.0f}, Vec3{6.5f, wall_h, 0.0f}}) {
    statics.push_back(add(world, box_desc(p, {0.5f, wall_h, 7.0f}, 0.0f, BodyKind::Static)));
  }
  for (const Vec3 p : {Vec3{0.0f, wall_h, -6.5f}, Vec3{0.0f, wall_h, 6.5f}}) {
    statics.push_back(add(world, box_desc(p, {7.0f, wall_h, 0.5f}, 0.0f, BodyKind::Static)));
  }
  BodyDesc kd = box_desc({0.0f, 0.5f, 0.0f}, {0.4f, 0.4f, 2.0f}, 0.0f, BodyKind::Kinematic);
  kd.velocity = {1.5f, 0.0f, 0.0f};
  const ObjectID pusher = add(world, kd);
  ObjectID temp_static{};

  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> xz(-5.0f, 5.0f);
  std::uniform_real_distribution<float> y(0.6f, 8.0f);
  std::uniform_real_distribution<float> size(0.3f, 0.7f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  auto random_body = [&] {
    const Vec3 p{xz(rng), y(rng), xz(rng)};
    BodyDesc d = unit(rng) < 0.5f ? sphere_desc(p, size(rng), 0.5f + 2 * unit(rng), 0.3f * unit(rng))
                                  : box_desc(p, {size(rng), size(rng), size(rng)}, 0.5f + 2 * unit(rng));
    // Damping on top of friction brings the pile to rest well within the 900 steps (angular
    // damping too: spheres roll, and rolling meets no friction).
    d.linear_damping = 2.0f;
    d.angular_damping = 2.0f;
    return d;
  };
  for (int i = 0; i < 50; ++i) dynamics.push_back(add(world, random_body()));
  auto all_ids = [&] {
    std::vector<ObjectID> ids = statics;
    ids.insert(ids.end(), dynamics.begin(), dynamics.end());
    ids.push_back(pusher);
    if (!temp_static.is_null()) ids.push_back(temp_static);
    return ids;
  };

  std::set<PairKey> previous = pair_set(world.get_collisions());
  int begins = 0;
  int ends = 0;
  int max_resting = 0;
  for (int stepi = 0; stepi < 900; ++stepi) {
    // Bound on the margin's growth this step: twice the fastest surface speed (|v| + |w| times the
    // largest extent of these shapes, at most 0.7 sqrt(3) < 1.25 m; the walls and pusher do not
    // turn) over the step.
    float fastest = 0.0f;
    for (const ObjectID id : all_ids()) {
      const BodyState s = state(world, id);
      fastest = std::max(fastest, length(s.velocity) + 1.25f * length(s.angular_velocity));
    }
    const float reach = 2.0f * fastest * kDt;
    world.step(kDt);
    const std::set<PairKey> current = pair_set(world.get_collisions());
    // Events are exactly the diff, sorted by (a, b).
    std::vector<ContactEvent> expected;
    for (const PairKey& p : previous) {
      if (!current.count(p)) expected.push_back({ContactEventType::End, p.first, p.second, {}, {}});
    }
    for (const PairKey& p : current) {
      if (!previous.count(p)) expected.push_back({ContactEventType::Begin, p.first, p.second, {}, {}});
    }
    std::sort(expected.begin(), expected.end(), [](const ContactEvent& x, const ContactEvent& y) {
      return std::pair(x.a, x.b) < std::pair(y.a, y.b);
    });
    const auto events = world.contact_events();
    ASSERT_EQ(events.size(), expected.size()) << "step " << stepi;
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_EQ(events[i].type, expected[i].type) << "step " << stepi;
      ASSERT_EQ(events[i].a, expected[i].a);
      ASSERT_EQ(events[i].b, expected[i].b);
      (events[i].type == ContactEventType::Begin ? begins : ends)++;
    }
    check_queries(world, all_ids(), stepi % 4 == 0, reach);
    max_resting = std::max<int>(max_resting, static_cast<int>(world.resting_contact_count()));
    previous = current;

    if (stepi % 40 != 39) continue;
    if (stepi >= 700) {
      // Quiet phase: stop the pusher and remove the temporary static so the pile can sleep.
      ASSERT_EQ(world.set_velocity(pusher, {}), Error::Ok);
      if (!temp_static.is_null()) {
        ASSERT_EQ(world.destroy_object(temp_static), Error::Ok);
        temp_static = ObjectID{};
      }
      continue;
    }
    const ObjectID kick = dynamics[rng() % dynamics.size()];
    ASSERT_EQ(world.apply_impulse(kick, {0.0f, 3.0f, 0.0f}), Error::Ok);
    const size_t victim = rng() % dynamics.size();
    ASSERT_EQ(world.destroy_object(dynamics[victim]), Error::Ok);
    dynamics.erase(dynamics.begin() + static_cast<long>(victim));
    dynamics.push_back(add(world, random_body()));
    ASSERT_EQ(world.set_velocity(pusher, {stepi % 80 == 39 ? -1.5f : 1.5f, 0.0f, 0.0f}), Error::Ok);
    if (temp_static.is_null()) {
      temp_static =
          add(world, box_desc({xz(rng), 0.5f, xz(rng)}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Static));
    } else {
      ASSERT_EQ(world.destroy_object(temp_static), Error::Ok);
      temp_static = ObjectID{};
    }
    check_queries(world, all_ids(), true, reach);  // destroyed contacts vanish from the queries at once
  }
  EXPECT_GT(begins, 50);
  EXPECT_GT(ends, 10);
  EXPECT_GT(max_resting, 10) << "the scene should exercise frozen resting contacts";
  // Islands sleep whole, so the pile sleeps once its slowest island has rested: the kinematic
  // pusher is stopped, so every island must be asleep within 10 s more.
  const int more = test::step_until(world, kDt, 600, [&] { return world.awake_count() <= 1; });
  EXPECT_LT(more, 600) << "the pile should sleep after the last perturbation; awake " << world.awake_count();
  check_queries(world, all_ids(), true);
}

}  // namespace
}  // namespace impulse::physics
