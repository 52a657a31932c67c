// Broadphase: a spatial hash over a uniform grid, sort-based so that iteration order is
// deterministic. References: Teschner et al., "Optimized Spatial Hashing for Collision Detection
// of Deformable Objects", VMV 2003; Ericson, "Real-Time Collision Detection", 2005, §7.1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "shared/math.h"

namespace impulse::physics {

/// A candidate pair of proxies whose AABBs overlap. Proxy ids are caller-chosen u32 (the World
/// uses slot indices). Invariant: a < b.
struct ProxyPair {
  uint32_t a;
  uint32_t b;
  friend constexpr bool operator==(ProxyPair, ProxyPair) = default;
};

/// Two populations share one grid:
///  - moving proxies (awake dynamic and kinematic bodies) are passed to find_pairs every step;
///  - parked proxies (static and sleeping bodies) persist between steps and are only re-sorted
///    when one is added or removed, so a level of static boxes costs nothing per step.
/// Proxies covering more than max_cells_per_proxy cells go to a "large" list that is tested
/// directly against each moving proxy; memory stays O(proxies), never O(covered cells).
class SpatialHash {
 public:
  /// @param cell_size            grid cell edge [m], > 0
  /// @param max_cells_per_proxy  proxies covering more cells are "large" (see above)
  SpatialHash(float cell_size, uint32_t max_cells_per_proxy);

  /// Adds or replaces a parked proxy (static or sleeping body). aabb in world frame [m].
  void add_parked(uint32_t id, const Aabb& aabb);
  /// Removes a parked proxy; a no-op when the id is not parked.
  void remove_parked(uint32_t id);
  /// Number of parked proxies.
  uint32_t parked_count() const;

  /// Finds every overlapping pair among the moving proxies, and between moving and parked
  /// proxies. Parked-parked pairs are never reported. Each pair appears once, with a < b, and
  /// `out` is sorted by (a, b). ids.size() must equal aabbs.size(); an id must not be both
  /// moving and parked. `out` is cleared first. Reuses internal buffers: no allocation in steady state.
  void find_pairs(std::span<const uint32_t> ids, std::span<const Aabb> aabbs, std::vector<ProxyPair>& out);

  /// Every proxy (moving as of the last find_pairs, and parked) whose AABB overlaps `box`,
  /// sorted ascending, each once. `out` is cleared first.
  void query(const Aabb& box, std::vector<uint32_t>& out) const;

 private:
  // Grid, cell entries, parked/large lists and scratch: private to the implementation.
};

}  // namespace impulse::physics
