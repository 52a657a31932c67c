// Level geometry from model files: the triangles (or, for a hull, the vertices) of a Wavefront
// OBJ file (Debian's tinyobjloader) or a glTF 2.0 file, .gltf or .glb (Debian's tinygltf), for
// scene bodies that name a `file` instead of listing `points` and `triangles`. The file is
// operator input but read as hostile: bounded size, every index and accessor range-checked,
// every coordinate finite and within the world's coordinate bound. Errors name the file and the
// element ("x.gltf: meshes[2].primitives[0]: indices accessor 5 reads past its buffer").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/math.h"

namespace impulse::server {

/// Largest model file read [bytes]: 256 MiB, above a 2M-triangle mesh (the physics limit) in any
/// of the formats' plain encodings, so a hostile file cannot make the server read more.
inline constexpr uint64_t kMaxAssetFileBytes = 256ull << 20;

/// A model file's triangles in the file's model frame [m], welded later by build_triangle_mesh.
struct ModelFile {
  std::vector<Vec3> vertices;
  std::vector<uint32_t> indices;  ///< 3 per triangle, counter-clockwise about the front face
  uint64_t xxh64 = 0;             ///< XXH64 (seed 0) of the file's bytes
};

/// Reads `path` by its extension: .obj (faces triangulated as fans; materials and .mtl files are
/// not read), .gltf (buffers as data URIs or files beside it) or .glb. A glTF file's triangles
/// are those of every TRIANGLES primitive of the nodes of its default scene (or of every scene
/// when none is marked), each placed by its node's transform chain (matrix or translation,
/// rotation, scale), so a model exported with a scaled or turned root comes out as it looks;
/// images are never decoded. Returns an empty string, or the reason, starting with `path`.
std::string load_model_file(const std::string& path, ModelFile* out);

/// load_model_file on bytes already read: `name` picks the format by its extension and names the
/// file in errors; a glTF file's buffer files are looked up in `base_dir`. The fuzzer's entry.
std::string load_model_bytes(const std::string& name, const std::string& bytes, const std::string& base_dir,
                             ModelFile* out);

/// The 16 lowercase hex digits of XXH64 (seed 0), as a scene's `xxh64` field gives them.
std::string xxh64_hex(uint64_t hash);

}  // namespace impulse::server
