// LinkConditions: the impairments of one simulated link direction (loss, latency, jitter,
// duplication, reordering). Standalone (standard headers only): the client's public API uses it
// for Client::set_link_conditions, the server for its --sim-* flags, LinkSimulator to apply it.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace impulse::net {

/// Conditions of one simulated link direction. Probabilities are per datagram, in [0, 1]; times
/// are in milliseconds, in [0, kMaxSimDelayMs].
struct LinkConditions {
  /// Longest latency, jitter or reorder delay accepted by validate() [ms].
  static constexpr double kMaxSimDelayMs = 10000.0;

  double loss = 0;        ///< probability that a datagram (with any duplicate) is never delivered
  double latency_ms = 0;  ///< mean one-way delay [ms]
  double jitter_ms = 0;   ///< each copy's delay is latency_ms + uniform(-jitter_ms, +jitter_ms), >= 0
  double duplicate = 0;   ///< probability that a delivered datagram is delivered twice
  double reorder = 0;     ///< probability that a copy is held back an extra uniform(0, reorder_delay_ms]
  double reorder_delay_ms = 50;  ///< longest extra delay of a reordered copy [ms]
  uint64_t seed = 1;      ///< PRNG seed: the same seed and inputs give the same deliveries

  /// True when any condition differs from a perfect link (the caller may then skip the simulator).
  bool active() const {
    return loss > 0 || latency_ms > 0 || jitter_ms > 0 || duplicate > 0 || reorder > 0;
  }

  /// Checks every field: probabilities finite and in [0, 1], times finite and in
  /// [0, kMaxSimDelayMs]. On failure returns false and sets *error (if non-null) to a message
  /// naming the field.
  bool validate(std::string* error) const {
    const auto fail = [error](const char* message) {
      if (error) *error = message;
      return false;
    };
    const auto probability = [](double p) { return std::isfinite(p) && p >= 0.0 && p <= 1.0; };
    const auto delay = [](double ms) { return std::isfinite(ms) && ms >= 0.0 && ms <= kMaxSimDelayMs; };
    if (!probability(loss)) return fail("sim loss must be a probability in [0, 1]");
    if (!probability(duplicate)) return fail("sim duplicate must be a probability in [0, 1]");
    if (!probability(reorder)) return fail("sim reorder must be a probability in [0, 1]");
    if (!delay(latency_ms)) return fail("sim latency must be in [0, 10000] ms");
    if (!delay(jitter_ms)) return fail("sim jitter must be in [0, 10000] ms");
    if (!delay(reorder_delay_ms)) return fail("sim reorder delay must be in [0, 10000] ms");
    return true;
  }
};

}  // namespace impulse::net
