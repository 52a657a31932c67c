// The world-changing half of a client request, shared by the server's tick (ServerCore) and the
// replay (impulse-replay verify/export), so a replay applies each request exactly as the server did.
#pragma once

#include <cstdint>
#include <optional>

#include "impulse/schemas/impulse_generated.h"
#include "server/physics/types.h"
#include "server/physics/world.h"
#include "server/request/endpoint.h"
#include "shared/wire/codec.h"
#include "shared/math.h"
#include "shared/object_id.h"

namespace impulse::server {

/// Not a client message: the server itself puts body `id` to sleep (World::put_to_sleep) because
/// its owner's bodies cost more of the tick than the owner's share (server/app/tick_budget.h).
/// It travels through the same journal as requests, so a recording replays it; the value lies
/// outside wire::Message's range (no client can send it). The body is held asleep for
/// kServerSleepHoldSeconds (World::put_to_sleep's hold): no contact wakes it meanwhile.
inline constexpr wire::Message kServerSleep = static_cast<wire::Message>(200);
/// [s] How long kServerSleep holds a body asleep: the server's throttle hold (kThrottleHold).
inline constexpr float kServerSleepHoldSeconds = 2.0f;
/// Whether a recorded request of this type changes the world (wire::changes_world, or kServerSleep).
bool changes_world_recorded(wire::Message type);

/// A verified, range-checked request waiting for the next tick boundary.
struct PendingRequest {
  wire::Message type = wire::Message::NONE;  ///< CreateObject, DestroyObject, ApplyForce, ...
  Endpoint from;                             ///< where the RequestResult / RaycastResult goes
  uint32_t client_id = 0;                    ///< the sender's session (for recordings)
  uint32_t request_id = 0;
  ObjectID id;                               ///< addressed object (not CreateObject, Raycast)
  physics::BodyDesc desc;                    ///< CreateObject only
  /// Force [N], impulse [N·s], torque [N·m], velocity [m/s], angular velocity [rad/s], the
  /// MoveKinematic target position [m] or the raycast origin [m]; world frame.
  Vec3 vector;
  std::optional<Vec3> point;                 ///< application point [m], world frame
  Vec3 translation;                          ///< Raycast only: the segment [m], world frame
  bool all_hits = false;                     ///< Raycast only: every hit instead of the closest
  bool back_faces = false;                   ///< Raycast only: a ray starting inside hits the exit
  Quat orientation;                          ///< MoveKinematic: the target; SetState: the state (normalised)
  /// SetState only (`vector` is its position [m]): velocity [m/s] and angular velocity [rad/s].
  Vec3 state_velocity;
  Vec3 state_angular_velocity;
  std::optional<physics::QueryFilter> query_filter;  ///< Raycast only: absent = every body
  bool shared = false;                       ///< CreateObject only: any client may touch it
  physics::Filter filter;                    ///< SetFilter only: the new collision filter
  /// CreateJoint only: the joint (bodies named in it; `id` stays null). DestroyJoint and
  /// SetJointMotor address their joint by `id` (a JointID).
  physics::JointDesc joint;
  physics::JointMotor motor;                 ///< SetJointMotor only
  wire::InterestArgs interest;               ///< SetInterest only
  bool rerun = false;                        ///< a Raycast answered again after its answer was lost
  /// Envelope.apply_tick (protocol 10): 0 = at the next tick boundary; T = before the step of
  /// tick T (held until then; applied at the next boundary when T has passed).
  uint64_t apply_tick = 0;
  /// Raycast only (lag compensation): 0 = the present; else the tick the client rendered, plus
  /// seen_fraction in [0, 1) of the way to the next one.
  uint64_t seen_tick = 0;
  float seen_fraction = 0.0f;
  /// A push made from an Input frame (counted as input frames, not as requests answered).
  bool from_input = false;
  // ReplayControl only (impulse-replay serve).
  wire::ReplayAction replay_action = wire::ReplayAction::Pause;
  uint64_t replay_tick = 0;                  ///< Seek target
  float replay_speed = 1.0f;                 ///< SetSpeed, times the recorded tick rate
};

/// What applying one request did to the world.
struct AppliedRequest {
  physics::Error error = physics::Error::Ok;
  /// CreateObject: the new object, CreateJoint: the new joint (null on error); other types: the
  /// addressed id.
  ObjectID id;
};

/// Applies one world-changing request to `world` (World::create_object, destroy_object,
/// apply_force, ...). `dt` [s] is the step that follows (MoveKinematic reaches its target in it). Requests that do not change the world (Raycast, unknown types) leave it
/// untouched and return InvalidArgument. Deterministic: the same world and request give the same
/// result and the same world, bit for bit.
AppliedRequest apply_to_world(physics::World& world, const PendingRequest& request, float dt);

/// The wire result code the server answers for a World error.
wire::ResultCode to_result_code(physics::Error error);

}  // namespace impulse::server
