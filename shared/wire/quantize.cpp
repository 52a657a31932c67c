// Fixed-point and smallest-three quantisation (Glenn Fiedler, "Snapshot Compression",
// gafferongames.com, 2015). Only sqrt is used (correctly rounded), so both ends agree bit for bit.
#include "shared/wire/quantize.h"

#include <algorithm>
#include <cmath>

namespace impulse::wire {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;  // 1/sqrt2: bound of a smallest-three component
constexpr float kSqrt2 = 1.41421356237309504880f;     // width of that range

// Number of bits w with 2^w >= n (n >= 1).
uint8_t bits_for_count(uint64_t n) {
  uint8_t w = 0;
  while ((uint64_t{1} << w) < n) ++w;
  return w;
}

bool fail(std::string* error, const char* message) {
  if (error != nullptr) *error = message;
  return false;
}

// max = floor(bound * 2^bits) computed in double (exact for the accepted ranges).
double scaled_bound(float bound, unsigned bits) { return std::floor(static_cast<double>(bound) * std::ldexp(1.0, static_cast<int>(bits))); }

}  // namespace

bool QuantizationConfig::validate(std::string* error) const {
  static_assert(kMaxWorldBoundM == 32768.0f, "update the message below");
  if (!(world_bound_m > 0.0f && world_bound_m <= kMaxWorldBoundM))
    return fail(error, "quantization: world_bound_m must be in (0, 32768] m");
  if (position_fraction_bits > 20) return fail(error, "quantization: position_fraction_bits must be in [0, 20]");
  const double position_max = scaled_bound(world_bound_m, position_fraction_bits);
  if (position_max < 1.0 || position_max > 16777216.0)
    return fail(error, "quantization: world_bound_m * 2^position_fraction_bits must be in [1, 2^24]");
  if (orientation_bits < 6 || orientation_bits > 15) return fail(error, "quantization: orientation_bits must be in [6, 15]");
  if (!(max_linear_speed > 0.0f) || !std::isfinite(max_linear_speed) || linear_velocity_fraction_bits > 15)
    return fail(error, "quantization: max_linear_speed must be finite and > 0, linear_velocity_fraction_bits in [0, 15]");
  const double linear_max = scaled_bound(max_linear_speed, linear_velocity_fraction_bits);
  if (linear_max < 1.0 || linear_max > 32767.0)
    return fail(error, "quantization: max_linear_speed * 2^linear_velocity_fraction_bits must be in [1, 32767]");
  if (!(max_angular_speed > 0.0f) || !std::isfinite(max_angular_speed) || angular_velocity_fraction_bits > 15)
    return fail(error, "quantization: max_angular_speed must be finite and > 0, angular_velocity_fraction_bits in [0, 15]");
  const double angular_max = scaled_bound(max_angular_speed, angular_velocity_fraction_bits);
  if (angular_max < 1.0 || angular_max > 32767.0)
    return fail(error, "quantization: max_angular_speed * 2^angular_velocity_fraction_bits must be in [1, 32767]");
  return true;
}

QuantizationLimits derive_limits(const QuantizationConfig& config) {
  QuantizationLimits limits;
  limits.position_max = static_cast<int32_t>(scaled_bound(config.world_bound_m, config.position_fraction_bits));
  limits.linear_velocity_max =
      static_cast<int32_t>(scaled_bound(config.max_linear_speed, config.linear_velocity_fraction_bits));
  limits.angular_velocity_max =
      static_cast<int32_t>(scaled_bound(config.max_angular_speed, config.angular_velocity_fraction_bits));
  limits.orientation_max = (1u << config.orientation_bits) - 1u;
  limits.position_bits = bits_for_count(2 * static_cast<uint64_t>(limits.position_max) + 1);
  limits.linear_velocity_bits = bits_for_count(2 * static_cast<uint64_t>(limits.linear_velocity_max) + 1);
  limits.angular_velocity_bits = bits_for_count(2 * static_cast<uint64_t>(limits.angular_velocity_max) + 1);
  limits.orientation_bits = config.orientation_bits;
  return limits;
}

bool is_representable(impulse::Vec3 position, const QuantizationConfig& config) {
  const float b = config.world_bound_m;
  return std::fabs(position.x) <= b && std::fabs(position.y) <= b && std::fabs(position.z) <= b;
}

int32_t quantize_fixed(float v, unsigned fraction_bits, int32_t max) {
  // Exact either way (a power-of-two scale); the multiply spares a libm call per field.
  const float scaled = fraction_bits <= 24 ? v * static_cast<float>(uint32_t{1} << fraction_bits)
                                           : std::ldexp(v, static_cast<int>(fraction_bits));
  if (std::isnan(scaled)) return 0;
  if (scaled >= static_cast<float>(max)) return max;
  if (scaled <= -static_cast<float>(max)) return -max;
  const long rounded = std::lround(scaled);  // |scaled| < max <= 2^24: in range of long
  return static_cast<int32_t>(rounded > max ? max : (rounded < -max ? -max : rounded));
}

float dequantize_fixed(int32_t q, unsigned fraction_bits) {
  // As in quantize_fixed: |q| <= 2^24, so q * 2^-k stays a normal float and the product is exact.
  if (fraction_bits <= 24) return static_cast<float>(q) * (1.0f / static_cast<float>(uint32_t{1} << fraction_bits));
  return std::ldexp(static_cast<float>(q), -static_cast<int>(fraction_bits));
}

void quantize_orientation(impulse::Quat q, unsigned bits, uint8_t* largest, uint16_t components[3]) {
  float c[4] = {q.x, q.y, q.z, q.w};
  if (!is_finite(q) || !(dot(q, q) > 0.0f)) {
    c[0] = 0.0f; c[1] = 0.0f; c[2] = 0.0f; c[3] = 1.0f;
  }
  uint8_t big = 0;
  for (uint8_t i = 1; i < 4; ++i) {
    if (std::fabs(c[i]) > std::fabs(c[big])) big = i;
  }
  const float sign = c[big] < 0.0f ? -1.0f : 1.0f;
  const float scale = static_cast<float>((1u << bits) - 1u);
  const long max = static_cast<long>((1u << bits) - 1u);
  int out = 0;
  for (int i = 0; i < 4; ++i) {
    if (i == big) continue;
    const float unit = (c[i] * sign + kSqrtHalf) / kSqrt2;  // [0, 1] for a unit quaternion
    long v = std::lround(unit * scale);
    v = v < 0 ? 0 : (v > max ? max : v);
    components[out++] = static_cast<uint16_t>(v);
  }
  *largest = big;
}

impulse::Quat dequantize_orientation(uint8_t largest, const uint16_t components[3], unsigned bits) {
  const float scale = static_cast<float>((1u << bits) - 1u);
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int big = largest & 3;
  float sum_sq = 0.0f;
  int in = 0;
  for (int i = 0; i < 4; ++i) {
    if (i == big) continue;
    c[i] = static_cast<float>(components[in++]) / scale * kSqrt2 - kSqrtHalf;
    sum_sq += c[i] * c[i];
  }
  c[big] = std::sqrt(std::max(0.0f, 1.0f - sum_sq));
  return normalize(impulse::Quat{c[0], c[1], c[2], c[3]});
}

double max_orientation_error_rad(unsigned bits) {
  return 2.0 * std::sqrt(6.0) / static_cast<double>((1u << bits) - 1u);
}

QuantizedState quantize_state(impulse::Vec3 position, impulse::Quat orientation, impulse::Vec3 linear_velocity,
                              impulse::Vec3 angular_velocity, bool at_rest, const QuantizationConfig& config) {
  return quantize_state(position, orientation, linear_velocity, angular_velocity, at_rest, config,
                        derive_limits(config));
}

QuantizedState quantize_state(impulse::Vec3 position, impulse::Quat orientation, impulse::Vec3 linear_velocity,
                              impulse::Vec3 angular_velocity, bool at_rest, const QuantizationConfig& config,
                              const QuantizationLimits& limits) {
  QuantizedState s;
  const unsigned pf = config.position_fraction_bits;
  s.position[0] = quantize_fixed(position.x, pf, limits.position_max);
  s.position[1] = quantize_fixed(position.y, pf, limits.position_max);
  s.position[2] = quantize_fixed(position.z, pf, limits.position_max);
  quantize_orientation(orientation, config.orientation_bits, &s.orientation_largest, s.orientation);
  s.at_rest = at_rest ? 1 : 0;
  if (!at_rest) {
    const unsigned lf = config.linear_velocity_fraction_bits;
    const unsigned af = config.angular_velocity_fraction_bits;
    const int32_t lm = limits.linear_velocity_max;
    const int32_t am = limits.angular_velocity_max;
    s.linear_velocity[0] = static_cast<int16_t>(quantize_fixed(linear_velocity.x, lf, lm));
    s.linear_velocity[1] = static_cast<int16_t>(quantize_fixed(linear_velocity.y, lf, lm));
    s.linear_velocity[2] = static_cast<int16_t>(quantize_fixed(linear_velocity.z, lf, lm));
    s.angular_velocity[0] = static_cast<int16_t>(quantize_fixed(angular_velocity.x, af, am));
    s.angular_velocity[1] = static_cast<int16_t>(quantize_fixed(angular_velocity.y, af, am));
    s.angular_velocity[2] = static_cast<int16_t>(quantize_fixed(angular_velocity.z, af, am));
  }
  return s;
}

DequantizedState dequantize_state(const QuantizedState& s, const QuantizationConfig& config) {
  DequantizedState d;
  const unsigned pf = config.position_fraction_bits;
  d.position = {dequantize_fixed(s.position[0], pf), dequantize_fixed(s.position[1], pf),
                dequantize_fixed(s.position[2], pf)};
  d.orientation = dequantize_orientation(s.orientation_largest, s.orientation, config.orientation_bits);
  const unsigned lf = config.linear_velocity_fraction_bits;
  const unsigned af = config.angular_velocity_fraction_bits;
  d.linear_velocity = {dequantize_fixed(s.linear_velocity[0], lf), dequantize_fixed(s.linear_velocity[1], lf),
                       dequantize_fixed(s.linear_velocity[2], lf)};
  d.angular_velocity = {dequantize_fixed(s.angular_velocity[0], af), dequantize_fixed(s.angular_velocity[1], af),
                        dequantize_fixed(s.angular_velocity[2], af)};
  d.at_rest = s.at_rest != 0;
  return d;
}

bool is_within_limits(const QuantizedState& s, const QuantizationLimits& limits) {
  for (int i = 0; i < 3; ++i) {
    if (s.position[i] > limits.position_max || s.position[i] < -limits.position_max) return false;
    if (s.linear_velocity[i] > limits.linear_velocity_max || s.linear_velocity[i] < -limits.linear_velocity_max)
      return false;
    if (s.angular_velocity[i] > limits.angular_velocity_max || s.angular_velocity[i] < -limits.angular_velocity_max)
      return false;
    if (s.orientation[i] > limits.orientation_max) return false;
  }
  if (s.orientation_largest > 3 || s.at_rest > 1) return false;
  if (s.at_rest == 1) {
    for (int i = 0; i < 3; ++i) {
      if (s.linear_velocity[i] != 0 || s.angular_velocity[i] != 0) return false;
    }
  }
  return true;
}

}  // namespace impulse::wire
