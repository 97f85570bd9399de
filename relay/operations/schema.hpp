#pragma once
// walhook's schema and its replication slot, as the CLI (`walhook migrate`, `reshard`, `run`'s
// preflight) and the demo set them up: migrations, shard publications, the slot with its
// exported snapshot. Blocking libpq (relay/operations/blocking_db.hpp); user errors throw
// cli_error with a one-line message.

#include "relay/core/outbox_bridge.hpp"
#include "relay/core/shard.hpp"
#include "relay/operations/blocking_db.hpp"
#include "wal/replication_stream.hpp"

#include <functional>
#include <string>

namespace walhook::relay::operations {

/// Throws cli_error("the walhook schema is missing: run `walhook migrate` first") unless
/// walhook.outbox exists.
void require_schema(blocking_db& db);

/// What max_slot_wal_keep_size means for walhook's slot on this server, in a sentence.
std::string wal_keep_advice(blocking_db& db);

/// How many shards the database is split into (walhook.shard_layout, sql/statements/shard_layout.sql; no row: 1).
int shard_count(blocking_db& db);

/// A logical slot (pgoutput) created with its snapshot exported (CREATE_REPLICATION_SLOT …
/// SNAPSHOT 'export', PostgreSQL docs, 55.4 Streaming Replication Protocol).
struct exported_slot {
  std::string system_id;         ///< IDENTIFY_SYSTEM
  std::string consistent_point;  ///< LSN text
  std::string snapshot;          ///< the exported snapshot as pg_snapshot text
};
/// Creates `slot` on a replication connection to `url` and reads its snapshot back through `db`:
/// recorded as delivered, it is what lets walhook tell after a slot loss which outbox rows the
/// lost slot held (relay/engine/recovery.hpp). Throws cli_error with the server's message.
exported_slot create_exported_slot(blocking_db& db, const std::string& url, const std::string& slot);

/// Creates the shard's row-filtered publications (shard_publication_ddl) that do not exist yet,
/// saying so for each; nothing when `shard` is not sharded.
void ensure_shard_publications(blocking_db& db, shard_spec shard, const std::function<void(const std::string&)>& say);

/// Records the number of shards in walhook.shard_layout (1: no row, as before any sharding).
void record_shard_layout(blocking_db& db, int shards);

struct migrate_request {
  std::string database_url;
  std::string slot = wal::stream_options{}.slot;  ///< --slot (its default is the stream's)
  bool create_slot = true;
  shard_spec shard;  ///< --shard K/N: also the shard's publications, and the slot `<slot>_K_of_N`
  /// --outbox-table SCHEMA.TABLE: the application's own outbox table, bridged into walhook.outbox
  /// with `bridge` (install_outbox_bridge). Empty: none.
  std::string outbox_table;
  bridge_mapping bridge;
  /// --remove-outbox-bridge SCHEMA.TABLE: removes that table's bridge (remove_outbox_bridge).
  std::string remove_bridge;
};
/// Installs or replaces the bridge of the application's outbox table `table` (SCHEMA.TABLE) into
/// walhook.outbox: an AFTER INSERT trigger whose function copies each new row, mapped by `m`,
/// in the same transaction (walhook.bridge_outbox_table(), sql/migrations/009_outbox_bridge.sql).
/// Idempotent. Says what it installed. Throws invalid_input naming the missing table or column
/// (with the table's columns), or the privilege the migrating role lacks.
void install_outbox_bridge(blocking_db& db, const std::string& table, const bridge_mapping& m,
                           const std::function<void(const std::string&)>& say);

/// Removes the bridge of `table`: its trigger and function; the table and the events already in
/// walhook.outbox stay. Throws not_found if there is no bridge of that table.
void remove_outbox_bridge(blocking_db& db, const std::string& table, const std::function<void(const std::string&)>& say);

/// Applies the schema migrations and creates the logical replication slot (pgoutput) if it is
/// missing, so events published from now on are never missed even before `walhook run`. A
/// slot walhook streamed before on this cluster is not created again (`walhook run` recovers
/// it as an incident). Then the outbox bridge it asks for, if any. Each line of the report goes to `say` as it happens. Throws cli_error.
void migrate(const migrate_request& request, const std::function<void(const std::string&)>& say);

}  // namespace walhook::relay::operations
