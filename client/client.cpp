// Thin UDP client: request/response over an unreliable channel with caller-driven polling and
// multi-part snapshot reassembly (newest tick wins), after netcode.io's client update model and
// Glenn Fiedler, "Packet Fragmentation and Reassembly", gafferongames.com (2016).
#include "client/client.h"

#include <poll.h>

#include <algorithm>
#include <string>
#include <system_error>

#include <asio.hpp>

namespace impulse {

namespace {

using Clock = std::chrono::steady_clock;
using asio::ip::udp;

/// Connect is resent this often until answered: a lost datagram costs at most this much.
constexpr std::chrono::milliseconds kConnectResendInterval{250};
/// An idle client sends a Ping this often so the server does not time the session out.
constexpr std::chrono::milliseconds kKeepaliveInterval{1000};
/// Disconnect is sent this many times; the server ignores the duplicates.
constexpr int kDisconnectRepeats = 3;
/// Bounds on a snapshot's layout. A part holds at most this many ObjectStates: more could never
/// fit in a kMaxDatagramBytes datagram, so a larger claim is hostile or corrupt.
constexpr uint32_t kMaxObjectsPerPart = static_cast<uint32_t>(wire::kMaxDatagramBytes / sizeof(wire::ObjectState));
constexpr uint32_t kMaxSnapshotParts = 4096;
/// Outstanding pings remembered for RTT measurement; older ones are forgotten.
constexpr size_t kPingSlots = 16;

ObjectState to_object_state(const wire::ObjectState& s) {
  return ObjectState{from_wire(s.id()),          wire::to_vec3(s.position()),
                     wire::to_vec3(s.velocity()), wire::to_vec3(s.dims()),
                     wire::to_quat(s.orientation()), wire::to_vec3(s.angular_velocity()),
                     s.kind(),                    s.shape(),
                     s.sleeping(),                s.sensor()};
}

/// Copies at most kMaxStringBytes of a wire string (the verifier bounds it by the datagram).
std::string copy_wire_string(const flatbuffers::String* s) {
  if (s == nullptr) return {};
  return std::string(s->c_str(), std::min<size_t>(s->size(), wire::kMaxStringBytes));
}

/// Truncates to at most `max_bytes` without splitting a UTF-8 sequence.
std::string_view truncate_utf8(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0u) == 0x80u) --n;
  return s.substr(0, n);
}

}  // namespace

struct Client::Impl {
  enum class State : uint8_t { Idle, Connecting, Connected };

  /// A snapshot tick being reassembled from its parts.
  struct Assembly {
    bool active = false;
    uint64_t tick = 0;
    uint16_t part_count = 0;
    uint32_t object_count = 0;
    uint32_t parts_received = 0;
    std::vector<uint8_t> part_seen;  ///< [part_count] 1 once that part arrived
    std::vector<ObjectState> objects;
  };

  struct PendingPing {
    uint64_t nonce = 0;  ///< 0 = free slot
    Clock::time_point sent_at;
    bool from_user = false;
  };

  asio::io_context io;
  udp::socket socket{io};
  udp::endpoint server;
  State state = State::Idle;

  flatbuffers::FlatBufferBuilder fbb{512};
  // +1 byte detects an oversized datagram; aligned because u64 fields are read in place.
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes + 1> receive_buffer{};

  PollResult result;
  bool result_handed_out = false;  ///< poll() returned `result`; the next poll() clears it

  // Session state, reset by connect() and disconnect().
  uint32_t client_id = 0;
  uint16_t tick_hz = 0;
  uint16_t snapshot_hz = 0;
  uint64_t server_tick = 0;
  std::optional<uint64_t> latest_snapshot_tick;
  std::vector<ObjectState> objects;  ///< latest complete snapshot, sorted by id
  Assembly assembly;
  std::optional<wire::ResultCode> rejected_reason;
  std::string rejected_message;
  bool saw_version_mismatch = false;

  uint32_t next_request_id = 1;
  uint64_t next_nonce = 1;
  std::array<PendingPing, kPingSlots> pings{};
  Clock::time_point last_send_time{};
  std::optional<std::chrono::microseconds> last_rtt;
  ClientStats stats;

  // ------------------------------------------------------------------ sending

  void send_bytes(std::span<const uint8_t> bytes) {
    std::error_code ec;
    socket.send_to(asio::buffer(bytes.data(), bytes.size()), server, 0, ec);
    if (ec) {
      ++stats.send_errors;
      return;
    }
    ++stats.datagrams_out;
    stats.bytes_out += bytes.size();
    last_send_time = Clock::now();
  }

  uint32_t take_request_id() {
    const uint32_t id = next_request_id++;
    if (next_request_id == 0) next_request_id = 1;  // 0 means "not sent"
    return id;
  }

  void send_connect(std::string_view name) { send_bytes(wire::build_connect(fbb, name)); }

  uint64_t send_ping(bool from_user) {
    const uint64_t nonce = next_nonce++;
    pings[nonce % kPingSlots] = PendingPing{nonce, Clock::now(), from_user};
    send_bytes(wire::build_ping(fbb, nonce));
    return nonce;
  }

  // ------------------------------------------------------------------ receiving

  void reset_session() {
    state = State::Idle;
    client_id = 0;
    tick_hz = 0;
    snapshot_hz = 0;
    server_tick = 0;
    latest_snapshot_tick.reset();
    objects.clear();
    assembly.active = false;
    assembly.objects.clear();
    rejected_reason.reset();
    rejected_message.clear();
    saw_version_mismatch = false;
    pings.fill(PendingPing{});
  }

  void clear_result_if_handed_out() {
    if (!result_handed_out) return;
    result.snapshots.clear();
    result.snapshot_objects.clear();
    result.results.clear();
    result.raycasts.clear();
    result.ray_hits.clear();
    result.collisions.clear();
    result.pongs.clear();
    result.server_disconnected = false;
    result.disconnect_reason.clear();
    result_handed_out = false;
  }

  void count_drop(wire::DropReason reason) {
    ++stats.datagrams_dropped;
    ++stats.drops_by_reason[static_cast<size_t>(reason)];
  }

  void note_tick(uint64_t tick) { server_tick = std::max(server_tick, tick); }

  bool from_server(const udp::endpoint& from) const {
    if (from.port() != server.port()) return false;
    // A server addressed as 0.0.0.0 / :: answers from a concrete local address.
    return server.address().is_unspecified() || from.address() == server.address();
  }

  /// Waits until the socket is readable or `timeout` passes. Returns true when readable.
  bool wait_readable(std::chrono::milliseconds timeout) {
    if (!socket.is_open()) return false;
    pollfd fd{};
    fd.fd = socket.native_handle();
    fd.events = POLLIN;
    const int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 0, 60'000));
    return ::poll(&fd, 1, ms) > 0;
  }

  /// Receives every queued datagram without blocking.
  void drain() {
    if (!socket.is_open()) return;
    for (;;) {
      udp::endpoint from;
      std::error_code ec;
      const size_t n = socket.receive_from(asio::buffer(receive_buffer), from, 0, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) return;
      if (ec) {
        // ICMP errors (e.g. connection_refused) surface here on some platforms: not data.
        if (ec == asio::error::connection_refused || ec == asio::error::connection_reset) continue;
        return;
      }
      handle_datagram(std::span<const uint8_t>(receive_buffer.data(), n), from);
    }
  }

  void handle_datagram(std::span<const uint8_t> bytes, const udp::endpoint& from) {
    ++stats.datagrams_in;
    stats.bytes_in += bytes.size();
    if (state == State::Idle || !from_server(from)) {
      count_drop(wire::DropReason::None);
      return;
    }
    const wire::Verified verified = wire::verify_datagram(bytes, wire::Direction::ServerToClient);
    if (verified.reason != wire::DropReason::None) {
      if (verified.reason == wire::DropReason::VersionMismatch) saw_version_mismatch = true;
      count_drop(verified.reason);
      return;
    }
    const wire::Envelope& envelope = *verified.envelope;

    if (state == State::Connecting) {
      handle_connect_answer(envelope);
      return;
    }
    switch (envelope.message_type()) {
      case wire::Message::ConnectAccepted: {
        // A duplicate answer to one of our resent Connects: harmless.
        const auto* m = envelope.message_as_ConnectAccepted();
        if (m->client_id() != client_id) count_drop(wire::DropReason::None);
        return;
      }
      case wire::Message::RequestResult: {
        const auto* m = envelope.message_as_RequestResult();
        result.results.push_back(RequestResult{m->request_id(), m->code(), from_wire(m->id()),
                                               copy_wire_string(m->message())});
        return;
      }
      case wire::Message::RaycastResult:
        handle_raycast_result(*envelope.message_as_RaycastResult());
        return;
      case wire::Message::Snapshot:
        handle_snapshot(*envelope.message_as_Snapshot());
        return;
      case wire::Message::CollisionEvents: {
        const auto* events = envelope.message_as_CollisionEvents()->events();
        if (events == nullptr) return;
        for (const wire::CollisionEvent* e : *events) {
          result.collisions.push_back(CollisionEvent{e->tick(), e->type(), from_wire(e->a()),
                                                     from_wire(e->b()), wire::to_vec3(e->point()),
                                                     wire::to_vec3(e->normal())});
          note_tick(e->tick());
        }
        return;
      }
      case wire::Message::Pong:
        handle_pong(*envelope.message_as_Pong());
        return;
      case wire::Message::Disconnect:
        result.server_disconnected = true;
        result.disconnect_reason = copy_wire_string(envelope.message_as_Disconnect()->reason());
        reset_session();
        return;
      default:
        count_drop(wire::DropReason::None);  // e.g. ConnectRejected outside a connect
        return;
    }
  }

  void handle_connect_answer(const wire::Envelope& envelope) {
    if (const auto* accepted = envelope.message_as_ConnectAccepted()) {
      state = State::Connected;
      client_id = accepted->client_id();
      tick_hz = accepted->tick_hz();
      snapshot_hz = accepted->snapshot_hz();
      note_tick(accepted->tick());
      return;
    }
    if (const auto* rejected = envelope.message_as_ConnectRejected()) {
      rejected_reason = rejected->reason();
      rejected_message = copy_wire_string(rejected->message());
      return;
    }
    // Snapshots can only follow an accept; anything before it is a leftover of an old session.
    count_drop(wire::DropReason::None);
  }

  void handle_raycast_result(const wire::RaycastResult& m) {
    RaycastResult r;
    r.request_id = m.request_id();
    r.code = m.code();
    r.tick = m.tick();
    r.message = copy_wire_string(m.message());
    r.truncated = m.truncated();
    r.first = static_cast<uint32_t>(result.ray_hits.size());
    if (const auto* hits = m.hits()) {  // bounded by the verified datagram (<= 1200 bytes)
      for (const wire::RayHitEntry* h : *hits) {
        result.ray_hits.push_back(
            RayHit{from_wire(h->id()), wire::to_vec3(h->point()), wire::to_vec3(h->normal()), h->fraction()});
      }
    }
    r.count = static_cast<uint32_t>(result.ray_hits.size()) - r.first;
    result.raycasts.push_back(std::move(r));
  }

  void handle_pong(const wire::Pong& pong) {
    PendingPing& slot = pings[pong.nonce() % kPingSlots];
    if (slot.nonce == 0 || slot.nonce != pong.nonce()) {
      count_drop(wire::DropReason::None);  // never sent, already answered, or forgotten
      return;
    }
    const auto rtt = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - slot.sent_at);
    last_rtt = rtt;
    note_tick(pong.tick());
    if (slot.from_user) result.pongs.push_back(PongInfo{pong.nonce(), pong.tick(), rtt});
    slot = PendingPing{};
  }

  /// Reassembles a snapshot: parts of one tick are collected until all part_count arrived; a
  /// newer tick abandons an incomplete older one; parts older than the latest complete tick
  /// (late or duplicated datagrams) are ignored. Every count is range-checked before use.
  void handle_snapshot(const wire::Snapshot& s) {
    const uint64_t tick = s.tick();
    const uint32_t part = s.part();
    const uint32_t part_count = s.part_count();
    const uint32_t object_count = s.object_count();
    const auto* wire_objects = s.objects();
    const uint32_t n = wire_objects != nullptr ? wire_objects->size() : 0;
    if (part_count == 0 || part_count > kMaxSnapshotParts || part >= part_count ||
        object_count > part_count * kMaxObjectsPerPart || n > object_count) {
      count_drop(wire::DropReason::None);
      return;
    }
    note_tick(tick);
    if ((latest_snapshot_tick && tick <= *latest_snapshot_tick) ||
        (assembly.active && tick < assembly.tick)) {
      ++stats.snapshot_parts_stale;
      return;
    }
    if (!assembly.active || tick > assembly.tick) {
      if (assembly.active) ++stats.snapshots_superseded;
      assembly.active = true;
      assembly.tick = tick;
      assembly.part_count = static_cast<uint16_t>(part_count);
      assembly.object_count = object_count;
      assembly.parts_received = 0;
      assembly.part_seen.assign(part_count, 0);
      assembly.objects.clear();
    } else if (part_count != assembly.part_count || object_count != assembly.object_count) {
      count_drop(wire::DropReason::None);  // parts of one tick disagree on its layout
      return;
    }
    if (assembly.part_seen[part] != 0) return;  // duplicated datagram
    if (assembly.objects.size() + n > assembly.object_count) {
      count_drop(wire::DropReason::None);
      return;
    }
    if (wire_objects != nullptr) {  // an absent vector is a part with no objects
      for (const wire::ObjectState* o : *wire_objects) assembly.objects.push_back(to_object_state(*o));
    }
    assembly.part_seen[part] = 1;
    ++assembly.parts_received;
    if (assembly.parts_received < assembly.part_count) return;

    assembly.active = false;
    if (assembly.objects.size() != assembly.object_count) {
      count_drop(wire::DropReason::None);  // parts complete but the totals disagree
      return;
    }
    complete_snapshot();
  }

  void complete_snapshot() {
    std::vector<ObjectState>& incoming = assembly.objects;
    std::sort(incoming.begin(), incoming.end(),
              [](const ObjectState& x, const ObjectState& y) { return x.id < y.id; });
    // A hostile or buggy server could repeat an id; keep one so find() stays well defined.
    incoming.erase(std::unique(incoming.begin(), incoming.end(),
                               [](const ObjectState& x, const ObjectState& y) { return x.id == y.id; }),
                   incoming.end());
    objects.swap(incoming);  // the old buffer becomes the next assembly's storage
    latest_snapshot_tick = assembly.tick;
    ++stats.snapshots_completed;

    const auto first = static_cast<uint32_t>(result.snapshot_objects.size());
    result.snapshot_objects.insert(result.snapshot_objects.end(), objects.begin(), objects.end());
    result.snapshots.push_back(SnapshotRange{assembly.tick, first, static_cast<uint32_t>(objects.size())});
  }
};

// ---------------------------------------------------------------------- Client

Client::Client() : impl_(std::make_unique<Impl>()) {}

Client::~Client() {
  if (connected()) disconnect();
}

bool Client::connect(std::string_view host, uint16_t port, std::chrono::milliseconds timeout,
                     std::string* error, std::string_view name) {
  Impl& m = *impl_;
  auto fail = [&](std::string message) {
    m.reset_session();
    if (error != nullptr) *error = std::move(message);
    return false;
  };
  if (connected()) disconnect("reconnecting");
  m.reset_session();
  m.result_handed_out = true;
  m.clear_result_if_handed_out();

  const std::string host_text(host);
  const std::string where = host_text + ":" + std::to_string(port);
  std::error_code ec;
  udp::endpoint endpoint;
  const asio::ip::address address = asio::ip::make_address(host_text, ec);
  if (!ec) {
    endpoint = udp::endpoint(address, port);
  } else {
    udp::resolver resolver(m.io);
    const auto results = resolver.resolve(host_text, std::to_string(port), ec);
    if (ec || results.empty()) {
      return fail("cannot resolve host '" + host_text + "': " +
                  (ec ? ec.message() : std::string("no addresses")) + ": check the --server value");
    }
    endpoint = results.begin()->endpoint();
    for (const auto& r : results) {  // prefer IPv4: the server binds 0.0.0.0 by default
      if (r.endpoint().address().is_v4()) {
        endpoint = r.endpoint();
        break;
      }
    }
  }

  if (m.socket.is_open() && m.socket.local_endpoint(ec).protocol() != endpoint.protocol()) {
    m.socket.close(ec);
  }
  if (!m.socket.is_open()) {
    m.socket.open(endpoint.protocol(), ec);
    if (!ec) m.socket.bind(udp::endpoint(endpoint.protocol(), 0), ec);
    if (!ec) m.socket.non_blocking(true, ec);
    if (ec) {
      std::error_code ignored;
      m.socket.close(ignored);
      return fail("cannot open a UDP socket: " + ec.message());
    }
  }
  m.server = endpoint;
  m.state = Impl::State::Connecting;

  const std::string_view client_name = truncate_utf8(name, wire::kMaxClientNameBytes);
  const Clock::time_point deadline = Clock::now() + timeout;
  Clock::time_point next_send = Clock::now();
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    if (now >= next_send) {
      m.send_connect(client_name);
      next_send = now + kConnectResendInterval;
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(std::min(next_send, deadline) - now);
    if (m.wait_readable(wait)) m.drain();
    if (m.state == Impl::State::Connected) return true;
    if (m.rejected_reason) {
      const char* reason = wire::EnumNameResultCode(*m.rejected_reason);
      std::string message = "server at " + where + " rejected the connection: " +
                            (*reason != '\0' ? reason : "unknown reason");
      if (!m.rejected_message.empty()) message += " (" + m.rejected_message + ")";
      if (*m.rejected_reason == wire::ResultCode::VersionMismatch) {
        message += ": this client speaks protocol version " + std::to_string(wire::kProtocolVersion) +
                   "; use a client built for the server's version";
      } else if (*m.rejected_reason == wire::ResultCode::ServerFull) {
        message += ": try again later or raise the server's --max-clients";
      }
      return fail(std::move(message));
    }
  }
  if (m.saw_version_mismatch) {
    return fail("server at " + where + " answered with another protocol version (this client speaks " +
                std::to_string(wire::kProtocolVersion) + "): use matching client and server builds");
  }
  return fail("no answer from " + where + " within " + std::to_string(timeout.count()) +
              " ms: is impulse-server running there, and is UDP port " + std::to_string(port) +
              " reachable?");
}

void Client::disconnect(std::string_view reason) {
  Impl& m = *impl_;
  if (m.state != Impl::State::Idle && m.socket.is_open()) {
    const std::string_view text = truncate_utf8(reason, wire::kMaxStringBytes);
    for (int i = 0; i < kDisconnectRepeats; ++i) m.send_bytes(wire::build_disconnect(m.fbb, text));
  }
  m.reset_session();
}

bool Client::connected() const { return impl_->state == Impl::State::Connected; }

uint32_t Client::create_object(const ObjectDesc& desc) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  wire::CreateObjectArgs args;
  args.kind = desc.kind;
  args.shape = desc.shape;
  args.dims = desc.dims;
  args.position = desc.position;
  args.velocity = desc.velocity;
  args.mass = desc.mass;
  args.restitution = desc.restitution;
  args.friction = desc.friction;
  args.orientation = desc.orientation;
  args.angular_velocity = desc.angular_velocity;
  args.angular_damping = desc.angular_damping;
  args.material = desc.material;
  args.sensor = desc.sensor;
  m.send_bytes(wire::build_create_object(m.fbb, request_id, args));
  return request_id;
}

uint32_t Client::destroy(ObjectID id) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  m.send_bytes(wire::build_destroy_object(m.fbb, request_id, id));
  return request_id;
}

uint32_t Client::apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  m.send_bytes(wire::build_apply_force(m.fbb, request_id, id, force, point));
  return request_id;
}

uint32_t Client::apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  m.send_bytes(wire::build_apply_impulse(m.fbb, request_id, id, impulse, point));
  return request_id;
}

uint32_t Client::set_velocity(ObjectID id, Vec3 velocity) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  m.send_bytes(wire::build_set_velocity(m.fbb, request_id, id, velocity));
  return request_id;
}

uint32_t Client::apply_torque(ObjectID id, Vec3 torque) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  m.send_bytes(wire::build_apply_torque(m.fbb, request_id, id, torque));
  return request_id;
}

uint32_t Client::set_angular_velocity(ObjectID id, Vec3 angular_velocity) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  m.send_bytes(wire::build_set_angular_velocity(m.fbb, request_id, id, angular_velocity));
  return request_id;
}

uint32_t Client::raycast(Vec3 origin, Vec3 translation, bool all) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  m.send_bytes(wire::build_raycast(m.fbb, request_id, origin, translation, all));
  return request_id;
}

uint64_t Client::ping() {
  if (!connected()) return 0;
  return impl_->send_ping(true);
}

const PollResult& Client::poll(std::chrono::milliseconds max_wait) {
  Impl& m = *impl_;
  m.clear_result_if_handed_out();
  m.result_handed_out = true;
  if (m.socket.is_open()) {
    m.drain();
    if (m.result.empty() && max_wait.count() > 0 && m.wait_readable(max_wait)) m.drain();
  }
  if (m.state == Impl::State::Connected && Clock::now() - m.last_send_time >= kKeepaliveInterval) {
    m.send_ping(false);
  }
  return m.result;
}

std::span<const ObjectState> Client::objects() const { return impl_->objects; }

const ObjectState* Client::find(ObjectID id) const {
  const std::vector<ObjectState>& objects = impl_->objects;
  const auto it = std::lower_bound(objects.begin(), objects.end(), id,
                                   [](const ObjectState& s, ObjectID key) { return s.id < key; });
  return it != objects.end() && it->id == id ? &*it : nullptr;
}

uint32_t Client::client_id() const { return impl_->client_id; }
uint64_t Client::server_tick() const { return impl_->server_tick; }
uint64_t Client::snapshot_tick() const { return impl_->latest_snapshot_tick.value_or(0); }
uint16_t Client::tick_hz() const { return impl_->tick_hz; }
uint16_t Client::snapshot_hz() const { return impl_->snapshot_hz; }
std::optional<std::chrono::microseconds> Client::last_rtt() const { return impl_->last_rtt; }
const ClientStats& Client::stats() const { return impl_->stats; }

uint16_t Client::local_port() const {
  std::error_code ec;
  if (!impl_->socket.is_open()) return 0;
  const udp::endpoint local = impl_->socket.local_endpoint(ec);
  return ec ? 0 : local.port();
}

}  // namespace impulse
