// `walhook replay`: dead letters (or a disabled endpoint's pending deliveries) sent again
// (operations::replay).

#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/cli/plural.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/schema.hpp"

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

namespace {

struct replay_args {
  std::string database_url;
  long long delivery_id = 0;  ///< with --delivery
  long long endpoint_id = 0;  ///< with --endpoint
  CLI::Option* delivery = nullptr;
  CLI::Option* endpoint = nullptr;
  std::string since;  ///< timestamptz text, optional
  std::string until;
  std::string event_type;  ///< optional
  std::string filter;      ///< a payload filter, optional (docs/endpoint-policies.md)
  bool dry_run = false;
};

int replay(const replay_args& a) {
  if (!a.delivery->count() && !a.endpoint->count()) throw cli_error("give --delivery ID or --endpoint ID");
  blocking_db db(a.database_url);
  operations::require_schema(db);
  const auto id = [](const CLI::Option* o, long long v) { return o->count() ? std::optional<long long>(v) : std::nullopt; };
  auto changes = operations::replay(db, {.delivery_id = id(a.delivery, a.delivery_id),
                                         .endpoint_id = id(a.endpoint, a.endpoint_id),
                                         .since = text_or_null(a.since),
                                         .until = text_or_null(a.until),
                                         .event_type = text_or_null(a.event_type),
                                         .payload_filter = text_or_null(a.filter),
                                         .dry_run = a.dry_run});
  std::int64_t total = 0;
  for (const auto& c : changes) total += c.deliveries;
  if (a.dry_run) std::cout << "would replay " << plural(total, "delivery", "deliveries") << " (dry run: nothing changed)\n";
  else std::cout << "replayed " << plural(total, "delivery", "deliveries") << "\n";
  if (a.endpoint->count())
    if (auto note = operations::cursor_note(db, a.endpoint_id)) std::cout << "note: " << *note << "\n";
  for (const auto& c : changes)
    if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
  return 0;
}

}  // namespace

command add_replay(CLI::App& app) {
  auto a = std::make_shared<replay_args>();
  auto* c = app.add_subcommand("replay", "Send dead letters (or a disabled endpoint's pending deliveries) again; "
                                         "pending ones are retried now by endpoint resume");
  add_database_url(c, a->database_url);
  a->delivery = c->add_option("--delivery", a->delivery_id, "One delivery id");
  a->endpoint = c->add_option("--endpoint", a->endpoint_id, "All of one endpoint");
  a->delivery->excludes(a->endpoint);
  c->add_option("--since", a->since, "Events created at or after (timestamptz)");
  c->add_option("--until", a->until, "Events created before (timestamptz)");
  c->add_option("--event-type", a->event_type, "Only events of this type");
  c->add_option("--filter", a->filter,
                "Only events whose webhook body matches this payload filter, e.g. '{\"data.amount\": {\"$gte\": 100}}' "
                "(docs/endpoint-policies.md)");
  c->add_flag("--dry-run", a->dry_run, "Count what would be replayed; change nothing");
  return {c, [a] { return replay(*a); }};
}

}  // namespace walhook::relay::cli
