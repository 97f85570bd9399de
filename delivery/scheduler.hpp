#pragma once
// The fair scheduler: one in-memory FIFO queue per endpoint, a concurrency cap per endpoint
// (endpoints.max_concurrency) and a process-wide in-flight cap, and endpoints with ready work
// served round-robin — so the first delivery of every endpoint goes before the second of any,
// and one slow endpoint can only ever occupy its own slots (docs/architecture.md, Invariants, 4).
//
// The process-wide cap is two pools. max_in_flight bounds attempts that are young (or of
// endpoints that answer in time); an attempt that runs past the hold bound is *parked* (park())
// and counts against max_slow_in_flight instead. Slow and hung endpoints therefore cannot take
// the slots healthy ones need: with 200 of 2,000 endpoints slow or hung, one shared cap of 64
// made healthy endpoints wait 16 s at the median (bench endpoint-scale). When the slow pool is
// full, endpoints with a parked attempt start nothing new until one ends.
//
// Pure: no clock, no I/O. Callers pass time in and act on what it returns (start an attempt,
// spill a job to PostgreSQL). Single-threaded.

#include "delivery/job.hpp"
#include "delivery/rate_limit.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace walhook::delivery {

struct scheduler_limits {
  std::size_t max_in_flight = 256;              ///< attempts in flight, whole process, not counting parked ones
  std::size_t max_slow_in_flight = 1024;        ///< parked attempts (past the hold bound), whole process
  std::size_t max_queued_per_endpoint = 1000;   ///< jobs waiting in memory per endpoint
  std::size_t max_queued_total = 10000;         ///< jobs waiting in memory, whole process
};

class scheduler {
 public:
  explicit scheduler(scheduler_limits limits = {}) : limits_(limits) {}

  /// Creates or updates an endpoint's slot settings. `aggregate_ordering`: at most one attempt
  /// in flight per aggregate_id (endpoints.ordering = 'aggregate').
  /// `limit` (walhook.endpoints.max_rate, rate_burst): attempts start at most at that rate
  /// (delivery/rate_limit.hpp); a changed limit starts afresh, an unchanged one keeps its log.
  void configure(std::int64_t endpoint_id, int max_concurrency, bool aggregate_ordering,
                 std::optional<rate> limit = std::nullopt, int burst = 0);

  enum class push_status {
    queued,    ///< waiting in memory
    merged,    ///< replaced a queued job with the same merge key; `replaced` holds it
    full,      ///< over a memory cap: not queued, the caller spills it
  };
  struct push_result {
    push_status status;
    std::optional<job> replaced;  ///< the superseded job (merged) or the rejected job (full)
  };

  /// Queues a job for its endpoint (configure() must have been called). A job with a merge key
  /// replaces a queued — not in-flight, not persisted — job with the same (endpoint, merge key),
  /// keeping its place in the queue.
  push_result push(job j);

  /// The next job that may start at `now`, round-robin over endpoints, or nullopt. The job
  /// counts as in flight until finished(). An endpoint over its rate limit is skipped until
  /// next_rate_release(); its jobs wait in its queue (and spill like a slow endpoint's).
  std::optional<job> next(std::chrono::steady_clock::time_point now = {});
  /// When an endpoint held back by its rate limit may start again (the caller calls next()
  /// then), or nullopt if none is held.
  std::optional<std::chrono::steady_clock::time_point> next_rate_release() const;
  /// The endpoint pushed back (429, Retry-After): its rate limit, if it has one, is halved for a minute.
  void slow_down(std::int64_t endpoint_id, std::chrono::steady_clock::time_point now);

  /// Ends an attempt started by next(), freeing its slots.
  void finished(const job& j);
  /// The attempt of `j` (started by next()) runs past the hold bound: from now on it counts
  /// against max_slow_in_flight, so a young attempt can start in its place. Sets j.parked.
  void park(job& j);
  std::size_t parked_total() const { return parked_total_; }

  /// Removes and returns queued jobs that still hold an LSN ticket of the stream and were queued
  /// before `cutoff` (they are spilled so the slot can move on; a job read back by an outbox
  /// cursor holds no position of the slot and stays) — but not those of an endpoint that
  /// waits for walhook rather than for itself: while max_in_flight young attempts run, an
  /// endpoint with free slots of its own (no parked attempt, no aggregate order) keeps its jobs.
  /// Saturation of walhook is back-pressure on reading, never a reason to spill (issue 18: 500
  /// healthy endpoints, 10,000 deliveries wrote 6,818-9,946 rows).
  std::vector<job> take_waiting_since(std::chrono::steady_clock::time_point cutoff);

  /// Removes and returns the queued jobs of one endpoint that still hold an LSN ticket (it is
  /// stalled: they go to PostgreSQL so the slot can move on).
  std::vector<job> take_holding(std::int64_t endpoint_id);

  /// Removes and returns the queued jobs of one endpoint read back by its outbox cursor
  /// (job::drained) from outbox rows after `seq`: one of the window went back to the cursor,
  /// which reads from it again — sent now, these would be sent twice.
  std::vector<job> take_drained_after(std::int64_t endpoint_id, std::int64_t seq);

  /// Removes and returns every queued job of an endpoint (paused, disabled or removed).
  std::vector<job> drain(std::int64_t endpoint_id);
  /// Removes and returns every queued job (shutdown).
  std::vector<job> drain_all();

  /// How many more jobs the endpoint could start at once: max_concurrency − in flight − queued,
  /// at least 0. Used to size claims of persisted work.
  std::size_t free_slots(std::int64_t endpoint_id) const;
  std::size_t free_global_slots() const;

  /// The endpoint's queued jobs wait for walhook, not for the endpoint: the process-wide caps
  /// keep next() from starting anything, and the endpoint has free slots of its own (no parked attempt, no aggregate
  /// order that could hold it back). Its queue's age then says nothing about the endpoint.
  bool waits_for_walhook(std::int64_t endpoint_id) const;
  std::size_t queued(std::int64_t endpoint_id) const;
  /// When the job at the head of the endpoint's queue was queued (nullopt if empty).
  std::optional<std::chrono::steady_clock::time_point> oldest_enqueued(std::int64_t endpoint_id) const;
  /// Endpoints whose queue holds max_queued_per_endpoint jobs or more.
  const std::unordered_set<std::int64_t>& full_endpoints() const { return full_; }
  std::size_t in_flight(std::int64_t endpoint_id) const;
  std::size_t queued_total() const { return queued_total_; }
  std::size_t in_flight_total() const { return in_flight_total_; }
  bool over_memory_cap() const { return queued_total_ >= limits_.max_queued_total; }
  const scheduler_limits& limits() const { return limits_; }

 private:
  struct endpoint_queue {
    std::int64_t id = 0;
    int max_concurrency = 4;
    bool aggregate_ordering = false;
    std::list<job> jobs;
    std::unordered_map<std::string, std::list<job>::iterator> by_merge_key;
    std::unordered_multiset<std::string> aggregates_in_flight;
    std::size_t in_flight = 0;
    std::size_t parked = 0;  ///< of in_flight
    bool in_ring = false;
    std::optional<rate_limiter> limiter;
    /// Held back by the limiter until then (not in the ring meanwhile).
    std::optional<std::chrono::steady_clock::time_point> rate_wait;
  };

  bool can_start(const endpoint_queue& q) const;
  bool waits_for_walhook(const endpoint_queue& q) const;
  /// The process-wide caps keep anything from starting: max_in_flight young attempts, or
  /// max_in_flight + max_slow_in_flight in all.
  bool pools_full() const;
  std::list<job>::iterator startable(endpoint_queue& q);
  void make_ready(std::int64_t id, endpoint_queue& q);
  job take(endpoint_queue& q, std::list<job>::iterator it);

  scheduler_limits limits_;
  std::unordered_map<std::int64_t, endpoint_queue> endpoints_;
  std::deque<std::int64_t> ring_;  ///< endpoints that may have startable work, round-robin order
  std::unordered_set<std::int64_t> rate_held_;  ///< endpoints with a rate_wait
  std::unordered_set<std::int64_t> full_;
  std::size_t queued_total_ = 0;
  std::size_t in_flight_total_ = 0;
  std::size_t parked_total_ = 0;  ///< of in_flight_total_
};

}  // namespace walhook::delivery
