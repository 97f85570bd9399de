// The dispatcher's back-pressure, sweeps and claims (relay/engine/dispatcher.hpp): when reading
// the slot must wait, what leaves memory for PostgreSQL (attempts past the hold bound, stalled
// endpoints' queues, deliveries that waited too long), and claiming persisted work back at each
// endpoint's pace (relay/core/backlog.hpp) — with the two loops that run them.
#include "relay/engine/dispatcher.hpp"

#include "common/log.hpp"
#include "relay/engine/dispatcher_detail.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using delivery::job;
using namespace dispatcher_detail;

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
    // A queue that waited for walhook's own in-flight pool says nothing about its endpoint.
    if (backlog_.keeps_up(load, now) || sched_.waits_for_walhook(id)) {
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
      for (auto& j : sched_.take_holding(id))
        if (!try_follow(j, "every attempt runs past the hold bound")) spill(j, spill_record(j, sys_now));
  }
  // Deliveries that waited too long in memory go to PostgreSQL so the slot can move on.
  std::unordered_set<std::int64_t> whole;
  for (auto& j : sched_.take_waiting_since(now - options_.max_wait_in_memory)) {
    backlog_.use_table(j.endpoint_id);
    if (ordered(j.endpoint_id)) whole.insert(j.endpoint_id);
    if (!try_follow(j, "its deliveries waited too long in memory")) spill(j, spill_record(j, sys_now));
  }
  for (auto id : whole) spill_queue(id, std::nullopt, {});
  for (const auto& n : notifier_.due(now)) publish(n);  // dead deliveries counted meanwhile
  if (!removals_.empty()) finish_removals();
  if (hooks_.room && sched_.full_endpoints().empty()) hooks_.room();
}

// ------------------------------------------------------------------ claims

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

asio::awaitable<void> dispatcher::rate_loop() {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  for (;;) {
    // Inactive (a standby, a session that ended, shutdown): dispatch() starts nothing and releases
    // no hold, so a past release time would spin — wait for a notify only.
    rate_deadline_ = active_ ? sched_.next_rate_release().value_or(steady_time::max()) : steady_time::max();
    // wake_signal waits on the real steady clock; clock_ may be a test's.
    const auto real = rate_deadline_ == steady_time::max()
                          ? std::chrono::steady_clock::time_point::max()
                          : std::chrono::steady_clock::now() + (rate_deadline_ - clock_.steady_now());
    co_await rate_wake_.wait_until(real);
    if (co_await cancelled()) co_return;
    dispatch();
  }
}

void dispatcher::start(task_group& group) {
  group.spawn(rate_loop(), "rate");
  group.spawn(claim_loop(), "claims");
  group.spawn(sweep_loop(), "sweeps");
}
}  // namespace walhook::relay
