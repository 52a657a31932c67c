// The admin endpoint's HTTP front on one Asio thread: accept, read a request head within a size
// and a time bound, route it, write one response, close.
#include "server/app/admin_http.h"

#include <array>
#include <atomic>
#include <list>
#include <thread>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace impulse::server {

using asio::ip::tcp;

std::string_view http_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

namespace {

struct Connection;

// The request head, if `buffer` holds a complete one: its method and target.
struct RequestHead {
  std::string_view method, target;
};

// Where the head ends (just past its blank line), or npos. Bare-LF line ends are accepted too.
size_t head_end(std::string_view buffer) {
  const size_t crlf = buffer.find("\r\n\r\n");
  const size_t lf = buffer.find("\n\n");
  if (crlf == std::string_view::npos && lf == std::string_view::npos) return std::string_view::npos;
  return crlf < lf ? crlf + 4 : lf + 2;
}

// "METHOD SP target SP HTTP/1.x": false for anything else.
bool parse_request_line(std::string_view head, RequestHead* out) {
  std::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return false;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return false;
  out->method = line.substr(0, sp1);
  out->target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  return !out->method.empty() && !out->target.empty() && out->target.front() == '/' && version.size() == 8 &&
         version.substr(0, 7) == "HTTP/1.";
}

}  // namespace

struct HttpFront::Impl {
  Options options;
  HttpRoute route;
  // Declared before io: destroying io destroys the handlers that hold connections, and each
  // connection leaves `open` as it goes.
  std::list<Connection*> open;  // oldest first; HTTP thread only
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::thread thread;
  uint16_t port = 0;
  std::atomic<uint64_t> accepted{0}, evicted{0}, timed_out{0}, header_too_big{0}, malformed{0};

  void accept_next();
  void admit(tcp::socket socket);
};

namespace {

struct Connection : std::enable_shared_from_this<Connection> {
  enum class Phase { Reading, Routed, Writing, Draining };

  Connection(HttpFront::Impl& front, tcp::socket s) : front(front), socket(std::move(s)), deadline(front.io) {
    front.open.push_back(this);
    place = std::prev(front.open.end());
  }
  ~Connection() { front.open.erase(place); }

  HttpFront::Impl& front;
  tcp::socket socket;
  asio::steady_timer deadline;
  std::list<Connection*>::iterator place;
  Phase phase = Phase::Reading;
  bool head_only = false;  // HEAD
  std::string request;     // the head read so far, at most max_header_bytes
  std::array<char, 1024> chunk{};
  std::string response;

  void start() {
    deadline.expires_after(front.options.request_deadline);
    deadline.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (ec) return;  // cancelled: the connection ended first
      if (self->phase != Phase::Draining) self->front.timed_out.fetch_add(1, std::memory_order_relaxed);
      self->close();
    });
    read();
  }

  void close() {
    asio::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    deadline.cancel();
  }

  void read() {
    socket.async_read_some(asio::buffer(chunk), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
      if (ec) return self->close();
      self->on_bytes(n);
    });
  }

  void on_bytes(size_t n) {
    const size_t room = front.options.max_header_bytes - request.size();
    request.append(chunk.data(), std::min(n, room));
    const size_t end = head_end(request);
    if (end == std::string::npos) {
      if (request.size() >= front.options.max_header_bytes) {
        front.header_too_big.fetch_add(1, std::memory_order_relaxed);
        return reply(HttpReply{431, "text/plain; charset=utf-8",
                               fmt::format("request head over {} bytes\n", front.options.max_header_bytes)});
      }
      return read();
    }
    RequestHead head;
    if (!parse_request_line(request, &head)) {
      front.malformed.fetch_add(1, std::memory_order_relaxed);
      return reply(HttpReply{400, "text/plain; charset=utf-8", "bad request line: expected METHOD /path HTTP/1.1\n"});
    }
    if (head.method != "GET" && head.method != "HEAD") {
      front.malformed.fetch_add(1, std::memory_order_relaxed);
      return reply(HttpReply{405, "text/plain; charset=utf-8", "method not allowed: the admin endpoint serves GET and HEAD only\n"});
    }
    head_only = head.method == "HEAD";
    const std::string_view path = head.target.substr(0, head.target.find('?'));
    phase = Phase::Routed;
    // The reply may come from another thread: it is handed to the HTTP thread, and holds the
    // connection only weakly (the deadline's wait keeps it alive until then).
    std::weak_ptr<Connection> weak = shared_from_this();
    asio::io_context& io = front.io;
    front.route(path, [weak, &io](HttpReply r) {
      asio::post(io, [weak, r = std::move(r)]() mutable {
        if (const auto self = weak.lock(); self && self->phase == Phase::Routed) self->reply(std::move(r));
      });
    });
  }

  void reply(HttpReply r) {
    phase = Phase::Writing;
    response = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n", r.status,
                           http_reason(r.status), r.content_type, r.body.size());
    if (r.status == 405) response += "Allow: GET, HEAD\r\n";
    response += "\r\n";
    if (!head_only) response += r.body;
    asio::async_write(socket, asio::buffer(response), [self = shared_from_this()](const asio::error_code& ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  // After the response: half-close, then read until the client closes (or the deadline), so that
  // unread request bytes do not turn the close into a reset that could destroy the response.
  void drain() {
    phase = Phase::Draining;
    asio::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    socket.async_read_some(asio::buffer(chunk), [self = shared_from_this()](const asio::error_code& ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }
};

}  // namespace

void HttpFront::Impl::accept_next() {
  acceptor.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, most likely: wait a moment rather than spin on the error.
      spdlog::warn("admin HTTP: accept failed: {}; retrying in 50 ms", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](const asio::error_code& e) {
        if (!e) accept_next();
      });
      return;
    }
    admit(std::move(socket));
    accept_next();
  });
}

void HttpFront::Impl::admit(tcp::socket socket) {
  accepted.fetch_add(1, std::memory_order_relaxed);
  if (open.size() >= options.max_connections) {
    // The oldest connection still reading its request is the likeliest to be a slow one.
    Connection* victim = nullptr;
    for (Connection* c : open) {
      if (c->phase == Connection::Phase::Reading || c->phase == Connection::Phase::Draining) {
        victim = c;
        break;
      }
    }
    if (victim == nullptr) {
      asio::error_code ignored;
      socket.close(ignored);
      evicted.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (victim->phase == Connection::Phase::Reading) evicted.fetch_add(1, std::memory_order_relaxed);
    victim->close();
    // Its handlers run later; it leaves `open` when the last one is done. Until then the count
    // may exceed the cap by the connections being evicted in this turn of the loop.
  }
  std::make_shared<Connection>(*this, std::move(socket))->start();
}

std::unique_ptr<HttpFront> HttpFront::start(const Options& options, HttpRoute route, std::string* error) {
  std::unique_ptr<HttpFront> front(new HttpFront());
  front->impl_ = std::make_unique<Impl>();
  Impl& impl = *front->impl_;
  impl.options = options;
  impl.options.max_connections = std::max<size_t>(1, options.max_connections);
  impl.options.max_header_bytes = std::max<size_t>(64, options.max_header_bytes);
  impl.route = std::move(route);
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options.bind, ec);
  if (ec) {
    if (error) *error = fmt::format("'{}' is not an IP address", options.bind);
    return nullptr;
  }
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(std::max(0, options.port)));
  impl.acceptor.open(endpoint.protocol(), ec);
  // SO_REUSEADDR only (no SO_REUSEPORT): quick restarts, but never a second server sharing the port.
  if (!ec) impl.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(endpoint, ec);
  if (!ec) impl.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    if (error) *error = ec.message();
    return nullptr;
  }
  impl.port = impl.acceptor.local_endpoint().port();
  impl.accept_next();
  impl.thread = std::thread([&impl] { impl.io.run(); });
  return front;
}

HttpFront::~HttpFront() {
  if (!impl_) return;
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t HttpFront::port() const { return impl_->port; }

HttpFrontStats HttpFront::stats() const {
  HttpFrontStats s;
  s.accepted = impl_->accepted.load(std::memory_order_relaxed);
  s.evicted = impl_->evicted.load(std::memory_order_relaxed);
  s.timed_out = impl_->timed_out.load(std::memory_order_relaxed);
  s.header_too_big = impl_->header_too_big.load(std::memory_order_relaxed);
  s.malformed = impl_->malformed.load(std::memory_order_relaxed);
  return s;
}

}  // namespace impulse::server
