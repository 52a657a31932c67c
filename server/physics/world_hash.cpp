// World::world_hash and awake_hash: the state a step reads, serialised little-endian into 32-bit
// words and hashed in one XXH3-64 pass (Y. Collet, xxHash, https://github.com/Cyan4973/xxHash).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <vector>

#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include "server/physics/world.h"

namespace impulse::physics {

namespace {

// Serialises state fields little-endian into a word buffer for one XXH3 pass: hashing the bytes
// at once is several times faster than a byte-at-a-time hash fed field by field.
class StateBytes {
 public:
  explicit StateBytes(std::vector<uint32_t>& out) : out_(out) {}
  // Room for `words` more, once per record; the buffer only grows (and keeps its size across
  // calls), so nothing is zero-filled per call. Words are written in place: 4-byte stores that
  // cannot alias the world's floats or the vector's pointers, so the loop stays in registers.
  void reserve(size_t words) {
    if (size_ + words > out_.size()) out_.resize(std::max(2 * out_.size(), size_ + words));
    data_ = out_.data();
  }
  void add_u32(uint32_t v) {
    if constexpr (std::endian::native != std::endian::little) v = __builtin_bswap32(v);
    data_[size_++] = v;  // the bytes in memory are little-endian either way
  }
  void add_float(float f) { add_u32(std::bit_cast<uint32_t>(f)); }
  // `words` 4-byte fields (floats and 32-bit integers, no padding) as they lie at `src`.
  void add_raw(const void* src, size_t words) {
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(data_ + size_, src, 4 * words);
      size_ += words;
    } else {
      for (size_t i = 0; i < words; ++i) {
        uint32_t v;
        std::memcpy(&v, static_cast<const uint8_t*>(src) + 4 * i, 4);
        add_u32(v);
      }
    }
  }
  void add_vec(Vec3 v) {
    add_float(v.x);
    add_float(v.y);
    add_float(v.z);
  }
  void add_quat(Quat q) {
    add_float(q.x);
    add_float(q.y);
    add_float(q.z);
    add_float(q.w);
  }
  uint64_t hash() const {
#if defined(__x86_64__)
    // The same function as XXH3_64bits, on the widest vector unit this CPU has (libxxhash picks
    // SSE2, AVX2 or AVX-512 at run time): the hash is identical, only faster.
    return XXH3_64bits_dispatch(out_.data(), 4 * size_);
#else
    return XXH3_64bits(out_.data(), 4 * size_);
#endif
  }

 private:
  std::vector<uint32_t>& out_;
  uint32_t* data_ = nullptr;
  size_t size_ = 0;  // words written by this hash
};

// world_hash copies these runs of fields whole (add_raw): they must be 4-byte fields, packed, in
// the order the hash lists them.
static_assert(sizeof(Vec3) == 12 && sizeof(Quat) == 16);
static_assert(offsetof(Pose, orientation) == offsetof(Pose, position) + sizeof(Vec3));
static_assert(offsetof(Motion, velocity) == 0 && offsetof(Motion, angular_velocity) == 12 &&
              offsetof(Motion, force) == 24 && offsetof(Motion, torque) == 36 && offsetof(Motion, inv_inertia) == 48 &&
              offsetof(Motion, inv_mass) == 60 && offsetof(Motion, linear_damping) == 64 &&
              offsetof(Motion, angular_damping) == 68 && sizeof(Motion) == 72);
static_assert(offsetof(ContactPointState, point) == 0 && offsetof(ContactPointState, separation) == 12 &&
              offsetof(ContactPointState, feature) == 16 && offsetof(ContactPointState, normal_impulse) == 20 &&
              offsetof(ContactPointState, friction_impulse) == 24 && sizeof(ContactPointState) == 36);

// Words world_hash writes per body and per contact record (StateBytes::reserve).
constexpr size_t kHashWordsPerBody = 40;
constexpr size_t kHashWordsPerRecord = 6 + kMaxManifoldPoints * 9;

}  // namespace

namespace {

// One body's hashed fields (kHashWordsPerBody words).
void hash_body(StateBytes& h, ObjectID id, const Pose& p, const Motion& m, const Shape& s, const Material& mat,
               const BodyInfo& info) {
  h.reserve(kHashWordsPerBody);
  h.add_u32(id.index);
  h.add_u32(id.generation);
  h.add_u32(static_cast<uint32_t>(info.kind));
  h.add_u32((info.sleeping ? 1u : 0u) | (info.sensor ? 2u : 0u));
  h.add_float(info.sleep_timer);
  h.add_float(info.mass);
  h.add_u32(static_cast<uint32_t>(s.kind));
  h.add_float(s.radius);
  h.add_vec(s.half_extents);
  h.add_float(s.half_height);
  h.add_raw(&p.position, 7);  // position, orientation
  h.add_raw(&m, 18);          // velocity, angular velocity, force, torque, inverse inertia and mass, dampings
  h.add_float(mat.restitution);
  h.add_float(mat.friction);
  h.add_u32(mat.id);
}

// A contact list: its length, then each record's pair, normal, point count and points with their
// warm-starting impulses.
void hash_contacts(StateBytes& h, const std::vector<ContactRecord>& list) {
  h.reserve(1);
  h.add_u32(static_cast<uint32_t>(list.size()));
  for (const ContactRecord& r : list) {
    h.reserve(kHashWordsPerRecord);
    h.add_u32(r.contact.a.index);
    h.add_u32(r.contact.b.index);
    h.add_vec(r.contact.normal);
    h.add_u32(r.point_count | (r.sensor ? 0x100u : 0u));
    // Each point: position, separation, feature, normal impulse, friction impulse.
    h.add_raw(r.points, static_cast<size_t>(r.point_count) * (sizeof(ContactPointState) / 4));
  }
}

}  // namespace

uint64_t World::hash_state(bool awake_only) const {
  StateBytes h(hash_scratch_);
  auto body = [&](uint32_t d) {
    hash_body(h, slots_.id_at(d), bodies_.pose[d], bodies_.motion[d], bodies_.shape[d], bodies_.material[d],
              bodies_.info[d]);
  };
  if (!awake_only) {
    h.reserve(1);
    h.add_u32(slots_.size());
    for (uint32_t d = 0; d < slots_.size(); ++d) body(d);
    // The contact caches decide the next step's warm start, so they are part of the state.
    hash_contacts(h, contacts_);
    hash_contacts(h, resting_);
    return h.hash();
  }
  // What a step can change, and the sizes of what it cannot (see awake_hash in world.h).
  h.reserve(6);
  h.add_u32(static_cast<uint32_t>(tick_));
  h.add_u32(static_cast<uint32_t>(tick_ >> 32));
  h.add_u32(slots_.size());
  h.add_u32(static_cast<uint32_t>(resting_.size()));
  h.add_u32(static_cast<uint32_t>(sleeping_islands_.size() - free_islands_.size()));
  // The awake list in its order (the next step's order depends on it), each body in full.
  h.add_u32(static_cast<uint32_t>(awake_.size()));
  for (const uint32_t slot : awake_) body(slots_.dense_of_slot(slot));
  hash_contacts(h, contacts_);
  return h.hash();
}

}  // namespace impulse::physics
