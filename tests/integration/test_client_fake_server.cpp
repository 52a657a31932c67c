// impulse::Client's UDP transport against a fake server on loopback sockets: only what needs a
// real socket and the steady clock. Client::connect blocks until its timeout against a port that
// receives and never answers, reports the failure as text naming host:port, and counts each
// Connect it sent; and the transport hands the core each datagram's real sender, so a stranger's
// well-formed datagram is dropped while the server's is used. The protocol itself (handshake and
// its refusals, snapshots, requests, events, pongs, keepalives, hostile datagrams) is tested on a
// virtual clock against ClientCore in tests/unit/client/test_client_core_scripted.cpp.
#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>

#include "integration/harness.h"

namespace impulse::test {
namespace {

using asio::ip::udp;

/// Sends `built` stamped with header {sequence, 0, 0} from `from` to `to`.
void send_stamped(RawSocket& from, std::span<const uint8_t> built, uint32_t sequence, const udp::endpoint& to) {
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes> buffer{};
  ASSERT_LE(built.size(), buffer.size());
  std::copy(built.begin(), built.end(), buffer.begin());
  const std::span<uint8_t> bytes(buffer.data(), built.size());
  ASSERT_TRUE(wire::stamp_header(bytes, wire::PacketHeader(sequence, 0, 0)));
  from.send(bytes, to);
}

/// Sends `built` stamped with header {sequence, 0, 0} and sealed with `key`, as a server sends
/// every datagram of a session after ConnectAccepted (protocol 5).
void send_sealed(RawSocket& from, std::span<const uint8_t> built, uint32_t sequence, const net::PacketKey& key,
                 const udp::endpoint& to) {
  std::vector<uint8_t> bytes(built.begin(), built.end());
  ASSERT_TRUE(wire::stamp_header(bytes, wire::PacketHeader(sequence, 0, 0)));
  std::vector<uint8_t> sealed(bytes.size() + net::kSealOverheadBytes);
  ASSERT_NE(net::seal_packet(key, sequence, bytes, sealed), 0u);
  from.send(sealed, to);
}

/// Polls `client` until it has received one more datagram (bounded). True when it did.
bool poll_one_datagram(Client& client) {
  const uint64_t target = client.stats().datagrams_in + 1;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && Clock::now() < deadline && client.stats().datagrams_in < target; ++i) {
    client.poll(milliseconds{1});
  }
  return client.stats().datagrams_in == target;
}

TEST(ClientTransport, ConnectBlocksUntilItsTimeoutAndReportsItAsText) {
  RawSocket silent;  // receives, never answers (no ICMP either: the port is open)
  Client client;
  std::string error;
  const Clock::time_point start = Clock::now();
  EXPECT_FALSE(client.connect("127.0.0.1", silent.port(), milliseconds{600}, &error));
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds{600});
  EXPECT_LT(elapsed, milliseconds{1500});
  const std::string where = "127.0.0.1:" + std::to_string(silent.port());
  EXPECT_NE(error.find("no answer from " + where + " within 600 ms"), std::string::npos) << error;
  EXPECT_NE(error.find("impulse-server running"), std::string::npos) << error;
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.state(), ConnectionState::Failed);
  EXPECT_EQ(client.connection_error().kind, ConnectFailure::TimedOut);

  // Every datagram the transport counted as sent arrived, and each is a Connect. (How many, and
  // when, is the core's schedule, asserted on the virtual clock.)
  uint64_t connects = 0;
  udp::endpoint from;
  for (size_t n = silent.receive(milliseconds{0}, &from); n != 0; n = silent.receive(milliseconds{0}, &from)) {
    const wire::Verified v = wire::verify_datagram(silent.last(n), wire::Direction::ClientToServer);
    ASSERT_EQ(v.reason, wire::DropReason::None);
    EXPECT_EQ(v.envelope->message_type(), wire::Message::Connect);
    EXPECT_EQ(from.port(), client.local_port());
    ++connects;
  }
  EXPECT_GE(connects, 1u);
  EXPECT_EQ(connects, client.stats().datagrams_out);
  EXPECT_EQ(client.stats().send_errors, 0u);
}

TEST(ClientTransport, HandsTheCoreEachDatagramsRealSenderSoStrangersAreDropped) {
  RawSocket fake;
  Client client;
  ConnectParams params;
  params.timeout = kWaitTimeout;
  ASSERT_TRUE(client.connect_async("127.0.0.1", fake.port(), params));

  // A minimal handshake, driven by poll(): a Challenge for the first Connect, then an accept.
  udp::endpoint endpoint;
  const wire::Envelope* connect = fake.wait_from_client(wire::Message::Connect, &endpoint);
  ASSERT_NE(connect, nullptr);
  const auto* client_kx = connect->message_as_Connect()->kx_public();
  ASSERT_TRUE(client_kx != nullptr && client_kx->size() == net::kKxPublicKeyBytes);
  net::KxPublicKey client_public{};
  std::copy(client_kx->begin(), client_kx->end(), client_public.begin());
  const std::optional<udp::endpoint> client_endpoint = endpoint;
  EXPECT_EQ(client_endpoint->port(), client.local_port());
  const std::array<uint8_t, 32> cookie{};
  fake.send(wire::build_challenge(fake.fbb, cookie), *client_endpoint);
  ASSERT_TRUE(poll_one_datagram(client));
  ASSERT_EQ(client.state(), ConnectionState::SendingCookie) << client.connection_error().message;
  wire::AcceptedArgs accepted;
  accepted.client_id = 42;
  accepted.tick_hz = 120;
  accepted.snapshot_hz = 30;
  accepted.tick = 1000;
  const wire::QuantizationConfig q;
  accepted.quantization = wire::QuantizationArgs{q.world_bound_m,    q.position_fraction_bits,
                                                 q.orientation_bits, q.max_linear_speed,
                                                 q.linear_velocity_fraction_bits, q.max_angular_speed,
                                                 q.angular_velocity_fraction_bits};
  net::KxKeyPair server_kx;
  ASSERT_TRUE(net::make_kx_keypair(&server_kx));
  net::SessionKeys keys;
  ASSERT_TRUE(net::server_session_keys(server_kx, client_public, net::BindingSecret{}, &keys));
  accepted.kx_public = server_kx.public_key;
  accepted.client_kx_public = client_public;
  send_stamped(fake, wire::build_connect_accepted(fake.fbb, accepted), 1, *client_endpoint);
  ASSERT_TRUE(poll_one_datagram(client));
  ASSERT_TRUE(client.connected()) << client.connection_error().message;

  // A Pong for the client's Ping from another socket on the same host: well formed and sealed
  // with the session's key, with the next sequence, but not from the server: dropped.
  const uint64_t nonce = client.ping();
  ASSERT_NE(nonce, 0u);
  RawSocket stranger;
  send_sealed(stranger, wire::build_pong(stranger.fbb, nonce, 1042, 8'683'333), 2, keys.server_to_client, *client_endpoint);
  const uint64_t dropped_before = client.stats().datagrams_dropped;
  ASSERT_TRUE(poll_one_datagram(client));
  EXPECT_EQ(client.stats().datagrams_dropped, dropped_before + 1);
  EXPECT_FALSE(client.last_rtt().has_value());

  // The same datagram from the server is used.
  send_sealed(fake, wire::build_pong(fake.fbb, nonce, 1042, 8'683'333), 2, keys.server_to_client, *client_endpoint);
  ASSERT_TRUE(poll_one_datagram(client));
  EXPECT_EQ(client.stats().datagrams_dropped, dropped_before + 1);
  EXPECT_TRUE(client.last_rtt().has_value());
  EXPECT_EQ(client.server_tick(), 1042u);
  EXPECT_TRUE(client.connected());
}

}  // namespace
}  // namespace impulse::test
