// The address a datagram came from or goes to: a request remembers it so its answer finds the
// sender, and the net layer keys sessions by it.
#pragma once

#include <asio/ip/udp.hpp>

namespace impulse::server {

using Endpoint = asio::ip::udp::endpoint;

}  // namespace impulse::server
