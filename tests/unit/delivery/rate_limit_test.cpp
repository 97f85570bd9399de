// The rate limiter (delivery/rate_limit.hpp): parsing, the exact sliding-window bound under a
// greedy caller at random instants, the burst, and the slow-down after a 429.

#include "delivery/rate_limit.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

using namespace walhook::delivery;
using namespace std::chrono_literals;
using time_point = rate_limiter::time_point;

namespace {

const time_point t0 = time_point{} + 1000h;

/// The most starts in any window of `window` (half-open: [t, t + window)).
std::size_t most_in_window(const std::vector<time_point>& starts, std::chrono::nanoseconds window) {
  std::size_t best = 0;
  std::size_t j = 0;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    while (starts[i] - starts[j] >= window) ++j;
    best = std::max(best, i - j + 1);
  }
  return best;
}

/// A caller that starts whenever the limiter lets it, polling at random instants.
std::vector<time_point> greedy(rate_limiter& l, std::chrono::milliseconds run, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> step_us(1, 20000);
  std::vector<time_point> starts;
  for (auto now = t0; now < t0 + run; now += std::chrono::microseconds(step_us(rng))) {
    while (l.available_at(now) <= now) {
      l.started(now);
      starts.push_back(now);
    }
  }
  return starts;
}

}  // namespace

TEST_CASE("parse_rate: N/s and N/m, nothing else") {
  CHECK(parse_rate("20/s").value() == rate{20, 1s});
  CHECK(parse_rate("600/m").value() == rate{600, 1min});
  CHECK(to_string(*parse_rate("600/m")) == "600/m");
  for (const char* bad : {"", "20", "20/", "/s", "0/s", "020/s", "-1/s", "20/h", "20/ss", "100001/s", "2.5/s", " 20/s"}) {
    INFO(bad);
    CHECK_FALSE(parse_rate(bad).has_value());
  }
}

TEST_CASE("rate_limiter: never more than N starts in any window, and N of them do start") {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    rate_limiter l(rate{20, 1s}, 0);
    const auto starts = greedy(l, 10s, seed);
    CHECK(most_in_window(starts, 1s) == 20);
    // A greedy caller gets the whole rate: 20 per second, give or take the poll step.
    CHECK(starts.size() >= 199);
    CHECK(starts.size() <= 200);
  }
  rate_limiter per_minute(rate{30, 1min}, 0);
  const auto starts = greedy(per_minute, 5min, 7);
  CHECK(most_in_window(starts, 1min) == 30);
}

TEST_CASE("rate_limiter: a burst of B spreads the rest") {
  rate_limiter l(rate{20, 1s}, 5);
  const auto starts = greedy(l, 10s, 3);
  CHECK(most_in_window(starts, 1s) <= 20);
  CHECK(most_in_window(starts, 1ms) <= 5);    // never more than the burst at once
  CHECK(most_in_window(starts, 100ms) <= 6);  // 5, then one per 50 ms
  CHECK(starts.size() >= 190);
}

TEST_CASE("rate_limiter: a 429 halves the rate for a minute, then it comes back") {
  rate_limiter l(rate{20, 1s}, 0);
  auto now = t0;
  l.slow_down(now);
  CHECK(l.allowed(now) == 10);
  std::vector<time_point> starts;
  for (; now < t0 + 30s; now += 1ms)
    while (l.available_at(now) <= now) {
      l.started(now);
      starts.push_back(now);
    }
  CHECK(most_in_window(starts, 1s) == 10);
  CHECK(l.allowed(t0 + 61s) == 20);
  rate_limiter one(rate{1, 1s}, 0);
  one.slow_down(t0);
  CHECK(one.allowed(t0) == 1);  // never below one
}
