// Snapshot writer: full-state snapshots split into parts sized from the measured per-datagram
// overhead (wire::plan_snapshot), in the style of Fiedler's "Snapshot Interpolation" (Gaffer on
// Games, 2014) before delta compression; collision events batched per datagram.
#include "server/net/snapshot_writer.h"

namespace impulse::server {

wire::ObjectState to_object_state(const physics::BodyState& body) {
  const bool sphere = body.shape.kind == physics::ShapeKind::Sphere;
  const Vec3 dims = sphere ? Vec3{body.shape.radius, body.shape.radius, body.shape.radius} : body.shape.half_extents;
  return wire::ObjectState(impulse::to_wire(body.id), wire::to_wire(body.position), wire::to_wire(body.velocity),
                           wire::to_wire(dims), static_cast<wire::BodyKind>(body.kind),
                           sphere ? wire::ShapeKind::Sphere : wire::ShapeKind::Box, body.sleeping);
}

void gather_object_states(const physics::World& world, std::vector<wire::ObjectState>* out) {
  out->clear();
  world.for_each_object([out](const physics::BodyState& body) { out->push_back(to_object_state(body)); });
}

void append_collision_events(std::span<const physics::ContactEvent> events, uint64_t tick,
                             std::vector<wire::CollisionEvent>* out) {
  for (const physics::ContactEvent& e : events) {
    uint64_t a = impulse::to_wire(e.a);
    uint64_t b = impulse::to_wire(e.b);
    Vec3 normal = e.normal;
    if (a > b) {
      std::swap(a, b);
      normal = -normal;
    }
    const auto type = e.type == physics::ContactEventType::Begin ? wire::ContactEventType::Begin
                                                                 : wire::ContactEventType::End;
    out->push_back(wire::CollisionEvent(tick, a, b, wire::to_wire(e.point), wire::to_wire(normal), type));
  }
}

uint32_t write_snapshot(uint64_t tick, std::span<const wire::ObjectState> objects, std::span<const Session> sessions,
                        flatbuffers::FlatBufferBuilder& fbb, Outbox& out) {
  if (sessions.empty()) return 0;
  const wire::SnapshotPlan plan = wire::plan_snapshot(objects.size());
  for (uint16_t part = 0; part < plan.part_count; ++part) {
    const Payload payload = out.store(wire::build_snapshot_part(fbb, tick, objects, plan, part));
    for (const Session& s : sessions) out.push(s.endpoint, payload);
  }
  return plan.part_count;
}

uint32_t write_collision_events(std::span<const wire::CollisionEvent> events, std::span<const Session> sessions,
                                flatbuffers::FlatBufferBuilder& fbb, Outbox& out) {
  if (sessions.empty() || events.empty()) return 0;
  const size_t per_datagram = wire::collision_events_per_datagram();
  uint32_t datagrams = 0;
  for (size_t first = 0; first < events.size(); first += per_datagram) {
    const size_t count = std::min(per_datagram, events.size() - first);
    const Payload payload = out.store(wire::build_collision_events(fbb, events.subspan(first, count)));
    for (const Session& s : sessions) out.push(s.endpoint, payload);
    ++datagrams;
  }
  return datagrams;
}

}  // namespace impulse::server
