#pragma once
// The SQL walhook runs against its own schema, one file per statement in sql/statements/,
// embedded into the binary at build time (like the migrations). Each file's header comment
// gives its parameters and result.

#include <string_view>

namespace walhook::sql::statements {

// Batched writes (sql/batch.hpp builds them).
extern const std::string_view upsert_deliveries;   ///< $1 jsonb rows
extern const std::string_view update_deliveries;   ///< $1 jsonb rows (by id or by endpoint + event)
extern const std::string_view write_health;        ///< $1 jsonb rows
extern const std::string_view disable_endpoints;   ///< $1 bigint[]
extern const std::string_view publish_events;      ///< $1 jsonb outbox rows
extern const std::string_view record_progress;     ///< $1 slot, $2 system id, $3 LSN, $4 snapshot or NULL, $5 timeline
extern const std::string_view await_removal;            ///< $1 endpoint id or NULL
extern const std::string_view forget_removed_endpoint;  ///< $1 endpoint id or NULL, $2 xid (32-bit)
extern const std::string_view write_cursor;   ///< $1 endpoint, $2 covered, $3 also, $4 window or NULL, $5 after, $6 reason, $7 drained, $8 tenant, $9 routing or NULL
extern const std::string_view delete_cursor;  ///< $1 endpoint

// Claims and reads of the state store's reader connection.
extern const std::string_view claim_due;               ///< $1 jsonb quotas → claimed rows with their events
extern const std::string_view next_due;                ///< $1 bigint[] → (endpoint id, ms until due)
extern const std::string_view reset_stale_sending;     ///< $1 seconds, $2 jsonb owned keys, $3/$4 shard → command tag count
extern const std::string_view endpoints_with_backlog;  ///< → endpoint ids
extern const std::string_view load_progress;           ///< $1 slot → (LSN text, system id, has snapshot)
extern const std::string_view current_snapshot;        ///< → (pg_snapshot text, WAL insert LSN)
extern const std::string_view begin_slot_incident;     ///< $1 slot, $2 reason, $3 system id → (id, bounded, new)
extern const std::string_view slot_replaced;           ///< $1 slot, $2 system id, $3 LSN, $4 snapshot, $5 incident
extern const std::string_view open_recoveries;         ///< $1 slot → recoveries to run
extern const std::string_view recovery_event_ids;      ///< $1 recovery id, $2/$3 shard, $4 after seq, $5 limit → (seq, event id)
extern const std::string_view recovery_events;         ///< $1 uuid[] → outbox rows (text)
extern const std::string_view recovery_done;           ///< $1 id, $2 events, $3 deliveries
extern const std::string_view shard_layout;            ///< → the number of shards
extern const std::string_view clear_removed_endpoints; ///< (a new slot)
extern const std::string_view delete_expired;          ///< $1 hours, $2 batch → rows deleted
extern const std::string_view drop_expired_secrets;    ///< → command tag count (endpoints whose old secrets went)
extern const std::string_view load_health;             ///< → endpoint_health rows
extern const std::string_view load_endpoints;          ///< $1/$2 shard → endpoints rows
extern const std::string_view oldest_pending;          ///< → (endpoint id, seconds)
extern const std::string_view slot_health;             ///< $1 slot → (wal_status, safe_wal_size, retained bytes)
extern const std::string_view load_cursors;            ///< $1/$2 shard → (endpoint, covered, also, window, after, tenant, routing)
extern const std::string_view stale_cursors;           ///< $1 hours → endpoint ids
extern const std::string_view give_up_cursor;          ///< $1 endpoint, $2 tenant, $3 covered, $4 also, $5 reason → (covered, events, id)
extern const std::string_view cursor_page;             ///< $1 tenant, $2 covered, $3 also, $4 window, $5 after, $6 limit, $7 endpoint → rows

// Operator reads (relay/operations/).
extern const std::string_view endpoint_status;  ///< $1 endpoint id or NULL, $2..$5 a page's start or NULL, $6 its size → endpoints with counts, worst first

}  // namespace walhook::sql::statements
