// Spatial hash broadphase checked against brute-force O(n^2) AABB tests on seeded random scenes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "server/physics/broadphase.h"
#include "tests/support/rng.h"

namespace impulse::physics {
namespace {

using ::impulse::test::Rng;

Aabb make_box(Vec3 centre, Vec3 half) { return Aabb{centre - half, centre + half}; }

/// A random AABB from a mix meant to stress the grid: small bodies, bodies snapped to the cell
/// lattice (exactly touching faces, bounds on cell borders), large boxes spanning many cells,
/// and bodies near a far-away cluster with negative coordinates.
Aabb random_box(Rng& rng, float cell_size) {
  const uint32_t kind = rng.below(10);
  if (kind < 5) {  // small, around the origin (negative coordinates included)
    const Vec3 c{rng.uniform(-30, 30), rng.uniform(-30, 30), rng.uniform(-30, 30)};
    return make_box(c, Vec3{rng.uniform(0.05f, 2.0f), rng.uniform(0.05f, 2.0f), rng.uniform(0.05f, 2.0f)});
  }
  if (kind < 7) {  // snapped to half cells: faces coincide exactly, bounds sit on cell borders
    const float step = cell_size * 0.5f;
    const Vec3 lo{step * static_cast<float>(static_cast<int>(rng.below(40)) - 20),
                  step * static_cast<float>(static_cast<int>(rng.below(40)) - 20),
                  step * static_cast<float>(static_cast<int>(rng.below(40)) - 20)};
    const Vec3 size{step * static_cast<float>(1 + rng.below(4)), step * static_cast<float>(1 + rng.below(4)),
                    step * static_cast<float>(1 + rng.below(4))};
    return Aabb{lo, lo + size};
  }
  if (kind < 8) {  // large: a ground slab or a wall spanning far more than max_cells_per_proxy
    const Vec3 c{rng.uniform(-20, 20), rng.uniform(-20, 20), rng.uniform(-20, 20)};
    return make_box(c, Vec3{rng.uniform(5, 100), rng.uniform(0.1f, 40), rng.uniform(5, 100)});
  }
  // far from the origin, negative side, clustered so pairs still occur
  const Vec3 c{rng.uniform(-90010, -89990), rng.uniform(49990, 50010), rng.uniform(-70010, -69990)};
  return make_box(c, Vec3{rng.uniform(0.1f, 3), rng.uniform(0.1f, 3), rng.uniform(0.1f, 3)});
}

struct Proxy {
  uint32_t id;
  Aabb box;
};

/// Every moving-moving and moving-parked pair whose boxes overlap, sorted by (a, b).
std::vector<ProxyPair> brute_force_pairs(const std::vector<Proxy>& moving, const std::vector<Proxy>& parked) {
  std::vector<ProxyPair> pairs;
  const auto add = [&](uint32_t x, uint32_t y) { pairs.push_back(x < y ? ProxyPair{x, y} : ProxyPair{y, x}); };
  for (std::size_t i = 0; i < moving.size(); ++i) {
    for (std::size_t j = i + 1; j < moving.size(); ++j) {
      if (overlaps(moving[i].box, moving[j].box)) add(moving[i].id, moving[j].id);
    }
    for (const Proxy& p : parked) {
      if (overlaps(moving[i].box, p.box)) add(moving[i].id, p.id);
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](ProxyPair l, ProxyPair r) { return l.a != r.a ? l.a < r.a : l.b < r.b; });
  return pairs;
}

std::vector<uint32_t> brute_force_query(const Aabb& box, const std::vector<Proxy>& moving,
                                        const std::vector<Proxy>& parked) {
  std::vector<uint32_t> ids;
  for (const Proxy& p : moving) {
    if (overlaps(p.box, box)) ids.push_back(p.id);
  }
  for (const Proxy& p : parked) {
    if (overlaps(p.box, box)) ids.push_back(p.id);
  }
  std::sort(ids.begin(), ids.end());
  // A body parked since the last find_pairs is in both sets; query reports it once.
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

/// Random scene: unique ids drawn from a sparse range (not 0..n-1), split into moving and parked.
void make_scene(Rng& rng, float cell_size, uint32_t count, std::vector<Proxy>& moving, std::vector<Proxy>& parked) {
  moving.clear();
  parked.clear();
  for (uint32_t i = 0; i < count; ++i) {
    const Proxy p{i * 7u + rng.below(7), random_box(rng, cell_size)};  // unique: i*7 + [0, 7)
    (rng.below(3) == 0 ? parked : moving).push_back(p);
  }
  // Shuffle the moving order: the broadphase must not rely on ids arriving sorted.
  for (std::size_t i = moving.size(); i > 1; --i) std::swap(moving[i - 1], moving[rng.below(static_cast<uint32_t>(i))]);
}

void split(const std::vector<Proxy>& moving, std::vector<uint32_t>& ids, std::vector<Aabb>& boxes) {
  ids.clear();
  boxes.clear();
  for (const Proxy& p : moving) {
    ids.push_back(p.id);
    boxes.push_back(p.box);
  }
}

bool is_strictly_sorted(const std::vector<ProxyPair>& pairs) {
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].a >= pairs[i].b) return false;
    if (i > 0 && !(pairs[i - 1].a < pairs[i].a || (pairs[i - 1].a == pairs[i].a && pairs[i - 1].b < pairs[i].b))) {
      return false;
    }
  }
  return true;
}

struct HashConfig {
  float cell_size;
  uint32_t max_cells;
};

class BroadphaseRandom : public ::testing::TestWithParam<HashConfig> {};

TEST_P(BroadphaseRandom, FindPairsAndQueryMatchBruteForce) {
  const HashConfig config = GetParam();
  std::size_t total_pairs = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Rng rng(seed);
    std::vector<Proxy> moving;
    std::vector<Proxy> parked;
    make_scene(rng, config.cell_size, 400, moving, parked);

    SpatialHash hash(config.cell_size, config.max_cells);
    for (const Proxy& p : parked) hash.add_parked(p.id, p.box);
    EXPECT_EQ(hash.parked_count(), parked.size());

    std::vector<uint32_t> ids;
    std::vector<Aabb> boxes;
    split(moving, ids, boxes);
    std::vector<ProxyPair> pairs;
    hash.find_pairs(ids, boxes, pairs);
    const std::vector<ProxyPair> expected = brute_force_pairs(moving, parked);
    EXPECT_TRUE(is_strictly_sorted(pairs));
    ASSERT_EQ(pairs, expected);
    total_pairs += pairs.size();

    // Queries: small boxes (grid path), huge boxes (linear path), degenerate point boxes.
    std::vector<uint32_t> hits;
    for (int q = 0; q < 60; ++q) {
      const Aabb box = q % 10 == 9 ? make_box(Vec3{}, Vec3{1000, 1000, 1000}) : random_box(rng, config.cell_size);
      hash.query(box, hits);
      ASSERT_EQ(hits, brute_force_query(box, moving, parked)) << "query " << q;
    }
    const Vec3 point = moving.front().box.min;
    hash.query(Aabb{point, point}, hits);
    EXPECT_EQ(hits, brute_force_query(Aabb{point, point}, moving, parked));
    EXPECT_TRUE(std::binary_search(hits.begin(), hits.end(), moving.front().id));
  }
  // The scenes must actually exercise the grid, or equality above proves little.
  EXPECT_GT(total_pairs, 300u);
}

INSTANTIATE_TEST_SUITE_P(CellSizes, BroadphaseRandom,
                         ::testing::Values(HashConfig{2.0f, 64}, HashConfig{1.0f, 8}, HashConfig{0.5f, 512},
                                           HashConfig{7.0f, 27}, HashConfig{2.0f, 0} /* all large */));

TEST(Broadphase, ParkedAddRemoveReplaceThenRequery) {
  Rng rng(42);
  std::vector<Proxy> moving;
  std::vector<Proxy> parked;
  make_scene(rng, 2.0f, 500, moving, parked);
  SpatialHash hash(2.0f, 64);
  for (const Proxy& p : parked) hash.add_parked(p.id, p.box);

  std::vector<uint32_t> ids;
  std::vector<Aabb> boxes;
  std::vector<ProxyPair> pairs;
  std::vector<uint32_t> hits;
  split(moving, ids, boxes);
  hash.find_pairs(ids, boxes, pairs);
  ASSERT_EQ(pairs, brute_force_pairs(moving, parked));
  std::vector<Proxy> moving_at_last_find = moving;

  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    // Remove a third of the parked proxies, replace some boxes, and move some moving proxies to
    // parked (a body falling asleep) and back (waking up).
    for (std::size_t i = 0; i < parked.size();) {
      const uint32_t r = rng.below(6);
      if (r < 2) {
        hash.remove_parked(parked[i].id);
        if (r == 0) {  // wakes up
          moving.push_back(parked[i]);
        }
        parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (r == 2) {  // replaced in place
        parked[i].box = random_box(rng, 2.0f);
        hash.add_parked(parked[i].id, parked[i].box);
      }
      ++i;
    }
    for (std::size_t i = 0; i < moving.size();) {
      if (rng.below(5) == 0) {  // falls asleep
        hash.add_parked(moving[i].id, moving[i].box);
        parked.push_back(moving[i]);
        moving.erase(moving.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      moving[i].box = random_box(rng, 2.0f);  // moving proxies move every step
      ++i;
    }
    hash.remove_parked(0xfffffff0u);  // not parked: a no-op
    ASSERT_EQ(hash.parked_count(), parked.size());

    // Query with parked changes still queued: moving proxies are those of the last find_pairs.
    const Aabb probe = make_box(Vec3{rng.uniform(-20, 20), 0, rng.uniform(-20, 20)}, Vec3{6, 6, 6});
    hash.query(probe, hits);
    EXPECT_EQ(hits, brute_force_query(probe, moving_at_last_find, parked));

    split(moving, ids, boxes);
    moving_at_last_find = moving;
    hash.find_pairs(ids, boxes, pairs);
    ASSERT_EQ(pairs, brute_force_pairs(moving, parked));
    hash.query(probe, hits);
    EXPECT_EQ(hits, brute_force_query(probe, moving, parked));
  }
}

TEST(Broadphase, FewSleepWakeChangesPerStep) {
  // The common steady state: a few bodies fall asleep or wake each step, far below the merge
  // threshold, so changes live in the recent tier for many steps before being merged.
  Rng rng(31337);
  std::vector<Proxy> moving;
  std::vector<Proxy> parked;
  make_scene(rng, 2.0f, 500, moving, parked);
  SpatialHash hash(2.0f, 64);
  for (const Proxy& p : parked) hash.add_parked(p.id, p.box);
  std::vector<uint32_t> ids;
  std::vector<Aabb> boxes;
  std::vector<ProxyPair> pairs;
  std::vector<uint32_t> hits;
  std::vector<Proxy> moving_at_last_find;
  for (int step = 0; step < 80; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    for (uint32_t k = rng.below(4); k > 0 && !moving.empty(); --k) {  // fall asleep
      const std::size_t i = rng.below(static_cast<uint32_t>(moving.size()));
      hash.add_parked(moving[i].id, moving[i].box);
      parked.push_back(moving[i]);
      moving.erase(moving.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (uint32_t k = rng.below(4); k > 0 && !parked.empty(); --k) {  // wake up
      const std::size_t i = rng.below(static_cast<uint32_t>(parked.size()));
      hash.remove_parked(parked[i].id);
      moving.push_back(parked[i]);
      parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (rng.below(3) == 0 && !parked.empty()) {  // a parked body moved by the game
      Proxy& p = parked[rng.below(static_cast<uint32_t>(parked.size()))];
      p.box = random_box(rng, 2.0f);
      hash.add_parked(p.id, p.box);
    }
    const Aabb probe = random_box(rng, 2.0f);
    hash.query(probe, hits);
    ASSERT_EQ(hits, brute_force_query(probe, moving_at_last_find, parked));

    for (Proxy& p : moving) {
      const Vec3 d{rng.uniform(-0.3f, 0.3f), rng.uniform(-0.3f, 0.3f), rng.uniform(-0.3f, 0.3f)};
      p.box = Aabb{p.box.min + d, p.box.max + d};
    }
    split(moving, ids, boxes);
    hash.find_pairs(ids, boxes, pairs);
    ASSERT_EQ(pairs, brute_force_pairs(moving, parked));
    moving_at_last_find = moving;
    hash.query(probe, hits);
    ASSERT_EQ(hits, brute_force_query(probe, moving, parked));
  }
}

TEST(Broadphase, QueriesStayExactWhileParkedChangesAreQueued) {
  // Scene loading: static bodies are added one by one, each preceded by a query (the World wakes
  // sleepers a new static body overlaps), with no find_pairs in between. Queued changes are
  // merged automatically past a threshold; every query must be exact throughout.
  Rng rng(2024);
  SpatialHash hash(2.0f, 64);
  std::vector<Proxy> parked;
  std::vector<uint32_t> hits;
  uint32_t next_id = 1;
  for (int op = 0; op < 3000; ++op) {
    const uint32_t r = rng.below(10);
    if (r < 6 || parked.empty()) {
      const Proxy p{next_id++, random_box(rng, 2.0f)};
      hash.query(p.box, hits);
      ASSERT_EQ(hits, brute_force_query(p.box, {}, parked)) << "op " << op;
      hash.add_parked(p.id, p.box);
      parked.push_back(p);
    } else if (r < 8) {
      const std::size_t i = rng.below(static_cast<uint32_t>(parked.size()));
      hash.remove_parked(parked[i].id);
      parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const std::size_t i = rng.below(static_cast<uint32_t>(parked.size()));
      parked[i].box = random_box(rng, 2.0f);
      hash.add_parked(parked[i].id, parked[i].box);
    }
    ASSERT_EQ(hash.parked_count(), parked.size());
  }
  for (int q = 0; q < 50; ++q) {
    const Aabb box = random_box(rng, 2.0f);
    hash.query(box, hits);
    ASSERT_EQ(hits, brute_force_query(box, {}, parked));
  }
  // And the same parked set pairs exactly with moving proxies.
  std::vector<Proxy> moving;
  for (uint32_t i = 0; i < 300; ++i) moving.push_back(Proxy{next_id++, random_box(rng, 2.0f)});
  std::vector<uint32_t> ids;
  std::vector<Aabb> boxes;
  split(moving, ids, boxes);
  std::vector<ProxyPair> pairs;
  hash.find_pairs(ids, boxes, pairs);
  EXPECT_EQ(pairs, brute_force_pairs(moving, parked));
}

TEST(Broadphase, ParkedOnlyPairsAreNeverReported) {
  SpatialHash hash(2.0f, 64);
  hash.add_parked(1, make_box(Vec3{0, 0, 0}, Vec3{1, 1, 1}));
  hash.add_parked(2, make_box(Vec3{0.5f, 0, 0}, Vec3{1, 1, 1}));        // overlaps 1
  hash.add_parked(3, make_box(Vec3{0, -50, 0}, Vec3{100, 50, 100}));    // large ground
  std::vector<ProxyPair> pairs;
  hash.find_pairs({}, {}, pairs);
  EXPECT_TRUE(pairs.empty());

  // One moving proxy touching the ground's top face and body 2's +X face (closed overlap).
  const std::vector<uint32_t> ids{9};
  const std::vector<Aabb> boxes{Aabb{Vec3{1.5f, 0.0f, -0.5f}, Vec3{3.0f, 1.0f, 0.5f}}};
  hash.find_pairs(ids, boxes, pairs);
  EXPECT_EQ(pairs, (std::vector<ProxyPair>{{2, 9}, {3, 9}}));
}

TEST(Broadphase, SteadyStateIsDeterministicAndHistoryIndependent) {
  Rng rng(7);
  std::vector<Proxy> moving;
  std::vector<Proxy> parked;
  make_scene(rng, 2.0f, 600, moving, parked);
  std::vector<uint32_t> ids;
  std::vector<Aabb> boxes;
  split(moving, ids, boxes);

  SpatialHash forward(2.0f, 64);
  for (const Proxy& p : parked) forward.add_parked(p.id, p.box);
  std::vector<ProxyPair> first;
  forward.find_pairs(ids, boxes, first);
  ASSERT_FALSE(first.empty());
  std::vector<ProxyPair> again;
  for (int run = 0; run < 5; ++run) {
    forward.find_pairs(ids, boxes, again);
    ASSERT_EQ(again, first) << "run " << run;
  }

  // Same final parked set reached through another history: reversed insertion, plus proxies
  // added and removed again. Output must be identical.
  SpatialHash other(2.0f, 64);
  for (uint32_t extra = 0; extra < 50; ++extra) other.add_parked(1000000 + extra, random_box(rng, 2.0f));
  for (auto it = parked.rbegin(); it != parked.rend(); ++it) other.add_parked(it->id, random_box(rng, 2.0f));
  for (auto it = parked.rbegin(); it != parked.rend(); ++it) other.add_parked(it->id, it->box);  // replace
  for (uint32_t extra = 0; extra < 50; ++extra) other.remove_parked(1000000 + extra);
  std::vector<ProxyPair> other_pairs;
  other.find_pairs(ids, boxes, other_pairs);
  EXPECT_EQ(other_pairs, first);
}

TEST(Broadphase, CoordinatesBeyondTheClampRangeStayExact) {
  // cell 0.01 m: the 21-bit range covers only about +-10 km, so these boxes are clamped into the
  // border cells. Results must stay exact (only slower).
  SpatialHash hash(0.01f, 64);
  const std::vector<uint32_t> ids{1, 2, 3, 4};
  // Half extent 2^-6 m is two float ulps at 9e4 m, so every bound below is exact.
  const Vec3 half{0.015625f, 0.015625f, 0.015625f};
  const std::vector<Aabb> boxes{
      make_box(Vec3{90000, 90000, 90000}, half),
      make_box(Vec3{90000.015625f, 90000, 90000}, half),  // overlaps 1
      make_box(Vec3{90050, 90000, 90000}, half),          // same clamped cell, far apart
      make_box(Vec3{-90000, -90000, -90000}, half),
  };
  std::vector<ProxyPair> pairs;
  hash.find_pairs(ids, boxes, pairs);
  EXPECT_EQ(pairs, (std::vector<ProxyPair>{{1, 2}}));
  std::vector<uint32_t> hits;
  hash.query(make_box(Vec3{90050, 90000, 90000}, half), hits);
  EXPECT_EQ(hits, (std::vector<uint32_t>{3}));
}

TEST(Broadphase, ManyParkedIdsThroughTheIndex) {
  // Sparse ids across the whole u32 range exercise the id -> slot index (growth, collisions,
  // backward-shift deletion).
  Rng rng(99);
  SpatialHash hash(2.0f, 64);
  std::vector<Proxy> parked;
  for (uint32_t i = 0; i < 3000; ++i) {
    const uint32_t id = static_cast<uint32_t>(rng.next() >> 32) | 1u;
    if (std::any_of(parked.begin(), parked.end(), [&](const Proxy& p) { return p.id == id; })) continue;
    parked.push_back(Proxy{id, random_box(rng, 2.0f)});
    hash.add_parked(id, parked.back().box);
  }
  for (std::size_t i = 0; i < parked.size();) {
    if (rng.below(2) == 0) {
      hash.remove_parked(parked[i].id);
      hash.remove_parked(parked[i].id);  // twice: the second is a no-op
      parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  ASSERT_EQ(hash.parked_count(), parked.size());
  std::vector<ProxyPair> pairs;
  hash.find_pairs({}, {}, pairs);
  std::vector<uint32_t> hits;
  const Aabb everything = make_box(Vec3{}, Vec3{1e6f, 1e6f, 1e6f});
  hash.query(everything, hits);
  EXPECT_EQ(hits, brute_force_query(everything, {}, parked));
  for (const Proxy& p : parked) {
    hash.query(p.box, hits);
    ASSERT_TRUE(std::binary_search(hits.begin(), hits.end(), p.id));
  }
}

}  // namespace
}  // namespace impulse::physics
