// The server's logic without sockets or clocks: the handshake, sessions, exactly-once requests,
// ownership and quotas, the fixed-step loop, per-client delta snapshots and reliable collision
// events. The Asio layer (server.cpp) feeds it datagrams and the current time and sends what it
// queues in an Outbox, so every rule here is unit-testable with a fake clock.
#pragma once

#include <chrono>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "server/app/journal.h"
#include "server/app/playback_driver.h"
#include "server/app/pose_history.h"
#include "server/app/scene.h"
#include "server/app/server.h"
#include "server/app/step_clock.h"
#include "server/net/handshake.h"
#include "server/net/outbox.h"
#include "server/net/reject_log.h"
#include "server/net/session_table.h"
#include "server/net/snapshot_sender.h"
#include "server/physics/world.h"
#include "server/request/apply_request.h"
#include "shared/parallel.h"
#include "shared/wire/codec.h"

namespace impulse::record {
class Playback;
}

namespace impulse::server {

/// Requests queued at most per tick; more are dropped and counted (RejectReason::QueueFull).
inline constexpr size_t kMaxQueuedRequests = 4096;
/// Actions (requests stamped for a later tick) one session may have waiting, and the server in
/// all: a game sends a few per second (a jump, a shot), and each holds a request-window slot and
/// a PendingRequest until its tick. Beyond either, RateLimited.
inline constexpr uint32_t kMaxHeldActionsPerSession = 32;
inline constexpr size_t kMaxHeldActions = 16384;
/// What a lag-compensated Raycast costs of the session's request rate: it tests every movable
/// body's bounding sphere at the past tick (O(bodies), not the broadphase's O(cells)), so at the
/// default 1000 requests/s a session casts at most 62 a second, about one a tick.
inline constexpr double kCompensatedRaycastCost = 16.0;
/// Temporary ownership (SetState, --temporary-ownership): an island of at most this many bodies;
/// a new position within the body's speed times kStateLeadTicks ticks plus kStateSlack [m] of the
/// server's (a client predicting a few ticks ahead, plus its quantised view); and a velocity
/// change of at most kMaxStateSpeedChange [m/s] per state (a hard landing's worth: more is a
/// push no input could make).
inline constexpr size_t kMaxStateIsland = 64;
inline constexpr uint32_t kStateLeadTicks = 8;
inline constexpr float kStateSlack = 0.1f;
inline constexpr float kMaxStateSpeedChange = 5.0f;
/// Collision events sent at most per update(); more are dropped and counted (EventsDropped).
inline constexpr size_t kMaxEventsPerUpdate = 8192;
/// How long a session may stay unconfirmed (no sealed datagram from its client yet) after it was
/// created: a real client sends one at once (its clock-sync Ping); the resend of a lost
/// ConnectAccepted fits several times in 2 s. A resent Connect does not extend it. Half-open
/// sessions thus hold a slot for at most 2 s, and get no snapshots meanwhile.
inline constexpr std::chrono::seconds kUnconfirmedSessionLifetime{2};
/// Snapshots stop for a session that has sent nothing for this long, and start again with its
/// next datagram. A client acks about once per snapshot interval and pings about once a second
/// when idle (docs/PROTOCOL.md), so a live one is never held; one that handshook and went silent
/// costs at most 2 s of snapshots instead of --client-timeout's 10 s.
inline constexpr std::chrono::seconds kSilentSessionSnapshotHold{2};
/// How long a client over its share of the tick stays throttled (tick_budget.h): its pushes and
/// creates are answered OverBudget, and any of its bodies that wake are put back to sleep.
inline constexpr std::chrono::seconds kThrottleHold{2};
static_assert(kThrottleHold.count() == static_cast<long>(kServerSleepHoldSeconds),
              "a throttled client's bodies are held asleep as long as it is throttled");
/// A throttled account's sessions get one in this many of their snapshots and event datagram
/// rounds (7.5 Hz at 60 Hz), events still queued reliably. Each session costs a snapshot write
/// over every object in its area of interest: 256 throttled sessions of attack B cost 22 ms of
/// snapshots and 11 ms of events a tick at full rate (docs/BENCHMARKS.md, "Tick budget").
inline constexpr uint32_t kThrottledSendEvery = 8;
/// How long a session's reduced send rate holds before the send share may raise it again: the
/// share tightens at once and loosens only this often, so it does not swing every tick.
inline constexpr std::chrono::seconds kSendShareHold{1};

class ServerCore {
 public:
  /// @param config  must pass validate_config
  /// @param gravity the scene's gravity [m/s^2], world frame
  /// @param stats   updated in place; must outlive the core
  ServerCore(const ServerConfig& config, Vec3 gravity, ServerStats& stats);
  ~ServerCore();

  /// Makes the cookie key and, with config.token_key_file, loads the token key. Call once before
  /// start(). On failure returns false with *error saying what to do.
  bool init_security(std::string* error);
  /// Replaces the token key (tests; a server normally loads it in init_security()).
  void set_token_key(const security::TokenKey& key) { token_key_ = key; }
  /// The Unix time [s] used to check token expiry; by default the system clock. Tests override it.
  void set_unix_time_source(uint64_t (*now_unix_s)()) { unix_now_ = now_unix_s; }
  /// Tests: the tick budget reads this step time instead of the measured one (0 = measure).
  void set_step_time_for_test(std::chrono::nanoseconds step_time) { step_time_for_test_ = step_time; }
  /// Tests: the send share reads this time of the events and snapshots, and the pinned step time
  /// (set_step_time_for_test) for the rest of the wake-up, instead of measuring (0 = measure).
  void set_send_time_for_test(std::chrono::nanoseconds send_time) { send_time_for_test_ = send_time; }

  /// Creates `bodies` in order, their ids appended to *ids when given. On a World error returns
  /// false with *error naming the body index.
  bool add_bodies(std::span<const physics::BodyDesc> bodies, std::string* error, std::vector<ObjectID>* ids = nullptr);
  /// Creates a scene's joints (after its bodies: `body_ids` are add_bodies' ids, by scene index),
  /// owned by the scene: anyone may drive them, no client may destroy them. Before the recorder
  /// starts, so its initial state carries them. On a World error returns false with *error naming
  /// the joint index and name.
  bool add_joints(std::span<const SceneJoint> joints, std::span<const ObjectID> body_ids, std::string* error);
  /// Fills the world's material-pair table (a scene's `material_pairs`), before the recorder
  /// starts so its initial state (World::save_state) carries the table. On a World error returns
  /// false with *error naming the pair index.
  bool add_material_pairs(std::span<const SceneMaterialPair> pairs, std::string* error);

  /// Records every applied request, step and session change into `recorder` (null: none). Set it
  /// before add_bodies() so the scene's bodies are noted too. Not owned; must outlive the core.
  void set_recorder(record::Recorder* recorder) { journal_.attach(recorder); }
  /// Called after every wake-up that wrote snapshots (see SnapshotObserver); empty = none.
  void set_snapshot_observer(SnapshotObserver observer) { snapshot_observer_ = std::move(observer); }

  /// Playback mode (impulse-replay serve): instead of its own request queue and step, the world
  /// advances through the recording `options.file` (record::Playback: its recorded requests,
  /// then a step) at the recorded tick rate times the speed, or not at all while paused. Takes
  /// tick_hz (and snapshot_hz unless options.snapshot_hz) from the recording. Sessions are
  /// read-only spectators: world-changing requests are answered ReadOnly; Raycast, SetInterest
  /// and ReplayControl work. One shared timeline: any spectator's ReplayControl affects all.
  /// Call once, before start() and instead of add_bodies(). On failure returns false with
  /// *error (bad file, --from outside the recording, speed out of range).
  bool start_playback(const ReplayOptions& options, std::string* error);
  /// The playback, or null for a live server.
  const record::Playback* playback() const;
  bool playback_paused() const;
  /// Current playback speed (times the recorded tick rate).
  double playback_speed() const;

  /// Starts the fixed-step clock at `now`. Call once, before the first update().
  void start(TimePoint now);

  /// Handles one received datagram at `now`: verifies it, runs the handshake (Connect without a
  /// valid cookie -> Challenge; with one -> token check -> session), answers Ping/Disconnect at
  /// once, processes the packet header's acks, and admits requests exactly once and in order
  /// (range-check failures are answered at once, the rest queued for the next tick boundary).
  /// Anything refused is counted and logged through the RejectLog. Replies to an address without
  /// a session are never larger than the datagram that caused them; a Connect at a session's
  /// address is answered only before the session is confirmed and with the address's cookie.
  void handle_datagram(const Endpoint& from, std::span<const uint8_t> bytes, TimePoint now, Outbox& out);

  /// One wake-up at `now`: if steps are due, applies the queued requests (in arrival order,
  /// answering each) and runs the steps (at most max_steps_per_frame; the excess is dropped and
  /// counted); then answers the queued Raycasts against the world after those steps (the state
  /// this wake-up's snapshot shows, stamped with its tick); queues the collision events of those
  /// steps and, when a snapshot tick was crossed, one snapshot of the final state for every
  /// session. Then expires silent sessions and writes rate-limited reject summaries. Returns the
  /// number of steps taken.
  int update(TimePoint now, Outbox& out);

  /// Sends Disconnect{reason} to every session, removes them all, and from then on answers
  /// Connect with ConnectRejected{ShuttingDown}.
  void shut_down(std::string_view reason, Outbox& out);

  /// The start of a drain that ends at `stop_at`: from now on Connect is answered
  /// ConnectRejected{ShuttingDown}, while the sessions already in play on until shut_down(), each
  /// snapshot telling them the time left (Snapshot.stop_in_ms).
  void begin_drain(TimePoint stop_at) {
    shutting_down_ = true;
    stop_at_ = stop_at;
  }
  bool shutting_down() const { return shutting_down_; }
  /// The configuration in use (in playback mode tick_hz and snapshot_hz come from the recording).
  const ServerConfig& config() const { return config_; }
  const physics::World& world() const { return world_; }
  const SessionTable& sessions() const { return sessions_; }
  RejectLog& rejects() { return rejects_; }
  const RejectLog& rejects() const { return rejects_; }
  /// Steps dropped by the accumulator cap since start().
  uint64_t dropped_steps() const { return clock_.dropped_steps; }
  /// Time until the next step is due (for scheduling the next wake-up). In playback mode: until
  /// the next played tick, at most one recorded tick period (paused included).
  std::chrono::nanoseconds time_to_next_step() const;
  /// Requests waiting for the next tick.
  size_t queued_requests() const { return queue_.size(); }
  /// The client that owns object `id` (0: the scene or nobody), and whether it is shared.
  uint32_t owner_of(ObjectID id) const;
  /// The live object at slot `index` (with `generation`, or whichever generation lives there
  /// when !has_generation), its owner (0: the scene) and whether it is shared; nullopt for an
  /// unknown or stale id. For the admin endpoint's /objects (called on the tick thread).
  struct ObjectOwnership {
    ObjectID id;
    uint32_t owner = 0;
    bool shared = true;
  };
  std::optional<ObjectOwnership> ownership(uint32_t index, uint32_t generation, bool has_generation) const;
  /// Live objects owned by `client_id`.
  uint32_t live_objects_of(uint32_t client_id) const;
  /// Anonymous mode: live objects charged to the IP address `address` (its sessions' objects,
  /// kept objects of departed sessions included).
  uint32_t live_objects_of_address(const asio::ip::address& address) const;

 private:
  void handle_connect(const Endpoint& from, const wire::Connect& m, size_t request_bytes, TimePoint now, Outbox& out);
  /// Session keys derived in handle_connect, handed to accept_session.
  struct SessionKeying {
    net::KxPublicKey server_public{};
    net::KxPublicKey client_public{};
    net::PacketKey send_key{};
    net::PacketKey receive_key{};
    bool token_bound = false;
  };
  void accept_session(const Endpoint& from, const wire::Connect& m, uint32_t client_id, uint32_t max_objects,
                      const SessionKeying& keying, TimePoint now, Outbox& out);
  void send_accepted(Session& s, TimePoint now, Outbox& out);
  /// Queues `bytes` for `s`, stamping the packet header (sequence, acks), sealing it with the
  /// session's send key (unless `seal` is false: ConnectAccepted, which carries the server's key
  /// share) and debiting its budget. Returns the sequence it went out with (0: not sent).
  uint32_t send(Session& s, std::span<const uint8_t> bytes, TimePoint now, Outbox& out, bool seal = true);
  /// Counts and logs a datagram that failed authentication; it is dropped unanswered.
  void drop_unauthenticated(const Endpoint& from, RejectReason reason, std::string_view detail, TimePoint now);
  /// Records the peer's sequence and processes its acks (snapshot baselines, events).
  void process_header(Session& s, const wire::Envelope& envelope, TimePoint now);
  void answer_slot(Session& s, const RequestSlot& slot, TimePoint now, Outbox& out);
  /// A request whose rule says answered_at_admission (SetInterest, ReplayControl): handled and
  /// answered now, never queued for a tick.
  void answer_at_admission(Session& s, const RequestSlot& slot, TimePoint now, Outbox& out);
  void admit_requests(Session& s, TimePoint now, Outbox& out);
  /// Queues a push sent with request_id 0 (fire-and-forget, see accepts_unsequenced) for the
  /// next tick, after the same range checks and rate limit as a sequenced one.
  void queue_unsequenced(Session& s, const PendingRequest& r, const wire::Check& check, TimePoint now);
  /// Ownership and quota checks at apply time; Ok when the request may touch the world.
  wire::ResultCode authorize(const PendingRequest& r, std::string_view* message) const;
  /// The cost limits on a body a client creates (--max-client-extent, --max-client-objects,
  /// --max-spawn-overlaps); Ok or the refusal, with *message naming the limit and its value.
  wire::ResultCode check_client_body(const PendingRequest& r, std::string_view* message) const;
  /// SetState (temporary ownership): the flag, the body's owner, an island without another
  /// client's body, and no teleport; Ok or the refusal with *message.
  wire::ResultCode authorize_state(const PendingRequest& r, std::string_view* message) const;
  mutable std::vector<ObjectID> island_;  // authorize_state's scratch
  void note_applied(const PendingRequest& r, ObjectID id);
  // Joints (server_core_joints.cpp).
  /// Ownership (--authority owner), quotas (--max-joints-per-client, --max-client-joints) and
  /// reach (--max-client-extent) of CreateJoint, DestroyJoint and SetJointMotor.
  wire::ResultCode authorize_joint(const PendingRequest& r, std::string_view* message) const;
  /// A joint was created (by a client, or the scene with client_id 0): its owner and counts, and
  /// a JointAdded for the sessions that began before it.
  void note_joint_added(ObjectID joint, uint32_t client_id, const Endpoint& from);
  /// The World's joint removals since the last call: counts, and a JointRemoved for every session.
  void note_joint_removals();
  /// Queues this update's joint events, and the next few joints a new session has not heard of.
  void queue_joint_events(Session& s);
  /// The JointAdded event of a live joint at the current tick (false when it is not live).
  bool joint_added_event(ObjectID joint, wire::CollisionEvent* event, wire::JointEventFields* fields) const;
  /// After a step: the bodies the World's guard removed (non-finite state) leave their owner's
  /// count, are counted and logged, and keep a mark so a later request on them says why.
  void note_removed_bodies(TimePoint now);
  /// After a step: the bodies whose contact group the World put back are counted and logged.
  void note_restored_bodies(TimePoint now);
  /// Token mode: removes every other session of `confirmed`'s client id (Disconnect "replaced by a
  /// new session of the same client id"; their objects stay). True if any was removed, which
  /// moves sessions in the table: look `confirmed` up again.
  bool replace_sessions_of(const Session& confirmed, TimePoint now, Outbox& out);
  /// A session ended (Disconnect, timeout): with --on-disconnect destroy its objects go at the
  /// next tick boundary (destroy_departed).
  void note_departed(const Session& s);
  /// Destroys the objects of the clients in departed_ that have not come back, through
  /// apply_to_world and the journal like any request (so a replay does the same).
  void destroy_departed();
  void write_events(TimePoint now, Outbox& out);
  /// Writes a snapshot to every session whose snapshot_phase is marked in `phase_due` (all of them
  /// when it is empty), building the snapshot source once if any is due.
  void write_snapshots(TimePoint now, Outbox& out, std::span<const uint8_t> phase_due = {});
  /// How many snapshot phases sessions are spread over: tick_hz / snapshot_hz, at least 1.
  int snapshot_phases() const;
  /// Appends to relayed_inputs_ the inputs of the last tick that `s` is relayed: other sessions'
  /// bodies within its area (plus the hysteresis), nearest its centre first, at most
  /// wire::kMaxRelayedInputs and as many as `tokens` [bytes] allow besides the smallest payload.
  /// Returns how many.
  uint32_t relay_inputs(const Session& s, size_t tokens);
  void remove_session(const Endpoint& endpoint);
  /// The simulation clock at `now` [us]: tick / tick_hz plus the time not yet stepped.
  uint64_t server_time_us(TimePoint now) const;
  void handle_version_mismatch(const Endpoint& from, const wire::Envelope& envelope, size_t request_bytes,
                               TimePoint now, Outbox& out);
  void handle_request(const Endpoint& from, const wire::Envelope& envelope, size_t request_bytes, TimePoint now,
                      Outbox& out);
  void reply_not_connected(const Endpoint& from, wire::Message type, uint32_t request_id, size_t request_bytes,
                           TimePoint now, Outbox& out);
  void reject_request(const Endpoint& from, wire::Message type, uint32_t request_id, ObjectID id,
                      const wire::Check& check, TimePoint now, Outbox& out);
  void apply_requests(TimePoint now, Outbox& out);
  // Ticks (protocol 10).
  /// Buffers an Input's frames in its session (after the range check, the rate limit, ownership
  /// and the tick budget); a refusal is counted and logged, never answered.
  void receive_input(Session* session, const wire::Input& m, const Endpoint& from, TimePoint now);
  /// Before the step of tick world_.tick() + 1: the held actions due by then, in (tick, arrival)
  /// order, then every session's Input frames for that tick, as pushes through apply_request.
  void apply_tick_inputs(TimePoint now, Outbox& out);
  /// Holds a world-changing request stamped for a later tick; false (answered, or counted when
  /// unsequenced, or with a null `out`) when it is stamped beyond --max-input-lead-ms or too many
  /// are held.
  bool hold_action(Session& s, const PendingRequest& r, TimePoint now, Outbox* out);
  void apply_request(const PendingRequest& r, TimePoint now, Outbox& out);
  void answer_raycasts(Outbox& out);
  void answer_raycast(const PendingRequest& r, Outbox& out);
  void expire_sessions(TimePoint now, Outbox& out);
  /// Appends the last step's contact events to events_ (up to kMaxEventsPerUpdate); returns how
  /// many did not fit.
  size_t collect_step_events();
  /// update() of playback mode.
  int update_playback(TimePoint now, Outbox& out);
  void publish_stats();
  /// Counts one request answered (or, fire-and-forget, refused) with `code`: requests_applied or
  /// requests_rejected, and request_results by code.
  void count_result(wire::ResultCode code);
  /// Queues `bytes` for `to` only when it is not larger than `limit` (anti-amplification).
  bool push_bounded(const Endpoint& to, std::span<const uint8_t> bytes, size_t limit, Outbox& out);

  ServerConfig config_;
  ServerStats& stats_;
  WorkerPool pool_;  // the step's contact batches and the snapshot writes; before world_, which uses it
  physics::World world_;
  SessionTable sessions_;
  RejectLog rejects_;
  StepClock clock_;
  float dt_;  // [s], 1 / tick_hz
  std::chrono::nanoseconds client_timeout_;
  bool shutting_down_ = false;
  std::optional<TimePoint> stop_at_;  // a drain's end (begin_drain)
  bool authority_any_ = false;  // --authority any
  Journal journal_;  ///< the recorder, if any
  SnapshotObserver snapshot_observer_;

  std::unique_ptr<PlaybackDriver> playback_;  // null: a live server

  // Handshake: the cookie key lives only in this process; cookie time slots count from epoch_.
  security::CookieKey cookie_key_;
  /// Key shares that made a session, for as long as a cookie verifies (two slots): a Connect
  /// carrying one again is a replay and creates nothing. 65,536 covers 20 s of sessions created
  /// at 3,000 per second (--max-clients 4096 turned over every 1.4 s); about 8 MB at most.
  security::SpentKeyShares spent_shares_{2 * security::kCookieSlotLength, 65'536};
  std::optional<security::TokenKey> token_key_;
  uint64_t (*unix_now_)() = nullptr;
  TimePoint epoch_{};

  /// Who owns each object, indexed by ObjectID::index (the generation tells a reused slot).
  struct Ownership {
    uint32_t generation = 0;
    uint32_t client_id = 0;  ///< 0 = the scene (everyone's)
    bool shared = true;
    bool charged_to_address = false;  ///< anonymous mode: counted in live_by_address_[address]
    asio::ip::address address;        ///< the creator's address_prefix (server/net/address_prefix.h)
    bool removed_non_finite = false;  ///< the step's guard removed it (its state was not finite)
    uint32_t budget_slot = 0;         ///< its account's index in slot_accounts_ (the tick budget)
  };
  std::vector<Ownership> owners_;
  // The tick budget (tick_budget.h): who pays for a body. A token's client id, or in anonymous
  // mode the creator's address prefix (as the per-address quotas), so many sessions from one
  // address are one account; loopback is exempt as from the session cap (bots and load
  // generators on this machine: each session its own account). Ordered maps: deterministic.
  using Account = std::pair<uint32_t, asio::ip::address>;
  Account account_of(const Ownership& o) const {
    return o.charged_to_address && !o.address.is_loopback() ? Account{0, o.address} : Account{o.client_id, {}};
  }
  Account account_of(const Session& s) const;
  bool over_budget(const Session& s, TimePoint now);
  /// One in how many snapshot and event rounds the session gets now: kThrottledSendEvery while
  /// its account is throttled, its send_every while that holds, else 1.
  uint32_t send_every(const Session& s, TimePoint now);
  /// Whether this wake-up skips the session's snapshot and event sends: with e = send_every > 1,
  /// only the rounds r (r = tick / snapshot_phases(), one snapshot of the session each) with
  /// (r + client id) % e == 0 send, so the reduced sessions' turns are spread over the rounds.
  bool throttled_send_skipped(const Session& s, TimePoint now);
  /// The send share (tick_budget.h): after a wake-up of `wakeup` whose events and snapshots took
  /// `sends`, over `steps` ticks, sets each session's send_every from its snapshot cost.
  void share_sends(std::chrono::nanoseconds wakeup, std::chrono::nanoseconds sends, int steps, TimePoint now);
  void charge_tick_budget(std::chrono::nanoseconds step_time, TimePoint now);
  // --max-wakes-per-tick: whether a queued push targets a sleeping body, and each account's
  // share of this tick's wakes (plan_wakes, before the queue is applied).
  bool wakes_a_sleeper(const PendingRequest& r) const;
  void plan_wakes();
  bool take_wake(uint32_t slot);  // one wake granted to this budget slot, if under wake_level_
  uint64_t wake_level_ = UINT64_MAX;           // UINT64_MAX: every wake this tick is granted
  std::vector<uint64_t> wake_wanted_;          // by budget slot
  std::vector<uint64_t> wake_granted_;         // by budget slot
  void sleep_throttled_bodies(TimePoint now);
  std::map<Account, TimePoint> throttled_;     // account -> throttled until
  // Each account gets a slot the first time it creates a body, so the per-body accounting of a
  // step over budget is an array index (40 bytes per account ever seen).
  uint32_t budget_slot_of(const Account& account);
  std::map<Account, uint32_t> account_slots_;
  std::vector<Account> slot_accounts_;
  std::vector<uint64_t> slot_cost_;            // charge_tick_budget's scratch, by slot
  double last_send_ms_ = 0;                    // the last wake-up's events and snapshots [ms]
  uint32_t overrun_streak_ = 0;                // wake-ups in a row longer than the tick
  double overrun_debt_ms_ = 0;                 // the streak's lateness, summed [ms]
  std::vector<uint8_t> slot_throttled_;        // sleep_throttled_bodies' scratch, by slot
  std::vector<uint64_t> account_costs_;        // the same costs, for fair_share_level
  std::chrono::nanoseconds step_time_for_test_{0};
  std::chrono::nanoseconds send_time_for_test_{0};
  std::vector<Vec3> event_points_;             // write_events' scratch: events_' points, world frame [m]
  std::vector<uint64_t> send_costs_;           // share_sends' scratch, by session
  std::vector<uint32_t> send_everys_;          // share_sends' scratch, by session
  std::map<uint32_t, uint32_t> live_objects_;  // client id -> live objects it owns (ordered: deterministic)
  // Anonymous mode: IP address -> live objects of its sessions, so a new port or a reconnect
  // does not reset the quota (--max-objects-per-address).
  std::map<asio::ip::address, uint32_t> live_by_address_;
  uint32_t address_quota_ = 0;         // --max-objects-per-address resolved; 0 = none
  bool destroy_on_disconnect_ = true;  // --on-disconnect destroy
  std::vector<uint32_t> departed_;     // client ids whose sessions ended since the last tick
  mutable std::string refusal_;        // authorize()'s message when it names a configured limit
  uint32_t client_objects_ = 0;                // live objects owned by clients, all together
  mutable std::vector<ObjectID> spawn_overlaps_;  // check_client_body's query result, reused
  mutable std::string refusal_text_;              // check_client_body's message, formatted with the limit

  SnapshotSenderConfig sender_config_;
  SnapshotSource snapshot_source_;

  // Buffers reused every wake-up (clear(), never shrink).
  flatbuffers::FlatBufferBuilder fbb_{2 * wire::kMaxDatagramBytes};
  // A sealed datagram is opened into here (aligned: the FlatBuffer is then read in place), and an
  // outgoing one is stamped here before it is sealed into the outbox.
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> unseal_buffer_{};
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> seal_scratch_{};
  std::vector<PendingRequest> queue_;
  /// Actions (world-changing requests with an apply_tick) until their tick; equal ticks keep
  /// their arrival order (multimap insertion), so the application order is deterministic.
  std::multimap<uint64_t, PendingRequest> held_;
  uint64_t max_lead_ticks_ = 0;      // --max-input-lead-ms in ticks
  PoseHistory history_;              // --lag-compensation-ms of movable poses
  std::vector<physics::IndexedPose> past_poses_;  // answer_raycast's scratch
  std::vector<PendingRequest> input_pushes_;      // apply_tick_inputs' scratch
  // The inputs taken for the last tick stepped, by body (apply_tick_inputs), relayed in snapshots
  // to the other sessions whose area holds the body (write_snapshots).
  struct TickInput {
    uint32_t client_id = 0;  // the session that sent it: not relayed back to it
    Vec3 position;           // the body's, when the snapshots are written
    wire::RelayedInput relayed;
  };
  std::vector<TickInput> tick_inputs_;
  std::vector<std::pair<float, uint32_t>> relay_order_;  // write_snapshots' scratch: (distance, position)
  std::vector<InputValue> input_frames_;          // receive_input's scratch
  // write_snapshots: the sessions due this wake-up and their payloads (same positions).
  struct DueSnapshot {
    uint32_t session = 0;   // position in sessions_.sessions()
    uint32_t sequence = 0;  // the packet sequence send() will assign
    size_t budget = 0;      // [bytes]
    uint32_t first_input = 0;   // its relayed inputs: relayed_inputs_[first_input, + inputs)
    uint32_t inputs = 0;
  };
  std::vector<wire::RelayedInput> relayed_inputs_;
  std::vector<DueSnapshot> due_snapshots_;
  std::vector<std::vector<uint8_t>> snapshot_payloads_;
  std::vector<uint8_t> phase_due_;    // per snapshot phase: a snapshot tick of it was stepped
  int next_snapshot_phase_ = 0;       // given to the next accepted session (round robin)
  std::vector<wire::CollisionEvent> events_;
  std::vector<wire::CollisionEvent> event_batch_;
  std::vector<wire::JointEventFields> event_joint_batch_;  // the joint column of event_batch_
  // Joints: who owns each, indexed by JointID::index; its serial orders it against sessions'
  // starts (Session::joint_serial_at_start), so each session hears of each joint once.
  struct JointOwnership {
    uint32_t generation = 0;  ///< 0: no live joint in the slot
    uint32_t client_id = 0;   ///< 0 = the scene
    bool charged_to_address = false;
    asio::ip::address address;
    uint64_t serial = 0;
  };
  std::vector<JointOwnership> joint_owners_;
  std::map<uint32_t, uint32_t> joints_of_client_;           // client id -> live joints (ordered)
  std::map<asio::ip::address, uint32_t> joints_by_address_;  // anonymous mode: address -> live joints
  uint32_t client_joints_ = 0;                               // live joints owned by clients
  uint64_t next_joint_serial_ = 1;
  // This update's joint events (JointAdded with the serial of its joint, JointRemoved with 0),
  // for every session: not filtered by area, not under the per-session event cap.
  std::vector<wire::CollisionEvent> joint_events_;
  std::vector<wire::JointEventFields> joint_event_fields_;
  std::vector<uint64_t> joint_event_serials_;
  std::vector<uint32_t> newly_acked_;
  std::vector<Session> expired_;
  std::vector<physics::RayHit> ray_hits_;
  std::vector<wire::RayHitEntry> ray_entries_;
};

}  // namespace impulse::server
