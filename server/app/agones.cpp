// The Agones lifecycle thread (see agones.h). One HTTP call at a time with cpp-httplib's blocking
// client; the mutex guards only the flags, never a call, so request_shutdown() from the tick
// thread never waits on the network.
#include "server/app/agones.h"

#include <algorithm>
#include <exception>

#include <httplib.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace impulse::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often the thread looks at the client count when --agones-shutdown-when-empty is on.
constexpr milliseconds kEmptyPoll{100};

std::string describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect (is the Agones SDK sidecar running?)";
    case httplib::Error::ConnectionTimeout:
      return "connection timed out";
    case httplib::Error::Read:
      return "no answer (read failed or timed out)";
    case httplib::Error::Write:
      return "sending the request failed";
    default:
      return fmt::format("HTTP client error {}", httplib::to_string(error));
  }
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

milliseconds agones_backoff(int failures, milliseconds initial, milliseconds max) {
  if (failures < 1 || initial.count() <= 0) return std::max(initial, milliseconds{0});
  milliseconds delay = initial;
  for (int i = 1; i < failures && delay < max; ++i) delay *= 2;  // at most ~log2(max / initial) rounds
  return std::min(delay, max);
}

std::optional<std::string> AgonesFailureLog::failed(std::string_view call, std::string_view what, Clock::time_point now) {
  auto it = failing_.find(call);
  if (it == failing_.end()) {
    failing_.emplace(std::string(call), State{std::string(what), 1, now});
    return fmt::format("{} failed: {}; retrying with backoff, and not logging the same failure again", call, what);
  }
  State& s = it->second;
  ++s.failures;
  if (s.what == what) return std::nullopt;
  std::string line = fmt::format("{} failed: {} (before: {}); retrying with backoff", call, what, s.what);
  s.what = std::string(what);
  return line;
}

std::optional<std::string> AgonesFailureLog::succeeded(std::string_view call, Clock::time_point now) {
  auto it = failing_.find(call);
  if (it == failing_.end()) return std::nullopt;
  std::string line = fmt::format("{} succeeded after {} failed attempt{} over {:.1f} s", call, it->second.failures,
                                 it->second.failures == 1 ? "" : "s", seconds(now - it->second.since));
  failing_.erase(it);
  return line;
}

AgonesLifecycle::AgonesLifecycle(AgonesSettings settings, const std::atomic<uint64_t>& progress,
                                 const std::atomic<uint32_t>& clients, std::atomic<uint64_t>& calls_ok,
                                 std::atomic<uint64_t>& calls_failed)
    : settings_(std::move(settings)), progress_(progress), clients_(clients), calls_ok_(calls_ok), calls_failed_(calls_failed) {}

AgonesLifecycle::~AgonesLifecycle() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AgonesLifecycle::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void AgonesLifecycle::request_shutdown() {
  {
    std::lock_guard lock(mutex_);
    shutdown_requested_ = true;
  }
  wake_.notify_all();
}

bool AgonesLifecycle::wait_for_shutdown(milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!thread_.joinable()) return shutdown_done_;  // never started: nobody would send it
  return wake_.wait_for(lock, timeout, [this] { return shutdown_done_ || stop_; }) && shutdown_done_;
}

bool AgonesLifecycle::wait_until(Clock::time_point until, bool wake_on_shutdown) {
  std::unique_lock lock(mutex_);
  wake_.wait_until(lock, until, [&] { return stop_ || (wake_on_shutdown && shutdown_requested_); });
  return !stop_;
}

AgonesLifecycle::Outcome AgonesLifecycle::call(const char* path, const char* name) {
  std::string what;
  try {
    httplib::Client client(settings_.host, settings_.port);
    const auto timeout_us = std::chrono::duration_cast<std::chrono::microseconds>(settings_.request_timeout).count();
    const auto sec = static_cast<time_t>(timeout_us / 1'000'000), usec = static_cast<time_t>(timeout_us % 1'000'000);
    client.set_connection_timeout(sec, usec);
    client.set_read_timeout(sec, usec);
    client.set_write_timeout(sec, usec);
    // The REST SDK's lifecycle calls are POSTs of an empty JSON object (agones.h names the page).
    const httplib::Result result = client.Post(path, "{}", "application/json");
    if (!result) {
      what = describe(result.error());
    } else if (result->status < 200 || result->status > 299) {
      what = fmt::format("HTTP {}", result->status);
    }
  } catch (const std::exception& e) {  // nothing may escape the thread (std::terminate)
    what = fmt::format("HTTP client exception: {}", e.what());
  }
  const Clock::time_point now = Clock::now();
  if (what.empty()) {
    calls_ok_.fetch_add(1, std::memory_order_relaxed);
    if (std::optional<std::string> line = failure_log_.succeeded(name, now)) spdlog::info("agones: {}", *line);
    return Outcome::Ok;
  }
  calls_failed_.fetch_add(1, std::memory_order_relaxed);
  if (std::optional<std::string> line = failure_log_.failed(name, what, now)) {
    spdlog::warn("agones: {}; SDK sidecar at {}:{}", *line, settings_.host, settings_.port);
  }
  return Outcome::Failed;
}

void AgonesLifecycle::run() {
  const milliseconds interval = settings_.health_interval;
  // A stall is a health interval (at least a second) without a tick-loop wake-up.
  const milliseconds stall_after = std::max(interval, milliseconds{1000});
  const bool watch_empty = settings_.shutdown_when_empty.count() > 0;
  int failures = 0;           // consecutive failures of the current call: Ready, then Health
  int shutdown_failures = 0;
  bool ready = false;
  bool stalled = false;
  bool had_clients = false;  // a Ready server nobody joined yet is the fleet's buffer: never empty-shut
  bool empty = false;  // no client since empty_since (after had_clients)
  Clock::time_point empty_since{};
  uint64_t last_progress = progress_.load(std::memory_order_relaxed);
  Clock::time_point last_progress_at = Clock::now();
  Clock::time_point next_health{};

  for (;;) {
    bool shutdown = false;
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      shutdown = shutdown_requested_;
    }
    const Clock::time_point now = Clock::now();
    if (shutdown) {
      if (call("/shutdown", "Shutdown") == Outcome::Ok) {
        spdlog::info("agones: Shutdown acknowledged by the SDK sidecar; Agones will stop this game server");
        {
          std::lock_guard lock(mutex_);
          shutdown_done_ = true;
        }
        wake_.notify_all();
        wait_until(Clock::time_point::max(), false);  // nothing more to say: Health would contradict it
        return;
      }
      if (!wait_until(now + agones_backoff(++shutdown_failures, settings_.backoff_initial, settings_.backoff_max), false)) {
        return;
      }
      continue;
    }
    if (!ready) {
      if (call("/ready", "Ready") == Outcome::Ok) {
        spdlog::info("agones: Ready acknowledged by the SDK sidecar at {}:{}; Health every {:.1f} s", settings_.host,
                     settings_.port, seconds(interval));
        ready = true;
        failures = 0;
        next_health = Clock::now() + interval;
      } else if (!wait_until(now + agones_backoff(++failures, settings_.backoff_initial, settings_.backoff_max), true)) {
        return;
      }
      continue;
    }

    if (const uint64_t p = progress_.load(std::memory_order_relaxed); p != last_progress) {
      last_progress = p;
      last_progress_at = now;
    }
    if (watch_empty) {
      if (clients_.load(std::memory_order_relaxed) > 0) {
        had_clients = true;
        empty = false;
      } else if (had_clients) {
        if (!empty) {
          empty = true;
          empty_since = now;
        }
        if (now - empty_since >= settings_.shutdown_when_empty) {
          spdlog::info("agones: no client for {:.1f} s since the last one left: asking Agones to shut down "
                       "(--agones-shutdown-when-empty)",
                       seconds(now - empty_since));
          request_shutdown();
          continue;
        }
      }
    }
    if (now >= next_health) {
      if (now - last_progress_at >= stall_after) {
        if (!stalled) {
          spdlog::error("agones: the tick loop has not woken for {:.1f} s: Health withheld, so Agones marks this game "
                        "server Unhealthy if the stall outlasts the fleet's health threshold",
                        seconds(now - last_progress_at));
          stalled = true;
        }
        next_health = now + interval;
      } else {
        if (stalled) spdlog::info("agones: the tick loop is running again: Health resumed");
        stalled = false;
        if (call("/health", "Health") == Outcome::Ok) {
          failures = 0;
          next_health = now + interval;
        } else {
          next_health = now + std::min(agones_backoff(++failures, settings_.backoff_initial, settings_.backoff_max), interval);
        }
      }
    }
    Clock::time_point until = next_health;
    if (watch_empty) until = std::min(until, Clock::now() + kEmptyPoll);
    if (!wait_until(until, true)) return;
  }
}

}  // namespace impulse::server
