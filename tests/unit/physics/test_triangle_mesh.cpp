// Static triangle meshes: building (welding, canonical order, refusals), active edges, BVH queries
// and raycasts against brute force, contacts against Jolt's active-edge probes, and bodies moving
// on meshes: sliding over seams and bends, corners, resting, continuous collision, saved states.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "server/physics/narrowphase.h"
#include "server/physics/raycast.h"
#include "server/physics/triangle_mesh.h"
#include "server/physics/world.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add;
using test::state;

constexpr float kDt = 1.0f / 60.0f;
constexpr float kPi = 3.14159265f;

struct MeshData {
  std::vector<Vec3> vertices;
  std::vector<uint32_t> indices;
};

/// An nx x nz grid of square cells of edge `cell` [m] from `origin`, two triangles per cell
/// (front faces up), heights from y(x, z); vertices shared between cells.
template <class Height>
MeshData grid(int nx, int nz, float cell, Vec3 origin, Height y) {
  MeshData m;
  for (int j = 0; j <= nz; ++j) {
    for (int i = 0; i <= nx; ++i) {
      const float x = origin.x + cell * static_cast<float>(i);
      const float z = origin.z + cell * static_cast<float>(j);
      m.vertices.push_back({x, origin.y + y(x, z), z});
    }
  }
  auto at = [&](int i, int j) { return static_cast<uint32_t>(j * (nx + 1) + i); };
  for (int j = 0; j < nz; ++j) {
    for (int i = 0; i < nx; ++i) {
      // The diagonal from (i, j) to (i + 1, j + 1), as in Jolt's ActiveEdgesTests mesh.
      m.indices.insert(m.indices.end(), {at(i, j), at(i, j + 1), at(i + 1, j + 1)});
      m.indices.insert(m.indices.end(), {at(i, j), at(i + 1, j + 1), at(i + 1, j)});
    }
  }
  return m;
}

MeshData flat(int n, float cell) {
  const float half = 0.5f * cell * static_cast<float>(n);
  return grid(n, n, cell, {-half, 0.0f, -half}, [](float, float) { return 0.0f; });
}

TriangleMesh built(const MeshData& d) {
  MeshBuild b = build_triangle_mesh(d.vertices, d.indices);
  EXPECT_TRUE(b.ok()) << b.error;
  return std::move(b.mesh);
}

/// A world holding `mesh` as a static body at the origin with the given friction.
struct MeshWorld {
  World world;
  const TriangleMesh* mesh = nullptr;
  ObjectID floor;
  explicit MeshWorld(const TriangleMesh& m, float friction = 0.5f, Transform at = {}) {
    std::string error;
    mesh = world.add_mesh(m, &error);
    EXPECT_NE(mesh, nullptr) << error;
    BodyDesc d;
    d.kind = BodyKind::Static;
    d.shape = make_mesh(*mesh);
    d.position = at.position;
    d.orientation = at.rotation;
    d.friction = friction;
    floor = add(world, d);
  }
  void step(int n) {
    for (int i = 0; i < n; ++i) world.step(kDt);
  }
};

// --- Building ----------------------------------------------------------------------------------------

TEST(TriangleMesh, WeldsSharedVerticesAndIsCanonicalWhateverTheInputOrder) {
  const MeshData g = flat(7, 1.0f);
  // The same triangles with every vertex repeated per triangle, in reverse order, each rotated.
  MeshData soup;
  for (size_t t = g.indices.size() / 3; t-- > 0;) {
    for (int k = 0; k < 3; ++k) soup.vertices.push_back(g.vertices[g.indices[3 * t + (k + static_cast<int>(t)) % 3]]);
    const auto base = static_cast<uint32_t>(soup.vertices.size() - 3);
    soup.indices.insert(soup.indices.end(), {base, base + 1, base + 2});
  }
  const MeshBuild a = build_triangle_mesh(g.vertices, g.indices);
  const MeshBuild b = build_triangle_mesh(soup.vertices, soup.indices);
  ASSERT_TRUE(a.ok() && b.ok()) << a.error << b.error;
  EXPECT_EQ(a.mesh.vertices.size(), 64u);
  EXPECT_EQ(a.mesh.triangle_count(), 98u);
  EXPECT_EQ(b.welded, 3u * 98u - 64u);
  EXPECT_TRUE(a.mesh == b.mesh);
  EXPECT_EQ(a.mesh.content_hash, b.mesh.content_hash);
  EXPECT_EQ(a.mesh.edge_flags, b.mesh.edge_flags);
  EXPECT_EQ(check_mesh(a.mesh), "");
}

TEST(TriangleMesh, DropsDegenerateTrianglesAndRefusesBadInput) {
  const std::vector<Vec3> v{{0, 0, 0}, {1, 0, 0}, {0, 0, 1}, {2, 0, 0}};
  const MeshBuild ok = build_triangle_mesh(v, std::vector<uint32_t>{0, 2, 1, 0, 1, 1, 0, 1, 3});
  ASSERT_TRUE(ok.ok()) << ok.error;
  EXPECT_EQ(ok.degenerate, 2u);  // a repeated vertex; three collinear points
  EXPECT_EQ(ok.mesh.triangle_count(), 1u);
  EXPECT_EQ(ok.mesh.vertices.size(), 3u);  // vertex 3 belonged only to a dropped triangle

  auto error_of = [](std::span<const Vec3> vs, std::span<const uint32_t> is, std::span<const uint8_t> ms = {}) {
    return build_triangle_mesh(vs, is, ms).error;
  };
  EXPECT_NE(error_of(v, std::vector<uint32_t>{0, 1}).find("not a multiple of 3"), std::string::npos);
  EXPECT_NE(error_of(v, std::vector<uint32_t>{}).find("no triangles"), std::string::npos);
  EXPECT_NE(error_of(v, std::vector<uint32_t>{0, 1, 9}).find("index 2 (9) is out of range"), std::string::npos);
  std::vector<Vec3> bad = v;
  bad[2].y = std::nanf("");
  EXPECT_NE(error_of(bad, std::vector<uint32_t>{0, 2, 1}).find("vertex 2"), std::string::npos);
  bad[2].y = 2.0e5f;
  EXPECT_NE(error_of(bad, std::vector<uint32_t>{0, 2, 1}).find("vertex 2"), std::string::npos);
  EXPECT_NE(error_of(v, std::vector<uint32_t>{0, 2, 1}, std::vector<uint8_t>{1, 2}).find("material count"),
            std::string::npos);
  EXPECT_NE(error_of(v, std::vector<uint32_t>{0, 0, 1}).find("degenerate"), std::string::npos);
  // A declared size far beyond the limit is refused before anything is allocated for it.
  const std::vector<uint32_t> huge(3ull * (kMaxMeshTriangles + 1), 0u);
  EXPECT_NE(error_of(v, huge).find("more than the limit"), std::string::npos);
}

TEST(TriangleMesh, ActiveEdgesAreTheBorderAndTheFoldsSharperThanFiveDegrees) {
  // A flat grid: only the border edges are active.
  const TriangleMesh m = built(flat(4, 1.0f));
  int active = 0;
  for (uint32_t t = 0; t < m.triangle_count(); ++t) {
    for (int k = 0; k < 3; ++k) {
      if ((m.edge_flags[t] >> k & 1u) == 0) continue;
      ++active;
      const Vec3 a = m.vertices[m.indices[3 * t + k]];
      const Vec3 b = m.vertices[m.indices[3 * t + (k + 1) % 3]];
      const bool border = (a.x == b.x && std::fabs(a.x) == 2.0f) || (a.z == b.z && std::fabs(a.z) == 2.0f);
      EXPECT_TRUE(border) << "inner edge active: " << a.x << "," << a.z << " - " << b.x << "," << b.z;
    }
  }
  EXPECT_EQ(active, 16);
  // Two triangles folded along x = 0 by each angle, up (concave) and down (convex).
  for (const float degrees : {1.0f, 4.0f, 4.9f, 5.1f, 10.0f, 45.0f, 90.0f, 150.0f}) {
    for (const float sign : {1.0f, -1.0f}) {
      const float a = sign * degrees * kPi / 180.0f;
      const std::vector<Vec3> v{{-1, 0, 0}, {0, 0, 0}, {0, 0, 1}, {std::cos(a), std::sin(a), 0}};
      const MeshBuild b = build_triangle_mesh(v, std::vector<uint32_t>{0, 2, 1, 1, 2, 3});
      ASSERT_TRUE(b.ok()) << b.error;
      // The shared edge is the only one between (0, 0, 0) and (0, 0, 1).
      int shared_active = 0;
      for (uint32_t t = 0; t < 2; ++t) {
        for (int k = 0; k < 3; ++k) {
          const Vec3 p = b.mesh.vertices[b.mesh.indices[3 * t + k]];
          const Vec3 q = b.mesh.vertices[b.mesh.indices[3 * t + (k + 1) % 3]];
          if (p.x == 0 && q.x == 0 && p.y == 0 && q.y == 0) shared_active += b.mesh.edge_flags[t] >> k & 1;
        }
      }
      const bool expect_active = sign < 0 && degrees > 5.0f;  // convex (folded down) and not flat
      EXPECT_EQ(shared_active, expect_active ? 2 : 0) << degrees << " degrees, sign " << sign;
    }
  }
}

TEST(TriangleMesh, BoxQueriesFindExactlyTheOverlappingTriangles) {
  const TriangleMesh m = built(grid(40, 40, 0.5f, {-10, 0, -10}, [](float x, float z) {
    return 0.5f * std::sin(0.7f * x) * std::cos(0.5f * z);
  }));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pos(-12.0f, 12.0f);
  std::uniform_real_distribution<float> size(0.0f, 3.0f);
  for (int q = 0; q < 500; ++q) {
    const Vec3 c{pos(rng), 0.3f * pos(rng) / 12.0f, pos(rng)};
    const Vec3 h{size(rng), size(rng), size(rng)};
    const Aabb box{c - h, c + h};
    std::vector<uint32_t> found;
    for_each_triangle(m, box, [&](const MeshTriangle& t) {
      found.push_back(t.index);
      return true;
    });
    std::vector<uint32_t> brute;
    for (uint32_t t = 0; t < m.triangle_count(); ++t) {
      const MeshTriangle tri = m.triangle(t);
      const Aabb tb{min(min(tri.v[0], tri.v[1]), tri.v[2]), max(max(tri.v[0], tri.v[1]), tri.v[2])};
      if (overlaps(tb, box)) brute.push_back(t);
    }
    std::sort(found.begin(), found.end());
    ASSERT_EQ(found, brute) << "query " << q;
  }
}

TEST(TriangleMesh, RaycastsAgreeWithBruteForceOnA100kTriangleMesh) {
  // 224 x 224 cells of 0.5 m: 100,352 triangles of rolling terrain.
  const TriangleMesh m = built(grid(224, 224, 0.5f, {-56, 0, -56}, [](float x, float z) {
    return 2.0f * std::sin(0.3f * x) * std::cos(0.2f * z) + 0.3f * std::sin(1.7f * x + z);
  }));
  ASSERT_EQ(m.triangle_count(), 100352u);
  // Brute force over the triangles' boxes first (the test's own cheap filter), then the same
  // ray-triangle test the BVH uses: the results must agree exactly.
  std::vector<Aabb> boxes(m.triangle_count());
  for (uint32_t t = 0; t < m.triangle_count(); ++t) {
    const MeshTriangle tri = m.triangle(t);
    boxes[t] = {min(min(tri.v[0], tri.v[1]), tri.v[2]), max(max(tri.v[0], tri.v[1]), tri.v[2])};
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> pos(-60.0f, 60.0f);
  std::uniform_real_distribution<float> up(-3.0f, 8.0f);
  std::uniform_real_distribution<float> dir(-1.0f, 1.0f);
  int hits = 0;
  for (int r = 0; r < 10000; ++r) {
    const Vec3 o{pos(rng), up(rng), pos(rng)};
    const Vec3 d = Vec3{dir(rng), dir(rng) - 0.3f, dir(rng)} * 20.0f;
    MeshRayHit hit;
    const bool got = raycast_mesh(m, o, d, 1.0f, hit);
    const Aabb seg{min(o, o + d), max(o, o + d)};
    bool want = false;
    float best = 1.0f;
    uint32_t best_t = 0;
    for (uint32_t t = 0; t < m.triangle_count(); ++t) {
      if (!overlaps(boxes[t], seg)) continue;
      const MeshTriangle tri = m.triangle(t);
      float f = 0.0f;
      if (ray_triangle(o, d, tri.v, best, f) && (!want || f < best)) {
        want = true;
        best = f;
        best_t = t;
      }
    }
    ASSERT_EQ(got, want) << "ray " << r;
    if (!got) continue;
    ++hits;
    ASSERT_EQ(hit.fraction, best) << "ray " << r;
    ASSERT_EQ(hit.triangle, best_t) << "ray " << r;
  }
  EXPECT_GT(hits, 3000);  // the sample is not all misses
}

// --- Contacts --------------------------------------------------------------------------------------

// Jolt's ActiveEdgesTests probe (CollideShapeMesh with active edges only): a vertical capsule of
// radius 0.1 m and half height 1 m whose centre is 0.1 m above a flat 7 x 7 mesh, through it. At the
// border the edge pushes it sideways; on an inner edge or diagonal only the face normal acts.
TEST(MeshContact, CapsuleProbeMeetsOnlyActiveEdges) {
  const TriangleMesh m = built(flat(7, 1.0f));
  World world;
  const TriangleMesh* mesh = world.add_mesh(m);
  ASSERT_NE(mesh, nullptr);
  const Shape probe = make_capsule(0.1f, 1.0f);
  struct Case {
    Vec3 at;
    Vec3 normal;  // from the probe into the mesh
  };
  const Case cases[] = {
      {{-3.5f, 0.1f, 0.0f}, {1, 0, 0}},  {{3.5f, 0.1f, 0.0f}, {-1, 0, 0}}, {{0.0f, 0.1f, -3.5f}, {0, 0, 1}},
      {{0.0f, 0.1f, 3.5f}, {0, 0, -1}},  {{-2.5f, 0.1f, 0.0f}, {0, -1, 0}}, {{0.0f, 0.1f, -2.5f}, {0, -1, 0}},
      {{-3.0f, 0.1f, 0.0f}, {0, -1, 0}},
  };
  for (const Case& c : cases) {
    MeshManifolds out;
    ASSERT_TRUE(collide_mesh(probe, Transform{c.at, Quat{}}, make_mesh(*mesh), Transform{}, 0.02f, out));
    ASSERT_EQ(out.count, 1) << c.at.x << "," << c.at.z;
    EXPECT_LT(length(out.manifolds[0].normal - c.normal), 1.0e-4f) << c.at.x << "," << c.at.z;
    for (int i = 0; i < out.manifolds[0].point_count; ++i) {
      const Vec3 p = out.manifolds[0].points[i].point;
      EXPECT_NEAR(p.x, c.at.x, 0.11f);
      EXPECT_NEAR(p.z, c.at.z, 0.11f);
    }
  }
}

TEST(MeshContact, BoxOnAFlatMeshGivesOneFaceManifoldWhateverTheSeamsUnderIt) {
  const TriangleMesh m = built(flat(20, 0.25f));
  World world;
  const TriangleMesh* mesh = world.add_mesh(m);
  const Shape box = make_box({0.3f, 0.2f, 0.4f});
  // Sweep positions across seams and diagonals, and turns about the vertical.
  for (int i = 0; i < 40; ++i) {
    const Vec3 at{-1.0f + 0.0517f * static_cast<float>(i), 0.2f - 0.003f, 0.5f - 0.0311f * static_cast<float>(i)};
    const Quat turn = quat_from_axis_angle({0, 1, 0}, 0.13f * static_cast<float>(i));
    MeshManifolds out;
    ASSERT_TRUE(collide_mesh(box, Transform{at, turn}, make_mesh(*mesh), Transform{}, 0.02f, out));
    ASSERT_EQ(out.count, 1) << i;
    EXPECT_LT(length(out.manifolds[0].normal - Vec3{0, -1, 0}), 1.0e-5f) << i;
    ASSERT_EQ(out.manifolds[0].point_count, 4) << i;
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(out.manifolds[0].points[k].separation, -0.003f, 1.0e-4f) << i;
  }
}

// --- Motion on meshes -------------------------------------------------------------------------------

/// Jolt's DiscreteCubeSlideMesh: a frictionless 0.2 m cube at 3 m/s for 2 s over a flat mesh
/// keeps its straight path (1e-3 m) and its speed (2e-3 m/s).
ObjectID slide_box(MeshWorld& w, Vec3 start, Vec3 velocity) {
  BodyDesc d = test::box_desc(start, {0.1f, 0.1f, 0.1f});
  d.friction = 0.0f;
  d.velocity = velocity;
  return add(w.world, d);
}

TEST(MeshMotion, AFrictionlessCubeSlidesOverSeamsWithoutBumping) {
  for (const float cell : {1.0f, 0.25f}) {
    const TriangleMesh m = built(flat(static_cast<int>(7.0f / cell), cell));
    const Vec3 dirs[] = {{1, 0, 0}, {0, 0, 1}, {-1, 0, 0}, {0, 0, -1}, {0.70710678f, 0, 0.70710678f},
                         {-0.6f, 0, 0.8f}};
    for (const Vec3 dir : dirs) {
      MeshWorld w(m, 0.0f);
      const Vec3 start = Vec3{0.0f, 0.1f, 0.0f} - dir * 3.0f;
      const ObjectID box = slide_box(w, start, dir * 3.0f);
      w.step(120);
      const BodyState s = state(w.world, box);
      const Vec3 expected = start + dir * 6.0f;
      EXPECT_NEAR(s.position.x, expected.x, 1.0e-3f) << "cell " << cell << " dir " << dir.x << "," << dir.z;
      EXPECT_NEAR(s.position.z, expected.z, 1.0e-3f) << "cell " << cell << " dir " << dir.x << "," << dir.z;
      EXPECT_NEAR(s.position.y, 0.1f, 5.0e-3f) << "cell " << cell;
      EXPECT_LT(length(s.velocity - dir * 3.0f), 2.0e-3f) << "cell " << cell << " dir " << dir.x << "," << dir.z;
    }
  }
}

// The same slide with a standing cylinder (0.1 m radius, 0.2 m tall): its cap's rim points cross
// the seams as the cube's corners do, within the same tolerances. And a cylinder rolling 5 m
// across the seams keeps its line within 3 mm (measured: 1.1 and 2.1 mm off along the two
// headings that cross the diagonals; on a plane the same roll stays within 1 mm) and its speed
// within 1 %.
TEST(MeshMotion, ACylinderSlidesAndRollsOverSeamsWithoutBumping) {
  const TriangleMesh m = built(flat(28, 0.25f));
  const Vec3 dirs[] = {{1, 0, 0}, {0, 0, 1}, {0.70710678f, 0, 0.70710678f}, {-0.6f, 0, 0.8f}};
  for (const Vec3 dir : dirs) {
    MeshWorld w(m, 0.0f);
    const Vec3 start = Vec3{0.0f, 0.1f, 0.0f} - dir * 3.0f;
    BodyDesc d;
    d.shape = make_cylinder(0.1f, 0.1f);
    d.position = start;
    d.friction = 0.0f;
    d.velocity = dir * 3.0f;
    const ObjectID id = add(w.world, d);
    w.step(120);
    const BodyState s = state(w.world, id);
    const Vec3 expected = start + dir * 6.0f;
    EXPECT_NEAR(s.position.x, expected.x, 1.0e-3f) << dir.x << "," << dir.z;
    EXPECT_NEAR(s.position.z, expected.z, 1.0e-3f) << dir.x << "," << dir.z;
    EXPECT_LT(length(s.velocity - dir * 3.0f), 2.0e-3f) << dir.x << "," << dir.z;
  }
  for (const Vec3 dir : dirs) {
    MeshWorld w(m, 0.8f);
    const float r = 0.2f;
    const Vec3 axis = cross(Vec3{0, 1, 0}, dir);
    BodyDesc d;
    d.shape = make_cylinder(r, 0.15f);
    d.orientation = quat_from_axis_angle(normalize_or(cross(Vec3{0, 1, 0}, axis), Vec3{1, 0, 0}), kPi / 2.0f);
    const Vec3 start = Vec3{0.0f, r, 0.0f} - dir * 3.0f;
    d.position = start;
    d.friction = 0.8f;
    d.angular_damping = 0.0f;
    d.velocity = dir * 3.0f;
    d.angular_velocity = axis * (3.0f / r);  // rolling: w = (up x v) / r
    const ObjectID id = add(w.world, d);
    w.step(100);
    const BodyState s = state(w.world, id);
    const Vec3 off = s.position - start;
    const float along = dot(off, dir);
    EXPECT_NEAR(along, 5.0f, 0.05f) << dir.x << "," << dir.z;
    EXPECT_LT(length(Vec3{off.x, 0.0f, off.z} - dir * along), 3.0e-3f) << dir.x << "," << dir.z;
    EXPECT_NEAR(length(s.velocity), 3.0f, 0.03f) << dir.x << "," << dir.z;
    EXPECT_NEAR(s.position.y, r, 5.0e-3f);
  }
}

TEST(MeshMotion, WithEveryEdgeActiveTheSameCubeCatchesOnTheSeams) {
  // The control of the test above: the seams are what the active-edge rule removes.
  TriangleMesh m = built(flat(28, 0.25f));
  std::fill(m.edge_flags.begin(), m.edge_flags.end(), uint8_t{7});
  MeshWorld w(m, 0.0f);
  const ObjectID box = slide_box(w, {-3.0f, 0.1f, 0.0f}, {3.0f, 0.0f, 0.0f});
  w.step(120);
  const BodyState s = state(w.world, box);
  EXPECT_GT(length(s.velocity - Vec3{3.0f, 0.0f, 0.0f}) + std::fabs(s.position.x - 3.0f), 0.05f)
      << "x " << s.position.x << " vx " << s.velocity.x;
}

TEST(MeshMotion, ACubeSlidesOverAFourDegreeBendKeepingItsEnergy) {
  // Flat for x < 0, then a 4 degree slope up (a concave bend) or down (a convex one), 0.25 m cells.
  for (const float sign : {1.0f, -1.0f}) {
    const float slope = sign * std::tan(4.0f * kPi / 180.0f);
    const TriangleMesh m = built(grid(40, 8, 0.25f, {-5.0f, 0.0f, -1.0f}, [&](float x, float) {
      return x > 0.0f ? slope * x : 0.0f;
    }));
    MeshWorld w(m, 0.0f);
    const ObjectID box = slide_box(w, {-2.0f, 0.1f, 0.0f}, {3.0f, 0.0f, 0.0f});
    const float e0 = 0.5f * 9.0f + 9.81f * 0.1f;  // per unit mass
    float worst_lift = 0.0f;
    for (int i = 0; i < 90; ++i) {
      w.step(1);
      const BodyState s = state(w.world, box);
      const float ground = s.position.x > 0.0f ? slope * s.position.x : 0.0f;
      // The cube's centre stays a half-size above the surface (along its normal, within the slop).
      worst_lift = std::max(worst_lift, std::fabs(s.position.y - ground - 0.1f / std::cos(std::atan(slope))));
    }
    const BodyState s = state(w.world, box);
    ASSERT_GT(s.position.x, 1.0f) << "sign " << sign;
    const float e1 = 0.5f * length_squared(s.velocity) + 9.81f * s.position.y;
    EXPECT_NEAR(e1, e0, 0.02f * e0) << "sign " << sign;  // no bump lost or gained energy
    EXPECT_LT(worst_lift, 0.02f) << "sign " << sign;   // never launched off the bend
    EXPECT_NEAR(s.velocity.z, 0.0f, 1.0e-3f);
    EXPECT_NEAR(s.velocity.y / s.velocity.x, slope, 2.0e-3f) << "sign " << sign;
  }
}

TEST(MeshMotion, ABoxInACornerHasOneManifoldPerSurfaceAndOnePairOfEvents) {
  // A floor and a wall facing +x at x = -2, meeting in a concave edge.
  MeshData d = flat(4, 1.0f);
  const auto base = static_cast<uint32_t>(d.vertices.size());
  d.vertices.insert(d.vertices.end(), {{-2, 0, -2}, {-2, 0, 2}, {-2, 3, 2}, {-2, 3, -2}});
  d.indices.insert(d.indices.end(), {base, base + 2, base + 1, base, base + 3, base + 2});
  MeshWorld w(built(d), 0.5f);
  // Resting on the floor, pushed into the wall (10 N, under the wall's friction limit of the weight).
  const ObjectID box = add(w.world, test::box_desc({-1.59f, 0.4f, 0.0f}, {0.4f, 0.4f, 0.4f}));
  int begins = 0;
  for (int i = 0; i < 60; ++i) {
    w.world.apply_force(box, {-10.0f, 0.0f, 0.0f});
    w.world.step(kDt);
    for (const ContactEvent& e : w.world.contact_events()) begins += e.type == ContactEventType::Begin ? 1 : 0;
  }
  const BodyState s = state(w.world, box);
  EXPECT_NEAR(s.position.x, -1.6f, 6.0e-3f);
  EXPECT_NEAR(s.position.y, 0.4f, 6.0e-3f);
  EXPECT_EQ(begins, 1);
  EXPECT_EQ(w.world.contact_count_of(box), 1u);
  const std::vector<Contact> contacts = w.world.get_collisions_for(box);
  ASSERT_EQ(contacts.size(), 2u);  // two manifolds: floor and wall
  EXPECT_TRUE(w.world.are_colliding(box, w.floor));
  ASSERT_EQ(w.world.destroy_object(box), Error::Ok);
  w.world.step(kDt);
  int ends = 0;
  for (const ContactEvent& e : w.world.contact_events()) ends += e.type == ContactEventType::End ? 1 : 0;
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(w.world.contact_count_of(w.floor), 0u);
}

TEST(MeshMotion, BoxesComeToRestOnRollingTerrainAndSleep) {
  const TriangleMesh m = built(grid(40, 40, 0.5f, {-10, 0, -10}, [](float x, float z) {
    return 0.3f * std::sin(0.5f * x) * std::cos(0.4f * z);
  }));
  MeshWorld w(m, 0.8f);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 30; ++i) {
    const Vec3 at{-6.0f + 0.4f * static_cast<float>(i), 1.5f + 0.1f * static_cast<float>(i % 5),
                  -3.0f + 0.2f * static_cast<float>(i)};
    BodyDesc d = test::box_desc(at, {0.2f, 0.15f, 0.25f});
    d.orientation = quat_from_axis_angle(normalize_or(Vec3{1.0f, 2.0f, static_cast<float>(i % 3)}, Vec3{0, 1, 0}),
                                         0.3f * static_cast<float>(i));
    ids.push_back(add(w.world, d));
  }
  w.step(600);
  for (const ObjectID id : ids) {
    const BodyState s = state(w.world, id);
    EXPECT_GT(s.position.y - 0.3f * std::sin(0.5f * s.position.x) * std::cos(0.4f * s.position.z), 0.1f);
    EXPECT_LT(length(s.velocity), 1.0e-3f);
  }
  EXPECT_EQ(w.world.awake_count(), 0u);
}

TEST(MeshMotion, ABowlKeepsEverySphereAndCapsuleForTenSeconds) {
  // A paraboloid bowl y = 0.08 (x^2 + z^2) over 12 x 12 m in 0.4 m cells; 200 spheres and
  // capsules dropped into it in layers. None may ever have its centre below the surface.
  auto bowl = [](float x, float z) { return 0.08f * (x * x + z * z); };
  const TriangleMesh m = built(grid(30, 30, 0.4f, {-6, 0, -6}, bowl));
  MeshWorld w(m, 0.5f);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 200; ++i) {
    const float x = -2.7f + 0.6f * static_cast<float>(i % 10);
    const float z = -2.7f + 0.6f * static_cast<float>((i / 10) % 2 == 0 ? i % 10 : 9 - i % 10);
    const Vec3 at{x, bowl(x, z) + 0.5f + 0.5f * static_cast<float>(i / 20), z};
    BodyDesc d = test::sphere_desc(at, 0.12f + 0.01f * static_cast<float>(i % 5));
    if (i % 4 == 1) d.shape = make_capsule(0.1f, 0.12f);
    ids.push_back(add(w.world, d));
  }
  float worst = 1.0e9f;
  for (int step = 0; step < 600; ++step) {
    w.world.step(kDt);
    for (const ObjectID id : ids) {
      const BodyState s = state(w.world, id);
      worst = std::min(worst, s.position.y - bowl(s.position.x, s.position.z));
    }
  }
  EXPECT_GT(worst, 0.0f) << "a centre went below the surface";
  for (const ObjectID id : ids) EXPECT_LT(length(state(w.world, id).position), 8.0f);
}

TEST(MeshContinuous, AFastSmallSphereNeverPassesThroughAOneTriangleWall) {
  // A wall of two triangles facing -x at x = 0 (front toward the sphere).
  const std::vector<Vec3> v{{0, -5, -5}, {0, -5, 5}, {0, 5, 5}, {0, 5, -5}};
  const MeshBuild b = build_triangle_mesh(v, std::vector<uint32_t>{0, 1, 2, 0, 2, 3});
  ASSERT_TRUE(b.ok()) << b.error;
  ASSERT_LT(b.mesh.triangle(0).v[0].x, 1e-6f);
  for (int k = 0; k < 20; ++k) {
    WorldSettings settings;
    settings.gravity = {};
    World world(settings);
    const TriangleMesh* mesh = world.add_mesh(b.mesh);
    BodyDesc wall;
    wall.kind = BodyKind::Static;
    wall.shape = make_mesh(*mesh);
    add(world, wall);
    const float y = -3.0f + 0.3f * static_cast<float>(k);
    BodyDesc d = test::sphere_desc({-1.0f - 0.037f * static_cast<float>(k), y, 0.2f * static_cast<float>(k % 7) - 0.6f}, 0.1f);
    d.velocity = {300.0f, 0.0f, 0.0f};
    const ObjectID s = add(world, d);
    for (int i = 0; i < 30; ++i) world.step(kDt);
    EXPECT_LT(state(world, s).position.x, 0.0f) << "try " << k;
  }
}

TEST(MeshState, SavedWorldsWithMeshesRestoreAndStepBitIdentically) {
  const TriangleMesh m = built(grid(16, 16, 0.5f, {-4, 0, -4}, [](float x, float z) { return 0.1f * x * z / 16.0f; }));
  MeshWorld w(m, 0.6f);
  for (int i = 0; i < 8; ++i) add(w.world, test::box_desc({-2.0f + 0.5f * static_cast<float>(i), 1.0f, 0.0f}, {0.2f, 0.2f, 0.2f}));
  w.step(30);
  std::vector<uint8_t> saved;
  w.world.save_state(saved);
  World copy;
  std::string error;
  ASSERT_TRUE(copy.restore_state(saved, &error)) << error;
  ASSERT_EQ(copy.meshes().size(), 1u);
  EXPECT_EQ(copy.world_hash(), w.world.world_hash());
  for (int i = 0; i < 60; ++i) {
    w.world.step(kDt);
    copy.step(kDt);
  }
  EXPECT_EQ(copy.world_hash(), w.world.world_hash());
}

}  // namespace
}  // namespace impulse::physics
