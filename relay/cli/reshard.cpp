// `walhook reshard`: changes the number of shards, losing nothing. With the old layout stopped,
// it creates the new shards' publications and slots, each with a backfill from the old layout's
// oldest delivered snapshot, records the layout, and drops the old slots.

#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/core/shard.hpp"
#include "relay/engine/leadership.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/schema.hpp"
#include "sql/statements.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

namespace {

struct reshard_args {
  std::string database_url;
  std::string slot = wal::stream_options{}.slot;  ///< base name of the slots (<slot>_K_of_N)
  int from = 1;                                   ///< shards now (1: one walhook, slot <slot>)
  int to = 2;                                     ///< shards after
};

/// The slots of a layout of `shards`.
std::vector<std::string> slots_of(const std::string& base, int shards) {
  std::vector<std::string> slots;
  for (int k = 0; k < shards; ++k) slots.push_back(shard_slot(base, {k, shards}));
  return slots;
}

/// A text[] literal of `v`.
std::string array(const std::vector<std::string>& v) {
  std::string out = "{";
  for (const auto& x : v) out += (out.size() > 1 ? "," : "") + ("\"" + x + "\"");
  return out + "}";
}

/// The old layout must be stopped (each walhook's SIGTERM finishes its work and records how far
/// it got), its backfills done, the new slots free, and every old slot must have a delivered
/// snapshot: the oldest of them, returned, is where the new shards' backfills start. Holds the
/// old slots' leadership locks (relay/engine/leadership.hpp) for the rest of the session: an old
/// walhook started meanwhile waits as a standby, and at its next session finds the new layout
/// and stops.
std::string check_old_layout_stopped(blocking_db& db, const reshard_args& a, const std::vector<std::string>& old_slots,
                                     const std::vector<std::string>& new_slots) {
  for (const auto& slot : old_slots)
    if (db.exec(try_lock_statement(), pg::params{slot}).value(0, 0) != "t")
      throw cli_error(fmt::format("a walhook holds the lock of slot {}: stop the walhooks of the old layout first (SIGTERM; "
                                  "each records how far it got), then run walhook reshard again",
                                  slot));
  auto active = db.exec("SELECT string_agg(slot_name, ', ') FROM pg_replication_slots WHERE slot_name = ANY ($1) AND active",
                        pg::params{array(old_slots)});
  if (!active.is_null(0, 0))
    throw cli_error(fmt::format("slot(s) {} are streamed: stop the walhooks of the old layout first (SIGTERM; each records "
                                "how far it got), then run walhook reshard again",
                                active.value(0, 0)));
  if (db.exec("SELECT 1 FROM walhook.recoveries WHERE slot_name = ANY ($1) AND state IN ('creating_slot', 'pending')",
              pg::params{array(old_slots)})
          .rows() > 0)
    throw cli_error("the old layout has backfills not done yet: run it until walhook status shows them done");
  auto taken = db.exec("SELECT string_agg(slot_name, ', ') FROM pg_replication_slots WHERE slot_name = ANY ($1)",
                       pg::params{array(new_slots)});
  if (!taken.is_null(0, 0)) throw cli_error(fmt::format("slot(s) {} exist already: drop them first", taken.value(0, 0)));
  auto lower = db.exec(R"sql(
SELECT count(*) OVER (), delivered_snapshot::text FROM walhook.slot_progress
 WHERE slot_name = ANY ($1) AND delivered_snapshot IS NOT NULL
 ORDER BY pg_snapshot_xmax(delivered_snapshot), pg_snapshot_xmin(delivered_snapshot) LIMIT 1)sql",
                       pg::params{array(old_slots)});
  if (lower.rows() == 0 || std::stoi(std::string(lower.value(0, 0))) != a.from)
    throw cli_error("not every slot of the old layout has a delivered snapshot recorded: run each of its walhooks once "
                    "with this version (a second is enough), stop them, and try again");
  return std::string(lower.value(0, 1));
}

/// Each new shard's publications and slot, with a backfill of its tenants' rows between the old
/// layout's oldest delivered snapshot (`since`) and its own slot's: what the old slots held and
/// had not delivered.
void create_new_layout(blocking_db& db, const reshard_args& a, const std::vector<std::string>& new_slots,
                       const std::string& since) {
  const std::string reason = fmt::format("reshard from {} to {}", a.from, a.to);
  for (int k = 0; k < a.to; ++k) {
    operations::ensure_shard_publications(db, {k, a.to}, [](const std::string&) {});
    auto id = std::string(db.exec("INSERT INTO walhook.recoveries (slot_name, reason, state, since_snapshot, requested_by) "
                                  "VALUES ($1, $2, 'creating_slot', $3::pg_snapshot, current_user) RETURNING id",
                                  pg::params{new_slots[k], reason, since})
                              .value(0, 0));
    auto x = operations::create_exported_slot(db, a.database_url, new_slots[k]);
    db.exec(std::string(sql::statements::slot_replaced), {new_slots[k], x.system_id, x.consistent_point, x.snapshot, id});
    std::cout << "created slot " << new_slots[k] << " with backfill " << id << "\n";
  }
  operations::record_shard_layout(db, a.to);
}

/// The old slots would keep WAL forever, and a progress row without its slot is an incident.
void drop_old_layout(blocking_db& db, const reshard_args& a, const std::vector<std::string>& old_slots) {
  for (int k = 0; k < a.from; ++k) {
    db.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", pg::params{old_slots[k]});
    db.exec("DELETE FROM walhook.slot_progress WHERE slot_name = $1", pg::params{old_slots[k]});
    if (a.from > 1)
      for (const auto& pub : shard_publications({k, a.from})) db.exec("DROP PUBLICATION IF EXISTS " + pg::quote_identifier(pub));
  }
}

int reshard(const reshard_args& a) {
  if (a.from == a.to) throw cli_error(fmt::format("--from and --to are both {}: nothing to do", a.from));
  blocking_db db(a.database_url);
  operations::require_schema(db);
  const auto current = operations::shard_count(db);
  if (current != a.from) throw cli_error(fmt::format("this database is split into {} shard(s), not {}", current, a.from));
  const auto old_slots = slots_of(a.slot, a.from);
  const auto new_slots = slots_of(a.slot, a.to);
  const std::string since = check_old_layout_stopped(db, a, old_slots, new_slots);
  create_new_layout(db, a, new_slots, since);
  drop_old_layout(db, a, old_slots);
  std::cout << fmt::format("resharded from {} to {}: dropped the old slots; start {} walhook run {} (each backfills what the "
                           "old layout had not delivered, then streams)\n",
                           a.from, a.to, a.to, a.to > 1 ? fmt::format("--shard K/{}", a.to) : std::string("without --shard"));
  return 0;
}

}  // namespace

command add_reshard(CLI::App& app) {
  auto a = std::make_shared<reshard_args>();
  auto* c = app.add_subcommand(
      "reshard", "Change the number of shards (stop the old layout first): new slots, each with a backfill, then the old "
                 "slots dropped");
  add_database_url(c, a->database_url);
  c->add_option("--from", a->from, "Shards now (1: one walhook without --shard)")->required()->check(CLI::Range(1, max_shards));
  c->add_option("--to", a->to, "Shards after")->required()->check(CLI::Range(1, max_shards));
  c->add_option("--slot", a->slot, "Base name of the slots")->capture_default_str();
  return {c, [a] { return reshard(*a); }};
}

}  // namespace walhook::relay::cli
