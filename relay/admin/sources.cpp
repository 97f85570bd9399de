// GET /api/sources and GET /api/sources/{name} (docs/api.md): the inbox's sources with the
// counters `walhook status` shows (relay/operations/sources.hpp); one source adds its
// destinations, its quarantined and deferred deliveries (the console's source page replays and
// resends them through the endpoint and delivery routes) and the newest reused ids.

#include "relay/admin/db_worker.hpp"
#include "relay/admin/routes.hpp"
#include "relay/admin/views.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/sources.hpp"
#include "relay/operations/status.hpp"

#include "common/json_writer.hpp"
#include "delivery/url.hpp"

#include <fmt/format.h>

#include <vector>

namespace walhook::relay {
namespace asio = boost::asio;

namespace {

/// "409,425" (array_to_string of a smallint[] or integer[]) as a JSON array.
void write_numbers(json_writer& j, const std::string& list) {
  j.begin_array();
  std::size_t i = 0;
  while (i < list.size()) {
    auto comma = list.find(',', i);
    if (comma == std::string::npos) comma = list.size();
    j.raw(std::string_view(list).substr(i, comma - i));  // digits: PostgreSQL wrote them
    i = comma + 1;
  }
  j.end_array();
}

/// A source's settings and counters (the object is the caller's).
void write_source(json_writer& j, const operations::source_status& s) {
  j.field("name", s.name)
      .field("scheme", s.scheme)
      .field("id_from", s.id_from)
      .field("order_key_from", s.order_key_from)
      .field("tolerance_s", s.tolerance_s)
      .key("defer_statuses");
  write_numbers(j, s.defer_statuses);
  j.field("max_deferrals", s.max_deferrals).key("retry_schedule_ms");
  write_numbers(j, s.retry_schedule_ms);
  j.field("received", s.received)
      .field("duplicates", s.duplicates)
      .field("key_reused", s.key_reused)
      .field("deferred", s.deferred)
      .field("quarantined", s.quarantined)
      .field("last_error", s.last_error ? std::optional<std::string>(delivery::cap_text(*s.last_error)) : std::nullopt)
      .field("last_error_at", s.last_error_at);
}

/// The source's destinations (the endpoints of tenant "inbox:{name}") as the endpoint page reads
/// them (relay/operations/status.hpp): what waits for each, in rows (pending) and read back from
/// the outbox by its cursor (owed), and whether its breaker holds it.
void write_destinations(json_writer& j, blocking_db& db, const std::string& name) {
  auto ids = db.exec("SELECT id FROM walhook.endpoints WHERE tenant_id = 'inbox:' || $1 ORDER BY id", pg::params{name});
  j.begin_array();
  for (int i = 0; i < ids.rows(); ++i)
    for (const auto& e : operations::endpoint_statuses(db, ids.integer(i, 0)))
      j.begin_object()
          .field("endpoint_id", e.id)
          .field("url", delivery::redact_url(e.url))
          .field("status", e.status)
          .field("paused_by_breaker", e.breaker_holds)
          .field("paused_until", e.breaker_holds ? e.paused_until : std::nullopt)
          .field("pending", e.pending)
          .field("owed", e.owed)
          .field("following_outbox_since", e.following_outbox_since)
          .field("dead", e.dead)
          .field("last_status", e.last_status)
          .field("last_error", e.last_error ? std::optional<std::string>(delivery::cap_text(*e.last_error)) : std::nullopt)
          .end_object();
  j.end_array();
}

/// The source's 50 most recently changed deliveries of one kind (`only`: a condition on `d`),
/// each with its destination and the sender's event id.
void write_deliveries_of(json_writer& j, blocking_db& db, const std::string& name, std::string_view only) {
  auto r = db.exec(fmt::format("SELECT d.endpoint_id, d.deferrals, o.payload->>'event_id', {} "
                               "FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                               "LEFT JOIN walhook.outbox o ON o.id = d.event_id "
                               "WHERE e.tenant_id = 'inbox:' || $1 AND {} "
                               "ORDER BY d.updated_at DESC, d.id DESC LIMIT 50",
                               deliveries_columns, only),
                   pg::params{name});
  j.begin_array();
  for (int i = 0; i < r.rows(); ++i) {
    j.begin_object().field("endpoint_id", r.integer(i, 0)).field("deferrals", r.integer(i, 1));
    j.field("sender_event_id", r.optional_value(i, 2));
    write_delivery(j, delivery_of(r, i, 3));
    j.end_object();
  }
  j.end_array();
}

/// The newest 20 ids the sender reused with another body (refused with 409).
void write_key_reuse(json_writer& j, blocking_db& db, const std::string& name) {
  auto r = db.exec("SELECT event_id, received_at FROM walhook.inbox_key_reuse WHERE source = $1 "
                   "ORDER BY received_at DESC, id DESC LIMIT 20",
                   pg::params{name});
  j.begin_array();
  for (int i = 0; i < r.rows(); ++i)
    j.begin_object()
        .field("event_id", std::string(r.value(i, 0)))
        .field("received_at", operations::timestamp_of(r, i, 1))
        .end_object();
  j.end_array();
}

api_response source_view(blocking_db& db, const operations::source_status& s) {
  json_writer j;
  j.begin_object();
  write_source(j, s);
  j.key("destinations");
  write_destinations(j, db, s.name);
  j.key("quarantined_deliveries");
  write_deliveries_of(j, db, s.name, "d.status = 'dead'");
  j.key("deferred_deliveries");
  write_deliveries_of(j, db, s.name, "d.status = 'pending' AND d.deferrals > 0");
  j.key("key_reuse");
  write_key_reuse(j, db, s.name);
  j.end_object();
  return api_response{200, j.take()};
}

}  // namespace

asio::awaitable<api_response> get_sources(const route_context& ctx) {
  return ctx.worker.run([](blocking_db& db) {
    json_writer j;
    j.begin_object().key("sources").begin_array();
    for (const auto& s : operations::source_statuses(db)) {
      j.begin_object();
      write_source(j, s);
      j.end_object();
    }
    j.end_array().end_object();
    return api_response{200, j.take()};
  });
}

asio::awaitable<api_response> get_source(const route_context& ctx, const std::string& name) {
  return ctx.worker.run([name](blocking_db& db) {
    const auto found = operations::source_statuses(db, name);
    if (found.empty()) throw not_found(fmt::format("no inbox source named {}", name));
    return source_view(db, found.front());
  });
}

}  // namespace walhook::relay
