// Reference scenes S1-S3 (docs/BENCHMARKS.md, "Scenes"): the layouts of bench_scenes.h, their
// random parts from its 64-bit LCG, drawn in the order the comments below give.
#include "tests/scenes/bench_scenes.h"

#include <algorithm>
#include <cmath>

#include "server/physics/world.h"

namespace impulse::scenes {
namespace {

SceneBody make_static_box(Vec3 half_extents, Vec3 position) {
  SceneBody body;
  body.kind = physics::BodyKind::Static;
  body.shape = physics::make_box(half_extents);
  body.position = position;
  return body;
}

SceneBody make_dynamic(physics::Shape shape, Vec3 position, Quat orientation = {}) {
  SceneBody body;
  body.kind = physics::BodyKind::Dynamic;
  body.shape = shape;
  body.position = position;
  body.orientation = orientation;
  body.mass = kBodyMass;
  body.friction = kBodyFriction;
  body.restitution = kBodyRestitution;
  return body;
}

}  // namespace

BenchScene make_s1_pyramid(int base) {
  base = std::clamp(base, 1, kMaxPyramidBase);
  BenchScene scene;
  scene.name = "S1";
  scene.sleep = false;
  scene.bodies.reserve(1 + static_cast<size_t>(base) * static_cast<size_t>(base + 1) / 2);
  scene.bodies.push_back(make_static_box({50.0f, 1.0f, 50.0f}, {0.0f, -1.0f, 0.0f}));
  const physics::Shape box = physics::make_box({kBodyHalfExtent, kBodyHalfExtent, kBodyHalfExtent});
  for (int row = 0; row < base; ++row) {
    const int count = base - row;
    for (int i = 0; i < count; ++i) {
      const float x = (static_cast<float>(i) - 0.5f * static_cast<float>(count - 1)) * 1.0f;
      const float y = 0.5f + static_cast<float>(row);
      scene.bodies.push_back(make_dynamic(box, {x, y, 0.0f}));
    }
  }
  scene.top_body = static_cast<uint32_t>(scene.bodies.size() - 1);
  return scene;
}

BenchScene make_s2_pile(int n) {
  n = std::clamp(n, 1, kMaxPileCount);
  constexpr int kSide = 19;
  constexpr int kPerLayer = kSide * kSide;
  constexpr double kSpacing = 1.5;
  BenchScene scene;
  scene.name = "S2";
  scene.sleep = true;
  scene.bodies.reserve(5 + static_cast<size_t>(n));
  scene.bodies.push_back(make_static_box({16.0f, 1.0f, 16.0f}, {0.0f, -1.0f, 0.0f}));
  scene.bodies.push_back(make_static_box({0.5f, 40.0f, 16.0f}, {15.5f, 40.0f, 0.0f}));
  scene.bodies.push_back(make_static_box({0.5f, 40.0f, 16.0f}, {-15.5f, 40.0f, 0.0f}));
  scene.bodies.push_back(make_static_box({16.0f, 40.0f, 0.5f}, {0.0f, 40.0f, 15.5f}));
  scene.bodies.push_back(make_static_box({16.0f, 40.0f, 0.5f}, {0.0f, 40.0f, -15.5f}));

  const physics::Shape box = physics::make_box({kBodyHalfExtent, kBodyHalfExtent, kBodyHalfExtent});
  Lcg lcg(12345);
  for (int i = 0; i < n; ++i) {
    const int layer = i / kPerLayer;
    const int r = i % kPerLayer;
    const int ix = r % kSide;
    const int iz = r / kSide;
    // Drawn in the specified order: x jitter, z jitter, axis x, y, z, angle.
    const double x = (ix - 9) * kSpacing + lcg.range(-0.05, 0.05);
    const double y = 1.0 + layer * kSpacing;
    const double z = (iz - 9) * kSpacing + lcg.range(-0.05, 0.05);
    const double ax = lcg.range(-1.0, 1.0);
    const double ay = lcg.range(-1.0, 1.0);
    const double az = lcg.range(-1.0, 1.0);
    const double angle = lcg.range(-0.3, 0.3);
    const double len = std::sqrt(ax * ax + ay * ay + az * az);
    const Vec3 axis = len < 1.0e-6 ? Vec3{1.0f, 0.0f, 0.0f}
                                   : Vec3{static_cast<float>(ax / len), static_cast<float>(ay / len),
                                          static_cast<float>(az / len)};
    const Quat tilt = normalize(quat_from_axis_angle(axis, static_cast<float>(angle)));
    scene.bodies.push_back(make_dynamic(
        box, {static_cast<float>(x), static_cast<float>(y), static_cast<float>(z)}, tilt));
  }
  return scene;
}

namespace {

// The 8 H1 rock shapes (hulls of 24 points from Lcg(2468)), added to the scene's hull list.
std::vector<physics::Shape> h1_rocks(BenchScene& scene) {
  Lcg lcg(2468);
  std::vector<physics::Shape> shapes;
  while (shapes.size() < 8) {
    std::vector<Vec3> points;
    for (int i = 0; i < 24; ++i) {
      points.push_back({static_cast<float>(lcg.range(-0.5, 0.5)), static_cast<float>(lcg.range(-0.4, 0.4)),
                        static_cast<float>(lcg.range(-0.45, 0.45))});
    }
    physics::HullBuild built = physics::build_convex_hull(points);
    if (!built.ok()) continue;
    scene.hulls.push_back(std::make_shared<const physics::ConvexHull>(std::move(built.hull)));
    shapes.push_back(physics::make_hull(*scene.hulls.back()));
  }
  return shapes;
}

float rolling(float x, float z) { return 2.0f * std::sin(0.05f * x) * std::cos(0.04f * z) + 0.5f * std::sin(0.3f * x + 0.2f * z); }

}  // namespace

BenchScene make_h1_hull_pile(int n) {
  n = std::clamp(n, 1, kMaxHullPileCount);
  BenchScene scene = make_s2_pile(n);
  scene.name = "H1";
  const std::vector<physics::Shape> shapes = h1_rocks(scene);
  size_t k = 0;
  for (SceneBody& body : scene.bodies) {
    if (body.kind == physics::BodyKind::Dynamic) body.shape = shapes[k++ % shapes.size()];
  }
  return scene;
}

BenchScene make_c1_cylinder_pile(int n) {
  n = std::clamp(n, 1, kMaxPileCount);
  BenchScene scene = make_s2_pile(n);
  scene.name = "C1";
  const physics::Shape shapes[] = {physics::make_cylinder(0.45f, 0.2f), physics::make_cylinder(0.3f, 0.5f),
                                   physics::make_cylinder(0.25f, 0.35f), physics::make_cylinder(0.4f, 0.45f)};
  size_t k = 0;
  for (SceneBody& body : scene.bodies) {
    if (body.kind == physics::BodyKind::Dynamic) body.shape = shapes[k++ % 4];
  }
  return scene;
}

void terrain_grid(int cells, float cell_size, std::vector<Vec3>* vertices, std::vector<uint32_t>* indices) {
  const float half = 0.5f * cell_size * static_cast<float>(cells);
  vertices->clear();
  indices->clear();
  vertices->reserve(static_cast<size_t>(cells + 1) * (cells + 1));
  indices->reserve(6 * static_cast<size_t>(cells) * cells);
  for (int j = 0; j <= cells; ++j) {
    for (int i = 0; i <= cells; ++i) {
      const float x = -half + cell_size * static_cast<float>(i);
      const float z = -half + cell_size * static_cast<float>(j);
      vertices->push_back({x, rolling(x, z), z});
    }
  }
  auto at = [&](int i, int j) { return static_cast<uint32_t>(j * (cells + 1) + i); };
  for (int j = 0; j < cells; ++j) {
    for (int i = 0; i < cells; ++i) {
      indices->insert(indices->end(), {at(i, j), at(i, j + 1), at(i + 1, j + 1), at(i, j), at(i + 1, j + 1), at(i + 1, j)});
    }
  }
}

BenchScene make_m1_mesh_terrain(int n) {
  n = std::clamp(n, 1, kMaxTerrainBodies);
  BenchScene scene;
  scene.name = "M1";
  scene.sleep = true;
  std::vector<Vec3> vertices;
  std::vector<uint32_t> indices;
  terrain_grid(224, 0.9f, &vertices, &indices);
  physics::MeshBuild built = physics::build_triangle_mesh(vertices, indices);
  scene.meshes.push_back(std::make_shared<const physics::TriangleMesh>(std::move(built.mesh)));
  SceneBody ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_mesh(*scene.meshes.back());
  scene.bodies.push_back(ground);
  const std::vector<physics::Shape> rocks = h1_rocks(scene);
  const physics::Shape box = physics::make_box({kBodyHalfExtent, kBodyHalfExtent, kBodyHalfExtent});
  for (int i = 0; i < n; ++i) {
    const int layer = i / 1764;
    const int r = i % 1764;
    const float x = (static_cast<float>(r % 42) - 20.5f) * 3.0f;
    const float z = (static_cast<float>(r / 42) - 20.5f) * 3.0f;
    const physics::Shape& shape = i % 9 == 8 ? box : rocks[static_cast<size_t>(i % 8)];
    scene.bodies.push_back(make_dynamic(shape, {x, 6.0f + 3.0f * static_cast<float>(layer), z}));
  }
  return scene;
}

BenchScene make_m2_heightfield(int n) {
  n = std::clamp(n, 1, kMaxTerrainBodies);
  BenchScene scene;
  scene.name = "M2";
  scene.sleep = true;
  constexpr uint32_t kSamples = 512;
  constexpr float kSpacing = 0.5f;
  const float half = 0.5f * kSpacing * static_cast<float>(kSamples - 1);
  std::vector<float> heights;
  heights.reserve(kSamples * kSamples);
  for (uint32_t j = 0; j < kSamples; ++j) {
    for (uint32_t i = 0; i < kSamples; ++i) {
      const float x = -half + kSpacing * static_cast<float>(i);
      const float z = -half + kSpacing * static_cast<float>(j);
      heights.push_back(3.0f * std::sin(0.04f * x) * std::cos(0.05f * z) + 0.4f * std::sin(0.25f * x));
    }
  }
  physics::HeightFieldBuild built = physics::build_heightfield(kSamples, kSamples, {kSpacing, 0.0f, kSpacing}, heights);
  scene.heightfields.push_back(std::make_shared<const physics::HeightField>(std::move(built.field)));
  SceneBody ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_heightfield(*scene.heightfields.back());
  ground.position = {-half, 0.0f, -half};
  scene.bodies.push_back(ground);
  const std::vector<physics::Shape> rocks = h1_rocks(scene);
  const physics::Shape kinds[3] = {physics::make_box({kBodyHalfExtent, kBodyHalfExtent, kBodyHalfExtent}),
                                   physics::make_sphere(kBodyHalfExtent), physics::make_capsule(0.3f, 0.4f)};
  for (int i = 0; i < n; ++i) {
    const int layer = i / 4096;
    const int r = i % 4096;
    const float x = (static_cast<float>(r % 64) - 31.5f) * 3.0f;
    const float z = (static_cast<float>(r / 64) - 31.5f) * 3.0f;
    const physics::Shape& shape = i % 4 == 3 ? rocks[static_cast<size_t>((i / 4) % 8)] : kinds[i % 4];
    scene.bodies.push_back(make_dynamic(shape, {x, 8.0f + 3.0f * static_cast<float>(layer), z}));
  }
  return scene;
}

BenchScene make_s3_spheres(int n) {
  n = std::clamp(n, 1, kMaxSphereCount);
  constexpr int kSide = 25;
  constexpr int kPerLayer = kSide * kSide;
  constexpr double kSpacing = 1.5;
  BenchScene scene;
  scene.name = "S3";
  scene.sleep = true;
  scene.bodies.reserve(1 + static_cast<size_t>(n));
  SceneBody plane;
  plane.kind = physics::BodyKind::Static;
  plane.shape = physics::make_plane();
  scene.bodies.push_back(plane);

  const physics::Shape sphere = physics::make_sphere(kBodyHalfExtent);
  Lcg lcg(6789);
  for (int i = 0; i < n; ++i) {
    const int layer = i / kPerLayer;
    const int r = i % kPerLayer;
    const int ix = r % kSide;
    const int iz = r / kSide;
    const double x = (ix - 12) * kSpacing + lcg.range(-0.1, 0.1);
    const double y = 1.0 + layer * kSpacing;
    const double z = (iz - 12) * kSpacing + lcg.range(-0.1, 0.1);
    scene.bodies.push_back(
        make_dynamic(sphere, {static_cast<float>(x), static_cast<float>(y), static_cast<float>(z)}));
  }
  return scene;
}

uint32_t count_dynamic(const BenchScene& scene) {
  return static_cast<uint32_t>(std::count_if(scene.bodies.begin(), scene.bodies.end(), [](const SceneBody& b) {
    return b.kind == physics::BodyKind::Dynamic;
  }));
}

BenchScene make_j1_joint_grid(int side) {
  const int n = std::clamp(side, 8, kMaxJointGridSide);
  BenchScene scene;
  scene.name = "J1";
  scene.sleep = false;
  constexpr float kRadius = 0.4f;
  constexpr float kDensity = 1000.0f;
  const float mass = kDensity * 4.0f / 3.0f * 3.14159265f * kRadius * kRadius * kRadius;
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < n; ++i) {
      SceneBody b;
      b.kind = i == 0 && k >= n / 2 - 3 && k <= n / 2 + 3 ? physics::BodyKind::Static : physics::BodyKind::Dynamic;
      b.shape = physics::make_sphere(kRadius);
      b.position = {static_cast<float>(k), -static_cast<float>(i), 0.0f};
      b.mass = mass;
      b.category = 2;
      b.mask = ~2u;
      const auto index = static_cast<uint32_t>(scene.bodies.size());
      scene.bodies.push_back(b);
      // Joints between two static bodies (the pinned row's neighbours) hold nothing: left out.
      auto join = [&](uint32_t other, Vec3 anchor) {
        if (b.kind == physics::BodyKind::Static && scene.bodies[other].kind == physics::BodyKind::Static) return;
        SceneJoint j;
        j.a = other;
        j.b = index;
        j.anchor = anchor;
        scene.joints.push_back(j);
      };
      if (i > 0) join(index - 1, b.position + Vec3{0.0f, 0.5f, 0.0f});
      if (k > 0) join(index - static_cast<uint32_t>(n), b.position - Vec3{0.5f, 0.0f, 0.0f});
    }
  }
  return scene;
}

void append_ragdoll(BenchScene* scene, Vec3 base, Vec3 velocity, bool joint_friction) {
  struct Part {
    physics::Shape shape;
    Vec3 at;  // from the feet's base [m]
    float mass;
  };
  const Part parts[] = {
      {physics::make_box({0.15f, 0.08f, 0.1f}), {0, 1.0f, 0}, 10.0f},          // 0 pelvis
      {physics::make_box({0.14f, 0.09f, 0.09f}), {0, 1.19f, 0}, 8.0f},         // 1 abdomen
      {physics::make_box({0.17f, 0.12f, 0.1f}), {0, 1.42f, 0}, 12.0f},         // 2 chest
      {physics::make_capsule(0.05f, 0.02f), {0, 1.6f, 0}, 1.0f},               // 3 neck
      {physics::make_sphere(0.1f), {0, 1.77f, 0}, 4.0f},                       // 4 head
      {physics::make_capsule(0.045f, 0.1f), {-0.25f, 1.37f, 0}, 2.0f},         // 5 upper arm
      {physics::make_capsule(0.04f, 0.09f), {-0.25f, 1.1f, 0}, 1.5f},          // 6 forearm
      {physics::make_capsule(0.045f, 0.1f), {0.25f, 1.37f, 0}, 2.0f},          // 7
      {physics::make_capsule(0.04f, 0.09f), {0.25f, 1.1f, 0}, 1.5f},           // 8
      {physics::make_capsule(0.065f, 0.14f), {-0.09f, 0.7f, 0}, 7.0f},         // 9 thigh
      {physics::make_capsule(0.05f, 0.14f), {-0.09f, 0.3f, 0}, 4.0f},          // 10 shin
      {physics::make_box({0.045f, 0.03f, 0.1f}), {-0.09f, 0.035f, 0.05f}, 1.0f},  // 11 foot
      {physics::make_capsule(0.065f, 0.14f), {0.09f, 0.7f, 0}, 7.0f},          // 12
      {physics::make_capsule(0.05f, 0.14f), {0.09f, 0.3f, 0}, 4.0f},           // 13
      {physics::make_box({0.045f, 0.03f, 0.1f}), {0.09f, 0.035f, 0.05f}, 1.0f},   // 14
  };
  const auto first = static_cast<uint32_t>(scene->bodies.size());
  for (const Part& p : parts) {
    SceneBody b;
    b.shape = p.shape;
    b.position = base + p.at;
    b.mass = p.mass;
    b.velocity = velocity;
    scene->bodies.push_back(b);
  }
  constexpr auto kSwing = physics::JointKind::SwingTwist;
  constexpr auto kHinge = physics::JointKind::Hinge;
  const Vec3 up{0, 1, 0}, down{0, -1, 0}, side{1, 0, 0};
  struct Link {
    physics::JointKind kind;
    uint32_t a, b;
    Vec3 at, axis;
    float cone, lower, upper, friction;
  };
  const Link links[] = {
      {kSwing, 0, 1, {0, 1.09f, 0}, up, 0.35f, -0.3f, 0.3f, 2.0f},
      {kSwing, 1, 2, {0, 1.29f, 0}, up, 0.35f, -0.3f, 0.3f, 2.0f},
      {kSwing, 2, 3, {0, 1.55f, 0}, up, 0.6f, -0.5f, 0.5f, 0.5f},
      {kSwing, 3, 4, {0, 1.66f, 0}, up, 0.6f, -0.5f, 0.5f, 0.5f},
      {kSwing, 2, 5, {-0.25f, 1.52f, 0}, down, 1.2f, -0.8f, 0.8f, 1.0f},
      {kHinge, 5, 6, {-0.25f, 1.23f, 0}, side, 0, -2.4f, 0, 0},
      {kSwing, 2, 7, {0.25f, 1.52f, 0}, down, 1.2f, -0.8f, 0.8f, 1.0f},
      {kHinge, 7, 8, {0.25f, 1.23f, 0}, side, 0, -2.4f, 0, 0},
      {kSwing, 0, 9, {-0.09f, 0.91f, 0}, down, 0.9f, -0.4f, 0.4f, 2.0f},
      {kHinge, 9, 10, {-0.09f, 0.5f, 0}, side, 0, 0, 2.4f, 0},
      {kHinge, 10, 11, {-0.09f, 0.08f, 0}, side, 0, -0.5f, 0.5f, 0},
      {kSwing, 0, 12, {0.09f, 0.91f, 0}, down, 0.9f, -0.4f, 0.4f, 2.0f},
      {kHinge, 12, 13, {0.09f, 0.5f, 0}, side, 0, 0, 2.4f, 0},
      {kHinge, 13, 14, {0.09f, 0.08f, 0}, side, 0, -0.5f, 0.5f, 0},
  };
  for (const Link& l : links) {
    SceneJoint j;
    j.kind = l.kind;
    j.a = first + l.a;
    j.b = first + l.b;
    j.anchor = base + l.at;
    j.axis = l.axis;
    j.cone = l.cone;
    j.lower = l.lower;
    j.upper = l.upper;
    j.friction = joint_friction ? l.friction : 0.0f;
    scene->joints.push_back(j);
  }
}

BenchScene make_j2_ragdolls(int count) {
  const int n = std::clamp(count, 1, kMaxRagdolls);
  BenchScene scene;
  scene.name = "J2";
  scene.sleep = true;
  SceneBody ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_box({50.0f, 1.0f, 50.0f});
  ground.position = {0.0f, -1.0f, 0.0f};
  scene.bodies.push_back(ground);
  // Columns of 10 on a grid 1.2 m apart, each ragdoll 2.2 m above the last, turned by a quarter
  // turn every level so the piles tangle (the turn is in the layout: bodies start unrotated).
  const int columns = (n + 9) / 10;
  const int side = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(columns))));
  for (int r = 0; r < n; ++r) {
    const int column = r / 10, level = r % 10;
    const float x = 1.2f * static_cast<float>(column % side) + (level % 2 == 0 ? 0.0f : 0.3f);
    const float z = 1.2f * static_cast<float>(column / side) + (level % 2 == 0 ? 0.0f : 0.2f);
    append_ragdoll(&scene, {x, 0.05f + 2.2f * static_cast<float>(level), z}, {});
  }
  return scene;
}

std::vector<ObjectID> load_into(physics::World& world, const BenchScene& scene) {
  std::vector<ObjectID> ids;
  ids.reserve(scene.bodies.size());
  for (const SceneBody& body : scene.bodies) {
    physics::BodyDesc desc;
    desc.kind = body.kind;
    desc.shape = body.shape;
    if (desc.shape.kind == physics::ShapeKind::Hull) {  // the scene's hull becomes the World's own
      const physics::ConvexHull* hull = world.add_hull(*desc.shape.hull);
      if (hull != nullptr) desc.shape = physics::make_hull(*hull);
    }
    if (desc.shape.kind == physics::ShapeKind::Mesh) {
      const physics::TriangleMesh* mesh = world.add_mesh(*desc.shape.mesh);
      if (mesh != nullptr) desc.shape = physics::make_mesh(*mesh);
    }
    if (desc.shape.kind == physics::ShapeKind::HeightField) {
      const physics::HeightField* field = world.add_heightfield(*desc.shape.heightfield);
      if (field != nullptr) desc.shape = physics::make_heightfield(*field);
    }
    desc.position = body.position;
    desc.orientation = body.orientation;
    desc.mass = body.mass;
    desc.friction = body.friction;
    desc.restitution = body.restitution;
    desc.velocity = body.velocity;
    desc.filter = physics::Filter{body.category, body.mask, 0};
    const physics::CreateResult created = world.create_object(desc);
    ids.push_back(created.error == physics::Error::Ok ? created.id : ObjectID{});
  }
  for (const SceneJoint& j : scene.joints) {
    physics::JointDesc desc;
    desc.kind = j.kind;
    desc.body_a = ids[j.a];
    desc.body_b = ids[j.b];
    desc.anchor = j.anchor;
    desc.axis = j.axis;
    desc.enable_limit = j.kind != physics::JointKind::Point;
    desc.lower_angle = j.lower;
    desc.upper_angle = j.upper;
    desc.cone_angle = j.cone;
    desc.friction_torque = j.friction;
    world.create_joint(desc);  // a refused joint shows in World::joint_count()
  }
  return ids;
}

}  // namespace impulse::scenes
