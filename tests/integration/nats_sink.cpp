// The NATS JetStream sink end to end (issue 20): a real nats-server -js, a real PostgreSQL and
// walhook as a process. Messages are read back by an independent client
// (tests/support/nats_read_stream.py, Python's standard library and the JetStream API).

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"
#include "tests/harness/nats_server.hpp"
#include "tests/support/scripted_http_server.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <signal.h>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

/// The webhook body of every outbox row, computed from the table (independently of walhook).
std::map<std::string, std::string> expected_bodies(relay::blocking_db& db) {
  auto rows = db.exec(
      "SELECT id, event_type, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
      "payload::text FROM walhook.outbox WHERE NOT by_walhook ORDER BY seq");
  std::map<std::string, std::string> out;
  for (int r = 0; r < rows.rows(); ++r)
    out[std::string(rows.value(r, 0))] = fmt::format(R"({{"id":"{}","type":"{}","timestamp":"{}","data":{}}})",
                                                     rows.value(r, 0), rows.value(r, 1), rows.value(r, 2),
                                                     rows.value(r, 3));
  return out;
}

std::string header(const test::nats_server::stored_message& m, const std::string& name) {
  for (const auto& [k, v] : m.headers)
    if (k == name) return v;
  return "";
}

void publish_n(relay::blocking_db& db, int n, const std::string& tenant, int first = 0) {
  for (int i = first; i < first + n; ++i)
    db.exec("SELECT walhook.publish($1, $2, $3::jsonb, aggregate_id => $4)",
            pg::params{tenant, i % 2 ? "order.paid" : "order.created",
                       fmt::format(R"({{"n": {}, "text": "é \"q\" \\ ✓"}})", i), fmt::format("order-{}", i % 7)});
}

std::string endpoint_url(const test::nats_server& nats, const std::string& subject) {
  return fmt::format("nats://127.0.0.1:{}/{}", nats.port(), subject);
}

}  // namespace

TEST_CASE("every event reaches JetStream once, confirmed, byte-exact, with the event id as Nats-Msg-Id") {
  test::nats_server nats;
  nats.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_e2e");
  const std::string secret = delivery::generate_secret();
  // The same tenant has an HTTP endpoint too: the broker's body must be the webhook's, byte for byte.
  test::add_endpoint(s.db, "t1", endpoint_url(nats, "events.{event_type}.{aggregate_id}"), secret);
  test::add_endpoint(s.db, "t1", s.rcv->url("/hook"), secret);
  auto walhook = s.start_walhook({"--operator-tenant", ""});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  publish_n(s.db, 300, "t1");
  const auto expected = expected_bodies(s.db);
  REQUIRE(expected.size() == 300);
  std::vector<test::nats_server::stored_message> stored;
  const bool all = test::eventually([&] { return (stored = nats.read_stream("EVENTS")).size() >= 300; }, 60s, 500ms);
  if (!all) MESSAGE(walhook.log_tail());
  REQUIRE(all);
  REQUIRE(test::eventually([&] { return s.received("/hook").size() >= 300; }, 30s));

  std::map<std::string, std::string> http_body;
  for (const auto& r : s.received("/hook")) http_body[r.webhook_id] = r.body;
  const auto keys = *delivery::parse_secrets(secret);
  std::set<std::string> ids;
  for (const auto& m : stored) {
    INFO("message seq " << m.seq);
    REQUIRE(expected.contains(m.msg_id));
    CHECK(m.data == expected.at(m.msg_id));
    CHECK(m.data == http_body[m.msg_id]);
    CHECK(header(m, "webhook-id") == m.msg_id);
    CHECK(header(m, "Content-Type") == "application/json");
    CHECK(header(m, "walhook-tenant-id") == "t1");
    CHECK(delivery::verify(keys, m.msg_id, header(m, "webhook-timestamp"), m.data, header(m, "webhook-signature")));
    // The subject is rendered from the event: events.<type>.<aggregate id>.
    CHECK(m.subject == fmt::format("events.{}.{}", header(m, "walhook-event-type"), header(m, "walhook-aggregate-id")));
    ids.insert(m.msg_id);
  }
  CHECK(ids.size() == 300);
  CHECK(stored.size() == 300);  // nothing twice
  // Nothing left behind: no failed attempt was written, the slot moved on.
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries") == "0");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("nats-server killed and restarted mid-stream: nothing lost, duplicates removed by the dedupe window") {
  test::nats_server nats;
  nats.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_kill");
  test::add_endpoint(s.db, "t1", endpoint_url(nats, "events.{event_type}"), delivery::generate_secret(), {}, 16);
  auto walhook = s.start_walhook({"--operator-tenant", "", "--breaker-threshold", "1000"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  test::publisher pub({.url = s.url, .tenants = {"t1"}, .rate_per_second = 400, .total = 2000});
  pub.start();
  std::this_thread::sleep_for(1500ms);
  nats.kill9();  // mid-stream: publishes in flight and unconfirmed
  std::this_thread::sleep_for(3s);
  nats.restart();
  REQUIRE(pub.join(60s));

  std::set<std::string> published;
  for (const auto& e : pub.events()) published.insert(e.id);
  REQUIRE(published.size() == 2000);
  std::vector<test::nats_server::stored_message> stored;
  const bool all = test::eventually(
      [&] {
        stored = nats.read_stream("EVENTS");
        std::set<std::string> got;
        for (const auto& m : stored) got.insert(m.msg_id);
        return std::includes(got.begin(), got.end(), published.begin(), published.end());
      },
      90s, 1s);
  if (!all) MESSAGE(walhook.log_tail());
  REQUIRE(all);
  std::set<std::string> unique;
  for (const auto& m : stored) unique.insert(m.msg_id);
  const auto failed_attempts = s.value("SELECT coalesce(sum(attempts), 0) FROM walhook.deliveries");
  MESSAGE(fmt::format("kill -9 of nats-server mid-stream: {} events, {} stored, {} unique; {} failed attempts "
                      "written back",
                      published.size(), stored.size(), unique.size(), failed_attempts));
  CHECK(unique.size() == published.size());
  // Redelivered events carry the same Nats-Msg-Id: the stream stores each once.
  CHECK(stored.size() == unique.size());
  CHECK(walhook.stop() == 0);
}

TEST_CASE("no stream for the subject, then a full stream: readable errors, retries, then dead with the server's reason") {
  test::nats_server nats;
  test::scenario s("nats_errors");
  const auto missing = test::add_endpoint(s.db, "t1", endpoint_url(nats, "nostream.{event_type}"), delivery::generate_secret());
  nats.create_stream("SMALL", {"small.>"}, 3);
  const auto full = test::add_endpoint(s.db, "t2", endpoint_url(nats, "small.x"), delivery::generate_secret(), {}, 1);
  auto walhook = s.start_walhook({"--operator-tenant", "", "--max-attempts", "2", "--backoff-base-ms", "100"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  s.publish("t1", "order.created");
  for (int i = 0; i < 5; ++i) s.publish("t2", "order.created", fmt::format(R"({{"i": {}}})", i));

  // No stream covers nostream.*: the last error says so, in words an operator can act on.
  REQUIRE(test::eventually(
      [&] {
        return s.value("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1", {std::to_string(missing)})
                   .find("no JetStream stream covers the subject") != std::string::npos;
      },
      30s));
  // A stream with max_msgs 3 and discard=new takes 3; the other two are refused, retried, then dead.
  REQUIRE(test::eventually(
      [&] {
        return s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'dead'",
                       {std::to_string(full)}) == "2";
      },
      30s));
  CHECK(nats.read_stream("SMALL").size() == 3);
  const auto reason = s.value("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'dead' LIMIT 1",
                              {std::to_string(full)});
  INFO(reason);
  CHECK(reason.find("maximum messages") != std::string::npos);

  // The operator creates the missing stream and replays the dead letter: it goes out.
  REQUIRE(test::eventually(
      [&] {
        return s.value("SELECT status FROM walhook.deliveries WHERE endpoint_id = $1", {std::to_string(missing)}) == "dead";
      },
      30s));
  nats.create_stream("NOSTREAM", {"nostream.>"});
  std::string out;
  REQUIRE(test::run_walhook({"replay", "--database-url", s.url, "--endpoint", std::to_string(missing)}, out) == 0);
  CHECK(test::eventually([&] { return nats.read_stream("NOSTREAM").size() == 1; }, 30s, 500ms));
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a stalled broker never slows an HTTP endpoint, and the slot is not held") {
  test::nats_server nats;
  nats.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_neighbour");
  test::add_endpoint(s.db, "t1", endpoint_url(nats, "events.{event_type}"), delivery::generate_secret(), {}, 4);
  test::add_endpoint(s.db, "t1", s.rcv->url("/fast"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--operator-tenant", "", "--deadline-ms", "2000"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  // The broker stops answering: its connection is open, publishes get no PubAck.
  REQUIRE(::kill(nats.pid(), SIGSTOP) == 0);
  publish_n(s.db, 200, "t1");
  const auto lsn = s.value("SELECT pg_current_wal_lsn()");
  // The HTTP endpoint gets all 200 while the broker hangs, and the slot moves past them.
  CHECK(test::eventually([&] { return s.received("/fast").size() >= 200; }, 20s));
  CHECK(test::eventually([&] { return s.acknowledged(lsn); }, 20s));
  REQUIRE(::kill(nats.pid(), SIGCONT) == 0);
  // And the broker's events all arrive once it answers again (retries, or its outbox cursor).
  const bool all = test::eventually([&] { return nats.read_stream("EVENTS").size() >= 200; }, 90s, 1s);
  if (!all) MESSAGE(walhook.log_tail());
  CHECK(all);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a broker down for a while: the breaker pauses it, the slot moves on, everything arrives after") {
  test::nats_server nats;
  nats.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_down");
  const auto id = test::add_endpoint(s.db, "t1", endpoint_url(nats, "events.{event_type}"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--operator-tenant", "", "--breaker-threshold", "3", "--breaker-pause-s", "2"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  nats.kill9();
  publish_n(s.db, 100, "t1");
  const auto lsn = s.value("SELECT pg_current_wal_lsn()");
  // Connection refused: the breaker opens; the events are owed, not holding the slot.
  REQUIRE(test::eventually(
      [&] {
        return s.value("SELECT paused_until IS NOT NULL FROM walhook.endpoint_health WHERE endpoint_id = $1",
                       {std::to_string(id)}) == "t";
      },
      30s));
  CHECK(test::eventually([&] { return s.acknowledged(lsn); }, 20s));
  const auto error = s.value("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1 LIMIT 1",
                             {std::to_string(id)});
  INFO(error);
  CHECK(error.find("127.0.0.1:") != std::string::npos);  // the connect error names the address

  nats.restart();
  // The breaker's probe finds the broker back; every event arrives, each once.
  std::set<std::string> got;
  const bool all = test::eventually(
      [&] {
        got.clear();
        for (const auto& m : nats.read_stream("EVENTS")) got.insert(m.msg_id);
        return got.size() >= 100;
      },
      90s, 1s);
  if (!all) MESSAGE(walhook.log_tail());
  CHECK(all);
  CHECK(got.size() == 100);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("endpoint add refuses a broker URL it cannot use, and never shows its credentials") {
  test::scenario s("nats_cli");
  std::string out;
  CHECK(test::run_walhook({"endpoint", "add", "--database-url", s.url, "--tenant", "t1", "--url",
                           "nats://127.0.0.1:4222/events.{type}"},
                          out) != 0);
  CHECK(out.find("unknown placeholder {type}") != std::string::npos);
  CHECK(test::run_walhook({"endpoint", "add", "--database-url", s.url, "--tenant", "t1", "--url",
                           "nats://127.0.0.1:4222/events.*"},
                          out) != 0);
  CHECK(out.find("not a NATS subject") != std::string::npos);
  CHECK(test::run_walhook({"endpoint", "add", "--database-url", s.url, "--tenant", "t1", "--url",
                           "amqp://app:hunter2secret@127.0.0.1:5672/%2F?exchange=x"},
                          out) != 0);
  CHECK(out.find("routing_key") != std::string::npos);
  CHECK(out.find("hunter2secret") == std::string::npos);
  REQUIRE(test::run_walhook({"endpoint", "add", "--database-url", s.url, "--tenant", "t1", "--url",
                             "nats://app:hunter2secret@127.0.0.1:4222/events.{event_type}"},
                            out) == 0);
  CHECK(out.find("hunter2secret") == std::string::npos);
  REQUIRE(test::run_walhook({"status", "--database-url", s.url}, out) == 0);
  CHECK(out.find("hunter2secret") == std::string::npos);
}

TEST_CASE("nats+tls://: the server's certificate is verified against --ca-file; an untrusted one is a TLS error") {
  const std::string dir = std::filesystem::temp_directory_path() / ("walhook-nats-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  const auto trusted = test::make_test_certificate("IP:127.0.0.1,DNS:localhost");
  const auto stranger = test::make_test_certificate("IP:127.0.0.1,DNS:localhost");
  const auto ca = write("trusted.pem", trusted.certificate_pem);
  test::nats_server good(ca, write("trusted.key", trusted.private_key_pem));
  test::nats_server bad(write("stranger.pem", stranger.certificate_pem), write("stranger.key", stranger.private_key_pem));
  good.create_stream("EVENTS", {"events.>"});
  bad.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_tls");
  test::add_endpoint(s.db, "t1", fmt::format("nats+tls://127.0.0.1:{}/events.{{event_type}}", good.port()),
                     delivery::generate_secret());
  const auto untrusted = test::add_endpoint(s.db, "t2", fmt::format("nats+tls://127.0.0.1:{}/events.x", bad.port()),
                                            delivery::generate_secret());
  auto walhook = s.start_walhook({"--operator-tenant", "", "--ca-file", ca});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  publish_n(s.db, 10, "t1");
  publish_n(s.db, 1, "t2");
  const bool all = test::eventually([&] { return good.read_stream("EVENTS").size() == 10; }, 30s, 500ms);
  if (!all) MESSAGE(walhook.log_tail());
  CHECK(all);
  std::string error;
  CHECK(test::eventually(
      [&] {
        error = s.value("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1", {std::to_string(untrusted)});
        return !error.empty();
      },
      30s));
  INFO(error);
  CHECK(error.find("TLS") != std::string::npos);
  CHECK(bad.read_stream("EVENTS").empty());
  CHECK(walhook.stop() == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a stalled nats+tls:// broker sent ~64 MiB never slows an HTTP endpoint, and the slot is not held") {
  // A TLS connection keeps nats.c's own threads: its TLS writes wait for the socket with no
  // deadline of their own, which on the engine's thread froze every endpoint while the server
  // stalled (the review reproduced it with the sink alone, publishing without pause). Through
  // walhook the freeze did not show here — the endpoint's attempts pass --max-hold-ms and it
  // stops publishing before the kernel's buffers fill — so this checks the TLS stall itself.
  const std::string dir = std::filesystem::temp_directory_path() / ("walhook-nats-tls-stall-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cert = test::make_test_certificate("IP:127.0.0.1,DNS:localhost");
  std::ofstream(dir + "/c.pem") << cert.certificate_pem;
  std::ofstream(dir + "/c.key") << cert.private_key_pem;
  test::nats_server nats(dir + "/c.pem", dir + "/c.key");
  nats.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_tls_stall");
  test::add_endpoint(s.db, "big", fmt::format("nats+tls://127.0.0.1:{}/events.x", nats.port()),
                     delivery::generate_secret(), {}, 1000);
  test::add_endpoint(s.db, "small", s.rcv->url("/fast"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--operator-tenant", "", "--ca-file", dir + "/c.pem", "--deadline-ms", "3000",
                                  "--max-in-flight", "2000"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  REQUIRE(::kill(nats.pid(), SIGSTOP) == 0);
  // ~64 MiB for the stalled broker: more than the kernel buffers (here up to 4 MiB to send and
  // 32 MiB to receive) hold.
  const std::string pad(64 * 1024, 'x');
  for (int i = 0; i < 1000; ++i)
    s.db.exec("SELECT walhook.publish('big', 'blob', jsonb_build_object('i', $1::int, 'pad', $2::text))",
              {std::to_string(i), pad});
  publish_n(s.db, 200, "small");
  const auto lsn = s.value("SELECT pg_current_wal_lsn()");
  CHECK(test::eventually([&] { return s.received("/fast").size() >= 200; }, 30s));
  CHECK(test::eventually([&] { return s.acknowledged(lsn); }, 30s));
  REQUIRE(::kill(nats.pid(), SIGCONT) == 0);
  const bool all = test::eventually([&] { return nats.read_stream("EVENTS").size() >= 1000; }, 120s, 2s);
  if (!all) MESSAGE(walhook.log_tail());
  CHECK(all);
  CHECK(walhook.stop() == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a Debezium-style outbox table, bridged, routed to JetStream by aggregatetype") {
  test::nats_server nats;
  nats.create_stream("OUTBOX", {"outbox.event.>"});
  test::scenario s("nats_debezium");
  s.db.exec("CREATE TABLE public.dbz_outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, "
            "type text NOT NULL, payload jsonb)");
  std::string out;
  REQUIRE(test::run_walhook({"migrate", "--database-url", s.url, "--slot", s.slot, "--outbox-table", "public.dbz_outbox",
                             "--preset", "debezium", "--tenant", "acme"},
                            out) == 0);
  // Debezium's outbox router's default topic is outbox.event.<aggregatetype>: the same here.
  test::add_endpoint(s.db, "acme", endpoint_url(nats, "outbox.event.{aggregate_type}"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--operator-tenant", ""});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  std::map<std::string, std::string> type_of;  // row id → aggregatetype
  for (int i = 0; i < 20; ++i) {
    const std::string agg = i % 2 ? "Order" : "Customer";
    const auto id = s.value("INSERT INTO public.dbz_outbox VALUES (gen_random_uuid(), $1, $2, $3, $4::jsonb) RETURNING id",
                            {agg, fmt::format("{}-{}", agg, i % 5), agg + "Updated", fmt::format(R"({{"i": {}}})", i)});
    type_of[id] = agg;
  }
  std::vector<test::nats_server::stored_message> stored;
  const bool all = test::eventually([&] { return (stored = nats.read_stream("OUTBOX")).size() >= 20; }, 30s, 500ms);
  if (!all) MESSAGE(walhook.log_tail());
  REQUIRE(all);
  for (const auto& m : stored) {
    INFO(m.msg_id);
    REQUIRE(type_of.contains(m.msg_id));  // the row's own id is the message id
    CHECK(m.subject == "outbox.event." + type_of[m.msg_id]);
    CHECK(header(m, "walhook-aggregate-type") == type_of[m.msg_id]);
    CHECK(header(m, "walhook-tenant-id") == "acme");
  }
  CHECK(stored.size() == 20);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("ordering = 'aggregate' holds over JetStream: each aggregate's events are stored in commit order") {
  test::nats_server nats;
  nats.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_order");
  test::add_endpoint(s.db, "t1", endpoint_url(nats, "events.{event_type}"), delivery::generate_secret(), {}, 16,
                     "aggregate");
  auto walhook = s.start_walhook({"--operator-tenant", ""});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  publish_n(s.db, 400, "t1");  // 7 aggregates, interleaved, one transaction each
  std::map<std::string, long long> seq_of;  // event id → outbox seq
  auto rows = s.db.exec("SELECT id, seq FROM walhook.outbox");
  for (int r = 0; r < rows.rows(); ++r) seq_of[std::string(rows.value(r, 0))] = std::stoll(std::string(rows.value(r, 1)));
  std::vector<test::nats_server::stored_message> stored;
  REQUIRE(test::eventually([&] { return (stored = nats.read_stream("EVENTS")).size() >= 400; }, 60s, 500ms));
  std::map<std::string, long long> last;  // aggregate → seq of its last stored event
  int out_of_order = 0;
  for (const auto& m : stored) {
    const auto agg = header(m, "walhook-aggregate-id");
    const auto seq = seq_of.at(m.msg_id);
    if (last.contains(agg) && last[agg] > seq) ++out_of_order;
    last[agg] = seq;
  }
  CHECK(last.size() == 7);
  CHECK(out_of_order == 0);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("dead brokers do not hold up another endpoint's connect; a URL change is not a failure") {
  test::nats_server a, b;
  a.create_stream("EVENTS", {"events.>"});
  b.create_stream("EVENTS", {"events.>"});
  test::scenario s("nats_starve");
  // Six endpoints of another tenant on addresses that never answer (or are unreachable).
  for (int i = 1; i <= 6; ++i)
    test::add_endpoint(s.db, "dead", fmt::format("nats://10.255.255.{}:4222/events.x", i), delivery::generate_secret());
  const auto healthy = test::add_endpoint(s.db, "t1", endpoint_url(a, "events.{event_type}"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--operator-tenant", ""});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  publish_n(s.db, 6, "dead");  // their connects start, and hang
  publish_n(s.db, 50, "t1");
  // The healthy endpoint connects and gets its events while the others still try: no attempt failed.
  CHECK(test::eventually([&] { return a.read_stream("EVENTS").size() == 50; }, 4s, 200ms));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", {std::to_string(healthy)}) == "0");

  // The operator moves the endpoint to another server while events stream: nothing fails, nothing is lost.
  test::publisher pub({.url = s.url, .tenants = {"t1"}, .rate_per_second = 200, .total = 600});
  pub.start();
  std::this_thread::sleep_for(1s);
  s.db.exec("UPDATE walhook.endpoints SET url = $1 WHERE id = $2",
            pg::params{endpoint_url(b, "events.{event_type}"), std::to_string(healthy)});
  REQUIRE(pub.join(30s));
  std::set<std::string> got;
  const bool all = test::eventually(
      [&] {
        got.clear();
        for (auto* server : {&a, &b})
          for (const auto& m : server->read_stream("EVENTS")) got.insert(m.msg_id);
        return got.size() >= 650;
      },
      30s, 500ms);
  if (!all) MESSAGE(walhook.log_tail());
  CHECK(got.size() == 650);
  CHECK(b.read_stream("EVENTS").size() > 0);
  const auto failed = s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", {std::to_string(healthy)});
  if (failed != "0")
    MESSAGE(fmt::format("{}\n{}",
                        s.value("SELECT string_agg(format('%s attempts=%s %s', status, attempts, last_error), "
                                "E'\\n') FROM walhook.deliveries WHERE endpoint_id = $1",
                                {std::to_string(healthy)}),
                        walhook.log_tail()));
  CHECK(failed == "0");
  CHECK(walhook.stop() == 0);
}
