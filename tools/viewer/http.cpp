#include "viewer/http.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>

#include "shared/http_pool.h"

namespace impulse::viewer {
namespace {

// What a hostile or broken browser may cost: every read and write bounded in time (a page that
// stops reading its stream is dropped after kWriteTimeoutS), request bodies bounded to
// kMaxBodyBytes (a control is a few form fields), at most max_streams streams plus kSpareWorkers
// threads for the page, its scripts and the controls, and a short accept queue.
constexpr time_t kReadTimeoutS = 5;
constexpr time_t kWriteTimeoutS = 5;
constexpr time_t kKeepAliveTimeoutS = 2;
constexpr size_t kKeepAliveMaxRequests = 32;
constexpr size_t kMaxBodyBytes = 1024;
constexpr size_t kSpareWorkers = 4;
constexpr size_t kMaxQueuedConnections = 16;
constexpr size_t kMaxScriptBytes = 16u << 20;  // three.min.js r111 is 0.6 MB
/// A stream with no new frame sends an SSE comment this often, so a closed page is noticed.
constexpr std::chrono::milliseconds kKeepAlive{1000};
constexpr const char* kPlainText = "text/plain; charset=utf-8";
constexpr const char* kJson = "application/json";
// GET /owner: lookups at once (fewer than kSpareWorkers, so pages and controls keep a worker),
// their timeouts (the admin endpoint answers within its own 0.5 s deadline) and answer size.
constexpr int kOwnerLookups = 2;
constexpr time_t kOwnerConnectTimeoutS = 1;
constexpr time_t kOwnerReadTimeoutS = 2;
constexpr size_t kMaxOwnerAnswerBytes = 4096;
// GET /asset: one level geometry document (a 1M-triangle mesh is about 40 MB of JSON), fetched
// once per asset per page; the admin endpoint serves it from memory.
constexpr time_t kAssetReadTimeoutS = 20;
constexpr size_t kMaxAssetAnswerBytes = 96u << 20;
/// The header every POST must carry: a cross-origin page cannot send it without a CORS preflight,
/// which this server never grants, so another site open in the browser cannot drive the viewer.
constexpr const char* kControlHeader = "X-Impulse-Viewer";


/// A JSON {"error": ...} answer with `status`; `why` is our own plain ASCII text.
void json_error(httplib::Response& res, int status, std::string_view why) {
  res.status = status;
  std::string body = R"({"error":")";
  for (const char c : why) {
    if (c == '"' || c == '\\') body += '\\';
    body += c;
  }
  body += "\"}\n";
  res.set_content(body, kJson);
}

/// At most one log line per second for refused requests, with the count of those not logged.
class RefusalLog {
 public:
  void note(const httplib::Request& req, int status, std::string_view why) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(1)) {
      ++suppressed_;
      return;
    }
    last_ = now;
    std::string method = req.method.substr(0, 16), path = req.path.substr(0, 80);
    for (char& c : method) c = (c < 0x20 || c > 0x7e) ? '?' : c;  // never echo control characters
    for (char& c : path) c = (c < 0x20 || c > 0x7e) ? '?' : c;
    fmt::print(stderr, "impulse-viewer: refused {} {} from {}: {} {}{}\n", method, path, req.remote_addr, status, why,
               suppressed_ ? fmt::format(" ({} more refused since the last line)", suppressed_) : std::string());
    suppressed_ = 0;
  }

 private:
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_{};
  uint64_t suppressed_ = 0;
};

bool read_file(const std::filesystem::path& path, std::string* out) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0 || size > kMaxScriptBytes) return false;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  *out = std::move(text).str();
  return in.good() || in.eof();
}

bool is_loopback(const std::string& bind) { return bind == "127.0.0.1" || bind == "::1" || bind == "localhost"; }

}  // namespace

// ------------------------------------------------------------------------------ FrameSlot, queues

void FrameSlot::publish(std::shared_ptr<const std::string> frame) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    frame_.swap(frame);
    ++sequence_;
  }
  changed_.notify_all();
  // The old frame (now in `frame`) is freed here, outside the lock, unless a stream still sends it.
}

std::shared_ptr<const std::string> FrameSlot::wait_newer(uint64_t* seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return stopped_ || (frame_ && sequence_ != *seen); });
  if (stopped_ || !frame_ || sequence_ == *seen) return nullptr;
  *seen = sequence_;
  return frame_;
}

void FrameSlot::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  changed_.notify_all();
}

bool FrameSlot::stopped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopped_;
}

bool ControlQueue::push(const ControlRequest& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.size() >= kCapacity) return false;
  queue_.push_back(r);
  return true;
}

std::optional<ControlRequest> ControlQueue::pop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty()) return std::nullopt;
  const ControlRequest r = queue_.front();
  queue_.pop_front();
  return r;
}

void ReplayFacts::set(std::optional<ReplayRange> range) {
  std::lock_guard<std::mutex> lock(mutex_);
  range_ = range;
}

std::optional<ReplayRange> ReplayFacts::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return range_;
}

bool parse_admin_address(std::string_view text, std::string* host, uint16_t* port, std::string* error) {
  constexpr std::string_view kScheme = "http://";
  if (text.substr(0, kScheme.size()) == kScheme) text.remove_prefix(kScheme.size());
  if (!text.empty() && text.back() == '/') text.remove_suffix(1);
  if (text.find("://") != std::string_view::npos || text.find('/') != std::string_view::npos) {
    *error = "expected HOST:PORT or http://HOST:PORT of the server's admin endpoint (its --admin-port)";
    return false;
  }
  return parse_host_port(text, host, port, error);
}

bool valid_object_id(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const auto part_ok = [](std::string_view digits) {
    if (digits.empty() || digits.size() > 10) return false;
    uint64_t v = 0;
    for (const char c : digits) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v <= UINT32_MAX;
  };
  return part_ok(text.substr(0, colon)) && part_ok(text.substr(colon + 1));
}

// ------------------------------------------------------------------------------ HttpServer

struct HttpServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::string three_js, orbit_js;  // orbit_js empty: not installed (the page then has a fixed camera)
  RefusalLog refusals;
  FrameSlot* frames = nullptr;
};

void DriveSlot::set(const DriveRequest& r, TimePoint at) {
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = r;
  at_ = at;
}

DriveRequest DriveSlot::get(TimePoint now, std::chrono::milliseconds max_age) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (now - at_ > max_age) return DriveRequest{};
  return latest_;
}

std::unique_ptr<HttpServer> HttpServer::start(const HttpOptions& options, FrameSlot& frames, ControlQueue& controls,
                                              const ReplayFacts& replay, DriveSlot* drive, std::string* error) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->impl_ = std::make_unique<Impl>();
  Impl& impl = *http->impl_;
  impl.frames = &frames;
  const std::filesystem::path dir(options.three_dir);
  if (!read_file(dir / "build" / "three.min.js", &impl.three_js)) {
    *error = fmt::format("cannot read {}: install three.js (apt-get install libjs-three, or scripts/setup) or point "
                         "--three-dir at a directory holding build/three.min.js",
                         (dir / "build" / "three.min.js").string());
    return nullptr;
  }
  if (!read_file(dir / "examples" / "js" / "controls" / "OrbitControls.js", &impl.orbit_js)) {
    fmt::print(stderr, "impulse-viewer: no examples/js/controls/OrbitControls.js under {}: the page's camera will not orbit\n",
               dir.string());
  }

  httplib::Server& svr = impl.server;
  const size_t max_streams = static_cast<size_t>(options.max_streams);
  svr.new_task_queue = [max_streams] { return new BoundedPool(max_streams + kSpareWorkers, kMaxQueuedConnections); };
  svr.set_read_timeout(kReadTimeoutS, 0);
  svr.set_write_timeout(kWriteTimeoutS, 0);
  svr.set_keep_alive_timeout(kKeepAliveTimeoutS);
  svr.set_keep_alive_max_count(kKeepAliveMaxRequests);
  svr.set_payload_max_length(kMaxBodyBytes);
  svr.set_tcp_nodelay(true);
  svr.set_socket_options([](socket_t sock) {  // no SO_REUSEPORT: a second viewer on the port must fail
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  // Bound to loopback, only loopback names are accepted in Host: a public web page that rebinds its
  // own name to 127.0.0.1 (DNS rebinding) then cannot read the stream or send controls.
  const bool loopback = is_loopback(options.bind);
  svr.set_pre_routing_handler([&impl, loopback](const httplib::Request& req, httplib::Response& res) {
    const bool known_method = req.method == "GET" || req.method == "HEAD" || req.method == "POST";
    if (!known_method) {
      res.status = 405;
      res.set_header("Allow", "GET, HEAD, POST");
      res.set_content("method not allowed: the viewer serves GET, HEAD, POST /control and POST /drive\n", kPlainText);
      impl.refusals.note(req, 405, "method not allowed");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (loopback) {
      const std::string host = req.get_header_value("Host");
      const std::string name = host.rfind('[', 0) == 0 ? host.substr(0, host.find(']') + 1) : host.substr(0, host.find(':'));
      if (name != "127.0.0.1" && name != "localhost" && name != "[::1]") {
        res.status = 403;
        res.set_content("forbidden: open the viewer as http://127.0.0.1:PORT/ or http://localhost:PORT/\n", kPlainText);
        impl.refusals.note(req, 403, "Host is not a loopback name");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // cpp-httplib bounds a body by Content-Length only (a chunked one is read whole): POSTs must
    // give a length, so set_payload_max_length refuses a long one with 413 before reading it.
    if (req.method == "POST" && (!req.has_header("Content-Length") || req.has_header("Transfer-Encoding"))) {
      res.status = 411;
      res.set_content("length required: send a control with a Content-Length (no chunked bodies)\n", kPlainText);
      impl.refusals.note(req, 411, "POST without Content-Length");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "POST" && req.get_header_value(kControlHeader) != "1") {
      res.status = 403;
      res.set_content(fmt::format("forbidden: a control must carry the header {}: 1\n", kControlHeader), kPlainText);
      impl.refusals.note(req, 403, "POST without the control header");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    res.set_content(fmt::format("HTTP {}\n", res.status), kPlainText);
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content("internal error\n", kPlainText);
  });

  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(kPageHtml, "text/html; charset=utf-8");
  });
  svr.Get("/three.min.js", [&impl](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl.three_js, "text/javascript; charset=utf-8");
  });
  svr.Get("/OrbitControls.js", [&impl](const httplib::Request&, httplib::Response& res) {
    if (impl.orbit_js.empty()) {
      res.status = 404;
      return;
    }
    res.set_content(impl.orbit_js, "text/javascript; charset=utf-8");
  });

  HttpServer* self = http.get();
  svr.Get("/events", [self, &impl, max_streams](const httplib::Request& req, httplib::Response& res) {
    if (self->streams_.fetch_add(1) >= static_cast<int>(max_streams)) {
      self->streams_.fetch_sub(1);
      res.status = 503;
      res.set_header("Retry-After", "5");
      res.set_content(fmt::format("too many pages are watching (--max-pages {}): close one and reload\n", max_streams),
                      kPlainText);
      impl.refusals.note(req, 503, "--max-pages reached");
      return;
    }
    res.set_header("Cache-Control", "no-store");
    auto seen = std::make_shared<uint64_t>(0);
    res.set_chunked_content_provider(
        "text/event-stream",
        [&impl, seen](size_t, httplib::DataSink& sink) {
          std::shared_ptr<const std::string> frame = impl.frames->wait_newer(seen.get(), kKeepAlive);
          if (impl.frames->stopped()) return false;
          if (!frame) {
            static constexpr char kComment[] = ": keepalive\n\n";
            return sink.write(kComment, sizeof kComment - 1);
          }
          std::string event;
          event.reserve(frame->size() + 8);
          event += "data: ";
          event += *frame;
          event += "\n\n";
          return sink.write(event.data(), event.size());
        },
        [self](bool) { self->streams_.fetch_sub(1); });
  });

  svr.Post("/control", [&impl, &controls, &replay](const httplib::Request& req, httplib::Response& res) {
    std::string error;
    const std::optional<ControlRequest> control =
        parse_control(req.get_param_value("action"), req.get_param_value("tick"), req.get_param_value("speed"),
                      replay.get(), &error);
    if (!control) {
      res.status = replay.get() ? 400 : 409;
      res.set_content(error + "\n", kPlainText);
      impl.refusals.note(req, res.status, error);
      return;
    }
    if (!controls.push(*control)) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content("too many controls waiting: try again in a moment\n", kPlainText);
      impl.refusals.note(req, 503, "control queue full");
      return;
    }
    res.status = 202;  // the server's answer shows up in the stream's "control" field
    res.set_content("accepted\n", kPlainText);
  });

  svr.Post("/drive", [&impl, drive](const httplib::Request& req, httplib::Response& res) {
    std::string error;
    if (drive == nullptr) {
      error = "the viewer has no car: start it with --drive";
      res.status = 409;
    } else if (const std::optional<DriveRequest> d =
                   parse_drive(req.get_param_value("throttle"), req.get_param_value("steer"), &error)) {
      drive->set(*d, std::chrono::steady_clock::now());
      res.status = 204;
      return;
    } else {
      res.status = 400;
    }
    res.set_content(error + "\n", kPlainText);
    impl.refusals.note(req, res.status, error);
  });

  // A clicked body's owner: snapshots do not carry owners, the server's admin endpoint does
  // (GET /objects/<id>). Asked here, on an HTTP worker, never on the SDK's network loop; at most
  // kOwnerLookups at once, each bounded by short timeouts, so clicks cannot take every worker.
  const std::string admin_host = options.admin_host;
  const uint16_t admin_port = options.admin_port;
  // GET /owner and GET /asset both ask the admin endpoint: `path` there, at most `max_bytes` of
  // JSON back within `read_timeout_s`, sharing the kOwnerLookups slots.
  auto ask_admin = [self, admin_host, admin_port](const std::string& path, size_t max_bytes, time_t read_timeout_s,
                                                  httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    if (admin_host.empty()) {
      return json_error(res, 501, "not known: start impulse-viewer with --admin HOST:PORT (the server's --admin-port)");
    }
    if (self->owner_lookups_.fetch_add(1) >= kOwnerLookups) {
      self->owner_lookups_.fetch_sub(1);
      res.set_header("Retry-After", "1");
      return json_error(res, 503, "busy: other admin lookups are running; try again");
    }
    httplib::Client admin(admin_host, admin_port);
    admin.set_connection_timeout(kOwnerConnectTimeoutS, 0);
    admin.set_read_timeout(read_timeout_s, 0);
    admin.set_write_timeout(kOwnerReadTimeoutS, 0);
    const httplib::Result r = admin.Get(path);
    self->owner_lookups_.fetch_sub(1);
    if (!r) {
      return json_error(res, 502, fmt::format("the server's admin endpoint {}:{} did not answer ({})", admin_host,
                                              admin_port, httplib::to_string(r.error())));
    }
    // The admin endpoint answers JSON for 200, 400, 404 and 503 alike: pass it on.
    const bool json = r->get_header_value("Content-Type").rfind("application/json", 0) == 0;
    if (!json || r->body.size() > max_bytes) {
      return json_error(res, 502, fmt::format("unexpected answer from the admin endpoint {}:{} (HTTP {})", admin_host,
                                              admin_port, r->status));
    }
    res.status = r->status;
    res.set_content(r->body, kJson);
  };
  svr.Get("/owner", [&impl, ask_admin](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.get_param_value("id");
    if (!valid_object_id(id)) {
      impl.refusals.note(req, 400, "bad owner id");
      res.set_header("Cache-Control", "no-store");
      return json_error(res, 400, "bad id: expected INDEX:GENERATION");
    }
    ask_admin("/objects/" + id, kMaxOwnerAnswerBytes, kOwnerReadTimeoutS, res);
  });
  // A hull's, mesh's or heightfield's geometry (GET /assets/<id> on the admin endpoint), which
  // the page draws in place of a bounding box.
  svr.Get("/asset", [&impl, ask_admin](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.get_param_value("id");
    const bool digits = !id.empty() && id.size() <= 5 &&
                        std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoul(id) > 65535) {
      impl.refusals.note(req, 400, "bad asset id");
      res.set_header("Cache-Control", "no-store");
      return json_error(res, 400, "bad id: expected an asset id, 0 to 65535");
    }
    ask_admin("/assets/" + id, kMaxAssetAnswerBytes, kAssetReadTimeoutS, res);
  });

  int port = options.port;
  if (options.port == 0) {
    port = svr.bind_to_any_port(options.bind);
  } else if (!svr.bind_to_port(options.bind, options.port)) {
    port = -1;
  }
  if (port <= 0) {
    *error = fmt::format("cannot listen for HTTP on {}:{}: the port is in use or the address is not local; choose "
                         "another with --http-port or --http-bind",
                         options.bind, options.port);
    return nullptr;
  }
  http->port_ = static_cast<uint16_t>(port);
  impl.thread = std::thread([&impl] { impl.server.listen_after_bind(); });
  return http;
}

HttpServer::~HttpServer() {
  if (!impl_) return;
  impl_->frames->stop();  // streams return at their next wake-up, freeing their workers
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace impulse::viewer
