// The per-endpoint circuit breaker and auto-disable (delivery/breaker.hpp, docs/architecture.md, Rules), driven by
// a fake clock.

#include "delivery/breaker.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <random>

using namespace walhook::delivery;
using namespace std::chrono_literals;
using time_point = std::chrono::system_clock::time_point;

namespace {

const time_point t0 = std::chrono::sys_days{std::chrono::year{2026} / 3 / 1} + 9h;

/// Records `n` failures one second apart starting at `at`; returns the last action and moves
/// `at` past them.
breaker_action fail_n(breaker_state& s, int n, time_point& at, const breaker_policy& p = {}) {
  breaker_action last = breaker_action::none;
  for (int i = 0; i < n; ++i) {
    last = record_failure(s, at, p);
    at += 1s;
  }
  return last;
}

/// Opens the breaker with the default policy; returns when it was paused.
time_point open_breaker(breaker_state& s, time_point at) {
  for (int i = 0; i < 19; ++i) REQUIRE(record_failure(s, at, {}) == breaker_action::none);
  REQUIRE(record_failure(s, at, {}) == breaker_action::paused);
  return at;
}

}  // namespace

TEST_CASE("breaker: a fresh state is closed") {
  breaker_state s;
  CHECK(mode(s, t0) == breaker_mode::closed);
  CHECK(s.consecutive_failures == 0);
}

TEST_CASE("breaker: failure_threshold consecutive failures pause the endpoint for pause_step") {
  breaker_state s;
  time_point at = t0;
  CHECK(fail_n(s, 19, at) == breaker_action::none);
  CHECK(mode(s, at) == breaker_mode::closed);
  CHECK(s.consecutive_failures == 19);
  REQUIRE(s.first_failure_at);
  CHECK(*s.first_failure_at == t0);

  auto action = record_failure(s, at, {});
  CHECK(action == breaker_action::paused);
  REQUIRE(s.paused_until);
  CHECK(*s.paused_until == at + 60s);
  CHECK(s.probe_rounds == 0);
  CHECK(mode(s, at) == breaker_mode::paused);
  CHECK(mode(s, at + 59s) == breaker_mode::paused);
  // The pause is over at paused_until exactly: the endpoint is probed.
  CHECK(mode(s, at + 60s) == breaker_mode::probing);
  CHECK(mode(s, at + 1h) == breaker_mode::probing);
}

TEST_CASE("breaker: a success resets the streak, so failures must be consecutive") {
  breaker_state s;
  time_point at = t0;
  CHECK(fail_n(s, 19, at) == breaker_action::none);
  record_success(s, at);
  CHECK(s.consecutive_failures == 0);
  CHECK_FALSE(s.first_failure_at);
  REQUIRE(s.last_success_at);
  CHECK(*s.last_success_at == at);
  CHECK(fail_n(s, 19, at) == breaker_action::none);
  CHECK(mode(s, at) == breaker_mode::closed);
  CHECK(record_failure(s, at, {}) == breaker_action::paused);
}

TEST_CASE("breaker: late failures while paused do not extend the pause") {
  breaker_state s;
  const time_point opened = open_breaker(s, t0);
  const auto until = *s.paused_until;
  // The rest of the round that opened it (max_concurrency attempts in flight) fail too.
  for (int i = 0; i < 10; ++i) {
    CHECK(record_failure(s, opened + std::chrono::seconds{i}, {}) == breaker_action::none);
    CHECK(*s.paused_until == until);
    CHECK(s.probe_rounds == 0);
  }
  CHECK(s.consecutive_failures == 30);
  REQUIRE(s.last_failure_at);
  CHECK(*s.last_failure_at == opened + 9s);
}

TEST_CASE("breaker: each failed probe round extends the pause by pause_step more, up to max_pause") {
  breaker_state s;
  time_point at = open_breaker(s, t0);
  std::chrono::seconds expected_pause = 60s;
  for (int round = 1; round <= 70; ++round) {
    CAPTURE(round);
    at = *s.paused_until;  // pause over: probe
    REQUIRE(mode(s, at) == breaker_mode::probing);
    CHECK(record_failure(s, at, {}) == breaker_action::paused);
    CHECK(s.probe_rounds == round);
    expected_pause = std::min<std::chrono::seconds>(60s * (round + 1), 3600s);
    CHECK(*s.paused_until == at + expected_pause);
    CHECK(mode(s, at) == breaker_mode::paused);
    // The other probes of the round land while paused again: no further extension.
    CHECK(record_failure(s, at + 1s, {}) == breaker_action::none);
    CHECK(*s.paused_until == at + expected_pause);
  }
  CHECK(expected_pause == 1h);
}

TEST_CASE("breaker: a successful probe closes the breaker and resets every counter") {
  breaker_state s;
  time_point at = open_breaker(s, t0);
  at = *s.paused_until;
  REQUIRE(record_failure(s, at, {}) == breaker_action::paused);  // one failed probe round
  at = *s.paused_until + 5s;
  REQUIRE(mode(s, at) == breaker_mode::probing);
  record_success(s, at);
  CHECK(mode(s, at) == breaker_mode::closed);
  CHECK(s.consecutive_failures == 0);
  CHECK(s.probe_rounds == 0);
  CHECK_FALSE(s.paused_until);
  CHECK_FALSE(s.first_failure_at);
  // Next trouble starts over: threshold again, then the first pause is pause_step again.
  CHECK(fail_n(s, 19, at) == breaker_action::none);
  CHECK(record_failure(s, at, {}) == breaker_action::paused);
  CHECK(*s.paused_until == at + 60s);
}

TEST_CASE("breaker: a late success while paused also closes it") {
  breaker_state s;
  time_point at = open_breaker(s, t0);
  record_success(s, at + 2s);
  CHECK(mode(s, at + 2s) == breaker_mode::closed);
  CHECK(s.consecutive_failures == 0);
}

TEST_CASE("breaker: failing continuously for disable_after disables the endpoint") {
  breaker_state s;
  const breaker_policy p;
  CHECK(record_failure(s, t0, p) == breaker_action::none);
  CHECK(record_failure(s, t0 + 5 * 24h - 1s, p) != breaker_action::disable);
  CHECK(record_failure(s, t0 + 5 * 24h, p) == breaker_action::disable);
  CHECK(record_failure(s, t0 + 6 * 24h, p) == breaker_action::disable);
}

TEST_CASE("breaker: disable also fires while paused or probing, and a success restarts the clock") {
  breaker_state s;
  time_point at = open_breaker(s, t0);
  // Keep failing every probe round for 5 days (bounded, so a regression fails instead of hanging).
  for (int round = 0; round < 1000 && at - t0 < 5 * 24h; ++round) {
    at = std::max(*s.paused_until, at + 1s);
    auto action = record_failure(s, at, {});
    if (at - t0 >= 5 * 24h) {
      CHECK(action == breaker_action::disable);
    } else {
      CHECK(action == breaker_action::paused);
    }
  }
  CHECK(at - t0 >= 5 * 24h);
  // A late failure while paused, after 5 days, disables too.
  breaker_state paused;
  time_point p_at = open_breaker(paused, t0);
  paused.paused_until = p_at + 10 * 24h;  // a long pause, e.g. restored from endpoint_health
  CHECK(record_failure(paused, t0 + 5 * 24h, {}) == breaker_action::disable);

  // Success in between: the continuous-failure clock starts over.
  breaker_state r;
  CHECK(record_failure(r, t0, {}) == breaker_action::none);
  record_success(r, t0 + 4 * 24h);
  CHECK(record_failure(r, t0 + 4 * 24h + 1s, {}) == breaker_action::none);
  CHECK(record_failure(r, t0 + 8 * 24h, {}) == breaker_action::none);
  CHECK(record_failure(r, t0 + 9 * 24h + 1s, {}) == breaker_action::disable);
}

TEST_CASE("breaker: custom policy numbers") {
  breaker_policy p;
  p.failure_threshold = 1;
  p.pause_step = 10s;
  p.max_pause = 25s;
  p.disable_after = 1h;
  breaker_state s;
  time_point at = t0;
  CHECK(record_failure(s, at, p) == breaker_action::paused);
  CHECK(*s.paused_until == at + 10s);
  std::chrono::seconds expected[] = {20s, 25s, 25s, 25s};
  for (auto e : expected) {
    at = *s.paused_until;
    CHECK(record_failure(s, at, p) == breaker_action::paused);
    CHECK(*s.paused_until == at + e);
  }
  CHECK(record_failure(s, t0 + 1h, p) == breaker_action::disable);
}

TEST_CASE("breaker: a first pause longer than max_pause is capped") {
  breaker_policy p;
  p.failure_threshold = 2;
  p.pause_step = 2h;
  p.max_pause = 1h;
  breaker_state s;
  CHECK(record_failure(s, t0, p) == breaker_action::none);
  CHECK(record_failure(s, t0, p) == breaker_action::paused);
  CHECK(*s.paused_until == t0 + 1h);
  CHECK(record_failure(s, t0 + 1h, p) == breaker_action::paused);
  CHECK(*s.paused_until == t0 + 2h);
}

TEST_CASE("breaker: random outcome sequences respect the pause bounds") {
  const breaker_policy p;
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    breaker_state s;
    time_point at = t0;
    int closed_streak = 0;  // failures counted while closed since the last success
    for (int step = 0; step < 2000; ++step) {
      at += std::chrono::seconds{std::uniform_int_distribution<int>(0, 90)(rng)};
      const auto before = mode(s, at);
      const auto before_state = s;
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
        record_success(s, at);
        CHECK(mode(s, at) == breaker_mode::closed);
        CHECK(s.consecutive_failures == 0);
        closed_streak = 0;
        continue;
      }
      auto action = record_failure(s, at, p);
      CHECK(s.consecutive_failures == before_state.consecutive_failures + 1);
      REQUIRE(s.first_failure_at);
      if (at - *s.first_failure_at >= p.disable_after) {
        CHECK(action == breaker_action::disable);
        continue;
      }
      switch (before) {
        case breaker_mode::closed:
          ++closed_streak;
          CHECK((action == breaker_action::paused) == (s.consecutive_failures >= p.failure_threshold));
          break;
        case breaker_mode::paused:
          CHECK(action == breaker_action::none);
          CHECK(s.paused_until == before_state.paused_until);
          break;
        case breaker_mode::probing:
          CHECK(action == breaker_action::paused);
          CHECK(s.probe_rounds == before_state.probe_rounds + 1);
          break;
      }
      if (s.paused_until) {
        CHECK(*s.paused_until - at <= p.max_pause);
        CHECK(*s.paused_until > at - p.max_pause);
      }
      CHECK(closed_streak <= p.failure_threshold);
    }
  }
}
