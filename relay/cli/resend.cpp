// `walhook resend`: one event to one endpoint again (operations::resend): same webhook-id, due now.

#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

command add_resend(CLI::App& app) {
  struct state {
    std::string database_url;
    long long endpoint_id = 0;
    std::string event_id;
  };
  auto s = std::make_shared<state>();
  auto* c = app.add_subcommand(
      "resend", "Send one event to one endpoint again, whatever happened before (same webhook-id, due now)");
  add_database_url(c, s->database_url);
  c->add_option("--endpoint", s->endpoint_id, "Endpoint id")->required();
  c->add_option("--event", s->event_id, "Event id (walhook.outbox.id, the webhook-id)")->required();
  return {c, [s] {
            blocking_db db(s->database_url);
            operations::require_schema(db);
            auto r = operations::resend(db, s->endpoint_id, s->event_id);
            std::cout << fmt::format("endpoint {}: event {} resent (pending, due now, same webhook-id)\n", r.endpoint_id,
                                     s->event_id);
            if (!r.note.empty()) std::cout << "note: " << r.note << "\n";
            return 0;
          }};
}

}  // namespace walhook::relay::cli
