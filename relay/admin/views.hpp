#pragma once
// JSON pieces more than one route family writes (docs/api.md): an attempt of the in-memory
// record, and a delivery row with the query that reads it. Field names and order are the API's
// contract.

#include "common/json_writer.hpp"
#include "common/pg_connection.hpp"
#include "relay/core/outcome_log.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walhook::relay {

/// The fields of one attempt of the outcome log: at, attempt, http_status (null: no response),
/// outcome, result, duration_s (the object is the caller's).
void write_outcome(json_writer& j, const outcome_entry& e);

/// One row of walhook.deliveries as the API shows it (timestamps RFC 3339 UTC).
struct delivery_row {
  std::int64_t id = 0;
  std::string event_id;
  std::optional<std::string> event_type;  ///< null if the outbox row is gone
  std::string status;                     ///< pending | sending | delivered | dead
  std::int64_t attempts = 0;
  std::optional<std::int64_t> last_status;
  std::optional<std::string> last_error;  ///< as stored (written capped)
  std::optional<std::string> next_attempt_at;
  std::optional<std::string> last_attempt_at;
  std::optional<std::string> created_at;
  std::optional<std::string> delivered_at;
};

/// The select list delivery_of() reads, over walhook.deliveries `d` left-joined to
/// walhook.outbox `o` (for the event type).
inline constexpr std::string_view deliveries_columns =
    "d.id, d.event_id, o.event_type, d.status, d.attempts, d.last_status, d.last_error, d.next_attempt_at, "
    "d.last_attempt_at, d.created_at, d.delivered_at";

/// Row `row` of a result whose columns from `col` on are deliveries_columns.
delivery_row delivery_of(const pg::query_result& r, int row, int col);

/// A delivery's fields: id, event_id, event_type, status, attempts, last_status, last_error
/// (capped), next_attempt_at, last_attempt_at, created_at, delivered_at (the object is the caller's).
void write_delivery(json_writer& j, const delivery_row& d);

}  // namespace walhook::relay
