#pragma once
// /metrics: what the engine exposes, as a value, and its Prometheus text exposition (format
// 0.0.4). Pure: the engine gathers a snapshot, render_prometheus() prints it; the process
// metrics are read from /proc/self by read_process_metrics(), parsed by parse_proc_stat().
//
// Cardinality: the endpoint-labelled series are bounded by the endpoints in this instance's
// directory (a removed endpoint's series go with it); endpoint × outcome by the classes an
// endpoint has seen (at most 13, delivery/outcome_class.hpp); the attempt-duration histogram is
// labelled by outcome class only (13 × 13 series at most), never by endpoint.

#include "common/lsn.hpp"
#include "delivery/breaker.hpp"
#include "relay/core/stats.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay {

struct endpoint_metrics {
  std::int64_t id = 0;
  std::size_t queued = 0;
  std::size_t in_flight = 0;
  std::optional<double> oldest_pending_age_s;  ///< of its persisted deliveries (walhook.deliveries); leader only
  endpoint_counters counters;                  ///< this process's attempts by outcome, delivered, dead
  /// Following the outbox by cursor (relay/engine/cursors.hpp): seconds since the position it
  /// has covered was current, and deliveries read back for it this session. Absent: on the stream.
  std::optional<double> cursor_lag_s;
  std::uint64_t cursor_drained = 0;
  /// The sink its URL picks (delivery/destination.hpp): "http", "nats", "amqp"; the `sink`
  /// label of walhook_endpoint_attempts_total.
  std::string_view sink = "http";
  /// Its state as the instance that streams the slot follows it (absent on a standby, whose
  /// directory is not current): "active", "paused" (by an operator), "paused_by_breaker" (the
  /// circuit breaker holds it: paused_until in the future), "disabled"; and its failed attempts
  /// in a row (the breaker's count).
  std::optional<std::string_view> status = std::nullopt;
  int consecutive_failures = 0;
};

struct endpoint;
/// The sink label of an endpoint: its URL's kind; "http" for none or an unusable URL.
std::string_view sink_label(const endpoint* ep);
/// Sets m.status and m.consecutive_failures from the endpoint (nothing if null) and its breaker's
/// state at `now`: disabled, paused (the operator's), paused_by_breaker (paused_until > now), or
/// active. Pure.
void set_endpoint_state(endpoint_metrics& m, const endpoint* ep, const delivery::breaker_state& health,
                        std::chrono::system_clock::time_point now);

/// The standard process metrics (Prometheus client libraries' `process_*`, Linux /proc/self).
struct process_metrics {
  double cpu_seconds = 0;           ///< user + system CPU time (utime + stime)
  double resident_bytes = 0;        ///< resident set size (rss pages × page size)
  double virtual_bytes = 0;         ///< virtual memory size (vsize)
  double start_time_seconds = 0;    ///< process start, seconds since the Unix epoch
  std::optional<double> open_fds;   ///< entries of /proc/self/fd
  std::optional<double> max_fds;    ///< RLIMIT_NOFILE's soft limit (absent if unlimited)
};

/// Parses /proc/<pid>/stat (proc(5): fields 14 utime, 15 stime, 22 starttime in clock ticks
/// since boot, 23 vsize in bytes, 24 rss in pages; the command in field 2 may hold spaces and
/// parentheses, so fields are counted after its last ')'). `boot_time_s` is /proc/stat's btime.
/// std::nullopt if the text is truncated or a field is not a number.
std::optional<process_metrics> parse_proc_stat(std::string_view stat, long ticks_per_second, long page_size,
                                               double boot_time_s);

/// The value of a Prometheus label, escaped for the text format: `\` → `\\`, `"` → `\"`,
/// newline → `\n` (Prometheus "Exposition formats", text format).
std::string escape_label_value(std::string_view v);

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
  bool leader_lock_foreign = false;  ///< a standby found the leadership lock held by a non-walhook session
  lsn confirmed;                     ///< flush LSN acknowledged to the slot
  lsn received;                      ///< highest WAL position received
  double lag_seconds = 0;            ///< how long the oldest unacknowledged transaction has waited
  std::uint64_t slot_incidents = 0;     ///< slots found missing or invalidated and replaced (relay/engine/recovery.hpp)
  std::uint64_t events_backfilled = 0;  ///< outbox rows fed by backfills (slot incidents, walhook recover)
  std::size_t backfills_running = 0;    ///< backfills fed whose deliveries are not all done
  /// Outbox cursors (relay/engine/cursors.hpp): endpoints that left the stream and came back,
  /// stream deliveries skipped for them, deliveries read back, pages read, cursor rows written.
  std::uint64_t cursor_entered = 0, cursor_rejoined = 0, cursor_skipped = 0, cursor_drained = 0, cursor_windows = 0,
                cursor_writes = 0, cursor_given_up_events = 0;
  std::vector<endpoint_metrics> endpoints;  ///< sorted by id
  /// The slot's WAL retention (pg_replication_slots), if it could be read.
  std::optional<std::string> slot_wal_status;  ///< reserved | extended | unreserved | lost
  std::optional<std::int64_t> slot_safe_wal_size;
  std::optional<std::int64_t> slot_retained_bytes;
  std::string version;                       ///< walhook_build_info{version}
  std::string commit;                        ///< walhook_build_info{commit}: git short SHA, or "unknown"
  std::optional<process_metrics> process;
};

/// The snapshot in Prometheus text format: walhook_* counters and gauges; per-endpoint series
/// labelled endpoint="<id>" (walhook_endpoint_attempts_total also outcome="<class>", only once
/// non-zero); the attempt-duration histogram (seconds) labelled outcome="<class>", only for the
/// classes seen; walhook_build_info; process_*. Each family's HELP and TYPE once, its samples
/// after them. The DB-derived series (oldest pending age, the slot's WAL) are in the snapshot
/// only while this instance streams the slot (the engine leaves them empty otherwise); the
/// oldest-pending family is printed only while `streaming`.
std::string render_prometheus(const metrics_snapshot& s);

}  // namespace walhook::relay
