#pragma once
// The scenarios of `walhook-bench run` (issue 5):
//   steady          1,000 and 5,000 events/s, 1 row per transaction, 8 endpoints, fast receiver
//   max             a rising ladder of rates until the relay's backlog grows: highest sustained rate
//   fanout          each event to 10 endpoints
//   noisy-neighbour 16 healthy endpoints + 1 that never answers within the deadline, against the
//                   same load with all 17 answering at once
//   recovery        kill -9 walhook under load, restart it: time until deliveries resume, duplicates
//   custom          one workload from the command-line flags
// and the transient ones (bench/transient.hpp, `run transient`, not part of `run all`):
//   catchup         drain a backlog built in the slot (walhook down) or in walhook.deliveries
//                   (endpoint down)
//   crash-hung      kill -9 ×4 and a PostgreSQL immediate restart with a hung endpoint
//   pg-restart      PostgreSQL restart -m fast under load and idle
// and endpoint-scale (bench/endpoint_scale.hpp, not part of a suite): 2,000 endpoints, 10 % of
// them failing, slow or hung, 1,000 events/s for 60 s, against the same with all answering.
// and the broker scenarios (bench/brokers.hpp, not part of a suite): nats (amqp to come) —
// steady rates and the max ladder to JetStream, walhook against the polling relay publishing
// to the same broker.
// and ingest (bench/ingest.hpp, not part of a suite): the inbox's `walhook ingest` under signed
// webhooks at 1,000 and 5,000 requests/s and a ladder, against one transaction per request and
// a naive receiver.
// and shards (bench/shards.hpp, not part of a suite): 1, 2 and 4 walhooks on one database, one
// per shard — latency at a steady rate, time to drain a backlog, and what each walsender costs.
// Each builds workloads, runs them through the trial runner for every relay and run
// (interleaved: run 1 of every relay, then run 2, … so drifting background load hits all
// relays alike), and adds its findings (figures against the targets) to the report.

#include "bench/report.hpp"
#include "bench/trial.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace walhook::bench {

struct scenario_options {
  std::vector<relay_kind> relays{relay_kind::walhook, relay_kind::polling, relay_kind::notify};
  int runs = 1;
  std::chrono::milliseconds warmup{2000};
  std::chrono::milliseconds measure{10000};
  std::size_t payload_bytes = 256;
  int connections = 4;
  int max_concurrency = 4;
  // steady
  std::vector<double> steady_rates{1000, 5000};
  // max: the ladder (events/s), each step this long, this many rows per transaction
  std::vector<double> ladder{1000, 2000, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 14000, 16000, 20000, 24000, 28000, 32000};
  std::chrono::milliseconds step{4000};
  int max_rows_per_commit = 10;
  // fanout
  double fanout_rate = 500;
  int fanout = 10;
  // noisy-neighbour
  int noisy_healthy = 16;
  double noisy_rate = 850;
  std::chrono::milliseconds noisy_measure{20000};
  // recovery
  double recovery_rate = 1000;
  std::chrono::milliseconds kill_after{5000};  ///< since the load started
  std::chrono::milliseconds down{1000};        ///< walhook stays dead this long
  // custom
  double rate = 1000;
  int rows_per_commit = 1;
  int endpoints = 8;
  int custom_fanout = 1;
  int tenants = 0;  ///< 0: endpoints / fanout
  std::string behaviour = "immediate";  ///< immediate | delay:MS | error:RATE | never
  // catchup
  std::vector<std::string> catchup_from{"slot", "table"};  ///< variants to run
  double catchup_rate = 3000;                      ///< slot: events/s committed while walhook is down
  std::chrono::milliseconds catchup_down{10000};   ///< slot: walhook is down this long
  double catchup_live_rate = 0;                    ///< slot: events/s once walhook runs
  int catchup_connections = 8;                     ///< slot: generator connections (durable commits need more than 4)
  /// slot: endpoints 0–6 answer after delays spread evenly over [min, max] ms (realistic
  /// endpoints); endpoint 7 stays the fast sink, the uninvolved tenant whose live latency is
  /// reported. 0–0: all fast.
  int catchup_delay_min_ms = 0, catchup_delay_max_ms = 0;
  std::chrono::milliseconds catchup_max{120000};   ///< bound on each wait (catch-up, pile-up, drain)
  int catchup_backlog = 50000;                     ///< table: pending deliveries of the down endpoint
  int catchup_backlog_txns = 10;                   ///< table: … inserted in this many transactions
  double catchup_table_live_rate = 1000;           ///< table: events/s over the 4 healthy endpoints
  // crash-hung
  double crash_rate = 250;                         ///< events/s, each to all 4 endpoints
  std::chrono::milliseconds crash_measure{30000};  ///< load duration
  int crash_kills = 4;
  std::chrono::milliseconds crash_interval{6000};  ///< between kills (the first one this long after the start)
  std::chrono::milliseconds crash_down{500};       ///< walhook restarted this long after each kill
  // pg-restart
  double restart_rate = 200;                       ///< events/s over 2 endpoints
  int restarts = 3;
  std::string restart_mode = "fast";               ///< pg_ctl stop mode: smart | fast | immediate
  std::chrono::milliseconds restart_streaming{5000};  ///< load between walhook streaming again and the next restart
  // endpoint-scale
  int scale_tenants = 200;
  int scale_endpoints_per_tenant = 10;
  int scale_fanout = 1;                          ///< endpoints each event goes to (divides endpoints per tenant)
  double scale_rate = 1000;                      ///< events/s
  std::chrono::milliseconds scale_measure{60000};
  double scale_bad = 0.10;                       ///< share of endpoints that fail, are slow or hang
  std::chrono::milliseconds scale_slow{2000};    ///< slow endpoints answer 200 after this
  bool scale_control = true;                     ///< also the run where every endpoint answers at once
  // shards
  std::vector<int> shard_counts{1, 2, 4};          ///< walhook processes (shards) per trial; 1: unsharded
  std::vector<std::string> shard_variants{"steady", "backlog"};
  int shard_tenants = 128;                         ///< tenants, one endpoint each, spread over the shards by walhook's hash
  double shard_rate = 1000;                        ///< steady: events/s, one row per transaction
  std::chrono::milliseconds shard_measure{20000};  ///< steady: measured load (after the warm-up)
  int shard_backlog = 50000;                       ///< backlog: events committed while walhook is stopped
  int shard_backlog_rows_per_commit = 10;          ///< backlog: rows per transaction
  double shard_backlog_rate = 10000;               ///< backlog: events/s while it is committed
  int shard_backlog_connections = 8;               ///< backlog: generator connections
  // nats, amqp (bench/brokers.hpp): the steady rates and the ladder, to a broker
  int broker_max_concurrency = 32;  ///< endpoints' max_concurrency: unconfirmed publishes in flight
  bool broker_ladder = true;        ///< also the max ladder
  // ingest (bench/ingest.hpp): the inbox's HTTP ingest server
  std::vector<double> ingest_rates{1000, 5000};   ///< requests/s of the steady trials
  std::vector<std::string> ingest_receivers{"walhook", "no-group-commit", "naive"};
  int ingest_connections = 64;                    ///< the sender's keep-alive connections
  double ingest_duplicates = 0.1;                 ///< share of requests repeating an earlier event
  bool ingest_ladder = true;                      ///< also the ladder for the highest sustained rate
  std::vector<double> ingest_ladder_rates{1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 10000, 12000, 14000, 16000};
  std::chrono::milliseconds ingest_step{4000};    ///< ladder: each step this long
  std::chrono::milliseconds ingest_bound{1000};   ///< ladder: every answer 2xx within this of its due time
  std::vector<std::string> ingest_args;           ///< extra `walhook ingest` flags (both walhook receivers)
  int naive_workers = 8;                          ///< naive receiver: worker threads (one connection each)
  std::chrono::microseconds naive_handler{2000};  ///< naive receiver: processing time of a new event
  /// --relay was given: endpoint-scale runs those relays (otherwise walhook only).
  bool relays_given = false;
};

/// Scenario names `run` accepts (without the suites "all" and "transient").
const std::vector<std::string>& scenario_names();
/// The scenarios of a suite: "all" (steady … recovery, < 10 min) or "transient" (catchup,
/// crash-hung, pg-restart); empty for anything else.
const std::vector<std::string>& suite_scenarios(const std::string& suite);

/// Runs one scenario; the report has every trial and the findings.
scenario_report run_scenario(const std::string& name, trial_runner& runner, const scenario_options& options);

}  // namespace walhook::bench
