// GET /api/endpoints and GET /api/endpoints/{id} (docs/api.md): the endpoints worst first, a
// page at a time (relay/operations/status.hpp, shared with `walhook status`), with this walhook's
// live numbers; one endpoint adds its newest deliveries, dead letters and attempts.

#include "relay/admin/db_worker.hpp"
#include "relay/admin/router.hpp"
#include "relay/admin/routes.hpp"
#include "relay/admin/views.hpp"
#include "relay/core/outcome_log.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/status.hpp"

#include "common/json_writer.hpp"
#include "delivery/url.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace walhook::relay {
namespace asio = boost::asio;

namespace {

/// An optional text capped for display (delivery::cap_text).
std::optional<std::string> capped(const std::optional<std::string>& text) {
  return text ? std::optional<std::string>(delivery::cap_text(*text)) : std::nullopt;
}

/// One endpoint as the fields of docs/api.md (the object is the caller's); `detail` adds those
/// of GET /api/endpoints/{id}.
void write_endpoint(json_writer& j, const operations::endpoint_status& s, const live_status& live, bool detail) {
  live_status::load load;
  if (auto it = live.endpoints.find(s.id); it != live.endpoints.end()) load = it->second;
  j.field("id", s.id)
      .field("tenant_id", s.tenant_id)
      .field("url", delivery::redact_url(s.url))
      .field("status", s.status)
      .field("paused_by_breaker", s.breaker_holds)
      .field("paused_until", s.breaker_holds ? s.paused_until : std::nullopt)
      .field("pending", s.pending)
      .field("sending", s.sending)
      .field("queued", static_cast<std::int64_t>(load.queued))
      .field("in_flight", static_cast<std::int64_t>(load.in_flight))
      .field("max_concurrency", s.max_concurrency)
      .field("dead", s.dead)
      .key("oldest_pending_age_s");
  if (s.oldest_pending_age_s) j.number(*s.oldest_pending_age_s);
  else j.null();
  j.field("following_outbox_since", s.following_outbox_since).field("events_drained", s.events_drained).field("owed", s.owed);
  j.field("consecutive_failures", s.consecutive_failures).field("last_status", s.last_status);
  // No attempt failed, yet deliveries may die unattempted (an invalid URL): the engine's reason.
  if (!s.last_error && !load.config_error.empty()) j.field("last_error", delivery::cap_text(load.config_error));
  else j.field("last_error", capped(s.last_error));
  j.field("disabled_reason", capped(s.disabled_reason));
  j.field("secret_fingerprints",
          s.secret_fingerprints.empty() ? std::nullopt : std::optional<std::string>(s.secret_fingerprints));
  if (!detail) return;
  j.key("event_types");
  if (s.event_types_json) j.raw(*s.event_types_json);
  else j.null();
  j.field("ordering", s.ordering)
      .field("description", s.description)
      .field("contact_endpoint_id", s.contact_endpoint_id)
      .field("secret_grace_until", s.secret_grace_until);
  j.key("headers");
  if (s.headers_json) j.raw(*s.headers_json);
  else j.null();
  j.field("secret_headers", s.secret_headers.empty() ? std::nullopt : std::optional<std::string>(s.secret_headers));
  // The filter's exact text (a string): parsed as JSON, a 64-bit id would be rounded on the way.
  j.field("filter", s.filter).field("max_rate", s.max_rate).field("rate_burst", s.rate_burst);
  j.key("oauth");
  if (s.oauth_token_url) {
    j.begin_object()
        .field("token_url", delivery::redact_url(*s.oauth_token_url))  // as the endpoint's URL: no query
        .field("client_id", s.oauth_client_id)
        .field("client_secret", s.oauth_client_secret)
        .field("scope", s.oauth_scope)
        .end_object();
  } else {
    j.null();
  }
  j.field("proxy", s.proxy);
}

/// An endpoint's 50 most recently changed delivery rows, newest first; `only` narrows them
/// (e.g. "AND d.status = 'dead'").
std::vector<delivery_row> newest_deliveries(blocking_db& db, std::int64_t id, std::string_view only) {
  auto r = db.exec(fmt::format("SELECT {} FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                               "LEFT JOIN walhook.outbox o ON o.id = d.event_id "
                               "WHERE d.endpoint_id = $1 AND d.created_at >= e.created_at {} "
                               "ORDER BY d.updated_at DESC, d.id DESC LIMIT 50",
                               deliveries_columns, only),
                   pg::params{std::to_string(id)});
  std::vector<delivery_row> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(delivery_of(r, i, 0));
  return out;
}

void write_deliveries(json_writer& j, const std::vector<delivery_row>& rows) {
  j.begin_array();
  for (const auto& d : rows) {
    j.begin_object();
    write_delivery(j, d);
    j.end_object();
  }
  j.end_array();
}

/// A page: `rows` holds at most one more than the limit, which says there is a next page.
api_response endpoints_view(const std::vector<operations::endpoint_status>& rows, std::int64_t limit,
                            const live_status& live) {
  const auto shown = std::min(rows.size(), static_cast<std::size_t>(limit));
  json_writer j;
  j.begin_object().key("endpoints").begin_array();
  for (std::size_t i = 0; i < shown; ++i) {
    j.begin_object();
    write_endpoint(j, rows[i], live, false);
    j.end_object();
  }
  j.end_array();
  const bool more = rows.size() > shown;
  j.field("next", more ? std::optional<std::string>(page_cursor(operations::page_key_of(rows[shown - 1]))) : std::nullopt);
  j.end_object();
  return api_response{200, j.take()};
}

/// One endpoint: its fields, deliveries, dead letters and the record's newest attempts.
api_response endpoint_view(const operations::endpoint_status& s, const live_status& live,
                           const std::vector<delivery_row>& deliveries, const std::vector<delivery_row>& dead,
                           const std::vector<outcome_entry>& recent) {
  json_writer j;
  j.begin_object();
  write_endpoint(j, s, live, true);
  j.key("deliveries");
  write_deliveries(j, deliveries);
  j.key("dead_letters");  // "dead" is the count, as in the list
  write_deliveries(j, dead);
  j.key("recent_outcomes").begin_array();
  for (const auto& e : recent) {
    j.begin_object().field("event_id", e.event_id);
    write_outcome(j, e);
    j.end_object();
  }
  j.end_array().end_object();
  return api_response{200, j.take()};
}

}  // namespace

asio::awaitable<api_response> get_endpoints(const route_context& ctx, const operations::endpoint_page& page) {
  return ctx.worker.run([live = ctx.eng.live(), page](blocking_db& db) {
    // One row more than the page: whether there is a next one.
    const operations::endpoint_page ask{.after = page.after, .limit = page.limit + 1};
    return endpoints_view(operations::endpoint_statuses(db, std::nullopt, ask), page.limit, live);
  });
}

asio::awaitable<api_response> get_endpoint(const route_context& ctx, std::int64_t id) {
  return ctx.worker.run(
      [id, live = ctx.eng.live(), recent = ctx.eng.recent_outcomes().of_endpoint(id, 50)](blocking_db& db) {
        const auto found = operations::endpoint_statuses(db, id);
        if (found.empty()) throw not_found(fmt::format("no endpoint with id {}", id));
        const auto deliveries = newest_deliveries(db, id, "");
        const auto dead = newest_deliveries(db, id, "AND d.status = 'dead'");
        return endpoint_view(found.front(), live, deliveries, dead, recent);
      });
}

}  // namespace walhook::relay
