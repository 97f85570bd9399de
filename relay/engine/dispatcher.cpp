// The dispatcher (relay/engine/dispatcher.hpp) is one class in four files:
//   dispatcher.cpp           construction; apply() and the writes it makes (outcomes, spills,
//                            'sending' marks, notifications, streamed removals) — the only code
//                            that writes to the store, releases LSN tickets or queues work in the
//                            scheduler; sessions, the rows this process owns, the graceful stop;
//   dispatcher_admission.cpp what comes in: stream and claimed deliveries, endpoint changes,
//                            streamed removals, operators' wakes;
//   dispatcher_attempts.cpp  attempts: started, signed, sent, their outcome decided;
//   dispatcher_claims.cpp    back-pressure, the sweep, claim rounds and their loops.
// relay/engine/dispatcher_detail.hpp holds what they share (the record of an attempt in flight).
#include "relay/engine/dispatcher.hpp"

#include "common/log.hpp"
#include "delivery/outcome_class.hpp"
#include "delivery/url.hpp"
#include "relay/engine/dispatcher_detail.hpp"

#include <chrono>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using delivery::job;
using namespace dispatcher_detail;

namespace {

backlog_policy backlog_policy_of(const dispatcher_options& o) {
  backlog_policy p;
  p.wait_bound = o.max_wait_in_memory;
  p.hold_bound = o.max_hold;
  p.claim_horizon = o.claim_horizon;
  p.max_queued_per_endpoint = o.limits.max_queued_per_endpoint;
  p.max_claim = o.max_claim;
  return p;
}

}  // namespace

dispatcher::dispatcher(asio::any_io_executor ex, dispatcher_options options, endpoint_directory& directory,
                       lsn_tracker& tracker, sql::store& store, delivery::transport& transport,
                       const clock_source& clock, hooks h)
    : executor_(ex),
      options_(std::move(options)),
      directory_(directory),
      tracker_(tracker),
      store_(store),
      transport_(transport),
      clock_(clock),
      hooks_(std::move(h)),
      sched_(options_.limits),
      backlog_(backlog_policy_of(options_)),
      notifier_(options_.notifications),
      attempts_(ex),
      claims_wake_(ex),
      rate_wake_(ex),
      rng_(options_.seed ? options_.seed : std::random_device{}()) {}

dispatcher::~dispatcher() = default;

// ------------------------------------------------------------------ apply

void dispatcher::release(job& j, bool handled) {
  if (j.ticket == 0) return;
  tracker_.release(j.ticket);
  if (handled && j.ev && !j.drained) note_handled(j.ticket, j.endpoint_id, *j.ev);
  j.ticket = 0;
  if (hooks_.released) hooks_.released();
}

void dispatcher::note_handled(lsn_tracker::ticket t, std::int64_t endpoint_id, const delivery::event& ev) {
  if (t == 0 || lsn_tracker::is_detached(t) || ev.xid == 0) return;
  if (cursor_hooks_.handled) cursor_hooks_.handled(endpoint_id, ev);
  const auto oldest = tracker_.oldest_open();  // tickets grow: older ones are done
  while (!handled_open_.empty() && (oldest == 0 || handled_open_.begin()->first < oldest))
    handled_open_.erase(handled_open_.begin());
  // (Before its Commit, more of the transaction may still come: the first may be done already.)
  if (!tracker_.settled(t)) handled_open_[t].emplace_back(endpoint_id, ev.id);
}

std::vector<std::string> dispatcher::handled_of(lsn_tracker::ticket t, std::int64_t endpoint_id) const {
  std::vector<std::string> out;
  if (auto it = handled_open_.find(t); it != handled_open_.end())
    for (const auto& [id, event_id] : it->second)
      if (id == endpoint_id) out.push_back(event_id);
  return out;
}

void dispatcher::queue(job j) {
  auto pushed = sched_.push(std::move(j));
  switch (pushed.status) {
    case delivery::scheduler::push_status::queued:
      break;
    case delivery::scheduler::push_status::merged:
      ++stats_.merged;
      release(*pushed.replaced);
      break;
    case delivery::scheduler::push_status::full: {
      if (try_follow(*pushed.replaced, "its queue is full")) break;
      auto record = spill_record(*pushed.replaced, clock_.system_now());
      write(std::move(*pushed.replaced), std::move(record));
      break;
    }
  }
  dispatch();
}

void dispatcher::write(job j, sql::delivery_outcome record) {
  // Deferrals only grow (decide() counts one more); a spill or a dead end keeps the count.
  record.deferrals = std::max(record.deferrals, j.deferrals);
  const bool pending = record.status == sql::delivery_status::pending;
  const bool owned = j.row_id || j.marked;
  if (pending) {
    backlog_.pending_queued(j.endpoint_id);
    ++stats_.spilled;
  }
  std::vector<notice> dead_notices;
  if (record.status == sql::delivery_status::dead) {
    ++stats_.dead;
    if (auto* c = counters_of(j.endpoint_id)) ++c->dead;
    log::warn("delivery.dead", {{"endpoint_id", j.endpoint_id},
                                {"event_id", j.ev->id},
                                {"trace_id", trace_id_of(*j.ev)},
                                {"reason", record.last_error.value_or("")}});
    // A removed endpoint's work ending dead is the removal's doing, not news.
    if (const endpoint* ep = directory_.find(j.endpoint_id); ep && !ep->retired)
      dead_notices = notifier_.dead(*ep, j.ev->id, record, is_notification_type(j.ev->type), clock_.steady_now());
  }
  auto stream_ev = j.ticket && !j.drained ? j.ev : nullptr;
  auto durable = [this, ticket = j.ticket, id = j.endpoint_id, pending, owned, key = key_of(j), stream_ev] {
    if (ticket) {
      tracker_.release(ticket);
      if (stream_ev) note_handled(ticket, id, *stream_ev);
      if (hooks_.released) hooks_.released();
    }
    if (owned) disown(key);
    if (pending) {
      backlog_.pending_durable(id);
      claims_wake_.notify();
    }
  };
  if (j.row_id) {
    store_.enqueue(sql::update_delivery{j.row_id, {}, std::move(record)}, std::move(durable));
  } else if (j.marked) {
    store_.enqueue(sql::update_delivery{std::nullopt, key_of(j), std::move(record)}, std::move(durable));
  } else {
    store_.enqueue(upsert_of(j, std::move(record)), std::move(durable));
  }
  for (const auto& n : dead_notices) publish(n);
}

void dispatcher::publish(const notice& n) {
  const endpoint* contact = nullptr;
  if (options_.notifications.contacts && n.contact_endpoint_id) contact = directory_.find(*n.contact_endpoint_id);
  auto rows = rows_of(n, options_.notifications.operator_tenant, contact);
  log::debug("notification.published",
             {{"type", n.type}, {"endpoint_id", n.endpoint_id}, {"rows", static_cast<std::uint64_t>(rows.size())}});
  stats_.notifications += rows.size();
  for (auto& row : rows) store_.enqueue(std::move(row));
}

void dispatcher::apply(job j, const admission& a) {
  switch (a.what) {
    case fate::queue: return queue(std::move(j));
    case fate::release: return release(j);
    case fate::write: return write(std::move(j), a.record);
  }
}

void dispatcher::apply(job j, const decision& d) {
  const std::int64_t id = j.endpoint_id;
  const auto before = directory_.health(id);
  const endpoint* current = directory_.find(id);
  const bool disabling = d.disable && current && current->status != endpoint_status::disabled;
  notifier::attempt_notices notices;
  if (current)
    notices = notifier_.after_attempt(*current, before, d, disabling, is_notification_type(j.ev->type), clock_.steady_now());
  // The first failure of a streak is worth a warning (rate-limited like its notification): a
  // localhost endpoint without --allow-private-networks must not fail silently until the pause.
  if (notices.log_failing)
    log::warn("endpoint.failing", {{"endpoint_id", id},
                                   {"url", current ? delivery::redact_url(current->url) : std::string()},
                                   {"event_id", j.ev->id},
                                   {"status", static_cast<std::int64_t>(d.last_status.value_or(0))},
                                   {"error", d.last_error.value_or("")}});
  directory_.set_health(id, d.breaker);
  if (d.result == verdict::delivered) {
    ++stats_.delivered;
    if (auto* c = counters_of(id)) ++c->delivered;
  } else if (d.deferred) {
    ++stats_.deferred;
  } else {
    ++stats_.failed_attempts;
  }
  if (d.result == verdict::retry)
    log::debug("delivery.failed", {{"endpoint_id", id}, {"event_id", j.ev->id}, {"trace_id", trace_id_of(*j.ev)},
                                   {"error", d.last_error.value_or("")}, {"attempts", j.attempts + 1}});
  if (d.write_health) {
    sql::health_write h;
    h.endpoint_id = id;
    h.consecutive_failures = d.breaker.consecutive_failures;
    h.first_failure_at = d.breaker.first_failure_at;
    h.last_failure_at = d.breaker.last_failure_at;
    h.last_success_at = d.breaker.last_success_at;
    if (d.breaker.paused_until)
      h.paused_for = std::chrono::ceil<std::chrono::milliseconds>(*d.breaker.paused_until - clock_.system_now());
    h.probe_rounds = d.breaker.probe_rounds;
    h.last_status = d.last_status;
    h.last_error = d.last_error;
    h.disable = d.disable.has_value();
    h.disabled_reason = d.disable;
    store_.enqueue(std::move(h));
  }
  for (const auto& n : notices.notices) publish(n);
  // An endpoint failing (five attempts in a row — not an event or a few failing alone) stops
  // costing a row per delivery: its outbox cursor owes the delivery. One read back by the cursor
  // gets its own retry row and schedule instead (the breaker stops the reading meanwhile): an
  // event that fails alone never blocks the cursor, and no failure is retried without backoff.
  const bool endpoint_failing =
      d.result == verdict::retry && !d.deferred && !j.drained && d.breaker.consecutive_failures >= failures_to_follow;
  if (d.what != fate::write) release(j);
  else if (!(endpoint_failing && try_follow(j, "failing: " + d.last_error.value_or("")))) write(std::move(j), d.record);
  if (d.recovered) log::info("endpoint.recovered", {{"endpoint_id", id}});
  if (d.retry_after)
    log::info("endpoint.retry_after", {{"endpoint_id", id}, {"until", format_iso8601(*d.breaker.paused_until)}});
  if (d.spill_queue) spill_queue(id, std::nullopt, "behind a failed delivery of its aggregate", false);
  if (d.disable) {
    if (const endpoint* ep = directory_.find(id); ep && ep->status != endpoint_status::disabled) {
      ++stats_.disabled_endpoints;
      log::warn("endpoint.disabled", {{"endpoint_id", id}, {"reason", *d.disable}});
      endpoint e = *ep;
      e.status = endpoint_status::disabled;
      endpoint_changed(directory_.apply(std::move(e)));  // the stream echoes the row update later
    }
  } else if (d.paused_until) {
    log::warn("endpoint.paused", {{"endpoint_id", id},
                                  {"until", format_iso8601(*d.paused_until)},
                                  {"consecutive_failures", d.breaker.consecutive_failures},
                                  {"error", d.last_error.value_or("")}});
    spill_queue(id, d.paused_until, "endpoint paused by the circuit breaker");
    claims_wake_.notify();  // re-arm the claim timer for the pause's end
  }
}

void dispatcher::spill_queue(std::int64_t endpoint_id, std::optional<sys_time> next_at, std::string reason, bool follow) {
  auto now = clock_.system_now();
  for (auto& j : sched_.drain(endpoint_id))
    if (!(follow && try_follow(j, reason.empty() ? "its queue left memory" : reason)))
      spill(j, spill_record(j, now, next_at, reason.empty() ? std::nullopt : std::optional<std::string>(reason)));
}

void dispatcher::spill(job j, sql::delivery_outcome pending) {
  // A removed endpoint's work is not kept for later: what it could not take in time ends here.
  if (const endpoint* ep = directory_.find(j.endpoint_id); ep && ep->retired)
    pending = {sql::delivery_status::dead, j.attempts, std::nullopt, std::nullopt, std::nullopt,
               "endpoint removed before this delivery could be attempted (it did not keep up)"};
  write(std::move(j), std::move(pending));
}

void dispatcher::mark_sending(const std::shared_ptr<running>& r) {
  r->marked = true;
  own(key_of(r->j));
  ++stats_.marked_sending;
  // Due at once if this process dies: the startup reset puts it back to pending.
  store_.enqueue(upsert_of(r->j, {sql::delivery_status::sending, r->j.attempts, std::chrono::milliseconds{0},
                                  r->started_at, std::nullopt, std::nullopt}),
                 [this, r] { release(r->j); });
}

delivery::outcome_class dispatcher::count_attempt(std::int64_t endpoint_id,
                                                  const delivery::post_result& response,
                                                  steady_time::duration took) {
  const auto outcome = delivery::classify_outcome(response);
  const auto cls = static_cast<std::size_t>(outcome);
  stats_.latency[cls].observe(std::chrono::duration<double>(took).count());
  if (auto* c = counters_of(endpoint_id)) ++c->attempts[cls];
  return outcome;
}

endpoint_counters* dispatcher::counters_of(std::int64_t endpoint_id) {
  // Only endpoints in the directory: one removed while its attempt ran leaves no series behind.
  if (!directory_.find(endpoint_id)) return nullptr;
  return &stats_.endpoints[endpoint_id];
}

void dispatcher::finish_removals() {
  // In stream order: a removal waits for the ones before it.
  while (!removals_.empty()) {
    auto& r = removals_.front();
    for (auto id : r.ids)
      if (sched_.queued(id) > 0 || sched_.in_flight(id) > 0) return;
    for (auto id : r.ids)
      if (const endpoint* ep = directory_.find(id); ep && ep->retired)
        if (auto c = directory_.remove(id)) endpoint_changed(*c);
    // After every write of their work (one queue, in order): the copies go, stray rows end.
    store_.enqueue(sql::removal_streamed{r.endpoint_id, r.xid}, [this, ticket = r.ticket] {
      tracker_.release(ticket);
      if (hooks_.released) hooks_.released();
    });
    removals_.erase(removals_.begin());
  }
}

// ------------------------------------------------------------------ sessions and ownership

void dispatcher::start_session(const std::vector<std::int64_t>& with_rows) {
  backlog_.reset(with_rows);
  active_ = true;
  claims_wake_.notify();
  dispatch();
}

void dispatcher::end_session() {
  active_ = false;
  // One active relay per slot (docs/engine.md): a lost session's attempts are abandoned at once —
  // their connections closed, their outcomes never written — before the lock is released, so the
  // instance that takes over never finds them still running against its own.
  ++session_;
  if (!running_.empty()) {
    log::warn("session.attempts_abandoned", {{"in_flight", static_cast<std::uint64_t>(running_.size())}});
    transport_.cancel_all();
  }
  removals_.clear();  // not acknowledged: the next session streams them again
  auto now = clock_.system_now();
  for (auto& j : sched_.drain_all())
    if (j.row_id) write(j, spill_record(j, now));  // claimed rows go back; stream jobs are streamed again
}

std::vector<sql::delivery_key> dispatcher::owned() const {
  std::vector<sql::delivery_key> out;
  out.reserve(owned_.size());
  for (const auto& [k, n] : owned_) out.push_back({k.first, k.second});
  return out;
}

void dispatcher::own(const sql::delivery_key& k) { ++owned_[{k.endpoint_id, k.event_id}]; }

void dispatcher::disown(const sql::delivery_key& k) {
  auto it = owned_.find({k.endpoint_id, k.event_id});
  if (it != owned_.end() && --it->second <= 0) owned_.erase(it);
}

// ------------------------------------------------------------------ stop

void dispatcher::begin_stop() { stopping_ = true; }

asio::awaitable<void> dispatcher::shutdown(std::chrono::steady_clock::time_point deadline) {
  log::info("shutdown.begin", {{"in_flight", static_cast<std::uint64_t>(attempts_.size())},
                               {"queued", static_cast<std::uint64_t>(sched_.queued_total())}});
  // Nothing new starts (a claim still running hands its rows back); queued work goes to
  // PostgreSQL; attempts in flight get the grace period.
  active_ = false;
  auto now = clock_.system_now();
  for (auto& j : sched_.drain_all()) {
    // A cursor's reads not attempted go back to its window: it ends before the first of them.
    if (j.drained && cursor_hooks_.follow && cursor_hooks_.follow(j, "stopping") != follow_result::refused) continue;
    if (!j.drained) write(j, spill_record(j, now));
  }
  co_await attempts_.async_wait(deadline - 1s);
  if (attempts_.size() > 0) {
    log::warn("shutdown.cancelling_attempts", {{"in_flight", static_cast<std::uint64_t>(attempts_.size())}});
    transport_.shutdown();  // remaining attempts fail with 'cancelled' and are written pending
    co_await attempts_.async_wait(std::chrono::steady_clock::now() + 500ms);
    attempts_.emit(asio::cancellation_type::terminal);
    co_await attempts_.async_wait(std::chrono::steady_clock::now() + 500ms);
  }
  // Dead deliveries counted for the next walhook.delivery.dead exist only here: publish them now
  // (the engine persists the store after this). A kill -9 loses that count, not the dead letters.
  for (const auto& n : notifier_.due(clock_.steady_now(), true)) publish(n);
}

}  // namespace walhook::relay
