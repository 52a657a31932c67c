// Wire quantisation: every config bound is enforced, fixed-point round trips stay within half a
// step inside the bounds and clamp outside, and the smallest-three orientation error stays within
// max_orientation_error_rad over random and worst-case quaternions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "shared/wire/quantize.h"
#include "tests/support/rng.h"

namespace impulse::wire {
namespace {

using ::impulse::test::Rng;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Uniformly distributed unit quaternion: a normalised 4D vector with rejection from the unit ball.
impulse::Quat random_quat(Rng& rng) {
  for (;;) {
    const impulse::Quat q{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)};
    const float n = dot(q, q);
    if (n > 1e-4f && n <= 1.0f) return normalize(q);
  }
}

// Rotation angle between two unit quaternions [rad], in double: 2 atan2(|v|, |w|) of a* b.
double rotation_angle(impulse::Quat a, impulse::Quat b) {
  const double ax = a.x, ay = a.y, az = a.z, aw = a.w, bx = b.x, by = b.y, bz = b.z, bw = b.w;
  // conj(a) * b
  const double x = aw * bx - ax * bw - ay * bz + az * by;
  const double y = aw * by + ax * bz - ay * bw - az * bx;
  const double z = aw * bz - ax * by + ay * bx - az * bw;
  const double w = aw * bw + ax * bx + ay * by + az * bz;
  return 2.0 * std::atan2(std::sqrt(x * x + y * y + z * z), std::fabs(w));
}

TEST(QuantizationConfig, DefaultsAreValidAndMatchTheDocumentedLimits) {
  const QuantizationConfig config;
  std::string error;
  EXPECT_TRUE(config.validate(&error)) << error;
  const QuantizationLimits l = derive_limits(config);
  EXPECT_EQ(l.position_max, 1024 * 512);
  EXPECT_EQ(l.position_bits, 21);
  EXPECT_EQ(l.linear_velocity_max, 64 * 128);
  EXPECT_EQ(l.linear_velocity_bits, 15);
  EXPECT_EQ(l.angular_velocity_max, 32 * 128);
  EXPECT_EQ(l.angular_velocity_bits, 14);
  EXPECT_EQ(l.orientation_max, 1023u);
  EXPECT_EQ(2 + 3 * l.orientation_bits, 32) << "smallest three: 2 index bits + 3 x 10";
}

TEST(QuantizationConfig, EveryOutOfRangeFieldIsRejectedWithItsName) {
  struct Case {
    const char* field;
    void (*mutate)(QuantizationConfig&);
  };
  const Case cases[] = {
      {"world_bound_m", [](QuantizationConfig& c) { c.world_bound_m = 0.0f; }},
      {"world_bound_m", [](QuantizationConfig& c) { c.world_bound_m = kNaN; }},
      {"world_bound_m", [](QuantizationConfig& c) { c.world_bound_m = kInf; }},
      {"world_bound_m", [](QuantizationConfig& c) { c.world_bound_m = 40000.0f; }},
      {"position_fraction_bits", [](QuantizationConfig& c) { c.position_fraction_bits = 21; }},
      {"2^position_fraction_bits", [](QuantizationConfig& c) { c.position_fraction_bits = 15; }},  // 1024 * 2^15 > 2^24
      {"2^position_fraction_bits", [](QuantizationConfig& c) { c.world_bound_m = 0.25f; c.position_fraction_bits = 0; }},
      {"orientation_bits", [](QuantizationConfig& c) { c.orientation_bits = 5; }},
      {"orientation_bits", [](QuantizationConfig& c) { c.orientation_bits = 16; }},
      {"max_linear_speed", [](QuantizationConfig& c) { c.max_linear_speed = -1.0f; }},
      {"max_linear_speed", [](QuantizationConfig& c) { c.max_linear_speed = kNaN; }},
      {"linear_velocity_fraction_bits", [](QuantizationConfig& c) { c.linear_velocity_fraction_bits = 16; }},
      {"2^linear_velocity_fraction_bits", [](QuantizationConfig& c) { c.linear_velocity_fraction_bits = 9; }},
      {"max_angular_speed", [](QuantizationConfig& c) { c.max_angular_speed = 0.0f; }},
      {"max_angular_speed", [](QuantizationConfig& c) { c.max_angular_speed = kInf; }},
      {"2^angular_velocity_fraction_bits", [](QuantizationConfig& c) { c.angular_velocity_fraction_bits = 11; }},
  };
  for (const Case& k : cases) {
    QuantizationConfig config;
    k.mutate(config);
    std::string error;
    EXPECT_FALSE(config.validate(&error)) << k.field;
    EXPECT_NE(error.find(k.field), std::string::npos) << error;
    EXPECT_FALSE(config.validate(nullptr));
  }
  QuantizationConfig widest;
  widest.world_bound_m = 32768.0f;
  widest.position_fraction_bits = 9;
  widest.orientation_bits = 15;
  widest.max_linear_speed = 255.0f;
  widest.max_angular_speed = 255.0f;
  EXPECT_TRUE(widest.validate(nullptr));
  EXPECT_EQ(derive_limits(widest).position_bits, 26);
}

TEST(Quantize, PositionRoundTripIsWithinHalfAStepInsideTheBound) {
  Rng rng(11);
  for (const uint8_t bits : {uint8_t{0}, uint8_t{4}, uint8_t{9}, uint8_t{12}}) {
    QuantizationConfig config;
    config.position_fraction_bits = bits;
    config.world_bound_m = bits == 12 ? 1000.0f : 1024.0f;  // also a bound that is not a power of two
    ASSERT_TRUE(config.validate(nullptr));
    const QuantizationLimits l = derive_limits(config);
    const double half_step = std::ldexp(0.5, -bits);
    for (int i = 0; i < 200000; ++i) {
      const float b = config.world_bound_m;
      const float v = rng.uniform(-b, b);
      const int32_t q = quantize_fixed(v, bits, l.position_max);
      ASSERT_LE(std::abs(q), l.position_max);
      const float back = dequantize_fixed(q, bits);
      ASSERT_LE(std::fabs(static_cast<double>(back) - v), half_step) << v << " bits " << int{bits};
    }
    // The bound itself is representable.
    EXPECT_LE(std::fabs(dequantize_fixed(quantize_fixed(config.world_bound_m, bits, l.position_max), bits) -
                        config.world_bound_m),
              half_step);
  }
}

// The fixed-point scale is a multiply by a power of two: bit for bit what ldexp gives.
TEST(Quantize, FixedPointScalingMatchesLdexpBitForBit) {
  Rng rng(11);
  for (unsigned bits = 0; bits <= 24; ++bits) {
    for (int i = 0; i < 2000; ++i) {
      const auto q = static_cast<int32_t>(static_cast<uint32_t>(rng.next()) >> rng.below(32)) * (rng.below(2) == 0 ? 1 : -1);
      const float want = std::ldexp(static_cast<float>(q), -static_cast<int>(bits));
      ASSERT_EQ(std::bit_cast<uint32_t>(dequantize_fixed(q, bits)), std::bit_cast<uint32_t>(want)) << q << " " << bits;
      const float v = std::bit_cast<float>(static_cast<uint32_t>(rng.next()));  // any float, NaN and inf too
      const int32_t max = 1 << 23;
      const float scaled = std::ldexp(v, static_cast<int>(bits));
      const int32_t expected = std::isnan(scaled) ? 0 : (scaled >= static_cast<float>(max) ? max : (scaled <= -static_cast<float>(max) ? -max : static_cast<int32_t>(std::lround(scaled))));
      ASSERT_EQ(quantize_fixed(v, bits, max), expected) << v << " " << bits;
    }
  }
}

TEST(Quantize, OutOfBoundValuesClampAndNaNIsZero) {
  const QuantizationConfig config;
  const QuantizationLimits l = derive_limits(config);
  EXPECT_EQ(quantize_fixed(5000.0f, 9, l.position_max), l.position_max);
  EXPECT_EQ(quantize_fixed(-5000.0f, 9, l.position_max), -l.position_max);
  EXPECT_EQ(quantize_fixed(kInf, 9, l.position_max), l.position_max);
  EXPECT_EQ(quantize_fixed(-kInf, 9, l.position_max), -l.position_max);
  EXPECT_EQ(quantize_fixed(kNaN, 9, l.position_max), 0);
  EXPECT_EQ(quantize_fixed(1e30f, 9, l.position_max), l.position_max);

  EXPECT_TRUE(is_representable({1024.0f, -1024.0f, 0.0f}, config));
  EXPECT_FALSE(is_representable({1024.01f, 0.0f, 0.0f}, config));
  EXPECT_FALSE(is_representable({0.0f, 0.0f, -2000.0f}, config));
  EXPECT_FALSE(is_representable({kNaN, 0.0f, 0.0f}, config));

  // Velocities clamp to their bounds.
  const QuantizedState s = quantize_state({0, 0, 0}, {}, {100.0f, -100.0f, 1.0f}, {-50.0f, 50.0f, 0.5f}, false, config);
  EXPECT_EQ(s.linear_velocity[0], l.linear_velocity_max);
  EXPECT_EQ(s.linear_velocity[1], -l.linear_velocity_max);
  EXPECT_EQ(s.angular_velocity[0], -l.angular_velocity_max);
  EXPECT_EQ(s.angular_velocity[1], l.angular_velocity_max);
  const DequantizedState d = dequantize_state(s, config);
  EXPECT_FLOAT_EQ(d.linear_velocity.x, 64.0f);
  EXPECT_FLOAT_EQ(d.angular_velocity.y, 32.0f);
  EXPECT_FLOAT_EQ(d.linear_velocity.z, 1.0f);
  EXPECT_FLOAT_EQ(d.angular_velocity.z, 0.5f);
  EXPECT_TRUE(is_within_limits(s, l));
}

TEST(Quantize, VelocityRoundTripIsWithinHalfAStepInsideTheBounds) {
  const QuantizationConfig config;
  Rng rng(12);
  const double lin_half = std::ldexp(0.5, -config.linear_velocity_fraction_bits);
  const double ang_half = std::ldexp(0.5, -config.angular_velocity_fraction_bits);
  for (int i = 0; i < 100000; ++i) {
    const impulse::Vec3 v{rng.uniform(-64, 64), rng.uniform(-64, 64), rng.uniform(-64, 64)};
    const impulse::Vec3 w{rng.uniform(-32, 32), rng.uniform(-32, 32), rng.uniform(-32, 32)};
    const DequantizedState d = dequantize_state(quantize_state({}, {}, v, w, false, config), config);
    ASSERT_LE(std::fabs(static_cast<double>(d.linear_velocity.x) - v.x), lin_half);
    ASSERT_LE(std::fabs(static_cast<double>(d.linear_velocity.y) - v.y), lin_half);
    ASSERT_LE(std::fabs(static_cast<double>(d.linear_velocity.z) - v.z), lin_half);
    ASSERT_LE(std::fabs(static_cast<double>(d.angular_velocity.x) - w.x), ang_half);
    ASSERT_LE(std::fabs(static_cast<double>(d.angular_velocity.y) - w.y), ang_half);
    ASSERT_LE(std::fabs(static_cast<double>(d.angular_velocity.z) - w.z), ang_half);
  }
}

TEST(Quantize, AtRestStoresZeroVelocitiesAndStatesCompareBitExactly) {
  const QuantizationConfig config;
  const impulse::Vec3 p{1.25f, 0.5f, -3.0f};
  const impulse::Quat q = normalize(impulse::Quat{0.1f, 0.2f, 0.3f, 0.9f});
  const QuantizedState rest = quantize_state(p, q, {1, 2, 3}, {4, 5, 6}, true, config);
  EXPECT_EQ(rest.at_rest, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rest.linear_velocity[i], 0);
    EXPECT_EQ(rest.angular_velocity[i], 0);
  }
  const DequantizedState d = dequantize_state(rest, config);
  EXPECT_TRUE(d.at_rest);
  EXPECT_EQ(d.linear_velocity, (impulse::Vec3{}));
  EXPECT_EQ(d.angular_velocity, (impulse::Vec3{}));

  const QuantizedState moving = quantize_state(p, q, {1, 2, 3}, {4, 5, 6}, false, config);
  EXPECT_NE(rest, moving);
  EXPECT_EQ(moving, quantize_state(p, q, {1, 2, 3}, {4, 5, 6}, false, config));
  // A change below half a step is not a change; one step is.
  EXPECT_EQ(moving, quantize_state({1.25f + 0.0009f, 0.5f, -3.0f}, q, {1, 2, 3}, {4, 5, 6}, false, config));
  EXPECT_NE(moving, quantize_state({1.25f + 1.0f / 512, 0.5f, -3.0f}, q, {1, 2, 3}, {4, 5, 6}, false, config));

  QuantizationLimits l = derive_limits(config);
  QuantizedState bad = rest;
  bad.linear_velocity[1] = 1;  // at rest with a velocity: inconsistent
  EXPECT_FALSE(is_within_limits(bad, l));
  bad = moving;
  bad.position[2] = l.position_max + 1;
  EXPECT_FALSE(is_within_limits(bad, l));
  bad = moving;
  bad.orientation[0] = static_cast<uint16_t>(l.orientation_max + 1);
  EXPECT_FALSE(is_within_limits(bad, l));
}

TEST(Quantize, SmallestThreeCanonicalisesTheSignAndDropsTheLargestComponent) {
  Rng rng(21);
  for (int i = 0; i < 10000; ++i) {
    const impulse::Quat q = random_quat(rng);
    const impulse::Quat neg{-q.x, -q.y, -q.z, -q.w};
    uint8_t la = 0, lb = 0;
    uint16_t a[3], b[3];
    quantize_orientation(q, 10, &la, a);
    quantize_orientation(neg, 10, &lb, b);
    ASSERT_EQ(la, lb);
    ASSERT_EQ(a[0], b[0]);
    ASSERT_EQ(a[1], b[1]);
    ASSERT_EQ(a[2], b[2]);
    const float c[4] = {q.x, q.y, q.z, q.w};
    for (int k = 0; k < 4; ++k) ASSERT_LE(std::fabs(c[k]), std::fabs(c[la]));
    const impulse::Quat back = dequantize_orientation(la, a, 10);
    const float d[4] = {back.x, back.y, back.z, back.w};
    ASSERT_GE(d[la], 0.0f) << "the dropped component decodes as >= 0";
    ASSERT_NEAR(dot(back, back), 1.0f, 1e-5f);
  }
  // Degenerate input quantises as the identity.
  uint8_t largest = 0;
  uint16_t comps[3];
  quantize_orientation(impulse::Quat{kNaN, 0, 0, 1}, 10, &largest, comps);
  EXPECT_EQ(largest, 3);
  const impulse::Quat id = dequantize_orientation(largest, comps, 10);
  EXPECT_LT(rotation_angle(id, impulse::Quat{}), max_orientation_error_rad(10));
  // Any integers decode to a finite unit quaternion (hostile wire data).
  for (uint8_t l = 0; l < 4; ++l) {
    const uint16_t extreme[3] = {1023, 1023, 1023};
    const impulse::Quat e = dequantize_orientation(l, extreme, 10);
    EXPECT_TRUE(is_finite(e));
    EXPECT_NEAR(dot(e, e), 1.0f, 1e-5f);
  }
}

TEST(Quantize, SmallestThreeErrorIsWithinTheStatedBound) {
  // The stated bound, 2 sqrt6 / (2^N - 1): 0.274 degrees at N = 10, 0.549 at N = 9.
  EXPECT_NEAR(max_orientation_error_rad(10) * 180.0 / 3.14159265358979, 0.2744, 0.0005);
  EXPECT_NEAR(max_orientation_error_rad(9) * 180.0 / 3.14159265358979, 0.5492, 0.0005);
  Rng rng(22);
  for (const unsigned bits : {9u, 10u, 12u}) {
    // 1 % allowance for float rounding in the quantiser and the normalisation.
    const double bound = max_orientation_error_rad(bits) * 1.01;
    double worst = 0.0;
    for (int i = 0; i < 150000; ++i) {
      const impulse::Quat q = random_quat(rng);
      uint8_t largest = 0;
      uint16_t comps[3];
      quantize_orientation(q, bits, &largest, comps);
      worst = std::max(worst, rotation_angle(q, dequantize_orientation(largest, comps, bits)));
    }
    // The worst case sits near (1/2, 1/2, 1/2, 1/2) (all four components equal): probe around it
    // with offsets of up to a step, so the rounding of each kept component goes every way.
    const float step = 1.41421356f / static_cast<float>((1u << bits) - 1u);
    for (int i = 0; i < 50000; ++i) {
      impulse::Quat q{0.5f + rng.uniform(-step, step), 0.5f + rng.uniform(-step, step),
                      0.5f + rng.uniform(-step, step), 0.5f + rng.uniform(-step, step)};
      q = normalize(q);
      uint8_t largest = 0;
      uint16_t comps[3];
      quantize_orientation(q, bits, &largest, comps);
      worst = std::max(worst, rotation_angle(q, dequantize_orientation(largest, comps, bits)));
    }
    EXPECT_LE(worst, bound) << bits << " bits";
    // The bound is not loose by more than a factor of 2 (it is first-order tight).
    EXPECT_GE(worst, 0.5 * max_orientation_error_rad(bits)) << bits << " bits";
    std::printf("[ figures  ] smallest three, %u bits: measured max error %.4f deg, stated bound %.4f deg\n", bits,
                worst * 180.0 / 3.14159265358979, max_orientation_error_rad(bits) * 180.0 / 3.14159265358979);
  }
}

}  // namespace
}  // namespace impulse::wire
