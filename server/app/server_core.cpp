// Server tick logic: read datagrams -> apply requests -> step x n (fixed dt, capped accumulator,
// Fiedler's "Fix Your Timestep!") -> write reliable events and per-client delta snapshots.
// Sessions follow netcode.io's model (cookie round trip before any state, endpoint = identity,
// timeout on silence, explicit disconnect); time is passed in.
#include "server/app/server_core.h"

#include <ctime>
#include <limits>
#include <thread>

#include <spdlog/spdlog.h>

#include "server/app/log_format.h"
#include "server/net/address_prefix.h"
#include "server/net/snapshot_writer.h"
#include "server/physics/narrowphase.h"
#include "server/app/tick_budget.h"
#include "server/record/playback.h"
#include "server/record/recorder.h"
#include "server/request/decode_request.h"
#include "shared/wire/messages.h"

namespace impulse::server {
namespace {

// What a throttled client may not send: anything that adds a body or sets one moving.
bool adds_work(wire::Message type) {
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

constexpr std::string_view kWakesOverBudgetMessage =
    "this tick's pushes would wake more sleeping bodies than your share of --max-wakes-per-tick; resend next tick";
constexpr std::string_view kOverBudgetMessage =
    "your bodies cost more than your share of the server's tick (--tick-budget-ms): they were put to sleep, and "
    "pushes and creates are refused for 2 s; use fewer bodies, or keep them apart";

using wire::Message;
using wire::ResultCode;

constexpr std::string_view kNotConnectedMessage = "no session for this address: send Connect first";
constexpr std::string_view kRemovedNonFiniteMessage =
    "id: the server removed this object because its state was not finite (NaN or infinite)";
constexpr std::string_view kReadOnlyMessage =
    "read-only: this server plays a recording (impulse-replay serve); spectators may only Raycast, SetInterest and "
    "send ReplayControl";

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
      return "impulse: the resulting velocity would exceed 500 m/s or 47.1 rad/s, or the point is too far";
    case Message::CreateObject:
      return "mass: the density must be in [1e-3, 1e5] kg/m^3 and the inverse mass and inertia finite, or a value "
             "beyond the world's limit";
    case Message::ApplyForce:
      return "force: with this step's other forces it would change this body's velocity faster than 500 m/s or "
             "47.1 rad/s per 1/60 s (force / mass, or the torque from this point through the inertia)";
    case Message::ApplyTorque:
      return "torque: with this step's other torques it would change this body's angular velocity faster than "
             "47.1 rad/s per 1/60 s (inverse inertia times torque)";
    case Message::SetAngularVelocity: return "angular_velocity: beyond the world's limit";
    case Message::MoveKinematic:
      return "position, orientation: reaching the target in one step needs more than 500 m/s or 47.1 rad/s";
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

wire::RayHitEntry to_wire_hit(const physics::RayHit& h) {
  return wire::RayHitEntry(impulse::to_wire(h.id), wire::to_wire(h.point), wire::to_wire(h.normal), h.fraction);
}

std::string_view client_name_of(const wire::Connect& m) {
  return m.client_name() ? m.client_name()->string_view() : std::string_view{};
}


uint64_t system_unix_now() { return static_cast<uint64_t>(std::time(nullptr)); }


// Interest test with a margin [m] (the hysteresis of the event filter matches the snapshots').
bool inside_interest(const wire::InterestArgs& area, Vec3 p, float margin) {
  switch (area.kind) {
    case wire::InterestKind::All: return true;
    case wire::InterestKind::Sphere: {
      const float r = area.radius + margin;
      return length_squared(p - area.center) <= r * r;
    }
    case wire::InterestKind::Box:
      return p.x >= area.min.x - margin && p.y >= area.min.y - margin && p.z >= area.min.z - margin &&
             p.x <= area.max.x + margin && p.y <= area.max.y + margin && p.z <= area.max.z + margin;
  }
  return true;
}

InterestArea to_interest_area(const wire::InterestArgs& a) {
  switch (a.kind) {
    case wire::InterestKind::Sphere: return InterestArea::sphere(a.center, a.radius);
    case wire::InterestKind::Box: return InterestArea::box(a.min, a.max);
    case wire::InterestKind::All: break;
  }
  return InterestArea::all();
}

constexpr float kEventInterestMargin = 2.0f;  // [m], as the snapshot hysteresis
constexpr std::chrono::milliseconds kMinEventResend{50};
constexpr size_t kMaxEventDatagramsPerUpdate = 4;
// New events queued for one session in one update, at most: over 8 updates of its sends (4
// datagrams of at most 15 events each an update). More can only grow a backlog that the channel
// drops from anyway (kMaxPendingEvents), and queueing every event of a crowd's collision burst
// for each of 257 sessions took 47 ms of one wake-up. The rest are not numbered: no gap.
constexpr size_t kMaxNewEventsPerSession = 512;
// A snapshot is sent even when the budget is spent, this small, so acks and exits keep flowing.
constexpr size_t kMinSnapshotBudgetBytes = 64;
// Runs of due sessions per pool thread in write_snapshots (several, so uneven writes balance).
constexpr size_t kSnapshotRunsPerThread = 8;

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
    if (desc.shape.kind == physics::ShapeKind::Hull && desc.shape.hull != nullptr) {
      // A scene's hull (Scene::hulls) becomes the World's own.
      std::string why;
      const physics::ConvexHull* hull = world_.add_hull(*desc.shape.hull, &why);
      if (hull == nullptr) {
        if (error) *error = fmt::format("bodies[{}]: the world refused its hull: {}", i, why);
        return false;
      }
      desc.shape = physics::make_hull(*hull);
    }
    if (desc.shape.kind == physics::ShapeKind::Mesh && desc.shape.mesh != nullptr) {
      std::string why;
      const physics::TriangleMesh* mesh = world_.add_mesh(*desc.shape.mesh, &why);
      if (mesh == nullptr) {
        if (error) *error = fmt::format("bodies[{}]: the world refused its mesh: {}", i, why);
        return false;
      }
      desc.shape = physics::make_mesh(*mesh);
    }
    if (desc.shape.kind == physics::ShapeKind::HeightField && desc.shape.heightfield != nullptr) {
      std::string why;
      const physics::HeightField* field = world_.add_heightfield(*desc.shape.heightfield, &why);
      if (field == nullptr) {
        if (error) *error = fmt::format("bodies[{}]: the world refused its heightfield: {}", i, why);
        return false;
      }
      desc.shape = physics::make_heightfield(*field);
    }
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

namespace {

/// "connected=12.3s received=4567B sent=89012B": a session's totals, for its disconnect line.
/// The line of a session's end: its reason and totals, in words and (with --log-format json) as
/// fields, so a log shipper can count disconnects by reason and sum bytes by client.
void log_disconnect(const Session& s, std::string_view reason, TimePoint now) {
  const std::string address = to_string(s.endpoint);
  const double connected_s = std::chrono::duration<double>(now - s.connected_at).count();
  const LogField fields[] = {{"event", std::string_view("client_disconnected")},
                             {"client_id", s.client_id},
                             {"address", std::string_view(address)},
                             {"reason", reason},
                             {"connected_s", connected_s},
                             {"bytes_received", s.bytes_received},
                             {"bytes_sent", s.bytes_sent}};
  const ScopedLogFields scope(fields);
  spdlog::info("client disconnected: {} name=\"{}\" id={} reason=\"{}\" connected={:.1f}s received={}B sent={}B",
               address, s.name, s.client_id, reason, connected_s, s.bytes_received, s.bytes_sent);
}

}  // namespace

uint64_t ServerCore::server_time_us(TimePoint now) const {
  const uint64_t whole = world_.tick() * 1'000'000ull / static_cast<uint64_t>(config_.tick_hz);
  // The time since the step clock last advanced counts too: without it a Pong answered between
  // wake-ups reads up to a tick early, which on a sub-millisecond link makes clients see their
  // offset estimate as stale (ClockSync's outlier test allows rtt/2 + 2 ms).
  const auto pending = clock_.accumulator + (now > clock_.last ? now - clock_.last : TimePoint::duration{});
  return whole + static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(pending).count());
}

bool ServerCore::push_bounded(const Endpoint& to, std::span<const uint8_t> bytes, size_t limit, Outbox& out) {
  if (bytes.size() > limit) return false;
  out.push(to, bytes);
  return true;
}

uint32_t ServerCore::send(Session& s, std::span<const uint8_t> bytes, TimePoint now, Outbox& out, bool seal) {
  const bool sealed = seal && s.protection.keyed;
  const size_t wire_bytes = bytes.size() + (sealed ? net::kSealOverheadBytes : 0);
  if (bytes.size() > seal_scratch_.size()) return 0;  // builders stay far below (a caller bug)
  const uint32_t sequence = s.acks.on_send(now, wire_bytes);
  if (sequence == 0) return 0;  // sequence space exhausted: never reuse a nonce
  const net::AckFields acks = s.acks.ack_fields();
  const wire::PacketHeader header(sequence, acks.ack, acks.ack_bits);
  if (sealed) {
    const auto plain = std::span<uint8_t>(seal_scratch_.data(), bytes.size());
    std::copy(bytes.begin(), bytes.end(), plain.begin());
    wire::stamp_header(plain, header);
    const Payload payload = out.reserve(wire_bytes);
    if (net::seal_packet(s.protection.send_key, sequence, plain, out.mutable_bytes(payload)) == 0) return 0;
    out.push(s.endpoint, payload);
  } else {
    const Payload payload = out.store(bytes);
    wire::stamp_header(out.mutable_bytes(payload), header);
    out.push(s.endpoint, payload);
  }
  // May go negative (snapshots then wait), by at most one burst: a flood of answers cannot starve
  // the session's snapshots after it ends.
  s.bytes_out.charge(static_cast<double>(wire_bytes), now);
  s.bytes_sent += wire_bytes;
  return sequence;
}

void ServerCore::drop_unauthenticated(const Endpoint& from, RejectReason reason, std::string_view detail,
                                      TimePoint now) {
  stats_.datagrams_unauthenticated.fetch_add(1, std::memory_order_relaxed);
  rejects_.note(reason, from, detail, now);
}

void ServerCore::process_header(Session& s, const wire::Envelope& envelope, TimePoint now) {
  const wire::PacketHeader h = wire::header_of(envelope);
  if (h.sequence() != 0) s.acks.on_receive(h.sequence());
  newly_acked_.clear();
  s.acks.on_acks(net::AckFields{h.ack(), h.ack_bits()}, now, &newly_acked_);
  for (const uint32_t sequence : newly_acked_) {
    s.events.on_acked(sequence);
    if (s.snapshots) s.snapshots->on_acked(sequence);
  }
}

// --- Receive ---------------------------------------------------------------------------------

void ServerCore::handle_datagram(const Endpoint& from, std::span<const uint8_t> bytes, TimePoint now, Outbox& out) {
  stats_.datagrams_in.fetch_add(1, std::memory_order_relaxed);
  stats_.bytes_in.fetch_add(bytes.size(), std::memory_order_relaxed);

  // The size limit holds for every datagram, sealed or not: a sealed one of 1201 bytes was opened
  // (its plaintext fits; the datagram does not). Checked before any work on it.
  if (bytes.size() > wire::kMaxDatagramBytes) {
    stats_.datagrams_dropped.fetch_add(1, std::memory_order_relaxed);
    rejects_.note(to_reject_reason(wire::DropReason::Oversized), from, {}, now);
    return;
  }
  // A sealed datagram is authenticated before anything else is read: the replay window first,
  // then the tag. Nothing that fails either is answered or has any effect.
  std::span<const uint8_t> plain = bytes;
  uint32_t sealed_sequence = 0;
  if (net::is_sealed(bytes)) {
    Session* s = sessions_.find(from);
    // Ordinary after a session ends (the extra copies of a Disconnect, a client that timed out):
    // counted as unauthenticated, but summarised at debug level, not as an attack.
    if (s == nullptr) return drop_unauthenticated(from, RejectReason::SealedWithoutSession, {}, now);
    size_t plain_bytes = 0;
    const net::OpenError e = net::open_session_packet(s->protection, bytes, unseal_buffer_, &plain_bytes, &sealed_sequence);
    if (e != net::OpenError::None) {
      return drop_unauthenticated(from, e == net::OpenError::Replayed ? RejectReason::Replayed : RejectReason::Unauthenticated,
                                  {}, now);
    }
    plain = std::span<const uint8_t>(unseal_buffer_.data(), plain_bytes);
  }

  const wire::Verified v = wire::verify_datagram(plain, wire::Direction::ClientToServer);
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
  if (envelope.message_type() == Message::Connect && sealed_sequence == 0) {
    handle_connect(from, *envelope.message_as_Connect(), bytes.size(), now, out);
    return;
  }
  Session* session = sessions_.find(from);
  if (session && (sealed_sequence == 0 || wire::header_of(envelope).sequence() != sealed_sequence)) {
    // Plaintext at a session's address is anyone's (its source is trivially forged); a sealed
    // one must carry the sequence it was sealed with.
    return drop_unauthenticated(from, RejectReason::Unauthenticated,
                                sealed_sequence == 0 ? "plaintext at a session's address" : "sequence mismatch", now);
  }
  if (session) {
    // A flooding client is cut off here, before any work on its datagram; its resends get in later.
    if (!session->bytes_in.take(static_cast<double>(bytes.size()), now)) {
      rejects_.note(RejectReason::RateLimited, from, "receive byte rate", now);
      return;
    }
    session->bytes_received += bytes.size();
    session->last_heard = now;
    if (!session->confirmed) {
      // The client holds its keys: from now on it gets snapshots (no baselines were kept before),
      // and in token mode it replaces any other session of its client id.
      session->confirmed = true;
      session->snapshots = std::make_unique<SnapshotSender>(sender_config_);
      session->snapshots->set_interest(to_interest_area(session->interest));
      if (token_key_ && replace_sessions_of(*session, now, out)) session = sessions_.find(from);  // moved
    }
    process_header(*session, envelope, now);
  }
  switch (envelope.message_type()) {
    case Message::Ping: {
      const uint64_t nonce = envelope.message_as_Ping()->nonce();
      // Nonce 0 from a session is an ack-only keepalive: its header carried the acks; no answer.
      if (session && nonce == 0) return;
      const auto pong = wire::build_pong(fbb_, nonce, world_.tick(), server_time_us(now));
      if (session) {
        send(*session, pong, now, out);
      } else if (!push_bounded(from, pong, bytes.size(), out)) {
        // A stranger's Ping is answered only when padded to the Pong's size (no amplification).
        rejects_.note(RejectReason::NotConnected, from, "ping", now);
      }
      return;
    }
    case Message::Input:
      receive_input(session, *envelope.message_as_Input(), from, now);
      return;
    case Message::Disconnect: {
      if (!session) {
        rejects_.note(RejectReason::StrayDisconnect, from, {}, now);
        return;
      }
      const auto* reason = envelope.message_as_Disconnect()->reason();
      log_disconnect(*session,
                     sanitize_for_log(reason ? reason->string_view() : std::string_view{}, wire::kMaxStringBytes), now);
      journal_.session(record::ClientEventType::Disconnect, session->client_id, world_.tick(), to_string(from), {});
      note_departed(*session);
      remove_session(from);
      return;
    }
    default:
      handle_request(from, envelope, bytes.size(), now, out);
      return;
  }
}

void ServerCore::remove_session(const Endpoint& endpoint) {
  sessions_.remove(endpoint);
  stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
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
    // Anyone can put a session's address on a Connect, so it pays like any datagram from there:
    // the minimum size and the session's receive budget, before any work.
    if (request_bytes < wire::min_connect_bytes()) {
      rejects_.note(RejectReason::BadConnect, from, "Connect shorter than the minimum: pad it", now);
      return;
    }
    // Once the client has spoken after its ConnectAccepted it never sends Connect again: this one
    // is a stale duplicate or forged, and answering it would reflect at the player. Dropped before
    // the receive budget, so a forged flood cannot spend the player's budget on it.
    if (existing->confirmed) {
      rejects_.note(RejectReason::BadConnect, from, "Connect on a confirmed session (stale or forged)", now);
      return;
    }
    // It must carry the key share that made the session (an off-path forger does not know it).
    const bool same_share = m.kx_public() != nullptr && m.kx_public()->size() == net::kKxPublicKeyBytes &&
                            std::equal(m.kx_public()->begin(), m.kx_public()->end(), existing->client_kx_public.begin());
    if (!same_share) {
      return drop_unauthenticated(from, RejectReason::Unauthenticated, "Connect with another key share", now);
    }
    if (!existing->bytes_in.take(static_cast<double>(request_bytes), now)) {
      rejects_.note(RejectReason::RateLimited, from, "receive byte rate", now);
      return;
    }
    // The client resends Connect until an answer arrives (the first may be lost). Only a valid
    // cookie shows that this Connect comes from the address, so only then is it answered (the
    // ConnectAccepted may be larger than the Connect).
    const std::span<const uint8_t> resent_cookie =
        m.cookie() ? std::span<const uint8_t>(m.cookie()->data(), m.cookie()->size()) : std::span<const uint8_t>{};
    const security::CookieError resent_error = security::verify_cookie(
        cookie_key_, security::to_peer_address(from), resent_cookie, security::cookie_time_slot(now - epoch_));
    if (resent_error != security::CookieError::None) {
      rejects_.note(RejectReason::BadCookie, from, security::to_string(resent_error), now);
      return;
    }
    existing->last_heard = now;
    send_accepted(*existing, now, out);
    return;
  }
  auto reject = [&](ResultCode code, std::string_view message, RejectReason reason) {
    rejects_.note(reason, from, message, now);
    auto reply = wire::build_connect_rejected(fbb_, code, message);
    if (reply.size() > request_bytes) reply = wire::build_connect_rejected(fbb_, code, {});
    push_bounded(from, reply, request_bytes, out);
  };
  if (request_bytes < wire::min_connect_bytes()) {
    // Unpadded: answering it could amplify a spoofed source. Dropped without a reply.
    rejects_.note(RejectReason::BadConnect, from, "Connect shorter than the minimum: pad it", now);
    return;
  }
  if (shutting_down_) return reject(ResultCode::ShuttingDown, "server is shutting down", RejectReason::ShuttingDown);
  if (const wire::Check check = wire::check_request(m); !check.ok()) {
    return reject(check.code, check.message, RejectReason::BadConnect);
  }

  // The cookie round trip proves the sender receives at this address; until then, no state.
  const security::PeerAddress peer = security::to_peer_address(from);
  const uint64_t slot = security::cookie_time_slot(now - epoch_);
  const std::span<const uint8_t> cookie =
      m.cookie() ? std::span<const uint8_t>(m.cookie()->data(), m.cookie()->size()) : std::span<const uint8_t>{};
  const security::CookieError cookie_error = security::verify_cookie(cookie_key_, peer, cookie, slot);
  if (cookie_error != security::CookieError::None) {
    if (!cookie.empty()) rejects_.note(RejectReason::BadCookie, from, security::to_string(cookie_error), now);
    const security::Cookie fresh = security::make_cookie(cookie_key_, peer, slot);
    push_bounded(from, wire::build_challenge(fbb_, fresh), request_bytes, out);
    return;
  }
  // A client makes a fresh key pair for each connect attempt, so a share that already made a
  // session is a captured Connect sent again (its session ended, or it comes from elsewhere).
  // Dropped unanswered: it creates no session and replaces none.
  security::SpentKeyShares::Share share{};
  std::copy(m.kx_public()->begin(), m.kx_public()->end(), share.begin());  // 32: check_request
  if (spent_shares_.contains(share, now)) {
    rejects_.note(RejectReason::ReplayedConnect, from, {}, now);
    return;
  }

  uint32_t client_id = 0;
  uint32_t max_objects = static_cast<uint32_t>(config_.max_objects_per_client);
  net::BindingSecret binding{};  // zeros: anonymous
  if (token_key_) {
    if (m.token() == nullptr || m.token()->size() == 0) {
      return reject(ResultCode::TokenRequired, "this server requires a connect token (from the game's backend)",
                    RejectReason::BadToken);
    }
    security::TokenClaims claims;
    const security::TokenError token_error = security::open_token(
        *token_key_, std::span<const uint8_t>(m.token()->data(), m.token()->size()), unix_now_(), &claims);
    if (token_error != security::TokenError::None) {
      const bool expired = token_error == security::TokenError::Expired;
      spdlog::warn("connect refused: {} from {}{}", security::to_string(token_error), to_string(from),
                   expired ? fmt::format(" (client id {}, expired at unix time {})", claims.client_id,
                                         claims.expires_unix_s)
                           : std::string{});
      return reject(expired ? ResultCode::TokenExpired : ResultCode::TokenInvalid, security::to_string(token_error),
                    RejectReason::BadToken);
    }
    if (claims.client_id == 0 || claims.client_id > UINT32_MAX) {
      return reject(ResultCode::TokenInvalid, "token client id must be in 1..4294967295", RejectReason::BadToken);
    }
    client_id = static_cast<uint32_t>(claims.client_id);
    if (claims.max_objects != 0) max_objects = claims.max_objects;
    binding = security::token_session_secret(*token_key_, std::span<const uint8_t>(m.token()->data(), m.token()->size()));
    // A session of the same client id stays until this one authenticates a sealed datagram
    // (replace_sessions_of): a Connect replayed with a token seen on the wire, whose secret the
    // sender lacks, never gets that far, so it cannot knock the player out.
  }
  if (sessions_.full()) return reject(ResultCode::ServerFull, "server is full", RejectReason::ServerFull);
  if (!token_key_ && config_.max_sessions_per_address > 0 && !from.address().is_loopback()) {
    const asio::ip::address prefix = address_prefix(from.address());
    int held = 0;
    for (const Session& s : sessions_.sessions()) held += address_prefix(s.endpoint.address()) == prefix ? 1 : 0;
    if (held >= config_.max_sessions_per_address) {
      return reject(ResultCode::ServerFull,
                    "too many sessions from this address (--max-sessions-per-address " +
                        std::to_string(config_.max_sessions_per_address) + ")",
                    RejectReason::ServerFull);
    }
  }

  // The packet keys: a fresh X25519 share per session, mixed with the token's secret.
  SessionKeying keying;
  std::copy(m.kx_public()->begin(), m.kx_public()->end(), keying.client_public.begin());  // 32: check_request
  net::KxKeyPair server_kx;
  net::SessionKeys keys;
  if (!net::make_kx_keypair(&server_kx) || !net::server_session_keys(server_kx, keying.client_public, binding, &keys)) {
    return reject(ResultCode::InvalidArgument, "kx_public: not a usable X25519 public key", RejectReason::BadConnect);
  }
  keying.server_public = server_kx.public_key;
  keying.send_key = keys.server_to_client;
  keying.receive_key = keys.client_to_server;
  keying.token_bound = token_key_.has_value();
  accept_session(from, m, client_id, max_objects, keying, now, out);
}

void ServerCore::accept_session(const Endpoint& from, const wire::Connect& m, uint32_t client_id,
                                uint32_t max_objects, const SessionKeying& keying, TimePoint now, Outbox& out) {
  Session* s = sessions_.add(from, sanitize_for_log(client_name_of(m), wire::kMaxClientNameBytes), now, client_id);
  if (s == nullptr) return;
  spent_shares_.add(keying.client_public, now);
  s->protection.send_key = keying.send_key;
  s->protection.receive_key = keying.receive_key;
  s->protection.keyed = true;
  s->server_kx_public = keying.server_public;
  s->client_kx_public = keying.client_public;
  s->token_bound = keying.token_bound;
  s->max_objects = max_objects;
  s->joint_serial_at_start = next_joint_serial_;  // older joints are announced by queue_joint_events' walk
  if (!playback_) {  // spectators see the recording's snapshot ticks (playback writes them all at once)
    s->snapshot_phase = static_cast<uint16_t>(next_snapshot_phase_);
    next_snapshot_phase_ = (next_snapshot_phase_ + 1) % snapshot_phases();
  }
  const double requests = config_.max_requests_per_second;
  s->request_rate = TokenBucket{requests, requests, requests, now};
  const double in_bytes = config_.max_kbytes_in_per_second * 1024.0;
  s->bytes_in = TokenBucket{in_bytes, in_bytes, in_bytes, now};
  const double out_bytes = config_.max_kbps_per_client * 1000.0 / 8.0;
  // Burst: a quarter second, so a snapshot after a quiet spell may use a full datagram.
  s->bytes_out = TokenBucket{out_bytes, out_bytes / 4, out_bytes / 4, now};
  stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
  // --log-format json also carries the name exactly as sent (check_request bounds its length; the
  // JSON escaper makes any bytes safe), where the text line shows it with '?' for unsafe bytes.
  const std::string address = to_string(from);
  const LogField fields[] = {{"event", std::string_view("client_connected")},
                             {"client_id", s->client_id},
                             {"address", std::string_view(address)},
                             {"client_name", client_name_of(m)}};
  const ScopedLogFields scope(fields);
  spdlog::info("client connected: {} name=\"{}\" id={}{} ({} of {} clients)", address, s->name, s->client_id,
               token_key_ ? " (token)" : " (anonymous)", sessions_.size(), config_.max_clients);
  journal_.session(record::ClientEventType::Connect, s->client_id, world_.tick(), to_string(from), s->name);
  send_accepted(*s, now, out);
}

void ServerCore::send_accepted(Session& s, TimePoint now, Outbox& out) {
  wire::AcceptedArgs a;
  a.client_id = s.client_id;
  a.tick_hz = static_cast<uint16_t>(config_.tick_hz);
  a.snapshot_hz = static_cast<uint16_t>(config_.snapshot_hz);
  a.tick = world_.tick();
  const wire::QuantizationConfig& q = sender_config_.quant;
  a.quantization = wire::QuantizationArgs{q.world_bound_m,    q.position_fraction_bits,        q.orientation_bits,
                                          q.max_linear_speed, q.linear_velocity_fraction_bits, q.max_angular_speed,
                                          q.angular_velocity_fraction_bits};
  a.max_objects = s.max_objects;
  a.first_request_id = 1;
  a.kx_public = s.server_kx_public;
  a.client_kx_public = s.client_kx_public;
  a.token_bound = s.token_bound;
  if (playback_) {
    a.replay = true;
    a.replay_first_tick = playback_->playback().first_tick();
    a.replay_last_tick = playback_->playback().last_tick();
  }
  send(s, wire::build_connect_accepted(fbb_, a), now, out, /*seal=*/false);  // the client has no keys yet
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
  if (push_bounded(from, reply, request_bytes, out)) count_result(ResultCode::NotConnected);
}

void ServerCore::answer_slot(Session& s, const RequestSlot& slot, TimePoint now, Outbox& out) {
  const PendingRequest& r = slot.request;
  send(s,
       r.type == Message::Raycast
           ? wire::build_raycast_result(fbb_, r.request_id, slot.code, 0, {}, false, slot.message)
           : wire::build_request_result(fbb_, r.request_id, slot.code, slot.id, slot.message, slot.tick),
       now, out);
}

void ServerCore::handle_request(const Endpoint& from, const wire::Envelope& envelope, size_t request_bytes,
                                TimePoint now, Outbox& out) {
  // Decode into a PendingRequest; each decoder range-checks first (nothing invalid is queued).
  DecodeContext context;
  if (playback_) context.replay_ticks = {playback_->playback().first_tick(), playback_->playback().last_tick()};
  DecodedRequest decoded;
  if (!decode_request(envelope, context, &decoded)) {
    // verify_datagram admits only client messages, and the others are handled by the caller.
    rejects_.note(RejectReason::NoMessage, from, "unhandled message type", now);
    return;
  }
  PendingRequest& r = decoded.request;
  const wire::Check& check = decoded.check;
  r.from = from;

  Session* session = sessions_.find(from);
  if (!session) return reply_not_connected(from, r.type, r.request_id, request_bytes, now, out);
  r.client_id = session->client_id;
  if (r.request_id == 0 && wire::rule_of(r.type).fire_and_forget) return queue_unsequenced(*session, r, check, now);

  // Every arrival the window answers without admitting it (a duplicate of an answered request,
  // one too old, id 0) costs a request too (admitted ones pay in admit_requests), so resending an
  // answered request cannot draw answers faster than the rate.
  auto over_rate = [&] {
    if (session->request_rate.take(1.0, now)) return false;
    rejects_.note(RejectReason::RateLimited, from, "duplicate requests over --max-requests-per-second", now);
    count_result(ResultCode::RateLimited);
    return true;
  };
  switch (session->requests.arrive(r, check.code, check.message)) {
    case Arrival::Accepted:
      admit_requests(*session, now, out);
      return;
    case Arrival::Duplicate:
      // Not charged: it draws no reply, and a client with many requests in flight resends them
      // all every few tens of milliseconds.
      stats_.requests_duplicate.fetch_add(1, std::memory_order_relaxed);
      return;  // its answer is coming
    case Arrival::AnsweredBefore: {
      stats_.requests_duplicate.fetch_add(1, std::memory_order_relaxed);
      if (over_rate()) return;
      const RequestSlot* slot = session->requests.find(r.request_id);
      if (slot->request.type == Message::Raycast && slot->code == ResultCode::Ok) {
        // A read: the lost answer is recomputed against the world of the next tick.
        PendingRequest again = slot->request;
        again.from = from;
        again.rerun = true;
        if (queue_.size() < kMaxQueuedRequests) queue_.push_back(again);
      } else {
        answer_slot(*session, *slot, now, out);
      }
      return;
    }
    case Arrival::TooOld:
      rejects_.note(RejectReason::RequestTooOld, from, {}, now);
      if (over_rate()) return;
      send(*session,
           wire::build_request_result(fbb_, r.request_id, ResultCode::RequestTooOld, r.id,
                                      "request_id: older than the server's window; it was answered long ago"),
           now, out);
      return;
    case Arrival::TooFarAhead:
      rejects_.note(RejectReason::RequestTooFarAhead, from, {}, now);
      return;
    case Arrival::Invalid:
      rejects_.note(RejectReason::InvalidArgument, from, "request_id 0", now);
      if (over_rate()) return;
      send(*session,
           wire::build_request_result(fbb_, 0, ResultCode::InvalidArgument, r.id,
                                      "request_id: must be >= 1 (the client's request sequence)"),
           now, out);
      return;
  }
}

void ServerCore::queue_unsequenced(Session& s, const PendingRequest& r, const wire::Check& check, TimePoint now) {
  // Outside the exactly-once window and never answered, so a refusal is only counted and logged.
  // Counted under the code a sequenced request would have been answered with.
  auto refuse = [&](RejectReason reason, ResultCode code, std::string_view message) {
    rejects_.note(reason, s.endpoint, message, now);
    count_result(code);
  };
  if (!check.ok()) return refuse(RejectReason::InvalidArgument, check.code, check.message);
  if (playback_) return refuse(RejectReason::ReadOnly, ResultCode::ReadOnly, wire::EnumNameMessage(r.type));
  if (!s.request_rate.take(1.0, now)) {
    return refuse(RejectReason::RateLimited, ResultCode::RateLimited, "unsequenced push over --max-requests-per-second");
  }
  if (queue_.size() >= kMaxQueuedRequests) return refuse(RejectReason::QueueFull, ResultCode::RateLimited, {});
  if (adds_work(r.type) && over_budget(s, now)) return refuse(RejectReason::OverBudget, ResultCode::OverBudget, {});
  stats_.requests_unsequenced.fetch_add(1, std::memory_order_relaxed);
  if (r.apply_tick > world_.tick() + 1) {
    hold_action(s, r, now, nullptr);  // never answered: a refusal is only counted
    return;
  }
  queue_.push_back(r);
}

void ServerCore::answer_at_admission(Session& s, const RequestSlot& slot, TimePoint now, Outbox& out) {
  const PendingRequest& r = slot.request;
  switch (r.type) {
    case Message::ReplayControl: {
      // Only a replay gets here (a live server refused it in the range check).
      if (!playback_->may_control(s.client_id, s.token_bound)) {
        rejects_.note(RejectReason::NotController, s.endpoint, wire::EnumNameReplayAction(r.replay_action), now);
        count_result(ResultCode::NotController);
        s.requests.answer(r.request_id, ResultCode::NotController, ObjectID{},
                          "this replay's timeline is the operator's: only a controller may pause, seek or change "
                          "the speed (impulse-replay serve --controller CLIENT_ID with --token-key, or --anyone-controls)");
        break;
      }
      std::string message;
      const std::string who = fmt::format("{} name=\"{}\" id={}", to_string(s.endpoint), s.name, s.client_id);
      const ResultCode code = playback_->control(r.replay_action, r.replay_tick, r.replay_speed, who, &message, now);
      publish_stats();  // a seek moved the world
      count_result(code);
      s.requests.answer(r.request_id, code, ObjectID{}, message);
      break;
    }
    case Message::SetInterest:
      s.interest = r.interest;
      if (s.snapshots) s.snapshots->set_interest(to_interest_area(r.interest));
      count_result(ResultCode::Ok);
      s.requests.answer(r.request_id, ResultCode::Ok, ObjectID{}, {});
      break;
    default:  // a row of kMessageRules marked answered_at_admission without a case here
      count_result(ResultCode::InvalidArgument);
      s.requests.answer(r.request_id, ResultCode::InvalidArgument, ObjectID{}, "not handled at admission");
      break;
  }
  answer_slot(s, slot, now, out);
}

void ServerCore::admit_requests(Session& s, TimePoint now, Outbox& out) {
  while (RequestSlot* slot = s.requests.admit_next()) {
    const PendingRequest& r = slot->request;
    if (slot->early_code != ResultCode::Ok) {
      rejects_.note(RejectReason::InvalidArgument, s.endpoint, slot->early_message, now);
      count_result(slot->early_code);
      s.requests.answer(r.request_id, slot->early_code, r.id, slot->early_message);
      answer_slot(s, *slot, now, out);
      continue;
    }
    if (!s.request_rate.take(1.0, now)) {
      rejects_.note(RejectReason::RateLimited, s.endpoint, "requests per second", now);
      count_result(ResultCode::RateLimited);
      s.requests.answer(r.request_id, ResultCode::RateLimited, r.id,
                        "too many requests per second (--max-requests-per-second); slow down and resend");
      answer_slot(s, *slot, now, out);
      continue;
    }
    if (r.type == Message::Raycast && r.seen_tick != 0 && !s.request_rate.take(kCompensatedRaycastCost - 1.0, now)) {
      rejects_.note(RejectReason::RateLimited, s.endpoint, "lag-compensated raycasts per second", now);
      count_result(ResultCode::RateLimited);
      s.requests.answer(r.request_id, ResultCode::RateLimited, r.id,
                        fmt::format("a lag-compensated raycast costs {} requests of --max-requests-per-second; "
                                    "slow down and resend",
                                    kCompensatedRaycastCost));
      answer_slot(s, *slot, now, out);
      continue;
    }
    if (adds_work(r.type) && over_budget(s, now)) {
      rejects_.note(RejectReason::OverBudget, s.endpoint, wire::EnumNameMessage(r.type), now);
      count_result(ResultCode::OverBudget);
      s.requests.answer(r.request_id, ResultCode::OverBudget, r.id, std::string(kOverBudgetMessage));
      answer_slot(s, *slot, now, out);
      continue;
    }
    if (playback_ && wire::changes_world(r.type)) {
      rejects_.note(RejectReason::ReadOnly, s.endpoint, wire::EnumNameMessage(r.type), now);
      count_result(ResultCode::ReadOnly);
      s.requests.answer(r.request_id, ResultCode::ReadOnly, r.id, kReadOnlyMessage);
      answer_slot(s, *slot, now, out);
      continue;
    }
    if (wire::rule_of(r.type).answered_at_admission) {  // the session's business, not the world's
      answer_at_admission(s, *slot, now, out);
      continue;
    }
    if (r.apply_tick > world_.tick() + 1) {
      hold_action(s, r, now, &out);
      continue;
    }
    if (queue_.size() >= kMaxQueuedRequests) {
      // Every session's admission is capped by its rate limit; this guards the total.
      rejects_.note(RejectReason::QueueFull, s.endpoint, {}, now);
      count_result(ResultCode::RateLimited);
      s.requests.answer(r.request_id, ResultCode::RateLimited, r.id, "the server's request queue is full; resend");
      answer_slot(s, *slot, now, out);
      continue;
    }
    queue_.push_back(r);
  }
}

// --- Ticks: actions, inputs (protocol 10) -------------------------------------------------------

bool ServerCore::hold_action(Session& s, const PendingRequest& r, TimePoint now, Outbox* out) {
  // Refused when stamped beyond the lead (a client whose clock ran away, or one holding the
  // world's future hostage), or when the server holds as many as a tick's queue.
  const bool too_far = r.apply_tick > world_.tick() + max_lead_ticks_;
  const bool room = s.held_actions < kMaxHeldActionsPerSession && held_.size() < kMaxHeldActions;
  if (!too_far && room) {
    held_.emplace(r.apply_tick, r);
    ++s.held_actions;
    stats_.actions_held.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const ResultCode code = too_far ? ResultCode::TickOutOfRange : ResultCode::RateLimited;
  const std::string message =
      too_far ? fmt::format("apply_tick: {} is more than --max-input-lead-ms ({} ticks) ahead of the server's tick {}; "
                            "stamp it nearer (ClientCore::input_tick)",
                            r.apply_tick, max_lead_ticks_, world_.tick())
              : fmt::format("too many actions waiting for their tick (at most {} a session); resend it later or "
                            "stamp it nearer",
                            kMaxHeldActionsPerSession);
  rejects_.note(too_far ? RejectReason::TickOutOfRange : RejectReason::QueueFull, s.endpoint, message, now);
  count_result(code);
  if (out != nullptr && r.request_id != 0) {
    s.requests.answer(r.request_id, code, r.id, message);
    if (const RequestSlot* slot = s.requests.find(r.request_id)) answer_slot(s, *slot, now, *out);
  }
  return false;
}

void ServerCore::receive_input(Session* session, const wire::Input& m, const Endpoint& from, TimePoint now) {
  auto refuse = [&](RejectReason reason, std::string_view message) {
    rejects_.note(reason, from, message, now);
    stats_.inputs_refused.fetch_add(1, std::memory_order_relaxed);
  };
  if (session == nullptr) return refuse(RejectReason::NotConnected, "Input");
  if (const wire::Check check = wire::check_request(m); !check.ok()) {
    return refuse(RejectReason::InvalidArgument, check.message);
  }
  if (playback_) return refuse(RejectReason::ReadOnly, "Input");
  if (!session->request_rate.take(1.0, now)) return refuse(RejectReason::RateLimited, "Input over --max-requests-per-second");
  PendingRequest probe;  // ownership as for the pushes the frames become
  probe.type = Message::ApplyForce;
  probe.id = from_wire(m.id());
  probe.client_id = session->client_id;
  std::string_view why;
  if (authorize(probe, &why) != ResultCode::Ok || !world_.is_valid(probe.id)) {
    return refuse(RejectReason::InputRefused, "Input: the body is not live or not the client's to push");
  }
  if (over_budget(*session, now)) return refuse(RejectReason::OverBudget, "Input");
  input_frames_.clear();
  for (const wire::InputFrame* f : *m.frames()) {
    input_frames_.push_back(InputValue{m.mode(), wire::to_vec3(f->linear()), wire::to_vec3(f->angular())});
  }
  const InputCounts before = session->inputs.counts();
  switch (session->inputs.receive(probe.id, m.first_tick(), input_frames_, world_.tick() + 1, max_lead_ticks_)) {
    case InputBuffer::Receipt::Ok: break;
    case InputBuffer::Receipt::TooFarAhead:
      rejects_.note(RejectReason::TickOutOfRange, from, "Input stamped beyond --max-input-lead-ms", now);
      break;
    case InputBuffer::Receipt::NoFreeChannel:
      rejects_.note(RejectReason::InputRefused, from, "Input for more bodies than the session's 4 input channels", now);
      break;
  }
  const InputCounts& after = session->inputs.counts();
  stats_.input_frames_late.fetch_add(after.late - before.late, std::memory_order_relaxed);
  stats_.inputs_refused.fetch_add(after.refused - before.refused, std::memory_order_relaxed);
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

// --- Tick ------------------------------------------------------------------------------------

void ServerCore::answer_raycast(const PendingRequest& r, Outbox& out) {
  Session* s = sessions_.find(r.from);
  if (s == nullptr) return;  // disconnected since
  ray_entries_.clear();
  uint64_t tick = world_.tick();
  if (r.seen_tick != 0 && r.seen_tick != world_.tick()) {
    // Lag compensation: the movable bodies where they were at the tick the client rendered.
    const PoseHistory::Lookup found = history_.poses_at(r.seen_tick, r.seen_fraction, &past_poses_);
    if (found != PoseHistory::Lookup::Ok) {
      const std::string message =
          found == PoseHistory::Lookup::Off
              ? std::string("seen_tick: lag compensation is off on this server (--lag-compensation-ms 0); send 0")
          : found == PoseHistory::Lookup::Future
              ? fmt::format("seen_tick: {} is after the server's tick {}", r.seen_tick, world_.tick())
              : fmt::format("seen_tick: {} is older than the server keeps (--lag-compensation-ms {}: ticks {} to {})",
                            r.seen_tick, config_.lag_compensation_ms, history_.oldest_tick(), history_.newest_tick());
      rejects_.note(RejectReason::TickOutOfRange, r.from, message, clock_.last);
      send(*s, wire::build_raycast_result(fbb_, r.request_id, ResultCode::TickOutOfRange, 0, {}, false, message),
           clock_.last, out);
      if (!r.rerun) {
        s->requests.answer(r.request_id, ResultCode::TickOutOfRange, ObjectID{}, message);
        count_result(ResultCode::TickOutOfRange);
      }
      return;
    }
    stats_.raycasts_compensated.fetch_add(1, std::memory_order_relaxed);
    tick = r.seen_tick;
    if (r.all_hits) {
      world_.raycast_all_at(r.vector, r.translation, past_poses_, ray_hits_, r.query_filter, r.back_faces);
      for (const physics::RayHit& h : ray_hits_) ray_entries_.push_back(to_wire_hit(h));
    } else if (const auto hit = world_.raycast_closest_at(r.vector, r.translation, past_poses_, r.query_filter, r.back_faces)) {
      ray_entries_.push_back(to_wire_hit(*hit));
    }
  } else if (r.all_hits) {
    world_.raycast_all(r.vector, r.translation, ray_hits_, r.query_filter, r.back_faces);
    for (const physics::RayHit& h : ray_hits_) ray_entries_.push_back(to_wire_hit(h));
  } else if (const std::optional<physics::RayHit> hit = world_.raycast_closest(r.vector, r.translation, r.query_filter, r.back_faces)) {
    ray_entries_.push_back(to_wire_hit(*hit));
  }
  // The builder keeps the nearest raycast_hits_per_datagram() hits and flags the rest as cut.
  send(*s, wire::build_raycast_result(fbb_, r.request_id, ResultCode::Ok, tick, ray_entries_, false, {}),
       clock_.last, out);
  if (!r.rerun) {
    s->requests.answer(r.request_id, ResultCode::Ok, ObjectID{}, {});
    count_result(ResultCode::Ok);
  }
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
      default: ok = false; break;  // a plane is infinite: it would be tested against every moving body
    }
    if (!ok) {
      refusal_text_ = shape.kind == physics::ShapeKind::Plane
                          ? std::string("shape: clients may not create planes (--max-client-extent limits client bodies)")
                          : fmt::format("dims: a client's body must fit --max-client-extent {:g} m (radius, half extent, "
                                        "or capsule half height + radius)",
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

// --- The tick budget (tick_budget.h) ---------------------------------------------------------------

uint32_t ServerCore::budget_slot_of(const Account& account) {
  const auto [it, added] = account_slots_.emplace(account, static_cast<uint32_t>(slot_accounts_.size()));
  if (added) slot_accounts_.push_back(account);
  return it->second;
}

ServerCore::Account ServerCore::account_of(const Session& s) const {
  if (token_key_ || s.endpoint.address().is_loopback()) return Account{s.client_id, {}};
  return Account{0, address_prefix(s.endpoint.address())};
}

uint32_t ServerCore::send_every(const Session& s, TimePoint now) {
  const uint32_t own = now < s.send_every_until ? s.send_every : 1;
  return over_budget(s, now) ? std::max(own, kThrottledSendEvery) : own;
}

bool ServerCore::throttled_send_skipped(const Session& s, TimePoint now) {
  // By round of snapshot phases, so a session's events and its one snapshot of the round agree,
  // and a session gets its turn whatever its phase (by tick, a phase of the wrong parity never
  // would); offset by client id, so the reduced sessions' turns are spread over the rounds.
  const uint32_t every = send_every(s, now);
  if (every <= 1) return false;
  const uint64_t round = world_.tick() / static_cast<uint64_t>(snapshot_phases());
  return (round + s.client_id) % every != 0;
}

void ServerCore::share_sends(std::chrono::nanoseconds wakeup, std::chrono::nanoseconds sends, int steps, TimePoint now) {
  if (send_time_for_test_.count() > 0) {
    sends = send_time_for_test_;
    wakeup = step_time_for_test_ * steps + sends;
  }
  const double tick_ms = 1000.0 * steps / config_.tick_hz;
  const double wakeup_ms = std::chrono::duration<double, std::milli>(wakeup).count();
  const double send_ms = std::chrono::duration<double, std::milli>(sends).count();
  const std::span<Session> sessions = sessions_.sessions();
  bool reduced = false;
  for (const Session& s : sessions) reduced = reduced || s.send_every > 1;
  // Nothing to share out or to give back: the common case costs one pass over the sessions.
  if (!(wakeup_ms > kSendShareLoad * tick_ms) && !reduced) return;
  send_costs_.clear();
  send_everys_.clear();
  for (const Session& s : sessions) {
    send_costs_.push_back(s.snapshot_visits);
    send_everys_.push_back(send_every(s, now));
  }
  // The sends' time left once the rest of the wake-up (requests, steps) is in: a wake-up over the
  // aim gives fits < 1 (tighten), one under it fits > 1 (loosen, after the holds).
  const double fits = send_ms > 0 ? (kSendShareLoad * tick_ms - (wakeup_ms - send_ms)) / send_ms : 1e9;
  const uint64_t level = send_share_level(send_costs_, send_everys_, fits);
  uint32_t newly = 0, now_reduced = 0;
  uint64_t worst = 0;
  for (Session& s : sessions) {
    const uint32_t every = send_every_for(s.snapshot_visits, level);
    if (every >= s.send_every) {
      if (every > 1) {  // tighten, or hold as it is while the load lasts
        newly += s.send_every == 1 ? 1 : 0;
        s.send_every = every;
        s.send_every_until = now + kSendShareHold;
      }
    } else if (now >= s.send_every_until) {  // loosen once the hold has passed
      s.send_every = every;
      s.send_every_until = every > 1 ? now + kSendShareHold : TimePoint{};
    }
    if (s.send_every > 1) {
      ++now_reduced;
      worst = std::max<uint64_t>(worst, s.snapshot_visits);
    }
  }
  if (newly > 0) {
    rejects_.note(RejectReason::OverBudget,
                  fmt::format("a {:.1f} ms wake-up ({:.1f} ms of events and snapshots) over {:.0f}% of its {:.1f} ms: {} "
                              "sessions over the send share of {} visits a snapshot get fewer snapshot rounds ({} now, "
                              "the costliest {} visits)",
                              wakeup_ms, send_ms, 100 * kSendShareLoad, tick_ms, newly, level, now_reduced, worst),
                  now);
  }
}

bool ServerCore::over_budget(const Session& s, TimePoint now) {
  if (throttled_.empty()) return false;
  const auto it = throttled_.find(account_of(s));
  if (it == throttled_.end()) return false;
  if (now < it->second) return true;
  throttled_.erase(it);
  return false;
}

void ServerCore::charge_tick_budget(std::chrono::nanoseconds step_time, TimePoint now) {
  // Throttles end on their own; the rest of the accounting runs only for a step over budget.
  for (auto it = throttled_.begin(); it != throttled_.end();) it = now >= it->second ? throttled_.erase(it) : std::next(it);
  // Each contact is charged to both of its bodies (only to awake ones below).
  const uint64_t work = world_.awake_count() + 2ull * kContactWork * world_.active_contact_count();
  const double step_ms = std::chrono::duration<double, std::milli>(step_time).count();
  // The whole wake-up counts against the tick: a step within its budget whose events and
  // snapshots (one write per session over every object in its area) overrun the tick still
  // makes the server drop steps. The sends are the previous wake-up's (this one's are to come).
  const double tick_ms = 1000.0 / config_.tick_hz;
  const double wakeup_ms = step_ms + last_send_ms_;
  if (wakeup_ms > tick_ms) {
    ++overrun_streak_;
    // A streak whose lateness adds up to a whole tick is a step the server drops: the grace ends.
    // Each wake-up adds at most a quarter tick, so a lone stall (spawning thousands of bodies at
    // once, a descheduled thread) is not enough: it takes four wake-ups in a row 25% late.
    overrun_debt_ms_ += std::min(wakeup_ms - tick_ms, 0.25 * tick_ms);
    if (overrun_debt_ms_ >= tick_ms) overrun_streak_ = std::max(overrun_streak_, kOverrunGrace + 1);
  } else {
    overrun_streak_ = 0;
    overrun_debt_ms_ = 0;
  }
  if (step_ms > config_.tick_budget_ms && work >= static_cast<uint64_t>(config_.tick_budget_min_work)) {
    // Charge each account what its awake bodies cost this step: each 1, plus kContactWork per
    // contact (so a contact between two owners' awake bodies is charged to both). Runs for every
    // step over budget, at capacity too: O(1) lookups and array indices only.
    slot_cost_.assign(slot_accounts_.size(), 0);
    for (uint32_t index = 0; index < owners_.size(); ++index) {
      const Ownership& o = owners_[index];
      const ObjectID id{index, o.generation};
      if (o.client_id == 0 || !world_.is_awake(id)) continue;
      slot_cost_[o.budget_slot] += 1 + kContactWork * world_.contact_count_of(id);
    }
    // The work this step could have had within the budget, shared fairly among the accounts (the
    // scene's bodies are nobody's and keep their part).
    const double fits = std::min(config_.tick_budget_ms / step_ms, tick_ms / wakeup_ms);
    const uint64_t target = static_cast<uint64_t>(static_cast<double>(work) * fits);
    uint64_t charged = 0;
    account_costs_.clear();
    for (const uint64_t cost : slot_cost_) {
      if (cost == 0) continue;
      account_costs_.push_back(cost);
      charged += cost;
    }
    const uint64_t scene = work > charged ? work - charged : 0;
    const uint64_t level = std::max(min_share_work(wakeup_ms, tick_ms, overrun_streak_),
                                    fair_share_level(account_costs_, target > scene ? target - scene : 0));
    for (uint32_t slot = 0; slot < slot_cost_.size(); ++slot) {
      const uint64_t cost = slot_cost_[slot];
      if (cost <= level) continue;
      const Account& account = slot_accounts_[slot];
      const bool fresh = throttled_.insert_or_assign(account, now + kThrottleHold).second;
      if (!fresh) continue;  // already throttled: the hold is extended, and logged once
      rejects_.note(RejectReason::OverBudget,
                    fmt::format("{} cost {} work units of a {:.1f} ms step (share {}; budget {} ms)",
                                account.first != 0 ? fmt::format("client {}", account.first) : account.second.to_string(),
                                cost, step_ms, level, config_.tick_budget_ms),
                    now);
    }
  }
  if (!throttled_.empty()) sleep_throttled_bodies(now);
}

void ServerCore::sleep_throttled_bodies(TimePoint now) {
  // Which slots are throttled (charge_tick_budget has just dropped the expired holds), so the
  // per-body test is an index.
  slot_throttled_.assign(slot_accounts_.size(), 0);
  for (const auto& [account, until] : throttled_) {
    const auto slot = account_slots_.find(account);
    if (slot != account_slots_.end() && now < until) slot_throttled_[slot->second] = 1;
  }
  // Through the journal like a request, so a recording replays it (kServerSleep).
  for (uint32_t index = 0; index < owners_.size(); ++index) {
    const Ownership& o = owners_[index];
    const ObjectID id{index, o.generation};
    if (o.client_id == 0 || slot_throttled_[o.budget_slot] == 0 || !world_.is_awake(id)) continue;
    PendingRequest sleep;
    sleep.type = kServerSleep;
    sleep.client_id = o.client_id;
    sleep.id = id;
    const AppliedRequest applied = apply_to_world(world_, sleep, dt_);
    journal_.applied(sleep, to_result_code(applied.error), id);
    stats_.bodies_put_to_sleep_over_budget.fetch_add(1, std::memory_order_relaxed);
  }
}

bool ServerCore::replace_sessions_of(const Session& confirmed, TimePoint now, Outbox& out) {
  // The same player connected again (new address or restarted game) and proved it holds the
  // token's secret: the new session wins. The old ones' objects stay (this is not a departure).
  const uint32_t client_id = confirmed.client_id;
  const Endpoint endpoint = confirmed.endpoint;
  std::vector<Endpoint> old;
  for (Session& s : sessions_.sessions()) {
    if (s.client_id != client_id || s.endpoint == endpoint) continue;
    send(s, wire::build_disconnect(fbb_, "replaced by a new session of the same client id"), now, out);
    spdlog::info("client {} reconnected from {}: its session at {} is replaced", client_id, to_string(endpoint),
                 to_string(s.endpoint));
    journal_.session(record::ClientEventType::Disconnect, client_id, world_.tick(), to_string(s.endpoint), {});
    old.push_back(s.endpoint);
  }
  for (const Endpoint& e : old) remove_session(e);
  return !old.empty();
}

void ServerCore::note_departed(const Session& s) {
  // An unconfirmed session never acted; in token mode its client id may hold a live session.
  if (!s.confirmed) return;
  if (destroy_on_disconnect_ && !playback_ && live_objects_of(s.client_id) > 0) departed_.push_back(s.client_id);
}

void ServerCore::destroy_departed() {
  for (const uint32_t client : departed_) {
    // A token's client id may have connected again since: it keeps its objects.
    if (live_objects_of(client) == 0 || sessions_.find_client(client) != nullptr) continue;
    uint32_t destroyed = 0;
    for (uint32_t index = 0; index < owners_.size(); ++index) {
      const Ownership o = owners_[index];
      if (o.client_id != client || o.generation == 0) continue;
      PendingRequest r;
      r.type = Message::DestroyObject;
      r.client_id = client;
      r.id = ObjectID{index, o.generation};
      const AppliedRequest applied = apply_to_world(world_, r, dt_);
      journal_.applied(r, describe(applied.error, r.type).code, r.id);
      note_applied(r, r.id);  // a StaleId (gone some other way) clears the entry too
      if (applied.error == physics::Error::Ok) ++destroyed;
    }
    live_objects_.erase(client);
    spdlog::info("client id={} left: its {} objects destroyed (--on-disconnect destroy)", client, destroyed);
  }
  departed_.clear();
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

bool ServerCore::wakes_a_sleeper(const PendingRequest& r) const {
  // A client's own body (the scene's bodies are nobody's account), asleep now.
  return adds_work(r.type) && r.type != Message::CreateObject && r.id.index < owners_.size() &&
         owners_[r.id.index].client_id != 0 && owners_[r.id.index].generation == r.id.generation &&
         world_.is_asleep(r.id);
}

void ServerCore::plan_wakes() {
  // --max-wakes-per-tick: the pushes queued for this tick that would wake a sleeping body, by
  // the account that owns it (only pushes its owner may make: others are refused anyway), and
  // each account's max-min fair share of the allowance (tick_budget.h).
  wake_level_ = UINT64_MAX;
  if (config_.max_wakes_per_tick <= 0) return;
  wake_wanted_.assign(slot_accounts_.size(), 0);
  uint64_t total = 0;
  std::string_view ignored;
  for (const PendingRequest& r : queue_) {
    if (!wakes_a_sleeper(r) || authorize(r, &ignored) != ResultCode::Ok) continue;
    ++wake_wanted_[owners_[r.id.index].budget_slot];
    ++total;
  }
  if (total <= static_cast<uint64_t>(config_.max_wakes_per_tick)) return;
  account_costs_.clear();
  for (const uint64_t wanted : wake_wanted_) {
    if (wanted > 0) account_costs_.push_back(wanted);
  }
  wake_level_ = fair_share_level(account_costs_, static_cast<uint64_t>(config_.max_wakes_per_tick));
  wake_granted_.assign(slot_accounts_.size(), 0);
}

bool ServerCore::take_wake(uint32_t slot) {
  // An account first seen in this queue (its first body created, asleep, a few requests ago) was
  // not planned for: it takes its grants under the same level.
  if (slot >= wake_granted_.size()) wake_granted_.resize(slot_accounts_.size(), 0);
  return wake_granted_[slot]++ < wake_level_;
}

void ServerCore::apply_requests(TimePoint now, Outbox& out) {
  plan_wakes();
  for (const PendingRequest& r : queue_) apply_request(r, now, out);
  // After the queue, so requests a client sent before it left cannot leave objects behind.
  if (!departed_.empty()) destroy_departed();
  note_joint_removals();  // destroyed by a request, or with a body
}

void ServerCore::answer_raycasts(Outbox& out) {
  // After the steps, so a raycast sees what the snapshot of this wake-up shows (including bodies
  // created by requests queued before it), and its hits carry that tick.
  for (const PendingRequest& r : queue_) {
    if (r.type == Message::Raycast) answer_raycast(r, out);
  }
  queue_.clear();
}

void ServerCore::write_events(TimePoint now, Outbox& out) {
  // Each session gets the new events inside its area of interest, then everything due for a
  // (re)send, in as few datagrams as they need.
  const size_t per_datagram = wire::collision_events_per_datagram();
  event_points_.clear();
  for (const wire::CollisionEvent& e : events_) event_points_.push_back(wire::to_vec3(e.point()));
  uint64_t over_cap = 0;
  uint32_t sessions_over_cap = 0;
  for (Session& s : sessions_.sessions()) {
    queue_joint_events(s);
    size_t queued = 0;
    for (size_t k = 0; k < events_.size(); ++k) {
      if (!inside_interest(s.interest, event_points_[k], kEventInterestMargin)) continue;
      if (queued == kMaxNewEventsPerSession) {
        ++over_cap;
        continue;
      }
      s.events.push(events_[k]);
      ++queued;
    }
    sessions_over_cap += queued == kMaxNewEventsPerSession ? 1 : 0;
    stats_.events_queued.fetch_add(queued, std::memory_order_relaxed);
    if (throttled_send_skipped(s, now)) continue;  // queued, sent at its next turn
    const auto rtt = std::chrono::duration<double, std::milli>(s.acks.estimates().rtt_ms * 1.25);
    const auto resend_after =
        std::max<std::chrono::nanoseconds>(kMinEventResend, std::chrono::duration_cast<std::chrono::nanoseconds>(rtt));
    for (size_t d = 0; d < kMaxEventDatagramsPerUpdate; ++d) {
      s.events.collect_due(now, resend_after, per_datagram, &event_batch_, &event_joint_batch_);
      if (event_batch_.empty()) break;
      // Bit-packed with the session's snapshot quantisation (points at the position step).
      const auto bytes = wire::build_collision_events(fbb_, event_batch_, sender_config_.quant, event_joint_batch_);
      if (bytes.empty()) break;  // unreachable: validate_config checked the quantisation
      const uint32_t sequence = send(s, bytes, now, out);
      s.events.mark_sent(sequence, now);
      stats_.event_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
    }
  }
  joint_events_.clear();
  joint_event_fields_.clear();
  joint_event_serials_.clear();
  if (over_cap > 0) {
    rejects_.note(RejectReason::EventsDropped,
                  fmt::format("{} events over the per-session cap of {} an update, for {} sessions", over_cap,
                              kMaxNewEventsPerSession, sessions_over_cap),
                  now);
  }
}

uint32_t ServerCore::relay_inputs(const Session& s, size_t tokens) {
  // Only when the bucket holds the entries besides the smallest payload: a throttled session
  // keeps its bytes for the states themselves.
  if (tick_inputs_.empty() || !s.snapshots || config_.relay_inputs <= 0 ||
      tokens < kMinSnapshotBudgetBytes + sizeof(wire::RelayedInput)) {
    return 0;
  }
  const InterestArea& area = s.snapshots->interest();
  const float reach = sender_config_.hysteresis_m;
  const Vec3 focus = area.kind == InterestArea::Kind::Box ? (area.min + area.max) * 0.5f : area.center;
  relay_order_.clear();
  for (uint32_t k = 0; k < tick_inputs_.size(); ++k) {
    const TickInput& t = tick_inputs_[k];
    if (t.client_id == s.client_id || !std::isfinite(t.position.x)) continue;
    if (distance_outside(area, t.position) > reach) continue;
    const float d = area.kind == InterestArea::Kind::All ? 0.0f : length(t.position - focus);
    relay_order_.emplace_back(d, k);
  }
  const size_t afford = (tokens - kMinSnapshotBudgetBytes) / sizeof(wire::RelayedInput);
  const size_t n = std::min({relay_order_.size(), static_cast<size_t>(std::max(config_.relay_inputs, 0)), afford});
  // Nearest first; ties by the body's id, then (a shared body two sessions drive) by take order.
  const auto nearer = [&](const std::pair<float, uint32_t>& a, const std::pair<float, uint32_t>& b) {
    if (a.first != b.first) return a.first < b.first;
    const uint64_t ia = tick_inputs_[a.second].relayed.id(), ib = tick_inputs_[b.second].relayed.id();
    return ia != ib ? ia < ib : a.second < b.second;
  };
  std::partial_sort(relay_order_.begin(), relay_order_.begin() + static_cast<std::ptrdiff_t>(n), relay_order_.end(),
                    nearer);
  for (size_t k = 0; k < n; ++k) relayed_inputs_.push_back(tick_inputs_[relay_order_[k].second].relayed);
  stats_.inputs_relayed.fetch_add(n, std::memory_order_relaxed);
  return static_cast<uint32_t>(n);
}

int ServerCore::snapshot_phases() const { return std::max(1, config_.tick_hz / config_.snapshot_hz); }

void ServerCore::write_snapshots(TimePoint now, Outbox& out, std::span<const uint8_t> phase_due) {
  const std::span<Session> sessions = sessions_.sessions();
  // 1. The due sessions, in session order, with their budgets, the sequence send() will give and
  //    the other sessions' inputs each is relayed.
  due_snapshots_.clear();
  relayed_inputs_.clear();
  for (TickInput& t : tick_inputs_) {
    const std::optional<physics::BodyState> body = world_.get_object(from_wire(t.relayed.id()));
    const float gone = std::numeric_limits<float>::quiet_NaN();  // removed in the step: not relayed
    t.position = body ? body->position : Vec3{gone, gone, gone};
  }
  for (uint32_t i = 0; i < sessions.size(); ++i) {
    Session& s = sessions[i];
    if (!s.snapshots) continue;
    if (!phase_due.empty() && (s.snapshot_phase >= phase_due.size() || phase_due[s.snapshot_phase] == 0)) continue;
    if (now - s.last_heard > kSilentSessionSnapshotHold) {
      stats_.snapshots_held_silent.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (throttled_send_skipped(s, now)) {
      stats_.snapshots_held_throttled.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    s.bytes_out.refill(now);
    // The budget: what the bucket holds, at most one datagram. An empty bucket still sends a
    // minimal snapshot so acks and exits keep flowing.
    const size_t tokens = static_cast<size_t>(std::max(0.0, s.bytes_out.tokens));
    const uint32_t first_input = static_cast<uint32_t>(relayed_inputs_.size());
    const uint32_t inputs = relay_inputs(s, tokens);
    const size_t room = wire::snapshot_payload_capacity(inputs);
    const size_t budget = std::clamp<size_t>(tokens - std::min(tokens, inputs * sizeof(wire::RelayedInput)),
                                             kMinSnapshotBudgetBytes, room);
    due_snapshots_.push_back(DueSnapshot{i, s.acks.last_sent() + 1, budget, first_input, inputs});
  }
  if (due_snapshots_.empty()) return;
  build_snapshot_source(world_, sender_config_.quant, &snapshot_source_, &pool_);
  snapshot_source_.tick = world_.tick();

  // 2. The payloads, on the pool's threads in runs of sessions: a write reads the shared source
  //    and changes only its own session's SnapshotSender and payload buffer, so the bytes do not
  //    depend on the thread count.
  const size_t due = due_snapshots_.size();
  if (snapshot_payloads_.size() < due) snapshot_payloads_.resize(due);
  const size_t runs = std::min(due, static_cast<size_t>(pool_.threads()) * kSnapshotRunsPerThread);
  pool_.for_each(runs, [&](size_t run) {
    for (size_t k = run * due / runs; k < (run + 1) * due / runs; ++k) {
      const DueSnapshot& d = due_snapshots_[k];
      Session& s = sessions[d.session];
      s.snapshot_visits = s.snapshots->write(snapshot_source_, d.sequence, d.budget, &snapshot_payloads_[k]).visits;
    }
  });

  // 3. Envelopes and sends in session order, so the datagrams leave in the same order too. A
  // drain's time left rides in every snapshot, so a lost one costs nothing.
  uint32_t stop_in_ms = 0;
  if (stop_at_) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*stop_at_ - now).count();
    stop_in_ms = static_cast<uint32_t>(std::clamp<int64_t>(left, 1, UINT32_MAX));
  }
  for (size_t k = 0; k < due; ++k) {
    Session& s = sessions[due_snapshots_[k].session];
    const DueSnapshot& d = due_snapshots_[k];
    const auto bytes = wire::build_snapshot(fbb_, world_.tick(), snapshot_payloads_[k],
                                            s.inputs.min_lead(world_.tick() + 1), stop_in_ms,
                                            std::span(relayed_inputs_).subspan(d.first_input, d.inputs));
    send(s, bytes, now, out);  // assigns exactly due_snapshots_[k].sequence
    stats_.snapshot_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
  }
  if (snapshot_observer_) snapshot_observer_(world_);
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

void ServerCore::expire_sessions(TimePoint now, Outbox& out) {
  expired_.clear();
  sessions_.take_expired(now - client_timeout_, now - kUnconfirmedSessionLifetime, &expired_);
  if (expired_.empty()) return;
  for (Session& s : expired_) {
    note_departed(s);
    send(s,
         wire::build_disconnect(fbb_, s.confirmed ? "timed out: no datagram within the client timeout"
                                                  : "timed out: no sealed datagram within 2 s of ConnectAccepted"),
         now, out);
    if (s.confirmed) {
      log_disconnect(s,
                     fmt::format("timed out after {:.1f} s of silence",
                                 std::chrono::duration<double>(now - s.last_heard).count()),
                     now);
    } else {
      rejects_.note(RejectReason::Unconfirmed, s.endpoint, {}, now);  // rate-limited: a flood is many
    }
    journal_.session(record::ClientEventType::Timeout, s.client_id, world_.tick(), to_string(s.endpoint), {});
  }
  stats_.clients.store(sessions_.size(), std::memory_order_relaxed);
}

void ServerCore::shut_down(std::string_view reason, Outbox& out) {
  shutting_down_ = true;
  expired_.clear();
  sessions_.take_all(&expired_);
  for (Session& s : expired_) {
    send(s, wire::build_disconnect(fbb_, reason), clock_.last, out);
    log_disconnect(s, reason, clock_.last);
    journal_.session(record::ClientEventType::ServerShutdown, s.client_id, world_.tick(), to_string(s.endpoint), {});
  }
  stats_.clients.store(0, std::memory_order_relaxed);
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

}  // namespace impulse::server

// --- Playback mode (impulse-replay serve) ------------------------------------------------------

namespace impulse::server {

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
