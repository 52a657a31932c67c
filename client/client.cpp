// Client: ClientCore (the protocol, sans-IO) plus the transport: one non-blocking Asio UDP socket,
// the steady clock, and an optional link simulator on the send path. Every protocol decision is
// the core's; this file moves bytes and reads the clock.
#include "impulse/client.h"

#include <poll.h>

#include <algorithm>
#include <string>
#include <system_error>

#include <asio.hpp>

#include "shared/net/link_simulator.h"
#include "shared/wire/codec.h"

namespace impulse {

namespace {

using Clock = std::chrono::steady_clock;
using asio::ip::udp;

PeerAddress to_peer(const udp::endpoint& e) {
  PeerAddress a;
  a.port = e.port();
  const asio::ip::address address = e.address();
  if (address.is_unspecified()) {
    a.family = 0;
  } else if (address.is_v4()) {
    a.family = 4;
    const auto bytes = address.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), a.bytes.begin());
  } else {
    a.family = 6;
    const auto bytes = address.to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), a.bytes.begin());
  }
  return a;
}

}  // namespace

struct Client::Impl {
  explicit Impl(ClientCore& c) : core(c) {}

  ClientCore& core;  ///< the Client itself, as its protocol core
  asio::io_context io;
  udp::socket socket{io};
  udp::endpoint server;
  /// Simulated network conditions on the send path (tests); null = a plain socket.
  std::unique_ptr<net::LinkSimulator<udp::endpoint>> link;
  /// A connect_async that failed before reaching the core (resolve, socket): reported by state().
  std::optional<ConnectionError> local_failure;
  // +1 byte detects an oversized datagram.
  // Aligned as ClientCore::receive wants it, so it is read in place.
  alignas(wire::kDatagramAlignment) std::array<uint8_t, wire::kMaxDatagramBytes + 1> receive_buffer{};

  void send_now(std::span<const uint8_t> bytes, const udp::endpoint& to) {
    ClientStats& stats = core.mutable_stats();
    if (!socket.is_open()) {
      ++stats.send_errors;
      return;
    }
    std::error_code ec;
    socket.send_to(asio::buffer(bytes.data(), bytes.size()), to, 0, ec);
    if (ec) {
      ++stats.send_errors;
      return;
    }
    ++stats.datagrams_out;
    stats.bytes_out += bytes.size();
  }

  /// Sends what the core left in its outbox (through the link simulator when one is set), and
  /// what the simulator holds that is due.
  void flush(Clock::time_point now) {
    DatagramQueue& out = core.outbox();
    for (size_t i = 0; i < out.size(); ++i) {
      if (link) {
        link->submit(server, out[i], now);
      } else {
        send_now(out[i], server);
      }
    }
    out.clear();
    if (link) link->deliver_due(now, [this](const udp::endpoint& to, std::span<const uint8_t> b) { send_now(b, to); });
  }

  /// Sends everything the simulated link holds, due or not (the session ends, or the link changes).
  void flush_link_all() {
    if (!link) return;
    link->deliver_due(Clock::time_point::max(),
                      [this](const udp::endpoint& to, std::span<const uint8_t> b) { send_now(b, to); });
  }

  /// The core's queue listener: a request call's datagram goes out now, not at the next poll().
  static void send_queued(void* self) {
    Impl& m = *static_cast<Impl*>(self);
    const Clock::time_point now = Clock::now();
    m.core.update(now);
    m.flush(now);
  }

  /// Waits until the socket is readable or `timeout` passes. Returns true when readable.
  bool wait_readable(std::chrono::milliseconds timeout) {
    if (!socket.is_open()) return false;
    pollfd fd{};
    fd.fd = socket.native_handle();
    fd.events = POLLIN;
    const int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 0, 60'000));
    return ::poll(&fd, 1, ms) > 0;
  }

  /// Hands every queued datagram to the core without blocking. Returns how many were read.
  size_t drain() {
    size_t n_read = 0;
    while (socket.is_open()) {
      udp::endpoint from;
      std::error_code ec;
      const size_t n = socket.receive_from(asio::buffer(receive_buffer), from, 0, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) break;
      if (ec) {
        // ICMP errors (e.g. connection_refused) surface here on some platforms: not data.
        if (ec == asio::error::connection_refused || ec == asio::error::connection_reset) continue;
        break;
      }
      ++n_read;
      core.receive(std::span<const uint8_t>(receive_buffer.data(), n), to_peer(from), Clock::now());
    }
    return n_read;
  }

  /// One turn of the transport: read, advance the core's timers, send.
  void turn() {
    drain();
    const Clock::time_point now = Clock::now();
    core.update(now);
    flush(now);
  }
};

Client::Client() : impl_(std::make_unique<Impl>(static_cast<ClientCore&>(*this))) {
  set_queue_listener(&Impl::send_queued, impl_.get());
}

Client::~Client() {
  if (connected()) disconnect();
}

bool Client::connect_async(std::string_view host, uint16_t port, ConnectParams params) {
  Impl& m = *impl_;
  if (connected()) disconnect("reconnecting");
  const std::string host_text(host);
  if (params.server_label.empty()) params.server_label = host_text + ":" + std::to_string(port);
  // A failure before the first datagram: the core is reset, and state() reports local_failure.
  auto fail = [&](ConnectFailure kind, std::string message) {
    m.core.disconnect("", Clock::now());
    m.core.outbox().clear();
    m.local_failure = ConnectionError{kind, ResultCode::Ok, std::move(message)};
    return false;
  };
  m.local_failure.reset();

  std::error_code ec;
  udp::endpoint endpoint;
  const asio::ip::address address = asio::ip::make_address(host_text, ec);
  if (!ec) {
    endpoint = udp::endpoint(address, port);
  } else {
    udp::resolver resolver(m.io);
    const auto results = resolver.resolve(host_text, std::to_string(port), ec);
    if (ec || results.empty()) {
      return fail(ConnectFailure::ResolveFailed, "cannot resolve host '" + host_text + "': " +
                                                     (ec ? ec.message() : std::string("no addresses")) +
                                                     ": check the --server value");
    }
    endpoint = results.begin()->endpoint();
    for (const auto& r : results) {  // prefer IPv4: the server binds 0.0.0.0 by default
      if (r.endpoint().address().is_v4()) {
        endpoint = r.endpoint();
        break;
      }
    }
  }

  if (m.socket.is_open() && m.socket.local_endpoint(ec).protocol() != endpoint.protocol()) {
    m.socket.close(ec);
  }
  if (!m.socket.is_open()) {
    m.socket.open(endpoint.protocol(), ec);
    if (!ec) m.socket.bind(udp::endpoint(endpoint.protocol(), 0), ec);
    if (!ec) m.socket.non_blocking(true, ec);
    if (ec) {
      std::error_code ignored;
      m.socket.close(ignored);
      return fail(ConnectFailure::SocketError, "cannot open a UDP socket: " + ec.message());
    }
  }
  m.server = endpoint;
  const Clock::time_point now = Clock::now();
  m.core.connect(to_peer(endpoint), now, std::move(params));
  m.flush(now);
  return true;
}

ConnectionState Client::state() const {
  return impl_->local_failure ? ConnectionState::Failed : impl_->core.state();
}

const ConnectionError& Client::connection_error() const {
  return impl_->local_failure ? *impl_->local_failure : impl_->core.connection_error();
}

bool Client::connect(std::string_view host, uint16_t port, std::chrono::milliseconds timeout, std::string* error,
                     std::string_view name, std::span<const uint8_t> token) {
  Impl& m = *impl_;
  ConnectParams params;
  params.name = std::string(name);
  params.token.assign(token.begin(), token.end());
  params.timeout = timeout;
  if (connect_async(host, port, std::move(params))) {
    // The core fails the connect at its timeout, so this loop ends; each wait is short.
    for (;;) {
      const ConnectionState s = m.core.state();
      if (s != ConnectionState::SendingConnect && s != ConnectionState::SendingCookie) break;
      m.wait_readable(std::chrono::milliseconds{10});
      m.turn();
    }
  }
  (void)m.core.take_result();  // nothing of the handshake is news for the first poll()
  if (state() == ConnectionState::Connected) return true;
  if (error != nullptr) *error = connection_error().message;
  return false;
}

void Client::disconnect(std::string_view reason) {
  Impl& m = *impl_;
  m.local_failure.reset();
  const Clock::time_point now = Clock::now();
  m.core.disconnect(reason, now);
  m.flush(now);
  m.flush_link_all();  // the session ends now: a simulated link must not hold the goodbyes
}

bool Client::connected() const { return impl_->core.connected(); }

const PollResult& Client::poll(std::chrono::milliseconds max_wait) {
  Impl& m = *impl_;
  const size_t read = m.drain();
  if (read == 0 && max_wait.count() > 0 && m.wait_readable(max_wait)) m.drain();
  const Clock::time_point now = Clock::now();
  m.core.update(now);
  m.flush(now);
  return m.core.take_result();
}


void Client::process_datagram(std::span<const uint8_t> bytes) {
  Impl& m = *impl_;
  const Clock::time_point now = Clock::now();
  // Idle: act as if connecting to an unknown server, so a ConnectAccepted can start a session.
  const ConnectionState s = m.core.state();
  if (s == ConnectionState::Disconnected || s == ConnectionState::Failed) {
    m.core.connect(to_peer(m.server), now, ConnectParams{});
  }
  m.core.receive(bytes, to_peer(m.server), now);
  m.flush(now);  // without a socket: counted in send_errors
}


bool Client::set_link_conditions(const net::LinkConditions& conditions, std::string* error) {
  Impl& m = *impl_;
  if (!conditions.validate(error)) return false;
  if (m.socket.is_open()) m.flush_link_all();  // what the old link still holds goes out now, late
  if (conditions.active()) {
    m.link = std::make_unique<net::LinkSimulator<udp::endpoint>>(conditions);
  } else {
    m.link.reset();
  }
  return true;
}


uint16_t Client::local_port() const {
  std::error_code ec;
  if (!impl_->socket.is_open()) return 0;
  const udp::endpoint local = impl_->socket.local_endpoint(ec);
  return ec ? 0 : local.port();
}

}  // namespace impulse
