// World's stages 5 and 6: the solve and the write-back. The awake bodies become solver bodies, the
// solved contacts are split into batches of whole contact-connected groups (on the worker pool's
// threads when there is one, bit-identical to one thread), each batch runs the soft step
// (solver.h), and the poses are written back.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "server/physics/world.h"
#include "server/physics/world_internal.h"
#include "shared/parallel.h"

namespace impulse::physics {

using detail::fat_aabb;
using detail::safe_inverse;
using detail::StageTimer;
using detail::union_find_join;
using detail::union_find_reset;
using detail::union_find_root;

namespace {

// Below this many movable bodies the solve stays on the calling thread: handing batches to the
// pool costs more than it saves.
constexpr uint32_t kMinParallelSolveBodies = 64;
// Batches per pool thread, so one heavy group (a pile) does not leave the other threads idle.
constexpr size_t kSolveBatchesPerThread = 8;
// The per-body loops (solver bodies in, poses out) go to the pool in runs of this many bodies
// (a few tens of µs each), and only when there are at least two runs.
constexpr uint32_t kBodyRun = 1024;

// Calls body(i) for every i in [0, n): on the pool's threads in runs of kBodyRun when it has more
// than one thread and n spans two runs, else in order on this thread. body(i) writes only what i
// owns, so the result is the same either way.
template <class F>
void for_each_body(const WorkerPool* pool, uint32_t n, const F& body) {
  const uint32_t runs = (n + kBodyRun - 1) / kBodyRun;
  if (pool == nullptr || pool->threads() <= 1 || runs < 2) {
    for (uint32_t i = 0; i < n; ++i) body(i);
    return;
  }
  pool->for_each(runs, [&](size_t r) {
    const uint32_t begin = static_cast<uint32_t>(r) * kBodyRun;
    const uint32_t end = std::min(n, begin + kBodyRun);
    for (uint32_t i = begin; i < end; ++i) body(i);
  });
}

}  // namespace

void World::solve(float dt) {
  StageTimer timer;
  const uint32_t movable = prepare_solver_bodies();
  gather_solver_edges(movable);
  const size_t batch_count = batch_solver_edges(movable);
  run_solver_batches(dt, batch_count);
  profile_.solve_ms = timer.lap();
  write_back_poses(movable);
  profile_.writeback_ms = timer.lap();
  sweep_fast_bodies();  // 6b: continuous collision, only when a body moved fast
  profile_.continuous_ms = timer.lap();
}

uint32_t World::prepare_solver_bodies() {
  // Solver bodies: the awake list in order, then one immovable body for every parked partner.
  const uint32_t movable = awake_count();
  std::vector<SolverBody>& sb = scratch_.solver_bodies;
  std::vector<Vec3>& centers = scratch_.solver_centers;
  std::vector<BodyForces>& forces = scratch_.forces;
  sb.resize(movable + 1);
  centers.resize(movable + 1);
  forces.resize(movable);
  scratch_.solver_index.resize(bodies_.size());
  // Each i writes only its solver body, forces and solver_index entry and its body's accumulators.
  for_each_body(pool_, movable, [&](uint32_t i) {
    const uint32_t d = slots_.dense_of_slot(awake_[i]);
    scratch_.solver_index[d] = i;
    Motion& m = bodies_.motion[d];
    const Pose& p = bodies_.pose[d];
    const bool dynamic = bodies_.info[d].kind == BodyKind::Dynamic;
    SolverBody& b = sb[i];
    b.velocity = m.velocity;
    b.angular_velocity = m.angular_velocity;
    b.delta_position = Vec3{};
    b.delta_angle = Vec3{};
    b.delta_rotation = Quat{};
    b.pseudo_velocity = Vec3{};
    b.pseudo_angular_velocity = Vec3{};
    b.inv_mass = m.inv_mass;
    b.inv_inertia = dynamic ? rotate_diagonal(to_mat3(p.orientation), m.inv_inertia) : Mat3{Vec3{}, Vec3{}, Vec3{}};
    centers[i] = p.position;
    BodyForces& f = forces[i];
    f.dynamic = dynamic;
    f.linear = m.force * m.inv_mass;
    f.angular = b.inv_inertia * m.torque;
    f.linear_damping = m.linear_damping;
    f.angular_damping = m.angular_damping;
    f.inertia = dynamic ? safe_inverse(m.inv_inertia) : Vec3{};
    f.orientation = p.orientation;
    m.force = Vec3{};
    m.torque = Vec3{};
  });
  sb[movable] = SolverBody{};  // zero velocity, inverse mass and inertia
  centers[movable] = Vec3{};
  return movable;
}

void World::gather_solver_edges(uint32_t movable) {
  // The solved contacts, in contact order (global solver-body indices).
  const std::vector<SolverBody>& sb = scratch_.solver_bodies;
  std::vector<SolverEdge>& edges = scratch_.solver_edges;
  edges.clear();
  uint32_t points = 0;
  for (uint32_t r = 0; r < contacts_.size(); ++r) {
    const ContactRecord& rec = contacts_[r];
    if (rec.sensor) continue;
    const uint32_t da = slots_.find(rec.contact.a);
    const uint32_t db = slots_.find(rec.contact.b);
    const uint32_t ia = is_parked(da) ? movable : scratch_.solver_index[da];
    const uint32_t ib = is_parked(db) ? movable : scratch_.solver_index[db];
    if (sb[ia].inv_mass == 0 && sb[ib].inv_mass == 0) continue;  // nothing can move
    edges.push_back(SolverEdge{ia, ib, r, mix_materials(da, db)});
    points += rec.point_count;
  }
  profile_.point_count = points;
  // The joints, in slot order, each with a body that can move.
  std::vector<SolverEdge>& joint_edges = scratch_.joint_edges;
  joint_edges.clear();
  if (live_joints_ == 0) return;
  for (uint32_t k = 0; k < joints_.size(); ++k) {
    if (!joints_[k].live) continue;
    const uint32_t ia = joint_solver_index(joints_[k].joint.a, movable);
    const uint32_t ib = joint_solver_index(joints_[k].joint.b, movable);
    if (sb[ia].inv_mass == 0 && sb[ib].inv_mass == 0) continue;
    joint_edges.push_back(SolverEdge{ia, ib, k, MaterialPair{}});
  }
}

size_t World::batch_solver_edges(uint32_t movable) {
  const std::vector<SolverBody>& sb = scratch_.solver_bodies;
  const std::vector<SolverEdge>& edges = scratch_.solver_edges;
  // Batches for the worker pool. Groups: the connected components of the movable bodies joined by
  // solved contacts (kinematic bodies included, unlike sleep islands, so no two groups touch the
  // same body; static and sleeping partners are each batch's own all-zero immovable body, which
  // no sweep can change). Gauss-Seidel within a group visits its contacts in contact order either
  // way and no contact reads another group's bodies, so every body sees the same operations in
  // the same order whatever the batching: the step is bit-identical for any thread count.
  // Restitution's sweeps end per batch when one resolves nothing; a sweep that resolves nothing
  // changes nothing, so that is the same as the global loop too.
  std::vector<uint32_t>& parent = scratch_.solver_parent;
  union_find_reset(parent, movable);
  const int threads = pool_ ? pool_->threads() : 1;
  const bool parallel = threads > 1 && movable >= kMinParallelSolveBodies;
  uint32_t groups = 0;
  std::vector<uint32_t>& group_batch = scratch_.group_batch;
  std::vector<SolverBatch>& batches = scratch_.batches;
  const size_t batch_count = parallel ? static_cast<size_t>(threads) * kSolveBatchesPerThread : 1;
  if (batches.size() < batch_count) batches.resize(batch_count);
  for (size_t k = 0; k < batch_count; ++k) {
    batches[k].bodies.clear();
    batches[k].manifolds.clear();
    batches[k].joints.clear();
    batches[k].weight = 0;
  }
  if (parallel) {
    for (const SolverEdge& e : edges) {
      if (e.a < movable && e.b < movable) union_find_join(parent, e.a, e.b);
    }
    for (const SolverEdge& e : scratch_.joint_edges) {
      if (e.a < movable && e.b < movable) union_find_join(parent, e.a, e.b);
    }
    // A root is its group's lowest body (unions keep parent[x] <= x), so one ascending pass points
    // every body at its root, and a second numbers the groups by root and gives each body its group.
    for (uint32_t i = 0; i < movable; ++i) parent[i] = parent[parent[i]];
    for (uint32_t i = 0; i < movable; ++i) parent[i] = parent[i] == i ? groups++ : parent[parent[i]];
    // Weights: bodies, plus the points of their contacts (the sweeps' work).
    group_batch.assign(groups, 0);
    std::vector<uint64_t>& weight = scratch_.group_weight;
    weight.assign(groups, 0);
    for (uint32_t i = 0; i < movable; ++i) ++weight[parent[i]];
    for (const SolverEdge& e : edges) {
      weight[parent[e.a < movable ? e.a : e.b]] += contacts_[e.record].point_count;
    }
    for (const SolverEdge& e : scratch_.joint_edges) weight[parent[e.a < movable ? e.a : e.b]] += 3;
    // Greedy, heaviest group first (Graham's LPT rule): each group to the lightest batch so far
    // (ties: the lower batch). Heaviest first also keeps a dominant group (a settled pile) in
    // batch 0 every step: visited in group order, it landed in whichever batch was lightest when
    // its turn came, so over a run every batch's buffers grew to hold it (S3-10000 on 2 threads
    // peaked at 4x the single-thread RSS). The batching never changes the result (above).
    std::vector<uint32_t>& order = scratch_.group_order;
    order.resize(groups);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [&](uint32_t x, uint32_t y) { return weight[x] != weight[y] ? weight[x] > weight[y] : x < y; });
    for (const uint32_t g : order) {
      size_t lightest = 0;
      for (size_t k = 1; k < batch_count; ++k) {
        if (batches[k].weight < batches[lightest].weight) lightest = k;
      }
      group_batch[g] = static_cast<uint32_t>(lightest);
      batches[lightest].weight += weight[g];
    }
  }
  // On one thread there is one batch, solved in place on the global arrays (its indices are the
  // global ones, the immovable body last); with the pool, each batch gets local indices.
  auto batch_of = [&](uint32_t body) -> uint32_t { return parallel ? group_batch[parent[body]] : 0; };
  std::vector<uint32_t>& local = scratch_.solver_local;
  if (parallel) {
    local.resize(movable);
    for (uint32_t i = 0; i < movable; ++i) {
      std::vector<uint32_t>& members = batches[batch_of(i)].bodies;
      local[i] = static_cast<uint32_t>(members.size());
      members.push_back(i);
    }
  }
  for (const SolverEdge& e : edges) {
    SolverBatch& batch = batches[batch_of(e.a < movable ? e.a : e.b)];
    const uint32_t immovable = parallel ? static_cast<uint32_t>(batch.bodies.size()) : movable;
    SolverManifold& m = batch.manifolds.emplace_back();
    m.body_a = e.a >= movable ? immovable : (parallel ? local[e.a] : e.a);
    m.body_b = e.b >= movable ? immovable : (parallel ? local[e.b] : e.b);
    m.record = e.record;
    m.normal = contacts_[e.record].contact.normal;
    m.friction = e.material.friction;
    m.restitution = e.material.restitution;
    m.immovable_partner = sb[e.a].inv_mass == 0 || sb[e.b].inv_mass == 0;
    m.recovering = contacts_[e.record].recovering;
  }
  for (const SolverEdge& e : scratch_.joint_edges) {
    SolverBatch& batch = batches[batch_of(e.a < movable ? e.a : e.b)];
    const uint32_t immovable = parallel ? static_cast<uint32_t>(batch.bodies.size()) : movable;
    SolverJoint& j = batch.joints.emplace_back(prepare_joint(e.record, e.a, e.b));
    j.body_a = e.a >= movable ? immovable : (parallel ? local[e.a] : e.a);
    j.body_b = e.b >= movable ? immovable : (parallel ? local[e.b] : e.b);
  }
  return batch_count;
}

void World::run_solver_batches(float dt, size_t batch_count) {
  std::vector<SolverBody>& sb = scratch_.solver_bodies;
  const std::vector<Vec3>& centers = scratch_.solver_centers;
  const std::vector<BodyForces>& forces = scratch_.forces;
  std::vector<SolverBatch>& batches = scratch_.batches;
  SolverConfig config;
  config.dt = dt;
  config.substeps = settings_.substeps;
  config.relax_iterations = settings_.relax_iterations;
  config.gravity = settings_.gravity;
  config.contact_hertz = settings_.contact_hertz;
  config.contact_damping_ratio = settings_.contact_damping_ratio;
  config.contact_push_max_speed = settings_.contact_push_max_speed;
  config.restitution_threshold = settings_.restitution_threshold;
  config.max_speed = settings_.max_speed;
  config.max_angular_speed = settings_.max_angular_speed;
  // Each batch solves local copies of its bodies and writes back only its own: no shared writes
  // (the contact records it stores impulses into are its own too).
  auto solve_batch = [&](size_t k) {
    SolverBatch& batch = batches[k];
    const size_t count = batch.bodies.size();
    if (count == 0) return;
    batch.solver_bodies.resize(count + 1);
    batch.centers.resize(count + 1);
    batch.forces.resize(count);
    for (size_t j = 0; j < count; ++j) {
      const uint32_t i = batch.bodies[j];
      batch.solver_bodies[j] = sb[i];
      batch.centers[j] = centers[i];
      batch.forces[j] = forces[i];
    }
    batch.solver_bodies[count] = SolverBody{};  // zero velocity, inverse mass and inertia
    batch.centers[count] = Vec3{};
    prepare_manifolds(batch.manifolds, batch.solver_bodies, batch.centers, contacts_, batch.solver);
    solve_soft_step(batch.manifolds, batch.solver_bodies, batch.forces, contacts_, config, batch.solver, batch.joints);
    for (size_t j = 0; j < count; ++j) sb[batch.bodies[j]] = batch.solver_bodies[j];
  };
  if (batch_count > 1) {  // the pool's batches (one batch: on this thread, in place)
    pool_->for_each(batch_count, solve_batch);
  } else {
    prepare_manifolds(batches[0].manifolds, sb, centers, contacts_, batches[0].solver);
    solve_soft_step(batches[0].manifolds, sb, forces, contacts_, config, batches[0].solver, batches[0].joints);
  }
  // The joints' impulses, for the next step's warm start (each batch's joints are its own), and
  // the ones whose reaction passed a threshold (World::break_joints, at the step's end).
  const float h = dt / static_cast<float>(std::max(settings_.substeps, 1));
  for (size_t k = 0; k < batch_count; ++k) {
    for (const SolverJoint& j : batches[k].joints) {
      JointRecord& r = joints_[j.record].joint;
      if (r.break_force > 0 || r.break_torque > 0) {
        float force = 0, torque = 0;
        joint_reaction(j, h, &force, &torque);
        if ((r.break_force > 0 && force > r.break_force) || (r.break_torque > 0 && torque > r.break_torque)) {
          breaking_.push_back(BrokenJoint{ObjectID{j.record, joints_[j.record].generation}, r.a, r.b, force, torque});
        }
      }
      r.linear_impulse = j.linear_impulse;
      r.angular_impulse = j.angular_impulse;
      r.axial_impulse = j.axial_impulse;
      r.lower_impulse = j.lower_impulse;
      r.upper_impulse = j.upper_impulse;
      r.motor_impulse = j.motor_impulse;
    }
  }
}

void World::restore_non_finite_groups(uint32_t movable) {
  restored_non_finite_.clear();
  std::vector<SolverBody>& sb = scratch_.solver_bodies;
  if (!inject_non_finite_.is_null()) {  // WorldTestAccess::inject_non_finite_solve
    const uint32_t d = slots_.find(inject_non_finite_);
    if (d != SlotMap::kNone && !is_parked(d)) {
      sb[scratch_.solver_index[d]].velocity.x = std::numeric_limits<float>::quiet_NaN();
    }
    inject_non_finite_ = ObjectID{};
  }
  auto finite = [](const SolverBody& b) {
    return is_finite(b.velocity) && is_finite(b.angular_velocity) && is_finite(b.delta_position) &&
           is_finite(b.delta_rotation);
  };
  uint32_t first_bad = movable;
  for (uint32_t i = 0; i < movable && first_bad == movable; ++i) {
    if (!finite(sb[i])) first_bad = i;
  }
  if (first_bad == movable) return;
  // Rare path (allocation allowed): the contact groups of the solve, as batch_solver_edges forms them.
  std::vector<uint32_t>& parent = scratch_.solver_parent;
  union_find_reset(parent, movable);
  for (const std::vector<SolverEdge>* list : {&scratch_.solver_edges, &scratch_.joint_edges}) {
    for (const SolverEdge& e : *list) {
      if (e.a < movable && e.b < movable) union_find_join(parent, e.a, e.b);
    }
  }
  std::vector<uint8_t> bad_group(movable, 0);
  for (uint32_t i = first_bad; i < movable; ++i) {
    if (!finite(sb[i])) bad_group[union_find_root(parent, i)] = 1;
  }
  for (uint32_t i = 0; i < movable; ++i) {
    if (bad_group[union_find_root(parent, i)] == 0) continue;
    const uint32_t d = slots_.dense_of_slot(awake_[i]);
    const Motion& m = bodies_.motion[d];
    SolverBody& b = sb[i];
    const bool own = !finite(b);
    b.velocity = own ? Vec3{} : m.velocity;  // Motion still holds the step-start velocities
    b.angular_velocity = own ? Vec3{} : m.angular_velocity;
    b.delta_position = Vec3{};
    b.delta_angle = Vec3{};
    b.delta_rotation = Quat{};
    if (own) restored_non_finite_.push_back(slots_.id_at(d));
  }
  for (const SolverEdge& e : scratch_.solver_edges) {
    const uint32_t body = e.a < movable ? e.a : e.b;
    if (bad_group[union_find_root(parent, body)] == 0) continue;
    ContactRecord& rec = contacts_[e.record];
    for (int k = 0; k < rec.point_count; ++k) {
      rec.points[k].normal_impulse = 0;
      rec.points[k].pseudo_impulse = 0;
      rec.points[k].friction_impulse = Vec3{};
    }
  }
  for (const SolverEdge& e : scratch_.joint_edges) {
    const uint32_t body = e.a < movable ? e.a : e.b;
    if (bad_group[union_find_root(parent, body)] == 0) continue;
    JointRecord& r = joints_[e.record].joint;
    r.linear_impulse = r.angular_impulse = Vec3{};
    r.axial_impulse = r.lower_impulse = r.upper_impulse = r.motor_impulse = 0;
  }
  restored_non_finite_total_ += restored_non_finite_.size();
}

void World::write_back_poses(uint32_t movable) {
  // 6. Write the poses back and refresh the AABBs of everything that moved (each i its own body).
  restore_non_finite_groups(movable);
  const std::vector<SolverBody>& sb = scratch_.solver_bodies;
  const std::vector<Vec3>& start = scratch_.solver_centers;  // centres at step start; the solve reads them only
  const float margin = settings_.speculative_margin;
  for_each_body(pool_, movable, [&](uint32_t i) {
    const uint32_t d = slots_.dense_of_slot(awake_[i]);
    Motion& m = bodies_.motion[d];
    Pose& p = bodies_.pose[d];
    const SolverBody& b = sb[i];
    // The speed caps hold after the contacts too (integrate_velocities caps what forces add).
    m.velocity = clamp_length(b.velocity, settings_.max_speed);
    m.angular_velocity = clamp_length(b.angular_velocity, settings_.max_angular_speed);
    p.position += b.delta_position;
    p.orientation = normalize(b.delta_rotation * p.orientation);
    p.aabb = fat_aabb(bodies_.shape[d], Transform{p.position, p.orientation}, margin);
  });
  // Fast: its surface moved more than half its inner extent this step, by the displacement plus
  // the turn times the extent (Box2D v3's test in b2FinalizeBodiesTask: |v| dt + |w| dt
  // maxExtent); only dynamic bodies (inverse mass > 0) are swept. In awake order.
  std::vector<detail::FastBody>& fast = scratch_.fast_bodies;
  fast.clear();
  for (uint32_t i = 0; i < movable; ++i) {
    const SolverBody& b = sb[i];
    if (b.inv_mass <= 0) continue;
    const uint32_t d = slots_.dense_of_slot(awake_[i]);
    const Shape& shape = bodies_.shape[d];
    const float inner = detail::inner_extent(shape);
    detail::FastBody f;
    f.dense = d;
    f.start = start[i];
    f.delta = b.delta_position;
    // The step's rotation as an angle about an axis (the short way round).
    const Quat q = b.delta_rotation.w < 0 ? Quat{-b.delta_rotation.x, -b.delta_rotation.y, -b.delta_rotation.z,
                                                 -b.delta_rotation.w}
                                          : b.delta_rotation;
    const Vec3 v{q.x, q.y, q.z};
    const float sine = length(v);
    if (shape.kind != ShapeKind::Sphere && sine > 0.0f) {
      f.angle = 2.0f * std::atan2(sine, q.w);
      f.axis = v * (1.0f / sine);
    }
    const float turn = f.angle * bodies_.info[d].extent;
    const bool moved = turn > 0.0f ? length(f.delta) + turn > 0.5f * inner
                                   : length_squared(f.delta) > 0.25f * inner * inner;
    if (!moved) continue;
    f.start_orientation = normalize(conjugate(b.delta_rotation) * bodies_.pose[d].orientation);
    fast.push_back(f);
  }
}

}  // namespace impulse::physics
