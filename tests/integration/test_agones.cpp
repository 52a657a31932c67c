// The Agones lifecycle against a loopback stub of the SDK sidecar (a cpp-httplib server that
// records each call with its time): Ready, then Health on the timer, then Shutdown after the
// clients were told; a sidecar that starts after the server is retried until it gets Ready;
// Shutdown when the server has stayed empty after its last client left; and the real binary,
// turned on by AGONES_SDK_HTTP_PORT, calling Shutdown on SIGTERM. Every wait is bounded.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include <httplib.h>

#include "integration/harness.h"
#include "server/app/agones.h"

extern char** environ;

namespace impulse::test {
namespace {

using std::chrono::seconds;

/// A stand-in for the Agones SDK sidecar's REST API (POST /ready, /health, /shutdown) on
/// 127.0.0.1, recording every call. The probe, when set, is read inside each handler, so a test
/// can see the server's state at the moment a call arrived.
class StubSidecar {
 public:
  struct Call {
    std::string path;
    std::string body;
    std::string content_type;
    Clock::time_point at;
    uint64_t probe = 0;
  };

  /// Binds `port` (0 = any free port) and serves on its own thread; check ok().
  explicit StubSidecar(int port = 0) {
    for (const char* path : {"/ready", "/health", "/shutdown"}) {
      server_.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
        Call call{req.path, req.body, req.get_header_value("Content-Type"), Clock::now(), 0};
        {
          std::lock_guard lock(mutex_);
          if (probe_) call.probe = probe_();
          calls_.push_back(std::move(call));
        }
        changed_.notify_all();
        res.set_content("{}", "application/json");
      });
    }
    if (port == 0) {
      port_ = server_.bind_to_any_port("127.0.0.1");
    } else {
      port_ = server_.bind_to_port("127.0.0.1", port) ? port : -1;
    }
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~StubSidecar() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  StubSidecar(const StubSidecar&) = delete;
  StubSidecar& operator=(const StubSidecar&) = delete;

  bool ok() const { return port_ > 0; }
  uint16_t port() const { return static_cast<uint16_t>(port_); }
  void set_probe(std::function<uint64_t()> probe) {
    std::lock_guard lock(mutex_);
    probe_ = std::move(probe);
  }
  std::vector<Call> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  size_t count(std::string_view path) const {
    std::lock_guard lock(mutex_);
    return static_cast<size_t>(std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) { return c.path == path; }));
  }
  /// Waits (bounded) until at least `n` calls of `path` arrived.
  bool wait_for(std::string_view path, size_t n, milliseconds timeout = milliseconds{5000}) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      return static_cast<size_t>(std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) { return c.path == path; })) >= n;
    });
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<Call> calls_;
  std::function<uint64_t()> probe_;
};

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, read, closed).
uint16_t free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

/// Polls `done` every millisecond until it holds or `timeout` passes.
template <class Done>
bool eventually(Done done, milliseconds timeout = milliseconds{5000}) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds{1});  // a poll period, not a synchronisation
  }
  return done();
}

ServerOptions agones_options(uint16_t sidecar_port, double health_interval_s, double shutdown_when_empty_s = 0) {
  ServerOptions options;
  options.configure = [=](server::ServerConfig& c) {
    c.agones_port = sidecar_port;
    c.agones_health_interval_s = health_interval_s;
    c.agones_shutdown_when_empty_s = shutdown_when_empty_s;
    c.drain_seconds = 0;  // these tests are about the calls' order; the drain has its own (test_admin.cpp)
  };
  return options;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Every call the stub saw is a lifecycle POST of `{}` as application/json (the REST SDK's form).
void expect_rest_form(const std::vector<StubSidecar::Call>& calls) {
  for (const StubSidecar::Call& c : calls) {
    EXPECT_EQ(c.body, "{}") << c.path;
    EXPECT_EQ(c.content_type, "application/json") << c.path;
  }
}

TEST(Agones, ReadyThenHealthOnTheTimerThenShutdownAfterTheClientsAreTold) {
  StubSidecar sidecar;
  ASSERT_TRUE(sidecar.ok());
  RunningServer server(agones_options(sidecar.port(), 0.1));
  ASSERT_TRUE(server.started()) << server.error();
  sidecar.set_probe([&server] { return server.stats().clients.load(); });

  ASSERT_TRUE(sidecar.wait_for("/ready", 1)) << "no Ready within 5 s";
  ASSERT_TRUE(sidecar.wait_for("/health", 4)) << "fewer than 4 Health calls within 5 s";
  ClientDriver client;
  std::string error;
  ASSERT_TRUE(client.connect(server.port(), &error)) << error;
  ASSERT_TRUE(eventually([&] { return server.stats().clients.load() == 1; }));
  ASSERT_TRUE(sidecar.wait_for("/health", sidecar.count("/health") + 1));  // one Health with the client on
  EXPECT_EQ(sidecar.count("/shutdown"), 0u) << "no Shutdown while serving";

  server.stop();  // the path SIGTERM takes (run_until_signal calls Server::stop)
  const std::vector<StubSidecar::Call> calls = sidecar.calls();
  ASSERT_GE(calls.size(), 6u);
  EXPECT_EQ(calls.front().path, "/ready");
  EXPECT_EQ(calls.back().path, "/shutdown") << "Shutdown is the last call, acknowledged before run() returned";
  EXPECT_EQ(sidecar.count("/ready"), 1u);
  EXPECT_EQ(sidecar.count("/shutdown"), 1u);
  for (size_t i = 1; i + 1 < calls.size(); ++i) EXPECT_EQ(calls[i].path, "/health") << i;
  // The sessions were closed and their Disconnects sent before Shutdown was called.
  EXPECT_EQ(calls.back().probe, 0u) << "clients still connected when Shutdown arrived";
  EXPECT_EQ(calls[calls.size() - 2].probe, 1u) << "the client was connected until the stop";
  EXPECT_TRUE(client.poll_until([&] { return client.server_disconnected; })) << "the client was not told";
  // Health follows the 100 ms timer: no call sooner than ~0.8 periods after the previous one.
  for (size_t i = 2; i + 1 < calls.size(); ++i) {
    EXPECT_GE(ms_between(calls[i - 1].at, calls[i].at), 80.0) << "Health " << i;
  }
  expect_rest_form(calls);
  EXPECT_EQ(server.stats().agones_calls_failed.load(), 0u);
  EXPECT_EQ(server.stats().agones_calls_ok.load(), calls.size());
}

TEST(Agones, SidecarThatStartsAfterTheServerIsRetriedUntilItGetsReady) {
  const uint16_t port = free_tcp_port();
  ASSERT_NE(port, 0);
  RunningServer server(agones_options(port, 0.1));
  ASSERT_TRUE(server.started()) << server.error();
  // Nothing listens yet: Ready fails and is retried with backoff (100, 200, 400 ms...).
  ASSERT_TRUE(eventually([&] { return server.stats().agones_calls_failed.load() >= 3; }))
      << "Ready was not retried 3 times within 5 s";
  // The tick never waits on the sidecar: the server serves meanwhile.
  ClientDriver client;
  std::string error;
  EXPECT_TRUE(client.connect(server.port(), &error)) << error;

  StubSidecar sidecar(port);
  ASSERT_TRUE(sidecar.ok()) << "port " << port << " was taken meanwhile";
  const Clock::time_point started = Clock::now();
  ASSERT_TRUE(sidecar.wait_for("/ready", 1)) << "the late sidecar never got Ready";
  // The backoff is capped at 2 s, so Ready arrives within one capped delay of the sidecar's start.
  EXPECT_LE(ms_between(started, sidecar.calls().front().at), 2500.0);
  ASSERT_TRUE(sidecar.wait_for("/health", 2)) << "no Health after the late Ready";
  const std::vector<StubSidecar::Call> calls = sidecar.calls();
  EXPECT_EQ(calls.front().path, "/ready") << "the first call that got through is Ready";
  EXPECT_EQ(sidecar.count("/ready"), 1u) << "Ready is not repeated once acknowledged";
  expect_rest_form(calls);
  server.stop();
  EXPECT_EQ(sidecar.calls().back().path, "/shutdown");
}

TEST(Agones, ShutdownWhenEmptyFiresOnlyAfterTheLastClientLeft) {
  StubSidecar sidecar;
  ASSERT_TRUE(sidecar.ok());
  constexpr double kEmptyS = 0.5;
  RunningServer server(agones_options(sidecar.port(), 0.1, kEmptyS));
  ASSERT_TRUE(server.started()) << server.error();
  ASSERT_TRUE(sidecar.wait_for("/ready", 1));
  // Never joined: a Ready server without players is the fleet's buffer, not "empty". Eight Health
  // calls at 100 ms span longer than the 0.5 s threshold.
  ASSERT_TRUE(sidecar.wait_for("/health", 8));
  EXPECT_EQ(sidecar.count("/shutdown"), 0u) << "shut down before anyone joined";

  ClientDriver client;
  std::string error;
  ASSERT_TRUE(client.connect(server.port(), &error)) << error;
  ASSERT_TRUE(eventually([&] { return server.stats().clients.load() == 1; }));
  const size_t health_before = sidecar.count("/health");
  ASSERT_TRUE(sidecar.wait_for("/health", health_before + 8));  // > 0.5 s with a client
  EXPECT_EQ(sidecar.count("/shutdown"), 0u) << "shut down while a client was connected";

  const Clock::time_point left = Clock::now();  // before the Disconnect: the server cannot see it earlier
  client.client.disconnect();
  ASSERT_TRUE(sidecar.wait_for("/shutdown", 1)) << "no Shutdown within 5 s of the last client leaving";
  const std::vector<StubSidecar::Call> calls = sidecar.calls();
  const double after_ms = ms_between(left, calls.back().at);
  EXPECT_GE(after_ms, kEmptyS * 1000.0) << "Shutdown came before the server was empty for 0.5 s";
  EXPECT_LE(after_ms, kEmptyS * 1000.0 + 1000.0) << "Shutdown came late";
  EXPECT_EQ(server.stats().clients.load(), 0u);
  // The server keeps serving until Agones stops it (SIGTERM); it calls Shutdown only once.
  const uint64_t tick = server.stats().tick.load();
  ASSERT_TRUE(eventually([&] { return server.stats().tick.load() > tick; }));
  server.stop();
  EXPECT_EQ(sidecar.count("/shutdown"), 1u);
  EXPECT_EQ(sidecar.calls().back().path, "/shutdown") << "no Health after Shutdown";
  expect_rest_form(sidecar.calls());
}

// The lifecycle on its own, with a fake tick loop: Health stops while the loop's heartbeat stands
// still (so Agones marks a hung server Unhealthy) and resumes when it moves again.
TEST(AgonesLifecycle, HealthIsWithheldWhileTheTickLoopStalls) {
  StubSidecar sidecar;
  ASSERT_TRUE(sidecar.ok());
  std::atomic<uint64_t> wakeups{0}, ok{0}, failed{0};
  std::atomic<uint32_t> clients{0};
  std::atomic<bool> ticking{true}, quit{false};
  std::thread tick_loop([&] {  // a 100 Hz heartbeat while `ticking`
    for (int i = 0; i < 100000 && !quit; ++i) {
      if (ticking) wakeups.fetch_add(1);
      std::this_thread::sleep_for(milliseconds{10});
    }
  });
  server::AgonesSettings settings;
  settings.port = sidecar.port();
  settings.health_interval = milliseconds{100};  // a stall is then 1 s (the minimum) without a wake-up
  {
    server::AgonesLifecycle lifecycle(settings, wakeups, clients, ok, failed);
    lifecycle.start();
    ASSERT_TRUE(sidecar.wait_for("/ready", 1));
    ASSERT_TRUE(sidecar.wait_for("/health", 3));

    ticking = false;
    const Clock::time_point stalled = Clock::now();
    // Health goes quiet: wait (bounded) until no Health has arrived for 5 intervals.
    auto last_health = [&] {
      const std::vector<StubSidecar::Call> calls = sidecar.calls();
      return calls.back().at;
    };
    ASSERT_TRUE(eventually([&] { return Clock::now() - last_health() > milliseconds{500}; }))
        << "Health kept coming while the tick loop was stalled";
    EXPECT_LE(ms_between(stalled, last_health()), 1000.0 + 2 * 100.0 + 200.0)
        << "Health went on longer than the 1 s stall threshold plus two intervals (and slack)";
    const size_t withheld_at = sidecar.count("/health");

    ticking = true;
    const Clock::time_point resumed = Clock::now();
    ASSERT_TRUE(sidecar.wait_for("/health", withheld_at + 1)) << "Health did not resume";
    EXPECT_LE(ms_between(resumed, last_health()), 500.0) << "Health resumed late";
    lifecycle.request_shutdown();
    EXPECT_TRUE(lifecycle.wait_for_shutdown(milliseconds{5000}));
  }
  quit = true;
  tick_loop.join();
  EXPECT_EQ(sidecar.calls().back().path, "/shutdown");
  EXPECT_EQ(failed.load(), 0u);
}

// The real binary: AGONES_SDK_HTTP_PORT alone turns the lifecycle on (as in an Agones pod), SIGHUP
// is ignored, and SIGTERM drains (--drain-seconds 0.5), tells the client, calls Shutdown and exits 0.
TEST(AgonesProcess, SigtermCallsShutdownAfterReadyAndHealth) {
  StubSidecar sidecar;
  ASSERT_TRUE(sidecar.ok());
  TempFile scene("impulse-agones-scene", kGroundScene);
  const uint16_t port = [] {
    RawSocket probe;  // a free UDP port: bound, read, closed on return
    return probe.port();
  }();
  const std::string bin = IMPULSE_BIN_DIR "/impulse-server";
  const std::string port_text = std::to_string(port), scene_path = scene.path();
  std::vector<const char*> argv = {bin.c_str(), "--bind", "127.0.0.1", "--port", port_text.c_str(), "--scene",
                                   scene_path.c_str(), "--agones-health-interval", "0.1", "--log-level", "warn",
                                   "--drain-seconds", "0.5", nullptr};
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("AGONES_SDK_HTTP_PORT=")) continue;
    env_storage.emplace_back(*e);
  }
  env_storage.push_back("AGONES_SDK_HTTP_PORT=" + std::to_string(sidecar.port()));
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), nullptr, nullptr, const_cast<char* const*>(argv.data()), envp.data()), 0);

  const bool lifecycle = sidecar.wait_for("/ready", 1) && sidecar.wait_for("/health", 3);
  ClientDriver client;
  std::string error;
  const bool connected = client.client.connect("127.0.0.1", port, milliseconds{5000}, &error, "agones");
  // SIGHUP (a closed terminal) is logged and ignored: the player is still served.
  ::kill(pid, SIGHUP);
  const size_t before = client.snapshots.size();
  const bool served_after_hup = client.poll_until([&] { return client.snapshots.size() >= before + 5; });
  int hup_status = 0;
  const bool alive_after_hup = ::waitpid(pid, &hup_status, WNOHANG) == 0;
  ::kill(pid, SIGTERM);
  int status = 0;
  pid_t waited = 0;
  ASSERT_TRUE(eventually([&] { return (waited = ::waitpid(pid, &status, WNOHANG)) == pid; }, milliseconds{10000}))
      << "impulse-server did not exit within 10 s of SIGTERM";
  ASSERT_TRUE(lifecycle) << "no Ready and 3 Health calls within 5 s";
  ASSERT_TRUE(connected) << error;
  EXPECT_TRUE(alive_after_hup) << "SIGHUP killed the server (status " << hup_status << ")";
  EXPECT_TRUE(served_after_hup) << "no snapshots after SIGHUP";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(client.poll_until([&] { return client.server_disconnected; })) << "the client was not told";
  const std::vector<StubSidecar::Call> calls = sidecar.calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front().path, "/ready");
  EXPECT_EQ(calls.back().path, "/shutdown");
  EXPECT_EQ(sidecar.count("/shutdown"), 1u);
  expect_rest_form(calls);
}

}  // namespace
}  // namespace impulse::test
