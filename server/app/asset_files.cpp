// Model files for scene geometry: OBJ through tinyobjloader, glTF 2.0 through tinygltf (both
// Debian packages). Everything they hand back is checked again here: counts, indices, accessor
// ranges inside their buffers, and finite coordinates.
#include "server/app/asset_files.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>

#include <fmt/format.h>
#include <xxhash.h>

#include <tiny_gltf.h>
#include <tiny_obj_loader.h>

#include "server/physics/triangle_mesh.h"
#include "shared/wire/codec.h"

namespace impulse::server {

namespace {

/// Largest |coordinate| of a model vertex [m]: the world's coordinate bound.
constexpr double kMaxModelCoordinate = wire::kMaxCoordinate;
/// Most triangles a model file may give: the physics mesh limit.
constexpr size_t kMaxModelTriangles = physics::kMaxMeshTriangles;
/// Most vertices a model file may give, before welding: three per triangle.
constexpr size_t kMaxModelVertices = 3 * kMaxModelTriangles;

std::string lower_extension(const std::string& path) {
  const size_t dot = path.find_last_of('.');
  const size_t slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return {};
  std::string ext = path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

std::string read_bounded(const std::string& path, std::string* bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return fmt::format("{}: cannot open the model file (the path is relative to the scene file)", path);
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxAssetFileBytes) {
    return fmt::format("{}: not a readable regular file of at most {} bytes", path, kMaxAssetFileBytes);
  }
  file.seekg(0, std::ios::beg);
  bytes->assign(static_cast<size_t>(size), '\0');
  if (size > 0 && !file.read(bytes->data(), size)) return fmt::format("{}: read error", path);
  return {};
}

bool coordinate_ok(double v) { return std::isfinite(v) && std::fabs(v) <= kMaxModelCoordinate; }

std::string load_obj(const std::string& path, const std::string& text, ModelFile* out) {
  tinyobj::ObjReaderConfig config;
  config.triangulate = true;
  config.vertex_color = false;
  tinyobj::ObjReader reader;
  // From the bytes already read, with no material text: `mtllib` lines name files that are not
  // opened (materials do not reach the physics).
  if (!reader.ParseFromString(text, std::string(), config)) {
    return fmt::format("{}: not a Wavefront OBJ file: {}", path, reader.Error());
  }
  const std::vector<tinyobj::real_t>& v = reader.GetAttrib().vertices;
  const size_t vertex_count = v.size() / 3;
  if (vertex_count > kMaxModelVertices) {
    return fmt::format("{}: {} vertices, at most {}", path, vertex_count, kMaxModelVertices);
  }
  out->vertices.reserve(vertex_count);
  for (size_t i = 0; i < vertex_count; ++i) {
    const double x = v[3 * i], y = v[3 * i + 1], z = v[3 * i + 2];
    if (!coordinate_ok(x) || !coordinate_ok(y) || !coordinate_ok(z)) {
      return fmt::format("{}: vertex {} ({}, {}, {}) is not finite or beyond 1e5 m", path, i + 1, x, y, z);
    }
    out->vertices.push_back({static_cast<float>(x), static_cast<float>(y), static_cast<float>(z)});
  }
  for (const tinyobj::shape_t& shape : reader.GetShapes()) {
    const tinyobj::mesh_t& m = shape.mesh;
    size_t at = 0;
    for (size_t f = 0; f < m.num_face_vertices.size(); ++f) {
      const size_t n = m.num_face_vertices[f];
      if (at + n > m.indices.size()) return fmt::format("{}: object \"{}\": face {} runs past its indices", path, shape.name, f);
      if (n == 3) {
        for (size_t k = 0; k < 3; ++k) {
          const int index = m.indices[at + k].vertex_index;
          if (index < 0 || static_cast<size_t>(index) >= vertex_count) {
            return fmt::format("{}: object \"{}\": face {} names vertex {}, of {}", path, shape.name, f, index + 1,
                               vertex_count);
          }
          out->indices.push_back(static_cast<uint32_t>(index));
        }
        if (out->indices.size() / 3 > kMaxModelTriangles) {
          return fmt::format("{}: more than {} triangles", path, kMaxModelTriangles);
        }
      }
      at += n;
    }
  }
  return {};
}

// A column-major 4x4 transform in double, as glTF stores node matrices.
using Matrix = std::array<double, 16>;
constexpr Matrix kIdentity{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

Matrix multiply(const Matrix& a, const Matrix& b) {
  Matrix r{};
  for (int c = 0; c < 4; ++c) {
    for (int row = 0; row < 4; ++row) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += a[k * 4 + row] * b[c * 4 + k];
      r[c * 4 + row] = s;
    }
  }
  return r;
}

// The node's local transform: its matrix, or T * R * S (glTF 2.0 §3.5.3).
Matrix local_matrix(const tinygltf::Node& n) {
  if (n.matrix.size() == 16) {
    Matrix m{};
    std::copy(n.matrix.begin(), n.matrix.end(), m.begin());
    return m;
  }
  const double tx = n.translation.size() == 3 ? n.translation[0] : 0, ty = n.translation.size() == 3 ? n.translation[1] : 0,
               tz = n.translation.size() == 3 ? n.translation[2] : 0;
  double qx = 0, qy = 0, qz = 0, qw = 1;
  if (n.rotation.size() == 4) {
    qx = n.rotation[0], qy = n.rotation[1], qz = n.rotation[2], qw = n.rotation[3];
    const double len = std::sqrt(qx * qx + qy * qy + qz * qz + qw * qw);
    if (len > 0 && std::isfinite(len)) qx /= len, qy /= len, qz /= len, qw /= len;
  }
  const double sx = n.scale.size() == 3 ? n.scale[0] : 1, sy = n.scale.size() == 3 ? n.scale[1] : 1,
               sz = n.scale.size() == 3 ? n.scale[2] : 1;
  // Rotation matrix columns, each scaled by its axis' scale.
  const double r00 = 1 - 2 * (qy * qy + qz * qz), r10 = 2 * (qx * qy + qz * qw), r20 = 2 * (qx * qz - qy * qw);
  const double r01 = 2 * (qx * qy - qz * qw), r11 = 1 - 2 * (qx * qx + qz * qz), r21 = 2 * (qy * qz + qx * qw);
  const double r02 = 2 * (qx * qz + qy * qw), r12 = 2 * (qy * qz - qx * qw), r22 = 1 - 2 * (qx * qx + qy * qy);
  return Matrix{r00 * sx, r10 * sx, r20 * sx, 0, r01 * sy, r11 * sy, r21 * sy, 0, r02 * sz, r12 * sz, r22 * sz, 0, tx, ty, tz, 1};
}

/// The bytes of accessor `index` element by element: checks the view and buffer ranges first.
struct AccessorBytes {
  const unsigned char* data = nullptr;
  size_t stride = 0;
  size_t count = 0;
};

std::string accessor_bytes(const tinygltf::Model& model, int index, size_t element_size, AccessorBytes* out) {
  if (index < 0 || static_cast<size_t>(index) >= model.accessors.size()) return fmt::format("accessor {} does not exist", index);
  const tinygltf::Accessor& a = model.accessors[static_cast<size_t>(index)];
  if (a.sparse.isSparse) return fmt::format("accessor {} is sparse (not supported)", index);
  if (a.bufferView < 0 || static_cast<size_t>(a.bufferView) >= model.bufferViews.size()) {
    return fmt::format("accessor {} has no buffer view", index);
  }
  const tinygltf::BufferView& view = model.bufferViews[static_cast<size_t>(a.bufferView)];
  if (view.buffer < 0 || static_cast<size_t>(view.buffer) >= model.buffers.size()) {
    return fmt::format("accessor {}: buffer view {} has no buffer", index, a.bufferView);
  }
  const std::vector<unsigned char>& buffer = model.buffers[static_cast<size_t>(view.buffer)].data;
  const size_t stride = view.byteStride != 0 ? view.byteStride : element_size;
  if (stride < element_size) return fmt::format("accessor {}: stride {} under its element size", index, stride);
  // glTF 2.0 bounds byteStride at 252; checked here too (tinygltf does, but the reads below rely on
  // it), so with count bounded no product below can wrap.
  if (stride > 252) return fmt::format("accessor {}: stride {} beyond glTF's 252", index, stride);
  // Every range in 64-bit arithmetic from bounded values, so nothing wraps.
  if (a.count > kMaxModelVertices) return fmt::format("accessor {}: {} elements, at most {}", index, a.count, kMaxModelVertices);
  if (view.byteOffset > buffer.size() || view.byteLength > buffer.size() - view.byteOffset) {
    return fmt::format("accessor {}: buffer view {} lies outside its buffer", index, a.bufferView);
  }
  const uint64_t need = a.count == 0 ? 0 : static_cast<uint64_t>(a.byteOffset) + (a.count - 1) * static_cast<uint64_t>(stride) + element_size;
  if (a.byteOffset > view.byteLength || need > view.byteLength) {
    return fmt::format("accessor {} reads past its buffer view ({} elements)", index, a.count);
  }
  out->data = buffer.data() + view.byteOffset + a.byteOffset;
  out->stride = stride;
  out->count = a.count;
  return {};
}

std::string add_primitive(const tinygltf::Model& model, const tinygltf::Primitive& p, const Matrix& m, ModelFile* out) {
  if (p.mode != -1 && p.mode != TINYGLTF_MODE_TRIANGLES) return {};  // lines and points carry no surface
  const auto position = p.attributes.find("POSITION");
  if (position == p.attributes.end()) return "no POSITION attribute";
  const int pos_index = position->second;
  if (pos_index < 0 || static_cast<size_t>(pos_index) >= model.accessors.size()) return "POSITION accessor does not exist";
  const tinygltf::Accessor& pa = model.accessors[static_cast<size_t>(pos_index)];
  if (pa.type != TINYGLTF_TYPE_VEC3 || pa.componentType != TINYGLTF_COMPONENT_TYPE_FLOAT) {
    return "POSITION must be float VEC3";
  }
  AccessorBytes positions;
  if (std::string e = accessor_bytes(model, pos_index, 12, &positions); !e.empty()) return "POSITION " + e;
  const size_t first = out->vertices.size();
  if (first + positions.count > kMaxModelVertices) return fmt::format("more than {} vertices", kMaxModelVertices);
  for (size_t i = 0; i < positions.count; ++i) {
    float xyz[3];
    std::memcpy(xyz, positions.data + i * positions.stride, sizeof xyz);
    const double x = m[0] * xyz[0] + m[4] * xyz[1] + m[8] * xyz[2] + m[12];
    const double y = m[1] * xyz[0] + m[5] * xyz[1] + m[9] * xyz[2] + m[13];
    const double z = m[2] * xyz[0] + m[6] * xyz[1] + m[10] * xyz[2] + m[14];
    if (!coordinate_ok(x) || !coordinate_ok(y) || !coordinate_ok(z)) {
      return fmt::format("POSITION {} ({}, {}, {}) is not finite or beyond 1e5 m once placed", i, x, y, z);
    }
    out->vertices.push_back({static_cast<float>(x), static_cast<float>(y), static_cast<float>(z)});
  }
  // A node whose transform mirrors (negative determinant) turns every triangle inside out.
  const double det = m[0] * (m[5] * m[10] - m[9] * m[6]) - m[4] * (m[1] * m[10] - m[9] * m[2]) + m[8] * (m[1] * m[6] - m[5] * m[2]);
  auto push_triangle = [&](uint64_t i0, uint64_t i1, uint64_t i2) -> std::string {
    if (i0 >= positions.count || i1 >= positions.count || i2 >= positions.count) {
      return fmt::format("index {} beyond the {} positions", std::max({i0, i1, i2}), positions.count);
    }
    const uint32_t a = static_cast<uint32_t>(first + i0);
    const uint32_t b = static_cast<uint32_t>(first + (det < 0 ? i2 : i1));
    const uint32_t c = static_cast<uint32_t>(first + (det < 0 ? i1 : i2));
    out->indices.insert(out->indices.end(), {a, b, c});
    if (out->indices.size() / 3 > kMaxModelTriangles) return fmt::format("more than {} triangles", kMaxModelTriangles);
    return {};
  };
  if (p.indices < 0) {
    for (uint64_t i = 0; i + 2 < positions.count; i += 3) {
      if (std::string e = push_triangle(i, i + 1, i + 2); !e.empty()) return e;
    }
    return {};
  }
  if (static_cast<size_t>(p.indices) >= model.accessors.size()) return fmt::format("indices accessor {} does not exist", p.indices);
  const tinygltf::Accessor& ia = model.accessors[static_cast<size_t>(p.indices)];
  size_t size = 0;
  switch (ia.componentType) {
    case TINYGLTF_COMPONENT_TYPE_UNSIGNED_BYTE: size = 1; break;
    case TINYGLTF_COMPONENT_TYPE_UNSIGNED_SHORT: size = 2; break;
    case TINYGLTF_COMPONENT_TYPE_UNSIGNED_INT: size = 4; break;
    default: return fmt::format("indices accessor {}: component type {} is not an unsigned integer", p.indices, ia.componentType);
  }
  if (ia.type != TINYGLTF_TYPE_SCALAR) return fmt::format("indices accessor {} is not SCALAR", p.indices);
  AccessorBytes indices;
  if (std::string e = accessor_bytes(model, p.indices, size, &indices); !e.empty()) return "indices " + e;
  auto index_at = [&](size_t k) -> uint64_t {
    const unsigned char* at = indices.data + k * indices.stride;
    if (size == 1) return at[0];
    if (size == 2) return static_cast<uint64_t>(at[0]) | (static_cast<uint64_t>(at[1]) << 8);
    return static_cast<uint64_t>(at[0]) | (static_cast<uint64_t>(at[1]) << 8) | (static_cast<uint64_t>(at[2]) << 16) |
           (static_cast<uint64_t>(at[3]) << 24);
  };
  for (size_t k = 0; k + 2 < indices.count; k += 3) {
    if (std::string e = push_triangle(index_at(k), index_at(k + 1), index_at(k + 2)); !e.empty()) return e;
  }
  return {};
}

std::string load_gltf(const std::string& path, const std::string& bytes, const std::string& base_dir, bool binary,
                      ModelFile* out) {
  tinygltf::TinyGLTF loader;
  // Images are never decoded: a callback that accepts and ignores them.
  loader.SetImageLoader([](tinygltf::Image*, const int, std::string*, std::string*, int, int, const unsigned char*, int,
                           void*) { return true; },
                        nullptr);
  tinygltf::Model model;
  std::string err;
  std::string warn;
  if (bytes.size() > 0xFFFFFFFFu) return fmt::format("{}: too large", path);
  const bool ok = binary ? loader.LoadBinaryFromMemory(&model, &err, &warn, reinterpret_cast<const unsigned char*>(bytes.data()),
                                                       static_cast<unsigned int>(bytes.size()), base_dir)
                         : loader.LoadASCIIFromString(&model, &err, &warn, bytes.data(),
                                                      static_cast<unsigned int>(bytes.size()), base_dir);
  if (!ok) return fmt::format("{}: not a glTF 2.0 file: {}", path, err.empty() ? warn : err);
  // The nodes to walk: the default scene's, else every scene's.
  std::vector<int> roots;
  if (model.defaultScene >= 0 && static_cast<size_t>(model.defaultScene) < model.scenes.size()) {
    roots = model.scenes[static_cast<size_t>(model.defaultScene)].nodes;
  } else {
    for (const tinygltf::Scene& s : model.scenes) roots.insert(roots.end(), s.nodes.begin(), s.nodes.end());
  }
  // Depth-first with an explicit stack and a visit count per node, so a cyclic or shared node
  // graph (invalid glTF) cannot loop or blow up.
  struct Visit {
    int node;
    Matrix parent;
    int depth;
  };
  constexpr int kMaxDepth = 64;
  std::vector<Visit> stack;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.push_back({*it, kIdentity, 0});
  std::vector<uint8_t> visited(model.nodes.size(), 0);
  while (!stack.empty()) {
    const Visit v = stack.back();
    stack.pop_back();
    if (v.node < 0 || static_cast<size_t>(v.node) >= model.nodes.size()) return fmt::format("{}: node {} does not exist", path, v.node);
    if (visited[static_cast<size_t>(v.node)] || v.depth > kMaxDepth) {
      return fmt::format("{}: nodes[{}]: the node graph is not a tree", path, v.node);
    }
    visited[static_cast<size_t>(v.node)] = 1;
    const tinygltf::Node& node = model.nodes[static_cast<size_t>(v.node)];
    const Matrix world = multiply(v.parent, local_matrix(node));
    if (node.mesh >= 0) {
      if (static_cast<size_t>(node.mesh) >= model.meshes.size()) return fmt::format("{}: nodes[{}]: mesh {} does not exist", path, v.node, node.mesh);
      const tinygltf::Mesh& mesh = model.meshes[static_cast<size_t>(node.mesh)];
      for (size_t p = 0; p < mesh.primitives.size(); ++p) {
        if (std::string e = add_primitive(model, mesh.primitives[p], world, out); !e.empty()) {
          return fmt::format("{}: meshes[{}].primitives[{}]: {}", path, node.mesh, p, e);
        }
      }
    }
    for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) stack.push_back({*it, world, v.depth + 1});
  }
  return {};
}

}  // namespace

std::string xxh64_hex(uint64_t hash) { return fmt::format("{:016x}", hash); }

std::string load_model_file(const std::string& path, ModelFile* out) {
  *out = ModelFile{};
  std::string bytes;
  if (std::string e = read_bounded(path, &bytes); !e.empty()) return e;
  const size_t slash = path.find_last_of('/');
  return load_model_bytes(path, bytes, slash == std::string::npos ? "." : path.substr(0, slash), out);
}

std::string load_model_bytes(const std::string& path, const std::string& bytes, const std::string& base_dir,
                             ModelFile* out) {
  *out = ModelFile{};
  if (bytes.size() > kMaxAssetFileBytes) return fmt::format("{}: more than {} bytes", path, kMaxAssetFileBytes);
  out->xxh64 = XXH64(bytes.data(), bytes.size(), 0);
  const std::string ext = lower_extension(path);
  std::string problem;
  if (ext == ".obj") {
    problem = load_obj(path, bytes, out);
  } else if (ext == ".gltf" || ext == ".glb") {
    problem = load_gltf(path, bytes, base_dir, ext == ".glb", out);
  } else {
    problem = fmt::format("{}: unknown model format \"{}\" (.obj, .gltf or .glb)", path, ext);
  }
  if (problem.empty() && out->indices.empty()) problem = fmt::format("{}: no triangles", path);
  return problem;
}

}  // namespace impulse::server
