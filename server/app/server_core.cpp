// Server tick logic: read datagrams -> apply requests -> step x n (fixed dt, capped accumulator,
// Fiedler's "Fix Your Timestep!") -> write reliable events and per-client delta snapshots.
// Sessions follow netcode.io's model (cookie round trip before any state, endpoint = identity,
// timeout on silence, explicit disconnect); time is passed in. A datagram's path through the
// ServerCore files, in order: server_core_sessions.cpp (receive, the handshake, sessions),
// server_core_admission.cpp (a request admitted, windowed, queued or held for its tick), this
// file (the tick: requests and inputs applied, steps, the world's changes noted), and
// server_core_publish.cpp (events, raycast answers and snapshots out); the tick budget that
// throttles accounts is server_core_budget.cpp.
#include "server/app/server_core.h"

#include <ctime>
#include <thread>

#include <spdlog/spdlog.h>

#include "server/app/server_core_internal.h"
#include "server/app/tick_budget.h"
#include "server/net/address_prefix.h"
#include "server/net/collision_events.h"
#include "server/record/playback.h"
#include "server/record/recorder.h"
#include "shared/wire/messages.h"

namespace impulse::server {
namespace {

using wire::Message;
using wire::ResultCode;
using namespace core_rules;

constexpr std::string_view kWakesOverBudgetMessage =
    "this tick's pushes would wake more sleeping bodies than your share of --max-wakes-per-tick; resend next tick";

constexpr std::string_view kRemovedNonFiniteMessage =
    "id: the server removed this object because its state was not finite (NaN or infinite)";

physics::WorldSettings make_settings(Vec3 gravity) {
  physics::WorldSettings settings;
  settings.gravity = gravity;
  return settings;
}

uint64_t system_unix_now() { return static_cast<uint64_t>(std::time(nullptr)); }

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(std::min(cores, 64u));
}

}  // namespace

ServerCore::ServerCore(const ServerConfig& config, Vec3 gravity, ServerStats& stats)
    : config_(config),
      stats_(stats),
      pool_(resolve_threads(config.threads)),
      world_(make_settings(gravity)),
      sessions_(static_cast<uint32_t>(config.max_clients)),
      clock_(make_step_clock(config.tick_hz, config.max_steps_per_frame, TimePoint{})),
      dt_(1.0f / static_cast<float>(config.tick_hz)),
      client_timeout_(std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(config.client_timeout_s))),
      authority_any_(config.authority == "any"),
      unix_now_(&system_unix_now) {
  queue_.reserve(256);
  address_quota_ = static_cast<uint32_t>(config.max_objects_per_address < 0 ? config.max_objects_per_client
                                                                            : config.max_objects_per_address);
  destroy_on_disconnect_ = config.on_disconnect != "keep";
  // Both in whole ticks, rounded up; the history also keeps the present tick.
  const auto ticks_of = [&](int ms) { return (static_cast<uint64_t>(ms) * config.tick_hz + 999) / 1000; };
  max_lead_ticks_ = std::min<uint64_t>(ticks_of(config.max_input_lead_ms), InputBuffer::kMaxLeadTicks);
  if (config.lag_compensation_ms > 0) history_ = PoseHistory(static_cast<uint32_t>(ticks_of(config.lag_compensation_ms) + 1));
  world_.set_worker_pool(&pool_);
  sender_config_.quant.world_bound_m = static_cast<float>(config.world_bound);
  sender_config_.quant.position_fraction_bits = static_cast<uint8_t>(config.position_fraction_bits);
}

ServerCore::~ServerCore() = default;

bool ServerCore::init_security(std::string* error) {
  if (!security::init_crypto(error)) return false;
  cookie_key_ = security::make_cookie_key();
  if (config_.token_key_file.empty()) {
    spdlog::warn("no --token-key: anonymous clients are accepted (fine for local use; give --token-key FILE "
                 "in production so only clients with a token from your backend can connect)");
    return true;
  }
  security::TokenKey key;
  std::string warning;
  if (!security::load_token_key(config_.token_key_file, &key, error, &warning)) return false;
  if (!warning.empty()) spdlog::warn("{}", warning);
  const auto id = security::token_key_id(key);
  spdlog::info("connect tokens required: key {} (id {:02x}{:02x}{:02x}{:02x})", config_.token_key_file, id[0], id[1],
               id[2], id[3]);
  token_key_ = key;
  return true;
}

bool ServerCore::add_bodies(std::span<const physics::BodyDesc> bodies, std::string* error, std::vector<ObjectID>* ids) {
  for (size_t i = 0; i < bodies.size(); ++i) {
    physics::BodyDesc desc = bodies[i];
    // A scene's hull, mesh or heightfield (Scene's tables) becomes the World's own.
    std::string why;
    const std::optional<physics::Shape> shape = adopt_shape(world_, desc.shape, &why);
    if (!shape) {
      if (error) *error = fmt::format("bodies[{}]: the world refused its {}", i, why);
      return false;
    }
    desc.shape = *shape;
    const physics::CreateResult r = world_.create_object(desc);
    if (r.error != physics::Error::Ok) {
      if (error) *error = fmt::format("bodies[{}]: the world refused it: {}", i, describe(r.error, Message::CreateObject).message);
      return false;
    }
    if (owners_.size() <= r.id.index) owners_.resize(r.id.index + 1);
    owners_[r.id.index] = Ownership{r.id.generation, 0, true, false, {}};  // the scene: everyone may push it
    journal_.scene_body(r.id, bodies[i]);
    if (ids != nullptr) ids->push_back(r.id);
  }
  publish_stats();
  return true;
}

bool ServerCore::add_material_pairs(std::span<const SceneMaterialPair> pairs, std::string* error) {
  for (size_t i = 0; i < pairs.size(); ++i) {
    const SceneMaterialPair& p = pairs[i];
    if (world_.set_material_pair(p.a, p.b, physics::MaterialPair{p.friction, p.restitution}) != physics::Error::Ok) {
      if (error) *error = fmt::format("material_pairs[{}]: the world refused it (friction >= 0, restitution in [0, 1])", i);
      return false;
    }
  }
  return true;
}

void ServerCore::start(TimePoint now) {
  clock_ = make_step_clock(config_.tick_hz, config_.max_steps_per_frame, now);
  epoch_ = now;
  if (playback_) playback_->start(now);
}

std::chrono::nanoseconds ServerCore::time_to_next_step() const {
  return playback_ ? playback_->time_to_next_tick(clock_) : server::time_to_next_step(clock_);
}

uint32_t ServerCore::owner_of(ObjectID id) const {
  if (id.index >= owners_.size() || owners_[id.index].generation != id.generation) return 0;
  return owners_[id.index].client_id;
}

std::optional<ServerCore::ObjectOwnership> ServerCore::ownership(uint32_t index, uint32_t generation,
                                                                bool has_generation) const {
  const bool recorded = index < owners_.size();
  if (!has_generation) {
    if (!recorded) return std::nullopt;  // without a record of the slot, its generation is unknown
    generation = owners_[index].generation;
  }
  const ObjectID id{index, generation};
  if (!world_.is_valid(id)) return std::nullopt;
  ObjectOwnership o{id, 0, true};
  if (recorded && owners_[index].generation == generation) {
    o.owner = owners_[index].client_id;
    o.shared = owners_[index].shared;
  }
  return o;
}

uint32_t ServerCore::live_objects_of(uint32_t client_id) const {
  const auto it = live_objects_.find(client_id);
  return it == live_objects_.end() ? 0 : it->second;
}

uint32_t ServerCore::live_objects_of_address(const asio::ip::address& address) const {
  const auto it = live_by_address_.find(address_prefix(address));
  return it == live_by_address_.end() ? 0 : it->second;
}

void ServerCore::apply_tick_inputs(TimePoint now, Outbox& out) {
  const uint64_t tick = world_.tick() + 1;
  bool applied = false;
  while (!held_.empty() && held_.begin()->first <= tick) {
    const PendingRequest& r = held_.begin()->second;
    if (Session* s = sessions_.find(r.from); s != nullptr && s->held_actions > 0) --s->held_actions;
    apply_request(r, now, out);
    held_.erase(held_.begin());
    applied = true;
  }
  // Each frame becomes the pushes of its mode (wire::InputMode), with request_id 0: applied,
  // authorised and journaled like fire-and-forget pushes, so a recording replays them as such.
  input_pushes_.clear();
  tick_inputs_.clear();
  for (Session& s : sessions_.sessions()) {
    const InputCounts before = s.inputs.counts();
    s.inputs.take(tick, [&](ObjectID id, const InputValue& v, uint32_t repeats) {
      // Relayed to the other sessions that see the body (write_snapshots), applied or not.
      tick_inputs_.push_back(TickInput{
          s.client_id, Vec3{},
          wire::RelayedInput(impulse::to_wire(id), wire::InputFrame(wire::to_wire(v.linear), wire::to_wire(v.angular)), v.mode,
                             static_cast<uint8_t>(std::min<uint32_t>(repeats, UINT8_MAX)))});
      PendingRequest r;
      r.from = s.endpoint;
      r.client_id = s.client_id;
      r.id = id;
      r.from_input = true;
      const bool force = v.mode == wire::InputMode::Force;
      const bool idle = world_.is_asleep(id);  // a zero input leaves a sleeping body asleep
      const Vec3 zero{};
      if (!(idle && v.linear == zero)) {
        r.type = force ? Message::ApplyForce : Message::SetVelocity;
        r.vector = v.linear;
        if (!(force && v.linear == zero)) input_pushes_.push_back(r);
      }
      if (!(idle && v.angular == zero)) {
        r.type = force ? Message::ApplyTorque : Message::SetAngularVelocity;
        r.vector = v.angular;
        if (!(force && v.angular == zero)) input_pushes_.push_back(r);
      }
    });
    const InputCounts& after = s.inputs.counts();
    stats_.input_frames_applied.fetch_add(after.applied - before.applied, std::memory_order_relaxed);
    stats_.input_frames_repeated.fetch_add(after.repeated - before.repeated, std::memory_order_relaxed);
    stats_.input_buffered_ticks.fetch_add(after.buffered_sum - before.buffered_sum, std::memory_order_relaxed);
  }
  for (const PendingRequest& r : input_pushes_) apply_request(r, now, out);
  if (applied || !input_pushes_.empty()) note_joint_removals();
}

wire::ResultCode ServerCore::authorize(const PendingRequest& r, std::string_view* message) const {
  if (r.type == Message::CreateObject) {
    const Session* s = nullptr;
    for (const Session& candidate : sessions_.sessions()) {
      if (candidate.client_id == r.client_id) s = &candidate;
    }
    const uint32_t quota = s ? s->max_objects : static_cast<uint32_t>(config_.max_objects_per_client);
    if (quota != 0 && live_objects_of(r.client_id) >= quota) {
      refusal_ = fmt::format("the client's live-object quota ({} objects: --max-objects-per-client or its token) is "
                             "used up: destroy some of its objects first",
                             quota);
      *message = refusal_;
      return ResultCode::QuotaExceeded;
    }
    if (!token_key_ && address_quota_ != 0 && live_objects_of_address(r.from.address()) >= address_quota_) {
      refusal_ = fmt::format("this IP address's live-object quota ({} objects: --max-objects-per-address; its "
                             "anonymous sessions share it, objects kept after they left included) is used up",
                             address_quota_);
      *message = refusal_;
      return ResultCode::QuotaExceeded;
    }
    return check_client_body(r, message);
  }
  if (r.type == Message::CreateJoint || r.type == Message::DestroyJoint || r.type == Message::SetJointMotor) {
    return authorize_joint(r, message);
  }
  if (r.type == Message::SetState) return authorize_state(r, message);
  if (!wire::rule_of(r.type).addresses_object || authority_any_) return ResultCode::Ok;
  if (r.id.index >= owners_.size()) return ResultCode::Ok;  // the World answers StaleId
  const Ownership& o = owners_[r.id.index];
  if (r.type == Message::DestroyObject && o.generation == r.id.generation && o.client_id == 0 &&
      !o.removed_non_finite) {
    *message = "id: scene bodies cannot be destroyed by clients (--authority owner)";
    return ResultCode::NotOwner;
  }
  if (o.generation != r.id.generation || o.shared || o.client_id == r.client_id) return ResultCode::Ok;
  *message = "id: the object belongs to another client and was not created as shared";
  return ResultCode::NotOwner;
}

wire::ResultCode ServerCore::authorize_state(const PendingRequest& r, std::string_view* message) const {
  // Temporary ownership (seed 001): a client may simulate an island that holds no other client's
  // body and send its state. It trades security for feel: within the bounds below, the client's
  // word is the world's (docs/SECURITY.md).
  if (!config_.temporary_ownership) {
    *message = "SetState: temporary ownership is off on this server (--temporary-ownership)";
    return ResultCode::NotOwner;
  }
  const std::optional<physics::BodyState> now = world_.get_object(r.id);
  if (!now) return ResultCode::Ok;  // the World answers StaleId
  if (r.id.index >= owners_.size() || owners_[r.id.index].generation != r.id.generation ||
      owners_[r.id.index].client_id != r.client_id) {
    *message = "id: only the client that created a body may send its state";
    return ResultCode::NotOwner;
  }
  // The island: the bodies joined to this one through contacts (static bodies join nothing), at
  // most kMaxStateIsland of them. Joints cannot reach another client's body (authorize_joint).
  island_.assign(1, r.id);
  for (size_t k = 0; k < island_.size(); ++k) {
    for (const physics::Contact& c : world_.get_collisions_for(island_[k])) {
      const ObjectID other = c.a == island_[k] ? c.b : c.a;
      const std::optional<physics::BodyState> body = world_.get_object(other);
      if (!body || body->kind == physics::BodyKind::Static) continue;
      if (std::find(island_.begin(), island_.end(), other) != island_.end()) continue;
      const uint32_t owner = owner_of(other);
      if (owner != 0 && owner != r.client_id) {
        refusal_ = fmt::format("id: another client's body ({}) is in this body's island: the server owns it again",
                               owner);
        *message = refusal_;
        return ResultCode::NotOwner;
      }
      if (island_.size() == kMaxStateIsland) {
        *message = "id: the body's island is larger than temporary ownership allows (64 bodies)";
        return ResultCode::NotOwner;
      }
      island_.push_back(other);
    }
  }
  // No teleport: the new position lies within what the body's speed (the server's or the
  // client's, the larger) covers in kStateLeadTicks ticks, plus kStateSlack; the speed changes by
  // at most kMaxStateSpeedChange.
  const float speed = std::max(length(now->velocity), length(r.state_velocity));
  const float reach = speed * dt_ * static_cast<float>(kStateLeadTicks) + kStateSlack;
  if (length(r.vector - now->position) > reach) {
    refusal_ = fmt::format("position: {:.3f} m from the server's, more than this body's speed allows ({:.3f} m): "
                           "a teleport",
                           length(r.vector - now->position), reach);
    *message = refusal_;
    return ResultCode::InvalidArgument;
  }
  if (length(r.state_velocity - now->velocity) > kMaxStateSpeedChange) {
    *message = "velocity: changes the server's by more than 5 m/s in one state";
    return ResultCode::InvalidArgument;
  }
  return ResultCode::Ok;
}

wire::ResultCode ServerCore::check_client_body(const PendingRequest& r, std::string_view* message) const {
  const physics::Shape& shape = r.desc.shape;
  if (config_.max_client_extent > 0) {
    const auto limit = static_cast<float>(config_.max_client_extent);
    bool ok = true;
    switch (shape.kind) {
      case physics::ShapeKind::Sphere: ok = shape.radius <= limit; break;
      case physics::ShapeKind::Box:
        ok = shape.half_extents.x <= limit && shape.half_extents.y <= limit && shape.half_extents.z <= limit;
        break;
      case physics::ShapeKind::Capsule: ok = shape.radius + shape.half_height <= limit; break;
      case physics::ShapeKind::Cylinder: ok = shape.radius <= limit && shape.half_height <= limit; break;
      default: ok = false; break;  // a plane is infinite: it would be tested against every moving body
    }
    if (!ok) {
      refusal_text_ = shape.kind == physics::ShapeKind::Plane
                          ? std::string("shape: clients may not create planes (--max-client-extent limits client bodies)")
                          : fmt::format("dims: a client's body must fit --max-client-extent {:g} m (radius, half extent, "
                                        "half height, or capsule half height + radius)",
                                        config_.max_client_extent);
      *message = refusal_text_;
      return ResultCode::InvalidArgument;
    }
  }
  if (config_.max_client_objects > 0 && client_objects_ >= static_cast<uint32_t>(config_.max_client_objects)) {
    refusal_text_ = fmt::format("the server's live-object cap for all clients (--max-client-objects {}) is reached",
                                config_.max_client_objects);
    *message = refusal_text_;
    return ResultCode::WorldFull;
  }
  if (config_.max_spawn_overlaps > 0 && is_finite(r.desc.position) && is_finite(r.desc.orientation)) {
    // O(awake + parked bodies near it): World::overlap_aabb tests awake bodies directly.
    Aabb box = physics::compute_aabb(shape, physics::Transform{r.desc.position, r.desc.orientation});
    const float margin = world_.settings().speculative_margin;
    box.min -= Vec3{margin, margin, margin};
    box.max += Vec3{margin, margin, margin};
    world_.overlap_aabb(box, spawn_overlaps_);
    // Static bodies are not counted: they never pair with each other, so a level of static tiles
    // costs one contact per tile a body touches, not a pile's N^2/2.
    size_t movable = 0;
    for (const ObjectID id : spawn_overlaps_) {
      const std::optional<physics::BodyState> b = world_.get_object(id);
      if (b && b->kind != physics::BodyKind::Static) ++movable;
    }
    if (movable > static_cast<size_t>(config_.max_spawn_overlaps)) {
      refusal_text_ = fmt::format("position: the new body would overlap {} dynamic or kinematic bodies, more than "
                                  "--max-spawn-overlaps {}; spawn it in free space",
                                  movable, config_.max_spawn_overlaps);
      *message = refusal_text_;
      return ResultCode::QuotaExceeded;
    }
  }
  return ResultCode::Ok;
}

void ServerCore::note_applied(const PendingRequest& r, ObjectID id) {
  if (r.type == Message::CreateJoint) {
    note_joint_added(id, r.client_id, r.from);
  } else if (r.type == Message::CreateObject) {
    if (owners_.size() <= id.index) owners_.resize(id.index + 1);
    const bool anonymous = !token_key_;
    const asio::ip::address prefix = address_prefix(r.from.address());
    owners_[id.index] = Ownership{id.generation, r.client_id, r.shared, anonymous, prefix};
    owners_[id.index].budget_slot = budget_slot_of(account_of(owners_[id.index]));
    ++live_objects_[r.client_id];
    if (r.client_id != 0) ++client_objects_;
    if (anonymous) ++live_by_address_[prefix];
  } else if (r.type == Message::DestroyObject && id.index < owners_.size()) {
    Ownership& o = owners_[id.index];
    if (o.generation == id.generation && o.client_id != 0) {
      auto it = live_objects_.find(o.client_id);
      if (it != live_objects_.end() && it->second > 0) --it->second;
      if (client_objects_ > 0) --client_objects_;
      if (o.charged_to_address) {
        auto a = live_by_address_.find(o.address);
        if (a != live_by_address_.end() && --a->second == 0) live_by_address_.erase(a);
      }
    }
    o = Ownership{};
  }
}

void ServerCore::note_removed_bodies(TimePoint now) {
  for (const ObjectID id : world_.removed_non_finite()) {
    stats_.bodies_removed_non_finite.fetch_add(1, std::memory_order_relaxed);
    uint32_t owner = 0;
    if (id.index < owners_.size() && owners_[id.index].generation == id.generation) {
      Ownership& o = owners_[id.index];
      owner = o.client_id;
      if (owner != 0) {
        auto it = live_objects_.find(owner);
        if (it != live_objects_.end() && it->second > 0) --it->second;
        if (client_objects_ > 0) --client_objects_;
      }
      if (o.charged_to_address) {
        auto a = live_by_address_.find(o.address);
        if (a != live_by_address_.end() && --a->second == 0) live_by_address_.erase(a);
        o.charged_to_address = false;
      }
      // Nobody owns it now; shared, so a request on it passes authorize() and the World answers
      // StaleId, which apply_request explains with kRemovedNonFiniteMessage.
      o.client_id = 0;
      o.shared = true;
      o.removed_non_finite = true;
    }
    rejects_.note(RejectReason::NonFiniteBody,
                  spdlog::should_log(spdlog::level::debug)
                      ? fmt::format("object {}.{} of client {}", id.index, id.generation, owner)
                      : std::string{},
                  now);
  }
}

void ServerCore::note_restored_bodies(TimePoint now) {
  for (const ObjectID id : world_.restored_non_finite()) {
    stats_.bodies_restored_non_finite.fetch_add(1, std::memory_order_relaxed);
    const uint32_t owner = id.index < owners_.size() && owners_[id.index].generation == id.generation
                               ? owners_[id.index].client_id
                               : 0;
    rejects_.note(RejectReason::RestoredNonFinite,
                  spdlog::should_log(spdlog::level::debug)
                      ? fmt::format("object {}.{} of client {} stopped; its contact group kept its step-start state",
                                    id.index, id.generation, owner)
                      : std::string{},
                  now);
  }
}

void ServerCore::apply_request(const PendingRequest& r, TimePoint now, Outbox& out) {
  if (!wire::changes_world(r.type)) return;  // Raycast: answered after the steps (answer_raycasts)
  Session* s = sessions_.find(r.from);
  std::string_view refusal;
  const ResultCode auth = authorize(r, &refusal);
  ResultCode code = auth;
  ObjectID id = r.id;
  std::string_view message = refusal;
  const bool over_wakes = auth == ResultCode::Ok && wake_level_ != UINT64_MAX && wakes_a_sleeper(r) &&
                          !take_wake(owners_[r.id.index].budget_slot);
  if (over_wakes) {
    code = ResultCode::OverBudget;
    message = kWakesOverBudgetMessage;
    rejects_.note(RejectReason::OverBudget, r.from, "sleeping bodies woken in one tick (--max-wakes-per-tick)", now);
  } else if (auth == ResultCode::Ok) {
    const AppliedRequest applied = apply_to_world(world_, r, dt_);
    const WorldOutcome outcome = describe(applied.error, r.type);
    code = outcome.code;
    id = applied.id;
    message = outcome.message;
    if (code == ResultCode::InvalidArgument && r.type == Message::CreateObject) {
      // The World's own reason names the field and its rule (the density range, for one).
      if (const char* why = physics::check_body_desc(r.desc, world_.settings())) message = why;
    }
    if (code == ResultCode::StaleId && r.id.index < owners_.size() && owners_[r.id.index].removed_non_finite &&
        owners_[r.id.index].generation == r.id.generation) {
      // How its owner learns why its object left the snapshots (docs/PROTOCOL.md).
      message = kRemovedNonFiniteMessage;
    }
    if (code != ResultCode::Ok) rejects_.note(outcome.reason, r.from, outcome.message, now);
    if (code == ResultCode::Ok) note_applied(r, id);
    // Only requests that reached the World are recorded: a replay needs nothing else.
    journal_.applied(r, outcome.code, id);
  } else {
    const RejectReason reason = auth == ResultCode::NotOwner         ? RejectReason::NotOwner
                                : auth == ResultCode::WorldFull       ? RejectReason::WorldFull
                                : auth == ResultCode::InvalidArgument ? RejectReason::InvalidArgument
                                                                      : RejectReason::QuotaExceeded;
    rejects_.note(reason, r.from, refusal, now);
  }
  if (!r.from_input) count_result(code);
  // A session that ended since keeps the effect; unsequenced requests are never answered.
  if (s == nullptr || r.request_id == 0) return;
  // The tick whose step follows: the request's effect is first in that tick's snapshot (0 when
  // it had no effect).
  const uint64_t tick = code == ResultCode::Ok ? world_.tick() + 1 : 0;
  s->requests.answer(r.request_id, code, id, message, tick);
  if (r.apply_tick != 0 && r.apply_tick < world_.tick() + 1) stats_.actions_late.fetch_add(1, std::memory_order_relaxed);
  send(*s, wire::build_request_result(fbb_, r.request_id, code, id, message, tick), now, out);
}

void ServerCore::apply_requests(TimePoint now, Outbox& out) {
  plan_wakes();
  for (const PendingRequest& r : queue_) apply_request(r, now, out);
  // After the queue, so requests a client sent before it left cannot leave objects behind.
  if (!departed_.empty()) destroy_departed();
  note_joint_removals();  // destroyed by a request, or with a body
}

size_t ServerCore::collect_step_events() {
  const auto step_events = world_.contact_events();
  const size_t room = kMaxEventsPerUpdate - events_.size();
  const size_t take = std::min(room, step_events.size());
  append_collision_events(step_events.first(take), world_.tick(), &events_);
  return step_events.size() - take;
}

int ServerCore::update(TimePoint now, Outbox& out) {
  if (playback_) return update_playback(now, out);
  const int steps = take_due_steps(clock_, now);
  if (steps > 0) {
    using SteadyClock = std::chrono::steady_clock;
    const auto t_wakeup = SteadyClock::now();
    uint64_t record_ns = 0;  // of the steps' time, spent hashing and encoding for the recorder
    apply_requests(now, out);
    events_.clear();
    size_t events_dropped = 0;
    const int phases = snapshot_phases();
    phase_due_.assign(static_cast<size_t>(phases), 0);
    const auto t_step = SteadyClock::now();
    for (int i = 0; i < steps; ++i) {
      apply_tick_inputs(now, out);
      world_.step(dt_);
      history_.record(world_);
      if (!world_.removed_non_finite().empty()) note_removed_bodies(now);
      if (!world_.restored_non_finite().empty()) note_restored_bodies(now);
      if (!world_.joint_removals().empty()) note_joint_removals();  // broken, or a body removed
      record_ns += journal_.stepped(world_);
      events_dropped += collect_step_events();
      for (int p = 0; p < phases; ++p) {
        if (is_snapshot_tick(world_.tick() + static_cast<uint64_t>(p), config_.tick_hz, config_.snapshot_hz)) {
          phase_due_[static_cast<size_t>(p)] = 1;
        }
      }
    }
    if (config_.tick_budget_ms > 0) {  // counted in the step stage
      const auto stepping = std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - t_step) -
                            std::chrono::nanoseconds(record_ns);
      charge_tick_budget(step_time_for_test_.count() > 0 ? step_time_for_test_ : stepping / steps, now);
    }
    const auto t_events = SteadyClock::now();
    answer_raycasts(out);
    if (events_dropped > 0) {
      rejects_.note(RejectReason::EventsDropped, fmt::format("{} events over the per-update cap", events_dropped), now);
    }
    // Events at the end of the wake-up in which they happened (each carries its own tick), before
    // the snapshot that shows their outcome.
    write_events(now, out);
    const auto t_snapshots = SteadyClock::now();
    if (sessions_.size() > 0) write_snapshots(now, out, phase_due_);
    const auto t_end = SteadyClock::now();
    auto ns = [](SteadyClock::duration d) {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    };
    stats_.step_ns.fetch_add(ns(t_events - t_step), std::memory_order_relaxed);
    stats_.record_ns.fetch_add(record_ns, std::memory_order_relaxed);
    // A pinned step time (tests) stands for the whole wake-up.
    last_send_ms_ = step_time_for_test_.count() > 0 ? 0.0 : std::chrono::duration<double, std::milli>(t_end - t_events).count();
    stats_.events_ns.fetch_add(ns(t_snapshots - t_events), std::memory_order_relaxed);
    stats_.snapshots_ns.fetch_add(ns(t_end - t_snapshots), std::memory_order_relaxed);
    if (sessions_.size() > 0) share_sends(t_end - t_wakeup, t_end - t_events, steps, now);
    publish_stats();
  }
  expire_sessions(now, out);
  rejects_.flush(now);
  return steps;
}

void ServerCore::count_result(ResultCode code) {
  static_assert(ServerStats::kResultCodes == static_cast<size_t>(ResultCode::MAX) + 1,
                "ServerStats::kResultCodes must cover every wire::ResultCode");
  (code == ResultCode::Ok ? stats_.requests_applied : stats_.requests_rejected).fetch_add(1, std::memory_order_relaxed);
  const auto index = static_cast<size_t>(code);
  if (index < ServerStats::kResultCodes) stats_.request_results[index].fetch_add(1, std::memory_order_relaxed);
}

void ServerCore::publish_stats() {
  stats_.tick.store(world_.tick(), std::memory_order_relaxed);
  stats_.steps_dropped.store(clock_.dropped_steps, std::memory_order_relaxed);
  stats_.objects.store(world_.object_count(), std::memory_order_relaxed);
  stats_.awake.store(world_.awake_count(), std::memory_order_relaxed);
  stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
  stats_.lag_compensation_bytes.store(history_.memory_bytes(), std::memory_order_relaxed);
  // O(bodies + contacts): once per second of ticks.
  if (world_.tick() % static_cast<uint64_t>(config_.tick_hz) == 0 || stats_.world_hash_tick.load() == 0) {
    stats_.world_hash.store(world_.world_hash(), std::memory_order_relaxed);
    stats_.world_hash_tick.store(world_.tick(), std::memory_order_relaxed);
  }
}

// --- Playback mode (impulse-replay serve) ------------------------------------------------------

bool ServerCore::start_playback(const ReplayOptions& options, std::string* error) {
  std::unique_ptr<PlaybackDriver> driver = PlaybackDriver::open(world_, options, error);
  if (!driver) return false;
  config_.tick_hz = driver->tick_hz();
  config_.snapshot_hz = driver->snapshot_hz();
  clock_ = make_step_clock(config_.tick_hz, config_.max_steps_per_frame, clock_.last);
  dt_ = driver->playback().dt();
  driver->start(clock_.last);  // start() may have run already (or runs later and restarts it)
  playback_ = std::move(driver);
  publish_stats();
  return true;
}

const record::Playback* ServerCore::playback() const { return playback_ ? &playback_->playback() : nullptr; }

bool ServerCore::playback_paused() const { return playback_ && playback_->paused(); }

double ServerCore::playback_speed() const { return playback_ ? playback_->speed() : 1.0; }

// The same wake-up as a live one, but the ticks come from the recording (its requests, then a
// step, per tick) at the playback's clock instead of the request queue and the StepClock.
int ServerCore::update_playback(TimePoint now, Outbox& out) {
  int due = playback_->take_due(now, clock_, config_.max_steps_per_frame);
  // A spectator's seek in progress: a bounded slice of it, and no recorded tick this wake-up.
  if (playback_->seeking()) {
    playback_->seek_step(now);
    history_.clear();  // lag compensation restarts from where the seek lands
    due = 0;
  }
  int ticks = 0;
  bool crossed_snapshot_tick = false;
  events_.clear();
  size_t events_dropped = 0;
  for (int i = 0; i < due && !playback_->paused(); ++i) {
    if (playback_->play_one() != PlaybackDriver::Played::Tick) continue;  // the end: paused or looped
    history_.record(world_);
    ++ticks;
    events_dropped += collect_step_events();
    crossed_snapshot_tick = crossed_snapshot_tick || is_snapshot_tick(world_.tick(), config_.tick_hz, config_.snapshot_hz);
  }
  answer_raycasts(out);  // paused too: the world is there to be read
  if (events_dropped > 0) {
    rejects_.note(RejectReason::EventsDropped, fmt::format("{} events over the per-update cap", events_dropped), now);
  }
  write_events(now, out);  // new events of the played ticks, and resends while paused
  // Snapshots at the recording's snapshot ticks, so a spectator's ticks are the recorded clients'.
  if (playback_->snapshot_due(now, crossed_snapshot_tick) && sessions_.size() > 0) {
    write_snapshots(now, out);
    playback_->snapshot_written(now);
  }
  if (ticks > 0) publish_stats();
  playback_->note_played(now, ticks, sessions_.size());
  expire_sessions(now, out);
  rejects_.flush(now);
  return ticks;
}

}  // namespace impulse::server
