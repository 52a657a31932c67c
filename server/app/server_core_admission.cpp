// ServerCore, request admission: a session's requests through its exactly-once window, answered
// at once when the tick need not see them, queued for the next tick, or held for the tick an
// action is stamped for; and tick-stamped Input frames into the session's InputBuffer. The tick
// (server_core.cpp) applies what is queued.
#include "server/app/server_core.h"

#include <spdlog/spdlog.h>

#include "server/app/server_core_internal.h"
#include "server/request/decode_request.h"
#include "shared/wire/messages.h"

namespace impulse::server {
namespace {

using wire::Message;
using wire::ResultCode;
using namespace core_rules;

constexpr std::string_view kOverBudgetMessage =
    "your bodies cost more than your share of the server's tick (--tick-budget-ms): they were put to sleep, and "
    "pushes and creates are refused for 2 s; use fewer bodies, or keep them apart";

constexpr std::string_view kReadOnlyMessage =
    "read-only: this server plays a recording (impulse-replay serve); spectators may only Raycast, SetInterest and "
    "send ReplayControl";

}  // namespace

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

}  // namespace impulse::server
