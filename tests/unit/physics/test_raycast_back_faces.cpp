// Raycasts with back faces (issue 17, item 5), after Jolt's RayCastSettings: by default convex
// shapes are solid (mTreatConvexAsSolid = true) and a ray starting inside hits at fraction 0,
// normal against the ray; with back faces (mTreatConvexAsSolid = false, mBackFaceModeConvex =
// CollideWithBackFaces) it hits where it leaves the shape, with the outward normal there. Hit
// distances are closed forms per shape.
#include <gtest/gtest.h>

#include <cmath>

#include "server/physics/raycast.h"
#include "server/physics/world.h"
#include "world_test_helpers.h"

namespace impulse::physics {
namespace {

constexpr float kTol = 1.0e-5f;
constexpr Transform kIdentity{};

void expect_vec_near(Vec3 got, Vec3 want, const char* what) {
  EXPECT_NEAR(got.x, want.x, kTol) << what;
  EXPECT_NEAR(got.y, want.y, kTol) << what;
  EXPECT_NEAR(got.z, want.z, kTol) << what;
}

/// With back faces: a hit at `fraction` with `normal`. Without: the solid hit at 0, normal -dir.
void expect_exit(const Shape& shape, const Transform& tf, Vec3 origin, Vec3 translation, float fraction, Vec3 normal) {
  ShapeRayHit hit;
  ASSERT_TRUE(raycast_shape(shape, tf, origin, translation, 1.0f, hit, /*back_faces=*/true));
  EXPECT_NEAR(hit.fraction, fraction, kTol);
  expect_vec_near(hit.point, origin + translation * fraction, "point");
  expect_vec_near(hit.normal, normal, "normal");
  EXPECT_GE(dot(hit.normal, translation), 0.0f) << "a back face's normal points along the ray";
  ShapeRayHit solid;
  ASSERT_TRUE(raycast_shape(shape, tf, origin, translation, 1.0f, solid));
  EXPECT_EQ(solid.fraction, 0.0f);
  expect_vec_near(solid.normal, -translation * (1.0f / length(translation)), "solid normal");
}

TEST(RaycastBackFaces, Sphere) {
  const Shape sphere = make_sphere(1.0f);
  // From the centre: exits at r = 1 of 10.
  expect_exit(sphere, kIdentity, {0, 0, 0}, {10, 0, 0}, 0.1f, {1, 0, 0});
  // Off centre by 0.6: exits at x = sqrt(1 - 0.36) = 0.8, normal (0.8, 0.6, 0).
  expect_exit(sphere, kIdentity, {0, 0.6f, 0}, {10, 0, 0}, 0.08f, {0.8f, 0.6f, 0});
  // Moving back through the centre: from x = 0.5 along -x exits at x = -1, 1.5 m on.
  expect_exit(sphere, Transform{{3, 0, 0}, {}}, {3.5f, 0, 0}, {-3, 0, 0}, 0.5f, {-1, 0, 0});
  // On the surface moving outward: the exit is where it starts.
  expect_exit(sphere, kIdentity, {0, 1, 0}, {0, 2, 0}, 0.0f, {0, 1, 0});
}

TEST(RaycastBackFaces, Box) {
  const Shape box = make_box({1.0f, 2.0f, 3.0f});
  expect_exit(box, kIdentity, {0.5f, 0, 0}, {0, 10, 0}, 0.2f, {0, 1, 0});
  expect_exit(box, kIdentity, {0.5f, 0, 0}, {0, 0, -10}, 0.3f, {0, 0, -1});
  // Diagonal (1, 1, 0) from the centre: the x face (1 m) comes before the y face (2 m).
  expect_exit(box, kIdentity, {0, 0, 0}, {4, 4, 0}, 0.25f, {1, 0, 0});
  // Turned 90 degrees about z: local +y (half extent 2) now faces -x.
  const Transform turned{{10, 0, 0}, quat_from_axis_angle({0, 0, 1}, 3.14159265f / 2.0f)};
  ShapeRayHit hit;
  ASSERT_TRUE(raycast_shape(box, turned, {10, 0, 0}, {-10, 0, 0}, 1.0f, hit, true));
  EXPECT_NEAR(hit.fraction, 0.2f, kTol);
  expect_vec_near(hit.normal, {-1, 0, 0}, "turned normal");
}

TEST(RaycastBackFaces, Capsule) {
  const Shape capsule = make_capsule(0.5f, 1.0f);  // core from y = -1 to 1, radius 0.5
  // Along the axis: leaves through the top cap at y = 1.5.
  expect_exit(capsule, kIdentity, {0, 0, 0}, {0, 10, 0}, 0.15f, {0, 1, 0});
  // Across the side: x = 0.5.
  expect_exit(capsule, kIdentity, {0, 0.3f, 0}, {10, 0, 0}, 0.05f, {1, 0, 0});
  // Inside the top cap, off axis by 0.3: leaves at y = 1 + sqrt(0.25 - 0.09) = 1.4, normal (0.6, 0.8).
  expect_exit(capsule, kIdentity, {0.3f, 1.2f, 0}, {0, 10, 0}, 0.02f, {0.6f, 0.8f, 0});
  // From the bottom cap up the whole length: exits at y = 1.5, 2.7 m on.
  expect_exit(capsule, kIdentity, {0, -1.2f, 0}, {0, 5.4f, 0}, 0.5f, {0, 1, 0});
}

TEST(RaycastBackFaces, PlaneExitsOnlyRising) {
  const Shape plane = make_plane();
  expect_exit(plane, kIdentity, {0, -2, 0}, {0, 10, 0}, 0.2f, {0, 1, 0});
  ShapeRayHit hit;
  EXPECT_FALSE(raycast_shape(plane, kIdentity, {0, -2, 0}, {0, -10, 0}, 1.0f, hit, true));
  EXPECT_FALSE(raycast_shape(plane, kIdentity, {0, -2, 0}, {10, 0, 0}, 1.0f, hit, true));
}

// A segment that ends inside has no exit to report; origins outside are not affected.
TEST(RaycastBackFaces, EndingInsideIsNoHitAndOutsideOriginsAreUnchanged) {
  ShapeRayHit hit;
  EXPECT_FALSE(raycast_shape(make_sphere(1.0f), kIdentity, {0, 0, 0}, {0.5f, 0, 0}, 1.0f, hit, true));
  EXPECT_FALSE(raycast_shape(make_box({1, 1, 1}), kIdentity, {0, 0, 0}, {0, 0.9f, 0}, 1.0f, hit, true));
  EXPECT_FALSE(raycast_shape(make_capsule(0.5f, 1.0f), kIdentity, {0, 0, 0}, {0, 1.4f, 0}, 1.0f, hit, true));
  // max_fraction bounds the exit too.
  EXPECT_FALSE(raycast_shape(make_sphere(1.0f), kIdentity, {0, 0, 0}, {10, 0, 0}, 0.09f, hit, true));
  for (const Shape& shape : {make_sphere(1.0f), make_box({1, 1, 1}), make_capsule(1.0f, 0.0f)}) {
    ShapeRayHit front;
    ShapeRayHit back;
    ASSERT_TRUE(raycast_shape(shape, kIdentity, {-5, 0, 0}, {10, 0, 0}, 1.0f, front, false));
    ASSERT_TRUE(raycast_shape(shape, kIdentity, {-5, 0, 0}, {10, 0, 0}, 1.0f, back, true));
    EXPECT_NEAR(front.fraction, 0.4f, kTol);
    EXPECT_EQ(back.fraction, front.fraction);
    EXPECT_EQ(back.normal, front.normal);
  }
}

// In the World: a ray from inside a big sphere reports the sphere's exit, so a box beyond that
// exit is not the closest; a box inside the sphere before the exit is.
TEST(RaycastBackFaces, WorldClosestAndAll) {
  WorldSettings settings;
  settings.gravity = {};
  World world(settings);
  BodyDesc big;
  big.kind = BodyKind::Static;
  big.shape = make_sphere(2.0f);
  const ObjectID shell = test::add(world, big);
  const ObjectID far_box = test::add(world, test::box_desc({4.0f, 0, 0}, {0.5f, 0.5f, 0.5f}, 1.0f, BodyKind::Static));

  auto solid = world.raycast_closest({0, 0, 0}, {10, 0, 0});
  ASSERT_TRUE(solid.has_value());
  EXPECT_EQ(solid->id, shell);
  EXPECT_EQ(solid->fraction, 0.0f);

  auto hollow = world.raycast_closest({0, 0, 0}, {10, 0, 0}, std::nullopt, /*back_faces=*/true);
  ASSERT_TRUE(hollow.has_value());
  EXPECT_EQ(hollow->id, shell);
  EXPECT_NEAR(hollow->fraction, 0.2f, kTol);
  expect_vec_near(hollow->normal, {1, 0, 0}, "exit normal");

  std::vector<RayHit> all;
  world.raycast_all({0, 0, 0}, {10, 0, 0}, all, std::nullopt, true);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, shell);
  EXPECT_EQ(all[1].id, far_box);
  EXPECT_NEAR(all[1].fraction, 0.35f, kTol);

  const ObjectID inner = test::add(world, test::box_desc({1.0f, 0, 0}, {0.25f, 0.25f, 0.25f}, 1.0f, BodyKind::Static));
  hollow = world.raycast_closest({0, 0, 0}, {10, 0, 0}, std::nullopt, true);
  ASSERT_TRUE(hollow.has_value());
  EXPECT_EQ(hollow->id, inner);
  EXPECT_NEAR(hollow->fraction, 0.075f, kTol);
}

}  // namespace
}  // namespace impulse::physics
