// impulse-consumer HOST:PORT: what a game does with the installed client package. Connects without
// blocking (connect_async, then poll every frame), creates a box, waits for its ObjectID and for
// the box to show up in a snapshot, pings, and disconnects. Exit 0 on success; 1 with a message on
// stderr otherwise. Every wait is bounded by a deadline.
#include <impulse/client.h>

#include <poll.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

int fail(const std::string& message) {
  std::fprintf(stderr, "impulse-consumer: %s\n", message.c_str());
  return 1;
}

void next_frame() { ::poll(nullptr, 0, 5); }  // a 5 ms frame of other game work

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: impulse-consumer HOST:PORT");
  std::string host, error;
  uint16_t port = 0;
  if (!impulse::parse_host_port(argv[1], &host, &port, &error)) return fail(error);

  impulse::Client client;
  impulse::ConnectParams params;
  params.name = "consumer";
  params.timeout = std::chrono::seconds(3);
  if (!client.connect_async(host, port, params)) return fail(client.connection_error().message);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  while (client.state() != impulse::ConnectionState::Connected) {
    if (client.state() == impulse::ConnectionState::Failed) return fail(client.connection_error().message);
    if (Clock::now() > deadline) return fail("connect did not finish");
    client.poll();
    next_frame();
  }

  impulse::ObjectDesc box;
  box.shape = impulse::ShapeKind::Box;
  box.dims = {0.25f, 0.25f, 0.25f};
  box.position = {40.0f, 5.0f, 40.0f};
  const uint32_t request = client.create_object(box);
  impulse::ObjectID id;
  uint64_t nonce = 0;
  bool ponged = false;
  while (id.is_null() || client.find(id) == nullptr || !ponged) {
    if (Clock::now() > deadline) return fail("no answer, snapshot or pong in time");
    const impulse::PollResult& update = client.poll();
    for (const impulse::RequestResult& r : update.results) {
      if (r.request_id != request) continue;
      if (!r.ok()) return fail(std::string("create refused: ") + impulse::to_string(r.code) + ": " + r.message);
      id = r.id;
      nonce = client.ping();
    }
    for (const impulse::PongInfo& p : update.pongs) ponged = ponged || p.nonce == nonce;
    if (update.server_disconnected) return fail("server closed the session: " + update.disconnect_reason);
    next_frame();
  }
  const impulse::ObjectState* state = client.find(id);
  std::printf("impulse-consumer: connected as client %u, created object %u:%u, now at y = %.3f m, "
              "rtt %.2f ms\n",
              client.client_id(), id.index, id.generation, static_cast<double>(state->position.y),
              static_cast<double>(client.last_rtt().value_or(std::chrono::microseconds{0}).count()) / 1000.0);
  client.disconnect();
  return 0;
}
