#pragma once
// The state store: writes delivery state back to walhook.deliveries and walhook.endpoint_health
// in batches, and claims persisted work back for retries (DESIGN §3, §5).
//
// Writes are queued with enqueue() and committed by run() in batches: one transaction and one
// round trip (libpq pipeline mode) for everything queued since the previous batch (group
// commit). A write's `on_durable` runs once its batch committed — that is when the LSN tracker
// may count the delivery as done. Batches are retried across reconnects; nothing queued is
// dropped. A statement that fails for a reason other than the connection is retried one write
// at a time, so one bad row cannot block the others.
//
// Thread affinity: one executor; enqueue() from that executor only.

#include "common/async_mutex.hpp"
#include "common/pg_connection.hpp"
#include "common/time.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace walhook::sql {

enum class delivery_status { pending, delivered, dead };
std::string_view to_string(delivery_status s);

/// Where a delivery stands after an attempt (or without one, when it is spilled).
struct delivery_outcome {
  delivery_status status = delivery_status::pending;
  int attempts = 0;  ///< attempts made so far
  std::optional<system_clock::time_point> next_attempt_at;
  std::optional<system_clock::time_point> last_attempt_at;
  std::optional<int> last_status;         ///< HTTP status of the last attempt
  std::optional<std::string> last_error;  ///< readable reason of the last failure
};

/// A delivery known only in memory so far, written by (endpoint, event): spilled as pending,
/// recorded as delivered (--record=all) or dead. A pending one with a merge key replaces the
/// pending row with the same (endpoint, merge key) instead of adding one (merge) — unless that
/// row holds a newer event, which then supersedes this one. A row that already exists for
/// (endpoint, event) — a redelivery after a crash — is updated, never regressed from delivered.
struct upsert_delivery {
  std::int64_t endpoint_id = 0;
  std::string event_id;
  std::optional<std::string> aggregate_id;
  std::optional<std::string> merge_key;
  std::string event_created_at;  ///< ISO 8601
  std::uint64_t commit_lsn = 0;
  delivery_outcome outcome;
};

/// The outcome of an attempt on a persisted delivery (by row id). Going back to pending while a
/// newer pending delivery with the same merge key exists deletes this row instead (merged).
struct update_delivery {
  std::int64_t row_id = 0;
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
  std::optional<system_clock::time_point> paused_until;
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
  std::uint64_t confirmed_lsn = 0;
};

/// A persisted delivery claimed for an attempt (status set to 'sending'), with its event.
struct claimed_delivery {
  std::int64_t row_id = 0;
  std::int64_t endpoint_id = 0;
  int attempts = 0;
  std::string event_id;
  std::optional<std::string> merge_key;
  std::optional<std::string> aggregate_id;
  std::uint64_t commit_lsn = 0;
  bool event_missing = false;  ///< the outbox row is gone (deleted or truncated)
  std::string tenant_id;
  std::string event_type;
  std::string event_created_at;  ///< ISO 8601
  std::string payload;
};

/// How many due deliveries to claim for one endpoint, and whether it is ordered by aggregate.
struct claim_quota {
  std::int64_t endpoint_id = 0;
  int limit = 0;
  bool aggregate_ordering = false;
};

struct state_store_options {
  std::string conninfo;
  std::size_t max_batch = 5000;  ///< writes per transaction at most
  std::chrono::milliseconds statement_timeout{30000};
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{5000};
  std::string application_name = "walhook-state";
};

class state_store {
 public:
  state_store(boost::asio::any_io_executor ex, state_store_options options);
  ~state_store();

  using callback = std::function<void()>;
  void enqueue(upsert_delivery w, callback on_durable = {});
  void enqueue(update_delivery w, callback on_durable = {});
  void enqueue(health_write w, callback on_durable = {});
  void enqueue(progress_write w, callback on_durable = {});

  /// The writer loop: connects, commits batches until stop() is called and the queue is empty.
  boost::asio::awaitable<void> run();
  /// Asks run() to finish once everything queued so far is written (or the deadline passes).
  void stop(std::chrono::steady_clock::time_point deadline);

  /// Writes queued and not yet committed.
  std::size_t backlog() const;
  std::uint64_t batches_committed() const;
  std::uint64_t rows_written() const;
  std::uint64_t write_failures() const;

  // --- reads and claims, on a second connection (never queued behind a large batch) ---

  /// Claims due pending deliveries (status → 'sending') within the quotas, earliest first per
  /// endpoint; for aggregate-ordered endpoints only the oldest delivery of each aggregate, and
  /// none while another of that aggregate is being sent.
  boost::asio::awaitable<boost::system::result<std::vector<claimed_delivery>>> claim_due(
      const std::vector<claim_quota>& quotas);

  /// For each of these endpoints that has pending deliveries: the time until its earliest one
  /// is due (≤ 0: due now), computed with the server's clock. Endpoints without pending
  /// deliveries are absent from the answer.
  boost::asio::awaitable<boost::system::result<std::vector<std::pair<std::int64_t, std::chrono::milliseconds>>>>
  next_due(const std::vector<std::int64_t>& endpoint_ids);

  /// Endpoints that have pending or sending deliveries.
  boost::asio::awaitable<boost::system::result<std::vector<std::int64_t>>> endpoints_with_backlog();

  /// Puts 'sending' rows not touched for `older_than` back to 'pending' (after a crash).
  /// Returns how many. older_than = 0 resets all (startup, holding the slot's lock).
  boost::asio::awaitable<boost::system::result<long>> reset_stale_sending(std::chrono::seconds older_than);

  /// The position recorded in walhook.slot_progress for a slot, with the system identifier of
  /// the cluster it was recorded on ({0, ""} if none).
  boost::asio::awaitable<boost::system::result<std::pair<std::uint64_t, std::string>>> load_progress(
      const std::string& slot);
  /// Forgets the recorded position (the slot was just created).
  boost::asio::awaitable<boost::system::error_code> clear_progress(const std::string& slot);

  /// Retention: deletes one batch of outbox rows older than `age`, and of delivered or dead
  /// deliveries whose event is older than `age`. Returns the rows deleted (repeat while it
  /// returns `batch`).
  boost::asio::awaitable<boost::system::result<long>> delete_expired(std::chrono::hours age, int batch);

  /// Every row of walhook.endpoint_health (breaker state at startup).
  boost::asio::awaitable<boost::system::result<std::vector<health_write>>> load_health();

  /// Exclusive use of the reader connection (opened lazily) while the lease lives: the claim
  /// loop, the sweeper and session setup share it one query at a time.
  class reader_lease {
   public:
    reader_lease(pg::connection* c, async_mutex::guard g) : conn_(c), guard_(std::move(g)) {}
    pg::connection* operator->() const { return conn_; }
    pg::connection& operator*() const { return *conn_; }

   private:
    pg::connection* conn_;
    async_mutex::guard guard_;
  };
  boost::asio::awaitable<boost::system::result<reader_lease>> reader();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Formats a system time as an ISO 8601 literal PostgreSQL accepts for timestamptz.
std::string to_sql_timestamp(system_clock::time_point t);

}  // namespace walhook::sql
