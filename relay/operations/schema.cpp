#include "relay/operations/schema.hpp"

#include "common/pg_connection.hpp"
#include "sql/migrations.hpp"
#include "sql/statements.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <fmt/format.h>

#include <string_view>

namespace walhook::relay::operations {
namespace asio = boost::asio;
using namespace std::chrono_literals;

int shard_count(blocking_db& db) {
  return std::stoi(std::string(db.exec(std::string(sql::statements::shard_layout)).value(0, 0)));
}

/// What max_slot_wal_keep_size means for walhook's slot here, in a sentence.
std::string wal_keep_advice(blocking_db& db) {
  auto keep = db.exec("SELECT current_setting('max_slot_wal_keep_size')");
  const std::string v(keep.value(0, 0));
  if (v == "-1")
    return "max_slot_wal_keep_size = -1: PostgreSQL keeps all WAL the slot needs, so while walhook is down the "
           "disk can fill; set it to bound that (a slot past it is invalidated)";
  return "max_slot_wal_keep_size = " + v + ": the slot keeps at most that much WAL; while walhook is down longer than "
         "that lasts, PostgreSQL invalidates the slot (watch walhook_slot_wal_status and walhook_slot_safe_wal_size_bytes)";
}

void require_schema(blocking_db& db) {
  auto r = db.exec("SELECT to_regclass('walhook.outbox') IS NOT NULL");
  if (r.value(0, 0) != "t") throw conflict("the walhook schema is missing: run `walhook migrate` first");
}


/// Creates a logical slot (pgoutput) exporting its snapshot, and reads that snapshot back as
/// pg_snapshot text: recorded as delivered, it is what lets walhook tell after a slot loss which
/// outbox rows the lost slot held (relay/recovery.hpp).
exported_slot create_exported_slot(blocking_db& db, const std::string& url, const std::string& slot) {
  blocking_db repl(url, "walhook-migrate", true);
  auto system = repl.simple("IDENTIFY_SYSTEM");
  auto created =
      repl.simple(fmt::format("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT 'export')", pg::quote_identifier(slot)));
  db.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  db.simple("SET TRANSACTION SNAPSHOT " + pg::quote_literal(std::string(created.value(0, 2))));
  auto snapshot = db.exec("SELECT pg_current_snapshot()::text");
  db.exec("COMMIT");
  return {std::string(system.value(0, 0)), std::string(created.value(0, 1)), std::string(snapshot.value(0, 0))};
}

void ensure_shard_publications(blocking_db& db, shard_spec shard, const std::function<void(const std::string&)>& say) {
  if (!shard.sharded()) return;
  const auto names = shard_publications(shard);
  const auto ddl = shard_publication_ddl(shard);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (db.exec("SELECT 1 FROM pg_publication WHERE pubname = $1", pg::params{names[i]}).rows() > 0) continue;
    db.exec(ddl[i]);
    say(fmt::format("created publication {} (shard {} of {})", names[i], shard.index, shard.count));
  }
}

void record_shard_layout(blocking_db& db, int shards) {
  if (shards == 1)
    db.exec("DELETE FROM walhook.shard_layout");
  else
    db.exec("INSERT INTO walhook.shard_layout (shards) VALUES ($1) ON CONFLICT (singleton) DO UPDATE SET shards = "
            "excluded.shards, changed_at = now()",
            pg::params{std::to_string(shards)});
}

namespace {

using say_fn = std::function<void(const std::string&)>;

/// pg::connection's connect error in the words every other command uses (blocking_db): libpq's
/// message without the "connection failed: " each attempt starts with, on one line, no tabs.
std::string connect_error_text(std::string text) {
  constexpr std::string_view prefix = "connection failed: ";
  for (auto at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) text.erase(at, prefix.size());
  return one_line(std::move(text));
}

/// The migrations, on the async connection driven to completion here; says what it applied.
void apply_migrations(const std::string& url, const say_fn& say) {
  asio::io_context ioc;
  pg::connection conn(ioc.get_executor());
  auto fut = asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<boost::system::result<sql::migrate_report>> {
        if (auto ec = co_await conn.async_connect(url, 10s)) co_return ec;
        co_return co_await sql::migrate(conn);
      },
      asio::use_future);
  ioc.run();
  auto report = fut.get();
  if (!report) {
    if (report.error() == pg::errc::connect_failed || report.error() == pg::errc::timeout)
      throw unavailable("cannot connect to PostgreSQL: " + connect_error_text(conn.last_error()));
    throw unavailable("migration failed: " + conn.last_error());
  }
  for (const auto& name : report->applied) say("applied " + name);
  say(fmt::format("schema version {}{}", report->current_version, report->applied.empty() ? " (up to date)" : ""));
}

/// --shard K/N: the first shard migrated sets the layout (another count needs walhook reshard),
/// and the shard's row-filtered publications (relay/core/shard.hpp) are created once.
void set_up_shard(blocking_db& db, const migrate_request& a, const say_fn& say) {
  if (db.exec("SELECT 1 FROM walhook.slot_progress WHERE slot_name = $1 AND NOT EXISTS (SELECT 1 FROM walhook.shard_layout)",
              pg::params{a.slot})
          .rows() > 0)
    throw conflict(fmt::format("walhook already runs unsharded here (slot {}): split it with walhook reshard --from 1 "
                                "--to {}, which loses nothing",
                                a.slot, a.shard.count));
  db.exec("INSERT INTO walhook.shard_layout (shards) VALUES ($1) ON CONFLICT (singleton) DO NOTHING",
          pg::params{std::to_string(a.shard.count)});
  if (const int shards = shard_count(db); shards != a.shard.count)
    throw conflict(fmt::format("this database is split into {} shards: --shard K/{} needs walhook reshard --from {} --to {}",
                                shards, a.shard.count, shards, a.shard.count));
  ensure_shard_publications(db, a.shard, say);
}

/// An existing slot of this name: fine if it is this database's and pgoutput (says so), else a
/// conflict. False if there is none.
bool slot_exists(blocking_db& db, const std::string& slot_name, const say_fn& say) {
  // Slot names are cluster-wide: one of another database is not walhook's here.
  auto exists = db.exec("SELECT plugin, database, database = current_database() FROM pg_replication_slots WHERE slot_name = $1",
                        pg::params{slot_name});
  if (exists.rows() == 0) return false;
  if (exists.value(0, 2) != "t")
    throw conflict(fmt::format("replication slot \"{}\" belongs to database \"{}\" (slot names are cluster-wide): "
                                "give this database's walhook another --slot",
                                slot_name, exists.is_null(0, 1) ? "(physical)" : std::string(exists.value(0, 1))));
  if (exists.value(0, 0) != "pgoutput")
    throw conflict(fmt::format("replication slot \"{}\" exists with plugin '{}', not pgoutput", slot_name, exists.value(0, 0)));
  say("replication slot " + slot_name + " exists");
  say(wal_keep_advice(db));
  return true;
}

/// Whether walhook streamed `slot_name` on this cluster before. A slot that is gone now is an
/// incident: `walhook run` records it and backfills what the lost slot held; creating the slot
/// here would hide the incident, and lose those events. A record of another cluster (a pg_dump
/// copy, pg_upgrade) does not count: run ignores it too.
bool streamed_before(blocking_db& db, const std::string& url, const std::string& slot_name) {
  std::string system_id;
  {
    blocking_db repl(url, "walhook-migrate", true);
    system_id = std::string(repl.simple("IDENTIFY_SYSTEM").value(0, 0));
  }
  return db.exec(R"sql(
SELECT 1 FROM walhook.slot_progress p WHERE p.slot_name = $1 AND p.system_id = $2
UNION ALL
SELECT 1 FROM walhook.recoveries WHERE slot_name = $1 AND state = 'creating_slot')sql",
                 pg::params{slot_name, system_id})
             .rows() > 0;
}

/// The slot of `a` (the shard's), unless it exists, walhook streamed it here before, or the
/// database is sharded and `a` is not.
void create_slot(blocking_db& db, const migrate_request& a, const say_fn& say) {
  const int shards = shard_count(db);
  if (!a.shard.sharded() && shards != 1) {
    say(fmt::format("this database is split into {} shards: no unsharded slot created (use walhook migrate --shard K/{})",
                    shards, shards));
    return;
  }
  const std::string slot_name = shard_slot(a.slot, a.shard);
  if (slot_exists(db, slot_name, say)) return;
  if (streamed_before(db, a.database_url, slot_name)) {
    say("replication slot " + slot_name + " is missing, but walhook streamed it here before: not creating it; walhook run "
        "recovers (it records the incident and delivers from the outbox what the lost slot held)");
    return;
  }
  auto level = db.exec("SELECT current_setting('wal_level')");
  if (level.value(0, 0) != "logical")
    throw conflict(fmt::format("wal_level is '{}': walhook needs wal_level = logical to create its replication slot "
                                "(ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)",
                                level.value(0, 0)));
  try {
    // A new slot starts a new history: a recorded position (e.g. from a restored copy) is void.
    auto x = create_exported_slot(db, a.database_url, slot_name);
    db.exec(std::string(sql::statements::slot_replaced), {slot_name, x.system_id, x.consistent_point, x.snapshot, std::nullopt});
  } catch (const user_error& e) {
    throw user_error(e.kind(), std::string("could not create the replication slot: ") + e.what());
  }
  say("created replication slot " + slot_name + " (pgoutput): events published from now on are kept for walhook");
  say(wal_keep_advice(db));
}

}  // namespace

void install_outbox_bridge(blocking_db& db, const std::string& table, const bridge_mapping& m, const say_fn& say) {
  try {
    auto r = db.exec("SELECT walhook.bridge_outbox_table($1, $2::jsonb, $3)", pg::params{table, bridge_columns_json(m), m.tenant});
    say(std::string(r.value(0, 0)));
  } catch (const pg_error& e) {
    if (e.sqlstate() == "42501")  // insufficient_privilege: CREATE TRIGGER on a table of the application's
      throw invalid_input(fmt::format("cannot bridge {}: {} (the migrating role needs USAGE on the table's schema and "
                                      "the TRIGGER privilege on the table: GRANT TRIGGER ON {} TO <role>)",
                                      table, e.what(), table));
    if (e.sqlstate().starts_with("22") || e.sqlstate().starts_with("42"))  // the mapping or the table: the caller's
      throw invalid_input(fmt::format("cannot bridge {}: {}", table, e.what()));
    throw;
  }
}

void remove_outbox_bridge(blocking_db& db, const std::string& table, const say_fn& say) {
  pg::query_result r;
  try {
    r = db.exec("SELECT walhook.unbridge_outbox_table($1)", pg::params{table});
  } catch (const pg_error& e) {
    if (e.sqlstate() != "42501") throw;  // "must be owner of table": dropping a trigger is the owner's
    throw invalid_input(fmt::format("cannot remove the bridge of {}: {} (dropping a trigger takes the table's owner: "
                                    "the owner runs DROP TRIGGER walhook_outbox_bridge ON {}, then run this again)",
                                    table, e.what(), table));
  }
  if (r.value(0, 0) != "t") throw not_found(fmt::format("{} has no outbox bridge (walhook.outbox_bridges)", table));
  say(fmt::format("removed the outbox bridge of {} (its rows already in walhook.outbox stay)", table));
}

void migrate(const migrate_request& a, const std::function<void(const std::string&)>& say) {
  apply_migrations(a.database_url, say);
  blocking_db db(a.database_url);
  if (a.shard.sharded()) set_up_shard(db, a, say);
  if (a.create_slot) create_slot(db, a, say);
  if (!a.remove_bridge.empty()) remove_outbox_bridge(db, a.remove_bridge, say);
  if (!a.outbox_table.empty()) install_outbox_bridge(db, a.outbox_table, a.bridge, say);
}

}  // namespace walhook::relay::operations
