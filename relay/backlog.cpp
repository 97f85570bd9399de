#include "relay/backlog.hpp"

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
  rates_.erase(id);
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

void backlog_controller::attempt_finished(std::int64_t id, steady_time now) {
  auto& r = rates_[id];
  if (!r.started) {
    r.started = true;
    r.window_start = now;
  }
  auto elapsed = now - r.window_start;
  if (elapsed >= policy_.rate_window) {
    // Roll over: the window that just ended becomes the previous one (empty if more passed).
    r.has_previous = true;
    r.previous = elapsed < 2 * policy_.rate_window ? r.current : 0;
    r.current = 0;
    r.window_start = elapsed < 2 * policy_.rate_window ? r.window_start + policy_.rate_window : now;
  }
  ++r.current;
}

std::optional<double> backlog_controller::throughput(std::int64_t id, int max_concurrency, steady_time now) const {
  auto it = rates_.find(id);
  if (it == rates_.end()) return std::nullopt;
  const auto& r = it->second;
  auto in_window = std::chrono::duration<double>(now - r.window_start).count();
  double window = std::chrono::duration<double>(policy_.rate_window).count();
  if (in_window >= 2 * window) return 0.0;  // nothing ended for two windows
  std::uint64_t count = in_window >= window ? r.current : r.current + r.previous;
  double span = in_window >= window ? in_window : in_window + (r.has_previous ? window : 0.0);
  if (count < static_cast<std::uint64_t>(std::max(1, max_concurrency))) return std::nullopt;
  return static_cast<double>(count) / std::max(span, 0.001);
}

bool backlog_controller::stalled(const endpoint_load& load, steady_time now) const {
  return load.in_flight >= static_cast<std::size_t>(std::max(1, load.max_concurrency)) && load.youngest_attempt &&
         now - *load.youngest_attempt >= policy_.hold_bound;
}

bool backlog_controller::keeps_up(std::int64_t id, const endpoint_load& load, steady_time now) const {
  if (stalled(load, now)) return false;
  const auto half = policy_.wait_bound / 2;
  if (load.oldest_queued && now - *load.oldest_queued > half) return false;
  if (auto r = throughput(id, load.max_concurrency, now); r && load.queued > 0) {
    double drain_s = static_cast<double>(load.queued) / std::max(*r, 1e-9);
    if (drain_s > std::chrono::duration<double>(half).count()) return false;
  }
  return true;
}

std::size_t backlog_controller::claim_size(std::int64_t id, const endpoint_load& load, steady_time now) const {
  const std::size_t slots = static_cast<std::size_t>(std::max(1, load.max_concurrency));
  const std::size_t have = load.queued + load.in_flight;
  if (load.probing) return load.in_flight > 0 || have >= slots ? 0 : slots - have;
  if (stalled(load, now)) return 0;
  std::size_t target = policy_.first_claim_rounds * slots;
  if (auto r = throughput(id, load.max_concurrency, now))
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
