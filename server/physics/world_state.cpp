// World save and restore: a versioned, checksummed binary image of everything the next step reads,
// restored bit for bit (the approach of Jolt's StateRecorder: save the full state, then check
// determinism by a hash). Checksum XXH64 (Y. Collet, xxHash, 2014).
//
// Byte layout, format version 7 (2 added the collision filter to info, 3 the contact recovering
// flag, 4 each contact point's pseudo_impulse, 5 each body's held_until, 6 the joints, 7 the
// hinge's limit, motor and spring, 8 the joints' break thresholds)
// -----------------------------
// Little-endian throughout. u8/u16/u32/u64 are unsigned integers of that width, i32 a two's-
// complement int32, f32 the IEEE 754 binary32 bit pattern (NaN and infinity are rejected on
// restore), bool a u8 that is 0 or 1, an enum a u8 holding its value, ObjectID a u32 index then a
// u32 generation. A count always precedes its array. (n) after a record is its size in bytes.
//
//   Header (68 bytes)
//       0    4   magic "IMPW"
//       4    4   u32 format version (3)
//       8    4   u32 N = number of layout fingerprint entries (12)
//      12   4N   layout fingerprint: u32 sizeof(), in the saving build, of Pose, Motion, Shape,
//                Material, BodyInfo, ContactPointState, ContactRecord, Contact, ContactEvent,
//                WorldSettings, MaterialPair, ObjectID. The payload is written field by field, but
//                a build whose structs differ may hold state this version does not carry, so it
//                refuses the blob rather than restore part of it.
//    12+4N   8   u64 P = payload size in bytes
//   Payload (P bytes): the sections below, in this order.
//     settings   every WorldSettings field in declaration order (87): gravity 3 f32, cell_size f32,
//                max_cells_per_body u32, speculative_margin f32, substeps i32, relax_iterations
//                i32, contact_hertz f32, contact_damping_ratio f32, contact_push_max_speed f32,
//                linear_slop f32, restitution_threshold f32, friction_mix u8, restitution_mix u8,
//                sleep_speed f32, sleep_time_s f32, allow_sleep bool, max_coordinate f32,
//                max_speed f32, max_angular_speed f32, max_extent f32, max_mass f32,
//                max_objects u32
//     world      tick u64, resting_dirty bool
//     hulls      H u32 (format 11); per hull (World::add_hull's table, in order): V u32, V vertices
//                3 f32; F u32, F faces of first u16, count u16, plane normal 3 f32, offset f32;
//                K u32, K face vertex indices u8; E u32, E edges of v0, v1, f0, f1 u8; volume
//                f32, unit_inertia 3 f32, radius f32, inner_radius f32, origin 3 f32, rotation
//                x y z w f32 (convex_hull.h)
//     meshes     M u32 (format 12); per mesh (World::add_mesh's table, in order): its source data
//                (io_mesh: vertices, indices, material ids), canonical (check_mesh)
//     heightfields  F u32 (format 12); per field (World::add_heightfield's table, in order):
//                io_heightfield (sizes, spacing, offset, scale, samples u16, material ids u8)
//     slot map   max_generation u32, S u32 (slots ever allocated), L u32 (live objects), F u32
//                (free slots); generation u32 [S] by slot; slot u32 [L] by dense index; free list
//                u32 [F], bottom first (the next create() takes the last)
//     bodies     L bodies per column, the columns one after another, each in dense order:
//                pose     position 3 f32, orientation x y z w f32, aabb min 3 f32, max 3 f32 (52)
//                motion   velocity, angular_velocity, force, torque, inv_inertia 3 f32 each,
//                         inv_mass, linear_damping, angular_damping f32                    (72)
//                shape    kind u8, radius f32, half_extents 3 f32, half_height f32 (21), then
//                         for a hull (kind 4) its index in the hull table u32
//                material restitution f32, friction f32, id u16                             (10)
//                info     kind u8, sleeping bool, flags u8 (bit 0 sensor, bit 1 bullet; before the
//                         bullet flag this byte was the sensor bool), sleep_timer f32, mass f32,
//                         extent f32, awake_index u32, contact_count u32, island u32,
//                         filter category u32, mask u32, group i32, held_until u64 (the
//                         tick before which no contact wakes it, put_to_sleep)              (47)
//     awake      A u32; slot u32 [A] in awake-list order (the order the step visits bodies)
//     contacts   the active list, then the resting list, each R u32 then R records in (a, b)
//                order: a ObjectID, b ObjectID, point 3 f32, normal 3 f32, depth f32,
//                point_count u8 (1..4), sensor bool, recovering bool, then point_count points
//                of point 3 f32, separation f32, feature u32, normal_impulse f32,
//                friction_impulse 3 f32, pseudo_impulse f32            (47 + 40 per point)
//     events     the last step's events, then the pending End events of destroyed bodies, each
//                E u32 then E of: type u8, a ObjectID, b ObjectID, point 3 f32, normal 3 f32 (41)
//     islands    I u32; per sleeping island M u32 then member slot u32 [M] (wake order); then
//                K u32 and the free island indices u32 [K], bottom first
//     materials  Q u32; Q of key u32 (min id << 16 | max id), friction f32, restitution f32
//     joints     J u32; J slots of generation u32, live bool, kind u8, a ObjectID, b ObjectID
//                (null: the world), local_a, local_b, axis_a, axis_b 3 f32 each, relative
//                x y z w f32, length, min_length, max_length, spring_hertz,
//                spring_damping_ratio f32, collide_connected bool, ref_a, ref_b 3 f32 each,
//                enable_limit bool, enable_motor bool, lower, upper, motor_speed,
//                max_motor, spring_target, break_force, break_torque f32, position_motor
//                bool, motor_target, cone f32,
//                linear_impulse, angular_impulse 3 f32 each, axial, lower, upper, motor
//                impulse f32                                                           (210);
//                then G u32 and the free joint slots u32 [G], the next reused last
//   Trailer (8 bytes)
//     u64 XXH64 with seed 0 of every byte before it (header and payload)
//
// Not saved, as they are not state: the step profile, the per-step scratch buffers, the query
// cache and the broadphase. The broadphase is rebuilt from the parked (static and sleeping)
// bodies: its pairs are sorted by (a, b) and its queries' results sorted ascending, both fixed by
// the current proxies alone, so its internal tiers and slot order never reach the step. (The
// moving proxies are the awake list, handed to it by every step; the World's queries test awake
// bodies directly.)
//
// Restore checks, in order: the size, magic, version, fingerprint, payload size and checksum; then
// it parses the payload, checking every count against the bytes left before allocating and every
// bool and enum; then the invariants the step relies on: the slot map's (SlotMap::restore), finite
// floats, shapes and masses valid for their kind, the awake list naming exactly the awake bodies
// with matching awake_index, every sleeping dynamic body listed in a sleeping island that is not
// free, contact lists sorted, disjoint, between live bodies, resting pairs both parked unless
// resting_dirty, per-body contact counts equal to the lists, sorted material pairs, joints between
// live bodies with a consistent free list. Only then is
// the world replaced: a rejected blob leaves it unchanged, and no input asserts, throws or reaches
// undefined behaviour.
// Over 700 lines on purpose: save and restore walk the same fields in the same order, kept side by
// side so that they cannot drift apart.
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "server/physics/world.h"
#include "server/physics/world_fields.h"
#include "server/physics/world_internal.h"

namespace impulse::physics {
namespace {

using namespace detail;  // the field lists (world_fields.h)

constexpr uint8_t kMagic[4] = {'I', 'M', 'P', 'W'};
constexpr uint32_t kFormatVersion = 12;

// A struct saved here gained or lost a field: add it to its field list in world_fields.h (which
// world_hash also reads), then bump kFormatVersion. A new field that fits in existing padding
// keeps the size, so this check cannot see it: the field list is the one place to add it.
static_assert(sizeof(Pose) == 52 && sizeof(Motion) == 72 && sizeof(Shape) == 40 && sizeof(Material) == 12 &&
                  sizeof(BodyInfo) == 48 && sizeof(ContactPointState) == 40 && sizeof(ContactRecord) == 208 &&
                  sizeof(Contact) == 44 && sizeof(ContactEvent) == 44 && sizeof(WorldSettings) == 92 &&
                  sizeof(MaterialPair) == 8 && sizeof(ObjectID) == 8 && sizeof(JointRecord) == 216,
              "a struct saved by World::save_state changed: update world_state.cpp and kFormatVersion");

struct FingerprintEntry {
  const char* name;
  uint32_t size;
};
constexpr FingerprintEntry kFingerprint[] = {
    {"Pose", sizeof(Pose)},
    {"Motion", sizeof(Motion)},
    {"Shape", sizeof(Shape)},
    {"Material", sizeof(Material)},
    {"BodyInfo", sizeof(BodyInfo)},
    {"ContactPointState", sizeof(ContactPointState)},
    {"ContactRecord", sizeof(ContactRecord)},
    {"Contact", sizeof(Contact)},
    {"ContactEvent", sizeof(ContactEvent)},
    {"WorldSettings", sizeof(WorldSettings)},
    {"MaterialPair", sizeof(MaterialPair)},
    {"ObjectID", sizeof(ObjectID)},
};
constexpr uint32_t kFingerprintCount = static_cast<uint32_t>(std::size(kFingerprint));
constexpr size_t kHeaderBytes = 12 + 4 * size_t{kFingerprintCount} + 8;
constexpr size_t kTrailerBytes = 8;

// Serialised sizes [bytes], used to bound counts before allocating and to reserve on save.
constexpr size_t kBodyBytes = 52 + 72 + 21 + 10 + 27;
// A contact record: ids 16, point and normal 24, depth 4, point_count 1, sensor 1, recovering 1 =
// 47 bytes, then 40 per point (io_record). An over-estimate here rejects valid states whose last
// lists are short.
constexpr size_t kRecordMinBytes = 47 + 40;  // one point at least
constexpr size_t kRecordMaxBytes = 47 + 40 * kMaxManifoldPoints;
constexpr size_t kEventBytes = 41;
constexpr size_t kMaterialPairBytes = 12;

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
uint64_t load_u64(const uint8_t* p) { return load_u32(p) | static_cast<uint64_t>(load_u32(p + 4)) << 32; }

// --- Writer and Reader: the field lists of world_fields.h drive both directions --------------------

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void i32(int32_t v) { put(static_cast<uint32_t>(v), 4); }
  void u64(uint64_t v) { put(v, 8); }
  void f32(float v) { put(std::bit_cast<uint32_t>(v), 4); }
  void flag(bool b, const char* /*what*/) { u8(b ? 1 : 0); }
  template <class E>
  void enumeration(E e, E /*last*/, const char* /*what*/) {
    u8(static_cast<uint8_t>(e));
  }
  /// The reader's validity checks; a world's own state always passes them.
  bool expect(bool /*condition*/, const char* /*what*/) { return true; }
  size_t size() const { return out_.size(); }
  void patch_u64(size_t offset, uint64_t v) {
    for (int i = 0; i < 8; ++i) out_[offset + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  }

 private:
  void put(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

/// Bounds-checked reads of the payload. The first failure is kept; afterwards every read yields
/// zero and every count 0, so parsing ends quickly and the caller reports that first failure.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  void fail(std::string message) {
    if (ok()) error_ = std::move(message);
    pos_ = bytes_.size();
  }

  void u8(uint8_t& v) { v = static_cast<uint8_t>(get(1)); }
  void u16(uint16_t& v) { v = static_cast<uint16_t>(get(2)); }
  void u32(uint32_t& v) { v = static_cast<uint32_t>(get(4)); }
  void i32(int32_t& v) { v = static_cast<int32_t>(static_cast<uint32_t>(get(4))); }
  void u64(uint64_t& v) { v = get(8); }
  void f32(float& v) { v = std::bit_cast<float>(static_cast<uint32_t>(get(4))); }
  void flag(bool& b, const char* what) {
    const uint64_t v = get(1);
    if (v > 1) fail(std::string(what) + " is " + std::to_string(v) + ", not a bool (0 or 1)");
    b = v == 1;
  }
  /// Reads a u8 enum, rejecting values above `last` before they become an enum value.
  template <class E>
  void enumeration(E& e, E last, const char* what) {
    const uint64_t v = get(1);
    if (v > static_cast<uint8_t>(last)) {
      fail(std::string(what) + " is " + std::to_string(v) + ", not a known value");
      e = E{};
      return;
    }
    e = static_cast<E>(v);
  }
  bool expect(bool condition, const char* what) {
    if (!condition) fail(what);
    return ok();
  }
  /// Reads a u32 count of elements taking at least `min_bytes_each` each; a count the remaining
  /// bytes cannot hold is rejected (returns 0), so no allocation is ever larger than the input.
  uint32_t count(size_t min_bytes_each, const char* what) {
    const auto n = static_cast<uint32_t>(get(4));
    if (!ok()) return 0;
    if (static_cast<uint64_t>(n) * min_bytes_each > remaining()) {
      fail(std::string(what) + " count " + std::to_string(n) + " exceeds the " + std::to_string(remaining()) +
           " payload bytes left");
      return 0;
    }
    return n;
  }

 private:
  uint64_t get(int bytes) {
    if (!ok()) return 0;
    if (remaining() < static_cast<size_t>(bytes)) {
      fail("payload truncated at byte " + std::to_string(pos_));
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(bytes_[pos_ + static_cast<size_t>(i)]) << (8 * i);
    pos_ += static_cast<size_t>(bytes);
    return v;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  std::string error_;
};

// --- Restore: the parsed image and its checks ------------------------------------------------------

/// Everything restore_state parses, checked as a whole before it replaces the world's state.
struct Image {
  WorldSettings settings;
  uint64_t tick = 0;
  bool resting_dirty = false;
  std::vector<std::shared_ptr<const ConvexHull>> hulls;
  std::vector<std::shared_ptr<const TriangleMesh>> meshes;
  std::vector<std::shared_ptr<const HeightField>> heightfields;
  SlotMap slots;
  BodyColumns bodies;
  std::vector<uint32_t> awake;
  std::vector<ContactRecord> contacts;
  std::vector<ContactRecord> resting;
  std::vector<ContactEvent> events;
  std::vector<ContactEvent> pending_events;
  std::vector<std::vector<uint32_t>> sleeping_islands;
  std::vector<uint32_t> free_islands;
  std::vector<std::pair<uint32_t, MaterialPair>> material_pairs;
  std::vector<JointSlot> joints;
  std::vector<uint32_t> free_joints;
};

void read_u32_array(Reader& r, std::vector<uint32_t>& out, uint32_t n) {
  out.resize(n);
  for (uint32_t& v : out) r.u32(v);
}

template <class T, class ReadOne>
void read_array(Reader& r, std::vector<T>& out, size_t min_bytes_each, const char* what, ReadOne&& read_one) {
  const uint32_t n = r.count(min_bytes_each, what);
  out.resize(n);
  for (uint32_t i = 0; i < n && r.ok(); ++i) read_one(out[i]);
}

void parse_payload(Reader& r, Image& im) {
  io_settings(r, im.settings);
  r.u64(im.tick);
  r.flag(im.resting_dirty, "resting_dirty");
  const uint32_t hull_count = r.count(64, "hull");
  if (r.ok() && hull_count > World::kMaxWorldHulls) r.fail("more hulls than World::kMaxWorldHulls");
  for (uint32_t i = 0; i < hull_count && r.ok(); ++i) {
    auto hull = std::make_shared<ConvexHull>();
    io_hull(r, *hull);
    if (!r.ok()) return;
    if (std::string why = check_hull(*hull); !why.empty()) {
      r.fail("hull " + std::to_string(i) + ": " + why);
      return;
    }
    hull->id = i;
    im.hulls.push_back(std::move(hull));
  }
  const uint32_t mesh_count = r.count(12, "mesh");
  if (r.ok() && mesh_count > World::kMaxWorldMeshes) r.fail("more meshes than World::kMaxWorldMeshes");
  for (uint32_t i = 0; i < mesh_count && r.ok(); ++i) {
    TriangleMesh source;
    io_mesh(r, source);
    if (!r.ok()) return;
    MeshBuild built = build_triangle_mesh(source.vertices, source.indices, source.materials);
    if (!built.ok() || !(built.mesh == source)) {
      r.fail("mesh " + std::to_string(i) + ": " + (built.ok() ? "not in canonical form" : built.error));
      return;
    }
    built.mesh.id = i;
    im.meshes.push_back(std::make_shared<TriangleMesh>(std::move(built.mesh)));
  }
  const uint32_t field_count = r.count(32, "heightfield");
  if (r.ok() && field_count > World::kMaxWorldHeightFields) r.fail("more heightfields than World::kMaxWorldHeightFields");
  for (uint32_t i = 0; i < field_count && r.ok(); ++i) {
    HeightField field;
    io_heightfield(r, field);
    if (!r.ok()) return;
    if (std::string why = check_heightfield(field); !why.empty()) {
      r.fail("heightfield " + std::to_string(i) + ": " + why);
      return;
    }
    field.id = i;
    im.heightfields.push_back(std::make_shared<HeightField>(std::move(field)));
  }

  uint32_t max_generation = 0;
  uint32_t slot_count = 0;
  uint32_t live_count = 0;
  uint32_t free_count = 0;
  r.u32(max_generation);
  r.u32(slot_count);
  r.u32(live_count);
  r.u32(free_count);
  // Each live object also takes a body in every column.
  const uint64_t needed = (uint64_t{slot_count} + free_count) * 4 + uint64_t{live_count} * (4 + kBodyBytes);
  if (r.ok() && needed > r.remaining()) {
    r.fail("slot map counts (" + std::to_string(slot_count) + " slots, " + std::to_string(live_count) + " live, " +
           std::to_string(free_count) + " free) exceed the " + std::to_string(r.remaining()) + " payload bytes left");
  }
  if (!r.ok()) return;
  std::vector<uint32_t> generations;
  std::vector<uint32_t> dense_slots;
  std::vector<uint32_t> free_slots;
  read_u32_array(r, generations, slot_count);
  read_u32_array(r, dense_slots, live_count);
  read_u32_array(r, free_slots, free_count);
  if (!r.ok()) return;
  if (const char* why = SlotMap::restore(max_generation, generations, dense_slots, free_slots, im.slots)) {
    r.fail(why);
    return;
  }

  const uint32_t n = im.slots.size();
  BodyColumns& b = im.bodies;
  b.pose.resize(n);
  b.motion.resize(n);
  b.shape.resize(n);
  b.material.resize(n);
  b.info.resize(n);
  for (Pose& p : b.pose) io_pose(r, p);
  for (Motion& m : b.motion) io_motion(r, m);
  for (Shape& s : b.shape) {
    io_shape(r, s);
    if (r.ok() && s.kind == ShapeKind::HeightField) {
      if (s.data_id >= im.heightfields.size()) {
        r.fail("a heightfield body names heightfield " + std::to_string(s.data_id) + ", the table has " +
               std::to_string(im.heightfields.size()));
        return;
      }
      s.heightfield = im.heightfields[s.data_id].get();
      continue;
    }
    if (r.ok() && s.kind == ShapeKind::Mesh) {
      if (s.data_id >= im.meshes.size()) {
        r.fail("a mesh body names mesh " + std::to_string(s.data_id) + ", the table has " +
               std::to_string(im.meshes.size()));
        return;
      }
      s.mesh = im.meshes[s.data_id].get();
      continue;
    }
    if (!r.ok() || s.kind != ShapeKind::Hull) continue;
    if (s.data_id >= im.hulls.size()) {
      r.fail("a hull body names hull " + std::to_string(s.data_id) + ", the table has " +
             std::to_string(im.hulls.size()));
      return;
    }
    s.hull = im.hulls[s.data_id].get();
  }
  for (Material& m : b.material) io_material(r, m);
  for (BodyInfo& i : b.info) io_info(r, i);

  read_u32_array(r, im.awake, r.count(4, "awake body"));
  for (std::vector<ContactRecord>* list : {&im.contacts, &im.resting}) {
    read_array(r, *list, kRecordMinBytes, "contact", [&](ContactRecord& rec) { io_record(r, rec); });
  }
  for (std::vector<ContactEvent>* list : {&im.events, &im.pending_events}) {
    read_array(r, *list, kEventBytes, "event", [&](ContactEvent& e) { io_event(r, e); });
  }
  read_array(r, im.sleeping_islands, 4, "sleeping island",
             [&](std::vector<uint32_t>& members) { read_u32_array(r, members, r.count(4, "island member")); });
  read_u32_array(r, im.free_islands, r.count(4, "free island"));
  read_array(r, im.material_pairs, kMaterialPairBytes, "material pair",
             [&](std::pair<uint32_t, MaterialPair>& e) { io_material_pair(r, e); });
  read_array(r, im.joints, kJointBytes, "joint", [&](JointSlot& j) { io_joint(r, j); });
  read_u32_array(r, im.free_joints, r.count(4, "free joint"));
  if (r.ok() && r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " unread bytes after the last section");
}

bool finite(float x) { return std::isfinite(x); }
bool finite_non_negative(float x) { return std::isfinite(x) && x >= 0; }
bool non_negative(Vec3 v) { return v.x >= 0 && v.y >= 0 && v.z >= 0; }

bool is_normalized(const Shape& s) {
  Shape n;
  switch (s.kind) {
    case ShapeKind::Sphere: n = make_sphere(s.radius); break;
    case ShapeKind::Box: n = make_box(s.half_extents); break;
    case ShapeKind::Capsule: n = make_capsule(s.radius, s.half_height); break;
    case ShapeKind::Cylinder: n = make_cylinder(s.radius, s.half_height); break;
    case ShapeKind::Hull: n = make_hull(*s.hull); break;  // resolved by parse_payload
    case ShapeKind::Mesh: n = make_mesh(*s.mesh); break;
    case ShapeKind::HeightField: n = make_heightfield(*s.heightfield); break;
    default: n = make_plane(); break;
  }
  return n.radius == s.radius && n.half_extents == s.half_extents && n.half_height == s.half_height;
}

/// Why body `d` is unusable, or nullptr. The rules of create_object that the state keeps.
const char* check_body(const Image& im, uint32_t d) {
  const WorldSettings& ws = im.settings;
  const Pose& p = im.bodies.pose[d];
  const Motion& m = im.bodies.motion[d];
  const Shape& s = im.bodies.shape[d];
  const Material& mat = im.bodies.material[d];
  const BodyInfo& info = im.bodies.info[d];

  if (!is_finite(p.position) || !is_finite(p.aabb.min) || !is_finite(p.aabb.max)) return "pose not finite";
  if (!(p.aabb.min.x <= p.aabb.max.x && p.aabb.min.y <= p.aabb.max.y && p.aabb.min.z <= p.aabb.max.z)) {
    return "AABB min above max";
  }
  if (!is_finite(p.orientation) || !(std::fabs(dot(p.orientation, p.orientation) - 1.0f) <= 1.0e-3f)) {
    return "orientation not a unit quaternion";
  }
  if (!is_finite(m.velocity) || !is_finite(m.angular_velocity) || !is_finite(m.force) || !is_finite(m.torque)) {
    return "velocity, force or torque not finite";
  }
  if (!is_finite(m.inv_inertia) || !non_negative(m.inv_inertia) || !finite_non_negative(m.inv_mass)) {
    return "inverse mass or inertia negative or not finite";
  }
  if (!finite_non_negative(m.linear_damping) || !finite_non_negative(m.angular_damping)) {
    return "damping negative or not finite";
  }
  const bool dynamic = info.kind == BodyKind::Dynamic;
  if (dynamic ? !(m.inv_mass > 0) : (m.inv_mass != 0 || m.inv_inertia != Vec3{})) {
    return "inverse mass does not fit the body kind";
  }
  if (!finite_non_negative(info.mass) || (dynamic && !(info.mass > 0)) || !finite_non_negative(info.extent) ||
      !finite_non_negative(info.sleep_timer)) {
    return "mass, extent or sleep timer negative or not finite";
  }
  if (info.kind == BodyKind::Static && info.sleeping) return "a static body marked sleeping";

  if (!finite(s.radius) || !is_finite(s.half_extents) || !finite(s.half_height) || !is_normalized(s)) {
    return "shape fields inconsistent with its kind";
  }
  bool shape_ok = false;
  switch (s.kind) {
    // The same rules as World::create_object (kMinExtent: settings.h).
    case ShapeKind::Sphere: shape_ok = s.radius >= kMinExtent && s.radius <= ws.max_extent; break;
    case ShapeKind::Box: {
      const Vec3 h = s.half_extents;
      shape_ok = h.x >= kMinExtent && h.y >= kMinExtent && h.z >= kMinExtent && h.x <= ws.max_extent &&
                 h.y <= ws.max_extent && h.z <= ws.max_extent;
      break;
    }
    case ShapeKind::Capsule:
      shape_ok = s.radius >= kMinExtent && s.radius <= ws.max_extent && finite_non_negative(s.half_height) &&
                 s.half_height <= ws.max_extent;
      break;
    case ShapeKind::Cylinder:
      shape_ok = s.radius >= kMinExtent && s.radius <= ws.max_extent && s.half_height >= kMinExtent &&
                 s.half_height <= ws.max_extent;
      break;
    case ShapeKind::Plane: shape_ok = info.kind == BodyKind::Static; break;
    case ShapeKind::Hull: shape_ok = s.hull->radius <= ws.max_extent; break;
    case ShapeKind::Mesh:
    case ShapeKind::HeightField: shape_ok = info.kind == BodyKind::Static; break;
    case ShapeKind::Count: break;
  }
  if (!shape_ok) return "shape dimensions out of range (or a plane that is not static)";
  // The density rule and the speed caps of create_object and the step (settings.h).
  if (dynamic && !detail::density_within(s, info.mass)) return "mass outside the density range [1e-3, 1e5] kg/m^3";
  if (!detail::length_within(m.velocity, ws.max_speed) ||
      !detail::length_within(m.angular_velocity, ws.max_angular_speed)) {
    return "velocity beyond max_speed or angular velocity beyond max_angular_speed";
  }
  if (!(mat.restitution >= 0 && mat.restitution <= 1) || !finite_non_negative(mat.friction)) {
    return "restitution outside [0, 1] or friction negative";
  }
  return nullptr;
}

/// Static or sleeping: a parked broadphase proxy (World::is_parked on the image).
bool parks(const BodyInfo& info) { return info.kind == BodyKind::Static || info.sleeping; }

/// Checks one contact list: sorted and unique by (a, b) with a < b, both ids live, finite
/// values, the sensor flag as the narrowphase sets it, resting pairs parked. Adds each record to
/// its bodies' contact counts.
std::string check_contacts(const Image& im, const std::vector<ContactRecord>& list, bool resting,
                           std::vector<uint32_t>& counts) {
  const char* name = resting ? "resting contact " : "contact ";
  for (size_t i = 0; i < list.size(); ++i) {
    const ContactRecord& r = list[i];
    const Contact& c = r.contact;
    auto fail = [&](const char* why) { return name + std::to_string(i) + ": " + why; };
    if (!(c.a < c.b)) return fail("ids not in order a < b");
    if (i > 0 && !record_less(list[i - 1], r)) return fail("list not sorted by (a, b, sub) or a record repeated");
    const bool later_manifold = i > 0 && same_pair(list[i - 1], r);
    if (r.sub != (later_manifold ? list[i - 1].sub + 1 : 0)) return fail("a pair's subs are not 0, 1, 2, ...");
    const uint32_t da = im.slots.find(c.a);
    const uint32_t db = im.slots.find(c.b);
    if (da == SlotMap::kNone || db == SlotMap::kNone) return fail("names an object that is not live");
    const BodyInfo& ia = im.bodies.info[da];
    const BodyInfo& ib = im.bodies.info[db];
    if (r.sensor != (ia.sensor || ib.sensor) || (ia.sensor && ib.sensor)) return fail("sensor flag inconsistent");
    if (resting && !im.resting_dirty && !(parks(ia) && parks(ib))) {
      return fail("frozen with a body that is awake");
    }
    if (!is_finite(c.point) || !is_finite(c.normal) || !finite(c.depth)) return fail("not finite");
    for (int k = 0; k < r.point_count; ++k) {
      const ContactPointState& p = r.points[k];
      if (!is_finite(p.point) || !finite(p.separation) || !finite(p.normal_impulse) ||
          !is_finite(p.friction_impulse) || !finite(p.pseudo_impulse)) {
        return fail("a manifold point is not finite");
      }
      // Warm-started as is: a negative push-out would pull the bodies together once.
      if (!(p.pseudo_impulse >= 0.0f)) return fail("a manifold point's pseudo_impulse is negative");
    }
    if (!later_manifold) {  // one touching pair, whatever its number of manifolds
      ++counts[da];
      ++counts[db];
    }
  }
  return {};
}

std::string check_image(const Image& im) {
  if (const char* why = check_settings(im.settings)) return std::string("settings: ") + why;
  const uint32_t n = im.slots.size();
  if (n > im.settings.max_objects) return "more live objects than settings.max_objects";
  for (uint32_t d = 0; d < n; ++d) {
    if (const char* why = check_body(im, d)) return "body " + std::to_string(d) + ": " + why;
  }

  // Awake list: exactly the dynamic and kinematic bodies that do not sleep, each once.
  uint32_t awake_bodies = 0;
  for (const BodyInfo& info : im.bodies.info) awake_bodies += parks(info) ? 0u : 1u;
  if (im.awake.size() != awake_bodies) return "awake list length differs from the awake bodies";
  for (uint32_t i = 0; i < im.awake.size(); ++i) {
    const uint32_t d = im.slots.dense_of_slot(im.awake[i]);
    if (d == SlotMap::kNone) return "awake list names a slot that is not live";
    const BodyInfo& info = im.bodies.info[d];
    if (parks(info)) return "awake list names a static or sleeping body";
    if (info.awake_index != i) return "awake list and awake_index disagree";  // also rules out repeats
  }

  // Sleeping islands: every sleeping dynamic body is listed in its island, which is in use. Other
  // entries are tolerated: waking skips members that are not sleeping in that island.
  const auto island_count = static_cast<uint32_t>(im.sleeping_islands.size());
  std::vector<uint8_t> island_free(island_count, 0);
  for (const uint32_t island : im.free_islands) {
    if (island >= island_count) return "free island index out of range";
    if (island_free[island]) return "free island listed twice";
    island_free[island] = 1;
  }
  std::vector<uint8_t> listed(n, 0);
  for (uint32_t island = 0; island < island_count; ++island) {
    for (const uint32_t slot : im.sleeping_islands[island]) {
      const uint32_t d = im.slots.dense_of_slot(slot);
      if (d != SlotMap::kNone && im.bodies.info[d].island == island) listed[d] = 1;
    }
  }
  for (uint32_t d = 0; d < n; ++d) {
    const BodyInfo& info = im.bodies.info[d];
    if (!info.sleeping || info.kind != BodyKind::Dynamic) continue;
    if (info.island >= island_count || island_free[info.island]) return "a sleeping body's island is missing or free";
    if (!listed[d]) return "a sleeping body is not listed in its island";
  }

  // Contacts: both lists valid, disjoint, and per-body counts matching them.
  std::vector<uint32_t> counts(n, 0);
  if (std::string why = check_contacts(im, im.contacts, false, counts); !why.empty()) return why;
  if (std::string why = check_contacts(im, im.resting, true, counts); !why.empty()) return why;
  for (size_t i = 0, j = 0; i < im.contacts.size() && j < im.resting.size();) {
    if (record_less(im.contacts[i], im.resting[j])) {
      ++i;
    } else if (record_less(im.resting[j], im.contacts[i])) {
      ++j;
    } else {
      return "a pair is both in the active and the resting contact list";
    }
  }
  for (uint32_t d = 0; d < n; ++d) {
    if (counts[d] != im.bodies.info[d].contact_count) {
      return "body " + std::to_string(d) + ": contact_count differs from the contact lists";
    }
  }

  for (const std::vector<ContactEvent>* list : {&im.events, &im.pending_events}) {
    for (const ContactEvent& e : *list) {
      if (!is_finite(e.point) || !is_finite(e.normal)) return "an event is not finite";
    }
  }

  for (size_t i = 0; i < im.material_pairs.size(); ++i) {
    const auto& [key, pair] = im.material_pairs[i];
    if ((key >> 16) > (key & 0xffffu)) return "material pair key not (min id << 16 | max id)";
    if (i > 0 && !(im.material_pairs[i - 1].first < key)) return "material pairs not sorted by key or repeated";
    if (!finite_non_negative(pair.friction) || !(pair.restitution >= 0 && pair.restitution <= 1)) {
      return "material pair friction negative or restitution outside [0, 1]";
    }
  }

  // Joints: a live one joins two different live bodies (or one and the world), with finite values
  // in range; every dead slot is in the free list once, and nothing else is.
  std::vector<uint8_t> freed(im.joints.size(), 0);
  for (const uint32_t k : im.free_joints) {
    if (k >= im.joints.size() || im.joints[k].live || freed[k] != 0) return "free joint list names a live, repeated or missing slot";
    freed[k] = 1;
  }
  for (size_t k = 0; k < im.joints.size(); ++k) {
    const JointSlot& slot = im.joints[k];
    if (slot.generation == 0) return "joint generation 0";
    if (!slot.live) {
      if (freed[k] == 0) return "a dead joint slot is not in the free list";
      continue;
    }
    const JointRecord& j = slot.joint;
    if (!im.slots.contains(j.a) || (!j.b.is_null() && !im.slots.contains(j.b)) || j.a == j.b) {
      return "joint " + std::to_string(k) + " does not join two live bodies";
    }
    const bool finite_all = is_finite(j.local_a) && is_finite(j.local_b) && is_finite(j.axis_a) && is_finite(j.axis_b) &&
                            is_finite(j.relative) && is_finite(j.linear_impulse) && is_finite(j.angular_impulse) &&
                            finite(j.axial_impulse) && finite(j.lower_impulse) && finite(j.upper_impulse);
    if (!finite_all) return "joint " + std::to_string(k) + " is not finite";
    if (!finite_non_negative(j.min_length) || !(j.min_length <= j.length) || !(j.length <= j.max_length) ||
        !std::isfinite(j.max_length) || !finite_non_negative(j.spring_hertz) ||
        !finite_non_negative(j.spring_damping_ratio) || j.lower_impulse < 0 || j.upper_impulse < 0 ||
        !is_finite(j.ref_a) || !is_finite(j.ref_b) || !(j.lower <= j.upper) ||
        !finite(j.motor_speed) || !finite_non_negative(j.max_motor) || !finite(j.spring_target) ||
        !finite(j.motor_impulse) || !finite_non_negative(j.break_force) || !finite_non_negative(j.break_torque)) {
      return "joint " + std::to_string(k) + " lengths, spring or limit impulses out of range";
    }
  }
  return {};
}

}  // namespace

void World::save_state(std::vector<uint8_t>& out) const {
  out.clear();
  size_t records = 0;
  for (const auto& island : sleeping_islands_) records += island.size();
  out.reserve(kHeaderBytes + 256 + slots_.slot_count() * 8 + slots_.size() * (kBodyBytes + 8) +
              (contacts_.size() + resting_.size()) * kRecordMaxBytes +
              (events_.size() + pending_events_.size()) * kEventBytes + records * 4 +
              material_pairs_.size() * kMaterialPairBytes + 8 + joints_.size() * kJointBytes +
              free_joints_.size() * 4 + kTrailerBytes);
  Writer w(out);

  for (const uint8_t c : kMagic) w.u8(c);
  w.u32(kFormatVersion);
  w.u32(kFingerprintCount);
  for (const FingerprintEntry& e : kFingerprint) w.u32(e.size);
  const size_t payload_size_at = w.size();
  w.u64(0);  // patched below

  io_settings(w, settings_);
  w.u64(tick_);
  w.flag(resting_dirty_, "");
  w.u32(static_cast<uint32_t>(hulls_.size()));
  for (const auto& hull : hulls_) io_hull(w, *hull);
  w.u32(static_cast<uint32_t>(meshes_.size()));
  for (const auto& mesh : meshes_) io_mesh(w, *mesh);
  w.u32(static_cast<uint32_t>(heightfields_.size()));
  for (const auto& field : heightfields_) io_heightfield(w, *field);

  w.u32(slots_.max_generation());
  w.u32(slots_.slot_count());
  w.u32(slots_.size());
  w.u32(slots_.free_count());
  for (const uint32_t g : slots_.generations()) w.u32(g);
  for (const uint32_t s : slots_.dense_slots()) w.u32(s);
  for (const uint32_t s : slots_.free_slots()) w.u32(s);

  for (const Pose& p : bodies_.pose) io_pose(w, p);
  for (const Motion& m : bodies_.motion) io_motion(w, m);
  for (const Shape& s : bodies_.shape) io_shape(w, s);
  for (const Material& m : bodies_.material) io_material(w, m);
  for (const BodyInfo& i : bodies_.info) io_info(w, i);

  w.u32(static_cast<uint32_t>(awake_.size()));
  for (const uint32_t s : awake_) w.u32(s);
  for (const std::vector<ContactRecord>* list : {&contacts_, &resting_}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (const ContactRecord& r : *list) io_record(w, r);
  }
  for (const std::vector<ContactEvent>* list : {&events_, &pending_events_}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (const ContactEvent& e : *list) io_event(w, e);
  }
  w.u32(static_cast<uint32_t>(sleeping_islands_.size()));
  for (const std::vector<uint32_t>& members : sleeping_islands_) {
    w.u32(static_cast<uint32_t>(members.size()));
    for (const uint32_t s : members) w.u32(s);
  }
  w.u32(static_cast<uint32_t>(free_islands_.size()));
  for (const uint32_t island : free_islands_) w.u32(island);
  w.u32(static_cast<uint32_t>(material_pairs_.size()));
  for (const auto& entry : material_pairs_) io_material_pair(w, entry);
  w.u32(static_cast<uint32_t>(joints_.size()));
  for (const JointSlot& j : joints_) io_joint(w, j);
  w.u32(static_cast<uint32_t>(free_joints_.size()));
  for (const uint32_t k : free_joints_) w.u32(k);

  w.patch_u64(payload_size_at, w.size() - kHeaderBytes);
  w.u64(XXH64(out.data(), out.size(), 0));
}

bool World::restore_state(std::span<const uint8_t> bytes, std::string* error) {
  const auto reject = [&](const std::string& why) {
    if (error) *error = "world state: " + why;
    return false;
  };
  const size_t size = bytes.size();
  if (size < kHeaderBytes + kTrailerBytes) {
    return reject("truncated: " + std::to_string(size) + " bytes, the header and checksum alone take " +
                  std::to_string(kHeaderBytes + kTrailerBytes));
  }
  const uint8_t* data = bytes.data();
  if (std::memcmp(data, kMagic, sizeof kMagic) != 0) return reject("bad magic: not a world state (no \"IMPW\")");
  if (const uint32_t version = load_u32(data + 4); version != kFormatVersion) {
    return reject("unsupported format version " + std::to_string(version) + " (this build reads " +
                  std::to_string(kFormatVersion) + ")");
  }
  if (const uint32_t count = load_u32(data + 8); count != kFingerprintCount) {
    return reject("layout fingerprint has " + std::to_string(count) + " entries, this build " +
                  std::to_string(kFingerprintCount));
  }
  for (uint32_t i = 0; i < kFingerprintCount; ++i) {
    const uint32_t saved = load_u32(data + 12 + 4 * i);
    if (saved != kFingerprint[i].size) {
      return reject(std::string("layout fingerprint mismatch: sizeof(") + kFingerprint[i].name + ") is " +
                    std::to_string(saved) + " in the blob, " + std::to_string(kFingerprint[i].size) +
                    " in this build");
    }
  }
  const uint64_t payload_size = load_u64(data + kHeaderBytes - 8);
  const size_t available = size - kHeaderBytes - kTrailerBytes;
  if (payload_size > available) {
    return reject("truncated: the header announces " + std::to_string(payload_size) + " payload bytes, " +
                  std::to_string(available) + " are present");
  }
  if (payload_size < available) {
    return reject(std::to_string(available - payload_size) + " unexpected bytes after the payload");
  }
  if (load_u64(data + size - kTrailerBytes) != XXH64(data, size - kTrailerBytes, 0)) {
    return reject("checksum mismatch: the blob is corrupted");
  }

  Image im;
  Reader reader(bytes.subspan(kHeaderBytes, available));
  parse_payload(reader, im);
  if (!reader.ok()) return reject(reader.error());
  if (const std::string why = check_image(im); !why.empty()) return reject(why);

  // Valid: replace the state. The broadphase holds exactly the parked bodies, each with the AABB
  // it was parked with (a parked body never moves).
  SpatialHash broadphase(im.settings.cell_size, im.settings.max_cells_per_body);
  for (uint32_t d = 0; d < im.slots.size(); ++d) {
    if (parks(im.bodies.info[d])) broadphase.add_parked(im.slots.slot_at(d), im.bodies.pose[d].aabb);
  }
  settings_ = im.settings;
  tick_ = im.tick;
  profile_ = StepProfile{};
  slots_ = std::move(im.slots);
  hulls_ = std::move(im.hulls);
  meshes_ = std::move(im.meshes);
  heightfields_ = std::move(im.heightfields);
  // assign() keeps this world's capacity, so a warm world does not regrow its storage.
  bodies_.pose.assign(im.bodies.pose.begin(), im.bodies.pose.end());
  bodies_.motion.assign(im.bodies.motion.begin(), im.bodies.motion.end());
  bodies_.shape.assign(im.bodies.shape.begin(), im.bodies.shape.end());
  bodies_.material.assign(im.bodies.material.begin(), im.bodies.material.end());
  bodies_.info.assign(im.bodies.info.begin(), im.bodies.info.end());
  awake_.assign(im.awake.begin(), im.awake.end());
  broadphase_ = std::move(broadphase);
  contacts_.assign(im.contacts.begin(), im.contacts.end());
  resting_.assign(im.resting.begin(), im.resting.end());
  resting_dirty_ = im.resting_dirty;
  // Not in the blob: a put_to_sleep may precede it. Outside that window contacts_ joins no two
  // parked bodies, and the freeze at the next step's start moves nothing.
  freeze_pending_ = true;
  events_.assign(im.events.begin(), im.events.end());
  pending_events_.assign(im.pending_events.begin(), im.pending_events.end());
  // Existing island lists keep their capacity too (sleep_island reuses them).
  sleeping_islands_.resize(im.sleeping_islands.size());
  for (size_t i = 0; i < im.sleeping_islands.size(); ++i) {
    sleeping_islands_[i].assign(im.sleeping_islands[i].begin(), im.sleeping_islands[i].end());
  }
  free_islands_.assign(im.free_islands.begin(), im.free_islands.end());
  material_pairs_.assign(im.material_pairs.begin(), im.material_pairs.end());
  removed_non_finite_.clear();
  joints_.assign(im.joints.begin(), im.joints.end());
  free_joints_.assign(im.free_joints.begin(), im.free_joints.end());
  live_joints_ = static_cast<uint32_t>(im.joints.size() - im.free_joints.size());
  rebuild_joint_filter();
  breaking_.clear();
  broken_joints_.clear();
  joint_removals_.clear();
  invalidate_queries();
  return true;
}

}  // namespace impulse::physics
