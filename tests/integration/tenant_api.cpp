// The tenant API of `walhook run --api-listen` (docs/tenant-api.md, relay/tenant/) over real HTTP
// against a real walhook, PostgreSQL and receiver, with two tenants: tokens (only their hash
// stored; read and manage scopes; revoked and expired ones refused; tenant names refused), every
// route with the other tenant's ids (404, as for ids nobody has), reconciliation paged by cursor,
// endpoint creation → delivery → resend with the same webhook-id, test send, rotation, the
// tenant's limits, the rate limit (429 + Retry-After), bad bodies, and the audit log.

#include "relay/operations/tenants.hpp"
#include "relay/tenant/router.hpp"
#include "tests/harness/harness.hpp"
#include "tests/support/http_call.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <atomic>
#include <regex>
#include <set>
#include <thread>

using namespace walhook;
using namespace std::chrono_literals;
using test::call;

namespace {

/// `walhook tenant token create …`: the token of its "token: " line ("" if it failed).
std::string create_token(const std::string& url, const std::string& tenant, const std::string& scope,
                         const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"tenant", "token", "create", "--database-url", url, "--tenant", tenant, "--scope", scope};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string out;
  if (test::run_walhook(args, out) != 0) return {};
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("(^|\n)token: (wht_[A-Za-z0-9_-]+)\n"))) return {};
  return m[2];
}

std::map<std::string, std::string> bearer(const std::string& token, bool json = false) {
  std::map<std::string, std::string> h{{"Authorization", "Bearer " + token}};
  if (json) h["Content-Type"] = "application/json";
  return h;
}

}  // namespace

TEST_CASE("tenant API: tokens, isolation between tenants, reconciliation, endpoints, resend, limits, audit") {
  test::scenario s("tenant_api");
  simdjson::dom::parser parser;

  // --- tokens (the CLI)
  const auto acme = create_token(s.url, "acme", "manage");
  const auto acme_read = create_token(s.url, "acme", "read");
  const auto globex = create_token(s.url, "globex", "manage");
  const auto hammer = create_token(s.url, "acme", "read", {"--description", "rate limit test"});
  REQUIRE(!acme.empty());
  REQUIRE(!acme_read.empty());
  REQUIRE(!globex.empty());
  CHECK(acme != acme_read);
  // Only the hash is stored: no column holds the token.
  CHECK(s.value("SELECT count(*) FROM walhook.tenant_tokens WHERE token_sha256 = $1",
                {relay::operations::sha256_hex(acme)}) == "1");
  CHECK(s.value("SELECT count(*) FROM walhook.tenant_tokens t WHERE strpos(t::text, $1) > 0", {acme.substr(4)}) == "0");
  {
    std::string out;
    CHECK(test::run_walhook({"tenant", "token", "create", "--database-url", s.url, "--tenant", "inbox:stripe", "--scope",
                             "manage"},
                            out) != 0);
    CHECK(out.find("inbox source") != std::string::npos);
    CHECK(test::run_walhook({"tenant", "token", "create", "--database-url", s.url, "--tenant", "walhook-operator",
                             "--scope", "read"},
                            out) != 0);
    CHECK(test::run_walhook({"tenant", "token", "create", "--database-url", s.url, "--tenant", "acme", "--scope", "admin"},
                            out) != 0);
  }

  auto walhook = s.start_walhook({"--api-listen", "127.0.0.1:0", "--api-rate", "50", "--api-burst", "60"});
  INFO(walhook.log_tail(6000));
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"replication.streaming\"") == 1; }, 30s));
  const auto port = walhook.api_port();
  REQUIRE(port != 0);

  // --- 401: no token, a wrong one, a well-formed unknown one; the admin routes are not here
  CHECK(call(port, "GET", "/v1/endpoints").status == 401);
  CHECK(call(port, "GET", "/v1/endpoints").headers["WWW-Authenticate"].starts_with("Bearer"));
  CHECK(call(port, "GET", "/v1/endpoints", bearer("nonsense")).status == 401);
  CHECK(call(port, "GET", "/v1/endpoints", bearer("wht_" + std::string(43, 'A'))).status == 401);
  CHECK(call(port, "GET", "/api/overview", bearer(acme)).status == 404);
  CHECK(call(port, "GET", "/healthz").status == 200);

  // --- endpoints: create (201 with the secret once), read, the read scope refused a change
  const auto create = [&](const std::string& token, const std::string& path, const std::string& types) {
    return call(port, "POST", "/v1/endpoints", bearer(token, true),
                fmt::format(R"({{"url": "{}", "event_types": {}}})", s.rcv->url(path), types));
  };
  auto created = create(acme, "/acme", R"(["order.paid"])");
  REQUIRE(created.status == 201);
  simdjson::dom::element doc = parser.parse(created.body);
  const std::int64_t acme_ep = doc["id"].get_int64().value();
  CHECK(std::string_view(doc["secret"]).starts_with("whsec_"));
  CHECK(created.headers["Location"] == fmt::format("/v1/endpoints/{}", acme_ep));
  CHECK(s.value("SELECT tenant_id FROM walhook.endpoints WHERE id = $1", {std::to_string(acme_ep)}) == "acme");
  auto other = create(globex, "/globex", "[]");
  REQUIRE(other.status == 201);
  const std::int64_t globex_ep = parser.parse(other.body)["id"].get_int64().value();
  CHECK(create(acme_read, "/x", "[]").status == 403);
  {
    auto a = call(port, "GET", fmt::format("/v1/endpoints/{}", acme_ep), bearer(acme_read));
    REQUIRE(a.status == 200);
    simdjson::dom::element e = parser.parse(a.body);
    CHECK(std::string_view(e["url"]) == s.rcv->url("/acme"));
    CHECK(e["secret"].error() == simdjson::NO_SUCH_FIELD);  // shown once, at creation
    auto list = parser.parse(call(port, "GET", "/v1/endpoints", bearer(acme)).body);
    CHECK(simdjson::dom::array(list["data"]).size() == 1);  // acme's alone
  }

  // --- isolation: every route with the other tenant's endpoint id answers as for no endpoint
  const auto theirs = std::to_string(globex_ep);
  const std::vector<std::pair<std::string, std::string>> endpoint_routes{
      {"GET", "/v1/endpoints/" + theirs},
      {"PATCH", "/v1/endpoints/" + theirs},
      {"DELETE", "/v1/endpoints/" + theirs},
      {"POST", "/v1/endpoints/" + theirs + "/pause"},
      {"POST", "/v1/endpoints/" + theirs + "/resume"},
      {"POST", "/v1/endpoints/" + theirs + "/rotate-secret"},
      {"POST", "/v1/endpoints/" + theirs + "/test"},
      {"GET", "/v1/endpoints/" + theirs + "/deliveries"},
      {"POST", "/v1/endpoints/" + theirs + "/replay"},
  };
  for (const auto& [method, target] : endpoint_routes) {
    const std::string body = method == "PATCH" ? R"({"description": "mine now"})"
                             : target.ends_with("/replay") ? R"({"since": "2000-01-01T00:00:00Z"})"
                                                             : "";
    auto a = call(port, method, target, bearer(acme, true), body);
    INFO(method << " " << target << " → " << a.body);
    CHECK(a.status == 404);
    CHECK(a.body == fmt::format(R"({{"error":"no endpoint with id {}"}})", theirs));  // as for an id nobody has
  }
  CHECK(s.value("SELECT status || coalesce(description, '-') FROM walhook.endpoints WHERE id = $1", {theirs}) ==
        "active-");
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE event_type = 'walhook.test'") == "0");

  // --- events: delivered to the tenant's endpoint, listed page by page for it alone
  std::vector<std::string> acme_events;
  for (int i = 0; i < 5; ++i) acme_events.push_back(s.publish("acme", "order.paid", fmt::format(R"({{"n":{}}})", i)));
  const auto globex_event = s.publish("globex", "order.paid", R"({"secret":"globex's"})");
  REQUIRE(test::eventually([&] { return s.received("/acme").size() == 5; }, 20s));
  REQUIRE(test::eventually([&] { return s.received("/globex").size() == 1; }, 20s));
  {
    std::vector<std::string> listed;
    std::string target = "/v1/events?since=2000-01-01T00:00:00Z&limit=2";
    for (int page = 0; page < 5; ++page) {
      auto a = call(port, "GET", target, bearer(acme_read));
      REQUIRE(a.status == 200);
      simdjson::dom::element p = parser.parse(a.body);
      for (auto e : simdjson::dom::array(p["data"])) {
        listed.emplace_back(std::string_view(e["id"]));
        CHECK(std::string_view(e["type"]) == "order.paid");
        CHECK(std::string_view(e["timestamp"]).ends_with("Z"));
        CHECK(e["data"]["n"].get_int64().value() == static_cast<std::int64_t>(listed.size() - 1));
      }
      if (p["next_cursor"].is_null()) break;
      target = "/v1/events?since=2000-01-01T00:00:00Z&limit=2&cursor=" + std::string(std::string_view(p["next_cursor"]));
    }
    CHECK(listed == acme_events);  // in order, each once, none of globex's
    CHECK(call(port, "GET", "/v1/events?cursor=garbage", bearer(acme)).status == 400);
    CHECK(call(port, "GET", "/v1/events?sinse=2000-01-01", bearer(acme)).status == 400);
    CHECK(call(port, "GET", "/v1/events?since=yesterday-ish", bearer(acme)).status == 400);
    CHECK(call(port, "GET", "/v1/events?since=now", bearer(acme)).status == 400);  // would move on each page
    {
      // 100 event types of 80 characters and a cursor fit the listener's 16 KiB.
      std::string types;
      for (int i = 0; i < 100; ++i) types += fmt::format("{}{:080}", i ? "," : "", i);
      auto first = call(port, "GET", "/v1/events?limit=1&type=" + types, bearer(acme));
      CHECK(first.status == 200);
      auto with_cursor = call(port, "GET", "/v1/events?limit=1&type=" + types + "&cursor=" +
                                               std::string(std::string_view(parser.parse(first.body)["resume_cursor"])),
                              bearer(acme));
      CHECK(with_cursor.status == 200);
    }
    auto none = parser.parse(call(port, "GET", "/v1/events?type=order.shipped", bearer(acme)).body);
    CHECK(simdjson::dom::array(none["data"]).size() == 0);
  }
  {
    // A transaction open while the tenant reads: its event's created_at (its start) is before
    // the events listed, but it commits after. The reading never shows it half-way (a view is
    // one snapshot); the resume_cursor at its end brings it, once, and nothing else again.
    relay::blocking_db late_writer(s.url, "late-writer");
    late_writer.exec("BEGIN");
    const std::string late(late_writer.exec("SELECT walhook.publish('acme', 'order.late', '{}'::jsonb)::text").value(0, 0));
    bool open = true;
    const auto after_it = s.publish("acme", "order.placed");  // neither type is the endpoint's: not delivered
    const auto read_all = [&](std::string target, std::vector<std::string>& ids) {
      for (int page = 0; page < 20; ++page) {
        auto a = call(port, "GET", target, bearer(acme_read));
        if (a.status != 200) MESSAGE(target << " → " << a.body);
        REQUIRE(a.status == 200);
        simdjson::dom::element p = parser.parse(a.body);
        for (auto e : simdjson::dom::array(p["data"])) ids.emplace_back(std::string_view(e["id"]));
        if (p["next_cursor"].is_null()) return std::string(std::string_view(p["resume_cursor"]));
        CHECK(p["resume_cursor"].error() == simdjson::NO_SUCH_FIELD);
        target = "/v1/events?since=2000-01-01T00:00:00Z&limit=2&cursor=" + std::string(std::string_view(p["next_cursor"]));
        if (open) late_writer.exec("COMMIT");  // mid-reading, behind the position already shown
        open = false;
      }
      FAIL("the reading did not end");
      return std::string();
    };
    std::vector<std::string> first;
    const auto resume = read_all("/v1/events?since=2000-01-01T00:00:00Z&limit=2", first);
    auto expected = acme_events;
    expected.push_back(after_it);
    CHECK(first == expected);  // the view of the reading's start: without the late event
    CHECK(s.value("SELECT (SELECT created_at FROM walhook.outbox WHERE id = $1::uuid) < "
                  "(SELECT created_at FROM walhook.outbox WHERE id = $2::uuid)", {late, after_it}) == "t");
    std::vector<std::string> resumed;
    const auto again = read_all("/v1/events?since=2000-01-01T00:00:00Z&limit=2&cursor=" + resume, resumed);
    CHECK(resumed == std::vector<std::string>{late});
    std::vector<std::string> nothing;
    read_all("/v1/events?since=2000-01-01T00:00:00Z&limit=2&cursor=" + again, nothing);
    CHECK(nothing.empty());
    // A cursor's snapshot is the tenant's to forge, and shows it only its own events.
    relay::tenant::events_query filters;
    filters.since = "2000-01-01T00:00:00Z";
    const auto digest = relay::tenant::filters_digest(filters);
    const auto history =
        s.value("SELECT system_identifier::text || '.' || left(pg_walfile_name(pg_current_wal_lsn()), 8) FROM pg_control_system()");
    const auto everything = relay::tenant::events_cursor({"1:1:", "", std::nullopt, digest, history});
    std::vector<std::string> forged;
    read_all("/v1/events?since=2000-01-01T00:00:00Z&limit=2&cursor=" + everything, forged);
    CHECK(forged.size() == 7);
    CHECK(std::find(forged.begin(), forged.end(), globex_event) == forged.end());
    // A cursor serves the filters it was made with: other ones would skip events silently.
    auto other = call(port, "GET", "/v1/events?since=2000-01-01T00:00:00Z&type=order.late&cursor=" + again, bearer(acme_read));
    CHECK(other.status == 400);
    CHECK(other.body.find("other filters") != std::string::npos);
    // A view ahead of the database (a failover to a standby behind it, a restore) is refused:
    // transactions numbered from now on would pass for ones it showed.
    const auto snapshot = s.value("SELECT pg_current_snapshot()::text");
    const auto xmax = std::stoull(snapshot.substr(snapshot.find(':') + 1));
    const auto ahead =
        relay::tenant::events_cursor({fmt::format("{}:{}:", xmax + 50, xmax + 50), "", std::nullopt, digest, history});
    auto refused = call(port, "GET", "/v1/events?since=2000-01-01T00:00:00Z&cursor=" + ahead, bearer(acme_read));
    CHECK(refused.status == 409);
    CHECK(refused.body.find("ahead of the database") != std::string::npos);
    // So is a view of another history, however far behind: a promoted standby's timeline (it
    // may not have had the view's last transactions, and numbers new ones as they were), a
    // point-in-time recovery, another cluster. it_failover provokes a real one.
    const auto timeline = history.substr(history.find('.') + 1);
    for (const auto& other : {history.substr(0, history.find('.') + 1) + "00000002", "42." + timeline}) {
      const auto elsewhere = relay::tenant::events_cursor({"1:1:", "", std::nullopt, digest, other});
      CHECK(call(port, "GET", "/v1/events?since=2000-01-01T00:00:00Z&cursor=" + elsewhere, bearer(acme_read)).status == 409);
    }
    CHECK(timeline == "00000001");
    // A cursor of walhook before the history (c2) is still served.
    std::vector<std::string> from_c2;
    read_all("/v1/events?since=2000-01-01T00:00:00Z&limit=2&cursor=" +
                 relay::operations::base64url_encode(fmt::format("c2|1:1:||||{}", digest)),
             from_c2);
    CHECK(from_c2 == forged);
    // A row restored from another cluster keeps an xid past this one's: a reading shows it, as
    // an old event; a resume does not show it again.
    const auto restored = s.value(
        "INSERT INTO walhook.outbox (tenant_id, event_type, payload, xid) "
        "VALUES ('acme', 'order.restored', '{}', (pg_current_xact_id()::text::bigint + 1000000)::text::xid8) RETURNING id");
    std::vector<std::string> with_restored;
    const auto after_restore = read_all("/v1/events?since=2000-01-01T00:00:00Z&limit=2", with_restored);
    CHECK(std::count(with_restored.begin(), with_restored.end(), restored) == 1);
    std::vector<std::string> not_again;
    read_all("/v1/events?since=2000-01-01T00:00:00Z&limit=2&cursor=" + after_restore, not_again);
    CHECK(not_again.empty());
    s.db.exec("DELETE FROM walhook.outbox WHERE id = $1::uuid", {restored});
  }
  {
    // Writers commit all the while a reader follows resume_cursors: every event shows once, in
    // one of the readings. (A row that commits between the request's look at the database and
    // its page is not taken for a restored one: the page's own snapshot decides. That window is
    // a fraction of a millisecond, which this test rarely hits.)
    const auto reader = create_token(s.url, "acme", "read", {"--description", "resume race"});
    std::atomic<bool> stop{false};
    std::vector<std::vector<std::string>> written(3);
    std::vector<std::thread> writers;
    for (auto& ids : written)
      writers.emplace_back([&, out = &ids] {
        relay::blocking_db w(s.url, "race-writer");
        while (!stop)
          out->emplace_back(w.exec("SELECT walhook.publish('acme', 'order.race', '{}'::jsonb)::text").value(0, 0));
      });
    std::vector<std::string> seen;
    std::string base = "/v1/events?type=order.race&limit=1000", target = base;
    int failed = 0;
    const auto read_page = [&] {  // also on another thread: no REQUIRE here
      auto a = call(port, "GET", target, bearer(reader));
      if (a.status != 200) {
        ++failed;
        MESSAGE(target << " → " << a.status << " " << a.body);
        return;
      }
      simdjson::dom::element p = parser.parse(a.body);
      for (auto e : simdjson::dom::array(p["data"])) seen.emplace_back(std::string_view(e["id"]));
      const bool more = !p["next_cursor"].is_null();
      target = base + "&cursor=" + std::string(std::string_view(more ? p["next_cursor"] : p["resume_cursor"]));
    };
    int readings = 0;
    for (const auto until = std::chrono::steady_clock::now() + 3s; std::chrono::steady_clock::now() < until; ++readings) {
      read_page();
      std::this_thread::sleep_for(25ms);  // within the token's rate
    }
    stop = true;
    for (auto& t : writers) t.join();
    for (int i = 0; i < 5; ++i) read_page();
    std::multiset<std::string> expected, got(seen.begin(), seen.end());
    for (const auto& ids : written) expected.insert(ids.begin(), ids.end());
    MESSAGE(fmt::format("{} events written by 3 writers during {} requests", expected.size(), readings));
    CHECK(failed == 0);
    CHECK(expected.size() > 100);
    CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == seen.size());  // none twice
    CHECK(got == expected);
    s.db.exec("DELETE FROM walhook.outbox WHERE event_type = 'order.race'");

    // That window, provoked: a writer holds a lock on the outbox, with no xid yet; a second
    // session queues for an exclusive lock behind it, so the page statement, after the request's
    // look at the database, queues behind both. The writer then publishes (an xid past that look)
    // and commits before the page statement's snapshot is taken. The reading does not show the
    // event (its view is of that look); the resume shows it, once.
    relay::blocking_db writer(s.url, "lock-writer"), locker(s.url, "lock-locker");
    writer.exec("BEGIN");
    writer.exec("LOCK TABLE walhook.outbox IN ROW EXCLUSIVE MODE");
    locker.exec("BEGIN");
    std::thread lock([&] {
      locker.exec("LOCK TABLE walhook.outbox IN ACCESS EXCLUSIVE MODE");
      locker.exec("ROLLBACK");
    });
    const auto waiting = [&](const std::string& like) {
      return s.value("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", {like}) != "0";
    };
    REQUIRE(test::eventually([&] { return waiting("LOCK TABLE walhook.outbox IN ACCESS%"); }, 10s));
    base = "/v1/events?type=order.lockrace&limit=10";
    target = base;
    seen.clear();
    std::thread page([&] { read_page(); });
    const bool queued = test::eventually([&] { return waiting("%AS position%"); }, 10s);
    const std::string late(writer.exec("SELECT walhook.publish('acme', 'order.lockrace', '{}'::jsonb)::text").value(0, 0));
    writer.exec("COMMIT");
    lock.join();
    page.join();
    CHECK(queued);
    CHECK(seen.empty());  // not in the view of the reading's start
    read_page();
    CHECK(seen == std::vector<std::string>{late});
    read_page();
    CHECK(seen == std::vector<std::string>{late});  // once
    CHECK(failed == 0);
    s.db.exec("DELETE FROM walhook.outbox WHERE event_type = 'order.lockrace'");
  }
  CHECK(call(port, "GET", "/v1/events/" + globex_event, bearer(acme)).status == 404);
  {
    auto a = call(port, "GET", "/v1/events/" + acme_events[0], bearer(acme));
    REQUIRE(a.status == 200);
    simdjson::dom::element e = parser.parse(a.body);
    auto endpoints = simdjson::dom::array(e["endpoints"]);
    REQUIRE(endpoints.size() == 1);  // acme's endpoint alone
    CHECK((*endpoints.begin())["endpoint_id"].get_int64().value() == acme_ep);
    CHECK(std::string_view((*endpoints.begin())["verdict"]) == "delivered");
  }

  // --- resend: the receiver gets the event again, with the same webhook-id; another tenant's event is 404
  {
    auto a = call(port, "POST", fmt::format("/v1/endpoints/{}/resend", acme_ep), bearer(acme, true),
                  fmt::format(R"({{"event_id": "{}"}})", acme_events[2]));
    INFO(a.body);
    CHECK(a.status == 200);
    REQUIRE(test::eventually([&] { return s.received("/acme").size() == 6; }, 20s));
    CHECK(s.received("/acme").back().webhook_id == acme_events[2]);
    CHECK(call(port, "POST", fmt::format("/v1/endpoints/{}/resend", acme_ep), bearer(acme, true),
               fmt::format(R"({{"event_id": "{}"}})", globex_event))
              .status == 404);
    auto deliveries = call(port, "GET", fmt::format("/v1/endpoints/{}/deliveries", acme_ep), bearer(acme));
    CHECK(deliveries.status == 200);
    INFO(deliveries.body);
    CHECK(deliveries.body.find(acme_events[2]) != std::string::npos);
  }

  // --- test send, rotation
  {
    auto a = call(port, "POST", fmt::format("/v1/endpoints/{}/test", acme_ep), bearer(acme, true));
    CHECK(a.status == 202);
    REQUIRE(test::eventually([&] { return s.received("/acme").size() == 7; }, 20s));
    CHECK(s.received("/acme").back().body.find("\"walhook.test\"") != std::string::npos);
    CHECK(simdjson::dom::array(parser.parse(call(port, "GET", "/v1/events", bearer(acme)).body)["data"]).size() == 7);
    auto r = call(port, "POST", fmt::format("/v1/endpoints/{}/rotate-secret", acme_ep), bearer(acme, true),
                  R"({"grace_seconds": 60})");
    REQUIRE(r.status == 200);
    CHECK(std::string_view(parser.parse(r.body)["secret"]).starts_with("whsec_"));
  }

  // --- a disabled endpoint is the operator's to enable; the tenant may pause and resume
  {
    std::string out;
    REQUIRE(test::run_walhook({"endpoint", "disable", "--database-url", s.url, std::to_string(acme_ep)}, out) == 0);
    CHECK(call(port, "POST", fmt::format("/v1/endpoints/{}/resume", acme_ep), bearer(acme, true)).status == 409);
    CHECK(s.value("SELECT status FROM walhook.endpoints WHERE id = $1", {std::to_string(acme_ep)}) == "disabled");
    REQUIRE(test::run_walhook({"endpoint", "enable", "--database-url", s.url, std::to_string(acme_ep)}, out) == 0);
    CHECK(call(port, "POST", fmt::format("/v1/endpoints/{}/pause", acme_ep), bearer(acme, true)).status == 200);
    CHECK(call(port, "POST", fmt::format("/v1/endpoints/{}/resume", acme_ep), bearer(acme, true)).status == 200);
    CHECK(s.value("SELECT status FROM walhook.endpoints WHERE id = $1", {std::to_string(acme_ep)}) == "active");
  }

  // --- a token of the operator tenant (made with another --operator-tenant) opens nothing; nor
  // do two Authorization fields
  {
    const auto ops = create_token(s.url, "walhook-operator", "manage", {"--operator-tenant", "ops"});
    REQUIRE(!ops.empty());
    CHECK(call(port, "GET", "/v1/events", bearer(ops)).status == 401);
    CHECK(test::raw_status(port, fmt::format("GET /v1/endpoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n"
                                             "Authorization: Bearer {}\r\nConnection: close\r\n\r\n",
                                             acme, globex)) == 401);
  }

  // --- bad bodies, limits
  CHECK(call(port, "POST", "/v1/endpoints", {{"Authorization", "Bearer " + acme}, {"Content-Type", "application/jsonp"}},
             R"({"url": "https://a.example"})")
            .status == 415);
  {
    std::string many = "[";
    for (int i = 0; i < 101; ++i) many += fmt::format(R"({}"t{}")", i ? "," : "", i);
    CHECK(create(acme, "/many", many + "]").status == 400);
  }
  CHECK(call(port, "POST", "/v1/endpoints", bearer(acme, true), "{not json").status == 400);
  CHECK(call(port, "POST", "/v1/endpoints", bearer(acme, true), R"({"url": "https://a.example", "tenant_id": "globex"})")
            .status == 400);
  CHECK(call(port, "POST", "/v1/endpoints", bearer(acme, true), R"({"url": "nats://10.0.0.1:4222/x"})").status == 400);
  CHECK(call(port, "POST", "/v1/endpoints", bearer(acme), R"({"url": "https://a.example"})").status == 415);
  CHECK(call(port, "POST", "/v1/endpoints", bearer(acme, true),
             R"({"url": "https://a.example", "max_concurrency": 4294967297})")
            .status == 400);
  {
    std::string out;
    REQUIRE(test::run_walhook({"tenant", "limits", "--database-url", s.url, "--tenant", "acme", "--max-endpoints", "1"},
                              out) == 0);
    CHECK(out.find("max endpoints 1") != std::string::npos);
    CHECK(create(acme, "/acme2", "[]").status == 409);
  }

  // --- PATCH and DELETE of its own
  {
    auto a = call(port, "PATCH", fmt::format("/v1/endpoints/{}", acme_ep), bearer(acme, true),
                  R"({"description": "orders", "max_concurrency": 2})");
    REQUIRE(a.status == 200);
    CHECK(std::string_view(parser.parse(a.body)["description"]) == "orders");
    CHECK(call(port, "PATCH", fmt::format("/v1/endpoints/{}", acme_ep), bearer(acme, true), R"({"max_concurrency": 11})")
              .status == 400);  // above the default limit of 10
  }

  // --- the rate limit: 429 with Retry-After, for that token alone
  {
    int limited = 0;
    std::string retry_after;
    for (int i = 0; i < 120; ++i) {
      auto a = call(port, "GET", "/v1/endpoints", bearer(hammer));
      if (a.status == 429) {
        ++limited;
        retry_after = a.headers["Retry-After"];
      }
    }
    CHECK(limited > 0);
    CHECK(retry_after == "1");
    CHECK(call(port, "GET", "/v1/endpoints", bearer(acme_read)).status == 200);
  }

  // --- revoked and expired tokens
  {
    std::string out;
    const auto fingerprint = relay::operations::tenant_token_fingerprint(acme_read);
    REQUIRE(test::run_walhook({"tenant", "token", "revoke", "--database-url", s.url, fingerprint}, out) == 0);
    CHECK(call(port, "GET", "/v1/endpoints", bearer(acme_read)).status == 401);
    REQUIRE(test::run_walhook({"tenant", "token", "list", "--database-url", s.url, "--tenant", "acme"}, out) == 0);
    CHECK(out.find(fingerprint) != std::string::npos);
    CHECK(out.find(acme_read) == std::string::npos);
    const auto brief = create_token(s.url, "acme", "read", {"--expires", "1s"});
    REQUIRE(!brief.empty());
    std::this_thread::sleep_for(1500ms);
    CHECK(call(port, "GET", "/v1/endpoints", bearer(brief)).status == 401);
  }

  // --- delete, and the audit log of every change, with the token's fingerprint
  CHECK(call(port, "DELETE", fmt::format("/v1/endpoints/{}", acme_ep), bearer(acme)).status == 200);
  CHECK(call(port, "GET", fmt::format("/v1/endpoints/{}", acme_ep), bearer(acme)).status == 404);
  CHECK(s.value("SELECT string_agg(action, ',' ORDER BY id) FROM walhook.tenant_audit WHERE tenant_id = 'acme'") ==
        "endpoint.create,delivery.resend,endpoint.test,endpoint.rotate_secret,endpoint.pause,endpoint.resume,"
        "endpoint.update,endpoint.delete");
  CHECK(s.value("SELECT count(DISTINCT token) FROM walhook.tenant_audit WHERE tenant_id = 'acme'") == "1");
  CHECK(s.value("SELECT min(token) FROM walhook.tenant_audit WHERE tenant_id = 'acme'") ==
        relay::operations::tenant_token_fingerprint(acme));
  CHECK(walhook.count_in_log("\"tenant.action\"") == 9);  // acme's eight and globex's create
  CHECK(walhook.log().find(acme) == std::string::npos);
  CHECK(walhook.stop() == 0);
}
