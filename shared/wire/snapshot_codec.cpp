// Snapshot payload codec: gap-coded record indices, entry / delta / exit records with
// exponential-Golomb relative encoding of small deltas, XXH32 over the decoded content (Glenn
// Fiedler, "Snapshot Compression", gafferongames.com, 2015; Yann Collet, xxHash). The format is
// specified bit by bit in docs/protocol_snapshot_section.md; keep the two in step.
#include "shared/wire/snapshot_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include <xxhash.h>

#include "shared/wire/bitstream.h"

namespace impulse::wire {
namespace {

// Exponential-Golomb orders (k) of the variable-length fields, tuned on the N1-like unit test
// (SnapshotSender.N1PayloadFigures): moving any one of them by +-1 changes the mean payload by at
// most 1 %, so they favour larger deltas (longer round trips) where that costs nothing.
constexpr unsigned kCountOrder = 3;          // record count
constexpr unsigned kGapOrder = 2;            // index gap
constexpr unsigned kDistanceOrder = 2;       // baseline distance - 1
constexpr unsigned kGenerationOrder = 0;     // generation - 1
constexpr unsigned kPositionDeltaOrder = 4;  // zig-zag position delta (units of 2^-position_fraction_bits m)
constexpr unsigned kOrientationDeltaOrder = 3;
constexpr unsigned kLinearVelocityDeltaOrder = 3;
constexpr unsigned kAngularVelocityDeltaOrder = 3;

constexpr uint32_t kChecksumSeed = 0;
constexpr size_t kChecksumBytes = 4;
// Fewest bits any record takes (an exit at gap 0: 3 + 2), bounding the record count of a payload.
constexpr uint32_t kMinRecordBits = 5;

// --- Encoding (templated over BitWriter / BitCounter so sizes come from the encoder itself) ---

template <class Sink, class T>
void put_delta_group(Sink& w, const T* base, const T* value, unsigned order) {
  const bool changed = base[0] != value[0] || base[1] != value[1] || base[2] != value[2];
  w.write_bit(changed);
  if (!changed) return;
  for (int i = 0; i < 3; ++i) {
    const int32_t d = static_cast<int32_t>(value[i]) - static_cast<int32_t>(base[i]);
    write_exp_golomb(w, zigzag_encode(d), order);
  }
}

template <class Sink>
void put_full_state(Sink& w, const QuantizedState& s, const QuantizationLimits& l) {
  w.write_bit(s.at_rest != 0);
  for (int i = 0; i < 3; ++i) w.write_bits(static_cast<uint32_t>(s.position[i] + l.position_max), l.position_bits);
  w.write_bits(s.orientation_largest, 2);
  for (int i = 0; i < 3; ++i) w.write_bits(s.orientation[i], l.orientation_bits);
  if (s.at_rest != 0) return;
  for (int i = 0; i < 3; ++i)
    w.write_bits(static_cast<uint32_t>(s.linear_velocity[i] + l.linear_velocity_max), l.linear_velocity_bits);
  for (int i = 0; i < 3; ++i)
    w.write_bits(static_cast<uint32_t>(s.angular_velocity[i] + l.angular_velocity_max), l.angular_velocity_bits);
}

template <class Sink>
void put_delta_state(Sink& w, const QuantizedState& base, const QuantizedState& s, const QuantizationLimits& l) {
  w.write_bit(s.at_rest != 0);
  put_delta_group(w, base.position, s.position, kPositionDeltaOrder);
  const bool orientation_changed = base.orientation_largest != s.orientation_largest ||
                                   base.orientation[0] != s.orientation[0] || base.orientation[1] != s.orientation[1] ||
                                   base.orientation[2] != s.orientation[2];
  w.write_bit(orientation_changed);
  if (orientation_changed) {
    const bool same_largest = base.orientation_largest == s.orientation_largest;
    w.write_bit(same_largest);
    if (same_largest) {
      for (int i = 0; i < 3; ++i) {
        const int32_t d = static_cast<int32_t>(s.orientation[i]) - static_cast<int32_t>(base.orientation[i]);
        write_exp_golomb(w, zigzag_encode(d), kOrientationDeltaOrder);
      }
    } else {
      w.write_bits(s.orientation_largest, 2);
      for (int i = 0; i < 3; ++i) w.write_bits(s.orientation[i], l.orientation_bits);
    }
  }
  if (s.at_rest != 0) return;
  put_delta_group(w, base.linear_velocity, s.linear_velocity, kLinearVelocityDeltaOrder);
  put_delta_group(w, base.angular_velocity, s.angular_velocity, kAngularVelocityDeltaOrder);
}

template <class Sink>
void put_delta_body(Sink& w, uint32_t baseline_distance, const QuantizedState& baseline, const QuantizedState& s,
                    const QuantizationLimits& l) {
  w.write_bit(false);
  write_exp_golomb(w, baseline_distance - 1, kDistanceOrder);
  put_delta_state(w, baseline, s, l);
}

template <class Sink>
void put_entry_body(Sink& w, uint32_t generation, const ObjectDescription& desc, const QuantizedState& s,
                    const QuantizationLimits& l) {
  w.write_bit(true);
  w.write_bit(false);
  write_exp_golomb(w, generation - 1, kGenerationOrder);
  w.write_bits(static_cast<uint32_t>(desc.kind), 2);
  w.write_bits(static_cast<uint32_t>(desc.shape), 3);
  w.write_bit(desc.sensor);
  if (has_asset(desc.shape)) w.write_bits(desc.asset, 16);
  w.write_bits(std::bit_cast<uint32_t>(desc.dims.x), 32);
  w.write_bits(std::bit_cast<uint32_t>(desc.dims.y), 32);
  w.write_bits(std::bit_cast<uint32_t>(desc.dims.z), 32);
  put_full_state(w, s, l);
}

template <class Sink>
void put_record_body(Sink& w, const SnapshotRecord& r, const QuantizationLimits& l) {
  switch (r.kind) {
    case RecordKind::Delta: return put_delta_body(w, r.baseline_distance, r.baseline, r.state, l);
    case RecordKind::Entry: return put_entry_body(w, r.id.generation, r.desc, r.state, l);
    case RecordKind::Exit:
      w.write_bit(true);
      w.write_bit(true);
      return;
  }
}

// --- Checksum input: a fixed little-endian serialisation of each decoded record ---------------

// Little-endian writers into a record's fixed buffer.
struct Le {
  uint8_t bytes[64];
  size_t size = 0;
  void u8(uint32_t v) { bytes[size++] = static_cast<uint8_t>(v); }
  void u16(uint32_t v) {
    u8(v);
    u8(v >> 8);
  }
  void u32(uint32_t v) {
    u16(v);
    u16(v >> 16);
  }
};

// kind u8, index u32; entry and delta: generation u32, position 3 x i32, linear velocity 3 x i16,
// angular velocity 3 x i16, orientation 3 x u16, largest u8, at_rest u8; entry: body kind u8,
// shape u8, sensor u8, dims 3 x u32 (IEEE bits), then for a hull its asset u16. 58 bytes at most.
void append_checksum_input(RecordKind kind, ObjectID id, const ObjectDescription* desc, const QuantizedState* s,
                           std::vector<uint8_t>* out) {
  Le le;
  le.u8(static_cast<uint32_t>(kind));
  le.u32(id.index);
  if (kind != RecordKind::Exit) {
    le.u32(id.generation);
    for (int i = 0; i < 3; ++i) le.u32(static_cast<uint32_t>(s->position[i]));
    for (int i = 0; i < 3; ++i) le.u16(static_cast<uint16_t>(s->linear_velocity[i]));
    for (int i = 0; i < 3; ++i) le.u16(static_cast<uint16_t>(s->angular_velocity[i]));
    for (int i = 0; i < 3; ++i) le.u16(s->orientation[i]);
    le.u8(s->orientation_largest);
    le.u8(s->at_rest);
  }
  if (kind == RecordKind::Entry) {
    le.u8(static_cast<uint32_t>(desc->kind));
    le.u8(static_cast<uint32_t>(desc->shape));
    le.u8(desc->sensor ? 1u : 0u);
    le.u32(std::bit_cast<uint32_t>(desc->dims.x));
    le.u32(std::bit_cast<uint32_t>(desc->dims.y));
    le.u32(std::bit_cast<uint32_t>(desc->dims.z));
    if (has_asset(desc->shape)) le.u16(desc->asset);
  }
  out->insert(out->end(), le.bytes, le.bytes + le.size);
}

uint32_t checksum(const std::vector<uint8_t>& input) {
  return XXH32(input.data(), input.size(), kChecksumSeed);
}

// --- Decoding ---------------------------------------------------------------------------------

// Reads a field that was written as (value + max) in `bits` bits; false when out of range.
bool read_offset(BitReader& r, unsigned bits, int32_t max, int32_t* out) {
  const uint32_t raw = r.read_bits(bits);
  if (r.overrun() || raw > 2 * static_cast<uint32_t>(max)) return false;
  *out = static_cast<int32_t>(raw) - max;
  return true;
}

enum class ReadStatus : uint8_t { Ok, Truncated, Bad };

ReadStatus status_of(const BitReader& r) { return r.overrun() ? ReadStatus::Truncated : ReadStatus::Bad; }

ReadStatus read_full_state(BitReader& r, const QuantizationLimits& l, QuantizedState* s) {
  *s = QuantizedState{};
  s->at_rest = r.read_bit() ? 1 : 0;
  for (int i = 0; i < 3; ++i) {
    if (!read_offset(r, l.position_bits, l.position_max, &s->position[i])) return status_of(r);
  }
  s->orientation_largest = static_cast<uint8_t>(r.read_bits(2));
  for (int i = 0; i < 3; ++i) s->orientation[i] = static_cast<uint16_t>(r.read_bits(l.orientation_bits));
  if (r.overrun()) return ReadStatus::Truncated;
  if (s->at_rest != 0) return ReadStatus::Ok;
  for (int i = 0; i < 3; ++i) {
    int32_t v = 0;
    if (!read_offset(r, l.linear_velocity_bits, l.linear_velocity_max, &v)) return status_of(r);
    s->linear_velocity[i] = static_cast<int16_t>(v);
  }
  for (int i = 0; i < 3; ++i) {
    int32_t v = 0;
    if (!read_offset(r, l.angular_velocity_bits, l.angular_velocity_max, &v)) return status_of(r);
    s->angular_velocity[i] = static_cast<int16_t>(v);
  }
  return ReadStatus::Ok;
}

// Reads three zig-zag deltas. Three zero deltas are non-canonical (the encoder clears the
// group's changed bit then) and are rejected, so a set of records has exactly one encoding.
ReadStatus parse_three_deltas(BitReader& r, unsigned order, int32_t out[3]) {
  bool any = false;
  for (int i = 0; i < 3; ++i) {
    uint32_t z = 0;
    if (!read_exp_golomb(r, order, 0xFFFFFFFFu, &z)) return status_of(r);
    out[i] = zigzag_decode(z);
    any = any || z != 0;
  }
  return any ? ReadStatus::Ok : ReadStatus::Bad;
}

// A changed bit, then (if set) three deltas; sets `flag` in *groups when changed.
ReadStatus parse_delta_group(BitReader& r, unsigned order, uint8_t flag, uint8_t* groups, int32_t out[3]) {
  const bool changed = r.read_bit();
  if (r.overrun()) return ReadStatus::Truncated;
  if (!changed) return ReadStatus::Ok;
  *groups |= flag;
  return parse_three_deltas(r, order, out);
}

// Adds three parsed deltas to value[] (which holds the baseline); a sum outside T is rejected
// here, the limits are checked on the whole state by the caller.
template <class T>
ReadStatus add_three_deltas(const int32_t delta[3], T* value) {
  for (int i = 0; i < 3; ++i) {
    const int64_t v = static_cast<int64_t>(value[i]) + delta[i];
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) || v > static_cast<int64_t>(std::numeric_limits<T>::max()))
      return ReadStatus::Bad;
    value[i] = static_cast<T>(v);
  }
  return ReadStatus::Ok;
}

using detail::RawDelta;

ReadStatus parse_delta_state(BitReader& r, const QuantizationLimits& l, RawDelta* d) {
  d->at_rest = r.read_bit() ? 1 : 0;
  if (r.overrun()) return ReadStatus::Truncated;
  ReadStatus st = parse_delta_group(r, kPositionDeltaOrder, RawDelta::kPosition, &d->groups, d->position);
  if (st != ReadStatus::Ok) return st;
  const bool orientation_changed = r.read_bit();
  if (r.overrun()) return ReadStatus::Truncated;
  if (orientation_changed) {
    d->groups |= RawDelta::kOrientation;
    const bool same_largest = r.read_bit();
    if (r.overrun()) return ReadStatus::Truncated;
    if (same_largest) {
      d->groups |= RawDelta::kSameLargest;
      st = parse_three_deltas(r, kOrientationDeltaOrder, d->orientation);
      if (st != ReadStatus::Ok) return st;
    } else {
      d->largest = static_cast<uint8_t>(r.read_bits(2));
      for (int i = 0; i < 3; ++i) d->orientation[i] = static_cast<int32_t>(r.read_bits(l.orientation_bits));
      if (r.overrun()) return ReadStatus::Truncated;
    }
  }
  if (d->at_rest != 0) return ReadStatus::Ok;
  st = parse_delta_group(r, kLinearVelocityDeltaOrder, RawDelta::kLinear, &d->groups, d->linear);
  if (st != ReadStatus::Ok) return st;
  return parse_delta_group(r, kAngularVelocityDeltaOrder, RawDelta::kAngular, &d->groups, d->angular);
}

ReadStatus apply_delta_state(const RawDelta& d, const QuantizedState& base, QuantizedState* s) {
  *s = base;
  s->at_rest = d.at_rest;
  ReadStatus st = ReadStatus::Ok;
  if ((d.groups & RawDelta::kPosition) != 0 && (st = add_three_deltas(d.position, s->position)) != ReadStatus::Ok) return st;
  if ((d.groups & RawDelta::kOrientation) != 0) {
    if ((d.groups & RawDelta::kSameLargest) != 0) {
      if ((st = add_three_deltas(d.orientation, s->orientation)) != ReadStatus::Ok) return st;
    } else {
      if (d.largest == base.orientation_largest) return ReadStatus::Bad;  // non-canonical
      s->orientation_largest = d.largest;
      for (int i = 0; i < 3; ++i) s->orientation[i] = static_cast<uint16_t>(d.orientation[i]);
    }
  }
  if (s->at_rest != 0) {
    for (int i = 0; i < 3; ++i) {
      s->linear_velocity[i] = 0;
      s->angular_velocity[i] = 0;
    }
    return ReadStatus::Ok;
  }
  if ((d.groups & RawDelta::kLinear) != 0 && (st = add_three_deltas(d.linear, s->linear_velocity)) != ReadStatus::Ok) return st;
  if ((d.groups & RawDelta::kAngular) != 0) return add_three_deltas(d.angular, s->angular_velocity);
  return ReadStatus::Ok;
}

}  // namespace

uint32_t record_body_bits(const SnapshotRecord& record, const QuantizationLimits& limits) {
  BitCounter counter;
  put_record_body(counter, record, limits);
  return static_cast<uint32_t>(counter.bit_count());
}

uint32_t delta_body_bits(uint32_t baseline_distance, const QuantizedState& baseline, const QuantizedState& state,
                         const QuantizationLimits& limits) {
  BitCounter counter;
  put_delta_body(counter, baseline_distance, baseline, state, limits);
  return static_cast<uint32_t>(counter.bit_count());
}

uint32_t entry_body_bits(uint32_t generation, const ObjectDescription& desc, const QuantizedState& state,
                         const QuantizationLimits& limits) {
  BitCounter counter;
  put_entry_body(counter, generation, desc, state, limits);
  return static_cast<uint32_t>(counter.bit_count());
}

uint32_t exit_body_bits() { return 2; }

uint32_t index_gap_bits(uint32_t gap) { return exp_golomb_bits(gap, kGapOrder); }

uint32_t payload_header_bits(uint32_t record_count) {
  return static_cast<uint32_t>(kChecksumBytes * 8) + exp_golomb_bits(record_count, kCountOrder);
}

bool encode_snapshot_payload(std::span<const SnapshotRecord> records, const QuantizationLimits& limits,
                             std::vector<uint8_t>* out, std::vector<uint8_t>* checksum_scratch) {
  out->clear();
  checksum_scratch->clear();
  int64_t previous = -1;
  for (const SnapshotRecord& r : records) {
    const bool ordered = static_cast<int64_t>(r.id.index) > previous && r.id.index < kMaxSnapshotObjectIndex;
    const bool states_ok = r.kind == RecordKind::Exit ||
                           (is_within_limits(r.state, limits) &&
                            (r.kind != RecordKind::Delta ||
                             (is_within_limits(r.baseline, limits) && r.baseline_distance >= 1 &&
                              r.baseline_distance <= kMaxBaselineDistance)) &&
                            (r.kind != RecordKind::Entry || r.id.generation != 0));
    if (!ordered || !states_ok) return false;
    previous = r.id.index;
  }
  out->resize(kChecksumBytes, 0);
  BitWriter w(out);
  write_exp_golomb(w, static_cast<uint32_t>(records.size()), kCountOrder);
  previous = -1;
  for (const SnapshotRecord& r : records) {
    write_exp_golomb(w, static_cast<uint32_t>(static_cast<int64_t>(r.id.index) - previous - 1), kGapOrder);
    put_record_body(w, r, limits);
    append_checksum_input(r.kind, r.id, &r.desc, &r.state, checksum_scratch);
    previous = r.id.index;
  }
  w.finish();
  const uint32_t sum = checksum(*checksum_scratch);
  for (size_t i = 0; i < kChecksumBytes; ++i) (*out)[i] = static_cast<uint8_t>(sum >> (8 * i));
  return true;
}

const char* to_string(SnapshotError error) {
  switch (error) {
    case SnapshotError::None: return "none";
    case SnapshotError::Stale: return "stale";
    case SnapshotError::Truncated: return "truncated";
    case SnapshotError::BadHeader: return "bad header";
    case SnapshotError::BadRecord: return "bad record";
    case SnapshotError::UnknownBaseline: return "unknown baseline";
    case SnapshotError::BadOrder: return "bad order";
    case SnapshotError::TooManyObjects: return "too many objects";
    case SnapshotError::ChecksumMismatch: return "checksum mismatch";
    case SnapshotError::Count: break;
  }
  return "unknown";
}

// --- SnapshotReceiver ---------------------------------------------------------------------------

SnapshotReceiver::SnapshotReceiver(const QuantizationConfig& config) : config_(config) {
  config_valid_ = config_.validate(nullptr);
  if (config_valid_) limits_ = derive_limits(config_);
}

void SnapshotReceiver::reset() {
  has_applied_ = false;
  sequence_ = 0;
  tick_ = 0;
  objects_.clear();
  ring_of_.clear();
  rings_.clear();
  free_rings_.clear();
  entered_.clear();
  exited_.clear();
  updated_.clear();
  updated_positions_.clear();
}

int32_t SnapshotReceiver::find_position(uint32_t index) const {
  size_t from = 0;
  return find_position_from(index, &from);
}

const SnapshotObject* SnapshotReceiver::find(ObjectID id) const {
  const int32_t p = find_position(id.index);
  return p >= 0 && objects_[static_cast<size_t>(p)].id == id ? &objects_[static_cast<size_t>(p)] : nullptr;
}

const QuantizedState* SnapshotReceiver::find_state(ObjectID id) const {
  const int32_t p = find_position(id.index);
  if (p < 0 || objects_[static_cast<size_t>(p)].id != id) return nullptr;
  const RingRef& ref = ring_of_[static_cast<size_t>(p)];
  return &rings_[ref.ring].slots[ref.head].state;
}

int32_t SnapshotReceiver::find_position_from(uint32_t index, size_t* from) const {
  // Searches the 16-byte RingRefs, not the objects: a few cache lines per payload.
  const size_t n = ring_of_.size();
  size_t lo = *from;  // every position before it holds a lower index
  size_t hi = lo;
  for (size_t step = 1; hi < n && ring_of_[hi].index < index; step *= 2) {
    lo = hi + 1;
    hi += step;
  }
  const auto first = ring_of_.begin() + static_cast<std::ptrdiff_t>(lo);
  const auto last = ring_of_.begin() + static_cast<std::ptrdiff_t>(std::min(hi + 1, n));
  const auto it = std::lower_bound(first, last, index, [](const RingRef& r, uint32_t i) { return r.index < i; });
  *from = static_cast<size_t>(it - ring_of_.begin());
  if (it == ring_of_.end() || it->index != index) return -1;
  return static_cast<int32_t>(it - ring_of_.begin());
}

SnapshotError SnapshotReceiver::apply(uint32_t sequence, uint64_t tick, std::span<const uint8_t> payload) {
  if (!config_valid_) return SnapshotError::BadHeader;
  if (has_applied_ && static_cast<int32_t>(sequence - sequence_) <= 0) return SnapshotError::Stale;
  const SnapshotError error = decode(sequence, payload);
  if (error != SnapshotError::None) return error;
  commit(sequence);
  has_applied_ = true;
  sequence_ = sequence;
  tick_ = tick;
  return SnapshotError::None;
}

SnapshotError SnapshotReceiver::decode(uint32_t sequence, std::span<const uint8_t> payload) {
  decoded_.clear();
  checksum_input_.clear();
  if (payload.size() < kChecksumBytes) return SnapshotError::Truncated;
  uint32_t expected = 0;
  for (size_t i = 0; i < kChecksumBytes; ++i) expected |= static_cast<uint32_t>(payload[i]) << (8 * i);
  BitReader r(payload.subspan(kChecksumBytes));

  uint32_t count = 0;
  if (!read_exp_golomb(r, kCountOrder, 0xFFFFFFFFu, &count))
    return r.overrun() ? SnapshotError::Truncated : SnapshotError::BadHeader;
  if (count > r.bits_remaining() / kMinRecordBits) return SnapshotError::BadHeader;

  int64_t previous = -1;
  size_t cursor = 0;  // where the previous record's index is or would be in ring_of_ (and objects_)
  for (uint32_t n = 0; n < count; ++n) {
    uint32_t gap = 0;
    if (!read_exp_golomb(r, kGapOrder, kMaxSnapshotObjectIndex, &gap))
      return r.overrun() ? SnapshotError::Truncated : SnapshotError::TooManyObjects;
    const int64_t index = previous + 1 + gap;
    if (index >= kMaxSnapshotObjectIndex) return SnapshotError::TooManyObjects;
    previous = index;

    Decoded d;
    d.id.index = static_cast<uint32_t>(index);
    d.view = find_position_from(d.id.index, &cursor);
    const bool first = r.read_bit();
    const bool second = first ? r.read_bit() : false;
    if (r.overrun()) return SnapshotError::Truncated;
    d.kind = !first ? RecordKind::Delta : (second ? RecordKind::Exit : RecordKind::Entry);

    ReadStatus st = ReadStatus::Ok;
    if (d.kind == RecordKind::Delta) {
      uint32_t distance_minus_one = 0;
      if (!read_exp_golomb(r, kDistanceOrder, kMaxBaselineDistance - 1, &distance_minus_one))
        return r.overrun() ? SnapshotError::Truncated : SnapshotError::BadRecord;
      if (d.view < 0) return SnapshotError::UnknownBaseline;
      const RingRef& ref = ring_of_[static_cast<size_t>(d.view)];
      d.id = ObjectID{ref.index, ref.generation};
      d.baseline_sequence = sequence - (distance_minus_one + 1);
      // The baseline is usually the newest state or one of the two before it: fetch them now and
      // look them up after every record is read, so the misses overlap the reading.
      const Ring& ring = rings_[ref.ring];
      __builtin_prefetch(&ring.slots[ref.head]);
      __builtin_prefetch(&ring.slots[(ref.head + kSnapshotBaselineWindow - 2) % kSnapshotBaselineWindow]);
      st = parse_delta_state(r, limits_, &d.raw);
    } else if (d.kind == RecordKind::Entry) {
      uint32_t generation_minus_one = 0;
      if (!read_exp_golomb(r, kGenerationOrder, 0xFFFFFFFEu, &generation_minus_one))
        return r.overrun() ? SnapshotError::Truncated : SnapshotError::BadRecord;
      d.id.generation = generation_minus_one + 1;
      const uint32_t kind = r.read_bits(2);
      const uint32_t shape = r.read_bits(3);
      d.desc.sensor = r.read_bit();
      d.desc.asset = shape <= static_cast<uint32_t>(ShapeKind::MAX) && has_asset(static_cast<ShapeKind>(shape))
                         ? static_cast<uint16_t>(r.read_bits(16))
                         : 0;
      d.desc.dims.x = std::bit_cast<float>(r.read_bits(32));
      d.desc.dims.y = std::bit_cast<float>(r.read_bits(32));
      d.desc.dims.z = std::bit_cast<float>(r.read_bits(32));
      if (r.overrun()) return SnapshotError::Truncated;
      if (kind > static_cast<uint32_t>(BodyKind::MAX) || shape > static_cast<uint32_t>(ShapeKind::MAX) ||
          !is_finite(d.desc.dims) || d.desc.dims.x < 0.0f || d.desc.dims.y < 0.0f || d.desc.dims.z < 0.0f)
        return SnapshotError::BadRecord;
      d.desc.kind = static_cast<BodyKind>(kind);
      d.desc.shape = static_cast<ShapeKind>(shape);
      st = read_full_state(r, limits_, &d.state);
    }
    if (st == ReadStatus::Truncated) return SnapshotError::Truncated;
    if (st == ReadStatus::Bad) return SnapshotError::BadRecord;
    if (d.kind == RecordKind::Entry && !is_within_limits(d.state, limits_)) return SnapshotError::BadRecord;
    decoded_.push_back(d);
  }
  // Only zero padding to the byte boundary may follow the last record.
  const size_t rest = r.bits_remaining();
  if (rest >= 8 || r.read_bits(static_cast<unsigned>(rest)) != 0) return SnapshotError::BadHeader;
  // The deltas against their baselines (fetched above), then the checksum over every record.
  for (Decoded& d : decoded_) {
    if (d.kind == RecordKind::Delta) {
      const RingRef& ref = ring_of_[static_cast<size_t>(d.view)];
      const Ring& ring = rings_[ref.ring];
      const QuantizedState* baseline = nullptr;
      for (uint32_t k = 0; k < ref.count && baseline == nullptr; ++k) {
        const uint32_t slot = (ref.head + kSnapshotBaselineWindow - k) % kSnapshotBaselineWindow;
        if (ring.slots[slot].sequence == d.baseline_sequence) baseline = &ring.slots[slot].state;
      }
      if (baseline == nullptr) return SnapshotError::UnknownBaseline;
      if (apply_delta_state(d.raw, *baseline, &d.state) != ReadStatus::Ok) return SnapshotError::BadRecord;
      if (!is_within_limits(d.state, limits_)) return SnapshotError::BadRecord;
    }
    append_checksum_input(d.kind, d.id, &d.desc, &d.state, &checksum_input_);
  }
  if (checksum(checksum_input_) != expected) return SnapshotError::ChecksumMismatch;
  return SnapshotError::None;
}

void SnapshotReceiver::push_state(RingRef& ref, uint32_t sequence, const QuantizedState& state) {
  ref.head = ref.count == 0 ? 0 : static_cast<uint16_t>((ref.head + 1u) % kSnapshotBaselineWindow);
  rings_[ref.ring].slots[ref.head] = RingSlot{sequence, state};
  if (ref.count < kSnapshotBaselineWindow) ++ref.count;
}

uint32_t SnapshotReceiver::allocate_ring() {
  if (!free_rings_.empty()) {
    const uint32_t slot = free_rings_.back();
    free_rings_.pop_back();
    return slot;
  }
  rings_.emplace_back();
  return static_cast<uint32_t>(rings_.size() - 1);
}

void SnapshotReceiver::set_object(SnapshotObject& object, const Decoded& d) const {
  if (d.kind == RecordKind::Entry) {
    object.id = d.id;
    object.kind = d.desc.kind;
    object.shape = d.desc.shape;
    object.dims = d.desc.dims;
    object.sensor = d.desc.sensor;
    object.asset = d.desc.asset;
  }
  const DequantizedState s = dequantize_state(d.state, config_);
  object.position = s.position;
  object.orientation = s.orientation;
  object.velocity = s.linear_velocity;
  object.angular_velocity = s.angular_velocity;
  object.at_rest = s.at_rest;
}

void SnapshotReceiver::commit(uint32_t sequence) {
  entered_.clear();
  exited_.clear();
  updated_.clear();
  updated_positions_.clear();
  // Membership changes (a new id at an index, or an exit of a held object) rebuild the sorted
  // view in one merge; otherwise every record updates its object in place.
  bool membership_changes = false;
  for (const Decoded& d : decoded_) {
    const bool held = d.view >= 0;
    if (d.kind == RecordKind::Exit && held) membership_changes = true;
    if (d.kind == RecordKind::Entry && (!held || ring_of_[static_cast<size_t>(d.view)].generation != d.id.generation))
      membership_changes = true;
  }
  if (!membership_changes) {
    // The objects and ring slots written are scattered over memory the other clients' work
    // (or the game's) has evicted: fetch a few records ahead so the misses overlap.
    constexpr size_t kPrefetchAhead = 4;
    for (size_t k = 0; k < decoded_.size(); ++k) {
      const Decoded& d = decoded_[k];
      if (k + kPrefetchAhead < decoded_.size() && decoded_[k + kPrefetchAhead].view >= 0) {
        const auto ahead = static_cast<size_t>(decoded_[k + kPrefetchAhead].view);
        const char* object = reinterpret_cast<const char*>(&objects_[ahead]);
        __builtin_prefetch(object, 1);
        __builtin_prefetch(object + sizeof(SnapshotObject) - 1, 1);
      }
      if (d.kind == RecordKind::Exit) continue;  // of an index not held: nothing to drop
      const size_t p = static_cast<size_t>(d.view);
      push_state(ring_of_[p], sequence, d.state);
      set_object(objects_[p], d);
      updated_.push_back(d.id);
      updated_positions_.push_back(static_cast<uint32_t>(p));
    }
    return;
  }

  next_objects_.clear();
  next_ring_of_.clear();
  size_t old = 0;
  for (const Decoded& d : decoded_) {
    // Copy the held objects before this record's index unchanged.
    while (old < objects_.size() && objects_[old].id.index < d.id.index) {
      next_objects_.push_back(objects_[old]);
      next_ring_of_.push_back(ring_of_[old]);
      ++old;
    }
    const bool held = d.view >= 0;
    if (held) ++old;  // objects_[d.view] is handled here
    if (d.kind == RecordKind::Exit) {
      if (!held) continue;
      const size_t p = static_cast<size_t>(d.view);
      exited_.push_back(objects_[p].id);
      free_rings_.push_back(ring_of_[p].ring);
      continue;
    }
    SnapshotObject object = held ? objects_[static_cast<size_t>(d.view)] : SnapshotObject{};
    RingRef ring = held ? ring_of_[static_cast<size_t>(d.view)] : RingRef{};
    if (!held) {
      ring = RingRef{d.id.index, d.id.generation, allocate_ring(), 0, 0};
      entered_.push_back(d.id);
    } else if (object.id != d.id) {  // an entry replacing another object at the same index
      exited_.push_back(object.id);
      entered_.push_back(d.id);
      ring.generation = d.id.generation;
      ring.head = 0;
      ring.count = 0;
    } else {
      updated_.push_back(d.id);
      updated_positions_.push_back(static_cast<uint32_t>(next_objects_.size()));
    }
    push_state(ring, sequence, d.state);
    set_object(object, d);
    next_objects_.push_back(object);
    next_ring_of_.push_back(ring);
  }
  for (; old < objects_.size(); ++old) {
    next_objects_.push_back(objects_[old]);
    next_ring_of_.push_back(ring_of_[old]);
  }
  objects_.swap(next_objects_);
  ring_of_.swap(next_ring_of_);
}

}  // namespace impulse::wire
