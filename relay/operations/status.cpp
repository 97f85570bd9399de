#include "relay/operations/status.hpp"

#include "common/time.hpp"
#include "relay/operations/operations.hpp"
#include "sql/statements.hpp"

#include <cstdlib>

namespace walhook::relay::operations {

namespace {

/// One row of sql/statements/endpoint_status.sql (its header lists the columns).
endpoint_status status_of_row(const pg::query_result& r, int i) {
  endpoint_status s;
  s.id = r.integer(i, 0);
  s.tenant_id = std::string(r.value(i, 1));
  s.url = std::string(r.value(i, 2));
  s.status = std::string(r.value(i, 3));
  s.max_concurrency = r.integer(i, 4);
  s.breaker_holds = r.value(i, 5) == "t";
  s.paused_until = timestamp_of(r, i, 6);
  s.pending = r.integer(i, 7);
  s.sending = r.integer(i, 8);
  s.dead = r.integer(i, 9);
  if (!r.is_null(i, 10)) s.oldest_pending_age_s = std::strtod(std::string(r.value(i, 10)).c_str(), nullptr);
  s.consecutive_failures = r.integer(i, 11);
  s.last_status = r.optional_integer(i, 12);
  s.last_error = r.optional_value(i, 13);
  s.disabled_reason = r.optional_value(i, 14);
  s.secret_fingerprints = secret_fingerprints(std::string(r.value(i, 15)));
  s.event_types_json = r.optional_value(i, 16);
  s.ordering = std::string(r.value(i, 17));
  s.description = r.optional_value(i, 18);
  s.contact_endpoint_id = r.optional_integer(i, 19);
  s.secret_grace_until = timestamp_of(r, i, 20);
  s.following_outbox_since = timestamp_of(r, i, 21);
  s.events_drained = r.integer(i, 22);
  s.owed = r.integer(i, 23);
  s.since_us = r.integer(i, 24);
  s.headers_json = r.optional_value(i, 25);
  s.secret_headers = secret_headers_shown(r.optional_value(i, 26), std::string(r.value(i, 15)));
  s.filter = r.optional_value(i, 27);
  s.max_rate = r.optional_value(i, 28);
  s.rate_burst = r.optional_integer(i, 29);
  s.oauth_token_url = r.optional_value(i, 30);
  s.oauth_client_id = r.optional_value(i, 31);
  if (!r.is_null(i, 32)) s.oauth_client_secret = oauth_secret_shown(std::string(r.value(i, 32)), std::string(r.value(i, 15)));
  s.oauth_scope = r.optional_value(i, 33);
  s.proxy = r.optional_value(i, 34);
  return s;
}

}  // namespace

std::optional<std::string> timestamp_of(const pg::query_result& r, int row, int col) {
  if (r.is_null(row, col)) return std::nullopt;
  return pg_timestamptz_to_iso8601(r.value(row, col)).value_or(std::string(r.value(row, col)));
}

endpoint_page_key page_key_of(const endpoint_status& s) {
  return {.since_us = s.since_us, .failures = s.consecutive_failures, .dead = s.dead, .id = s.id};
}

std::vector<endpoint_status> endpoint_statuses(blocking_db& db, std::optional<std::int64_t> only,
                                               const std::optional<endpoint_page>& page) {
  pg::params p(6);  // $1 only; $2..$5 the page's start; $6 its size (sql/statements/endpoint_status.sql)
  if (only) p[0] = std::to_string(*only);
  if (page && page->after) {
    const endpoint_page_key& after = *page->after;
    p[1] = std::to_string(after.since_us);
    p[2] = std::to_string(after.failures);
    p[3] = std::to_string(after.dead);
    p[4] = std::to_string(after.id);
  }
  if (page) p[5] = std::to_string(page->limit);
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
