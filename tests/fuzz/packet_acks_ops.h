// The operation script of fuzz_packet_acks, shared with fuzz_make_corpus (which records real
// exchanges as scripts). Each operation is one byte (taken modulo kOps) and its operands,
// little-endian.
#pragma once

#include <cstdint>

namespace impulse::fuzz {

enum PacketAcksOp : uint8_t {
  kSend,           ///< u16 bytes: on_send(now, bytes)
  kSendBurst,      ///< u8 n: n + 1 sends at the same time (reaches the sent buffer's wrap quickly)
  kReceive,        ///< u32 sequence: on_receive(sequence)
  kReceiveNear,    ///< u8 d: on_receive(newest_received + (int8_t) d)
  kAcks,           ///< u32 ack, u32 ack_bits: on_acks
  kAcksNear,       ///< u8 d, u32 ack_bits: on_acks({last_sent + 2 - d, ack_bits}), around last_sent
  kAcksOwnFields,  ///< on_acks(ack_fields()): a well-formed header
  kAdvance,        ///< u16 n: now += n * 100 us
  kOps,
};

}  // namespace impulse::fuzz
