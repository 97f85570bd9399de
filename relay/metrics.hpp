#pragma once
// /metrics: what the engine exposes, as a value, and its Prometheus text exposition (format
// 0.0.4). Pure: the engine gathers a snapshot, render_prometheus() prints it.

#include "common/lsn.hpp"
#include "relay/dispatcher.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace walhook::relay {

struct endpoint_metrics {
  std::int64_t id = 0;
  std::size_t queued = 0;
  std::size_t in_flight = 0;
  std::optional<double> oldest_pending_age_s;  ///< of its persisted deliveries (walhook.deliveries)
};

struct metrics_snapshot {
  std::uint64_t events = 0;          ///< outbox rows read from the slot
  std::uint64_t malformed_rows = 0;  ///< outbox rows that could not become events
  std::uint64_t sessions = 0;        ///< replication sessions started
  dispatcher_stats delivery;
  std::size_t queued = 0;
  std::size_t in_flight = 0;
  std::size_t parked = 0;            ///< of in_flight: attempts past the hold bound (the slow pool)
  std::size_t store_backlog = 0;     ///< writes waiting for the state store
  std::uint64_t writes_refused = 0;  ///< delivery writes PostgreSQL refused for their data (written dead instead)
  std::size_t event_bytes = 0;       ///< bytes of events in memory (the --max-queue-bytes budget)
  bool streaming = false;
  lsn confirmed;                     ///< flush LSN acknowledged to the slot
  lsn received;                      ///< highest WAL position received
  double lag_seconds = 0;            ///< how long the oldest unacknowledged transaction has waited
  std::uint64_t slot_incidents = 0;     ///< slots found missing or invalidated and replaced (relay/recovery.hpp)
  std::uint64_t events_backfilled = 0;  ///< outbox rows fed by backfills (slot incidents, walhook recover)
  std::size_t backfills_running = 0;    ///< backfills fed whose deliveries are not all done
  std::vector<endpoint_metrics> endpoints;  ///< sorted by id
  /// The slot's WAL retention (pg_replication_slots), if it could be read.
  std::optional<std::string> slot_wal_status;  ///< reserved | extended | unreserved | lost
  std::optional<std::int64_t> slot_safe_wal_size;
  std::optional<std::int64_t> slot_retained_bytes;
};

/// The snapshot in Prometheus text format: walhook_* counters and gauges, per-endpoint gauges
/// labelled endpoint="<id>", and the attempt-duration histogram (seconds).
std::string render_prometheus(const metrics_snapshot& s);

}  // namespace walhook::relay
