#pragma once
// An endpoint's rate limit (walhook.endpoints.max_rate / rate_burst, migration 012;
// docs/endpoint-policies.md): attempts started at most `count` per `period` over *any* window of
// that length — a sliding log of the last `count` start times, so the bound is exact, not an
// average — and at most `burst` at once (a token bucket of `burst` tokens refilled at the rate).
// A 429 or a Retry-After from the endpoint halves the rate for a minute (slow_down).
//
// Pure: time is a parameter. Single-threaded (the scheduler's).

#include <boost/system/result.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::delivery {

struct rate {
  int count = 0;                          ///< attempts…
  std::chrono::milliseconds period{1000};  ///< …per this window (1 s or 1 min)
  bool operator==(const rate&) const = default;
};

/// "20/s" or "600/m" (1 to 100,000 per window). Errors: std::errc::invalid_argument.
boost::system::result<rate> parse_rate(std::string_view text);
/// "20/s"
std::string to_string(const rate& r);

class rate_limiter {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// `burst` ≤ 0 or over r.count: r.count (the whole window's worth at once).
  rate_limiter(rate r, int burst);

  /// The earliest time an attempt may start: `now` or earlier if one may start now.
  time_point available_at(time_point now) const;
  /// An attempt started at `now` (after available_at(now) ≤ now).
  void started(time_point now);
  /// The endpoint pushed back (HTTP 429, Retry-After): half the rate until now + `for_how_long`.
  void slow_down(time_point now, std::chrono::milliseconds for_how_long = std::chrono::minutes(1));
  /// The count allowed per window at `now` (halved while slowed down).
  int allowed(time_point now) const;

  const rate& limit() const { return rate_; }
  int burst() const { return burst_; }

 private:
  rate rate_;
  int burst_;
  std::vector<time_point> log_;  ///< ring of the last rate_.count start times
  std::size_t next_ = 0;         ///< where the next start goes (the oldest, once the ring is full)
  double tokens_;
  time_point refilled_{};
  time_point slowed_until_{};
};

}  // namespace walhook::delivery
