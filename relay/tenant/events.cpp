// GET /v1/events (reconciliation: the tenant's events in order, a page at a time) and
// GET /v1/events/{id} (one event with each of the tenant's endpoints' verdicts).

#include "common/json_writer.hpp"
#include "common/time.hpp"
#include "relay/admin/event_answer.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"
#include "relay/tenant/handlers.hpp"

#include <fmt/format.h>

#include <set>

namespace walhook::relay::tenant {

namespace {

/// The tenant's events after the filters: walhook's own rows (notifications, test sends: routed
/// to one endpoint) and rows an outbox bridge refused (never events) are left out.
constexpr const char* events_select =
    "SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox "
    "WHERE tenant_id = $1 AND rejected IS NULL AND endpoint_id IS NULL "
    "AND created_at >= coalesce($2::timestamptz, now() - interval '30 days') "
    "AND created_at < coalesce($3::timestamptz, 'infinity') "
    "AND ($4::text[] IS NULL OR event_type = ANY ($4::text[])) ";

std::string rfc3339(const pg::query_result& r, int row, int col) {
  return pg_timestamptz_to_iso8601(r.value(row, col)).value_or(std::string(r.value(row, col)));
}

}  // namespace

api_response list_events(blocking_db& db, const caller& c, const api_request& req) {
  auto parsed = events_query_of(req.target);
  if (auto* refused = std::get_if<api_response>(&parsed)) return std::move(*refused);
  const auto& q = std::get<events_query>(parsed);
  const auto filters = filters_digest(q);
  auto view = q.cursor.value_or(events_cursor_state{.lower = {}, .upper = {}, .after = {}, .filters = filters});
  if (view.filters != filters)
    return error_response(400, "this cursor belongs to a reading with other filters: give since, until and type as "
                               "they were, or start a new reading without the cursor");
  const std::string now(db.exec("SELECT pg_current_snapshot()::text").value(0, 0));
  const auto now_xmax = snapshot_xmax(now);
  // A view ahead of the database: a failover to a standby that had not replayed all of it, or a
  // restore. Transactions numbered from now on could pass for ones that view showed.
  if ((!view.lower.empty() && snapshot_xmax(view.lower) > now_xmax) || (!view.upper.empty() && snapshot_xmax(view.upper) > now_xmax))
    return error_response(409, "this cursor is ahead of the database (a failover or a restore since it was made): "
                               "start a new reading from a since before the last event you have");
  // A first reading or a resume: the view is what has committed by now (bounded_snapshot keeps
  // the cursor within the request line when many writers are busy).
  if (view.upper.empty()) view.upper = bounded_snapshot(now, view_snapshot_max);
  // xid: the inserting transaction (migration 005; NULL only on rows from before it). A row seen
  // with an xid at or past the database's next one was restored from another cluster: it counts
  // as old, shown by the first reading.
  pg::params p{c.holder.tenant, q.since, q.until,
               q.types.empty() ? std::nullopt : std::optional<std::string>(operations::pg_array_literal(q.types)),
               std::to_string(q.limit + 1), view.upper, std::to_string(now_xmax)};
  std::string sql = std::string(events_select) +
                    "AND (xid IS NULL OR xid >= $7::xid8 OR pg_visible_in_snapshot(xid, $6::pg_snapshot)) ";
  if (!view.lower.empty()) {
    // A resume: only what the previous view did not show — a transaction from its xmax on, or
    // one it saw in progress. Both are lookups of the index outbox_xid, however long a
    // transaction has been open (its xmin would be far back).
    sql += "AND xid < $7::xid8 AND (xid >= $8::xid8 OR xid = ANY ($9::xid8[])) ";
    p.push_back(std::to_string(snapshot_xmax(view.lower)));
    p.push_back(snapshot_xip_array(view.lower));
  }
  if (view.after) {
    // A row comparison the index (tenant_id, created_at, seq) serves (migration 015).
    sql += fmt::format("AND (tenant_id, created_at, seq) > ($1, ${}::timestamptz, ${}::bigint) ", p.size() + 1, p.size() + 2);
    p.push_back(view.after->first);
    p.push_back(std::to_string(view.after->second));
  }
  sql += "ORDER BY created_at, seq LIMIT $5::int";
  auto r = db.exec(sql, p);
  const int shown = std::min<int>(r.rows(), static_cast<int>(q.limit));
  json_writer j;
  j.begin_object().key("data").begin_array();
  for (int i = 0; i < shown; ++i) {
    j.begin_object()
        .field("id", r.value(i, 0))
        .field("type", r.value(i, 1))
        .field("timestamp", rfc3339(r, i, 2))
        .key("data")
        .raw(r.value(i, 3))
        .end_object();
  }
  j.end_array().key("next_cursor");
  if (r.rows() > q.limit) {
    view.after = std::pair{std::string(r.value(shown - 1, 4)), r.integer(shown - 1, 5)};
    j.string(events_cursor(view));
  } else {
    // The view is read to its end: what commits from now on, whatever its created_at, comes
    // after the resume_cursor.
    j.null().key("resume_cursor").string(events_cursor({view.upper, "", std::nullopt, filters}));
  }
  j.end_object();
  return {200, j.take()};
}

api_response get_event(blocking_db& db, const caller& c, const std::string& event_id, std::vector<outcome_entry> recent,
                       record_window window) {
  auto row = db.exec(
      "SELECT id, event_type, created_at, payload::text FROM walhook.outbox "
      "WHERE id = $1::uuid AND tenant_id = $2 AND rejected IS NULL AND endpoint_id IS NULL",
      pg::params{event_id, c.holder.tenant});
  if (row.rows() == 0) throw not_found(fmt::format("no event {}", event_id));
  auto own = db.exec("SELECT id FROM walhook.endpoints WHERE tenant_id = $1", pg::params{c.holder.tenant});
  std::set<std::int64_t> endpoints;
  for (int i = 0; i < own.rows(); ++i) endpoints.insert(own.integer(i, 0));
  auto answer = answer_event(db, event_id, c.slot_base, std::move(recent), window);
  json_writer j;
  j.begin_object()
      .field("id", row.value(0, 0))
      .field("type", row.value(0, 1))
      .field("timestamp", rfc3339(row, 0, 2))
      .key("data")
      .raw(row.value(0, 3))
      .key("endpoints")
      .begin_array();
  if (answer) {
    for (const auto& v : answer->verdicts) {
      if (!endpoints.contains(v.endpoint_id)) continue;  // only the tenant's own, now
      j.begin_object().field("endpoint_id", v.endpoint_id).field("verdict", v.verdict).field("reason", v.reason);
      j.key("delivery");
      if (auto d = answer->rows.find(v.endpoint_id); d != answer->rows.end()) {
        j.begin_object();
        write_delivery(j, d->second);
        j.end_object();
      } else {
        j.null();
      }
      j.end_object();
    }
  }
  j.end_array().end_object();
  return {200, j.take()};
}

}  // namespace walhook::relay::tenant
