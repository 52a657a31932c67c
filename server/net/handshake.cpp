// Stateless cookies (keyed BLAKE2b MAC over address, port and time slot) and XChaCha20-Poly1305
// connect tokens, after netcode.io 1.0 STANDARD.md (challenge and connect tokens), on libsodium.
#include "server/net/handshake.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <sodium.h>

#include "shared/hex.h"

namespace impulse::server::security {

static_assert(kCookieKeyBytes == crypto_generichash_KEYBYTES);
static_assert(kCookieMacBytes == crypto_generichash_BYTES_MIN);
static_assert(kCookieMacBytes == 16, "verify_cookie compares with crypto_verify_16");
static_assert(kCookieDomain.size() == 16);
static_assert(kTokenKeyBytes == crypto_aead_xchacha20poly1305_ietf_KEYBYTES);
static_assert(kTokenNonceBytes == crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
static_assert(kTokenTagBytes == crypto_aead_xchacha20poly1305_ietf_ABYTES);
static_assert(kTokenBytes == 69);

namespace {

// ---- Byte layout helpers (little-endian, independent of the host) ---------------------------

void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void store_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t load_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// ---- Cookie ---------------------------------------------------------------------------------

constexpr size_t kCookieMessageBytes = 16 + 1 + 16 + 2 + 8;  // domain, family, address, port, slot

std::array<uint8_t, kCookieMacBytes> compute_cookie_mac(const CookieKey& key, const PeerAddress& peer,
                                                        uint64_t time_slot) {
  std::array<uint8_t, kCookieMessageBytes> message{};
  uint8_t* p = message.data();
  std::memcpy(p, kCookieDomain.data(), kCookieDomain.size());
  p += kCookieDomain.size();
  *p++ = peer.family;
  std::memcpy(p, peer.address.data(), peer.address.size());
  p += peer.address.size();
  store_u16(p, peer.port);
  p += 2;
  store_u64(p, time_slot);

  std::array<uint8_t, kCookieMacBytes> mac{};
  // Cannot fail for these sizes (outlen in [BYTES_MIN, BYTES_MAX], keylen <= KEYBYTES_MAX).
  (void)crypto_generichash(mac.data(), mac.size(), message.data(), message.size(), key.bytes.data(),
                           key.bytes.size());
  return mac;
}

// ---- Token ----------------------------------------------------------------------------------

constexpr size_t kTokenHeaderBytes = 1 + kTokenKeyIdBytes;  // version, key id: authenticated as AD
constexpr size_t kTokenNonceOffset = kTokenHeaderBytes;
constexpr size_t kTokenSealedOffset = kTokenNonceOffset + kTokenNonceBytes;
constexpr size_t kTokenAdBytes = kTokenDomain.size() + kTokenHeaderBytes;
constexpr std::string_view kTokenKeyIdMessage = "impulse-token-key-id";

std::array<uint8_t, kTokenAdBytes> token_associated_data(std::span<const uint8_t> header) {
  std::array<uint8_t, kTokenAdBytes> ad{};
  std::memcpy(ad.data(), kTokenDomain.data(), kTokenDomain.size());
  std::memcpy(ad.data() + kTokenDomain.size(), header.data(), kTokenHeaderBytes);
  return ad;
}

// ---- Files ----------------------------------------------------------------------------------

/// Closes a POSIX file descriptor on scope exit.
struct FdCloser {
  int fd = -1;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

void set_text(std::string* out, std::string text) {
  if (out) *out = std::move(text);
}

}  // namespace

bool init_crypto(std::string* error) {
  // sodium_init: 0 = initialised now, 1 = already initialised, -1 = failure. Magic statics make
  // the first call thread-safe; later calls only read the cached result.
  static const int result = sodium_init();
  if (result < 0) {
    set_text(error, "libsodium failed to initialise (sodium_init() < 0): no usable entropy source? "
                    "Check that /dev/urandom or getrandom() is available to the process");
    return false;
  }
  return true;
}

// ---- Cookie ---------------------------------------------------------------------------------

CookieKey make_cookie_key() {
  (void)init_crypto(nullptr);  // failure is reported by the start-up call (see the header)
  CookieKey key;
  randombytes_buf(key.bytes.data(), key.bytes.size());
  return key;
}

PeerAddress to_peer_address(const asio::ip::udp::endpoint& endpoint) {
  PeerAddress peer;
  peer.port = endpoint.port();
  asio::ip::address address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  if (address.is_v4()) {
    const auto bytes = address.to_v4().to_bytes();
    std::memcpy(peer.address.data(), bytes.data(), bytes.size());
    peer.family = kFamilyIPv4;
  } else {
    const auto bytes = address.to_v6().to_bytes();
    std::memcpy(peer.address.data(), bytes.data(), bytes.size());
    peer.family = kFamilyIPv6;
  }
  return peer;
}

uint64_t cookie_time_slot(std::chrono::nanoseconds since_start, std::chrono::nanoseconds slot_length) {
  if (since_start.count() <= 0 || slot_length.count() <= 0) return 0;
  return static_cast<uint64_t>(since_start.count() / slot_length.count());
}

Cookie make_cookie(const CookieKey& key, const PeerAddress& peer, uint64_t time_slot) {
  Cookie cookie{};
  store_u64(cookie.data(), time_slot);
  const auto mac = compute_cookie_mac(key, peer, time_slot);
  std::memcpy(cookie.data() + kCookieSlotBytes, mac.data(), mac.size());
  return cookie;
}

const char* to_string(CookieError error) {
  switch (error) {
    case CookieError::None: return "valid cookie";
    case CookieError::Malformed: return "malformed cookie (wrong size)";
    case CookieError::Stale: return "stale cookie (older than one time slot, or from the future)";
    case CookieError::Forged: return "cookie does not verify (another address, tampered, or made before a server restart)";
    case CookieError::Count: break;
  }
  return "unknown cookie error";
}

CookieError verify_cookie(const CookieKey& key, const PeerAddress& peer, std::span<const uint8_t> cookie,
                          uint64_t now_slot) {
  if (cookie.size() != kCookieBytes) return CookieError::Malformed;
  const uint64_t slot = load_u64(cookie.data());
  // Current or previous slot only; written so that now_slot == 0 cannot wrap around.
  if (slot != now_slot && !(now_slot > 0 && slot == now_slot - 1)) return CookieError::Stale;
  const auto mac = compute_cookie_mac(key, peer, slot);
  if (crypto_verify_16(mac.data(), cookie.data() + kCookieSlotBytes) != 0) return CookieError::Forged;
  return CookieError::None;
}

bool check_cookie(const CookieKey& key, const PeerAddress& peer, std::span<const uint8_t> cookie, uint64_t now_slot) {
  return verify_cookie(key, peer, cookie, now_slot) == CookieError::None;
}

// ---- Token ----------------------------------------------------------------------------------

TokenKey make_token_key() {
  (void)init_crypto(nullptr);
  TokenKey key;
  randombytes_buf(key.bytes.data(), key.bytes.size());
  return key;
}

TokenKeyId token_key_id(const TokenKey& key) {
  std::array<uint8_t, crypto_generichash_BYTES_MIN> digest{};
  (void)crypto_generichash(digest.data(), digest.size(), reinterpret_cast<const uint8_t*>(kTokenKeyIdMessage.data()),
                           kTokenKeyIdMessage.size(), key.bytes.data(), key.bytes.size());
  TokenKeyId id{};
  std::memcpy(id.data(), digest.data(), id.size());
  return id;
}

Token seal_token(const TokenKey& key, const TokenClaims& claims) {
  (void)init_crypto(nullptr);
  Token token{};
  token[0] = kTokenVersion;
  const TokenKeyId id = token_key_id(key);
  std::memcpy(token.data() + 1, id.data(), id.size());
  randombytes_buf(token.data() + kTokenNonceOffset, kTokenNonceBytes);

  std::array<uint8_t, kTokenClaimsBytes> plain{};
  store_u64(plain.data(), claims.client_id);
  store_u64(plain.data() + 8, claims.expires_unix_s);
  store_u32(plain.data() + 16, claims.max_objects);
  store_u32(plain.data() + 20, 0);  // flags: none defined

  const auto ad = token_associated_data(std::span<const uint8_t>(token).first(kTokenHeaderBytes));
  unsigned long long sealed_bytes = 0;
  // Cannot fail for these sizes; writes ciphertext || tag, exactly kTokenClaimsBytes + kTokenTagBytes.
  (void)crypto_aead_xchacha20poly1305_ietf_encrypt(token.data() + kTokenSealedOffset, &sealed_bytes, plain.data(),
                                                   plain.size(), ad.data(), ad.size(), nullptr,
                                                   token.data() + kTokenNonceOffset, key.bytes.data());
  sodium_memzero(plain.data(), plain.size());
  return token;
}

const char* to_string(TokenError error) {
  switch (error) {
    case TokenError::None: return "valid token";
    case TokenError::Malformed: return "malformed token (wrong size, unknown version or unknown flags)";
    case TokenError::Forged:
      return "token does not authenticate: forged or corrupted (its key id matches this server's key)";
    case TokenError::Expired: return "token expired";
    case TokenError::WrongKey:
      return "token does not authenticate: sealed with another key (key id differs; check that the issuer's "
             "key file is the server's --token-key file), or forged";
    case TokenError::Count: break;
  }
  return "unknown token error";
}

TokenError open_token(const TokenKey& key, std::span<const uint8_t> token, uint64_t now_unix_s, TokenClaims* claims) {
  if (token.size() != kTokenBytes || token[0] != kTokenVersion) return TokenError::Malformed;
  const TokenKeyId id = token_key_id(key);
  if (std::memcmp(token.data() + 1, id.data(), id.size()) != 0) return TokenError::WrongKey;

  (void)init_crypto(nullptr);
  const auto ad = token_associated_data(token.first(kTokenHeaderBytes));
  std::array<uint8_t, kTokenClaimsBytes> plain{};
  unsigned long long plain_bytes = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain.data(), &plain_bytes, nullptr, token.data() + kTokenSealedOffset,
                                                 kTokenClaimsBytes + kTokenTagBytes, ad.data(), ad.size(),
                                                 token.data() + kTokenNonceOffset, key.bytes.data()) != 0) {
    return TokenError::Forged;
  }
  if (load_u32(plain.data() + 20) != 0) return TokenError::Malformed;  // flags from a newer issuer

  TokenClaims opened;
  opened.client_id = load_u64(plain.data());
  opened.expires_unix_s = load_u64(plain.data() + 8);
  opened.max_objects = load_u32(plain.data() + 16);
  if (claims) *claims = opened;
  return now_unix_s > opened.expires_unix_s ? TokenError::Expired : TokenError::None;
}

std::array<uint8_t, kTokenSecretBytes> token_session_secret(const TokenKey& key, std::span<const uint8_t> token) {
  (void)init_crypto(nullptr);
  std::vector<uint8_t> message(kTokenSecretDomain.size() + token.size());
  std::memcpy(message.data(), kTokenSecretDomain.data(), kTokenSecretDomain.size());
  if (!token.empty()) std::memcpy(message.data() + kTokenSecretDomain.size(), token.data(), token.size());
  std::array<uint8_t, kTokenSecretBytes> secret{};
  (void)crypto_generichash(secret.data(), secret.size(), message.data(), message.size(), key.bytes.data(),
                           key.bytes.size());
  return secret;
}

std::vector<uint8_t> issue_client_token(const TokenKey& key, const TokenClaims& claims) {
  const Token token = seal_token(key, claims);
  const auto secret = token_session_secret(key, token);
  std::vector<uint8_t> bundle(kTokenBytes + kTokenSecretBytes);
  std::memcpy(bundle.data(), token.data(), kTokenBytes);
  std::memcpy(bundle.data() + kTokenBytes, secret.data(), kTokenSecretBytes);
  return bundle;
}

// ---- Key files -----------------------------------------------------------------------------

bool parse_token_key(std::string_view text, TokenKey* key, std::string* error) {
  TokenKey parsed;
  size_t key_line = 0;  // 1-based line of the key, 0 = none yet
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++line_number;

    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    if (key_line != 0) {
      set_text(error, fmt::format("line {}: unexpected data after the key on line {} (a key file holds one key "
                                  "line; comments start with '#')",
                                  line_number, key_line));
      return false;
    }
    if (line.size() != 2 * kTokenKeyBytes) {
      set_text(error, fmt::format("line {}: expected {} hex characters (a {}-byte key), got {} characters",
                                  line_number, 2 * kTokenKeyBytes, kTokenKeyBytes, line.size()));
      return false;
    }
    for (size_t i = 0; i < line.size(); ++i) {
      if (hex_digit_value(line[i]) < 0) {
        set_text(error, fmt::format("line {}: character {} is not a hex digit (0-9, a-f)", line_number, i + 1));
        return false;
      }
    }
    (void)from_hex(line, std::span<uint8_t>(parsed.bytes));
    key_line = line_number;
  }
  if (key_line == 0) {
    set_text(error, fmt::format("no key line: expected one line of {} hex characters", 2 * kTokenKeyBytes));
    return false;
  }
  if (key) *key = parsed;
  sodium_memzero(parsed.bytes.data(), parsed.bytes.size());
  return true;
}

std::string format_token_key(const TokenKey& key) {
  return fmt::format(
      "# Impulse connect-token key: 32 bytes as 64 hex digits (XChaCha20-Poly1305, docs/PROTOCOL.md).\n"
      "# Secret: whoever can read this file can issue tokens. Keep it mode 0600.\n"
      "# key id {}\n"
      "{}\n",
      to_hex(token_key_id(key)), to_hex(key.bytes));
}

bool load_token_key(const std::string& path, TokenKey* key, std::string* error, std::string* warning) {
  if (warning) warning->clear();
  const std::string fix = fmt::format("create one with `impulse-server keygen --out {}`", path);
  FdCloser file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    set_text(error, fmt::format("cannot open token key file {}: {}; {}, or pass the path of your backend's key file",
                                path, std::strerror(errno), fix));
    return false;
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) {
    set_text(error, fmt::format("cannot stat token key file {}: {}", path, std::strerror(errno)));
    return false;
  }
  if (!S_ISREG(info.st_mode)) {
    set_text(error, fmt::format("token key file {} is not a regular file; {}", path, fix));
    return false;
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxKeyFileBytes) {
    set_text(error, fmt::format("token key file {} is {} bytes, more than a key file can be ({} at most); {}", path,
                                info.st_size, kMaxKeyFileBytes, fix));
    return false;
  }

  std::vector<char> text(kMaxKeyFileBytes + 1);
  size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(file.fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      set_text(error, fmt::format("cannot read token key file {}: {}", path, std::strerror(errno)));
      sodium_memzero(text.data(), text.size());
      return false;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  std::string parse_error;
  const bool ok = used <= kMaxKeyFileBytes && parse_token_key(std::string_view(text.data(), used), key, &parse_error);
  sodium_memzero(text.data(), text.size());
  if (!ok) {
    if (parse_error.empty()) parse_error = fmt::format("more than {} bytes", kMaxKeyFileBytes);
    set_text(error, fmt::format("token key file {}: {}; {}", path, parse_error, fix));
    return false;
  }

  const unsigned mode = static_cast<unsigned>(info.st_mode) & 0777u;
  if ((mode & 077u) != 0 && warning) {
    const char* who = (mode & 007u) == 0 ? "its group" : ((mode & 070u) == 0 ? "other users" : "its group and other users");
    *warning = fmt::format("token key file {} has mode {:04o}: {} may access it, and whoever can read it can issue "
                           "tokens; run `chmod 600 {}` (loaded anyway)",
                           path, mode, who, path);
  }
  return true;
}

bool write_token_key(const std::string& path, const TokenKey& key, std::string* error, bool overwrite) {
  std::string text = format_token_key(key);
  auto fail = [&](std::string message) {
    sodium_memzero(text.data(), text.size());
    set_text(error, std::move(message));
    return false;
  };

  if (!overwrite) {
    // O_EXCL: never replaces a file, even one created between a check and the open.
    FdCloser file{::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
    if (file.fd < 0) {
      if (errno == EEXIST) return fail(fmt::format("{} already exists; not overwritten", path));
      return fail(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    }
    // fchmod: the umask may have removed bits from 0600; the file must be exactly owner read/write.
    if (::fchmod(file.fd, 0600) != 0 || !write_all(file.fd, text) || ::fsync(file.fd) != 0) {
      const std::string reason = std::strerror(errno);
      ::unlink(path.c_str());
      return fail(fmt::format("cannot write {}: {}", path, reason));
    }
    sodium_memzero(text.data(), text.size());
    return true;
  }

  // Replace atomically: readers see the old key or the new one, never a partial file.
  std::string temp_path = path + ".tmp-XXXXXX";
  FdCloser file{::mkstemp(temp_path.data())};  // creates with mode 0600
  if (file.fd < 0) return fail(fmt::format("cannot create a temporary file next to {}: {}", path, std::strerror(errno)));
  if (::fchmod(file.fd, 0600) != 0 || !write_all(file.fd, text) || ::fsync(file.fd) != 0 ||
      ::rename(temp_path.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp_path.c_str());
    return fail(fmt::format("cannot write {}: {}", path, reason));
  }
  sodium_memzero(text.data(), text.size());
  return true;
}

// --- Spent key shares ---------------------------------------------------------------------------

void SpentKeyShares::expire(TimePoint now) {
  while (!order_.empty() && (now - order_.front().first >= lifetime_ || spent_.size() > capacity_)) {
    const auto it = spent_.find(order_.front().second);
    // Only the share's latest entry removes it (an earlier one was refreshed by add()).
    if (it != spent_.end() && it->second == order_.front().first) spent_.erase(it);
    order_.pop_front();
  }
}

bool SpentKeyShares::contains(const Share& share, TimePoint now) {
  expire(now);
  return spent_.count(share) != 0;
}

void SpentKeyShares::add(const Share& share, TimePoint now) {
  if (capacity_ == 0) return;
  spent_[share] = now;
  order_.emplace_back(now, share);
  expire(now);
}

}  // namespace impulse::server::security
