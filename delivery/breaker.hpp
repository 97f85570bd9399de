#pragma once
// Per-endpoint circuit breaker and auto-disable (docs/architecture.md, Rules). Pure: time is a parameter.
//
//   closed ──(failure_threshold consecutive failures)──► paused until now + pause_step
//   paused ──(pause over)──► probing: at most max_concurrency attempts go out
//   probing ──success──► closed (counters reset)
//   probing ──failure──► paused again, 1 min longer each round, up to max_pause
//   any ──(failing continuously for disable_after)──► disabled (operator re-enables)
//
// The state is mirrored to walhook.endpoint_health so it survives restarts.

#include <chrono>
#include <optional>

namespace walhook::delivery {

struct breaker_policy {
  int failure_threshold = 20;                 ///< consecutive failures that open the breaker
  std::chrono::seconds pause_step{60};        ///< first pause, and the extension per failed probe round
  std::chrono::seconds max_pause{3600};       ///< longest pause
  std::chrono::seconds disable_after{5 * 24 * 3600};  ///< failing continuously this long → disabled
};

struct breaker_state {
  using time_point = std::chrono::system_clock::time_point;
  int consecutive_failures = 0;
  std::optional<time_point> first_failure_at;  ///< start of the current failure streak
  std::optional<time_point> last_failure_at;
  std::optional<time_point> last_success_at;
  std::optional<time_point> paused_until;      ///< set while open (and kept while probing)
  int probe_rounds = 0;                        ///< failed probe rounds in this streak
  bool operator==(const breaker_state&) const = default;
};

enum class breaker_mode { closed, paused, probing };

/// The breaker's mode at `now`.
breaker_mode mode(const breaker_state& s, std::chrono::system_clock::time_point now);

enum class breaker_action {
  none,
  paused,    ///< the endpoint was just paused (or its pause extended) until paused_until
  disable,   ///< failing for disable_after: disable the endpoint
};

/// A successful attempt: closes the breaker and resets the streak.
void record_success(breaker_state& s, std::chrono::system_clock::time_point now);

/// A failed attempt. Failures that land while already paused (the rest of a probe round) do
/// not extend the pause again.
breaker_action record_failure(breaker_state& s, std::chrono::system_clock::time_point now,
                              const breaker_policy& policy);

}  // namespace walhook::delivery
