#include "relay/admin/api.hpp"
#include "relay/core/version.hpp"

#include "common/json_writer.hpp"
#include "common/log.hpp"
#include "common/time.hpp"
#include "delivery/url.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/operations.hpp"
#include "relay/engine/options.hpp"
#include "relay/core/outcome_log.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <vector>


namespace walhook::relay {
namespace asio = boost::asio;

// ------------------------------------------------------------------------------------ answers

unsigned status_of_sqlstate(std::string_view sqlstate) {
  if (sqlstate == "57014") return 504;
  if (sqlstate.starts_with("22")) return 400;
  if (sqlstate.starts_with("23")) return 409;
  return 503;
}

namespace {

/// A cli_error of walhook's own checks in an action or a read (not PostgreSQL's), as the status
/// docs/api.md gives it. By message: relay/operations/operations.cpp throws one kind for all of them.
unsigned status_of_user_error(std::string_view message) {
  if (message.starts_with("no ")) return 404;  // "no endpoint with id 7", "no event …"
  // An attempt in flight, another state of the merge key pending (operations::resend).
  if (message.find("in flight") != std::string_view::npos || message.find("is pending") != std::string_view::npos ||
      message.find("became pending") != std::string_view::npos)
    return 409;
  return 400;
}

/// A timestamptz column as RFC 3339 UTC, or null.
void timestamp(json_writer& j, std::string_view key, const pg::query_result& r, int row, int col) {
  j.key(key);
  if (r.is_null(row, col)) {
    j.null();
    return;
  }
  auto text = pg_timestamptz_to_iso8601(r.value(row, col));
  if (text) j.string(*text);
  else j.string(r.value(row, col));
}

void optional_int(json_writer& j, std::string_view key, const pg::query_result& r, int row, int col) {
  j.key(key);
  if (r.is_null(row, col)) j.null();
  else j.raw(r.value(row, col));
}

void optional_text(json_writer& j, std::string_view key, const pg::query_result& r, int row, int col,
                   bool cap = false) {
  j.key(key);
  if (r.is_null(row, col)) j.null();
  else if (cap) j.string(delivery::cap_text(r.value(row, col)));
  else j.string(r.value(row, col));
}

std::int64_t int_of(std::string_view text) {
  std::int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

void outcome_fields(json_writer& j, const outcome_entry& e) {
  j.field("at", format_iso8601(e.at))
      .field("attempt", e.attempt)
      .key("http_status");
  if (e.http_status) j.number(static_cast<std::int64_t>(e.http_status));
  else j.null();
  j.field("outcome", e.outcome).field("result", e.result).key("duration_s").number(e.duration_s);
}

void change_fields(json_writer& j, const operations::change& c) {
  j.field("endpoint_id", c.endpoint_id).field("action", c.action).field("deliveries", c.deliveries).key("note");
  if (c.note.empty()) j.null();
  else j.string(c.note);
}

// The endpoint columns every endpoint answer shows (the list and one endpoint).
constexpr const char* endpoints_sql = R"sql(
SELECT e.id, e.tenant_id, e.url, e.status, e.max_concurrency,
       coalesce(h.paused_until > now(), false),
       CASE WHEN h.paused_until > now() THEN h.paused_until END,
       coalesce(c.pending, 0), coalesce(c.sending, 0), coalesce(c.dead, 0),
       extract(epoch FROM now() - o.oldest)::float8,
       coalesce(h.consecutive_failures, 0), h.last_status, h.last_error, h.disabled_reason, e.secret,
       array_to_json(e.event_types)::text, e.ordering, e.description, e.contact_endpoint_id, e.secret_grace_until
  FROM walhook.endpoints e
  LEFT JOIN walhook.endpoint_health h ON h.endpoint_id = e.id
  LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE d.status = 'pending') AS pending,
           count(*) FILTER (WHERE d.status = 'sending') AS sending,
           count(*) FILTER (WHERE d.status = 'dead') AS dead
      FROM walhook.deliveries d
     WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending', 'dead')
       AND d.created_at >= e.created_at) c ON true  -- not a removed endpoint's that had the same id
  LEFT JOIN LATERAL (
    SELECT min(d.event_created_at) AS oldest FROM walhook.deliveries d
     WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending') AND d.created_at >= e.created_at) o ON true
 WHERE $1::bigint IS NULL OR e.id = $1::bigint
  -- Worst first: oldest pending age, failures in a row, then dead letters (an endpoint whose
  -- deliveries die unattempted, e.g. an invalid URL, has neither of the first two).
 ORDER BY 11 DESC NULLS LAST, 12 DESC, 10 DESC, e.id)sql";

/// One row of endpoints_sql as the fields of docs/api.md (the object is the caller's).
void endpoint_fields(json_writer& j, const pg::query_result& r, int i, const live_status& live, bool detail) {
  const std::int64_t id = int_of(r.value(i, 0));
  live_status::load load;
  if (auto it = live.endpoints.find(id); it != live.endpoints.end()) load = it->second;
  j.field("id", id)
      .field("tenant_id", r.value(i, 1))
      .field("url", delivery::redact_url(r.value(i, 2)))
      .field("status", r.value(i, 3))
      .field("paused_by_breaker", r.value(i, 5) == "t");
  timestamp(j, "paused_until", r, i, 6);
  j.field("pending", int_of(r.value(i, 7)))
      .field("sending", int_of(r.value(i, 8)))
      .field("queued", static_cast<std::int64_t>(load.queued))
      .field("in_flight", static_cast<std::int64_t>(load.in_flight))
      .field("max_concurrency", int_of(r.value(i, 4)))
      .field("dead", int_of(r.value(i, 9)))
      .key("oldest_pending_age_s");
  if (r.is_null(i, 10)) j.null();
  else j.number(std::strtod(std::string(r.value(i, 10)).c_str(), nullptr));
  j.field("consecutive_failures", int_of(r.value(i, 11)));
  optional_int(j, "last_status", r, i, 12);
  // No attempt failed, yet deliveries may die unattempted (an invalid URL): the engine's reason.
  if (r.is_null(i, 13) && !load.config_error.empty()) j.field("last_error", delivery::cap_text(load.config_error));
  else optional_text(j, "last_error", r, i, 13, true);
  optional_text(j, "disabled_reason", r, i, 14, true);
  const auto fingerprints = operations::secret_fingerprints(std::string(r.value(i, 15)));
  j.field("secret_fingerprints", fingerprints.empty() ? std::nullopt : std::optional<std::string>(fingerprints));
  if (!detail) return;
  j.key("event_types");
  if (r.is_null(i, 16)) j.null();
  else j.raw(r.value(i, 16));
  j.field("ordering", r.value(i, 17));
  optional_text(j, "description", r, i, 18);
  optional_int(j, "contact_endpoint_id", r, i, 19);
  timestamp(j, "secret_grace_until", r, i, 20);
}

/// Rows of walhook.deliveries (columns of deliveries_sql) as an array.
constexpr const char* deliveries_columns =
    "d.id, d.event_id, o.event_type, d.status, d.attempts, d.last_status, d.last_error, d.next_attempt_at, "
    "d.last_attempt_at, d.created_at, d.delivered_at";

void delivery_fields(json_writer& j, const pg::query_result& r, int i, int c) {
  j.field("id", int_of(r.value(i, c)))
      .field("event_id", r.value(i, c + 1));
  optional_text(j, "event_type", r, i, c + 2);
  j.field("status", r.value(i, c + 3)).field("attempts", int_of(r.value(i, c + 4)));
  optional_int(j, "last_status", r, i, c + 5);
  optional_text(j, "last_error", r, i, c + 6, true);
  timestamp(j, "next_attempt_at", r, i, c + 7);
  timestamp(j, "last_attempt_at", r, i, c + 8);
  timestamp(j, "created_at", r, i, c + 9);
  timestamp(j, "delivered_at", r, i, c + 10);
}

void deliveries_array(json_writer& j, const pg::query_result& r) {
  j.begin_array();
  for (int i = 0; i < r.rows(); ++i) {
    j.begin_object();
    delivery_fields(j, r, i, 0);
    j.end_object();
  }
  j.end_array();
}

std::optional<std::int64_t> id_of(std::string_view text) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v <= 0) return std::nullopt;
  return v;
}

/// The path's segments after "/api/" (query string dropped).
std::vector<std::string> segments_of(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i <= target.size()) {
    auto slash = target.find('/', i);
    if (slash == std::string_view::npos) slash = target.size();
    if (slash > i) out.emplace_back(target.substr(i, slash - i));
    i = slash + 1;
  }
  return out;  // {"api", ...}
}

/// A JSON object body's string or null member (absent: nullopt). Throws cli_error on bad input.
struct json_body {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  explicit json_body(const std::string& text) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      if (parser.parse(std::string_view("{}")).get(doc)) throw cli_error("bad JSON body");
      return;
    }
    if (auto err = parser.parse(text).get(doc)) throw cli_error(std::string("the body is not valid JSON: ") + simdjson::error_message(err));
    if (!doc.is_object()) throw cli_error("the body must be a JSON object");
  }
  /// Refuses members other than `keys`: a misspelt filter ("sinc") must not widen an action.
  void only(std::initializer_list<std::string_view> keys) const {
    simdjson::dom::object o;
    if (doc.get(o)) return;
    for (auto [k, v] : o) {
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
      std::string allowed;
      for (auto a : keys) allowed += (allowed.empty() ? "" : ", ") + std::string(a);
      throw cli_error(fmt::format("unknown member \"{}\" in the body (allowed: {})", k, allowed.empty() ? "none" : allowed));
    }
  }
  std::optional<std::string> text(const char* key) const {
    simdjson::dom::element v;
    if (doc[key].get(v) || v.is_null()) return std::nullopt;
    std::string_view s;
    if (v.get(s)) throw cli_error(fmt::format("\"{}\" must be a string or null", key));
    return std::string(s);
  }
  std::optional<std::int64_t> integer(const char* key) const {
    simdjson::dom::element v;
    if (doc[key].get(v) || v.is_null()) return std::nullopt;
    std::int64_t n = 0;
    if (v.get(n)) throw cli_error(fmt::format("\"{}\" must be an integer", key));
    return n;
  }
};

}  // namespace

// ------------------------------------------------------------------------------------ the API

/// The database worker's state: one connection, used on the worker thread only.
struct db_worker_state {
  std::string url;
  std::unique_ptr<blocking_db> db;

  bool connection_bad() const { return !db || PQstatus(db->native()) != CONNECTION_OK; }

  /// An action that failed half-way leaves nothing behind.
  void rollback() {
    if (!db || PQtransactionStatus(db->native()) == PQTRANS_IDLE) return;
    try {
      db->exec("ROLLBACK");
    } catch (const cli_error&) {
      db.reset();
    }
  }

  /// Runs `f` with the connection (connecting if needed) and maps what it throws: an
  /// unreachable database → 503 (the connection is made again next time), PostgreSQL's refusal
  /// by SQLSTATE (status_of_sqlstate), walhook's own checks → 4xx.
  api_response with_db(const std::function<api_response(blocking_db&)>& f) {
    try {
      if (connection_bad()) {
        db.reset();
        db = std::make_unique<blocking_db>(url, "walhook-admin");
        db->exec("SET statement_timeout = '10s'");
      }
      return f(*db);
    } catch (const pg_error& e) {
      // PostgreSQL refused a statement: by its SQLSTATE, the caller's input or the server's trouble.
      if (connection_bad()) {
        db.reset();
        return error_response(503, fmt::format("database unreachable: {}", e.what()));
      }
      rollback();
      const unsigned status = status_of_sqlstate(e.sqlstate());
      if (status >= 500) {
        log::warn("admin.database_failed", {{"sqlstate", e.sqlstate()}, {"error", e.what()}});
        return error_response(status, status == 504 ? fmt::format("the database did not answer in time (statement "
                                                                  "timeout, 10 s): {}", e.what())
                                                    : fmt::format("database failure ({}): {}", e.sqlstate(), e.what()));
      }
      return error_response(status, e.what());
    } catch (const cli_error& e) {
      if (connection_bad()) {
        db.reset();
        return error_response(503, fmt::format("database unreachable: {}", e.what()));
      }
      rollback();
      return error_response(status_of_user_error(e.what()), e.what());
    } catch (const std::exception& e) {
      db.reset();  // its state is unknown
      log::error("admin.api_failed", {{"error", e.what()}});
      return error_response(500, e.what());
    }
  }
};

struct admin_api::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor ex, engine& e, admin_access a)
      : executor(ex), eng(e), access(std::move(a)),
        worker(std::make_shared<db_worker_state>(db_worker_state{e.options().database_url, nullptr})) {}
  // Destroyed on the engine's executor (the admin server's, or a finished request's), never on
  // the worker, so joining it here is safe; a query still running ends within statement_timeout.
  ~impl() { pool.join(); }

  asio::any_io_executor executor;
  engine& eng;
  admin_access access;
  std::shared_ptr<db_worker_state> worker;
  asio::thread_pool pool{1};  ///< the database worker: one thread, queries in order

  /// An answer known without the database, as an awaitable.
  static asio::awaitable<api_response> answer(api_response r) { co_return r; }

  /// worker->with_db(f) on the worker thread; the awaiting coroutine resumes on its own
  /// executor (the engine's). Not a coroutine itself: GCC 12 destroyed a temporary
  /// std::function argument of a coroutine twice here (its captures freed twice).
  asio::awaitable<api_response> on_worker(std::function<api_response(blocking_db&)> f) {
    return asio::co_spawn(
        pool, [w = worker, f = std::move(f)]() -> asio::awaitable<api_response> { co_return w->with_db(f); },
        asio::use_awaitable);
  }

  asio::awaitable<api_response> handle(const api_request& req) {
    if (auto denied = check_request(access, req)) co_return *denied;
    const auto seg = segments_of(req.target);
    const bool read = req.method == "GET" || req.method == "HEAD";
    const bool post = req.method == "POST";
    auto wrong_method = [](const char* allowed) {
      return error_response(405, fmt::format("use {} here", allowed));
    };
    if (seg.size() == 2 && seg[1] == "overview") {
      if (!read) co_return wrong_method("GET");
      co_return co_await overview();
    }
    if (seg.size() == 2 && seg[1] == "endpoints") {
      if (!read) co_return wrong_method("GET");
      co_return co_await endpoints(std::nullopt);
    }
    if (seg.size() >= 3 && seg[1] == "endpoints") {
      auto id = id_of(seg[2]);
      if (!id) co_return error_response(400, fmt::format("not an endpoint id: {}", seg[2]));
      if (seg.size() == 3) {
        if (!read) co_return wrong_method("GET");
        co_return co_await endpoints(*id);
      }
      if (seg.size() == 4) {
        static const std::vector<std::string> statuses{"pause", "resume", "enable", "disable"};
        const bool known = seg[3] == "replay" || std::find(statuses.begin(), statuses.end(), seg[3]) != statuses.end();
        if (known && !post) co_return wrong_method("POST");
        if (seg[3] == "replay") co_return co_await replay(*id, req);
        if (known) co_return co_await set_status(*id, seg[3], req);
      }
    }
    if (seg.size() == 3 && seg[1] == "events") {
      if (!read) co_return wrong_method("GET");
      co_return co_await event(seg[2]);
    }
    if (seg.size() == 3 && seg[1] == "deliveries" && seg[2] == "resend") {
      if (!post) co_return wrong_method("POST");
      co_return co_await resend(req);
    }
    co_return error_response(404, "no such API route (docs/api.md)");
  }

  // ---------------------------------------------------------------------------------- reads

  // The routes below are plain functions returning the worker's awaitable, not coroutines: their
  // lambdas (with captures) are built outside any coroutine frame (see on_worker).

  /// The overview's fields; `slot_row` the pg_replication_slots row (lag bytes, wal_status) if
  /// the database answered, `database` "ok" or "unreachable".
  static api_response overview_answer(const live_status& live, std::size_t kept, std::size_t capacity,
                                      std::chrono::system_clock::time_point oldest, const pg::query_result* slot_row,
                                      std::string_view database) {
    json_writer j;
    j.begin_object()
        .field("version", std::string(walhook_version))
        .field("instance", live.instance)
        .field("slot", live.slot)
        .field("streaming", live.streaming)
        .key("slot_lag_seconds")
        .number(live.lag_seconds);
    if (slot_row && slot_row->rows() > 0) {
      optional_int(j, "slot_lag_bytes", *slot_row, 0, 0);
      optional_text(j, "slot_wal_status", *slot_row, 0, 1);
    } else {
      j.key("slot_lag_bytes").null();
      j.field("slot_wal_status", live.slot_wal_status);  // as the engine last read it
    }
    j.field("confirmed_lsn", live.confirmed_lsn)
        .field("queued", static_cast<std::int64_t>(live.queued))
        .field("in_flight", static_cast<std::int64_t>(live.in_flight))
        .key("recent_outcomes")
        .begin_object()
        .field("kept", static_cast<std::int64_t>(kept))
        .field("capacity", static_cast<std::int64_t>(capacity))
        .key("since");
    if (kept) j.string(format_iso8601(oldest));
    else j.null();
    j.end_object().field("database", database).end_object();
    return api_response{200, j.take()};
  }

  /// The worker's answer, or `fallback` if the database failed (503/504): what memory knows.
  static asio::awaitable<api_response> or_from_memory(asio::awaitable<api_response> from_db, api_response fallback) {
    auto a = co_await std::move(from_db);
    if (a.status == 503 || a.status == 504) co_return fallback;
    co_return a;
  }

  asio::awaitable<api_response> overview() {
    live_status live = eng.live();
    const auto& log = eng.recent_outcomes();
    const std::size_t kept = log.size();
    const std::size_t capacity = log.capacity();
    const auto oldest = log.oldest();
    // PostgreSQL down: the live fields still answer (the console shows its cards and the error).
    auto fallback = overview_answer(live, kept, capacity, oldest, nullptr, "unreachable");
    return or_from_memory(on_worker([live, kept, capacity, oldest](blocking_db& db) {
                            pg::params p{live.slot};
                            auto r = db.exec(
                                "SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), "
                                "confirmed_flush_lsn)::bigint END, wal_status FROM pg_replication_slots WHERE slot_name = $1",
                                p);
                            return overview_answer(live, kept, capacity, oldest, &r, "ok");
                          }),
                          std::move(fallback));
  }

  asio::awaitable<api_response> endpoints(std::optional<std::int64_t> one) {
    live_status live = eng.live();
    std::vector<outcome_entry> recent;
    if (one) recent = eng.recent_outcomes().of_endpoint(*one, 50);
    return on_worker([live, one, recent](blocking_db& db) {
      pg::params p{one ? std::optional<std::string>(std::to_string(*one)) : std::nullopt};
      auto r = db.exec(endpoints_sql, p);
      json_writer j;
      if (!one) {
        j.begin_object().key("endpoints").begin_array();
        for (int i = 0; i < r.rows(); ++i) {
          j.begin_object();
          endpoint_fields(j, r, i, live, false);
          j.end_object();
        }
        j.end_array().end_object();
        return api_response{200, j.take()};
      }
      if (r.rows() == 0) return error_response(404, fmt::format("no endpoint with id {}", *one));
      j.begin_object();
      endpoint_fields(j, r, 0, live, true);
      auto newest = [&](std::string_view only) {
        pg::params ep{std::to_string(*one)};
        return db.exec(fmt::format("SELECT {} FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                                   "LEFT JOIN walhook.outbox o ON o.id = d.event_id "
                                   "WHERE d.endpoint_id = $1 AND d.created_at >= e.created_at {} "
                                   "ORDER BY d.updated_at DESC, d.id DESC LIMIT 50",
                                   deliveries_columns, only),
                       ep);
      };
      j.key("deliveries");
      deliveries_array(j, newest(""));
      j.key("dead_letters");  // "dead" is the count, as in the list
      deliveries_array(j, newest("AND d.status = 'dead'"));
      j.key("recent_outcomes").begin_array();
      for (const auto& e : recent) {
        j.begin_object().field("event_id", e.event_id);
        outcome_fields(j, e);
        j.end_object();
      }
      j.end_array().end_object();
      return api_response{200, j.take()};
    });
  }

  asio::awaitable<api_response> event(const std::string& event_id) {
    if (!operations::is_uuid(event_id)) return answer(error_response(400, fmt::format("not an event id (a UUID): {}", event_id)));
    const auto& log = eng.recent_outcomes();
    std::vector<outcome_entry> recent = log.of_event(event_id);
    const std::size_t kept = log.size();
    const auto oldest = log.oldest();
    return on_worker([event_id, recent, kept, oldest](blocking_db& db) {
      pg::params p{event_id};
      auto ev = db.exec(
          "SELECT id, tenant_id, event_type, created_at, endpoint_id FROM walhook.outbox WHERE id = $1::uuid", p);
      // The endpoints its tenant and type (or direct route) match now; one created after the
      // event never gets it (the stream routed it before the endpoint existed).
      auto routed = db.exec(R"sql(
SELECT e.id, e.created_at > o.created_at, e.created_at FROM walhook.outbox o
  JOIN walhook.endpoints e ON e.tenant_id = o.tenant_id
 WHERE o.id = $1::uuid
   AND CASE WHEN o.endpoint_id IS NOT NULL THEN e.id = o.endpoint_id
            ELSE e.event_types IS NULL OR o.event_type = ANY (e.event_types) END)sql",
                            p);
      // A newer state of its merge key with a row, per endpoint: this one was merged into it
      // (superseded in memory, so it never got a row of its own).
      auto merged = db.exec(R"sql(
SELECT DISTINCT ON (d.endpoint_id) d.endpoint_id, d.event_id, d.status
  FROM walhook.outbox o
  JOIN walhook.endpoints e ON e.tenant_id = o.tenant_id
  JOIN walhook.deliveries d ON d.endpoint_id = e.id AND d.merge_key = o.merge_key AND d.event_id <> o.id
   AND d.event_created_at > o.created_at AND d.status IN ('pending', 'sending', 'delivered')
 WHERE o.id = $1::uuid AND o.merge_key IS NOT NULL
 ORDER BY d.endpoint_id, d.event_created_at DESC)sql",
                            p);
      std::map<std::int64_t, std::pair<std::string, std::string>> merged_into;  // endpoint → (event, status)
      for (int i = 0; i < merged.rows(); ++i)
        merged_into[int_of(merged.value(i, 0))] = {std::string(merged.value(i, 1)), std::string(merged.value(i, 2))};
      // Its delivery rows: one index probe per endpoint (deliveries are keyed by endpoint first).
      auto rows = db.exec(fmt::format(R"sql(
SELECT d.endpoint_id, {} FROM walhook.endpoints e
  CROSS JOIN LATERAL (SELECT * FROM walhook.deliveries x WHERE x.endpoint_id = e.id AND x.event_id = $1::uuid
                         AND x.created_at >= e.created_at) d
  LEFT JOIN walhook.outbox o ON o.id = d.event_id)sql",
                                      deliveries_columns),
                          p);
      std::map<std::int64_t, int> row_of;
      for (int i = 0; i < rows.rows(); ++i) row_of[int_of(rows.value(i, 0))] = i;
      struct route {
        bool routed = false;
        bool added_after = false;           ///< the endpoint was created after the event
        std::optional<std::string> reason;  ///< why not routed
      };
      std::map<std::int64_t, route> shown;
      for (int i = 0; i < routed.rows(); ++i) {
        const bool late = routed.value(i, 1) == "t";
        route r{.routed = !late, .added_after = late, .reason = std::nullopt};
        if (!r.routed)
          r.reason = "the endpoint was added after the event (created " +
                     pg_timestamptz_to_iso8601(routed.value(i, 2)).value_or(std::string(routed.value(i, 2))) +
                     "): it never gets it";
        shown[int_of(routed.value(i, 0))] = r;
      }
      const route other{.routed = false, .added_after = false, .reason = "its tenant, event types or direct route do not match it now"};
      for (const auto& [id, i] : row_of) shown.emplace(id, other);
      for (const auto& e : recent) shown.emplace(e.endpoint_id, other);
      if (ev.rows() == 0 && shown.empty())
        return error_response(404, fmt::format("no event with id {} (the outbox row is gone, or never was)", event_id));
      std::vector<std::int64_t> ids;
      for (const auto& [id, r] : shown) ids.push_back(id);
      pg::params idp{"{" + fmt::format("{}", fmt::join(ids, ",")) + "}"};
      auto urls = db.exec("SELECT id, url FROM walhook.endpoints WHERE id = ANY ($1::bigint[])", idp);
      std::map<std::int64_t, std::string> url_of;
      for (int i = 0; i < urls.rows(); ++i) url_of[int_of(urls.value(i, 0))] = delivery::redact_url(urls.value(i, 1));
      std::optional<sys_micros> created;
      if (ev.rows() > 0) created = parse_pg_timestamptz(ev.value(0, 3));

      json_writer j;
      j.begin_object().key("event");
      if (ev.rows() == 0) {
        j.null();
      } else {
        j.begin_object().field("id", ev.value(0, 0)).field("tenant_id", ev.value(0, 1)).field("event_type", ev.value(0, 2));
        timestamp(j, "created_at", ev, 0, 3);
        optional_int(j, "endpoint_id", ev, 0, 4);
        j.end_object();
      }
      j.key("endpoints").begin_array();
      for (const auto& [id, where] : shown) {
        j.begin_object().field("endpoint_id", id).key("url");
        if (auto u = url_of.find(id); u != url_of.end()) j.string(u->second);
        else j.null();  // removed since
        j.field("routed", where.routed).field("routed_reason", where.reason).key("delivery");
        std::string verdict = "unknown";
        if (auto r = row_of.find(id); r != row_of.end()) {
          j.begin_object();
          delivery_fields(j, rows, r->second, 1);
          j.end_object();
          const auto status = rows.value(r->second, 4);
          verdict = status == "sending" ? "in_flight" : std::string(status);
        } else {
          j.null();
        }
        j.key("recent_outcomes").begin_array();
        const outcome_entry* last = nullptr;
        for (const auto& e : recent) {
          if (e.endpoint_id != id) continue;
          last = &e;
          j.begin_object();
          outcome_fields(j, e);
          j.end_object();
        }
        j.end_array();
        // Why the verdict is what it is, when neither a row nor an attempt says so.
        std::optional<std::string> reason;
        if (row_of.find(id) == row_of.end()) {
          if (last) {
            verdict = last->result == "retry" ? "pending" : last->result;
          } else if (where.added_after) {
            verdict = "not_routed";
            reason = where.reason;
          } else if (auto m = merged_into.find(id); m != merged_into.end()) {
            verdict = "merged";
            reason = fmt::format("merged into a newer event, {}, of the same merge key ({} for this endpoint): only the "
                                 "newest state of a merge key is sent",
                                 m->second.first, m->second.second);
          } else {
            // No row and no attempt: never "pending", which would be a promise.
            const bool in_window =
                kept > 0 && created &&
                std::chrono::system_clock::time_point(
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(created->time_since_epoch())) > oldest;
            reason = std::string("no delivery row and no attempt in this walhook's in-memory record: ") +
                     (in_window ? "it is newer than the record's oldest entry, so most likely still queued in memory; "
                                  "or merged into a newer event of its merge key, or sent by another walhook instance"
                                : "still queued in memory, merged into a newer event of its merge key, or delivered "
                                  "before the in-memory record began (a first-try success leaves no row with --record "
                                  "failed; the record is lost at restart)");
          }
        }
        j.field("verdict", verdict).field("reason", reason).end_object();
      }
      j.end_array();
      j.field("note",
              fmt::format("first-try successes leave no row with --record failed; the in-memory record of this "
                          "walhook holds its last {} attempts{} and is lost at restart",
                          kept, kept ? " since " + format_iso8601(oldest) : std::string()));
      j.end_object();
      return api_response{200, j.take()};
    });
  }

  // ---------------------------------------------------------------------------------- actions

  /// Who acts, for the admin.action log line (written on the worker: log lines are one write).
  struct actor {
    std::string by, remote, token;
  };
  actor actor_of(const api_request& req) const {
    auto by = operator_of(req.operator_name);
    return {by.empty() ? "-" : by, req.remote, access.token.empty() ? "none" : token_fingerprint(access.token)};
  }
  static void log_action(const actor& who, std::string_view action, std::int64_t endpoint_id,
                         const std::string& event_id, std::int64_t deliveries) {
    log::info("admin.action", {{"action", action},
                               {"endpoint_id", endpoint_id},
                               {"event_id", event_id.empty() ? std::string_view("-") : std::string_view(event_id)},
                               {"deliveries", deliveries},
                               {"by", who.by},
                               {"remote", who.remote},
                               {"token", who.token}});
  }

  asio::awaitable<api_response> set_status(std::int64_t id, const std::string& action, const api_request& req) {
    return on_worker([id, action, who = actor_of(req), body = req.body](blocking_db& db) {
      json_body(body).only({});  // validated, no member used
      auto c = operations::set_status(db, id, action);
      log_action(who, action, id, {}, c.deliveries);
      json_writer j;
      j.begin_object();
      change_fields(j, c);
      j.end_object();
      return api_response{200, j.take()};
    });
  }

  asio::awaitable<api_response> replay(std::int64_t id, const api_request& req) {
    return on_worker([id, who = actor_of(req), body = req.body](blocking_db& db) {
      json_body parsed(body);
      parsed.only({"since", "until"});
      operations::replay_filter f;
      f.endpoint_id = id;
      f.since = parsed.text("since");
      f.until = parsed.text("until");
      auto changes = operations::replay(db, f);
      std::int64_t n = 0;
      for (const auto& c : changes) n += c.deliveries;
      log::info("admin.action", {{"action", "replay"},
                                 {"endpoint_id", id},
                                 {"event_id", "-"},
                                 {"since", f.since ? std::string_view(*f.since) : std::string_view("-")},
                                 {"until", f.until ? std::string_view(*f.until) : std::string_view("-")},
                                 {"deliveries", n},
                                 {"by", who.by},
                                 {"remote", who.remote},
                                 {"token", who.token}});
      json_writer j;
      j.begin_object().field("replayed", n).key("changes").begin_array();
      for (const auto& c : changes) {
        j.begin_object();
        change_fields(j, c);
        j.end_object();
      }
      j.end_array().end_object();
      return api_response{200, j.take()};
    });
  }

  asio::awaitable<api_response> resend(const api_request& req) {
    return on_worker([who = actor_of(req), body = req.body](blocking_db& db) {
      json_body parsed(body);
      parsed.only({"endpoint_id", "event_id"});
      auto endpoint_id = parsed.integer("endpoint_id");
      auto ev = parsed.text("event_id");
      if (!endpoint_id || !ev) throw cli_error("give {\"endpoint_id\": N, \"event_id\": \"…\"}");
      auto c = operations::resend(db, *endpoint_id, *ev);
      log_action(who, "resend", c.endpoint_id, *ev, c.deliveries);
      json_writer j;
      j.begin_object();
      change_fields(j, c);
      j.end_object();
      return api_response{200, j.take()};
    });
  }
};

admin_api::admin_api(asio::any_io_executor ex, engine& e, admin_access access)
    : impl_(std::make_shared<impl>(ex, e, std::move(access))) {}

admin_api::~admin_api() = default;

void admin_api::stop() {
  impl_->pool.stop();
  impl_->pool.join();
}

asio::awaitable<api_response> admin_api::handle(const api_request& req) {
  auto self = impl_;  // the worker's answer may come after stop()
  co_return co_await self->handle(req);
}

}  // namespace walhook::relay
