// Client::connect_async over real loopback sockets: it returns before any answer, poll(0) drives
// the handshake to Connected without blocking, and a connect to a port nobody serves ends in
// Failed(TimedOut) at its timeout while every poll returns at once.
#include <gtest/gtest.h>

#include "tests/integration/harness.h"

namespace impulse::test {
namespace {

TEST(ClientAsync, ConnectAsyncReturnsAtOnceAndPollDrivesTheHandshake) {
  RunningServer server;
  ASSERT_TRUE(server.started()) << server.error();
  Client client;
  ConnectParams params;
  params.name = "async";
  ASSERT_TRUE(client.connect_async("127.0.0.1", server.port(), params));
  // Returned before any datagram could come back: the Connect is out, nothing answered yet.
  EXPECT_EQ(client.state(), ConnectionState::SendingConnect);
  EXPECT_EQ(client.stats().datagrams_out, 1u);
  EXPECT_EQ(client.stats().datagrams_in, 0u);

  const auto deadline = Clock::now() + kWaitTimeout;
  int polls = 0;
  while (client.state() != ConnectionState::Connected && Clock::now() < deadline && polls < kMaxIterations) {
    client.poll();  // max_wait 0: never blocks
    ++polls;
    ::poll(nullptr, 0, 1);  // a game frame's other work
  }
  ASSERT_EQ(client.state(), ConnectionState::Connected) << client.connection_error().message;
  EXPECT_GT(polls, 0);
  EXPECT_NE(client.client_id(), 0u);
  const uint32_t id = client.create_object(ObjectDesc{});
  EXPECT_NE(id, 0u);
  client.disconnect();
  EXPECT_EQ(client.state(), ConnectionState::Disconnected);
}

TEST(ClientAsync, AConnectToAPortNobodyServesFailsAtItsTimeout) {
  // A port that was bound and released: nothing listens there.
  uint16_t port = 0;
  {
    asio::io_context io;
    asio::ip::udp::socket s(io, asio::ip::udp::endpoint(asio::ip::address_v4::loopback(), 0));
    port = s.local_endpoint().port();
  }
  Client client;
  ConnectParams params;
  params.timeout = milliseconds{300};
  const auto start = Clock::now();
  ASSERT_TRUE(client.connect_async("127.0.0.1", port, params));
  EXPECT_EQ(client.state(), ConnectionState::SendingConnect);
  int polls = 0;
  while (client.state() == ConnectionState::SendingConnect && polls < kMaxIterations &&
         Clock::now() - start < kWaitTimeout) {
    client.poll();
    ++polls;
    ::poll(nullptr, 0, 1);
  }
  EXPECT_EQ(client.state(), ConnectionState::Failed);
  EXPECT_EQ(client.connection_error().kind, ConnectFailure::TimedOut);
  EXPECT_GE(Clock::now() - start, milliseconds{300});
  EXPECT_NE(client.connection_error().message.find("within 300 ms"), std::string::npos)
      << client.connection_error().message;
  // The blocking wrapper reports the same failure as text.
  std::string error;
  EXPECT_FALSE(client.connect("127.0.0.1", port, milliseconds{100}, &error));
  EXPECT_NE(error.find("no answer from 127.0.0.1:" + std::to_string(port)), std::string::npos) << error;
  EXPECT_EQ(client.connection_error().kind, ConnectFailure::TimedOut);
}

}  // namespace
}  // namespace impulse::test
