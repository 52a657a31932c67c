// The server set-up shared by fuzz_server_datagram and fuzz_make_corpus: a small ServerCore
// configuration, a scene with touching bodies (so steps produce contacts and collision events),
// fixed client endpoints and the harness's own connection procedure.
#pragma once

#include <array>
#include <chrono>
#include <span>
#include <string>

#include <flatbuffers/flatbuffers.h>

#include "server/app/server_core.h"
#include "shared/wire/codec.h"

namespace impulse::fuzz {

using namespace std::chrono_literals;

/// Fake clock origin: time is passed in, never read.
inline const server::TimePoint kFuzzStart = server::TimePoint{} + 1h;

/// Small limits so that ServerFull, timeouts and snapshot ticks are reachable in a few datagrams.
inline server::ServerConfig fuzz_server_config() {
  server::ServerConfig c;
  c.tick_hz = 60;
  c.snapshot_hz = 30;
  c.max_clients = 3;
  c.client_timeout_s = 1.0;
  c.max_steps_per_frame = 4;
  return c;
}

/// Ground box, a resting sphere and box, a falling capsule and a sensor: ids {0,1} .. {4,1}.
/// Returns false (with *error) only if the World refuses them, a harness bug.
inline bool add_fuzz_scene(server::ServerCore& core, std::string* error) {
  std::array<physics::BodyDesc, 5> bodies{};
  bodies[0].kind = physics::BodyKind::Static;
  bodies[0].shape = physics::make_box({20, 0.5f, 20});
  bodies[0].position = {0, -0.5f, 0};
  bodies[1].shape = physics::make_sphere(0.5f);
  bodies[1].position = {0, 0.5f, 0};
  bodies[2].shape = physics::make_box({0.5f, 0.5f, 0.5f});
  bodies[2].position = {2, 0.6f, 0};
  bodies[3].shape = physics::make_capsule(0.3f, 0.5f);
  bodies[3].position = {-2, 1.5f, 0};
  bodies[4].kind = physics::BodyKind::Static;
  bodies[4].shape = physics::make_box({1, 1, 1});
  bodies[4].position = {0, 0.5f, 3};
  bodies[4].sensor = true;
  return core.add_bodies(bodies, error);
}

/// Client endpoints a fuzz input may speak from (the split format's control & 3).
inline server::Endpoint fuzz_endpoint(unsigned index) {
  return server::Endpoint(asio::ip::make_address_v4("10.0.0.1"), static_cast<uint16_t>(40000 + (index & 3)));
}

/// Connects `from` the way a well-behaved client does, so the fuzzer need not rediscover the
/// handshake before it can reach the request paths: Connect, read the Challenge the core queued in
/// `out`, echo its cookie. The core's cookie key is all zeros (init_security() is not called), so
/// runs are reproducible.
inline void connect_session(server::ServerCore& core, const server::Endpoint& from, server::TimePoint now,
                            flatbuffers::FlatBufferBuilder& fbb, server::Outbox& out) {
  const std::span<const uint8_t> connect = wire::build_connect(fbb, "fuzz");
  const std::vector<uint8_t> aligned(connect.begin(), connect.end());
  const size_t before = out.datagrams().size();
  core.handle_datagram(from, aligned, now, out);
  std::vector<uint8_t> cookie;
  for (size_t i = before; i < out.datagrams().size(); ++i) {
    const server::Outbox::Datagram& d = out.datagrams()[i];
    if (d.to != from) continue;
    const std::vector<uint8_t> reply(out.bytes_of(d).begin(), out.bytes_of(d).end());
    const wire::Verified v = wire::verify_datagram(reply, wire::Direction::ServerToClient);
    if (v.envelope == nullptr) continue;
    if (const wire::Challenge* c = v.envelope->message_as_Challenge(); c && c->cookie()) {
      cookie.assign(c->cookie()->begin(), c->cookie()->end());
    }
  }
  if (cookie.empty()) return;  // already connected (accepted at once) or refused
  const std::span<const uint8_t> second = wire::build_connect(fbb, "fuzz", cookie);
  const std::vector<uint8_t> aligned2(second.begin(), second.end());
  core.handle_datagram(from, aligned2, now, out);
}

}  // namespace impulse::fuzz
