// Hex text for binary blobs that travel through command lines, files and logs: connect tokens
// (docs/PROTOCOL.md, "Connection security"), key files and key ids. Header-only so the server,
// the client library and the tools share one definition without a link dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace impulse {

/// Lowercase hex of `bytes`, two characters per byte, most significant nibble first
/// ({0x0a, 0xff} -> "0aff"). Not constant-time: don't pass secrets you would not print.
inline std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(bytes.size() * 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    text[2 * i] = kDigits[bytes[i] >> 4];
    text[2 * i + 1] = kDigits[bytes[i] & 0x0f];
  }
  return text;
}

/// The value of one hex digit (0-9, a-f, A-F), or -1 for any other character.
inline int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Decodes hex text (either case; no prefix, separators or whitespace) into `out`.
/// @param out  replaced by the decoded bytes on success; cleared on failure; may be null to only
///             validate
/// @return false for an odd length or any non-hex character
inline bool from_hex(std::string_view text, std::vector<uint8_t>* out) {
  if (out) out->clear();
  if (text.size() % 2 != 0) return false;
  std::vector<uint8_t> bytes(text.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int high = hex_digit_value(text[2 * i]);
    const int low = hex_digit_value(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    bytes[i] = static_cast<uint8_t>((high << 4) | low);
  }
  if (out) *out = std::move(bytes);
  return true;
}

/// Decodes hex text of exactly 2 * out.size() characters into a fixed-size buffer (keys), with
/// no heap allocation. `out` is unspecified on failure.
/// @return false for a wrong length or any non-hex character
inline bool from_hex(std::string_view text, std::span<uint8_t> out) {
  if (text.size() != out.size() * 2) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    const int high = hex_digit_value(text[2 * i]);
    const int low = hex_digit_value(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<uint8_t>((high << 4) | low);
  }
  return true;
}

}  // namespace impulse
