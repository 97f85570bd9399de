// relay/core/backlog.hpp: lanes, throughput, claim sizes, back-pressure judgement, and leaving backlog
// mode without a lost wakeup. Time is a parameter; nothing sleeps.

#include "relay/core/backlog.hpp"

#include <doctest/doctest.h>

#include <random>
#include <set>

using namespace walhook::relay;
using namespace std::chrono_literals;

namespace {
const steady_time t0 = steady_time{} + 1000h;

endpoint_load load(std::size_t queued, std::size_t in_flight, int max_concurrency = 4) {
  endpoint_load l;
  l.queued = queued;
  l.in_flight = in_flight;
  l.max_concurrency = max_concurrency;
  return l;
}
}  // namespace

TEST_CASE("backlog: a pending write puts an endpoint in backlog mode; a drained one leaves it") {
  backlog_controller b;
  CHECK(b.lane_of(1) == lane::memory);
  b.pending_queued(1);
  CHECK(b.lane_of(1) == lane::backlog);
  auto check = b.begin_exit_check({1});
  CHECK(b.finish_exit_check(check, {}).empty());  // its write is still on its way
  b.pending_durable(1);
  check = b.begin_exit_check({1});
  CHECK(b.finish_exit_check(check, {1}).empty());  // PostgreSQL says it has rows
  check = b.begin_exit_check({1});
  CHECK(b.finish_exit_check(check, {}) == std::vector<std::int64_t>{1});
  CHECK(b.lane_of(1) == lane::memory);
}

TEST_CASE("backlog: the lost-wakeup race — a row that becomes durable during the check keeps the endpoint") {
  backlog_controller b;
  b.pending_queued(1);
  b.pending_durable(1);
  b.pending_queued(2);
  b.pending_durable(2);
  auto check = b.begin_exit_check({1, 2});
  // While next_due runs, another pending row of endpoint 1 is queued and committed: the answer
  // (no rows for either) may predate it.
  b.pending_queued(1);
  b.pending_durable(1);
  auto left = b.finish_exit_check(check, {});
  CHECK(left == std::vector<std::int64_t>{2});
  CHECK(b.has_backlog(1));
  CHECK_FALSE(b.has_backlog(2));
}

TEST_CASE("backlog: busy endpoints stay (aggregate order with an attempt in flight)") {
  backlog_controller b;
  b.wake(1);
  b.wake(2);
  auto check = b.begin_exit_check({1, 2});
  auto left = b.finish_exit_check(check, {}, [](std::int64_t id) { return id == 1; });
  CHECK(left == std::vector<std::int64_t>{2});
}

TEST_CASE("backlog: the table lane — set when an endpoint cannot keep up, cleared with its backlog") {
  backlog_controller b;
  CHECK(b.use_table(3));
  CHECK_FALSE(b.use_table(3));
  CHECK(b.lane_of(3) == lane::table);
  CHECK(b.has_backlog(3));
  auto check = b.begin_exit_check({3});
  b.finish_exit_check(check, {});
  CHECK(b.lane_of(3) == lane::memory);
}

TEST_CASE("backlog: reset at session start keeps endpoints with writes on their way") {
  backlog_controller b;
  b.pending_queued(1);
  b.wake(2);
  b.use_table(2);
  b.reset({5});
  CHECK(b.has_backlog(1));
  CHECK_FALSE(b.has_backlog(2));
  CHECK(b.lane_of(2) == lane::memory);
  CHECK(b.has_backlog(5));
}

TEST_CASE("backlog: capacity is max_concurrency over the mean attempt duration (Little's law)") {
  backlog_controller b;
  CHECK_FALSE(b.capacity(1, 4).has_value());
  b.attempt_finished(1, 10ms);
  CHECK(*b.capacity(1, 4) == doctest::Approx(400.0));  // 4 slots, 10 ms each
  // Answers that take 2 s: the estimate follows within a few dozen attempts.
  for (int i = 0; i < 60; ++i) b.attempt_finished(1, 2s);
  CHECK(*b.capacity(1, 4) == doctest::Approx(2.0).epsilon(0.01));
  // Four answers arriving together after 2 s each do not look like thousands per second.
  backlog_controller c;
  for (int i = 0; i < 4; ++i) c.attempt_finished(1, 2s);
  CHECK(*c.capacity(1, 4) == doctest::Approx(2.0));
  // An answer faster than the clock can tell counts as 50 µs, not as infinitely fast.
  backlog_controller d;
  d.attempt_finished(1, 0ns);
  CHECK(*d.capacity(1, 1) == doctest::Approx(20000.0));
}

TEST_CASE("backlog: stalled means every slot held by an attempt older than the hold bound") {
  backlog_controller b;  // hold bound 250 ms
  auto l = load(10, 4);
  l.youngest_attempt = t0;
  CHECK_FALSE(b.stalled(l, t0 + 249ms));
  CHECK(b.stalled(l, t0 + 250ms));
  l.in_flight = 3;  // a free slot: not stalled
  CHECK_FALSE(b.stalled(l, t0 + 10s));
}

TEST_CASE("backlog: keeps_up — a full queue whose head has waited less than half the wait bound holds the stream") {
  backlog_controller b;  // wait bound 1 s
  auto l = load(1000, 4);
  l.oldest_queued = t0;
  l.youngest_attempt = t0;
  CHECK(b.keeps_up(l, t0 + 1ms));
  CHECK(b.keeps_up(l, t0 + 200ms));
  CHECK_FALSE(b.keeps_up(l, t0 + 501ms));  // waited more than half the bound
  // Whatever attempt durations suggested: only the wait counts.
  b.attempt_finished(1, 2s);
  l.youngest_attempt = t0 + 100ms;
  CHECK(b.keeps_up(l, t0 + 120ms));
  // Stalled never keeps up.
  auto stalled = l;
  stalled.youngest_attempt = t0 - 1s;
  CHECK_FALSE(b.keeps_up(stalled, t0 + 100ms));
}

TEST_CASE("backlog: claim sizes follow throughput, never tiny, never beyond the queue cap") {
  backlog_policy p;
  p.max_claim = 1000;  // the queue cap bounds it here; the next test caps claims themselves
  backlog_controller b(p);
  // Unknown throughput: 4 rounds of max_concurrency.
  CHECK(b.claim_size(1, load(0, 0, 4), t0) == 16);
  CHECK(b.claim_size(1, load(0, 0, 16), t0) == 64);
  // Less than half of the target free: wait for more room.
  CHECK(b.claim_size(1, load(6, 4, 4), t0) == 0);
  CHECK(b.claim_size(1, load(4, 4, 4), t0) == 8);
  // 10,000/s (4 slots × 0.4 ms) → 5,000 in the 500 ms horizon, capped at the 1,000-row queue.
  b.attempt_finished(2, 400us);
  CHECK(b.claim_size(2, load(0, 4, 4), t0 + 100ms) == 996);
  // 100/s (4 slots × 40 ms) → 50.
  b.attempt_finished(3, 40ms);
  CHECK(b.claim_size(3, load(0, 0, 4), t0 + 100ms) == 50);
  // A stalled endpoint gets nothing; a probing one one round, only with nothing in flight.
  auto stalled = load(0, 4, 4);
  stalled.youngest_attempt = t0;
  CHECK(b.claim_size(1, stalled, t0 + 1s) == 0);
  auto probing = load(0, 0, 4);
  probing.probing = true;
  CHECK(b.claim_size(1, probing, t0) == 4);
  probing.in_flight = 1;
  CHECK(b.claim_size(1, probing, t0) == 0);
}

TEST_CASE("backlog: model-based — an endpoint leaves backlog mode only when nothing of it is pending") {
  // Random interleavings of writes queued, writes durable, rows claimed and checks (with
  // answers that may be stale by one step, as a real query's are). Invariant: whenever the
  // controller lets an endpoint leave, the model has no pending row and no write on its way.
  for (unsigned seed = 1; seed <= 50; ++seed) {
    std::mt19937 rng(seed);
    backlog_controller b;
    int unwritten = 0, rows = 0;  // the model: writes on their way, pending rows in the table
    for (int step = 0; step < 400; ++step) {
      switch (rng() % 4) {
        case 0:
          b.pending_queued(1);
          ++unwritten;
          break;
        case 1:
          if (unwritten > 0) {
            b.pending_durable(1);
            --unwritten;
            ++rows;
          }
          break;
        case 2:
          if (rows > 0) --rows;  // claimed and delivered
          break;
        case 3: {
          auto check = b.begin_exit_check({1});
          int rows_seen = rows;  // the query's snapshot
          if (rng() % 2 && unwritten > 0) {  // a write commits while it runs
            b.pending_durable(1);
            --unwritten;
            ++rows;
          }
          auto left = b.finish_exit_check(check, rows_seen > 0 ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{});
          if (!left.empty()) {
            CAPTURE(seed);
            CAPTURE(step);
            CHECK(rows == 0);
            CHECK(unwritten == 0);
          }
          if (rows > 0 || unwritten > 0) CHECK(b.has_backlog(1));
          break;
        }
      }
    }
  }
}

TEST_CASE("backlog: one claim takes at most max_claim rows (small transactions for the walsender to decode)") {
  backlog_controller b;  // max_claim 200
  b.attempt_finished(2, 400us);
  CHECK(b.claim_size(2, load(0, 4, 4), t0 + 100ms) == 200);
  // Never below one round of max_concurrency, whatever the cap.
  backlog_policy tiny;
  tiny.max_claim = 1;
  backlog_controller c(tiny);
  CHECK(c.claim_size(1, load(0, 0, 8), t0) == 8);
}

TEST_CASE("backlog: a slow endpoint is handed what it can take in the horizon, not hundreds of rows") {
  backlog_controller b;
  for (int i = 0; i < 8; ++i) b.attempt_finished(1, 2s);  // 4 slots × 2 s = 2/s
  CHECK(b.claim_size(1, load(0, 0, 4), t0) == 4);        // at least one round of max_concurrency
  backlog_controller hung;
  hung.attempt_finished(1, 5s);  // timed out
  CHECK(hung.claim_size(1, load(0, 0, 4), t0) == 4);
}
