// From a verified client datagram to a PendingRequest: one decoder per request type, in a table
// indexed by wire::Message beside wire::kMessageRules. Each decoder range-checks first
// (wire::check_request) and fills the request only when the check passes, so nothing invalid is
// ever queued.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "impulse/schemas/impulse_generated.h"
#include "server/request/apply_request.h"
#include "shared/wire/codec.h"

namespace impulse::server {

/// What a request's range check needs beyond the datagram.
struct DecodeContext {
  /// A replay server's recorded tick range [first, last], for ReplayControl's Seek; nullopt on a
  /// live server, which answers ReplayControl with NotAReplay.
  std::optional<std::pair<uint64_t, uint64_t>> replay_ticks;
};

/// A decoded request: type, request_id and the addressed id always; the rest only when the
/// check passed.
struct DecodedRequest {
  PendingRequest request;
  wire::Check check;  ///< Ok, or the refusal (InvalidArgument, NotAReplay) with its message
};

/// Decodes `envelope` if it holds a request (a wire::ClientMessageKind::Request row) and returns
/// true; false for any other message (Connect, Ping, Disconnect, server messages), untouched.
/// The envelope must have passed wire::verify_datagram.
bool decode_request(const wire::Envelope& envelope, const DecodeContext& context, DecodedRequest* out);

/// The world's description of a CreateObject that passed wire::check_request (the orientation
/// normalised, absent fields at their defaults).
physics::BodyDesc to_body_desc(const wire::CreateObject& m);

}  // namespace impulse::server
