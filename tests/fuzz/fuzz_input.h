// Input framing shared by the libFuzzer targets and fuzz_make_corpus: a bounds-checked reader of
// the fuzzer's bytes, and the "split" format that turns one input into a sequence of datagrams
// (so a target explores a Connect followed by requests, not only single datagrams).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace impulse::fuzz {

/// Aborts with `what` when an invariant of the code under test is broken. libFuzzer reports the
/// abort as a crash and keeps the input, so every broken invariant becomes a reproducer.
#define IMPULSE_FUZZ_CHECK(cond, what)                                             \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "fuzz invariant broken: %s (%s:%d)\n", what, __FILE__, __LINE__); \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

/// Reads the input front to back. Reads past the end return zeros or a short span, never fault.
class InputReader {
 public:
  explicit InputReader(std::span<const uint8_t> data) : data_(data) {}
  bool empty() const { return pos_ >= data_.size(); }
  size_t remaining() const { return data_.size() - pos_; }

  uint8_t u8() { return empty() ? 0 : data_[pos_++]; }
  /// Little-endian.
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  /// The next min(n, remaining()) bytes.
  std::span<const uint8_t> bytes(size_t n) {
    const size_t take = n < remaining() ? n : remaining();
    const std::span<const uint8_t> s = data_.subspan(pos_, take);
    pos_ += take;
    return s;
  }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

/// Split format: records of [u8 control][u16 little-endian length][length bytes], until the input
/// ends. What `control` means is up to each target (documented there).
struct SplitRecord {
  uint8_t control = 0;
  std::span<const uint8_t> bytes;  ///< may be shorter than the declared length at the input's end
};

/// Reads the next record; false when the input is exhausted.
inline bool next_record(InputReader& in, SplitRecord* record) {
  if (in.empty()) return false;
  record->control = in.u8();
  const uint16_t length = in.u16();
  record->bytes = in.bytes(length);
  return true;
}

/// Appends one record in the split format (for fuzz_make_corpus).
inline void append_record(std::vector<uint8_t>* out, uint8_t control, std::span<const uint8_t> bytes) {
  const size_t n = bytes.size() < 0xFFFF ? bytes.size() : 0xFFFF;
  out->push_back(control);
  out->push_back(static_cast<uint8_t>(n & 0xFF));
  out->push_back(static_cast<uint8_t>(n >> 8));
  out->insert(out->end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
}

/// A datagram buffer aligned like a real receive buffer (operator new aligns to 16 bytes, more than
/// wire::kDatagramAlignment), reused across calls.
class DatagramBuffer {
 public:
  std::span<const uint8_t> assign(std::span<const uint8_t> bytes) {
    storage_.assign(bytes.begin(), bytes.end());
    return storage_;
  }

 private:
  std::vector<uint8_t> storage_;
};

}  // namespace impulse::fuzz
