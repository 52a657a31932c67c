// Connection security primitives: stateless cookies (address binding, time slots, tamper and
// length rejection), connect tokens (round trip, expiry, every bit flip, wrong key), key files,
// and conformance with the byte layouts in docs/PROTOCOL.md rebuilt from raw libsodium calls, as
// a backend in another language would.
#include <gtest/gtest.h>

#include <sodium.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "server/net/handshake.h"
#include "shared/hex.h"

namespace impulse::server::security {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

PeerAddress ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port) {
  return to_peer_address(asio::ip::udp::endpoint(asio::ip::make_address_v4(asio::ip::address_v4::bytes_type{a, b, c, d}), port));
}

PeerAddress ipv6(const char* text, uint16_t port) {
  return to_peer_address(asio::ip::udp::endpoint(asio::ip::make_address(text), port));
}

std::vector<uint8_t> bytes_of(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

void store_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(init_crypto(&error)) << error;
  }
};

// ---- Cookie ---------------------------------------------------------------------------------

TEST_F(SecurityTest, InitCryptoIsIdempotent) {
  std::string error;
  EXPECT_TRUE(init_crypto(&error));
  EXPECT_TRUE(init_crypto(nullptr));
  EXPECT_TRUE(error.empty());
}

TEST_F(SecurityTest, PeerAddressOfEndpoints) {
  const PeerAddress v4 = ipv4(192, 168, 1, 20, 40000);
  EXPECT_EQ(v4.family, kFamilyIPv4);
  EXPECT_EQ(v4.port, 40000);
  EXPECT_EQ(v4.address[0], 192);
  EXPECT_EQ(v4.address[3], 20);
  for (size_t i = 4; i < v4.address.size(); ++i) EXPECT_EQ(v4.address[i], 0) << i;

  const PeerAddress v6 = ipv6("2001:db8::1", 7777);
  EXPECT_EQ(v6.family, kFamilyIPv6);
  EXPECT_EQ(v6.port, 7777);
  EXPECT_EQ(v6.address[0], 0x20);
  EXPECT_EQ(v6.address[1], 0x01);
  EXPECT_EQ(v6.address[15], 0x01);

  // A dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d: the same identity as plain IPv4.
  EXPECT_EQ(ipv6("::ffff:192.168.1.20", 40000), v4);
}

TEST_F(SecurityTest, CookieTimeSlot) {
  EXPECT_EQ(cookie_time_slot(seconds(0)), 0u);
  EXPECT_EQ(cookie_time_slot(milliseconds(9999)), 0u);
  EXPECT_EQ(cookie_time_slot(seconds(10)), 1u);
  EXPECT_EQ(cookie_time_slot(seconds(125)), 12u);
  EXPECT_EQ(cookie_time_slot(seconds(125), seconds(5)), 25u);
  EXPECT_EQ(cookie_time_slot(seconds(-3)), 0u);
  EXPECT_EQ(cookie_time_slot(seconds(100), seconds(0)), 0u);
}

TEST_F(SecurityTest, CookieAcceptedInItsSlotAndTheNext) {
  const CookieKey key = make_cookie_key();
  const PeerAddress peer = ipv4(10, 0, 0, 7, 50123);
  for (uint64_t slot : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, std::numeric_limits<uint64_t>::max() - 1}) {
    const Cookie cookie = make_cookie(key, peer, slot);
    EXPECT_EQ(bytes_of(cookie), bytes_of(make_cookie(key, peer, slot))) << "deterministic";
    EXPECT_EQ(verify_cookie(key, peer, cookie, slot), CookieError::None) << slot;
    EXPECT_TRUE(check_cookie(key, peer, cookie, slot + 1)) << slot;
    if (slot + 2 > slot) {
      EXPECT_EQ(verify_cookie(key, peer, cookie, slot + 2), CookieError::Stale) << slot;
    }
  }
}

TEST_F(SecurityTest, CookieRefusedWhenStaleOrFromTheFuture) {
  const CookieKey key = make_cookie_key();
  const PeerAddress peer = ipv4(10, 0, 0, 7, 50123);
  const Cookie cookie = make_cookie(key, peer, 100);
  for (uint64_t now : {uint64_t{102}, uint64_t{103}, uint64_t{1000}, std::numeric_limits<uint64_t>::max()}) {
    EXPECT_EQ(verify_cookie(key, peer, cookie, now), CookieError::Stale) << now;
  }
  for (uint64_t now : {uint64_t{0}, uint64_t{98}, uint64_t{99}}) {
    EXPECT_EQ(verify_cookie(key, peer, cookie, now), CookieError::Stale) << now;
  }
  // now_slot 0 must not wrap round to accept the largest slot as "the previous one".
  const Cookie wrapped = make_cookie(key, peer, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(verify_cookie(key, peer, wrapped, 0), CookieError::Stale);
}

TEST_F(SecurityTest, CookieBoundToAddressPortAndFamily) {
  const CookieKey key = make_cookie_key();
  const PeerAddress peer = ipv4(10, 0, 0, 7, 50123);
  const Cookie cookie = make_cookie(key, peer, 7);

  EXPECT_EQ(verify_cookie(key, ipv4(10, 0, 0, 8, 50123), cookie, 7), CookieError::Forged);
  EXPECT_EQ(verify_cookie(key, ipv4(11, 0, 0, 7, 50123), cookie, 7), CookieError::Forged);
  EXPECT_EQ(verify_cookie(key, ipv4(10, 0, 0, 7, 50124), cookie, 7), CookieError::Forged);
  EXPECT_EQ(verify_cookie(key, ipv4(10, 0, 0, 7, 0), cookie, 7), CookieError::Forged);
  // Every single byte of the address matters.
  for (size_t i = 0; i < 16; ++i) {
    PeerAddress other = peer;
    other.address[i] ^= 0x01;
    EXPECT_EQ(verify_cookie(key, other, cookie, 7), CookieError::Forged) << "address byte " << i;
  }
  // Same 16 address bytes and port, other family.
  PeerAddress other_family = peer;
  other_family.family = kFamilyIPv6;
  EXPECT_EQ(verify_cookie(key, other_family, cookie, 7), CookieError::Forged);

  const PeerAddress v6 = ipv6("2001:db8::7", 50123);
  const Cookie v6_cookie = make_cookie(key, v6, 7);
  EXPECT_EQ(verify_cookie(key, v6, v6_cookie, 7), CookieError::None);
  EXPECT_EQ(verify_cookie(key, ipv6("2001:db8::8", 50123), v6_cookie, 7), CookieError::Forged);
  EXPECT_EQ(verify_cookie(key, peer, v6_cookie, 7), CookieError::Forged);
}

TEST_F(SecurityTest, CookieRefusedAfterAnyBitFlip) {
  const CookieKey key = make_cookie_key();
  const PeerAddress peer = ipv6("fe80::1234", 4242);
  const uint64_t slot = 0x0102030405060708ull;
  const Cookie cookie = make_cookie(key, peer, slot);
  for (size_t bit = 0; bit < kCookieBytes * 8; ++bit) {
    Cookie flipped = cookie;
    flipped[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_FALSE(check_cookie(key, peer, flipped, slot)) << "bit " << bit;
    EXPECT_FALSE(check_cookie(key, peer, flipped, slot + 1)) << "bit " << bit;
  }
}

TEST_F(SecurityTest, CookieRefusedAtEveryWrongLength) {
  const CookieKey key = make_cookie_key();
  const PeerAddress peer = ipv4(127, 0, 0, 1, 9000);
  const Cookie cookie = make_cookie(key, peer, 3);
  std::vector<uint8_t> buffer(cookie.begin(), cookie.end());
  buffer.resize(kCookieBytes + 8, 0);
  for (size_t length = 0; length <= kCookieBytes + 8; ++length) {
    const auto view = std::span<const uint8_t>(buffer).first(length);
    const CookieError expected = length == kCookieBytes ? CookieError::None : CookieError::Malformed;
    EXPECT_EQ(verify_cookie(key, peer, view, 3), expected) << "length " << length;
  }
}

TEST_F(SecurityTest, CookieRefusedUnderAnotherKey) {
  const CookieKey key = make_cookie_key();
  const CookieKey other = make_cookie_key();
  ASSERT_NE(bytes_of(key.bytes), bytes_of(other.bytes));
  const PeerAddress peer = ipv4(127, 0, 0, 1, 9000);
  EXPECT_EQ(verify_cookie(other, peer, make_cookie(key, peer, 5), 5), CookieError::Forged);
}

TEST_F(SecurityTest, CookieMatchesTheDocumentedLayout) {
  // docs/PROTOCOL.md: cookie = slot u64 LE || BLAKE2b-128(key, "impulse-cookie-1" || family ||
  // address[16] || port u16 LE || slot u64 LE).
  CookieKey key;
  for (size_t i = 0; i < key.bytes.size(); ++i) key.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  const PeerAddress peer = ipv4(203, 0, 113, 9, 0xBEEF);
  const uint64_t slot = 0x1122334455667788ull;

  std::vector<uint8_t> message(std::begin("impulse-cookie-1"), std::end("impulse-cookie-1") - 1);
  message.push_back(4);
  const uint8_t address[16] = {203, 0, 113, 9};
  message.insert(message.end(), std::begin(address), std::end(address));
  message.push_back(0xEF);
  message.push_back(0xBE);
  uint8_t slot_le[8];
  store_le(slot_le, slot, 8);
  message.insert(message.end(), std::begin(slot_le), std::end(slot_le));
  ASSERT_EQ(message.size(), 43u);

  uint8_t mac[16];
  ASSERT_EQ(crypto_generichash(mac, sizeof mac, message.data(), message.size(), key.bytes.data(), key.bytes.size()), 0);
  std::vector<uint8_t> expected(std::begin(slot_le), std::end(slot_le));
  expected.insert(expected.end(), std::begin(mac), std::end(mac));
  EXPECT_EQ(bytes_of(make_cookie(key, peer, slot)), expected);
}

TEST_F(SecurityTest, CookieErrorNames) {
  for (uint8_t i = 0; i < static_cast<uint8_t>(CookieError::Count); ++i) {
    EXPECT_STRNE(to_string(static_cast<CookieError>(i)), "unknown cookie error") << int(i);
  }
}

// ---- Tokens ---------------------------------------------------------------------------------

constexpr uint64_t kNow = 1'700'000'000;

TEST_F(SecurityTest, TokenRoundTripPreservesClaimsExactly) {
  const TokenKey key = make_token_key();
  const TokenClaims cases[] = {
      {1, kNow + 60, 0},
      {0x0123456789ABCDEFull, kNow, 1000},
      {std::numeric_limits<uint64_t>::max(), std::numeric_limits<uint64_t>::max(), std::numeric_limits<uint32_t>::max()},
  };
  for (const TokenClaims& claims : cases) {
    const Token token = seal_token(key, claims);
    EXPECT_EQ(token[0], kTokenVersion);
    TokenClaims opened;
    ASSERT_EQ(open_token(key, token, kNow, &opened), TokenError::None) << claims.client_id;
    EXPECT_EQ(opened, claims);
    EXPECT_EQ(open_token(key, token, kNow, nullptr), TokenError::None);
  }
}

TEST_F(SecurityTest, TokenNoncesAreFresh) {
  const TokenKey key = make_token_key();
  const TokenClaims claims{42, kNow + 60, 10};
  const Token a = seal_token(key, claims);
  const Token b = seal_token(key, claims);
  EXPECT_NE(bytes_of(a), bytes_of(b)) << "a random nonce per token";
  EXPECT_EQ(open_token(key, a, kNow, nullptr), TokenError::None);
  EXPECT_EQ(open_token(key, b, kNow, nullptr), TokenError::None);
}

TEST_F(SecurityTest, TokenExpiresAfterItsExpiry) {
  const TokenKey key = make_token_key();
  const TokenClaims claims{42, kNow, 0};
  const Token token = seal_token(key, claims);
  EXPECT_EQ(open_token(key, token, kNow - 1000, nullptr), TokenError::None);
  EXPECT_EQ(open_token(key, token, kNow, nullptr), TokenError::None) << "valid up to and including its expiry";
  TokenClaims opened;
  EXPECT_EQ(open_token(key, token, kNow + 1, &opened), TokenError::Expired);
  EXPECT_EQ(opened, claims) << "an authentic expired token still names its client for the log";
  EXPECT_EQ(open_token(key, token, std::numeric_limits<uint64_t>::max(), nullptr), TokenError::Expired);
}

TEST_F(SecurityTest, TokenRefusedAfterEveryBitFlip) {
  const TokenKey key = make_token_key();
  const TokenClaims claims{7, kNow + 3600, 50};
  const Token token = seal_token(key, claims);
  for (size_t bit = 0; bit < kTokenBytes * 8; ++bit) {
    Token flipped = token;
    const size_t byte = bit / 8;
    flipped[byte] ^= static_cast<uint8_t>(1u << (bit % 8));
    TokenClaims opened{99, 99, 99};
    const TokenError error = open_token(key, flipped, kNow, &opened);
    const TokenError expected = byte == 0 ? TokenError::Malformed
                                : byte <= kTokenKeyIdBytes ? TokenError::WrongKey
                                                           : TokenError::Forged;
    EXPECT_EQ(error, expected) << "bit " << bit;
    EXPECT_EQ(opened, (TokenClaims{99, 99, 99})) << "claims untouched on refusal, bit " << bit;
  }
}

TEST_F(SecurityTest, TokenRefusedUnderAnotherKey) {
  const TokenKey key = make_token_key();
  const TokenKey other = make_token_key();
  const Token token = seal_token(other, {7, kNow + 60, 0});
  EXPECT_EQ(open_token(key, token, kNow, nullptr), TokenError::WrongKey);

  // Another key claiming this key's id (forged header) still fails the AEAD: Forged.
  Token spoofed = token;
  const TokenKeyId id = token_key_id(key);
  std::memcpy(spoofed.data() + 1, id.data(), id.size());
  EXPECT_EQ(open_token(key, spoofed, kNow, nullptr), TokenError::Forged);
  EXPECT_EQ(open_token(other, spoofed, kNow, nullptr), TokenError::WrongKey);
}

TEST_F(SecurityTest, TokenRefusedAtEveryWrongLength) {
  const TokenKey key = make_token_key();
  const Token token = seal_token(key, {7, kNow + 60, 0});
  std::vector<uint8_t> buffer(token.begin(), token.end());
  buffer.resize(kTokenBytes + 8, 0);
  for (size_t length = 0; length <= kTokenBytes + 8; ++length) {
    const auto view = std::span<const uint8_t>(buffer).first(length);
    const TokenError expected = length == kTokenBytes ? TokenError::None : TokenError::Malformed;
    EXPECT_EQ(open_token(key, view, kNow, nullptr), expected) << "length " << length;
  }
}

TEST_F(SecurityTest, TokenKeyIdIsStableAndDistinct) {
  const TokenKey a = make_token_key();
  const TokenKey b = make_token_key();
  EXPECT_EQ(bytes_of(token_key_id(a)), bytes_of(token_key_id(a)));
  EXPECT_NE(bytes_of(token_key_id(a)), bytes_of(token_key_id(b)));
}

TEST_F(SecurityTest, TokenErrorMessagesTellForgeryFromKeyMismatch) {
  for (uint8_t i = 0; i < static_cast<uint8_t>(TokenError::Count); ++i) {
    EXPECT_STRNE(to_string(static_cast<TokenError>(i)), "unknown token error") << int(i);
  }
  EXPECT_NE(std::string(to_string(TokenError::WrongKey)).find("another key"), std::string::npos);
  EXPECT_NE(std::string(to_string(TokenError::Forged)).find("forged"), std::string::npos);
  EXPECT_NE(std::string(to_string(TokenError::Expired)).find("expired"), std::string::npos);
}

/// Seals a token from docs/PROTOCOL.md alone, with raw libsodium calls: what a backend in
/// another language does.
std::vector<uint8_t> seal_by_the_spec(const uint8_t key[32], uint64_t client_id, uint64_t expires, uint32_t max_objects,
                                      uint32_t flags) {
  // key id: BLAKE2b, 16-byte output, keyed with the token key, over "impulse-token-key-id"; first 4 bytes.
  const char id_message[] = "impulse-token-key-id";
  uint8_t digest[16];
  EXPECT_EQ(crypto_generichash(digest, sizeof digest, reinterpret_cast<const uint8_t*>(id_message),
                               sizeof id_message - 1, key, 32),
            0);
  std::vector<uint8_t> token(69);
  token[0] = 1;
  std::memcpy(&token[1], digest, 4);
  randombytes_buf(&token[5], 24);

  uint8_t claims[24];
  store_le(claims, client_id, 8);
  store_le(claims + 8, expires, 8);
  store_le(claims + 16, max_objects, 4);
  store_le(claims + 20, flags, 4);

  std::vector<uint8_t> ad(std::begin("impulse connect token"), std::end("impulse connect token") - 1);
  ad.insert(ad.end(), token.begin(), token.begin() + 5);
  EXPECT_EQ(ad.size(), 26u);
  unsigned long long sealed = 0;
  EXPECT_EQ(crypto_aead_xchacha20poly1305_ietf_encrypt(&token[29], &sealed, claims, sizeof claims, ad.data(), ad.size(),
                                                       nullptr, &token[5], key),
            0);
  EXPECT_EQ(sealed, 40u);
  return token;
}

TEST_F(SecurityTest, TokenMatchesTheDocumentedLayout) {
  const TokenKey key = make_token_key();
  // A token sealed by the spec opens here...
  const std::vector<uint8_t> spec_token = seal_by_the_spec(key.bytes.data(), 31337, kNow + 10, 25, 0);
  TokenClaims opened;
  ASSERT_EQ(open_token(key, spec_token, kNow, &opened), TokenError::None);
  EXPECT_EQ(opened, (TokenClaims{31337, kNow + 10, 25}));

  // ...and a token sealed here opens by the spec.
  const Token token = seal_token(key, {0xA1B2C3D4E5F60718ull, kNow + 99, 7});
  std::vector<uint8_t> ad(std::begin("impulse connect token"), std::end("impulse connect token") - 1);
  ad.insert(ad.end(), token.begin(), token.begin() + 5);
  uint8_t plain[24];
  unsigned long long plain_bytes = 0;
  ASSERT_EQ(crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plain_bytes, nullptr, &token[29], 40, ad.data(),
                                                       ad.size(), &token[5], key.bytes.data()),
            0);
  ASSERT_EQ(plain_bytes, 24u);
  uint8_t expected[24];
  store_le(expected, 0xA1B2C3D4E5F60718ull, 8);
  store_le(expected + 8, kNow + 99, 8);
  store_le(expected + 16, 7, 4);
  store_le(expected + 20, 0, 4);
  EXPECT_EQ(std::memcmp(plain, expected, sizeof plain), 0);
}

TEST_F(SecurityTest, TokenWithUnknownFlagsIsMalformed) {
  const TokenKey key = make_token_key();
  const std::vector<uint8_t> token = seal_by_the_spec(key.bytes.data(), 1, kNow + 10, 0, 1);
  EXPECT_EQ(open_token(key, token, kNow, nullptr), TokenError::Malformed);
}

TEST_F(SecurityTest, PublishedTestVectors) {
  // The vectors in docs/PROTOCOL.md, "Test vectors"; computed there from the spec with raw
  // libsodium calls and a fixed nonce.
  TokenKey key;
  for (size_t i = 0; i < key.bytes.size(); ++i) key.bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(to_hex(token_key_id(key)), "ed26d63f");

  std::vector<uint8_t> token;
  ASSERT_TRUE(from_hex("01ed26d63f404142434445464748494a4b4c4d4e4f5051525354555657fe390570d0e079169f0bd4dbaf9c6592f6"
                       "baadc41359539acfa31cc0428d9795a317e24c3729a60c",
                       &token));
  TokenClaims claims;
  ASSERT_EQ(open_token(key, token, 1'700'003'600, &claims), TokenError::None);
  EXPECT_EQ(claims, (TokenClaims{42, 1'700'003'600, 100}));
  EXPECT_EQ(open_token(key, token, 1'700'003'601, nullptr), TokenError::Expired);

  CookieKey cookie_key;
  for (size_t i = 0; i < cookie_key.bytes.size(); ++i) cookie_key.bytes[i] = static_cast<uint8_t>(0x80 + i);
  const PeerAddress peer = ipv4(203, 0, 113, 9, 40000);
  EXPECT_EQ(to_hex(make_cookie(cookie_key, peer, 12345)), "393000000000000012607b223592426dd72c64809e9dd080");
}

// ---- Hex ------------------------------------------------------------------------------------

TEST(Hex, RoundTripAndRejection) {
  const std::vector<uint8_t> bytes{0x00, 0x0a, 0xff, 0x10, 0x7e};
  EXPECT_EQ(to_hex(bytes), "000aff107e");
  std::vector<uint8_t> decoded;
  ASSERT_TRUE(from_hex("000AFF107e", &decoded));
  EXPECT_EQ(decoded, bytes);
  EXPECT_TRUE(from_hex("", &decoded));
  EXPECT_TRUE(decoded.empty());
  for (const char* bad : {"0", "abc", "0g", "zz", " 00", "00 ", "0x00"}) {
    decoded = {1, 2};
    EXPECT_FALSE(from_hex(bad, &decoded)) << bad;
    EXPECT_TRUE(decoded.empty()) << bad;
  }
  std::array<uint8_t, 2> fixed{};
  EXPECT_TRUE(from_hex("beef", std::span<uint8_t>(fixed)));
  EXPECT_EQ(fixed[0], 0xbe);
  EXPECT_EQ(fixed[1], 0xef);
  EXPECT_FALSE(from_hex("bee", std::span<uint8_t>(fixed)));
  EXPECT_FALSE(from_hex("beefbeef", std::span<uint8_t>(fixed)));
}

// ---- Key files ------------------------------------------------------------------------------

const std::string kHexKey = "00112233445566778899aabbccddeeff0123456789abcdef0011223344556677";

TEST_F(SecurityTest, ParseKeyText) {
  TokenKey key;
  std::string error;
  ASSERT_TRUE(parse_token_key(kHexKey + "\n", &key, &error)) << error;
  EXPECT_EQ(to_hex(key.bytes), kHexKey);
  // Comments, blank lines, CRLF, surrounding blanks, uppercase and a missing final newline.
  std::string upper = kHexKey;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_TRUE(parse_token_key("# comment\r\n\r\n   # indented comment\n  " + upper + " \r\n# trailing\n", &key, &error))
      << error;
  EXPECT_EQ(to_hex(key.bytes), kHexKey);
  ASSERT_TRUE(parse_token_key(kHexKey, &key, &error)) << error;

  // The formatted file parses back to the same key.
  const TokenKey made = make_token_key();
  ASSERT_TRUE(parse_token_key(format_token_key(made), &key, &error)) << error;
  EXPECT_EQ(key.bytes, made.bytes);
}

TEST_F(SecurityTest, ParseKeyTextErrorsNameTheLine) {
  struct Case {
    std::string text;
    std::string expected;  // substring of the error
  };
  const Case cases[] = {
      {"", "no key line"},
      {"# only a comment\n\n", "no key line"},
      {"# key\n" + kHexKey.substr(0, 40) + "\n", "line 2: expected 64 hex characters (a 32-byte key), got 40"},
      {kHexKey + "00\n", "line 1: expected 64 hex characters"},
      {"#\n#\n" + kHexKey.substr(0, 63) + "x\n", "line 3: character 64 is not a hex digit"},
      {kHexKey + "\n# ok\n" + kHexKey + "\n", "line 3: unexpected data after the key on line 1"},
      {kHexKey + "\nextra\n", "line 2: unexpected data"},
      {kHexKey.substr(0, 32) + " " + kHexKey.substr(32) + "\n", "line 1: expected 64"},
  };
  for (const Case& c : cases) {
    TokenKey key;
    key.bytes.fill(0xAA);
    std::string error;
    EXPECT_FALSE(parse_token_key(c.text, &key, &error)) << c.text;
    EXPECT_NE(error.find(c.expected), std::string::npos) << "error: " << error << "\nexpected: " << c.expected;
    EXPECT_EQ(key.bytes[0], 0xAA) << "key untouched on failure";
  }
}

/// A fresh temporary directory, removed with its contents at the end of the test.
class KeyFileTest : public SecurityTest {
 protected:
  void SetUp() override {
    SecurityTest::SetUp();
    std::string pattern = (std::filesystem::temp_directory_path() / "impulse-keyfile-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  static unsigned mode_of(const std::string& p) {
    struct stat info {};
    EXPECT_EQ(::stat(p.c_str(), &info), 0);
    return static_cast<unsigned>(info.st_mode) & 0777u;
  }
  static void write_text(const std::string& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }

  std::filesystem::path dir_;
};

TEST_F(KeyFileTest, WriteLoadRoundTripWithMode0600) {
  for (mode_t umask_value : {mode_t{0}, mode_t{022}, mode_t{077}}) {
    const mode_t old = ::umask(umask_value);
    const std::string p = path(("key-" + std::to_string(umask_value)).c_str());
    const TokenKey key = make_token_key();
    std::string error;
    const bool written = write_token_key(p, key, &error);
    ::umask(old);
    ASSERT_TRUE(written) << error;
    EXPECT_EQ(mode_of(p), 0600u) << "umask " << umask_value;

    TokenKey loaded;
    std::string warning = "stale";
    ASSERT_TRUE(load_token_key(p, &loaded, &error, &warning)) << error;
    EXPECT_EQ(loaded.bytes, key.bytes);
    EXPECT_TRUE(warning.empty()) << warning;
  }
}

TEST_F(KeyFileTest, WriteRefusesToOverwriteUnlessAsked) {
  const std::string p = path("key");
  const TokenKey first = make_token_key();
  const TokenKey second = make_token_key();
  std::string error;
  ASSERT_TRUE(write_token_key(p, first, &error)) << error;
  EXPECT_FALSE(write_token_key(p, second, &error));
  EXPECT_NE(error.find("already exists"), std::string::npos) << error;
  TokenKey loaded;
  ASSERT_TRUE(load_token_key(p, &loaded, &error)) << error;
  EXPECT_EQ(loaded.bytes, first.bytes) << "the existing key is untouched";

  ::chmod(p.c_str(), 0644);
  ASSERT_TRUE(write_token_key(p, second, &error, /*overwrite=*/true)) << error;
  ASSERT_TRUE(load_token_key(p, &loaded, &error)) << error;
  EXPECT_EQ(loaded.bytes, second.bytes);
  EXPECT_EQ(mode_of(p), 0600u);
  // No temporary file is left behind.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) files += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u);
}

TEST_F(KeyFileTest, WriteIntoMissingDirectoryFails) {
  std::string error;
  EXPECT_FALSE(write_token_key(path("no-such-dir/key"), make_token_key(), &error));
  EXPECT_NE(error.find("no-such-dir/key"), std::string::npos) << error;
  EXPECT_FALSE(write_token_key(path("no-such-dir/key"), make_token_key(), &error, true));
  EXPECT_NE(error.find("no-such-dir/key"), std::string::npos) << error;
}

TEST_F(KeyFileTest, GroupOrWorldReadableFileLoadsWithAWarning) {
  const std::string p = path("shared-key");
  write_text(p, kHexKey + "\n");
  for (mode_t mode : {mode_t{0640}, mode_t{0604}, mode_t{0644}, mode_t{0660}}) {
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
    TokenKey key;
    std::string error;
    std::string warning;
    ASSERT_TRUE(load_token_key(p, &key, &error, &warning)) << error;
    EXPECT_EQ(to_hex(key.bytes), kHexKey);
    EXPECT_NE(warning.find(p), std::string::npos) << warning;
    EXPECT_NE(warning.find("chmod 600"), std::string::npos) << warning;
  }
  ASSERT_EQ(::chmod(p.c_str(), 0400), 0);
  TokenKey key;
  std::string error;
  std::string warning;
  ASSERT_TRUE(load_token_key(p, &key, &error, &warning)) << error;
  EXPECT_TRUE(warning.empty()) << warning;
}

TEST_F(KeyFileTest, LoadErrorsNameTheFileLineAndFix) {
  std::string error;
  TokenKey key;
  const std::string missing = path("missing");
  EXPECT_FALSE(load_token_key(missing, &key, &error));
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  EXPECT_NE(error.find("impulse-server keygen --out"), std::string::npos) << error;

  EXPECT_FALSE(load_token_key(dir_.string(), &key, &error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;

  const std::string short_key = path("short");
  write_text(short_key, "# my key\n" + kHexKey.substr(0, 62) + "\n");
  EXPECT_FALSE(load_token_key(short_key, &key, &error));
  EXPECT_NE(error.find(short_key), std::string::npos) << error;
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;

  const std::string non_hex = path("non-hex");
  write_text(non_hex, "zz" + kHexKey.substr(2) + "\n");
  EXPECT_FALSE(load_token_key(non_hex, &key, &error));
  EXPECT_NE(error.find("line 1: character 1 is not a hex digit"), std::string::npos) << error;

  const std::string extra = path("extra");
  write_text(extra, kHexKey + "\n" + kHexKey + "\n");
  EXPECT_FALSE(load_token_key(extra, &key, &error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;

  const std::string huge = path("huge");
  write_text(huge, std::string(kMaxKeyFileBytes + 1, '#'));
  EXPECT_FALSE(load_token_key(huge, &key, &error));
  EXPECT_NE(error.find("bytes"), std::string::npos) << error;
}

// ---- Cost -----------------------------------------------------------------------------------

TEST_F(SecurityTest, MeasureCost) {
  // Reports the cost per operation (not asserted: machines differ); checks every result.
  constexpr int kIterations = 20000;
  const CookieKey cookie_key = make_cookie_key();
  const TokenKey token_key = make_token_key();
  PeerAddress peer = ipv4(10, 1, 2, 3, 4000);
  using Clock = std::chrono::steady_clock;

  std::vector<Cookie> cookies(kIterations);
  auto t0 = Clock::now();
  for (int i = 0; i < kIterations; ++i) {
    peer.port = static_cast<uint16_t>(i);
    cookies[static_cast<size_t>(i)] = make_cookie(cookie_key, peer, static_cast<uint64_t>(i));
  }
  auto t1 = Clock::now();
  int valid = 0;
  for (int i = 0; i < kIterations; ++i) {
    peer.port = static_cast<uint16_t>(i);
    valid += check_cookie(cookie_key, peer, cookies[static_cast<size_t>(i)], static_cast<uint64_t>(i) + 1) ? 1 : 0;
  }
  auto t2 = Clock::now();
  EXPECT_EQ(valid, kIterations);

  std::vector<Token> tokens(kIterations);
  auto t3 = Clock::now();
  for (int i = 0; i < kIterations; ++i) {
    tokens[static_cast<size_t>(i)] = seal_token(token_key, {static_cast<uint64_t>(i) + 1, kNow + 60, 0});
  }
  auto t4 = Clock::now();
  int opened = 0;
  for (int i = 0; i < kIterations; ++i) {
    TokenClaims claims;
    opened += open_token(token_key, tokens[static_cast<size_t>(i)], kNow, &claims) == TokenError::None &&
              claims.client_id == uint64_t(i) + 1;
  }
  auto t5 = Clock::now();
  EXPECT_EQ(opened, kIterations);

  auto per_op_ns = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::nano>(b - a).count() / kIterations;
  };
  std::printf("[  COST    ] cookie make %.0f ns, check %.0f ns; token seal %.0f ns, open %.0f ns\n",
              per_op_ns(t0, t1), per_op_ns(t1, t2), per_op_ns(t3, t4), per_op_ns(t4, t5));
  RecordProperty("cookie_make_ns", static_cast<int>(per_op_ns(t0, t1)));
  RecordProperty("cookie_check_ns", static_cast<int>(per_op_ns(t1, t2)));
  RecordProperty("token_seal_ns", static_cast<int>(per_op_ns(t3, t4)));
  RecordProperty("token_open_ns", static_cast<int>(per_op_ns(t4, t5)));
}

// A share is remembered for its lifetime and then forgotten; at capacity the oldest goes first.
TEST(SpentKeyShares, RemembersEachShareForItsLifetimeAndForgetsTheOldestAtCapacity) {
  using namespace std::chrono_literals;
  SpentKeyShares spent(20s, 3);
  const auto t0 = std::chrono::steady_clock::time_point{} + 100s;
  const auto share = [](uint8_t b) {
    SpentKeyShares::Share s{};
    s.fill(b);
    return s;
  };
  spent.add(share(1), t0);
  EXPECT_TRUE(spent.contains(share(1), t0 + 19s));
  EXPECT_FALSE(spent.contains(share(2), t0 + 19s));
  EXPECT_FALSE(spent.contains(share(1), t0 + 20s)) << "a cookie no longer verifies: forgotten";
  EXPECT_EQ(spent.size(), 0u);
  for (uint8_t b = 1; b <= 4; ++b) spent.add(share(b), t0 + 21s + std::chrono::seconds(b));
  EXPECT_EQ(spent.size(), 3u);
  EXPECT_FALSE(spent.contains(share(1), t0 + 26s)) << "the oldest is forgotten first at capacity";
  for (uint8_t b = 2; b <= 4; ++b) EXPECT_TRUE(spent.contains(share(b), t0 + 26s)) << int{b};
}

}  // namespace
}  // namespace impulse::server::security
