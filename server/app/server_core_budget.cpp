// ServerCore, the tick budget (tick_budget.h): accounts charged for their bodies' step cost and
// their sessions' snapshot cost, throttled over their fair share; and the wakes one tick's
// pushes may cause, shared among the accounts pushing.
#include "server/app/server_core.h"

#include <spdlog/spdlog.h>

#include "server/app/server_core_internal.h"
#include "server/app/tick_budget.h"
#include "server/net/address_prefix.h"

namespace impulse::server {
namespace {

using wire::Message;
using wire::ResultCode;
using namespace core_rules;



}  // namespace

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

}  // namespace impulse::server
