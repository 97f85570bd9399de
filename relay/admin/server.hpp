#pragma once
// The admin HTTP endpoint of `walhook run --admin-listen HOST:PORT` (Boost.Beast):
//   GET /metrics  Prometheus text exposition of the engine (engine::metrics_text), at most a
//                 second old (metrics_cache.hpp), under the API's access rules
//   GET /healthz  200 while the process runs
//   GET /readyz   200 while this instance streams the slot, 503 otherwise (standby, reconnecting)
//   /api/...      the admin API (relay/admin/api.hpp, docs/api.md), under its access rules
//   GET /console/ the operator console's pages (relay/admin/console_assets.hpp); / redirects there
// HEAD answers every GET route with the GET's headers and no body. With --admin-tls-cert and
// --admin-tls-key every connection starts with a TLS handshake (Boost.Beast ssl_stream).
//
// Bounded so it can never take what deliveries need (issue 9): at most max_admin_connections
// at once. At the cap the connection idle longest (no request bytes since its last response)
// is closed to make room, so a probe never waits behind idle connections; if none is idle it
// stops accepting until one ends (further connections wait in the kernel's backlog). Each
// request must arrive within admin_read_deadline (also the idle keep-alive limit); when accept(2) fails (EMFILE, ENFILE, ENOBUFS, ENOMEM) it waits 100 ms,
// doubling to 1 s, before accepting again, and logs admin.accept_failed.

#include "relay/admin/api.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace walhook::relay {

class engine;

/// Admin connections served at once; more wait unaccepted.
inline constexpr std::size_t max_admin_connections = 64;
/// A request (or the idle wait before it) and a response write must each finish within this.
inline constexpr std::chrono::seconds admin_read_deadline{10};
/// At the cap, a connection idle (no request bytes) this long may be closed to make room.
inline constexpr std::chrono::milliseconds admin_idle_evict_after{250};
/// Backoff of the accept loop after a failed accept(2): first wait, and the longest.
inline constexpr std::chrono::milliseconds accept_backoff_min{100};
inline constexpr std::chrono::milliseconds accept_backoff_max{1000};

/// What a listener serves instead of the admin routes: every request but GET /healthz goes to
/// handle() (the tenant API of --api-listen, relay/tenant/api.hpp). The framing, limits and
/// headers stay the listener's.
class http_site {
 public:
  virtual ~http_site() = default;
  /// The answer to one request (`req` lives until it comes).
  virtual boost::asio::awaitable<api_response> handle(const api_request& req) = 0;
  /// Stops what it runs (its database worker); later requests never finish.
  virtual void stop() = 0;
};

class admin_server {
 public:
  /// Binds the address check_admin_access() resolved --admin-listen to (access.bind_address,
  /// access.port), speaking TLS if access.tls; `access` also holds the API's rules. Logs
  /// admin.plain_http (warn) for a non-loopback address without TLS. Throws std::runtime_error
  /// on a port in use. With `site`, it serves that site alone (logging api.plain_http instead).
  admin_server(boost::asio::any_io_executor ex, engine& e, const admin_access& access,
               std::shared_ptr<http_site> site = nullptr);
  ~admin_server();
  unsigned short port() const;
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay
