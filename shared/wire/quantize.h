// Wire quantisation of object state: fixed-point position within a world bound, smallest-three
// orientation, bounded fixed-point velocities and an at-rest flag. Glenn Fiedler, "Snapshot
// Compression" (gafferongames.com, 2015). The server simulates at full precision; only the
// snapshot payload (shared/wire/snapshot_codec.h) carries these integers.
#pragma once

#include <cstdint>
#include <string>

#include "shared/math.h"

// Vec3 and Quat are written impulse::Vec3 / impulse::Quat here: impulse::wire also holds the
// FlatBuffers structs of the same names (impulse_generated.h), and this header may come after it.

namespace impulse::wire {

/// Largest accepted QuantizationConfig::world_bound_m [m]: 2^15, so that the default position
/// step (2^-9 m) still fits world_bound_m * 2^position_fraction_bits <= 2^24.
inline constexpr float kMaxWorldBoundM = 32768.0f;

/// Quantisation settings shared by server and client: the server sends these fields in
/// ConnectAccepted and both ends must use the same values. Every resolution is a power of two, so
/// dequantisation is exact in float (q * 2^-bits) and the position error is at most half a step.
struct QuantizationConfig {
  /// Objects with |position component| > world_bound_m cannot be represented: they are never
  /// relevant to any client (a client that held one gets an exit). Need not be a power of two.
  /// (0, kMaxWorldBoundM] m, and world_bound_m * 2^position_fraction_bits <= 2^24.
  float world_bound_m = 1024.0f;
  /// Position step 2^-bits m: 9 -> 1/512 m, error <= 1/1024 m (0.98 mm) per axis. [0, 20].
  uint8_t position_fraction_bits = 9;
  /// Bits per smallest-three component, [6, 15]: 2 + 3 * bits per orientation (10 -> 32 bits).
  uint8_t orientation_bits = 10;
  /// |linear velocity component| bound [m/s]; larger components are clamped to it.
  float max_linear_speed = 64.0f;
  /// Linear velocity step 2^-bits m/s: 7 -> 1/128 m/s (error <= 3.9 mm/s). [0, 15], and
  /// max_linear_speed * 2^bits in [1, 32767] (the quantised value is an int16).
  uint8_t linear_velocity_fraction_bits = 7;
  /// |angular velocity component| bound [rad/s]; larger components are clamped to it.
  float max_angular_speed = 32.0f;
  /// Angular velocity step 2^-bits rad/s: 7 -> 1/128 rad/s. Same limits as the linear one.
  uint8_t angular_velocity_fraction_bits = 7;

  /// True when every field is within its documented range; otherwise false and, if `error` is
  /// not null, one line naming the first bad field.
  bool validate(std::string* error) const;

  friend bool operator==(const QuantizationConfig&, const QuantizationConfig&) = default;
};

/// The integer limits and full-state field widths derived from a valid config.
struct QuantizationLimits {
  int32_t position_max = 0;          ///< |quantised position component| <= this
  int32_t linear_velocity_max = 0;   ///< |quantised velocity component| <= this
  int32_t angular_velocity_max = 0;  ///< |quantised angular velocity component| <= this
  uint32_t orientation_max = 0;      ///< smallest-three component in [0, this] (2^bits - 1)
  uint8_t position_bits = 0;         ///< width of one position component in a full state
  uint8_t linear_velocity_bits = 0;
  uint8_t angular_velocity_bits = 0;
  uint8_t orientation_bits = 0;      ///< per smallest-three component
};

/// Limits of `config`, which must be valid (see QuantizationConfig::validate).
/// position_max = floor(world_bound_m * 2^position_fraction_bits); a component is sent in a full
/// state as (q + position_max) in ceil(log2(2 * position_max + 1)) bits (21 for the defaults);
/// the velocities likewise (15 and 14 bits for the defaults).
QuantizationLimits derive_limits(const QuantizationConfig& config);

/// One object's state as integers. Compared bit-exactly (operator==) to decide "changed".
/// 32 bytes, no padding. When at_rest is 1 both velocities are 0.
struct QuantizedState {
  int32_t position[3] = {0, 0, 0};            ///< world frame, units of 2^-position_fraction_bits m
  int16_t linear_velocity[3] = {0, 0, 0};     ///< units of 2^-linear_velocity_fraction_bits m/s
  int16_t angular_velocity[3] = {0, 0, 0};    ///< units of 2^-angular_velocity_fraction_bits rad/s
  uint16_t orientation[3] = {0, 0, 0};        ///< smallest three, in x, y, z, w order skipping `largest`
  uint8_t orientation_largest = 3;            ///< index (0 x, 1 y, 2 z, 3 w) of the dropped component
  uint8_t at_rest = 0;                        ///< 1: sleeping (or static) body, velocities not sent

  friend bool operator==(const QuantizedState&, const QuantizedState&) = default;
};
static_assert(sizeof(QuantizedState) == 32, "QuantizedState is stored per object in rings; keep it packed");

/// True when |each component| <= world_bound_m (NaN is not representable).
bool is_representable(impulse::Vec3 position, const QuantizationConfig& config);

/// round(v * 2^fraction_bits) (half away from zero), clamped to [-max, max]; NaN gives 0.
int32_t quantize_fixed(float v, unsigned fraction_bits, int32_t max);
/// q * 2^-fraction_bits (exact for |q| < 2^24).
float dequantize_fixed(int32_t q, unsigned fraction_bits);

/// Smallest-three quantisation of a unit quaternion (Fiedler 2015). The largest-magnitude
/// component (lowest index on ties) is dropped; the sign of the whole quaternion is chosen so the
/// dropped component is >= 0 (q and -q are the same rotation, and quantise identically). The other
/// three lie in [-1/sqrt2, 1/sqrt2] and are each mapped to round((c + 1/sqrt2) / sqrt2 * (2^N - 1)).
/// A non-finite or zero input quantises as the identity.
void quantize_orientation(impulse::Quat q, unsigned bits, uint8_t* largest, uint16_t components[3]);
/// Inverse of quantize_orientation: the three components, the dropped one as
/// sqrt(max(0, 1 - sum of squares)), then normalised. Any input integers give a finite unit quaternion.
impulse::Quat dequantize_orientation(uint8_t largest, const uint16_t components[3], unsigned bits);
/// Worst-case rotation angle between a unit quaternion and its smallest-three round trip [rad]:
/// 2 sqrt6 / (2^N - 1), reached near q = (1/2, 1/2, 1/2, 1/2) with every component off by half a
/// step. Derivation: each kept component is off by at most e = 1 / (sqrt2 (2^N - 1)); the
/// recomputed one by at most (|u| / d) sqrt3 e <= 3 e (|u| <= sqrt3/2 is the kept part, d >= 1/2
/// the dropped one), so the 4D chord is <= sqrt(3e^2 + 9e^2) = 2 sqrt3 e and the rotation angle
/// twice that. N = 10: 4.79e-3 rad (0.274 deg); N = 9: 0.548 deg. (First order in e; the test
/// checks it over random and worst-case quaternions with a 1 % allowance for float rounding.)
double max_orientation_error_rad(unsigned bits);

/// Quantises one object's state. Components beyond the velocity bounds clamp; a position beyond
/// the world bound clamps too (callers exclude such objects, see is_representable). When at_rest
/// the velocities are stored as 0. `config` must be valid.
QuantizedState quantize_state(impulse::Vec3 position, impulse::Quat orientation, impulse::Vec3 linear_velocity,
                              impulse::Vec3 angular_velocity, bool at_rest, const QuantizationConfig& config);
/// The same with the limits precomputed (derive_limits(config)), for loops over many objects.
QuantizedState quantize_state(impulse::Vec3 position, impulse::Quat orientation, impulse::Vec3 linear_velocity,
                              impulse::Vec3 angular_velocity, bool at_rest, const QuantizationConfig& config,
                              const QuantizationLimits& limits);

/// A dequantised state: SI units, world frame.
struct DequantizedState {
  impulse::Vec3 position;          ///< [m]
  impulse::Quat orientation;       ///< unit, local to world; canonical sign (the dropped component >= 0)
  impulse::Vec3 linear_velocity;   ///< [m/s]
  impulse::Vec3 angular_velocity;  ///< [rad/s]
  bool at_rest = false;
};
DequantizedState dequantize_state(const QuantizedState& state, const QuantizationConfig& config);

/// True when every field of `state` is within `limits` (the decoder's range check).
bool is_within_limits(const QuantizedState& state, const QuantizationLimits& limits);

}  // namespace impulse::wire
