#pragma once
// The tenant API of `walhook run --api-listen HOST:PORT` (docs/tenant-api.md): each customer
// reads its own events and manages its own endpoints with a bearer token of its tenant
// (`walhook tenant token create`), on a listener of its own (relay/admin/server.hpp's framing,
// separate from the admin listener).
//
// A request, in order: its bearer token's form (401 without one), the token's rate
// (rate_limit.hpp: 429 with Retry-After), the route (router.hpp: 404, 405, 400), then on the
// database worker (relay/admin/db_worker.hpp, a connection of its own): the token's row (401 if
// unknown, revoked or expired, after auth_failure_delay), its scope (403 for a change with a
// read token), and the handler (handlers.hpp), every query scoped to the token's tenant.
//
// Thread affinity: handle() on the engine's executor.

#include "relay/admin/server.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace walhook::relay {
class engine;
}

namespace walhook::relay::tenant {

struct api_settings {
  std::string database_url;     ///< --api-database-url (or --database-url)
  double rate = 20;             ///< --api-rate: requests per second per token
  double burst = 40;            ///< --api-burst
  std::string slot_base;        ///< --slot without a shard's suffix
  std::string operator_tenant;  ///< --operator-tenant
  bool tls = false;             ///< the listener speaks TLS: the portal's cookie is Secure
};

/// The site admin_server serves on --api-listen.
/// `e`: the engine whose in-memory record of attempts GET /v1/events/{id} reads (it outlives the site).
std::shared_ptr<http_site> make_api(boost::asio::any_io_executor ex, engine& e, api_settings settings);

}  // namespace walhook::relay::tenant
