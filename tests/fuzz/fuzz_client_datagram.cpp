// libFuzzer target: impulse::Client's datagram decoding (Client::process_datagram): verification,
// the handshake answers, request results, raycast results, delta snapshot payloads, reliable
// collision events (bit-packed blocks, wire::decode_collision_events), pongs and disconnects. A fresh client per input is first put in a session by
// a real ConnectAccepted (default quantisation); the input is then fed as one datagram, twice
// (duplicates take their own paths). Invariants: nothing crashes, the view stays sorted and
// bounded.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "impulse/client.h"
#include "shared/wire/codec.h"
#include "tests/fuzz/fuzz_input.h"

namespace impulse::fuzz {
namespace {

const std::vector<uint8_t>& accepted_datagram() {
  static const std::vector<uint8_t> bytes = [] {
    flatbuffers::FlatBufferBuilder fbb;
    wire::AcceptedArgs a;
    a.client_id = 1;
    a.tick_hz = 60;
    a.snapshot_hz = 30;
    const wire::QuantizationConfig q;
    a.quantization = wire::QuantizationArgs{q.world_bound_m,    q.position_fraction_bits,        q.orientation_bits,
                                            q.max_linear_speed, q.linear_velocity_fraction_bits, q.max_angular_speed,
                                            q.angular_velocity_fraction_bits};
    const auto built = wire::build_connect_accepted(fbb, a);
    std::vector<uint8_t> out(built.begin(), built.end());
    wire::stamp_header(out, wire::PacketHeader(1, 0, 0));
    return out;
  }();
  return bytes;
}

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse;
  static fuzz::DatagramBuffer buffer;
  Client client;
  client.process_datagram(fuzz::accepted_datagram());
  IMPULSE_FUZZ_CHECK(client.connected(), "a real ConnectAccepted starts a session");
  const std::span<const uint8_t> datagram = buffer.assign(std::span<const uint8_t>(data, size));
  client.process_datagram(datagram);
  client.process_datagram(datagram);
  const auto objects = client.objects();
  for (size_t i = 1; i < objects.size(); ++i) IMPULSE_FUZZ_CHECK(objects[i - 1].id < objects[i].id, "view sorted by id");
  return 0;
}
