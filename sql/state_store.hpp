#pragma once
// The state store: writes delivery state back to walhook.deliveries and walhook.endpoint_health
// in batches, and claims persisted work back for retries (docs/architecture.md, Data flow and Schema).
//
// Writes are queued with enqueue() and committed by run() in batches: one transaction and one
// round trip (libpq pipeline mode) for everything queued since the previous batch (group
// commit; sql/batch.hpp builds the statements). A write's `on_durable` runs once its batch
// committed — that is when the LSN tracker may count the delivery as done. Batches are retried
// across reconnects. A statement that fails for a reason other than the connection is retried one
// write at a time, so one bad row cannot block the others: a delivery the server refuses for its
// data (a too-long key, a failed constraint) ends dead with the server's reason.
//
// Reads and claims use a second connection, so they never queue behind a large batch.
//
// Thread affinity: one executor; every call from it.

#include "common/async_mutex.hpp"
#include "common/pg_connection.hpp"
#include "common/time.hpp"
#include "sql/store.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace walhook::sql {

struct state_store_options {
  std::string conninfo;
  /// Writes per transaction at most (`walhook run --max-batch`: this is its default).
  std::size_t max_batch = 1000;
  std::chrono::milliseconds statement_timeout{30000};
  std::chrono::milliseconds reconnect_min{50};
  /// Longest wait between reconnects (`walhook run --reconnect-max-ms`: this is its default, for
  /// the engine's sessions too).
  std::chrono::milliseconds reconnect_max{500};
  std::string application_name = "walhook-state";
  /// Shard count and index (relay/core/shard.hpp): endpoint reads, stale-row resets and backfills keep
  /// to this shard's tenants. count <= 1: not sharded.
  int shard_count = 1;
  int shard_index = 0;
  const clock_source* clock = &real_clock::instance();  ///< deadlines (stop) are read from it
};

/// A table read as text: column names and rows (std::nullopt is NULL).
struct text_rows {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
};

/// walhook.slot_progress of one slot.
struct slot_record {
  lsn confirmed;          ///< invalid if there is no row
  std::string system_id;  ///< the cluster it was recorded on
  /// A delivered snapshot was recorded: a slot of this name existed here, so its absence is an
  /// incident to recover from, not a first start.
  bool has_delivered_snapshot = false;
  std::optional<std::string> delivered_snapshot;  ///< pg_snapshot text
};

/// A slot incident in walhook.recoveries.
struct slot_incident {
  std::int64_t id = 0;
  bool bounded = false;       ///< a delivered snapshot bounds its backfill from below
  bool recorded_now = false;  ///< false: an earlier attempt at replacing the slot recorded it
};

/// An open row of walhook.recoveries: a slot incident's range of snapshots, or an operator's
/// range of created_at (RFC 3339 UTC), optionally for one tenant.
struct recovery {
  std::int64_t id = 0;
  std::string state;  ///< creating_slot | pending
  std::string reason;
  std::optional<std::string> since_snapshot, until_snapshot;
  std::optional<std::string> since_time, until_time, tenant_id;
  lsn slot_lsn;  ///< the new slot's consistent point (slot incidents, reshards); invalid for an operator's
};

/// A slot's WAL retention as PostgreSQL reports it (pg_replication_slots, PostgreSQL 13+).
struct slot_health {
  std::string wal_status;                   ///< reserved | extended | unreserved | lost ("" if unknown)
  std::optional<std::int64_t> safe_wal_size;  ///< bytes until the slot is at risk; none if unlimited
  std::int64_t retained_bytes = 0;          ///< WAL kept for it, bytes
  /// extended or unreserved: the slot keeps more WAL than max_wal_size (extended), or more than
  /// max_slot_wal_keep_size allows and can be invalidated at the next checkpoint (unreserved).
  bool at_risk() const { return wal_status == "extended" || wal_status == "unreserved"; }
};

/// A row of walhook.endpoint_cursors (sql/migrations/007): pg_snapshot and xid8[] as text.
struct cursor_row {
  std::int64_t endpoint_id = 0;
  std::string covered;
  std::string also;  ///< "{…}"
  std::optional<std::string> window_snapshot;
  std::int64_t window_after = 0;
  std::string tenant_id;
  std::optional<std::string> routing;  ///< JSON (relay/core/routing_epoch.hpp); none: NULL
};

/// A page of the outbox rows a cursor owes (sql/statements/cursor_page.sql).
struct cursor_page_request {
  std::string tenant_id;
  std::string covered;
  std::vector<std::uint64_t> also;
  std::optional<std::string> window_snapshot;  ///< empty: open a window at the current snapshot
  std::int64_t after_seq = 0;
  int limit = 0;
  std::int64_t endpoint_id = 0;  ///< events with a walhook.deliveries row of this endpoint are not owed
};

class state_store final : public store {
 public:
  state_store(boost::asio::any_io_executor ex, state_store_options options);
  ~state_store() override;

  void enqueue(write w, durable_callback on_durable = {}) override;
  std::size_t backlog() const override;

  /// The writer loop: connects, commits batches until stop() is called and the queue is empty.
  boost::asio::awaitable<void> run();
  /// Waits until nothing is queued (every write so far is durable) or `deadline`; true if so.
  boost::asio::awaitable<bool> async_idle(std::chrono::steady_clock::time_point deadline);
  /// Asks run() to finish once everything queued so far is written (or the deadline passes).
  void stop(std::chrono::steady_clock::time_point deadline);

  std::uint64_t batches_committed() const;
  std::uint64_t rows_written() const;
  std::uint64_t write_failures() const;
  /// Writes the server refused for their data: deliveries written dead with the reason instead
  /// (and the rare write refused even so, logged and dropped).
  std::uint64_t writes_refused() const;

  // --- reads and claims, on the reader connection ---

  /// The server's (or libpq's) message for the reader's last failure, for logs.
  const std::string& last_read_error() const;
  /// Ends the read or claim in progress (it fails as connection lost; the next one reconnects):
  /// a session ending must not wait for a query blocked by a lock until statement_timeout.
  void interrupt_reads();

  boost::asio::awaitable<boost::system::result<std::vector<claimed_delivery>>> claim_due(
      std::vector<claim_quota> quotas) override;
  boost::asio::awaitable<boost::system::result<std::vector<due_time>>> next_due(
      std::vector<std::int64_t> endpoint_ids) override;

  /// Endpoints that have pending or sending deliveries.
  boost::asio::awaitable<boost::system::result<std::vector<std::int64_t>>> endpoints_with_backlog();

  /// Puts 'sending' rows not touched for `older_than` back to 'pending' (their attempt's process
  /// died), except the rows in `owned` (this process's attempts, still running or with their
  /// outcome on its way). Returns how many. older_than = 0 resets all others (session start,
  /// holding the slot's lock).
  boost::asio::awaitable<boost::system::result<long>> reset_stale_sending(std::chrono::seconds older_than,
                                                                          std::vector<delivery_key> owned);

  /// The position recorded in walhook.slot_progress for a slot ({invalid, "", false} if none).
  boost::asio::awaitable<boost::system::result<slot_record>> load_progress(const std::string& slot);

  // --- slot loss and backfills (sql/migrations/005_slot_recovery.sql) ---

  /// A candidate delivered snapshot: pg_current_snapshot() text, then the WAL insert position.
  boost::asio::awaitable<boost::system::result<std::pair<std::string, lsn>>> current_snapshot();
  /// Imports a snapshot exported by CREATE_REPLICATION_SLOT (SET TRANSACTION SNAPSHOT, in a
  /// REPEATABLE READ READ ONLY transaction of the reader) and returns it as pg_snapshot text.
  boost::asio::awaitable<boost::system::result<std::string>> import_snapshot(const std::string& name);
  /// Records a slot incident before the slot is replaced, or finds the one a crash or a failed
  /// replacement left (`recorded_now` false).
  boost::asio::awaitable<boost::system::result<slot_incident>> begin_slot_incident(
      const std::string& slot, const std::string& reason, const std::string& system_id);
  /// A slot was created (consistent point, exported snapshot as pg_snapshot text): the incident
  /// (if any) becomes a pending backfill up to that snapshot, and the slot's progress starts over.
  boost::asio::awaitable<boost::system::error_code> slot_replaced(const std::string& slot, const std::string& system_id,
                                                                  lsn consistent_point, const std::string& snapshot,
                                                                  std::optional<std::int64_t> incident);
  /// Backfills of a slot not done yet, oldest first.
  boost::asio::awaitable<boost::system::result<std::vector<recovery>>> open_recoveries(const std::string& slot);
  /// A page of the outbox rows a backfill covers, in insertion order: (seq, event id) of at most
  /// `limit` rows after seq `after`.
  boost::asio::awaitable<boost::system::result<std::vector<std::pair<std::int64_t, std::string>>>> recovery_event_ids(
      std::int64_t id, std::int64_t after, int limit);
  /// Those outbox rows, as text with the stream's column names.
  boost::asio::awaitable<boost::system::result<text_rows>> recovery_events(std::span<const std::string> ids);
  /// Endpoints whose outbox cursor has not moved for `age` (the give-up age).
  boost::asio::awaitable<boost::system::result<std::vector<std::int64_t>>> stale_cursors(std::chrono::hours age);
  /// Ends what a cursor owes dead as one range (walhook.dead_ranges) and moves it to the current
  /// snapshot, in one statement. Returns (the new covered snapshot, events in the range).
  boost::asio::awaitable<boost::system::result<std::pair<std::string, std::int64_t>>> give_up_cursor(
      std::int64_t endpoint_id, const std::string& tenant_id, const std::string& covered,
      const std::vector<std::uint64_t>& also, const std::string& reason);
  /// The outbox cursors of this shard's endpoints.
  boost::asio::awaitable<boost::system::result<std::vector<cursor_row>>> load_cursors();
  /// The outbox rows a cursor owes, in seq order: columns window_snapshot, insert_lsn (every
  /// row), then seq, xid, and the outbox columns the stream sends (NULL in the one row of an
  /// empty page).
  boost::asio::awaitable<boost::system::result<text_rows>> cursor_page(const cursor_page_request& q);
  /// How many shards the database is split into (walhook.shard_layout).
  boost::asio::awaitable<boost::system::result<int>> shard_count();
  /// Marks a backfill done with its counts.
  boost::asio::awaitable<boost::system::error_code> recovery_done(std::int64_t id, std::int64_t events,
                                                                  std::int64_t deliveries);
  /// Forgets the copies of removed endpoints (the slot was just created: it will never stream
  /// those removals).
  boost::asio::awaitable<boost::system::error_code> clear_removed_endpoints();

  /// Retention: deletes one batch of outbox rows older than `age`, and of delivered or dead
  /// deliveries whose event is older than `age`. Returns the rows deleted (repeat while it
  /// returns `batch`).
  boost::asio::awaitable<boost::system::result<long>> delete_expired(std::chrono::hours age, int batch);
  /// Ends rotations whose grace period is over: those endpoints keep only their first (new)
  /// secret. Returns how many endpoints changed.
  boost::asio::awaitable<boost::system::result<long>> drop_expired_secrets();

  /// Every row of walhook.endpoint_health (breaker state at session start).
  boost::asio::awaitable<boost::system::result<std::vector<health_write>>> load_health();
  /// Every row of walhook.endpoints, as text (decoded like the stream's rows).
  boost::asio::awaitable<boost::system::result<text_rows>> load_endpoints();
  /// The slot's WAL retention; std::nullopt in the result if the slot does not exist.
  boost::asio::awaitable<boost::system::result<std::optional<slot_health>>> load_slot_health(const std::string& slot);
  /// Per endpoint of this shard in walhook.endpoints that has open (pending or sending) rows,
  /// seconds since the oldest such event was created; one index probe per endpoint.
  boost::asio::awaitable<boost::system::result<std::vector<std::pair<std::int64_t, double>>>> oldest_pending();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace walhook::sql
