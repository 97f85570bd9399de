#include "relay/metrics.hpp"

#include <fmt/format.h>

namespace walhook::relay {

std::string render_prometheus(const metrics_snapshot& s) {
  std::string out;
  auto header = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n", name, help, type);
  };
  auto counter = [&](const char* name, const char* help, std::uint64_t v) {
    header(name, "counter", help);
    out += fmt::format("{} {}\n", name, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    header(name, "gauge", help);
    out += fmt::format("{} {}\n", name, v);
  };
  const auto& d = s.delivery;
  counter("walhook_events_total", "Outbox rows read from the slot.", s.events);
  counter("walhook_malformed_rows_total", "Outbox rows that could not become events.", s.malformed_rows);
  counter("walhook_attempts_total", "Delivery attempts made.", d.attempts);
  counter("walhook_delivered_total", "Deliveries that got a 2xx.", d.delivered);
  counter("walhook_failed_attempts_total", "Attempts that failed.", d.failed_attempts);
  counter("walhook_dead_total", "Deliveries that ended dead.", d.dead);
  counter("walhook_spilled_total", "Deliveries persisted as pending.", d.spilled);
  counter("walhook_merged_total", "Deliveries replaced by a newer one with the same merge key.", d.merged);
  counter("walhook_claimed_total", "Persisted deliveries claimed back for an attempt.", d.claimed);
  counter("walhook_marked_sending_total",
          "Attempts recorded as 'sending' because they ran past the hold bound (so the slot could move on).",
          d.marked_sending);
  counter("walhook_endpoints_disabled_total", "Endpoints disabled by walhook (410, or failing for days).",
          d.disabled_endpoints);
  counter("walhook_sessions_total", "Replication sessions started.", s.sessions);
  gauge("walhook_queued", "Deliveries waiting in memory.", static_cast<double>(s.queued));
  gauge("walhook_in_flight", "Attempts in flight.", static_cast<double>(s.in_flight));
  gauge("walhook_slow_in_flight",
        "Attempts in flight past the hold bound (slow or hung endpoints; their own pool, --max-slow-in-flight).",
        static_cast<double>(s.parked));
  gauge("walhook_state_store_backlog", "Writes waiting for the state store.", static_cast<double>(s.store_backlog));
  counter("walhook_writes_refused_total",
          "Delivery writes PostgreSQL refused for their data; each delivery ended dead with the reason.",
          s.writes_refused);
  gauge("walhook_event_bytes", "Bytes of events held in memory (budget: --max-queue-bytes).",
        static_cast<double>(s.event_bytes));
  gauge("walhook_streaming", "1 while this instance streams the slot.", s.streaming ? 1.0 : 0.0);
  gauge("walhook_confirmed_lsn", "Flush LSN acknowledged to the slot (byte position).",
        static_cast<double>(s.confirmed.value()));
  gauge("walhook_slot_lag_bytes", "WAL received from the server but not yet acknowledged.",
        static_cast<double>(bytes_between(s.received, s.confirmed)));
  gauge("walhook_slot_lag_seconds", "How long the oldest unacknowledged transaction has waited.", s.lag_seconds);
  counter("walhook_slot_incidents_total",
          "Replication slots found missing or invalidated and created again, with a backfill from the outbox.",
          s.slot_incidents);
  counter("walhook_backfilled_events_total", "Outbox rows delivered again by backfills (slot incidents, walhook recover).",
          s.events_backfilled);
  gauge("walhook_backfills_running", "Backfills fed whose deliveries are not all done yet.",
        static_cast<double>(s.backfills_running));
  // Early warning before PostgreSQL invalidates the slot (max_slot_wal_keep_size) or fills the disk.
  if (s.slot_wal_status) {
    header("walhook_slot_wal_status", "gauge",
           "1 for the slot's wal_status (pg_replication_slots): reserved, extended, unreserved (at risk), lost.");
    for (const char* status : {"reserved", "extended", "unreserved", "lost"})
      out += fmt::format("walhook_slot_wal_status{{status=\"{}\"}} {}\n", status, *s.slot_wal_status == status ? 1 : 0);
  }
  if (s.slot_retained_bytes)
    gauge("walhook_slot_retained_wal_bytes", "WAL PostgreSQL keeps for the slot (restart_lsn to now).",
          static_cast<double>(*s.slot_retained_bytes));
  if (s.slot_safe_wal_size)
    gauge("walhook_slot_safe_wal_size_bytes",
          "WAL that can still be written before the slot is at risk of invalidation (max_slot_wal_keep_size).",
          static_cast<double>(*s.slot_safe_wal_size));

  header("walhook_attempt_duration_seconds", "histogram", "Duration of delivery attempts.");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < dispatcher_stats::latency_buckets.size(); ++i) {
    cumulative += d.latency_counts[i];
    out += fmt::format("walhook_attempt_duration_seconds_bucket{{le=\"{}\"}} {}\n", dispatcher_stats::latency_buckets[i],
                       cumulative);
  }
  cumulative += d.latency_counts.back();
  out += fmt::format("walhook_attempt_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative);
  out += fmt::format("walhook_attempt_duration_seconds_sum {}\nwalhook_attempt_duration_seconds_count {}\n",
                     d.latency_sum_s, cumulative);

  header("walhook_endpoint_queued", "gauge", "Deliveries waiting in memory, per endpoint.");
  for (const auto& e : s.endpoints) out += fmt::format("walhook_endpoint_queued{{endpoint=\"{}\"}} {}\n", e.id, e.queued);
  header("walhook_endpoint_in_flight", "gauge", "Attempts in flight, per endpoint.");
  for (const auto& e : s.endpoints)
    out += fmt::format("walhook_endpoint_in_flight{{endpoint=\"{}\"}} {}\n", e.id, e.in_flight);
  // The alert that catches a customer's pain: how old is the oldest event still waiting for them.
  header("walhook_endpoint_oldest_pending_age_seconds", "gauge",
         "Age of the oldest event not yet delivered to the endpoint (persisted deliveries).");
  for (const auto& e : s.endpoints)
    if (e.oldest_pending_age_s)
      out += fmt::format("walhook_endpoint_oldest_pending_age_seconds{{endpoint=\"{}\"}} {}\n", e.id, *e.oldest_pending_age_s);
  return out;
}

}  // namespace walhook::relay
