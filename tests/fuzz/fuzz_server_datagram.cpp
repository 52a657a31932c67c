// libFuzzer target: the server's whole receive path. A fresh ServerCore (fake clock) gets the
// input as one datagram from endpoint 0, then the input read in the split format (fuzz_input.h) as a sequence of
// datagrams from up to four endpoints with time advancing between them, so verification, the
// handshake, request checks, the request queue and the tick (steps, snapshots, events, timeouts)
// all see fuzzed data.
//
// Split format control byte: bits 0-1 pick the endpoint; bits 2-7 advance the fake clock by that
// many milliseconds (then update() runs) before the datagram. A record of length 0 makes the
// harness connect that endpoint properly (connect_session).
//
// Invariants checked on every wake-up (abort = crash report):
//  - every datagram the server queues is <= kMaxDatagramBytes and verifies as ServerToClient
//    (after opening it, when sealed for a session the harness keyed: FuzzPeers);
// Records to an endpoint in a session are sealed by the harness like a client's (unless they
// already start with the sealed magic, which reaches the server's unsealing path raw).
//  - an endpoint that was never accepted gets no more bytes back than the datagram it sent.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>

#include <spdlog/spdlog.h>

#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_server_scene.h"

namespace impulse::fuzz {
namespace {

/// Records past this are ignored, to bound one input's run time.
constexpr int kMaxRecords = 256;

class Harness {
 public:
  Harness() : core_(fuzz_server_config(), {0, -9.81f, 0}, stats_) {
    std::string error;
    IMPULSE_FUZZ_CHECK(add_fuzz_scene(core_, &error), "the fuzz scene must load");
    core_.start(now_);
  }

  /// Delivers one datagram from endpoint `index` and checks the replies.
  void receive(unsigned index, std::span<const uint8_t> bytes) {
    const server::Endpoint from = fuzz_endpoint(index);
    core_.handle_datagram(from, buffer_.assign(peers_.outgoing(index, bytes)), now_, out_);
    size_t bytes_to_sender = 0;
    bool accepted_now = false;
    for (const server::Outbox::Datagram& d : out_.datagrams()) {
      const std::span<const uint8_t> reply = out_.bytes_of(d);
      IMPULSE_FUZZ_CHECK(reply.size() <= wire::kMaxDatagramBytes, "the server queued an oversized datagram");
      if (d.to == from) {
        bytes_to_sender += reply.size();
        accepted_now = accepted_now || is_connect_accepted(reply);
      }
      check_outgoing(peers_.incoming(d.to, reply));
    }
    if (accepted_now) accepted_.insert(index & 3);
    if (!accepted_.count(index & 3)) {
      IMPULSE_FUZZ_CHECK(bytes_to_sender <= bytes.size(), "amplification: reply larger than an unvalidated request");
    }
    out_.clear();
  }

  /// Connects endpoint `index` like a real client.
  void connect(unsigned index) {
    connect_session(core_, fuzz_endpoint(index), now_, fbb_, out_);
    drain();
  }

  /// Advances the fake clock and runs one wake-up.
  void advance(std::chrono::nanoseconds dt) {
    now_ += dt;
    core_.update(now_, out_);
    drain();
  }

 private:
  void drain() {
    for (const server::Outbox::Datagram& d : out_.datagrams()) {
      const std::span<const uint8_t> bytes = out_.bytes_of(d);
      IMPULSE_FUZZ_CHECK(bytes.size() <= wire::kMaxDatagramBytes, "the server queued an oversized datagram");
      if (is_connect_accepted(bytes)) {
        for (unsigned i = 0; i < 4; ++i) {
          if (d.to == fuzz_endpoint(i)) accepted_.insert(i);
        }
      }
      check_outgoing(peers_.incoming(d.to, bytes));
    }
    out_.clear();
  }

  /// `bytes` is the plaintext of a queued datagram; empty when it was sealed with keys the
  /// harness does not hold (a session keyed from a fuzzed Connect), then nothing is checked.
  void check_outgoing(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
    const wire::Verified v = wire::verify_datagram(check_buffer_.assign(bytes), wire::Direction::ServerToClient);
    IMPULSE_FUZZ_CHECK(v.reason == wire::DropReason::None, "the server queued a datagram its clients reject");
  }

  bool is_connect_accepted(std::span<const uint8_t> bytes) {
    const wire::Verified v = wire::verify_datagram(check_buffer_.assign(bytes), wire::Direction::ServerToClient);
    return v.envelope && v.envelope->message_type() == wire::Message::ConnectAccepted;
  }

  server::ServerStats stats_;
  server::ServerCore core_;
  server::TimePoint now_ = kFuzzStart;
  server::Outbox out_;
  flatbuffers::FlatBufferBuilder fbb_{2 * wire::kMaxDatagramBytes};
  DatagramBuffer buffer_;
  DatagramBuffer check_buffer_;
  FuzzPeers peers_;
  std::set<unsigned> accepted_;  // endpoints that were sent a ConnectAccepted at some point
};

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // rejects are logged; the fuzzer makes millions
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse::fuzz;
  const std::span<const uint8_t> input(data, size);

  // 1. The whole input as one datagram, then a wake-up a tick later that applies it if queued.
  // (One core for both phases: constructing it is a large share of an execution.)
  Harness h;
  h.receive(0, input);
  h.advance(17ms);

  // 2. The input as a sequence of datagrams, on the same server.
  InputReader in(input);
  SplitRecord record;
  for (int n = 0; n < kMaxRecords && next_record(in, &record); ++n) {
    const unsigned endpoint = record.control & 3u;
    const unsigned advance_ms = record.control >> 2;
    if (advance_ms > 0) h.advance(std::chrono::milliseconds(advance_ms));
    if (record.bytes.empty()) {
      h.connect(endpoint);
    } else {
      h.receive(endpoint, record.bytes);
    }
  }
  // Let everything queued be applied, snapshotted and answered.
  for (int i = 0; i < 3; ++i) h.advance(17ms);
  return 0;
}
