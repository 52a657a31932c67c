// "HOST:PORT" parsing for the client CLI and tools (RFC 3986 authority form, IPv6 in brackets).
#include <charconv>
#include <string>
#include <string_view>

#include "impulse/client.h"

namespace impulse {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

}  // namespace

bool parse_host_port(std::string_view text, std::string* host, uint16_t* port, std::string* error) {
  const std::string_view input = trim(text);
  // Built by appending: GCC 12 -O3 reports a false -Wrestrict on "'" + std::string.
  std::string quoted(1, '\'');
  quoted.append(input).push_back('\'');
  constexpr std::string_view kExample = "expected HOST:PORT, e.g. 127.0.0.1:7777 or [::1]:7777";
  if (input.empty()) return fail(error, "empty server address: " + std::string(kExample));

  std::string_view host_part;
  std::string_view port_part;
  if (input.front() == '[') {
    const size_t close = input.find(']');
    if (close == std::string_view::npos) {
      return fail(error, "unclosed '[' in " + quoted + ": " + std::string(kExample));
    }
    host_part = input.substr(1, close - 1);
    const std::string_view rest = input.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return fail(error, "missing port in " + quoted + ": " + std::string(kExample));
    }
    port_part = rest.substr(1);
  } else {
    const size_t colon = input.rfind(':');
    if (colon == std::string_view::npos) {
      return fail(error, "missing port in " + quoted + ": " + std::string(kExample));
    }
    if (input.find(':') != colon) {
      return fail(error, "IPv6 address " + quoted + " needs brackets: [ADDRESS]:PORT, e.g. [::1]:7777");
    }
    host_part = input.substr(0, colon);
    port_part = input.substr(colon + 1);
  }

  if (host_part.empty()) return fail(error, "missing host in " + quoted + ": " + std::string(kExample));
  if (port_part.empty()) return fail(error, "missing port in " + quoted + ": " + std::string(kExample));

  unsigned value = 0;
  const char* first = port_part.data();
  const char* last = port_part.data() + port_part.size();
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc{} || end != last || port_part.front() == '+' || port_part.front() == '-') {
    return fail(error, "port '" + std::string(port_part) + "' in " + quoted + " is not a number 1..65535");
  }
  if (value < 1 || value > 65535) {
    return fail(error, "port " + std::string(port_part) + " in " + quoted + " is out of range 1..65535");
  }
  if (host != nullptr) *host = std::string(host_part);
  if (port != nullptr) *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace impulse
