// Heightfields: building (quantisation), validation, triangles with on-the-fly active edges, and
// segment casts by a 2D grid walk. See the header for the layout and sources.
#include "server/physics/heightfield.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xxhash.h>

#include "server/physics/types.h"

namespace impulse::physics {

namespace {

// Vertex corners of triangle t of a cell, as (di, dj) offsets from its (i, j) corner:
// t = 0: (0,0) (0,1) (1,1); t = 1: (0,0) (1,1) (1,0). Both counter-clockwise about +y.
constexpr int kCorner[2][3][2] = {{{0, 0}, {0, 1}, {1, 1}}, {{0, 0}, {1, 1}, {1, 0}}};

// Across edge k of triangle t: the neighbouring triangle (cell offset, its t) and, in it, the
// vertex off the shared edge (offset from this cell's corner).
struct Across {
  int di, dj, t;
  int off_i, off_j;
};
constexpr Across kAcross[2][3] = {
    {{-1, 0, 1, -1, 0}, {0, 1, 1, 1, 2}, {0, 0, 1, 1, 0}},
    {{0, 0, 0, 0, 1}, {1, 0, 0, 2, 1}, {0, -1, 0, 0, -1}},
};

Vec3 normal_of(Vec3 a, Vec3 b, Vec3 c) { return normalize_or(cross(b - a, c - a), Vec3{0.0f, 1.0f, 0.0f}); }

uint64_t hash_field(const HeightField& h) {
  const float header[6] = {static_cast<float>(h.count_x), static_cast<float>(h.count_z), h.spacing.x, h.spacing.z,
                           h.offset, h.scale};
  uint64_t v = XXH3_64bits(header, sizeof(header));
  v = XXH3_64bits_withSeed(h.heights.data(), h.heights.size() * sizeof(uint16_t), v);
  return XXH3_64bits_withSeed(h.materials.data(), h.materials.size(), v);
}

// Bounds of the solid samples; false when no cell is solid.
bool finish(HeightField& h) {
  bool any_cell = false;
  Aabb b{{1.0e30f, 1.0e30f, 1.0e30f}, {-1.0e30f, -1.0e30f, -1.0e30f}};
  for (uint32_t j = 0; j < h.count_z; ++j) {
    for (uint32_t i = 0; i < h.count_x; ++i) {
      if (!h.solid(i, j)) continue;
      const Vec3 p = h.sample(i, j);
      b.min = min(b.min, p);
      b.max = max(b.max, p);
      any_cell = any_cell || h.cell(i, j);
    }
  }
  h.bounds = b;
  h.content_hash = hash_field(h);
  return any_cell;
}

}  // namespace

Shape make_heightfield(const HeightField& field) {
  Shape s;
  s.kind = ShapeKind::HeightField;
  s.radius = 0.0f;
  s.half_extents = (field.bounds.max - field.bounds.min) * 0.5f;
  s.half_height = 0.0f;
  s.heightfield = &field;
  s.data_id = field.id;
  return s;
}

void HeightField::triangle_vertices(uint32_t i, uint32_t j, uint32_t t, Vec3 out[3]) const {
  for (int k = 0; k < 3; ++k) out[k] = sample(i + kCorner[t][k][0], j + kCorner[t][k][1]);
}

MeshTriangle HeightField::triangle(uint32_t i, uint32_t j, uint32_t t) const {
  MeshTriangle out;
  triangle_vertices(i, j, t, out.v);
  out.index = 2 * (j * (count_x - 1) + i) + t;
  out.material = materials.empty() ? 0 : materials[j * (count_x - 1) + i];
  out.field = this;
  return out;
}

uint8_t HeightField::triangle_active_edges(uint32_t index) const {
  const uint32_t t = index & 1u;
  const uint32_t i = (index >> 1) % (count_x - 1);
  const uint32_t j = (index >> 1) / (count_x - 1);
  Vec3 v[3];
  triangle_vertices(i, j, t, v);
  const Vec3 n = normal_of(v[0], v[1], v[2]);
  uint8_t active = 0;
  for (int k = 0; k < 3; ++k) {
    const Across& a = kAcross[t][k];
    const int64_t ni = static_cast<int64_t>(i) + a.di;
    const int64_t nj = static_cast<int64_t>(j) + a.dj;
    bool edge_active = true;  // a border or a hole beside it
    if (ni >= 0 && nj >= 0 && cell(static_cast<uint32_t>(ni), static_cast<uint32_t>(nj))) {
      Vec3 w[3];
      triangle_vertices(static_cast<uint32_t>(ni), static_cast<uint32_t>(nj), static_cast<uint32_t>(a.t), w);
      const Vec3 off = sample(static_cast<uint32_t>(static_cast<int64_t>(i) + a.off_i),
                              static_cast<uint32_t>(static_cast<int64_t>(j) + a.off_j));
      edge_active = edge_is_active(n, normal_of(w[0], w[1], w[2]), off - v[k]);
    }
    if (edge_active) active = static_cast<uint8_t>(active | 1u << k);
  }
  return active;
}

HeightFieldBuild build_heightfield(uint32_t count_x, uint32_t count_z, Vec3 spacing, std::span<const float> heights,
                                   std::span<const uint8_t> materials) {
  HeightFieldBuild out;
  auto fail = [&](std::string why) {
    out.field = HeightField{};
    out.error = std::move(why);
    return std::move(out);
  };
  if (count_x < 2 || count_z < 2 || count_x > kMaxHeightFieldSide || count_z > kMaxHeightFieldSide) {
    return fail("size " + std::to_string(count_x) + " x " + std::to_string(count_z) + ": each side must be in [2, " +
                std::to_string(kMaxHeightFieldSide) + "] samples");
  }
  const size_t n = size_t{count_x} * count_z;
  if (heights.size() != n) {
    return fail("height count " + std::to_string(heights.size()) + " is not " + std::to_string(count_x) + " x " +
                std::to_string(count_z));
  }
  const size_t cells = size_t{count_x - 1} * (count_z - 1);
  if (!materials.empty() && materials.size() != cells) {
    return fail("material count " + std::to_string(materials.size()) + " is neither 0 nor the cell count " +
                std::to_string(cells));
  }
  if (!(spacing.x >= 1.0e-3f && spacing.x <= 1.0e3f && spacing.z >= 1.0e-3f && spacing.z <= 1.0e3f)) {
    return fail("spacing: x and z must be in [1e-3, 1e3] m");
  }
  if (!(spacing.x * static_cast<float>(count_x - 1) <= kMaxMeshCoordinate &&
        spacing.z * static_cast<float>(count_z - 1) <= kMaxMeshCoordinate)) {
    return fail("the field is wider than 1e5 m");
  }
  float lo = std::numeric_limits<float>::infinity();
  float hi = -lo;
  for (size_t k = 0; k < n; ++k) {
    const float y = heights[k];
    if (std::isnan(y)) continue;  // a hole
    if (!(std::fabs(y) <= kMaxMeshCoordinate)) {
      return fail("height " + std::to_string(k) + " (sample " + std::to_string(k % count_x) + ", " +
                  std::to_string(k / count_x) + ") is infinite or beyond 1e5 m");
    }
    lo = std::min(lo, y);
    hi = std::max(hi, y);
  }
  if (!(hi >= lo)) return fail("every sample is a hole");
  if (!(hi - lo <= 1.0e4f)) return fail("heights span more than 1e4 m");
  HeightField& h = out.field;
  h.count_x = count_x;
  h.count_z = count_z;
  h.spacing = {spacing.x, 0.0f, spacing.z};
  h.offset = lo;
  h.scale = hi > lo ? (hi - lo) / 65534.0f : 0.0f;
  h.heights.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const float y = heights[k];
    if (std::isnan(y)) {
      h.heights[k] = kHeightFieldHole;
      continue;
    }
    const float q = h.scale > 0.0f ? std::nearbyint((y - lo) / h.scale) : 0.0f;
    h.heights[k] = static_cast<uint16_t>(std::clamp(q, 0.0f, 65534.0f));
  }
  h.materials.assign(materials.begin(), materials.end());
  if (std::all_of(h.materials.begin(), h.materials.end(), [](uint8_t m) { return m == 0; })) h.materials.clear();
  if (!finish(h)) return fail("no cell has four solid corners");
  return out;
}

std::string check_heightfield(HeightField& h) {
  if (h.count_x < 2 || h.count_z < 2 || h.count_x > kMaxHeightFieldSide || h.count_z > kMaxHeightFieldSide) {
    return "size out of range";
  }
  if (h.heights.size() != size_t{h.count_x} * h.count_z) return "height count is not count_x * count_z";
  if (!h.materials.empty() && h.materials.size() != size_t{h.count_x - 1} * (h.count_z - 1)) {
    return "material count is neither 0 nor the cell count";
  }
  if (!(h.spacing.x >= 1.0e-3f && h.spacing.x <= 1.0e3f && h.spacing.z >= 1.0e-3f && h.spacing.z <= 1.0e3f) ||
      h.spacing.y != 0.0f) {
    return "spacing out of range";
  }
  if (!(std::fabs(h.offset) <= kMaxMeshCoordinate) || !(h.scale >= 0.0f && h.scale * 65534.0f <= 1.0e4f)) {
    return "offset or scale out of range";
  }
  if (!(h.spacing.x * static_cast<float>(h.count_x - 1) <= kMaxMeshCoordinate &&
        h.spacing.z * static_cast<float>(h.count_z - 1) <= kMaxMeshCoordinate)) {
    return "the field is wider than 1e5 m";
  }
  if (!finish(h)) return "no cell has four solid corners";
  return {};
}

bool raycast_heightfield(const HeightField& h, Vec3 origin, Vec3 translation, float max_fraction, MeshRayHit& out) {
  if (!is_finite(origin) || !is_finite(translation) || !(max_fraction >= 0.0f)) return false;
  const float width = h.spacing.x * static_cast<float>(h.count_x - 1);
  const float depth = h.spacing.z * static_cast<float>(h.count_z - 1);
  // The part of the segment over the field's rectangle, [t0, t1].
  float t0 = 0.0f;
  float t1 = max_fraction;
  auto clip = [&](float o, float d, float lo, float hi) {
    if (d == 0.0f) return o >= lo && o <= hi;
    float a = (lo - o) / d;
    float b = (hi - o) / d;
    if (a > b) std::swap(a, b);
    t0 = std::max(t0, a);
    t1 = std::min(t1, b);
    return t0 <= t1;
  };
  if (!clip(origin.x, translation.x, 0.0f, width) || !clip(origin.z, translation.z, 0.0f, depth)) return false;
  const Vec3 start = origin + translation * t0;
  auto cell_of = [](float p, float spacing, uint32_t cells) {
    const float c = std::floor(p / spacing);
    return c <= 0.0f ? 0u : (c >= static_cast<float>(cells - 1) ? cells - 1 : static_cast<uint32_t>(c));
  };
  uint32_t i = cell_of(start.x, h.spacing.x, h.count_x - 1);
  uint32_t j = cell_of(start.z, h.spacing.z, h.count_z - 1);
  const int step_i = translation.x > 0.0f ? 1 : -1;
  const int step_j = translation.z > 0.0f ? 1 : -1;
  constexpr float kNever = std::numeric_limits<float>::infinity();
  // The fraction at which the segment crosses the next cell boundary on each axis.
  auto next_cross = [&](float o, float d, uint32_t c, int step, float spacing) {
    if (d == 0.0f) return kNever;
    const float boundary = spacing * static_cast<float>(step > 0 ? c + 1 : c);
    return (boundary - o) / d;
  };
  float cross_i = next_cross(origin.x, translation.x, i, step_i, h.spacing.x);
  float cross_j = next_cross(origin.z, translation.z, j, step_j, h.spacing.z);
  float best = max_fraction;
  bool hit = false;
  const uint64_t limit = uint64_t{h.count_x} + h.count_z;  // cells a segment can visit
  for (uint64_t visited = 0; visited <= limit; ++visited) {
    if (h.cell(i, j)) {
      for (uint32_t t = 0; t < 2; ++t) {
        Vec3 v[3];
        h.triangle_vertices(i, j, t, v);
        float f = 0.0f;
        if (ray_triangle(origin, translation, v, best, f) && (!hit || f < best)) {
          best = f;
          hit = true;
          out.fraction = f;
          out.triangle = 2 * (j * (h.count_x - 1) + i) + t;
          out.normal = normal_of(v[0], v[1], v[2]);
        }
      }
    }
    // Past the cell: stop once the segment has left the field or a hit lies before the exit.
    const float exit = std::min(cross_i, cross_j);
    if (exit > t1 || (hit && best <= exit)) break;
    if (cross_i <= cross_j) {
      if ((step_i < 0 && i == 0) || (step_i > 0 && i + 2 >= h.count_x)) break;
      i = static_cast<uint32_t>(static_cast<int64_t>(i) + step_i);
      cross_i = next_cross(origin.x, translation.x, i, step_i, h.spacing.x);
    } else {
      if ((step_j < 0 && j == 0) || (step_j > 0 && j + 2 >= h.count_z)) break;
      j = static_cast<uint32_t>(static_cast<int64_t>(j) + step_j);
      cross_j = next_cross(origin.z, translation.z, j, step_j, h.spacing.z);
    }
  }
  return hit;
}

}  // namespace impulse::physics
