// walhook-bench: commit-to-receipt latency, throughput and cost of walhook against the classic
// polling outbox relay and its LISTEN/NOTIFY variant, on the same database, receiver, HTTP
// client and signing. `walhook-bench run SCENARIO` (see bench/README.md).

#include "bench/database.hpp"
#include "bench/endpoint_scale.hpp"
#include "bench/policies.hpp"
#include "bench/proc_stats.hpp"
#include "bench/report.hpp"
#include "bench/scenarios.hpp"
#include "common/log.hpp"
#include "common/time.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace {

using namespace walhook;
using namespace walhook::bench;

std::string now_iso() { return format_iso8601(system_now()); }

double seconds_of(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }
std::chrono::milliseconds milliseconds_of(double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); }

std::string source_version() {
  std::string out;
  if (relay::run_process({"git", "-C", WALHOOK_SOURCE_DIR, "describe", "--always", "--dirty"}, "", out) != 0) return {};
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string command_line(int argc, char** argv) {
  std::string s = "walhook-bench";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    // Never print a password given in a URL.
    if (a.find("://") != std::string::npos && a.find('@') != std::string::npos) a = "<database-url>";
    s += " " + a;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"walhook-bench: walhook against a polling outbox relay, side by side (commit-to-receipt latency, "
               "throughput, CPU, memory, slot lag)"};
  app.require_subcommand(1);

  std::string scenario;
  std::string relays = "walhook,polling,notify";
  std::string database_url;
  std::string walhook_binary = WALHOOK_BINARY;
  std::string out_dir = WALHOOK_BENCH_RESULTS_DIR;
  scenario_options so;
  bench_settings settings;
  double warmup_s = 2, measure_s = 10;
  long long deadline_ms = 5000, poll_interval_ms = 500;
  bool quiet = false;

  add_policies_command(app);
  auto* run = app.add_subcommand("run", "Run a scenario (or a suite) and write <out>/<scenario>.{md,json} and PNG plots");
  std::vector<std::string> choices = scenario_names();
  choices.push_back("all");
  choices.push_back("transient");
  run->add_option("scenario", scenario,
                  "steady | max | fanout | noisy-neighbour | recovery | custom | catchup | crash-hung | pg-restart | "
                  "endpoint-scale | shards | nats | amqp | ingest | all (steady … recovery) | transient (catchup, crash-hung, "
                  "pg-restart)")
      ->required()
      ->check(CLI::IsMember(choices));
  run->add_option("--relay", relays, "Relays to compare, comma-separated: walhook, polling, notify")->capture_default_str();
  run->add_option("--runs", so.runs, "Runs of every trial (the report shows medians)")->capture_default_str()->check(CLI::Range(1, 100));
  run->add_option("--database-url", database_url,
                  "PostgreSQL to use (needs CREATEDB and replication; the bench creates and drops databases "
                  "walhook_bench_*); default: a throwaway cluster")
      ->envname("WALHOOK_DATABASE_URL");
  bool durable = true;
  run->add_flag("--durable,!--no-durable", durable,
                "Throwaway cluster: fsync=on, synchronous_commit=on, full_page_writes=on (production; the default), or "
                "with --no-durable fsync=off, full_page_writes=off. Ignored with --database-url (its settings are reported)");
  run->add_option("--walhook", walhook_binary, "The walhook binary under test")->capture_default_str();
  std::string walhook_label;
  run->add_option("--walhook-label", walhook_label, "How to name the walhook under test in the report (default: git describe of this source tree)");
  run->add_option("--walhook-arg", settings.walhook_args, "Extra `walhook run` flag (repeatable), e.g. --walhook-arg=--max-in-flight=128");
  run->add_option("--out", out_dir, "Results directory")->capture_default_str();
  run->add_option("--warmup-s", warmup_s, "Warm-up before measuring, seconds")->capture_default_str();
  run->add_option("--measure-s", measure_s, "Measured load, seconds (steady, fanout, custom)")->capture_default_str();
  run->add_option("--payload-bytes", so.payload_bytes, "Outbox payload size (ingest: each request's body)")->capture_default_str();
  run->add_option("--connections", so.connections, "Generator connections")->capture_default_str();
  run->add_option("--max-concurrency", so.max_concurrency, "Every endpoint's max_concurrency")->capture_default_str();
  run->add_option("--deadline-ms", deadline_ms, "HTTP deadline of every relay (walhook --deadline-ms)")->capture_default_str();
  run->add_option("--poll-workers", settings.poll_workers, "Polling relays: worker connections")->capture_default_str();
  run->add_option("--poll-batch", settings.poll_batch, "Polling relays: rows reserved per transaction")->capture_default_str();
  run->add_option("--poll-interval-ms", poll_interval_ms, "Polling relays: poll period when idle")->capture_default_str();
  run->add_option("--steady-rates", so.steady_rates, "steady: rates, events/s")->delimiter(',')->capture_default_str();
  run->add_option("--ladder", so.ladder, "max: rates to climb, events/s")->delimiter(',');
  long long step_ms = so.step.count();
  run->add_option("--step-ms", step_ms, "max: duration of each step")->capture_default_str();
  run->add_option("--max-rows-per-commit", so.max_rows_per_commit, "max: rows per transaction")->capture_default_str();
  run->add_option("--noisy-rate", so.noisy_rate, "noisy-neighbour: events/s over 17 endpoints")->capture_default_str();
  double noisy_measure_s = 20;
  run->add_option("--noisy-measure-s", noisy_measure_s, "noisy-neighbour: measured seconds")->capture_default_str();
  long long down_ms = so.down.count(), kill_after_ms = so.kill_after.count();
  run->add_option("--down-ms", down_ms, "recovery: walhook stays dead this long")->capture_default_str();
  run->add_option("--kill-after-ms", kill_after_ms, "recovery: kill -9 this long after the load started")->capture_default_str();
  run->add_option("--rate", so.rate, "custom: events/s")->capture_default_str();
  run->add_option("--rows-per-commit", so.rows_per_commit, "custom: rows per transaction")->capture_default_str();
  run->add_option("--endpoints", so.endpoints, "custom: endpoints")->capture_default_str();
  run->add_option("--fanout", so.custom_fanout, "custom: endpoints per event (per tenant)")->capture_default_str();
  run->add_option("--tenants", so.tenants, "custom: tenants (default endpoints / fanout; extra tenants have no endpoint)");
  run->add_option("--behaviour", so.behaviour, "custom: immediate | delay:MS | error:RATE | never")->capture_default_str();
  std::string catchup_from = "slot,table";
  run->add_option("--catchup-from", catchup_from, "catchup: variants, comma-separated: slot (walhook down), table (endpoint down)")
      ->capture_default_str();
  run->add_option("--catchup-rate", so.catchup_rate, "catchup slot: events/s committed while walhook is down")->capture_default_str();
  double catchup_down_s = seconds_of(so.catchup_down), catchup_max_s = seconds_of(so.catchup_max);
  run->add_option("--catchup-down-s", catchup_down_s, "catchup slot: seconds walhook is down")->capture_default_str();
  run->add_option("--catchup-live-rate", so.catchup_live_rate, "catchup slot: events/s once walhook runs")->capture_default_str();
  run->add_option_function<std::string>(
       "--catchup-endpoint-delay-ms",
       [&so](const std::string& v) {
         const auto dash = v.find('-');
         so.catchup_delay_min_ms = std::stoi(v.substr(0, dash));
         so.catchup_delay_max_ms = dash == std::string::npos ? so.catchup_delay_min_ms : std::stoi(v.substr(dash + 1));
       },
       "catchup slot: MIN-MAX — endpoints 0-6 answer after delays spread over it (endpoint 7 stays fast: the "
       "uninvolved tenant)");
  run->add_option("--catchup-connections", so.catchup_connections,
                  "catchup slot: generator connections (one-row durable commits at 3,000/s need more than 4)")
      ->capture_default_str();
  run->add_option("--catchup-max-s", catchup_max_s, "catchup: bound on each wait (catch-up, pile-up; the drain gets twice this)")
      ->capture_default_str();
  run->add_option("--catchup-backlog", so.catchup_backlog, "catchup table: pending deliveries of the down endpoint")->capture_default_str();
  run->add_option("--catchup-backlog-txns", so.catchup_backlog_txns, "catchup table: … inserted in this many transactions")
      ->capture_default_str();
  run->add_option("--catchup-table-live-rate", so.catchup_table_live_rate, "catchup table: events/s over the 4 healthy endpoints")
      ->capture_default_str();
  run->add_option("--crash-rate", so.crash_rate, "crash-hung: events/s (each to all 4 endpoints)")->capture_default_str();
  double crash_measure_s = seconds_of(so.crash_measure);
  run->add_option("--crash-measure-s", crash_measure_s, "crash-hung: seconds of load")->capture_default_str();
  run->add_option("--crash-kills", so.crash_kills, "crash-hung: kill -9 of walhook, this many times")->capture_default_str()->check(CLI::Range(1, 100));
  long long crash_interval_ms = so.crash_interval.count(), crash_down_ms = so.crash_down.count();
  run->add_option("--crash-interval-ms", crash_interval_ms, "crash-hung: time between kills (the first this long after the start)")
      ->capture_default_str();
  run->add_option("--crash-down-ms", crash_down_ms, "crash-hung: walhook is restarted this long after each kill")->capture_default_str();
  run->add_option("--restart-rate", so.restart_rate, "pg-restart: events/s over 2 endpoints")->capture_default_str();
  run->add_option("--restarts", so.restarts, "pg-restart: PostgreSQL restarts under load")->capture_default_str()->check(CLI::Range(1, 100));
  run->add_option("--restart-mode", so.restart_mode, "pg-restart: stop mode")
      ->capture_default_str()
      ->check(CLI::IsMember({"smart", "fast", "immediate"}));
  double restart_streaming_s = seconds_of(so.restart_streaming);
  run->add_option("--restart-streaming-s", restart_streaming_s, "pg-restart: seconds of load between walhook streaming again and the next restart")
      ->capture_default_str();
  run->add_option("--scale-tenants", so.scale_tenants, "endpoint-scale: tenants")->capture_default_str()->check(CLI::Range(1, 100000));
  run->add_option("--scale-endpoints-per-tenant", so.scale_endpoints_per_tenant, "endpoint-scale: endpoints of each tenant")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  run->add_option("--scale-fanout", so.scale_fanout,
                  "endpoint-scale: endpoints each event goes to (each endpoint subscribes to one event type; must divide "
                  "--scale-endpoints-per-tenant)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  run->add_option("--scale-rate", so.scale_rate, "endpoint-scale: events/s")->capture_default_str();
  double scale_measure_s = seconds_of(so.scale_measure);
  run->add_option("--scale-measure-s", scale_measure_s, "endpoint-scale: measured seconds of load")->capture_default_str();
  run->add_option("--scale-bad", so.scale_bad,
                  "endpoint-scale: share of endpoints that are bad (a third each: answer 500, answer after --scale-slow-ms, "
                  "never answer)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  long long scale_slow_ms = so.scale_slow.count();
  run->add_option("--scale-slow-ms", scale_slow_ms, "endpoint-scale: slow endpoints answer 200 after this long")->capture_default_str();
  run->add_flag("--scale-control,!--no-scale-control", so.scale_control,
                "endpoint-scale: also run the control (every endpoint answers at once)")
      ->capture_default_str();
  run->add_option("--shard-counts", so.shard_counts, "shards: walhook processes (shards) to compare, comma-separated; 1 = unsharded")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  run->add_option("--shard-variants", so.shard_variants, "shards: workloads, comma-separated: steady, backlog")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"steady", "backlog"}));
  run->add_option("--shard-tenants", so.shard_tenants, "shards: tenants (one endpoint each), spread over the shards by walhook's hash")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  run->add_option("--shard-rate", so.shard_rate, "shards steady: events/s, one row per transaction")->capture_default_str();
  double shard_measure_s = seconds_of(so.shard_measure);
  run->add_option("--shard-measure-s", shard_measure_s, "shards steady: measured seconds of load (after --warmup-s)")->capture_default_str();
  run->add_option("--shard-backlog", so.shard_backlog, "shards backlog: events committed while no walhook runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  run->add_option("--shard-backlog-rows-per-commit", so.shard_backlog_rows_per_commit, "shards backlog: rows per transaction")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  run->add_option("--shard-backlog-rate", so.shard_backlog_rate, "shards backlog: events/s while the backlog is committed")
      ->capture_default_str();
  run->add_option("--shard-backlog-connections", so.shard_backlog_connections, "shards backlog: generator connections")
      ->capture_default_str();
  run->add_option("--broker-max-concurrency", so.broker_max_concurrency,
                  "nats, amqp: every endpoint's max_concurrency (unconfirmed publishes in flight; walhook's --max-in-flight "
                  "is 256 for all 8 endpoints)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  run->add_flag("--broker-ladder,!--no-broker-ladder", so.broker_ladder, "nats, amqp: also climb the max ladder")->capture_default_str();
  run->add_option("--ingest-rates", so.ingest_rates, "ingest: steady rates, requests/s")->delimiter(',')->capture_default_str();
  run->add_option("--ingest-receivers", so.ingest_receivers,
                  "ingest: receivers to compare, comma-separated: walhook, no-group-commit (walhook ingest --max-batch 1), "
                  "naive (in the bench process)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"walhook", "no-group-commit", "naive"}));
  run->add_option("--ingest-connections", so.ingest_connections, "ingest: the sender's keep-alive connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  run->add_option("--ingest-duplicates", so.ingest_duplicates,
                  "ingest: share of requests that repeat an earlier event (same id and body: a sender's retry)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9));
  run->add_flag("--ingest-ladder,!--no-ingest-ladder", so.ingest_ladder, "ingest: also climb the ladder (highest sustained rate)")
      ->capture_default_str();
  run->add_option("--ingest-ladder-rates", so.ingest_ladder_rates, "ingest: the ladder's rates, requests/s")
      ->delimiter(',')
      ->capture_default_str();
  long long ingest_step_ms = so.ingest_step.count(), ingest_bound_ms = so.ingest_bound.count();
  run->add_option("--ingest-step-ms", ingest_step_ms, "ingest: duration of each ladder step")->capture_default_str();
  run->add_option("--ingest-bound-ms", ingest_bound_ms,
                  "ingest: a ladder step is sustained when every request is answered 2xx within this of its due time")
      ->capture_default_str();
  run->add_option("--ingest-arg", so.ingest_args,
                  "Extra `walhook ingest` flag (repeatable, both walhook receivers), e.g. --ingest-arg=--commit-sessions=4");
  run->add_option("--naive-workers", so.naive_workers, "ingest, naive receiver: worker threads, one PostgreSQL connection each")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  double naive_handler_ms = 2;
  run->add_option("--naive-handler-ms", naive_handler_ms,
                  "ingest, naive receiver: processing time of a new event, inside the request (ms)")
      ->capture_default_str();
  run->add_flag("--quiet", quiet, "No progress lines on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "walhook-bench: " << e.what() << "\n";
    return 1;
  }
  if (!run->parsed()) return 0;  // another subcommand ran in its callback
  log::set_level(log::level::warn);

  so.relays.clear();
  {
    std::stringstream ss(relays);
    std::string item;
    while (std::getline(ss, item, ',')) {
      relay_kind k;
      if (!parse_relay_kind(item, k)) {
        std::cerr << "walhook-bench: --relay: unknown relay '" << item << "' (walhook, polling, notify)\n";
        return 2;
      }
      so.relays.push_back(k);
    }
  }
  so.warmup = std::chrono::milliseconds(static_cast<long long>(warmup_s * 1000));
  so.measure = std::chrono::milliseconds(static_cast<long long>(measure_s * 1000));
  so.noisy_measure = std::chrono::milliseconds(static_cast<long long>(noisy_measure_s * 1000));
  so.step = std::chrono::milliseconds(step_ms);
  so.down = std::chrono::milliseconds(down_ms);
  so.kill_after = std::chrono::milliseconds(kill_after_ms);
  {
    so.catchup_from.clear();
    std::stringstream ss(catchup_from);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item != "slot" && item != "table") {
        std::cerr << "walhook-bench: --catchup-from: unknown variant '" << item << "' (slot, table)\n";
        return 2;
      }
      so.catchup_from.push_back(item);
    }
  }
  so.catchup_down = milliseconds_of(catchup_down_s);
  so.catchup_max = milliseconds_of(catchup_max_s);
  so.crash_measure = milliseconds_of(crash_measure_s);
  so.crash_interval = std::chrono::milliseconds(crash_interval_ms);
  so.crash_down = std::chrono::milliseconds(crash_down_ms);
  so.restart_streaming = milliseconds_of(restart_streaming_s);
  so.scale_measure = milliseconds_of(scale_measure_s);
  so.scale_slow = std::chrono::milliseconds(scale_slow_ms);
  so.shard_measure = milliseconds_of(shard_measure_s);
  so.ingest_step = std::chrono::milliseconds(ingest_step_ms);
  so.ingest_bound = std::chrono::milliseconds(ingest_bound_ms);
  so.naive_handler = std::chrono::microseconds(static_cast<long long>(naive_handler_ms * 1000));
  so.relays_given = run->count("--relay") > 0;
  settings.walhook_binary = walhook_binary;
  settings.deadline = std::chrono::milliseconds(deadline_ms);
  settings.poll_interval = std::chrono::milliseconds(poll_interval_ms);
  settings.verbose = !quiet;

  try {
    if (!std::filesystem::exists(walhook_binary)) throw std::runtime_error("no walhook binary at " + walhook_binary);
    std::filesystem::create_directories(out_dir);
    settings.log_dir = std::filesystem::temp_directory_path() / "walhook-bench-logs";
    std::filesystem::create_directories(settings.log_dir);

    if (!quiet) std::cerr << (database_url.empty() ? "starting a throwaway PostgreSQL …\n" : "connecting …\n");
    // endpoint-scale reads the cost of walhook's statements from pg_stat_statements: the
    // throwaway cluster preloads it then (and starts without it if the module is missing).
    std::unique_ptr<bench_cluster> cluster_owner;
    if (database_url.empty() && scenario == "endpoint-scale") {
      try {
        cluster_owner = std::make_unique<bench_cluster>(database_url, durable, endpoint_scale_cluster_settings());
      } catch (const std::exception& e) {
        std::cerr << "PostgreSQL did not start with pg_stat_statements (" << e.what() << "); starting without it\n";
      }
    }
    if (!cluster_owner) cluster_owner = std::make_unique<bench_cluster>(database_url, durable);
    bench_cluster& cluster = *cluster_owner;
    trial_runner runner(cluster, settings);
    const auto started = std::chrono::steady_clock::now();
    const std::string suite_began = now_iso(), suite_load_before = load_average();
    const bool suite = !suite_scenarios(scenario).empty();
    std::vector<std::string> names = suite ? suite_scenarios(scenario) : std::vector<std::string>{scenario};
    std::vector<scenario_report> reports;
    for (const auto& name : names) {
      const std::string began = now_iso(), load_before = load_average();
      scenario_report r = run_scenario(name, runner, so);
      r.started_at = began;
      r.load_before = load_before;
      r.command = command_line(argc, argv);
      r.machine = describe_machine();
      r.database = cluster.description();
      r.walhook_binary = walhook_binary;
      r.walhook_version = walhook_label.empty() ? source_version() : walhook_label;
      r.finished_at = now_iso();
      r.load_after = load_average();
      auto files = write_reports(r, out_dir);
      if (!quiet) {
        std::cerr << "\n" << name << ":\n";
        for (const auto& f : r.findings) std::cerr << "  * " << f << "\n";
        for (const auto& f : files) std::cerr << "  wrote " << f << "\n";
      }
      reports.push_back(std::move(r));
    }
    if (suite) {
      // summary.md for all, transient-summary.md for transient.
      const std::string summary = scenario == "all" ? "summary.md" : scenario + "-summary.md";
      std::ofstream md(out_dir + "/" + summary);
      scenario_report suite_report = reports.front();  // machine and database are the same for all
      suite_report.started_at = suite_began;
      suite_report.load_before = suite_load_before;
      suite_report.finished_at = reports.back().finished_at;
      suite_report.load_after = reports.back().load_after;
      md << "# walhook-bench: " << (scenario == "all" ? "all scenarios" : scenario + " scenarios") << "\n\n`"
         << command_line(argc, argv) << "`\n\n" << markdown_machine(suite_report) << "\n";
      for (const auto& r : reports) {
        md << "## " << r.scenario << "\n\n";
        for (const auto& f : r.findings) md << "* " << f << "\n";
        md << "\nDetails: [" << r.scenario << ".md](" << r.scenario << ".md)\n\n";
      }
      md << fmt::format("Suite wall time: {:.0f} s.\n",
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      if (!quiet) std::cerr << "wrote " << out_dir << "/" << summary << "\n";
    }
    if (!quiet)
      std::cerr << fmt::format("done in {:.0f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  } catch (const std::exception& e) {
    std::cerr << "walhook-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
