// The demo scene's level geometry, beside the rest of the demo: a heightfield valley at x in
// [16, 32] with three rocks (convex hulls) dropped on its slopes, and a triangle-mesh building at
// x in [-24, -16] with a ramp and a flight of stairs up to a platform, a crate and a barrel on top
// and a ball that rolls down the ramp.
// Built in code like the rest of the demo, so the server needs no files at run time.
#include <cmath>
#include <vector>

#include "server/app/scene.h"
#include "server/physics/convex_hull.h"
#include "server/physics/heightfield.h"
#include "server/physics/triangle_mesh.h"

namespace impulse::server {

namespace {

/// Appends the quad a, b, c, d (counter-clockwise seen from its front) as two triangles.
void quad(std::vector<Vec3>& v, std::vector<uint32_t>& t, Vec3 a, Vec3 b, Vec3 c, Vec3 d) {
  const auto base = static_cast<uint32_t>(v.size());
  v.insert(v.end(), {a, b, c, d});
  t.insert(t.end(), {base, base + 1, base + 2, base, base + 2, base + 3});
}

/// An axis-aligned block from `lo` to `hi`, its five visible faces outward (no bottom: it stands
/// on the ground plane).
void block(std::vector<Vec3>& v, std::vector<uint32_t>& t, Vec3 lo, Vec3 hi) {
  const Vec3 p000{lo.x, lo.y, lo.z}, p100{hi.x, lo.y, lo.z}, p010{lo.x, hi.y, lo.z}, p110{hi.x, hi.y, lo.z};
  const Vec3 p001{lo.x, lo.y, hi.z}, p101{hi.x, lo.y, hi.z}, p011{lo.x, hi.y, hi.z}, p111{hi.x, hi.y, hi.z};
  quad(v, t, p010, p011, p111, p110);  // top (+y)
  quad(v, t, p000, p010, p110, p100);  // -z
  quad(v, t, p101, p111, p011, p001);  // +z
  quad(v, t, p001, p011, p010, p000);  // -x
  quad(v, t, p100, p110, p111, p101);  // +x
}

}  // namespace

void add_level_showcase(Scene* scene) {
  // --- The valley: 33 x 33 samples 0.5 m apart (16 m square) from (16, 0, -8), a bowl 5 cm above
  // the ground plane at its centre rising to 3 m at its rim.
  constexpr uint32_t kSamples = 33;
  constexpr float kSpacing = 0.5f;
  std::vector<float> heights(kSamples * kSamples);
  for (uint32_t j = 0; j < kSamples; ++j) {
    for (uint32_t i = 0; i < kSamples; ++i) {
      const float x = kSpacing * static_cast<float>(i) - 8.0f;
      const float z = kSpacing * static_cast<float>(j) - 8.0f;
      heights[j * kSamples + i] = std::min(3.0f, 0.05f + 0.06f * (x * x + z * z));
    }
  }
  physics::HeightFieldBuild field = physics::build_heightfield(kSamples, kSamples, {kSpacing, 0.0f, kSpacing}, heights);
  if (field.ok()) {
    scene->heightfields.push_back(std::make_shared<const physics::HeightField>(std::move(field.field)));
    physics::BodyDesc valley;
    valley.kind = physics::BodyKind::Static;
    valley.shape = physics::make_heightfield(*scene->heightfields.back());
    valley.position = {16.0f, 0.0f, -8.0f};
    valley.friction = 0.8f;
    add_named_body(scene, "valley", valley);
  }

  // Rocks: squashed, skewed octahedra plus 8 corner points, dropped on the slopes; they roll down.
  const Vec3 drops[] = {{20.0f, 4.0f, -4.0f}, {27.5f, 4.5f, 1.5f}, {22.0f, 5.0f, 4.5f}};
  for (int r = 0; r < 3; ++r) {
    const float s = 0.35f + 0.1f * static_cast<float>(r);
    std::vector<Vec3> points = {{s, 0, 0}, {-s, 0, 0}, {0, 0.7f * s, 0}, {0, -0.6f * s, 0}, {0, 0, 0.8f * s}, {0, 0, -0.9f * s}};
    for (int k = 0; k < 8; ++k) {
      const float sx = (k & 1) ? 0.55f : -0.5f, sy = (k & 2) ? 0.4f : -0.35f, sz = (k & 4) ? 0.5f : -0.6f;
      points.push_back(Vec3{sx * s * (1.0f + 0.1f * static_cast<float>(r)), sy * s, sz * s});
    }
    physics::HullBuild hull = physics::build_convex_hull(points);
    if (!hull.ok()) continue;
    auto shared = std::make_shared<const physics::ConvexHull>(std::move(hull.hull));
    physics::BodyDesc rock;
    rock.shape = physics::make_hull(*shared);
    rock.position = drops[r] + shared->origin;
    rock.orientation = shared->rotation;
    rock.mass = 1000.0f * shared->volume;  // [kg]: 1000 kg/m^3
    rock.friction = 0.7f;
    scene->hulls.push_back(std::move(shared));
    add_named_body(scene, "rock/" + std::to_string(r), rock);
  }

  // --- The building, one static mesh in the frame of (-24, 0, 2): a 4 m x 4 m platform 2 m high
  // at local x in [4, 8], z in [0, 4]; a ramp up its -x side (x from 0 to 4, z in [0, 2]); a
  // flight of 4 stairs down its +z side (0.4 m steps, 0.8 m deep).
  std::vector<Vec3> v;
  std::vector<uint32_t> t;
  block(v, t, {4.0f, 0.0f, 0.0f}, {8.0f, 2.0f, 4.0f});
  // Ramp: the slope, and its two sides (the high end meets the platform's -x face).
  quad(v, t, {0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 2.0f}, {4.0f, 2.0f, 2.0f}, {4.0f, 2.0f, 0.0f});
  v.insert(v.end(), {{0.0f, 0.0f, 0.0f}, {4.0f, 2.0f, 0.0f}, {4.0f, 0.0f, 0.0f}});
  t.insert(t.end(), {static_cast<uint32_t>(v.size() - 3), static_cast<uint32_t>(v.size() - 2), static_cast<uint32_t>(v.size() - 1)});
  v.insert(v.end(), {{0.0f, 0.0f, 2.0f}, {4.0f, 0.0f, 2.0f}, {4.0f, 2.0f, 2.0f}});
  t.insert(t.end(), {static_cast<uint32_t>(v.size() - 3), static_cast<uint32_t>(v.size() - 2), static_cast<uint32_t>(v.size() - 1)});
  // Stairs: step k is a block under its tread, 1.6 - 0.4 k m high, from z = 4 + 0.8 k.
  for (int k = 0; k < 4; ++k) {
    const float top = 1.6f - 0.4f * static_cast<float>(k);
    const float z0 = 4.0f + 0.8f * static_cast<float>(k);
    block(v, t, {5.0f, 0.0f, z0}, {7.0f, top, z0 + 0.8f});
  }
  physics::MeshBuild mesh = physics::build_triangle_mesh(v, t);
  if (mesh.ok()) {
    scene->meshes.push_back(std::make_shared<const physics::TriangleMesh>(std::move(mesh.mesh)));
    physics::BodyDesc building;
    building.kind = physics::BodyKind::Static;
    building.shape = physics::make_mesh(*scene->meshes.back());
    building.position = {-24.0f, 0.0f, 2.0f};
    add_named_body(scene, "building", building);
    // On the platform: a crate and a barrel standing, and a ball that rolls down the ramp.
    physics::BodyDesc crate;
    crate.shape = physics::make_box({0.4f, 0.4f, 0.4f});
    crate.position = {-18.0f, 2.41f, 3.0f};
    crate.mass = 10.0f;
    add_named_body(scene, "building/crate", crate);
    physics::BodyDesc barrel;
    barrel.shape = physics::make_cylinder(0.3f, 0.45f);
    barrel.position = {-17.0f, 2.46f, 5.0f};
    barrel.mass = 20.0f;
    add_named_body(scene, "building/barrel", barrel);
    physics::BodyDesc ball;
    ball.shape = physics::make_sphere(0.3f);
    ball.position = {-20.5f, 2.6f, 3.0f};
    ball.mass = 5.0f;
    add_named_body(scene, "building/ball", ball);
  }
}

}  // namespace impulse::server
