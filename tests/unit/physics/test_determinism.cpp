// Determinism: identical operation sequences give identical world hashes and events every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "shared/parallel.h"
#include "tests/scenes/bench_scenes.h"
#include "tests/unit/physics/world_test_helpers.h"

namespace impulse::physics {
namespace {

using test::add_ground;
using test::box_desc;
using test::sphere_desc;

// Drives a world with a reproducible mix of creates, destroys, impulses, forces and steps.
class Scripted {
 public:
  explicit Scripted(uint32_t seed) : rng_(seed) { add_ground(world_); }

  void run_op() {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const uint32_t op = rng_() % 10;
    if (op < 3 || ids_.empty()) {
      const Vec3 p{4.0f * u(rng_), 3.0f + 2.0f * u(rng_), 4.0f * u(rng_)};
      const BodyDesc d = op % 2 ? sphere_desc(p, 0.4f + 0.2f * u(rng_), 1.5f + u(rng_), 0.5f + 0.5f * u(rng_))
                                : box_desc(p, {0.5f + 0.2f * u(rng_), 0.4f, 0.5f}, 2.0f + u(rng_));
      const CreateResult r = world_.create_object(d);
      ASSERT_EQ(r.error, Error::Ok);
      ids_.push_back(r.id);
    } else if (op == 3) {
      const size_t i = rng_() % ids_.size();
      ASSERT_EQ(world_.destroy_object(ids_[i]), Error::Ok);
      ids_.erase(ids_.begin() + static_cast<long>(i));
    } else if (op == 4) {
      ASSERT_EQ(world_.apply_impulse(ids_[rng_() % ids_.size()], {u(rng_), 2.0f, u(rng_)}), Error::Ok);
    } else if (op == 5) {
      ASSERT_EQ(world_.apply_force(ids_[rng_() % ids_.size()], {10.0f * u(rng_), 30.0f, 0.0f}), Error::Ok);
    }
    // ops 6..9: only step
    world_.step(1.0f / 60.0f);
  }

  const World& world() const { return world_; }

 private:
  World world_;
  std::mt19937 rng_;
  std::vector<ObjectID> ids_;
};

bool same_events(std::span<const ContactEvent> x, std::span<const ContactEvent> y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].type != y[i].type || x[i].a != y[i].a || x[i].b != y[i].b || !(x[i].point == y[i].point) ||
        !(x[i].normal == y[i].normal)) {
      return false;
    }
  }
  return true;
}

TEST(Determinism, SameOpsGiveSameHashEveryStep) {
  Scripted one(77);
  Scripted two(77);
  for (int i = 0; i < 600; ++i) {
    one.run_op();
    two.run_op();
    ASSERT_EQ(one.world().world_hash(), two.world().world_hash()) << "step " << i;
    ASSERT_TRUE(same_events(one.world().contact_events(), two.world().contact_events())) << "step " << i;
  }
  EXPECT_GT(one.world().object_count(), 20u);
  EXPECT_GT(one.world().get_collisions().size(), 10u);
}

TEST(Determinism, HashSeesEveryBit) {
  World a;
  World b;
  BodyDesc d = sphere_desc({1.0f, 2.0f, 3.0f});
  ASSERT_EQ(a.create_object(d).error, Error::Ok);
  d.position.y = std::nextafter(2.0f, 3.0f);  // one ulp apart
  ASSERT_EQ(b.create_object(d).error, Error::Ok);
  EXPECT_NE(a.world_hash(), b.world_hash());
  World c;
  EXPECT_NE(World().world_hash(), a.world_hash());
  EXPECT_EQ(World().world_hash(), c.world_hash());
}

// The hash of a fixed reference scene after 300 steps. It pins the numerics of the whole step
// (integration, broadphase order, narrowphase, solver, sleep): if a change alters it, the change
// altered the simulation, which must be deliberate and said in the commit message. The value is
// the same with g++ 12 and clang++ 14, release and sanitizer builds (-ffp-contract=off).
TEST(Determinism, PinnedReferenceSceneHash) {
  World world;
  add_ground(world, 0.2f);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      const float x = -1.5f + static_cast<float>(i) + 0.1f * static_cast<float>(j);
      const float y = 0.5f + 1.05f * static_cast<float>(j);
      ASSERT_EQ(world.create_object(box_desc({x, y, 0.0f}, {0.45f, 0.5f, 0.45f}, 1.0f + j)).error, Error::Ok);
    }
  }
  BodyDesc ball = sphere_desc({-6.0f, 2.0f, 0.0f}, 0.6f, 5.0f, 0.6f);
  ball.velocity = {8.0f, 3.0f, 0.25f};
  ASSERT_EQ(world.create_object(ball).error, Error::Ok);
  for (int i = 0; i < 300; ++i) world.step(1.0f / 60.0f);
  EXPECT_EQ(world.world_hash(), 0xe098556eab07f4e3ull) << std::hex << world.world_hash();
}

// The S1 pyramid (docs/BENCHMARKS.md, "Scenes": static ground box (50, 1, 50) at y = -1, 20-wide
// 2D pyramid of 210 unit boxes, mass 1, friction 0.6, sleep off), 120 steps at 60 Hz, pinned. Any
// change to the step's arithmetic, order or contact generation changes this value: update it
// deliberately, with the reason in the commit message.
TEST(Determinism, PinnedS1PyramidHash) {
  WorldSettings settings;
  settings.allow_sleep = false;
  World world(settings);
  BodyDesc ground = box_desc({0.0f, -1.0f, 0.0f}, {50.0f, 1.0f, 50.0f}, 0.0f, BodyKind::Static);
  ground.friction = 0.6f;
  ASSERT_EQ(world.create_object(ground).error, Error::Ok);
  for (int r = 0; r < 20; ++r) {
    const int count = 20 - r;
    for (int i = 0; i < count; ++i) {
      BodyDesc d = box_desc({(static_cast<float>(i) - 0.5f * static_cast<float>(count - 1)) * 1.0f,
                             0.5f + static_cast<float>(r), 0.0f});
      d.friction = 0.6f;
      ASSERT_EQ(world.create_object(d).error, Error::Ok);
    }
  }
  for (int i = 0; i < 120; ++i) world.step(1.0f / 60.0f);
  EXPECT_EQ(world.world_hash(), 0x8e399464ffb9458bull) << std::hex << world.world_hash();
}


// A world with many independent contact groups and a few large ones: stacks, a pile of bouncing
// spheres (restitution chains), a kinematic pusher through a row of boxes, free fliers, and
// objects created, pushed and destroyed while it runs.
void build_busy_world(World& world, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  add_ground(world);
  for (int s = 0; s < 12; ++s) {  // stacks of four
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(world.create_object(box_desc({-30.0f + 5.0f * static_cast<float>(s), 0.5f + static_cast<float>(k), 8.0f}))
                    .error,
                Error::Ok);
    }
  }
  for (int i = 0; i < 150; ++i) {  // a heap of bouncing spheres
    const Vec3 p{3.0f * u(rng), 1.0f + 0.6f * static_cast<float>(i % 25), 3.0f * u(rng)};
    ASSERT_EQ(world.create_object(sphere_desc(p, 0.3f + 0.1f * u(rng), 1.0f, 0.6f)).error, Error::Ok);
  }
  for (int i = 0; i < 10; ++i) {  // a row the kinematic body sweeps through
    ASSERT_EQ(world.create_object(box_desc({-12.0f, 0.5f, -10.0f + 2.0f * static_cast<float>(i)})).error, Error::Ok);
  }
  BodyDesc pusher = box_desc({-12.0f, 0.5f, -14.0f}, {1.0f, 0.5f, 0.5f}, 0.0f, BodyKind::Kinematic);
  pusher.velocity = {0.0f, 0.0f, 2.0f};
  ASSERT_EQ(world.create_object(pusher).error, Error::Ok);
  for (int i = 0; i < 40; ++i) {  // scattered boxes dropped from a height, spinning
    BodyDesc d = box_desc({20.0f + 10.0f * u(rng), 2.0f + 3.0f * u(rng) + 3.0f, 10.0f * u(rng)});
    d.angular_velocity = {u(rng), 2.0f * u(rng), u(rng)};
    ASSERT_EQ(world.create_object(d).error, Error::Ok);
  }
}

// The pooled solve (batches of contact groups on worker threads) gives the same world, bit for
// bit, as the solve on the calling thread, for 1, 2 and 3 threads, every step.
TEST(Determinism, WorkerPoolSolveIsBitIdenticalToTheSequentialSolve) {
  WorkerPool two(2);
  WorkerPool three(3);
  World sequential;
  World pooled2;
  World pooled3;
  pooled2.set_worker_pool(&two);
  pooled3.set_worker_pool(&three);
  for (World* w : {&sequential, &pooled2, &pooled3}) {
    std::mt19937 rng(4242);
    build_busy_world(*w, rng);
  }
  std::mt19937 ops(99);
  std::vector<ObjectID> created;
  uint32_t max_awake = 0;
  for (int step = 0; step < 400; ++step) {
    if (step % 10 == 5) {  // a new body, a push, and sometimes a destroy, the same in each world
      const Vec3 p{static_cast<float>(ops() % 40) - 20.0f, 4.0f, static_cast<float>(ops() % 20) - 10.0f};
      const Vec3 push{static_cast<float>(ops() % 5) - 2.0f, 1.0f, static_cast<float>(ops() % 5) - 2.0f};
      const bool destroy = !created.empty() && ops() % 3 == 0;
      const size_t victim = destroy ? ops() % created.size() : 0;
      ObjectID id;
      for (World* w : {&sequential, &pooled2, &pooled3}) {
        const CreateResult r = w->create_object(sphere_desc(p, 0.4f));
        ASSERT_EQ(r.error, Error::Ok);
        id = r.id;
        ASSERT_EQ(w->apply_impulse(id, push), Error::Ok);
        if (destroy) {
          ASSERT_EQ(w->destroy_object(created[victim]), Error::Ok);
        }
      }
      if (destroy) created.erase(created.begin() + static_cast<long>(victim));
      created.push_back(id);
    }
    for (World* w : {&sequential, &pooled2, &pooled3}) w->step(1.0f / 60.0f);
    max_awake = std::max(max_awake, sequential.awake_count());
    const uint64_t h = sequential.world_hash();
    ASSERT_EQ(pooled2.world_hash(), h) << "2 threads, step " << step;
    ASSERT_EQ(pooled3.world_hash(), h) << "3 threads, step " << step;
    ASSERT_TRUE(same_events(sequential.contact_events(), pooled2.contact_events())) << "step " << step;
  }
  // The scene really exercised the pooled path (>= 64 movable bodies) with many groups.
  EXPECT_GT(max_awake, 200u);
  EXPECT_GT(sequential.profile().island_count, 10u);
}

// The reference piles (tests/scenes: S3 spheres on a plane, S2 boxes in a walled container),
// scaled down, stepped with no pool and with pools of 2 and 3 threads: the same world_hash and
// events every step. Unlike the busy world above, these become one contact-connected pile, and
// with thousands of broadphase pairs every pooled stage takes its parallel path (the narrowphase
// runs, the solver-body and write-back loops), not only the solve's batches.
void expect_pooled_scene_bit_identical(const scenes::BenchScene& scene, int steps, uint32_t min_pairs) {
  WorkerPool two(2);
  WorkerPool three(3);
  WorldSettings settings;
  settings.gravity = scenes::kSceneGravity;
  settings.allow_sleep = scene.sleep;
  World sequential(settings);
  World pooled2(settings);
  World pooled3(settings);
  pooled2.set_worker_pool(&two);
  pooled3.set_worker_pool(&three);
  for (World* w : {&sequential, &pooled2, &pooled3}) {
    const std::vector<ObjectID> ids = scenes::load_into(*w, scene);
    ASSERT_EQ(std::count(ids.begin(), ids.end(), ObjectID{}), 0);
  }
  uint32_t max_pairs = 0;
  for (int step = 0; step < steps; ++step) {
    for (World* w : {&sequential, &pooled2, &pooled3}) w->step(scenes::kSceneDt);
    max_pairs = std::max(max_pairs, sequential.profile().pair_count);
    const uint64_t h = sequential.world_hash();
    ASSERT_EQ(pooled2.world_hash(), h) << scene.name << ", 2 threads, step " << step;
    ASSERT_EQ(pooled3.world_hash(), h) << scene.name << ", 3 threads, step " << step;
    ASSERT_TRUE(same_events(sequential.contact_events(), pooled2.contact_events())) << "step " << step;
    ASSERT_TRUE(same_events(sequential.contact_events(), pooled3.contact_events())) << "step " << step;
  }
  EXPECT_GE(max_pairs, min_pairs) << scene.name << ": too few pairs to exercise the parallel narrowphase";
  EXPECT_GT(sequential.profile().contact_count, 0u);
}

TEST(Determinism, WorkerPoolStepIsBitIdenticalOnTheS3SpherePile) {
  // 1500 spheres: layers of 625 land on the plane and on each other within the 150 steps.
  expect_pooled_scene_bit_identical(scenes::make_s3_spheres(1500), 150, 2048);
}

TEST(Determinism, WorkerPoolStepIsBitIdenticalOnTheS2BoxPile) {
  // 1500 boxes: four layers land within the 150 steps; the narrowphase needs > 1024 pairs for 3 runs.
  expect_pooled_scene_bit_identical(scenes::make_s2_pile(1500), 150, 1100);
}

TEST(Determinism, WorkerPoolStepIsBitIdenticalOnTheH1HullPile) {
  // 800 convex hulls (H1, 8 shapes) in S2's container: hull-hull and box-hull contacts on every
  // thread count give the same world, hull table included.
  expect_pooled_scene_bit_identical(scenes::make_h1_hull_pile(800), 100, 1100);
}

}  // namespace
}  // namespace impulse::physics
