// The Agones game-server lifecycle over the SDK sidecar's REST API, on its own thread: Ready once
// the server serves, Health on a timer while the tick loop makes progress, Shutdown when asked
// (SIGTERM, after the clients were told) or when the server has stayed empty after its last client
// left. Every call is retried with exponential backoff, since the sidecar may start after the
// server; each kind of failure is logged once, and its recovery once.
//
// The REST API (https://agones.dev/site/docs/guides/client-sdks/rest/, "Lifecycle Management"):
// `POST /ready`, `POST /health`, `POST /shutdown`, each with the body `{}` and Content-Type
// application/json, on http://localhost:${AGONES_SDK_HTTP_PORT}/ (default port 9358).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace impulse::server {

/// The sidecar's default REST port (Agones sets AGONES_SDK_HTTP_PORT to the actual one).
inline constexpr uint16_t kAgonesDefaultHttpPort = 9358;

/// How the lifecycle thread talks to the sidecar. Durations in milliseconds.
struct AgonesSettings {
  std::string host = "localhost";   ///< the sidecar listens on the pod's loopback only
  uint16_t port = kAgonesDefaultHttpPort;
  std::chrono::milliseconds health_interval{2000};  ///< between Health calls; below the fleet's periodSeconds
  /// Shutdown once the server has had no client for this long after its last client left; 0 = never.
  std::chrono::milliseconds shutdown_when_empty{0};
  std::chrono::milliseconds backoff_initial{100};  ///< the first retry's delay; doubled per failure
  std::chrono::milliseconds backoff_max{2000};     ///< the largest retry delay
  std::chrono::milliseconds request_timeout{1000}; ///< connect, read and write timeout of one call
};

/// The delay before retry number `failures` (1 = after the first failure): initial * 2^(failures-1),
/// capped at max. Pure.
std::chrono::milliseconds agones_backoff(int failures, std::chrono::milliseconds initial, std::chrono::milliseconds max);

/// Decides which call failures and recoveries are worth a log line: the first failure of a call,
/// a failure of a different kind than the last one logged for that call, and the first success
/// after failures. Retries that fail the same way are counted, not logged. Pure (no I/O, no clock).
class AgonesFailureLog {
 public:
  /// `call` failed with `what` (e.g. "cannot connect"). Returns the line to log, or nullopt.
  std::optional<std::string> failed(std::string_view call, std::string_view what, std::chrono::steady_clock::time_point now);
  /// `call` succeeded. Returns the recovery line to log if it had been failing, or nullopt.
  std::optional<std::string> succeeded(std::string_view call, std::chrono::steady_clock::time_point now);

 private:
  struct State {
    std::string what;  // the kind of failure last logged
    uint64_t failures = 0;
    std::chrono::steady_clock::time_point since{};
  };
  std::map<std::string, State, std::less<>> failing_;
};

/// The lifecycle thread. The server constructs it once the scene is loaded and the socket bound,
/// start()s it when the tick loop starts, and calls request_shutdown() after its clients were told
/// it is going away. Nothing here blocks the caller: the HTTP calls run on the thread.
class AgonesLifecycle {
 public:
  /// `progress` is a counter the tick loop advances every wake-up: Health is withheld while it
  /// stands still, so a stalled server turns Unhealthy in Agones. `clients` is the live session
  /// count (for shutdown_when_empty). `calls_ok` and `calls_failed` count the HTTP calls.
  /// The referenced atomics must outlive this object.
  AgonesLifecycle(AgonesSettings settings, const std::atomic<uint64_t>& progress, const std::atomic<uint32_t>& clients,
                  std::atomic<uint64_t>& calls_ok, std::atomic<uint64_t>& calls_failed);
  /// Stops and joins the thread (at most one call's timeout), without sending Shutdown.
  ~AgonesLifecycle();
  AgonesLifecycle(const AgonesLifecycle&) = delete;
  AgonesLifecycle& operator=(const AgonesLifecycle&) = delete;

  /// Starts the thread: Ready (retried until it succeeds), then Health every health_interval.
  /// Call once.
  void start();
  /// Asks the thread to send Shutdown (retried) and then stop calling. Non-blocking, idempotent.
  void request_shutdown();
  /// Waits at most `timeout` for the sidecar to acknowledge Shutdown; true when it did.
  bool wait_for_shutdown(std::chrono::milliseconds timeout);
  const AgonesSettings& settings() const { return settings_; }

 private:
  enum class Outcome : uint8_t { Ok, Failed };
  void run();
  Outcome call(const char* path, const char* name);
  /// Waits until `until`, stop, or a shutdown request (when `wake_on_shutdown`). Returns false on stop.
  bool wait_until(std::chrono::steady_clock::time_point until, bool wake_on_shutdown);

  const AgonesSettings settings_;
  const std::atomic<uint64_t>& progress_;
  const std::atomic<uint32_t>& clients_;
  std::atomic<uint64_t>& calls_ok_;
  std::atomic<uint64_t>& calls_failed_;
  AgonesFailureLog failure_log_;  // the thread's only

  std::mutex mutex_;  // guards the three flags below; never held across an HTTP call
  std::condition_variable wake_;
  bool stop_ = false;
  bool shutdown_requested_ = false;
  bool shutdown_done_ = false;
  std::thread thread_;
};

}  // namespace impulse::server
