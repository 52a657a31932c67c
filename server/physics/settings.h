// Every tolerance of the step, with its reason. One place to read and tune them.
#pragma once

#include <cstdint>

#include "shared/math.h"

namespace impulse::physics {

/// How two bodies' coefficients combine into one contact's (WorldSettings::friction_mix,
/// restitution_mix). A material-pair entry (World::set_material_pair) overrides both.
enum class MixRule : uint8_t {
  GeometricMean = 0,  ///< sqrt(a * b): 0 on either side gives 0 (Box2D's friction default)
  Max = 1,            ///< max(a, b): the bouncier surface wins (Box2D's restitution default)
  Min = 2,            ///< min(a, b)
  Average = 3,        ///< (a + b) / 2 (PhysX's default)
  Multiply = 4,       ///< a * b
};

/// Smallest accepted sphere or capsule radius and box half extent [m]. Not a setting (it is not
/// saved with the world): 1 mm is a fifth of linear_slop (5 mm), the length below which contact
/// bookkeeping cannot tell two points apart, so a smaller shape has no meaningful contacts; and
/// float32 inertia (m r^2) of a smaller, light body falls towards the subnormal range, where
/// 1 / inertia is infinite (a 5e-20 m sphere gave an infinite inverse inertia and a NaN angular
/// velocity from its first step). Inverse mass and inertia are checked finite as well.
inline constexpr float kMinExtent = 1.0e-3f;

/// Density range [kg/m^3] of a dynamic body (mass over the solid shape's volume). Not a setting:
/// the same rule holds at every entry point (create_object, restore_state, scene files, the wire),
/// so a saved world or recording means the same everywhere.
/// - The floor, 1e-3 kg/m^3, is a thousandth of air's density: no real solid, but games give
///   props nominal masses (1 kg for a 10 m crate is 1e-3 kg/m^3), so the floor sits there. What
///   it buys is a bound on the largest inverse mass and inverse inertia the solver meets: with
///   kMinExtent the lightest accepted sphere weighs 4.2e-12 kg (inverse inertia 6e17). Before it,
///   a hostile client's 1e-25 kg capsule (1 mm radius), spun by the largest torque the wire
///   allowed, went non-finite in its first step and took its neighbours with it.
/// - The ceiling, 1e5 kg/m^3, is four times osmium (22,590 kg/m^3, the densest element).
inline constexpr float kMinDensity = 1.0e-3f;
inline constexpr float kMaxDensity = 1.0e5f;

/// A push (force, torque) may change its body's velocity at most this many times the speed caps
/// per second: from rest to WorldSettings::max_speed (or max_angular_speed) within one 60 Hz tick,
/// no faster. So a push is bounded by what it does to this body, not by a constant: 1e9 N·m is
/// nothing to a 1e6 kg box and everything to a 1 mm capsule. Not a setting (as kMinDensity).
inline constexpr float kMaxPushRate = 60.0f;  // [1/s]

/// Range of WorldSettings::cell_size [m] and most WorldSettings::max_cells_per_body. Not
/// settings: they bound what a setting may cost. Each moving body is binned into up to
/// max_cells_per_body cells every step, so a saved world (a hostile recording) with a huge value
/// made one step allocate hundreds of megabytes (found by fuzz_convex_hull); 4096 is a 16^3 block.
/// A cell under 1 cm or over 1 km is no longer a spatial hash for bodies of 1 mm to 1 km.
inline constexpr float kMinCellSize = 0.01f;
inline constexpr float kMaxCellSize = 1000.0f;
inline constexpr uint32_t kMaxCellsPerBody = 4096;

struct WorldSettings {
  /// Gravity acceleration, world frame [m/s^2].
  Vec3 gravity{0.0f, -9.81f, 0.0f};

  /// Spatial-hash cell edge [m], in [kMinCellSize, kMaxCellSize]. About twice the typical body
  /// size: a body then covers 1-8 cells.
  float cell_size = 2.0f;
  /// A body whose AABB covers more cells than this is kept in the broadphase's "large" list and
  /// tested against moving bodies directly, so a 100 m ground box never fills thousands of cells.
  uint32_t max_cells_per_body = 64;  ///< in [1, kMaxCellsPerBody]
  /// Contacts are kept while the surfaces are at most this far apart [m] (speculative contacts):
  /// the solver then stops an approaching body exactly at the surface instead of one step late,
  /// and a resting contact never flickers out. AABBs are enlarged by it. 2 cm = 4 x linear_slop,
  /// the ratio Box2D v3 uses for its speculative distance. Per pair and step the margin grows by
  /// how far the pair can close within the step (capped at half the dynamic bodies' inner
  /// extents; World::collide_pair), and a point beyond this base margin is kept only if it closes
  /// within the step; sensors use the base margin alone.
  float speculative_margin = 0.02f;

  /// Substeps per step of the soft-step solver (Catto, "Solver2D", 2024; Box2D v3): each substep
  /// integrates velocities, solves the contacts with a soft bias, integrates positions and relaxes.
  /// Contacts are found once per step. More substeps make stiffer, more accurate stacks.
  int substeps = 4;
  /// Bias-free velocity sweeps per substep (relax iterations). Box2D v3 uses 1; in 3D one sweep
  /// leaves resting bodies with residual velocities of a few cm/s, enough to keep a settled pile
  /// of 1000 boxes from ever sleeping (267 awake after 10 s); with 2 it is asleep by then.
  int relax_iterations = 2;
  /// Contact stiffness [Hz] of the soft constraint; capped at a quarter of the substep rate so the
  /// implicit spring stays stable (60 Hz at a 60 Hz tick with 4 substeps). A soft contact carrying
  /// a load settles at a penetration of (load / effective mass) / (2 pi hertz)^2, which adds up
  /// down a stack: at Box2D v3's 30 Hz a stack of ten 1 m boxes sags 2.5 cm, at 60 Hz 7 mm.
  float contact_hertz = 60.0f;
  /// Damping ratio of the soft contact (> 1: overdamped, the position correction never bounces).
  /// Measured trade-off at 60 Hz (docs/BENCHMARKS.md): at 1, a pile of 4000 boxes still has 2900
  /// bodies jostling after 20 s; at Box2D v3's 10, a stack of four hit by a falling box keeps
  /// swaying and never sleeps again; 5 settles both.
  float contact_damping_ratio = 5.0f;
  /// Largest speed [m/s] at which penetration is pushed out, so a deep overlap (a body spawned
  /// inside another) separates calmly instead of exploding. Box2D v3 default 3 m/s.
  float contact_push_max_speed = 3.0f;
  /// Length tolerance [m] of contact bookkeeping: a manifold point within 4 x linear_slop of last
  /// step's point is the same point (its impulses warm-start it). The soft contact corrects every
  /// overlap and needs no slop: its resting overlap comes from its stiffness (contact_hertz).
  float linear_slop = 0.005f;
  /// Approach speed [m/s] below which restitution is ignored: without it a resting body bounces
  /// off the ground by g*dt every step and never sleeps. 1 m/s is Box2D's default.
  float restitution_threshold = 1.0f;
  /// Mixing rules of per-body coefficients (see MixRule).
  MixRule friction_mix = MixRule::GeometricMean;
  MixRule restitution_mix = MixRule::Max;

  /// An island sleeps when every body in it has stayed below these speeds for sleep_time_s.
  /// Linear [m/s]; the angular test uses |w| times the body's largest extent, so a spinning body
  /// is judged by the speed of its surface (Box2D v3's sleep threshold).
  float sleep_speed = 0.05f;
  /// [s] below sleep_speed before an island sleeps.
  float sleep_time_s = 0.5f;
  /// When false nothing ever sleeps (benchmarks with sleep off).
  bool allow_sleep = true;

  /// Largest accepted |position component| [m]; larger values are rejected as InvalidArgument.
  float max_coordinate = 100000.0f;
  /// Largest speed |v| [m/s] a body keeps: commands and bodies beyond it are refused, and the
  /// step clamps every body's velocity to it. 500 m/s is Jolt's default (PhysicsSettings'
  /// mMaxLinearVelocity): faster than any thrown, driven or flown game object (a shot that fast
  /// is a raycast), and it bounds how far anything moves in a step (8.3 m at 60 Hz), so a client
  /// cannot fling a body through half the world in one tick.
  float max_speed = 500.0f;
  /// Largest angular speed |w| [rad/s] a body keeps (clamped in the step; commands beyond it are
  /// refused). 0.25 pi x 60 = 47.1 rad/s, Jolt's default (mMaxAngularVelocity): a quarter turn per
  /// 60 Hz tick, beyond which a body's rotation within one step outruns its contact prediction.
  float max_angular_speed = 47.12389f;
  /// Largest accepted sphere radius, box half extent or capsule half height [m] (the smallest
  /// radius and half extent is kMinExtent).
  float max_extent = 1000.0f;
  /// Largest accepted mass [kg].
  float max_mass = 1.0e6f;
  /// Live objects at most; create_object returns WorldFull beyond it.
  uint32_t max_objects = 1u << 20;
};

}  // namespace impulse::physics
