// libFuzzer target: wire::verify_datagram in both directions, then check_request on every client
// request that verifies and a read of every struct vector of the server messages that verify
// (the reads a client makes; UBSan flags any misaligned or out-of-bounds one). Also checks that a
// misaligned buffer is never accepted.
//
// Invariants (abort = crash report): a verified datagram has an envelope whose message type
// travels in the verified direction and whose table is present; a failed check names its field.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shared/wire/codec.h"
#include "tests/fuzz/fuzz_input.h"

namespace impulse::fuzz {
namespace {

using wire::Message;

void check_client_request(const wire::Envelope& e) {
  wire::Check check;
  switch (e.message_type()) {
    case Message::Connect: check = wire::check_request(*e.message_as_Connect()); break;
    case Message::CreateObject: check = wire::check_request(*e.message_as_CreateObject()); break;
    case Message::ApplyForce: check = wire::check_request(*e.message_as_ApplyForce()); break;
    case Message::ApplyImpulse: check = wire::check_request(*e.message_as_ApplyImpulse()); break;
    case Message::ApplyTorque: check = wire::check_request(*e.message_as_ApplyTorque()); break;
    case Message::SetVelocity: check = wire::check_request(*e.message_as_SetVelocity()); break;
    case Message::SetAngularVelocity: check = wire::check_request(*e.message_as_SetAngularVelocity()); break;
    case Message::Raycast: check = wire::check_request(*e.message_as_Raycast()); break;
    default: return;  // no range check for this type (DestroyObject, Ping, Disconnect)
  }
  IMPULSE_FUZZ_CHECK(check.ok() || !check.message.empty(), "a failed check must name its field");
}

/// Reads every element of the server messages' struct vectors, as a client would.
uint64_t read_server_message(const wire::Envelope& e) {
  uint64_t sum = 0;
  if (const wire::Snapshot* s = e.message_as_Snapshot(); s && s->data()) {
    for (const uint8_t b : *s->data()) sum += b;
  } else if (const wire::CollisionEvents* c = e.message_as_CollisionEvents()) {
    if (c->events()) {
      for (const wire::CollisionEvent* ev : *c->events()) sum += ev->tick() + ev->a() + ev->b();
    }
    if (c->packed()) {
      for (const uint8_t b : *c->packed()) sum += b;
    }
  } else if (const wire::RaycastResult* r = e.message_as_RaycastResult(); r && r->hits()) {
    for (const wire::RayHitEntry* h : *r->hits()) sum += h->id() + static_cast<uint64_t>(h->fraction() > 0.5f);
  }
  return sum;
}

DatagramBuffer buffer;
std::vector<uint8_t> misaligned;
volatile uint64_t sink;

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse::fuzz;
  using namespace impulse;
  const std::span<const uint8_t> bytes = buffer.assign({data, size});

  for (const wire::Direction d : {wire::Direction::ClientToServer, wire::Direction::ServerToClient}) {
    const wire::Verified v = wire::verify_datagram(bytes, d);
    if (v.reason == wire::DropReason::VersionMismatch) {
      IMPULSE_FUZZ_CHECK(v.envelope != nullptr, "VersionMismatch keeps the envelope");
      sink = static_cast<uint64_t>(v.envelope->message_type());  // the server reads it to answer a Connect
      if (const wire::Connect* c = v.envelope->message_as_Connect()) sink = c->protocol_version();
      continue;
    }
    if (v.reason != wire::DropReason::None) {
      IMPULSE_FUZZ_CHECK(v.envelope == nullptr, "a dropped datagram has no envelope");
      continue;
    }
    IMPULSE_FUZZ_CHECK(v.envelope != nullptr && v.envelope->message() != nullptr, "verified without a message");
    const wire::Message type = v.envelope->message_type();
    if (d == wire::Direction::ClientToServer) {
      IMPULSE_FUZZ_CHECK(wire::is_sent_by_client(type), "verified a server message as a client's");
      check_client_request(*v.envelope);
    } else {
      IMPULSE_FUZZ_CHECK(wire::is_sent_by_server(type), "verified a client message as a server's");
      sink = read_server_message(*v.envelope);
    }
  }

  // The same bytes one byte off an aligned address: a caller bug the verifier must refuse.
  if (size > 0) {
    misaligned.assign(size + 1, 0);
    std::copy(data, data + size, misaligned.begin() + 1);
    const std::span<const uint8_t> off(misaligned.data() + 1, size);
    for (const wire::Direction d : {wire::Direction::ClientToServer, wire::Direction::ServerToClient}) {
      IMPULSE_FUZZ_CHECK(wire::verify_datagram(off, d).reason != wire::DropReason::None,
                         "a misaligned buffer was accepted");
    }
  }
  return 0;
}
