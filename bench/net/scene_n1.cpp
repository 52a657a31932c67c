// Scene N1 (docs/BENCHMARKS.md, "Scenes"), after Glenn Fiedler's "Snapshot Compression" demo (2015).
#include "bench/net/scene_n1.h"

#include <fmt/format.h>

namespace impulse::server {

Scene make_n1_scene() {
  Scene scene;
  scene.name = "n1";
  scene.bodies.reserve(1 + kN1GridSide * kN1GridSide);
  scene.body_names.reserve(1 + kN1GridSide * kN1GridSide);

  physics::BodyDesc ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_plane();  // through the origin, normal +Y
  ground.friction = kN1Friction;
  scene.bodies.push_back(ground);
  scene.body_names.emplace_back("ground");

  physics::BodyDesc cube;
  cube.shape = physics::make_box({kN1CubeHalfExtent, kN1CubeHalfExtent, kN1CubeHalfExtent});
  cube.mass = kN1CubeMass;
  cube.friction = kN1Friction;
  cube.restitution = 0.0f;
  // Centred on the origin: the grid's first and last centres are at -/+ (side - 1) / 2 * pitch.
  const float half_span = 0.5f * static_cast<float>(kN1GridSide - 1) * kN1GridPitch;
  for (int ix = 0; ix < kN1GridSide; ++ix) {
    for (int iz = 0; iz < kN1GridSide; ++iz) {
      cube.position = {static_cast<float>(ix) * kN1GridPitch - half_span, kN1CubeHalfExtent,
                       static_cast<float>(iz) * kN1GridPitch - half_span};
      scene.bodies.push_back(cube);
      scene.body_names.push_back(fmt::format("cube/{}/{}", ix, iz));
    }
  }
  return scene;
}

}  // namespace impulse::server
