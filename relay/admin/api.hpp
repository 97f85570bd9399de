#pragma once
// The admin API under `walhook run --admin-listen` (docs/api.md): /api/* reads and actions for
// the console (relay/admin/console/) and for scripts, and its access rules. The HTTP framing is
// relay/admin/server.cpp's; this answers one parsed request: access (access.hpp), the route
// (router.hpp), then the route family (routes.hpp: overview, endpoints, events, actions).
//
// Database reads and actions run on the database worker (db_worker.hpp: a thread of its own
// with one blocking connection, reconnected when it breaks): a slow query or PostgreSQL being
// down never blocks the engine's io thread (the API answers 503 meanwhile). Live fields
// (queued, in flight, streaming, recent outcomes) are read from the engine on its executor
// before the worker runs, and the answer resumes there. Errors are answered by kind, once
// (http_status.hpp).
//
// Thread affinity: handle() on the engine's executor.

#include "relay/admin/access.hpp"
#include "relay/admin/request.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>

namespace walhook::relay {

class engine;

/// A wrong or missing bearer token is answered 401 this much later (the request's own
/// coroutine waits; other requests go on): guessing costs time.
inline constexpr std::chrono::milliseconds auth_failure_delay{250};

/// The /api/ half of the admin listener; one per `walhook run --admin-listen`.
class admin_api {
 public:
  /// `ex` is the engine's executor; connects to e.options().database_url lazily.
  admin_api(boost::asio::any_io_executor ex, engine& e, admin_access access);
  ~admin_api();
  admin_api(const admin_api&) = delete;
  admin_api& operator=(const admin_api&) = delete;

  /// Answers a request whose target starts with /api/ (access checked here, by admit()). `req`
  /// must live until the answer (the caller awaits it at once).
  boost::asio::awaitable<api_response> handle(const api_request& req);
  /// The access rules (check_request) for /api/ and /metrics: nullopt if `req` may go on, else
  /// the refusal. A 401 comes after auth_failure_delay and is logged (admin.auth_failed, with
  /// the client's address and never the token; at most one line per 10 s, counting the rest).
  boost::asio::awaitable<std::optional<api_response>> admit(const api_request& req);
  /// Stops the database worker (after the query it runs, if any); later requests never finish.
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay
