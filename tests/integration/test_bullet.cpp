// Continuous collision over the wire (issue "Physics right at the edges", item 2): a real server
// over loopback, recording. The scene has a heavy dynamic plank 0.1 m thick and, 6 m behind it, a
// static backstop wall. A client fires two 0.05 m spheres at 100 m/s (1.67 m per step) at the plank:
// a plain one, which is swept against static bodies only, so it passes through the dynamic plank
// and stops at the static wall; and one created with `bullet`, which stops at the plank. The
// recording then replays bit-exactly, so the flag travels through the recording too.

#include "integration/harness.h"
#include "integration/temp_recording.h"

namespace impulse::test {
namespace {

constexpr std::string_view kPlankScene = R"({
  "name": "integration-bullet",
  "gravity": { "x": 0.0, "y": -9.81, "z": 0.0 },
  "bodies": [
    { "name": "ground", "kind": "Static", "shape": "Box",
      "dims": { "x": 50.0, "y": 0.5, "z": 50.0 }, "position": { "x": 0.0, "y": -0.5, "z": 0.0 } },
    { "name": "backstop", "kind": "Static", "shape": "Box",
      "dims": { "x": 0.1, "y": 3.0, "z": 3.0 }, "position": { "x": 6.0, "y": 3.0, "z": 0.0 } },
    { "name": "plank", "kind": "Dynamic", "shape": "Box", "mass": 100.0,
      "dims": { "x": 0.05, "y": 1.0, "z": 1.0 }, "position": { "x": 0.0, "y": 1.0, "z": 0.0 } }
  ]
})";

TEST(Bullet, ABulletStopsAtADynamicPlankThatAPlainFastBodyPassesAndTheRecordingVerifies) {
  const TempRecording recording("bullet");
  {
    ServerOptions options;
    options.scene_json = kPlankScene;
    options.record_file = recording.path();
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver driver;
    std::string error;
    ASSERT_TRUE(driver.connect(server.port(), &error, "bullet")) << error;

    ObjectDesc plain = make_sphere(0.05f, {-3.0f, 1.5f, 0.0f});
    plain.velocity = {100.0f, 0.0f, 0.0f};
    ObjectDesc bullet = make_sphere(0.05f, {-3.0f, 0.5f, 0.0f});
    bullet.velocity = {100.0f, 0.0f, 0.0f};
    bullet.bullet = true;
    const ObjectID p = driver.create_ok(plain);
    const ObjectID b = driver.create_ok(bullet);
    ASSERT_FALSE(p.is_null());
    ASSERT_FALSE(b.is_null());

    // A quarter of a second on, both have long arrived (at most 0.1 s of flight).
    const uint64_t later = driver.client.server_tick() + 15;
    ASSERT_NE(driver.wait_snapshot_after(later), 0u);
    const std::vector<ObjectState>& view = driver.snapshots.rbegin()->second;
    const ObjectState* ps = find_in(view, p);
    const ObjectState* bs = find_in(view, b);
    ASSERT_NE(ps, nullptr);
    ASSERT_NE(bs, nullptr);
    EXPECT_GT(ps->position.x, 1.0f) << "the plain sphere should pass the dynamic plank";
    EXPECT_LT(ps->position.x, 6.0f - 0.1f) << "the plain sphere passed the static backstop";
    EXPECT_LT(bs->position.x, 0.5f) << "the bullet passed the plank";
    server.stop();
  }
  recording.expect_verifies();
}

}  // namespace
}  // namespace impulse::test
