#pragma once
// A small blocking HTTP/1.1 client for the CLI to ask a running walhook's admin API
// (`walhook run --admin-listen`, docs/api.md) for its live numbers, over HTTPS when the listener
// has --admin-tls-cert. Beast stays in the .cpp. The token file is read as the listener reads it
// (relay/admin/access.hpp, read_token_file).

#include <chrono>
#include <string>

namespace walhook::relay {

/// Which admin listener to ask, and how.
struct admin_target {
  /// "http://host:port" or "https://host:port" (a trailing '/' ignored).
  std::string base_url;
  /// Sent as "Authorization: Bearer <token>" if not empty.
  std::string token;
  /// https: PEM CA certificate(s) trusted besides OpenSSL's default verify paths ("" = none).
  /// The certificate is always verified, and must name the URL's host.
  std::string ca_file;
};

/// GET `target.base_url` + `path`. Returns the body of a 200 answer. Throws cli_error with a
/// one-line reason (a URL that is neither http:// nor https://, cannot connect, the TLS
/// handshake or certificate failed, timeout, HTTP 401 …) on anything else; `timeout` bounds the
/// whole exchange.
std::string admin_get(const admin_target& target, const std::string& path,
                      std::chrono::milliseconds timeout = std::chrono::seconds{5});

}  // namespace walhook::relay
