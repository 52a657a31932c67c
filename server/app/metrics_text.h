// The Prometheus text exposition format (version 0.0.4), written by hand: Debian has no
// prometheus-cpp, and the format is small and fixed ("Exposition formats" in the Prometheus
// documentation). Pure functions and plain values, so every rule is unit-tested without a server.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace impulse::server::metrics {

/// The Content-Type of the text format.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

/// A label value escaped for the text format: backslash, double quote and line feed become
/// \\, \" and \n; everything else (UTF-8 included) is copied as is.
std::string escape_label_value(std::string_view value);
/// A HELP text escaped for the text format: backslash and line feed become \\ and \n.
std::string escape_help(std::string_view help);
/// A sample value or a bucket bound: +Inf, -Inf, NaN, or the shortest decimal that reads back
/// to the same double (integers without a fraction, e.g. 42).
std::string format_value(double value);

/// A cumulative-on-output histogram with fixed upper bounds, held as plain values (no
/// allocation, trivially copyable) so it can be copied into a once-per-tick snapshot.
class Histogram {
 public:
  static constexpr size_t kMaxBounds = 24;

  Histogram() = default;
  /// `upper_bounds`: strictly ascending and finite, at most kMaxBounds; the +Inf bucket is
  /// implicit. Bounds that break the rule are dropped (never throws).
  explicit Histogram(std::initializer_list<double> upper_bounds);

  /// Counts `value` in the first bucket whose bound is >= value (le is inclusive) and adds it
  /// to the sum. A NaN is ignored (it would poison the sum).
  void observe(double value);

  std::span<const double> bounds() const { return {bounds_.data(), bound_count_}; }
  /// Per bucket, not cumulative: counts()[i] for bounds()[i], the last one above every bound.
  std::span<const uint64_t> counts() const { return {counts_.data(), bound_count_ + 1}; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::array<double, kMaxBounds> bounds_{};
  std::array<uint64_t, kMaxBounds + 1> counts_{};
  size_t bound_count_ = 0;
  uint64_t count_ = 0;
  double sum_ = 0;
};

/// One label of a sample: its name (a valid label name; not checked) and its value (escaped by
/// the writer).
struct Label {
  std::string_view name;
  std::string_view value;
};

/// Appends metric families to a text body. Call family() once per metric name, then its
/// samples; names are the caller's constants and are not validated.
class ExpositionWriter {
 public:
  /// "# HELP name help" and "# TYPE name type" (type: counter, gauge, histogram, untyped).
  void family(std::string_view name, std::string_view type, std::string_view help);
  /// "name{labels} value".
  void sample(std::string_view name, std::initializer_list<Label> labels, double value);
  void sample(std::string_view name, double value) { sample(name, {}, value); }
  /// An integer sample, written exactly (a double would round counters above 2^53).
  void sample(std::string_view name, std::initializer_list<Label> labels, uint64_t value);
  void sample(std::string_view name, uint64_t value) { sample(name, {}, value); }

  /// Convenience: family() plus one unlabelled sample.
  void counter(std::string_view name, std::string_view help, uint64_t value);
  void gauge(std::string_view name, std::string_view help, double value);
  /// A whole histogram family: name_bucket{le=...} (cumulative, ending with le="+Inf", which
  /// equals name_count), name_sum and name_count.
  void histogram(std::string_view name, std::string_view help, const Histogram& h);

  const std::string& text() const { return text_; }
  std::string take() { return std::move(text_); }

 private:
  void write_name_and_labels(std::string_view name, std::initializer_list<Label> labels);
  std::string text_;
};

}  // namespace impulse::server::metrics
