// The admin API of `walhook run --admin-listen` (docs/api.md, relay/admin/api.hpp) over real
// HTTP against a real walhook, PostgreSQL and receiver: its access rules (401, 403, 415, a
// non-loopback address refused without a token), the reads (endpoints worst-first, "did
// endpoint X get event Y?" for a first-try success that left no row), the actions (pause,
// resume, resend with the same webhook-id, replay of a dead letter), HEAD, the console's
// redirect and pages, and 503 from /api while PostgreSQL is down with /healthz still answering.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"
#include "tests/support/http_call.hpp"
#include "tests/support/scripted_http_server.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <thread>
#include <vector>

#include <sys/stat.h>

using namespace walhook;
using namespace std::chrono_literals;
using walhook::test::call;
using walhook::test::http_answer;
using walhook::test::raw_exchange;

namespace {

std::string publish(relay::blocking_db& db, const std::string& tenant) {
  pg::params p{tenant, "order.paid", R"({"n":1})"};
  return test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", p);
}

}  // namespace

TEST_CASE("admin API: access, reads, actions, HEAD, console, and PostgreSQL down") {
  test::scenario s("admin_api");
  const auto good = test::add_endpoint(s.db, "good", s.rcv->url("/good"), delivery::generate_secret());
  const auto bad = test::add_endpoint(s.db, "bad", s.rcv->url("/bad"), delivery::generate_secret());
  const auto dl = test::add_endpoint(s.db, "dl", s.rcv->url("/dl"), delivery::generate_secret());
  relay::receiver_behaviour failing;
  failing.status = 500;
  s.rcv->set_behaviour("/bad", failing);
  relay::receiver_behaviour too_large;  // 413 ends a delivery dead at once; then 200
  too_large.script = {413};
  s.rcv->set_behaviour("/dl", too_large);

  const std::string token = "t0k-" + delivery::generate_secret().substr(6, 20);
  const std::string token_file = fmt::format("/tmp/walhook_it_admin_token_{}", ::getpid());
  std::ofstream(token_file) << token << "\n";
  const std::map<std::string, std::string> auth{{"Authorization", "Bearer " + token}};
  auto json_post = auth;
  json_post["Content-Type"] = "application/json";

  // "localhost:0": the name is resolved (loopback), the port is any free one.
  auto walhook = s.start_walhook(
      {"--admin-listen", "localhost:0", "--admin-token-file", token_file, "--breaker-threshold", "1000"});
  INFO(walhook.log_tail(6000));
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"replication.streaming\"") == 1; }, 30s));
  const auto port = walhook.admin_port();
  REQUIRE(port != 0);
  simdjson::dom::parser parser;

  // --- access
  CHECK(call(port, "GET", "/api/overview").status == 401);
  CHECK(call(port, "GET", "/api/overview", {{"Authorization", "Bearer wrong"}}).status == 401);
  {
    auto a = call(port, "GET", "/api/overview", auth);
    REQUIRE(a.status == 200);
    CHECK(a.headers["Cache-Control"] == "no-store");
    simdjson::dom::element doc = parser.parse(a.body);
    CHECK(bool(doc["streaming"]) == true);
    CHECK(std::string_view(doc["slot"]) == s.slot);
    CHECK(doc["recent_outcomes"]["capacity"].get_int64().value() == 100000);
    CHECK(std::string_view(doc["database"]) == "ok");
  }
  // The probes stay open; the scraper needs the token (Prometheus: authorization.credentials_file).
  CHECK(call(port, "GET", "/healthz").status == 200);
  CHECK(call(port, "HEAD", "/metrics").status == 401);
  {
    auto h = call(port, "HEAD", "/metrics", auth);
    CHECK(h.status == 200);
    CHECK(h.body.empty());
    CHECK(std::stoul(h.headers["Content-Length"]) > 100);
    CHECK(call(port, "HEAD", "/healthz").status == 200);
  }
  // The console: / redirects, the pages load without a token.
  {
    auto r = call(port, "GET", "/");
    CHECK(r.status == 302);
    CHECK(r.headers["Location"] == "/console/");
    auto page = call(port, "GET", "/console/");
    CHECK(page.status == 200);
    CHECK(page.headers["Content-Type"].starts_with("text/html"));
    CHECK(page.body.find("<html") != std::string::npos);
    CHECK(call(port, "GET", "/console/no-such-file.js").status == 404);
  }
  // Not frameable by another site (clickjacking), only its own files, no sniffing, no Referer:
  // on the console's files and the API's answers alike.
  for (const auto& [target, headers] : std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"/console/", {}}, {"/console/app.js", {}}, {"/api/overview", auth}, {"/api/overview", {}}}) {
    INFO(target);
    auto a = call(port, "GET", target, headers);
    CHECK(a.headers["Content-Security-Policy"].find("frame-ancestors 'none'") != std::string::npos);
    CHECK(a.headers["Content-Security-Policy"].find("default-src 'self'") != std::string::npos);
    CHECK(a.headers["Content-Security-Policy"].find("unsafe-inline") == std::string::npos);
    CHECK(a.headers["X-Frame-Options"] == "DENY");
    CHECK(a.headers["X-Content-Type-Options"] == "nosniff");
    CHECK(a.headers["Referrer-Policy"] == "no-referrer");
  }
  // The probes ignore a query string as /api does; their text says its charset.
  for (const char* target : {"/healthz?x", "/metrics?x", "/readyz?x"}) {
    INFO(target);
    auto a = call(port, "GET", target, auth);
    CHECK(a.status == 200);
    CHECK(a.headers["Content-Type"].find("charset=utf-8") != std::string::npos);
  }
  CHECK(call(port, "GET", "/nowhere").headers["Content-Type"] == "text/plain; charset=utf-8");
  // A request Beast refuses gets a short answer before the close, not a bare reset.
  {
    auto big_header = call(port, "GET", "/healthz", {{"X-Big", std::string(20000, 'a')}});
    CHECK(big_header.status == 431);
    auto big_body = call(port, "POST", "/api/endpoints/1/pause", json_post, std::string(2 * 1024 * 1024, ' '));
    CHECK(big_body.status == 413);
    CHECK(big_body.body.find("too large") != std::string::npos);
    auto malformed = raw_exchange(port, "GARBAGE\r\n\r\n");
    CHECK(malformed.starts_with("HTTP/1.1 400"));
  }

  // A non-loopback address without a token: refused before anything starts, naming the flag.
  {
    auto refused = s.start_walhook({"--admin-listen", "0.0.0.0:0"}, "refused");
    CHECK(refused.wait(20s) == 1);
    CHECK(refused.log().find("--admin-token-file") != std::string::npos);
  }

  // --- "did endpoint X get event Y?" for a first-try success: no row (--record failed), yet an answer
  const auto e1 = publish(s.db, "good");
  REQUIRE(test::eventually([&] { return s.rcv->count("/good") == 1; }, 10s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE event_id = $1", {e1}) == "0");
  {
    simdjson::dom::element doc;
    REQUIRE(test::eventually(
        [&] {
          auto a = call(port, "GET", "/api/events/" + e1, auth);
          if (a.status != 200) return false;
          doc = parser.parse(a.body);
          return doc["endpoints"].get_array().size() == 1;
        },
        5s));
    CHECK(std::string_view(doc["event"]["id"]) == e1);
    CHECK(doc["event"]["endpoint_id"].is_null());
    auto ep = doc["endpoints"].at(0);
    CHECK(ep["endpoint_id"].get_int64().value() == good);
    CHECK(bool(ep["routed"]));
    CHECK(ep["delivery"].is_null());
    CHECK(std::string_view(ep["verdict"]) == "delivered");
    auto outcome = ep["recent_outcomes"].at(0);
    CHECK(outcome["http_status"].get_int64().value() == 200);
    CHECK(std::string_view(outcome["outcome"]) == "2xx");
    CHECK(std::string_view(outcome["result"]) == "delivered");
    CHECK(outcome["attempt"].get_int64().value() == 1);
  }
  CHECK(call(port, "GET", "/api/events/not-a-uuid", auth).status == 400);
  CHECK(call(port, "GET", "/api/events/00000000-0000-0000-0000-000000000000", auth).status == 404);

  // --- worst first: the failing endpoint with old pending deliveries leads
  publish(s.db, "bad");
  publish(s.db, "bad");
  pg::params bad_id{std::to_string(bad)};
  REQUIRE(test::eventually(
      [&] {
        return s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending' AND attempts > 0",
                       bad_id) == "2";
      },
      15s));
  {
    auto a = call(port, "GET", "/api/endpoints", auth);
    REQUIRE(a.status == 200);
    simdjson::dom::element doc = parser.parse(a.body);
    auto list = doc["endpoints"].get_array();
    REQUIRE(list.size() == 3);
    auto first = list.at(0);
    CHECK(first["id"].get_int64().value() == bad);
    CHECK(first["oldest_pending_age_s"].get_double().value() > 0);
    CHECK(first["pending"].get_int64().value() + first["sending"].get_int64().value() == 2);
    CHECK(first["consecutive_failures"].get_int64().value() >= 1);
    CHECK(first["last_status"].get_int64().value() == 500);
    CHECK(std::string_view(first["secret_fingerprints"]).starts_with("sha256:"));
    CHECK(a.body.find("whsec_") == std::string::npos);  // never a secret
    CHECK(list.at(1)["oldest_pending_age_s"].is_null());
    CHECK(list.at(1)["disabled_reason"].is_null());
  }
  CHECK(call(port, "GET", "/api/endpoints/999999", auth).status == 404);

  // --- actions: POST needs JSON, then pause and resume change walhook.endpoints
  pg::params good_id{std::to_string(good)};
  CHECK(call(port, "POST", fmt::format("/api/endpoints/{}/pause", good), auth, "{}").status == 415);
  CHECK(s.value("SELECT status FROM walhook.endpoints WHERE id = $1", good_id) == "active");
  CHECK(call(port, "GET", fmt::format("/api/endpoints/{}/pause", good), auth).status == 405);
  {
    auto by_alice = json_post;
    by_alice["X-Walhook-Operator"] = "alice%20Zo%C3%AB";  // the console percent-encodes the name
    auto a = call(port, "POST", fmt::format("/api/endpoints/{}/pause", good), by_alice, "{}");
    REQUIRE(a.status == 200);
    simdjson::dom::element doc = parser.parse(a.body);
    CHECK(std::string_view(doc["action"]) == "paused");
    CHECK(doc["endpoint_id"].get_int64().value() == good);
    CHECK(s.value("SELECT status FROM walhook.endpoints WHERE id = $1", good_id) == "paused");
    CHECK(test::eventually([&] { return walhook.count_in_log("\"admin.action\"") == 1; }, 5s));
    CHECK(walhook.log().find("\"by\":\"alice Zoë\"") != std::string::npos);
    auto r = call(port, "POST", fmt::format("/api/endpoints/{}/resume", good), json_post, "");
    REQUIRE(r.status == 200);
    CHECK(s.value("SELECT status FROM walhook.endpoints WHERE id = $1", good_id) == "active");
  }
  CHECK(call(port, "POST", "/api/endpoints/999999/pause", json_post, "{}").status == 404);

  // --- resume clears the last error: a healed endpoint does not show its old one as current.
  // Paused first, so no attempt succeeds (and writes its health) before the resume does.
  {
    REQUIRE(call(port, "POST", fmt::format("/api/endpoints/{}/pause", bad), json_post, "{}").status == 200);
    REQUIRE(s.value("SELECT last_error FROM walhook.endpoint_health WHERE endpoint_id = $1", bad_id) == "HTTP 500");
    s.rcv->set_behaviour("/bad", relay::receiver_behaviour{});  // healthy: 200
    auto r = call(port, "POST", fmt::format("/api/endpoints/{}/resume", bad), json_post, "{}");
    REQUIRE(r.status == 200);
    simdjson::dom::element change = parser.parse(r.body);
    CHECK(std::string_view(change["note"]).find("its last error, from before the resume, is cleared: HTTP 500") !=
          std::string_view::npos);
    simdjson::dom::element healed;
    bool clear = test::eventually(
        [&] {
          auto a = call(port, "GET", fmt::format("/api/endpoints/{}", bad), auth);
          if (a.status != 200) return false;
          healed = parser.parse(a.body);
          return healed["pending"].get_int64().value() + healed["sending"].get_int64().value() == 0 &&
                 healed["following_outbox_since"].is_null();
        },
        20s);
    REQUIRE(clear);
    CHECK(healed["last_error"].is_null());
    CHECK(healed["last_status"].is_null());
    CHECK(healed["consecutive_failures"].get_int64().value() == 0);
    CHECK(std::string_view(healed["status"]) == "active");
  }

  // --- resend: the receiver gets the same webhook-id a second time
  {
    auto a = call(port, "POST", "/api/deliveries/resend", json_post,
                  fmt::format(R"({{"endpoint_id": {}, "event_id": "{}"}})", good, e1));
    REQUIRE(a.status == 200);
    CHECK(a.body.find("\"resent\"") != std::string::npos);
    REQUIRE(test::eventually([&] { return s.rcv->count("/good") == 2; }, 15s));
    auto got = s.received("/good");
    REQUIRE(got.size() == 2);
    CHECK(got[0].webhook_id == e1);
    CHECK(got[1].webhook_id == e1);
    CHECK(call(port, "POST", "/api/deliveries/resend", json_post, R"({"endpoint_id": 1})").status == 400);
  }

  // --- replay of a dead letter
  const auto d1 = publish(s.db, "dl");
  pg::params dl_id{std::to_string(dl)};
  REQUIRE(test::eventually(
      [&] { return s.value("SELECT status FROM walhook.deliveries WHERE endpoint_id = $1", dl_id) == "dead"; }, 15s));
  {
    auto one = call(port, "GET", fmt::format("/api/endpoints/{}", dl), auth);
    REQUIRE(one.status == 200);
    simdjson::dom::element doc = parser.parse(one.body);
    CHECK(doc["dead"].get_int64().value() == 1);
    REQUIRE(doc["dead_letters"].get_array().size() == 1);
    CHECK(std::string_view(doc["dead_letters"].at(0)["event_id"]) == d1);
    CHECK(doc["dead_letters"].at(0)["last_status"].get_int64().value() == 413);
    CHECK(doc["deliveries"].get_array().size() == 1);
    CHECK(std::string_view(doc["ordering"]) == "none");
    CHECK(doc["event_types"].is_null());
    CHECK(std::string_view(doc["recent_outcomes"].at(0)["result"]) == "dead");
    // A misspelt filter must not widen the action to every dead letter.
    auto typo = call(port, "POST", fmt::format("/api/endpoints/{}/replay", dl), json_post, R"({"sinc": "2030-01-01"})");
    CHECK(typo.status == 400);
    CHECK(typo.body.find(R"(unknown member \"sinc\")") != std::string::npos);
    CHECK(s.value("SELECT status FROM walhook.deliveries WHERE endpoint_id = $1", dl_id) == "dead");
    auto r = call(port, "POST", fmt::format("/api/endpoints/{}/replay", dl), json_post, R"({"since": null, "until": null})");
    REQUIRE(r.status == 200);
    simdjson::dom::element replayed = parser.parse(r.body);
    CHECK(replayed["replayed"].get_int64().value() == 1);
    CHECK(test::eventually([&] { return walhook.log().find(R"("action":"replay","endpoint_id":)") != std::string::npos; }, 5s));
    CHECK(walhook.log().find(R"("since":"-","until":"-")") != std::string::npos);
    REQUIRE(test::eventually([&] { return s.rcv->count("/dl") == 2; }, 15s));
    CHECK(test::eventually(
        [&] { return s.value("SELECT status FROM walhook.deliveries WHERE endpoint_id = $1", dl_id) == "delivered"; }, 10s));
  }

  // --- without a token (loopback only): a foreign Host is refused (DNS rebinding)
  {
    auto standby = s.start_walhook({"--admin-listen", "127.0.0.1:0", "--instance-name", "standby"}, "standby");
    REQUIRE(test::eventually([&] { return standby.admin_port() != 0; }, 20s));
    const auto p2 = standby.admin_port();
    CHECK(call(p2, "GET", "/api/overview", {{"Host", "attacker.example:9187"}}).status == 403);
    auto a = call(p2, "GET", "/api/overview");
    CHECK(a.status == 200);
    CHECK(a.body.find("\"streaming\":false") != std::string::npos);  // a standby
    CHECK(call(p2, "POST", fmt::format("/api/endpoints/{}/pause", good), {{"Content-Type", "text/plain"}}, "{}").status == 415);
    standby.kill9();
  }

  // --- verdicts never promise a delivery that will not happen
  {
    // (a) An endpoint added after the event: the stream routed the event before it existed.
    const auto before = publish(s.db, "late");
    REQUIRE(test::eventually([&] { return s.acknowledged(s.value("SELECT pg_current_wal_lsn()::text")); }, 10s));
    const auto late = test::add_endpoint(s.db, "late", s.rcv->url("/late"), delivery::generate_secret());
    auto a = call(port, "GET", "/api/events/" + before, auth);
    REQUIRE(a.status == 200);
    simdjson::dom::element doc = parser.parse(a.body);
    REQUIRE(doc["endpoints"].get_array().size() == 1);
    auto ep = doc["endpoints"].at(0);
    CHECK(ep["endpoint_id"].get_int64().value() == late);
    CHECK_FALSE(bool(ep["routed"]));
    CHECK(std::string_view(ep["routed_reason"]).find("added after the event") != std::string_view::npos);
    CHECK(std::string_view(ep["verdict"]) == "not_routed");
    CHECK(s.rcv->count("/late") == 0);

    // (b) A state superseded by a newer one of its merge key while it waited in memory: no
    // row, no attempt, never a row to come. One slow attempt in flight holds B and C queued.
    const auto m = test::add_endpoint(s.db, "merge", s.rcv->url("/merge"), delivery::generate_secret(), {}, 1);
    relay::receiver_behaviour slow;
    slow.delay = 1500ms;
    s.rcv->set_behaviour("/merge", slow);
    REQUIRE(test::eventually([&] { return s.acknowledged(s.value("SELECT pg_current_wal_lsn()::text")); }, 10s));
    s.publish("merge", "order.paid", R"({"v":1})", std::string("k1"));
    REQUIRE(test::eventually(
        [&] {
          auto e = call(port, "GET", fmt::format("/api/endpoints/{}", m), auth);
          return e.status == 200 && e.body.find("\"in_flight\":1") != std::string::npos;
        },
        10s, 20ms));
    const auto b = s.publish("merge", "order.paid", R"({"v":2})", std::string("k1"));
    const auto c = s.publish("merge", "order.paid", R"({"v":3})", std::string("k1"));
    REQUIRE(test::eventually([&] { return s.received("/merge").size() == 2; }, 15s));
    auto got = s.received("/merge");
    REQUIRE(got.size() == 2);
    CHECK(got[1].webhook_id == c);  // B was merged away
    auto answer = call(port, "GET", "/api/events/" + b, auth);
    REQUIRE(answer.status == 200);
    doc = parser.parse(answer.body);
    auto mep = doc["endpoints"].at(0);
    CHECK(mep["endpoint_id"].get_int64().value() == m);
    CHECK(bool(mep["routed"]));
    CHECK(mep["delivery"].is_null());
    const std::string_view verdict = mep["verdict"];
    CHECK((verdict == "unknown" || verdict == "merged"));
    CHECK(std::string_view(mep["reason"]).find("merged into a newer event") != std::string_view::npos);
  }

  // --- worst first counts dead letters: an endpoint whose deliveries die unattempted (an
  // invalid URL: no failure, no pending) is not at the bottom, and says why
  {
    const auto broken = test::add_endpoint(s.db, "broken", "not a url", delivery::generate_secret());
    REQUIRE(test::eventually([&] { return s.acknowledged(s.value("SELECT pg_current_wal_lsn()::text")); }, 10s));
    publish(s.db, "broken");
    publish(s.db, "broken");
    pg::params broken_id{std::to_string(broken)};
    REQUIRE(test::eventually(
        [&] { return s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'dead'", broken_id) == "2"; },
        15s));
    auto a = call(port, "GET", "/api/endpoints", auth);
    REQUIRE(a.status == 200);
    simdjson::dom::element doc = parser.parse(a.body);
    std::vector<std::int64_t> order;
    simdjson::dom::element row_of_broken;
    for (auto e : doc["endpoints"].get_array()) {
      order.push_back(e["id"].get_int64().value());
      if (order.back() == broken) row_of_broken = e;
    }
    auto at = [&](std::int64_t id) { return std::find(order.begin(), order.end(), id) - order.begin(); };
    CHECK(at(broken) < at(good));  // good: nothing pending, no failures, no dead letters
    CHECK(row_of_broken["consecutive_failures"].get_int64().value() == 0);
    CHECK(std::string_view(row_of_broken["last_error"]).find("invalid endpoint URL") != std::string_view::npos);
  }

  // --- a statement timeout is the server's trouble, not the caller's: 504, never 400
  {
    relay::blocking_db locker(s.url);
    locker.exec("BEGIN");
    locker.exec("LOCK TABLE walhook.endpoint_health IN ACCESS EXCLUSIVE MODE");
    auto a = call(port, "GET", "/api/endpoints", auth, "", 20s);
    locker.exec("ROLLBACK");
    CHECK(a.status == 504);
    CHECK(a.body.find("statement timeout") != std::string::npos);
    CHECK(call(port, "GET", "/api/endpoints", auth).status == 200);  // the connection still serves
    // The caller's bad input stays 400 (a timestamptz that does not parse: SQLSTATE 22007).
    CHECK(call(port, "POST", fmt::format("/api/endpoints/{}/replay", dl), json_post, R"({"since": "yesterday-ish"})")
              .status == 400);
  }

  // --- PostgreSQL down: /api answers 503 at once, the probes still answer
  REQUIRE(test::cluster().stop("immediate"));
  {
    auto began = std::chrono::steady_clock::now();
    auto a = call(port, "GET", "/api/endpoints", auth);
    CHECK(a.status == 503);
    CHECK(a.body.find("database unreachable") != std::string::npos);
    CHECK(call(port, "GET", "/healthz").status == 200);
    CHECK(call(port, "GET", "/api/endpoints", auth).status == 503);  // reconnects, fails again
    // The overview answers from memory, its database fields null, saying why.
    auto o = call(port, "GET", "/api/overview", auth);
    CHECK(o.status == 200);
    simdjson::dom::element doc = parser.parse(o.body);
    CHECK(std::string_view(doc["database"]) == "unreachable");
    CHECK(doc["slot_lag_bytes"].is_null());
    CHECK(doc["queued"].is_int64());
    CHECK(doc["in_flight"].is_int64());
    CHECK(doc["recent_outcomes"]["kept"].get_int64().value() > 0);
    CHECK(std::chrono::steady_clock::now() - began < 5s);
  }
  REQUIRE(test::cluster().start());
  CHECK(test::eventually([&] { return call(port, "GET", "/api/endpoints", auth).status == 200; }, 20s, 200ms));
  std::remove(token_file.c_str());
}

namespace {

/// A file with `content`, mode `mode`, removed at the end of the scope.
struct temp_file {
  temp_file(const std::string& stem, const std::string& content, mode_t mode = 0600)
      : path(fmt::format("/tmp/walhook_it_{}_{}", stem, ::getpid())) {
    std::ofstream(path) << content;
    ::chmod(path.c_str(), mode);
  }
  ~temp_file() { std::remove(path.c_str()); }
  std::string path;
};

/// The ids of a GET /api/endpoints answer, and its next ("" for null).
std::pair<std::vector<std::int64_t>, std::string> page_of(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(body);
  std::vector<std::int64_t> ids;
  for (auto e : doc["endpoints"].get_array()) ids.push_back(e["id"].get_int64().value());
  std::string next = doc["next"].is_null() ? "" : std::string(std::string_view(doc["next"]));
  return {ids, next};
}

}  // namespace

TEST_CASE("GET /api/endpoints pages: every endpoint exactly once, in the one-page order; 400 on garbage; /metrics keeps the loopback Host rule") {
  test::scenario s("admin_paging");
  // 250 endpoints whose places in the order tie on everything but the id in groups: pending
  // deliveries of 7 ages (equal within a group), failures in a row, dead letters.
  s.db.exec("INSERT INTO walhook.endpoints (tenant_id, url, secret) "
            "SELECT 'paging', 'http://127.0.0.1:1/' || i, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' FROM generate_series(1, 250) i");
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, event_created_at, next_attempt_at) "
            "SELECT e.id, gen_random_uuid(), 'pending', now() - ((e.id % 7) || ' min')::interval, now() + interval '1 day' "
            "  FROM walhook.endpoints e WHERE e.id % 5 = 0");
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, event_created_at) "
            "SELECT e.id, gen_random_uuid(), 'dead', now() FROM walhook.endpoints e WHERE e.id % 11 = 0");
  s.db.exec("INSERT INTO walhook.endpoint_health (endpoint_id, consecutive_failures) "
            "SELECT e.id, e.id % 3 FROM walhook.endpoints e WHERE e.id % 2 = 0");
  auto walhook = s.start_walhook({"--admin-listen", "127.0.0.1:0"});
  INFO(walhook.log_tail(4000));
  REQUIRE(test::eventually([&] { return walhook.admin_port() != 0; }, 30s));
  const auto port = walhook.admin_port();

  auto whole = call(port, "GET", "/api/endpoints?limit=1000");
  REQUIRE(whole.status == 200);
  const auto [all, none] = page_of(whole.body);
  REQUIRE(all.size() == 250);
  CHECK(none.empty());
  for (const int limit : {100, 7, 1}) {
    CAPTURE(limit);
    std::vector<std::int64_t> paged;
    std::string after;
    int pages = 0;
    for (; pages < 300; ++pages) {
      auto a = call(port, "GET", fmt::format("/api/endpoints?limit={}{}", limit, after.empty() ? "" : "&after=" + after));
      REQUIRE(a.status == 200);
      const auto [ids, next] = page_of(a.body);
      CHECK(ids.size() <= static_cast<std::size_t>(limit));
      paged.insert(paged.end(), ids.begin(), ids.end());
      if (next.empty()) break;
      CHECK(ids.size() == static_cast<std::size_t>(limit));  // only the last page is short
      after = next;
    }
    CHECK(pages + 1 == (250 + limit - 1) / limit);  // no empty page at the end
    CHECK(paged == all);  // every endpoint once, in the order of the one page
  }
  // The default page: 100, and fields as before.
  {
    auto a = call(port, "GET", "/api/endpoints");
    REQUIRE(a.status == 200);
    const auto [ids, next] = page_of(a.body);
    CHECK(ids.size() == 100);
    CHECK_FALSE(next.empty());
    CHECK(a.body.find("\"oldest_pending_age_s\"") != std::string::npos);
    CHECK(a.body.find("\"secret_fingerprints\"") != std::string::npos);
  }
  for (const char* bad : {"?limit=0", "?limit=1001", "?limit=abc", "?limit=", "?after=garbage", "?after=1.2.3",
                          "?limit=10&after=%00"}) {
    CAPTURE(bad);
    auto a = call(port, "GET", std::string("/api/endpoints") + bad);
    CHECK(a.status == 400);
    CHECK(a.body.find("\"error\"") != std::string::npos);
  }

  // Without a token /metrics is open to loopback clients, and only to them (DNS rebinding).
  CHECK(call(port, "GET", "/metrics").status == 200);
  CHECK(call(port, "GET", "/metrics", {{"Host", fmt::format("127.0.0.1:{}", port)}}).status == 200);
  CHECK(call(port, "GET", "/metrics", {{"Host", "attacker.example:9187"}}).status == 403);
  CHECK(call(port, "GET", "/healthz", {{"Host", "attacker.example:9187"}}).status == 200);  // probes unchanged
  CHECK(walhook.stop() == 0);
}

TEST_CASE("admin listener hardening: /metrics needs the token, failures logged and slowed, token files checked, TLS") {
  test::scenario s("admin_hardening");
  const std::string token = delivery::generate_secret().substr(6, 32);
  temp_file readable("token_readable", token + "\n", 0644);
  const std::map<std::string, std::string> auth{{"Authorization", "Bearer " + token}};

  auto walhook = s.start_walhook({"--admin-listen", "127.0.0.1:0", "--admin-token-file", readable.path});
  INFO(walhook.log_tail(6000));
  REQUIRE(test::eventually([&] { return walhook.admin_port() != 0; }, 30s));
  const auto port = walhook.admin_port();
  // A token file others may read is used, with a warning.
  CHECK(walhook.count_in_log("\"admin.token_file_readable\"") == 1);
  CHECK(walhook.log().find(token) == std::string::npos);

  // --- /metrics: the bearer token, like /api/; the probes stay open
  CHECK(call(port, "GET", "/metrics").status == 401);
  CHECK(call(port, "GET", "/metrics", {{"Authorization", "Bearer nope"}}).status == 401);
  {
    auto m = call(port, "GET", "/metrics", auth);
    CHECK(m.status == 200);
    CHECK(m.body.find("walhook_build_info") != std::string::npos);
  }
  CHECK(call(port, "GET", "/healthz").status == 200);
  CHECK(call(port, "GET", "/console/").status == 200);

  // --- failed attempts: each answered 401 after a delay, logged with the address, never the
  // token tried, and not one line each
  {
    const std::string guess = "guess-" + delivery::generate_secret().substr(6, 20);
    const auto before = walhook.count_in_log("\"admin.auth_failed\"");
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i)
      CHECK(call(port, "GET", i % 2 ? "/metrics" : "/api/overview", {{"Authorization", "Bearer " + guess}}).status == 401);
    CHECK(std::chrono::steady_clock::now() - began >= 4 * 250ms);  // the delay is a floor
    // A flood from 16 connections at once: each waits its delay, none waits for the others'.
    std::vector<std::thread> flood;
    std::atomic<int> refused{0};
    const auto flood_began = std::chrono::steady_clock::now();
    for (int i = 0; i < 16; ++i)
      flood.emplace_back([&] {
        if (call(port, "GET", "/api/overview", {{"Authorization", "Bearer " + guess}}).status == 401) ++refused;
      });
    for (auto& t : flood) t.join();
    CHECK(refused == 16);
    CHECK(std::chrono::steady_clock::now() - flood_began < 16 * 250ms);  // not one after the other
    // 22 failures so far: the first was logged at once, the rest are counted for the next line.
    CHECK(walhook.count_in_log("\"admin.auth_failed\"") >= 1);
    CHECK(walhook.count_in_log("\"admin.auth_failed\"") - before < 5);  // not a line each
    // A failure 10 s after that line logs one that counts them (a failing request every 250 ms).
    CHECK(test::eventually(
        [&] {
          call(port, "GET", "/api/overview", {{"Authorization", "Bearer " + guess}});
          return std::regex_search(walhook.log(), std::regex(R"("admin.auth_failed".*"failures":\d{2,})"));
        },
        30s));
    CHECK(walhook.log().find("\"remote\":\"127.0.0.1\"") != std::string::npos);
    CHECK(walhook.log().find(guess) == std::string::npos);
    CHECK(call(port, "GET", "/api/overview", auth).status == 200);  // the right token still works
  }

  // --- a token under 16 bytes: refused at the start, naming the flag (exit 1 like other flag errors)
  {
    temp_file short_token("token_short", "0123456789abcde\n");
    auto refused = s.start_walhook({"--admin-listen", "127.0.0.1:0", "--admin-token-file", short_token.path}, "short");
    CHECK(refused.wait(20s) == 1);
    CHECK(refused.log().find("--admin-token-file") != std::string::npos);
    CHECK(refused.log().find("at least 16") != std::string::npos);
  }
  // --- one TLS flag without the other
  {
    auto refused = s.start_walhook({"--admin-listen", "127.0.0.1:0", "--admin-tls-cert", readable.path}, "half_tls");
    CHECK(refused.wait(20s) == 1);
    CHECK(refused.log().find("--admin-tls-cert needs --admin-tls-key") != std::string::npos);
  }
  // --- a non-loopback listener without TLS says the token crosses the network in the clear
  {
    auto plain = s.start_walhook({"--admin-listen", "0.0.0.0:0", "--admin-token-file", readable.path,
                                  "--instance-name", "plain"}, "plain");
    CHECK(test::eventually([&] { return plain.admin_port() != 0; }, 30s));
    CHECK(plain.count_in_log("\"admin.plain_http\"") == 1);
    plain.kill9();
  }

  // --- TLS: a self-signed certificate made here; a real HTTPS request with walhook status
  {
    const auto id = test::make_test_certificate("IP:127.0.0.1,DNS:localhost");
    temp_file cert("admin_cert", id.certificate_pem), key("admin_key", id.private_key_pem);
    auto tls = s.start_walhook({"--admin-listen", "0.0.0.0:0", "--admin-token-file", readable.path, "--admin-tls-cert",
                                cert.path, "--admin-tls-key", key.path, "--instance-name", "tls"},
                               "tls");
    INFO(tls.log_tail(4000));
    REQUIRE(test::eventually([&] { return tls.admin_port() != 0; }, 30s));
    const auto tls_port = tls.admin_port();
    CHECK(tls.count_in_log("\"admin.plain_http\"") == 0);
    CHECK(tls.log().find("\"tls\":true") != std::string::npos);
    // Plain HTTP on the TLS port gets no answer.
    CHECK(call(tls_port, "GET", "/healthz").status == 0);
    // walhook status over HTTPS, trusting the certificate: the live numbers come.
    std::string out;
    const std::string url = fmt::format("https://localhost:{}", tls_port);
    CHECK(test::run_walhook({"status", "--database-url", s.url, "--admin-url", url, "--admin-token-file", readable.path,
                             "--admin-ca-file", cert.path},
                            out) == 0);
    CHECK(out.find("live numbers not shown") == std::string::npos);
    CHECK(out.find("not streaming the slot") != std::string::npos);  // it answered: a standby here
    // Without trusting it: refused (the certificate is verified), said on stderr.
    CHECK(test::run_walhook({"status", "--database-url", s.url, "--admin-url", url, "--admin-token-file", readable.path},
                            out) == 0);
    CHECK(out.find("live numbers not shown") != std::string::npos);
    CHECK(out.find("TLS handshake") != std::string::npos);
    tls.kill9();
  }
  CHECK(walhook.stop() == 0);
}
