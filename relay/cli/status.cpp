// `walhook status`: per endpoint its pending, sending and dead rows, oldest pending age and
// failures, worst first (the console's order: operations::endpoint_statuses); with --admin-url also the running walhook's live queued and in_flight
// (relay/cli/admin_client.hpp); then the slot incidents and backfills (walhook.recoveries), the
// bridged outbox tables and the inbox's sources.

#include "common/json_writer.hpp"
#include "delivery/url.hpp"
#include "relay/admin/access.hpp"
#include "relay/cli/admin_client.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/schema.hpp"
#include "relay/operations/sources.hpp"
#include "relay/operations/status.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>
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
  std::string admin_ca_file;     ///< a CA (PEM) to trust for an https:// --admin-url besides the system's
};

/// Live numbers of one endpoint in a running walhook (GET /api/endpoints, docs/api.md).
struct live_numbers {
  std::int64_t queued = 0;
  std::int64_t in_flight = 0;
};

/// Every page of GET /api/endpoints (?limit=1000, then ?after=<next> until next is null; a
/// walhook from before paging answers one page without next).
std::map<std::int64_t, live_numbers> fetch_pages(const status_args& a, const admin_target& target) {
  std::map<std::int64_t, live_numbers> out;
  std::string after;
  for (int page = 0; page < 100000; ++page) {
    const std::string path = "/api/endpoints?limit=1000" + (after.empty() ? "" : "&after=" + after);
    const std::string body = admin_get(target, path);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array endpoints;
    if (parser.parse(body).get(doc) || doc["endpoints"].get_array().get(endpoints))
      throw cli_error(fmt::format("--admin-url {}: GET /api/endpoints did not answer {{\"endpoints\": [...]}}", a.admin_url));
    for (auto e : endpoints) {
      std::int64_t id = 0, queued = 0, in_flight = 0;
      if (e["id"].get_int64().get(id) || e["queued"].get_int64().get(queued) || e["in_flight"].get_int64().get(in_flight))
        continue;
      out[id] = {queued, in_flight};
    }
    std::string_view next;
    if (doc["next"].get_string().get(next) || next.empty() || next == after) break;  // null or absent: the last page
    after = std::string(next);
  }
  return out;
}

std::map<std::int64_t, live_numbers> fetch_live(const status_args& a) {
  const admin_target target{.base_url = a.admin_url,
                            .token = a.admin_token_file.empty() ? "" : read_token_file(a.admin_token_file),
                            .ca_file = a.admin_ca_file};
  auto out = fetch_pages(a, target);
  // A standby holds nothing in memory: its zeros would read as "nothing in flight".
  bool streaming = true;
  simdjson::dom::parser overview_parser;
  simdjson::dom::element overview;
  std::string overview_body;
  try {
    overview_body = admin_get(target, "/api/overview");
  } catch (const cli_error&) {
    // an older walhook, or a database hiccup: the endpoints' numbers still stand
  }
  if (!overview_body.empty() && !overview_parser.parse(overview_body).get(overview) &&
      !overview["streaming"].get_bool().get(streaming) && !streaming)
    std::cerr << "walhook: " << a.admin_url << " is not streaming the slot (a standby, or reconnecting): its live "
              << "numbers are 0; give the --admin-url of the instance that streams\n";
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

/// An endpoint's live numbers: none without --admin-url; zero when the running walhook holds
/// nothing of it in memory.
std::optional<live_numbers> live_at(const live_map& live, std::int64_t id) {
  if (!live) return std::nullopt;
  auto it = live->find(id);
  return it == live->end() ? live_numbers{} : it->second;
}

/// Seconds, rounded to the nearest whole one (how status has always shown the age).
std::optional<std::int64_t> whole_seconds(const std::optional<double>& s) {
  return s ? std::optional<std::int64_t>(std::llround(*s)) : std::nullopt;
}

std::optional<std::string> capped(const std::optional<std::string>& text) {
  return text ? std::optional<std::string>(delivery::cap_text(*text)) : std::nullopt;
}

/// "active", or "paused (breaker)" while the circuit breaker holds an active endpoint.
bool paused_by_breaker(const operations::endpoint_status& e) { return e.status == "active" && e.breaker_holds; }

/// --json: one object per endpoint, absent values null.
void print_json(const std::vector<operations::endpoint_status>& endpoints, const live_map& live) {
  for (const auto& e : endpoints) {
    const auto l = live_at(live, e.id);
    json_writer j;
    j.begin_object()
        .field("endpoint_id", e.id)
        .field("tenant_id", e.tenant_id)
        .field("status", e.status)
        .field("paused_by_breaker", paused_by_breaker(e))
        .field("pending", e.pending)
        .field("sending", e.sending)
        .field("queued", l ? std::optional<std::int64_t>(l->queued) : std::nullopt)
        .field("in_flight", l ? std::optional<std::int64_t>(l->in_flight) : std::nullopt)
        .field("oldest_pending_age_s", whole_seconds(e.oldest_pending_age_s))
        .field("following_outbox_since", e.following_outbox_since ? std::optional<std::string>(operations::to_the_second(
                                                                        *e.following_outbox_since))
                                                                  : std::nullopt)
        .field("events_drained", e.events_drained)
        .field("owed", e.owed)
        .field("dead", e.dead)
        .field("consecutive_failures", e.consecutive_failures)
        .field("paused_until", e.paused_until ? std::optional<std::string>(operations::to_the_second(*e.paused_until))
                                              : std::nullopt)
        .field("last_error", capped(e.last_error))
        .field("disabled_reason", capped(e.disabled_reason))
        .field("url", delivery::redact_url(e.url))
        .end_object();
    std::cout << j.str() << "\n";
  }
}

/// "42s", "7m", "3h"; "-" for none.
std::string age_text(std::optional<std::int64_t> age) {
  if (!age) return "-";
  const auto s = *age;
  return s < 120 ? fmt::format("{}s", s) : s < 7200 ? fmt::format("{}m", s / 60) : fmt::format("{}h", s / 3600);
}

/// The table: columns lined up, the tenant column as wide as the longest tenant (up to 40).
void print_table(const std::vector<operations::endpoint_status>& endpoints, const live_map& live) {
  std::size_t tenant_width = 14;
  for (const auto& e : endpoints) tenant_width = std::max(tenant_width, std::min<std::size_t>(40, e.tenant_id.size()));
  const auto line = [tenant_width](const auto& id, const auto& tenant, auto&&... v) {
    return fmt::format("{:>6}  {:<{}} {:<17} {:>8} {:>7} {:>7} {:>6} {:>9} {:>10} {:>6} {:>8}  {:<20} {}\n", id, tenant,
                       tenant_width, v...);
  };
  std::cout << line("id", "tenant", "status", "pending", "owed", "sending", "queued", "in_flight", "oldest_age", "dead", "failures",
                    "paused_until", "last_error");
  for (const auto& e : endpoints) {
    const std::string err = delivery::cap_text(e.disabled_reason ? *e.disabled_reason : e.last_error.value_or(""));
    const auto l = live_at(live, e.id);
    // "(outbox)": it fell behind and follows walhook.outbox by cursor; its pending count is only
    // what failed on its own.
    std::string status = paused_by_breaker(e) ? std::string("paused (breaker)") : e.status;
    if (e.following_outbox_since) status = (paused_by_breaker(e) ? std::string("paused") : e.status) + " (outbox)";
    std::cout << line(e.id, e.tenant_id, status, e.pending, e.owed,
                      e.sending, l ? std::to_string(l->queued) : "-", l ? std::to_string(l->in_flight) : "-",
                      age_text(whole_seconds(e.oldest_pending_age_s)), e.dead, e.consecutive_failures,
                      e.paused_until ? operations::to_the_second(*e.paused_until) : "-", err.empty() ? "-" : err);
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

/// The application tables bridged into walhook.outbox (walhook migrate --outbox-table, migration
/// 009). Nothing if there is none, or the role may not read walhook.outbox_bridges (sql/roles.sql
/// not run again since).
void print_bridges(blocking_db& db) {
  if (db.exec("SELECT has_table_privilege(to_regclass('walhook.outbox_bridges'), 'SELECT')").value(0, 0) != "t") return;
  auto b = db.exec(R"sql(
SELECT source, coalesce(tenant, '(column ' || (columns->>'tenant') || ')'), columns::text
  FROM walhook.outbox_bridges ORDER BY source)sql");
  if (b.rows() == 0) return;
  const auto line = [](const auto&... v) { return fmt::format("{:<32} {:<20} {}\n", v...); };
  std::cout << "\noutbox bridges (your tables, copied into walhook.outbox by a trigger):\n"
            << line("table", "tenant", "columns");
  for (int i = 0; i < b.rows(); ++i) std::cout << line(b.value(i, 0), b.value(i, 1), b.value(i, 2));
}

/// The inbox's sources (docs/inbox.md): requests received (rows kept), duplicates answered,
/// reused ids refused, events deferred now (waiting for a predecessor), quarantined (dead
/// deliveries to its destinations) and the latest error of those. Nothing if there is no source,
/// or the role may not read them.
void print_sources(blocking_db& db) {
  const auto sources = operations::source_statuses(db);
  if (sources.empty()) return;
  const auto line = [](const auto&... v) { return fmt::format("{:<20} {:>9} {:>10} {:>10} {:>8} {:>11}  {}\n", v...); };
  std::cout << "\ninbox sources (walhook ingest; quarantined: dead deliveries to their destinations, walhook replay):\n"
            << line("source", "received", "duplicates", "key_reused", "deferred", "quarantined", "last_error");
  for (const auto& s : sources)
    std::cout << line(s.name, s.received, s.duplicates, s.key_reused, s.deferred, s.quarantined,
                      s.last_error ? delivery::cap_text(*s.last_error) : std::string("-"));
}

/// One row per endpoint, worst first as the console shows them (operations::endpoint_statuses).
/// `pending`/`sending`/`dead` are rows of walhook.deliveries ('sending': claimed attempts and
/// attempts past --max-hold-ms that walhook recorded; one that ends within the hold bound never
/// writes a row); `queued`/`in_flight` are the running walhook's live numbers, from GET
/// /api/endpoints with --admin-url (null / "-" without it).
int status(const status_args& a) {
  blocking_db db(a.database_url);
  operations::require_schema(db);
  const live_map live = live_of(a);
  const auto endpoints = operations::endpoint_statuses(db);
  if (a.json) {
    print_json(endpoints, live);
    return 0;
  }
  print_table(endpoints, live);
  if (!live && a.admin_url.empty())
    std::cout << "queued/in_flight are the running walhook's live numbers: give --admin-url http://HOST:PORT (its "
                 "--admin-listen; env WALHOOK_ADMIN_URL) to show them\n";
  print_recoveries(db);
  print_bridges(db);
  print_sources(db);
  return 0;
}

}  // namespace

command add_status(CLI::App& app) {
  auto a = std::make_shared<status_args>();
  auto* c = app.add_subcommand("status", "Per-endpoint pending, in flight, oldest pending age, failures");
  add_database_url(c, a->database_url);
  c->add_flag("--json", a->json, "One JSON object per endpoint (absent values are null)");
  c->add_option("--admin-url", a->admin_url,
                "http://HOST:PORT (https:// with --admin-tls-cert) of the running walhook's --admin-listen: show its "
                "live queued and in_flight")
      ->envname("WALHOOK_ADMIN_URL");
  c->add_option("--admin-token-file", a->admin_token_file, "File with the admin API's bearer token");
  c->add_option("--admin-ca-file", a->admin_ca_file,
                "PEM CA certificate(s) to trust for an https:// --admin-url, besides the system's (e.g. the "
                "listener's self-signed certificate)");
  return {c, [a] { return status(*a); }};
}

}  // namespace walhook::relay::cli
