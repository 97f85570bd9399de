#include "bench/brokers.hpp"

#include "bench/scenario_support.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include <string>
#include <vector>

namespace walhook::bench {
namespace {

double median_latency(const trial_group& g, double latency_stats::*m) {
  return median_of(g, [m](const trial_result& t) { return t.commit_to_receipt.*m; });
}

/// The steady rates against the goals: p99 ≤ 10 ms at 5,000/s, ≥ 10× the polling
/// relay's p50.
void steady_findings(scenario_report& r, const std::vector<trial_group>& groups, const workload& w) {
  const auto* wh = find_group(groups, w.variant, "walhook");
  const auto* po = find_group(groups, w.variant, "polling");
  const double rate = w.schedule.front().events_per_second;
  for (const auto& g : groups) {
    if (g.variant != w.variant) continue;
    r.findings.push_back(fmt::format("{}: {} p50 {:.2f} ms, p90 {:.2f} ms, p99 {:.2f} ms, max {:.1f} ms; {:.0f} events/s committed, "
                                     "{:.0f} delivered/s (medians of {} runs)",
                                     w.variant, g.relay, median_latency(g, &latency_stats::p50), median_latency(g, &latency_stats::p90),
                                     median_latency(g, &latency_stats::p99), median_latency(g, &latency_stats::max),
                                     median_of(g, [](const trial_result& t) { return t.committed_per_s; }),
                                     median_of(g, [](const trial_result& t) { return t.delivered_per_s; }), g.runs.size()));
  }
  if (wh && rate >= 5000) {
    const double p99 = median_latency(*wh, &latency_stats::p99);
    r.findings.push_back(fmt::format("{}: walhook p99 {:.2f} ms (goal ≤ 10 ms: {})", w.variant, p99, met(p99 <= 10)));
  }
  if (wh && po) {
    const double a = median_latency(*wh, &latency_stats::p50), b = median_latency(*po, &latency_stats::p50);
    const double ratio = b / std::max(a, 1e-6);
    r.findings.push_back(fmt::format("{}: polling p50 {:.2f} ms = {:.1f}× walhook's {:.2f} ms (goal ≥ 10×: {})", w.variant, b, ratio, a,
                                     met(ratio >= 10)));
  }
}

void ladder_findings(scenario_report& r, const std::vector<trial_group>& groups, const workload& w) {
  for (const auto& g : groups) {
    if (g.variant != w.variant) continue;
    const double best = median_extra(g, "max_sustained_events_per_s");
    const bool bound = median_extra(g, "generator_bound") > 0;
    r.findings.push_back(fmt::format(
        "{}: highest sustained rate {:.0f} events/s (median of {}; runs: {}), p50 / p99 in that step {:.1f} / {:.1f} ms{}{}", g.relay,
        best, g.runs.size(),
        [&] {
          std::string s;
          for (const auto* t : g.runs) s += (s.empty() ? "" : ", ") + thousands(extra_or(*t, "max_sustained_events_per_s"));
          return s;
        }(),
        median_extra(g, "p50_at_max_ms"), median_extra(g, "p99_at_max_ms"),
        bound ? " — then the application's commits fell behind the schedule while the relay kept up (the database was the limit)" : "",
        g.relay == "walhook" ? fmt::format(" (goal ≥ 20,000/s: {})", met(best >= 20000)) : ""));
  }
}

}  // namespace

scenario_report broker_scenario(trial_runner& runner, const scenario_options& o, delivery::sink_kind kind) {
  if (kind == delivery::sink_kind::http) throw std::logic_error("broker_scenario: not a broker");
  scenario_report r;
  r.scenario = std::string(delivery::to_string(kind));
  std::vector<relay_kind> relays = o.relays;
  if (!o.relays_given) relays = {relay_kind::walhook, relay_kind::polling};
  scenario_options bo = o;
  bo.max_concurrency = o.broker_max_concurrency;

  std::vector<workload> ws;
  for (double rate : o.steady_rates) ws.push_back(base_workload(bo, rate, 8, 1));
  if (o.broker_ladder) ws.push_back(ladder_workload(bo));
  for (auto& w : ws) w.destination = kind;
  const std::string ladder_variant = o.broker_ladder ? ws.back().variant : "";

  run_all(r, runner, o, ws, relays, [&](const workload& w) -> controller {
    return w.variant == ladder_variant ? ladder_controller(o.ladder, o.step) : controller{};
  });
  if (o.broker_ladder) latency_at_max(r, ladder_variant, o.ladder, o.step);

  const auto groups = group_trials(r);
  for (const auto& w : ws) {
    if (w.variant == ladder_variant) ladder_findings(r, groups, w);
    else steady_findings(r, groups, w);
  }
  for (const auto& g : groups) {
    const double broker = median_extra(g, "cpu_broker_s");
    if (broker >= 0)
      r.findings.push_back(fmt::format("{} / {}: CPU-s over load + drain (medians): relay {:.1f}, PostgreSQL {:.1f}, {} {:.1f}", g.variant,
                                       g.relay, median_of(g, [](const trial_result& t) { return t.cpu_relay; }),
                                       median_of(g, [](const trial_result& t) { return t.cpu_postgres; }), r.scenario, broker));
  }
  return r;
}

}  // namespace walhook::bench
