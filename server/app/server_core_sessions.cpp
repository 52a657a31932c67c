// ServerCore, the receive side: each datagram's session lookup, authentication and dispatch;
// the handshake (cookie round trip, tokens, accept); session ends (disconnect, timeout,
// replacement, shutdown) and the sealed sends. A request goes on to server_core_admission.cpp.
#include "server/app/server_core.h"

#include <spdlog/spdlog.h>

#include "server/app/server_core_internal.h"
#include "server/net/address_prefix.h"
#include "shared/log_fields.h"

namespace impulse::server {
namespace {

using wire::Message;
using wire::ResultCode;
using namespace core_rules;

constexpr std::string_view kNotConnectedMessage = "no session for this address: send Connect first";

std::string_view client_name_of(const wire::Connect& m) {
  return m.client_name() ? m.client_name()->string_view() : std::string_view{};
}

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

}  // namespace impulse::server
