// Order statistics (median, nearest-rank percentile) and proc(5) status fields for the benchmark.
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace impulse::bench {

double median(std::span<const double> samples) {
  if (samples.empty()) return 0.0;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  return sorted.size() % 2 == 1 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
}

double percentile(std::span<const double> samples, double p) {
  if (samples.empty()) return 0.0;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const double clamped = std::clamp(p, 0.0, 100.0);
  // Nearest rank: ceil(p/100 * n), 1-based, at least 1.
  const auto rank = static_cast<size_t>(std::ceil(clamped / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

std::optional<uint64_t> read_status_kib(std::string_view field) {
  std::ifstream status("/proc/self/status");
  if (!status) return std::nullopt;
  std::string line;
  while (std::getline(status, line)) {
    if (line.size() <= field.size() || line.compare(0, field.size(), field) != 0 || line[field.size()] != ':') {
      continue;
    }
    const char* begin = line.c_str() + field.size() + 1;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(begin, &end, 10);
    if (end == begin) return std::nullopt;
    return static_cast<uint64_t>(value);
  }
  return std::nullopt;
}

bool reset_peak_rss() {
  std::FILE* file = std::fopen("/proc/self/clear_refs", "w");
  if (file == nullptr) return false;
  const bool written = std::fputs("5", file) >= 0;
  return std::fclose(file) == 0 && written;
}

}  // namespace impulse::bench
