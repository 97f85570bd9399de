#pragma once
// The `ingest` scenario (issue 21, "Bench"): the inbox's HTTP ingest server under an open-loop
// load of signed webhooks, on a durable PostgreSQL, against two baselines on the same load and
// database:
//   walhook          `walhook ingest` (the binary under test, --walhook): group commit;
//   no-group-commit  `walhook ingest --max-batch 1`: one transaction per request;
//   naive            a receiver in the bench process that verifies, inserts in its own
//                    transaction and processes the event inside the request
//                    (bench/naive_receiver.hpp).
// Each trial: a fresh database, `walhook migrate --no-slot`, one source (`walhook inbox source
// add --scheme standard-webhooks`, its destination a closed loopback port: processing is not
// measured, no `walhook run`), the receiver (ingest's port from its `ingest.listening` log
// line), then the load (bench/ingest_load.hpp): 64 keep-alive connections, 10 % duplicates,
// at 1,000 and 5,000 requests/s, and a ladder for the highest sustained rate.
//
// Reported per trial: latency (answer − due time) p50/p90/p99/max, answered 2xx/s, the answers
// by status, correctness (lost: an id answered 2xx that is not in the table; double-written,
// double-processed), CPU of the receiver and of PostgreSQL, the receiver's peak RSS, commits
// (pg_stat_database.xact_commit; for walhook also its commit batches from --metrics-listen).

#include "bench/report.hpp"
#include "bench/scenarios.hpp"
#include "bench/trial.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace walhook::bench {

/// One trial of the ingest scenario.
struct ingest_trial_spec {
  std::string variant;              ///< "1,000 req/s", "ladder"
  std::string receiver;             ///< "walhook", "no-group-commit", "naive"
  std::vector<rate_step> schedule;  ///< requests/s
  std::chrono::milliseconds warmup{0};  ///< requests due before this are left out of the latency
  bool ladder = false;
};

/// Runs one trial (blocking). The result's relay is the receiver's label; latencies are answer
/// − due time; extra holds the scenario's figures (ingest.cpp lists them).
trial_result run_ingest_trial(trial_runner& runner, const scenario_options& o, const ingest_trial_spec& spec, int run,
                              int sequence);

/// Runs the scenario: every variant × receiver × run, then the findings and the headline table.
scenario_report ingest_scenario(trial_runner& runner, const scenario_options& o);

}  // namespace walhook::bench
