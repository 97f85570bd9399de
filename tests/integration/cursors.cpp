// The outbox as a log (issue 18): an endpoint that cannot take its events as they stream follows
// walhook.outbox by cursor instead of costing a walhook.deliveries row per event, gets each event
// once when it is back, and rejoins the stream; a crash and a server restart in the middle of the
// drain lose nothing; transactions that commit out of seq order are not skipped.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <set>
#include <thread>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

/// The breaker opens after 3 failures and probes again after 1 s: an outage ends quickly.
std::vector<std::string> quick_breaker() { return {"--breaker-threshold", "3", "--breaker-pause-s", "1"}; }

/// Answers `status` on `path` from now on.
void answer(test::receiver_thread& rcv, const std::string& path, unsigned status) {
  relay::receiver_behaviour b;
  b.status = status;
  rcv->set_behaviour(path, b);
}

/// Webhook ids received on `path` with 200, and how many times each.
std::map<std::string, int> received_ids(test::scenario& s, const std::string& path) {
  std::map<std::string, int> out;
  for (const auto& r : s.received(path)) ++out[r.webhook_id];
  return out;
}

long count(test::scenario& s, const std::string& sql, const pg::params& p = {}) { return std::stol(s.value(sql, p)); }

/// walhook streams and has recorded a delivered snapshot (a cursor's first lower bound).
void wait_ready(test::scenario& s, test::walhook_process& w) {
  REQUIRE(test::eventually([&] { return s.streaming(); }, 30s, 20ms));
  s.publish("warmup", "x");
  bool ready = test::eventually(
      [&] { return s.value("SELECT count(*) FROM walhook.slot_progress WHERE delivered_snapshot IS NOT NULL") == "1"; },
      30s, 50ms);
  if (!ready) MESSAGE(w.log_tail());
  REQUIRE(ready);
}

}  // namespace

TEST_CASE("an endpoint down for N events costs a handful of rows, then gets each event once and rejoins the stream") {
  test::scenario s("cursor_down");
  answer(s.rcv, "/down", 503);
  auto down = test::add_endpoint(s.db, "t-down", s.rcv->url("/down"), delivery::generate_secret());
  test::add_endpoint(s.db, "t-ok", s.rcv->url("/ok"), delivery::generate_secret());
  auto walhook = s.start_walhook(quick_breaker());
  wait_ready(s, walhook);
  const pg::params id{std::to_string(down)};

  constexpr long n = 2000;
  test::publisher pub({.url = s.url, .tenants = {"t-down", "t-ok"}, .types = {"x"}, .rate_per_second = 1000, .total = n});
  pub.start();
  REQUIRE(pub.join(60s));
  std::set<std::string> owed, other;
  for (const auto& e : pub.events()) (e.tenant == "t-down" ? owed : other).insert(e.id);
  // The healthy tenant is not held back by the other's outage.
  REQUIRE(test::eventually([&] { return received_ids(s, "/ok").size() >= other.size(); }, 30s, 20ms));
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1", id) == 1; },
                           10s, 20ms));
  std::this_thread::sleep_for(1500ms);  // a probe or two fail meanwhile
  const long rows = count(s, "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", id);
  MESSAGE(fmt::format("{} events to an endpoint that answers 503: {} rows in walhook.deliveries", owed.size(), rows));
  CHECK(rows <= 10);
  CHECK(received_ids(s, "/down").empty());

  answer(s.rcv, "/down", 200);
  bool all = test::eventually([&] {
    auto got = received_ids(s, "/down");
    return std::all_of(owed.begin(), owed.end(), [&](const auto& e) { return got.contains(e); });
  }, 60s, 50ms);
  if (!all) MESSAGE(walhook.log_tail());
  REQUIRE(all);
  // Back on the stream: the cursor row is gone, and a new event comes through the stream.
  REQUIRE(test::eventually([&] { return count(s, "SELECT count(*) FROM walhook.endpoint_cursors") == 0; }, 10s, 20ms));
  auto later = s.publish("t-down", "x");
  REQUIRE(test::eventually([&] { return received_ids(s, "/down").contains(later); }, 10s, 10ms));
  auto got = received_ids(s, "/down");
  std::size_t duplicates = 0;
  for (const auto& [e, times] : got) duplicates += static_cast<std::size_t>(times - 1);
  CHECK(duplicates == 0);
  CHECK(count(s, "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'", id) == 0);
  CHECK(walhook.count_in_log("endpoint.following_stream") == 1);
  CHECK(walhook.stop() == 0);
}
