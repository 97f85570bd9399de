// The dispatcher's admission (relay/engine/dispatcher.hpp): what comes in — deliveries routed
// from the stream, rows claimed back from walhook.deliveries, endpoint changes, streamed
// removals, operators' wakes — goes through admit() (relay/core/decisions.hpp) and apply().
#include "relay/engine/dispatcher.hpp"

#include "common/log.hpp"
#include "common/time.hpp"
#include "relay/core/rows.hpp"
#include "relay/engine/dispatcher_detail.hpp"

#include <chrono>

namespace walhook::relay {
using delivery::job;
using namespace dispatcher_detail;

namespace {
/// A delivery routed from the stream that nothing wrote yet.
bool is_stream_job(const job& j) { return j.ev && j.ev->xid != 0 && !j.row_id && !j.marked && !j.drained && j.ticket != 0; }
}  // namespace

void dispatcher::admit_job(job j) {
  // An endpoint that follows the outbox by cursor takes nothing from the stream.
  if (is_stream_job(j) && !stopping_ && cursor_hooks_.skips && cursor_hooks_.skips(j)) return;
  const endpoint* ep = directory_.find(j.endpoint_id);
  const auto health = directory_.health(j.endpoint_id);
  const auto now = clock_.system_now();
  // What a cursor reads back is sent from memory, or goes back to the cursor — except a new
  // state of an entity while the endpoint has pending rows (the backlog lane): it merges there.
  lane l = stopping_ ? lane::table : backlog_.lane_of(j.endpoint_id);
  if (j.drained && l == lane::table) l = lane::memory;
  auto a = admit(j, ep, health, l, now, options_.admission);
  // Pending for a reason of the endpoint's (paused, disabled, breaker open, too slow): its
  // cursor owes it instead of a row.
  const bool endpoint_reason = ep && (l == lane::table || ep->status != endpoint_status::active ||
                                      delivery::mode(health, now) == delivery::breaker_mode::paused);
  if (a.what == fate::write && a.record.status == sql::delivery_status::pending && endpoint_reason &&
      try_follow(j, a.record.last_error.value_or("endpoint too slow for the stream")))
    return;
  apply(std::move(j), a);
}

bool dispatcher::try_follow(job& j, std::string_view reason) {
  if (!cursor_hooks_.follow || stopping_ || !active_ || !j.ev || j.row_id || j.marked) return false;
  if (!j.drained && (j.ev->xid == 0 || j.ticket == 0)) return false;
  const auto r = cursor_hooks_.follow(j, reason);
  if (r == follow_result::refused) return false;
  const auto now = clock_.system_now();
  if (r == follow_result::entered) {  // what it has queued follows the cursor too (or goes to the table)
    for (auto& q : sched_.drain(j.endpoint_id))
      if (!try_follow(q, reason)) spill(q, spill_record(q, now));
  } else if (j.drained) {  // its window is read again from it: what came after it goes back too
    for (auto& q : sched_.take_drained_after(j.endpoint_id, j.ev->seq))
      if (!try_follow(q, reason)) spill(q, spill_record(q, now));
  }
  return true;
}

void dispatcher::submit_drained(job j) {
  j.enqueued_at = clock_.steady_now();
  admit_job(std::move(j));
}

std::vector<std::pair<std::uint32_t, lsn>> dispatcher::in_flight_stream(std::int64_t endpoint_id) const {
  std::vector<std::pair<std::uint32_t, lsn>> out;
  for (const auto& [n, r] : running_)
    // A 'sending' mark is handled: the row it queued carries the outcome (and is written before
    // any cursor queued after it).
    if (r->j.endpoint_id == endpoint_id && r->j.ev && r->j.ev->xid != 0 && !r->j.row_id && !r->j.drained && !r->marked)
      out.emplace_back(r->j.ev->xid, r->j.ev->commit_lsn);
  return out;
}

std::size_t dispatcher::drain_room(std::int64_t endpoint_id) const {
  if (!active_ || stopping_ || !has_headroom()) return 0;
  return backlog_.claim_size(endpoint_id, load_of(endpoint_id), clock_.steady_now());
}

void dispatcher::submit(job j) {
  j.enqueued_at = clock_.steady_now();
  admit_job(std::move(j));
}

void dispatcher::submit_dead(job j, std::string reason) {
  j.enqueued_at = clock_.steady_now();
  const int attempts = j.attempts;
  write(std::move(j), {sql::delivery_status::dead, attempts, std::nullopt, std::nullopt, std::nullopt, std::move(reason)});
}

void dispatcher::admit_claimed(sql::claimed_delivery c) {
  ++stats_.claimed;
  auto ev = event_of(c);
  std::optional<std::string> dead;
  if (c.event_missing) {
    ev.created_at = format_iso8601(clock_.system_now());
    dead = "event no longer in walhook.outbox";
  } else {
    ev.tenant_id = std::move(c.tenant_id);
    ev.type = std::move(c.event_type);
    ev.payload = std::move(c.payload);
    ev.stored_at = std::move(c.event_stored_at);
    std::string why;
    auto created_at = pg_timestamptz_to_iso8601(c.event_created_at, &why);
    ev.created_at = created_at.value_or(c.event_created_at);
    if (created_at) ev.body = delivery::make_body(ev);
    else dead = std::move(why);
    // A row an outbox bridge could not map: replayed or resent, it ends dead again, never sent.
    if (c.rejected) dead = rejected_reason(*c.rejected);
  }
  job j = job_of(c, events_.track(std::move(ev)), clock_.steady_now());
  own(key_of(j));
  if (dead) {
    write(std::move(j), {sql::delivery_status::dead, c.attempts, std::nullopt, std::nullopt, std::nullopt, std::move(*dead)});
    return;
  }
  // The same checks as fresh work: the endpoint may have been paused, disabled or removed while
  // the claim ran, and the payload limit holds for replayed deliveries too.
  admit_job(std::move(j));
}

void dispatcher::endpoint_changed(const endpoint_change& c) {
  const endpoint* ep = directory_.find(c.id);
  if (c.removed || c.url_changed) {
    transport_.forget(std::to_string(c.id));
    transport_.forget("oauth2:" + std::to_string(c.id));  // its token endpoint's connections
  }
  if (c.removed || (ep && !ep->oauth)) tokens_.forget(std::to_string(c.id));
  if (c.removed) {
    // Deliveries to a removed endpoint have nowhere to go: stream ones are done, persisted ones dead.
    for (auto& j : sched_.drain(c.id)) {
      auto a = admit(j, nullptr, {}, lane::memory, clock_.system_now(), options_.admission);
      apply(std::move(j), a);
    }
    backlog_.forget(c.id);
    stats_.endpoints.erase(c.id);  // its /metrics series go with it (bounded by the directory)
    notifier_.forget(c.id);
    log::info("endpoint.removed", {{"endpoint_id", c.id}});
    return;
  }
  if (!ep) return;
  sched_.configure(c.id, ep->max_concurrency, ep->aggregate_ordering, ep->max_rate, ep->rate_burst);
  if (c.deactivated) spill_queue(c.id, std::nullopt, "endpoint " + std::string(to_string(ep->status)));
  if (c.activated && !c.added) {  // resumed or enabled: it may have pending rows (a new one has none)
    backlog_.wake(c.id);
    claims_wake_.notify();
  }
}

void dispatcher::removal_streamed(std::vector<std::int64_t> ids, std::optional<std::int64_t> endpoint_id,
                                  std::uint32_t xid, lsn_tracker::ticket ticket) {
  tracker_.hold(ticket);
  std::erase_if(ids, [&](std::int64_t id) { return !directory_.retire(id); });
  for (auto id : ids) backlog_.forget(id);  // no claims for it: its rows were ended by the removal
  log::info("endpoint.removal_streamed", {{"endpoint_id", endpoint_id.value_or(0)},
                                          {"endpoints", static_cast<std::uint64_t>(ids.size())},
                                          {"xid", static_cast<std::uint64_t>(xid)}});
  removals_.push_back({std::move(ids), endpoint_id, xid, ticket});
  finish_removals();
}

void dispatcher::wake(std::int64_t endpoint_id, bool resume) {
  if (resume && directory_.reset_health(endpoint_id)) log::info("endpoint.breaker_reset", {{"endpoint_id", endpoint_id}});
  backlog_.wake(endpoint_id);
  claims_wake_.notify();
  rewake_[endpoint_id] = {clock_.steady_now() + std::chrono::seconds{1}, 2};
}
}  // namespace walhook::relay
