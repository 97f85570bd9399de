// GET /api/events/{event_id} (docs/api.md): did endpoint X get event Y? Reads the facts (the
// outbox row, the routing now, newer states of its merge key, its delivery rows), decides with
// relay/admin/verdict.hpp, and writes the answer.

#include "relay/admin/db_worker.hpp"
#include "relay/admin/routes.hpp"
#include "relay/admin/verdict.hpp"
#include "relay/admin/views.hpp"
#include "relay/core/outcome_log.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/status.hpp"

#include "common/json_writer.hpp"
#include "delivery/url.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <vector>

namespace walhook::relay {
namespace asio = boost::asio;

namespace {

/// The event's walhook.outbox row.
struct outbox_event {
  std::string id;
  std::string tenant_id;
  std::string event_type;
  std::optional<std::string> created_at;   ///< RFC 3339 UTC
  std::optional<std::int64_t> endpoint_id; ///< the direct route, if any
};

/// What the database knows of the event: its row, and the facts the verdicts need.
struct event_reads {
  std::optional<outbox_event> event;
  std::map<std::int64_t, delivery_row> rows;  ///< endpoint → its delivery row of the event
  event_facts facts;                          ///< without the record's part (recent, window)
};

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
/// never gets it (the stream routed it before the endpoint existed).
std::vector<route_match> read_routes(blocking_db& db, const pg::params& p) {
  auto r = db.exec(R"sql(
SELECT e.id, e.created_at > o.created_at, e.created_at FROM walhook.outbox o
  JOIN walhook.endpoints e ON e.tenant_id = o.tenant_id
 WHERE o.id = $1::uuid
   AND CASE WHEN o.endpoint_id IS NOT NULL THEN e.id = o.endpoint_id
            ELSE e.event_types IS NULL OR o.event_type = ANY (e.event_types) END)sql",
                   p);
  std::vector<route_match> out;
  for (int i = 0; i < r.rows(); ++i)
    out.push_back({.endpoint_id = r.integer(i, 0),
                   .added_after = r.value(i, 1) == "t",
                   .endpoint_created_at = operations::timestamp_of(r, i, 2).value_or("")});
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

event_reads read_facts(blocking_db& db, const std::string& event_id) {
  const pg::params p{event_id};
  event_reads out;
  out.event = read_event(db, p, out.facts.created_at);
  out.facts.outbox_row = out.event.has_value();
  out.facts.routes = read_routes(db, p);
  out.facts.merged_into = read_merged(db, p);
  out.rows = read_rows(db, p);
  for (const auto& [id, row] : out.rows) out.facts.row_status[id] = row.status;
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
void write_endpoint_line(json_writer& j, const endpoint_verdict& v, const event_reads& reads,
                         const std::map<std::int64_t, std::string>& urls) {
  j.begin_object().field("endpoint_id", v.endpoint_id).key("url");
  if (auto u = urls.find(v.endpoint_id); u != urls.end()) j.string(u->second);
  else j.null();  // removed since
  j.field("routed", v.routed).field("routed_reason", v.routed_reason).key("delivery");
  if (auto r = reads.rows.find(v.endpoint_id); r != reads.rows.end()) {
    j.begin_object();
    write_delivery(j, r->second);
    j.end_object();
  } else {
    j.null();
  }
  j.key("recent_outcomes").begin_array();
  for (const auto& e : reads.facts.recent) {
    if (e.endpoint_id != v.endpoint_id) continue;
    j.begin_object();
    write_outcome(j, e);
    j.end_object();
  }
  j.end_array();
  j.field("verdict", v.verdict).field("reason", v.reason).end_object();
}

api_response event_view(const event_reads& reads, const std::vector<endpoint_verdict>& verdicts,
                        const std::map<std::int64_t, std::string>& urls) {
  json_writer j;
  j.begin_object().key("event");
  write_event(j, reads.event);
  j.key("endpoints").begin_array();
  for (const auto& v : verdicts) write_endpoint_line(j, v, reads, urls);
  j.end_array();
  j.field("note", record_note(reads.facts.window));
  j.end_object();
  return api_response{200, j.take()};
}

}  // namespace

asio::awaitable<api_response> get_event(const route_context& ctx, const std::string& event_id) {
  const auto& log = ctx.eng.recent_outcomes();
  return ctx.worker.run([event_id, recent = log.of_event(event_id),
                         window = record_window{.kept = log.size(), .oldest = log.oldest()}](blocking_db& db) {
    auto reads = read_facts(db, event_id);
    reads.facts.recent = recent;
    reads.facts.window = window;
    const auto verdicts = event_verdicts(reads.facts);
    if (!verdicts) throw not_found(fmt::format("no event with id {} (the outbox row is gone, or never was)", event_id));
    return event_view(reads, *verdicts, read_urls(db, *verdicts));
  });
}

}  // namespace walhook::relay
