// Server flags: defaults, IMPULSE_* environment fallback, flag-over-environment precedence, and
// range errors that name the flag.
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "server/app/config.h"

namespace impulse::server {
namespace {

/// Sets an environment variable for the scope of a test and restores the old state after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
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

struct Parsed {
  ParseStatus status;
  ServerConfig config;
  std::string message;
};

Parsed parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"impulse-server"};
  argv.insert(argv.end(), args.begin(), args.end());
  Parsed p{ParseStatus::Error, ServerConfig{}, {}};
  p.status = parse_config(static_cast<int>(argv.size()), argv.data(), p.config, &p.message);
  return p;
}

TEST(Config, DefaultsWithoutFlags) {
  const Parsed p = parse({});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  const ServerConfig d;
  EXPECT_EQ(p.config.bind, "0.0.0.0");
  EXPECT_EQ(p.config.port, 7777);
  EXPECT_EQ(p.config.tick_hz, 60);
  EXPECT_EQ(p.config.snapshot_hz, 30);
  EXPECT_EQ(p.config.scene, "demo");
  EXPECT_EQ(p.config.max_clients, 64);
  EXPECT_EQ(p.config.client_timeout_s, 10.0);
  EXPECT_EQ(p.config.max_steps_per_frame, d.max_steps_per_frame);
  EXPECT_EQ(p.config.log_level, "info");
  EXPECT_TRUE(validate_config(d).empty());
}

TEST(Config, FlagsAreParsed) {
  const Parsed p = parse({"--bind", "127.0.0.1", "--port", "0", "--tick-hz", "120", "--snapshot-hz", "20", "--scene",
                          "x.json", "--max-clients", "3", "--client-timeout", "2.5", "--log-level", "debug",
                          "--max-steps-per-frame", "8", "--stats-interval", "1", "--threads", "3"});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.bind, "127.0.0.1");
  EXPECT_EQ(p.config.port, 0);
  EXPECT_EQ(p.config.tick_hz, 120);
  EXPECT_EQ(p.config.snapshot_hz, 20);
  EXPECT_EQ(p.config.scene, "x.json");
  EXPECT_EQ(p.config.max_clients, 3);
  EXPECT_EQ(p.config.client_timeout_s, 2.5);
  EXPECT_EQ(p.config.log_level, "debug");
  EXPECT_EQ(p.config.max_steps_per_frame, 8);
  EXPECT_EQ(p.config.stats_interval_s, 1.0);
  EXPECT_EQ(p.config.threads, 3);
}

TEST(Config, EnvironmentIsTheFallback) {
  const ScopedEnv tick("IMPULSE_TICK_HZ", "120");
  const ScopedEnv port("IMPULSE_PORT", "9000");
  const ScopedEnv scene("IMPULSE_SCENE", "scenes/a.json");
  const ScopedEnv timeout("IMPULSE_CLIENT_TIMEOUT", "3");
  const ScopedEnv level("IMPULSE_LOG_LEVEL", "warn");
  const Parsed p = parse({});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.tick_hz, 120);
  EXPECT_EQ(p.config.port, 9000);
  EXPECT_EQ(p.config.scene, "scenes/a.json");
  EXPECT_EQ(p.config.client_timeout_s, 3.0);
  EXPECT_EQ(p.config.log_level, "warn");
}

TEST(Config, FlagBeatsEnvironment) {
  const ScopedEnv tick("IMPULSE_TICK_HZ", "120");
  const ScopedEnv clients("IMPULSE_MAX_CLIENTS", "5");
  const Parsed p = parse({"--tick-hz", "30", "--max-clients", "7"});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.tick_hz, 30);
  EXPECT_EQ(p.config.max_clients, 7);
}

TEST(Config, BadEnvironmentValueIsAnError) {
  const ScopedEnv tick("IMPULSE_TICK_HZ", "0");
  const Parsed p = parse({});
  EXPECT_EQ(p.status, ParseStatus::Error);
  EXPECT_NE(p.message.find("--tick-hz must be in 1..1000"), std::string::npos) << p.message;
}

TEST(Config, OutOfRangeValuesAreRejectedNamingTheFlag) {
  struct Case {
    std::vector<const char*> args;
    const char* expected;
  };
  const Case cases[] = {
      {{"--tick-hz", "0"}, "--tick-hz must be in 1..1000 (got 0)"},
      {{"--tick-hz", "1001"}, "--tick-hz must be in 1..1000"},
      {{"--snapshot-hz", "0"}, "--snapshot-hz must be in"},
      {{"--tick-hz", "30", "--snapshot-hz", "60"}, "--snapshot-hz must be in 1..30"},
      {{"--port", "70000"}, "--port must be in 0..65535 (got 70000)"},
      {{"--port", "-1"}, "--port must be in 0..65535"},
      {{"--max-clients", "0"}, "--max-clients must be in 1..4096"},
      {{"--max-clients", "5000"}, "--max-clients must be in 1..4096"},
      {{"--client-timeout", "0"}, "--client-timeout must be in (0, 3600]"},
      {{"--client-timeout", "nan"}, "--client-timeout"},
      {{"--client-timeout", "-5"}, "--client-timeout must be in (0, 3600]"},
      {{"--max-steps-per-frame", "0"}, "--max-steps-per-frame must be in 1..100"},
      {{"--stats-interval", "0"}, "--stats-interval must be in"},
      {{"--threads", "-1"}, "--threads must be in 0..256"},
      {{"--threads", "257"}, "--threads must be in 0..256 (0 = one per CPU core; got 257)"},
      {{"--log-level", "loud"}, "--log-level must be one of"},
      {{"--scene", ""}, "--scene must be"},
      {{"--bind", ""}, "--bind must be"},
  };
  for (const Case& c : cases) {
    std::vector<const char*> argv{"impulse-server"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    ServerConfig config;
    std::string message;
    EXPECT_EQ(parse_config(static_cast<int>(argv.size()), argv.data(), config, &message), ParseStatus::Error)
        << c.expected;
    EXPECT_NE(message.find(c.expected), std::string::npos) << "expected \"" << c.expected << "\" in \"" << message
                                                             << "\"";
  }
}

TEST(Config, NonNumbersAndUnknownFlagsAreErrors) {
  Parsed p = parse({"--tick-hz", "fast"});
  EXPECT_EQ(p.status, ParseStatus::Error);
  EXPECT_NE(p.message.find("--tick-hz"), std::string::npos) << p.message;
  p = parse({"--tickrate", "60"});
  EXPECT_EQ(p.status, ParseStatus::Error);
  EXPECT_NE(p.message.find("--help"), std::string::npos) << p.message;
}

TEST(Config, HelpDocumentsEveryFlagWithDefaultsAndEnvironmentNames) {
  const Parsed p = parse({"--help"});
  ASSERT_EQ(p.status, ParseStatus::Exit);
  for (const char* text : {"--bind", "--port", "--tick-hz", "--snapshot-hz", "--scene", "--max-clients",
                           "--client-timeout", "--log-level", "--threads", "IMPULSE_THREADS", "IMPULSE_TICK_HZ", "IMPULSE_CLIENT_TIMEOUT", "=7777",
                           "=60", "=demo", "[Hz]", "[s]"}) {
    EXPECT_NE(p.message.find(text), std::string::npos) << "help lacks " << text;
  }
}

TEST(Config, DescribeListsEveryField) {
  const std::string line = describe_config(ServerConfig{});
  for (const char* text : {"bind=0.0.0.0", "port=7777", "tick_hz=60", "snapshot_hz=30", "scene=demo",
                           "max_clients=64", "client_timeout=10s", "log_level=info", "threads=auto"}) {
    EXPECT_NE(line.find(text), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace impulse::server
