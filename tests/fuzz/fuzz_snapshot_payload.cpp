// libFuzzer target: wire::SnapshotReceiver::apply, the client's decoder of snapshot payloads
// (bit-packed entry, delta and exit records). A fresh receiver with the default quantisation gets
// the whole input as one payload, then the input read in the split format (fuzz_input.h) as a
// sequence of payloads, so deltas can refer to the baselines of earlier entries.
//
// Split format control byte: the packet sequence advances by (int8_t) control (0 or negative
// gives a stale or repeated sequence); the tick advances by one per record.
//
// Invariants (abort = crash report): a rejected payload leaves the view bit-identical; an applied
// one sets sequence() and tick(); the view is sorted by index with finite values and unit
// orientations; entered/exited/updated name objects that are (or, for exits, were) in the view.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "shared/wire/snapshot_codec.h"
#include "tests/fuzz/fuzz_input.h"

namespace impulse::fuzz {
namespace {

using wire::SnapshotError;
using wire::SnapshotObject;

/// Records past this are ignored, to bound one input's run time.
constexpr int kMaxRecords = 256;

bool bits_equal(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool bits_equal(const Vec3& a, const Vec3& b) {
  return bits_equal(a.x, b.x) && bits_equal(a.y, b.y) && bits_equal(a.z, b.z);
}
bool bits_equal(const Quat& a, const Quat& b) {
  return bits_equal(a.x, b.x) && bits_equal(a.y, b.y) && bits_equal(a.z, b.z) && bits_equal(a.w, b.w);
}
bool same_object(const SnapshotObject& a, const SnapshotObject& b) {
  return a.id == b.id && a.kind == b.kind && a.shape == b.shape && bits_equal(a.dims, b.dims) &&
         a.sensor == b.sensor && bits_equal(a.position, b.position) && bits_equal(a.orientation, b.orientation) &&
         bits_equal(a.velocity, b.velocity) && bits_equal(a.angular_velocity, b.angular_velocity) &&
         a.at_rest == b.at_rest;
}
bool finite(const Vec3& v) { return std::isfinite(v.x) && std::isfinite(v.y) && std::isfinite(v.z); }

class Harness {
 public:
  Harness() : receiver_(wire::QuantizationConfig{}) {}

  void apply(uint32_t sequence, uint64_t tick, std::span<const uint8_t> payload) {
    before_.assign(receiver_.objects().begin(), receiver_.objects().end());
    const bool had_applied = receiver_.has_applied();
    const uint32_t old_sequence = receiver_.sequence();
    const uint64_t old_tick = receiver_.tick();

    const SnapshotError error = receiver_.apply(sequence, tick, payload);
    IMPULSE_FUZZ_CHECK(static_cast<uint8_t>(error) < static_cast<uint8_t>(SnapshotError::Count),
                       "unknown SnapshotError");
    const std::span<const SnapshotObject> view = receiver_.objects();
    if (error != SnapshotError::None) {
      IMPULSE_FUZZ_CHECK(view.size() == before_.size() &&
                             std::equal(view.begin(), view.end(), before_.begin(), same_object),
                         "a rejected payload changed the view");
      IMPULSE_FUZZ_CHECK(receiver_.has_applied() == had_applied && receiver_.sequence() == old_sequence &&
                             receiver_.tick() == old_tick,
                         "a rejected payload changed the sequence or tick");
      return;
    }
    IMPULSE_FUZZ_CHECK(receiver_.has_applied() && receiver_.sequence() == sequence && receiver_.tick() == tick,
                       "an applied payload did not set sequence and tick");
    for (size_t i = 0; i < view.size(); ++i) {
      const SnapshotObject& o = view[i];
      IMPULSE_FUZZ_CHECK(i == 0 || view[i - 1].id.index < o.id.index, "view not sorted by index");
      IMPULSE_FUZZ_CHECK(o.id.index < wire::kMaxSnapshotObjectIndex, "index beyond the limit");
      IMPULSE_FUZZ_CHECK(finite(o.position) && finite(o.velocity) && finite(o.angular_velocity) && finite(o.dims),
                         "non-finite value in the view");
      const Quat& q = o.orientation;
      const float norm2 = q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
      IMPULSE_FUZZ_CHECK(std::fabs(norm2 - 1.0f) < 1e-3f, "orientation not unit");
      IMPULSE_FUZZ_CHECK(receiver_.find(o.id) == &o, "find() misses an object of the view");
    }
    for (const ObjectID id : receiver_.entered()) {
      IMPULSE_FUZZ_CHECK(receiver_.find(id) != nullptr, "an entered object is not in the view");
    }
    for (const ObjectID id : receiver_.updated()) {
      IMPULSE_FUZZ_CHECK(receiver_.find(id) != nullptr, "an updated object is not in the view");
    }
    for (const ObjectID id : receiver_.exited()) {
      const bool was_held = std::any_of(before_.begin(), before_.end(), [id](const SnapshotObject& o) { return o.id == id; });
      IMPULSE_FUZZ_CHECK(was_held, "an exited object was never in the view");
    }
  }

 private:
  wire::SnapshotReceiver receiver_;
  std::vector<SnapshotObject> before_;
};

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse::fuzz;
  const std::span<const uint8_t> input(data, size);
  {
    Harness h;
    h.apply(1, 1, input);
  }
  Harness h;
  InputReader in(input);
  SplitRecord record;
  uint32_t sequence = 0;
  uint64_t tick = 0;
  for (int n = 0; n < kMaxRecords && next_record(in, &record); ++n) {
    sequence += static_cast<uint32_t>(static_cast<int8_t>(record.control));
    h.apply(sequence, ++tick, record.bytes);
  }
  return 0;
}
