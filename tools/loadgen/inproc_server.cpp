// In-process server for the network benchmarks and the load generator: server::Server::run() on
// a std::thread, with that thread's CPU time read through pthread_getcpuclockid (POSIX).
#include "tools/loadgen/inproc_server.h"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <cstdio>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace impulse::tools {
namespace {

constexpr const char* kLoggerName = "impulse-inproc";

double to_seconds(const timespec& t) { return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec); }

double to_seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); }

}  // namespace

InprocServer::InprocServer(server::ServerConfig config) : config_(std::move(config)) {}

std::unique_ptr<InprocServer> InprocServer::start(server::ServerConfig config, server::SnapshotObserver observer,
                                                  std::string* error) {
  // The server logs through spdlog's default logger, which writes to stdout; in a tool that
  // prints its report (or JSON) on stdout, the server's lines go to stderr instead.
  if (!spdlog::get(kLoggerName)) spdlog::set_default_logger(spdlog::stderr_color_mt(kLoggerName));
  std::unique_ptr<InprocServer> s(new InprocServer(std::move(config)));
  s->server_ = std::make_unique<server::Server>(s->config_);
  if (!s->server_->start(error)) return nullptr;
  if (observer) s->server_->set_snapshot_observer(std::move(observer));
  s->thread_ = std::thread([server = s->server_.get()] { server->run(); });
  // native_handle() of a joinable std::thread is its pthread_t (libstdc++ on POSIX).
  clockid_t clock{};
  if (pthread_getcpuclockid(s->thread_.native_handle(), &clock) == 0) s->cpu_clock_ = clock;
  return s;
}

InprocServer::~InprocServer() { stop(); }

uint16_t InprocServer::port() const { return server_->local_port(); }

const server::ServerStats& InprocServer::stats() const { return server_->stats(); }

std::optional<double> InprocServer::thread_cpu_seconds() const {
  if (stopped_ || !cpu_clock_) return std::nullopt;
  timespec t{};
  if (clock_gettime(*cpu_clock_, &t) != 0) return std::nullopt;
  return to_seconds(t);
}

void InprocServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  server_->stop();  // posted to the server's io_context; run() returns after the Disconnects
  if (thread_.joinable()) thread_.join();
}

double this_thread_cpu_seconds() {
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0.0;
  return to_seconds(t);
}

double process_cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0.0;
  return to_seconds(u.ru_utime) + to_seconds(u.ru_stime);
}

std::optional<MachineCpuTicks> machine_cpu_ticks() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return std::nullopt;
  unsigned long long v[8] = {};
  const int read = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                               &v[5], &v[6], &v[7]);
  std::fclose(f);
  if (read != 8) return std::nullopt;
  MachineCpuTicks t;
  for (const unsigned long long x : v) t.total += x;
  t.steal = v[7];
  return t;
}

}  // namespace impulse::tools
