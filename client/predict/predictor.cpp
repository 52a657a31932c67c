#include "impulse/predict.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

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
    case ShapeKind::Cylinder: return physics::make_cylinder(dims.x, dims.y);
    case ShapeKind::Plane: return physics::make_plane();
    default: return std::nullopt;
  }
}

/// A dynamic body with `desc`'s mass and material (which snapshots do not carry).
void make_dynamic(physics::BodyDesc& b, const ObjectDesc& desc, bool asleep) {
  b.kind = physics::BodyKind::Dynamic;
  b.mass = desc.mass;
  b.friction = desc.friction;
  b.restitution = desc.restitution;
  b.angular_damping = desc.angular_damping;
  b.material = desc.material;
  b.asleep = asleep;
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
  // A body simulated in the local world: a driven one, or a described one in zone 1.
  struct Tracked {
    ObjectID id;
    ObjectDesc desc;
    ObjectID local;               // in `world`; null while not simulated
    Vec3 error_position;          // the correction [m], decaying from error_at
    Quat error_rotation;          // likewise, applied before the prediction's orientation
    TimePoint error_at{};
  };
  struct Driven : Tracked {
    std::optional<Frame> last;    // the last input applied (repeated when a tick has none)
    uint32_t repeats = 0;
  };
  struct Proxy : Tracked {
    std::optional<RelayedInput> input;  // relayed with the last reconciled snapshot
  };
  std::vector<Driven> driven;
  std::vector<Proxy> proxies;     // describe(), in call order
  uint64_t relayed_tick = 0;      // the snapshot tick the proxies' inputs were applied at
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
  Proxy* find_proxy(ObjectID id) {
    for (Proxy& p : proxies) {
      if (p.id == id) return &p;
    }
    return nullptr;
  }
  /// A driven body, or a described one simulated now.
  const Tracked* simulated(ObjectID id) const {
    if (const Driven* d = find(id)) return d;
    for (const Proxy& p : proxies) {
      if (p.id == id && !p.local.is_null()) return &p;
    }
    return nullptr;
  }

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

  /// Another player's relayed input on its proxy at tick t, at the weight its fade leaves.
  void apply_relayed(physics::World& w, const Proxy& p, uint64_t t) {
    if (!p.input || p.local.is_null()) return;
    const double elapsed = t > relayed_tick + 1 ? static_cast<double>(t - relayed_tick - 1) * dt : 0.0;
    const float weight = config.input_fade_s > 0.0
                             ? static_cast<float>(std::clamp(1.0 - elapsed / config.input_fade_s, 0.0, 1.0))
                             : 0.0f;
    if (weight <= 0.0f) return;
    const RelayedInput& in = *p.input;
    const Vec3 zero{};
    if (in.mode == InputMode::Force) {
      if (!(in.linear == zero)) w.apply_force(p.local, in.linear * weight);
      if (!(in.angular == zero)) w.apply_torque(p.local, in.angular * weight);
      return;
    }
    const std::optional<physics::BodyState> s = w.get_object(p.local);
    if (!s || (s->sleeping && in.linear == zero && in.angular == zero)) return;
    // The target velocity blended with the body's own: at weight 0 the body coasts.
    w.set_velocity(p.local, s->velocity + (in.linear - s->velocity) * weight);
    w.set_angular_velocity(p.local, s->angular_velocity + (in.angular - s->angular_velocity) * weight);
  }

  /// One tick of `w` (from `t - 1` to `t`): each driven body's input for t, or its last one
  /// repeated (for at most kMaxRepeatTicks, as the server), the proxies' relayed inputs, then a
  /// step.
  void step(physics::World& w, uint64_t t) {
    for (const Proxy& p : proxies) apply_relayed(w, p, t);
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

void Predictor::describe(ObjectID id, const ObjectDesc& desc) {
  Impl& m = *impl_;
  if (m.find(id) != nullptr) return;
  if (Impl::Proxy* p = m.find_proxy(id)) {
    p->desc = desc;
    return;
  }
  Impl::Proxy p;
  p.id = id;
  p.desc = desc;
  m.proxies.push_back(p);
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

void Predictor::reconcile(uint64_t snapshot_tick, std::span<const ObjectState> objects, TimePoint now,
                          std::span<const RelayedInput> inputs) {
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
  std::vector<std::optional<impulse::Pose>> drawn, proxies_drawn;
  for (const Impl::Driven& d : m.driven) drawn.push_back(pose(d.id, now));
  for (const Impl::Proxy& p : m.proxies) proxies_drawn.push_back(pose(p.id, now));

  // 1. The world at the snapshot's tick: static bodies, the driven bodies, stand-ins near them.
  physics::WorldSettings settings;
  settings.gravity = m.config.gravity;
  auto next = std::make_unique<physics::World>(settings);
  std::vector<Vec3> centres;
  for (const ObjectState& o : objects) {
    if (m.find(o.id) != nullptr) centres.push_back(o.position);
  }
  const float r2 = m.config.neighbour_radius * m.config.neighbour_radius;
  const float e = std::min(m.config.extrapolate_radius, m.config.neighbour_radius);
  const float e2 = e * e;
  std::vector<ObjectID> locals(m.driven.size());
  std::vector<ObjectID> proxy_locals(m.proxies.size());
  std::vector<std::optional<RelayedInput>> proxy_inputs(m.proxies.size());
  uint32_t proxies = 0, proxies_driven = 0, stand_ins = 0, left_out = 0;
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
      make_dynamic(b, d->desc, o.sleeping);
      b.velocity = o.velocity;
      b.angular_velocity = o.angular_velocity;
    } else if (o.kind == BodyKind::Static) {
      b.kind = physics::BodyKind::Static;
    }
    Impl::Proxy* proxy = nullptr;
    if (d == nullptr && o.kind != BodyKind::Static) {
      float nearest = std::numeric_limits<float>::infinity();
      for (const Vec3 c : centres) nearest = std::min(nearest, length_squared(o.position - c));
      Impl::Proxy* described = m.find_proxy(o.id);
      const std::optional<physics::Shape> own = described ? shape_of(described->desc.shape, described->desc.dims)
                                                          : std::nullopt;
      if (own && nearest <= e2 && o.kind == BodyKind::Dynamic) {
        // Zone 1: simulated as on the server, with its exact shape and mass.
        proxy = described;
        b.shape = *own;
        make_dynamic(b, described->desc, o.sleeping);
      } else if (nearest <= r2) {
        b.kind = physics::BodyKind::Kinematic;  // zone 2: a stand-in at its snapshot velocity
        ++stand_ins;
      } else {
        ++left_out;  // zone 3: not simulated
        continue;
      }
      b.velocity = o.velocity;
      b.angular_velocity = o.angular_velocity;
    }
    const physics::CreateResult created = next->create_object(b);
    if (created.error != physics::Error::Ok) continue;
    if (d != nullptr) locals[static_cast<size_t>(d - m.driven.data())] = created.id;
    if (proxy != nullptr) {
      const size_t k = static_cast<size_t>(proxy - m.proxies.data());
      proxy_locals[k] = created.id;
      ++proxies;
      for (const RelayedInput& in : inputs) {
        if (in.id == o.id) proxy_inputs[k] = in;
      }
      proxies_driven += proxy_inputs[k] ? 1u : 0u;
    }
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
  std::vector<ObjectID> saved_locals, saved_proxy_locals;
  std::vector<std::optional<RelayedInput>> saved_proxy_inputs;
  for (size_t i = 0; i < m.driven.size(); ++i) {
    saved_locals.push_back(m.driven[i].local);
    m.driven[i].local = locals[i];
  }
  for (size_t i = 0; i < m.proxies.size(); ++i) {
    saved_proxy_locals.push_back(m.proxies[i].local);
    saved_proxy_inputs.push_back(m.proxies[i].input);
    m.proxies[i].local = proxy_locals[i];
    m.proxies[i].input = proxy_inputs[i];
  }
  const uint64_t saved_relayed_tick = m.relayed_tick;
  m.relayed_tick = snapshot_tick;
  const auto budget = std::chrono::duration<double>(m.config.reconcile_budget_s);
  for (uint64_t t = tick + 1; t <= target; ++t) {
    if (std::chrono::steady_clock::now() - started > budget) {
      // Abandoned: the old prediction stays (and its inputs' repeat state).
      for (size_t i = 0; i < m.driven.size(); ++i) {
        m.driven[i].local = saved_locals[i];
        m.driven[i].last = saved_last[i];
        m.driven[i].repeats = saved_repeats[i];
      }
      for (size_t i = 0; i < m.proxies.size(); ++i) {
        m.proxies[i].local = saved_proxy_locals[i];
        m.proxies[i].input = saved_proxy_inputs[i];
      }
      m.relayed_tick = saved_relayed_tick;
      ++m.stats.over_budget;
      return;
    }
    m.step(*next, t);
    ++m.stats.ticks_replayed;
  }

  // 3. The correction: where the body was drawn, minus where it is now predicted. A proxy that
  //    has just entered zone 1 starts without one (the game drew it from its interpolation).
  const auto correct = [&](Impl::Tracked& t, const std::optional<impulse::Pose>& was, bool own) {
    const std::optional<physics::BodyState> fresh = next->get_object(t.local);
    t.error_position = Vec3{};
    t.error_rotation = Quat{};
    if (!fresh || !was) return;
    const Vec3 jump = was->position - fresh->position;
    if (own) m.stats.max_correction_m = std::max(m.stats.max_correction_m, static_cast<double>(length(jump)));
    t.error_position = jump;
    t.error_rotation = normalize(was->orientation * conjugate(fresh->orientation));
    t.error_at = now;
  };
  for (size_t i = 0; i < m.driven.size(); ++i) correct(m.driven[i], drawn[i], true);
  for (size_t i = 0; i < m.proxies.size(); ++i) correct(m.proxies[i], proxies_drawn[i], false);
  m.stats.proxies = proxies;
  m.stats.proxies_driven = proxies_driven;
  m.stats.stand_ins = stand_ins;
  m.stats.left_out = left_out;
  m.world = std::move(next);
  m.tick = target;
  ++m.stats.reconciliations;
  m.forget_old_inputs();
}

std::optional<impulse::Pose> Predictor::pose(ObjectID id, TimePoint now) const {
  const Impl& m = *impl_;
  const Impl::Tracked* d = m.simulated(id);
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
  const Impl::Tracked* d = m.simulated(id);
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
