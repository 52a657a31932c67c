// impulse-client drive: a car on the demo scene, driven from the keyboard or a --script, with
// client prediction on (the default) or off, reporting how soon the drawn car answers the
// throttle and how far the prediction strays from the server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace impulse::drive {

struct DriveOptions {
  std::string host;
  uint16_t port = 7777;
  std::string name = "impulse-client drive";
  std::vector<uint8_t> token;
  bool predict = true;
  std::string script;   ///< "THROTTLE STEER SECONDS; ..." (drive/script.h); empty: the keyboard
  double settle_s = 3;  ///< after the script: how long to wait for the car to come to rest [s]
  bool keep = false;    ///< leave the car in the world
};

/// Runs the drive; returns the process exit code (0 done, 1 no server or no car, 2 bad options).
int run_drive(const DriveOptions& options);

}  // namespace impulse::drive
