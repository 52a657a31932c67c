// libFuzzer target: convex hulls from hostile points, meshes and heightfields from hostile data,
// and saved world states that carry all three.
//
// Input: byte 0 chooses the path.
//  - bit 0 clear, bit 1 clear: the rest is read as float32 triples (little-endian), at most 512 points, for
//    build_convex_hull. Invariants: a refused build says why and leaves the hull empty; an
//    accepted hull passes check_hull, has finite positive mass properties, and its contacts with a
//    box, a sphere, a capsule and itself (at poses from the input's first bytes) and a raycast
//    through it are finite, with at most 4 unit-normal points.
//  - bit 0 clear, bit 1 set: a mesh (bit 2 clear: u16 vertex count, that many float32 triples,
//    then u32 indices to the end) or a heightfield (bit 2 set: u8 sides, then float32 heights) for
//    build_triangle_mesh or build_heightfield. Invariants: a refusal says why; an accepted surface
//    passes its check, and a box, a sphere, a capsule and a hull against it, and a raycast, are
//    finite with at most kMaxMeshManifolds unit-normal manifolds.
//  - odd: the rest is XORed over the payload of a saved world that holds two hulls and two hull
//    bodies on a mesh and a heightfield, the checksum recomputed, and restore_state run.
//    Invariants: a refusal gives a reason; an accepted world steps 5 times and hashes with every
//    body finite.
#include <xxhash.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "server/physics/convex_hull.h"
#include "server/physics/narrowphase.h"
#include "server/physics/raycast.h"
#include "server/physics/world.h"
#include "tests/fuzz/fuzz_input.h"

namespace impulse::fuzz {
namespace {

constexpr size_t kMaxPoints = 512;
constexpr size_t kHeaderBytes = 68;  // world_state.cpp's header (magic, version, fingerprint, size)

float f32(InputReader& in) {
  const uint32_t u = in.u32();
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void check_manifold(const physics::Manifold& m, bool hit) {
  IMPULSE_FUZZ_CHECK(hit == (m.point_count > 0), "collide's result disagrees with its point count");
  IMPULSE_FUZZ_CHECK(m.point_count >= 0 && m.point_count <= physics::kMaxManifoldPoints, "too many points");
  if (!hit) return;
  IMPULSE_FUZZ_CHECK(is_finite(m.normal) && std::fabs(length(m.normal) - 1.0f) < 1e-3f, "normal not unit");
  for (int i = 0; i < m.point_count; ++i) {
    IMPULSE_FUZZ_CHECK(is_finite(m.points[i].point) && std::isfinite(m.points[i].separation), "point not finite");
  }
}

void fuzz_points(InputReader& in) {
  std::vector<Vec3> points;
  while (in.remaining() >= 12 && points.size() < kMaxPoints) points.push_back({f32(in), f32(in), f32(in)});
  const physics::HullBuild b = physics::build_convex_hull(points);
  if (!b.ok()) {
    IMPULSE_FUZZ_CHECK(!b.error.empty() && b.hull.vertices.empty(), "a refused hull kept data or gave no reason");
    return;
  }
  const physics::ConvexHull& h = b.hull;
  IMPULSE_FUZZ_CHECK(physics::check_hull(h).empty(), "an accepted hull fails check_hull");
  const physics::Shape hull = physics::make_hull(h);
  // Poses from the points themselves (deterministic for the input), scaled to the hull's size.
  const float r = h.radius;
  const Vec3 offset = points[0] * (r / (1.0f + length(points[0]))) * 1.5f;
  const Quat q = normalize(Quat{points[1].x, points[1].y, points[1].z, 1.0f + std::fabs(points[2].x)});
  const physics::Transform at_origin{{}, Quat{}};
  const physics::Transform moved{is_finite(offset) ? offset : Vec3{}, is_finite(q) ? q : Quat{}};
  const physics::Shape others[] = {physics::make_box({0.5f * r + 1e-3f, 0.3f * r + 1e-3f, 0.4f * r + 1e-3f}),
                                   physics::make_sphere(0.5f * r + 1e-3f), physics::make_capsule(0.2f * r + 1e-3f, 0.5f * r),
                                   hull, physics::make_plane()};
  for (const physics::Shape& other : others) {
    physics::Manifold m;
    check_manifold(m, physics::collide(other, at_origin, hull, moved, 0.02f * r, m));
    check_manifold(m, physics::collide(hull, moved, other, at_origin, 0.02f * r, m));
  }
  physics::ShapeRayHit hit;
  if (physics::raycast_shape(hull, moved, moved.position - Vec3{2.0f * r + 1.0f, 0.0f, 0.0f},
                             Vec3{4.0f * r + 2.0f, 0.0f, 0.0f}, 1.0f, hit)) {
    IMPULSE_FUZZ_CHECK(is_finite(hit.point) && is_finite(hit.normal) && hit.fraction >= 0.0f, "ray hit not finite");
  }
}

/// A saved world with two hulls and two hull bodies resting on a ground box, made once.
const std::vector<uint8_t>& base_blob() {
  static const std::vector<uint8_t> blob = [] {
    physics::World world;
    // The ground: a 4-triangle mesh under the first hull, a 3 x 3-sample heightfield under the second.
    const std::vector<Vec3> vertices{{-2, 0, -2}, {-2, 0, 2}, {2, 0, 2}, {2, 0, -2}, {0, 0, 0}};
    const std::vector<uint32_t> indices{0, 1, 4, 1, 2, 4, 2, 3, 4, 3, 0, 4};
    const physics::MeshBuild mesh = physics::build_triangle_mesh(vertices, indices);
    physics::BodyDesc ground;
    ground.kind = physics::BodyKind::Static;
    ground.shape = physics::make_mesh(*world.add_mesh(mesh.mesh));
    world.create_object(ground);
    const std::vector<float> heights{0.1f, 0.0f, 0.1f, 0.0f, 0.0f, 0.0f, 0.1f, NAN, 0.1f};
    const physics::HeightFieldBuild field = physics::build_heightfield(3, 3, {1.0f, 0.0f, 1.0f}, heights);
    ground.shape = physics::make_heightfield(*world.add_heightfield(field.field));
    ground.position = {-1.0f, 0.0f, -1.0f};
    world.create_object(ground);
    for (int k = 0; k < 2; ++k) {
      std::vector<Vec3> points;
      for (int v = 0; v < 8; ++v) {
        points.push_back({(v & 1) ? 0.4f : -0.3f - 0.1f * static_cast<float>(k), (v & 2) ? 0.3f : -0.2f,
                          (v & 4) ? 0.35f : -0.3f});
      }
      points.push_back({0.0f, 0.6f, 0.0f});
      const physics::HullBuild b = physics::build_convex_hull(points);
      const physics::ConvexHull* h = world.add_hull(b.hull);
      physics::BodyDesc d;
      d.shape = physics::make_hull(*h);
      d.position = {0.1f * static_cast<float>(k), 0.5f + static_cast<float>(k), 0.0f};
      world.create_object(d);
    }
    for (int i = 0; i < 10; ++i) world.step(1.0f / 60.0f);
    std::vector<uint8_t> out;
    world.save_state(out);
    return out;
  }();
  return blob;
}

// A surface from hostile data, then the convex shapes against it.
void fuzz_surface(InputReader& in, bool heightfield) {
  physics::World world;
  physics::Shape surface;
  std::string error;
  if (heightfield) {
    const uint8_t sides = in.u8();
    const uint32_t nx = 2u + (sides & 15u);
    const uint32_t nz = 2u + (sides >> 4);
    std::vector<float> heights;
    while (in.remaining() >= 4 && heights.size() < nx * nz) heights.push_back(f32(in));
    const physics::HeightFieldBuild b = physics::build_heightfield(nx, nz, {0.5f, 0.0f, 0.5f}, heights);
    if (!b.ok()) {
      IMPULSE_FUZZ_CHECK(!b.error.empty(), "a refused heightfield gave no reason");
      return;
    }
    const physics::HeightField* f = world.add_heightfield(b.field, &error);
    IMPULSE_FUZZ_CHECK(f != nullptr, "an accepted heightfield fails check_heightfield");
    surface = physics::make_heightfield(*f);
  } else {
    const uint16_t count = in.u16() % kMaxPoints;
    std::vector<Vec3> vertices;
    for (uint16_t i = 0; i < count && in.remaining() >= 12; ++i) vertices.push_back({f32(in), f32(in), f32(in)});
    std::vector<uint32_t> indices;
    while (in.remaining() >= 4 && indices.size() < 3 * kMaxPoints) indices.push_back(in.u32() % (count + 2u));
    const physics::MeshBuild b = physics::build_triangle_mesh(vertices, indices);
    if (!b.ok()) {
      IMPULSE_FUZZ_CHECK(!b.error.empty(), "a refused mesh gave no reason");
      return;
    }
    IMPULSE_FUZZ_CHECK(physics::check_mesh(b.mesh).empty(), "an accepted mesh is not canonical");
    const physics::TriangleMesh* m = world.add_mesh(b.mesh, &error);
    IMPULSE_FUZZ_CHECK(m != nullptr, "an accepted mesh was refused by the world");
    surface = physics::make_mesh(*m);
  }
  const physics::Transform at_origin{};
  const Aabb box = physics::compute_aabb(surface, at_origin);
  const Vec3 centre = (box.min + box.max) * 0.5f;
  const physics::Shape shapes[] = {physics::make_box({0.3f, 0.2f, 0.25f}), physics::make_sphere(0.3f),
                                   physics::make_capsule(0.2f, 0.3f)};
  for (const physics::Shape& s : shapes) {
    for (float dy : {-0.2f, 0.0f, 0.25f}) {
      const physics::Transform t{centre + Vec3{0.1f, dy + 0.5f * (box.max.y - box.min.y), -0.05f},
                                 normalize(Quat{0.1f, 0.2f, 0.0f, 1.0f})};
      physics::MeshManifolds out;
      physics::collide_mesh(s, t, surface, at_origin, 0.02f, out);
      IMPULSE_FUZZ_CHECK(out.count >= 0 && out.count <= physics::kMaxMeshManifolds, "too many manifolds");
      for (int g = 0; g < out.count; ++g) check_manifold(out.manifolds[g], out.manifolds[g].point_count > 0);
    }
  }
  physics::ShapeRayHit hit;
  if (physics::raycast_shape(surface, at_origin, centre + Vec3{0.0f, 50.0f, 0.0f}, {0.01f, -100.0f, 0.02f}, 1.0f, hit)) {
    IMPULSE_FUZZ_CHECK(is_finite(hit.point) && is_finite(hit.normal) && hit.fraction >= 0.0f && hit.fraction <= 1.0f,
                       "a raycast hit is not finite or out of range");
  }
}

void fuzz_state(InputReader& in) {
  std::vector<uint8_t> blob = base_blob();
  const std::span<const uint8_t> edits = in.bytes(in.remaining());
  for (size_t i = 0; i < edits.size() && kHeaderBytes + i + 8 < blob.size(); ++i) blob[kHeaderBytes + i] ^= edits[i];
  const uint64_t sum = XXH64(blob.data(), blob.size() - 8, 0);
  for (int i = 0; i < 8; ++i) blob[blob.size() - 8 + static_cast<size_t>(i)] = static_cast<uint8_t>(sum >> (8 * i));
  physics::World world;
  std::string error;
  if (!world.restore_state(blob, &error)) {
    IMPULSE_FUZZ_CHECK(!error.empty(), "a refused state gave no reason");
    return;
  }
  for (int i = 0; i < 5; ++i) world.step(1.0f / 60.0f);
  (void)world.world_hash();
  world.for_each_object([](const physics::BodyState& s) {
    IMPULSE_FUZZ_CHECK(is_finite(s.position) && is_finite(s.orientation), "a restored body went non-finite");
  });
}

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  impulse::fuzz::InputReader in(std::span<const uint8_t>(data, size));
  const uint8_t path = in.u8();
  if ((path & 1u) != 0) {
    impulse::fuzz::fuzz_state(in);
  } else if ((path & 2u) != 0) {
    impulse::fuzz::fuzz_surface(in, (path & 4u) != 0);
  } else {
    impulse::fuzz::fuzz_points(in);
  }
  return 0;
}
