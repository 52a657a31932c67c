// The --script of `impulse-client drive`: a timed list of controls, so a drive can run unattended
// (CI, a benchmark, a bug report) and the same drive can be repeated with prediction on and off.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "drive/car.h"

namespace impulse::drive {

/// Controls held for a time.
struct ScriptStep {
  Controls controls;
  double seconds = 0;  ///< (0, 3600]
};

/// Parses "THROTTLE STEER SECONDS; THROTTLE STEER SECONDS; ...": throttle and steer decimal
/// numbers in [-1, 1] (steer +1 is full left), seconds in (0, 3600]; at most 1000 steps and 24 h
/// in all; blank steps are skipped. Returns false with *error naming the step and what is wrong.
bool parse_script(std::string_view text, std::vector<ScriptStep>* steps, std::string* error);

/// The controls `elapsed_s` seconds into the script, and whether it is still running (false past
/// its end, with the controls released).
bool script_controls(const std::vector<ScriptStep>& steps, double elapsed_s, Controls* controls);

}  // namespace impulse::drive
