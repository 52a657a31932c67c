// The fixed step of a 3D rigid-body world: sort-based spatial hashing, SAT contact manifolds with
// feature-matched warm starting, a soft-step sequential-impulse solver (Catto, "Solver2D", 2024;
// "Iterative Dynamics with Temporal Coherence", GDC 2005), islands and island sleep (as in Box2D,
// github.com/erincatto/box2d), over slot-map columns.
//
// step(dt) runs these stages in order. "Awake" bodies are the dynamic and kinematic bodies in the
// awake list; static and sleeping bodies are "parked": no stage reads or writes them except as
// an immovable contact partner.
//  0. guard        An awake body whose pose or motion (velocity, force, torque, inverse mass or
//                  inertia) is not finite is destroyed before any contact is built, so NaN never
//                  reaches a contact partner; removed_non_finite() lists it. Static and sleeping
//                  bodies are not scanned: they were finite when validated or when they fell
//                  asleep (a non-finite speed never passes the sleep test) and nothing moves them.
//                                                    reads: pose, motion   writes: like destroy
//  0. reactivate   If bodies woke since the last step (commands, destroy, a new static body),
//                  move their frozen resting contacts back into the previous-step contact list,
//                  so the event diff sees them.      reads/writes: resting_, contacts_
//  1. broadphase   Awake bodies are the moving proxies (id = slot index, AABB from the end of the
//                  last step, enlarged by the speculative margin and swept by velocity * dt);
//                  SpatialHash::find_pairs pairs
//                  them with each other and with the parked proxies, sorted by (a, b).
//                                                    reads: pose.aabb   writes: pairs
//  2. narrowphase  collide() per pair with the speculative margin grown by the pair's approach
//                  within the step (collide_pair): a manifold of up to 4 points.
//                  Pairs without a dynamic body or sensor, and sensor-sensor pairs, are skipped.
//                  A sleeping dynamic body touched (not as a sensor) by an awake dynamic body or a
//                  moving kinematic body is marked for waking, unless held (put_to_sleep's hold).
//                  With a worker pool, runs of consecutive pairs collide on its threads and are
//                  appended in pair order.
//                                                    reads: pose, shape, info   writes: found
//  3. events       Merge join of the previous contact list and `found`: Begin/End events (merged
//                  with the End events of bodies destroyed since the last step), per-body contact
//                  counts, and the impulses of each persisting point matched by feature id (warm
//                  start). A sleeping body that lost a contact with an awake body is marked for
//                  waking.                             reads: contacts_, found   writes: events_
//  4. wake         The islands of marked bodies wake (velocity 0) and leave the parked set. Their
//                  resting contacts are still exact and the broadphase already ran without them,
//                  so they join this step's list. The wake front (wake_front) then collides
//                  each woken body with the parked bodies it overlaps and wakes the sleepers it
//                  touches, until none is left: contacts_ = found + reactivated + front.
//                                                    writes: info, awake_, broadphase, contacts_
//  5. solve        One SolverManifold per non-sensor contact with a movable body: anchors, masses,
//                  mixed friction and restitution (material-pair table, else the mixing rules).
//                  Then the soft step (solver.h): substeps x (integrate velocities with gravity,
//                  forces and torques, the gyroscopic torque -w x (I w) in the body frame by the
//                  implicit midpoint rule (3 Newton iterations; Catto, "Numerical Methods", GDC
//                  2015), so a free spinning body keeps its energy and |L|), warm start, solve
//                  with soft bias, integrate positions, relax), then restitution; impulses
//                  stored back. With a worker pool, the contact-connected
//                  groups of movable bodies are solved in batches on its threads, bit-identical to
//                  one thread (see World::solve). Force and torque accumulators cleared.
//                                                    reads: contacts_, material, pose, motion
//                                                    writes: motion, contacts_ impulses
//  6. write-back   First the net: a contact group whose solve ended non-finite is put back as the
//                  step found it (World::restored_non_finite; nothing removed). Then poses written
//                  from the solver's position and rotation deltas (quaternion renormalised),
//                  velocities capped at max_speed and max_angular_speed, AABBs refreshed. A
//                  dynamic body that moved more than half its inner extent is listed as fast
//                  (with a pool, the poses per body on its threads, the fast list after, in awake
//                  order).
//                                                    reads: solver bodies   writes: pose, motion
//  6b. continuous  Only if a body is fast (world_continuous.cpp): swept from its start to its end
//                  position against static bodies (a bullet also against non-bullet dynamic and
//                  kinematic ones); one that ends sunk into or through a shape it met moves back
//                  to the time of impact, velocity kept.   reads: pose, shape, info   writes: pose
//  7. islands      Sleep timers (linear speed and angular speed x extent below sleep_speed;
//                  kinematic: stopped; a body touching a moving kinematic body never rests). Union-
//                  find over the awake dynamic bodies joined by solved manifolds gives the islands;
//                  an island whose every body rested for sleep_time_s falls asleep: velocities 0,
//                  parked, members recorded, and contacts between two parked bodies move to the
//                  resting list with their geometry and impulses frozen (no End event).
//                                                    writes: info, awake_, broadphase, resting_
//  8. broken joints  A joint whose reaction passed its break_force or break_torque in the solve
//                  is destroyed (its bodies woken) and listed by broken_joints().
//                                                    writes: joints_, broken_joints_
// Files: the storage and stages 0-4 here, the commands (forces, impulses, velocities, kinematic
// targets, materials, filters) in world_commands.cpp; the solve and write-back (5, 6) in
// world_solve.cpp, continuous collision (6b) in world_continuous.cpp, the islands (7) in world_islands.cpp,
// the joints (their rows in joint.cpp; creation, preparation and breaking, 8, in world_joints.cpp), world_hash and awake_hash in
// world_hash.cpp, save and restore in world_state.cpp, queries in world_queries.cpp.
// Every loop runs over dense arrays in an order fixed by the operation history (awake list,
// sorted pair and contact lists), never over an unordered container, so the same inputs give
// bit-identical results.
// Over 700 lines on purpose: the step's stages in order (listed above); the solve, the queries, the
// commands, joints and the state image are already files of their own.
#include "server/physics/world.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>

#include "server/physics/narrowphase.h"
#include "server/physics/world_internal.h"
#include "shared/parallel.h"

namespace impulse::physics {

using detail::fat_aabb;
using detail::is_finite_non_negative;
using detail::is_finite_positive;
using detail::safe_inverse;
using detail::StageTimer;
using detail::length_within;
using detail::within;

const char* to_string(Error e) {
  switch (e) {
    case Error::Ok: return "ok";
    case Error::StaleId: return "stale id: null, out of range, or destroyed";
    case Error::NotDynamic: return "not dynamic: the operation needs a dynamic body";
    case Error::InvalidArgument: return "invalid argument: not finite or out of range";
    case Error::WorldFull: return "world full: max_objects reached";
  }
  return "unknown error";
}

float max_force(const WorldSettings& s) { return s.max_mass * s.max_speed * kMaxPushRate; }
float max_impulse(const WorldSettings& s) { return s.max_mass * s.max_speed; }
float max_torque(const WorldSettings& s) { return max_force(s) * s.max_extent; }
float max_angular_impulse(const WorldSettings& s) { return max_impulse(s) * s.max_extent; }

namespace {

// The reason a shape is unusable ("field: rule"), or nullptr.
const char* check_shape(const Shape& shape, BodyKind kind, const WorldSettings& s) {
  switch (shape.kind) {
    case ShapeKind::Sphere:
      if (!(shape.radius >= kMinExtent && shape.radius <= s.max_extent)) {  // NaN fails
        return "radius: must be in [kMinExtent (1 mm), max_extent]";
      }
      return nullptr;
    case ShapeKind::Box: {
      const Vec3 h = shape.half_extents;
      if (!(within(h, s.max_extent) && h.x >= kMinExtent && h.y >= kMinExtent && h.z >= kMinExtent)) {
        return "half_extents: each must be in [kMinExtent (1 mm), max_extent]";
      }
      return nullptr;
    }
    case ShapeKind::Capsule:
      if (!(shape.radius >= kMinExtent && shape.radius <= s.max_extent)) {
        return "radius: must be in [kMinExtent (1 mm), max_extent]";
      }
      if (!(is_finite_non_negative(shape.half_height) && shape.half_height <= s.max_extent)) {
        return "half_height: must be in [0, max_extent]";
      }
      return nullptr;
    case ShapeKind::Cylinder:
      if (!(shape.radius >= kMinExtent && shape.radius <= s.max_extent)) {
        return "radius: must be in [kMinExtent (1 mm), max_extent]";
      }
      if (!(shape.half_height >= kMinExtent && shape.half_height <= s.max_extent)) {  // NaN fails
        return "half_height: must be in [kMinExtent (1 mm), max_extent]";
      }
      return nullptr;
    case ShapeKind::Plane:
      return kind == BodyKind::Static ? nullptr : "shape: a plane must be a static body";
    case ShapeKind::Hull:
      if (shape.hull == nullptr) return "hull: no hull (World::add_hull)";
      if (!(shape.hull->radius <= s.max_extent)) return "hull: its radius exceeds max_extent";
      return nullptr;
    case ShapeKind::Mesh:
      if (shape.mesh == nullptr) return "mesh: no mesh (World::add_mesh)";
      return kind == BodyKind::Static ? nullptr : "shape: a mesh must be a static body";
    case ShapeKind::HeightField:
      if (shape.heightfield == nullptr) return "heightfield: no heightfield (World::add_heightfield)";
      return kind == BodyKind::Static ? nullptr : "shape: a heightfield must be a static body";
    case ShapeKind::Count:
      break;
  }
  return "shape: unknown shape kind";
}

// Only the fields the shape kind uses are kept; the rest are made consistent.
Shape normalize_shape(const Shape& shape) {
  switch (shape.kind) {
    case ShapeKind::Sphere: return make_sphere(shape.radius);
    case ShapeKind::Box: return make_box(shape.half_extents);
    case ShapeKind::Capsule: return make_capsule(shape.radius, shape.half_height);
    case ShapeKind::Cylinder: return make_cylinder(shape.radius, shape.half_height);
    case ShapeKind::Hull: return make_hull(*shape.hull);
    case ShapeKind::Mesh: return make_mesh(*shape.mesh);
    case ShapeKind::HeightField: return make_heightfield(*shape.heightfield);
    default: return make_plane();
  }
}

// Principal moments of inertia [kg m^2] of the solid shape with uniform density, local axes.
Vec3 shape_inertia(const Shape& shape, float mass) {
  switch (shape.kind) {
    case ShapeKind::Sphere: {
      const float i = 0.4f * mass * shape.radius * shape.radius;
      return {i, i, i};
    }
    case ShapeKind::Box: {
      const Vec3 h = shape.half_extents;
      const float k = mass / 3.0f;  // m (b^2 + c^2) / 3 for half extents b, c
      return {k * (h.y * h.y + h.z * h.z), k * (h.x * h.x + h.z * h.z), k * (h.x * h.x + h.y * h.y)};
    }
    case ShapeKind::Capsule: {
      // Cylinder of length 2h plus two hemispheres (each hemisphere's centroid 3r/8 from its
      // flat face; parallel-axis theorem), masses split by volume.
      const float r = shape.radius;
      const float h = shape.half_height;
      const float cylinder_volume = 2.0f * h * r * r;           // / pi
      const float sphere_volume = (4.0f / 3.0f) * r * r * r;    // / pi
      const float mc = mass * cylinder_volume / (cylinder_volume + sphere_volume);
      const float mh = 0.5f * (mass - mc);  // each hemisphere
      const float axial = 0.5f * mc * r * r + 2.0f * mh * 0.4f * r * r;
      const float transverse =
          mc * (0.25f * r * r + h * h / 3.0f) + 2.0f * mh * (0.4f * r * r + h * h + 0.75f * h * r);
      return {transverse, axial, transverse};
    }
    case ShapeKind::Cylinder: {
      // Solid cylinder of radius r and height 2h: m r^2 / 2 about its axis, m (3 r^2 + (2h)^2) / 12
      // about a diameter through the centre.
      const float r2 = shape.radius * shape.radius;
      const float h2 = shape.half_height * shape.half_height;
      const float transverse = mass * (3.0f * r2 + 4.0f * h2) / 12.0f;
      return {transverse, 0.5f * mass * r2, transverse};
    }
    case ShapeKind::Hull: return shape.hull->unit_inertia * mass;  // principal frame (convex_hull.h)
    default: return {};
  }
}

float shape_extent(const Shape& shape) {
  switch (shape.kind) {
    case ShapeKind::Sphere: return shape.radius;
    case ShapeKind::Box: return length(shape.half_extents);
    case ShapeKind::Capsule: return shape.half_height + shape.radius;
    case ShapeKind::Cylinder: return std::sqrt(shape.radius * shape.radius + shape.half_height * shape.half_height);
    case ShapeKind::Hull: return shape.hull->radius;
    default: return 0.0f;
  }
}

}  // namespace

const char* check_body_desc(const BodyDesc& d, const WorldSettings& s) {
  if (static_cast<uint8_t>(d.kind) > static_cast<uint8_t>(BodyKind::Kinematic)) return "kind: unknown body kind";
  if (static_cast<uint8_t>(d.shape.kind) >= static_cast<uint8_t>(ShapeKind::Count)) return "shape: unknown shape kind";
  if (const char* problem = check_shape(d.shape, d.kind, s)) return problem;
  if (!is_finite(d.orientation) || std::fabs(std::sqrt(dot(d.orientation, d.orientation)) - 1.0f) > 1.0e-3f) {
    return "orientation: must be a finite unit quaternion";
  }
  if (!within(d.position, s.max_coordinate)) return "position: each component must be finite and within max_coordinate";
  if (!length_within(d.velocity, s.max_speed)) return "velocity: must be finite with |v| <= max_speed (500 m/s)";
  if (!length_within(d.angular_velocity, s.max_angular_speed)) {
    return "angular_velocity: must be finite with |w| <= max_angular_speed (47.1 rad/s)";
  }
  if (!std::isfinite(d.mass)) return "mass: must be finite";
  if (d.kind == BodyKind::Dynamic) {
    if (!(d.mass > 0 && d.mass <= s.max_mass)) return "mass: must be in (0, max_mass] for a dynamic body";
    if (!detail::density_within(normalize_shape(d.shape), d.mass)) {
      return "mass: the density (mass / the shape's volume) must be in [1e-3, 1e5] kg/m^3";
    }
    // A subnormal mass would make 1 / mass infinite, and a light, small body's inertia can
    // underflow likewise (safe_inverse maps only moments that are not positive to 0). The density
    // floor keeps both finite; this check stays as the direct statement of what the solver needs.
    if (!std::isfinite(1.0f / d.mass) ||
        !is_finite(detail::safe_inverse(shape_inertia(normalize_shape(d.shape), d.mass)))) {
      return "mass: too small for the shape: the inverse mass or inertia would not be finite";
    }
  }
  if (!(d.restitution >= 0 && d.restitution <= 1)) return "restitution: must be in [0, 1]";
  if (!is_finite_non_negative(d.friction)) return "friction: must be finite and >= 0";
  if (!is_finite_non_negative(d.linear_damping) || !is_finite_non_negative(d.angular_damping)) {
    return "damping: must be finite and >= 0";
  }
  return nullptr;
}

const char* check_settings(const WorldSettings& s) {
  if (!is_finite(s.gravity)) return "gravity must be finite";
  if (!(s.cell_size >= kMinCellSize && s.cell_size <= kMaxCellSize)) return "cell_size must be in [0.01, 1000] m";
  if (s.max_cells_per_body < 1 || s.max_cells_per_body > kMaxCellsPerBody) {
    return "max_cells_per_body must be in [1, 4096]";
  }
  if (!is_finite_non_negative(s.speculative_margin) || s.speculative_margin > 1.0f) {
    return "speculative_margin must be in [0, 1] m";
  }
  if (s.substeps < 1 || s.substeps > 64) return "substeps must be in [1, 64]";
  if (s.relax_iterations < 0 || s.relax_iterations > 64) return "relax_iterations must be in [0, 64]";
  if (!is_finite_positive(s.contact_hertz)) return "contact_hertz must be finite and > 0";
  if (!is_finite_non_negative(s.contact_damping_ratio)) return "contact_damping_ratio must be finite and >= 0";
  if (!is_finite_positive(s.contact_push_max_speed)) return "contact_push_max_speed must be finite and > 0";
  if (!is_finite_non_negative(s.linear_slop)) return "linear_slop must be finite and >= 0";
  if (!is_finite_non_negative(s.restitution_threshold)) {
    return "restitution_threshold must be finite and >= 0";
  }
  if (static_cast<uint8_t>(s.friction_mix) > static_cast<uint8_t>(MixRule::Multiply) ||
      static_cast<uint8_t>(s.restitution_mix) > static_cast<uint8_t>(MixRule::Multiply)) {
    return "friction_mix and restitution_mix must be known MixRule values";
  }
  if (!is_finite_non_negative(s.sleep_speed)) return "sleep_speed must be finite and >= 0";
  if (!is_finite_non_negative(s.sleep_time_s)) return "sleep_time_s must be finite and >= 0";
  if (!is_finite_positive(s.max_coordinate)) return "max_coordinate must be finite and > 0";
  if (!is_finite_positive(s.max_speed)) return "max_speed must be finite and > 0";
  if (!is_finite_positive(s.max_angular_speed)) return "max_angular_speed must be finite and > 0";
  if (!is_finite_positive(s.max_extent)) return "max_extent must be finite and > 0";
  if (!is_finite_positive(s.max_mass)) return "max_mass must be finite and > 0";
  if (!std::isfinite(s.max_mass * s.max_speed * s.max_extent)) {
    return "max_mass * max_speed * max_extent must be finite";
  }
  if (s.max_objects == 0) return "max_objects must be > 0";
  return nullptr;
}

namespace {

WorldSettings sanitize(WorldSettings s) {
  const WorldSettings d;
  if (!is_finite(s.gravity)) s.gravity = d.gravity;
  if (!(s.cell_size >= kMinCellSize && s.cell_size <= kMaxCellSize)) s.cell_size = d.cell_size;
  if (s.max_cells_per_body < 1 || s.max_cells_per_body > kMaxCellsPerBody) s.max_cells_per_body = d.max_cells_per_body;
  if (!is_finite_non_negative(s.speculative_margin) || s.speculative_margin > 1.0f) {
    s.speculative_margin = d.speculative_margin;
  }
  if (s.substeps < 1 || s.substeps > 64) s.substeps = d.substeps;
  if (s.relax_iterations < 0 || s.relax_iterations > 64) s.relax_iterations = d.relax_iterations;
  if (!is_finite_positive(s.contact_hertz)) s.contact_hertz = d.contact_hertz;
  if (!is_finite_non_negative(s.contact_damping_ratio)) s.contact_damping_ratio = d.contact_damping_ratio;
  if (!is_finite_positive(s.contact_push_max_speed)) s.contact_push_max_speed = d.contact_push_max_speed;
  if (!is_finite_non_negative(s.linear_slop)) s.linear_slop = d.linear_slop;
  if (!is_finite_non_negative(s.restitution_threshold)) s.restitution_threshold = d.restitution_threshold;
  if (static_cast<uint8_t>(s.friction_mix) > static_cast<uint8_t>(MixRule::Multiply)) s.friction_mix = d.friction_mix;
  if (static_cast<uint8_t>(s.restitution_mix) > static_cast<uint8_t>(MixRule::Multiply)) {
    s.restitution_mix = d.restitution_mix;
  }
  if (!is_finite_non_negative(s.sleep_speed)) s.sleep_speed = d.sleep_speed;
  if (!is_finite_non_negative(s.sleep_time_s)) s.sleep_time_s = d.sleep_time_s;
  if (!is_finite_positive(s.max_coordinate)) s.max_coordinate = d.max_coordinate;
  if (!is_finite_positive(s.max_speed)) s.max_speed = d.max_speed;
  if (!is_finite_positive(s.max_angular_speed)) s.max_angular_speed = d.max_angular_speed;
  if (!is_finite_positive(s.max_extent)) s.max_extent = d.max_extent;
  if (!is_finite_positive(s.max_mass)) s.max_mass = d.max_mass;
  if (!std::isfinite(s.max_mass * s.max_speed * s.max_extent)) {
    s.max_mass = d.max_mass;
    s.max_speed = d.max_speed;
    s.max_extent = d.max_extent;
  }
  if (s.max_objects == 0) s.max_objects = d.max_objects;
  return s;
}

}  // namespace

World::World(const WorldSettings& settings)
    : settings_(sanitize(settings)), broadphase_(settings_.cell_size, settings_.max_cells_per_body) {}

// --- Storage -------------------------------------------------------------------------------------

const ConvexHull* World::add_hull(const ConvexHull& hull, std::string* error) {
  std::string problem = check_hull(hull);
  if (problem.empty() && !(hull.radius <= settings_.max_extent)) problem = "radius: exceeds max_extent";
  if (problem.empty() && hulls_.size() >= kMaxWorldHulls) problem = "the world holds kMaxWorldHulls (4096) hulls";
  if (!problem.empty()) {
    if (error != nullptr) *error = "hull: " + problem;
    return nullptr;
  }
  for (const auto& h : hulls_) {
    if (*h == hull) return h.get();
  }
  auto copy = std::make_shared<ConvexHull>(hull);
  copy->id = static_cast<uint32_t>(hulls_.size());
  hulls_.push_back(std::move(copy));
  return hulls_.back().get();
}

const TriangleMesh* World::add_mesh(const TriangleMesh& mesh, std::string* error) {
  std::string problem;
  if (meshes_.size() >= kMaxWorldMeshes) problem = "the world holds kMaxWorldMeshes (256) meshes";
  if (problem.empty() && (mesh.nodes.empty() || mesh.edge_flags.size() != mesh.triangle_count())) {
    problem = "not built by build_triangle_mesh";
  }
  if (!problem.empty()) {
    if (error != nullptr) *error = "mesh: " + problem;
    return nullptr;
  }
  for (const auto& m : meshes_) {
    if (*m == mesh) return m.get();
  }
  auto copy = std::make_shared<TriangleMesh>(mesh);
  copy->id = static_cast<uint32_t>(meshes_.size());
  meshes_.push_back(std::move(copy));
  return meshes_.back().get();
}

const HeightField* World::add_heightfield(const HeightField& field, std::string* error) {
  HeightField copy = field;
  std::string problem = check_heightfield(copy);
  if (problem.empty() && heightfields_.size() >= kMaxWorldHeightFields) {
    problem = "the world holds kMaxWorldHeightFields (256) heightfields";
  }
  if (!problem.empty()) {
    if (error != nullptr) *error = "heightfield: " + problem;
    return nullptr;
  }
  for (const auto& h : heightfields_) {
    if (*h == copy) return h.get();
  }
  copy.id = static_cast<uint32_t>(heightfields_.size());
  heightfields_.push_back(std::make_shared<HeightField>(std::move(copy)));
  return heightfields_.back().get();
}

CreateResult World::create_object(const BodyDesc& desc) {
  if (check_body_desc(desc, settings_) != nullptr) return {Error::InvalidArgument, {}};
  if (desc.shape.kind == ShapeKind::Hull &&
      !(desc.shape.data_id < hulls_.size() && hulls_[desc.shape.data_id].get() == desc.shape.hull)) {
    return {Error::InvalidArgument, {}};  // a hull of another World, or none
  }
  if (desc.shape.kind == ShapeKind::Mesh &&
      !(desc.shape.data_id < meshes_.size() && meshes_[desc.shape.data_id].get() == desc.shape.mesh)) {
    return {Error::InvalidArgument, {}};  // a mesh of another World, or none
  }
  if (desc.shape.kind == ShapeKind::HeightField &&
      !(desc.shape.data_id < heightfields_.size() && heightfields_[desc.shape.data_id].get() == desc.shape.heightfield)) {
    return {Error::InvalidArgument, {}};  // a heightfield of another World, or none
  }
  if (slots_.size() >= settings_.max_objects) return {Error::WorldFull, {}};
  const ObjectID id = slots_.create();
  if (id.is_null()) return {Error::WorldFull, {}};

  const Shape shape = normalize_shape(desc.shape);
  const Quat orientation = normalize(desc.orientation);
  Pose pose{desc.position, orientation,
            fat_aabb(shape, Transform{desc.position, orientation}, settings_.speculative_margin)};
  Motion motion;
  BodyInfo info;
  info.kind = desc.kind;
  info.sensor = desc.sensor;
  info.bullet = desc.bullet && desc.kind == BodyKind::Dynamic;
  info.filter = desc.filter;
  info.extent = shape_extent(shape);
  if (desc.kind == BodyKind::Dynamic) {
    motion.velocity = desc.velocity;
    motion.angular_velocity = desc.angular_velocity;
    motion.inv_mass = 1.0f / desc.mass;
    motion.inv_inertia = safe_inverse(shape_inertia(shape, desc.mass));
    motion.linear_damping = desc.linear_damping;
    motion.angular_damping = desc.angular_damping;
    info.mass = desc.mass;
  } else if (desc.kind == BodyKind::Kinematic) {
    motion.velocity = desc.velocity;
    motion.angular_velocity = desc.angular_velocity;
  }
  bodies_.push_back(pose, motion, shape, Material{desc.restitution, desc.friction, desc.material}, info);
  const uint32_t dense = bodies_.size() - 1;

  if (desc.kind == BodyKind::Static) {
    // Parked proxies are never paired with each other, so sleeping bodies the new static body
    // overlaps would never learn about it: wake them.
    broadphase_.query(pose.aabb, scratch_.query_hits);
    for (const uint32_t slot : scratch_.query_hits) {
      const uint32_t other = slots_.dense_of_slot(slot);
      if (other == SlotMap::kNone || other == dense) continue;
      if (bodies_.info[other].sleeping && overlaps(bodies_.pose[other].aabb, pose.aabb)) wake_body(other);
    }
    broadphase_.add_parked(id.index, pose.aabb);
  } else {
    add_awake(dense);
    if (desc.asleep) {
      // Asleep alone, on an island of its own (a kinematic body sleeps alone anyway).
      const uint32_t members[1] = {dense};
      sleep_island(members);
    }
  }
  return {Error::Ok, id};
}

Error World::destroy_object(ObjectID id) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;

  // A sleeping body leaves its island; the rest of the island wakes below (its support changed).
  if (bodies_.info[dense].sleeping) wake_body(dense);
  if (live_joints_ > 0) destroy_joints_of(id);

  if (bodies_.info[dense].contact_count > 0) {
    // Drop its contacts from both lists (one compaction pass each), end them with the next step's
    // events, and wake sleeping partners: their support may be gone.
    for (std::vector<ContactRecord>* list : {&contacts_, &resting_}) {
      size_t keep = 0;
      for (size_t i = 0; i < list->size(); ++i) {
        const Contact& c = (*list)[i].contact;
        if (c.a != id && c.b != id) {
          (*list)[keep++] = (*list)[i];
          continue;
        }
        if (i > 0 && same_pair((*list)[i - 1], (*list)[i])) continue;  // the pair's later manifolds
        pending_events_.push_back(make_event(ContactEventType::End, c));
        const uint32_t partner = slots_.find(c.a == id ? c.b : c.a);
        --bodies_.info[partner].contact_count;
        if (tick_ >= bodies_.info[partner].held_until) wake_body(partner);  // a held body stays put
      }
      list->resize(keep);
    }
    invalidate_queries();
  }

  if (is_parked(dense)) {
    broadphase_.remove_parked(id.index);
  } else {
    remove_awake(dense);
  }
  const auto erased = slots_.destroy(id);
  bodies_.swap_remove(erased->hole, erased->last);
  return Error::Ok;
}

bool World::is_valid(ObjectID id) const { return slots_.contains(id); }

uint32_t World::contact_count_of(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  return dense == SlotMap::kNone ? 0 : bodies_.info[dense].contact_count;
}

bool World::is_held_asleep(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  return dense != SlotMap::kNone && bodies_.info[dense].sleeping && tick_ < bodies_.info[dense].held_until;
}

bool World::is_asleep(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  return dense != SlotMap::kNone && bodies_.info[dense].kind != BodyKind::Static && bodies_.info[dense].sleeping;
}

bool World::is_awake(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  return dense != SlotMap::kNone && bodies_.info[dense].kind != BodyKind::Static && !bodies_.info[dense].sleeping;
}

std::optional<BodyState> World::get_object(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return std::nullopt;
  return state_at_dense(dense);
}

uint32_t World::object_count() const { return slots_.size(); }
uint32_t World::awake_count() const { return static_cast<uint32_t>(awake_.size()); }

BodyState World::state_at_dense(uint32_t dense) const {
  const BodyInfo& info = bodies_.info[dense];
  const Motion& m = bodies_.motion[dense];
  BodyState s;
  s.id = slots_.id_at(dense);
  s.kind = info.kind;
  s.shape = bodies_.shape[dense];
  s.position = bodies_.pose[dense].position;
  s.orientation = bodies_.pose[dense].orientation;
  s.velocity = m.velocity;
  s.angular_velocity = m.angular_velocity;
  s.mass = info.mass;
  s.restitution = bodies_.material[dense].restitution;
  s.friction = bodies_.material[dense].friction;
  s.material = bodies_.material[dense].id;
  s.sensor = info.sensor;
  s.sleeping = info.sleeping;
  s.filter = info.filter;
  s.bullet = info.bullet;
  return s;
}

bool World::is_parked(uint32_t dense) const {
  const BodyInfo& info = bodies_.info[dense];
  return info.kind == BodyKind::Static || info.sleeping;
}

void World::add_awake(uint32_t dense) {
  bodies_.info[dense].awake_index = static_cast<uint32_t>(awake_.size());
  awake_.push_back(slots_.slot_at(dense));
}

void World::remove_awake(uint32_t dense) {
  const uint32_t index = bodies_.info[dense].awake_index;
  const uint32_t moved_slot = awake_.back();
  awake_[index] = moved_slot;
  bodies_.info[slots_.dense_of_slot(moved_slot)].awake_index = index;
  awake_.pop_back();
}

void World::wake_body(uint32_t dense, std::vector<uint32_t>* unpark) {
  auto leave_parked = [&](uint32_t slot) {
    if (unpark != nullptr) {
      unpark->push_back(slot);
    } else {
      broadphase_.remove_parked(slot);
    }
  };
  const BodyInfo& info = bodies_.info[dense];
  if (!info.sleeping) return;
  if (info.kind != BodyKind::Dynamic) {
    // A kinematic body sleeps alone.
    BodyInfo& k = bodies_.info[dense];
    k.sleeping = false;
    k.sleep_timer = 0;
    k.held_until = 0;
    add_awake(dense);
    leave_parked(slots_.slot_at(dense));
    resting_dirty_ = true;
    return;
  }
  const uint32_t island = info.island;
  std::vector<uint32_t>& members = sleeping_islands_[island];
  for (const uint32_t slot : members) {
    const uint32_t d = slots_.dense_of_slot(slot);
    if (d == SlotMap::kNone) continue;  // destroyed while asleep (ids are checked below)
    BodyInfo& mi = bodies_.info[d];
    if (!mi.sleeping || mi.island != island) continue;
    mi.sleeping = false;
    mi.sleep_timer = 0;
    mi.held_until = 0;  // a command, or an island-mate touched: the hold is over
    add_awake(d);
    leave_parked(slot);
  }
  members.clear();
  free_islands_.push_back(island);
  resting_dirty_ = true;
}

void World::reactivate_resting(std::vector<ContactRecord>& out) {
  // Stable partition: contacts that still join two parked bodies stay, the rest leave in order.
  out.clear();
  size_t keep = 0;
  for (size_t i = 0; i < resting_.size(); ++i) {
    const Contact& c = resting_[i].contact;
    if (is_parked(slots_.find(c.a)) && is_parked(slots_.find(c.b))) {
      resting_[keep++] = resting_[i];
    } else {
      out.push_back(resting_[i]);
    }
  }
  resting_.resize(keep);
  resting_dirty_ = false;
}

// --- Step ----------------------------------------------------------------------------------------

void World::step(float dt) {
  if (!std::isfinite(dt) || dt <= 0) return;
  StageTimer total;
  StageTimer timer;
  profile_ = StepProfile{};
  joint_removals_.clear();  // a caller that wants them reads them between steps

  remove_non_finite();  // 0. guard
  if (freeze_pending_) freeze_parked_contacts();
  // 0. reactivate
  if (resting_dirty_) {
    reactivate_resting(scratch_.reactivated);
    merge_records(contacts_, scratch_.reactivated, scratch_.merged);
    contacts_.swap(scratch_.merged);
  }
  profile_.awake_count = awake_count();

  update_broadphase(dt);  // 1
  profile_.broadphase_ms = timer.lap();
  collide_pairs(dt);  // 2
  profile_.narrowphase_ms = timer.lap();
  update_events();  // 3
  profile_.events_ms = timer.lap();
  apply_wakes(dt);  // 4
  profile_.wake_ms = timer.lap();
  solve(dt);            // 5, 6 and 6b: times itself into solve_ms, writeback_ms and continuous_ms
  update_islands(dt);   // 7: times itself into islands_ms
  break_joints();       // 8: the joints past their thresholds, destroyed

  invalidate_queries();
  ++tick_;
  profile_.total_ms = total.lap();
}

void World::remove_non_finite() {
  removed_non_finite_.clear();
  for (const uint32_t slot : awake_) {
    const uint32_t d = slots_.dense_of_slot(slot);
    const Pose& p = bodies_.pose[d];
    const Motion& m = bodies_.motion[d];
    const bool finite = is_finite(p.position) && is_finite(p.orientation) && is_finite(p.aabb.min) &&
                        is_finite(p.aabb.max) && is_finite(m.velocity) && is_finite(m.angular_velocity) &&
                        is_finite(m.force) && is_finite(m.torque) && is_finite(m.inv_inertia) &&
                        std::isfinite(m.inv_mass);
    if (!finite) removed_non_finite_.push_back(slots_.id_at(d));
  }
  if (removed_non_finite_.empty()) return;
  // Collected first (in awake-list order, so deterministic): destroying changes the awake list.
  for (const ObjectID id : removed_non_finite_) destroy_object(id);
  removed_non_finite_total_ += removed_non_finite_.size();
}

void World::update_broadphase(float dt) {
  scratch_.moving_ids.clear();
  scratch_.moving_aabbs.clear();
  for (const uint32_t slot : awake_) {
    const uint32_t d = slots_.dense_of_slot(slot);
    // The moving proxy is the body's box swept by its velocity over the step, so the pair is
    // found when it can close within the step (the narrowphase's grown margin, collide_pair).
    // Parked proxies do not move. pose.aabb itself stays the margin-enlarged box (queries).
    const Vec3 sweep = bodies_.motion[d].velocity * dt;
    Aabb box = bodies_.pose[d].aabb;
    box.min += min(sweep, Vec3{});
    box.max += max(sweep, Vec3{});
    scratch_.moving_ids.push_back(slot);
    scratch_.moving_aabbs.push_back(box);
  }
  broadphase_.find_pairs(scratch_.moving_ids, scratch_.moving_aabbs, scratch_.pairs);
  profile_.pair_count = static_cast<uint32_t>(scratch_.pairs.size());
}

namespace {

// The narrowphase goes to the worker pool in runs of this many consecutive pairs (about 50-100 µs
// of collide() each), and only when there are at least two runs' worth.
constexpr size_t kNarrowphaseRunPairs = 512;

}  // namespace

bool World::collide_pair(const ProxyPair& pair, float dt, std::vector<ContactRecord>& out, uint32_t wake[2],
                         int& wake_count) const {
  wake_count = 0;
  const uint32_t da = slots_.dense_of_slot(pair.a);
  const uint32_t db = slots_.dense_of_slot(pair.b);
  const BodyInfo& ia = bodies_.info[da];
  const BodyInfo& ib = bodies_.info[db];
  const bool sensor = ia.sensor || ib.sensor;
  if (ia.sensor && ib.sensor) return false;
  // Collision filter (types.h, Box2D's b2ShouldShapesCollide): for contacts and sensors alike,
  // so a sensor's mask chooses what it detects.
  if (!should_collide(ia.filter, ib.filter)) return false;
  if (!no_collide_pairs_.empty() && jointed_without_collision(slots_.id_at(da), slots_.id_at(db))) return false;
  // No response is defined without a dynamic body (kinematic-static, kinematic-kinematic),
  // but a sensor reports any body that is not static: a kinematic door entering a static
  // trigger volume (Jolt's SensorTests, TestKinematicVsSensor), or a kinematic sensor meeting a
  // kinematic body. A kinematic sensor does not report the static world it sweeps over.
  if (ia.kind != BodyKind::Dynamic && ib.kind != BodyKind::Dynamic &&
      (!sensor || (ia.sensor ? ib.kind : ia.kind) == BodyKind::Static)) {
    return false;
  }
  const Pose& pa = bodies_.pose[da];
  const Pose& pb = bodies_.pose[db];
  // Speculative margin grown by the pair's approach within the step (Firth, "Speculative
  // contacts - a continuous collision engine approach", 2011): a box landing at 6 m/s travels
  // 10 cm per step, so with the fixed 2 cm only the supports whose gap happened to be under 2 cm
  // were found in the landing step, and the box pivoted on them. The pair is collided with the
  // margin plus a bound on how far any two points can close (relative linear speed plus each
  // body's spin times its extent, over dt); then a point beyond the fixed margin is kept only if
  // its own approach along the normal closes its gap within the step, so no far point lingers
  // for a pair that is sliding past or moving apart. A kept point with gap s > 0 only limits the
  // approach to s per substep (solver.cpp), it never pushes. Sensors keep the fixed margin.
  const Motion& ma = bodies_.motion[da];
  const Motion& mb = bodies_.motion[db];
  const float margin = settings_.speculative_margin;
  float reach = 0.0f;
  if (!sensor) {
    reach = (length(mb.velocity - ma.velocity) + length(ma.angular_velocity) * ia.extent +
             length(mb.angular_velocity) * ib.extent) * dt;
    // At most the motion the continuous pass leaves to the contacts (half a dynamic body's inner
    // extent per step, world_solve.cpp): beyond it a body is swept instead, and against a
    // dynamic body only if it is a bullet, as before.
    const float cap = 0.5f * ((ia.kind == BodyKind::Dynamic ? detail::inner_extent(bodies_.shape[da]) : 0.0f) +
                              (ib.kind == BodyKind::Dynamic ? detail::inner_extent(bodies_.shape[db]) : 0.0f));
    reach = std::min(reach, cap);
  }
  // One record per manifold: a body against a mesh may touch it with several normals (sub).
  const size_t first = out.size();
  auto keep = [&](const Manifold& m, uint8_t sub) {
    ContactRecord rec{};
    rec.sensor = sensor;
    rec.sub = sub;
    int count = 0;
    int deepest = 0;
    for (int i = 0; i < m.point_count; ++i) {
      const ManifoldPoint& mp = m.points[i];
      if (mp.separation > margin) {
        // Closing speed of the two bodies' material at the point along the normal (A to B).
        const Vec3 va = ma.velocity + cross(ma.angular_velocity, mp.point - pa.position);
        const Vec3 vb = mb.velocity + cross(mb.angular_velocity, mp.point - pb.position);
        const float approach = dot(va - vb, m.normal);
        if (!(mp.separation <= margin + approach * dt)) continue;
      }
      ContactPointState& p = rec.points[count];
      p.point = mp.point;
      p.separation = mp.separation;
      p.feature = mp.feature;
      if (p.separation < rec.points[deepest].separation) deepest = count;
      ++count;
    }
    if (count == 0) return;
    rec.point_count = static_cast<uint8_t>(count);
    // Slot order equals ObjectID order for live ids (indices are unique), so `found` is sorted.
    rec.contact = Contact{slots_.id_at(da), slots_.id_at(db), rec.points[deepest].point, m.normal,
                          -rec.points[deepest].separation};
    out.push_back(rec);
  };
  const Transform ta{pa.position, pa.orientation};
  const Transform tb{pb.position, pb.orientation};
  const Shape& sa = bodies_.shape[da];
  const Shape& sb = bodies_.shape[db];
  if (is_triangle_surface(sa.kind) || is_triangle_surface(sb.kind)) {
    if (is_triangle_surface(sa.kind) && is_triangle_surface(sb.kind)) return false;
    MeshManifolds mm;
    const bool a_is_mesh = is_triangle_surface(sa.kind);
    if (!(a_is_mesh ? collide_mesh(sb, tb, sa, ta, margin + reach, mm) : collide_mesh(sa, ta, sb, tb, margin + reach, mm))) {
      return false;
    }
    for (int g = 0; g < mm.count; ++g) {
      if (a_is_mesh) mm.manifolds[g].normal = -mm.manifolds[g].normal;
      keep(mm.manifolds[g], static_cast<uint8_t>(out.size() - first));
    }
  } else {
    Manifold m;
    if (!collide(sa, ta, sb, tb, margin + reach, m)) return false;
    keep(m, 0);
  }
  if (out.size() == first) return false;
  if (sensor) return true;
  // A sleeping dynamic body wakes when an awake dynamic body, or a kinematic body that moves,
  // touches it (Box2D's rule: touching an awake body links the islands).
  auto wakes = [&](uint32_t sleeper, uint32_t other) {
    const BodyInfo& si = bodies_.info[sleeper];
    if (!si.sleeping || si.kind != BodyKind::Dynamic || is_parked(other) || tick_ < si.held_until) return false;
    if (bodies_.info[other].kind == BodyKind::Dynamic) return true;
    const Motion& mo = bodies_.motion[other];
    return mo.velocity != Vec3{} || mo.angular_velocity != Vec3{};
  };
  if (wakes(da, db)) wake[wake_count++] = da;
  if (wakes(db, da)) wake[wake_count++] = db;
  return true;
}

void World::collide_pairs(float dt) {
  std::vector<ContactRecord>& found = scratch_.found;
  std::vector<uint32_t>& wake_requests = scratch_.wake_requests;
  found.clear();
  wake_requests.clear();
  const std::vector<ProxyPair>& pairs = scratch_.pairs;
  // Collides pairs [begin, end) in order, appending to one list of records and one of wakes.
  auto collide_range = [&](size_t begin, size_t end, std::vector<ContactRecord>& records,
                           std::vector<uint32_t>& wakes) {
    uint32_t wake[2];
    int wake_count = 0;
    for (size_t i = begin; i < end; ++i) {
      if (!collide_pair(pairs[i], dt, records, wake, wake_count)) continue;
      for (int k = 0; k < wake_count; ++k) wakes.push_back(wake[k]);
    }
  };
  const size_t runs = (pairs.size() + kNarrowphaseRunPairs - 1) / kNarrowphaseRunPairs;
  if (pool_ == nullptr || pool_->threads() <= 1 || runs < 2) {
    collide_range(0, pairs.size(), found, wake_requests);
  } else {
    // Each run of consecutive pairs collides into its own buffers (collide_pair only reads the
    // world), then the runs are appended in order: the same list, in the same pair order, as on
    // one thread, whatever the thread count. The run buffers keep their capacity across steps.
    std::vector<NarrowphaseRun>& out = scratch_.narrowphase_runs;
    if (out.size() < runs) out.resize(runs);
    pool_->for_each(runs, [&](size_t r) {
      NarrowphaseRun& run = out[r];
      run.found.clear();
      run.wake_requests.clear();
      collide_range(r * kNarrowphaseRunPairs, std::min(pairs.size(), (r + 1) * kNarrowphaseRunPairs), run.found,
                    run.wake_requests);
    });
    for (size_t r = 0; r < runs; ++r) {
      found.insert(found.end(), out[r].found.begin(), out[r].found.end());
      wake_requests.insert(wake_requests.end(), out[r].wake_requests.begin(), out[r].wake_requests.end());
    }
  }
  profile_.contact_count = static_cast<uint32_t>(found.size());
}

void World::update_events() {
  scratch_.events.clear();
  // A point that moved less than a quarter of the margin between steps is the same point.
  diff_contacts(contacts_, scratch_.found, scratch_.events, 4.0f * settings_.linear_slop, settings_.linear_slop);
  for (const ContactEvent& e : scratch_.events) {
    const uint32_t da = slots_.find(e.a);
    const uint32_t db = slots_.find(e.b);
    if (e.type == ContactEventType::Begin) {
      ++bodies_.info[da].contact_count;
      ++bodies_.info[db].contact_count;
    } else {
      --bodies_.info[da].contact_count;
      --bodies_.info[db].contact_count;
      // The previous list only holds pairs with an awake body, so a sleeping side just lost a
      // contact with an awake body: whatever held it up may have moved away.
      for (const uint32_t d : {da, db}) {
        const BodyInfo& si = bodies_.info[d];
        if (si.sleeping && si.kind == BodyKind::Dynamic && tick_ >= si.held_until) {
          scratch_.wake_requests.push_back(d);
        }
      }
    }
  }
  events_.clear();
  std::sort(pending_events_.begin(), pending_events_.end(), event_less);
  std::merge(pending_events_.begin(), pending_events_.end(), scratch_.events.begin(), scratch_.events.end(),
             std::back_inserter(events_), event_less);
  pending_events_.clear();
}

void World::apply_wakes(float dt) {
  const uint32_t before = awake_count();
  std::vector<uint32_t>& unpark = scratch_.unpark;
  unpark.clear();
  for (const uint32_t d : scratch_.wake_requests) wake_body(d, &unpark);  // no-op when already awake
  wake_front(before, dt, unpark);
  for (const uint32_t slot : unpark) broadphase_.remove_parked(slot);
  profile_.woken_count += awake_count() - before;
  scratch_.reactivated.clear();
  if (resting_dirty_) {
    // Woken mid-step: the island's resting contacts are still exact (nothing in them moved), and
    // the broadphase already ran without it, so they join this step's list directly.
    reactivate_resting(scratch_.reactivated);
    merge_records(scratch_.found, scratch_.reactivated, scratch_.merged);
  } else {
    scratch_.merged.swap(scratch_.found);
  }
  if (scratch_.front_found.empty()) {
    contacts_.swap(scratch_.merged);
  } else {
    begin_front_contacts();
    merge_records(scratch_.merged, scratch_.front_found, contacts_);
  }
}

// A body woken in this step was parked when the broadphase ran, and parked pairs are never
// paired, so its contacts with other parked bodies are missing from this step: only its island's
// resting contacts come back (reactivate_resting). Without this pass a wake crossed one island per
// step, and a fast body passed through sleeping neighbours that had not woken yet (Jolt's
// TestPhysicsActivateDuringStep; Box2D wakes the touching islands in the step too). So each woken
// body, in awake-list order, is collided with the parked bodies and the not yet visited woken
// bodies its AABB overlaps; the sleepers it touches wake and join the walk (the woken stay in the
// broadphase's parked set until it ends, so the queries still find them). Each pair is visited
// once: by the earlier of its two bodies in the walk. Its contacts begin now (Begin events).
void World::wake_front(size_t first, float dt, std::vector<uint32_t>& unpark) {
  std::vector<ContactRecord>& front = scratch_.front_found;
  front.clear();
  if (first == awake_.size()) return;
  uint32_t wake[2];
  int wake_count = 0;
  for (size_t k = first; k < awake_.size(); ++k) {  // grows as the front spreads
    const uint32_t slot = awake_[k];
    const uint32_t d = slots_.dense_of_slot(slot);
    broadphase_.query(bodies_.pose[d].aabb, scratch_.query_hits);
    for (const uint32_t other : scratch_.query_hits) {
      if (other == slot) continue;
      const uint32_t od = slots_.dense_of_slot(other);
      if (od == SlotMap::kNone) continue;
      // Awake before this step (the broadphase found the pair) or visited earlier in this walk.
      if (!is_parked(od) && bodies_.info[od].awake_index <= k) continue;
      const ProxyPair pair{std::min(slot, other), std::max(slot, other)};
      if (!collide_pair(pair, dt, front, wake, wake_count)) continue;
      for (int w = 0; w < wake_count; ++w) wake_body(wake[w], &unpark);
    }
  }
  std::sort(front.begin(), front.end(), record_less);
}

void World::begin_front_contacts() {
  std::vector<ContactRecord>& front = scratch_.front_found;
  // Pairs of an island that slept together came back with its resting contacts (both lists are
  // sorted): those are not new.
  const std::vector<ContactRecord>& back = scratch_.reactivated;
  size_t keep = 0;
  size_t j = 0;
  for (const ContactRecord& r : front) {
    while (j < back.size() && record_less(back[j], r)) ++j;
    if (j < back.size() && !record_less(r, back[j])) continue;
    front[keep++] = r;
  }
  front.resize(keep);
  std::vector<ContactEvent>& begun = scratch_.front_events;
  begun.clear();
  for (size_t i = 0; i < front.size(); ++i) {
    ContactRecord& r = front[i];
    r.recovering = r.contact.depth > settings_.linear_slop;  // as diff_contacts marks a new contact
    if (i > 0 && same_pair(front[i - 1], r)) continue;       // one pair, several mesh manifolds
    ++bodies_.info[slots_.find(r.contact.a)].contact_count;
    ++bodies_.info[slots_.find(r.contact.b)].contact_count;
    begun.push_back(make_event(ContactEventType::Begin, r.contact));
  }
  scratch_.events.clear();
  std::merge(events_.begin(), events_.end(), begun.begin(), begun.end(), std::back_inserter(scratch_.events),
             event_less);
  events_.swap(scratch_.events);
}

}  // namespace impulse::physics
