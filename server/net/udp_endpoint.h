// The server's UDP socket: binding with actionable errors, and sending an Outbox. Asio's
// error_code overloads only: nothing here throws.
#pragma once

#include <cstdint>
#include <string>

#include <asio/ip/udp.hpp>

#include "server/net/outbox.h"

namespace impulse::server {

/// Opens `socket` for the address family of `bind`, binds it to bind:port and makes it
/// non-blocking. On failure returns false and sets *error to a message that says what to do,
/// e.g. "UDP port 7777 on 0.0.0.0 is in use: pick another with --port, or stop the other server".
bool open_udp_socket(asio::ip::udp::socket& socket, const std::string& bind, uint16_t port, std::string* error);

/// Totals of one send_outbox call.
struct SendTotals {
  uint64_t datagrams = 0;  ///< sent
  uint64_t bytes = 0;      ///< payload bytes sent
  uint64_t errors = 0;     ///< send_to failures (would-block, unreachable...); those datagrams are lost
};

/// Sends every datagram of `out` in order with non-blocking send_to. Does not clear `out`.
SendTotals send_outbox(asio::ip::udp::socket& socket, const Outbox& out);

}  // namespace impulse::server
