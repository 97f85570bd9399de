// "Did endpoint X get event Y?": reads the facts (relay/admin/event_answer.hpp), decides with
// relay/admin/verdict.hpp, and writes the answer of GET /api/events/{id} (docs/api.md).

#include "relay/admin/event_answer.hpp"

#include "common/json_writer.hpp"
#include "delivery/job.hpp"
#include "delivery/url.hpp"
#include "relay/core/payload_filter.hpp"
#include "relay/operations/status.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace walhook::relay {

namespace {

std::optional<outbox_event> read_event(blocking_db& db, const pg::params& p, std::optional<sys_micros>& created) {
  auto ev =
      db.exec("SELECT id, tenant_id, event_type, created_at, endpoint_id FROM walhook.outbox WHERE id = $1::uuid", p);
  if (ev.rows() == 0) return std::nullopt;
  created = parse_pg_timestamptz(ev.value(0, 3));
  return outbox_event{.id = std::string(ev.value(0, 0)),
                      .tenant_id = std::string(ev.value(0, 1)),
                      .event_type = std::string(ev.value(0, 2)),
                      .created_at = operations::timestamp_of(ev, 0, 3),
                      .endpoint_id = ev.optional_integer(0, 4)};
}

/// The endpoints its tenant and type (or direct route) match now; one created after the event
/// committed never gets it — its created_snapshot (migration 008) shows the event's transaction
/// as committed; an endpoint of before 008, by walhook's times. One whose payload filter
/// (migration 012) does not match the event's webhook body is filtered: never routed there.
std::vector<route_match> read_routes(blocking_db& db, const pg::params& p) {
  auto r = db.exec(R"sql(
SELECT e.id, coalesce(pg_visible_in_snapshot(o.xid, e.created_snapshot), e.created_at > o.stored_at), e.created_at,
       CASE WHEN o.endpoint_id IS NULL THEN e.filter::text END, o.id, o.event_type, o.created_at, o.payload::text
  FROM walhook.outbox o
  JOIN walhook.endpoints e ON e.tenant_id = o.tenant_id
 WHERE o.id = $1::uuid
   AND CASE WHEN o.endpoint_id IS NOT NULL THEN e.id = o.endpoint_id
            ELSE e.event_types IS NULL OR o.event_type = ANY (e.event_types) END)sql",
                   p);
  std::vector<route_match> out;
  for (int i = 0; i < r.rows(); ++i) {
    route_match m{.endpoint_id = r.integer(i, 0),
                  .added_after = r.value(i, 1) == "t",
                  .endpoint_created_at = operations::timestamp_of(r, i, 2).value_or("")};
    if (auto filter = r.optional_value(i, 3)) {
      // The body walhook sends (rows.cpp, event_from_row): the filter's paths are into it.
      delivery::event ev;
      ev.id = std::string(r.value(i, 4));
      ev.type = std::string(r.value(i, 5));
      ev.created_at = pg_timestamptz_to_iso8601(r.value(i, 6)).value_or(std::string(r.value(i, 6)));
      ev.payload = std::string(r.value(i, 7));
      auto compiled = payload_filter::compile(*filter);
      // Not matched: filtered. A filter that does not compile, or a body it cannot read, ends the
      // delivery dead with the reason instead (its row says so).
      if (compiled && compiled->evaluate(delivery::make_body(ev)) == payload_filter::result::no_match) m.filtered = *filter;
    }
    out.push_back(std::move(m));
  }
  return out;
}

/// A newer state of its merge key with a row, per endpoint: this one was merged into it
/// (superseded in memory, so it never got a row of its own).
std::map<std::int64_t, merge_successor> read_merged(blocking_db& db, const pg::params& p) {
  auto r = db.exec(R"sql(
SELECT DISTINCT ON (d.endpoint_id) d.endpoint_id, d.event_id, d.status
  FROM walhook.outbox o
  JOIN walhook.endpoints e ON e.tenant_id = o.tenant_id
  JOIN walhook.deliveries d ON d.endpoint_id = e.id AND d.merge_key = o.merge_key AND d.event_id <> o.id
   AND d.event_created_at > o.created_at AND d.status IN ('pending', 'sending', 'delivered')
 WHERE o.id = $1::uuid AND o.merge_key IS NOT NULL
 ORDER BY d.endpoint_id, d.event_created_at DESC)sql",
                   p);
  std::map<std::int64_t, merge_successor> out;
  for (int i = 0; i < r.rows(); ++i)
    out[r.integer(i, 0)] = {.event_id = std::string(r.value(i, 1)), .status = std::string(r.value(i, 2))};
  return out;
}

/// A newer state of its merge key routed to each endpoint, row or not: the event may have been
/// merged into it in memory or in a cursor's page. "Newer" by the outbox's order (inserted
/// later, or by a later transaction); the index on (tenant_id, created_at) bounds the scan,
/// with an hour's slack for a transaction that began before the event's and inserted after it.
std::map<std::int64_t, std::string> read_newer_states(blocking_db& db, const pg::params& p) {
  auto r = db.exec(R"sql(
SELECT e.id, n.id FROM walhook.outbox o
  JOIN walhook.endpoints e ON e.tenant_id = o.tenant_id
  CROSS JOIN LATERAL (
    SELECT o2.id FROM walhook.outbox o2
     WHERE o2.tenant_id = o.tenant_id AND o2.created_at >= o.created_at - interval '1 hour'
       AND o2.merge_key = o.merge_key AND o2.id <> o.id AND (o2.seq > o.seq OR o2.xid > o.xid)
       AND CASE WHEN o2.endpoint_id IS NOT NULL THEN o2.endpoint_id = e.id
                ELSE e.event_types IS NULL OR o2.event_type = ANY (e.event_types) END
     ORDER BY o2.seq DESC LIMIT 1) n
 WHERE o.id = $1::uuid AND o.merge_key IS NOT NULL)sql",
                   p);
  std::map<std::int64_t, std::string> out;
  for (int i = 0; i < r.rows(); ++i) out[r.integer(i, 0)] = std::string(r.value(i, 1));
  return out;
}

/// Its delivery rows: one index probe per endpoint (deliveries are keyed by endpoint first).
std::map<std::int64_t, delivery_row> read_rows(blocking_db& db, const pg::params& p) {
  auto r = db.exec(fmt::format(R"sql(
SELECT d.endpoint_id, {} FROM walhook.endpoints e
  CROSS JOIN LATERAL (SELECT * FROM walhook.deliveries x WHERE x.endpoint_id = e.id AND x.event_id = $1::uuid
                         AND x.created_at >= e.created_at) d
  LEFT JOIN walhook.outbox o ON o.id = d.event_id)sql",
                               deliveries_columns),
                   p);
  std::map<std::int64_t, delivery_row> out;
  for (int i = 0; i < r.rows(); ++i) out[r.integer(i, 0)] = delivery_of(r, i, 1);
  return out;
}

/// The delivered snapshot's word on the event's transaction: the slot streaming its tenant (the
/// layout's shard of it, relay/core/shard.hpp; with no base name given, the one slot of this
/// cluster's walhook.slot_progress for that shard), whether that slot's snapshot — one this
/// cluster recorded (its system identifier) — shows the xid, and what casts doubt on it: a
/// backfill of the slot not finished whose range may hold it (not an operator's: those send
/// again what was handled), or a slot incident that could not be backfilled before it.
stream_facts read_stream(blocking_db& db, const std::string& event_id, const std::string& slot_base) {
  auto r = db.exec(R"sql(
WITH ev AS (SELECT tenant_id, xid FROM walhook.outbox WHERE id = $1::uuid),
     sys AS (SELECT system_identifier::text AS id FROM pg_control_system()),
     shard AS (SELECT l.n, format('_%s_of_%s', (hashtext(ev.tenant_id) & 2147483647) % l.n, l.n) AS suffix
                 FROM ev, (SELECT coalesce((SELECT shards FROM walhook.shard_layout), 1) AS n) l),
     slot AS (
       SELECT CASE WHEN $2::text <> '' THEN CASE WHEN shard.n = 1 THEN $2::text ELSE $2::text || shard.suffix END
                   ELSE (SELECT min(p.slot_name) FROM walhook.slot_progress p, sys
                          WHERE p.system_id = sys.id
                            AND CASE WHEN shard.n = 1 THEN p.slot_name !~ '_[0-9]+_of_[0-9]+$'
                                     ELSE right(p.slot_name, length(shard.suffix)) = shard.suffix END
                         HAVING count(*) = 1) END AS name
         FROM shard),
     progress AS (SELECT p.delivered_snapshot FROM walhook.slot_progress p, sys, slot
                   WHERE p.slot_name = slot.name AND p.system_id = sys.id AND p.delivered_snapshot IS NOT NULL)
SELECT coalesce(slot.name, ''), coalesce(ev.xid::text, ''),
       (SELECT pg_visible_in_snapshot(ev.xid, progress.delivered_snapshot) FROM progress),
       EXISTS (SELECT 1 FROM progress),
       (SELECT min(r.id) FROM walhook.recoveries r
         WHERE r.slot_name = slot.name AND r.state IN ('creating_slot', 'pending') AND r.since_time IS NULL
           AND (r.since_snapshot IS NULL OR NOT pg_visible_in_snapshot(ev.xid, r.since_snapshot))),
       (SELECT min(r.id) FROM walhook.recoveries r
         WHERE r.slot_name = slot.name AND r.state = 'skipped'
           AND (r.until_snapshot IS NULL OR pg_visible_in_snapshot(ev.xid, r.until_snapshot)))
  FROM ev, slot)sql",
                   pg::params{event_id, slot_base});
  stream_facts s;
  if (r.rows() == 0) return s;
  s.slot = std::string(r.value(0, 0));
  s.xid = std::string(r.value(0, 1));
  if (!r.is_null(0, 2)) s.in_delivered_snapshot = r.value(0, 2) == "t";
  if (!s.xid.empty() && s.slot.empty())
    s.unavailable = "no single slot of this cluster in walhook.slot_progress streams the event's tenant (give the slot "
                    "walhook run streams: --slot)";
  else if (!s.xid.empty() && r.value(0, 3) != "t")
    s.unavailable = fmt::format("walhook has recorded no delivered snapshot for slot {} (not yet, or not the slot walhook "
                                "run streams: --slot)",
                                s.slot);
  if (!r.is_null(0, 4))
    s.doubt = fmt::format("backfill {} of that slot (walhook.recoveries) has not finished, and the event may be among what "
                          "it still sends",
                          r.value(0, 4));
  else if (!r.is_null(0, 5))
    s.doubt = fmt::format("slot incident {} of that slot could not be backfilled (no delivered snapshot before it), and "
                          "the event may be among what the lost slot held",
                          r.value(0, 5));
  return s;
}

/// The endpoints of its tenant that follow walhook.outbox by cursor, and whether each cursor
/// covers the event's transaction (sql/migrations/007: visible in `covered`, in `also`, or a row
/// of the open window up to `window_after`) or still owes it.
std::map<std::int64_t, cursor_fact> read_cursors(blocking_db& db, const pg::params& p) {
  auto r = db.exec(R"sql(
SELECT c.endpoint_id,
       CASE WHEN o.xid IS NOT NULL THEN
         pg_visible_in_snapshot(o.xid, c.covered) OR o.xid = ANY (c.also)
         OR coalesce(pg_visible_in_snapshot(o.xid, c.window_snapshot) AND o.seq <= c.window_after, false) END,
       c.entered_at
  FROM walhook.outbox o
  JOIN walhook.endpoint_cursors c ON c.tenant_id = o.tenant_id
  JOIN walhook.endpoints e ON e.id = c.endpoint_id AND e.tenant_id = c.tenant_id
 WHERE o.id = $1::uuid)sql",
                   p);
  std::map<std::int64_t, cursor_fact> out;
  for (int i = 0; i < r.rows(); ++i) {
    cursor_fact c{.covers = std::nullopt, .since = operations::timestamp_of(r, i, 2).value_or("")};
    if (!r.is_null(i, 1)) c.covers = r.value(i, 1) == "t";
    out[r.integer(i, 0)] = c;
  }
  return out;
}

/// Given-up cursor ranges (walhook.dead_ranges) of this endpoint that hold the event.
std::map<std::int64_t, dead_range_fact> read_dead_ranges(blocking_db& db, const pg::params& p) {
  auto r = db.exec(R"sql(
SELECT DISTINCT ON (d.endpoint_id) d.endpoint_id, d.id, d.reason, d.created_at
  FROM walhook.outbox o
  JOIN walhook.dead_ranges d ON d.tenant_id = o.tenant_id
  JOIN walhook.endpoints e ON e.id = d.endpoint_id AND e.tenant_id = d.tenant_id AND d.created_at >= e.created_at
 WHERE o.id = $1::uuid AND o.xid IS NOT NULL
   AND pg_visible_in_snapshot(o.xid, d.until_snapshot) AND NOT pg_visible_in_snapshot(o.xid, d.covered)
   AND o.xid <> ALL (d.also)
 ORDER BY d.endpoint_id, d.id)sql",
                   p);
  std::map<std::int64_t, dead_range_fact> out;
  for (int i = 0; i < r.rows(); ++i)
    out[r.integer(i, 0)] = {.id = r.integer(i, 1),
                            .reason = std::string(r.value(i, 2)),
                            .at = operations::timestamp_of(r, i, 3).value_or("")};
  return out;
}

/// The endpoints' URLs (redacted); an endpoint removed since has none.
std::map<std::int64_t, std::string> read_urls(blocking_db& db, const std::vector<endpoint_verdict>& shown) {
  std::vector<std::int64_t> ids;
  for (const auto& v : shown) ids.push_back(v.endpoint_id);
  auto r = db.exec("SELECT id, url FROM walhook.endpoints WHERE id = ANY ($1::bigint[])",
                   pg::params{"{" + fmt::format("{}", fmt::join(ids, ",")) + "}"});
  std::map<std::int64_t, std::string> out;
  for (int i = 0; i < r.rows(); ++i) out[r.integer(i, 0)] = delivery::redact_url(r.value(i, 1));
  return out;
}

void write_event(json_writer& j, const std::optional<outbox_event>& ev) {
  if (!ev) {
    j.null();
    return;
  }
  j.begin_object().field("id", ev->id).field("tenant_id", ev->tenant_id).field("event_type", ev->event_type);
  j.field("created_at", ev->created_at).field("endpoint_id", ev->endpoint_id).end_object();
}

/// One endpoint's line: its URL, routing, row, attempts (oldest first) and verdict.
void write_endpoint_line(json_writer& j, const endpoint_verdict& v, const event_answer& a) {
  j.begin_object().field("endpoint_id", v.endpoint_id).key("url");
  if (auto u = a.urls.find(v.endpoint_id); u != a.urls.end()) j.string(u->second);
  else j.null();  // removed since
  j.field("routed", v.routed).field("routed_reason", v.routed_reason).key("delivery");
  if (auto r = a.rows.find(v.endpoint_id); r != a.rows.end()) {
    j.begin_object();
    write_delivery(j, r->second);
    j.end_object();
  } else {
    j.null();
  }
  j.key("recent_outcomes").begin_array();
  for (const auto& e : a.facts.recent) {
    if (e.endpoint_id != v.endpoint_id) continue;
    j.begin_object();
    write_outcome(j, e);
    j.end_object();
  }
  j.end_array();
  j.field("verdict", v.verdict).field("reason", v.reason).end_object();
}

}  // namespace

std::optional<event_answer> answer_event(blocking_db& db, const std::string& event_id, const std::string& slot_base,
                                         std::vector<outcome_entry> recent, record_window window) {
  const pg::params p{event_id};
  event_answer a;
  a.event = read_event(db, p, a.facts.created_at);
  a.facts.outbox_row = a.event.has_value();
  a.facts.routes = read_routes(db, p);
  a.facts.merged_into = read_merged(db, p);
  a.rows = read_rows(db, p);
  for (const auto& [id, row] : a.rows) a.facts.row_status[id] = row.status;
  if (a.event) {
    a.facts.stream = read_stream(db, event_id, slot_base);
    a.facts.cursors = read_cursors(db, p);
    a.facts.dead_ranges = read_dead_ranges(db, p);
    a.facts.newer_states = read_newer_states(db, p);
  }
  a.facts.recent = std::move(recent);
  a.facts.window = window;
  auto verdicts = event_verdicts(a.facts);
  if (!verdicts) return std::nullopt;
  a.verdicts = std::move(*verdicts);
  a.urls = read_urls(db, a.verdicts);
  a.note = record_note(window);
  return a;
}

std::string event_json(const event_answer& a) {
  json_writer j;
  j.begin_object().key("event");
  write_event(j, a.event);
  j.key("endpoints").begin_array();
  for (const auto& v : a.verdicts) write_endpoint_line(j, v, a);
  j.end_array();
  j.field("note", a.note);
  j.end_object();
  return j.take();
}

}  // namespace walhook::relay
