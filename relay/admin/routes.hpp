#pragma once
// The admin API's route families (docs/api.md), one file each, each *query → pure decision →
// view*: relay/admin/overview.cpp, endpoints.cpp, events.cpp (its decision: verdict.hpp),
// sources.cpp and actions.cpp. The router (relay/admin/api.cpp) picks one by route_of (router.hpp).
//
// Each entry point reads what the engine knows live (on the engine's executor, where it is
// called) and returns the database worker's answer as an awaitable. They are plain functions,
// not coroutines: their lambdas (with captures) are built outside any coroutine frame (see
// db_worker::run). `ctx` and `req` must live until the answer (the router awaits it at once).

#include "relay/admin/access.hpp"
#include "relay/admin/request.hpp"
#include "relay/operations/status.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <string>

namespace walhook::relay {

class engine;
class db_worker;

/// What a route may use: the engine (live numbers, the record of attempts), the database
/// worker, the access rules (the token's fingerprint for the action log).
struct route_context {
  engine& eng;
  db_worker& worker;
  const admin_access& access;
};

/// GET /api/overview: version, slot, lag, live numbers; from memory if the database fails.
boost::asio::awaitable<api_response> get_overview(const route_context& ctx);

/// GET /api/endpoints?limit=N&after=CURSOR: a page of the endpoints, worst first
/// (relay/operations/status.hpp), and the cursor of the next page ("next", null after the last).
boost::asio::awaitable<api_response> get_endpoints(const route_context& ctx, const operations::endpoint_page& page);
/// GET /api/endpoints/{id}: one endpoint with its newest deliveries, dead letters and attempts.
boost::asio::awaitable<api_response> get_endpoint(const route_context& ctx, std::int64_t id);

/// GET /api/events/{event_id}: did endpoint X get event Y? `event_id` is a UUID (the router checks).
boost::asio::awaitable<api_response> get_event(const route_context& ctx, const std::string& event_id);

/// GET /api/sources: the inbox's sources with their counters (relay/operations/sources.hpp).
boost::asio::awaitable<api_response> get_sources(const route_context& ctx);
/// GET /api/sources/{name}: one source, its destinations, quarantined and deferred deliveries
/// and the newest reused ids. `name` has a source name's form (the router checks).
boost::asio::awaitable<api_response> get_source(const route_context& ctx, const std::string& name);

/// POST /api/endpoints/{id}/pause|resume|enable|disable (`action`), body {} or empty.
boost::asio::awaitable<api_response> post_status(const route_context& ctx, std::int64_t id, const std::string& action,
                                                 const api_request& req);
/// POST /api/endpoints/{id}/replay {"since", "until"}.
boost::asio::awaitable<api_response> post_replay(const route_context& ctx, std::int64_t id, const api_request& req);
/// POST /api/deliveries/resend {"endpoint_id", "event_id"}.
boost::asio::awaitable<api_response> post_resend(const route_context& ctx, const api_request& req);

}  // namespace walhook::relay
