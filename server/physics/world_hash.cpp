// World::world_hash and awake_hash: the state a step reads, through the field lists it is saved by
// (world_fields.h), as little-endian 32-bit words hashed in one XXH3-64 pass (Y. Collet, xxHash,
// https://github.com/Cyan4973/xxHash).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <vector>

#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include "server/physics/world.h"
#include "server/physics/world_fields.h"

namespace impulse::physics {

namespace {

using namespace detail;  // the field lists (world_fields.h)

// The visitor of world_fields.h that feeds the hash: every field becomes one little-endian 32-bit
// word (two for a u64), written into a word buffer hashed in one XXH3 pass at the end. Hashing the
// buffer at once is several times faster than a byte-at-a-time hash fed field by field.
class HashWords {
 public:
  explicit HashWords(std::vector<uint32_t>& out) : out_(out) {}
  // Room for `words` more, once per record; the buffer only grows (and keeps its size across
  // calls), so nothing is zero-filled per call. Words are written in place: 4-byte stores that
  // cannot alias the world's floats or the vector's pointers, so the loop stays in registers.
  void reserve(size_t words) {
    if (size_ + words > out_.size()) out_.resize(std::max(2 * out_.size(), size_ + words));
    data_ = out_.data();
  }
  void u32(uint32_t v) {
    if constexpr (std::endian::native != std::endian::little) v = __builtin_bswap32(v);
    data_[size_++] = v;  // the bytes in memory are little-endian either way
  }
  void u8(uint8_t v) { u32(v); }
  void u16(uint16_t v) { u32(v); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void u64(uint64_t v) {
    u32(static_cast<uint32_t>(v));
    u32(static_cast<uint32_t>(v >> 32));
  }
  void f32(float f) { u32(std::bit_cast<uint32_t>(f)); }
  void flag(bool b, const char* /*what*/) { u32(b ? 1u : 0u); }
  template <class E>
  void enumeration(E e, E /*last*/, const char* /*what*/) {
    u32(static_cast<uint32_t>(e));
  }
  bool expect(bool /*condition*/, const char* /*what*/) { return true; }  // a world's own state passes

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

// Upper bounds of the words one body and one contact record take (HashWords::reserve): a field
// takes at least as many bytes in its struct as words here (a u8 one byte and one word, a u64
// eight bytes and two words).
constexpr size_t kWordsPerBody =
    sizeof(ObjectID) + sizeof(Pose) + sizeof(Motion) + sizeof(Shape) + sizeof(Material) + sizeof(BodyInfo);
constexpr size_t kWordsPerRecord = sizeof(ContactRecord);
constexpr size_t kWordsPerSettings = sizeof(WorldSettings);

// One body: its id, then every column's fields (world_fields.h).
void hash_body(HashWords& h, ObjectID id, const BodyColumns& b, uint32_t d) {
  h.reserve(kWordsPerBody);
  io_id(h, id);
  io_pose(h, b.pose[d]);
  io_motion(h, b.motion[d]);
  io_shape(h, b.shape[d]);
  io_material(h, b.material[d]);
  io_info(h, b.info[d]);
}

// A contact list: its length, then each record with its points and warm-starting impulses.
// Joints, only when the world has had any: a world without joints hashes as it did before them
// (format 5), so the pinned hashes of joint-free scenes hold.
void hash_joints(HashWords& h, const std::vector<JointSlot>& joints) {
  if (joints.empty()) return;
  h.reserve(1 + kWordsPerJoint * joints.size());
  h.u32(static_cast<uint32_t>(joints.size()));
  for (const JointSlot& j : joints) io_joint(h, j);
}

void hash_contacts(HashWords& h, const std::vector<ContactRecord>& list) {
  h.reserve(1);
  h.u32(static_cast<uint32_t>(list.size()));
  for (const ContactRecord& r : list) {
    h.reserve(kWordsPerRecord);
    io_record(h, r);
  }
}

}  // namespace

uint64_t World::hash_state(bool awake_only) const {
  HashWords h(hash_scratch_);
  auto body = [&](uint32_t d) { hash_body(h, slots_.id_at(d), bodies_, d); };
  if (!awake_only) {
    h.reserve(kWordsPerSettings + 1);
    io_settings(h, settings_);
    h.u32(slots_.size());
    for (uint32_t d = 0; d < slots_.size(); ++d) body(d);
    // The contact caches decide the next step's warm start, so they are part of the state.
    hash_contacts(h, contacts_);
    hash_contacts(h, resting_);
    h.reserve(1 + 3 * material_pairs_.size());
    h.u32(static_cast<uint32_t>(material_pairs_.size()));
    for (const auto& entry : material_pairs_) io_material_pair(h, entry);
    hash_joints(h, joints_);
    // Hulls, only when the world has any (the pinned hashes of hull-free worlds hold).
    if (!hulls_.empty()) {
      h.reserve(1);
      h.u32(static_cast<uint32_t>(hulls_.size()));
      for (const auto& hull : hulls_) {
        h.reserve(hull_words(*hull));
        io_hull(h, *hull);
      }
    }
    // Meshes, likewise only when there are any: by content hash (a mesh never changes, and
    // hashing a million triangles every call would cost milliseconds).
    if (!meshes_.empty()) {
      h.reserve(1 + 2 * meshes_.size());
      h.u32(static_cast<uint32_t>(meshes_.size()));
      for (const auto& mesh : meshes_) h.u64(mesh->content_hash);
    }
    if (!heightfields_.empty()) {
      h.reserve(1 + 2 * heightfields_.size());
      h.u32(static_cast<uint32_t>(heightfields_.size()));
      for (const auto& field : heightfields_) h.u64(field->content_hash);
    }
    return h.hash();
  }
  // What a step can change, and the sizes of what it cannot (see awake_hash in world.h).
  h.reserve(6);
  h.u32(static_cast<uint32_t>(tick_));
  h.u32(static_cast<uint32_t>(tick_ >> 32));
  h.u32(slots_.size());
  h.u32(static_cast<uint32_t>(resting_.size()));
  h.u32(static_cast<uint32_t>(sleeping_islands_.size() - free_islands_.size()));
  // The awake list in its order (the next step's order depends on it), each body in full.
  h.u32(static_cast<uint32_t>(awake_.size()));
  for (const uint32_t slot : awake_) body(slots_.dense_of_slot(slot));
  hash_contacts(h, contacts_);
  hash_joints(h, joints_);  // the step reads and writes them
  return h.hash();
}

}  // namespace impulse::physics
