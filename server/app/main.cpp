// impulse-server entry point: flags -> Server::start -> run until SIGINT/SIGTERM (asio::signal_set
// on a small helper io_context) -> Server::stop, which tells every client and returns from run().
#include <csignal>
#include <cstdio>
#include <thread>

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
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

  // Signals are caught on a helper thread's io_context; its handler only asks the server to stop
  // (Server::stop posts to the server's own io_context), so nothing runs in signal context.
  asio::io_context signal_io(1);
  asio::signal_set signals(signal_io, SIGINT, SIGTERM);
  signals.async_wait([&server](const asio::error_code& ec, int signal_number) {
    if (ec) return;
    spdlog::info("received {}: shutting down", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });
  std::thread signal_thread([&signal_io] { signal_io.run(); });

  server.run();

  asio::error_code ignored;
  signals.cancel(ignored);
  signal_io.stop();
  signal_thread.join();
  spdlog::info("bye");
  return 0;
}
