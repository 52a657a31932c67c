// Every tolerance of the step, with its reason. One place to read and tune them.
#pragma once

#include <cstdint>

#include "shared/math.h"

namespace impulse::physics {

struct WorldSettings {
  /// Gravity acceleration, world frame [m/s^2].
  Vec3 gravity{0.0f, -9.81f, 0.0f};

  /// Spatial-hash cell edge [m]. About twice the typical body size: a body then covers 1-8 cells.
  float cell_size = 2.0f;
  /// A body whose AABB covers more cells than this is kept in the broadphase's "large" list and
  /// tested against moving bodies directly, so a 100 m ground box never fills thousands of cells.
  uint32_t max_cells_per_body = 64;

  /// Velocity iterations over the contacts per step, each solving friction then the normal impulse
  /// of every contact. More iterations settle stacks better.
  int solver_iterations = 8;
  /// Baumgarte positional correction (seed 004): the fraction of penetration beyond the slop
  /// removed per step. 20 % corrects within a few steps without visible popping.
  float baumgarte = 0.2f;
  /// Penetration [m] allowed without correction, so resting contacts do not flicker in and out.
  float slop = 0.01f;
  /// Approach speed [m/s] below which restitution is ignored: without it a resting body bounces
  /// off the ground by g*dt every step and never sleeps. Contact is detected up to one step late,
  /// which adds up to |g|*dt to each impact, so a bounce sustains itself unless the threshold is at
  /// least |g|*dt / (1 - e): 0.82 m/s for e = 0.8 at 60 Hz. 1 m/s (Box2D's default) covers e <= 0.83.
  float restitution_threshold = 1.0f;

  /// A body whose speed stays below this [m/s] for sleep_time_s falls asleep (seed 000).
  float sleep_speed = 0.05f;
  /// [s] below sleep_speed before sleeping.
  float sleep_time_s = 0.5f;

  /// Largest accepted |position component| [m]; larger values are rejected as InvalidArgument.
  float max_coordinate = 100000.0f;
  /// Largest accepted |velocity component| [m/s].
  float max_speed = 10000.0f;
  /// Largest accepted sphere radius or box half extent [m].
  float max_extent = 1000.0f;
  /// Largest accepted mass [kg].
  float max_mass = 1.0e6f;
  /// Live objects at most; create_object returns WorldFull beyond it.
  uint32_t max_objects = 1u << 20;
};

}  // namespace impulse::physics
