// Issue 16, attacks A and A2: a shape so small that its inverse inertia is infinite made a body
// NaN from its first step, and NaN spread through contacts into other bodies. Every way a body
// enters a World refuses it now (create_object, restore_state), and the step's guard removes a
// body whose state is not finite before any contact is built.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "server/physics/world.h"
#include "tests/unit/physics/world_test_helpers.h"
#include "tests/support/world_test_access.h"

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
    BodyDesc d = sphere_desc({0, 1, 0}, 0.5f, 1.0e-4f);  // 1e-4 kg: inside the density range for each
    d.shape = shape;
    EXPECT_EQ(world.create_object(d).error, Error::Ok) << static_cast<int>(shape.kind);
  }
  EXPECT_EQ(world.object_count(), 3u);
}

// The density range (settings.h, kMinDensity and kMaxDensity) at its edges, for each shape: a
// mass at either bound is accepted, one just outside is refused with the rule's text, and so is
// the 1e-37 kg of a 1 mm sphere whose inertia (4e-44 kg m^2) was subnormal, the first NaN route.
TEST(NanGuard, MassOutsideTheDensityRangeIsRefused) {
  World world;
  const float pi = 3.14159265f;
  struct Case {
    Shape shape;
    float volume;  // [m^3]
  };
  const Case cases[] = {
      {make_sphere(kMinExtent), (4.0f / 3.0f) * pi * kMinExtent * kMinExtent * kMinExtent},
      {make_sphere(0.5f), (4.0f / 3.0f) * pi * 0.125f},
      {make_box({0.5f, 0.25f, 2.0f}), 8.0f * 0.5f * 0.25f * 2.0f},
      {make_capsule(0.3f, 0.6f), pi * 0.09f * (1.2f + 0.4f)},
  };
  for (const Case& c : cases) {
    BodyDesc d = sphere_desc({0, 1, 0});
    d.shape = c.shape;
    for (const float density : {kMinDensity * 1.0001f, kMaxDensity * 0.9999f}) {
      d.mass = density * c.volume;
      EXPECT_EQ(world.create_object(d).error, Error::Ok) << static_cast<int>(c.shape.kind) << " " << density;
    }
    for (const float density : {kMinDensity * 0.999f, kMaxDensity * 1.001f}) {
      d.mass = density * c.volume;
      EXPECT_EQ(world.create_object(d).error, Error::InvalidArgument) << static_cast<int>(c.shape.kind);
      EXPECT_STREQ(check_body_desc(d, world.settings()),
                   "mass: the density (mass / the shape's volume) must be in [1e-3, 1e5] kg/m^3");
    }
  }
  BodyDesc subnormal = sphere_desc({0, 1, 0}, kMinExtent, 1.0e-37f);
  EXPECT_EQ(world.create_object(subnormal).error, Error::InvalidArgument);
  EXPECT_EQ(world.object_count(), 8u);
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

// The ground, a row of five resting boxes and a sixth resting on the middle one, settled 0.5 s.
struct RowWithTop {
  std::vector<ObjectID> row;
  ObjectID top;
};
RowWithTop add_row_with_a_box_on_top(World& world) {
  RowWithTop scene;
  add_ground(world);
  for (int i = 0; i < 5; ++i) scene.row.push_back(add(world, box_desc({static_cast<float>(i) * 1.01f, 0.5f, 0.0f})));
  scene.top = add(world, box_desc({2.02f, 1.5f, 0.0f}));
  for (int step = 0; step < 30; ++step) world.step(1.0f / 60.0f);
  return scene;
}

// The guard itself: a body whose velocity is NaN (only reachable through the test hook) is
// removed at the start of the next step, before contacts, and its partners stay finite.
TEST(NanGuard, StepRemovesANonFiniteBodyBeforeItTouchesAnything) {
  World world;
  const auto [boxes, bad] = add_row_with_a_box_on_top(world);
  ASSERT_TRUE(world.is_colliding(bad));
  std::vector<BodyState> before;
  for (const ObjectID id : boxes) before.push_back(*world.get_object(id));

  const float nan = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(physics::WorldTestAccess::set_velocity_unchecked(world, bad, {nan, 0.0f, 0.0f}));
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

// Attack A and its variants at the World level, swept: the lightest body the density rule admits,
// for each small shape, created lying through a victim's three resting boxes beside a 21-box
// pyramid, then pushed every step for 2 s at the bound of one push kind (torque, force, force at
// a point, impulse, velocity, angular velocity, along each axis). Before the rules a 1e-25 kg
// capsule spun by 1e9 N·m went non-finite and the guard deleted the victim's boxes and the whole
// pyramid. Now every push beyond the bound is refused, the attacker's body stays finite, nothing
// is removed or restored, and no victim or pyramid box moves by 1 cm.
TEST(NanGuard, TheLightestBodyPushedAtEveryBoundLeavesItsNeighboursUnmoved) {
  const float pi = 3.14159265f;
  struct Attacker {
    const char* name;
    Shape shape;
    float volume;
  };
  const Attacker attackers[] = {
      {"capsule 1 mm x 0.3 m", make_capsule(kMinExtent, 0.3f), pi * kMinExtent * kMinExtent * (0.6f + (4.0f / 3.0f) * kMinExtent)},
      {"capsule 1 cm x 1.5 m", make_capsule(0.01f, 1.5f), pi * 1e-4f * (3.0f + (4.0f / 3.0f) * 0.01f)},
      {"sphere 1 mm", make_sphere(kMinExtent), (4.0f / 3.0f) * pi * kMinExtent * kMinExtent * kMinExtent},
      {"box 1 mm", make_box({kMinExtent, kMinExtent, kMinExtent}), 8.0f * kMinExtent * kMinExtent * kMinExtent},
  };
  enum Push { Torque, Force, ForceAtPoint, Impulse, Velocity, AngularVelocity, PushCount };
  const WorldSettings settings;
  int runs = 0;
  float worst = 0;
  for (const Attacker& at : attackers) {
    for (int push = 0; push < PushCount; ++push) {
      for (int axis = 0; axis < 3; ++axis) {
        World world;
        add_ground(world);
        std::vector<ObjectID> victims;
        for (int i = 0; i < 3; ++i) victims.push_back(add(world, box_desc({static_cast<float>(i) * 1.1f, 0.5f, 0.0f})));
        for (int row = 0; row < 6; ++row) {
          for (int i = 0; i < 6 - row; ++i) {
            victims.push_back(add(world, box_desc({5.0f + static_cast<float>(i) + 0.5f * static_cast<float>(row),
                                                   0.5f + static_cast<float>(row), 0.0f})));
          }
        }
        for (int step = 0; step < 120; ++step) world.step(1.0f / 60.0f);
        std::vector<Vec3> before;
        for (const ObjectID id : victims) before.push_back(state(world, id).position);
        BodyDesc d = sphere_desc({1.1f, 0.5f, 0.0f});
        d.shape = at.shape;
        d.mass = kMinDensity * at.volume * 1.001f;
        d.orientation = quat_from_axis_angle({0, 0, 1}, pi / 2);  // a capsule lies along x, through the boxes
        const ObjectID attacker = add(world, d);
        Vec3 dir{};
        (axis == 0 ? dir.x : axis == 1 ? dir.y : dir.z) = 1.0f;
        const BodyState a0 = state(world, attacker);
        const float mass = d.mass;
        for (int step = 0; step < 120; ++step) {
          const BodyState a = state(world, attacker);
          switch (push) {
            case Torque:  // the wire's largest, then halved until the push rule accepts it
              for (float t = 1.0e9f; t > 0 && world.apply_torque(attacker, dir * t) != Error::Ok; t *= 0.5f) {}
              break;
            case Force:
              for (float f = 1.0e9f; f > 0 && world.apply_force(attacker, dir * f) != Error::Ok; f *= 0.5f) {}
              break;
            case ForceAtPoint:
              for (float f = 1.0e9f;
                   f > 0 && world.apply_force(attacker, dir * f, a.position + Vec3{0.0f, 0.0f, 0.3f}) != Error::Ok;
                   f *= 0.5f) {}
              break;
            case Impulse:
              world.apply_impulse(attacker, dir * (0.999f * settings.max_speed * mass) - a.velocity * mass);
              break;
            case Velocity: world.set_velocity(attacker, dir * (step % 2 == 0 ? 1.0f : -1.0f) * settings.max_speed); break;
            case AngularVelocity: world.set_angular_velocity(attacker, dir * settings.max_angular_speed); break;
          }
          world.step(1.0f / 60.0f);
          ASSERT_TRUE(world.removed_non_finite().empty()) << at.name << " push " << push << " axis " << axis;
          ASSERT_TRUE(world.restored_non_finite().empty()) << at.name << " push " << push << " axis " << axis;
        }
        EXPECT_TRUE(finite_state(state(world, attacker))) << at.name;
        EXPECT_NE(state(world, attacker).position, a0.position) << at.name << " push " << push << ": it was pushed";
        for (size_t i = 0; i < victims.size(); ++i) {
          const float moved = length(state(world, victims[i]).position - before[i]);
          worst = std::max(worst, moved);
          EXPECT_LT(moved, 0.01f) << at.name << " push " << push << " axis " << axis << " box " << i;
        }
        ++runs;
      }
    }
  }
  std::printf("[ measured ] %d attacks: worst victim displacement %.2e m\n", runs, worst);
}

// The net behind the rules: a contact group whose solve ends non-finite (injected: no validated
// input reaches it) is put back as it was at the start of the step. The faulty body stops where
// it was, its partners keep their poses and velocities, nothing is removed, nothing moves, every
// body stays finite, and the group's contacts forget their impulses so the fault is not carried
// into the next step by warm starting. Bodies of another group step on.
TEST(NanGuard, AGroupWhoseSolveIsNotFiniteIsPutBackAndNothingIsRemoved) {
  World world;
  const auto [boxes, bad] = add_row_with_a_box_on_top(world);
  const ObjectID faller = world.create_object(sphere_desc({20.0f, 5.0f, 0.0f})).id;  // another group
  world.step(1.0f / 60.0f);
  ASSERT_TRUE(world.is_colliding(bad));
  ASSERT_TRUE(physics::WorldTestAccess::set_velocity_unchecked(world, bad, {0.5f, 0.0f, 0.0f}));  // so its group is awake
  std::vector<BodyState> before;
  for (const ObjectID id : boxes) before.push_back(*world.get_object(id));
  const BodyState bad_before = *world.get_object(bad);
  const BodyState faller_before = *world.get_object(faller);
  const uint32_t count = world.object_count();

  ASSERT_TRUE(physics::WorldTestAccess::inject_non_finite_solve(world, bad));
  world.step(1.0f / 60.0f);
  ASSERT_EQ(world.restored_non_finite().size(), 1u);
  EXPECT_EQ(world.restored_non_finite()[0], bad);
  EXPECT_EQ(world.restored_non_finite_total(), 1u);
  EXPECT_TRUE(world.removed_non_finite().empty());
  EXPECT_EQ(world.object_count(), count);
  const BodyState b = *world.get_object(bad);
  EXPECT_EQ(b.position, bad_before.position);
  EXPECT_EQ(b.velocity, Vec3{});
  for (size_t i = 0; i < boxes.size(); ++i) {
    const BodyState s = *world.get_object(boxes[i]);
    EXPECT_EQ(s.position, before[i].position) << i;
    EXPECT_EQ(s.orientation, before[i].orientation) << i;
  }
  EXPECT_LT(world.get_object(faller)->position.y, faller_before.position.y) << "another group steps on";
  for (const Contact& c : world.get_collisions()) EXPECT_TRUE(std::isfinite(c.depth) && is_finite(c.point));
  // And the world goes on: a second of steps, everything finite, the row where it was.
  for (int step = 0; step < 60; ++step) world.step(1.0f / 60.0f);
  EXPECT_TRUE(world.restored_non_finite().empty()) << "cleared by the next step";
  EXPECT_EQ(world.object_count(), count);
  world.for_each_object([&](const BodyState& s) { EXPECT_TRUE(finite_state(s)); });
  for (size_t i = 0; i < boxes.size(); ++i) {
    EXPECT_LT(length(world.get_object(boxes[i])->position - before[i].position), 0.01f) << i;
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

