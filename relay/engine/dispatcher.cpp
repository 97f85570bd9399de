#include "relay/engine/dispatcher.hpp"

#include "common/log.hpp"
#include "delivery/outcome_class.hpp"
#include "delivery/signing.hpp"
#include "delivery/url.hpp"
#include "relay/core/outcome_log.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using delivery::job;

namespace {

sql::delivery_key key_of(const job& j) { return {j.endpoint_id, j.ev->id}; }

/// A delivery known only in memory, as a row of walhook.deliveries with this outcome.
sql::upsert_delivery upsert_of(const job& j, sql::delivery_outcome outcome) {
  sql::upsert_delivery w;
  w.endpoint_id = j.endpoint_id;
  w.event_id = j.ev->id;
  w.aggregate_id = j.ev->aggregate_id;
  w.merge_key = j.ev->merge_key;
  w.event_created_at = j.ev->created_at;
  w.commit_lsn = j.ev->commit_lsn;
  w.outcome = std::move(outcome);
  return w;
}

/// The identity of a claimed row's event (its payload and body are the caller's to add).
delivery::event event_of(const sql::claimed_delivery& c) {
  delivery::event ev;
  ev.id = c.event_id;
  ev.merge_key = c.merge_key;
  ev.aggregate_id = c.aggregate_id;
  ev.commit_lsn = c.commit_lsn;
  return ev;
}

/// A claimed row as a job.
job job_of(const sql::claimed_delivery& c, std::shared_ptr<const delivery::event> ev, steady_time now) {
  job j;
  j.ev = std::move(ev);
  j.endpoint_id = c.endpoint_id;
  j.row_id = c.row_id;
  j.attempts = c.attempts;
  j.enqueued_at = now;
  return j;
}

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

/// An attempt in flight. The sweep may mark it 'sending' meanwhile: whoever first takes the job's
/// ticket (the mark once durable, or the attempt's end) releases it, exactly once.
struct dispatcher::running {
  std::uint64_t id = 0;
  job j;
  steady_time started{};
  sys_time started_at{};
  bool marked = false;
};

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
      rng_(options_.seed ? options_.seed : std::random_device{}()) {}

dispatcher::~dispatcher() = default;

// ------------------------------------------------------------------ apply

void dispatcher::release(job& j) {
  if (j.ticket == 0) return;
  tracker_.release(j.ticket);
  j.ticket = 0;
  if (hooks_.released) hooks_.released();
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
      auto record = spill_record(*pushed.replaced, clock_.system_now());
      write(std::move(*pushed.replaced), std::move(record));
      break;
    }
  }
  dispatch();
}

void dispatcher::write(job j, sql::delivery_outcome record) {
  const bool pending = record.status == sql::delivery_status::pending;
  const bool owned = j.row_id || j.marked;
  if (pending) {
    backlog_.pending_queued(j.endpoint_id);
    ++stats_.spilled;
  }
  std::optional<notice> dead_notice;
  if (record.status == sql::delivery_status::dead) {
    ++stats_.dead;
    if (auto* c = counters_of(j.endpoint_id)) ++c->dead;
    log::warn("delivery.dead",
              {{"endpoint_id", j.endpoint_id}, {"event_id", j.ev->id}, {"reason", record.last_error.value_or("")}});
    // A removed endpoint's work ending dead is the removal's doing, not news.
    if (const endpoint* ep = directory_.find(j.endpoint_id); ep && !ep->retired)
      dead_notice = notifier_.dead(*ep, j.ev->id, record, is_notification_type(j.ev->type), clock_.steady_now());
  }
  auto durable = [this, ticket = j.ticket, id = j.endpoint_id, pending, owned, key = key_of(j)] {
    if (ticket) {
      tracker_.release(ticket);
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
  if (dead_notice) publish(*dead_notice);
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
  } else {
    ++stats_.failed_attempts;
  }
  if (d.result == verdict::retry)
    log::debug("delivery.failed", {{"endpoint_id", id}, {"event_id", j.ev->id},
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
  if (d.what == fate::write) write(std::move(j), d.record);
  else release(j);
  if (d.recovered) log::info("endpoint.recovered", {{"endpoint_id", id}});
  if (d.retry_after)
    log::info("endpoint.retry_after", {{"endpoint_id", id}, {"until", format_iso8601(*d.breaker.paused_until)}});
  if (d.spill_queue) spill_queue(id, std::nullopt, "behind a failed delivery of its aggregate");
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
                                  {"consecutive_failures", d.breaker.consecutive_failures}});
    spill_queue(id, d.paused_until, "endpoint paused by the circuit breaker");
    claims_wake_.notify();  // re-arm the claim timer for the pause's end
  }
}

void dispatcher::spill_queue(std::int64_t endpoint_id, std::optional<sys_time> next_at, std::string reason) {
  auto now = clock_.system_now();
  for (auto& j : sched_.drain(endpoint_id))
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
                                                  const boost::system::result<delivery::http_response>& response,
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

// ------------------------------------------------------------------ admission

void dispatcher::admit_job(job j) {
  const endpoint* ep = directory_.find(j.endpoint_id);
  const lane l = stopping_ ? lane::table : backlog_.lane_of(j.endpoint_id);
  auto a = admit(j, ep, directory_.health(j.endpoint_id), l, clock_.system_now(), options_.admission);
  apply(std::move(j), a);
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
    std::string why;
    auto created_at = pg_timestamptz_to_iso8601(c.event_created_at, &why);
    ev.created_at = created_at.value_or(c.event_created_at);
    if (created_at) ev.body = delivery::make_body(ev);
    else dead = std::move(why);
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
  if (c.removed || c.url_changed) transport_.forget(std::to_string(c.id));
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
  sched_.configure(c.id, ep->max_concurrency, ep->aggregate_ordering);
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

void dispatcher::wake(std::int64_t endpoint_id, bool resume) {
  if (resume && directory_.reset_health(endpoint_id)) log::info("endpoint.breaker_reset", {{"endpoint_id", endpoint_id}});
  backlog_.wake(endpoint_id);
  claims_wake_.notify();
  rewake_[endpoint_id] = {clock_.steady_now() + std::chrono::seconds{1}, 2};
}

void dispatcher::start_session(const std::vector<std::int64_t>& with_rows) {
  backlog_.reset(with_rows);
  active_ = true;
  claims_wake_.notify();
  dispatch();
}

void dispatcher::end_session() {
  active_ = false;
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

// ------------------------------------------------------------------ attempts

void dispatcher::dispatch() {
  if (!active_) return;  // a standby starts nothing
  while (auto j = sched_.next()) {
    auto r = std::make_shared<running>();
    r->j = std::move(*j);
    r->started = clock_.steady_now();
    r->started_at = clock_.system_now();
    r->id = next_attempt_id_++;
    running_.emplace(r->id, r);
    last_started_[r->j.endpoint_id] = r->started;
    attempts_.spawn(attempt(std::move(r)), "attempt");
  }
}

endpoint_load dispatcher::load_of(std::int64_t id) const {
  endpoint_load l;
  l.queued = sched_.queued(id);
  l.in_flight = sched_.in_flight(id);
  if (const endpoint* ep = directory_.find(id)) l.max_concurrency = ep->max_concurrency;
  l.oldest_queued = sched_.oldest_enqueued(id);
  // The most recent start: no attempt in flight is younger, so "stalled" is never early.
  if (auto it = last_started_.find(id); it != last_started_.end() && l.in_flight > 0) l.youngest_attempt = it->second;
  l.probing = delivery::mode(directory_.health(id), clock_.system_now()) == delivery::breaker_mode::probing;
  return l;
}

void dispatcher::finished(std::int64_t endpoint_id, steady_time now, std::optional<steady_time::duration> took) {
  if (took) backlog_.attempt_finished(endpoint_id, *took);
  if (!removals_.empty()) finish_removals();
  if (backlog_.has_backlog(endpoint_id) && backlog_.claim_size(endpoint_id, load_of(endpoint_id), now) > 0)
    claims_wake_.notify();
  if (hooks_.room) hooks_.room();
}

asio::awaitable<void> dispatcher::attempt(std::shared_ptr<running> r) {
  const std::int64_t id = r->j.endpoint_id;
  const endpoint* ep = directory_.find(id);
  boost::system::result<delivery::http_response> response = delivery::transport_errc::protocol_error;
  std::optional<steady_time::duration> took;
  delivery::outcome_class outcome = delivery::outcome_class::other;  ///< of the attempt, once made
  // Checked at send time: the endpoint may have changed since the delivery was admitted.
  auto sendable = [&r](const endpoint* e) {
    return e && e->target && (r->j.ev->tenant_id.empty() || e->tenant_id == r->j.ev->tenant_id);
  };
  if (sendable(ep)) {
    delivery::http_target target = *ep->target;
    delivery::http_request req;
    req.body = r->j.ev->body;
    auto ts = unix_seconds(clock_.system_now());
    req.headers = {{"webhook-id", r->j.ev->id},
                   {"webhook-timestamp", std::to_string(ts)},
                   {"webhook-signature", delivery::signature_header(ep->keys, r->j.ev->id, ts, req.body)}};
    ++stats_.attempts;
    try {
      response = co_await transport_.async_post(std::to_string(id), target, req);
    } catch (const std::exception& e) {
      // Never leave the job (and its LSN ticket) behind: an unexpected exception is a failed attempt.
      log::error("delivery.attempt_exception", {{"endpoint_id", id}, {"error", e.what()}});
    }
    took = clock_.steady_now() - r->started;
    outcome = count_attempt(id, response, *took);
  }
  // The job leaves the registry; its ticket (unless a durable mark took it) goes with it.
  running_.erase(r->id);
  job j = r->j;
  r->j.ticket = 0;
  j.marked = r->marked;
  sched_.finished(j);
  auto now_sys = clock_.system_now();
  ep = directory_.find(id);  // it may have changed or gone while the attempt ran
  const bool delivered_to_removed = !ep && took && !j.row_id && !j.marked &&
                                    delivery::classify(response, now_sys, options_.outcomes.retry).kind ==
                                        delivery::verdict::delivered;
  // The in-memory record of finished attempts (relay/core/outcome_log.hpp).
  auto note = [&](const char* result) {
    if (!options_.recent_outcomes) return;
    options_.recent_outcomes->add({j.ev->id, id, now_sys, j.attempts + 1,
                                   response ? static_cast<int>(response->status) : 0,
                                   std::string(delivery::to_string(outcome)), result,
                                   std::chrono::duration<double>(*took).count()});
  };
  if (delivered_to_removed) {
    note("delivered");
    release(j);  // it arrived before the endpoint went: nothing to record
  } else if (!took || !ep || !ep->target) {
    auto a = admit(j, ep, directory_.health(id), lane::memory, now_sys, options_.admission);
    apply(std::move(j), a);
  } else {
    auto classified = delivery::classify(response, now_sys, options_.outcomes.retry);
    double unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    auto d = decide(j, *ep, directory_.health(id), classified, now_sys, unit, options_.outcomes);
    note(d.result == verdict::delivered ? "delivered" : d.result == verdict::retry ? "retry" : "dead");
    apply(std::move(j), d);
  }
  finished(id, clock_.steady_now(), took);
  dispatch();
}

// ------------------------------------------------------------------ back-pressure and sweeps

bool dispatcher::has_headroom() const {
  return sched_.full_endpoints().empty() && sched_.queued_total() < sched_.limits().max_queued_total / 4 &&
         events_.bytes() < options_.max_queued_bytes / 4;
}

bool dispatcher::must_hold() {
  if (sched_.over_memory_cap() || events_.bytes() >= options_.max_queued_bytes) return true;
  if (sched_.full_endpoints().empty()) return false;
  auto now = clock_.steady_now();
  std::vector<std::int64_t> full(sched_.full_endpoints().begin(), sched_.full_endpoints().end());
  bool hold = false;
  for (auto id : full) {
    // Only stream work waits for an endpoint: one in backlog mode is fed by claims (its queue may
    // be full of claimed rows), and a full queue spills its new work to the table instead.
    if (backlog_.lane_of(id) != lane::memory) continue;
    auto load = load_of(id);
    if (backlog_.keeps_up(load, now)) {
      hold = true;
    } else if (backlog_.use_table(id)) {
      auto capacity = backlog_.capacity(id, load.max_concurrency);
      log::info("endpoint.slow",
                {{"endpoint_id", id},
                 {"queued", static_cast<std::uint64_t>(load.queued)},
                 {"in_flight", static_cast<std::uint64_t>(load.in_flight)},
                 {"oldest_wait_ms", load.oldest_queued ? std::chrono::duration<double, std::milli>(now - *load.oldest_queued).count() : 0.0},
                 {"last_start_ms", load.youngest_attempt ? std::chrono::duration<double, std::milli>(now - *load.youngest_attempt).count() : 0.0},
                 {"capacity_per_s", capacity ? *capacity : 0.0},
                 {"note", "its queue would wait too long: new deliveries go through PostgreSQL"}});
    }
  }
  return hold;
}

void dispatcher::sweep() {
  if (!active_) return;
  auto now = clock_.steady_now();
  // Attempts holding their transaction too long are recorded, so the slot can move on.
  // Past the hold bound an attempt is parked too: it stops taking one of the slots young attempts
  // share (delivery/scheduler.hpp), so slow and hung endpoints never starve healthy ones.
  std::unordered_set<std::int64_t> busy;
  bool parked = false;
  for (const auto& [n, r] : running_) {
    if (r->j.ticket != 0 && !r->marked && !r->j.row_id && now - r->started >= options_.max_hold) mark_sending(r);
    if (!r->j.parked && now - r->started >= options_.max_hold) {
      sched_.park(r->j);
      parked = true;
    }
    busy.insert(r->j.endpoint_id);
  }
  if (parked) dispatch();
  for (auto it = rewake_.begin(); it != rewake_.end();) {
    if (now < it->second.first) {
      ++it;
      continue;
    }
    backlog_.wake(it->first);
    claims_wake_.notify();
    if (--it->second.second > 0) {
      it->second.first = now + std::chrono::seconds{4};
      ++it;
    } else {
      it = rewake_.erase(it);
    }
  }
  // A stalled endpoint's queue will not move soon: what holds a ticket goes to PostgreSQL.
  // For aggregate order, an endpoint's queue leaves memory whole or not at all: claims put the
  // table's rows back in order, and a later event left in memory would overtake them.
  auto sys_now = clock_.system_now();
  auto ordered = [this](std::int64_t id) {
    const endpoint* ep = directory_.find(id);
    return ep && ep->aggregate_ordering;
  };
  for (auto id : busy) {
    if (!backlog_.stalled(load_of(id), now)) continue;
    if (backlog_.use_table(id))
      log::info("endpoint.stalled", {{"endpoint_id", id},
                                     {"note", "every attempt runs past the hold bound: new deliveries go through PostgreSQL"}});
    if (ordered(id)) spill_queue(id, std::nullopt, {});
    else
      for (auto& j : sched_.take_holding(id)) spill(j, spill_record(j, sys_now));
  }
  // Deliveries that waited too long in memory go to PostgreSQL so the slot can move on.
  std::unordered_set<std::int64_t> whole;
  for (auto& j : sched_.take_waiting_since(now - options_.max_wait_in_memory)) {
    backlog_.use_table(j.endpoint_id);
    if (ordered(j.endpoint_id)) whole.insert(j.endpoint_id);
    spill(j, spill_record(j, sys_now));
  }
  for (auto id : whole) spill_queue(id, std::nullopt, {});
  for (const auto& n : notifier_.due(now)) publish(n);  // dead deliveries counted meanwhile
  if (!removals_.empty()) finish_removals();
  if (hooks_.room && sched_.full_endpoints().empty()) hooks_.room();
}

// ------------------------------------------------------------------ claims

void dispatcher::begin_stop() { stopping_ = true; }

asio::awaitable<std::chrono::steady_clock::time_point> dispatcher::claim_round() {
  if (!active_ || stopping_) co_return steady_time::max();  // start_session() notifies
  auto now = clock_.steady_now();
  auto now_sys = clock_.system_now();
  auto next_wake = steady_time::max();
  std::vector<sql::claim_quota> quotas;
  std::vector<std::int64_t> check;  // claimable endpoints that may have run out of rows
  // Claims fill at most half of the memory cap, so they never make the stream wait.
  const std::size_t claim_cap = sched_.limits().max_queued_total / 2;
  std::size_t global_room = claim_cap > sched_.queued_total() ? claim_cap - sched_.queued_total() : 0;
  if (events_.bytes() >= options_.max_queued_bytes / 2) global_room = 0;  // and half of the byte budget
  for (std::int64_t id : backlog_.endpoints()) {
    const endpoint* ep = directory_.find(id);
    if (!ep || ep->retired || ep->status != endpoint_status::active || !ep->config_error.empty()) continue;
    auto health = directory_.health(id);
    if (delivery::mode(health, now_sys) == delivery::breaker_mode::paused) {
      next_wake = std::min(next_wake, now + std::chrono::duration_cast<steady_time::duration>(*health.paused_until - now_sys));
      continue;
    }
    auto load = load_of(id);
    if (backlog_.stalled(load, now)) continue;  // an attempt ending brings the next round
    std::size_t n = std::min(backlog_.claim_size(id, load, now), global_room);
    if (n > 0) {
      quotas.push_back({id, static_cast<int>(n), ep->aggregate_ordering});
      global_room -= n;
    } else {
      check.push_back(id);
    }
  }
  if (!quotas.empty()) {
    auto claimed = co_await store_.claim_due(quotas);
    if (!claimed) {
      log::warn("claims.failed", {{"error", claimed.error().message()}});
      co_return clock_.steady_now() + 1s;
    }
    if (!claimed->empty()) ++stats_.claims;
    if (!active_) {  // the session ended while the claim ran: the rows go back at once
      for (auto& c : *claimed) {
        job j = job_of(c, events_.track(event_of(c)), clock_.steady_now());
        own(key_of(j));
        write(j, spill_record(j, clock_.system_now()));
      }
      co_return steady_time::max();
    }
    std::unordered_map<std::int64_t, std::size_t> got;
    for (auto& c : *claimed) {
      ++got[c.endpoint_id];
      admit_claimed(std::move(c));
    }
    dispatch();
    // An endpoint that got everything it asked for has more, most likely: attempts finishing
    // bring the next round. One that got less may have run out.
    for (const auto& q : quotas)
      if (got[q.endpoint_id] < static_cast<std::size_t>(q.limit)) check.push_back(q.endpoint_id);
  }
  if (check.empty()) co_return next_wake;
  auto exit = backlog_.begin_exit_check(check);
  auto due = co_await store_.next_due(check);
  now = clock_.steady_now();
  if (!due) co_return std::min(next_wake, now + 1s);
  std::vector<std::int64_t> with_pending;
  for (const auto& d : *due) {
    with_pending.push_back(d.endpoint_id);
    // Due now but not claimable (slots busy, aggregates blocked): attempts finishing wake us;
    // look again after a short pause in case nothing is in flight.
    auto wait = d.in.count() <= 0 ? std::chrono::milliseconds{sched_.in_flight(d.endpoint_id) > 0 ? 1000 : 100} : d.in;
    next_wake = std::min(next_wake, now + wait);
  }
  // No pending rows left (and none on their way): the endpoint takes new work in memory again.
  // For aggregate order, a persisted delivery still in flight may fail and come back: wait.
  auto left = backlog_.finish_exit_check(exit, with_pending, [this](std::int64_t id) {
    const endpoint* ep = directory_.find(id);
    return ep && ep->aggregate_ordering && sched_.in_flight(id) > 0;
  });
  for (auto id : left) log::debug("endpoint.backlog_drained", {{"endpoint_id", id}});
  co_return next_wake;
}

namespace {
asio::awaitable<bool> cancelled() {
  co_return (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
}
}  // namespace

asio::awaitable<void> dispatcher::claim_loop() {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  asio::steady_timer pace(executor_);
  for (;;) {
    auto next = co_await claim_round();
    // Rounds are at least min_claim_interval apart: a burst of notifications (every spilled
    // row's commit notifies) costs one round, not one each.
    pace.expires_after(options_.min_claim_interval);
    co_await pace.async_wait(asio::as_tuple(asio::use_awaitable));
    if (co_await cancelled()) co_return;
    co_await claims_wake_.wait_until(next);
    if (co_await cancelled()) co_return;
  }
}

asio::awaitable<void> dispatcher::sweep_loop() {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  asio::steady_timer tick(executor_);
  for (;;) {
    tick.expires_after(options_.sweep_interval);
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
    if (co_await cancelled()) co_return;
    sweep();
  }
}

void dispatcher::start(task_group& group) {
  group.spawn(claim_loop(), "claims");
  group.spawn(sweep_loop(), "sweeps");
}

asio::awaitable<void> dispatcher::shutdown(std::chrono::steady_clock::time_point deadline) {
  log::info("shutdown.begin", {{"in_flight", static_cast<std::uint64_t>(attempts_.size())},
                               {"queued", static_cast<std::uint64_t>(sched_.queued_total())}});
  // Nothing new starts (a claim still running hands its rows back); queued work goes to
  // PostgreSQL; attempts in flight get the grace period.
  active_ = false;
  auto now = clock_.system_now();
  for (auto& j : sched_.drain_all()) write(j, spill_record(j, now));
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
