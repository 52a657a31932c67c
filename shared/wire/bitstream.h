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

/// Appends bit fields to a byte vector (see the bit order above). The vector always holds
/// ceil(bits / 8) bytes and every bit past the last field is zero, so it can be sent as is.
/// Lifetime: keeps a pointer to `bytes`, which must outlive the writer.
class BitWriter {
 public:
  /// Starts writing at the end of `bytes` (byte-aligned); existing bytes are kept.
  explicit BitWriter(std::vector<uint8_t>* bytes) : bytes_(bytes), bit_count_(bytes->size() * 8) {}

  /// Appends the low `count` bits of `value`, count in [0, 32]. Higher bits of value are ignored.
  void write_bits(uint32_t value, unsigned count) {
    if (count == 0) return;
    if (count < 32) value &= (uint32_t{1} << count) - 1u;
    const size_t first = bit_count_ >> 3;
    const unsigned offset = static_cast<unsigned>(bit_count_ & 7u);
    bit_count_ += count;
    bytes_->resize((bit_count_ + 7) >> 3, 0);  // new bytes start at zero
    uint64_t bits = static_cast<uint64_t>(value) << offset;  // at most 39 bits: 5 bytes
    for (size_t i = first; bits != 0; ++i, bits >>= 8) (*bytes_)[i] = static_cast<uint8_t>((*bytes_)[i] | bits);
  }
  void write_bit(bool bit) { write_bits(bit ? 1u : 0u, 1); }
  /// Bits in the vector, counting from its first byte (not from where this writer started).
  size_t bit_count() const { return bit_count_; }

 private:
  std::vector<uint8_t>* bytes_;
  size_t bit_count_;
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
    uint32_t value = 0;
    unsigned done = 0;
    while (done < count) {
      const unsigned offset = static_cast<unsigned>(position_ & 7u);
      const unsigned take = count - done < 8u - offset ? count - done : 8u - offset;
      const uint32_t bits = (static_cast<uint32_t>(bytes_[position_ >> 3]) >> offset) & ((1u << take) - 1u);
      value |= bits << done;
      done += take;
      position_ += take;
    }
    return value;
  }
  bool read_bit() { return read_bits(1) != 0; }
  /// True once any read went past the end (sticky).
  bool overrun() const { return overrun_; }
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
  unsigned zeros = 0;
  while (!reader.read_bit()) {
    if (reader.overrun() || ++zeros > 32 - k) return false;
  }
  if (reader.overrun()) return false;
  const unsigned n = zeros + k;
  const uint64_t w = (uint64_t{1} << n) + reader.read_bits(n);
  if (reader.overrun()) return false;
  const uint64_t v = w - (uint64_t{1} << k);
  if (v > max_value) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace impulse::wire
