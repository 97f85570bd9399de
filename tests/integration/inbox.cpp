// The receiving half (issue 21): `walhook ingest` verifies, dedupes and commits before it
// answers; `walhook run` then delivers each inbox event to the source's destination. Real
// PostgreSQL, real sockets, real processes: a sender retrying concurrently, a reused id, every
// refusal, kill -9 of ingest and a PostgreSQL stop under load (no 2xx without a durable row),
// the SQL kit's claim_once under concurrency and rollback, and what the application's role can
// do with the inbox's tenant.

#include "tests/integration/inbox_support.hpp"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

using namespace walhook;
using namespace std::chrono_literals;
using namespace walhook::test::inbox;

TEST_CASE("ingest: accepted once after COMMIT, duplicates answered 2xx, a reused id is 409, refusals never written") {
  inbox_setup s("inbox_contract");
  s.add_source("partner", {"--order-key", "/data/order"});
  ingest_process ingest(s.url, {"--metrics-listen", "127.0.0.1:0"});
  const auto port = ingest.port();
  REQUIRE(port != 0);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  // One event: 200 accepted, one inbox row, one outbox event of the inbox tenant, one delivery.
  const auto first = event_body("order.paid", "o1");
  auto a = post(port, "/in/partner", s.partner.headers("msg_1", first), first);
  INFO(a.body);
  INFO(ingest.p.log_tail());
  CHECK(a.status == 200);
  CHECK(a.body.find("accepted") != std::string::npos);
  CHECK(s.count("SELECT count(*) FROM walhook.inbox WHERE source = 'partner' AND event_id = 'msg_1'") == 1);
  CHECK(s.value("SELECT event_type || ' ' || aggregate_id || ' ' || by_walhook FROM walhook.outbox "
                "WHERE tenant_id = 'inbox:partner'") == "order.paid o1 true");
  REQUIRE(test::eventually([&] { return s.received("/partner").size() == 1; }, 20s));
  const auto delivered = s.received("/partner").front().body;
  CHECK(delivered.find(R"("event_id": "msg_1")") != std::string::npos);
  CHECK(delivered.find(R"("order": "o1")") != std::string::npos);  // the sender's body, inside

  // A sender retrying the same event 10 times at once: one row, ten 2xx, one handler call.
  const auto second = event_body("order.shipped", "o1");
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 10; ++i)
    threads.emplace_back([&] {
      if (post(port, "/in/partner", s.partner.headers("msg_2", second), second).status == 200) ++ok;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 10);
  CHECK(s.count("SELECT count(*) FROM walhook.inbox WHERE event_id = 'msg_2'") == 1);
  CHECK(s.count("SELECT duplicates FROM walhook.inbox WHERE event_id = 'msg_2'") == 9);
  REQUIRE(test::eventually([&] { return s.received("/partner").size() >= 2; }, 20s));
  std::this_thread::sleep_for(500ms);
  CHECK(s.received("/partner").size() == 2);

  // The same id with another body: 409, kept aside, an alert in the log; never a duplicate.
  const auto forged = event_body("order.shipped", "o2");
  a = post(port, "/in/partner", s.partner.headers("msg_2", forged), forged);
  CHECK(a.status == 409);
  CHECK(s.count("SELECT count(*) FROM walhook.inbox_key_reuse WHERE event_id = 'msg_2'") == 1);
  CHECK(test::eventually([&] { return ingest.p.count_in_log("inbox.key_reused") == 1; }, 5s));

  // Refusals: counted, answered, never written.
  const auto rows = s.count("SELECT count(*) FROM walhook.inbox");
  const auto body = event_body("order.paid", "o3");
  CHECK(post(port, "/in/nobody", s.partner.headers("msg_3", body), body).status == 404);
  auto tampered = s.partner.headers("msg_3", body);
  CHECK(post(port, "/in/partner", tampered, event_body("order.paid", "o4")).status == 401);  // body changed
  sender stranger;
  CHECK(post(port, "/in/partner", stranger.headers("msg_3", body), body).status == 401);  // wrong secret
  const auto old = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count() - 3600;
  CHECK(post(port, "/in/partner", s.partner.headers("msg_3", body, old), body).status == 401);  // stale
  CHECK(post(port, "/in/partner", {{"webhook-id", "msg_3"}}, body).status == 401);                // headers missing
  const std::string not_json = "order=o3";
  CHECK(post(port, "/in/partner", s.partner.headers("msg_3", not_json), not_json).status == 400);
  const std::string huge = fmt::format(R"({{"type":"x","data":{{"pad":"{}"}}}})", std::string(2 << 20, 'a'));
  CHECK(post(port, "/in/partner", s.partner.headers("msg_3", huge), huge).status == 413);
  CHECK(s.count("SELECT count(*) FROM walhook.inbox") == rows);

  // /metrics (its own listener) counts each outcome; an unknown name is counted without it.
  std::smatch m;
  const auto log = ingest.p.log();
  REQUIRE(std::regex_search(log, m, std::regex(R"("metrics_port":(\d+))")));
  const auto metrics = test::http_get(static_cast<unsigned short>(std::stoi(m[1])), "/metrics");
  INFO(metrics.second);
  CHECK(metrics.second.find(R"(walhook_inbox_requests_total{source="partner",outcome="accepted"} 2)") != std::string::npos);
  CHECK(metrics.second.find(R"(walhook_inbox_requests_total{source="partner",outcome="duplicate"} 9)") != std::string::npos);
  CHECK(metrics.second.find(R"(walhook_inbox_requests_total{source="",outcome="unknown_source"} 1)") != std::string::npos);
  CHECK(metrics.second.find(R"(outcome="bad_signature"} 2)") != std::string::npos);
  CHECK(metrics.second.find(R"(outcome="too_large"} 1)") != std::string::npos);
  CHECK(metrics.second.find("nobody") == std::string::npos);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("no 2xx without a durable row: ingest killed and PostgreSQL stopped under load; retries are accepted once") {
  inbox_setup s("inbox_crash");
  s.add_source("load");
  auto ingest = std::make_unique<ingest_process>(s.url);
  std::atomic<unsigned short> port{ingest->port()};
  REQUIRE(port != 0);

  // Four senders, each retrying its event until it gets a 2xx (as a real sender does).
  std::mutex m;
  std::set<std::string> answered_2xx;
  std::atomic<bool> stop{false};
  std::atomic<long> failures{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t)
    senders.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        const auto id = fmt::format("evt_{}_{}", t, i);
        const auto body = event_body("load.tick", fmt::format("k{}", i % 7), i);
        for (;;) {
          auto r = post(port, "/in/load", s.partner.headers(id, body), body);
          if (r.status == 200) {
            std::lock_guard lock(m);
            answered_2xx.insert(id);
            break;
          }
          ++failures;
          std::this_thread::sleep_for(50ms);
          if (stop) return;
        }
      }
    });
  std::this_thread::sleep_for(1500ms);
  ingest->p.kill9();  // mid-stream: requests in flight get no answer, and are retried
  ingest = std::make_unique<ingest_process>(s.url);
  port = ingest->port();
  std::this_thread::sleep_for(1500ms);
  REQUIRE(test::cluster().stop("immediate"));  // PostgreSQL crashes under load
  std::this_thread::sleep_for(1000ms);
  REQUIRE(test::cluster().start());
  std::this_thread::sleep_for(3000ms);
  stop = true;
  for (auto& t : senders) t.join();

  relay::blocking_db db(s.url);
  const long rows = std::stol(test::query_value(db, "SELECT count(*) FROM walhook.inbox WHERE source = 'load'"));
  std::set<std::string> stored;
  auto r = db.exec("SELECT event_id FROM walhook.inbox WHERE source = 'load'");
  for (int i = 0; i < r.rows(); ++i) stored.insert(std::string(r.value(i, 0)));
  std::size_t missing = 0;
  for (const auto& id : answered_2xx) missing += stored.contains(id) ? 0 : 1;
  MESSAGE(fmt::format("{} events answered 2xx, {} rows, {} failed attempts retried", answered_2xx.size(), rows,
                      failures.load()));
  CHECK(answered_2xx.size() > 100);
  CHECK(failures > 0);    // the faults were felt
  CHECK(missing == 0);    // every 2xx has its row
  CHECK(std::stol(test::query_value(db, "SELECT count(*) FROM walhook.outbox WHERE tenant_id = 'inbox:load'")) == rows);
  CHECK(ingest->p.stop() == 0);
}

TEST_CASE("claim_once: one 'first' between racing consumers, and a rollback takes the mark with it") {
  test::scenario s("inbox_claim");
  relay::blocking_db a(s.url), b(s.url);
  a.exec("BEGIN");
  CHECK(test::query_value(a, "SELECT walhook.claim_once('billing', 'evt_1', '\\x01'::bytea)") == "first");
  // b races on the same event: it waits for a's transaction, then sees a's mark.
  std::string second;
  std::thread racer([&] {
    b.exec("BEGIN");
    second = test::query_value(b, "SELECT walhook.claim_once('billing', 'evt_1', '\\x01'::bytea)");
    b.exec("COMMIT");
  });
  std::this_thread::sleep_for(300ms);
  a.exec("COMMIT");
  racer.join();
  CHECK(second == "duplicate");
  CHECK(test::query_value(a, "SELECT walhook.claim_once('billing', 'evt_1', '\\x02'::bytea)") == "conflict");
  CHECK(test::query_value(a, "SELECT walhook.claim_once('shipping', 'evt_1', '\\x01'::bytea)") == "first");

  // The effect rolls back: so does the mark, and the next attempt is 'first' again.
  a.exec("BEGIN");
  CHECK(test::query_value(a, "SELECT walhook.claim_once('billing', 'evt_2')") == "first");
  a.exec("ROLLBACK");
  CHECK(test::query_value(a, "SELECT walhook.claim_once('billing', 'evt_2')") == "first");

  // A racer whose first claimer rolls back gets 'first'.
  a.exec("BEGIN");
  CHECK(test::query_value(a, "SELECT walhook.claim_once('billing', 'evt_3')") == "first");
  std::thread racer2([&] { second = test::query_value(b, "SELECT walhook.claim_once('billing', 'evt_3')"); });
  std::this_thread::sleep_for(300ms);
  a.exec("ROLLBACK");
  racer2.join();
  CHECK(second == "first");
}

TEST_CASE("only walhook writes inbox events: the application cannot forge a verified webhook") {
  test::scenario s("inbox_trust");
  // publish() and a direct INSERT into an inbox tenant both fail (by_walhook is walhook's alone).
  CHECK_THROWS(s.db.exec("SELECT walhook.publish('inbox:partner', 'order.paid', '{}')"));
  CHECK_THROWS(s.db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload) VALUES ('Inbox:partner', 'x', '{}')"));
  // A role of the application cannot call the ingest server's function.
  s.db.exec("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'inbox_stranger') THEN "
            "CREATE ROLE inbox_stranger LOGIN PASSWORD 'x'; END IF; END $$");
  s.db.exec("GRANT USAGE ON SCHEMA walhook TO inbox_stranger");
  s.db.exec("SET ROLE inbox_stranger");
  CHECK_THROWS(s.db.exec("SELECT walhook.inbox_accept('partner', 'e', '\\x00'::bytea, 't', NULL, '{}', '{}')"));
  s.db.exec("RESET ROLE");
  CHECK(s.value("SELECT count(*) FROM walhook.inbox") == "0");
}

TEST_CASE("retention: old inbox rows, reuse evidence and claim_once marks go; a row whose event is still there stays") {
  inbox_setup s("inbox_retention");
  s.add_source("partner");
  const auto accept = [&](const std::string& id) {
    return s.value("SELECT walhook.inbox_accept('partner', $1::text, sha256(convert_to($1::text, 'UTF8')), 't.x', NULL, '{}', '{}')", {id});
  };
  REQUIRE(accept("gone") == "accepted");  // its event delivered and expired: the row may go
  REQUIRE(accept("owed") == "accepted");  // its event still in the outbox: the row stays
  REQUIRE(accept("fresh") == "accepted");
  s.db.exec("DELETE FROM walhook.outbox WHERE id = (SELECT outbox_id FROM walhook.inbox WHERE event_id = 'gone')");
  s.db.exec("UPDATE walhook.inbox SET received_at = now() - interval '40 days' WHERE event_id IN ('gone', 'owed')");
  s.db.exec("INSERT INTO walhook.inbox_key_reuse (source, event_id, fingerprint, body, received_at) "
            "VALUES ('partner', 'gone', '\\x00', '{}', now() - interval '40 days')");
  s.db.exec("INSERT INTO walhook.processed_events (consumer, event_id, processed_at) VALUES "
            "('billing', 'old', now() - interval '40 days'), ('billing', 'new', now())");
  auto walhook = s.start_walhook();
  const bool gone = test::eventually([&] { return s.value("SELECT count(*) FROM walhook.inbox WHERE event_id = 'gone'") == "0"; }, 30s);
  if (!gone) MESSAGE(walhook.log_tail());
  REQUIRE(gone);
  CHECK(s.value("SELECT string_agg(event_id, ',' ORDER BY event_id) FROM walhook.inbox") == "fresh,owed");
  CHECK(s.value("SELECT count(*) FROM walhook.inbox_key_reuse") == "0");
  CHECK(s.value("SELECT string_agg(event_id, ',') FROM walhook.processed_events") == "new");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("walhook to walhook: one walhook's delivery is another's verified inbox event, delivered to its handler") {
  inbox_setup s("inbox_chain");
  s.add_source("upstream", {"--order-key", "/data/order"});  // the sender's secret is s.partner's
  ingest_process ingest(s.url);
  const auto port = ingest.port();
  REQUIRE(port != 0);
  // The sending side: an endpoint whose URL is the ingest server, signing with the source's secret.
  test::add_endpoint(s.db, "shop", fmt::format("http://127.0.0.1:{}/in/upstream", port), s.partner.secret);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const auto id = s.publish("shop", "order.paid", R"({"order": "o-7", "total": 42})");
  REQUIRE(test::eventually([&] { return s.received("/upstream").size() == 1; }, 30s));
  const auto got = s.received("/upstream").front();
  CHECK(got.body.find(fmt::format(R"("event_id": "{}")", id)) != std::string::npos);  // the first walhook's id
  CHECK(got.body.find(R"("total": 42)") != std::string::npos);
  CHECK(s.value("SELECT aggregate_id FROM walhook.outbox WHERE tenant_id = 'inbox:upstream'") == "o-7");
  CHECK(s.value("SELECT count(*) FROM walhook.inbox WHERE source = 'upstream'") == "1");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("inbox source add/update: refusals in words, a rotation or a change never breaks the stored source") {
  inbox_setup s("inbox_admin");
  std::string out;
  const auto walhook_cli = [&](std::vector<std::string> a) {
    a.insert(a.begin() + 3, {"--database-url", s.url});
    return test::run_walhook(a, out);
  };
  const std::string dest = fmt::format("http://127.0.0.1:{}/h", s.rcv->port());
  // A secret with a blank would be stored as two shorter secrets, each accepted: refused.
  CHECK(walhook_cli({"inbox", "source", "add", "--name", "gh", "--scheme", "github", "--secret", "abc def",
                     "--destination", dest}) != 0);
  CHECK(out.find("without spaces") != std::string::npos);
  CHECK(walhook_cli({"inbox", "source", "add", "--name", "gh", "--scheme", "github", "--secret", "s3cret",
                     "--destination", "notaurl"}) != 0);
  CHECK(out.find("source: gh") == std::string::npos);  // nothing printed as added
  CHECK(walhook_cli({"inbox", "source", "add", "--name", "gh", "--scheme", "github", "--secret", "s3cret",
                     "--tolerance-s", "100000", "--destination", dest}) != 0);
  CHECK(out.find("--tolerance-s") != std::string::npos);
  // The generic scheme with a signed timestamp, then changed flag by flag.
  REQUIRE(walhook_cli({"inbox", "source", "add", "--name", "carrier", "--scheme", "hmac-sha256", "--secret", "k1",
                       "--signature-header", "X-Sig", "--signed-content", "timestamp.body", "--timestamp-header",
                       "X-Ts", "--id-from", "/event/id", "--destination", dest}) == 0);
  REQUIRE(walhook_cli({"inbox", "source", "add", "--name", "carrier", "--scheme", "github", "--secret", "k",
                       "--destination", dest}) != 0);
  CHECK(out.find("exists") != std::string::npos);
  INFO(out);
  CHECK(walhook_cli({"inbox", "source", "update", "--name", "carrier", "--secret", "k2"}) == 0);  // rotation alone
  CHECK(walhook_cli({"inbox", "source", "update", "--name", "carrier", "--tolerance-s", "60"}) == 0);
  CHECK(s.value("SELECT secret || ' ' || tolerance_s FROM walhook.inbox_sources WHERE name = 'carrier'") == "k2 k1 60");
  CHECK(walhook_cli({"inbox", "source", "update", "--name", "carrier", "--signed-content", "body"}) == 0);
  CHECK(s.value("SELECT coalesce(timestamp_header, 'none') FROM walhook.inbox_sources WHERE name = 'carrier'") == "none");
  // An order key given later orders every destination, old and new.
  CHECK(walhook_cli({"inbox", "source", "update", "--name", "carrier", "--order-key", "/event/shipment",
                     "--add-destination", dest + "2"}) == 0);
  CHECK(s.value("SELECT string_agg(DISTINCT ordering, ',') FROM walhook.endpoints WHERE tenant_id = 'inbox:carrier'") ==
        "aggregate");
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints WHERE tenant_id = 'inbox:carrier'") == "2");
}

TEST_CASE("ingest: a body jsonb refuses is kept as text, never refused; a removed source answers 404 at once; malformed requests get 431/400") {
  inbox_setup s("inbox_edges");
  s.add_source("partner");
  ingest_process ingest(s.url);
  const auto port = ingest.port();
  REQUIRE(port != 0);
  const std::string nul = R"({"type":"odd.event","data":{"text":"a\u0000b"}})";
  auto a = post(port, "/in/partner", s.partner.headers("msg_nul", nul), nul);
  INFO(a.body);
  CHECK(a.status == 200);
  CHECK(s.value("SELECT payload->>'body_text' FROM walhook.outbox WHERE tenant_id = 'inbox:partner'") == nul);
  // Removed: the next request is refused even before the server reads the sources again.
  std::string out;
  REQUIRE(test::run_walhook({"inbox", "source", "remove", "--database-url", s.url, "--name", "partner"}, out) == 0);
  const auto body = event_body("order.paid", "o9");
  CHECK(post(port, "/in/partner", s.partner.headers("msg_9", body), body).status == 404);
  CHECK(s.value("SELECT count(*) FROM walhook.inbox WHERE event_id = 'msg_9'") == "0");
  // Malformed requests are answered, not dropped: a header over 16 KiB is 431, garbage is 400;
  // the server goes on serving.
  CHECK(raw_exchange(port, "POST /in/partner HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n") ==
        "HTTP/1.1 431 Request Header Fields Too Large");
  CHECK(raw_exchange(port, "HELLO THERE\r\n\r\n") == "HTTP/1.1 400 Bad Request");
  CHECK(raw_exchange(port, "POST /in/partner HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n") ==
        "HTTP/1.1 413 Payload Too Large");
  CHECK(raw_exchange(port, "POST /in/partner HTTP/1.1\r\nHost x\r\n\r\n") == "HTTP/1.1 400 Bad Request");
  CHECK(post(port, "/in/partner", s.partner.headers("msg_10", body), body).status == 404);
}

TEST_CASE("ingest: one client cannot take every connection (--max-connections-per-client); its next one is served once one closes") {
  inbox_setup s("inbox_per_client");
  s.add_source("partner");
  ingest_process ingest(s.url, {"--max-connections-per-client", "2"});
  const auto port = ingest.port();
  REQUIRE(port != 0);
  boost::asio::io_context ioc;
  auto open = [&] {
    auto socket = std::make_unique<boost::asio::ip::tcp::socket>(ioc);
    socket->connect({boost::asio::ip::make_address("127.0.0.1"), port});
    return socket;
  };
  const auto opened = std::chrono::steady_clock::now();
  auto first = open();
  auto second = open();
  const auto body = event_body("order.paid", "o1");
  // The third connection of this address is closed before anything is read: no answer, no row.
  const auto signed_request = [&](const std::string& id) {
    std::string head = "POST /in/partner HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
    for (const auto& [k, v] : s.partner.headers(id, body)) head += k + ": " + v + "\r\n";
    return head + fmt::format("Content-Length: {}\r\nConnection: close\r\n\r\n", body.size()) + body;
  };
  const auto refused = raw_exchange(port, signed_request("evt_refused"));
  CHECK_MESSAGE(refused.find("HTTP/") == std::string::npos, refused);  // closed ("" or a reset), never answered
  CHECK(s.count("SELECT count(*) FROM walhook.inbox") == 0);
  CHECK(test::eventually([&] { return ingest.p.count_in_log("\"ingest.client_connection_cap\"") == 1; }, 5s));
  // One closes: the client is served again — at once, not when the server's 10 s read deadline
  // would have closed the idle connections anyway.
  first->close();
  CHECK(test::eventually([&] { return raw_exchange(port, signed_request("evt_1")) == "HTTP/1.1 200 OK"; }, 3s));
  CHECK(std::chrono::steady_clock::now() - opened < 9s);
  CHECK(s.count("SELECT count(*) FROM walhook.inbox") == 1);
  second->close();
}
