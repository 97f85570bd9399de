// PostgreSQL restarts in the middle of a run (issues 3 and 8): `restart -m fast` and
// `-m immediate` while events are published at a steady rate and one endpoint never answers.
// walhook reconnects with a short capped backoff and every committed event reaches every
// healthy endpoint. A fast restart completes in seconds: walhook closes its replication
// connection as soon as its session ends, so the walsender never waits for wal_sender_timeout
// (before issue 8 it did, with an endpoint that never answers: ~61 s per restart).

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sstream>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

std::size_t count_in_file(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}

void restart_under_load(const std::string& mode) {
  test::scenario sc("restart_" + mode);
  const std::string& url = sc.url;
  const std::string& slot = sc.slot;
  auto& rcv = sc.rcv;
  rcv->keep_bodies(false);
  test::never_answer(rcv, "/hung");
  test::add_endpoint(sc.db, "t", rcv->url("/one"), delivery::generate_secret());
  test::add_endpoint(sc.db, "t", rcv->url("/two"), delivery::generate_secret());
  test::add_endpoint(sc.db, "t", rcv->url("/hung"), delivery::generate_secret());

  auto walhook = sc.start_walhook();
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
  const auto timeouts_before = count_in_file(test::cluster().log_path(), "replication timeout");

  test::publisher pub({.url = url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = 400, .total = 3000});
  pub.start();
  std::vector<double> stop_s, resume_s;
  auto restart = [&] {
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(test::cluster().stop(mode));
    auto t1 = std::chrono::steady_clock::now();
    REQUIRE(test::cluster().start());
    auto t2 = std::chrono::steady_clock::now();
    REQUIRE(test::eventually(slot_active, 30s, 20ms));
    auto t3 = std::chrono::steady_clock::now();
    stop_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    resume_s.push_back(std::chrono::duration<double>(t3 - t2).count());
  };
  REQUIRE(test::eventually([&] { return pub.committed() > 800; }, 30s));
  restart();
  REQUIRE(test::eventually([&] { return pub.committed() > 1800; }, 60s));
  restart();
  REQUIRE(pub.join(120s));

  // The truth is the table: every committed row (including any whose COMMIT acknowledgement
  // was lost in the restart) must be delivered to both healthy endpoints.
  relay::blocking_db db(url);
  std::set<std::string> ids;
  auto rows = db.exec("SELECT id FROM walhook.outbox WHERE event_type NOT LIKE 'walhook.%'");  // not walhook's notices
  for (int i = 0; i < rows.rows(); ++i) ids.insert(std::string(rows.value(i, 0)));
  CHECK(ids.size() >= 3000);
  std::size_t received_ok = 0;
  auto missing = [&] {
    std::set<std::pair<std::string, std::string>> got;
    received_ok = 0;
    for (auto& r : rcv->requests())
      if (r.status == 200) {
        got.insert({r.webhook_id, r.path});
        ++received_ok;
      }
    std::size_t n = 0;
    for (auto& id : ids) n += !got.contains({id, "/one"}) + !got.contains({id, "/two"});
    return n;
  };
  bool complete = test::eventually([&] { return missing() == 0; }, 90s, 200ms);
  if (!complete) MESSAGE(walhook.log());
  CHECK(missing() == 0);
  MESSAGE(fmt::format("restart -m {} twice with an endpoint that never answers: server stopped in {:.2f} s and {:.2f} s, "
                      "walhook streamed again {:.2f} s and {:.2f} s after the server accepted connections; {} events, "
                      "{} duplicates to the 2 healthy endpoints, {} publisher retries, {} walhook sessions",
                      mode, stop_s[0], stop_s[1], resume_s[0], resume_s[1], ids.size(), received_ok - ids.size() * 2,
                      pub.failures(), walhook.count_in_log("\"replication.streaming\"")));
  CHECK(walhook.count_in_log("\"replication.streaming\"") >= 3);
  // What walhook could do to a server's stop is hold a fast shutdown: the walsender sends its
  // last WAL and waits for the client's confirmation, up to wal_sender_timeout (60 s), then logs
  // "replication timeout" — checked below. The stop times themselves are reported, not
  // asserted: CI saw the postmaster itself take 60 s to exit (-m immediate once, -m fast once,
  // without any replication timeout; 0.02–0.06 s in every other run), a server-side stall that
  // no client causes.
  // The reconnect backoff is capped at 500 ms: streaming resumes within a second of the server
  // accepting connections (generous bound: crash recovery and a loaded machine).
  for (double s : resume_s) CHECK(s < 5.0);
  CHECK(count_in_file(test::cluster().log_path(), "replication timeout") == timeouts_before);
  CHECK(walhook.stop() == 0);
}

}  // namespace

TEST_CASE("PostgreSQL restart -m fast during a run loses nothing and takes seconds, not wal_sender_timeout") {
  restart_under_load("fast");
}
TEST_CASE("PostgreSQL restart -m immediate during a run loses nothing") { restart_under_load("immediate"); }
