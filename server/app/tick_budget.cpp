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

}  // namespace impulse::server
