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
/// to one endpoint) and rows an outbox bridge refused (never events) are left out. The lower
/// bound of created_at (since) is list_events's: a cursor's row comparison replaces it.
constexpr const char* events_select =
    "SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox "
    "WHERE tenant_id = $1 AND rejected IS NULL AND endpoint_id IS NULL "
    "AND created_at < coalesce($2::timestamptz, 'infinity') "
    "AND ($3::text[] IS NULL OR event_type = ANY ($3::text[])) ";

/// The xmax of the snapshot the statement itself reads with (an InitPlan: one value, and an
/// index condition on xid): a row whose xid is at or past it was restored from another cluster.
constexpr const char* statement_xmax = "(SELECT pg_snapshot_xmax(pg_current_snapshot()))";

std::string rfc3339(const pg::query_result& r, int row, int col) {
  return pg_timestamptz_to_iso8601(r.value(row, col)).value_or(std::string(r.value(row, col)));
}

/// A page of `limit` events from `r` (the query asked for one more: whether the view goes on),
/// with the cursor that follows it.
api_response page_of(const pg::query_result& r, std::int64_t limit, events_cursor_state view) {
  const int shown = std::min<int>(r.rows(), static_cast<int>(limit));
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
  if (r.rows() > limit) {
    view.after = std::pair{std::string(r.value(shown - 1, 4)), r.integer(shown - 1, 5)};
    j.string(events_cursor(view));
  } else {
    // The view is read to its end: what commits from now on, whatever its created_at, comes
    // after the resume_cursor.
    j.null().key("resume_cursor").string(events_cursor({view.upper, "", std::nullopt, view.filters, view.history}));
  }
  j.end_object();
  return {200, j.take()};
}

}  // namespace

api_response list_events(blocking_db& db, const caller& c, const api_request& req) {
  auto parsed = events_query_of(req.target);
  if (auto* refused = std::get_if<api_response>(&parsed)) return std::move(*refused);
  const auto& q = std::get<events_query>(parsed);
  const auto filters = filters_digest(q);
  auto view = q.cursor.value_or(events_cursor_state{.lower = {}, .upper = {}, .after = {}, .filters = filters, .history = {}});
  if (view.filters != filters)
    return error_response(400, "this cursor belongs to a reading with other filters: give since, until and type as "
                               "they were, or start a new reading without the cursor");
  auto now = db.exec(
      "SELECT pg_current_snapshot()::text, system_identifier::text || '.' || left(pg_walfile_name(pg_current_wal_lsn()), 8) "
      "FROM pg_control_system()");
  const std::string_view now_snapshot = now.value(0, 0), history = now.value(0, 1);
  const auto now_xmax = snapshot_xmax(now_snapshot);
  // A view of another history — a failover (the promoted standby's timeline is new, and it may
  // not have had all of the view's transactions), a point-in-time recovery, another cluster —
  // or ahead of the database: transactions numbered from now on could pass for ones it showed.
  const bool other_history = !view.history.empty() && view.history != history;
  if (other_history || (!view.lower.empty() && snapshot_xmax(view.lower) > now_xmax) ||
      (!view.upper.empty() && snapshot_xmax(view.upper) > now_xmax))
    return error_response(409, "this cursor is ahead of the database or of another history (a failover or a restore "
                               "since it was made): start a new reading from a since before the last event you have");
  view.history = history;
  // A first reading or a resume: the view is what has committed by now, within the cursor's size.
  if (view.upper.empty()) view.upper = next_view(now_snapshot, view.lower);
  // xid: the inserting transaction (migration 005; NULL only on rows from before it). A row the
  // statement sees with an xid at or past its snapshot's xmax was restored from another cluster:
  // it counts as old, shown by the first reading.
  pg::params p{c.holder.tenant, q.until,
               q.types.empty() ? std::nullopt : std::optional<std::string>(operations::pg_array_literal(q.types)),
               view.upper};
  const auto arg = [&p](std::optional<std::string> value) {
    p.push_back(std::move(value));
    return fmt::format("${}", p.size());
  };
  std::string sql = fmt::format("{}AND (xid IS NULL OR xid >= {} OR pg_visible_in_snapshot(xid, $4::pg_snapshot)) ",
                                events_select, statement_xmax);
  if (!view.lower.empty()) {
    // A resume: only what the previous view did not show — a transaction from its xmax on, or
    // one it saw in progress. Both are lookups of the index outbox_xid, however long a
    // transaction has been open (its xmin would be far back). The bound is now's xmax, a value
    // the planner can estimate (the view shows nothing past it; restored rows stay out).
    sql += fmt::format("AND xid < {}::xid8 AND (xid >= {}::xid8 OR xid = ANY ({}::xid8[])) ", arg(std::to_string(now_xmax)),
                       arg(std::to_string(snapshot_xmax(view.lower))), arg(snapshot_xip_array(view.lower)));
  }
  if (view.after) {
    // After the last event shown: a row comparison on (created_at, seq), the start of a scan of
    // the index (tenant_id, created_at, seq) (migration 015). It is at or after since, which
    // stays out: a second lower bound of created_at would be the start instead, and the scan
    // would walk every event from since on.
    sql += fmt::format("AND (created_at, seq) > ({}::timestamptz, {}::bigint) ", arg(view.after->first),
                       arg(std::to_string(view.after->second)));
  } else {
    sql += fmt::format("AND created_at >= coalesce({}::timestamptz, now() - interval '30 days') ", arg(q.since));
  }
  sql += fmt::format("ORDER BY created_at, seq LIMIT {}::int", arg(std::to_string(q.limit + 1)));
  auto r = db.exec(sql, p);
  return page_of(r, q.limit, std::move(view));
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
