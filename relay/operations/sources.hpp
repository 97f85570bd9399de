#pragma once
// The inbox's sources as the operator reads them (docs/inbox.md): the one read behind the
// sources table of `walhook status` and the admin API's GET /api/sources[/{name}], so both show
// the same numbers. A source's destinations are the endpoints of tenant "inbox:{name}"; its
// quarantine is their dead deliveries, its deferred events their pending deliveries with
// deferrals > 0 (migration 011).

#include "relay/operations/blocking_db.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay::operations {

/// One source: its settings (never its secrets) and its counters.
struct source_status {
  std::string name;
  std::string scheme;                        ///< standard-webhooks | stripe | github | hmac-sha256
  std::optional<std::string> id_from;        ///< 'header:NAME' or a JSON pointer; nullopt: the scheme's own
  std::optional<std::string> order_key_from; ///< same forms; nullopt: no ordering key
  std::int64_t tolerance_s = 0;              ///< the signature timestamp's tolerance, seconds
  std::string defer_statuses;                ///< e.g. "409,425" ("" if none)
  std::int64_t max_deferrals = 0;
  std::string retry_schedule_ms;             ///< e.g. "60000,300000,900000"
  std::int64_t received = 0;                 ///< rows of walhook.inbox (kept; retention deletes old ones)
  std::int64_t duplicates = 0;               ///< repeats answered 2xx without a new row
  std::int64_t key_reused = 0;               ///< same id, another body: refused with 409 (walhook.inbox_key_reuse)
  std::int64_t deferred = 0;                 ///< pending deliveries with deferrals > 0: waiting for a predecessor
  std::int64_t quarantined = 0;              ///< dead deliveries to its destinations
  std::optional<std::string> last_error;     ///< the newest last_error of its pending or dead deliveries, as stored
  std::optional<std::string> last_error_at;  ///< when that delivery last changed, RFC 3339 UTC
};

/// The sources, by name; `only` narrows them to one. Empty if walhook.inbox_sources is missing
/// or this role may not read it (an older schema, sql/roles.sql not run again).
std::vector<source_status> source_statuses(blocking_db& db, std::optional<std::string_view> only = std::nullopt);

/// Whether `name` has the form of a source name (walhook.inbox_sources.name's CHECK): 1–63 of
/// [a-z0-9_-], starting with a letter or digit. Pure.
bool is_source_name(std::string_view name);

}  // namespace walhook::relay::operations
