// Generational slot map with a dense index ("sparse set"), with the dense packing and swap-remove
// of Box2D v3's id pool / EnTT's sparse set and Jolt's retire-on-wrap ids.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "shared/object_id.h"

namespace impulse::physics {

/// Allocates ObjectIDs and maps them to dense indices 0..size()-1, so that the caller can keep
/// body data in packed columns (one element per live object, no holes).
///
/// - Generations start at 1: ObjectID{} (generation 0) is never live.
/// - Destroying an object bumps its slot's generation, so every id naming the old object is
///   stale from then on, even after the slot is reused. A slot whose generation would pass
///   max_generation is retired instead: it is never reused, so no id can ever alias.
/// - create() appends at dense index size(); destroy() swap-removes: the last dense element moves
///   into the hole. The caller applies the same move to its columns (see Erased). The resulting
///   order depends only on the sequence of operations, never on addresses.
/// - Free slots are reused last-in first-out.
///
/// All operations are O(1) (amortised for create). Iterating the live set is O(live):
/// for d in [0, size()): id_at(d).
class SlotMap {
 public:
  /// Marks "no dense index" (a free or retired slot) and the largest slot index never handed out.
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  /// @param max_generation  the largest generation a slot may reach before it is retired; values
  ///                        below 1 are treated as 1 (every slot is used once). Tests pass a small
  ///                        value to exercise wrap-around.
  explicit SlotMap(uint32_t max_generation = std::numeric_limits<uint32_t>::max());

  /// Allocates a slot for a new object, whose dense index is the old size(). Returns a null id
  /// (ObjectID{}) only when all 2^32 - 1 slot indices have been handed out and retired.
  ObjectID create();

  /// The dense index of a live id, or kNone for a null, stale, forged or out-of-range id. O(1).
  uint32_t find(ObjectID id) const;
  /// True when id names a live object.
  bool contains(ObjectID id) const { return find(id) != kNone; }

  /// What destroy() did to the dense order: the element at dense index `last` (the old last
  /// element) moved to `hole`, then the array shrank by one. hole == last when the destroyed
  /// object was the last element (nothing moved).
  struct Erased {
    uint32_t hole;
    uint32_t last;
  };
  /// Destroys a live object. Returns nullopt (nothing changed) for an id that is not live.
  std::optional<Erased> destroy(ObjectID id);

  /// Live objects.
  uint32_t size() const { return static_cast<uint32_t>(dense_to_slot_.size()); }
  /// The id of the object at dense index `dense` < size().
  ObjectID id_at(uint32_t dense) const {
    const uint32_t slot = dense_to_slot_[dense];
    return ObjectID{slot, generations_[slot]};
  }
  /// The slot index of the object at dense index `dense` < size().
  uint32_t slot_at(uint32_t dense) const { return dense_to_slot_[dense]; }
  /// The dense index of the live object in `slot`, or kNone (free, retired or out of range).
  uint32_t dense_of_slot(uint32_t slot) const {
    return slot < slot_to_dense_.size() ? slot_to_dense_[slot] : kNone;
  }
  /// Slot indices of the live objects in dense order; shape [size()].
  std::span<const uint32_t> dense_slots() const { return dense_to_slot_; }

  /// Slots ever allocated (live + free + retired); slot indices are below this.
  uint32_t slot_count() const { return static_cast<uint32_t>(generations_.size()); }
  /// Slots waiting on the free list.
  uint32_t free_count() const { return static_cast<uint32_t>(free_slots_.size()); }
  /// Slots retired because their generation reached max_generation.
  uint32_t retired_count() const { return retired_count_; }
  uint32_t max_generation() const { return max_generation_; }

  // --- Save and restore (World::save_state / restore_state) --------------------------------------
  /// Generation of every slot ever allocated, by slot index; shape [slot_count()]. With
  /// dense_slots(), free_slots() and max_generation() this is the map's whole state.
  std::span<const uint32_t> generations() const { return generations_; }
  /// The free list, bottom first: the next create() reuses its last element; shape [free_count()].
  std::span<const uint32_t> free_slots() const { return free_slots_; }
  /// Rebuilds a map from the parts listed above, so that it hands out exactly the ids the saved
  /// map would have. Checks every invariant: max_generation >= 1; at most kNone slots; every
  /// generation in [1, max_generation]; dense and free slots in range, each slot live or free at
  /// most once; every other slot (retired) at max_generation. The parts may come from a file.
  /// @return nullptr and `out` replaced, or a one-line reason and `out` untouched.
  static const char* restore(uint32_t max_generation, std::span<const uint32_t> generations,
                             std::span<const uint32_t> dense_slots, std::span<const uint32_t> free_slots,
                             SlotMap& out);

 private:
  uint32_t max_generation_;
  uint32_t retired_count_ = 0;
  std::vector<uint32_t> generations_;    // per slot: current generation (>= 1)
  std::vector<uint32_t> slot_to_dense_;  // per slot: dense index, kNone when free or retired
  std::vector<uint32_t> dense_to_slot_;  // per dense index: its slot
  std::vector<uint32_t> free_slots_;     // LIFO stack of reusable slots
};

}  // namespace impulse::physics
