// Water-filling over sorted costs: raise the level through the smallest costs until the rest,
// each held at the level, would overrun the target.
#include "server/app/tick_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace impulse::server {

uint64_t fair_share_level(std::span<const uint64_t> costs, uint64_t target) {
  std::vector<uint64_t> sorted(costs.begin(), costs.end());
  std::sort(sorted.begin(), sorted.end());
  uint64_t below = 0;  // the costs met in full so far
  for (size_t i = 0; i < sorted.size(); ++i) {
    const uint64_t rest = sorted.size() - i;  // accounts at or above sorted[i]
    // Every remaining account held at sorted[i]: does that still fit?
    if (below + rest * sorted[i] > target) {
      return target > below ? (target - below) / rest : 0;
    }
    below += sorted[i];
  }
  return UINT64_MAX;
}

uint64_t min_share_work(double wakeup_ms, double tick_ms, uint32_t streak) {
  if (!(wakeup_ms > tick_ms) || !(tick_ms > 0) || streak <= kOverrunGrace) return kMinShareWork;
  const int halvings = static_cast<int>(std::min<uint32_t>(streak - kOverrunGrace - 1, 16));
  const double scaled = std::ldexp(static_cast<double>(kMinShareWork) * tick_ms / wakeup_ms, -halvings);
  return std::max(kMinShareWorkOverrun, static_cast<uint64_t>(scaled));
}

uint32_t send_every_for(uint64_t cost, uint64_t level) {
  if (cost <= level) return 1;
  if (level == 0) return kMaxSendEvery;
  return static_cast<uint32_t>(std::min<uint64_t>(kMaxSendEvery, (cost + level - 1) / level));
}

uint64_t send_share_level(std::span<const uint64_t> costs, std::span<const uint32_t> every, double fits) {
  double now = 0;  // what the sessions cost a round as they are served now [visits]
  for (size_t i = 0; i < costs.size(); ++i) now += static_cast<double>(costs[i]) / std::max<uint32_t>(1, every[i]);
  const double target = std::max(0.0, now * fits);
  const uint64_t level = target >= 1.8e19 ? UINT64_MAX : fair_share_level(costs, static_cast<uint64_t>(target));
  return std::max(kMinSendShareVisits, level);
}

}  // namespace impulse::server
