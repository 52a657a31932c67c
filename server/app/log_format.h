// Log output formats (--log-format): spdlog's text lines, or one JSON object per line for log
// shippers, with structured fields a caller attaches to the lines it logs (ScopedLogFields).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include <spdlog/formatter.h>

#include "shared/log_fields.h"

namespace impulse::server {

enum class LogFormat : uint8_t {
  Text,  ///< spdlog's default pattern: "[time] [level] message"
  Json,  ///< one JSON object per line (JsonLogFormatter)
};

/// "text" or "json" -> *format. False (and *format unchanged) for anything else.
bool parse_log_format(std::string_view name, LogFormat* format);

/// Appends `text` to `out` as the inside of a JSON string (RFC 8259), never breaking a line:
/// '"' and '\' are backslash-escaped; every control character U+0000..U+001F, and DEL (U+007F),
/// becomes \u00XX; valid UTF-8 is copied as is; each ill-formed UTF-8 sequence (a stray
/// continuation byte, a truncated sequence, an overlong form, a surrogate, beyond U+10FFFF)
/// becomes one \ufffd (U+FFFD REPLACEMENT CHARACTER) per maximal ill-formed subpart, as Unicode
/// recommends (so the output is always valid UTF-8 and valid JSON).
void append_json_escaped(std::string& out, std::string_view text);
/// append_json_escaped into a new string (without the surrounding quotes).
std::string json_escape(std::string_view text);

/// spdlog formatter of the JSON format: one object per line,
///   {"time":"2026-11-26T03:17:13.123Z","level":"info","message":"...", <fields>}
/// time is RFC 3339 in UTC with milliseconds; level one of trace, debug, info, warn, error,
/// critical (the --log-level names); "logger" appears when the logger has a name and "source"
/// ("file:line") when the call site recorded one; then the thread's ScopedLogFields, in order.
class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

/// Formats one message as JsonLogFormatter does, without the newline (for tests).
std::string format_json_log_line(const spdlog::details::log_msg& msg, std::span<const LogField> fields);

/// Json: installs JsonLogFormatter on every registered spdlog logger (the server logs through the
/// default one) and on loggers created later. Text: puts spdlog's default pattern back if Json
/// was installed before, else leaves the loggers' formatters as they are.
void set_log_format(LogFormat format);

}  // namespace impulse::server
