// Rules the ServerCore files share (server_core*.cpp only; not part of ServerCore's interface):
// what a throttled client may not send, a World error as its wire result with a message naming
// the field at fault, and a client's area of interest as the snapshot sender's.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "server/net/reject_log.h"
#include "server/net/snapshot_sender.h"
#include "server/physics/settings.h"
#include "server/physics/world.h"
#include "shared/wire/codec.h"

namespace impulse::server::core_rules {

using wire::Message;
using wire::ResultCode;

// What a throttled client may not send: anything that adds a body or sets one moving.
inline bool adds_work(wire::Message type) {
  switch (type) {
    case wire::Message::CreateObject:
    case wire::Message::ApplyForce:
    case wire::Message::ApplyImpulse:
    case wire::Message::SetVelocity:
    case wire::Message::ApplyTorque:
    case wire::Message::SetAngularVelocity:
    case wire::Message::MoveKinematic:
    case wire::Message::SetState: return true;
    default: return false;
  }
}

// The wire checks mirror the World's bounds, so a World InvalidArgument after them comes from
// state the wire cannot see (the body's current velocity, its mass, its distance to the point).
// The numbers are the World's own (settings.h), formatted once.
inline std::string_view invalid_argument_message(Message type) {
  static const physics::WorldSettings s;
  static const std::string speeds = fmt::format("{:g} m/s or {:.1f} rad/s", s.max_speed, s.max_angular_speed);
  static const std::string impulse =
      fmt::format("impulse: the resulting velocity would exceed {}, or the point is too far", speeds);
  static const std::string mass = fmt::format(
      "mass: the density must be in [{:g}, {:g}] kg/m^3 and the inverse mass and inertia finite, or a value beyond "
      "the world's limit",
      physics::kMinDensity, physics::kMaxDensity);
  static const std::string force = fmt::format(
      "force: with this step's other forces it would change this body's velocity faster than {} per 1/{:g} s "
      "(force / mass, or the torque from this point through the inertia)",
      speeds, physics::kMaxPushRate);
  static const std::string torque = fmt::format(
      "torque: with this step's other torques it would change this body's angular velocity faster than {:.1f} rad/s "
      "per 1/{:g} s (inverse inertia times torque)",
      s.max_angular_speed, physics::kMaxPushRate);
  static const std::string kinematic =
      fmt::format("position, orientation: reaching the target in one step needs more than {}", speeds);
  switch (type) {
    case Message::ApplyImpulse: return impulse;
    case Message::CreateObject: return mass;
    case Message::ApplyForce: return force;
    case Message::ApplyTorque: return torque;
    case Message::SetAngularVelocity: return "angular_velocity: beyond the world's limit";
    case Message::MoveKinematic: return kinematic;
    default: return "a value is out of the world's accepted range";
  }
}

struct WorldOutcome {
  ResultCode code;
  std::string_view message;
  RejectReason reason;
};

// Maps a World error to the wire result, with a message naming the field at fault.
inline WorldOutcome describe(physics::Error error, Message type) {
  switch (error) {
    case physics::Error::Ok:
      return {ResultCode::Ok, {}, RejectReason::Count};
    case physics::Error::StaleId:
      return {ResultCode::StaleId, "id: no live object has this id (null, unknown or destroyed)",
              RejectReason::StaleId};
    case physics::Error::NotDynamic:
      return {ResultCode::NotDynamic,
              type == Message::SetVelocity || type == Message::SetAngularVelocity
                  ? "id: a static body has no velocity to set"
                  : type == Message::MoveKinematic ? "id: only a kinematic body has a target pose"
                                                   : "id: forces, torques and impulses act on dynamic bodies only",
              RejectReason::NotDynamic};
    case physics::Error::InvalidArgument:
      return {ResultCode::InvalidArgument, invalid_argument_message(type), RejectReason::InvalidArgument};
    case physics::Error::WorldFull:
      return {ResultCode::WorldFull, "the world's object limit is reached", RejectReason::WorldFull};
  }
  return {ResultCode::InvalidArgument, "unknown world error", RejectReason::InvalidArgument};
}

inline InterestArea to_interest_area(const wire::InterestArgs& a) {
  switch (a.kind) {
    case wire::InterestKind::Sphere: return InterestArea::sphere(a.center, a.radius);
    case wire::InterestKind::Box: return InterestArea::box(a.min, a.max);
    case wire::InterestKind::All: break;
  }
  return InterestArea::all();
}

}  // namespace impulse::server::core_rules
