// Collision filtering: the category/mask/group rule (Box2D's b2ShouldShapesCollide cases) and its
// use in the step (contacts and sensors), in ray and overlap queries, and World::set_filter.
#include <gtest/gtest.h>

#include <algorithm>
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

constexpr float kDt = 1.0f / 60.0f;

Filter filter(uint32_t category, uint32_t mask, int32_t group = 0) { return Filter{category, mask, group}; }

// --- The rule --------------------------------------------------------------------------------------

TEST(FilterRule, DefaultsTouchEachOther) {
  EXPECT_TRUE(should_collide(Filter{}, Filter{}));
  EXPECT_EQ(Filter{}.category, 1u);
  EXPECT_EQ(Filter{}.mask, ~0u);
  EXPECT_EQ(Filter{}.group, 0);
}

TEST(FilterRule, BothMasksMustAcceptTheOtherCategory) {
  // Box2D's one-way case: a accepts b's category but b does not accept a's: no contact.
  EXPECT_FALSE(should_collide(filter(0x1, 0x2), filter(0x2, 0x4)));
  EXPECT_FALSE(should_collide(filter(0x2, 0x4), filter(0x1, 0x2)));  // symmetric
  EXPECT_TRUE(should_collide(filter(0x1, 0x2), filter(0x2, 0x1)));
  EXPECT_FALSE(should_collide(filter(0x1, 0x0), Filter{}));  // mask 0 touches nothing
  EXPECT_FALSE(should_collide(filter(0x0, ~0u), Filter{}));  // no category: nobody's mask has it
  EXPECT_TRUE(should_collide(filter(0x8000'0000u, ~0u), filter(0x1, 0x8000'0000u)));  // bit 31
}

TEST(FilterRule, SameGroupOverridesTheMasks) {
  // Same positive group: always, even with disjoint masks.
  EXPECT_TRUE(should_collide(filter(0x1, 0x0, 3), filter(0x2, 0x0, 3)));
  // Same negative group: never, even with matching masks.
  EXPECT_FALSE(should_collide(filter(0x1, ~0u, -3), filter(0x1, ~0u, -3)));
  // Different groups (or one zero): the masks decide.
  EXPECT_TRUE(should_collide(filter(0x1, ~0u, -3), filter(0x1, ~0u, -4)));
  EXPECT_FALSE(should_collide(filter(0x1, 0x2, 3), filter(0x1, 0x2, 4)));
  EXPECT_TRUE(should_collide(filter(0x1, ~0u, -3), filter(0x1, ~0u, 0)));
  EXPECT_FALSE(should_collide(filter(0x1, 0x0, 0), filter(0x1, 0x0, 0)));  // group 0 is no group
}

TEST(FilterRule, QueryFilterTestsBothDirectionsAndIgnoresGroups) {
  EXPECT_TRUE(query_accepts(QueryFilter{}, Filter{}));
  EXPECT_FALSE(query_accepts(QueryFilter{0x1, 0x2}, filter(0x1, ~0u)));  // not in the query's mask
  EXPECT_FALSE(query_accepts(QueryFilter{0x4, ~0u}, filter(0x1, 0x1)));  // body does not accept the query
  EXPECT_TRUE(query_accepts(QueryFilter{0x4, 0x2}, filter(0x2, 0x4, -1)));
}

// --- The step ---------------------------------------------------------------------------------------

TEST(FilterWorld, DisjointMasksFallThroughWhileAThirdCollides) {
  World world;
  add_ground(world);
  // Lower box: category 2, touches the ground (1) only. Upper box: category 4, touches the
  // ground and category 8, not 2. A third box (default filter) lands on the lower one.
  BodyDesc lower = box_desc({0.0f, 0.5f, 0.0f});
  lower.filter = filter(0x2, 0x1 | 0x8);
  BodyDesc upper = box_desc({0.0f, 2.0f, 0.0f});
  upper.filter = filter(0x4, 0x1 | 0x8);
  BodyDesc third = box_desc({3.0f, 0.5f, 0.0f});
  BodyDesc fourth = box_desc({3.0f, 2.0f, 0.0f});
  const ObjectID lo = add(world, lower);
  const ObjectID up = add(world, upper);
  const ObjectID a = add(world, third);
  const ObjectID b = add(world, fourth);
  for (int i = 0; i < 180; ++i) {
    world.step(kDt);
    EXPECT_FALSE(world.are_colliding(lo, up)) << "step " << i;
  }
  // The filtered pair interpenetrates (both rest on the ground), the default pair stacks.
  EXPECT_NEAR(state(world, lo).position.y, 0.5f, 0.02f);
  EXPECT_NEAR(state(world, up).position.y, 0.5f, 0.02f);
  EXPECT_NEAR(state(world, a).position.y, 0.5f, 0.02f);
  EXPECT_NEAR(state(world, b).position.y, 1.5f, 0.02f);
  EXPECT_TRUE(world.are_colliding(a, b));
}

TEST(FilterWorld, ANegativeGroupNeverCollides) {
  World world;
  add_ground(world);
  BodyDesc lower = box_desc({0.0f, 0.5f, 0.0f});
  lower.filter.group = -7;
  BodyDesc upper = box_desc({0.0f, 2.0f, 0.0f});
  upper.filter.group = -7;
  const ObjectID lo = add(world, lower);
  const ObjectID up = add(world, upper);
  for (int i = 0; i < 180; ++i) {
    world.step(kDt);
    EXPECT_FALSE(world.are_colliding(lo, up)) << "step " << i;
  }
  EXPECT_NEAR(state(world, up).position.y, 0.5f, 0.02f);
  // A positive group with masks that exclude each other still stacks.
  World world2;
  add_ground(world2);
  lower.filter = filter(0x2, 0x1, 5);
  upper.filter = filter(0x4, 0x1, 5);
  add(world2, lower);
  const ObjectID up2 = add(world2, upper);
  for (int i = 0; i < 180; ++i) world2.step(kDt);
  EXPECT_NEAR(state(world2, up2).position.y, 1.5f, 0.02f);
}

TEST(FilterWorld, ASensorWithAMaskReportsOnlyMatchingBodies) {
  World world;
  BodyDesc sensor = box_desc({0.0f, 0.0f, 0.0f}, {3.0f, 1.0f, 3.0f}, 1.0f, BodyKind::Static);
  sensor.sensor = true;
  sensor.filter = filter(0x1, 0x2);  // detects category 2 only
  const ObjectID s = add(world, sensor);
  BodyDesc wanted = sphere_desc({-1.0f, 3.0f, 0.0f});
  wanted.filter = filter(0x2, ~0u);
  BodyDesc ignored = sphere_desc({1.0f, 3.0f, 0.0f});  // category 1
  const ObjectID w = add(world, wanted);
  const ObjectID ig = add(world, ignored);
  int begins_wanted = 0;
  int begins_ignored = 0;
  for (int i = 0; i < 90; ++i) {  // 3 m of fall in zero-velocity start: through the volume
    world.step(kDt);
    for (const ContactEvent& e : world.contact_events()) {
      if (e.type != ContactEventType::Begin) continue;
      ASSERT_TRUE(e.a == s || e.b == s);
      const ObjectID other = e.a == s ? e.b : e.a;
      begins_wanted += other == w;
      begins_ignored += other == ig;
    }
  }
  EXPECT_EQ(begins_wanted, 1);
  EXPECT_EQ(begins_ignored, 0);
}

TEST(FilterWorld, RaycastAndOverlapWithAFilterSkipNonMatchingBodies) {
  World world;
  // Three static boxes along +x: category 1 (near), 2 (middle), 4 (far, which ignores queries
  // of category 8).
  BodyDesc d = box_desc({2.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Static);
  const ObjectID near_id = add(world, d);
  d.position.x = 4.0f;
  d.filter = filter(0x2, ~0u);
  const ObjectID mid_id = add(world, d);
  d.position.x = 6.0f;
  d.filter = filter(0x4, ~0u & ~0x8u);
  const ObjectID far_id = add(world, d);

  const Vec3 origin{0.0f, 0.0f, 0.0f};
  const Vec3 ray{10.0f, 0.0f, 0.0f};
  ASSERT_TRUE(world.raycast_closest(origin, ray).has_value());
  EXPECT_EQ(world.raycast_closest(origin, ray)->id, near_id);  // the old signature: everything
  const auto hit = world.raycast_closest(origin, ray, QueryFilter{0x1, 0x2 | 0x4});
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, mid_id);  // the near box neither hits nor blocks
  EXPECT_NEAR(hit->point.x, 3.5f, 1e-4f);
  std::vector<RayHit> hits;
  world.raycast_all(origin, ray, hits, QueryFilter{0x8, ~0u});  // the far box refuses category 8
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].id, near_id);
  EXPECT_EQ(hits[1].id, mid_id);
  world.raycast_all(origin, ray, hits);
  EXPECT_EQ(hits.size(), 3u);

  std::vector<ObjectID> found;
  const Aabb everything{{-10.0f, -10.0f, -10.0f}, {10.0f, 10.0f, 10.0f}};
  world.overlap_aabb(everything, found, QueryFilter{0x1, 0x4});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], far_id);
  world.overlap_aabb(everything, found);
  EXPECT_EQ(found.size(), 3u);
  // An awake body is filtered too (awake bodies are tested outside the grid).
  BodyDesc ball = sphere_desc({8.0f, 0.0f, 0.0f});
  ball.filter = filter(0x10, ~0u);
  const ObjectID ball_id = add(world, ball);
  world.overlap_aabb(everything, found, QueryFilter{0x1, 0x10});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], ball_id);
  world.raycast_all(origin, ray, hits, QueryFilter{0x1, 0x10});
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].id, ball_id);
}

TEST(FilterWorld, SetFilterOnTwoRestingBodiesEndsTheirContact) {
  World world;
  const ObjectID ground = add_ground(world);
  const ObjectID lo = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  const ObjectID up = add(world, box_desc({0.0f, 1.5f, 0.0f}));
  const int steps = test::step_until(world, kDt, 600, [&] { return state(world, up).sleeping; });
  ASSERT_LT(steps, 600) << "the stack did not fall asleep";
  ASSERT_TRUE(world.are_colliding(lo, up));

  EXPECT_EQ(world.set_filter(up, filter(0x2, 0x1)), Error::Ok);  // touches category 1 only; lo is 1
  EXPECT_EQ(world.set_filter(lo, filter(0x1, 0x1)), Error::Ok);  // ... and lo refuses category 2
  EXPECT_EQ(world.get_object(up)->filter, filter(0x2, 0x1));
  EXPECT_FALSE(state(world, up).sleeping);  // woken
  world.step(kDt);
  int ends = 0;
  for (const ContactEvent& e : world.contact_events()) {
    if (e.type == ContactEventType::End && ((e.a == lo && e.b == up) || (e.a == up && e.b == lo))) ++ends;
  }
  EXPECT_EQ(ends, 1);
  EXPECT_FALSE(world.are_colliding(lo, up));
  // The upper box now sinks through the lower one onto the ground.
  for (int i = 0; i < 180; ++i) world.step(kDt);
  EXPECT_NEAR(state(world, up).position.y, 0.5f, 0.02f);
  EXPECT_TRUE(world.are_colliding(ground, up));

  EXPECT_EQ(world.set_filter(ObjectID{}, Filter{}), Error::StaleId);
}

TEST(FilterWorld, SetFilterOnAStaticBodyWakesItsSleepersAndEndsTheContact) {
  World world;
  const ObjectID ground = add_ground(world);
  const ObjectID box = add(world, box_desc({0.0f, 0.5f, 0.0f}));
  const int steps = test::step_until(world, kDt, 600, [&] { return state(world, box).sleeping; });
  ASSERT_LT(steps, 600);
  ASSERT_TRUE(world.are_colliding(ground, box));
  EXPECT_EQ(world.set_filter(ground, filter(0x1, 0x0)), Error::Ok);  // the ground touches nothing
  EXPECT_FALSE(state(world, box).sleeping);
  world.step(kDt);
  EXPECT_FALSE(world.are_colliding(ground, box));
  for (int i = 0; i < 30; ++i) world.step(kDt);
  EXPECT_LT(state(world, box).position.y, 0.0f);  // falling through
}

TEST(FilterWorld, TheFilterIsSavedRestoredAndHashed) {
  World world;
  add_ground(world);
  BodyDesc d = box_desc({0.0f, 0.5f, 0.0f});
  d.filter = filter(0x6, 0xF0, -2);
  const ObjectID id = add(world, d);
  World other;
  add_ground(other);
  add(other, box_desc({0.0f, 0.5f, 0.0f}));
  EXPECT_NE(world.world_hash(), other.world_hash());  // the filter is part of the state

  std::vector<uint8_t> blob;
  world.save_state(blob);
  World restored;
  std::string error;
  ASSERT_TRUE(restored.restore_state(blob, &error)) << error;
  EXPECT_EQ(restored.get_object(id)->filter, filter(0x6, 0xF0, -2));
  EXPECT_EQ(restored.world_hash(), world.world_hash());
}

}  // namespace
}  // namespace impulse::physics
