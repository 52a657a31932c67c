// One row per message type: who sends it and how a server treats it. The codec reads the direction,
// ServerCore the session, ownership and fire-and-forget rules, the apply function, the recorder and
// the playback which requests change the world. A new request type is one row here (plus its
// decoder in server/request/decode_request.cpp, its apply case, its client call and its docs:
// docs/ARCHITECTURE.md, "Adding a request type").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "impulse/schemas/impulse_generated.h"

namespace impulse::wire {

/// How a server handles a message from a client.
enum class ClientMessageKind : uint8_t {
  None,       ///< not sent by clients
  Handshake,  ///< Connect: answered before (and without) a session
  Control,    ///< Ping, Disconnect: handled at once within a session, never queued or answered by a result
  Request,    ///< carries a request_id: admitted exactly once and in order, answered by a result
};

/// The rules of one message type (MessageRule rows are indexed by wire::Message).
struct MessageRule {
  Message type = Message::NONE;
  bool from_client = false;   ///< a client may send it (Direction::ClientToServer)
  bool from_server = false;   ///< a server may send it (Direction::ServerToClient)
  ClientMessageKind kind = ClientMessageKind::None;
  /// Names an existing object by ObjectID: the server checks ownership (--authority owner) and
  /// answers StaleId for a dead id.
  bool addresses_object = false;
  /// Applied to the world at a tick boundary (World::create_object, apply_force, ...): recorded
  /// in session recordings, re-applied by replays, refused with ReadOnly by a replay server.
  bool changes_world = false;
  /// May be sent with request_id 0: applied once if valid, never answered, never resent
  /// (per-tick controls whose next value supersedes a lost one).
  bool fire_and_forget = false;
  /// Answered at admission rather than at the next tick (it changes the session, not the world).
  bool answered_at_admission = false;
};

namespace detail {
constexpr MessageRule client_request(Message t, bool addresses_object, bool changes_world, bool fire_and_forget,
                                     bool answered_at_admission = false) {
  return MessageRule{t, true, false, ClientMessageKind::Request, addresses_object, changes_world, fire_and_forget,
                     answered_at_admission};
}
constexpr MessageRule server_message(Message t) { return MessageRule{t, false, true}; }
}  // namespace detail

inline constexpr size_t kMessageTypeCount = static_cast<size_t>(Message::MAX) + 1;

/// Every message type, in wire::Message order (checked below).
inline constexpr std::array<MessageRule, kMessageTypeCount> kMessageRules = {{
    MessageRule{Message::NONE},
    MessageRule{Message::Connect, true, false, ClientMessageKind::Handshake},
    //                      type                 object  world  fire-and-forget
    detail::client_request(Message::CreateObject, false, true, false),
    detail::client_request(Message::DestroyObject, true, true, false),
    detail::client_request(Message::ApplyForce, true, true, true),
    detail::client_request(Message::ApplyImpulse, true, true, true),
    detail::client_request(Message::SetVelocity, true, true, true),
    MessageRule{Message::Ping, true, false, ClientMessageKind::Control},
    MessageRule{Message::Disconnect, true, true, ClientMessageKind::Control},
    detail::server_message(Message::ConnectAccepted),
    detail::server_message(Message::ConnectRejected),
    detail::server_message(Message::RequestResult),
    detail::server_message(Message::Snapshot),
    detail::server_message(Message::CollisionEvents),
    detail::server_message(Message::Pong),
    detail::client_request(Message::ApplyTorque, true, true, true),
    detail::client_request(Message::SetAngularVelocity, true, true, true),
    detail::client_request(Message::Raycast, false, false, false),
    detail::server_message(Message::RaycastResult),
    detail::server_message(Message::Challenge),
    detail::client_request(Message::SetInterest, false, false, false, /*answered_at_admission=*/true),
    detail::client_request(Message::ReplayControl, false, false, false, /*answered_at_admission=*/true),
    detail::client_request(Message::SetFilter, true, true, false),
    // A per-tick control like SetVelocity: the next target supersedes a lost one.
    detail::client_request(Message::MoveKinematic, true, true, true),
    // Joints name their bodies (and DestroyJoint, SetJointMotor their joint) in their own fields:
    // ServerCore checks their ownership itself (authorize_joint), not through `id`.
    detail::client_request(Message::CreateJoint, false, true, false),
    detail::client_request(Message::DestroyJoint, false, true, false),
    detail::client_request(Message::SetJointMotor, false, true, false),
    // Redundant per-tick input: buffered by the session at arrival (like a Control message, no
    // request_id, never answered); each frame becomes pushes at its tick, journaled as requests.
    MessageRule{Message::Input, true, false, ClientMessageKind::Control},
    // Temporary ownership: the client's state of its own body (ServerCore checks the island).
    detail::client_request(Message::SetState, true, true, true),
}};

constexpr bool rules_in_order() {
  for (size_t i = 0; i < kMessageRules.size(); ++i) {
    if (static_cast<size_t>(kMessageRules[i].type) != i) return false;
  }
  return true;
}
static_assert(rules_in_order(), "kMessageRules must list every wire::Message once, in enum order");

/// The row of `type`; the NONE row (nobody sends it) for a value outside the enum.
constexpr const MessageRule& rule_of(Message type) {
  const auto i = static_cast<size_t>(type);
  return i < kMessageRules.size() ? kMessageRules[i] : kMessageRules[0];
}

/// True for the request types that change the world (all but Raycast, SetInterest, ReplayControl).
constexpr bool changes_world(Message type) { return rule_of(type).changes_world; }

}  // namespace impulse::wire
