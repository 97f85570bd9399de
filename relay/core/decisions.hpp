#pragma once
// The engine's decisions as pure functions (STYLE: "a pure core returns the caller's action"):
// what to do with a delivery when it is admitted, and after an attempt. They read the job, the
// endpoint, its breaker state and the time; they return what should happen, and the dispatcher's
// apply() does it (relay/engine/dispatcher.cpp). docs/architecture.md, Rules, has them in words;
// tests/unit/relay/core/decisions_test.cpp has them as tables.

#include "delivery/breaker.hpp"
#include "delivery/job.hpp"
#include "delivery/policy.hpp"
#include "relay/core/rows.hpp"
#include "sql/writes.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace walhook::relay {

using sys_time = std::chrono::system_clock::time_point;

/// What happens to a job.
enum class fate {
  queue,    ///< into its endpoint's in-memory queue (admission only)
  release,  ///< done, nothing to write: its LSN ticket is released at once
  write,    ///< its state goes to walhook.deliveries (`record`); the ticket is released once durable
};

/// How an endpoint's new work travels (the backlog controller decides, relay/core/backlog.hpp).
enum class lane {
  memory,   ///< in memory only
  backlog,  ///< it has pending rows: new state updates (merge key) and aggregate-ordered events
            ///< go through PostgreSQL too, so merges and per-aggregate order hold across both
  table,    ///< it cannot keep up (stalled, or its queue would wait too long): all new work from
            ///< the stream goes through PostgreSQL and comes back by claims at its pace
};

struct admission_policy {
  std::size_t max_payload_bytes = 1024 * 1024;  ///< larger request bodies → dead
};

struct admission {
  fate what = fate::queue;
  sql::delivery_outcome record;  ///< fate::write: pending (spilled) or dead, the reason in last_error
  bool operator==(const admission&) const = default;
};

/// Admits a job — fresh from the stream (holds a ticket) or claimed back (row_id set). In order:
///   endpoint gone            → dead (removed by any means: its queued work ends with it)
///   another tenant's endpoint → dead (an id reused after TRUNCATE … RESTART IDENTITY, a moved endpoint)
///   URL or secret unusable   → dead with the endpoint's config error
///   body > max_payload_bytes → dead
///   retired (removed in the stream) → queue: one attempt for work routed before the removal
///   paused/disabled (status) → pending, "endpoint paused|disabled"
///   breaker open             → pending until paused_until
///   lane table (stream job)  → pending; lane backlog + merge key or aggregate order → pending
///   otherwise                → queue
/// `ep` is nullptr when the endpoint is unknown.
admission admit(const delivery::job& j, const endpoint* ep, const delivery::breaker_state& health, lane l,
                sys_time now, const admission_policy& policy);

/// A pending record for a job that leaves memory without an attempt (spill): due at `next_at`
/// (now if empty), with `reason` as last_error (may be empty).
sql::delivery_outcome spill_record(const delivery::job& j, sys_time now, std::optional<sys_time> next_at = {},
                                   std::optional<std::string> reason = {});

struct outcome_policy {
  delivery::retry_policy retry;
  delivery::breaker_policy breaker;
  bool record_successes = false;  ///< --record=all: first-try successes are written too
};

enum class verdict { delivered, retry, dead };

/// After an attempt.
struct decision {
  verdict result = verdict::delivered;
  fate what = fate::release;             ///< release (delivered, nothing to record) or write
  sql::delivery_outcome record;          ///< fate::write
  delivery::breaker_state breaker;       ///< the endpoint's breaker after this attempt
  bool write_health = false;             ///< persist `breaker` to walhook.endpoint_health, with:
  std::optional<int> last_status;        ///<   the attempt's HTTP status (if any)
  std::optional<std::string> last_error; ///<   and its error (if it failed)
  std::optional<std::string> disable;    ///< disable the endpoint with this reason (410, failing for days)
  std::optional<sys_time> paused_until;  ///< just paused (breaker or Retry-After): its queued work
                                         ///< goes to PostgreSQL, due then
  bool retry_after = false;              ///< the endpoint's Retry-After set (or moved) the pause
  bool spill_queue = false;              ///< aggregate order: queued work follows the failed delivery
  bool recovered = false;                ///< a paused endpoint's breaker closed
  bool deferred = false;                 ///< a "not yet" answer (endpoint.defer_statuses): no failure
  bool operator==(const decision&) const = default;
};

/// Decides the outcome of one attempt (docs/architecture.md, Rules): 2xx → delivered (written
/// only for persisted jobs or --record=all; the breaker closes); 410 → dead and the endpoint
/// disabled; 413 → dead; anything else → for a retired endpoint dead ("endpoint removed: …",
/// no breaker), otherwise retry with backoff and jitter (`unit_random` ∈ [0, 1)), floored by
/// Retry-After (which also pauses the endpoint), or dead after max_attempts / max_age; the
/// breaker counts the failure and may pause or disable the endpoint. An endpoint with policies of
/// its own (an inbox destination, migration 011): a status in defer_statuses defers the delivery
/// (a short wait, no failure, quarantined — dead — past max_deferrals), and a retry schedule
/// replaces the backoff (dead once spent; deferrals do not count), and its breaker pauses for at
/// most the schedule's first wait (at least 1 s) per round.
decision decide(const delivery::job& j, const endpoint& ep, const delivery::breaker_state& breaker,
                const delivery::attempt_outcome& outcome, sys_time now, double unit_random,
                const outcome_policy& policy);

}  // namespace walhook::relay
