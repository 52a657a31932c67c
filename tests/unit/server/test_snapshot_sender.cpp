// Snapshot sender: a receiver fed only the delivered payloads of random worlds over a lossy,
// reordering link with random acks reproduces the sender's quantised states and never fails to
// decode; relevance with hysteresis; exits until acked; the byte budget; no starvation under the
// priority accumulator; acked objects at rest cost nothing; build_snapshot_source from a World;
// and the payload figures of an N1-like scene (real physics).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <vector>

#include "server/net/snapshot_sender.h"
#include "server/physics/world.h"
#include "shared/wire/snapshot_codec.h"
#include "tests/support/rng.h"

namespace impulse::server {
namespace {

using ::impulse::test::Rng;
using wire::QuantizedState;
using wire::SnapshotError;
using wire::SnapshotReceiver;
using Bytes = std::vector<uint8_t>;

// --- a synthetic world --------------------------------------------------------------------------

struct SimObject {
  ObjectID id;  // generation 0: the slot is free
  Vec3 position;
  Vec3 previous_position;  // the soak sometimes jumps back to these (a state A -> B -> A)
  Quat previous_orientation;
  Vec3 velocity;
  Quat orientation;
  bool at_rest = false;
  wire::ObjectDescription desc{wire::BodyKind::Dynamic, wire::ShapeKind::Box, {0.25f, 0.25f, 0.25f}, false};
};

struct SimWorld {
  std::vector<SimObject> slots;
  uint32_t generation_counter = 0;
  uint32_t first_index = 0;  // slots below stay empty (a sparse index space)

  ObjectID create(Vec3 position, Vec3 velocity = {}) {
    if (slots.size() < first_index) slots.resize(first_index);
    uint32_t index = first_index;
    while (index < slots.size() && !slots[index].id.is_null()) ++index;
    if (index == slots.size()) slots.emplace_back();
    SimObject& o = slots[index];
    o = SimObject{};
    o.id = ObjectID{index, ++generation_counter};
    o.position = position;
    o.velocity = velocity;
    return o.id;
  }
  void destroy(uint32_t index) { slots[index].id = ObjectID{}; }

  void fill(const wire::QuantizationConfig& q, uint64_t tick, SnapshotSource* src) const {
    src->tick = tick;
    src->ids.clear();
    src->states.clear();
    src->positions.clear();
    src->speeds.clear();
    src->descs.clear();
    src->representable.clear();
    for (const SimObject& o : slots) {
      if (o.id.is_null()) continue;
      src->ids.push_back(o.id);
      src->states.push_back(wire::quantize_state(o.position, o.orientation, o.velocity, {0, 0.5f, 0}, o.at_rest, q));
      src->positions.push_back(o.position);
      src->speeds.push_back(o.at_rest ? 0.0f : length(o.velocity));
      src->descs.push_back(o.desc);
      src->representable.push_back(wire::is_representable(o.position, q) ? 1 : 0);
    }
    index_snapshot_source(src);
  }
};

// Source row of every id at one write, for checking what the receiver decoded.
struct SourceRow {
  QuantizedState state;
  Vec3 position;
  bool representable = false;
};
using StateMap = std::map<ObjectID, SourceRow>;
StateMap state_map(const SnapshotSource& src) {
  StateMap m;
  for (size_t i = 0; i < src.ids.size(); ++i)
    m[src.ids[i]] = SourceRow{src.states[i], src.positions[i], src.representable[i] != 0};
  return m;
}

// One client with an ideal link: every payload applied at once and acked at once.
struct DirectLink {
  SnapshotSender sender;
  SnapshotReceiver receiver;
  uint32_t sequence = 1000;
  Bytes payload;

  explicit DirectLink(const SnapshotSenderConfig& config = {}) : sender(config), receiver(config.quant) {}

  SnapshotWriteStats send(const SnapshotSource& src, size_t budget = 1200, bool ack = true) {
    ++sequence;
    const SnapshotWriteStats stats = sender.write(src, sequence, budget, &payload);
    EXPECT_LE(payload.size(), budget);
    EXPECT_EQ(stats.bytes, payload.size());
    const SnapshotError e = receiver.apply(sequence, src.tick, payload);
    EXPECT_EQ(e, SnapshotError::None) << wire::to_string(e);
    if (ack && e == SnapshotError::None) sender.on_acked(sequence);
    return stats;
  }
};

bool holds(const SnapshotReceiver& rx, ObjectID id) { return rx.find(id) != nullptr; }

// --- the random-world soak ------------------------------------------------------------------------

// Random worlds (moving, resting, created, destroyed, recycled and out-of-bound objects), a random
// area of interest, random budgets; payloads lost (20 %), delayed and reordered; acks lost (20 %),
// delayed, reordered and duplicated. The receiver applies what arrives; the client acks only
// payloads it applied. Invariants: nothing ever fails to decode (only Stale is allowed), every
// state the receiver takes is the sender's source state at that packet, entries and exits agree
// with the area; once the link and the world are quiet the view equals the relevant objects and
// the payload is the bare header.
TEST(SnapshotSender, ReceiverReproducesTheSenderOverALossyReorderingLink) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    Rng rng(seed);
    SnapshotSenderConfig config;
    config.hysteresis_m = 1.5f;
    SnapshotSender sender(config);
    // A sender that visits every index on every write must write the very same bytes.
    SnapshotSenderConfig full_config = config;
    full_config.full_scan = true;
    SnapshotSender shadow(full_config);
    Bytes shadow_out;
    SnapshotReceiver receiver(config.quant);
    SimWorld world;
    for (int i = 0; i < 60; ++i)
      world.create({rng.uniform(-30, 30), rng.uniform(0, 10), rng.uniform(-30, 30)},
                   {rng.uniform(-3, 3), 0, rng.uniform(-3, 3)});

    struct Flight {
      uint32_t due;
      uint32_t sequence;
      uint64_t tick;
      Bytes bytes;
    };
    std::vector<Flight> payloads;
    std::vector<std::pair<uint32_t, uint32_t>> acks;  // (due step, sequence)
    std::map<uint32_t, StateMap> sent_states;
    std::map<uint32_t, InterestArea> sent_areas;
    SnapshotSource src;
    Bytes out;
    uint32_t sequence = static_cast<uint32_t>(rng.next());
    uint32_t applied = 0, stale = 0, checked_states = 0, entries = 0, deltas = 0, exits = 0;

    auto deliver = [&](uint32_t step, bool everything) {
      // Payloads, in a random order among those due.
      std::vector<Flight> due;
      for (size_t i = 0; i < payloads.size();) {
        if (everything || payloads[i].due <= step) {
          due.push_back(std::move(payloads[i]));
          payloads.erase(payloads.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      for (size_t i = due.size(); i > 1; --i) std::swap(due[i - 1], due[rng.below(static_cast<uint32_t>(i))]);
      for (const Flight& f : due) {
        const SnapshotError e = receiver.apply(f.sequence, f.tick, f.bytes);
        ASSERT_TRUE(e == SnapshotError::None || e == SnapshotError::Stale) << wire::to_string(e);
        if (e == SnapshotError::Stale) {
          ++stale;
          continue;
        }
        ++applied;
        const StateMap& states = sent_states.at(f.sequence);
        const InterestArea& area = sent_areas.at(f.sequence);
        for (ObjectID id : receiver.entered()) {
          ASSERT_TRUE(states.count(id)) << "entered an object that is not live";
          ASSERT_TRUE(states.at(id).representable);
          ASSERT_LE(distance_outside(area, states.at(id).position), config.hysteresis_m) << "entered from outside";
        }
        for (auto list : {receiver.entered(), receiver.updated()}) {
          for (ObjectID id : list) {
            ASSERT_TRUE(states.count(id));
            ASSERT_EQ(*receiver.find_state(id), states.at(id).state) << "state differs from the source at that packet";
            ++checked_states;
          }
        }
        for (ObjectID id : receiver.exited()) {
          // An exit goes out only for objects that are not relevant (it is cancelled by re-entry).
          const auto it = states.find(id);
          if (it == states.end() || !it->second.representable) continue;  // destroyed, replaced, out of bound
          ASSERT_GT(distance_outside(area, it->second.position), 0.0f) << "exit of an object inside the area";
        }
        const bool lose_ack = rng.below(5) == 0;
        if (!lose_ack) {
          acks.emplace_back(step + rng.below(5), f.sequence);
          if (rng.below(10) == 0) acks.emplace_back(step + rng.below(8), f.sequence);  // duplicate
        }
      }
      std::vector<std::pair<uint32_t, uint32_t>> ready;
      for (size_t i = 0; i < acks.size();) {
        if (everything || acks[i].first <= step) {
          ready.push_back(acks[i]);
          acks.erase(acks.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      for (size_t i = ready.size(); i > 1; --i) std::swap(ready[i - 1], ready[rng.below(static_cast<uint32_t>(i))]);
      for (const auto& a : ready) {
        sender.on_acked(a.second);
        shadow.on_acked(a.second);
      }
    };

    for (uint32_t step = 0; step < 400; ++step) {
      // The world moves on.
      for (SimObject& o : world.slots) {
        if (o.id.is_null()) continue;
        const uint32_t dice = rng.below(100);
        if (dice < 2) {
          world.destroy(o.id.index);
          continue;
        }
        if (dice < 12) o.at_rest = !o.at_rest;
        if (dice >= 12 && dice < 16) {
          std::swap(o.position, o.previous_position);
          std::swap(o.orientation, o.previous_orientation);
          continue;
        }
        o.previous_position = o.position;
        o.previous_orientation = o.orientation;
        if (!o.at_rest) {
          o.position += o.velocity * (1.0f / 30.0f);
          if (rng.below(20) == 0) o.velocity = {rng.uniform(-8, 8), rng.uniform(-2, 2), rng.uniform(-8, 8)};
          o.orientation = normalize(Quat{o.orientation.x + rng.uniform(-0.05f, 0.05f), o.orientation.y,
                                         o.orientation.z + rng.uniform(-0.05f, 0.05f), o.orientation.w});
        }
        if (rng.below(400) == 0) o.position.x = rng.below(2) ? 1500.0f : 0.0f;  // leaves / re-enters the bound
      }
      for (int k = rng.below(3); k > 0; --k)
        world.create({rng.uniform(-30, 30), rng.uniform(0, 10), rng.uniform(-30, 30)},
                     {rng.uniform(-3, 3), 0, rng.uniform(-3, 3)});
      if (step % 50 == 0) {
        const uint32_t kind = rng.below(3);
        const Vec3 c{rng.uniform(-20, 20), 5, rng.uniform(-20, 20)};
        const InterestArea area = kind == 0   ? InterestArea::all()
                                  : kind == 1 ? InterestArea::sphere(c, rng.uniform(5, 30))
                                              : InterestArea::box(c - Vec3{15, 15, 15}, c + Vec3{10, 10, 10});
        ASSERT_TRUE(sender.set_interest(area));
        ASSERT_TRUE(shadow.set_interest(area));
      }
      world.fill(config.quant, step + 1, &src);
      ++sequence;
      const size_t budget = rng.below(8) == 0 ? rng.below(80) : 60 + rng.below(1141);
      const SnapshotWriteStats stats = sender.write(src, sequence, budget, &out);
      const SnapshotWriteStats shadow_stats = shadow.write(src, sequence, budget, &shadow_out);
      ASSERT_EQ(out, shadow_out) << "visiting only changed and pending indices must not change the payload";
      ASSERT_EQ(stats.deferred, shadow_stats.deferred);
      ASSERT_LE(out.size(), budget);
      ASSERT_EQ(stats.bytes, out.size());
      if (budget < wire::kSnapshotHeaderBytes) {
        ASSERT_TRUE(out.empty());
      }
      ASSERT_EQ(stats.records, stats.entries + stats.deltas + stats.exits);
      entries += stats.entries;
      deltas += stats.deltas;
      exits += stats.exits;
      sent_states[sequence] = state_map(src);
      sent_areas[sequence] = sender.interest();
      if (!out.empty() && rng.below(5) != 0) payloads.push_back(Flight{step + rng.below(6), sequence, src.tick, out});
      deliver(step, false);
      if (HasFatalFailure()) return;
    }

    // Quiet world, clean link: deliver everything, then send until nothing is due.
    deliver(10000, true);
    for (SimObject& o : world.slots) o.at_rest = true;
    world.fill(config.quant, 100000, &src);
    uint32_t quiet_writes = 0;
    for (int i = 0; i < 400 && quiet_writes < 3; ++i) {
      ++sequence;
      const SnapshotWriteStats stats = sender.write(src, sequence, 1200, &out);
      sent_states[sequence] = state_map(src);
      sent_areas[sequence] = sender.interest();
      quiet_writes = stats.records == 0 ? quiet_writes + 1 : 0;
      ASSERT_EQ(receiver.apply(sequence, src.tick, out), SnapshotError::None);
      sender.on_acked(sequence);
      if (stats.records == 0) {
        EXPECT_EQ(out.size(), wire::kSnapshotHeaderBytes);
      }
    }
    ASSERT_EQ(quiet_writes, 3u) << "the sender never went quiet";
    // The view is exactly the relevant objects, each with its source state.
    const InterestArea& area = sender.interest();
    for (size_t i = 0; i < src.ids.size(); ++i) {
      const float outside = src.representable[i] ? distance_outside(area, src.positions[i]) : 1e9f;
      if (outside <= 0.0f) {
        ASSERT_TRUE(holds(receiver, src.ids[i])) << "missing a relevant object";
      }
      if (outside > config.hysteresis_m) {
        ASSERT_FALSE(holds(receiver, src.ids[i])) << "kept an irrelevant object";
      }
      if (holds(receiver, src.ids[i])) {
        ASSERT_EQ(*receiver.find_state(src.ids[i]), src.states[i]);
      }
    }
    for (const wire::SnapshotObject& o : receiver.objects()) {
      ASSERT_TRUE(std::binary_search(src.ids.begin(), src.ids.end(), o.id,
                                     [](ObjectID a, ObjectID b) { return a.index < b.index || (a.index == b.index && a.generation < b.generation); }))
          << "holds a destroyed object";
    }
    std::printf("[ figures  ] seed %llu: %u applied, %u stale, %u states checked; %u entries, %u deltas, %u exits\n",
                static_cast<unsigned long long>(seed), applied, stale, checked_states, entries, deltas, exits);
    EXPECT_GT(deltas, entries) << "deltas should dominate";
    EXPECT_GT(exits, 0u);
  }
}

// A small area in a big world: the sender looks only at the grid cells near its area (and at what
// the client holds), yet writes the very bytes of a sender that visits every index. Objects far
// away move, die and are recycled; the area sweeps across the world, so objects enter, leave and
// come back.
// Grid culling against a full scan, over `steps` writes, with the objects' indices starting at
// `first_index` (past 2^18 the sender sorts its visits instead of marking a bitmap).
void expect_grid_culling_matches_full_scan(uint32_t first_index, int steps) {
  Rng rng(7);
  SnapshotSenderConfig config;
  SnapshotSenderConfig full_config = config;
  full_config.full_scan = true;
  SnapshotSender sender(config), shadow(full_config);
  SnapshotReceiver receiver(config.quant);
  SimWorld world;
  world.first_index = first_index;
  for (int i = 0; i < 3000; ++i) {  // half of them at rest: acked, they are no longer due
    const Vec3 v = i % 2 ? Vec3{rng.uniform(-20, 20), 0, rng.uniform(-20, 20)} : Vec3{};
    world.create({rng.uniform(-400, 400), rng.uniform(0, 5), rng.uniform(-400, 400)}, v);
  }
  SnapshotSource src;
  Bytes out, shadow_out;
  uint32_t sequence = 77;
  size_t entries = 0, exits = 0;
  for (int step = 0; step < steps; ++step) {
    for (SimObject& o : world.slots) {
      if (o.id.is_null()) continue;
      o.position += o.velocity * (1.0f / 20.0f);
    }
    for (int k = 0; k < 5; ++k) {  // churn, mostly far from the area
      const uint32_t i = first_index + rng.below(static_cast<uint32_t>(world.slots.size() - first_index));
      if (!world.slots[i].id.is_null()) world.destroy(i);
      world.create({rng.uniform(-400, 400), 1, rng.uniform(-400, 400)}, {rng.uniform(-5, 5), 0, 0});
    }
    // Objects the client holds disappear from its cells too: destroyed, or thrown far away.
    for (SimObject& o : world.slots) {
      if (o.id.is_null() || !holds(receiver, o.id) || rng.below(8) != 0) continue;
      if (rng.below(2) == 0) {
        o.id = ObjectID{};
      } else {
        o.position = {rng.uniform(-400, 400), 1, 390};
      }
    }
    if (step % 40 == 0) {
      const Vec3 c{-300.0f + 15.0f * static_cast<float>(step / 4), 0, 0};
      const InterestArea area = step % 80 == 0 ? InterestArea::sphere(c, 40) : InterestArea::box(c - Vec3{30, 5, 30}, c + Vec3{30, 5, 30});
      ASSERT_TRUE(sender.set_interest(area));
      ASSERT_TRUE(shadow.set_interest(area));
    }
    world.fill(config.quant, static_cast<uint64_t>(step), &src);
    ++sequence;
    const SnapshotWriteStats st = sender.write(src, sequence, 1200, &out);
    shadow.write(src, sequence, 1200, &shadow_out);
    ASSERT_EQ(out, shadow_out) << "step " << step;
    entries += st.entries;
    exits += st.exits;
    ASSERT_EQ(receiver.apply(sequence, src.tick, out), SnapshotError::None);
    if (rng.below(4) != 0) {  // some acks lost
      sender.on_acked(sequence);
      shadow.on_acked(sequence);
    }
  }
  EXPECT_GT(entries, 100u * static_cast<size_t>(steps) / 120);
  EXPECT_GT(exits, 25u * static_cast<size_t>(steps) / 120);
}

TEST(SnapshotSender, GridCullingWritesTheSameBytesAsAFullScan) { expect_grid_culling_matches_full_scan(0, 240); }

TEST(SnapshotSender, GridCullingMatchesAFullScanInASparseIndexSpace) {
  expect_grid_culling_matches_full_scan(300000, 120);
}

TEST(SnapshotSender, TheSameInputsGiveTheSameBytes) {
  auto run = [](std::vector<Bytes>* payloads) {
    Rng rng(5);
    SnapshotSender sender{SnapshotSenderConfig{}};
    sender.set_interest(InterestArea::sphere({0, 0, 0}, 20));
    SimWorld world;
    for (int i = 0; i < 100; ++i) world.create({rng.uniform(-30, 30), 0, rng.uniform(-30, 30)}, {rng.uniform(-3, 3), 0, 0});
    SnapshotSource src;
    for (uint32_t s = 1; s <= 40; ++s) {
      for (SimObject& o : world.slots) o.position += o.velocity * 0.1f;
      world.fill(SnapshotSenderConfig{}.quant, s, &src);
      payloads->emplace_back();
      sender.write(src, s, 300, &payloads->back());
      if (s % 3 != 0) sender.on_acked(s - 1);
    }
  };
  std::vector<Bytes> a, b;
  run(&a);
  run(&b);
  EXPECT_EQ(a, b);
}

// --- interest and hysteresis ----------------------------------------------------------------------

TEST(SnapshotSender, HysteresisStopsFlickerAndExitsRepeatUntilAcked) {
  SnapshotSenderConfig config;
  config.hysteresis_m = 2.0f;
  DirectLink link(config);
  ASSERT_TRUE(link.sender.set_interest(InterestArea::sphere({0, 0, 0}, 10.0f)));
  SimWorld world;
  const ObjectID a = world.create({9, 0, 0});
  SnapshotSource src;

  world.fill(config.quant, 1, &src);
  SnapshotWriteStats s = link.send(src);
  EXPECT_EQ(s.entries, 1u);
  ASSERT_TRUE(holds(link.receiver, a));
  // Oscillating across the boundary by less than the margin: deltas, never an exit.
  for (int i = 0; i < 20; ++i) {
    world.slots[a.index].position.x = i % 2 == 0 ? 11.5f : 9.5f;
    world.fill(config.quant, 2 + i, &src);
    s = link.send(src);
    EXPECT_EQ(s.exits, 0u);
    EXPECT_EQ(s.entries, 0u);
    EXPECT_EQ(s.deltas, 1u);
    EXPECT_TRUE(link.receiver.exited().empty());
    ASSERT_TRUE(holds(link.receiver, a));
  }
  // Beyond the margin: an exit, repeated while unacked, then never again once acked.
  world.slots[a.index].position.x = 12.5f;
  world.fill(config.quant, 30, &src);
  for (int i = 0; i < 3; ++i) {
    s = link.send(src, 1200, /*ack=*/false);
    EXPECT_EQ(s.exits, 1u);
    EXPECT_EQ(s.records, 1u);
  }
  EXPECT_FALSE(holds(link.receiver, a));
  link.sender.on_acked(link.sequence - 1);  // an older packet carrying the exit is enough
  s = link.send(src);
  EXPECT_EQ(s.records, 0u);
  EXPECT_EQ(s.bytes, wire::kSnapshotHeaderBytes);
  // Coming back inside the margin is not entering; inside the area is.
  world.slots[a.index].position.x = 11.0f;
  world.fill(config.quant, 31, &src);
  EXPECT_EQ(link.send(src).records, 0u);
  world.slots[a.index].position.x = 9.9f;
  world.fill(config.quant, 32, &src);
  s = link.send(src);
  EXPECT_EQ(s.entries, 1u);
  ASSERT_TRUE(holds(link.receiver, a));
  EXPECT_EQ(link.receiver.entered().size(), 1u);

  // Re-entry cancels a pending exit: out (exit lost), back in before any ack.
  world.slots[a.index].position.x = 15.0f;
  world.fill(config.quant, 33, &src);
  Bytes lost;
  link.sequence++;
  s = link.sender.write(src, link.sequence, 1200, &lost);  // never delivered
  EXPECT_EQ(s.exits, 1u);
  world.slots[a.index].position.x = 5.0f;
  world.fill(config.quant, 34, &src);
  s = link.send(src);
  EXPECT_EQ(s.exits, 0u);
  EXPECT_EQ(s.entries, 1u) << "the baseline is unusable after an exit was sent: a fresh entry";
  EXPECT_TRUE(link.receiver.exited().empty());
  EXPECT_NEAR(link.receiver.find(a)->position.x, 5.0f, 1e-3f);
  world.fill(config.quant, 35, &src);
  EXPECT_EQ(link.send(src).records, 0u);

  // An invalid area is refused and the old one kept.
  EXPECT_FALSE(link.sender.set_interest(InterestArea::sphere({0, 0, 0}, -1.0f)));
  EXPECT_FALSE(link.sender.set_interest(InterestArea::box({1, 0, 0}, {0, 1, 1})));
  EXPECT_FALSE(link.sender.set_interest(InterestArea::sphere({std::nanf(""), 0, 0}, 1.0f)));
  EXPECT_EQ(link.sender.interest().kind, InterestArea::Kind::Sphere);
  EXPECT_EQ(distance_outside(InterestArea::box({0, 0, 0}, {1, 1, 1}), {4, 5, 0.5f}), 5.0f);
  EXPECT_EQ(distance_outside(InterestArea::all(), {1e6f, 0, 0}), 0.0f);
}

TEST(SnapshotSender, DestroyedAndRecycledObjectsExitAndReenterWithTheirNewId) {
  DirectLink link;
  SimWorld world;
  const ObjectID a = world.create({1, 0, 0});
  const ObjectID b = world.create({2, 0, 0});
  SnapshotSource src;
  world.fill({}, 1, &src);
  EXPECT_EQ(link.send(src).entries, 2u);
  world.destroy(b.index);
  world.fill({}, 2, &src);
  SnapshotWriteStats s = link.send(src);
  EXPECT_EQ(s.exits, 1u);
  EXPECT_FALSE(holds(link.receiver, b));
  world.fill({}, 3, &src);
  EXPECT_EQ(link.send(src).records, 0u);
  // Recycle a's slot with a new generation: one entry replaces it on the client.
  world.destroy(a.index);
  const ObjectID a2 = world.create({3, 0, 0});
  ASSERT_EQ(a2.index, a.index);
  world.fill({}, 4, &src);
  s = link.send(src);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.exits, 0u);
  EXPECT_EQ(std::vector<ObjectID>(link.receiver.exited().begin(), link.receiver.exited().end()), std::vector<ObjectID>{a});
  EXPECT_EQ(std::vector<ObjectID>(link.receiver.entered().begin(), link.receiver.entered().end()), std::vector<ObjectID>{a2});
  // Out of the world bound: never relevant, so it exits.
  world.slots[a2.index].position.x = 5000.0f;
  world.fill({}, 5, &src);
  EXPECT_EQ(src.representable[0], 0);
  EXPECT_EQ(link.send(src).exits, 1u);
  EXPECT_TRUE(link.receiver.objects().empty());
}

// --- baselines --------------------------------------------------------------------------------------

TEST(SnapshotSender, DeltasOnlyAgainstBaselinesTheClientRingStillHolds) {
  DirectLink link;
  SimWorld world;
  const ObjectID a = world.create({0, 0, 0}, {1, 0, 0});
  SnapshotSource src;
  world.fill({}, 1, &src);
  EXPECT_EQ(link.send(src).entries, 1u);  // acked: the baseline
  // No acks: deltas against that baseline while it is surely in the ring, entries after.
  uint32_t deltas = 0, entries = 0;
  for (uint32_t i = 0; i < 40; ++i) {
    world.slots[a.index].position.x += 0.05f;
    world.fill({}, 2 + i, &src);
    const SnapshotWriteStats s = link.send(src, 1200, /*ack=*/false);
    ASSERT_EQ(s.records, 1u);
    if (s.deltas == 1) {
      ++deltas;
      EXPECT_LT(i, wire::kSnapshotBaselineWindow) << "a delta after the baseline may have left the ring";
    } else {
      ++entries;
    }
  }
  // The baseline and the 31 states after it fill the ring of 32: the 32nd send is the last delta.
  EXPECT_EQ(deltas, wire::kSnapshotBaselineWindow);
  EXPECT_EQ(entries, 40 - deltas);
  // Unknown, forgotten and repeated acks are ignored; an old ack does not replace a newer baseline.
  link.sender.on_acked(12345);
  link.sender.on_acked(link.sequence);
  link.sender.on_acked(link.sequence);
  link.sender.on_acked(link.sequence - 3);
  world.slots[a.index].position.x += 0.05f;
  world.fill({}, 100, &src);
  const SnapshotWriteStats s = link.send(src);
  EXPECT_EQ(s.deltas, 1u);
  EXPECT_EQ(*link.receiver.find_state(a), src.states[0]);
}

TEST(SnapshotSender, AStateEqualToTheBaselineIsSentWhileAnotherMayBeHeld) {
  // A acked; B sent and received but not yet acked; the object returns to A. Equal to the acked
  // baseline is not enough: the client shows B, so A is sent at once (a spectator compares its
  // view with a recorded client's at every tick, and both must be the server's state then).
  // Then B's ack, A's ack: once every later send carries A, nothing more is due.
  DirectLink link;
  SimWorld world;
  const ObjectID a = world.create({1, 1, 1});
  world.slots[a.index].at_rest = true;
  SnapshotSource src;
  world.fill({}, 1, &src);
  EXPECT_EQ(link.send(src).entries, 1u);
  const QuantizedState state_a = src.states[0];
  world.slots[a.index].position.y = 2.0f;
  world.fill({}, 2, &src);
  EXPECT_EQ(link.send(src, 1200, /*ack=*/false).deltas, 1u);
  const uint32_t b_packet = link.sequence;
  EXPECT_NE(*link.receiver.find_state(a), state_a);
  world.slots[a.index].position.y = 1.0f;
  world.fill({}, 3, &src);
  ASSERT_EQ(src.states[0], state_a);
  EXPECT_EQ(link.send(src, 1200, /*ack=*/false).deltas, 1u) << "the client holds B";
  const uint32_t a_packet = link.sequence;
  EXPECT_EQ(*link.receiver.find_state(a), state_a);
  link.sender.on_acked(b_packet);
  world.fill({}, 4, &src);  // nothing changed in the world; A's packet is not acked yet
  EXPECT_EQ(link.send(src, 1200, /*ack=*/false).deltas, 1u);
  EXPECT_EQ(*link.receiver.find_state(a), state_a);
  link.sender.on_acked(a_packet);  // every send after it carried A as well
  world.fill({}, 5, &src);
  EXPECT_EQ(link.send(src).records, 0u);
  EXPECT_EQ(link.send(src).records, 0u);
  EXPECT_EQ(*link.receiver.find_state(a), state_a);
}

TEST(SnapshotSender, AckedObjectsAtRestCostNothing) {
  DirectLink link;
  SimWorld world;
  for (int i = 0; i < 900; ++i) {
    const ObjectID id = world.create({(i % 30) - 14.5f, 0.25f, (i / 30) - 14.5f});
    world.slots[id.index].at_rest = true;
  }
  SnapshotSource src;
  world.fill({}, 1, &src);
  uint32_t writes = 0;
  SnapshotWriteStats s;
  do {
    s = link.send(src);
    ++writes;
  } while (s.records > 0 && writes < 100);
  EXPECT_EQ(link.receiver.objects().size(), 900u);
  EXPECT_EQ(s.bytes, wire::kSnapshotHeaderBytes);
  for (int i = 0; i < 10; ++i) {
    s = link.send(src);
    EXPECT_EQ(s.records, 0u);
    EXPECT_EQ(s.bytes, wire::kSnapshotHeaderBytes);
  }
  std::printf("[ figures  ] 900 cubes at rest: entries took %u payloads of <= 1200 B; once acked %u B per payload\n",
              writes - 1, s.bytes);
}

// --- budget and priority ------------------------------------------------------------------------

TEST(SnapshotSender, NothingStarvesAndTheBudgetHolds) {
  // n objects that all change every write, at the same speed; the budget fits about k of them.
  DirectLink link;
  SimWorld world;
  constexpr int kObjects = 200;
  for (int i = 0; i < kObjects; ++i) world.create({i * 0.5f - 50.0f, 1, 0}, {1, 0, 0});
  SnapshotSource src;
  // Send every entry first with a big budget, then measure with a small one.
  world.fill({}, 1, &src);
  for (int i = 0; i < 20 && link.send(src, 1200).records > 0;) ++i;
  std::vector<int> last_sent(kObjects, 0);
  int max_gap = 0;
  uint32_t min_records = 1000;
  constexpr size_t kBudget = 120;
  for (int w = 1; w <= 200; ++w) {
    for (SimObject& o : world.slots) o.position.x += 0.02f;
    world.fill({}, 1 + w, &src);
    const SnapshotWriteStats s = link.send(src, kBudget);
    ASSERT_LE(s.bytes, kBudget);
    EXPECT_EQ(s.records + s.deferred, static_cast<uint32_t>(kObjects));
    min_records = std::min(min_records, s.records);
    for (ObjectID id : link.receiver.updated()) {
      max_gap = std::max(max_gap, w - last_sent[id.index]);
      last_sent[id.index] = w;
    }
  }
  for (int i = 0; i < kObjects; ++i) max_gap = std::max(max_gap, 200 - last_sent[i]);
  const int bound = (kObjects + static_cast<int>(min_records) - 1) / static_cast<int>(min_records) + 2;
  std::printf("[ figures  ] starvation: %d objects, >= %u records per %zu B payload, longest wait %d writes (bound %d)\n",
              kObjects, min_records, kBudget, max_gap, bound);
  EXPECT_GT(min_records, 3u);
  EXPECT_LE(max_gap, bound);
}

TEST(SnapshotSender, FastAndNearObjectsGoFirstButSlowFarOnesStillGetThrough) {
  SnapshotSenderConfig config;
  DirectLink link(config);
  ASSERT_TRUE(link.sender.set_interest(InterestArea::sphere({0, 0, 0}, 100.0f)));
  SimWorld world;
  constexpr int kObjects = 100;
  for (int i = 0; i < kObjects; ++i) world.create({static_cast<float>(i), 0, 0}, {i < 10 ? 8.0f : 0.1f, 0, 0});
  SnapshotSource src;
  world.fill(config.quant, 1, &src);
  for (int i = 0; i < 20 && link.send(src, 1200).records > 0;) ++i;
  std::vector<int> sends(kObjects, 0);
  for (int w = 1; w <= 300; ++w) {
    for (SimObject& o : world.slots) o.position.x += o.velocity.x * 0.02f + 0.002f;  // >= 2 steps: always due
    world.fill(config.quant, 1 + w, &src);
    link.send(src, 100);
    for (ObjectID id : link.receiver.updated()) ++sends[id.index];
  }
  int fast = 0, slow_min = 1 << 30;
  for (int i = 0; i < kObjects; ++i) {
    if (i < 10) fast += sends[i];
    else slow_min = std::min(slow_min, sends[i]);
  }
  std::printf("[ figures  ] priority: fast near objects sent %.1f times each, slowest far one %d times, in 300 writes\n",
              fast / 10.0, slow_min);
  EXPECT_GT(fast / 10, slow_min) << "speed and nearness raise the rate";
  EXPECT_GT(slow_min, 5) << "nothing starves";
}

TEST(SnapshotSender, ExitsGoFirstAndTinyBudgetsAreRespected) {
  DirectLink link;
  SimWorld world;
  for (int i = 0; i < 50; ++i) world.create({static_cast<float>(i), 0, 0}, {1, 0, 0});
  SnapshotSource src;
  world.fill({}, 1, &src);
  while (link.send(src).records > 0) {
  }
  ASSERT_TRUE(link.sender.set_interest(InterestArea::box({-1, -1, -1}, {9.5f, 1, 1})));  // keeps 0..9
  for (SimObject& o : world.slots) o.position.y += 0.1f;  // everything changes too
  world.fill({}, 2, &src);
  const SnapshotWriteStats s = link.send(src, 20);
  EXPECT_LE(s.bytes, 20u);
  EXPECT_EQ(s.deltas + s.entries, 0u) << "the 40 exits come before any state";
  EXPECT_GT(s.exits, 10u);
  for (size_t budget : {size_t{0}, size_t{4}}) {
    Bytes out{1, 2, 3};
    const SnapshotWriteStats t = link.sender.write(src, ++link.sequence, budget, &out);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(t.records, 0u);
    EXPECT_GT(t.deferred, 0u);
  }
  // From kMinSnapshotBudgetBytes one state record always fits.
  SimWorld fresh;
  fresh.create({1, 2, 3}, {4, 5, 6});
  DirectLink other;
  fresh.fill({}, 1, &src);
  EXPECT_EQ(other.send(src, wire::kMinSnapshotBudgetBytes).entries, 1u);
}

// --- build_snapshot_source ----------------------------------------------------------------------------

TEST(SnapshotSender, BuildSnapshotSourceSortsByIndexAndMarksRestAndBounds) {
  physics::World world;
  physics::BodyDesc ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_plane();
  const ObjectID plane = world.create_object(ground).id;
  std::vector<ObjectID> ids;
  for (int i = 0; i < 8; ++i) {
    physics::BodyDesc d;
    d.shape = i % 2 ? physics::make_box({0.25f, 0.5f, 0.75f}) : physics::make_capsule(0.3f, 0.4f);
    d.position = {static_cast<float>(i) * 2, 1, 0};
    d.velocity = {1, 0, 0};
    ids.push_back(world.create_object(d).id);
  }
  physics::BodyDesc far;
  far.shape = physics::make_sphere(0.5f);
  far.position = {2000, 1, 0};
  const ObjectID far_id = world.create_object(far).id;
  // Destroying from the front makes storage order differ from index order.
  world.destroy_object(ids[0]);
  world.destroy_object(ids[3]);
  physics::BodyDesc again;
  again.shape = physics::make_sphere(0.25f);
  const ObjectID recycled = world.create_object(again).id;

  const wire::QuantizationConfig q;
  SnapshotSource src;
  build_snapshot_source(world, q, &src);
  ASSERT_EQ(src.ids.size(), world.object_count());
  for (size_t i = 1; i < src.ids.size(); ++i) ASSERT_LT(src.ids[i - 1].index, src.ids[i].index);
  ASSERT_EQ(src.states.size(), src.ids.size());
  ASSERT_EQ(src.descs.size(), src.ids.size());
  ASSERT_EQ(src.representable.size(), src.ids.size());
  for (size_t i = 0; i < src.ids.size(); ++i) {
    const physics::BodyState b = *world.get_object(src.ids[i]);
    const bool rest = b.sleeping || b.kind == physics::BodyKind::Static;
    EXPECT_EQ(src.states[i], wire::quantize_state(b.position, b.orientation, b.velocity, b.angular_velocity, rest, q));
    EXPECT_EQ(src.positions[i], b.position);
    EXPECT_EQ(src.representable[i], src.ids[i] == far_id ? 0 : 1);
    EXPECT_EQ(static_cast<int>(src.descs[i].kind), static_cast<int>(b.kind));
    EXPECT_EQ(static_cast<int>(src.descs[i].shape), static_cast<int>(b.shape.kind));
    if (src.ids[i] == plane) {
      EXPECT_EQ(src.states[i].at_rest, 1);
    }
    if (b.shape.kind == physics::ShapeKind::Capsule) {
      EXPECT_EQ(src.descs[i].dims, (Vec3{0.3f, 0.4f, 0.3f}));
    }
    if (b.shape.kind == physics::ShapeKind::Box) {
      EXPECT_EQ(src.descs[i].dims, (Vec3{0.25f, 0.5f, 0.75f}));
    }
    if (src.ids[i] == recycled) {
      EXPECT_EQ(src.descs[i].dims, (Vec3{0.25f, 0.25f, 0.25f}));
    }
  }
  // Reuses its buffers: a second build gives the same.
  SnapshotSource again_src = src;
  build_snapshot_source(world, q, &again_src);
  EXPECT_EQ(again_src.ids, src.ids);
  EXPECT_EQ(again_src.states, src.states);
}

// Quantised on a pool's threads in chunks of rows, the source is the same row for row.
TEST(SnapshotSender, BuildSnapshotSourceOnAPoolEqualsTheSerialBuild) {
  physics::World world;
  std::vector<ObjectID> ids;
  for (int i = 0; i < 3000; ++i) {  // three chunks
    physics::BodyDesc d;
    d.shape = i % 3 ? physics::make_box({0.25f, 0.25f, 0.25f}) : physics::make_sphere(0.3f);
    d.position = {static_cast<float>(i % 50) * 1.5f, 0.3f + static_cast<float>(i / 50) * 0.01f, static_cast<float>(i / 50)};
    d.velocity = {0.1f * static_cast<float>(i % 7), 0, -0.05f * static_cast<float>(i % 5)};
    ids.push_back(world.create_object(d).id);
  }
  for (int i = 0; i < 3000; i += 7) world.destroy_object(ids[static_cast<size_t>(i)]);  // storage order != index order
  physics::BodyDesc again;
  again.shape = physics::make_sphere(0.25f);
  for (int i = 0; i < 100; ++i) world.create_object(again);
  world.step(1.0f / 60.0f);
  const wire::QuantizationConfig q;
  SnapshotSource serial, pooled;
  build_snapshot_source(world, q, &serial);
  const WorkerPool pool(3);
  build_snapshot_source(world, q, &pooled, &pool);
  ASSERT_EQ(pooled.ids.size(), world.object_count());
  EXPECT_EQ(pooled.ids, serial.ids);
  EXPECT_EQ(pooled.states, serial.states);
  EXPECT_EQ(pooled.positions, serial.positions);
  EXPECT_EQ(pooled.speeds, serial.speeds);
  EXPECT_EQ(pooled.descs, serial.descs);
  EXPECT_EQ(pooled.representable, serial.representable);
  EXPECT_EQ(pooled.changed_build, serial.changed_build);
  ASSERT_EQ(pooled.cell_rows.size(), serial.cell_rows.size());
  for (size_t i = 0; i < serial.cell_rows.size(); ++i) {
    ASSERT_EQ(pooled.cell_rows[i].cell, serial.cell_rows[i].cell);
    ASSERT_EQ(pooled.cell_rows[i].row, serial.cell_rows[i].row);
  }
}

// --- N1-like figures ---------------------------------------------------------------------------------

// Scene N1 (docs/BENCHMARKS.md, "Scenes") with real physics (900 cubes, a 50 kg player cube driven
// around a 10 m circle at 6 m/s by a PD controller), one snapshot per tick and acks one tick later
// (a loopback round trip), interest All. Measures the payload after the entries are through, and
// the bytes of each kind of record.
TEST(SnapshotSender, N1PayloadFigures) {
  physics::World world;
  physics::BodyDesc ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_plane();
  world.create_object(ground);
  for (int i = 0; i < 900; ++i) {
    physics::BodyDesc d;
    d.shape = physics::make_box({0.25f, 0.25f, 0.25f});
    d.position = {static_cast<float>(i % 30) - 14.5f, 0.25f, static_cast<float>(i / 30) - 14.5f};
    d.friction = 0.6f;
    world.create_object(d);
  }
  physics::BodyDesc player_desc;
  player_desc.shape = physics::make_box({1, 1, 1});
  player_desc.mass = 50.0f;
  player_desc.position = {-12, 1, 0};
  player_desc.friction = 0.6f;
  const ObjectID player = world.create_object(player_desc).id;

  SnapshotSenderConfig config;
  SnapshotSender sender(config);
  SnapshotReceiver receiver(config.quant);
  SnapshotSource src;
  Bytes out;
  constexpr int kSteps = 300;
  constexpr int kWarmup = 60;
  std::vector<uint32_t> bytes;
  uint64_t records = 0, deltas = 0, entries = 0, deferred = 0;
  uint32_t pending_ack = 0;
  const float dt = 1.0f / 60.0f;
  for (int step = 1; step <= kSteps; ++step) {
    // PD controller on the point moving around the circle at 6 m/s (0.6 rad/s), starting at -X.
    const float angle = 3.14159265f + 0.6f * static_cast<float>(step) * dt;
    const Vec3 target{10.0f * std::cos(angle), 1.0f, 10.0f * std::sin(angle)};
    const Vec3 target_velocity{-6.0f * std::sin(angle), 0.0f, 6.0f * std::cos(angle)};
    const physics::BodyState p = *world.get_object(player);
    Vec3 force = (target - p.position) * (50.0f * 8.0f) + (target_velocity - p.velocity) * (50.0f * 6.0f);
    force.y = 0.0f;
    world.apply_force(player, force);
    world.step(dt);

    build_snapshot_source(world, config.quant, &src);
    const uint32_t sequence = static_cast<uint32_t>(step);
    const SnapshotWriteStats s = sender.write(src, sequence, 1200, &out);
    ASSERT_LE(out.size(), 1200u);
    ASSERT_EQ(receiver.apply(sequence, src.tick, out), SnapshotError::None);
    if (pending_ack != 0) sender.on_acked(pending_ack);  // one tick of round trip
    pending_ack = sequence;
    if (step > kWarmup) {
      bytes.push_back(s.bytes);
      records += s.records;
      deltas += s.deltas;
      entries += s.entries;
      deferred += s.deferred;
    }
  }
  // The client's view matches the server's quantised state of every object it was sent.
  for (size_t i = 0; i < src.ids.size(); ++i) ASSERT_NE(receiver.find(src.ids[i]), nullptr);
  std::vector<uint32_t> sorted = bytes;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (uint32_t b : bytes) sum += b;
  const double avg = sum / static_cast<double>(bytes.size());
  const uint32_t p95 = sorted[sorted.size() * 95 / 100];
  std::printf("[ figures  ] N1-like, ticks %d-%d: payload avg %.1f B (%.1f kbit/s at 60 Hz), p95 %u B; full state %zu B;"
              " %.1f records per payload (%llu entries, %llu deltas, %llu deferred)\n",
              kWarmup + 1, kSteps, avg, avg * 8 * 60 / 1000, p95, wire::uncompressed_snapshot_bytes(src.ids.size()),
              static_cast<double>(records) / static_cast<double>(bytes.size()), static_cast<unsigned long long>(entries),
              static_cast<unsigned long long>(deltas), static_cast<unsigned long long>(deferred));
  EXPECT_LT(avg, 0.1 * static_cast<double>(wire::uncompressed_snapshot_bytes(src.ids.size())));

  // Record sizes: what one cube costs in each form.
  const wire::QuantizationLimits l = wire::derive_limits(config.quant);
  const Quat tumble = normalize(Quat{0.2f, 0.4f, -0.1f, 0.9f});
  const QuantizedState moving =
      wire::quantize_state({3.2f, 0.3f, -7.1f}, tumble, {2.5f, 0.4f, -1.0f}, {1.0f, -3.0f, 2.0f}, false, config.quant);
  const Quat tumble2 = normalize(Quat{0.2f + 0.012f, 0.4f - 0.01f, -0.1f + 0.02f, 0.9f});
  const QuantizedState moved = wire::quantize_state({3.2f + 2.5f / 60, 0.3f + 0.4f / 60, -7.1f - 1.0f / 60}, tumble2,
                                                    {2.5f, 0.4f - 0.16f, -1.0f}, {1.0f, -3.0f, 2.0f}, false, config.quant);
  const QuantizedState resting = wire::quantize_state({3.2f, 0.25f, -7.1f}, tumble, {}, {}, true, config.quant);
  wire::SnapshotRecord r;
  r.id = ObjectID{421, 1};
  r.desc = wire::ObjectDescription{wire::BodyKind::Dynamic, wire::ShapeKind::Box, {0.25f, 0.25f, 0.25f}, false};
  const uint32_t gap_bits = wire::index_gap_bits(20);  // a typical gap between changed cubes
  auto bytes_of = [&](uint32_t body) { return static_cast<double>(body + gap_bits) / 8.0; };
  r.kind = wire::RecordKind::Entry;
  r.state = moving;
  const double entry_moving = bytes_of(wire::record_body_bits(r, l));
  r.state = resting;
  const double entry_resting = bytes_of(wire::record_body_bits(r, l));
  r.kind = wire::RecordKind::Delta;
  r.baseline = moving;
  r.state = moved;
  r.baseline_distance = 2;
  const double delta_moving = bytes_of(wire::record_body_bits(r, l));
  r.state = resting;
  const double delta_to_rest = bytes_of(wire::record_body_bits(r, l));
  std::printf("[ figures  ] record bytes (gap of 20 included): entry %.2f (at rest %.2f), delta of a moving cube one"
              " tick on %.2f, delta of a cube coming to rest %.2f, acked cube at rest 0\n",
              entry_moving, entry_resting, delta_moving, delta_to_rest);
  EXPECT_LT(delta_moving, entry_moving / 2);
}

}  // namespace
}  // namespace impulse::server
