// Budgets under hostile clients (issue 16, rows C, E, E2), a real server and real clients over
// loopback UDP, each test measuring the property the attack broke:
// - reconnecting (new ports, new sessions) does not reset an anonymous client's object quota;
// - a flood of Connects forged with a live player's source address draws no reply and leaves the
//   player's snapshots (rate and size) as they were, during and after the flood;
// - duplicates of an answered request are answered no faster than the request rate.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "integration/harness.h"

namespace impulse::test {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes to_bytes(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

// --- Row C: reconnecting to reset a quota -------------------------------------------------------

/// Creates objects until one is refused (at most `tries`); returns how many were created and the
/// refusal.
std::pair<int, std::optional<RequestResult>> create_until_refused(ClientDriver& d, int tries, float x) {
  for (int i = 0; i < tries; ++i) {
    const auto r = d.wait_result(d.client.create_object(make_sphere(0.2f, {x, 1.0f + 0.5f * static_cast<float>(i), 0})));
    if (!r) {
      ADD_FAILURE() << "no answer to create_object";
      return {i, std::nullopt};
    }
    if (!r->ok()) return {i, r};
  }
  return {tries, std::nullopt};
}

TEST(Budgets, ReconnectingDoesNotResetAnAnonymousQuota) {
  for (const std::string policy : {"keep", "destroy"}) {
    SCOPED_TRACE("--on-disconnect " + policy);
    ServerOptions options;
    options.configure = [&](server::ServerConfig& c) {
      c.max_objects_per_client = 20;
      c.on_disconnect = policy;
    };
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    const uint32_t scene = 1;  // the ground
    uint32_t most = 0;
    // The attack of row C: five sessions in a row, each from a new port, each taking a full quota.
    for (int session = 0; session < 5; ++session) {
      ClientDriver d;
      std::string error;
      ASSERT_TRUE(d.connect(server.port(), &error, "reconnecting")) << error;
      const auto [created, refusal] = create_until_refused(d, 25, static_cast<float>(session));
      most = std::max(most, server.stats().objects.load());
      if (policy == "keep" && session > 0) {
        EXPECT_EQ(created, 0) << "session " << session << " got a fresh quota";
      } else {
        EXPECT_EQ(created, 20) << "session " << session;
      }
      ASSERT_TRUE(refusal.has_value());
      EXPECT_EQ(refusal->code, ResultCode::QuotaExceeded);
      EXPECT_NE(refusal->message.find(session == 0 || policy == "destroy" ? "objects: --max-objects-per-client"
                                                                           : "--max-objects-per-address"),
                std::string::npos)
          << refusal->message;
      d.client.disconnect("again");
      if (policy == "destroy") {
        // The departed session's objects go at the next tick.
        ClientDriver watcher;
        ASSERT_TRUE(watcher.connect(server.port(), &error, "watcher")) << error;
        EXPECT_TRUE(watcher.poll_until([&] { return server.stats().objects.load() == scene; }))
            << server.stats().objects.load() << " objects left";
      }
    }
    // Never more than one quota's worth at a time, whatever the number of sessions.
    EXPECT_LE(most, scene + 20);

    // Concurrent sessions from one address share its quota too.
    ClientDriver a, b;
    std::string error;
    ASSERT_TRUE(a.connect(server.port(), &error, "a")) << error;
    ASSERT_TRUE(b.connect(server.port(), &error, "b")) << error;
    const int by_a = create_until_refused(a, 25, 10.0f).first;
    const int by_b = create_until_refused(b, 25, 12.0f).first;
    EXPECT_LE(server.stats().objects.load(), scene + 20);
    if (policy == "destroy") {
      EXPECT_EQ(by_a + by_b, 20);
    }
  }
}

// --- Rows E and E2: Connects forged with a live player's address --------------------------------

/// A raw IPv4 socket that writes its own IP and UDP headers, so a datagram can carry any source
/// address and port (the attacker of rows D, E and E2). Needs CAP_NET_RAW.
class ForgingSocket {
 public:
  ForgingSocket() : fd_(::socket(AF_INET, SOCK_RAW, IPPROTO_RAW)) {}
  ~ForgingSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  ForgingSocket(const ForgingSocket&) = delete;
  ForgingSocket& operator=(const ForgingSocket&) = delete;
  bool ok() const { return fd_ >= 0; }

  /// Sends `payload` from 127.0.0.1:from_port to 127.0.0.1:to_port. The kernel fills in the IP
  /// checksum and length; a UDP checksum of 0 means none (IPv4).
  bool send(std::span<const uint8_t> payload, uint16_t from_port, uint16_t to_port) {
    std::array<uint8_t, 20 + 8 + wire::kMaxDatagramBytes> packet{};
    if (payload.size() > wire::kMaxDatagramBytes) return false;
    const auto total = static_cast<uint16_t>(20 + 8 + payload.size());
    const uint32_t loopback = htonl(INADDR_LOOPBACK);
    packet[0] = 0x45;  // IPv4, 5-word header
    const uint16_t total_be = htons(total);
    std::memcpy(&packet[2], &total_be, 2);
    packet[8] = 64;           // TTL
    packet[9] = IPPROTO_UDP;  // protocol
    std::memcpy(&packet[12], &loopback, 4);
    std::memcpy(&packet[16], &loopback, 4);
    const uint16_t src = htons(from_port), dst = htons(to_port), udp_len = htons(static_cast<uint16_t>(8 + payload.size()));
    std::memcpy(&packet[20], &src, 2);
    std::memcpy(&packet[22], &dst, 2);
    std::memcpy(&packet[24], &udp_len, 2);
    std::memcpy(&packet[28], payload.data(), payload.size());
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = dst;
    to.sin_addr.s_addr = loopback;
    return ::sendto(fd_, packet.data(), total, 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == total;
  }

 private:
  int fd_;
};

struct Window {
  uint64_t snapshots = 0;      ///< snapshots the player completed
  uint64_t bytes_in = 0;       ///< bytes the player received (snapshots, almost all)
  uint64_t server_out = 0;     ///< bytes the server sent (to anyone)
  uint64_t server_datagrams = 0;
};

TEST(Budgets, AConnectFloodAtALivePlayerDrawsNoReplyAndLeavesItsSnapshots) {
  ForgingSocket forger;
  if (!forger.ok()) GTEST_SKIP() << "forging a source address needs CAP_NET_RAW: " << std::strerror(errno);
  ServerOptions options;
  options.snapshot_hz = 30;
  RunningServer server(options);
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver player;
  std::string error;
  ASSERT_TRUE(player.connect(server.port(), &error, "player")) << error;
  // Kinematic boxes that never stop: every snapshot carries changes up to its budget.
  std::vector<uint32_t> ids;
  for (int i = 0; i < 60; ++i) {
    ObjectDesc box = make_box({0.2f, 0.2f, 0.2f}, {-30.0f + static_cast<float>(i), 2.0f, static_cast<float>(i % 7)});
    box.kind = BodyKind::Kinematic;
    box.velocity = {0.0f, 0.0f, 0.3f};
    box.angular_velocity = {0.0f, 1.0f, 0.0f};
    ids.push_back(player.client.create_object(box));
  }
  for (const uint32_t id : ids) {
    const auto r = player.wait_result(id);
    ASSERT_TRUE(r && r->ok());
  }
  ASSERT_NE(player.wait_snapshot_after(player.client.server_tick() + 10), 0u);

  auto measure = [&](std::chrono::milliseconds length) {
    const ClientStats s0 = player.client.stats();
    const uint64_t out0 = server.stats().bytes_out.load(), dg0 = server.stats().datagrams_out.load();
    const Clock::time_point end = Clock::now() + length;
    player.poll_until([&] { return Clock::now() >= end; }, length + milliseconds{100});
    const ClientStats s1 = player.client.stats();
    return Window{s1.snapshots_completed - s0.snapshots_completed, s1.bytes_in - s0.bytes_in,
                  server.stats().bytes_out.load() - out0, server.stats().datagrams_out.load() - dg0};
  };
  constexpr milliseconds kWindow{2000};
  const Window before = measure(kWindow);

  // Row E2: 2000 forged Connects per second "from" the player, padded to the minimum size (and a
  // few unpadded 40-byte ones), for one window.
  flatbuffers::FlatBufferBuilder fbb;
  const Bytes connect = to_bytes(wire::build_connect(fbb, "forged"));
  ASSERT_GE(connect.size(), wire::min_connect_bytes());
  std::atomic<bool> flooding{true};
  std::atomic<uint64_t> forged{0}, forged_bytes{0};
  const uint16_t player_port = player.client.local_port();
  const uint16_t server_port = server.port();
  std::thread flood([&] {
    // Paced at 20 datagrams per 10 ms: a rate, not a synchronisation.
    Clock::time_point next = Clock::now();
    for (int round = 0; round < 1000 && flooding.load(); ++round) {
      for (int i = 0; i < 20; ++i) {
        const std::span<const uint8_t> bytes =
            i == 0 ? std::span<const uint8_t>(connect.data(), 40) : std::span<const uint8_t>(connect);
        if (forger.send(bytes, player_port, server_port)) {
          forged.fetch_add(1);
          forged_bytes.fetch_add(bytes.size());
        }
      }
      next += milliseconds{10};
      std::this_thread::sleep_until(next);
    }
  });
  const Window during = measure(kWindow);
  flooding.store(false);
  flood.join();
  const Window after = measure(kWindow);

  ASSERT_GT(forged.load(), 3000u);
  EXPECT_TRUE(player.client.connected());
  // The player keeps its snapshot rate and size, during the flood and after it.
  EXPECT_GE(during.snapshots * 100, before.snapshots * 95) << before.snapshots << " -> " << during.snapshots;
  EXPECT_GE(after.snapshots * 100, before.snapshots * 95) << before.snapshots << " -> " << after.snapshots;
  EXPECT_GE(during.bytes_in * 100, before.bytes_in * 95) << before.bytes_in << " -> " << during.bytes_in << " bytes";
  EXPECT_GE(after.bytes_in * 100, before.bytes_in * 95) << before.bytes_in << " -> " << after.bytes_in << " bytes";
  // The flood drew nothing: what the server sent beyond its usual traffic is at most what the
  // flood brought in (here: nothing measurable).
  const int64_t extra_bytes = static_cast<int64_t>(during.server_out) - static_cast<int64_t>(before.server_out);
  const int64_t extra_datagrams =
      static_cast<int64_t>(during.server_datagrams) - static_cast<int64_t>(before.server_datagrams);
  EXPECT_LE(extra_bytes, static_cast<int64_t>(forged_bytes.load())) << forged_bytes.load() << " bytes forged";
  EXPECT_LE(extra_datagrams, static_cast<int64_t>(forged.load() / 100)) << forged.load() << " datagrams forged";
  std::printf("connect flood: %llu forged (%llu bytes); player snapshots %llu / %llu / %llu, bytes %llu / %llu / %llu "
              "(before / during / after, %lld ms each); server extra out %lld bytes, %lld datagrams\n",
              static_cast<unsigned long long>(forged.load()), static_cast<unsigned long long>(forged_bytes.load()),
              static_cast<unsigned long long>(before.snapshots), static_cast<unsigned long long>(during.snapshots),
              static_cast<unsigned long long>(after.snapshots), static_cast<unsigned long long>(before.bytes_in),
              static_cast<unsigned long long>(during.bytes_in), static_cast<unsigned long long>(after.bytes_in),
              static_cast<long long>(kWindow.count()), static_cast<long long>(extra_bytes),
              static_cast<long long>(extra_datagrams));
}

// --- Row E: duplicates of an answered request --------------------------------------------------

TEST(Budgets, DuplicatesOfAnAnsweredRequestCountAgainstTheRequestRate) {
  constexpr int kRate = 50;
  ServerOptions options;
  options.configure = [](server::ServerConfig& c) { c.max_requests_per_second = kRate; };
  RunningServer server(options);
  ASSERT_TRUE(server.started()) << server.error();
  // A raw session (the cookie handshake by hand), so the same request can be sent again and again.
  RawSocket raw;
  const auto to = RawSocket::server_endpoint(server.port());
  raw.send(wire::build_connect(raw.fbb, "dup"), to);
  const wire::Envelope* challenge = raw.wait_from_server(wire::Message::Challenge);
  ASSERT_NE(challenge, nullptr);
  const auto* c = challenge->message_as_Challenge()->cookie();
  const Bytes cookie(c->begin(), c->end());
  raw.send(wire::build_connect(raw.fbb, "dup", cookie), to);
  ASSERT_NE(raw.wait_from_server(wire::Message::ConnectAccepted), nullptr);
  uint32_t sequence = 1;
  auto stamped = [&](std::span<const uint8_t> built) {
    Bytes b = to_bytes(built);
    EXPECT_TRUE(wire::stamp_header(b, wire::PacketHeader(sequence++, 0, 0)));
    return b;
  };
  const Bytes request = to_bytes(wire::build_destroy_object(raw.fbb, 1, ObjectID{4000, 1}));
  raw.send(stamped(request), to);
  ASSERT_NE(raw.wait_from_server(wire::Message::RequestResult), nullptr);

  // 1000 duplicates in batches (so the kernel's buffer drops none), counting the answers.
  size_t answers = 0, answer_bytes = 0, sent_bytes = 0;
  constexpr uint64_t kBarrier = 99;
  // Counts the answers queued now (waiting up to `wait` for the first); true once the barrier
  // Pong arrived.
  auto count_answers = [&](milliseconds wait) {
    asio::ip::udp::endpoint from;
    for (int i = 0; i < kMaxIterations; ++i) {
      const size_t n = raw.receive(i == 0 ? wait : milliseconds{0}, &from);
      if (n == 0) return false;
      const wire::Verified v = wire::verify_datagram(raw.last(n), wire::Direction::ServerToClient);
      if (v.reason != wire::DropReason::None) continue;
      if (v.envelope->message_type() == wire::Message::RequestResult) {
        ++answers;
        answer_bytes += n;
      }
      if (const auto* pong = v.envelope->message_as_Pong(); pong && pong->nonce() == kBarrier) return true;
    }
    return false;
  };
  const Clock::time_point t0 = Clock::now();
  for (int batch = 0; batch < 50; ++batch) {
    for (int i = 0; i < 20; ++i) {
      const Bytes d = stamped(request);
      sent_bytes += d.size();
      raw.send(d, to);
    }
    count_answers(milliseconds{2});
  }
  // The last answers: a barrier Ping from the session (answered in order after the duplicates).
  raw.send(stamped(wire::build_ping(raw.fbb, kBarrier)), to);
  bool barrier = false;
  const Clock::time_point deadline = Clock::now() + kWaitTimeout;
  for (int i = 0; i < kMaxIterations && !barrier && Clock::now() < deadline; ++i) barrier = count_answers(milliseconds{5});
  ASSERT_TRUE(barrier) << "the barrier Pong never came";
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // The bucket: a burst of kRate, then kRate per second (the first answer took one token).
  EXPECT_LE(static_cast<double>(answers), kRate + kRate * seconds + 1) << "in " << seconds << " s";
  EXPECT_GE(answers, 10u) << "duplicates within the rate are still answered";
  std::printf("duplicate flood: 1000 duplicates (%zu bytes) in %.2f s drew %zu answers (%zu bytes), limit %d/s\n",
              sent_bytes, seconds, answers, answer_bytes, kRate);
}

}  // namespace
}  // namespace impulse::test
