#pragma once
// The delivery counters behind /metrics (relay/core/metrics.hpp renders them): what the
// dispatcher (relay/engine/dispatcher.hpp) counts, as plain values. Pure.

#include "delivery/outcome_class.hpp"

#include <array>
#include <cstdint>
#include <map>

namespace walhook::relay {

/// An attempt-duration histogram (seconds).
struct latency_histogram {
  /// Upper bounds of the buckets, seconds (Prometheus `le`).
  static constexpr std::array<double, 11> bounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::array<std::uint64_t, bounds.size() + 1> counts{};  ///< per bucket (not cumulative), last = above 10 s (+Inf)
  double sum_s = 0;
  void observe(double seconds);
  std::uint64_t count() const;
};

/// One endpoint's counters (for the endpoint-labelled series of /metrics). Kept while the
/// endpoint is in the directory: a removed endpoint's counters go with it.
struct endpoint_counters {
  std::array<std::uint64_t, delivery::all_outcome_classes.size()> attempts{};  ///< by delivery::outcome_class
  std::uint64_t delivered = 0;
  std::uint64_t dead = 0;  ///< for any reason: attempts used up, 4xx, payload too large, endpoint removed, …
  std::uint64_t filtered = 0;  ///< events its payload filter kept from it (no delivery)
};

/// Counters for /metrics and tests.
struct dispatcher_stats {
  std::uint64_t attempts = 0;
  std::uint64_t delivered = 0;
  std::uint64_t failed_attempts = 0;
  std::uint64_t deferred = 0;  ///< attempts answered "not yet" (an inbox destination's 409/425)
  std::uint64_t dead = 0;
  std::uint64_t spilled = 0;            ///< deliveries written pending (spilled, failed, paused)
  std::uint64_t merged = 0;             ///< deliveries replaced by a newer one with the same merge key
  std::uint64_t claimed = 0;            ///< persisted deliveries claimed back
  std::uint64_t claims = 0;             ///< claim queries that returned rows
  std::uint64_t marked_sending = 0;     ///< attempts recorded 'sending' after the hold bound
  std::uint64_t disabled_endpoints = 0;
  /// Attempt durations by outcome class (index: delivery::outcome_class); their sum is every attempt's.
  std::array<latency_histogram, delivery::all_outcome_classes.size()> latency{};
  /// Per endpoint in the directory (only those that had an attempt or a delivery ended).
  std::map<std::int64_t, endpoint_counters> endpoints;
  std::uint64_t notifications = 0;      ///< outbox rows walhook published (relay/core/notifications.hpp)
};

}  // namespace walhook::relay
