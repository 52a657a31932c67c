// ClientCore: the Impulse client protocol without I/O. The cookie handshake, packet acks on every
// datagram, requests resent until answered (the server deduplicates), delta snapshots decoded
// against acked baselines (wire::SnapshotReceiver), reliable collision events delivered once each;
// clock sync (NTP's on-wire estimate, ClockSync) and snapshot interpolation (Fiedler, "Snapshot
// Interpolation", https://gafferongames.com/post/snapshot_interpolation/) for pose_at. Time only
// ever comes from the caller.
#include "impulse/client_core.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "impulse/schemas/impulse_generated.h"
#include "shared/net/packet_acks.h"
#include "shared/net/packet_crypto.h"
#include "shared/wire/codec.h"
#include "shared/wire/event_codec.h"
#include "shared/wire/snapshot_codec.h"

namespace impulse {

namespace {

using Clock = ClientCore::Clock;

/// Connect is resent this often until answered: a lost datagram costs at most this much.
constexpr std::chrono::milliseconds kConnectResendInterval{250};
/// An idle client sends a Ping this often so the server does not time the session out.
constexpr std::chrono::milliseconds kKeepaliveInterval{1000};
/// Disconnect is sent this many times; the server ignores the duplicates.
constexpr int kDisconnectRepeats = 3;
/// Requests in flight at most; later ones wait in the client until earlier ones are answered.
/// Below the server's exactly-once window (256), so nothing sent is ever beyond it.
constexpr size_t kMaxRequestsInFlight = 192;
/// An unanswered request is resent after max(this, 1.5 x RTT).
constexpr std::chrono::milliseconds kMinRequestResend{50};
/// Collision event sequences remembered for deduplication beyond the contiguous prefix.
constexpr uint32_t kEventDedupWindow = 8192;
/// Outstanding pings remembered for RTT measurement; older ones are forgotten.
constexpr size_t kPingSlots = 16;

/// input_tick()'s margin beyond the estimated arrival [ticks]: at first (one tick of slack and
/// one of jitter), at most (the server refuses leads beyond --max-input-lead-ms), and the report
/// above which it shrinks (a steady surplus only delays the player's inputs).
constexpr int kInitialInputMargin = 2;
constexpr int kMaxInputMargin = 30;
constexpr int kMaxSpareLead = 2;

/// Largest fixed interpolation delay ClientConfig accepts [s].
constexpr double kMaxInterpolationDelayS = 5.0;

// The public enums mirror the schema's values one for one; these conversions are casts, and the
// asserts keep them so.
static_assert(static_cast<int>(BodyKind::Kinematic) == static_cast<int>(wire::BodyKind::Kinematic) &&
              static_cast<int>(wire::BodyKind::MAX) == 2);
static_assert(static_cast<int>(ShapeKind::Cylinder) == static_cast<int>(wire::ShapeKind::Cylinder) &&
              static_cast<int>(wire::ShapeKind::MAX) == 7);
static_assert(static_cast<int>(InputMode::Velocity) == static_cast<int>(wire::InputMode::Velocity) &&
              static_cast<int>(wire::InputMode::MAX) == static_cast<int>(wire::InputMode::Velocity));
static_assert(static_cast<int>(ResultCode::TickOutOfRange) == static_cast<int>(wire::ResultCode::TickOutOfRange) &&
              static_cast<int>(wire::ResultCode::MAX) == 20);
static_assert(static_cast<int>(ContactEventType::End) == static_cast<int>(wire::ContactEventType::End) &&
              static_cast<int>(wire::ContactEventType::MAX) == 3);  // 2 and 3 are joint events (JointEvent)
static_assert(static_cast<int>(JointKind::SwingTwist) == static_cast<int>(wire::JointKind::SwingTwist) &&
              static_cast<int>(wire::JointKind::MAX) == 5);
static_assert(static_cast<int>(JointMotorMode::Position) == static_cast<int>(wire::JointMotorMode::Position) &&
              static_cast<int>(wire::JointMotorMode::MAX) == 2);
static_assert(static_cast<int>(JointRemovedReason::BodyGone) == static_cast<int>(wire::JointRemovedReason::BodyGone));
static_assert(static_cast<int>(ReplayAction::SetSpeed) == static_cast<int>(wire::ReplayAction::SetSpeed) &&
              static_cast<int>(wire::ReplayAction::MAX) == 3);
static_assert(static_cast<int>(InterestKind::Box) == static_cast<int>(wire::InterestKind::Box) &&
              static_cast<int>(wire::InterestKind::MAX) == 2);
static_assert(kDropReasonCount == static_cast<size_t>(wire::DropReason::Count));
static_assert(kSnapshotErrorCount == static_cast<size_t>(wire::SnapshotError::Count));
static_assert(kEventBlockErrorCount == static_cast<size_t>(wire::EventBlockError::Count));

ResultCode from_wire(wire::ResultCode c) { return static_cast<ResultCode>(c); }
BodyKind from_wire(wire::BodyKind k) { return static_cast<BodyKind>(k); }
ShapeKind from_wire(wire::ShapeKind k) { return static_cast<ShapeKind>(k); }
ContactEventType from_wire(wire::ContactEventType t) { return static_cast<ContactEventType>(t); }

InterpolationSample to_interpolation_sample(const wire::SnapshotObject& s) {
  return InterpolationSample{s.id, s.position, s.orientation, s.velocity, s.angular_velocity, s.at_rest};
}

ObjectState to_object_state(const wire::SnapshotObject& s, uint64_t tick) {
  return ObjectState{s.id,       s.position, s.velocity, s.dims,  s.orientation, s.angular_velocity,
                     from_wire(s.kind), from_wire(s.shape), s.at_rest, s.sensor,      s.asset, tick};
}

wire::QuantizationConfig to_quantization(const wire::Quantization* q) {
  wire::QuantizationConfig c;
  if (q == nullptr) return c;
  c.world_bound_m = q->world_bound();
  c.position_fraction_bits = q->position_fraction_bits();
  c.orientation_bits = q->orientation_bits();
  c.max_linear_speed = q->max_linear_speed();
  c.linear_velocity_fraction_bits = q->linear_velocity_fraction_bits();
  c.max_angular_speed = q->max_angular_speed();
  c.angular_velocity_fraction_bits = q->angular_velocity_fraction_bits();
  return c;
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

const char* to_string(ResultCode code) {
  const char* name = wire::EnumNameResultCode(static_cast<wire::ResultCode>(code));
  return *name != '\0' ? name : "unknown";
}

const char* to_string(ConnectionState state) {
  switch (state) {
    case ConnectionState::Disconnected: return "Disconnected";
    case ConnectionState::SendingConnect: return "SendingConnect";
    case ConnectionState::SendingCookie: return "SendingCookie";
    case ConnectionState::Connected: return "Connected";
    case ConnectionState::Failed: return "Failed";
  }
  return "unknown";
}

const char* to_string(ConnectFailure failure) {
  switch (failure) {
    case ConnectFailure::None: return "None";
    case ConnectFailure::TimedOut: return "TimedOut";
    case ConnectFailure::Rejected: return "Rejected";
    case ConnectFailure::VersionMismatch: return "VersionMismatch";
    case ConnectFailure::BadServerConfig: return "BadServerConfig";
    case ConnectFailure::ResolveFailed: return "ResolveFailed";
    case ConnectFailure::SocketError: return "SocketError";
    case ConnectFailure::ConnectionLost: return "ConnectionLost";
  }
  return "unknown";
}

struct ClientCore::Impl {
  /// A request queued and not yet answered: its datagram is kept for resending.
  struct OutstandingRequest {
    uint32_t request_id = 0;
    std::vector<uint8_t> bytes;    ///< the datagram as built (the header is restamped per send)
    Clock::time_point last_sent{};
    bool sent = false;             ///< false: not sent yet (queued, or waiting for room in the window)
  };

  struct PendingPing {
    uint64_t nonce = 0;  ///< 0 = free slot
    Clock::time_point sent_at;
    bool from_user = false;
  };

  /// A fire-and-forget force waiting for the next update().
  struct UnreliableForce {
    ObjectID id;
    Vec3 force;
    std::optional<Vec3> point;
  };

  ConnectionState state = ConnectionState::Disconnected;
  ConnectionError error;
  void (*queue_listener)(void*) = nullptr;  ///< set_queue_listener
  void* queue_listener_context = nullptr;
  PeerAddress server;
  ConnectParams params;
  TimePoint now_{};                   ///< the latest time the caller gave
  TimePoint connect_deadline{};
  TimePoint next_connect_send{};
  TimePoint last_receive_time{};      ///< the latest datagram from the server that verified

  flatbuffers::FlatBufferBuilder fbb{512};
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> send_buffer{};
  // Aligned because u64 fields are read in place.
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> receive_buffer{};
  // Sealed datagrams are opened into here (aligned, read in place) and sealed from send_buffer into sealed_buffer.
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> unseal_buffer{};
  std::array<uint8_t, wire::kMaxDatagramBytes> sealed_buffer{};
  DatagramQueue outbox;

  // Packet protection: this connect's X25519 share, the token split into what is sent and the
  // secret that is kept, and the session's keys and replay window once ConnectAccepted arrived.
  net::KxKeyPair kx;
  std::vector<uint8_t> wire_token;
  net::BindingSecret token_secret{};
  net::PacketProtection protection;

  PollResult pending;   ///< filled since the last take_result()
  PollResult handed;    ///< what the last take_result() returned

  // Session state, reset by connect() and disconnect().
  uint32_t client_id = 0;
  uint16_t tick_hz = 0;
  uint16_t snapshot_hz = 0;
  std::optional<ReplayRange> replay;  ///< set when ConnectAccepted says the server plays a recording
  uint64_t server_tick = 0;
  std::optional<uint64_t> latest_snapshot_tick;
  std::vector<ObjectState> objects;  ///< the view after the latest applied snapshot, sorted by id
  std::vector<ObjectState> previous_objects;  ///< update_objects scratch: the view before it
  std::vector<ObjectID> carried_scratch;       ///< update_objects scratch: ids the payload carried
  std::optional<wire::SnapshotReceiver> snapshots;  ///< created with the server's quantisation
  net::PacketAcks acks;
  std::vector<uint32_t> newly_acked;
  std::vector<OutstandingRequest> outstanding;  ///< ascending request id
  std::vector<uint64_t> user_pings;             ///< nonces of ping() calls not yet sent
  std::vector<UnreliableForce> unreliable;      ///< apply_force_unreliable calls not yet sent
  uint32_t max_objects = 0;
  uint32_t acked_through = 0;       ///< the newest server sequence our last header acked
  uint32_t events_contiguous = 0;   ///< every event sequence <= this was delivered
  std::vector<uint32_t> events_seen;  ///< delivered sequences above events_contiguous, sorted
  std::vector<wire::CollisionEvent> decoded_events;  ///< scratch of handle_collision_events, reused
  std::vector<wire::JointEventFields> decoded_joints;  ///< its joint column
  std::vector<JointEvent> joints;   ///< the live joints heard of (JointAdded), sorted by joint id
  std::vector<uint8_t> cookie;      ///< from the server's Challenge
  bool saw_version_mismatch = false;

  uint32_t next_request_id = 1;
  uint64_t next_nonce = 1;
  std::array<PendingPing, kPingSlots> pings{};
  Clock::time_point last_send_time{};
  std::optional<std::chrono::microseconds> last_rtt;
  ClientStats stats;

  // Clock sync and interpolation (ClientConfig), reset by every connect.
  ClientConfig config;
  ClockSync clock;
  SnapshotInterpolator interpolator;
  Clock::time_point next_time_ping{};           ///< when the next clock-sync Ping is due
  std::vector<InterpolationSample> samples;     ///< scratch of feed_interpolator, reused

  // Ticks (protocol 10), reset by every connect.
  uint64_t action_tick = 0;  ///< set_action_tick: stamps the next world-changing request
  /// The last kInputRedundancy ticks of input of each body send_input drove (consecutive ticks).
  struct InputHistory {
    ObjectID id;
    wire::InputMode mode = wire::InputMode::Force;
    uint64_t first_tick = 0;
    std::vector<wire::InputFrame> frames;
  };
  std::vector<InputHistory> input_histories;
  int input_margin = kInitialInputMargin;
  std::optional<int> input_lead;
  std::optional<TimePoint> server_stops_at;  ///< from Snapshot.stop_in_ms: a draining server's end
  /// on_result's callbacks by request id (an ordered map: its size is bounded, and no order leaks).
  std::map<uint32_t, std::function<void(const RequestResult&)>> result_callbacks;
  TimePoint margin_changed_at{};

  bool in_connect() const {
    return state == ConnectionState::SendingConnect || state == ConnectionState::SendingCookie;
  }
  std::string server_label() const { return params.server_label.empty() ? "the server" : "server at " + params.server_label; }

  // ------------------------------------------------------------------ sending

  /// Queues one datagram built by the codec; in a session its header gets the next sequence and
  /// the current acks.
  void send_bytes(std::span<const uint8_t> built) {
    if (state == ConnectionState::Connected) {
      // Every datagram of a session is sealed; one that cannot be (oversized, sequence space
      // exhausted) is not sent at all.
      if (built.size() + net::kSealOverheadBytes > sealed_buffer.size()) return;
      std::copy(built.begin(), built.end(), send_buffer.begin());
      const auto stamped = std::span<uint8_t>(send_buffer.data(), built.size());
      const uint32_t sequence = acks.on_send(now_, built.size() + net::kSealOverheadBytes);
      if (sequence == 0) {
        // 2^32 - 1 sent: a sequence is the seal's nonce and may never repeat under this key.
        fail(ConnectFailure::ConnectionLost, ResultCode::Ok,
             "the session's packet sequence space is used up (2^32 - 1 datagrams): connect again");
        return;
      }
      const net::AckFields f = acks.ack_fields();
      wire::stamp_header(stamped, wire::PacketHeader(sequence, f.ack, f.ack_bits));
      acked_through = f.ack;
      const size_t sealed = net::seal_packet(protection.send_key, sequence, stamped, sealed_buffer);
      if (sealed == 0) return;
      outbox.push(std::span<const uint8_t>(sealed_buffer.data(), sealed));
    } else {
      outbox.push(built);
    }
    last_send_time = now_;
  }

  uint32_t take_request_id() {
    const uint32_t id = next_request_id++;
    if (next_request_id == 0) next_request_id = 1;  // 0 means "not sent"
    return id;
  }

  void send_connect() { send_bytes(wire::build_connect(fbb, params.name, cookie, wire_token, kx.public_key)); }

  /// Queues a request built in `fbb`; update() sends it when the in-flight window has room and
  /// resends it until its result arrives.
  uint32_t queue_request(uint32_t request_id, std::span<const uint8_t> built) {
    OutstandingRequest r;
    r.request_id = request_id;
    r.bytes.assign(built.begin(), built.end());
    // Only a world-changing request has the slot; another type leaves the action tick for the next.
    if (action_tick != 0 && wire::stamp_apply_tick(r.bytes, action_tick)) action_tick = 0;
    outstanding.push_back(std::move(r));
    notify_queued();
    return request_id;
  }

  /// raycast() and raycast_seen(): 0 when not connected.
  uint32_t queue_raycast(Vec3 origin, Vec3 translation, bool all, std::optional<RayFilter> filter, bool back_faces,
                         uint64_t seen_tick, float seen_fraction) {
    if (state != ConnectionState::Connected) return 0;
    const uint32_t request_id = take_request_id();
    return queue_request(request_id, wire::build_raycast(
                                         fbb, request_id, origin, translation, all,
                                         filter ? std::optional{std::pair{filter->category, filter->mask}} : std::nullopt,
                                         back_faces, seen_tick, seen_fraction));
  }

  void notify_queued() {
    if (queue_listener != nullptr) queue_listener(queue_listener_context);
  }

  std::chrono::nanoseconds request_resend_interval() const {
    // Before the first acked datagram there is no RTT sample: assume a modest one (100 ms) rather
    // than resending at the floor rate into a slow link.
    const net::LinkEstimates link = acks.estimates();
    const double rtt_ms = link.acked > 0 ? link.rtt_ms : 100.0;
    const auto rtt = std::chrono::duration<double, std::milli>(rtt_ms * 1.5);
    return std::max<std::chrono::nanoseconds>(kMinRequestResend,
                                              std::chrono::duration_cast<std::chrono::nanoseconds>(rtt));
  }

  /// Sends what the window allows and resends what waited too long for its answer.
  void pump_requests() {
    if (state != ConnectionState::Connected) return;
    const auto resend = request_resend_interval();
    size_t in_flight = 0;
    for (OutstandingRequest& r : outstanding) {
      if (in_flight >= kMaxRequestsInFlight) break;
      ++in_flight;
      if (r.sent && now_ - r.last_sent < resend) continue;
      if (r.sent) ++stats.requests_resent;
      r.sent = true;
      r.last_sent = now_;
      send_bytes(r.bytes);
    }
  }

  /// Sends the Pings and fire-and-forget forces queued since the last update.
  void send_queued() {
    if (state != ConnectionState::Connected) return;
    for (const uint64_t nonce : user_pings) send_ping_with(nonce, true);
    user_pings.clear();
    for (const UnreliableForce& f : unreliable) send_bytes(wire::build_apply_force(fbb, 0, f.id, f.force, f.point));
    unreliable.clear();
  }

  /// A header acks only the last 33 sequences, so a client that sends nothing while snapshots
  /// stream in must ack on its own: an ack-only Ping (nonce 0, not answered) once per snapshot
  /// interval in which datagrams arrived and nothing was sent.
  void send_ack_if_due() {
    if (state != ConnectionState::Connected || acks.newest_received() == acked_through) return;
    const auto interval = std::chrono::milliseconds(1000 / std::max<int>(1, snapshot_hz));
    if (now_ - last_send_time < interval) return;
    send_bytes(wire::build_ping(fbb, 0));
  }

  /// True the first time a result for `request_id` arrives (it was outstanding): later copies of
  /// the same answer (the server answers every resend) are dropped.
  bool take_outstanding(uint32_t request_id) {
    const auto it = std::lower_bound(outstanding.begin(), outstanding.end(), request_id,
                                     [](const OutstandingRequest& r, uint32_t id) { return r.request_id < id; });
    if (it == outstanding.end() || it->request_id != request_id) return false;
    outstanding.erase(it);
    return true;
  }

  /// True the first time event `sequence` arrives.
  bool first_delivery(uint32_t sequence) {
    if (sequence == 0 || sequence <= events_contiguous) return false;
    if (sequence - events_contiguous > kEventDedupWindow) {
      // Far ahead (the server dropped events, or hostile): forget the gap rather than grow.
      events_contiguous = sequence - 1;
      events_seen.clear();
    }
    const auto it = std::lower_bound(events_seen.begin(), events_seen.end(), sequence);
    if (it != events_seen.end() && *it == sequence) return false;
    events_seen.insert(it, sequence);
    while (!events_seen.empty() && events_seen.front() == events_contiguous + 1) {
      ++events_contiguous;
      events_seen.erase(events_seen.begin());
    }
    return true;
  }

  void send_ping_with(uint64_t nonce, bool from_user) {
    pings[nonce % kPingSlots] = PendingPing{nonce, now_, from_user};
    send_bytes(wire::build_ping(fbb, nonce));
  }

  /// The clock-sync Pings (time_req): a burst until the clock is ready, then a steady cadence
  /// (ClockSync::next_ping_interval). Each carries acks like any datagram.
  void send_time_ping_if_due() {
    if (state != ConnectionState::Connected || now_ < next_time_ping) return;
    send_ping_with(next_nonce++, false);
    ++stats.time_pings_sent;
    next_time_ping = now_ + clock.next_ping_interval();
  }

  // ------------------------------------------------------------------ clock and interpolation

  InterpolationConfig interpolation_config() const {
    InterpolationConfig c;
    if (tick_hz > 0) c.tick_hz = tick_hz;  // 0 (a broken server): the buffer keeps its default
    c.max_extrapolation_s = config.max_extrapolation_s;
    c.correction_time_constant_s = config.correction_time_constant_s;
    c.history = config.interpolation_history;
    return c;
  }

  /// The render delay behind a typical arrival that is not inside the playout lag [ticks]: the
  /// fixed delay, or the default's two snapshot intervals (its jitter part is in the lag).
  double buffer_ticks() const {
    if (config.interpolation_delay_s) return *config.interpolation_delay_s * tick_hz;
    return default_delay_ticks(tick_hz, snapshot_hz, 0.0);
  }

  std::optional<double> render_tick_at(Clock::time_point now) const {
    if (state != ConnectionState::Connected) return std::nullopt;
    return clock.render_tick(now, tick_hz, buffer_ticks());
  }

  double interpolation_delay_s() const {
    if (state != ConnectionState::Connected) return 0.0;
    if (config.interpolation_delay_s) return *config.interpolation_delay_s;
    if (snapshot_hz == 0) return 0.0;
    return kDefaultDelaySnapshotIntervals / snapshot_hz + clock.jitter_s();
  }

  /// Pushes what the applied snapshot of `tick` carried into the buffer: exits leave it, entries
  /// and updates add a state. Objects the snapshot did not carry keep their last state (the
  /// server sends nothing for an unchanged object, and defers some when over budget).
  void feed_interpolator(uint64_t tick, std::optional<double> shown_tick) {
    if (!config.interpolation) return;
    for (const ObjectID id : snapshots->exited()) interpolator.remove(id);
    samples.clear();
    for (const auto ids : {snapshots->entered(), snapshots->updated()}) {
      for (const ObjectID id : ids) {
        if (const wire::SnapshotObject* o = snapshots->find(id)) samples.push_back(to_interpolation_sample(*o));
      }
    }
    interpolator.add(tick, shown_tick, samples);
  }

  /// A fresh buffer holding the current view at the newest snapshot's tick (set_config).
  void rebuild_interpolator() {
    interpolator.reset(interpolation_config());
    if (!config.interpolation || !snapshots || !latest_snapshot_tick) return;
    samples.clear();
    for (const wire::SnapshotObject& o : snapshots->objects()) samples.push_back(to_interpolation_sample(o));
    interpolator.add(*latest_snapshot_tick, std::nullopt, samples);
  }

  // ------------------------------------------------------------------ receiving

  void reset_session() {
    state = ConnectionState::Disconnected;
    error = ConnectionError{};
    client_id = 0;
    next_request_id = 1;  // the server's window starts at 1 for every session
    tick_hz = 0;
    snapshot_hz = 0;
    replay.reset();
    server_tick = 0;
    latest_snapshot_tick.reset();
    server_stops_at.reset();
    result_callbacks.clear();
    objects.clear();
    snapshots.reset();
    acks = net::PacketAcks{};
    protection = net::PacketProtection{};
    outstanding.clear();
    user_pings.clear();
    unreliable.clear();
    max_objects = 0;
    acked_through = 0;
    events_contiguous = 0;
    events_seen.clear();
    joints.clear();
    cookie.clear();
    saw_version_mismatch = false;
    pings.fill(PendingPing{});
    clock.reset();
    interpolator.clear();
    next_time_ping = Clock::time_point{};
    action_tick = 0;
    input_histories.clear();
    input_margin = kInitialInputMargin;
    input_lead.reset();
    margin_changed_at = TimePoint{};
  }

  /// Ends the connect or the session with a reason (state Failed).
  void fail(ConnectFailure kind, ResultCode code, std::string message) {
    reset_session();
    state = ConnectionState::Failed;
    error = ConnectionError{kind, code, std::move(message)};
  }

  static void clear(PollResult& r) {
    r.snapshots.clear();
    r.snapshot_objects.clear();
    r.snapshot_inputs.clear();
    r.results.clear();
    r.raycasts.clear();
    r.ray_hits.clear();
    r.collisions.clear();
    r.joints.clear();
    r.pongs.clear();
    r.server_disconnected = false;
    r.disconnect_reason.clear();
  }

  void count_drop(wire::DropReason reason) {
    ++stats.datagrams_dropped;
    ++stats.drops_by_reason[static_cast<size_t>(reason)];
  }

  void note_tick(uint64_t tick) { server_tick = std::max(server_tick, tick); }

  bool from_server(const PeerAddress& from) const {
    if (from.port != server.port) return false;
    // A server addressed as 0.0.0.0 / :: answers from a concrete local address.
    return server.family == 0 || from == server;
  }

  void handle_datagram(std::span<const uint8_t> bytes, const PeerAddress& from) {
    ++stats.datagrams_in;
    stats.bytes_in += bytes.size();
    if (state == ConnectionState::Disconnected || state == ConnectionState::Failed || !from_server(from)) {
      count_drop(wire::DropReason::None);
      return;
    }
    // In a session only sealed datagrams count, authenticated (replay window, then tag) before
    // anything in them is read. Before it, a sealed datagram cannot be opened yet (our
    // ConnectAccepted was lost; the resent Connect fetches it again).
    std::span<const uint8_t> plain = bytes;
    uint32_t sealed_sequence = 0;
    if (net::is_sealed(bytes)) {
      size_t plain_bytes = 0;
      if (state != ConnectionState::Connected ||
          net::open_session_packet(protection, bytes, unseal_buffer, &plain_bytes, &sealed_sequence) !=
              net::OpenError::None) {
        ++stats.datagrams_unauthenticated;
        return;
      }
      plain = std::span<const uint8_t>(unseal_buffer.data(), plain_bytes);
    }
    const wire::Verified verified = wire::verify_datagram(plain, wire::Direction::ServerToClient);
    if (verified.reason != wire::DropReason::None) {
      if (verified.reason == wire::DropReason::VersionMismatch) saw_version_mismatch = true;
      count_drop(verified.reason);
      return;
    }
    const wire::Envelope& envelope = *verified.envelope;
    if (state == ConnectionState::Connected && sealed_sequence == 0) {
      // Plaintext in a session: a duplicate answer to a resent Connect is expected and ignored;
      // anything else (a forged Disconnect, result or snapshot) is not the server's.
      if (envelope.message_type() == wire::Message::ConnectAccepted) {
        count_drop(wire::DropReason::None);
      } else {
        ++stats.datagrams_unauthenticated;
      }
      return;
    }
    last_receive_time = now_;

    if (in_connect()) {
      handle_connect_answer(envelope);
      return;
    }
    const wire::PacketHeader header = wire::header_of(envelope);
    if (header.sequence() != sealed_sequence) {  // sealed by the server, so a server bug: drop it
      count_drop(wire::DropReason::None);
      return;
    }
    newly_acked.clear();
    acks.on_acks(net::AckFields{header.ack(), header.ack_bits()}, now_, &newly_acked);
    // A snapshot is acked only once applied (its payload then becomes a baseline), collision
    // events only once their block decoded (an ack tells the server to stop resending them);
    // everything else as soon as it verified.
    const bool acked_when_applied = envelope.message_type() == wire::Message::Snapshot ||
                                    envelope.message_type() == wire::Message::CollisionEvents;
    if (!acked_when_applied && header.sequence() != 0) acks.on_receive(header.sequence());
    switch (envelope.message_type()) {
      case wire::Message::ConnectAccepted: {
        // A duplicate answer to one of our resent Connects: harmless.
        const auto* m = envelope.message_as_ConnectAccepted();
        if (m->client_id() != client_id) count_drop(wire::DropReason::None);
        return;
      }
      case wire::Message::RequestResult: {
        const auto* m = envelope.message_as_RequestResult();
        if (!take_outstanding(m->request_id())) {
          ++stats.results_duplicate;  // the answer to a resend of a request already answered
          return;
        }
        pending.results.push_back(RequestResult{m->request_id(), from_wire(m->code()), from_wire(m->id()),
                                                copy_wire_string(m->message()), m->tick()});
        return;
      }
      case wire::Message::RaycastResult:
        if (!take_outstanding(envelope.message_as_RaycastResult()->request_id())) {
          ++stats.results_duplicate;
          return;
        }
        handle_raycast_result(*envelope.message_as_RaycastResult());
        return;
      case wire::Message::Snapshot:
        handle_snapshot(*envelope.message_as_Snapshot(), header.sequence());
        return;
      case wire::Message::CollisionEvents:
        handle_collision_events(*envelope.message_as_CollisionEvents(), header.sequence());
        return;
      case wire::Message::Pong:
        handle_pong(*envelope.message_as_Pong());
        return;
      case wire::Message::Disconnect:
        pending.server_disconnected = true;
        pending.disconnect_reason = copy_wire_string(envelope.message_as_Disconnect()->reason());
        reset_session();
        return;
      default:
        count_drop(wire::DropReason::None);  // e.g. ConnectRejected outside a connect
        return;
    }
  }

  void handle_connect_answer(const wire::Envelope& envelope) {
    if (const auto* challenge = envelope.message_as_Challenge()) {
      // Echo the cookie at once: it proves we receive at our address.
      if (challenge->cookie() == nullptr) return count_drop(wire::DropReason::None);
      cookie.assign(challenge->cookie()->begin(), challenge->cookie()->end());
      state = ConnectionState::SendingCookie;
      send_connect();
      next_connect_send = now_ + kConnectResendInterval;
      return;
    }
    if (const auto* accepted = envelope.message_as_ConnectAccepted()) {
      // It must answer this attempt's Connect: one that echoes another key share answers a
      // replayed Connect (or an earlier attempt), and its keys would not be ours.
      const auto* echoed = accepted->client_kx_public();
      if (echoed == nullptr || echoed->size() != kx.public_key.size() ||
          !std::equal(echoed->begin(), echoed->end(), kx.public_key.begin())) {
        ++stats.datagrams_unauthenticated;
        return;
      }
      const wire::QuantizationConfig q = to_quantization(accepted->quantization());
      std::string problem;
      if (!q.validate(&problem)) {
        fail(ConnectFailure::BadServerConfig, ResultCode::InvalidArgument,
             server_label() + " announced an unusable snapshot quantisation: " + problem +
                 ": use matching client and server builds");
        return;
      }
      const auto* server_kx = accepted->kx_public();
      net::KxPublicKey server_public{};
      if (server_kx != nullptr && server_kx->size() == server_public.size()) {
        std::copy(server_kx->begin(), server_kx->end(), server_public.begin());
      }
      // The token's secret is mixed in only when the server opened the token (token_bound).
      const net::BindingSecret binding = accepted->token_bound() ? token_secret : net::BindingSecret{};
      net::SessionKeys keys;
      if (server_kx == nullptr || server_kx->size() != server_public.size() ||
          !net::client_session_keys(kx, server_public, binding, &keys)) {
        fail(ConnectFailure::BadServerConfig, ResultCode::InvalidArgument,
             server_label() + " sent no usable key share (ConnectAccepted.kx_public): use matching client and server builds");
        return;
      }
      protection.send_key = keys.client_to_server;
      protection.receive_key = keys.server_to_client;
      protection.keyed = true;
      state = ConnectionState::Connected;
      client_id = accepted->client_id();
      tick_hz = accepted->tick_hz();
      snapshot_hz = accepted->snapshot_hz();
      max_objects = accepted->max_objects();
      if (accepted->replay()) replay = ReplayRange{accepted->replay_first_tick(), accepted->replay_last_tick()};
      snapshots.emplace(q);
      clock.reset();
      interpolator.reset(interpolation_config());
      next_time_ping = now_;  // the burst starts at once
      const wire::PacketHeader header = wire::header_of(envelope);
      if (header.sequence() != 0) acks.on_receive(header.sequence());
      note_tick(accepted->tick());
      send_time_ping_if_due();
      return;
    }
    if (const auto* rejected = envelope.message_as_ConnectRejected()) {
      const ResultCode code = from_wire(rejected->reason());
      const char* reason = to_string(code);
      std::string message = server_label() + " rejected the connection: " + reason;
      const std::string detail = copy_wire_string(rejected->message());
      if (!detail.empty()) message += " (" + detail + ")";
      ConnectFailure kind = ConnectFailure::Rejected;
      if (code == ResultCode::VersionMismatch) {
        kind = ConnectFailure::VersionMismatch;
        message += ": this client speaks protocol version " + std::to_string(wire::kProtocolVersion) +
                   "; use a client built for the server's version";
      } else if (code == ResultCode::ServerFull) {
        message += ": try again later or raise the server's --max-clients";
      } else if (code == ResultCode::TokenRequired || code == ResultCode::TokenInvalid ||
                 code == ResultCode::TokenExpired) {
        message += ": get a fresh connect token from the game's backend (or impulse-server token)";
      }
      fail(kind, code, std::move(message));
      return;
    }
    // Snapshots can only follow an accept; anything before it is a leftover of an old session.
    count_drop(wire::DropReason::None);
  }

  void update_connect() {
    if (now_ >= connect_deadline) {
      if (saw_version_mismatch) {
        fail(ConnectFailure::VersionMismatch, ResultCode::VersionMismatch,
             server_label() + " answered with another protocol version (this client speaks " +
                 std::to_string(wire::kProtocolVersion) + "): use matching client and server builds");
        return;
      }
      const std::string where = params.server_label.empty() ? std::string("the server") : params.server_label;
      fail(ConnectFailure::TimedOut, ResultCode::Ok,
           "no answer from " + where + " within " + std::to_string(params.timeout.count()) +
               " ms: is impulse-server running there, and is UDP port " + std::to_string(server.port) +
               " reachable?");
      return;
    }
    if (now_ >= next_connect_send) {
      send_connect();
      next_connect_send = now_ + kConnectResendInterval;
    }
  }

  void handle_raycast_result(const wire::RaycastResult& m) {
    RaycastResult r;
    r.request_id = m.request_id();
    r.code = from_wire(m.code());
    r.tick = m.tick();
    r.message = copy_wire_string(m.message());
    r.truncated = m.truncated();
    r.first = static_cast<uint32_t>(pending.ray_hits.size());
    if (const auto* hits = m.hits()) {  // bounded by the verified datagram (<= 1200 bytes)
      for (const wire::RayHitEntry* h : *hits) {
        pending.ray_hits.push_back(
            RayHit{from_wire(h->id()), wire::to_vec3(h->point()), wire::to_vec3(h->normal()), h->fraction()});
      }
    }
    r.count = static_cast<uint32_t>(pending.ray_hits.size()) - r.first;
    pending.raycasts.push_back(std::move(r));
  }

  void handle_pong(const wire::Pong& pong) {
    PendingPing& slot = pings[pong.nonce() % kPingSlots];
    if (slot.nonce == 0 || slot.nonce != pong.nonce()) {
      count_drop(wire::DropReason::None);  // never sent, already answered, or forgotten
      return;
    }
    const Clock::time_point received = now_;
    const auto rtt = std::chrono::duration_cast<std::chrono::microseconds>(received - slot.sent_at);
    last_rtt = rtt;
    // Every answered Ping (clock-sync, keepalive or the user's) is a time_req/time_res sample.
    if (clock.add_ping_sample(slot.sent_at, pong.server_time_us(), received)) ++stats.clock_samples;
    note_tick(pong.tick());
    if (slot.from_user) pending.pongs.push_back(PongInfo{pong.nonce(), pong.tick(), rtt});
    slot = PendingPing{};
  }

  /// Decodes one bit-packed event block (all or nothing) and delivers each event sequence once.
  /// The packet is acked only when the block decoded: a rejected block is resent by the server
  /// (its events are not delivered until a good copy arrives). `events`, the pre-v4 vector, is
  /// ignored.
  void handle_collision_events(const wire::CollisionEvents& m, uint32_t sequence) {
    if (!snapshots) return count_drop(wire::DropReason::None);
    const auto* packed = m.packed();
    const std::span<const uint8_t> block =
        packed ? std::span<const uint8_t>(packed->data(), packed->size()) : std::span<const uint8_t>{};
    const wire::EventBlockError error =
        wire::decode_collision_events(block, snapshots->config(), &decoded_events, &decoded_joints);
    if (error != wire::EventBlockError::None) {
      ++stats.event_blocks_rejected;
      ++stats.event_block_errors[static_cast<size_t>(error)];
      return count_drop(wire::DropReason::None);
    }
    if (sequence != 0) acks.on_receive(sequence);
    for (size_t i = 0; i < decoded_events.size(); ++i) {
      const wire::CollisionEvent& e = decoded_events[i];
      if (!first_delivery(e.sequence())) {
        ++stats.events_duplicate;
        continue;
      }
      note_tick(e.tick());
      if (e.type() == wire::ContactEventType::JointAdded || e.type() == wire::ContactEventType::JointRemoved) {
        deliver_joint_event(e, decoded_joints[i]);
        continue;
      }
      pending.collisions.push_back(CollisionEvent{e.tick(), from_wire(e.type()), from_wire(e.a()), from_wire(e.b()),
                                                 wire::to_vec3(e.point()), wire::to_vec3(e.normal()), e.sequence()});
    }
  }

  /// A joint event: into the poll result, and the joint table (added: inserted or replaced;
  /// removed: erased; a removal of a joint never heard of only reaches the poll result).
  void deliver_joint_event(const wire::CollisionEvent& e, const wire::JointEventFields& f) {
    JointEvent j;
    j.tick = e.tick();
    j.added = e.type() == wire::ContactEventType::JointAdded;
    j.joint = from_wire(f.joint);
    j.a = from_wire(e.a());
    j.b = from_wire(e.b());
    j.sequence = e.sequence();
    if (j.added) {
      j.kind = static_cast<JointKind>(f.detail);
      j.local_anchor_a = wire::to_vec3(e.point());
      j.local_anchor_b = wire::to_vec3(e.normal());
    } else {
      j.removed_reason = static_cast<JointRemovedReason>(f.detail);
    }
    pending.joints.push_back(j);
    const auto at = std::lower_bound(joints.begin(), joints.end(), j.joint,
                                     [](const JointEvent& x, ObjectID id) { return x.joint < id; });
    const bool held = at != joints.end() && at->joint == j.joint;
    if (j.added) {
      if (held) {
        *at = j;
      } else {
        joints.insert(at, j);
      }
    } else if (held) {
      joints.erase(at);
    }
  }

  /// Applies one delta snapshot (all or nothing) and acks its packet only when applied, so the
  /// server uses as baselines exactly the states this client holds.
  // Brings `objects` to the receiver's view. `objects` mirrors the view position for position
  // (both ascend by id, one object per index), so without entries or exits only the updated
  // objects change, at the positions the receiver reports; otherwise it is rebuilt.
  void update_objects(uint64_t tick) {
    const std::span<const wire::SnapshotObject> view = snapshots->objects();
    if (snapshots->entered().empty() && snapshots->exited().empty() && objects.size() == view.size()) {
      const std::span<const ObjectID> ids = snapshots->updated();
      const std::span<const uint32_t> positions = snapshots->updated_positions();
      bool in_step = true;
      for (size_t k = 0; k < ids.size() && in_step; ++k) {
        const uint32_t p = positions[k];
        in_step = objects[p].id == ids[k];
        if (in_step) objects[p] = to_object_state(view[p], tick);
      }
      if (in_step) return;
    }
    // Rebuilt: objects the payload did not carry keep the tick they had (both lists ascend by id).
    previous_objects.swap(objects);
    objects.clear();
    for (const wire::SnapshotObject& o : view) objects.push_back(to_object_state(o, tick));
    const auto by_id = [](const ObjectState& x, const ObjectState& y) { return x.id < y.id; };
    // The receiver's view ascends by index (one object per index), so this is normally a check.
    if (!std::is_sorted(objects.begin(), objects.end(), by_id)) std::sort(objects.begin(), objects.end(), by_id);
    std::vector<ObjectID>& carried = carried_scratch;
    carried.clear();
    for (const auto ids : {snapshots->entered(), snapshots->updated()}) carried.insert(carried.end(), ids.begin(), ids.end());
    std::sort(carried.begin(), carried.end());
    auto old = previous_objects.begin();
    for (ObjectState& o : objects) {
      if (std::binary_search(carried.begin(), carried.end(), o.id)) continue;
      while (old != previous_objects.end() && old->id < o.id) ++old;
      if (old != previous_objects.end() && old->id == o.id) o.tick = old->tick;
    }
  }

  /// Follows the server's input-lead reports (Overwatch's scheme, GDC 2017: the server tells the
  /// client how its inputs arrive and the client moves its clock): late inputs raise the margin
  /// by their lateness plus one, a lead above kMaxSpareLead lowers it by one. Each change waits
  /// for the reports to reflect the last one: its effect reaches the server after RTT/2 and the
  /// report's window spans up to 2 x 30 ticks.
  void on_input_lead(int lead) {
    input_lead = lead;
    if (input_histories.empty() || tick_hz == 0) return;  // reports of inputs sent before a reconnect
    const double rtt = clock.rtt_s() > 0 ? clock.rtt_s() : 0.1;
    const auto since = std::chrono::duration<double>(now_ - margin_changed_at).count();
    const double window = 60.0 / tick_hz;
    if (lead < 0 && since > rtt + 0.5 * window) {
      input_margin = std::min(input_margin - lead + 1, kMaxInputMargin);
      margin_changed_at = now_;
    } else if (lead > kMaxSpareLead && since > rtt + window) {
      input_margin = std::max(input_margin - 1, 0);
      margin_changed_at = now_;
    }
  }

  void handle_snapshot(const wire::Snapshot& s, uint32_t sequence) {
    if (!snapshots || sequence == 0) return count_drop(wire::DropReason::None);
    const auto* data = s.data();
    const std::span<const uint8_t> payload =
        data ? std::span<const uint8_t>(data->data(), data->size()) : std::span<const uint8_t>{};
    const wire::SnapshotError error = snapshots->apply(sequence, s.tick(), payload);
    if (error == wire::SnapshotError::Stale) {
      ++stats.snapshot_parts_stale;
      return;
    }
    if (error != wire::SnapshotError::None) {
      ++stats.snapshots_rejected;
      ++stats.snapshot_errors[static_cast<size_t>(error)];
      return count_drop(wire::DropReason::None);
    }
    acks.on_receive(sequence);
    note_tick(s.tick());
    if (s.input_lead() != wire::kNoInputLead) on_input_lead(s.input_lead());
    server_stops_at.reset();
    if (s.stop_in_ms() != 0) server_stops_at = now_ + std::chrono::milliseconds(s.stop_in_ms());
    // A tick older than the last applied one (in sequence order) only comes from a replay server
    // that seeked back: its timeline restarted, so the clock and the buffer start over.
    const bool rewound = latest_snapshot_tick && s.tick() < *latest_snapshot_tick;
    latest_snapshot_tick = s.tick();
    ++stats.snapshots_completed;
    const Clock::time_point arrival = now_;
    if (rewound) {
      ++stats.timeline_restarts;
      clock.reset();
      next_time_ping = arrival;
      clock.add_snapshot_arrival(s.tick(), tick_hz, arrival);
      rebuild_interpolator();  // the view as of this snapshot
    } else {
      // The render tick on screen as it arrived (before this arrival moves the playout clock):
      // the buffer keeps the pose shown there continuous when the new state disagrees with it.
      const std::optional<double> shown = render_tick_at(arrival);
      clock.add_snapshot_arrival(s.tick(), tick_hz, arrival);
      feed_interpolator(s.tick(), shown);
    }
    update_objects(s.tick());
    const auto first = static_cast<uint32_t>(pending.snapshot_objects.size());
    const auto inputs_first = static_cast<uint32_t>(pending.snapshot_inputs.size());
    const uint32_t inputs = take_relayed_inputs(s);
    if (!config.snapshot_views) {
      pending.snapshots.push_back(SnapshotRange{s.tick(), first, 0, inputs_first, inputs});
      return;
    }
    pending.snapshot_objects.insert(pending.snapshot_objects.end(), objects.begin(), objects.end());
    pending.snapshots.push_back(
        SnapshotRange{s.tick(), first, static_cast<uint32_t>(objects.size()), inputs_first, inputs});
  }

  /// Appends the snapshot's valid relayed inputs to pending.snapshot_inputs; returns how many.
  /// Wire data: an entry with a null id, an unknown mode or a non-finite value is counted and
  /// skipped, and at most wire::kMaxRelayedInputs are read.
  uint32_t take_relayed_inputs(const wire::Snapshot& s) {
    const auto* relayed = s.inputs();
    if (relayed == nullptr) return 0;
    uint32_t taken = 0;
    for (flatbuffers::uoffset_t k = 0; k < relayed->size() && k < wire::kMaxRelayedInputs; ++k) {
      const wire::RelayedInput& r = *relayed->Get(k);
      RelayedInput in;
      in.id = from_wire(r.id());
      in.linear = wire::to_vec3(r.frame().linear());
      in.angular = wire::to_vec3(r.frame().angular());
      in.repeats = r.repeats();
      const bool known = r.mode() == wire::InputMode::Force || r.mode() == wire::InputMode::Velocity;
      if (in.id.is_null() || !known || !is_finite(in.linear) || !is_finite(in.angular)) {
        ++stats.relayed_inputs_rejected;
        continue;
      }
      in.mode = r.mode() == wire::InputMode::Force ? InputMode::Force : InputMode::Velocity;
      pending.snapshot_inputs.push_back(in);
      ++stats.relayed_inputs;
      ++taken;
    }
    return taken;
  }
};

// ---------------------------------------------------------------------- ClientCore

ClientCore::ClientCore() : impl_(std::make_unique<Impl>()) {}
ClientCore::~ClientCore() = default;

void ClientCore::connect(const PeerAddress& server, TimePoint now, ConnectParams params) {
  Impl& m = *impl_;
  m.reset_session();
  m.outbox.clear();
  Impl::clear(m.pending);
  m.now_ = now;
  m.server = server;
  params.name = std::string(truncate_utf8(params.name, wire::kMaxClientNameBytes));
  m.params = std::move(params);
  m.wire_token.clear();
  m.token_secret.fill(0);
  if (!m.params.token.empty()) {
    if (m.params.token.size() <= net::kBindingSecretBytes) {
      m.fail(ConnectFailure::Rejected, ResultCode::TokenInvalid,
             "the client token is too short: it is the server's connect token followed by its 32-byte session "
             "secret, as impulse-server token prints it");
      return;
    }
    const size_t split = m.params.token.size() - net::kBindingSecretBytes;
    m.wire_token.assign(m.params.token.begin(), m.params.token.begin() + static_cast<std::ptrdiff_t>(split));
    std::copy(m.params.token.begin() + static_cast<std::ptrdiff_t>(split), m.params.token.end(), m.token_secret.begin());
  }
  if (!net::make_kx_keypair(&m.kx)) {
    m.fail(ConnectFailure::SocketError, ResultCode::Ok, "libsodium could not initialise (no entropy source?)");
    return;
  }
  m.state = ConnectionState::SendingConnect;
  m.connect_deadline = now + m.params.timeout;
  m.next_connect_send = now;
  m.last_receive_time = now;
  m.update_connect();
}

void ClientCore::disconnect(std::string_view reason, TimePoint now) {
  Impl& m = *impl_;
  m.now_ = std::max(m.now_, now);
  if (m.state != ConnectionState::Disconnected && m.state != ConnectionState::Failed) {
    const std::string_view text = truncate_utf8(reason, wire::kMaxStringBytes);
    for (int i = 0; i < kDisconnectRepeats; ++i) m.send_bytes(wire::build_disconnect(m.fbb, text));
  }
  m.reset_session();
}

ConnectionState ClientCore::state() const { return impl_->state; }
const ConnectionError& ClientCore::connection_error() const { return impl_->error; }
DatagramQueue& ClientCore::outbox() { return impl_->outbox; }
const PeerAddress& ClientCore::server() const { return impl_->server; }

void ClientCore::receive(std::span<const uint8_t> bytes, const PeerAddress& from, TimePoint now) {
  Impl& m = *impl_;
  m.now_ = std::max(m.now_, now);
  if (bytes.size() > m.receive_buffer.size()) {
    ++m.stats.datagrams_in;
    m.stats.bytes_in += bytes.size();
    return m.count_drop(wire::DropReason::Oversized);
  }
  // FlatBuffers reads u64 fields in place, so the datagram must be aligned: a misaligned one is
  // copied first (Client's own buffer is aligned, so the per-packet path copies nothing).
  if (reinterpret_cast<uintptr_t>(bytes.data()) % wire::kDatagramAlignment != 0) {
    std::copy(bytes.begin(), bytes.end(), m.receive_buffer.begin());
    bytes = std::span<const uint8_t>(m.receive_buffer.data(), bytes.size());
  }
  m.handle_datagram(bytes, from);
}

void ClientCore::update(TimePoint now) {
  Impl& m = *impl_;
  m.now_ = std::max(m.now_, now);
  if (m.in_connect()) return m.update_connect();
  if (m.state != ConnectionState::Connected) return;
  if (m.now_ - m.last_receive_time >= kServerSilenceTimeout) {
    const std::string message = "no datagram from " + m.server_label() + " for " +
                                std::to_string(kServerSilenceTimeout.count()) +
                                " s: the server stopped or the network path failed; connect again";
    m.fail(ConnectFailure::ConnectionLost, ResultCode::Ok, message);
    m.pending.server_disconnected = true;
    m.pending.disconnect_reason = message;
    return;
  }
  m.pump_requests();
  m.send_queued();
  m.send_time_ping_if_due();
  m.send_ack_if_due();
  if (m.now_ - m.last_send_time >= kKeepaliveInterval) m.send_ping_with(m.next_nonce++, false);
}

const PollResult& ClientCore::take_result() {
  Impl& m = *impl_;
  std::swap(m.pending, m.handed);
  Impl::clear(m.pending);
  if (!m.result_callbacks.empty()) {
    for (const RequestResult& r : m.handed.results) {
      const auto it = m.result_callbacks.find(r.request_id);
      if (it == m.result_callbacks.end()) continue;
      // Out of the map before the call: a callback may send requests and register others.
      const std::function<void(const RequestResult&)> callback = std::move(it->second);
      m.result_callbacks.erase(it);
      callback(r);
    }
  }
  return m.handed;
}

bool ClientCore::on_result(uint32_t request_id, std::function<void(const RequestResult&)> callback) {
  Impl& m = *impl_;
  if (request_id == 0 || !callback || m.result_callbacks.size() >= kMaxResultCallbacks) return false;
  m.result_callbacks[request_id] = std::move(callback);
  return true;
}

uint32_t ClientCore::create_object(const ObjectDesc& desc) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  wire::CreateObjectArgs args;
  args.kind = static_cast<wire::BodyKind>(desc.kind);
  args.shape = static_cast<wire::ShapeKind>(desc.shape);
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
  args.shared = desc.shared;
  args.asleep = desc.asleep;
  args.bullet = desc.bullet;
  args.category = desc.category;
  args.mask = desc.mask;
  args.group = desc.group;
  return m.queue_request(request_id, wire::build_create_object(m.fbb, request_id, args));
}

uint32_t ClientCore::destroy(ObjectID id) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_destroy_object(m.fbb, request_id, id));
}

uint32_t ClientCore::apply_force(ObjectID id, Vec3 force, std::optional<Vec3> point) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_apply_force(m.fbb, request_id, id, force, point));
}

bool ClientCore::apply_force_unreliable(ObjectID id, Vec3 force, std::optional<Vec3> point) {
  if (!connected()) return false;
  impl_->unreliable.push_back(Impl::UnreliableForce{id, force, point});
  impl_->notify_queued();
  return true;
}

uint32_t ClientCore::apply_impulse(ObjectID id, Vec3 impulse, std::optional<Vec3> point) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_apply_impulse(m.fbb, request_id, id, impulse, point));
}

uint32_t ClientCore::apply_torque(ObjectID id, Vec3 torque) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_apply_torque(m.fbb, request_id, id, torque));
}

uint32_t ClientCore::set_velocity(ObjectID id, Vec3 velocity) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_set_velocity(m.fbb, request_id, id, velocity));
}

uint32_t ClientCore::set_angular_velocity(ObjectID id, Vec3 angular_velocity) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_set_angular_velocity(m.fbb, request_id, id, angular_velocity));
}

uint32_t ClientCore::set_state(ObjectID id, Vec3 position, Quat orientation, Vec3 velocity, Vec3 angular_velocity) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id,
                         wire::build_set_state(m.fbb, request_id, id, position, orientation, velocity, angular_velocity));
}

uint32_t ClientCore::set_filter(ObjectID id, uint32_t category, uint32_t mask, int32_t group) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_set_filter(m.fbb, request_id, id, category, mask, group));
}

uint32_t ClientCore::create_joint(const JointDesc& d) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  wire::CreateJointArgs a;
  a.kind = static_cast<wire::JointKind>(d.kind);
  a.body_a = d.body_a;
  a.body_b = d.body_b;
  a.anchor = d.anchor;
  a.anchor_b = d.anchor_b;
  a.axis = d.axis;
  a.min_length = d.min_length;
  a.max_length = d.max_length;
  a.spring_hertz = d.spring_hertz;
  a.spring_damping_ratio = d.spring_damping_ratio;
  a.enable_limit = d.enable_limit;
  a.lower_angle = d.lower_angle;
  a.upper_angle = d.upper_angle;
  a.motor_mode = static_cast<wire::JointMotorMode>(d.motor_mode);
  a.motor_speed = d.motor_speed;
  a.max_motor_torque = d.max_motor_torque;
  a.target_angle = d.target_angle;
  a.motor_target_angle = d.motor_target_angle;
  a.break_force = d.break_force;
  a.break_torque = d.break_torque;
  a.collide_connected = d.collide_connected;
  a.lower_translation = d.lower_translation;
  a.upper_translation = d.upper_translation;
  a.max_motor_force = d.max_motor_force;
  a.target_translation = d.target_translation;
  a.motor_target_translation = d.motor_target_translation;
  a.cone_angle = d.cone_angle;
  a.friction_torque = d.friction_torque;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_create_joint(m.fbb, request_id, a));
}

uint32_t ClientCore::destroy_joint(ObjectID joint) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_destroy_joint(m.fbb, request_id, joint));
}

uint32_t ClientCore::set_joint_motor(ObjectID joint, JointMotorMode mode, float speed, float target, float max_force) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  const wire::JointMotorArgs motor{static_cast<wire::JointMotorMode>(mode), speed, target, max_force};
  return m.queue_request(request_id, wire::build_set_joint_motor(m.fbb, request_id, joint, motor));
}

std::span<const JointEvent> ClientCore::joints() const { return impl_->joints; }

uint32_t ClientCore::move_kinematic(ObjectID id, Vec3 position, Quat orientation) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_move_kinematic(m.fbb, request_id, id, position, orientation));
}

uint32_t ClientCore::raycast(Vec3 origin, Vec3 translation, bool all, std::optional<RayFilter> filter,
                             bool back_faces) {
  return impl_->queue_raycast(origin, translation, all, filter, back_faces, 0, 0.0f);
}

uint32_t ClientCore::raycast_seen(Vec3 origin, Vec3 translation, uint64_t seen_tick, float seen_fraction, bool all,
                                  std::optional<RayFilter> filter) {
  return impl_->queue_raycast(origin, translation, all, filter, false, seen_tick, seen_fraction);
}

std::optional<uint64_t> ClientCore::input_tick(TimePoint now) const {
  const Impl& m = *impl_;
  const std::optional<double> server = estimated_server_tick(now);
  if (!server) return std::nullopt;
  const double arrival = *server + 0.5 * m.clock.rtt_s() * m.tick_hz;
  return static_cast<uint64_t>(std::max(0.0, std::floor(arrival))) + 1 + static_cast<uint64_t>(m.input_margin);
}

void ClientCore::set_action_tick(uint64_t tick) { impl_->action_tick = tick; }

bool ClientCore::send_input(ObjectID id, InputMode mode, Vec3 linear, Vec3 angular, uint64_t tick) {
  Impl& m = *impl_;
  if (!connected() || tick == 0) return false;
  auto it = std::find_if(m.input_histories.begin(), m.input_histories.end(),
                         [&](const Impl::InputHistory& h) { return h.id == id; });
  if (it == m.input_histories.end()) {
    m.input_histories.push_back(Impl::InputHistory{id, static_cast<wire::InputMode>(mode), tick, {}});
    it = m.input_histories.end() - 1;
  }
  Impl::InputHistory& h = *it;
  const wire::InputFrame frame(wire::to_wire(linear), wire::to_wire(angular));
  const uint64_t next = h.first_tick + h.frames.size();
  if (h.frames.empty() || tick > next + kInputRedundancy || static_cast<wire::InputMode>(mode) != h.mode) {
    // A new body, a long pause or another mode: start over at this tick.
    h.mode = static_cast<wire::InputMode>(mode);
    h.first_tick = tick;
    h.frames.assign(1, frame);
  } else if (tick >= next) {
    // Ticks skipped since the last call repeat the last input (what the server would do).
    while (h.first_tick + h.frames.size() < tick) h.frames.push_back(h.frames.back());
    h.frames.push_back(frame);
  } else if (tick + 1 < next) {
    return false;  // older than the newest tick sent
  }
  // (tick == next - 1: that tick went out already; its first value stands, the datagram repeats it.)
  if (h.frames.size() > kInputRedundancy) {
    const size_t drop = h.frames.size() - kInputRedundancy;
    h.frames.erase(h.frames.begin(), h.frames.begin() + static_cast<std::ptrdiff_t>(drop));
    h.first_tick += drop;
  }
  m.send_bytes(wire::build_input(m.fbb, id, h.mode, h.first_tick, h.frames));
  ++m.stats.inputs_sent;
  m.notify_queued();
  return true;
}

int ClientCore::input_margin() const { return impl_->input_margin; }
std::optional<int> ClientCore::input_lead() const { return impl_->input_lead; }

std::optional<double> ClientCore::server_stops_in_s(TimePoint now) const {
  const Impl& m = *impl_;
  if (!m.server_stops_at) return std::nullopt;
  return std::max(0.0, std::chrono::duration<double>(*m.server_stops_at - now).count());
}

uint32_t ClientCore::set_interest(const InterestArea& area) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  wire::InterestArgs args;
  args.kind = static_cast<wire::InterestKind>(area.kind);
  args.center = area.center;
  args.radius = area.radius;
  args.min = area.min;
  args.max = area.max;
  return m.queue_request(request_id, wire::build_set_interest(m.fbb, request_id, args));
}

uint32_t ClientCore::set_interest_sphere(Vec3 center, float radius) {
  InterestArea a;
  a.kind = InterestKind::Sphere;
  a.center = center;
  a.radius = radius;
  return set_interest(a);
}

uint32_t ClientCore::set_interest_box(Vec3 min, Vec3 max) {
  InterestArea a;
  a.kind = InterestKind::Box;
  a.min = min;
  a.max = max;
  return set_interest(a);
}

void ClientCore::set_queue_listener(void (*listener)(void* context), void* context) {
  impl_->queue_listener = listener;
  impl_->queue_listener_context = context;
}

uint32_t ClientCore::replay_control(ReplayAction action, uint64_t tick, float speed) {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint32_t request_id = m.take_request_id();
  return m.queue_request(request_id, wire::build_replay_control(m.fbb, request_id, static_cast<wire::ReplayAction>(action), tick, speed));
}

uint64_t ClientCore::ping() {
  Impl& m = *impl_;
  if (!connected()) return 0;
  const uint64_t nonce = m.next_nonce++;
  m.user_pings.push_back(nonce);
  m.notify_queued();
  return nonce;
}

std::span<const ObjectState> ClientCore::objects() const { return impl_->objects; }

const ObjectState* ClientCore::find(ObjectID id) const {
  const std::vector<ObjectState>& objects = impl_->objects;
  const auto it = std::lower_bound(objects.begin(), objects.end(), id,
                                   [](const ObjectState& s, ObjectID key) { return s.id < key; });
  return it != objects.end() && it->id == id ? &*it : nullptr;
}

bool ClientConfig::validate(std::string* error) const {
  auto fail = [error](const char* message) {
    if (error != nullptr) *error = message;
    return false;
  };
  if (interpolation_delay_s &&
      !(std::isfinite(*interpolation_delay_s) && *interpolation_delay_s >= 0.0 &&
        *interpolation_delay_s <= kMaxInterpolationDelayS)) {
    return fail("interpolation_delay_s must be in [0, 5] s (or unset for the default)");
  }
  if (!(std::isfinite(max_extrapolation_s) && max_extrapolation_s >= 0.0 && max_extrapolation_s <= 10.0)) {
    return fail("max_extrapolation_s must be in [0, 10] s");
  }
  if (!(std::isfinite(correction_time_constant_s) && correction_time_constant_s > 0.0 &&
        correction_time_constant_s <= 10.0)) {
    return fail("correction_time_constant_s must be in (0, 10] s");
  }
  if (interpolation_history < 2 || interpolation_history > 256) {
    return fail("interpolation_history must be in [2, 256] states");
  }
  return true;
}

bool ClientCore::set_config(const ClientConfig& config, std::string* error) {
  Impl& m = *impl_;
  if (!config.validate(error)) return false;
  const bool buffer_changed = config.max_extrapolation_s != m.config.max_extrapolation_s ||
                              config.correction_time_constant_s != m.config.correction_time_constant_s ||
                              config.interpolation_history != m.config.interpolation_history ||
                              config.interpolation != m.config.interpolation;
  m.config = config;
  m.clock.set_playout_jitter(!config.interpolation_delay_s.has_value());
  if (buffer_changed) m.rebuild_interpolator();
  return true;
}

const ClientConfig& ClientCore::config() const { return impl_->config; }

std::optional<double> ClientCore::render_tick(TimePoint now) const { return impl_->render_tick_at(now); }

std::optional<Pose> ClientCore::pose_at(ObjectID id, TimePoint render_time, PoseSource* source) const {
  const std::optional<double> tick = impl_->render_tick_at(render_time);
  if (!tick) return std::nullopt;
  return impl_->interpolator.pose_at(id, *tick, source);
}

std::optional<Pose> ClientCore::pose_at_tick(ObjectID id, double tick, PoseSource* source) const {
  return impl_->interpolator.pose_at(id, tick, source);
}

std::optional<double> ClientCore::estimated_server_tick(TimePoint now) const {
  const Impl& m = *impl_;
  if (m.state != ConnectionState::Connected || !m.clock.ready() || m.tick_hz == 0) return std::nullopt;
  return m.clock.server_tick(now, m.tick_hz);
}

double ClientCore::interpolation_delay_s() const { return impl_->interpolation_delay_s(); }

ClockEstimate ClientCore::clock_estimate(TimePoint now) const {
  const Impl& m = *impl_;
  ClockEstimate e;
  e.ready = m.clock.ready();
  e.ping_samples = m.clock.ping_sample_count();
  e.offset_s = m.clock.offset_s();
  e.rtt_s = m.clock.rtt_s();
  e.jitter_s = m.clock.jitter_s();
  e.interpolation_delay_s = m.interpolation_delay_s();
  e.server_tick = estimated_server_tick(now);
  e.render_tick = m.render_tick_at(now);
  return e;
}

const ClockSync& ClientCore::clock_sync() const { return impl_->clock; }
const SnapshotInterpolator& ClientCore::interpolator() const { return impl_->interpolator; }
size_t ClientCore::requests_in_flight() const { return impl_->outstanding.size(); }
uint32_t ClientCore::max_objects() const { return impl_->max_objects; }
LinkEstimates ClientCore::link() const { return impl_->acks.estimates(); }
uint32_t ClientCore::client_id() const { return impl_->client_id; }
uint64_t ClientCore::server_tick() const { return impl_->server_tick; }
uint64_t ClientCore::snapshot_tick() const { return impl_->latest_snapshot_tick.value_or(0); }
uint16_t ClientCore::tick_hz() const { return impl_->tick_hz; }
uint16_t ClientCore::snapshot_hz() const { return impl_->snapshot_hz; }
std::optional<ReplayRange> ClientCore::replay_range() const { return impl_->replay; }
std::optional<std::chrono::microseconds> ClientCore::last_rtt() const { return impl_->last_rtt; }
const ClientStats& ClientCore::stats() const { return impl_->stats; }
ClientStats& ClientCore::mutable_stats() { return impl_->stats; }

}  // namespace impulse
