// Shards (issue 10): `walhook run --shard K/N` — each shard streams its own slot from
// row-filtered publications and delivers only its tenants' events; each has its own hot
// standby; `walhook reshard` changes the number of shards without losing an event.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <csignal>
#include <map>
#include <regex>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

constexpr int tenants = 8;

struct setup : test::scenario {
  using scenario::scenario;
  std::map<std::string, std::string> path_of;  // tenant → receiver path

  void add_endpoints() {
    for (int t = 0; t < tenants; ++t) {
      const std::string tenant = fmt::format("tenant{}", t);
      path_of[tenant] = "/" + tenant;
      test::add_endpoint(db, tenant, rcv->url(path_of[tenant]), delivery::generate_secret());
    }
  }
  /// The shard of a tenant, as PostgreSQL computes it (relay/core/shard.hpp).
  int shard_of(const std::string& tenant, int n) {
    return std::stoi(value("SELECT (hashtext($1) & 2147483647) % $2::int", pg::params{tenant, std::to_string(n)}));
  }
  std::unique_ptr<test::walhook_process> start(int k, int n, const std::string& name) {
    return std::make_unique<test::walhook_process>(
        start_walhook({"--shard", fmt::format("{}/{}", k, n), "--admin-listen", "127.0.0.1:0"}, name));
  }
  bool slot_active(const std::string& name) {
    return value("SELECT active FROM pg_replication_slots WHERE slot_name = $1", pg::params{name}) == "t";
  }
  std::string reshard(int from, int to) {
    std::string out;
    const int rc = test::run_walhook({"reshard", "--database-url", url, "--slot", slot, "--from", std::to_string(from),
                                      "--to", std::to_string(to)},
                                     out);
    INFO(out);
    REQUIRE(rc == 0);
    return out;
  }
  /// Every published event reached its tenant's endpoint (at least once).
  bool all_delivered(const std::vector<test::published_event>& events) {
    std::map<std::string, std::set<std::string>> got;
    for (const auto& r : rcv->requests())
      if (r.status == 200) got[r.path].insert(r.webhook_id);
    for (const auto& e : events)
      if (!got[path_of[e.tenant]].contains(e.id)) return false;
    return true;
  }
  long duplicates() {
    std::map<std::pair<std::string, std::string>, int> n;
    long d = 0;
    for (const auto& r : rcv->requests())
      if (r.status == 200) d += n[{r.path, r.webhook_id}]++ > 0 ? 1 : 0;
    return d;
  }
};

long delivered_total(const test::walhook_process& w) {
  auto metrics = test::http_get(w.admin_port(), "/metrics");
  std::smatch m;
  if (!std::regex_search(metrics.second, m, std::regex(R"(\nwalhook_delivered_total (\d+))"))) return -1;
  return std::stol(m[1]);
}

}  // namespace

TEST_CASE("4 shards with a standby each: every event delivered by its tenant's shard; kill -9 taken over; reshard 4 → 2") {
  setup s("shard4");
  s.add_endpoints();
  // The database starts unsharded (the harness migrated slot shard4): split it.
  auto out = s.reshard(1, 4);
  CHECK(out.find("resharded from 1 to 4") != std::string::npos);
  CHECK(s.value("SELECT shards FROM walhook.shard_layout") == "4");
  CHECK(s.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'shard4'") == "0");
  CHECK(s.value("SELECT count(*) FROM pg_publication WHERE pubname LIKE 'walhook%_of_4'") == "8");

  std::vector<std::unique_ptr<test::walhook_process>> active, standby;
  for (int k = 0; k < 4; ++k) {
    active.push_back(s.start(k, 4, fmt::format("shard{}", k)));
    REQUIRE(test::eventually([&] { return s.slot_active(fmt::format("shard4_{}_of_4", k)); }, 30s));
  }
  for (int k = 0; k < 4; ++k) standby.push_back(s.start(k, 4, fmt::format("standby{}", k)));
  REQUIRE(test::eventually([&] {
    for (auto& w : standby)
      if (w->count_in_log("\"standby.waiting\"") == 0) return false;
    return true;
  }, 20s));

  // Each shard follows only its tenants' endpoints.
  std::map<int, int> endpoints_per_shard;
  for (int t = 0; t < tenants; ++t) ++endpoints_per_shard[s.shard_of(fmt::format("tenant{}", t), 4)];
  for (int k = 0; k < 4; ++k)
    CHECK(active[static_cast<std::size_t>(k)]->count_in_log(fmt::format("\"endpoints\":{},", endpoints_per_shard[k])) >= 1);

  std::vector<std::string> names;
  for (int t = 0; t < tenants; ++t) names.push_back(fmt::format("tenant{}", t));
  test::publisher pub({.url = s.url, .tenants = names, .types = {"order.created"}, .rate_per_second = 400, .total = 2000});
  pub.start();
  REQUIRE(test::eventually([&] { return pub.committed() >= 700; }, 30s));
  const int victim = 1;
  active[victim]->kill9();  // its standby takes over
  REQUIRE(pub.join(60s));
  auto events = pub.events();
  CHECK(test::eventually([&] { return s.all_delivered(events); }, 60s));
  CHECK(standby[victim]->count_in_log("\"leader.acquired\"") == 1);

  // Exactly by its shard: a shard whose instance was never killed delivered its tenants' events, no more.
  std::map<int, long> events_per_shard;
  for (const auto& e : events) ++events_per_shard[s.shard_of(e.tenant, 4)];
  for (int k = 0; k < 4; ++k) {
    if (k == victim) continue;
    CHECK(test::eventually([&] { return delivered_total(*active[static_cast<std::size_t>(k)]) == events_per_shard[k]; }, 20s));
  }
  MESSAGE(fmt::format("4 shards, {} events over {} tenants, shard {} killed with kill -9 at 700: {} duplicates", events.size(),
                      tenants, victim, s.duplicates()));

  // A walhook of another layout refuses to run.
  std::string refused;
  CHECK(test::run_walhook(test::run_args(s.url, s.slot), refused) == 1);
  CHECK(refused.find("split into 4 shard(s)") != std::string::npos);

  // Reshard 4 → 2: the old layout stops; events committed while it is stopped are in its slots
  // only, and the new shards backfill them.
  for (auto* group : {&active, &standby})
    for (auto& w : *group) w->signal(SIGTERM);
  for (auto* group : {&active, &standby})
    for (auto& w : *group)
      if (w->running()) CHECK(w->wait(30s) >= 0);
  test::publisher gap({.url = s.url, .tenants = names, .types = {"order.created"}, .rate_per_second = 500, .total = 200});
  gap.start();
  REQUIRE(gap.join(30s));
  out = s.reshard(4, 2);
  CHECK(s.value("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'shard4_%_of_4'") == "0");
  std::vector<std::unique_ptr<test::walhook_process>> two;
  for (int k = 0; k < 2; ++k) two.push_back(s.start(k, 2, fmt::format("two{}", k)));
  auto gap_events = gap.events();
  CHECK(test::eventually([&] { return s.all_delivered(gap_events); }, 60s));
  CHECK(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.recoveries WHERE reason = 'reshard from 4 to 2' AND state = 'done'") == "2"; }, 30s));
  // A graceful stop records a last delivered snapshot: the backfill is (about) the gap alone.
  const long backfilled = std::stol(s.value("SELECT sum(events) FROM walhook.recoveries WHERE reason = 'reshard from 4 to 2'"));
  CHECK(backfilled >= static_cast<long>(gap_events.size()));
  CHECK(backfilled <= static_cast<long>(gap_events.size()) + 50);
  MESSAGE(fmt::format("reshard 4 → 2 with {} events committed while stopped: all delivered, {} duplicates in all",
                      gap_events.size(), s.duplicates()));
  for (auto& w : two) CHECK(w->stop() == 0);
}

TEST_CASE("--shard is checked: K/N with 0 <= K < N, and migrate --shard on an unsharded walhook points to reshard") {
  setup s("shard_args");
  std::string out;
  CHECK(test::run_walhook({"run", "--database-url", s.url, "--shard", "4/4"}, out) == 1);
  CHECK(out.find("K must be 0 to 3") != std::string::npos);
  CHECK(test::run_walhook({"run", "--database-url", s.url, "--shard", "x"}, out) == 1);
  CHECK(out.find("--shard takes K/N") != std::string::npos);
  CHECK(test::run_walhook({"migrate", "--database-url", s.url, "--slot", s.slot, "--shard", "0/2"}, out) == 1);
  CHECK(out.find("walhook reshard --from 1 --to 2") != std::string::npos);
}

TEST_CASE("outbox cursors per shard: a paused endpoint in each of 2 shards, then reshard 2 → 1 with both still behind") {
  setup s("shard_cursor");
  s.add_endpoints();
  // Two tenants of different shards (of 2), whose endpoints an operator pauses.
  std::string in0, in1;
  for (int t = 0; t < tenants; ++t) {
    const auto name = fmt::format("tenant{}", t);
    (s.shard_of(name, 2) == 0 ? in0 : in1) = name;
  }
  REQUIRE((!in0.empty() && !in1.empty()));
  std::map<std::string, std::string> id_of;
  for (const auto& tenant : {in0, in1}) {
    id_of[tenant] = s.value("SELECT id FROM walhook.endpoints WHERE tenant_id = $1", pg::params{tenant});
    std::string out;
    REQUIRE(test::run_walhook({"endpoint", "pause", id_of[tenant], "--database-url", s.url}, out) == 0);
  }
  s.reshard(1, 2);
  std::vector<std::unique_ptr<test::walhook_process>> two;
  for (int k = 0; k < 2; ++k) two.push_back(s.start(k, 2, fmt::format("shard{}", k)));
  for (int k = 0; k < 2; ++k) REQUIRE(test::eventually([&] { return s.slot_active(fmt::format("shard_cursor_{}_of_2", k)); }, 30s));
  // Each shard records a delivered snapshot (a cursor's first lower bound) once it streamed something.
  for (int t = 0; t < tenants; ++t)
    if (const auto name = fmt::format("tenant{}", t); name != in0 && name != in1) s.publish(name, "warmup");
  REQUIRE(test::eventually([&] {
    return s.value("SELECT count(*) FROM walhook.slot_progress WHERE delivered_snapshot IS NOT NULL AND slot_name LIKE 'shard_cursor_%_of_2'") == "2";
  }, 30s));
  std::vector<std::string> names;
  for (int t = 0; t < tenants; ++t) names.push_back(fmt::format("tenant{}", t));
  test::publisher pub({.url = s.url, .tenants = names, .types = {"order.created"}, .rate_per_second = 400, .total = 400});
  pub.start();
  REQUIRE(pub.join(30s));
  // Each shard's paused endpoint follows the outbox by its own cursor; no row per event.
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoint_cursors") == "2"; }, 20s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'pending'") == "0");
  std::vector<test::published_event> others;
  for (const auto& e : pub.events())
    if (e.tenant != in0 && e.tenant != in1) others.push_back(e);
  REQUIRE(test::eventually([&] { return s.all_delivered(others); }, 30s));

  // Reshard 2 → 1 while both are behind, with events committed while no walhook runs.
  for (auto& w : two) CHECK(w->stop() == 0);
  test::publisher gap({.url = s.url, .tenants = {in0, in1}, .types = {"order.created"}, .rate_per_second = 500, .total = 40});
  gap.start();
  REQUIRE(gap.join(30s));
  s.reshard(2, 1);
  auto one = s.start_walhook({"--admin-listen", "127.0.0.1:0"}, "one");
  REQUIRE(test::eventually([&] { return s.slot_active("shard_cursor"); }, 30s));
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.recoveries WHERE reason = 'reshard from 2 to 1' AND state = 'done'") == "1"; }, 30s));
  for (const auto& tenant : {in0, in1}) {
    std::string out;
    REQUIRE(test::run_walhook({"endpoint", "resume", id_of[tenant], "--database-url", s.url}, out) == 0);
  }
  auto all = pub.events();
  for (const auto& e : gap.events()) all.push_back(e);
  CHECK(test::eventually([&] { return s.all_delivered(all); }, 60s));
  CHECK(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.endpoint_cursors") == "0"; }, 30s));
  MESSAGE(fmt::format("2 shards with a paused endpoint each, reshard 2 → 1: {} events, {} duplicates, {} rows written",
                      all.size(), s.duplicates(), s.value("SELECT count(*) FROM walhook.deliveries")));
  CHECK(one.stop() == 0);
}
