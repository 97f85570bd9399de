// `walhook migrate`: the schema migrations, the replication slot and an application's own outbox
// table bridged into walhook.outbox (relay/operations/schema.hpp).

#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/core/outbox_bridge.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

command add_migrate(CLI::App& app) {
  struct state {
    operations::migrate_request request;
    bool no_slot = false;
    std::string shard;
    std::string preset;
    std::string columns;
    std::string tenant;
  };
  auto s = std::make_shared<state>();
  auto* c = app.add_subcommand("migrate", "Apply the schema migrations and create the replication slot");
  add_database_url(c, s->request.database_url);
  c->add_option("--slot", s->request.slot, "Replication slot name")->capture_default_str();
  c->add_flag("--no-slot", s->no_slot, "Do not create the replication slot (walhook run creates it)");
  c->add_option("--shard", s->shard, "K/N: also create shard K's row-filtered publications and its slot <slot>_K_of_N");
  auto* table = c->add_option("--outbox-table", s->request.outbox_table,
                              "SCHEMA.TABLE: bridge your own outbox table into walhook.outbox (a trigger copies each "
                              "new row, mapped, in the same transaction); run again to change the mapping");
  c->add_option("--preset", s->preset, fmt::format("Column mapping of --outbox-table: {}", fmt::join(bridge_presets, ", ")))
      ->needs(table);
  c->add_option("--columns", s->columns,
                fmt::format("Column mapping of --outbox-table, over the preset's: PART=COLUMN,… (parts: {}; PART= "
                            "drops one)",
                            fmt::join(bridge_parts, ", ")))
      ->needs(table);
  c->add_option("--tenant", s->tenant, "The tenant of every row of --outbox-table (a table without a tenant column)")
      ->needs(table);
  c->add_option("--remove-outbox-bridge", s->request.remove_bridge,
                "SCHEMA.TABLE: remove that table's bridge (the table and the events already copied stay)")
      ->excludes(table);
  return {c, [s] {
            s->request.create_slot = !s->no_slot;
            s->request.shard = shard_flag(s->shard);
            if (!s->request.outbox_table.empty()) {
              auto m = make_bridge_mapping(s->preset, s->columns, s->tenant);
              if (!m.error.empty()) throw cli_error(m.error);
              s->request.bridge = std::move(m.mapping);
            }
            operations::migrate(s->request, [](const std::string& line) { std::cout << line << "\n"; });
            return 0;
          }};
}

}  // namespace walhook::relay::cli
