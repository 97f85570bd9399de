// `walhook status`: per endpoint its pending, sending and dead rows, oldest pending age and
// failures, worst first; with --admin-url also the running walhook's live queued and in_flight
// (relay/cli/admin_client.hpp); then the slot incidents and backfills (walhook.recoveries).

#include "common/json_writer.hpp"
#include "delivery/url.hpp"
#include "relay/admin/access.hpp"
#include "relay/cli/admin_client.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <iostream>
#include <map>
#include <memory>
#include <optional>

namespace walhook::relay::cli {

namespace {

struct status_args {
  std::string database_url;
  bool json = false;
  std::string admin_url;         ///< a running walhook's admin listener, for its live queued/in_flight ("": not shown)
  std::string admin_token_file;  ///< its bearer token, if it needs one
};

/// Live numbers of one endpoint in a running walhook (GET /api/endpoints, docs/api.md).
struct live_numbers {
  std::int64_t queued = 0;
  std::int64_t in_flight = 0;
};

std::map<std::int64_t, live_numbers> fetch_live(const status_args& a) {
  const std::string token = a.admin_token_file.empty() ? "" : read_token_file(a.admin_token_file);
  const std::string body = admin_get(a.admin_url, "/api/endpoints", token);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array endpoints;
  if (parser.parse(body).get(doc) || doc["endpoints"].get_array().get(endpoints))
    throw cli_error(fmt::format("--admin-url {}: GET /api/endpoints did not answer {{\"endpoints\": [...]}}", a.admin_url));
  // A standby holds nothing in memory: its zeros would read as "nothing in flight".
  bool streaming = true;
  simdjson::dom::parser overview_parser;  // its own: a second parse would invalidate `endpoints`
  simdjson::dom::element overview;
  std::string overview_body;
  try {
    overview_body = admin_get(a.admin_url, "/api/overview", token);
  } catch (const cli_error&) {
    // an older walhook, or a database hiccup: the endpoints' numbers still stand
  }
  if (!overview_body.empty() && !overview_parser.parse(overview_body).get(overview) &&
      !overview["streaming"].get_bool().get(streaming) && !streaming)
    std::cerr << "walhook: " << a.admin_url << " is not streaming the slot (a standby, or reconnecting): its live "
              << "numbers are 0; give the --admin-url of the instance that streams\n";
  std::map<std::int64_t, live_numbers> out;
  for (auto e : endpoints) {
    std::int64_t id = 0, queued = 0, in_flight = 0;
    if (e["id"].get_int64().get(id) || e["queued"].get_int64().get(queued) || e["in_flight"].get_int64().get(in_flight))
      continue;
    out[id] = {queued, in_flight};
  }
  return out;
}

using live_map = std::optional<std::map<std::int64_t, live_numbers>>;

/// The live numbers, if --admin-url is given and answers; walhook down is when status matters
/// most: the rows still show, the live numbers do not (a line on stderr says why).
live_map live_of(const status_args& a) {
  if (a.admin_url.empty()) return std::nullopt;
  try {
    return fetch_live(a);
  } catch (const cli_error& e) {
    std::cerr << "walhook: live numbers not shown: " << e.what() << "\n";
    return std::nullopt;
  }
}

/// One row per endpoint, worst first (oldest pending age, then pending, then id). 'sending' rows
/// are claimed attempts and attempts past --max-hold-ms that walhook recorded; an attempt that
/// ends within the hold bound never writes a row (live in_flight counts it).
pg::query_result endpoint_rows(blocking_db& db) {
  return db.exec(R"sql(
SELECT e.id, e.tenant_id, e.status,
       count(d.id) FILTER (WHERE d.status = 'pending') AS pending,
       count(d.id) FILTER (WHERE d.status = 'sending') AS sending,
       extract(epoch FROM now() - min(d.event_created_at) FILTER (WHERE d.status IN ('pending', 'sending')))::bigint AS oldest_s,
       count(d.id) FILTER (WHERE d.status = 'dead') AS dead,
       coalesce(h.consecutive_failures, 0),
       to_char(h.paused_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       h.last_error, h.disabled_reason, e.url, coalesce(h.paused_until > now(), false)
  FROM walhook.endpoints e
  LEFT JOIN walhook.deliveries d ON d.endpoint_id = e.id AND d.status IN ('pending', 'sending', 'dead')
        AND d.created_at >= e.created_at  -- not a removed endpoint's that had the same id
  LEFT JOIN walhook.endpoint_health h ON h.endpoint_id = e.id
 GROUP BY e.id, h.endpoint_id
 ORDER BY oldest_s DESC NULLS LAST, pending DESC, e.id)sql");
}

/// Reads endpoint_rows()' columns.
struct row_reader {
  const pg::query_result& r;
  const live_map& live;
  long long number(int i, int c) const { return std::stoll(std::string(r.value(i, c))); }
  std::optional<std::string> text(int i, int c) const {
    return r.is_null(i, c) ? std::nullopt : std::optional<std::string>(delivery::cap_text(r.value(i, c)));
  }
  std::optional<live_numbers> live_at(int i) const {
    if (!live) return std::nullopt;
    auto it = live->find(number(i, 0));
    return it == live->end() ? live_numbers{} : it->second;  // not in memory there: nothing queued or in flight
  }
};

/// --json: one object per endpoint, absent values null.
void print_json(const row_reader& rows) {
  const auto& r = rows.r;
  for (int i = 0; i < r.rows(); ++i) {
    const auto l = rows.live_at(i);
    json_writer j;
    j.begin_object()
        .field("endpoint_id", rows.number(i, 0))
        .field("tenant_id", std::string(r.value(i, 1)))
        .field("status", std::string(r.value(i, 2)))
        .field("paused_by_breaker", r.value(i, 2) == "active" && r.value(i, 12) == "t")
        .field("pending", rows.number(i, 3))
        .field("sending", rows.number(i, 4))
        .field("queued", l ? std::optional<std::int64_t>(l->queued) : std::nullopt)
        .field("in_flight", l ? std::optional<std::int64_t>(l->in_flight) : std::nullopt)
        .field("oldest_pending_age_s", r.is_null(i, 5) ? std::nullopt : std::optional<std::int64_t>(rows.number(i, 5)))
        .field("dead", rows.number(i, 6))
        .field("consecutive_failures", rows.number(i, 7))
        .field("paused_until", r.is_null(i, 8) ? std::nullopt : std::optional<std::string>(r.value(i, 8)))
        .field("last_error", rows.text(i, 9))
        .field("disabled_reason", rows.text(i, 10))
        .field("url", delivery::redact_url(r.value(i, 11)))
        .end_object();
    std::cout << j.str() << "\n";
  }
}

/// "42s", "7m", "3h"; "-" for none.
std::string age_text(long long age) {
  return age < 0 ? "-" : age < 120 ? fmt::format("{}s", age) : age < 7200 ? fmt::format("{}m", age / 60) : fmt::format("{}h", age / 3600);
}

/// The table: columns lined up, the tenant column as wide as the longest tenant (up to 40).
void print_table(const row_reader& rows) {
  const auto& r = rows.r;
  std::size_t tenant_width = 14;
  for (int i = 0; i < r.rows(); ++i) tenant_width = std::max(tenant_width, std::min<std::size_t>(40, r.value(i, 1).size()));
  const auto line = [tenant_width](const auto& id, const auto& tenant, auto&&... v) {
    return fmt::format("{:>6}  {:<{}} {:<16} {:>8} {:>7} {:>6} {:>9} {:>10} {:>6} {:>8}  {:<20} {}\n", id, tenant,
                       tenant_width, v...);
  };
  std::cout << line("id", "tenant", "status", "pending", "sending", "queued", "in_flight", "oldest_age", "dead", "failures",
                    "paused_until", "last_error");
  for (int i = 0; i < r.rows(); ++i) {
    std::string err = delivery::cap_text(r.is_null(i, 10) ? r.value(i, 9) : r.value(i, 10));
    std::string status(r.value(i, 2));
    if (status == "active" && r.value(i, 12) == "t") status = "paused (breaker)";
    const auto l = rows.live_at(i);
    std::cout << line(r.value(i, 0), r.value(i, 1), status, r.value(i, 3), r.value(i, 4),
                      l ? std::to_string(l->queued) : "-", l ? std::to_string(l->in_flight) : "-",
                      age_text(r.is_null(i, 5) ? -1 : rows.number(i, 5)), r.value(i, 6), r.value(i, 7),
                      r.is_null(i, 8) ? "-" : r.value(i, 8), err.empty() ? "-" : err);
  }
}

/// Slot incidents and operator backfills (relay/engine/recovery.hpp): the open ones and the last few.
void print_recoveries(blocking_db& db) {
  auto rec = db.exec(R"sql(
SELECT id, slot_name, state, reason, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       coalesce(events::text, '-'), coalesce(deliveries::text, '-')
  FROM walhook.recoveries
 WHERE state IN ('creating_slot', 'pending') OR id > (SELECT coalesce(max(id), 0) - 5 FROM walhook.recoveries)
 ORDER BY id)sql");
  if (rec.rows() == 0) return;
  const auto line = [](const auto&... v) { return fmt::format("{:>6}  {:<14} {:<13} {:<20} {:>8} {:>10}  {}\n", v...); };
  std::cout << "\nrecoveries (slot incidents and walhook recover):\n"
            << line("id", "slot", "state", "at", "events", "deliveries", "reason");
  for (int i = 0; i < rec.rows(); ++i)
    std::cout << line(rec.value(i, 0), rec.value(i, 1), rec.value(i, 2), rec.value(i, 4), rec.value(i, 5), rec.value(i, 6),
                      rec.value(i, 3));
}

/// One row per endpoint ordered by oldest pending age. `pending`/`sending`/`dead` are rows of
/// walhook.deliveries; `queued`/`in_flight` are the running walhook's live numbers, from GET
/// /api/endpoints with --admin-url (null / "-" without it).
int status(const status_args& a) {
  blocking_db db(a.database_url);
  operations::require_schema(db);
  const live_map live = live_of(a);
  const auto r = endpoint_rows(db);
  const row_reader rows{r, live};
  if (a.json) {
    print_json(rows);
    return 0;
  }
  print_table(rows);
  if (!live && a.admin_url.empty())
    std::cout << "queued/in_flight are the running walhook's live numbers: give --admin-url http://HOST:PORT (its "
                 "--admin-listen; env WALHOOK_ADMIN_URL) to show them\n";
  print_recoveries(db);
  return 0;
}

}  // namespace

command add_status(CLI::App& app) {
  auto a = std::make_shared<status_args>();
  auto* c = app.add_subcommand("status", "Per-endpoint pending, in flight, oldest pending age, failures");
  add_database_url(c, a->database_url);
  c->add_flag("--json", a->json, "One JSON object per endpoint (absent values are null)");
  c->add_option("--admin-url", a->admin_url,
                "http://HOST:PORT of the running walhook's --admin-listen: show its live queued and in_flight")
      ->envname("WALHOOK_ADMIN_URL");
  c->add_option("--admin-token-file", a->admin_token_file, "File with the admin API's bearer token");
  return {c, [a] { return status(*a); }};
}

}  // namespace walhook::relay::cli
