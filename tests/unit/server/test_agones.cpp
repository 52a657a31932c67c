// The Agones lifecycle's pure parts: the retry backoff, which failures and recoveries are logged,
// and the flags (AGONES_SDK_HTTP_PORT turns it on; the flag beats the environment). The calls
// themselves are tested against a stub sidecar in tests/integration/test_agones.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "server/app/agones.h"
#include "server/app/config.h"

namespace impulse::server {
namespace {

using std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

ParseStatus parse(std::vector<const char*> args, ServerConfig& config, std::string& message) {
  args.insert(args.begin(), "impulse-server");
  return parse_config(static_cast<int>(args.size()), args.data(), config, &message);
}

TEST(AgonesBackoff, DoublesFromTheInitialDelayUpToTheCap) {
  const milliseconds initial{100}, cap{2000};
  EXPECT_EQ(agones_backoff(1, initial, cap), milliseconds{100});
  EXPECT_EQ(agones_backoff(2, initial, cap), milliseconds{200});
  EXPECT_EQ(agones_backoff(3, initial, cap), milliseconds{400});
  EXPECT_EQ(agones_backoff(5, initial, cap), milliseconds{1600});
  EXPECT_EQ(agones_backoff(6, initial, cap), milliseconds{2000});
  EXPECT_EQ(agones_backoff(1000000, initial, cap), milliseconds{2000}) << "no overflow on a long outage";
  EXPECT_EQ(agones_backoff(0, initial, cap), milliseconds{100});
}

TEST(AgonesFailureLog, EachKindOfFailureIsLoggedOnceAndTheRecoveryOnce) {
  AgonesFailureLog log;
  const TimePoint t0{};
  EXPECT_FALSE(log.succeeded("Ready", t0)) << "a success without failures is not news";
  const std::optional<std::string> first = log.failed("Ready", "cannot connect", t0);
  ASSERT_TRUE(first);
  EXPECT_NE(first->find("Ready failed: cannot connect"), std::string::npos) << *first;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(log.failed("Ready", "cannot connect", t0 + milliseconds{100 * i})) << i;
  const std::optional<std::string> other = log.failed("Ready", "HTTP 503", t0 + milliseconds{1500});
  ASSERT_TRUE(other) << "a new kind of failure is logged";
  EXPECT_NE(other->find("HTTP 503"), std::string::npos) << *other;
  EXPECT_NE(other->find("before: cannot connect"), std::string::npos) << *other;
  // Another call's failures are its own.
  EXPECT_TRUE(log.failed("Health", "cannot connect", t0));
  const std::optional<std::string> recovered = log.succeeded("Ready", t0 + milliseconds{2500});
  ASSERT_TRUE(recovered);
  EXPECT_NE(recovered->find("Ready succeeded after 12 failed attempts over 2.5 s"), std::string::npos) << *recovered;
  EXPECT_FALSE(log.succeeded("Ready", t0 + milliseconds{2600})) << "the recovery is logged once";
  EXPECT_TRUE(log.failed("Ready", "cannot connect", t0 + milliseconds{3000})) << "a new outage is logged again";
}

TEST(AgonesConfig, OffByDefault) {
  const ScopedEnv env("AGONES_SDK_HTTP_PORT", nullptr);
  ServerConfig config;
  std::string message;
  ASSERT_EQ(parse({}, config, message), ParseStatus::Run) << message;
  EXPECT_FALSE(agones_enabled(config));
  EXPECT_NE(describe_config(config).find("agones=off"), std::string::npos);
}

TEST(AgonesConfig, TheSidecarPortInTheEnvironmentTurnsItOn) {
  const ScopedEnv env("AGONES_SDK_HTTP_PORT", "9400");
  ServerConfig config;
  std::string message;
  ASSERT_EQ(parse({}, config, message), ParseStatus::Run) << message;
  EXPECT_TRUE(agones_enabled(config));
  EXPECT_EQ(config.agones_port, 9400);
  EXPECT_NE(describe_config(config).find("agones=localhost:9400"), std::string::npos) << describe_config(config);
}

TEST(AgonesConfig, TheFlagBeatsTheEnvironment) {
  const ScopedEnv env("AGONES_SDK_HTTP_PORT", "9400");
  ServerConfig config;
  std::string message;
  ASSERT_EQ(parse({"--agones-port", "9500", "--agones-health-interval", "0.5", "--agones-shutdown-when-empty", "30"},
                  config, message),
            ParseStatus::Run)
      << message;
  EXPECT_EQ(config.agones_port, 9500);
  EXPECT_EQ(config.agones_health_interval_s, 0.5);
  EXPECT_EQ(config.agones_shutdown_when_empty_s, 30.0);
}

TEST(AgonesConfig, TheBareFlagUsesTheDefaultPort) {
  const ScopedEnv env("AGONES_SDK_HTTP_PORT", nullptr);
  ServerConfig config;
  std::string message;
  ASSERT_EQ(parse({"--agones"}, config, message), ParseStatus::Run) << message;
  EXPECT_TRUE(agones_enabled(config));
  EXPECT_EQ(config.agones_port, 0);
  EXPECT_NE(describe_config(config).find("agones=localhost:9358 health_interval=2s shutdown_when_empty=off"),
            std::string::npos)
      << describe_config(config);
}

TEST(AgonesConfig, BadValuesAreRejectedNamingTheFlag) {
  const ScopedEnv env("AGONES_SDK_HTTP_PORT", nullptr);
  struct Case {
    std::vector<const char*> args;
    const char* expected;
  };
  const Case cases[] = {
      {{"--agones-port", "70000"}, "--agones-port (or AGONES_SDK_HTTP_PORT) must be in 0..65535 (got 70000)"},
      {{"--agones-port", "-1"}, "--agones-port (or AGONES_SDK_HTTP_PORT) must be in 0..65535"},
      {{"--agones-port", "http"}, "--agones-port"},
      {{"--agones-health-interval", "0"}, "--agones-health-interval must be in [0.05, 300]"},
      {{"--agones-health-interval", "nan"}, "--agones-health-interval"},
      {{"--agones-shutdown-when-empty", "-1"}, "--agones-shutdown-when-empty must be in [0, 604800]"},
  };
  for (const Case& c : cases) {
    ServerConfig config;
    std::string message;
    EXPECT_EQ(parse(c.args, config, message), ParseStatus::Error) << c.expected;
    EXPECT_NE(message.find(c.expected), std::string::npos) << "expected \"" << c.expected << "\" in \"" << message << "\"";
  }
  const ScopedEnv bad("AGONES_SDK_HTTP_PORT", "99999");
  ServerConfig config;
  std::string message;
  EXPECT_EQ(parse({}, config, message), ParseStatus::Error);
  EXPECT_NE(message.find("AGONES_SDK_HTTP_PORT"), std::string::npos) << message;
}

}  // namespace
}  // namespace impulse::server
