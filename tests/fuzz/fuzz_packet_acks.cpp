// libFuzzer target: net::PacketAcks fed arbitrary header fields. The input is a script of
// operations (packet_acks_ops.h) on a fake clock; every ack field, sequence and
// time step comes from the fuzzer, some relative to the current state so the interesting values
// (just above last_sent, just below the newest received) are reached without guessing 32-bit
// numbers.
//
// Invariants (abort = crash report), against a reference std::set of accepted sequences:
//  - ack_fields() equals what the reference set implies; on_receive's verdict equals the rule
//    (0, duplicate, more than 32 behind the newest);
//  - newly acked sequences are ascending, in [1, last_sent], each reported once in the whole run;
//  - a rejected on_acks changes nothing but ignored_acks;
//  - acked == sequences reported, acked + lost <= sent, loss in [0, 1], RTT finite and >= 0.
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "shared/net/packet_acks.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/packet_acks_ops.h"

namespace impulse::fuzz {
namespace {

using net::AckFields;
using net::LinkEstimates;
using net::PacketAcks;

/// Bursts stop here: half again around the sent buffer exercises its wrap; more sends only slow
/// the fuzzer down (sends dominate an execution's time).
constexpr uint32_t kMaxSends = net::kSequenceBufferSize + net::kSequenceBufferSize / 2;

bool same_except_ignored(const LinkEstimates& a, const LinkEstimates& b) {
  const auto same_float = [](float x, float y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return same_float(a.rtt_ms, b.rtt_ms) && same_float(a.rtt_jitter_ms, b.rtt_jitter_ms) &&
         same_float(a.loss, b.loss) && a.sent == b.sent && a.acked == b.acked && a.lost == b.lost &&
         a.sent_bytes == b.sent_bytes && a.acked_bytes == b.acked_bytes;
}

AckFields reference_fields(const std::set<uint32_t>& received) {
  AckFields f;
  if (received.empty()) return f;
  f.ack = *received.rbegin();
  for (uint32_t i = 0; i < net::kAckBits && f.ack > i + 1; ++i) {
    if (received.count(f.ack - 1 - i)) f.ack_bits |= 1u << i;
  }
  return f;
}

class Harness {
 public:
  void receive(uint32_t sequence) {
    const uint32_t newest = acks_.newest_received();
    const bool expected =
        sequence != 0 && !received_.count(sequence) && !(sequence < newest && newest - sequence > net::kAckBits);
    IMPULSE_FUZZ_CHECK(acks_.on_receive(sequence) == expected, "on_receive verdict differs from the rule");
    if (expected) received_.insert(sequence);
    const AckFields want = reference_fields(received_);
    const AckFields got = acks_.ack_fields();
    IMPULSE_FUZZ_CHECK(got.ack == want.ack && got.ack_bits == want.ack_bits, "ack fields differ from the reference");
    IMPULSE_FUZZ_CHECK(acks_.newest_received() == want.ack, "newest_received differs from the reference");
  }

  void send(size_t bytes) {
    const uint32_t before = acks_.last_sent();
    const uint32_t s = acks_.on_send(now_, bytes);
    IMPULSE_FUZZ_CHECK(s == before + 1 && acks_.last_sent() == s, "sequences must count up from 1");
    acked_flags_.push_back(false);  // index s - 1
    check_estimates();
  }

  void on_acks(AckFields fields) {
    const LinkEstimates before = acks_.estimates();
    newly_.clear();
    const bool ok = acks_.on_acks(fields, now_, &newly_);
    const LinkEstimates after = acks_.estimates();
    if (!ok) {
      IMPULSE_FUZZ_CHECK(newly_.empty(), "a rejected ack reported sequences");
      IMPULSE_FUZZ_CHECK(same_except_ignored(before, after), "a rejected ack changed the estimates");
      IMPULSE_FUZZ_CHECK(after.ignored_acks == before.ignored_acks + 1, "a rejected ack was not counted");
      return;
    }
    for (size_t i = 0; i < newly_.size(); ++i) {
      const uint32_t s = newly_[i];
      IMPULSE_FUZZ_CHECK(s >= 1 && s <= acks_.last_sent(), "acked a sequence never sent");
      IMPULSE_FUZZ_CHECK(i == 0 || newly_[i - 1] < s, "newly acked not ascending");
      IMPULSE_FUZZ_CHECK(!acked_flags_[s - 1], "a sequence was reported acked twice");
      IMPULSE_FUZZ_CHECK(s == fields.ack || (s < fields.ack && fields.ack - s <= net::kAckBits &&
                                             (fields.ack_bits >> (fields.ack - s - 1)) & 1u),
                         "acked a sequence the fields do not name");
      acked_flags_[s - 1] = true;
      ++reported_;
    }
    check_estimates();
  }

  void advance(std::chrono::nanoseconds dt) { now_ += dt; }

  const PacketAcks& acks() const { return acks_; }

 private:
  void check_estimates() const {
    const LinkEstimates e = acks_.estimates();
    IMPULSE_FUZZ_CHECK(e.acked == reported_, "acked differs from the sequences reported");
    IMPULSE_FUZZ_CHECK(e.sent == acks_.last_sent(), "sent differs from last_sent");
    IMPULSE_FUZZ_CHECK(e.acked + e.lost <= e.sent, "more acked and lost than sent");
    IMPULSE_FUZZ_CHECK(e.loss >= 0.0f && e.loss <= 1.0f, "loss outside [0, 1]");
    IMPULSE_FUZZ_CHECK(std::isfinite(e.rtt_ms) && e.rtt_ms >= 0.0f, "RTT not finite or negative");
    IMPULSE_FUZZ_CHECK(std::isfinite(e.rtt_jitter_ms) && e.rtt_jitter_ms >= 0.0f, "jitter not finite or negative");
  }

  PacketAcks acks_;
  net::TimePoint now_ = net::TimePoint{} + std::chrono::hours(1);
  std::set<uint32_t> received_;
  std::vector<bool> acked_flags_;  // by sequence - 1
  std::vector<uint32_t> newly_;
  uint64_t reported_ = 0;
};

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse::fuzz;
  Harness h;
  InputReader in({data, size});
  while (!in.empty()) {
    switch (in.u8() % kOps) {
      case kSend: h.send(in.u16()); break;
      case kSendBurst: {
        const int n = in.u8() + 1;
        for (int i = 0; i < n && h.acks().last_sent() < kMaxSends; ++i) h.send(1200);
        break;
      }
      case kReceive: h.receive(in.u32()); break;
      case kReceiveNear: h.receive(h.acks().newest_received() + static_cast<uint32_t>(static_cast<int8_t>(in.u8())));
        break;
      case kAcks: {
        const uint32_t ack = in.u32();
        h.on_acks({ack, in.u32()});
        break;
      }
      case kAcksNear: {
        const uint32_t ack = h.acks().last_sent() + 2 - in.u8();
        h.on_acks({ack, in.u32()});
        break;
      }
      case kAcksOwnFields: h.on_acks(h.acks().ack_fields()); break;
      case kAdvance: h.advance(std::chrono::microseconds(100) * in.u16()); break;
      default: break;
    }
  }
  return 0;
}
