#include "relay/operations/status.hpp"

#include "common/time.hpp"
#include "relay/operations/operations.hpp"
#include "sql/statements.hpp"

#include <charconv>
#include <cstdlib>

namespace walhook::relay::operations {

namespace {

std::int64_t int_of(std::string_view text) {
  std::int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

std::optional<std::int64_t> optional_int(const pg::query_result& r, int row, int col) {
  if (r.is_null(row, col)) return std::nullopt;
  return int_of(r.value(row, col));
}

std::optional<std::string> optional_text(const pg::query_result& r, int row, int col) {
  if (r.is_null(row, col)) return std::nullopt;
  return std::string(r.value(row, col));
}

/// A timestamptz column as RFC 3339 UTC (PostgreSQL's text if it cannot be, e.g. 'infinity').
std::optional<std::string> optional_time(const pg::query_result& r, int row, int col) {
  if (r.is_null(row, col)) return std::nullopt;
  return pg_timestamptz_to_iso8601(r.value(row, col)).value_or(std::string(r.value(row, col)));
}

/// One row of sql/statements/endpoint_status.sql (its header lists the columns).
endpoint_status status_of_row(const pg::query_result& r, int i) {
  endpoint_status s;
  s.id = int_of(r.value(i, 0));
  s.tenant_id = std::string(r.value(i, 1));
  s.url = std::string(r.value(i, 2));
  s.status = std::string(r.value(i, 3));
  s.max_concurrency = int_of(r.value(i, 4));
  s.breaker_holds = r.value(i, 5) == "t";
  s.paused_until = optional_time(r, i, 6);
  s.pending = int_of(r.value(i, 7));
  s.sending = int_of(r.value(i, 8));
  s.dead = int_of(r.value(i, 9));
  if (!r.is_null(i, 10)) s.oldest_pending_age_s = std::strtod(std::string(r.value(i, 10)).c_str(), nullptr);
  s.consecutive_failures = int_of(r.value(i, 11));
  s.last_status = optional_int(r, i, 12);
  s.last_error = optional_text(r, i, 13);
  s.disabled_reason = optional_text(r, i, 14);
  s.secret_fingerprints = secret_fingerprints(std::string(r.value(i, 15)));
  s.event_types_json = optional_text(r, i, 16);
  s.ordering = std::string(r.value(i, 17));
  s.description = optional_text(r, i, 18);
  s.contact_endpoint_id = optional_int(r, i, 19);
  s.secret_grace_until = optional_time(r, i, 20);
  return s;
}

}  // namespace

std::vector<endpoint_status> endpoint_statuses(blocking_db& db, std::optional<std::int64_t> only) {
  pg::params p{only ? std::optional<std::string>(std::to_string(*only)) : std::nullopt};
  auto r = db.exec(std::string(sql::statements::endpoint_status), p);
  std::vector<endpoint_status> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) out.push_back(status_of_row(r, i));
  return out;
}

std::string to_the_second(std::string_view rfc3339) {
  // "YYYY-MM-DDTHH:MM:SS" then ".ffffff" and "Z".
  if (rfc3339.size() > 20 && rfc3339[19] == '.' && rfc3339.back() == 'Z')
    return std::string(rfc3339.substr(0, 19)) + "Z";
  return std::string(rfc3339);
}

}  // namespace walhook::relay::operations
