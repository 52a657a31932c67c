// --log-format json end to end: the real impulse-server binary, its stdout read line by line and
// every line parsed with nlohmann::json, while a client whose name holds control characters, quotes
// and invalid UTF-8 connects over loopback. The log format comes from a --config file.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>


#include <nlohmann/json.hpp>

#include "server/net/session_table.h"
#include "tests/integration/harness.h"
#include "tests/support/text_match.h"

extern char** environ;

namespace impulse::test {
namespace {

/// The child's stdout, read without blocking the test past a deadline.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  /// Reads what is available within `wait`; false once the writer closed the pipe.
  bool pump(milliseconds wait) {
    if (eof_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return true;
    char buffer[4096];
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    pending_.append(buffer, static_cast<size_t>(n));
    for (size_t eol; (eol = pending_.find('\n')) != std::string::npos;) {
      lines.push_back(pending_.substr(0, eol));
      pending_.erase(0, eol + 1);
    }
    return true;
  }
  bool eof() const { return eof_; }
  const std::string& partial() const { return pending_; }

  std::vector<std::string> lines;  ///< complete lines, without '\n'

 private:
  int fd_;
  bool eof_ = false;
  std::string pending_;
};

/// Every line parsed so far as JSON; a line that does not parse fails the test and is skipped.
std::vector<nlohmann::json> parse_all(const std::vector<std::string>& lines) {
  std::vector<nlohmann::json> out;
  for (const std::string& line : lines) {
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << "not JSON: " << line << " (" << e.what() << ")";
    }
  }
  return out;
}

bool message_has(const nlohmann::json& j, std::string_view text) {
  return j.is_object() && j.contains("message") && j["message"].is_string() &&
         j["message"].get<std::string>().find(text) != std::string::npos;
}

TEST(JsonLogs, EveryLineParsesIncludingAHostileClientNameAndStatsFields) {
  TempFile scene("impulse-json-scene", kGroundScene);
  TempFile config("impulse-json-config", "log-format = \"json\"\nstats-interval = 0.2\nlog-level = \"info\"\n");
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  const std::string bin = IMPULSE_BIN_DIR "/impulse-server";
  const std::string scene_path = scene.path(), config_path = config.path();
  std::vector<const char*> argv = {bin.c_str(), "--config", config_path.c_str(), "--bind", "127.0.0.1", "--port", "0",
                                   "--scene", scene_path.c_str(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, bin.c_str(), &actions, nullptr, const_cast<char* const*>(argv.data()), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  ASSERT_EQ(spawned, 0);
  LineReader out(pipe_fds[0]);

  // The bound port, from the JSON "listening on UDP 127.0.0.1:PORT" line.
  uint16_t port = 0;
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < kMaxIterations && port == 0 && Clock::now() < deadline && out.pump(milliseconds{10}); ++i) {
    for (const std::string& line : out.lines) {
      if (const auto p = port_after(line, "listening on UDP 127.0.0.1:")) port = *p;
    }
  }
  ASSERT_NE(port, 0) << "no listening line; got:\n" << (out.lines.empty() ? out.partial() : out.lines.front());

  // A name with control characters, a forged JSON object, a quote, a backslash and invalid UTF-8.
  const std::string name = "evil\n{\"level\":\"critical\"}\x1b[31m\"\\\x01\xff\r";
  ClientDriver driver;
  std::string error;
  ASSERT_TRUE(driver.connect(port, &error, name)) << error;

  // Until the connect line and a stats line that counts the client have been written.
  bool connected_logged = false, stats_with_client = false;
  deadline = Clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < kMaxIterations && !(connected_logged && stats_with_client) && Clock::now() < deadline; ++i) {
    driver.poll_once(milliseconds{1});
    out.pump(milliseconds{1});
    for (const nlohmann::json& j : parse_all(out.lines)) {
      connected_logged = connected_logged || message_has(j, "client connected");
      stats_with_client = stats_with_client || (j.value("event", "") == "stats" && j.value("clients", 0) == 1);
    }
  }
  ::kill(pid, SIGTERM);
  deadline = Clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && out.pump(milliseconds{10}); ++i) {
  }
  int status = 0;
  if (!out.eof()) ::kill(pid, SIGKILL);  // never leave the child behind
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(pipe_fds[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(connected_logged);
  EXPECT_TRUE(stats_with_client);
  EXPECT_TRUE(out.partial().empty()) << "unterminated last line: " << out.partial();

  const std::vector<nlohmann::json> lines = parse_all(out.lines);
  ASSERT_EQ(lines.size(), out.lines.size());
  const std::string shown_name = server::sanitize_for_log(name, wire::kMaxClientNameBytes);
  int connect_lines = 0, stats_lines = 0, disconnect_lines = 0;
  for (const nlohmann::json& j : lines) {
    ASSERT_TRUE(j.is_object());
    ASSERT_TRUE(j.contains("time") && j["time"].is_string());
    EXPECT_TRUE(is_rfc3339_utc_ms(j["time"].get<std::string>())) << j.dump();
    ASSERT_TRUE(j.contains("level") && j["level"].is_string()) << j.dump();
    EXPECT_NE(j["level"], "critical") << "a forged line: " << j.dump();
    ASSERT_TRUE(j.contains("message") && j["message"].is_string()) << j.dump();
    if (message_has(j, "client connected")) {
      ++connect_lines;
      // The quote and backslash survive (escaped in the line, restored by the parser); control
      // characters and the invalid byte were replaced by '?' when the name was stored.
      EXPECT_TRUE(message_has(j, "name=\"" + shown_name + "\"")) << j.dump();
      EXPECT_NE(shown_name.find("\"\\"), std::string::npos);
      // The structured field holds the name as sent: every control character intact, the invalid
      // byte as U+FFFD.
      EXPECT_EQ(j.value("event", ""), "client_connected") << j.dump();
      std::string sent = name;
      sent.replace(sent.find('\xff'), 1, "\xef\xbf\xbd");
      EXPECT_EQ(j.value("client_name", ""), sent) << j.dump();
      EXPECT_TRUE(j.contains("client_id") && j["client_id"].is_number_unsigned()) << j.dump();
      EXPECT_EQ(j.value("address", "").rfind("127.0.0.1:", 0), 0u) << j.dump();
    }
    if (j.value("event", "") == "client_disconnected") {
      ++disconnect_lines;  // the SIGTERM's: reason and totals as fields
      EXPECT_TRUE(message_has(j, "client disconnected")) << j.dump();
      EXPECT_FALSE(j.value("reason", "").empty()) << j.dump();
      EXPECT_EQ(j.value("address", "").rfind("127.0.0.1:", 0), 0u) << j.dump();
      for (const char* key : {"client_id", "bytes_received", "bytes_sent"}) {
        EXPECT_TRUE(j.contains(key) && j[key].is_number_unsigned()) << key << " in " << j.dump();
      }
      EXPECT_GT(j.value("bytes_received", 0u), 0u) << j.dump();
      EXPECT_GT(j.value("bytes_sent", 0u), 0u) << j.dump();
      EXPECT_TRUE(j.contains("connected_s") && j["connected_s"].is_number()) << j.dump();
    }
    if (j.value("event", "") == "stats") {
      ++stats_lines;
      for (const char* key : {"tick", "bodies", "awake", "clients", "steps", "steps_dropped", "wakeups", "datagrams_in",
                              "bytes_in", "datagrams_out", "bytes_out", "datagrams_dropped"}) {
        EXPECT_TRUE(j.contains(key) && j[key].is_number_unsigned()) << key << " in " << j.dump();
      }
      for (const char* key : {"tick_ms_mean", "tick_ms_steps", "tick_ms_events", "tick_ms_snapshots", "tick_ms_p50",
                              "tick_ms_p99", "tick_ms_max", "interval_s"}) {
        EXPECT_TRUE(j.contains(key) && j[key].is_number()) << key << " in " << j.dump();
      }
      EXPECT_EQ(j["bodies"], 1) << j.dump();  // the ground box
      EXPECT_TRUE(message_has(j, "stats: tick=")) << j.dump();
    }
  }
  EXPECT_EQ(connect_lines, 1);
  EXPECT_EQ(disconnect_lines, 1);
  EXPECT_GE(stats_lines, 1);
  EXPECT_TRUE(message_has(lines.back(), "bye")) << lines.back().dump();
}

}  // namespace
}  // namespace impulse::test
