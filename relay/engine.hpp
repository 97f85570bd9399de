#pragma once
// The relay engine behind `walhook run`: replication stream → router → scheduler → transport,
// with the state store and the LSN tracker deciding what is durable and what may be
// acknowledged (DESIGN §3). One instance per process, on one io_context thread.
//
// Lifecycle (run()):
//   1. take the slot's advisory lock — or wait as a hot standby, logging who holds it;
//   2. session: reset stale 'sending' rows, load endpoints and breaker state, start streaming
//      at the slot's confirmed LSN, deliver; any failure (PostgreSQL restart, dropped
//      connection, undecodable message) ends the session, and run() starts a new one after a
//      capped backoff — unacknowledged transactions are simply streamed again;
//   3. request_stop() (SIGTERM/SIGINT): stop reading, spill queued deliveries, let in-flight
//      attempts finish within the grace period, persist, send a final status update, return 0.

#include "relay/options.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace walhook::relay {

/// Counters and gauges for /metrics and tests.
struct engine_stats {
  std::uint64_t events = 0;              ///< outbox rows read from the slot
  std::uint64_t malformed_rows = 0;      ///< outbox rows that could not become events
  std::uint64_t attempts = 0;
  std::uint64_t delivered = 0;
  std::uint64_t failed_attempts = 0;
  std::uint64_t dead = 0;
  std::uint64_t spilled = 0;             ///< deliveries persisted as pending
  std::uint64_t merged = 0;              ///< deliveries replaced by a newer one with the same merge key
  std::uint64_t claimed = 0;             ///< persisted deliveries claimed back
  std::uint64_t sessions = 0;
  std::uint64_t disabled_endpoints = 0;
  std::size_t queued = 0;
  std::size_t in_flight = 0;
  std::size_t store_backlog = 0;
  std::string confirmed_lsn;
  bool streaming = false;
};

class engine {
 public:
  engine(boost::asio::any_io_executor ex, run_options options);
  ~engine();

  /// Runs until request_stop(); returns the process exit code.
  boost::asio::awaitable<int> run();
  /// Graceful stop (idempotent).
  void request_stop();

  engine_stats stats() const;
  /// Prometheus text exposition (version 0.0.4): counters, per-endpoint gauges (queued, in
  /// flight, oldest pending age in seconds — read from walhook.deliveries), the attempt latency
  /// histogram, slot lag (bytes, seconds) and the confirmed LSN.
  boost::asio::awaitable<std::string> metrics_text();
  bool streaming() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay
