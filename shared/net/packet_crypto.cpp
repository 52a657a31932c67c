// ChaCha20-Poly1305-IETF sealed packets with crypto_kx session keys and a replay window, on
// libsodium (netcode.io 1.0 STANDARD.md, "Encrypted Packets", "Replay Protection").
#include "shared/net/packet_crypto.h"

#include <cstring>

#include <sodium.h>

#include "shared/wire/codec.h"

namespace impulse::net {

static_assert(kKxPublicKeyBytes == crypto_kx_PUBLICKEYBYTES);
static_assert(kKxSecretKeyBytes == crypto_kx_SECRETKEYBYTES);
static_assert(crypto_kx_SESSIONKEYBYTES == 32);
static_assert(wire::kSealOverheadBytes == kSealOverheadBytes && wire::kKxPublicBytes == kKxPublicKeyBytes);
static_assert(kPacketKeyBytes == crypto_aead_chacha20poly1305_ietf_KEYBYTES);
static_assert(kSealTagBytes == crypto_aead_chacha20poly1305_ietf_ABYTES);
static_assert(crypto_aead_chacha20poly1305_ietf_NPUBBYTES == 12);
static_assert(kClientToServerKeyDomain.size() == 16 && kServerToClientKeyDomain.size() == 16);
static_assert((kReplayWindowSize & (kReplayWindowSize - 1)) == 0);

namespace {

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void bind_key(std::string_view domain, const uint8_t* half, const BindingSecret& binding, PacketKey* out) {
  std::array<uint8_t, 16 + kBindingSecretBytes> message{};
  std::memcpy(message.data(), domain.data(), 16);
  std::memcpy(message.data() + 16, binding.data(), binding.size());
  // Cannot fail for these sizes (out 32, key 32).
  (void)crypto_generichash(out->data(), out->size(), message.data(), message.size(), half, 32);
}

void bind_keys(const uint8_t* server_to_client, const uint8_t* client_to_server, const BindingSecret& binding,
               SessionKeys* out) {
  bind_key(kServerToClientKeyDomain, server_to_client, binding, &out->server_to_client);
  bind_key(kClientToServerKeyDomain, client_to_server, binding, &out->client_to_server);
}

}  // namespace

KxKeyPair::~KxKeyPair() { sodium_memzero(secret_key.data(), secret_key.size()); }
SessionKeys::~SessionKeys() {
  sodium_memzero(client_to_server.data(), client_to_server.size());
  sodium_memzero(server_to_client.data(), server_to_client.size());
}

bool init_packet_crypto() {
  static const int result = sodium_init();  // magic static: thread-safe, once
  return result >= 0;
}

bool make_kx_keypair(KxKeyPair* out) {
  if (!init_packet_crypto()) return false;
  return crypto_kx_keypair(out->public_key.data(), out->secret_key.data()) == 0;
}

bool kx_keypair_from_seed(std::span<const uint8_t, 32> seed, KxKeyPair* out) {
  if (!init_packet_crypto()) return false;
  return crypto_kx_seed_keypair(out->public_key.data(), out->secret_key.data(), seed.data()) == 0;
}

bool client_session_keys(const KxKeyPair& client, const KxPublicKey& server_public, const BindingSecret& binding,
                         SessionKeys* out) {
  if (!init_packet_crypto()) return false;
  std::array<uint8_t, 32> rx{}, tx{};  // client: rx = first half (s2c), tx = second half (c2s)
  if (crypto_kx_client_session_keys(rx.data(), tx.data(), client.public_key.data(), client.secret_key.data(),
                                    server_public.data()) != 0) {
    return false;
  }
  bind_keys(rx.data(), tx.data(), binding, out);
  sodium_memzero(rx.data(), rx.size());
  sodium_memzero(tx.data(), tx.size());
  return true;
}

bool server_session_keys(const KxKeyPair& server, const KxPublicKey& client_public, const BindingSecret& binding,
                         SessionKeys* out) {
  if (!init_packet_crypto()) return false;
  std::array<uint8_t, 32> rx{}, tx{};  // server: tx = first half (s2c), rx = second half (c2s)
  if (crypto_kx_server_session_keys(rx.data(), tx.data(), server.public_key.data(), server.secret_key.data(),
                                    client_public.data()) != 0) {
    return false;
  }
  bind_keys(tx.data(), rx.data(), binding, out);
  sodium_memzero(rx.data(), rx.size());
  sodium_memzero(tx.data(), tx.size());
  return true;
}

bool is_sealed(std::span<const uint8_t> datagram) {
  return datagram.size() >= kSealOverheadBytes && std::memcmp(datagram.data(), kSealMagic.data(), 4) == 0;
}

std::optional<uint32_t> sealed_sequence(std::span<const uint8_t> datagram) {
  if (!is_sealed(datagram)) return std::nullopt;
  return load_u32(datagram.data() + 4);
}

std::array<uint8_t, 12> packet_nonce(uint32_t sequence) {
  std::array<uint8_t, 12> nonce{};
  store_u32(nonce.data() + 4, sequence);  // bytes 4..11: the sequence as u64 LE (high half zero)
  return nonce;
}

size_t seal_packet(const PacketKey& key, uint32_t sequence, std::span<const uint8_t> plaintext,
                   std::span<uint8_t> out) {
  const size_t total = plaintext.size() + kSealOverheadBytes;
  if (sequence == 0 || out.size() < total || !init_packet_crypto()) return 0;
  uint8_t* p = out.data();
  std::memcpy(p, kSealMagic.data(), 4);
  store_u32(p + 4, sequence);
  const auto nonce = packet_nonce(sequence);
  unsigned long long sealed = 0;
  (void)crypto_aead_chacha20poly1305_ietf_encrypt(p + kSealPrefixBytes, &sealed, plaintext.data(), plaintext.size(),
                                                  p, kSealPrefixBytes, nullptr, nonce.data(), key.data());
  return total;
}

std::optional<size_t> open_packet(const PacketKey& key, std::span<const uint8_t> datagram, std::span<uint8_t> out) {
  const auto sequence = sealed_sequence(datagram);
  if (!sequence || *sequence == 0) return std::nullopt;
  const size_t plain = datagram.size() - kSealOverheadBytes;
  if (out.size() < plain || !init_packet_crypto()) return std::nullopt;
  const auto nonce = packet_nonce(*sequence);
  unsigned long long opened = 0;
  if (crypto_aead_chacha20poly1305_ietf_decrypt(out.data(), &opened, nullptr, datagram.data() + kSealPrefixBytes,
                                                datagram.size() - kSealPrefixBytes, datagram.data(), kSealPrefixBytes,
                                                nonce.data(), key.data()) != 0) {
    return std::nullopt;
  }
  return static_cast<size_t>(opened);
}

bool ReplayWindow::already_received(uint32_t sequence) const {
  if (sequence == 0) return true;
  if (static_cast<uint64_t>(sequence) + kReplayWindowSize <= newest_) return true;  // too old to tell
  return seen_[sequence & (kReplayWindowSize - 1)] == sequence;
}

void ReplayWindow::accept(uint32_t sequence) {
  if (sequence > newest_) newest_ = sequence;
  seen_[sequence & (kReplayWindowSize - 1)] = sequence;
}

OpenError open_session_packet(PacketProtection& p, std::span<const uint8_t> datagram, std::span<uint8_t> out,
                              size_t* plaintext_size, uint32_t* sequence) {
  if (!p.keyed) return OpenError::NotKeyed;
  const auto s = sealed_sequence(datagram);
  if (!s || *s == 0) return OpenError::Malformed;
  if (p.replay.already_received(*s)) return OpenError::Replayed;  // before any decryption
  const auto n = open_packet(p.receive_key, datagram, out);
  if (!n) return OpenError::Forged;
  p.replay.accept(*s);
  *plaintext_size = *n;
  *sequence = *s;
  return OpenError::None;
}

}  // namespace impulse::net
