#pragma once
// The broker scenarios (issue 20): `nats` and `amqp`.
// walhook publishing to JetStream or RabbitMQ against the classic polling relay publishing to
// the same broker (bench/polling_relay.hpp, broker mode: the claim loop with the batch's
// publishes pipelined and every confirmation awaited before the rows are marked). The broker
// runs on this machine: JetStream with a file-backed stream per endpoint, read by a
// subscriber that sees each message once stored (bench/nats_receiver.hpp); RabbitMQ with a
// durable queue per endpoint, read by a no-ack consumer that may see a message before the
// publisher's confirm (bench/amqp_receiver.hpp). Latency is commit → read by that consumer, on
// the same clock and commit timestamps as the HTTP scenarios.
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

/// Runs the broker scenario of `kind` (nats or amqp).
scenario_report broker_scenario(trial_runner& runner, const scenario_options& options, delivery::sink_kind kind);

}  // namespace walhook::bench
