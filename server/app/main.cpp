// impulse-server entry point: flags -> Server::start -> run until SIGINT/SIGTERM (asio::signal_set
// on a small helper io_context) -> Server::stop, which tells every client and returns from run().
#include <cstdio>

#include <spdlog/spdlog.h>

#include "server/app/config.h"
#include "server/app/server.h"
#include "server/app/token_tool.h"

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
      std::fprintf(stderr, "impulse-server: %s\n", message.c_str());
      return 2;
    case ParseStatus::Run:
      break;
  }

  Server server(config);
  if (!server.start(&message)) {
    std::fprintf(stderr, "impulse-server: %s\n", message.c_str());
    return 1;
  }

  run_until_signal(server);
  spdlog::info("bye");
  return 0;
}
