// `impulse-server keygen` and `impulse-server token`: the connect-token key file and token issuer
// for tests and simple backends (server/net/handshake.h has the formats).
#pragma once

#include <iosfwd>
#include <string_view>

namespace impulse::server {

/// True for the first arguments that select the token tool instead of the server: "keygen" and
/// "token". main() checks argv[1] with this before parsing server flags.
bool is_token_tool_command(std::string_view arg);

/// Runs `impulse-server keygen --out FILE [--force]` or
/// `impulse-server token --key FILE --client-id N --ttl S [--max-objects M] [--now UNIX_S]`.
///  - keygen writes a new random key file with mode 0600; refuses to replace an existing file
///    unless --force. Prints what it did and the key id on `err`.
///  - token prints one hex token (2 * kTokenBytes characters) and a newline on `out`, and a
///    human summary (client id, expiry in UTC, quota, key id) on `err`.
/// @param argv  argc entries: argv[0] the program name, argv[1] the subcommand
/// @return 0 on success (and for --help, printed on `out`), 2 for bad flags or values (the
///         message names the flag), 1 when a key file cannot be read or written (the message
///         names the file and what to do)
int run_token_tool(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

/// run_token_tool on std::cout and std::cerr.
int run_token_tool(int argc, char** argv);

}  // namespace impulse::server
