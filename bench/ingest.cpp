// The `ingest` scenario (bench/ingest.hpp): the trials, the headline table and the findings
// against issue 21's goal. One trial: bench/ingest_trial.cpp.
//
// Figures of each trial (trial_result::extra):
//   requests_sent, status_200_accepted, status_200_duplicate, status_409, status_503,
//   status_other, no_answer                  answers over the whole trial, by what they said
//   wait_for_connection_p99_ms               due requests waiting for a free connection
//   rows, unique_ids_answered_2xx, lost, double_written, double_accepted, processed_twice,
//   committed_without_2xx                    correctness (bench/ingest_trial.cpp, check_correctness)
//   cpu_receiver_s, cpu_ms_per_1k_2xx        the receiver's CPU; receiver + PostgreSQL per 1,000 2xx
//   pg_commits, pg_commits_per_1k_2xx        pg_stat_database.xact_commit of the trial's database
//   commit_batches, mean_batch, shed_by_ingest   walhook ingest's /metrics
//   max_sustained_req_per_s, p50_at_max_ms, p99_at_max_ms   the ladder

#include "bench/ingest.hpp"

#include "bench/scenario_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

namespace walhook::bench {
namespace {

std::string req_label(double rate) { return thousands(rate) + " req/s"; }

std::vector<ingest_trial_spec> trial_specs(const scenario_options& o) {
  std::vector<ingest_trial_spec> specs;
  for (double rate : o.ingest_rates) {
    ingest_trial_spec s;
    s.variant = req_label(rate);
    s.schedule = {{o.warmup + o.measure, rate}};
    s.warmup = o.warmup;
    specs.push_back(s);
  }
  if (o.ingest_ladder) {
    ingest_trial_spec s;
    s.variant = "ladder";
    s.ladder = true;
    for (double rate : o.ingest_ladder_rates) s.schedule.push_back({o.ingest_step, rate});
    specs.push_back(s);
  }
  return specs;
}

double med(const trial_group& g, const char* key) { return median_extra(g, key); }

/// One row per (load, receiver): the figures issue 21 asks for, medians over runs.
std::string headline(const std::vector<trial_group>& groups) {
  std::string md =
      "Latency = answer time − the request's due time in the open-loop schedule (a stalled receiver shows as "
      "latency). Answers over the whole trial; latency and answered 2xx/s over the measured window (after the "
      "warm-up). Medians over runs.\n\n"
      "| load | receiver | runs | answered 2xx/s | p50 ms | p90 ms | p99 ms | max ms | 200 accepted | 200 duplicate | "
      "409 | 503 | no answer | lost | double-written | double-processed | CPU receiver s | CPU PostgreSQL s | "
      "RSS receiver MiB | PostgreSQL commits | commits per 1,000 2xx | mean batch |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  auto lat = [](const trial_group& g, double latency_stats::*m) {
    return median_of(g, [m](const trial_result& t) { return t.commit_to_receipt.*m; });
  };
  for (const auto& g : groups) {
    const double rss = median_of(g, [](const trial_result& t) { return static_cast<double>(t.rss_relay_kib); });
    md += fmt::format(
        "| {} | {} | {} | {:.0f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} | "
        "{:.2f} | {} | {} | {:.0f} | {} |\n",
        g.variant, g.relay, g.runs.size(), median_of(g, [](const trial_result& t) { return t.delivered_per_s; }),
        lat(g, &latency_stats::p50), lat(g, &latency_stats::p90), lat(g, &latency_stats::p99), lat(g, &latency_stats::max),
        thousands(med(g, "status_200_accepted")), thousands(med(g, "status_200_duplicate")), thousands(med(g, "status_409")),
        thousands(med(g, "status_503")), thousands(med(g, "no_answer")), thousands(med(g, "lost")),
        thousands(med(g, "double_written")), thousands(med(g, "processed_twice")),
        median_of(g, [](const trial_result& t) { return t.cpu_relay; }),
        median_of(g, [](const trial_result& t) { return t.cpu_postgres; }),
        rss > 0 ? fmt::format("{:.0f}", rss / 1024.0) : "(in bench)", thousands(med(g, "pg_commits")),
        med(g, "pg_commits_per_1k_2xx"), med(g, "mean_batch") > 0 ? fmt::format("{:.1f}", med(g, "mean_batch")) : "—");
  }
  return md;
}

std::string ladder_table(const std::vector<trial_group>& groups) {
  if (std::none_of(groups.begin(), groups.end(), [](const trial_group& g) { return g.variant == "ladder"; })) return {};
  std::string md =
      "\nHighest sustained rate (ladder: every request of a step answered 2xx within the bound of its due time, "
      "and the schedule kept):\n\n| receiver | runs | highest sustained req/s (median) | each run | p50 / p99 ms in "
      "that step |\n|---|---|---|---|---|\n";
  for (const auto& g : groups) {
    if (g.variant != "ladder") continue;
    std::string each;
    for (const auto* t : g.runs) each += (each.empty() ? "" : ", ") + thousands(extra_or(*t, "max_sustained_req_per_s"));
    md += fmt::format("| {} | {} | {} | {} | {:.2f} / {:.2f} |\n", g.relay, g.runs.size(),
                      thousands(med(g, "max_sustained_req_per_s")), each, med(g, "p50_at_max_ms"), med(g, "p99_at_max_ms"));
  }
  return md;
}

void findings(scenario_report& r, const std::vector<trial_group>& groups) {
  double lost = 0, doubled = 0;
  for (const auto& t : r.trials) {
    lost += extra_or(t, "lost", 0);
    doubled += extra_or(t, "double_written", 0) + extra_or(t, "processed_twice", 0) + extra_or(t, "double_accepted", 0);
  }
  for (const auto& g : groups) {
    if (g.variant == "ladder") {
      r.findings.push_back(fmt::format("ladder / {}: highest sustained {} req/s (median of {}), p99 {:.1f} ms in that step",
                                       g.relay, thousands(med(g, "max_sustained_req_per_s")), g.runs.size(),
                                       med(g, "p99_at_max_ms")));
      continue;
    }
    r.findings.push_back(fmt::format(
        "{} / {}: {:.0f} answered 2xx/s, p50 {:.2f} ms, p99 {:.2f} ms, max {:.1f} ms; 503 {}, no answer {}; {:.0f} "
        "PostgreSQL commits per 1,000 2xx; receiver + PostgreSQL {:.0f} CPU-ms per 1,000 2xx (medians of {})",
        g.variant, g.relay, median_of(g, [](const trial_result& t) { return t.delivered_per_s; }),
        median_of(g, [](const trial_result& t) { return t.commit_to_receipt.p50; }),
        median_of(g, [](const trial_result& t) { return t.commit_to_receipt.p99; }),
        median_of(g, [](const trial_result& t) { return t.commit_to_receipt.max; }), thousands(med(g, "status_503")),
        thousands(med(g, "no_answer")), med(g, "pg_commits_per_1k_2xx"), med(g, "cpu_ms_per_1k_2xx"), g.runs.size()));
  }
  r.findings.push_back(fmt::format("every trial: {} lost (an id answered 2xx missing from the table), {} double-written or "
                                   "double-processed (target 0: {})",
                                   lost, doubled, met(lost == 0 && doubled == 0)));
  const auto* ladder = find_group(groups, "ladder", "walhook");
  const auto* five = find_group(groups, req_label(5000), "walhook");
  if (ladder || five) {
    const double best = ladder ? med(*ladder, "max_sustained_req_per_s") : -1;
    const double p99 = five ? median_of(*five, [](const trial_result& t) { return t.commit_to_receipt.p99; }) : -1;
    const double ok_rate = five ? median_of(*five, [](const trial_result& t) { return t.delivered_per_s; }) : -1;
    r.findings.push_back(fmt::format(
        "goal (issue 21): walhook ≥ 5,000 req/s sustained with p99 ≤ 50 ms, 0 lost, 0 double-processed: sustained "
        "{} req/s, at 5,000 req/s {} — {}",
        ladder ? thousands(best) : "(no ladder)",
        five ? fmt::format("p99 {:.1f} ms and {:.0f} answered 2xx/s", p99, ok_rate) : "(no such trial)",
        met((!ladder || best >= 5000) && five && p99 <= 50 && ok_rate >= 0.99 * 5000 && lost == 0 && doubled == 0)));
  }
}

}  // namespace

scenario_report ingest_scenario(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "ingest";
  r.latency_note =
      "Latency is answer time − due time of the request in the open-loop schedule; \"offered\" is the scheduled "
      "requests/s, \"committed\" the requests sent per second, \"delivered\" the requests answered 2xx per second, "
      "\"undelivered\" the requests of the window not answered 2xx, \"duplicates\" rows written or events processed "
      "twice (must be 0). The relay column is the receiver; its CPU is the ingest process's (naive: its threads in the "
      "bench process).";
  r.backlog_label = "requests due, not yet answered";
  const auto specs = trial_specs(o);
  int sequence = 0;
  for (int run = 0; run < o.runs; ++run)
    for (const auto& spec : specs)
      for (const auto& receiver : o.ingest_receivers) {
        auto s = spec;
        s.receiver = receiver;
        try {
          r.trials.push_back(run_ingest_trial(runner, o, s, run, ++sequence));
        } catch (const std::exception& e) {
          std::cerr << "\n  trial failed: " << e.what() << "\n";
          r.findings.push_back(fmt::format("{} / {} run {} failed: {}", s.variant, receiver, run + 1, e.what()));
        }
      }
  const auto groups = group_trials(r);
  r.headline_markdown = headline(groups) + ladder_table(groups);
  findings(r, groups);
  return r;
}

}  // namespace walhook::bench
