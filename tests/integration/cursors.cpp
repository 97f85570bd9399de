// The outbox as a log (issue 18): an endpoint that cannot take its events as they stream follows
// walhook.outbox by cursor instead of costing a walhook.deliveries row per event, gets each event
// once when it is back, and rejoins the stream; a crash and a server restart in the middle of the
// drain lose nothing; transactions that commit out of seq order are not skipped.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <set>
#include <thread>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

/// The breaker opens after 3 failures and probes again after 1 s: an outage ends quickly.
std::vector<std::string> quick_breaker() { return {"--breaker-threshold", "3", "--breaker-pause-s", "1"}; }

/// Answers `status` on `path` from now on.
void answer(test::receiver_thread& rcv, const std::string& path, unsigned status) {
  relay::receiver_behaviour b;
  b.status = status;
  rcv->set_behaviour(path, b);
}

/// Webhook ids received on `path` with 200, and how many times each.
std::map<std::string, int> received_ids(test::scenario& s, const std::string& path) {
  std::map<std::string, int> out;
  for (const auto& r : s.received(path)) ++out[r.webhook_id];
  return out;
}

/// A count, on a connection of its own (the scenario's does not survive a server restart).
long count(test::scenario& s, const std::string& sql, const pg::params& p = {}) {
  relay::blocking_db db(s.url, "count");
  return std::stol(test::query_value(db, sql, p));
}

/// Every event of `owed` reached `path` with a 2xx within `timeout` (the log tail is printed if not).
bool all_received(test::scenario& s, test::walhook_process& w, const std::string& path, const std::set<std::string>& owed,
                  std::chrono::milliseconds timeout) {
  const bool all = test::eventually([&] {
    auto got = received_ids(s, path);
    return std::all_of(owed.begin(), owed.end(), [&](const auto& e) { return got.contains(e); });
  }, timeout, 20ms);
  if (!all) MESSAGE(w.log_tail());
  return all;
}

/// walhook streams and has recorded a delivered snapshot (a cursor's first lower bound).
void wait_ready(test::scenario& s, test::walhook_process& w) {
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s, 20ms));
  s.publish("warmup", "x");
  bool ready = test::eventually(
      [&] { return s.value("SELECT count(*) FROM walhook.slot_progress WHERE delivered_snapshot IS NOT NULL") == "1"; },
      30s, 50ms);
  if (!ready) MESSAGE(w.log_tail());
  REQUIRE(ready);
}

}  // namespace

TEST_CASE("an endpoint down for N events costs a handful of rows, then gets each event once and rejoins the stream") {
  test::scenario s("cursor_down");
  answer(s.rcv, "/down", 503);
  auto down = test::add_endpoint(s.db, "t-down", s.rcv->url("/down"), delivery::generate_secret());
  test::add_endpoint(s.db, "t-ok", s.rcv->url("/ok"), delivery::generate_secret());
  auto walhook = s.start_walhook(quick_breaker());
  wait_ready(s, walhook);
  const pg::params id{std::to_string(down)};

  constexpr long n = 2000;
  test::publisher pub({.url = s.url, .tenants = {"t-down", "t-ok"}, .types = {"x"}, .rate_per_second = 1000, .total = n});
  pub.start();
  REQUIRE(pub.join(60s));
  std::set<std::string> owed, other;
  for (const auto& e : pub.events()) (e.tenant == "t-down" ? owed : other).insert(e.id);
  // The healthy tenant is not held back by the other's outage.
  REQUIRE(test::eventually([&] { return received_ids(s, "/ok").size() >= other.size(); }, 30s, 20ms));
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1", id) == 1; },
                           10s, 20ms));
  std::this_thread::sleep_for(1500ms);  // a probe or two fail meanwhile
  const long rows = count(s, "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", id);
  MESSAGE(fmt::format("{} events to an endpoint that answers 503: {} rows in walhook.deliveries", owed.size(), rows));
  CHECK(rows <= 10);
  CHECK(received_ids(s, "/down").empty());

  answer(s.rcv, "/down", 200);
  REQUIRE(all_received(s, walhook, "/down", owed, 60s));
  // Back on the stream: the cursor row is gone, and a new event comes through the stream.
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors") == 0; }, 10s, 20ms));
  auto later = s.publish("t-down", "x");
  REQUIRE(test::eventually([&] { return received_ids(s, "/down").contains(later); }, 10s, 10ms));
  auto got = received_ids(s, "/down");
  std::size_t duplicates = 0;
  for (const auto& [e, times] : got) duplicates += static_cast<std::size_t>(times - 1);
  CHECK(duplicates == 0);
  CHECK(count(s, "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'", id) == 0);
  CHECK(walhook.count_in_log("endpoint.following_stream") == 1);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("kill -9 of walhook and a PostgreSQL restart in the middle of a drain lose nothing") {
  test::scenario s("cursor_crash");
  s.rcv->keep_bodies(false);
  answer(s.rcv, "/down", 503);
  auto down = test::add_endpoint(s.db, "t-down", s.rcv->url("/down"), delivery::generate_secret());
  auto walhook = s.start_walhook(quick_breaker());
  wait_ready(s, walhook);
  constexpr long n = 3000;
  test::publisher pub({.url = s.url, .tenants = {"t-down"}, .types = {"x"}, .rate_per_second = 3000, .total = n});
  pub.start();
  REQUIRE(pub.join(60s));
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors") == 1; }, 10s, 20ms));
  // Back, but slow enough that the drain takes seconds: 4 at a time, 5 ms each.
  relay::receiver_behaviour slow;
  slow.delay = 5ms;
  s.rcv->set_behaviour("/down", slow);
  auto received = [&] { return received_ids(s, "/down").size(); };
  REQUIRE(test::eventually([&] { return received() >= 500; }, 60s, 5ms));
  walhook.kill9();
  const auto at_kill = received();
  walhook = s.start_walhook(quick_breaker());
  REQUIRE(test::eventually([&] { return received() >= at_kill + 800; }, 60s, 5ms));
  REQUIRE(test::cluster().stop("fast"));
  REQUIRE(test::cluster().start());
  std::set<std::string> owed;
  for (const auto& e : pub.events()) owed.insert(e.id);
  REQUIRE(all_received(s, walhook, "/down", owed, 120s));
  std::size_t duplicates = 0;
  for (const auto& [e, times] : received_ids(s, "/down")) duplicates += static_cast<std::size_t>(times - 1);
  const long rows = count(s, "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", {std::to_string(down)});
  MESSAGE(fmt::format("{} events drained across a kill -9 and a server restart: {} duplicates (the crash windows), "
                      "{} rows in walhook.deliveries", n, duplicates, rows));
  CHECK(rows <= 10);
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors") == 0; }, 20s, 20ms));
  CHECK(walhook.stop() == 0);
}

TEST_CASE("transactions that commit out of seq order while an endpoint follows the outbox are not skipped") {
  test::scenario s("cursor_order");
  answer(s.rcv, "/down", 503);
  test::add_endpoint(s.db, "t-down", s.rcv->url("/down"), delivery::generate_secret());
  auto walhook = s.start_walhook(quick_breaker());
  wait_ready(s, walhook);
  relay::blocking_db early(s.url, "early"), late(s.url, "late");
  auto open_publish = [](relay::blocking_db& c) {
    c.exec("BEGIN");
    return std::string(c.exec("SELECT walhook.publish('t-down', 'x', '{}'::jsonb)").value(0, 0));
  };
  // Enough events to open the breaker and enter cursor mode.
  std::set<std::string> owed;
  for (int i = 0; i < 20; ++i) owed.insert(s.publish("t-down", "x"));
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors") == 1; }, 10s, 20ms));
  // A has the lower seq but commits last; the window passes B first.
  auto a = open_publish(early);
  auto b = s.publish("t-down", "x");
  owed.insert(b);
  // C commits while the endpoint is still down, D after it is back and has caught up.
  auto c = open_publish(late);
  late.exec("COMMIT");
  owed.insert(c);
  answer(s.rcv, "/down", 200);
  REQUIRE(test::eventually([&] { return received_ids(s, "/down").contains(b); }, 30s, 10ms));
  std::this_thread::sleep_for(500ms);  // windows pass B (and the rejoin happens) while A is open
  early.exec("COMMIT");
  owed.insert(a);
  auto d = s.publish("t-down", "x");
  owed.insert(d);
  CHECK(all_received(s, walhook, "/down", owed, 30s));
  CHECK(received_ids(s, "/down").contains(a));
  CHECK(walhook.stop() == 0);
}

TEST_CASE("merge keys and per-aggregate order hold across the switch to the outbox and back") {
  test::scenario s("cursor_merge");
  answer(s.rcv, "/m", 503);
  answer(s.rcv, "/agg", 503);
  auto merged = test::add_endpoint(s.db, "t-m", s.rcv->url("/m"), delivery::generate_secret());
  test::add_endpoint(s.db, "t-agg", s.rcv->url("/agg"), delivery::generate_secret(), {}, 4, "aggregate");
  auto walhook = s.start_walhook(quick_breaker());
  wait_ready(s, walhook);
  // 10 events without a key open the breaker, then 30 states of one entity.
  for (int i = 0; i < 10; ++i) s.publish("t-m", "x");
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1",
                                            {std::to_string(merged)}) == 1; }, 10s, 20ms));
  std::vector<std::string> states;
  for (int i = 1; i <= 30; ++i) states.push_back(s.publish("t-m", "x", fmt::format("{{\"v\":{}}}", i), "entity-1"));
  std::vector<std::string> ordered;
  for (int i = 1; i <= 40; ++i) ordered.push_back(s.publish("t-agg", "x", fmt::format("{{\"n\":{}}}", i), std::nullopt, "agg-1"));
  std::this_thread::sleep_for(1s);
  answer(s.rcv, "/m", 200);
  answer(s.rcv, "/agg", 200);
  REQUIRE(test::eventually([&] { return received_ids(s, "/m").contains(states.back()); }, 30s, 10ms));
  REQUIRE(test::eventually([&] { return received_ids(s, "/agg").contains(ordered.back()); }, 30s, 10ms));
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors") == 0; }, 20s, 20ms));
  // Only the newest state of the entity is sent (older ones merged), and none after it.
  auto got = s.received("/m");
  std::size_t states_sent = 0;
  std::string last_state;
  for (const auto& r : got)
    if (std::find(states.begin(), states.end(), r.webhook_id) != states.end()) {
      ++states_sent;
      last_state = r.webhook_id;
    }
  MESSAGE(fmt::format("30 states of one entity while its endpoint followed the outbox: {} sent", states_sent));
  CHECK(last_state == states.back());
  CHECK(states_sent <= 2);
  // The aggregate's events arrive in order, each once.
  std::vector<std::string> arrival;
  for (const auto& r : s.received("/agg"))
    if (std::find(ordered.begin(), ordered.end(), r.webhook_id) != ordered.end()) arrival.push_back(r.webhook_id);
  CHECK(arrival == ordered);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("an operator's pause and resume go through the cursor; a cursor past the give-up age ends its events dead as a range") {
  test::scenario s("cursor_give_up");
  auto paused = test::add_endpoint(s.db, "t-p", s.rcv->url("/p"), delivery::generate_secret());
  auto walhook = s.start_walhook();
  wait_ready(s, walhook);
  const pg::params id{std::to_string(paused)};
  std::string out;
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--database-url", s.url});
    return test::run_walhook(args, out);
  };
  // Paused by an operator: its events are owed by a cursor, no row each; status says so.
  REQUIRE(cli({"endpoint", "pause", std::to_string(paused)}) == 0);
  std::vector<std::string> first;
  for (int i = 0; i < 5; ++i) first.push_back(s.publish("t-p", "x"));
  bool entered = test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1", id) == 1; },
                                  10s, 20ms);
  if (!entered) MESSAGE(walhook.log_tail());
  REQUIRE(entered);
  CHECK(count(s, "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", id) == 0);
  REQUIRE(cli({"status", "--json"}) == 0);
  CHECK(out.find("\"following_outbox_since\":\"20") != std::string::npos);
  REQUIRE(cli({"status"}) == 0);
  CHECK(out.find("paused (outbox)") != std::string::npos);
  // Resumed: each event once, read back from the outbox.
  REQUIRE(cli({"endpoint", "resume", std::to_string(paused)}) == 0);
  REQUIRE(test::eventually([&] { return received_ids(s, "/p").size() == first.size(); }, 20s, 20ms));
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors") == 0; }, 20s, 20ms));

  // Paused again, and left behind for longer than the give-up age (72 h, its position aged by SQL):
  // what it owes ends dead as one range, with a reason and a count — nothing deleted silently.
  REQUIRE(cli({"endpoint", "pause", std::to_string(paused)}) == 0);
  std::vector<std::string> lost;
  for (int i = 0; i < 7; ++i) lost.push_back(s.publish("t-p", "x"));
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1", id) == 1; },
                           10s, 20ms));
  std::this_thread::sleep_for(500ms);
  s.value("UPDATE walhook.endpoint_cursors SET covered_at = now() - interval '73 hours'");
  bool given_up = test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.dead_ranges") == 1; }, 20s, 50ms);
  if (!given_up) MESSAGE(walhook.log_tail());
  REQUIRE(given_up);
  CHECK(s.value("SELECT events FROM walhook.dead_ranges") == "7");
  CHECK(s.value("SELECT endpoint_id = $1::bigint AND reason LIKE 'given up:%72 h%' FROM walhook.dead_ranges", id) == "t");
  CHECK(walhook.count_in_log("cursor.given_up") == 1);
  // Resumed: the given-up events are not sent; a new one is.
  REQUIRE(cli({"endpoint", "resume", std::to_string(paused)}) == 0);
  auto fresh = s.publish("t-p", "x");
  REQUIRE(test::eventually([&] { return received_ids(s, "/p").contains(fresh); }, 20s, 20ms));
  auto got = received_ids(s, "/p");
  for (const auto& e : lost) CHECK_FALSE(got.contains(e));
  CHECK(walhook.stop() == 0);
}
