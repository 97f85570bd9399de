#include "relay/core/metrics.hpp"

#include "relay/core/rows.hpp"

#include <fmt/format.h>

#include <charconv>

namespace walhook::relay {

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::optional<process_metrics> parse_proc_stat(std::string_view stat, long ticks_per_second, long page_size,
                                               double boot_time_s) {
  auto close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  // Fields from 3 (state) on, space-separated.
  std::vector<std::string_view> fields;
  for (std::size_t i = close + 1; i < stat.size();) {
    while (i < stat.size() && (stat[i] == ' ' || stat[i] == '\n')) ++i;
    std::size_t j = i;
    while (j < stat.size() && stat[j] != ' ' && stat[j] != '\n') ++j;
    if (j > i) fields.push_back(stat.substr(i, j - i));
    i = j;
  }
  auto field = [&](int n) -> std::optional<double> {  // n: proc(5)'s 1-based field number
    auto at = static_cast<std::size_t>(n - 3);
    if (at >= fields.size()) return std::nullopt;
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(fields[at].data(), fields[at].data() + fields[at].size(), v);
    if (ec != std::errc{} || end != fields[at].data() + fields[at].size()) return std::nullopt;
    return static_cast<double>(v);
  };
  auto utime = field(14), stime = field(15), start = field(22), vsize = field(23), rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  const auto ticks = static_cast<double>(ticks_per_second);
  process_metrics m;
  m.cpu_seconds = (*utime + *stime) / ticks;
  m.resident_bytes = *rss * static_cast<double>(page_size);
  m.virtual_bytes = *vsize;
  m.start_time_seconds = boot_time_s + *start / ticks;
  return m;
}

namespace {

/// The text being written, with the one-sample families' shapes: each family's HELP and TYPE
/// once, its samples after them.
struct exposition {
  std::string out;
  void header(const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n", name, help, type);
  }
  void counter(const char* name, const char* help, std::uint64_t v) {
    header(name, "counter", help);
    out += fmt::format("{} {}\n", name, v);
  }
  void gauge(const char* name, const char* help, double v) {
    header(name, "gauge", help);
    out += fmt::format("{} {}\n", name, v);
  }
  /// A counter whose value is not a whole number (CPU seconds).
  void counter_d(const char* name, const char* help, double v) {
    header(name, "counter", help);
    out += fmt::format("{} {}\n", name, v);
  }
};

/// The dispatcher's counters, the engine's queues and the stream: walhook_events_total …
/// walhook_streaming.
void delivery_families(exposition& x, const metrics_snapshot& s) {
  const auto& d = s.delivery;
  x.counter("walhook_events_total", "Outbox rows read from the slot.", s.events);
  x.counter("walhook_malformed_rows_total", "Outbox rows that could not become events.", s.malformed_rows);
  x.counter("walhook_attempts_total", "Delivery attempts made.", d.attempts);
  x.counter("walhook_delivered_total", "Deliveries that got a 2xx.", d.delivered);
  x.counter("walhook_failed_attempts_total", "Attempts that failed.", d.failed_attempts);
  x.counter("walhook_deferred_total", "Attempts answered \"not yet\" (an inbox destination's defer status).", d.deferred);
  x.counter("walhook_dead_total", "Deliveries that ended dead.", d.dead);
  x.counter("walhook_spilled_total", "Deliveries persisted as pending.", d.spilled);
  x.counter("walhook_merged_total", "Deliveries replaced by a newer one with the same merge key.", d.merged);
  x.counter("walhook_claimed_total", "Persisted deliveries claimed back for an attempt.", d.claimed);
  x.counter("walhook_marked_sending_total",
            "Attempts recorded as 'sending' because they ran past the hold bound (so the slot could move on).",
            d.marked_sending);
  x.counter("walhook_endpoints_disabled_total", "Endpoints disabled by walhook (410, or failing for days).",
            d.disabled_endpoints);
  x.counter("walhook_sessions_total", "Replication sessions started.", s.sessions);
  x.gauge("walhook_queued", "Deliveries waiting in memory.", static_cast<double>(s.queued));
  x.gauge("walhook_in_flight", "Attempts in flight.", static_cast<double>(s.in_flight));
  x.gauge("walhook_slow_in_flight",
          "Attempts in flight past the hold bound (slow or hung endpoints; their own pool, --max-slow-in-flight).",
          static_cast<double>(s.parked));
  x.gauge("walhook_state_store_backlog", "Writes waiting for the state store.", static_cast<double>(s.store_backlog));
  x.counter("walhook_writes_refused_total",
            "Delivery writes PostgreSQL refused for their data; each delivery ended dead with the reason.",
            s.writes_refused);
  x.gauge("walhook_event_bytes", "Bytes of events held in memory (budget: --max-queue-bytes).",
          static_cast<double>(s.event_bytes));
  x.gauge("walhook_streaming",
          "1 while this instance streams the slot (the leader). A standby (0) exports its own counters, build and "
          "process metrics, but not the series read from the database (oldest pending age, the slot's WAL): scrape "
          "both instances.",
          s.streaming ? 1.0 : 0.0);
  x.gauge("walhook_leader_lock_foreign",
          "1 while the slot's leadership lock is held by a session that is not a walhook instance (another role or "
          "application name): nothing is delivered until it ends. See /readyz and the log event leader.lock_foreign.",
          s.leader_lock_foreign ? 1.0 : 0.0);
}

/// The slot: acknowledged position, lag, incidents and backfills, WAL retention.
void slot_families(exposition& x, const metrics_snapshot& s) {
  x.gauge("walhook_confirmed_lsn", "Flush LSN acknowledged to the slot (byte position).",
          static_cast<double>(s.confirmed.value()));
  x.gauge("walhook_slot_lag_bytes", "WAL received from the server but not yet acknowledged.",
          static_cast<double>(bytes_between(s.received, s.confirmed)));
  x.gauge("walhook_slot_lag_seconds", "How long the oldest unacknowledged transaction has waited.", s.lag_seconds);
  x.counter("walhook_slot_incidents_total",
            "Replication slots found missing or invalidated and created again, with a backfill from the outbox.",
            s.slot_incidents);
  x.counter("walhook_backfilled_events_total", "Outbox rows delivered again by backfills (slot incidents, walhook recover).",
            s.events_backfilled);
  x.gauge("walhook_backfills_running", "Backfills fed whose deliveries are not all done yet.",
          static_cast<double>(s.backfills_running));
  x.counter("walhook_cursor_entered_total",
            "Endpoints that left the stream to follow the outbox by cursor (down, paused, disabled, too slow).",
            s.cursor_entered);
  x.counter("walhook_cursor_rejoined_total", "Endpoints whose cursor caught up and that follow the stream again.",
            s.cursor_rejoined);
  x.counter("walhook_cursor_skipped_total",
            "Stream deliveries skipped for endpoints that follow the outbox (owed by their cursor, no row written).",
            s.cursor_skipped);
  x.counter("walhook_cursor_drained_total", "Deliveries read back from walhook.outbox by cursors.", s.cursor_drained);
  x.counter("walhook_cursor_windows_total", "Pages of walhook.outbox read by cursors.", s.cursor_windows);
  x.counter("walhook_cursor_writes_total", "Cursor rows written (walhook.endpoint_cursors).", s.cursor_writes);
  x.counter("walhook_cursor_given_up_events_total",
            "Outbox rows ended dead as ranges (walhook.dead_ranges) by cursors past --give-up-after-h.",
            s.cursor_given_up_events);
  // Early warning before PostgreSQL invalidates the slot (max_slot_wal_keep_size) or fills the disk.
  if (s.slot_wal_status) {
    x.header("walhook_slot_wal_status", "gauge",
             "1 for the slot's wal_status (pg_replication_slots): reserved, extended, unreserved (at risk), lost.");
    for (const char* status : {"reserved", "extended", "unreserved", "lost"})
      x.out += fmt::format("walhook_slot_wal_status{{status=\"{}\"}} {}\n", status, *s.slot_wal_status == status ? 1 : 0);
  }
  if (s.slot_retained_bytes)
    x.gauge("walhook_slot_retained_wal_bytes", "WAL PostgreSQL keeps for the slot (restart_lsn to now).",
            static_cast<double>(*s.slot_retained_bytes));
  if (s.slot_safe_wal_size)
    x.gauge("walhook_slot_safe_wal_size_bytes",
            "WAL that can still be written before the slot is at risk of invalidation (max_slot_wal_keep_size).",
            static_cast<double>(*s.slot_safe_wal_size));
}

/// walhook_attempt_duration_seconds: one histogram per outcome class seen.
void attempt_duration_family(exposition& x, const dispatcher_stats& d) {
  x.header("walhook_attempt_duration_seconds", "histogram",
           "Duration of delivery attempts, by outcome class (2xx, 3xx, 4xx, 5xx, timeout, connect, tls, ssrf, dns, "
           "network, protocol, cancelled, other; only the classes seen). Not by endpoint: at most 13 series sets. "
           "All attempts: sum without (outcome).");
  for (auto cls : delivery::all_outcome_classes) {
    const auto& h = d.latency[static_cast<std::size_t>(cls)];
    const auto count = h.count();
    if (count == 0) continue;
    const auto outcome = delivery::to_string(cls);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < latency_histogram::bounds.size(); ++i) {
      cumulative += h.counts[i];
      x.out += fmt::format("walhook_attempt_duration_seconds_bucket{{outcome=\"{}\",le=\"{}\"}} {}\n", outcome,
                           latency_histogram::bounds[i], cumulative);
    }
    x.out += fmt::format("walhook_attempt_duration_seconds_bucket{{outcome=\"{}\",le=\"+Inf\"}} {}\n", outcome, count);
    x.out += fmt::format("walhook_attempt_duration_seconds_sum{{outcome=\"{0}\"}} {1}\n"
                         "walhook_attempt_duration_seconds_count{{outcome=\"{0}\"}} {2}\n",
                         outcome, h.sum_s, count);
  }
}

/// The endpoint-labelled families (walhook_endpoint_*).
void endpoint_families(exposition& x, const metrics_snapshot& s) {
  x.header("walhook_endpoint_queued", "gauge", "Deliveries waiting in memory, per endpoint.");
  for (const auto& e : s.endpoints) x.out += fmt::format("walhook_endpoint_queued{{endpoint=\"{}\"}} {}\n", e.id, e.queued);
  x.header("walhook_endpoint_in_flight", "gauge", "Attempts in flight, per endpoint.");
  for (const auto& e : s.endpoints)
    x.out += fmt::format("walhook_endpoint_in_flight{{endpoint=\"{}\"}} {}\n", e.id, e.in_flight);
  // Counted by this process since it started (a standby's are its own: scrape both instances).
  x.header("walhook_endpoint_attempts_total", "counter",
           "Delivery attempts by this process, per endpoint (with its sink: http, nats, amqp) and outcome class "
           "(2xx, 3xx, 4xx, 5xx, timeout, connect, tls, ssrf, dns, network, protocol, cancelled, broker, blocked, "
           "other; a broker's confirmation counts as 2xx). A series appears once non-zero: at most endpoints x 15 "
           "classes; a removed endpoint's series go.");
  for (const auto& e : s.endpoints)
    for (auto cls : delivery::all_outcome_classes)
      if (auto n = e.counters.attempts[static_cast<std::size_t>(cls)])
        x.out += fmt::format("walhook_endpoint_attempts_total{{endpoint=\"{}\",sink=\"{}\",outcome=\"{}\"}} {}\n",
                             e.id, e.sink, delivery::to_string(cls), n);
  x.header("walhook_endpoint_delivered_total", "counter", "Deliveries that got a 2xx, per endpoint.");
  for (const auto& e : s.endpoints)
    x.out += fmt::format("walhook_endpoint_delivered_total{{endpoint=\"{}\"}} {}\n", e.id, e.counters.delivered);
  x.header("walhook_endpoint_filtered_total", "counter",
           "Events of the endpoint's tenant and types that its payload filter kept from it (not deliveries), per "
           "endpoint with a filter.");
  for (const auto& e : s.endpoints)
    if (e.counters.filtered)
      x.out += fmt::format("walhook_endpoint_filtered_total{{endpoint=\"{}\"}} {}\n", e.id, e.counters.filtered);
  x.header("walhook_endpoint_cursor_lag_seconds", "gauge",
           "Endpoints that follow the outbox by cursor: seconds since the position their cursor covers was current.");
  for (const auto& e : s.endpoints)
    if (e.cursor_lag_s) x.out += fmt::format("walhook_endpoint_cursor_lag_seconds{{endpoint=\"{}\"}} {}\n", e.id, *e.cursor_lag_s);
  x.header("walhook_endpoint_drained_total", "counter",
           "Deliveries read back from walhook.outbox for the endpoint by its cursor, this session.");
  for (const auto& e : s.endpoints)
    if (e.cursor_lag_s) x.out += fmt::format("walhook_endpoint_drained_total{{endpoint=\"{}\"}} {}\n", e.id, e.cursor_drained);
  x.header("walhook_endpoint_dead_total", "counter",
           "Deliveries that ended dead, per endpoint, for any reason (attempts or time used up, a 4xx, payload too "
           "large, endpoint removed, ...).");
  for (const auto& e : s.endpoints)
    x.out += fmt::format("walhook_endpoint_dead_total{{endpoint=\"{}\"}} {}\n", e.id, e.counters.dead);
  // The endpoint's state, one series with the current status (an alert on paused_by_breaker or
  // disabled needs no join), and its failures in a row; the leader's only, as below.
  x.header("walhook_endpoint_status", "gauge",
           "1, labelled with the endpoint's status: active, paused (by an operator), paused_by_breaker, disabled. "
           "Only the instance that streams the slot exports it.");
  for (const auto& e : s.endpoints)
    if (e.status) x.out += fmt::format("walhook_endpoint_status{{endpoint=\"{}\",status=\"{}\"}} 1\n", e.id, *e.status);
  x.header("walhook_endpoint_consecutive_failures", "gauge",
           "Failed attempts in a row, per endpoint (the circuit breaker's count; 0 after a success). Only the "
           "instance that streams the slot exports it.");
  for (const auto& e : s.endpoints)
    if (e.status)
      x.out += fmt::format("walhook_endpoint_consecutive_failures{{endpoint=\"{}\"}} {}\n", e.id, e.consecutive_failures);
  // The alert that catches a customer's pain: how old is the oldest event still waiting for them.
  // Read from the database, so only the leader exports it (a standby would repeat the leader's).
  if (s.streaming) {
    x.header("walhook_endpoint_oldest_pending_age_seconds", "gauge",
             "Age of the oldest event not yet delivered to the endpoint (persisted deliveries). Only the instance "
             "that streams the slot exports it.");
    for (const auto& e : s.endpoints)
      if (e.oldest_pending_age_s)
        x.out += fmt::format("walhook_endpoint_oldest_pending_age_seconds{{endpoint=\"{}\"}} {}\n", e.id,
                             *e.oldest_pending_age_s);
  }
}

/// walhook_build_info and the standard process_* metrics.
void build_and_process_families(exposition& x, const metrics_snapshot& s) {
  x.header("walhook_build_info", "gauge", "Always 1; the labels say which walhook this is (version, git commit).");
  x.out += fmt::format("walhook_build_info{{version=\"{}\",commit=\"{}\"}} 1\n", escape_label_value(s.version),
                       escape_label_value(s.commit));
  if (const auto& p = s.process) {
    x.counter_d("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", p->cpu_seconds);
    x.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", p->resident_bytes);
    x.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", p->virtual_bytes);
    x.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
            p->start_time_seconds);
    if (p->open_fds) x.gauge("process_open_fds", "Number of open file descriptors.", *p->open_fds);
    if (p->max_fds) x.gauge("process_max_fds", "Maximum number of open file descriptors.", *p->max_fds);
  }
}

}  // namespace

std::string render_prometheus(const metrics_snapshot& s) {
  exposition x;
  delivery_families(x, s);
  slot_families(x, s);
  attempt_duration_family(x, s.delivery);
  endpoint_families(x, s);
  build_and_process_families(x, s);
  return std::move(x.out);
}

std::string_view sink_label(const endpoint* ep) {
  return ep && ep->target ? delivery::to_string(ep->target->kind) : std::string_view("http");
}

void set_endpoint_state(endpoint_metrics& m, const endpoint* ep, const delivery::breaker_state& health,
                        std::chrono::system_clock::time_point now) {
  if (!ep) return;
  const bool breaker = health.paused_until && *health.paused_until > now;
  m.status = ep->status == endpoint_status::disabled ? "disabled"
             : ep->status == endpoint_status::paused ? "paused"
             : breaker                                ? "paused_by_breaker"
                                                      : "active";
  m.consecutive_failures = health.consecutive_failures;
}

}  // namespace walhook::relay
