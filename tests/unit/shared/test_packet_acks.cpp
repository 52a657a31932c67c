// PacketAcks: ack fields against a reference set under random loss, reordering and duplication;
// every acked sequence reported exactly once; RTT and loss estimates against closed forms over a
// simulated link driven by a fake clock; hostile ack fields change nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "shared/net/link_simulator.h"
#include "shared/net/packet_acks.h"
#include "tests/support/rng.h"

namespace impulse::net {
namespace {

using namespace std::chrono_literals;
using ::impulse::test::Rng;

const TimePoint kT0 = TimePoint{} + 1h;

bool same(const LinkEstimates& a, const LinkEstimates& b) {
  return a.rtt_ms == b.rtt_ms && a.rtt_jitter_ms == b.rtt_jitter_ms && a.loss == b.loss && a.sent == b.sent &&
         a.acked == b.acked && a.lost == b.lost && a.sent_bytes == b.sent_bytes && a.acked_bytes == b.acked_bytes;
}

/// The ack fields a reference receiver derives from the set of accepted sequences.
AckFields reference_fields(const std::set<uint32_t>& received) {
  AckFields f;
  if (received.empty()) return f;
  f.ack = *received.rbegin();
  for (uint32_t i = 0; i < kAckBits && f.ack > i + 1; ++i) {
    if (received.count(f.ack - 1 - i)) f.ack_bits |= 1u << i;
  }
  return f;
}

TEST(PacketAcks, SequencesStartAtOneAndCountUp) {
  PacketAcks acks;
  EXPECT_EQ(acks.last_sent(), 0u);
  EXPECT_EQ(acks.newest_received(), 0u);
  EXPECT_EQ(acks.ack_fields().ack, 0u);
  EXPECT_EQ(acks.ack_fields().ack_bits, 0u);
  for (uint32_t s = 1; s <= 3000; ++s) EXPECT_EQ(acks.on_send(kT0, 100), s);
  EXPECT_EQ(acks.last_sent(), 3000u);
  EXPECT_EQ(acks.estimates().sent, 3000u);
  EXPECT_EQ(acks.estimates().sent_bytes, 300000u);
}

// Property: after every accepted datagram, ack/ack_bits equal what a std::set of the received
// sequences says, and on_receive's verdict matches the reference rule (0, duplicate, too old).
TEST(PacketAcks, AckBitsEqualReferenceSetUnderRandomLossReorderAndDuplicates) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    PacketAcks acks;
    std::set<uint32_t> reference;
    uint32_t newest = 0;
    const uint32_t loss_percent = rng.below(60);
    // A sender's sequences 1..3000, lost at random, delivered with a random displacement of up to
    // 48 places (so some arrive more than 32 behind the newest), some twice, some as 0.
    std::vector<std::pair<uint32_t, uint32_t>> arrivals;  // (arrival key, sequence)
    for (uint32_t s = 1; s <= 3000; ++s) {
      if (rng.below(100) < loss_percent) continue;
      arrivals.push_back({s + rng.below(48), s});
      if (rng.below(100) < 5) arrivals.push_back({s + rng.below(48), s});
      if (rng.below(1000) < 3) arrivals.push_back({s, 0});
    }
    std::stable_sort(arrivals.begin(), arrivals.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, s] : arrivals) {
      const bool expected = s != 0 && !reference.count(s) && !(s < newest && newest - s > kAckBits);
      ASSERT_EQ(acks.on_receive(s), expected) << "seed " << seed << " sequence " << s << " newest " << newest;
      if (expected) {
        reference.insert(s);
        newest = std::max(newest, s);
      }
      const AckFields want = reference_fields(reference);
      const AckFields got = acks.ack_fields();
      ASSERT_EQ(got.ack, want.ack) << "seed " << seed;
      ASSERT_EQ(got.ack_bits, want.ack_bits) << "seed " << seed << " after " << s;
      ASSERT_EQ(acks.newest_received(), newest);
    }
  }
}

TEST(PacketAcks, DuplicatesZeroAndTooOldAddNothing) {
  PacketAcks acks;
  EXPECT_FALSE(acks.on_receive(0));
  EXPECT_TRUE(acks.on_receive(100));
  EXPECT_FALSE(acks.on_receive(100));  // duplicate
  EXPECT_TRUE(acks.on_receive(68));    // ack - 32: the oldest representable, bit 31
  EXPECT_FALSE(acks.on_receive(67));   // ack - 33: too old
  EXPECT_TRUE(acks.on_receive(99));
  AckFields f = acks.ack_fields();
  EXPECT_EQ(f.ack, 100u);
  EXPECT_EQ(f.ack_bits, (1u << 31) | 1u);
  EXPECT_FALSE(acks.on_receive(68));  // duplicate of an old one

  // A forward jump far beyond the buffer is recorded; the slots it skipped read as not received.
  EXPECT_TRUE(acks.on_receive(100 + 5 * kSequenceBufferSize));
  f = acks.ack_fields();
  EXPECT_EQ(f.ack, 100 + 5 * kSequenceBufferSize);
  EXPECT_EQ(f.ack_bits, 0u);
  // 99 and 100 alias slots of the new window's past: old, never reported again.
  EXPECT_FALSE(acks.on_receive(100));
  EXPECT_TRUE(acks.on_receive(100 + 5 * kSequenceBufferSize - 1));
  EXPECT_EQ(acks.ack_fields().ack_bits, 1u);

  // The largest sequence is accepted like any other.
  EXPECT_TRUE(acks.on_receive(std::numeric_limits<uint32_t>::max()));
  EXPECT_EQ(acks.ack_fields().ack, std::numeric_limits<uint32_t>::max());
}

// Bits that would name sequence 0 or below only appear for ack <= 32; a fresh receiver never
// sets them.
TEST(PacketAcks, FirstSequencesNeverSetBitsBelowOne) {
  PacketAcks acks;
  for (uint32_t s = 1; s <= 40; ++s) {
    ASSERT_TRUE(acks.on_receive(s));
    const AckFields f = acks.ack_fields();
    const uint32_t valid_bits = std::min<uint32_t>(s - 1, kAckBits);
    const uint32_t expected = valid_bits == 32 ? 0xFFFFFFFFu : (1u << valid_bits) - 1;
    ASSERT_EQ(f.ack_bits, expected) << s;
  }
}

// --- Two peers over a simulated link, driven by a fake clock ------------------------------------

/// Header of a test datagram: the fields a real packet header carries, little-endian.
struct TestHeader {
  uint32_t sequence = 0;
  AckFields ack;
};
std::vector<uint8_t> encode(const TestHeader& h) {
  std::vector<uint8_t> b(12);
  std::memcpy(b.data(), &h.sequence, 4);
  std::memcpy(b.data() + 4, &h.ack.ack, 4);
  std::memcpy(b.data() + 8, &h.ack.ack_bits, 4);
  return b;
}
TestHeader decode(std::span<const uint8_t> b) {
  TestHeader h;
  std::memcpy(&h.sequence, b.data(), 4);
  std::memcpy(&h.ack.ack, b.data() + 4, 4);
  std::memcpy(&h.ack.ack_bits, b.data() + 8, 4);
  return h;
}

struct Peer {
  PacketAcks acks;
  LinkSimulator<int> link;  // this peer's outgoing direction
  std::chrono::nanoseconds send_interval;
  bool reply_on_receive = false;  // send an ack-only datagram for every accepted one
  bool sending = true;            // false: only replies (keep acking, stop the periodic sends)
  TimePoint next_send;
  std::vector<uint32_t> newly_acked;   // every sequence on_acks reported, in report order
  std::set<uint32_t> received;         // sequences on_receive accepted
  std::vector<float> rtt_samples_ms;   // estimates().rtt_ms after each on_acks that acked something
  std::vector<float> jitter_samples_ms;  // estimates().rtt_jitter_ms likewise

  Peer(const LinkConditions& c, std::chrono::nanoseconds interval, TimePoint start)
      : link(c), send_interval(interval), next_send(start) {}

  void send(TimePoint now) {
    const uint32_t s = acks.on_send(now, 12);
    link.submit(0, encode({s, acks.ack_fields()}), now);
  }
};

/// Runs both peers until `end`: each wake-up delivers what is due, then sends what is due.
void run_link(Peer& a, Peer& b, TimePoint start, TimePoint end) {
  std::vector<uint32_t> scratch;
  const auto receive = [&scratch](Peer& self, std::span<const uint8_t> bytes, TimePoint now) {
    const TestHeader h = decode(bytes);
    const bool fresh = self.acks.on_receive(h.sequence);
    if (fresh) self.received.insert(h.sequence);
    scratch.clear();
    EXPECT_TRUE(self.acks.on_acks(h.ack, now, &scratch));
    EXPECT_TRUE(std::is_sorted(scratch.begin(), scratch.end()));
    self.newly_acked.insert(self.newly_acked.end(), scratch.begin(), scratch.end());
    if (!scratch.empty()) {
      self.rtt_samples_ms.push_back(self.acks.estimates().rtt_ms);
      self.jitter_samples_ms.push_back(self.acks.estimates().rtt_jitter_ms);
    }
    return fresh;
  };
  TimePoint now = start;
  for (int guard = 0; guard < 10'000'000 && now <= end; ++guard) {
    a.link.deliver_due(now, [&](int, std::span<const uint8_t> bytes) {
      if (receive(b, bytes, now) && b.reply_on_receive) b.send(now);
    });
    b.link.deliver_due(now, [&](int, std::span<const uint8_t> bytes) {
      if (receive(a, bytes, now) && a.reply_on_receive) a.send(now);
    });
    for (Peer* p : {&a, &b}) {
      if (p->sending && p->next_send <= now) {
        p->send(now);
        p->next_send += p->send_interval;
      }
    }
    // Next event: a send or a delivery, whichever comes first.
    TimePoint next = end + 1ns;
    for (Peer* p : {&a, &b}) {
      if (p->sending) next = std::min(next, p->next_send);
      if (auto due = p->link.next_due()) next = std::min(next, *due);
    }
    now = std::max(next, now);
  }
}

// Over a lossy, duplicating, reordering link both ways, each sequence is reported exactly once
// however many headers ack it, only received sequences are reported, and all of them are.
TEST(PacketAcks, EveryAckedSequenceReportedExactlyOnce) {
  LinkConditions c;
  c.loss = 0.3;
  c.latency_ms = 40;
  c.jitter_ms = 20;
  c.duplicate = 0.1;
  c.reorder = 0.1;
  c.seed = 7;
  LinkConditions back = c;
  back.seed = 8;
  Peer a(c, 10ms, kT0);
  Peer b(back, 10ms, kT0 + 3ms);
  run_link(a, b, kT0, kT0 + 30s);
  a.sending = false;  // quiet tail: B keeps sending, so A's last datagrams get acked
  b.sending = true;
  run_link(a, b, kT0 + 30s, kT0 + 32s);

  for (const Peer* p : {&a, &b}) {
    const Peer& other = p == &a ? b : a;
    std::set<uint32_t> reported(p->newly_acked.begin(), p->newly_acked.end());
    EXPECT_EQ(reported.size(), p->newly_acked.size()) << "a sequence was reported twice";
    EXPECT_EQ(p->acks.estimates().acked, p->newly_acked.size());
    for (uint32_t s : reported) EXPECT_TRUE(other.received.count(s)) << "acked but never received: " << s;
    // Each received sequence sits in ~33 of the peer's headers, each lost with p = 0.3: all
    // reach the sender (except B's last ones, sent after A went quiet and never acked).
    size_t missing = 0;
    for (uint32_t s : other.received) missing += reported.count(s) == 0;
    if (p == &a) {
      EXPECT_EQ(missing, 0u);
    } else {
      EXPECT_LE(missing, 250u);  // B's datagrams in the 2 s tail (A no longer sends any acks)
    }
    EXPECT_GT(reported.size(), 1500u);
  }
}

// Constant one-way delay L and an immediate reply: every RTT sample is 2 L, so the smoothed RTT
// is exact and the jitter 0.
TEST(PacketAcks, RttEqualsConstantRoundTrip) {
  LinkConditions c;
  c.latency_ms = 50;
  Peer a(c, 16ms, kT0);
  Peer b(c, 1h, kT0 + 1h);  // B sends only replies
  b.reply_on_receive = true;
  b.sending = false;
  run_link(a, b, kT0, kT0 + 5s);
  const LinkEstimates e = a.acks.estimates();
  EXPECT_NEAR(e.rtt_ms, 100.0f, 1e-3f);
  EXPECT_NEAR(e.rtt_jitter_ms, 0.0f, 1e-3f);
  EXPECT_EQ(e.lost, 0u);
  EXPECT_EQ(e.loss, 0.0f);
  EXPECT_GE(e.acked + 7, e.sent);  // the last ~100 ms are still in flight
}

// One-way delays L + U, U uniform in [-J, J], and an immediate reply: samples are 2 L + U1 + U2,
// so the smoothed RTT averages 2 L and the jitter E|U1 + U2| = 2 J / 3 (the triangular
// distribution's mean absolute deviation), plus a little from the smoothed RTT's own noise
// (1-sigma sqrt(0.1 / 1.9) * J sqrt(2 / 3) = 3.7 ms here).
TEST(PacketAcks, RttAndJitterConvergeUnderUniformJitter) {
  LinkConditions c;
  c.latency_ms = 50;
  c.jitter_ms = 20;
  c.seed = 3;
  LinkConditions back = c;
  back.seed = 4;
  // One send per 100 ms, more than the 80 ms spread of a round trip: each reply arrives before
  // the next one, so each sample is one datagram's round trip and nothing else.
  Peer a(c, 100ms, kT0);
  Peer b(back, 1h, kT0 + 1h);
  b.reply_on_receive = true;
  b.sending = false;
  run_link(a, b, kT0, kT0 + 320s);
  ASSERT_GT(a.rtt_samples_ms.size(), 3000u);
  // Time averages over the last 3000 acks (the EMA is unbiased; its noise averages out).
  double rtt_sum = 0, jitter_sum = 0;
  const size_t n = 3000;
  for (size_t i = a.rtt_samples_ms.size() - n; i < a.rtt_samples_ms.size(); ++i) {
    rtt_sum += a.rtt_samples_ms[i];
    jitter_sum += a.jitter_samples_ms[i];
  }
  EXPECT_NEAR(rtt_sum / n, 100.0, 1.0);
  // E|U1 + U2 - e| with e the smoothed RTT's N(0, 3.7 ms) error: 2 J / 3 + 0.35 ms. The time
  // average's 1-sigma is about 0.2 ms.
  EXPECT_NEAR(jitter_sum / n, 40.0 / 3.0 + 0.35, 0.8);
  const LinkEstimates e = a.acks.estimates();
  EXPECT_NEAR(e.rtt_ms, 100.0f, 12.0f);  // a single reading: about 3 sigma
  EXPECT_NEAR(e.rtt_jitter_ms, 40.0f / 3.0f, 7.0f);  // a single reading: 1-sigma 2.2 ms
  EXPECT_EQ(e.lost, 0u);  // 2 * 100 + 4 * 13 ms of timeout against samples of at most 140 ms
}

// 25 % loss both ways over 2000 datagrams: the counters are exact (every dropped datagram is
// lost, every delivered one acked, because each is named by ~33 of the peer's headers), and the
// smoothed loss is within 0.05 of 0.25 (about 2.6 sigma for its 256-datagram time constant).
TEST(PacketAcks, LossEstimateConvergesToSimulatedLoss) {
  LinkConditions c;
  c.loss = 0.25;
  c.latency_ms = 20;
  c.jitter_ms = 5;
  c.seed = 11;
  LinkConditions back = c;
  back.seed = 12;
  Peer a(c, 10ms, kT0);
  Peer b(back, 10ms, kT0 + 5ms);
  run_link(a, b, kT0, kT0 + 20s - 1ns);  // 2000 sends from A
  ASSERT_EQ(a.acks.last_sent(), 2000u);
  a.sending = false;
  run_link(a, b, kT0 + 20s, kT0 + 21s);  // B keeps acking: A's last datagrams get decided

  const LinkEstimates e = a.acks.estimates();
  const auto sim = a.link.counters();
  EXPECT_EQ(sim.submitted, 2000u);
  EXPECT_EQ(e.lost, sim.dropped);
  EXPECT_EQ(e.acked, sim.submitted - sim.dropped);
  EXPECT_NEAR(static_cast<double>(sim.dropped) / 2000.0, 0.25, 0.04);  // the simulator itself
  EXPECT_NEAR(e.loss, 0.25f, 0.05f);
  EXPECT_EQ(e.ignored_acks, 0u);
}

// A silent peer: nothing is acked, so after the loss timeout every datagram counts as lost and
// the estimate climbs to 1 without any on_acks call.
TEST(PacketAcks, SilentPeerDrivesLossToOne) {
  PacketAcks acks;
  TimePoint now = kT0;
  for (int i = 0; i < 600; ++i, now += 16ms) acks.on_send(now, 50);
  const LinkEstimates e = acks.estimates();
  // Sends older than the 200 ms floor are decided: all but the last 13.
  EXPECT_EQ(e.lost, 600u - 13u);
  EXPECT_NEAR(e.loss, 1.0f, 1e-6f);
  EXPECT_EQ(e.acked, 0u);
}

TEST(PacketAcks, LateAckMovesALostDatagramBackToAcked) {
  PacketAcks acks;
  ASSERT_EQ(acks.on_send(kT0, 10), 1u);
  ASSERT_EQ(acks.on_send(kT0 + 300ms, 10), 2u);  // decides 1 as lost (floor 200 ms)
  EXPECT_EQ(acks.estimates().lost, 1u);
  std::vector<uint32_t> acked;
  EXPECT_TRUE(acks.on_acks({2, 1u}, kT0 + 350ms, &acked));  // acks 2 and, late, 1
  EXPECT_EQ(acked, (std::vector<uint32_t>{1, 2}));
  const LinkEstimates e = acks.estimates();
  EXPECT_EQ(e.lost, 0u);
  EXPECT_EQ(e.acked, 2u);
  EXPECT_EQ(e.acked_bytes, 20u);
  // Samples 350 ms then 50 ms: rtt = 350 + 0.1 (50 - 350), jitter = 0.1 * 300.
  EXPECT_NEAR(e.rtt_ms, 320.0f, 1e-3f);
  EXPECT_NEAR(e.rtt_jitter_ms, 30.0f, 1e-3f);
  acked.clear();
  EXPECT_TRUE(acks.on_acks({2, 1u}, kT0 + 400ms, &acked));  // redundant: nothing new
  EXPECT_TRUE(acked.empty());
  EXPECT_EQ(acks.estimates().acked, 2u);
}

// More than kSequenceBufferSize datagrams unacked: the oldest are decided lost when their slot is
// reused, and a late ack of one of them is ignored (its slot now describes a newer datagram).
TEST(PacketAcks, SentBufferOverflowCountsOldestAsLost) {
  PacketAcks acks;
  for (uint32_t i = 0; i < 1500; ++i) acks.on_send(kT0, 10);  // all at once: none timed out
  EXPECT_EQ(acks.estimates().lost, 1500u - kSequenceBufferSize);
  std::vector<uint32_t> acked;
  EXPECT_TRUE(acks.on_acks({1500 - kSequenceBufferSize, 0}, kT0 + 1ms, &acked));  // slot reused
  EXPECT_TRUE(acked.empty());
  EXPECT_TRUE(acks.on_acks({1500, 0}, kT0 + 1ms, &acked));
  EXPECT_EQ(acked, (std::vector<uint32_t>{1500}));
}

TEST(PacketAcks, HostileAckFieldsChangeNothing) {
  PacketAcks acks;
  for (int i = 0; i < 40; ++i) acks.on_send(kT0 + i * 1ms, 100);
  std::vector<uint32_t> acked;
  ASSERT_TRUE(acks.on_acks({3, 0b11}, kT0 + 50ms, &acked));  // a legitimate ack of 1, 2, 3
  ASSERT_EQ(acked, (std::vector<uint32_t>{1, 2, 3}));
  const LinkEstimates before = acks.estimates();

  const AckFields hostile[] = {
      {41, 0},                    // one beyond last_sent
      {40 + 1000000, 0xFFFFFFFF},  // far beyond
      {0xFFFFFFFF, 0xFFFFFFFF},   // the largest values
      {0xFFFFFFFF, 0},
      {0, 1},                     // "nothing received" with bits set
      {0, 0xFFFFFFFF},
      {5, 1u << 4},               // bit 4 of ack 5 names sequence 0
      {5, 1u << 31},              // names a negative sequence
      {1, 1},                     // names sequence 0
  };
  uint64_t ignored = 0;
  for (const AckFields& f : hostile) {
    acked.clear();
    EXPECT_FALSE(acks.on_acks(f, kT0 + 60ms, &acked)) << f.ack << " " << f.ack_bits;
    EXPECT_TRUE(acked.empty());
    EXPECT_TRUE(same(acks.estimates(), before));
    EXPECT_EQ(acks.estimates().ignored_acks, ++ignored);
  }
  // A valid "nothing received yet" is not hostile and changes nothing either.
  EXPECT_TRUE(acks.on_acks({0, 0}, kT0 + 60ms, &acked));
  EXPECT_TRUE(acked.empty());
  EXPECT_TRUE(same(acks.estimates(), before));
  // The connection still works afterwards: acks of 33 and 40 (and bits naming 4..39 acked
  // before or not: 8 = bit 31 of 40).
  EXPECT_TRUE(acks.on_acks({40, (1u << 6) | (1u << 31)}, kT0 + 70ms, &acked));
  EXPECT_EQ(acked, (std::vector<uint32_t>{8, 33, 40}));
  // A null output vector is allowed.
  EXPECT_TRUE(acks.on_acks({39, 0}, kT0 + 70ms, nullptr));
  EXPECT_EQ(acks.estimates().acked, 7u);
}

}  // namespace
}  // namespace impulse::net
