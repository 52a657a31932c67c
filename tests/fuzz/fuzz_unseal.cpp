// libFuzzer target: the unsealing path of every session datagram (shared/net/packet_crypto.h),
// both ways the fuzzer can reach it:
//  1. the input as raw bytes to open_session_packet under a fixed key (magic, length, replay
//     window, tag): whatever it is, it never crashes, and it opens only if it re-seals to the
//     same bytes (so nothing unauthenticated is ever accepted);
//  2. the input as a plaintext sealed with the fixed key at a sequence taken from its first four
//     bytes: it must open to exactly the input, a replay of it must be refused, and the same
//     datagram with one bit flipped (position chosen by the input) must be refused.
// Seeds (fuzz_make_corpus) are valid sealed datagrams under the fixed key, so the fuzzer starts
// past the tag.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shared/net/packet_crypto.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_keys.h"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse;
  const std::span<const uint8_t> input(data, size);
  const net::PacketKey key = fuzz::unseal_fuzz_key();
  std::vector<uint8_t> out(size + net::kSealOverheadBytes);

  // 1. Raw bytes.
  net::PacketProtection p;
  p.receive_key = key;
  p.keyed = true;
  size_t n = 0;
  uint32_t sequence = 0;
  if (net::open_session_packet(p, input, out, &n, &sequence) == net::OpenError::None) {
    IMPULSE_FUZZ_CHECK(n + net::kSealOverheadBytes == size, "opened size");
    std::vector<uint8_t> resealed(size);
    IMPULSE_FUZZ_CHECK(net::seal_packet(key, sequence, std::span<const uint8_t>(out).first(n), resealed) == size,
                       "re-seal");
    IMPULSE_FUZZ_CHECK(std::equal(resealed.begin(), resealed.end(), input.begin()), "opened only what seals to it");
    IMPULSE_FUZZ_CHECK(net::open_session_packet(p, input, out, &n, &sequence) == net::OpenError::Replayed,
                       "a replay is refused");
  }

  // 2. The input as plaintext.
  fuzz::InputReader in(input);
  const uint32_t seq = in.u32() | 1u;  // never 0
  std::vector<uint8_t> sealed(size + net::kSealOverheadBytes);
  IMPULSE_FUZZ_CHECK(net::seal_packet(key, seq, input, sealed) == sealed.size(), "seal");
  net::PacketProtection q;
  q.receive_key = key;
  q.keyed = true;
  IMPULSE_FUZZ_CHECK(net::open_session_packet(q, sealed, out, &n, &sequence) == net::OpenError::None, "round trip");
  IMPULSE_FUZZ_CHECK(n == size && sequence == seq && std::equal(input.begin(), input.end(), out.begin()),
                     "round trip bytes");
  IMPULSE_FUZZ_CHECK(net::open_session_packet(q, sealed, out, &n, &sequence) == net::OpenError::Replayed, "replay");
  const size_t bit = (static_cast<size_t>(in.u16()) << 8 | in.u8()) % (sealed.size() * 8);
  sealed[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  net::PacketProtection fresh;
  fresh.receive_key = key;
  fresh.keyed = true;
  IMPULSE_FUZZ_CHECK(net::open_session_packet(fresh, sealed, out, &n, &sequence) != net::OpenError::None,
                     "a flipped bit is refused");
  return 0;
}
