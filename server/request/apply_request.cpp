// One switch from request type to World command, used by the live server and by the replay.
#include "server/request/apply_request.h"

#include <cmath>

#include "shared/wire/messages.h"

namespace impulse::server {

using wire::Message;

AppliedRequest apply_to_world(physics::World& world, const PendingRequest& r, float dt) {
  AppliedRequest out;
  out.id = r.id;
  if (r.type == kServerSleep) {  // outside wire::Message's range: not a case of the switch
    out.error = world.put_to_sleep(r.id, static_cast<uint32_t>(std::lround(kServerSleepHoldSeconds / dt)));
    return out;
  }
  switch (r.type) {
    case Message::CreateObject: {
      const physics::CreateResult created = world.create_object(r.desc);
      out.error = created.error;
      out.id = created.id;
      break;
    }
    case Message::DestroyObject: out.error = world.destroy_object(r.id); break;
    case Message::ApplyForce: out.error = world.apply_force(r.id, r.vector, r.point); break;
    case Message::ApplyImpulse: out.error = world.apply_impulse(r.id, r.vector, r.point); break;
    case Message::SetVelocity: out.error = world.set_velocity(r.id, r.vector); break;
    case Message::ApplyTorque: out.error = world.apply_torque(r.id, r.vector); break;
    case Message::SetAngularVelocity: out.error = world.set_angular_velocity(r.id, r.vector); break;
    case Message::SetFilter: out.error = world.set_filter(r.id, r.filter); break;
    case Message::MoveKinematic: out.error = world.move_kinematic(r.id, r.vector, r.orientation, dt); break;
    case Message::SetState:
      out.error = world.set_state(r.id, r.vector, r.orientation, r.state_velocity, r.state_angular_velocity);
      break;
    case Message::CreateJoint: {
      const physics::World::JointResult created = world.create_joint(r.joint);
      out.error = created.error;
      out.id = created.id;
      break;
    }
    case Message::DestroyJoint: out.error = world.destroy_joint(r.id); break;
    case Message::SetJointMotor: out.error = world.set_joint_motor(r.id, r.motor); break;
    // Not world changes (wire::changes_world is false for each): never queued for a tick. Listed
    // rather than defaulted, so that a new message type without a case here fails the build
    // (-Wswitch, an error under the CI's -Werror).
    case Message::NONE:
    case Message::Connect:
    case Message::Ping:
    case Message::Disconnect:
    case Message::ConnectAccepted:
    case Message::ConnectRejected:
    case Message::RequestResult:
    case Message::Snapshot:
    case Message::CollisionEvents:
    case Message::Pong:
    case Message::Raycast:
    case Message::RaycastResult:
    case Message::Challenge:
    case Message::SetInterest:
    case Message::ReplayControl:
    case Message::Input:
      out.error = physics::Error::InvalidArgument;
      break;
  }
  return out;
}

bool changes_world_recorded(wire::Message type) { return type == kServerSleep || wire::changes_world(type); }

wire::ResultCode to_result_code(physics::Error error) {
  switch (error) {
    case physics::Error::Ok: return wire::ResultCode::Ok;
    case physics::Error::StaleId: return wire::ResultCode::StaleId;
    case physics::Error::NotDynamic: return wire::ResultCode::NotDynamic;
    case physics::Error::InvalidArgument: return wire::ResultCode::InvalidArgument;
    case physics::Error::WorldFull: return wire::ResultCode::WorldFull;
  }
  return wire::ResultCode::InvalidArgument;
}

}  // namespace impulse::server
