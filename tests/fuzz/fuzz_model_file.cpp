// libFuzzer target: load_model_bytes, the scene's OBJ and glTF model-file reader (tinyobjloader
// and tinygltf, then this project's checks). The first input byte picks the format (.obj, .gltf
// or .glb), the rest is the file. Buffer files a glTF names are looked up in a directory that does
// not exist, so the fuzzer reads nothing from disk.
//
// Invariants (abort = crash report): an accepted file gives at least one triangle, a multiple of
// 3 indices each naming a vertex, and finite vertices within the world's coordinate bound.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/app/asset_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* const kNames[] = {"fuzz.obj", "fuzz.gltf", "fuzz.glb"};
  const std::string name = kNames[data[0] % 3];
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  impulse::server::ModelFile model;
  const std::string problem = impulse::server::load_model_bytes(name, bytes, "/nonexistent-impulse-fuzz", &model);
  if (!problem.empty()) return 0;
  if (model.indices.empty() || model.indices.size() % 3 != 0) std::abort();
  for (const uint32_t i : model.indices) {
    if (i >= model.vertices.size()) std::abort();
  }
  for (const impulse::Vec3& v : model.vertices) {
    if (!impulse::is_finite(v) || std::fabs(v.x) > 1e5f || std::fabs(v.y) > 1e5f || std::fabs(v.z) > 1e5f) std::abort();
  }
  return 0;
}
