// `walhook events`: a tenant's events in a time range (of some types, with --type), one Standard
// Webhooks body per line (reconciliation: a customer compares without resends).

#include "common/time.hpp"
#include "delivery/job.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/schema.hpp"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace walhook::relay::cli {

namespace {

struct events_args {
  std::string database_url;
  std::string tenant;
  std::string since;  ///< timestamptz text; "" = 30 days ago
  std::string until;  ///< timestamptz text; "" = no end
  std::vector<std::string> types;  ///< only these event types; empty = all
  int limit = 1000;
};

int events(const events_args& a) {
  if (a.tenant.empty()) throw cli_error("--tenant is required");
  blocking_db db(a.database_url);
  operations::require_schema(db);
  std::vector<std::string> types;  // "order.paid, order.shipped": blanks around a type do not count
  for (auto t : a.types) {
    t.erase(0, t.find_first_not_of(' '));
    t.erase(t.find_last_not_of(' ') + 1);
    if (!t.empty()) types.push_back(std::move(t));
  }
  pg::params p{a.tenant, text_or_null(a.since), text_or_null(a.until), std::to_string(a.limit),
               types.empty() ? std::nullopt : std::optional<std::string>(operations::pg_array_literal(types))};
  auto r = db.exec(
      "SELECT id, event_type, created_at, payload::text FROM walhook.outbox "
      "WHERE tenant_id = $1 AND created_at >= coalesce($2::timestamptz, now() - interval '30 days') "
      "AND created_at < coalesce($3::timestamptz, 'infinity') AND ($5::text[] IS NULL OR event_type = ANY ($5::text[])) "
      "AND rejected IS NULL "  // rows an outbox bridge could not map were never events (migration 009)
      "ORDER BY created_at, seq LIMIT $4::int",
      p);
  for (int i = 0; i < r.rows(); ++i) {
    delivery::event ev;
    ev.id = r.value(i, 0);
    ev.type = r.value(i, 1);
    ev.created_at = pg_timestamptz_to_iso8601(r.value(i, 2)).value_or(std::string(r.value(i, 2)));
    ev.payload = r.value(i, 3);
    std::cout << delivery::make_body(ev) << "\n";
  }
  return 0;
}

}  // namespace

command add_events(CLI::App& app) {
  auto a = std::make_shared<events_args>();
  auto* c = app.add_subcommand("events", "List a tenant's events (reconciliation, last 30 days by default)");
  add_database_url(c, a->database_url);
  c->add_option("--tenant", a->tenant, "Tenant")->required();
  c->add_option("--since", a->since, "From (timestamptz)");
  c->add_option("--until", a->until, "Until (timestamptz)");
  c->add_option("--type", a->types, "Only these event types: comma-separated, exact match of event_type")
      ->delimiter(',');
  c->add_option("--limit", a->limit, "At most this many")->capture_default_str()->check(positive);
  return {c, [a] { return events(*a); }};
}

}  // namespace walhook::relay::cli
