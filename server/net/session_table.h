// Sessions keyed by the client's UDP endpoint (address + port), as in netcode.io's server: the
// endpoint is the identity; a session lives until Disconnect, timeout or shutdown.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/net/outbox.h"

namespace impulse::server {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

/// One connected client.
struct Session {
  Endpoint endpoint;
  uint32_t client_id = 0;    ///< >= 1, unique for the lifetime of the server
  std::string name;          ///< client_name from Connect, sanitised for logs (<= 64 bytes)
  TimePoint connected_at{};
  TimePoint last_heard{};    ///< arrival of the latest datagram from this endpoint
};

/// Fixed-capacity table of sessions. Sessions are stored densely (iteration order is insertion
/// order with swap-removal, deterministic for the same inputs); lookup by endpoint is O(log n).
class SessionTable {
 public:
  /// @param max_sessions  capacity, >= 1 (ServerConfig::max_clients)
  explicit SessionTable(uint32_t max_sessions);

  /// The session of `endpoint`, or nullptr. The pointer is valid until the next add/remove.
  Session* find(const Endpoint& endpoint);
  /// Adds a session with the next client id, or returns nullptr when full or already present.
  Session* add(const Endpoint& endpoint, std::string name, TimePoint now);
  /// Removes the session of `endpoint`; false when there is none.
  bool remove(const Endpoint& endpoint);
  /// Moves every session whose last_heard is before `deadline` into *expired (appended).
  void take_expired(TimePoint deadline, std::vector<Session>* expired);
  /// Moves every session into *all (appended), leaving the table empty.
  void take_all(std::vector<Session>* all);

  std::span<const Session> sessions() const { return sessions_; }
  uint32_t size() const { return static_cast<uint32_t>(sessions_.size()); }
  bool full() const { return sessions_.size() >= max_sessions_; }

 private:
  void remove_at(uint32_t index);

  uint32_t max_sessions_;
  uint32_t next_client_id_ = 1;
  std::vector<Session> sessions_;
  std::map<Endpoint, uint32_t> index_;  // endpoint -> position in sessions_
};

/// Copies a client-supplied string for logs: at most max_bytes, every byte outside printable
/// ASCII replaced by '?', so a hostile name cannot forge log lines or terminal escapes.
std::string sanitize_for_log(std::string_view text, size_t max_bytes);

/// "1.2.3.4:5678" or "[::1]:5678".
std::string to_string(const Endpoint& endpoint);

}  // namespace impulse::server
