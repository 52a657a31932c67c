// --log-format json: the RFC 8259 escaper (control characters, quotes, ill-formed UTF-8), the line
// formatter (time, level, fields), and lines logged through spdlog parsed back by nlohmann::json.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "server/app/log_format.h"
#include "server/net/reject_log.h"
#include "tests/support/rng.h"
#include "tests/support/text_match.h"

namespace impulse::server {
namespace {

/// The escaped text inside quotes, parsed as a JSON string (throws on invalid JSON).
std::string parse_back(const std::string& escaped) { return nlohmann::json::parse("\"" + escaped + "\"").get<std::string>(); }

TEST(JsonEscape, PlainTextIsCopied) {
  EXPECT_EQ(json_escape("client connected: 127.0.0.1:5000 id=3"), "client connected: 127.0.0.1:5000 id=3");
  EXPECT_EQ(json_escape(""), "");
}

TEST(JsonEscape, QuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(json_escape(R"(say "hi" \o/)"), R"(say \"hi\" \\o/)");
  EXPECT_EQ(parse_back(json_escape(R"(say "hi" \o/)")), R"(say "hi" \o/)");
}

TEST(JsonEscape, EveryControlCharacterBecomesAUnicodeEscape) {
  for (int c = 0; c < 0x20; ++c) {
    const std::string in(1, static_cast<char>(c));
    char expected[8];
    std::snprintf(expected, sizeof expected, "\\u%04x", c);
    EXPECT_EQ(json_escape(in), expected) << "U+" << c;
    EXPECT_EQ(parse_back(json_escape(in)), in) << "U+" << c;
  }
  EXPECT_EQ(json_escape("\x7f"), "\\u007f");  // DEL: legal raw in JSON, escaped for terminals
  EXPECT_EQ(json_escape(std::string_view("a\0b", 3)), "a\\u0000b");
  EXPECT_EQ(json_escape("line\nfake\r\n{\"level\":\"error\"}\x1b[31m"),
            "line\\u000afake\\u000d\\u000a{\\\"level\\\":\\\"error\\\"}\\u001b[31m");
}

TEST(JsonEscape, ValidUtf8IsKept) {
  const std::string text = "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf";  // é 中 😀 U+FFFF U+10FFFF
  EXPECT_EQ(json_escape(text), text);
  EXPECT_EQ(parse_back(json_escape(text)), text);
}

TEST(JsonEscape, IllFormedUtf8BecomesOneReplacementPerMaximalSubpart) {
  const std::string fffd = "\\ufffd";
  EXPECT_EQ(json_escape("a\x80z"), "a" + fffd + "z");                  // stray continuation byte
  EXPECT_EQ(json_escape("\xc0\xaf"), fffd + fffd);                      // overlong '/': C0 never starts a sequence
  EXPECT_EQ(json_escape("\xe0\x80\xaf"), fffd + fffd + fffd);           // overlong 3-byte form
  EXPECT_EQ(json_escape("\xed\xa0\x80"), fffd + fffd + fffd);           // a UTF-16 surrogate (U+D800)
  EXPECT_EQ(json_escape("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // beyond U+10FFFF
  EXPECT_EQ(json_escape("\xf5\xff\xfe"), fffd + fffd + fffd);
  EXPECT_EQ(json_escape("\xe2\x82"), fffd);                             // truncated by the end
  EXPECT_EQ(json_escape("\xf0\x9f\x98z"), fffd + "z");                  // truncated before 'z'
  EXPECT_EQ(json_escape("\xe2\x82\"\xe2\x82\xac"), fffd + "\\\"\xe2\x82\xac");  // then a quote, then a good €
  EXPECT_EQ(parse_back(json_escape("x\xff")), "x\xef\xbf\xbd");         // U+FFFD itself, once parsed
}

TEST(JsonEscape, AnyBytesGiveOneValidJsonStringWithoutRawControlCharacters) {
  test::Rng rng(18);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(rng.below(40), '\0');
    for (char& c : bytes) c = static_cast<char>(rng.next() & 0xFF);
    const std::string escaped = json_escape(bytes);
    for (char c : escaped) ASSERT_GE(static_cast<unsigned char>(c), 0x20) << "raw control character in output";
    ASSERT_NO_THROW(parse_back(escaped)) << "not a JSON string: " << escaped;
  }
}

spdlog::details::log_msg message(spdlog::level::level_enum level, std::string_view text, std::string_view logger = "") {
  spdlog::details::log_msg msg(logger, level, text);
  msg.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'795'000'000'123));
  return msg;
}

TEST(JsonLogLine, HasTimeLevelAndMessage) {
  const std::string line = format_json_log_line(message(spdlog::level::warn, "quota \"x\" hit\n"), {});
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2026-11-18T11:06:40.123Z");
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["message"], "quota \"x\" hit\n");
  EXPECT_FALSE(j.contains("logger"));  // the default logger has no name
  EXPECT_EQ(line.find('\n'), std::string::npos);
  for (auto [level, name] : {std::pair{spdlog::level::trace, "trace"}, std::pair{spdlog::level::debug, "debug"},
                             std::pair{spdlog::level::info, "info"}, std::pair{spdlog::level::err, "error"},
                             std::pair{spdlog::level::critical, "critical"}}) {
    EXPECT_EQ(nlohmann::json::parse(format_json_log_line(message(level, "m"), {}))["level"], name);
  }
  EXPECT_EQ(nlohmann::json::parse(format_json_log_line(message(spdlog::level::info, "m", "replay"), {}))["logger"],
            "replay");
}

TEST(JsonLogLine, FieldsKeepTheirTypes) {
  const LogField fields[] = {
      {"event", std::string_view("stats")},
      {"tick", uint64_t{18446744073709551615u}},
      {"clients", 3},
      {"offset", -7},
      {"tick_ms_p99", 1.25},
      {"ratio", 0.1},
      {"nan", std::numeric_limits<double>::quiet_NaN()},
      {"inf", std::numeric_limits<double>::infinity()},
      {"name", std::string_view("a\"b\x01")},
  };
  const nlohmann::json j = nlohmann::json::parse(format_json_log_line(message(spdlog::level::info, "stats"), fields));
  EXPECT_EQ(j["event"], "stats");
  EXPECT_EQ(j["tick"].get<uint64_t>(), 18446744073709551615u);
  EXPECT_TRUE(j["clients"].is_number_integer());
  EXPECT_EQ(j["clients"], 3);
  EXPECT_EQ(j["offset"], -7);
  EXPECT_EQ(j["tick_ms_p99"], 1.25);
  EXPECT_EQ(j["ratio"].get<double>(), 0.1);  // shortest round-trip digits
  EXPECT_TRUE(j["nan"].is_null());
  EXPECT_TRUE(j["inf"].is_null());
  EXPECT_EQ(j["name"], "a\"b\x01");
}

TEST(JsonLogLine, TimeIsRfc3339UtcWithMilliseconds) {
  spdlog::details::log_msg msg("", spdlog::level::info, "now");  // the current time
  const nlohmann::json j = nlohmann::json::parse(format_json_log_line(msg, {}));
  EXPECT_TRUE(impulse::test::is_rfc3339_utc_ms(j["time"].get<std::string>())) << j["time"];
  msg.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(5));  // 1970, 5 ms
  EXPECT_EQ(nlohmann::json::parse(format_json_log_line(msg, {}))["time"], "1970-01-01T00:00:00.005Z");
}

TEST(JsonLogLine, ThroughSpdlogOneObjectPerLineWithScopedFields) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("", sink);
  logger.set_formatter(std::make_unique<JsonLogFormatter>());
  logger.set_level(spdlog::level::trace);

  logger.info("before");
  {
    const LogField fields[] = {{"tick", 42}, {"event", std::string_view("stats")}};
    const ScopedLogFields scope(fields);
    logger.info("stats: tick={}", 42);
    {
      const LogField inner[] = {{"client", std::string_view("x")}};
      const ScopedLogFields nested(inner);
      logger.warn("nested");
    }
    logger.debug("outer again");
  }
  logger.error("after \"{}\"", "bad\nname");

  std::istringstream lines(out.str());
  std::vector<nlohmann::json> parsed;
  for (std::string line; std::getline(lines, line);) parsed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(parsed.size(), 5u) << out.str();
  EXPECT_FALSE(parsed[0].contains("tick"));
  EXPECT_EQ(parsed[1]["tick"], 42);
  EXPECT_EQ(parsed[1]["event"], "stats");
  EXPECT_EQ(parsed[2]["client"], "x");
  EXPECT_FALSE(parsed[2].contains("tick"));  // the inner scope replaces the outer's fields
  EXPECT_EQ(parsed[3]["tick"], 42);          // and restores them when it ends
  EXPECT_EQ(parsed[3]["level"], "debug");
  EXPECT_FALSE(parsed[4].contains("tick"));
  EXPECT_EQ(parsed[4]["message"], "after \"bad\nname\"");
}

TEST(LogFormat, SetLogFormatSwitchesTheDefaultLoggerAndBack) {
  std::ostringstream out;
  const auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_pattern("%v");  // the embedding program's own pattern
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::info);
  set_log_format(LogFormat::Text);  // leaves the program's pattern alone
  spdlog::info("plain one");
  set_log_format(LogFormat::Json);
  spdlog::info("json \"two\"");
  set_log_format(LogFormat::Text);  // back to spdlog's default pattern
  spdlog::info("plain three");
  spdlog::set_default_logger(previous);
  spdlog::set_level(spdlog::level::off);

  std::istringstream lines(out.str());
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  ASSERT_EQ(got.size(), 3u) << out.str();
  EXPECT_EQ(got[0], "plain one");
  EXPECT_EQ(nlohmann::json::parse(got[1])["message"], "json \"two\"");
  EXPECT_NE(got[2].find("[info] plain three"), std::string::npos) << got[2];
  EXPECT_EQ(got[2].front(), '[');
}

// RejectLog's lines carry their reason and counts as fields: the per-datagram debug line (with the
// address) and the rate-limited summary.
TEST(LogFormat, RejectLinesCarryTheirReasonAndCountsAsFields) {
  std::ostringstream out;
  const auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::debug);
  set_log_format(LogFormat::Json);
  RejectLog rejects;
  const auto now = std::chrono::steady_clock::time_point{} + std::chrono::seconds(5);
  const Endpoint from(asio::ip::make_address("192.0.2.7"), 4242);
  rejects.note(RejectReason::BadCookie, from, "stale", now);
  rejects.note(RejectReason::BadCookie, from, {}, now);
  rejects.flush(now);
  set_log_format(LogFormat::Text);
  spdlog::set_default_logger(previous);
  spdlog::set_level(spdlog::level::off);

  std::istringstream lines(out.str());
  std::vector<nlohmann::json> got;
  for (std::string line; std::getline(lines, line);) got.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(got.size(), 3u) << out.str();
  EXPECT_EQ(got[0].value("event", ""), "rejected") << got[0].dump();
  EXPECT_EQ(got[0].value("reason", ""), to_string(RejectReason::BadCookie)) << got[0].dump();
  EXPECT_EQ(got[0].value("address", ""), "192.0.2.7:4242") << got[0].dump();
  EXPECT_EQ(got[2].value("event", ""), "rejects") << got[2].dump();
  EXPECT_EQ(got[2].value("reason", ""), to_string(RejectReason::BadCookie));
  EXPECT_EQ(got[2].value("count", 0), 2);
  EXPECT_EQ(got[2].value("total", 0), 2);
  EXPECT_TRUE(got[2].contains("span_s") && got[2]["span_s"].is_number()) << got[2].dump();
}

TEST(LogFormat, ParsesTheFlagValues) {
  LogFormat f = LogFormat::Text;
  EXPECT_TRUE(parse_log_format("json", &f));
  EXPECT_EQ(f, LogFormat::Json);
  EXPECT_TRUE(parse_log_format("text", &f));
  EXPECT_EQ(f, LogFormat::Text);
  EXPECT_FALSE(parse_log_format("JSON", &f));
  EXPECT_FALSE(parse_log_format("", &f));
  EXPECT_EQ(f, LogFormat::Text);
}

}  // namespace
}  // namespace impulse::server
