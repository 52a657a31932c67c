// The server's logic without sockets or clocks: sessions, the request queue, the fixed-step
// loop, snapshots and collision events. The Asio layer (server.cpp) feeds it datagrams and the
// current time and sends what it queues in an Outbox, so every rule here is unit-testable with
// a fake clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "server/app/apply_request.h"
#include "server/app/server.h"
#include "server/app/step_clock.h"
#include "server/net/outbox.h"
#include "server/net/reject_log.h"
#include "server/net/session_table.h"
#include "server/physics/world.h"
#include "shared/wire/codec.h"

namespace impulse::record {
class Recorder;
}

namespace impulse::server {

/// Requests queued at most per tick; more are dropped and counted (RejectReason::QueueFull).
inline constexpr size_t kMaxQueuedRequests = 4096;
/// Collision events sent at most per update(); more are dropped and counted (EventsDropped).
inline constexpr size_t kMaxEventsPerUpdate = 8192;

class ServerCore {
 public:
  /// @param config  must pass validate_config
  /// @param gravity the scene's gravity [m/s^2], world frame
  /// @param stats   updated in place; must outlive the core
  ServerCore(const ServerConfig& config, Vec3 gravity, ServerStats& stats);

  /// Creates `bodies` in order. On a World error returns false with *error naming the body index.
  bool add_bodies(std::span<const physics::BodyDesc> bodies, std::string* error);

  /// Records every applied request, step and session change into `recorder` (null: none). Set it
  /// before add_bodies() so the scene's bodies are noted too. Not owned; must outlive the core.
  void set_recorder(record::Recorder* recorder) { recorder_ = recorder; }

  /// Starts the fixed-step clock at `now`. Call once, before the first update().
  void start(TimePoint now);

  /// Handles one received datagram at `now`: verifies it, answers Connect/Ping/Disconnect at
  /// once, range-checks requests (InvalidArgument at once) and queues the valid ones for the next
  /// tick boundary. Anything refused is counted and logged through the RejectLog. Replies to an
  /// address without a session are never larger than the datagram that caused them.
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

  bool shutting_down() const { return shutting_down_; }
  const physics::World& world() const { return world_; }
  const SessionTable& sessions() const { return sessions_; }
  RejectLog& rejects() { return rejects_; }
  const RejectLog& rejects() const { return rejects_; }
  /// Steps dropped by the accumulator cap since start().
  uint64_t dropped_steps() const { return clock_.dropped_steps; }
  /// Time until the next step is due (for scheduling the next wake-up).
  std::chrono::nanoseconds time_to_next_step() const { return server::time_to_next_step(clock_); }
  /// Requests waiting for the next tick.
  size_t queued_requests() const { return queue_.size(); }

 private:
  void handle_connect(const Endpoint& from, const wire::Connect& m, size_t request_bytes, TimePoint now, Outbox& out);
  void handle_version_mismatch(const Endpoint& from, const wire::Envelope& envelope, size_t request_bytes,
                               TimePoint now, Outbox& out);
  void handle_request(const Endpoint& from, const wire::Envelope& envelope, size_t request_bytes, TimePoint now,
                      Outbox& out);
  void reply_not_connected(const Endpoint& from, wire::Message type, uint32_t request_id, size_t request_bytes,
                           TimePoint now, Outbox& out);
  void reject_request(const Endpoint& from, wire::Message type, uint32_t request_id, ObjectID id,
                      const wire::Check& check, TimePoint now, Outbox& out);
  void apply_requests(TimePoint now, Outbox& out);
  void apply_request(const PendingRequest& r, TimePoint now, Outbox& out);
  void answer_raycasts(Outbox& out);
  void answer_raycast(const PendingRequest& r, Outbox& out);
  void expire_sessions(TimePoint now, Outbox& out);
  /// @param world_hash  World::world_hash() of the current state when already computed
  void publish_stats(std::optional<uint64_t> world_hash = std::nullopt);
  /// Queues `bytes` for `to` only when it is not larger than `limit` (anti-amplification).
  bool push_bounded(const Endpoint& to, std::span<const uint8_t> bytes, size_t limit, Outbox& out);

  ServerConfig config_;
  ServerStats& stats_;
  physics::World world_;
  SessionTable sessions_;
  RejectLog rejects_;
  StepClock clock_;
  float dt_;  // [s], 1 / tick_hz
  std::chrono::nanoseconds client_timeout_;
  bool shutting_down_ = false;
  record::Recorder* recorder_ = nullptr;

  // Buffers reused every wake-up (clear(), never shrink).
  flatbuffers::FlatBufferBuilder fbb_{2 * wire::kMaxDatagramBytes};
  std::vector<PendingRequest> queue_;
  std::vector<wire::ObjectState> object_states_;
  std::vector<wire::CollisionEvent> events_;
  std::vector<Session> expired_;
  std::vector<physics::RayHit> ray_hits_;
  std::vector<wire::RayHitEntry> ray_entries_;
};

}  // namespace impulse::server
