// Generational slot map with dense packing and swap-remove (seed 000; retire-on-wrap as in Jolt).
#include "server/physics/slotmap.h"

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

}  // namespace impulse::physics
