// Crash safety (issue 3, docs/architecture.md, Invariants, 1, 2, 6): 20,000 events at a steady rate over
// several endpoints; walhook is killed with SIGKILL at five random moments and restarted each
// time. Every (event, endpoint) pair must arrive at least once; every duplicate must come from
// a crash window (its transaction not yet acknowledged, or its delivery persisted and in
// flight, when walhook was killed).

#include "common/lsn.hpp"
#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <random>
#include <ranges>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

TEST_CASE("kill -9 five times under load: nothing lost, duplicates only from crash windows") {
  test::scenario s("crash");
  auto& db = s.db;
  auto& rcv = s.rcv;
  rcv->keep_bodies(false);

  // Two tenants, two endpoints each: every event fans out to 2 endpoints.
  std::map<std::string, std::vector<std::string>> paths{{"a", {"/a/1", "/a/2"}}, {"b", {"/b/1", "/b/2"}}};
  for (auto& [tenant, ps] : paths)
    for (auto& p : ps) test::add_endpoint(db, tenant, rcv->url(p), delivery::generate_secret());

  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = 'crash'") == "t"; }, 20s));

  test::publisher pub({.url = s.url, .tenants = {"a", "b"}, .types = {"x.happened"}, .rate_per_second = 1000,
                       .events_per_transaction = 1, .total = 20000});
  pub.start();

  struct kill_record {
    std::chrono::system_clock::time_point at;      // walhook was dead from here
    std::chrono::system_clock::time_point late;    // requests it wrote may be read until here
    walhook::lsn confirmed;       // the slot's confirmed_flush_lsn once walhook was dead
    std::set<std::string> sending;  // "event/endpoint" of deliveries persisted as 'sending'
  };
  std::vector<kill_record> kills;
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pause_ms(1500, 3500);
  for (int k = 0; k < 5; ++k) {
    ::usleep(static_cast<useconds_t>(pause_ms(rng)) * 1000);
    kill_record rec;
    walhook.kill9();
    rec.at = std::chrono::system_clock::now();
    // A request the dead process already wrote may still be read by the receiver a moment later.
    rec.late = rec.at + 500ms;
    // The walsender notices its peer is gone; then the slot's confirmed position is final.
    REQUIRE(test::eventually([&] { return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = 'crash'") == "f"; }, 20s));
    rec.confirmed = *walhook::lsn::parse(test::query_value(db, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'crash'"));
    for (auto r = db.exec("SELECT event_id::text || '/' || endpoint_id FROM walhook.deliveries WHERE status = 'sending'"); auto i : std::views::iota(0, r.rows()))
      rec.sending.insert(std::string(r.value(i, 0)));
    kills.push_back(rec);
    walhook = s.start_walhook();
  }
  REQUIRE(pub.join(120s));
  auto events = pub.events();
  REQUIRE(events.size() == 20000);

  // Endpoint ids by path, to match persisted rows.
  std::map<std::string, std::string> endpoint_of_path;
  for (auto r = db.exec("SELECT id, url FROM walhook.endpoints"); auto i : std::views::iota(0, r.rows())) {
    std::string u(r.value(i, 1));
    endpoint_of_path[u.substr(u.find('/', 8))] = std::string(r.value(i, 0));
  }

  auto received = [&] {
    std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>> by_pair;
    for (auto& r : rcv->requests())
      if (r.status == 200) by_pair[{r.webhook_id, r.path}].push_back(r.received_at_us);
    return by_pair;
  };
  auto missing = [&](const std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>>& got) {
    std::size_t n = 0;
    for (auto& e : events)
      for (auto& p : paths[e.tenant])
        if (!got.contains({e.id, p})) ++n;
    return n;
  };
  bool complete = test::eventually([&] { return missing(received()) == 0; }, 120s, 200ms);
  auto got = received();
  INFO("missing deliveries: " << missing(got));
  if (!complete) MESSAGE(walhook.log());
  REQUIRE(complete);

  // Every duplicate must be explained by a crash window.
  std::map<std::string, const test::published_event*> by_id;
  for (auto& e : events) by_id[e.id] = &e;
  std::size_t duplicates = 0, unexplained = 0, window = 0;
  for (auto& k : kills) {
    for (auto& e : events)
      if (e.committed_at < k.at && *walhook::lsn::parse(e.lsn_after_commit) > k.confirmed) window += paths[e.tenant].size();
    window += k.sending.size();
  }
  for (auto& [pair, times] : got) {
    if (times.size() < 2) continue;
    duplicates += times.size() - 1;
    const auto* e = by_id[pair.first];
    REQUIRE(e != nullptr);
    auto first = std::chrono::system_clock::time_point{std::chrono::microseconds{*std::min_element(times.begin(), times.end())}};
    bool explained = false;
    for (auto& k : kills) {
      if (first >= k.late) continue;  // received only after this kill: not its window
      bool unacknowledged = *walhook::lsn::parse(e->lsn_after_commit) > k.confirmed;
      bool in_flight_row = k.sending.contains(pair.first + "/" + endpoint_of_path[pair.second]);
      if (unacknowledged || in_flight_row) explained = true;
    }
    if (!explained) {
      ++unexplained;
      MESSAGE("unexplained duplicate " << pair.first << " " << pair.second << " lsn " << e->lsn_after_commit);
    }
  }
  MESSAGE(fmt::format("crash test: 20000 events × 2 endpoints, 5 × SIGKILL; duplicates {} (crash windows held {} "
                      "deliveries: unacknowledged or in flight)",
                      duplicates, window));
  CHECK(unexplained == 0);
  CHECK(duplicates <= window);

  CHECK(walhook.stop() == 0);
}

// Issue 8: an endpoint that accepts and never answers must not widen everyone's crash window.
// Its attempts are recorded 'sending' after the hold bound (250 ms) and stop holding their
// transactions, so the acknowledged position trails by a fraction of a second, not by the 5 s
// attempt deadline; each kill -9 replays only that fraction of everyone's traffic.
TEST_CASE("kill -9 with an endpoint that never answers: nothing lost, no customer holds the acknowledged position") {
  test::scenario s("crash_hung");
  auto& db = s.db;
  auto& rcv = s.rcv;
  rcv->keep_bodies(false);
  test::never_answer(rcv, "/hung");
  const std::vector<std::string> healthy{"/ok1", "/ok2", "/ok3"};
  for (auto& p : healthy) test::add_endpoint(db, "t", rcv->url(p), delivery::generate_secret());
  test::add_endpoint(db, "t", rcv->url("/hung"), delivery::generate_secret());
  auto active = [&] {
    return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = 'crash_hung'");
  };

  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return active() == "t"; }, 20s));
  constexpr double rate = 250;
  test::publisher pub({.url = s.url, .tenants = {"t"}, .types = {"x"}, .rate_per_second = rate, .total = 6000});
  pub.start();

  struct kill_record {
    std::chrono::system_clock::time_point at;
    lsn confirmed;
    std::size_t sending = 0;  // rows 'sending' at the kill: attempts in flight (marked or claimed)
  };
  std::vector<kill_record> kills;
  for (int k = 0; k < 4; ++k) {
    ::usleep(3'000'000);
    kill_record rec;
    walhook.kill9();
    rec.at = std::chrono::system_clock::now();
    REQUIRE(test::eventually([&] { return active() == "f"; }, 20s));
    rec.confirmed = *lsn::parse(test::query_value(db, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'crash_hung'"));
    rec.sending = std::stoul(test::query_value(db, "SELECT count(*) FROM walhook.deliveries WHERE status = 'sending'"));
    kills.push_back(rec);
    walhook = s.start_walhook();
    REQUIRE(test::eventually([&] { return active() == "t"; }, 20s));
  }
  REQUIRE(pub.join(120s));
  auto events = pub.events();

  auto received = [&] {
    std::map<std::pair<std::string, std::string>, int> n;
    for (auto& r : rcv->requests())
      if (r.status == 200) ++n[{r.webhook_id, r.path}];
    return n;
  };
  auto missing = [&](const std::map<std::pair<std::string, std::string>, int>& got) {
    std::size_t m = 0;
    for (auto& e : events)
      for (auto& p : healthy) m += !got.contains({e.id, p});
    return m;
  };
  bool complete = test::eventually([&] { return missing(received()) == 0; }, 120s, 200ms);
  auto got = received();
  if (!complete) MESSAGE(walhook.log());
  REQUIRE(complete);

  std::size_t duplicates = 0;
  for (auto& [pair, n] : got) duplicates += static_cast<std::size_t>(n - 1);
  // Per kill: the transactions the slot had not acknowledged (they are streamed again), and how
  // far behind the kill the oldest of them committed — the acknowledged position's lag.
  std::size_t window = 0;
  double worst_lag_s = 0;
  std::string per_kill;
  for (auto& k : kills) {
    std::size_t replayed = 0;
    auto oldest = k.at;
    for (auto& e : events)
      if (e.committed_at < k.at && *lsn::parse(e.lsn_after_commit) > k.confirmed) {
        ++replayed;
        oldest = std::min(oldest, e.committed_at);
      }
    double lag = std::chrono::duration<double>(k.at - oldest).count();
    worst_lag_s = std::max(worst_lag_s, lag);
    window += replayed * healthy.size() + k.sending;
    per_kill += fmt::format(" [{} transactions unacknowledged, oldest {:.0f} ms before the kill, {} sending]", replayed,
                            lag * 1000, k.sending);
  }
  MESSAGE(fmt::format("crash test with a hung endpoint: {} events × 3 healthy endpoints at {:.0f}/s, 4 × SIGKILL; "
                      "{} duplicates ({:.0f} per kill; 250 ms of traffic = {:.0f} deliveries); windows:{}",
                      events.size(), rate, duplicates, duplicates / 4.0, 0.25 * rate * 3, per_kill));
  CHECK(duplicates <= window);  // every duplicate comes from a crash window…
  CHECK(worst_lag_s < 1.0);     // …and the window is a fraction of a second, not the 5 s attempt deadline
  CHECK(walhook.stop() == 0);
}
