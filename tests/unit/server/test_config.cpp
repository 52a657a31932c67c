// Server flags: defaults, IMPULSE_* environment fallback, flag-over-environment precedence, and
// range errors that name the flag. The --config file: flag > environment > file > default, errors
// that name the file, key and line, and --dump-config's round trip.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

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
  EXPECT_NE(p.message.find("from the environment variable IMPULSE_TICK_HZ=0"), std::string::npos) << p.message;
}

TEST(Config, AnEnvironmentValueOfTheWrongTypeNamesTheVariable) {
  const ScopedEnv tick("IMPULSE_TICK_HZ", "fast");
  const Parsed p = parse({});
  EXPECT_EQ(p.status, ParseStatus::Error);
  EXPECT_NE(p.message.find("IMPULSE_TICK_HZ=fast"), std::string::npos) << p.message;
  // The same value given as the flag is blamed on the flag alone.
  const Parsed flag = parse({"--tick-hz", "0"});
  EXPECT_EQ(flag.status, ParseStatus::Error);
  EXPECT_EQ(flag.message.find("environment"), std::string::npos) << flag.message;
}

TEST(Config, BindAddressesMustBeIpAddresses) {
  for (const char* ok : {"0.0.0.0", "127.0.0.1", "::", "::1", "fe80::1%lo"}) {
    const Parsed p = parse({"--bind", ok, "--admin-bind", ok});
    EXPECT_EQ(p.status, ParseStatus::Run) << ok << ": " << p.message;
  }
  for (const char* bad : {"not-an-ip", "localhost", "256.0.0.1", "1.2.3", ":::1", " 127.0.0.1"}) {
    const Parsed p = parse({"--bind", bad});
    EXPECT_EQ(p.status, ParseStatus::Error) << bad;
    EXPECT_NE(p.message.find("--bind must be an IP address"), std::string::npos) << p.message;
    const Parsed admin = parse({"--admin-bind", bad, "--dump-config"});
    EXPECT_EQ(admin.status, ParseStatus::Error) << bad << ": --dump-config must not accept it";
    EXPECT_NE(admin.message.find("--admin-bind must be an IP address"), std::string::npos) << admin.message;
  }
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
      {{"--relay-inputs", "9"}, "--relay-inputs must be in 0..8 (got 9)"},
      {{"--relay-inputs", "-1"}, "--relay-inputs must be in 0..8"},
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

// --- The --config file --------------------------------------------------------------------

/// A fresh directory under the temp directory, removed with its files on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("impulse-config-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Writes `contents` to the file `name` in this directory; returns its path.
  std::string write(const std::string& name, std::string_view contents) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << contents;
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

Parsed parse_args(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"impulse-server"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  Parsed p{ParseStatus::Error, ServerConfig{}, {}};
  p.status = parse_config(static_cast<int>(argv.size()), argv.data(), p.config, &p.message);
  return p;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

TEST(ConfigFile, KeysAbsentFromTheFileKeepTheirDefaults) {
  TempDir dir;
  const std::string file = dir.write("a.toml", "# only a comment\n\n; and another\n");
  const Parsed p = parse_args({"--config", file});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config, ServerConfig{});
}

TEST(ConfigFile, FileBeatsDefault) {
  TempDir dir;
  const std::string file = dir.write("a.toml",
                                     "tick-hz = 120\n"
                                     "port = 7000   # a trailing comment\n"
                                     "scene = \"my scenes/tower.json\"\n"
                                     "client-timeout = 2.5\n"
                                     "  log-level = 'debug'\n"
                                     "log-format = \"json\"\n"
                                     "sim-seed = 18446744073709551615\n"
                                     "agones = true\n"
                                     "agones-port = 9400\n");
  const Parsed p = parse_args({"--config", file});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.tick_hz, 120);
  EXPECT_EQ(p.config.port, 7000);
  EXPECT_EQ(p.config.scene, "my scenes/tower.json");
  EXPECT_EQ(p.config.client_timeout_s, 2.5);
  EXPECT_EQ(p.config.log_level, "debug");
  EXPECT_EQ(p.config.log_format, "json");
  EXPECT_EQ(p.config.sim_seed, UINT64_MAX);
  EXPECT_TRUE(p.config.agones);
  EXPECT_EQ(p.config.agones_port, 9400);
  EXPECT_EQ(p.config.snapshot_hz, ServerConfig{}.snapshot_hz);  // not in the file: default
}

TEST(ConfigFile, EnvironmentBeatsFile) {
  TempDir dir;
  const std::string file = dir.write("a.toml", "tick-hz = 120\nmax-clients = 9\n");
  ScopedEnv env("IMPULSE_TICK_HZ", "90");
  const Parsed p = parse_args({"--config", file});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.tick_hz, 90);     // environment over file
  EXPECT_EQ(p.config.max_clients, 9);  // file over default
}

TEST(ConfigFile, FlagBeatsEnvironmentAndFile) {
  TempDir dir;
  const std::string file = dir.write("a.toml", "tick-hz = 120\nmax-clients = 9\nbind = \"127.0.0.1\"\n");
  ScopedEnv tick("IMPULSE_TICK_HZ", "90");
  ScopedEnv clients("IMPULSE_MAX_CLIENTS", "7");
  const Parsed p = parse_args({"--config", file, "--tick-hz", "30", "--snapshot-hz", "15"});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.tick_hz, 30);       // flag over environment and file
  EXPECT_EQ(p.config.max_clients, 7);    // environment over file
  EXPECT_EQ(p.config.bind, "127.0.0.1");  // file over default
  EXPECT_EQ(p.config.snapshot_hz, 15);
}

TEST(ConfigFile, TheEnvironmentCanNameTheFile) {
  TempDir dir;
  const std::string file = dir.write("a.toml", "max-clients = 11\n");
  ScopedEnv env("IMPULSE_CONFIG", file.c_str());
  const Parsed p = parse_args({});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.max_clients, 11);
}

TEST(ConfigFile, UnknownKeyIsNamedWithFileAndLine) {
  TempDir dir;
  const std::string file = dir.write("bad.toml", "tick-hz = 60\n\n# comment\ntickrate = 60\n");
  const Parsed p = parse_args({"--config", file});
  ASSERT_EQ(p.status, ParseStatus::Error);
  EXPECT_TRUE(contains(p.message, file + ":4:")) << p.message;
  EXPECT_TRUE(contains(p.message, "unknown key \"tickrate\"")) << p.message;
}

TEST(ConfigFile, BadValueIsNamedWithFileKeyAndLine) {
  TempDir dir;
  {
    const std::string file = dir.write("conv.toml", "port = 7000\ntick-hz = \"fast\"\n");
    const Parsed p = parse_args({"--config", file});
    ASSERT_EQ(p.status, ParseStatus::Error);
    EXPECT_TRUE(contains(p.message, file + ":2: bad value for tick-hz")) << p.message;
    EXPECT_TRUE(contains(p.message, "fast")) << p.message;
  }
  {  // in the right type but out of range: validate_config's message, located in the file
    const std::string file = dir.write("range.toml", "port = 7000\n\n\ntick-hz = 0\n");
    const Parsed p = parse_args({"--config", file});
    ASSERT_EQ(p.status, ParseStatus::Error);
    EXPECT_TRUE(contains(p.message, file + ":4: tick-hz: --tick-hz must be in 1..1000 (got 0)")) << p.message;
  }
  {
    const std::string file = dir.write("port.toml", "port = 70000\n");
    const Parsed p = parse_args({"--config", file});
    ASSERT_EQ(p.status, ParseStatus::Error);
    EXPECT_TRUE(contains(p.message, file + ":1: port: --port must be in 0..65535 (got 70000)")) << p.message;
  }
  {
    const std::string file = dir.write("format.toml", "log-format = \"xml\"\n");
    const Parsed p = parse_args({"--config", file});
    ASSERT_EQ(p.status, ParseStatus::Error);
    EXPECT_TRUE(contains(p.message, file + ":1: log-format: --log-format must be text or json")) << p.message;
  }
  {  // a range error in a value the file did not give is not blamed on the file
    const std::string file = dir.write("fine.toml", "port = 7000\n");
    const Parsed p = parse_args({"--config", file, "--tick-hz", "0"});
    ASSERT_EQ(p.status, ParseStatus::Error);
    EXPECT_EQ(p.message, "--tick-hz must be in 1..1000 (got 0)");
  }
}

TEST(ConfigFile, SwitchesTakeOnlyTomlBooleans) {
  TempDir dir;
  for (const char* bad : {"\"yes\"", "1", "yes", "\"true\"", "on", "True"}) {
    const std::string file = dir.write("switch.toml", std::string("port = 7000\nagones = ") + bad + "\n");
    const Parsed p = parse_args({"--config", file});
    EXPECT_EQ(p.status, ParseStatus::Error) << "agones = " << bad;
    EXPECT_TRUE(contains(p.message, file + ":2: agones must be true or false, unquoted")) << p.message;
  }
  for (const char* good : {"true", "false", "true  # on"}) {
    const std::string file = dir.write("switch.toml", std::string("agones = ") + good + "\n");
    const Parsed p = parse_args({"--config", file});
    EXPECT_EQ(p.status, ParseStatus::Run) << "agones = " << good << ": " << p.message;
    EXPECT_EQ(p.config.agones, std::string(good).rfind("true", 0) == 0);
  }
}

TEST(ConfigFile, MalformedLinesAreNamedWithFileAndLine) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"port = 1\n[server]\ntick-hz = 60\n", ":2: \"[server]\": sections are not used"},
      {"port = 1\njust words\n", ":2: \"just words\" is not `key = value`"},
      {"port = 1\ntick-hz = 60\nport = 2\n", ":3: port is given twice (first on line 1)"},
      {"record = \"/data/run#1.rec\"\n", ":1: record: a '#' inside a quoted value"},
      {"scene = \"demo\n", ":1: scene: the quoted value has no closing \""},
      {"port =\n", ":1: port has no value"},
      {" = 3\n", ":1: no key before '='"},
      {"port = [1, 2]\n", ":1: port: arrays are not used"},
      {"port = 1\nscene = my scene.json\n", ":2: scene: the value reads as 2 values (split at spaces or commas)"},
      {"config = \"other.toml\"\n", ":1: \"config\" cannot be set in a config file"},
      {"dump-config = true\n", ":1: \"dump-config\" cannot be set in a config file"},
  };
  int n = 0;
  for (const auto& [text, expected] : cases) {
    const std::string file = dir.write(fmt::format("m{}.toml", n++), text);
    const Parsed p = parse_args({"--config", file});
    EXPECT_EQ(p.status, ParseStatus::Error) << text;
    EXPECT_TRUE(contains(p.message, file + expected)) << "for:\n" << text << "got: " << p.message;
  }
}

TEST(ConfigFile, MissingFileIsAnErrorThatSaysWhat) {
  const Parsed p = parse_args({"--config", "/nonexistent/impulse.toml"});
  ASSERT_EQ(p.status, ParseStatus::Error);
  EXPECT_TRUE(contains(p.message, "--config /nonexistent/impulse.toml: cannot open it")) << p.message;
}

TEST(ConfigFile, ScanFindsEveryKeyWithItsLine) {
  std::vector<ConfigFileKey> keys;
  std::string error;
  ASSERT_TRUE(scan_config_file("# head\r\nport = 1\r\n\n  \"tick-hz\"=60 # c\nscene='a b'\nrecord = \"\"", &keys, &error))
      << error;
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[0].key, "port");
  EXPECT_EQ(keys[0].line, 2);
  EXPECT_EQ(keys[1].key, "tick-hz");
  EXPECT_EQ(keys[1].line, 4);
  EXPECT_EQ(keys[1].value, "60") << "the value as written, without its comment";
  EXPECT_EQ(keys[2].key, "scene");
  EXPECT_EQ(keys[2].line, 5);
  EXPECT_EQ(keys[3].key, "record");
  EXPECT_EQ(keys[3].line, 6);
  EXPECT_FALSE(scan_config_file("a = 1\nb\n", &keys, &error));
  EXPECT_EQ(error.rfind("2: ", 0), 0u) << error;
}

TEST(ConfigFile, DumpConfigLoadsBackToTheSameSettings) {
  TempDir dir;
  const std::string input = dir.write("in.toml", "max-clients = 9\nsim-loss = 0.1234567891\n");
  ScopedEnv env("IMPULSE_TICK_HZ", "90");
  // Values from each source, awkward ones included: digits past CLI11's default 6, a path with spaces.
  const Parsed first = parse_args({"--config", input, "--dump-config", "--client-timeout", "2.718281828459045",
                                   "--scene", "my scenes/it's.json", "--record", "/tmp/r.rec", "--sim-seed",
                                   "18446744073709551615", "--world-bound", "100.5", "--log-format", "json",
                                   "--agones", "--agones-health-interval", "0.25"});
  ASSERT_EQ(first.status, ParseStatus::Exit) << first.message;
  EXPECT_TRUE(contains(first.message, "tick-hz=90")) << first.message;
  EXPECT_TRUE(contains(first.message, "max-clients=9")) << first.message;
  EXPECT_TRUE(contains(first.message, "sim-loss=0.1234567891")) << first.message;
  EXPECT_FALSE(contains(first.message, "\ndump-config=")) << first.message;
  EXPECT_FALSE(contains(first.message, "\nconfig=")) << first.message;

  // dump -> load -> the same settings, and dumping them again gives the same text.
  const std::string dumped = dir.write("dumped.toml", first.message);
  ::unsetenv("IMPULSE_TICK_HZ");  // the file alone must carry every value (ScopedEnv restores it)
  const Parsed loaded = parse_args({"--config", dumped});
  ASSERT_EQ(loaded.status, ParseStatus::Run) << loaded.message;
  EXPECT_EQ(loaded.config.tick_hz, 90);
  EXPECT_EQ(loaded.config.client_timeout_s, 2.718281828459045);
  EXPECT_EQ(loaded.config.scene, "my scenes/it's.json");
  EXPECT_EQ(loaded.config.sim_loss, 0.1234567891);
  EXPECT_EQ(loaded.config.sim_seed, UINT64_MAX);
  EXPECT_EQ(loaded.config.log_format, "json");
  EXPECT_TRUE(loaded.config.agones);  // a flag: agones=true
  EXPECT_EQ(loaded.config.agones_health_interval_s, 0.25);
  const Parsed again = parse_args({"--config", dumped, "--dump-config"});
  ASSERT_EQ(again.status, ParseStatus::Exit) << again.message;
  EXPECT_EQ(again.message, first.message);

  // And the loaded settings are exactly those the first parse had.
  EXPECT_EQ(loaded.config, first.config);
}

TEST(ConfigFile, DumpOfTheDefaultsLoadsToTheDefaults) {
  std::string error;
  const std::string text = dump_config(ServerConfig{}, &error);
  ASSERT_FALSE(text.empty()) << error;
  ServerConfig loaded;
  loaded.tick_hz = 1;  // overwritten by the file
  std::string message;
  ASSERT_EQ(load_config_text(text, "defaults", loaded, &message), ParseStatus::Run) << message;
  EXPECT_EQ(loaded, ServerConfig{});
  // Every setting is written with its help as a comment.
  for (const char* key : {"\nbind=", "\nport=7777", "\nscene=\"demo\"", "\nlog-format=\"text\"", "\nsim-seed=1",
                          "# Physics steps per second"}) {
    EXPECT_TRUE(contains(text, key)) << key << " not in:\n" << text;
  }
}

TEST(ConfigFile, DumpRefusesAValueTheFileCannotHold) {
  ServerConfig config;
  config.record_file = "/data/run#1.rec";  // CLI11 would read from '#' on as a comment
  std::string error;
  EXPECT_EQ(dump_config(config, &error), "");
  EXPECT_TRUE(contains(error, "--dump-config: the settings cannot be written")) << error;
}

TEST(ConfigFile, TheExampleFileLoads) {
  const std::string path = std::string(IMPULSE_SOURCE_DIR) + "/docker/impulse.toml";
  const Parsed p = parse_args({"--config", path});
  ASSERT_EQ(p.status, ParseStatus::Run) << p.message;
  EXPECT_EQ(p.config.port, 7777);
  EXPECT_EQ(p.config.log_format, "json");
}

TEST(ConfigFile, HelpDocumentsTheFileAndEveryEnvironmentName) {
  const Parsed p = parse_args({"--help"});
  ASSERT_EQ(p.status, ParseStatus::Exit);
  for (const char* text : {"--config", "IMPULSE_CONFIG", "--dump-config", "--log-format", "IMPULSE_LOG_FORMAT",
                           "IMPULSE_SIM_SEED", "IMPULSE_RECORD_DIR", "first found"}) {
    EXPECT_TRUE(contains(p.message, text)) << "help lacks " << text;
  }
}

}  // namespace
}  // namespace impulse::server
