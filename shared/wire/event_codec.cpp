// Collision event block codec: zig-zag deltas in exponential-Golomb codes (Teuhola 1978; the
// relative encoding of Fiedler's "Snapshot Compression", gafferongames.com, 2015), octahedral
// normals (Meyer et al., EGSR 2010; Cigolle et al., JCGT 2014) and an XXH32 checksum of the block
// (Yann Collet, xxHash). The format is specified bit by bit in docs/PROTOCOL.md, "Collision
// events"; keep the two in step.
#include "shared/wire/event_codec.h"

#include <algorithm>
#include <cmath>

#include <xxhash.h>

#include "shared/object_id.h"
#include "shared/wire/bitstream.h"

namespace impulse::wire {
namespace {

// Exponential-Golomb orders (k) of the variable-length fields (docs/PROTOCOL.md lists them).
// The base tick and sequence grow over a session: order 16 spends 17 bits on any value below
// 2^16 and 2 more per doubling. The per-event deltas are 0 for most events (one batch is a
// run of consecutive sequences, mostly of one tick). The index orders were tuned on the events
// of the N1 benchmark (ground contacts: a is the plane, b a cube somewhere in a 900-cube grid).
constexpr unsigned kBaseTickOrder = 16;
constexpr unsigned kBaseSequenceOrder = 16;
constexpr unsigned kSequenceDeltaOrder = 0;  // zz(sequence - previous sequence - 1)
constexpr unsigned kTickDeltaOrder = 0;      // zz64(tick - previous tick)
constexpr unsigned kIndexOrder = 8;          // a.index
constexpr unsigned kIndexDeltaOrder = 6;     // zz(b.index - a.index)
constexpr unsigned kGenerationOrder = 0;     // generation - 1, as in the snapshot payload
constexpr unsigned kJointIndexOrder = 4;     // a joint's index (joints are few)
constexpr unsigned kDetailBits = 3;          // a joint event's kind or reason

constexpr unsigned kCountBits = 5;
constexpr unsigned kTypeBits = 2;
constexpr size_t kChecksumBytes = 4;
constexpr uint32_t kChecksumSeed = 0;
// The EGx escape: a 64-bit value at or above this is sent as this value's code, then 64 bits.
constexpr uint32_t kEscape = 0xFFFFFFFFu;
// Widest full-state position field any valid QuantizationConfig gives: position_max <= 2^24,
// so 2 * position_max + 1 <= 2^25 + 1 values, 26 bits.
constexpr unsigned kMaxPositionBits = 26;

constexpr uint64_t zigzag64_encode(uint64_t d) {  // d is a two's-complement int64
  return (d << 1) ^ (0u - (d >> 63));
}
constexpr uint64_t zigzag64_decode(uint64_t u) { return (u >> 1) ^ (0u - (u & 1u)); }

// --- Octahedral normals --------------------------------------------------------------------

float sign_of(float v) { return v >= 0.0f ? 1.0f : -1.0f; }  // sign(0) = sign(-0) = +1

// --- A BitWriter over a fixed, zeroed span (a FlatBuffers vector written in place) ----------

class SpanBitWriter {
 public:
  explicit SpanBitWriter(std::span<uint8_t> bytes) : bytes_(bytes) {}

  void write_bits(uint32_t value, unsigned count) {
    if (count == 0) return;
    if (count < 32) value &= (uint32_t{1} << count) - 1u;
    if (bit_count_ + count > bytes_.size() * 8) {  // never with an exactly sized span
      overflow_ = true;
      return;
    }
    const size_t first = bit_count_ >> 3;
    uint64_t bits = static_cast<uint64_t>(value) << (bit_count_ & 7u);
    for (size_t i = first; bits != 0; ++i, bits >>= 8) bytes_[i] = static_cast<uint8_t>(bytes_[i] | bits);
    bit_count_ += count;
  }
  void write_bit(bool bit) { write_bits(bit ? 1u : 0u, 1); }
  size_t bit_count() const { return bit_count_; }
  bool overflow() const { return overflow_; }

 private:
  std::span<uint8_t> bytes_;
  size_t bit_count_ = 0;
  bool overflow_ = false;
};

// --- Encoding (templated over SpanBitWriter / BitCounter so sizes come from the encoder) -----

// EGx(k): EG(k) of min(v, 2^32 - 1); at 2^32 - 1, the 64-bit v follows, low half first.
template <class Sink>
void put_u64(Sink& w, uint64_t v, unsigned k) {
  const uint32_t head = v >= kEscape ? kEscape : static_cast<uint32_t>(v);
  write_exp_golomb(w, head, k);
  if (head != kEscape) return;
  w.write_bits(static_cast<uint32_t>(v), 32);
  w.write_bits(static_cast<uint32_t>(v >> 32), 32);
}

unsigned max_u64_bits(unsigned k) { return exp_golomb_bits(kEscape, k) + 64; }

struct PointCoder {
  unsigned fraction_bits = 0;
  int32_t max = 0;    // Pmax
  unsigned bits = 0;  // Wp
};

bool is_joint_event(ContactEventType type) {
  return type == ContactEventType::JointAdded || type == ContactEventType::JointRemoved;
}

template <class Sink>
void put_event(Sink& w, const CollisionEvent& e, const JointEventFields& joint, uint32_t previous_sequence,
               uint64_t previous_tick, const PointCoder& pc) {
  write_exp_golomb(w, zigzag_encode(static_cast<int32_t>(e.sequence() - previous_sequence - 1u)), kSequenceDeltaOrder);
  put_u64(w, zigzag64_encode(e.tick() - previous_tick), kTickDeltaOrder);
  w.write_bits(static_cast<uint32_t>(e.type()), kTypeBits);
  const ObjectID a = impulse::from_wire(e.a());
  const ObjectID b = impulse::from_wire(e.b());
  write_exp_golomb(w, a.index, kIndexOrder);
  write_exp_golomb(w, a.generation - 1u, kGenerationOrder);
  write_exp_golomb(w, zigzag_encode(static_cast<int32_t>(b.index - a.index)), kIndexDeltaOrder);
  write_exp_golomb(w, b.generation - 1u, kGenerationOrder);
  auto put_point = [&](const wire::Vec3& p) {
    for (const float c : {p.x(), p.y(), p.z()}) {
      const int32_t q = quantize_fixed(c, pc.fraction_bits, pc.max);
      w.write_bits(static_cast<uint32_t>(q + pc.max), pc.bits);
    }
  };
  if (is_joint_event(e.type())) {
    const ObjectID id = impulse::from_wire(joint.joint);
    write_exp_golomb(w, id.index, kJointIndexOrder);
    write_exp_golomb(w, id.generation - 1u, kGenerationOrder);
    w.write_bits(joint.detail, kDetailBits);
    if (e.type() == ContactEventType::JointAdded) {
      put_point(e.point());
      put_point(e.normal());  // B's anchor
    }
    return;
  }
  put_point(e.point());
  int32_t u = 0, v = 0;
  encode_octahedral_normal({e.normal().x(), e.normal().y(), e.normal().z()}, &u, &v);
  w.write_bits(static_cast<uint32_t>(u + kNormalMax), kNormalBits);
  w.write_bits(static_cast<uint32_t>(v + kNormalMax), kNormalBits);
}

// Everything after the checksum.
template <class Sink>
void put_block_body(Sink& w, std::span<const CollisionEvent> events, std::span<const JointEventFields> joints,
                    const PointCoder& pc) {
  w.write_bits(static_cast<uint32_t>(events.size()), kCountBits);
  if (events.empty()) return;
  put_u64(w, events[0].tick(), kBaseTickOrder);
  write_exp_golomb(w, events[0].sequence(), kBaseSequenceOrder);
  uint32_t previous_sequence = events[0].sequence() - 1u;
  uint64_t previous_tick = events[0].tick();
  for (size_t i = 0; i < events.size(); ++i) {
    const CollisionEvent& e = events[i];
    put_event(w, e, joints.empty() ? JointEventFields{} : joints[i], previous_sequence, previous_tick, pc);
    previous_sequence = e.sequence();
    previous_tick = e.tick();
  }
}

bool make_point_coder(const QuantizationConfig& config, PointCoder* pc) {
  if (!config.validate(nullptr)) return false;
  const QuantizationLimits limits = derive_limits(config);
  pc->fraction_bits = config.position_fraction_bits;
  pc->max = limits.position_max;
  pc->bits = limits.position_bits;
  return true;
}

bool encodable(std::span<const CollisionEvent> events, std::span<const JointEventFields> joints) {
  if (events.size() > kMaxEventsPerBlock) return false;
  if (!joints.empty() && joints.size() != events.size()) return false;
  for (size_t i = 0; i < events.size(); ++i) {
    const ContactEventType type = events[i].type();
    if (static_cast<uint8_t>(type) > static_cast<uint8_t>(ContactEventType::MAX)) return false;
    if (!is_joint_event(type)) continue;
    if (joints.empty()) return false;
    const uint8_t most = type == ContactEventType::JointAdded ? kMaxJointKindDetail : kMaxJointRemovedDetail;
    if (joints[i].detail > most) return false;
  }
  return true;
}

uint32_t checksum_of(std::span<const uint8_t> body) {
  return XXH32(body.data(), body.size(), kChecksumSeed);
}

// --- Decoding ------------------------------------------------------------------------------------

EventBlockError error_of(const BitReader& r) {
  return r.overrun() ? EventBlockError::Truncated : EventBlockError::BadRecord;
}

bool read_u64(BitReader& r, unsigned k, uint64_t* out, EventBlockError* error) {
  uint32_t head = 0;
  if (!read_exp_golomb(r, k, kEscape, &head)) {
    *error = error_of(r);
    return false;
  }
  if (head != kEscape) {
    *out = head;
    return true;
  }
  const uint64_t low = r.read_bits(32);
  const uint64_t high = r.read_bits(32);
  if (r.overrun()) {
    *error = EventBlockError::Truncated;
    return false;
  }
  *out = low | (high << 32);
  if (*out < kEscape) {  // non-canonical: a value this small has a short code
    *error = EventBlockError::BadRecord;
    return false;
  }
  return true;
}

bool read_u32(BitReader& r, unsigned k, uint32_t* out, EventBlockError* error) {
  if (read_exp_golomb(r, k, 0xFFFFFFFFu, out)) return true;
  *error = error_of(r);
  return false;
}

EventBlockError read_point(BitReader& r, const PointCoder& pc, float point[3]) {
  for (int i = 0; i < 3; ++i) {
    const uint32_t field = r.read_bits(pc.bits);
    if (r.overrun()) return EventBlockError::Truncated;
    if (field > 2u * static_cast<uint32_t>(pc.max)) return EventBlockError::BadRecord;
    point[i] = dequantize_fixed(static_cast<int32_t>(field) - pc.max, pc.fraction_bits);
  }
  return EventBlockError::None;
}

// A joint event's suffix: the joint, its detail and (JointAdded) the two anchors.
EventBlockError read_joint_suffix(BitReader& r, const PointCoder& pc, ContactEventType type, JointEventFields* joint,
                                  float anchor_a[3], float anchor_b[3]) {
  EventBlockError error = EventBlockError::None;
  uint32_t index = 0, generation = 0;
  if (!read_u32(r, kJointIndexOrder, &index, &error)) return error;
  if (!read_u32(r, kGenerationOrder, &generation, &error)) return error;
  const uint32_t detail = r.read_bits(kDetailBits);
  if (r.overrun()) return EventBlockError::Truncated;
  const uint8_t most = type == ContactEventType::JointAdded ? kMaxJointKindDetail : kMaxJointRemovedDetail;
  if (detail > most) return EventBlockError::BadRecord;
  joint->joint = impulse::to_wire(ObjectID{index, generation + 1u});
  joint->detail = static_cast<uint8_t>(detail);
  if (type != ContactEventType::JointAdded) return EventBlockError::None;
  error = read_point(r, pc, anchor_a);
  return error != EventBlockError::None ? error : read_point(r, pc, anchor_b);
}

EventBlockError read_event(BitReader& r, const PointCoder& pc, uint32_t* previous_sequence, uint64_t* previous_tick,
                           CollisionEvent* out, JointEventFields* joint) {
  EventBlockError error = EventBlockError::None;
  uint32_t zz_sequence = 0, a_index = 0, a_generation = 0, zz_index = 0, b_generation = 0;
  uint64_t zz_tick = 0;
  if (!read_u32(r, kSequenceDeltaOrder, &zz_sequence, &error)) return error;
  if (!read_u64(r, kTickDeltaOrder, &zz_tick, &error)) return error;
  const uint32_t type = r.read_bits(kTypeBits);
  if (r.overrun()) return EventBlockError::Truncated;
  if (type > static_cast<uint32_t>(ContactEventType::MAX)) return EventBlockError::BadRecord;
  if (!read_u32(r, kIndexOrder, &a_index, &error)) return error;
  if (!read_u32(r, kGenerationOrder, &a_generation, &error)) return error;
  if (!read_u32(r, kIndexDeltaOrder, &zz_index, &error)) return error;
  if (!read_u32(r, kGenerationOrder, &b_generation, &error)) return error;
  float point[3] = {0.0f, 0.0f, 0.0f};
  impulse::Vec3 normal;
  *joint = JointEventFields{};
  if (is_joint_event(static_cast<ContactEventType>(type))) {
    float anchor_b[3] = {0.0f, 0.0f, 0.0f};
    error = read_joint_suffix(r, pc, static_cast<ContactEventType>(type), joint, point, anchor_b);
    if (error != EventBlockError::None) return error;
    normal = {anchor_b[0], anchor_b[1], anchor_b[2]};
  } else {
    error = read_point(r, pc, point);
    if (error != EventBlockError::None) return error;
    const uint32_t u = r.read_bits(kNormalBits);
    const uint32_t v = r.read_bits(kNormalBits);
    if (r.overrun()) return EventBlockError::Truncated;
    if (u > 2u * kNormalMax || v > 2u * kNormalMax) return EventBlockError::BadRecord;
    normal = decode_octahedral_normal(static_cast<int32_t>(u) - kNormalMax, static_cast<int32_t>(v) - kNormalMax);
  }

  const uint32_t sequence = *previous_sequence + 1u + static_cast<uint32_t>(zigzag_decode(zz_sequence));
  const uint64_t tick = *previous_tick + zigzag64_decode(zz_tick);
  const ObjectID a{a_index, a_generation + 1u};
  const ObjectID b{a_index + static_cast<uint32_t>(zigzag_decode(zz_index)), b_generation + 1u};
  *out = CollisionEvent(tick, impulse::to_wire(a), impulse::to_wire(b), wire::Vec3(point[0], point[1], point[2]),
                        wire::Vec3(normal.x, normal.y, normal.z), sequence, static_cast<ContactEventType>(type));
  *previous_sequence = sequence;
  *previous_tick = tick;
  return EventBlockError::None;
}

}  // namespace

const char* to_string(EventBlockError error) {
  switch (error) {
    case EventBlockError::None: return "none";
    case EventBlockError::Truncated: return "truncated";
    case EventBlockError::BadHeader: return "bad header";
    case EventBlockError::BadRecord: return "bad record";
    case EventBlockError::ChecksumMismatch: return "checksum mismatch";
    case EventBlockError::Count: break;
  }
  return "unknown";
}

void encode_octahedral_normal(impulse::Vec3 n, int32_t* u, int32_t* v) {
  // Scale by the largest component first, so |n|_1 cannot overflow or vanish.
  const float m = std::max(std::fabs(n.x), std::max(std::fabs(n.y), std::fabs(n.z)));
  if (!is_finite(n) || !(m > 0.0f)) {
    *u = 0;  // +Z
    *v = 0;
    return;
  }
  const impulse::Vec3 s{n.x / m, n.y / m, n.z / m};
  const float l1 = std::fabs(s.x) + std::fabs(s.y) + std::fabs(s.z);  // in [1, 3]
  float ox = s.x / l1;
  float oy = s.y / l1;
  if (s.z < 0.0f) {  // fold the lower half over the diagonals
    const float fx = (1.0f - std::fabs(oy)) * sign_of(ox);
    const float fy = (1.0f - std::fabs(ox)) * sign_of(oy);
    ox = fx;
    oy = fy;
  }
  constexpr float kScale = static_cast<float>(kNormalMax);
  *u = std::clamp(static_cast<int32_t>(std::lround(ox * kScale)), -kNormalMax, kNormalMax);
  *v = std::clamp(static_cast<int32_t>(std::lround(oy * kScale)), -kNormalMax, kNormalMax);
}

impulse::Vec3 decode_octahedral_normal(int32_t u, int32_t v) {
  constexpr float kScale = static_cast<float>(kNormalMax);
  float x = static_cast<float>(u) / kScale;
  float y = static_cast<float>(v) / kScale;
  const float z = 1.0f - std::fabs(x) - std::fabs(y);
  if (z < 0.0f) {  // unfold the lower half
    const float fx = (1.0f - std::fabs(y)) * sign_of(x);
    const float fy = (1.0f - std::fabs(x)) * sign_of(y);
    x = fx;
    y = fy;
  }
  // |x| + |y| + |z| = 1 on the octahedron, so the length is at least 1/sqrt3: never 0.
  const float length = std::sqrt(x * x + y * y + z * z);
  return {x / length, y / length, z / length};
}

double max_normal_error_rad() { return 3.0 / (std::sqrt(2.0) * static_cast<double>(kNormalMax)); }

size_t max_event_block_bytes(uint32_t count) {
  if (count == 0) return kEmptyEventBlockBytes;
  const size_t header = kChecksumBytes * 8 + kCountBits + max_u64_bits(kBaseTickOrder) +
                        exp_golomb_bits(0xFFFFFFFFu, kBaseSequenceOrder);
  const size_t prefix = exp_golomb_bits(0xFFFFFFFFu, kSequenceDeltaOrder) + max_u64_bits(kTickDeltaOrder) +
                        kTypeBits + exp_golomb_bits(0xFFFFFFFFu, kIndexOrder) +
                        2 * exp_golomb_bits(0xFFFFFFFFu, kGenerationOrder) +
                        exp_golomb_bits(0xFFFFFFFFu, kIndexDeltaOrder);
  const size_t contact = 3 * kMaxPositionBits + 2 * kNormalBits;
  const size_t joint_added = exp_golomb_bits(0xFFFFFFFFu, kJointIndexOrder) +
                             exp_golomb_bits(0xFFFFFFFFu, kGenerationOrder) + kDetailBits + 6 * kMaxPositionBits;
  const size_t event = prefix + std::max(contact, joint_added);
  return (header + count * event + 7) / 8;
}

size_t event_block_bytes(std::span<const CollisionEvent> events, const QuantizationConfig& config,
                         std::span<const JointEventFields> joints) {
  PointCoder pc;
  if (!encodable(events, joints) || !make_point_coder(config, &pc)) return 0;
  BitCounter counter;
  put_block_body(counter, events, joints, pc);
  return kChecksumBytes + (counter.bit_count() + 7) / 8;
}

bool encode_collision_events(std::span<const CollisionEvent> events, const QuantizationConfig& config,
                             std::span<uint8_t> out, std::span<const JointEventFields> joints) {
  PointCoder pc;
  if (!encodable(events, joints) || !make_point_coder(config, &pc)) return false;
  BitCounter counter;
  put_block_body(counter, events, joints, pc);
  if (out.size() != kChecksumBytes + (counter.bit_count() + 7) / 8) return false;
  std::fill(out.begin(), out.end(), uint8_t{0});
  SpanBitWriter w(out.subspan(kChecksumBytes));
  put_block_body(w, events, joints, pc);
  if (w.overflow()) return false;  // unreachable: the span was sized by the same code
  const uint32_t sum = checksum_of(out.subspan(kChecksumBytes));
  for (size_t i = 0; i < kChecksumBytes; ++i) out[i] = static_cast<uint8_t>(sum >> (8 * i));
  return true;
}

bool encode_collision_events(std::span<const CollisionEvent> events, const QuantizationConfig& config,
                             std::vector<uint8_t>* out, std::span<const JointEventFields> joints) {
  out->clear();
  const size_t bytes = event_block_bytes(events, config, joints);
  if (bytes == 0) return false;
  out->resize(bytes);
  if (encode_collision_events(events, config, std::span<uint8_t>(*out), joints)) return true;
  out->clear();
  return false;
}

EventBlockError decode_collision_events(std::span<const uint8_t> block, const QuantizationConfig& config,
                                        std::vector<CollisionEvent>* out, std::vector<JointEventFields>* joints) {
  out->clear();
  if (joints != nullptr) joints->clear();
  PointCoder pc;
  if (!make_point_coder(config, &pc)) return EventBlockError::BadHeader;
  if (block.size() < kEmptyEventBlockBytes) return EventBlockError::Truncated;
  uint32_t expected = 0;
  for (size_t i = 0; i < kChecksumBytes; ++i) expected |= static_cast<uint32_t>(block[i]) << (8 * i);
  if (checksum_of(block.subspan(kChecksumBytes)) != expected) return EventBlockError::ChecksumMismatch;

  BitReader r(block.subspan(kChecksumBytes));
  const uint32_t count = r.read_bits(kCountBits);  // <= 31 = kMaxEventsPerBlock by its width
  if (count > 0) {
    EventBlockError error = EventBlockError::None;
    uint64_t base_tick = 0;
    uint32_t base_sequence = 0;
    if (!read_u64(r, kBaseTickOrder, &base_tick, &error) || !read_u32(r, kBaseSequenceOrder, &base_sequence, &error)) {
      return error;
    }
    uint32_t previous_sequence = base_sequence - 1u;
    uint64_t previous_tick = base_tick;
    for (uint32_t n = 0; n < count; ++n) {
      CollisionEvent e;
      JointEventFields joint;
      error = read_event(r, pc, &previous_sequence, &previous_tick, &e, &joint);
      if (error != EventBlockError::None) {
        out->clear();
        if (joints != nullptr) joints->clear();
        return error;
      }
      out->push_back(e);
      if (joints != nullptr) joints->push_back(joint);
    }
  }
  // Only zero padding to the byte boundary may follow the last event.
  const size_t rest = r.bits_remaining();
  if (rest >= 8 || r.read_bits(static_cast<unsigned>(rest)) != 0) {
    out->clear();
    if (joints != nullptr) joints->clear();
    return EventBlockError::BadHeader;
  }
  return EventBlockError::None;
}

}  // namespace impulse::wire
