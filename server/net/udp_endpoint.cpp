// UDP socket set-up and sending (standalone Asio, error_code overloads).
#include "server/net/udp_endpoint.h"

#include <fmt/format.h>

namespace impulse::server {
namespace {

// Large enough to absorb a burst of requests between two ticks without kernel drops; the kernel
// may clamp it (net.core.rmem_max), which is harmless.
constexpr int kSocketBufferBytes = 1 << 20;

}  // namespace

bool open_udp_socket(asio::ip::udp::socket& socket, const std::string& bind, uint16_t port, std::string* error) {
  auto fail = [&](std::string text) {
    if (error) *error = std::move(text);
    asio::error_code ignored;
    socket.close(ignored);
    return false;
  };
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(bind, ec);
  if (ec) return fail(fmt::format("--bind {}: not an IP address; use e.g. 0.0.0.0 (all IPv4), :: or 127.0.0.1", bind));
  const asio::ip::udp::endpoint endpoint(address, port);

  socket.open(endpoint.protocol(), ec);
  if (ec) return fail(fmt::format("cannot open a UDP socket for {}: {}", bind, ec.message()));
  socket.set_option(asio::socket_base::receive_buffer_size(kSocketBufferBytes), ec);  // best effort
  socket.set_option(asio::socket_base::send_buffer_size(kSocketBufferBytes), ec);     // best effort
  socket.bind(endpoint, ec);
  if (ec == asio::error::address_in_use) {
    return fail(fmt::format("UDP port {} on {} is in use: pick another with --port (0 picks a free one), "
                            "or stop the other server", port, bind));
  }
  if (ec == asio::error::access_denied) {
    return fail(fmt::format("permission denied binding UDP port {}: use a port >= 1024", port));
  }
  if (ec == std::errc::address_not_available) {
    return fail(fmt::format("--bind {}: this address is not assigned to this machine; use 0.0.0.0 or one of its "
                            "addresses", bind));
  }
  if (ec) return fail(fmt::format("cannot bind UDP {}:{}: {}", bind, port, ec.message()));
  socket.non_blocking(true, ec);
  if (ec) return fail(fmt::format("cannot make the UDP socket non-blocking: {}", ec.message()));
  return true;
}

SendTotals send_outbox(asio::ip::udp::socket& socket, const Outbox& out) {
  SendTotals totals;
  for (const Outbox::Datagram& d : out.datagrams()) {
    const auto bytes = out.bytes_of(d);
    asio::error_code ec;
    const size_t sent = socket.send_to(asio::buffer(bytes.data(), bytes.size()), d.to, 0, ec);
    if (ec) {
      ++totals.errors;
    } else {
      ++totals.datagrams;
      totals.bytes += sent;
    }
  }
  return totals;
}

}  // namespace impulse::server
