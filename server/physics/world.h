// The physics world: slot-map storage (slotmap.h) with columns of body data, and the fixed step.
// Knows nothing about networking. SI units; world frame right-handed, +Y up.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/physics/body_columns.h"
#include "server/physics/broadphase.h"
#include "server/physics/contact_list.h"
#include "server/physics/convex_hull.h"
#include "server/physics/heightfield.h"
#include "server/physics/triangle_mesh.h"
#include "server/physics/settings.h"
#include "server/physics/slotmap.h"
#include "server/physics/solver.h"
#include "server/physics/solver_wide.h"
#include "server/physics/types.h"

namespace impulse {
class WorkerPool;
}

namespace impulse::physics {

namespace detail {
// A dynamic body whose surface moved more than half its inner extent this step (World's
// continuous collision): by its displacement plus, for a shape that is not a sphere, its turn
// times its extent (the farthest a surface point can move by the rotation).
struct FastBody {
  uint32_t dense = 0;
  Vec3 start;  // centre of mass at the start of the step [m]
  Vec3 delta;  // its displacement this step [m]
  Quat start_orientation;  // at the start of the step
  Vec3 axis{0.0f, 1.0f, 0.0f};  // unit, world frame: the step's rotation is `angle` about it
  float angle = 0;              // [rad], in [0, pi]; 0 for a sphere (its turn moves no surface)
};
}  // namespace detail

/// A movable body's pose at its ObjectID::index, for queries against a past tick (lag
/// compensation: World::movable_poses, raycast_closest_at).
struct IndexedPose {
  uint32_t generation = 0;  ///< the body's generation; 0: no dynamic or kinematic body at this index
  Vec3 position;            ///< centre of mass [m], world frame
  Quat orientation;         ///< local to world
};

/// Per-stage wall-clock timings of the last step [ms]. The stages are listed in world.cpp.
struct StepProfile {
  // Each stage of World::step (world.cpp's header lists them), timed on its own [ms].
  double broadphase_ms = 0;   ///< 1: gathering moving proxies + SpatialHash::find_pairs
  double narrowphase_ms = 0;  ///< 2: collide() per pair, marking sleepers to wake
  double events_ms = 0;       ///< 3: Begin/End merge-diff and warm-start matching
  double wake_ms = 0;         ///< 4: waking the marked islands
  double solve_ms = 0;        ///< 5: contact preparation + substeps (forces, velocities, positions, relax) + restitution
  double writeback_ms = 0;    ///< 6: poses from the solver's deltas, AABB refresh, the fast-body list
  double continuous_ms = 0;   ///< 6b: continuous collision of the fast bodies (0 work when none)
  double islands_ms = 0;      ///< 7: island building, sleep timers, parking + freezing resting contacts
  double total_ms = 0;
  uint32_t pair_count = 0;      ///< broadphase candidate pairs
  uint32_t contact_count = 0;   ///< touching pairs (manifolds) after narrowphase (awake)
  uint32_t point_count = 0;     ///< manifold points given to the solver
  uint32_t awake_count = 0;     ///< bodies integrated this step
  uint32_t island_count = 0;    ///< awake islands built this step
  uint32_t woken_count = 0;     ///< sleeping bodies woken during this step
  uint32_t slept_count = 0;     ///< bodies that fell asleep this step
  uint32_t fast_bodies = 0;     ///< 6b: dynamic bodies swept this step (moved > half their inner extent)
  uint32_t continuous_hits = 0; ///< 6b: of those, moved back to their time of impact
};

/// Bounds of the commands, derived from the settings so that anything a valid body can do is
/// accepted and anything absurd is rejected. Constant outer bounds:
///  - |impulse component| <= max_mass * max_speed [N·s]: enough to take the heaviest body from
///    rest to max_speed at once;
///  - |force component| <= max_mass * max_speed * kMaxPushRate [N]: the same within one 60 Hz tick;
///  - |torque component| <= max_torque() [N·m] and |angular impulse component| <=
///    max_angular_impulse() [N·m·s]: max_force() and max_impulse() times max_extent.
/// And bounds by what the push does to this body (the push rule, settings.h):
///  - the step's accumulated force / mass <= kMaxPushRate * max_speed [m/s^2], and its
///    accumulated torque through the world inverse inertia <= kMaxPushRate * max_angular_speed
///    [rad/s^2] (a force at a point counts its torque);
///  - after an impulse, |velocity| must stay <= max_speed and |angular velocity| <=
///    max_angular_speed (lengths), else InvalidArgument.
/// (The wire limits kMaxForce, kMaxImpulse in shared/wire/codec.h lie inside the outer bounds.)
float max_force(const WorldSettings& settings);
float max_impulse(const WorldSettings& settings);
float max_torque(const WorldSettings& settings);
float max_angular_impulse(const WorldSettings& settings);

/// Reason a setting is unusable (e.g. "cell_size must be finite and > 0"), or nullptr when all are
/// usable. World's constructor replaces each unusable field by its default instead of failing;
/// callers that load settings from a file or flags should call this first and report the reason.
const char* check_settings(const WorldSettings& settings);

/// Why World::create_object would refuse `desc` as InvalidArgument under `settings` ("field:
/// rule", e.g. "radius: must be in [kMinExtent (1 mm), max_extent]"), or nullptr when it is
/// acceptable. Scene loaders call it to name the field; create_object applies the same rules.
const char* check_body_desc(const BodyDesc& desc, const WorldSettings& settings);

struct CreateResult {
  Error error = Error::Ok;
  ObjectID id;  ///< valid only when error == Ok
};

/// Coefficients for contacts between two material ids, overriding the mixing rules.
struct MaterialPair {
  float friction = 0.5f;     ///< Coulomb coefficient, >= 0
  float restitution = 0.0f;  ///< [0, 1]
};

/// The simulation: storage, commands, the fixed step, queries and contact events.
/// Single-threaded: not safe for concurrent calls, including concurrent const queries (they may
/// fill an internal cache). Spans returned by queries stay valid until the next non-const call.
///
/// Islands and sleep: each step the awake dynamic bodies are split into islands, the connected
/// components of the graph whose edges are their non-sensor contacts (static and kinematic
/// bodies do not join islands, so one floor does not merge everything). An island falls asleep
/// when every body in it has stayed slower than sleep_speed (linear, and angular times the body's
/// extent) for sleep_time_s: velocities zeroed, bodies parked in the broadphase and skipped by
/// every stage, contacts frozen and still reported. A sleeping island costs nothing per step.
/// The whole island wakes when one of its bodies gets a command (force, torque, impulse,
/// velocity), when an awake dynamic body or a moving kinematic body touches one of its bodies,
/// when a body touching it is destroyed, when it loses a contact with an awake body, and when a
/// static body is created over it.
class World {
 public:
  /// @param settings  copied; unusable fields (see check_settings) are replaced by defaults
  explicit World(const WorldSettings& settings = {});

  // --- Storage ------------------------------------------------------------------------------
  /// Creates an object. Validation (check_body_desc): a known kind and shape kind; a plane only as
  /// a static body; every float finite; kMinExtent (1 mm) <= radius (sphere, capsule), half
  /// extents (box) <= max_extent, 0 <= half_height (capsule) <= max_extent; an orientation with
  /// | |q| - 1 | <= 1e-3 (normalised on creation); 0 < mass <= max_mass, a density (mass over the
  /// shape's volume) in [kMinDensity, kMaxDensity] = [1e-3, 1e5] kg/m^3, a finite 1 / mass
  /// and finite inverse principal moments of inertia for dynamic bodies (ignored
  /// otherwise); restitution in [0, 1]; friction >= 0; damping >= 0; |position component| <=
  /// max_coordinate; |velocity| <= max_speed; |angular velocity| <= max_angular_speed (lengths).
  /// Inertia is the solid shape's of uniform density (sphere 2/5 m r^2, box m (b^2 + c^2) / 3 per
  /// axis for half extents, capsule cylinder plus two hemispheres).
  /// Dynamic and kinematic bodies start awake; a static body wakes the sleeping bodies its AABB
  /// overlaps. O(1) amortised, plus one broadphase query for a static body.
  /// @return InvalidArgument or WorldFull (max_objects, or slot indices exhausted) with a null id
  ///         and the world unchanged, else Ok and the new id.
  CreateResult create_object(const BodyDesc& desc);
  /// Adds a convex hull (build_convex_hull) to the world's hull table, or finds an equal one
  /// there, and returns the World's copy: pass make_hull(*hull) as a BodyDesc's shape. The copy
  /// is immutable and lives as long as the World or a copy of it (copies share it); hulls are
  /// never removed, and restore_state replaces the table (pointers handed out before then stay
  /// valid only for bodies of the old table, which restore_state also replaces). A body's shape must name a hull of its own World.
  /// @return nullptr, the world unchanged, when the hull fails check_hull (message in *error),
  ///         its radius exceeds max_extent, or the table holds kMaxWorldHulls already.
  const ConvexHull* add_hull(const ConvexHull& hull, std::string* error = nullptr);
  /// The hulls added so far, in table order (Shape::data_id indexes it).
  std::span<const std::shared_ptr<const ConvexHull>> hulls() const { return hulls_; }
  /// Most hulls one World keeps: each costs up to about 6 KB; scenes and assets, not clients, add them.
  static constexpr uint32_t kMaxWorldHulls = 4096;
  /// Adds a static triangle mesh (build_triangle_mesh) to the world's mesh table, or finds an
  /// equal one there, and returns the World's copy: pass make_mesh(*mesh) as a static body's
  /// shape. Lifetime and sharing as for add_hull.
  /// @return nullptr, the world unchanged, when the mesh was not made by build_triangle_mesh
  ///         (message in *error) or the table holds kMaxWorldMeshes already.
  const TriangleMesh* add_mesh(const TriangleMesh& mesh, std::string* error = nullptr);
  /// The meshes added so far, in table order (Shape::data_id indexes it).
  std::span<const std::shared_ptr<const TriangleMesh>> meshes() const { return meshes_; }
  /// Most meshes one World keeps (each up to kMaxMeshTriangles triangles): scenes add them, not clients.
  static constexpr uint32_t kMaxWorldMeshes = 256;
  /// Adds a static heightfield (build_heightfield) to the world's heightfield table, or finds an
  /// equal one there, and returns the World's copy: pass make_heightfield(*field) as a static
  /// body's shape. Lifetime and sharing as for add_hull.
  /// @return nullptr, the world unchanged, when the field fails check_heightfield (message in
  ///         *error) or the table holds kMaxWorldHeightFields already.
  const HeightField* add_heightfield(const HeightField& field, std::string* error = nullptr);
  /// The heightfields added so far, in table order (Shape::data_id indexes it).
  std::span<const std::shared_ptr<const HeightField>> heightfields() const { return heightfields_; }
  /// Most heightfields one World keeps.
  static constexpr uint32_t kMaxWorldHeightFields = 256;
  /// The shape's asset id: its data's index in one list of the hull table, then the mesh table,
  /// then the heightfield table (what snapshots and the admin endpoint's /assets name it by); 0
  /// for the kinds without data. Below 4608 (the three tables' limits), so it fits 16 bits.
  uint32_t asset_id(const Shape& shape) const {
    switch (shape.kind) {
      case ShapeKind::Hull: return shape.data_id;
      case ShapeKind::Mesh: return static_cast<uint32_t>(hulls_.size()) + shape.data_id;
      case ShapeKind::HeightField: return static_cast<uint32_t>(hulls_.size() + meshes_.size()) + shape.data_id;
      default: return 0;
    }
  }
  /// Destroys an object. Its contacts disappear from the queries at once; their End events are
  /// reported with the next step's events. Sleeping islands that were touching it are woken.
  /// Cost O(1) for a body without contacts, else O(contacts in the world).
  /// @return StaleId (world unchanged) or Ok.
  Error destroy_object(ObjectID id);
  /// Creates a joint (joint.h) between body_a and body_b, or body_a and the static world when
  /// body_b is null, at their poses now. Jointed dynamic bodies form one island (they sleep and
  /// wake together); sleeping ones are woken. Unless collide_connected, the two bodies stop
  /// colliding with each other. Joints are part of the state (save_state, world_hash).
  /// @return StaleId (a body is not live), InvalidArgument (the same body twice, neither body
  ///         dynamic, a value not finite or out of range, a zero hinge axis, a distance joint with
  ///         coincident ends), or Ok and the joint's id; the world is unchanged unless Ok.
  struct JointResult {
    ObjectID id;
    Error error = Error::Ok;
  };
  JointResult create_joint(const JointDesc& desc);
  /// Destroys a joint and wakes its bodies. @return StaleId or Ok.
  Error destroy_joint(ObjectID joint);
  /// Replaces a hinge's or a slider's motor (JointMotor) and wakes its bodies; the motor's accumulated impulse
  /// restarts from 0 when the mode changes. @return StaleId, InvalidArgument (neither a hinge nor a slider, a
  /// value not finite or out of range: the world unchanged) or Ok.
  Error set_joint_motor(ObjectID joint, const JointMotor& motor);
  /// Every joint removed since the last step began (or clear_joint_removals()), in removal order:
  /// destroyed, broken (at a step's end) or gone with one of its bodies (destroy_object, the
  /// non-finite guard). Read it after the requests and after each step: every step starts it
  /// afresh, so a world nobody reads (a replay) keeps none. Not saved by save_state, cleared by
  /// restore_state.
  std::span<const RemovedJoint> joint_removals() const { return joint_removals_; }
  void clear_joint_removals() { joint_removals_.clear(); }
  /// A copy of a joint (its accumulated impulses of the last step included), or nullopt.
  std::optional<JointRecord> get_joint(ObjectID joint) const;
  /// Live joints. O(1).
  uint32_t joint_count() const { return live_joints_; }
  /// The joints that broke in the last step (JointDesc::break_force, break_torque), in joint slot
  /// order: destroyed at its end. Cleared by every step; not saved by save_state.
  std::span<const BrokenJoint> broken_joints() const { return broken_joints_; }
  /// True when id names a live object.
  bool is_valid(ObjectID id) const;
  /// Whether `id` is a live dynamic or kinematic body that is awake (simulated this step). O(1).
  bool is_awake(ObjectID id) const;
  /// Whether `id` is a live dynamic or kinematic body that sleeps (parked, not simulated). O(1).
  bool is_asleep(ObjectID id) const;
  /// Touching pairs (manifolds) `id` is part of after the last step, awake or resting; 0 for an
  /// unknown id. O(1).
  uint32_t contact_count_of(ObjectID id) const;
  /// Touching pairs between awake bodies after the last step (the solver's list). O(1).
  uint32_t active_contact_count() const { return static_cast<uint32_t>(contacts_.size()); }
  /// A copy of the object's state, or nullopt for a stale id.
  std::optional<BodyState> get_object(ObjectID id) const;
  /// Live objects. O(1).
  uint32_t object_count() const;
  /// Non-static bodies that are awake. O(1).
  uint32_t awake_count() const;
  /// Calls fn(const BodyState&) for every live object. Cost O(live), in a deterministic order.
  template <class Fn>
  void for_each_object(Fn&& fn) const {
    for (uint32_t d = 0; d < object_count(); ++d) fn(state_at_dense(d));
  }
  /// The same for the objects at positions [first, last) of that order (last <= object_count()),
  /// so callers can split the walk across threads: calls fn(position, const BodyState&).
  template <class Fn>
  void for_each_object_in(uint32_t first, uint32_t last, Fn&& fn) const {
    for (uint32_t d = first; d < last; ++d) fn(d, state_at_dense(d));
  }

  // --- Commands (take effect at the next step; each wakes the body's island) --------------------
  /// Adds a force [N, world frame] for the next step only (forces accumulate until then). With
  /// `point` (world frame [m]) it also adds the torque (point - centre) x force.
  /// @return StaleId, NotDynamic, InvalidArgument (non-finite, |component| > max_force(), a point
  ///         that is non-finite or beyond max_coordinate, a torque beyond max_torque(), or a step
  ///         total beyond the push rule above) or Ok. On error nothing changes.
  Error apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point = std::nullopt);
  /// Adds a torque [N·m, world frame] for the next step only.
  /// @return StaleId, NotDynamic, InvalidArgument (non-finite, |component| > max_torque(), or a
  ///         step total beyond the push rule above) or Ok.
  Error apply_torque(ObjectID id, Vec3 torque);
  /// Changes velocity by impulse / mass [N·s, world frame] immediately; with `point` (world [m])
  /// also the angular velocity by I^-1 ((point - centre) x impulse).
  /// @return StaleId, NotDynamic, InvalidArgument (non-finite, |component| > max_impulse(), a
  ///         resulting speed beyond max_speed or max_angular_speed, or a bad point) or Ok.
  Error apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point = std::nullopt);
  /// Sets the velocity [m/s, world frame] of a dynamic or kinematic body.
  /// @return StaleId, NotDynamic (static body), InvalidArgument (non-finite or |velocity| >
  ///         max_speed) or Ok.
  Error set_velocity(ObjectID id, Vec3 velocity);
  /// Sets the angular velocity [rad/s, world frame] of a dynamic or kinematic body.
  /// @return StaleId, NotDynamic (static body), InvalidArgument (non-finite or |angular velocity|
  ///         > max_angular_speed) or Ok.
  Error set_angular_velocity(ObjectID id, Vec3 angular_velocity);
  /// Puts a dynamic or kinematic body to sleep now, where it is: its velocities, force and torque
  /// become zero and it leaves the step, as a body of an island that fell asleep (a singleton
  /// island). It wakes as any sleeping body does: touched by an awake body, or a command. For
  /// the server's tick budget (a client whose bodies cost more than its share).
  /// `hold_steps` > 0 also holds it asleep for that many steps: no contact wakes it (an awake
  /// body touching it meets an immovable body, as a static one), only a command does. Without
  /// the hold, the bodies a throttled client had sent into a crowd were woken again by the crowd
  /// in the next step. A body asleep already keeps the later of its old and new hold.
  /// @return StaleId, NotDynamic (static body) or Ok (also when it was asleep already).
  Error put_to_sleep(ObjectID id, uint32_t hold_steps = 0);
  /// Whether a body is held asleep (put_to_sleep's hold) at this tick. False for a stale id.
  bool is_held_asleep(ObjectID id) const;
  /// Sets the coefficients used for every contact between material ids a and b (either order),
  /// instead of the mixing rules. Takes effect at the next step. O(log pairs).
  /// @return InvalidArgument (friction not finite or < 0, restitution outside [0, 1]) or Ok.
  Error set_material_pair(uint16_t a, uint16_t b, const MaterialPair& pair);
  /// Sets the velocities that carry a kinematic body from its current pose to `target_position`
  /// [m] and `target_orientation` in one step of `dt` [s] (Jolt's Body::MoveKinematic): linear
  /// velocity (target - position) / dt; angular velocity about the axis of the shortest-arc
  /// rotation delta = target * conj(orientation) (sign chosen so delta.w >= 0). The angle is not
  /// Jolt's angle / dt but the inverse of this world's integrator (solver.cpp: `substeps` first-
  /// order quaternion steps, each normalised, each turning by 2 atan(|w| h / 2) for h = dt /
  /// substeps), so the body lands on the target to rounding: |w| = (2 / h) tan(angle / (2 substeps)).
  /// The velocities stay after that step (as in Jolt): call it every step, or set them to zero.
  /// Wakes the body. The target orientation is normalised; it must have | |q| - 1 | <= 1e-3.
  /// @return StaleId; NotDynamic for a dynamic or static body (only kinematic bodies have targets);
  ///         InvalidArgument for a non-finite or out-of-range target (|component| >
  ///         max_coordinate, a bad quaternion), a dt that is not finite and > 0, or velocities
  ///         beyond max_speed / max_angular_speed; else Ok. On error nothing changes.
  Error move_kinematic(ObjectID id, Vec3 target_position, Quat target_orientation, float dt);
  /// Replaces a dynamic body's state (temporary ownership: a client's own simulation of an
  /// island only it touches): centre of mass [m], orientation (local to world, |q| within 1e-3
  /// of 1, normalised here), velocity [m/s] and angular velocity [rad/s], world frame. Wakes the
  /// body; its contacts are found again by the next step. Whether the move is plausible is the
  /// caller's to judge. StaleId, NotDynamic (static or kinematic), or InvalidArgument (a value out
  /// of max_coordinate, max_speed or max_angular_speed, or not finite).
  Error set_state(ObjectID id, Vec3 position, Quat orientation, Vec3 velocity, Vec3 angular_velocity);
  /// The material-pair table, sorted by key (min id << 16 | max id). For exporting scenes.
  std::span<const std::pair<uint32_t, MaterialPair>> material_pairs() const { return material_pairs_; }
  /// Replaces a body's collision filter (Filter in types.h; any bit pattern is valid). Wakes the
  /// body (a static body wakes the sleeping bodies resting on it), so a contact the new filter
  /// forbids ends with an End event at the next step, and a newly allowed one begins there.
  /// @return StaleId (world unchanged) or Ok.
  Error set_filter(ObjectID id, const Filter& filter);

  // --- Step ----------------------------------------------------------------------------------
  /// Advances the world by dt [s] (fixed, typically 1/60). A dt that is not finite or <= 0 makes
  /// the call a no-op (no tick, no events change). The stages are listed in world.cpp.
  /// No heap allocation once the scratch buffers have grown to the scene.
  void step(float dt);
  /// Steps taken so far.
  uint64_t tick() const { return tick_; }
  /// Bodies the last step's guard removed (ids as they were): awake bodies whose pose, velocity,
  /// accumulated force or torque, inverse mass or inverse inertia was not finite at the start of
  /// the step, before any contact was built. Validation keeps such bodies from being created or
  /// restored; the guard keeps one that arises anyway from spreading NaN to its contact partners.
  /// Each is destroyed as by destroy_object (End events for its contacts). Cleared by every step.
  std::span<const ObjectID> removed_non_finite() const { return removed_non_finite_; }
  /// Bodies the guard has removed since this World was constructed (not saved by save_state).
  uint64_t removed_non_finite_total() const { return removed_non_finite_total_; }
  /// Bodies the last step put back where it found them, because their contact group's solve gave
  /// a state that was not finite (validation, the density range, the push rule and the speed caps
  /// should make that impossible; this is the net behind them). Every body of such a group (the
  /// connected component of its solved contacts) keeps its step-start pose and velocity; the
  /// bodies whose own result was not finite (listed here, in awake order) are also stopped, and
  /// the group's contacts forget their impulses. Nothing is removed and nothing is moved: one
  /// client's body cannot cost another client theirs. Cleared by every step.
  std::span<const ObjectID> restored_non_finite() const { return restored_non_finite_; }
  /// Bodies restored since this World was constructed (not saved by save_state).
  uint64_t restored_non_finite_total() const { return restored_non_finite_total_; }
  /// The guard's test hooks (a NaN velocity, a non-finite solve), which no validated input can
  /// reach: tests/support/world_test_access.h, for tests only.
  friend struct WorldTestAccess;
  const StepProfile& profile() const { return profile_; }
  const WorldSettings& settings() const { return settings_; }

  /// Solves the step's independent contact groups on `pool`'s threads (null, the default: on the
  /// calling thread). The world does not own the pool, which must outlive it or be replaced first.
  /// The result is bit-identical with and without a pool and for any thread count: the contacts
  /// are split into batches of whole contact-connected groups of movable bodies, and a body's
  /// updates happen in the same order within its group either way (see World::solve).
  void set_worker_pool(const WorkerPool* pool) { pool_ = pool; }
  /// Hash of the settings, all body state (every field of every body column: ids, poses and
  /// AABBs, velocities, accumulated forces and torques, inverse mass and inertia, damping,
  /// shapes, materials, kinds, sensor and sleep state, island and awake-list bookkeeping), the
  /// contact caches (manifold points and their warm-starting impulses) and the material pairs,
  /// bit-exact: XXH3-64 (xxHash) of the fields that save_state writes, through the same field
  /// lists (world_fields.h), as little-endian 32-bit words, the dense columns in storage order
  /// and the sorted contact lists. O(live + contacts), about 0.2 KB per body. Not reentrant: it
  /// serialises into a scratch buffer owned by the world (like the query cache).
  uint64_t world_hash() const { return hash_state(false); }
  /// Hash of what a step can change: the tick, the live and resting-contact counts, the number
  /// of sleeping islands, the awake list in order with each awake body's fields as world_hash
  /// hashes them, and the active contact cache. XXH3-64 like world_hash, O(awake + active
  /// contacts). Sleeping bodies and resting contacts are left out: the step leaves them alone
  /// and every request that changes a body wakes it first, so a state that diverges from another
  /// does so in an awake body (or a count) at the tick it diverges, and world_hash covers the rest.
  /// Recordings store it per tick (cheap at any scale) and world_hash at keyframes.
  uint64_t awake_hash() const { return hash_state(true); }

  // --- Save and restore (server/physics/world_state.cpp, which documents the byte layout) -------
  /// Appends the complete simulation state to `out` (cleared first): settings, tick, the slot
  /// map with its free list, every body column, the awake list in order, sleeping islands, the
  /// active and resting contact caches with their warm-starting impulses, the last step's and the
  /// pending contact events, and the material pairs. Not saved: the step profile, the per-step
  /// scratch buffers and the query cache (rebuilt on demand). A world restored from the blob
  /// steps bit-identically to this one (same world_hash() every tick, same events, same next
  /// ObjectID), in any process built with the same layout. Little-endian, fixed-width fields,
  /// an XXH64 checksum; 194 bytes per body plus 98-206 bytes per contact (1-4 points), about
  /// 400 bytes per body in a settled box pile. O(bodies + contacts); allocates only `out`'s growth.
  void save_state(std::vector<uint8_t>& out) const;
  /// Replaces this world's state, settings included, with one saved by save_state. The input may
  /// come from a file or the network: magic, format version, layout fingerprint, sizes and the
  /// XXH64 checksum are verified, then every count, index and id is range-checked and the
  /// invariants between the parts (slot map, awake list, islands, contact lists and counts) are
  /// checked before anything changes. The broadphase is rebuilt from the parked bodies (its pair
  /// output does not depend on its history, see broadphase.h) and the query cache invalidated.
  /// The step's scratch buffers are kept; the new broadphase grows its buffers over the first
  /// steps as a new world's does, after which the step allocates no more than the original would.
  /// O(bytes); allocates the new state (a small multiple of the input size at most).
  /// @param error  on failure, if not null, receives one line saying what is wrong
  /// @return true on success; false on malformed, truncated, corrupted, wrong-version or
  ///         wrong-layout input, with the world left unchanged (never asserts or throws)
  bool restore_state(std::span<const uint8_t> bytes, std::string* error);

  // --- Contact queries, answered from the last step's contact data ------------------------------
  /// Every touching pair after the last step, sorted by (a, b). Includes resting contacts of
  /// sleeping bodies and sensor contacts. Merged lazily from the active and resting lists:
  /// O(contacts) on the first call after a change, then O(1).
  std::span<const Contact> get_collisions() const;
  /// True when the object touched anything after the last step (false for a stale id). O(1).
  bool is_colliding(ObjectID id) const;
  /// True when a and b touched after the last step (either order; false for stale ids).
  /// O(log contacts): binary search of the sorted lists.
  bool are_colliding(ObjectID a, ObjectID b) const;
  /// The contacts of one object after the last step, sorted by (a, b); empty for a stale id.
  std::vector<Contact> get_collisions_for(ObjectID id) const;
  /// Begin and end events of the last step, sorted by (a, b). A pair never gets both in one step.
  /// Includes End events of bodies destroyed since the step before (with their old ids).
  std::span<const ContactEvent> contact_events() const;
  /// Contacts frozen because both bodies sleep (or one is static). Diagnostics. O(1).
  uint32_t resting_contact_count() const { return static_cast<uint32_t>(resting_.size()); }

  // --- Spatial queries (server/physics/world_queries.cpp) ----------------------------------------
  // Static and sleeping bodies are found through the broadphase grid; awake bodies are tested
  // against their current AABBs directly (O(awake)), since the grid's copy of them is a step old.
  /// The first shape hit by the segment origin + t * translation, t in [0, 1] (world frame [m]),
  /// or nullopt. Ties in fraction go to the smaller ObjectID. A ray starting inside a shape hits
  /// it at fraction 0 with normal -translation/|translation|. Sensors are included.
  /// With `filter`, only bodies that query_accepts(*filter, body filter) are considered (a skipped
  /// body neither hits nor blocks); without it, every body.
  /// With `back_faces`, shapes are hollow shells (Jolt's mTreatConvexAsSolid = false with
  /// CollideWithBackFaces): a ray starting inside a shape hits it where it exits, with the outward
  /// normal there (along the ray), or not at all if the segment ends inside (raycast.h).
  std::optional<RayHit> raycast_closest(Vec3 origin, Vec3 translation,
                                        std::optional<QueryFilter> filter = std::nullopt,
                                        bool back_faces = false) const;
  /// Every shape hit by the segment, one hit per object (its first), sorted by (fraction, id).
  /// `out` is cleared first. `filter` and `back_faces` as for raycast_closest.
  void raycast_all(Vec3 origin, Vec3 translation, std::vector<RayHit>& out,
                   std::optional<QueryFilter> filter = std::nullopt, bool back_faces = false) const;
  /// The pose of every live dynamic and kinematic body, at out[its index]; the other entries of
  /// out (static bodies, free slots) get generation 0. `out` is resized to the slot count. O(slots).
  void movable_poses(std::vector<IndexedPose>& out) const;
  /// raycast_closest with the dynamic and kinematic bodies placed by `poses` (movable_poses of a
  /// past tick, possibly interpolated) instead of their present poses: for lag compensation.
  /// Static bodies never move and are cast where they are. A movable body is cast only when
  /// poses[its index] carries its generation: a body created since that tick is not there, and
  /// one destroyed since has no shape left to cast. O(static candidates + poses.size()).
  std::optional<RayHit> raycast_closest_at(Vec3 origin, Vec3 translation, std::span<const IndexedPose> poses,
                                           std::optional<QueryFilter> filter = std::nullopt,
                                           bool back_faces = false) const;
  /// raycast_all with bodies placed by `poses`, as raycast_closest_at.
  void raycast_all_at(Vec3 origin, Vec3 translation, std::span<const IndexedPose> poses, std::vector<RayHit>& out,
                      std::optional<QueryFilter> filter = std::nullopt, bool back_faces = false) const;
  /// Every object whose (speculative-margin enlarged) AABB overlaps `box` (world frame [m]),
  /// sorted by ObjectID. `out` is cleared first. `filter` as for raycast_closest.
  void overlap_aabb(const Aabb& box, std::vector<ObjectID>& out,
                    std::optional<QueryFilter> filter = std::nullopt) const;

 private:
  BodyState state_at_dense(uint32_t dense) const;
  bool is_parked(uint32_t dense) const;  // static or sleeping: a parked broadphase proxy
  void add_awake(uint32_t dense);
  void remove_awake(uint32_t dense);
  /// Wakes a sleeping body: a dynamic body's whole island, a kinematic body alone (no-op when
  /// awake or static). With `unpark`, the woken proxies stay in the broadphase's parked set and
  /// their slots are appended there, for the caller to remove (wake_front queries them while the
  /// front spreads).
  void wake_body(uint32_t dense, std::vector<uint32_t>* unpark = nullptr);
  void reactivate_resting(std::vector<ContactRecord>& out);
  void invalidate_queries() { query_cache_.valid = false; }
  void build_query_cache() const;
  Error check_command_target(ObjectID id, uint32_t& dense) const;
  MaterialPair mix_materials(uint32_t da, uint32_t db) const;
  /// Dense indices of the bodies whose AABB the segment overlaps: parked ones from the grid,
  /// awake ones tested directly (world_queries.cpp).
  void gather_ray_candidates(Vec3 origin, Vec3 translation, const std::optional<QueryFilter>& filter,
                             std::vector<uint32_t>& dense_out) const;
  // raycast_*_at's candidates: static bodies from the grid, movable ones from `poses` whose
  // bounding sphere the segment passes (their pose in `transforms_out`, same order).
  void gather_posed_ray_candidates(Vec3 origin, Vec3 translation, std::span<const IndexedPose> poses,
                                   const std::optional<QueryFilter>& filter, std::vector<uint32_t>& dense_out,
                                   std::vector<Transform>& transforms_out) const;

  // Stages of step(), in order (see world.cpp).
  void remove_non_finite();
  void update_broadphase(float dt);
  void collide_pairs(float dt);
  /// Narrowphase of one broadphase pair: true with its records appended to `out` (one, or one
  /// per manifold against a mesh, in sub order) when it touches, and the dense indices of sleeping bodies it wakes in wake[0..wake_count). Reads only.
  bool collide_pair(const ProxyPair& pair, float dt, std::vector<ContactRecord>& out, uint32_t wake[2],
                    int& wake_count) const;
  void update_events();
  void apply_wakes(float dt);
  /// Stage 4's wake front: collides each body woken this step (awake_[first..]) with the parked
  /// bodies it overlaps, waking the sleepers it touches, until no more wake (see world.cpp).
  void wake_front(size_t first, float dt, std::vector<uint32_t>& unpark);
  /// The wake front's contacts, less those its islands' resting lists brought back, begin: Begin
  /// events merged into events_, contact counts.
  void begin_front_contacts();
  /// Moves the contacts that join two parked bodies from contacts_ to resting_ (stage 7 after an
  /// island sleeps, and step start after put_to_sleep).
  void freeze_parked_contacts();
  void solve(float dt);
  // Joints (world_joints.cpp): the solver index of a joint's body (the immovable one when it is
  // parked or absent); the joints' edges for the batches and islands; the impulses stored back.
  uint32_t joint_solver_index(ObjectID body, uint32_t movable) const;
  SolverJoint prepare_joint(uint32_t record, uint32_t ia, uint32_t ib) const;
  bool jointed_without_collision(ObjectID a, ObjectID b) const;
  void destroy_joints_of(ObjectID body);
  Error remove_joint(ObjectID joint, JointRemoval reason);
  void rebuild_joint_filter();
  void break_joints();  // the step's end: destroys the joints past their thresholds
  // The solve's parts (world_solve.cpp), in order: solver bodies and forces from the awake list
  // (returns their count); the solved contacts; their batches (returns how many: 1 = on this
  // thread); the soft step per batch; the poses written back.
  uint32_t prepare_solver_bodies();
  void gather_solver_edges(uint32_t movable);
  size_t batch_solver_edges(uint32_t movable);
  void run_solver_batches(float dt, size_t batch_count);
  void restore_non_finite_groups(uint32_t movable);
  void write_back_poses(uint32_t movable);
  void sweep_fast_bodies();  // continuous collision, world_continuous.cpp
  void update_islands(float dt);
  void sleep_island(std::span<const uint32_t> dense_members);

  WorldSettings settings_;
  uint64_t tick_ = 0;
  StepProfile profile_;

  SlotMap slots_;
  std::vector<std::shared_ptr<const ConvexHull>> hulls_;
  std::vector<std::shared_ptr<const TriangleMesh>> meshes_;  // add_mesh's table; Shape::mesh points into it
  std::vector<std::shared_ptr<const HeightField>> heightfields_;  // add_heightfield's table  // add_hull's table; Shape::hull points into it
  BodyColumns bodies_;           // dense columns, indexed by SlotMap dense index
  std::vector<uint32_t> awake_;  // slot indices of awake dynamic and kinematic bodies
  SpatialHash broadphase_;       // proxy id = slot index

  // Contacts, both sorted by (a, b) and disjoint. Active: pairs with an awake body, computed by
  // the last step. Resting: pairs of two parked bodies, frozen when the later one fell asleep.
  // Each keeps its manifold points with their impulses for warm starting.
  std::vector<ContactRecord> contacts_;
  std::vector<ContactRecord> resting_;
  // Joints: slots with generations (a destroyed joint's slot is reused, the free list's last
  // first), solved in slot order.
  std::vector<JointSlot> joints_;
  std::vector<uint32_t> free_joints_;
  uint32_t live_joints_ = 0;
  std::vector<BrokenJoint> breaking_;       // found by the solve, destroyed at the step's end
  std::vector<BrokenJoint> broken_joints_;  // of the last step
  std::vector<RemovedJoint> joint_removals_;  // since clear_joint_removals
  // (min, max) u64 ids of jointed pairs that must not collide, sorted, for collide_pair.
  std::vector<std::pair<uint64_t, uint64_t>> no_collide_pairs_;
  bool freeze_pending_ = false;  // put_to_sleep (or restore_state) since the last step: freeze at its start
  bool resting_dirty_ = false;                // a body woke since the resting list was last partitioned
  std::vector<ContactEvent> events_;          // of the last step, sorted
  std::vector<ContactEvent> pending_events_;  // End events of destroyed bodies, for the next step

  // Sleeping islands: member slot indices per island; BodyInfo::island names a sleeping body's.
  // Freed islands keep their capacity and are reused last-in first-out.
  std::vector<std::vector<uint32_t>> sleeping_islands_;
  std::vector<uint32_t> free_islands_;

  // Material-pair overrides, sorted by key (min id << 16 | max id).
  std::vector<std::pair<uint32_t, MaterialPair>> material_pairs_;

  const WorkerPool* pool_ = nullptr;

  std::vector<ObjectID> removed_non_finite_;  // by the last step's guard
  uint64_t removed_non_finite_total_ = 0;
  std::vector<ObjectID> restored_non_finite_;  // by the last step's write-back (restore_non_finite_groups)
  ObjectID inject_non_finite_;                  // WorldTestAccess::inject_non_finite_solve (null: none)
  uint64_t restored_non_finite_total_ = 0;

  // One batch of the solve: whole contact-connected groups of movable bodies, solved on their own
  // (World::solve). Local copies so that batches on different threads share no memory.
  struct SolverBatch {
    std::vector<uint32_t> bodies;  // global solver-body indices, ascending (with the pool only)
    std::vector<SolverBody> solver_bodies;  // [bodies + 1]: local copies, then this batch's immovable body
    std::vector<Vec3> centers;              // [bodies + 1]
    std::vector<BodyForces> forces;         // [bodies]
    std::vector<SolverManifold> manifolds;  // in contact order, local body indices
    std::vector<SolverJoint> joints;        // in joint order, local body indices
    uint64_t weight = 0;                    // bodies + manifold points, for balancing
    SolverScratch solver;                   // the wide sweeps' colouring and rows
  };
  // A solved contact before it is given to its batch.
  struct SolverEdge {
    uint32_t a = 0, b = 0;  // global solver-body indices (movable = the immovable body)
    uint32_t record = 0;
    MaterialPair material;
  };

  // One run of consecutive broadphase pairs collided on a pool thread (World::collide_pairs).
  struct NarrowphaseRun {
    std::vector<ContactRecord> found;
    std::vector<uint32_t> wake_requests;
  };

  // Per-step scratch, reused so the step does not allocate in steady state.
  struct Scratch {
    std::vector<SolverEdge> joint_edges;  // this step's solved joints (record = joint slot)
    std::vector<uint32_t> moving_ids;
    std::vector<Aabb> moving_aabbs;
    std::vector<ProxyPair> pairs;
    std::vector<ContactRecord> found;  // narrowphase output, sorted
    std::vector<NarrowphaseRun> narrowphase_runs;  // with a pool: per run of pairs, then appended
    std::vector<ContactRecord> merged;
    std::vector<ContactRecord> reactivated;
    std::vector<uint32_t> wake_requests;  // dense indices
    std::vector<uint32_t> solver_index;   // per dense index: its SolverBody, valid for awake bodies
    std::vector<SolverBody> solver_bodies;
    std::vector<Vec3> solver_centers;
    std::vector<BodyForces> forces;
    std::vector<SolverEdge> solver_edges;
    std::vector<uint32_t> solver_parent;    // union-find over solver bodies, then group of each
    std::vector<uint32_t> solver_local;     // per solver body: its index in its batch
    std::vector<uint32_t> group_batch;      // per group: its batch
    std::vector<uint64_t> group_weight;     // per group: bodies + contact points
    std::vector<uint32_t> group_order;      // groups by weight, heaviest first
    std::vector<SolverBatch> batches;
    std::vector<uint32_t> island_parent;  // union-find over awake indices
    std::vector<float> island_min_timer;  // per island root
    std::vector<uint32_t> island_order;   // awake indices grouped by island
    std::vector<uint32_t> island_members;
    std::vector<ContactEvent> events;
    std::vector<uint32_t> query_hits;
    std::vector<uint32_t> unpark;             // slots woken this step, still parked in the broadphase
    std::vector<ContactRecord> front_found;   // contacts the wake front found, sorted
    std::vector<ContactEvent> front_events;
    std::vector<detail::FastBody> fast_bodies;    // continuous collision: this step's fast bodies
    std::vector<uint32_t> sweep_candidates;  // continuous collision: broadphase query output
  } scratch_;

  // Lazily built union of contacts_ and resting_ and a (b, a)-ordered index into it.
  struct QueryCache {
    bool valid = false;
    std::vector<Contact> all;
    std::vector<uint32_t> by_b;
  };
  mutable QueryCache query_cache_;
  uint64_t hash_state(bool awake_only) const;  // world_hash (false) or awake_hash (true)
  mutable std::vector<uint32_t> hash_scratch_;  // world_hash()'s serialised state (little-endian words), reused
};

}  // namespace impulse::physics
