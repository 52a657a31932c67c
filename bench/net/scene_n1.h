// Scene N1 (docs/BENCHMARKS.md, "Scenes"): Impulse's version of Glenn Fiedler's "Snapshot Compression" demo
// (gafferongames.com, 2015), 900 small cubes on a plane that a client-owned player cube ploughs
// through; the network bandwidth benchmark (impulse-bench --scene N1).
#pragma once

#include "server/app/scene.h"
#include "shared/math.h"

namespace impulse::server {

/// Cubes per side of the N1 grid (30 x 30 = 900 cubes).
inline constexpr int kN1GridSide = 30;
/// Distance between neighbouring cube centres [m].
inline constexpr float kN1GridPitch = 1.0f;
/// Half-extent of each grid cube [m].
inline constexpr float kN1CubeHalfExtent = 0.25f;
/// Mass [kg] and friction of the grid cubes (and friction of the ground plane).
inline constexpr float kN1CubeMass = 1.0f;
inline constexpr float kN1Friction = 0.6f;
/// The player cube, created by the benchmark's client (not part of the scene): half-extent [m],
/// mass [kg] and start position (world frame [m]).
inline constexpr float kN1PlayerHalfExtent = 1.0f;
inline constexpr float kN1PlayerMass = 50.0f;
inline constexpr Vec3 kN1PlayerStart{-12.0f, 1.0f, 0.0f};

/// The N1 scene without its player: a static plane y = 0 (normal +Y, friction 0.6, named
/// "ground") and 900 dynamic cubes (half-extent 0.25 m, 1 kg, friction 0.6, restitution 0,
/// unrotated) at x = (ix - 14.5) m, z = (iz - 14.5) m for ix, iz in [0, 30), y = 0.25 m, i.e.
/// resting on the plane, named "cube/<ix>/<iz>", created ix-major. Deterministic.
Scene make_n1_scene();

}  // namespace impulse::server
