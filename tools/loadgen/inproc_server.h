// An Impulse server running on its own thread inside the calling process, for the network
// benchmarks (impulse-bench --scene N1|latency) and impulse-loadgen --server inproc: the real
// server::Server over real loopback UDP, with its stats and its thread's CPU time readable.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <time.h>

#include "server/app/server.h"

namespace impulse::tools {

/// Owns one server::Server and the thread that runs its tick loop. Not copyable or movable
/// (the thread refers to it). Destruction stops the server and joins the thread.
class InprocServer {
 public:
  /// Starts a server with `config` (use port 0 for an ephemeral port and bind 127.0.0.1 to keep
  /// the benchmark off the network), installs `observer` (may be empty; it runs on the server's
  /// thread, see server::SnapshotObserver) and runs the tick loop on a new thread. Makes spdlog's
  /// default logger write to stderr (once per process), so stdout stays the caller's report.
  /// @return null with *error saying why when the configuration, scene or socket is bad
  static std::unique_ptr<InprocServer> start(server::ServerConfig config, server::SnapshotObserver observer,
                                             std::string* error);
  ~InprocServer();
  InprocServer(const InprocServer&) = delete;
  InprocServer& operator=(const InprocServer&) = delete;

  /// The bound UDP port.
  uint16_t port() const;
  const server::ServerStats& stats() const;
  const server::ServerConfig& config() const { return config_; }
  /// CPU time the server's thread has used so far [s] (its POSIX per-thread CPU clock, which
  /// counts user and system time of that thread only). nullopt when the clock is unavailable or
  /// the server has stopped.
  std::optional<double> thread_cpu_seconds() const;
  /// Sends Disconnect to every client, ends the tick loop and joins the thread. Idempotent.
  void stop();

 private:
  explicit InprocServer(server::ServerConfig config);

  server::ServerConfig config_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
  std::optional<clockid_t> cpu_clock_;  // the server thread's CPU clock, while it runs
  bool stopped_ = false;
};

/// CPU time the calling thread has used so far [s] (CLOCK_THREAD_CPUTIME_ID); 0 if unavailable.
double this_thread_cpu_seconds();
/// CPU time the whole process has used so far, user + system [s] (getrusage RUSAGE_SELF).
double process_cpu_seconds();

/// The machine's CPU time so far, all CPUs, from the "cpu" line of /proc/stat [clock ticks]:
/// `steal` is time the hypervisor ran something else while a virtual CPU wanted to run. nullopt
/// where /proc/stat is unreadable (not Linux).
struct MachineCpuTicks {
  uint64_t total = 0;  ///< user + nice + system + idle + iowait + irq + softirq + steal
  uint64_t steal = 0;
};
std::optional<MachineCpuTicks> machine_cpu_ticks();

}  // namespace impulse::tools
