// The tenant's endpoints: GET /v1/endpoints[/{id}], POST /v1/endpoints, PATCH and DELETE
// /v1/endpoints/{id}. Creation and updates take the checks of `walhook endpoint add|update`
// (relay/operations/operations.hpp) and the tenant's limits (relay/operations/tenants.hpp).

#include "common/json_writer.hpp"
#include "common/log.hpp"
#include "relay/admin/json_body.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/status.hpp"
#include "relay/tenant/handlers.hpp"

#include <fmt/format.h>

namespace walhook::relay::tenant {

namespace {

/// An endpoint as the tenant sees it, with its health and open work (docs/tenant-api.md).
constexpr const char* endpoint_select =
    "SELECT e.id, e.url, e.status, e.description, array_to_json(e.event_types)::text, e.max_concurrency, e.ordering, "
    "e.secret, e.created_at, e.updated_at, coalesce(h.consecutive_failures, 0), h.last_status, h.last_error, "
    "h.last_success_at, h.last_failure_at, h.paused_until > now(), h.disabled_reason, "
    "(SELECT count(*) FROM walhook.deliveries d WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending')), "
    "(SELECT count(*) FROM walhook.deliveries d WHERE d.endpoint_id = e.id AND d.status = 'dead') "
    "FROM walhook.endpoints e LEFT JOIN walhook.endpoint_health h ON h.endpoint_id = e.id "
    "WHERE e.tenant_id = $1 ";

void write_endpoint(json_writer& j, const pg::query_result& r, int i) {
  j.begin_object()
      .field("id", r.integer(i, 0))
      .field("url", r.value(i, 1))
      .field("status", r.value(i, 2))
      .field("description", r.optional_value(i, 3))
      .key("event_types");
  if (r.is_null(i, 4)) j.null();
  else j.raw(r.value(i, 4));
  j.field("max_concurrency", r.integer(i, 5))
      .field("ordering", r.value(i, 6))
      .field("secret_fingerprints", operations::secret_fingerprints(std::string(r.value(i, 7))))
      .field("created_at", operations::timestamp_of(r, i, 8))
      .field("updated_at", operations::timestamp_of(r, i, 9));
  j.key("health")
      .begin_object()
      .field("circuit_open", !r.is_null(i, 15) && r.value(i, 15) == "t")
      .field("consecutive_failures", r.integer(i, 10))
      .field("last_status", r.optional_integer(i, 11))
      .field("last_error", r.optional_value(i, 12))
      .field("last_success_at", operations::timestamp_of(r, i, 13))
      .field("last_failure_at", operations::timestamp_of(r, i, 14))
      .field("disabled_reason", r.optional_value(i, 16))
      .field("open_deliveries", r.integer(i, 17))
      .field("dead_letters", r.integer(i, 18))
      .end_object();
  j.end_object();
}

pg::query_result read_endpoint(blocking_db& db, const caller& c, std::int64_t id) {
  auto r = db.exec(std::string(endpoint_select) + "AND e.id = $2::bigint",
                   pg::params{c.holder.tenant, std::to_string(id)});
  if (r.rows() == 0) throw not_found(fmt::format("no endpoint with id {}", id));
  return r;
}

/// Text a tenant gives: no NUL (PostgreSQL's text cannot hold it: it would be cut there), at most
/// `max` bytes.
void check_text(std::string_view member, const std::string& text, std::size_t max) {
  if (text.find('\0') != std::string::npos) throw invalid_input(fmt::format("{} must not contain NUL", member));
  if (text.size() > max) throw invalid_input(fmt::format("{} has at most {} bytes", member, max));
}

/// At most 100 event types of at most 200 bytes each: routing compares each event with them.
void check_types(const std::vector<std::string>& types) {
  if (types.size() > 100) throw invalid_input("event_types has at most 100 types");
  for (const auto& t : types) check_text("an event type", t, 200);
}

/// Only http(s) URLs: brokers (nats://, amqp://) are the operator's to configure.
void check_tenant_url(const std::string& url) {
  check_text("url", url, 2048);
  operations::check_url(url);
  const auto scheme = url.substr(0, url.find(':'));
  if (scheme != "http" && scheme != "https")
    throw invalid_input("url must be an http:// or https:// URL (broker destinations are set up by the operator)");
}

void check_concurrency(std::int64_t wanted, const operations::tenant_limits& limits) {
  if (wanted < 1 || wanted > limits.max_concurrency)
    throw invalid_input(fmt::format("max_concurrency must be between 1 and {} (this tenant's limit)",
                                    limits.max_concurrency));
}

}  // namespace

void require_own_endpoint(blocking_db& db, const caller& c, std::int64_t id) {
  auto r = db.exec("SELECT 1 FROM walhook.endpoints WHERE id = $1::bigint AND tenant_id = $2",
                   pg::params{std::to_string(id), c.holder.tenant});
  if (r.rows() == 0) throw not_found(fmt::format("no endpoint with id {}", id));
}

void audit(blocking_db& db, const caller& c, std::string_view action, std::optional<std::int64_t> endpoint_id,
           const std::string& detail_json) {
  operations::write_audit(db, {.tenant = c.holder.tenant,
                               .token = c.holder.fingerprint,
                               .action = std::string(action),
                               .endpoint_id = endpoint_id,
                               .detail_json = detail_json,
                               .remote = c.remote});
  log::info("tenant.action", {{"tenant", c.holder.tenant},
                              {"action", action},
                              {"endpoint_id", endpoint_id.value_or(0)},
                              {"token", c.holder.fingerprint},
                              {"remote", c.remote.empty() ? std::string("-") : c.remote}});
}

api_response list_endpoints(blocking_db& db, const caller& c) {
  auto r = db.exec(std::string(endpoint_select) + "ORDER BY e.id", pg::params{c.holder.tenant});
  json_writer j;
  j.begin_object().key("data").begin_array();
  for (int i = 0; i < r.rows(); ++i) write_endpoint(j, r, i);
  j.end_array().end_object();
  return {200, j.take()};
}

api_response get_endpoint(blocking_db& db, const caller& c, std::int64_t id) {
  auto r = read_endpoint(db, c, id);
  json_writer j;
  write_endpoint(j, r, 0);
  return {200, j.take()};
}

api_response create_endpoint(blocking_db& db, const caller& c, const api_request& req) {
  json_body body(req.body);
  body.only({"url", "event_types", "description", "max_concurrency", "ordering"});
  operations::new_endpoint e;
  e.tenant = c.holder.tenant;
  e.url = body.text("url").value_or("");
  if (e.url.empty()) throw invalid_input("give {\"url\": \"https://…\"} (and \"event_types\": […] to choose)");
  check_tenant_url(e.url);
  e.event_types = body.strings("event_types").value_or(std::vector<std::string>{});
  check_types(e.event_types);
  e.description = body.text("description").value_or("");
  check_text("description", e.description, 500);
  e.ordering = body.text("ordering").value_or("none");
  if (e.ordering != "none" && e.ordering != "aggregate") throw invalid_input("ordering must be none or aggregate");
  db_transaction tx(db);
  // One creation at a time per tenant, so two at once cannot both pass the count.
  db.exec("SELECT pg_advisory_xact_lock(hashtextextended('walhook.tenant_api:' || $1, 0))", pg::params{e.tenant});
  const auto limits = operations::limits_of(db, e.tenant);
  const auto concurrency = body.integer("max_concurrency").value_or(std::min(4, limits.max_concurrency));
  check_concurrency(concurrency, limits);
  e.max_concurrency = static_cast<int>(concurrency);
  const auto count = db.exec("SELECT count(*) FROM walhook.endpoints WHERE tenant_id = $1", pg::params{e.tenant});
  if (count.integer(0, 0) >= limits.max_endpoints)
    throw conflict(fmt::format("this tenant has {} endpoints, its limit: remove one, or ask the operator for more",
                               count.integer(0, 0)));
  const auto added = operations::add_endpoint(db, e);
  audit(db, c, "endpoint.create", added.id);
  auto r = read_endpoint(db, c, added.id);
  tx.commit();
  // The endpoint's fields and, this once, its signing secret.
  json_writer j;
  write_endpoint(j, r, 0);
  std::string out = j.take();
  out.pop_back();  // the object stays open for the secret
  json_writer s;
  s.begin_object().field("secret", added.secret).end_object();
  out += "," + s.take().substr(1);
  return {201, std::move(out), "application/json", {{"Location", fmt::format("/v1/endpoints/{}", added.id)}}};
}

api_response update_endpoint(blocking_db& db, const caller& c, std::int64_t id, const api_request& req) {
  json_body body(req.body);
  body.only({"url", "event_types", "description", "max_concurrency"});
  require_own_endpoint(db, c, id);
  operations::endpoint_update u;
  u.url = body.text("url");
  if (u.url) check_tenant_url(*u.url);
  u.event_types = body.strings("event_types");
  if (u.event_types) check_types(*u.event_types);
  u.description = body.text("description");
  if (u.description) check_text("description", *u.description, 500);
  if (auto n = body.integer("max_concurrency")) {
    check_concurrency(*n, operations::limits_of(db, c.holder.tenant));
    u.max_concurrency = static_cast<int>(*n);
  }
  if (!u.url && !u.event_types && !u.description && !u.max_concurrency)
    throw invalid_input("give at least one of url, event_types, description, max_concurrency");
  operations::update(db, id, u);
  audit(db, c, "endpoint.update", id);
  return get_endpoint(db, c, id);
}

api_response delete_endpoint(blocking_db& db, const caller& c, std::int64_t id) {
  require_own_endpoint(db, c, id);
  auto change = operations::remove(db, id);
  audit(db, c, "endpoint.delete", id, fmt::format("{{\"deliveries_ended\":{}}}", change.deliveries));
  json_writer j;
  j.begin_object().field("id", id).field("deleted", true).field("deliveries_ended", change.deliveries).end_object();
  return {200, j.take()};
}

}  // namespace walhook::relay::tenant
