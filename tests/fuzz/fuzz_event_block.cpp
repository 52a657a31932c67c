// libFuzzer target: wire::decode_collision_events, the client's decoder of CollisionEvents.packed
// (bit-packed collision events, protocol 4). The first input byte picks one of four valid
// quantisations (the position field is 21, 26, 2 or 26 bits wide), the rest is the block. Most
// random blocks fail the checksum, so every input is also decoded a second time with its
// checksum recomputed, which takes the fuzzer straight to the structural checks.
//
// Invariants (abort = crash report): a rejected block yields no event; an accepted one holds at
// most kMaxEventsPerBlock events of a known type, points within the world bound on the position
// grid and unit normals (a joint event's anchors, in point and normal, on the grid; its detail in
// range); re-encoding the decoded events and decoding again gives the same ids, ticks, sequences,
// types, joint fields and points, and normals within max_normal_error_rad.
#include <xxhash.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shared/wire/event_codec.h"
#include "tests/fuzz/fuzz_input.h"

namespace impulse::fuzz {
namespace {

wire::QuantizationConfig config_of(uint8_t selector) {
  wire::QuantizationConfig c;  // 0: the default, 1024 m at 2^-9 m (21-bit fields)
  switch (selector & 3u) {
    case 1:  // the widest field: 32768 m at 2^-9 m (26 bits)
      c.world_bound_m = 32768.0f;
      break;
    case 2:  // the narrowest: 1 m at 1 m (2 bits)
      c.world_bound_m = 1.0f;
      c.position_fraction_bits = 0;
      break;
    case 3:  // the finest step: 16 m at 2^-20 m (26 bits)
      c.world_bound_m = 16.0f;
      c.position_fraction_bits = 20;
      break;
    default:
      break;
  }
  return c;
}

double angle_between(const wire::Vec3& a, const wire::Vec3& b) {
  const double d = static_cast<double>(a.x()) * b.x() + static_cast<double>(a.y()) * b.y() +
                   static_cast<double>(a.z()) * b.z();
  return std::acos(d > 1.0 ? 1.0 : (d < -1.0 ? -1.0 : d));
}

void check(std::span<const uint8_t> block, const wire::QuantizationConfig& config) {
  static std::vector<wire::CollisionEvent> events, again;
  static std::vector<wire::JointEventFields> joints, joints_again;
  static std::vector<uint8_t> reencoded;
  events.assign(1, wire::CollisionEvent{});  // stale content must be cleared on every path
  joints.assign(1, wire::JointEventFields{});
  const wire::EventBlockError error = wire::decode_collision_events(block, config, &events, &joints);
  IMPULSE_FUZZ_CHECK(static_cast<uint8_t>(error) < static_cast<uint8_t>(wire::EventBlockError::Count),
                     "unknown EventBlockError");
  if (error != wire::EventBlockError::None) {
    IMPULSE_FUZZ_CHECK(events.empty() && joints.empty(), "a rejected block yielded events");
    return;
  }
  IMPULSE_FUZZ_CHECK(joints.size() == events.size(), "the joint column is not one per event");
  IMPULSE_FUZZ_CHECK(events.size() <= wire::kMaxEventsPerBlock, "too many events");
  const float step = std::ldexp(1.0f, -static_cast<int>(config.position_fraction_bits));
  auto on_grid = [&](const wire::Vec3& p) {
    for (const float c : {p.x(), p.y(), p.z()}) {
      IMPULSE_FUZZ_CHECK(std::isfinite(c) && std::fabs(c) <= config.world_bound_m, "point beyond the world bound");
      IMPULSE_FUZZ_CHECK(std::fmod(c, step) == 0.0f, "point off the position grid");
    }
  };
  for (size_t i = 0; i < events.size(); ++i) {
    const wire::CollisionEvent& e = events[i];
    IMPULSE_FUZZ_CHECK(static_cast<uint8_t>(e.type()) <= static_cast<uint8_t>(wire::ContactEventType::MAX),
                       "unknown event type");
    on_grid(e.point());
    if (e.type() == wire::ContactEventType::JointAdded || e.type() == wire::ContactEventType::JointRemoved) {
      on_grid(e.normal());  // B's anchor (zero for a removal)
      IMPULSE_FUZZ_CHECK(joints[i].detail <= (e.type() == wire::ContactEventType::JointAdded ? wire::kMaxJointKindDetail
                                                                                          : wire::kMaxJointRemovedDetail),
                         "joint detail out of range");
      continue;
    }
    IMPULSE_FUZZ_CHECK(joints[i].joint == 0 && joints[i].detail == 0, "a contact with joint fields");
    const wire::Vec3& n = e.normal();
    const float length = std::sqrt(n.x() * n.x() + n.y() * n.y() + n.z() * n.z());
    IMPULSE_FUZZ_CHECK(std::fabs(length - 1.0f) < 1e-5f, "normal not unit");
  }
  IMPULSE_FUZZ_CHECK(wire::encode_collision_events(events, config, &reencoded, joints), "decoded events do not re-encode");
  IMPULSE_FUZZ_CHECK(wire::decode_collision_events(reencoded, config, &again, &joints_again) == wire::EventBlockError::None,
                     "a re-encoded block does not decode");
  IMPULSE_FUZZ_CHECK(again.size() == events.size(), "re-encoding changed the event count");
  for (size_t i = 0; i < events.size(); ++i) {
    const wire::CollisionEvent& a = events[i];
    const wire::CollisionEvent& b = again[i];
    IMPULSE_FUZZ_CHECK(a.tick() == b.tick() && a.sequence() == b.sequence() && a.type() == b.type() &&
                           a.a() == b.a() && a.b() == b.b(),
                       "re-encoding changed an exact field");
    IMPULSE_FUZZ_CHECK(a.point().x() == b.point().x() && a.point().y() == b.point().y() &&
                           a.point().z() == b.point().z(),
                       "re-encoding moved a point");
    IMPULSE_FUZZ_CHECK(joints[i].joint == joints_again[i].joint && joints[i].detail == joints_again[i].detail,
                       "re-encoding changed a joint field");
    if (a.type() == wire::ContactEventType::JointAdded || a.type() == wire::ContactEventType::JointRemoved) {
      IMPULSE_FUZZ_CHECK(a.normal().x() == b.normal().x() && a.normal().y() == b.normal().y() &&
                             a.normal().z() == b.normal().z(),
                         "re-encoding moved a joint anchor");
      continue;
    }
    IMPULSE_FUZZ_CHECK(angle_between(a.normal(), b.normal()) <= wire::max_normal_error_rad() * 1.01,
                       "re-encoding turned a normal beyond the bound");
  }
}

}  // namespace
}  // namespace impulse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace impulse;
  if (size == 0) return 0;
  const wire::QuantizationConfig config = fuzz::config_of(data[0]);
  const std::span<const uint8_t> block(data + 1, size - 1);
  fuzz::check(block, config);
  if (block.size() >= 4) {  // the same bytes behind a valid checksum
    static std::vector<uint8_t> fixed;
    fixed.assign(block.begin(), block.end());
    const uint32_t sum = XXH32(fixed.data() + 4, fixed.size() - 4, 0);
    for (size_t i = 0; i < 4; ++i) fixed[i] = static_cast<uint8_t>(sum >> (8 * i));
    fuzz::check(fixed, config);
  }
  return 0;
}
