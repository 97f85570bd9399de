// The engine's delivery side (relay/engine/dispatcher.hpp) with faked store, transport and clock:
// admission, outcomes, back-pressure, the hold bound, backlog entry and exit, shutdown.
// Everything runs in the test's thread, in milliseconds, without sleeping.

#include "tests/unit/relay/engine/dispatcher_fixture.hpp"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>

using namespace walhook;
using namespace std::chrono_literals;
using test::dispatcher_fixture;

TEST_CASE("dispatcher: a healthy endpoint's delivery goes out at once, signed, writes nothing, frees its transaction") {
  dispatcher_fixture f;
  auto& ep = f.add_endpoint(1);
  auto end = f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  const auto& call = f.transport.at(0);
  CHECK(call.pool_key == "1");
  CHECK(call.header("webhook-id") == "00000000-0000-0000-0000-000000000001");
  CHECK(delivery::verify(ep.keys, call.header("webhook-id"), call.header("webhook-timestamp"), call.request.body,
                         call.header("webhook-signature")));
  CHECK_FALSE(f.tracker.confirmable().valid());  // held while the attempt runs
  f.transport.answer(0, 204);
  f.run();
  CHECK(f.store.queued.empty());
  CHECK(f.tracker.confirmable() == end);
  CHECK(f.d->stats().delivered == 1);
  CHECK(f.d->backlog().lane_of(1) == relay::lane::memory);
}

TEST_CASE("dispatcher: a failed attempt is written pending with backoff; its transaction goes once that is durable") {
  dispatcher_fixture f;
  f.add_endpoint(1);
  auto end = f.transaction({1});
  f.run();
  f.transport.answer(0, 503);
  f.run();
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 1);
  const auto& o = upserts[0].outcome;
  CHECK(o.status == sql::delivery_status::pending);
  CHECK(o.attempts == 1);
  CHECK(o.last_status == 503);
  REQUIRE(o.next_attempt_in.has_value());
  // Backoff after the first failure: 30 s, half of it jitter → [15 s, 30 s), as a delay the
  // server adds to its own clock.
  CHECK(*o.next_attempt_in >= 15s);
  CHECK(*o.next_attempt_in < 30s);
  CHECK(f.store.queued_of<sql::health_write>().size() == 1);
  CHECK_FALSE(f.tracker.confirmable().valid());  // not durable yet: the slot must not pass it
  f.store.commit();
  CHECK(f.tracker.confirmable() == end);
  CHECK(f.d->backlog().has_backlog(1));
}

TEST_CASE("dispatcher: 410 Gone ends the delivery dead and disables the endpoint; its queued work is spilled") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);
  f.transaction({1});
  f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 1);  // max_concurrency 1: the second waits in memory
  f.transport.answer(0, 410);
  f.run();
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 2);
  CHECK(upserts[0].outcome.status == sql::delivery_status::dead);
  CHECK(upserts[1].outcome.status == sql::delivery_status::pending);
  CHECK(upserts[1].outcome.last_error == "endpoint disabled");
  auto health = f.store.queued_of<sql::health_write>();
  REQUIRE(health.size() == 1);
  CHECK(health[0].disable);
  CHECK(f.directory.find(1)->status == relay::endpoint_status::disabled);
  CHECK(f.transport.calls() == 1);
  // New work for the disabled endpoint waits in PostgreSQL.
  f.transaction({1});
  CHECK(f.store.queued_of<sql::upsert_delivery>().size() == 3);
}

TEST_CASE("dispatcher: the circuit breaker pauses after the threshold; queued work waits in PostgreSQL until then") {
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.outcomes.breaker.failure_threshold = 2; });
  f.add_endpoint(1, 1);
  for (int i = 0; i < 3; ++i) f.transaction({1});
  f.run();
  f.transport.answer(0, 500);
  f.run();
  f.transport.answer(1, 500);
  f.run();
  CHECK(f.transport.calls() == 2);
  auto health = f.directory.health(1);
  REQUIRE(health.paused_until.has_value());
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 3);
  CHECK(upserts[2].outcome.last_error == "endpoint paused by the circuit breaker");
  CHECK(upserts[2].outcome.next_attempt_in == health.paused_until.value() - f.clock.system_now());
  // While paused, new deliveries are written at once, due when the pause ends.
  f.transaction({1});
  auto later = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(later.size() == 4);
  CHECK(later[3].outcome.next_attempt_in == health.paused_until.value() - f.clock.system_now());
}

TEST_CASE("dispatcher: Retry-After pauses the whole endpoint, not just the delivery") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);
  f.transaction({1});
  f.transaction({1});
  f.run();
  f.transport.answer(0, 429, "120");
  f.run();
  auto health = f.directory.health(1);
  REQUIRE(health.paused_until.has_value());
  CHECK(*health.paused_until == f.clock.system_now() + 120s);
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 2);
  CHECK(upserts[0].outcome.next_attempt_in == health.paused_until.value() - f.clock.system_now());  // the 429'd one: not before then
  CHECK(upserts[1].outcome.next_attempt_in == health.paused_until.value() - f.clock.system_now());  // the queued one went with it
  CHECK(f.transport.calls() == 1);
}

TEST_CASE("dispatcher: a fast endpoint with a full queue slows reading down instead of spilling") {
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.limits.max_queued_per_endpoint = 4; });
  f.add_endpoint(1, 1);
  for (int i = 0; i < 5; ++i) f.transaction({1});  // 1 in flight + 4 queued
  f.run();
  CHECK(f.d->must_hold());
  CHECK(f.store.queued.empty());
  CHECK(f.d->backlog().lane_of(1) == relay::lane::memory);
  f.transport.answer(0, 200);
  f.run();
  CHECK(f.room >= 1);  // the reader is woken…
  CHECK_FALSE(f.d->must_hold());  // …and may read again
  CHECK(f.store.queued.empty());
}

TEST_CASE("dispatcher: an endpoint whose full queue would wait too long moves to the table lane; reading goes on") {
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.limits.max_queued_per_endpoint = 4; });
  f.add_endpoint(1, 1);
  f.add_endpoint(2);
  for (int i = 0; i < 5; ++i) f.transaction({1});
  f.run();
  CHECK(f.d->must_hold());
  f.clock.advance(600ms);  // the oldest queued delivery has waited more than half of max_wait_in_memory (1 s)
  CHECK_FALSE(f.d->must_hold());
  CHECK(f.d->backlog().lane_of(1) == relay::lane::table);
  f.transaction({1, 2});
  f.run();
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 1);  // endpoint 1's new delivery goes through PostgreSQL…
  CHECK(upserts[0].endpoint_id == 1);
  CHECK(f.transport.calls() == 2);  // …endpoint 2's goes out at once
  CHECK(f.transport.at(1).pool_key == "2");
}

TEST_CASE("dispatcher: an attempt past the hold bound is recorded 'sending' and stops holding its transaction") {
  dispatcher_fixture f;
  f.add_endpoint(1);
  auto end = f.transaction({1});
  f.run();
  f.clock.advance(200ms);
  f.d->sweep();
  CHECK(f.store.queued.empty());  // under the bound (250 ms): nothing to record
  f.clock.advance(100ms);
  f.d->sweep();
  auto marks = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(marks.size() == 1);
  CHECK(marks[0].outcome.status == sql::delivery_status::sending);
  CHECK(marks[0].outcome.attempts == 0);
  REQUIRE(f.d->owned().size() == 1);
  CHECK(f.d->owned()[0].event_id == marks[0].event_id);
  CHECK_FALSE(f.tracker.confirmable().valid());
  f.store.commit();
  CHECK(f.tracker.confirmable() == end);  // the attempt still runs, the slot moves on
  f.d->sweep();
  CHECK(f.store.queued.empty());  // marked once
  f.transport.answer(0, 200);
  f.run();
  // Its outcome updates the row it owns, by (endpoint, event).
  auto updates = f.store.queued_of<sql::update_delivery>();
  REQUIRE(updates.size() == 1);
  CHECK_FALSE(updates[0].row_id.has_value());
  CHECK(updates[0].key.endpoint_id == 1);
  CHECK(updates[0].outcome.status == sql::delivery_status::delivered);
  CHECK(updates[0].outcome.attempts == 1);
  CHECK(f.d->owned().size() == 1);  // until the outcome is durable
  f.store.commit();
  CHECK(f.d->owned().empty());
  CHECK(f.d->stats().marked_sending == 1);
}

TEST_CASE("dispatcher: an attempt that ends before its mark is durable releases its transaction exactly once") {
  dispatcher_fixture f;
  f.add_endpoint(1);
  f.add_endpoint(2);
  auto first = f.transaction({1, 2});  // one transaction, two deliveries
  f.run();
  REQUIRE(f.transport.calls() == 2);
  f.clock.advance(300ms);
  f.d->sweep();
  REQUIRE(f.store.queued_of<sql::upsert_delivery>().size() == 2);
  f.transport.answer(0, 500);  // ends while its mark is still queued
  f.run();
  f.store.commit(1);  // the first mark: releases the first delivery's hold
  CHECK_FALSE(f.tracker.confirmable().valid());
  f.store.commit();  // second mark, then the first attempt's outcome
  CHECK(f.tracker.confirmable() == first);
  CHECK(f.tracker.held() == 0);  // nothing released twice, nothing left held
  f.transport.answer(1, 200);
  f.run();
  f.store.commit();
  CHECK(f.tracker.held() == 0);
}

TEST_CASE("dispatcher: a stalled endpoint's queued deliveries go to PostgreSQL; new ones follow") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);
  f.add_endpoint(2);
  auto a = f.transaction({1});
  f.transaction({1});
  f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  f.clock.advance(300ms);
  f.d->sweep();
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 3);  // the mark of the running attempt and the two queued deliveries
  CHECK(upserts[0].outcome.status == sql::delivery_status::sending);
  CHECK(upserts[1].outcome.status == sql::delivery_status::pending);
  CHECK(upserts[2].outcome.status == sql::delivery_status::pending);
  CHECK(f.d->backlog().lane_of(1) == relay::lane::table);
  f.store.commit();
  CHECK(f.tracker.held() == 0);
  CHECK(f.tracker.confirmable() > a);
  // A healthy neighbour is untouched.
  f.transaction({1, 2});
  f.run();
  CHECK(f.store.queued_of<sql::upsert_delivery>().size() == 1);
  CHECK(f.transport.calls() == 2);
}

TEST_CASE("dispatcher: a delivery that waits for walhook's in-flight pool, not its endpoint, stays in memory") {
  // One attempt in flight for the whole process, none past the hold bound: endpoint 2's delivery
  // waits for endpoint 1's, with its own slots free. That is walhook's saturation, which makes
  // reading wait; it is no reason to write a row (issue 18: 500 healthy endpoints wrote 6,818–
  // 9,946 rows for 10,000 deliveries when such waits spilled).
  dispatcher_fixture f([](relay::dispatcher_options& o) {
    o.limits.max_in_flight = 1;
    o.limits.max_slow_in_flight = 0;
    o.limits.max_queued_per_endpoint = 1;
  });
  f.add_endpoint(1);
  f.add_endpoint(2);
  f.transaction({1});
  f.transaction({2});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  f.clock.advance(1100ms);
  f.d->sweep();  // marks endpoint 1's attempt 'sending'; endpoint 2's delivery waited 1.1 s for the pool
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 1);
  CHECK(upserts[0].endpoint_id == 1);
  CHECK(upserts[0].outcome.status == sql::delivery_status::sending);
  CHECK(f.d->backlog().lane_of(2) == relay::lane::memory);
  CHECK(f.d->must_hold());  // its queue is full and waits for walhook: reading waits too
  CHECK(f.d->backlog().lane_of(2) == relay::lane::memory);
  f.transport.answer(0, 200);  // the pool has room again: endpoint 2's delivery goes out
  f.run();
  CHECK(f.transport.calls() == 2);
  CHECK(f.transport.at(1).pool_key == "2");
  CHECK(f.store.queued_of<sql::upsert_delivery>().size() == 1);  // still only endpoint 1's mark
}

TEST_CASE("dispatcher: an attempt past the hold bound is parked, and frees its slot for another endpoint") {
  // The same: one young attempt for the whole process; endpoint 1's hangs.
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.limits.max_in_flight = 1; });
  f.add_endpoint(1);
  f.add_endpoint(2);
  f.transaction({1});
  f.transaction({2});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  f.clock.advance(300ms);  // past the 250 ms hold bound
  f.d->sweep();
  f.run();
  CHECK(f.transport.calls() == 2);  // endpoint 2's delivery started without waiting for endpoint 1's
  CHECK(f.d->scheduler().parked_total() == 1);
  CHECK(f.d->scheduler().in_flight_total() == 2);
}

TEST_CASE("dispatcher: merge — a queued state update is replaced by a newer one; the older one's hold goes") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);
  f.transaction({1});
  auto second = f.transaction({1}, "order:7");
  auto third = f.transaction({1}, "order:7");
  f.run();
  CHECK(f.d->stats().merged == 1);
  CHECK(f.d->scheduler().queued(1) == 1);
  f.transport.answer(0, 200);
  f.run();
  REQUIRE(f.transport.calls() == 2);
  CHECK(f.transport.at(1).header("webhook-id") == "00000000-0000-0000-0000-000000000003");
  CHECK(f.tracker.confirmable() == second);  // the first two are done, the third in flight
  f.transport.answer(1, 200);
  f.run();
  CHECK(f.tracker.confirmable() == third);
  CHECK(f.store.queued.empty());
}

TEST_CASE("dispatcher: payload limit and bad endpoint configuration end dead at admission") {
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.admission.max_payload_bytes = 10; });
  f.add_endpoint(1);
  relay::endpoint bad = f.add_endpoint(2);
  bad.url = "ftp://nope";
  relay::resolve_endpoint(bad);
  f.apply(bad);
  f.transaction({1, 2});
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 2);
  CHECK(upserts[0].outcome.status == sql::delivery_status::dead);
  CHECK(upserts[0].outcome.last_error->find("exceeds the limit of 10 bytes") != std::string::npos);
  CHECK(upserts[1].outcome.status == sql::delivery_status::dead);
  CHECK(f.transport.calls() == 0);
  CHECK(f.d->stats().dead == 2);
}

TEST_CASE("dispatcher: an endpoint removed while its attempt runs — a stream delivery is done, a claimed one dead") {
  dispatcher_fixture f;
  f.add_endpoint(1);
  f.d->start_session({1});
  f.store.claimable.push_back(f.claimable(1, 77));
  f.claim_round();
  auto end = f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 2);
  f.d->endpoint_changed(*f.directory.remove(1));
  CHECK(f.transport.forgotten == std::vector<std::string>{"1", "oauth2:1"});  // its token endpoint's pool too
  f.transport.answer_all(200);
  f.run();
  CHECK(f.tracker.confirmable() == end);
  auto updates = f.store.queued_of<sql::update_delivery>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].row_id == 77);
  CHECK(updates[0].outcome.status == sql::delivery_status::dead);
  CHECK(updates[0].outcome.last_error == "endpoint no longer exists");
}

TEST_CASE("dispatcher: claims are sized by throughput; an endpoint leaves backlog mode when its rows are gone") {
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.max_claim = 1000; });
  f.add_endpoint(1);
  f.d->start_session({1});
  for (int i = 0; i < 2000; ++i) f.store.claimable.push_back(f.claimable(1, 1000 + i));
  f.claim_round();
  REQUIRE(f.store.claim_calls.size() == 1);
  CHECK(f.store.claim_calls[0].at(0).limit == 16);  // no throughput known yet: 4 rounds of max_concurrency 4
  CHECK(f.store.due_calls.empty());                 // it got all it asked for: more is likely
  // The endpoint answers 4 at a time every 10 ms.
  for (int round = 0; round < 4; ++round) {
    f.clock.advance(10ms);
    f.transport.answer_all(200);
    f.run();
  }
  CHECK(f.transport.calls() == 16);
  f.claim_round();
  REQUIRE(f.store.claim_calls.size() == 2);
  // Each attempt took 10 ms: 4 slots → 400/s; × 500 ms claim horizon = 200 rows at once.
  CHECK(f.store.claim_calls[1].at(0).limit == 200);
  // Drain what is left quickly; then there is nothing more.
  while (!f.store.claimable.empty() || f.transport.waiting() > 0) {
    f.clock.advance(1ms);
    f.transport.answer_all(200);
    f.run();
    if (f.d->scheduler().queued(1) + f.d->scheduler().in_flight(1) == 0) f.claim_round();
  }
  f.store.commit();
  CHECK(f.d->stats().delivered == 2000);
  CHECK(f.store.claim_calls.size() < 10);  // a few large claims, not 125 rounds of 16
  f.claim_round();
  CHECK(f.d->backlog().lane_of(1) == relay::lane::memory);
  CHECK_FALSE(f.d->backlog().has_backlog(1));
}

TEST_CASE("dispatcher: no lost wakeup — a pending row that commits while next_due runs keeps the endpoint in backlog") {
  dispatcher_fixture f;
  f.add_endpoint(1);
  f.transaction({1});
  f.run();
  f.transport.answer(0, 500);  // a pending write is on its way
  f.run();
  REQUIRE(f.store.queued.size() == 2);
  REQUIRE(f.d->backlog().has_backlog(1));
  // The write commits while the question "who still has pending rows?" runs: the answer
  // (computed before the commit) does not include it.
  f.store.during_next_due = [&] { f.store.commit(); };
  f.claim_round();
  REQUIRE(f.store.due_calls.size() == 1);
  CHECK(f.d->backlog().has_backlog(1));
  // Next round, nothing raced: the answer is believed.
  f.store.during_next_due = {};
  f.claim_round();
  CHECK_FALSE(f.d->backlog().has_backlog(1));
}

TEST_CASE("dispatcher: an endpoint with a write still queued does not leave backlog mode") {
  dispatcher_fixture f;
  f.add_endpoint(1);
  f.transaction({1});
  f.run();
  f.transport.answer(0, 500);
  f.run();
  f.claim_round();
  CHECK(f.d->backlog().has_backlog(1));
  f.store.commit();
  f.claim_round();
  CHECK_FALSE(f.d->backlog().has_backlog(1));
}

TEST_CASE("dispatcher: a paused endpoint is not claimed for; the round wakes when the pause ends") {
  dispatcher_fixture f;
  f.add_endpoint(1);
  delivery::breaker_state paused;
  paused.consecutive_failures = 20;
  paused.paused_until = f.clock.system_now() + 45s;
  f.directory.set_health(1, paused);
  f.d->start_session({1});
  auto next = f.claim_round();
  CHECK(f.store.claim_calls.empty());
  CHECK(next == f.clock.steady_now() + 45s);
  f.clock.advance(46s);  // probing: one round of max_concurrency
  f.store.claimable.push_back(f.claimable(1, 5));
  f.claim_round();
  REQUIRE(f.store.claim_calls.size() == 1);
  CHECK(f.store.claim_calls[0].at(0).limit == 4);
}

TEST_CASE("dispatcher: session end — claimed deliveries go back to pending, stream deliveries are dropped") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);
  f.d->start_session({1});
  f.transaction({1});  // in flight
  f.transaction({1});  // queued (stream)
  f.store.claimable.push_back(f.claimable(1, 9));
  f.claim_round();     // queued (claimed)
  f.run();
  REQUIRE(f.d->scheduler().queued(1) == 2);
  f.d->end_session();
  CHECK(f.d->scheduler().queued(1) == 0);
  auto updates = f.store.queued_of<sql::update_delivery>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].row_id == 9);
  CHECK(updates[0].outcome.status == sql::delivery_status::pending);
  CHECK(f.store.queued_of<sql::upsert_delivery>().empty());
  CHECK(f.d->owned().size() == 1);  // row 9 until its write is durable
  f.store.commit();
  CHECK(f.d->owned().empty());
}

TEST_CASE("dispatcher: shutdown — queued work is written, attempts still running after the grace end 'cancelled' and pending") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);
  f.transaction({1});
  f.transaction({1});
  f.transaction({1});
  f.run();
  bool done = false;
  // Grace already over (deadline now + 1 s: attempts get until deadline − 1 s).
  boost::asio::co_spawn(f.ioc, f.d->shutdown(std::chrono::steady_clock::now() + 1s), [&](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
    done = true;
  });
  for (int i = 0; i < 100 && !done; ++i) f.run();
  REQUIRE(done);
  CHECK(f.transport.shut_down);
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 3);
  for (const auto& u : upserts) CHECK(u.outcome.status == sql::delivery_status::pending);
  CHECK(upserts[2].outcome.last_error->find("shut down") != std::string::npos);
  CHECK(f.d->attempts_running() == 0);
  f.store.commit();
  CHECK(f.tracker.held() == 0);
}

TEST_CASE("dispatcher: after its session ends (leadership lost) nothing is claimed, marked or started; attempts in flight are abandoned") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);
  f.transaction({1});
  f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  f.d->end_session();
  CHECK(f.transport.cancelled_all == 1);    // the attempt in flight is cancelled at once
  CHECK(f.d->scheduler().queued(1) == 0);  // the queued stream delivery is dropped (streamed again)
  f.clock.advance(1s);
  f.d->sweep();
  CHECK(f.store.queued.empty());  // the attempt still running is not marked
  f.store.claimable.push_back(f.claimable(1, 3));
  f.d->wake(1, false);
  f.claim_round();
  CHECK(f.store.claim_calls.empty());
  f.transport.fail(0, delivery::transport_errc::cancelled);  // the abandoned attempt ends…
  f.run();
  CHECK(f.transport.calls() == 1);  // …nothing new starts, nothing is written, no breaker state
  CHECK(f.d->stats().delivered == 0);
  CHECK(f.store.queued.empty());
  CHECK(f.directory.health(1).consecutive_failures == 0);
  CHECK(f.d->attempts_running() == 0);
  // The next session picks up again.
  f.d->start_session({1});
  f.claim_round();
  CHECK(f.store.claim_calls.size() == 1);
  f.run();
  CHECK(f.transport.calls() == 2);
}

TEST_CASE("dispatcher: aggregate order — a sweep takes an ordered endpoint's queue to PostgreSQL whole, never a part") {
  dispatcher_fixture f;
  f.add_endpoint(1, 4, true);
  f.transaction({1}, std::nullopt, "A");  // A1 goes out
  f.transaction({1}, std::nullopt, "A");  // A2 waits behind it (one in flight per aggregate)
  f.run();
  REQUIRE(f.transport.calls() == 1);
  f.clock.advance(600ms);
  f.transaction({1}, std::nullopt, "A");  // A3, younger
  f.clock.advance(500ms);                  // A2 has waited 1.1 s, A3 0.5 s
  f.d->sweep();
  CHECK(f.d->scheduler().queued(1) == 0);  // A3 went with A2: it must not overtake it
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 3);            // A1's mark, then A2 and A3 pending
  CHECK(upserts[0].outcome.status == sql::delivery_status::sending);
  CHECK(upserts[1].event_id == "00000000-0000-0000-0000-000000000002");
  CHECK(upserts[2].event_id == "00000000-0000-0000-0000-000000000003");
  CHECK(upserts[2].outcome.status == sql::delivery_status::pending);
  // And new events of the endpoint follow them through the table.
  f.transaction({1}, std::nullopt, "A");
  CHECK(f.store.queued_of<sql::upsert_delivery>().size() == 4);
  CHECK(f.transport.calls() == 1);
}

TEST_CASE("dispatcher: a removal streamed while work is queued — one attempt each, failures dead, the copy forgotten after") {
  dispatcher_fixture f;
  f.add_endpoint(1, 1);  // one at a time: the second delivery waits in the queue
  f.add_endpoint(2);
  auto first = f.transaction({1});
  auto second = f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  // The stream reads the DELETE of endpoint 1 (transaction xid 77).
  auto removal_ticket = f.tracker.begin();
  f.d->removal_streamed({1}, 1, 77, removal_ticket);
  f.tracker.commit(removal_ticket, lsn{0x2000000});
  CHECK(f.directory.route("t", "order.paid") == std::vector<std::int64_t>{2});  // nothing new for it
  CHECK(f.store.queued_of<sql::removal_streamed>().empty());  // its work is not done yet
  f.transport.answer(0, 200);  // the first arrives
  f.run();
  REQUIRE(f.transport.calls() == 2);  // the queued one still gets its attempt
  CHECK(f.store.queued_of<sql::removal_streamed>().empty());
  f.transport.answer(1, 503);  // …which fails: dead, no retry, no health row
  f.run();
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 1);
  CHECK(upserts[0].outcome.status == sql::delivery_status::dead);
  CHECK(upserts[0].outcome.last_error.value_or("").starts_with("endpoint removed: "));
  CHECK(f.store.queued_of<sql::health_write>().empty());
  // Now the copy goes, after the dead record (one queue, in order), and the endpoint leaves.
  auto removals = f.store.queued_of<sql::removal_streamed>();
  REQUIRE(removals.size() == 1);
  CHECK(removals[0].endpoint_id == 1);
  CHECK(removals[0].xid == 77);
  CHECK(std::holds_alternative<sql::upsert_delivery>(f.store.queued.front().first));
  CHECK(f.directory.find(1) == nullptr);
  CHECK(f.tracker.confirmable() == first);  // the dead record and the removal are not durable yet
  f.store.commit();
  CHECK(f.tracker.confirmable() == lsn{0x2000000});
  CHECK(f.transport.calls() == 2);
  (void)second;
}

TEST_CASE("dispatcher: per-endpoint counters — attempts by outcome class, delivered, dead for any reason; removal drops them") {
  using delivery::outcome_class;
  auto at = [](outcome_class c) { return static_cast<std::size_t>(c); };
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.admission.max_payload_bytes = 1000; });
  f.add_endpoint(1);
  f.add_endpoint(2);
  f.transaction({1, 2});
  f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 3);
  f.transport.answer(0, 200);
  f.transport.answer(1, 503);
  f.transport.fail(2, delivery::transport_errc::timeout);
  f.run();
  const auto& s = f.d->stats();
  REQUIRE(s.endpoints.contains(1));
  REQUIRE(s.endpoints.contains(2));
  const auto& one = s.endpoints.at(1);
  const auto& two = s.endpoints.at(2);
  CHECK(one.attempts[at(outcome_class::success)] == 1);
  CHECK(one.attempts[at(outcome_class::timeout)] == 1);
  CHECK(one.attempts[at(outcome_class::server)] == 0);
  CHECK(one.delivered == 1);
  CHECK(two.attempts[at(outcome_class::server)] == 1);
  CHECK(two.delivered == 0);
  // The histogram is by class, across endpoints: one attempt each.
  CHECK(s.latency[at(outcome_class::success)].count() == 1);
  CHECK(s.latency[at(outcome_class::server)].count() == 1);
  CHECK(s.latency[at(outcome_class::timeout)].count() == 1);
  std::uint64_t all = 0;
  for (const auto& h : s.latency) all += h.count();
  CHECK(all == s.attempts);
  // A death at admission (payload too large) counts for its endpoint too.
  auto ev = std::make_shared<delivery::event>();
  ev->id = "00000000-0000-0000-0000-00000000ffff";
  ev->tenant_id = "t";
  ev->type = "order.paid";
  ev->created_at = format_iso8601(f.clock.system_now());
  ev->payload = '"' + std::string(2000, 'x') + '"';
  ev->body = delivery::make_body(*ev);
  delivery::job big;
  big.ev = ev;
  big.endpoint_id = 2;
  f.d->submit(std::move(big));
  CHECK(f.d->stats().endpoints.at(2).dead == 1);
  CHECK(f.d->stats().dead == 1);
  // Removed from the directory: its counters (and so its series) go; the global totals stay.
  f.d->endpoint_changed(*f.directory.remove(2));
  CHECK_FALSE(f.d->stats().endpoints.contains(2));
  CHECK(f.d->stats().dead == 1);
  CHECK(f.d->stats().endpoints.contains(1));
}

// ------------------------------------------------------------------ notifications (issue 11)

namespace {
std::vector<sql::publish_event> published(const test::fake_store& s) { return s.queued_of<sql::publish_event>(); }
}  // namespace

TEST_CASE("dispatcher: a disable is announced in its health write's batch — to the operator tenant and the contact endpoint") {
  dispatcher_fixture f([](relay::dispatcher_options& o) { o.notifications.operator_tenant = "ops"; });
  f.add_endpoint(2, 1, false, "t");  // the customer's technical contact
  auto e = *f.directory.find(2);
  e.id = 1;
  e.contact_endpoint_id = 2;
  f.apply(std::move(e));
  f.transaction({1});
  f.run();
  f.transport.answer(0, 410);
  f.run();
  // Right behind the health write that disables it: one transaction.
  std::size_t health_at = f.store.queued.size();
  for (std::size_t i = 0; i < f.store.queued.size(); ++i)
    if (std::holds_alternative<sql::health_write>(f.store.queued[i].first)) health_at = i;
  REQUIRE(health_at + 2 < f.store.queued.size());
  const auto* op = std::get_if<sql::publish_event>(&f.store.queued[health_at + 1].first);
  const auto* direct = std::get_if<sql::publish_event>(&f.store.queued[health_at + 2].first);
  REQUIRE(op);
  REQUIRE(direct);
  CHECK(op->event_type == "walhook.endpoint.disabled");
  CHECK(op->tenant_id == "ops");
  CHECK_FALSE(op->endpoint_id);
  CHECK(direct->event_type == "walhook.endpoint.disabled");
  CHECK(direct->tenant_id == "t");
  CHECK(direct->endpoint_id == 2);
  CHECK(direct->payload.find(f.directory.find(1)->secret) == std::string::npos);
  // The dead delivery is announced too (both ways); nothing else.
  std::vector<std::string> all;
  for (const auto& p : published(f.store)) all.push_back(p.event_type);
  CHECK(all == std::vector<std::string>{"walhook.endpoint.disabled", "walhook.endpoint.disabled", "walhook.delivery.dead",
                                        "walhook.delivery.dead"});
  CHECK(f.d->stats().notifications == 4);
}

TEST_CASE("dispatcher: deliveries of walhook.* events never notify; dead ones are counted and summed once a minute") {
  dispatcher_fixture f([](relay::dispatcher_options& o) {
    o.notifications.operator_tenant = "ops";
    o.outcomes.retry.max_attempts = 1;  // every failure ends dead
  });
  f.add_endpoint(1);
  auto send = [&](std::string type) {
    auto ev = std::make_shared<delivery::event>();
    ev->id = fmt::format("00000000-0000-0000-0000-{:012}", ++f.events);
    ev->tenant_id = "t";
    ev->type = std::move(type);
    ev->created_at = format_iso8601(f.clock.system_now());
    ev->payload = "{}";
    ev->body = delivery::make_body(*ev);
    delivery::job j;
    j.ev = ev;
    j.endpoint_id = 1;
    f.d->submit(std::move(j));
    f.run();
    f.transport.answer(f.transport.calls() - 1, 500);
    f.run();
  };
  // An operator endpoint failing on walhook's own events: no notification at all.
  for (int i = 0; i < 5; ++i) send("walhook.endpoint.paused");
  CHECK(published(f.store).empty());
  CHECK(f.d->stats().dead == 5);
  // Customer events ending dead: the first at once, the next ones counted.
  f.d->wake(1, true);  // a fresh streak
  send("order.paid");
  auto first = published(f.store);
  std::vector<std::string> types;
  for (const auto& p : first) types.push_back(p.event_type);
  CHECK(types == std::vector<std::string>{"walhook.endpoint.failing", "walhook.delivery.dead"});
  for (int i = 0; i < 3; ++i) send("order.paid");
  CHECK(published(f.store).size() == 2);
  f.d->sweep();
  CHECK(published(f.store).size() == 2);  // within the minute
  f.clock.advance(std::chrono::seconds{61});
  f.d->sweep();
  auto after = published(f.store);
  REQUIRE(after.size() == 3);
  CHECK(after[2].event_type == "walhook.delivery.dead");
  CHECK(after[2].payload.find(R"("dead_count":3)") != std::string::npos);
}

TEST_CASE("dispatcher: a contact endpoint paused by failing on walhook.* events — the operator tenant hears it once, the contact never") {
  dispatcher_fixture f([](relay::dispatcher_options& o) {
    o.notifications.operator_tenant = "ops";
    o.outcomes.breaker.failure_threshold = 3;
  });
  f.add_endpoint(2, 1, false, "t");  // its own contact endpoint: no chain through it
  auto e = *f.directory.find(2);
  e.id = 1;
  e.contact_endpoint_id = 2;
  f.apply(std::move(e));
  auto send = [&](const std::string& type) {
    auto ev = std::make_shared<delivery::event>();
    ev->id = fmt::format("00000000-0000-0000-0000-{:012}", ++f.events);
    ev->tenant_id = "t";
    ev->type = type;
    ev->created_at = format_iso8601(f.clock.system_now());
    ev->payload = "{}";
    ev->body = delivery::make_body(*ev);
    delivery::job j;
    j.ev = ev;
    j.endpoint_id = 1;
    f.d->submit(std::move(j));
    f.run();
    f.transport.answer_all(500);
    f.run();
  };
  for (int i = 0; i < 3; ++i) send("walhook.endpoint.disabled");  // the third pauses it
  auto rows = published(f.store);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].event_type == "walhook.endpoint.paused");
  CHECK(rows[0].tenant_id == "ops");
  CHECK_FALSE(rows[0].endpoint_id);  // not the direct row to endpoint 2
  CHECK(rows[0].payload.find(R"("endpoint_id":1)") != std::string::npos);
  // A failed probe round extends the pause and announces nothing more; nor does what waits.
  const auto attempts = f.transport.calls();
  f.clock.advance(std::chrono::seconds{61});
  send("walhook.endpoint.disabled");
  CHECK(f.transport.calls() == attempts + 1);  // the probe
  send("walhook.endpoint.disabled");
  CHECK(published(f.store).size() == 1);
}

TEST_CASE("dispatcher: the operator tenant's budget — past it, notices wait for one digest at the minute's end") {
  dispatcher_fixture f([](relay::dispatcher_options& o) {
    o.notifications.operator_tenant = "ops";
    o.notifications.budget_per_minute = 2;
  });
  for (std::int64_t id = 1; id <= 4; ++id) f.add_endpoint(id);
  f.transaction({1, 2, 3, 4});
  f.run();
  for (std::size_t i = 0; i < 4; ++i) f.transport.answer(i, 410);  // 4 × (disabled, dead)
  f.run();
  auto rows = published(f.store);
  REQUIRE(rows.size() == 2);
  for (const auto& r : rows) CHECK(r.tenant_id == "ops");
  f.d->sweep();
  CHECK(published(f.store).size() == 2);  // within the minute
  f.clock.advance(std::chrono::seconds{60});
  f.d->sweep();
  rows = published(f.store);
  REQUIRE(rows.size() == 3);
  CHECK(rows[2].event_type == "walhook.endpoints.digest");
  CHECK(rows[2].tenant_id == "ops");
  CHECK(rows[2].payload.find(R"("held_back":6)") != std::string::npos);
  CHECK(rows[2].payload.find(R"("endpoints":3)") != std::string::npos);  // the first one's two went out
}

TEST_CASE("dispatcher: a rotation's old secret stops signing when the grace ends, though the row still holds it") {
  dispatcher_fixture f;
  const std::string fresh = delivery::generate_secret(), old = delivery::generate_secret();
  auto e = f.add_endpoint(1);
  e.secret = fresh + " " + old;
  e.secret_grace_until = f.clock.system_now() + std::chrono::seconds{10};
  relay::resolve_endpoint(e);
  f.apply(e);
  auto verifies = [&](std::size_t call, const std::string& secret) {
    const delivery::signing_key key[] = {*delivery::parse_secret(secret)};
    const auto& c = f.transport.at(call);
    return delivery::verify(key, c.header("webhook-id"), c.header("webhook-timestamp"), c.request.body,
                            c.header("webhook-signature"));
  };
  f.transaction({1});
  f.run();
  CHECK(verifies(0, fresh));
  CHECK(verifies(0, old));
  f.transport.answer(0, 204);
  f.clock.advance(std::chrono::seconds{10});  // the grace is over; no drop has reached the stream
  f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 2);
  CHECK(verifies(1, fresh));
  CHECK_FALSE(verifies(1, old));
  CHECK(f.transport.at(1).header("webhook-signature").find(' ') == std::string::npos);  // one signature
}

/// Endpoint 1 of `f`, with OAuth2 client credentials (client "c", `secret`) at auth.example.
relay::endpoint oauth_endpoint(dispatcher_fixture& f, const std::string& secret) {
  relay::endpoint e = *f.directory.find(f.add_endpoint(1).id);
  e.policies.oauth_token_url = "https://auth.example/token";
  e.policies.oauth_client_id = "c";
  e.policies.oauth_client_secret = secret;
  relay::resolve_endpoint(e);
  REQUIRE(e.oauth.has_value());
  f.apply(e);
  return e;
}

TEST_CASE("dispatcher: an OAuth2 endpoint's attempt asks for a token first, sends it as Bearer, and on a 401 once more with a new one") {
  dispatcher_fixture f;
  oauth_endpoint(f, "s");
  auto end = f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  CHECK(f.transport.at(0).pool_key == "oauth2:1");
  f.transport.answer_with_body(0, 200, R"({"access_token":"t1","token_type":"Bearer","expires_in":600})");
  f.run();
  REQUIRE(f.transport.calls() == 2);
  CHECK(f.transport.at(1).pool_key == "1");
  CHECK(f.transport.at(1).header("Authorization") == "Bearer t1");
  f.transport.answer(1, 401);
  f.run();
  REQUIRE(f.transport.calls() == 3);
  CHECK(f.transport.at(2).pool_key == "oauth2:1");
  f.transport.answer_with_body(2, 200, R"({"access_token":"t2","token_type":"Bearer","expires_in":600})");
  f.run();
  REQUIRE(f.transport.calls() == 4);
  CHECK(f.transport.at(3).header("Authorization") == "Bearer t2");
  f.transport.answer(3, 200);
  f.run();
  CHECK(f.store.queued.empty());  // one attempt, delivered: nothing written
  CHECK(f.tracker.confirmable() == end);
  CHECK(f.d->stats().delivered == 1);

  // A second 401 is the attempt's answer: a failed attempt, not a third token.
  f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 5);
  CHECK(f.transport.at(4).header("Authorization") == "Bearer t2");
  f.transport.answer(4, 401);
  f.run();
  REQUIRE(f.transport.calls() == 6);
  f.transport.answer_with_body(5, 200, R"({"access_token":"t3","token_type":"Bearer","expires_in":600})");
  f.run();
  REQUIRE(f.transport.calls() == 7);
  f.transport.answer(6, 401);
  f.run();
  CHECK(f.transport.calls() == 7);
  auto upserts = f.store.queued_of<sql::upsert_delivery>();
  REQUIRE(upserts.size() == 1);
  CHECK(upserts[0].outcome.status == sql::delivery_status::pending);
  CHECK(upserts[0].outcome.attempts == 1);
  CHECK(upserts[0].outcome.last_status == 401);
}

TEST_CASE("dispatcher: an OAuth2 attempt's token request and POSTs share its one deadline; the retry after a 401 uses the credentials of now") {
  dispatcher_fixture f;
  relay::endpoint e = oauth_endpoint(f, "old");
  f.transaction({1});
  f.run();
  REQUIRE(f.transport.calls() == 1);
  CHECK(*f.transport.at(0).request.deadline == 5s);  // the whole attempt's (--deadline-ms)
  f.clock.advance(2s);
  f.transport.answer_with_body(0, 200, R"({"access_token":"t1","token_type":"Bearer","expires_in":600})");
  f.run();
  REQUIRE(f.transport.calls() == 2);
  CHECK(*f.transport.at(1).request.deadline == 3s);  // what the token request left
  // The client secret is rotated while the POST runs; its 401 gets a token for the new one.
  e.policies.oauth_client_secret = "new";
  relay::resolve_endpoint(e);
  f.apply(e);
  f.transport.answer(1, 401);
  f.run();
  REQUIRE(f.transport.calls() == 3);
  CHECK(f.transport.at(2).header("Authorization") == "Basic " + delivery::base64_encode("c:new"));
}
