#pragma once
// Endpoint URLs: what walhook accepts as a webhook target and how it is split for the transport.

#include <boost/system/result.hpp>

#include <string>
#include <string_view>

namespace walhook::delivery {

/// A parsed endpoint URL (Boost.URL): http or https, host, port (default 80/443), target.
struct http_target {
  bool tls = false;
  std::string host;    ///< registered name or IP literal (IPv6 without brackets)
  std::string port;    ///< decimal
  std::string target;  ///< path + query, at least "/"
  bool operator==(const http_target&) const = default;
};

/// Parses an endpoint URL. Error: transport_errc::invalid_url.
/// Accepted: "http" or "https" (any case), a host (registered name, IPv4, or bracketed IPv6
/// literal), an optional port 1–65535. Refused: other schemes, missing host, userinfo
/// ("user:pw@"), IPvFuture, host names with characters outside [A-Za-z0-9._-] after
/// percent-decoding. Registered names are lower-cased; the fragment is dropped; an empty path
/// becomes "/"; path and query are kept percent-encoded as given.
boost::system::result<http_target> parse_url(std::string_view url);

}  // namespace walhook::delivery
