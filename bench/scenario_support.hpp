#pragma once
// What the scenario files (scenarios.cpp, transient.cpp, endpoint_scale.cpp, shards.cpp) share: labels, the met/missed marker,
// the loop over workloads × relays × runs.

#include "bench/report.hpp"
#include "bench/scenarios.hpp"
#include "bench/trial.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace walhook::bench {

/// "1,000 ev/s", "250 ev/s".
std::string rate_label(double events_per_second);
/// The group of (variant, relay), nullptr if none ran.
const trial_group* find_group(const std::vector<trial_group>& groups, const std::string& variant, const std::string& relay);
/// "**met**" / "**missed**": targets are reported, never asserted.
std::string met(bool ok);
/// System clock, µs since the Unix epoch: the clock of receipts, commits and trial_result::start_us.
std::int64_t system_now_us();
/// "50,000": a count with thousands separators.
std::string thousands(double n);
/// A trial's scenario figure `key`, `fallback` when it has none.
double extra_or(const trial_result& t, const std::string& key, double fallback = -1);
/// Median over a group's runs of the scenario figure `key` (−1 for a run without it).
double median_extra(const trial_group& g, const std::string& key);

/// A workload at one steady rate (warm-up + measure), 1 row per transaction, `endpoints`
/// endpoints with `fanout` per tenant, named rate_label(rate).
workload base_workload(const scenario_options& o, double rate, int endpoints, int fanout);
/// The max scenario's ladder: o.ladder, o.step a rate, o.max_rows_per_commit rows per
/// transaction, 8 endpoints (one tenant each), no warm-up.
workload ladder_workload(const scenario_options& o);
/// The max scenario's stopping rule as a controller (the rule: scenarios.cpp, max); the final
/// call sets the extras max_sustained_events_per_s and generator_bound and a note with the ladder.
controller ladder_controller(const std::vector<double>& ladder, std::chrono::milliseconds step);
/// For each trial of `variant`: p50_at_max_ms and p99_at_max_ms, the commit-to-receipt latency
/// of the events scheduled in its highest sustained step.
void latency_at_max(scenario_report& r, const std::string& variant, const std::vector<double>& ladder,
                    std::chrono::milliseconds step);

/// Runs every workload × relay × run, interleaving relays within a run (run 1 of every relay, then
/// run 2, …). A trial that throws becomes a finding; the others go on.
void run_all(scenario_report& report, trial_runner& runner, const scenario_options& o, const std::vector<workload>& ws,
             const std::vector<relay_kind>& relays, const std::function<controller(const workload&)>& make_control = {});

}  // namespace walhook::bench
