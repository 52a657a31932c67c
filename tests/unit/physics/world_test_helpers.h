// Small scene builders shared by the World unit tests.
#pragma once

#include <gtest/gtest.h>

#include "server/physics/world.h"

namespace impulse::physics::test {

/// A static ground slab whose top face is the plane y = 0, 200 m x 200 m.
inline ObjectID add_ground(World& world, float restitution = 0.0f) {
  BodyDesc d;
  d.kind = BodyKind::Static;
  d.shape = make_box({100.0f, 1.0f, 100.0f});
  d.position = {0.0f, -1.0f, 0.0f};
  d.restitution = restitution;
  const CreateResult r = world.create_object(d);
  EXPECT_EQ(r.error, Error::Ok);
  return r.id;
}

inline BodyDesc sphere_desc(Vec3 position, float radius = 0.5f, float mass = 1.0f, float restitution = 0.0f) {
  BodyDesc d;
  d.kind = BodyKind::Dynamic;
  d.shape = make_sphere(radius);
  d.position = position;
  d.mass = mass;
  d.restitution = restitution;
  return d;
}

inline BodyDesc box_desc(Vec3 position, Vec3 half_extents = {0.5f, 0.5f, 0.5f}, float mass = 1.0f,
                         BodyKind kind = BodyKind::Dynamic) {
  BodyDesc d;
  d.kind = kind;
  d.shape = make_box(half_extents);
  d.position = position;
  d.mass = mass;
  return d;
}

inline ObjectID add(World& world, const BodyDesc& desc) {
  const CreateResult r = world.create_object(desc);
  EXPECT_EQ(r.error, Error::Ok);
  return r.id;
}

inline BodyState state(const World& world, ObjectID id) {
  const auto s = world.get_object(id);
  EXPECT_TRUE(s.has_value());
  return s.value_or(BodyState{});
}

/// Steps until `done()` or `max_steps`; returns the steps taken.
template <class Done>
int step_until(World& world, float dt, int max_steps, Done&& done) {
  for (int i = 0; i < max_steps; ++i) {
    if (done()) return i;
    world.step(dt);
  }
  return max_steps;
}

}  // namespace impulse::physics::test
