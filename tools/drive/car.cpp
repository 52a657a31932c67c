#include "drive/car.h"

#include <algorithm>
#include <cmath>

namespace impulse::drive {
namespace {

float clamp_control(float v) { return std::isfinite(v) ? std::clamp(v, -1.0f, 1.0f) : 0.0f; }

/// The commanded speed one tick later: the throttle accelerates within its limits, against the
/// motion it brakes, and without throttle the car coasts to a stop.
float next_speed(float speed, float throttle, const CarConfig& c, float dt) {
  const float reverse_max = c.max_speed / 3.0f;
  if (throttle == 0.0f) {
    const float drop = c.coasting * dt;
    return std::fabs(speed) <= drop ? 0.0f : speed - std::copysign(drop, speed);
  }
  const bool braking = speed != 0.0f && (throttle > 0.0f) != (speed > 0.0f);
  const float rate = braking ? c.braking : c.acceleration;
  const float next = speed + throttle * rate * dt;
  // Braking stops at zero rather than reversing in the same tick.
  if (braking && (next > 0.0f) != (speed > 0.0f)) return 0.0f;
  return std::clamp(next, -reverse_max, c.max_speed);
}

}  // namespace

Vec3 forward_of(Quat orientation) {
  const Vec3 f = rotate(orientation, Vec3{0.0f, 0.0f, -1.0f});
  return normalize_or(Vec3{f.x, 0.0f, f.z}, Vec3{0.0f, 0.0f, -1.0f});
}

Car::Car(const CarConfig& config) : config_(config), predictor_(config.predictor) {}

ObjectDesc Car::desc() const {
  ObjectDesc d;
  d.shape = ShapeKind::Box;
  d.dims = config_.half_extents;
  d.position = config_.spawn;
  d.orientation = normalize(quat_from_axis_angle(Vec3{0.0f, 1.0f, 0.0f}, config_.yaw));
  d.mass = config_.mass;
  return d;
}

void Car::created(ObjectID id) {
  id_ = id;
  if (config_.predict) predictor_.drive(id, desc());
}

void Car::snapshot(uint64_t tick, std::span<const ObjectState> objects, TimePoint now,
                   std::span<const RelayedInput> inputs) {
  if (id_.is_null() || tick <= server_tick_) return;
  if (config_.predict && config_.ground_y && !ground_pinned_) {
    for (const ObjectState& o : objects) {
      if (o.kind != BodyKind::Static || o.shape != ShapeKind::Plane) continue;
      if (std::fabs(o.position.y - *config_.ground_y) > 0.01f || rotate(o.orientation, Vec3{0, 1, 0}).y < 0.999f) {
        continue;
      }
      ObjectDesc ground;
      ground.kind = BodyKind::Static;
      ground.shape = ShapeKind::Plane;
      ground.position = {o.position.x, *config_.ground_y, o.position.z};
      predictor_.set_static(o.id, ground);
      ground_pinned_ = true;
    }
  }
  const auto it = std::lower_bound(objects.begin(), objects.end(), id_,
                                   [](const ObjectState& o, ObjectID id) { return o.id < id; });
  if (it == objects.end() || it->id != id_) return;
  if (server_) stats_.distance_m += length(it->position - server_->position);
  server_ = *it;
  server_tick_ = tick;
  ++stats_.snapshots;
  if (!config_.predict) return;
  for (const RelayedInput& in : inputs) {
    const auto other = std::lower_bound(objects.begin(), objects.end(), in.id,
                                        [](const ObjectState& o, ObjectID id) { return o.id < id; });
    if (other == objects.end() || other->id != in.id || other->kind != BodyKind::Dynamic) continue;
    ObjectDesc d = desc();
    d.shape = other->shape;
    d.dims = other->dims;
    predictor_.describe(in.id, d);
  }
  predictor_.reconcile(tick, objects, now, inputs);
}

std::optional<Car::Input> Car::input(uint64_t tick, Controls controls) {
  if (id_.is_null() || tick <= last_tick_) return std::nullopt;
  // The heading and vertical velocity the input builds on: the prediction's, else the server's.
  std::optional<ObjectState> base;
  if (config_.predict) base = predictor_.predicted(id_);
  if (!config_.predict) base = server_;
  if (!base) return std::nullopt;

  const float throttle = clamp_control(controls.throttle);
  const float steer = clamp_control(controls.steer);
  const float dt = 1.0f / static_cast<float>(std::max<uint16_t>(config_.predictor.tick_hz, 1));
  const uint64_t ticks = last_tick_ == 0 ? 1 : std::min<uint64_t>(tick - last_tick_, 60);
  for (uint64_t k = 0; k < ticks; ++k) speed_ = next_speed(speed_, throttle, config_, dt);
  last_tick_ = tick;

  // Steering turns the car only while it rolls, fully from 3 m/s; reversing turns it the other way.
  const float grip = std::min(std::fabs(speed_) / 3.0f, 1.0f);
  const float yaw_rate = steer * config_.max_yaw_rate * grip * (speed_ < 0.0f ? -1.0f : 1.0f);
  Input in;
  in.linear = forward_of(base->orientation) * speed_ + Vec3{0.0f, base->velocity.y, 0.0f};
  in.angular = {0.0f, yaw_rate, 0.0f};
  in.tick = tick;
  ++stats_.inputs;
  if (config_.predict) predictor_.input(id_, InputMode::Velocity, in.linear, in.angular, tick);
  return in;
}

std::optional<Pose> Car::predicted_pose(TimePoint now) const {
  if (!config_.predict || id_.is_null()) return std::nullopt;
  return predictor_.pose(id_, now);
}

}  // namespace impulse::drive
