// ServerCore, what leaves after the steps: raycast answers, collision and joint events (reliable,
// per session), and each due session's delta snapshot with the other sessions' inputs it is
// relayed.
#include "server/app/server_core.h"

#include <limits>

#include <spdlog/spdlog.h>

#include "server/app/server_core_internal.h"

namespace impulse::server {
namespace {

using wire::Message;
using wire::ResultCode;
using namespace core_rules;

wire::RayHitEntry to_wire_hit(const physics::RayHit& h) {
  return wire::RayHitEntry(impulse::to_wire(h.id), wire::to_wire(h.point), wire::to_wire(h.normal), h.fraction);
}

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

}  // namespace

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

}  // namespace impulse::server
