// `walhook send`: publishes one event with walhook.publish() and prints its id.

#include "delivery/trace_context.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/core/notifications.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

namespace {

struct send_args {
  std::string database_url;
  std::string tenant;
  std::string type;
  std::string data;  ///< JSON
  std::string merge_key;
  std::string aggregate_id;
  std::string aggregate_type;
  std::string traceparent;
};

int send(const send_args& a) {
  if (a.tenant.empty() || a.type.empty()) throw cli_error("--tenant and --type must not be empty");
  // Its endpoints take walhook's notifications: an event there would pass for one of walhook's.
  if (a.tenant == default_operator_tenant)
    throw cli_error(fmt::format("tenant '{}' is walhook's operator tenant: only walhook publishes there", a.tenant));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  // Numbers beyond simdjson's range are valid JSON that PostgreSQL's jsonb keeps: let them pass.
  if (auto err = parser.parse(a.data).get(doc);
      err && err != simdjson::NUMBER_ERROR && err != simdjson::NUMBER_OUT_OF_RANGE)
    throw cli_error(std::string("--data is not valid JSON: ") + simdjson::error_message(err));
  if (!a.traceparent.empty() && !delivery::parse_traceparent(a.traceparent))
    throw cli_error("--traceparent is not a W3C traceparent (00-<32 lowercase hex>-<16 lowercase hex>-<2 hex>, ids "
                    "not all zero): it would be stored and never sent");
  blocking_db db(a.database_url);
  operations::require_schema(db);
  pg::params p{a.tenant,
               a.type,
               a.data,
               text_or_null(a.merge_key),
               text_or_null(a.aggregate_id),
               text_or_null(a.aggregate_type),
               text_or_null(a.traceparent)};
  auto r = db.exec("SELECT walhook.publish($1, $2, $3::jsonb, merge_key => $4, aggregate_id => $5, aggregate_type => $6, "
                   "traceparent => $7)",
                   p);
  std::cout << r.value(0, 0) << "\n";
  return 0;
}

}  // namespace

command add_send(CLI::App& app) {
  auto a = std::make_shared<send_args>();
  auto* c = app.add_subcommand("send", "Publish one event into walhook.outbox (walhook.publish)");
  add_database_url(c, a->database_url);
  c->add_option("--tenant", a->tenant, "Tenant")->required();
  c->add_option("--type", a->type, "Event type, e.g. order.created")->required();
  c->add_option("--data", a->data, "JSON payload")->required();
  c->add_option("--merge-key", a->merge_key, "Coalesce with a pending delivery of the same key (state updates)");
  c->add_option("--aggregate-id", a->aggregate_id, "Entity id, for per-aggregate ordering");
  c->add_option("--aggregate-type", a->aggregate_type, "Kind of entity, e.g. order (Debezium's aggregatetype)");
  c->add_option("--traceparent", a->traceparent,
                "W3C traceparent of the work that produced the event (00-<trace id>-<span id>-<flags>): each attempt "
                "carries it on as a child span");
  return {c, [a] { return send(*a); }};
}

}  // namespace walhook::relay::cli
