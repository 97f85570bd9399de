// Delivery rules end to end (issue 4): 410 disables the endpoint, merge of state updates while
// the endpoint is down, circuit-breaker pause and probes, replay keeps the webhook-id,
// per-aggregate ordering, auto-disable, and `walhook status`. Durations are shortened through
// walhook's flags, never by sleeping through real hours.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

struct setup : test::scenario {
  using scenario::scenario;
  int walhook_cli(const std::vector<std::string>& args) {
    std::string out;
    std::vector<std::string> a = args;
    a.push_back("--database-url");
    a.push_back(url);
    int rc = test::run_walhook(a, out);
    last_output = out;
    return rc;
  }
  std::string last_output;
};

}  // namespace

TEST_CASE("410 Gone disables the endpoint and the delivery is dead") {
  setup s("rule_gone");
  relay::receiver_behaviour gone;
  gone.status = 410;
  s.rcv->set_behaviour("/gone", gone);
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/gone"), delivery::generate_secret());
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::string first = s.publish("t", "x", "{}");
  pg::params id{std::to_string(ep)};
  REQUIRE(test::eventually([&] { return s.value("SELECT status FROM walhook.endpoints WHERE id = $1", id) == "disabled"; }, 20s));
  CHECK(s.value("SELECT disabled_reason FROM walhook.endpoint_health WHERE endpoint_id = $1", id) == "HTTP 410 Gone");
  pg::params ev{first};
  CHECK(test::eventually([&] { return s.value("SELECT status || ' ' || last_status FROM walhook.deliveries WHERE event_id = $1::uuid", ev) == "dead 410"; }, 20s));
  // Later events are owed by the disabled endpoint's outbox cursor (no row each); nothing more is sent to it.
  std::string later = s.publish("t", "x", "{}");
  pg::params ev2{later};
  CHECK(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1", id) == "1"; }, 20s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE event_id = $1::uuid", ev2) == "0");
  CHECK(s.rcv->count("/gone") == 1);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("merge: endpoint down, 50 updates of one entity and 3 facts → the latest update once and the 3 facts") {
  setup s("rule_merge");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/crm", down);
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/crm"), delivery::generate_secret(), {}, 1);
  // One failure opens the breaker for an hour: the endpoint is down until an operator resumes it.
  // Rows, not a cursor (--behind rows): this is the table's merge (it_cursors has the cursor's).
  auto walhook = s.start_walhook({"--breaker-threshold", "1", "--breaker-pause-s", "3600", "--behind", "rows"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  std::vector<std::string> updates, facts;
  for (int i = 1; i <= 50; ++i) {
    updates.push_back(s.publish("t", "customer.updated", fmt::format(R"({{"customer": 7, "version": {}}})", i), "customer:7"));
    if (i == 10 || i == 20 || i == 30) facts.push_back(s.publish("t", "customer.note_added", fmt::format(R"({{"note": {}}})", i)));
  }
  pg::params id{std::to_string(ep)};
  // Persisted: one pending delivery for the entity (merged 49 times over) plus the 3 facts.
  auto pending = [&] { return s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'", id); };
  REQUIRE(test::eventually([&] { return pending() == "4"; }, 20s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND merge_key = 'customer:7'", id) == "1");
  // The last merge lands once its batch commits.
  pg::params latest{updates.back()};
  CHECK(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.deliveries WHERE event_id = $1::uuid AND status = 'pending'", latest) == "1"; }, 20s));
  CHECK(pending() == "4");
  CHECK(s.rcv->count("/crm") == 1);  // just the attempt that opened the breaker

  relay::receiver_behaviour up;
  s.rcv->set_behaviour("/crm", up);
  REQUIRE(s.walhook_cli({"endpoint", "resume", std::to_string(ep)}) == 0);
  // It answers with every pending delivery, all due now (not only those that had to wait).
  CHECK(s.last_output.starts_with(fmt::format("endpoint {}: resumed; 4 deliveries due now\n", ep)));
  REQUIRE(test::eventually([&] { return s.received("/crm").size() >= 4; }, 20s));
  CHECK(test::eventually([&] { return pending() == "0"; }, 20s));
  auto got = s.received("/crm");
  std::multiset<std::string> ids;
  for (auto& r : got) ids.insert(r.webhook_id);
  CHECK(got.size() == 4);
  CHECK(ids.count(updates.back()) == 1);  // the latest update, once
  for (auto& f : facts) CHECK(ids.count(f) == 1);
  for (std::size_t i = 0; i + 1 < updates.size(); ++i) CHECK(ids.count(updates[i]) == 0);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("circuit breaker: pause after consecutive failures, probes after the pause, a success closes it") {
  setup s("rule_breaker");
  relay::receiver_behaviour down;
  down.status = 500;
  s.rcv->set_behaviour("/b", down);
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/b"), delivery::generate_secret(), {}, 2);
  auto walhook = s.start_walhook(
      {"--breaker-threshold", "5", "--breaker-pause-s", "2", "--backoff-base-ms", "50", "--backoff-max-ms", "100"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  for (int i = 0; i < 10; ++i) s.publish("t", "x", fmt::format(R"({{"i": {}}})", i));

  pg::params id{std::to_string(ep)};
  REQUIRE(test::eventually([&] { return walhook.count_in_log("endpoint.paused") >= 1; }, 20s));
  CHECK(test::eventually([&] { return s.value("SELECT paused_until IS NOT NULL AND consecutive_failures >= 5 FROM walhook.endpoint_health WHERE endpoint_id = $1", id) == "t"; }, 10s));
  std::size_t at_pause = s.rcv->count("/b");
  CHECK(at_pause >= 5);
  CHECK(at_pause <= 5 + 2);  // the round in flight when it opened, at most max_concurrency more
  // First pause (2 s): nothing is sent; then a probe round of at most max_concurrency fails and
  // pauses it again, 1 step longer (4 s).
  REQUIRE(test::eventually([&] { return walhook.count_in_log("endpoint.paused") >= 2; }, 20s));
  std::size_t after_probe = s.rcv->count("/b");
  CHECK(after_probe > at_pause);
  CHECK(after_probe - at_pause <= 2 + 2);
  CHECK(test::eventually([&] { return s.value("SELECT probe_rounds FROM walhook.endpoint_health WHERE endpoint_id = $1", id) == "1"; }, 10s));
  CHECK(s.value("SELECT round(extract(epoch FROM paused_until - last_failure_at)) FROM walhook.endpoint_health WHERE endpoint_id = $1", id) == "4");

  // The endpoint recovers: the next probe succeeds, the breaker closes, the backlog drains.
  relay::receiver_behaviour up;
  s.rcv->set_behaviour("/b", up);
  REQUIRE(test::eventually([&] { return s.received("/b").size() >= 10; }, 30s));
  CHECK(test::eventually([&] { return s.value("SELECT consecutive_failures || ' ' || (paused_until IS NULL) FROM walhook.endpoint_health WHERE endpoint_id = $1", id) == "0 true"; }, 20s));
  CHECK(walhook.count_in_log("endpoint.recovered") >= 1);
  CHECK(s.rcv->max_concurrent("/b") <= 2);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("413 is dead at once; replay sends it again with the original webhook-id") {
  setup s("rule_replay");
  relay::receiver_behaviour too_large;
  too_large.status = 413;
  s.rcv->set_behaviour("/r", too_large);
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/r"), delivery::generate_secret());
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::string event = s.publish("t", "x", R"({"big": true})");
  pg::params ev{event};
  REQUIRE(test::eventually([&] { return s.value("SELECT status FROM walhook.deliveries WHERE event_id = $1::uuid", ev) == "dead"; }, 20s));
  CHECK(s.value("SELECT attempts || ' ' || last_status || ' ' || last_error FROM walhook.deliveries WHERE event_id = $1::uuid", ev) ==
        "1 413 HTTP 413 Payload Too Large");
  CHECK(s.rcv->count("/r") == 1);

  relay::receiver_behaviour ok;
  s.rcv->set_behaviour("/r", ok);
  std::string delivery = s.value("SELECT id FROM walhook.deliveries WHERE event_id = $1::uuid", ev);
  REQUIRE(s.walhook_cli({"replay", "--delivery", delivery}) == 0);
  CHECK(s.last_output.find("replayed 1 delivery\n") != std::string::npos);
  REQUIRE(test::eventually([&] { return s.received("/r").size() == 1; }, 20s));
  auto r = s.received("/r").front();
  CHECK(r.webhook_id == event);
  CHECK(test::eventually([&] { return s.value("SELECT status || ' ' || attempts FROM walhook.deliveries WHERE event_id = $1::uuid", ev) == "delivered 1"; }, 20s));
  (void)ep;
  CHECK(walhook.stop() == 0);
}

TEST_CASE("ordering = 'aggregate': one in flight per aggregate; a failing event blocks only its aggregate") {
  setup s("rule_order");
  relay::receiver_behaviour b;
  b.fail_marker = "\"fail-me\"";
  b.fail_times = 2;
  s.rcv->set_behaviour("/o", b);
  test::add_endpoint(s.db, "t", s.rcv->url("/o"), delivery::generate_secret(), {}, 4, "aggregate");
  auto walhook = s.start_walhook({"--backoff-base-ms", "600"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  std::vector<std::string> a, bb;
  a.push_back(s.publish("t", "x", R"({"agg": "A", "n": 1, "tag": "fail-me"})", std::nullopt, "A"));
  for (int n = 2; n <= 5; ++n) a.push_back(s.publish("t", "x", fmt::format(R"({{"agg": "A", "n": {}}})", n), std::nullopt, "A"));
  for (int n = 1; n <= 5; ++n) bb.push_back(s.publish("t", "x", fmt::format(R"({{"agg": "B", "n": {}}})", n), std::nullopt, "B"));

  REQUIRE(test::eventually([&] { return s.received("/o").size() >= 10; }, 30s));
  // A's events succeeded in commit order; B's did not wait for A's failing event.
  std::vector<std::string> a_order;
  std::int64_t a1_ok = 0, b_last = 0;
  for (auto& r : s.received("/o")) {
    if (std::find(a.begin(), a.end(), r.webhook_id) != a.end()) a_order.push_back(r.webhook_id);
    if (r.webhook_id == a.front()) a1_ok = r.received_at_us;
    if (std::find(bb.begin(), bb.end(), r.webhook_id) != bb.end()) b_last = std::max(b_last, r.received_at_us);
  }
  CHECK(a_order == a);
  CHECK(b_last < a1_ok);
  CHECK(s.rcv->count("/o") == 12);  // 10 events + 2 failed attempts of A's first
  CHECK(walhook.stop() == 0);
}

TEST_CASE("auto-disable after failing continuously; pending deliveries are kept; status shows the pain") {
  setup s("rule_disable");
  relay::receiver_behaviour down;
  down.status = 502;
  s.rcv->set_behaviour("/down", down);
  long long bad = test::add_endpoint(s.db, "t", s.rcv->url("/down"), delivery::generate_secret());
  long long good = test::add_endpoint(s.db, "t", s.rcv->url("/up"), delivery::generate_secret());
  // Rows, not a cursor (--behind rows): the status of a row backlog (it_cursors has a cursor's).
  auto walhook = s.start_walhook({"--disable-after-s", "2", "--backoff-base-ms", "100", "--backoff-max-ms", "300",
                                  "--breaker-threshold", "1000", "--behind", "rows"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  for (int i = 0; i < 5; ++i) s.publish("t", "x", "{}");
  pg::params id{std::to_string(bad)};
  REQUIRE(test::eventually([&] { return s.value("SELECT status FROM walhook.endpoints WHERE id = $1", id) == "disabled"; }, 30s));
  CHECK(s.value("SELECT disabled_reason FROM walhook.endpoint_health WHERE endpoint_id = $1", id).starts_with("failing continuously"));
  CHECK(walhook.count_in_log("endpoint.disabled") == 1);
  // Its deliveries wait, pending, for a replay or an enable.
  CHECK(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'", id) == "5"; }, 20s));
  CHECK(s.received("/up").size() == 5);

  REQUIRE(s.walhook_cli({"status", "--json"}) == 0);
  std::vector<std::pair<long long, long long>> rows;  // (endpoint, pending) in printed order
  simdjson::dom::parser parser;
  std::istringstream lines(s.last_output);
  std::string line;
  while (std::getline(lines, line)) {
    simdjson::dom::element doc;
    REQUIRE(parser.parse(line).get(doc) == simdjson::SUCCESS);
    rows.emplace_back(int64_t(doc["endpoint_id"]), int64_t(doc["pending"]));
    if (int64_t(doc["endpoint_id"]) == bad) {
      CHECK(std::string_view(doc["status"]) == "disabled");
      CHECK(int64_t(doc["oldest_pending_age_s"]) >= 0);
      CHECK(std::string_view(doc["last_error"]).find("HTTP 502") != std::string_view::npos);
    }
  }
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == std::pair<long long, long long>{bad, 5});  // the customer in pain comes first
  CHECK(rows[1] == std::pair<long long, long long>{good, 0});

  // Enabling it sends the kept deliveries.
  relay::receiver_behaviour up;
  s.rcv->set_behaviour("/down", up);
  REQUIRE(s.walhook_cli({"endpoint", "enable", std::to_string(bad)}) == 0);
  CHECK(test::eventually([&] { return s.received("/down").size() == 5; }, 20s));
  CHECK(walhook.stop() == 0);
}

TEST_CASE("retention: outbox rows and finished deliveries older than the retention period are deleted in batches") {
  setup s("rule_retention");
  test::add_endpoint(s.db, "t", s.rcv->url("/a"), delivery::generate_secret());
  // 12,000 events walhook stored 31 days ago (3 batches of 5,000), 10 recent ones, 5 the
  // application dated 31 days back (a backfill: walhook stored them just now, so they are
  // recent), and deliveries of each, finished when their event was stored.
  s.db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload, stored_at) "
            "SELECT 'old', 'x', '{}', now() - interval '31 days' FROM generate_series(1, 12000)");
  s.db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 'old', 'x', '{}' FROM generate_series(1, 10)");
  s.db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload, created_at) "
            "SELECT 'old', 'x', '{}', now() - interval '31 days' FROM generate_series(1, 5)");
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, event_created_at, updated_at) "
            "SELECT 1, id, CASE WHEN seq % 2 = 0 THEN 'delivered' ELSE 'dead' END, created_at, stored_at FROM walhook.outbox");
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, next_attempt_at, event_created_at) "
            "VALUES (1, gen_random_uuid(), 'pending', now() + interval '1 day', now() - interval '40 days')");
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.outbox") == "15"; }, 30s));
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE created_at < now() - interval '30 days'") == "5");
  CHECK(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.deliveries") == "16"; }, 30s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'pending'") == "1");  // unfinished work is kept
  CHECK(test::eventually([&] { return walhook.count_in_log("\"retention.deleted\"") >= 1; }, 10s));
  CHECK(s.rcv->total() == 0);  // the DELETEs are not published: nothing is delivered
  CHECK(walhook.stop() == 0);
}

TEST_CASE("Retry-After pauses the whole endpoint until then") {
  setup s("rule_retry_after");
  relay::receiver_behaviour busy;
  busy.script = {503};
  busy.retry_after = "2";
  s.rcv->set_behaviour("/ra", busy);
  test::add_endpoint(s.db, "t", s.rcv->url("/ra"), delivery::generate_secret(), {}, 1);
  auto walhook = s.start_walhook({"--backoff-base-ms", "50"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  for (int i = 0; i < 5; ++i) s.publish("t", "x", fmt::format(R"({{"i": {}}})", i));
  REQUIRE(test::eventually([&] { return s.received("/ra").size() == 5; }, 30s));
  auto all = s.received("/ra", 0);
  REQUIRE(all.size() == 6);  // one 503, then the five events
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.received_at_us < b.received_at_us; });
  CHECK(all[0].status == 503);
  // Nothing went to the endpoint for the 2 seconds it asked for (the backoff alone is 25–50 ms).
  CHECK(all[1].received_at_us - all[0].received_at_us >= 1'900'000);
  CHECK(walhook.count_in_log("endpoint.retry_after") == 1);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a customer's non-UTF-8 Location header is stored, not lost; removing an endpoint removes its deliveries") {
  setup s("rule_bytes");
  relay::receiver_behaviour redirect;
  redirect.status = 302;
  redirect.location = std::string("http://caf\xe9\xff.example/x");
  s.rcv->set_behaviour("/loc", redirect);
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/loc"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--backoff-base-ms", "60000"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::string event = s.publish("t", "x", "{}");
  pg::params ev{event};
  REQUIRE(test::eventually([&] { return s.value("SELECT status FROM walhook.deliveries WHERE event_id = $1::uuid", ev) == "pending"; }, 20s));
  // Shown as redact_url shows it: the bytes that are not printable ASCII percent-encoded.
  CHECK(s.value("SELECT last_error FROM walhook.deliveries WHERE event_id = $1::uuid", ev) ==
        "HTTP 302 redirect to http://caf%E9%FF.example/x not followed");
  CHECK(walhook.count_in_log("state_store.write_failed") == 0);

  REQUIRE(s.walhook_cli({"endpoint", "remove", std::to_string(ep), "--force"}) == 0);
  pg::params id{std::to_string(ep)};
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", id) == "0");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a recorded slot position from another cluster (a restored copy) is ignored") {
  setup s("rule_restore");
  test::add_endpoint(s.db, "t", s.rcv->url("/a"), delivery::generate_secret());
  // What a dump of another cluster would carry: its system id and a position far ahead of ours.
  s.db.exec("INSERT INTO walhook.slot_progress (slot_name, system_id, confirmed_lsn, delivered_snapshot) "
            "VALUES ('rule_restore', '123', 'FF/0', '1000:1000:') ON CONFLICT (slot_name) DO UPDATE "
            "SET system_id = excluded.system_id, confirmed_lsn = excluded.confirmed_lsn, "
            "delivered_snapshot = excluded.delivered_snapshot");
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::string event = s.publish("t", "x", "{}");
  CHECK(test::eventually([&] { return s.received("/a").size() == 1; }, 20s));
  CHECK(walhook.count_in_log("replication.progress_ignored") == 1);
  CHECK(walhook.stop() == 0);
  CHECK(s.value("SELECT system_id <> '123' AND confirmed_lsn < 'FF/0' FROM walhook.slot_progress WHERE slot_name = 'rule_restore'") == "t");
}

TEST_CASE("tenants never cross: pending deliveries of a truncated endpoint never reach the new endpoint that got its id") {
  setup s("tenants");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/acme", down);
  test::add_endpoint(s.db, "acme", s.rcv->url("/acme"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--backoff-base-ms", "100"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::set<std::string> acme;
  for (int i = 0; i < 3; ++i) acme.insert(s.publish("acme", "x", "{}"));
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'pending'") == "3"; }, 20s));
  // The operator starts over: the endpoints table is emptied and its ids restart; globex's new
  // endpoint gets acme's old id.
  s.db.exec("TRUNCATE walhook.endpoints RESTART IDENTITY");
  auto globex = test::add_endpoint(s.db, "globex", s.rcv->url("/globex"), delivery::generate_secret());
  CHECK(globex == 1);
  REQUIRE(walhook.stop() == 0);
  walhook = s.start_walhook({"--backoff-base-ms", "100"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  auto own = s.publish("globex", "x", "{}");
  REQUIRE(test::eventually([&] { return !s.received("/globex").empty(); }, 20s));
  // acme's deliveries ended dead with the reason when the table was emptied (the removal
  // trigger); globex gets only its own event.
  REQUIRE(test::eventually([&] {
    return s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'dead' AND last_error = "
                   "'endpoint removed'") == "3";
  }, 30s));
  for (auto& r : s.received("/globex", 0)) CHECK_FALSE(acme.contains(r.webhook_id));
  CHECK(s.received("/globex").size() == 1);
  CHECK(s.received("/globex").front().webhook_id == own);
  CHECK(walhook.stop() == 0);
}
