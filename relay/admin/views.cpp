#include "relay/admin/views.hpp"

#include "common/time.hpp"
#include "delivery/url.hpp"
#include "relay/operations/status.hpp"

#include <charconv>

namespace walhook::relay {

void write_outcome(json_writer& j, const outcome_entry& e) {
  j.field("at", format_iso8601(e.at)).field("attempt", e.attempt).key("http_status");
  if (e.http_status) j.number(static_cast<std::int64_t>(e.http_status));
  else j.null();
  j.field("outcome", e.outcome).field("result", e.result).key("duration_s").number(e.duration_s);
}

delivery_row delivery_of(const pg::query_result& r, int row, int col) {
  return {.id = r.integer(row, col),
          .event_id = std::string(r.value(row, col + 1)),
          .event_type = r.optional_value(row, col + 2),
          .status = std::string(r.value(row, col + 3)),
          .attempts = r.integer(row, col + 4),
          .last_status = r.optional_integer(row, col + 5),
          .last_error = r.optional_value(row, col + 6),
          .next_attempt_at = operations::timestamp_of(r, row, col + 7),
          .last_attempt_at = operations::timestamp_of(r, row, col + 8),
          .created_at = operations::timestamp_of(r, row, col + 9),
          .delivered_at = operations::timestamp_of(r, row, col + 10)};
}

void write_delivery(json_writer& j, const delivery_row& d) {
  j.field("id", d.id).field("event_id", d.event_id).field("event_type", d.event_type);
  j.field("status", d.status).field("attempts", d.attempts).field("last_status", d.last_status);
  j.field("last_error", d.last_error ? std::optional<std::string>(delivery::cap_text(*d.last_error)) : std::nullopt);
  j.field("next_attempt_at", d.next_attempt_at)
      .field("last_attempt_at", d.last_attempt_at)
      .field("created_at", d.created_at)
      .field("delivered_at", d.delivered_at);
}

}  // namespace walhook::relay
