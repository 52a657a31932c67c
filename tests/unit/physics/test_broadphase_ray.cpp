// SpatialHash::query_ray checked against a brute-force slab test over every proxy on seeded random
// scenes (moving, parked, recently changed and large proxies; lattice-aligned worst cases), and
// the slab test itself against closed-form cases and a double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "server/physics/broadphase.h"
#include "tests/support/rng.h"

namespace impulse::physics {
namespace {

using ::impulse::test::Rng;

Aabb box_around(Vec3 centre, Vec3 half) { return Aabb{centre - half, centre + half}; }

// --- The slab test -------------------------------------------------------------------------------

TEST(SegmentOverlapsAabb, ClosedForms) {
  const Aabb box{Vec3{-1, -1, -1}, Vec3{1, 1, 1}};
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{-5, 0, 0}, Vec3{10, 0, 0}, box));      // straight through
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{5, 0.5f, 0}, Vec3{-10, 0, 0}, box));   // reversed
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{-5, 0, 0}, Vec3{3.9f, 0, 0}, box));   // ends 10 cm short
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{-5, 0, 0}, Vec3{4, 0, 0}, box));       // ends on the face
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{1.1f, 0, 0}, Vec3{4, 0, 0}, box));    // starts beyond
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{0, 0, 0}, Vec3{4, 0, 0}, box));        // starts inside
  // Parallel to the y and z slabs: inside them (on the face, closed) or 1 mm out.
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{-5, 1, -1}, Vec3{10, 0, 0}, box));
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{-5, 1.001f, 0}, Vec3{10, 0, 0}, box));
  // Diagonal in xz past the edge (1, y, 1), the box's farthest along (1, 1)/sqrt(2): a segment
  // along (1, -1) offset 1 mm beyond it misses; one through the edge touches it (closed).
  const float s = 1.41421356f;
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{1, 0, 1} + Vec3{1, 0, 1} * (0.001f / s) - Vec3{5, 0, -5},
                                     Vec3{10, 0, -10}, box));
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{-4, 0, 6}, Vec3{10, 0, -10}, box));  // passes exactly through (1, 0, 1)
  // Zero translation: a point test.
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{1, 1, 1}, Vec3{}, box));
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{1, 1, 1.001f}, Vec3{}, box));
  // Non-finite input: never.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{nan, 0, 0}, Vec3{1, 0, 0}, box));
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{-5, 0, 0}, Vec3{std::numeric_limits<float>::infinity(), 0, 0}, box));
  // A huge box, like a plane's (1e18 m on its unbounded axes).
  const Aabb ground{Vec3{-1e18f, -1e18f, -1e18f}, Vec3{1e18f, 0.0f, 1e18f}};
  EXPECT_TRUE(segment_overlaps_aabb(Vec3{3, 5, 3}, Vec3{0.001f, -5, 0}, ground));
  EXPECT_FALSE(segment_overlaps_aabb(Vec3{3, 5, 3}, Vec3{0.001f, -4.99f, 0}, ground));
}

/// Reference in double: the signed gap between the slab intervals, scaled to metres (|t| * |d|);
/// > 0 when the segment meets the box, < 0 when it misses, near 0 when the case is ambiguous.
double reference_overlap_margin(Vec3 o, Vec3 d, const Aabb& box) {
  double t_lo = 0.0;
  double t_hi = 1.0;
  double margin = std::numeric_limits<double>::infinity();
  const double len = std::sqrt(static_cast<double>(d.x) * d.x + static_cast<double>(d.y) * d.y +
                               static_cast<double>(d.z) * d.z);
  for (int axis = 0; axis < 3; ++axis) {
    const double oi = component(o, axis);
    const double di = component(d, axis);
    const double lo = component(box.min, axis);
    const double hi = component(box.max, axis);
    if (di == 0.0) {
      margin = std::min(margin, std::min(oi - lo, hi - oi));
      continue;
    }
    double t0 = (lo - oi) / di;
    double t1 = (hi - oi) / di;
    if (t0 > t1) std::swap(t0, t1);
    t_lo = std::max(t_lo, t0);
    t_hi = std::min(t_hi, t1);
  }
  return std::min(margin, (t_hi - t_lo) * len);
}

TEST(SegmentOverlapsAabb, MatchesDoublePrecisionAwayFromTies) {
  Rng rng(77);
  int hits = 0;
  int misses = 0;
  for (int i = 0; i < 200000; ++i) {
    const Aabb box = box_around(Vec3{rng.uniform(-5, 5), rng.uniform(-5, 5), rng.uniform(-5, 5)},
                                Vec3{rng.uniform(0.01f, 3), rng.uniform(0.01f, 3), rng.uniform(0.01f, 3)});
    const Vec3 o{rng.uniform(-10, 10), rng.uniform(-10, 10), rng.uniform(-10, 10)};
    // Aimed near the box, so that hits and near misses are both common.
    const Vec3 aim = (box.min + box.max) * 0.5f + Vec3{rng.uniform(-4, 4), rng.uniform(-4, 4), rng.uniform(-4, 4)};
    Vec3 d = (aim - o) * rng.uniform(0.3f, 1.5f);
    if (rng.below(4) == 0) d = Vec3{component(d, 0) * static_cast<float>(rng.below(2)), component(d, 1), 0.0f};
    const double margin = reference_overlap_margin(o, d, box);
    if (std::abs(margin) < 1e-4) continue;  // within rounding of a tie: either answer is right
    const bool want = margin > 0;
    ASSERT_EQ(segment_overlaps_aabb(o, d, box), want) << "case " << i << " margin " << margin;
    (want ? hits : misses) += 1;
  }
  EXPECT_GT(hits, 20000);
  EXPECT_GT(misses, 20000);
}

// --- The ray query against brute force -----------------------------------------------------------

struct Proxy {
  uint32_t id;
  Aabb box;
};

/// A random AABB: small bodies, bodies snapped to half cells (faces on cell borders), large
/// slabs spanning many cells, a few plane-like giants, and a far cluster with negative
/// coordinates.
Aabb random_box(Rng& rng, float cell) {
  const uint32_t kind = rng.below(20);
  if (kind < 10) {
    const Vec3 c{rng.uniform(-30, 30), rng.uniform(-30, 30), rng.uniform(-30, 30)};
    return box_around(c, Vec3{rng.uniform(0.05f, 2.0f), rng.uniform(0.05f, 2.0f), rng.uniform(0.05f, 2.0f)});
  }
  if (kind < 15) {
    const float step = cell * 0.5f;
    const auto snap = [&](int range) { return step * static_cast<float>(static_cast<int>(rng.below(2 * range)) - range); };
    const Vec3 lo{snap(20), snap(20), snap(20)};
    const Vec3 size{step * static_cast<float>(1 + rng.below(4)), step * static_cast<float>(1 + rng.below(4)),
                    step * static_cast<float>(1 + rng.below(4))};
    return Aabb{lo, lo + size};
  }
  if (kind < 17) {
    const Vec3 c{rng.uniform(-20, 20), rng.uniform(-20, 20), rng.uniform(-20, 20)};
    return box_around(c, Vec3{rng.uniform(5, 100), rng.uniform(0.1f, 40), rng.uniform(5, 100)});
  }
  if (kind < 18) {  // a plane's AABB: unbounded except along its normal
    const float top = rng.uniform(-25, 25);
    return Aabb{Vec3{-1e18f, -1e18f, -1e18f}, Vec3{1e18f, top, 1e18f}};
  }
  const Vec3 c{rng.uniform(-90010, -89990), rng.uniform(49990, 50010), rng.uniform(-70010, -69990)};
  return box_around(c, Vec3{rng.uniform(0.1f, 3), rng.uniform(0.1f, 3), rng.uniform(0.1f, 3)});
}

struct Segment {
  Vec3 origin;
  Vec3 translation;
};

/// A random segment: mostly short (a few cells, the grid path), some long (the linear fallback),
/// axis-parallel ones, ones snapped to the cell lattice (running along cell borders and through
/// cell corners, where rounding decides which cell a point is in), zero-length ones, and ones in
/// the far cluster.
Segment random_segment(Rng& rng, float cell) {
  const uint32_t kind = rng.below(12);
  const Vec3 o{rng.uniform(-30, 30), rng.uniform(-30, 30), rng.uniform(-30, 30)};
  const auto dir = [&](float scale) {
    return Vec3{rng.uniform(-scale, scale), rng.uniform(-scale, scale), rng.uniform(-scale, scale)};
  };
  switch (kind) {
    case 0:
    case 1:
    case 2:
      return {o, dir(3 * cell)};
    case 3:
    case 4:
      return {o, dir(12 * cell)};
    case 5:
      return {o, dir(200)};
    case 6: {  // along one axis
      Vec3 d;
      const float len = rng.uniform(-10 * cell, 10 * cell);
      const uint32_t axis = rng.below(3);
      d = Vec3{axis == 0 ? len : 0.0f, axis == 1 ? len : 0.0f, axis == 2 ? len : 0.0f};
      return {o, d};
    }
    case 7:
    case 8: {  // on the half-cell lattice: along borders, through corners, diagonals
      const float step = cell * 0.5f;
      const auto snap = [&](int range) { return step * static_cast<float>(static_cast<int>(rng.below(2 * range)) - range); };
      const Vec3 lo{snap(20), snap(20), snap(20)};
      const Vec3 d{snap(6), snap(6), snap(6)};
      return {lo, d};
    }
    case 9:
      return {o, Vec3{}};
    case 10: {
      const Vec3 c{rng.uniform(-90010, -89990), rng.uniform(49990, 50010), rng.uniform(-70010, -69990)};
      return {c, dir(8)};
    }
    default: {  // nearly parallel to an axis: long in one coordinate, tiny drift in the others
      const float len = rng.uniform(-12 * cell, 12 * cell);
      return {o, Vec3{len, rng.uniform(-1e-4f, 1e-4f), rng.uniform(-1e-6f, 1e-6f)}};
    }
  }
}

std::vector<uint32_t> brute_force_ray(const Segment& s, const std::vector<Proxy>& moving, const std::vector<Proxy>& parked) {
  std::vector<uint32_t> ids;
  for (const Proxy& p : moving) {
    if (segment_overlaps_aabb(s.origin, s.translation, p.box)) ids.push_back(p.id);
  }
  for (const Proxy& p : parked) {
    if (segment_overlaps_aabb(s.origin, s.translation, p.box)) ids.push_back(p.id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());  // parked since the last find_pairs: in both
  return ids;
}

void make_scene(Rng& rng, float cell, uint32_t count, std::vector<Proxy>& moving, std::vector<Proxy>& parked) {
  moving.clear();
  parked.clear();
  for (uint32_t i = 0; i < count; ++i) {
    const Proxy p{i * 5u + rng.below(5), random_box(rng, cell)};  // unique, sparse, unsorted below
    (rng.below(3) == 0 ? parked : moving).push_back(p);
  }
  for (std::size_t i = moving.size(); i > 1; --i) std::swap(moving[i - 1], moving[rng.below(static_cast<uint32_t>(i))]);
}

void split(const std::vector<Proxy>& proxies, std::vector<uint32_t>& ids, std::vector<Aabb>& boxes) {
  ids.clear();
  boxes.clear();
  for (const Proxy& p : proxies) {
    ids.push_back(p.id);
    boxes.push_back(p.box);
  }
}

struct HashConfig {
  float cell_size;
  uint32_t max_cells;
};

class BroadphaseRayRandom : public ::testing::TestWithParam<HashConfig> {};

TEST_P(BroadphaseRayRandom, QueryRayMatchesBruteForce) {
  const HashConfig config = GetParam();
  std::size_t total_hits = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Rng rng(seed * 7919);
    std::vector<Proxy> moving;
    std::vector<Proxy> parked;
    make_scene(rng, config.cell_size, 600, moving, parked);
    SpatialHash hash(config.cell_size, config.max_cells);
    for (const Proxy& p : parked) hash.add_parked(p.id, p.box);
    std::vector<uint32_t> ids;
    std::vector<Aabb> boxes;
    split(moving, ids, boxes);
    std::vector<ProxyPair> pairs;
    hash.find_pairs(ids, boxes, pairs);

    std::vector<uint32_t> hits;
    for (int q = 0; q < 400; ++q) {
      const Segment s = random_segment(rng, config.cell_size);
      hash.query_ray(s.origin, s.translation, hits);
      ASSERT_EQ(hits, brute_force_ray(s, moving, parked))
          << "query " << q << " origin " << s.origin.x << ", " << s.origin.y << ", " << s.origin.z << " translation "
          << s.translation.x << ", " << s.translation.y << ", " << s.translation.z;
      total_hits += hits.size();
    }
  }
  EXPECT_GT(total_hits, 3000u);  // the scenes must be dense enough for equality to mean something
}

INSTANTIATE_TEST_SUITE_P(CellSizes, BroadphaseRayRandom,
                         ::testing::Values(HashConfig{2.0f, 64}, HashConfig{1.0f, 8}, HashConfig{0.5f, 512},
                                           HashConfig{7.0f, 27}, HashConfig{2.0f, 0} /* all large, brute force */));

TEST(BroadphaseRay, ParkedChangesQueuedRecentAndMerged) {
  // Sleep, wake, replace and remove between find_pairs calls: the query must see the moving
  // proxies of the last find_pairs plus the current parked set, whichever tier holds each.
  Rng rng(4242);
  std::vector<Proxy> moving;
  std::vector<Proxy> parked;
  make_scene(rng, 2.0f, 450, moving, parked);
  SpatialHash hash(2.0f, 64);
  for (const Proxy& p : parked) hash.add_parked(p.id, p.box);
  std::vector<uint32_t> ids;
  std::vector<Aabb> boxes;
  std::vector<ProxyPair> pairs;
  std::vector<uint32_t> hits;
  split(moving, ids, boxes);
  hash.find_pairs(ids, boxes, pairs);
  std::vector<Proxy> moving_at_last_find = moving;

  for (int step = 0; step < 40; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    // Few changes most steps (recent tier), a burst now and then (past the merge threshold).
    const uint32_t changes = step % 10 == 9 ? 120 : rng.below(6);
    for (uint32_t k = 0; k < changes; ++k) {
      const uint32_t r = rng.below(4);
      if (r == 0 && !moving.empty()) {  // falls asleep
        const std::size_t i = rng.below(static_cast<uint32_t>(moving.size()));
        hash.add_parked(moving[i].id, moving[i].box);
        parked.push_back(moving[i]);
        moving.erase(moving.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (r == 1 && !parked.empty()) {  // wakes
        const std::size_t i = rng.below(static_cast<uint32_t>(parked.size()));
        hash.remove_parked(parked[i].id);
        moving.push_back(parked[i]);
        parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (r == 2 && !parked.empty()) {  // replaced in place (moved by the game)
        Proxy& p = parked[rng.below(static_cast<uint32_t>(parked.size()))];
        p.box = random_box(rng, 2.0f);
        hash.add_parked(p.id, p.box);
      } else if (!parked.empty()) {  // destroyed
        const std::size_t i = rng.below(static_cast<uint32_t>(parked.size()));
        hash.remove_parked(parked[i].id);
        parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    // Queries with the changes still queued since the last find_pairs.
    for (int q = 0; q < 20; ++q) {
      const Segment s = random_segment(rng, 2.0f);
      hash.query_ray(s.origin, s.translation, hits);
      ASSERT_EQ(hits, brute_force_ray(s, moving_at_last_find, parked)) << "queued, query " << q;
    }
    for (Proxy& p : moving) {
      const Vec3 d{rng.uniform(-0.5f, 0.5f), rng.uniform(-0.5f, 0.5f), rng.uniform(-0.5f, 0.5f)};
      p.box = Aabb{p.box.min + d, p.box.max + d};
    }
    split(moving, ids, boxes);
    hash.find_pairs(ids, boxes, pairs);
    moving_at_last_find = moving;
    for (int q = 0; q < 20; ++q) {
      const Segment s = random_segment(rng, 2.0f);
      hash.query_ray(s.origin, s.translation, hits);
      ASSERT_EQ(hits, brute_force_ray(s, moving, parked)) << "after find_pairs, query " << q;
    }
  }
}

TEST(BroadphaseRay, LatticeWorstCases) {
  // Boxes exactly one cell each, tiling a 12^3 block, queried with segments lying on cell
  // borders, through cell corners and along face diagonals: every box a segment touches (closed)
  // must be found, however rounding places the segment's points relative to the borders. The
  // cell size 0.3 m is not a power of two, so the cell coordinates are inexact.
  const float cell = 0.3f;
  SpatialHash hash(cell, 64);
  std::vector<Proxy> parked;
  uint32_t id = 1;
  for (int x = -6; x < 6; ++x) {
    for (int y = -6; y < 6; ++y) {
      for (int z = -6; z < 6; ++z) {
        const Vec3 lo{cell * static_cast<float>(x), cell * static_cast<float>(y), cell * static_cast<float>(z)};
        parked.push_back(Proxy{id++, Aabb{lo, lo + Vec3{cell, cell, cell}}});
      }
    }
  }
  // Half of them moving, to cover both tiers.
  std::vector<Proxy> moving;
  for (std::size_t i = 0; i < parked.size(); i += 2) moving.push_back(parked[i]);
  std::erase_if(parked, [](const Proxy& p) { return p.id % 2 == 1; });
  for (const Proxy& p : parked) hash.add_parked(p.id, p.box);
  std::vector<uint32_t> ids;
  std::vector<Aabb> boxes;
  split(moving, ids, boxes);
  std::vector<ProxyPair> pairs;
  hash.find_pairs(ids, boxes, pairs);

  Rng rng(5);
  std::vector<uint32_t> hits;
  for (int q = 0; q < 3000; ++q) {
    const auto lattice = [&](int range) { return cell * static_cast<float>(static_cast<int>(rng.below(2 * range + 1)) - range); };
    const Vec3 o{lattice(7), lattice(7), lattice(7)};
    // Directions with components in {-k, 0, k} cells: along borders, face and body diagonals.
    const float k = cell * static_cast<float>(1 + rng.below(5));
    const Vec3 d{k * static_cast<float>(static_cast<int>(rng.below(3)) - 1),
                 k * static_cast<float>(static_cast<int>(rng.below(3)) - 1),
                 k * static_cast<float>(static_cast<int>(rng.below(3)) - 1)};
    const Segment s{o, d};
    hash.query_ray(s.origin, s.translation, hits);
    ASSERT_EQ(hits, brute_force_ray(s, moving, parked)) << "query " << q;
  }
}

TEST(BroadphaseRay, CoordinatesBeyondTheClampRangeStayExact) {
  // cell 0.01 m: the 21-bit cell range covers about +-10 km; these proxies and segments lie in
  // the clamped border cells, where the walk must still find everything.
  SpatialHash hash(0.01f, 64);
  const Vec3 half{0.015625f, 0.015625f, 0.015625f};
  const std::vector<uint32_t> ids{1, 2, 3};
  const std::vector<Aabb> boxes{box_around(Vec3{90000, 90000, 90000}, half), box_around(Vec3{90050, 90000, 90000}, half),
                                box_around(Vec3{-90000, 0, 0}, half)};
  std::vector<ProxyPair> pairs;
  hash.find_pairs(ids, boxes, pairs);
  hash.add_parked(4, box_around(Vec3{90025, 90000, 90000}, half));
  std::vector<uint32_t> hits;
  hash.query_ray(Vec3{89990, 90000, 90000}, Vec3{100, 0, 0}, hits);  // a long segment: the fallback
  EXPECT_EQ(hits, (std::vector<uint32_t>{1, 2, 4}));
  hash.query_ray(Vec3{90049.9f, 90000, 90000}, Vec3{0.2f, 0, 0}, hits);  // a short one, all in one clamped cell
  EXPECT_EQ(hits, (std::vector<uint32_t>{2}));
  hash.query_ray(Vec3{-90000, 0.01f, 0}, Vec3{0, -0.02f, 0}, hits);  // x clamped, y and z in range
  EXPECT_EQ(hits, (std::vector<uint32_t>{3}));
  hash.query_ray(Vec3{-90000, 0.1f, 0}, Vec3{0, 0.05f, 0}, hits);
  EXPECT_TRUE(hits.empty());
}

TEST(BroadphaseRay, NonFiniteInputFindsNothing) {
  SpatialHash hash(2.0f, 64);
  hash.add_parked(1, Aabb{Vec3{-1e18f, -1e18f, -1e18f}, Vec3{1e18f, 0, 1e18f}});
  std::vector<uint32_t> hits{99};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  hash.query_ray(Vec3{0, nan, 0}, Vec3{0, -1, 0}, hits);
  EXPECT_TRUE(hits.empty());
  hash.query_ray(Vec3{0, 1, 0}, Vec3{0, -std::numeric_limits<float>::infinity(), 0}, hits);
  EXPECT_TRUE(hits.empty());
  hash.query_ray(Vec3{0, 1, 0}, Vec3{0, -2, 0}, hits);
  EXPECT_EQ(hits, (std::vector<uint32_t>{1}));
}

}  // namespace
}  // namespace impulse::physics
