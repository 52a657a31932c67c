// Body storage of the World: packed columns grouped by the stage that reads them (data-oriented
// layout as in Box2D v3's body sim / body state split).
#pragma once

#include <cstdint>
#include <vector>

#include "server/physics/types.h"

namespace impulse::physics {

/// Where a body is, read by the broadphase, the narrowphase and position integration. 36 bytes.
struct Pose {
  Vec3 position;  ///< centre, world frame [m]
  Aabb aabb;      ///< world frame [m]; refreshed whenever position changes
};

/// How a body moves, read and written by velocity integration and the solver. 32 bytes.
struct Motion {
  Vec3 velocity;             ///< world frame [m/s]; zero for static and sleeping bodies
  Vec3 force;                ///< accumulated force [N] for the next step; cleared every step
  float inv_mass = 0;        ///< [1/kg]; 0 for static and kinematic bodies (infinite mass)
  float linear_damping = 0;  ///< [1/s]
};

/// Surface properties, read when contacts are prepared.
struct Material {
  float restitution = 0;  ///< [0, 1]
  float friction = 0;     ///< Coulomb coefficient, >= 0; mixed as sqrt(mu_a * mu_b)
};

/// Cold per-body bookkeeping.
struct BodyInfo {
  BodyKind kind = BodyKind::Dynamic;
  bool sleeping = false;       ///< parked in the broadphase, not in the awake list
  float sleep_timer = 0;       ///< [s] spent below WorldSettings::sleep_speed
  float mass = 0;              ///< [kg] as created; 0 for static and kinematic bodies
  uint32_t awake_index = 0;    ///< position in World's awake list; meaningless when not awake
  uint32_t contact_count = 0;  ///< contacts (active + resting) the body is part of
  /// While asleep: the contact impulse [N·s, world frame] absorbed as an immovable body, minus
  /// the part pressing it along gravity onto its supports. Wakes the body once |push| / mass
  /// exceeds sleep_speed. Zero while awake.
  Vec3 push;
};

/// The columns, all indexed by the dense index of SlotMap; every column has size() elements.
struct BodyColumns {
  std::vector<Pose> pose;
  std::vector<Motion> motion;
  std::vector<Shape> shape;
  std::vector<Material> material;
  std::vector<BodyInfo> info;

  uint32_t size() const { return static_cast<uint32_t>(pose.size()); }

  void push_back(const Pose& p, const Motion& m, const Shape& s, const Material& mat, const BodyInfo& i) {
    pose.push_back(p);
    motion.push_back(m);
    shape.push_back(s);
    material.push_back(mat);
    info.push_back(i);
  }

  /// Mirrors SlotMap::destroy: element `last` moves into `hole`, then every column shrinks by one.
  void swap_remove(uint32_t hole, uint32_t last) {
    if (hole != last) {
      pose[hole] = pose[last];
      motion[hole] = motion[last];
      shape[hole] = shape[last];
      material[hole] = material[last];
      info[hole] = info[last];
    }
    pose.pop_back();
    motion.pop_back();
    shape.pop_back();
    material.pop_back();
    info.pop_back();
  }
};

}  // namespace impulse::physics
