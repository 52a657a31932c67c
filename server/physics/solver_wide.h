// The wide contact sweeps of solve_soft_step: a graph colouring of the manifolds (no two
// manifolds of one colour share a movable body), then each colour's manifolds solved
// kSolverLanes at a time, one per SIMD lane, from structure-of-arrays rows, as Box2D v3 does in 2D
// (Catto, "Solver2D", 2024, and "SIMD Matters", box2d.org, 2024).
//
// The colouring is by levels (the wavefront schedule of a sequential loop): a manifold's colour
// is one above that of the last manifold before it with a common movable body. So every body
// meets its manifolds in contact order, and manifolds with no common body commute: the coloured
// sweep is Gauss-Seidel in contact order, exactly, and the step's results are those of the
// scalar solver it replaced (the pinned hashes did not change). Box2D's greedy lowest-free-colour
// scheme packs fewer colours but reorders each body's rows, which here let the S1 pyramid's top
// box drift 4.1 cm instead of 1.0 cm in 600 steps. Chains longer than kSolverColors spill into
// the overflow, solved one manifold at a time after the colours.
//
// Each lane performs exactly the float operations of the scalar sweep (solver.cpp) for its
// manifold, in the same order, with masks where the scalar code skips (a missing point, no
// friction), so the wide sweeps equal the scalar ones bit for bit
// (Solver.WideSweepsMatchTheScalarSweepsBitForBit). A manifold's colour depends only on the
// manifolds of its contact-connected group, so batching groups over threads changes nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "server/physics/restitution.h"
#include "server/physics/solver.h"

namespace impulse::physics {

/// Manifolds per SIMD lane group: 4 floats fill one 128-bit register, available on every x86-64
/// (SSE2) and AArch64 (NEON) machine without build flags that would change the binary per host.
inline constexpr int kSolverLanes = 4;
/// Colours (levels) of the colouring. A manifold whose level would be higher is solved one at a
/// time after the colours, as is every later manifold of its bodies. The levels only schedule
/// the same Gauss-Seidel order, so the count changes speed, never results. S1 (a 20-box-base
/// pyramid, 590 manifolds) has chains deeper than 32 levels: at 32 colours its step took 1.31 ms
/// (1.27x Bullet), at 128 0.99 ms (0.96x); 254 gave no more, and S2/S3 did not change.
/// At most 254 (color_of is a byte, kSolverColors itself meaning none).
inline constexpr int kSolverColors = 128;

using WideFloat = float __attribute__((vector_size(16)));
using WideMask = int32_t __attribute__((vector_size(16)));  // all ones (true) or zero per lane

struct WideVec3 {
  WideFloat x, y, z;
};

/// Point i of kSolverLanes manifolds: SolverPoint's fields, one lane per manifold.
struct WidePoint {
  WideVec3 rn_a, rn_b, in_a, in_b;
  WideVec3 rt_a[2], rt_b[2], it_a[2], it_b[2];
  WideFloat base_separation, normal_mass, tangent_mass[2];
  WideFloat normal_impulse, tangent_impulse[2], max_normal_impulse;
  WideFloat pseudo_impulse;  // split impulse push-out, warm-started (solver.h)
  WideMask active;  // the lane's manifold has this point
};

/// kSolverLanes manifolds of one colour. Unused lanes address the immovable body and are
/// inactive; their results are never stored.
struct WideChunk {
  uint32_t body_a[kSolverLanes] = {};
  uint32_t body_b[kSolverLanes] = {};
  uint32_t manifold[kSolverLanes] = {};  // index in the manifold span
  int lanes = 0;                         // used lanes, from the first
  int points = 0;                        // most points of any lane
  // Per point: every lane has it (and friction), so the sweeps skip the masks (the common case).
  bool full[kMaxManifoldPoints] = {};
  bool full_friction[kMaxManifoldPoints] = {};
  WideVec3 normal, tangent[2];
  WideFloat friction;
  WideMask has_friction;                 // friction > 0: the scalar sweep skips the friction rows otherwise
  WideFloat bias_rate, mass_scale, impulse_scale;  // the lane's Softness (static or not)
  WideMask recovering;                   // SolverManifold::recovering: split-impulse push-out
  bool any_recovering = false;           // some lane is: only such chunks touch pseudo velocities
  uint32_t first_point = 0;  // its `points` WidePoints start here in SolverScratch::points
};

/// Reused memory of the wide sweeps, so a step allocates nothing in steady state.
struct SolverScratch {
  std::vector<SolverPoint> manifold_points;  // every manifold's points, in manifold order (prepare_manifolds)
  ImpactScratch impact;                      // propagate_restitution's
  std::vector<WideChunk> chunks;       // colour by colour, contact order within a colour
  std::vector<WidePoint> points;       // each chunk's points, as many as its largest manifold has
  std::vector<uint32_t> overflow;      // manifolds of no colour, contact order (scalar sweeps)
  std::vector<uint32_t> body_colors;   // per movable body: 1 + the colour of its last manifold (0: none)
  std::vector<uint8_t> in_contact;     // per movable body: 1 if some manifold may act this step
                                       // (else free flight; mark_in_contact, solver.cpp)
  std::vector<uint8_t> color_of;       // per manifold; kSolverColors = none
  std::vector<uint32_t> color_begin;   // [kSolverColors + 2]: counting sort by colour
  std::vector<uint32_t> order;         // manifolds sorted by colour
  bool any_recovering = false;         // some manifold is recovering: the biased sweeps split
};

/// Colours the manifolds (levels, in span order) and packs them into `scratch.chunks` and
/// `scratch.overflow`. `movable`: the index of the immovable body (the movable ones come first).
/// wide = false: every manifold goes to the overflow list, in colour order (the scalar reference
/// the wide sweeps are tested against).
void build_wide_contacts(std::span<const SolverManifold> manifolds, uint32_t movable, const Softness& soft,
                         const Softness& static_soft, bool wide, SolverScratch& scratch);

/// Warm start of every chunk: the accumulated impulses applied to the bodies.
void warm_start_wide(SolverScratch& scratch, std::span<SolverBody> bodies, uint32_t movable);

/// One sweep over every chunk: normal rows (with the split-impulse push-out on the pseudo
/// velocities if use_bias), then the friction rows, as solver.cpp's scalar sweep does per manifold.
void solve_wide(SolverScratch& scratch, std::span<SolverBody> bodies, uint32_t movable, float inv_h,
                float push_max_speed, bool use_bias);

/// Warm start of the split impulses before each biased sweep of a step with a recovering contact:
/// each point's pseudo impulse of the last biased sweep (the last step's, from its contact record,
/// for the first substep) applied to the bodies' pseudo velocities, which are zero before. A
/// push-out against a lasting pressure then builds up over substeps and steps as the real impulses
/// do; without it one Gauss-Seidel sweep per substep never balanced an over-packed crowd, which
/// pushed 19 of 625 spheres through the 1 m walls of Box2D's Confined layout.
void warm_start_pseudo(SolverScratch& scratch, std::span<SolverBody> bodies, uint32_t movable,
                       std::span<SolverManifold> manifolds);

/// Copies the chunks' accumulated impulses back into their manifolds (for restitution and the
/// contact records).
void store_wide_impulses(const SolverScratch& scratch, std::span<SolverManifold> manifolds);

}  // namespace impulse::physics
