// The SSRF guard (pure): every blocked range at its first and last address, the addresses just
// outside it, and the IPv4 rules applied to IPv4 addresses embedded in IPv6. The expected ranges
// are written out here, independently of the table in delivery/ssrf.cpp.

#include "delivery/ssrf.hpp"

#include <boost/asio/ip/address.hpp>

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

using namespace walhook::delivery;
namespace asio = boost::asio;

namespace {

/// One blocked range: its CIDR (the start of its name in why_blocked), its first and last
/// address, and its neighbours just outside that no other rule blocks.
struct range_row {
  std::string_view cidr;
  std::string_view first;
  std::string_view last;
  std::vector<std::string_view> outside;
};

bool blocked(std::string_view text) { return is_blocked_address(asio::ip::make_address(text)); }

std::string_view range_of(std::string_view text) {
  const auto reason = why_blocked(asio::ip::make_address(text));
  return reason ? reason->range : std::string_view{};
}

void check_rows(const std::vector<range_row>& rows) {
  for (const auto& r : rows) {
    CAPTURE(r.cidr);
    for (const auto a : {r.first, r.last}) {
      CAPTURE(a);
      CHECK(blocked(a));
      const auto reason = why_blocked(asio::ip::make_address(a));
      REQUIRE(reason.has_value());
      CHECK(reason->range.starts_with(std::string(r.cidr) + " "));
      CHECK(reason->embedding.empty());
    }
    for (const auto a : r.outside) {
      CAPTURE(a);
      CHECK_FALSE(blocked(a));
      CHECK_FALSE(why_blocked(asio::ip::make_address(a)).has_value());
    }
  }
}

}  // namespace

TEST_CASE("ssrf: the guard blocks private, loopback, link-local and reserved addresses") {
  for (std::string_view a : {"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254",
                             "127.0.0.1", "127.1.2.3", "169.254.169.254", "169.254.0.1", "172.16.0.1", "172.31.255.255",
                             "192.0.0.1", "192.0.2.1", "198.51.100.7", "203.0.113.9", "192.168.1.1", "198.18.0.1", "198.19.255.255", "224.0.0.1", "239.255.255.250",
                             "240.0.0.1", "255.255.255.255", "::", "::1", "::127.0.0.1", "::ffff:127.0.0.1",
                             "::ffff:10.1.2.3", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:7f00:1::",
                             "fc00::1", "fd00:ec2::254", "2001:db8::1", "64:ff9b:1::a9fe:a9fe", "fe80::1", "febf::1", "fec0::1", "ff02::1"}) {
    CAPTURE(a);
    CHECK(blocked(a));
  }
  for (std::string_view a : {"1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.1", "126.255.255.255", "172.15.255.255",
                             "172.32.0.1", "192.0.3.0", "192.169.0.1", "198.17.255.255", "198.20.0.1",
                             "223.255.255.255", "93.184.216.34", "2606:4700:4700::1111", "2001:db9::1",
                             "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::", "fbff::1", "fe7f::1"}) {
    CAPTURE(a);
    CHECK_FALSE(blocked(a));
  }
}

TEST_CASE("ssrf: every blocked IPv4 range, first and last address, and its neighbours") {
  check_rows({
      {"0.0.0.0/8", "0.0.0.0", "0.255.255.255", {"1.0.0.0"}},
      {"10.0.0.0/8", "10.0.0.0", "10.255.255.255", {"9.255.255.255", "11.0.0.0"}},
      {"100.64.0.0/10", "100.64.0.0", "100.127.255.255", {"100.63.255.255", "100.128.0.0"}},
      {"127.0.0.0/8", "127.0.0.0", "127.255.255.255", {"126.255.255.255", "128.0.0.0"}},
      {"169.254.0.0/16", "169.254.0.0", "169.254.255.255", {"169.253.255.255", "169.255.0.0"}},
      {"172.16.0.0/12", "172.16.0.0", "172.31.255.255", {"172.15.255.255", "172.32.0.0"}},
      {"192.0.0.0/24", "192.0.0.0", "192.0.0.255", {"191.255.255.255", "192.0.1.0"}},
      {"192.0.2.0/24", "192.0.2.0", "192.0.2.255", {"192.0.1.255", "192.0.3.0"}},
      {"192.168.0.0/16", "192.168.0.0", "192.168.255.255", {"192.167.255.255", "192.169.0.0"}},
      {"198.18.0.0/15", "198.18.0.0", "198.19.255.255", {"198.17.255.255", "198.20.0.0"}},
      {"198.51.100.0/24", "198.51.100.0", "198.51.100.255", {"198.51.99.255", "198.51.101.0"}},
      {"203.0.113.0/24", "203.0.113.0", "203.0.113.255", {"203.0.112.255", "203.0.114.0"}},
      {"224.0.0.0/4", "224.0.0.0", "239.255.255.255", {"223.255.255.255"}},  // 240/4 follows
      {"240.0.0.0/4", "240.0.0.0", "255.255.255.255", {}},
  });
}

TEST_CASE("ssrf: every blocked IPv6 range, first and last address, and its neighbours") {
  check_rows({
      {"::/96", "::", "::ffff:ffff", {"::1:0:0"}},
      {"64:ff9b:1::/48", "64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", {"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", "64:ff9b:2::"}},
      {"2001:db8::/32", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", {"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::"}},
      {"fc00::/7", "fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
       {"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe00::"}},
      {"fe80::/10", "fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
       {"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}},  // fec0::/10 follows
      {"fec0::/10", "fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", {}},  // ff00::/8 follows
      {"ff00::/8", "ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", {}},
  });
}

TEST_CASE("ssrf: IPv4 embedded in mapped, NAT64 and 6to4 addresses is judged by the IPv4 rules") {
  struct row {
    std::string_view embedding;   ///< CIDR of the IPv6 prefix
    std::string_view first;       ///< first address of the prefix: embeds 0.0.0.0
    std::string_view last;        ///< last address of the prefix: embeds 255.255.255.255
    std::string_view private_v4;  ///< embeds 10.1.2.3
    std::string_view public_v4;   ///< embeds 8.8.8.8
    std::vector<std::string_view> outside;  ///< just outside the prefix (would embed a blocked address)
  };
  const row rows[] = {
      {"::ffff:0:0/96", "::ffff:0.0.0.0", "::ffff:255.255.255.255", "::ffff:10.1.2.3", "::ffff:8.8.8.8",
       {"::fffe:ffff:ffff", "::1:0:0:0"}},
      {"64:ff9b::/96", "64:ff9b::", "64:ff9b::ffff:ffff", "64:ff9b::a01:203", "64:ff9b::808:808",
       {"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", "64:ff9b::1:0:0"}},
      {"2002::/16", "2002::", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2002:a01:203::1", "2002:808:808::1",
       {"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2003::"}},
  };
  for (const auto& r : rows) {
    CAPTURE(r.embedding);
    const auto check_embedded = [&](std::string_view a, std::string_view v4_cidr) {
      CAPTURE(a);
      const auto reason = why_blocked(asio::ip::make_address(a));
      REQUIRE(reason.has_value());
      CHECK(reason->range.starts_with(std::string(v4_cidr) + " "));
      CHECK(reason->embedding.starts_with(std::string(r.embedding) + " "));
      CHECK(blocked(a));
    };
    check_embedded(r.first, "0.0.0.0/8");
    check_embedded(r.last, "240.0.0.0/4");
    check_embedded(r.private_v4, "10.0.0.0/8");
    CHECK_FALSE(blocked(r.public_v4));
    for (const auto a : r.outside) {
      CAPTURE(a);
      CHECK_FALSE(blocked(a));
    }
  }
}

TEST_CASE("ssrf: a scope id does not get an address past the guard") {
  CHECK(blocked("fe80::1%1"));
  CHECK(range_of("fe80::1%1").starts_with("fe80::/10 "));
  CHECK(blocked("ff02::1%1"));
}

TEST_CASE("ssrf: cloud metadata addresses") {
  // NAT64 (64:ff9b::/96) and 6to4 reach the IPv4 address they embed: the metadata service too.
  for (std::string_view a : {"169.254.169.254", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
                             "64:ff9b::169.254.169.254", "2002:a9fe:a9fe::", "2002:a9fe:a9fe:1::1", "fd00:ec2::254",
                             "169.254.170.2", "::ffff:169.254.170.2", "100.100.100.200", "::ffff:100.100.100.200"}) {
    CAPTURE(a);
    CHECK(is_metadata_address(asio::ip::make_address(a)));
    CHECK(blocked(a));  // also covered by the private ranges
  }
  for (std::string_view a : {"169.254.169.253", "169.254.169.255", "fd00:ec2::253", "8.8.8.8", "::1",
                             "64:ff9b::a9fe:a9fd", "64:ff9b::1:a9fe:a9fe", "2002:a9fe:a9fd::"}) {
    CAPTURE(a);
    CHECK_FALSE(is_metadata_address(asio::ip::make_address(a)));
  }
}

TEST_CASE("ssrf: what each policy refuses; an inbox destination reaches private networks, never link-local or metadata") {
  using walhook::delivery::ssrf_policy;
  struct row {
    std::string_view address;
    bool guarded, private_allowed, open;
  };
  const row rows[] = {
      {"93.184.216.34", false, false, false},  // public
      {"127.0.0.1", true, false, false},       {"::1", true, false, false},
      {"10.1.2.3", true, false, false},        {"192.168.0.9", true, false, false},
      {"fd12::1", true, false, false},         {"100.64.0.1", true, false, false},
      {"169.254.1.1", true, true, false},      {"169.254.169.253", true, true, false},  // link-local
      {"fe80::1", true, true, false},          {"::ffff:169.254.1.1", true, true, false},
      {"169.254.169.254", true, true, true},   {"169.254.170.2", true, true, true},  // metadata: always
      {"100.100.100.200", true, true, true},   {"fd00:ec2::254", true, true, true},
  };
  for (const auto& r : rows) {
    CAPTURE(r.address);
    const auto a = asio::ip::make_address(r.address);
    CHECK(walhook::delivery::refuses(a, ssrf_policy::guarded) == r.guarded);
    CHECK(walhook::delivery::refuses(a, ssrf_policy::private_allowed) == r.private_allowed);
    CHECK(walhook::delivery::refuses(a, ssrf_policy::open) == r.open);
  }
}
