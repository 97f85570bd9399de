#pragma once
// The backlog controller: which endpoints' work goes through PostgreSQL, how much of it to claim
// back at a time, and when an endpoint leaves backlog mode. Pure: time is a parameter, no I/O;
// the dispatcher asks it and does the claiming (relay/engine/dispatcher.hpp).
//
//   memory ──(a delivery of it is written pending: failed, spilled, paused)──► backlog
//   memory/backlog ──(stalled, or its full queue would wait too long)──► table
//   backlog/table ──(an exit check finds no pending row and none on its way)──► memory
//
// An endpoint that keeps up never leaves memory: when its queue is full, reading the slot waits
// for it (back-pressure) instead of spilling. Claims are sized by the endpoint's capacity (its
// max_concurrency ÷ its mean attempt duration, Little's law), so an endpoint coming back from
// an outage drains its table backlog at its own speed, and a slow one is never handed more
// than it can take in the claim horizon.
//
// Single-threaded.

#include "relay/core/decisions.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace walhook::relay {

using steady_time = std::chrono::steady_clock::time_point;

struct backlog_policy {
  /// A queued delivery may wait this long in memory (max_wait_in_memory); an endpoint whose full
  /// queue would take longer than half of it to drain does not keep up.
  std::chrono::milliseconds wait_bound{1000};
  /// An attempt running longer than this holds the slot too long (max_hold): an endpoint whose
  /// every slot is taken by such attempts is stalled.
  std::chrono::milliseconds hold_bound{250};
  /// Claims fetch this much of the endpoint's capacity.
  std::chrono::milliseconds claim_horizon{500};
  /// Before any attempt of it ended, a claim takes this many rounds of max_concurrency.
  std::size_t first_claim_rounds = 4;
  /// Claims never fill an endpoint's queue beyond this (max_queued_per_endpoint).
  std::size_t max_queued_per_endpoint = 1000;
  /// Rows one claim takes for one endpoint at most (--max-claim).
  std::size_t max_claim = 200;
};

/// An endpoint's memory state, as the scheduler and the in-flight attempts show it.
struct endpoint_load {
  std::size_t queued = 0;
  std::size_t in_flight = 0;
  int max_concurrency = 4;
  std::optional<steady_time> oldest_queued;    ///< enqueue time of its oldest queued delivery
  std::optional<steady_time> youngest_attempt; ///< start of its most recent attempt in flight
  bool probing = false;                        ///< its breaker's pause just ended: one round of probes
};

class backlog_controller {
 public:
  explicit backlog_controller(backlog_policy p = {}) : policy_(p) {}

  // ---- which endpoints have work in PostgreSQL

  /// A pending row of the endpoint was queued for writing…
  void pending_queued(std::int64_t id);
  /// …and is durable now.
  void pending_durable(std::int64_t id);
  /// Look for its pending rows (an operator's replay or resume, stale rows reset, enabled).
  void wake(std::int64_t id) { backlog_.insert(id); }
  /// The endpoint is gone.
  void forget(std::int64_t id);
  /// Session start: these endpoints have rows in walhook.deliveries (plus those with writes on
  /// their way, which stay).
  void reset(const std::vector<std::int64_t>& with_rows);

  bool has_backlog(std::int64_t id) const { return backlog_.contains(id); }
  /// Endpoints in backlog mode (unordered).
  std::vector<std::int64_t> endpoints() const { return {backlog_.begin(), backlog_.end()}; }

  // ---- lanes

  lane lane_of(std::int64_t id) const;
  /// The endpoint cannot keep up: all its new work goes through PostgreSQL until its backlog
  /// drains. True if it was not in the table lane already.
  bool use_table(std::int64_t id);

  // ---- capacity and load

  /// An attempt of the endpoint ended after `duration` (any outcome).
  void attempt_finished(std::int64_t id, std::chrono::steady_clock::duration duration);
  /// Attempts per second the endpoint can take: max_concurrency ÷ its mean attempt duration
  /// (exponentially weighted, 1/8 per attempt). nullopt before its first attempt ended.
  std::optional<double> capacity(std::int64_t id, int max_concurrency) const;

  /// Every slot is taken by an attempt older than hold_bound.
  bool stalled(const endpoint_load& load, steady_time now) const;
  /// Whether reading the slot should wait for this endpoint's full queue (back-pressure): it is
  /// not stalled, and its oldest queued delivery has waited at most wait_bound / 2 (a FIFO
  /// queue's head has waited as long as the queue takes to drain).
  bool keeps_up(const endpoint_load& load, steady_time now) const;
  /// How many due rows to claim for it now: its capacity × claim_horizon (before any attempt
  /// ended: first_claim_rounds × max_concurrency), at least max_concurrency, at most
  /// max_queued_per_endpoint, minus what it holds already — and 0 unless that is at least half
  /// of it (a fast drain is a stream of full claims, not many small ones) — capped at max_claim.
  /// A probing endpoint gets one round of max_concurrency, only while nothing of it is in flight.
  std::size_t claim_size(std::int64_t id, const endpoint_load& load, steady_time now) const;

  // ---- leaving backlog mode without a lost wakeup

  /// Taken before asking PostgreSQL which endpoints still have pending rows.
  struct exit_check {
    std::vector<std::pair<std::int64_t, std::uint64_t>> written;  ///< durable pending rows so far, per endpoint
  };
  exit_check begin_exit_check(const std::vector<std::int64_t>& ids) const;
  /// After the answer: `with_pending` are the endpoints it found rows for. An endpoint leaves
  /// backlog mode (returned) only if it had none, has no pending write on its way, no pending
  /// row became durable while the question ran (it may be missing from the answer), and
  /// `busy(id)` is false (e.g. an aggregate-ordered endpoint with an attempt in flight).
  std::vector<std::int64_t> finish_exit_check(const exit_check& check, const std::vector<std::int64_t>& with_pending,
                                              const std::function<bool(std::int64_t)>& busy = {});

 private:

  backlog_policy policy_;
  std::unordered_set<std::int64_t> backlog_;
  std::unordered_set<std::int64_t> table_;
  std::unordered_map<std::int64_t, std::uint64_t> unwritten_;  ///< pending writes queued, not yet durable
  std::unordered_map<std::int64_t, std::uint64_t> written_;    ///< pending writes durable (a counter)
  std::unordered_map<std::int64_t, double> mean_duration_s_;  ///< EWMA of attempt durations, seconds
};

}  // namespace walhook::relay
