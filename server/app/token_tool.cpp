// The token tool: key generation and token issue on the command line (CLI11), over the key file
// and XChaCha20-Poly1305 token of server/net/handshake.h (after netcode.io's connect tokens).
#include "server/app/token_tool.h"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "server/net/handshake.h"
#include "shared/hex.h"

namespace impulse::server {
namespace {

/// Longest token lifetime issued [s]: a year. Tokens are meant to be short-lived (minutes); a
/// longer one is almost certainly a unit mistake (ms given as s).
constexpr uint64_t kMaxTtlS = 365ull * 24 * 3600;

/// ISO 8601 UTC text of a Unix time, e.g. "2025-01-31T12:00:00Z"; the raw number if out of range.
std::string format_utc(uint64_t unix_s) {
  if (unix_s > static_cast<uint64_t>(std::numeric_limits<std::time_t>::max())) return fmt::format("{} (Unix s)", unix_s);
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  char text[64];
  if (::gmtime_r(&t, &tm) == nullptr || std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return fmt::format("{} (Unix s)", unix_s);
  }
  return text;
}

/// Parses a whole decimal number with std::from_chars: digits only (CLI11 2.1 would read "-5"
/// as 2^64 - 5 for an unsigned option, so numbers are taken as text and checked here).
/// @return false with a message naming `flag` and its range for anything else
bool parse_whole(std::string_view flag, const std::string& text, uint64_t min, uint64_t max, const char* note,
                 uint64_t* value, std::string* error) {
  uint64_t parsed = 0;
  const char* end = text.data() + text.size();
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto result = std::from_chars(text.data(), end, parsed);
  if (!digits || result.ec != std::errc() || result.ptr != end || parsed < min || parsed > max) {
    *error = fmt::format("{} must be a whole number in {}..{}{} (got \"{}\")", flag, min, max, note, text);
    return false;
  }
  *value = parsed;
  return true;
}

uint64_t unix_now_s() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
  return s > 0 ? static_cast<uint64_t>(s) : 0;
}

int run_keygen(const std::string& out_path, bool force, std::ostream& err) {
  std::string error;
  if (!security::init_crypto(&error)) {
    err << "impulse-server keygen: " << error << '\n';
    return 1;
  }
  const security::TokenKey key = security::make_token_key();
  if (!security::write_token_key(out_path, key, &error, force)) {
    err << "impulse-server keygen: " << error;
    if (!force) err << " (pass --force to replace it; tokens sealed with the old key will stop working)";
    err << '\n';
    return 1;
  }
  err << fmt::format("impulse-server keygen: wrote a new token key to {} (mode 0600, key id {}).\n"
                     "  Start the server with --token-key {} and give the backend that issues tokens the same file;\n"
                     "  test tokens: impulse-server token --key {} --client-id N --ttl SECONDS\n",
                     out_path, to_hex(security::token_key_id(key)), out_path, out_path);
  return 0;
}

/// The token subcommand's flags as given (numbers as text; see parse_whole).
struct TokenFlags {
  std::string key_path;
  std::string client_id;
  std::string ttl_s;
  std::string max_objects = "0";
  std::string now_unix_s;  // empty: the system clock
};

int run_token(const TokenFlags& f, std::ostream& out, std::ostream& err) {
  // Range checks first: a usage error is exit code 2 whatever the key file's state.
  uint64_t client_id = 0;
  uint64_t ttl_s = 0;
  uint64_t max_objects = 0;
  uint64_t now = 0;
  std::string error;
  // The token's field is 64 bits, but ConnectAccepted.client_id is 32: a server refuses any id
  // above 2^32 - 1 (TokenInvalid), so the tool refuses to issue one.
  const uint64_t u32_max = std::numeric_limits<uint32_t>::max();
  const uint64_t u64_max = std::numeric_limits<uint64_t>::max();
  if (!parse_whole("--client-id", f.client_id, 1, u32_max,
                   " (0 is reserved for anonymous clients; ConnectAccepted.client_id is 32 bits)", &client_id,
                   &error) ||
      !parse_whole("--ttl", f.ttl_s, 1, kMaxTtlS, " seconds", &ttl_s, &error) ||
      !parse_whole("--max-objects", f.max_objects, 0, std::numeric_limits<uint32_t>::max(),
                   " (0 = the server's default)", &max_objects, &error) ||
      (!f.now_unix_s.empty() && !parse_whole("--now", f.now_unix_s, 0, u64_max, " (Unix time, s)", &now, &error))) {
    err << "impulse-server token: " << error << '\n';
    return 2;
  }
  const bool now_given = !f.now_unix_s.empty();
  if (!now_given) now = unix_now_s();
  if (now > u64_max - ttl_s) {
    err << fmt::format("impulse-server token: --now {} + --ttl {} overflows a 64-bit Unix time\n", now, ttl_s);
    return 2;
  }

  std::string warning;
  if (!security::init_crypto(&error)) {
    err << "impulse-server token: " << error << '\n';
    return 1;
  }
  security::TokenKey key;
  if (!security::load_token_key(f.key_path, &key, &error, &warning)) {
    err << "impulse-server token: " << error << '\n';
    return 1;
  }
  if (!warning.empty()) err << "impulse-server token: warning: " << warning << '\n';

  security::TokenClaims claims;
  claims.client_id = client_id;
  claims.expires_unix_s = now + ttl_s;
  claims.max_objects = static_cast<uint32_t>(max_objects);
  // The client token: the connect token and its session secret (docs/PROTOCOL.md, "Sealed packets").
  const std::vector<uint8_t> token = security::issue_client_token(key, claims);

  out << to_hex(token) << '\n';
  out.flush();
  const std::string quota = claims.max_objects == 0 ? std::string("0 (the server's default)")
                                                     : fmt::format("{}", claims.max_objects);
  err << fmt::format("impulse-server token: client id {}, expires {} ({} s after {}), max objects {}, key id {} ({})\n",
                     claims.client_id, format_utc(claims.expires_unix_s), ttl_s, now_given ? "--now" : "now", quota,
                     to_hex(security::token_key_id(key)), f.key_path);
  return 0;
}

}  // namespace

bool is_token_tool_command(std::string_view arg) { return arg == "keygen" || arg == "token"; }

int run_token_tool(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"impulse-server token tools: connect-token keys and tokens (docs/PROTOCOL.md, \"Connection security\")",
               "impulse-server"};
  app.require_subcommand(1);

  std::string out_path;
  bool force = false;
  CLI::App* keygen = app.add_subcommand("keygen", "Write a new random token key file (mode 0600)");
  keygen->add_option("--out", out_path, "Key file to create")->required();
  keygen->add_flag("--force", force, "Replace the file if it exists (tokens from the old key stop working)");

  TokenFlags f;
  CLI::App* token = app.add_subcommand("token", "Print one hex client token (connect token and session secret) on stdout (summary on stderr)");
  token->add_option("--key", f.key_path, "Token key file (from impulse-server keygen; the server's --token-key)")
      ->required();
  token->add_option("--client-id", f.client_id, "Client id sealed in the token, 1..4294967295 (2^32-1)")->required();
  token->add_option("--ttl", f.ttl_s, fmt::format("Lifetime [s], 1..{}", kMaxTtlS))->required();
  token->add_option("--max-objects", f.max_objects, "Live-object quota, 0..2^32-1; 0 = the server's default")
      ->capture_default_str();
  token->add_option("--now", f.now_unix_s, "Issue as if the clock read this Unix time [s] (tests, examples)");

  if (argc < 2 || !is_token_tool_command(argv[1])) {
    err << fmt::format("impulse-server: expected a subcommand, keygen or token (got \"{}\"; run impulse-server "
                       "keygen --help or impulse-server token --help)\n",
                       argc < 2 ? "" : argv[1]);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    const std::string command = keygen->parsed() ? " keygen" : (token->parsed() ? " token" : "");
    err << fmt::format("impulse-server{}: {} (run impulse-server{} --help)\n", command, e.what(), command);
    return 2;
  }

  if (keygen->parsed()) return run_keygen(out_path, force, err);
  return run_token(f, out, err);
}

int run_token_tool(int argc, char** argv) { return run_token_tool(argc, argv, std::cout, std::cerr); }

}  // namespace impulse::server
