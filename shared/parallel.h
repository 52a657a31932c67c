// A fixed set of worker threads for the data-parallel loops of the step and the snapshot writes,
// on oneTBB's task arena (Debian's libtbb-dev). The loops it runs write only what their own index
// owns, so results are bit-identical whatever the thread count (see each caller).
#pragma once

#include <cstddef>
#include <memory>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

namespace impulse {

/// Runs loops on up to `threads` threads: the calling thread plus threads - 1 workers of a oneTBB
/// task arena that live as long as the pool. Not copyable or movable (users keep a pointer).
/// for_each may be called from one thread at a time.
class WorkerPool {
 public:
  /// `threads` is clamped to [1, 256]; 1 runs every loop inline on the caller, with no arena.
  explicit WorkerPool(int threads)
      : threads_(threads < 1 ? 1 : (threads > 256 ? 256 : threads)),
        arena_(threads_ > 1 ? std::make_unique<tbb::task_arena>(threads_) : nullptr) {}
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return threads_; }

  /// Calls f(i) once for every i in [0, n) and returns when all calls have returned; calls for
  /// different i may run concurrently and in any order, so f(i) must write only what i owns. Each
  /// index is its own task: callers size their items (a batch of islands, a run of sessions).
  template <class F>
  void for_each(size_t n, const F& f) const {
    if (!arena_ || n <= 1) {
      for (size_t i = 0; i < n; ++i) f(i);
      return;
    }
    arena_->execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<size_t>(0, n, 1),
          [&](const tbb::blocked_range<size_t>& r) {
            for (size_t i = r.begin(); i != r.end(); ++i) f(i);
          },
          tbb::simple_partitioner());
    });
  }

 private:
  int threads_;
  std::unique_ptr<tbb::task_arena> arena_;
};

}  // namespace impulse
