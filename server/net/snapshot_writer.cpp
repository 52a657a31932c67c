// Snapshot writer: full-state snapshots split into parts sized from the measured per-datagram
// overhead (wire::plan_snapshot), in the style of Fiedler's "Snapshot Interpolation" (Gaffer on
// Games, 2014) before delta compression; collision events batched per datagram.
#include "server/net/snapshot_writer.h"

namespace impulse::server {

// The casts between physics and wire kinds rely on equal values.
static_assert(static_cast<int>(physics::ShapeKind::Sphere) == static_cast<int>(wire::ShapeKind::Sphere) &&
              static_cast<int>(physics::ShapeKind::Box) == static_cast<int>(wire::ShapeKind::Box) &&
              static_cast<int>(physics::ShapeKind::Capsule) == static_cast<int>(wire::ShapeKind::Capsule) &&
              static_cast<int>(physics::ShapeKind::Plane) == static_cast<int>(wire::ShapeKind::Plane));
static_assert(static_cast<int>(physics::BodyKind::Dynamic) == static_cast<int>(wire::BodyKind::Dynamic) &&
              static_cast<int>(physics::BodyKind::Static) == static_cast<int>(wire::BodyKind::Static) &&
              static_cast<int>(physics::BodyKind::Kinematic) == static_cast<int>(wire::BodyKind::Kinematic));

namespace {

// The wire dims of a shape, as CreateObject takes them (see to_object_state's docstring).
Vec3 wire_dims(const physics::Shape& shape) {
  switch (shape.kind) {
    case physics::ShapeKind::Sphere: return {shape.radius, shape.radius, shape.radius};
    case physics::ShapeKind::Box: return shape.half_extents;
    case physics::ShapeKind::Capsule: return {shape.radius, shape.half_height, shape.radius};
    case physics::ShapeKind::Plane:
    case physics::ShapeKind::Count: break;
  }
  return {};
}

}  // namespace

wire::ObjectState to_object_state(const physics::BodyState& body) {
  // physics::ShapeKind and wire::ShapeKind share their values (0..3), as do the body kinds.
  return wire::ObjectState(impulse::to_wire(body.id), wire::to_wire(body.position), wire::to_wire(body.velocity),
                           wire::to_wire(wire_dims(body.shape)), wire::to_wire(body.orientation),
                           wire::to_wire(body.angular_velocity), static_cast<wire::BodyKind>(body.kind),
                           static_cast<wire::ShapeKind>(body.shape.kind), body.sleeping, body.sensor);
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
