// Packet-level acks with sequence buffers, RTT and loss estimation: Glenn Fiedler, "Reliability,
// Ordering and Congestion Avoidance over UDP" (2008) and "Reliable Ordered Messages" (2016),
// gafferongames.com; RTT variation as in RFC 6298.
#include "shared/net/packet_acks.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace impulse::net {
namespace {

constexpr uint32_t kSlotMask = kSequenceBufferSize - 1;
static_assert((kSequenceBufferSize & kSlotMask) == 0, "the sequence buffer must be a power of two");
static_assert(kAckBits == 32, "ack_bits is one uint32");
static_assert(kSequenceBufferSize > kAckBits, "the received buffer must cover the ack window");

float to_ms(std::chrono::nanoseconds d) { return static_cast<float>(static_cast<double>(d.count()) * 1.0e-6); }

}  // namespace

PacketAcks::PacketAcks() : sent_(kSequenceBufferSize), received_(kSequenceBufferSize, 0) {}

uint32_t PacketAcks::on_send(TimePoint now, size_t bytes) {
  if (last_sent_ == std::numeric_limits<uint32_t>::max()) return 0;
  decide_losses(now);
  const uint32_t sequence = last_sent_ + 1;
  // The slot still describes sequence - kSequenceBufferSize: decide it (and anything older) now,
  // since its ack could no longer be matched once the slot is reused.
  if (sequence > kSequenceBufferSize) force_decide(sequence - kSequenceBufferSize);
  last_sent_ = sequence;
  SentEntry& e = sent_[sequence & kSlotMask];
  e.sent_at = now;
  e.sequence = sequence;
  e.bytes = static_cast<uint16_t>(std::min<size_t>(bytes, std::numeric_limits<uint16_t>::max()));
  e.acked = false;
  ++estimates_.sent;
  estimates_.sent_bytes += bytes;
  return sequence;
}

AckFields PacketAcks::ack_fields() const {
  AckFields f;
  f.ack = newest_received_;
  for (uint32_t i = 0; i < kAckBits; ++i) {
    if (f.ack <= i + 1) break;  // ack - 1 - i would be 0 or negative
    const uint32_t sequence = f.ack - 1 - i;
    if (received_[sequence & kSlotMask] == sequence) f.ack_bits |= 1u << i;
  }
  return f;
}

bool PacketAcks::on_receive(uint32_t sequence) {
  if (sequence == 0) return false;
  if (sequence < newest_received_ && newest_received_ - sequence > kAckBits) return false;  // too old
  uint32_t& slot = received_[sequence & kSlotMask];
  if (slot == sequence) return false;  // duplicate
  // Whatever the slot held is older than sequence - kAckBits, so no header can name it anymore.
  slot = sequence;
  newest_received_ = std::max(newest_received_, sequence);
  return true;
}

bool PacketAcks::on_acks(AckFields fields, TimePoint now, std::vector<uint32_t>* newly_acked) {
  // Reject malformed or hostile fields whole: a correct peer never produces them.
  bool valid = fields.ack <= last_sent_;
  if (fields.ack == 0) {
    valid = valid && fields.ack_bits == 0;
  } else if (fields.ack <= kAckBits) {
    // Bits at i >= ack - 1 name sequences <= 0.
    valid = valid && (fields.ack_bits >> (fields.ack - 1)) == 0;
  }
  if (!valid) {
    ++estimates_.ignored_acks;
    return false;
  }
  if (fields.ack != 0) {
    // Oldest first, so *newly_acked comes out ascending.
    for (uint32_t i = kAckBits; i-- > 0;) {
      if (fields.ack_bits & (1u << i)) ack_one(fields.ack - 1 - i, now, newly_acked);
    }
    ack_one(fields.ack, now, newly_acked);
  }
  decide_losses(now);
  return true;
}

std::chrono::nanoseconds PacketAcks::loss_timeout() const {
  const double ms = 2.0 * estimates_.rtt_ms + 4.0 * estimates_.rtt_jitter_ms;
  const auto timeout = std::chrono::nanoseconds(static_cast<int64_t>(std::min(ms, 1.0e7) * 1.0e6));
  return std::clamp<std::chrono::nanoseconds>(timeout, kLossTimeoutFloor, kLossTimeoutCeiling);
}

void PacketAcks::ack_one(uint32_t sequence, TimePoint now, std::vector<uint32_t>* newly_acked) {
  SentEntry& e = sent_[sequence & kSlotMask];
  if (e.sequence != sequence || e.acked) return;  // slot reused by a newer send, or acked before
  e.acked = true;
  ++estimates_.acked;
  estimates_.acked_bytes += e.bytes;
  if (sequence < undecided_) --estimates_.lost;  // it had been counted as lost: it was only late
  add_rtt_sample(std::max(0.0f, to_ms(now - e.sent_at)));
  if (newly_acked) newly_acked->push_back(sequence);
}

void PacketAcks::decide_losses(TimePoint now) {
  const std::chrono::nanoseconds timeout = loss_timeout();
  // Sends are in time order, so the first undecided datagram that is neither acked nor timed out
  // means none after it has timed out either.
  while (undecided_ <= last_sent_) {
    const SentEntry& e = sent_[undecided_ & kSlotMask];
    if (e.acked) {
      add_loss_sample(0.0f);
    } else if (now - e.sent_at >= timeout) {
      add_loss_sample(1.0f);
      ++estimates_.lost;
    } else {
      break;
    }
    ++undecided_;
  }
}

void PacketAcks::force_decide(uint64_t last) {
  for (; undecided_ <= last; ++undecided_) {
    const bool acked = sent_[undecided_ & kSlotMask].acked;
    add_loss_sample(acked ? 0.0f : 1.0f);
    if (!acked) ++estimates_.lost;
  }
}

void PacketAcks::add_loss_sample(float lost) {
  ++loss_samples_;
  const float alpha = std::max(kLossSmoothing, 1.0f / static_cast<float>(loss_samples_));
  estimates_.loss += alpha * (lost - estimates_.loss);
  estimates_.loss = std::clamp(estimates_.loss, 0.0f, 1.0f);
}

void PacketAcks::add_rtt_sample(float rtt_ms) {
  if (!rtt_sampled_) {
    rtt_sampled_ = true;
    estimates_.rtt_ms = rtt_ms;
    estimates_.rtt_jitter_ms = 0.0f;
    return;
  }
  // Deviation from the previous smoothed RTT, as RFC 6298 updates RTTVAR before SRTT.
  estimates_.rtt_jitter_ms += kRttSmoothing * (std::fabs(rtt_ms - estimates_.rtt_ms) - estimates_.rtt_jitter_ms);
  estimates_.rtt_ms += kRttSmoothing * (rtt_ms - estimates_.rtt_ms);
}

}  // namespace impulse::net
