// `impulse-server keygen` and `impulse-server token` run in-process on string streams: the key
// file they write, the token they print (it opens with that key and carries the flags' claims),
// and the exit codes and messages of bad flags and missing key files.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "server/app/token_tool.h"
#include "server/net/handshake.h"
#include "shared/hex.h"

namespace impulse::server {
namespace {

struct ToolRun {
  int code = -1;
  std::string out;
  std::string err;
};

ToolRun run_tool(std::initializer_list<std::string> args) {
  std::vector<std::string> storage{"impulse-server"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& a : storage) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  ToolRun r;
  r.code = run_token_tool(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

uint64_t unix_now_s() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

class TokenToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "impulse-token-tool-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    key_path_ = (dir_ / "token.key").string();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  security::TokenKey make_key_file() {
    const ToolRun r = run_tool({"keygen", "--out", key_path_});
    EXPECT_EQ(r.code, 0) << r.err;
    security::TokenKey key;
    std::string error;
    EXPECT_TRUE(security::load_token_key(key_path_, &key, &error)) << error;
    return key;
  }
  /// Decodes the single stdout line of `token` (the client token: the token and its session
  /// secret) into the token's bytes, checking the secret.
  static std::vector<uint8_t> token_of(const ToolRun& r, const security::TokenKey* key = nullptr) {
    std::vector<uint8_t> bundle = client_token_of(r);
    if (bundle.size() != security::kTokenBytes + security::kTokenSecretBytes) {
      ADD_FAILURE() << "a client token is " << security::kTokenBytes + security::kTokenSecretBytes << " bytes, not "
                    << bundle.size();
      return bundle;
    }
    const std::vector<uint8_t> token(bundle.begin(), bundle.begin() + security::kTokenBytes);
    if (key != nullptr) {
      const auto secret = security::token_session_secret(*key, token);
      EXPECT_TRUE(std::equal(secret.begin(), secret.end(), bundle.begin() + security::kTokenBytes))
          << "the client token's secret is not the token's session secret";
    }
    return token;
  }
  /// Decodes the single stdout line of `token` into bytes.
  static std::vector<uint8_t> client_token_of(const ToolRun& r) {
    EXPECT_FALSE(r.out.empty());
    EXPECT_EQ(r.out.back(), '\n');
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "exactly one line";
    std::vector<uint8_t> bytes;
    EXPECT_TRUE(from_hex(std::string_view(r.out).substr(0, r.out.size() - 1), &bytes)) << r.out;
    return bytes;
  }

  std::filesystem::path dir_;
  std::string key_path_;
};

TEST(TokenToolCommand, SelectsOnlyItsSubcommands) {
  EXPECT_TRUE(is_token_tool_command("token"));
  EXPECT_TRUE(is_token_tool_command("keygen"));
  EXPECT_FALSE(is_token_tool_command("--port"));
  EXPECT_FALSE(is_token_tool_command("tokens"));
  EXPECT_FALSE(is_token_tool_command(""));
}

TEST_F(TokenToolTest, KeygenWritesA0600KeyFileAndNamesItsKeyId) {
  const ToolRun r = run_tool({"keygen", "--out", key_path_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  struct stat info {};
  ASSERT_EQ(::stat(key_path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777u, 0600u);

  security::TokenKey key;
  std::string error;
  ASSERT_TRUE(security::load_token_key(key_path_, &key, &error)) << error;
  EXPECT_NE(r.err.find(key_path_), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("key id " + to_hex(security::token_key_id(key))), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--token-key"), std::string::npos) << r.err;
}

TEST_F(TokenToolTest, KeygenRefusesToOverwriteWithoutForce) {
  const security::TokenKey first = make_key_file();
  const ToolRun refused = run_tool({"keygen", "--out", key_path_});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("already exists"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  security::TokenKey still;
  std::string error;
  ASSERT_TRUE(security::load_token_key(key_path_, &still, &error)) << error;
  EXPECT_EQ(still.bytes, first.bytes);

  const ToolRun forced = run_tool({"keygen", "--out", key_path_, "--force"});
  ASSERT_EQ(forced.code, 0) << forced.err;
  security::TokenKey replaced;
  ASSERT_TRUE(security::load_token_key(key_path_, &replaced, &error)) << error;
  EXPECT_NE(replaced.bytes, first.bytes);
}

TEST_F(TokenToolTest, TokenOpensWithTheKeyAndCarriesTheFlags) {
  const security::TokenKey key = make_key_file();
  const ToolRun r = run_tool({"token", "--key", key_path_, "--client-id", "424242", "--ttl", "300", "--max-objects", "64",
                          "--now", "1700000000"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<uint8_t> token = token_of(r, &key);
  ASSERT_EQ(token.size(), security::kTokenBytes);
  EXPECT_EQ(r.out.size(), 2 * (security::kTokenBytes + security::kTokenSecretBytes) + 1);

  security::TokenClaims claims;
  ASSERT_EQ(security::open_token(key, token, 1'700'000'000, &claims), security::TokenError::None);
  EXPECT_EQ(claims.client_id, 424242u);
  EXPECT_EQ(claims.expires_unix_s, 1'700'000'300u);
  EXPECT_EQ(claims.max_objects, 64u);
  EXPECT_EQ(security::open_token(key, token, 1'700'000'301, nullptr), security::TokenError::Expired);

  // The summary names the client, the expiry in UTC and the key id.
  EXPECT_NE(r.err.find("client id 424242"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2023-11-14T22:18:20Z"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max objects 64"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(to_hex(security::token_key_id(key))), std::string::npos) << r.err;

  // Another key file: the token is refused as sealed with another key.
  security::TokenKey other = security::make_token_key();
  EXPECT_EQ(security::open_token(other, token, 1'700'000'000, nullptr), security::TokenError::WrongKey);
}

TEST_F(TokenToolTest, TokenExpiryFollowsTheClock) {
  const security::TokenKey key = make_key_file();
  const uint64_t before = unix_now_s();
  const ToolRun r = run_tool({"token", "--key", key_path_, "--client-id", "1", "--ttl", "60"});
  const uint64_t after = unix_now_s();
  ASSERT_EQ(r.code, 0) << r.err;
  security::TokenClaims claims;
  ASSERT_EQ(security::open_token(key, token_of(r), after, &claims), security::TokenError::None);
  EXPECT_GE(claims.expires_unix_s, before + 60);
  EXPECT_LE(claims.expires_unix_s, after + 60);
  EXPECT_EQ(claims.max_objects, 0u) << "default: the server's quota";
  EXPECT_NE(r.err.find("the server's default"), std::string::npos) << r.err;
}

TEST_F(TokenToolTest, BadFlagsExitWithCode2AndNameTheFlag) {
  make_key_file();
  struct Case {
    std::initializer_list<std::string> args;
    std::string expected;
  };
  const std::string& k = key_path_;
  const Case cases[] = {
      {{"token", "--key", k, "--client-id", "0", "--ttl", "60"}, "--client-id must be a whole number in 1.."},
      {{"token", "--key", k, "--client-id", "4294967296", "--ttl", "60"}, "--client-id must be a whole number in 1..4294967295"},
      {{"token", "--key", k, "--client-id", "abc", "--ttl", "60"}, "--client-id"},
      {{"token", "--key", k, "--client-id", "-5", "--ttl", "60"}, "--client-id"},
      {{"token", "--key", k, "--client-id", "1", "--ttl", "0"}, "--ttl must be a whole number in 1..31536000"},
      {{"token", "--key", k, "--client-id", "1", "--ttl", "31536001"}, "--ttl must be a whole number in 1..31536000"},
      {{"token", "--key", k, "--client-id", "1", "--ttl", "1.5"}, "--ttl"},
      {{"token", "--key", k, "--client-id", "1", "--ttl", "60", "--max-objects", "4294967296"}, "--max-objects"},
      {{"token", "--key", k, "--client-id", "1", "--ttl", "60", "--now", "18446744073709551600"}, "overflows"},
      {{"token", "--key", k, "--client-id", "1"}, "--ttl is required"},
      {{"token", "--client-id", "1", "--ttl", "60"}, "--key is required"},
      {{"token", "--key", k, "--client-id", "1", "--ttl", "60", "--bogus"}, "--bogus"},
      {{"keygen"}, "--out is required"},
      {{"keygen", "--out"}, "--out"},
      {{}, "subcommand"},
      {{"frobnicate"}, "frobnicate"},
  };
  for (const Case& c : cases) {
    const ToolRun r = run_tool(c.args);
    std::string line;
    for (const std::string& a : c.args) line += a + " ";
    EXPECT_EQ(r.code, 2) << line << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << line << "\nerr: " << r.err << "\nexpected: " << c.expected;
    EXPECT_TRUE(r.out.empty()) << line << "\nout: " << r.out;
  }
}

TEST_F(TokenToolTest, MissingOrBadKeyFileSaysWhichAndWhatToDo) {
  const ToolRun missing = run_tool({"token", "--key", key_path_, "--client-id", "1", "--ttl", "60"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(missing.out.empty());
  EXPECT_NE(missing.err.find(key_path_), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("impulse-server keygen --out " + key_path_), std::string::npos) << missing.err;

  std::ofstream(key_path_) << "# truncated\nabcdef\n";
  ::chmod(key_path_.c_str(), 0600);
  const ToolRun bad = run_tool({"token", "--key", key_path_, "--client-id", "1", "--ttl", "60"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find(key_path_ + ": line 2"), std::string::npos) << bad.err;
}

TEST_F(TokenToolTest, WorldReadableKeyFileWarns) {
  make_key_file();
  ASSERT_EQ(::chmod(key_path_.c_str(), 0644), 0);
  const ToolRun r = run_tool({"token", "--key", key_path_, "--client-id", "1", "--ttl", "60"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
}

TEST_F(TokenToolTest, HelpGoesToStdoutWithCode0) {
  const ToolRun r = run_tool({"token", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--client-id"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--ttl"), std::string::npos) << r.out;
  const ToolRun k = run_tool({"keygen", "--help"});
  EXPECT_EQ(k.code, 0);
  EXPECT_NE(k.out.find("--force"), std::string::npos) << k.out;
}

}  // namespace
}  // namespace impulse::server
