// LinkSimulator: measured loss, duplication and reorder fractions within binomial tolerance,
// delays within [latency - jitter, latency + jitter (+ reorder delay)], delivery in due order,
// determinism for a seed, the in-flight caps, and condition validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <asio/ip/udp.hpp>

#include "shared/net/link_simulator.h"

namespace impulse::net {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint{} + 1h;

/// 4-sigma binomial tolerance of a measured fraction of n trials with probability p.
double binomial_tolerance(double p, double n) { return 4.0 * std::sqrt(p * (1.0 - p) / n); }

/// A datagram carrying its submission index, padded to `size` bytes.
std::vector<uint8_t> make_datagram(uint32_t index, size_t size = 16) {
  std::vector<uint8_t> b(std::max<size_t>(size, 4), static_cast<uint8_t>(index * 31u));
  std::memcpy(b.data(), &index, 4);
  return b;
}
uint32_t index_of(std::span<const uint8_t> b) {
  uint32_t i = 0;
  std::memcpy(&i, b.data(), 4);
  return i;
}

struct Delivery {
  TimePoint at;
  int to;
  uint32_t index;
  std::vector<uint8_t> bytes;
  bool operator==(const Delivery&) const = default;
};

/// Submits `count` datagrams, one every `interval` to address (index % 3), and delivers at every
/// event time until the simulator is empty. Returns the deliveries in order.
std::vector<Delivery> run(LinkSimulator<int>& sim, uint32_t count, std::chrono::nanoseconds interval,
                          size_t size = 16) {
  std::vector<Delivery> out;
  TimePoint now = kT0;
  uint32_t next = 0;
  for (int guard = 0; guard < 1'000'000; ++guard) {
    sim.deliver_due(now, [&](int to, std::span<const uint8_t> bytes) {
      out.push_back({now, to, index_of(bytes), std::vector<uint8_t>(bytes.begin(), bytes.end())});
    });
    if (next < count && kT0 + next * interval <= now) {
      sim.submit(static_cast<int>(next % 3), make_datagram(next, size), now);
      ++next;
    }
    std::optional<TimePoint> wake = sim.next_due();
    if (next < count) wake = std::min(wake.value_or(TimePoint::max()), kT0 + next * interval);
    if (!wake) break;
    now = std::max(now, *wake);
  }
  return out;
}

TEST(LinkConditions, ValidateNamesTheBadField) {
  LinkConditions c;
  std::string error;
  EXPECT_TRUE(c.validate(&error));
  EXPECT_FALSE(c.active());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double LinkConditions::*field;
    double value;
    const char* word;
  };
  const Case bad[] = {
      {&LinkConditions::loss, -0.01, "loss"},        {&LinkConditions::loss, 1.01, "loss"},
      {&LinkConditions::loss, nan, "loss"},          {&LinkConditions::duplicate, 2, "duplicate"},
      {&LinkConditions::reorder, -1, "reorder"},     {&LinkConditions::latency_ms, -1, "latency"},
      {&LinkConditions::latency_ms, inf, "latency"}, {&LinkConditions::latency_ms, 10001, "latency"},
      {&LinkConditions::jitter_ms, nan, "jitter"},   {&LinkConditions::reorder_delay_ms, -5, "reorder delay"},
  };
  for (const Case& k : bad) {
    LinkConditions x;
    x.*k.field = k.value;
    error.clear();
    EXPECT_FALSE(x.validate(&error)) << k.word << " " << k.value;
    EXPECT_NE(error.find(k.word), std::string::npos) << error;
    EXPECT_FALSE(x.validate(nullptr));
  }
  const Case good[] = {{&LinkConditions::loss, 1, ""},          {&LinkConditions::duplicate, 0.5, ""},
                       {&LinkConditions::reorder, 0.05, ""},    {&LinkConditions::latency_ms, 10000, ""},
                       {&LinkConditions::jitter_ms, 50, ""}};
  for (const Case& k : good) {
    LinkConditions x;
    x.*k.field = k.value;
    EXPECT_TRUE(x.validate(&error));
    EXPECT_TRUE(x.active());
  }
}

// A perfect link delivers everything once, unchanged, in order, at the submission time.
TEST(LinkSimulator, InactiveLinkDeliversEverythingInOrderAtOnce) {
  LinkSimulator<int> sim(LinkConditions{});
  const std::vector<Delivery> d = run(sim, 500, 1ms, 40);
  ASSERT_EQ(d.size(), 500u);
  for (uint32_t i = 0; i < 500; ++i) {
    EXPECT_EQ(d[i].index, i);
    EXPECT_EQ(d[i].to, static_cast<int>(i % 3));
    EXPECT_EQ(d[i].bytes, make_datagram(i, 40));
    EXPECT_EQ(d[i].at, kT0 + i * 1ms);
  }
  EXPECT_EQ(sim.in_flight(), 0u);
  EXPECT_EQ(sim.bytes_in_flight(), 0u);
}

// 10k datagrams: dropped, duplicated and reordered fractions within 4 binomial sigmas; every copy
// accounted for; each datagram delivered 0, 1 or 2 times.
TEST(LinkSimulator, FractionsMatchTheConditions) {
  LinkConditions c;
  c.loss = 0.25;
  c.duplicate = 0.05;
  c.reorder = 0.05;
  c.latency_ms = 100;
  c.jitter_ms = 50;
  c.seed = 42;
  LinkSimulator<int> sim(c);
  const uint32_t n = 10000;
  const std::vector<Delivery> d = run(sim, n, 1ms);
  const auto k = sim.counters();
  EXPECT_EQ(k.submitted, n);
  EXPECT_EQ(k.overflow, 0u);
  EXPECT_EQ(sim.in_flight(), 0u);
  const double kept = static_cast<double>(n - k.dropped);
  const double copies = kept + static_cast<double>(k.duplicated);
  EXPECT_NEAR(k.dropped / double(n), c.loss, binomial_tolerance(c.loss, n));
  EXPECT_NEAR(k.duplicated / kept, c.duplicate, binomial_tolerance(c.duplicate, kept));
  EXPECT_NEAR(k.reordered / copies, c.reorder, binomial_tolerance(c.reorder, copies));
  EXPECT_EQ(k.delivered, static_cast<uint64_t>(copies));
  EXPECT_EQ(d.size(), k.delivered);

  std::vector<int> times(n, 0);
  for (const Delivery& x : d) ++times[x.index];
  uint64_t once = 0, twice = 0;
  for (int t : times) {
    ASSERT_LE(t, 2);
    once += t == 1;
    twice += t == 2;
  }
  EXPECT_EQ(twice, k.duplicated);
  EXPECT_EQ(once + twice, n - k.dropped);
}

// Each copy's delay lies in [latency - jitter, latency + jitter], plus (0, reorder delay] for the
// reordered ones; delays cover the jitter range; deliveries come in due order.
TEST(LinkSimulator, DelaysWithinLatencyJitterAndReorderBounds) {
  for (double reorder : {0.0, 0.2}) {
    LinkConditions c;
    c.latency_ms = 100;
    c.jitter_ms = 50;
    c.reorder = reorder;
    c.reorder_delay_ms = 30;
    c.seed = 5;
    LinkSimulator<int> sim(c);
    const uint32_t n = 10000;
    const std::vector<Delivery> d = run(sim, n, 1ms);
    ASSERT_EQ(d.size(), n);
    double sum = 0, lo = 1e9, hi = 0;
    size_t above = 0, inversions = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      const double ms = std::chrono::duration<double, std::milli>(d[i].at - (kT0 + d[i].index * 1ms)).count();
      sum += ms;
      lo = std::min(lo, ms);
      hi = std::max(hi, ms);
      above += ms > 150.0;
      if (i > 0) {
        ASSERT_GE(d[i].at, d[i - 1].at);
        inversions += d[i].index < d[i - 1].index;
      }
    }
    EXPECT_GE(lo, 50.0);
    EXPECT_LT(lo, 51.0);
    if (reorder == 0) {
      EXPECT_LE(hi, 150.0);
      EXPECT_GT(hi, 149.0);
      EXPECT_EQ(above, 0u);
      // Mean of latency + U(-J, J): 1-sigma of the mean is J / sqrt(3 n) = 0.29 ms.
      EXPECT_NEAR(sum / n, 100.0, 1.2);
    } else {
      EXPECT_LE(hi, 180.0);
      EXPECT_GT(hi, 170.0);
      // Only reordered copies exceed 150 ms: P(R > 150 - U) = E[R] / 100 ms = 15 % of them.
      EXPECT_GT(above, 0u);
      EXPECT_LT(above, sim.counters().reordered);
      // The mean moves by reorder * reorder_delay / 2 = 3 ms.
      EXPECT_NEAR(sum / n, 103.0, 1.2);
    }
    EXPECT_GT(inversions, 100u);  // 1 ms apart with +-50 ms jitter: heavy reordering
  }
}

// Without jitter or reorder, a constant latency keeps FIFO order, and ties (same due time) are
// delivered in submission order.
TEST(LinkSimulator, ConstantLatencyKeepsOrder) {
  LinkConditions c;
  c.latency_ms = 30;
  LinkSimulator<int> sim(c);
  for (uint32_t i = 0; i < 100; ++i) sim.submit(1, make_datagram(i), kT0);  // all due together
  EXPECT_EQ(sim.next_due(), kT0 + 30ms);
  std::vector<uint32_t> order;
  sim.deliver_due(kT0 + 30ms - 1ns, [&](int, std::span<const uint8_t> b) { order.push_back(index_of(b)); });
  EXPECT_TRUE(order.empty());
  sim.deliver_due(kT0 + 30ms, [&](int, std::span<const uint8_t> b) { order.push_back(index_of(b)); });
  ASSERT_EQ(order.size(), 100u);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_FALSE(sim.next_due().has_value());
}

TEST(LinkSimulator, SameSeedSameDeliveriesOtherSeedOthers) {
  LinkConditions c;
  c.loss = 0.2;
  c.duplicate = 0.1;
  c.reorder = 0.1;
  c.latency_ms = 40;
  c.jitter_ms = 30;
  c.seed = 1234;
  LinkSimulator<int> a(c), b(c);
  const std::vector<Delivery> da = run(a, 3000, 2ms);
  const std::vector<Delivery> db = run(b, 3000, 2ms);
  EXPECT_EQ(da, db);
  c.seed = 1235;
  LinkSimulator<int> other(c);
  EXPECT_NE(run(other, 3000, 2ms), da);
}

// Beyond 4096 copies or 8 MiB in flight, new copies are refused and counted; once drained, the
// reused slots deliver intact bytes.
TEST(LinkSimulator, InFlightCapsRefuseAndCount) {
  LinkConditions c;
  c.latency_ms = 1000;
  LinkSimulator<int> sim(c);
  constexpr size_t kCap = LinkSimulator<int>::kMaxInFlight;
  for (uint32_t i = 0; i < kCap + 904; ++i) sim.submit(0, make_datagram(i), kT0);
  EXPECT_EQ(sim.in_flight(), kCap);
  EXPECT_EQ(sim.counters().overflow, 904u);
  size_t delivered = 0;
  sim.deliver_due(kT0 + 1s, [&](int, std::span<const uint8_t> b) {
    EXPECT_EQ(index_of(b), delivered);  // the first kCap were kept
    ++delivered;
  });
  EXPECT_EQ(delivered, kCap);
  EXPECT_EQ(sim.in_flight(), 0u);

  // Byte cap: 64 KiB datagrams, 128 fit in 8 MiB.
  const size_t big = 64 * 1024;
  for (uint32_t i = 0; i < 200; ++i) sim.submit(0, make_datagram(i, big), kT0 + 2s);
  EXPECT_EQ(sim.in_flight(), LinkSimulator<int>::kMaxInFlightBytes / big);
  EXPECT_EQ(sim.bytes_in_flight(), LinkSimulator<int>::kMaxInFlightBytes);
  EXPECT_EQ(sim.counters().overflow, 904u + 200u - 128u);
  delivered = 0;
  sim.deliver_due(kT0 + 3s, [&](int, std::span<const uint8_t> b) {
    EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), make_datagram(static_cast<uint32_t>(delivered), big));
    ++delivered;
  });
  EXPECT_EQ(delivered, 128u);
  EXPECT_EQ(sim.bytes_in_flight(), 0u);
}

// deliver may submit again (an echo): what it submits waits for a later call, even at zero
// latency, so the loop ends.
TEST(LinkSimulator, ResubmitFromDeliverWaitsForTheNextCall) {
  LinkSimulator<int> sim(LinkConditions{});
  sim.submit(0, make_datagram(0), kT0);
  int calls = 0;
  for (int round = 1; round <= 5; ++round) {
    sim.deliver_due(kT0, [&](int, std::span<const uint8_t> b) {
      ++calls;
      sim.submit(0, make_datagram(index_of(b) + 1), kT0);  // echo at once, zero latency
    });
    EXPECT_EQ(calls, round);
    EXPECT_EQ(sim.in_flight(), 1u);
  }
}

// At full capacity, an echo from deliver takes the one spare slot: the bytes being delivered
// stay valid (ASan checks the read) and the cap holds.
TEST(LinkSimulator, ResubmitFromDeliverAtFullCapacity) {
  LinkSimulator<int> sim(LinkConditions{});
  constexpr size_t kCap = LinkSimulator<int>::kMaxInFlight;
  for (uint32_t i = 0; i < kCap; ++i) sim.submit(0, make_datagram(i, 64), kT0);
  ASSERT_EQ(sim.in_flight(), kCap);
  uint32_t expected = 0;
  sim.deliver_due(kT0, [&](int, std::span<const uint8_t> b) {
    sim.submit(0, make_datagram(index_of(b) + 100000, 64), kT0);  // may reuse no slot but the spare
    EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), make_datagram(expected, 64));
    ++expected;
  });
  EXPECT_EQ(expected, kCap);
  EXPECT_EQ(sim.in_flight(), kCap);
  EXPECT_EQ(sim.counters().overflow, 0u);
}

// The server's address type works as is.
TEST(LinkSimulator, WorksWithUdpEndpoints) {
  LinkConditions c;
  c.latency_ms = 5;
  LinkSimulator<asio::ip::udp::endpoint> sim(c);
  const asio::ip::udp::endpoint to(asio::ip::make_address_v4("127.0.0.1"), 7777);
  const std::vector<uint8_t> bytes = make_datagram(9, 100);
  sim.submit(to, bytes, kT0);
  int n = 0;
  sim.deliver_due(kT0 + 5ms, [&](const asio::ip::udp::endpoint& e, std::span<const uint8_t> b) {
    EXPECT_EQ(e, to);
    EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), bytes);
    ++n;
  });
  EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace impulse::net
