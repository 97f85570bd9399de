#pragma once
// The endpoint-scale scenario (`walhook-bench run endpoint-scale`, issue 10): production-seed
// numbers of endpoints. 2,000 endpoints (200 tenants × 10, each endpoint subscribed to one event
// type, so each event goes to one endpoint), 10 % of them bad — one in every tenant, a third each
// answering 500, answering 200 after 2 s, or never answering within the deadline — and 1,000
// events/s for 60 s; against the same load with every endpoint answering at once (the healthy set
// is the same 1,800 endpoints in both). walhook only, unless --relay names other relays.
//
// Reports the healthy endpoints' commit-to-receipt latency (over the run, and in its first and
// last thirds), deliveries/s over all endpoints, walhook's CPU per delivery, its peak RSS as the
// run goes on, and what walhook's work in PostgreSQL costs — the claim loop above all:
//   * walhook's own counters, scraped from /metrics after the drain (claimed, spilled, failed
//     attempts, marked sending, dead);
//   * the CPU of the PostgreSQL backend of walhook's state connection(s) (application_name
//     "walhook-state …"), from /proc — every claim, write and read walhook sends, no overhead;
//   * with pg_stat_statements loaded (the throwaway cluster of `run endpoint-scale` loads it):
//     calls, execution time and rows of walhook's claim statement (sql/statements/claim_due.sql),
//     its due-time query (next_due.sql), its delivery, health and progress writes, and the rest.

#include "bench/report.hpp"
#include "bench/scenarios.hpp"
#include "bench/trial.hpp"

#include <string>
#include <vector>

namespace walhook::bench {

scenario_report endpoint_scale(trial_runner& runner, const scenario_options& options);

/// Settings the throwaway cluster gets when endpoint-scale runs: pg_stat_statements preloaded, so
/// the cost of each of walhook's statements can be read per trial.
std::vector<std::string> endpoint_scale_cluster_settings();

}  // namespace walhook::bench
