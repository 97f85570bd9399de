// Slot loss (issue 10): a slot dropped while walhook is stopped, dropped while it streams under
// load, or invalidated by max_slot_wal_keep_size is an incident walhook recovers from by itself —
// a new slot, and a backfill from the outbox of everything the lost slot held — so every
// committed event is delivered. And `walhook recover --since` for what walhook cannot see.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

struct setup : test::scenario {
  using scenario::scenario;
  std::string endpoint_path = "/in";

  void add_endpoint() { test::add_endpoint(db, "t", rcv->url(endpoint_path), delivery::generate_secret()); }
  std::string publish() { return value("SELECT walhook.publish('t', 'order.created', '{\"n\": 1}'::jsonb)"); }
  std::vector<std::string> publish(int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) ids.push_back(publish());
    return ids;
  }
  std::unique_ptr<test::walhook_process> start(std::vector<std::string> extra = {}) {
    auto w = std::make_unique<test::walhook_process>(start_walhook(std::move(extra)));
    // Its own log, not the slot's state: the walsender of the walhook before may still be active.
    REQUIRE(test::eventually([&] { return w->count_in_log("\"replication.streaming\"") >= 1; }, 30s));
    return w;
  }
  /// Event ids received (any status 2xx) and how many arrived more than once.
  std::map<std::string, int> received_ids() {
    std::map<std::string, int> n;
    for (const auto& r : received(endpoint_path)) ++n[r.webhook_id];
    return n;
  }
  bool all_received(const std::vector<std::string>& ids) {
    auto got = received_ids();
    for (const auto& id : ids)
      if (!got.contains(id)) return false;
    return true;
  }
  long duplicates() {
    long d = 0;
    for (const auto& [id, n] : received_ids()) d += n - 1;
    return d;
  }
  std::string recovery(const std::string& column) { return value("SELECT " + column + " FROM walhook.recoveries ORDER BY id DESC LIMIT 1"); }
  /// Drops the slot, ending the walsender that streams it first (it may restart at once: retried).
  void drop_slot() {
    pg::params p{slot};
    for (int i = 0; i < 200; ++i) {
      try {
        db.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", p);
        db.exec("SELECT pg_drop_replication_slot($1)", p);
        return;
      } catch (const relay::cli_error&) {
        ::usleep(10 * 1000);  // walhook took the slot again in between
      }
    }
    FAIL("could not drop the slot");
  }
};

}  // namespace

TEST_CASE("a slot dropped while walhook is stopped: an incident, a new slot, and every event delivered") {
  setup s("loss_stopped");
  s.add_endpoint();
  auto walhook = s.start();
  auto before = s.publish(20);
  REQUIRE(test::eventually([&] { return s.all_received(before); }, 30s));
  // Give walhook time to record a delivered snapshot past these events.
  ::usleep(1500 * 1000);
  REQUIRE(walhook->stop() == 0);

  auto while_stopped = s.publish(15);  // in the old slot only
  s.drop_slot();
  auto after_drop = s.publish(10);     // in no slot at all: only the outbox has them
  // migrate does not create it: that would hide the incident (and lose these events).
  std::string out;
  REQUIRE(test::run_walhook({"migrate", "--database-url", s.url, "--slot", s.slot}, out) == 0);
  CHECK(out.find("is missing, but walhook streamed it here before") != std::string::npos);
  CHECK(s.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", pg::params{s.slot}) == "0");
  walhook = s.start();
  auto all = while_stopped;
  all.insert(all.end(), after_drop.begin(), after_drop.end());
  CHECK(test::eventually([&] { return s.all_received(all); }, 30s));
  CHECK(walhook->count_in_log("\"replication.slot_lost\"") == 1);
  CHECK(walhook->count_in_log("\"reason\":\"slot missing\"") >= 1);
  CHECK(test::eventually([&] { return s.recovery("state") == "done"; }, 20s));
  const long backfilled = std::stol(s.recovery("events"));
  MESSAGE(fmt::format("slot dropped while stopped: {} events committed meanwhile, {} backfilled, {} duplicates at the "
                      "receiver", all.size(), backfilled, s.duplicates()));
  CHECK(backfilled >= static_cast<long>(all.size()));
  CHECK(backfilled <= static_cast<long>(all.size()) + 20);  // at most the events before the stop again

  // Events after the recovery flow through the new slot.
  auto later = s.publish(5);
  CHECK(test::eventually([&] { return s.all_received(later); }, 20s));
  CHECK(walhook->stop() == 0);

  // A clean restart is not an incident: the new slot is there.
  walhook = s.start();
  CHECK(walhook->count_in_log("\"replication.slot_lost\"") == 0);
  CHECK(walhook->stop() == 0);
}

TEST_CASE("the walsender terminated and the slot dropped while streaming under load: nothing lost") {
  setup s("loss_streaming");
  s.add_endpoint();
  auto walhook = s.start();
  test::publisher pub({.url = s.url, .tenants = {"t"}, .types = {"order.created"}, .rate_per_second = 300, .total = 1500});
  pub.start();
  REQUIRE(test::eventually([&] { return pub.committed() >= 500; }, 30s));
  s.drop_slot();
  REQUIRE(pub.join(60s));
  std::vector<std::string> ids;
  for (const auto& e : pub.events()) ids.push_back(e.id);
  CHECK(test::eventually([&] { return s.all_received(ids); }, 60s));
  CHECK(walhook->count_in_log("\"replication.slot_lost\"") == 1);
  CHECK(test::eventually([&] { return s.recovery("state") == "done"; }, 20s));
  MESSAGE(fmt::format("slot dropped while streaming at 300 events/s: {} events, {} backfilled, {} duplicates",
                      ids.size(), s.recovery("events"), s.duplicates()));
  CHECK(walhook->stop() == 0);
}

TEST_CASE("a slot invalidated by max_slot_wal_keep_size recovers without an operator") {
  setup s("loss_invalidated");
  s.add_endpoint();
  auto walhook = s.start();
  auto before = s.publish(5);
  REQUIRE(test::eventually([&] { return s.all_received(before); }, 30s));
  ::usleep(1500 * 1000);
  REQUIRE(walhook->stop() == 0);

  auto while_stopped = s.publish(12);
  s.db.exec("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'");
  s.db.exec("ALTER SYSTEM SET max_wal_size = '32MB'");
  s.db.exec("SELECT pg_reload_conf()");
  s.db.exec("CREATE TABLE public.pad AS SELECT g, repeat(md5(g::text), 32) AS p FROM generate_series(1, 70000) g");
  s.db.exec("CHECKPOINT");
  pg::params p{s.slot};
  CHECK(test::eventually([&] {
    s.db.exec("CHECKPOINT");
    return s.value("SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", p) == "lost";
  }, 20s));
  s.db.exec("ALTER SYSTEM RESET max_slot_wal_keep_size");
  s.db.exec("ALTER SYSTEM RESET max_wal_size");
  s.db.exec("SELECT pg_reload_conf()");
  s.db.exec("DROP TABLE public.pad");

  walhook = s.start();
  CHECK(test::eventually([&] { return s.all_received(while_stopped); }, 30s));
  CHECK(walhook->count_in_log("\"reason\":\"slot invalidated\"") >= 1);
  CHECK(s.value("SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", p) != "lost");
  auto later = s.publish(3);
  CHECK(test::eventually([&] { return s.all_received(later); }, 20s));
  CHECK(walhook->stop() == 0);
}

TEST_CASE("kill -9 in the middle of a backfill: it runs again, nothing lost") {
  setup s("loss_crash");
  s.endpoint_path = "/slow";
  relay::receiver_behaviour slow;
  slow.delay = 20ms;
  s.rcv->set_behaviour("/slow", slow);
  s.add_endpoint();
  auto walhook = s.start();
  ::usleep(1500 * 1000);  // a delivered snapshot is recorded
  REQUIRE(walhook->stop() == 0);
  auto ids = s.publish(400);  // ~2 s to deliver at 4 × 20 ms
  s.drop_slot();
  walhook = s.start();
  REQUIRE(test::eventually([&] { return s.received_ids().size() >= 50; }, 30s));
  walhook->kill9();
  CHECK(s.recovery("state") == "pending");
  walhook = s.start();
  CHECK(test::eventually([&] { return s.all_received(ids); }, 60s));
  CHECK(test::eventually([&] { return s.recovery("state") == "done"; }, 20s));
  CHECK(s.value("SELECT count(*) FROM walhook.recoveries") == "1");  // the same incident, run again
  MESSAGE(fmt::format("kill -9 during a 400-event backfill: {} duplicates", s.duplicates()));
  CHECK(walhook->stop() == 0);
}

TEST_CASE("walhook recover --since delivers a time range again through the running walhook") {
  setup s("recover_cli");
  s.add_endpoint();
  auto walhook = s.start();
  const std::string since = s.value("SELECT now()::text");
  auto ids = s.publish(6);
  REQUIRE(test::eventually([&] { return s.all_received(ids); }, 30s));
  s.value("SELECT walhook.publish('other', 'order.created', '{}'::jsonb)");  // another tenant: not asked for
  std::string out;
  REQUIRE(test::run_walhook({"recover", "--database-url", s.url, "--slot", s.slot, "--since", since, "--tenant", "t",
                             "--wait", "--wait-timeout", "60"},
                            out) == 0);
  CHECK(out.find("6 events to deliver again") != std::string::npos);
  CHECK(out.find("done: 6 events, 6 deliveries") != std::string::npos);
  auto got = s.received_ids();
  for (const auto& id : ids) CHECK(got[id] == 2);  // the same webhook-id, a second time
  CHECK(test::run_walhook({"recover", "--database-url", s.url}, out) != 0);
  CHECK(out.find("--since") != std::string::npos);
  CHECK(walhook->stop() == 0);
}

TEST_CASE("merge keys and aggregate order across a slot loss: the newest state wins, the order holds") {
  setup s("loss_merge");
  s.endpoint_path = "/m";
  const auto id = test::add_endpoint(s.db, "t", s.rcv->url("/m"), delivery::generate_secret(), {}, 4, "aggregate");
  auto walhook = s.start();
  std::string out;
  REQUIRE(test::run_walhook({"endpoint", "pause", "--database-url", s.url, std::to_string(id)}, out) == 0);
  auto publish = [&](const std::string& v) {
    return s.value("SELECT walhook.publish('t', 'state', jsonb_build_object('v', $1::text), merge_key => 'k1', "
                   "aggregate_id => 'A')", pg::params{v});
  };
  publish("1");  // owed by the paused endpoint's outbox cursor (issue 18)
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoint_cursors") == "1"; }, 20s));
  ::usleep(1500 * 1000);
  REQUIRE(walhook->stop() == 0);
  const auto v2 = publish("2");  // in the outbox only, once the slot is gone
  s.drop_slot();
  walhook = s.start();
  REQUIRE(test::eventually([&] { return s.recovery("state") == "done"; }, 20s));
  REQUIRE(test::run_walhook({"endpoint", "resume", "--database-url", s.url, std::to_string(id)}, out) == 0);
  CHECK(test::eventually([&] { return s.received_ids().contains(v2); }, 20s));
  ::usleep(500 * 1000);
  auto got = s.received_ids();
  CHECK(got.size() == 1);  // v1 was merged into v2: the entity's newest state, once
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries") == "0");  // the backfill left v2 to the cursor
  CHECK(walhook->stop() == 0);
}
