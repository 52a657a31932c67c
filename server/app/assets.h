// The world's assets as the admin endpoint serves them (docs/PROTOCOL.md, "Assets"): a hull body's
// snapshot entry names its asset id, and a client fetches the geometry here, out of band.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "server/physics/convex_hull.h"

namespace impulse::server {

/// The JSON documents of GET /assets and GET /assets/<id>, rendered once when the admin endpoint
/// starts: hulls come only from the scene, so the table does not change while the server runs.
struct AssetDocuments {
  std::string list;                 ///< GET /assets: a JSON array, one summary per asset
  std::vector<std::string> assets;  ///< GET /assets/<id>: assets[id]
};

/// XXH64 (seed 0) of a hull's geometry: its vertices as little-endian binary32 x, y, z in order,
/// then each face as a u8 vertex count and its u8 indices (PROTOCOL.md, "Assets").
uint64_t hull_content_hash(const physics::ConvexHull& hull);

/// Renders the documents of `hulls` (World::hulls(): the asset id is the index).
AssetDocuments render_asset_documents(std::span<const std::shared_ptr<const physics::ConvexHull>> hulls);

}  // namespace impulse::server
