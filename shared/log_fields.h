// Structured fields of log lines (LogField, ScopedLogFields): any layer of the server may attach
// them to the lines it logs; only the JSON log format (server/app/log_format.h) writes them, and
// the text format shows the message alone. Header-only: a thread-local span, no logging library.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace impulse {

/// One structured field of a log line: a key and an integer, a real or a string. Only the JSON
/// format shows fields; the text format shows the message alone, so a message should say the same
/// in words. Keys must not be time, level, logger, message or source (the formatter's own).
/// The key and a string value are viewed, not copied: they must outlive the log call.
struct LogField {
  enum class Kind : uint8_t { Signed, Unsigned, Real, String };

  template <class T>
    requires std::is_integral_v<T>
  LogField(std::string_view k, T v) : key(k) {
    if constexpr (std::is_signed_v<T>) {
      kind = Kind::Signed;
      i = static_cast<int64_t>(v);
    } else {
      kind = Kind::Unsigned;
      u = static_cast<uint64_t>(v);
    }
  }
  LogField(std::string_view k, double v) : key(k), kind(Kind::Real), d(v) {}
  LogField(std::string_view k, std::string_view v) : key(k), kind(Kind::String), s(v) {}

  std::string_view key;
  Kind kind;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;  ///< written with the shortest round-trip digits; NaN and infinities as null
  std::string_view s;
};

/// While alive, every line logged on this thread carries `fields` (in JSON). Works because the
/// server's loggers are synchronous: spdlog formats on the logging thread, inside the log call.
/// Nests: the inner scope's fields replace the outer's until it ends. `fields` must outlive it.
class ScopedLogFields {
 public:
  explicit ScopedLogFields(std::span<const LogField> fields) : previous_(current()) { current() = fields; }
  ~ScopedLogFields() { current() = previous_; }
  /// The fields of the lines this thread is logging now.
  static std::span<const LogField>& current() {
    thread_local std::span<const LogField> fields;
    return fields;
  }
  ScopedLogFields(const ScopedLogFields&) = delete;
  ScopedLogFields& operator=(const ScopedLogFields&) = delete;

 private:
  std::span<const LogField> previous_;
};

}  // namespace impulse
