#pragma once
// The SSRF guard (docs/architecture.md, Security): the addresses a webhook must not be delivered to. Pure predicates
// over resolved addresses; http_client applies them after DNS resolution (and to IP literals),
// so names such as "localhost" or "0x7f.1" cannot get around them.

#include <boost/asio/ip/address.hpp>

#include <optional>
#include <string_view>

namespace walhook::delivery {

/// The SSRF guard (docs/architecture.md, Security): true if walhook must not connect to `address` unless
/// allow_private_networks is set. IPv4 (IANA special-purpose registry, RFC 6890): 0/8, 10/8,
/// 100.64/10 (CGNAT), 127/8, 169.254/16 (link-local, cloud metadata), 172.16/12, 192.0.0/24,
/// 192.168/16, 198.18/15, 224/4 (multicast), 240/4 (reserved, broadcast). IPv6: ::, ::1,
/// IPv4-compatible ::/96, fc00::/7 (unique-local), fe80::/10 (link-local), fec0::/10
/// (site-local), ff00::/8 (multicast), and the embedded IPv4 address of ::ffff:0:0/96 (mapped),
/// 64:ff9b::/96 (NAT64) and 2002::/16 (6to4) is judged by the IPv4 rules. An IPv6 scope id
/// ("fe80::1%eth0") does not matter.
bool is_blocked_address(const boost::asio::ip::address& address);

/// Why the SSRF guard refuses an address (for logs and tests). Both views point at static
/// storage.
struct blocked_reason {
  /// The blocked range the address is in, CIDR first: e.g. "10.0.0.0/8 private (RFC 1918)".
  std::string_view range;
  /// The IPv6 prefix the IPv4 address was embedded in, e.g. "2002::/16 6to4 (RFC 3056)";
  /// "" if the address itself is in `range`.
  std::string_view embedding;
  bool operator==(const blocked_reason&) const = default;
};

/// The rule behind is_blocked_address: std::nullopt exactly when it returns false.
std::optional<blocked_reason> why_blocked(const boost::asio::ip::address& address);

/// Cloud metadata services (169.254.169.254, AWS ECS's 169.254.170.2, Alibaba Cloud's
/// 100.100.100.200, each also embedded in IPv6, and AWS's fd00:ec2::254): refused always, even
/// with allow_private_networks.
bool is_metadata_address(const boost::asio::ip::address& address);

/// Link-local addresses (169.254/16, also embedded in IPv6, and fe80::/10): where cloud
/// providers put their instance services.
bool is_link_local_address(const boost::asio::ip::address& address);

/// How much of the guard applies to a target.
enum class ssrf_policy {
  guarded,          ///< a customer's endpoint: is_blocked_address and metadata refused
  private_allowed,  ///< the operator's own handler (an inbox destination): only link-local and metadata refused
  open,             ///< walhook run --allow-private-networks: only metadata refused
};

/// Whether the guard refuses `address` under `policy`. Pure.
bool refuses(const boost::asio::ip::address& address, ssrf_policy policy);

}  // namespace walhook::delivery
