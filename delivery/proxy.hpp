#pragma once
// The egress proxy (`walhook run --proxy http://host:port`, docs/endpoint-policies.md, "Egress
// proxy"): every HTTP attempt leaves through one HTTP proxy — so a firewall, or the customer's
// allow-list, sees one egress address. walhook resolves the endpoint's host itself and applies
// the SSRF guard first (delivery/ssrf.hpp); the proxy is then asked for the *checked address*,
// never for a name it would resolve again (a second lookup is where DNS rebinding gets past a
// guard): `CONNECT 203.0.113.7:443 HTTP/1.1` (RFC 9110 §9.3.6), then the request goes through
// the tunnel as it would directly — TLS to `host` for https (SNI and the certificate checked
// against `host`), and the same request with `Host: host` for http. Plain http is tunnelled too
// rather than sent in absolute form: an absolute URI naming the checked address makes a proxy
// send the address as the Host (tinyproxy does), and one naming the host lets it resolve again.
//
// A proxy that refuses (407 Proxy Authentication Required, 403) or cannot reach the endpoint
// (502, 504) is transport_errc::proxy_failed with its status line; `--no-proxy` names hosts
// reached directly. Pure.

#include <boost/system/result.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::delivery {

struct http_proxy {
  std::string host;  ///< registered name or IP literal (IPv6 without brackets)
  std::string port;  ///< decimal
  bool operator==(const http_proxy&) const = default;
};

/// Parses `http://host:port` (a trailing "/" allowed; port 1–65535, default 80). Refused
/// (std::errc::invalid_argument, `why` says what): another scheme (an https proxy is not
/// supported), userinfo (credentials are not supported yet), a path, query or fragment.
boost::system::result<http_proxy> parse_proxy_url(std::string_view url, std::string* why = nullptr);

/// Whether `host` (an endpoint URL's, lower-case) is reached directly under `no_proxy`: an entry
/// equal to it, or a domain it is under ("example.com" and ".example.com" both match
/// "example.com" and "api.example.com"), or "*" (everything). Case-insensitive.
bool bypasses_proxy(const std::vector<std::string>& no_proxy, std::string_view host);

/// `address:port` as a CONNECT request or an absolute-form URI names it ([v6] bracketed).
std::string authority_of(std::string_view address, std::string_view port);

}  // namespace walhook::delivery
