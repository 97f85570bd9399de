#pragma once
// Delivery rules (docs/architecture.md, Rules): classification of an attempt, backoff with jitter, Retry-After,
// give-up limits. Pure functions: time and randomness are parameters, so every rule is tested
// with a fake clock and fixed random values.

#include "delivery/http_client.hpp"

#include <boost/system/result.hpp>

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace walhook::delivery {

using sys_time = std::chrono::system_clock::time_point;

struct retry_policy {
  int max_attempts = 20;                             ///< give up after this many attempts → dead
  std::chrono::seconds max_age{72 * 3600};           ///< give up once the event is this old → dead
  std::chrono::milliseconds backoff_base{30'000};      ///< delay after the 1st failure (before jitter)
  std::chrono::milliseconds backoff_max{6 * 3600'000}; ///< cap of the exponential delay
  std::chrono::seconds retry_after_max{6 * 3600};    ///< Retry-After honoured up to this
};

enum class verdict {
  delivered,  ///< 2xx
  retry,      ///< 3xx, 429, 5xx, other 4xx, transport errors: try again later
  dead,       ///< 413 Payload Too Large: will not improve
  gone,       ///< 410 Gone: the endpoint is disabled and the delivery dead
};

struct attempt_outcome {
  verdict kind = verdict::retry;
  int status = 0;                                ///< HTTP status, 0 if no response
  /// Readable last_error ("" when delivered): at most max_error_text bytes, URLs (a 3xx's
  /// Location) redacted by redact_url.
  std::string error;
  std::optional<std::chrono::seconds> retry_after;  ///< server's Retry-After, already capped
};

/// How long a destination whose broker blocked publishing (connection.blocked) waits before it
/// tries again: classify() reports it as a Retry-After, so the endpoint pauses as for a 503.
inline constexpr std::chrono::seconds broker_blocked_pause{15};

/// Classifies one attempt. A transport error is a retry, except bad_message (dead: the event
/// cannot become a message) and broker_blocked (a retry with Retry-After broker_blocked_pause). `now` resolves HTTP-date Retry-After values.
attempt_outcome classify(const post_result& response, sys_time now,
                         const retry_policy& policy = {});

/// Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date (IMF-fixdate, RFC 850 or
/// asctime form). Returns the delay from `now` (a past date gives 0), std::nullopt if invalid.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value, sys_time now);

/// Delay before the next attempt after the n-th consecutive failure (n ≥ 1):
/// d = min(backoff_max, backoff_base · 2^(n−1)); result = d/2 + unit_random · d/2 in whole ms,
/// always in [d/2, d) and at least 1 ms — never an immediate retry. unit_random ∈ [0, 1)
/// (values outside are clamped).
std::chrono::milliseconds backoff_delay(int failures, const retry_policy& policy, double unit_random);

struct retry_decision {
  bool give_up = false;
  sys_time next_attempt_at{};
  std::string reason;  ///< why it gave up
};

/// After a failed attempt: give up (20 attempts, or the event is 72 h old), or schedule the
/// next attempt at backoff, floored by Retry-After. `attempts_made` includes the failed one.
retry_decision next_attempt(int attempts_made, sys_time now, std::optional<sys_time> event_created_at,
                            std::optional<std::chrono::seconds> retry_after, const retry_policy& policy,
                            double unit_random);

/// After a failed attempt of a delivery whose endpoint has a retry schedule of its own (an inbox
/// destination, migration 011): the `failures`-th failure (1-based) waits schedule[failures-1]
/// (±10 % jitter), floored by Retry-After; past the schedule's end it gives up ("quarantined").
retry_decision scheduled_attempt(int failures, sys_time now, std::span<const std::chrono::milliseconds> schedule,
                                 std::optional<std::chrono::seconds> retry_after, const retry_policy& policy,
                                 double unit_random);

/// The wait after the `deferrals`-th "not yet" answer (1-based; an inbox destination's 409/425):
/// Retry-After when the answer has one (up to retry_after_max), else 1 s, 2 s, 4 s, … at most
/// 60 s, each with −20 %…+20 % jitter — short, since what it waits for is usually on its way.
std::chrono::milliseconds deferral_delay(int deferrals, std::optional<std::chrono::seconds> retry_after,
                                         const retry_policy& policy, double unit_random);

}  // namespace walhook::delivery
