// Whether a test asserts its wall-clock thresholds (tick p99, snapshot rate, probe latency).
// They hold only on a quiet machine, not beside another test under `ctest -j2` on two cores:
// `make test` asserts the mechanisms and prints the figures; .ci/run's timing stage sets
// IMPULSE_TIMING_CHECKS=1 and runs those tests alone, where the thresholds are asserted too
// (docs/BENCHMARKS.md, "Timing checks"). Never under a sanitizer.
#pragma once

#include <cstdlib>
#include <string_view>

namespace impulse::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

inline bool timing_checks() {
  const char* v = std::getenv("IMPULSE_TIMING_CHECKS");
  return !kSanitized && v != nullptr && std::string_view(v) == "1";
}

}  // namespace impulse::test
