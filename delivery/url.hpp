#pragma once
// Endpoint URLs: what walhook accepts as a webhook target and how it is split for the transport.

#include "delivery/proxy.hpp"

#include <boost/system/result.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walhook::delivery {

/// A parsed endpoint URL (Boost.URL): http or https, host, port (default 80/443), target.
/// How an endpoint's attempts leave (walhook.endpoints.proxy, migration 014): as the client's
/// options say (its --proxy and --no-proxy), directly, or through the endpoint's own proxy.
enum class egress_route { client, direct, proxy };

struct http_target {
  bool tls = false;
  std::string host;    ///< registered name or IP literal (IPv6 without brackets)
  std::string port;    ///< decimal
  std::string target;  ///< path + query, at least "/"
  /// The SSRF guard lets this target reach loopback and private addresses (never cloud metadata):
  /// set by walhook for its operator's own handlers (an inbox destination), never from the URL.
  bool private_network_allowed = false;
  /// Set by walhook from the endpoint's proxy column, never from the URL.
  egress_route egress = egress_route::client;
  std::optional<http_proxy> proxy{};  ///< egress == egress_route::proxy: this one
  bool operator==(const http_target&) const = default;
};

/// Parses an endpoint URL. Error: transport_errc::invalid_url.
/// Accepted: "http" or "https" (any case), a host (registered name, IPv4, or bracketed IPv6
/// literal), an optional port 1–65535. Refused: other schemes, missing host, userinfo
/// ("user:pw@"), IPvFuture, host names with characters outside [A-Za-z0-9._-] after
/// percent-decoding. Registered names are lower-cased; the fragment is dropped; an empty path
/// becomes "/"; path and query are kept percent-encoded as given.
boost::system::result<http_target> parse_url(std::string_view url);

// The pieces of parse_url that the transport applies again to an http_target (which callers
// may also build by hand).

/// A TCP port as http_target::port holds it: decimal digits only, 1–65535 (leading zeros
/// allowed, "00080" is 80). std::nullopt for anything else, including "" and "0".
std::optional<std::uint16_t> parse_port(std::string_view text);

/// True if `target` is a request target as walhook sends it: origin-form (RFC 9112 §3.2.1,
/// starts with '/') of printable ASCII without spaces, so it cannot split the request line.
bool is_valid_target(std::string_view target);

/// The Host header value for `target` (RFC 9110 §7.2): an IPv6 literal in brackets, and the
/// port only if it is not the scheme's default (80 for http, 443 for https).
std::string host_header(const http_target& target);

// Showing URLs and errors to people (logs, last_error, CLI output, the admin API and console,
// notifications). Endpoint URLs carry credentials (`user:password@`, `?token=…`) and, in
// capability URLs (Slack's https://hooks.slack.com/services/T…/B…/X…, Discord's, Teams',
// Zapier's), a secret path; they come from customers, so they are redacted and bounded before
// they go anywhere a person (or a log pipeline) reads them.

/// Characters of a URL shown by redact_url at most (longer ones end in "...").
inline constexpr std::size_t max_shown_url = 200;
/// Characters of the first path segment shown by redact_url at most.
inline constexpr std::size_t max_shown_segment = 16;
/// Bytes of an error text (last_error, a log field) kept by cap_text by default.
inline constexpr std::size_t max_error_text = 1024;

/// `url` as it may be shown: scheme, host and port; of the path only the first segment, and
/// only if it reads like a word (at most max_shown_segment characters of a–z, 0–9, '.', '-',
/// '_', at most two of them digits) — the rest of the path becomes "/…" (U+2026), and so does
/// a first segment that looks like an id or a token; userinfo becomes "***@", the query
/// "?***", the fragment "#***"; bytes outside printable ASCII are percent-encoded; at most
/// max_shown_url characters. "https://hooks.slack.com/services/T0/B0/XXXX?x=1" is shown as
/// "https://hooks.slack.com/services/…?***". A URL that parse_url accepts is rebuilt from
/// its parts. Any other text (Boost.URL cannot parse it, or parse_url refuses it) is cut
/// conservatively: everything between "scheme://" and the last '@' before the first '?' or
/// '#' is userinfo, the first '/' after it starts the path, and everything from that '?' or
/// '#' on is dropped. A secret in the host name itself is not recognised. Never fails; pure.
std::string redact_url(std::string_view url);

/// `text` cut to at most `max_bytes` bytes (ending in "..." when cut, never inside a UTF-8
/// sequence): for error texts that end in logs and rows. Pure.
std::string cap_text(std::string_view text, std::size_t max_bytes = max_error_text);

}  // namespace walhook::delivery
