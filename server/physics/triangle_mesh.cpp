// Triangle mesh building (weld, canonical order, BVH, active edges) and segment casts. See the
// header for the algorithms and their sources.
#include "server/physics/triangle_mesh.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include <xxhash.h>

#include "server/physics/heightfield.h"
#include "server/physics/types.h"

namespace impulse::physics {

namespace {

bool vec_less(Vec3 a, Vec3 b) { return std::tie(a.x, a.y, a.z) < std::tie(b.x, b.y, b.z); }

Vec3 unit_normal(Vec3 a, Vec3 b, Vec3 c) { return normalize_or(cross(b - a, c - a), Vec3{0.0f, 1.0f, 0.0f}); }

/// A coordinate in node units, rounded down (up = false) or up, with one unit of slack for the
/// float rounding of the division, clamped to 16 bits.
uint16_t quantise(float v, float lo, float step, bool up) {
  if (!(step > 0.0f)) return up ? 65535 : 0;
  const float q = (v - lo) / step;
  const float r = up ? std::ceil(q) + 1.0f : std::floor(q) - 1.0f;
  if (!(r > 0.0f)) return 0;
  if (r >= 65535.0f) return 65535;
  return static_cast<uint16_t>(r);
}

struct BuildState {
  const std::vector<Vec3>& vertices;
  const std::vector<uint32_t>& indices;  // canonical order
  std::vector<Aabb> boxes;               // per canonical triangle
  std::vector<Vec3> centroids;
  std::vector<uint32_t> order;           // the BVH leaf order being built
  TriangleMesh& mesh;
};

void set_box(TriangleMesh& mesh, MeshNode& n, const Aabb& b) {
  n.lo[0] = quantise(b.min.x, mesh.bounds.min.x, mesh.step.x, false);
  n.lo[1] = quantise(b.min.y, mesh.bounds.min.y, mesh.step.y, false);
  n.lo[2] = quantise(b.min.z, mesh.bounds.min.z, mesh.step.z, false);
  n.hi[0] = quantise(b.max.x, mesh.bounds.min.x, mesh.step.x, true);
  n.hi[1] = quantise(b.max.y, mesh.bounds.min.y, mesh.step.y, true);
  n.hi[2] = quantise(b.max.z, mesh.bounds.min.z, mesh.step.z, true);
}

// Top-down median split (Ericson §6.2.1). Depth is about log2(T / 4) + 1, at most 22 here.
void build_node(BuildState& s, uint32_t node, uint32_t begin, uint32_t end) {
  Aabb box{{1.0e30f, 1.0e30f, 1.0e30f}, {-1.0e30f, -1.0e30f, -1.0e30f}};
  Aabb cbox = box;
  for (uint32_t i = begin; i < end; ++i) {
    const uint32_t t = s.order[i];
    box.min = min(box.min, s.boxes[t].min);
    box.max = max(box.max, s.boxes[t].max);
    cbox.min = min(cbox.min, s.centroids[t]);
    cbox.max = max(cbox.max, s.centroids[t]);
  }
  set_box(s.mesh, s.mesh.nodes[node], box);
  const uint32_t count = end - begin;
  if (count <= kMeshLeafTriangles) {
    s.mesh.nodes[node].data = begin << 3 | count;
    return;
  }
  const Vec3 ext = cbox.max - cbox.min;
  const int axis = ext.x >= ext.y && ext.x >= ext.z ? 0 : (ext.y >= ext.z ? 1 : 2);
  const uint32_t mid = begin + count / 2;
  // Ties broken by triangle index, so the split is the same set whatever the algorithm's order.
  std::nth_element(s.order.begin() + begin, s.order.begin() + mid, s.order.begin() + end,
                   [&](uint32_t a, uint32_t b) {
                     const float ca = component(s.centroids[a], axis);
                     const float cb = component(s.centroids[b], axis);
                     return ca != cb ? ca < cb : a < b;
                   });
  const auto first_child = static_cast<uint32_t>(s.mesh.nodes.size());
  s.mesh.nodes.resize(first_child + 2);
  s.mesh.nodes[node].data = first_child << 3;
  build_node(s, first_child, begin, mid);
  build_node(s, first_child + 1, mid, end);
}

}  // namespace

bool edge_is_active(Vec3 n1, Vec3 n2, Vec3 across) {
  const float c = dot(n1, n2);
  if (c < -0.999848f) return true;             // back to back (a thin wall's two sides)
  if (dot(n1, across) > 0.0f) return false;    // concave: the neighbour rises in front
  return c < kMeshActiveEdgeCos;               // convex: active unless nearly flat
}

MeshBuild build_triangle_mesh(std::span<const Vec3> vertices, std::span<const uint32_t> indices,
                              std::span<const uint8_t> materials) {
  MeshBuild out;
  auto fail = [&](std::string why) {
    out.mesh = TriangleMesh{};
    out.error = std::move(why);
    return std::move(out);
  };
  if (indices.size() % 3 != 0) return fail("index count " + std::to_string(indices.size()) + " is not a multiple of 3");
  const size_t tri_in = indices.size() / 3;
  if (tri_in == 0) return fail("no triangles");
  if (tri_in > kMaxMeshTriangles) {
    return fail(std::to_string(tri_in) + " triangles, more than the limit of " + std::to_string(kMaxMeshTriangles));
  }
  if (vertices.size() > kMaxMeshVertices) {
    return fail(std::to_string(vertices.size()) + " vertices, more than the limit of " +
                std::to_string(kMaxMeshVertices));
  }
  if (!materials.empty() && materials.size() != tri_in) {
    return fail("material count " + std::to_string(materials.size()) + " is neither 0 nor the triangle count " +
                std::to_string(tri_in));
  }
  for (size_t i = 0; i < vertices.size(); ++i) {
    const Vec3 v = vertices[i];
    if (!is_finite(v) || std::fabs(v.x) > kMaxMeshCoordinate || std::fabs(v.y) > kMaxMeshCoordinate ||
        std::fabs(v.z) > kMaxMeshCoordinate) {
      return fail("vertex " + std::to_string(i) + " is not finite or beyond 1e5 m");
    }
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= vertices.size()) {
      return fail("index " + std::to_string(i) + " (" + std::to_string(indices[i]) + ") is out of range (" +
                  std::to_string(vertices.size()) + " vertices)");
    }
  }

  // Weld: equal positions share one vertex, numbered in position order (canonical). -0 becomes
  // +0 first (x + 0 does that), or two vertices that compare equal could keep either's bits and a
  // saved mesh would not rebuild to itself (found by fuzz_convex_hull).
  std::vector<Vec3> input(vertices.begin(), vertices.end());
  for (Vec3& v : input) v = v + Vec3{};
  const std::span<const Vec3> positions(input);
  std::vector<uint32_t> by_pos(vertices.size());
  std::iota(by_pos.begin(), by_pos.end(), 0u);
  std::sort(by_pos.begin(), by_pos.end(), [&](uint32_t a, uint32_t b) {
    return vec_less(positions[a], positions[b]) || (!vec_less(positions[b], positions[a]) && a < b);
  });
  std::vector<uint32_t> welded_id(vertices.size());
  std::vector<Vec3> unique;
  unique.reserve(vertices.size());
  for (size_t k = 0; k < by_pos.size(); ++k) {
    const Vec3 v = positions[by_pos[k]];
    if (unique.empty() || vec_less(unique.back(), v)) {
      unique.push_back(v);
    } else {
      ++out.welded;
    }
    welded_id[by_pos[k]] = static_cast<uint32_t>(unique.size() - 1);
  }

  // Triangles rotated to start at their lowest vertex id (winding kept), degenerate ones dropped,
  // then sorted: the canonical order depends on the triangle set only.
  struct Tri {
    uint32_t v[3];
    uint8_t material;
  };
  std::vector<Tri> tris;
  tris.reserve(tri_in);
  for (size_t t = 0; t < tri_in; ++t) {
    uint32_t a = welded_id[indices[3 * t]];
    uint32_t b = welded_id[indices[3 * t + 1]];
    uint32_t c = welded_id[indices[3 * t + 2]];
    if (a == b || b == c || a == c) {
      ++out.degenerate;
      continue;
    }
    while (a > b || a > c) {
      const uint32_t first = a;
      a = b;
      b = c;
      c = first;
    }
    // The area from the rotated (canonical) corners: from another corner its rounding differs,
    // and a saved mesh would not rebuild to itself (found by fuzz_convex_hull).
    const Vec3 n = cross(unique[b] - unique[a], unique[c] - unique[a]);
    if (!(length_squared(n) > 4.0e-24f)) {
      ++out.degenerate;
      continue;
    }
    tris.push_back(Tri{{a, b, c}, materials.empty() ? uint8_t{0} : materials[t]});
  }
  if (tris.empty()) return fail("every triangle is degenerate (repeated vertices or zero area)");
  std::sort(tris.begin(), tris.end(), [](const Tri& x, const Tri& y) {
    return std::tie(x.v[0], x.v[1], x.v[2], x.material) < std::tie(y.v[0], y.v[1], y.v[2], y.material);
  });

  // Keep only the vertices some triangle uses (a dropped triangle may have been a vertex's only one).
  std::vector<uint32_t> remap(unique.size(), 0xFFFFFFFFu);
  for (const Tri& t : tris) {
    for (const uint32_t v : t.v) remap[v] = 0;
  }
  TriangleMesh& mesh = out.mesh;
  for (size_t v = 0; v < unique.size(); ++v) {
    if (remap[v] == 0xFFFFFFFFu) continue;
    remap[v] = static_cast<uint32_t>(mesh.vertices.size());
    mesh.vertices.push_back(unique[v]);
  }
  std::vector<uint32_t> canonical(3 * tris.size());
  bool any_material = false;
  for (size_t t = 0; t < tris.size(); ++t) {
    for (int k = 0; k < 3; ++k) canonical[3 * t + k] = remap[tris[t].v[k]];
    any_material = any_material || tris[t].material != 0;
  }
  const auto tri_count = static_cast<uint32_t>(tris.size());

  mesh.bounds = {mesh.vertices[0], mesh.vertices[0]};
  for (const Vec3& v : mesh.vertices) {
    mesh.bounds.min = min(mesh.bounds.min, v);
    mesh.bounds.max = max(mesh.bounds.max, v);
  }
  mesh.step = (mesh.bounds.max - mesh.bounds.min) * (1.0f / 65535.0f);

  BuildState s{mesh.vertices, canonical, {}, {}, {}, mesh};
  s.boxes.resize(tri_count);
  s.centroids.resize(tri_count);
  s.order.resize(tri_count);
  std::iota(s.order.begin(), s.order.end(), 0u);
  for (uint32_t t = 0; t < tri_count; ++t) {
    const Vec3 a = mesh.vertices[canonical[3 * t]];
    const Vec3 b = mesh.vertices[canonical[3 * t + 1]];
    const Vec3 c = mesh.vertices[canonical[3 * t + 2]];
    s.boxes[t] = {min(min(a, b), c), max(max(a, b), c)};
    s.centroids[t] = (a + b + c) * (1.0f / 3.0f);
  }
  mesh.nodes.reserve(2 * (tri_count / 2 + 1));
  mesh.nodes.resize(1);
  build_node(s, 0, 0, tri_count);
  mesh.nodes.shrink_to_fit();

  mesh.indices.resize(3 * static_cast<size_t>(tri_count));
  if (any_material) mesh.materials.resize(tri_count);
  for (uint32_t i = 0; i < tri_count; ++i) {
    const uint32_t t = s.order[i];
    for (int k = 0; k < 3; ++k) mesh.indices[3 * i + k] = canonical[3 * t + k];
    if (any_material) mesh.materials[i] = tris[t].material;
  }

  // Active edges: sort every edge by its (lower, higher) vertex pair; an edge met by exactly two
  // triangles walking it in opposite directions is a seam, judged by edge_is_active; any other
  // edge (a border, a non-manifold fan, inconsistent winding) stays active.
  struct EdgeRef {
    uint32_t lo, hi, tri;
    uint8_t k;
  };
  std::vector<EdgeRef> edges(3 * static_cast<size_t>(tri_count));
  for (uint32_t t = 0; t < tri_count; ++t) {
    for (uint8_t k = 0; k < 3; ++k) {
      const uint32_t a = mesh.indices[3 * t + k];
      const uint32_t b = mesh.indices[3 * t + (k + 1) % 3];
      edges[3 * t + k] = EdgeRef{std::min(a, b), std::max(a, b), t, k};
    }
  }
  std::sort(edges.begin(), edges.end(), [](const EdgeRef& x, const EdgeRef& y) {
    return std::tie(x.lo, x.hi, x.tri, x.k) < std::tie(y.lo, y.hi, y.tri, y.k);
  });
  mesh.edge_flags.assign(tri_count, 7);
  auto normal_of = [&](uint32_t t) {
    return unit_normal(mesh.vertices[mesh.indices[3 * t]], mesh.vertices[mesh.indices[3 * t + 1]],
                       mesh.vertices[mesh.indices[3 * t + 2]]);
  };
  for (size_t i = 0; i < edges.size();) {
    size_t j = i + 1;
    while (j < edges.size() && edges[j].lo == edges[i].lo && edges[j].hi == edges[i].hi) ++j;
    if (j - i == 2) {
      const EdgeRef& e1 = edges[i];
      const EdgeRef& e2 = edges[i + 1];
      const uint32_t from1 = mesh.indices[3 * e1.tri + e1.k];
      const uint32_t from2 = mesh.indices[3 * e2.tri + e2.k];
      if (from1 != from2) {  // opposite directions: a consistently wound seam
        const Vec3 n1 = normal_of(e1.tri);
        const Vec3 n2 = normal_of(e2.tri);
        const Vec3 on_edge = mesh.vertices[from1];
        const Vec3 off1 = mesh.vertices[mesh.indices[3 * e1.tri + (e1.k + 2) % 3]];
        const Vec3 off2 = mesh.vertices[mesh.indices[3 * e2.tri + (e2.k + 2) % 3]];
        if (!edge_is_active(n1, n2, off2 - on_edge)) mesh.edge_flags[e1.tri] &= static_cast<uint8_t>(~(1u << e1.k));
        if (!edge_is_active(n2, n1, off1 - on_edge)) mesh.edge_flags[e2.tri] &= static_cast<uint8_t>(~(1u << e2.k));
      }
    }
    i = j;
  }
  // Little-endian hosts only (as the world hash): the bytes are the stored floats and integers.
  uint64_t h = XXH3_64bits(mesh.vertices.data(), mesh.vertices.size() * sizeof(Vec3));
  h = XXH3_64bits_withSeed(mesh.indices.data(), mesh.indices.size() * sizeof(uint32_t), h);
  mesh.content_hash = XXH3_64bits_withSeed(mesh.materials.data(), mesh.materials.size(), h);
  return out;
}

Shape make_mesh(const TriangleMesh& mesh) {
  Shape s;
  s.kind = ShapeKind::Mesh;
  s.radius = 0.0f;
  s.half_extents = (mesh.bounds.max - mesh.bounds.min) * 0.5f;
  s.half_height = 0.0f;
  s.mesh = &mesh;
  s.data_id = mesh.id;
  return s;
}

size_t TriangleMesh::memory_bytes() const {
  return vertices.size() * sizeof(Vec3) + indices.size() * sizeof(uint32_t) + edge_flags.size() +
         materials.size() + nodes.size() * sizeof(MeshNode);
}

bool TriangleMesh::operator==(const TriangleMesh& o) const {
  return vertices == o.vertices && indices == o.indices && materials == o.materials;
}

uint8_t active_edges(const MeshTriangle& tri) {
  return tri.field != nullptr ? tri.field->triangle_active_edges(tri.index) : tri.active;
}

std::string check_mesh(const TriangleMesh& mesh) {
  const MeshBuild rebuilt = build_triangle_mesh(mesh.vertices, mesh.indices, mesh.materials);
  if (!rebuilt.ok()) return rebuilt.error;
  if (!(rebuilt.mesh == mesh)) return "not in the canonical form build_triangle_mesh makes";
  return {};
}

bool ray_triangle(Vec3 origin, Vec3 translation, const Vec3 v[3], float max_fraction, float& t) {
  const Vec3 e1 = v[1] - v[0];
  const Vec3 e2 = v[2] - v[0];
  const Vec3 p = cross(translation, e2);
  const float det = dot(e1, p);  // = -dot(translation, normal): > 0 when entering the front face
  if (!(det > 0.0f)) return false;
  const Vec3 s = origin - v[0];
  const float u = dot(s, p);
  if (u < 0.0f || u > det) return false;
  const Vec3 q = cross(s, e1);
  const float w = dot(translation, q);
  if (w < 0.0f || u + w > det) return false;
  const float tt = dot(e2, q) / det;
  if (!(tt >= 0.0f && tt <= max_fraction)) return false;
  t = tt;
  return true;
}

bool raycast_mesh(const TriangleMesh& mesh, Vec3 origin, Vec3 translation, float max_fraction, MeshRayHit& out) {
  if (mesh.nodes.empty() || !is_finite(origin) || !is_finite(translation) || !(max_fraction >= 0.0f)) return false;
  // Slab entry and exit of a node's box, clipped to [0, best].
  const Vec3 inv{1.0f / translation.x, 1.0f / translation.y, 1.0f / translation.z};
  auto enter = [&](const Aabb& b, float best, float& t_in) {
    float lo = 0.0f;
    float hi = best;
    for (int a = 0; a < 3; ++a) {
      const float o = component(origin, a);
      const float d = component(translation, a);
      const float bmin = component(b.min, a);
      const float bmax = component(b.max, a);
      if (d == 0.0f) {
        if (o < bmin || o > bmax) return false;
        continue;
      }
      const float id = component(inv, a);
      float t0 = (bmin - o) * id;
      float t1 = (bmax - o) * id;
      if (t0 > t1) std::swap(t0, t1);
      lo = std::max(lo, t0);
      hi = std::min(hi, t1);
      if (lo > hi) return false;
    }
    t_in = lo;
    return true;
  };
  float best = max_fraction;
  bool hit = false;
  uint32_t stack[64];
  int top = 0;
  float t_root = 0.0f;
  if (!enter(mesh.node_box(mesh.nodes[0]), best, t_root)) return false;
  stack[top++] = 0;
  while (top > 0) {
    const MeshNode& n = mesh.nodes[stack[--top]];
    const uint32_t count = n.count();
    if (count == 0) {
      float ta = 0.0f;
      float tb = 0.0f;
      const bool ha = enter(mesh.node_box(mesh.nodes[n.first()]), best, ta);
      const bool hb = enter(mesh.node_box(mesh.nodes[n.first() + 1]), best, tb);
      if (top + 2 > 64) continue;
      // Nearer child on top of the stack.
      if (ha && hb) {
        const bool a_first = ta <= tb;
        stack[top++] = a_first ? n.first() + 1 : n.first();
        stack[top++] = a_first ? n.first() : n.first() + 1;
      } else if (ha) {
        stack[top++] = n.first();
      } else if (hb) {
        stack[top++] = n.first() + 1;
      }
      continue;
    }
    float t_in = 0.0f;
    if (!enter(mesh.node_box(n), best, t_in)) continue;  // best shrank since it was pushed
    for (uint32_t t = n.first(); t < n.first() + count; ++t) {
      const MeshTriangle tri = mesh.triangle(t);
      float f = 0.0f;
      // Ties keep the lowest triangle index (leaf order), as a brute-force scan in index order does.
      if (ray_triangle(origin, translation, tri.v, best, f) && (!hit || f < best || (f == best && t < out.triangle))) {
        best = f;
        hit = true;
        out.fraction = f;
        out.triangle = t;
        out.normal = unit_normal(tri.v[0], tri.v[1], tri.v[2]);
      }
    }
  }
  return hit;
}

}  // namespace impulse::physics
