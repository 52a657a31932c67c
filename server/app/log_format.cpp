// --log-format json: an RFC 8259 string escaper that also repairs ill-formed UTF-8, and a spdlog
// formatter that writes one JSON object per line with the thread's structured fields.
#include "server/app/log_format.h"

#include <atomic>
#include <cmath>
#include <ctime>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

namespace impulse::server {
namespace {


// Length of the well-formed UTF-8 sequence at the start of `s` (Unicode 15, table 3-7), or 0 when
// it is ill-formed; then *bad gets the length of its maximal ill-formed subpart (at least 1).
size_t utf8_sequence(std::string_view s, size_t* bad) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing beyond U+10FFFF
  } else {
    *bad = 1;  // a continuation byte, C0, C1 or F5..FF cannot start a sequence
    return 0;
  }
  for (size_t k = 1; k < length; ++k) {
    if (k >= s.size()) {
      *bad = k;  // truncated by the end of the text
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *bad = k;
      return 0;
    }
  }
  return length;
}

std::string_view level_name(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return "trace";
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    default: return "off";
  }
}

void append_field_value(std::string& out, const LogField& f) {
  switch (f.kind) {
    case LogField::Kind::Signed: fmt::format_to(std::back_inserter(out), "{}", f.i); break;
    case LogField::Kind::Unsigned: fmt::format_to(std::back_inserter(out), "{}", f.u); break;
    case LogField::Kind::Real:
      if (std::isfinite(f.d)) {
        fmt::format_to(std::back_inserter(out), "{}", f.d);  // shortest digits that read back exactly
      } else {
        out += "null";  // JSON has no NaN or infinity
      }
      break;
    case LogField::Kind::String:
      out += '"';
      append_json_escaped(out, f.s);
      out += '"';
      break;
  }
}

void append_json_line(std::string& out, const spdlog::details::log_msg& msg, std::span<const LogField> fields) {
  const auto since_epoch = msg.time.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const std::time_t t = static_cast<std::time_t>(seconds.count());
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  fmt::format_to(std::back_inserter(out), R"({{"time":"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z","level":"{}")",
                 utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                 static_cast<int>(millis < 0 ? 0 : millis), level_name(msg.level));
  if (msg.logger_name.size() > 0) {
    out += R"(,"logger":")";
    append_json_escaped(out, std::string_view(msg.logger_name.data(), msg.logger_name.size()));
    out += '"';
  }
  out += R"(,"message":")";
  append_json_escaped(out, std::string_view(msg.payload.data(), msg.payload.size()));
  out += '"';
  if (!msg.source.empty()) {
    out += R"(,"source":")";
    append_json_escaped(out, fmt::format("{}:{}", msg.source.filename, msg.source.line));
    out += '"';
  }
  for (const LogField& f : fields) {
    out += ",\"";
    append_json_escaped(out, f.key);
    out += "\":";
    append_field_value(out, f);
  }
  out += '}';
}

}  // namespace

bool parse_log_format(std::string_view name, LogFormat* format) {
  if (name == "text") {
    *format = LogFormat::Text;
  } else if (name == "json") {
    *format = LogFormat::Json;
  } else {
    return false;
  }
  return true;
}

void append_json_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) {  // every control character, so no line break or terminal escape survives
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xF];
      } else if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    size_t bad = 0;
    if (const size_t n = utf8_sequence(text.substr(i), &bad); n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      i += bad;
    }
  }
}

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  append_json_escaped(out, text);
  return out;
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  // A thread-local buffer: no allocation per line once it has grown.
  thread_local std::string line;
  line.clear();
  append_json_line(line, msg, ScopedLogFields::current());
  line += spdlog::details::os::default_eol;
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const { return std::make_unique<JsonLogFormatter>(); }

std::string format_json_log_line(const spdlog::details::log_msg& msg, std::span<const LogField> fields) {
  std::string out;
  append_json_line(out, msg, fields);
  return out;
}

void set_log_format(LogFormat format) {
  // Text leaves a pattern the embedding program chose alone, unless JSON replaced it here before.
  static std::atomic<bool> json_installed{false};
  if (format == LogFormat::Json) {
    spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
    json_installed.store(true);
  } else if (json_installed.exchange(false)) {
    spdlog::set_formatter(std::make_unique<spdlog::pattern_formatter>());  // spdlog's default pattern
  }
}

}  // namespace impulse::server
