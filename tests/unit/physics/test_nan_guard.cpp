// Issue 16, attacks A and A2: a shape so small that its inverse inertia is infinite made a body
// NaN from its first step, and NaN spread through contacts into other bodies. Every way a body
// enters a World refuses it now (create_object, restore_state), and the step's guard removes a
// body whose state is not finite before any contact is built.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "server/physics/world.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics::test {
namespace {

bool finite_state(const BodyState& b) {
  return is_finite(b.position) && is_finite(b.orientation) && is_finite(b.velocity) && is_finite(b.angular_velocity);
}

TEST(NanGuard, ShapesBelowTheMinimumExtentAreRefused) {
  World world;
  for (const Shape& shape : {make_sphere(5.0e-20f), make_box({1.0f, 5.0e-20f, 1.0f}), make_capsule(5.0e-20f, 1.0f),
                             make_sphere(0.999e-3f)}) {
    BodyDesc d = sphere_desc({0, 1, 0});
    d.shape = shape;
    EXPECT_EQ(world.create_object(d).error, Error::InvalidArgument) << static_cast<int>(shape.kind);
    EXPECT_NE(check_body_desc(d, world.settings()), nullptr);
    d.kind = BodyKind::Static;  // the extent rule holds for every kind
    EXPECT_EQ(world.create_object(d).error, Error::InvalidArgument);
  }
  for (const Shape& shape : {make_sphere(kMinExtent), make_box({kMinExtent, kMinExtent, kMinExtent}),
                             make_capsule(kMinExtent, 0.0f)}) {
    BodyDesc d = sphere_desc({0, 1, 0});
    d.shape = shape;
    EXPECT_EQ(world.create_object(d).error, Error::Ok) << static_cast<int>(shape.kind);
  }
  EXPECT_EQ(world.object_count(), 3u);
}

TEST(NanGuard, MassTooSmallForItsInertiaIsRefused) {
  World world;
  // 1 mm and 1e-37 kg: 1 / mass is finite, but 2/5 m r^2 = 4e-44 is subnormal and 1 / it is not.
  BodyDesc d = sphere_desc({0, 1, 0}, kMinExtent, 1.0e-37f);
  ASSERT_TRUE(std::isfinite(1.0f / d.mass));
  EXPECT_EQ(world.create_object(d).error, Error::InvalidArgument);
  EXPECT_STREQ(check_body_desc(d, world.settings()),
               "mass: too small for the shape: the inverse mass or inertia would not be finite");
  EXPECT_EQ(world.object_count(), 0u);
}

// Attack A2 at the World level: the smallest and lightest capsule the rules accept, created
// overlapping five boxes, leaves them finite (the capsule is pushed out; nothing becomes NaN).
TEST(NanGuard, SmallestAcceptedCapsuleInsideFiveBoxesLeavesThemFinite) {
  World world;
  add_ground(world);
  std::vector<ObjectID> boxes;
  for (int i = 0; i < 5; ++i) {
    boxes.push_back(world.create_object(box_desc({static_cast<float>(i) * 0.6f, 0.5f, 0.0f})).id);
  }
  // The lightest mass with a finite inverse inertia at this size, found by halving.
  float mass = 1.0f;
  BodyDesc capsule = sphere_desc({1.2f, 0.5f, 0.0f});
  capsule.shape = make_capsule(kMinExtent, 1.5f);
  capsule.orientation = quat_from_axis_angle({0, 0, 1}, 1.5707964f);  // lying along x through all five
  for (;;) {
    capsule.mass = mass * 0.5f;
    if (check_body_desc(capsule, world.settings()) != nullptr) break;
    mass *= 0.5f;
  }
  capsule.mass = mass;
  ASSERT_EQ(world.create_object(capsule).error, Error::Ok) << mass;
  for (int step = 0; step < 300; ++step) {
    world.step(1.0f / 60.0f);
    for (const ObjectID id : boxes) {
      const auto b = world.get_object(id);
      ASSERT_TRUE(b.has_value());
      ASSERT_TRUE(finite_state(*b)) << "step " << step;
    }
  }
  EXPECT_EQ(world.removed_non_finite_total(), 0u);
}

// The guard itself: a body whose velocity is NaN (only reachable through the test hook) is
// removed at the start of the next step, before contacts, and its partners stay finite.
TEST(NanGuard, StepRemovesANonFiniteBodyBeforeItTouchesAnything) {
  World world;
  add_ground(world);
  std::vector<ObjectID> boxes;
  for (int i = 0; i < 5; ++i) {
    boxes.push_back(world.create_object(box_desc({static_cast<float>(i) * 1.01f, 0.5f, 0.0f})).id);
  }
  const ObjectID bad = world.create_object(box_desc({2.02f, 1.5f, 0.0f})).id;  // resting on the middle box
  for (int step = 0; step < 30; ++step) world.step(1.0f / 60.0f);
  ASSERT_TRUE(world.is_colliding(bad));
  std::vector<BodyState> before;
  for (const ObjectID id : boxes) before.push_back(*world.get_object(id));

  const float nan = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(world.set_velocity_unchecked_for_test(bad, {nan, 0.0f, 0.0f}));
  world.step(1.0f / 60.0f);
  ASSERT_EQ(world.removed_non_finite().size(), 1u);
  EXPECT_EQ(world.removed_non_finite()[0], bad);
  EXPECT_EQ(world.removed_non_finite_total(), 1u);
  EXPECT_FALSE(world.is_valid(bad));
  bool ended = false;
  for (const ContactEvent& e : world.contact_events()) {
    if ((e.a == bad || e.b == bad) && e.type == ContactEventType::End) ended = true;
  }
  EXPECT_TRUE(ended) << "its contacts end with this step's events";
  for (int step = 0; step < 60; ++step) world.step(1.0f / 60.0f);
  EXPECT_TRUE(world.removed_non_finite().empty()) << "cleared by the next step";
  EXPECT_EQ(world.removed_non_finite_total(), 1u);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const BodyState b = *world.get_object(boxes[i]);
    EXPECT_TRUE(finite_state(b));
    EXPECT_LT(length(b.position - before[i].position), 0.05f) << i;
  }
}

// Restore applies the same shape rules: a saved world whose sphere radius is patched below 1 mm
// (checksum recomputed, so the shape check is what refuses it) is refused, the world unchanged.
TEST(NanGuard, RestoreRefusesShapesBelowTheMinimumExtent) {
  World world;
  world.create_object(sphere_desc({0, 1, 0}, 0.25f));
  std::vector<uint8_t> blob;
  world.save_state(blob);
  World check;
  std::string error;
  ASSERT_TRUE(check.restore_state(blob, &error)) << error;
  // The radius and the sphere's half extents all hold 0.25f (the body's extent too): patch every
  // occurrence, so the shape stays self-consistent and only the minimum-extent rule can refuse it.
  const float radius = 0.25f, tiny = 5.0e-20f;
  size_t patched = 0;
  for (size_t i = 0; i + 4 <= blob.size() - 8; ++i) {
    if (std::memcmp(&blob[i], &radius, 4) == 0) {
      std::memcpy(&blob[i], &tiny, 4);
      ++patched;
    }
  }
  ASSERT_GE(patched, 4u);
  const uint64_t h = XXH64(blob.data(), blob.size() - 8, 0);
  for (int k = 0; k < 8; ++k) blob[blob.size() - 8 + static_cast<size_t>(k)] = static_cast<uint8_t>(h >> (8 * k));
  World target;
  target.create_object(sphere_desc({5, 1, 0}));
  const uint64_t hash = target.world_hash();
  EXPECT_FALSE(target.restore_state(blob, &error));
  EXPECT_NE(error.find("shape"), std::string::npos) << error;
  EXPECT_EQ(target.world_hash(), hash);
}

}  // namespace
}  // namespace impulse::physics::test
