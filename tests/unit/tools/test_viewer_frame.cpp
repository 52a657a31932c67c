// impulse-viewer's pure parts: the frame streamed to the page is valid JSON holding what the SDK
// gave (including hostile text and non-finite numbers), and the page's controls are validated
// before anything reaches the server.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "viewer/frame.h"

namespace impulse::viewer {
namespace {

FrameBody body(uint32_t index, ShapeKind shape, bool sleeping) {
  FrameBody b;
  b.state.id = ObjectID{index, 3};
  b.state.kind = BodyKind::Dynamic;
  b.state.shape = shape;
  b.state.dims = {0.5f, 0.25f, 0.5f};
  b.state.velocity = {1.0f, -2.0f, 0.5f};
  b.state.sleeping = sleeping;
  b.position = {1.5f, 2.25f, -6.0f};
  b.orientation = {0.0f, 0.0f, 0.0f, 1.0f};
  return b;
}

TEST(ViewerFrame, IsJsonWithTheBodiesContactsAndFigures) {
  FrameInfo info;
  info.status = "connected";
  info.server = "127.0.0.1:7777";
  info.tick = 1234;
  info.tick_hz = 60;
  info.snapshot_hz = 20;
  info.awake = 1;
  info.replay = ReplayRange{10, 900};
  info.replay_speed = 2;
  info.data_age_s = 2.5;
  info.stop_in_s = 12.0;
  const FrameBody bodies[] = {body(1, ShapeKind::Box, false), body(7, ShapeKind::Capsule, true)};
  const FrameContact contacts[] = {{1230, ObjectID{1, 3}, ObjectID{7, 3}, Vec3{0.5f, 1.0f, -6.0f}}};
  const FrameJoint joints[] = {{Vec3{1.0f, 2.0f, 3.0f}, Vec3{-1.5f, 0.25f, 4.0f}}};
  const std::string text = frame_json(info, bodies, contacts, joints);
  ASSERT_EQ(text.find('\n'), std::string::npos) << "one SSE data line";
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["tick"], 1234);
  EXPECT_EQ(j["bodies"], 2);
  EXPECT_EQ(j["awake"], 1);
  EXPECT_DOUBLE_EQ(j["data_age_s"].get<double>(), 2.5) << "seconds since the last snapshot: the page's stale warning";
  EXPECT_DOUBLE_EQ(j["stop_in_s"].get<double>(), 12.0) << "a draining server's time left";
  EXPECT_EQ(j["replay"]["first"], 10);
  EXPECT_EQ(j["replay"]["last"], 900);
  EXPECT_DOUBLE_EQ(j["replay"]["speed"].get<double>(), 2.0);
  ASSERT_EQ(j["objs"].size(), 2u);
  const auto& capsule = j["objs"][1];
  ASSERT_EQ(capsule.size(), 19u);
  EXPECT_EQ(capsule[0], 7);
  EXPECT_EQ(capsule[1], 3);
  EXPECT_EQ(capsule[3], static_cast<int>(ShapeKind::Capsule));
  EXPECT_EQ(capsule[4], 1) << "sleeping flag";
  EXPECT_DOUBLE_EQ(capsule[9].get<double>(), 2.25);   // position y
  EXPECT_DOUBLE_EQ(capsule[14].get<double>(), 1.0);   // orientation w
  EXPECT_DOUBLE_EQ(capsule[16].get<double>(), -2.0);  // velocity y
  EXPECT_EQ(capsule[18], 0) << "no asset";
  ASSERT_EQ(j["begins"].size(), 1u);
  EXPECT_EQ(j["begins"][0][0], 1230);
  EXPECT_EQ(j["begins"][0][3], 7);
  ASSERT_EQ(j["joints"].size(), 1u);
  ASSERT_EQ(j["joints"][0].size(), 6u);
  EXPECT_DOUBLE_EQ(j["joints"][0][1].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["joints"][0][3].get<double>(), -1.5);
  EXPECT_DOUBLE_EQ(j["joints"][0][4].get<double>(), 0.25);
}

TEST(ViewerFrame, EscapesTextAndWritesNonFiniteNumbersAsZero) {
  FrameInfo info;
  info.status = "reconnecting: \"bad\"\\\n\x01\x7f name";
  info.rtt_ms = std::numeric_limits<double>::quiet_NaN();
  info.kbit_s = std::numeric_limits<double>::infinity();
  FrameBody b = body(2, ShapeKind::Sphere, false);
  b.position.x = std::numeric_limits<float>::quiet_NaN();
  const std::string text = frame_json(info, std::span<const FrameBody>(&b, 1), {});
  ASSERT_EQ(text.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["status"], "reconnecting: \"bad\"\\\n\x01\x7f name");
  EXPECT_EQ(j["rtt_ms"], 0);
  EXPECT_EQ(j["kbit_s"], 0);
  EXPECT_EQ(j["objs"][0][8], 0);
  EXPECT_TRUE(j["replay"].is_null());
}

TEST(ViewerControl, AcceptsEachActionInRange) {
  const ReplayRange range{100, 700};
  std::string error;
  auto seek = parse_control("seek", "700", "", range, &error);
  ASSERT_TRUE(seek) << error;
  EXPECT_EQ(seek->action, ReplayAction::Seek);
  EXPECT_EQ(seek->tick, 700u);
  auto speed = parse_control("speed", "", "0.0625", range, &error);
  ASSERT_TRUE(speed) << error;
  EXPECT_EQ(speed->action, ReplayAction::SetSpeed);
  EXPECT_FLOAT_EQ(speed->speed, 0.0625f);
  EXPECT_EQ(parse_control("pause", "", "", range, &error)->action, ReplayAction::Pause);
  EXPECT_EQ(parse_control("resume", "junk", "junk", range, &error)->action, ReplayAction::Resume);
}

TEST(ViewerControl, RefusesHostileOrOutOfRangeFieldsWithAReason) {
  const ReplayRange range{100, 700};
  const struct {
    const char *action, *tick, *speed, *why;
  } cases[] = {
      {"seek", "99", "", "outside"},           {"seek", "701", "", "outside"},
      {"seek", "-1", "", "decimal integer"},   {"seek", "1e3", "", "decimal integer"},
      {"seek", "", "", "decimal integer"},     {"seek", "18446744073709551616", "", "decimal integer"},
      {"seek", "200 ", "", "decimal integer"}, {"speed", "", "nan", "[0.0625, 16]"},
      {"speed", "", "inf", "[0.0625, 16]"},    {"speed", "", "16.5", "[0.0625, 16]"},
      {"speed", "", "0.01", "[0.0625, 16]"},   {"speed", "", "2x", "[0.0625, 16]"},
      {"rewind", "", "", "action must be"},    {"", "", "", "action must be"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_FALSE(parse_control(c.action, c.tick, c.speed, range, &error)) << c.action << " " << c.tick << " " << c.speed;
    EXPECT_NE(error.find(c.why), std::string::npos) << error;
  }
  std::string error;
  EXPECT_FALSE(parse_control("pause", "", "", std::nullopt, &error));
  EXPECT_NE(error.find("not watching a replay"), std::string::npos) << error;
}

TEST(ViewerFrame, CarriesTheDrivenCarsPredictedAndServerPoses) {
  FrameInfo info;
  info.status = "connected";
  EXPECT_TRUE(nlohmann::json::parse(frame_json(info, {}, {}))["car"].is_null()) << "no --drive: no car";
  EXPECT_TRUE(nlohmann::json::parse(frame_json(info, {}, {}))["stop_in_s"].is_null()) << "not stopping";
  FrameCar car;
  car.id = ObjectID{134, 2};
  car.half_extents = {0.9f, 0.35f, 2.0f};
  car.server = Pose{Vec3{1.0f, 0.35f, 10.0f}, Quat{0.0f, 1.0f, 0.0f, 0.0f}};
  car.speed = 4.5f;
  car.commanded = std::numeric_limits<float>::quiet_NaN();
  car.throttle = 1.0f;
  car.steer = -0.5f;
  nlohmann::json j = nlohmann::json::parse(frame_json(info, {}, {}, {}, &car))["car"];
  EXPECT_EQ(j["id"], "134:2");
  EXPECT_TRUE(j["predicted"].is_null()) << "before the first reconciliation";
  ASSERT_EQ(j["server"].size(), 7u);
  EXPECT_DOUBLE_EQ(j["server"][2].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["server"][4].get<double>(), 1.0);  // orientation y
  EXPECT_DOUBLE_EQ(j["half"][2].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["commanded"].get<double>(), 0.0) << "non-finite written as 0";
  EXPECT_DOUBLE_EQ(j["steer"].get<double>(), -0.5);
  car.predicted = Pose{Vec3{1.0f, 0.35f, 10.5f}, Quat{}};
  j = nlohmann::json::parse(frame_json(info, {}, {}, {}, &car))["car"];
  ASSERT_EQ(j["predicted"].size(), 7u);
  EXPECT_DOUBLE_EQ(j["predicted"][2].get<double>(), 10.5);
  EXPECT_DOUBLE_EQ(j["predicted"][6].get<double>(), 1.0);
}

TEST(ViewerDrive, AcceptsControlsInRangeAndRefusesTheRest) {
  std::string error;
  const auto ok = parse_drive("1", "-0.5", &error);
  ASSERT_TRUE(ok.has_value()) << error;
  EXPECT_EQ(ok->throttle, 1.0f);
  EXPECT_EQ(ok->steer, -0.5f);
  for (const auto& [t, s] : std::vector<std::pair<std::string, std::string>>{
           {"", "0"}, {"0", ""}, {"1.01", "0"}, {"0", "-2"}, {"nan", "0"}, {"inf", "0"}, {"1e400", "0"}, {"0x1", "0"},
           {"1 ", "0"}, {std::string(64, '1'), "0"}}) {
    error.clear();
    EXPECT_FALSE(parse_drive(t, s, &error).has_value()) << "throttle=" << t << " steer=" << s;
    EXPECT_NE(error.find("[-1, 1]"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace impulse::viewer
