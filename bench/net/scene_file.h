// Scene files for the in-process servers of the network benchmarks: a server::Scene written as
// the JSON of schemas/scene.fbs into a temporary file, so the unmodified server loads it through
// its --scene FILE path (config.scene) exactly as it would load a user's scene.
#pragma once

#include <string>

#include "server/app/scene.h"

namespace impulse::bench {

/// The JSON text (schemas/scene.fbs) of `scene`: name, gravity and every body with its name.
/// Floats are written with enough digits to read back bit-exactly; an orientation other than
/// the identity is written as an axis-angle rotation (exact to float rounding).
std::string scene_to_json(const server::Scene& scene);

/// A scene written to a file in the system's temporary directory, removed on destruction.
class TempSceneFile {
 public:
  TempSceneFile() = default;
  ~TempSceneFile();
  TempSceneFile(const TempSceneFile&) = delete;
  TempSceneFile& operator=(const TempSceneFile&) = delete;

  /// Writes scene_to_json(scene) to "<tmp>/impulse-bench-<tag>-<pid>.json".
  /// @return false with *error naming the path and the cause when it cannot be written
  bool write(const server::Scene& scene, const std::string& tag, std::string* error);
  /// The file's path; empty before a successful write().
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace impulse::bench
