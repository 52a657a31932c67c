// ServerCore's joints: who may create, destroy and drive them (--authority owner, the joint
// quotas, the anchors' reach), and how every session hears of them: a JointAdded when a joint is
// created or, for joints older than the session, a few per update until it has heard of all;
// a JointRemoved when one is destroyed, breaks, or loses a body. Joint events ride the reliable
// event channel (docs/PROTOCOL.md, "Joint events").
#include <spdlog/spdlog.h>

#include "server/app/scene.h"
#include "server/app/server_core.h"
#include "server/net/address_prefix.h"
#include "server/physics/narrowphase.h"

namespace impulse::server {

namespace {

using wire::Message;
using wire::ResultCode;

// A new session hears of the joints older than it at most this many per update, and only while
// its event channel holds fewer than kJointAnnounceBelow events, so a large scene's joints never
// push its contact events out of the ring (kMaxPendingEvents).
constexpr uint32_t kJointAnnouncementsPerUpdate = 64;
constexpr size_t kJointAnnounceBelow = kMaxPendingEvents / 4;
// Empty joint slots a walk looks at per update, with the announcements: bounds its cost.
constexpr uint32_t kJointSlotsPerUpdate = 4096;

static_assert(static_cast<int>(wire::JointKind::Point) == static_cast<int>(physics::JointKind::Point) &&
                  static_cast<int>(wire::JointKind::Hinge) == static_cast<int>(physics::JointKind::Hinge) &&
                  static_cast<int>(wire::JointKind::Distance) == static_cast<int>(physics::JointKind::Distance) &&
                  static_cast<int>(wire::JointKind::Fixed) == static_cast<int>(physics::JointKind::Fixed) &&
                  static_cast<int>(wire::JointKind::Slider) == static_cast<int>(physics::JointKind::Slider) &&
                  static_cast<int>(wire::JointKind::SwingTwist) == static_cast<int>(physics::JointKind::SwingTwist),
              "a JointAdded's detail is the physics JointKind");

wire::JointRemovedReason removed_reason(physics::JointRemoval reason) {
  switch (reason) {
    case physics::JointRemoval::Destroyed: return wire::JointRemovedReason::Destroyed;
    case physics::JointRemoval::Broken: return wire::JointRemovedReason::Broken;
    case physics::JointRemoval::BodyGone: return wire::JointRemovedReason::BodyGone;
  }
  return wire::JointRemovedReason::Destroyed;
}

template <class Map, class Key>
uint32_t count_of(const Map& map, const Key& key) {
  const auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

template <class Map, class Key>
void decrement(Map& map, const Key& key) {
  const auto it = map.find(key);
  if (it != map.end() && --it->second == 0) map.erase(it);
}

}  // namespace

bool ServerCore::add_joints(std::span<const SceneJoint> joints, std::span<const ObjectID> body_ids, std::string* error) {
  for (size_t i = 0; i < joints.size(); ++i) {
    const SceneJoint& sj = joints[i];
    const auto body = [&](int index) {
      return index >= 0 && static_cast<size_t>(index) < body_ids.size() ? body_ids[static_cast<size_t>(index)] : ObjectID{};
    };
    physics::JointDesc desc = sj.desc;
    desc.body_a = body(sj.body_a);
    desc.body_b = body(sj.body_b);
    const physics::World::JointResult r = world_.create_joint(desc);
    if (r.error != physics::Error::Ok) {
      if (error) {
        *error = fmt::format("joints[{}]{}: the world refused it: {}", i,
                             sj.name.empty() ? std::string{} : fmt::format(" (\"{}\")", escape_for_log(sj.name)),
                             r.error == physics::Error::StaleId
                                 ? "a body is missing"
                                 : "one of its bodies must be dynamic, and a distance joint's ends must differ");
      }
      return false;
    }
    note_joint_added(r.id, 0, Endpoint{});
  }
  joint_events_.clear();  // no session yet; each hears of these joints when it starts
  joint_event_fields_.clear();
  joint_event_serials_.clear();
  return true;
}

wire::ResultCode ServerCore::authorize_joint(const PendingRequest& r, std::string_view* message) const {
  if (r.type != Message::CreateJoint) {
    // DestroyJoint, SetJointMotor: a dead id passes, and the World answers StaleId.
    if (authority_any_ || r.id.index >= joint_owners_.size()) return ResultCode::Ok;
    const JointOwnership& o = joint_owners_[r.id.index];
    if (o.generation != r.id.generation || o.client_id == r.client_id) return ResultCode::Ok;
    if (o.client_id == 0 && r.type == Message::SetJointMotor) return ResultCode::Ok;  // the scene's: everyone drives
    *message = o.client_id == 0 ? "id: scene joints cannot be destroyed by clients (--authority owner)"
                                : "id: the joint belongs to another client";
    return ResultCode::NotOwner;
  }
  const physics::JointDesc& j = r.joint;
  // A dead body: the World answers StaleId.
  if (!world_.is_valid(j.body_a) || (!j.body_b.is_null() && !world_.is_valid(j.body_b))) return ResultCode::Ok;
  if (!authority_any_) {
    bool own = false;
    for (const ObjectID body : {j.body_a, j.body_b}) {
      if (body.is_null()) continue;
      const Ownership* o = body.index < owners_.size() && owners_[body.index].generation == body.generation
                               ? &owners_[body.index]
                               : nullptr;
      if (o != nullptr && o->client_id != 0 && o->client_id == r.client_id) {
        own = true;
        continue;
      }
      const std::optional<physics::BodyState> state = world_.get_object(body);
      const bool scene_static = (o == nullptr || o->client_id == 0) && state && state->kind == physics::BodyKind::Static;
      if (!scene_static) {
        *message = "body_a, body_b: a client may join its own bodies only, to each other, to static scene bodies "
                   "or to the world (--authority owner)";
        return ResultCode::NotOwner;
      }
    }
    if (!own) {
      *message = "body_a, body_b: one of the two must be the client's own body (--authority owner)";
      return ResultCode::NotOwner;
    }
  }
  const auto per_client = static_cast<uint32_t>(config_.max_joints_per_client);
  if (per_client != 0 && count_of(joints_of_client_, r.client_id) >= per_client) {
    refusal_ = fmt::format("the client's live-joint quota ({} joints: --max-joints-per-client) is used up: destroy "
                           "some of its joints first",
                           per_client);
    *message = refusal_;
    return ResultCode::QuotaExceeded;
  }
  if (per_client != 0 && !token_key_ && count_of(joints_by_address_, address_prefix(r.from.address())) >= per_client) {
    refusal_ = fmt::format("this IP address's live-joint quota ({} joints: --max-joints-per-client, shared by its "
                           "anonymous sessions) is used up",
                           per_client);
    *message = refusal_;
    return ResultCode::QuotaExceeded;
  }
  if (config_.max_client_joints > 0 && client_joints_ >= static_cast<uint32_t>(config_.max_client_joints)) {
    refusal_ = fmt::format("the server's live-joint cap for all clients (--max-client-joints {}) is reached",
                           config_.max_client_joints);
    *message = refusal_;
    return ResultCode::WorldFull;
  }
  if (config_.max_client_extent > 0) {
    // An anchor lies within its body's bounding box half-diagonal plus --max-client-extent of its
    // centre: a joint acts on what is near the body, not through a lever 1e5 m long.
    const auto slack = static_cast<float>(config_.max_client_extent);
    auto reaches = [&](ObjectID body, Vec3 anchor) {
      if (body.is_null()) return true;
      const std::optional<physics::BodyState> b = world_.get_object(body);
      if (!b) return true;
      const Aabb box = physics::compute_aabb(b->shape, physics::Transform{b->position, b->orientation});
      const float radius = 0.5f * length(box.max - box.min);  // infinite for a plane: anything reaches it
      return length(anchor - b->position) <= radius + slack;
    };
    const Vec3 end_b = j.kind == physics::JointKind::Distance ? j.anchor_b : j.anchor;
    if (!reaches(j.body_a, j.anchor) || !reaches(j.body_b, end_b)) {
      refusal_ = fmt::format("anchor: each anchor must lie within its body's bounding radius + --max-client-extent "
                             "{:g} m of its centre",
                             config_.max_client_extent);
      *message = refusal_;
      return ResultCode::InvalidArgument;
    }
  }
  return ResultCode::Ok;
}

bool ServerCore::joint_added_event(ObjectID joint, wire::CollisionEvent* event, wire::JointEventFields* fields) const {
  const std::optional<physics::JointRecord> j = world_.get_joint(joint);
  if (!j) return false;
  *event = wire::CollisionEvent(world_.tick(), impulse::to_wire(j->a), impulse::to_wire(j->b), wire::to_wire(j->local_a),
                                wire::to_wire(j->local_b), 0, wire::ContactEventType::JointAdded);
  *fields = wire::JointEventFields{impulse::to_wire(joint), static_cast<uint8_t>(j->kind)};
  return true;
}

void ServerCore::note_joint_added(ObjectID joint, uint32_t client_id, const Endpoint& from) {
  if (joint_owners_.size() <= joint.index) joint_owners_.resize(joint.index + 1);
  JointOwnership& o = joint_owners_[joint.index];
  o = JointOwnership{joint.generation, client_id, false, {}, next_joint_serial_++};
  if (client_id != 0) {
    ++joints_of_client_[client_id];
    ++client_joints_;
    if (!token_key_) {
      o.charged_to_address = true;
      o.address = address_prefix(from.address());
      ++joints_by_address_[o.address];
    }
  }
  wire::CollisionEvent event;
  wire::JointEventFields fields;
  if (joint_added_event(joint, &event, &fields)) {
    joint_events_.push_back(event);
    joint_event_fields_.push_back(fields);
    joint_event_serials_.push_back(o.serial);
  }
}

void ServerCore::note_joint_removals() {
  for (const physics::RemovedJoint& g : world_.joint_removals()) {
    if (g.joint.index < joint_owners_.size() && joint_owners_[g.joint.index].generation == g.joint.generation) {
      JointOwnership& o = joint_owners_[g.joint.index];
      if (o.client_id != 0) {
        decrement(joints_of_client_, o.client_id);
        if (client_joints_ > 0) --client_joints_;
        if (o.charged_to_address) decrement(joints_by_address_, o.address);
      }
      o = JointOwnership{};
    }
    joint_events_.push_back(wire::CollisionEvent(world_.tick(), impulse::to_wire(g.a), impulse::to_wire(g.b),
                                                 wire::Vec3(0, 0, 0), wire::Vec3(0, 0, 0), 0,
                                                 wire::ContactEventType::JointRemoved));
    joint_event_fields_.push_back(
        wire::JointEventFields{impulse::to_wire(g.joint), static_cast<uint8_t>(removed_reason(g.reason))});
    joint_event_serials_.push_back(0);  // every session: one that never heard of it ignores it
  }
  world_.clear_joint_removals();
}

void ServerCore::queue_joint_events(Session& s) {
  for (size_t k = 0; k < joint_events_.size(); ++k) {
    const uint64_t serial = joint_event_serials_[k];
    if (serial == 0 || serial >= s.joint_serial_at_start) s.events.push(joint_events_[k], joint_event_fields_[k]);
  }
  // The joints older than the session, in slot order, a few at a time.
  uint32_t announced = 0;
  for (uint32_t looked = 0; s.joint_cursor < joint_owners_.size() && looked < kJointSlotsPerUpdate &&
                            announced < kJointAnnouncementsPerUpdate && s.events.pending() < kJointAnnounceBelow;
       ++looked) {
    const uint32_t slot = s.joint_cursor++;
    const JointOwnership& o = joint_owners_[slot];
    if (o.generation == 0 || o.serial >= s.joint_serial_at_start) continue;
    wire::CollisionEvent event;
    wire::JointEventFields fields;
    if (!joint_added_event(ObjectID{slot, o.generation}, &event, &fields)) continue;
    s.events.push(event, fields);
    ++announced;
  }
}

}  // namespace impulse::server
