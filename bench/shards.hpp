#pragma once
// The shards scenario (`walhook-bench run shards`, issue 10): 1, 2 and 4 walhooks on one
// database, one per shard (`walhook run --shard K/N`; 1 = one unsharded walhook, no row filter),
// many tenants (one endpoint each, answering at once) spread over the shards by walhook's own
// hash. walhook only. Two workloads per shard count:
//   * steady  — a moderate rate in one-row transactions: commit-to-receipt p50/p99 (in all and
//               per shard), deliveries/s;
//   * backlog — a fixed number of events committed while no walhook runs (they wait in every
//               shard's slot), then all shards start at once: time until the last delivery and
//               the drain rate (throughput at saturation).
// And what it costs, per shard and in all:
//   * the CPU of each walsender (the PostgreSQL backend of each replication connection: its pid
//     from pg_replication_slots.active_pid, utime + stime from /proc/<pid>/stat at the load's
//     start and after the drain). Every walsender decodes ALL the WAL and evaluates its
//     publication's row filter on every outbox row, so this grows with the number of shards;
//     reported per event of the whole stream, per walsender and summed;
//   * every walhook process's CPU (per delivery, in all) and peak RSS;
//   * whether each shard read exactly its tenants' events and knew exactly its tenants'
//     endpoints (walhook's /metrics: walhook_events_total, walhook_delivered_total, the endpoint
//     labels), and lost and duplicate deliveries.

#include "bench/report.hpp"
#include "bench/scenarios.hpp"
#include "bench/trial.hpp"

namespace walhook::bench {

scenario_report shards(trial_runner& runner, const scenario_options& options);

}  // namespace walhook::bench
