// World::step allocates nothing in steady state: every per-step list is a member buffer that is
// cleared, not freed (docs/ARCHITECTURE.md). Counted with a replacement of the global operator
// new for this test binary (every thread; the count is only read around the measured steps), on
// the reference scenes with sleep off, once the pile has settled, with no pool and with a pool of
// two threads. A container that still grows shows up as a count above zero. Under AddressSanitizer
// the sanitizer's allocator owns operator new (a replacement here would pair its new with our
// free), so the tests skip there and run in the release build.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "tests/scenes/bench_scenes.h"
#include "server/physics/world.h"
#include "shared/parallel.h"

#if defined(__SANITIZE_ADDRESS__)
#define IMPULSE_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IMPULSE_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef IMPULSE_COUNT_ALLOCATIONS
#define IMPULSE_COUNT_ALLOCATIONS 1
#endif

namespace {
std::atomic<uint64_t> g_allocations{0};

#if IMPULSE_COUNT_ALLOCATIONS
void* counted_alloc(std::size_t size, std::size_t alignment) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else {
    p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  }
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
#endif
}  // namespace

#if IMPULSE_COUNT_ALLOCATIONS
void* operator new(std::size_t size) { return counted_alloc(size, 0); }
void* operator new[](std::size_t size) { return counted_alloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) { return counted_alloc(size, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t size, std::align_val_t a) { return counted_alloc(size, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

namespace impulse::physics::test {
namespace {

// Steps `settle` steps, then counts the allocations of `measured` more. Sleep off, so every body
// stays in every stage (the broadphase, narrowphase, islands, solver and write-back all run).
uint64_t allocations_in_settled_steps(const scenes::BenchScene& scene, int threads, int settle, int measured) {
  if (!IMPULSE_COUNT_ALLOCATIONS) return 0;
  const uint64_t at_start = g_allocations.load();
  WorkerPool pool(threads);
  WorldSettings settings;
  settings.gravity = scenes::kSceneGravity;
  settings.allow_sleep = false;
  World world(settings);
  if (threads > 1) world.set_worker_pool(&pool);
  const std::vector<ObjectID> ids = scenes::load_into(world, scene);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ObjectID{}), 0);
  for (int step = 0; step < settle; ++step) world.step(scenes::kSceneDt);
  const uint64_t before = g_allocations.load();
  EXPECT_GT(before, at_start + 100) << "the counter must see the world's own setup allocations";
  for (int step = 0; step < measured; ++step) world.step(scenes::kSceneDt);
  const uint64_t count = g_allocations.load() - before;
  EXPECT_GT(world.profile().contact_count, 0u) << scene.name;
  std::printf("[ measured ] %s, %d thread(s): %llu allocations in steps %d-%d\n", scene.name.c_str(), threads,
              static_cast<unsigned long long>(count), settle + 1, settle + measured);
  return count;
}

TEST(SteadyState, TheStepAllocatesNothingOnASettledPyramid) {
  if (!IMPULSE_COUNT_ALLOCATIONS) GTEST_SKIP() << "AddressSanitizer owns operator new; counted in the release build";
  // S1 with a 20-box base: touching from the first step, so settled after a few dozen steps.
  EXPECT_EQ(allocations_in_settled_steps(scenes::make_s1_pyramid(20), 1, 120, 120), 0u);
  EXPECT_EQ(allocations_in_settled_steps(scenes::make_s1_pyramid(20), 2, 120, 120), 0u);
}

TEST(SteadyState, TheStepAllocatesNothingOnSettledSphereAndBoxPiles) {
  if (!IMPULSE_COUNT_ALLOCATIONS) GTEST_SKIP() << "AddressSanitizer owns operator new; counted in the release build";
  // One layer each of S3 (625 spheres) and S2 (361 boxes): landed and at rest within 240 steps.
  for (const int threads : {1, 2}) {
    EXPECT_EQ(allocations_in_settled_steps(scenes::make_s3_spheres(625), threads, 240, 120), 0u);
    EXPECT_EQ(allocations_in_settled_steps(scenes::make_s2_pile(361), threads, 240, 120), 0u);
  }
}

}  // namespace
}  // namespace impulse::physics::test
