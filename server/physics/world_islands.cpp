// World's stage 7: islands and sleep. Union-find over the awake dynamic bodies joined by solved
// manifolds gives the islands (as in Box2D, https://github.com/erincatto/box2d); an island whose
// every body rested for sleep_time_s falls asleep whole.
#include <algorithm>

#include "server/physics/world.h"
#include "server/physics/world_internal.h"

namespace impulse::physics {

using detail::StageTimer;
using detail::union_find_join;
using detail::union_find_reset;
using detail::union_find_root;

void World::update_islands(float dt) {
  StageTimer timer;
  const uint32_t n = awake_count();
  const float slow_sq = settings_.sleep_speed * settings_.sleep_speed;

  // Sleep timers. A dynamic body rests while slow (linear speed, and the surface speed of its
  // spin); a kinematic body only while stopped.
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t d = slots_.dense_of_slot(awake_[i]);
    BodyInfo& info = bodies_.info[d];
    const Motion& m = bodies_.motion[d];
    bool slow;
    if (info.kind == BodyKind::Kinematic) {
      slow = m.velocity == Vec3{} && m.angular_velocity == Vec3{};
    } else {
      const float spin = length_squared(m.angular_velocity) * info.extent * info.extent;
      slow = length_squared(m.velocity) < slow_sq && spin < slow_sq;
    }
    info.sleep_timer = slow ? info.sleep_timer + dt : 0.0f;
  }

  // Islands: union-find over awake indices, joined by solved manifolds between two dynamic bodies
  // (static, sleeping and kinematic partners map to the immovable index n and join nothing).
  std::vector<uint32_t>& parent = scratch_.island_parent;
  union_find_reset(parent, n);
  auto find = [&](uint32_t x) { return union_find_root(parent, x); };
  const std::vector<SolverBody>& sb = scratch_.solver_bodies;
  auto is_kinematic = [&](uint32_t i) { return i < n && !scratch_.forces[i].dynamic; };
  auto is_moving = [&](uint32_t i) { return sb[i].velocity != Vec3{} || sb[i].angular_velocity != Vec3{}; };
  for (const SolverEdge& e : scratch_.solver_edges) {
    const bool a_kinematic = is_kinematic(e.a);
    const bool b_kinematic = is_kinematic(e.b);
    // A body pushed or carried by a moving kinematic body is not resting, whatever its speed.
    if (a_kinematic && e.b < n && is_moving(e.a)) {
      bodies_.info[slots_.dense_of_slot(awake_[e.b])].sleep_timer = 0;
    }
    if (b_kinematic && e.a < n && is_moving(e.b)) {
      bodies_.info[slots_.dense_of_slot(awake_[e.a])].sleep_timer = 0;
    }
    // Nor is a body still being pushed out of an overlap: split impulses move it without giving
    // it velocity (solver.h), so its speed alone would let it fall asleep mid-recovery.
    if (contacts_[e.record].recovering) {
      if (e.a < n && !a_kinematic) bodies_.info[slots_.dense_of_slot(awake_[e.a])].sleep_timer = 0;
      if (e.b < n && !b_kinematic) bodies_.info[slots_.dense_of_slot(awake_[e.b])].sleep_timer = 0;
    }
    if (e.a >= n || e.b >= n || a_kinematic || b_kinematic) continue;
    union_find_join(parent, e.a, e.b);
  }
  // Jointed dynamic bodies are one island: they sleep together (and wake together, as members).
  for (const SolverEdge& e : scratch_.joint_edges) {
    if (e.a >= n || e.b >= n || is_kinematic(e.a) || is_kinematic(e.b)) continue;
    union_find_join(parent, e.a, e.b);
  }

  // Minimum sleep timer per island root.
  std::vector<float>& min_timer = scratch_.island_min_timer;
  min_timer.assign(n, INFINITY);
  uint32_t islands = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t root = find(i);
    if (root == i) ++islands;
    const uint32_t d = slots_.dense_of_slot(awake_[i]);
    min_timer[root] = std::min(min_timer[root], bodies_.info[d].sleep_timer);
  }
  profile_.island_count = islands;

  uint32_t slept = 0;
  if (settings_.allow_sleep) {
    // Group the sleepy islands' members (awake indices, ascending within an island), then park.
    std::vector<uint32_t>& order = scratch_.island_order;
    order.clear();
    for (uint32_t i = 0; i < n; ++i) {
      if (min_timer[find(i)] >= settings_.sleep_time_s) order.push_back(i);
    }
    if (!order.empty()) {
      std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return find(x) < find(y); });
      // Parking swap-removes from awake_, so resolve every dense index and root first.
      std::vector<uint32_t>& dense = scratch_.island_members;
      dense.clear();
      for (uint32_t& i : order) {
        dense.push_back(slots_.dense_of_slot(awake_[i]));
        i = find(i);
      }
      size_t begin = 0;
      while (begin < order.size()) {
        size_t end = begin + 1;
        while (end < order.size() && order[end] == order[begin]) ++end;
        sleep_island(std::span<const uint32_t>(dense.data() + begin, end - begin));
        slept += static_cast<uint32_t>(end - begin);
        begin = end;
      }
    }
  }
  profile_.slept_count = slept;

  if (slept > 0) freeze_parked_contacts();
  profile_.islands_ms = timer.lap();
}

void World::sleep_island(std::span<const uint32_t> dense_members) {
  if (dense_members.size() == 1 && bodies_.info[dense_members[0]].kind == BodyKind::Kinematic) {
    // A kinematic body never joins an island: it sleeps (and wakes) alone.
    const uint32_t d = dense_members[0];
    bodies_.info[d].sleeping = true;
    bodies_.motion[d].force = Vec3{};
    bodies_.motion[d].torque = Vec3{};
    remove_awake(d);
    broadphase_.add_parked(slots_.slot_at(d), bodies_.pose[d].aabb);
    return;
  }
  uint32_t island;
  if (!free_islands_.empty()) {
    island = free_islands_.back();
    free_islands_.pop_back();
  } else {
    island = static_cast<uint32_t>(sleeping_islands_.size());
    sleeping_islands_.emplace_back();
  }
  std::vector<uint32_t>& list = sleeping_islands_[island];
  list.clear();
  for (const uint32_t d : dense_members) {
    BodyInfo& info = bodies_.info[d];
    Motion& m = bodies_.motion[d];
    m.velocity = Vec3{};
    m.angular_velocity = Vec3{};
    m.force = Vec3{};
    m.torque = Vec3{};
    info.sleeping = true;
    info.island = island;
    remove_awake(d);
    const uint32_t slot = slots_.slot_at(d);
    broadphase_.add_parked(slot, bodies_.pose[d].aabb);
    list.push_back(slot);
  }
}

void World::freeze_parked_contacts() {
  // Freeze the contacts that now join two parked bodies: nobody will recompute them, and left in
  // the list the next step would end them (the broadphase never pairs two parked bodies) and
  // wake both.
  std::vector<ContactRecord>& frozen = scratch_.reactivated;
  frozen.clear();
  size_t keep = 0;
  for (size_t i = 0; i < contacts_.size(); ++i) {
    const Contact& c = contacts_[i].contact;
    if (is_parked(slots_.find(c.a)) && is_parked(slots_.find(c.b))) {
      frozen.push_back(contacts_[i]);
    } else {
      contacts_[keep++] = contacts_[i];
    }
  }
  contacts_.resize(keep);
  if (!frozen.empty()) {
    merge_records(resting_, frozen, scratch_.merged);
    resting_.swap(scratch_.merged);
  }
  freeze_pending_ = false;
}

}  // namespace impulse::physics
