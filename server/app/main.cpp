// impulse-server entry point: flags -> Server::start -> run until SIGINT/SIGTERM (asio::signal_set
// on a small helper io_context) -> Server::stop, which tells every client and returns from run().
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <spdlog/spdlog.h>

#include "server/app/config.h"
#include "server/app/log_format.h"
#include "server/app/server.h"
#include "server/app/token_tool.h"

namespace {

/// True when the command line or the environment asks for JSON logs, whatever else failed to
/// parse: `--log-format json`, `--log-format=json`, or IMPULSE_LOG_FORMAT=json.
bool json_logs_requested(int argc, char** argv, const impulse::server::ServerConfig& parsed) {
  if (parsed.log_format == "json") return true;
  std::string_view format;
  if (const char* env = std::getenv("IMPULSE_LOG_FORMAT")) format = env;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--log-format" && i + 1 < argc) format = argv[i + 1];
    if (arg.starts_with("--log-format=")) format = arg.substr(13);
  }
  return format == "json";
}

/// A fatal start-up error: with JSON logs, one critical line on stdout (where the log collector
/// reads) carrying "exit_code"; otherwise "impulse-server: MESSAGE" on stderr. Returns `code`.
int fatal(std::string_view message, int code, bool json) {
  if (!json) {
    std::fprintf(stderr, "impulse-server: %.*s\n", static_cast<int>(message.size()), message.data());
    return code;
  }
  impulse::server::set_log_format(impulse::server::LogFormat::Json);
  const impulse::LogField fields[] = {{"exit_code", code}};
  const impulse::ScopedLogFields scope(fields);
  spdlog::critical("impulse-server: {}", message);
  spdlog::default_logger()->flush();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace impulse::server;
  if (argc > 1 && is_token_tool_command(argv[1])) return run_token_tool(argc, argv);  // keygen, token

  ServerConfig config;
  std::string message;
  switch (parse_config(argc, argv, config, &message)) {
    case ParseStatus::Exit:
      std::fputs(message.c_str(), stdout);
      if (!message.empty() && message.back() != '\n') std::fputc('\n', stdout);
      return 0;
    case ParseStatus::Error:
      return fatal(message, 2, json_logs_requested(argc, argv, config));
    case ParseStatus::Run:
      break;
  }

  Server server(config);
  if (!server.start(&message)) return fatal(message, 1, json_logs_requested(argc, argv, config));

  run_until_signal(server);
  spdlog::info("bye");
  return 0;
}
