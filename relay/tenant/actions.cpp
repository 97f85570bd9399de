// The tenant's actions on one of its endpoints: pause, resume, rotate-secret, test, and its
// deliveries (list, resend, replay of dead letters). Each runs the operation `walhook endpoint`
// and the admin API run (relay/operations/operations.hpp) once the endpoint is known to be the
// caller's tenant's.

#include "common/json_writer.hpp"
#include "relay/admin/json_body.hpp"
#include "relay/admin/views.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"
#include "relay/tenant/handlers.hpp"

#include <fmt/format.h>

namespace walhook::relay::tenant {

namespace {

api_response change_view(const operations::change& c) {
  json_writer j;
  j.begin_object()
      .field("endpoint_id", c.endpoint_id)
      .field("action", c.action)
      .field("deliveries", c.deliveries)
      .key("note");
  if (c.note.empty()) j.null();
  else j.string(c.note);
  j.end_object();
  return {200, j.take()};
}

}  // namespace

api_response set_status(blocking_db& db, const caller& c, std::int64_t id, const std::string& action,
                        const api_request& req) {
  json_body(req.body).only({});
  require_own_endpoint(db, c, id);
  // A disabled endpoint (by the operator, or by walhook after its failures) is the operator's to
  // enable: resume would do that too (operations::set_status), so it is refused here.
  auto status = db.exec("SELECT status FROM walhook.endpoints WHERE id = $1::bigint", pg::params{std::to_string(id)});
  if (status.rows() == 1 && status.value(0, 0) == "disabled")
    throw conflict(fmt::format("endpoint {} is disabled: the operator enables it", id));
  auto change = operations::set_status(db, id, action);
  audit(db, c, "endpoint." + action, id);
  return change_view(change);
}

api_response rotate_secret(blocking_db& db, const caller& c, std::int64_t id, const api_request& req) {
  json_body body(req.body);
  body.only({"grace_seconds"});
  const auto grace = body.integer("grace_seconds").value_or(24 * 3600);
  if (grace < 0 || grace > 30 * 24 * 3600) throw invalid_input("grace_seconds must be between 0 and 2592000 (30 days)");
  require_own_endpoint(db, c, id);
  auto rotated = operations::rotate_secret(db, id, std::chrono::seconds{grace});
  audit(db, c, "endpoint.rotate_secret", id, fmt::format("{{\"grace_seconds\":{}}}", grace));
  json_writer j;
  j.begin_object().field("endpoint_id", id).field("secret", rotated.secret).key("old_secrets_valid_until");
  if (rotated.grace_until.empty()) j.null();
  else j.string(rotated.grace_until);
  j.end_object();
  return {200, j.take()};
}

api_response test_send(blocking_db& db, const caller& c, std::int64_t id, const api_request& req) {
  json_body(req.body).only({});
  require_own_endpoint(db, c, id);
  // A walhook.* event routed to this endpoint alone (migration 006's direct route), written as
  // walhook's own (by_walhook: the application's role cannot write such a type).
  auto r = db.exec(
      "INSERT INTO walhook.outbox (tenant_id, event_type, payload, endpoint_id, by_walhook) "
      "VALUES ($1, 'walhook.test', jsonb_build_object('endpoint_id', $2::bigint, 'message', "
      "'a test event sent from the tenant API'), $2::bigint, true) RETURNING id",
      pg::params{c.holder.tenant, std::to_string(id)});
  const std::string event_id(r.value(0, 0));
  audit(db, c, "endpoint.test", id, fmt::format("{{\"event_id\":\"{}\"}}", event_id));
  json_writer j;
  j.begin_object().field("endpoint_id", id).field("event_id", event_id).field("type", "walhook.test").end_object();
  return {202, j.take()};
}

api_response list_deliveries(blocking_db& db, const caller& c, std::int64_t id, const api_request& req) {
  auto parsed = deliveries_query_of(req.target);
  if (auto* refused = std::get_if<api_response>(&parsed)) return std::move(*refused);
  const auto& q = std::get<deliveries_query>(parsed);
  require_own_endpoint(db, c, id);
  auto r = db.exec(fmt::format("SELECT {} FROM walhook.deliveries d LEFT JOIN walhook.outbox o ON o.id = d.event_id "
                               "WHERE d.endpoint_id = $1::bigint AND ($2::text IS NULL OR d.status = $2) "
                               "ORDER BY d.updated_at DESC, d.id DESC LIMIT $3::int",
                               deliveries_columns),
                   pg::params{std::to_string(id), q.status, std::to_string(q.limit)});
  json_writer j;
  j.begin_object().key("data").begin_array();
  for (int i = 0; i < r.rows(); ++i) {
    j.begin_object();
    write_delivery(j, delivery_of(r, i, 0));
    j.end_object();
  }
  j.end_array().end_object();
  return {200, j.take()};
}

api_response resend(blocking_db& db, const caller& c, std::int64_t id, const api_request& req) {
  json_body body(req.body);
  body.only({"event_id"});
  const auto event_id = body.text("event_id");
  if (!event_id || !operations::is_uuid(*event_id)) throw invalid_input("give {\"event_id\": \"<the event's UUID>\"}");
  require_own_endpoint(db, c, id);
  // Another tenant's event is answered like one nobody has.
  auto own = db.exec("SELECT 1 FROM walhook.outbox WHERE id = $1::uuid AND tenant_id = $2 AND rejected IS NULL "
                     "AND endpoint_id IS NULL",
                     pg::params{*event_id, c.holder.tenant});
  if (own.rows() == 0) throw not_found(fmt::format("no event {}", *event_id));
  auto change = operations::resend(db, id, *event_id);
  audit(db, c, "delivery.resend", id, fmt::format("{{\"event_id\":\"{}\"}}", *event_id));
  return change_view(change);
}

api_response replay(blocking_db& db, const caller& c, std::int64_t id, const api_request& req) {
  json_body body(req.body);
  body.only({"since", "until", "event_type", "dry_run"});
  operations::replay_filter f;
  f.endpoint_id = id;
  f.since = body.text("since");
  f.until = body.text("until");
  f.event_type = body.text("event_type");
  f.dry_run = body.boolean("dry_run").value_or(false);
  if (!f.since) throw invalid_input("give {\"since\": \"<RFC 3339>\"} (and \"until\" to end the range)");
  require_own_endpoint(db, c, id);
  auto changes = operations::replay(db, f);
  std::int64_t n = 0;
  for (const auto& ch : changes) n += ch.deliveries;
  if (!f.dry_run) {
    json_writer d;
    d.begin_object().field("since", *f.since).field("until", f.until).field("replayed", n).end_object();
    audit(db, c, "delivery.replay", id, d.take());
  }
  json_writer j;
  j.begin_object().field("endpoint_id", id).field("replayed", n).field("dry_run", f.dry_run).end_object();
  return {200, j.take()};
}

}  // namespace walhook::relay::tenant
