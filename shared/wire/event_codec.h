// Collision event block: the bit-packed payload of CollisionEvents.packed (protocol 4). Header
// with a base tick and base sequence, then per event zig-zag deltas in exponential-Golomb codes,
// ids as in the snapshot payload, the contact point quantised like snapshot positions and the
// normal in octahedral encoding (Meyer et al., "On Floating-Point Normal Vectors", EGSR 2010;
// Cigolle et al., "A Survey of Efficient Representations for Independent Unit Vectors", JCGT
// 2014), closed by an XXH32 checksum. Bit by bit in docs/PROTOCOL.md, "Collision events".
//
// The server encodes with encode_collision_events (through wire::build_collision_events); the
// client decodes with decode_collision_events, using the QuantizationConfig of ConnectAccepted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "impulse/schemas/impulse_generated.h"
#include "shared/math.h"
#include "shared/wire/quantize.h"

namespace impulse::wire {

/// Most events one block can carry: the count is a 5-bit field. The datagram capacity
/// (collision_events_per_datagram) is below it.
inline constexpr uint32_t kMaxEventsPerBlock = 31;
/// Bits per octahedral normal component (two per normal).
inline constexpr unsigned kNormalBits = 12;
/// Largest |quantised octahedral component|: components are round(c * M), M = 2^(N-1) - 1 = 2047,
/// sent as (q + M) in kNormalBits bits, so 0 and +-1 (the axes) are exact.
inline constexpr int32_t kNormalMax = (1 << (kNormalBits - 1)) - 1;
/// Size of a block without events [bytes]: the 32-bit checksum and a 5-bit count of 0.
inline constexpr size_t kEmptyEventBlockBytes = 5;

/// The fields only joint events have (ContactEventType JointAdded and JointRemoved, protocol
/// 7), in a column beside the events: for a joint event, CollisionEvent's a and b are its bodies
/// (b null: the static world) and, for JointAdded, `point` is the anchor in A's frame and `normal`
/// the anchor in B's frame (the world frame when b is null), both [m] relative to the body's
/// centre and quantised like a contact point; a JointRemoved's point and normal are zero.
struct JointEventFields {
  uint64_t joint = 0;  ///< the JointID wire form (generation << 32 | index)
  uint8_t detail = 0;  ///< JointAdded: the JointKind; JointRemoved: the JointRemovedReason
};

/// Why a joint left the world (JointEventFields::detail of a JointRemoved).
enum class JointRemovedReason : uint8_t {
  Destroyed = 0,  ///< by a DestroyJoint (or the scene)
  Broken = 1,     ///< its reaction force or torque passed its break threshold
  BodyGone = 2,   ///< one of its bodies was destroyed or removed
};
/// JointEventFields::detail is 3 bits on the wire; these are the values a decoder accepts.
inline constexpr uint8_t kMaxJointKindDetail = static_cast<uint8_t>(JointKind::MAX);
inline constexpr uint8_t kMaxJointRemovedDetail = static_cast<uint8_t>(JointRemovedReason::BodyGone);

/// Why decode_collision_events rejected a block. A rejected block yields no event at all.
enum class EventBlockError : uint8_t {
  None = 0,
  Truncated,         ///< fewer than 5 bytes, or the block ends inside the header or an event
  BadHeader,         ///< bits left after the last event (>= 8, or non-zero padding); an unusable
                     ///< QuantizationConfig
  BadRecord,         ///< a value out of range: a point field > 2 Pmax, a normal field of 2^12 - 1,
                     ///< a joint detail out of range, a malformed or non-canonical code
  ChecksumMismatch,  ///< bytes 0..3 are not the XXH32 of the bytes after them
  Count,
};
const char* to_string(EventBlockError error);

/// Octahedral encoding of a direction into two integers in [-kNormalMax, kNormalMax] (the
/// fields are these plus kNormalMax): n / |n|_1 projected onto the octahedron, the lower half
/// (z < 0) folded over the diagonals, each coordinate rounded to the nearest multiple of
/// 1 / kNormalMax (half away from zero). Any input is encodable: a non-finite or zero vector is
/// sent as +Z. Deterministic (IEEE-754 binary32 +, -, *, / only).
void encode_octahedral_normal(impulse::Vec3 normal, int32_t* u, int32_t* v);
/// Inverse of encode_octahedral_normal: a unit vector (to float rounding) for any u, v in
/// [-kNormalMax, kNormalMax]; the six axes come out exact. Uses +, -, *, / and sqrt only, so
/// every conforming implementation gets the same bits (docs/PROTOCOL.md gives the order).
impulse::Vec3 decode_octahedral_normal(int32_t u, int32_t v);
/// Worst-case angle between a unit normal and its octahedral round trip [rad]:
/// 3 / (sqrt2 * kNormalMax) = 1.036e-3 rad (0.0594 deg). Derivation: rounding moves the
/// octahedral coordinates by at most h = 1 / (2 kNormalMax) each, so by at most sqrt2 h; the
/// unfolded octahedron is piecewise linear with Lipschitz constant sqrt3 (|dP|^2 = du^2 + dv^2 +
/// (+-du +- dv)^2 <= 3 (du^2 + dv^2)) and |P| >= 1/sqrt3 on it, so the angle is at most
/// sqrt3 * sqrt3 * sqrt2 h = 3 sqrt2 h. (Float rounding adds about 1e-7 rad; the unit test allows 1 %.)
double max_normal_error_rad();

/// Worst-case size of a block of `count` events [bytes], for any event values and any valid
/// QuantizationConfig (the widest position field, 26 bits, is assumed). Every field's code is
/// independent of the others, so the sum of the per-field maxima is an upper bound: header 199
/// bits, each event 544 bits (a contact) or 727 bits (a JointAdded). count <= kMaxEventsPerBlock.
size_t max_event_block_bytes(uint32_t count);

/// Exact size of the block encoding `events` with `config` [bytes] (computed by the encoder
/// itself). `config` must be valid and events.size() <= kMaxEventsPerBlock; otherwise 0.
/// `joints` is the joint column: empty when no event is a joint's, else one entry per event.
size_t event_block_bytes(std::span<const CollisionEvent> events, const QuantizationConfig& config,
                         std::span<const JointEventFields> joints = {});

/// Encodes `events` (at most kMaxEventsPerBlock, in any order; the server sends them in
/// ascending sequence) into *out (replaced). Every field is sent exactly except:
///  - point: quantised per axis as a snapshot position, p = round(x * 2^Fp) clamped to +-Pmax
///    (QuantizationConfig, default step 1/512 m): error <= 2^-(Fp+1) m per axis (0.98 mm by
///    default) inside the world bound; a point beyond the bound is clamped to it (its error is
///    then the distance to the bound); NaN is sent as 0;
///  - normal: octahedral, 2 x 12 bits, angle error <= max_normal_error_rad() (0.0594 deg) for a
///    unit normal.
/// Joint events (JointAdded, JointRemoved) take their joint id and detail from `joints`, one per
/// event (empty: no joint events).
/// Returns false, with *out empty, when `config` is invalid, there are too many events, or a joint
/// event has no joint column (a caller bug, never wire data). Allocates only when *out must grow.
bool encode_collision_events(std::span<const CollisionEvent> events, const QuantizationConfig& config,
                             std::vector<uint8_t>* out, std::span<const JointEventFields> joints = {});
/// The same into `out`, which must be exactly event_block_bytes(events, config, joints) long (for
/// writing straight into a FlatBuffers vector). Returns false, writing nothing, otherwise.
bool encode_collision_events(std::span<const CollisionEvent> events, const QuantizationConfig& config,
                             std::span<uint8_t> out, std::span<const JointEventFields> joints = {});

/// Decodes a block, all or nothing, into *out (cleared first; left empty on any error): the
/// checksum is checked first, then every field is range-checked. Events come out in block order
/// with the dequantised point (multiples of 2^-Fp m) and unit normal. `config` must be the
/// server's (ConnectAccepted.quantization). Never throws, asserts or reads outside `block`, for
/// any bytes; O(block size). *out grows to at most kMaxEventsPerBlock events. With `joints`, it
/// gets one entry per event (zeros for a contact's).
EventBlockError decode_collision_events(std::span<const uint8_t> block, const QuantizationConfig& config,
                                        std::vector<CollisionEvent>* out,
                                        std::vector<JointEventFields>* joints = nullptr);

}  // namespace impulse::wire
