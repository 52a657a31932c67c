// parse_host_port: the "host:port" values of --server flags (hostnames, IPv4, bracketed IPv6)
// and the reason given for each malformed one.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "impulse/types.h"

namespace impulse {
namespace {

TEST(ParseHostPort, AcceptsHostnamesIpv4AndBracketedIpv6) {
  std::string host;
  uint16_t port = 0;
  std::string error;
  ASSERT_TRUE(parse_host_port("127.0.0.1:7777", &host, &port, &error)) << error;
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 7777);
  ASSERT_TRUE(parse_host_port(" impulse-server:1 ", &host, &port, &error)) << error;
  EXPECT_EQ(host, "impulse-server");
  EXPECT_EQ(port, 1);
  ASSERT_TRUE(parse_host_port("[::1]:65535", &host, &port, &error)) << error;
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 65535);
}

TEST(ParseHostPort, RejectsBadValuesWithAReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"localhost", "missing port"},
      {"localhost:", "missing port"},
      {":7777", "missing host"},
      {"host:0", "out of range"},
      {"host:65536", "out of range"},
      {"host:77x", "not a number"},
      {"host:-1", "not a number"},
      {"host:+80", "not a number"},
      {"::1:7777", "brackets"},
      {"[::1]7777", "missing port"},
      {"[::1:7777", "unclosed"},
  };
  for (const auto& [text, reason] : cases) {
    std::string host = "unchanged";
    uint16_t port = 9;
    std::string error;
    EXPECT_FALSE(parse_host_port(text, &host, &port, &error)) << text;
    EXPECT_NE(error.find(reason), std::string::npos) << "'" << text << "' gave: " << error;
    EXPECT_EQ(host, "unchanged");
    EXPECT_EQ(port, 9);
  }
}

}  // namespace
}  // namespace impulse
