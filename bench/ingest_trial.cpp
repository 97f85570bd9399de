// One trial of the `ingest` scenario (bench/ingest.hpp): database, source, receiver, load,
// correctness, resources.

#include "bench/admin_metrics.hpp"
#include "bench/ingest.hpp"
#include "bench/ingest_load.hpp"
#include "bench/naive_receiver.hpp"
#include "bench/proc_stats.hpp"
#include "delivery/signing.hpp"
#include "relay/demo/embedded_postgres.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>

#include <csignal>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <sys/wait.h>
#include <unistd.h>

namespace walhook::bench {
namespace {

using namespace std::chrono_literals;
constexpr const char* source_name = "bench";

/// A number field of the first log line with "msg":"<msg>"; 0 if not (yet) logged.
int log_number(const std::string& path, const std::string& msg, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  const std::string tag = "\"msg\":\"" + msg + "\"", field = "\"" + key + "\":";
  while (std::getline(in, line)) {
    if (line.find(tag) == std::string::npos) continue;
    const auto at = line.find(field);
    return at == std::string::npos ? 0 : std::atoi(line.c_str() + at + field.size());
  }
  return 0;
}

/// `walhook ingest` as a child process, its log in a file.
struct ingest_process {
  pid_t pid = 0;
  int port = 0, metrics_port = 0;
  std::string log_path;

  ~ingest_process() { stop(); }

  void start(const std::string& binary, const std::string& conninfo, std::vector<std::string> extra) {
    std::vector<std::string> argv{binary, "ingest", "--database-url", conninfo, "--listen", "127.0.0.1:0",
                                  "--metrics-listen", "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ::unlink(log_path.c_str());
    pid = relay::spawn_process(argv, log_path);  // dies with the bench
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = 0;
        break;
      }
      if (port == 0) {
        port = log_number(log_path, "ingest.listening", "port");
        metrics_port = log_number(log_path, "ingest.listening", "metrics_port");
      }
      // Ready once a commit session is connected.
      if (port > 0 && scrape_metrics(metrics_port)["walhook_inbox_db_sessions_up"] >= 1) return;
      std::this_thread::sleep_for(20ms);
    }
    std::ifstream in(log_path);
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    throw std::runtime_error("walhook ingest did not become ready: " + relay::one_line(log.substr(0, 2000)));
  }

  /// SIGTERM, up to 10 s, then SIGKILL.
  void stop() {
    if (!pid) return;
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = 0;
        return;
      }
      std::this_thread::sleep_for(50ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = 0;
  }
};

/// The inbox source the walhook receivers accept (Standard Webhooks, the sender's secret).
void add_source(const std::string& binary, const std::string& conninfo, const std::string& secret) {
  std::string out;
  // The destination is a closed loopback port: nothing runs `walhook run`, processing is not measured.
  if (relay::run_process({binary, "inbox", "source", "add", "--database-url", conninfo, "--name", source_name, "--scheme",
                          "standard-webhooks", "--secret", secret, "--destination", "http://127.0.0.1:9/"},
                         "", out) != 0)
    throw std::runtime_error("walhook inbox source add failed: " + relay::one_line(out));
}

/// Transactions committed in `database` so far (pg_stat_database, as its backends reported them).
double xact_commits(const std::string& conninfo, const std::string& database) {
  relay::blocking_db db(conninfo, "walhook-bench");
  auto r = db.exec("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", pg::params{database});
  return r.rows() > 0 ? std::stod(std::string(r.value(0, 0))) : -1;
}

/// What the table holds after the trial, against what the sender was told.
void check_correctness(trial_result& res, const std::string& conninfo, bool naive, const ingest_load& load,
                       std::int64_t naive_processed) {
  relay::blocking_db db(conninfo, "walhook-bench");
  const std::string ids_sql = naive ? "SELECT event_id FROM bench_naive.inbox"
                                    : "SELECT event_id FROM walhook.inbox WHERE source = 'bench'";
  auto rows = db.exec(ids_sql);
  std::unordered_map<std::string, int> in_table;
  for (int i = 0; i < rows.rows(); ++i) ++in_table[std::string(rows.value(i, 0))];
  std::int64_t double_written = rows.rows() - static_cast<std::int64_t>(in_table.size());
  std::int64_t processed = naive_processed;
  if (!naive) {
    // Each accepted request writes one outbox event: the one `walhook run` would process.
    auto ob = db.exec("SELECT count(*), count(DISTINCT payload->>'event_id') FROM walhook.outbox WHERE tenant_id = 'inbox:bench'");
    processed = std::stoll(std::string(ob.value(0, 0)));
    double_written += processed - std::stoll(std::string(ob.value(0, 1)));
  }
  std::unordered_set<std::uint32_t> ok_events;
  std::unordered_map<std::uint32_t, int> accepted;
  for (const auto& r : load.requests()) {
    if (r.ok()) ok_events.insert(r.event);
    if (r.ok() && r.answer == answer_kind::accepted) ++accepted[r.event];
  }
  std::int64_t lost = 0, double_accepted = 0, without_2xx = 0;
  for (auto e : ok_events)
    if (!in_table.contains(ingest_load::event_id(e))) ++lost;
  for (const auto& [e, n] : accepted)
    if (n > 1) ++double_accepted;
  std::unordered_set<std::string> ok_ids;
  for (auto e : ok_events) ok_ids.insert(ingest_load::event_id(e));
  for (const auto& [id, n] : in_table)
    if (!ok_ids.contains(id)) ++without_2xx;
  res.extra["rows"] = static_cast<double>(rows.rows());
  res.extra["unique_ids_answered_2xx"] = static_cast<double>(ok_events.size());
  res.extra["lost"] = static_cast<double>(lost);
  res.extra["double_written"] = static_cast<double>(double_written);
  res.extra["double_accepted"] = static_cast<double>(double_accepted);
  res.extra["processed_twice"] = static_cast<double>(processed - static_cast<std::int64_t>(in_table.size()));
  res.extra["committed_without_2xx"] = static_cast<double>(without_2xx);
  res.duplicates = double_written + std::max<std::int64_t>(0, processed - static_cast<std::int64_t>(in_table.size()));
}

/// Answers by status over the whole trial, and the latency statistics of the measured window.
void summarize_load(trial_result& res, const ingest_load& load, const ingest_trial_spec& spec) {
  const auto warmup_us = std::chrono::duration_cast<std::chrono::microseconds>(spec.warmup).count();
  std::int64_t sent = 0, ok = 0, accepted = 0, duplicate = 0, conflict = 0, shed = 0, other = 0, none = 0, lower = 0;
  std::vector<double> latency, waited;
  std::int64_t window_sent = 0, window_ok = 0;
  for (const auto& r : load.requests()) {
    if (r.queued_us < 0) continue;  // the ladder stopped before it was due
    ++sent;
    if (r.ok()) ++ok;
    if (r.ok() && r.answer == answer_kind::accepted) ++accepted;
    else if (r.ok() && r.answer == answer_kind::duplicate) ++duplicate;
    else if (r.status == 409) ++conflict;
    else if (r.status == 503) ++shed;
    else if (r.status == 0) ++none;
    else ++other;
    if (r.due_us < warmup_us) continue;
    ++window_sent;
    if (r.ok()) ++window_ok;
    if (r.answered_us < 0) ++lower;
    latency.push_back(static_cast<double>((r.answered_us >= 0 ? r.answered_us : load.drain_end_us()) - r.due_us) / 1000.0);
    if (r.sent_us >= 0) waited.push_back(static_cast<double>(r.sent_us - r.queued_us) / 1000.0);
  }
  const double window_s = static_cast<double>(load.schedule_end_us() - warmup_us) / 1e6;
  res.window_s = window_s;
  res.txns = res.events = window_sent;
  res.expected = window_sent;
  res.delivered = window_ok;
  res.undelivered = window_sent - window_ok;
  res.delivered_total = ok;
  res.non_2xx = sent - ok;
  res.committed_per_s = window_s > 0 ? static_cast<double>(window_sent) / window_s : 0;
  res.delivered_per_s = window_s > 0 ? static_cast<double>(window_ok) / window_s : 0;
  res.latencies_ms = latency;
  res.commit_to_receipt = summarize(latency, static_cast<std::size_t>(lower));
  res.scheduled_to_receipt = res.commit_to_receipt;
  const auto w = summarize(waited);
  res.extra["requests_sent"] = static_cast<double>(sent);
  res.extra["status_200_accepted"] = static_cast<double>(accepted);
  res.extra["status_200_duplicate"] = static_cast<double>(duplicate);
  res.extra["status_409"] = static_cast<double>(conflict);
  res.extra["status_503"] = static_cast<double>(shed);
  res.extra["status_other"] = static_cast<double>(other);
  res.extra["no_answer"] = static_cast<double>(none);
  res.extra["wait_for_connection_p99_ms"] = w.p99;
  for (const auto& s : load.samples()) {
    sample_point p;
    p.t_s = s.t_s;
    p.backlog = s.outstanding;
    res.samples.push_back(p);
    res.max_backlog = std::max(res.max_backlog, s.outstanding);
  }
  if (!load.first_error().empty()) res.notes.push_back("sender: " + load.first_error());
}

/// Ladder: the highest sustained step, its latency, and the ladder's log as a note.
void summarize_ladder(trial_result& res, const ingest_load& load) {
  double best = 0;
  int best_step = -1;
  std::string log;
  for (std::size_t s = 0; s < load.verdicts().size(); ++s) {
    const auto& v = load.verdicts()[s];
    log += fmt::format("{}{:.0f}/s: {} of {} answered 2xx within bound, p99 {:.1f} ms{}", log.empty() ? "" : "; ", v.rate,
                       v.within_bound, v.requests, v.p99_ms, v.sustained ? "" : " — " + v.why);
    if (v.sustained && v.rate > best) {
      best = v.rate;
      best_step = static_cast<int>(s);
    }
  }
  std::vector<double> at_best;
  for (const auto& r : load.requests())
    if (static_cast<int>(r.step) == best_step && r.answered_us >= 0)
      at_best.push_back(static_cast<double>(r.answered_us - r.due_us) / 1000.0);
  const auto s = summarize(at_best);
  res.extra["max_sustained_req_per_s"] = best;
  res.extra["p50_at_max_ms"] = s.p50;
  res.extra["p99_at_max_ms"] = s.p99;
  res.notes.push_back("ladder: " + log);
}

/// The receiver of a trial: `walhook ingest` (with or without group commit) or the naive one.
struct receiver_under_test {
  ingest_process ingest;
  std::unique_ptr<naive_receiver> naive;
  unsigned short port() const { return naive ? naive->port() : static_cast<unsigned short>(ingest.port); }
  double cpu_seconds() const { return naive ? naive->cpu_seconds() : process_cpu_seconds(ingest.pid); }
};

/// A fresh database, migrated (no slot: nothing streams), with the source, and the receiver
/// started and ready.
void prepare_receiver(receiver_under_test& rx, const bench_settings& settings, const scenario_options& o,
                      const ingest_trial_spec& spec, const std::string& conninfo, const std::string& name,
                      const std::string& secret) {
  walhook_migrate(settings.walhook_binary, conninfo, "");
  if (spec.receiver == "naive")
    rx.naive = std::make_unique<naive_receiver>(naive_options{conninfo, secret, o.naive_workers, o.naive_handler});
  else
    add_source(settings.walhook_binary, conninfo, secret);
  {
    relay::blocking_db db(conninfo, "walhook-bench");
    db.exec("CHECKPOINT");  // every trial from a clean shared-buffer state
  }
  if (rx.naive) return;
  rx.ingest.log_path = settings.log_dir + "/" + name + "-ingest.log";
  auto args = o.ingest_args;
  if (spec.receiver == "no-group-commit") args.insert(args.end(), {"--max-batch", "1"});
  rx.ingest.start(settings.walhook_binary, conninfo, args);
}

ingest_load_options load_options(const scenario_options& o, const ingest_trial_spec& spec, unsigned short port,
                                 const std::string& secret) {
  ingest_load_options lo;
  lo.port = port;
  lo.path = std::string("/in/") + source_name;
  lo.secret = secret;
  lo.schedule = spec.schedule;
  lo.connections = o.ingest_connections;
  lo.duplicates = o.ingest_duplicates;
  lo.body_bytes = o.payload_bytes;
  lo.ladder = spec.ladder;
  lo.bound = o.ingest_bound;
  return lo;
}

/// Runs the load and reads what it cost: CPU of the receiver, PostgreSQL, the generator and the
/// rest of the machine; peak memory; commits. Stops the receiver (its backends then report
/// their statistics as they exit).
void measure(trial_result& res, receiver_under_test& rx, ingest_load& load, bench_cluster& cluster,
             const std::string& conninfo, const std::string& name, std::int64_t& naive_processed) {
  const bool pg_local = cluster.postgres_cpu_seconds() >= 0;
  const double commits0 = xact_commits(conninfo, name);
  const double rx0 = rx.cpu_seconds(), pg0 = pg_local ? cluster.postgres_cpu_seconds() : 0;
  const double self0 = process_cpu_seconds(::getpid()), machine0 = machine_busy_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  load.run();
  res.cpu_elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  res.cpu_relay = rx.cpu_seconds() - rx0;
  res.cpu_postgres = pg_local ? cluster.postgres_cpu_seconds() - pg0 : -1;
  res.cpu_generator = load.cpu_seconds();
  const double self = process_cpu_seconds(::getpid()) - self0;
  res.cpu_machine_other =
      (machine_busy_seconds() - machine0) - self - (rx.naive ? 0 : res.cpu_relay) - std::max(0.0, res.cpu_postgres);
  res.rss_bench_kib = peak_rss_kib(::getpid());
  if (cluster.postmaster_pid()) res.rss_postgres_kib = tree_rss_kib(cluster.postmaster_pid());
  if (rx.naive) {
    naive_processed = rx.naive->processed();
    rx.naive->stop();
  } else {
    res.rss_relay_kib = peak_rss_kib(rx.ingest.pid);
    auto m = scrape_metrics(rx.ingest.metrics_port);
    const double batches = m["walhook_inbox_commit_batches_total"], calls = m["walhook_inbox_commit_calls_total"];
    res.extra["commit_batches"] = batches;
    res.extra["mean_batch"] = batches > 0 ? calls / batches : 0;
    res.extra["shed_by_ingest"] = m["walhook_inbox_requests_total{source=\"bench\",outcome=\"shed\"}"];
    rx.ingest.stop();
  }
  std::this_thread::sleep_for(500ms);
  res.extra["pg_commits"] = xact_commits(conninfo, name) - commits0;
}

}  // namespace

trial_result run_ingest_trial(trial_runner& runner, const scenario_options& o, const ingest_trial_spec& spec, int run,
                              int sequence) {
  trial_result res;
  res.scenario = "ingest";
  res.variant = spec.variant;
  res.relay = spec.receiver;
  res.run = run;
  res.offered_events_per_s = spec.ladder ? 0 : spec.schedule.front().events_per_second;
  auto& cluster = runner.cluster();
  const auto& settings = runner.settings();
  const std::string name = fmt::format("walhook_bench_ingest_{}", sequence);
  if (settings.verbose)
    std::cerr << fmt::format("[{}] ingest / {} / {} run {} …", load_average(), spec.variant, spec.receiver, run + 1) << std::flush;
  const std::string conninfo = cluster.create_database(name);
  const std::string secret = delivery::generate_secret();
  receiver_under_test rx;
  prepare_receiver(rx, settings, o, spec, conninfo, name, secret);
  ingest_load load(load_options(o, spec, rx.port(), secret));
  std::int64_t naive_processed = 0;
  measure(res, rx, load, cluster, conninfo, name, naive_processed);

  summarize_load(res, load, spec);
  if (spec.ladder) summarize_ladder(res, load);
  check_correctness(res, conninfo, rx.naive != nullptr, load, naive_processed);
  res.extra["cpu_receiver_s"] = res.cpu_relay;
  const double ok = res.delivered_total > 0 ? static_cast<double>(res.delivered_total) : 1;
  res.extra["pg_commits_per_1k_2xx"] = res.extra["pg_commits"] * 1000.0 / ok;
  res.extra["cpu_ms_per_1k_2xx"] = (res.cpu_relay + std::max(0.0, res.cpu_postgres)) * 1e6 / ok;
  cluster.drop_database(name);
  if (settings.verbose)
    std::cerr << fmt::format(" p50 {:.2f} ms, p99 {:.2f} ms, {:.0f} answered 2xx/s, {} non-2xx, lost {}, double {}{}\n",
                             res.commit_to_receipt.p50, res.commit_to_receipt.p99, res.delivered_per_s, res.non_2xx,
                             res.extra["lost"], res.duplicates,
                             spec.ladder ? fmt::format(", sustained {:.0f}/s", res.extra["max_sustained_req_per_s"]) : "");
  return res;
}

}  // namespace walhook::bench
