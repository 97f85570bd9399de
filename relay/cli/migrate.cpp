// `walhook migrate`: the schema migrations and the replication slot (relay/operations/schema.hpp).

#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/operations/schema.hpp"

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

command add_migrate(CLI::App& app) {
  struct state {
    operations::migrate_request request;
    bool no_slot = false;
    std::string shard;
  };
  auto s = std::make_shared<state>();
  auto* c = app.add_subcommand("migrate", "Apply the schema migrations and create the replication slot");
  add_database_url(c, s->request.database_url);
  c->add_option("--slot", s->request.slot, "Replication slot name")->capture_default_str();
  c->add_flag("--no-slot", s->no_slot, "Do not create the replication slot (walhook run creates it)");
  c->add_option("--shard", s->shard, "K/N: also create shard K's row-filtered publications and its slot <slot>_K_of_N");
  return {c, [s] {
            s->request.create_slot = !s->no_slot;
            s->request.shard = shard_flag(s->shard);
            operations::migrate(s->request, [](const std::string& line) { std::cout << line << "\n"; });
            return 0;
          }};
}

}  // namespace walhook::relay::cli
