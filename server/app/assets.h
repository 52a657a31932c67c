// The world's assets as the admin endpoint serves them (docs/PROTOCOL.md, "Assets"): a hull, mesh
// or heightfield body's snapshot entry names its asset id, and a client fetches the geometry here,
// out of band.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "server/physics/world.h"

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

/// XXH64 (seed 0) of a mesh's geometry: its vertices as little-endian binary32 x, y, z, then its
/// triangles as three little-endian u32 indices each, then one u8 material id per triangle
/// (none when all are 0) (PROTOCOL.md, "Assets").
uint64_t mesh_content_hash(const physics::TriangleMesh& mesh);

/// XXH64 (seed 0) of a heightfield: count_x and count_z as little-endian u32, spacing x and z,
/// offset and scale as binary32, every sample as a little-endian u16 (65535: a hole), then one u8
/// material id per cell (none when all are 0) (PROTOCOL.md, "Assets").
uint64_t heightfield_content_hash(const physics::HeightField& field);

/// Renders the documents of the world's assets: its hulls, meshes and heightfields, with the asset
/// ids World::asset_id gives them (hulls first, then meshes, then heightfields).
AssetDocuments render_asset_documents(const physics::World& world);

}  // namespace impulse::server
