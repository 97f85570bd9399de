// Exactly one active relay per slot, standby takeover, graceful shutdown and bad input
// (issue 3; docs/architecture.md, Invariants, 7).

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <csignal>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

bool slot_active(relay::blocking_db& db, const std::string& slot) {
  pg::params p{slot};
  return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", p) == "t";
}

std::set<std::string> ids_received(test::receiver_thread& rcv, const std::string& path) {
  std::set<std::string> out;
  for (auto& r : rcv->requests())
    if (r.path == path && r.status == 200) out.insert(r.webhook_id);
  return out;
}

}  // namespace

TEST_CASE("a second instance waits as a standby and takes over within 10 s of kill -9") {
  const std::string slot = "standby";
  test::scenario s(slot);
  auto& db = s.db;
  auto& rcv = s.rcv;
  test::add_endpoint(db, "t", rcv->url("/a"), delivery::generate_secret());

  auto active = s.start_walhook({"--instance-name", "first"}, "active");
  REQUIRE(test::eventually([&] { return slot_active(db, slot); }, 20s));
  auto standby = s.start_walhook({"--instance-name", "second"}, "standby");
  // It says it waits, and for whom; it does not crash-loop.
  REQUIRE(test::eventually([&] { return standby.count_in_log("standby.waiting") > 0; }, 20s));
  CHECK(standby.log().find("\"active_instance\":\"first\"") != std::string::npos);

  test::publisher before({.url = s.url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 200, .total = 200});
  before.start();
  REQUIRE(before.join(30s));
  REQUIRE(test::eventually([&] { return ids_received(rcv, "/a").size() >= 200; }, 30s));
  CHECK(standby.count_in_log("replication.streaming") == 0);
  CHECK(standby.running());
  CHECK(standby.count_in_log("standby.waiting") == 1);

  auto killed_at = std::chrono::steady_clock::now();
  active.kill9();
  bool took_over = test::eventually([&] { return standby.count_in_log("\"replication.streaming\"") > 0; }, 20s, 20ms);
  double takeover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  MESSAGE(fmt::format("standby took over {:.2f} s after kill -9 of the active instance", takeover_s));
  REQUIRE(took_over);
  CHECK(takeover_s < 10.0);

  test::publisher after({.url = s.url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 200, .total = 200});
  after.start();
  REQUIRE(after.join(30s));
  std::set<std::string> want;
  for (auto& e : before.events()) want.insert(e.id);
  for (auto& e : after.events()) want.insert(e.id);
  CHECK(test::eventually([&] {
    auto got = ids_received(rcv, "/a");
    for (auto& id : want)
      if (!got.contains(id)) return false;
    return true;
  }, 30s));
  CHECK(standby.stop() == 0);
}

TEST_CASE("the lock's session is terminated: the active instance steps down at once, closes its stream, the standby takes over") {
  const std::string slot = "lock_lost";
  test::scenario s(slot);
  auto& db = s.db;
  auto& rcv = s.rcv;
  test::add_endpoint(db, "t", rcv->url("/a"), delivery::generate_secret());
  // Half of its answers fail: it always has pending rows, so the active instance claims all along.
  relay::receiver_behaviour flaky;
  flaky.error_rate = 0.5;
  rcv->set_behaviour("/flaky", flaky);
  test::add_endpoint(db, "t", rcv->url("/flaky"), delivery::generate_secret());
  const int first_admin = relay::free_tcp_port();
  auto first = s.start_walhook(
      {"--instance-name", "first", "--backoff-base-ms", "50", "--admin-listen", fmt::format("127.0.0.1:{}", first_admin)},
      "first");
  REQUIRE(test::eventually([&] { return slot_active(db, slot); }, 20s));
  auto second = s.start_walhook({"--instance-name", "second", "--backoff-base-ms", "50"}, "second");
  REQUIRE(test::eventually([&] { return second.count_in_log("standby.waiting") > 0; }, 20s));

  test::publisher load({.url = s.url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 200, .total = 1200});
  load.start();
  REQUIRE(test::eventually([&] { return load.committed() > 300; }, 30s));
  // An operator (or a failover tool) ends the active instance's lock session.
  auto terminated = std::chrono::steady_clock::now();
  CHECK(test::query_value(db, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE application_name = 'walhook-lock first'") == "1");
  REQUIRE(test::eventually([&] { return first.count_in_log("leader.lost") > 0; }, 10s, 10ms));
  double noticed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - terminated).count();
  // It stops streaming: its walsender goes away (the replication connection is closed, not left
  // waiting), and the standby, blocked on the lock in the server, streams instead.
  bool took_over = test::eventually([&] { return second.count_in_log("\"replication.streaming\"") > 0; }, 20s, 20ms);
  double takeover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - terminated).count();
  MESSAGE(fmt::format("lock session terminated: the active instance noticed in {:.3f} s, the standby streamed {:.2f} s after",
                      noticed_s, takeover_s));
  REQUIRE(took_over);
  CHECK(noticed_s < 2.0);  // the session's socket says so at once; nothing is polled
  // The demoted instance starts nothing new: once its attempts in flight are done (5 s deadline
  // at most), its attempt count stands still while the new leader works.
  auto attempts = [&] {
    auto [status, body] = test::http_get(static_cast<unsigned short>(first_admin), "/metrics");
    auto at = body.find("\nwalhook_attempts_total ");
    return at == std::string::npos ? -1L : std::stol(body.substr(at + 24));
  };
  ::usleep(5'500'000);
  long settled = attempts();
  ::usleep(2'000'000);
  CHECK(settled >= 0);
  CHECK(attempts() == settled);
  CHECK(test::query_value(db, "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'walhook first'") == "0");
  REQUIRE(load.join(60s));
  std::set<std::string> want;
  for (auto& e : load.events()) want.insert(e.id);
  CHECK(test::eventually([&] {
    auto got = ids_received(rcv, "/a");
    for (auto& id : want)
      if (!got.contains(id)) return false;
    return true;
  }, 30s));
  CHECK(first.running());  // it went back to waiting, as a standby
  CHECK(test::eventually([&] { return first.count_in_log("standby.waiting") > 0; }, 10s));
  second.signal(SIGTERM);  // both at once; stop() then only waits (a second SIGTERM forces the exit)
  first.signal(SIGTERM);
  CHECK(second.stop() == 0);
  CHECK(first.stop() == 0);
}

TEST_CASE("SIGTERM drains and exits 0; a clean restart redelivers nothing") {
  const std::string slot = "shutdown";
  test::scenario s(slot);
  auto& db = s.db;
  auto& rcv = s.rcv;
  relay::receiver_behaviour slow;
  slow.delay = 300ms;  // attempts are in flight when SIGTERM arrives
  rcv->set_behaviour("/slow", slow);
  test::add_endpoint(db, "t", rcv->url("/fast"), delivery::generate_secret());
  test::add_endpoint(db, "t", rcv->url("/slow"), delivery::generate_secret());

  auto first = s.start_walhook({}, "first");
  REQUIRE(test::eventually([&] { return slot_active(db, slot); }, 20s));
  test::publisher pub({.url = s.url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 500, .total = 500});
  pub.start();
  REQUIRE(pub.join(30s));
  // Every event has been read (the fast endpoint has them all); the slow one's are in flight or queued.
  REQUIRE(test::eventually([&] { return ids_received(rcv, "/fast").size() == 500; }, 30s));
  CHECK(first.stop() == 0);
  CHECK(first.count_in_log("shutdown.done") == 1);

  // Everything not delivered before the stop is persisted as pending, or owed by the slow
  // endpoint's outbox cursor (it is slower than the stream: issue 18); nothing is lost.
  auto fast = ids_received(rcv, "/fast").size();
  auto slow_done = ids_received(rcv, "/slow").size();
  auto pending = std::stol(test::query_value(db, "SELECT count(*) FROM walhook.deliveries WHERE status = 'pending'"));
  const bool cursor = test::query_value(db, "SELECT count(*) FROM walhook.endpoint_cursors") == "1";
  MESSAGE(fmt::format("at SIGTERM: /fast {} of 500, /slow {} of 500 delivered, {} persisted pending, slow endpoint {}",
                      fast, slow_done, pending, cursor ? "following the outbox" : "on the stream"));
  CHECK((cursor || fast + slow_done + static_cast<std::size_t>(pending) >= 1000));

  // The restart delivers the pending ones and re-sends nothing that was already delivered.
  std::size_t before = rcv->total();
  auto second = s.start_walhook({}, "second");
  REQUIRE(test::eventually([&] { return ids_received(rcv, "/fast").size() == 500 && ids_received(rcv, "/slow").size() == 500; }, 60s));
  CHECK(test::eventually([&] { return test::query_value(db, "SELECT count(*) FROM walhook.deliveries WHERE status <> 'delivered'") == "0"; }, 20s));
  std::size_t requests_after = rcv->total() - before;
  CHECK(requests_after == 1000 - fast - slow_done);  // exactly the undelivered ones, no redelivery
  CHECK(rcv->total() == 1000);
  CHECK(second.stop() == 0);
}

TEST_CASE("SIGTERM in the middle of a large transaction: it is read to its Commit, and the restart sends nothing twice") {
  const std::string slot = "shutdown_mid_txn";
  test::scenario s(slot);
  auto& db = s.db;
  auto& rcv = s.rcv;
  rcv->keep_bodies(false);
  relay::receiver_behaviour slow;
  slow.delay = 5ms;  // the endpoints keep up, slower than walhook reads: reading waits (back-pressure)
  std::vector<std::string> paths;
  for (int i = 0; i < 8; ++i) {
    paths.push_back(fmt::format("/e{}", i));
    rcv->set_behaviour(paths.back(), slow);
    test::add_endpoint(db, "big", rcv->url(paths.back()), delivery::generate_secret());
  }
  auto first = s.start_walhook({}, "first");
  REQUIRE(test::eventually([&] { return slot_active(db, slot); }, 20s));
  constexpr int rows = 4000;
  db.exec(fmt::format("INSERT INTO walhook.outbox (tenant_id, event_type, payload) "
                      "SELECT 'big', 'bulk.row', jsonb_build_object('n', g) FROM generate_series(1, {}) g", rows));
  // The stop arrives while the transaction is being read (its first deliveries are arriving).
  REQUIRE(test::eventually([&] { return rcv->total() > 0; }, 20s, 1ms));
  CHECK(first.stop(60s) == 0);
  REQUIRE(first.count_in_log("shutdown.finishing_transaction") == 1);  // the fault was provoked
  auto delivered_before = rcv->total();
  auto pending = std::stol(test::query_value(db, "SELECT count(*) FROM walhook.deliveries WHERE status = 'pending'"));
  MESSAGE(fmt::format("at SIGTERM: {} of {} delivered, {} persisted pending", delivered_before, rows * 8, pending));

  auto second = s.start_walhook({}, "second");
  auto all_there = [&] {
    for (const auto& p : paths)
      if (ids_received(rcv, p).size() < static_cast<std::size_t>(rows)) return false;
    return true;
  };
  REQUIRE(test::eventually(all_there, 120s, 100ms));
  CHECK(test::eventually([&] { return test::query_value(db, "SELECT count(*) FROM walhook.deliveries WHERE status <> 'delivered'") == "0"; }, 30s));
  const auto duplicates = rcv->total() - static_cast<std::size_t>(rows) * paths.size();
  MESSAGE(fmt::format("duplicates after the restart: {}", duplicates));
  CHECK(duplicates == 0);
  CHECK(second.stop() == 0);
}

TEST_CASE("bad input never stops the stream: each becomes a clear outcome and the slot moves on") {
  const std::string slot = "badinput";
  test::scenario s(slot);
  auto& db = s.db;
  auto& rcv = s.rcv;
  long long bad_url = test::add_endpoint(db, "t", "http://", delivery::generate_secret());
  long long bad_secret = test::add_endpoint(db, "t", rcv->url("/badsecret"), "not-a-secret");
  test::add_endpoint(db, "t", rcv->url("/good"), delivery::generate_secret());

  auto walhook = s.start_walhook({"--max-payload-bytes", "2000"});
  REQUIRE(test::eventually([&] { return slot_active(db, slot); }, 20s));

  pg::params big{"t", "too.big", fmt::format(R"({{"blob": "{}"}})", std::string(5000, 'x'))};
  std::string big_id = test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", big);
  pg::params lonely{"nobody", "x", "{}"};
  test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", lonely);  // a tenant with no endpoints
  pg::params fine{"t", "fine", R"({"ok": true})"};
  std::string fine_id = test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", fine);
  std::string end_lsn = test::query_value(db, "SELECT pg_current_wal_lsn()");

  // The good endpoint gets the normal event (and not the oversized one).
  REQUIRE(test::eventually([&] { return ids_received(rcv, "/good").contains(fine_id); }, 20s));
  CHECK_FALSE(ids_received(rcv, "/good").contains(big_id));
  // Each bad case is a dead delivery with a readable reason.
  auto reason = [&](long long endpoint, const std::string& event) {
    pg::params p{std::to_string(endpoint), event};
    return test::query_value(db, "SELECT status || ': ' || coalesce(last_error, '') FROM walhook.deliveries WHERE endpoint_id = $1 AND event_id = $2::uuid", p);
  };
  CHECK(test::eventually([&] { return reason(bad_url, fine_id).starts_with("dead: invalid endpoint URL"); }, 20s));
  CHECK(reason(bad_secret, fine_id).starts_with("dead: invalid endpoint secret"));
  pg::params good_big{big_id};
  CHECK(test::query_value(db, "SELECT last_error FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                              "WHERE e.url LIKE '%/good' AND d.event_id = $1::uuid", good_big)
            .find("exceeds the limit") != std::string::npos);
  pg::params p{end_lsn};
  CHECK(test::eventually([&] { return test::query_value(db, "SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'badinput'", p) == "t"; }, 20s));
  CHECK(walhook.count_in_log("\"replication.stream_ended\"") == 0);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("when delivery state cannot be written, the slot is not acknowledged past it; writes resume later") {
  const std::string slot = "readonly";
  test::scenario s(slot);
  const std::string& url = s.url;
  auto& db = s.db;
  auto& rcv = s.rcv;
  long long ep = test::add_endpoint(db, "t", rcv->url("/p"), delivery::generate_secret());
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return slot_active(db, slot); }, 20s));
  // A delivered snapshot is recorded (what a paused endpoint's outbox cursor starts from).
  test::query_value(db, "SELECT walhook.publish('warmup', 'x', '{}')");
  REQUIRE(test::eventually([&] { return test::query_value(db, "SELECT count(*) FROM walhook.slot_progress WHERE delivered_snapshot IS NOT NULL") == "1"; }, 20s));
  std::string out;
  REQUIRE(test::run_walhook({"endpoint", "pause", std::to_string(ep), "--database-url", url}, out) == 0);
  REQUIRE(test::eventually([&] { return walhook.log().find("\"status\":\"paused\"") != std::string::npos; }, 20s));

  // The database turns read-only for walhook's writer (a new session picks it up).
  db.exec("ALTER DATABASE readonly SET default_transaction_read_only = on");
  db.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'walhook-state%' AND datname = 'readonly'");
  std::vector<std::string> events;
  for (int i = 0; i < 5; ++i) {
    pg::params p{"t", "x", "{}"};
    events.push_back(test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", p));
  }
  std::string after = test::query_value(db, "SELECT pg_current_wal_lsn()");
  REQUIRE(test::eventually([&] { return walhook.count_in_log("state_store.batch_failed") >= 2; }, 20s));
  pg::params lsn{after};
  auto acknowledged = [&] {
    return test::query_value(db, "SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'readonly'", lsn) == "t";
  };
  CHECK_FALSE(acknowledged());  // held: the paused endpoint's outbox cursor is not durable yet
  CHECK(test::query_value(db, "SELECT count(*) FROM walhook.endpoint_cursors") == "0");

  db.exec("ALTER DATABASE readonly RESET default_transaction_read_only");
  // walhook reconnects its writer after a failure, so it sees the change by itself: the cursor
  // that owes the 5 events is written (no row each), then the slot moves past them.
  CHECK(test::eventually([&] { return test::query_value(db, "SELECT count(*) FROM walhook.endpoint_cursors") == "1"; }, 30s));
  CHECK(test::query_value(db, "SELECT count(*) FROM walhook.deliveries") == "0");
  CHECK(test::eventually(acknowledged, 20s));
  // Resumed, the endpoint gets the 5 events read back from the outbox.
  REQUIRE(test::run_walhook({"endpoint", "resume", std::to_string(ep), "--database-url", url}, out) == 0);
  CHECK(test::eventually([&] { return rcv->count("/p") == 5; }, 20s));
  CHECK(walhook.stop() == 0);
}
