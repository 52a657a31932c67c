// The line every Impulse binary prints for --version: program, version, the git revision it was
// configured from, and the protocol it speaks.
#pragma once

#include <string>
#include <string_view>

#include "impulse/version.h"
#include "shared/wire/codec.h"

namespace impulse {

/// "impulse-server 0.1.0 (git 9f33621, protocol 10)".
inline std::string version_line(std::string_view program) {
  return std::string(program) + " " + IMPULSE_VERSION + " (git " + IMPULSE_GIT_DESCRIBE + ", protocol " +
         std::to_string(wire::kProtocolVersion) + ")";
}

}  // namespace impulse
