// A fixed pool of HTTP worker threads with a bounded queue, for cpp-httplib servers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace impulse {

/// cpp-httplib's own ThreadPool queues accepted connections without limit; this one holds at most
/// max_queued. enqueue() is called by the server's accept thread and waits while the queue is
/// full, so no more connections are accepted until a worker is free and the kernel's backlog
/// holds the rest (nothing accepted is dropped without being closed). shutdown() runs what is
/// queued (each job closes its socket), then joins the workers. Used by impulse-viewer's page
/// server (tools/viewer/http.cpp).
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(size_t workers, size_t max_queued) : max_queued_(max_queued) {
    for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  ~BoundedPool() override { shutdown(); }
  BoundedPool(const BoundedPool&) = delete;
  BoundedPool& operator=(const BoundedPool&) = delete;

  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mutex_);
    space_.wait(lock, [this] { return jobs_.size() < max_queued_ || stopping_; });
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ && threads_.empty()) return;
      stopping_ = true;
    }
    ready_.notify_all();
    space_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !jobs_.empty() || stopping_; });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      space_.notify_one();
      job();
    }
  }

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace impulse
