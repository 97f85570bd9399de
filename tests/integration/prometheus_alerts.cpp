// Alerts that fire for real (issue 22): Debian's Prometheus scrapes a real walhook whose
// endpoint fails, evaluates compose/prometheus/rules.yml, and fires the endpoint's alerts. The
// rules are used as shipped but for their `for:` durations (5 and 10 minutes), set to 0 s in the
// copy Prometheus loads so that the test takes seconds; `promtool test rules`
// (scripts/check-compose) checks the durations themselves.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

using namespace walhook;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The firing alerts Prometheus reports (GET /api/v1/alerts) as "alertname endpoint" ("-" if the
/// alert has no endpoint label).
std::set<std::string> firing(unsigned short port) {
  std::set<std::string> out;
  auto [status, body] = test::http_get(port, "/api/v1/alerts");
  if (status != 200) return out;
  simdjson::dom::parser parser;
  simdjson::dom::array alerts;
  if (parser.parse(body)["data"]["alerts"].get(alerts) != simdjson::SUCCESS) return out;
  for (auto a : alerts) {
    std::string_view state, name, endpoint = "-";
    if (a["state"].get(state) || a["labels"]["alertname"].get(name)) continue;
    if (a["labels"]["endpoint"].get(endpoint)) endpoint = "-";  // an alert of the whole walhook
    if (state == "firing") out.insert(fmt::format("{} {}", name, endpoint));
  }
  return out;
}

/// Prometheus as a child process, in its own directory; stopped (SIGTERM) when it goes.
struct prometheus_process {
  fs::path dir;
  pid_t pid = -1;
  unsigned short port = 0;
  ~prometheus_process() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

}  // namespace

TEST_CASE("a real Prometheus scrapes walhook and fires compose/prometheus/rules.yml's alerts for a failing endpoint") {
  const std::string binary = "/usr/bin/prometheus";
  REQUIRE_MESSAGE(fs::exists(binary), "no " << binary << ": install the Debian package `prometheus` (scripts/bootstrap does)");
  test::scenario s("prom_alerts");
  const auto failing = test::add_endpoint(s.db, "t", s.rcv->url("/fail"), delivery::generate_secret());
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/fail", down);
  const int admin_port = relay::free_tcp_port();
  auto walhook = s.start_walhook({"--admin-listen", fmt::format("127.0.0.1:{}", admin_port), "--breaker-threshold", "5",
                                  "--backoff-base-ms", "100"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  for (int i = 0; i < 10; ++i) s.publish("t", "order.paid");

  prometheus_process prom;
  prom.dir = fs::temp_directory_path() / fmt::format("walhook-it-prometheus-{}", ::getpid());
  fs::remove_all(prom.dir);
  fs::create_directories(prom.dir);
  // The rules as shipped, their `for:` set to 0 s.
  const auto rules = read_file(fs::path(WALHOOK_SOURCE_DIR) / "compose/prometheus/rules.yml");
  REQUIRE(rules.find("for: 5m") != std::string::npos);
  std::ofstream(prom.dir / "rules.yml") << std::regex_replace(rules, std::regex(R"(for: \d+[smh])"), "for: 0s");
  std::ofstream(prom.dir / "prometheus.yml") << fmt::format(R"(global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: walhook
    static_configs:
      - targets: ['127.0.0.1:{}']
)",
                                                            admin_port);
  prom.port = static_cast<unsigned short>(relay::free_tcp_port());
  prom.pid = relay::spawn_process({binary, "--config.file=" + (prom.dir / "prometheus.yml").string(),
                                   "--storage.tsdb.path=" + (prom.dir / "data").string(),
                                   fmt::format("--web.listen-address=127.0.0.1:{}", prom.port), "--log.level=warn"},
                                  (prom.dir / "prometheus.log").string());
  REQUIRE(prom.pid > 0);
  REQUIRE_MESSAGE(test::eventually([&] { return test::http_get(prom.port, "/-/ready").first == 200; }, 30s),
                  read_file(prom.dir / "prometheus.log"));

  // The endpoint fails 5 times in a row: its breaker pauses it. Both alerts fire for it, and
  // WalhookNoStandby (this walhook runs alone); nothing says no instance streams.
  const auto failing_alert = fmt::format("WalhookEndpointFailing {}", failing);
  const auto paused_alert = fmt::format("WalhookEndpointPausedByBreaker {}", failing);
  std::set<std::string> now;
  const bool fired = test::eventually([&] {
    now = firing(prom.port);
    return now.contains(failing_alert) && now.contains(paused_alert) && now.contains("WalhookNoStandby -");
  }, 60s);
  std::string seen;
  for (const auto& a : now) seen += a + "; ";
  INFO("firing: " << seen);
  if (!fired) MESSAGE(read_file(prom.dir / "prometheus.log") << "\n" << walhook.log_tail());
  CHECK(fired);
  CHECK_FALSE(now.contains("WalhookNotStreaming -"));
  CHECK_FALSE(now.contains("WalhookSlotAtRisk -"));

  // An operator disables it: the disabled alert replaces the breaker's.
  std::string out;
  REQUIRE(test::run_walhook({"endpoint", "disable", std::to_string(failing), "--database-url", s.url}, out) == 0);
  CHECK(test::eventually([&] {
    now = firing(prom.port);
    return now.contains(fmt::format("WalhookEndpointDisabled {}", failing)) && !now.contains(paused_alert);
  }, 30s));
  CHECK(walhook.stop() == 0);
}
