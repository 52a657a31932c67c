// Bullet 3.24 reference world for the benchmark scenes: sequential impulses (Catto 2005) with split
// impulse, as configured in docs/BENCHMARKS.md ("Engine settings").
#include "bench/bullet_runner.h"

#include <btBulletDynamicsCommon.h>

#include <BulletCollision/CollisionDispatch/btManifoldResult.h>
#include <BulletCollision/CollisionShapes/btHeightfieldTerrainShape.h>

#include <chrono>
#include <vector>

namespace impulse::bench {
namespace {

// Bullet clamps its combined friction to [-10, 10] (btManifoldResult.cpp); keep that here too.
constexpr btScalar kMaxCombinedFriction = 10.0f;

btScalar combine_friction_geometric(const btCollisionObject* a, const btCollisionObject* b) {
  const btScalar mu = btSqrt(a->getFriction() * b->getFriction());
  return mu > kMaxCombinedFriction ? kMaxCombinedFriction : mu;
}

btVector3 to_bt(Vec3 v) { return btVector3(v.x, v.y, v.z); }

// Identity of a shape object, so that e.g. 4000 unit boxes share one btBoxShape, as a Bullet
// user would write it.
struct ShapeKey {
  physics::ShapeKind kind;
  Vec3 half_extents;
  float radius;
  float half_height;
  const physics::ConvexHull* hull = nullptr;
  const void* surface = nullptr;  // a mesh or heightfield

  bool operator==(const ShapeKey&) const = default;
};

ShapeKey key_of(const physics::Shape& shape) {
  switch (shape.kind) {
    case physics::ShapeKind::Box: return {shape.kind, shape.half_extents, 0.0f, 0.0f};
    case physics::ShapeKind::Sphere: return {shape.kind, {}, shape.radius, 0.0f};
    case physics::ShapeKind::Capsule:
    case physics::ShapeKind::Cylinder: return {shape.kind, {}, shape.radius, shape.half_height};
    case physics::ShapeKind::Hull: return {shape.kind, {}, 0.0f, 0.0f, shape.hull};
    case physics::ShapeKind::Mesh: return {shape.kind, {}, 0.0f, 0.0f, nullptr, shape.mesh};
    case physics::ShapeKind::HeightField: return {shape.kind, {}, 0.0f, 0.0f, nullptr, shape.heightfield};
    default: return {physics::ShapeKind::Plane, {}, 0.0f, 0.0f};
  }
}

// A static surface's data as Bullet reads it: the arrays it points into, kept alive here.
struct SurfaceData {
  std::vector<btScalar> vertices;  // x, y, z per vertex
  std::vector<int> indices;        // 3 per triangle
  std::unique_ptr<btTriangleIndexVertexArray> arrays;
  std::vector<float> heights;      // heightfield samples, row by row along x
};


std::unique_ptr<btCollisionShape> make_bullet_mesh(const physics::TriangleMesh& mesh, SurfaceData& data) {
  data.vertices.reserve(3 * mesh.vertices.size());
  for (const Vec3& v : mesh.vertices) data.vertices.insert(data.vertices.end(), {v.x, v.y, v.z});
  data.indices.assign(mesh.indices.begin(), mesh.indices.end());
  data.arrays = std::make_unique<btTriangleIndexVertexArray>(
      static_cast<int>(mesh.triangle_count()), data.indices.data(), static_cast<int>(3 * sizeof(int)),
      static_cast<int>(mesh.vertices.size()), data.vertices.data(), static_cast<int>(3 * sizeof(btScalar)));
  // Quantised AABB compression on and the BVH built now, as a Bullet user has it.
  return std::make_unique<btBvhTriangleMeshShape>(data.arrays.get(), true, true);
}

std::unique_ptr<btCollisionShape> make_shape(const physics::Shape& shape, std::vector<std::unique_ptr<SurfaceData>>& surfaces) {
  switch (shape.kind) {
    case physics::ShapeKind::Box: return std::make_unique<btBoxShape>(to_bt(shape.half_extents));
    case physics::ShapeKind::Sphere: return std::make_unique<btSphereShape>(shape.radius);
    // btCapsuleShape's height is the distance between the hemisphere centres, along local Y.
    case physics::ShapeKind::Capsule:
      return std::make_unique<btCapsuleShape>(shape.radius, 2.0f * shape.half_height);
    // btCylinderShape takes half extents (radius, half height, radius) along local Y.
    case physics::ShapeKind::Cylinder:
      return std::make_unique<btCylinderShape>(btVector3(shape.radius, shape.half_height, shape.radius));
    // The same vertices, in the same (principal) frame, with Bullet's default collision margin
    // (4 cm, which rounds the hull outward), as a Bullet user has it.
    case physics::ShapeKind::Hull: {
      auto hull = std::make_unique<btConvexHullShape>();
      for (const Vec3& v : shape.hull->vertices) hull->addPoint(to_bt(v), false);
      hull->recalcLocalAabb();
      return hull;
    }
    case physics::ShapeKind::Mesh: {
      surfaces.push_back(std::make_unique<SurfaceData>());
      return make_bullet_mesh(*shape.mesh, *surfaces.back());
    }
    // The same (dequantised) samples. Bullet centres the field on its bounding box, so the body is
    // moved by half the box (bullet_body_offset).
    case physics::ShapeKind::HeightField: {
      const physics::HeightField& f = *shape.heightfield;
      surfaces.push_back(std::make_unique<SurfaceData>());
      std::vector<float>& h = surfaces.back()->heights;
      h.resize(f.heights.size());
      for (uint32_t j = 0; j < f.count_z; ++j) {
        for (uint32_t i = 0; i < f.count_x; ++i) h[j * f.count_x + i] = f.sample(i, j).y;
      }
      auto field = std::make_unique<btHeightfieldTerrainShape>(static_cast<int>(f.count_x), static_cast<int>(f.count_z),
                                                               h.data(), 1.0f, f.bounds.min.y, f.bounds.max.y, 1,
                                                               PHY_FLOAT, false);
      field->setLocalScaling(btVector3(f.spacing.x, 1.0f, f.spacing.z));
      return field;
    }
    // Local plane y = 0 with outward normal +Y, through the body's origin, as Impulse's.
    default: return std::make_unique<btStaticPlaneShape>(btVector3(0, 1, 0), 0.0f);
  }
}

}  // namespace

BulletMeshFigures measure_bullet_mesh(const std::vector<Vec3>& vertices, const std::vector<uint32_t>& indices) {
  std::vector<btScalar> xyz;
  xyz.reserve(3 * vertices.size());
  for (const Vec3& v : vertices) xyz.insert(xyz.end(), {v.x, v.y, v.z});
  std::vector<int> tris(indices.begin(), indices.end());
  BulletMeshFigures out;
  const auto start = std::chrono::steady_clock::now();
  btTriangleIndexVertexArray arrays(static_cast<int>(tris.size() / 3), tris.data(), static_cast<int>(3 * sizeof(int)),
                                    static_cast<int>(vertices.size()), xyz.data(), static_cast<int>(3 * sizeof(btScalar)));
  btBvhTriangleMeshShape shape(&arrays, true, true);
  out.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out.bvh_bytes = shape.getOptimizedBvh()->calculateSerializeBufferSize();
  out.array_bytes = xyz.size() * sizeof(btScalar) + tris.size() * sizeof(int);
  return out;
}

const char* to_string(BulletFrictionMix mix) {
  return mix == BulletFrictionMix::GeometricMean ? "geometric" : "product";
}

struct BulletWorld::Impl {
  btDefaultCollisionConfiguration collision_config;
  btCollisionDispatcher dispatcher{&collision_config};
  btDbvtBroadphase broadphase;
  btSequentialImpulseConstraintSolver solver;
  btDiscreteDynamicsWorld world{&dispatcher, &broadphase, &solver, &collision_config};

  std::vector<std::unique_ptr<SurfaceData>> surfaces;  // meshes' and heightfields' arrays: outlive the shapes
  std::vector<ShapeKey> shape_keys;  // index-aligned with shapes
  std::vector<std::unique_ptr<btCollisionShape>> shapes;
  std::vector<std::unique_ptr<btRigidBody>> bodies;  // index-aligned with scene.bodies
  std::vector<const btRigidBody*> dynamic_bodies;
  std::vector<std::unique_ptr<btTypedConstraint>> joints;

  ~Impl() {
    // Constraints, then bodies, leave the world before anything they point to is destroyed.
    for (auto it = joints.rbegin(); it != joints.rend(); ++it) world.removeConstraint(it->get());
    for (auto it = bodies.rbegin(); it != bodies.rend(); ++it) world.removeRigidBody(it->get());
  }

  btCollisionShape* find_or_make_shape(const physics::Shape& shape) {
    const ShapeKey key = key_of(shape);
    for (size_t i = 0; i < shape_keys.size(); ++i) {
      if (shape_keys[i] == key) return shapes[i].get();
    }
    shape_keys.push_back(key);
    shapes.push_back(make_shape(shape, surfaces));
    return shapes.back().get();
  }
};

BulletWorld::BulletWorld(const scenes::BenchScene& scene, const BulletOptions& options)
    : impl_(std::make_unique<Impl>()) {
  gCalculateCombinedFrictionCallback = options.friction_mix == BulletFrictionMix::GeometricMean
                                           ? &combine_friction_geometric
                                           : &btManifoldResult::calculateCombinedFriction;
  btDiscreteDynamicsWorld& world = impl_->world;
  world.setGravity(to_bt(scenes::kSceneGravity));
  btContactSolverInfo& info = world.getSolverInfo();
  info.m_numIterations = options.solver_iterations;
  info.m_splitImpulse = 1;

  impl_->bodies.reserve(scene.bodies.size());
  for (const scenes::SceneBody& body : scene.bodies) {
    btCollisionShape* shape = impl_->find_or_make_shape(body.shape);
    const bool dynamic = body.kind == physics::BodyKind::Dynamic;
    const btScalar mass = dynamic ? body.mass : 0.0f;
    btVector3 local_inertia(0, 0, 0);
    if (dynamic) shape->calculateLocalInertia(mass, local_inertia);
    // Bullet boxes a hull's inertia; give it the exact principal moments Impulse uses.
    if (dynamic && body.shape.kind == physics::ShapeKind::Hull) local_inertia = to_bt(body.shape.hull->unit_inertia * mass);

    btRigidBody::btRigidBodyConstructionInfo construction(mass, nullptr, shape, local_inertia);
    Vec3 origin = body.position;
    if (body.shape.kind == physics::ShapeKind::HeightField) {  // Bullet's field is centred on its box
      const physics::HeightField& f = *body.shape.heightfield;
      origin += Vec3{0.5f * f.spacing.x * static_cast<float>(f.count_x - 1), 0.5f * (f.bounds.min.y + f.bounds.max.y),
                     0.5f * f.spacing.z * static_cast<float>(f.count_z - 1)};
    }
    construction.m_startWorldTransform.setOrigin(to_bt(origin));
    construction.m_startWorldTransform.setRotation(
        btQuaternion(body.orientation.x, body.orientation.y, body.orientation.z, body.orientation.w));
    construction.m_friction = body.friction;
    construction.m_restitution = body.restitution;
    auto rigid = std::make_unique<btRigidBody>(construction);
    if (body.kind == physics::BodyKind::Kinematic) {
      rigid->setCollisionFlags(rigid->getCollisionFlags() | btCollisionObject::CF_KINEMATIC_OBJECT);
    }
    // Kinematic bodies never deactivate in Bullet's own usage either; static bodies are left alone.
    if ((!options.sleep && dynamic) || body.kind == physics::BodyKind::Kinematic) {
      rigid->setActivationState(DISABLE_DEACTIVATION);
    }
    // Bullet's filter is Box2D's rule: (a.group & b.mask) && (b.group & a.mask). The default
    // filter keeps Bullet's own default groups (static bodies apart), as S1-S3 were measured.
    if (body.category == 1 && body.mask == ~0u) {
      world.addRigidBody(rigid.get());
    } else {
      world.addRigidBody(rigid.get(), static_cast<int>(body.category), static_cast<int>(body.mask));
    }
    if (dynamic) {
      impl_->dynamic_bodies.push_back(rigid.get());
      if (!(body.velocity == Vec3{})) rigid->setLinearVelocity(to_bt(body.velocity));
    }
    impl_->bodies.push_back(std::move(rigid));
  }
  impl_->joints.reserve(scene.joints.size());
  for (const scenes::SceneJoint& j : scene.joints) {
    btRigidBody& a = *impl_->bodies[j.a];
    btRigidBody& b = *impl_->bodies[j.b];
    const btVector3 pivot = to_bt(j.anchor);
    const btVector3 pivot_a = a.getWorldTransform().invXform(pivot);
    const btVector3 pivot_b = b.getWorldTransform().invXform(pivot);
    const btVector3 axis = to_bt(j.axis);
    const btVector3 axis_a = a.getWorldTransform().getBasis().transpose() * axis;
    const btVector3 axis_b = b.getWorldTransform().getBasis().transpose() * axis;
    std::unique_ptr<btTypedConstraint> joint;
    switch (j.kind) {
      case physics::JointKind::Hinge: {
        auto hinge = std::make_unique<btHingeConstraint>(a, b, pivot_a, pivot_b, axis_a, axis_b);
        hinge->setLimit(j.lower, j.upper);
        joint = std::move(hinge);
        break;
      }
      case physics::JointKind::SwingTwist: {
        // The cone-twist's twist axis is its frames' local X: a frame in each body with X along
        // the joint's axis, at the pivot.
        auto frame = [](btVector3 x, btVector3 origin) {
          btVector3 y, z;
          btPlaneSpace1(x, y, z);
          btTransform t;
          t.getBasis().setValue(x.x(), y.x(), z.x(), x.y(), y.y(), z.y(), x.z(), y.z(), z.z());
          t.setOrigin(origin);
          return t;
        };
        auto cone = std::make_unique<btConeTwistConstraint>(a, b, frame(axis_a, pivot_a), frame(axis_b, pivot_b));
        cone->setLimit(j.cone, j.cone, std::max(std::fabs(j.lower), std::fabs(j.upper)));
        joint = std::move(cone);
        break;
      }
      default:
        joint = std::make_unique<btPoint2PointConstraint>(a, b, pivot_a, pivot_b);
        break;
    }
    world.addConstraint(joint.get(), /*disableCollisionsBetweenLinkedBodies=*/true);
    impl_->joints.push_back(std::move(joint));
  }
}

BulletWorld::~BulletWorld() = default;

void BulletWorld::step(float dt) { impl_->world.stepSimulation(dt, 0); }

uint32_t BulletWorld::awake_count() const {
  uint32_t awake = 0;
  for (const btRigidBody* body : impl_->dynamic_bodies) awake += body->isActive() ? 1u : 0u;
  return awake;
}

Vec3 BulletWorld::position(uint32_t index) const {
  if (index >= impl_->bodies.size()) return {};
  const btVector3& p = impl_->bodies[index]->getWorldTransform().getOrigin();
  return {p.x(), p.y(), p.z()};
}

}  // namespace impulse::bench
