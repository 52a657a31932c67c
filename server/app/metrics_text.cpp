// The Prometheus text format 0.0.4: "# HELP", "# TYPE", then samples `name{label="value"} value`,
// one per line, each line ending in \n. Histograms are cumulative buckets with an inclusive
// upper bound `le`, the last one le="+Inf", plus _sum and _count.
#include "server/app/metrics_text.h"

#include <cmath>

#include <fmt/format.h>

namespace impulse::server::metrics {

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);  // shortest round-trip representation
}

Histogram::Histogram(std::initializer_list<double> upper_bounds) {
  for (const double b : upper_bounds) {
    if (bound_count_ == kMaxBounds || !std::isfinite(b)) continue;
    if (bound_count_ > 0 && !(b > bounds_[bound_count_ - 1])) continue;
    bounds_[bound_count_++] = b;
  }
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;
  size_t i = 0;
  while (i < bound_count_ && value > bounds_[i]) ++i;  // a handful of bounds: linear is fastest
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void ExpositionWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(text_), "# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help), name, type);
}

void ExpositionWriter::write_name_and_labels(std::string_view name, std::initializer_list<Label> labels) {
  text_ += name;
  if (labels.size() == 0) return;
  text_ += '{';
  bool first = true;
  for (const Label& l : labels) {
    if (!first) text_ += ',';
    first = false;
    fmt::format_to(std::back_inserter(text_), "{}=\"{}\"", l.name, escape_label_value(l.value));
  }
  text_ += '}';
}

void ExpositionWriter::sample(std::string_view name, std::initializer_list<Label> labels, double value) {
  write_name_and_labels(name, labels);
  text_ += ' ';
  text_ += format_value(value);
  text_ += '\n';
}

void ExpositionWriter::sample(std::string_view name, std::initializer_list<Label> labels, uint64_t value) {
  write_name_and_labels(name, labels);
  fmt::format_to(std::back_inserter(text_), " {}\n", value);
}

void ExpositionWriter::counter(std::string_view name, std::string_view help, uint64_t value) {
  family(name, "counter", help);
  sample(name, value);
}

void ExpositionWriter::gauge(std::string_view name, std::string_view help, double value) {
  family(name, "gauge", help);
  sample(name, value);
}

void ExpositionWriter::histogram(std::string_view name, std::string_view help, const Histogram& h) {
  family(name, "histogram", help);
  const std::string bucket = fmt::format("{}_bucket", name);
  uint64_t cumulative = 0;
  const auto bounds = h.bounds();
  const auto counts = h.counts();
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += counts[i];
    const std::string le = format_value(bounds[i]);
    sample(bucket, {{"le", le}}, cumulative);
  }
  cumulative += counts[bounds.size()];
  sample(bucket, {{"le", "+Inf"}}, cumulative);
  sample(fmt::format("{}_sum", name), h.sum());
  sample(fmt::format("{}_count", name), h.count());
}

}  // namespace impulse::server::metrics
