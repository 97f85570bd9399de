// PostgreSQL restarts in the middle of a run (issue 3): `restart -m fast` and `-m immediate`
// while events are published at a steady rate. walhook reconnects with capped backoff and every
// committed event reaches every endpoint.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <csignal>
#include <set>
#include <sstream>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

void restart_under_load(const std::string& mode) {
  const std::string slot = "restart_" + mode;
  std::string url = test::fresh_database(slot);
  relay::blocking_db setup(url);
  test::receiver_thread rcv;
  rcv->keep_bodies(false);
  test::add_endpoint(setup, "t", rcv->url("/one"), delivery::generate_secret());
  test::add_endpoint(setup, "t", rcv->url("/two"), delivery::generate_secret());

  test::walhook_process walhook(test::run_args(url, slot));
  walhook.start();
  auto slot_active = [&] {
    try {
      relay::blocking_db db(url);
      pg::params p{slot};
      return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", p) == "t";
    } catch (const std::exception&) {
      return false;
    }
  };
  REQUIRE(test::eventually(slot_active, 20s));

  test::publisher pub({.url = url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 400, .total = 3000});
  pub.start();
  REQUIRE(test::eventually([&] { return pub.committed() > 800; }, 30s));
  REQUIRE(test::cluster().restart(mode));
  REQUIRE(test::eventually([&] { return pub.committed() > 1800; }, 60s));
  REQUIRE(test::cluster().restart(mode));
  REQUIRE(pub.join(120s));

  // The truth is the table: every committed row (including any whose COMMIT acknowledgement
  // was lost in the restart) must be delivered to both endpoints.
  relay::blocking_db db(url);
  std::set<std::string> ids;
  auto rows = db.exec("SELECT id FROM walhook.outbox");
  for (int i = 0; i < rows.rows(); ++i) ids.insert(std::string(rows.value(i, 0)));
  CHECK(ids.size() >= 3000);
  auto missing = [&] {
    std::set<std::pair<std::string, std::string>> got;
    for (auto& r : rcv->requests())
      if (r.status == 200) got.insert({r.webhook_id, r.path});
    std::size_t n = 0;
    for (auto& id : ids) n += !got.contains({id, "/one"}) + !got.contains({id, "/two"});
    return n;
  };
  bool complete = test::eventually([&] { return missing() == 0; }, 90s, 200ms);
  if (!complete) MESSAGE(walhook.log());
  CHECK(missing() == 0);
  MESSAGE(fmt::format("restart -m {} twice: {} events, {} deliveries needed, {} duplicates, {} publisher retries, "
                      "{} walhook sessions",
                      mode, ids.size(), ids.size() * 2, rcv->total() - ids.size() * 2, pub.failures(),
                      walhook.count_in_log("\"replication.streaming\"")));
  CHECK(walhook.count_in_log("\"replication.streaming\"") >= 3);
  walhook.signal(SIGTERM);
  CHECK(walhook.wait(30s) == 0);
}

}  // namespace

TEST_CASE("PostgreSQL restart -m fast during a run loses nothing") { restart_under_load("fast"); }
TEST_CASE("PostgreSQL restart -m immediate during a run loses nothing") { restart_under_load("immediate"); }
