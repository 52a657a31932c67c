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

AssetDocuments render_asset_documents(std::span<const std::shared_ptr<const physics::ConvexHull>> hulls) {
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
  docs.list += "]\n";
  return docs;
}

}  // namespace impulse::server
