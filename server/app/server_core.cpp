// Server tick logic: read datagrams -> apply requests -> step x n (fixed dt, capped accumulator,
// Fiedler's "Fix Your Timestep!") -> write events and snapshots. Sessions follow netcode.io's
// model (endpoint = identity, timeout on silence, explicit disconnect); time is passed in.
#include "server/app/server_core.h"

#include <spdlog/spdlog.h>

#include "server/net/snapshot_writer.h"
#include "server/record/recorder.h"

namespace impulse::server {
namespace {

using wire::Message;
using wire::ResultCode;

constexpr std::string_view kNotConnectedMessage = "no session for this address: send Connect first";

physics::WorldSettings make_settings(Vec3 gravity) {
  physics::WorldSettings settings;
  settings.gravity = gravity;
  return settings;
}

// The wire checks mirror the World's bounds, so a World InvalidArgument after them comes from
// state the wire cannot see (the body's current velocity, its mass, its distance to the point).
std::string_view invalid_argument_message(Message type) {
  switch (type) {
    case Message::ApplyImpulse:
      return "impulse: the resulting velocity would exceed 1e4 m/s or 100 rad/s, or the point is too far";
    case Message::ApplyForce:
      return "force: the torque about the centre of mass from this point is beyond the world's limit";
    case Message::ApplyTorque: return "torque: beyond the world's limit";
    case Message::SetAngularVelocity: return "angular_velocity: beyond the world's limit";
    default: return "a value is out of the world's accepted range";
  }
}

struct WorldOutcome {
  ResultCode code;
  std::string_view message;
  RejectReason reason;
};

// Maps a World error to the wire result, with a message naming the field at fault.
WorldOutcome describe(physics::Error error, Message type) {
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
                  : "id: forces, torques and impulses act on dynamic bodies only",
              RejectReason::NotDynamic};
    case physics::Error::InvalidArgument:
      return {ResultCode::InvalidArgument, invalid_argument_message(type), RejectReason::InvalidArgument};
    case physics::Error::WorldFull:
      return {ResultCode::WorldFull, "the world's object limit is reached", RejectReason::WorldFull};
  }
  return {ResultCode::InvalidArgument, "unknown world error", RejectReason::InvalidArgument};
}

physics::Shape to_shape(wire::ShapeKind kind, const wire::Vec3* wire_dims) {
  const Vec3 dims = wire_dims ? wire::to_vec3(*wire_dims) : Vec3{};  // only a plane may lack dims
  switch (kind) {
    case wire::ShapeKind::Sphere: return physics::make_sphere(dims.x);
    case wire::ShapeKind::Box: return physics::make_box(dims);
    case wire::ShapeKind::Capsule: return physics::make_capsule(dims.x, dims.y);
    case wire::ShapeKind::Plane: return physics::make_plane();
  }
  return physics::make_sphere(dims.x);  // unreachable: check_request admits known kinds only
}

// Call after check_request passed: every field is then present where required and in range.
physics::BodyDesc to_body_desc(const wire::CreateObject& m) {
  physics::BodyDesc desc;
  desc.kind = static_cast<physics::BodyKind>(m.kind());
  desc.shape = to_shape(m.shape(), m.dims());
  desc.position = m.position() ? wire::to_vec3(*m.position()) : Vec3{};
  // Within 1e-3 of unit length (checked); normalised here so the World gets an exact rotation.
  desc.orientation = m.orientation() ? normalize(wire::to_quat(*m.orientation())) : Quat{};
  desc.velocity = m.velocity() ? wire::to_vec3(*m.velocity()) : Vec3{};
  desc.angular_velocity = m.angular_velocity() ? wire::to_vec3(*m.angular_velocity()) : Vec3{};
  desc.mass = m.mass();
  desc.restitution = m.restitution();
  desc.friction = m.friction();
  desc.angular_damping = m.angular_damping();
  desc.material = m.material();
  desc.sensor = m.sensor();
  return desc;
}

wire::RayHitEntry to_wire_hit(const physics::RayHit& h) {
  return wire::RayHitEntry(impulse::to_wire(h.id), wire::to_wire(h.point), wire::to_wire(h.normal), h.fraction);
}

std::string_view client_name_of(const wire::Connect& m) {
  return m.client_name() ? m.client_name()->string_view() : std::string_view{};
}

}  // namespace

ServerCore::ServerCore(const ServerConfig& config, Vec3 gravity, ServerStats& stats)
    : config_(config),
      stats_(stats),
      world_(make_settings(gravity)),
      sessions_(static_cast<uint32_t>(config.max_clients)),
      clock_(make_step_clock(config.tick_hz, config.max_steps_per_frame, TimePoint{})),
      dt_(1.0f / static_cast<float>(config.tick_hz)),
      client_timeout_(std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(config.client_timeout_s))) {
  queue_.reserve(256);
}

bool ServerCore::add_bodies(std::span<const physics::BodyDesc> bodies, std::string* error) {
  for (size_t i = 0; i < bodies.size(); ++i) {
    const physics::CreateResult r = world_.create_object(bodies[i]);
    if (r.error != physics::Error::Ok) {
      if (error) *error = fmt::format("bodies[{}]: the world refused it: {}", i, describe(r.error, Message::CreateObject).message);
      return false;
    }
    if (recorder_) recorder_->note_body(r.id, bodies[i]);
  }
  publish_stats();
  return true;
}

void ServerCore::start(TimePoint now) { clock_ = make_step_clock(config_.tick_hz, config_.max_steps_per_frame, now); }

bool ServerCore::push_bounded(const Endpoint& to, std::span<const uint8_t> bytes, size_t limit, Outbox& out) {
  if (bytes.size() > limit) return false;
  out.push(to, bytes);
  return true;
}

// --- Receive ---------------------------------------------------------------------------------

void ServerCore::handle_datagram(const Endpoint& from, std::span<const uint8_t> bytes, TimePoint now, Outbox& out) {
  stats_.datagrams_in.fetch_add(1, std::memory_order_relaxed);
  stats_.bytes_in.fetch_add(bytes.size(), std::memory_order_relaxed);

  const wire::Verified v = wire::verify_datagram(bytes, wire::Direction::ClientToServer);
  if (v.reason != wire::DropReason::None) {
    stats_.datagrams_dropped.fetch_add(1, std::memory_order_relaxed);
    if (v.reason == wire::DropReason::VersionMismatch) {
      handle_version_mismatch(from, *v.envelope, bytes.size(), now, out);
    } else {
      rejects_.note(to_reject_reason(v.reason), from, {}, now);
    }
    return;
  }

  const wire::Envelope& envelope = *v.envelope;
  Session* session = sessions_.find(from);
  switch (envelope.message_type()) {
    case Message::Connect:
      handle_connect(from, *envelope.message_as_Connect(), bytes.size(), now, out);
      return;
    case Message::Ping: {
      const uint64_t nonce = envelope.message_as_Ping()->nonce();
      const auto pong = wire::build_pong(fbb_, nonce, world_.tick());
      if (session) {
        session->last_heard = now;
        out.push(from, pong);
      } else if (!push_bounded(from, pong, bytes.size(), out)) {
        // A stranger's Ping is answered only when padded to the Pong's size (no amplification).
        rejects_.note(RejectReason::NotConnected, from, "ping", now);
      }
      return;
    }
    case Message::Disconnect: {
      if (!session) {
        rejects_.note(RejectReason::StrayDisconnect, from, {}, now);
        return;
      }
      const auto* reason = envelope.message_as_Disconnect()->reason();
      spdlog::info("client disconnected: {} name=\"{}\" id={} reason=\"{}\"", to_string(from), session->name,
                   session->client_id,
                   sanitize_for_log(reason ? reason->string_view() : std::string_view{}, wire::kMaxStringBytes));
      if (recorder_) {
        recorder_->add_client_event(record::ClientEventType::Disconnect, session->client_id, world_.tick(),
                                    to_string(from), {});
      }
      sessions_.remove(from);
      stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
      return;
    }
    default:
      handle_request(from, envelope, bytes.size(), now, out);
      return;
  }
}

void ServerCore::handle_version_mismatch(const Endpoint& from, const wire::Envelope& envelope, size_t request_bytes,
                                         TimePoint now, Outbox& out) {
  rejects_.note(RejectReason::VersionMismatch, from, {}, now);
  if (envelope.message_type() != Message::Connect) return;
  // Answer a Connect so the client can tell the user; the message is dropped if it would make the
  // reply larger than the request.
  static const std::string kMessage = fmt::format("server speaks protocol version {}", wire::kProtocolVersion);
  auto reply = wire::build_connect_rejected(fbb_, ResultCode::VersionMismatch, kMessage);
  if (reply.size() > request_bytes) reply = wire::build_connect_rejected(fbb_, ResultCode::VersionMismatch, {});
  push_bounded(from, reply, request_bytes, out);
}

void ServerCore::handle_connect(const Endpoint& from, const wire::Connect& m, size_t request_bytes, TimePoint now,
                                Outbox& out) {
  if (Session* existing = sessions_.find(from)) {
    // Idempotent: the client resends Connect until an answer arrives; the first may be lost.
    existing->last_heard = now;
    out.push(from, wire::build_connect_accepted(fbb_, existing->client_id, static_cast<uint16_t>(config_.tick_hz),
                                                static_cast<uint16_t>(config_.snapshot_hz), world_.tick()));
    return;
  }
  auto reject = [&](ResultCode code, std::string_view message, RejectReason reason) {
    rejects_.note(reason, from, message, now);
    auto reply = wire::build_connect_rejected(fbb_, code, message);
    if (reply.size() > request_bytes) reply = wire::build_connect_rejected(fbb_, code, {});
    push_bounded(from, reply, request_bytes, out);
  };
  if (shutting_down_) return reject(ResultCode::ShuttingDown, "server is shutting down", RejectReason::ShuttingDown);
  if (const wire::Check check = wire::check_request(m); !check.ok()) {
    return reject(check.code, check.message, RejectReason::BadConnect);
  }
  if (sessions_.full()) return reject(ResultCode::ServerFull, "server is full", RejectReason::ServerFull);

  const Session* s = sessions_.add(from, sanitize_for_log(client_name_of(m), wire::kMaxClientNameBytes), now);
  stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
  spdlog::info("client connected: {} name=\"{}\" id={} ({} of {} clients)", to_string(from), s->name, s->client_id,
               sessions_.size(), config_.max_clients);
  if (recorder_) {
    recorder_->add_client_event(record::ClientEventType::Connect, s->client_id, world_.tick(), to_string(from), s->name);
  }
  out.push(from, wire::build_connect_accepted(fbb_, s->client_id, static_cast<uint16_t>(config_.tick_hz),
                                              static_cast<uint16_t>(config_.snapshot_hz), world_.tick()));
}

void ServerCore::reply_not_connected(const Endpoint& from, Message type, uint32_t request_id, size_t request_bytes,
                                     TimePoint now, Outbox& out) {
  rejects_.note(RejectReason::NotConnected, from, {}, now);
  // A Raycast is answered in kind, so the client finds the code where it waits for the hits.
  auto build = [&](std::string_view message) {
    return type == Message::Raycast
               ? wire::build_raycast_result(fbb_, request_id, ResultCode::NotConnected, 0, {}, false, message)
               : wire::build_request_result(fbb_, request_id, ResultCode::NotConnected, ObjectID{}, message);
  };
  auto reply = build(kNotConnectedMessage);
  if (reply.size() > request_bytes) reply = build({});
  if (push_bounded(from, reply, request_bytes, out)) stats_.requests_rejected.fetch_add(1, std::memory_order_relaxed);
}

void ServerCore::reject_request(const Endpoint& from, Message type, uint32_t request_id, ObjectID id,
                                const wire::Check& check, TimePoint now, Outbox& out) {
  rejects_.note(RejectReason::InvalidArgument, from, check.message, now);
  stats_.requests_rejected.fetch_add(1, std::memory_order_relaxed);
  out.push(from, type == Message::Raycast
                     ? wire::build_raycast_result(fbb_, request_id, check.code, 0, {}, false, check.message)
                     : wire::build_request_result(fbb_, request_id, check.code, id, check.message));
}

void ServerCore::handle_request(const Endpoint& from, const wire::Envelope& envelope, size_t request_bytes,
                                TimePoint now, Outbox& out) {
  // Decode into a PendingRequest; each case range-checks first (nothing invalid is queued).
  PendingRequest r;
  r.type = envelope.message_type();
  r.from = from;
  wire::Check check;
  switch (r.type) {
    case Message::CreateObject: {
      const auto* m = envelope.message_as_CreateObject();
      r.request_id = m->request_id();
      check = wire::check_request(*m);
      if (check.ok()) r.desc = to_body_desc(*m);
      break;
    }
    case Message::DestroyObject: {
      const auto* m = envelope.message_as_DestroyObject();
      r.request_id = m->request_id();
      r.id = from_wire(m->id());
      break;
    }
    case Message::ApplyForce: {
      const auto* m = envelope.message_as_ApplyForce();
      r.request_id = m->request_id();
      r.id = from_wire(m->id());
      check = wire::check_request(*m);
      if (check.ok()) {
        r.vector = wire::to_vec3(*m->force());
        r.point = wire::to_optional_vec3(m->point());
      }
      break;
    }
    case Message::ApplyImpulse: {
      const auto* m = envelope.message_as_ApplyImpulse();
      r.request_id = m->request_id();
      r.id = from_wire(m->id());
      check = wire::check_request(*m);
      if (check.ok()) {
        r.vector = wire::to_vec3(*m->impulse());
        r.point = wire::to_optional_vec3(m->point());
      }
      break;
    }
    case Message::SetVelocity: {
      const auto* m = envelope.message_as_SetVelocity();
      r.request_id = m->request_id();
      r.id = from_wire(m->id());
      check = wire::check_request(*m);
      if (check.ok()) r.vector = wire::to_vec3(*m->velocity());
      break;
    }
    case Message::ApplyTorque: {
      const auto* m = envelope.message_as_ApplyTorque();
      r.request_id = m->request_id();
      r.id = from_wire(m->id());
      check = wire::check_request(*m);
      if (check.ok()) r.vector = wire::to_vec3(*m->torque());
      break;
    }
    case Message::SetAngularVelocity: {
      const auto* m = envelope.message_as_SetAngularVelocity();
      r.request_id = m->request_id();
      r.id = from_wire(m->id());
      check = wire::check_request(*m);
      if (check.ok()) r.vector = wire::to_vec3(*m->angular_velocity());
      break;
    }
    case Message::Raycast: {
      const auto* m = envelope.message_as_Raycast();
      r.request_id = m->request_id();
      check = wire::check_request(*m);
      if (check.ok()) {
        r.vector = wire::to_vec3(*m->origin());
        r.translation = wire::to_vec3(*m->translation());
        r.all_hits = m->all();
      }
      break;
    }
    default:
      // verify_datagram admits only client messages, and the others are handled by the caller.
      rejects_.note(RejectReason::NoMessage, from, "unhandled message type", now);
      return;
  }

  Session* session = sessions_.find(from);
  if (!session) return reply_not_connected(from, r.type, r.request_id, request_bytes, now, out);
  session->last_heard = now;
  r.client_id = session->client_id;
  if (!check.ok()) return reject_request(from, r.type, r.request_id, r.id, check, now, out);
  if (queue_.size() >= kMaxQueuedRequests) {
    rejects_.note(RejectReason::QueueFull, from, {}, now);
    return;
  }
  queue_.push_back(r);
}

// --- Tick ------------------------------------------------------------------------------------

void ServerCore::answer_raycast(const PendingRequest& r, Outbox& out) {
  ray_entries_.clear();
  if (r.all_hits) {
    world_.raycast_all(r.vector, r.translation, ray_hits_);
    for (const physics::RayHit& h : ray_hits_) ray_entries_.push_back(to_wire_hit(h));
  } else if (const std::optional<physics::RayHit> hit = world_.raycast_closest(r.vector, r.translation)) {
    ray_entries_.push_back(to_wire_hit(*hit));
  }
  // The builder keeps the nearest raycast_hits_per_datagram() hits and flags the rest as cut.
  out.push(r.from,
           wire::build_raycast_result(fbb_, r.request_id, ResultCode::Ok, world_.tick(), ray_entries_, false, {}));
  stats_.requests_applied.fetch_add(1, std::memory_order_relaxed);
}

void ServerCore::apply_request(const PendingRequest& r, TimePoint now, Outbox& out) {
  if (!changes_world(r.type)) return;  // Raycast: answered after the steps (answer_raycasts)
  const AppliedRequest applied = apply_to_world(world_, r);
  const physics::Error error = applied.error;
  const ObjectID id = applied.id;
  const WorldOutcome outcome = describe(error, r.type);
  if (outcome.code == ResultCode::Ok) {
    stats_.requests_applied.fetch_add(1, std::memory_order_relaxed);
  } else {
    stats_.requests_rejected.fetch_add(1, std::memory_order_relaxed);
    rejects_.note(outcome.reason, r.from, outcome.message, now);
  }
  if (recorder_) recorder_->add_request(r, outcome.code, id);
  out.push(r.from, wire::build_request_result(fbb_, r.request_id, outcome.code, id, outcome.message));
}

void ServerCore::apply_requests(TimePoint now, Outbox& out) {
  for (const PendingRequest& r : queue_) apply_request(r, now, out);
}

void ServerCore::answer_raycasts(Outbox& out) {
  // After the steps, so a raycast sees what the snapshot of this wake-up shows (including bodies
  // created by requests queued before it), and its hits carry that tick.
  for (const PendingRequest& r : queue_) {
    if (r.type == Message::Raycast) answer_raycast(r, out);
  }
  queue_.clear();
}

int ServerCore::update(TimePoint now, Outbox& out) {
  const int steps = take_due_steps(clock_, now);
  bool snapshot_due = false;
  if (steps > 0) {
    std::optional<uint64_t> step_hash;  // of the last step, when the recorder computed it
    apply_requests(now, out);
    events_.clear();
    size_t events_dropped = 0;
    for (int i = 0; i < steps; ++i) {
      world_.step(dt_);
      if (recorder_) {
        // world_hash() is O(bodies + contacts): compute it once per step and share it.
        step_hash = world_.world_hash();
        recorder_->end_tick(world_, *step_hash);
      }
      const auto step_events = world_.contact_events();
      const size_t room = kMaxEventsPerUpdate - events_.size();
      const size_t take = std::min(room, step_events.size());
      append_collision_events(step_events.first(take), world_.tick(), &events_);
      events_dropped += step_events.size() - take;
      snapshot_due = snapshot_due || is_snapshot_tick(world_.tick(), config_.tick_hz, config_.snapshot_hz);
    }
    answer_raycasts(out);
    if (events_dropped > 0) {
      rejects_.note(RejectReason::EventsDropped, fmt::format("{} events over the per-update cap", events_dropped), now);
    }
    // Events at the end of the wake-up in which they happened (each carries its own tick), before
    // the snapshot that shows their outcome.
    write_collision_events(events_, sessions_.sessions(), fbb_, out);
    if (snapshot_due && sessions_.size() > 0) {
      gather_object_states(world_, &object_states_);
      write_snapshot(world_.tick(), object_states_, sessions_.sessions(), fbb_, out);
    }
    publish_stats(step_hash);
  }
  expire_sessions(now, out);
  rejects_.flush(now);
  return steps;
}

void ServerCore::expire_sessions(TimePoint now, Outbox& out) {
  expired_.clear();
  sessions_.take_expired(now - client_timeout_, &expired_);
  if (expired_.empty()) return;
  const auto bytes = wire::build_disconnect(fbb_, "timed out: no datagram within the client timeout");
  const Payload payload = out.store(bytes);
  for (const Session& s : expired_) {
    out.push(s.endpoint, payload);
    spdlog::info("client disconnected: {} name=\"{}\" id={} reason=\"timed out after {:.1f} s of silence\"",
                 to_string(s.endpoint), s.name, s.client_id,
                 std::chrono::duration<double>(now - s.last_heard).count());
    if (recorder_) {
      recorder_->add_client_event(record::ClientEventType::Timeout, s.client_id, world_.tick(), to_string(s.endpoint),
                                  {});
    }
  }
  stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
}

void ServerCore::shut_down(std::string_view reason, Outbox& out) {
  shutting_down_ = true;
  expired_.clear();
  sessions_.take_all(&expired_);
  if (!expired_.empty()) {
    const Payload payload = out.store(wire::build_disconnect(fbb_, reason));
    for (const Session& s : expired_) {
      out.push(s.endpoint, payload);
      spdlog::info("client disconnected: {} name=\"{}\" id={} reason=\"{}\"", to_string(s.endpoint), s.name,
                   s.client_id, reason);
      if (recorder_) {
        recorder_->add_client_event(record::ClientEventType::ServerShutdown, s.client_id, world_.tick(),
                                    to_string(s.endpoint), {});
      }
    }
  }
  stats_.clients.store(0, std::memory_order_relaxed);
}

void ServerCore::publish_stats(std::optional<uint64_t> world_hash) {
  stats_.tick.store(world_.tick(), std::memory_order_relaxed);
  stats_.steps_dropped.store(clock_.dropped_steps, std::memory_order_relaxed);
  stats_.objects.store(world_.object_count(), std::memory_order_relaxed);
  stats_.awake.store(world_.awake_count(), std::memory_order_relaxed);
  stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
  stats_.world_hash.store(world_hash ? *world_hash : world_.world_hash(), std::memory_order_relaxed);
}

}  // namespace impulse::server
