// Connection security primitives, pure (no sockets, no clock reads, no logging): the stateless
// cookie of the Connect -> Challenge -> Connect round trip and the AEAD-sealed connect token, after
// netcode.io 1.0 (github.com/networkprotocol/netcode, STANDARD.md: "Challenge Token Structure",
// "Connect Token Structure", and rule 4 of "Server-Side Connection Process": never answer an
// unvalidated address with more bytes than it sent). Built on libsodium 1.0.18; the byte layouts
// are specified in docs/PROTOCOL.md, "Connection security".
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <asio/ip/udp.hpp>

namespace impulse::server::security {

/// Initialises libsodium once per process (sodium_init() in a function-local static, so it is
/// thread-safe and cheap after the first call). Call it at start-up and refuse to start on
/// failure; every function below also calls it, but only this one can report the failure.
/// @param error  receives the reason on failure; may be null
/// @return false if libsodium could not initialise (e.g. no system entropy source)
bool init_crypto(std::string* error);

// ---- Stateless cookie ----------------------------------------------------------------------
// The server answers a Connect from an unvalidated address with a Challenge holding a cookie: a
// MAC over the address, port and time slot under a key that never leaves the process. It keeps
// no per-client state until a Connect echoes a cookie that verifies, which proves the sender
// receives datagrams at that address (so spoofed sources cannot fill the client table).
// Unlike netcode's encrypted challenge token, the cookie carries no secret, so a MAC suffices.

/// Size of the MAC key [bytes] (crypto_generichash_KEYBYTES, keyed BLAKE2b).
inline constexpr size_t kCookieKeyBytes = 32;
/// Size of the time slot field, a u64 little-endian [bytes].
inline constexpr size_t kCookieSlotBytes = 8;
/// Size of the MAC, keyed BLAKE2b with a 16-byte output (crypto_generichash_BYTES_MIN) [bytes].
inline constexpr size_t kCookieMacBytes = 16;
/// A cookie on the wire: time slot (u64 LE) then MAC [bytes].
inline constexpr size_t kCookieBytes = kCookieSlotBytes + kCookieMacBytes;
/// Default time slot length: a cookie is accepted in its slot and the next, so for 10-20 s.
inline constexpr std::chrono::seconds kCookieSlotLength{10};
/// Domain-separation prefix of the MAC input (16 ASCII bytes, no terminator).
inline constexpr std::string_view kCookieDomain = "impulse-cookie-1";

/// PeerAddress::family values (the IP version number).
inline constexpr uint8_t kFamilyIPv4 = 4;
inline constexpr uint8_t kFamilyIPv6 = 6;

/// The server's cookie MAC key. Random per server process (make_cookie_key); never sent or
/// stored, so restarting the server invalidates every outstanding cookie.
struct CookieKey {
  std::array<uint8_t, kCookieKeyBytes> bytes{};
};

/// A fresh random cookie key (randombytes_buf, the OS CSPRNG).
CookieKey make_cookie_key();

/// A UDP peer as the cookie MAC sees it.
struct PeerAddress {
  std::array<uint8_t, 16> address{};  ///< IPv4: 4 bytes in network order then 12 zero bytes; IPv6: 16 bytes
  uint8_t family = 0;                 ///< kFamilyIPv4 or kFamilyIPv6
  uint16_t port = 0;                  ///< host order
  bool operator==(const PeerAddress&) const = default;
};

/// The cookie view of an endpoint. An IPv4-mapped IPv6 address (::ffff:a.b.c.d, as seen by a
/// dual-stack socket) becomes the plain IPv4 address, so one client gets one identity. The IPv6
/// scope id is not part of the identity.
PeerAddress to_peer_address(const asio::ip::udp::endpoint& endpoint);

/// The time slot of a moment: floor(since_start / slot_length). The caller chooses the epoch
/// (e.g. the server's start on the steady clock) and uses the same one for make and check.
/// @param since_start  time since the epoch; negative values give slot 0
/// @param slot_length  > 0; a non-positive length gives slot 0
uint64_t cookie_time_slot(std::chrono::nanoseconds since_start,
                          std::chrono::nanoseconds slot_length = kCookieSlotLength);

/// A cookie as sent in Challenge and echoed in the second Connect.
using Cookie = std::array<uint8_t, kCookieBytes>;

/// The cookie for `peer` in `time_slot`: slot (u64 LE) || BLAKE2b-128 keyed with `key` over
///   kCookieDomain (16) || family (1) || address (16) || port (u16 LE) || time_slot (u64 LE).
/// Deterministic: the same inputs give the same bytes. ~1 µs.
Cookie make_cookie(const CookieKey& key, const PeerAddress& peer, uint64_t time_slot);

/// Why a cookie was refused.
enum class CookieError : uint8_t {
  None,       ///< the cookie is valid
  Malformed,  ///< not exactly kCookieBytes
  Stale,      ///< made more than one slot ago, or for a future slot (another server, or forged)
  Forged,     ///< the MAC does not verify: another address/port/family, tampered, or another key
              ///< (e.g. the server restarted since the Challenge)
  Count,
};
/// A short lowercase description for logs, e.g. "stale cookie (older than one slot)".
const char* to_string(CookieError error);

/// Verifies a cookie made for `peer` in `now_slot` or the slot before it (valid for one to two
/// slot lengths). The MAC comparison is constant-time (crypto_verify_16). Never throws; any byte
/// string is safe to pass.
/// @param cookie  bytes from the network, any length
CookieError verify_cookie(const CookieKey& key, const PeerAddress& peer, std::span<const uint8_t> cookie,
                          uint64_t now_slot);

/// verify_cookie(...) == CookieError::None.
bool check_cookie(const CookieKey& key, const PeerAddress& peer, std::span<const uint8_t> cookie, uint64_t now_slot);

// ---- Connect tokens ------------------------------------------------------------------------
// A game's backend authenticates a player, seals the claims below with a key shared with its
// servers, and hands the token to the client, which presents it as opaque bytes in Connect.
// AEAD: XChaCha20-Poly1305 (IETF), whose 192-bit nonce makes random nonces safe (netcode uses a
// sequence-number nonce with 64-bit ChaCha20-Poly1305; a random nonce needs no issuer state).

/// Size of the token key [bytes] (crypto_aead_xchacha20poly1305_ietf_KEYBYTES).
inline constexpr size_t kTokenKeyBytes = 32;
/// Token format version, the token's first byte.
inline constexpr uint8_t kTokenVersion = 1;
/// Size of the key id [bytes]: names which key sealed a token, so a key mismatch can be told
/// apart from a forgery in the server's log (see token_key_id).
inline constexpr size_t kTokenKeyIdBytes = 4;
/// Size of the random nonce [bytes] (crypto_aead_xchacha20poly1305_ietf_NPUBBYTES).
inline constexpr size_t kTokenNonceBytes = 24;
/// Size of the serialised claims [bytes]: client_id u64, expires u64, max_objects u32, flags u32.
inline constexpr size_t kTokenClaimsBytes = 24;
/// Size of the Poly1305 tag [bytes] (crypto_aead_xchacha20poly1305_ietf_ABYTES).
inline constexpr size_t kTokenTagBytes = 16;
/// A token on the wire: version (1) || key id (4) || nonce (24) || sealed claims (24) || tag (16).
inline constexpr size_t kTokenBytes = 1 + kTokenKeyIdBytes + kTokenNonceBytes + kTokenClaimsBytes + kTokenTagBytes;
/// Associated data prefix (21 ASCII bytes, no terminator); the AD is this followed by the token's
/// first 1 + kTokenKeyIdBytes bytes (version and key id), so neither can be altered.
inline constexpr std::string_view kTokenDomain = "impulse connect token";

/// The key shared by the token issuer (backend, `impulse-server token`) and the servers.
struct TokenKey {
  std::array<uint8_t, kTokenKeyBytes> bytes{};
};

/// A fresh random token key (randombytes_buf).
TokenKey make_token_key();

/// The public id of a key: the first 4 bytes of BLAKE2b with a 16-byte output, keyed with the
/// token key, over the 20 ASCII bytes "impulse-token-key-id". Not secret; reveals nothing useful
/// about the key. Printed by keygen and the server as 8 hex digits.
using TokenKeyId = std::array<uint8_t, kTokenKeyIdBytes>;
TokenKeyId token_key_id(const TokenKey& key);

/// What a token grants. Serialised little-endian in this order (24 bytes), then a u32 of flags
/// that must be 0 (reserved; a token with unknown flags is refused as Malformed).
struct TokenClaims {
  uint64_t client_id = 0;       ///< the backend's player id; a reconnect with the same id replaces the session
  uint64_t expires_unix_s = 0;  ///< Unix time [s, UTC]; the token is refused when now > expires
  uint32_t max_objects = 0;     ///< live-object quota of this client; 0 = the server's default
  bool operator==(const TokenClaims&) const = default;
};

/// A token as carried by the client (hex-encoded on command lines: 2 * kTokenBytes characters).
using Token = std::array<uint8_t, kTokenBytes>;

/// Seals `claims` with `key` and a fresh random nonce (two calls give different tokens).
Token seal_token(const TokenKey& key, const TokenClaims& claims);

/// Why a token was refused. Forged and WrongKey both mean "does not authenticate".
enum class TokenError : uint8_t {
  None,
  Malformed,  ///< wrong size, unknown version, or unknown flags
  Forged,     ///< the AEAD tag fails: tampered, corrupted, or sealed with another key that claims this key's id
  Expired,    ///< authentic, but now > expires_unix_s
  WrongKey,   ///< the key id is another key's: the issuer and this server use different key files (or forged)
  Count,
};
/// A one-line reason for logs that an operator can act on, e.g. for WrongKey "token does not
/// authenticate: sealed with another key (key id differs; check the issuer's key file matches
/// --token-key), or forged".
const char* to_string(TokenError error);

/// Opens a token from the network. Checks, in order: size and version (Malformed), key id
/// (WrongKey), AEAD tag (Forged), flags (Malformed), expiry (Expired). Never throws.
/// @param token       bytes from the network, any length
/// @param now_unix_s  the current Unix time [s], passed in (never read here)
/// @param claims      filled when the token authenticates (None or Expired, so the log can name
///                    the client), untouched otherwise; may be null
TokenError open_token(const TokenKey& key, std::span<const uint8_t> token, uint64_t now_unix_s, TokenClaims* claims);

// ---- Binding the session to the token ---------------------------------------------------------
// netcode.io's connect token carries the session's packet keys for the client. Impulse's token
// stays opaque to the client; instead the issuer hands the client a session secret with it, which
// anyone with the token key recomputes from the token, and both sides mix it into the packet
// keys (shared/net/packet_crypto.h). Someone who saw the token on the wire but not the secret
// cannot derive the keys, even by replacing the key shares of the handshake.

/// Size of a token's session secret [bytes].
inline constexpr size_t kTokenSecretBytes = 32;
/// Domain-separation message prefix of the session secret (20 ASCII bytes, no terminator).
inline constexpr std::string_view kTokenSecretDomain = "impulse-token-secret";

/// The session secret of `token`: BLAKE2b with a 32-byte output, keyed with the token key, over
/// kTokenSecretDomain (20) || the token's bytes (as sent in Connect.token).
std::array<uint8_t, kTokenSecretBytes> token_session_secret(const TokenKey& key, std::span<const uint8_t> token);

/// What the issuer hands a client: the token followed by its session secret
/// (kTokenBytes + kTokenSecretBytes = 101 bytes). The client sends all but the last 32 bytes as
/// Connect.token and keeps the secret (impulse::ConnectParams::token).
std::vector<uint8_t> issue_client_token(const TokenKey& key, const TokenClaims& claims);

// ---- Key files -----------------------------------------------------------------------------
// Format: one line of 64 hex characters (the 32 key bytes, lowercase when written; uppercase is
// accepted) ending in a newline. Lines whose first non-blank character is '#' and blank lines
// are ignored; anything else is an error naming the line.

/// Largest key file read [bytes]; anything bigger is not a key file.
inline constexpr size_t kMaxKeyFileBytes = 64 * 1024;

/// Parses key file text (what load_token_key reads). Errors name the 1-based line, e.g.
/// "line 3: expected 64 hex characters (a 32-byte key), got 40".
bool parse_token_key(std::string_view text, TokenKey* key, std::string* error);

/// The text write_token_key writes: comment lines (what the file is, its key id) and the key line.
std::string format_token_key(const TokenKey& key);

/// Reads a key file. A file that group or others may access is loaded anyway (secrets mounted
/// by container orchestrators are often 0644) but `warning` says so and how to fix it.
/// @param error    on failure: the path, what is wrong and what to do; may be null
/// @param warning  set to a non-empty message when the file's mode allows group/other access,
///                 cleared otherwise; may be null
bool load_token_key(const std::string& path, TokenKey* key, std::string* error, std::string* warning = nullptr);

/// Writes a key file with mode 0600 (whatever the umask). Without `overwrite` an existing file
/// is left alone and reported (O_EXCL, so there is no race); with it the file is replaced
/// atomically (temporary file in the same directory, fsync, rename).
bool write_token_key(const std::string& path, const TokenKey& key, std::string* error, bool overwrite = false);

/// Key shares (`Connect.kx_public`, 32 bytes) that made a session, remembered for as long as
/// the cookie that let them in can still verify (two slots: 20 s by default). A client makes a
/// fresh key pair for each connect attempt, so a Connect that carries a remembered share once
/// its session is gone (or from another address) is a replay of a captured datagram: the server
/// drops it unanswered, and it creates nothing. Bounded: at `capacity` the oldest share is
/// forgotten first (a replay of it would then make an unconfirmed session, which gets no
/// snapshots and ends after 2 s). Memory: about 120 bytes per share (a map node and a queue entry).
class SpentKeyShares {
 public:
  using Share = std::array<uint8_t, 32>;
  using TimePoint = std::chrono::steady_clock::time_point;
  SpentKeyShares(std::chrono::nanoseconds lifetime, size_t capacity) : lifetime_(lifetime), capacity_(capacity) {}

  /// Whether `share` made a session within the lifetime before `now`.
  bool contains(const Share& share, TimePoint now);
  /// Remembers `share` as spent at `now` (again: its time is refreshed).
  void add(const Share& share, TimePoint now);
  size_t size() const { return spent_.size(); }

 private:
  void expire(TimePoint now);
  std::chrono::nanoseconds lifetime_;
  size_t capacity_;
  std::map<Share, TimePoint> spent_;               // share -> when it was spent (ordered: no hash order)
  std::deque<std::pair<TimePoint, Share>> order_;  // oldest first; may hold refreshed duplicates
};

}  // namespace impulse::server::security
