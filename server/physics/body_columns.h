// Body storage of the World: packed columns grouped by the stage that reads them (data-oriented
// layout as in Box2D v3's body sim / body state split).
#pragma once

#include <cstdint>
#include <vector>

#include "server/physics/types.h"

namespace impulse::physics {

/// Where a body is, read by the broadphase, the narrowphase and the solver set-up.
struct Pose {
  Vec3 position;     ///< centre of mass, world frame [m]
  Quat orientation;  ///< local to world, unit
  /// World frame [m]: the shape's tight AABB enlarged by WorldSettings::speculative_margin on
  /// every side; refreshed whenever the pose changes.
  Aabb aabb;
};

/// How a body moves, read and written by velocity integration and the solver.
struct Motion {
  Vec3 velocity;          ///< world frame [m/s]; zero for static and sleeping bodies
  Vec3 angular_velocity;  ///< world frame [rad/s]
  Vec3 force;             ///< accumulated force [N] for the next step; cleared every step
  Vec3 torque;            ///< accumulated torque [N·m] for the next step; cleared every step
  /// Inverse principal moments of inertia in the local frame [1/(kg·m^2)]; 0 for static and
  /// kinematic bodies. The world tensor is R diag(inv_inertia) R^T.
  Vec3 inv_inertia;
  float inv_mass = 0;         ///< [1/kg]; 0 for static and kinematic bodies (infinite mass)
  float linear_damping = 0;   ///< [1/s]
  float angular_damping = 0;  ///< [1/s]
};

/// Surface properties, read when contacts are prepared.
struct Material {
  float restitution = 0;  ///< [0, 1]
  float friction = 0;     ///< Coulomb coefficient, >= 0
  uint16_t id = 0;        ///< material id for the material-pair table
};

/// Cold per-body bookkeeping.
struct BodyInfo {
  BodyKind kind = BodyKind::Dynamic;
  bool sleeping = false;       ///< parked in the broadphase, not in the awake list
  bool sensor = false;         ///< events only, no contact response
  bool bullet = false;         ///< continuous collision against dynamic bodies too (BodyDesc::bullet)
  float sleep_timer = 0;       ///< [s] spent below the sleep thresholds
  float mass = 0;              ///< [kg] as created; 0 for static and kinematic bodies
  float extent = 0;            ///< largest distance from the centre to the surface [m] (sleep test)
  uint32_t awake_index = 0;    ///< position in World's awake list; meaningless when not awake
  uint32_t contact_count = 0;  ///< contacts (active + resting) the body is part of
  uint32_t island = 0;         ///< sleeping island index while asleep (dynamic bodies only)
  Filter filter;               ///< collision filter (should_collide in types.h)
  uint64_t held_until = 0;     ///< while sleeping and tick < this, no contact wakes it (put_to_sleep)
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
