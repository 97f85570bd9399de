// Only walhook speaks for walhook (issue 19), tried as the attacker would: a second tenant
// naming another's endpoint as its contact, the application's role (sql/roles.sql) forging
// walhook's notifications, merge keys and control messages or taking the leadership lock, an
// endpoint created after the events it is replayed, and events whose application-supplied
// created_at is historic or -infinity.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

/// The scenario's URL as another role of sql/roles.sql (password placeholder of that file).
std::string as(const std::string& url, const std::string& role) {
  std::string u = url;
  return u.replace(u.find("postgres@"), 9, role + ":change-me@");
}

/// Runs sql/roles.sql on the scenario's database (already migrated: one run does it all).
void apply_roles(test::scenario& s) {
  std::string out;
  const int rc = relay::run_process({"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", s.url, "-f",
                                     std::string(WALHOOK_SOURCE_DIR) + "/sql/roles.sql"},
                                    "", out);
  INFO(out);
  REQUIRE(rc == 0);
}

void answer(test::receiver_thread& rcv, const std::string& path, unsigned status) {
  relay::receiver_behaviour b;
  b.status = status;
  rcv->set_behaviour(path, b);
}

std::map<std::string, int> received_ids(test::scenario& s, const std::string& path, unsigned status = 200) {
  std::map<std::string, int> out;
  for (const auto& r : s.received(path, status)) ++out[r.webhook_id];
  return out;
}

int cli(test::scenario& s, std::vector<std::string> args, std::string& out) {
  args.push_back("--database-url");
  args.push_back(s.url);
  return test::run_walhook(args, out);
}

}  // namespace

TEST_CASE("a contact endpoint is one of the same tenant's, whichever way it is set; notices never cross tenants") {
  test::scenario s("tb_contact");
  const auto secret = delivery::generate_secret();
  const long long a = test::add_endpoint(s.db, "t1", s.rcv->url("/a"), secret);
  const long long b = test::add_endpoint(s.db, "t2", s.rcv->url("/b"), secret);
  const long long c = test::add_endpoint(s.db, "t1", s.rcv->url("/c"), secret);
  const std::string A = std::to_string(a), B = std::to_string(b), C = std::to_string(c);
  std::string out;

  // The CLI (and the admin API, through the same operation) refuse another tenant's contact.
  CHECK(cli(s, {"endpoint", "add", "--tenant", "t1", "--url", s.rcv->url("/d"), "--contact-endpoint", B}, out) != 0);
  CHECK(out.find("another tenant's") != std::string::npos);
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints") == "3");
  CHECK(cli(s, {"endpoint", "update", A, "--contact-endpoint", B}, out) != 0);
  CHECK(out.find("another tenant's") != std::string::npos);
  // Plain SQL too: the schema refuses it, and moving a contact (or the endpoint) to another tenant.
  CHECK_THROWS_WITH(s.db.exec("UPDATE walhook.endpoints SET contact_endpoint_id = $1 WHERE id = $2", {B, A}),
                    doctest::Contains("endpoints_contact_same_tenant"));
  REQUIRE(cli(s, {"endpoint", "update", A, "--contact-endpoint", C}, out) == 0);
  CHECK_THROWS_WITH(s.db.exec("UPDATE walhook.endpoints SET tenant_id = 't2' WHERE id = $1", {C}),
                    doctest::Contains("endpoints_contact_same_tenant"));
  CHECK_THROWS_WITH(s.db.exec("UPDATE walhook.endpoints SET tenant_id = 't2' WHERE id = $1", {A}),
                    doctest::Contains("endpoints_contact_same_tenant"));
  CHECK(s.value("SELECT contact_endpoint_id FROM walhook.endpoints WHERE id = $1", {A}) == C);

  // A row written before migration 8 (the constraint dropped to make one): walhook itself never
  // sends a notice about t1's endpoint to t2's receiver; t1's own contact gets them.
  s.db.exec("ALTER TABLE walhook.endpoints DROP CONSTRAINT endpoints_contact_same_tenant");
  s.db.exec("UPDATE walhook.endpoints SET contact_endpoint_id = $1 WHERE id = $2", {B, A});
  const long long e = test::add_endpoint(s.db, "t1", s.rcv->url("/e"), secret);
  s.db.exec("UPDATE walhook.endpoints SET contact_endpoint_id = $1 WHERE id = $2", {C, std::to_string(e)});
  answer(s.rcv, "/a", 500);
  answer(s.rcv, "/e", 500);
  auto walhook = s.start_walhook({"--breaker-threshold", "3", "--breaker-pause-s", "3600", "--operator-tenant", ""});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s));
  for (int i = 0; i < 4; ++i) s.publish("t1", "order.paid");
  // e's contact (c, same tenant) gets its notices: the failure streak is announced...
  CHECK(test::eventually([&] { return !s.received("/c").empty(); }, 30s));
  // ... and a's, announced the same way, never reach t2.
  CHECK(test::eventually([&] { return walhook.count_in_log("\"endpoint.paused\"") >= 2; }, 30s));
  CHECK(s.received("/b").empty());
  CHECK(walhook.stop() == 0);
}

TEST_CASE("the application's role cannot forge walhook's notifications, merge into them, nor signal walhook") {
  test::scenario s("tb_forge");
  apply_roles(s);
  relay::blocking_db app(as(s.url, "walhook_app"));
  for (const char* sql : {
           "INSERT INTO walhook.outbox (tenant_id, event_type, payload) VALUES ('walhook-operator', 'walhook.endpoint.disabled', '{}')",
           "INSERT INTO walhook.outbox (tenant_id, event_type, payload) VALUES ('walhook-operator', 'WalHook.Endpoint.Disabled', '{}')",
           "INSERT INTO walhook.outbox (tenant_id, event_type, merge_key, payload) "
           "VALUES ('walhook-operator', 'order.paid', 'walhook.endpoint:1', '{}')",
           "INSERT INTO walhook.outbox (tenant_id, event_type, merge_key, payload) VALUES ('t', 'order.paid', 'Walhook.Order', '{}')"}) {
    CAPTURE(sql);
    CHECK_THROWS_WITH(app.exec(sql), doctest::Contains("outbox_walhook_reserved"));
  }
  // The columns that would make a row walhook's, or set its clock, are not the application's.
  for (const char* sql : {
           "INSERT INTO walhook.outbox (tenant_id, event_type, payload, by_walhook) VALUES ('t', 'walhook.x', '{}', true)",
           "INSERT INTO walhook.outbox (tenant_id, event_type, payload, endpoint_id) VALUES ('t', 'walhook.x', '{}', 1)",
           "INSERT INTO walhook.outbox (tenant_id, event_type, payload, stored_at) VALUES ('t', 'x', '{}', '2000-01-01')",
           "SELECT pg_logical_emit_message(true, 'walhook', 'resume:1')",
           "SELECT pg_logical_emit_message(false, 'walhook', 'resume:1'::bytea)"}) {
    CAPTURE(sql);
    CHECK_THROWS_WITH(app.exec(sql), doctest::Contains("permission denied"));
  }
  // Its own events still go in, both ways.
  CHECK_NOTHROW(app.exec("SELECT walhook.publish('t', 'order.paid', '{}')"));
  CHECK_NOTHROW(app.exec("INSERT INTO walhook.outbox (tenant_id, event_type, merge_key, payload) VALUES ('t', 'x', 'order:1', '{}')"));
  // walhook's own role may still emit its signals.
  relay::blocking_db admin(as(s.url, "walhook_admin"));
  CHECK_NOTHROW(admin.exec("SELECT pg_logical_emit_message(true, 'walhook', 'wake:1')"));
}

TEST_CASE("a forged resume does not close a breaker; an operator's does; a row forged before the constraint is dead") {
  test::scenario s("tb_resume");
  answer(s.rcv, "/down", 503);
  const long long id = test::add_endpoint(s.db, "t", s.rcv->url("/down"), delivery::generate_secret());
  const std::string ID = std::to_string(id);
  // Without sql/roles.sql (or for a role given EXECUTE): the message alone is not enough.
  auto walhook = s.start_walhook({"--breaker-threshold", "3", "--breaker-pause-s", "3600", "--behind", "rows"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s));
  for (int i = 0; i < 3; ++i) s.publish("t", "order.paid");
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"endpoint.paused\"") == 1; }, 30s));
  const auto attempts = s.received("/down", 503).size();
  s.db.exec("SELECT pg_logical_emit_message(true, 'walhook', 'resume:" + ID + "')");
  s.db.exec("SELECT pg_logical_emit_message(false, 'walhook', 'resume:" + ID + "')");
  CHECK(test::eventually([&] { return walhook.count_in_log("\"control.unconfirmed\"") == 2; }, 20s));
  CHECK(walhook.count_in_log("\"endpoint.breaker_reset\"") == 0);
  CHECK(s.received("/down", 503).size() == attempts);  // still paused: nothing sent
  CHECK(s.value("SELECT paused_until > now() FROM walhook.endpoint_health WHERE endpoint_id = $1", {ID}) == "t");
  // The operator's resume changes the endpoint's row in the same transaction: it counts.
  answer(s.rcv, "/down", 200);
  std::string out;
  REQUIRE(cli(s, {"endpoint", "resume", ID}, out) == 0);
  CHECK(test::eventually([&] { return walhook.count_in_log("\"endpoint.breaker_reset\"") == 1; }, 20s));
  CHECK(test::eventually([&] { return s.received("/down").size() == 3; }, 30s));

  // A walhook.* row that walhook did not write (the constraint dropped, as for a row of before
  // migration 8): its deliveries end dead with the reason, nothing is sent.
  s.db.exec("ALTER TABLE walhook.outbox DROP CONSTRAINT outbox_walhook_reserved");
  s.db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload) VALUES ('t', 'walhook.endpoint.disabled', '{}')");
  CHECK(test::eventually([&] {
    return s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'dead' AND last_error LIKE '%reserved%'") == "1";
  }, 20s));
  CHECK(s.received("/down").size() == 3);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a session that is not walhook's holding the leadership lock is an incident, reported while it lasts") {
  test::scenario s("tb_lock");
  apply_roles(s);
  relay::blocking_db app(as(s.url, "walhook_app"));
  app.exec("SELECT pg_advisory_lock(2003748971, hashtext($1))", {s.slot});
  const int port = relay::free_tcp_port();
  auto walhook = s.start_walhook({"--admin-listen", fmt::format("127.0.0.1:{}", port)});
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"leader.lock_foreign\"") == 1; }, 30s));
  CHECK(walhook.count_in_log("\"holder_role\":\"walhook_app\"") == 1);
  const auto ready = test::http_get(static_cast<unsigned short>(port), "/readyz");
  CHECK(ready.first == 503);
  CHECK(ready.second.find("not walhook's") != std::string::npos);
  CHECK(test::http_get(static_cast<unsigned short>(port), "/metrics").second.find("walhook_leader_lock_foreign 1") !=
        std::string::npos);
  CHECK_FALSE(s.streaming());
  // The holder goes: walhook takes over, and the incident is over.
  app.exec("SELECT pg_advisory_unlock(2003748971, hashtext($1))", {s.slot});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s));
  CHECK(test::eventually([&] {
    return test::http_get(static_cast<unsigned short>(port), "/metrics").second.find("walhook_leader_lock_foreign 0") !=
           std::string::npos;
  }, 10s));
  CHECK(test::http_get(static_cast<unsigned short>(port), "/readyz").first == 200);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("an endpoint created after an event never gets it: not in catch-up, not from walhook recover") {
  test::scenario s("tb_created");
  const auto secret = delivery::generate_secret();
  test::add_endpoint(s.db, "t", s.rcv->url("/old"), secret);
  const std::string since = s.value("SELECT now()::text");
  // Two events while walhook is down, then a new endpoint: catch-up replays them to the old one only.
  std::set<std::string> before{s.publish("t", "order.paid"), s.publish("t", "order.paid")};
  test::add_endpoint(s.db, "t", s.rcv->url("/new"), secret);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return received_ids(s, "/old").size() == 2; }, 30s));
  const std::string after = s.publish("t", "order.paid");
  REQUIRE(test::eventually([&] { return received_ids(s, "/new").contains(after); }, 30s));
  CHECK(received_ids(s, "/new").size() == 1);
  // walhook recover --since before them all: the old endpoint gets all three again, the new one
  // only the one committed after it existed.
  std::string out;
  REQUIRE(cli(s, {"recover", "--slot", s.slot, "--since", since, "--tenant", "t", "--wait", "--wait-timeout", "60"}, out) == 0);
  INFO(out);
  CHECK(test::eventually([&] {
    auto got = received_ids(s, "/old");
    return got.size() == 3 && std::all_of(got.begin(), got.end(), [](const auto& kv) { return kv.second == 2; });
  }, 30s));
  auto fresh = received_ids(s, "/new");
  CHECK(fresh.size() == 1);
  CHECK(fresh[after] == 2);
  for (const auto& e : before) CHECK_FALSE(fresh.contains(e));
  CHECK(walhook.stop() == 0);
}

TEST_CASE("an event's age is walhook's own: a historic created_at is retried, kept and delivered; dead letters stay") {
  test::scenario s("tb_age");
  answer(s.rcv, "/flaky", 503);
  const long long id = test::add_endpoint(s.db, "t", s.rcv->url("/flaky"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--behind", "rows", "--retention-days", "1"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s));
  // A backfill of old business events (created_at years ago), and one with -infinity.
  const std::string old = s.value(
      "INSERT INTO walhook.outbox (tenant_id, event_type, payload, created_at) "
      "VALUES ('t', 'order.paid', '{}', '2001-02-03 04:05:06+00') RETURNING id");
  const std::string inf = s.value(
      "INSERT INTO walhook.outbox (tenant_id, event_type, payload, created_at) "
      "VALUES ('t', 'order.paid', '{}', '-infinity') RETURNING id");
  // The first attempt fails: the event waits for its retry, not dead "older than 72 h".
  const pg::params old_id{old};
  REQUIRE(test::eventually([&] {
    return s.value("SELECT status FROM walhook.deliveries WHERE event_id = $1", old_id) == "pending";
  }, 30s));
  REQUIRE(test::eventually([&] {
    return s.value("SELECT status FROM walhook.deliveries WHERE event_id = $1", {inf}) == "dead";
  }, 30s));
  // Retention (1 day, run at start) keeps what the pending and dead deliveries need, even with
  // their stored_at aged past it (2 days: still within the 72 h of retries), and keeps the dead
  // letter (it died just now).
  s.db.exec("UPDATE walhook.outbox SET stored_at = now() - interval '2 days'");
  const std::string gone = s.value(
      "INSERT INTO walhook.outbox (tenant_id, event_type, payload) VALUES ('nobody', 'x', '{}') RETURNING id");
  s.db.exec("UPDATE walhook.outbox SET stored_at = now() - interval '2 days' WHERE id = $1", {gone});
  CHECK(walhook.stop() == 0);
  auto again = s.start_walhook({"--behind", "rows", "--retention-days", "1"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s));
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.outbox WHERE id = $1", {gone}) == "0"; }, 30s));
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE id IN ($1, $2)", {old, inf}) == "2");
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'dead' AND event_id = $1", {inf}) == "1");
  std::string out;
  REQUIRE(cli(s, {"status", "--json"}, out) == 0);
  CHECK(out.find("\"dead\":1") != std::string::npos);
  // The endpoint answers again: the historic event is delivered.
  answer(s.rcv, "/flaky", 200);
  s.db.exec("UPDATE walhook.deliveries SET next_attempt_at = now() WHERE endpoint_id = $1", {std::to_string(id)});
  CHECK(test::eventually([&] { return received_ids(s, "/flaky").contains(old); }, 30s));
  CHECK(again.stop() == 0);
}

TEST_CASE("a session change abandons the attempts in flight: a hung endpoint never holds more than its max_concurrency") {
  test::scenario s("tb_abandon");
  test::never_answer(s.rcv, "/hung");
  test::add_endpoint(s.db, "t", s.rcv->url("/hung"), delivery::generate_secret(), {}, 4);
  auto walhook = s.start_walhook({"--deadline-ms", "120000"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s));
  for (int i = 0; i < 8; ++i) s.publish("t", "order.paid");
  REQUIRE(test::eventually([&] { return s.rcv->count("/hung") == 4; }, 30s));
  // The walsender is terminated: this instance's session ends, it starts another and sends the
  // same events again — after closing the first attempts, so 4 at once, never 8.
  s.db.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", {s.slot});
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"session.attempts_abandoned\"") == 1; }, 30s));
  REQUIRE(test::eventually([&] { return s.rcv->count("/hung") >= 8; }, 30s));
  CHECK(s.rcv->max_concurrent("/hung") == 4);
  // A PostgreSQL restart: the same.
  REQUIRE(test::cluster().restart("fast"));
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"session.attempts_abandoned\"") == 2; }, 60s));
  REQUIRE(test::eventually([&] { return s.rcv->count("/hung") >= 12; }, 60s));
  CHECK(s.rcv->max_concurrent("/hung") == 4);
  // The abandoned attempts wrote nothing: no failure was recorded against the endpoint.
  relay::blocking_db db(s.url, "after restart");
  CHECK(test::query_value(db, "SELECT coalesce(sum(consecutive_failures), 0) FROM walhook.endpoint_health") == "0");
  CHECK(walhook.stop() == 0);
}
