// The wide contact sweeps (solver_wide.h): the colouring gives no two manifolds of one colour a
// common movable body and keeps each body's manifolds in contact order, and solving
// kSolverLanes manifolds per SIMD lane group gives bit for bit what the scalar sweeps give in the
// same order, on random manifolds that exercise every path (partial lane groups, 1-4 points, zero
// friction, kinematic and immovable partners, restitution, and a body with more contacts than
// colours, whose later manifolds go to the scalar overflow). That the order is contact order
// overall is pinned by Determinism.Pinned*, whose values predate the wide sweeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "server/physics/solver.h"
#include "server/physics/solver_wide.h"

namespace impulse::physics {
namespace {

// Uniform in [lo, hi) from the raw engine output (std:: distributions differ between libraries).
float uniform(std::mt19937& rng, float lo, float hi) {
  return lo + (hi - lo) * static_cast<float>(rng() >> 8) * (1.0f / 16777216.0f);
}
Vec3 uniform_vec(std::mt19937& rng, float lo, float hi) {
  return {uniform(rng, lo, hi), uniform(rng, lo, hi), uniform(rng, lo, hi)};
}

struct Problem {
  std::vector<SolverBody> bodies;  // movable, then the immovable one
  std::vector<BodyForces> forces;  // movable only
  std::vector<Vec3> centers;
  std::vector<SolverManifold> manifolds;
  std::vector<ContactRecord> records;
};

// `movable` bodies (three of them kinematic), `count` manifolds between random pairs, a fifth of
// them against the immovable body, and 40 more on body 0 so it runs out of colours.
Problem make_problem(uint32_t seed, uint32_t movable, uint32_t count) {
  std::mt19937 rng(seed);
  Problem p;
  p.bodies.resize(movable + 1);
  p.forces.resize(movable);
  p.centers.resize(movable + 1);
  for (uint32_t i = 0; i < movable; ++i) {
    SolverBody& b = p.bodies[i];
    const bool kinematic = i >= movable - 3;
    b.velocity = uniform_vec(rng, -2.0f, 2.0f);
    b.angular_velocity = uniform_vec(rng, -1.0f, 1.0f);
    b.inv_mass = kinematic ? 0.0f : uniform(rng, 0.2f, 2.0f);
    const Vec3 d = kinematic ? Vec3{} : uniform_vec(rng, 0.5f, 3.0f);
    b.inv_inertia = Mat3{Vec3{d.x, 0.0f, 0.0f}, Vec3{0.0f, d.y, 0.0f}, Vec3{0.0f, 0.0f, d.z}};
    p.forces[i].dynamic = !kinematic;
    p.forces[i].inertia = kinematic ? Vec3{} : Vec3{1.0f / d.x, 1.0f / d.y, 1.0f / d.z};
    p.forces[i].linear_damping = 0.05f;
    p.centers[i] = uniform_vec(rng, -5.0f, 5.0f);
  }
  auto add = [&](uint32_t a, uint32_t b) {
    if (a == b || (p.bodies[a].inv_mass == 0 && p.bodies[b].inv_mass == 0)) return;
    ContactRecord& r = p.records.emplace_back();
    r.point_count = static_cast<uint8_t>(1 + rng() % kMaxManifoldPoints);
    const Vec3 n = normalize_or(uniform_vec(rng, -1.0f, 1.0f), Vec3{0.0f, 1.0f, 0.0f});
    r.contact.normal = n;
    const Vec3 mid = (p.centers[a] + p.centers[b]) * 0.5f;
    for (int k = 0; k < r.point_count; ++k) {
      r.points[k].point = mid + uniform_vec(rng, -0.5f, 0.5f);
      r.points[k].separation = uniform(rng, -0.05f, 0.02f);
      r.points[k].normal_impulse = uniform(rng, 0.0f, 2.0f);
      r.points[k].friction_impulse = uniform_vec(rng, -0.3f, 0.3f);
    }
    SolverManifold& m = p.manifolds.emplace_back();
    m.body_a = a;
    m.body_b = b;
    m.record = static_cast<uint32_t>(p.records.size() - 1);
    m.normal = n;
    m.friction = rng() % 5 == 0 ? 0.0f : uniform(rng, 0.1f, 1.0f);
    m.restitution = rng() % 4 == 0 ? 0.5f : 0.0f;
    m.immovable_partner = p.bodies[a].inv_mass == 0 || p.bodies[b].inv_mass == 0;
  };
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t a = rng() % movable;
    const uint32_t b = rng() % 5 == 0 ? movable : rng() % movable;
    add(a, b);
  }
  // Body 0 in more manifolds than there are colours: the rest of them spill into the overflow.
  for (uint32_t i = 0; i < kSolverColors + 8; ++i) add(0, 1 + i % (movable - 1));
  return p;
}

void solve(Problem& p, bool wide, SolverScratch& scratch) {
  prepare_manifolds(p.manifolds, p.bodies, p.centers, p.records, scratch);
  SolverConfig config;
  config.dt = 1.0f / 60.0f;
  config.gravity = {0.0f, -9.81f, 0.0f};
  config.wide = wide;
  solve_soft_step(p.manifolds, p.bodies, p.forces, p.records, config, scratch);
}

TEST(Solver, ColouringKeepsEachBodysManifoldsInContactOrderAndApart) {
  const Problem p = make_problem(7, 60, 300);
  const auto movable = static_cast<uint32_t>(p.forces.size());
  SolverScratch scratch;
  build_wide_contacts(p.manifolds, movable, Softness{}, Softness{}, true, scratch);
  size_t colored = 0;
  for (size_t i = 0; i < p.manifolds.size(); ++i) {
    if (scratch.color_of[i] >= kSolverColors) continue;
    ++colored;
    for (size_t j = i + 1; j < p.manifolds.size(); ++j) {
      if (scratch.color_of[j] != scratch.color_of[i]) continue;
      for (const uint32_t x : {p.manifolds[i].body_a, p.manifolds[i].body_b}) {
        if (x >= movable) continue;
        EXPECT_NE(x, p.manifolds[j].body_a) << "manifolds " << i << " and " << j;
        EXPECT_NE(x, p.manifolds[j].body_b) << "manifolds " << i << " and " << j;
      }
    }
  }
  // Solved position of each manifold: colour by colour, the overflow last. A body's manifolds
  // must come in contact order.
  std::vector<std::pair<uint32_t, uint32_t>> solved;  // (colour, manifold), sorted below
  for (uint32_t i = 0; i < p.manifolds.size(); ++i) solved.emplace_back(scratch.color_of[i], i);
  std::sort(solved.begin(), solved.end());
  std::vector<int64_t> last(movable, -1);
  for (const auto& [color, m] : solved) {
    for (const uint32_t x : {p.manifolds[m].body_a, p.manifolds[m].body_b}) {
      if (x >= movable) continue;
      EXPECT_LT(last[x], int64_t{m}) << "body " << x << " meets manifold " << m << " out of contact order";
      last[x] = m;
    }
  }
  size_t in_chunks = 0;
  for (const WideChunk& k : scratch.chunks) in_chunks += static_cast<size_t>(k.lanes);
  EXPECT_EQ(in_chunks, colored);
  EXPECT_EQ(in_chunks + scratch.overflow.size(), p.manifolds.size());
  EXPECT_GT(scratch.overflow.size(), 0u) << "body 0 has more manifolds than there are colours";
}

TEST(Solver, WideSweepsMatchTheScalarSweepsBitForBit) {
  for (const uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    Problem wide = make_problem(seed, 50, 200);
    Problem scalar = wide;
    const std::vector<SolverBody> start = wide.bodies;
    SolverScratch wide_scratch, scalar_scratch;
    solve(wide, true, wide_scratch);
    solve(scalar, false, scalar_scratch);
    ASSERT_GT(wide_scratch.chunks.size(), 10u);
    ASSERT_GT(wide_scratch.overflow.size(), 0u);
    ASSERT_TRUE(scalar_scratch.chunks.empty());
    size_t partial = 0;  // chunks with fewer lanes or masked points: the masks are exercised
    for (const WideChunk& k : wide_scratch.chunks) {
      partial += k.lanes < kSolverLanes || !k.full[k.points - 1] || !k.full_friction[0] ? 1 : 0;
    }
    EXPECT_GT(partial, 0u);

    size_t moved = 0;
    for (size_t i = 0; i < wide.bodies.size(); ++i) {
      const SolverBody& w = wide.bodies[i];
      const SolverBody& s = scalar.bodies[i];
      EXPECT_EQ(std::memcmp(&w.velocity, &s.velocity, sizeof(Vec3)), 0) << "body " << i;
      EXPECT_EQ(std::memcmp(&w.angular_velocity, &s.angular_velocity, sizeof(Vec3)), 0) << "body " << i;
      EXPECT_EQ(std::memcmp(&w.delta_position, &s.delta_position, sizeof(Vec3)), 0) << "body " << i;
      EXPECT_EQ(std::memcmp(&w.delta_rotation, &s.delta_rotation, sizeof(Quat)), 0) << "body " << i;
      moved += w.velocity != start[i].velocity ? 1 : 0;
    }
    EXPECT_GT(moved, 40u) << "the contacts and gravity change the velocities";
    for (size_t r = 0; r < wide.records.size(); ++r) {
      for (int k = 0; k < wide.records[r].point_count; ++k) {
        const ContactPointState& w = wide.records[r].points[k];
        const ContactPointState& s = scalar.records[r].points[k];
        EXPECT_EQ(std::memcmp(&w.normal_impulse, &s.normal_impulse, sizeof(float)), 0) << "record " << r;
        EXPECT_EQ(std::memcmp(&w.friction_impulse, &s.friction_impulse, sizeof(Vec3)), 0) << "record " << r;
      }
    }
  }
}

}  // namespace
}  // namespace impulse::physics
