// `walhook event ID`: did each endpoint get event ID? The admin API's answer (GET
// /api/events/{id}: relay/admin/event_answer.hpp, the same reads and verdicts) from the database
// alone: this command does not see a running walhook's in-memory record of attempts, which
// the console and the API add.

#include "delivery/url.hpp"
#include "relay/admin/event_answer.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

namespace {

struct event_args {
  std::string database_url;
  std::string event_id;
  std::string slot;  ///< the base name of walhook's slots (--slot of walhook run); "": found in walhook.slot_progress
  bool json = false;
};

/// One endpoint: id, verdict, attempts, last status, URL; then why, and the row's last error.
void print_endpoint(const endpoint_verdict& v, const event_answer& a) {
  const auto row = a.rows.find(v.endpoint_id);
  const delivery_row* d = row == a.rows.end() ? nullptr : &row->second;
  const auto url = a.urls.find(v.endpoint_id);
  std::cout << fmt::format("{:>8}  {:<10} {:>8} {:>11}  {}\n", v.endpoint_id, v.verdict,
                           d ? std::to_string(d->attempts) : "-",
                           d && d->last_status ? std::to_string(*d->last_status) : "-",
                           url == a.urls.end() ? "(removed since)" : url->second);
  if (!v.routed && v.verdict != "not_routed" && v.routed_reason)
    std::cout << "          not routed now: " << *v.routed_reason << "\n";
  if (v.reason) std::cout << "          why: " << *v.reason << "\n";
  if (d && d->last_error) std::cout << "          last error: " << delivery::cap_text(*d->last_error) << "\n";
}

int show_event(const event_args& a) {
  if (!operations::is_uuid(a.event_id))
    throw cli_error(fmt::format("event id '{}' is not a UUID (walhook.outbox.id, the webhook-id)", a.event_id));
  blocking_db db(a.database_url);
  operations::require_schema(db);
  auto answer = answer_event(db, a.event_id, a.slot, {}, {});
  if (!answer) throw not_found(fmt::format("no event with id {} (the outbox row is gone, or never was)", a.event_id));
  answer->note = "from the database alone: a first-try success still in a running walhook's in-memory record only "
                 "(not yet in its delivered snapshot) shows as unknown here; the console and GET /api/events/ID "
                 "add that record";
  if (a.json) {
    std::cout << event_json(*answer) << "\n";
    return 0;
  }
  if (const auto& ev = answer->event)
    std::cout << fmt::format("event {}: tenant {}, type {}, created {}\n", ev->id, ev->tenant_id, ev->event_type,
                             ev->created_at.value_or("-"));
  else
    std::cout << fmt::format("event {}: its outbox row is gone (retention); what is left:\n", a.event_id);
  if (answer->verdicts.empty()) std::cout << "no endpoint: the event routes nowhere and no delivery row mentions it\n";
  else std::cout << fmt::format("{:>8}  {:<10} {:>8} {:>11}  {}\n", "endpoint", "verdict", "attempts", "last_status", "url");
  for (const auto& v : answer->verdicts) print_endpoint(v, *answer);
  std::cout << "note: " << answer->note << "\n";
  return 0;
}

}  // namespace

command add_event(CLI::App& app) {
  auto a = std::make_shared<event_args>();
  auto* c = app.add_subcommand("event", "Did each endpoint get this event? Its verdict per endpoint, with why "
                                        "(the admin API's GET /api/events/ID)");
  add_database_url(c, a->database_url);
  c->add_option("id", a->event_id, "Event id (walhook.outbox.id, the webhook-id)")->required();
  c->add_option("--slot", a->slot,
                "The slot walhook run streams (its --slot; a shard's is <slot>_K_of_N); default: the one slot "
                "walhook recorded progress for");
  c->add_flag("--json", a->json, "The admin API's JSON answer");
  return {c, [a] { return show_event(*a); }};
}

}  // namespace walhook::relay::cli
