#include "delivery/ssrf.hpp"

#include <algorithm>
#include <iterator>

#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>

#include <cstddef>
#include <span>
#include <utility>

namespace walhook::delivery {
namespace {

namespace ip = boost::asio::ip;

struct v4_range {
  ip::network_v4 network;
  std::string_view name;  ///< starts with the network in CIDR notation
};

struct v6_range {
  ip::network_v6 network;
  std::string_view name;
};

/// An IPv6 prefix that carries an IPv4 address at a fixed byte offset; the IPv4 address is
/// what the packet reaches, so the IPv4 rules judge it.
struct v4_embedding {
  ip::network_v6 network;
  std::size_t v4_offset;  ///< byte index of the IPv4 address in the IPv6 address
  std::string_view name;
};

// Function-local statics: parsed on first use, after static initialisation of Asio.

std::span<const v4_range> blocked_v4() {
  static const v4_range table[] = {
      {ip::make_network_v4("0.0.0.0/8"), "0.0.0.0/8 \"this network\", incl. 0.0.0.0 (RFC 791, RFC 6890)"},
      {ip::make_network_v4("10.0.0.0/8"), "10.0.0.0/8 private (RFC 1918)"},
      {ip::make_network_v4("100.64.0.0/10"), "100.64.0.0/10 shared address space, CGNAT (RFC 6598)"},
      {ip::make_network_v4("127.0.0.0/8"), "127.0.0.0/8 loopback (RFC 1122)"},
      {ip::make_network_v4("169.254.0.0/16"), "169.254.0.0/16 link-local, incl. cloud metadata (RFC 3927)"},
      {ip::make_network_v4("172.16.0.0/12"), "172.16.0.0/12 private (RFC 1918)"},
      {ip::make_network_v4("192.0.0.0/24"), "192.0.0.0/24 IETF protocol assignments (RFC 6890)"},
      {ip::make_network_v4("192.0.2.0/24"), "192.0.2.0/24 documentation, TEST-NET-1 (RFC 5737)"},
      {ip::make_network_v4("192.168.0.0/16"), "192.168.0.0/16 private (RFC 1918)"},
      {ip::make_network_v4("198.18.0.0/15"), "198.18.0.0/15 benchmarking (RFC 2544)"},
      {ip::make_network_v4("198.51.100.0/24"), "198.51.100.0/24 documentation, TEST-NET-2 (RFC 5737)"},
      {ip::make_network_v4("203.0.113.0/24"), "203.0.113.0/24 documentation, TEST-NET-3 (RFC 5737)"},
      {ip::make_network_v4("224.0.0.0/4"), "224.0.0.0/4 multicast (RFC 5771)"},
      {ip::make_network_v4("240.0.0.0/4"), "240.0.0.0/4 reserved, incl. broadcast 255.255.255.255 (RFC 1112, RFC 919)"},
  };
  return table;
}

std::span<const v6_range> blocked_v6() {
  static const v6_range table[] = {
      {ip::make_network_v6("::/96"), "::/96 unspecified, loopback and IPv4-compatible (RFC 4291 §2.5)"},
      // The well-known NAT64 prefix 64:ff9b::/96 is an embedding (below); the local-use one
      // may embed IPv4 at any prefix length, so none of it can be judged by the IPv4 rules.
      {ip::make_network_v6("64:ff9b:1::/48"), "64:ff9b:1::/48 local-use NAT64 (RFC 8215)"},
      {ip::make_network_v6("2001:db8::/32"), "2001:db8::/32 documentation (RFC 3849)"},
      {ip::make_network_v6("fc00::/7"), "fc00::/7 unique-local (RFC 4193)"},
      {ip::make_network_v6("fe80::/10"), "fe80::/10 link-local (RFC 4291 §2.5.6)"},
      {ip::make_network_v6("fec0::/10"), "fec0::/10 site-local, deprecated (RFC 3879)"},
      {ip::make_network_v6("ff00::/8"), "ff00::/8 multicast (RFC 4291 §2.7)"},
  };
  return table;
}

std::span<const v4_embedding> v4_embeddings() {
  static const v4_embedding table[] = {
      {ip::make_network_v6("::ffff:0:0/96"), 12, "::ffff:0:0/96 IPv4-mapped (RFC 4291 §2.5.5.2)"},
      {ip::make_network_v6("64:ff9b::/96"), 12, "64:ff9b::/96 NAT64 well-known prefix (RFC 6052)"},
      {ip::make_network_v6("2002::/16"), 2, "2002::/16 6to4 (RFC 3056)"},
  };
  return table;
}

bool contains(const ip::network_v4& network, const ip::address_v4& a) {
  return ip::network_v4(a, network.prefix_length()).network() == network.network();
}

bool contains(const ip::network_v6& network, const ip::address_v6& a) {
  // Bytes only: network() keeps the scope id, which says which link, not which address.
  return ip::network_v6(a, network.prefix_length()).network().to_bytes() == network.network().to_bytes();
}

std::optional<blocked_reason> why_blocked_v4(const ip::address_v4& a) {
  for (const auto& r : blocked_v4()) {
    if (contains(r.network, a)) return blocked_reason{r.name, {}};
  }
  return std::nullopt;
}

/// The IPv4 address `a` carries (IPv4-mapped, NAT64 well-known prefix, 6to4) and the name of
/// the embedding; std::nullopt for other IPv6 addresses.
std::optional<std::pair<ip::address_v4, std::string_view>> embedded_v4(const ip::address_v6& a) {
  const auto bytes = a.to_bytes();
  for (const auto& e : v4_embeddings()) {
    if (!contains(e.network, a)) continue;
    return std::pair{ip::address_v4{ip::address_v4::bytes_type{bytes[e.v4_offset], bytes[e.v4_offset + 1],
                                                               bytes[e.v4_offset + 2], bytes[e.v4_offset + 3]}},
                     e.name};
  }
  return std::nullopt;
}

std::optional<blocked_reason> why_blocked_v6(const ip::address_v6& a) {
  if (const auto embedded = embedded_v4(a)) {
    auto reason = why_blocked_v4(embedded->first);
    if (reason) reason->embedding = embedded->second;
    return reason;
  }
  for (const auto& r : blocked_v6()) {
    if (contains(r.network, a)) return blocked_reason{r.name, {}};
  }
  return std::nullopt;
}

}  // namespace

std::optional<blocked_reason> why_blocked(const boost::asio::ip::address& address) {
  return address.is_v4() ? why_blocked_v4(address.to_v4()) : why_blocked_v6(address.to_v6());
}

bool is_blocked_address(const boost::asio::ip::address& address) { return why_blocked(address).has_value(); }

bool is_metadata_address(const boost::asio::ip::address& address) {
  static const ip::address_v4 v4[] = {ip::make_address_v4("169.254.169.254"), ip::make_address_v4("169.254.170.2"),
                                      ip::make_address_v4("100.100.100.200")};
  static const auto v6 = ip::make_address_v6("fd00:ec2::254");
  const auto known = [](const ip::address_v4& a) { return std::find(std::begin(v4), std::end(v4), a) != std::end(v4); };
  if (address.is_v4()) return known(address.to_v4());
  const auto a6 = address.to_v6();
  if (const auto embedded = embedded_v4(a6)) return known(embedded->first);  // mapped, NAT64, 6to4
  return a6 == v6;
}

bool is_link_local_address(const boost::asio::ip::address& address) {
  const auto v4_link_local = [](const ip::address_v4& a) { return (a.to_uint() >> 16) == ((169u << 8) | 254u); };
  if (address.is_v4()) return v4_link_local(address.to_v4());
  const auto a6 = address.to_v6();
  if (const auto embedded = embedded_v4(a6)) return v4_link_local(embedded->first);
  const auto bytes = a6.to_bytes();
  return bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80;  // fe80::/10
}

bool refuses(const boost::asio::ip::address& address, ssrf_policy policy) {
  if (is_metadata_address(address)) return true;
  switch (policy) {
    case ssrf_policy::guarded: return is_blocked_address(address);
    case ssrf_policy::private_allowed: return is_link_local_address(address);
    case ssrf_policy::open: return false;
  }
  return true;
}

}  // namespace walhook::delivery
