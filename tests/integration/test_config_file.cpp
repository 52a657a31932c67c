// The real impulse-server binary with a controlled environment: --dump-config shows each setting
// from the level that wins (flag > IMPULSE_* > --config file > default), and a bad file stops it
// with exit code 2 and an error naming the file, line and key.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/integration/harness.h"

namespace impulse::test {
namespace {

struct ProcessRun {
  int exit_code = -1;
  std::string out, err;
};

/// Runs impulse-server with `args` and exactly the environment `env` (nothing inherited); its
/// stdout and stderr are read until it exits. Bounded: killed after 10 s.
ProcessRun run_server(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  ProcessRun run;
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) {
    ADD_FAILURE() << "pipe failed";
    return run;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  const std::string bin = IMPULSE_BIN_DIR "/impulse-server";
  std::vector<char*> argv{const_cast<char*>(bin.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ADD_FAILURE() << "posix_spawn failed: " << spawned;
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return run;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_fds = 2;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < kMaxIterations && open_fds > 0 && Clock::now() < deadline; ++i) {
    if (::poll(fds, 2, 10) <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || (fds[k].revents & (POLLIN | POLLHUP)) == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[k].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[k]->append(buffer, static_cast<size_t>(n));
      } else {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  if (open_fds > 0) ::kill(pid, SIGKILL);  // never leave the child behind
  for (const pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(ConfigFileBinary, DumpConfigShowsEachSettingFromTheLevelThatWins) {
  TempFile file("impulse-config",
                "tick-hz = 120\nmax-clients = 9\nsnapshot-hz = 20\nbind = \"127.0.0.1\"\nlog-format = \"json\"\n");
  const ProcessRun run = run_server({"--config", file.path(), "--tick-hz", "30", "--dump-config"},
                             {"IMPULSE_TICK_HZ=90", "IMPULSE_MAX_CLIENTS=7", "IMPULSE_BIND="});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(has_line(run.out, "tick-hz=30")) << run.out;          // flag > environment > file
  EXPECT_TRUE(has_line(run.out, "max-clients=7")) << run.out;       // environment > file
  EXPECT_TRUE(has_line(run.out, "bind=\"127.0.0.1\"")) << run.out;  // file (an empty variable is unset)
  EXPECT_TRUE(has_line(run.out, "snapshot-hz=20")) << run.out;      // file > default
  EXPECT_TRUE(has_line(run.out, "log-format=\"json\"")) << run.out;
  EXPECT_TRUE(has_line(run.out, "port=7777")) << run.out;           // default
  EXPECT_TRUE(run.err.empty()) << run.err;

  // The dump, loaded by the binary with no flags and no environment, dumps the same text.
  TempFile dumped("impulse-dumped", run.out);
  const ProcessRun again = run_server({"--config", dumped.path(), "--dump-config"}, {});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, run.out);
}

TEST(ConfigFileBinary, ABadFileStopsTheServerNamingFileLineAndKey) {
  TempFile file("impulse-config", "port = 7000\n\nmax-clients = lots\n");
  const ProcessRun run = run_server({"--config", file.path()}, {});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(file.path() + ":3: bad value for max-clients"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;  // it stopped before logging anything
}

// With JSON logs, a fatal start-up error is a JSON line too (level critical, exit_code), on stdout
// with the other logs, whether the format came from the flag or the environment and whether the
// error is a bad flag (exit 2) or a failed start (exit 1). Text logs keep the plain stderr line.
TEST(ConfigFileBinary, FatalStartUpErrorsAreJsonLinesWhenTheLogsAreJson) {
  struct Case {
    std::vector<std::string> args, env;
    int exit_code;
    std::string text;
  };
  const Case cases[] = {
      {{"--log-format", "json", "--tick-hz", "0"}, {}, 2, "--tick-hz must be in 1..1000"},
      {{"--tick-hz", "0"}, {"IMPULSE_LOG_FORMAT=json"}, 2, "--tick-hz must be in 1..1000"},
      {{"--log-format=json", "--bind", "127.0.0.1", "--port", "0", "--scene", "/nonexistent/level.json"}, {}, 1,
       "/nonexistent/level.json"},
  };
  for (const Case& c : cases) {
    const ProcessRun run = run_server(c.args, c.env);
    EXPECT_EQ(run.exit_code, c.exit_code) << run.out << run.err;
    EXPECT_TRUE(run.err.empty()) << run.err;
    ASSERT_FALSE(run.out.empty());
    std::vector<nlohmann::json> lines;
    std::istringstream in(run.out);
    for (std::string line; std::getline(in, line);) {
      try {
        lines.push_back(nlohmann::json::parse(line));
      } catch (const nlohmann::json::exception& e) {
        ADD_FAILURE() << "not JSON: " << line << " (" << e.what() << ")";
      }
    }
    ASSERT_FALSE(lines.empty());
    const nlohmann::json& last = lines.back();
    EXPECT_EQ(last.value("level", ""), "critical") << last.dump();
    EXPECT_EQ(last.value("exit_code", -1), c.exit_code) << last.dump();
    EXPECT_NE(last.value("message", "").find(c.text), std::string::npos) << last.dump();
  }
  const ProcessRun text = run_server({"--tick-hz", "0"}, {});
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_NE(text.err.find("impulse-server: --tick-hz must be in 1..1000"), std::string::npos) << text.err;
  EXPECT_TRUE(text.out.empty()) << text.out;
}

}  // namespace
}  // namespace impulse::test
