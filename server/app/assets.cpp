// Asset documents for the admin endpoint; see assets.h.
#include "server/app/assets.h"

#include <xxhash.h>

#include <bit>
#include <cmath>

#include <fmt/format.h>

namespace impulse::server {

namespace {

void append_le32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A float as JSON: shortest round-trip form (fmt's default), finite by check_hull.
std::string num(float v) { return fmt::format("{}", v); }

}  // namespace

uint64_t hull_content_hash(const physics::ConvexHull& hull) {
  std::vector<uint8_t> bytes;
  bytes.reserve(12 * hull.vertices.size() + hull.faces.size() + hull.face_vertices.size());
  for (const Vec3& v : hull.vertices) {
    append_le32(bytes, std::bit_cast<uint32_t>(v.x));
    append_le32(bytes, std::bit_cast<uint32_t>(v.y));
    append_le32(bytes, std::bit_cast<uint32_t>(v.z));
  }
  for (const physics::HullFace& f : hull.faces) {
    bytes.push_back(static_cast<uint8_t>(f.count));
    for (int i = 0; i < f.count; ++i) bytes.push_back(hull.face_vertices[f.first + i]);
  }
  return XXH64(bytes.data(), bytes.size(), 0);
}

uint64_t mesh_content_hash(const physics::TriangleMesh& mesh) {
  std::vector<uint8_t> bytes;
  bytes.reserve(12 * mesh.vertices.size() + 4 * mesh.indices.size() + mesh.materials.size());
  for (const Vec3& v : mesh.vertices) {
    append_le32(bytes, std::bit_cast<uint32_t>(v.x));
    append_le32(bytes, std::bit_cast<uint32_t>(v.y));
    append_le32(bytes, std::bit_cast<uint32_t>(v.z));
  }
  for (const uint32_t i : mesh.indices) append_le32(bytes, i);
  bytes.insert(bytes.end(), mesh.materials.begin(), mesh.materials.end());
  return XXH64(bytes.data(), bytes.size(), 0);
}

uint64_t heightfield_content_hash(const physics::HeightField& field) {
  std::vector<uint8_t> bytes;
  bytes.reserve(24 + 2 * field.heights.size() + field.materials.size());
  append_le32(bytes, field.count_x);
  append_le32(bytes, field.count_z);
  for (const float f : {field.spacing.x, field.spacing.z, field.offset, field.scale}) {
    append_le32(bytes, std::bit_cast<uint32_t>(f));
  }
  for (const uint16_t q : field.heights) {
    bytes.push_back(static_cast<uint8_t>(q));
    bytes.push_back(static_cast<uint8_t>(q >> 8));
  }
  bytes.insert(bytes.end(), field.materials.begin(), field.materials.end());
  return XXH64(bytes.data(), bytes.size(), 0);
}

AssetDocuments render_asset_documents(const physics::World& world) {
  const auto hulls = world.hulls();
  AssetDocuments docs;
  docs.list.push_back('[');  // not = "[": GCC 12 warns -Wrestrict on that (a false positive)
  for (size_t id = 0; id < hulls.size(); ++id) {
    const physics::ConvexHull& h = *hulls[id];
    const std::string hash = fmt::format("{:016x}", hull_content_hash(h));
    Vec3 half{};
    for (const Vec3& v : h.vertices) half = max(half, abs(v));
    docs.list += fmt::format("{}{{\"id\":{},\"kind\":\"hull\",\"hash\":\"{}\",\"vertices\":{},\"faces\":{},\"half_extents\":[{},{},{}]}}",
                             id ? "," : "", id, hash, h.vertices.size(), h.faces.size(), num(half.x), num(half.y),
                             num(half.z));
    std::string doc = fmt::format("{{\"id\":{},\"kind\":\"hull\",\"hash\":\"{}\",\"vertices\":[", id, hash);
    for (size_t i = 0; i < h.vertices.size(); ++i) {
      doc += fmt::format("{}[{},{},{}]", i ? "," : "", num(h.vertices[i].x), num(h.vertices[i].y), num(h.vertices[i].z));
    }
    doc += "],\"faces\":[";
    for (size_t f = 0; f < h.faces.size(); ++f) {
      doc += f ? ",[" : "[";
      for (int i = 0; i < h.faces[f].count; ++i) doc += fmt::format("{}{}", i ? "," : "", h.face_vertices[h.faces[f].first + i]);
      doc += "]";
    }
    // Where the principal frame sits in the frame of the scene's points, for a client that draws
    // its own model: x_model = origin + rotate(rotation, x_hull).
    doc += fmt::format("],\"model_frame\":{{\"origin\":[{},{},{}],\"rotation\":[{},{},{},{}]}}}}\n", num(h.origin.x),
                       num(h.origin.y), num(h.origin.z), num(h.rotation.x), num(h.rotation.y), num(h.rotation.z),
                       num(h.rotation.w));
    docs.assets.push_back(std::move(doc));
  }
  // A list of numbers as a JSON array body.
  auto join = [](const auto& values, auto&& format_one) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out.push_back(',');
      out += format_one(values[i]);
    }
    return out;
  };
  auto integer = [](auto v) { return fmt::format("{}", v); };
  size_t id = hulls.size();
  for (const auto& mesh_ptr : world.meshes()) {
    const physics::TriangleMesh& m = *mesh_ptr;
    const std::string hash = fmt::format("{:016x}", mesh_content_hash(m));
    docs.list += fmt::format(
        "{}{{\"id\":{},\"kind\":\"mesh\",\"hash\":\"{}\",\"vertices\":{},\"triangles\":{},\"bounds\":[[{},{},{}],[{},{},{}]]}}",
        id ? "," : "", id, hash, m.vertices.size(), m.triangle_count(), num(m.bounds.min.x), num(m.bounds.min.y),
        num(m.bounds.min.z), num(m.bounds.max.x), num(m.bounds.max.y), num(m.bounds.max.z));
    std::string doc = fmt::format("{{\"id\":{},\"kind\":\"mesh\",\"hash\":\"{}\",\"vertices\":[", id, hash);
    doc += join(m.vertices, [](const Vec3& v) { return fmt::format("{},{},{}", num(v.x), num(v.y), num(v.z)); });
    doc += "],\"triangles\":[" + join(m.indices, integer) + "],\"materials\":[" + join(m.materials, integer) + "]}\n";
    docs.assets.push_back(std::move(doc));
    ++id;
  }
  for (const auto& field_ptr : world.heightfields()) {
    const physics::HeightField& f = *field_ptr;
    const std::string hash = fmt::format("{:016x}", heightfield_content_hash(f));
    docs.list += fmt::format(
        "{}{{\"id\":{},\"kind\":\"heightfield\",\"hash\":\"{}\",\"samples\":[{},{}],\"bounds\":[[{},{},{}],[{},{},{}]]}}",
        id ? "," : "", id, hash, f.count_x, f.count_z, num(f.bounds.min.x), num(f.bounds.min.y), num(f.bounds.min.z),
        num(f.bounds.max.x), num(f.bounds.max.y), num(f.bounds.max.z));
    std::string doc = fmt::format(
        "{{\"id\":{},\"kind\":\"heightfield\",\"hash\":\"{}\",\"samples\":[{},{}],\"spacing\":[{},{}],\"offset\":{},"
        "\"scale\":{},\"heights\":[",
        id, hash, f.count_x, f.count_z, num(f.spacing.x), num(f.spacing.z), num(f.offset), num(f.scale));
    doc += join(f.heights, integer) + "],\"materials\":[" + join(f.materials, integer) + "]}\n";
    docs.assets.push_back(std::move(doc));
    ++id;
  }
  docs.list += "]\n";
  return docs;
}

}  // namespace impulse::server
