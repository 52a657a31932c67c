// Heightfields: a regular grid of heights in the body's frame, each sample 16 bits on a per-field
// offset and scale (2 bytes a sample; the reserved value kHeightFieldHole cuts the cells around
// it out), with an optional material id per cell. Each cell is two triangles split along its
// diagonal from sample (i, j) to (i + 1, j + 1); the narrowphase sees them exactly as it sees a
// mesh's (narrowphase_mesh.cpp), with active edges found on the fly from the neighbouring cells
// (triangle_mesh.h's rule), so nothing per triangle is stored.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "server/physics/triangle_mesh.h"
#include "shared/math.h"

namespace impulse::physics {

/// The stored sample value of a hole: every cell that has it at a corner is left out.
inline constexpr uint16_t kHeightFieldHole = 0xFFFF;
/// Most samples per side (8193 x 8193 samples: 134 MB at most).
inline constexpr uint32_t kMaxHeightFieldSide = 8193;

/// A heightfield in its body's frame [m]: sample (i, j) sits at x = i * spacing.x,
/// z = j * spacing.z, y = offset + scale * heights[j * count_x + i]. Built by build_heightfield; a
/// World keeps the ones its bodies use (World::add_heightfield) for as long as it lives.
struct HeightField {
  uint32_t count_x = 0;             ///< samples along x (>= 2)
  uint32_t count_z = 0;             ///< samples along z (>= 2)
  Vec3 spacing{1.0f, 0.0f, 1.0f};   ///< x and z: the sample spacing [m] (y unused, 0)
  float offset = 0;                 ///< height of stored value 0 [m]
  float scale = 0;                  ///< [m] per stored unit (0 for a flat field)
  std::vector<uint16_t> heights;    ///< count_x * count_z, row by row along x; kHeightFieldHole: none
  std::vector<uint8_t> materials;   ///< per cell, (count_x - 1) * (count_z - 1); empty: all 0
  Aabb bounds;                      ///< of every solid sample [m]
  uint64_t content_hash = 0;        ///< XXH3-64 of the stored data (as TriangleMesh::content_hash)
  uint32_t id = 0xFFFFFFFFu;        ///< index in the World's heightfield table (World::add_heightfield)

  bool solid(uint32_t i, uint32_t j) const { return heights[j * count_x + i] != kHeightFieldHole; }
  Vec3 sample(uint32_t i, uint32_t j) const {
    return {spacing.x * static_cast<float>(i), offset + scale * static_cast<float>(heights[j * count_x + i]),
            spacing.z * static_cast<float>(j)};
  }
  /// Whether cell (i, j) (corners (i, j) to (i + 1, j + 1)) exists: all four corners solid.
  bool cell(uint32_t i, uint32_t j) const {
    return i + 1 < count_x && j + 1 < count_z && solid(i, j) && solid(i + 1, j) && solid(i, j + 1) &&
           solid(i + 1, j + 1);
  }
  /// Triangle t (0 or 1) of cell (i, j) with its material; index 2 * cell + t. Its active edges
  /// are left to active_edges (MeshTriangle::field points here).
  MeshTriangle triangle(uint32_t i, uint32_t j, uint32_t t) const;
  /// The active edges of triangle `index` (bit k: edge k), from the neighbouring cells.
  uint8_t triangle_active_edges(uint32_t index) const;
  /// The same triangle's vertices only (no active edges: what raycasts need).
  void triangle_vertices(uint32_t i, uint32_t j, uint32_t t, Vec3 out[3]) const;
  size_t memory_bytes() const { return heights.size() * 2 + materials.size(); }
  bool operator==(const HeightField& o) const {
    return count_x == o.count_x && count_z == o.count_z && spacing == o.spacing && offset == o.offset &&
           scale == o.scale && heights == o.heights && materials == o.materials;
  }
};

/// What build_heightfield returns: the field or an error naming the bad element.
struct HeightFieldBuild {
  HeightField field;
  std::string error;  ///< empty on success
  bool ok() const { return error.empty(); }
};

/// Builds a field of count_x * count_z samples from heights [m] (row by row along x; NaN marks a
/// hole), quantised to 16 bits between the lowest and highest (the largest rounding error is
/// (max - min) / 131070; heights must span at most 1e4 m), with spacing.x and spacing.z in
/// [1e-3, 1e3] m and an optional material id per cell. Fails, naming the element, on: a side
/// under 2 or over kMaxHeightFieldSide samples, a height count that is not count_x * count_z, an
/// infinite height or one beyond kMaxMeshCoordinate, a bad spacing, a material count neither 0
/// nor the cell count, or no solid cell. Deterministic.
HeightFieldBuild build_heightfield(uint32_t count_x, uint32_t count_z, Vec3 spacing, std::span<const float> heights,
                                   std::span<const uint8_t> materials = {});

/// Checks a field read from a saved world (which may be hostile): sizes, spacing, bounds; returns
/// the first problem or an empty string. Recomputes bounds and hash (`field` is the reader's copy).
std::string check_heightfield(HeightField& field);

/// Calls f(const MeshTriangle&) for the triangles of every cell whose box may overlap `box`
/// (field frame [m]), cells in row order. Stops early when f returns false.
template <class F>
void for_each_triangle(const HeightField& h, const Aabb& box, F&& f) {
  if (!overlaps(h.bounds, box)) return;
  auto range = [](float lo, float hi, float spacing, uint32_t cells, uint32_t& first, uint32_t& last) {
    const float a = std::floor(lo / spacing);
    const float b = std::floor(hi / spacing);
    if (!(b >= 0.0f) || !(a < static_cast<float>(cells))) return false;
    first = a > 0.0f ? static_cast<uint32_t>(a) : 0u;
    last = b < static_cast<float>(cells - 1) ? static_cast<uint32_t>(b) : cells - 1;
    return first <= last;
  };
  uint32_t i0 = 0, i1 = 0, j0 = 0, j1 = 0;
  if (!range(box.min.x, box.max.x, h.spacing.x, h.count_x - 1, i0, i1)) return;
  if (!range(box.min.z, box.max.z, h.spacing.z, h.count_z - 1, j0, j1)) return;
  for (uint32_t j = j0; j <= j1; ++j) {
    for (uint32_t i = i0; i <= i1; ++i) {
      if (!h.cell(i, j)) continue;
      const float y00 = h.sample(i, j).y;
      const float y10 = h.sample(i + 1, j).y;
      const float y01 = h.sample(i, j + 1).y;
      const float y11 = h.sample(i + 1, j + 1).y;
      if (std::fmin(std::fmin(y00, y10), std::fmin(y01, y11)) > box.max.y ||
          std::fmax(std::fmax(y00, y10), std::fmax(y01, y11)) < box.min.y) {
        continue;
      }
      if (!f(h.triangle(i, j, 0)) || !f(h.triangle(i, j, 1))) return;
    }
  }
}

/// The first front face of the field the segment origin + t * translation, t in [0,
/// max_fraction], crosses (field frame [m]): the cells under the segment visited in order along
/// it (Amanatides and Woo, "A Fast Voxel Traversal Algorithm for Ray Tracing", Eurographics
/// 1987, in 2D), each cell's two triangles by ray_triangle. False when nothing is hit.
bool raycast_heightfield(const HeightField& h, Vec3 origin, Vec3 translation, float max_fraction, MeshRayHit& out);

}  // namespace impulse::physics
