// Small helpers shared by the network benchmarks: waiting for one request's answer with a
// deadline, and the rotation angle between two orientations.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "impulse/client.h"
#include "shared/math.h"

namespace impulse::bench {

/// Polls `client` until the RequestResult of `request_id` arrives or `timeout` passes. Whatever
/// else arrives meanwhile (snapshots, events) is processed by the client and otherwise ignored.
/// @return the result; nullopt with *error saying why (timeout, server disconnect, not sent)
std::optional<RequestResult> await_result(Client& client, uint32_t request_id, std::chrono::milliseconds timeout,
                                          std::string* error);

/// Angle of the rotation taking `a` to `b` [deg], in [0, 180]: 4 atan2(|a - b|, |a + b|) with b's
/// sign chosen so a.b >= 0 (q and -q are one rotation). Computed in double, accurate near 0 where
/// the acos of the dot product is not. Inputs need not be exactly unit; they are normalised.
double rotation_angle_deg(Quat a, Quat b);

}  // namespace impulse::bench
