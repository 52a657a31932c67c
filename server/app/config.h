// Server configuration from flags and IMPULSE_* environment variables (CLI11), with range checks.
#pragma once

#include <cstdint>
#include <string>

#include "server/app/server.h"

namespace impulse::server {

/// What the caller of parse_config should do next.
enum class ParseStatus : uint8_t {
  Run,    ///< the configuration is valid: start the server
  Exit,   ///< --help or --version was given: print *message to stdout and exit 0
  Error,  ///< bad flag or value: print *message to stderr and exit non-zero
};

/// Parses the command line into `config`, starting from the values already in it (normally the
/// ServerConfig defaults). Each flag --foo-bar may instead come from the environment variable
/// IMPULSE_FOO_BAR; the flag wins when both are set. Every value is range-checked
/// (validate_config). Never throws.
/// @param argv     argc entries; argv[0] is the program name
/// @param message  receives the help text (Exit) or an error that names the flag and its range
///                 (Error); may be null
ParseStatus parse_config(int argc, const char* const* argv, ServerConfig& config, std::string* message);

/// Range checks of every field. Returns an empty string when valid, else the first problem,
/// e.g. "--tick-hz must be in 1..1000 (got 0)".
std::string validate_config(const ServerConfig& config);

/// One human-readable line with every field, for the start-up log.
std::string describe_config(const ServerConfig& config);

}  // namespace impulse::server
