// record::Playback: playing a recording tick by tick reproduces the recorded world_hash at every
// tick; seek to any tick (before, at and after keyframes, forwards and backwards) gives the same
// world_hash as playing from the start; the end is reported, not overrun; a file cut inside a
// frame plays up to its last complete frame.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/record/playback.h"
#include "server/record/replay.h"
#include "unit/record/recording_writer.h"

namespace impulse::record {
namespace {

using test::RemoveOnExit;
using test::write_test_recording;

constexpr uint64_t kTicks = 200;
constexpr uint32_t kKeyframeInterval = 50;

TEST(Playback, AdvanceReproducesEveryRecordedHash) {
  const auto rec = write_test_recording(kTicks, kKeyframeInterval);
  RemoveOnExit remove{rec.path};
  physics::World world;
  Playback playback(world);
  std::string error;
  ASSERT_TRUE(playback.open(rec.path, &error)) << error;
  EXPECT_EQ(playback.first_tick(), 0u);
  EXPECT_EQ(playback.last_tick(), kTicks);
  EXPECT_EQ(playback.tick_hz(), 60u);
  EXPECT_EQ(playback.keyframes(), kTicks / kKeyframeInterval);
  EXPECT_EQ(playback.scene_name(), "playback-test");
  EXPECT_FALSE(playback.truncated());
  EXPECT_TRUE(playback.problem().empty()) << playback.problem();
  EXPECT_EQ(world.world_hash(), rec.hashes[0]);
  for (uint64_t t = 1; t <= kTicks; ++t) {
    ASSERT_EQ(playback.advance(), AdvanceStatus::Ticked) << playback.error();
    ASSERT_EQ(world.tick(), t);
    ASSERT_EQ(world.world_hash(), rec.hashes[t]) << "tick " << t;
  }
  EXPECT_EQ(playback.mismatches(), 0u) << playback.first_mismatch();
  EXPECT_GT(playback.requests(), 20u);
  EXPECT_GT(world.object_count(), 5u);
  EXPECT_GE(rec.joints_created, 3u);  // joint requests replayed too (their hashes matched above)
}

TEST(Playback, SeekEqualsPlayingFromTheStart) {
  const auto rec = write_test_recording(kTicks, kKeyframeInterval);
  RemoveOnExit remove{rec.path};
  // Before, at and just after keyframes (50, 100, 150, 200), the first and the last tick.
  const uint64_t targets[] = {0, 1, 49, 50, 51, 99, 100, 101, 137, 150, 199, 200};
  for (const uint64_t target : targets) {
    physics::World world;
    Playback playback(world);
    std::string error;
    ASSERT_TRUE(playback.open(rec.path, &error)) << error;
    ASSERT_TRUE(playback.seek(target, &error)) << "tick " << target << ": " << error;
    EXPECT_EQ(world.tick(), target);
    EXPECT_EQ(world.world_hash(), rec.hashes[target]) << "seek from the start to tick " << target;
    // Playing on from a seek continues the recorded trajectory.
    if (target < kTicks) {
      ASSERT_EQ(playback.advance(), AdvanceStatus::Ticked);
      EXPECT_EQ(world.world_hash(), rec.hashes[target + 1]) << "the tick after a seek to " << target;
    }
  }
  // One playback, jumping around: backwards across keyframes, forwards within and across them.
  physics::World world;
  Playback playback(world);
  std::string error;
  ASSERT_TRUE(playback.open(rec.path, &error)) << error;
  const uint64_t jumps[] = {180, 20, 75, 76, 149, 151, 0, 200, 101, 100};
  for (const uint64_t target : jumps) {
    ASSERT_TRUE(playback.seek(target, &error)) << error;
    EXPECT_EQ(world.world_hash(), rec.hashes[target]) << "jump to tick " << target;
  }
  EXPECT_EQ(playback.keyframe_at_or_before(49), 0u);
  EXPECT_EQ(playback.keyframe_at_or_before(50), 50u);
  EXPECT_EQ(playback.keyframe_at_or_before(199), 150u);
  EXPECT_EQ(playback.mismatches(), 0u) << playback.first_mismatch();
}

TEST(Playback, TheEndIsReportedAndOutOfRangeSeeksAreRefused) {
  const auto rec = write_test_recording(60, 25);
  RemoveOnExit remove{rec.path};
  physics::World world;
  Playback playback(world);
  std::string error;
  ASSERT_TRUE(playback.open(rec.path, &error)) << error;
  ASSERT_TRUE(playback.seek(60, &error)) << error;
  const uint64_t hash = world.world_hash();
  EXPECT_EQ(playback.advance(), AdvanceStatus::End);
  EXPECT_EQ(playback.advance(), AdvanceStatus::End);
  EXPECT_EQ(world.tick(), 60u);
  EXPECT_EQ(world.world_hash(), hash);  // unchanged by the refused advances
  EXPECT_FALSE(playback.seek(61, &error));
  EXPECT_NE(error.find("outside"), std::string::npos) << error;
  EXPECT_EQ(world.tick(), 60u);  // a refused seek leaves the world where it was
  // After the end, a seek backwards plays again.
  ASSERT_TRUE(playback.seek(10, &error)) << error;
  EXPECT_EQ(world.world_hash(), rec.hashes[10]);
  EXPECT_EQ(playback.advance(), AdvanceStatus::Ticked);
}

TEST(Playback, ATruncatedFilePlaysUpToItsLastCompleteFrame) {
  const auto rec = write_test_recording(kTicks, kKeyframeInterval);
  RemoveOnExit remove{rec.path};
  // Cut in the middle of a frame about two thirds in (as a crash would).
  const size_t cut_frame = rec.frame_ends.size() * 2 / 3;
  const uint64_t cut_at = rec.frame_ends[cut_frame - 1] + (rec.frame_ends[cut_frame] - rec.frame_ends[cut_frame - 1]) / 2;
  std::filesystem::resize_file(rec.path, cut_at);

  physics::World world;
  Playback playback(world);
  std::string error;
  ASSERT_TRUE(playback.open(rec.path, &error)) << error;
  EXPECT_TRUE(playback.truncated());
  EXPECT_GT(playback.last_tick(), 100u);
  EXPECT_LT(playback.last_tick(), kTicks);
  uint64_t played = 0;
  while (playback.advance() == AdvanceStatus::Ticked) ++played;
  EXPECT_EQ(played, playback.last_tick());
  EXPECT_EQ(world.world_hash(), rec.hashes[playback.last_tick()]);
  EXPECT_EQ(playback.mismatches(), 0u) << playback.first_mismatch();
  ASSERT_TRUE(playback.seek(playback.last_tick() - 3, &error)) << error;
  EXPECT_EQ(world.world_hash(), rec.hashes[playback.last_tick() - 3]);
}

TEST(Playback, BadFilesAreRefusedWithAReason) {
  physics::World world;
  Playback playback(world);
  std::string error;
  EXPECT_FALSE(playback.open("/nonexistent/impulse.irec", &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  const std::string garbage = test::temp_recording_path("impulse-garbage");
  RemoveOnExit remove{garbage};
  {
    std::FILE* f = std::fopen(garbage.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not a recording at all, just text", f);
    std::fclose(f);
  }
  error.clear();
  EXPECT_FALSE(playback.open(garbage, &error));
  EXPECT_FALSE(error.empty());
}

TEST(Playback, VerifyAndExportAgreeWithPlayback) {
  const auto rec = write_test_recording(120, 40);
  RemoveOnExit remove{rec.path};
  const VerifyResult v = verify_recording(rec.path);
  EXPECT_TRUE(v.ok) << v.error << v.report << v.read_problem;
  EXPECT_EQ(v.ticks, 120u);
  EXPECT_EQ(v.keyframes, 3u);
  ReplayedWorld replayed;
  std::string error;
  ASSERT_TRUE(replay_to_tick(rec.path, 95, &replayed, &error)) << error;
  EXPECT_EQ(replayed.keyframe_tick, 80u);
  EXPECT_EQ(replayed.world->world_hash(), rec.hashes[95]);
  // The header listed no damping (the ground); every live created body has one.
  EXPECT_EQ(replayed.dampings.size(), replayed.world->object_count() - 1u);
  EXPECT_FALSE(replay_to_tick(rec.path, 121, &replayed, &error));
}

}  // namespace
}  // namespace impulse::record
