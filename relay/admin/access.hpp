#pragma once
// Who may use the admin listener (docs/api.md, Access): the bearer token of --admin-token-file,
// the loopback Host rule without one, the --admin-listen address, and how an operator is named
// in the admin.action log. Pure, but for check_admin_access (reads the token file, resolves
// the address) and read_token_file.

#include "relay/admin/request.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace walhook::relay {

struct run_options;

/// Who may use the API: the token of --admin-token-file ("" = none: loopback only).
struct admin_access {
  std::string token;
  bool loopback_only = true;  ///< the listener binds loopback addresses only
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

/// Reads --admin-token-file and checks --admin-listen against it, before anything starts.
/// Throws invalid_input: an unreadable or empty token file; a non-loopback --admin-listen without a
/// token file (naming --admin-token-file); an address that does not resolve.
admin_access check_admin_access(const run_options& o);

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

}  // namespace walhook::relay
