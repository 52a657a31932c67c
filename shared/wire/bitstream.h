// Bit packing for the snapshot payload: LSB-first bit writer and bounds-checked reader, with
// exponential-Golomb codes (Teuhola, "A compression method for clustered bit-vectors", 1978) for
// unsigned values and zig-zag mapping for signed ones, as in Fiedler's "Reading and Writing
// Packets" and "Snapshot Compression" (gafferongames.com, 2015-2016).
//
// Bit order (the whole wire contract of this file): bit i of a stream is bit (i mod 8) of byte
// (i div 8), bit 0 being the least significant. A field of n bits with value v puts bit j of v
// (j = 0 is its least significant bit) at stream bit (position + j). So a stream of fields read
// as one little-endian integer is the fields concatenated from the low end. Unused bits of the
// last byte are zero.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace impulse::wire {

/// Appends bit fields to a byte vector (see the bit order above). Fields gather in a 64-bit
/// accumulator that is stored 4 bytes at a time; finish() stores the rest, after which the vector
/// holds ceil(bits / 8) bytes, every bit past the last field zero, and can be sent as is.
/// Lifetime: keeps a pointer to `bytes`, which must outlive the writer; do not touch the vector
/// between the first write and finish().
class BitWriter {
 public:
  /// Starts writing at the end of `bytes` (byte-aligned); existing bytes are kept.
  explicit BitWriter(std::vector<uint8_t>* bytes) : bytes_(bytes), bit_count_(bytes->size() * 8) {}

  /// Appends the low `count` bits of `value`, count in [0, 32]. Higher bits of value are ignored.
  void write_bits(uint32_t value, unsigned count) {
    if (count == 0) return;
    if (count < 32) value &= (uint32_t{1} << count) - 1u;
    pending_ |= static_cast<uint64_t>(value) << pending_bits_;  // pending_bits_ < 32 here
    pending_bits_ += count;
    bit_count_ += count;
    if (pending_bits_ >= 32) {
      const uint8_t word[4] = {static_cast<uint8_t>(pending_), static_cast<uint8_t>(pending_ >> 8),
                               static_cast<uint8_t>(pending_ >> 16), static_cast<uint8_t>(pending_ >> 24)};
      bytes_->insert(bytes_->end(), word, word + 4);
      pending_ >>= 32;
      pending_bits_ -= 32;
    }
  }
  void write_bit(bool bit) { write_bits(bit ? 1u : 0u, 1); }
  /// Stores the bits still in the accumulator (the last partial byte zero-padded). Writing may
  /// go on after it only from a byte boundary (bit_count() % 8 == 0).
  void finish() {
    for (; pending_bits_ > 0; pending_bits_ = pending_bits_ > 8 ? pending_bits_ - 8 : 0) {
      bytes_->push_back(static_cast<uint8_t>(pending_));
      pending_ >>= 8;
    }
    pending_ = 0;
  }
  /// Bits written, counting from the vector's first byte (not from where this writer started).
  size_t bit_count() const { return bit_count_; }

 private:
  std::vector<uint8_t>* bytes_;
  size_t bit_count_;
  uint64_t pending_ = 0;       // bits not yet stored, bit 0 first
  unsigned pending_bits_ = 0;  // < 32 between calls
};

/// A sink with BitWriter's interface that only counts, so sizes are computed by the very code
/// that encodes (no second formula to keep in sync).
class BitCounter {
 public:
  void write_bits(uint32_t, unsigned count) { bit_count_ += count; }
  void write_bit(bool) { ++bit_count_; }
  size_t bit_count() const { return bit_count_; }

 private:
  size_t bit_count_ = 0;
};

/// Reads bit fields from a span without ever reading past its end: a read that would cross the
/// end sets a sticky overrun flag, consumes nothing and returns 0. Lifetime: views `bytes`.
class BitReader {
 public:
  explicit BitReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  /// Reads `count` bits, count in [0, 32] (a larger count is an overrun).
  uint32_t read_bits(unsigned count) {
    if (overrun_ || count > 32 || count > bits_remaining()) {
      overrun_ = true;
      return 0;
    }
    const uint64_t mask = (uint64_t{1} << count) - 1u;
    const uint32_t value = static_cast<uint32_t>(peek() & mask);
    position_ += count;
    return value;
  }
  bool read_bit() { return read_bits(1) != 0; }
  /// True once any read went past the end (sticky).
  bool overrun() const { return overrun_; }
  /// The next bits of the stream from the read position, bit 0 first: at least 57 of them (the
  /// rest of a byte-aligned 8-byte load), zeros past the end of the span. Consumes nothing.
  uint64_t peek() const {
    const size_t first = position_ >> 3;
    const size_t n = bytes_.size() - first < 8 ? bytes_.size() - first : 8;
    uint64_t word = 0;
    // Little-endian assembly; compilers turn the full 8-byte case into one load on x86.
    if (n == 8) {
      for (size_t i = 0; i < 8; ++i) word |= static_cast<uint64_t>(bytes_[first + i]) << (8 * i);
    } else {
      for (size_t i = 0; i < n; ++i) word |= static_cast<uint64_t>(bytes_[first + i]) << (8 * i);
    }
    return word >> (position_ & 7u);
  }
  /// Consumes `count` bits that peek() showed; count <= bits_remaining().
  void skip(size_t count) { position_ += count; }
  /// Bits consumed so far.
  size_t position() const { return position_; }
  size_t bits_remaining() const { return bytes_.size() * 8 - position_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t position_ = 0;
  bool overrun_ = false;
};

/// Zig-zag mapping of a signed value to an unsigned one: 0, -1, 1, -2, 2... -> 0, 1, 2, 3, 4...
constexpr uint32_t zigzag_encode(int32_t v) {
  return (static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31);
}
constexpr int32_t zigzag_decode(uint32_t u) {
  return static_cast<int32_t>((u >> 1) ^ (0u - (u & 1u)));
}

/// Largest exponential-Golomb order the helpers accept.
inline constexpr unsigned kMaxExpGolombOrder = 16;

/// Size of the order-k exponential-Golomb code of v [bits]: with w = v + 2^k and n = floor(log2 w),
/// 2n - k + 1 bits. So v < 2^k costs k + 1 bits, and every doubling of v two more.
constexpr unsigned exp_golomb_bits(uint32_t v, unsigned k) {
  const uint64_t w = uint64_t{v} + (uint64_t{1} << k);
  const unsigned n = 63u - static_cast<unsigned>(std::countl_zero(w));
  return 2 * n - k + 1;
}

/// Writes the order-k exponential-Golomb code of v (k <= kMaxExpGolombOrder): with w = v + 2^k and
/// n = floor(log2 w), first (n - k) zero bits, then a one bit, then the low n bits of w as one
/// n-bit field. Any uint32 value is encodable; the longest code (v = 2^32 - 1, k = 0) is 65 bits.
template <class Sink>
void write_exp_golomb(Sink& sink, uint32_t v, unsigned k) {
  const uint64_t w = uint64_t{v} + (uint64_t{1} << k);
  const unsigned n = 63u - static_cast<unsigned>(std::countl_zero(w));
  for (unsigned zeros = n - k; zeros > 0;) {
    const unsigned chunk = zeros < 32 ? zeros : 32;
    sink.write_bits(0, chunk);
    zeros -= chunk;
  }
  sink.write_bit(true);
  sink.write_bits(static_cast<uint32_t>(w - (uint64_t{1} << n)), n);
}

/// Reads an order-k exponential-Golomb code written by write_exp_golomb.
/// @param max_value  largest acceptable value; larger ones are malformed
/// @return false when the reader overran (see BitReader::overrun) or the code is malformed (more
///         than 32 - k leading zeros, or a value above max_value); *out is then 0.
inline bool read_exp_golomb(BitReader& reader, unsigned k, uint32_t max_value, uint32_t* out) {
  *out = 0;
  if (reader.overrun()) return false;
  // The leading zeros in one look: a set bit in the window is a real one (the window is zero past
  // the end), so the zeros before it are all in the stream.
  const unsigned limit = 32 - k;  // more zeros than this is malformed
  const size_t available = reader.bits_remaining();
  const uint64_t window = reader.peek();
  const unsigned zeros = window != 0 ? static_cast<unsigned>(std::countr_zero(window)) : 64u;
  if (zeros > limit) {
    if (available > limit) {  // the (limit + 1)-th zero is in the stream: malformed, not short
      reader.skip(limit + 1);
      return false;
    }
    reader.skip(available);
    reader.read_bits(1);  // sets the overrun flag
    return false;
  }
  reader.skip(zeros + 1);
  const unsigned n = zeros + k;
  const uint64_t w = (uint64_t{1} << n) + reader.read_bits(n);
  if (reader.overrun()) return false;
  const uint64_t v = w - (uint64_t{1} << k);
  if (v > max_value) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace impulse::wire
