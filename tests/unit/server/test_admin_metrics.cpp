// The admin endpoint's pure parts: the Prometheus text writer (escaping, values, cumulative
// histogram buckets ending in +Inf), the /metrics body's shape, health and readiness verdicts,
// and the admin flags.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "server/app/admin.h"
#include "server/app/config.h"
#include "server/app/metrics_text.h"

namespace impulse::server {
namespace {

using metrics::ExpositionWriter;
using metrics::Histogram;

TEST(MetricsText, LabelValuesEscapeBackslashQuoteAndNewlineOnly) {
  EXPECT_EQ(metrics::escape_label_value(R"(a\b"c)"
                                        "\n"
                                        "d"),
            R"(a\\b\"c\nd)");
  EXPECT_EQ(metrics::escape_label_value("plain"), "plain");
  EXPECT_EQ(metrics::escape_label_value("caf\xc3\xa9 {x=1}"), "caf\xc3\xa9 {x=1}");  // UTF-8 and braces as is
  EXPECT_EQ(metrics::escape_label_value(""), "");
}

TEST(MetricsText, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(metrics::escape_help("say \"hi\"\\\nnext"), "say \"hi\"\\\\\\nnext");
}

TEST(MetricsText, ValuesAreShortestRoundTripsAndSpecialsAreSpelledOut) {
  EXPECT_EQ(metrics::format_value(42.0), "42");
  EXPECT_EQ(metrics::format_value(0.0005), "0.0005");
  EXPECT_EQ(metrics::format_value(-2.5), "-2.5");
  EXPECT_EQ(metrics::format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(metrics::format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(metrics::format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  for (const double v : {0.1, 1.0 / 3.0, 1e-9, 123456789.123, 6.02e23}) {
    EXPECT_EQ(std::strtod(metrics::format_value(v).c_str(), nullptr), v) << metrics::format_value(v);
  }
}

TEST(MetricsText, HistogramBucketsAreInclusiveAndNaNIsIgnored) {
  Histogram h{1.0, 2.0, 5.0};
  for (const double v : {0.5, 1.0, 1.5, 7.0, std::numeric_limits<double>::quiet_NaN()}) h.observe(v);
  ASSERT_EQ(h.bounds().size(), 3u);
  ASSERT_EQ(h.counts().size(), 4u);
  EXPECT_EQ(h.counts()[0], 2u);  // 0.5 and 1.0: le is inclusive
  EXPECT_EQ(h.counts()[1], 1u);
  EXPECT_EQ(h.counts()[2], 0u);
  EXPECT_EQ(h.counts()[3], 1u);  // 7.0: above every bound
  EXPECT_EQ(h.count(), 4u);
  EXPECT_DOUBLE_EQ(h.sum(), 10.0);
}

TEST(MetricsText, HistogramDropsBoundsThatAreNotAscendingOrFinite) {
  const Histogram h{1.0, 0.5, 1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), 3.0};
  ASSERT_EQ(h.bounds().size(), 2u);
  EXPECT_EQ(h.bounds()[0], 1.0);
  EXPECT_EQ(h.bounds()[1], 3.0);
}

TEST(MetricsText, HistogramFamilyIsCumulativeEndsWithInfAndCarriesSumAndCount) {
  Histogram h{0.01, 0.1};
  for (const double v : {0.005, 0.05, 0.05, 2.0}) h.observe(v);
  ExpositionWriter w;
  w.histogram("x_seconds", "A test.", h);
  EXPECT_EQ(w.text(),
            "# HELP x_seconds A test.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.01\"} 1\n"
            "x_seconds_bucket{le=\"0.1\"} 3\n"
            "x_seconds_bucket{le=\"+Inf\"} 4\n"
            "x_seconds_sum 2.105\n"
            "x_seconds_count 4\n");
}

TEST(MetricsText, AnEmptyHistogramStillWritesEveryBucket) {
  ExpositionWriter w;
  w.histogram("y_seconds", "Empty.", Histogram{1.0});
  EXPECT_EQ(w.text(),
            "# HELP y_seconds Empty.\n# TYPE y_seconds histogram\n"
            "y_seconds_bucket{le=\"1\"} 0\ny_seconds_bucket{le=\"+Inf\"} 0\ny_seconds_sum 0\ny_seconds_count 0\n");
}

TEST(MetricsText, SamplesWithLabelsAreEscapedAndCountersAreExactIntegers) {
  ExpositionWriter w;
  w.family("a_total", "counter", "Line one\nline two.");
  w.sample("a_total", {{"reason", "say \"no\""}, {"path", "C:\\x"}}, uint64_t{18446744073709551615u});
  w.sample("a_total", {}, uint64_t{0});
  w.gauge("b_bytes", "A gauge.", 1.5);
  EXPECT_EQ(w.text(),
            "# HELP a_total Line one\\nline two.\n"
            "# TYPE a_total counter\n"
            "a_total{reason=\"say \\\"no\\\"\",path=\"C:\\\\x\"} 18446744073709551615\n"
            "a_total 0\n"
            "# HELP b_bytes A gauge.\n"
            "# TYPE b_bytes gauge\n"
            "b_bytes 1.5\n");
}

// Every sample line belongs to the family of the # TYPE line before it, names follow the
// conventions, and each family appears once.
TEST(AdminMetrics, TheBodyHasEveryFamilyOnceWithItsTypeAndConventionalNames) {
  MetricsSnapshot s;
  s.published = true;
  s.steps = 1234;
  s.clients = 3;
  s.bodies = 71;
  s.awake = 25;
  s.bytes_out = 99;
  s.drops[static_cast<size_t>(RejectReason::BadCookie)] = 5;
  s.results[0] = 7;
  s.tick_seconds.observe(0.003);
  s.recording = true;
  s.record_bytes_encoded = 1000;
  s.record_bytes_written = 400;
  ProcessFigures p;
  p.cpu_ok = p.memory_ok = true;
  p.cpu_seconds = 1.25;
  p.resident_bytes = 4096;
  const std::string text = render_metrics(s, p);

  std::map<std::string, std::string> types;  // family -> type
  std::string current;
  std::istringstream lines(text);
  int samples = 0;
  for (std::string line; std::getline(lines, line);) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name, type;
      f >> name >> type;
      EXPECT_TRUE(types.emplace(name, type).second) << "family twice: " << name;
      EXPECT_TRUE(name.rfind("impulse_", 0) == 0 || name.rfind("process_", 0) == 0) << name;
      if (type == "counter") {
        EXPECT_TRUE(name.ends_with("_total")) << name;
      }
      current = name;
      continue;
    }
    ++samples;
    const std::string series = line.substr(0, line.find_first_of("{ "));
    const bool own = series == current || (types[current] == "histogram" &&
                                           (series == current + "_bucket" || series == current + "_sum" ||
                                            series == current + "_count"));
    EXPECT_TRUE(own) << line << " under " << current;
  }
  EXPECT_GT(samples, 50);
  for (const char* required :
       {"impulse_tick_duration_seconds", "impulse_ticks_total", "impulse_dropped_steps_total", "impulse_clients",
        "impulse_bodies", "impulse_awake_bodies", "impulse_datagrams_received_total", "impulse_datagrams_sent_total",
        "impulse_received_bytes_total", "impulse_sent_bytes_total", "impulse_drops_total", "impulse_request_results_total",
        "impulse_snapshot_bytes_total", "impulse_event_bytes_total", "impulse_client_rtt_seconds",
        "impulse_recording_written_bytes_total", "impulse_recording_lag_bytes", "process_cpu_seconds_total",
        "process_resident_memory_bytes"}) {
    EXPECT_TRUE(types.count(required)) << required;
  }
  EXPECT_EQ(types["impulse_tick_duration_seconds"], "histogram");
  EXPECT_NE(text.find("impulse_ticks_total 1234\n"), std::string::npos);
  EXPECT_NE(text.find("impulse_drops_total{reason=\"BadCookie\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("impulse_request_results_total{code=\"Ok\"} 7\n"), std::string::npos);
  EXPECT_NE(text.find("impulse_request_results_total{code=\"NotAReplay\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("impulse_recording_lag_bytes 600\n"), std::string::npos);
  EXPECT_NE(text.find("impulse_tick_duration_seconds_bucket{le=\"0.004\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("process_resident_memory_bytes 4096\n"), std::string::npos);
}

TEST(AdminMetrics, RecordingFiguresAppearOnlyWhileRecording) {
  MetricsSnapshot s;
  const std::string text = render_metrics(s, ProcessFigures{});
  EXPECT_NE(text.find("impulse_recording_active 0\n"), std::string::npos);
  EXPECT_EQ(text.find("impulse_recording_lag_bytes"), std::string::npos);
  EXPECT_EQ(text.find("process_cpu_seconds_total"), std::string::npos);  // unreadable figures are left out
}

TEST(AdminMetrics, ProcessFiguresAreReadOnLinux) {
  const ProcessFigures p = read_process_figures();
  ASSERT_TRUE(p.cpu_ok && p.memory_ok && p.start_ok && p.fds_ok);
  EXPECT_GT(p.resident_bytes, 0u);
  EXPECT_GE(p.virtual_bytes, p.resident_bytes);
  EXPECT_GE(p.open_fds, 3u);                      // stdin, stdout, stderr at least
  EXPECT_GT(p.start_time_seconds, 1'600'000'000.0);  // after 2020
}

TEST(AdminMetrics, ReadersGetTheLatestPublishedSnapshot) {
  MetricsExchange exchange;
  MetricsSnapshot s;
  s.steps = 1;
  EXPECT_TRUE(exchange.publish(s));
  EXPECT_EQ(exchange.read().steps, 1u);
  s.steps = 2;
  EXPECT_TRUE(exchange.publish(s));
  EXPECT_EQ(exchange.read().steps, 2u);
}

TEST(AdminHealth, HealthFollowsTheLastCompletedTick) {
  HealthState h;
  EXPECT_EQ(check_health(h, 1'000'000'000, 2.0).status, 503);  // the loop has not run
  h.last_progress_ns = 10'000'000'000;
  EXPECT_EQ(check_health(h, 11'000'000'000, 2.0).status, 200);
  EXPECT_EQ(check_health(h, 12'000'000'000, 2.0).status, 200);  // exactly at the threshold
  const Verdict stalled = check_health(h, 12'500'000'000, 2.0);
  EXPECT_EQ(stalled.status, 503);
  EXPECT_NE(stalled.body.find("2.500 s ago"), std::string::npos) << stalled.body;
  h.draining = true;
  EXPECT_EQ(check_health(h, 99'000'000'000, 2.0).status, 200);  // stopping on purpose is not a stall
}

TEST(AdminHealth, ReadyOnlyOnceStartedAndUntilDraining) {
  HealthState h;
  EXPECT_EQ(check_ready(h).status, 503);
  h.ready = true;
  EXPECT_EQ(check_ready(h).status, 200);
  h.draining = true;
  const Verdict v = check_ready(h);
  EXPECT_EQ(v.status, 503);
  EXPECT_NE(v.body.find("draining"), std::string::npos);
}

TEST(AdminFlags, OffByDefaultOnLoopbackAndRangeChecked) {
  const ServerConfig defaults;
  EXPECT_EQ(defaults.admin_port, 0);
  EXPECT_EQ(defaults.admin_bind, "127.0.0.1");
  EXPECT_EQ(validate_config(defaults), "");

  const char* argv[] = {"impulse-server", "--admin-port", "9100", "--admin-bind", "0.0.0.0", "--health-stall-seconds", "1.5"};
  ServerConfig c;
  std::string message;
  ASSERT_EQ(parse_config(7, argv, c, &message), ParseStatus::Run) << message;
  EXPECT_EQ(c.admin_port, 9100);
  EXPECT_EQ(c.admin_bind, "0.0.0.0");
  EXPECT_EQ(c.health_stall_seconds, 1.5);

  for (const auto& [flag, value] : {std::pair{"--admin-port", "70000"}, std::pair{"--health-stall-seconds", "0"},
                                    std::pair{"--admin-port", "7777"}}) {
    const char* bad[] = {"impulse-server", flag, value};
    ServerConfig b;
    ASSERT_EQ(parse_config(3, bad, b, &message), ParseStatus::Error) << flag << " " << value;
    EXPECT_NE(message.find(flag), std::string::npos) << message;
  }
  ServerConfig below;
  below.admin_port = -2;
  EXPECT_NE(validate_config(below).find("--admin-port"), std::string::npos);
}

}  // namespace
}  // namespace impulse::server
