#pragma once
// The writes walhook makes to PostgreSQL, as values (docs/architecture.md, Schema): delivery state, endpoint
// health, slot progress. The state store queues them and commits them in batches
// (sql/batch.hpp builds the statements of one batch; sql/state_store.hpp runs them).

#include "common/lsn.hpp"
#include "common/time.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace walhook::sql {

/// walhook.deliveries.status. `sending`: an attempt owns the row (claimed, or recorded while it
/// ran too long to hold the slot); after a crash it goes back to `pending`.
enum class delivery_status { pending, sending, delivered, dead };
std::string_view to_string(delivery_status s);

/// A delivery's identity without its row id: walhook.deliveries is unique on (endpoint, event).
struct delivery_key {
  std::int64_t endpoint_id = 0;
  std::string event_id;  ///< outbox.id, uuid text
  bool operator==(const delivery_key&) const = default;
};

/// Where a delivery stands after an attempt (or without one, when it is spilled).
struct delivery_outcome {
  delivery_status status = delivery_status::pending;
  int attempts = 0;  ///< attempts made so far
  /// When a pending delivery is due, as a delay from the moment the write is made: the server
  /// stores now() + delay, so one clock (PostgreSQL's) decides when claims find it and a walhook
  /// clock that is off never makes a retry immediate or late. Negative values count as 0.
  std::optional<std::chrono::milliseconds> next_attempt_in;
  std::optional<system_clock::time_point> last_attempt_at;
  std::optional<int> last_status;         ///< HTTP status of the last attempt
  std::optional<std::string> last_error;  ///< readable reason of the last failure
  int deferrals = 0;  ///< of the attempts, answers that deferred it (migration 011; written as is)
  bool operator==(const delivery_outcome&) const = default;
};

/// A delivery known only in memory so far, written by (endpoint, event): spilled as pending,
/// recorded as delivered (--record=all) or dead, or marked `sending` while its attempt runs. A
/// pending one with a merge key replaces the pending row with the same (endpoint, merge key)
/// instead of adding one (merge) — unless that row holds a newer event, which then supersedes
/// this one. A row that already exists for (endpoint, event) — a redelivery after a crash — is
/// updated only while it is pending (or to record a success), never regressed from delivered.
struct upsert_delivery {
  std::int64_t endpoint_id = 0;
  std::string event_id;
  std::optional<std::string> aggregate_id;
  std::optional<std::string> merge_key;
  std::string event_created_at;  ///< ISO 8601
  lsn commit_lsn;                ///< end LSN of the event's transaction (merge order); invalid if unknown
  delivery_outcome outcome;
};

/// The outcome of an attempt on a persisted delivery: by row id (claimed rows), or by
/// (endpoint, event) for a row this process marked `sending` (row_id empty; applied only while
/// the row is still `sending`, or to record a success). Going back to pending while a newer
/// pending delivery with the same merge key exists deletes this row instead (merged).
struct update_delivery {
  std::optional<std::int64_t> row_id;
  delivery_key key;  ///< used when row_id is empty
  delivery_outcome outcome;
};

/// walhook.endpoint_health, whole row (the in-memory breaker is authoritative while running).
/// `disable` also sets endpoints.status = 'disabled'.
struct health_write {
  std::int64_t endpoint_id = 0;
  int consecutive_failures = 0;
  std::optional<system_clock::time_point> first_failure_at;
  std::optional<system_clock::time_point> last_failure_at;
  std::optional<system_clock::time_point> last_success_at;
  /// How long the endpoint stays paused from the moment the write is made (empty: not paused).
  /// Stored as the server's now() + delay, and read back as what remains of it, so the pause
  /// holds its length across a restart whatever walhook's clock says.
  std::optional<std::chrono::milliseconds> paused_for;
  int probe_rounds = 0;
  std::optional<int> last_status;
  std::optional<std::string> last_error;
  bool disable = false;
  std::optional<std::string> disabled_reason;
};

/// The slot position walhook acknowledged (walhook.slot_progress); the newest per slot wins.
struct progress_write {
  std::string slot;
  std::string system_id;  ///< IDENTIFY_SYSTEM's systemid of the cluster the position belongs to
  lsn confirmed_lsn;
  /// pg_snapshot text of a snapshot every transaction visible in which is handled (its WAL
  /// insert position read right after it is at or before confirmed_lsn); empty: keep the
  /// recorded one. The lower bound of a backfill after a slot loss (sql/migrations/005).
  std::optional<std::string> delivered_snapshot;
  /// IDENTIFY_SYSTEM's timeline the position was acknowledged on (0: not known). The write is not
  /// recorded on a server that writes another timeline: after a failover, a write of the old
  /// primary retried on the promoted one (same system_id) describes WAL this server never had.
  int timeline = 0;
};

/// walhook streamed the removal (DELETE or a changed id; TRUNCATE when endpoint_id is empty) of an
/// endpoint by the transaction `xid` (pgoutput Begin), and the work routed to it before is done:
/// the copy kept in walhook.endpoints_removed for replays is deleted, and delivery rows of the
/// removed endpoint still pending end dead. Holds the transaction's ticket until durable, so a
/// crash replays the events, the removal and the copy together.
struct removal_streamed {
  std::optional<std::int64_t> endpoint_id;
  std::uint32_t xid = 0;
};

/// An event walhook publishes itself (its notifications, relay/core/notifications.hpp): a row inserted
/// into walhook.outbox in the batch's transaction — with the health write that caused it, when
/// queued right after one — so it comes back through the slot and is routed, delivered, signed,
/// retried and merged like any event. It holds no LSN ticket: one the server refuses is given up
/// (logged), never retried ahead of the delivery state queued behind it.
struct publish_event {
  std::string tenant_id;
  std::string event_type;
  std::optional<std::string> aggregate_id;
  std::optional<std::string> merge_key;
  std::string payload;  ///< JSON text (outbox.payload, jsonb)
  /// outbox.endpoint_id (migration 006): routed to this endpoint only (direct route); empty:
  /// routed by tenant and event type.
  std::optional<std::int64_t> endpoint_id;
  bool operator==(const publish_event&) const = default;
};

/// An endpoint's outbox cursor (walhook.endpoint_cursors, sql/migrations/007): which
/// transactions are handled for it — visible in `covered` (pg_snapshot text), listed in `also`
/// (xid8), and while a window is open, the window's rows up to seq `window_after`. Written once
/// the writes queued before it are (one queue, in order): what it covers is durable first.
struct cursor_write {
  std::int64_t endpoint_id = 0;
  std::string covered;
  std::vector<std::uint64_t> also;
  std::optional<std::string> window_snapshot;
  std::int64_t window_after = 0;
  std::string reason;
  std::int64_t drained = 0;  ///< deliveries read back from the outbox since the last write
  std::string tenant_id;     ///< the endpoint's: a cursor belongs to the endpoint of this id and tenant
  /// The routing the endpoint had before changes (JSON, relay/core/routing_epoch.hpp); none: NULL.
  std::optional<std::string> routing;
  bool operator==(const cursor_write&) const = default;
};

/// The endpoint follows the stream again: its cursor row goes.
struct cursor_delete {
  std::int64_t endpoint_id = 0;
  bool operator==(const cursor_delete&) const = default;
};

/// Any write the state store takes.
using write = std::variant<upsert_delivery, update_delivery, health_write, progress_write, removal_streamed, publish_event,
                           cursor_write, cursor_delete>;

}  // namespace walhook::sql
