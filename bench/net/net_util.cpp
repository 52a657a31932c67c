// Helpers of the network benchmarks (bench/net/net_util.h).
#include "bench/net/net_util.h"

#include <cmath>

namespace impulse::bench {

std::optional<RequestResult> await_result(Client& client, uint32_t request_id, std::chrono::milliseconds timeout,
                                          std::string* error) {
  if (request_id == 0) {
    if (error) *error = "the request was not sent (the client is not connected)";
    return std::nullopt;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const PollResult& r = client.poll(std::chrono::milliseconds{2});
    for (const RequestResult& result : r.results) {
      if (result.request_id == request_id) return result;
    }
    if (r.server_disconnected) {
      if (error) *error = "the server closed the session: " + r.disconnect_reason;
      return std::nullopt;
    }
  }
  if (error) *error = "no answer to request " + std::to_string(request_id) + " within " + std::to_string(timeout.count()) + " ms";
  return std::nullopt;
}

double rotation_angle_deg(Quat a, Quat b) {
  double qa[4] = {a.x, a.y, a.z, a.w};
  double qb[4] = {b.x, b.y, b.z, b.w};
  double na = 0, nb = 0, dot = 0;
  for (int i = 0; i < 4; ++i) {
    na += qa[i] * qa[i];
    nb += qb[i] * qb[i];
    dot += qa[i] * qb[i];
  }
  if (!(na > 0) || !(nb > 0)) return 180.0;  // a degenerate input: report the worst, never NaN
  na = std::sqrt(na);
  nb = std::sqrt(nb);
  const double sign = dot < 0 ? -1.0 : 1.0;
  double diff = 0, sum = 0;
  for (int i = 0; i < 4; ++i) {
    const double u = qa[i] / na, v = sign * qb[i] / nb;
    diff += (u - v) * (u - v);
    sum += (u + v) * (u + v);
  }
  return 4.0 * std::atan2(std::sqrt(diff), std::sqrt(sum)) * (180.0 / 3.14159265358979323846);
}

}  // namespace impulse::bench
