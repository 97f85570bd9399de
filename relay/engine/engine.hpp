#pragma once
// The relay engine behind `walhook run`: it wires the replication stream to the dispatcher
// (relay/engine/dispatcher.hpp) and runs sessions (docs/architecture.md, Data flow). One instance
// per process, on one io_context thread.
//
// Lifecycle (run()):
//   1. take the slot's advisory lock — or wait as a hot standby, logging who holds it
//      (relay/engine/leadership.hpp);
//   2. session: check the shard layout, replace a lost slot (relay/engine/recovery.hpp), reset
//      'sending' rows this process does not own, load endpoints and breaker state, start
//      streaming at the newer of the slot's confirmed LSN and walhook's own record of it, run
//      the backfills of a slot loss, deliver. A session ends when the stream fails (PostgreSQL
//      restart, dropped connection, undecodable message) or the lock's session is gone; its
//      replication connection is closed at once (a walsender left waiting would hold a server
//      shutdown for wal_sender_timeout), and run() starts a new one after a short capped
//      backoff — unacknowledged transactions are simply streamed again;
//   3. request_stop() (SIGTERM/SIGINT): stop reading, spill queued deliveries, let in-flight
//      attempts finish within the grace period, persist, send a final status update, return 0
//      (1 when the database was resharded: a walhook of the old layout must not run).

#include "relay/engine/options.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace walhook::relay {

class outcome_log;

/// What this process knows live, without a database read (the admin API's live fields).
struct live_status {
  std::string instance;                       ///< --instance-name (default host:pid)
  std::string slot;
  bool streaming = false;
  double lag_seconds = 0;                     ///< how long the oldest unacknowledged transaction has waited
  std::optional<std::string> confirmed_lsn;   ///< acknowledged to the slot; none before the first
  std::optional<std::string> slot_wal_status; ///< as last read (every 10 s)
  std::size_t queued = 0;                     ///< deliveries waiting in memory
  std::size_t in_flight = 0;                  ///< attempts running
  struct load {
    std::size_t queued = 0;
    std::size_t in_flight = 0;
    std::string config_error;  ///< why its URL or secret is unusable ("" if usable): deliveries die unattempted
  };
  std::unordered_map<std::int64_t, load> endpoints;  ///< every endpoint this process routes to
};

class engine {
 public:
  engine(boost::asio::any_io_executor ex, run_options options);
  ~engine();

  /// Runs until request_stop(); returns the process exit code.
  boost::asio::awaitable<int> run();
  /// Graceful stop (idempotent).
  void request_stop();

  /// Prometheus text exposition (relay/core/metrics.hpp). While this instance streams the slot, with
  /// the oldest pending age per endpoint read from walhook.deliveries (one query per scrape) and
  /// the slot's WAL retention; otherwise (a standby, or reconnecting) without them, and no query.
  boost::asio::awaitable<std::string> metrics_text();
  /// True while this instance streams the slot.
  bool streaming() const;
  /// While a standby waits: who holds the slot's leadership lock, if that is not a walhook
  /// instance (relay/engine/leadership.hpp); std::nullopt otherwise.
  std::optional<std::string> leader_lock_foreign() const;
  /// The slot's wal_status (pg_replication_slots) as last read, if it is at risk (extended or
  /// unreserved); std::nullopt otherwise.
  std::optional<std::string> slot_at_risk() const;
  /// The live fields of the admin API. Engine's executor only.
  live_status live() const;
  /// The in-memory record of finished attempts. Engine's executor only.
  const outcome_log& recent_outcomes() const;
  /// The options it runs with (the admin API connects with database_url).
  const run_options& options() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace walhook::relay
