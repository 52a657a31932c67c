// Server lifecycle over a real socket: actionable start-up errors (port in use, bad address, bad
// scene), and run()/stop() across threads. Message flows are covered by tests/integration/.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "server/app/scene.h"
#include "server/app/server.h"

namespace impulse::server {
namespace {

using namespace std::chrono_literals;

// Nearest rank over the bins, reported as the bin's upper edge (0.25 ms bins).
TEST(TickHistogram, QuantilesAreTheNearestRankBinsUpperEdge) {
  std::vector<uint64_t> counts(ServerStats::kTickHistogramBins, 0);
  EXPECT_FALSE(tick_time_quantile(counts, 0.99).has_value());
  counts[39] = 98;  // 98 wake-ups in [9.75, 10) ms
  counts[80] = 1;   // one in [20, 20.25) ms
  counts[ServerStats::kTickHistogramBins - 1] = 1;  // one past the last edge
  EXPECT_DOUBLE_EQ(*tick_time_quantile(counts, 0.5), 10.0);
  EXPECT_DOUBLE_EQ(*tick_time_quantile(counts, 0.98), 10.0);   // rank 98 of 100
  EXPECT_DOUBLE_EQ(*tick_time_quantile(counts, 0.99), 20.25);  // rank 99
  EXPECT_DOUBLE_EQ(*tick_time_quantile(counts, 1.0), 127.75);  // the last bin: its lower edge
  EXPECT_DOUBLE_EQ(*tick_time_quantile(counts, 0.0), 10.0);    // rank 1
}

ServerConfig local_config() {
  ServerConfig c;
  c.bind = "127.0.0.1";
  c.port = 0;
  c.log_level = "warn";
  return c;
}

TEST(Server, PortInUseSaysWhatToDo) {
  Server first(local_config());
  std::string error;
  ASSERT_TRUE(first.start(&error)) << error;
  ASSERT_NE(first.local_port(), 0);

  ServerConfig clash = local_config();
  clash.port = first.local_port();
  Server second(clash);
  EXPECT_FALSE(second.start(&error));
  EXPECT_NE(error.find(std::to_string(clash.port)), std::string::npos) << error;
  EXPECT_NE(error.find("--port"), std::string::npos) << error;
}

TEST(Server, BadBindAddressSaysWhatToDo) {
  ServerConfig c = local_config();
  c.bind = "not-an-address";
  Server server(c);
  std::string error;
  EXPECT_FALSE(server.start(&error));
  EXPECT_NE(error.find("--bind must be an IP address"), std::string::npos) << error;
  EXPECT_NE(error.find("not-an-address"), std::string::npos) << error;
}

TEST(Server, BadSceneNamesTheFile) {
  ServerConfig c = local_config();
  c.scene = "/nonexistent/scene.json";
  Server server(c);
  std::string error;
  EXPECT_FALSE(server.start(&error));
  EXPECT_NE(error.find("/nonexistent/scene.json"), std::string::npos) << error;
}

TEST(Server, InvalidConfigIsRefusedByStart) {
  ServerConfig c = local_config();
  c.tick_hz = 0;
  Server server(c);
  std::string error;
  EXPECT_FALSE(server.start(&error));
  EXPECT_NE(error.find("--tick-hz"), std::string::npos) << error;
}

TEST(Server, RunStepsUntilStopIsCalledFromAnotherThread) {
  Server server(local_config());
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  // The demo scene is loaded by start().
  EXPECT_EQ(server.stats().objects.load(), make_demo_scene().bodies.size());
  std::promise<void> returned;
  std::thread runner([&] {
    server.run();
    returned.set_value();
  });
  // Bounded wait for the loop to make progress (ticks are counted by the server thread).
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  for (int i = 0; i < 3000 && server.stats().tick.load() < 3 && std::chrono::steady_clock::now() < deadline; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GE(server.stats().tick.load(), 3u);
  EXPECT_NE(server.stats().world_hash.load(), 0u);
  server.stop();
  const bool stopped = returned.get_future().wait_for(1s) == std::future_status::ready;
  EXPECT_TRUE(stopped) << "run() did not return within 1 s of stop()";
  if (!stopped) server.stop();
  runner.join();
}

TEST(Server, StopBeforeRunMakesRunReturnAtOnce) {
  Server server(local_config());
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  server.stop();
  const auto t0 = std::chrono::steady_clock::now();
  server.run();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST(Server, RunWithoutASuccessfulStartReturnsAtOnce) {
  ServerConfig c = local_config();
  c.scene = "/nonexistent/scene.json";
  Server server(c);
  std::string error;
  ASSERT_FALSE(server.start(&error));
  const auto t0 = std::chrono::steady_clock::now();
  server.run();  // nothing to run: returns instead of blocking
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

}  // namespace
}  // namespace impulse::server
