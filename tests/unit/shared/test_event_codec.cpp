// Collision event block codec (protocol 4): octahedral normals within their proven angle bound,
// random events round-trip exactly (ids, ticks, sequences, types) or within the stated bounds
// (point, normal), the worst-case block bound holds and is reached, every bit flip and truncation
// of a real block is rejected, hostile blocks with a valid checksum are rejected with their
// reason, and the worked example of docs/PROTOCOL.md is pinned byte for byte.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "shared/wire/bitstream.h"
#include "shared/wire/codec.h"
#include "shared/wire/event_codec.h"
#include "shared/hex.h"
#include "tests/support/doc_vectors.h"
#include "tests/support/rng.h"

namespace impulse::wire {
namespace {

using ::impulse::test::Rng;
using Bytes = std::vector<uint8_t>;

constexpr double kPi = 3.14159265358979323846;

double angle_between(impulse::Vec3 a, impulse::Vec3 b) {
  const double d = static_cast<double>(a.x) * b.x + static_cast<double>(a.y) * b.y + static_cast<double>(a.z) * b.z;
  const double la = std::sqrt(static_cast<double>(a.x) * a.x + static_cast<double>(a.y) * a.y + static_cast<double>(a.z) * a.z);
  const double lb = std::sqrt(static_cast<double>(b.x) * b.x + static_cast<double>(b.y) * b.y + static_cast<double>(b.z) * b.z);
  // atan2 of |cross| and dot: accurate for tiny angles, where acos is not.
  const double cx = static_cast<double>(a.y) * b.z - static_cast<double>(a.z) * b.y;
  const double cy = static_cast<double>(a.z) * b.x - static_cast<double>(a.x) * b.z;
  const double cz = static_cast<double>(a.x) * b.y - static_cast<double>(a.y) * b.x;
  return std::atan2(std::sqrt(cx * cx + cy * cy + cz * cz) / (la * lb), d / (la * lb));
}

impulse::Vec3 round_trip(impulse::Vec3 n) {
  int32_t u = 0, v = 0;
  encode_octahedral_normal(n, &u, &v);
  EXPECT_LE(std::abs(u), kNormalMax);
  EXPECT_LE(std::abs(v), kNormalMax);
  return decode_octahedral_normal(u, v);
}

impulse::Vec3 random_unit(Rng& rng) {
  for (;;) {  // rejection sampling in the unit ball: uniform directions
    const impulse::Vec3 p{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)};
    const float l2 = dot(p, p);
    if (l2 > 1e-4f && l2 <= 1.0f) return p * (1.0f / std::sqrt(l2));
  }
}

CollisionEvent make_event(uint64_t tick, ObjectID a, ObjectID b, impulse::Vec3 point, impulse::Vec3 normal,
                          uint32_t sequence, ContactEventType type) {
  return CollisionEvent(tick, impulse::to_wire(a), impulse::to_wire(b), wire::Vec3(point.x, point.y, point.z),
                        wire::Vec3(normal.x, normal.y, normal.z), sequence, type);
}

Bytes encode(std::span<const CollisionEvent> events, const QuantizationConfig& config = {},
             std::span<const JointEventFields> joints = {}) {
  Bytes out;
  EXPECT_TRUE(encode_collision_events(events, config, &out, joints));
  return out;
}

/// A hand-written block body (after the checksum); finish() writes a valid checksum, so the
/// decoder's structural checks are what a test reaches.
struct RawBlock {
  Bytes bytes = Bytes(4, 0);
  BitWriter w{&bytes};
  Bytes finish() {
    w.finish();
    const uint32_t sum = XXH32(bytes.data() + 4, bytes.size() - 4, 0);
    for (int i = 0; i < 4; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(sum >> (8 * i));
    return bytes;
  }
};

/// The widest quantisation: 26-bit position fields (world bound 2^15 m at 2^-9 m).
QuantizationConfig widest_config() {
  QuantizationConfig c;
  c.world_bound_m = 32768.0f;
  c.position_fraction_bits = 9;
  return c;
}

// --- Octahedral normals -------------------------------------------------------------------------

TEST(OctahedralNormal, AxesAreExact) {
  const impulse::Vec3 axes[] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
  for (const impulse::Vec3& n : axes) EXPECT_EQ(round_trip(n), n);
}

TEST(OctahedralNormal, RoundTripErrorIsWithinTheProvenBound) {
  const double bound = max_normal_error_rad();
  EXPECT_NEAR(bound, 1.0363e-3, 1e-6);  // 0.0594 degrees, as documented
  Rng rng(41);
  double worst = 0.0;
  for (int i = 0; i < 300000; ++i) {
    const impulse::Vec3 n = random_unit(rng);
    const impulse::Vec3 d = round_trip(n);
    EXPECT_NEAR(length(d), 1.0f, 1e-6f);
    worst = std::max(worst, angle_between(n, d));
  }
  // Where the map stretches most: face centres (|P| = 1/sqrt3), the fold's edges and corners.
  for (int i = 0; i < 20000; ++i) {
    const float e = rng.uniform(-2e-3f, 2e-3f);
    const float f = rng.uniform(-2e-3f, 2e-3f);
    const float sx = i % 2 ? 1.0f : -1.0f, sy = i % 4 < 2 ? 1.0f : -1.0f, sz = i % 8 < 4 ? 1.0f : -1.0f;
    const impulse::Vec3 candidates[] = {normalize_or({sx * (1 + e), sy * (1 + f), sz}, {0, 0, 1}),
                                        normalize_or({sx * e, sy * (1 + f), sz * (1 - f)}, {0, 0, 1}),
                                        normalize_or({sx, sy * e, sz * f}, {0, 0, 1})};
    for (const impulse::Vec3& n : candidates) worst = std::max(worst, angle_between(n, round_trip(n)));
  }
  EXPECT_LE(worst, bound * 1.01);
  EXPECT_GT(worst, bound * 0.25) << "the bound should not be loose by more than 4x";
  RecordProperty("max_normal_error_deg", std::to_string(worst * 180.0 / kPi));
}

TEST(OctahedralNormal, EveryCodeDecodesToAFiniteUnitVector) {
  for (int32_t u = -kNormalMax; u <= kNormalMax; u += (u > -kNormalMax + 8 && u < kNormalMax - 8) ? 7 : 1) {
    for (int32_t v = -kNormalMax; v <= kNormalMax; v += (v > -kNormalMax + 8 && v < kNormalMax - 8) ? 7 : 1) {
      const impulse::Vec3 n = decode_octahedral_normal(u, v);
      ASSERT_TRUE(is_finite(n)) << u << " " << v;
      ASSERT_NEAR(length(n), 1.0f, 1e-6f) << u << " " << v;
    }
  }
}

TEST(OctahedralNormal, DegenerateAndUnnormalisedInputs) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const impulse::Vec3& n : {impulse::Vec3{0, 0, 0}, impulse::Vec3{kNaN, 0, 1}, impulse::Vec3{0, kInf, 0}}) {
    EXPECT_EQ(round_trip(n), (impulse::Vec3{0, 0, 1}));
  }
  // Only the direction is sent: huge, tiny and subnormal vectors keep theirs.
  for (const float scale : {1e30f, 1e-30f, 1e-40f, 3.0e38f}) {
    const impulse::Vec3 n{0.6f * scale, -0.8f * scale, 0.0f};
    EXPECT_LE(angle_between(n, round_trip(n)), max_normal_error_rad()) << scale;
  }
}

// --- Round trips -------------------------------------------------------------------------------

TEST(EventBlock, EmptyBlockIsFiveBytes) {
  const Bytes block = encode({});
  ASSERT_EQ(block.size(), kEmptyEventBlockBytes);
  std::vector<CollisionEvent> out(3);
  EXPECT_EQ(decode_collision_events(block, {}, &out), EventBlockError::None);
  EXPECT_TRUE(out.empty());
}

TEST(EventBlock, RandomEventsRoundTripWithinTheStatedBounds) {
  Rng rng(7);
  for (const QuantizationConfig& config : {QuantizationConfig{}, widest_config()}) {
    const float step = std::ldexp(1.0f, -config.position_fraction_bits);
    const float bound = config.world_bound_m;
    std::vector<CollisionEvent> events, decoded;
    for (int batch = 0; batch < 2000; ++batch) {
      events.clear();
      const uint32_t n = rng.below(kMaxEventsPerBlock + 1);
      uint32_t sequence = static_cast<uint32_t>(rng.next());
      uint64_t tick = rng.next() >> rng.below(64);
      for (uint32_t i = 0; i < n; ++i) {
        // Mostly what a server sends (consecutive sequences, close ticks), sometimes anything.
        const bool wild = rng.below(4) == 0;
        sequence = wild ? static_cast<uint32_t>(rng.next()) : sequence + 1 + rng.below(3);
        tick = wild ? rng.next() >> rng.below(64) : tick + rng.below(4);
        const ObjectID a{static_cast<uint32_t>(rng.next() >> rng.below(33)), static_cast<uint32_t>(rng.next())};
        const ObjectID b{static_cast<uint32_t>(rng.next() >> rng.below(33)), static_cast<uint32_t>(rng.next())};
        const impulse::Vec3 point{rng.uniform(-bound, bound), rng.uniform(-bound, bound), rng.uniform(-bound, bound)};
        events.push_back(make_event(tick, a, b, point, random_unit(rng), sequence,
                                    rng.below(2) ? ContactEventType::Begin : ContactEventType::End));
      }
      const Bytes block = encode(events, config);
      ASSERT_EQ(block.size(), event_block_bytes(events, config));
      ASSERT_LE(block.size(), max_event_block_bytes(n));
      ASSERT_EQ(decode_collision_events(block, config, &decoded), EventBlockError::None);
      ASSERT_EQ(decoded.size(), events.size());
      for (size_t i = 0; i < events.size(); ++i) {
        const CollisionEvent& e = events[i];
        const CollisionEvent& d = decoded[i];
        EXPECT_EQ(d.tick(), e.tick());
        EXPECT_EQ(d.sequence(), e.sequence());
        EXPECT_EQ(d.type(), e.type());
        EXPECT_EQ(d.a(), e.a());
        EXPECT_EQ(d.b(), e.b());
        EXPECT_LE(std::fabs(d.point().x() - e.point().x()), 0.5f * step);
        EXPECT_LE(std::fabs(d.point().y() - e.point().y()), 0.5f * step);
        EXPECT_LE(std::fabs(d.point().z() - e.point().z()), 0.5f * step);
        // Dequantised points are exact multiples of the step.
        EXPECT_EQ(std::fmod(d.point().x(), step), 0.0f);
        const impulse::Vec3 en{e.normal().x(), e.normal().y(), e.normal().z()};
        const impulse::Vec3 dn{d.normal().x(), d.normal().y(), d.normal().z()};
        EXPECT_LE(angle_between(en, dn), max_normal_error_rad() * 1.01);
      }
    }
  }
}

TEST(EventBlock, PointsBeyondTheWorldBoundAreClampedAndNaNIsZero) {
  const QuantizationConfig config;  // bound 1024 m
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const CollisionEvent events[] = {
      make_event(1, {1, 1}, {2, 1}, {5000.0f, -1e30f, 1024.0f}, {0, 1, 0}, 1, ContactEventType::Begin),
      make_event(1, {1, 1}, {2, 1}, {kNaN, 0.25f, -2048.5f}, {0, 1, 0}, 2, ContactEventType::End)};
  std::vector<CollisionEvent> out;
  ASSERT_EQ(decode_collision_events(encode(events, config), config, &out), EventBlockError::None);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(to_vec3(out[0].point()), (impulse::Vec3{1024.0f, -1024.0f, 1024.0f}));
  EXPECT_EQ(to_vec3(out[1].point()), (impulse::Vec3{0.0f, 0.25f, -1024.0f}));
}

TEST(EventBlock, EncoderRefusesCallerBugs) {
  std::vector<CollisionEvent> events(kMaxEventsPerBlock + 1);
  Bytes out{1, 2, 3};
  EXPECT_FALSE(encode_collision_events(events, {}, &out));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(event_block_bytes(events, {}), 0u);
  events.resize(2);
  EXPECT_TRUE(encode_collision_events(events, {}, &out));
  events[1] = make_event(1, {1, 1}, {2, 1}, {}, {0, 1, 0}, 1, static_cast<ContactEventType>(2));
  EXPECT_FALSE(encode_collision_events(events, {}, &out));
  events[1] = make_event(1, {1, 1}, {2, 1}, {}, {0, 1, 0}, 1, ContactEventType::End);
  QuantizationConfig bad;
  bad.orientation_bits = 3;
  EXPECT_FALSE(encode_collision_events(events, bad, &out));
  EXPECT_EQ(event_block_bytes(events, bad), 0u);
  // The span form writes only into an exactly sized span.
  const size_t n = event_block_bytes(events, {});
  Bytes wrong(n + 1, 0xAB);
  EXPECT_FALSE(encode_collision_events(events, {}, std::span<uint8_t>(wrong)));
  EXPECT_TRUE(std::all_of(wrong.begin(), wrong.end(), [](uint8_t b) { return b == 0xAB; }));
}

// --- Sizes ------------------------------------------------------------------------------------

/// Events that maximise every field's code after the first event (whose sequence and tick deltas
/// are 0 by construction): sequences 2^31 + 1 apart, ticks 2^63 apart, index 2^32 - 1 and an
/// index delta of -2^31, generation 0 (sent as generation - 1 = 2^32 - 1). JointAdded events (the
/// largest record: two anchors and a joint id) with their joint column in *joints, else contacts.
std::vector<CollisionEvent> worst_case_events(uint32_t n, std::vector<JointEventFields>* joints = nullptr) {
  std::vector<CollisionEvent> events;
  uint32_t sequence = 0xFFFFFFFFu;
  if (joints != nullptr) joints->clear();
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t tick = i % 2 == 0 ? uint64_t{1} << 63 : 0;
    events.push_back(make_event(tick, ObjectID{0xFFFFFFFFu, 0}, ObjectID{0x7FFFFFFFu, 0},
                                {-32768.0f, 32768.0f, -32768.0f}, {0.3f, -0.5f, -0.81f}, sequence,
                                joints != nullptr ? ContactEventType::JointAdded : ContactEventType::End));
    if (joints != nullptr) {
      events.back() = make_event(tick, ObjectID{0xFFFFFFFFu, 0}, ObjectID{0x7FFFFFFFu, 0},
                                 {-32768.0f, 32768.0f, -32768.0f}, {32768.0f, -32768.0f, 32768.0f}, sequence,
                                 ContactEventType::JointAdded);
      joints->push_back(JointEventFields{impulse::to_wire(ObjectID{0xFFFFFFFFu, 0}), kMaxJointKindDetail});
    }
    sequence += 0x80000001u;
  }
  return events;
}

TEST(EventBlock, WorstCaseBoundHoldsAndIsReached) {
  const QuantizationConfig widest = widest_config();
  EXPECT_EQ(derive_limits(widest).position_bits, 26);  // the widest position field of any valid config
  for (uint32_t n = 1; n <= kMaxEventsPerBlock; ++n) {
    std::vector<JointEventFields> joints;
    const std::vector<CollisionEvent> events = worst_case_events(n, &joints);
    const size_t bytes = encode(events, widest, joints).size();
    EXPECT_LE(bytes, max_event_block_bytes(n)) << n;
    // Only the first event's two deltas (64 + 128 bits) fall short of their maxima.
    EXPECT_GE(bytes + 24, max_event_block_bytes(n)) << n;
    // A contact's worst case is below a JointAdded's.
    EXPECT_LT(encode(worst_case_events(n), widest).size(), bytes) << n;
  }
  // The documented figures: a 199-bit header and 727 bits per event (a JointAdded; 544 a contact).
  EXPECT_EQ(max_event_block_bytes(0), kEmptyEventBlockBytes);
  EXPECT_EQ(max_event_block_bytes(1), (199u + 727u + 7u) / 8u);
  EXPECT_EQ(max_event_block_bytes(16), (199u + 16u * 727u + 7u) / 8u);
}

TEST(EventBlock, AFullDatagramOfWorstCaseEventsFits) {
  flatbuffers::FlatBufferBuilder fbb;
  const uint32_t capacity = collision_events_per_datagram();
  const QuantizationConfig widest = widest_config();
  std::vector<JointEventFields> joints;
  const std::vector<CollisionEvent> events = worst_case_events(capacity + 3, &joints);
  const auto built = build_collision_events(fbb, events, widest, joints);
  Bytes datagram(built.begin(), built.end());
  ASSERT_TRUE(stamp_header(datagram, PacketHeader(UINT32_MAX, UINT32_MAX, UINT32_MAX)));
  EXPECT_LE(datagram.size(), kMaxDatagramBytes);
  const Verified v = verify_datagram(datagram, Direction::ServerToClient);
  ASSERT_EQ(v.reason, DropReason::None);
  const auto* packed = v.envelope->message_as_CollisionEvents()->packed();
  ASSERT_NE(packed, nullptr);
  std::vector<CollisionEvent> decoded;
  ASSERT_EQ(decode_collision_events(std::span<const uint8_t>(packed->data(), packed->size()), widest, &decoded),
            EventBlockError::None);
  ASSERT_EQ(decoded.size(), capacity);  // truncated to the capacity, first ones kept
  for (uint32_t i = 0; i < capacity; ++i) {
    EXPECT_EQ(decoded[i].sequence(), events[i].sequence());
    EXPECT_EQ(decoded[i].tick(), events[i].tick());
    EXPECT_EQ(decoded[i].a(), events[i].a());
    EXPECT_EQ(decoded[i].b(), events[i].b());
  }
}

TEST(EventBlock, TypicalEventsAreSmall) {
  // A ground contact in the N1 scene: the plane (index 0) and a cube, consecutive sequences, one
  // tick: about 15 bytes per event against 56 for the CollisionEvent struct.
  std::vector<CollisionEvent> events;
  for (uint32_t i = 0; i < 4; ++i) {
    events.push_back(make_event(3600, {0, 1}, {300 + 29 * i, 1}, {-4.1f + static_cast<float>(i), 0.0f, 2.3f},
                                {0, 1, 0}, 5000 + i, ContactEventType::Begin));
  }
  const size_t one = encode(std::span<const CollisionEvent>(events).first(1)).size();
  const size_t four = encode(events).size();
  EXPECT_LE(one, 25u);
  EXPECT_LE(four - one, 3u * 15u);
  RecordProperty("bytes_one_event", static_cast<int>(one));
  RecordProperty("bytes_per_further_event", static_cast<int>((four - one) / 3));
}

// --- Corruption and hostile blocks ---------------------------------------------------------------

std::vector<CollisionEvent> sample_events() {
  return {make_event(1000, {0, 1}, {17, 1}, {1.5f, 0.0f, -2.25f}, {0, 1, 0}, 41, ContactEventType::Begin),
          make_event(1000, {3, 2}, {4, 1}, {0.1f, 0.7f, 0.3f}, {0.6f, 0.0f, -0.8f}, 42, ContactEventType::Begin),
          make_event(1003, {17, 1}, {902, 1}, {-9.9f, 1.0f, 12.0f}, {-0.48f, 0.6f, 0.64f}, 43, ContactEventType::End)};
}

TEST(EventBlock, EverySingleBitFlipAndTruncationIsRejected) {
  const QuantizationConfig config;
  const Bytes block = encode(sample_events(), config);
  std::vector<CollisionEvent> out;
  int rejected = 0;
  for (size_t bit = 0; bit < block.size() * 8; ++bit) {
    Bytes flipped = block;
    flipped[bit / 8] = static_cast<uint8_t>(flipped[bit / 8] ^ (1u << (bit % 8)));
    const EventBlockError e = decode_collision_events(flipped, config, &out);
    EXPECT_EQ(e, EventBlockError::ChecksumMismatch) << "bit " << bit;
    EXPECT_TRUE(out.empty());
    rejected += e != EventBlockError::None;
  }
  EXPECT_EQ(rejected, static_cast<int>(block.size() * 8));
  for (size_t n = 0; n < block.size(); ++n) {
    const EventBlockError e = decode_collision_events(std::span<const uint8_t>(block).first(n), config, &out);
    EXPECT_EQ(e, n < kEmptyEventBlockBytes ? EventBlockError::Truncated : EventBlockError::ChecksumMismatch) << n;
    EXPECT_TRUE(out.empty());
  }
  // An extra byte is a change too.
  Bytes longer = block;
  longer.push_back(0);
  EXPECT_EQ(decode_collision_events(longer, config, &out), EventBlockError::ChecksumMismatch);
}

TEST(EventBlock, BitFlipsBehindAValidChecksumAreRejectedOrDecodeInRange) {
  // A hostile sender can always recompute the checksum: the structure checks alone must keep the
  // decoder in bounds and its output in range.
  const QuantizationConfig config;
  const Bytes block = encode(sample_events(), config);
  std::vector<CollisionEvent> out;
  std::array<int, static_cast<size_t>(EventBlockError::Count)> by_error{};
  for (size_t bit = 32; bit < block.size() * 8; ++bit) {
    RawBlock raw;
    raw.bytes = block;
    raw.bytes[bit / 8] = static_cast<uint8_t>(raw.bytes[bit / 8] ^ (1u << (bit % 8)));
    const EventBlockError e = decode_collision_events(raw.finish(), config, &out);
    ++by_error[static_cast<size_t>(e)];
    if (e != EventBlockError::None) {
      EXPECT_TRUE(out.empty());
      continue;
    }
    EXPECT_LE(out.size(), kMaxEventsPerBlock);
    for (const CollisionEvent& ev : out) {
      EXPECT_LE(std::fabs(ev.point().x()), config.world_bound_m);
      EXPECT_LE(static_cast<uint8_t>(ev.type()), 1u);
      const impulse::Vec3 n = to_vec3(ev.normal());
      EXPECT_NEAR(length(n), 1.0f, 1e-6f);
    }
  }
  EXPECT_GT(by_error[static_cast<size_t>(EventBlockError::None)], 0);  // most flips change a value
  EXPECT_GT(by_error[static_cast<size_t>(EventBlockError::Truncated)] +
                by_error[static_cast<size_t>(EventBlockError::BadRecord)] +
                by_error[static_cast<size_t>(EventBlockError::BadHeader)],
            0);
}

TEST(EventBlock, HostileBlocksAreRejectedWithTheirReason) {
  const QuantizationConfig config;
  const QuantizationLimits l = derive_limits(config);
  std::vector<CollisionEvent> out;
  auto expect = [&](Bytes bytes, EventBlockError expected, const char* what) {
    out.assign(2, CollisionEvent{});
    EXPECT_EQ(decode_collision_events(bytes, config, &out), expected) << what;
    EXPECT_TRUE(out.empty()) << what;
  };
  // One well-formed event after the header, with hooks for the fields a test breaks.
  struct Fields {
    uint32_t type = 0;
    uint32_t point = 0;     // every axis
    uint32_t normal_u = kNormalMax;
  };
  auto header = [](RawBlock& r, uint32_t count) {
    r.w.write_bits(count, 5);
    write_exp_golomb(r.w, 1000, 16);  // base tick
    write_exp_golomb(r.w, 7, 16);     // base sequence
  };
  auto event = [&](RawBlock& r, const Fields& f) {
    write_exp_golomb(r.w, 0, 0);  // sequence delta
    write_exp_golomb(r.w, 0, 0);  // tick delta
    r.w.write_bits(f.type, 2);
    write_exp_golomb(r.w, 5, 8);  // a.index
    write_exp_golomb(r.w, 0, 0);  // a.generation - 1
    write_exp_golomb(r.w, 2, 6);  // zz(b.index - a.index)
    write_exp_golomb(r.w, 0, 0);
    for (int i = 0; i < 3; ++i) r.w.write_bits(f.point, l.position_bits);
    r.w.write_bits(f.normal_u, kNormalBits);
    r.w.write_bits(kNormalMax, kNormalBits);
  };
  {  // the well-formed baseline decodes
    RawBlock r;
    header(r, 1);
    event(r, {0, static_cast<uint32_t>(l.position_max), static_cast<uint32_t>(kNormalMax)});
    ASSERT_EQ(decode_collision_events(r.finish(), config, &out), EventBlockError::None);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].tick(), 1000u);
    EXPECT_EQ(out[0].sequence(), 7u);
    EXPECT_EQ(from_wire(out[0].a()), (ObjectID{5, 1}));
    EXPECT_EQ(from_wire(out[0].b()), (ObjectID{6, 1}));
    EXPECT_EQ(to_vec3(out[0].point()), (impulse::Vec3{0, 0, 0}));
    EXPECT_EQ(to_vec3(out[0].normal()), (impulse::Vec3{0, 0, 1}));
  }
  expect({}, EventBlockError::Truncated, "empty");
  expect({1, 2, 3, 4}, EventBlockError::Truncated, "checksum only");
  {
    RawBlock r;
    header(r, 31);  // 31 events announced, one present
    event(r, {});
    expect(r.finish(), EventBlockError::Truncated, "count larger than the bytes");
  }
  {
    RawBlock r;
    r.w.write_bits(1, 5);
    expect(r.finish(), EventBlockError::Truncated, "ends inside the header");
  }
  {
    RawBlock r;
    header(r, 1);
    event(r, {2, 0, static_cast<uint32_t>(kNormalMax)});
    expect(r.finish(), EventBlockError::BadRecord, "type 2");
  }
  {
    RawBlock r;
    header(r, 1);
    event(r, {0, 2u * static_cast<uint32_t>(l.position_max) + 1u, static_cast<uint32_t>(kNormalMax)});
    expect(r.finish(), EventBlockError::BadRecord, "point field above 2 Pmax");
  }
  {
    RawBlock r;
    header(r, 1);
    event(r, {0, 0, 2u * kNormalMax + 1u});
    expect(r.finish(), EventBlockError::BadRecord, "normal field 4095");
  }
  {
    RawBlock r;
    r.w.write_bits(1, 5);
    write_exp_golomb(r.w, 0xFFFFFFFFu, 16);  // escape...
    r.w.write_bits(5, 32);                   // ...to a small tick: non-canonical
    r.w.write_bits(0, 32);
    write_exp_golomb(r.w, 7, 16);
    event(r, {});
    expect(r.finish(), EventBlockError::BadRecord, "escaped small tick");
  }
  {
    RawBlock r;
    r.w.write_bits(1, 5);
    r.w.write_bits(0, 32);  // 32 zeros: longer than any order-16 code
    r.w.write_bits(0, 8);
    r.w.write_bit(true);
    expect(r.finish(), EventBlockError::BadRecord, "overlong code");
  }
  {  // huge deltas are legal values (any u64 tick, any u32 sequence), and wrap as documented
    RawBlock r;
    header(r, 2);
    event(r, {});
    write_exp_golomb(r.w, 0xFFFFFFFFu, 0);  // zz = 2^32 - 1: sequence delta -2^31
    write_exp_golomb(r.w, 0xFFFFFFFFu, 0);  // tick escape: zz64 = 2^64 - 1, delta -2^63
    r.w.write_bits(0xFFFFFFFFu, 32);
    r.w.write_bits(0xFFFFFFFFu, 32);
    r.w.write_bits(1, 2);
    write_exp_golomb(r.w, 5, 8);
    write_exp_golomb(r.w, 0, 0);
    write_exp_golomb(r.w, 2, 6);
    write_exp_golomb(r.w, 0, 0);
    for (int i = 0; i < 3; ++i) r.w.write_bits(static_cast<uint32_t>(l.position_max), l.position_bits);
    r.w.write_bits(kNormalMax, kNormalBits);
    r.w.write_bits(kNormalMax, kNormalBits);
    ASSERT_EQ(decode_collision_events(r.finish(), config, &out), EventBlockError::None);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].sequence(), 7u + 1u + 0x80000000u);
    EXPECT_EQ(out[1].tick(), 1000u + (uint64_t{1} << 63));
    EXPECT_EQ(out[1].type(), ContactEventType::End);
  }
  {
    RawBlock r;
    header(r, 1);
    event(r, {});
    r.w.write_bits(0, 8);  // a whole spare byte
    expect(r.finish(), EventBlockError::BadHeader, "trailing byte");
  }
  {
    RawBlock r;
    header(r, 1);
    event(r, {});
    const size_t rest = (8 - r.w.bit_count() % 8) % 8;
    ASSERT_GT(rest, 0u) << "pick fields that leave padding";
    r.w.write_bits(1, 1);  // a non-zero padding bit
    expect(r.finish(), EventBlockError::BadHeader, "padding");
  }
  {
    QuantizationConfig bad;
    bad.position_fraction_bits = 21;
    out.assign(1, CollisionEvent{});
    EXPECT_EQ(decode_collision_events(encode(sample_events()), bad, &out), EventBlockError::BadHeader);
    EXPECT_TRUE(out.empty());
  }
  Rng rng(99);  // random garbage never crashes and is (almost surely) a checksum mismatch
  for (int i = 0; i < 2000; ++i) {
    Bytes garbage(rng.below(200));
    for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng.next());
    const EventBlockError e = decode_collision_events(garbage, config, &out);
    EXPECT_TRUE(e == EventBlockError::Truncated || e == EventBlockError::ChecksumMismatch);
  }
}

TEST(EventBlock, WorkedExampleOfTheProtocolDocument) {
  // docs/PROTOCOL.md, "Collision events", worked example: byte for byte, both ways.
  const CollisionEvent events[] = {
      make_event(3600, {0, 1}, {17, 1}, {1.5f, 0.0f, -2.25f}, {0, 1, 0}, 41, ContactEventType::Begin),
      make_event(3601, {3, 2}, {4, 1}, {0.1f, 0.7f, 0.3f}, {0.6f, 0.0f, -0.8f}, 42, ContactEventType::End)};
  const Bytes expected = {0x27, 0x0f, 0x71, 0x12, 0x22, 0x84, 0xc3, 0x14, 0x80, 0x09, 0xb0, 0x18, 0x60,
                          0x00, 0x01, 0x00, 0x20, 0xc0, 0xfd, 0xf3, 0x7f, 0xfe, 0xdf, 0x1d, 0x50, 0xe1,
                          0x0c, 0x00, 0x32, 0x0b, 0x40, 0x9a, 0x00, 0xc8, 0xff, 0x23, 0x19};
  EXPECT_EQ(encode(events), expected);
  std::vector<CollisionEvent> out;
  ASSERT_EQ(decode_collision_events(expected, {}, &out), EventBlockError::None);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].tick(), 3600u);
  EXPECT_EQ(out[0].sequence(), 41u);
  EXPECT_EQ(out[0].type(), ContactEventType::Begin);
  EXPECT_EQ(from_wire(out[0].a()), (ObjectID{0, 1}));
  EXPECT_EQ(from_wire(out[0].b()), (ObjectID{17, 1}));
  EXPECT_EQ(to_vec3(out[0].point()), (impulse::Vec3{1.5f, 0.0f, -2.25f}));
  EXPECT_EQ(to_vec3(out[0].normal()), (impulse::Vec3{0, 1, 0}));
  EXPECT_EQ(out[1].tick(), 3601u);
  EXPECT_EQ(out[1].sequence(), 42u);
  EXPECT_EQ(out[1].type(), ContactEventType::End);
  EXPECT_EQ(from_wire(out[1].a()), (ObjectID{3, 2}));
  EXPECT_EQ(from_wire(out[1].b()), (ObjectID{4, 1}));
  EXPECT_EQ(to_vec3(out[1].point()), (impulse::Vec3{51.0f / 512, 358.0f / 512, 154.0f / 512}));
  const impulse::Vec3 n = to_vec3(out[1].normal());
  EXPECT_EQ(n.y, 0.0f);
  EXPECT_NEAR(n.x, 0.59978f, 1e-5f);
  EXPECT_NEAR(n.z, -0.80016f, 1e-5f);
  int32_t u = 0, v = 0;
  encode_octahedral_normal({0.6f, 0.0f, -0.8f}, &u, &v);
  EXPECT_EQ(u, 2047);
  EXPECT_EQ(v, 1170);
}

// docs/PROTOCOL.md, "Joint events": a hinge (joint 2.1) from body 17.1 to the world is added in
// tick 7200 (sequence 5), anchored 0.25 m along the body's x at world (0.25, 3, 0), and breaks in
// tick 7260 (sequence 6). The block is pinned byte for byte, and every joint field round-trips.
TEST(EventBlock, JointEventsRoundTripAndMatchTheDocument) {
  const ObjectID body{17, 1}, joint{2, 1};
  const CollisionEvent events[] = {
      make_event(7200, body, ObjectID{}, {0.25f, 0, 0}, {0.25f, 3, 0}, 5, ContactEventType::JointAdded),
      make_event(7260, body, ObjectID{}, {0, 0, 0}, {0, 0, 0}, 6, ContactEventType::JointRemoved),
  };
  const JointEventFields joints[] = {
      {impulse::to_wire(joint), static_cast<uint8_t>(JointKind::Hinge)},
      {impulse::to_wire(joint), static_cast<uint8_t>(JointRemovedReason::Broken)},
  };
  const Bytes block = encode(events, {}, joints);
  std::vector<CollisionEvent> out;
  std::vector<JointEventFields> fields;
  ASSERT_EQ(decode_collision_events(block, {}, &out, &fields), EventBlockError::None);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(fields.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].tick(), events[i].tick());
    EXPECT_EQ(out[i].sequence(), events[i].sequence());
    EXPECT_EQ(out[i].type(), events[i].type());
    EXPECT_EQ(out[i].a(), events[i].a());
    EXPECT_EQ(out[i].b(), 0u);  // the world
    EXPECT_EQ(fields[i].joint, joints[i].joint);
    EXPECT_EQ(fields[i].detail, joints[i].detail);
  }
  EXPECT_EQ(to_vec3(out[0].point()), (impulse::Vec3{0.25f, 0, 0}));
  EXPECT_EQ(to_vec3(out[0].normal()), (impulse::Vec3{0.25f, 3, 0}));
  // A joint event without its joint column is a caller bug: nothing is encoded.
  Bytes none;
  EXPECT_FALSE(encode_collision_events(events, {}, &none));
  // A detail out of range is refused by the encoder, and by the decoder in a hand-made block.
  const JointEventFields bad[] = {{impulse::to_wire(joint), 7}, joints[1]};
  EXPECT_FALSE(encode_collision_events(events, {}, &none, bad));
  const auto doc = test::protocol_doc_vectors("joint-event-vectors");
  ASSERT_TRUE(doc.count("block")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n    block: " << to_hex(block);
  EXPECT_EQ(doc.at("block"), to_hex(block));
}

TEST(EventBlock, ErrorsHaveNames) {
  for (uint8_t e = 0; e < static_cast<uint8_t>(EventBlockError::Count); ++e) {
    EXPECT_STRNE(to_string(static_cast<EventBlockError>(e)), "unknown");
  }
}

}  // namespace
}  // namespace impulse::wire
