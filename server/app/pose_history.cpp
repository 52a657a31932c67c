#include "server/app/pose_history.h"

#include <cmath>

namespace impulse::server {

PoseHistory::PoseHistory(uint32_t ticks) : ring_(ticks) {}

void PoseHistory::record(const physics::World& world) {
  if (ring_.empty()) return;
  Tick& t = ring_[world.tick() % ring_.size()];
  t.tick = world.tick();
  world.movable_poses(t.poses);
  newest_ = world.tick();
}

void PoseHistory::clear() {
  for (Tick& t : ring_) t.tick = 0;
  newest_ = 0;
}

uint64_t PoseHistory::oldest_tick() const {
  uint64_t oldest = 0;
  for (const Tick& t : ring_) {
    if (t.tick != 0 && t.tick + ring_.size() > newest_ && (oldest == 0 || t.tick < oldest)) oldest = t.tick;
  }
  return oldest;
}

const PoseHistory::Tick* PoseHistory::find(uint64_t tick) const {
  if (ring_.empty() || tick == 0) return nullptr;
  const Tick& t = ring_[tick % ring_.size()];
  return t.tick == tick ? &t : nullptr;
}

size_t PoseHistory::memory_bytes() const {
  size_t bytes = 0;
  for (const Tick& t : ring_) bytes += t.poses.capacity() * sizeof(physics::IndexedPose);
  return bytes;
}

PoseHistory::Lookup PoseHistory::poses_at(uint64_t tick, float fraction, std::vector<physics::IndexedPose>* out) const {
  if (ring_.empty()) return Lookup::Off;
  if (tick > newest_) return Lookup::Future;
  const Tick* at = find(tick);
  if (at == nullptr) return Lookup::TooOld;
  *out = at->poses;
  const Tick* next = fraction > 0.0f ? find(tick + 1) : nullptr;
  if (next == nullptr) return Lookup::Ok;
  const size_t n = std::min(out->size(), next->poses.size());
  for (size_t i = 0; i < n; ++i) {
    physics::IndexedPose& p = (*out)[i];
    const physics::IndexedPose& q = next->poses[i];
    if (p.generation == 0 || q.generation != p.generation) continue;
    p.position = p.position + (q.position - p.position) * fraction;
    // Normalised lerp on the short arc: within one tick the turn is small, where nlerp and slerp agree.
    const float sign = dot(p.orientation, q.orientation) < 0.0f ? -1.0f : 1.0f;
    const Quat blended{p.orientation.x + (sign * q.orientation.x - p.orientation.x) * fraction,
                       p.orientation.y + (sign * q.orientation.y - p.orientation.y) * fraction,
                       p.orientation.z + (sign * q.orientation.z - p.orientation.z) * fraction,
                       p.orientation.w + (sign * q.orientation.w - p.orientation.w) * fraction};
    p.orientation = normalize(blended);
  }
  return Lookup::Ok;
}

}  // namespace impulse::server
