// Generational slot map with dense packing and swap-remove (slotmap.h; retire-on-wrap as in Jolt).
#include "server/physics/slotmap.h"

#include <utility>

namespace impulse::physics {

SlotMap::SlotMap(uint32_t max_generation) : max_generation_(max_generation < 1 ? 1 : max_generation) {}

ObjectID SlotMap::create() {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    // kNone is reserved as the "no index" marker, so the last usable slot index is kNone - 1.
    if (generations_.size() >= kNone) return ObjectID{};
    slot = static_cast<uint32_t>(generations_.size());
    generations_.push_back(1);
    slot_to_dense_.push_back(kNone);
  }
  slot_to_dense_[slot] = size();
  dense_to_slot_.push_back(slot);
  return ObjectID{slot, generations_[slot]};
}

uint32_t SlotMap::find(ObjectID id) const {
  if (id.index >= generations_.size()) return kNone;
  if (generations_[id.index] != id.generation) return kNone;
  // A retired slot keeps its last generation but has no dense index.
  return slot_to_dense_[id.index];
}

std::optional<SlotMap::Erased> SlotMap::destroy(ObjectID id) {
  const uint32_t hole = find(id);
  if (hole == kNone) return std::nullopt;
  const uint32_t last = size() - 1;
  const uint32_t moved_slot = dense_to_slot_[last];
  dense_to_slot_[hole] = moved_slot;
  slot_to_dense_[moved_slot] = hole;
  dense_to_slot_.pop_back();
  slot_to_dense_[id.index] = kNone;

  if (generations_[id.index] >= max_generation_) {
    // Bumping would wrap to an old generation: retire the slot so no old id can alias.
    ++retired_count_;
  } else {
    ++generations_[id.index];
    free_slots_.push_back(id.index);
  }
  return Erased{hole, last};
}

const char* SlotMap::restore(uint32_t max_generation, std::span<const uint32_t> generations,
                             std::span<const uint32_t> dense_slots, std::span<const uint32_t> free_slots,
                             SlotMap& out) {
  if (max_generation < 1) return "slot map: max_generation must be >= 1";
  if (generations.size() > kNone) return "slot map: more than 2^32 - 1 slots";
  const auto slot_count = static_cast<uint32_t>(generations.size());
  for (const uint32_t g : generations) {
    if (g < 1 || g > max_generation) return "slot map: a generation outside [1, max_generation]";
  }
  if (dense_slots.size() + free_slots.size() > slot_count) return "slot map: more live and free slots than slots";

  enum : uint8_t { kUnseen, kLive, kFree };
  std::vector<uint8_t> seen(slot_count, kUnseen);
  std::vector<uint32_t> slot_to_dense(slot_count, kNone);
  for (uint32_t d = 0; d < dense_slots.size(); ++d) {
    const uint32_t slot = dense_slots[d];
    if (slot >= slot_count) return "slot map: a live slot index out of range";
    if (seen[slot] != kUnseen) return "slot map: a slot is live twice";
    seen[slot] = kLive;
    slot_to_dense[slot] = d;
  }
  for (const uint32_t slot : free_slots) {
    if (slot >= slot_count) return "slot map: a free slot index out of range";
    if (seen[slot] != kUnseen) return "slot map: a free slot is live or free twice";
    seen[slot] = kFree;
  }
  uint32_t retired = 0;
  for (uint32_t slot = 0; slot < slot_count; ++slot) {
    if (seen[slot] != kUnseen) continue;
    // Neither live nor free: destroy() retired it, which it does only at max_generation.
    if (generations[slot] != max_generation) return "slot map: a retired slot below max_generation";
    ++retired;
  }

  SlotMap map(max_generation);
  map.retired_count_ = retired;
  map.generations_.assign(generations.begin(), generations.end());
  map.slot_to_dense_ = std::move(slot_to_dense);
  map.dense_to_slot_.assign(dense_slots.begin(), dense_slots.end());
  map.free_slots_.assign(free_slots.begin(), free_slots.end());
  out = std::move(map);
  return nullptr;
}

}  // namespace impulse::physics
