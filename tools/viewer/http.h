// impulse-viewer's HTTP side: the page, the three.js files, the world stream and the controls,
// served by cpp-httplib on a bounded pool of threads of its own.
//
// Why Server-Sent Events rather than WebSocket: the world goes one way (viewer -> page), which is
// what SSE is; the browser's EventSource reconnects by itself after a viewer or network restart;
// it is plain HTTP, served by cpp-httplib's chunked content provider (Debian's cpp-httplib has no
// WebSocket server); and the rare controls (pause, seek, speed) are small POSTs.
//
// The SDK's network loop never waits for a browser: it publishes each frame into a latest-frame
// slot (FrameSlot: a pointer swap under a mutex that no one holds across I/O) and goes on. Each
// page's stream sends the newest frame when it is free to, so a slow browser skips frames instead
// of queueing them. Controls go the other way through a bounded queue (ControlQueue) that the
// network loop drains.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "viewer/frame.h"

namespace impulse::viewer {

/// The latest frame, handed from the network loop to every page's stream. Old frames are dropped.
class FrameSlot {
 public:
  /// Network loop: replaces the frame (never waits for a reader beyond a pointer copy).
  void publish(std::shared_ptr<const std::string> frame);
  /// HTTP thread: waits up to `timeout` for a frame newer than *seen (0 = none yet); returns it and
  /// updates *seen, or null on timeout or stop.
  std::shared_ptr<const std::string> wait_newer(uint64_t* seen, std::chrono::milliseconds timeout);
  void stop();
  bool stopped() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<const std::string> frame_;
  uint64_t sequence_ = 0;
  bool stopped_ = false;
};

/// Controls from the page for the network loop, at most kCapacity waiting.
class ControlQueue {
 public:
  static constexpr size_t kCapacity = 16;
  /// HTTP thread: false when full.
  bool push(const ControlRequest& r);
  /// Network loop: the oldest waiting control, if any.
  std::optional<ControlRequest> pop();

 private:
  std::mutex mutex_;
  std::deque<ControlRequest> queue_;
};

/// Replay facts the HTTP threads need to validate a control (set by the network loop).
class ReplayFacts {
 public:
  void set(std::optional<ReplayRange> range);
  std::optional<ReplayRange> get() const;

 private:
  mutable std::mutex mutex_;
  std::optional<ReplayRange> range_;
};

/// The page's latest controls of the viewer's car (--drive), with when they came.
class DriveSlot {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  /// HTTP thread.
  void set(const DriveRequest& r, TimePoint at);
  /// Network loop: the latest controls, or released ones (zero) when none came within `max_age`
  /// (a closed tab or a lost connection must not leave the car driving).
  DriveRequest get(TimePoint now, std::chrono::milliseconds max_age) const;

 private:
  mutable std::mutex mutex_;
  DriveRequest latest_;
  TimePoint at_{};
};

struct HttpOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 8090;  ///< 0 = any free port (tests)
  int max_streams = 8;   ///< pages streaming at once
  std::string three_dir = "/usr/share/javascript/three";
  /// The server's admin endpoint (--admin), asked for a clicked body's owner (GET /owner);
  /// an empty host: owners are not known.
  std::string admin_host;
  uint16_t admin_port = 0;
};

/// --admin's value, "HOST:PORT" or "http://HOST:PORT[/]", into host and port; false with *error.
bool parse_admin_address(std::string_view text, std::string* host, uint16_t* port, std::string* error);
/// "<index>:<generation>", decimal, each fitting 32 bits (the page's body key).
bool valid_object_id(std::string_view text);

class HttpServer {
 public:
  /// Reads the three.js files, binds and starts serving on a thread of its own. Null with *error
  /// saying what to do when a file is missing or the address cannot be bound.
  /// `drive`: the car's controls (--drive); null answers POST /drive with 409.
  static std::unique_ptr<HttpServer> start(const HttpOptions& options, FrameSlot& frames, ControlQueue& controls,
                                           const ReplayFacts& replay, DriveSlot* drive, std::string* error);
  ~HttpServer();  ///< stops and joins
  uint16_t port() const { return port_; }
  /// Pages streaming now.
  int streams() const { return streams_.load(); }

 private:
  HttpServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::atomic<int> streams_{0};
  std::atomic<int> owner_lookups_{0};  // GET /owner asking the admin endpoint now
};

/// The page (index.html), embedded in the binary (page.cpp).
extern const char* const kPageHtml;

}  // namespace impulse::viewer
