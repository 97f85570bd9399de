#pragma once
// The broker scenarios (issue 20): `nats` (and, once walhook has its AMQP sink, `amqp`).
// walhook publishing to JetStream against the classic polling relay publishing to the same
// broker (bench/polling_relay.hpp, broker mode: the claim loop with the batch's publishes
// pipelined and every confirmation awaited before the rows are marked). The broker runs on
// this machine with a file-backed stream per endpoint; a subscriber in the bench process
// records each stored message (bench/nats_receiver.hpp), so latency is commit → stored by
// the broker, on the same clock and commit timestamps as the HTTP scenarios.
//
// Workloads: the steady rates (1,000 and 5,000 events/s, 1 row per transaction, 8 endpoints,
// one tenant each, `--warmup-s` + `--measure-s`) and the max scenario's ladder (10 rows per
// transaction, `--step-ms` a step) with its stopping rule. Endpoints get
// `--broker-max-concurrency` (default 32) unconfirmed publishes in flight.

#include "bench/report.hpp"
#include "bench/scenarios.hpp"
#include "bench/trial.hpp"
#include "delivery/destination.hpp"

namespace walhook::bench {

/// Runs the broker scenario of `kind` (nats; amqp: throws until bench/ has an AMQP receiver).
scenario_report broker_scenario(trial_runner& runner, const scenario_options& options, delivery::sink_kind kind);

}  // namespace walhook::bench
