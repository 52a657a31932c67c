// libFuzzer target: the client's datagram decoding (ClientCore::receive): unsealing, verification,
// request results, raycast results, delta snapshot payloads, reliable collision events (bit-packed
// blocks, wire::decode_collision_events), pongs and disconnects. A fresh ClientCore per input is
// first put in a session by a real handshake (Connect, Challenge, ConnectAccepted with a fixed
// server key share, default quantisation); the input is then delivered three times: raw (what an
// attacker at the server's address sends: plaintext or a forged seal, which must have no effect),
// then sealed with the session's server->client key like a server's datagram (its header stamped
// with the sequence when it verifies), then that sealed datagram again (a replay, refused).
// Invariants: nothing crashes, the raw delivery changes nothing (the view and the session), the
// view stays sorted and bounded.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "impulse/client_core.h"
#include "shared/net/packet_crypto.h"
#include "shared/wire/codec.h"
#include "tests/fuzz/fuzz_input.h"

namespace impulse::fuzz {
namespace {

using TimePoint = ClientCore::TimePoint;

PeerAddress server_address() {
  PeerAddress a;
  a.family = 4;
  a.bytes[0] = 127;
  a.bytes[3] = 1;
  a.port = 7777;
  return a;
}

const net::KxKeyPair& server_kx() {
  static const net::KxKeyPair pair = [] {
    net::KxKeyPair p;
    std::array<uint8_t, 32> seed{};
    seed.fill(0x22);
    (void)net::kx_keypair_from_seed(seed, &p);
    return p;
  }();
  return pair;
}

/// Connects `core` through a scripted handshake; returns the server->client key (nullopt if the
/// core did not connect, a harness bug).
bool connect(ClientCore& core, TimePoint now, net::PacketKey* server_to_client) {
  core.connect(server_address(), now, ConnectParams{});
  DatagramQueue& out = core.outbox();
  if (out.empty()) return false;
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> buffer{};
  const std::span<const uint8_t> first = out[0];
  std::copy(first.begin(), first.end(), buffer.begin());
  const wire::Verified v = wire::verify_datagram(std::span<const uint8_t>(buffer.data(), first.size()),
                                                 wire::Direction::ClientToServer);
  if (v.reason != wire::DropReason::None || v.envelope->message_as_Connect() == nullptr) return false;
  const auto* kx = v.envelope->message_as_Connect()->kx_public();
  if (kx == nullptr || kx->size() != net::kKxPublicKeyBytes) return false;
  net::KxPublicKey client_public{};
  std::copy(kx->begin(), kx->end(), client_public.begin());
  out.clear();

  flatbuffers::FlatBufferBuilder fbb;
  const std::array<uint8_t, 24> cookie{};
  core.receive(wire::build_challenge(fbb, cookie), server_address(), now);
  out.clear();
  wire::AcceptedArgs a;
  a.client_id = 1;
  a.tick_hz = 60;
  a.snapshot_hz = 30;
  const wire::QuantizationConfig q;
  a.quantization = wire::QuantizationArgs{q.world_bound_m,    q.position_fraction_bits,        q.orientation_bits,
                                          q.max_linear_speed, q.linear_velocity_fraction_bits, q.max_angular_speed,
                                          q.angular_velocity_fraction_bits};
  a.kx_public = server_kx().public_key;
  a.client_kx_public = client_public;  // protocol 6: the share it answers
  const auto built = wire::build_connect_accepted(fbb, a);
  std::vector<uint8_t> accepted(built.begin(), built.end());
  wire::stamp_header(accepted, wire::PacketHeader(1, 0, 0));
  core.receive(accepted, server_address(), now);
  out.clear();
  net::SessionKeys keys;
  if (!net::server_session_keys(server_kx(), client_public, net::BindingSecret{}, &keys)) return false;
  *server_to_client = keys.server_to_client;
  return core.connected();
}

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse;
  static fuzz::DatagramBuffer buffer;
  const fuzz::TimePoint now = fuzz::TimePoint{} + std::chrono::hours(1);
  ClientCore core;
  net::PacketKey key{};
  IMPULSE_FUZZ_CHECK(fuzz::connect(core, now, &key), "a real handshake starts a session");
  const std::span<const uint8_t> input(data, size);

  // 1. Raw: never authenticated, so nothing may change.
  const uint64_t unauthenticated = core.stats().datagrams_unauthenticated;
  core.receive(buffer.assign(input), fuzz::server_address(), now);
  IMPULSE_FUZZ_CHECK(core.connected(), "a raw datagram cannot end the session");
  IMPULSE_FUZZ_CHECK(core.objects().empty(), "a raw datagram cannot change the view");
  IMPULSE_FUZZ_CHECK(core.stats().datagrams_unauthenticated >= unauthenticated, "counted");

  // 2. Sealed as the server would, then replayed.
  if (size <= wire::kMaxPlaintextBytes) {
    std::vector<uint8_t> plain(input.begin(), input.end());
    const wire::Verified v = wire::verify_datagram(buffer.assign(plain), wire::Direction::ServerToClient);
    if (v.reason == wire::DropReason::None) {
      const wire::PacketHeader h = wire::header_of(*v.envelope);
      wire::stamp_header(plain, wire::PacketHeader(2, h.ack(), h.ack_bits()));
    }
    std::vector<uint8_t> sealed(plain.size() + net::kSealOverheadBytes);
    IMPULSE_FUZZ_CHECK(net::seal_packet(key, 2, plain, sealed) == sealed.size(), "seal");
    core.receive(sealed, fuzz::server_address(), now);
    const uint64_t before_replay = core.stats().datagrams_unauthenticated;
    const bool connected = core.connected();
    core.receive(sealed, fuzz::server_address(), now);
    IMPULSE_FUZZ_CHECK(!connected || core.stats().datagrams_unauthenticated == before_replay + 1,
                       "a replayed datagram is refused");
  }
  const auto objects = core.objects();
  for (size_t i = 1; i < objects.size(); ++i) IMPULSE_FUZZ_CHECK(objects[i - 1].id < objects[i].id, "view sorted by id");
  return 0;
}
