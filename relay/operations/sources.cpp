#include "relay/operations/sources.hpp"

#include "relay/operations/status.hpp"

namespace walhook::relay::operations {

namespace {

// One row per source. The counters of walhook.inbox and walhook.inbox_key_reuse are sub-selects
// (their indexes lead with the source); the deliveries' through the destinations' endpoints.
constexpr const char* sources_sql = R"sql(
SELECT s.name, s.scheme, s.id_from, s.order_key_from, s.tolerance_s,
       array_to_string(s.defer_statuses, ','), s.max_deferrals, array_to_string(s.retry_schedule_ms, ','),
       (SELECT count(*) FROM walhook.inbox i WHERE i.source = s.name),
       (SELECT coalesce(sum(i.duplicates), 0) FROM walhook.inbox i WHERE i.source = s.name),
       (SELECT count(*) FROM walhook.inbox_key_reuse k WHERE k.source = s.name),
       count(d.id) FILTER (WHERE d.status = 'pending' AND d.deferrals > 0),
       count(d.id) FILTER (WHERE d.status = 'dead'),
       (array_agg(d.last_error ORDER BY d.updated_at DESC) FILTER (WHERE d.status IN ('pending', 'dead')
                                                                   AND d.last_error IS NOT NULL))[1],
       max(d.updated_at) FILTER (WHERE d.status IN ('pending', 'dead') AND d.last_error IS NOT NULL)
  FROM walhook.inbox_sources s
  LEFT JOIN walhook.endpoints e ON e.tenant_id = 'inbox:' || s.name
  LEFT JOIN walhook.deliveries d ON d.endpoint_id = e.id
 WHERE $1::text IS NULL OR s.name = $1
 GROUP BY s.name ORDER BY s.name)sql";

}  // namespace

bool is_source_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '-'))) return false;
  }
  return true;
}

std::vector<source_status> source_statuses(blocking_db& db, std::optional<std::string_view> only) {
  // walhook run's role reads some columns only (sql/roles.sql): never the secrets.
  if (db.exec("SELECT CASE WHEN to_regclass('walhook.inbox_sources') IS NULL THEN false "
              "ELSE has_column_privilege('walhook.inbox_sources', 'name', 'SELECT') END").value(0, 0) != "t")
    return {};
  pg::params p;
  if (only) p.push_back(std::string(*only));
  else p.push_back(std::nullopt);
  auto r = db.exec(sources_sql, p);
  std::vector<source_status> out;
  for (int i = 0; i < r.rows(); ++i)
    out.push_back({.name = std::string(r.value(i, 0)),
                   .scheme = std::string(r.value(i, 1)),
                   .id_from = r.optional_value(i, 2),
                   .order_key_from = r.optional_value(i, 3),
                   .tolerance_s = r.integer(i, 4),
                   .defer_statuses = std::string(r.value(i, 5)),
                   .max_deferrals = r.integer(i, 6),
                   .retry_schedule_ms = std::string(r.value(i, 7)),
                   .received = r.integer(i, 8),
                   .duplicates = r.integer(i, 9),
                   .key_reused = r.integer(i, 10),
                   .deferred = r.integer(i, 11),
                   .quarantined = r.integer(i, 12),
                   .last_error = r.optional_value(i, 13),
                   .last_error_at = timestamp_of(r, i, 14)});
  return out;
}

}  // namespace walhook::relay::operations
