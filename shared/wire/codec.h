// Wire codec shared by server and client: datagram verification, range checks and message
// builders over the FlatBuffers schema in schemas/impulse.fbs. Nothing here asserts or throws on
// wire data: every failure is a reason code the caller counts and logs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <flatbuffers/flatbuffers.h>

#include "impulse/schemas/impulse_generated.h"
#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse::wire {

inline constexpr uint16_t kProtocolVersion = 1;
/// No datagram larger than this is ever sent or accepted [bytes].
inline constexpr size_t kMaxDatagramBytes = 1200;
/// Longest client name or message string accepted [bytes].
inline constexpr size_t kMaxStringBytes = 256;

/// Why a datagram was dropped before any use. Each is counted by the receiver.
enum class DropReason : uint8_t {
  None = 0,
  Empty,            ///< zero bytes, or too short to hold a root offset
  Oversized,        ///< larger than kMaxDatagramBytes
  BadIdentifier,    ///< file identifier is not "IMPL"
  VerifyFailed,     ///< the FlatBuffers Verifier rejected the buffer
  VersionMismatch,  ///< envelope protocol_version != kProtocolVersion
  NoMessage,        ///< the union is empty or of an unknown type
  WrongDirection,   ///< a server message sent to the server, or the reverse
  Count,
};
const char* to_string(DropReason reason);

enum class Direction : uint8_t { ClientToServer, ServerToClient };

/// A datagram that passed verification; `envelope` points into the caller's buffer and lives as
/// long as that buffer. When reason != None, envelope is null except for VersionMismatch, where
/// it is kept so a server can answer a Connect with ConnectRejected.
struct Verified {
  const Envelope* envelope = nullptr;
  DropReason reason = DropReason::None;
};

/// Verifies size, identifier, FlatBuffers structure (Verifier with depth and table limits),
/// protocol version and message direction. O(size).
Verified verify_datagram(std::span<const uint8_t> bytes, Direction expected);

/// Result of a semantic range check on a verified request.
struct Check {
  ResultCode code = ResultCode::Ok;
  std::string_view message;  ///< static string naming the field, e.g. "mass must be > 0 and finite"
};

/// Range checks that Verifier cannot do: finite numbers, documented bounds, mass > 0, extents.
Check check_request(const CreateObject& m);
Check check_request(const ApplyForce& m);
Check check_request(const ApplyImpulse& m);
Check check_request(const SetVelocity& m);

/// Converts between wire and maths vectors.
inline Vec3 to_vec3(const wire::Vec3& v) { return {v.x(), v.y(), v.z()}; }
inline wire::Vec3 to_wire(const impulse::Vec3& v) { return wire::Vec3(v.x, v.y, v.z); }

/// Builders: each resets `fbb`, writes one finished Envelope (with identifier and version) and
/// returns its bytes, valid until `fbb` is next used.
std::span<const uint8_t> finish(flatbuffers::FlatBufferBuilder& fbb, Message type,
                                flatbuffers::Offset<void> message);

}  // namespace impulse::wire
