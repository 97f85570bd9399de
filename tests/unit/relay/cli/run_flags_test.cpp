// relay/cli/run.hpp: every flag of `walhook run` lands in the setting it names, in the flag's
// unit (one row per flag), and --help shows the default the setting declares.

#include "relay/cli/run.hpp"

#include <CLI/CLI.hpp>

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::relay;
using namespace std::chrono_literals;

namespace {

/// `walhook run --database-url x <args>` parsed into fresh run_flags.
cli::run_flags parsed(const std::string& args) {
  CLI::App app;
  auto* run = app.add_subcommand("run");
  cli::run_flags f;
  cli::add_run_flags(run, f);
  app.parse("run --database-url x " + args);
  return f;
}

/// `walhook run --help`.
std::string help() {
  CLI::App app;
  auto* run = app.add_subcommand("run");
  cli::run_flags f;
  cli::add_run_flags(run, f);
  return run->help();
}

}  // namespace

TEST_CASE("run flags: each sets its setting, durations in the flag's unit") {
  struct row {
    const char* args;
    std::function<long long(const run_options&)> setting;
    long long expected;
  };
  const auto ms = [](auto d) { return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
  for (const auto& r : std::vector<row>{
           {"--max-in-flight 3", [](const run_options& o) { return static_cast<long long>(o.dispatch.limits.max_in_flight); }, 3},
           {"--max-slow-in-flight 4", [](const run_options& o) { return static_cast<long long>(o.dispatch.limits.max_slow_in_flight); }, 4},
           {"--max-queue-per-endpoint 5", [](const run_options& o) { return static_cast<long long>(o.dispatch.limits.max_queued_per_endpoint); }, 5},
           {"--max-queue-total 6", [](const run_options& o) { return static_cast<long long>(o.dispatch.limits.max_queued_total); }, 6},
           {"--max-wait-ms 7", [&](const run_options& o) { return ms(o.dispatch.max_wait_in_memory); }, 7},
           {"--max-batch 8", [](const run_options& o) { return static_cast<long long>(o.store.max_batch); }, 8},
           {"--max-queue-bytes 1KiB", [](const run_options& o) { return static_cast<long long>(o.dispatch.max_queued_bytes); }, 1024},
           {"--max-claim 9", [](const run_options& o) { return static_cast<long long>(o.dispatch.max_claim); }, 9},
           {"--max-hold-ms 10", [&](const run_options& o) { return ms(o.dispatch.max_hold); }, 10},
           {"--reconnect-max-ms 11", [&](const run_options& o) { return ms(o.reconnect_max); }, 11},
           {"--deadline-ms 12", [&](const run_options& o) { return ms(o.http.total_deadline); }, 12},
           {"--max-payload-bytes 13", [](const run_options& o) { return static_cast<long long>(o.dispatch.admission.max_payload_bytes); }, 13},
           {"--allow-private-networks", [](const run_options& o) { return static_cast<long long>(o.http.allow_private_networks); }, 1},
           {"--max-attempts 14", [](const run_options& o) { return static_cast<long long>(o.dispatch.outcomes.retry.max_attempts); }, 14},
           {"--backoff-base-ms 15", [&](const run_options& o) { return ms(o.dispatch.outcomes.retry.backoff_base); }, 15},
           {"--backoff-max-ms 16", [&](const run_options& o) { return ms(o.dispatch.outcomes.retry.backoff_max); }, 16},
           {"--max-age-s 17", [&](const run_options& o) { return ms(o.dispatch.outcomes.retry.max_age); }, 17'000},
           {"--breaker-threshold 18", [](const run_options& o) { return static_cast<long long>(o.dispatch.outcomes.breaker.failure_threshold); }, 18},
           {"--breaker-pause-s 19", [&](const run_options& o) { return ms(o.dispatch.outcomes.breaker.pause_step); }, 19'000},
           {"--breaker-max-pause-s 20", [&](const run_options& o) { return ms(o.dispatch.outcomes.breaker.max_pause); }, 20'000},
           {"--disable-after-s 21", [&](const run_options& o) { return ms(o.dispatch.outcomes.breaker.disable_after); }, 21'000},
           {"--shutdown-grace-ms 22", [&](const run_options& o) { return ms(o.shutdown_grace); }, 22},
           {"--status-interval-ms 23", [&](const run_options& o) { return ms(o.stream.status_interval); }, 23},
           {"--retention-days 2", [&](const run_options& o) { return ms(o.retention); }, 2 * 86'400'000LL},
           {"--recent-outcomes 24", [](const run_options& o) { return static_cast<long long>(o.recent_outcomes); }, 24},
           {"--record all", [](const run_options& o) { return static_cast<long long>(o.dispatch.outcomes.record_successes); }, 1},
       }) {
    const std::string args = r.args;
    CAPTURE(args);
    const auto f = parsed(args);
    CHECK(r.setting(f.run) == r.expected);
    CHECK(r.setting(run_options{}) != r.expected);  // the row changes something
  }
  CHECK_FALSE(parsed("--record failed").run.dispatch.outcomes.record_successes);
}

TEST_CASE("run flags: a count below 1 or a negative duration is refused in plain words") {
  struct row {
    const char* args;
    const char* says;
  };
  for (const auto& r : std::vector<row>{
           {"--max-in-flight 0", "--max-in-flight: must be at least 1 (got 0)"},
           {"--max-batch -1", "--max-batch: must be at least 1 (got -1)"},
           {"--max-wait-ms -5", "--max-wait-ms: must not be negative (got -5)"},
           {"--max-hold-ms 0", "--max-hold-ms: must be at least 1 (got 0)"},
       }) {
    CAPTURE(r.args);
    std::string what;
    try {
      parsed(r.args);
    } catch (const CLI::ValidationError& e) {
      what = e.what();
    }
    CHECK(what == r.says);
  }
  CHECK(parsed("--max-wait-ms 0").run.dispatch.max_wait_in_memory == 0ms);  // zero is a duration
}

TEST_CASE("run flags: the text settings, and --shard kept as given until run starts") {
  const auto f = parsed("--slot s --shard 1/4 --ca-file ca.pem --admin-listen localhost:0 --admin-token-file t "
                        "--operator-tenant ops --instance-name i");
  CHECK(f.run.database_url == "x");
  CHECK(f.run.slot == "s");
  CHECK(f.shard == "1/4");
  CHECK(f.run.shard == shard_spec{});
  CHECK(f.run.ca_file == "ca.pem");
  CHECK(f.run.admin_listen == "localhost:0");
  CHECK(f.run.admin_token_file == "t");
  CHECK(f.run.dispatch.notifications.operator_tenant == "ops");
  CHECK(f.run.instance_name == "i");
}

TEST_CASE("run flags: --help shows the defaults the settings declare, in the flags' units") {
  const std::string h = help();
  for (const char* shown : {"--max-wait-ms INT=1000", "--max-batch UINT:POSITIVE=1000", "--max-hold-ms INT:POSITIVE=250",
                            "--reconnect-max-ms INT:POSITIVE=500", "--deadline-ms INT=5000", "--max-age-s INT=259200",
                            "--disable-after-s INT=432000", "--retention-days INT:POSITIVE=30",
                            "--record TEXT:{failed,all}=failed", "--slot TEXT=walhook"}) {
    const std::string flag = shown;
    CAPTURE(flag);
    CHECK(h.find(shown) != std::string::npos);
  }
}
