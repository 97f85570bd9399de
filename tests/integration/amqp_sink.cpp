// End to end to RabbitMQ (issue 20): `walhook endpoint add --url amqp://…` and `walhook run`
// publish events from walhook.outbox with publisher confirms; an independent consumer (pika,
// tests/support/amqp_tool.py) reads each one back: body byte-exact (the webhook body), message_id
// = event id = the body's id, the signature verifiable. Faults: the broker SIGKILLed and
// restarted mid-stream (nothing lost, duplicates counted), an unroutable routing key (the
// delivery's last_error says so), the memory alarm (back-pressure, nothing lost after it clears).

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"
#include "tests/support/rabbitmq_server.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

/// `walhook endpoint add --tenant T --url URL`; returns the new endpoint's id.
std::string add_amqp_endpoint(test::scenario& s, const std::string& tenant, const std::string& url) {
  std::string out;
  const int rc = test::run_walhook({"endpoint", "add", "--tenant", tenant, "--url", url, "--database-url", s.url}, out);
  REQUIRE_MESSAGE(rc == 0, out);
  return s.value("SELECT max(id)::text FROM walhook.endpoints");
}

/// The webhook body of every event in the outbox, by event id (computed from the table, as
/// tests/integration/end_to_end.cpp does, independently of walhook).
std::map<std::string, std::string> expected_bodies(test::scenario& s) {
  auto rows = s.db.exec(
      "SELECT id, event_type, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
      "payload::text FROM walhook.outbox WHERE tenant_id = 't1' ORDER BY seq");
  std::map<std::string, std::string> out;
  for (int r = 0; r < rows.rows(); ++r)
    out[std::string(rows.value(r, 0))] = fmt::format(R"({{"id":"{}","type":"{}","timestamp":"{}","data":{}}})",
                                                     rows.value(r, 0), rows.value(r, 1), rows.value(r, 2),
                                                     rows.value(r, 3));
  return out;
}

/// Drains `queue` until every id in `want` has been read (or the timeout); returns all messages read.
std::vector<test::amqp_received> read_until(const std::string& queue, const std::map<std::string, std::string>& want,
                                            std::chrono::seconds timeout) {
  std::vector<test::amqp_received> all;
  std::set<std::string> seen;
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    for (auto& m : test::rabbitmq().drain(queue, 0, 500ms)) {
      seen.insert(m.message_id);
      all.push_back(std::move(m));
    }
    bool complete = true;
    for (const auto& [id, body] : want) complete = complete && seen.contains(id);
    if (complete) break;
  }
  return all;
}

void publish(test::scenario& s, int n, const std::string& tenant, const std::string& type, int from = 0) {
  for (int i = from; i < from + n; ++i)
    s.publish(tenant, type, fmt::format(R"({{"n": {}, "text": "é \"quoted\" \\ ✓", "nested": {{"a": [1, 2.50, null]}}}})", i));
}

}  // namespace

TEST_CASE("events reach RabbitMQ confirmed: byte-exact bodies, message_id = event id, verifiable signatures") {
  auto& rmq = test::rabbitmq();
  MESSAGE("rabbitmq-server started in " << rmq.startup_time().count() << " ms");
  rmq.declare("walhook", "q.e2e", "order.created");
  test::scenario s("amqp_e2e");
  const auto ep = add_amqp_endpoint(s, "t1", rmq.url("walhook", "{event_type}"));
  auto keys = delivery::parse_secrets(s.value("SELECT secret FROM walhook.endpoints WHERE id = $1", {ep}));
  REQUIRE(keys.has_value());
  auto walhook = s.start_walhook();
  publish(s, 300, "t1", "order.created");
  const auto want = expected_bodies(s);
  REQUIRE(want.size() == 300);
  const auto got = read_until("q.e2e", want, 60s);
  std::set<std::string> ids;
  for (const auto& m : got) {
    INFO("message " << m.message_id);
    auto it = want.find(m.message_id);
    REQUIRE(it != want.end());
    CHECK(m.body == it->second);
    CHECK(m.body.find(fmt::format(R"({{"id":"{}",)", m.message_id)) == 0);  // message_id = the body's id
    CHECK(m.header("webhook-id") == m.message_id);
    CHECK(m.header("walhook-event-type") == "order.created");
    CHECK(m.header("walhook-tenant-id") == "t1");
    CHECK(m.routing_key == "order.created");
    CHECK(m.delivery_mode == 2);
    CHECK(m.content_type == "application/json");
    CHECK(delivery::verify(*keys, m.message_id, m.header("webhook-timestamp"), m.body, m.header("webhook-signature")));
    ids.insert(m.message_id);
  }
  CHECK(ids.size() == 300);
  MESSAGE("300 events, " << got.size() << " messages read (" << got.size() - ids.size() << " duplicates)");
  CHECK(walhook.stop(20s) == 0);
}

TEST_CASE("an unroutable routing key is a failed delivery whose last_error says no queue got it") {
  auto& rmq = test::rabbitmq();
  rmq.declare("walhook.nobind");
  test::scenario s("amqp_unroutable");
  const auto ep = add_amqp_endpoint(s, "t1", rmq.url("walhook.nobind", "{event_type}"));
  auto walhook = s.start_walhook();
  publish(s, 1, "t1", "order.created");
  std::string err;
  const bool failed = test::eventually(
      [&] {
        err = s.value("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1", {ep});
        return !err.empty();
      },
      30s, 200ms);
  REQUIRE_MESSAGE(failed, walhook.log_tail());
  CHECK_MESSAGE(err.find("Basic.Return") != std::string::npos, err);
  CHECK_MESSAGE(err.find("312 NO_ROUTE") != std::string::npos, err);
  CHECK(err.find("guest") == std::string::npos);  // no credentials in last_error
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'delivered'") == "0");
  CHECK(walhook.stop(20s) == 0);
}

TEST_CASE("the broker SIGKILLed and restarted mid-stream: nothing lost, duplicates bounded") {
  auto& rmq = test::rabbitmq();
  rmq.declare("walhook.kill", "q.kill.e2e", "order.created");
  test::scenario s("amqp_kill");
  add_amqp_endpoint(s, "t1", rmq.url("walhook.kill", "{event_type}"));
  // The outage trips the breaker (20 failures come within a second); short pauses keep probing
  // while the broker boots, so one probe that meets a broker not yet ready costs 2 s, not 60.
  auto walhook = s.start_walhook({"--breaker-pause-s", "2"});
  publish(s, 200, "t1", "order.created");
  // Kill once some of them are in the queue, while the rest are in flight or queued.
  auto first = rmq.drain("q.kill.e2e", 20, 5000ms);
  REQUIRE(!first.empty());
  rmq.kill9();
  publish(s, 200, "t1", "order.created", 200);  // committed while the broker is down
  std::this_thread::sleep_for(2s);
  rmq.start();
  // A SIGKILL can lose the broker's newest metadata writes (Mnesia's log is not flushed at each
  // declare): declare again, as a consumer does when it connects. Until then a publish finds no
  // binding (Basic.Return) and walhook retries it: nothing is lost either way.
  rmq.declare("walhook.kill", "q.kill.e2e", "order.created");
  MESSAGE("rabbitmq-server restarted in " << rmq.startup_time().count() << " ms");
  const auto want = expected_bodies(s);
  REQUIRE(want.size() == 400);
  auto got = read_until("q.kill.e2e", want, 60s);
  got.insert(got.begin(), first.begin(), first.end());
  std::map<std::string, int> copies;
  for (const auto& m : got) {
    auto it = want.find(m.message_id);
    REQUIRE(it != want.end());
    CHECK(m.body == it->second);
    ++copies[m.message_id];
  }
  CHECK(copies.size() == 400);
  const auto duplicates = got.size() - copies.size();
  MESSAGE("400 events, " << got.size() << " messages read, " << duplicates << " duplicates");
  CHECK(duplicates <= 200);  // at most what was unconfirmed when the broker died, with its retries
  if (copies.size() != 400) {
    MESSAGE(walhook.log_tail());
    MESSAGE(s.value("SELECT string_agg(DISTINCT last_error, ' | ') FROM walhook.deliveries"));
  }
  CHECK(walhook.stop(20s) == 0);
}

TEST_CASE("RabbitMQ down for a while: the breaker pauses the endpoint, the slot moves on, everything arrives after") {
  auto& rmq = test::rabbitmq();
  rmq.declare("walhook.down", "q.down.e2e", "order.created");
  test::scenario s("amqp_down");
  const auto id = add_amqp_endpoint(s, "t1", rmq.url("walhook.down", "{event_type}"));
  auto walhook = s.start_walhook({"--breaker-threshold", "3", "--breaker-pause-s", "2"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  rmq.kill9();
  publish(s, 100, "t1", "order.created");
  const auto lsn = s.value("SELECT pg_current_wal_lsn()");
  // Connection refused: the breaker opens; the events are owed, not holding the slot.
  REQUIRE(test::eventually(
      [&] {
        return s.value("SELECT paused_until IS NOT NULL FROM walhook.endpoint_health WHERE endpoint_id = $1", {id}) == "t";
      },
      60s));
  CHECK(test::eventually([&] { return s.acknowledged(lsn); }, 20s));
  CHECK(s.value("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1 LIMIT 1", {id}).find("127.0.0.1") !=
        std::string::npos);
  std::this_thread::sleep_for(10s);  // down a while: the breaker keeps probing, nothing piles up in memory
  rmq.start();
  rmq.declare("walhook.down", "q.down.e2e", "order.created");  // as above: a SIGKILL may have lost it
  const auto want = expected_bodies(s);
  REQUIRE(want.size() == 100);
  auto got = read_until("q.down.e2e", want, 120s);
  std::set<std::string> ids;
  for (const auto& m : got) ids.insert(m.message_id);
  if (ids.size() != 100) MESSAGE(walhook.log_tail());
  CHECK(ids.size() == 100);
  CHECK(walhook.stop(20s) == 0);
}

TEST_CASE("the memory alarm is back-pressure (last_error says blocked); nothing is lost after it clears") {
  auto& rmq = test::rabbitmq();
  rmq.declare("walhook.alarm", "q.alarm.e2e", "order.created");
  test::scenario s("amqp_alarm");
  const auto ep = add_amqp_endpoint(s, "t1", rmq.url("walhook.alarm", "{event_type}"));
  auto walhook = s.start_walhook();
  publish(s, 5, "t1", "order.created");
  const auto warm = expected_bodies(s);
  REQUIRE(read_until("q.alarm.e2e", warm, 30s).size() >= 5);
  rmq.memory_alarm(true);
  publish(s, 50, "t1", "order.created", 5);
  std::string err;
  const bool blocked = test::eventually(
      [&] {
        err = s.value("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1 AND last_error IS NOT NULL "
                      "LIMIT 1",
                      {ep});
        return err.find("connection.blocked") != std::string::npos;
      },
      30s, 200ms);
  rmq.memory_alarm(false);
  CHECK_MESSAGE(blocked, err);
  auto want = expected_bodies(s);
  for (const auto& [id, body] : warm) want.erase(id);
  REQUIRE(want.size() == 50);
  std::set<std::string> ids;
  // After the alarm the endpoint waits out its pause (15 s) and its backoff: allow for a loaded machine.
  for (const auto& m : read_until("q.alarm.e2e", want, 120s)) ids.insert(m.message_id);
  for (const auto& [id, body] : want) CHECK_MESSAGE(ids.contains(id), id << " lost");
  CHECK(walhook.stop(20s) == 0);
}
