// What "one address" means for the per-address limits (anonymous object quotas, session slots):
// an IPv4 address (/32), or an IPv6 address's /64 prefix, since one host or one customer is
// routinely handed a whole /64 (RFC 6177 and RFC 7421 make /64 the smallest subnet that
// SLAAC works in), so keying on the full IPv6 address would give one attacker 2^64 quotas.
// An IPv4-mapped IPv6 address (::ffff:a.b.c.d, a dual-stack socket's view of an IPv4 client) is
// its IPv4 address.
#pragma once

#include <asio/ip/address.hpp>

namespace impulse::server {

/// The key of `address` for per-address limits: IPv4 as is; IPv4-mapped IPv6 as its IPv4
/// address; other IPv6 with its low 64 bits (the interface identifier) and its scope id zeroed.
inline asio::ip::address address_prefix(const asio::ip::address& address) {
  if (!address.is_v6()) return address;
  const asio::ip::address_v6 v6 = address.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6);
  asio::ip::address_v6::bytes_type bytes = v6.to_bytes();
  for (size_t i = 8; i < bytes.size(); ++i) bytes[i] = 0;
  return asio::ip::address_v6(bytes);
}

}  // namespace impulse::server
