// Notifications as walhook events (issue 11), end to end with the real PostgreSQL and receivers:
// a 410 disables an endpoint → the operator tenant's endpoint and the endpoint's contact endpoint
// get a signed walhook.endpoint.disabled (checked with an independent HMAC), the tenant's other
// endpoints do not; a failing endpoint gives one walhook.endpoint.failing and one
// `endpoint.failing` warn line, not one per attempt; a failing operator endpoint causes no storm;
// a localhost endpoint without --allow-private-networks says so at warn level.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <simdjson.h>

#include <algorithm>
#include <sstream>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

/// Standard Webhooks, computed here with OpenSSL rather than walhook's verifier: base64 of
/// HMAC-SHA256(key, "<id>.<timestamp>.<body>"), the key being the base64 after "whsec_".
bool signed_with(const std::string& secret, const relay::received_request& r) {
  const std::string b64 = secret.substr(secret.find('_') + 1);
  std::string key(b64.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(key.data()), reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  if (n < 0) return false;
  key.resize(static_cast<std::size_t>(n) - static_cast<std::size_t>(std::count(b64.end() - 2, b64.end(), '=')));
  const std::string msg = r.webhook_id + "." + r.webhook_timestamp + "." + r.body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), mac, &mac_len);
  std::string sig(4 * ((mac_len + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(sig.data()), mac, static_cast<int>(mac_len));
  return r.webhook_signature.find("v1," + sig) != std::string::npos;
}

/// The webhook body's "type".
std::string type_of(const relay::received_request& r) {
  simdjson::dom::parser parser;
  std::string_view t;
  if (parser.parse(r.body).get_object()["type"].get(t) != simdjson::SUCCESS) return "";
  return std::string(t);
}

std::vector<relay::received_request> of_type(const std::vector<relay::received_request>& all, const std::string& type) {
  std::vector<relay::received_request> out;
  for (const auto& r : all)
    if (type_of(r) == type) out.push_back(r);
  return out;
}

/// The first line of `log` containing `needle` ("" if none).
std::string line_with(const std::string& log, const std::string& needle) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) return line;
  return "";
}

struct setup : test::scenario {
  using scenario::scenario;
  std::string publish(const std::string& tenant, const std::string& type) {
    pg::params p{tenant, type};
    return value("SELECT walhook.publish($1, $2, '{\"order\": 1}'::jsonb)", p);
  }
  void set_contact(long long endpoint, long long contact) {
    pg::params p{std::to_string(endpoint), std::to_string(contact)};
    db.exec("UPDATE walhook.endpoints SET contact_endpoint_id = $2 WHERE id = $1", p);
  }
  long long notifications() { return std::stoll(value("SELECT count(*) FROM walhook.outbox WHERE event_type LIKE 'walhook.%'")); }
};

}  // namespace

TEST_CASE("410 → walhook.endpoint.disabled, signed, to the operator tenant and the contact endpoint; not to the tenant's others") {
  setup s("notify_disabled");
  const std::string ops_secret = delivery::generate_secret(), contact_secret = delivery::generate_secret();
  const std::string gone_secret = delivery::generate_secret();
  relay::receiver_behaviour gone;
  gone.status = 410;
  s.rcv->set_behaviour("/gone", gone);
  long long ep = test::add_endpoint(s.db, "acme", s.rcv->url("/gone"), gone_secret);
  long long contact = test::add_endpoint(s.db, "acme", s.rcv->url("/contact"), contact_secret, {"order.paid"});
  test::add_endpoint(s.db, "acme", s.rcv->url("/all"), delivery::generate_secret());  // every type of acme
  test::add_endpoint(s.db, "walhook-operator", s.rcv->url("/ops"), ops_secret,
                     {"walhook.endpoint.disabled", "walhook.delivery.dead"});
  s.set_contact(ep, contact);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("acme", "order.paid");

  REQUIRE(test::eventually([&] { return of_type(s.received("/ops"), "walhook.endpoint.disabled").size() == 1; }, 30s));
  REQUIRE(test::eventually([&] { return of_type(s.received("/contact"), "walhook.endpoint.disabled").size() == 1; }, 30s));
  // The dead delivery is announced both ways too, in the same transaction as the disable.
  REQUIRE(test::eventually([&] { return of_type(s.received("/ops"), "walhook.delivery.dead").size() == 1; }, 30s));
  REQUIRE(test::eventually([&] { return of_type(s.received("/contact"), "walhook.delivery.dead").size() == 1; }, 30s));

  auto to_ops = of_type(s.received("/ops"), "walhook.endpoint.disabled")[0];
  auto to_contact = of_type(s.received("/contact"), "walhook.endpoint.disabled")[0];
  CHECK(signed_with(ops_secret, to_ops));
  CHECK(signed_with(contact_secret, to_contact));
  CHECK_FALSE(signed_with(contact_secret, to_ops));  // the check can fail
  // Two events (one per route), each with its own webhook-id.
  CHECK(to_ops.webhook_id != to_contact.webhook_id);
  simdjson::dom::parser parser;
  auto data = parser.parse(to_ops.body).get_object()["data"];
  CHECK(int64_t(data["endpoint_id"]) == ep);
  CHECK(std::string_view(data["tenant_id"]) == "acme");
  CHECK(std::string_view(data["reason"]) == "HTTP 410 Gone");
  CHECK(int64_t(data["last_status"]) == 410);
  CHECK(std::string_view(data["url"]).ends_with("/gone"));
  CHECK(to_ops.body.find(gone_secret.substr(6)) == std::string::npos);
  CHECK(to_contact.body.find(gone_secret.substr(6)) == std::string::npos);

  // The tenant's endpoint subscribed to every type got the customer's event, and nothing of walhook's.
  REQUIRE(test::eventually([&] { return s.received("/all").size() == 1; }, 20s));
  CHECK(type_of(s.received("/all")[0]) == "order.paid");
  // The direct rows: the contact's tenant and id.
  pg::params c{std::to_string(contact)};
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE endpoint_id = $1 AND tenant_id = 'acme' AND event_type LIKE 'walhook.%'", c) == "2");
  CHECK(walhook.stop() == 0);
  CHECK(s.rcv->requests().size() == 1 + 1 + 1 + 2 + 2);  // /gone, /contact's order.paid, /all, and the four notices
}

TEST_CASE("a failing endpoint: one walhook.endpoint.failing and one endpoint.failing warn line, not one per attempt") {
  setup s("notify_failing");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/down", down);
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/down"), delivery::generate_secret());
  test::add_endpoint(s.db, "ops", s.rcv->url("/ops"), delivery::generate_secret(), {"walhook.endpoint.failing"});
  auto walhook = s.start_walhook({"--operator-tenant", "ops", "--backoff-base-ms", "20", "--backoff-max-ms", "50",
                                  "--breaker-threshold", "1000", "--max-attempts", "1000"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("t", "order.paid");
  REQUIRE(test::eventually([&] { return s.rcv->count("/down") >= 10; }, 30s));
  REQUIRE(test::eventually([&] { return s.received("/ops").size() == 1; }, 20s));
  auto notice = s.received("/ops")[0];
  CHECK(type_of(notice) == "walhook.endpoint.failing");
  simdjson::dom::parser parser;
  auto data = parser.parse(notice.body).get_object()["data"];
  CHECK(int64_t(data["endpoint_id"]) == ep);
  CHECK(int64_t(data["consecutive_failures"]) == 1);
  CHECK(int64_t(data["last_status"]) == 503);
  REQUIRE(test::eventually([&] { return s.rcv->count("/down") >= 20; }, 30s));
  CHECK(s.received("/ops").size() == 1);
  CHECK(s.notifications() == 1);
  CHECK(walhook.count_in_log(R"("msg":"endpoint.failing")") == 1);
  CHECK(walhook.count_in_log(R"("level":"warn","msg":"endpoint.failing")") == 1);
  CHECK(line_with(walhook.log(), R"("msg":"endpoint.failing")").find("HTTP 503") != std::string::npos);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a failing operator endpoint causes no notification storm") {
  setup s("notify_no_storm");
  relay::receiver_behaviour down;
  down.status = 500;
  s.rcv->set_behaviour("/ops", down);
  relay::receiver_behaviour gone;
  gone.status = 410;
  s.rcv->set_behaviour("/gone", gone);
  s.rcv->set_behaviour("/down", down);
  test::add_endpoint(s.db, "walhook-operator", s.rcv->url("/ops"), delivery::generate_secret());  // every walhook.* type
  test::add_endpoint(s.db, "t", s.rcv->url("/gone"), delivery::generate_secret());
  test::add_endpoint(s.db, "t", s.rcv->url("/down"), delivery::generate_secret());
  // Deliveries end dead after 3 attempts, the operator endpoint's too. Rows (--behind rows): a
  // delivery that leaves for an outbox cursor after a failed attempt starts its count again when
  // read back, and this test counts attempts exactly.
  auto walhook = s.start_walhook({"--backoff-base-ms", "20", "--backoff-max-ms", "50", "--breaker-threshold", "1000",
                                  "--max-attempts", "3", "--behind", "rows"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  for (int i = 0; i < 3; ++i) s.publish("t", "order.paid");
  // /gone: disabled, dead; /down: failing, dead (the next two dead ones are counted for a minute).
  REQUIRE(test::eventually([&] { return s.notifications() == 4; }, 30s));
  // The operator endpoint fails each of them 3 times and ends them dead — announcing nothing.
  REQUIRE(test::eventually([&] { return s.rcv->count("/ops") == 12; }, 30s));
  CHECK_FALSE(test::eventually([&] { return s.rcv->count("/ops") > 12 || s.notifications() > 4; }, 3s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries d JOIN walhook.endpoints e ON e.id = d.endpoint_id "
                "WHERE e.tenant_id = 'walhook-operator' AND d.status = 'dead'") == "4");
  // Its failures are logged once (the streak's first), like any endpoint's.
  CHECK(walhook.count_in_log(R"("level":"warn","msg":"endpoint.failing")") == 2);  // /down and /ops
  CHECK(walhook.stop() == 0);
}

TEST_CASE("a localhost endpoint without --allow-private-networks: a warn line names the flag") {
  setup s("notify_ssrf");
  test::add_endpoint(s.db, "t", s.rcv->url("/local"), delivery::generate_secret());
  auto args = test::run_args(s.url, s.slot, {"--operator-tenant", ""});
  std::erase(args, std::string("--allow-private-networks"));
  test::walhook_process walhook(args);
  walhook.start();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("t", "order.paid");
  REQUIRE(test::eventually([&] { return walhook.count_in_log(R"("level":"warn","msg":"endpoint.failing")") == 1; }, 20s));
  const std::string line = line_with(walhook.log(), R"("msg":"endpoint.failing")");
  CHECK(line.find("walhook run --allow-private-networks") != std::string::npos);
  CHECK(s.rcv->count("/local") == 0);
  CHECK(walhook.stop() == 0);
}

// ------------------------------------------------------------------------------ issue 19 #8

namespace {
/// The webhook body's data.endpoint_id (0 if none).
std::int64_t about(const relay::received_request& r) {
  simdjson::dom::parser parser;
  std::int64_t id = 0;
  if (parser.parse(r.body).get_object()["data"]["endpoint_id"].get(id) != simdjson::SUCCESS) return 0;
  return id;
}
}  // namespace

TEST_CASE("a contact endpoint paused by failing on walhook's notices: announced once, to the operator tenant only") {
  setup s("notify_contact_paused");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/down", down);
  s.rcv->set_behaviour("/contact", down);
  long long ep = test::add_endpoint(s.db, "acme", s.rcv->url("/down"), delivery::generate_secret());
  long long contact = test::add_endpoint(s.db, "acme", s.rcv->url("/contact"), delivery::generate_secret(), {"none"});
  long long contacts_contact = test::add_endpoint(s.db, "acme", s.rcv->url("/cc"), delivery::generate_secret(), {"none"});
  s.set_contact(ep, contact);
  s.set_contact(contact, contacts_contact);  // a chain walhook must not follow
  test::add_endpoint(s.db, "ops", s.rcv->url("/ops"), delivery::generate_secret(), {"walhook.endpoint.paused"});
  auto walhook = s.start_walhook({"--operator-tenant", "ops", "--backoff-base-ms", "20", "--backoff-max-ms", "50",
                                  "--breaker-threshold", "3", "--breaker-pause-s", "3600", "--max-attempts", "1000"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("acme", "order.paid");
  // The endpoint fails three times: paused (to ops and to its contact). The contact fails three
  // times on walhook's notices: paused too — that goes to ops alone.
  REQUIRE(test::eventually([&] { return of_type(s.received("/ops"), "walhook.endpoint.paused").size() == 2; }, 30s));
  std::vector<std::int64_t> ids;
  for (const auto& r : of_type(s.received("/ops"), "walhook.endpoint.paused")) ids.push_back(about(r));
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::int64_t>{ep, contact});
  // No notice about the contact goes to the contact, nor to its own contact; and nothing more.
  CHECK_FALSE(test::eventually([&] {
    for (const auto& r : s.received("/contact", 0))
      if (about(r) == contact) return true;
    return !s.received("/cc", 0).empty() || of_type(s.received("/ops"), "walhook.endpoint.paused").size() > 2;
  }, 3s));
  pg::params c{std::to_string(contact)};
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE event_type LIKE 'walhook.%' AND (payload->>'endpoint_id')::bigint = $1",
                c) == "1");
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE endpoint_id IS NOT NULL AND (payload->>'endpoint_id')::bigint = $1",
                c) == "0");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("the operator tenant's budget: past it, one walhook.endpoints.digest; contact endpoints still get theirs") {
  setup s("notify_budget");
  relay::receiver_behaviour gone;
  gone.status = 410;
  std::vector<long long> eps;
  for (int i = 0; i < 5; ++i) {
    const std::string path = "/gone" + std::to_string(i);
    s.rcv->set_behaviour(path, gone);
    eps.push_back(test::add_endpoint(s.db, "t", s.rcv->url(path), delivery::generate_secret()));
  }
  long long contact = test::add_endpoint(s.db, "t", s.rcv->url("/contact"), delivery::generate_secret(), {"none"});
  for (auto ep : eps) s.set_contact(ep, contact);
  const std::string ops_secret = delivery::generate_secret();
  test::add_endpoint(s.db, "walhook-operator", s.rcv->url("/ops"), ops_secret);  // every type
  auto walhook = s.start_walhook({"--notification-budget", "2"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("t", "order.paid");  // 5 × (disabled, dead): 10 notices about 5 endpoints
  // The contact endpoint hears about each of its endpoints, whatever the budget.
  REQUIRE(test::eventually([&] { return of_type(s.received("/contact"), "walhook.endpoint.disabled").size() == 5; }, 30s));
  REQUIRE(test::eventually([&] { return of_type(s.received("/contact"), "walhook.delivery.dead").size() == 5; }, 30s));
  REQUIRE(test::eventually([&] { return s.received("/ops").size() == 2; }, 30s));
  // The rest of the minute's are summed up when it is over.
  REQUIRE(test::eventually([&] { return of_type(s.received("/ops"), "walhook.endpoints.digest").size() == 1; }, 120s, 500ms));
  const auto ops = s.received("/ops");
  CHECK(ops.size() == 3);
  const auto digest = of_type(ops, "walhook.endpoints.digest")[0];
  CHECK(signed_with(ops_secret, digest));
  simdjson::dom::parser parser;
  auto data = parser.parse(digest.body).get_object()["data"];
  CHECK(int64_t(data["sent"]) == 2);
  CHECK(int64_t(data["held_back"]) == 8);
  CHECK(int64_t(data["by_type"]["walhook.endpoint.disabled"]) + int64_t(data["by_type"]["walhook.delivery.dead"]) == 8);
  CHECK(int64_t(data["endpoints"]) >= 4);
  for (auto id : simdjson::dom::array(data["endpoint_ids"]))
    CHECK(std::find(eps.begin(), eps.end(), int64_t(id)) != eps.end());
  // Only the operator tenant learns of other tenants' endpoints: the digest has no direct row.
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE event_type = 'walhook.endpoints.digest' AND tenant_id = "
                "'walhook-operator' AND endpoint_id IS NULL") == "1");
  CHECK(of_type(s.received("/contact"), "walhook.endpoints.digest").empty());
  CHECK(walhook.stop() == 0);
}
