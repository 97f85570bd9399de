// Noisy neighbour, scaled down (issue 5; docs/architecture.md, Why and Invariants, 4): four healthy endpoints and
// one that never answers within walhook's deadline (--deadline-ms 500, so the test stays short)
// share a steady load. Correctness only, no timing targets:
//   * the slow endpoint is never served with more than its max_concurrency connections at once
//     (the receiver counts a request as in flight until walhook hangs up);
//   * every healthy endpoint's events all arrive while the slow endpoint's queue (its pending
//     rows in walhook.deliveries) is still growing — the healthy ones never wait for it.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <set>

using namespace walhook;
using namespace std::chrono_literals;

TEST_CASE("a slow endpoint stays within max_concurrency and healthy endpoints get everything while its queue grows") {
  test::scenario s("noisy");
  auto& db = s.db;
  auto& rcv = s.rcv;
  rcv->keep_bodies(false);

  constexpr int slow_limit = 2;
  const std::vector<std::string> healthy_tenants{"h0", "h1", "h2", "h3"};
  auto path_of = [](const std::string& tenant) { return "/" + tenant; };
  for (const auto& t : healthy_tenants) {
    auto secret = delivery::generate_secret();
    test::add_endpoint(db, t, rcv->url(path_of(t)), secret);
    relay::receiver_behaviour b;
    b.keys = *delivery::parse_secrets(secret);
    rcv->set_behaviour(path_of(t), b);
  }
  auto slow_secret = delivery::generate_secret();
  long long slow_id = test::add_endpoint(db, "slow", rcv->url("/slow"), slow_secret, {}, slow_limit);
  relay::receiver_behaviour never;
  never.never_answer = true;  // answers after longer than the deadline: never, within it
  rcv->set_behaviour("/slow", never);

  // Rows (--behind rows): this test watches the slow endpoint's table backlog grow; with outbox
  // cursors (the default) it would be owed by a cursor instead — it_cursors and it_slot_lag.
  auto walhook = s.start_walhook({"--deadline-ms", "500", "--behind", "rows"});
  REQUIRE(test::eventually(
      [&] { return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = 'noisy'") == "t"; }, 20s));

  // 250 events/s, a fifth of them for the slow endpoint; it keeps publishing until the end.
  std::vector<std::string> tenants = healthy_tenants;
  tenants.push_back("slow");
  test::publisher pub({.url = s.url, .tenants = tenants, .types = {"order.created"}, .rate_per_second = 250,
                       .events_per_transaction = 1, .total = 250 * 60});
  pub.start();
  REQUIRE(test::eventually([&] { return pub.committed() >= 1000; }, 20s));

  // The healthy endpoints' share of what was committed so far.
  std::set<std::pair<std::string, std::string>> expected;  // (event id, path)
  for (const auto& e : pub.events())
    if (e.tenant != "slow") expected.insert({e.id, path_of(e.tenant)});
  REQUIRE(expected.size() >= 800);

  pg::params slow{std::to_string(slow_id)};
  auto pending = [&] {
    return std::stol(test::query_value(
        db, "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'", slow));
  };
  auto all_healthy_arrived = [&] {
    std::set<std::pair<std::string, std::string>> got;
    for (const auto& r : rcv->requests())
      if (r.status == 200) got.insert({r.webhook_id, r.path});
    return std::all_of(expected.begin(), expected.end(), [&](const auto& k) { return got.contains(k); });
  };
  bool arrived = test::eventually(all_healthy_arrived, 15s);
  if (!arrived) MESSAGE(walhook.log());
  REQUIRE(arrived);

  // At that moment the slow endpoint's queue holds work and is still growing.
  long queued = pending();
  INFO("slow endpoint: " << rcv->count("/slow") << " requests, " << queued << " pending rows");
  CHECK(queued > 0);
  CHECK(test::eventually([&] { return pending() > queued; }, 10s));
  CHECK(rcv->count("/slow") >= 1);  // it was tried, not skipped
  pub.stop();
  MESSAGE("healthy deliveries checked: " << expected.size() << "; slow endpoint: " << rcv->count("/slow")
                                         << " requests, at most " << rcv->max_concurrent("/slow") << " at once, "
                                         << queued << " pending rows when the healthy ones were complete");

  // Never more than its max_concurrency connections at once (the receiver saw every one).
  CHECK(rcv->max_concurrent("/slow") <= static_cast<std::size_t>(slow_limit));
  for (const auto& t : healthy_tenants) CHECK(rcv->max_concurrent(path_of(t)) <= 4u);

  CHECK(walhook.stop() == 0);
  CHECK(rcv->max_concurrent("/slow") <= static_cast<std::size_t>(slow_limit));
}
