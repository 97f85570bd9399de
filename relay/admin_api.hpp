#pragma once
// The admin API under `walhook run --admin-listen` (docs/api.md): /api/* reads and actions for
// the console (relay/console/) and for scripts, and its access rules. The HTTP framing is
// relay/admin_server.cpp's; this answers one parsed request.
//
// Database reads and actions run on a worker thread of their own with one blocking connection
// (relay/blocking_db.hpp), reconnected when it breaks: a slow query or PostgreSQL being down
// never blocks the engine's io thread (the API answers 503 meanwhile). Live fields (queued, in
// flight, streaming, recent outcomes) are read from the engine on its executor before the
// worker runs, and the answer resumes there.
//
// Thread affinity: handle() on the engine's executor.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace walhook::relay {

class engine;
struct run_options;

/// Who may use the API: the token of --admin-token-file ("" = none: loopback only).
struct admin_access {
  std::string token;
  bool loopback_only = true;  ///< the listener binds loopback addresses only
};

/// --admin-listen split into its parts: "localhost:9187" → {"localhost", 9187}, "[::1]:9187" →
/// {"::1", 9187}, ":9187" → {"", 9187} (every address). Port 0: any free one (tests). Throws
/// cli_error naming the flag: no ":PORT" (also "[::1]" alone), a port that is not all digits or
/// above 65535 ("localhost:80x" once bound port 80), an IPv6 address without brackets. Pure.
struct listen_address {
  std::string host;  ///< without brackets; "" = every address
  unsigned short port = 0;
};
listen_address split_listen(const std::string& listen);

/// Reads --admin-token-file and checks --admin-listen against it, before anything starts.
/// Throws cli_error: an unreadable or empty token file; a non-loopback --admin-listen without a
/// token file (naming --admin-token-file); an address that does not resolve.
admin_access check_admin_access(const run_options& o);

/// "sha256:" + the first 12 hex digits of SHA-256 of the token (for logs; never the token).
std::string token_fingerprint(const std::string& token);

/// A request, as much of it as the API looks at.
struct api_request {
  std::string method;         ///< "GET", "HEAD", "POST", ...
  std::string target;         ///< path and query, e.g. "/api/endpoints/3"
  std::string host;           ///< Host header
  std::string authorization;  ///< Authorization header
  std::string content_type;
  std::string operator_name;  ///< X-Walhook-Operator
  std::string remote;         ///< peer address
  std::string body;
};

struct api_response {
  unsigned status = 200;
  std::string body;  ///< JSON
};

/// The access rules of docs/api.md "Access", in order: a token configured → Bearer token
/// (401); none → Host must name a loopback host (403); POST → application/json (415). Pure.
/// nullopt: allowed.
std::optional<api_response> check_request(const admin_access& access, const api_request& req);

/// The status of a database error by its SQLSTATE: 504 for 57014 (statement timeout), 400 for
/// class 22 (data exception: the caller's text did not parse, e.g. a bad timestamptz), 409 for
/// class 23 (a constraint: a concurrent change), 503 for anything else (the server's trouble,
/// never the caller's input). Pure.
unsigned status_of_sqlstate(std::string_view sqlstate);

/// X-Walhook-Operator as logged: percent-decoded (the console sends encodeURIComponent(name), so
/// "Zoë" arrives as "Zo%C3%AB"), control characters dropped, at most 100 characters (then "…").
/// Pure.
std::string operator_of(std::string_view header);

/// True if a Host header value ("localhost:9187", "127.0.0.1", "[::1]:80") names loopback.
bool is_loopback_host(const std::string& host);

class admin_api {
 public:
  /// `ex` is the engine's executor; connects to e.options().database_url lazily.
  admin_api(boost::asio::any_io_executor ex, engine& e, admin_access access);
  ~admin_api();
  admin_api(const admin_api&) = delete;
  admin_api& operator=(const admin_api&) = delete;

  /// Answers a request whose target starts with /api/ (access checked here). `req` must live
  /// until the answer (the caller awaits it at once).
  boost::asio::awaitable<api_response> handle(const api_request& req);
  /// Stops the database worker (after the query it runs, if any); later requests never finish.
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay
