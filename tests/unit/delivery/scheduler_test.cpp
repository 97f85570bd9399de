// The fair scheduler (delivery/scheduler.hpp): round-robin, per-endpoint and process-wide
// concurrency, memory caps, merge, aggregate ordering, spilling and draining — every rule with
// hand-picked sequences, then a seeded model-based test that checks the invariants after every
// random operation. No clocks: enqueue times are fake time points.

#include "delivery/scheduler.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace walhook::delivery;
using std::chrono::seconds;
using tp = std::chrono::steady_clock::time_point;

namespace {

const tp t0{};

job make_job(std::int64_t endpoint, std::string id, std::optional<std::string> merge_key = std::nullopt,
             std::optional<std::string> aggregate = std::nullopt) {
  auto ev = std::make_shared<event>();
  ev->id = std::move(id);
  ev->type = "test.event";
  ev->merge_key = std::move(merge_key);
  ev->aggregate_id = std::move(aggregate);
  job j;
  j.ev = std::move(ev);
  j.endpoint_id = endpoint;
  return j;
}

job with_ticket(job j, std::uint64_t ticket, tp at) {
  j.ticket = ticket;
  j.enqueued_at = at;
  return j;
}

job persisted(job j, std::int64_t row) {
  j.row_id = row;
  return j;
}

void push_queued(scheduler& s, job j) {
  auto r = s.push(std::move(j));
  REQUIRE(r.status == scheduler::push_status::queued);
  REQUIRE_FALSE(r.replaced.has_value());
}

std::string ids(const std::vector<job>& jobs) {
  std::string out;
  for (const auto& j : jobs) {
    if (!out.empty()) out += ' ';
    out += j.ev->id;
  }
  return out;
}

/// Starts jobs until next() says none, without finishing any; returns them.
std::vector<job> start_all(scheduler& s) {
  std::vector<job> out;
  while (auto j = s.next()) out.push_back(std::move(*j));
  return out;
}

/// Starts and immediately finishes jobs until none is left; returns their ids in start order.
std::string run_to_completion(scheduler& s) {
  std::vector<job> order;
  while (auto j = s.next()) {
    s.finished(*j);
    order.push_back(std::move(*j));
  }
  return ids(order);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Round-robin (docs/architecture.md, Invariants, 4)

TEST_CASE("scheduler: the first delivery of every endpoint goes before the second of any") {
  scheduler s;
  for (std::int64_t e : {1, 2, 3}) s.configure(e, 4, false);
  // Endpoint 1's whole backlog arrives first; the others still get their first turn before its second.
  for (const char* id : {"a1", "a2", "a3"}) push_queued(s, make_job(1, id));
  for (const char* id : {"b1", "b2", "b3"}) push_queued(s, make_job(2, id));
  for (const char* id : {"c1", "c2", "c3"}) push_queued(s, make_job(3, id));
  CHECK(ids(start_all(s)) == "a1 b1 c1 a2 b2 c2 a3 b3 c3");
  CHECK(s.in_flight_total() == 9);
  CHECK(s.queued_total() == 0);
}

TEST_CASE("scheduler: round-robin with uneven backlogs and jobs finishing in between") {
  scheduler s;
  for (std::int64_t e : {10, 20, 30}) s.configure(e, 8, false);
  for (const char* id : {"a1", "a2", "a3", "a4"}) push_queued(s, make_job(10, id));
  push_queued(s, make_job(20, "b1"));
  for (const char* id : {"c1", "c2"}) push_queued(s, make_job(30, id));
  CHECK(run_to_completion(s) == "a1 b1 c1 a2 c2 a3 a4");
}

TEST_CASE("scheduler: an endpoint that becomes ready joins the back of the ring") {
  scheduler s;
  s.configure(1, 4, false);
  s.configure(2, 4, false);
  s.configure(3, 4, false);
  push_queued(s, make_job(1, "a1"));
  push_queued(s, make_job(1, "a2"));
  push_queued(s, make_job(2, "b1"));
  auto first = s.next();
  REQUIRE(first);
  CHECK(first->ev->id == "a1");
  // Endpoint 3 gets work now: it waits behind 2 and 1 (which already sit in the ring).
  push_queued(s, make_job(3, "c1"));
  push_queued(s, make_job(2, "b2"));
  CHECK(ids(start_all(s)) == "b1 a2 c1 b2");
}

TEST_CASE("scheduler: a slow endpoint only ever occupies its own slots") {
  scheduler s({.max_in_flight = 64, .max_slow_in_flight = 1024, .max_queued_per_endpoint = 1000, .max_queued_total = 10000});
  s.configure(1, 2, false);  // slow: every attempt hangs
  s.configure(2, 2, false);
  for (int i = 0; i < 50; ++i) push_queued(s, make_job(1, "slow" + std::to_string(i)));
  auto started = start_all(s);
  CHECK(ids(started) == "slow0 slow1");
  // The fast endpoint's work flows although the slow one has 48 waiting.
  for (int i = 0; i < 10; ++i) {
    push_queued(s, make_job(2, "fast" + std::to_string(i)));
    auto j = s.next();
    REQUIRE(j);
    CHECK(j->endpoint_id == 2);
    s.finished(*j);
  }
  CHECK(s.in_flight(1) == 2);
  CHECK(s.queued(1) == 48);
  CHECK_FALSE(s.next().has_value());
}

TEST_CASE("scheduler: many slow endpoints cannot take the process-wide slots: parked attempts have a pool of their own") {
  // 10 slow endpoints × 4 slots would fill a shared cap of 8 for good: parked, they do not.
  scheduler s({.max_in_flight = 8, .max_slow_in_flight = 24, .max_queued_per_endpoint = 1000, .max_queued_total = 10000});
  for (std::int64_t e = 1; e <= 10; ++e) {
    s.configure(e, 4, false);
    for (int i = 0; i < 5; ++i) push_queued(s, make_job(e, "slow" + std::to_string(e) + "_" + std::to_string(i)));
  }
  s.configure(99, 4, false);
  std::vector<job> running;
  // Rounds of the hold-bound sweep: whatever started is parked, and more starts — until the slow
  // pool is full and every slow endpoint waits for one of its attempts.
  for (int round = 0; round < 10; ++round) {
    while (auto j = s.next()) running.push_back(std::move(*j));
    for (auto& j : running) s.park(j);
  }
  CHECK(s.parked_total() == 24);
  CHECK(s.in_flight_total() == 24);
  // A healthy endpoint starts at once, all its slots, while the slow ones wait.
  for (int i = 0; i < 4; ++i) push_queued(s, make_job(99, "healthy" + std::to_string(i)));
  for (int i = 0; i < 4; ++i) {
    auto j = s.next();
    REQUIRE(j);
    CHECK(j->endpoint_id == 99);
  }
  CHECK_FALSE(s.next().has_value());
}

TEST_CASE("scheduler: parked attempts free young slots; finishing a parked one frees the slow pool") {
  scheduler s({.max_in_flight = 2, .max_slow_in_flight = 2, .max_queued_per_endpoint = 1000, .max_queued_total = 10000});
  s.configure(1, 4, false);
  s.configure(2, 4, false);
  for (int i = 0; i < 4; ++i) push_queued(s, make_job(1, "slow" + std::to_string(i)));
  auto a = s.next(), b = s.next();
  REQUIRE(a);
  REQUIRE(b);
  CHECK_FALSE(s.next().has_value());  // two young attempts: the young pool is full
  s.park(*a);
  s.park(*a);  // once only
  CHECK(s.parked_total() == 1);
  auto c = s.next();  // a parked attempt frees its young slot
  REQUIRE(c);
  s.park(*b);
  CHECK(s.parked_total() == 2);  // the slow pool is full now: endpoint 1 starts nothing more
  push_queued(s, make_job(2, "fast0"));
  auto d = s.next();
  REQUIRE(d);
  CHECK(d->endpoint_id == 2);
  s.finished(*d);
  CHECK_FALSE(s.next().has_value());  // endpoint 1 waits for a parked attempt to end
  s.finished(*a);
  CHECK(s.parked_total() == 1);
  auto e = s.next();
  REQUIRE(e);
  CHECK(e->endpoint_id == 1);
}

// ---------------------------------------------------------------------------------------------
// Concurrency caps

TEST_CASE("scheduler: per-endpoint max_concurrency is never exceeded") {
  scheduler s;
  s.configure(7, 3, false);
  for (int i = 0; i < 10; ++i) push_queued(s, make_job(7, std::to_string(i)));
  auto started = start_all(s);
  CHECK(ids(started) == "0 1 2");
  CHECK(s.in_flight(7) == 3);
  CHECK(s.queued(7) == 7);
  CHECK_FALSE(s.next().has_value());

  s.finished(started[1]);
  CHECK(s.in_flight(7) == 2);
  auto j = s.next();
  REQUIRE(j);
  CHECK(j->ev->id == "3");
  CHECK_FALSE(s.next().has_value());
  CHECK(s.in_flight(7) == 3);
}

TEST_CASE("scheduler: max_concurrency below 1 means 1") {
  for (int limit : {0, -5}) {
    CAPTURE(limit);
    scheduler s;
    s.configure(1, limit, false);
    push_queued(s, make_job(1, "x"));
    push_queued(s, make_job(1, "y"));
    CHECK(ids(start_all(s)) == "x");
    CHECK(s.free_slots(1) == 0);
  }
}

TEST_CASE("scheduler: raising max_concurrency with configure() lets queued work start") {
  scheduler s;
  s.configure(1, 1, false);
  for (const char* id : {"a", "b", "c"}) push_queued(s, make_job(1, id));
  CHECK(ids(start_all(s)) == "a");
  s.configure(1, 3, false);
  CHECK(ids(start_all(s)) == "b c");
  CHECK(s.in_flight(1) == 3);
}

TEST_CASE("scheduler: lowering max_concurrency holds new starts until in-flight drops below it") {
  scheduler s;
  s.configure(1, 3, false);
  for (const char* id : {"a", "b", "c", "d"}) push_queued(s, make_job(1, id));
  auto started = start_all(s);
  REQUIRE(started.size() == 3);
  s.configure(1, 1, false);
  s.finished(started[0]);
  CHECK_FALSE(s.next().has_value());  // 2 still in flight > 1
  s.finished(started[1]);
  CHECK_FALSE(s.next().has_value());  // 1 in flight = 1
  s.finished(started[2]);
  auto j = s.next();
  REQUIRE(j);
  CHECK(j->ev->id == "d");
}

TEST_CASE("scheduler: the process-wide in-flight cap holds across endpoints") {
  scheduler s({.max_in_flight = 3, .max_slow_in_flight = 1024, .max_queued_per_endpoint = 100, .max_queued_total = 100});
  for (std::int64_t e : {1, 2}) s.configure(e, 10, false);
  for (int i = 1; i <= 5; ++i) {
    push_queued(s, make_job(1, "a" + std::to_string(i)));
    push_queued(s, make_job(2, "b" + std::to_string(i)));
  }
  auto started = start_all(s);
  CHECK(ids(started) == "a1 b1 a2");
  CHECK(s.in_flight_total() == 3);
  CHECK(s.free_global_slots() == 0);
  // Freeing a slot anywhere lets the next endpoint in the ring go, not the one that finished.
  s.finished(started[0]);
  auto j = s.next();
  REQUIRE(j);
  CHECK(j->ev->id == "b2");
  CHECK_FALSE(s.next().has_value());
  s.finished(started[1]);
  s.finished(started[2]);
  CHECK(ids(start_all(s)) == "a3 b3");
  CHECK(s.in_flight_total() == 3);
}

TEST_CASE("scheduler: finished() of an unknown endpoint or too often never underflows") {
  scheduler s;
  s.configure(1, 2, false);
  push_queued(s, make_job(1, "a"));
  auto j = s.next();
  REQUIRE(j);
  s.finished(make_job(99, "ghost"));
  CHECK(s.in_flight_total() == 1);
  s.finished(*j);
  s.finished(*j);
  CHECK(s.in_flight(1) == 0);
  CHECK(s.in_flight_total() == 0);
}

TEST_CASE("scheduler: next() on an empty scheduler and with only unconfigured endpoints") {
  scheduler s;
  CHECK_FALSE(s.next().has_value());
  // push() without configure() uses the defaults (4 at once).
  for (const char* id : {"1", "2", "3", "4", "5"}) push_queued(s, make_job(42, id));
  CHECK(ids(start_all(s)) == "1 2 3 4");
}

// ---------------------------------------------------------------------------------------------
// Memory caps (docs/architecture.md, Invariants, 5)

TEST_CASE("scheduler: the per-endpoint memory cap returns the job as full") {
  scheduler s({.max_in_flight = 64, .max_slow_in_flight = 1024, .max_queued_per_endpoint = 2, .max_queued_total = 100});
  s.configure(1, 1, false);
  s.configure(2, 1, false);
  push_queued(s, make_job(1, "a"));
  push_queued(s, make_job(1, "b"));
  auto r = s.push(with_ticket(make_job(1, "c"), 17, t0 + seconds{5}));
  CHECK(r.status == scheduler::push_status::full);
  REQUIRE(r.replaced);
  CHECK(r.replaced->ev->id == "c");
  CHECK(r.replaced->ticket == 17);
  CHECK(r.replaced->enqueued_at == t0 + seconds{5});
  CHECK(s.queued(1) == 2);
  // Other endpoints are not affected.
  push_queued(s, make_job(2, "x"));
  // Starting a job frees memory: the cap counts waiting jobs, not in-flight ones.
  auto j = s.next();
  REQUIRE(j);
  push_queued(s, make_job(1, "d"));
  CHECK(s.queued(1) == 2);
  CHECK(s.push(make_job(1, "e")).status == scheduler::push_status::full);
}

TEST_CASE("scheduler: the total memory cap returns the job as full and reports over_memory_cap") {
  scheduler s({.max_in_flight = 64, .max_slow_in_flight = 1024, .max_queued_per_endpoint = 100, .max_queued_total = 3});
  for (std::int64_t e : {1, 2, 3, 4}) s.configure(e, 1, false);
  push_queued(s, make_job(1, "a"));
  push_queued(s, make_job(2, "b"));
  CHECK_FALSE(s.over_memory_cap());
  push_queued(s, make_job(3, "c"));
  CHECK(s.over_memory_cap());
  auto r = s.push(make_job(4, "d"));
  CHECK(r.status == scheduler::push_status::full);
  REQUIRE(r.replaced);
  CHECK(r.replaced->ev->id == "d");
  CHECK(s.queued_total() == 3);
  CHECK(s.queued(4) == 0);
  auto j = s.next();
  REQUIRE(j);
  CHECK_FALSE(s.over_memory_cap());
  push_queued(s, make_job(4, "d"));
}

TEST_CASE("scheduler: a merge is accepted even at the memory cap (it does not grow memory)") {
  scheduler s({.max_in_flight = 64, .max_slow_in_flight = 1024, .max_queued_per_endpoint = 1, .max_queued_total = 1});
  s.configure(1, 1, false);
  push_queued(s, make_job(1, "v1", "order-1"));
  auto r = s.push(make_job(1, "v2", "order-1"));
  CHECK(r.status == scheduler::push_status::merged);
  REQUIRE(r.replaced);
  CHECK(r.replaced->ev->id == "v1");
  CHECK(s.queued_total() == 1);
  CHECK(s.push(make_job(1, "other", "order-2")).status == scheduler::push_status::full);
}

// ---------------------------------------------------------------------------------------------
// Merge (docs/architecture.md, Rules)

TEST_CASE("scheduler: a newer job with the same merge key replaces the queued one in place") {
  scheduler s;
  s.configure(1, 1, false);
  push_queued(s, make_job(1, "blocker"));
  REQUIRE(s.next());  // endpoint busy: everything else waits in the queue
  push_queued(s, with_ticket(make_job(1, "v1", "order-1"), 5, t0 + seconds{1}));
  push_queued(s, make_job(1, "fact"));
  auto r = s.push(with_ticket(make_job(1, "v2", "order-1"), 6, t0 + seconds{2}));
  CHECK(r.status == scheduler::push_status::merged);
  REQUIRE(r.replaced);
  CHECK(r.replaced->ev->id == "v1");
  CHECK(r.replaced->ticket == 5);  // the caller releases the superseded job's ticket
  CHECK(s.queued(1) == 2);
  CHECK(s.queued_total() == 2);

  auto r3 = s.push(make_job(1, "v3", "order-1"));
  CHECK(r3.status == scheduler::push_status::merged);
  REQUIRE(r3.replaced);
  CHECK(r3.replaced->ev->id == "v2");
  CHECK(r3.replaced->ticket == 6);

  auto rest = s.drain(1);
  CHECK(ids(rest) == "v3 fact");  // v3 kept v1's place, ahead of the fact queued after it
}

TEST_CASE("scheduler: jobs without a merge key never merge") {
  scheduler s;
  s.configure(1, 1, false);
  for (int i = 0; i < 5; ++i) push_queued(s, make_job(1, "fact" + std::to_string(i), std::nullopt, "agg"));
  CHECK(s.queued(1) == 5);
}

TEST_CASE("scheduler: merge is per (endpoint, merge key)") {
  scheduler s;
  s.configure(1, 1, false);
  s.configure(2, 1, false);
  push_queued(s, make_job(1, "a", "k1"));
  push_queued(s, make_job(1, "b", "k2"));
  push_queued(s, make_job(2, "c", "k1"));  // same key, other endpoint
  CHECK(s.queued_total() == 3);
  CHECK(s.push(make_job(2, "d", "k1")).status == scheduler::push_status::merged);
  CHECK(ids(s.drain(1)) == "a b");
  CHECK(ids(s.drain(2)) == "d");
}

TEST_CASE("scheduler: an in-flight job is never merged into") {
  scheduler s;
  s.configure(1, 1, false);
  push_queued(s, make_job(1, "v1", "k"));
  auto running = s.next();
  REQUIRE(running);
  push_queued(s, make_job(1, "v2", "k"));  // must be delivered after v1, not dropped
  CHECK(s.queued(1) == 1);
  // The queued v2 is a merge target now.
  auto r = s.push(make_job(1, "v3", "k"));
  CHECK(r.status == scheduler::push_status::merged);
  REQUIRE(r.replaced);
  CHECK(r.replaced->ev->id == "v2");
  s.finished(*running);
  CHECK(run_to_completion(s) == "v3");
}

TEST_CASE("scheduler: a persisted job is never merged into; a later memory job still merges") {
  scheduler s;
  s.configure(1, 1, false);
  push_queued(s, make_job(1, "blocker"));
  REQUIRE(s.next());
  push_queued(s, persisted(make_job(1, "p1", "k"), 1001));
  push_queued(s, make_job(1, "m1", "k"));  // the state store merges persisted rows, not the scheduler
  CHECK(s.queued(1) == 2);
  auto r = s.push(make_job(1, "m2", "k"));
  CHECK(r.status == scheduler::push_status::merged);
  REQUIRE(r.replaced);
  CHECK(r.replaced->ev->id == "m1");
  auto rest = s.drain(1);
  CHECK(ids(rest) == "p1 m2");
  REQUIRE(rest[0].row_id);
  CHECK(*rest[0].row_id == 1001);
}

TEST_CASE("scheduler: starting the persisted job does not forget the memory job's merge key") {
  scheduler s;
  s.configure(1, 1, false);
  push_queued(s, persisted(make_job(1, "p1", "k"), 7));
  push_queued(s, make_job(1, "m1", "k"));
  auto p = s.next();
  REQUIRE(p);
  CHECK(p->ev->id == "p1");
  CHECK(s.push(make_job(1, "m2", "k")).status == scheduler::push_status::merged);
  s.finished(*p);
  CHECK(run_to_completion(s) == "m2");
}

TEST_CASE("scheduler: a key whose queued job left (started, spilled, drained) queues anew") {
  scheduler s;
  s.configure(1, 1, false);
  push_queued(s, with_ticket(make_job(1, "v1", "k"), 1, t0));
  auto spilled = s.take_waiting_since(t0 + seconds{1});
  CHECK(ids(spilled) == "v1");
  push_queued(s, make_job(1, "v2", "k"));
  CHECK(ids(s.drain(1)) == "v2");
  push_queued(s, make_job(1, "v3", "k"));
  CHECK(s.queued(1) == 1);
}

// ---------------------------------------------------------------------------------------------
// Aggregate ordering (docs/architecture.md, Rules)

TEST_CASE("scheduler: aggregate ordering keeps one attempt in flight per aggregate") {
  scheduler s;
  s.configure(1, 8, true);
  push_queued(s, make_job(1, "x1", std::nullopt, "X"));
  push_queued(s, make_job(1, "x2", std::nullopt, "X"));
  push_queued(s, make_job(1, "y1", std::nullopt, "Y"));
  push_queued(s, make_job(1, "x3", std::nullopt, "X"));
  push_queued(s, make_job(1, "y2", std::nullopt, "Y"));
  push_queued(s, make_job(1, "n1"));  // no aggregate: never blocked
  push_queued(s, make_job(1, "n2"));
  auto first = start_all(s);
  CHECK(ids(first) == "x1 y1 n1 n2");
  CHECK(s.queued(1) == 3);
  CHECK(s.in_flight(1) == 4);

  s.finished(first[0]);  // x1 done: x2 may go, x3 still waits behind it
  CHECK(ids(start_all(s)) == "x2");
  s.finished(first[2]);  // a job without aggregate finishing unblocks nobody
  CHECK_FALSE(s.next().has_value());
  s.finished(first[1]);  // y1 done
  auto y2 = start_all(s);
  CHECK(ids(y2) == "y2");
}

TEST_CASE("scheduler: a blocked aggregate does not block other aggregates of the endpoint") {
  scheduler s;
  s.configure(1, 2, true);
  push_queued(s, make_job(1, "x1", std::nullopt, "X"));
  auto x1 = s.next();
  REQUIRE(x1);
  for (int i = 2; i <= 5; ++i) push_queued(s, make_job(1, "x" + std::to_string(i), std::nullopt, "X"));
  CHECK_FALSE(s.next().has_value());  // endpoint has a free slot, but only X work
  push_queued(s, make_job(1, "z1", std::nullopt, "Z"));
  auto z1 = s.next();
  REQUIRE(z1);
  CHECK(z1->ev->id == "z1");
  s.finished(*z1);
  CHECK_FALSE(s.next().has_value());
  s.finished(*x1);
  std::string order;
  while (auto j = s.next()) {
    CHECK_FALSE(s.next().has_value());  // never two X at once
    order += j->ev->id + " ";
    s.finished(*j);
  }
  CHECK(order == "x2 x3 x4 x5 ");
}

TEST_CASE("scheduler: without aggregate ordering, jobs of one aggregate run concurrently") {
  scheduler s;
  s.configure(1, 4, false);
  for (const char* id : {"x1", "x2", "x3"}) push_queued(s, make_job(1, id, std::nullopt, "X"));
  CHECK(ids(start_all(s)) == "x1 x2 x3");
}

TEST_CASE("scheduler: aggregate ordering is per endpoint") {
  scheduler s;
  s.configure(1, 4, true);
  s.configure(2, 4, true);
  push_queued(s, make_job(1, "a-x1", std::nullopt, "X"));
  push_queued(s, make_job(2, "b-x1", std::nullopt, "X"));
  push_queued(s, make_job(1, "a-x2", std::nullopt, "X"));
  CHECK(ids(start_all(s)) == "a-x1 b-x1");
}

TEST_CASE("scheduler: a merge that unblocks an aggregate-ordered endpoint makes it ready again") {
  scheduler s;
  s.configure(1, 4, true);
  push_queued(s, make_job(1, "x1", std::nullopt, "X"));
  auto x1 = s.next();
  REQUIRE(x1);
  push_queued(s, make_job(1, "x2", "k", "X"));
  CHECK_FALSE(s.next().has_value());  // x2 waits for x1; the endpoint leaves the ring
  // A newer job with the same merge key but no busy aggregate replaces x2: it may start now,
  // not only once x1 finishes.
  auto r = s.push(make_job(1, "y", "k", "Y"));
  CHECK(r.status == scheduler::push_status::merged);
  auto y = s.next();
  REQUIRE(y);
  CHECK(y->ev->id == "y");
}

TEST_CASE("scheduler: an aggregate-blocked endpoint keeps its round-robin turn for other endpoints") {
  scheduler s;
  s.configure(1, 4, true);
  s.configure(2, 4, false);
  push_queued(s, make_job(1, "x1", std::nullopt, "X"));
  push_queued(s, make_job(1, "x2", std::nullopt, "X"));
  push_queued(s, make_job(2, "b1"));
  push_queued(s, make_job(2, "b2"));
  auto started = start_all(s);
  CHECK(ids(started) == "x1 b1 b2");
  s.finished(started[0]);
  CHECK(ids(start_all(s)) == "x2");
}

// ---------------------------------------------------------------------------------------------
// Spilling, draining, free slots

TEST_CASE("scheduler: take_waiting_since keeps the jobs of endpoints that wait for walhook's pool, not for themselves") {
  scheduler s({.max_in_flight = 2});
  s.configure(1, 4, false);
  s.configure(2, 4, false);
  s.configure(3, 1, false);
  push_queued(s, with_ticket(make_job(1, "a1"), 1, t0));
  push_queued(s, with_ticket(make_job(3, "c1"), 2, t0));
  auto first = s.next();
  REQUIRE(first);
  REQUIRE(s.next());
  CHECK(s.in_flight_total() == 2);  // the young pool is full
  push_queued(s, with_ticket(make_job(2, "b1"), 3, t0));  // endpoint 2: 4 free slots of its own
  push_queued(s, with_ticket(make_job(3, "c2"), 4, t0));  // endpoint 3: its one slot is taken
  auto taken = s.take_waiting_since(t0 + seconds{10});
  CHECK(ids(taken) == "c2");  // endpoint 3 is slow itself; endpoint 2 waits for walhook
  CHECK(s.queued(2) == 1);
  // With room in the pool, a job that still waited that long was not started: it is taken.
  s.finished(*first);
  CHECK(ids(s.take_waiting_since(t0 + seconds{10})) == "b1");
}

TEST_CASE("scheduler: jobs read back by an outbox cursor are not taken for waiting; those after one that went back are") {
  scheduler s;
  s.configure(1, 1, false);
  auto drained = [](std::string id, std::int64_t seq) {
    auto j = make_job(1, std::move(id));
    auto ev = std::make_shared<event>(*j.ev);
    ev->seq = seq;
    j.ev = std::move(ev);
    j.drained = true;
    return with_ticket(std::move(j), (std::uint64_t{1} << 63) + 1, t0);  // a window's (detached) ticket
  };
  push_queued(s, drained("d10", 10));
  push_queued(s, drained("d11", 11));
  push_queued(s, drained("d12", 12));
  push_queued(s, with_ticket(make_job(1, "stream"), 7, t0));
  // Past the wait bound, only the stream's job goes: the window's wait for the endpoint's turn.
  CHECK(ids(s.take_waiting_since(t0 + seconds{10})) == "stream");
  // d10 went back to its window, which is read again from it: d11 and d12 go back too.
  CHECK(ids(s.take_drained_after(1, 10)) == "d11 d12");
  CHECK(s.queued(1) == 1);
  CHECK(s.take_drained_after(2, 0).empty());
}

TEST_CASE("scheduler: take_waiting_since returns only queued jobs holding a ticket, older than the cutoff") {
  scheduler s;
  s.configure(1, 1, false);
  s.configure(2, 1, false);
  push_queued(s, with_ticket(make_job(1, "running"), 1, t0));
  auto running = s.next();
  REQUIRE(running);
  push_queued(s, with_ticket(make_job(1, "old-ticket"), 2, t0 + seconds{1}));
  push_queued(s, with_ticket(make_job(1, "old-no-ticket"), 0, t0 + seconds{1}));  // claimed from the store
  push_queued(s, with_ticket(make_job(1, "at-cutoff"), 3, t0 + seconds{10}));
  push_queued(s, with_ticket(make_job(1, "new-ticket"), 4, t0 + seconds{20}));
  push_queued(s, with_ticket(make_job(2, "other-old", "k"), 5, t0 + seconds{2}));
  push_queued(s, with_ticket(make_job(2, "other-new"), 6, t0 + seconds{11}));

  auto taken = s.take_waiting_since(t0 + seconds{10});
  std::set<std::string> got;
  for (const auto& j : taken) got.insert(j.ev->id);
  CHECK(got == std::set<std::string>{"old-ticket", "other-old"});
  CHECK(s.queued(1) == 3);
  CHECK(s.queued(2) == 1);
  CHECK(s.queued_total() == 4);
  CHECK(s.in_flight(1) == 1);  // in flight is never taken

  // Nothing older is left; a repeat takes nothing.
  CHECK(s.take_waiting_since(t0 + seconds{10}).empty());
  // Order of what stays is kept.
  s.finished(*running);
  // Endpoint 2 sat in the ring while endpoint 1 was at its cap, so it goes first.
  CHECK(run_to_completion(s) == "other-new old-no-ticket at-cutoff new-ticket");
  // The spilled merge key no longer points into the queue.
  push_queued(s, make_job(2, "k-again", "k"));
}

TEST_CASE("scheduler: drain returns an endpoint's queue in order and leaves in-flight work alone") {
  scheduler s;
  s.configure(1, 1, false);
  s.configure(2, 1, false);
  for (const char* id : {"a", "b", "c"}) push_queued(s, make_job(1, id, std::string("k-") + id));
  push_queued(s, make_job(2, "z"));
  auto a = s.next();
  REQUIRE(a);
  CHECK(a->ev->id == "a");
  auto drained = s.drain(1);
  CHECK(ids(drained) == "b c");
  CHECK(s.queued(1) == 0);
  CHECK(s.in_flight(1) == 1);
  CHECK(s.queued_total() == 1);
  CHECK(s.drain(1).empty());
  CHECK(s.drain(12345).empty());
  s.finished(*a);
  CHECK(run_to_completion(s) == "z");
  // Merge keys of drained jobs are gone.
  push_queued(s, make_job(1, "b2", "k-b"));
  CHECK(s.queued(1) == 1);
}

TEST_CASE("scheduler: drain_all empties every queue") {
  scheduler s;
  for (std::int64_t e : {1, 2, 3}) s.configure(e, 1, false);
  push_queued(s, make_job(1, "a1"));
  push_queued(s, make_job(1, "a2"));
  push_queued(s, make_job(2, "b1"));
  push_queued(s, make_job(3, "c1"));
  auto started = s.next();
  REQUIRE(started);
  auto all = s.drain_all();
  std::multiset<std::string> got;
  for (const auto& j : all) got.insert(j.ev->id);
  std::multiset<std::string> expected{"a1", "a2", "b1", "c1"};
  expected.erase(expected.find(started->ev->id));
  CHECK(got == expected);
  CHECK(s.queued_total() == 0);
  CHECK_FALSE(s.next().has_value());
  CHECK(s.in_flight_total() == 1);
  CHECK(s.drain_all().empty());
}

TEST_CASE("scheduler: free_slots is max_concurrency minus in flight minus queued, at least 0") {
  scheduler s;
  CHECK(s.free_slots(5) == 0);  // unknown endpoint
  s.configure(5, 4, false);
  CHECK(s.free_slots(5) == 4);
  push_queued(s, make_job(5, "a"));
  CHECK(s.free_slots(5) == 3);
  REQUIRE(s.next());
  CHECK(s.free_slots(5) == 3);
  push_queued(s, make_job(5, "b"));
  push_queued(s, make_job(5, "c"));
  CHECK(s.free_slots(5) == 1);
  for (const char* id : {"d", "e", "f"}) push_queued(s, make_job(5, id));
  CHECK(s.free_slots(5) == 0);
}

TEST_CASE("scheduler: free_global_slots is max_in_flight minus in flight minus queued, at least 0") {
  scheduler s({.max_in_flight = 5, .max_slow_in_flight = 1024, .max_queued_per_endpoint = 100, .max_queued_total = 100});
  s.configure(1, 10, false);
  s.configure(2, 10, false);
  CHECK(s.free_global_slots() == 5);
  push_queued(s, make_job(1, "a"));
  push_queued(s, make_job(2, "b"));
  CHECK(s.free_global_slots() == 3);
  REQUIRE(s.next());
  CHECK(s.free_global_slots() == 3);
  for (int i = 0; i < 6; ++i) push_queued(s, make_job(2, "x" + std::to_string(i)));
  CHECK(s.free_global_slots() == 0);
}

// ---------------------------------------------------------------------------------------------
// Model-based: random push / next / finished / spill / drain checked against a simple model.

namespace {

struct model_job {
  std::string id;
  std::int64_t endpoint = 0;
  std::optional<std::string> merge_key;
  std::optional<std::string> aggregate;
  bool persisted = false;
  std::uint64_t ticket = 0;
  tp at{};
};

struct model_endpoint {
  int max_concurrency = 1;
  bool ordered = false;
  std::vector<model_job> queue;
  std::vector<model_job> running;
};

struct model {
  scheduler_limits limits;
  std::map<std::int64_t, model_endpoint> endpoints;

  std::size_t queued_total() const {
    std::size_t n = 0;
    for (const auto& [id, e] : endpoints) n += e.queue.size();
    return n;
  }
  std::size_t running_total() const {
    std::size_t n = 0;
    for (const auto& [id, e] : endpoints) n += e.running.size();
    return n;
  }
  /// Index in the queue of the job that may start for this endpoint, or -1.
  static int startable(const model_endpoint& e) {
    if (e.queue.empty() || e.running.size() >= static_cast<std::size_t>(e.max_concurrency)) return -1;
    if (!e.ordered) return 0;
    std::set<std::string> busy;
    for (const auto& r : e.running)
      if (r.aggregate) busy.insert(*r.aggregate);
    for (std::size_t i = 0; i < e.queue.size(); ++i) {
      const auto& agg = e.queue[i].aggregate;
      if (!agg) return static_cast<int>(i);
      if (busy.contains(*agg)) continue;
      return static_cast<int>(i);
    }
    return -1;
  }
};

job to_job(const model_job& m) {
  job j = make_job(m.endpoint, m.id, m.merge_key, m.aggregate);
  if (m.persisted) j.row_id = 1;
  j.ticket = m.ticket;
  j.enqueued_at = m.at;
  return j;
}

void run_model(std::uint64_t seed) {
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  model m;
  m.limits.max_in_flight = static_cast<std::size_t>(pick(1, 8));
  m.limits.max_queued_per_endpoint = static_cast<std::size_t>(pick(1, 10));
  m.limits.max_queued_total = static_cast<std::size_t>(pick(1, 25));
  scheduler s(m.limits);
  const int endpoint_count = pick(1, 6);
  for (int e = 1; e <= endpoint_count; ++e) {
    auto& me = m.endpoints[e];
    me.max_concurrency = pick(1, 4);
    me.ordered = pick(0, 1) == 1;
    s.configure(e, me.max_concurrency, me.ordered);
  }

  std::set<std::string> live;                       // queued or running, per the model
  std::map<std::int64_t, std::set<std::int64_t>> passed;  // fairness: who started while E was startable
  int next_id = 0;
  int clock = 0;

  auto check_state = [&] {
    for (auto& [id, me] : m.endpoints) {
      CAPTURE(id);
      REQUIRE(s.queued(id) == me.queue.size());
      REQUIRE(s.in_flight(id) == me.running.size());
      REQUIRE(me.running.size() <= static_cast<std::size_t>(me.max_concurrency));
      REQUIRE(me.queue.size() <= m.limits.max_queued_per_endpoint);
      std::size_t used = me.running.size() + me.queue.size();
      std::size_t cap = static_cast<std::size_t>(me.max_concurrency);
      REQUIRE(s.free_slots(id) == (used >= cap ? 0 : cap - used));
      if (me.ordered) {
        std::set<std::string> aggs;
        for (const auto& r : me.running)
          if (r.aggregate) REQUIRE(aggs.insert(*r.aggregate).second);  // one in flight per aggregate
      }
      if (model::startable(me) < 0) passed[id].clear();
    }
    REQUIRE(s.queued_total() == m.queued_total());
    REQUIRE(s.in_flight_total() == m.running_total());
    REQUIRE(s.in_flight_total() <= m.limits.max_in_flight);
    REQUIRE(s.queued_total() <= m.limits.max_queued_total);
    std::size_t used = m.running_total() + m.queued_total();
    REQUIRE(s.free_global_slots() == (used >= m.limits.max_in_flight ? 0 : m.limits.max_in_flight - used));
    REQUIRE(s.over_memory_cap() == (m.queued_total() >= m.limits.max_queued_total));
  };

  for (int step = 0; step < 3000; ++step) {
    CAPTURE(step);
    ++clock;
    int op = pick(0, 99);
    if (op < 42) {  // push
      model_job mj;
      mj.id = "j" + std::to_string(next_id++);
      mj.endpoint = pick(1, endpoint_count);
      if (pick(0, 2) == 0) mj.merge_key = "k" + std::to_string(pick(0, 3));
      if (pick(0, 1) == 0) mj.aggregate = "a" + std::to_string(pick(0, 2));
      mj.persisted = pick(0, 4) == 0;
      mj.ticket = pick(0, 2) == 0 ? 0 : static_cast<std::uint64_t>(next_id);
      mj.at = t0 + seconds{clock};
      auto& me = m.endpoints[mj.endpoint];
      auto r = s.push(to_job(mj));

      // Expected: merge into the queued memory-only job with the same key (at most one exists).
      int target = -1;
      if (mj.merge_key) {
        for (std::size_t i = 0; i < me.queue.size(); ++i) {
          if (me.queue[i].merge_key == mj.merge_key && !me.queue[i].persisted) {
            REQUIRE(target == -1);
            target = static_cast<int>(i);
          }
        }
      }
      if (target >= 0) {
        REQUIRE(r.status == scheduler::push_status::merged);
        REQUIRE(r.replaced);
        CHECK(r.replaced->ev->id == me.queue[target].id);
        live.erase(me.queue[target].id);
        me.queue[target] = mj;
        live.insert(mj.id);
      } else if (me.queue.size() >= m.limits.max_queued_per_endpoint ||
                 m.queued_total() >= m.limits.max_queued_total) {
        REQUIRE(r.status == scheduler::push_status::full);
        REQUIRE(r.replaced);
        CHECK(r.replaced->ev->id == mj.id);
      } else {
        REQUIRE(r.status == scheduler::push_status::queued);
        REQUIRE_FALSE(r.replaced);
        me.queue.push_back(mj);
        live.insert(mj.id);
      }
    } else if (op < 75) {  // next
      std::set<std::int64_t> startable_before;
      for (const auto& [id, me] : m.endpoints)
        if (model::startable(me) >= 0) startable_before.insert(id);
      auto j = s.next();
      if (!j) {
        // Work-conserving: nothing may start only if the global cap is reached or no endpoint can.
        CHECK((startable_before.empty() || m.running_total() >= m.limits.max_in_flight));
      } else {
        REQUIRE(m.running_total() < m.limits.max_in_flight);
        auto& me = m.endpoints[j->endpoint_id];
        int idx = model::startable(me);
        REQUIRE(idx >= 0);
        CHECK(j->ev->id == me.queue[idx].id);  // FIFO, or first unblocked aggregate
        // Round-robin: while E could start, no other endpoint starts twice.
        for (std::int64_t e : startable_before) {
          if (e == j->endpoint_id) continue;
          CAPTURE(e);
          CHECK_FALSE(passed[e].contains(j->endpoint_id));
          passed[e].insert(j->endpoint_id);
        }
        passed[j->endpoint_id].clear();
        me.running.push_back(me.queue[idx]);
        me.queue.erase(me.queue.begin() + idx);
      }
    } else if (op < 94) {  // finished
      std::vector<std::pair<std::int64_t, std::size_t>> running;
      for (const auto& [id, me] : m.endpoints)
        for (std::size_t i = 0; i < me.running.size(); ++i) running.emplace_back(id, i);
      if (!running.empty()) {
        auto [id, i] = running[static_cast<std::size_t>(pick(0, static_cast<int>(running.size()) - 1))];
        auto& me = m.endpoints[id];
        s.finished(to_job(me.running[i]));
        live.erase(me.running[i].id);
        me.running.erase(me.running.begin() + static_cast<std::ptrdiff_t>(i));
      }
    } else if (op < 98) {  // spill old ticket holders
      tp cutoff = t0 + seconds{clock - pick(0, 40)};
      auto taken = s.take_waiting_since(cutoff);
      std::map<std::int64_t, std::vector<std::string>> got;
      for (const auto& j : taken) got[j.endpoint_id].push_back(j.ev->id);
      // An endpoint with free slots of its own while the pool is full waits for walhook: kept.
      const bool pool_full = m.running_total() >= m.limits.max_in_flight;
      for (auto& [id, me] : m.endpoints) {
        std::vector<std::string> expected;
        std::vector<model_job> keep;
        const bool waits_for_walhook =
            pool_full && !me.ordered && me.running.size() < static_cast<std::size_t>(me.max_concurrency);
        for (auto& q : me.queue) {
          if (q.ticket != 0 && q.at < cutoff && !waits_for_walhook) {
            expected.push_back(q.id);
            live.erase(q.id);
          } else {
            keep.push_back(q);
          }
        }
        me.queue = std::move(keep);
        CHECK(got[id] == expected);
      }
    } else if (op < 99) {  // drain one endpoint
      std::int64_t id = pick(1, endpoint_count);
      auto& me = m.endpoints[id];
      auto drained = s.drain(id);
      REQUIRE(drained.size() == me.queue.size());
      for (std::size_t i = 0; i < drained.size(); ++i) {
        CHECK(drained[i].ev->id == me.queue[i].id);
        live.erase(me.queue[i].id);
      }
      me.queue.clear();
    } else {  // drain everything
      auto drained = s.drain_all();
      std::multiset<std::string> got;
      for (const auto& j : drained) got.insert(j.ev->id);
      std::multiset<std::string> expected;
      for (auto& [id, me] : m.endpoints) {
        for (const auto& q : me.queue) {
          expected.insert(q.id);
          live.erase(q.id);
        }
        me.queue.clear();
      }
      CHECK(got == expected);
    }
    check_state();
  }

  // Finish everything: all queued work must come out (nothing is lost or stuck).
  for (;;) {
    if (auto j = s.next()) {
      auto& me = m.endpoints[j->endpoint_id];
      int idx = model::startable(me);
      REQUIRE(idx >= 0);
      REQUIRE(j->ev->id == me.queue[idx].id);
      me.running.push_back(me.queue[idx]);
      me.queue.erase(me.queue.begin() + idx);
      continue;
    }
    bool any_running = false;
    for (auto& [id, me] : m.endpoints) {
      for (const auto& r : me.running) {
        s.finished(to_job(r));
        live.erase(r.id);
      }
      any_running = any_running || !me.running.empty();
      me.running.clear();
    }
    if (!any_running) break;
  }
  CHECK(s.queued_total() == 0);
  CHECK(s.in_flight_total() == 0);
  CHECK(live.empty());
}

}  // namespace

TEST_CASE("scheduler: random push/next/finished/spill/drain sequences keep every invariant") {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) run_model(seed);
}

TEST_CASE("scheduler: random backlogs drain in rounds (k-th of every endpoint before (k+1)-th of any)") {
  std::mt19937_64 rng(20260101);
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    scheduler s({.max_in_flight = 1000, .max_slow_in_flight = 1024, .max_queued_per_endpoint = 1000, .max_queued_total = 100000});
    int endpoints = std::uniform_int_distribution<int>(1, 8)(rng);
    std::vector<int> backlog(static_cast<std::size_t>(endpoints) + 1, 0);
    std::vector<std::int64_t> order;  // random arrival order of jobs across endpoints
    for (int e = 1; e <= endpoints; ++e) {
      s.configure(e, 1000, false);
      int n = std::uniform_int_distribution<int>(0, 12)(rng);
      for (int i = 0; i < n; ++i) order.push_back(e);
    }
    std::shuffle(order.begin(), order.end(), rng);
    for (auto e : order) {
      int k = ++backlog[static_cast<std::size_t>(e)];
      push_queued(s, make_job(e, std::to_string(k)));
    }
    int last_rank = 1;
    std::size_t count = 0;
    while (auto j = s.next()) {
      int rank = std::stoi(j->ev->id);  // this job is its endpoint's rank-th
      CHECK(rank >= last_rank);         // ranks never go back: rounds
      last_rank = rank;
      ++count;
    }
    CHECK(count == order.size());
  }
}

TEST_CASE("a rate-limited endpoint starts at most its rate; others are not held; it resumes at next_rate_release") {
  scheduler s;
  const tp now = t0 + std::chrono::hours(1);
  s.configure(1, 100, false, rate{2, seconds(1)});
  s.configure(2, 100, false);
  for (int i = 0; i < 5; ++i) push_queued(s, make_job(1, "a" + std::to_string(i)));
  for (int i = 0; i < 3; ++i) push_queued(s, make_job(2, "b" + std::to_string(i)));
  std::vector<std::string> started;
  while (auto j = s.next(now)) started.push_back(j->ev->id);
  CHECK(started.size() == 5);  // a0 a1 and all three of endpoint 2
  CHECK(std::count_if(started.begin(), started.end(), [](const auto& id) { return id[0] == 'a'; }) == 2);
  REQUIRE(s.next_rate_release().has_value());
  CHECK(*s.next_rate_release() == now + seconds(1));
  CHECK_FALSE(s.next(now + std::chrono::milliseconds(999)).has_value());
  // A second later the first two have left the window: two more start, then it is held again.
  auto j = s.next(now + seconds(1));
  REQUIRE(j.has_value());
  CHECK(j->ev->id == "a2");
  REQUIRE(s.next(now + seconds(1)).has_value());
  CHECK_FALSE(s.next(now + seconds(1)).has_value());
  REQUIRE(s.next_rate_release().has_value());
  // A new limit starts afresh: the hold computed under the old one goes.
  s.configure(1, 100, false, rate{100, seconds(1)});
  CHECK_FALSE(s.next_rate_release().has_value());
  auto again = s.next(now + seconds(1));
  REQUIRE(again.has_value());
  CHECK(again->ev->id == "a4");
  // The limit removed: whatever comes starts at once.
  s.configure(1, 100, false);
  for (int i = 5; i < 8; ++i) push_queued(s, make_job(1, "a" + std::to_string(i)));
  for (int i = 0; i < 3; ++i) CHECK(s.next(now + seconds(1)).has_value());
  CHECK_FALSE(s.next(now + seconds(1)).has_value());
}
