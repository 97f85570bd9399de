// /metrics on a real PostgreSQL 15 and a real receiver (issue 11): attempts per endpoint and
// outcome class match what the receiver answered, build info and process metrics are there, a
// standby on the same slot exports none of the leader's database-derived series, and the
// oldest-pending query probes the partial index deliveries_open_age; a scrape flood while that
// query waits behind a lock is answered from the last text, with one query (issue 19).

#include "delivery/signing.hpp"
#include "relay/core/version.hpp"
#include "sql/statements.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <regex>
#include <thread>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

std::string scrape(int port) {
  auto [status, body] = test::http_get(static_cast<unsigned short>(port), "/metrics");
  CHECK(status == 200);
  return body;
}

/// The value of the sample line that starts with `series` (name and labels, exactly), if any.
std::optional<double> sample(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return std::nullopt;
  return std::stod(text.substr(at + 1 + series.size() + 1));
}

}  // namespace

TEST_CASE("a 503 endpoint and a 200 endpoint: attempts by outcome class; build info, process metrics; a standby, and a demoted leader, export no oldest-pending series") {
  test::scenario s("metrics");
  const auto ok = test::add_endpoint(s.db, "t", s.rcv->url("/ok"), delivery::generate_secret());
  const auto failing = test::add_endpoint(s.db, "t", s.rcv->url("/fail"), delivery::generate_secret());
  relay::receiver_behaviour unavailable;
  unavailable.status = 503;
  s.rcv->set_behaviour("/fail", unavailable);

  // A backoff of 10 minutes: each event gets exactly one attempt at /fail while the test looks.
  const int leader_port = relay::free_tcp_port();
  auto leader = s.start_walhook({"--instance-name", "leader", "--backoff-base-ms", "600000", "--admin-listen",
                                 fmt::format("127.0.0.1:{}", leader_port)},
                                "leader");
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  const int events = 3;
  for (int i = 0; i < events; ++i) s.db.exec("SELECT walhook.publish('t', 'order.created', '{}'::jsonb)");
  REQUIRE(test::eventually([&] { return s.received("/ok").size() == events && s.received("/fail", 503).size() == events; }, 20s));
  // The failed attempts are written pending; then the leader's scrape has their age.
  const std::string ok_label = fmt::format("endpoint=\"{}\"", ok), fail_label = fmt::format("endpoint=\"{}\"", failing);
  const std::string age_series = fmt::format("walhook_endpoint_oldest_pending_age_seconds{{{}}}", fail_label);
  std::string text;
  REQUIRE(test::eventually([&] {
    text = scrape(leader_port);
    return sample(text, age_series).has_value();
  }, 10s));
  CHECK(sample(text, fmt::format("walhook_endpoint_attempts_total{{{},sink=\"http\",outcome=\"2xx\"}}", ok_label)) == events);
  CHECK(sample(text, fmt::format("walhook_endpoint_attempts_total{{{},sink=\"http\",outcome=\"5xx\"}}", fail_label)) == events);
  // Only the classes seen: no 5xx series for the healthy endpoint, no 2xx for the failing one.
  CHECK(text.find(fmt::format("walhook_endpoint_attempts_total{{{},sink=\"http\",outcome=\"5xx\"}}", ok_label)) == std::string::npos);
  CHECK(text.find(fmt::format("walhook_endpoint_attempts_total{{{},sink=\"http\",outcome=\"2xx\"}}", fail_label)) == std::string::npos);
  CHECK(sample(text, fmt::format("walhook_endpoint_delivered_total{{{}}}", ok_label)) == events);
  CHECK(sample(text, fmt::format("walhook_endpoint_delivered_total{{{}}}", fail_label)) == 0);
  CHECK(sample(text, fmt::format("walhook_endpoint_dead_total{{{}}}", fail_label)) == 0);
  // The global totals are still there, and agree.
  CHECK(sample(text, "walhook_attempts_total") == 2 * events);
  CHECK(sample(text, "walhook_delivered_total") == events);
  CHECK(sample(text, "walhook_attempt_duration_seconds_count{outcome=\"2xx\"}") == events);
  CHECK(sample(text, "walhook_attempt_duration_seconds_count{outcome=\"5xx\"}") == events);
  CHECK(sample(text, "walhook_attempt_duration_seconds_bucket{outcome=\"5xx\",le=\"+Inf\"}") == events);
  CHECK(*sample(text, age_series) >= 0);
  CHECK(text.find(fmt::format("walhook_endpoint_oldest_pending_age_seconds{{{}}}", ok_label)) == std::string::npos);
  CHECK(sample(text, "walhook_streaming") == 1);
  CHECK(text.find("\nwalhook_slot_wal_status{status=\"reserved\"} 1\n") != std::string::npos);
  // The endpoints' states (compose/prometheus/rules.yml alerts on them): three failures in a row.
  CHECK(sample(text, fmt::format("walhook_endpoint_status{{{},status=\"active\"}}", ok_label)) == 1);
  CHECK(sample(text, fmt::format("walhook_endpoint_consecutive_failures{{{}}}", ok_label)) == 0);
  CHECK(sample(text, fmt::format("walhook_endpoint_consecutive_failures{{{}}}", fail_label)) == events);
  // The operator pauses the healthy one: its one series says so.
  std::string out;
  REQUIRE(test::run_walhook({"endpoint", "pause", std::to_string(ok), "--database-url", s.url}, out) == 0);
  CHECK(test::eventually([&] {
    text = scrape(leader_port);
    return sample(text, fmt::format("walhook_endpoint_status{{{},status=\"paused\"}}", ok_label)) == 1;
  }, 10s));
  CHECK(text.find(fmt::format("walhook_endpoint_status{{{},status=\"active\"}}", ok_label)) == std::string::npos);

  // Build info: the version and commit this binary was built with, the same as --version.
  const std::string build_info =
      fmt::format("walhook_build_info{{version=\"{}\",commit=\"{}\"}}", relay::walhook_version, relay::walhook_commit);
  CHECK(relay::walhook_version == "0.1.0");
  CHECK(sample(text, build_info) == 1);
  std::string version_output;
  CHECK(test::run_walhook({"--version"}, version_output) == 0);
  CHECK(version_output.find(fmt::format("walhook {} ({})", relay::walhook_version, relay::walhook_commit)) !=
        std::string::npos);
  // Process metrics of the walhook process (not of this test).
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto started = sample(text, "process_start_time_seconds");
  REQUIRE(started);
  CHECK(*started <= now + 1);
  CHECK(*started > now - 120);
  CHECK(sample(text, "process_resident_memory_bytes").value_or(0) > 1 << 20);
  CHECK(sample(text, "process_virtual_memory_bytes").value_or(0) > 1 << 20);
  CHECK(sample(text, "process_open_fds").value_or(0) >= 5);  // stdio, listener, PostgreSQL connections
  CHECK(sample(text, "process_cpu_seconds_total").has_value());
  CHECK(sample(text, "process_max_fds").has_value());

  // A hot standby on the same slot: it waits for the slot's lock.
  const int standby_port = relay::free_tcp_port();
  auto standby = s.start_walhook(
      {"--instance-name", "standby", "--admin-listen", fmt::format("127.0.0.1:{}", standby_port)}, "standby");
  REQUIRE(test::eventually([&] { return standby.count_in_log("standby.waiting") > 0; }, 20s));
  auto standby_text = scrape(standby_port);
  CAPTURE(standby_text);
  CHECK(sample(standby_text, "walhook_streaming") == 0);
  CHECK(standby_text.find("walhook_endpoint_oldest_pending_age_seconds") == std::string::npos);
  CHECK(standby_text.find("walhook_slot_wal_status") == std::string::npos);
  CHECK(standby_text.find("walhook_slot_retained_wal_bytes") == std::string::npos);
  CHECK(standby_text.find("walhook_endpoint_status{") == std::string::npos);  // its directory is not current
  CHECK(sample(standby_text, build_info) == 1);
  CHECK(sample(standby_text, "process_resident_memory_bytes").has_value());
  CHECK(sample(standby_text, "walhook_attempts_total") == 0);  // its own counters: it attempted nothing
  // The leader still has it.
  CHECK(sample(scrape(leader_port), age_series).has_value());

  // The leader loses its lock session and goes back to waiting: with its endpoints still known,
  // it keeps its own counters but stops reading the database; the new leader reads it instead.
  CHECK(s.value("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'walhook-lock leader'") == "1");
  REQUIRE(test::eventually([&] { return standby.count_in_log("\"replication.streaming\"") > 0; }, 20s));
  REQUIRE(test::eventually([&] { return sample(scrape(leader_port), "walhook_streaming") == 0; }, 10s));
  auto demoted = scrape(leader_port);
  CAPTURE(demoted);
  CHECK(demoted.find("walhook_endpoint_oldest_pending_age_seconds") == std::string::npos);
  CHECK(demoted.find("walhook_slot_wal_status") == std::string::npos);
  CHECK(sample(demoted, fmt::format("walhook_endpoint_attempts_total{{{},sink=\"http\",outcome=\"5xx\"}}", fail_label)) == events);
  CHECK(test::eventually([&] { return sample(scrape(standby_port), age_series).has_value(); }, 10s));

  CHECK(standby.stop() == 0);
  CHECK(leader.stop() == 0);  // a stop that hangs: stop() shows what the demoted leader did
}

TEST_CASE("the oldest-pending query probes deliveries_open_age once per endpoint, and answers like the old aggregate") {
  test::scenario s("metrics_plan");
  s.db.exec("INSERT INTO walhook.endpoints (tenant_id, url, secret) "
            "SELECT 't', 'http://127.0.0.1:1/' || i, 'whsec_x' FROM generate_series(1, 100) i");
  // 50,000 open rows over the 100 endpoints, 1 in 50 'sending', and as many finished ones.
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, event_created_at, next_attempt_at) "
            "SELECT e.id, gen_random_uuid(), CASE WHEN i % 50 = 0 THEN 'sending' ELSE 'pending' END, "
            "       now() - (i || ' ms')::interval, now() "
            "  FROM generate_series(1, 50000) i JOIN LATERAL (SELECT min(id) + i % 100 AS id FROM walhook.endpoints) e ON true");
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, event_created_at, delivered_at) "
            "SELECT e.id, gen_random_uuid(), 'delivered', now() - (i || ' s')::interval, now() "
            "  FROM generate_series(1, 50000) i JOIN LATERAL (SELECT min(id) + i % 100 AS id FROM walhook.endpoints) e ON true");
  s.db.simple("ANALYZE walhook.deliveries");
  s.db.simple("ANALYZE walhook.endpoints");
  // The statement as walhook runs it, for one shard ($1 = 1, $2 = 0).
  std::string stmt = std::regex_replace(std::string(sql::statements::oldest_pending), std::regex(R"(\$1)"), "1");
  stmt = std::regex_replace(stmt, std::regex(R"(\$2)"), "0");
  auto plan = s.db.exec("EXPLAIN " + stmt);
  std::string text;
  for (int r = 0; r < plan.rows(); ++r) text += std::string(plan.value(r, 0)) + "\n";
  CAPTURE(text);
  CHECK(text.find("using deliveries_open_age on deliveries") != std::string::npos);
  CHECK(text.find("Seq Scan on deliveries") == std::string::npos);
  CHECK(text.find("Index Cond: (endpoint_id = e.id)") != std::string::npos);
  // Same rows as the aggregate it replaces, in one statement (one now()).
  const std::string old_stmt =
      "SELECT endpoint_id, extract(epoch FROM now() - min(event_created_at)) FROM walhook.deliveries "
      "WHERE status IN ('pending', 'sending') GROUP BY endpoint_id";
  CHECK(s.value(fmt::format("SELECT count(*) FROM ((({0}) EXCEPT ({1})) UNION ALL (({1}) EXCEPT ({0}))) x", old_stmt, stmt)) ==
        "0");
  CHECK(s.value(fmt::format("SELECT count(*) FROM ({}) x", stmt)) == "100");
}

TEST_CASE("/metrics costs the database one query at a time however often it is scraped: a flood is answered while that query waits") {
  test::scenario s("metrics_cache");
  const auto failing = test::add_endpoint(s.db, "t", s.rcv->url("/fail"), delivery::generate_secret());
  relay::receiver_behaviour unavailable;
  unavailable.status = 503;
  s.rcv->set_behaviour("/fail", unavailable);
  const int port = relay::free_tcp_port();
  auto walhook = s.start_walhook({"--backoff-base-ms", "600000", "--admin-listen", fmt::format("127.0.0.1:{}", port)});
  INFO(walhook.log_tail(4000));
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.db.exec("SELECT walhook.publish('t', 'order.created', '{}'::jsonb)");
  const std::string age_series = fmt::format("walhook_endpoint_oldest_pending_age_seconds{{endpoint=\"{}\"}}", failing);
  REQUIRE(test::eventually([&] { return sample(scrape(port), age_series).has_value(); }, 20s));

  // The oldest-pending query (the one database read of a scrape) now waits for this lock, and
  // so does whatever else walhook's state-store connection runs (one statement at a time).
  relay::blocking_db locker(s.url);
  locker.exec("BEGIN");
  locker.exec("LOCK TABLE walhook.deliveries IN ACCESS EXCLUSIVE MODE");
  const auto locked_at = std::chrono::steady_clock::now();
  // A scraper: its first scrape more than a second after the last text has it computed, and
  // waits behind the lock (5 s at most, its deadline); the next ones too, until the lock goes.
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done) test::http_get(static_cast<unsigned short>(port), "/metrics");
  });
  const std::string waiting_query =
      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name LIKE 'walhook-state %'";
  // The text is older than a second by then: every scrape below finds it stale.
  const bool query_waits = test::eventually(
      [&] { return std::chrono::steady_clock::now() - locked_at > 1500ms && s.value(waiting_query) == "1"; }, 10s);
  // Meanwhile a flood: 100 scrapes, each answered with the last text, none starting a query.
  int answered = 0;
  if (query_waits)
    for (int i = 0; i < 100; ++i) {
      auto [status, body] = test::http_get(static_cast<unsigned short>(port), "/metrics");
      if (status == 200 && sample(body, age_series).has_value()) ++answered;
    }
  const std::string queries_waiting = s.value(waiting_query);
  locker.exec("ROLLBACK");
  done = true;
  scraper.join();
  REQUIRE(query_waits);
  CHECK(answered == 100);
  CHECK(queries_waiting == "1");  // still the one connection's one statement
  CHECK(test::eventually([&] { return sample(scrape(port), age_series).has_value(); }, 10s));
  CHECK(walhook.stop() == 0);
}
