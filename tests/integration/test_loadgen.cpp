// The real impulse-loadgen binary against its in-process server: a short bounded run whose JSON
// report must show every bot connected, every body spawned and destroyed, no request errors, and
// a consistent tick-time distribution (p50 <= p99 <= max over the wake-ups it counted).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace impulse::test {
namespace {

// The number after "key": in the loadgen's flat, compact JSON object; nullopt when the key is
// absent or not a number (null).
std::optional<double> json_number(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = json.find(needle);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = json.c_str() + at + needle.size();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  return value;
}

TEST(Loadgen, AShortInprocRunReportsEveryBotAndAConsistentTickDistribution) {
  const std::string bin = IMPULSE_BIN_DIR "/impulse-loadgen";
  if (access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << "impulse-loadgen not built (nlohmann_json missing)";
  const std::string out = ::testing::TempDir() + "impulse_loadgen_report.json";
  const int rc = std::system(fmt::format("'{}' --server inproc --clients 8 --bodies 64 --seconds 2 --settle 1 --quiet "
                                         "--json > '{}' 2> /dev/null",
                                         bin, out)
                                 .c_str());
  ASSERT_EQ(rc, 0);
  std::ifstream file(out);
  std::stringstream text;
  text << file.rdbuf();
  const std::string json = text.str();
  ASSERT_FALSE(json.empty());

  EXPECT_EQ(json_number(json, "clients_connected"), 8.0);
  EXPECT_EQ(json_number(json, "bodies_spawned"), 64.0);
  EXPECT_EQ(json_number(json, "bodies_destroyed"), 64.0);
  EXPECT_EQ(json_number(json, "error_total"), 0.0);
  EXPECT_EQ(json_number(json, "disconnects"), 0.0);
  // Two seconds at 60 Hz: about 120 wake-ups with steps (fewer if some ran two steps).
  const std::optional<double> wakeups = json_number(json, "server_wakeups");
  ASSERT_TRUE(wakeups.has_value());
  EXPECT_GE(*wakeups, 60.0);
  EXPECT_LE(*wakeups, 130.0);
  const std::optional<double> p50 = json_number(json, "server_tick_ms_p50");
  const std::optional<double> p99 = json_number(json, "server_tick_ms_p99");
  const std::optional<double> max = json_number(json, "server_tick_ms_max");
  ASSERT_TRUE(p50 && p99 && max);
  EXPECT_GT(*p50, 0.0);
  EXPECT_LE(*p50, *p99);
  EXPECT_LE(*p99, *max);
  // Every bot got snapshots at about the configured 20 Hz.
  const std::optional<double> rate = json_number(json, "snapshots_per_client_per_s");
  ASSERT_TRUE(rate.has_value());
  EXPECT_GT(*rate, 10.0);
  EXPECT_LE(*rate, 21.0);
  std::remove(out.c_str());
}

}  // namespace
}  // namespace impulse::test
