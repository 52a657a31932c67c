// Sealed packets bound to connect tokens, end to end: a real server with --token-key and real
// clients over loopback. The client token (token || session secret, as `impulse-server token`
// prints it) keys a working session; someone who has only the token (seen on the wire) but not
// its secret gets a session whose packets do not authenticate, so it can do nothing in it.
#include <filesystem>

#include "integration/harness.h"
#include "server/net/handshake.h"

namespace impulse::test {
namespace {

TEST(SealedTokens, TheClientTokensSecretKeysTheSessionAndTheBareTokenCannotActInOne) {
  TempTokenKey key_file;
  ServerOptions options;
  options.token_key_file = key_file.path;
  RunningServer server(options);
  ASSERT_TRUE(server.started()) << server.error();

  server::security::TokenClaims claims;
  claims.client_id = 42;
  claims.expires_unix_s = static_cast<uint64_t>(std::time(nullptr)) + 600;
  const std::vector<uint8_t> client_token = server::security::issue_client_token(key_file.key, claims);

  // The player: its session works both ways (a create is answered, snapshots show the object).
  ClientDriver player;
  std::string error;
  ASSERT_TRUE(player.client.connect("127.0.0.1", server.port(), milliseconds{2000}, &error, "player", client_token))
      << error;
  const ObjectID body = player.create_ok(make_sphere(0.5f, {3.0f, 0.5f, 0.0f}));
  ASSERT_FALSE(body.is_null());
  EXPECT_EQ(player.client.stats().datagrams_unauthenticated, 0u);
  EXPECT_EQ(server.stats().datagrams_unauthenticated.load(), 0u);
  const uint32_t objects = server.stats().objects.load();

  // The thief saw the token on the wire but not the secret (here: zeros). The server opens the
  // token and accepts, but none of the thief's sealed datagrams authenticate, so its session is
  // never confirmed: it gets no snapshots, replaces nothing (the player's session replaces an
  // older one of its client id only once it authenticates a sealed datagram) and ends 2 s later.
  std::vector<uint8_t> stolen(client_token.begin(), client_token.begin() + server::security::kTokenBytes);
  stolen.resize(client_token.size(), 0);
  ClientDriver thief;
  ASSERT_TRUE(thief.client.connect("127.0.0.1", server.port(), milliseconds{2000}, &error, "thief", stolen)) << error;
  const uint32_t request = thief.client.create_object(make_sphere(0.5f, {-3.0f, 0.5f, 0.0f}));
  ASSERT_NE(request, 0u);
  EXPECT_TRUE(thief.poll_until([&] { return server.stats().datagrams_unauthenticated.load() > 0; }));
  // Until the server ends the thief's half-open session (kUnconfirmedSessionLifetime, 2 s).
  EXPECT_TRUE(thief.poll_until([&] { return server.stats().clients.load() == 1; }, milliseconds{4000}));
  EXPECT_EQ(thief.find_result(request), nullptr) << "the thief's request was answered";
  EXPECT_EQ(server.stats().objects.load(), objects) << "the thief created an object, or the player lost one";
  // The player never left: its session still works both ways.
  const ObjectID second = player.create_ok(make_sphere(0.5f, {6.0f, 0.5f, 0.0f}));
  EXPECT_FALSE(second.is_null()) << "the player's session was replaced";
  EXPECT_TRUE(player.poll_until([&] { return player.client.find(second) != nullptr; }));
}

}  // namespace
}  // namespace impulse::test
