// Per-endpoint policies (issue 22, migration 012) on a real PostgreSQL 15, `walhook run` and a
// real receiver: static and secret headers reach the endpoint (and the secret is shown nowhere),
// names walhook owns are refused by the CLI and make a hand-written row unusable; a payload filter
// routes only matching events, counts the rest and shows them "filtered"; a rate limit keeps the
// attempts under N in any 1 s window, measured at the receiver; replay by type and filter, with
// a dry run that counts first, from the CLI and the admin API.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"
#include "tests/integration/inbox_support.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <thread>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

struct setup : test::scenario {
  using scenario::scenario;
  /// `walhook ARGS --database-url URL`; the output in `out`.
  int cli(std::vector<std::string> args) {
    args.push_back("--database-url");
    args.push_back(url);
    return test::run_walhook(args, out);
  }
  /// `walhook endpoint add` with these flags; the new id (fails the test if refused).
  long long add(const std::string& path, std::vector<std::string> flags) {
    std::vector<std::string> args{"endpoint", "add", "--tenant", "acme", "--url", rcv->url(path)};
    args.insert(args.end(), flags.begin(), flags.end());
    const int rc = cli(args);
    INFO(out);
    REQUIRE(rc == 0);
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex(R"(id: (\d+))")));
    return std::stoll(m[1]);
  }
  std::string out;
};

}  // namespace

TEST_CASE("headers: static and secret headers reach the endpoint; the secret's value is shown nowhere; walhook's own names are refused") {
  setup s("policies_headers");
  auto walhook = s.start_walhook({"--admin-listen", "127.0.0.1:0"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const std::string secret_value = "Bearer s3cr3t-" + delivery::generate_secret().substr(6, 16);
  const long long id = s.add("/h", {"--header", "X-Api-Key: k-123", "--header", "X-Region:  eu ", "--header-secret",
                                    "Authorization: " + secret_value});
  s.publish("acme", "order.paid", R"({"n": 1})");
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/h").size() == 1; }, 20s), walhook.log_tail());
  auto got = s.received("/h").front();
  CHECK(got.header("X-Api-Key") == "k-123");
  CHECK(got.header("X-Region") == "eu");
  CHECK(got.header("Authorization") == secret_value);
  CHECK(got.signature_valid == false);  // no keys given to the receiver: not checked here
  CHECK_FALSE(got.webhook_id.empty());  // walhook's own headers are still there

  // Shown: the static ones, and the secret one's fingerprint only — by the CLI, the API, the log.
  REQUIRE(s.cli({"endpoint", "list"}) == 0);
  CHECK(s.out.find("s3cr3t") == std::string::npos);
  REQUIRE(s.cli({"status"}) == 0);
  CHECK(s.out.find("s3cr3t") == std::string::npos);
  auto [code, body] = test::http_get(walhook.admin_port(), fmt::format("/api/endpoints/{}", id));
  REQUIRE(code == 200);
  CHECK(body.find("s3cr3t") == std::string::npos);
  CHECK(body.find(R"("headers":["X-Api-Key: k-123","X-Region: eu"])") != std::string::npos);
  CHECK(std::regex_search(body, std::regex(R"("secret_headers":"Authorization: sha256:[0-9a-f]{12}")")));
  CHECK(walhook.log().find("s3cr3t") == std::string::npos);

  // Refused, with the reason and without the value.
  for (const auto& [flag, line] : std::vector<std::pair<std::string, std::string>>{
           {"--header", "Host: evil.example"},
           {"--header", "webhook-signature: v1,forged"},
           {"--header", "Content-Length: 0"},
           {"--header-secret", "X-Split: a\r\nX-Injected: b"},
           {"--header", "no colon here"}}) {
    INFO(line);
    CHECK(s.cli({"endpoint", "add", "--tenant", "acme", "--url", s.rcv->url("/r"), flag, line}) != 0);
    CHECK(s.out.find(flag + ":") != std::string::npos);
  }
  // A name once across --header and --header-secret (else which would the receiver see?).
  CHECK(s.cli({"endpoint", "add", "--tenant", "acme", "--url", s.rcv->url("/r"), "--header", "X-Key: a",
               "--header-secret", "x-key: b"}) != 0);
  CHECK(s.out.find("header x-key would be set twice") != std::string::npos);
  CHECK(s.cli({"endpoint", "update", std::to_string(id), "--header", "x-api-key: again"}) == 0);  // replaced, not added
  CHECK(s.cli({"endpoint", "update", std::to_string(id), "--header", "Authorization: Basic x"}) != 0);
  CHECK(s.out.find("header Authorization would be set twice") != std::string::npos);
  // A value given where the name goes is not echoed back.
  CHECK(s.cli({"endpoint", "add", "--tenant", "acme", "--url", s.rcv->url("/r"), "--header-secret", "sk_live_abc def"}) != 0);
  CHECK(s.out.find("sk_live") == std::string::npos);
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints") == "1");

  // update replaces them; `none` removes them.
  REQUIRE(s.cli({"endpoint", "update", std::to_string(id), "--header", "none", "--header-secret", "X-Token: t-2"}) == 0);
  CHECK(s.out.find("headers, secret_headers") != std::string::npos);
  s.publish("acme", "order.paid", R"({"n": 2})");
  REQUIRE(test::eventually([&] { return s.received("/h").size() == 2; }, 20s));
  got = s.received("/h").back();
  CHECK(got.header("X-Api-Key").empty());
  CHECK(got.header("Authorization").empty());
  CHECK(got.header("X-Token") == "t-2");

  // A reserved name written by hand (not through walhook) makes the endpoint unusable: its
  // deliveries end dead with the reason, rather than go out with a forged Host.
  s.db.exec("UPDATE walhook.endpoints SET headers = '{\"Host: evil.example\"}' WHERE id = $1", {std::to_string(id)});
  const auto ev = s.publish("acme", "order.paid", R"({"n": 3})");
  const std::string dead = "SELECT last_error FROM walhook.deliveries WHERE event_id = $1::uuid AND status = 'dead'";
  REQUIRE_MESSAGE(test::eventually([&] { return !s.value(dead, {ev}).empty(); }, 20s), walhook.log_tail());
  CHECK(s.value(dead, {ev}).find("invalid endpoint headers: header Host is walhook's own") != std::string::npos);
  CHECK(s.received("/h", 0).size() == 2);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("filter: only matching events are delivered; the others are counted and shown as filtered") {
  setup s("policies_filter");
  auto walhook = s.start_walhook({"--admin-listen", "127.0.0.1:0"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const long long id =
      s.add("/big", {"--filter", R"({"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]}})"});
  const long long all = s.add("/all", {});

  const auto yes1 = s.publish("acme", "order.paid", R"({"amount": 150, "currency": "EUR"})");
  const auto no1 = s.publish("acme", "order.paid", R"({"amount": 50, "currency": "EUR"})");
  const auto no2 = s.publish("acme", "order.paid", R"({"amount": 200, "currency": "GBP"})");
  const auto yes2 = s.publish("acme", "order.paid", R"({"amount": 100, "currency": "USD"})");
  // Every event reaches the endpoint without a filter: once all four are there, all were routed.
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/all").size() == 4 && s.received("/big").size() == 2; }, 20s),
                  walhook.log_tail());
  std::set<std::string> got;
  for (const auto& r : s.received("/big")) got.insert(r.webhook_id);
  CHECK(got == std::set<std::string>{yes1, yes2});
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", {std::to_string(id)}) == "0");

  auto [code, metrics] = test::http_get(walhook.admin_port(), "/metrics");
  REQUIRE(code == 200);
  CHECK(metrics.find(fmt::format("walhook_endpoint_filtered_total{{endpoint=\"{}\"}} 2\n", id)) != std::string::npos);
  CHECK(metrics.find(fmt::format("walhook_endpoint_filtered_total{{endpoint=\"{}\"}}", all)) == std::string::npos);

  // The event page: filtered for the filtered endpoint, with the filter; delivered for the other.
  const auto [ecode, answer] = test::http_get(walhook.admin_port(), "/api/events/" + no2);
  REQUIRE(ecode == 200);
  const std::string page = answer;
  INFO(page);
  // One endpoint's line, from its id to its verdict.
  auto line = [&](long long endpoint) {
    const auto from = page.find(fmt::format(R"({{"endpoint_id":{},)", endpoint));
    if (from == std::string::npos) return std::string();
    const auto verdict = page.find(R"("verdict":")", from);
    return page.substr(from, page.find('"', verdict + 11) + 1 - from);
  };
  const auto filtered = line(id);
  CHECK(filtered.find(R"("routed":false,"routed_reason":"the endpoint's payload filter does not match it: {\"data.amount\")") !=
        std::string::npos);
  CHECK(filtered.ends_with(R"("verdict":"filtered")"));
  CHECK(line(all).find(R"("routed":true,)") != std::string::npos);
  auto [ycode, yes_page] = test::http_get(walhook.admin_port(), "/api/events/" + yes1);
  CHECK(yes_page.find(R"("verdict":"filtered")") == std::string::npos);

  // Refused at configuration time, with the path and the reason.
  CHECK(s.cli({"endpoint", "add", "--tenant", "acme", "--url", s.rcv->url("/x"), "--filter", R"({"amount": 1})"}) != 0);
  CHECK(s.out.find("data.amount") != std::string::npos);
  CHECK(s.cli({"endpoint", "update", std::to_string(id), "--filter", R"({"data.x": {"$regex": "a"}})"}) != 0);
  CHECK(s.out.find("unknown operator $regex") != std::string::npos);

  // Removed: everything goes again.
  REQUIRE(s.cli({"endpoint", "update", std::to_string(id), "--filter", "none"}) == 0);
  REQUIRE(test::eventually([&] { return walhook.count_in_log("endpoint.updated") >= 1; }, 10s));
  s.publish("acme", "order.paid", R"({"amount": 1, "currency": "JPY"})");
  CHECK_MESSAGE(test::eventually([&] { return s.received("/big").size() == 3; }, 20s), walhook.log_tail());
  (void)no1;
  CHECK(walhook.stop() == 0);
}

TEST_CASE("rate: --max-rate 20/s keeps the attempts under 20 in any second, measured at the receiver, and delivers all") {
  setup s("policies_rate");
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const long long id = s.add("/slow", {"--max-rate", "20/s", "--max-concurrency", "16"});
  const long long free_id = s.add("/free", {});
  (void)id;
  (void)free_id;
  constexpr int events = 90;
  for (int i = 0; i < events; ++i) s.publish("acme", "tick", fmt::format(R"({{"i": {}}})", i));
  // The endpoint without a limit is not held behind the limited one.
  REQUIRE(test::eventually([&] { return s.received("/free").size() == events; }, 30s));
  CHECK(s.received("/slow").size() < events);
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/slow").size() == events; }, 60s), walhook.log_tail());
  std::vector<std::int64_t> at;
  for (const auto& r : s.received("/slow", 0)) at.push_back(r.received_at_us);
  std::sort(at.begin(), at.end());
  // walhook starts at most 20 attempts in any 1 s window; the receiver sees them a network hop
  // later, so a window of 1 s less 20 ms (the hop's variation, generously) holds at most 20.
  std::size_t most = 0, most_from = 0;
  for (std::size_t i = 0, j = 0; i < at.size(); ++i) {
    while (at[i] - at[j] >= 980'000) ++j;
    if (i - j + 1 > most) most = i - j + 1, most_from = j;
  }
  INFO("most in a window: ", most);
  if (most > 20) {  // what to look at if it happens (CI saw 33 once): the arrivals, and a session restart
    std::string arrivals;
    for (std::size_t k = most_from; k < std::min(at.size(), most_from + most); ++k)
      arrivals += fmt::format(" +{}ms", (at[k] - at.front()) / 1000);
    MESSAGE("arrivals in the densest window (from the first):", arrivals, "\n", walhook.log_tail(6000));
  }
  CHECK(most <= 20);
  CHECK(most >= 15);  // and it does go at about the rate: the limit is what spaces them
  // 90 at 20/s: the first 20 at once, the rest at 20 per second after it — at least 3.5 s.
  CHECK(at.back() - at.front() >= 3'400'000);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("rate: a limited endpoint whose deliveries wait too long follows the outbox and gets each event once") {
  // 120 events at 10/s wait ~12 s; past --max-wait-ms the waiting ones leave memory (the endpoint
  // follows the outbox) and are read back at the endpoint's pace — a page read back waits behind
  // the limit too. Each event arrives once (a page going back into its window used to re-send
  // the deliveries queued behind the one that went back).
  setup s("policies_rate_follow");
  auto walhook = s.start_walhook({"--max-wait-ms", "400"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.add("/slow", {"--max-rate", "10/s", "--max-concurrency", "4"});
  constexpr int events = 120;
  for (int i = 0; i < events; ++i) s.publish("acme", "tick", fmt::format(R"({{"i": {}}})", i));
  auto unique = [&] {
    std::set<std::string> ids;
    for (const auto& r : s.received("/slow")) ids.insert(r.webhook_id);
    return ids.size();
  };
  REQUIRE_MESSAGE(test::eventually([&] { return unique() == events; }, 90s), walhook.log_tail());
  std::this_thread::sleep_for(1500ms);  // a re-sent one would come at the rate: 10 per second
  CHECK(s.received("/slow").size() == events);
  CHECK(walhook.log().find("endpoint.following_outbox") != std::string::npos);  // the path under test was taken

  // One transaction of 30 events: the first few go at once (the burst), the rest wait too long
  // and follow the outbox. The cursor reads the transaction back; what was sent is not sent again.
  s.db.exec("SELECT walhook.publish('acme', 'batch', jsonb_build_object('i', i)) FROM generate_series(1, 30) AS i");
  REQUIRE_MESSAGE(test::eventually([&] { return unique() == events + 30; }, 90s), walhook.log_tail());
  std::this_thread::sleep_for(1500ms);
  std::map<std::string, int> times;
  for (const auto& r : s.received("/slow")) ++times[r.body];
  std::string twice;
  for (const auto& [body, n] : times)
    if (n > 1) {
      twice += fmt::format("{} ×{}\n", body, n);
      for (const auto& r : s.received("/slow", 0))
        if (r.body == body) twice += fmt::format("  at {} status {} concurrent {}\n", r.received_at_us, r.status, r.concurrent);
    }
  INFO("sent more than once:\n", twice);
  CHECK(s.received("/slow").size() == events + 30);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("filter changed while the endpoint follows the outbox: events committed before the change are routed as then, across a restart") {
  // The stream routes an event with the filter its endpoint has when the event commits. A paused
  // endpoint follows the outbox and has its events routed when read back; a filter changed
  // meanwhile must not decide for the events committed before it (they used to go unsent).
  setup s("policies_filter_change");
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const long long id = s.add("/f", {"--filter", R"({"data.kind": "a"})"});
  const pg::params ep{std::to_string(id)};
  REQUIRE(s.cli({"endpoint", "pause", std::to_string(id)}) == 0);
  std::set<std::string> expected;
  for (int i = 0; i < 8; ++i) {
    expected.insert(s.publish("acme", "t", fmt::format(R"({{"kind": "a", "i": {}}})", i)));
    s.publish("acme", "t", fmt::format(R"({{"kind": "b", "i": {}}})", i));  // the filter then: not routed
  }
  const std::string cursor = "SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1";
  REQUIRE_MESSAGE(test::eventually([&] { return s.value(cursor, ep) == "1"; }, 20s), walhook.log_tail());
  REQUIRE(s.cli({"endpoint", "update", std::to_string(id), "--filter", R"({"data.kind": "b"})"}) == 0);
  // The cursor keeps the old routing, durably.
  const std::string kept = "SELECT routing->0->>'filter' FROM walhook.endpoint_cursors WHERE endpoint_id = $1";
  REQUIRE_MESSAGE(test::eventually([&] { return s.value(kept, ep) == R"({"data.kind": "a"})"; }, 20s),
                  walhook.log_tail());
  for (int i = 0; i < 4; ++i) {
    s.publish("acme", "t", fmt::format(R"({{"kind": "a", "after": {}}})", i));  // the filter now: not routed
    expected.insert(s.publish("acme", "t", fmt::format(R"({{"kind": "b", "after": {}}})", i)));
  }
  // A restart in between: the routing before the change comes back from the cursor's row.
  REQUIRE(walhook.stop() == 0);
  auto again = s.start_walhook({}, "walhook (restarted)");
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  REQUIRE(s.cli({"endpoint", "resume", std::to_string(id)}) == 0);
  auto got = [&] {
    std::set<std::string> ids;
    for (const auto& r : s.received("/f")) ids.insert(r.webhook_id);
    return ids;
  };
  REQUIRE_MESSAGE(test::eventually([&] { return got().size() >= expected.size(); }, 30s), again.log_tail());
  std::this_thread::sleep_for(1s);  // nothing more comes
  CHECK(got() == expected);
  CHECK(s.received("/f").size() == expected.size());
  // The cursor is gone once the endpoint is back on the stream, and its routing with it.
  CHECK(test::eventually([&] { return s.value(cursor, ep) == "0"; }, 20s));
  CHECK(again.stop() == 0);
}

TEST_CASE("filter changed while a rate-limited endpoint's deliveries wait in memory, or while a window of its cursor is open: routed as when committed") {
  setup s("policies_filter_wait");
  auto walhook = s.start_walhook({"--max-wait-ms", "1500"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const long long id = s.add("/w", {"--max-rate", "5/s", "--filter", R"({"data.kind": "a"})"});
  auto kinds = [&](int batch) {
    std::map<std::string, int> n;
    for (const auto& r : s.received("/w"))
      if (r.body.find(fmt::format(R"("batch": {}}}}})", batch)) != std::string::npos)  // jsonb puts it last
        ++n[r.body.find(R"("kind": "a")") != std::string::npos ? "a" : "b"];
    return n;
  };
  auto publish = [&](int batch, int each) {
    s.db.exec(fmt::format("SELECT walhook.publish('acme', 't', jsonb_build_object('batch', {}, 'i', i, 'kind', "
                          "CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END)) FROM generate_series(1, {}) AS i",
                          batch, 2 * each));
  };
  // 1. One transaction of 40 (20 a, 20 b) waits behind the rate; the filter changes before its
  //    deliveries move to the outbox: the cursor reads the transaction back with the filter it
  //    was routed with — 20 a, no b.
  publish(1, 20);
  REQUIRE(s.cli({"endpoint", "update", std::to_string(id), "--filter", R"({"data.kind": "b"})"}) == 0);
  REQUIRE_MESSAGE(test::eventually([&] { return kinds(1)["a"] == 20; }, 60s), walhook.log_tail());
  CHECK(walhook.log().find("endpoint.following_outbox") != std::string::npos);  // the path under test
  REQUIRE(s.cli({"endpoint", "update", std::to_string(id), "--max-rate", "20/s"}) == 0);
  // 2. Paused mid-drain (a window of its cursor open, its snapshot older than what follows), then
  //    the filter changes back between two batches: 10 b before the change, 10 a after it.
  const pg::params ep{std::to_string(id)};
  REQUIRE(s.cli({"endpoint", "pause", std::to_string(id)}) == 0);
  publish(2, 150);  // b is the filter now: 150 b
  REQUIRE(s.cli({"endpoint", "resume", std::to_string(id)}) == 0);
  REQUIRE(test::eventually([&] { return kinds(2)["b"] >= 40; }, 30s));
  REQUIRE(s.cli({"endpoint", "pause", std::to_string(id)}) == 0);
  publish(3, 10);
  REQUIRE(s.cli({"endpoint", "update", std::to_string(id), "--filter", R"({"data.kind": "a"})"}) == 0);
  publish(4, 10);
  REQUIRE(s.cli({"endpoint", "resume", std::to_string(id)}) == 0);
  REQUIRE_MESSAGE(test::eventually([&] { return kinds(4)["a"] == 10 && kinds(2)["b"] == 150; }, 60s), walhook.log_tail());
  std::this_thread::sleep_for(1s);
  CHECK(kinds(1) == std::map<std::string, int>{{"a", 20}});
  CHECK(kinds(2) == std::map<std::string, int>{{"b", 150}});
  CHECK(kinds(3) == std::map<std::string, int>{{"b", 10}});
  CHECK(kinds(4) == std::map<std::string, int>{{"a", 10}});
  CHECK(walhook.stop() == 0);
}

TEST_CASE("replay by filter: a dry run counts first, then only the matching dead letters go again (CLI and API)") {
  setup s("policies_replay");
  relay::receiver_behaviour down;
  down.status = 500;
  s.rcv->set_behaviour("/r", down);
  auto walhook = s.start_walhook({"--max-attempts", "1", "--admin-listen", "127.0.0.1:0"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const long long id = s.add("/r", {});
  const auto paid_150 = s.publish("acme", "order.paid", R"({"amount": 150})");
  const auto paid_50 = s.publish("acme", "order.paid", R"({"amount": 50})");
  const auto refunded_500 = s.publish("acme", "order.refunded", R"({"amount": 500})");
  const auto paid_300 = s.publish("acme", "order.paid", R"({"amount": 300})");
  const pg::params ep{std::to_string(id)};
  const std::string dead = "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'dead'";
  REQUIRE_MESSAGE(test::eventually([&] { return s.value(dead, ep) == "4"; }, 30s), walhook.log_tail());
  s.rcv->set_behaviour("/r", {});

  const std::vector<std::string> big_paid{"replay", "--endpoint", std::to_string(id), "--event-type", "order.paid",
                                          "--filter", R"({"data.amount": {"$gte": 100}})"};
  auto with = [](std::vector<std::string> v, const std::string& flag) {
    v.push_back(flag);
    return v;
  };
  REQUIRE(s.cli(with(big_paid, "--dry-run")) == 0);
  CHECK(s.out.find("would replay 2 deliveries (dry run: nothing changed)") != std::string::npos);
  CHECK(s.value(dead, ep) == "4");
  auto bad = big_paid;
  bad[6] = R"({"amount": 100})";
  CHECK(s.cli(bad) != 0);
  CHECK(s.out.find("--filter: amount: paths start at the webhook body") != std::string::npos);

  REQUIRE(s.cli(big_paid) == 0);
  CHECK(s.out.find("replayed 2 deliveries") != std::string::npos);
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/r").size() == 2; }, 20s), walhook.log_tail());
  std::set<std::string> got;
  for (const auto& r : s.received("/r")) got.insert(r.webhook_id);
  CHECK(got == std::set<std::string>{paid_150, paid_300});

  // The API: the filter as a JSON object; a dry run changes nothing and is not audited.
  const auto port = walhook.admin_port();
  const std::string path = fmt::format("/api/endpoints/{}/replay", id);
  auto a = test::inbox::post(port, path, {}, R"({"filter": {"data.amount": {"$lt": 100}}, "dry_run": true})");
  CHECK(a.status == 200);
  CHECK(a.body.find(R"("replayed":1,"dry_run":true)") != std::string::npos);
  CHECK(s.received("/r", 0).size() == 6);  // 4 failures, 2 replayed: nothing more
  a = test::inbox::post(port, path, {}, R"({"filter": "{\"data.amount\": {\"$lt\": 100}}"})");
  CHECK(a.status == 200);
  CHECK(a.body.find(R"("replayed":1,"dry_run":false)") != std::string::npos);
  a = test::inbox::post(port, path, {}, R"({"filter": {"data.amount": {"$regex": "1"}}})");
  CHECK(a.status == 400);
  CHECK(a.body.find("unknown operator $regex") != std::string::npos);
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/r").size() == 3; }, 20s), walhook.log_tail());
  CHECK(s.received("/r").back().webhook_id == paid_50);
  CHECK(s.value(dead, ep) == "1");  // the refund, which no replay matched
  CHECK(s.value("SELECT event_id::text FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'dead'", ep) ==
        refunded_500);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("trace context: an event's traceparent reaches the endpoint as a child span, a new span per attempt; an invalid one is not sent") {
  setup s("policies_trace");
  relay::receiver_behaviour once;
  once.script = {500};  // the first attempt fails: the retry is another span of the same trace
  s.rcv->set_behaviour("/t", once);
  relay::receiver_behaviour too_large;
  too_large.status = 413;  // dead at once: its log line names the trace
  s.rcv->set_behaviour("/dead", too_large);
  auto walhook = s.start_walhook({"--backoff-base-ms", "100"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.add("/t", {"--event-types", "traced,untraced,garbled"});
  s.add("/dead", {"--event-types", "doomed"});
  const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string parent = "00-" + trace + "-00f067aa0ba902b7-01";
  const auto publish = [&](const std::string& type, const std::optional<std::string>& traceparent) {
    return s.value("SELECT walhook.publish('acme', $1, '{}'::jsonb, traceparent => $2)", {type, traceparent});
  };
  const auto traced = publish("traced", parent);
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/t").size() == 1; }, 20s), walhook.log_tail());
  const auto attempts = s.received("/t", 0);
  REQUIRE(attempts.size() == 2);
  std::set<std::string> spans;
  for (const auto& a : attempts) {
    const auto tp = a.header("traceparent");
    INFO(tp);
    REQUIRE(tp.size() == 55);
    CHECK(tp.starts_with("00-" + trace + "-"));
    CHECK(tp.ends_with("-01"));
    spans.insert(tp.substr(36, 16));
  }
  CHECK(spans.size() == 2);                         // a span of its own per attempt
  CHECK(spans.count("00f067aa0ba902b7") == 0);      // never the application's span

  publish("untraced", std::nullopt);
  publish("garbled", "00-" + trace + "-00f067aa0ba902b7-01\r\nX-Injected: 1");  // not a traceparent: not sent
  REQUIRE(test::eventually([&] { return s.received("/t").size() == 3; }, 20s));
  for (const auto& r : s.received("/t")) {
    if (r.webhook_id == traced) continue;
    CHECK(r.header("traceparent").empty());
    CHECK(r.header("X-Injected").empty());
  }

  // walhook send refuses what it would store and never send.
  CHECK(s.cli({"send", "--tenant", "acme", "--type", "untraced", "--data", "{}", "--traceparent", "garbage"}) != 0);
  CHECK(s.out.find("--traceparent is not a W3C traceparent") != std::string::npos);

  publish("doomed", parent);
  CHECK_MESSAGE(test::eventually([&] { return walhook.count_in_log("\"trace_id\":\"" + trace + "\"") >= 1; }, 20s),
                walhook.log_tail());
  CHECK(walhook.stop() == 0);
}

