// The server set-up shared by fuzz_server_datagram and fuzz_make_corpus: a small ServerCore
// configuration, a scene with touching bodies (so steps produce contacts and collision events),
// fixed client endpoints and the harness's own connection procedure.
#pragma once

#include <array>
#include <chrono>
#include <span>
#include <string>

#include <flatbuffers/flatbuffers.h>

#include "server/app/server_core.h"
#include "shared/net/packet_crypto.h"
#include "shared/wire/codec.h"

namespace impulse::fuzz {

using namespace std::chrono_literals;

/// Fake clock origin: time is passed in, never read.
inline const server::TimePoint kFuzzStart = server::TimePoint{} + 1h;

/// Small limits so that ServerFull, timeouts and snapshot ticks are reachable in a few datagrams.
inline server::ServerConfig fuzz_server_config() {
  server::ServerConfig c;
  c.tick_hz = 60;
  c.snapshot_hz = 30;
  c.max_clients = 3;
  c.client_timeout_s = 1.0;
  c.max_steps_per_frame = 4;
  return c;
}

/// Ground box, a resting sphere and box, a falling capsule and a sensor: ids {0,1} .. {4,1}.
/// Returns false (with *error) only if the World refuses them, a harness bug.
inline bool add_fuzz_scene(server::ServerCore& core, std::string* error) {
  std::array<physics::BodyDesc, 5> bodies{};
  bodies[0].kind = physics::BodyKind::Static;
  bodies[0].shape = physics::make_box({20, 0.5f, 20});
  bodies[0].position = {0, -0.5f, 0};
  bodies[1].shape = physics::make_sphere(0.5f);
  bodies[1].position = {0, 0.5f, 0};
  bodies[2].shape = physics::make_box({0.5f, 0.5f, 0.5f});
  bodies[2].position = {2, 0.6f, 0};
  bodies[3].shape = physics::make_capsule(0.3f, 0.5f);
  bodies[3].position = {-2, 1.5f, 0};
  bodies[4].kind = physics::BodyKind::Static;
  bodies[4].shape = physics::make_box({1, 1, 1});
  bodies[4].position = {0, 0.5f, 3};
  bodies[4].sensor = true;
  return core.add_bodies(bodies, error);
}

/// Client endpoints a fuzz input may speak from (the split format's control & 3).
inline server::Endpoint fuzz_endpoint(unsigned index) {
  return server::Endpoint(asio::ip::make_address_v4("10.0.0.1"), static_cast<uint16_t>(40000 + (index & 3)));
}

/// The key share of every fuzz client (seeded: the harness's Connects are reproducible).
inline const net::KxKeyPair& fuzz_client_kx() {
  static const net::KxKeyPair pair = [] {
    net::KxKeyPair p;
    std::array<uint8_t, 32> seed{};
    seed.fill(0x11);
    (void)net::kx_keypair_from_seed(seed, &p);
    return p;
  }();
  return pair;
}

/// The client side of the fuzz endpoints' sessions (protocol 5): keys from each ConnectAccepted
/// the core sends, so that datagrams to a connected endpoint are sealed as a real client seals
/// them (the fuzzer then reaches the request paths) and the core's sealed replies are opened.
class FuzzPeers {
 public:
  /// What to hand the core for `bytes` from endpoint `index`: as is before a session, or when
  /// they already start with the sealed magic (so the raw unsealing path is fuzzed too);
  /// otherwise sealed with the endpoint's next sequence (stamped into the header when the bytes
  /// verify, as a client's would be). Valid until the next call.
  std::span<const uint8_t> outgoing(unsigned index, std::span<const uint8_t> bytes) {
    Peer& peer = peers_[index & 3];
    if (!peer.protection.keyed || net::is_sealed(bytes) || bytes.size() > wire::kMaxPlaintextBytes) return bytes;
    std::copy(bytes.begin(), bytes.end(), plain_.begin());
    const std::span<uint8_t> plain(plain_.data(), bytes.size());
    const uint32_t sequence = peer.next_sequence++;
    const wire::Verified v = wire::verify_datagram(plain, wire::Direction::ClientToServer);
    if (v.reason == wire::DropReason::None) {
      const wire::PacketHeader h = wire::header_of(*v.envelope);
      (void)wire::stamp_header(plain, wire::PacketHeader(sequence, h.ack(), h.ack_bits()));
    }
    const size_t n = net::seal_packet(peer.protection.send_key, sequence, plain, sealed_);
    return std::span<const uint8_t>(sealed_.data(), n);
  }

  /// The plaintext of a datagram the core sent to `to` (call once per datagram, in order): a
  /// sealed one opened with the endpoint's keys (empty when it does not open: the endpoint's
  /// session was keyed from a fuzzed Connect's key share), plaintext as is. A ConnectAccepted
  /// keys the endpoint.
  std::span<const uint8_t> incoming(const server::Endpoint& to, std::span<const uint8_t> bytes) {
    const unsigned index = static_cast<unsigned>(to.port() - fuzz_endpoint(0).port()) & 3u;
    Peer& peer = peers_[index];
    if (!net::is_sealed(bytes)) {
      std::copy(bytes.begin(), bytes.end(), opened_.begin());
      const std::span<const uint8_t> plain(opened_.data(), std::min(bytes.size(), opened_.size()));
      const wire::Verified v = wire::verify_datagram(plain, wire::Direction::ServerToClient);
      if (v.reason == wire::DropReason::None && v.envelope->message_type() == wire::Message::ConnectAccepted) {
        const auto* kx = v.envelope->message_as_ConnectAccepted()->kx_public();
        net::KxPublicKey server_public{};
        net::SessionKeys keys;
        if (kx != nullptr && kx->size() == server_public.size()) {
          std::copy(kx->begin(), kx->end(), server_public.begin());
          if (net::client_session_keys(fuzz_client_kx(), server_public, net::BindingSecret{}, &keys) &&
              keys.server_to_client != peer.protection.receive_key) {
            peer = Peer{};
            peer.protection.send_key = keys.client_to_server;
            peer.protection.receive_key = keys.server_to_client;
            peer.protection.keyed = true;
          }
        }
      }
      return plain;
    }
    size_t n = 0;
    uint32_t sequence = 0;
    if (net::open_session_packet(peer.protection, bytes, opened_, &n, &sequence) != net::OpenError::None) return {};
    return std::span<const uint8_t>(opened_.data(), n);
  }

 private:
  struct Peer {
    net::PacketProtection protection;
    uint32_t next_sequence = 1;
  };
  std::array<Peer, 4> peers_{};
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> plain_{};
  std::array<uint8_t, wire::kMaxDatagramBytes> sealed_{};
  alignas(wire::kDatagramAlignment) std::array<uint8_t, 2 * wire::kMaxDatagramBytes> opened_{};
};

/// Connects `from` the way a well-behaved client does, so the fuzzer need not rediscover the
/// handshake before it can reach the request paths: Connect, read the Challenge the core queued in
/// `out`, echo its cookie. The core's cookie key is all zeros (init_security() is not called), so
/// runs are reproducible.
inline void connect_session(server::ServerCore& core, const server::Endpoint& from, server::TimePoint now,
                            flatbuffers::FlatBufferBuilder& fbb, server::Outbox& out) {
  const std::span<const uint8_t> connect = wire::build_connect(fbb, "fuzz", {}, {}, fuzz_client_kx().public_key);
  const std::vector<uint8_t> aligned(connect.begin(), connect.end());
  const size_t before = out.datagrams().size();
  core.handle_datagram(from, aligned, now, out);
  std::vector<uint8_t> cookie;
  for (size_t i = before; i < out.datagrams().size(); ++i) {
    const server::Outbox::Datagram& d = out.datagrams()[i];
    if (d.to != from) continue;
    const std::vector<uint8_t> reply(out.bytes_of(d).begin(), out.bytes_of(d).end());
    const wire::Verified v = wire::verify_datagram(reply, wire::Direction::ServerToClient);
    if (v.envelope == nullptr) continue;
    if (const wire::Challenge* c = v.envelope->message_as_Challenge(); c && c->cookie()) {
      cookie.assign(c->cookie()->begin(), c->cookie()->end());
    }
  }
  if (cookie.empty()) return;  // already connected (accepted at once) or refused
  const std::span<const uint8_t> second = wire::build_connect(fbb, "fuzz", cookie, {}, fuzz_client_kx().public_key);
  const std::vector<uint8_t> aligned2(second.begin(), second.end());
  core.handle_datagram(from, aligned2, now, out);
}

}  // namespace impulse::fuzz
