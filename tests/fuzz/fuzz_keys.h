// The fixed packet key of fuzz_unseal and of its seeds (fuzz_make_corpus), so the seeds are valid
// sealed datagrams and the fuzzer starts past the tag.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shared/net/packet_crypto.h"

namespace impulse::fuzz {

inline net::PacketKey unseal_fuzz_key() {
  net::PacketKey key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(0xA0 + i);
  return key;
}

}  // namespace impulse::fuzz
