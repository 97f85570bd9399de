#pragma once
// Every endpoint's state, worst first: the one read behind `walhook status` and the admin API's
// GET /api/endpoints (sql/statements/endpoint_status.sql), as typed rows, so both show the same
// numbers in the same order. Live numbers (queued, in flight) are the running walhook's, not
// here: the API reads them from the engine, the CLI from --admin-url.

#include "relay/operations/blocking_db.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay::operations {

/// One endpoint with its health and its deliveries' counts. Timestamps are RFC 3339 UTC with
/// PostgreSQL's precision (microseconds when it has them, e.g. "2026-11-30T03:23:51.123456Z");
/// text fields are as stored (callers redact the URL with delivery::redact_url and cap errors
/// with delivery::cap_text).
struct endpoint_status {
  std::int64_t id = 0;
  std::string tenant_id;
  std::string url;                          ///< as stored: may carry a query with secrets, redact it
  std::string status;                       ///< the operator's: active | paused | disabled
  std::int64_t max_concurrency = 0;
  bool breaker_holds = false;               ///< paused_until is in the future: the circuit breaker holds it
  std::optional<std::string> paused_until;  ///< endpoint_health.paused_until, past or future; nullopt if never set
  std::int64_t pending = 0;                 ///< deliveries with status pending
  std::int64_t sending = 0;                 ///< claimed or held attempts (status sending)
  std::int64_t dead = 0;                    ///< dead letters
  /// Seconds since the oldest pending or sending event was created — or, for an endpoint that
  /// follows the outbox by cursor, since its cursor's position was current, if that is older.
  std::optional<double> oldest_pending_age_s;
  std::int64_t consecutive_failures = 0;    ///< failed attempts in a row (the circuit breaker's count)
  std::optional<std::int64_t> last_status;  ///< endpoint_health.last_status (an HTTP status)
  std::optional<std::string> last_error;    ///< endpoint_health.last_error
  std::optional<std::string> disabled_reason;  ///< why the breaker disabled it
  std::string secret_fingerprints;          ///< operations::secret_fingerprints of its secrets ("" if none parse)
  std::optional<std::string> event_types_json;  ///< its event types as a JSON array text; nullopt: all types
  std::string ordering;                     ///< walhook.endpoints.ordering
  std::optional<std::string> description;
  std::optional<std::int64_t> contact_endpoint_id;  ///< where notifications about it go
  std::optional<std::string> secret_grace_until;    ///< when the older secrets stop being valid
  /// It follows walhook.outbox by cursor (it fell behind: down, paused, too slow) since then;
  /// nullopt: it follows the stream.
  std::optional<std::string> following_outbox_since;
  std::int64_t events_drained = 0;  ///< deliveries its cursor read back from the outbox
  std::int64_t owed = 0;            ///< outbox rows its cursor owes it now (counted up to 100,000)
  /// When its oldest pending age started, microseconds since 1970 (INT64_MAX if it has none):
  /// the first member of its place in the order (page_key_of).
  std::int64_t since_us = 0;
  /// Migration 012: its headers ("Name: value" each, as a JSON array text; nullopt: none), its
  /// secret headers as fingerprints only (secret_header_fingerprint, "; "-separated; "" if none),
  /// its payload filter (JSON text), max_rate ("20/s") and rate_burst.
  std::optional<std::string> headers_json;
  std::string secret_headers;
  std::optional<std::string> filter;
  std::optional<std::string> max_rate;
  std::optional<std::int64_t> rate_burst;
  /// Migration 014: the OAuth2 token URL, client id, the client secret's fingerprint only
  /// (oauth_secret_shown) and scope; the proxy ("direct", http://host:port; nullopt: walhook run's).
  std::optional<std::string> oauth_token_url, oauth_client_id, oauth_client_secret, oauth_scope, proxy;
};

/// An endpoint's place in the worst-first order, which does not move while its state does not
/// (the age's start, not the age): a page of endpoint_statuses starts after one.
struct endpoint_page_key {
  std::int64_t since_us = 0;  ///< endpoint_status::since_us
  std::int64_t failures = 0;  ///< consecutive_failures
  std::int64_t dead = 0;
  std::int64_t id = 0;
  bool operator==(const endpoint_page_key&) const = default;
};

/// The place of `s` in the order. Pure.
endpoint_page_key page_key_of(const endpoint_status& s);

/// A page of endpoint_statuses: at most `limit` endpoints, after `after` (nullopt: from the first).
struct endpoint_page {
  std::optional<endpoint_page_key> after;
  std::int64_t limit = 100;
  bool operator==(const endpoint_page&) const = default;
};

/// The endpoints worst first: the oldest pending age (none last), then failures in a row, then
/// dead letters (an endpoint whose deliveries die unattempted, e.g. an invalid URL, has neither
/// of the first two), then id. `only`: that endpoint alone (no row: it does not exist). `page`:
/// only that page (nullopt: every endpoint). Counts and age leave out a removed endpoint's rows
/// that had the same id. Throws pg_error.
std::vector<endpoint_status> endpoint_statuses(blocking_db& db, std::optional<std::int64_t> only = std::nullopt,
                                               const std::optional<endpoint_page>& page = std::nullopt);

/// A timestamptz column as RFC 3339 UTC (common/time.hpp, microseconds when it has them), or
/// PostgreSQL's own text when RFC 3339 cannot say it ('infinity', BC); nullopt for NULL.
std::optional<std::string> timestamp_of(const pg::query_result& r, int row, int col);

/// An RFC 3339 timestamp to the second, as `walhook status` shows it: the fraction dropped
/// ("2026-11-30T03:23:51.123456Z" → "2026-11-30T03:23:51Z"); other text unchanged. Pure.
std::string to_the_second(std::string_view rfc3339);

}  // namespace walhook::relay::operations
