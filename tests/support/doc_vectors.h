// Test vectors written in docs/PROTOCOL.md, read back so the document cannot drift from the code.
#pragma once

#include <fstream>
#include <map>
#include <string>
#include <string_view>

namespace impulse::test {

/// The "    name: value" lines (indented four spaces) between `<!-- MARKER:begin -->` and
/// `<!-- MARKER:end -->` of docs/PROTOCOL.md, by name; empty when the file or markers are missing.
/// Needs IMPULSE_SOURCE_DIR (the unit tests' compile definition).
inline std::map<std::string, std::string> protocol_doc_vectors(std::string_view marker) {
  // Appended rather than `std::string(dir) + "..."`: GCC 12 at -O1 warns falsely (-Warray-bounds)
  // on that temporary's inlined copy.
  std::string path = IMPULSE_SOURCE_DIR;
  path.append("/docs/PROTOCOL.md");
  std::ifstream file(path);
  const std::string begin = "<!-- " + std::string(marker) + ":begin -->";
  const std::string end = "<!-- " + std::string(marker) + ":end -->";
  std::map<std::string, std::string> out;
  std::string line;
  bool inside = false;
  while (std::getline(file, line)) {
    if (line.find(begin) != std::string::npos) inside = true;
    if (line.find(end) != std::string::npos) break;
    if (!inside) continue;
    const size_t colon = line.find(':');
    if (line.rfind("    ", 0) != 0 || colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    out[line.substr(4, colon - 4)] = value;
  }
  return out;
}

}  // namespace impulse::test
