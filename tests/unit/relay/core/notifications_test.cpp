// relay/core/notifications.hpp as tables: which notices an attempt's decision (made by the real
// decide()) or a dead delivery yields, their rate limits, the no-loop rule, and the outbox rows a
// notice becomes (addressing, merge keys, payload fields, no secret).

#include "delivery/signing.hpp"
#include "relay/core/notifications.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <memory>
#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::relay;
using namespace std::chrono_literals;
namespace types = walhook::relay::notification_types;

namespace {

const sys_time sys0 = sys_time{} + 1'800'000'000s;
const steady_time mono0 = steady_time{} + 1000h;

endpoint make_endpoint(std::int64_t id = 1, std::string tenant = "acme", std::optional<std::int64_t> contact = {}) {
  endpoint e;
  e.id = id;
  e.tenant_id = std::move(tenant);
  e.url = "https://user:hunter2@hooks.example/in?token=abc";
  e.secret = delivery::generate_secret();
  e.contact_endpoint_id = contact;
  resolve_endpoint(e);
  return e;
}

/// One endpoint's attempts through decide() and the notifier, the breaker carried along.
struct run {
  endpoint ep = make_endpoint();
  delivery::breaker_state breaker;
  notifier n;
  outcome_policy policy;
  std::string event_type = "order.paid";
  explicit run(notification_policy p = {}) : n(std::move(p)) {
    policy.breaker.failure_threshold = 3;
    policy.breaker.pause_step = 60s;
  }

  struct step_result {
    std::vector<std::string> types;
    bool log_failing = false;
    std::vector<notice> notices;
  };
  /// An attempt at `offset` from the start answered `status` (0: a transport error), with an
  /// optional Retry-After.
  step_result attempt(std::chrono::seconds offset, int status, std::optional<std::chrono::seconds> retry_after = {}) {
    auto ev = std::make_shared<delivery::event>();
    ev->id = "00000000-0000-0000-0000-000000000001";
    ev->tenant_id = ep.tenant_id;
    ev->type = event_type;
    ev->created_at = "2027-01-15 08:00:00+00";
    delivery::job j;
    j.ev = ev;
    j.endpoint_id = ep.id;
    delivery::attempt_outcome o;
    o.status = status;
    o.kind = status >= 200 && status < 300 ? delivery::verdict::delivered
             : status == 410              ? delivery::verdict::gone
                                          : delivery::verdict::retry;
    if (o.kind != delivery::verdict::delivered) o.error = status ? "HTTP " + std::to_string(status) : "connection refused";
    o.retry_after = retry_after;
    auto d = decide(j, ep, breaker, o, sys0 + offset, 0.5, policy);
    const bool disabling = d.disable && ep.status != endpoint_status::disabled;
    auto out = n.after_attempt(ep, breaker, d, disabling, is_notification_type(event_type), mono0 + offset);
    breaker = d.breaker;
    if (disabling) ep.status = endpoint_status::disabled;
    step_result r;
    r.log_failing = out.log_failing;
    for (auto& x : out.notices) r.types.push_back(x.type);
    r.notices = std::move(out.notices);
    return r;
  }
};

using names = std::vector<std::string>;
const std::string failing(types::failing), paused(types::paused), disabled(types::disabled),
    recovered(types::recovered), dead(types::dead);

sql::delivery_outcome dead_record(std::string reason, std::optional<int> status = {}) {
  return {sql::delivery_status::dead, 3, std::nullopt, std::nullopt, status, std::move(reason)};
}

simdjson::padded_string padded(const std::string& s) { return simdjson::padded_string(s); }

}  // namespace

TEST_CASE("notifier: one failure streak — failing once with the log line, paused once, recovered once") {
  run r;
  struct row {
    std::chrono::seconds at;
    int status;
    names expected;
    bool log;
  };
  // threshold 3, first pause 60 s, then 120 s per failed probe round.
  const std::vector<row> table{
      {0s, 503, {failing}, true},   // 0 → 1: the streak starts
      {1s, 503, {}, false},         // 2
      {2s, 0, {paused}, false},     // 3: the breaker pauses it
      {3s, 503, {}, false},         // late result of the paused round
      {70s, 503, {}, false},        // a failed probe round extends the pause: no second paused
      {300s, 200, {recovered}, false},
      {301s, 200, {}, false},       // one success between successes is not news
  };
  for (const auto& t : table) {
    CAPTURE(t.at.count());
    auto got = r.attempt(t.at, t.status);
    CHECK(got.types == t.expected);
    CHECK(got.log_failing == t.log);
  }
}

TEST_CASE("notifier: a flapping endpoint gets one failing per 10 minutes, and no recovered for streaks not announced") {
  run r;
  CHECK(r.attempt(0s, 500).types == names{failing});
  CHECK(r.attempt(1s, 200).types == names{recovered});
  // New streaks within 10 minutes: neither notice nor log line; their ends are not news either.
  for (int i = 1; i <= 5; ++i) {
    auto f = r.attempt(std::chrono::seconds{60 * i}, 500);
    CHECK(f.types.empty());
    CHECK_FALSE(f.log_failing);
    CHECK(r.attempt(std::chrono::seconds{60 * i + 1}, 200).types.empty());
  }
  // 10 minutes after the last announced one: again.
  auto again = r.attempt(600s, 500);
  CHECK(again.types == names{failing});
  CHECK(again.log_failing);
}

TEST_CASE("notifier: the failing notice's fields") {
  run r;
  auto got = r.attempt(5s, 503);
  REQUIRE(got.notices.size() == 1);
  const auto& n = got.notices[0];
  CHECK(n.endpoint_id == 1);
  CHECK(n.tenant_id == "acme");
  CHECK(n.url.find("hunter2") == std::string::npos);
  CHECK(n.url.find("token=abc") == std::string::npos);
  CHECK(n.last_status == 503);
  CHECK(n.last_error == "HTTP 503");
  CHECK(n.consecutive_failures == 1);
  CHECK(n.failing_since == sys0 + 5s);
}

TEST_CASE("notifier: 410 disables (once), a Retry-After pause says so") {
  SUBCASE("410 Gone") {
    run r;
    auto got = r.attempt(0s, 410);
    CHECK(got.types == names{disabled});  // the breaker does not count a 410: no failing
    REQUIRE(got.notices.size() == 1);
    CHECK(got.notices[0].reason == "HTTP 410 Gone");
    CHECK(got.notices[0].last_status == 410);
    CHECK(r.attempt(1s, 410).types.empty());  // already disabled: not news again
  }
  SUBCASE("failing for days") {
    run r;
    r.policy.breaker.disable_after = 3600s;
    r.policy.breaker.failure_threshold = 1000;
    CHECK(r.attempt(0s, 500).types == names{failing});
    auto got = r.attempt(3600s, 500);
    CHECK(got.types == names{disabled});
    CHECK(got.notices[0].reason.value_or("").starts_with("failing continuously since"));
  }
  SUBCASE("Retry-After on the first failure") {
    run r;
    auto got = r.attempt(0s, 429, 30s);
    CHECK(got.types == names{failing, paused});
    CHECK(got.notices[1].reason == "Retry-After");
    CHECK(got.notices[1].paused_until == sys0 + 30s);
  }
}

TEST_CASE("notifier: deliveries of walhook.* events: no failing or dead notice; a pause or disable they cause goes to the operator tenant only") {
  run r;
  r.ep.contact_endpoint_id = 2;
  r.event_type = std::string(types::disabled);
  auto first = r.attempt(0s, 500);
  CHECK(first.types.empty());  // failing: only the log line
  CHECK(first.log_failing);
  CHECK(r.attempt(1s, 500).types.empty());
  // The breaker pauses it (threshold 3): announced once, to the operator tenant only — a contact
  // endpoint failing on walhook's news is never told about itself, nor is its own contact.
  auto pause = r.attempt(2s, 500);
  REQUIRE(pause.types == names{paused});
  CHECK(pause.notices[0].to_operator);
  CHECK_FALSE(pause.notices[0].to_contact);
  CHECK(r.attempt(3s, 500).types.empty());   // a late result of the paused round
  CHECK(r.attempt(70s, 500).types.empty());  // a failed probe round extends the pause: no news
  auto back = r.attempt(300s, 200);
  REQUIRE(back.types == names{recovered});  // ends the announced pause, where it was announced
  CHECK_FALSE(back.notices[0].to_contact);
  auto gone = r.attempt(400s, 410);
  REQUIRE(gone.types == names{disabled});
  CHECK_FALSE(gone.notices[0].to_contact);
  CHECK(gone.notices[0].reason == "HTTP 410 Gone");
  CHECK(r.attempt(401s, 410).types.empty());  // once per transition
  CHECK(r.n.dead(r.ep, "e1", dead_record("HTTP 500"), true, mono0).empty());
  // Its rows: the operator tenant's, never the contact's.
  auto contact = make_endpoint(2, "acme");
  auto rows = rows_of(gone.notices[0], "ops", &contact);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].tenant_id == "ops");
  CHECK_FALSE(rows[0].endpoint_id);
  // A streak that a customer event's failure announced ends with recovered, whichever delivery
  // ends it; and walhook's own failure did not silence that failing notice.
  run mixed;
  mixed.event_type = std::string(types::failing);
  CHECK(mixed.attempt(0s, 500).log_failing);
  CHECK(mixed.attempt(1s, 200).types.empty());
  mixed.event_type = "order.paid";
  auto customer = mixed.attempt(2s, 500);
  CHECK(customer.types == names{failing});
  CHECK_FALSE(customer.log_failing);  // the log line's own 10 minutes
  mixed.event_type = std::string(types::failing);
  auto ended = mixed.attempt(3s, 200);
  CHECK(ended.types == names{recovered});
  CHECK(ended.notices[0].to_contact);  // the contact heard of the streak: it hears of its end
  CHECK(is_notification_type("walhook.delivery.dead"));
  CHECK_FALSE(is_notification_type("order.walhook.paid"));
}

TEST_CASE("notifier: a pause this process did not announce (loaded after a restart) ends with recovered") {
  run r;
  r.breaker.consecutive_failures = 25;
  r.breaker.first_failure_at = sys0 - 1h;
  r.breaker.paused_until = sys0 - 1s;  // probing
  CHECK(r.attempt(0s, 200).types == names{recovered});
}

TEST_CASE("notifier: dead deliveries — at most one notice a minute per endpoint, counting those in between") {
  notifier n;
  auto a = make_endpoint(1), b = make_endpoint(2, "other");
  auto firsts = n.dead(a, "e1", dead_record("HTTP 413", 413), false, mono0);
  REQUIRE(firsts.size() == 1);
  const auto* first = &firsts[0];
  CHECK(first->type == dead);
  CHECK(first->dead_count == 1);
  CHECK(first->last_event_id == "e1");
  CHECK(first->reason == "HTTP 413");
  CHECK(first->last_status == 413);
  CHECK(n.dead(a, "e2", dead_record("max attempts: HTTP 500"), false, mono0 + 10s).empty());
  CHECK(n.dead(a, "e3", dead_record("max attempts: HTTP 502", 502), false, mono0 + 20s).empty());
  CHECK(n.dead(b, "x1", dead_record("HTTP 413"), false, mono0 + 20s).size() == 1);  // per endpoint
  CHECK(n.due(mono0 + 59s).empty());
  {
    // A graceful stop takes what is counted before its interval is over (on a copy: the rest of
    // this case goes on without it).
    notifier stopping = n;
    auto flushed = stopping.due(mono0 + 30s, true);
    REQUIRE(flushed.size() == 1);
    CHECK(flushed[0].dead_count == 2);
    CHECK(stopping.due(mono0 + 31s, true).empty());
  }
  auto later = n.due(mono0 + 60s);
  REQUIRE(later.size() == 1);
  CHECK(later[0].endpoint_id == 1);
  CHECK(later[0].dead_count == 2);
  CHECK(later[0].last_event_id == "e3");
  CHECK(later[0].reason == "max attempts: HTTP 502");
  CHECK(n.due(mono0 + 200s).empty());  // nothing counted since
  // Counted since the flush, then the next dead after the interval carries them.
  CHECK(n.dead(a, "e4", dead_record("r"), false, mono0 + 61s).empty());
  auto carried = n.dead(a, "e5", dead_record("r"), false, mono0 + 121s);
  REQUIRE(carried.size() == 1);
  CHECK(carried[0].dead_count == 2);
  CHECK(n.due(mono0 + 1000s).empty());
  // An endpoint forgotten starts over.
  n.forget(1);
  CHECK(n.dead(a, "e6", dead_record("r"), false, mono0 + 122s).size() == 1);
}

TEST_CASE("rows_of: where a notice goes") {
  auto ep = make_endpoint(1, "acme", 2);
  notice n;
  n.type = failing;
  n.endpoint_id = 1;
  n.tenant_id = "acme";
  n.contact_endpoint_id = 2;
  auto contact = make_endpoint(2, "acme");
  auto self = make_endpoint(1, "acme");
  auto retired = make_endpoint(2, "acme");
  retired.retired = true;
  auto operators = make_endpoint(2, "walhook-operator");
  auto other = make_endpoint(2, "globex");

  struct row {
    const char* name;
    std::string operator_tenant;
    const endpoint* contact;
    std::optional<std::int64_t> contact_id;
    std::vector<std::pair<std::string, std::optional<std::int64_t>>> expected;  ///< (tenant, direct endpoint)
  };
  const std::vector<row> table{
      {"operator tenant and contact", "walhook-operator", &contact, 2, {{"walhook-operator", std::nullopt}, {"acme", 2}}},
      {"operator notifications off", "", &contact, 2, {{"acme", 2}}},
      {"no contact", "walhook-operator", nullptr, std::nullopt, {{"walhook-operator", std::nullopt}}},
      {"contact unknown to walhook", "walhook-operator", nullptr, 2, {{"walhook-operator", std::nullopt}}},
      {"contact is the endpoint itself", "", &self, 1, {}},
      {"contact retired", "", &retired, 2, {}},
      {"contact of the operator tenant, subscribed: once", "walhook-operator", &operators, 2,
       {{"walhook-operator", std::nullopt}}},
      // Another tenant's contact (possible only for rows written before migration 8): never.
      {"contact of the operator tenant, when off", "", &operators, 2, {}},
      {"contact of another tenant", "walhook-operator", &other, 2, {{"walhook-operator", std::nullopt}}},
  };
  for (const auto& t : table) {
    CAPTURE(t.name);
    notice x = n;
    x.contact_endpoint_id = t.contact_id;
    auto rows = rows_of(x, t.operator_tenant, t.contact);
    std::vector<std::pair<std::string, std::optional<std::int64_t>>> got;
    for (const auto& r : rows) {
      got.emplace_back(r.tenant_id, r.endpoint_id);
      CHECK(r.event_type == failing);
    }
    CHECK(got == t.expected);
  }
}

TEST_CASE("rows_of: merge keys (state notices only), aggregate ids, payload fields, no secret") {
  auto ep = make_endpoint(7, "acme");
  struct row {
    std::string type;
    bool merged;
    std::vector<std::string> fields;  ///< beyond the common ones
  };
  const std::vector<row> table{
      {failing, true, {"consecutive_failures", "failing_since"}},
      {paused, true, {"consecutive_failures", "failing_since", "paused_until", "reason"}},
      {recovered, true, {}},
      {disabled, false, {"consecutive_failures", "failing_since", "reason"}},
      {dead, false, {"dead_count", "last_event_id", "reason"}},
  };
  for (const auto& t : table) {
    CAPTURE(t.type);
    notice n;
    n.type = t.type;
    n.endpoint_id = 7;
    n.tenant_id = "acme";
    n.url = delivery::redact_url(ep.url);
    n.last_status = 503;
    n.last_error = std::string("bad\0gateway", 11);  // a NUL that jsonb would refuse
    n.consecutive_failures = 4;
    n.failing_since = sys0;
    n.paused_until = sys0 + 60s;
    n.reason = "why";
    n.dead_count = 3;
    n.last_event_id = "e9";
    auto rows = rows_of(n, "ops", nullptr);
    REQUIRE(rows.size() == 1);
    const auto& r = rows[0];
    CHECK(r.tenant_id == "ops");
    CHECK(r.aggregate_id == "walhook.endpoint:7");
    CHECK(r.merge_key == (t.merged ? std::optional<std::string>("walhook.endpoint:7") : std::nullopt));
    CHECK(r.payload.find(ep.secret) == std::string::npos);
    CHECK(r.payload.find("hunter2") == std::string::npos);
    simdjson::dom::parser parser;
    auto doc = padded(r.payload);
    simdjson::dom::object obj;
    REQUIRE(parser.parse(doc).get(obj) == simdjson::SUCCESS);
    std::vector<std::string> keys;
    for (auto field : obj) keys.emplace_back(field.key);
    std::vector<std::string> expected{"endpoint_id", "tenant_id", "url", "last_status", "last_error"};
    expected.insert(expected.end(), t.fields.begin(), t.fields.end());
    CHECK(keys == expected);
    CHECK(int64_t(obj["endpoint_id"]) == 7);
    CHECK(std::string_view(obj["last_error"]) == "badgateway");
    if (t.type == dead) CHECK(int64_t(obj["dead_count"]) == 3);
  }
}

TEST_CASE("rows_of: a notice over the budget goes to the contact endpoint only; one to the operator tenant only never to it") {
  auto contact = make_endpoint(2, "acme");
  auto operators = make_endpoint(2, "ops");  // a contact that is an operator endpoint, subscribed to all
  notice n;
  n.type = failing;
  n.endpoint_id = 1;
  n.tenant_id = "acme";
  n.contact_endpoint_id = 2;
  using route = std::pair<std::string, std::optional<std::int64_t>>;
  auto routes = [](const std::vector<sql::publish_event>& rows) {
    std::vector<route> out;
    for (const auto& r : rows) out.emplace_back(r.tenant_id, r.endpoint_id);
    return out;
  };
  CHECK(routes(rows_of(n, "ops", &contact)) == std::vector<route>{{"ops", std::nullopt}, {"acme", 2}});
  notice held = n;
  held.to_operator = false;
  CHECK(routes(rows_of(held, "ops", &contact)) == std::vector<route>{{"acme", 2}});
  // The operator's row would have reached that contact; held back, it gets its direct one.
  CHECK(routes(rows_of(n, "ops", &operators)) == std::vector<route>{{"ops", std::nullopt}});
  // (An operator-tenant contact of another tenant's endpoint gets nothing direct since issue 19:
  // a contact is one of the endpoint's own tenant.)
  CHECK(routes(rows_of(held, "ops", &operators)).empty());
  notice own = n;
  own.to_contact = false;
  CHECK(routes(rows_of(own, "ops", &contact)) == std::vector<route>{{"ops", std::nullopt}});
  own.to_operator = false;
  CHECK(rows_of(own, "ops", &contact).empty());
}

namespace {
/// A notifier whose operator tenant gets `budget` notices a minute.
notifier budgeted(int budget, std::string operator_tenant = "ops") {
  notification_policy p;
  p.operator_tenant = std::move(operator_tenant);
  p.budget_per_minute = budget;
  return notifier(p);
}

/// A 410 on endpoint `id` (disabled) and its delivery ending dead, at `at`: the notices.
std::vector<notice> outage(notifier& n, std::int64_t id, steady_time at) {
  auto ep = make_endpoint(id, "t" + std::to_string(id), 100 + id);
  decision d;
  d.result = verdict::dead;
  d.disable = "HTTP 410 Gone";
  d.last_status = 410;
  auto out = n.after_attempt(ep, {}, d, true, false, at).notices;
  auto more = n.dead(ep, "e" + std::to_string(id), dead_record("HTTP 410 Gone", 410), false, at);
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

std::int64_t held_back(const notice& digest, std::string_view type) {
  for (const auto& [t, count] : digest.held_back)
    if (t == type) return count;
  return 0;
}
}  // namespace

TEST_CASE("notifier: the global budget — N endpoints failing at once give the operator tenant M notices and one digest") {
  auto n = budgeted(3);
  std::vector<notice> all;
  for (std::int64_t id = 1; id <= 5; ++id) {  // 10 notices in 5 s: disabled and dead each
    auto got = outage(n, id, mono0 + std::chrono::seconds{id - 1});
    all.insert(all.end(), got.begin(), got.end());
  }
  REQUIRE(all.size() == 10);
  int sent = 0;
  for (const auto& x : all) {
    sent += x.to_operator;
    CHECK(x.to_contact);  // contacts are not budgeted: each hears of its own endpoint
    CHECK(x.type != types::digest);
  }
  CHECK(sent == 3);
  CHECK(all[0].to_operator);
  CHECK(all[2].to_operator);
  CHECK_FALSE(all[3].to_operator);
  // Within the minute: no digest yet.
  CHECK(n.due(mono0 + 59s).empty());
  auto d = n.due(mono0 + 60s);
  REQUIRE(d.size() == 1);
  CHECK(d[0].type == types::digest);
  CHECK(d[0].sent == 3);
  CHECK(held_back(d[0], disabled) == 3);  // endpoints 3, 4, 5
  CHECK(held_back(d[0], dead) == 4);      // endpoints 2 … 5
  CHECK(d[0].endpoints == 4);
  CHECK(d[0].sample_endpoint_ids == std::vector<std::int64_t>{2, 3, 4, 5});
  CHECK_FALSE(d[0].to_contact);
  CHECK(n.due(mono0 + 120s).empty());  // one digest per minute that held any back
  // A new minute starts with the next notice, under budget again.
  auto later = outage(n, 6, mono0 + 130s);
  REQUIRE(later.size() == 2);
  CHECK(later[0].to_operator);
  CHECK(later[1].to_operator);

  // The digest's row: the operator tenant's only, a fact, and its payload.
  auto contact = make_endpoint(101, "t1");
  auto rows = rows_of(d[0], "ops", &contact);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].tenant_id == "ops");
  CHECK(rows[0].event_type == "walhook.endpoints.digest");
  CHECK_FALSE(rows[0].endpoint_id);
  CHECK_FALSE(rows[0].merge_key);
  CHECK(rows[0].aggregate_id == "walhook.endpoints");
  simdjson::dom::parser parser;
  auto doc = padded(rows[0].payload);
  simdjson::dom::object obj;
  REQUIRE(parser.parse(doc).get(obj) == simdjson::SUCCESS);
  CHECK(int64_t(obj["sent"]) == 3);
  CHECK(int64_t(obj["held_back"]) == 7);
  CHECK(int64_t(obj["by_type"]["walhook.endpoint.disabled"]) == 3);
  CHECK(int64_t(obj["by_type"]["walhook.delivery.dead"]) == 4);
  CHECK(int64_t(obj["endpoints"]) == 4);
  CHECK(simdjson::dom::array(obj["endpoint_ids"]).size() == 4);
  CHECK(rows_of(d[0], "", &contact).empty());
}

TEST_CASE("notifier: the budget's digest — a sample of ids, before the next minute's notices, flushed by a graceful stop") {
  notification_policy p;
  p.operator_tenant = "ops";
  p.budget_per_minute = 1;
  p.digest_sample = 2;
  notifier n(p);
  for (std::int64_t id = 1; id <= 4; ++id) outage(n, id, mono0);
  // The minute is over, and a notice comes before any due(): the digest comes first.
  auto next = outage(n, 9, mono0 + 61s);
  REQUIRE(next.size() == 3);
  CHECK(next[0].type == types::digest);
  CHECK(next[0].endpoints == 4);
  CHECK(next[0].sample_endpoint_ids == std::vector<std::int64_t>{1, 2});  // the first two, of 4
  CHECK(held_back(next[0], dead) == 4);
  CHECK(next[1].to_operator);   // the new minute's first
  CHECK_FALSE(next[2].to_operator);
  // A graceful stop publishes what the minute under way held back.
  auto stop = n.due(mono0 + 62s, true);
  REQUIRE(stop.size() == 1);
  CHECK(stop[0].type == types::digest);
  CHECK(held_back(stop[0], dead) == 1);
  CHECK(n.due(mono0 + 63s, true).empty());
}

TEST_CASE("notifier: without an operator tenant there is no budget and no digest") {
  auto n = budgeted(1, "");
  for (std::int64_t id = 1; id <= 5; ++id)
    for (const auto& x : outage(n, id, mono0)) CHECK(x.to_operator);  // nothing to hold back: contacts only
  CHECK(n.due(mono0 + 61s, true).empty());
}
