// Heightfields: building and refusals, quantisation, memory, active edges against the same surface
// built as a mesh, raycasts against brute force, a cube sliding over cells (Jolt's
// DiscreteCubeSlideHeightField), a bowl with holes keeping 1000 spheres for 60 s, continuous
// collision, and saved states.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "server/physics/heightfield.h"
#include "server/physics/narrowphase.h"
#include "server/physics/world.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::state;

constexpr float kDt = 1.0f / 60.0f;

/// count x count samples of y(x, z) at `spacing` [m].
template <class Height>
std::vector<float> samples(uint32_t count, float spacing, Height y) {
  std::vector<float> out;
  for (uint32_t j = 0; j < count; ++j) {
    for (uint32_t i = 0; i < count; ++i) out.push_back(y(spacing * static_cast<float>(i), spacing * static_cast<float>(j)));
  }
  return out;
}

HeightField built(uint32_t count, float spacing, const std::vector<float>& heights) {
  HeightFieldBuild b = build_heightfield(count, count, {spacing, 0.0f, spacing}, heights);
  EXPECT_TRUE(b.ok()) << b.error;
  return std::move(b.field);
}

/// A world with the field as a static body placed at `at`.
struct FieldWorld {
  World world;
  const HeightField* field = nullptr;
  ObjectID ground;
  FieldWorld(const HeightField& f, Vec3 at, float friction, WorldSettings settings = {}) : world(settings) {
    std::string error;
    field = world.add_heightfield(f, &error);
    EXPECT_NE(field, nullptr) << error;
    BodyDesc d;
    d.kind = BodyKind::Static;
    d.shape = make_heightfield(*field);
    d.position = at;
    d.friction = friction;
    ground = add(world, d);
  }
};

TEST(HeightField, BuildsQuantisesAndRefusesBadInput) {
  const std::vector<float> h = samples(65, 0.5f, [](float x, float z) { return 3.0f * std::sin(0.2f * x) + 0.1f * z; });
  const HeightFieldBuild b = build_heightfield(65, 65, {0.5f, 0.0f, 0.5f}, h);
  ASSERT_TRUE(b.ok()) << b.error;
  const HeightField& f = b.field;
  EXPECT_EQ(f.memory_bytes(), 65u * 65u * 2u);  // 2 bytes a sample, no materials
  const float lo = *std::min_element(h.begin(), h.end());
  const float hi = *std::max_element(h.begin(), h.end());
  float worst = 0.0f;
  for (uint32_t j = 0; j < 65; ++j) {
    for (uint32_t i = 0; i < 65; ++i) worst = std::max(worst, std::fabs(f.sample(i, j).y - h[j * 65 + i]));
  }
  EXPECT_LE(worst, (hi - lo) / 131070.0f * 1.01f + 1.0e-6f);
  EXPECT_EQ(check_heightfield(const_cast<HeightField&>(f)), "");

  auto error_of = [](uint32_t nx, uint32_t nz, Vec3 spacing, const std::vector<float>& hs, std::vector<uint8_t> m = {}) {
    return build_heightfield(nx, nz, spacing, hs, m).error;
  };
  const std::vector<float> flat(16, 0.0f);
  EXPECT_NE(error_of(1, 16, {1, 0, 1}, flat).find("each side"), std::string::npos);
  EXPECT_NE(error_of(4, 5, {1, 0, 1}, flat).find("height count"), std::string::npos);
  EXPECT_NE(error_of(4, 4, {0, 0, 1}, flat).find("spacing"), std::string::npos);
  EXPECT_NE(error_of(4, 4, {1, 0, 1}, flat, {1, 2}).find("material count"), std::string::npos);
  std::vector<float> bad = flat;
  bad[5] = INFINITY;
  EXPECT_NE(error_of(4, 4, {1, 0, 1}, bad).find("height 5 (sample 1, 1)"), std::string::npos);
  std::vector<float> holes(16, NAN);
  EXPECT_NE(error_of(4, 4, {1, 0, 1}, holes).find("every sample is a hole"), std::string::npos);
  holes[0] = holes[5] = holes[10] = 0.0f;  // solid samples but no cell with four solid corners
  EXPECT_NE(error_of(4, 4, {1, 0, 1}, holes).find("no cell"), std::string::npos);
  EXPECT_NE(error_of(kMaxHeightFieldSide + 1, 2, {1, 0, 1}, flat).find("each side"), std::string::npos);
}

TEST(HeightField, ActiveEdgesMatchTheSameSurfaceBuiltAsAMesh) {
  // Rolling ground with a fold and two holes: each heightfield triangle's active edges must be
  // those build_triangle_mesh finds for the same triangle.
  std::vector<float> h = samples(17, 0.5f, [](float x, float z) {
    return (x > 4.0f ? 0.4f * (x - 4.0f) : 0.0f) + 0.05f * std::sin(3.0f * z);
  });
  h[5 * 17 + 5] = NAN;
  h[12 * 17 + 3] = NAN;
  const HeightField f = built(17, 0.5f, h);
  std::vector<Vec3> vertices;
  std::vector<uint32_t> indices;
  std::vector<MeshTriangle> tris;
  for (uint32_t j = 0; j + 1 < 17; ++j) {
    for (uint32_t i = 0; i + 1 < 17; ++i) {
      if (!f.cell(i, j)) continue;
      for (uint32_t t = 0; t < 2; ++t) {
        const MeshTriangle tri = f.triangle(i, j, t);
        tris.push_back(tri);
        for (const Vec3& v : tri.v) {
          indices.push_back(static_cast<uint32_t>(vertices.size()));
          vertices.push_back(v);
        }
      }
    }
  }
  const MeshBuild mb = build_triangle_mesh(vertices, indices);
  ASSERT_TRUE(mb.ok()) << mb.error;
  // Edge flags keyed by (from, to) positions.
  using Key = std::tuple<float, float, float, float, float, float>;
  std::map<Key, int> mesh_flags;
  for (uint32_t t = 0; t < mb.mesh.triangle_count(); ++t) {
    const MeshTriangle tri = mb.mesh.triangle(t);
    for (int k = 0; k < 3; ++k) {
      const Vec3 a = tri.v[k];
      const Vec3 b = tri.v[(k + 1) % 3];
      mesh_flags[{a.x, a.y, a.z, b.x, b.y, b.z}] = tri.active >> k & 1;
    }
  }
  int inactive = 0;
  for (const MeshTriangle& tri : tris) {
    for (int k = 0; k < 3; ++k) {
      const Vec3 a = tri.v[k];
      const Vec3 b = tri.v[(k + 1) % 3];
      const auto it = mesh_flags.find({a.x, a.y, a.z, b.x, b.y, b.z});
      ASSERT_NE(it, mesh_flags.end());
      EXPECT_EQ(active_edges(tri) >> k & 1, it->second) << "triangle " << tri.index << " edge " << k;
      inactive += (active_edges(tri) >> k & 1) == 0;
    }
  }
  EXPECT_GT(inactive, 500);  // most seams are flat or concave
}

TEST(HeightField, RaycastsAgreeWithBruteForce) {
  const HeightField f = built(129, 0.5f, samples(129, 0.5f, [](float x, float z) {
    return 2.0f * std::sin(0.3f * x) * std::cos(0.2f * z) + 0.3f * std::sin(1.7f * x + z);
  }));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> pos(-4.0f, 68.0f);
  std::uniform_real_distribution<float> up(-3.0f, 6.0f);
  std::uniform_real_distribution<float> dir(-1.0f, 1.0f);
  int hits = 0;
  for (int r = 0; r < 4000; ++r) {
    const Vec3 o{pos(rng), up(rng), pos(rng)};
    Vec3 d = Vec3{dir(rng), dir(rng) - 0.4f, dir(rng)} * 15.0f;
    if (r % 50 == 0) d = {0.0f, -10.0f, 0.0f};  // straight down
    MeshRayHit hit;
    const bool got = raycast_heightfield(f, o, d, 1.0f, hit);
    bool want = false;
    float best = 1.0f;
    const Aabb seg{min(o, o + d), max(o, o + d)};
    for (uint32_t j = 0; j + 1 < f.count_z; ++j) {
      for (uint32_t i = 0; i + 1 < f.count_x; ++i) {
        for (uint32_t k = 0; k < 2; ++k) {
          Vec3 v[3];
          f.triangle_vertices(i, j, k, v);
          const Aabb tb{min(min(v[0], v[1]), v[2]), max(max(v[0], v[1]), v[2])};
          float t = 0.0f;
          if (overlaps(tb, seg) && ray_triangle(o, d, v, best, t) && (!want || t < best)) {
            want = true;
            best = t;
          }
        }
      }
    }
    ASSERT_EQ(got, want) << "ray " << r;
    if (!got) continue;
    ++hits;
    ASSERT_EQ(hit.fraction, best) << "ray " << r;
  }
  EXPECT_GT(hits, 1000);
}

TEST(HeightFieldMotion, AFrictionlessCubeSlidesOverCellsWithoutBumping) {
  // Jolt's DiscreteCubeSlideHeightField: a flat 7 x 7 m field, here also in 0.25 m cells.
  for (const float spacing : {1.0f, 0.25f}) {
    const auto count = static_cast<uint32_t>(7.0f / spacing) + 1;
    const HeightField f = built(count, spacing, std::vector<float>(size_t{count} * count, 0.0f));
    for (const Vec3 dir : {Vec3{1, 0, 0}, Vec3{0, 0, -1}, Vec3{0.70710678f, 0, 0.70710678f}, Vec3{-0.8f, 0, 0.6f}}) {
      FieldWorld w(f, {-3.5f, 0.0f, -3.5f}, 0.0f);
      BodyDesc d = test::box_desc(Vec3{0.0f, 0.1f, 0.0f} - dir * 3.0f, {0.1f, 0.1f, 0.1f});
      d.friction = 0.0f;
      d.velocity = dir * 3.0f;
      const ObjectID box = add(w.world, d);
      for (int i = 0; i < 120; ++i) w.world.step(kDt);
      const BodyState s = state(w.world, box);
      const Vec3 expected = dir * 3.0f + Vec3{0.0f, 0.1f, 0.0f};
      EXPECT_NEAR(s.position.x, expected.x, 1.0e-3f) << spacing;
      EXPECT_NEAR(s.position.z, expected.z, 1.0e-3f) << spacing;
      EXPECT_NEAR(s.position.y, 0.1f, 5.0e-3f) << spacing;
      EXPECT_LT(length(s.velocity - dir * 3.0f), 2.0e-3f) << spacing;
    }
  }
}

TEST(HeightFieldMotion, ABowlWithHolesKeepsAThousandSpheresForSixtySeconds) {
  // A bowl y = 0.06 r^2 of 64 x 64 cells of 0.25 m, with single-sample holes on its slopes (each
  // cuts a 0.5 m square); spheres of radius 0.26-0.34 m cannot pass such a hole, and none may
  // ever have its centre below the surface, at a hole's edge or anywhere else.
  constexpr uint32_t kCount = 65;
  constexpr float kSpacing = 0.25f;
  const float c = 0.5f * kSpacing * (kCount - 1);
  auto bowl = [&](float x, float z) { return 0.06f * ((x - c) * (x - c) + (z - c) * (z - c)); };
  std::vector<float> h = samples(kCount, kSpacing, bowl);
  for (uint32_t k = 0; k < 12; ++k) {
    const uint32_t i = 12 + (k * 7) % 40;
    const uint32_t j = 10 + (k * 13) % 44;
    h[j * kCount + i] = NAN;
  }
  const HeightField f = built(kCount, kSpacing, h);
  FieldWorld w(f, {-c, 0.0f, -c}, 0.5f);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 1000; ++i) {
    const float x = -5.0f + 1.0f * static_cast<float>(i % 11);
    const float z = -5.0f + 1.0f * static_cast<float>((i / 11) % 11);
    const float y = bowl(x + c, z + c) + 0.6f + 0.75f * static_cast<float>(i / 121);
    ids.push_back(add(w.world, test::sphere_desc({x, y, z}, 0.26f + 0.02f * static_cast<float>(i % 5))));
  }
  float worst = 1.0e9f;
  for (int step = 0; step < 3600; ++step) {
    w.world.step(kDt);
    if (step % 10 != 9) continue;
    for (const ObjectID id : ids) {
      const BodyState s = state(w.world, id);
      worst = std::min(worst, s.position.y - bowl(s.position.x + c, s.position.z + c));
    }
  }
  EXPECT_GT(worst, 0.0f) << "a centre went below the surface";
  for (const ObjectID id : ids) EXPECT_LT(std::fabs(state(w.world, id).position.x), c);
}

TEST(HeightFieldMotion, AFastSmallSphereNeverPassesThroughTheGround) {
  const HeightField f = built(33, 0.5f, samples(33, 0.5f, [](float x, float z) { return 0.2f * std::sin(x + 0.5f * z); }));
  for (int k = 0; k < 20; ++k) {
    WorldSettings settings;
    settings.gravity = {};
    FieldWorld w(f, {-8.0f, 0.0f, -8.0f}, 0.5f, settings);
    BodyDesc d = test::sphere_desc({-3.0f + 0.31f * static_cast<float>(k), 4.0f, 2.0f - 0.17f * static_cast<float>(k)}, 0.1f);
    d.velocity = {20.0f * std::sin(static_cast<float>(k)), -300.0f, 0.0f};
    const ObjectID s = add(w.world, d);
    for (int i = 0; i < 20; ++i) w.world.step(kDt);
    const BodyState st = state(w.world, s);
    EXPECT_GT(st.position.y, -0.25f) << "try " << k;
  }
}

TEST(HeightFieldState, SavedWorldsWithHeightFieldsRestoreAndStepBitIdentically) {
  std::vector<float> h = samples(17, 0.5f, [](float x, float z) { return 0.1f * x - 0.05f * z; });
  h[40] = NAN;
  std::vector<uint8_t> materials(16 * 16, 0);
  materials[7] = 3;
  const HeightFieldBuild b = build_heightfield(17, 17, {0.5f, 0.0f, 0.5f}, h, materials);
  ASSERT_TRUE(b.ok()) << b.error;
  FieldWorld w(b.field, {-4.0f, 0.0f, -4.0f}, 0.6f);
  for (int i = 0; i < 8; ++i) add(w.world, test::box_desc({-2.0f + 0.5f * static_cast<float>(i), 1.5f, 0.3f}, {0.2f, 0.2f, 0.2f}));
  for (int i = 0; i < 30; ++i) w.world.step(kDt);
  std::vector<uint8_t> saved;
  w.world.save_state(saved);
  World copy;
  std::string error;
  ASSERT_TRUE(copy.restore_state(saved, &error)) << error;
  ASSERT_EQ(copy.heightfields().size(), 1u);
  EXPECT_EQ(copy.heightfields()[0]->content_hash, w.field->content_hash);
  EXPECT_EQ(copy.world_hash(), w.world.world_hash());
  for (int i = 0; i < 60; ++i) {
    w.world.step(kDt);
    copy.step(kDt);
  }
  EXPECT_EQ(copy.world_hash(), w.world.world_hash());
}

}  // namespace
}  // namespace impulse::physics
