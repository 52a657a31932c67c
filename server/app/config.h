// Server configuration from flags and IMPULSE_* environment variables (CLI11), with range checks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/app/server.h"

namespace impulse::server {

/// What the caller of parse_config should do next.
enum class ParseStatus : uint8_t {
  Run,    ///< the configuration is valid: start the server
  Exit,   ///< --help or --version was given: print *message to stdout and exit 0
  Error,  ///< bad flag or value: print *message to stderr and exit non-zero
};

/// Parses the command line into `config`, starting from the values already in it (normally the
/// ServerConfig defaults). Each setting --foo-bar comes from, first found: the flag; the
/// environment variable IMPULSE_FOO_BAR; the key foo-bar of the TOML file named by --config (or
/// IMPULSE_CONFIG); the value already in `config`. Every value is range-checked
/// (validate_config). --dump-config returns Exit with the effective settings as a config file
/// (dump_config) in *message. Never throws.
/// @param argv     argc entries; argv[0] is the program name
/// @param message  receives the help text or the dumped config (Exit) or an error that names the
///                 flag and its range, and for a value from the file the file, line and key
///                 (Error); may be null
ParseStatus parse_config(int argc, const char* const* argv, ServerConfig& config, std::string* message);

/// Reads the settings of a config file's text (named `label` in errors) onto `config`, as
/// parse_config does for --config but without flags or environment, then range-checks them.
/// Run, or Error with *message "LABEL:LINE: ...".
ParseStatus load_config_text(std::string_view text, const std::string& label, ServerConfig& config,
                             std::string* message);

/// The config file of `config` (the text of --dump-config): every setting as `key=value`, with its
/// help as a comment. Verified to load back (load_config_text) to an equal ServerConfig; when it
/// would not (a value this file format cannot hold) returns "" and sets *error.
std::string dump_config(const ServerConfig& config, std::string* error);

/// One `key = value` line of a config file.
struct ConfigFileKey {
  std::string key;    ///< as written, quotes removed
  int line = 0;       ///< 1-based
  std::string value;  ///< as written (quotes kept), without a trailing comment
};

/// Pre-scan of a config file's text, for the line numbers CLI11's reader does not keep and for what
/// it would silently misread. Accepts blank lines, comments (# or ;) and `key = value` lines, value
/// a number, a bare word or a quoted string, optionally followed by a # comment. Refuses, with
/// *error = "LINE: what is wrong": a section header, a line without '=', an empty key or value,
/// an array, an unclosed quote, a '#' inside a quoted value (CLI11 would cut the value there) and
/// a key given twice. On success *keys holds every key with its line, in file order.
bool scan_config_file(std::string_view text, std::vector<ConfigFileKey>* keys, std::string* error);

/// Range checks of every field. Returns an empty string when valid, else the first problem,
/// e.g. "--tick-hz must be in 1..1000 (got 0)".
std::string validate_config(const ServerConfig& config);

/// One human-readable line with every field, for the start-up log.
std::string describe_config(const ServerConfig& config);

}  // namespace impulse::server
