#include "delivery/scheduler.hpp"

#include <algorithm>

namespace walhook::delivery {

void scheduler::configure(std::int64_t endpoint_id, int max_concurrency, bool aggregate_ordering,
                          std::optional<rate> limit, int burst) {
  auto& q = endpoints_[endpoint_id];
  q.id = endpoint_id;
  q.max_concurrency = std::max(1, max_concurrency);
  q.aggregate_ordering = aggregate_ordering;
  const bool changed = limit ? !q.limiter || q.limiter->limit() != *limit ||
                                   q.limiter->burst() != rate_limiter(*limit, burst).burst()
                             : q.limiter.has_value();
  if (changed) {
    // A new limit (or none) starts afresh: a hold computed under the old one no longer holds.
    if (limit) q.limiter.emplace(*limit, burst);
    else q.limiter.reset();
    q.rate_wait.reset();
    rate_held_.erase(endpoint_id);
  }
  make_ready(endpoint_id, q);
}

bool scheduler::can_start(const endpoint_queue& q) const {
  // With the slow pool full, an endpoint that has an attempt past the hold bound waits for it.
  if (q.parked > 0 && parked_total_ >= limits_.max_slow_in_flight) return false;
  return !q.jobs.empty() && q.in_flight < static_cast<std::size_t>(q.max_concurrency);
}

std::list<job>::iterator scheduler::startable(endpoint_queue& q) {
  if (!q.aggregate_ordering) return q.jobs.begin();
  // Ordering per aggregate: the first queued job whose aggregate has nothing in flight, and
  // never a later job of an aggregate whose earlier job is still queued.
  std::unordered_set<std::string> seen;
  for (auto it = q.jobs.begin(); it != q.jobs.end(); ++it) {
    const auto& agg = it->ev->aggregate_id;
    if (!agg) return it;
    if (q.aggregates_in_flight.contains(*agg) || seen.contains(*agg)) {
      seen.insert(*agg);
      continue;
    }
    return it;
  }
  return q.jobs.end();
}

void scheduler::make_ready(std::int64_t id, endpoint_queue& q) {
  if (!q.in_ring && !q.rate_wait && can_start(q)) {
    q.in_ring = true;
    ring_.push_back(id);
  }
}

job scheduler::take(endpoint_queue& q, std::list<job>::iterator it) {
  if (it->ev && it->ev->merge_key) {
    auto m = q.by_merge_key.find(*it->ev->merge_key);
    if (m != q.by_merge_key.end() && m->second == it) q.by_merge_key.erase(m);
  }
  job j = std::move(*it);
  q.jobs.erase(it);
  --queued_total_;
  if (q.jobs.size() < limits_.max_queued_per_endpoint) full_.erase(q.id);
  return j;
}

scheduler::push_result scheduler::push(job j) {
  auto& q = endpoints_[j.endpoint_id];
  q.id = j.endpoint_id;
  if (j.ev->merge_key) {
    auto m = q.by_merge_key.find(*j.ev->merge_key);
    // Only a job that exists in memory alone is merged here; a persisted one is merged by the
    // state store (its row holds the merge key).
    if (m != q.by_merge_key.end() && !m->second->row_id) {
      std::int64_t id = j.endpoint_id;
      job old = std::move(*m->second);
      *m->second = std::move(j);
      // With aggregate ordering the replacement may belong to an aggregate with nothing in
      // flight: the endpoint can have startable work again although nothing finished.
      make_ready(id, q);
      return {push_status::merged, std::move(old)};
    }
  }
  if (q.jobs.size() >= limits_.max_queued_per_endpoint || queued_total_ >= limits_.max_queued_total)
    return {push_status::full, std::move(j)};
  std::int64_t id = j.endpoint_id;
  q.jobs.push_back(std::move(j));
  if (q.jobs.back().ev->merge_key) q.by_merge_key[*q.jobs.back().ev->merge_key] = std::prev(q.jobs.end());
  ++queued_total_;
  if (q.jobs.size() >= limits_.max_queued_per_endpoint) full_.insert(id);
  make_ready(id, q);
  return {push_status::queued, std::nullopt};
}

std::optional<job> scheduler::next(std::chrono::steady_clock::time_point now) {
  // Endpoints whose rate limit lets them start again go to the back of the ring.
  for (auto it = rate_held_.begin(); it != rate_held_.end();) {
    auto& q = endpoints_[*it];
    if (q.rate_wait && *q.rate_wait > now) {
      ++it;
      continue;
    }
    q.rate_wait.reset();
    const auto id = *it;
    it = rate_held_.erase(it);
    make_ready(id, q);
  }
  while (!ring_.empty() && !pools_full()) {
    std::int64_t id = ring_.front();
    ring_.pop_front();
    auto found = endpoints_.find(id);
    if (found == endpoints_.end()) continue;
    auto& q = found->second;
    q.in_ring = false;
    if (!can_start(q)) continue;
    auto it = startable(q);
    if (it == q.jobs.end()) continue;  // every queued aggregate is busy; finished() re-adds it
    if (q.limiter) {
      const auto at = q.limiter->available_at(now);
      if (at > now) {  // over its rate: held until then
        q.rate_wait = at;
        rate_held_.insert(id);
        continue;
      }
      q.limiter->started(now);
    }
    job j = take(q, it);
    ++q.in_flight;
    ++in_flight_total_;
    if (q.aggregate_ordering && j.ev->aggregate_id) q.aggregates_in_flight.insert(*j.ev->aggregate_id);
    make_ready(id, q);  // back of the ring: everyone else goes first
    return j;
  }
  return std::nullopt;
}

std::optional<std::chrono::steady_clock::time_point> scheduler::next_rate_release() const {
  std::optional<std::chrono::steady_clock::time_point> first;
  for (auto id : rate_held_) {
    const auto& q = endpoints_.at(id);
    if (q.rate_wait && (!first || *q.rate_wait < *first)) first = q.rate_wait;
  }
  return first;
}

void scheduler::slow_down(std::int64_t endpoint_id, std::chrono::steady_clock::time_point now) {
  auto found = endpoints_.find(endpoint_id);
  if (found != endpoints_.end() && found->second.limiter) found->second.limiter->slow_down(now);
}

void scheduler::park(job& j) {
  if (j.parked) return;
  auto found = endpoints_.find(j.endpoint_id);
  if (found == endpoints_.end()) return;
  j.parked = true;
  ++found->second.parked;
  ++parked_total_;
}

void scheduler::finished(const job& j) {
  auto found = endpoints_.find(j.endpoint_id);
  if (found == endpoints_.end()) return;
  auto& q = found->second;
  if (j.parked && q.parked > 0) {
    --q.parked;
    if (parked_total_ > 0) --parked_total_;
  }
  if (q.in_flight > 0) --q.in_flight;
  if (in_flight_total_ > 0) --in_flight_total_;
  if (q.aggregate_ordering && j.ev->aggregate_id) {
    auto a = q.aggregates_in_flight.find(*j.ev->aggregate_id);
    if (a != q.aggregates_in_flight.end()) q.aggregates_in_flight.erase(a);
  }
  make_ready(j.endpoint_id, q);
}

bool scheduler::pools_full() const {
  return in_flight_total_ - parked_total_ >= limits_.max_in_flight ||
         in_flight_total_ >= limits_.max_in_flight + limits_.max_slow_in_flight;
}

bool scheduler::waits_for_walhook(const endpoint_queue& q) const {
  return pools_full() && !q.aggregate_ordering && q.parked == 0 && q.in_flight < static_cast<std::size_t>(q.max_concurrency);
}

bool scheduler::waits_for_walhook(std::int64_t endpoint_id) const {
  auto found = endpoints_.find(endpoint_id);
  return found != endpoints_.end() && waits_for_walhook(found->second);
}

std::vector<job> scheduler::take_waiting_since(std::chrono::steady_clock::time_point cutoff) {
  std::vector<job> out;
  for (auto& [id, q] : endpoints_) {
    if (waits_for_walhook(q)) continue;  // its jobs stay: reading waits at the memory caps instead
    for (auto it = q.jobs.begin(); it != q.jobs.end();) {
      // Read back by an outbox cursor (its window's ticket holds no slot position): it waits its
      // turn; its window reads no more than the endpoint takes.
      if (it->ticket != 0 && !it->drained && it->enqueued_at < cutoff) {
        auto victim = it++;
        out.push_back(take(q, victim));
      } else {
        ++it;
      }
    }
  }
  return out;
}

std::vector<job> scheduler::take_holding(std::int64_t endpoint_id) {
  std::vector<job> out;
  auto found = endpoints_.find(endpoint_id);
  if (found == endpoints_.end()) return out;
  auto& q = found->second;
  for (auto it = q.jobs.begin(); it != q.jobs.end();) {
    if (it->ticket != 0) {
      auto victim = it++;
      out.push_back(take(q, victim));
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<job> scheduler::take_drained_after(std::int64_t endpoint_id, std::int64_t seq) {
  std::vector<job> out;
  auto found = endpoints_.find(endpoint_id);
  if (found == endpoints_.end()) return out;
  auto& q = found->second;
  for (auto it = q.jobs.begin(); it != q.jobs.end();) {
    if (it->drained && it->ev && it->ev->seq > seq) {
      auto victim = it++;
      out.push_back(take(q, victim));
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<job> scheduler::drain(std::int64_t endpoint_id) {
  std::vector<job> out;
  auto found = endpoints_.find(endpoint_id);
  if (found == endpoints_.end()) return out;
  auto& q = found->second;
  while (!q.jobs.empty()) out.push_back(take(q, q.jobs.begin()));
  return out;
}

std::vector<job> scheduler::drain_all() {
  std::vector<job> out;
  for (auto& [id, q] : endpoints_) {
    auto part = drain(id);
    std::move(part.begin(), part.end(), std::back_inserter(out));
  }
  return out;
}

std::size_t scheduler::free_slots(std::int64_t endpoint_id) const {
  auto found = endpoints_.find(endpoint_id);
  if (found == endpoints_.end()) return 0;
  const auto& q = found->second;
  std::size_t used = q.in_flight + q.jobs.size();
  std::size_t cap = static_cast<std::size_t>(q.max_concurrency);
  return used >= cap ? 0 : cap - used;
}

std::size_t scheduler::free_global_slots() const {
  std::size_t used = in_flight_total_ - parked_total_ + queued_total_;
  return used >= limits_.max_in_flight ? 0 : limits_.max_in_flight - used;
}

std::size_t scheduler::queued(std::int64_t endpoint_id) const {
  auto found = endpoints_.find(endpoint_id);
  return found == endpoints_.end() ? 0 : found->second.jobs.size();
}

std::optional<std::chrono::steady_clock::time_point> scheduler::oldest_enqueued(std::int64_t endpoint_id) const {
  auto found = endpoints_.find(endpoint_id);
  if (found == endpoints_.end() || found->second.jobs.empty()) return std::nullopt;
  return found->second.jobs.front().enqueued_at;
}

std::size_t scheduler::in_flight(std::int64_t endpoint_id) const {
  auto found = endpoints_.find(endpoint_id);
  return found == endpoints_.end() ? 0 : found->second.in_flight;
}

}  // namespace walhook::delivery
