// Sort-based spatial hashing on a uniform grid (Teschner et al., "Optimized Spatial Hashing for
// Collision Detection of Deformable Objects", VMV 2003; Ericson, "Real-Time Collision Detection",
// 2005, §7.1), with exact 63-bit cell keys and min-corner pair de-duplication; ray queries walk
// the cells along the segment (Amanatides and Woo, "A Fast Voxel Traversal Algorithm for Ray
// Tracing", Eurographics 1987) and confirm candidates by the slab test (Ericson §5.3.3).
// Over 700 lines on purpose: the grid's build, pair search and ray walk share one cell-key
// encoding and one set of sorted arrays; split, each part would reopen them.
#include "server/physics/broadphase.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

namespace impulse::physics {
namespace {

constexpr int kCellBits = 21;
constexpr int32_t kCellMin = -(1 << (kCellBits - 1));
constexpr int32_t kCellMax = (1 << (kCellBits - 1)) - 1;
constexpr uint32_t kNoSlot = std::numeric_limits<uint32_t>::max();

/// Cell coordinate of one scalar [m]. Monotonic in v, which is all the de-duplication rule needs;
/// NaN maps to the lowest cell instead of an undefined float-to-int conversion.
int32_t to_cell(float v, float inv_cell_size) {
  const float c = v * inv_cell_size;
  if (!(c >= static_cast<float>(kCellMin))) return kCellMin;
  if (c >= static_cast<float>(kCellMax)) return kCellMax;
  // floor without a libm call (baseline x86-64 has no inline floorf): truncate, then step down
  // for negative non-integers. c is within int32 range here, so the conversion is defined.
  const int32_t t = static_cast<int32_t>(c);
  return static_cast<float>(t) > c ? t - 1 : t;
}

/// Exact key: 21 bits per axis, x most significant, so ascending keys walk x, then y, then z.
constexpr uint64_t pack_key(int32_t x, int32_t y, int32_t z) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(x - kCellMin)) << (2 * kCellBits)) |
         (static_cast<uint64_t>(static_cast<uint32_t>(y - kCellMin)) << kCellBits) |
         static_cast<uint64_t>(static_cast<uint32_t>(z - kCellMin));
}

constexpr uint64_t kAxisMask = (uint64_t{1} << kCellBits) - 1;

/// Bits of CellEntry::lo_flags: the entry's cell is the proxy's lowest cell on that axis.
constexpr uint32_t kLoX = 1u;
constexpr uint32_t kLoY = 2u;
constexpr uint32_t kLoZ = 4u;
constexpr uint32_t kLoAll = kLoX | kLoY | kLoZ;

/// True when a cell shared by two proxies holds the minimum corner of the intersection of their
/// cell ranges, the only cell in which the pair (or a query hit) is reported. Both ranges contain
/// the cell, so per axis max(lo_a, lo_b) == cell exactly when one of the two starts there.
constexpr bool is_min_corner(uint32_t lo_flags_a, uint32_t lo_flags_b) { return (lo_flags_a | lo_flags_b) == kLoAll; }

constexpr uint32_t lo_flags(const int32_t lo[3], int32_t x, int32_t y, int32_t z) {
  return (x == lo[0] ? kLoX : 0u) | (y == lo[1] ? kLoY : 0u) | (z == lo[2] ? kLoZ : 0u);
}

/// Murmur3 finaliser: spreads consecutive ids over the buckets.
constexpr uint32_t hash_id(uint32_t id) {
  id ^= id >> 16;
  id *= 0x85ebca6bu;
  id ^= id >> 13;
  id *= 0xc2b2ae35u;
  id ^= id >> 16;
  return id;
}

/// Bounding cell range of every entry about to be sorted.
struct CellBounds {
  int32_t lo[3] = {kCellMax, kCellMax, kCellMax};
  int32_t hi[3] = {kCellMin, kCellMin, kCellMin};

  template <class Range>
  void add(const Range& r) {
    if (r.hi[0] < r.lo[0] || r.hi[1] < r.lo[1] || r.hi[2] < r.lo[2]) return;  // emits no entries
    for (int axis = 0; axis < 3; ++axis) {
      lo[axis] = std::min(lo[axis], r.lo[axis]);
      hi[axis] = std::max(hi[axis], r.hi[axis]);
    }
  }
};

constexpr int kMaxDigitBits = 11;  // 2048 buckets: histograms stay in L1

/// Stable LSD radix sort of cell entries by key. The 63-bit key is first compacted to offsets
/// from `bounds`, with just enough bits per axis: the order is unchanged, but a scene spanning
/// ~100 cells per axis needs ~20 bits, i.e. two passes instead of six. The digit width is
/// balanced over the passes (fewer buckets scatter more cache-friendly), and passes whose digit
/// is constant are skipped. Stability keeps equal keys in emission order (ascending proxy
/// index), so the result equals a stable sort by key. `scratch` is the second buffer and
/// `counts` the histograms; all keep their capacity, so no allocation in steady state.
template <class Entry>
void radix_sort_by_key(std::vector<Entry>& entries, std::vector<Entry>& scratch, const CellBounds& bounds,
                       std::vector<uint32_t>& counts) {
  const std::size_t n = entries.size();
  if (n < 2) return;
  int bits[3];
  uint64_t base[3];
  for (int axis = 0; axis < 3; ++axis) {
    bits[axis] = std::bit_width(static_cast<uint32_t>(bounds.hi[axis] - bounds.lo[axis]));
    base[axis] = static_cast<uint64_t>(static_cast<uint32_t>(bounds.lo[axis] - kCellMin));
  }
  const int total_bits = bits[0] + bits[1] + bits[2];
  if (total_bits == 0) return;  // a single cell: emission order is already sorted
  const int shift_x = bits[1] + bits[2];
  const int shift_y = bits[2];
  const auto compact = [&](uint64_t key) {
    return (((key >> (2 * kCellBits)) - base[0]) << shift_x) | ((((key >> kCellBits) & kAxisMask) - base[1]) << shift_y) |
           ((key & kAxisMask) - base[2]);
  };
  const int passes = (total_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = (total_bits + passes - 1) / passes;
  const std::size_t radix = std::size_t{1} << digit_bits;
  const uint64_t digit_mask = radix - 1;
  counts.assign(static_cast<std::size_t>(passes) * radix, 0u);
  for (const Entry& e : entries) {
    const uint64_t c = compact(e.key);
    for (int p = 0; p < passes; ++p) ++counts[p * radix + ((c >> (p * digit_bits)) & digit_mask)];
  }
  scratch.resize(n);
  Entry* src = entries.data();
  Entry* dst = scratch.data();
  for (int p = 0; p < passes; ++p) {
    const int shift = p * digit_bits;
    uint32_t* offsets = counts.data() + static_cast<std::size_t>(p) * radix;
    if (offsets[(compact(src[0].key) >> shift) & digit_mask] == n) continue;  // constant digit
    uint32_t sum = 0;
    for (std::size_t d = 0; d < radix; ++d) {
      const uint32_t count = offsets[d];
      offsets[d] = sum;
      sum += count;
    }
    for (std::size_t i = 0; i < n; ++i) dst[offsets[(compact(src[i].key) >> shift) & digit_mask]++] = src[i];
    std::swap(src, dst);
  }
  if (src != entries.data()) entries.swap(scratch);  // result landed in scratch: swap buffers
}

/// First index >= `from` whose key is >= `key`, in entries sorted by key. Exponential search
/// from `from` then binary search: O(log distance), so a walk over ascending keys costs about
/// a merge when the arrays are of similar size and a binary search per key when one is small.
template <class Entry>
std::size_t gallop_lower_bound(const std::vector<Entry>& entries, std::size_t from, uint64_t key) {
  const std::size_t n = entries.size();
  if (from >= n || entries[from].key >= key) return from;
  std::size_t below = from;  // invariant: entries[below].key < key
  std::size_t step = 1;
  while (below + step < n && entries[below + step].key < key) {
    below += step;
    step *= 2;
  }
  const std::size_t end = std::min(below + step, n);
  const auto it = std::lower_bound(entries.begin() + static_cast<std::ptrdiff_t>(below + 1),
                                   entries.begin() + static_cast<std::ptrdiff_t>(end), key,
                                   [](const Entry& e, uint64_t k) { return e.key < k; });
  return static_cast<std::size_t>(it - entries.begin());
}

/// boxes_by_entry[i] = boxes[entries[i].proxy]: one gather after the sort, so the pair scans
/// read boxes sequentially instead of chasing proxy indices (the scan's cache misses).
template <class Entry>
void gather_boxes(const std::vector<Entry>& entries, const std::vector<Aabb>& boxes, std::vector<Aabb>& boxes_by_entry) {
  boxes_by_entry.resize(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) boxes_by_entry[i] = boxes[entries[i].proxy];
}

void push_pair(uint32_t id_a, uint32_t id_b, std::vector<ProxyPair>& out) {
  if (id_a == id_b) return;  // only possible when the caller breaks the unique-id precondition
  out.push_back(id_a < id_b ? ProxyPair{id_a, id_b} : ProxyPair{id_b, id_a});
}

}  // namespace

SpatialHash::SpatialHash(float cell_size, uint32_t max_cells_per_proxy)
    : inv_cell_size_(std::isfinite(cell_size) && cell_size > 0.0f ? 1.0f / cell_size : 1.0f),
      max_cells_per_proxy_(max_cells_per_proxy) {
  if (!std::isfinite(inv_cell_size_)) inv_cell_size_ = 1.0f;  // denormal cell_size
}

SpatialHash::CellRange SpatialHash::compute_range(const Aabb& box) const {
  return CellRange{{to_cell(box.min.x, inv_cell_size_), to_cell(box.min.y, inv_cell_size_),
                    to_cell(box.min.z, inv_cell_size_)},
                   {to_cell(box.max.x, inv_cell_size_), to_cell(box.max.y, inv_cell_size_),
                    to_cell(box.max.z, inv_cell_size_)}};
}

bool SpatialHash::is_large(const CellRange& range) const {
  // At most 2^21 cells per axis, so the product fits in 63 bits.
  uint64_t cells = 1;
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t span = static_cast<int64_t>(range.hi[axis]) - range.lo[axis] + 1;
    cells *= static_cast<uint64_t>(std::max<int64_t>(span, 0));
  }
  return cells > max_cells_per_proxy_;
}

void SpatialHash::emit_entries(uint32_t proxy, const CellRange& range, std::vector<CellEntry>& entries) const {
  for (int32_t x = range.lo[0]; x <= range.hi[0]; ++x) {
    for (int32_t y = range.lo[1]; y <= range.hi[1]; ++y) {
      for (int32_t z = range.lo[2]; z <= range.hi[2]; ++z) {
        entries.push_back(CellEntry{pack_key(x, y, z), proxy, lo_flags(range.lo, x, y, z)});
      }
    }
  }
}

// --- Parked proxies ------------------------------------------------------------------------------

namespace {
constexpr uint8_t kSlotLive = 1;      // holds a parked proxy
constexpr uint8_t kSlotInGrid = 2;    // its main-tier entries (or large-list entry) are current
constexpr uint8_t kSlotInRecent = 4;  // its recent-tier entries (or large-list entry) are current
constexpr uint8_t kSlotQueued = 8;    // listed in parked_queue_ at or after recent_begin_
constexpr std::size_t kMinMergeThreshold = 64;
}  // namespace

uint32_t SpatialHash::find_bucket(uint32_t id) const {
  if (index_slots_.empty()) return kNoSlot;
  for (uint32_t b = hash_id(id) & index_mask_;; b = (b + 1) & index_mask_) {
    if (index_slots_[b] == kNoSlot) return kNoSlot;
    if (index_ids_[b] == id) return b;
  }
}

void SpatialHash::grow_slot_index() {
  const std::size_t capacity = index_slots_.empty() ? 16 : index_slots_.size() * 2;
  std::vector<uint32_t> old_ids = std::move(index_ids_);
  std::vector<uint32_t> old_slots = std::move(index_slots_);
  index_ids_.assign(capacity, 0);
  index_slots_.assign(capacity, kNoSlot);
  index_mask_ = static_cast<uint32_t>(capacity - 1);
  for (std::size_t b = 0; b < old_slots.size(); ++b) {
    if (old_slots[b] == kNoSlot) continue;
    uint32_t nb = hash_id(old_ids[b]) & index_mask_;
    while (index_slots_[nb] != kNoSlot) nb = (nb + 1) & index_mask_;
    index_ids_[nb] = old_ids[b];
    index_slots_[nb] = old_slots[b];
  }
}

void SpatialHash::insert_slot_index(uint32_t id, uint32_t slot) {
  // Load factor at most 1/2 keeps probe sequences short.
  if ((static_cast<std::size_t>(parked_live_) + 1) * 2 > index_slots_.size()) grow_slot_index();
  uint32_t b = hash_id(id) & index_mask_;
  while (index_slots_[b] != kNoSlot) b = (b + 1) & index_mask_;
  index_ids_[b] = id;
  index_slots_[b] = slot;
}

void SpatialHash::erase_slot_index(uint32_t bucket) {
  // Backward-shift deletion (no tombstones): pull later entries of the probe chain into the hole
  // when the hole lies between their home bucket and their current bucket.
  uint32_t hole = bucket;
  index_slots_[hole] = kNoSlot;
  for (uint32_t j = (hole + 1) & index_mask_; index_slots_[j] != kNoSlot; j = (j + 1) & index_mask_) {
    const uint32_t home = hash_id(index_ids_[j]) & index_mask_;
    if (((j - home) & index_mask_) >= ((j - hole) & index_mask_)) {
      index_ids_[hole] = index_ids_[j];
      index_slots_[hole] = index_slots_[j];
      index_slots_[j] = kNoSlot;
      hole = j;
    }
  }
}

void SpatialHash::add_parked(uint32_t id, const Aabb& aabb) {
  uint32_t slot;
  const uint32_t bucket = find_bucket(id);
  if (bucket != kNoSlot) {
    slot = index_slots_[bucket];  // replace in place
  } else {
    if (parked_free_.empty()) {
      slot = static_cast<uint32_t>(parked_ids_.size());
      parked_ids_.push_back(id);
      parked_aabbs_.push_back(aabb);
      parked_flags_.push_back(0);
    } else {
      slot = parked_free_.back();
      parked_free_.pop_back();
      parked_ids_[slot] = id;
    }
    insert_slot_index(id, slot);
    ++parked_live_;
  }
  parked_aabbs_[slot] = aabb;
  const uint8_t flags = parked_flags_[slot];
  if (flags & kSlotInGrid) ++parked_stale_;  // its main-tier entries describe the old box
  if (!(flags & kSlotQueued)) parked_queue_.push_back(slot);
  parked_flags_[slot] = kSlotLive | kSlotQueued;
  maybe_merge_parked();
}

void SpatialHash::remove_parked(uint32_t id) {
  const uint32_t bucket = find_bucket(id);
  if (bucket == kNoSlot) return;
  const uint32_t slot = index_slots_[bucket];
  erase_slot_index(bucket);
  if (parked_flags_[slot] & kSlotInGrid) ++parked_stale_;
  // Keep kSlotQueued: the slot stays listed until the next merge and must not be listed twice
  // if it is reused before then. Not live, it is skipped wherever the queue is read.
  parked_flags_[slot] = static_cast<uint8_t>(parked_flags_[slot] & kSlotQueued);
  parked_free_.push_back(slot);
  --parked_live_;
  maybe_merge_parked();
}

uint32_t SpatialHash::parked_count() const { return parked_live_; }

std::size_t SpatialHash::merge_threshold() const {
  // sqrt balances the two costs: a merge is linear in the main tier (about 3-4 entries per
  // proxy), and every query between merges tests the unmerged changes linearly.
  const auto balanced = static_cast<std::size_t>(std::sqrt(8.0 * static_cast<double>(parked_live_)));
  return std::max(kMinMergeThreshold, balanced);
}

void SpatialHash::maybe_merge_parked() {
  if (parked_queue_.size() + parked_stale_ > merge_threshold()) merge_parked();
}

void SpatialHash::merge_parked() {
  if (parked_queue_.empty() && parked_stale_ == 0) return;

  // 1. Drop stale main-tier entries in place; order is preserved, so the tier stays sorted.
  if (parked_stale_ > 0) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < parked_entries_.size(); ++i) {
      if (parked_flags_[parked_entries_[i].proxy] & kSlotInGrid) {
        parked_entries_[kept] = parked_entries_[i];
        parked_entry_boxes_[kept] = parked_entry_boxes_[i];
        ++kept;
      }
    }
    parked_entries_.resize(kept);
    parked_entry_boxes_.resize(kept);
    std::erase_if(parked_large_, [&](uint32_t slot) { return !(parked_flags_[slot] & kSlotInGrid); });
  }

  // 2. Sorted entries of the changed slots that are still live (each once: kSlotInGrid marks
  //    the ones done, as the queue may list a slot twice).
  bin_queued_slots(kSlotInGrid, parked_large_);

  // 3. Linear merge of both tiers, boxes alongside (stable: main-tier entries first per key).
  const std::size_t na = parked_entries_.size();
  const std::size_t nb = recent_entries_.size();
  if (nb > 0) {
    sort_scratch_.resize(na + nb);
    box_scratch_.resize(na + nb);
    std::size_t a = 0;
    std::size_t b = 0;
    for (std::size_t o = 0; o < na + nb; ++o) {
      const bool take_a = b == nb || (a < na && parked_entries_[a].key <= recent_entries_[b].key);
      if (take_a) {
        sort_scratch_[o] = parked_entries_[a];
        box_scratch_[o] = parked_entry_boxes_[a++];
      } else {
        sort_scratch_[o] = recent_entries_[b];
        box_scratch_[o] = recent_entry_boxes_[b++];
      }
    }
    parked_entries_.swap(sort_scratch_);
    parked_entry_boxes_.swap(box_scratch_);
  }

  parked_queue_.clear();
  recent_begin_ = 0;
  recent_entries_.clear();
  recent_entry_boxes_.clear();
  recent_large_.clear();
  parked_stale_ = 0;
}

void SpatialHash::build_recent_tier() {
  recent_large_.clear();
  bin_queued_slots(kSlotInRecent, recent_large_);
  recent_begin_ = parked_queue_.size();
}

void SpatialHash::bin_queued_slots(uint8_t mark, std::vector<uint32_t>& large_out) {
  for (const uint32_t slot : parked_queue_) {
    parked_flags_[slot] = static_cast<uint8_t>(parked_flags_[slot] & ~(kSlotInRecent | kSlotQueued));
  }
  recent_entries_.clear();
  CellBounds bounds;
  for (const uint32_t slot : parked_queue_) {
    const uint8_t flags = parked_flags_[slot];
    if (!(flags & kSlotLive) || (flags & mark)) continue;  // removed, or listed twice
    parked_flags_[slot] = static_cast<uint8_t>(flags | mark);
    const CellRange range = compute_range(parked_aabbs_[slot]);
    if (is_large(range)) {
      large_out.push_back(slot);
    } else {
      emit_entries(slot, range, recent_entries_);
      bounds.add(range);
    }
  }
  radix_sort_by_key(recent_entries_, sort_scratch_, bounds, radix_counts_);
  gather_boxes(recent_entries_, parked_aabbs_, recent_entry_boxes_);
}

// --- Pairs ---------------------------------------------------------------------------------------

void SpatialHash::find_pairs(std::span<const uint32_t> ids, std::span<const Aabb> aabbs,
                             std::vector<ProxyPair>& out) {
  out.clear();
  const std::size_t n = std::min(ids.size(), aabbs.size());

  // 1. Moving proxies: copy, bin into cells (or the large list), sort the cell entries.
  moving_ids_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
  moving_aabbs_.assign(aabbs.begin(), aabbs.begin() + static_cast<std::ptrdiff_t>(n));
  moving_is_large_.resize(n);
  moving_large_.clear();
  moving_entries_.clear();
  CellBounds bounds;
  for (uint32_t i = 0; i < n; ++i) {
    const CellRange range = compute_range(moving_aabbs_[i]);
    const bool large = is_large(range);
    moving_is_large_[i] = large ? 1 : 0;
    if (large) {
      moving_large_.push_back(i);
    } else {
      emit_entries(i, range, moving_entries_);
      bounds.add(range);
    }
  }
  radix_sort_by_key(moving_entries_, sort_scratch_, bounds, radix_counts_);
  gather_boxes(moving_entries_, moving_aabbs_, moving_entry_boxes_);

  // 2. Parked tiers: from here on every live parked slot is current in exactly one tier.
  if (parked_queue_.size() + parked_stale_ > merge_threshold()) {
    merge_parked();
  } else {
    build_recent_tier();
  }

  // 3. Runs of equal keys: moving-moving within the run, moving-parked against the parked runs
  //    of the same key in both tiers. A pair is reported only in its min-corner cell.
  const std::size_t me = moving_entries_.size();
  std::size_t main_cursor = 0;
  std::size_t recent_cursor = 0;
  const auto pair_with_tier = [&](std::size_t run_begin, std::size_t run_end, uint64_t key,
                                  const std::vector<CellEntry>& entries, const std::vector<Aabb>& entry_boxes,
                                  std::size_t& cursor, uint8_t current_flag) {
    // Keys ascend in both arrays, so the search only moves forward (a merge join).
    cursor = gallop_lower_bound(entries, cursor, key);
    for (std::size_t j = cursor; j < entries.size() && entries[j].key == key; ++j) {
      const CellEntry& ej = entries[j];
      for (std::size_t i = run_begin; i < run_end; ++i) {
        const CellEntry& ei = moving_entries_[i];
        if (is_min_corner(ei.lo_flags, ej.lo_flags) && overlaps(moving_entry_boxes_[i], entry_boxes[j]) &&
            (parked_flags_[ej.proxy] & current_flag)) {
          push_pair(moving_ids_[ei.proxy], parked_ids_[ej.proxy], out);
        }
      }
    }
  };
  for (std::size_t run_begin = 0; run_begin < me;) {
    const uint64_t key = moving_entries_[run_begin].key;
    std::size_t run_end = run_begin + 1;
    while (run_end < me && moving_entries_[run_end].key == key) ++run_end;

    for (std::size_t i = run_begin; i < run_end; ++i) {
      const CellEntry& ei = moving_entries_[i];
      for (std::size_t j = i + 1; j < run_end; ++j) {
        const CellEntry& ej = moving_entries_[j];
        if (is_min_corner(ei.lo_flags, ej.lo_flags) && overlaps(moving_entry_boxes_[i], moving_entry_boxes_[j])) {
          push_pair(moving_ids_[ei.proxy], moving_ids_[ej.proxy], out);
        }
      }
    }
    pair_with_tier(run_begin, run_end, key, parked_entries_, parked_entry_boxes_, main_cursor, kSlotInGrid);
    pair_with_tier(run_begin, run_end, key, recent_entries_, recent_entry_boxes_, recent_cursor, kSlotInRecent);
    run_begin = run_end;
  }

  // 4. Large proxies, tested directly. Each pair has exactly one category, so none repeats:
  //    large moving x small moving, large moving x large moving (once), large moving x every
  //    parked, large parked x small moving.
  for (std::size_t li = 0; li < moving_large_.size(); ++li) {
    const uint32_t p = moving_large_[li];
    const Aabb& box = moving_aabbs_[p];
    for (uint32_t q = 0; q < n; ++q) {
      if (moving_is_large_[q] == 0 && overlaps(box, moving_aabbs_[q])) push_pair(moving_ids_[p], moving_ids_[q], out);
    }
    for (std::size_t lj = li + 1; lj < moving_large_.size(); ++lj) {
      const uint32_t q = moving_large_[lj];
      if (overlaps(box, moving_aabbs_[q])) push_pair(moving_ids_[p], moving_ids_[q], out);
    }
    for (uint32_t slot = 0; slot < parked_ids_.size(); ++slot) {
      if ((parked_flags_[slot] & kSlotLive) && overlaps(box, parked_aabbs_[slot])) {
        push_pair(moving_ids_[p], parked_ids_[slot], out);
      }
    }
  }
  const auto pair_large_parked = [&](const std::vector<uint32_t>& slots, uint8_t current_flag) {
    for (const uint32_t slot : slots) {
      if (!(parked_flags_[slot] & current_flag)) continue;
      const Aabb& box = parked_aabbs_[slot];
      for (uint32_t p = 0; p < n; ++p) {
        if (moving_is_large_[p] == 0 && overlaps(box, moving_aabbs_[p])) push_pair(moving_ids_[p], parked_ids_[slot], out);
      }
    }
  };
  pair_large_parked(parked_large_, kSlotInGrid);
  pair_large_parked(recent_large_, kSlotInRecent);

  // 5. Canonical order. std::sort does not allocate; unique only bites on duplicate input ids.
  std::sort(out.begin(), out.end(), [](ProxyPair l, ProxyPair r) { return l.a != r.a ? l.a < r.a : l.b < r.b; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

// --- Query ---------------------------------------------------------------------------------------

void SpatialHash::query(const Aabb& box, std::vector<uint32_t>& out) const {
  out.clear();
  const CellRange range = compute_range(box);

  if (is_large(range)) {
    // The box covers too many cells to visit: test every proxy.
    for (std::size_t p = 0; p < moving_ids_.size(); ++p) {
      if (overlaps(moving_aabbs_[p], box)) out.push_back(moving_ids_[p]);
    }
    for (std::size_t slot = 0; slot < parked_ids_.size(); ++slot) {
      if ((parked_flags_[slot] & kSlotLive) && overlaps(parked_aabbs_[slot], box)) out.push_back(parked_ids_[slot]);
    }
  } else {
    // Visits the cells of `range` in ascending key order; reports each proxy whose min-corner
    // cell with the query is the current cell, whose AABB overlaps and that is current.
    const auto scan_grid = [&](const std::vector<CellEntry>& entries, const std::vector<Aabb>& entry_boxes,
                               const std::vector<uint32_t>& ids, auto is_current) {
      std::size_t cursor = 0;
      for (int32_t x = range.lo[0]; x <= range.hi[0]; ++x) {
        for (int32_t y = range.lo[1]; y <= range.hi[1]; ++y) {
          for (int32_t z = range.lo[2]; z <= range.hi[2]; ++z) {
            const uint32_t query_flags = lo_flags(range.lo, x, y, z);
            const uint64_t key = pack_key(x, y, z);
            cursor = gallop_lower_bound(entries, cursor, key);
            for (std::size_t i = cursor; i < entries.size() && entries[i].key == key; ++i) {
              const uint32_t proxy = entries[i].proxy;
              if (is_min_corner(entries[i].lo_flags, query_flags) && overlaps(entry_boxes[i], box) &&
                  is_current(proxy)) {
                out.push_back(ids[proxy]);
              }
            }
          }
        }
      }
    };
    scan_grid(moving_entries_, moving_entry_boxes_, moving_ids_, [](uint32_t) { return true; });
    for (const uint32_t p : moving_large_) {
      if (overlaps(moving_aabbs_[p], box)) out.push_back(moving_ids_[p]);
    }
    const auto scan_parked_tier = [&](const std::vector<CellEntry>& entries, const std::vector<Aabb>& entry_boxes,
                                      const std::vector<uint32_t>& large, uint8_t current_flag) {
      const auto is_current = [&](uint32_t slot) { return (parked_flags_[slot] & current_flag) != 0; };
      scan_grid(entries, entry_boxes, parked_ids_, is_current);
      for (const uint32_t slot : large) {
        if (is_current(slot) && overlaps(parked_aabbs_[slot], box)) out.push_back(parked_ids_[slot]);
      }
    };
    scan_parked_tier(parked_entries_, parked_entry_boxes_, parked_large_, kSlotInGrid);
    scan_parked_tier(recent_entries_, recent_entry_boxes_, recent_large_, kSlotInRecent);
    // Changes since the last find_pairs: fewer than merge_threshold(), tested linearly.
    for (std::size_t q = recent_begin_; q < parked_queue_.size(); ++q) {
      const uint32_t slot = parked_queue_[q];
      if ((parked_flags_[slot] & kSlotLive) && overlaps(parked_aabbs_[slot], box)) out.push_back(parked_ids_[slot]);
    }
  }

  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

// --- Ray query -----------------------------------------------------------------------------------

bool segment_overlaps_aabb(Vec3 origin, Vec3 translation, const Aabb& box) {
  if (!is_finite(origin) || !is_finite(translation)) return false;
  float t_lo = 0.0f;
  float t_hi = 1.0f;
  for (int axis = 0; axis < 3; ++axis) {
    const float o = component(origin, axis);
    const float d = component(translation, axis);
    const float lo = component(box.min, axis);
    const float hi = component(box.max, axis);
    if (d == 0.0f) {  // parallel: inside the slab for every t, or never (avoids 0 / 0)
      if (o < lo || o > hi) return false;
      continue;
    }
    float t0 = (lo - o) / d;
    float t1 = (hi - o) / d;
    if (t0 > t1) std::swap(t0, t1);
    t_lo = std::max(t_lo, t0);
    t_hi = std::min(t_hi, t1);
    if (t_lo > t_hi) return false;
  }
  return true;
}

void SpatialHash::query_ray(Vec3 origin, Vec3 translation, std::vector<uint32_t>& out) const {
  out.clear();
  if (!is_finite(origin) || !is_finite(translation)) return;
  const auto hit = [&](const Aabb& box) { return segment_overlaps_aabb(origin, translation, box); };

  // Cells the segment crosses: the 3D DDA steps once per cell boundary on each axis.
  const Vec3 end = origin + translation;
  uint64_t path_cells = std::numeric_limits<uint64_t>::max();
  if (is_finite(end)) {
    const CellRange r = compute_range(Aabb{min(origin, end), max(origin, end)});
    path_cells = 1;
    for (int axis = 0; axis < 3; ++axis) path_cells += static_cast<uint64_t>(static_cast<int64_t>(r.hi[axis]) - r.lo[axis]);
  }

  if (path_cells > 4 * max_cells_per_proxy_) {
    // A long segment would visit more cells than there are likely proxies near it: test all.
    for (std::size_t p = 0; p < moving_ids_.size(); ++p) {
      if (hit(moving_aabbs_[p])) out.push_back(moving_ids_[p]);
    }
    for (std::size_t slot = 0; slot < parked_ids_.size(); ++slot) {
      if ((parked_flags_[slot] & kSlotLive) && hit(parked_aabbs_[slot])) out.push_back(parked_ids_[slot]);
    }
  } else {
    // The walk runs in cell units (cell k spans [k, k + 1)) and in double, with every crossing
    // parameter computed from the origin. The padding covers the float rounding of both the
    // proxies' cell ranges (to_cell) and of the slab test that confirms each candidate: a box
    // that test accepts lies within a few float ulps of the coordinates (times the segment
    // length) of the exact segment, so some cell of its range is within the padding of it.
    const double inv = inv_cell_size_;
    const double o[3] = {origin.x * inv, origin.y * inv, origin.z * inv};
    const double d[3] = {translation.x * inv, translation.y * inv, translation.z * inv};
    double max_abs = 0.0;
    for (int axis = 0; axis < 3; ++axis) {
      max_abs = std::max({max_abs, std::abs(o[axis]), std::abs(o[axis] + d[axis])});
    }
    const double pad = 1.0e-3 + 32.0 * static_cast<double>(std::numeric_limits<float>::epsilon()) * max_abs;
    constexpr double kInf = std::numeric_limits<double>::infinity();

    const auto cell_of = [](double v) {
      if (!(v >= static_cast<double>(kCellMin))) return kCellMin;
      if (v >= static_cast<double>(kCellMax)) return kCellMax;
      return static_cast<int32_t>(std::floor(v));
    };
    // Cells of `axis` that the segment's piece [ta, tb] crosses (padded).
    const auto cell_span = [&](int axis, double ta, double tb, int32_t& k0, int32_t& k1) {
      const double va = o[axis] + ta * d[axis];
      const double vb = o[axis] + tb * d[axis];
      k0 = cell_of(std::min(va, vb) - pad);
      k1 = cell_of(std::max(va, vb) + pad);
    };
    // The part [sa, sb] of the piece [ta, tb] inside cell k of `axis` (padded); the border
    // cells of the clamped range extend to infinity, as to_cell maps everything beyond into them.
    const auto clip_to_cell = [&](int axis, int32_t k, double ta, double tb, double& sa, double& sb) {
      sa = ta;
      sb = tb;
      if (d[axis] == 0.0) return true;  // cell_span already chose the cells around the constant coordinate
      const double lo = k == kCellMin ? -kInf : static_cast<double>(k) - pad;
      const double hi = k == kCellMax ? kInf : static_cast<double>(k) + 1.0 + pad;
      double t0 = (lo - o[axis]) / d[axis];
      double t1 = (hi - o[axis]) / d[axis];
      if (t0 > t1) std::swap(t0, t1);
      sa = std::max(ta, t0);
      sb = std::min(tb, t1);
      return sa <= sb;
    };

    // One visited cell: its run in each sorted tier, by binary search.
    const auto scan_cell = [&](uint64_t key, const std::vector<CellEntry>& entries, const std::vector<Aabb>& entry_boxes,
                               const std::vector<uint32_t>& ids, auto is_current) {
      auto it = std::lower_bound(entries.begin(), entries.end(), key,
                                 [](const CellEntry& e, uint64_t k) { return e.key < k; });
      for (; it != entries.end() && it->key == key; ++it) {
        const auto i = static_cast<std::size_t>(it - entries.begin());
        if (is_current(it->proxy) && hit(entry_boxes[i])) out.push_back(ids[it->proxy]);
      }
    };
    const auto in_grid = [&](uint32_t slot) { return (parked_flags_[slot] & kSlotInGrid) != 0; };
    const auto in_recent = [&](uint32_t slot) { return (parked_flags_[slot] & kSlotInRecent) != 0; };
    const auto visit = [&](int32_t x, int32_t y, int32_t z) {
      const uint64_t key = pack_key(x, y, z);
      scan_cell(key, moving_entries_, moving_entry_boxes_, moving_ids_, [](uint32_t) { return true; });
      scan_cell(key, parked_entries_, parked_entry_boxes_, parked_ids_, in_grid);
      scan_cell(key, recent_entries_, recent_entry_boxes_, parked_ids_, in_recent);
    };

    int32_t x0, x1, y0, y1, z0, z1;
    double ax, bx, ay, by, az, bz;
    cell_span(0, 0.0, 1.0, x0, x1);
    for (int32_t x = x0; x <= x1; ++x) {
      if (!clip_to_cell(0, x, 0.0, 1.0, ax, bx)) continue;
      cell_span(1, ax, bx, y0, y1);
      for (int32_t y = y0; y <= y1; ++y) {
        if (!clip_to_cell(1, y, ax, bx, ay, by)) continue;
        cell_span(2, ay, by, z0, z1);
        for (int32_t z = z0; z <= z1; ++z) {
          if (clip_to_cell(2, z, ay, by, az, bz)) visit(x, y, z);
        }
      }
    }

    for (const uint32_t p : moving_large_) {
      if (hit(moving_aabbs_[p])) out.push_back(moving_ids_[p]);
    }
    for (const uint32_t slot : parked_large_) {
      if (in_grid(slot) && hit(parked_aabbs_[slot])) out.push_back(parked_ids_[slot]);
    }
    for (const uint32_t slot : recent_large_) {
      if (in_recent(slot) && hit(parked_aabbs_[slot])) out.push_back(parked_ids_[slot]);
    }
    // Changes since the last find_pairs: fewer than merge_threshold(), tested linearly.
    for (std::size_t q = recent_begin_; q < parked_queue_.size(); ++q) {
      const uint32_t slot = parked_queue_[q];
      if ((parked_flags_[slot] & kSlotLive) && hit(parked_aabbs_[slot])) out.push_back(parked_ids_[slot]);
    }
  }

  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace impulse::physics
