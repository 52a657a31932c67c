// ObjectID: the generational index that names an object everywhere (the handle of the physics
// world's generational slot map, server/physics/slotmap.h).
#pragma once

#include <compare>
#include <cstdint>

namespace impulse {

/// Handle to an object in a World: a slot index plus the generation of that slot.
/// Generations start at 1, so a default-constructed ObjectID{} is never live.
/// A stale id (its slot was destroyed, whether or not it was reused) is rejected by every API.
/// Wire form: one u64, generation in the high 32 bits, index in the low 32 bits.
struct ObjectID {
  uint32_t index = 0;
  uint32_t generation = 0;

  constexpr bool is_null() const { return generation == 0; }
  friend constexpr bool operator==(ObjectID, ObjectID) = default;
  friend constexpr auto operator<=>(ObjectID, ObjectID) = default;
};

/// Packs an id into its u64 wire form.
constexpr uint64_t to_wire(ObjectID id) {
  return (static_cast<uint64_t>(id.generation) << 32) | id.index;
}

/// Unpacks the u64 wire form. Any value decodes; validity is decided by the World.
constexpr ObjectID from_wire(uint64_t bits) {
  return ObjectID{static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)};
}

}  // namespace impulse
