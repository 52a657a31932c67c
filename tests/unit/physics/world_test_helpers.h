// Small scene builders shared by the World unit tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

/// A static plane y = 0 (outward normal +Y), the half-space below it solid.
inline ObjectID add_ground_plane(World& world, float friction = 0.5f, float restitution = 0.0f) {
  BodyDesc d;
  d.kind = BodyKind::Static;
  d.shape = make_plane();
  d.friction = friction;
  d.restitution = restitution;
  const CreateResult r = world.create_object(d);
  EXPECT_EQ(r.error, Error::Ok);
  return r.id;
}

/// Principal moments of inertia [kg m^2], local axes, of a solid uniform sphere (2/5 m r^2) or box
/// (m (b^2 + c^2) / 3 per axis for half extents a, b, c): the closed forms the tests check the
/// world against. Other shapes are not needed by the tests and fail the test.
inline Vec3 local_inertia(const Shape& shape, float mass) {
  if (shape.kind == ShapeKind::Sphere) {
    const float i = 0.4f * mass * shape.radius * shape.radius;
    return {i, i, i};
  }
  if (shape.kind == ShapeKind::Box) {
    const Vec3 h = shape.half_extents;
    return Vec3{h.y * h.y + h.z * h.z, h.x * h.x + h.z * h.z, h.x * h.x + h.y * h.y} * (mass / 3.0f);
  }
  ADD_FAILURE() << "local_inertia: only spheres and boxes";
  return {};
}

/// World-frame inertia tensor R diag(I) R^T of a dynamic body [kg m^2].
inline Mat3 world_inertia(const BodyState& s) {
  return rotate_diagonal(to_mat3(s.orientation), local_inertia(s.shape, s.mass));
}

/// World-frame inverse inertia tensor R diag(I)^-1 R^T of a dynamic body [1/(kg m^2)].
inline Mat3 world_inverse_inertia(const BodyState& s) {
  const Vec3 i = local_inertia(s.shape, s.mass);
  return rotate_diagonal(to_mat3(s.orientation), {1.0f / i.x, 1.0f / i.y, 1.0f / i.z});
}

/// Angular momentum about the centre of mass, L = R I R^T w, world frame [kg m^2/s].
inline Vec3 angular_momentum(const BodyState& s) { return world_inertia(s) * s.angular_velocity; }

/// Kinetic energy 1/2 m v^2 + 1/2 w^T (R I R^T) w of a dynamic body [J], in double.
inline double kinetic_energy(const BodyState& s) {
  const Vec3 v = s.velocity;
  const Vec3 w = s.angular_velocity;
  const Vec3 l = world_inertia(s) * w;
  return 0.5 * s.mass * (double{v.x} * v.x + double{v.y} * v.y + double{v.z} * v.z) +
         0.5 * (double{w.x} * l.x + double{w.y} * l.y + double{w.z} * l.z);
}

/// Kinetic plus potential energy of every dynamic body [J], in double: sum of m g h + kinetic,
/// with h = -dot(position, gravity) / |gravity| (the height along -gravity) and g = |gravity|.
inline double total_energy(const World& world) {
  const Vec3 gravity = world.settings().gravity;
  double sum = 0;
  world.for_each_object([&](const BodyState& s) {
    if (s.kind != BodyKind::Dynamic) return;
    sum += -double{s.mass} * (double{gravity.x} * s.position.x + double{gravity.y} * s.position.y +
                              double{gravity.z} * s.position.z) +
           kinetic_energy(s);
  });
  return sum;
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

/// Saves `a`, restores the blob into a fresh World and checks that both hash alike, then steps
/// both `steps` times by `dt` [s] and checks the hashes after every step: a restored world steps on
/// bit-identically.
inline void expect_restore_steps_identically(World& a, int steps, float dt) {
  std::vector<uint8_t> bytes;
  a.save_state(bytes);
  World b;
  std::string error;
  ASSERT_TRUE(b.restore_state(bytes, &error)) << error;
  ASSERT_EQ(a.world_hash(), b.world_hash());
  for (int s = 0; s < steps; ++s) {
    a.step(dt);
    b.step(dt);
    ASSERT_EQ(a.world_hash(), b.world_hash()) << "step " << s;
  }
}

}  // namespace impulse::physics::test
