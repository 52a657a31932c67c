// Per-client snapshot sender: delta against the newest acked baseline per object and a priority
// accumulator filling the byte budget (Glenn Fiedler, "Snapshot Compression" and "State
// Synchronization", gafferongames.com, 2015); relevancy with hysteresis and per-entity baselines
// as in Unity Netcode for Entities.
#include "server/net/snapshot_sender.h"

#include <algorithm>
#include <bit>
#include <atomic>
#include <cassert>
#include <cmath>

namespace impulse::server {

// Entry records carry the wire kinds; the physics enums share their values.
static_assert(static_cast<int>(physics::ShapeKind::Sphere) == static_cast<int>(wire::ShapeKind::Sphere) &&
              static_cast<int>(physics::ShapeKind::Box) == static_cast<int>(wire::ShapeKind::Box) &&
              static_cast<int>(physics::ShapeKind::Capsule) == static_cast<int>(wire::ShapeKind::Capsule) &&
              static_cast<int>(physics::ShapeKind::Plane) == static_cast<int>(wire::ShapeKind::Plane) &&
              static_cast<int>(physics::ShapeKind::Hull) == static_cast<int>(wire::ShapeKind::Hull) &&
              static_cast<int>(physics::ShapeKind::Mesh) == static_cast<int>(wire::ShapeKind::Mesh) &&
              static_cast<int>(physics::ShapeKind::HeightField) == static_cast<int>(wire::ShapeKind::HeightField) &&
              static_cast<int>(physics::ShapeKind::Cylinder) == static_cast<int>(wire::ShapeKind::Cylinder));
static_assert(static_cast<int>(physics::BodyKind::Dynamic) == static_cast<int>(wire::BodyKind::Dynamic) &&
              static_cast<int>(physics::BodyKind::Static) == static_cast<int>(wire::BodyKind::Static) &&
              static_cast<int>(physics::BodyKind::Kinematic) == static_cast<int>(wire::BodyKind::Kinematic));

namespace {

// Serial-number comparisons (RFC 1982) of 32-bit packet sequences.
bool sequence_at_or_after(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }
bool sequence_after(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

// The wire dims of a shape, as CreateObject takes them.
Vec3 wire_dims(const physics::Shape& shape) {
  switch (shape.kind) {
    case physics::ShapeKind::Sphere: return {shape.radius, shape.radius, shape.radius};
    case physics::ShapeKind::Box: return shape.half_extents;
    case physics::ShapeKind::Capsule:
    case physics::ShapeKind::Cylinder: return {shape.radius, shape.half_height, shape.radius};
    case physics::ShapeKind::Hull:  // its bounding half extents; the asset id says the rest
    case physics::ShapeKind::Mesh:
    case physics::ShapeKind::HeightField: return shape.half_extents;
    case physics::ShapeKind::Plane:
    case physics::ShapeKind::Count: break;
  }
  return {};
}

bool finite_at_least(float v, float lo) { return std::isfinite(v) && v >= lo; }

// After this many candidates in a row that did not fit, the payload is considered full: bounds
// the work of a write when thousands of records are due.
constexpr uint32_t kMaxMissesInARow = 64;

void sort_rows_by_index(SnapshotSource* out);

}  // namespace

void build_snapshot_source(const physics::World& world, const wire::QuantizationConfig& config, SnapshotSource* out,
                           const WorkerPool* pool) {
  const wire::QuantizationLimits limits = wire::derive_limits(config);
  const uint32_t n = world.object_count();
  out->tick = world.tick();
  out->ids.resize(n);
  out->states.resize(n);
  out->positions.resize(n);
  out->speeds.resize(n);
  out->descs.resize(n);
  out->representable.resize(n);
  // Row r is the world's r-th object, written only by the chunk that holds r: the same rows
  // whatever the thread count.
  auto fill = [&](uint32_t r, const physics::BodyState& b) {
    const bool at_rest = b.sleeping || b.kind == physics::BodyKind::Static;
    out->ids[r] = b.id;
    out->states[r] = wire::quantize_state(b.position, b.orientation, b.velocity, b.angular_velocity, at_rest, config, limits);
    out->positions[r] = b.position;
    out->speeds[r] = at_rest ? 0.0f : length(b.velocity);
    out->descs[r] = wire::ObjectDescription{static_cast<wire::BodyKind>(b.kind), static_cast<wire::ShapeKind>(b.shape.kind), wire_dims(b.shape), b.sensor,
                                            static_cast<uint16_t>(world.asset_id(b.shape))};
    out->representable[r] = wire::is_representable(b.position, config) && b.id.index < wire::kMaxSnapshotObjectIndex;
  };
  constexpr uint32_t kRowsPerChunk = 1024;
  const uint32_t chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
  auto fill_chunk = [&](size_t c) {
    const auto first = static_cast<uint32_t>(c) * kRowsPerChunk;
    world.for_each_object_in(first, std::min(n, first + kRowsPerChunk), fill);
  };
  if (pool != nullptr) {
    pool->for_each(chunks, fill_chunk);
  } else {
    for (uint32_t c = 0; c < chunks; ++c) fill_chunk(c);
  }
  bool sorted = true;
  for (uint32_t r = 1; r < n && sorted; ++r) sorted = out->ids[r - 1].index < out->ids[r].index;
  if (!sorted) sort_rows_by_index(out);
  index_snapshot_source(out);
}

void index_snapshot_source(SnapshotSource* src) {
  static std::atomic<uint64_t> next_lineage{1};
  if (src->lineage == 0) src->lineage = next_lineage.fetch_add(1, std::memory_order_relaxed);
  ++src->build;
  const size_t n = src->ids.size();
  const size_t m = std::max(src->row_of_index.size(), n == 0 ? size_t{0} : size_t{src->ids[n - 1].index} + 1);
  src->row_of_index.assign(m, SnapshotSource::kNoRow);
  src->changed_build.resize(m, 0);
  src->previous_ids.resize(m);
  src->previous_states.resize(m);
  src->previous_representable.resize(m, 0);
  for (size_t r = 0; r < n; ++r) src->row_of_index[src->ids[r].index] = static_cast<uint32_t>(r);
  for (size_t i = 0; i < m; ++i) {
    const uint32_t r = src->row_of_index[i];
    const ObjectID id = r == SnapshotSource::kNoRow ? ObjectID{} : src->ids[r];
    const wire::QuantizedState state = r == SnapshotSource::kNoRow ? wire::QuantizedState{} : src->states[r];
    const uint8_t representable = r == SnapshotSource::kNoRow ? 0 : src->representable[r];
    if (id != src->previous_ids[i] || !(state == src->previous_states[i]) ||
        representable != src->previous_representable[i]) {
      src->changed_build[i] = src->build;
      src->previous_ids[i] = id;
      src->previous_states[i] = state;
      src->previous_representable[i] = representable;
    }
  }
  src->cell_rows.clear();
  for (size_t r = 0; r < n; ++r) {
    if (src->representable[r] == 0) continue;
    const Vec3 p = src->positions[r];
    src->cell_rows.push_back(
        SnapshotSource::CellRow{SnapshotSource::cell_key(SnapshotSource::cell_of(p.x), SnapshotSource::cell_of(p.z)),
                                static_cast<uint32_t>(r), src->ids[r].index,
                                src->changed_build[src->ids[r].index]});
  }
  std::sort(src->cell_rows.begin(), src->cell_rows.end(), [](const SnapshotSource::CellRow& a, const SnapshotSource::CellRow& b) {
    return a.cell != b.cell ? a.cell < b.cell : a.row < b.row;
  });
}

namespace {

// The World iterates in storage order; reorder every row column by index with one permutation
// applied in place, cycle by cycle (row k takes the old row perm[k]).
void sort_rows_by_index(SnapshotSource* out) {

  const size_t n = out->ids.size();
  std::vector<uint32_t>& perm = out->scratch;
  perm.resize(n);
  for (size_t i = 0; i < n; ++i) perm[i] = static_cast<uint32_t>(i);
  std::sort(perm.begin(), perm.end(), [&](uint32_t a, uint32_t b) { return out->ids[a].index < out->ids[b].index; });
  for (size_t i = 0; i < n; ++i) {
    size_t current = i;
    while (perm[current] != i) {
      const size_t next = perm[current];
      std::swap(out->ids[current], out->ids[next]);
      std::swap(out->states[current], out->states[next]);
      std::swap(out->positions[current], out->positions[next]);
      std::swap(out->speeds[current], out->speeds[next]);
      std::swap(out->descs[current], out->descs[next]);
      std::swap(out->representable[current], out->representable[next]);
      perm[current] = static_cast<uint32_t>(current);
      current = next;
    }
    perm[current] = static_cast<uint32_t>(current);
  }
}

}  // namespace

int32_t SnapshotSource::cell_of(float v) {
  constexpr float kLimit = 1.0e9f;  // cells; far beyond any world bound, and exact in float
  const float c = std::floor(v / kCellM);
  if (!(c > -kLimit)) return static_cast<int32_t>(-kLimit);  // NaN lands here too
  if (c > kLimit) return static_cast<int32_t>(kLimit);
  return static_cast<int32_t>(c);
}

uint64_t SnapshotSource::cell_key(int32_t cx, int32_t cz) {
  // Offset to unsigned so keys sort by (cx, cz).
  return (uint64_t{static_cast<uint32_t>(cx) ^ 0x80000000u} << 32) | (static_cast<uint32_t>(cz) ^ 0x80000000u);
}

InterestArea InterestArea::sphere(Vec3 center, float radius) {
  InterestArea a;
  a.kind = Kind::Sphere;
  a.center = center;
  a.radius = radius;
  return a;
}

InterestArea InterestArea::box(Vec3 min, Vec3 max) {
  InterestArea a;
  a.kind = Kind::Box;
  a.min = min;
  a.max = max;
  return a;
}

bool is_valid(const InterestArea& area) {
  switch (area.kind) {
    case InterestArea::Kind::All: return true;
    case InterestArea::Kind::Sphere: return is_finite(area.center) && finite_at_least(area.radius, 0.0f);
    case InterestArea::Kind::Box:
      return is_finite(area.min) && is_finite(area.max) && area.min.x <= area.max.x && area.min.y <= area.max.y &&
             area.min.z <= area.max.z;
  }
  return false;
}

float distance_outside(const InterestArea& area, Vec3 p) {
  switch (area.kind) {
    case InterestArea::Kind::All: return 0.0f;
    case InterestArea::Kind::Sphere: return std::max(0.0f, length(p - area.center) - area.radius);
    case InterestArea::Kind::Box: {
      const Vec3 below = max(area.min - p, Vec3{});
      const Vec3 above = max(p - area.max, Vec3{});
      return length(below + above);
    }
  }
  return 0.0f;
}

bool SnapshotSenderConfig::validate(std::string* error) const {
  if (!quant.validate(error)) return false;
  const char* message = nullptr;
  if (!finite_at_least(hysteresis_m, 0.0f)) message = "snapshot sender: hysteresis_m must be finite and >= 0";
  else if (!(std::isfinite(priority_base) && priority_base > 0.0f))
    message = "snapshot sender: priority_base must be finite and > 0";
  else if (!finite_at_least(priority_per_speed, 0.0f))
    message = "snapshot sender: priority_per_speed must be finite and >= 0";
  else if (!finite_at_least(priority_near, 0.0f)) message = "snapshot sender: priority_near must be finite and >= 0";
  else if (!(std::isfinite(priority_distance_scale_m) && priority_distance_scale_m > 0.0f))
    message = "snapshot sender: priority_distance_scale_m must be finite and > 0";
  if (message == nullptr) return true;
  if (error != nullptr) *error = message;
  return false;
}

SnapshotSender::SnapshotSender(const SnapshotSenderConfig& config) : config_(config) {
  if (!config_.validate(nullptr)) config_ = SnapshotSenderConfig{};
  limits_ = wire::derive_limits(config_.quant);
}

bool SnapshotSender::set_interest(const InterestArea& area) {
  if (!is_valid(area)) return false;
  area_ = area;
  visit_all_ = true;
  return true;
}

void SnapshotSender::reset() {
  std::fill(tracks_.begin(), tracks_.end(), Track{});
  visit_all_ = true;
  pending_.clear();
  acked_.clear();
  held_.clear();
  for (SentPacket& p : sent_) {
    p.pending = false;
    p.items.clear();
  }
}

void SnapshotSender::begin_exit(Track& t, uint32_t sequence) {
  t.exit_pending = 1;
  t.exit_sequence = sequence;
  t.baseline_valid = 0;
  t.epoch_sequence = sequence;
  t.priority = 0.0f;
}

float SnapshotSender::priority_gain(const SnapshotSource& source, uint32_t row) const {
  float gain = config_.priority_base +
               config_.priority_per_speed * std::min(source.speeds[row], config_.quant.max_linear_speed);
  if (area_.kind != InterestArea::Kind::All) {
    const Vec3 focus = area_.kind == InterestArea::Kind::Sphere ? area_.center : (area_.min + area_.max) * 0.5f;
    const float scale = config_.priority_distance_scale_m;
    gain += config_.priority_near * scale / (scale + length(source.positions[row] - focus));
  }
  return gain;
}

wire::SnapshotRecord SnapshotSender::make_record(const SnapshotSource& source, const Candidate& c,
                                                 uint32_t sequence) const {
  wire::SnapshotRecord r;
  r.kind = c.kind;
  r.id.index = c.index;
  if (c.kind == wire::RecordKind::Exit) return r;
  const Track& t = tracks_[c.index];
  r.id = source.ids[c.row];
  r.state = source.states[c.row];
  if (c.kind == wire::RecordKind::Entry) {
    r.desc = source.descs[c.row];
  } else {
    r.baseline = t.baseline;
    r.baseline_distance = sequence - t.baseline_sequence;
  }
  return r;
}

bool SnapshotSender::visit(const SnapshotSource& source, uint32_t index, uint32_t sequence) {
  Track& t = tracks_[index];
  const uint32_t r = index < source.row_of_index.size() ? source.row_of_index[index] : SnapshotSource::kNoRow;
  const bool present = r != SnapshotSource::kNoRow;
  const ObjectID id = present ? source.ids[r] : ObjectID{};

  if (t.generation != id.generation) {  // destroyed, created, or a new generation at this index
    if (t.held_generation != 0 && !t.exit_pending) begin_exit(t, sequence);
    t.generation = id.generation;
    t.relevant = 0;
    t.baseline_valid = 0;
    t.epoch_sequence = sequence;
    t.priority = 0.0f;
  }
  bool relevant = false;
  if (present && source.representable[r] != 0) {
    const float outside = distance_outside(area_, source.positions[r]);
    relevant = t.relevant != 0 ? outside <= config_.hysteresis_m : outside <= 0.0f;
  }
  if (t.relevant != 0 && !relevant && t.held_generation != 0 && !t.exit_pending) begin_exit(t, sequence);
  if (relevant && t.exit_pending && t.held_generation == id.generation) t.exit_pending = 0;  // re-entry cancels the exit
  t.relevant = relevant ? 1 : 0;

  if (!relevant) {
    t.priority = 0.0f;
    if (!t.exit_pending) return false;
    candidates_.push_back(Candidate{index, 0, 0.0f, 1, wire::RecordKind::Exit});
    return true;
  }
  // The client has it: costs nothing. Equal to the baseline is not enough while a later send of
  // another state may be in flight or arrived unacked: the client shows what it received last.
  if (t.baseline_valid && t.baseline == source.states[r] && !sent_other_than_baseline(t, index)) {
    t.priority = 0.0f;
    return false;
  }
  t.priority += priority_gain(source, r);
  const uint32_t distance = sequence - t.baseline_sequence;
  const bool delta_ok = t.baseline_valid && t.sends_since_baseline < wire::kSnapshotBaselineWindow &&
                        distance >= 1 && distance <= wire::kMaxBaselineDistance;
  // With an exit pending here this entry replaces another object the client may show: urgent.
  candidates_.push_back(Candidate{index, r, t.priority, static_cast<uint8_t>(t.exit_pending),
                                  delta_ok ? wire::RecordKind::Delta : wire::RecordKind::Entry});
  return true;
}

bool SnapshotSender::sent_other_than_baseline(const Track& t, uint32_t index) const {
  if (t.sends_since_baseline == 0) return false;
  if (t.sends_since_baseline > kSentPacketHistory) return true;  // some are no longer on record
  uint32_t found = 0;
  for (const SentPacket& packet : sent_) {
    if (!sequence_after(packet.sequence, t.baseline_sequence)) continue;
    // A packet's items are in index order (step 3 encodes in index order).
    const auto it = std::lower_bound(packet.items.begin(), packet.items.end(), index,
                                     [](const SentItem& item, uint32_t i) { return item.index < i; });
    if (it == packet.items.end() || it->index != index || it->kind == wire::RecordKind::Exit) continue;
    if (!(it->state == t.baseline)) return true;
    ++found;
  }
  return found < t.sends_since_baseline;  // the rest were in packets the ring has overwritten
}

bool SnapshotSender::collect_nearby_visits(const SnapshotSource& source) {
  // The area's XZ bounds, widened by the hysteresis: a row outside them is farther than
  // hysteresis_m from the area, so it can be relevant only if already held (held_ covers those).
  Vec3 lo, hi;
  if (area_.kind == InterestArea::Kind::Sphere) {
    const float r = area_.radius + config_.hysteresis_m;
    lo = area_.center - Vec3{r, r, r};
    hi = area_.center + Vec3{r, r, r};
  } else {
    const float m = config_.hysteresis_m;
    lo = area_.min - Vec3{m, m, m};
    hi = area_.max + Vec3{m, m, m};
  }
  const int64_t cx0 = SnapshotSource::cell_of(lo.x), cx1 = SnapshotSource::cell_of(hi.x);
  const int64_t cz0 = SnapshotSource::cell_of(lo.z), cz1 = SnapshotSource::cell_of(hi.z);
  // A huge area: scanning the changed column is cheaper than walking thousands of cells.
  constexpr int64_t kMaxCells = 1024;
  if ((cx1 - cx0 + 1) * (cz1 - cz0 + 1) > kMaxCells) return false;
  // Marks in a bitmap over the indices, then reads it in order: the visits come out ascending and
  // unique without a sort (the cells yield rows in cell order, not index order).
  // Past 2^18 indices (a 32 KiB bitmap per write) a sort of the few visits is cheaper.
  const bool bitmap = tracks_.size() <= (size_t{1} << 18);
  if (bitmap) visit_bits_.assign((tracks_.size() + 63) / 64, 0);
  auto mark = [&](uint32_t index) {
    if (bitmap) {
      visit_bits_[index >> 6] |= uint64_t{1} << (index & 63);
    } else {
      visits_.push_back(index);
    }
  };
  const auto& cells = source.cell_rows;
  for (int64_t cx = cx0; cx <= cx1; ++cx) {
    const uint64_t first = SnapshotSource::cell_key(static_cast<int32_t>(cx), static_cast<int32_t>(cz0));
    const uint64_t last = SnapshotSource::cell_key(static_cast<int32_t>(cx), static_cast<int32_t>(cz1));
    auto it = std::lower_bound(cells.begin(), cells.end(), first,
                               [](const SnapshotSource::CellRow& c, uint64_t key) { return c.cell < key; });
    for (; it != cells.end() && it->cell <= last; ++it) {
      if (it->changed_build > seen_build_) mark(it->index);
    }
  }
  for (const uint32_t index : pending_) mark(index);
  for (const uint32_t index : acked_) mark(index);
  // Of the held indices only the changed ones: one may have left the cells above, and must then
  // exit. An unchanged one that is not pending or acked would visit to no effect: same id, same
  // position and area (a new area visits everything), so same relevance, and a state equal to its
  // baseline, or it would be pending.
  for (const uint32_t index : held_) {
    if (source.changed_build[index] > seen_build_) mark(index);
  }
  if (bitmap) {
    for (size_t w = 0; w < visit_bits_.size(); ++w) {
      for (uint64_t bits = visit_bits_[w]; bits != 0; bits &= bits - 1) {
        visits_.push_back(static_cast<uint32_t>(64 * w + static_cast<size_t>(std::countr_zero(bits))));
      }
    }
  } else {
    std::sort(visits_.begin(), visits_.end());
    visits_.erase(std::unique(visits_.begin(), visits_.end()), visits_.end());
  }
  return true;
}

SnapshotWriteStats SnapshotSender::write(const SnapshotSource& source, uint32_t sequence, size_t budget_bytes,
                                         std::vector<uint8_t>* out) {
  SnapshotWriteStats stats;
  out->clear();
  if (source.build == 0 || source.row_of_index.size() != source.changed_build.size()) {
    assert(false && "SnapshotSender::write: the source is not indexed (index_snapshot_source)");
    return stats;
  }
  if (tracks_.size() < source.row_of_index.size()) tracks_.resize(source.row_of_index.size());

  // 1. Visit the indices that may have something to send: those whose row changed since the
  //    previous write, those still due, and those whose baseline an ack changed (or all of them).
  const bool all = visit_all_ || config_.full_scan || source.lineage != seen_lineage_ ||
                   source.build < seen_build_;
  visits_.clear();
  if (!all && area_.kind != InterestArea::Kind::All && collect_nearby_visits(source)) {
    // visits_ holds the changed rows near the area and every index that needs a visit anyway.
  } else if (all) {
    for (uint32_t i = 0; i < tracks_.size(); ++i) visits_.push_back(i);
  } else {
    std::sort(acked_.begin(), acked_.end());
    size_t p = 0, a = 0;
    // Merge the three ascending lists: changed indices (scanned), pending_ and acked_.
    auto take_until = [&](uint32_t limit) {
      for (;;) {
        uint32_t next = limit;
        if (p < pending_.size()) next = std::min(next, pending_[p]);
        if (a < acked_.size()) next = std::min(next, acked_[a]);
        if (next >= limit) return;
        visits_.push_back(next);
        while (p < pending_.size() && pending_[p] == next) ++p;
        while (a < acked_.size() && acked_[a] == next) ++a;
      }
    };
    const size_t m = source.changed_build.size();
    for (uint32_t i = 0; i < m; ++i) {
      if (source.changed_build[i] <= seen_build_) continue;
      take_until(i);
      visits_.push_back(i);
      while (p < pending_.size() && pending_[p] == i) ++p;
      while (a < acked_.size() && acked_[a] == i) ++a;
    }
    take_until(static_cast<uint32_t>(tracks_.size()));
    // Held indices whose rows did not change need no visit: unchanged, they stay as they are.
  }
  stats.visits = static_cast<uint32_t>(visits_.size());
  visit_all_ = false;
  seen_lineage_ = source.lineage;
  seen_build_ = source.build;
  acked_.clear();

  candidates_.clear();
  next_pending_.clear();
  next_held_.clear();
  // held_ after this write: the visited indices the client may hold, merged with the held ones
  // not visited (unchanged). Both lists ascend, so the result does too.
  size_t h = 0;
  // A track is a cache line of a per-client array far larger than the cache, and the visits are known
  // up front: fetch a few visits ahead so the misses overlap instead of queueing one by one.
  constexpr size_t kPrefetchAhead = 8;
  for (size_t v = 0; v < visits_.size(); ++v) {
    if (v + kPrefetchAhead < visits_.size()) {
      const char* ahead = reinterpret_cast<const char*>(&tracks_[visits_[v + kPrefetchAhead]]);
      __builtin_prefetch(ahead);
    }
    const uint32_t index = visits_[v];
    while (h < held_.size() && held_[h] < index) next_held_.push_back(held_[h++]);
    if (h < held_.size() && held_[h] == index) ++h;
    if (visit(source, index, sequence)) next_pending_.push_back(index);
    const Track& t = tracks_[index];
    if (t.relevant != 0 || t.exit_pending != 0 || t.held_generation != 0) next_held_.push_back(index);
  }
  while (h < held_.size()) next_held_.push_back(held_[h++]);
  pending_.swap(next_pending_);
  held_.swap(next_held_);

  // 2. Choose records in priority order while the payload fits (exact sizes, gaps included).
  //    Only the front of the order is ever needed (a burst of thousands of entries fills a
  //    payload with a few dozen), so it is sorted in growing chunks: nth_element, then sort.
  //    The comparison is a strict total order, so the result equals a full sort.
  const auto before = [](const Candidate& a, const Candidate& b) {
    if (a.urgent != b.urgent) return a.urgent > b.urgent;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.index < b.index;
  };
  size_t sorted_end = 0;
  chosen_.clear();
  if (budget_bytes < wire::kSnapshotHeaderBytes) {
    stats.deferred = static_cast<uint32_t>(candidates_.size());
    return stats;
  }
  const uint64_t budget_bits = uint64_t{budget_bytes} * 8;
  uint64_t total_bits = wire::payload_header_bits(0);
  uint32_t misses = 0;
  for (uint32_t k = 0; k < candidates_.size(); ++k) {
    if (misses >= kMaxMissesInARow || budget_bits - total_bits < 5) break;  // 5: the smallest record
    if (k == sorted_end) {
      const auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(sorted_end);
      sorted_end = std::min(candidates_.size(), sorted_end + std::max<size_t>(64, sorted_end));
      const auto last = candidates_.begin() + static_cast<std::ptrdiff_t>(sorted_end);
      if (last != candidates_.end()) std::nth_element(first, last, candidates_.end(), before);
      std::sort(first, last, before);
    }
    Candidate& c = candidates_[k];
    // The record's size; a delta goes as an entry when that is no larger (a far-off baseline can
    // make the delta cost more).
    uint32_t body_bits = wire::exit_body_bits();
    if (c.kind != wire::RecordKind::Exit) {
      const uint32_t generation = source.ids[c.row].generation;
      const wire::QuantizedState& state = source.states[c.row];
      body_bits = wire::entry_body_bits(generation, source.descs[c.row], state, limits_);
      if (c.kind == wire::RecordKind::Delta) {
        const Track& t = tracks_[c.index];
        const uint32_t delta_bits = wire::delta_body_bits(sequence - t.baseline_sequence, t.baseline, state, limits_);
        if (delta_bits < body_bits) {
          body_bits = delta_bits;
        } else {
          c.kind = wire::RecordKind::Entry;
        }
      }
    }
    const auto at = std::lower_bound(chosen_.begin(), chosen_.end(), c.index,
                                     [&](uint32_t p, uint32_t index) { return candidates_[p].index < index; });
    const int64_t previous = at == chosen_.begin() ? -1 : int64_t{candidates_[*(at - 1)].index};
    uint64_t gaps = wire::index_gap_bits(static_cast<uint32_t>(c.index - previous - 1));
    if (at != chosen_.end()) {
      const int64_t next = candidates_[*at].index;
      gaps += wire::index_gap_bits(static_cast<uint32_t>(next - c.index - 1));
      gaps -= wire::index_gap_bits(static_cast<uint32_t>(next - previous - 1));
    }
    const uint32_t m = static_cast<uint32_t>(chosen_.size());
    const uint64_t base = total_bits - wire::payload_header_bits(m) + wire::payload_header_bits(m + 1) + gaps;
    uint64_t new_total = base + body_bits;
    if ((new_total + 7) / 8 > budget_bytes && c.urgent && c.kind == wire::RecordKind::Entry) {
      // A replacing entry that does not fit: at least take the old object off the client.
      c.kind = wire::RecordKind::Exit;
      new_total = base + wire::exit_body_bits();
    }
    if ((new_total + 7) / 8 > budget_bytes) {
      ++misses;
      continue;
    }
    misses = 0;
    chosen_.insert(at, k);
    total_bits = new_total;
  }
  stats.deferred = static_cast<uint32_t>(candidates_.size() - chosen_.size());

  // 3. Encode in index order.
  records_.clear();
  for (uint32_t p : chosen_) records_.push_back(make_record(source, candidates_[p], sequence));
  const bool encoded = wire::encode_snapshot_payload(records_, limits_, out, &checksum_scratch_);
  assert(encoded && out->size() * 8 >= total_bits && out->size() == (total_bits + 7) / 8);
  if (!encoded) {  // unreachable: the records are built from checked state
    out->clear();
    stats.deferred = static_cast<uint32_t>(candidates_.size());
    return stats;
  }

  // 4. Remember what this packet carried, for on_acked.
  SentPacket& packet = sent_[sequence % kSentPacketHistory];
  packet.sequence = sequence;
  packet.pending = true;
  packet.items.clear();
  for (const wire::SnapshotRecord& r : records_) {
    Track& t = tracks_[r.id.index];
    t.priority = 0.0f;
    SentItem item;
    item.index = r.id.index;
    item.kind = r.kind;
    if (r.kind == wire::RecordKind::Exit) {
      ++stats.exits;
    } else {
      ++t.sends;
      if (t.sends_since_baseline < 0xFFFF) ++t.sends_since_baseline;  // saturates: only "< window" is asked
      item.generation = r.id.generation;
      item.sends = t.sends;
      item.state = r.state;
      if (r.kind == wire::RecordKind::Entry) {
        ++stats.entries;
        t.held_generation = r.id.generation;
        t.exit_pending = 0;  // the entry replaces whatever the client held here
      } else {
        ++stats.deltas;
      }
    }
    packet.items.push_back(item);
  }
  stats.records = stats.entries + stats.deltas + stats.exits;
  stats.bytes = static_cast<uint32_t>(out->size());
  return stats;
}

void SnapshotSender::on_acked(uint32_t sequence) {
  SentPacket& packet = sent_[sequence % kSentPacketHistory];
  if (!packet.pending || packet.sequence != sequence) return;
  packet.pending = false;
  constexpr size_t kPrefetchAhead = 8;  // as in write(): overlap the track misses
  const size_t n = packet.items.size();
  for (size_t k = 0; k < n; ++k) {
    if (k + kPrefetchAhead < n) {
      const char* ahead = reinterpret_cast<const char*>(&tracks_[packet.items[k + kPrefetchAhead].index]);
      __builtin_prefetch(ahead);
    }
    const SentItem& item = packet.items[k];
    Track& t = tracks_[item.index];
    if (item.kind == wire::RecordKind::Exit) {
      // The client applied this exit; unless it was cancelled or superseded by a later one, it
      // now holds nothing here.
      if (t.exit_pending && sequence_at_or_after(sequence, t.exit_sequence)) {
        t.exit_pending = 0;
        t.held_generation = 0;
      }
      continue;
    }
    const bool same_object = t.generation == item.generation;  // the index is the track's own
    if (same_object && sequence_at_or_after(sequence, t.epoch_sequence) &&
        (!t.baseline_valid || sequence_after(sequence, t.baseline_sequence))) {
      t.baseline = item.state;
      t.baseline_sequence = sequence;
      t.sends_since_baseline = static_cast<uint16_t>(std::min<uint32_t>(t.sends - item.sends, 0xFFFF));
      t.baseline_valid = 1;
      acked_.push_back(item.index);  // the next write checks it against the current state
    }
  }
}

}  // namespace impulse::server
