// The admin endpoint's HTTP/1.1 front: GET and HEAD only, one request per connection, all
// connections on one event-driven thread (Asio). A thread per connection (cpp-httplib's model)
// lets a few dozen connections that drip one header byte at a time hold every worker, and a
// liveness probe then goes unanswered; here a slow connection costs a socket and at most
// `max_header_bytes`, never a thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace impulse::server {

/// One response: a status, a content type and a body. HEAD sends the same headers, no body.
struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// What a routed request gets: call it exactly once, from any thread, now or later. A reply to a
/// connection that has closed meanwhile (its deadline passed) is dropped.
using HttpRespond = std::function<void(HttpReply)>;
/// Called on the HTTP thread for each well-formed GET or HEAD: `path` is the request target
/// without its query string. Must not block; slow work goes to another thread, which calls
/// `respond` when done.
using HttpRoute = std::function<void(std::string_view path, HttpRespond respond)>;

/// Counters of what the front refused, for logs and tests (read from any thread).
struct HttpFrontStats {
  uint64_t accepted = 0;
  uint64_t evicted = 0;        ///< closed at the connection cap (the oldest still reading, or the new one)
  uint64_t timed_out = 0;      ///< closed at `request_deadline`
  uint64_t header_too_big = 0; ///< answered 431
  uint64_t malformed = 0;      ///< answered 400 or 405
};

/// The listening side. Limits (all per connection unless said):
/// - `max_connections` open at once (server-wide). A connection accepted at the cap evicts the
///   oldest one still reading its request; when none is, the new one is closed.
/// - `max_header_bytes` for the request line and headers together: past it, 431 and close.
/// - `request_deadline` from accept until the response is written: past it, closed.
/// A request's body is never read; every response carries `Connection: close`.
class HttpFront {
 public:
  struct Options {
    std::string bind = "127.0.0.1";
    int port = 0;  ///< 0: an ephemeral port
    size_t max_connections = 64;
    size_t max_header_bytes = 8 * 1024;
    std::chrono::milliseconds request_deadline{2000};
  };
  /// Binds synchronously (so a taken port fails the caller's start) and starts the thread. On
  /// failure returns null with *error saying what went wrong.
  static std::unique_ptr<HttpFront> start(const Options& options, HttpRoute route, std::string* error);
  ~HttpFront();  ///< closes every connection and joins the thread
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  uint16_t port() const;
  HttpFrontStats stats() const;

  struct Impl;

 private:
  HttpFront() = default;
  std::unique_ptr<Impl> impl_;
};

/// The reason phrase of the statuses the endpoint uses ("Unknown" for others).
std::string_view http_reason(int status);

}  // namespace impulse::server
