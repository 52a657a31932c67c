// World::save_state / restore_state: stepping a restored world (the same object, or a fresh one
// built with other settings and history) repeats the original trajectory bit for bit, with the
// same events and next ObjectIDs; round trips are byte-identical; truncated, corrupted,
// wrong-version, wrong-layout and tampered blobs are rejected with the world left unchanged.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "server/physics/convex_hull.h"
#include "server/physics/world.h"
#include "tests/scenes/bench_scenes.h"
#include "tests/support/rng.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using ::impulse::test::Rng;
using test::add;
using test::add_ground;
using test::box_desc;
using test::sphere_desc;

constexpr float kDt = 1.0f / 60.0f;

// Offsets of the documented layout (world_state.cpp): header 68 bytes (magic, version, 12
// fingerprint entries, payload size), settings 87, tick 8, resting_dirty 1, the hull, mesh and
// heightfield counts (4 each; none in these worlds), the slot map's four counts, then its arrays.
constexpr size_t kHeaderBytes = 68;
constexpr size_t kSettingsAt = kHeaderBytes;
constexpr size_t kRestingDirtyAt = kSettingsAt + 87 + 8;
constexpr size_t kSlotMapAt = kRestingDirtyAt + 1 + 4 + 4 + 4;  // resting_dirty, the hull, mesh and heightfield counts
constexpr size_t kGenerationsAt = kSlotMapAt + 16;
constexpr size_t kBodyBytes = 202;  // info grew by the collision filter (12 bytes) and held_until (8)

std::vector<uint8_t> save(const World& world) {
  std::vector<uint8_t> blob;
  world.save_state(blob);
  return blob;
}

void put_u32(std::vector<uint8_t>& blob, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) blob[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const std::vector<uint8_t>& blob, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(blob[at + static_cast<size_t>(i)]) << (8 * i);
  return v;
}
/// Recomputes the trailing XXH64 after a deliberate edit, so the payload checks are reached.
void reseal(std::vector<uint8_t>& blob) {
  const uint64_t h = XXH64(blob.data(), blob.size() - 8, 0);
  for (int i = 0; i < 8; ++i) blob[blob.size() - 8 + static_cast<size_t>(i)] = static_cast<uint8_t>(h >> (8 * i));
}

// FNV-1a over the events' fields: world_hash does not cover events.
uint64_t hash_events(std::span<const ContactEvent> events) {
  uint64_t h = 14695981039346656037ull;
  const auto add_u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  const auto add_vec = [&](Vec3 v) {
    add_u32(std::bit_cast<uint32_t>(v.x));
    add_u32(std::bit_cast<uint32_t>(v.y));
    add_u32(std::bit_cast<uint32_t>(v.z));
  };
  for (const ContactEvent& e : events) {
    add_u32(static_cast<uint32_t>(e.type));
    add_u32(e.a.index);
    add_u32(e.a.generation);
    add_u32(e.b.index);
    add_u32(e.b.generation);
    add_vec(e.point);
    add_vec(e.normal);
  }
  return h;
}

/// What one tick leaves observable.
struct TickRecord {
  uint64_t tick = 0;
  uint64_t hash = 0;    // bodies and contact caches
  uint64_t events = 0;  // hash_events of the tick's events
  uint32_t awake = 0;
  uint32_t resting = 0;
  friend bool operator==(const TickRecord&, const TickRecord&) = default;
};

std::vector<TickRecord> run(World& world, int ticks) {
  std::vector<TickRecord> out;
  for (int i = 0; i < ticks; ++i) {
    world.step(kDt);
    out.push_back({world.tick(), world.world_hash(), hash_events(world.contact_events()), world.awake_count(),
                   world.resting_contact_count()});
  }
  return out;
}

/// Asserts equal traces, naming the first tick that differs.
void expect_same_trace(const std::vector<TickRecord>& expected, const std::vector<TickRecord>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == actual[i]) continue;
    ADD_FAILURE() << "first divergence at tick " << expected[i].tick << " (step " << i + 1 << " after restore):"
                  << " hash " << expected[i].hash << " vs " << actual[i].hash << ", events " << expected[i].events
                  << " vs " << actual[i].events << ", awake " << expected[i].awake << " vs " << actual[i].awake;
    return;
  }
}

BodyDesc probe_desc() { return sphere_desc({50.0f, 0.5f, 50.0f}, 0.25f); }

Quat random_orientation(Rng& rng) {
  return normalize(Quat{rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(0.2f, 1)});
}

/// The busy scene of the save/restore tests, stepped to the save point: a stack asleep (resting
/// contacts frozen), a second stack just woken by a force (resting list dirty), a tumbling pile
/// of boxes, spheres and capsules with two materials and a material pair, a moving kinematic
/// pusher, a static sensor the pile falls through, pending forces and torques, and destroyed
/// objects (a non-trivial free list and pending End events).
struct BusyScene {
  WorldSettings settings;
  World world;
  ObjectID sleeping_top;
  ObjectID last_destroyed;  // top of the free list: the next create() reuses its slot
  std::vector<ObjectID> pile;

  BusyScene() : settings(make_settings()), world(settings) {
    add_ground(world);
    Rng rng(2024);
    // Throwaway bodies, destroyed below so the free list holds several slots.
    const ObjectID spare_a = add(world, sphere_desc({40.0f, 5.0f, 0.0f}));
    const ObjectID spare_b = add(world, sphere_desc({44.0f, 5.0f, 0.0f}));
    std::vector<ObjectID> stack_a;
    std::vector<ObjectID> stack_b;
    for (int i = 0; i < 3; ++i) {
      const float y = 0.5f + 1.001f * static_cast<float>(i);
      stack_a.push_back(add(world, box_desc({-10.0f, y, 0.0f})));
      stack_b.push_back(add(world, box_desc({-14.0f, y, 0.0f})));
    }
    sleeping_top = stack_a.back();

    BodyDesc sensor = box_desc({6.0f, 1.0f, 0.0f}, {2.0f, 1.0f, 2.0f}, 1.0f, BodyKind::Static);
    sensor.sensor = true;
    add(world, sensor);

    for (int i = 0; i < 24; ++i) {
      BodyDesc d;
      d.kind = BodyKind::Dynamic;
      if (i % 3 == 0) d.shape = make_box({rng.uniform(0.2f, 0.5f), rng.uniform(0.2f, 0.5f), rng.uniform(0.2f, 0.5f)});
      if (i % 3 == 1) d.shape = make_sphere(rng.uniform(0.2f, 0.45f));
      if (i % 3 == 2) d.shape = make_capsule(rng.uniform(0.15f, 0.3f), rng.uniform(0.1f, 0.4f));
      d.position = {rng.uniform(4.0f, 8.0f), 1.5f + 0.8f * static_cast<float>(i), rng.uniform(-1.5f, 1.5f)};
      d.orientation = random_orientation(rng);
      d.angular_velocity = {rng.uniform(-2, 2), rng.uniform(-2, 2), rng.uniform(-2, 2)};
      d.mass = rng.uniform(0.5f, 3.0f);
      d.restitution = i % 4 == 0 ? 0.4f : 0.0f;
      d.friction = rng.uniform(0.2f, 0.8f);
      d.material = static_cast<uint16_t>(1 + i % 2);
      pile.push_back(add(world, d));
    }
    EXPECT_EQ(world.set_material_pair(2, 1, MaterialPair{0.9f, 0.3f}), Error::Ok);

    BodyDesc pusher = box_desc({1.0f, 0.5f, 0.0f}, {0.5f, 0.5f, 2.5f}, 0.0f, BodyKind::Kinematic);
    pusher.velocity = {0.8f, 0.0f, 0.0f};
    add(world, pusher);

    EXPECT_EQ(world.destroy_object(spare_b), Error::Ok);
    for (int i = 0; i < 150; ++i) world.step(kDt);
    EXPECT_EQ(world.destroy_object(spare_a), Error::Ok);
    const int steps = test::step_until(world, kDt, 600, [&] { return test::state(world, sleeping_top).sleeping; });
    EXPECT_LT(steps, 600) << "stack A did not fall asleep";
    EXPECT_TRUE(test::state(world, stack_b.back()).sleeping) << "stack B did not fall asleep";

    // The save point: pending forces and torques on awake bodies, stack B woken by a force (its
    // resting contacts wait for reactivation), and a pile body with contacts destroyed (End
    // events pending, partners woken).
    uint32_t forced = 0;
    for (const ObjectID id : pile) {
      if (test::state(world, id).sleeping) continue;
      EXPECT_EQ(world.apply_force(id, {3.0f, 4.0f, -2.0f}, test::state(world, id).position + Vec3{0.1f, 0, 0}),
                Error::Ok);
      EXPECT_EQ(world.apply_torque(id, {0.0f, 0.5f, 0.0f}), Error::Ok);
      if (++forced == 3) break;
    }
    EXPECT_EQ(world.apply_force(stack_b.back(), {0.0f, 2.0f, 0.0f}), Error::Ok);
    for (const ObjectID id : pile) {
      if (!world.is_colliding(id)) continue;
      EXPECT_EQ(world.destroy_object(id), Error::Ok);
      last_destroyed = id;
      pile.erase(std::find(pile.begin(), pile.end(), id));
      break;
    }
    EXPECT_FALSE(last_destroyed.is_null()) << "no pile body had contacts";
  }

  static WorldSettings make_settings() {
    WorldSettings s;
    s.cell_size = 1.5f;
    s.friction_mix = MixRule::Average;
    s.sleep_time_s = 0.4f;
    return s;
  }
};

/// A world built differently from the busy scene: other settings, other bodies, other history.
World make_unrelated_world() {
  WorldSettings other;
  other.gravity = {0.0f, -3.0f, 1.0f};
  other.cell_size = 7.0f;
  other.max_cells_per_body = 8;
  other.substeps = 2;
  other.allow_sleep = false;
  other.restitution_mix = MixRule::Min;
  World world(other);
  add_ground(world);
  for (int i = 0; i < 5; ++i) add(world, sphere_desc({static_cast<float>(i), 3.0f, 0.0f}));
  EXPECT_EQ(world.destroy_object(add(world, box_desc({0.0f, 9.0f, 0.0f}))), Error::Ok);
  for (int i = 0; i < 20; ++i) world.step(kDt);
  return world;
}

// --- Bit-exact continuation ------------------------------------------------------------------------

TEST(WorldState, BusySceneContinuesBitExactlyAfterRestore) {
  BusyScene scene;
  World& world = scene.world;
  // The save point holds every kind of state this test is about.
  uint32_t sleeping = 0;
  world.for_each_object([&](const BodyState& s) { sleeping += s.sleeping ? 1u : 0u; });
  ASSERT_GT(sleeping, 0u);
  ASSERT_GT(world.awake_count(), 0u);
  ASSERT_GT(world.resting_contact_count(), 0u);
  ASSERT_FALSE(world.get_collisions().empty());

  const std::vector<uint8_t> blob = save(world);
  const uint64_t saved_tick = world.tick();
  const uint64_t saved_hash = world.world_hash();
  const std::vector<TickRecord> reference = run(world, 300);
  const ObjectID reference_next = add(world, probe_desc());
  // The free list is LIFO: the body destroyed last gives its slot, one generation on.
  EXPECT_EQ(reference_next, (ObjectID{scene.last_destroyed.index, scene.last_destroyed.generation + 1}));

  // 1. Into the same world, 300 ticks and a creation later.
  std::string error;
  ASSERT_TRUE(world.restore_state(blob, &error)) << error;
  EXPECT_EQ(world.tick(), saved_tick);
  EXPECT_EQ(world.world_hash(), saved_hash);
  expect_same_trace(reference, run(world, 300));
  EXPECT_EQ(add(world, probe_desc()), reference_next);

  // 2. Into a fresh world with other settings, bodies and history.
  World fresh = make_unrelated_world();
  ASSERT_TRUE(fresh.restore_state(blob, &error)) << error;
  EXPECT_EQ(fresh.settings().cell_size, scene.settings.cell_size);
  EXPECT_EQ(fresh.settings().friction_mix, MixRule::Average);
  EXPECT_EQ(fresh.tick(), saved_tick);
  EXPECT_EQ(fresh.world_hash(), saved_hash);
  expect_same_trace(reference, run(fresh, 300));
  EXPECT_EQ(add(fresh, probe_desc()), reference_next);
}

// The whole state (awake order, islands, events, settings, free list), not only the hash, stays
// identical tick by tick: the two worlds' blobs match after every step, while the worlds'
// broadphases were built by different histories.
TEST(WorldState, RestoredWorldSavesTheSameBytesAsTheOriginalEveryTick) {
  BusyScene scene;
  const std::vector<uint8_t> blob = save(scene.world);
  World copy = make_unrelated_world();
  std::string error;
  ASSERT_TRUE(copy.restore_state(blob, &error)) << error;
  for (int i = 0; i < 240; ++i) {
    scene.world.step(kDt);
    copy.step(kDt);
    ASSERT_TRUE(save(copy) == save(scene.world)) << "tick " << scene.world.tick();
    // Queries read the rebuilt broadphase and the rebuilt query cache.
    ASSERT_EQ(copy.get_collisions().size(), scene.world.get_collisions().size());
  }
  std::vector<RayHit> a;
  std::vector<RayHit> b;
  scene.world.raycast_all({-20.0f, 0.5f, 0.0f}, {40.0f, 0.0f, 0.0f}, a);
  copy.raycast_all({-20.0f, 0.5f, 0.0f}, {40.0f, 0.0f, 0.0f}, b);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].fraction, b[i].fraction);
  }
}

TEST(WorldState, RoundTripGivesIdenticalBytes) {
  BusyScene scene;
  const std::vector<uint8_t> blob = save(scene.world);
  World fresh = make_unrelated_world();
  std::string error;
  ASSERT_TRUE(fresh.restore_state(blob, &error)) << error;
  EXPECT_EQ(save(fresh), blob);
  ASSERT_TRUE(scene.world.restore_state(blob, &error)) << error;
  EXPECT_EQ(save(scene.world), blob);
  // The events of the last step and the pending End events came back too.
  EXPECT_EQ(hash_events(fresh.contact_events()), hash_events(scene.world.contact_events()));
  // save_state clears its output first.
  std::vector<uint8_t> reused(17, 0xab);
  fresh.save_state(reused);
  EXPECT_EQ(reused, blob);
}

TEST(WorldState, EmptyWorldRoundTrips) {
  World empty;
  const std::vector<uint8_t> blob = save(empty);
  EXPECT_EQ(blob.size(), kHeaderBytes + 87 + 9 + 16 + 4 * 13 + 8);  // 13 empty arrays (hulls, meshes, heightfields among them)
  World busy = make_unrelated_world();
  ASSERT_TRUE(busy.restore_state(blob, nullptr));
  EXPECT_EQ(busy.object_count(), 0u);
  EXPECT_EQ(busy.tick(), 0u);
  EXPECT_EQ(busy.world_hash(), empty.world_hash());
  EXPECT_EQ(add(busy, probe_desc()), (ObjectID{0, 1}));
}

// Spheres resting on the ground: one-point contact records, the smallest kind, fill the end of the
// blob. The restore's bound on a list's size must use a record's true minimum (47 + 40 bytes), or
// it refuses this valid state as truncated.
TEST(WorldState, OnePointContactsAtTheEndOfTheBlobRestore) {
  World world;
  add_ground(world);
  for (int i = 0; i < 3; ++i) add(world, sphere_desc({2.0f * static_cast<float>(i), 0.5f, 0.0f}));
  run(world, 30);
  ASSERT_GT(world.resting_contact_count(), 0u);
  const std::vector<uint8_t> blob = save(world);
  const std::vector<TickRecord> reference = run(world, 60);
  World fresh = make_unrelated_world();
  std::string error;
  ASSERT_TRUE(fresh.restore_state(blob, &error)) << error;
  expect_same_trace(reference, run(fresh, 60));
}

// A pile of 1000 boxes (scene S2, docs/BENCHMARKS.md "Scenes") mid-fall, its lower layers
// landed: the blob's size per body and the save and restore times are reported; the restored
// world continues bit-exactly.
TEST(WorldState, PileOf1000Boxes) {
  const scenes::BenchScene pile = scenes::make_s2_pile(1000);
  World world;
  scenes::load_into(world, pile);
  for (int i = 0; i < 45; ++i) world.step(kDt);  // the lower layers have landed
  ASSERT_GT(world.get_collisions().size(), 500u);

  // Best of 5 runs each, so page faults of the first allocation do not count.
  std::vector<uint8_t> blob;
  World restored;
  std::string error;
  double save_ms = 1e9;
  double restore_ms = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    world.save_state(blob);
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(restored.restore_state(blob, &error)) << error;
    const auto t2 = std::chrono::steady_clock::now();
    save_ms = std::min(save_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
    restore_ms = std::min(restore_ms, std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::cout << "[ figures  ] S2 pile: " << world.object_count() << " objects, " << world.get_collisions().size()
            << " contacts, blob " << blob.size() << " bytes = "
            << static_cast<double>(blob.size()) / world.object_count() << " bytes/object; save " << save_ms
            << " ms, restore " << restore_ms << " ms\n";
  EXPECT_LT(blob.size(), size_t{1000} * 1000);  // well under 1 kB per body, contacts included

  expect_same_trace(run(world, 10), run(restored, 10));
}

// --- Rejections --------------------------------------------------------------------------------------

/// A small world with every section non-empty: S = 5 slots, L = 4 live, F = 1 free, one awake
/// kinematic body, a sleeping box on the ground (resting contact) and a material pair.
struct SmallWorld {
  World world;
  SmallWorld() {
    add_ground(world);
    const ObjectID temp = add(world, sphere_desc({5.0f, 5.0f, 5.0f}));
    add(world, box_desc({0.0f, 0.5f, 0.0f}));
    BodyDesc kinematic = box_desc({-20.0f, 3.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, 0.0f, BodyKind::Kinematic);
    kinematic.velocity = {0.0f, 0.0f, 1.0f};
    add(world, kinematic);
    add(world, sphere_desc({8.0f, 0.5f, 0.0f}));
    EXPECT_EQ(world.destroy_object(temp), Error::Ok);
    EXPECT_EQ(world.set_material_pair(3, 4, MaterialPair{0.1f, 0.2f}), Error::Ok);
    for (int i = 0; i < 90; ++i) world.step(kDt);
    EXPECT_EQ(world.awake_count(), 1u);  // the kinematic body
    EXPECT_EQ(world.resting_contact_count(), 2u);
  }
};

/// Restores `blob` into `world`, expecting a rejection whose message contains `needle` and no
/// change at all to the world.
void expect_rejected(World& world, const std::vector<uint8_t>& blob, const std::string& needle) {
  const std::vector<uint8_t> before = save(world);
  const uint64_t hash = world.world_hash();
  std::string error;
  EXPECT_FALSE(world.restore_state(blob, &error));
  EXPECT_NE(error.find(needle), std::string::npos) << "error: " << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
  EXPECT_EQ(world.world_hash(), hash);
  EXPECT_TRUE(save(world) == before) << "the world changed";
}

TEST(WorldState, RejectsEveryTruncation) {
  SmallWorld small;
  const std::vector<uint8_t> blob = save(small.world);
  World target = make_unrelated_world();
  const std::vector<uint8_t> before = save(target);
  for (size_t n = 0; n < blob.size(); ++n) {
    std::string error;
    ASSERT_FALSE(target.restore_state(std::span(blob.data(), n), &error)) << n;
    ASSERT_NE(error.find("truncated"), std::string::npos) << n << ": " << error;
  }
  EXPECT_TRUE(save(target) == before);

  // A big blob: a sample of prefixes, and one byte too many.
  BusyScene scene;
  const std::vector<uint8_t> big = save(scene.world);
  Rng rng(5);
  for (int i = 0; i < 200; ++i) {
    const size_t n = rng.below(static_cast<uint32_t>(big.size()));
    ASSERT_FALSE(target.restore_state(std::span(big.data(), n), nullptr)) << n;
  }
  std::vector<uint8_t> longer = big;
  longer.push_back(0);
  expect_rejected(target, longer, "unexpected bytes");
  EXPECT_TRUE(save(target) == before);
}

TEST(WorldState, RejectsAnyFlippedByte) {
  SmallWorld small;
  const std::vector<uint8_t> blob = save(small.world);
  World target = make_unrelated_world();
  const std::vector<uint8_t> before = save(target);
  size_t checksum_errors = 0;
  for (size_t i = 0; i < blob.size(); ++i) {
    std::vector<uint8_t> bad = blob;
    bad[i] ^= 0xff;
    std::string error;
    ASSERT_FALSE(target.restore_state(bad, &error)) << "byte " << i;
    ASSERT_FALSE(error.empty());
    checksum_errors += error.find("checksum") != std::string::npos ? 1 : 0;
  }
  // Every byte past the header's version, fingerprint and size fields is caught by the checksum.
  EXPECT_EQ(checksum_errors, blob.size() - kHeaderBytes);
  EXPECT_TRUE(save(target) == before);
}

// world_hash reads the settings, the body columns, the contact caches and the material pairs
// through the field lists save_state writes them with (world_fields.h): any one-bit change to a
// byte of those sections that restore accepts must change the hash. A field saved but not hashed
// fails here.
TEST(WorldState, WorldHashSeesEveryFieldSavedForTheStep) {
  SmallWorld small;
  const std::vector<uint8_t> blob = save(small.world);
  const uint64_t original = small.world.world_hash();
  const uint32_t slots = get_u32(blob, kSlotMapAt + 4);
  const uint32_t live = get_u32(blob, kSlotMapAt + 8);
  const uint32_t free_slots = get_u32(blob, kSlotMapAt + 12);
  const size_t bodies_at = kGenerationsAt + 4 * (size_t{slots} + live + free_slots);
  const size_t awake_at = bodies_at + live * kBodyBytes;
  const size_t contacts_at = awake_at + 4 + 4 * size_t{get_u32(blob, awake_at)};
  size_t at = contacts_at;
  uint32_t records = 0;
  for (int list = 0; list < 2; ++list) {  // active, then resting: 47 bytes and 40 per point
    const uint32_t n = get_u32(blob, at);
    at += 4;
    for (uint32_t i = 0; i < n; ++i, ++records) at += 47 + 40 * size_t{blob[at + 44]};
  }
  const size_t contacts_end = at;
  for (int list = 0; list < 2; ++list) at += 4 + 41 * size_t{get_u32(blob, at)};  // events
  const uint32_t islands = get_u32(blob, at);
  at += 4;
  for (uint32_t i = 0; i < islands; ++i) at += 4 + 4 * size_t{get_u32(blob, at)};
  at += 4 + 4 * size_t{get_u32(blob, at)};  // free islands
  const size_t pairs_at = at;
  const size_t pairs_end = pairs_at + 4 + 12 * size_t{get_u32(blob, pairs_at)};
  ASSERT_EQ(pairs_end + 4 + 4 + 8, blob.size()) << "no joints and no free joint slots, then the checksum";
  ASSERT_GE(records, 2u);

  const std::pair<size_t, size_t> sections[] = {
      {kSettingsAt, kSettingsAt + 87}, {bodies_at, awake_at}, {contacts_at, contacts_end}, {pairs_at, pairs_end}};
  World target;
  size_t accepted = 0;
  size_t tried = 0;
  for (const auto& [begin, end] : sections) {
    for (size_t i = begin; i < end; ++i, ++tried) {
      std::vector<uint8_t> edited = blob;
      edited[i] ^= 0x01;
      reseal(edited);
      if (!target.restore_state(edited, nullptr)) continue;
      ++accepted;
      EXPECT_NE(target.world_hash(), original) << "byte " << i << " is saved but not hashed";
    }
  }
  std::cout << "[ figures  ] " << accepted << " of " << tried << " one-bit edits restored, each with a new hash\n";
  EXPECT_GT(accepted, tried / 2);
  ASSERT_TRUE(target.restore_state(blob, nullptr));
  EXPECT_EQ(target.world_hash(), original);
}

TEST(WorldState, RejectsWrongMagicVersionAndFingerprint) {
  SmallWorld small;
  const std::vector<uint8_t> blob = save(small.world);
  World target = make_unrelated_world();

  std::vector<uint8_t> bad = blob;
  bad[0] = 'X';
  expect_rejected(target, bad, "magic");

  bad = blob;
  put_u32(bad, 4, get_u32(blob, 4) + 1);
  expect_rejected(target, bad, "version");

  // A build whose Motion has one more float, and one with one more fingerprint entry.
  bad = blob;
  put_u32(bad, 12 + 4 * 1, get_u32(blob, 12 + 4 * 1) + 4);
  expect_rejected(target, bad, "sizeof(Motion)");
  bad = blob;
  put_u32(bad, 8, get_u32(blob, 8) + 1);
  expect_rejected(target, bad, "fingerprint");

  // A wrong payload size, with a valid checksum.
  bad = blob;
  put_u32(bad, kHeaderBytes - 8, get_u32(blob, kHeaderBytes - 8) + 1);
  reseal(bad);
  expect_rejected(target, bad, "truncated");
}

// Edits with a valid checksum (a writer bug, or a crafted file): every count and index is
// range-checked and the parts must agree. Offsets follow the documented layout.
TEST(WorldState, RejectsInconsistentPayloads) {
  SmallWorld small;
  const std::vector<uint8_t> blob = save(small.world);
  ASSERT_EQ(get_u32(blob, kSlotMapAt + 4), 5u);  // S
  ASSERT_EQ(get_u32(blob, kSlotMapAt + 8), 4u);  // L
  ASSERT_EQ(get_u32(blob, kSlotMapAt + 12), 1u);  // F
  const size_t dense_at = kGenerationsAt + 4 * 5;
  const size_t free_at = dense_at + 4 * 4;
  const size_t bodies_at = free_at + 4 * 1;
  const size_t info_at = bodies_at + 4 * (52 + 72 + 21 + 10);
  const size_t awake_at = bodies_at + 4 * kBodyBytes;
  ASSERT_EQ(get_u32(blob, awake_at), 1u);
  const size_t contacts_at = awake_at + 8;
  ASSERT_EQ(get_u32(blob, contacts_at), 0u);      // active contacts
  ASSERT_EQ(get_u32(blob, contacts_at + 4), 2u);  // resting contacts
  const size_t resting_at = contacts_at + 8;

  World target = make_unrelated_world();
  struct Case {
    const char* name;
    size_t at;
    uint32_t value;
    const char* needle;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Case cases[] = {
      {"cell_size NaN", kSettingsAt + 12, std::bit_cast<uint32_t>(nan), "settings"},
      {"substeps 0", kSettingsAt + 24, 0, "substeps"},
      {"huge live count", kSlotMapAt + 8, 0xffffffffu, "count"},
      {"generation 0", kGenerationsAt, 0, "generation"},
      {"dense slot out of range", dense_at, 77, "out of range"},
      {"slot live twice", dense_at + 4, get_u32(blob, dense_at), "twice"},
      {"free slot also live", free_at, get_u32(blob, dense_at), "free slot"},
      {"position NaN", bodies_at, std::bit_cast<uint32_t>(nan), "body 0"},
      {"body kind 7", info_at, 7, "body kind"},
      {"awake index wrong", awake_at + 4, get_u32(blob, dense_at), "awake list"},
      {"awake slot out of range", awake_at + 4, 1000000, "awake list"},
      {"resting count too large", contacts_at + 4, 1000, "count"},
      {"contact id stale", resting_at + 4, 99, "not live"},
      {"contact ids swapped", resting_at, get_u32(blob, resting_at + 8), "a < b"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<uint8_t> bad = blob;
    put_u32(bad, c.at, c.value);
    reseal(bad);
    expect_rejected(target, bad, c.needle);
  }
  // A bool that is neither 0 nor 1.
  std::vector<uint8_t> bad = blob;
  bad[kRestingDirtyAt] = 2;
  reseal(bad);
  expect_rejected(target, bad, "resting_dirty");
  // A contact count that disagrees with the lists.
  bad = blob;
  ASSERT_EQ(get_u32(blob, info_at + 19), 2u);  // body 0 (the ground): contact_count, under the box and the sphere
  put_u32(bad, info_at + 19, 3);
  reseal(bad);
  expect_rejected(target, bad, "contact_count");
}

/// Applies `iterations` random edits of 1 to 3 payload bytes to `blob`, reseals each and restores
/// it into a copy of `base`; returns how many were accepted.
uint32_t restore_random_edits(const std::vector<uint8_t>& blob, const World& base, int iterations, int steps,
                              uint64_t seed) {
  const std::vector<uint8_t> before = save(base);
  Rng rng(seed);
  uint32_t accepted = 0;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    std::vector<uint8_t> bad = blob;
    const uint32_t edits = 1 + rng.below(3);
    for (uint32_t e = 0; e < edits; ++e) {
      const size_t at = kHeaderBytes + rng.below(static_cast<uint32_t>(blob.size() - kHeaderBytes - 8));
      bad[at] = rng.below(4) == 0 ? static_cast<uint8_t>(bad[at] ^ (1u << rng.below(8)))
                                  : static_cast<uint8_t>(rng.below(256));
    }
    reseal(bad);
    World world = base;
    if (!world.restore_state(bad, nullptr)) {
      EXPECT_TRUE(save(world) == before) << "iteration " << iteration;
      continue;
    }
    ++accepted;
    for (int i = 0; i < steps; ++i) world.step(kDt);
    std::vector<RayHit> hits;
    world.raycast_all({-30.0f, 0.5f, 0.0f}, {60.0f, 0.0f, 0.0f}, hits);
    std::vector<ObjectID> ids;
    world.overlap_aabb(Aabb{{-30.0f, -1.0f, -30.0f}, {30.0f, 10.0f, 30.0f}}, ids);
    (void)world.get_collisions();
    if (!ids.empty()) (void)world.destroy_object(ids.front());
    world.step(kDt);
    // The step keeps the invariants restore checks.
    std::vector<uint8_t> again;
    world.save_state(again);
    World twin;
    std::string error;
    EXPECT_TRUE(twin.restore_state(again, &error)) << "iteration " << iteration << ": " << error;
  }
  std::cout << "[ figures  ] " << accepted << " of " << iterations << " random edits accepted\n";
  return accepted;
}

// Random edits with a valid checksum: restore either rejects them (world unchanged) or accepts a
// state that the step, queries, destroy and save then handle without undefined behaviour (the
// sanitizer build runs this too). Most edits of a float are still a valid state; most
// structural ones are not.
TEST(WorldState, RandomResealedEditsNeverBreakTheWorld) {
  const World base = make_unrelated_world();
  SmallWorld small;
  const uint32_t small_accepted = restore_random_edits(save(small.world), base, 1500, 4, 99);
  EXPECT_GT(small_accepted, 0u);
  EXPECT_LT(small_accepted, 1500u);
  BusyScene scene;
  const uint32_t busy_accepted = restore_random_edits(save(scene.world), base, 150, 1, 100);
  EXPECT_GT(busy_accepted, 0u);
  EXPECT_LT(busy_accepted, 150u);
}

// --- SlotMap::restore ------------------------------------------------------------------------------

/// Runs random creates and destroys on `map`, recording every id create() returns.
std::vector<ObjectID> churn(SlotMap& map, Rng& rng, int ops) {
  std::vector<ObjectID> created;
  for (int i = 0; i < ops; ++i) {
    if (map.size() == 0 || rng.below(3) != 0) {
      created.push_back(map.create());
    } else {
      EXPECT_TRUE(map.destroy(map.id_at(rng.below(map.size()))).has_value());
    }
  }
  return created;
}

// A map rebuilt from its parts, retired slots included (max_generation 3), hands out the same ids
// and keeps the same dense order as the original under the same later operations.
TEST(WorldState, SlotMapRestoredFromPartsBehavesLikeTheOriginal) {
  SlotMap original(3);
  Rng rng(11);
  churn(original, rng, 400);
  for (int i = 0; i < 5 && original.size() > 0; ++i) ASSERT_TRUE(original.destroy(original.id_at(0)).has_value());
  ASSERT_GT(original.retired_count(), 0u);
  ASSERT_GT(original.free_count(), 0u);

  SlotMap copy;
  ASSERT_EQ(SlotMap::restore(original.max_generation(), original.generations(), original.dense_slots(),
                             original.free_slots(), copy),
            nullptr);
  EXPECT_EQ(copy.retired_count(), original.retired_count());
  EXPECT_EQ(copy.slot_count(), original.slot_count());
  for (uint32_t d = 0; d < original.size(); ++d) EXPECT_EQ(copy.find(original.id_at(d)), d);

  Rng rng_a(12);
  Rng rng_b(12);
  EXPECT_EQ(churn(original, rng_a, 400), churn(copy, rng_b, 400));
  ASSERT_EQ(copy.size(), original.size());
  for (uint32_t d = 0; d < original.size(); ++d) EXPECT_EQ(copy.id_at(d), original.id_at(d));
}

TEST(WorldState, SlotMapRestoreRejectsInconsistentParts) {
  SlotMap map;
  const ObjectID kept = map.create();
  const ObjectID gone = map.create();
  ASSERT_TRUE(map.destroy(gone).has_value());
  (void)kept;
  const std::vector<uint32_t> generations{1, 2};  // slot 1 was bumped when destroyed
  const auto rejects = [&](uint32_t max_generation, std::vector<uint32_t> gens, std::vector<uint32_t> dense,
                           std::vector<uint32_t> free) {
    SlotMap out;
    const ObjectID marker = out.create();
    const char* why = SlotMap::restore(max_generation, gens, dense, free, out);
    EXPECT_TRUE(out.contains(marker)) << "out changed";
    return why != nullptr;
  };
  EXPECT_FALSE(rejects(0xffffffffu, generations, {0}, {1}));  // the real parts
  EXPECT_TRUE(rejects(0, generations, {0}, {1}));             // max_generation 0
  EXPECT_TRUE(rejects(0xffffffffu, {0, 2}, {0}, {1}));        // generation 0
  EXPECT_TRUE(rejects(1, generations, {0}, {1}));             // generation above the maximum
  EXPECT_TRUE(rejects(0xffffffffu, generations, {2}, {1}));   // live slot out of range
  EXPECT_TRUE(rejects(0xffffffffu, generations, {0, 0}, {}));  // live twice
  EXPECT_TRUE(rejects(0xffffffffu, generations, {0}, {0}));   // live and free
  EXPECT_TRUE(rejects(0xffffffffu, generations, {0}, {1, 1}));  // free twice
  EXPECT_TRUE(rejects(0xffffffffu, generations, {0}, {}));    // slot 1 neither live, free nor retired
  EXPECT_FALSE(rejects(2, generations, {0}, {}));             // ... unless at max_generation: retired
}

// --- The broadphase is rebuilt, not saved --------------------------------------------------------

// Restore rebuilds the SpatialHash by adding the parked proxies in dense order; the original got
// them through a history of parks, unparks, merges and queued changes. Pairs, box queries and
// ray queries must not depend on that history.
TEST(WorldState, BroadphaseResultsDoNotDependOnItsHistory) {
  Rng rng(31);
  const auto random_box = [&](float spread) {
    const Vec3 c{rng.uniform(-spread, spread), rng.uniform(0, 10), rng.uniform(-spread, spread)};
    const Vec3 h{rng.uniform(0.1f, 1.5f), rng.uniform(0.1f, 1.5f), rng.uniform(0.1f, 1.5f)};
    return Aabb{c - h, c + h};
  };
  std::vector<Aabb> parked(400);
  for (Aabb& box : parked) box = random_box(30);
  parked[7] = Aabb{{-100, -2, -100}, {100, 0, 100}};  // a large proxy (the ground)
  std::vector<uint32_t> moving_ids;
  std::vector<Aabb> moving_boxes;
  for (uint32_t i = 0; i < 150; ++i) {
    moving_ids.push_back(1000 + i);
    moving_boxes.push_back(random_box(30));
  }

  // History: everything parked, then rounds of unparking and re-parking (bodies waking and
  // falling asleep again) with a find_pairs between rounds, so the tiers hold queued, recent
  // and stale entries at the end.
  SpatialHash history(2.0f, 64);
  std::vector<ProxyPair> pairs;
  for (uint32_t id = 0; id < parked.size(); ++id) history.add_parked(id, random_box(30));
  for (int round = 0; round < 30; ++round) {
    for (int k = 0; k < 25; ++k) {
      const uint32_t id = rng.below(static_cast<uint32_t>(parked.size()));
      if (rng.below(2) == 0) {
        history.remove_parked(id);
      } else {
        history.add_parked(id, random_box(30));
      }
    }
    history.find_pairs(moving_ids, moving_boxes, pairs);
  }
  for (uint32_t id = 0; id < parked.size(); ++id) history.add_parked(id, parked[id]);  // final boxes
  for (uint32_t id = 0; id < 40; ++id) history.remove_parked(id * 10 + 3);

  // Rebuilt as restore does: one add per parked proxy, in index order.
  SpatialHash rebuilt(2.0f, 64);
  for (uint32_t id = 0; id < parked.size(); ++id) {
    if (id % 10 != 3) rebuilt.add_parked(id, parked[id]);
  }
  ASSERT_EQ(rebuilt.parked_count(), history.parked_count());

  std::vector<ProxyPair> pairs_history;
  std::vector<ProxyPair> pairs_rebuilt;
  history.find_pairs(moving_ids, moving_boxes, pairs_history);
  rebuilt.find_pairs(moving_ids, moving_boxes, pairs_rebuilt);
  ASSERT_FALSE(pairs_rebuilt.empty());
  EXPECT_EQ(pairs_history, pairs_rebuilt);
  std::vector<uint32_t> a;
  std::vector<uint32_t> b;
  for (int i = 0; i < 50; ++i) {
    const Aabb box = random_box(35);
    history.query(box, a);
    rebuilt.query(box, b);
    EXPECT_EQ(a, b);
    const Vec3 origin{rng.uniform(-30, 30), rng.uniform(0, 10), rng.uniform(-30, 30)};
    const Vec3 translation{rng.uniform(-40, 40), rng.uniform(-5, 5), rng.uniform(-40, 40)};
    history.query_ray(origin, translation, a);
    rebuilt.query_ray(origin, translation, b);
    EXPECT_EQ(a, b);
  }
}


// A world with hulls, every byte of its blob flipped one bit at a time and resealed: restore
// either refuses it with a reason or gives a world that steps and hashes without a crash and stays
// finite (the hull section is parsed as hostile input: counts, indices, planes, mass properties).
TEST(WorldState, AWorldWithHullsSurvivesEveryResealedBitFlip) {
  World world;
  test::add_ground(world);
  std::vector<Vec3> points;
  for (int i = 0; i < 8; ++i) points.push_back({(i & 1) ? 0.4f : -0.3f, (i & 2) ? 0.5f : -0.2f, (i & 4) ? 0.3f : -0.3f});
  points.push_back({0.0f, 0.8f, 0.0f});
  const HullBuild b = build_convex_hull(points);
  ASSERT_TRUE(b.ok()) << b.error;
  const ConvexHull* hull = world.add_hull(b.hull);
  ASSERT_NE(hull, nullptr);
  for (int k = 0; k < 2; ++k) {
    BodyDesc d;
    d.shape = make_hull(*hull);
    d.position = {0.2f * float(k), 0.6f + 1.2f * float(k), 0.0f};
    test::add(world, d);
  }
  for (int i = 0; i < 20; ++i) world.step(kDt);
  std::vector<uint8_t> blob;
  world.save_state(blob);
  size_t restored = 0;
  for (size_t i = kHeaderBytes; i + 8 < blob.size(); ++i) {
    for (const uint8_t bit : {uint8_t{0x01}, uint8_t{0x10}, uint8_t{0x80}}) {
      std::vector<uint8_t> edited = blob;
      edited[i] ^= bit;
      reseal(edited);
      World target;
      std::string error;
      if (!target.restore_state(edited, &error)) {
        EXPECT_FALSE(error.empty());
        continue;
      }
      ++restored;
      target.step(kDt);
      (void)target.world_hash();
      target.for_each_object([&](const BodyState& s) { EXPECT_TRUE(is_finite(s.position)) << "byte " << i; });
    }
  }
  EXPECT_GT(restored, 0u);
}


// A saved world whose max_cells_per_body is huge (fuzz_convex_hull's reproducer: 0x53747974)
// would make its first step bin billions of cells: restore refuses it, naming the field.
TEST(WorldState, ASavedWorldWithAHugeCellCountPerBodyIsRefused) {
  World world;
  test::add_ground(world);
  test::add(world, test::box_desc({0.0f, 1.0f, 0.0f}));
  std::vector<uint8_t> blob;
  world.save_state(blob);
  const size_t at = kSettingsAt + 16;  // gravity 12 bytes, cell_size 4, then max_cells_per_body
  ASSERT_EQ(blob[at] | (blob[at + 1] << 8) | (blob[at + 2] << 16) | (blob[at + 3] << 24), 64);
  const uint32_t huge = 0x53747974u;
  for (int i = 0; i < 4; ++i) blob[at + static_cast<size_t>(i)] = static_cast<uint8_t>(huge >> (8 * i));
  reseal(blob);
  World target;
  std::string error;
  EXPECT_FALSE(target.restore_state(blob, &error));
  EXPECT_NE(error.find("max_cells_per_body"), std::string::npos) << error;
}

}  // namespace
}  // namespace impulse::physics
