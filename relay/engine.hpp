#pragma once
// The relay engine behind `walhook run`: it wires the replication stream to the dispatcher
// (relay/dispatcher.hpp) and runs sessions (docs/architecture.md, Data flow). One instance per process, on one
// io_context thread.
//
// Lifecycle (run()):
//   1. take the slot's advisory lock — or wait as a hot standby, logging who holds it
//      (relay/leadership.hpp);
//   2. session: reset 'sending' rows this process does not own, load endpoints and breaker
//      state, start streaming at the newer of the slot's confirmed LSN and walhook's own record
//      of it, deliver. A session ends when the stream fails (PostgreSQL restart, dropped
//      connection, undecodable message) or the lock's session is gone; its replication
//      connection is closed at once (a walsender left waiting would hold a server shutdown for
//      wal_sender_timeout), and run() starts a new one after a short capped backoff —
//      unacknowledged transactions are simply streamed again;
//   3. request_stop() (SIGTERM/SIGINT): stop reading, spill queued deliveries, let in-flight
//      attempts finish within the grace period, persist, send a final status update, return 0.

#include "relay/options.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <memory>
#include <optional>
#include <string>

namespace walhook::relay {

class engine {
 public:
  engine(boost::asio::any_io_executor ex, run_options options);
  ~engine();

  /// Runs until request_stop(); returns the process exit code.
  boost::asio::awaitable<int> run();
  /// Graceful stop (idempotent).
  void request_stop();

  /// Prometheus text exposition (relay/metrics.hpp). While this instance streams the slot, with
  /// the oldest pending age per endpoint read from walhook.deliveries (one query per scrape) and
  /// the slot's WAL retention; otherwise (a standby, or reconnecting) without them, and no query.
  boost::asio::awaitable<std::string> metrics_text();
  /// True while this instance streams the slot.
  bool streaming() const;
  /// The slot's wal_status (pg_replication_slots) as last read, if it is at risk (extended or
  /// unreserved); std::nullopt otherwise.
  std::optional<std::string> slot_at_risk() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace walhook::relay
