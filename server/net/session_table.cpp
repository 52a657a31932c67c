// Session table: dense vector + ordered index (deterministic iteration, no hash order).
#include "server/net/session_table.h"

#include <fmt/format.h>

namespace impulse::server {

SessionTable::SessionTable(uint32_t max_sessions) : max_sessions_(max_sessions < 1 ? 1 : max_sessions) {
  sessions_.reserve(max_sessions_);
}

Session* SessionTable::find(const Endpoint& endpoint) {
  const auto it = index_.find(endpoint);
  return it == index_.end() ? nullptr : &sessions_[it->second];
}

Session* SessionTable::add(const Endpoint& endpoint, std::string name, TimePoint now, uint32_t client_id) {
  if (full() || index_.count(endpoint) != 0) return nullptr;
  const auto index = static_cast<uint32_t>(sessions_.size());
  Session& s = sessions_.emplace_back();
  s.endpoint = endpoint;
  s.client_id = client_id != 0 ? client_id : next_client_id_++;
  s.name = std::move(name);
  s.connected_at = now;
  s.last_heard = now;
  index_.emplace(endpoint, index);
  return &s;
}

Session* SessionTable::find_client(uint32_t client_id) {
  for (Session& s : sessions_) {
    if (s.client_id == client_id && s.confirmed) return &s;
  }
  return nullptr;
}

void SessionTable::remove_at(uint32_t index) {
  index_.erase(sessions_[index].endpoint);
  const auto last = static_cast<uint32_t>(sessions_.size() - 1);
  if (index != last) {
    sessions_[index] = std::move(sessions_[last]);
    index_[sessions_[index].endpoint] = index;
  }
  sessions_.pop_back();
}

bool SessionTable::remove(const Endpoint& endpoint) {
  const auto it = index_.find(endpoint);
  if (it == index_.end()) return false;
  remove_at(it->second);
  return true;
}

void SessionTable::take_expired(TimePoint deadline, TimePoint unconfirmed_deadline, std::vector<Session>* expired) {
  // Walk backwards so swap-removal never skips an unvisited session.
  for (auto i = static_cast<uint32_t>(sessions_.size()); i-- > 0;) {
    const Session& s = sessions_[i];
    if (s.last_heard < deadline || (!s.confirmed && s.connected_at < unconfirmed_deadline)) {
      expired->push_back(std::move(sessions_[i]));
      remove_at(i);
    }
  }
}

void SessionTable::take_all(std::vector<Session>* all) {
  for (Session& s : sessions_) all->push_back(std::move(s));
  sessions_.clear();
  index_.clear();
}

std::string sanitize_for_log(std::string_view text, size_t max_bytes) {
  std::string out(text.substr(0, max_bytes));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7E) c = '?';
  }
  return out;
}

std::string to_string(const Endpoint& endpoint) {
  const auto address = endpoint.address();
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), endpoint.port());
  return fmt::format("{}:{}", address.to_string(), endpoint.port());
}

}  // namespace impulse::server
