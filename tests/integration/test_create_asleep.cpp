// Bodies created asleep, over the wire (issue "Physics right at the edges", item 5): a real
// server over loopback, recording; a client creates one box asleep in mid-air (with a velocity,
// which is ignored) and one awake beside it. The asleep box stays where it was put, reported at
// rest, while the awake one falls; an impulse wakes it and it falls too. The recording then
// replays bit-exactly, so the asleep flag travels through the recording.

#include "integration/harness.h"
#include "integration/temp_recording.h"

namespace impulse::test {
namespace {

TEST(CreateAsleep, ABodyCreatedAsleepStaysPutUntilPushedAndTheRecordingVerifies) {
  const TempRecording recording("asleep");
  {
    ServerOptions options;
    options.record_file = recording.path();
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver driver;
    std::string error;
    ASSERT_TRUE(driver.connect(server.port(), &error, "asleep")) << error;

    ObjectDesc asleep = make_box({0.5f, 0.5f, 0.5f}, {-2.0f, 3.0f, 0.0f});
    asleep.asleep = true;
    asleep.velocity = {5.0f, 0.0f, 0.0f};  // ignored: a body created asleep has no velocity
    const ObjectID sleeper = driver.create_ok(asleep);
    const ObjectID faller = driver.create_ok(make_box({0.5f, 0.5f, 0.5f}, {2.0f, 3.0f, 0.0f}));
    ASSERT_FALSE(sleeper.is_null());
    ASSERT_FALSE(faller.is_null());

    // Half a second on: the awake box has fallen (0.5 g t^2 = 1.2 m), the asleep one has not moved.
    const uint64_t later = driver.client.server_tick() + 30;
    ASSERT_NE(driver.wait_snapshot_after(later), 0u);
    const std::vector<ObjectState>& view = driver.snapshots.rbegin()->second;
    const ObjectState* s = find_in(view, sleeper);
    const ObjectState* f = find_in(view, faller);
    ASSERT_NE(s, nullptr);
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(s->sleeping);
    EXPECT_NEAR(s->position.x, -2.0f, 1.0e-3f);
    EXPECT_NEAR(s->position.y, 3.0f, 1.0e-3f);
    EXPECT_EQ(s->velocity.x, 0.0f);
    EXPECT_FALSE(f->sleeping);
    EXPECT_LT(f->position.y, 2.0f);

    // A push wakes it: it moves and falls.
    const auto pushed = driver.wait_result(driver.client.apply_impulse(sleeper, {0.0f, 0.5f, 0.0f}));
    ASSERT_TRUE(pushed.has_value());
    EXPECT_TRUE(pushed->ok()) << pushed->message;
    const auto fell = driver.wait_snapshot_where(driver.client.server_tick(), [&](const std::vector<ObjectState>& objects) {
      const ObjectState* o = find_in(objects, sleeper);
      return o != nullptr && !o->sleeping && o->position.y < 2.5f;
    });
    EXPECT_TRUE(fell.has_value()) << "the pushed box did not wake and fall";
    server.stop();
  }
  recording.expect_verifies();
}

}  // namespace
}  // namespace impulse::test
