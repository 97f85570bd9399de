#include "relay/core/decisions.hpp"

#include "common/time.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace walhook::relay {

namespace {

bool persisted(const delivery::job& j) { return j.row_id.has_value() || j.marked; }

sql::delivery_outcome dead_record(const delivery::job& j, std::string reason) {
  return {sql::delivery_status::dead, j.attempts, std::nullopt, std::nullopt, std::nullopt, std::move(reason)};
}

/// A due time on walhook's clock as the delay the server adds to its own now().
std::optional<std::chrono::milliseconds> delay_until(std::optional<sys_time> at, sys_time now) {
  if (!at) return std::nullopt;
  return std::max(std::chrono::milliseconds{0}, std::chrono::ceil<std::chrono::milliseconds>(*at - now));
}

sql::delivery_outcome attempted(sql::delivery_status status, int attempts, std::optional<sys_time> next_at,
                                sys_time now, std::optional<int> last_status, std::optional<std::string> last_error) {
  return {status, attempts, delay_until(next_at, now), now, last_status, std::move(last_error)};
}

/// After a failed attempt: the endpoint's retry schedule if it has one (deferrals do not count),
/// else the backoff, bounded by the event's age (max_age) by walhook's clock (outbox.stored_at),
/// never the application's created_at; unknown: no bound. Clamped, never cast with overflow.
delivery::retry_decision next_attempt(const delivery::job& j, const endpoint& ep, const delivery::attempt_outcome& outcome,
                                      sys_time now, double unit_random, const outcome_policy& policy) {
  const int attempts = j.attempts + 1;
  if (!ep.retry_schedule.empty())
    return delivery::scheduled_attempt(attempts - j.deferrals, now, ep.retry_schedule, outcome.retry_after, policy.retry,
                                       unit_random);
  std::optional<sys_time> stored_at;
  if (auto stored = parse_pg_timestamptz(j.ev->stored_at)) stored_at = clamp_to_system_clock(*stored, now);
  return delivery::next_attempt(attempts, now, stored_at, outcome.retry_after, policy.retry, unit_random);
}

/// The answer means "not yet" for this endpoint (a removed one gets no second attempt anyway).
bool defers(const endpoint& ep, std::optional<int> status) {
  return !ep.retired && status &&
         std::find(ep.defer_statuses.begin(), ep.defer_statuses.end(), *status) != ep.defer_statuses.end();
}

/// A "not yet" answer (ep.defer_statuses): the delivery waits a short while and steps out of its
/// aggregate's line (claims let the later events of its key pass it: migration 011); it is no
/// failure of the endpoint (the breaker does not count it) and does not spend the retry budget.
/// Past ep.max_deferrals it ends dead, quarantined with the reason.
decision defer(const delivery::job& j, const endpoint& ep, const delivery::breaker_state& breaker,
               const delivery::attempt_outcome& outcome, sys_time now, double unit_random,
               const outcome_policy& policy, decision d) {
  const int attempts = j.attempts + 1;
  const int deferrals = j.deferrals + 1;
  d.what = fate::write;
  d.deferred = true;
  d.last_error = outcome.error;
  if (deferrals > ep.max_deferrals) {
    d.result = verdict::dead;
    d.record = attempted(sql::delivery_status::dead, attempts, std::nullopt, now, d.last_status,
                         fmt::format("quarantined: deferred {} times (the limit is {}): {}", deferrals,
                                     ep.max_deferrals, outcome.error));
  } else {
    d.result = verdict::retry;
    const auto delay = delivery::deferral_delay(deferrals, outcome.retry_after, policy.retry, unit_random);
    d.record = attempted(sql::delivery_status::pending, attempts, now + delay, now, d.last_status,
                         fmt::format("deferred ({} of {}): {}", deferrals, ep.max_deferrals, outcome.error));
  }
  d.record.deferrals = deferrals;
  d.breaker = breaker;
  return d;
}

// An endpoint with a retry schedule of its own (an inbox destination) pauses for at most the
// schedule's first wait, however many probe rounds fail: its handler is the operator's, and
// once fixed it gets the held events within that wait, not after an hour's pause.
delivery::breaker_policy breaker_for(const endpoint& ep, delivery::breaker_policy policy) {
  if (ep.retry_schedule.empty()) return policy;
  auto cap = std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(ep.retry_schedule.front()));
  policy.pause_step = std::min(policy.pause_step, cap);
  policy.max_pause = std::min(policy.max_pause, cap);
  return policy;
}

}  // namespace

sql::delivery_outcome spill_record(const delivery::job& j, sys_time now, std::optional<sys_time> next_at,
                                   std::optional<std::string> reason) {
  return {sql::delivery_status::pending, j.attempts, delay_until(next_at.value_or(now), now), std::nullopt, std::nullopt,
          std::move(reason)};
}

admission admit(const delivery::job& j, const endpoint* ep, const delivery::breaker_state& health, lane l,
                sys_time now, const admission_policy& policy) {
  auto write = [](sql::delivery_outcome o) { return admission{fate::write, std::move(o)}; };
  // Removed by any means (DELETE, TRUNCATE): its undelivered work ends dead with the reason, as
  // its rows in walhook.deliveries do (the removal trigger of migration 004).
  if (!ep) return write(dead_record(j, "endpoint no longer exists"));
  // Tenants never cross (docs/architecture.md, Invariants, 8): an endpoint id can be reused by another
  // tenant's endpoint (TRUNCATE … RESTART IDENTITY), or the endpoint moved to another tenant.
  if (!j.ev->tenant_id.empty() && j.ev->tenant_id != ep->tenant_id)
    return write(dead_record(j, "the endpoint belongs to another tenant than the event"));
  if (!ep->config_error.empty()) return write(dead_record(j, ep->config_error));
  if (j.ev->body.size() > policy.max_payload_bytes)
    return write(dead_record(
        j, fmt::format("request body of {} bytes exceeds the limit of {} bytes", j.ev->body.size(), policy.max_payload_bytes)));
  // Removed in the stream: one attempt for the work routed before the removal, whatever its state.
  if (ep->retired) return {fate::queue, {}};
  if (ep->status != endpoint_status::active)
    return write(spill_record(j, now, std::nullopt, "endpoint " + std::string(to_string(ep->status))));
  if (delivery::mode(health, now) == delivery::breaker_mode::paused)
    return write(spill_record(j, now, health.paused_until, "endpoint paused by the circuit breaker"));
  if (!j.row_id) {
    // While an endpoint has persisted backlog, new state updates (merge key) and new events of an
    // aggregate-ordered endpoint go through PostgreSQL too, so merges and per-aggregate order
    // hold across memory and the table. Facts keep the in-memory path unless the endpoint
    // cannot keep up at all.
    if (l == lane::table) return write(spill_record(j, now));
    if (l == lane::backlog && (j.ev->merge_key || ep->aggregate_ordering)) return write(spill_record(j, now));
  }
  return {fate::queue, {}};
}

decision decide(const delivery::job& j, const endpoint& ep, const delivery::breaker_state& breaker,
                const delivery::attempt_outcome& outcome, sys_time now, double unit_random,
                const outcome_policy& policy) {
  decision d;
  d.breaker = breaker;
  const int attempts = j.attempts + 1;
  const std::optional<int> status = outcome.status ? std::optional<int>(outcome.status) : std::nullopt;
  d.last_status = status;
  if (outcome.kind != delivery::verdict::delivered && defers(ep, status))
    return defer(j, ep, breaker, outcome, now, unit_random, policy, std::move(d));
  switch (outcome.kind) {
    case delivery::verdict::delivered: {
      d.result = verdict::delivered;
      bool was_failing = breaker.consecutive_failures > 0 || breaker.paused_until.has_value();
      d.recovered = breaker.paused_until.has_value();
      delivery::record_success(d.breaker, now);
      // A closed breaker is news; one success between successes is not.
      d.write_health = was_failing;
      if (persisted(j) || policy.record_successes) {
        d.what = fate::write;
        d.record = attempted(sql::delivery_status::delivered, attempts, std::nullopt, now, status, std::nullopt);
      }
      return d;
    }
    case delivery::verdict::gone:
      d.result = verdict::dead;
      d.what = fate::write;
      d.record = attempted(sql::delivery_status::dead, attempts, std::nullopt, now, status, outcome.error);
      d.disable = "HTTP 410 Gone";
      d.write_health = true;
      d.last_error = outcome.error;
      return d;
    case delivery::verdict::dead:
      d.result = verdict::dead;
      d.what = fate::write;
      d.record = attempted(sql::delivery_status::dead, attempts, std::nullopt, now, status, outcome.error);
      return d;
    case delivery::verdict::retry:
      break;
  }
  d.last_error = outcome.error;
  if (ep.retired) {  // removed: no retry, no breaker (it has no health any more)
    d.result = verdict::dead;
    d.what = fate::write;
    d.record = attempted(sql::delivery_status::dead, attempts, std::nullopt, now, status, "endpoint removed: " + outcome.error);
    return d;
  }
  auto next = next_attempt(j, ep, outcome, now, unit_random, policy);
  auto action = delivery::record_failure(d.breaker, now, breaker_for(ep, policy.breaker));
  // Retry-After speaks for the endpoint, not just this delivery: nothing is sent to it before
  // then (the pause ends like a breaker pause, with one probe round).
  if (outcome.retry_after && outcome.retry_after->count() > 0) {
    auto until = now + *outcome.retry_after;
    if (!d.breaker.paused_until || *d.breaker.paused_until < until) {
      d.breaker.paused_until = until;
      d.retry_after = true;
      if (action == delivery::breaker_action::none) action = delivery::breaker_action::paused;
    }
  }
  d.what = fate::write;
  if (next.give_up) {
    d.result = verdict::dead;
    d.record = attempted(sql::delivery_status::dead, attempts, std::nullopt, now, status, next.reason + ": " + outcome.error);
  } else {
    d.result = verdict::retry;
    auto at = next.next_attempt_at;
    if (d.breaker.paused_until && *d.breaker.paused_until > at) at = *d.breaker.paused_until;
    d.record = attempted(sql::delivery_status::pending, attempts, at, now, status, outcome.error);
  }
  // Per-aggregate order: later events queued behind this one go to PostgreSQL with it, where
  // claims release them only after it.
  d.spill_queue = ep.aggregate_ordering;
  d.write_health = true;
  if (action == delivery::breaker_action::disable) {
    d.disable = fmt::format("failing continuously since {}", format_iso8601(*d.breaker.first_failure_at));
  } else if (action == delivery::breaker_action::paused) {
    d.paused_until = d.breaker.paused_until;
  }
  return d;
}

}  // namespace walhook::relay
