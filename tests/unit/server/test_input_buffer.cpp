// The per-session buffer of tick-stamped inputs (server/net/input_buffer.h) and the pose history
// of lag compensation (server/app/pose_history.h, World::raycast_closest_at): each rule on its own,
// with ticks given by hand.
#include <gtest/gtest.h>

#include <vector>

#include "server/app/pose_history.h"
#include "server/net/input_buffer.h"
#include "server/physics/world.h"

namespace impulse::server {
namespace {

InputValue force(float x) { return InputValue{wire::InputMode::Force, {x, 0, 0}, {}}; }

/// The frames taken at `tick`, as (body index, linear.x).
std::vector<std::pair<uint32_t, float>> take(InputBuffer& b, uint64_t tick) {
  std::vector<std::pair<uint32_t, float>> out;
  b.take(tick, [&](ObjectID id, const InputValue& v, uint32_t) { out.emplace_back(id.index, v.linear.x); });
  return out;
}

TEST(InputBuffer, EachTickTakesItsOwnFrameAndRedundantCopiesCountOnce) {
  InputBuffer b;
  const ObjectID car{3, 1};
  // Frames for ticks 10..13, sent at tick 8 (lead 5), then again with 14 (the redundant copies).
  const std::vector<InputValue> first{force(10), force(11), force(12), force(13)};
  ASSERT_EQ(b.receive(car, 10, first, 9, 30), InputBuffer::Receipt::Ok);
  const std::vector<InputValue> second{force(99), force(99), force(99), force(13), force(14)};
  ASSERT_EQ(b.receive(car, 10, second, 9, 30), InputBuffer::Receipt::Ok);
  EXPECT_EQ(b.min_lead(9), 4);  // the newest frame (13, then 14) minus the next tick (9): 4, 5
  for (uint64_t t = 10; t <= 14; ++t) {
    const auto taken = take(b, t);
    ASSERT_EQ(taken.size(), 1u) << t;
    EXPECT_EQ(taken[0].first, 3u);
    EXPECT_EQ(taken[0].second, static_cast<float>(t)) << "tick " << t << " took another tick's frame";
  }
  EXPECT_EQ(b.counts().applied, 5u);
  EXPECT_EQ(b.counts().repeated, 0u);
  EXPECT_EQ(b.counts().late, 0u);
  // Buffered beyond each applied tick: 4, 3, 2, 1, 0.
  EXPECT_EQ(b.counts().buffered_sum, 10u);
}

TEST(InputBuffer, AMissingFrameRepeatsTheLastForAtMostFifteenTicksAndALateOneIsCounted) {
  InputBuffer b;
  const ObjectID car{0, 1};
  const std::vector<InputValue> one{force(1)};
  ASSERT_EQ(b.receive(car, 5, one, 5, 30), InputBuffer::Receipt::Ok);
  EXPECT_EQ(take(b, 5).at(0).second, 1.0f);
  for (uint32_t k = 1; k <= InputBuffer::kMaxRepeatTicks; ++k) {
    const auto taken = take(b, 5 + k);
    ASSERT_EQ(taken.size(), 1u) << k;
    EXPECT_EQ(taken[0].second, 1.0f);
  }
  EXPECT_TRUE(take(b, 5 + InputBuffer::kMaxRepeatTicks + 1).empty()) << "the repeat must stop";
  EXPECT_EQ(b.counts().repeated, InputBuffer::kMaxRepeatTicks);
  // Frames for ticks 6..7 arrive at tick 30: late, counted once each, never taken.
  const std::vector<InputValue> late{force(6), force(7)};
  ASSERT_EQ(b.receive(car, 6, late, 30, 30), InputBuffer::Receipt::Ok);
  ASSERT_EQ(b.receive(car, 6, late, 30, 30), InputBuffer::Receipt::Ok);
  EXPECT_EQ(b.counts().late, 2u);
  EXPECT_EQ(b.min_lead(30), -23);  // newest 7 - next 30
  EXPECT_TRUE(take(b, 30).empty());
}

TEST(InputBuffer, FramesBeyondTheLeadAndAFifthBodyAreRefused) {
  InputBuffer b;
  const std::vector<InputValue> one{force(1)};
  EXPECT_EQ(b.receive(ObjectID{0, 1}, 100 + 31, one, 100, 30), InputBuffer::Receipt::TooFarAhead);
  EXPECT_EQ(b.receive(ObjectID{0, 1}, 100 + 30, one, 100, 30), InputBuffer::Receipt::Ok);
  for (uint32_t i = 1; i < InputBuffer::kMaxChannels; ++i) {
    EXPECT_EQ(b.receive(ObjectID{i, 1}, 101, one, 100, 30), InputBuffer::Receipt::Ok);
  }
  EXPECT_EQ(b.receive(ObjectID{9, 1}, 101, one, 100, 30), InputBuffer::Receipt::NoFreeChannel);
  EXPECT_EQ(b.counts().refused, 2u);
  // Once a channel has gone idle (its last frame repeated out), another body may take it.
  for (uint64_t t = 101; t <= 101 + InputBuffer::kMaxRepeatTicks + 1; ++t) take(b, t);
  EXPECT_EQ(b.receive(ObjectID{9, 1}, 118, one, 118, 30), InputBuffer::Receipt::Ok);
  EXPECT_EQ(b.channels(), InputBuffer::kMaxChannels);
}

TEST(InputBuffer, TheReportedLeadIsTheMinimumOverTheLastTwoWindows) {
  InputBuffer b;
  const std::vector<InputValue> one{force(1)};
  EXPECT_EQ(b.min_lead(1), INT16_MIN);
  b.receive(ObjectID{0, 1}, 10, one, 9, 30);   // lead 1 in window [0, 30)
  b.receive(ObjectID{0, 1}, 40, one, 35, 30);  // lead 5 in window [30, 60)
  EXPECT_EQ(b.min_lead(35), 1);
  EXPECT_EQ(b.min_lead(65), 5);          // [0, 30) has left the two windows
  EXPECT_EQ(b.min_lead(95), INT16_MIN);  // so has [30, 60)
}

// --- Lag compensation ---------------------------------------------------------------------------

/// A world with a static floor and a kinematic box moving at 10 m/s along +x from x = 0, y = 1.
struct MovingBox {
  physics::World world{physics::WorldSettings{}};
  ObjectID box;
  MovingBox() {
    physics::BodyDesc floor;
    floor.kind = physics::BodyKind::Static;
    floor.shape = physics::make_box({50, 0.5f, 50});
    floor.position = {0, -0.5f, 0};
    EXPECT_EQ(world.create_object(floor).error, physics::Error::Ok);
    physics::BodyDesc d;
    d.kind = physics::BodyKind::Kinematic;
    d.shape = physics::make_box({0.25f, 0.25f, 0.25f});
    d.position = {0, 1, 0};
    d.velocity = {10, 0, 0};
    box = world.create_object(d).id;
  }
};

constexpr float kDt = 1.0f / 60.0f;

TEST(LagCompensation, ARayAtWhereTheBoxWasHitsItThereAndNotNow) {
  MovingBox m;
  PoseHistory history(16);
  for (int i = 0; i < 30; ++i) {
    m.world.step(kDt);
    history.record(m.world);
  }
  // At tick 20 the box was at x = 20 * 10 / 60 = 3.333 m (it moves exactly 1/6 m a tick).
  const Vec3 down{0, -5, 0};
  const Vec3 above_then{10.0f * 20 * kDt, 3, 0};
  std::vector<physics::IndexedPose> poses;
  ASSERT_EQ(history.poses_at(20, 0.0f, &poses), PoseHistory::Lookup::Ok);
  const auto then = m.world.raycast_closest_at(above_then, down, poses);
  ASSERT_TRUE(then.has_value());
  EXPECT_EQ(then->id, m.box);
  EXPECT_NEAR(then->point.y, 1.25f, 1e-4f);
  // The present: the same ray hits the floor, 1.67 m behind the box.
  const auto now = m.world.raycast_closest(above_then, down);
  ASSERT_TRUE(now.has_value());
  EXPECT_NE(now->id, m.box);
  // One tick off either way is 0.167 m: a ray 0.2 m ahead of the tick-20 pose hits at tick 21 (and
  // a fraction 0.5 past tick 20 puts the box 0.083 m on, which a ray there hits too).
  const Vec3 ahead{above_then.x + 0.2f + 0.25f, 3, 0};
  EXPECT_FALSE(m.world.raycast_closest_at(ahead, down, poses).has_value() &&
               m.world.raycast_closest_at(ahead, down, poses)->id == m.box);
  ASSERT_EQ(history.poses_at(21, 0.0f, &poses), PoseHistory::Lookup::Ok);
  EXPECT_EQ(m.world.raycast_closest_at({above_then.x + 0.2f, 3, 0}, down, poses)->id, m.box);
  ASSERT_EQ(history.poses_at(20, 0.5f, &poses), PoseHistory::Lookup::Ok);
  const auto half = m.world.raycast_closest_at({above_then.x + 0.083f + 0.24f, 3, 0}, down, poses);
  ASSERT_TRUE(half.has_value());
  EXPECT_EQ(half->id, m.box);
  std::vector<physics::RayHit> all;
  m.world.raycast_all_at({above_then.x + 0.083f + 0.24f, 3, 0}, down, poses, all);
  ASSERT_EQ(all.size(), 2u);  // the box, then the floor under it
  EXPECT_EQ(all[0].id, m.box);
}

TEST(LagCompensation, TheRingKeepsItsTicksAndNoMoreAndForgetsBodiesCreatedSince) {
  MovingBox m;
  PoseHistory history(16);
  for (int i = 0; i < 40; ++i) {
    m.world.step(kDt);
    history.record(m.world);
  }
  std::vector<physics::IndexedPose> poses;
  EXPECT_EQ(history.newest_tick(), 40u);
  EXPECT_EQ(history.oldest_tick(), 25u);
  EXPECT_EQ(history.poses_at(25, 0.0f, &poses), PoseHistory::Lookup::Ok);
  EXPECT_EQ(history.poses_at(24, 0.0f, &poses), PoseHistory::Lookup::TooOld);
  EXPECT_EQ(history.poses_at(41, 0.0f, &poses), PoseHistory::Lookup::Future);
  EXPECT_EQ(PoseHistory(0).poses_at(40, 0.0f, &poses), PoseHistory::Lookup::Off);
  EXPECT_EQ(history.memory_bytes(), 16u * 2u * sizeof(physics::IndexedPose));  // two slots a tick
  // A box created after tick 30, where the ray passes, is not in tick 30's world.
  physics::BodyDesc late;
  late.shape = physics::make_box({0.5f, 0.5f, 0.5f});
  late.kind = physics::BodyKind::Kinematic;
  late.position = {-10, 1, 0};
  ASSERT_EQ(m.world.create_object(late).error, physics::Error::Ok);
  ASSERT_EQ(history.poses_at(30, 0.0f, &poses), PoseHistory::Lookup::Ok);
  const auto hit = m.world.raycast_closest_at({-10, 3, 0}, {0, -5, 0}, poses);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->point.y, 0.0f) << "the ray should pass where the new box now is and hit the floor";
  // The box destroyed since tick 30 has no shape left to cast.
  ASSERT_TRUE(m.world.destroy_object(m.box) == physics::Error::Ok);
  const auto gone = m.world.raycast_closest_at({10.0f * 30 * kDt, 3, 0}, {0, -5, 0}, poses);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->point.y, 0.0f);
}

}  // namespace
}  // namespace impulse::server
