// Packet-level acks with sequence buffers, RTT and loss estimation: Glenn Fiedler, "Reliability,
// Ordering and Congestion Avoidance over UDP" (gafferongames.com, 2008) and "Reliable Ordered
// Messages" (gafferongames.com, 2016, sections "Packet Levels Acks" and "Sequence Buffers");
// RTT variation as in RFC 6298 ("Computing TCP's Retransmission Timer").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "shared/net/link_estimates.h"

namespace impulse::net {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

/// Entries of each sequence buffer (sent and received). A power of two so that the slot of a
/// sequence is `sequence & (kSequenceBufferSize - 1)`. It bounds how many datagrams may be in
/// flight before the oldest unacked one is counted as lost (1024 is 17 s at 60 datagrams/s).
inline constexpr uint32_t kSequenceBufferSize = 1024;
/// Sequences acked by one header besides `ack` itself: bit i of ack_bits is ack - 1 - i.
inline constexpr uint32_t kAckBits = 32;
/// Exponential smoothing factor of the RTT and its jitter per sample (Fiedler's 10 %).
inline constexpr float kRttSmoothing = 0.1f;
/// Smoothing factor of the loss estimate per decided datagram. Time constant 256 datagrams, so
/// the estimate's 1-sigma noise is about sqrt(p (1 - p) / 511) (0.019 at p = 0.25). The first
/// 256 datagrams use the running mean instead, so the estimate starts unbiased.
inline constexpr float kLossSmoothing = 1.0f / 256.0f;
/// A datagram not acked within loss_timeout = clamp(2 * rtt + 4 * jitter, floor, ceiling) of its
/// send is counted as lost. The floor covers the peer's ack delay before the first RTT sample
/// (it acks only when it next sends); the ceiling keeps the estimate responsive on a link whose
/// RTT blew up.
inline constexpr std::chrono::milliseconds kLossTimeoutFloor{200};
inline constexpr std::chrono::milliseconds kLossTimeoutCeiling{2000};

/// The ack fields of a packet header (schemas/impulse.fbs PacketHeader).
struct AckFields {
  uint32_t ack = 0;       ///< newest sequence received from the peer; 0 = none yet
  uint32_t ack_bits = 0;  ///< bit i set: sequence ack - 1 - i was received too
};

/// The ack bookkeeping of one connection, on one side (server and client each hold one per
/// connection). Sequences are 32-bit, start at 1, grow by one per datagram sent and never wrap
/// (on_send returns 0 once 2^32 - 1 have been sent: the connection must then be re-established).
///
/// Two sequence buffers of kSequenceBufferSize entries, each tagged with its sequence, hold the
/// sent datagrams (send time, size, acked) and the received sequences; they are allocated once
/// in the constructor, nothing allocates afterwards. Time is passed in, never read.
///
/// Acks only reach back kAckBits + 1 sequences: a peer that receives more than 33 datagrams
/// between two of its own sends cannot ack them all, and the unacked ones count as lost. The peer
/// must therefore send (at least an ack-only datagram) often enough.
class PacketAcks {
 public:
  PacketAcks();

  /// Sequence for the next outgoing datagram (1, 2, ...); records its send time and size.
  /// Also counts as lost the datagrams whose loss timeout has passed at `now`, so the loss
  /// estimate rises while the peer is silent. Returns 0 (and records nothing) once the sequence
  /// space is exhausted.
  /// @param bytes  size of the datagram [bytes], for the byte counters
  uint32_t on_send(TimePoint now, size_t bytes);

  /// Fields to put in the header of the next outgoing datagram. O(kAckBits).
  AckFields ack_fields() const;

  /// The peer's datagram `sequence` was received AND accepted by the caller. Returns false for 0,
  /// a duplicate, or one too old to represent (more than kAckBits older than the newest
  /// received): the caller may still use it but it adds nothing to the acks. A sequence newer
  /// than the newest is always recorded, however far ahead (a legitimate outage can skip any
  /// number); datagrams from an unvalidated address must not reach here.
  bool on_receive(uint32_t sequence);

  /// Processes the ack fields of a datagram from the peer. Appends every sequence it newly acks
  /// to *newly_acked (ascending; may be null), samples the RTT from each newly acked datagram's
  /// send time (first sample taken as is, then rtt += 0.1 (sample - rtt), and jitter likewise
  /// towards |sample - rtt|), and decides the datagrams whose loss timeout passed at `now`.
  /// A datagram acked after it was counted as lost moves from `lost` back to `acked` (the
  /// smoothed loss keeps the sample). Fields are never trusted: `ack` beyond last_sent(), bits
  /// naming sequences < 1, or ack == 0 with bits set make the whole call a no-op apart from
  /// counting ignored_acks, and returns false. Acks of sequences no longer in the sent buffer
  /// are ignored silently.
  bool on_acks(AckFields fields, TimePoint now, std::vector<uint32_t>* newly_acked);

  LinkEstimates estimates() const { return estimates_; }
  /// The loss timeout currently in force (see kLossTimeoutFloor).
  std::chrono::nanoseconds loss_timeout() const;
  /// Sequence of the newest datagram sent; 0 before the first.
  uint32_t last_sent() const { return last_sent_; }
  /// Newest sequence received from the peer; 0 before the first.
  uint32_t newest_received() const { return newest_received_; }

 private:
  struct SentEntry {
    TimePoint sent_at{};
    uint32_t sequence = 0;  ///< tag: the entry describes this sequence; 0 = empty
    uint16_t bytes = 0;     ///< saturated at 65535
    bool acked = false;
  };

  /// Decides, oldest first, the sent datagrams that are acked or past the loss timeout at `now`.
  void decide_losses(TimePoint now);
  /// Decides every sent datagram up to `last` inclusive, lost unless acked (its slot is reused).
  void force_decide(uint64_t last);
  /// Marks `sequence` acked if it is still in the sent buffer and not acked yet.
  void ack_one(uint32_t sequence, TimePoint now, std::vector<uint32_t>* newly_acked);
  /// Folds one decided datagram (1 = lost, 0 = delivered) into the smoothed loss.
  void add_loss_sample(float lost);
  void add_rtt_sample(float rtt_ms);

  std::vector<SentEntry> sent_;        // kSequenceBufferSize, indexed by sequence & mask
  std::vector<uint32_t> received_;     // kSequenceBufferSize tags; slot == sequence: received
  uint32_t last_sent_ = 0;
  uint32_t newest_received_ = 0;
  // Oldest sent sequence whose fate (delivered or lost) is still open; 64-bit so that it can
  // step past the last 32-bit sequence.
  uint64_t undecided_ = 1;
  uint64_t loss_samples_ = 0;
  bool rtt_sampled_ = false;
  LinkEstimates estimates_;
};

}  // namespace impulse::net
