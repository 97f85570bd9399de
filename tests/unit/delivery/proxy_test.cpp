// The egress proxy's pure parts (delivery/proxy.hpp): the --proxy URL, --no-proxy matching, and
// how a CONNECT names an address.

#include "delivery/proxy.hpp"

#include <doctest/doctest.h>

using namespace walhook::delivery;

TEST_CASE("proxy: --proxy takes http://host:port (port 80 by default) and refuses what walhook cannot honour") {
  CHECK(parse_proxy_url("http://proxy.internal:3128").value() == http_proxy{"proxy.internal", "3128"});
  CHECK(parse_proxy_url("HTTP://Proxy.Internal:3128/").value() == http_proxy{"proxy.internal", "3128"});
  CHECK(parse_proxy_url("http://10.0.0.5").value() == http_proxy{"10.0.0.5", "80"});
  CHECK(parse_proxy_url("http://[fd00::1]:8080").value() == http_proxy{"fd00::1", "8080"});
  std::string why;
  for (const auto& [url, reason] : std::vector<std::pair<std::string, std::string>>{
           {"https://proxy:3128", "must be http"},
           {"socks5://proxy:1080", "must be http, not socks5"},
           {"http://user:pw@proxy:3128", "credentials"},
           {"http://proxy:3128/path", "no path"},
           {"http://proxy:3128/?x=1", "no query"},
           {"proxy:3128", "must be http"},
           {"http://proxy:99999", "no usable host"},
           {"not a url", "not an absolute URL"}}) {
    INFO(url);
    why.clear();
    CHECK_FALSE(parse_proxy_url(url, &why).has_value());
    CHECK(why.find(reason) != std::string::npos);
  }
}

TEST_CASE("proxy: --no-proxy matches a host, a domain and its subdomains, or everything") {
  const std::vector<std::string> list{"example.com", ".internal", "10.0.0.7"};
  CHECK(bypasses_proxy(list, "example.com"));
  CHECK(bypasses_proxy(list, "api.example.com"));
  CHECK(bypasses_proxy(list, "API.Example.COM"));
  CHECK_FALSE(bypasses_proxy(list, "badexample.com"));  // a suffix, not a subdomain
  CHECK_FALSE(bypasses_proxy(list, "example.com.evil.net"));
  CHECK(bypasses_proxy(list, "hooks.internal"));
  CHECK(bypasses_proxy(list, "internal"));
  CHECK(bypasses_proxy(list, "10.0.0.7"));
  CHECK_FALSE(bypasses_proxy(list, "10.0.0.70"));
  CHECK_FALSE(bypasses_proxy({}, "example.com"));
  CHECK(bypasses_proxy({"*"}, "anything.at.all"));
  CHECK(bypasses_proxy({"a.com", " example.com "}, "api.example.com"));  // "a.com, example.com" as written
  CHECK_FALSE(bypasses_proxy({".1"}, "127.0.0.1"));  // an IP literal matches only itself
  CHECK_FALSE(bypasses_proxy({"0.0.1"}, "127.0.0.1"));
  CHECK(bypasses_proxy({"[::1]"}, "::1"));
}

TEST_CASE("proxy: a CONNECT names an IPv4 address plainly and an IPv6 one in brackets") {
  CHECK(authority_of("203.0.113.7", "443") == "203.0.113.7:443");
  CHECK(authority_of("2001:db8::1", "8443") == "[2001:db8::1]:8443");
}
