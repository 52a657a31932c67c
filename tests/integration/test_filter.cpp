// Collision filtering over the wire (issue "Physics right at the edges", item 3): a real server
// over loopback, recording. A client creates two boxes whose filters exclude each other, one
// above the other: the upper one falls through the lower one to the ground. A SetFilter then lets
// the lower box accept a third box's category, and the third box lands on it; a filtered raycast
// sees through the third box to the lower one. The recording
// replays bit-exactly, so the filters of CreateObject and SetFilter travel through it.

#include "integration/harness.h"
#include "integration/temp_recording.h"

namespace impulse::test {
namespace {

constexpr uint32_t kGround = 1;  // the scene's ground has the default filter: category 1
constexpr uint32_t kLower = 2;
constexpr uint32_t kUpper = 4;
constexpr uint32_t kThird = 8;

TEST(Filter, BodiesWithExclusiveFiltersPassThroughAndSetFilterMakesAThirdCollide) {
  const TempRecording recording("filter");
  {
    ServerOptions options;
    options.record_file = recording.path();
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver driver;
    std::string error;
    ASSERT_TRUE(driver.connect(server.port(), &error, "filter")) << error;

    ObjectDesc lower = make_box({0.5f, 0.5f, 0.5f}, {0.0f, 0.5f, 0.0f});
    lower.category = kLower;
    lower.mask = kGround;  // touches the ground only
    ObjectDesc upper = make_box({0.5f, 0.5f, 0.5f}, {0.0f, 2.0f, 0.0f});
    upper.category = kUpper;
    upper.mask = kGround;
    const ObjectID lo = driver.create_ok(lower);
    const ObjectID up = driver.create_ok(upper);
    ASSERT_FALSE(lo.is_null());
    ASSERT_FALSE(up.is_null());

    // The upper box falls through the lower one and rests on the ground inside it.
    const auto through = driver.wait_snapshot_where(driver.client.server_tick(), [&](const std::vector<ObjectState>& objects) {
      const ObjectState* u = find_in(objects, up);
      return u != nullptr && u->position.y < 0.55f;
    });
    ASSERT_TRUE(through.has_value()) << "the upper box did not fall through the lower one";
    {
      const std::vector<ObjectState>& view = driver.snapshots.rbegin()->second;
      const ObjectState* l = find_in(view, lo);
      const ObjectState* u = find_in(view, up);
      ASSERT_NE(l, nullptr);
      ASSERT_NE(u, nullptr);
      EXPECT_NEAR(l->position.y, 0.5f, 0.02f);
      EXPECT_GT(u->position.y, 0.45f);  // held by the ground, not by the lower box
      EXPECT_NEAR(u->position.x, 0.0f, 0.02f);
    }

    // SetFilter: the lower box now also touches category 8, and a category-8 box lands on it
    // (it still passes through the upper box, whose mask is the ground only).
    const auto changed = driver.wait_result(driver.client.set_filter(lo, kLower, kGround | kThird, 0));
    ASSERT_TRUE(changed.has_value());
    EXPECT_TRUE(changed->ok()) << changed->message;
    ObjectDesc third = make_box({0.5f, 0.5f, 0.5f}, {0.0f, 2.5f, 0.0f});
    third.category = kThird;
    const ObjectID th = driver.create_ok(third);
    ASSERT_FALSE(th.is_null());
    const auto landed = driver.wait_snapshot_where(driver.client.server_tick(), [&](const std::vector<ObjectState>& objects) {
      const ObjectState* t = find_in(objects, th);
      return t != nullptr && t->sleeping;
    });
    ASSERT_TRUE(landed.has_value()) << "the third box did not come to rest";
    const ObjectState* t = find_in(driver.snapshots.rbegin()->second, th);
    ASSERT_NE(t, nullptr);
    EXPECT_NEAR(t->position.y, 1.5f, 0.03f);  // on top of the lower box

    // A raycast down through the stack hits the third box; filtered to the lower box's category
    // it passes the third box and hits the lower one.
    const auto plain = driver.wait_raycast(driver.client.raycast({0.0f, 5.0f, 0.0f}, {0.0f, -10.0f, 0.0f}));
    ASSERT_TRUE(plain.has_value());
    ASSERT_EQ(plain->hits.size(), 1u);
    EXPECT_EQ(plain->hits[0].id, th);
    const auto filtered =
        driver.wait_raycast(driver.client.raycast({0.0f, 5.0f, 0.0f}, {0.0f, -10.0f, 0.0f}, false, RayFilter{1, kLower}));
    ASSERT_TRUE(filtered.has_value());
    ASSERT_EQ(filtered->hits.size(), 1u);
    EXPECT_EQ(filtered->hits[0].id, lo);
    EXPECT_NEAR(filtered->hits[0].point.y, 1.0f, 0.03f);

    // A stale id is refused.
    driver.client.destroy(th);
    const auto stale = driver.wait_result(driver.client.set_filter(th, 1, ~0u, 0));
    ASSERT_TRUE(stale.has_value());
    EXPECT_FALSE(stale->ok());
    server.stop();
  }
  recording.expect_verifies();
}

}  // namespace
}  // namespace impulse::test
