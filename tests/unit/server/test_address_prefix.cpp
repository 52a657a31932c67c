// What "one address" is for the per-address limits (server/net/address_prefix.h).
#include "server/net/address_prefix.h"

#include <gtest/gtest.h>

namespace impulse::server {
namespace {

asio::ip::address addr(const char* text) { return asio::ip::make_address(text); }

TEST(AddressPrefix, Ipv4IsItselfAndIpv6IsItsSlash64) {
  EXPECT_EQ(address_prefix(addr("203.0.113.7")), addr("203.0.113.7"));
  EXPECT_NE(address_prefix(addr("203.0.113.7")), address_prefix(addr("203.0.113.8")));
  // Every address of one /64 is one key; the next /64 is another.
  const asio::ip::address key = address_prefix(addr("2001:db8:1:2:aaaa:bbbb:cccc:dddd"));
  EXPECT_EQ(key, addr("2001:db8:1:2::"));
  for (const char* same : {"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2:1234::9"}) {
    EXPECT_EQ(address_prefix(addr(same)), key) << same;
  }
  EXPECT_NE(address_prefix(addr("2001:db8:1:3::1")), key);
  // A dual-stack socket's view of an IPv4 client is that IPv4 address.
  EXPECT_EQ(address_prefix(addr("::ffff:203.0.113.7")), addr("203.0.113.7"));
  EXPECT_EQ(address_prefix(addr("::1")), addr("::"));
}

}  // namespace
}  // namespace impulse::server
