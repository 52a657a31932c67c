// The admin endpoint over real loopback HTTP (cpp-httplib's client) against a real server with
// real clients: /metrics agrees with ServerStats, rises between scrapes and passes promtool;
// /healthz flips to 503 when the tick loop is held; /readyz is 503 while draining; only GET and
// HEAD of the three paths are served; /objects; and the front under slow and oversized requests.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "integration/harness.h"
#include "server/app/admin_http.h"

namespace impulse::test {
namespace {

ServerOptions admin_options(double stall_seconds = 2.0) {
  ServerOptions o;
  o.configure = [stall_seconds](server::ServerConfig& c) {
    c.admin_port = -1;  // an ephemeral port
    c.health_stall_seconds = stall_seconds;
  };
  return o;
}

httplib::Client http_client(uint16_t port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(2, 0);
  client.set_write_timeout(2, 0);
  return client;
}

/// GET `path`; nullopt when the request failed (no connection, timeout).
std::optional<httplib::Response> get(uint16_t port, const std::string& path) {
  httplib::Client client = http_client(port);
  httplib::Result r = client.Get(path);
  if (!r) return std::nullopt;
  return *r;
}

/// The value of the sample `series` (e.g. `impulse_clients` or `impulse_drops_total{reason="X"}`)
/// in a /metrics body; nullopt when absent or unparsable.
std::optional<double> value_of(const std::string& text, std::string_view series) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line(text.data() + at, end - at);
    if (line.size() > series.size() && line.substr(0, series.size()) == series && line[series.size()] == ' ') {
      const std::string number(line.substr(series.size() + 1));
      char* parsed_end = nullptr;
      const double v = std::strtod(number.c_str(), &parsed_end);
      if (parsed_end == number.c_str()) return std::nullopt;
      return v;
    }
    at = end + 1;
  }
  return std::nullopt;
}

/// Scrapes until pred(status, body) holds or the deadline passes; returns the last response.
template <class Pred>
std::optional<httplib::Response> poll_http(uint16_t port, const std::string& path, Pred pred,
                                           milliseconds timeout = kWaitTimeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::optional<httplib::Response> last;
  for (int i = 0; i < 2000 && Clock::now() < deadline; ++i) {
    last = get(port, path);
    if (last && pred(*last)) return last;
    std::this_thread::sleep_for(milliseconds(5));  // a polling interval, not a synchronisation
  }
  return last;
}

uint64_t load(const std::atomic<uint64_t>& a) { return a.load(); }

TEST(Admin, OffByDefault) {
  RunningServer server;
  ASSERT_TRUE(server.started()) << server.error();
  EXPECT_EQ(server.server().admin_port(), 0);
}

TEST(Admin, MetricsAgreeWithServerStatsAfterAScriptedSession) {
  RunningServer server(admin_options());
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  ASSERT_NE(port, 0);
  const server::ServerStats& stats = server.stats();

  // The script: three clients, each creates two spheres; one pushes an id that does not exist.
  ClientDriver clients[3];
  for (ClientDriver& c : clients) {
    std::string error;
    ASSERT_TRUE(c.connect(server.port(), &error)) << error;
  }
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 2; ++k) {
      ASSERT_NE(clients[i].create_ok(make_sphere(0.5f, {static_cast<float>(4 * i), 1.0f + 2.0f * static_cast<float>(k), 0})),
                ObjectID{});
    }
  }
  const std::optional<RequestResult> stale = clients[0].wait_result(clients[0].client.apply_impulse(ObjectID{999, 7}, {0, 1, 0}));
  ASSERT_TRUE(stale.has_value());
  EXPECT_EQ(stale->code, ResultCode::StaleId);

  // The counters keep moving (snapshots flow), so bracket the scrape: before <= scraped <= after.
  // A scrape shows the figures of the last completed wake-up: take one that shows a later tick
  // than `before` saw, so it was copied after `before` was read.
  const uint64_t bytes_in_before = load(stats.bytes_in), bytes_out_before = load(stats.bytes_out);
  const uint64_t datagrams_in_before = load(stats.datagrams_in), snapshot_bytes_before = load(stats.snapshot_bytes);
  const uint64_t tick_before = load(stats.tick);
  const std::optional<httplib::Response> r = poll_http(port, "/metrics", [&](const httplib::Response& res) {
    return value_of(res.body, "impulse_world_tick").value_or(0) > static_cast<double>(tick_before);
  });
  const uint64_t bytes_in_after = load(stats.bytes_in), bytes_out_after = load(stats.bytes_out);
  const uint64_t datagrams_in_after = load(stats.datagrams_in), snapshot_bytes_after = load(stats.snapshot_bytes);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = r->body;

  EXPECT_EQ(value_of(text, "impulse_clients"), 3.0);
  EXPECT_EQ(value_of(text, "impulse_clients"), static_cast<double>(stats.clients.load()));
  EXPECT_EQ(value_of(text, "impulse_bodies"), 7.0);  // the ground and six spheres
  EXPECT_EQ(value_of(text, "impulse_bodies"), static_cast<double>(stats.objects.load()));
  const auto bracketed = [&](std::string_view series, uint64_t before, uint64_t after) {
    SCOPED_TRACE(std::string(series));
    const std::optional<double> v = value_of(text, series);
    ASSERT_TRUE(v.has_value());
    EXPECT_GE(*v, static_cast<double>(before));
    EXPECT_LE(*v, static_cast<double>(after));
  };
  bracketed("impulse_received_bytes_total", bytes_in_before, bytes_in_after);
  bracketed("impulse_sent_bytes_total", bytes_out_before, bytes_out_after);
  bracketed("impulse_datagrams_received_total", datagrams_in_before, datagrams_in_after);
  bracketed("impulse_snapshot_bytes_total", snapshot_bytes_before, snapshot_bytes_after);
  EXPECT_GT(value_of(text, "impulse_sent_bytes_total").value_or(0), 0.0);
  // Six creates answered Ok, one push StaleId: by code, and as ServerStats counts them.
  EXPECT_EQ(value_of(text, "impulse_request_results_total{code=\"Ok\"}"), 6.0);
  EXPECT_EQ(value_of(text, "impulse_request_results_total{code=\"StaleId\"}"), 1.0);
  EXPECT_EQ(value_of(text, "impulse_request_results_total{code=\"Ok\"}"), static_cast<double>(stats.requests_applied.load()));
  EXPECT_EQ(value_of(text, "impulse_drops_total{reason=\"StaleId\"}"), 1.0);
  EXPECT_GE(value_of(text, "impulse_tick_duration_seconds_count").value_or(0), 1.0);
  EXPECT_EQ(value_of(text, "impulse_tick_duration_seconds_bucket{le=\"+Inf\"}"),
            value_of(text, "impulse_tick_duration_seconds_count"));
  EXPECT_GT(value_of(text, "process_resident_memory_bytes").value_or(0), 0.0);
  EXPECT_GT(value_of(text, "process_cpu_seconds_total").value_or(0), 0.0);
  EXPECT_EQ(value_of(text, "impulse_recording_active"), 0.0);
}

TEST(Admin, TicksTotalRisesBetweenTwoScrapes) {
  RunningServer server(admin_options());
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  const std::optional<httplib::Response> first =
      poll_http(port, "/metrics", [](const httplib::Response& r) { return value_of(r.body, "impulse_ticks_total").value_or(0) > 0; });
  ASSERT_TRUE(first.has_value());
  const double ticks = value_of(first->body, "impulse_ticks_total").value_or(0);
  ASSERT_GT(ticks, 0.0);
  const std::optional<httplib::Response> second = poll_http(
      port, "/metrics", [&](const httplib::Response& r) { return value_of(r.body, "impulse_ticks_total").value_or(0) > ticks; });
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(value_of(second->body, "impulse_ticks_total").value_or(0), ticks);
}

TEST(Admin, HealthzFlipsTo503WhileTheTickLoopIsHeldAndBackAfter) {
  RunningServer server(admin_options(/*stall_seconds=*/0.2));
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  const auto status_is = [](int status) { return [status](const httplib::Response& r) { return r.status == status; }; };
  const std::optional<httplib::Response> healthy = poll_http(port, "/healthz", status_is(200));
  ASSERT_TRUE(healthy.has_value());
  ASSERT_EQ(healthy->status, 200) << healthy->body;

  server.server().test_only_stall(std::chrono::seconds(20));  // released below
  const std::optional<httplib::Response> stalled = poll_http(port, "/healthz", status_is(503), milliseconds(10'000));
  server.server().test_only_release_stall();
  ASSERT_TRUE(stalled.has_value());
  EXPECT_EQ(stalled->status, 503);
  EXPECT_NE(stalled->body.find("stalled"), std::string::npos) << stalled->body;
  // Readiness is not liveness: a stalled loop is still ready.
  const std::optional<httplib::Response> ready = get(port, "/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200);

  const std::optional<httplib::Response> recovered = poll_http(port, "/healthz", status_is(200));
  ASSERT_TRUE(recovered.has_value());
  EXPECT_EQ(recovered->status, 200) << recovered->body;
}

TEST(Admin, ReadyzIs503DuringDrain) {
  RunningServer server(admin_options());
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  const std::optional<httplib::Response> ready =
      poll_http(port, "/readyz", [](const httplib::Response& r) { return r.status == 200; });
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200) << ready->body;

  // stop() is the SIGTERM path (run_until_signal calls it): the loop tells every client and
  // returns; the admin endpoint answers until the Server is destroyed.
  server.stop();
  const std::optional<httplib::Response> draining = get(port, "/readyz");
  ASSERT_TRUE(draining.has_value());
  EXPECT_EQ(draining->status, 503);
  EXPECT_NE(draining->body.find("draining"), std::string::npos) << draining->body;
  const std::optional<httplib::Response> health = get(port, "/healthz");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 200) << "a drain on purpose is not a stall: " << health->body;
}

TEST(Admin, ClientsListsEachSessionsTrafficWithoutNamesByDefault) {
  for (const bool names : {false, true}) {
    ServerOptions options;
    options.configure = [names](server::ServerConfig& c) {
      c.admin_port = -1;
      c.admin_owner_names = names;
    };
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver a, b;
    std::string error;
    ASSERT_TRUE(a.connect(server.port(), &error, "alice")) << error;
    ASSERT_TRUE(b.connect(server.port(), &error, "bob")) << error;
    const uint32_t id_a = a.client.client_id(), id_b = b.client.client_id();
    // Published once a second: poll until both sessions show traffic both ways.
    nlohmann::json list;
    bool complete = false;
    poll_http(server.server().admin_port(), "/clients", [&](const httplib::Response& res) {
      a.poll_once();
      b.poll_once();
      if (res.status != 200) return false;
      list = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
      if (!list.is_array() || list.size() != 2) return false;
      for (const auto& c : list) {
        if (c.value("received_bytes", 0u) == 0 || c.value("sent_bytes", 0u) == 0) return false;
      }
      return complete = true;
    });
    ASSERT_TRUE(complete) << "no /clients with two sessions' traffic: " << list.dump();
    EXPECT_EQ(list[0]["client_id"], std::min(id_a, id_b));
    EXPECT_EQ(list[1]["client_id"], std::max(id_a, id_b));
    for (const auto& c : list) {
      EXPECT_GE(c["connected_s"].get<double>(), 0.0);
      EXPECT_EQ(c.contains("name"), names) << c.dump();
      EXPECT_FALSE(c.contains("address")) << "addresses are in the logs, not on the admin port";
    }
    if (names) {
      EXPECT_EQ(list[id_a < id_b ? 0 : 1]["name"], "alice");
    }
  }
}

ServerOptions drain_options(double drain_seconds) {
  ServerOptions o;
  o.configure = [drain_seconds](server::ServerConfig& c) {
    c.admin_port = -1;
    c.drain_seconds = drain_seconds;
  };
  return o;
}

TEST(Drain, AStopWithPlayersInDrainsThenStops) {
  // --drain-seconds 1.5: the player keeps getting snapshots, a newcomer is refused ShuttingDown,
  // /readyz is 503, and the player is told Disconnect when the time is up.
  RunningServer server(drain_options(1.5));
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver player;
  std::string error;
  ASSERT_TRUE(player.connect(server.port(), &error)) << error;
  ASSERT_TRUE(player.poll_until([&] { return player.snapshots.size() >= 2; }));
  EXPECT_FALSE(player.client.server_stops_in_s(Clock::now()).has_value()) << "not stopping yet";

  const Clock::time_point stopped_at = Clock::now();
  server.server().stop();  // the SIGTERM path
  const size_t before = player.snapshots.size();
  ASSERT_TRUE(player.poll_until([&] { return player.snapshots.size() >= before + 10; }))
      << "the player stopped getting snapshots during the drain";
  EXPECT_FALSE(player.server_disconnected);
  // Every snapshot tells the time left: the player can save, or say goodbye.
  const std::optional<double> left = player.client.server_stops_in_s(Clock::now());
  ASSERT_TRUE(left.has_value()) << "the snapshots did not say the server is stopping";
  const double elapsed = std::chrono::duration<double>(Clock::now() - stopped_at).count();
  EXPECT_LE(*left, 1.5);
  EXPECT_NEAR(*left, 1.5 - elapsed, 0.25);
  const std::optional<httplib::Response> ready = get(server.server().admin_port(), "/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 503) << ready->body;
  ClientDriver newcomer;
  EXPECT_FALSE(newcomer.connect(server.port(), &error));
  EXPECT_NE(error.find("shutting down"), std::string::npos) << error;

  ASSERT_TRUE(player.poll_until([&] { return player.server_disconnected; }, milliseconds{10000}));
  const double drained_s = std::chrono::duration<double>(Clock::now() - stopped_at).count();
  EXPECT_GE(drained_s, 1.4) << "the drain ended early";
  EXPECT_NE(player.disconnect_reason.find("shutting down"), std::string::npos) << player.disconnect_reason;
}

TEST(Drain, EndsWhenTheLastPlayerLeavesOrAtASecondStop) {
  {  // the last player leaves: the server stops at once, not after 60 s
    RunningServer server(drain_options(60));
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver player;
    std::string error;
    ASSERT_TRUE(player.connect(server.port(), &error)) << error;
    server.server().stop();
    ASSERT_TRUE(player.poll_until([&] { return player.snapshots.size() >= 3; }));
    player.client.disconnect("done");
    const Clock::time_point left_at = Clock::now();
    server.stop();  // joins the tick thread: returns when the drain is over
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - left_at).count(), 5.0);
  }
  {  // a second stop while draining stops now
    RunningServer server(drain_options(60));
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver player;
    std::string error;
    ASSERT_TRUE(player.connect(server.port(), &error)) << error;
    server.server().stop();
    ASSERT_TRUE(player.poll_until([&] { return player.snapshots.size() >= 3; }));
    EXPECT_FALSE(player.server_disconnected);
    server.server().stop();
    EXPECT_TRUE(player.poll_until([&] { return player.server_disconnected; }, milliseconds{5000}));
  }
}

TEST(Admin, ServesOnlyGetAndHeadOfItsThreePaths) {
  RunningServer server(admin_options());
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  httplib::Client client = http_client(port);

  const httplib::Result missing = client.Get("/metrics/../secret");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  const httplib::Result root = client.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 404);
  const httplib::Result post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_TRUE(post->status == 405 || post->status == 413) << post->status;
  const httplib::Result del = client.Delete("/healthz");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);
  EXPECT_EQ(del->get_header_value("Allow"), "GET, HEAD");

  const httplib::Result head = client.Head("/metrics");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());

  // A request head past the front's 8 KiB bound is refused, and the endpoint still serves.
  httplib::Headers huge{{"X-Filler", std::string(16 * 1024, 'a')}};
  const httplib::Result refused = client.Get("/metrics", huge);
  EXPECT_TRUE(!refused || refused->status >= 400) << (refused ? refused->status : 0);
  const std::optional<httplib::Response> after = get(port, "/healthz");
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status, 200);
}

/// Ticks the server takes while `load` runs for about `duration`, and the seconds it ran.
template <class Load>
std::pair<uint64_t, double> ticks_during(const server::ServerStats& stats, milliseconds duration, Load load_fn) {
  const uint64_t tick_before = load(stats.tick);
  const Clock::time_point start = Clock::now();
  load_fn(start + duration);
  return {load(stats.tick) - tick_before, std::chrono::duration<double>(Clock::now() - start).count()};
}

// A scrape flood, then a hostile scraper's connections that send nothing (each is held until its
// 2 s deadline). The tick must not notice either: it only ever try_locks the hand-over.
TEST(Admin, AScrapeFloodAndIdleConnectionsDoNotSlowTheTick) {
  RunningServer server(admin_options());
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  const server::ServerStats& stats = server.stats();
  // 60 Hz: about 60 ticks a second; a tick that waited on the HTTP side would lose most of them.
  const auto enough = [](uint64_t ticks, double seconds) { return static_cast<double>(ticks) >= 0.6 * 60.0 * seconds; };

  std::atomic<int> answered{0};
  const auto [flood_ticks, flood_s] = ticks_during(stats, milliseconds(1000), [&](Clock::time_point until) {
    std::vector<std::thread> scrapers;
    for (int t = 0; t < 3; ++t) {
      scrapers.emplace_back([&] {
        for (int i = 0; i < 10'000 && Clock::now() < until; ++i) {
          if (const auto r = get(port, "/metrics"); r && r->status == 200) answered.fetch_add(1);
        }
      });
    }
    for (std::thread& t : scrapers) t.join();
  });
  EXPECT_GT(answered.load(), 10);
  EXPECT_TRUE(enough(flood_ticks, flood_s)) << flood_ticks << " ticks in " << flood_s << " s";

  std::vector<int> idle;
  const auto [idle_ticks, idle_s] = ticks_during(stats, milliseconds(1000), [&](Clock::time_point until) {
    for (int i = 0; i < 24; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      ASSERT_GE(fd, 0);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(port);
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      // Non-blocking: once the backlog is full a connect would wait, and that is the point.
      ::fcntl(fd, F_SETFL, O_NONBLOCK);
      ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
      idle.push_back(fd);
    }
    for (int i = 0; i < 10'000 && Clock::now() < until; ++i) std::this_thread::sleep_for(milliseconds(5));
  });
  for (const int fd : idle) ::close(fd);
  EXPECT_TRUE(enough(idle_ticks, idle_s)) << idle_ticks << " ticks in " << idle_s << " s";
  EXPECT_EQ(stats.steps_dropped.load(), 0u);

  // Once the idle connections are gone the endpoint answers again.
  const std::optional<httplib::Response> after =
      poll_http(port, "/healthz", [](const httplib::Response& r) { return r.status == 200; }, milliseconds(10'000));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status, 200);
  std::printf("[ info ] %llu ticks in %.2f s under %d scrapes; %llu ticks in %.2f s with 24 idle connections\n",
              static_cast<unsigned long long>(flood_ticks), flood_s, answered.load(),
              static_cast<unsigned long long>(idle_ticks), idle_s);
}

// --- The HTTP front under slow and oversized requests (server/app/admin_http.h) ---------------

/// A blocking loopback TCP connection to `port`; -1 when it cannot connect.
int tcp_connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

/// Everything the peer sends until it closes, or until `timeout` passes (then nullopt).
std::optional<std::string> read_to_close(int fd, milliseconds timeout) {
  std::string got;
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got;  // closed (or reset)
    got.append(buf, static_cast<size_t>(n));
  }
}

/// Whether the peer has closed `fd` (a read would return 0 or fail) without waiting.
bool closed_by_peer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

// Attack E: connections that drip a request head one byte at a time. With a thread per
// connection, 40 of them left /healthz unanswered 4 times out of 4 and the orchestrator would
// have killed a healthy server. Here 200 of them are held open and kept dripping (each one closed
// by the server is reopened) while a probe asks for /healthz 30 times: every probe is answered,
// and the server keeps no more than its 64-connection cap open.
TEST(Admin, HealthzIsAnsweredWhile200SlowConnectionsDrip) {
  RunningServer server(admin_options());
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  constexpr int kSlow = 200;
  std::vector<int> slow(kSlow, -1);
  int reopened = 0;
  const auto refill = [&] {
    for (int& fd : slow) {
      if (fd >= 0 && !closed_by_peer(fd)) continue;
      if (fd >= 0) {
        ::close(fd);
        ++reopened;
      }
      fd = tcp_connect(port);
      if (fd >= 0) send_all(fd, "GET /metrics HTTP/1.1\r\nX-Slow: ");
    }
  };
  refill();
  std::vector<double> latencies_ms;
  for (int probe = 0; probe < 30; ++probe) {
    for (const int fd : slow) {
      if (fd >= 0) send_all(fd, "a");  // one more header byte each
    }
    const Clock::time_point start = Clock::now();
    const int fd = tcp_connect(port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::optional<std::string> response = read_to_close(fd, milliseconds(5000));
    latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    ::close(fd);
    ASSERT_TRUE(response.has_value()) << "probe " << probe << " unanswered";
    EXPECT_EQ(response->substr(0, 15), "HTTP/1.1 200 OK") << *response;
    refill();
    std::this_thread::sleep_for(milliseconds(20));  // a probe interval, not a synchronisation
  }
  int open_now = 0;
  for (const int fd : slow) open_now += fd >= 0 && !closed_by_peer(fd) ? 1 : 0;
  for (const int fd : slow) {
    if (fd >= 0) ::close(fd);
  }
  // The cap, plus the probe being served and the few reopened since the last eviction.
  EXPECT_GE(reopened, kSlow - 64) << "the connection cap closed the oldest slow connections";
  std::sort(latencies_ms.begin(), latencies_ms.end());
  const double worst = latencies_ms.back(), median = latencies_ms[latencies_ms.size() / 2];
  std::printf("[ info ] /healthz with %d slow connections kept dripping: median %.2f ms, worst %.2f ms; "
              "%d reopened after the server closed them, %d of %d open at the end\n",
              kSlow, median, worst, reopened, open_now, kSlow);
  if (timing_checks()) {
    EXPECT_LE(worst, 100.0) << "a liveness probe must be answered within 100 ms";
  }
}

TEST(Admin, ARequestHeadPast8KiBGets431AndADripperIsClosedAtTheDeadline) {
  server::HttpFront::Options o;
  o.port = 0;
  o.request_deadline = milliseconds(300);
  std::string error;
  const auto front = server::HttpFront::start(
      o, [](std::string_view path, server::HttpRespond respond) { respond(server::HttpReply{200, "text/plain", std::string(path)}); },
      &error);
  ASSERT_TRUE(front) << error;

  // 100 KiB of header lines: refused at 8 KiB, and never buffered past it.
  const int big = tcp_connect(front->port());
  ASSERT_GE(big, 0);
  std::string head = "GET /x HTTP/1.1\r\n";
  while (head.size() < 100 * 1024) head += "X-Filler: " + std::string(100, 'a') + "\r\n";
  send_all(big, head);  // may fail part-way once the server closes: that is fine
  const std::optional<std::string> refused = read_to_close(big, milliseconds(5000));
  ::close(big);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->substr(0, 12), "HTTP/1.1 431") << *refused;
  EXPECT_EQ(front->stats().header_too_big, 1u);

  // A byte every 50 ms never completes a head: closed at the 300 ms deadline.
  const int drip = tcp_connect(front->port());
  ASSERT_GE(drip, 0);
  send_all(drip, "GET /x HTTP/1.1\r\n");
  const Clock::time_point start = Clock::now();
  bool closed = false;
  for (int i = 0; i < 200 && !closed; ++i) {
    std::this_thread::sleep_for(milliseconds(50));  // the attacker's drip interval
    closed = closed_by_peer(drip) || !send_all(drip, "b");
  }
  const double held_s = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(drip);
  EXPECT_TRUE(closed);
  EXPECT_GE(held_s, 0.25);
  EXPECT_EQ(front->stats().timed_out, 1u);

  // Well-formed: answered, with the query string stripped; malformed lines get 400, other methods 405.
  const auto ask = [&](std::string_view request) {
    const int fd = tcp_connect(front->port());
    send_all(fd, request);
    const std::optional<std::string> r = read_to_close(fd, milliseconds(5000));
    ::close(fd);
    return r.value_or("");
  };
  const std::string ok = ask("GET /a/b?c=d HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ok.substr(0, 15), "HTTP/1.1 200 OK") << ok;
  EXPECT_EQ(ok.substr(ok.size() - 4), "/a/b") << ok;
  EXPECT_EQ(ask("GET\r\n\r\n").substr(0, 12), "HTTP/1.1 400");
  EXPECT_EQ(ask("GET x HTTP/1.1\r\n\r\n").substr(0, 12), "HTTP/1.1 400");
  const std::string post = ask("POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx");
  EXPECT_EQ(post.substr(0, 12), "HTTP/1.1 405") << post;
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos) << post;
  const std::string head_only = ask("HEAD /abc HTTP/1.1\r\n\r\n");
  EXPECT_NE(head_only.find("Content-Length: 4\r\n"), std::string::npos) << head_only;
  EXPECT_EQ(head_only.substr(head_only.size() - 4), "\r\n\r\n") << "HEAD: no body";
}

TEST(Admin, ATakenAdminPortFailsTheStartAndNamesTheFlag) {
  RunningServer first(admin_options());
  ASSERT_TRUE(first.started()) << first.error();
  const int taken = first.server().admin_port();
  ServerOptions o;
  o.configure = [taken](server::ServerConfig& c) { c.admin_port = taken; };
  RunningServer second(o);
  EXPECT_FALSE(second.started());
  EXPECT_NE(second.error().find("--admin-port"), std::string::npos) << second.error();
}

// promtool (Debian's prometheus package, scripts/setup) must accept the whole exposition,
// recording figures included. Skipped where promtool is not installed.
TEST(Admin, PromtoolCheckMetricsAcceptsTheExposition) {
  std::string promtool;
  for (const char* candidate : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (std::filesystem::exists(candidate)) promtool = candidate;
  }
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (apt-get install prometheus, or scripts/setup)";

  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string recording = (dir / ("impulse-admin-" + std::to_string(::getpid()) + ".irec")).string();
  ServerOptions o = admin_options();
  o.record_file = recording;
  std::string body;
  {
    RunningServer server(o);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver client;
    std::string error;
    ASSERT_TRUE(client.connect(server.port(), &error)) << error;
    ASSERT_NE(client.create_ok(make_sphere(0.5f, {0, 2, 0})), ObjectID{});
    ASSERT_TRUE(client.wait_result(client.client.apply_impulse(ObjectID{999, 7}, {0, 1, 0})).has_value());
    // Once a second the sessions' RTTs are sampled: wait for one so the histogram has data.
    const std::optional<httplib::Response> r = poll_http(
        server.server().admin_port(), "/metrics",
        [&](const httplib::Response& res) {
          client.poll_once();
          return value_of(res.body, "impulse_client_rtt_seconds_count").value_or(0) > 0;
        },
        milliseconds(5000));
    ASSERT_TRUE(r.has_value());
    body = r->body;
  }
  std::error_code ignored;
  std::filesystem::remove(recording, ignored);
  EXPECT_GT(value_of(body, "impulse_client_rtt_seconds_count").value_or(0), 0.0);
  EXPECT_EQ(value_of(body, "impulse_recording_active"), 1.0);
  EXPECT_TRUE(value_of(body, "impulse_recording_lag_bytes").has_value());

  const TempFile scraped("impulse-metrics", body);
  const std::string command = promtool + " check metrics < " + scraped.path() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  for (int i = 0; i < 10'000 && std::fgets(buffer, sizeof buffer, pipe) != nullptr; ++i) output += buffer;
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_EQ(output, "") << "promtool's lint findings";
}

// GET /objects/<id>: the tick thread answers who owns an object (snapshots do not carry owners).
TEST(Admin, ObjectsNamesAClientsBodysOwnerAndTheScenesAsNone) {
  ServerOptions options = admin_options();
  options.configure = [](server::ServerConfig& c) {
    c.admin_port = -1;
    c.admin_owner_names = true;
  };
  RunningServer server(options);
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  ClientDriver alice;
  std::string error;
  // A quote, a backslash and a control character (the server logs it as '?'): the JSON stays valid.
  ASSERT_TRUE(alice.connect(server.port(), &error, "alice \"a\\b\" \x01")) << error;
  ObjectDesc shared_desc = make_sphere(0.5f, {4, 2, 0});
  shared_desc.shared = true;
  const ObjectID own = alice.create_ok(make_sphere(0.5f, {0, 2, 0}));
  const ObjectID shared = alice.create_ok(shared_desc);
  ASSERT_NE(own, ObjectID{});
  ASSERT_NE(shared, ObjectID{});
  const uint32_t alice_id = alice.client.client_id();
  ASSERT_NE(alice_id, 0u);

  const std::string own_path = "/objects/" + std::to_string(own.index) + ":" + std::to_string(own.generation);
  const std::optional<httplib::Response> r = get(port, own_path);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const std::string id = std::to_string(own.index) + ":" + std::to_string(own.generation);
  EXPECT_EQ(r->body, "{\"id\":\"" + id + "\",\"index\":" + std::to_string(own.index) + ",\"generation\":" +
                         std::to_string(own.generation) + ",\"owner\":" + std::to_string(alice_id) +
                         R"(,"owner_name":"alice \"a\\b\" ?","owner_connected":true,"shared":false})" + "\n");

  // The index alone names the live object in that slot.
  const std::optional<httplib::Response> by_index = get(port, "/objects/" + std::to_string(shared.index));
  ASSERT_TRUE(by_index.has_value());
  EXPECT_EQ(by_index->status, 200) << by_index->body;
  EXPECT_NE(by_index->body.find("\"owner\":" + std::to_string(alice_id) + ","), std::string::npos) << by_index->body;
  EXPECT_NE(by_index->body.find("\"shared\":true"), std::string::npos) << by_index->body;

  // The scene's ground is the first body created: slot 0, owned by nobody, everyone's to push.
  const std::optional<httplib::Response> ground = get(port, "/objects/0");
  ASSERT_TRUE(ground.has_value());
  EXPECT_EQ(ground->status, 200) << ground->body;
  EXPECT_NE(ground->body.find(R"("owner":null,"owner_name":null)"), std::string::npos) << ground->body;
  EXPECT_NE(ground->body.find("\"shared\":true"), std::string::npos) << ground->body;

  // Stale and unknown ids: 404. Malformed ids: 400.
  const std::optional<httplib::Response> stale =
      get(port, "/objects/" + std::to_string(own.index) + ":" + std::to_string(own.generation + 1));
  ASSERT_TRUE(stale.has_value());
  EXPECT_EQ(stale->status, 404) << stale->body;
  const std::optional<httplib::Response> unknown = get(port, "/objects/99999");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  for (const char* bad : {"/objects/", "/objects/x", "/objects/-1", "/objects/1:", "/objects/:1", "/objects/1:2:3",
                          "/objects/4294967296", "/objects/%201", "/objects/+1"}) {
    const std::optional<httplib::Response> b = get(port, bad);
    ASSERT_TRUE(b.has_value()) << bad;
    EXPECT_EQ(b->status, 400) << bad << ": " << b->body;
  }

  // Destroyed: its id goes stale at once for the admin endpoint too.
  const std::optional<RequestResult> destroyed = alice.wait_result(alice.client.destroy(own));
  ASSERT_TRUE(destroyed.has_value());
  ASSERT_TRUE(destroyed->ok());
  const std::optional<httplib::Response> gone = get(port, own_path);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->status, 404) << gone->body;
}

// Without --admin-owner-names, anyone who reaches the port learns who owns a body (a client id)
// but not the player's chosen name.
TEST(Admin, ObjectsHidesOwnerNamesUnlessAsked) {
  RunningServer server(admin_options());
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver alice;
  std::string error;
  ASSERT_TRUE(alice.connect(server.port(), &error, "alice-secret-name")) << error;
  const ObjectID own = alice.create_ok(make_sphere(0.5f, {0, 2, 0}));
  ASSERT_NE(own, ObjectID{});
  const std::optional<httplib::Response> r =
      get(server.server().admin_port(), "/objects/" + std::to_string(own.index) + ":" + std::to_string(own.generation));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("\"owner\":" + std::to_string(alice.client.client_id()) + ",\"owner_name\":null,\"owner_connected\":true"),
            std::string::npos)
      << r->body;
  EXPECT_EQ(r->body.find("alice-secret-name"), std::string::npos) << r->body;
}

TEST(Admin, ObjectsAnswers503WhenTheTickLoopDoesNotAnswer) {
  RunningServer server(admin_options(/*stall_seconds=*/0.2));
  ASSERT_TRUE(server.started()) << server.error();
  const uint16_t port = server.server().admin_port();
  const std::optional<httplib::Response> before = get(port, "/objects/0");
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->status, 200) << before->body;
  server.server().test_only_stall(std::chrono::seconds(20));  // released below
  // The stall is posted to the loop: wait until /healthz shows it has begun.
  const std::optional<httplib::Response> held =
      poll_http(port, "/healthz", [](const httplib::Response& res) { return res.status == 503; }, milliseconds(10'000));
  ASSERT_TRUE(held.has_value());
  ASSERT_EQ(held->status, 503);
  const Clock::time_point start = Clock::now();
  const std::optional<httplib::Response> stalled = get(port, "/objects/0");
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  server.server().test_only_release_stall();
  ASSERT_TRUE(stalled.has_value());
  EXPECT_EQ(stalled->status, 503) << stalled->body;
  EXPECT_LT(waited, 1.5) << "the handler's deadline bounds the wait";
  // The loop answers again once released.
  const std::optional<httplib::Response> after =
      poll_http(port, "/objects/0", [](const httplib::Response& res) { return res.status == 200; });
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status, 200) << after->body;
}


// Protocol 8 end to end: a scene hull reaches a real client as a Hull entry naming asset 0 with
// its bounding half extents, and the admin endpoint serves that asset's geometry and hash.
TEST(Admin, AHullBodyNamesItsAssetAndTheEndpointServesIt) {
  ServerOptions o = admin_options();
  o.scene_json = R"({ "name": "rock", "bodies": [
    { "kind": "Static", "shape": "Box", "dims": { "x": 50, "y": 0.5, "z": 50 }, "position": { "x": 0, "y": -0.5, "z": 0 } },
    { "name": "rock", "shape": "Hull", "position": { "x": 0, "y": 0.5, "z": 0 }, "points": [
      {"x":-0.5,"y":-0.5,"z":-0.5}, {"x":0.5,"y":-0.5,"z":-0.5}, {"x":-0.5,"y":0.5,"z":-0.5}, {"x":0.5,"y":0.5,"z":-0.5},
      {"x":-0.5,"y":-0.5,"z":0.5}, {"x":0.5,"y":-0.5,"z":0.5}, {"x":-0.5,"y":0.5,"z":0.5}, {"x":0.5,"y":0.5,"z":0.5} ] } ] })";
  RunningServer server(o);
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver c;
  std::string error;
  ASSERT_TRUE(c.connect(server.port(), &error)) << error;
  const std::optional<uint64_t> seen = c.wait_snapshot_where(0, [](const std::vector<ObjectState>& objects) {
    return std::any_of(objects.begin(), objects.end(), [](const ObjectState& s) {
      return s.shape == ShapeKind::Hull && s.asset == 0 && s.dims.x == 0.5f && s.dims.y == 0.5f && s.dims.z == 0.5f;
    });
  });
  EXPECT_TRUE(seen.has_value()) << "no snapshot showed the hull with asset 0";

  const uint16_t port = server.server().admin_port();
  const std::optional<httplib::Response> list = get(port, "/assets");
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->status, 200);
  EXPECT_NE(list->body.find(R"("id":0,"kind":"hull","hash":"041f7d03f4d9135a","vertices":8,"faces":6)"), std::string::npos)
      << list->body;
  const std::optional<httplib::Response> one = get(port, "/assets/0");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->status, 200);
  EXPECT_NE(one->body.find(R"("faces":[[0,1,5,4],[0,2,3,1],[0,4,6,2],[1,3,7,5],[2,6,7,3],[4,5,7,6]],)"
                           R"("model_frame":{"origin":[0,0,0],"rotation":[0,0,0,1]}})"),
            std::string::npos)
      << one->body;
  const std::optional<httplib::Response> missing = get(port, "/assets/1");
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 404);
  const std::optional<httplib::Response> bad = get(port, "/assets/x");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status, 400);
}

}  // namespace
}  // namespace impulse::test
