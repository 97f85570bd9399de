// SIGTERM while walhook's writes cannot land (issue 9): PostgreSQL stopped, or the database
// turned read-only. walhook gives up on what it could not write at the end of its grace period
// (nothing is acknowledged past it, so the slot streams it again), exits 0, and frees
// everything: scripts/test-sanitize runs this test with ASan/LSan, where a leak of the unwritten
// writes (their durable callbacks hold deliveries and attempts) or any other finding makes
// walhook exit non-zero.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace walhook;
using namespace std::chrono_literals;

TEST_CASE("SIGTERM with PostgreSQL stopped: walhook abandons what it cannot finish, exits 0, leaks nothing") {
  test::scenario s("unreachable");
  auto& rcv = s.rcv;
  test::never_answer(rcv, "/hung");
  test::add_endpoint(s.db, "t", rcv->url("/ok"), delivery::generate_secret());
  test::add_endpoint(s.db, "t", rcv->url("/hung"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--shutdown-grace-ms", "1000"});
  INFO(walhook.log_tail());  // evaluated on failure only
  test::publisher pub({.url = s.url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 1000, .total = 300});
  pub.start();
  REQUIRE(pub.join(30s));
  REQUIRE(test::eventually([&] { return rcv->total() >= 300; }, 30s));  // /ok has them all; /hung holds some

  REQUIRE(test::cluster().stop("immediate"));
  // The session is gone: the hung endpoint's attempts are abandoned (issue 19: the next session,
  // or another instance, sends them again), and walhook keeps trying to connect.
  REQUIRE(test::eventually([&] { return walhook.count_in_log("session.attempts_abandoned") > 0; }, 30s));
  REQUIRE(test::eventually([&] { return walhook.count_in_log("leader.connect_failed") > 0; }, 30s));
  int code = walhook.stop(60s);
  REQUIRE(test::cluster().start());
  CHECK(walhook.count_in_log("shutdown.done") == 1);
  CHECK(code == 0);
}

TEST_CASE("SIGTERM while every write fails (read-only database): thousands of writes given up, exits 0, leaks nothing") {
  test::scenario s("readonly_stop");
  auto& db = s.db;
  auto& rcv = s.rcv;
  rcv->keep_bodies(false);
  test::never_answer(rcv, "/hung");
  test::add_endpoint(db, "t", rcv->url("/ok"), delivery::generate_secret());
  test::add_endpoint(db, "t", rcv->url("/hung"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--shutdown-grace-ms", "1000"});
  INFO(walhook.log_tail());  // evaluated on failure only
  // Streaming first: starting a session writes too (it resets 'sending' rows).
  REQUIRE(test::eventually([&] { return walhook.count_in_log("replication.streaming") > 0; }, 20s));
  test::publisher pub({.url = s.url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 1000,
                       .events_per_transaction = 10, .total = 3000});
  pub.start();
  // The publisher's session is open before the database turns read-only; walhook's writer gets
  // a new session, which is.
  REQUIRE(test::eventually([&] { return pub.committed() > 100; }, 30s));
  db.exec("ALTER DATABASE readonly_stop SET default_transaction_read_only = on");
  db.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
          "WHERE application_name LIKE 'walhook-state%' AND datname = 'readonly_stop'");
  REQUIRE(pub.join(30s));
  // Writes fail (batch_failed; write_failed once the batch is retried one write at a time).
  REQUIRE(test::eventually([&] { return walhook.count_in_log("state_store.batch_failed") > 0; }, 30s));
  int code = walhook.stop(60s);
  db.exec("ALTER DATABASE readonly_stop RESET default_transaction_read_only");
  CHECK(walhook.count_in_log("state_store.stopped_with_backlog") == 1);
  CHECK(code == 0);
}

TEST_CASE("SIGTERM while another session locks walhook.deliveries: walhook still exits within its grace period") {
  test::scenario s("locked_stop");
  auto& db = s.db;
  auto& rcv = s.rcv;
  relay::receiver_behaviour down;
  down.status = 503;  // every delivery is written back, and claimed for retries
  rcv->set_behaviour("/down", down);
  test::add_endpoint(db, "t", rcv->url("/down"), delivery::generate_secret());
  // Rows (--behind rows): every delivery is written to the locked table, as the test needs.
  auto walhook = s.start_walhook({"--shutdown-grace-ms", "1000", "--behind", "rows"});
  INFO(walhook.log_tail());  // evaluated on failure only
  REQUIRE(test::eventually([&] { return walhook.count_in_log("replication.streaming") > 0; }, 20s));
  for (int i = 0; i < 20; ++i) test::query_value(db, "SELECT walhook.publish('t', 'x', '{}')");
  REQUIRE(test::eventually([&] { return test::query_value(db, "SELECT count(*) FROM walhook.deliveries") == "20"; }, 20s));
  // An operator's open transaction holds the table: walhook's writes, claims and reads wait on it.
  relay::blocking_db locker(s.url);
  locker.exec("BEGIN");
  locker.exec("LOCK TABLE walhook.deliveries IN ACCESS EXCLUSIVE MODE");
  for (int i = 0; i < 5; ++i) test::query_value(db, "SELECT walhook.publish('t', 'x', '{}')");
  // walhook's sessions wait on the lock (writes of these events, claims of the retries).
  REQUIRE(test::eventually([&] {
    return test::query_value(db, "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name LIKE 'walhook%' "
                                 "AND wait_event_type = 'Lock'") == "t";
  }, 20s));
  const auto asked = std::chrono::steady_clock::now();
  int code = walhook.stop(60s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  locker.exec("ROLLBACK");
  MESSAGE(fmt::format("SIGTERM with walhook.deliveries locked: exited after {:.1f} s (grace 1 s)", took));
  CHECK(code == 0);
  CHECK(took < 10.0);  // statement_timeout is 30 s: nothing waits for it
  CHECK(walhook.count_in_log("shutdown.done") == 1);
}
