// The loop of every virtual-clock client test: step until a condition holds or a span of virtual
// time passes.
#pragma once

#include <chrono>

#include "impulse/client_core.h"

namespace impulse::client_test {

/// Calls `step()`, which must move `now` forward, until `done()` holds (checked before each step)
/// or `now` is `limit` past where it started. Returns whether done() held; bounded by `limit`.
template <class Done, class Step>
bool step_until(const ClientCore::TimePoint& now, std::chrono::nanoseconds limit, Done&& done, Step&& step) {
  const ClientCore::TimePoint end = now + limit;
  while (now < end) {
    if (done()) return true;
    step();
  }
  return done();
}

}  // namespace impulse::client_test
