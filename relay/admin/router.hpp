#pragma once
// Which admin API route a request names (docs/api.md): a pure decision over the method and the
// target, answered before anything runs. The router (relay/admin/api.cpp) then calls the route
// family's entry point (relay/admin/routes.hpp).

#include "relay/admin/request.hpp"
#include "relay/operations/status.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace walhook::relay {

/// The admin API's routes (docs/api.md), by what they do.
enum class route_kind {
  overview,         ///< GET /api/overview
  endpoints,        ///< GET /api/endpoints
  endpoint,         ///< GET /api/endpoints/{id}
  endpoint_status,  ///< POST /api/endpoints/{id}/pause|resume|enable|disable
  replay,           ///< POST /api/endpoints/{id}/replay
  event,            ///< GET /api/events/{event_id}
  resend,           ///< POST /api/deliveries/resend
  sources,          ///< GET /api/sources
  source,           ///< GET /api/sources/{name}
};

/// GET /api/endpoints pages: ?limit=N endpoints (default, at most), ?after=CURSOR.
inline constexpr std::int64_t endpoints_page_default = 100;
inline constexpr std::int64_t endpoints_page_max = 1000;

/// A route and what its path carries.
struct api_route {
  route_kind kind = route_kind::overview;
  std::int64_t endpoint_id = 0;  ///< endpoint, endpoint_status, replay
  std::string arg;               ///< endpoint_status: the action; event: the event id (a UUID); source: its name
  operations::endpoint_page page{};  ///< endpoints: ?limit and ?after
  bool operator==(const api_route&) const = default;
};

/// The route of `method` (GET and HEAD read, POST acts) and `target` (path under /api/; the
/// query string matters to GET /api/endpoints only: ?limit=1..1000, ?after=CURSOR), or the answer
/// without one: 400 for an endpoint id that is not a positive integer, an event id that is not a
/// UUID, a source name that is not one (operations::is_source_name), a limit or cursor that does
/// not parse, 405 "use GET here" / "use POST here" for a known
/// path with another method, 404 "no such API route (docs/api.md)". Pure.
std::variant<api_route, api_response> route_of(std::string_view method, std::string_view target);

/// The `next` of a page of GET /api/endpoints: its last endpoint's place in the order, as text
/// for ?after= ("since_us.failures.dead.id", "n" for a since_us of none; opaque to clients). Pure.
std::string page_cursor(const operations::endpoint_page_key& key);
/// The place page_cursor wrote; nullopt if `text` is not one. Pure.
std::optional<operations::endpoint_page_key> parse_page_cursor(std::string_view text);

/// The path's segments ("/api/endpoints/3?x" → {"api", "endpoints", "3"}); empty ones dropped. Pure.
std::vector<std::string> segments_of(std::string_view target);

}  // namespace walhook::relay
