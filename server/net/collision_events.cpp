// Collision events of a step as wire rows, with the pair ordered as the wire promises.
#include "server/net/collision_events.h"

namespace impulse::server {

// The casts between physics and wire kinds rely on equal values.
static_assert(static_cast<int>(physics::ShapeKind::Sphere) == static_cast<int>(wire::ShapeKind::Sphere) &&
              static_cast<int>(physics::ShapeKind::Box) == static_cast<int>(wire::ShapeKind::Box) &&
              static_cast<int>(physics::ShapeKind::Capsule) == static_cast<int>(wire::ShapeKind::Capsule) &&
              static_cast<int>(physics::ShapeKind::Plane) == static_cast<int>(wire::ShapeKind::Plane));
static_assert(static_cast<int>(physics::BodyKind::Dynamic) == static_cast<int>(wire::BodyKind::Dynamic) &&
              static_cast<int>(physics::BodyKind::Static) == static_cast<int>(wire::BodyKind::Static) &&
              static_cast<int>(physics::BodyKind::Kinematic) == static_cast<int>(wire::BodyKind::Kinematic));

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
    out->push_back(wire::CollisionEvent(tick, a, b, wire::to_wire(e.point), wire::to_wire(normal), 0, type));
  }
}

}  // namespace impulse::server
