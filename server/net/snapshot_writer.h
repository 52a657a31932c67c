// Snapshot and collision-event writers: world state -> wire rows -> datagrams of at most
// wire::kMaxDatagramBytes, each built once and queued for every session.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "server/net/outbox.h"
#include "server/net/session_table.h"
#include "server/physics/types.h"
#include "server/physics/world.h"
#include "shared/wire/codec.h"

namespace impulse::server {

/// One wire row for a body: pose (position, orientation local to world), linear and angular
/// velocity, and the shape's dims [m]: sphere (r, r, r) (dims.x is the radius by protocol), box
/// half extents, capsule (radius, half_height, radius), plane (0, 0, 0).
wire::ObjectState to_object_state(const physics::BodyState& body);

/// Replaces *out with a row per live object, in the World's deterministic iteration order.
/// Reuses *out's capacity.
void gather_object_states(const physics::World& world, std::vector<wire::ObjectState>* out);

/// Appends the events of the step that produced `tick`. The wire promises a < b as u64 ids
/// (generation in the high bits), while the World orders pairs by (index, generation); when the
/// two orders disagree the pair is swapped and the normal negated, so it still points from a to b.
void append_collision_events(std::span<const physics::ContactEvent> events, uint64_t tick,
                             std::vector<wire::CollisionEvent>* out);

/// Queues every part of the snapshot of `objects` at `tick` for every session (each part built
/// once). Returns the number of parts (0 when there are no sessions).
uint32_t write_snapshot(uint64_t tick, std::span<const wire::ObjectState> objects, std::span<const Session> sessions,
                        flatbuffers::FlatBufferBuilder& fbb, Outbox& out);

/// Queues `events` for every session, in as many CollisionEvents datagrams as they need, in order.
/// Returns the number of datagrams per session (0 when there are no sessions or no events).
uint32_t write_collision_events(std::span<const wire::CollisionEvent> events, std::span<const Session> sessions,
                                flatbuffers::FlatBufferBuilder& fbb, Outbox& out);

}  // namespace impulse::server
