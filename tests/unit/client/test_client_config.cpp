// ClientConfig validation and the clock/interpolation API of a Client that is not connected.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "impulse/client.h"

namespace impulse {
namespace {

TEST(ClientConfig, DefaultsAreValidAndEachBadFieldIsNamed) {
  std::string error;
  EXPECT_TRUE(ClientConfig{}.validate(&error));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    ClientConfig config;
    const char* field;
  };
  std::vector<Case> cases;
  for (const double bad : {-0.01, 5.01, nan}) {
    ClientConfig c;
    c.interpolation_delay_s = bad;
    cases.push_back({c, "interpolation_delay_s"});
  }
  for (const double bad : {-1.0, 10.5, nan}) {
    ClientConfig c;
    c.max_extrapolation_s = bad;
    cases.push_back({c, "max_extrapolation_s"});
  }
  for (const double bad : {0.0, 11.0, nan}) {
    ClientConfig c;
    c.correction_time_constant_s = bad;
    cases.push_back({c, "correction_time_constant_s"});
  }
  for (const uint32_t bad : {1u, 257u}) {
    ClientConfig c;
    c.interpolation_history = bad;
    cases.push_back({c, "interpolation_history"});
  }
  for (const Case& c : cases) {
    error.clear();
    EXPECT_FALSE(c.config.validate(&error)) << c.field;
    EXPECT_NE(error.find(c.field), std::string::npos) << error;
    EXPECT_FALSE(c.config.validate(nullptr));
  }
  ClientConfig edges;
  edges.interpolation_delay_s = 0.0;
  edges.max_extrapolation_s = 0.0;
  edges.correction_time_constant_s = 10.0;
  edges.interpolation_history = 2;
  EXPECT_TRUE(edges.validate(&error));
}

TEST(ClientConfig, SetConfigRefusesBadValuesAndKeepsTheOldOnes) {
  Client client;
  ClientConfig good;
  good.interpolation_delay_s = 0.15;
  good.max_extrapolation_s = 0.1;
  std::string error;
  ASSERT_TRUE(client.set_config(good, &error)) << error;
  EXPECT_EQ(client.config().interpolation_delay_s, 0.15);
  EXPECT_EQ(client.config().max_extrapolation_s, 0.1);
  EXPECT_TRUE(client.clock_sync().playout_jitter() == false);

  ClientConfig bad = good;
  bad.interpolation_history = 0;
  EXPECT_FALSE(client.set_config(bad, &error));
  EXPECT_EQ(client.config().interpolation_history, good.interpolation_history);
  EXPECT_EQ(client.interpolator().config().max_extrapolation_s, 0.1);

  ASSERT_TRUE(client.set_config(ClientConfig{}, &error));
  EXPECT_TRUE(client.clock_sync().playout_jitter());
}

TEST(ClientConfig, NothingToShowWhenNotConnected) {
  Client client;
  const auto now = Client::TimePoint::clock::now();
  EXPECT_FALSE(client.render_tick(now).has_value());
  EXPECT_FALSE(client.estimated_server_tick(now).has_value());
  EXPECT_FALSE(client.pose_at(ObjectID{1, 1}, now).has_value());
  EXPECT_FALSE(client.pose_at_tick(ObjectID{1, 1}, 10.0).has_value());
  EXPECT_EQ(client.interpolation_delay_s(), 0.0);
  const ClockEstimate e = client.clock_estimate(now);
  EXPECT_FALSE(e.ready);
  EXPECT_FALSE(e.server_tick.has_value());
  EXPECT_FALSE(e.render_tick.has_value());
  EXPECT_EQ(client.stats().time_pings_sent, 0u);
}

}  // namespace
}  // namespace impulse
