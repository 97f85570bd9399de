// Poison input and careless operations (issue 9), each provoked against a real PostgreSQL and a
// real walhook process: endpoints removed by plain SQL, a delivery write the server refuses,
// absurd merge keys, created_at values RFC 3339 cannot express, walhook's clock off by minutes,
// and a replayed endpoint UPDATE whose TOASTed columns come as "unchanged".

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

struct setup : test::scenario {
  using scenario::scenario;
  std::string count(const std::string& where) { return value("SELECT count(*) FROM walhook.deliveries WHERE " + where); }
  std::string publish(const std::string& tenant, const std::string& type, const std::optional<std::string>& merge_key = {}) {
    pg::params p{tenant, type, merge_key};
    return value("SELECT walhook.publish($1, $2, '{}'::jsonb, merge_key => $3)", p);
  }
  std::unique_ptr<test::walhook_process> start(std::vector<std::string> extra = {}) {
    auto w = std::make_unique<test::walhook_process>(start_walhook(std::move(extra)));
    REQUIRE(test::eventually([&] { return streaming(); }, 20s));
    return w;
  }
};

}  // namespace

TEST_CASE("an endpoint removed by plain SQL (DELETE, TRUNCATE … RESTART IDENTITY) ends its pending work dead and its health") {
  setup s("removed");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/a", down);
  s.rcv->set_behaviour("/b", down);
  auto a = test::add_endpoint(s.db, "acme", s.rcv->url("/a"), delivery::generate_secret());
  auto b = test::add_endpoint(s.db, "acme", s.rcv->url("/b"), delivery::generate_secret());
  auto w = s.start();
  for (int i = 0; i < 3; ++i) s.publish("acme", "x");
  REQUIRE(test::eventually([&] { return s.count("status = 'pending'") == "6"; }, 20s));
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoint_health") == "2"; }, 20s));

  s.db.exec(fmt::format("DELETE FROM walhook.endpoints WHERE id = {}", a));
  CHECK(s.count(fmt::format("endpoint_id = {} AND status = 'dead' AND last_error = 'endpoint removed'", a)) == "3");
  CHECK(s.count(fmt::format("endpoint_id = {} AND status = 'pending'", b)) == "3");
  CHECK(s.value(fmt::format("SELECT count(*) FROM walhook.endpoint_health WHERE endpoint_id = {}", a)) == "0");

  // Everything goes; the ids restart, and another tenant's endpoint gets the old id 1.
  s.db.exec("TRUNCATE walhook.endpoints RESTART IDENTITY");
  CHECK(s.count("status IN ('pending', 'sending')") == "0");
  CHECK(s.count("status = 'dead' AND last_error = 'endpoint removed'") == "6");
  CHECK(s.value("SELECT count(*) FROM walhook.endpoint_health") == "0");
  auto globex = test::add_endpoint(s.db, "globex", s.rcv->url("/globex"), delivery::generate_secret());
  CHECK(globex == a);
  auto own = s.publish("globex", "x");
  REQUIRE(test::eventually([&] { return !s.received("/globex").empty(); }, 20s));
  // walhook streamed both removals: the copies it kept for replays are gone.
  bool forgotten = test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoints_removed") == "0"; }, 20s);
  if (!forgotten) {
    MESSAGE(s.value("SELECT string_agg(id || ' xid ' || removed_xid || ' ' || (removed_xid::text::numeric % 4294967296), '; ') "
                    "FROM walhook.endpoints_removed"));
    MESSAGE(w->log());
  }
  REQUIRE(forgotten);
  CHECK(w->stop() == 0);
  // After a restart, nothing of acme's reaches globex's endpoint: only its own event, once.
  w = s.start();
  s.publish("globex", "x");
  REQUIRE(test::eventually([&] { return s.received("/globex").size() == 2; }, 20s));
  CHECK(w->stop() == 0);
  auto got = s.received("/globex", 0);
  CHECK(got.size() == 2);
  CHECK(got.front().webhook_id == own);
}

TEST_CASE("a delivery write the server refuses for its data ends that delivery dead; nothing else waits for it") {
  setup s("refused");
  // A rule of the operator's that refuses one delivery's row on purpose (SQLSTATE 23514).
  s.db.exec(R"(CREATE FUNCTION public.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                   IF NEW.merge_key = 'poison' THEN
                     RAISE EXCEPTION 'refused on purpose' USING ERRCODE = 'check_violation';
                   ELSIF NEW.merge_key = 'poison-internal' THEN  -- not a data error class
                     RAISE EXCEPTION 'refused with an internal error' USING ERRCODE = 'XX000';
                   END IF;
                   RETURN NEW;
                 END $$)");
  s.db.exec("CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON walhook.deliveries "
            "FOR EACH ROW EXECUTE FUNCTION public.refuse_poison()");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/down", down);
  test::add_endpoint(s.db, "down", s.rcv->url("/down"), delivery::generate_secret());
  test::add_endpoint(s.db, "up", s.rcv->url("/up"), delivery::generate_secret());
  auto w = s.start({"--behind", "rows"});  // every delivery of the down endpoint is written: rows, not a cursor
  auto poison = s.publish("down", "x", "poison");
  auto internal = s.publish("down", "x", "poison-internal");
  for (int i = 0; i < 20; ++i) s.publish("down", "x", fmt::format("entity-{}", i));
  for (int i = 0; i < 20; ++i) s.publish("up", "x");
  auto after = s.value("SELECT pg_current_wal_lsn()::text");
  REQUIRE(test::eventually([&] { return s.received("/up").size() == 20; }, 20s));
  REQUIRE(test::eventually([&] { return s.count("status = 'dead'") == "2"; }, 20s));
  pg::params pi{internal};
  CHECK(s.value("SELECT last_error LIKE '%refused with an internal error%' FROM walhook.deliveries WHERE event_id = $1", pi) == "t");
  pg::params p{poison};
  CHECK(s.value("SELECT last_error FROM walhook.deliveries WHERE event_id = $1", p)
            .starts_with("walhook could not store this delivery's state: "));
  CHECK(s.value("SELECT last_error LIKE '%refused on purpose%' FROM walhook.deliveries WHERE event_id = $1", p) == "t");
  REQUIRE(test::eventually([&] { return s.count("status = 'pending'") == "20"; }, 20s));
  // The refused write did not hold the slot: everything committed is acknowledged.
  CHECK(test::eventually([&] { return s.acknowledged(after); }, 20s));
  CHECK(w->stop() == 0);
}

TEST_CASE("a delivery write refused with a non-data SQLSTATE while alone in its batch is told apart by the next write") {
  setup s("refused_alone");
  // XX000 is no data error: alone, it looks like a database refusing every write, so walhook
  // retries it. The next write to come (another delivery's) commits, which shows the refusal was
  // this row's alone: it ends dead and nothing waits behind it.
  s.db.exec(R"(CREATE FUNCTION public.refuse_alone() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                   IF NEW.merge_key = 'poison-internal' THEN
                     RAISE EXCEPTION 'refused with an internal error' USING ERRCODE = 'XX000';
                   END IF;
                   RETURN NEW;
                 END $$)");
  s.db.exec("CREATE TRIGGER refuse_alone BEFORE INSERT OR UPDATE ON walhook.deliveries "
            "FOR EACH ROW EXECUTE FUNCTION public.refuse_alone()");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/down", down);
  test::add_endpoint(s.db, "down", s.rcv->url("/down"), delivery::generate_secret());
  auto w = s.start({"--behind", "rows"});
  auto internal = s.publish("down", "x", "poison-internal");
  REQUIRE(test::eventually([&] { return w->log().find("state_store.write_failed") != std::string::npos; }, 20s));
  CHECK(s.count("true") == "0");  // still retried: one write alone cannot tell
  s.publish("down", "x", "entity-0");
  REQUIRE(test::eventually([&] { return s.count("status = 'dead'") == "1"; }, 20s));
  pg::params p{internal};
  CHECK(s.value("SELECT last_error LIKE '%refused with an internal error%' FROM walhook.deliveries WHERE event_id = $1", p) == "t");
  CHECK(test::eventually([&] { return s.count("status = 'pending'") == "1"; }, 20s));
  CHECK(w->stop() == 0);
}

TEST_CASE("merge keys: publish() refuses absurd ones with a clear error; the longest allowed still merge") {
  setup s("merge_keys");
  std::string out;
  try {
    s.publish("t", "x", std::string(3000, 'k'));
    FAIL("a 3,000-byte merge key was accepted");
  } catch (const std::exception& e) {
    out = e.what();
  }
  CHECK(out.find("merge_key is 3000 bytes, at most 1024") != std::string::npos);
  // A direct INSERT is refused by the table's constraint.
  CHECK_THROWS(s.db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload, merge_key) "
                         "VALUES ('t', 'x', '{}', repeat('k', 3000))"));
  // walhook.* types are walhook's own notifications: an application cannot forge one.
  out.clear();
  try {
    s.publish("walhook-operator", "walhook.endpoint.disabled");
    FAIL("publish() accepted a walhook.* event type");
  } catch (const std::exception& e) {
    out = e.what();
  }
  CHECK(out.find("event types walhook.* are reserved") != std::string::npos);
  CHECK_THROWS(s.publish("walhook-operator", "WALHOOK.Endpoint.disabled"));  // in any case
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE event_type LIKE 'walhook.%'") == "0");

  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/down", down);
  test::add_endpoint(s.db, "t", s.rcv->url("/down"), delivery::generate_secret());
  auto w = s.start({"--behind", "rows"});  // the table's merge: rows, not an outbox cursor
  const std::string key(1024, 'k');
  std::string newest;
  for (int i = 0; i < 5; ++i) newest = s.publish("t", "x", key);
  // One pending row holds the key: the newest event (merge), not five, and no write refused.
  bool merged = (test::eventually([&] {
    pg::params p{newest};
    return s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'pending' AND event_id = $1", p) == "1";
  }, 20s));
  if (!merged) {
    MESSAGE(s.value("SELECT string_agg(status || ' ' || event_id || ' ' || coalesce(last_error, '-') || ' ' || merged_count, E'\\n') FROM walhook.deliveries"));
    MESSAGE(newest);
    MESSAGE(w->log());
  }
  REQUIRE(merged);
  CHECK(test::eventually([&] { return s.count("status = 'pending'") == "1"; }, 10s));
  CHECK(s.count("status = 'dead'") == "0");
  CHECK(w->stop() == 0);
}

TEST_CASE("created_at: every year RFC 3339 can express is rendered exactly; infinite, BC and year-10000 events end dead with the reason") {
  setup s("created_at");
  test::add_endpoint(s.db, "t", s.rcv->url("/in"), delivery::generate_secret());
  auto w = s.start();
  auto insert = [&](const std::string& created_at) {
    pg::params p{created_at};
    return s.value("INSERT INTO walhook.outbox (tenant_id, event_type, payload, created_at) "
                   "VALUES ('t', 'x', '{}', $1::timestamptz) RETURNING id", p);
  };
  std::map<std::string, std::string> rendered;  // event id → expected "timestamp"
  for (auto [pg, iso] : {std::pair{"0001-01-01 00:00:00+00", "0001-01-01T00:00:00.000000Z"},
                         std::pair{"1500-06-15 12:00:00.25+00", "1500-06-15T12:00:00.250000Z"},
                         std::pair{"2300-01-01 00:00:00+00", "2300-01-01T00:00:00.000000Z"},
                         std::pair{"9999-12-31 23:59:59.999999+00", "9999-12-31T23:59:59.999999Z"}})
    rendered[insert(pg)] = iso;
  std::map<std::string, std::string> refused;  // event id → a word of the reason
  for (auto [pg, reason] : {std::pair{"infinity", "finite"}, std::pair{"-infinity", "finite"},
                            std::pair{"10000-01-01 00:00:00+00", "0001-9999"},
                            std::pair{"0044-03-15 12:00:00+00 BC", "0001-9999"}})
    refused[insert(pg)] = reason;
  REQUIRE(test::eventually([&] { return s.received("/in").size() == rendered.size(); }, 20s));
  REQUIRE(test::eventually([&] { return s.count("status = 'dead'") == std::to_string(refused.size()); }, 20s));
  for (const auto& r : s.received("/in")) {
    CAPTURE(r.body);
    REQUIRE(rendered.contains(r.webhook_id));
    CHECK(r.body.find(fmt::format("\"timestamp\":\"{}\"", rendered[r.webhook_id])) != std::string::npos);
  }
  for (const auto& [id, reason] : refused) {
    pg::params p{id};
    auto error = s.value("SELECT last_error FROM walhook.deliveries WHERE event_id = $1 AND status = 'dead'", p);
    CAPTURE(error);
    CHECK(error.find("created_at") != std::string::npos);
    CHECK(error.find(reason) != std::string::npos);
  }
  CHECK(w->stop() == 0);
  CHECK(w->count_in_log("outbox.malformed_row") == refused.size());
}

TEST_CASE("retry timing holds when walhook's clock is minutes off PostgreSQL's") {
  setup s("skew");
  relay::receiver_behaviour flaky;
  flaky.fail_marker = "\"type\":\"x\"";
  flaky.fail_times = 1;
  flaky.fail_status = 503;
  s.rcv->set_behaviour("/in", flaky);
  test::add_endpoint(s.db, "t", s.rcv->url("/in"), delivery::generate_secret());
  for (const char* offset : {"-240s", "+240s"}) {
    CAPTURE(offset);
    // libfaketime moves walhook's system clock only (not its monotonic clock, not the server's).
    ::setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1", 1);
    ::setenv("FAKETIME", offset, 1);
    ::setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
    auto w = s.start_walhook({"--backoff-base-ms", "2000"});
    ::unsetenv("LD_PRELOAD");
    ::unsetenv("FAKETIME");
    ::unsetenv("FAKETIME_DONT_FAKE_MONOTONIC");
    REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
    auto id = s.publish("t", "x");
    std::vector<relay::received_request> tries;
    REQUIRE(test::eventually([&] {
      tries.clear();
      for (auto& r : s.received("/in", 0))
        if (r.webhook_id == id) tries.push_back(r);
      return tries.size() == 2;
    }, 30s));
    CHECK(tries[0].status == 503);
    CHECK(tries[1].status == 200);
    // Backoff after one failure with a 2 s base: [1 s, 2 s) — never immediate, never minutes.
    const double gap_s = static_cast<double>(tries[1].received_at_us - tries[0].received_at_us) / 1e6;
    MESSAGE("clock ", std::string(offset), ": retry after ", gap_s, " s");
    CHECK(gap_s >= 0.95);
    CHECK(gap_s < 8.0);
    // The skew was real: walhook stamped the attempt on its clock, the server the row on its own.
    pg::params p{id};
    REQUIRE(test::eventually([&] {
      return s.value("SELECT status FROM walhook.deliveries WHERE event_id = $1", p) == "delivered";
    }, 10s));
    const double skew_s = std::stod(s.value(
        "SELECT extract(epoch FROM last_attempt_at - updated_at) FROM walhook.deliveries WHERE event_id = $1", p));
    CHECK(std::abs(skew_s - std::stod(offset)) < 30.0);
    CHECK(w.stop() == 0);
    flaky.fail_marker = "\"type\":\"x\"";
    s.rcv->set_behaviour("/in", flaky);  // a fresh failure budget for the next round
  }
}

TEST_CASE("a replayed endpoint UPDATE with unchanged TOASTed columns keeps the endpoint valid; events before its deletion are delivered") {
  setup s("toast");
  // 150 rotation secrets: several KB, stored out of line (TOAST).
  std::string secrets;
  for (int i = 0; i < 150; ++i) secrets += (i ? " " : "") + delivery::generate_secret();
  relay::receiver_behaviour verify;
  verify.keys = delivery::parse_secrets(secrets).value();
  s.rcv->set_behaviour("/in", verify);
  auto id = test::add_endpoint(s.db, "t", s.rcv->url("/in"), secrets);
  CHECK(s.value("SELECT count(*) > 0 FROM " + s.value("SELECT reltoastrelid::regclass::text FROM pg_class "
                                                      "WHERE oid = 'walhook.endpoints'::regclass")) == "t");
  auto w = s.start();
  s.publish("t", "x");
  REQUIRE(test::eventually([&] { return s.received("/in").size() == 1; }, 20s));
  CHECK(w->stop() == 0);
  // While walhook is down: an UPDATE that leaves the secret alone (pgoutput: 'u'), an event, and
  // the endpoint's deletion. walhook's start-up read of the table no longer has the endpoint.
  s.db.exec(fmt::format("UPDATE walhook.endpoints SET max_concurrency = 3 WHERE id = {}", id));
  auto before_delete = s.publish("t", "x");
  s.db.exec(fmt::format("DELETE FROM walhook.endpoints WHERE id = {}", id));
  w = s.start();
  REQUIRE(test::eventually([&] { return s.received("/in").size() == 2; }, 20s));
  auto got = s.received("/in");
  CHECK(got.back().webhook_id == before_delete);
  CHECK(got.back().signature_valid);
  CHECK(s.count("status = 'dead'") == "0");
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoints_removed") == "0"; }, 20s));
  // After the deletion, nothing is routed to it any more.
  s.publish("t", "x");
  auto lsn = s.value("SELECT pg_current_wal_lsn()::text");
  REQUIRE(test::eventually([&] { return s.acknowledged(lsn); }, 20s));
  CHECK(s.received("/in", 0).size() == 2);
  CHECK(w->stop() == 0);
  CHECK(w->count_in_log("invalid endpoint secret") == 0);
}

TEST_CASE("work routed before an endpoint's removal gets one attempt each; failures end dead; kill -9 loses nothing") {
  setup s("retired");
  relay::receiver_behaviour paced;
  paced.delay = 5ms;  // it keeps up, but the stream reaches the DELETE while most events still wait
  s.rcv->set_behaviour("/a", paced);
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/b", down);
  auto a = test::add_endpoint(s.db, "A", s.rcv->url("/a"), delivery::generate_secret(), {}, 2);
  auto b = test::add_endpoint(s.db, "B", s.rcv->url("/b"), delivery::generate_secret());
  test::add_endpoint(s.db, "C", s.rcv->url("/c"), delivery::generate_secret());
  // walhook is stopped (never started): 100 events for A, one for B, 2,000 for C, then A and B go.
  std::set<std::string> for_a;
  for (int i = 0; i < 100; ++i) for_a.insert(s.publish("A", "x"));
  auto for_b = s.publish("B", "x");
  s.db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 'C', 'x', '{}' FROM generate_series(1, 2000)");
  s.db.exec(fmt::format("DELETE FROM walhook.endpoints WHERE id IN ({}, {})", a, b));
  auto w = s.start();
  // Every event committed before the removal reached A, once; B's one attempt failed: dead.
  bool all_a = test::eventually([&] { return s.received("/a").size() == for_a.size(); }, 30s);
  if (!all_a) {
    MESSAGE(s.received("/a").size(), " ", s.received("/a", 0).size());
    MESSAGE(s.value("SELECT string_agg(endpoint_id || ' ' || status || ' ' || coalesce(last_error,''), E'\\n') FROM walhook.deliveries"));
    MESSAGE(w->log());
  }
  REQUIRE(all_a);
  pg::params p{for_b};
  std::string b_row;
  CHECK(test::eventually([&] {
    b_row = s.value("SELECT status || ': ' || last_error FROM walhook.deliveries WHERE event_id = $1", p);
    return b_row.starts_with("dead: endpoint removed");
  }, 30s));
  MESSAGE("B: ", b_row);
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoints_removed") == "0"; }, 20s));
  CHECK(s.count("status IN ('pending', 'sending')") == "0");
  CHECK(s.count(fmt::format("endpoint_id = {}", a)) == "0");  // A's deliveries all succeeded
  CHECK(s.value("SELECT count(*) FROM walhook.endpoint_health") == "0");
  for (const auto& r : s.received("/a")) CHECK(for_a.contains(r.webhook_id));
  CHECK(s.received("/b", 0).size() <= 3);  // retried only until the stream reached the removal
  CHECK(w->stop() == 0);

  // kill -9 while a removed endpoint's attempt runs: after the restart it is attempted again.
  relay::receiver_behaviour hanging;
  hanging.delay = 1500ms;
  hanging.status = 503;
  s.rcv->set_behaviour("/k", hanging);
  auto k = test::add_endpoint(s.db, "K", s.rcv->url("/k"), delivery::generate_secret());
  w = s.start({"--max-hold-ms", "2000"});
  auto for_k = s.publish("K", "x");
  s.db.exec(fmt::format("DELETE FROM walhook.endpoints WHERE id = {}", k));
  // The stream has read the removal; the attempt (1.5 s) is still running.
  REQUIRE(test::eventually([&] { return w->count_in_log("endpoint.removal_streamed") == 1; }, 10s, 5ms));
  w->kill9();
  w = s.start();
  pg::params pk{for_k};
  REQUIRE(test::eventually([&] {
    return s.value("SELECT status FROM walhook.deliveries WHERE event_id = $1", pk) == "dead";
  }, 30s));
  CHECK(s.value("SELECT last_error FROM walhook.deliveries WHERE event_id = $1", pk).starts_with("endpoint removed"));
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoints_removed") == "0"; }, 20s));
  CHECK(w->stop() == 0);
}

TEST_CASE("an endpoint created again while walhook was stopped (TRUNCATE then INSERT, or the same id) is live after the replay") {
  setup s("recreated");
  const auto secret = delivery::generate_secret();
  test::add_endpoint(s.db, "H", s.rcv->url("/h"), secret);
  auto w = s.start();
  CHECK(w->stop() == 0);
  // While walhook is stopped: an event, the table emptied, the same endpoint created again.
  auto before = s.publish("H", "x");
  s.db.exec("TRUNCATE walhook.endpoints RESTART IDENTITY");
  auto again = test::add_endpoint(s.db, "H", s.rcv->url("/h"), secret);
  // …and an endpoint deleted and inserted again with its id and the very same row.
  auto g = test::add_endpoint(s.db, "G", s.rcv->url("/g"), secret);
  s.db.exec(fmt::format("DELETE FROM walhook.endpoints WHERE id = {}", g));
  s.db.exec(fmt::format("INSERT INTO walhook.endpoints (id, tenant_id, url, secret) OVERRIDING SYSTEM VALUE "
                        "VALUES ({}, 'G', '{}', '{}')", g, s.rcv->url("/g"), secret));
  w = s.start();
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoints_removed") == "0"; }, 20s));
  auto after_h = s.publish("H", "x");
  auto after_g = s.publish("G", "x");
  REQUIRE(test::eventually([&] {
    std::set<std::string> got;
    for (auto& r : s.received("/h")) got.insert(r.webhook_id);
    for (auto& r : s.received("/g")) got.insert(r.webhook_id);
    return got.contains(after_h) && got.contains(after_g);
  }, 20s));
  CHECK(again == 1);
  bool before_seen = false;
  for (auto& r : s.received("/h")) before_seen |= r.webhook_id == before;
  CHECK(before_seen);  // committed before the TRUNCATE: still delivered
  CHECK(w->stop() == 0);
}
