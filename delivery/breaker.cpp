#include "delivery/breaker.hpp"

#include <algorithm>

namespace walhook::delivery {

breaker_mode mode(const breaker_state& s, std::chrono::system_clock::time_point now) {
  if (!s.paused_until) return breaker_mode::closed;
  return now < *s.paused_until ? breaker_mode::paused : breaker_mode::probing;
}

void record_success(breaker_state& s, std::chrono::system_clock::time_point now) {
  s.consecutive_failures = 0;
  s.first_failure_at.reset();
  s.paused_until.reset();
  s.probe_rounds = 0;
  s.last_success_at = now;
}

breaker_action record_failure(breaker_state& s, std::chrono::system_clock::time_point now,
                              const breaker_policy& policy) {
  breaker_mode before = mode(s, now);
  ++s.consecutive_failures;
  if (!s.first_failure_at) s.first_failure_at = now;
  s.last_failure_at = now;
  if (now - *s.first_failure_at >= policy.disable_after) return breaker_action::disable;
  switch (before) {
    case breaker_mode::paused:
      return breaker_action::none;  // late result of the round that paused it
    case breaker_mode::probing: {
      ++s.probe_rounds;
      auto pause = std::min<std::chrono::seconds>(policy.pause_step * (s.probe_rounds + 1), policy.max_pause);
      s.paused_until = now + pause;
      return breaker_action::paused;
    }
    case breaker_mode::closed:
      if (s.consecutive_failures >= policy.failure_threshold) {
        s.paused_until = now + std::min(policy.pause_step, policy.max_pause);
        s.probe_rounds = 0;
        return breaker_action::paused;
      }
      return breaker_action::none;
  }
  return breaker_action::none;
}

}  // namespace walhook::delivery
