// EventChannel: reliable delivery bookkeeping of collision events, checked against a reference
// model that scans every pending event (the obvious O(n) implementation), under random pushes,
// sends, acks, lost datagrams and clock steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "server/net/event_channel.h"

namespace impulse::server {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

wire::CollisionEvent event_at(uint64_t tick) {
  return wire::CollisionEvent(tick, 1, 2, wire::Vec3(0, 0, 0), wire::Vec3(0, 1, 0), 0, wire::ContactEventType::Begin);
}

std::vector<uint32_t> sequences_of(const std::vector<wire::CollisionEvent>& batch) {
  std::vector<uint32_t> out;
  for (const auto& e : batch) out.push_back(e.sequence());
  return out;
}

TEST(EventChannel, SendsNewEventsInOrderAndResendsUntilAcked) {
  EventChannel channel;
  const Clock::time_point t0{};
  for (uint64_t t = 1; t <= 5; ++t) channel.push(event_at(t));
  EXPECT_EQ(channel.pending(), 5u);
  EXPECT_EQ(channel.last_sequence(), 5u);

  std::vector<wire::CollisionEvent> batch;
  channel.collect_due(t0, 50ms, 3, &batch);
  EXPECT_EQ(sequences_of(batch), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(batch[1].tick(), 2u);
  channel.mark_sent(100, t0);
  channel.collect_due(t0, 50ms, 3, &batch);
  EXPECT_EQ(sequences_of(batch), (std::vector<uint32_t>{4, 5}));
  channel.mark_sent(101, t0);
  channel.collect_due(t0 + 49ms, 50ms, 10, &batch);
  EXPECT_TRUE(batch.empty()) << "nothing is due before resend_after";

  channel.on_acked(101);  // carried 4 and 5
  EXPECT_EQ(channel.pending(), 3u);
  channel.collect_due(t0 + 50ms, 50ms, 10, &batch);
  EXPECT_EQ(sequences_of(batch), (std::vector<uint32_t>{1, 2, 3})) << "only the unacked are resent";
  channel.mark_sent(102, t0 + 50ms);
  channel.on_acked(100);  // the first send of 1..3 arrives after all
  EXPECT_EQ(channel.pending(), 0u);
  channel.on_acked(102);  // a second ack of the same events changes nothing
  EXPECT_EQ(channel.pending(), 0u);
  channel.collect_due(t0 + 1s, 50ms, 10, &batch);
  EXPECT_TRUE(batch.empty());
}

TEST(EventChannel, WithoutMarkSentTheSameEventsAreChosenAgain) {
  EventChannel channel;
  for (uint64_t t = 1; t <= 4; ++t) channel.push(event_at(t));
  std::vector<wire::CollisionEvent> a, b;
  channel.collect_due(Clock::time_point{}, 50ms, 2, &a);
  channel.collect_due(Clock::time_point{}, 50ms, 2, &b);  // e.g. the budget held the datagram back
  EXPECT_EQ(sequences_of(a), sequences_of(b));
}

TEST(EventChannel, OverflowDropsTheOldestAndCountsThem) {
  EventChannel channel;
  const size_t extra = 10;
  for (size_t i = 0; i < kMaxPendingEvents + extra; ++i) channel.push(event_at(i));
  EXPECT_EQ(channel.pending(), kMaxPendingEvents);
  EXPECT_EQ(channel.dropped(), extra);
  std::vector<wire::CollisionEvent> batch;
  channel.collect_due(Clock::time_point{}, 50ms, 3, &batch);
  EXPECT_EQ(sequences_of(batch), (std::vector<uint32_t>{extra + 1, extra + 2, extra + 3}));
}

// Random operations against a model that keeps every pending event with its send history.
TEST(EventChannel, MatchesAReferenceModelUnderRandomTraffic) {
  struct ModelEvent {
    bool sent = false;
    Clock::time_point last_sent{};
    std::set<uint32_t> packets;
  };
  uint64_t dropped_in_all_runs = 0;
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(seed);
    EventChannel channel;
    std::map<uint32_t, ModelEvent> model;  // pending events by sequence
    std::vector<uint32_t> unacked_packets;
    uint32_t next_event = 1, next_packet = 1;
    uint64_t dropped = 0;
    Clock::time_point now{};
    const auto resend = std::chrono::milliseconds(20 + seed);
    for (int op = 0; op < 3000; ++op) {
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 4) {  // a burst of new events; sometimes more than the channel holds
        const int n = static_cast<int>(rng() % (seed % 5 == 0 ? 900 : 12));
        for (int i = 0; i < n; ++i) {
          channel.push(event_at(next_event));
          model[next_event++] = ModelEvent{};
          // The channel spans at most kMaxPendingEvents sequences: older unacked ones drop.
          while (!model.empty() && next_event - model.begin()->first > kMaxPendingEvents) {
            model.erase(model.begin());
            ++dropped;
          }
        }
      } else if (kind < 7) {  // a datagram of due events
        const size_t max = 1 + rng() % 20;
        std::vector<wire::CollisionEvent> batch;
        channel.collect_due(now, resend, max, &batch);
        size_t due = 0;
        for (const auto& [q, m] : model) due += !m.sent || now - m.last_sent >= resend ? 1 : 0;
        ASSERT_EQ(batch.size(), std::min(max, due)) << "seed " << seed << " op " << op;
        std::set<uint32_t> seen;
        for (const auto& e : batch) {
          const auto it = model.find(e.sequence());
          ASSERT_NE(it, model.end()) << "sent an event that is acked or dropped";
          ASSERT_TRUE(!it->second.sent || now - it->second.last_sent >= resend) << "sent one not yet due";
          ASSERT_TRUE(seen.insert(e.sequence()).second) << "twice in one datagram";
          EXPECT_EQ(e.tick(), e.sequence()) << "the payload travels with its sequence";
        }
        if (!batch.empty()) {
          const uint32_t packet = next_packet++;
          channel.mark_sent(packet, now);
          for (const auto& e : batch) {
            ModelEvent& m = model[e.sequence()];
            m.sent = true;
            m.last_sent = now;
            m.packets.insert(packet);
          }
          unacked_packets.push_back(packet);
        }
      } else if (kind < 9 && !unacked_packets.empty()) {  // an ack, in any order; some never come
        const size_t i = rng() % unacked_packets.size();
        const uint32_t packet = unacked_packets[i];
        unacked_packets.erase(unacked_packets.begin() + static_cast<std::ptrdiff_t>(i));
        if (rng() % 4 == 0) continue;  // lost
        channel.on_acked(packet);
        if (next_packet - packet <= kEventPacketHistory) {  // older packets are not remembered
          std::erase_if(model, [packet](const auto& kv) { return kv.second.packets.count(packet) != 0; });
        }
      } else {
        now += std::chrono::milliseconds(rng() % 30);
      }
      ASSERT_EQ(channel.pending(), model.size()) << "seed " << seed << " op " << op;
      ASSERT_EQ(channel.dropped(), dropped);
    }
    dropped_in_all_runs += dropped;
  }
  EXPECT_GT(dropped_in_all_runs, 0u) << "the overflow path was never taken";
}

}  // namespace
}  // namespace impulse::server
