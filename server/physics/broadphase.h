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

/// True when the segment origin + t * translation, t in [0, 1], meets the closed box `box`
/// (world frame [m]): the slab test (Kay and Kajiya, "Ray Tracing Complex Scenes", SIGGRAPH
/// 1986; Ericson, "Real-Time Collision Detection", 2005, §5.3.3) in float. A segment parallel
/// to a slab (a zero translation component) meets it only when it lies within the slab. False
/// for a non-finite origin or translation. The broadphase's ray query and its callers share
/// this exact test, so their results agree bit for bit.
bool segment_overlaps_aabb(Vec3 origin, Vec3 translation, const Aabb& box);

/// Two populations share one grid:
///  - moving proxies (awake dynamic and kinematic bodies) are passed to find_pairs every step;
///  - parked proxies (static and sleeping bodies) persist between steps and are only re-binned
///    when one is added or removed, so a level of static boxes costs nothing per step.
/// Proxies covering more than max_cells_per_proxy cells go to a "large" list that is tested
/// directly against each moving proxy; memory stays O(proxies), never O(covered cells).
///
/// Strategy (sort-based spatial hashing, after Teschner et al. 2003 and Ericson §7.1):
///  - Cell coordinates are floor(coord / cell_size) clamped to [-2^20, 2^20 - 1] per axis and
///    packed into an exact 63-bit key (21 bits per axis), so distinct cells never collide.
///    Clamping only merges far-away cells into the border cells: results stay exact because
///    every candidate is confirmed by an AABB test; only speed suffers beyond
///    2^20 * cell_size metres from the origin (2097 km at the default 2 m).
///  - Each step every small moving proxy emits one (cell key, proxy) entry per covered cell;
///    the entries are radix-sorted (stable, so ties stay in proxy order; keys compacted to the
///    occupied cell bounds, so typically two passes) and runs of equal keys are scanned for
///    overlapping AABBs. Sorting instead of hashing into buckets means no hash-table iteration
///    order and no per-step allocation once the buffers have grown.
///  - A pair sharing several cells is reported only in the cell holding the minimum corner of
///    the two boxes' intersection (per axis the larger of the two minimum cells), so no set is
///    needed to remove duplicates. Each entry carries 3 bits saying whether its cell is the
///    proxy's lowest per axis, so the test is one OR on the entries themselves.
///  - Parked proxies live in two sorted tiers (a two-level form of Bentley and Saxe's
///    logarithmic method): the main grid, and a small "recent" grid of the proxies added or
///    replaced since the last merge, re-sorted by each find_pairs. Removing or replacing a proxy
///    only marks its entries stale. Once the changes exceed T = max(64, sqrt(8 * parked)), the
///    stale entries are dropped and the recent ones merged into the main grid in one linear
///    pass. A step with a few sleep/wake changes thus costs O(T) (radix sort of the recent
///    tier) plus an amortised share of a merge, never a re-sort of the level; loading P static
///    bodies with a query before each costs O(P^1.5).
///    Each run of moving entries finds its parked runs by forward-only galloping searches.
///  - Large proxies (moving or parked) are tested by AABB against every moving proxy, and large
///    moving proxies against every parked proxy: O(large x proxies) per step.
///  - The pair list is finally sorted by (a, b) (and deduplicated, which only matters when the
///    caller breaks the unique-id precondition).
/// Determinism: outputs depend only on the current proxies, never on addresses or on the
/// add/remove history. Mutations are not thread-safe; query() mutates nothing, so concurrent
/// queries between mutations are safe. One instance per World.
class SpatialHash {
 public:
  /// @param cell_size            grid cell edge [m], > 0; a non-finite or non-positive value
  ///                             is replaced by 1 m so the hash stays usable
  /// @param max_cells_per_proxy  proxies covering more cells are "large" (see above); 0 makes
  ///                             every proxy large (brute force)
  SpatialHash(float cell_size, uint32_t max_cells_per_proxy);

  /// Adds or replaces a parked proxy (static or sleeping body). aabb in world frame [m],
  /// min <= max. O(1) plus an occasional linear merge (amortised O(sqrt(parked)) at worst).
  void add_parked(uint32_t id, const Aabb& aabb);
  /// Removes a parked proxy; a no-op when the id is not parked. Cost as add_parked.
  void remove_parked(uint32_t id);
  /// Number of parked proxies.
  uint32_t parked_count() const;

  /// Finds every overlapping pair among the moving proxies, and between moving and parked
  /// proxies. Parked-parked pairs are never reported. Each pair appears once, with a < b, and
  /// `out` is sorted by (a, b). ids.size() must equal aabbs.size(); an id must not be both
  /// moving and parked. `out` is cleared first. Reuses internal buffers: no allocation in steady state.
  /// Overlap is closed: touching boxes form a pair. Extra elements of the longer span are ignored.
  void find_pairs(std::span<const uint32_t> ids, std::span<const Aabb> aabbs, std::vector<ProxyPair>& out);

  /// Every proxy (moving as of the last find_pairs, and parked) whose AABB overlaps `box`,
  /// sorted ascending, each once. `out` is cleared first. Uses the grid when `box` covers at
  /// most max_cells_per_proxy cells, otherwise tests every proxy. Parked changes made since
  /// the last find_pairs are tested linearly (fewer than T, see above).
  void query(const Aabb& box, std::vector<uint32_t>& out) const;

  /// Every proxy (moving as of the last find_pairs, and parked) whose AABB the segment
  /// origin + t * translation, t in [0, 1] (world frame [m]), overlaps, as decided by
  /// segment_overlaps_aabb; sorted ascending, each once. `out` is cleared first; a non-finite
  /// origin or translation gives no proxies. A zero translation finds the boxes containing
  /// the origin. Allocates nothing beyond `out`'s growth.
  ///
  /// Walks the grid cells along the segment in the manner of a 3D DDA (Amanatides and Woo, "A
  /// Fast Voxel Traversal Algorithm for Ray Tracing", Eurographics 1987), slab by slab: the
  /// segment's parameter interval inside each x cell, then each y cell within it, then each z
  /// cell, every crossing computed directly from the origin in double precision (no drift), so
  /// the visited cells are exactly those the segment crosses, plus those within a small padding
  /// (1e-3 cell plus a few float ulps of the coordinates) that makes the walk conservative: a box
  /// the float slab test accepts is never missed by rounding. Each visited cell's entries are
  /// found by binary search in the sorted moving, main parked and recent parked tiers (stale
  /// parked entries skipped as in query()); the large lists and the parked changes made since
  /// the last find_pairs are tested directly. Cost O(cells * log entries + candidates + large +
  /// T). When the segment crosses more than 4 * max_cells_per_proxy cells (sum over the axes of
  /// the cell index change, plus one), every proxy is tested instead: O(proxies).
  void query_ray(Vec3 origin, Vec3 translation, std::vector<uint32_t>& out) const;

 private:
  /// Inclusive integer cell range of an AABB.
  struct CellRange {
    int32_t lo[3];
    int32_t hi[3];
  };
  /// One covered cell of one proxy (16 bytes). `proxy` indexes the moving arrays or is a parked
  /// slot; `lo_flags` has bit x/y/z (1/2/4) set when this cell is the proxy's lowest on that
  /// axis, so the min-corner test needs no access to the proxy's data.
  struct CellEntry {
    uint64_t key;
    uint32_t proxy;
    uint32_t lo_flags;
  };

  CellRange compute_range(const Aabb& box) const;
  bool is_large(const CellRange& range) const;
  void emit_entries(uint32_t proxy, const CellRange& range, std::vector<CellEntry>& entries) const;
  std::size_t merge_threshold() const;
  void maybe_merge_parked();
  void merge_parked();
  /// Bins the live queued parked slots into recent_entries_ (sorted, boxes gathered) and
  /// large_out, marking each with `mark` (kSlotInGrid for a merge, kSlotInRecent for the recent
  /// tier) so a slot queued twice is binned once.
  void bin_queued_slots(uint8_t mark, std::vector<uint32_t>& large_out);
  void build_recent_tier();
  uint32_t find_bucket(uint32_t id) const;
  void insert_slot_index(uint32_t id, uint32_t slot);
  void erase_slot_index(uint32_t bucket);
  void grow_slot_index();

  float inv_cell_size_;
  uint64_t max_cells_per_proxy_;

  // Moving proxies as of the last find_pairs: copied so query() can answer between steps.
  std::vector<uint32_t> moving_ids_;
  std::vector<Aabb> moving_aabbs_;
  std::vector<uint8_t> moving_is_large_;   // 1 when the proxy is in moving_large_
  std::vector<uint32_t> moving_large_;      // indices into the moving arrays, ascending
  std::vector<CellEntry> moving_entries_;   // sorted by key, ties in proxy order
  std::vector<Aabb> moving_entry_boxes_;    // the AABB of each moving entry's proxy, same order

  // Parked proxies live in stable slots (free list), so grid entries can name a slot and go
  // stale instead of being rewritten. Slot order never reaches an output.
  std::vector<uint32_t> parked_ids_;       // per slot
  std::vector<Aabb> parked_aabbs_;         // per slot
  std::vector<uint8_t> parked_flags_;      // per slot: kSlot* bits (broadphase.cpp)
  std::vector<uint32_t> parked_free_;      // free slots, reused last-in first-out
  uint32_t parked_live_ = 0;
  // Main tier: entries (and large slots) are current while their slot has kSlotInGrid.
  std::vector<CellEntry> parked_entries_;  // sorted by key
  std::vector<Aabb> parked_entry_boxes_;   // the AABB of each entry's slot, same order
  std::vector<uint32_t> parked_large_;
  uint32_t parked_stale_ = 0;              // slots whose main-tier entries went stale
  // Changes since the last merge: [0, recent_begin_) are indexed by the recent tier (current
  // while their slot has kSlotInRecent), [recent_begin_, end) came after the last find_pairs.
  std::vector<uint32_t> parked_queue_;
  std::size_t recent_begin_ = 0;
  std::vector<CellEntry> recent_entries_;  // sorted by key
  std::vector<Aabb> recent_entry_boxes_;
  std::vector<uint32_t> recent_large_;

  // id -> parked slot: open addressing with linear probing, power-of-two capacity. Only looked
  // up, never iterated, so its layout cannot leak into any output.
  std::vector<uint32_t> index_ids_;
  std::vector<uint32_t> index_slots_;  // kNoSlot marks an empty bucket
  uint32_t index_mask_ = 0;

  std::vector<CellEntry> sort_scratch_;  // second buffer of the radix sort and of the merge
  std::vector<Aabb> box_scratch_;        // second buffer of the merge's boxes
  std::vector<uint32_t> radix_counts_;   // radix sort histograms
};

}  // namespace impulse::physics
