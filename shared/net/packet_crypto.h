// Packet authentication after the handshake, after netcode.io 1.0 (STANDARD.md, "Encrypted
// Packets" and "Replay Protection"): every datagram of a session is sealed with
// ChaCha20-Poly1305-IETF under a per-session, per-direction key; the nonce is the packet sequence;
// a 256-entry replay window drops duplicates before they are decrypted. Keys come from an X25519
// exchange in the handshake (libsodium crypto_kx), mixed with a binding secret (the connect token's
// session secret, or zeros when anonymous). Pure functions: no sockets, no clock, no logging.
// Byte layouts and test vectors: docs/PROTOCOL.md, "Sealed packets". Internal to the library: the
// client's public headers never include this (they must not need libsodium).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace impulse::net {

/// X25519 public and secret key sizes [bytes] (crypto_kx_PUBLICKEYBYTES / SECRETKEYBYTES).
inline constexpr size_t kKxPublicKeyBytes = 32;
inline constexpr size_t kKxSecretKeyBytes = 32;
/// A packet key [bytes] (crypto_aead_chacha20poly1305_ietf_KEYBYTES).
inline constexpr size_t kPacketKeyBytes = 32;
/// The binding secret mixed into both packet keys [bytes]: the connect token's session secret,
/// or all zeros for an anonymous session.
inline constexpr size_t kBindingSecretBytes = 32;
/// Sealed layout: magic "IMPS" (4) || sequence u32 LE (4) || ciphertext || Poly1305 tag (16).
inline constexpr size_t kSealPrefixBytes = 8;
inline constexpr size_t kSealTagBytes = 16;
/// Bytes a seal adds to a plaintext datagram [bytes].
inline constexpr size_t kSealOverheadBytes = kSealPrefixBytes + kSealTagBytes;
/// First four bytes of a sealed datagram. As a plaintext's root offset (u32 LE, 0x53504D49) it
/// would point far past any datagram, so a sealed datagram is never taken for a FlatBuffer.
inline constexpr std::array<uint8_t, 4> kSealMagic = {'I', 'M', 'P', 'S'};
/// Entries of the replay window (netcode.io's NETCODE_REPLAY_PROTECTION_BUFFER_SIZE).
inline constexpr uint32_t kReplayWindowSize = 256;
/// Domain-separation prefixes of the key derivation (16 ASCII bytes each, no terminator).
inline constexpr std::string_view kClientToServerKeyDomain = "impulse-c2s-key5";
inline constexpr std::string_view kServerToClientKeyDomain = "impulse-s2c-key5";

using KxPublicKey = std::array<uint8_t, kKxPublicKeyBytes>;
using PacketKey = std::array<uint8_t, kPacketKeyBytes>;
using BindingSecret = std::array<uint8_t, kBindingSecretBytes>;

/// An X25519 key pair for one handshake. The secret key is wiped by the destructor.
struct KxKeyPair {
  KxPublicKey public_key{};
  std::array<uint8_t, kKxSecretKeyBytes> secret_key{};
  ~KxKeyPair();
};

/// Initialises libsodium once per process (thread-safe). False if it could not (no entropy).
bool init_packet_crypto();

/// A fresh random key pair (crypto_kx_keypair). False only if libsodium cannot initialise.
bool make_kx_keypair(KxKeyPair* out);
/// The key pair of a 32-byte seed (crypto_kx_seed_keypair): for test vectors.
bool kx_keypair_from_seed(std::span<const uint8_t, 32> seed, KxKeyPair* out);

/// The two packet keys of a session, one per direction.
struct SessionKeys {
  PacketKey client_to_server{};
  PacketKey server_to_client{};
  ~SessionKeys();
};

/// Derives the session's packet keys. The X25519 step is libsodium's crypto_kx (rx/tx =
/// BLAKE2b-512(q || client_pk || server_pk), split in halves: the first half is server->client,
/// the second client->server); each half is then keyed BLAKE2b-256 over its domain prefix and
/// `binding`: key = BLAKE2b(out 32, message = domain (16) || binding (32), key = half). Both sides
/// get the same keys. False when the peer's public key is unusable (a low-order point: crypto_kx
/// fails) or libsodium cannot initialise; *out is then untouched.
bool client_session_keys(const KxKeyPair& client, const KxPublicKey& server_public, const BindingSecret& binding,
                         SessionKeys* out);
bool server_session_keys(const KxKeyPair& server, const KxPublicKey& client_public, const BindingSecret& binding,
                         SessionKeys* out);

/// True if `datagram` has the sealed layout's magic and room for a prefix and a tag; says
/// nothing about its authenticity.
bool is_sealed(std::span<const uint8_t> datagram);
/// The sequence in a sealed datagram's prefix (nullopt unless is_sealed); not authenticated yet.
std::optional<uint32_t> sealed_sequence(std::span<const uint8_t> datagram);

/// The 12-byte nonce of `sequence`: four zero bytes, then the sequence as a u64 LE.
std::array<uint8_t, 12> packet_nonce(uint32_t sequence);

/// Seals `plaintext` as packet `sequence` (>= 1) into `out`: prefix, ciphertext, tag; the
/// associated data is the 8-byte prefix. Returns the sealed size (plaintext + kSealOverheadBytes),
/// or 0 when `out` is too small or sequence is 0. `out` must not overlap `plaintext`.
size_t seal_packet(const PacketKey& key, uint32_t sequence, std::span<const uint8_t> plaintext,
                   std::span<uint8_t> out);

/// Opens a sealed datagram into `out` (at least datagram.size() - kSealOverheadBytes bytes, must
/// not overlap). Returns the plaintext size, or nullopt when the layout is wrong, the sequence is
/// 0, or the tag does not verify (forged, corrupted, another key); `out` is then unspecified.
std::optional<size_t> open_packet(const PacketKey& key, std::span<const uint8_t> datagram, std::span<uint8_t> out);

/// Which sequences of a peer were already accepted, netcode.io style: a sequence is refused when
/// it was seen, or when it is kReplayWindowSize or more below the newest one accepted. Check
/// with already_received() before decrypting; record with accept() only after the tag verified,
/// so forgeries cannot move the window. 1 KiB, no allocation.
class ReplayWindow {
 public:
  /// True for 0, a sequence already accepted, or one too old to tell.
  bool already_received(uint32_t sequence) const;
  /// Records an authenticated sequence.
  void accept(uint32_t sequence);
  /// The newest sequence accepted; 0 before any.
  uint32_t newest() const { return newest_; }

 private:
  std::array<uint32_t, kReplayWindowSize> seen_{};  // slot sequence % size holds that sequence; 0 = empty
  uint32_t newest_ = 0;
};

/// The server side of a session's packet protection (the client's is the mirror image).
struct PacketProtection {
  PacketKey send_key{};
  PacketKey receive_key{};
  ReplayWindow replay;
  bool keyed = false;  ///< false: nothing can be sealed or opened (keys not derived)
};

/// Why open_session_packet refused a datagram (counted by the receiver).
enum class OpenError : uint8_t { None, NotKeyed, Malformed, Replayed, Forged };

/// Replay check, then open, then record the sequence: the full receive path of a sealed datagram.
/// On None, *plaintext_size and *sequence are set and `out` holds the plaintext.
OpenError open_session_packet(PacketProtection& p, std::span<const uint8_t> datagram, std::span<uint8_t> out,
                              size_t* plaintext_size, uint32_t* sequence);

}  // namespace impulse::net
