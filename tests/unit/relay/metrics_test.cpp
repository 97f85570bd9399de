// relay/metrics.hpp: the Prometheus text of a snapshot.

#include "relay/metrics.hpp"

#include <doctest/doctest.h>

using namespace walhook;
using namespace walhook::relay;

TEST_CASE("render_prometheus: counters, gauges, per-endpoint series and a cumulative histogram") {
  metrics_snapshot s;
  s.events = 12;
  s.delivery.delivered = 10;
  s.delivery.marked_sending = 2;
  s.delivery.latency_counts[0] = 3;   // ≤ 5 ms
  s.delivery.latency_counts[4] = 2;   // ≤ 100 ms
  s.delivery.latency_counts.back() = 1;  // > 10 s
  s.delivery.latency_sum_s = 11.5;
  s.streaming = true;
  s.writes_refused = 3;
  s.event_bytes = 1048576;
  s.confirmed = lsn{0x1000};
  s.received = lsn{0x1800};
  s.endpoints = {{1, 5, 2, 30.5}, {2, 0, 0, std::nullopt}};
  s.slot_wal_status = "unreserved";
  s.slot_retained_bytes = 1 << 20;
  s.slot_safe_wal_size = -4096;
  auto text = render_prometheus(s);
  auto has = [&](const std::string& line) {
    CAPTURE(line);
    CHECK(text.find(line + "\n") != std::string::npos);
  };
  has("# TYPE walhook_events_total counter");
  has("walhook_events_total 12");
  has("walhook_delivered_total 10");
  has("walhook_marked_sending_total 2");
  has("walhook_streaming 1");
  has("walhook_writes_refused_total 3");
  has("walhook_event_bytes 1048576");
  has("walhook_slot_wal_status{status=\"reserved\"} 0");
  has("walhook_slot_wal_status{status=\"unreserved\"} 1");
  has("walhook_slot_retained_wal_bytes 1048576");
  has("walhook_slot_safe_wal_size_bytes -4096");
  has("walhook_confirmed_lsn 4096");
  has("walhook_slot_lag_bytes 2048");
  has("walhook_attempt_duration_seconds_bucket{le=\"0.005\"} 3");
  has("walhook_attempt_duration_seconds_bucket{le=\"0.05\"} 3");
  has("walhook_attempt_duration_seconds_bucket{le=\"0.1\"} 5");
  has("walhook_attempt_duration_seconds_bucket{le=\"10\"} 5");
  has("walhook_attempt_duration_seconds_bucket{le=\"+Inf\"} 6");
  has("walhook_attempt_duration_seconds_count 6");
  has("walhook_attempt_duration_seconds_sum 11.5");
  has("walhook_endpoint_queued{endpoint=\"1\"} 5");
  has("walhook_endpoint_in_flight{endpoint=\"1\"} 2");
  has("walhook_endpoint_oldest_pending_age_seconds{endpoint=\"1\"} 30.5");
  CHECK(text.find("walhook_endpoint_oldest_pending_age_seconds{endpoint=\"2\"}") == std::string::npos);
  // Every sample line belongs to a declared metric.
  std::size_t samples = 0, types = 0;
  for (std::size_t i = 0, j; i < text.size(); i = j + 1) {
    j = text.find('\n', i);
    auto line = text.substr(i, j - i);
    if (line.starts_with("# TYPE")) ++types;
    else if (!line.starts_with("#")) ++samples;
  }
  CHECK(types >= 20);
  CHECK(samples > types);
}
