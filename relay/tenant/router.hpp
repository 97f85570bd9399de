#pragma once
// The tenant API's routes (docs/tenant-api.md; docs/tenant-api.openapi.json describes the same
// table, and tests/unit/relay/tenant/openapi_test.cpp fails when the two differ): which route a
// method and a path name, with what the path carries, or the 400/404/405 without one; and the
// query of GET /v1/events with its opaque cursor. Pure.

#include "relay/admin/request.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace walhook::relay::tenant {

enum class route_kind {
  events,           ///< GET /v1/events
  event,            ///< GET /v1/events/{event_id}
  endpoints,        ///< GET /v1/endpoints
  create_endpoint,  ///< POST /v1/endpoints
  endpoint,         ///< GET /v1/endpoints/{endpoint_id}
  update_endpoint,  ///< PATCH /v1/endpoints/{endpoint_id}
  delete_endpoint,  ///< DELETE /v1/endpoints/{endpoint_id}
  pause,            ///< POST /v1/endpoints/{endpoint_id}/pause
  resume,           ///< POST /v1/endpoints/{endpoint_id}/resume
  rotate_secret,    ///< POST /v1/endpoints/{endpoint_id}/rotate-secret
  test_send,        ///< POST /v1/endpoints/{endpoint_id}/test
  deliveries,       ///< GET /v1/endpoints/{endpoint_id}/deliveries
  resend,           ///< POST /v1/endpoints/{endpoint_id}/resend
  replay,           ///< POST /v1/endpoints/{endpoint_id}/replay
};

/// One row of the route table: the method, the path as OpenAPI writes it ("{endpoint_id}" for
/// a positive integer, "{event_id}" for a UUID), the route, and whether it changes anything
/// (a read-scope token may use only the others).
struct route_spec {
  std::string_view method;
  std::string_view path;
  route_kind kind;
  bool changes;
};
/// Every route, in docs/tenant-api.md's order.
std::span<const route_spec> routes();

/// A route and what its path carries.
struct route {
  route_kind kind = route_kind::events;
  bool changes = false;
  std::int64_t endpoint_id = 0;  ///< routes under /v1/endpoints/{endpoint_id}
  std::string event_id;          ///< event: a UUID
};

/// The route of `method` and `target` (path and query), or the answer without one: 404 "no such
/// route", 405 naming the methods the path has, 400 for an endpoint id that is not a positive
/// integer or an event id that is not a UUID.
std::variant<route, api_response> route_of(std::string_view method, std::string_view target);

/// Where a reading of GET /v1/events stands. A reading is one view of the outbox: the events
/// whose transactions `upper` (a pg_snapshot, PostgreSQL's text "xmin:xmax:xip,…") shows, and —
/// after a resume — that `lower` did not, in (created_at, seq) order. Every event a cursor's
/// pages have not shown yet is ahead of it: in the rest of the view, or in a later one (its
/// transaction committed after `upper` was taken, whatever its created_at).
struct events_cursor_state {
  std::string lower;  ///< the previous view's snapshot; empty: none (the first reading)
  std::string upper;  ///< this view's snapshot; empty: taken by the request (a resume_cursor)
  /// The last event shown of this view: its created_at (PostgreSQL's text) and seq.
  std::optional<std::pair<std::string, std::int64_t>> after;
  /// filters_digest() of the reading's filters: a cursor serves the filters it was made with.
  std::string filters;
  /// The database's history the views belong to: "<system identifier>.<timeline>" (PostgreSQL's
  /// pg_control_system() and the first 8 hex digits of pg_walfile_name(), whose timeline a
  /// promotion or a point-in-time recovery changes). Empty in a cursor from before it (c2).
  std::string history;
  bool operator==(const events_cursor_state&) const = default;
};
/// GET /v1/events: ?since, ?until (RFC 3339; PostgreSQL checks them), ?type (repeatable or
/// comma-separated), ?limit (1..1000, default 100), ?cursor (a previous page's next_cursor or
/// resume_cursor).
struct events_query {
  std::optional<std::string> since, until;
  std::vector<std::string> types;
  std::int64_t limit = 100;
  std::optional<events_cursor_state> cursor;
};
inline constexpr std::int64_t events_page_max = 1000;
/// The query of `target`, or 400 naming the parameter. Unknown parameters are refused (a
/// misspelt "sinse" must not widen the answer).
std::variant<events_query, api_response> events_query_of(std::string_view target);

/// GET /v1/endpoints/{id}/deliveries: ?status (pending | sending | delivered | dead), ?limit
/// (1..500, default 50).
struct deliveries_query {
  std::optional<std::string> status;
  std::int64_t limit = 50;
};
std::variant<deliveries_query, api_response> deliveries_query_of(std::string_view target);

/// The opaque cursor of `state`: base64url, no padding. Pure.
std::string events_cursor(const events_cursor_state& state);
/// The state a cursor holds; nullopt if `text` is not one events_cursor wrote (snapshots as
/// PostgreSQL's pg_snapshot_in accepts them, a timestamp's characters only, a positive seq).
std::optional<events_cursor_state> parse_events_cursor(std::string_view text);
/// 16 hex digits of SHA-256 of the query's since, until and types, as given. Pure.
std::string filters_digest(const events_query& q);

/// A pg_snapshot's text taken apart ("xmin:xmax:xip,…", already checked by the parser or made
/// by PostgreSQL). Pure.
std::uint64_t snapshot_xmax(std::string_view snapshot);
/// Its transactions in progress as an xid8[] literal: "{741,743}".
std::string snapshot_xip_array(std::string_view snapshot);
/// `snapshot`, or — if its text is longer than `max_size` — the earlier snapshot that shows the
/// same transactions below its first in-progress ones only: xmax lowered to the first xip left
/// out. It shows nothing `snapshot` does not; what it leaves out comes in the next view. Keeps
/// a cursor holding two snapshots within the request line however many writers are busy. Pure.
std::string bounded_snapshot(std::string_view snapshot, std::size_t max_size);
/// The longest snapshot text a view takes (bounded_snapshot): two fit in a cursor.
inline constexpr std::size_t view_snapshot_max = 2000;
/// The snapshot of the view a reading takes now: bounded_snapshot(now, view_snapshot_max) — or
/// `lower`, the previous view, if that cut would be below it (a cut keeps fewer transactions in
/// progress once the xid counter gains a digit); a view then never hides what an earlier one
/// showed. `lower` empty: a first reading. Pure.
std::string next_view(std::string_view now, std::string_view lower);

}  // namespace walhook::relay::tenant
