// relay/core/decisions.hpp as tables: admission of a delivery, and the outcome of an attempt
// (docs/architecture.md, Rules). Pure functions: every row states its inputs and what must come out.

#include "delivery/signing.hpp"
#include "relay/core/decisions.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::relay;
using namespace std::chrono_literals;

namespace {

const sys_time now = sys_time{} + 1'800'000'000s;

endpoint active_endpoint(bool ordered = false) {
  endpoint e;
  e.id = 1;
  e.tenant_id = "t";
  e.url = "https://hooks.example/in";
  e.secret = delivery::generate_secret();
  e.aggregate_ordering = ordered;
  resolve_endpoint(e);
  return e;
}

delivery::job make_job(std::optional<std::string> merge_key = {}, std::optional<std::int64_t> row_id = {},
                       std::size_t body_size = 100, int attempts = 0) {
  auto ev = std::make_shared<delivery::event>();
  ev->id = "00000000-0000-0000-0000-000000000001";
  ev->tenant_id = "t";
  ev->created_at = "2027-01-15 08:00:00+00";
  ev->merge_key = std::move(merge_key);
  ev->body = std::string(body_size, 'x');
  delivery::job j;
  j.ev = ev;
  j.endpoint_id = 1;
  j.row_id = row_id;
  j.attempts = attempts;
  j.ticket = row_id ? 0 : 7;
  return j;
}

delivery::attempt_outcome outcome(delivery::verdict v, int status, std::string error = {},
                                  std::optional<std::chrono::seconds> retry_after = {}) {
  return {v, status, std::move(error), retry_after};
}

}  // namespace

TEST_CASE("admit: the table of rules, in order") {
  admission_policy policy;
  policy.max_payload_bytes = 1000;
  auto ok = active_endpoint();
  auto ordered = active_endpoint(true);
  auto bad_url = active_endpoint();
  bad_url.url = "gopher://x";
  resolve_endpoint(bad_url);
  auto paused = active_endpoint();
  paused.status = endpoint_status::paused;
  auto disabled = active_endpoint();
  disabled.status = endpoint_status::disabled;
  delivery::breaker_state closed;
  delivery::breaker_state open;
  open.consecutive_failures = 20;
  open.paused_until = now + 60s;
  delivery::breaker_state probing = open;
  probing.paused_until = now - 1s;

  struct row {
    const char* what;
    delivery::job job;
    const endpoint* ep;
    delivery::breaker_state health;
    lane l;
    fate expected;
    sql::delivery_status status;  // when written
    std::string reason;
    std::optional<sys_time> due;  // when written pending
  };
  auto marked = make_job();
  marked.marked = true;
  auto foreign = make_job({}, 5);
  std::const_pointer_cast<delivery::event>(foreign.ev)->tenant_id = "other";
  std::vector<row> rows{
      {"another tenant's endpoint (id reused, or moved)", foreign, &ok, closed, lane::memory, fate::write,
       sql::delivery_status::dead, "the endpoint belongs to another tenant than the event", {}},
      {"endpoint gone, stream job", make_job(), nullptr, closed, lane::memory, fate::write,
       sql::delivery_status::dead, "endpoint no longer exists", {}},
      {"endpoint gone, claimed job", make_job({}, 5), nullptr, closed, lane::memory, fate::write,
       sql::delivery_status::dead, "endpoint no longer exists", {}},
      {"endpoint gone, marked job", marked, nullptr, closed, lane::memory, fate::write, sql::delivery_status::dead,
       "endpoint no longer exists", {}},
      {"bad URL", make_job(), &bad_url, closed, lane::memory, fate::write, sql::delivery_status::dead,
       "invalid endpoint URL: gopher://x", {}},
      {"body too large", make_job({}, {}, 1001), &ok, closed, lane::memory, fate::write, sql::delivery_status::dead,
       "request body of 1001 bytes exceeds the limit of 1000 bytes", {}},
      {"body at the limit", make_job({}, {}, 1000), &ok, closed, lane::memory, fate::queue, {}, "", {}},
      {"operator paused", make_job(), &paused, closed, lane::memory, fate::write, sql::delivery_status::pending,
       "endpoint paused", now},
      {"disabled", make_job(), &disabled, closed, lane::memory, fate::write, sql::delivery_status::pending,
       "endpoint disabled", now},
      {"breaker open", make_job(), &ok, open, lane::memory, fate::write, sql::delivery_status::pending,
       "endpoint paused by the circuit breaker", now + 60s},
      {"breaker probing", make_job(), &ok, probing, lane::memory, fate::queue, {}, "", {}},
      {"healthy", make_job(), &ok, closed, lane::memory, fate::queue, {}, "", {}},
      {"table lane, stream job", make_job(), &ok, closed, lane::table, fate::write, sql::delivery_status::pending, "", now},
      {"table lane, claimed job", make_job({}, 5), &ok, closed, lane::table, fate::queue, {}, "", {}},
      {"backlog lane, fact", make_job(), &ok, closed, lane::backlog, fate::queue, {}, "", {}},
      {"backlog lane, state update", make_job("order:7"), &ok, closed, lane::backlog, fate::write,
       sql::delivery_status::pending, "", now},
      {"backlog lane, aggregate-ordered", make_job(), &ordered, closed, lane::backlog, fate::write,
       sql::delivery_status::pending, "", now},
      {"backlog lane, claimed state update", make_job("order:7", 5), &ok, closed, lane::backlog, fate::queue, {}, "", {}},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    auto a = admit(r.job, r.ep, r.health, r.l, now, policy);
    CHECK(a.what == r.expected);
    if (r.expected != fate::write) continue;
    CHECK(a.record.status == r.status);
    CHECK(a.record.attempts == r.job.attempts);
    CHECK(a.record.last_error.value_or("") == r.reason);
    CHECK(a.record.next_attempt_in == (r.due ? std::optional(*r.due - now) : std::nullopt));
    CHECK_FALSE(a.record.last_attempt_at.has_value());  // no attempt was made
  }
}

TEST_CASE("decide: the outcome of an attempt, as a table") {
  outcome_policy policy;
  policy.breaker.failure_threshold = 3;
  auto ep = active_endpoint();
  auto ordered = active_endpoint(true);
  delivery::breaker_state closed;
  delivery::breaker_state failing;
  failing.consecutive_failures = 2;
  failing.first_failure_at = now - 10s;
  delivery::breaker_state paused = failing;
  paused.paused_until = now - 1s;  // probing
  delivery::breaker_state days = failing;
  days.first_failure_at = now - 5 * 24h;

  struct row {
    const char* what;
    delivery::job job;
    const endpoint* ep;
    delivery::breaker_state breaker;
    delivery::attempt_outcome out;
    verdict result;
    fate what_;
    sql::delivery_status status;
    bool health;
    bool disable;
    bool pause;
    bool spill;
  };
  std::vector<row> rows{
      {"2xx, memory job", make_job(), &ep, closed, outcome(delivery::verdict::delivered, 200), verdict::delivered,
       fate::release, {}, false, false, false, false},
      {"2xx, claimed job", make_job({}, 9, 100, 3), &ep, closed, outcome(delivery::verdict::delivered, 200),
       verdict::delivered, fate::write, sql::delivery_status::delivered, false, false, false, false},
      {"2xx after failures closes the breaker", make_job(), &ep, failing, outcome(delivery::verdict::delivered, 204),
       verdict::delivered, fate::release, {}, true, false, false, false},
      {"410", make_job(), &ep, closed, outcome(delivery::verdict::gone, 410, "HTTP 410"), verdict::dead, fate::write,
       sql::delivery_status::dead, true, true, false, false},
      {"413", make_job(), &ep, closed, outcome(delivery::verdict::dead, 413, "HTTP 413"), verdict::dead, fate::write,
       sql::delivery_status::dead, false, false, false, false},
      {"500, first failure", make_job(), &ep, closed, outcome(delivery::verdict::retry, 500, "HTTP 500"), verdict::retry,
       fate::write, sql::delivery_status::pending, true, false, false, false},
      {"500, threshold reached", make_job(), &ep, failing, outcome(delivery::verdict::retry, 500, "HTTP 500"),
       verdict::retry, fate::write, sql::delivery_status::pending, true, false, true, false},
      {"500 while probing extends the pause", make_job(), &ep, paused, outcome(delivery::verdict::retry, 500, "HTTP 500"),
       verdict::retry, fate::write, sql::delivery_status::pending, true, false, true, false},
      {"500 after failing for 5 days", make_job(), &ep, days, outcome(delivery::verdict::retry, 500, "HTTP 500"),
       verdict::retry, fate::write, sql::delivery_status::pending, true, true, false, false},
      {"429 with Retry-After pauses the endpoint", make_job(), &ep, closed,
       outcome(delivery::verdict::retry, 429, "HTTP 429", 90s), verdict::retry, fate::write,
       sql::delivery_status::pending, true, false, true, false},
      {"500 on an aggregate-ordered endpoint", make_job(), &ordered, closed, outcome(delivery::verdict::retry, 500, "x"),
       verdict::retry, fate::write, sql::delivery_status::pending, true, false, false, true},
      {"20th attempt gives up", make_job({}, 9, 100, 19), &ep, closed, outcome(delivery::verdict::retry, 503, "HTTP 503"),
       verdict::dead, fate::write, sql::delivery_status::dead, true, false, false, false},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    auto d = decide(r.job, *r.ep, r.breaker, r.out, now, 0.5, policy);
    CHECK(d.result == r.result);
    CHECK(d.what == r.what_);
    if (d.what == fate::write) {
      CHECK(d.record.status == r.status);
      CHECK(d.record.attempts == r.job.attempts + 1);
      CHECK(d.record.last_attempt_at == now);
      CHECK(d.record.last_status == r.out.status);
    }
    CHECK(d.write_health == r.health);
    CHECK(d.disable.has_value() == r.disable);
    CHECK(d.paused_until.has_value() == r.pause);
    CHECK(d.spill_queue == r.spill);
  }
}

TEST_CASE("decide: backoff, Retry-After and the breaker's times") {
  outcome_policy policy;
  auto ep = active_endpoint();
  delivery::breaker_state closed;
  // First failure: 30 s base, unit_random 0.5 → 15 s + 7.5 s.
  auto d = decide(make_job(), ep, closed, outcome(delivery::verdict::retry, 500, "HTTP 500"), now, 0.5, policy);
  CHECK(d.record.next_attempt_in == 22500ms);
  CHECK(d.breaker.consecutive_failures == 1);
  CHECK(d.breaker.first_failure_at == now);
  CHECK(d.last_error == "HTTP 500");
  // Retry-After 600 s is a floor, and the endpoint waits as long.
  auto r = decide(make_job(), ep, closed, outcome(delivery::verdict::retry, 503, "HTTP 503", 600s), now, 0.5, policy);
  CHECK(r.record.next_attempt_in == 600s);
  CHECK(r.paused_until == now + 600s);
  CHECK(r.retry_after);
  // A success resets the streak and says the breaker closed.
  delivery::breaker_state open;
  open.consecutive_failures = 25;
  open.first_failure_at = now - 1h;
  open.paused_until = now - 1s;
  auto ok = decide(make_job(), ep, open, outcome(delivery::verdict::delivered, 200), now, 0.5, policy);
  CHECK(ok.recovered);
  CHECK(ok.breaker.consecutive_failures == 0);
  CHECK_FALSE(ok.breaker.paused_until.has_value());
  CHECK(ok.breaker.last_success_at == now);
  // --record=all writes first-try successes too.
  policy.record_successes = true;
  CHECK(decide(make_job(), ep, closed, outcome(delivery::verdict::delivered, 200), now, 0.5, policy).what == fate::write);
  // A marked job owns a row: its success is written whatever the record mode.
  policy.record_successes = false;
  auto marked = make_job();
  marked.marked = true;
  CHECK(decide(marked, ep, closed, outcome(delivery::verdict::delivered, 200), now, 0.5, policy).what == fate::write);
}

TEST_CASE("decide: giving up after max_age names the reason") {
  outcome_policy policy;
  policy.retry.max_age = 1h;
  auto ep = active_endpoint();
  auto old = make_job();
  std::const_pointer_cast<delivery::event>(old.ev)->stored_at = "2027-01-15 06:00:00+00";
  auto d = decide(old, ep, {}, outcome(delivery::verdict::retry, 500, "HTTP 500"), now, 0.5, policy);
  CHECK(d.result == verdict::dead);
  REQUIRE(d.record.last_error.has_value());
  CHECK(d.record.last_error->ends_with(": HTTP 500"));
  // The age is walhook's own (outbox.stored_at): an event the application dated years ago but
  // walhook stored just now is retried.
  auto backfilled = make_job();
  std::const_pointer_cast<delivery::event>(backfilled.ev)->created_at = "2001-02-03 04:05:06+00";
  std::const_pointer_cast<delivery::event>(backfilled.ev)->stored_at = "2027-01-15 07:30:00+00";  // 30 min ago
  CHECK(decide(backfilled, ep, {}, outcome(delivery::verdict::retry, 500, "HTTP 500"), now, 0.5, policy).result ==
        verdict::retry);
}

TEST_CASE("spill_record: pending, due now unless told otherwise, attempts unchanged") {
  auto j = make_job({}, 4, 10, 3);
  auto r = spill_record(j, now);
  CHECK(r.status == sql::delivery_status::pending);
  CHECK(r.attempts == 3);
  CHECK(r.next_attempt_in == 0ms);
  auto later = spill_record(j, now, now + 5s, "why");
  CHECK(later.next_attempt_in == 5s);
  CHECK(later.last_error == "why");
}

TEST_CASE("decide: an inbox destination's \"not yet\" defers, out of line and without a failure, then quarantines") {
  auto ep = active_endpoint(true);
  ep.defer_statuses = {409, 425};
  ep.max_deferrals = 2;
  outcome_policy policy;
  delivery::breaker_state breaker;
  breaker.consecutive_failures = 3;  // failures of other events: a deferral leaves them as they are
  auto j = make_job({}, 11, 100, 4);
  j.deferrals = 1;
  const auto d = decide(j, ep, breaker, outcome(delivery::verdict::retry, 409, "HTTP 409"), now, 0.5, policy);
  CHECK(d.result == verdict::retry);
  CHECK(d.deferred);
  CHECK(d.what == fate::write);
  CHECK(d.record.status == sql::delivery_status::pending);
  CHECK(d.record.attempts == 5);
  CHECK(d.record.deferrals == 2);
  CHECK(d.record.next_attempt_in == 2000ms);  // the second deferral: 2 s, jitter 0 at 0.5
  CHECK(d.record.last_error == "deferred (2 of 2): HTTP 409");
  CHECK(d.breaker == breaker);
  CHECK_FALSE(d.write_health);
  CHECK_FALSE(d.spill_queue);  // its key's later events are not sent to wait behind it
  CHECK_FALSE(d.paused_until);
  // A Retry-After on the answer is the wait, and pauses nothing (other keys go on).
  const auto later = decide(make_job({}, 11), ep, breaker, outcome(delivery::verdict::retry, 425, "HTTP 425", 30s), now,
                            0.5, policy);
  CHECK(later.record.next_attempt_in == 30000ms);
  CHECK_FALSE(later.paused_until);
  // One more than the limit: quarantined, dead with the reason.
  j.deferrals = 2;
  const auto q = decide(j, ep, breaker, outcome(delivery::verdict::retry, 409, "HTTP 409"), now, 0.5, policy);
  CHECK(q.result == verdict::dead);
  CHECK(q.record.status == sql::delivery_status::dead);
  CHECK(q.record.deferrals == 3);
  CHECK(q.record.last_error == "quarantined: deferred 3 times (the limit is 2): HTTP 409");
  // Another status is a failure as for any endpoint; without defer statuses 409 is one too.
  CHECK_FALSE(decide(j, ep, breaker, outcome(delivery::verdict::retry, 500, "HTTP 500"), now, 0.5, policy).deferred);
  CHECK_FALSE(decide(j, active_endpoint(true), breaker, outcome(delivery::verdict::retry, 409, "HTTP 409"), now, 0.5, policy)
                  .deferred);
}

TEST_CASE("decide: a retry schedule of its own replaces the backoff; deferrals do not spend it; spent is quarantined") {
  auto ep = active_endpoint();
  ep.retry_schedule = {60s, 300s};
  outcome_policy policy;
  auto j = make_job({}, 11, 100, 3);
  j.deferrals = 2;  // 3 attempts so far, 2 of them deferred: this failure is the 2nd
  auto d = decide(j, ep, {}, outcome(delivery::verdict::retry, 500, "HTTP 500"), now, 0.5, policy);
  CHECK(d.result == verdict::retry);
  CHECK(d.record.next_attempt_in == 300000ms);  // schedule[1], jitter 0 at 0.5
  CHECK(d.breaker.consecutive_failures == 1);  // a failure counts for the breaker as usual
  j.attempts = 4;
  d = decide(j, ep, {}, outcome(delivery::verdict::retry, 500, "HTTP 500"), now, 0.5, policy);
  CHECK(d.result == verdict::dead);
  CHECK(d.record.last_error == "quarantined after 3 failed attempts (the retry schedule is spent): HTTP 500");
}

TEST_CASE("decide: a retry schedule of its own caps the breaker's pause at its first wait, round after round") {
  auto ep = active_endpoint();
  ep.retry_schedule = {30s, 300s};
  outcome_policy policy;  // pause_step 60 s, max_pause 1 h
  delivery::breaker_state streak;
  streak.consecutive_failures = policy.breaker.failure_threshold - 1;
  streak.first_failure_at = now - 10s;
  auto d = decide(make_job({}, 11, 100, 0), ep, streak, outcome(delivery::verdict::retry, 500, "HTTP 500"), now, 0.5,
                  policy);
  REQUIRE(d.paused_until.has_value());
  CHECK(*d.paused_until == now + 30s);  // not the 60 s an ordinary endpoint pauses for
  // A failed probe round extends an ordinary endpoint's pause by a step each time; this one stays at 30 s.
  auto probing = d.breaker;
  probing.probe_rounds = 5;
  auto later = now + 31s;
  d = decide(make_job({}, 12, 100, 0), ep, probing, outcome(delivery::verdict::retry, 500, "HTTP 500"), later, 0.5,
             policy);
  REQUIRE(d.paused_until.has_value());
  CHECK(*d.paused_until == later + 30s);
  // The same streak on an endpoint without a schedule: the usual, longer pause.
  ep.retry_schedule.clear();
  d = decide(make_job({}, 12, 100, 0), ep, probing, outcome(delivery::verdict::retry, 500, "HTTP 500"), later, 0.5,
             policy);
  REQUIRE(d.paused_until.has_value());
  CHECK(*d.paused_until > later + 60s);
}
