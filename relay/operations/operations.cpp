#include "relay/operations/operations.hpp"

#include "delivery/signing.hpp"
#include "delivery/destination.hpp"
#include "delivery/job.hpp"
#include "delivery/url.hpp"
#include "relay/core/payload_filter.hpp"
#include "common/time.hpp"

#include <fmt/format.h>

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace walhook::relay::operations {

namespace {

std::optional<std::string> opt(const std::optional<std::string>& v) { return v; }
std::optional<std::string> opt_id(const std::optional<std::int64_t>& v) {
  return v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt;
}

/// Tells a running walhook, through the WAL, to look for pending deliveries of an endpoint
/// ("wake"), or that an operator resumed it ("resume": its circuit breaker closes too). In the
/// caller's transaction: walhook reads it when the change is visible.
void wake_relay(blocking_db& db, std::int64_t endpoint_id, const char* what = "wake") {
  db.exec("SELECT pg_logical_emit_message(true, 'walhook', $1)", pg::params{fmt::format("{}:{}", what, endpoint_id)});
}

struct endpoint_row {
  std::string tenant_id;
  std::string status;
  std::string created_at;  ///< timestamptz text
  bool breaker_paused = false;
  std::string paused_until;  ///< RFC 3339 UTC, "" if not paused by the breaker
};

/// Locks the endpoint's row (FOR UPDATE: a concurrent remove waits); throws if there is none.
endpoint_row lock_endpoint(blocking_db& db, std::int64_t id) {
  auto r = db.exec(R"sql(
SELECT e.tenant_id, e.status, e.created_at::text, coalesce(h.paused_until > now(), false),
       coalesce(to_char(h.paused_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), '')
  FROM walhook.endpoints e LEFT JOIN walhook.endpoint_health h ON h.endpoint_id = e.id
 WHERE e.id = $1 FOR UPDATE OF e)sql",
                   pg::params{std::to_string(id)});
  if (r.rows() == 0) throw not_found(fmt::format("no endpoint with id {}", id));
  return {std::string(r.value(0, 0)), std::string(r.value(0, 1)), std::string(r.value(0, 2)), r.value(0, 3) == "t",
          std::string(r.value(0, 4))};
}

/// What an endpoint's status means for deliveries made due now, for change::note.
std::string due_note(std::int64_t id, const endpoint_row& e) {
  if (e.status == "paused") return fmt::format("endpoint {} is paused: they go out after `walhook endpoint resume {}`", id, id);
  if (e.status == "disabled")
    return fmt::format("endpoint {} is disabled: they go out after `walhook endpoint enable {}`", id, id);
  if (e.breaker_paused)
    return fmt::format("the circuit breaker holds endpoint {} until {}: they go out then (or after `walhook endpoint "
                       "resume {}`)",
                       id, e.paused_until, id);
  return "";
}

}  // namespace

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
  }
  return true;
}

void check_url(const std::string& url) {
  auto d = delivery::parse_destination(url);
  if (d) return;
  if (delivery::names_broker(url))
    throw invalid_input("--url " + delivery::redact_url(url) + ": " + d.error().detail());
  const auto at = url.find('@');
  const auto authority = url.find("//");
  if (at != std::string::npos && at < url.find_first_of("/?#", authority == std::string::npos ? 0 : authority + 2))
    throw invalid_input("--url must not carry credentials (user:password@): receivers authenticate walhook by its "
                        "signature; " + delivery::redact_url(url));
  throw invalid_input("--url must be an absolute http:// or https:// URL (or nats://, amqp:// for a broker): " +
                      delivery::redact_url(url));
}

void check_contact(blocking_db& db, std::int64_t contact_id, const std::string& tenant_id) {
  auto r = db.exec("SELECT tenant_id FROM walhook.endpoints WHERE id = $1", pg::params{std::to_string(contact_id)});
  if (r.rows() == 0) throw invalid_input(fmt::format("--contact-endpoint: no endpoint with id {}", contact_id));
  if (r.value(0, 0) != tenant_id)
    throw invalid_input(fmt::format("--contact-endpoint: endpoint {} is another tenant's; a contact endpoint must be one of "
                                    "tenant {}'s (walhook's notifications carry the endpoint's URL and errors)",
                                    contact_id, tenant_id));
}

std::vector<std::string> clean_event_types(const std::vector<std::string>& types) {
  std::vector<std::string> out;
  for (auto t : types) {
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(t.begin());
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    if (t.empty()) throw invalid_input("--event-types has an empty type (give a comma-separated list, e.g. order.paid,order.shipped)");
    out.push_back(std::move(t));
  }
  return out;
}

std::string pg_array_literal(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

// ------------------------------------------------------------------------------------ status

change set_status(blocking_db& db, std::int64_t endpoint_id, const std::string& action) {
  static const std::array<std::pair<const char*, const char*>, 4> actions{
      {{"pause", "paused"}, {"resume", "resumed"}, {"enable", "enabled"}, {"disable", "disabled"}}};
  auto it = std::find_if(actions.begin(), actions.end(), [&](const auto& a) { return action == a.first; });
  if (it == actions.end()) throw invalid_input(fmt::format("unknown action '{}': pause, resume, enable or disable", action));
  const pg::params id{std::to_string(endpoint_id)};
  db_transaction tx(db);
  lock_endpoint(db, endpoint_id);
  const std::string status = action == "disable" ? "disabled" : action == "pause" ? "paused" : "active";
  db.exec("UPDATE walhook.endpoints SET status = $2, updated_at = now() WHERE id = $1",
          pg::params{std::to_string(endpoint_id), status});
  change c{.endpoint_id = endpoint_id, .action = it->second, .deliveries = 0, .note = ""};
  if (action == "enable" || action == "resume") {
    // An operator's go-ahead also closes the circuit breaker and clears the disable reason and
    // the last error: what failed before the go-ahead is history, not the endpoint's state (a
    // success after it writes no health, so an error left here would show as current for good).
    // The next failure records its own; the cleared one goes into the answer's note.
    auto before =
        db.exec("SELECT last_status, last_error FROM walhook.endpoint_health WHERE endpoint_id = $1 FOR UPDATE", id);
    db.exec("UPDATE walhook.endpoint_health SET consecutive_failures = 0, first_failure_at = NULL, paused_until = NULL, "
            "probe_rounds = 0, disabled_at = NULL, disabled_reason = NULL, last_status = NULL, last_error = NULL, "
            "updated_at = now() WHERE endpoint_id = $1",
            id);
    // Go-ahead means now: pending deliveries waiting out a backoff or a pause become due. The
    // answer counts every pending one (all are due now), not only those that had to wait.
    const auto waited = db.exec("UPDATE walhook.deliveries SET next_attempt_at = now(), updated_at = now() "
                                "WHERE endpoint_id = $1 AND status = 'pending' AND next_attempt_at > now()",
                                id)
                            .affected();
    c.deliveries = std::stoll(std::string(
        db.exec("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'", id).value(0, 0)));
    if (waited > 0) c.note = fmt::format("{} of them had been waiting out a backoff or a pause", waited);
    if (before.rows() > 0 && !before.is_null(0, 1))
      c.note += fmt::format("{}its last error, from before the {}, is cleared: {}", c.note.empty() ? "" : "; ", action,
                            delivery::cap_text(std::string(before.value(0, 1)), 300));
    wake_relay(db, endpoint_id, "resume");
  } else if (action == "pause") {
    c.note = fmt::format("its deliveries wait (none is lost) until `walhook endpoint resume {}` — up to "
                         "walhook run --give-up-after-h (72 h), then they end dead as one range",
                         endpoint_id);
  } else {
    c.note = fmt::format("its deliveries wait (none is lost) until `walhook endpoint enable {}` — up to "
                         "walhook run --give-up-after-h (72 h), then they end dead as one range",
                         endpoint_id);
  }
  tx.commit();
  return c;
}

// ------------------------------------------------------------------------------------ remove

std::int64_t open_deliveries(blocking_db& db, std::int64_t endpoint_id) {
  auto r = db.exec(R"sql(
SELECT (SELECT count(*) FROM walhook.deliveries d
         WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending')
           AND d.created_at >= e.created_at)  -- not a removed endpoint's that had the same id
  FROM walhook.endpoints e WHERE e.id = $1)sql",
                   pg::params{std::to_string(endpoint_id)});
  if (r.rows() == 0) throw not_found(fmt::format("no endpoint with id {}", endpoint_id));
  return std::stoll(std::string(r.value(0, 0)));
}

change remove(blocking_db& db, std::int64_t endpoint_id) {
  const pg::params id{std::to_string(endpoint_id)};
  db_transaction tx(db);
  lock_endpoint(db, endpoint_id);
  const auto open = open_deliveries(db, endpoint_id);
  // The endpoints that name it as contact (the removal trigger, migration 006, clears them).
  auto orphaned = db.exec("SELECT id FROM walhook.endpoints WHERE contact_endpoint_id = $1 ORDER BY id", id);
  // The endpoints trigger (migration 004) ends its open deliveries dead, deletes its health row
  // and keeps a copy for walhook until it has streamed the removal.
  db.exec("DELETE FROM walhook.endpoints WHERE id = $1", id);
  // Its deliveries have nowhere to go any more (no foreign key: walhook's batches must never
  // fail on an endpoint deleted under them).
  db.exec("DELETE FROM walhook.deliveries WHERE endpoint_id = $1", id);
  tx.commit();
  std::string note;  // `deliveries` counts the open ones that ended with it
  if (orphaned.rows() > 0) {
    std::string ids;
    for (int i = 0; i < orphaned.rows(); ++i) ids += (i ? ", " : "") + std::string(orphaned.value(i, 0));
    note = fmt::format("endpoint{} {} had it as contact endpoint: now none", orphaned.rows() == 1 ? "" : "s", ids);
  }
  return {.endpoint_id = endpoint_id, .action = "removed", .deliveries = open, .note = note};
}

// ------------------------------------------------------------------------------------ update

change update(blocking_db& db, std::int64_t endpoint_id, const endpoint_update& u) {
  std::vector<std::string> changed;
  if (u.url) {
    check_url(*u.url);
    changed.emplace_back("url");
  }
  std::optional<std::string> types;
  if (u.event_types) {
    auto clean = clean_event_types(*u.event_types);
    if (!clean.empty()) types = pg_array_literal(clean);
    changed.emplace_back("event_types");
  }
  if (u.max_concurrency) {
    if (*u.max_concurrency < 1 || *u.max_concurrency > 1000) throw invalid_input("--max-concurrency must be between 1 and 1000");
    changed.emplace_back("max_concurrency");
  }
  if (u.description) changed.emplace_back("description");
  if (u.contact_endpoint_id) {
    if (*u.contact_endpoint_id == endpoint_id)
      throw invalid_input("--contact-endpoint must be another endpoint (notifications about an endpoint cannot go to itself)");
    changed.emplace_back("contact_endpoint_id");
  }
  check(u.policies);
  for (auto& c : u.policies.given()) changed.push_back(std::move(c));
  if (changed.empty())
    throw invalid_input("nothing to update: give --url, --event-types, --max-concurrency, --description, "
                        "--contact-endpoint, --header, --header-secret, --filter, --max-rate, --rate-burst, "
                        "--oauth-token-url, --oauth-client-id, --oauth-client-secret, --oauth-scope or --proxy");
  db_transaction tx(db);
  const auto row = lock_endpoint(db, endpoint_id);
  if (u.contact_endpoint_id && *u.contact_endpoint_id) check_contact(db, **u.contact_endpoint_id, row.tenant_id);
  // A flag per nullable column: "not given" and "set to NULL" differ.
  pg::params p{std::to_string(endpoint_id),
               u.url,
               u.event_types ? "t" : "f",
               types,
               u.max_concurrency ? std::optional<std::string>(std::to_string(*u.max_concurrency)) : std::nullopt,
               u.description ? "t" : "f",
               u.description && !u.description->empty() ? u.description : std::nullopt,
               u.contact_endpoint_id ? "t" : "f",
               u.contact_endpoint_id ? opt_id(*u.contact_endpoint_id) : std::nullopt};
  auto policies = u.policies;
  db.exec(R"sql(
UPDATE walhook.endpoints
   SET url = coalesce($2, url),
       event_types = CASE WHEN $3::boolean THEN $4::text[] ELSE event_types END,
       max_concurrency = coalesce($5::int, max_concurrency),
       description = CASE WHEN $6::boolean THEN $7 ELSE description END,
       contact_endpoint_id = CASE WHEN $8::boolean THEN $9::bigint ELSE contact_endpoint_id END,
       updated_at = now()
 WHERE id = $1)sql",
          p);
  // After the URL: OAuth2 and a proxy are refused for a broker, stored or given now.
  if (u.url && policies.given().empty()) check_update(db, endpoint_id, policies);
  write_policies(db, endpoint_id, policies);
  tx.commit();
  std::string list;
  for (const auto& c : changed) list += (list.empty() ? "" : ", ") + c;
  return {.endpoint_id = endpoint_id, .action = "updated", .deliveries = 0, .note = "changed " + list};
}

// ------------------------------------------------------------------------------------ rotate

rotated_secret rotate_secret(blocking_db& db, std::int64_t endpoint_id, std::chrono::seconds grace, const std::string& secret) {
  if (grace.count() < 0) throw invalid_input("--grace must not be negative");
  const std::string fresh = secret.empty() ? delivery::generate_secret() : secret;
  if (!delivery::parse_secret(fresh)) throw invalid_input("--secret must be whsec_ followed by base64 of a 16–64 byte key");
  db_transaction tx(db);
  lock_endpoint(db, endpoint_id);
  auto current = db.exec("SELECT secret FROM walhook.endpoints WHERE id = $1", pg::params{std::to_string(endpoint_id)});
  const std::string old(current.value(0, 0));
  std::string_view rest = old;
  while (!rest.empty()) {  // a secret already held would sign twice and never be dropped first
    const auto end = rest.find(' ');
    if (rest.substr(0, end) == fresh) throw invalid_input("--secret is already one of the endpoint's secrets");
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
  if (grace.count() == 0) {  // at once: the old secrets go now, nothing waits for a drop
    db.exec("UPDATE walhook.endpoints SET secret = $2, secret_grace_until = NULL, updated_at = now() WHERE id = $1",
            pg::params{std::to_string(endpoint_id), fresh});
    tx.commit();
    return {.secret = fresh, .grace_until = ""};
  }
  // Every secret held now stays valid (and signs) until the new grace ends; walhook run then signs
  // with the first alone and drops the others (sql/statements/drop_expired_secrets.sql).
  auto r = db.exec(R"sql(
UPDATE walhook.endpoints
   SET secret = $2 || ' ' || secret, secret_grace_until = now() + make_interval(secs => $3::bigint), updated_at = now()
 WHERE id = $1
RETURNING to_char(secret_grace_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))sql",
                   pg::params{std::to_string(endpoint_id), fresh, std::to_string(grace.count())});
  tx.commit();
  return {.secret = fresh, .grace_until = std::string(r.value(0, 0))};
}

// ------------------------------------------------------------------------------------ replay

namespace {

/// Which deliveries replay() takes (d: walhook.deliveries, e: its endpoint): $1 delivery, $2
/// endpoint, $3 since, $4 until, $5 event type, $6 the ids a payload filter matched (bigint[];
/// NULL: no filter).
constexpr const char* replay_where = R"sql(
         ($1::bigint IS NULL OR d.id = $1::bigint)
     AND ($2::bigint IS NULL OR d.endpoint_id = $2::bigint)
     AND ($3::timestamptz IS NULL OR d.event_created_at >= $3::timestamptz)
     AND ($4::timestamptz IS NULL OR d.event_created_at < $4::timestamptz)
     AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM walhook.outbox o WHERE o.id = d.event_id AND o.event_type = $5))
     AND ($6::bigint[] IS NULL OR d.id = ANY ($6::bigint[]))
     AND (d.status = 'dead' OR (d.status = 'pending' AND e.status = 'disabled'))
     -- Never a removed endpoint's history when its id was reused: rows older than the endpoint.
     AND d.created_at >= e.created_at)sql";

/// The candidates whose event's webhook body `filter` matches, as a bigint[] literal; `gone`
/// counts those whose outbox row has left (retention): they cannot be matched.
std::string filter_matches(blocking_db& db, const pg::params& p, const std::string& filter, std::int64_t& gone) {
  std::string why;
  auto compiled = payload_filter::compile(filter, &why);
  if (!compiled) throw invalid_input("--filter: " + why);
  auto r = db.exec(fmt::format("SELECT d.id, o.id, o.event_type, o.created_at, o.payload::text "
                               "FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                               "LEFT JOIN walhook.outbox o ON o.id = d.event_id WHERE {}",
                               replay_where),
                   p);
  std::string ids;
  gone = 0;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.is_null(i, 1)) {
      ++gone;
      continue;
    }
    delivery::event ev;  // the body walhook sends (relay/core/rows.cpp, event_from_row)
    ev.id = std::string(r.value(i, 1));
    ev.type = std::string(r.value(i, 2));
    ev.created_at = pg_timestamptz_to_iso8601(r.value(i, 3)).value_or(std::string(r.value(i, 3)));
    ev.payload = std::string(r.value(i, 4));
    if (compiled->matches(delivery::make_body(ev))) ids += (ids.empty() ? "" : ",") + std::string(r.value(i, 0));
  }
  return "{" + ids + "}";
}

}  // namespace

std::vector<change> replay(blocking_db& db, const replay_filter& f) {
  if (!f.delivery_id && !f.endpoint_id) throw invalid_input("give --delivery ID or --endpoint ID");
  if (f.since && f.until &&
      db.exec("SELECT $1::timestamptz >= $2::timestamptz", pg::params{*f.since, *f.until}).value(0, 0) == "t")
    throw invalid_input(fmt::format("--until {} is not after --since {}: the range is empty", *f.until, *f.since));
  db_transaction tx(db);
  if (f.endpoint_id) lock_endpoint(db, *f.endpoint_id);
  pg::params p{opt_id(f.delivery_id), opt_id(f.endpoint_id), opt(f.since), opt(f.until), opt(f.event_type), std::nullopt};
  std::int64_t unreadable = 0;
  if (f.payload_filter) p[5] = filter_matches(db, p, *f.payload_filter, unreadable);
  // Dead deliveries, and pending ones of a disabled endpoint, start over with fresh counters. Of
  // several with one merge key only the newest comes back, and none where a pending delivery
  // already holds the key (it carries a newer state of the entity).
  auto r = db.exec(fmt::format(R"sql(
WITH candidates AS (
  SELECT d.id, d.endpoint_id, d.merge_key, d.commit_lsn, d.status
    FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id
   WHERE {}
   FOR UPDATE OF d
), blocked AS (
  SELECT c.id FROM candidates c
   WHERE c.status = 'dead' AND c.merge_key IS NOT NULL
     AND (EXISTS (SELECT 1 FROM walhook.deliveries p WHERE p.endpoint_id = c.endpoint_id
                    AND p.merge_key = c.merge_key AND p.status = 'pending')
          OR c.id <> (SELECT c2.id FROM candidates c2 WHERE c2.endpoint_id = c.endpoint_id AND c2.merge_key = c.merge_key
                       ORDER BY c2.commit_lsn DESC NULLS LAST, c2.id DESC LIMIT 1))
)
UPDATE walhook.deliveries d
   SET status = 'pending', attempts = 0, deferrals = 0, next_attempt_at = now(), last_error = NULL, last_status = NULL,
       updated_at = now()
  FROM candidates c
 WHERE d.id = c.id AND c.id NOT IN (SELECT id FROM blocked)
RETURNING d.endpoint_id)sql",
                               replay_where),
                   p);
  std::vector<change> out;
  for (int i = 0; i < r.rows(); ++i) {
    const auto id = std::stoll(std::string(r.value(i, 0)));
    auto it = std::find_if(out.begin(), out.end(), [&](const change& c) { return c.endpoint_id == id; });
    if (it == out.end()) {
      out.push_back({.endpoint_id = id, .action = "replayed", .deliveries = 0, .note = ""});
      it = out.end() - 1;
    }
    ++it->deliveries;
  }
  const std::string unread =
      unreadable ? fmt::format("{} dead letter{} whose event has left walhook.outbox (retention) could not be matched "
                               "against --filter and stay{}",
                               unreadable, unreadable == 1 ? "" : "s", unreadable == 1 ? "s" : "")
                 : std::string();
  if (f.dry_run) {  // counted, then rolled back: nothing changes, walhook run is not woken
    for (auto& c : out) {
      c.action = "would replay";
      c.note = unread;
    }
    return out;
  }
  for (auto& c : out) {
    wake_relay(db, c.endpoint_id);
    c.note = due_note(c.endpoint_id, lock_endpoint(db, c.endpoint_id));
    if (!unread.empty()) c.note += (c.note.empty() ? "" : "; ") + unread;
  }
  tx.commit();
  return out;
}

// ------------------------------------------------------------------------------------ resend

change resend(blocking_db& db, std::int64_t endpoint_id, const std::string& event_id) {
  if (!is_uuid(event_id)) throw invalid_input(fmt::format("event id '{}' is not a UUID (walhook.outbox.id)", event_id));
  db_transaction tx(db);
  const auto endpoint = lock_endpoint(db, endpoint_id);
  auto ev = db.exec("SELECT tenant_id, aggregate_id, merge_key, created_at::text, seq FROM walhook.outbox WHERE id = $1",
                    pg::params{event_id});
  if (ev.rows() == 0)
    throw not_found(fmt::format("no event {} in walhook.outbox (never published, or deleted by retention)", event_id));
  if (ev.value(0, 0) != endpoint.tenant_id)
    throw invalid_input(fmt::format("event {} is of tenant '{}', endpoint {} of tenant '{}'", event_id, ev.value(0, 0), endpoint_id,
                                    endpoint.tenant_id));
  const auto merge_key = ev.is_null(0, 2) ? std::nullopt : std::optional<std::string>(ev.value(0, 2));
  const pg::params key{std::to_string(endpoint_id), event_id};
  auto row = db.exec("SELECT status FROM walhook.deliveries WHERE endpoint_id = $1 AND event_id = $2 FOR UPDATE", key);
  if (row.rows() > 0 && row.value(0, 0) == "sending")
    throw conflict(fmt::format("an attempt of event {} to endpoint {} is in flight now: wait for its outcome "
                               "(walhook status), then resend",
                               event_id, endpoint_id));
  // At most one pending delivery per merge key (index deliveries_pending_merge_key): another
  // state of the entity waiting to go out blocks this one.
  if (merge_key) {
    auto other = db.exec(R"sql(
SELECT d.event_id::text, coalesce(o.seq > $4::bigint, true)
  FROM walhook.deliveries d LEFT JOIN walhook.outbox o ON o.id = d.event_id
 WHERE d.endpoint_id = $1 AND md5(d.merge_key) = md5($3) AND d.merge_key = $3 AND d.status = 'pending'
   AND d.event_id <> $2::uuid)sql",
                         pg::params{std::to_string(endpoint_id), event_id, *merge_key, std::string(ev.value(0, 4))});
    if (other.rows() > 0) {
      if (other.value(0, 1) == "t")
        throw conflict(fmt::format("a newer state of merge key '{}' is pending for endpoint {} (event {}): it carries "
                                   "the entity's latest state, so event {} is not resent",
                                   delivery::cap_text(*merge_key, 200), endpoint_id, other.value(0, 0), event_id));
      throw conflict(fmt::format("an older state of merge key '{}' is pending for endpoint {} (event {}): resend after "
                                 "it went out",
                                 delivery::cap_text(*merge_key, 200), endpoint_id, other.value(0, 0)));
    }
  }
  // The same webhook-id (the event id) as before: a receiver that deduplicates sees it once.
  // A row of a removed endpoint that had this id is taken over as new.
  const std::string upsert = R"sql(
INSERT INTO walhook.deliveries AS d
  (endpoint_id, event_id, aggregate_id, merge_key, status, attempts, next_attempt_at, event_created_at)
VALUES ($1, $2::uuid, $3, $4, 'pending', 0, now(), $5::timestamptz)
ON CONFLICT (endpoint_id, event_id) DO UPDATE
   SET status = 'pending', attempts = 0, deferrals = 0, next_attempt_at = now(), last_error = NULL, last_status = NULL,
       delivered_at = NULL, updated_at = now(),
       created_at = CASE WHEN d.created_at < $6::timestamptz THEN now() ELSE d.created_at END)sql";
  try {
    db.exec(upsert, pg::params{std::to_string(endpoint_id), event_id, ev.is_null(0, 1) ? std::nullopt : std::optional<std::string>(ev.value(0, 1)),
                               merge_key, std::string(ev.value(0, 3)), endpoint.created_at});
  } catch (const pg_error& e) {
    // walhook stored a pending state of the merge key meanwhile (a unique violation of the index).
    if (e.constraint() == "deliveries_pending_merge_key")
      throw conflict(fmt::format("a newer state of merge key '{}' became pending for endpoint {}: it carries the "
                                 "entity's latest state, so event {} is not resent",
                                 delivery::cap_text(merge_key.value_or(""), 200), endpoint_id, event_id));
    throw;
  }
  wake_relay(db, endpoint_id);
  tx.commit();
  // An operator may send an event the routing would not have (the endpoint did not exist yet, or
  // does not subscribe to the type): allowed, but said.
  auto routing = db.exec(R"sql(
SELECT e.created_at > o.created_at,
       e.event_types IS NOT NULL AND NOT (o.event_type = ANY (e.event_types)), o.event_type
  FROM walhook.endpoints e, walhook.outbox o WHERE e.id = $1 AND o.id = $2)sql",
                         pg::params{std::to_string(endpoint_id), event_id});
  std::string note = due_note(endpoint_id, endpoint);
  const auto add = [&note](const std::string& sentence) { note += (note.empty() ? "" : "; ") + sentence; };
  if (routing.rows() > 0 && routing.value(0, 0) == "t")
    add(fmt::format("endpoint {} was added after the event: the routing never sent it there", endpoint_id));
  if (routing.rows() > 0 && routing.value(0, 1) == "t")
    add(fmt::format("endpoint {} does not subscribe to {}: the routing never sent it there", endpoint_id, routing.value(0, 2)));
  return {.endpoint_id = endpoint_id, .action = "resent", .deliveries = 1, .note = note};
}

// ------------------------------------------------------------------------------------ fingerprints

std::string secret_fingerprints(const std::string& secrets) {
  auto keys = delivery::parse_secrets(secrets);
  if (!keys) return "";
  std::string out;
  for (const auto& k : *keys) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int n = 0;
    if (EVP_Digest(k.bytes.data(), k.bytes.size(), digest.data(), &n, EVP_sha256(), nullptr) != 1 || n < 6)
      throw std::runtime_error("OpenSSL: SHA-256 failed");
    if (!out.empty()) out += ' ';
    out += "sha256:";
    for (int i = 0; i < 6; ++i) out += fmt::format("{:02x}", digest[static_cast<std::size_t>(i)]);
  }
  return out;
}

std::optional<std::string> cursor_note(blocking_db& db, std::int64_t endpoint_id) {
  auto r = db.exec("SELECT e.status, to_char(c.entered_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
                   "FROM walhook.endpoint_cursors c JOIN walhook.endpoints e ON e.id = c.endpoint_id AND e.tenant_id = c.tenant_id "
                   "WHERE c.endpoint_id = $1",
                   pg::params{std::to_string(endpoint_id)});
  if (r.rows() == 0) return std::nullopt;
  const std::string status(r.value(0, 0));
  return fmt::format("endpoint {} follows the outbox by cursor since {}: what it is owed is read back from walhook.outbox "
                     "when it can take it, not replayed from walhook.deliveries{}",
                     endpoint_id, r.value(0, 1),
                     status == "active" ? std::string()
                                        : fmt::format(" (it is {}: `walhook endpoint {} {}` sends it)", status,
                                                      status == "paused" ? "resume" : "enable", endpoint_id));
}

}  // namespace walhook::relay::operations
