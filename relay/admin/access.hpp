#pragma once
// Who may use the admin listener (docs/api.md, Access): the bearer token of --admin-token-file,
// the loopback Host rule without one, the --admin-listen address (resolved once), TLS
// (--admin-tls-cert, --admin-tls-key), how failed attempts are logged, and how an operator is
// named in the admin.action log. Pure, but for check_admin_access (reads the token file and the
// certificate, resolves the address) and read_token_file.

#include "relay/admin/request.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace boost::asio::ssl {
class context;
}

namespace walhook::relay {

struct run_options;

/// A token shorter than this (bytes, after trimming) is refused: it could be guessed.
inline constexpr std::size_t min_admin_token_bytes = 16;

/// Who may use the listener, and where and how it listens: what check_admin_access() made of
/// the flags. The token of --admin-token-file ("" = none: loopback only).
struct admin_access {
  std::string token;
  bool loopback_only = true;  ///< the listener binds a loopback address
  /// The address --admin-listen resolved to, numeric ("127.0.0.1", "::" for every address), and
  /// its port: resolved once, so the loopback decision and the bind are about the same address.
  std::string bind_address{};
  unsigned short port = 0;
  /// --admin-tls-cert and --admin-tls-key, loaded (certificate chain, private key): the
  /// listener speaks HTTPS. Null: plain HTTP.
  std::shared_ptr<boost::asio::ssl::context> tls{};
};

/// --admin-listen split into its parts: "localhost:9187" → {"localhost", 9187}, "[::1]:9187" →
/// {"::1", 9187}, ":9187" → {"", 9187} (every address). Port 0: any free one (tests). Throws
/// invalid_input naming the flag: no ":PORT" (also "[::1]" alone), a port that is not all digits or
/// above 65535 ("localhost:80x" once bound port 80), an IPv6 address without brackets. Pure.
struct listen_address {
  std::string host;  ///< without brackets; "" = every address
  unsigned short port = 0;
};
listen_address split_listen(const std::string& listen);

/// Reads --admin-token-file, resolves --admin-listen (once: a name's first IPv4 address, else its
/// first) and loads --admin-tls-cert/--admin-tls-key, before anything starts. Logs a warning
/// (admin.token_file_readable) if the token file may be read by its group or others. Throws
/// invalid_input naming the flag: an unreadable or empty token file, a token shorter than
/// min_admin_token_bytes, a non-loopback --admin-listen without a token file, an address that
/// does not resolve, one of the TLS flags without the other, a certificate or key that does not
/// load or do not match.
admin_access check_admin_access(const run_options& o);

/// --api-listen resolved once and --api-tls-cert/--api-tls-key loaded, as check_admin_access does
/// for the admin listener; `token` stays empty (every tenant API request names its own token).
/// Throws invalid_input naming the flag.
admin_access check_api_access(const run_options& o);

/// "sha256:" + the first 12 hex digits of SHA-256 of the token (for logs; never the token).
std::string token_fingerprint(const std::string& token);

/// The access rules of docs/api.md "Access", in order: a token configured → Bearer token
/// (401); none → Host must name a loopback host (403); POST → application/json (415). Pure.
/// nullopt: allowed.
std::optional<api_response> check_request(const admin_access& access, const api_request& req);

/// The token in a --admin-token-file (first line, blanks trimmed), as `walhook run` and
/// `walhook status` read it. Throws invalid_input if the file cannot be read or is empty.
std::string read_token_file(const std::string& path);

/// X-Walhook-Operator as logged: percent-decoded (the console sends encodeURIComponent(name), so
/// "Zoë" arrives as "Zo%C3%AB"), control characters dropped, at most 100 characters (then "…").
/// Pure.
std::string operator_of(std::string_view header);

/// True if a Host header value ("localhost:9187", "127.0.0.1", "[::1]:80") names loopback.
bool is_loopback_host(const std::string& host);

/// How often failed authentications (401) are logged: a flood of wrong tokens writes one
/// admin.auth_failed line per `every`, which counts the failures since the previous line. Pure:
/// the caller gives the time (steady clock).
class auth_failure_log {
 public:
  explicit auth_failure_log(std::chrono::steady_clock::duration every = std::chrono::seconds{10}) : every_(every) {}
  /// A failure at `now`. Returns how many failures the line to log now reports (this one and
  /// those not logged since the previous line), or 0: log nothing now. The first one logs.
  std::uint64_t failed(std::chrono::steady_clock::time_point now);

 private:
  std::chrono::steady_clock::duration every_;
  std::optional<std::chrono::steady_clock::time_point> last_line_;
  std::uint64_t unlogged_ = 0;
};

}  // namespace walhook::relay
