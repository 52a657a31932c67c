#include "impulse/predict.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "server/physics/world.h"

namespace impulse::predict {
namespace {

using TimePoint = std::chrono::steady_clock::time_point;

/// The server repeats a body's last input this many ticks when none arrives (InputBuffer).
constexpr uint32_t kMaxRepeatTicks = 15;

/// The physics shape of a snapshot entry, or nullopt for an asset (hull, mesh, heightfield), whose
/// geometry the snapshot does not carry.
std::optional<physics::Shape> shape_of(ShapeKind kind, Vec3 dims) {
  switch (kind) {
    case ShapeKind::Sphere: return physics::make_sphere(dims.x);
    case ShapeKind::Box: return physics::make_box(dims);
    case ShapeKind::Capsule: return physics::make_capsule(dims.x, dims.y);
    case ShapeKind::Plane: return physics::make_plane();
    default: return std::nullopt;
  }
}

/// q scaled towards the identity by `t` in [0, 1] (normalised lerp on the short arc).
Quat scale_rotation(Quat q, float t) {
  const float s = q.w < 0.0f ? -1.0f : 1.0f;
  return normalize(Quat{s * q.x * t, s * q.y * t, s * q.z * t, 1.0f + (s * q.w - 1.0f) * t});
}

}  // namespace

struct Predictor::Impl {
  PredictorConfig config;
  float dt = 1.0f / 60.0f;

  struct Frame {
    uint64_t tick = 0;
    ObjectID id;
    InputMode mode = InputMode::Force;
    Vec3 linear;
    Vec3 angular;
  };
  struct Driven {
    ObjectID id;
    ObjectDesc desc;
    ObjectID local;               // in `world`; null until a snapshot held the body
    std::optional<Frame> last;    // the last input applied (repeated when a tick has none)
    uint32_t repeats = 0;
    Vec3 error_position;          // the correction [m], decaying from error_at
    Quat error_rotation;          // likewise, applied before the prediction's orientation
    TimePoint error_at{};
  };
  std::vector<Driven> driven;
  std::vector<std::pair<ObjectID, ObjectDesc>> statics;  // set_static
  std::deque<Frame> history;      // inputs by tick (ascending), for replay
  std::unique_ptr<physics::World> world;
  uint64_t tick = 0;              // the local world's tick
  uint64_t snapshot_tick = 0;
  PredictorStats stats;

  Driven* find(ObjectID id) {
    for (Driven& d : driven) {
      if (d.id == id) return &d;
    }
    return nullptr;
  }
  const Driven* find(ObjectID id) const { return const_cast<Impl*>(this)->find(id); }

  const Frame* frame_for(uint64_t t, ObjectID id) const {
    for (const Frame& f : history) {
      if (f.tick == t && f.id == id) return &f;
    }
    return nullptr;
  }

  void apply(physics::World& w, ObjectID local, const Frame& f) {
    const Vec3 zero{};
    if (f.mode == InputMode::Force) {
      if (!(f.linear == zero)) w.apply_force(local, f.linear);
      if (!(f.angular == zero)) w.apply_torque(local, f.angular);
    } else {
      // As the server: a zero target leaves a sleeping body asleep.
      const bool idle = w.is_asleep(local);
      if (!(idle && f.linear == zero)) w.set_velocity(local, f.linear);
      if (!(idle && f.angular == zero)) w.set_angular_velocity(local, f.angular);
    }
  }

  /// One tick of `w` (from `t - 1` to `t`): each driven body's input for t, or its last one
  /// repeated (for at most kMaxRepeatTicks, as the server), then a step.
  void step(physics::World& w, uint64_t t) {
    for (Driven& d : driven) {
      if (d.local.is_null()) continue;
      if (const Frame* f = frame_for(t, d.id)) {
        d.last = *f;
        d.repeats = 0;
        apply(w, d.local, *f);
      } else if (d.last && d.repeats < kMaxRepeatTicks) {
        ++d.repeats;
        apply(w, d.local, *d.last);
      }
    }
    w.step(dt);
  }

  void forget_old_inputs() {
    while (!history.empty() && history.front().tick + config.max_replay_ticks < tick) history.pop_front();
  }
};

Predictor::Predictor(const PredictorConfig& config) : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  impl_->dt = 1.0f / static_cast<float>(std::max<uint16_t>(config.tick_hz, 1));
}

Predictor::~Predictor() = default;

void Predictor::drive(ObjectID id, const ObjectDesc& desc) {
  Impl& m = *impl_;
  if (m.find(id) != nullptr) return;
  Impl::Driven d;
  d.id = id;
  d.desc = desc;
  m.driven.push_back(d);
}

void Predictor::set_static(ObjectID id, const ObjectDesc& desc) {
  for (auto& [known, d] : impl_->statics) {
    if (known == id) {
      d = desc;
      return;
    }
  }
  impl_->statics.emplace_back(id, desc);
}

void Predictor::advance(uint64_t tick) {
  Impl& m = *impl_;
  if (!m.world) return;
  while (m.tick < tick) m.step(*m.world, ++m.tick);
  m.forget_old_inputs();
}

void Predictor::input(ObjectID id, InputMode mode, Vec3 linear, Vec3 angular, uint64_t tick) {
  Impl& m = *impl_;
  if (m.find(id) == nullptr || (m.world && tick <= m.tick)) return;
  // Ticks skipped since this body's last input repeat it, as ClientCore::send_input sends them.
  const Impl::Frame* previous = nullptr;
  for (auto it = m.history.rbegin(); it != m.history.rend() && previous == nullptr; ++it) {
    if (it->id == id) previous = &*it;
  }
  if (previous != nullptr && previous->tick < tick && tick - previous->tick <= 8) {
    const Impl::Frame fill = *previous;
    for (uint64_t t = fill.tick + 1; t < tick; ++t) {
      Impl::Frame f = fill;
      f.tick = t;
      m.history.push_back(f);
    }
  }
  m.history.push_back(Impl::Frame{tick, id, mode, linear, angular});
  std::stable_sort(m.history.begin(), m.history.end(),
                   [](const Impl::Frame& a, const Impl::Frame& b) { return a.tick < b.tick; });
  advance(tick);
}

void Predictor::reconcile(uint64_t snapshot_tick, std::span<const ObjectState> objects, TimePoint now) {
  Impl& m = *impl_;
  // A snapshot may leave a moving driven body out (its byte budget deferred it): its state is
  // then older than the snapshot, and restarting from it as if it were current would pull the
  // prediction back by the ticks it missed. Restart from the oldest such state's own tick.
  uint64_t tick = snapshot_tick;
  for (const ObjectState& o : objects) {
    if (o.tick != 0 && o.tick < tick && !o.sleeping && m.find(o.id) != nullptr) tick = o.tick;
  }
  if (tick <= m.snapshot_tick) return;
  if (tick != snapshot_tick) ++m.stats.stale_states;
  // Inputs older than max_replay_ticks are gone: a replay from there would be wrong.
  if (m.world && tick + m.config.max_replay_ticks < m.tick) return;
  m.snapshot_tick = tick;
  const auto started = std::chrono::steady_clock::now();
  // Where each driven body is drawn now, before anything changes: the correction starts there.
  std::vector<std::optional<impulse::Pose>> drawn;
  for (const Impl::Driven& d : m.driven) drawn.push_back(pose(d.id, now));

  // 1. The world at the snapshot's tick: static bodies, the driven bodies, stand-ins near them.
  physics::WorldSettings settings;
  settings.gravity = m.config.gravity;
  auto next = std::make_unique<physics::World>(settings);
  std::vector<Vec3> centres;
  for (const ObjectState& o : objects) {
    if (m.find(o.id) != nullptr) centres.push_back(o.position);
  }
  const float r2 = m.config.neighbour_radius * m.config.neighbour_radius;
  std::vector<ObjectID> locals(m.driven.size());
  for (const auto& [id, desc] : m.statics) {
    const std::optional<physics::Shape> shape = shape_of(desc.shape, desc.dims);
    if (!shape) continue;
    physics::BodyDesc b;
    b.kind = physics::BodyKind::Static;
    b.shape = *shape;
    b.position = desc.position;
    b.orientation = normalize(desc.orientation);
    b.friction = desc.friction;
    b.restitution = desc.restitution;
    b.material = desc.material;
    b.sensor = desc.sensor;
    next->create_object(b);
  }
  const auto given = [&](ObjectID id) {
    return std::any_of(m.statics.begin(), m.statics.end(), [&](const auto& s) { return s.first == id; });
  };
  for (const ObjectState& o : objects) {
    Impl::Driven* d = m.find(o.id);
    // A driven body keeps its own exact shape; others come as the snapshot describes them.
    const std::optional<physics::Shape> shape = d ? shape_of(d->desc.shape, d->desc.dims) : shape_of(o.shape, o.dims);
    if (!shape || given(o.id)) continue;
    physics::BodyDesc b;
    b.shape = *shape;
    b.position = o.position;
    b.orientation = o.orientation;
    b.sensor = o.sensor;
    if (d != nullptr) {
      b.kind = physics::BodyKind::Dynamic;
      b.velocity = o.velocity;
      b.angular_velocity = o.angular_velocity;
      b.mass = d->desc.mass;
      b.friction = d->desc.friction;
      b.restitution = d->desc.restitution;
      b.angular_damping = d->desc.angular_damping;
      b.material = d->desc.material;
      b.asleep = o.sleeping;
    } else if (o.kind == BodyKind::Static) {
      b.kind = physics::BodyKind::Static;
    } else {
      const bool near = std::any_of(centres.begin(), centres.end(),
                                    [&](Vec3 c) { return length_squared(o.position - c) <= r2; });
      if (!near) continue;  // the far zone: not simulated
      b.kind = physics::BodyKind::Kinematic;
      b.velocity = o.velocity;
      b.angular_velocity = o.angular_velocity;
    }
    const physics::CreateResult created = next->create_object(b);
    if (created.error != physics::Error::Ok) continue;
    if (d != nullptr) locals[static_cast<size_t>(d - m.driven.data())] = created.id;
  }

  // 2. Replay the inputs after the snapshot up to the local tick, within the time budget.
  const uint64_t target = std::max(m.tick, tick);
  std::vector<std::optional<Impl::Frame>> saved_last;
  std::vector<uint32_t> saved_repeats;
  for (Impl::Driven& d : m.driven) {
    saved_last.push_back(d.last);
    saved_repeats.push_back(d.repeats);
    d.last.reset();
    d.repeats = 0;
  }
  std::vector<ObjectID> saved_locals;
  for (size_t i = 0; i < m.driven.size(); ++i) {
    saved_locals.push_back(m.driven[i].local);
    m.driven[i].local = locals[i];
  }
  const auto budget = std::chrono::duration<double>(m.config.reconcile_budget_s);
  for (uint64_t t = tick + 1; t <= target; ++t) {
    if (std::chrono::steady_clock::now() - started > budget) {
      // Abandoned: the old prediction stays (and its inputs' repeat state).
      for (size_t i = 0; i < m.driven.size(); ++i) {
        m.driven[i].local = saved_locals[i];
        m.driven[i].last = saved_last[i];
        m.driven[i].repeats = saved_repeats[i];
      }
      ++m.stats.over_budget;
      return;
    }
    m.step(*next, t);
    ++m.stats.ticks_replayed;
  }

  // 3. The correction: where the body was drawn, minus where it is now predicted.
  for (size_t i = 0; i < m.driven.size(); ++i) {
    Impl::Driven& d = m.driven[i];
    const std::optional<physics::BodyState> fresh = next->get_object(d.local);
    if (!fresh) continue;
    if (drawn[i]) {
      // Where it was drawn at `now`, relative to the new prediction, is the new correction.
      const Vec3 jump = drawn[i]->position - fresh->position;
      m.stats.max_correction_m = std::max(m.stats.max_correction_m, static_cast<double>(length(jump)));
      d.error_position = jump;
      d.error_rotation = normalize(drawn[i]->orientation * conjugate(fresh->orientation));
      d.error_at = now;
    }
  }
  m.world = std::move(next);
  m.tick = target;
  ++m.stats.reconciliations;
  m.forget_old_inputs();
}

std::optional<impulse::Pose> Predictor::pose(ObjectID id, TimePoint now) const {
  const Impl& m = *impl_;
  const Impl::Driven* d = m.find(id);
  if (d == nullptr || !m.world || d->local.is_null()) return std::nullopt;
  const std::optional<physics::BodyState> s = m.world->get_object(d->local);
  if (!s) return std::nullopt;
  const double age = std::max(0.0, std::chrono::duration<double>(now - d->error_at).count());
  const float keep = static_cast<float>(std::exp2(-age / m.config.correction_half_life_s));
  impulse::Pose p;
  p.position = s->position + d->error_position * keep;
  p.orientation = normalize(scale_rotation(d->error_rotation, keep) * s->orientation);
  return p;
}

std::optional<ObjectState> Predictor::predicted(ObjectID id) const {
  const Impl& m = *impl_;
  const Impl::Driven* d = m.find(id);
  if (d == nullptr || !m.world || d->local.is_null()) return std::nullopt;
  const std::optional<physics::BodyState> s = m.world->get_object(d->local);
  if (!s) return std::nullopt;
  ObjectState o;
  o.id = id;
  o.position = s->position;
  o.orientation = s->orientation;
  o.velocity = s->velocity;
  o.angular_velocity = s->angular_velocity;
  o.kind = BodyKind::Dynamic;
  o.shape = d->desc.shape;
  o.dims = d->desc.dims;
  o.sleeping = s->sleeping;
  return o;
}

uint64_t Predictor::local_tick() const { return impl_->world ? impl_->tick : 0; }
const PredictorStats& Predictor::stats() const { return impl_->stats; }

}  // namespace impulse::predict
