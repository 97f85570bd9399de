#pragma once
// Which admin API route a request names (docs/api.md): a pure decision over the method and the
// target, answered before anything runs. The router (relay/admin/api.cpp) then calls the route
// family's entry point (relay/admin/routes.hpp).

#include "relay/admin/request.hpp"

#include <cstdint>
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
};

/// A route and what its path carries.
struct api_route {
  route_kind kind = route_kind::overview;
  std::int64_t endpoint_id = 0;  ///< endpoint, endpoint_status, replay
  std::string arg;               ///< endpoint_status: the action; event: the event id (a UUID)
  bool operator==(const api_route&) const = default;
};

/// The route of `method` (GET and HEAD read, POST acts) and `target` (path under /api/, a query
/// string ignored), or the answer without one: 400 for an endpoint id that is not a positive
/// integer or an event id that is not a UUID, 405 "use GET here" / "use POST here" for a known
/// path with another method, 404 "no such API route (docs/api.md)". Pure.
std::variant<api_route, api_response> route_of(std::string_view method, std::string_view target);

/// The path's segments ("/api/endpoints/3?x" → {"api", "endpoints", "3"}); empty ones dropped. Pure.
std::vector<std::string> segments_of(std::string_view target);

}  // namespace walhook::relay
