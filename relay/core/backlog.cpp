#include "relay/core/backlog.hpp"

#include <algorithm>

namespace walhook::relay {

void backlog_controller::pending_queued(std::int64_t id) {
  ++unwritten_[id];
  backlog_.insert(id);
}

void backlog_controller::pending_durable(std::int64_t id) {
  auto it = unwritten_.find(id);
  if (it != unwritten_.end() && it->second > 0 && --it->second == 0) unwritten_.erase(it);
  ++written_[id];
  backlog_.insert(id);
}

void backlog_controller::forget(std::int64_t id) {
  backlog_.erase(id);
  table_.erase(id);
  mean_duration_s_.erase(id);
  // unwritten_/written_ stay: writes on their way still call pending_durable().
}

void backlog_controller::reset(const std::vector<std::int64_t>& with_rows) {
  backlog_.clear();
  table_.clear();
  backlog_.insert(with_rows.begin(), with_rows.end());
  for (const auto& [id, n] : unwritten_)
    if (n > 0) backlog_.insert(id);
}

lane backlog_controller::lane_of(std::int64_t id) const {
  if (table_.contains(id)) return lane::table;
  return backlog_.contains(id) ? lane::backlog : lane::memory;
}

bool backlog_controller::use_table(std::int64_t id) {
  backlog_.insert(id);
  return table_.insert(id).second;
}

void backlog_controller::attempt_finished(std::int64_t id, std::chrono::steady_clock::duration duration) {
  // At least 50 µs: an answer faster than the clock can tell says "very fast", not "infinite".
  double d = std::max(std::chrono::duration<double>(duration).count(), 50e-6);
  auto [it, first] = mean_duration_s_.try_emplace(id, d);
  if (!first) it->second += (d - it->second) / 8;
}

std::optional<double> backlog_controller::capacity(std::int64_t id, int max_concurrency) const {
  auto it = mean_duration_s_.find(id);
  if (it == mean_duration_s_.end()) return std::nullopt;
  return std::max(1, max_concurrency) / it->second;
}

bool backlog_controller::stalled(const endpoint_load& load, steady_time now) const {
  return load.in_flight >= static_cast<std::size_t>(std::max(1, load.max_concurrency)) && load.youngest_attempt &&
         now - *load.youngest_attempt >= policy_.hold_bound;
}

bool backlog_controller::keeps_up(const endpoint_load& load, steady_time now) const {
  // The head of a FIFO queue has waited as long as the queue takes to drain: that is the
  // measure. (Estimates from attempt durations mislead here: an attempt's duration includes its
  // wait in walhook's own event loop and in the receiver's.)
  if (stalled(load, now)) return false;
  return !load.oldest_queued || now - *load.oldest_queued <= policy_.wait_bound / 2;
}

std::size_t backlog_controller::claim_size(std::int64_t id, const endpoint_load& load, steady_time now) const {
  const std::size_t slots = static_cast<std::size_t>(std::max(1, load.max_concurrency));
  const std::size_t have = load.queued + load.in_flight;
  if (load.probing) return load.in_flight > 0 || have >= slots ? 0 : slots - have;
  if (stalled(load, now)) return 0;
  std::size_t target = policy_.first_claim_rounds * slots;
  if (auto r = capacity(id, load.max_concurrency))
    target = static_cast<std::size_t>(*r * std::chrono::duration<double>(policy_.claim_horizon).count());
  target = std::clamp(target, slots, std::max(slots, policy_.max_queued_per_endpoint));
  if (have >= target) return 0;
  std::size_t room = target - have;
  if (room * 2 < target) return 0;
  return std::min(room, std::max(slots, policy_.max_claim));
}

backlog_controller::exit_check backlog_controller::begin_exit_check(const std::vector<std::int64_t>& ids) const {
  exit_check c;
  for (auto id : ids) {
    auto it = written_.find(id);
    c.written.emplace_back(id, it == written_.end() ? 0 : it->second);
  }
  return c;
}

std::vector<std::int64_t> backlog_controller::finish_exit_check(const exit_check& check,
                                                                const std::vector<std::int64_t>& with_pending,
                                                                const std::function<bool(std::int64_t)>& busy) {
  std::vector<std::int64_t> left;
  for (const auto& [id, written_before] : check.written) {
    if (std::find(with_pending.begin(), with_pending.end(), id) != with_pending.end()) continue;
    if (unwritten_.contains(id)) continue;
    auto w = written_.find(id);
    if ((w == written_.end() ? 0 : w->second) != written_before) continue;
    if (busy && busy(id)) continue;
    if (backlog_.erase(id) > 0) left.push_back(id);
    table_.erase(id);
  }
  return left;
}

}  // namespace walhook::relay
