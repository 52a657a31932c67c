// The fixed step of a linear rigid-body world: semi-implicit Euler, sort-based spatial hashing,
// sequential impulses with Coulomb friction and warm starting (Catto, "Iterative Dynamics with
// Temporal Coherence", GDC 2005), Baumgarte correction (seed 004) and per-body sleep (seed 000)
// over slot-map columns.
//
// step(dt) runs these stages in order. "Awake" bodies are the dynamic and kinematic bodies in the
// awake list; static and sleeping bodies are "parked": no stage reads or writes them except as
// an immovable contact partner.
//  0. reactivate   If bodies woke since the last step (commands, destroy, a new static body),
//                  move their frozen resting contacts back into the previous-step contact list,
//                  so the event diff sees them.      reads/writes: resting_, contacts_
//  1. integrate velocities  For each awake body remember |v|^2 (the "moving" test of stage 3);
//                  dynamic: v += (g + F / m) dt, then v *= 1 / (1 + dt c), then each component
//                  clamped to max_speed; F = 0 (semi-implicit Euler, first half). Kinematic
//                  bodies keep their set velocity.
//                                                    reads/writes: motion
//  2. broadphase   Awake bodies are the moving proxies (id = slot index, AABB from the end of the
//                  last step); SpatialHash::find_pairs pairs them with each other and with the
//                  parked proxies, sorted by (a, b).  reads: pose.aabb   writes: pairs
//  3. narrowphase  collide() per pair (normal from a to b). Pairs without a dynamic body
//                  (kinematic-static, kinematic-kinematic) are skipped: no contact, no event.
//                  A sleeping dynamic body touched by an awake body that was moving at the start
//                  of the step (dynamic: |v| > sleep_speed; kinematic: v != 0) is marked for
//                  waking. A slow body leaves it asleep, so a body resting on a sleeping stack
//                  does not keep waking it.           reads: pose, shape, info   writes: found
//  4. events       Merge join of the previous contact list and `found`: Begin/End events (merged
//                  with the End events of bodies destroyed since the last step), per-body contact
//                  counts, and the previous normal impulse of each persisting pair (warm start).
//                  A sleeping body that lost a contact with an awake body is marked for waking:
//                  whatever held it up may have gone.  reads: contacts_, found   writes: events_
//  5. wake         Marked bodies join the awake list (velocity 0) and leave the parked set. Their
//                  resting contacts are still exact (both bodies were at rest) and the broadphase
//                  already ran without them, so they join this step's list:
//                  contacts_ = found + reactivated.   writes: info, awake_, broadphase, contacts_
//  6. solve        Per contact: inverse masses (0 for static, kinematic and sleeping bodies:
//                  infinite mass), the restitution target from the pre-solve approach speed
//                  (e = max(e_a, e_b): a bouncy ball bounces on any floor, as in Box2D; only above
//                  restitution_threshold), the friction coefficient mu = sqrt(mu_a mu_b) and a
//                  tangent basis built from the normal alone; warm start with last step's normal
//                  and friction impulses; then solver_iterations sweeps of sequential impulses:
//                  per contact, Coulomb friction (the 2D tangent impulse stopping the slip, its
//                  accumulated vector clamped to the disc mu * lambda_n), then the normal (its
//                  accumulated impulse clamped >= 0). A sleeping body that absorbed, over its
//                  sleep, enough impulse (normal plus friction) other than the load pressing it
//                  down along gravity to move it faster than sleep_speed is woken (lifted,
//                  shoved or dragged, not merely sat on).
//                                                    reads: contacts_, material
//                                                    writes: motion.velocity, contacts_ impulses, info
//  7. integrate positions  x += v dt for awake bodies (semi-implicit Euler, second half).
//                                                    writes: pose.position
//  8. correct positions  Baumgarte as in seed 004: each dynamic body moves along the normal by
//                  its share of baumgarte * max(depth - slop, 0). Then the AABBs of awake bodies
//                  are refreshed.                     writes: pose
//  9. sleep        Dynamic: |v| < sleep_speed for sleep_time_s; kinematic: v == 0 for
//                  sleep_time_s -> asleep: v = 0, parked, off the awake list. Contacts between
//                  two parked bodies move to the resting list with their geometry and impulse
//                  frozen (no End event: a sleeping stack keeps reporting its contacts).
//                                                    writes: info, awake_, broadphase, resting_
// Every loop runs over dense arrays in an order fixed by the operation history (awake list,
// sorted pair and contact lists), never over an unordered container, so the same inputs give
// bit-identical results.
#include "server/physics/world.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <numeric>

#include "server/physics/narrowphase.h"

namespace impulse::physics {

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

float max_force(const WorldSettings& s) { return s.max_mass * s.max_speed; }
float max_impulse(const WorldSettings& s) { return s.max_mass * s.max_speed; }

namespace {

bool is_finite_positive(float x) { return std::isfinite(x) && x > 0; }
bool is_finite_non_negative(float x) { return std::isfinite(x) && x >= 0; }

bool within(Vec3 v, float bound) {
  return is_finite(v) && std::fabs(v.x) <= bound && std::fabs(v.y) <= bound && std::fabs(v.z) <= bound;
}

bool is_valid_desc(const BodyDesc& d, const WorldSettings& s) {
  if (static_cast<uint8_t>(d.kind) > static_cast<uint8_t>(BodyKind::Kinematic)) return false;
  if (static_cast<uint8_t>(d.shape.kind) >= static_cast<uint8_t>(ShapeKind::Count)) return false;
  if (d.shape.kind == ShapeKind::Sphere) {
    if (!is_finite_positive(d.shape.radius) || d.shape.radius > s.max_extent) return false;
  } else {
    const Vec3 h = d.shape.half_extents;
    if (!is_finite(h) || !(h.x > 0 && h.y > 0 && h.z > 0)) return false;
    if (!within(h, s.max_extent)) return false;
  }
  if (!within(d.position, s.max_coordinate) || !within(d.velocity, s.max_speed)) return false;
  if (!std::isfinite(d.mass)) return false;
  // A subnormal mass would make 1 / mass infinite.
  if (d.kind == BodyKind::Dynamic && !(d.mass > 0 && d.mass <= s.max_mass && std::isfinite(1.0f / d.mass))) {
    return false;
  }
  if (!(d.restitution >= 0 && d.restitution <= 1)) return false;
  if (!is_finite_non_negative(d.friction) || !is_finite_non_negative(d.linear_damping)) return false;
  return true;
}

// Only the fields the shape kind uses are kept; the rest are made consistent.
Shape normalize_shape(const Shape& shape) {
  if (shape.kind == ShapeKind::Sphere) return make_sphere(shape.radius);
  return make_box(shape.half_extents);
}

class StageTimer {
 public:
  StageTimer() : start_(std::chrono::steady_clock::now()) {}
  /// Milliseconds since construction or the previous lap.
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - start_).count();
    start_ = now;
    return ms;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// 64-bit FNV-1a, fed little-endian words so the hash does not depend on the host byte order.
class Fnv1a {
 public:
  void add_u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) add_byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void add_float(float f) { add_u32(std::bit_cast<uint32_t>(f)); }
  void add_vec(Vec3 v) {
    add_float(v.x);
    add_float(v.y);
    add_float(v.z);
  }
  uint64_t value() const { return hash_; }

 private:
  void add_byte(uint8_t b) {
    hash_ ^= b;
    hash_ *= 1099511628211ull;
  }
  uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace

const char* check_settings(const WorldSettings& s) {
  if (!is_finite(s.gravity)) return "gravity must be finite";
  if (!is_finite_positive(s.cell_size)) return "cell_size must be finite and > 0";
  if (s.solver_iterations < 0 || s.solver_iterations > 1000) return "solver_iterations must be in [0, 1000]";
  if (!(s.baumgarte >= 0 && s.baumgarte <= 1)) return "baumgarte must be in [0, 1]";
  if (!is_finite_non_negative(s.slop)) return "slop must be finite and >= 0";
  if (!is_finite_non_negative(s.restitution_threshold)) {
    return "restitution_threshold must be finite and >= 0";
  }
  if (!is_finite_non_negative(s.sleep_speed)) return "sleep_speed must be finite and >= 0";
  if (!is_finite_non_negative(s.sleep_time_s)) return "sleep_time_s must be finite and >= 0";
  if (!is_finite_positive(s.max_coordinate)) return "max_coordinate must be finite and > 0";
  if (!is_finite_positive(s.max_speed)) return "max_speed must be finite and > 0";
  if (!is_finite_positive(s.max_extent)) return "max_extent must be finite and > 0";
  if (!is_finite_positive(s.max_mass)) return "max_mass must be finite and > 0";
  if (!std::isfinite(s.max_mass * s.max_speed)) return "max_mass * max_speed must be finite";
  if (s.max_objects == 0) return "max_objects must be > 0";
  return nullptr;
}

namespace {

WorldSettings sanitize(WorldSettings s) {
  const WorldSettings d;
  if (!is_finite(s.gravity)) s.gravity = d.gravity;
  if (!is_finite_positive(s.cell_size)) s.cell_size = d.cell_size;
  if (s.solver_iterations < 0 || s.solver_iterations > 1000) s.solver_iterations = d.solver_iterations;
  if (!(s.baumgarte >= 0 && s.baumgarte <= 1)) s.baumgarte = d.baumgarte;
  if (!is_finite_non_negative(s.slop)) s.slop = d.slop;
  if (!is_finite_non_negative(s.restitution_threshold)) s.restitution_threshold = d.restitution_threshold;
  if (!is_finite_non_negative(s.sleep_speed)) s.sleep_speed = d.sleep_speed;
  if (!is_finite_non_negative(s.sleep_time_s)) s.sleep_time_s = d.sleep_time_s;
  if (!is_finite_positive(s.max_coordinate)) s.max_coordinate = d.max_coordinate;
  if (!is_finite_positive(s.max_speed)) s.max_speed = d.max_speed;
  if (!is_finite_positive(s.max_extent)) s.max_extent = d.max_extent;
  if (!is_finite_positive(s.max_mass)) s.max_mass = d.max_mass;
  if (!std::isfinite(s.max_mass * s.max_speed)) {
    s.max_mass = d.max_mass;
    s.max_speed = d.max_speed;
  }
  if (s.max_objects == 0) s.max_objects = d.max_objects;
  return s;
}

}  // namespace

World::World(const WorldSettings& settings)
    : settings_(sanitize(settings)), broadphase_(settings_.cell_size, settings_.max_cells_per_body) {}

// --- Storage -------------------------------------------------------------------------------------

CreateResult World::create_object(const BodyDesc& desc) {
  if (!is_valid_desc(desc, settings_)) return {Error::InvalidArgument, {}};
  if (slots_.size() >= settings_.max_objects) return {Error::WorldFull, {}};
  const ObjectID id = slots_.create();
  if (id.is_null()) return {Error::WorldFull, {}};

  const Shape shape = normalize_shape(desc.shape);
  Pose pose{desc.position, compute_aabb(shape, desc.position)};
  Motion motion;
  BodyInfo info;
  info.kind = desc.kind;
  if (desc.kind == BodyKind::Dynamic) {
    motion.velocity = desc.velocity;
    motion.inv_mass = 1.0f / desc.mass;
    motion.linear_damping = desc.linear_damping;
    info.mass = desc.mass;
  } else if (desc.kind == BodyKind::Kinematic) {
    motion.velocity = desc.velocity;
  }
  bodies_.push_back(pose, motion, shape, Material{desc.restitution, desc.friction}, info);
  const uint32_t dense = bodies_.size() - 1;

  if (desc.kind == BodyKind::Static) {
    // Parked proxies are never paired with each other, so sleeping bodies the new static body
    // overlaps would never learn about it: wake them.
    broadphase_.query(pose.aabb, scratch_.query_hits);
    for (const uint32_t slot : scratch_.query_hits) {
      const uint32_t other = slots_.dense_of_slot(slot);
      if (other == SlotMap::kNone || other == dense) continue;
      const BodyInfo& oi = bodies_.info[other];
      if (oi.sleeping && oi.kind == BodyKind::Dynamic && overlaps(bodies_.pose[other].aabb, pose.aabb)) {
        wake_body(other);
      }
    }
    broadphase_.add_parked(id.index, pose.aabb);
  } else {
    add_awake(dense);
  }
  return {Error::Ok, id};
}

Error World::destroy_object(ObjectID id) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;

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
        pending_events_.push_back(make_event(ContactEventType::End, c));
        const uint32_t partner = slots_.find(c.a == id ? c.b : c.a);
        BodyInfo& pi = bodies_.info[partner];
        --pi.contact_count;
        if (pi.sleeping && pi.kind == BodyKind::Dynamic) wake_body(partner);
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

std::optional<BodyState> World::get_object(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return std::nullopt;
  return state_at_dense(dense);
}

uint32_t World::object_count() const { return slots_.size(); }
uint32_t World::awake_count() const { return static_cast<uint32_t>(awake_.size()); }

BodyState World::state_at_dense(uint32_t dense) const {
  const BodyInfo& info = bodies_.info[dense];
  BodyState s;
  s.id = slots_.id_at(dense);
  s.kind = info.kind;
  s.shape = bodies_.shape[dense];
  s.position = bodies_.pose[dense].position;
  s.velocity = bodies_.motion[dense].velocity;
  s.mass = info.mass;
  s.restitution = bodies_.material[dense].restitution;
  s.friction = bodies_.material[dense].friction;
  s.sleeping = info.sleeping;
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

void World::wake_body(uint32_t dense) {
  BodyInfo& info = bodies_.info[dense];
  if (!info.sleeping) return;
  info.sleeping = false;
  info.sleep_timer = 0;
  info.push = Vec3{};
  add_awake(dense);
  broadphase_.remove_parked(slots_.slot_at(dense));
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

// --- Commands ------------------------------------------------------------------------------------

namespace {
bool is_valid_point(const std::optional<Vec3>& point, const WorldSettings& s) {
  return !point || within(*point, s.max_coordinate);
}
}  // namespace

Error World::apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind != BodyKind::Dynamic) return Error::NotDynamic;
  if (!within(force, max_force(settings_)) || !is_valid_point(point, settings_)) {
    return Error::InvalidArgument;
  }
  bodies_.motion[dense].force += force;
  wake_body(dense);
  return Error::Ok;
}

Error World::apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind != BodyKind::Dynamic) return Error::NotDynamic;
  if (!within(impulse, max_impulse(settings_)) || !is_valid_point(point, settings_)) {
    return Error::InvalidArgument;
  }
  Motion& m = bodies_.motion[dense];
  const Vec3 velocity = m.velocity + impulse * m.inv_mass;
  if (!within(velocity, settings_.max_speed)) return Error::InvalidArgument;
  m.velocity = velocity;
  wake_body(dense);
  return Error::Ok;
}

Error World::set_velocity(ObjectID id, Vec3 velocity) {
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone) return Error::StaleId;
  if (bodies_.info[dense].kind == BodyKind::Static) return Error::NotDynamic;
  if (!within(velocity, settings_.max_speed)) return Error::InvalidArgument;
  bodies_.motion[dense].velocity = velocity;
  wake_body(dense);
  return Error::Ok;
}

// --- Step ----------------------------------------------------------------------------------------

void World::step(float dt) {
  if (!std::isfinite(dt) || dt <= 0) return;
  StageTimer total;
  StageTimer timer;
  profile_ = StepProfile{};

  // 0. reactivate
  if (resting_dirty_) {
    reactivate_resting(scratch_.reactivated);
    merge_records(contacts_, scratch_.reactivated, scratch_.merged);
    contacts_.swap(scratch_.merged);
  }
  profile_.awake_count = awake_count();

  integrate_velocities(dt);  // 1
  profile_.integrate_ms += timer.lap();
  update_broadphase();  // 2
  profile_.broadphase_ms = timer.lap();
  collide_pairs();  // 3
  profile_.narrowphase_ms = timer.lap();
  update_events();  // 4
  profile_.events_ms = timer.lap();
  apply_wakes();  // 5
  profile_.narrowphase_ms += timer.lap();
  solve(dt);         // 6, 7, 8: times itself into solve_ms and integrate_ms
  update_sleep(dt);  // 9: times itself into sleep_ms

  invalidate_queries();
  ++tick_;
  profile_.total_ms = total.lap();
}

void World::integrate_velocities(float dt) {
  scratch_.start_speed_sq.resize(bodies_.size());
  const Vec3 gravity = settings_.gravity;
  const float vmax = settings_.max_speed;
  const Vec3 lo{-vmax, -vmax, -vmax};
  const Vec3 hi{vmax, vmax, vmax};
  for (const uint32_t slot : awake_) {
    const uint32_t d = slots_.dense_of_slot(slot);
    Motion& m = bodies_.motion[d];
    scratch_.start_speed_sq[d] = length_squared(m.velocity);
    if (bodies_.info[d].kind == BodyKind::Dynamic) {
      m.velocity += (gravity + m.force * m.inv_mass) * dt;
      m.velocity *= 1.0f / (1.0f + dt * m.linear_damping);
      // Safety net, inactive in any sane scene: a large accumulated force on a very light body
      // must not drive the state to infinity (and NaN) on a server fed by clients.
      m.velocity = min(max(m.velocity, lo), hi);
    }
    m.force = Vec3{};
  }
}

void World::update_broadphase() {
  scratch_.moving_ids.clear();
  scratch_.moving_aabbs.clear();
  for (const uint32_t slot : awake_) {
    scratch_.moving_ids.push_back(slot);
    scratch_.moving_aabbs.push_back(bodies_.pose[slots_.dense_of_slot(slot)].aabb);
  }
  broadphase_.find_pairs(scratch_.moving_ids, scratch_.moving_aabbs, scratch_.pairs);
  profile_.pair_count = static_cast<uint32_t>(scratch_.pairs.size());
}

void World::collide_pairs() {
  scratch_.found.clear();
  scratch_.wake_requests.clear();
  const float moving_sq = settings_.sleep_speed * settings_.sleep_speed;
  // A sleeping dynamic body is woken by a partner that is awake and was moving at step start:
  // a dynamic body faster than sleep_speed, or a kinematic body with any velocity (it never
  // stops by itself, so even a slow one would push into the sleeper forever).
  auto wakes = [&](uint32_t sleeper, uint32_t other) {
    const BodyInfo& si = bodies_.info[sleeper];
    if (!si.sleeping || si.kind != BodyKind::Dynamic || is_parked(other)) return false;
    const float threshold = bodies_.info[other].kind == BodyKind::Kinematic ? 0.0f : moving_sq;
    return scratch_.start_speed_sq[other] > threshold;
  };
  for (const ProxyPair& pair : scratch_.pairs) {
    const uint32_t da = slots_.dense_of_slot(pair.a);
    const uint32_t db = slots_.dense_of_slot(pair.b);
    // No response is defined without a dynamic body (kinematic-static, kinematic-kinematic).
    if (bodies_.info[da].kind != BodyKind::Dynamic && bodies_.info[db].kind != BodyKind::Dynamic) continue;
    ContactPoint cp;
    if (!collide(bodies_.shape[da], bodies_.pose[da].position, bodies_.shape[db], bodies_.pose[db].position,
                 cp)) {
      continue;
    }
    // Slot order equals ObjectID order for live ids (indices are unique), so `found` is sorted.
    scratch_.found.push_back(
        {Contact{slots_.id_at(da), slots_.id_at(db), cp.point, cp.normal, cp.depth}, 0.0f, Vec3{}});
    if (wakes(da, db)) scratch_.wake_requests.push_back(da);
    if (wakes(db, da)) scratch_.wake_requests.push_back(db);
  }
  profile_.contact_count = static_cast<uint32_t>(scratch_.found.size());
}

void World::update_events() {
  scratch_.events.clear();
  diff_contacts(contacts_, scratch_.found, scratch_.events);
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
        if (bodies_.info[d].sleeping && bodies_.info[d].kind == BodyKind::Dynamic) {
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

void World::apply_wakes() {
  for (const uint32_t d : scratch_.wake_requests) {
    if (!bodies_.info[d].sleeping) continue;  // requested twice
    wake_body(d);
    ++profile_.woken_count;
  }
  if (resting_dirty_) {
    // Woken mid-step: the body's resting contacts are still exact (nothing in them moved), and
    // the broadphase already ran without it, so they join this step's list directly.
    reactivate_resting(scratch_.reactivated);
    merge_records(scratch_.found, scratch_.reactivated, contacts_);
  } else {
    contacts_.swap(scratch_.found);
  }
}

void World::solve(float dt) {
  StageTimer timer;
  // 6. solve velocities
  std::vector<SolverContact>& sc = scratch_.solver_contacts;
  sc.clear();
  auto inverse_mass = [&](uint32_t d) {
    const BodyInfo& info = bodies_.info[d];
    return info.kind == BodyKind::Dynamic && !info.sleeping ? bodies_.motion[d].inv_mass : 0.0f;
  };
  for (uint32_t i = 0; i < contacts_.size(); ++i) {
    const Contact& c = contacts_[i].contact;
    SolverContact s;
    s.body_a = slots_.find(c.a);
    s.body_b = slots_.find(c.b);
    s.record = i;
    s.inv_mass_a = inverse_mass(s.body_a);
    s.inv_mass_b = inverse_mass(s.body_b);
    if (s.inv_mass_a == 0 && s.inv_mass_b == 0) continue;  // nothing can move
    s.normal = c.normal;
    s.depth = c.depth;
    s.accumulated_impulse = contacts_[i].normal_impulse;
    s.friction_impulse = contacts_[i].friction_impulse;
    sc.push_back(s);
  }
  prepare_contacts(sc, bodies_.motion, bodies_.material, settings_.restitution_threshold);
  warm_start(sc, bodies_.motion);
  solve_contacts(sc, bodies_.motion, settings_.solver_iterations);
  for (const SolverContact& s : sc) {
    contacts_[s.record].normal_impulse = s.accumulated_impulse;
    contacts_[s.record].friction_impulse = s.friction_impulse;
  }
  wake_pushed_sleepers(sc);
  profile_.solve_ms = timer.lap();

  // 7. integrate positions
  for (const uint32_t slot : awake_) {
    const uint32_t d = slots_.dense_of_slot(slot);
    bodies_.pose[d].position += bodies_.motion[d].velocity * dt;
  }
  profile_.integrate_ms += timer.lap();

  // 8. correct positions, then refresh the AABBs of everything that moved
  correct_positions(sc, bodies_.pose, settings_.baumgarte, settings_.slop);
  profile_.solve_ms += timer.lap();
  for (const uint32_t slot : awake_) {
    const uint32_t d = slots_.dense_of_slot(slot);
    Pose& p = bodies_.pose[d];
    p.aabb = compute_aabb(bodies_.shape[d], p.position);
  }
  profile_.integrate_ms += timer.lap();
}

void World::wake_pushed_sleepers(std::span<const SolverContact> contacts) {
  // A sleeping body is infinite mass in the solve, so a body resting on it is held without
  // waking it. But a body pushing it any other way (lifted from below, shoved sideways by a
  // force, dragged along by friction) would be blocked forever: accumulate the impulse (normal
  // plus friction) it absorbs, except the part pressing it along gravity onto whatever supports
  // it, and wake it once that would have moved it faster than sleep_speed. Exact for
  // axis-aligned resting contacts (that part is exactly zero).
  const float g = length(settings_.gravity);
  const Vec3 down = g > 0 ? settings_.gravity * (1.0f / g) : Vec3{};
  const float wake_speed_sq = settings_.sleep_speed * settings_.sleep_speed;
  auto absorb = [&](uint32_t d, Vec3 impulse) {
    BodyInfo& info = bodies_.info[d];
    if (!info.sleeping || info.kind != BodyKind::Dynamic) return;
    const float along = dot(impulse, down);
    info.push += along > 0 ? impulse - down * along : impulse;
    const float inv_mass = bodies_.motion[d].inv_mass;
    if (length_squared(info.push) * (inv_mass * inv_mass) > wake_speed_sq) {
      wake_body(d);
      ++profile_.woken_count;
    }
  };
  for (const SolverContact& c : contacts) {
    // Both act on b as +p and on a as -p.
    const Vec3 p = c.normal * c.accumulated_impulse + c.friction_impulse;
    if (p == Vec3{}) continue;
    if (c.inv_mass_a == 0) absorb(c.body_a, -p);
    if (c.inv_mass_b == 0) absorb(c.body_b, p);
  }
}

void World::update_sleep(float dt) {
  StageTimer timer;
  const float slow_sq = settings_.sleep_speed * settings_.sleep_speed;
  uint32_t slept = 0;
  // Forward scan with swap-remove: the element moved into position i has not been visited yet.
  for (size_t i = 0; i < awake_.size();) {
    const uint32_t d = slots_.dense_of_slot(awake_[i]);
    BodyInfo& info = bodies_.info[d];
    Motion& m = bodies_.motion[d];
    // A kinematic body keeps its set velocity until told otherwise: it sleeps only when stopped.
    const bool slow =
        info.kind == BodyKind::Kinematic ? m.velocity == Vec3{} : length_squared(m.velocity) < slow_sq;
    if (!slow) {
      info.sleep_timer = 0;
      ++i;
      continue;
    }
    info.sleep_timer += dt;
    if (info.sleep_timer < settings_.sleep_time_s) {
      ++i;
      continue;
    }
    m.velocity = Vec3{};
    m.force = Vec3{};
    info.sleeping = true;
    remove_awake(d);
    broadphase_.add_parked(slots_.slot_at(d), bodies_.pose[d].aabb);
    ++slept;
  }
  profile_.slept_count = slept;

  if (slept > 0) {
    // Freeze the contacts that now join two parked bodies: nobody will recompute them.
    std::vector<ContactRecord>& frozen = scratch_.reactivated;
    frozen.clear();
    size_t keep = 0;
    for (size_t i = 0; i < contacts_.size(); ++i) {
      const Contact& c = contacts_[i].contact;
      if (is_parked(slots_.find(c.a)) && is_parked(slots_.find(c.b))) {
        frozen.push_back(contacts_[i]);
      } else {
        contacts_[keep++] = contacts_[i];
      }
    }
    contacts_.resize(keep);
    if (!frozen.empty()) {
      merge_records(resting_, frozen, scratch_.merged);
      resting_.swap(scratch_.merged);
    }
  }
  profile_.sleep_ms = timer.lap();
}

uint64_t World::world_hash() const {
  Fnv1a h;
  h.add_u32(slots_.size());
  for (uint32_t d = 0; d < slots_.size(); ++d) {
    const ObjectID id = slots_.id_at(d);
    const Pose& p = bodies_.pose[d];
    const Motion& m = bodies_.motion[d];
    const Shape& s = bodies_.shape[d];
    const Material& mat = bodies_.material[d];
    const BodyInfo& info = bodies_.info[d];
    h.add_u32(id.index);
    h.add_u32(id.generation);
    h.add_u32(static_cast<uint32_t>(info.kind));
    h.add_u32(info.sleeping ? 1u : 0u);
    h.add_float(info.sleep_timer);
    h.add_float(info.mass);
    h.add_vec(info.push);
    h.add_u32(static_cast<uint32_t>(s.kind));
    h.add_float(s.radius);
    h.add_vec(s.half_extents);
    h.add_vec(p.position);
    h.add_vec(m.velocity);
    h.add_vec(m.force);
    h.add_float(m.inv_mass);
    h.add_float(m.linear_damping);
    h.add_float(mat.restitution);
    h.add_float(mat.friction);
  }
  return h.value();
}

// --- Queries -------------------------------------------------------------------------------------

void World::build_query_cache() const {
  QueryCache& q = query_cache_;
  if (q.valid) return;
  q.all.clear();
  size_t i = 0;
  size_t j = 0;
  while (i < contacts_.size() || j < resting_.size()) {
    const bool take_active =
        j == resting_.size() || (i < contacts_.size() && record_less(contacts_[i], resting_[j]));
    q.all.push_back(take_active ? contacts_[i++].contact : resting_[j++].contact);
  }
  q.by_b.resize(q.all.size());
  std::iota(q.by_b.begin(), q.by_b.end(), 0u);
  std::sort(q.by_b.begin(), q.by_b.end(), [&](uint32_t x, uint32_t y) {
    return pair_less(q.all[x].b, q.all[x].a, q.all[y].b, q.all[y].a);
  });
  q.valid = true;
}

std::span<const Contact> World::get_collisions() const {
  build_query_cache();
  return query_cache_.all;
}

bool World::is_colliding(ObjectID id) const {
  const uint32_t dense = slots_.find(id);
  return dense != SlotMap::kNone && bodies_.info[dense].contact_count > 0;
}

bool World::are_colliding(ObjectID a, ObjectID b) const {
  if (!slots_.contains(a) || !slots_.contains(b) || a == b) return false;
  if (b < a) std::swap(a, b);
  return find_record(contacts_, a, b) != nullptr || find_record(resting_, a, b) != nullptr;
}

std::vector<Contact> World::get_collisions_for(ObjectID id) const {
  std::vector<Contact> out;
  const uint32_t dense = slots_.find(id);
  if (dense == SlotMap::kNone || bodies_.info[dense].contact_count == 0) return out;
  build_query_cache();
  const QueryCache& q = query_cache_;
  out.reserve(bodies_.info[dense].contact_count);
  // Pairs where id is b have a < id and come first in (a, b) order; by_b lists them by a.
  auto first = std::lower_bound(q.by_b.begin(), q.by_b.end(), id,
                                [&](uint32_t i, ObjectID key) { return q.all[i].b < key; });
  for (; first != q.by_b.end() && q.all[*first].b == id; ++first) out.push_back(q.all[*first]);
  for (const Contact& c : find_contacts_with_a(q.all, id)) out.push_back(c);
  return out;
}

std::span<const ContactEvent> World::contact_events() const { return events_; }

}  // namespace impulse::physics
