// Sealed packets (shared/net/packet_crypto.h): the test vectors of docs/PROTOCOL.md ("Sealed
// packets"), read from the document itself so the document and the code cannot drift (they are
// also computed, and checked against the document, by the independent Python reference
// scripts/packet-crypto-vectors.py, PyNaCl, ctest packet_crypto.python_vectors); seal/open
// round trips, every single-bit flip refused, the replay window, and the token's session secret.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "server/net/handshake.h"
#include "shared/hex.h"
#include "shared/net/packet_crypto.h"
#include "shared/wire/codec.h"
#include "tests/support/doc_vectors.h"

namespace impulse::net {
namespace {

using Bytes = std::vector<uint8_t>;

std::map<std::string, std::string> vectors_in_doc() { return test::protocol_doc_vectors("packet-crypto-vectors"); }

struct Computed {
  std::map<std::string, std::string> values;
};

Computed compute_vectors() {
  Computed c;
  Bytes client_seed(32), server_seed(32);
  for (int i = 0; i < 32; ++i) {
    client_seed[i] = static_cast<uint8_t>(i);
    server_seed[i] = static_cast<uint8_t>(32 + i);
  }
  KxKeyPair client, server;
  EXPECT_TRUE(kx_keypair_from_seed(std::span<const uint8_t, 32>(client_seed.data(), 32), &client));
  EXPECT_TRUE(kx_keypair_from_seed(std::span<const uint8_t, 32>(server_seed.data(), 32), &server));
  c.values["client seed"] = to_hex(client_seed);
  c.values["server seed"] = to_hex(server_seed);
  c.values["client public key"] = to_hex(client.public_key);
  c.values["server public key"] = to_hex(server.public_key);

  SessionKeys anon_client, anon_server;
  EXPECT_TRUE(client_session_keys(client, server.public_key, BindingSecret{}, &anon_client));
  EXPECT_TRUE(server_session_keys(server, client.public_key, BindingSecret{}, &anon_server));
  EXPECT_EQ(anon_client.client_to_server, anon_server.client_to_server);
  EXPECT_EQ(anon_client.server_to_client, anon_server.server_to_client);
  c.values["anonymous c2s key"] = to_hex(anon_client.client_to_server);
  c.values["anonymous s2c key"] = to_hex(anon_client.server_to_client);

  server::security::TokenKey token_key;
  token_key.bytes.fill(0x42);
  Bytes token(69);
  for (int i = 0; i < 69; ++i) token[i] = static_cast<uint8_t>(i);
  const auto secret = server::security::token_session_secret(token_key, token);
  c.values["token key"] = to_hex(token_key.bytes);
  c.values["token"] = to_hex(token);
  c.values["token secret"] = to_hex(secret);
  BindingSecret binding{};
  std::copy(secret.begin(), secret.end(), binding.begin());
  SessionKeys bound_client, bound_server;
  EXPECT_TRUE(client_session_keys(client, server.public_key, binding, &bound_client));
  EXPECT_TRUE(server_session_keys(server, client.public_key, binding, &bound_server));
  EXPECT_EQ(bound_client.client_to_server, bound_server.client_to_server);
  c.values["token c2s key"] = to_hex(bound_client.client_to_server);
  c.values["token s2c key"] = to_hex(bound_client.server_to_client);

  const std::string_view text = "impulse sealed packet test";
  const Bytes plaintext(text.begin(), text.end());
  c.values["plaintext"] = to_hex(plaintext);
  Bytes sealed(plaintext.size() + kSealOverheadBytes);
  EXPECT_EQ(seal_packet(anon_client.client_to_server, 1, plaintext, sealed), sealed.size());
  c.values["sealed c2s, sequence 1"] = to_hex(sealed);
  EXPECT_EQ(seal_packet(anon_client.server_to_client, 0x01020304, plaintext, sealed), sealed.size());
  c.values["sealed s2c, sequence 0x01020304"] = to_hex(sealed);
  return c;
}

TEST(PacketCrypto, TestVectorsMatchTheProtocolDocument) {
  const auto doc = vectors_in_doc();
  const Computed computed = compute_vectors();
  ASSERT_EQ(doc.size(), computed.values.size()) << "docs/PROTOCOL.md lists another set of vectors";
  for (const auto& [name, value] : computed.values) {
    const auto it = doc.find(name);
    ASSERT_NE(it, doc.end()) << "vector \"" << name << "\" missing from docs/PROTOCOL.md";
    EXPECT_EQ(it->second, value) << name;
  }
  // Pinned here too (also computed by scripts/packet-crypto-vectors.py, PyNaCl, from the document).
  EXPECT_EQ(computed.values.at("client public key"), "0e0216223f147143d32615a91189c288c1728cba3cc5f9f621b1026e03d83129");
  EXPECT_EQ(computed.values.at("anonymous c2s key"), "d52905499e6f8b14fce81904dced9f6ad1c4de72bd6acc07019af8d41291f0be");
  EXPECT_EQ(computed.values.at("token s2c key"), "4d831a3522f5a8cd68373bccec031285ba1a7ef2fdc60b62cf2b854f3f131471");
  EXPECT_EQ(computed.values.at("sealed c2s, sequence 1"),
            "494d505301000000d582aa454572386f774ffe980e287ea4513c780b6b7e0981d91e584d87b0ccd9fc5f78125ad7861fb420");
}

TEST(PacketCrypto, SealOpenRoundTripAndEveryBitFlipIsRefused) {
  PacketKey key{};
  key.fill(7);
  const Bytes plaintext = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Bytes sealed(plaintext.size() + kSealOverheadBytes);
  ASSERT_EQ(seal_packet(key, 77, plaintext, sealed), sealed.size());
  EXPECT_TRUE(is_sealed(sealed));
  EXPECT_EQ(sealed_sequence(sealed), 77u);
  Bytes out(sealed.size());
  ASSERT_EQ(open_packet(key, sealed, out), plaintext.size());
  EXPECT_TRUE(std::equal(plaintext.begin(), plaintext.end(), out.begin()));

  for (size_t bit = 0; bit < sealed.size() * 8; ++bit) {
    Bytes flipped = sealed;
    flipped[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_FALSE(open_packet(key, flipped, out).has_value()) << "bit " << bit;
  }
  for (size_t n = 0; n < sealed.size(); ++n) {
    EXPECT_FALSE(open_packet(key, std::span<const uint8_t>(sealed).first(n), out).has_value()) << "prefix " << n;
  }
  PacketKey other = key;
  other[0] ^= 1;
  EXPECT_FALSE(open_packet(other, sealed, out).has_value());
  EXPECT_EQ(seal_packet(key, 0, plaintext, sealed), 0u) << "sequence 0 is never sealed";
  EXPECT_EQ(seal_packet(key, 1, plaintext, std::span<uint8_t>(sealed).first(sealed.size() - 1)), 0u);
}

TEST(PacketCrypto, APlaintextDatagramIsNeverTakenForASealedOne) {
  flatbuffers::FlatBufferBuilder fbb;
  EXPECT_FALSE(is_sealed(wire::build_ping(fbb, 1)));
  EXPECT_FALSE(is_sealed(wire::build_connect(fbb, "x")));
  // "IMPS" as a root offset points 1.4e9 bytes in: no FlatBuffer datagram starts with it.
  EXPECT_GT(0x53504D49u, wire::kMaxDatagramBytes);
}

TEST(PacketCrypto, ReplayWindowRefusesDuplicatesAndTheTooOld) {
  ReplayWindow w;
  EXPECT_TRUE(w.already_received(0));
  EXPECT_FALSE(w.already_received(1));
  w.accept(1);
  EXPECT_TRUE(w.already_received(1));
  w.accept(300);
  EXPECT_FALSE(w.already_received(299)) << "out of order within the window";
  EXPECT_FALSE(w.already_received(45)) << "300 - 45 = 255 < 256";
  EXPECT_TRUE(w.already_received(44)) << "300 - 44 = 256: too old to tell";
  w.accept(299);
  EXPECT_TRUE(w.already_received(299));
  // Far ahead (a long outage): accepted, and the window moves.
  EXPECT_FALSE(w.already_received(1'000'000));
  w.accept(1'000'000);
  EXPECT_TRUE(w.already_received(300));
  EXPECT_EQ(w.newest(), 1'000'000u);
  EXPECT_FALSE(w.already_received(UINT32_MAX));
}

TEST(PacketCrypto, SessionPathChecksTheWindowBeforeTheTagAndRecordsOnlyAuthenticPackets) {
  PacketProtection receiver;
  receiver.receive_key.fill(3);
  receiver.keyed = true;
  const Bytes plaintext(40, 0xAB);
  Bytes sealed(plaintext.size() + kSealOverheadBytes);
  ASSERT_NE(seal_packet(receiver.receive_key, 5, plaintext, sealed), 0u);
  Bytes out(sealed.size());
  size_t n = 0;
  uint32_t sequence = 0;

  Bytes forged = sealed;
  forged.back() ^= 1;
  EXPECT_EQ(open_session_packet(receiver, forged, out, &n, &sequence), OpenError::Forged);
  EXPECT_FALSE(receiver.replay.already_received(5)) << "a forgery must not move the window";
  EXPECT_EQ(open_session_packet(receiver, sealed, out, &n, &sequence), OpenError::None);
  EXPECT_EQ(n, plaintext.size());
  EXPECT_EQ(sequence, 5u);
  EXPECT_EQ(open_session_packet(receiver, sealed, out, &n, &sequence), OpenError::Replayed);
  PacketProtection unkeyed;
  EXPECT_EQ(open_session_packet(unkeyed, sealed, out, &n, &sequence), OpenError::NotKeyed);
  EXPECT_EQ(open_session_packet(receiver, plaintext, out, &n, &sequence), OpenError::Malformed);
}

TEST(PacketCrypto, KeysDependOnBothSharesAndTheBinding) {
  KxKeyPair a, b, c;
  ASSERT_TRUE(make_kx_keypair(&a) && make_kx_keypair(&b) && make_kx_keypair(&c));
  SessionKeys ab, cb, bound;
  ASSERT_TRUE(client_session_keys(a, b.public_key, BindingSecret{}, &ab));
  ASSERT_TRUE(client_session_keys(c, b.public_key, BindingSecret{}, &cb));
  BindingSecret secret{};
  secret[31] = 1;
  ASSERT_TRUE(client_session_keys(a, b.public_key, secret, &bound));
  EXPECT_NE(ab.client_to_server, cb.client_to_server);
  EXPECT_NE(ab.client_to_server, bound.client_to_server);
  EXPECT_NE(ab.client_to_server, ab.server_to_client) << "one key per direction";
  // A low-order public key (all zeros) makes the shared secret zero: refused.
  SessionKeys refused;
  EXPECT_FALSE(client_session_keys(a, KxPublicKey{}, BindingSecret{}, &refused));
}

TEST(PacketCrypto, ClientTokenIsTheTokenFollowedByItsSessionSecret) {
  const server::security::TokenKey key = server::security::make_token_key();
  server::security::TokenClaims claims;
  claims.client_id = 9;
  claims.expires_unix_s = 2'000'000'000;
  const Bytes bundle = server::security::issue_client_token(key, claims);
  ASSERT_EQ(bundle.size(), server::security::kTokenBytes + server::security::kTokenSecretBytes);
  const auto token = std::span<const uint8_t>(bundle).first(server::security::kTokenBytes);
  server::security::TokenClaims opened;
  EXPECT_EQ(server::security::open_token(key, token, 1'000'000'000, &opened), server::security::TokenError::None);
  EXPECT_EQ(opened, claims);
  const auto secret = server::security::token_session_secret(key, token);
  EXPECT_TRUE(std::equal(secret.begin(), secret.end(), bundle.begin() + server::security::kTokenBytes));
}

}  // namespace
}  // namespace impulse::net
