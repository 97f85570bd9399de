// Processing the inbox (issue 21, migration 011): a handler that answers "not yet" (409/425)
// defers an event out of its key's line, so the predecessor it waits for gets through; a key
// whose predecessor never comes is quarantined after the deferral limit while other keys flow;
// a poison event is quarantined when its retry schedule is spent and replayed after a fix; an
// inbox destination on loopback is delivered while the SSRF guard still refuses a customer's.
// A handler outage pauses the breaker for the schedule's first wait only.
// Real PostgreSQL, `walhook ingest` and `walhook run` as processes, the receiver as the handler.

#include "tests/integration/inbox_support.hpp"

#include <algorithm>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;
using namespace walhook::test::inbox;

namespace {

/// The handler's answers on `path`, in arrival order, as "type:status" (e.g. "order.shipped:409").
std::vector<std::string> answers(inbox_setup& s, const std::string& path) {
  std::vector<std::string> out;
  for (const auto& r : s.received(path, 0)) {
    const auto at = r.body.find(R"("type": ")");
    const auto type = at == std::string::npos ? std::string("?") : r.body.substr(at + 9, r.body.find('"', at + 9) - at - 9);
    out.push_back(fmt::format("{}:{}", type, r.status));
  }
  return out;
}

std::ptrdiff_t position(const std::vector<std::string>& v, const std::string& item) {
  auto it = std::find(v.begin(), v.end(), item);
  return it == v.end() ? -1 : it - v.begin();
}

}  // namespace

TEST_CASE("out of order: 'shipped' before 'paid' is deferred, 'paid' passes it, both are applied in order") {
  inbox_setup s("inbox_defer");
  s.add_source("shop", {"--order-key", "/data/order", "--retry-schedule", "1s"});
  // The handler cannot apply 'shipped' before 'paid': it answers 409 (not yet) the first two times.
  relay::receiver_behaviour handler;
  handler.fail_marker = "order.shipped";
  handler.fail_times = 2;
  handler.fail_status = 409;
  s.rcv->set_behaviour("/shop", handler);
  ingest_process ingest(s.url);
  const auto port = ingest.port();
  REQUIRE(port != 0);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  const auto shipped = event_body("order.shipped", "o1");
  REQUIRE(post(port, "/in/shop", s.partner.headers("evt_shipped", shipped), shipped).status == 200);
  // The first 409: 'shipped' is deferred; its predecessor arrives only now.
  REQUIRE(test::eventually([&] { return s.received("/shop", 409).size() == 1; }, 20s));
  const auto paid = event_body("order.paid", "o1");
  REQUIRE(post(port, "/in/shop", s.partner.headers("evt_paid", paid), paid).status == 200);
  const auto other = event_body("order.paid", "o2");
  REQUIRE(post(port, "/in/shop", s.partner.headers("evt_other", other), other).status == 200);

  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/shop").size() == 3; }, 30s), walhook.log_tail());
  const auto seen = answers(s, "/shop");
  INFO(fmt::format("{}", fmt::join(seen, ", ")));
  // Applied in order: 'paid' of o1 was not held behind the deferred 'shipped' of o1.
  CHECK(position(seen, "order.paid:200") >= 0);
  CHECK(position(seen, "order.paid:200") < position(seen, "order.shipped:200"));
  CHECK(std::count(seen.begin(), seen.end(), "order.shipped:409") == 2);
  // Two deferrals, no failure: the delivery is done, its deferrals counted, the breaker untouched.
  // (The row is written after the answer: wait for it, as a reader of walhook.deliveries would.)
  const std::string shipped_row = "SELECT d.status || ' ' || d.attempts || ' ' || d.deferrals FROM walhook.deliveries d "
                                  "JOIN walhook.outbox o ON o.id = d.event_id WHERE o.payload->>'event_id' = 'evt_shipped'";
  CHECK_MESSAGE(test::eventually([&] { return s.value(shipped_row) == "delivered 3 2"; }, 10s), s.value(shipped_row));
  CHECK(s.value("SELECT coalesce(max(consecutive_failures), 0) FROM walhook.endpoint_health") == "0");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a key whose predecessor never arrives is quarantined after the deferral limit; other keys are not held up") {
  inbox_setup s("inbox_quarantine_key");
  s.add_source("carrier", {"--order-key", "/data/order", "--max-deferrals", "2", "--retry-schedule", "1s"});
  relay::receiver_behaviour handler;  // 'refunded' waits for a 'paid' that never comes
  handler.fail_marker = "order.refunded";
  handler.fail_times = 1000;
  handler.fail_status = 425;
  s.rcv->set_behaviour("/carrier", handler);
  ingest_process ingest(s.url);
  const auto port = ingest.port();
  REQUIRE(port != 0);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  const auto refunded = event_body("order.refunded", "o5");
  REQUIRE(post(port, "/in/carrier", s.partner.headers("evt_refund", refunded), refunded).status == 200);
  REQUIRE(test::eventually([&] { return s.received("/carrier", 425).size() == 1; }, 20s));
  // Later events of the same key and of other keys flow while it waits.
  for (int i = 0; i < 5; ++i) {
    const auto body = event_body("order.note", i == 0 ? "o5" : "o6", i);
    REQUIRE(post(port, "/in/carrier", s.partner.headers(fmt::format("evt_note_{}", i), body), body).status == 200);
  }
  CHECK_MESSAGE(test::eventually([&] { return s.received("/carrier").size() == 5; }, 20s), walhook.log_tail());
  CHECK(s.received("/carrier", 425).size() < 3);  // they did not wait for the quarantine

  // Deferred twice (the limit), then quarantined: dead, with the reason; no endpoint failure.
  const std::string row = "SELECT d.status || ' ' || d.deferrals || ' ' || d.last_error FROM walhook.deliveries d "
                          "JOIN walhook.outbox o ON o.id = d.event_id WHERE o.payload->>'event_id' = 'evt_refund'";
  REQUIRE_MESSAGE(test::eventually([&] { return s.value(row).rfind("dead", 0) == 0; }, 30s), s.value(row));
  CHECK(s.value(row).find("dead 3 quarantined: deferred 3 times (the limit is 2): HTTP 425") == 0);
  CHECK(s.received("/carrier", 425).size() == 3);
  CHECK(s.value("SELECT coalesce(max(consecutive_failures), 0) FROM walhook.endpoint_health") == "0");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("poison: an event its handler always fails is quarantined when its retry schedule is spent, replayed after a fix") {
  inbox_setup s("inbox_poison");
  relay::receiver_behaviour handler;  // a handler bug this one event hits
  handler.fail_marker = "poison";
  handler.fail_times = 1000;
  handler.fail_status = 500;
  s.rcv->set_behaviour("/billing", handler);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  // Added while walhook runs: its destination's policies come through the stream.
  s.add_source("billing", {"--retry-schedule", "1s,1s"});
  ingest_process ingest(s.url);
  const auto port = ingest.port();
  REQUIRE(port != 0);

  const auto bad = event_body("invoice.poison", "i1");
  const auto good = event_body("invoice.paid", "i2");
  REQUIRE(post(port, "/in/billing", s.partner.headers("evt_bad", bad), bad).status == 200);
  REQUIRE(post(port, "/in/billing", s.partner.headers("evt_good", good), good).status == 200);
  CHECK(test::eventually([&] { return s.received("/billing").size() == 1; }, 20s));

  const std::string row = "SELECT d.id || ' ' || d.status || ' ' || d.attempts || ' ' || d.last_error "
                          "FROM walhook.deliveries d JOIN walhook.outbox o ON o.id = d.event_id "
                          "WHERE o.payload->>'event_id' = 'evt_bad'";
  REQUIRE_MESSAGE(test::eventually([&] { return s.value(row).find(" dead ") != std::string::npos; }, 30s), s.value(row));
  const auto quarantined = s.value(row);
  CHECK(quarantined.find(" dead 3 quarantined after 3 failed attempts (the retry schedule is spent): HTTP 500") !=
        std::string::npos);
  CHECK(s.received("/billing", 500).size() == 3);
  // walhook status shows the source: 2 received, 1 quarantined, and why.
  std::string out;
  REQUIRE(test::run_walhook({"status", "--database-url", s.url}, out) == 0);
  INFO(out);
  CHECK(std::regex_search(out, std::regex(R"(\nbilling +2 +0 +0 +0 +1  quarantined after 3 failed attempts)")));

  // The handler is fixed; the operator replays the quarantined event: it is applied once, with
  // the webhook-id it had (the handler dedupes by it).
  s.rcv->set_behaviour("/billing", {});
  const auto delivery_id = quarantined.substr(0, quarantined.find(' '));
  REQUIRE(test::run_walhook({"replay", "--database-url", s.url, "--delivery", delivery_id}, out) == 0);
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/billing").size() == 2; }, 20s), walhook.log_tail());
  const auto failed = s.received("/billing", 500);
  const auto replayed = s.received("/billing").back();
  CHECK(replayed.body.find("invoice.poison") != std::string::npos);
  CHECK(replayed.webhook_id == failed.front().webhook_id);
  CHECK(test::eventually(  // recorded once walhook has the answer (the receiver records it first)
      [&] { return s.value("SELECT status FROM walhook.deliveries WHERE id = $1", {delivery_id}) == "delivered"; }, 10s));
  CHECK(walhook.stop() == 0);
}

TEST_CASE("an inbox destination on loopback is delivered without --allow-private-networks; a customer endpoint there, or a destination on link-local, is still refused") {
  inbox_setup s("inbox_private");
  s.add_source("shop");
  const long long customer = test::add_endpoint(s.db, "acme", s.rcv->url("/acme"), delivery::generate_secret());
  ingest_process ingest(s.url);
  const auto port = ingest.port();
  REQUIRE(port != 0);
  auto args = test::run_args(s.url, s.slot);
  std::erase(args, std::string("--allow-private-networks"));
  test::walhook_process walhook(args);
  walhook.start();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  const auto body = event_body("order.paid", "o1");
  REQUIRE(post(port, "/in/shop", s.partner.headers("evt_1", body), body).status == 200);
  s.publish("acme", "order.paid");
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/shop").size() == 1; }, 20s), walhook.log_tail());
  const std::string customer_error =
      fmt::format("SELECT last_error FROM walhook.deliveries WHERE endpoint_id = {} AND last_error IS NOT NULL", customer);
  REQUIRE_MESSAGE(test::eventually([&] { return !s.value(customer_error).empty(); }, 20s), walhook.log_tail());
  CHECK(s.value(customer_error).find("address blocked by the SSRF guard") != std::string::npos);
  CHECK(s.received("/acme", 0).empty());

  // Not link-local, where cloud providers serve credentials (AWS ECS's 169.254.170.2).
  std::string out;
  REQUIRE(test::run_walhook({"inbox", "source", "add", "--database-url", s.url, "--name", "meta", "--scheme",
                             "standard-webhooks", "--secret", s.partner.secret, "--destination",
                             "http://169.254.170.2/v2/credentials"},
                            out) == 0);
  // ingest finds a new source within a second (it reads the sources again at most that often).
  REQUIRE(test::eventually([&] { return post(port, "/in/meta", s.partner.headers("evt_meta", body), body).status == 200; }, 10s));
  const std::string meta_error = "SELECT d.last_error FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                                 "WHERE e.tenant_id = 'inbox:meta' AND d.last_error IS NOT NULL";
  REQUIRE_MESSAGE(test::eventually([&] { return !s.value(meta_error).empty(); }, 20s), walhook.log_tail());
  CHECK(s.value(meta_error).find("address blocked by the SSRF guard") != std::string::npos);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("an outage of the handler: the breaker pauses for the schedule's first wait, not a minute; once fixed, the held events flow without a resume") {
  inbox_setup s("inbox_outage");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/ledger", down);
  s.add_source("ledger", {"--retry-schedule", "2s,2s,2s,2s,2s,2s,2s,2s,2s,2s"});
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  ingest_process ingest(s.url);
  const auto port = ingest.port();
  REQUIRE(port != 0);

  constexpr int events = 24;  // more than the breaker's 20 failures in a row
  for (int i = 0; i < events; ++i) {
    const auto body = event_body("entry.posted", fmt::format("e{}", i));
    REQUIRE(post(port, "/in/ledger", s.partner.headers(fmt::format("evt_{}", i), body), body).status == 200);
  }
  // The breaker opens: paused until (the failure that tripped it + 2 s), not + 60 s; the streak
  // began under a second before the trip.
  const std::string pause = "SELECT extract(epoch FROM h.paused_until - h.first_failure_at)::int FROM walhook.endpoint_health h "
                            "JOIN walhook.endpoints e ON e.id = h.endpoint_id "
                            "WHERE e.tenant_id = 'inbox:ledger' AND h.paused_until IS NOT NULL";
  REQUIRE_MESSAGE(test::eventually([&] { return !s.value(pause).empty(); }, 20s), walhook.log_tail());
  CHECK(std::stoi(s.value(pause)) < 20);

  // Fixed. No resume: the breaker's next probe (within 2 s) finds it answering, and every
  // held event is delivered; none was quarantined for the outage.
  s.rcv->set_behaviour("/ledger", {});
  auto distinct_received = [&] {
    std::set<std::string> ids;
    for (const auto& r : s.received("/ledger")) ids.insert(r.webhook_id);
    return ids.size();
  };
  REQUIRE_MESSAGE(test::eventually([&] { return distinct_received() == static_cast<std::size_t>(events); }, 15s),
                  distinct_received(), " of ", events, "\n", walhook.log_tail());
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                "WHERE e.tenant_id = 'inbox:ledger' AND d.status = 'dead'") == "0");
  CHECK(walhook.stop() == 0);
}
