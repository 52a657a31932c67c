// Collision events as wire rows (the per-client delta snapshots are server/net/snapshot_sender.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "server/physics/types.h"
#include "server/physics/world.h"
#include "shared/wire/codec.h"

namespace impulse::server {

/// Appends the events of the step that produced `tick`. The wire promises a < b as u64 ids
/// (generation in the high bits), while the World orders pairs by (index, generation); when the
/// two orders disagree the pair is swapped and the normal negated, so it still points from a to b.
/// Each row's sequence is 0; the session's EventChannel stamps it.
void append_collision_events(std::span<const physics::ContactEvent> events, uint64_t tick,
                             std::vector<wire::CollisionEvent>* out);

}  // namespace impulse::server
