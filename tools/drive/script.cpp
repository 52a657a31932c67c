#include "drive/script.h"

#include <charconv>
#include <cmath>

#include <fmt/core.h>

namespace impulse::drive {
namespace {

constexpr size_t kMaxSteps = 1000;
constexpr double kMaxStepSeconds = 3600;
constexpr double kMaxTotalSeconds = 86400;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

/// The next whitespace-separated number of *s, consumed; false when there is none or it is not a
/// finite decimal number.
bool take_number(std::string_view* s, double* value) {
  *s = trim(*s);
  size_t end = 0;
  while (end < s->size() && (*s)[end] != ' ' && (*s)[end] != '\t') ++end;
  const std::string_view word = s->substr(0, end);
  if (word.empty()) return false;
  const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), *value);
  if (ec != std::errc() || ptr != word.data() + word.size() || !std::isfinite(*value)) return false;
  s->remove_prefix(end);
  return true;
}

}  // namespace

bool parse_script(std::string_view text, std::vector<ScriptStep>* steps, std::string* error) {
  steps->clear();
  double total = 0;
  size_t index = 0;
  while (!text.empty()) {
    const size_t semicolon = text.find(';');
    std::string_view step = trim(text.substr(0, semicolon));
    text = semicolon == std::string_view::npos ? std::string_view() : text.substr(semicolon + 1);
    if (step.empty()) continue;
    ++index;
    const std::string shown(step.substr(0, 40));
    double throttle = 0, steer = 0, seconds = 0;
    if (!take_number(&step, &throttle) || !take_number(&step, &steer) || !take_number(&step, &seconds) ||
        !trim(step).empty()) {
      *error = fmt::format("step {} (\"{}\"): expected THROTTLE STEER SECONDS, three numbers", index, shown);
      return false;
    }
    if (std::fabs(throttle) > 1 || std::fabs(steer) > 1) {
      *error = fmt::format("step {} (\"{}\"): throttle and steer must be within [-1, 1]", index, shown);
      return false;
    }
    if (!(seconds > 0) || seconds > kMaxStepSeconds) {
      *error = fmt::format("step {} (\"{}\"): seconds must be in (0, {}]", index, shown, kMaxStepSeconds);
      return false;
    }
    if (steps->size() == kMaxSteps) {
      *error = fmt::format("more than {} steps", kMaxSteps);
      return false;
    }
    total += seconds;
    if (total > kMaxTotalSeconds) {
      *error = fmt::format("the script runs longer than {} s", kMaxTotalSeconds);
      return false;
    }
    steps->push_back({Controls{static_cast<float>(throttle), static_cast<float>(steer)}, seconds});
  }
  if (steps->empty()) {
    *error = "no steps: expected \"THROTTLE STEER SECONDS; ...\", e.g. \"1 0 3; 1 0.5 2; 0 0 3\"";
    return false;
  }
  return true;
}

bool script_controls(const std::vector<ScriptStep>& steps, double elapsed_s, Controls* controls) {
  double start = 0;
  for (const ScriptStep& s : steps) {
    if (elapsed_s < start + s.seconds) {
      *controls = s.controls;
      return true;
    }
    start += s.seconds;
  }
  *controls = Controls{};
  return false;
}

}  // namespace impulse::drive
