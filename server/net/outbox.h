// Outgoing datagrams of one wake-up: one byte arena plus (recipient, slice) records, so a snapshot
// part built once is sent to every client without copying it per client.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "server/request/endpoint.h"

namespace impulse::server {

/// A slice of an Outbox's byte arena. Valid until Outbox::clear().
struct Payload {
  uint32_t offset = 0;
  uint32_t size = 0;
};

/// Datagrams queued for sending. Plain buffers reused across wake-ups (clear() keeps capacity).
class Outbox {
 public:
  struct Datagram {
    Endpoint to;
    Payload payload;
  };

  /// Copies `bytes` (one finished datagram, <= wire::kMaxDatagramBytes) into the arena.
  Payload store(std::span<const uint8_t> bytes) {
    const Payload p{static_cast<uint32_t>(bytes_.size()), static_cast<uint32_t>(bytes.size())};
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
    return p;
  }
  /// Appends `n` zero bytes to the arena for the caller to fill (through mutable_bytes).
  Payload reserve(size_t n) {
    const Payload p{static_cast<uint32_t>(bytes_.size()), static_cast<uint32_t>(n)};
    bytes_.resize(bytes_.size() + n);
    return p;
  }
  /// Queues a stored payload for `to`.
  void push(const Endpoint& to, Payload payload) { datagrams_.push_back({to, payload}); }
  /// store() + push() for a datagram with a single recipient.
  void push(const Endpoint& to, std::span<const uint8_t> bytes) { push(to, store(bytes)); }

  /// The stored bytes of `p`, writable (to stamp a packet header after storing). Valid until the
  /// next store() or clear().
  std::span<uint8_t> mutable_bytes(Payload p) { return std::span<uint8_t>(bytes_).subspan(p.offset, p.size); }

  std::span<const Datagram> datagrams() const { return datagrams_; }
  std::span<const uint8_t> bytes_of(const Datagram& d) const {
    return std::span<const uint8_t>(bytes_).subspan(d.payload.offset, d.payload.size);
  }
  bool empty() const { return datagrams_.empty(); }
  void clear() {
    bytes_.clear();
    datagrams_.clear();
  }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<Datagram> datagrams_;
};

}  // namespace impulse::server
