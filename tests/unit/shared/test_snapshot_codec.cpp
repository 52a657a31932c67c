// Snapshot codec: the bit order and codes of bitstream.h, the payload round trip through
// SnapshotReceiver (entries, deltas against random baselines, exits, replacement, staleness), the
// documented worked example byte for byte, and rejection of every corruption (each single-bit
// flip, each truncation, random bytes, hand-made malformed records) without touching the view.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <map>
#include <vector>

#include "shared/wire/bitstream.h"
#include "shared/wire/quantize.h"
#include "shared/wire/snapshot_codec.h"
#include "tests/support/rng.h"

namespace impulse::wire {
namespace {

using ::impulse::test::Rng;
using Bytes = std::vector<uint8_t>;

// --- helpers ------------------------------------------------------------------------------------

impulse::Quat random_quat(Rng& rng) {
  for (;;) {
    const impulse::Quat q{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)};
    const float n = dot(q, q);
    if (n > 1e-4f && n <= 1.0f) return normalize(q);
  }
}

QuantizedState random_state(Rng& rng, const QuantizationConfig& config) {
  const float b = config.world_bound_m;
  const impulse::Vec3 p{rng.uniform(-b, b), rng.uniform(-b, b), rng.uniform(-b, b)};
  const impulse::Vec3 v{rng.uniform(-70, 70), rng.uniform(-70, 70), rng.uniform(-70, 70)};
  const impulse::Vec3 w{rng.uniform(-40, 40), rng.uniform(-40, 40), rng.uniform(-40, 40)};
  return quantize_state(p, random_quat(rng), v, w, rng.below(4) == 0, config);
}

// A state near `base`: each field group changes with probability 1/2, by a small or large amount.
QuantizedState perturb(Rng& rng, const QuantizedState& base, const QuantizationLimits& l) {
  QuantizedState s = base;
  auto nudge = [&](int32_t v, int32_t max) {
    const int32_t spread = rng.below(4) == 0 ? max : 40;
    const int32_t d = static_cast<int32_t>(rng.below(static_cast<uint32_t>(2 * spread + 1))) - spread;
    return std::clamp(v + d, -max, max);
  };
  if (rng.below(2) != 0)
    for (int i = 0; i < 3; ++i) s.position[i] = nudge(s.position[i], l.position_max);
  if (rng.below(2) != 0) {
    if (rng.below(5) == 0) s.orientation_largest = static_cast<uint8_t>(rng.below(4));
    for (int i = 0; i < 3; ++i)
      s.orientation[i] = static_cast<uint16_t>(std::clamp<int32_t>(
          s.orientation[i] + static_cast<int32_t>(rng.below(61)) - 30, 0, static_cast<int32_t>(l.orientation_max)));
  }
  s.at_rest = rng.below(5) == 0 ? 1 : 0;
  if (s.at_rest != 0) {
    for (int i = 0; i < 3; ++i) s.linear_velocity[i] = s.angular_velocity[i] = 0;
  } else {
    if (rng.below(2) != 0)
      for (int i = 0; i < 3; ++i)
        s.linear_velocity[i] = static_cast<int16_t>(nudge(s.linear_velocity[i], l.linear_velocity_max));
    if (rng.below(2) != 0)
      for (int i = 0; i < 3; ++i)
        s.angular_velocity[i] = static_cast<int16_t>(nudge(s.angular_velocity[i], l.angular_velocity_max));
  }
  return s;
}

SnapshotRecord entry(ObjectID id, const QuantizedState& s, ObjectDescription desc = {}) {
  SnapshotRecord r;
  r.kind = RecordKind::Entry;
  r.id = id;
  r.desc = desc;
  r.state = s;
  return r;
}
SnapshotRecord delta(ObjectID id, const QuantizedState& base, uint32_t distance, const QuantizedState& s) {
  SnapshotRecord r;
  r.kind = RecordKind::Delta;
  r.id = id;
  r.baseline = base;
  r.baseline_distance = distance;
  r.state = s;
  return r;
}
SnapshotRecord exit_record(uint32_t index) {
  SnapshotRecord r;
  r.kind = RecordKind::Exit;
  r.id.index = index;
  return r;
}

Bytes encode(std::span<const SnapshotRecord> records, const QuantizationConfig& config = {}) {
  Bytes out, scratch;
  EXPECT_TRUE(encode_snapshot_payload(records, derive_limits(config), &out, &scratch));
  return out;
}

bool same_object(const SnapshotObject& a, const SnapshotObject& b) {
  return a.id == b.id && a.kind == b.kind && a.shape == b.shape && a.dims == b.dims && a.sensor == b.sensor &&
         a.position == b.position && a.orientation == b.orientation && a.velocity == b.velocity &&
         a.angular_velocity == b.angular_velocity && a.at_rest == b.at_rest;
}
bool same_view(const SnapshotReceiver& a, const SnapshotReceiver& b) {
  if (a.objects().size() != b.objects().size() || a.tick() != b.tick() || a.sequence() != b.sequence()) return false;
  for (size_t i = 0; i < a.objects().size(); ++i) {
    if (!same_object(a.objects()[i], b.objects()[i])) return false;
    if (!(*a.find_state(a.objects()[i].id) == *b.find_state(b.objects()[i].id))) return false;
  }
  return true;
}

// --- bitstream ----------------------------------------------------------------------------------

TEST(BitStream, FieldsArePackedLsbFirstInLittleEndianBytes) {
  Bytes bytes;
  BitWriter w(&bytes);
  w.write_bits(0b101, 3);
  w.write_bits(0xFF, 8);
  w.write_bits(0, 5);
  w.write_bits(0x12345678, 32);
  w.write_bit(true);
  w.finish();
  ASSERT_EQ(bytes.size(), 7u);
  EXPECT_EQ(bytes[0], 0xFD);  // 101 then five of the eight ones
  EXPECT_EQ(bytes[1], 0x07);  // three ones, five zeros
  EXPECT_EQ(bytes[2], 0x78);  // a byte-aligned u32 is little-endian
  EXPECT_EQ(bytes[3], 0x56);
  EXPECT_EQ(bytes[4], 0x34);
  EXPECT_EQ(bytes[5], 0x12);
  EXPECT_EQ(bytes[6], 0x01);  // the last bit; unused bits are zero
  EXPECT_EQ(w.bit_count(), 49u);
  // High bits of the value beyond `count` are ignored.
  Bytes masked;
  BitWriter m(&masked);
  m.write_bits(0xFFFFFFF0u, 4);
  m.finish();
  EXPECT_EQ(masked, Bytes{0x00});
}

TEST(BitStream, RandomFieldsRoundTrip) {
  Rng rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    Bytes bytes;
    BitWriter w(&bytes);
    std::vector<std::pair<uint32_t, unsigned>> fields;
    for (int i = 0; i < 100; ++i) {
      const unsigned count = rng.below(33);
      const uint32_t value = static_cast<uint32_t>(rng.next()) & (count == 32 ? 0xFFFFFFFFu : (1u << count) - 1u);
      w.write_bits(value, count);
      fields.emplace_back(value, count);
    }
    w.finish();
    BitReader r(bytes);
    for (const auto& [value, count] : fields) ASSERT_EQ(r.read_bits(count), value);
    EXPECT_FALSE(r.overrun());
    EXPECT_LT(r.bits_remaining(), 8u);
  }
}

TEST(BitStream, ReaderNeverReadsPastTheEndAndTheErrorIsSticky) {
  const Bytes bytes{0xAB, 0xCD};
  BitReader r(bytes);
  EXPECT_EQ(r.read_bits(12), 0xDABu);
  EXPECT_EQ(r.read_bits(5), 0u);  // 4 bits left
  EXPECT_TRUE(r.overrun());
  EXPECT_EQ(r.read_bits(1), 0u);  // in range, but the error is sticky
  EXPECT_TRUE(r.overrun());
  BitReader too_wide(bytes);
  EXPECT_EQ(too_wide.read_bits(33), 0u);
  EXPECT_TRUE(too_wide.overrun());
  BitReader empty(std::span<const uint8_t>{});
  EXPECT_FALSE(empty.read_bit());
  EXPECT_TRUE(empty.overrun());
}

TEST(BitStream, ExpGolombRoundTripsAndHasTheDocumentedLength) {
  Rng rng(2);
  EXPECT_EQ(exp_golomb_bits(0, 0), 1u);
  EXPECT_EQ(exp_golomb_bits(0, 2), 3u);
  EXPECT_EQ(exp_golomb_bits(3, 2), 3u);
  EXPECT_EQ(exp_golomb_bits(4, 2), 5u);
  EXPECT_EQ(exp_golomb_bits(0xFFFFFFFFu, 0), 65u);
  for (unsigned k = 0; k <= 8; ++k) {
    std::vector<uint32_t> values{0, 1, 2, (1u << k) - 1, 1u << k, 0x7FFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu - (1u << k)};
    for (int i = 0; i < 300; ++i) values.push_back(static_cast<uint32_t>(rng.next() >> rng.below(64)));
    Bytes bytes;
    BitWriter w(&bytes);
    size_t expected_bits = 0;
    for (uint32_t v : values) {
      BitCounter counter;
      write_exp_golomb(counter, v, k);
      ASSERT_EQ(counter.bit_count(), exp_golomb_bits(v, k));
      write_exp_golomb(w, v, k);
      expected_bits += exp_golomb_bits(v, k);
    }
    ASSERT_EQ(w.bit_count(), expected_bits);
    w.finish();
    BitReader r(bytes);
    for (uint32_t v : values) {
      uint32_t got = 1;
      ASSERT_TRUE(read_exp_golomb(r, k, 0xFFFFFFFFu, &got));
      ASSERT_EQ(got, v) << "k " << k;
    }
  }
  // Bounded: a value above max_value is malformed; so are more than 32 - k leading zeros.
  Bytes bytes;
  BitWriter w(&bytes);
  write_exp_golomb(w, 100, 2);
  w.finish();
  BitReader r(bytes);
  uint32_t v = 0;
  EXPECT_FALSE(read_exp_golomb(r, 2, 99, &v));
  EXPECT_FALSE(r.overrun());
  const Bytes zeros(8, 0);
  BitReader z(zeros);
  EXPECT_FALSE(read_exp_golomb(z, 0, 0xFFFFFFFFu, &v));
  EXPECT_FALSE(z.overrun()) << "rejected at the 33rd zero, before the end";
  const Bytes short_code{0x00, 0x80};  // 15 zeros and a one, then nothing: truncated
  BitReader t(short_code);
  EXPECT_FALSE(read_exp_golomb(t, 0, 0xFFFFFFFFu, &v));
  EXPECT_TRUE(t.overrun());
}

// The reader's word-at-a-time paths against a bit-at-a-time reference of the same contract, on
// short random streams (most codes end near or past the end of the span).
TEST(BitStream, WordReadsMatchABitAtATimeReference) {
  struct Reference {
    const Bytes& bytes;
    size_t position = 0;
    bool overrun = false;
    uint32_t bits(unsigned count) {
      if (overrun || count > 32 || count > bytes.size() * 8 - position) {
        overrun = true;
        return 0;
      }
      uint32_t v = 0;
      for (unsigned i = 0; i < count; ++i, ++position) v |= ((bytes[position >> 3] >> (position & 7)) & 1u) << i;
      return v;
    }
    bool exp_golomb(unsigned k, uint32_t max_value, uint32_t* out) {
      *out = 0;
      unsigned zeros = 0;
      while (bits(1) == 0) {
        if (overrun || ++zeros > 32 - k) return false;
      }
      const unsigned n = zeros + k;
      const uint64_t v = (uint64_t{1} << n) + bits(n) - (uint64_t{1} << k);
      if (overrun || v > max_value) return false;
      *out = static_cast<uint32_t>(v);
      return true;
    }
  };
  Rng rng(4);
  for (int trial = 0; trial < 20000; ++trial) {
    Bytes bytes(rng.below(13));
    // Sparse bits, so long runs of zeros (long codes, malformed codes) are common.
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng.below(4) == 0 ? rng.next() : (rng.below(3) == 0 ? 1u << rng.below(8) : 0));
    BitReader r(bytes);
    Reference ref{bytes};
    for (int op = 0; op < 6; ++op) {
      if (rng.below(2) == 0) {
        const unsigned count = rng.below(34);
        ASSERT_EQ(r.read_bits(count), ref.bits(count));
      } else {
        const unsigned k = rng.below(9);
        const uint32_t max_value = rng.below(4) == 0 ? static_cast<uint32_t>(rng.below(100)) : 0xFFFFFFFFu;
        uint32_t got = 7, want = 7;
        ASSERT_EQ(read_exp_golomb(r, k, max_value, &got), ref.exp_golomb(k, max_value, &want));
        ASSERT_EQ(got, want);
        if (ref.overrun || r.overrun()) break;  // the positions after a failure are unspecified
      }
      ASSERT_EQ(r.overrun(), ref.overrun);
      if (!ref.overrun) {
        ASSERT_EQ(r.position(), ref.position);
      }
    }
    ASSERT_EQ(r.overrun(), ref.overrun);
  }
}

TEST(BitStream, ZigZagMapsSmallMagnitudesToSmallCodes) {
  EXPECT_EQ(zigzag_encode(0), 0u);
  EXPECT_EQ(zigzag_encode(-1), 1u);
  EXPECT_EQ(zigzag_encode(1), 2u);
  EXPECT_EQ(zigzag_encode(-2), 3u);
  EXPECT_EQ(zigzag_encode(std::numeric_limits<int32_t>::max()), 0xFFFFFFFEu);
  EXPECT_EQ(zigzag_encode(std::numeric_limits<int32_t>::min()), 0xFFFFFFFFu);
  Rng rng(3);
  for (int i = 0; i < 10000; ++i) {
    const int32_t v = static_cast<int32_t>(static_cast<uint32_t>(rng.next()));
    ASSERT_EQ(zigzag_decode(zigzag_encode(v)), v);
  }
}

// --- payload round trips ------------------------------------------------------------------------

TEST(SnapshotCodec, FieldSizesEqualTheRecordSizes) {
  const QuantizationConfig config;
  const QuantizationLimits l = derive_limits(config);
  Rng rng(5);
  for (int i = 0; i < 2000; ++i) {
    const QuantizedState base = random_state(rng, config);
    const QuantizedState s = rng.below(8) == 0 ? base : random_state(rng, config);
    const ObjectID id{rng.below(1000), 1 + rng.below(rng.below(2) == 0 ? 3u : 0xFFFFFFF0u)};
    const ObjectDescription desc{BodyKind::Dynamic, ShapeKind::Sphere, {0.5f, 0.5f, 0.5f}, rng.below(2) == 0};
    const uint32_t distance = 1 + rng.below(rng.below(2) == 0 ? 8u : kMaxBaselineDistance);
    ASSERT_EQ(delta_body_bits(distance, base, s, l), record_body_bits(delta(id, base, distance, s), l));
    ASSERT_EQ(entry_body_bits(id.generation, desc, s, l), record_body_bits(entry(id, s, desc), l));
  }
  EXPECT_EQ(exit_body_bits(), record_body_bits(exit_record(3), l));
}

// updated_positions() points at each updated object, whether the payload kept the view's
// membership (in-place updates) or changed it (the merge).
TEST(SnapshotCodec, UpdatedPositionsPointAtTheUpdatedObjects) {
  const QuantizationConfig config;
  Rng rng(6);
  SnapshotReceiver rx(config);
  std::vector<SnapshotRecord> records;
  std::map<uint32_t, std::pair<uint32_t, QuantizedState>> held;  // index -> (sequence, state)
  for (uint32_t sequence = 1; sequence <= 60; ++sequence) {
    records.clear();
    const bool membership = sequence % 3 == 1;
    for (uint32_t index = 0; index < 24; ++index) {
      const auto it = held.find(index);
      if (it == held.end()) {
        if (membership && rng.below(2) == 0) records.push_back(entry(ObjectID{index, 1}, random_state(rng, config)));
      } else if (membership && rng.below(6) == 0) {
        records.push_back(exit_record(index));
      } else if (rng.below(2) == 0) {
        records.push_back(delta(ObjectID{index, 1}, it->second.second, sequence - it->second.first, random_state(rng, config)));
      }
    }
    ASSERT_EQ(rx.apply(sequence, sequence, encode(records)), SnapshotError::None);
    for (const SnapshotRecord& r : records) {
      if (r.kind == RecordKind::Exit) held.erase(r.id.index);
      else held[r.id.index] = {sequence, r.state};
    }
    ASSERT_EQ(rx.updated_positions().size(), rx.updated().size());
    for (size_t k = 0; k < rx.updated().size(); ++k) {
      ASSERT_LT(rx.updated_positions()[k], rx.objects().size());
      EXPECT_EQ(rx.objects()[rx.updated_positions()[k]].id, rx.updated()[k]) << "sequence " << sequence;
    }
  }
  EXPECT_GT(held.size(), 0u);
}

TEST(SnapshotCodec, AnEmptyPayloadIsTheFiveByteHeader) {
  const Bytes payload = encode({});
  EXPECT_EQ(payload.size(), kSnapshotHeaderBytes);
  EXPECT_EQ(payload_header_bits(0), 36u);
  SnapshotReceiver rx{QuantizationConfig{}};
  EXPECT_EQ(rx.tick(), 0u);
  ASSERT_EQ(rx.apply(7, 1234, payload), SnapshotError::None);
  EXPECT_EQ(rx.tick(), 1234u);
  EXPECT_TRUE(rx.objects().empty());
  EXPECT_EQ(uncompressed_snapshot_bytes(901), 901u * 61u);
}

TEST(SnapshotCodec, EntryDeltaAndExitRoundTripThroughTheReceiver) {
  const QuantizationConfig config;
  const QuantizationLimits limits = derive_limits(config);
  const ObjectDescription box{BodyKind::Dynamic, ShapeKind::Box, {0.25f, 0.25f, 0.25f}, false};
  const ObjectDescription ground{BodyKind::Static, ShapeKind::Plane, {0, 0, 0}, false};
  const impulse::Quat tilt = normalize(impulse::Quat{0.1f, -0.2f, 0.05f, 0.97f});
  const QuantizedState a1 = quantize_state({1, 0.25f, 2}, tilt, {1, 0, -2}, {0, 3, 0}, false, config);
  const QuantizedState g = quantize_state({0, 0, 0}, {}, {}, {}, true, config);
  const ObjectID a{3, 1}, plane{0, 1};

  SnapshotReceiver rx(config);
  const SnapshotRecord first[] = {entry(plane, g, ground), entry(a, a1, box)};
  ASSERT_EQ(rx.apply(10, 100, encode(first)), SnapshotError::None);
  ASSERT_EQ(rx.objects().size(), 2u);
  EXPECT_EQ(rx.objects()[0].id, plane);
  EXPECT_EQ(rx.objects()[1].id, a);
  EXPECT_EQ(std::vector<ObjectID>(rx.entered().begin(), rx.entered().end()), (std::vector<ObjectID>{plane, a}));
  const SnapshotObject* obj = rx.find(a);
  ASSERT_NE(obj, nullptr);
  const DequantizedState d = dequantize_state(a1, config);
  EXPECT_EQ(obj->position, d.position);
  EXPECT_EQ(obj->orientation, d.orientation);
  EXPECT_EQ(obj->velocity, d.linear_velocity);
  EXPECT_EQ(obj->angular_velocity, d.angular_velocity);
  EXPECT_EQ(obj->dims, box.dims);
  EXPECT_EQ(obj->kind, BodyKind::Dynamic);
  EXPECT_EQ(obj->shape, ShapeKind::Box);
  EXPECT_FALSE(obj->at_rest);
  EXPECT_NEAR(obj->position.x, 1.0f, 1.0f / 1024);
  EXPECT_EQ(rx.find(ObjectID{3, 2}), nullptr) << "another generation is another object";
  EXPECT_EQ(*rx.find_state(plane), g);

  // Seq 12 (11 was lost): a delta against seq 10, then the plane is left alone.
  QuantizedState a2 = a1;
  a2.position[0] += 17;
  a2.linear_velocity[1] -= 21;
  const SnapshotRecord second[] = {delta(a, a1, 2, a2)};
  ASSERT_EQ(rx.apply(12, 102, encode(second)), SnapshotError::None);
  EXPECT_EQ(*rx.find_state(a), a2);
  EXPECT_EQ(std::vector<ObjectID>(rx.updated().begin(), rx.updated().end()), std::vector<ObjectID>{a});
  EXPECT_TRUE(rx.entered().empty());

  // A delta may still use the older baseline (seq 10) while seq 12 is held too.
  QuantizedState a3 = a1;
  a3.at_rest = 1;
  for (int i = 0; i < 3; ++i) a3.linear_velocity[i] = a3.angular_velocity[i] = 0;
  const SnapshotRecord third[] = {delta(a, a1, 3, a3), exit_record(7)};  // exit of an index not held: no-op
  ASSERT_EQ(rx.apply(13, 103, encode(third)), SnapshotError::None);
  EXPECT_EQ(*rx.find_state(a), a3);
  EXPECT_TRUE(rx.find(a)->at_rest);
  EXPECT_EQ(rx.find(a)->velocity, (impulse::Vec3{}));
  EXPECT_TRUE(rx.exited().empty());

  // Stale and repeated sequences are refused and change nothing.
  const SnapshotReceiver before = rx;
  EXPECT_EQ(rx.apply(13, 999, encode({})), SnapshotError::Stale);
  EXPECT_EQ(rx.apply(11, 999, encode({})), SnapshotError::Stale);
  EXPECT_TRUE(same_view(rx, before));

  // An entry for a new generation at index 3 replaces the old object; the plane exits.
  const ObjectID a_new{3, 2};
  const SnapshotRecord fourth[] = {exit_record(0), entry(a_new, a1, box)};
  ASSERT_EQ(rx.apply(14, 104, encode(fourth)), SnapshotError::None);
  ASSERT_EQ(rx.objects().size(), 1u);
  EXPECT_EQ(rx.objects()[0].id, a_new);
  EXPECT_EQ(std::vector<ObjectID>(rx.exited().begin(), rx.exited().end()), (std::vector<ObjectID>{plane, a}));
  EXPECT_EQ(std::vector<ObjectID>(rx.entered().begin(), rx.entered().end()), std::vector<ObjectID>{a_new});
  // Its ring restarted: a delta against a state of the old object is refused.
  const SnapshotRecord stale_baseline[] = {delta(a_new, a2, 3, a1)};  // seq 12's state
  EXPECT_EQ(rx.apply(15, 105, encode(stale_baseline)), SnapshotError::UnknownBaseline);
  // A delta for an index not held is refused too.
  const SnapshotRecord not_held[] = {delta(ObjectID{9, 1}, a1, 1, a2)};
  EXPECT_EQ(rx.apply(15, 105, encode(not_held)), SnapshotError::UnknownBaseline);

  (void)limits;
  rx.reset();
  EXPECT_TRUE(rx.objects().empty());
  EXPECT_FALSE(rx.has_applied());
  EXPECT_EQ(rx.apply(1, 1, encode({})), SnapshotError::None) << "after reset any sequence is new";
}

TEST(SnapshotCodec, SequencesCompareWithSerialArithmetic) {
  SnapshotReceiver rx{QuantizationConfig{}};
  ASSERT_EQ(rx.apply(0xFFFFFFF0u, 1, encode({})), SnapshotError::None);
  EXPECT_EQ(rx.apply(0xFFFFFFEFu, 1, encode({})), SnapshotError::Stale);
  EXPECT_EQ(rx.apply(5, 2, encode({})), SnapshotError::None) << "wrapped around: newer";
  EXPECT_EQ(rx.apply(0xFFFFFFFFu, 3, encode({})), SnapshotError::Stale);
}

TEST(SnapshotCodec, DeltasDecodedAgainstRandomBaselinesEqualTheFullState) {
  const QuantizationConfig config;
  const QuantizationLimits limits = derive_limits(config);
  Rng rng(42);
  uint64_t checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    SnapshotReceiver rx(config);
    // A few objects; every payload changes a random subset, each against a random baseline from
    // the states the receiver holds (as a sender with random acks would).
    const uint32_t count = 1 + rng.below(12);
    std::vector<ObjectID> ids;
    std::vector<std::vector<std::pair<uint32_t, QuantizedState>>> history(count);  // (sequence, state)
    std::vector<SnapshotRecord> records;
    uint32_t sequence = static_cast<uint32_t>(rng.next());
    uint32_t index = 0;
    for (uint32_t i = 0; i < count; ++i) {
      index += rng.below(3) == 0 ? 1 + rng.below(5000) : 1;
      ids.push_back(ObjectID{index, 1 + rng.below(1000)});
      const QuantizedState s = random_state(rng, config);
      records.push_back(entry(ids.back(), s));
      history[i].emplace_back(sequence, s);
    }
    ASSERT_EQ(rx.apply(sequence, 1, encode(records)), SnapshotError::None);
    for (int step = 0; step < 80; ++step) {
      sequence += 1 + rng.below(3);
      records.clear();
      std::vector<std::pair<uint32_t, QuantizedState>> sent;
      for (uint32_t i = 0; i < count; ++i) {
        if (rng.below(3) == 0) continue;
        // The ring holds the last kSnapshotBaselineWindow states.
        const size_t held = std::min<size_t>(history[i].size(), kSnapshotBaselineWindow);
        const auto& [base_seq, base] = history[i][history[i].size() - 1 - rng.below(static_cast<uint32_t>(held))];
        QuantizedState next = rng.below(10) == 0 ? random_state(rng, config) : perturb(rng, base, limits);
        if (next == base) next.position[0] = next.position[0] > 0 ? next.position[0] - 1 : next.position[0] + 1;
        records.push_back(delta(ids[i], base, sequence - base_seq, next));
        sent.emplace_back(i, next);
      }
      ASSERT_EQ(rx.apply(sequence, 2 + static_cast<uint64_t>(step), encode(records)), SnapshotError::None);
      for (const auto& [i, s] : sent) {
        ASSERT_EQ(*rx.find_state(ids[i]), s);
        const DequantizedState d = dequantize_state(s, config);
        ASSERT_EQ(rx.find(ids[i])->position, d.position);
        ASSERT_EQ(rx.find(ids[i])->orientation, d.orientation);
        history[i].emplace_back(sequence, s);
        ++checked;
      }
      ASSERT_EQ(rx.updated().size(), sent.size());
    }
  }
  EXPECT_GT(checked, 10000u);
}

TEST(SnapshotCodec, ABaselineOlderThanTheRingIsUnknown) {
  const QuantizationConfig config;
  SnapshotReceiver rx(config);
  Rng rng(5);
  const ObjectID id{1, 1};
  QuantizedState s0 = random_state(rng, config);
  const SnapshotRecord first[] = {entry(id, s0)};
  ASSERT_EQ(rx.apply(100, 1, encode(first)), SnapshotError::None);
  QuantizedState previous = s0;
  for (uint32_t k = 1; k < kSnapshotBaselineWindow; ++k) {
    QuantizedState s = previous;
    s.position[1] += 3;
    const SnapshotRecord d[] = {delta(id, previous, 1, s)};
    ASSERT_EQ(rx.apply(100 + k, 1, encode(d)), SnapshotError::None);
    previous = s;
  }
  // 32 states held: seq 100 is the oldest and still usable.
  QuantizedState s = s0;
  s.position[2] += 5;
  const SnapshotRecord oldest[] = {delta(id, s0, 32, s)};
  ASSERT_EQ(rx.apply(132, 1, encode(oldest)), SnapshotError::None);
  // That pushed seq 100 out.
  const SnapshotRecord gone[] = {delta(id, s0, 33, s0)};
  EXPECT_EQ(rx.apply(133, 1, encode(gone)), SnapshotError::UnknownBaseline);
}

// --- sizes and the documented worked example ------------------------------------------------------

TEST(SnapshotCodec, RecordSizesMatchTheEncoderAndTheMinimumBudget) {
  QuantizationConfig widest;
  widest.world_bound_m = 32768.0f;
  widest.orientation_bits = 15;
  widest.max_linear_speed = 255.0f;
  widest.max_angular_speed = 255.0f;
  ASSERT_TRUE(widest.validate(nullptr));
  const QuantizationLimits l = derive_limits(widest);
  SnapshotRecord big = entry(ObjectID{kMaxSnapshotObjectIndex - 1, 0xFFFFFFFFu},
                             quantize_state({1, 2, 3}, {}, {4, 5, 6}, {1, 1, 1}, false, widest));
  const uint32_t bits = payload_header_bits(1) + index_gap_bits(kMaxSnapshotObjectIndex - 1) + record_body_bits(big, l);
  EXPECT_EQ(bits, 36u + 428u);  // a box; a hull adds its 16-bit asset id
  SnapshotRecord hull = big;
  hull.desc.shape = ShapeKind::Hull;
  hull.desc.asset = 4095;
  EXPECT_EQ(payload_header_bits(1) + index_gap_bits(kMaxSnapshotObjectIndex - 1) + record_body_bits(hull, l),
            36u + 444u);
  EXPECT_LE(36u + 444u, 8 * kMinSnapshotBudgetBytes);
  const SnapshotRecord records[] = {big};
  Bytes out, scratch;
  ASSERT_TRUE(encode_snapshot_payload(records, l, &out, &scratch));
  EXPECT_EQ(out.size(), (bits + 7) / 8);
  EXPECT_LE(out.size(), kMinSnapshotBudgetBytes);
  SnapshotReceiver rx(widest);
  ASSERT_EQ(rx.apply(1, 1, out), SnapshotError::None);
  EXPECT_EQ(*rx.find_state(big.id), big.state);

  // The encoder refuses caller bugs: unsorted, out-of-range index or state, null generation.
  const SnapshotRecord unsorted[] = {exit_record(5), exit_record(5)};
  EXPECT_FALSE(encode_snapshot_payload(unsorted, l, &out, &scratch));
  EXPECT_TRUE(out.empty());
  const SnapshotRecord too_far[] = {exit_record(kMaxSnapshotObjectIndex)};
  EXPECT_FALSE(encode_snapshot_payload(too_far, l, &out, &scratch));
  SnapshotRecord null_generation = big;
  null_generation.id.generation = 0;
  EXPECT_FALSE(encode_snapshot_payload(std::span(&null_generation, 1), l, &out, &scratch));
  SnapshotRecord bad_state = big;
  bad_state.state.orientation_largest = 4;
  EXPECT_FALSE(encode_snapshot_payload(std::span(&bad_state, 1), l, &out, &scratch));
}

// The example of docs/protocol_snapshot_section.md: a box entry at index 2, a delta of a moving
// cube at index 5 against the state sent 2 packets earlier, an exit at index 9. Changing the
// format changes these bytes: update the document with them.
TEST(SnapshotCodec, WorkedExampleOfTheProtocolDocument) {
  const QuantizationConfig config;
  const QuantizedState box = quantize_state({1.5f, 0.25f, -2.0f}, {}, {}, {}, true, config);
  const impulse::Quat spin = normalize(impulse::Quat{0.0f, 0.38268343f, 0.0f, 0.92387953f});  // 45 deg about +Y
  const QuantizedState before = quantize_state({-4.0f, 0.25f, 3.0f}, spin, {2.0f, 0.0f, 0.0f}, {0, 1.0f, 0}, false, config);
  const QuantizedState after =
      quantize_state({-4.0f + 2.0f / 30, 0.25f, 3.0f}, spin, {2.0f, -0.125f, 0.0f}, {0, 1.0f, 0}, false, config);
  const SnapshotRecord records[] = {
      entry(ObjectID{2, 1}, box, ObjectDescription{BodyKind::Dynamic, ShapeKind::Box, {0.25f, 0.25f, 0.25f}, false}),
      delta(ObjectID{5, 1}, before, 2, after),
      exit_record(9),
  };
  const Bytes payload = encode(records);
  std::printf("[ figures  ] worked example (%zu bytes):", payload.size());
  for (uint8_t b : payload) std::printf(" %02x", b);
  std::printf("\n[ figures  ] box state: position %d %d %d, orientation %u (%u %u %u)\n", box.position[0],
              box.position[1], box.position[2], box.orientation_largest, box.orientation[0], box.orientation[1],
              box.orientation[2]);
  std::printf("[ figures  ] cube before: position %d %d %d, velocity %d %d %d; after: position %d, velocity y %d\n",
              before.position[0], before.position[1], before.position[2], before.linear_velocity[0],
              before.linear_velocity[1], before.linear_velocity[2], after.position[0], after.linear_velocity[1]);
  const Bytes expected = {0xf8, 0xf7, 0x76, 0x78, 0xd7, 0x12, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x80,
                          0x3e, 0x00, 0x00, 0x80, 0x3e, 0x01, 0x06, 0x10, 0x20, 0x00, 0x02, 0xe0, 0x3f,
                          0x03, 0x08, 0x20, 0x80, 0x35, 0x49, 0x85, 0x60, 0xf0, 0x84, 0x0f};
  EXPECT_EQ(payload, expected);

  SnapshotReceiver rx(config);
  const SnapshotRecord setup[] = {entry(ObjectID{5, 1}, before)};
  ASSERT_EQ(rx.apply(40, 1, encode(setup)), SnapshotError::None);
  ASSERT_EQ(rx.apply(42, 2, payload), SnapshotError::None);
  EXPECT_EQ(*rx.find_state(ObjectID{5, 1}), after);
  EXPECT_EQ(*rx.find_state(ObjectID{2, 1}), box);
}

// --- corruption -----------------------------------------------------------------------------------

struct CorruptionFixture {
  QuantizationConfig config;
  SnapshotReceiver base{QuantizationConfig{}};  // holds the baselines, before the payload
  SnapshotReceiver applied{QuantizationConfig{}};  // after the intact payload
  Bytes payload;
  uint32_t sequence = 0;

  CorruptionFixture() {
    Rng rng(77);
    const QuantizationLimits l = derive_limits(config);
    std::vector<SnapshotRecord> first;
    std::vector<QuantizedState> states;
    for (uint32_t i = 0; i < 6; ++i) {
      states.push_back(random_state(rng, config));
      first.push_back(entry(ObjectID{i * 3, 1 + i}, states.back(),
                            ObjectDescription{BodyKind::Dynamic, ShapeKind::Sphere, {0.5f, 0.5f, 0.5f}, i == 2}));
    }
    EXPECT_EQ(base.apply(100, 1, encode(first)), SnapshotError::None);
    // A second state for objects 0 and 1 so deltas have two different baselines to choose from.
    std::vector<SnapshotRecord> second;
    std::vector<QuantizedState> newer = states;
    for (uint32_t i = 0; i < 2; ++i) {
      newer[i] = perturb(rng, states[i], l);
      if (newer[i] == states[i]) newer[i].position[0] += 1;
      second.push_back(delta(ObjectID{i * 3, 1 + i}, states[i], 1, newer[i]));
    }
    EXPECT_EQ(base.apply(101, 2, encode(second)), SnapshotError::None);
    // The payload under test: deltas against both baselines, an entry, a replacement, an exit.
    sequence = 103;
    std::vector<SnapshotRecord> records;
    QuantizedState s0 = perturb(rng, newer[0], l);
    if (s0 == newer[0]) s0.position[1] += 1;
    records.push_back(delta(ObjectID{0, 1}, newer[0], 2, s0));
    QuantizedState s1 = perturb(rng, states[1], l);
    if (s1 == states[1]) s1.position[2] += 1;
    records.push_back(delta(ObjectID{3, 2}, states[1], 3, s1));
    records.push_back(exit_record(6));
    records.push_back(entry(ObjectID{9, 7}, random_state(rng, config)));  // replaces {9, 4}
    records.push_back(entry(ObjectID{40, 1}, random_state(rng, config),
                            ObjectDescription{BodyKind::Kinematic, ShapeKind::Capsule, {0.3f, 0.6f, 0.3f}, true}));
    payload = encode(records);
    applied = base;
    EXPECT_EQ(applied.apply(sequence, 3, payload), SnapshotError::None);
  }
};

TEST(SnapshotCodec, EverySingleBitFlipIsRejectedWithoutTouchingTheView) {
  const CorruptionFixture f;
  ASSERT_GT(f.payload.size(), 60u);
  uint32_t accepted = 0;
  uint32_t by_error[static_cast<size_t>(SnapshotError::Count)] = {};
  for (size_t bit = 0; bit < f.payload.size() * 8; ++bit) {
    Bytes corrupted = f.payload;
    corrupted[bit / 8] = static_cast<uint8_t>(corrupted[bit / 8] ^ (1u << (bit % 8)));
    SnapshotReceiver rx = f.base;
    const SnapshotError e = rx.apply(f.sequence, 3, corrupted);
    ++by_error[static_cast<size_t>(e)];
    if (e == SnapshotError::None) {
      // Only acceptable if the decoded content is identical (e.g. a distance flipped to another
      // baseline with the same state); this fixture's baselines all differ, so none is expected.
      ++accepted;
      EXPECT_TRUE(same_view(rx, f.applied)) << "bit " << bit;
    } else {
      ASSERT_TRUE(same_view(rx, f.base)) << "bit " << bit << " changed the view: " << to_string(e);
    }
  }
  EXPECT_EQ(accepted, 0u);
  std::printf("[ figures  ] %zu single-bit flips:", f.payload.size() * 8);
  for (size_t e = 0; e < static_cast<size_t>(SnapshotError::Count); ++e)
    if (by_error[e] != 0) std::printf(" %s %u,", to_string(static_cast<SnapshotError>(e)), by_error[e]);
  std::printf("\n");
  EXPECT_GT(by_error[static_cast<size_t>(SnapshotError::ChecksumMismatch)], 0u);
}

TEST(SnapshotCodec, EveryTruncationAndAppendedByteIsRejected) {
  const CorruptionFixture f;
  for (size_t length = 0; length < f.payload.size(); ++length) {
    SnapshotReceiver rx = f.base;
    const SnapshotError e = rx.apply(f.sequence, 3, std::span(f.payload).first(length));
    ASSERT_NE(e, SnapshotError::None) << length;
    ASSERT_TRUE(same_view(rx, f.base));
  }
  for (uint32_t extra : {0x00u, 0x01u, 0xFFu}) {
    Bytes longer = f.payload;
    longer.push_back(static_cast<uint8_t>(extra));
    SnapshotReceiver rx = f.base;
    EXPECT_EQ(rx.apply(f.sequence, 3, longer), SnapshotError::BadHeader);
    EXPECT_TRUE(same_view(rx, f.base));
  }
}

TEST(SnapshotCodec, RandomBytesAreRejectedWithoutTouchingTheView) {
  const CorruptionFixture f;
  Rng rng(99);
  for (int i = 0; i < 30000; ++i) {
    Bytes junk(rng.below(160));
    for (uint8_t& b : junk) b = static_cast<uint8_t>(rng.next());
    if (i % 3 == 0 && junk.size() > 8) std::copy(f.payload.begin(), f.payload.begin() + 4, junk.begin());
    SnapshotReceiver rx = f.base;
    ASSERT_NE(rx.apply(f.sequence, 3, junk), SnapshotError::None);
    ASSERT_TRUE(same_view(rx, f.base));
  }
}

// Hand-made payloads (checksum left 0: every structural check comes before the checksum).
struct RawPayload {
  Bytes bytes = Bytes(4, 0);
  BitWriter w{&bytes};
};

TEST(SnapshotCodec, MalformedRecordsAreRejectedWithTheirReason) {
  const QuantizationConfig config;
  const QuantizationLimits l = derive_limits(config);
  SnapshotReceiver held(config);
  Rng rng(3);
  const QuantizedState s = random_state(rng, config);
  const SnapshotRecord one[] = {entry(ObjectID{0, 1}, s)};
  ASSERT_EQ(held.apply(1, 1, encode(one)), SnapshotError::None);

  auto expect_error = [&](RawPayload& p, SnapshotError expected, const char* what) {
    SnapshotReceiver rx = held;
    p.w.finish();
    EXPECT_EQ(rx.apply(2, 2, p.bytes), expected) << what;
    EXPECT_TRUE(same_view(rx, held)) << what;
  };
  auto entry_head = [&](RawPayload& p, uint32_t kind, uint32_t shape, float dim) {
    write_exp_golomb(p.w, 1, 3);  // one record
    write_exp_golomb(p.w, 4, 2);  // index 4
    p.w.write_bit(true);
    p.w.write_bit(false);
    write_exp_golomb(p.w, 0, 0);  // generation 1
    p.w.write_bits(kind, 2);
    p.w.write_bits(shape, 3);
    p.w.write_bit(false);
    for (int i = 0; i < 3; ++i) p.w.write_bits(std::bit_cast<uint32_t>(dim), 32);
  };
  auto full_state = [&](RawPayload& p) {
    p.w.write_bit(true);  // at rest
    for (int i = 0; i < 3; ++i) p.w.write_bits(static_cast<uint32_t>(l.position_max), l.position_bits);
    p.w.write_bits(3, 2);
    for (int i = 0; i < 3; ++i) p.w.write_bits(512, l.orientation_bits);
  };
  auto delta_head = [&](RawPayload& p) {
    write_exp_golomb(p.w, 1, 3);
    write_exp_golomb(p.w, 0, 2);  // index 0
    p.w.write_bit(false);
    write_exp_golomb(p.w, 0, 2);  // distance 1
    p.w.write_bit(s.at_rest != 0);
  };

  { RawPayload p; entry_head(p, 3, 1, 0.5f); full_state(p); expect_error(p, SnapshotError::BadRecord, "body kind 3"); }
  { RawPayload p; entry_head(p, 0, 1, std::numeric_limits<float>::quiet_NaN()); full_state(p);
    expect_error(p, SnapshotError::BadRecord, "NaN dims"); }
  { RawPayload p; entry_head(p, 0, 1, -1.0f); full_state(p); expect_error(p, SnapshotError::BadRecord, "negative dims"); }
  { RawPayload p; entry_head(p, 0, 1, 0.5f); p.w.write_bit(true);
    p.w.write_bits(2u * static_cast<uint32_t>(l.position_max) + 1, l.position_bits);  // beyond the bound
    p.w.write_bits(0, 31); p.w.write_bits(0, 31); p.w.write_bits(0, 32);
    expect_error(p, SnapshotError::BadRecord, "position beyond the bound"); }
  { RawPayload p; entry_head(p, 0, 1, 0.5f); full_state(p); p.w.write_bits(0, 8);
    expect_error(p, SnapshotError::BadHeader, "a byte after the last record"); }
  { RawPayload p; entry_head(p, 0, 1, 0.5f); full_state(p);
    const size_t pad = 8 - p.w.bit_count() % 8;
    ASSERT_GT(pad, 0u); ASSERT_LT(pad, 8u);
    p.w.write_bits(1u << (pad - 1), static_cast<unsigned>(pad));
    expect_error(p, SnapshotError::BadHeader, "non-zero padding"); }
  { RawPayload p; entry_head(p, 0, 1, 0.5f); full_state(p);
    expect_error(p, SnapshotError::ChecksumMismatch, "well formed, wrong checksum"); }
  { RawPayload p; write_exp_golomb(p.w, 1000, 3); p.w.write_bits(0, 32);
    expect_error(p, SnapshotError::BadHeader, "more records than bits"); }
  { RawPayload p; write_exp_golomb(p.w, 1, 3); write_exp_golomb(p.w, kMaxSnapshotObjectIndex, 2);
    p.w.write_bits(3, 2); expect_error(p, SnapshotError::TooManyObjects, "index at the limit"); }
  { RawPayload p; write_exp_golomb(p.w, 2, 3); write_exp_golomb(p.w, kMaxSnapshotObjectIndex - 1, 2);
    p.w.write_bits(3, 2); write_exp_golomb(p.w, 0, 2); p.w.write_bits(3, 2);
    expect_error(p, SnapshotError::TooManyObjects, "gap past the limit"); }
  { RawPayload p; delta_head(p); p.w.write_bit(true);
    for (int i = 0; i < 3; ++i) write_exp_golomb(p.w, 0, 4);  // "changed" with three zero deltas
    expect_error(p, SnapshotError::BadRecord, "non-canonical position group"); }
  { RawPayload p; delta_head(p); p.w.write_bit(false); p.w.write_bit(true); p.w.write_bit(false);
    p.w.write_bits(s.orientation_largest, 2);  // "new largest" that is the baseline's
    for (int i = 0; i < 3; ++i) p.w.write_bits(0, l.orientation_bits);
    if (s.at_rest == 0) { p.w.write_bit(false); p.w.write_bit(false); }  // velocities unchanged: one fault only
    expect_error(p, SnapshotError::BadRecord, "non-canonical orientation"); }
  { RawPayload p; delta_head(p); p.w.write_bit(true);
    write_exp_golomb(p.w, zigzag_encode(3 * l.position_max), 4);  // lands beyond the bound
    write_exp_golomb(p.w, 0, 4); write_exp_golomb(p.w, 0, 4);
    p.w.write_bit(false);                                      // orientation unchanged
    if (s.at_rest == 0) { p.w.write_bit(false); p.w.write_bit(false); }  // velocities unchanged
    expect_error(p, SnapshotError::BadRecord, "delta beyond the bound"); }
  { RawPayload p; write_exp_golomb(p.w, 1, 3); write_exp_golomb(p.w, 0, 2); p.w.write_bit(false);
    write_exp_golomb(p.w, kMaxBaselineDistance, 2);
    expect_error(p, SnapshotError::BadRecord, "distance beyond the maximum"); }
  { RawPayload p; write_exp_golomb(p.w, 1, 3); write_exp_golomb(p.w, 0, 2); p.w.write_bit(false);
    write_exp_golomb(p.w, 5, 2);
    p.w.write_bit(true); p.w.write_bit(false); p.w.write_bit(false);  // a complete body: at rest, unchanged
    expect_error(p, SnapshotError::UnknownBaseline, "baseline not in the ring"); }

  // An unusable config makes every payload a BadHeader.
  QuantizationConfig broken;
  broken.orientation_bits = 40;
  SnapshotReceiver rx(broken);
  EXPECT_EQ(rx.apply(1, 1, encode({})), SnapshotError::BadHeader);
  for (size_t e = 0; e <= static_cast<size_t>(SnapshotError::Count); ++e)
    EXPECT_STRNE(to_string(static_cast<SnapshotError>(e)), "");
}


// Protocols 8 and 9: a hull, mesh or heightfield entry carries its 16-bit asset id after the
// sensor bit; other kinds do not.
TEST(SnapshotCodec, AssetEntriesCarryTheirAssetId) {
  const QuantizationConfig config;
  const QuantizedState s = quantize_state({1.0f, 2.0f, 3.0f}, {}, {}, {}, true, config);
  const ObjectDescription hull{BodyKind::Static, ShapeKind::Hull, {0.5f, 0.4f, 0.45f}, false, 4095};
  const ObjectDescription box{BodyKind::Dynamic, ShapeKind::Box, {0.5f, 0.5f, 0.5f}, false, 0};
  const ObjectDescription mesh{BodyKind::Static, ShapeKind::Mesh, {40.0f, 3.0f, 40.0f}, false, 4096};
  const ObjectDescription field{BodyKind::Static, ShapeKind::HeightField, {256.0f, 20.0f, 256.0f}, false, 65535};
  const SnapshotRecord records[] = {entry(ObjectID{1, 1}, s, hull), entry(ObjectID{2, 1}, s, box),
                                    entry(ObjectID{3, 1}, s, mesh), entry(ObjectID{4, 1}, s, field)};
  SnapshotReceiver rx(config);
  ASSERT_EQ(rx.apply(1, 1, encode(records)), SnapshotError::None);
  const ObjectDescription* want[] = {&hull, &box, &mesh, &field};
  for (uint32_t i = 0; i < 4; ++i) {
    const SnapshotObject* o = rx.find(ObjectID{i + 1, 1});
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->shape, want[i]->shape);
    EXPECT_EQ(o->asset, want[i]->asset);
    EXPECT_EQ(o->dims, want[i]->dims);
  }
  // An asset's entry is 16 bits longer than the box's; the eighth kind (7, a cylinder since
  // protocol 11) carries no asset id.
  const QuantizationLimits l = derive_limits(config);
  EXPECT_EQ(record_body_bits(records[0], l), record_body_bits(records[1], l) + 16);
  EXPECT_EQ(record_body_bits(records[2], l), record_body_bits(records[1], l) + 16);
  EXPECT_EQ(record_body_bits(records[3], l), record_body_bits(records[1], l) + 16);
  SnapshotRecord cylinder = records[1];
  cylinder.desc.shape = ShapeKind::Cylinder;
  cylinder.desc.dims = {0.3f, 0.45f, 0.3f};
  EXPECT_EQ(record_body_bits(cylinder, l), record_body_bits(records[1], l));
  Bytes out, scratch;
  ASSERT_TRUE(encode_snapshot_payload(std::span(&cylinder, 1), l, &out, &scratch));
  SnapshotReceiver rx2(config);
  ASSERT_EQ(rx2.apply(1, 1, out), SnapshotError::None);
  const SnapshotObject* o = rx2.find(cylinder.id);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->shape, ShapeKind::Cylinder);
  EXPECT_EQ(o->dims, (impulse::Vec3{0.3f, 0.45f, 0.3f}));
}

}  // namespace
}  // namespace impulse::wire
