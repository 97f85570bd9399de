#include "relay/cli/commands.hpp"

#include "common/log.hpp"
#include "common/json_writer.hpp"
#include "common/time.hpp"
#include "delivery/http_client.hpp"
#include "delivery/signing.hpp"
#include "delivery/url.hpp"
#include "relay/admin/access.hpp"
#include "relay/cli/admin_client.hpp"
#include "relay/admin/server.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/engine/engine.hpp"
#include "sql/migrations.hpp"
#include "sql/statements.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_future.hpp>

#include <fmt/format.h>
#include <simdjson.h>

#include <cctype>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

using operations::require_schema;
using operations::wal_keep_advice;
using operations::create_exported_slot;

}  // namespace

// ------------------------------------------------------------------------------------ migrate

int cmd_migrate(const migrate_args& a) {
  operations::migrate(a, [](const std::string& line) { std::cout << line << "\n"; });
  return 0;
}

// ------------------------------------------------------------------------------------ endpoints

int cmd_endpoint_add(const endpoint_add_args& a) {
  if (a.tenant.empty()) throw cli_error("--tenant must not be empty");
  operations::check_url(a.url);
  if (a.max_concurrency < 1 || a.max_concurrency > 1000) throw cli_error("--max-concurrency must be between 1 and 1000");
  if (a.ordering != "none" && a.ordering != "aggregate") throw cli_error("--ordering must be 'none' or 'aggregate'");
  const auto types = operations::clean_event_types(a.event_types);
  std::string secret = a.secret.empty() ? delivery::generate_secret() : a.secret;
  if (!delivery::parse_secrets(secret))
    throw cli_error("--secret must be whsec_ followed by base64 of a 16–64 byte key (several may be space-separated)");
  blocking_db db(a.database_url);
  require_schema(db);
  if (a.contact_endpoint_id &&
      db.exec("SELECT 1 FROM walhook.endpoints WHERE id = $1", pg::params{std::to_string(*a.contact_endpoint_id)}).rows() == 0)
    throw cli_error(fmt::format("--contact-endpoint: no endpoint with id {}", *a.contact_endpoint_id));
  pg::params p{a.tenant, a.url, secret, std::to_string(a.max_concurrency),
               types.empty() ? std::nullopt : std::optional<std::string>(operations::pg_array_literal(types)),
               a.ordering, a.description.empty() ? std::nullopt : std::optional<std::string>(a.description),
               a.contact_endpoint_id ? std::optional<std::string>(std::to_string(*a.contact_endpoint_id)) : std::nullopt};
  auto r = db.exec(
      "INSERT INTO walhook.endpoints (tenant_id, url, secret, max_concurrency, event_types, ordering, description, "
      "contact_endpoint_id) VALUES ($1, $2, $3, $4::int, $5::text[], $6, $7, $8::bigint) RETURNING id",
      p);
  std::cout << "id: " << r.value(0, 0) << "\nsecret: " << secret << "\n";
  return 0;
}

int cmd_endpoint_list(const std::string& database_url, const std::string& tenant) {
  blocking_db db(database_url);
  require_schema(db);
  pg::params p{tenant.empty() ? std::nullopt : std::optional<std::string>(tenant)};
  auto r = db.exec(
      "SELECT id, tenant_id, status, max_concurrency, ordering, coalesce(array_to_string(event_types, ','), '*'), url "
      "FROM walhook.endpoints WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY id",
      p);
  std::cout << fmt::format("{:>6}  {:<16} {:<9} {:>4}  {:<9} {:<24} {}\n", "id", "tenant", "status", "conc",
                           "ordering", "event types", "url");
  for (int i = 0; i < r.rows(); ++i)
    std::cout << fmt::format("{:>6}  {:<16} {:<9} {:>4}  {:<9} {:<24} {}\n", r.value(i, 0), r.value(i, 1),
                             r.value(i, 2), r.value(i, 3), r.value(i, 4), r.value(i, 5), delivery::redact_url(r.value(i, 6)));
  return 0;
}

namespace {
/// "endpoint 3: resumed; 12 deliveries due now" and the change's note.
void print_change(const operations::change& c, const char* what = "deliveries due now") {
  std::cout << fmt::format("endpoint {}: {}", c.endpoint_id, c.action);
  if (c.deliveries > 0) std::cout << fmt::format("; {} {}", c.deliveries, what);
  std::cout << "\n";
  if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
}
}  // namespace

int cmd_endpoint_set(const std::string& database_url, const std::string& action, long long id) {
  blocking_db db(database_url);
  require_schema(db);
  print_change(operations::set_status(db, id, action));
  return 0;
}

int cmd_endpoint_remove(const std::string& database_url, long long id, bool force) {
  blocking_db db(database_url);
  require_schema(db);
  if (!force) {
    const auto open = operations::open_deliveries(db, id);
    if (open > 0) {
      const std::string question =
          fmt::format("endpoint {} has {} pending deliver{}; removing it ends {}.", id, open, open == 1 ? "y" : "ies",
                      open == 1 ? "it" : "them");
      if (!::isatty(STDIN_FILENO))
        throw cli_error(question + " Not removed: confirm on a terminal, or give --force");
      std::cerr << question << " Remove it? [y/N] " << std::flush;
      std::string answer;
      std::getline(std::cin, answer);
      if (answer != "y" && answer != "Y" && answer != "yes") {
        std::cerr << "not removed\n";
        return 1;
      }
    }
  }
  auto c = operations::remove(db, id);
  print_change(c, c.deliveries == 1 ? "open delivery ended dead" : "open deliveries ended dead");
  return 0;
}

int cmd_endpoint_update(const std::string& database_url, long long id, const operations::endpoint_update& u) {
  blocking_db db(database_url);
  require_schema(db);
  print_change(operations::update(db, id, u));
  return 0;
}

std::chrono::seconds parse_duration(const std::string& text, const std::string& flag) {
  long long total = 0;
  std::size_t i = 0;
  const auto bad = [&] {
    return cli_error(fmt::format("{} {}: give a duration such as 24h, 90m, 30s, 7d or 1h30m", flag, text));
  };
  if (text.empty()) throw bad();
  while (i < text.size()) {
    std::size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j == i || j - i > 9) throw bad();
    const long long n = std::stoll(text.substr(i, j - i));
    long long unit = 1;
    if (j < text.size()) {
      switch (text[j]) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        default: throw bad();
      }
      ++j;
    } else if (i != 0) {
      throw bad();  // "1h30": the unit of 30 is missing
    }
    total += n * unit;
    i = j;
  }
  return std::chrono::seconds{total};
}

int cmd_endpoint_rotate_secret(const std::string& database_url, long long id, std::chrono::seconds grace,
                               const std::string& secret) {
  blocking_db db(database_url);
  require_schema(db);
  auto r = operations::rotate_secret(db, id, grace, secret);
  std::cout << "secret: " << r.secret << "\n"
            << fmt::format("endpoint {}: deliveries are signed with the new secret and the old one(s) until {}; "
                           "walhook run then drops the old ones\n",
                           id, r.grace_until);
  return 0;
}

int cmd_resend(const std::string& database_url, long long endpoint_id, const std::string& event_id) {
  blocking_db db(database_url);
  require_schema(db);
  auto c = operations::resend(db, endpoint_id, event_id);
  std::cout << fmt::format("endpoint {}: event {} resent (pending, due now, same webhook-id)\n", c.endpoint_id, event_id);
  if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
  return 0;
}

// ------------------------------------------------------------------------------------ send

int cmd_send(const send_args& a) {
  if (a.tenant.empty() || a.type.empty()) throw cli_error("--tenant and --type must not be empty");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  // Numbers beyond simdjson's range are valid JSON that PostgreSQL's jsonb keeps: let them pass.
  if (auto err = parser.parse(a.data).get(doc);
      err && err != simdjson::NUMBER_ERROR && err != simdjson::NUMBER_OUT_OF_RANGE)
    throw cli_error(std::string("--data is not valid JSON: ") + simdjson::error_message(err));
  blocking_db db(a.database_url);
  require_schema(db);
  pg::params p{a.tenant, a.type, a.data, a.merge_key.empty() ? std::nullopt : std::optional<std::string>(a.merge_key),
               a.aggregate_id.empty() ? std::nullopt : std::optional<std::string>(a.aggregate_id)};
  auto r = db.exec("SELECT walhook.publish($1, $2, $3::jsonb, merge_key => $4, aggregate_id => $5)", p);
  std::cout << r.value(0, 0) << "\n";
  return 0;
}

// ------------------------------------------------------------------------------------ status

namespace {

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

}  // namespace

int cmd_status(const status_args& a) {
  blocking_db db(a.database_url);
  require_schema(db);
  std::optional<std::map<std::int64_t, live_numbers>> live;
  if (!a.admin_url.empty()) {
    // walhook down is when status matters most: the rows still show, the live numbers do not.
    try {
      live = fetch_live(a);
    } catch (const cli_error& e) {
      std::cerr << "walhook: live numbers not shown: " << e.what() << "\n";
    }
  }
  // 'sending' rows are claimed attempts and attempts past --max-hold-ms that walhook recorded;
  // an attempt that ends within the hold bound never writes a row (live in_flight counts it).
  auto r = db.exec(R"sql(
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
  const auto number = [&](int i, int c) { return std::stoll(std::string(r.value(i, c))); };
  const auto text = [&](int i, int c) {
    return r.is_null(i, c) ? std::nullopt : std::optional<std::string>(delivery::cap_text(r.value(i, c)));
  };
  const auto live_of = [&](int i) -> std::optional<live_numbers> {
    if (!live) return std::nullopt;
    auto it = live->find(number(i, 0));
    return it == live->end() ? live_numbers{} : it->second;  // not in memory there: nothing queued or in flight
  };
  if (a.json) {
    for (int i = 0; i < r.rows(); ++i) {
      const auto l = live_of(i);
      json_writer j;
      j.begin_object()
          .field("endpoint_id", number(i, 0))
          .field("tenant_id", std::string(r.value(i, 1)))
          .field("status", std::string(r.value(i, 2)))
          .field("paused_by_breaker", r.value(i, 2) == "active" && r.value(i, 12) == "t")
          .field("pending", number(i, 3))
          .field("sending", number(i, 4))
          .field("queued", l ? std::optional<std::int64_t>(l->queued) : std::nullopt)
          .field("in_flight", l ? std::optional<std::int64_t>(l->in_flight) : std::nullopt)
          .field("oldest_pending_age_s", r.is_null(i, 5) ? std::nullopt : std::optional<std::int64_t>(number(i, 5)))
          .field("dead", number(i, 6))
          .field("consecutive_failures", number(i, 7))
          .field("paused_until", r.is_null(i, 8) ? std::nullopt : std::optional<std::string>(r.value(i, 8)))
          .field("last_error", text(i, 9))
          .field("disabled_reason", text(i, 10))
          .field("url", delivery::redact_url(r.value(i, 11)))
          .end_object();
      std::cout << j.str() << "\n";
    }
    return 0;
  }
  // The tenant column as wide as the longest tenant (up to 40 characters), so columns line up.
  std::size_t tenant_width = 14;
  for (int i = 0; i < r.rows(); ++i) tenant_width = std::max(tenant_width, std::min<std::size_t>(40, r.value(i, 1).size()));
  const auto line = [tenant_width](const auto& id, const auto& tenant, auto&&... v) {
    return fmt::format("{:>6}  {:<{}} {:<16} {:>8} {:>7} {:>6} {:>9} {:>10} {:>6} {:>8}  {:<20} {}\n", id, tenant,
                       tenant_width, v...);
  };
  std::cout << line("id", "tenant", "status", "pending", "sending", "queued", "in_flight", "oldest_age", "dead", "failures",
                    "paused_until", "last_error");
  for (int i = 0; i < r.rows(); ++i) {
    long long age = r.is_null(i, 5) ? -1 : number(i, 5);
    std::string age_text = age < 0 ? "-" : age < 120 ? fmt::format("{}s", age) : age < 7200 ? fmt::format("{}m", age / 60) : fmt::format("{}h", age / 3600);
    std::string err = delivery::cap_text(r.is_null(i, 10) ? r.value(i, 9) : r.value(i, 10));
    std::string status(r.value(i, 2));
    if (status == "active" && r.value(i, 12) == "t") status = "paused (breaker)";
    const auto l = live_of(i);
    std::cout << line(r.value(i, 0), r.value(i, 1), status, r.value(i, 3), r.value(i, 4),
                      l ? std::to_string(l->queued) : "-", l ? std::to_string(l->in_flight) : "-", age_text, r.value(i, 6),
                      r.value(i, 7), r.is_null(i, 8) ? "-" : r.value(i, 8), err.empty() ? "-" : err);
  }
  if (!live && a.admin_url.empty())
    std::cout << "queued/in_flight are the running walhook's live numbers: give --admin-url http://HOST:PORT (its "
                 "--admin-listen; env WALHOOK_ADMIN_URL) to show them\n";
  // Slot incidents and operator backfills (relay/engine/recovery.hpp): the open ones and the last few.
  auto rec = db.exec(R"sql(
SELECT id, slot_name, state, reason, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       coalesce(events::text, '-'), coalesce(deliveries::text, '-')
  FROM walhook.recoveries
 WHERE state IN ('creating_slot', 'pending') OR id > (SELECT coalesce(max(id), 0) - 5 FROM walhook.recoveries)
 ORDER BY id)sql");
  if (rec.rows() > 0) {
    std::cout << "\nrecoveries (slot incidents and walhook recover):\n"
              << fmt::format("{:>6}  {:<14} {:<13} {:<20} {:>8} {:>10}  {}\n", "id", "slot", "state", "at", "events",
                             "deliveries", "reason");
    for (int i = 0; i < rec.rows(); ++i)
      std::cout << fmt::format("{:>6}  {:<14} {:<13} {:<20} {:>8} {:>10}  {}\n", rec.value(i, 0), rec.value(i, 1),
                               rec.value(i, 2), rec.value(i, 4), rec.value(i, 5), rec.value(i, 6), rec.value(i, 3));
  }
  return 0;
}

// ------------------------------------------------------------------------------------ replay

int cmd_recover(const recover_args& a) {
  if (a.since.empty()) throw cli_error("give --since TIME (events created at or after it are delivered again)");
  blocking_db db(a.database_url);
  require_schema(db);
  const auto optional_text = [](const std::string& v) { return v.empty() ? std::nullopt : std::optional<std::string>(v); };
  const std::string reason = fmt::format("operator: walhook recover --since {}{}{}", a.since,
                                         a.until.empty() ? "" : " --until " + a.until,
                                         a.tenant.empty() ? "" : " --tenant " + a.tenant);
  // One request per walhook: each shard backfills its own tenants' events (relay/core/shard.hpp).
  const int layout = operations::shard_count(db);
  if (a.shards != 0 && a.shards != layout)
    throw cli_error(fmt::format("this database is split into {} shard(s), not {}: leave --shards out", layout, a.shards));
  if (!a.until.empty() &&
      db.exec("SELECT $1::timestamptz >= $2::timestamptz", pg::params{a.since, a.until}).value(0, 0) == "t")
    throw cli_error(fmt::format("--until {} is not after --since {}: the range is empty", a.until, a.since));
  std::vector<std::string> slots;
  for (int k = 0; k < layout; ++k) slots.push_back(shard_slot(a.slot, {k, layout}));
  auto count = db.exec(R"sql(
SELECT count(*) FROM walhook.outbox
 WHERE created_at >= $1::timestamptz AND ($2::timestamptz IS NULL OR created_at < $2::timestamptz)
   AND ($3::text IS NULL OR tenant_id = $3))sql",
                       pg::params{a.since, optional_text(a.until), optional_text(a.tenant)});
  std::vector<std::string> ids;
  db.exec("BEGIN");
  for (const auto& slot : slots)
    ids.emplace_back(db.exec(R"sql(
INSERT INTO walhook.recoveries (slot_name, reason, since_time, until_time, tenant_id, requested_by)
VALUES ($1, $2, $3::timestamptz, $4::timestamptz, $5, current_user) RETURNING id)sql",
                             pg::params{slot, reason, a.since, optional_text(a.until), optional_text(a.tenant)})
                         .value(0, 0));
  db.exec("COMMIT");
  std::string listed;
  for (const auto& id : ids) listed += (listed.empty() ? "" : ", ") + id;
  std::cout << "recovery " << listed << ": " << count.value(0, 0) << " events to deliver again through the walhook"
            << (slots.size() > 1 ? "s streaming slots " + slots.front() + " … " + slots.back() : " streaming slot " + slots.front())
            << " (same webhook-ids: receivers that dedupe see each once)\n";
  if (!a.wait) {
    std::cout << "walhook run picks it up within 2 s; see walhook status for its progress\n";
    return 0;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{a.wait_timeout_s};
  for (;;) {
    auto st = db.exec(R"sql(
SELECT count(*) FILTER (WHERE state <> 'done'), coalesce(sum(events), 0), coalesce(sum(deliveries), 0)
  FROM walhook.recoveries WHERE id = ANY ($1::bigint[]))sql",
                      pg::params{"{" + listed + "}"});
    if (st.value(0, 0) == "0") {
      std::cout << "recovery " << listed << " done: " << st.value(0, 1) << " events, " << st.value(0, 2)
                << " deliveries delivered or stored (one already recorded delivered in walhook.deliveries is not sent "
                   "again when it has to wait there: walhook replay covers those)\n";
      return 0;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      throw cli_error(fmt::format("recovery {} is not done after {} s (is walhook run streaming slot {}?)", listed,
                                  a.wait_timeout_s, slots.size() > 1 ? "each of " + slots.front() + " …" : slots.front()));
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  }
}

int cmd_reshard(const reshard_args& a) {
  if (a.from == a.to) throw cli_error(fmt::format("--from and --to are both {}: nothing to do", a.from));
  blocking_db db(a.database_url);
  require_schema(db);
  const auto current = operations::shard_count(db);
  if (current != a.from) throw cli_error(fmt::format("this database is split into {} shard(s), not {}", current, a.from));
  std::vector<std::string> old_slots, new_slots;
  for (int k = 0; k < a.from; ++k) old_slots.push_back(shard_slot(a.slot, {k, a.from}));
  for (int k = 0; k < a.to; ++k) new_slots.push_back(shard_slot(a.slot, {k, a.to}));
  auto array = [](const std::vector<std::string>& v) {
    std::string out = "{";
    for (const auto& x : v) out += (out.size() > 1 ? "," : "") + ("\"" + x + "\"");
    return out + "}";
  };
  // The old layout must be stopped (each walhook's SIGTERM finishes its work and records how far
  // it got), its backfills done, and every slot must have a delivered snapshot: the oldest of
  // them is where the new shards' backfills start.
  // Hold the old slots' leadership locks (relay/engine/leadership.cpp) while resharding: an old walhook
  // started meanwhile waits as a standby, and at its next session finds the new layout and stops.
  for (const auto& slot : old_slots)
    if (db.exec("SELECT pg_try_advisory_lock(2003748971, hashtext($1))", pg::params{slot}).value(0, 0) != "t")
      throw cli_error(fmt::format("a walhook holds the lock of slot {}: stop the walhooks of the old layout first (SIGTERM; "
                                  "each records how far it got), then run walhook reshard again",
                                  slot));
  auto active = db.exec("SELECT string_agg(slot_name, ', ') FROM pg_replication_slots WHERE slot_name = ANY ($1) AND active",
                        pg::params{array(old_slots)});
  if (!active.is_null(0, 0))
    throw cli_error(fmt::format("slot(s) {} are streamed: stop the walhooks of the old layout first (SIGTERM; each records "
                                "how far it got), then run walhook reshard again",
                                active.value(0, 0)));
  if (db.exec("SELECT 1 FROM walhook.recoveries WHERE slot_name = ANY ($1) AND state IN ('creating_slot', 'pending')",
              pg::params{array(old_slots)})
          .rows() > 0)
    throw cli_error("the old layout has backfills not done yet: run it until walhook status shows them done");
  auto taken = db.exec("SELECT string_agg(slot_name, ', ') FROM pg_replication_slots WHERE slot_name = ANY ($1)",
                       pg::params{array(new_slots)});
  if (!taken.is_null(0, 0)) throw cli_error(fmt::format("slot(s) {} exist already: drop them first", taken.value(0, 0)));
  auto lower = db.exec(R"sql(
SELECT count(*) OVER (), delivered_snapshot::text FROM walhook.slot_progress
 WHERE slot_name = ANY ($1) AND delivered_snapshot IS NOT NULL
 ORDER BY pg_snapshot_xmax(delivered_snapshot), pg_snapshot_xmin(delivered_snapshot) LIMIT 1)sql",
                       pg::params{array(old_slots)});
  if (lower.rows() == 0 || std::stoi(std::string(lower.value(0, 0))) != a.from)
    throw cli_error("not every slot of the old layout has a delivered snapshot recorded: run each of its walhooks once "
                    "with this version (a second is enough), stop them, and try again");
  const std::string since(lower.value(0, 1));
  const std::string reason = fmt::format("reshard from {} to {}", a.from, a.to);
  for (int k = 0; k < a.to; ++k) {
    const shard_spec shard{k, a.to};
    if (shard.sharded()) {
      const auto names = shard_publications(shard);
      const auto ddl = shard_publication_ddl(shard);
      for (std::size_t i = 0; i < names.size(); ++i)
        if (db.exec("SELECT 1 FROM pg_publication WHERE pubname = $1", pg::params{names[i]}).rows() == 0) db.exec(ddl[i]);
    }
    // Each new shard backfills its tenants' rows between the old layout's oldest delivered
    // snapshot and its own slot's: what the old slots held and had not delivered.
    auto id = std::string(db.exec("INSERT INTO walhook.recoveries (slot_name, reason, state, since_snapshot, requested_by) "
                                  "VALUES ($1, $2, 'creating_slot', $3::pg_snapshot, current_user) RETURNING id",
                                  pg::params{new_slots[k], reason, since})
                              .value(0, 0));
    auto x = create_exported_slot(db, a.database_url, new_slots[k]);
    db.exec(std::string(sql::statements::slot_replaced), {new_slots[k], x.system_id, x.consistent_point, x.snapshot, id});
    std::cout << "created slot " << new_slots[k] << " with backfill " << id << "\n";
  }
  if (a.to == 1) db.exec("DELETE FROM walhook.shard_layout");
  else
    db.exec("INSERT INTO walhook.shard_layout (shards) VALUES ($1) ON CONFLICT (singleton) DO UPDATE SET shards = excluded.shards, "
            "changed_at = now()",
            pg::params{std::to_string(a.to)});
  // The old slots would keep WAL forever, and a progress row without its slot is an incident.
  for (int k = 0; k < a.from; ++k) {
    db.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", pg::params{old_slots[k]});
    db.exec("DELETE FROM walhook.slot_progress WHERE slot_name = $1", pg::params{old_slots[k]});
    if (a.from > 1)
      for (const auto& pub : shard_publications({k, a.from})) db.exec("DROP PUBLICATION IF EXISTS " + pg::quote_identifier(pub));
  }
  std::cout << fmt::format("resharded from {} to {}: dropped the old slots; start {} walhook run {} (each backfills what the "
                           "old layout had not delivered, then streams)\n",
                           a.from, a.to, a.to, a.to > 1 ? fmt::format("--shard K/{}", a.to) : std::string("without --shard"));
  return 0;
}

int cmd_replay(const replay_args& a) {
  if (!a.delivery_id && !a.endpoint_id) throw cli_error("give --delivery ID or --endpoint ID");
  blocking_db db(a.database_url);
  require_schema(db);
  const auto text = [](const std::string& v) { return v.empty() ? std::nullopt : std::optional<std::string>(v); };
  auto changes = operations::replay(db, {.delivery_id = a.delivery_id,
                                         .endpoint_id = a.endpoint_id,
                                         .since = text(a.since),
                                         .until = text(a.until)});
  std::int64_t total = 0;
  for (const auto& c : changes) total += c.deliveries;
  std::cout << "replayed " << total << " deliveries\n";
  for (const auto& c : changes)
    if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
  return 0;
}

// ------------------------------------------------------------------------------------ events

int cmd_events(const events_args& a) {
  if (a.tenant.empty()) throw cli_error("--tenant is required");
  blocking_db db(a.database_url);
  require_schema(db);
  pg::params p{a.tenant, a.since.empty() ? std::nullopt : std::optional<std::string>(a.since),
               a.until.empty() ? std::nullopt : std::optional<std::string>(a.until), std::to_string(a.limit)};
  auto r = db.exec(
      "SELECT id, event_type, created_at, payload::text FROM walhook.outbox "
      "WHERE tenant_id = $1 AND created_at >= coalesce($2::timestamptz, now() - interval '30 days') "
      "AND created_at < coalesce($3::timestamptz, 'infinity') ORDER BY created_at, seq LIMIT $4::int",
      p);
  for (int i = 0; i < r.rows(); ++i) {
    delivery::event ev;
    ev.id = r.value(i, 0);
    ev.type = r.value(i, 1);
    ev.created_at = pg_timestamptz_to_iso8601(r.value(i, 2)).value_or(std::string(r.value(i, 2)));
    ev.payload = r.value(i, 3);
    std::cout << delivery::make_body(ev) << "\n";
  }
  return 0;
}

// ------------------------------------------------------------------------------------ run

namespace {

void preflight(run_options& o) {
  blocking_db db(o.database_url);
  auto level = db.exec("SELECT current_setting('wal_level')");
  if (level.value(0, 0) != "logical")
    throw cli_error(fmt::format("wal_level is '{}': walhook needs wal_level = logical "
                                "(ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)",
                                level.value(0, 0)));
  auto role = db.exec("SELECT current_user, rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user");
  if (role.rows() == 0 || role.value(0, 1) != "t")
    throw cli_error(fmt::format("role \"{}\" may not stream a replication slot: it needs the REPLICATION attribute "
                                "(ALTER ROLE \"{}\" REPLICATION)",
                                role.rows() ? role.value(0, 0) : "?", role.rows() ? role.value(0, 0) : "?"));
  const char* missing_privileges = "missing privileges on the walhook tables (see sql/roles.sql for the walhook_relay role)";
  try {
    require_schema(db);
  } catch (const cli_error& e) {
    if (std::string_view(e.what()).find("permission denied") != std::string_view::npos) throw cli_error(missing_privileges);
    throw;
  }
  // Each privilege on its own (has_table_privilege() with a list is true if *any* is held);
  // walhook's one write to endpoints needs only its status and updated_at columns.
  auto missing = db.exec(R"sql(
SELECT string_agg(v.privilege || ' on ' || v.tab || coalesce(' (' || v.col || ')', ''), ', '
                  ORDER BY v.tab, v.privilege, v.col)
  FROM (VALUES ('walhook.deliveries', NULL, 'SELECT'), ('walhook.deliveries', NULL, 'INSERT'),
               ('walhook.deliveries', NULL, 'UPDATE'), ('walhook.deliveries', NULL, 'DELETE'),
               ('walhook.endpoint_health', NULL, 'SELECT'), ('walhook.endpoint_health', NULL, 'INSERT'),
               ('walhook.endpoint_health', NULL, 'UPDATE'),
               ('walhook.endpoints', NULL, 'SELECT'), ('walhook.endpoints', 'status', 'UPDATE'),
               ('walhook.endpoints', 'updated_at', 'UPDATE'),
               ('walhook.outbox', NULL, 'SELECT'), ('walhook.outbox', NULL, 'DELETE'),
               ('walhook.slot_progress', NULL, 'SELECT'), ('walhook.slot_progress', NULL, 'INSERT'),
               ('walhook.slot_progress', NULL, 'UPDATE'), ('walhook.slot_progress', NULL, 'DELETE'),
               ('walhook.endpoints_removed', NULL, 'SELECT'), ('walhook.endpoints_removed', NULL, 'DELETE'),
               ('walhook.recoveries', NULL, 'SELECT'), ('walhook.recoveries', NULL, 'INSERT'),
               ('walhook.recoveries', NULL, 'UPDATE'), ('walhook.shard_layout', NULL, 'SELECT'))
         AS v(tab, col, privilege)
 WHERE NOT CASE WHEN v.col IS NULL THEN has_table_privilege(v.tab, v.privilege)
                ELSE has_column_privilege(v.tab, v.col, v.privilege) END)sql");
  if (!missing.is_null(0, 0))
    throw cli_error(fmt::format("{}: {}", missing_privileges, missing.value(0, 0)));
  // Notifications are outbox rows walhook inserts itself (migration 006 grants the columns).
  auto publish = db.exec(R"sql(
SELECT string_agg('INSERT on walhook.outbox (' || c || ')', ', ' ORDER BY c)
  FROM unnest(ARRAY['tenant_id', 'event_type', 'aggregate_id', 'merge_key', 'payload', 'endpoint_id']) AS c
 WHERE NOT has_column_privilege('walhook.outbox', c, 'INSERT'))sql");
  if (!publish.is_null(0, 0)) {
    if (!o.dispatch.notifications.operator_tenant.empty())
      throw cli_error(fmt::format("{}: {} (walhook publishes its notifications to --operator-tenant \"{}\"; "
                                  "--operator-tenant \"\" turns them off)",
                                  missing_privileges, publish.value(0, 0), o.dispatch.notifications.operator_tenant));
    log::warn("preflight.notifications_off",
              {{"missing", std::string(publish.value(0, 0))},
               {"note", "walhook may not insert into walhook.outbox: no notification goes to contact endpoints"}});
    o.dispatch.notifications.contacts = false;
  }
  // A walhook of another layout would deliver a second time what the current shards deliver.
  if (const int layout = operations::shard_count(db); layout != o.shard.count)
    throw cli_error(fmt::format("this database is split into {} shard(s) (walhook.shard_layout){}: run {}", layout,
                                o.shard.sharded() ? fmt::format(", not {}", o.shard.count) : "",
                                layout == 1 ? "without --shard" : fmt::format("with --shard K/{}", layout)));
  for (const auto& pub : shard_publications(o.shard)) {
    pg::params p{pub};
    if (db.exec("SELECT 1 FROM pg_publication WHERE pubname = $1", p).rows() == 0)
      throw cli_error(fmt::format("publication \"{}\" does not exist: run `walhook migrate`", pub));
  }
  log::info("preflight.wal_retention", {{"advice", wal_keep_advice(db)}});
}

}  // namespace

namespace {
/// Each attempt in flight is a socket: raise the soft limit on open files to the hard one (the
/// usual soft default, 1,024, is less than the default caps allow) and, if even that is short,
/// shrink the slow pool to fit, saying so.
void fit_open_files(run_options& o) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = std::min<rlim_t>(lim.rlim_max, 1 << 20);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  const std::size_t reserve = 256;  // PostgreSQL, the admin listener, logs, pooled idle connections
  const std::size_t want = o.dispatch.limits.max_in_flight + o.dispatch.limits.max_slow_in_flight + reserve;
  if (lim.rlim_cur >= want) return;
  const std::size_t room = lim.rlim_cur > o.dispatch.limits.max_in_flight + reserve ? lim.rlim_cur - o.dispatch.limits.max_in_flight - reserve : 0;
  log::warn("run.open_files_limit", {{"limit", static_cast<std::uint64_t>(lim.rlim_cur)},
                                     {"max_slow_in_flight", static_cast<std::uint64_t>(room)},
                                     {"note", "the open files limit is too low for --max-slow-in-flight: raise it (ulimit -n)"}});
  o.dispatch.limits.max_slow_in_flight = room;
}
}  // namespace

int cmd_run(run_options options) {
  if (options.shard.sharded()) options.slot = shard_slot(options.slot, options.shard);
  if (!options.ca_file.empty()) {
    auto pem = delivery::read_ca_bundle(options.ca_file);
    if (!pem) {
      throw cli_error(pem.error() == boost::system::errc::invalid_argument
                          ? fmt::format("--ca-file {}: no PEM certificate in it", options.ca_file)
                          : fmt::format("--ca-file {}: cannot read it: {}", options.ca_file, pem.error().message()));
    }
    options.http.extra_ca_pem = std::move(*pem);
  }
  const admin_access access = check_admin_access(options);  // before anything starts
  preflight(options);
  fit_open_files(options);
  asio::io_context ioc(1);
  std::string admin_listen = options.admin_listen;
  engine e(ioc.get_executor(), std::move(options));
  std::unique_ptr<admin_server> admin;
  if (!admin_listen.empty()) {
    try {
      admin = std::make_unique<admin_server>(ioc.get_executor(), admin_listen, e, access);
    } catch (const std::exception& err) {
      throw cli_error(err.what());
    }
    log::info("admin.listening", {{"address", admin_listen}, {"port", static_cast<unsigned>(admin->port())},
                                  {"api_token", !access.token.empty()}});
  }
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  // The first signal stops gracefully; a second one during the grace period exits at once.
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                              int sig) {
    if (ec) return;
    static int received = 0;
    if (++received > 1) {
      log::warn("signal.forced_exit", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
      std::_Exit(130);
    }
    log::info("signal.received", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
    e.request_stop();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  int code = 1;
  asio::co_spawn(ioc, e.run(), [&](std::exception_ptr ex, int rc) {
    code = rc;
    signals.cancel();
    if (admin) admin->stop();
    ioc.stop();
    if (ex) {
      try {
        std::rethrow_exception(ex);
      } catch (const std::exception& err) {
        log::error("run.failed", {{"error", err.what()}});
        code = 1;
      }
    }
  });
  ioc.run();
  return code;
}

}  // namespace walhook::relay
