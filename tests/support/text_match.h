// Small text matchers for tests, instead of std::regex: GCC 12's <regex> trips
// -Wmaybe-uninitialized (a false positive inside std::function) under ASan at -O2, which
// -Werror turns into a failed build.
#pragma once

#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>

namespace impulse::test {

/// True for an RFC 3339 UTC time with milliseconds, "YYYY-MM-DDTHH:MM:SS.mmmZ" (digits checked).
inline bool is_rfc3339_utc_ms(std::string_view s) {
  constexpr std::string_view shape = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (s.size() != shape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool ok = shape[i] == 'd' ? std::isdigit(static_cast<unsigned char>(s[i])) != 0 : s[i] == shape[i];
    if (!ok) return false;
  }
  return true;
}

/// The decimal number right after `prefix` in `line` (at most 5 digits, <= 65535), if any.
inline std::optional<uint16_t> port_after(std::string_view line, std::string_view prefix) {
  const size_t at = line.find(prefix);
  if (at == std::string_view::npos) return std::nullopt;
  uint32_t value = 0;
  size_t digits = 0;
  for (size_t i = at + prefix.size(); i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])); ++i) {
    value = value * 10 + static_cast<uint32_t>(line[i] - '0');
    if (++digits > 5 || value > 65535) return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  return static_cast<uint16_t>(value);
}

}  // namespace impulse::test
