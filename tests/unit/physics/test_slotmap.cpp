// SlotMap: generations, stale-id rejection, wrap-around retirement, dense swap-remove iteration.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "server/physics/slotmap.h"

namespace impulse::physics {
namespace {

TEST(SlotMap, CreateFindDestroy) {
  SlotMap map;
  const ObjectID a = map.create();
  const ObjectID b = map.create();
  const ObjectID c = map.create();
  EXPECT_EQ(a, (ObjectID{0, 1}));
  EXPECT_EQ(b, (ObjectID{1, 1}));
  EXPECT_EQ(c, (ObjectID{2, 1}));
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.find(a), 0u);
  EXPECT_EQ(map.find(b), 1u);
  EXPECT_EQ(map.find(c), 2u);

  const auto erased = map.destroy(a);
  ASSERT_TRUE(erased.has_value());
  // The last element (c) moved into a's hole.
  EXPECT_EQ(erased->hole, 0u);
  EXPECT_EQ(erased->last, 2u);
  EXPECT_EQ(map.size(), 2u);
  EXPECT_FALSE(map.contains(a));
  EXPECT_EQ(map.find(c), 0u);
  EXPECT_EQ(map.find(b), 1u);
  EXPECT_EQ(map.id_at(0), c);
  EXPECT_EQ(map.id_at(1), b);

  // Destroying the last element moves nothing.
  const auto last = map.destroy(b);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->hole, last->last);
}

TEST(SlotMap, NullIdIsNeverLive) {
  SlotMap map;
  EXPECT_FALSE(map.contains(ObjectID{}));
  const ObjectID a = map.create();
  EXPECT_EQ(a.index, 0u);  // slot 0 exists now, with generation 1
  EXPECT_FALSE(map.contains(ObjectID{}));
  EXPECT_FALSE(map.destroy(ObjectID{}).has_value());
  EXPECT_TRUE(map.contains(a));
}

TEST(SlotMap, GenerationBumpsOnReuseAndStaleIdIsRejected) {
  SlotMap map;
  const ObjectID old_id = map.create();
  ASSERT_TRUE(map.destroy(old_id).has_value());
  EXPECT_FALSE(map.contains(old_id));
  const ObjectID new_id = map.create();
  EXPECT_EQ(new_id.index, old_id.index);  // LIFO reuse of the freed slot
  EXPECT_EQ(new_id.generation, old_id.generation + 1);
  EXPECT_EQ(map.slot_count(), 1u);
  // The stale id names the same slot but never the new object.
  EXPECT_FALSE(map.contains(old_id));
  EXPECT_EQ(map.find(old_id), SlotMap::kNone);
  EXPECT_FALSE(map.destroy(old_id).has_value());
  EXPECT_TRUE(map.contains(new_id));
  EXPECT_EQ(map.size(), 1u);
}

TEST(SlotMap, ForgedAndOutOfRangeIdsAreRejected) {
  SlotMap map;
  const ObjectID a = map.create();
  EXPECT_FALSE(map.contains(ObjectID{a.index, a.generation + 1}));  // future generation
  EXPECT_FALSE(map.contains(ObjectID{a.index, 0}));
  EXPECT_FALSE(map.contains(ObjectID{1, 1}));  // slot never allocated
  EXPECT_FALSE(map.contains(ObjectID{SlotMap::kNone, 1}));
  EXPECT_FALSE(map.contains(from_wire(~0ull)));
  EXPECT_FALSE(map.destroy(ObjectID{7, 1}).has_value());
  EXPECT_EQ(map.size(), 1u);
  EXPECT_EQ(map.dense_of_slot(12345), SlotMap::kNone);
}

TEST(SlotMap, WrapAroundRetiresTheSlot) {
  // With max_generation 3 slot 0 serves generations 1, 2, 3 and is then retired for good.
  SlotMap map(3);
  std::vector<ObjectID> old_ids;
  for (uint32_t gen = 1; gen <= 3; ++gen) {
    const ObjectID id = map.create();
    EXPECT_EQ(id, (ObjectID{0, gen}));
    old_ids.push_back(id);
    ASSERT_TRUE(map.destroy(id).has_value());
  }
  EXPECT_EQ(map.retired_count(), 1u);
  EXPECT_EQ(map.free_count(), 0u);
  const ObjectID fresh = map.create();
  EXPECT_EQ(fresh, (ObjectID{1, 1}));  // a new slot, never slot 0 again
  for (const ObjectID id : old_ids) EXPECT_FALSE(map.contains(id));
  // Keep churning: no id ever repeats, and slot 0 stays retired.
  std::vector<ObjectID> seen = old_ids;
  seen.push_back(fresh);
  ObjectID live = fresh;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(map.destroy(live).has_value());
    live = map.create();
    for (const ObjectID s : seen) EXPECT_NE(live, s);
    EXPECT_NE(live.index, 0u);
    seen.push_back(live);
  }
  for (size_t i = 0; i + 1 < seen.size(); ++i) EXPECT_FALSE(map.contains(seen[i]));
}

TEST(SlotMap, MaxGenerationOneUsesEachSlotOnce) {
  SlotMap map(0);  // clamped to 1
  EXPECT_EQ(map.max_generation(), 1u);
  const ObjectID a = map.create();
  ASSERT_TRUE(map.destroy(a).has_value());
  const ObjectID b = map.create();
  EXPECT_EQ(b, (ObjectID{1, 1}));
  EXPECT_FALSE(map.contains(a));
  EXPECT_EQ(map.retired_count(), 1u);
}

// Random create/destroy against a reference std::map; a column of payloads is swap-removed in
// step with the slot map exactly as the World does, so the payload check covers the dense moves.
TEST(SlotMap, IterationVisitsExactlyTheLiveSetUnderRandomOps) {
  SlotMap map(4);  // small max generation: slots retire during the run
  std::mt19937 rng(12345);
  std::map<ObjectID, int> reference;  // live id -> payload
  std::vector<ObjectID> dead;
  std::vector<int> column;  // payload per dense index
  int next_payload = 0;
  for (int op = 0; op < 3000; ++op) {
    const bool do_create = reference.empty() || (rng() % 100) < 55;
    if (do_create) {
      const ObjectID id = map.create();
      ASSERT_FALSE(id.is_null());
      ASSERT_EQ(reference.count(id), 0u) << "an id was handed out twice";
      reference[id] = next_payload;
      column.push_back(next_payload++);
    } else {
      auto it = reference.begin();
      std::advance(it, static_cast<long>(rng() % reference.size()));
      const ObjectID id = it->first;
      const auto erased = map.destroy(id);
      ASSERT_TRUE(erased.has_value());
      column[erased->hole] = column[erased->last];
      column.pop_back();
      reference.erase(it);
      dead.push_back(id);
    }
    ASSERT_EQ(map.size(), reference.size());
    std::vector<std::pair<ObjectID, int>> visited;
    visited.reserve(map.size());
    for (uint32_t d = 0; d < map.size(); ++d) {
      const ObjectID id = map.id_at(d);
      ASSERT_EQ(map.find(id), d);
      ASSERT_EQ(map.slot_at(d), id.index);
      visited.emplace_back(id, column[d]);
    }
    std::sort(visited.begin(), visited.end());
    ASSERT_TRUE(
        std::equal(visited.begin(), visited.end(), reference.begin(), reference.end(),
                   [](const auto& x, const auto& y) { return x.first == y.first && x.second == y.second; }));
  }
  for (const ObjectID id : dead) EXPECT_FALSE(map.contains(id));
  EXPECT_GT(map.retired_count(), 0u);
  // Every slot is live, free or retired.
  EXPECT_EQ(map.slot_count(), map.size() + map.free_count() + map.retired_count());
}

}  // namespace
}  // namespace impulse::physics
