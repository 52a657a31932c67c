// Convex hull construction (Qhull), mass properties and principal axes; see convex_hull.h.
#include "server/physics/convex_hull.h"

#include "server/physics/types.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

extern "C" {
#include <libqhull_r/qhull_ra.h>
}

namespace impulse::physics {

namespace {

constexpr double kMaxCoordinate = 1.0e4;   // [m]: far beyond any body (WorldSettings::max_extent)
constexpr double kMinVolume = 1.0e-9;      // [m^3]: a 1 mm cube
constexpr float kMinInnerRadius = 5.0e-4f; // [m]: half of kMinExtent; thinner is a sheet, not a solid

using Mat3d = std::array<std::array<double, 3>, 3>;
struct Vec3d {
  double x, y, z;
};
Vec3d sub(Vec3d a, Vec3d b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
double dotd(Vec3d a, Vec3d b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
Vec3d crossd(Vec3d a, Vec3d b) { return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x}; }
double comp(Vec3d v, int i) { return i == 0 ? v.x : (i == 1 ? v.y : v.z); }

/// The faces of the hull of `points` as index loops, counter-clockwise about the outward normal,
/// from Qhull; or an error. Options: "Qt" is not given, so coplanar facets come merged into
/// polygons (Qhull's default pre-merge, C-0, merges only what precision requires). No angle merge
/// ("A-..."): a face merged across a small angle is not planar, and its plane then cuts off
/// vertices of the hull, which the separating axis test would read as a gap.
std::string run_qhull(std::span<const Vec3> points, std::vector<std::vector<int>>& loops, std::vector<Vec3d>& normals) {
  std::vector<coordT> coords(points.size() * 3);
  for (size_t i = 0; i < points.size(); ++i) {
    coords[3 * i] = points[i].x;
    coords[3 * i + 1] = points[i].y;
    coords[3 * i + 2] = points[i].z;
  }
  char* err_text = nullptr;
  size_t err_size = 0;
  FILE* err = open_memstream(&err_text, &err_size);  // Qhull's messages, kept out of the logs
  qhT qh_storage;
  qhT* qh = &qh_storage;
  qh_zero(qh, err);
  char options[] = "qhull";
  const int exit_code = qh_new_qhull(qh, 3, static_cast<int>(points.size()), coords.data(), False, options,
                                     nullptr, err);
  std::string error;
  if (exit_code != 0) {
    error = "points: degenerate (coplanar, collinear or coincident): no solid hull";
  } else {
    facetT* facet;
    FORALLfacets {
      setT* vertices = qh_facet3vertex(qh, facet);
      std::vector<int> loop;
      vertexT* vertex;
      vertexT** vertexp;
      FOREACHvertex_(vertices) { loop.push_back(qh_pointid(qh, vertex->point)); }
      qh_settempfree(qh, &vertices);
      loops.push_back(std::move(loop));
      normals.push_back({facet->normal[0], facet->normal[1], facet->normal[2]});
    }
  }
  qh_freeqhull(qh, !qh_ALL);
  int curlong = 0;
  int totlong = 0;
  qh_memfreeshort(qh, &curlong, &totlong);
  std::fclose(err);
  std::free(err_text);
  return error;
}

/// Cyclic Jacobi eigen-decomposition of a symmetric 3x3 matrix: a = V diag(d) V^T, V's columns
/// the unit eigenvectors. A fixed sweep order and a bounded number of sweeps keep it deterministic.
void jacobi_eigen(Mat3d a, Vec3d& d, Mat3d& v) {
  v = {{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  for (int sweep = 0; sweep < 32; ++sweep) {
    const double off = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2];
    const double diag = a[0][0] * a[0][0] + a[1][1] * a[1][1] + a[2][2] * a[2][2];
    if (off <= 1.0e-30 * diag) break;
    constexpr int kPairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
    for (const auto& pq : kPairs) {
      const int p = pq[0];
      const int q = pq[1];
      if (a[p][q] == 0.0) continue;
      // Golub and Van Loan, Algorithm 8.5.1 (the symmetric Schur decomposition).
      const double tau = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
      const double t = (tau >= 0 ? 1.0 : -1.0) / (std::fabs(tau) + std::sqrt(1.0 + tau * tau));
      const double c = 1.0 / std::sqrt(1.0 + t * t);
      const double s = t * c;
      for (int k = 0; k < 3; ++k) {  // a = J^T a J
        const double akp = a[k][p];
        const double akq = a[k][q];
        a[k][p] = c * akp - s * akq;
        a[k][q] = s * akp + c * akq;
      }
      for (int k = 0; k < 3; ++k) {
        const double apk = a[p][k];
        const double aqk = a[q][k];
        a[p][k] = c * apk - s * aqk;
        a[q][k] = s * apk + c * aqk;
      }
      for (int k = 0; k < 3; ++k) {  // v = v J
        const double vkp = v[k][p];
        const double vkq = v[k][q];
        v[k][p] = c * vkp - s * vkq;
        v[k][q] = s * vkp + c * vkq;
      }
    }
  }
  d = {a[0][0], a[1][1], a[2][2]};
}

/// A unit quaternion from a rotation matrix with columns c0, c1, c2 (Shepperd, "Quaternion from
/// rotation matrix", J. Guidance and Control 1(3), 1978: the largest of the four candidates).
Quat quat_from_columns(const Mat3d& m) {
  const double tr = m[0][0] + m[1][1] + m[2][2];
  double x, y, z, w;
  if (tr >= m[0][0] && tr >= m[1][1] && tr >= m[2][2]) {
    const double s = 2.0 * std::sqrt(1.0 + tr);
    w = 0.25 * s;
    x = (m[2][1] - m[1][2]) / s;
    y = (m[0][2] - m[2][0]) / s;
    z = (m[1][0] - m[0][1]) / s;
  } else if (m[0][0] >= m[1][1] && m[0][0] >= m[2][2]) {
    const double s = 2.0 * std::sqrt(1.0 + m[0][0] - m[1][1] - m[2][2]);
    w = (m[2][1] - m[1][2]) / s;
    x = 0.25 * s;
    y = (m[0][1] + m[1][0]) / s;
    z = (m[0][2] + m[2][0]) / s;
  } else if (m[1][1] >= m[2][2]) {
    const double s = 2.0 * std::sqrt(1.0 + m[1][1] - m[0][0] - m[2][2]);
    w = (m[0][2] - m[2][0]) / s;
    x = (m[0][1] + m[1][0]) / s;
    y = 0.25 * s;
    z = (m[1][2] + m[2][1]) / s;
  } else {
    const double s = 2.0 * std::sqrt(1.0 + m[2][2] - m[0][0] - m[1][1]);
    w = (m[1][0] - m[0][1]) / s;
    x = (m[0][2] + m[2][0]) / s;
    y = (m[1][2] + m[2][1]) / s;
    z = 0.25 * s;
  }
  return normalize(Quat{static_cast<float>(x), static_cast<float>(y), static_cast<float>(z), static_cast<float>(w)});
}

/// Newell's normal of a polygon (unnormalised; robust for non-planar loops).
Vec3 newell_normal(const std::vector<Vec3>& v, const uint8_t* loop, int count) {
  Vec3 n{};
  for (int i = 0; i < count; ++i) {
    const Vec3 a = v[loop[i]];
    const Vec3 b = v[loop[(i + 1) % count]];
    n.x += (a.y - b.y) * (a.z + b.z);
    n.y += (a.z - b.z) * (a.x + b.x);
    n.z += (a.x - b.x) * (a.y + b.y);
  }
  return n;
}

}  // namespace

bool ConvexHull::operator==(const ConvexHull& o) const {
  auto same_vec = [](Vec3 a, Vec3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; };
  if (vertices.size() != o.vertices.size() || planes.size() != o.planes.size() || faces.size() != o.faces.size() ||
      face_vertices != o.face_vertices || edges.size() != o.edges.size()) {
    return false;
  }
  for (size_t i = 0; i < vertices.size(); ++i) {
    if (!same_vec(vertices[i], o.vertices[i])) return false;
  }
  for (size_t i = 0; i < planes.size(); ++i) {
    if (!same_vec(planes[i].normal, o.planes[i].normal) || planes[i].offset != o.planes[i].offset) return false;
  }
  for (size_t i = 0; i < faces.size(); ++i) {
    if (faces[i].first != o.faces[i].first || faces[i].count != o.faces[i].count) return false;
  }
  for (size_t i = 0; i < edges.size(); ++i) {
    const HullEdge& a = edges[i];
    const HullEdge& b = o.edges[i];
    if (a.v0 != b.v0 || a.v1 != b.v1 || a.f0 != b.f0 || a.f1 != b.f1) return false;
  }
  return volume == o.volume && same_vec(unit_inertia, o.unit_inertia) && radius == o.radius &&
         inner_radius == o.inner_radius && same_vec(origin, o.origin) && rotation.x == o.rotation.x &&
         rotation.y == o.rotation.y && rotation.z == o.rotation.z && rotation.w == o.rotation.w;
}

HullBuild build_convex_hull(std::span<const Vec3> points) {
  HullBuild out;
  if (points.size() < 4) {
    out.error = "points: a hull needs at least 4 points, got " + std::to_string(points.size());
    return out;
  }
  if (points.size() > kMaxHullInputPoints) {
    out.error = "points: at most " + std::to_string(kMaxHullInputPoints) + " points, got " + std::to_string(points.size());
    return out;
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const Vec3 p = points[i];
    if (!is_finite(p) || std::fabs(p.x) > kMaxCoordinate || std::fabs(p.y) > kMaxCoordinate ||
        std::fabs(p.z) > kMaxCoordinate) {
      out.error = "points[" + std::to_string(i) + "]: not finite or beyond 1e4 m";
      return out;
    }
  }
  std::vector<std::vector<int>> loops;
  std::vector<Vec3d> qnormals;
  if (std::string e = run_qhull(points, loops, qnormals); !e.empty()) {
    out.error = std::move(e);
    return out;
  }

  // Canonical vertex order: by input index (Qhull's facet order is deterministic too, but the
  // face list is sorted below so the hull does not depend on it).
  std::map<int, int> remap;
  for (const auto& loop : loops) {
    for (const int id : loop) remap.emplace(id, 0);
  }
  if (remap.size() > kMaxHullVertices) {
    out.error = "points: the hull has " + std::to_string(remap.size()) + " vertices, more than " +
                std::to_string(kMaxHullVertices) + "; simplify the mesh";
    return out;
  }
  std::vector<Vec3d> verts;
  for (auto& [id, index] : remap) {
    index = static_cast<int>(verts.size());
    verts.push_back({points[static_cast<size_t>(id)].x, points[static_cast<size_t>(id)].y,
                     points[static_cast<size_t>(id)].z});
  }
  // Orient each loop counter-clockwise about Qhull's outward normal, and start it at its lowest
  // vertex index; then sort the faces by their loops.
  for (size_t f = 0; f < loops.size(); ++f) {
    auto& loop = loops[f];
    for (int& id : loop) id = remap[id];
    Vec3d n{0, 0, 0};
    for (size_t i = 0; i < loop.size(); ++i) {
      const Vec3d a = verts[static_cast<size_t>(loop[i])];
      const Vec3d b = verts[static_cast<size_t>(loop[(i + 1) % loop.size()])];
      n.x += (a.y - b.y) * (a.z + b.z);
      n.y += (a.z - b.z) * (a.x + b.x);
      n.z += (a.x - b.x) * (a.y + b.y);
    }
    if (dotd(n, qnormals[f]) < 0) std::reverse(loop.begin(), loop.end());
    std::rotate(loop.begin(), std::min_element(loop.begin(), loop.end()), loop.end());
  }
  std::sort(loops.begin(), loops.end());

  // Mass properties at unit density: signed tetrahedra from the vertices' mean to each face
  // triangle (fan), their covariance summed about the mean (Blow and Binstock 2004).
  Vec3d mean{0, 0, 0};
  for (const Vec3d& v : verts) mean = {mean.x + v.x, mean.y + v.y, mean.z + v.z};
  const double inv_n = 1.0 / static_cast<double>(verts.size());
  mean = {mean.x * inv_n, mean.y * inv_n, mean.z * inv_n};
  double volume = 0;
  Vec3d moment{0, 0, 0};
  Mat3d cov{};
  for (const auto& loop : loops) {
    const Vec3d a = sub(verts[static_cast<size_t>(loop[0])], mean);
    for (size_t i = 1; i + 1 < loop.size(); ++i) {
      const Vec3d b = sub(verts[static_cast<size_t>(loop[i])], mean);
      const Vec3d c = sub(verts[static_cast<size_t>(loop[i + 1])], mean);
      const double det = dotd(a, crossd(b, c));  // 6 x the tetrahedron (0, a, b, c)'s signed volume
      volume += det / 6.0;
      const Vec3d s{a.x + b.x + c.x, a.y + b.y + c.y, a.z + b.z + c.z};
      moment = {moment.x + det / 24.0 * s.x, moment.y + det / 24.0 * s.y, moment.z + det / 24.0 * s.z};
      // Covariance of the tetrahedron: det / 120 (sum_i v_i v_i^T + s s^T), the apex at 0.
      for (int r = 0; r < 3; ++r) {
        for (int k = 0; k < 3; ++k) {
          const double vv = comp(a, r) * comp(a, k) + comp(b, r) * comp(b, k) + comp(c, r) * comp(c, k);
          cov[r][k] += det / 120.0 * (vv + comp(s, r) * comp(s, k));
        }
      }
    }
  }
  if (!(volume >= kMinVolume)) {
    out.error = "points: the hull is flat (volume " + std::to_string(volume) + " m^3, under 1e-9)";
    return out;
  }
  const Vec3d centroid_rel{moment.x / volume, moment.y / volume, moment.z / volume};
  // Covariance about the centre of mass, then the inertia tensor I = tr(C) Id - C.
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 3; ++k) cov[r][k] -= volume * comp(centroid_rel, r) * comp(centroid_rel, k);
  }
  const double trace = cov[0][0] + cov[1][1] + cov[2][2];
  Mat3d inertia{};
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 3; ++k) inertia[r][k] = (r == k ? trace : 0.0) - cov[r][k];
  }
  Vec3d moments{};
  Mat3d axes{};
  jacobi_eigen(inertia, moments, axes);
  // A right-handed frame: flip the third axis if needed.
  const Vec3d ax0{axes[0][0], axes[1][0], axes[2][0]};
  const Vec3d ax1{axes[0][1], axes[1][1], axes[2][1]};
  const Vec3d ax2{axes[0][2], axes[1][2], axes[2][2]};
  if (dotd(crossd(ax0, ax1), ax2) < 0) {
    for (int r = 0; r < 3; ++r) axes[r][2] = -axes[r][2];
  }
  const Vec3d centroid{mean.x + centroid_rel.x, mean.y + centroid_rel.y, mean.z + centroid_rel.z};

  ConvexHull& h = out.hull;
  h.origin = Vec3{static_cast<float>(centroid.x), static_cast<float>(centroid.y), static_cast<float>(centroid.z)};
  h.rotation = quat_from_columns(axes);
  h.volume = static_cast<float>(volume);
  h.unit_inertia = Vec3{static_cast<float>(moments.x / volume), static_cast<float>(moments.y / volume),
                        static_cast<float>(moments.z / volume)};
  // Vertices in the principal frame: x_hull = axes^T (x - centroid).
  for (const Vec3d& v : verts) {
    const Vec3d d = sub(v, centroid);
    h.vertices.push_back(Vec3{static_cast<float>(d.x * axes[0][0] + d.y * axes[1][0] + d.z * axes[2][0]),
                              static_cast<float>(d.x * axes[0][1] + d.y * axes[1][1] + d.z * axes[2][1]),
                              static_cast<float>(d.x * axes[0][2] + d.y * axes[1][2] + d.z * axes[2][2])});
  }
  for (const auto& loop : loops) {
    const HullFace face{static_cast<uint16_t>(h.face_vertices.size()), static_cast<uint16_t>(loop.size())};
    for (const int id : loop) h.face_vertices.push_back(static_cast<uint8_t>(id));
    const Vec3 n = normalize_or(newell_normal(h.vertices, &h.face_vertices[face.first], face.count), Vec3{0, 1, 0});
    // The supporting plane with this normal: through the hull's outermost vertex along it, so
    // every vertex is behind every plane and a face axis never reports a gap that is not there.
    float offset = -1.0e30f;
    for (const Vec3& v : h.vertices) offset = std::max(offset, dot(n, v));
    h.faces.push_back(face);
    h.planes.push_back(HullPlane{n, offset});
  }
  // Edges: each undirected vertex pair once, in order of (low, high); f0 walks v0 -> v1.
  std::map<std::pair<int, int>, HullEdge> edges;
  for (size_t f = 0; f < h.faces.size(); ++f) {
    const HullFace face = h.faces[f];
    for (int i = 0; i < face.count; ++i) {
      const int a = h.face_vertices[face.first + i];
      const int b = h.face_vertices[face.first + (i + 1) % face.count];
      const auto key = std::make_pair(std::min(a, b), std::max(a, b));
      auto [it, fresh] = edges.try_emplace(key, HullEdge{static_cast<uint8_t>(key.first), static_cast<uint8_t>(key.second), 255, 255});
      if (a == key.first) {
        it->second.f0 = static_cast<uint8_t>(f);
      } else {
        it->second.f1 = static_cast<uint8_t>(f);
      }
      (void)fresh;
    }
  }
  for (const auto& [key, e] : edges) h.edges.push_back(e);
  h.radius = 0;
  for (const Vec3& v : h.vertices) h.radius = std::max(h.radius, length(v));
  h.inner_radius = 1.0e30f;
  for (const HullPlane& p : h.planes) h.inner_radius = std::min(h.inner_radius, p.offset);
  if (!(h.inner_radius >= kMinInnerRadius)) {
    out.error = "points: the hull is too thin (its centre is " + std::to_string(h.inner_radius) +
                " m from a face, under 0.5 mm)";
    out.hull = ConvexHull{};
    return out;
  }
  if (std::string problem = check_hull(h); !problem.empty()) {
    out.error = "points: the hull is degenerate (" + problem + ")";
    out.hull = ConvexHull{};
  }
  return out;
}

Shape make_hull(const ConvexHull& hull) {
  Shape s;
  s.kind = ShapeKind::Hull;
  s.radius = hull.radius;
  Vec3 h{};
  for (const Vec3& v : hull.vertices) h = max(h, abs(v));
  s.half_extents = h;
  s.half_height = 0.0f;
  s.hull = &hull;
  s.data_id = hull.id;
  return s;
}

uint32_t hull_support_index(const HullView& hull, Vec3 d) {
  uint32_t best = 0;
  float best_dot = dot(hull.vertices[0], d);
  for (uint32_t i = 1; i < hull.vertex_count; ++i) {
    const float p = dot(hull.vertices[i], d);
    if (p > best_dot) {
      best_dot = p;
      best = i;
    }
  }
  return best;
}

Vec3 hull_support(const HullView& hull, Vec3 d) { return hull.vertices[hull_support_index(hull, d)]; }

std::string check_hull(const ConvexHull& h) {
  const size_t nv = h.vertices.size();
  if (nv < 4 || nv > kMaxHullVertices) return "vertices: between 4 and 64";
  if (h.faces.size() < 4 || h.faces.size() != h.planes.size() || h.faces.size() > 2 * nv) return "faces: count";
  if (h.edges.size() != nv + h.faces.size() - 2) return "edges: count (Euler's formula V - E + F = 2)";
  for (const Vec3& v : h.vertices) {
    if (!is_finite(v)) return "vertices: not finite";
  }
  if (!(std::isfinite(h.radius) && h.radius > 0 && std::isfinite(h.inner_radius) && h.inner_radius > 0 &&
        h.inner_radius <= h.radius)) {
    return "radius: not finite or inner radius not in (0, radius]";
  }
  if (!(std::isfinite(h.volume) && h.volume > 0) || !is_finite(h.unit_inertia) || !(h.unit_inertia.x > 0) ||
      !(h.unit_inertia.y > 0) || !(h.unit_inertia.z > 0)) {
    return "mass properties: not finite and positive";
  }
  if (!is_finite(h.origin) || !is_finite(h.rotation)) return "frame: not finite";
  const float tol = 1.0e-3f + 1.0e-4f * h.radius;
  size_t loop_total = 0;
  for (size_t f = 0; f < h.faces.size(); ++f) {
    const HullFace face = h.faces[f];
    if (face.count < 3 || face.first != loop_total || face.first + face.count > h.face_vertices.size()) {
      return "faces: loops not contiguous or under 3 vertices";
    }
    loop_total += face.count;
    const HullPlane& p = h.planes[f];
    if (!is_finite(p.normal) || !std::isfinite(p.offset) || std::fabs(length_squared(p.normal) - 1.0f) > 1.0e-4f) {
      return "planes: normal not unit";
    }
    for (int i = 0; i < face.count; ++i) {
      if (h.face_vertices[face.first + i] >= nv) return "faces: vertex index out of range";
    }
    for (const Vec3& v : h.vertices) {
      if (dot(p.normal, v) - p.offset > tol) return "planes: a vertex in front of a face";
    }
  }
  if (loop_total != h.face_vertices.size()) return "faces: vertex list length";
  for (const HullEdge& e : h.edges) {
    if (e.v0 >= nv || e.v1 >= nv || e.v0 == e.v1 || e.f0 >= h.faces.size() || e.f1 >= h.faces.size() || e.f0 == e.f1) {
      return "edges: index out of range";
    }
  }
  return {};
}

}  // namespace impulse::physics
