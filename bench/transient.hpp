#pragma once
// The transient-state scenarios (`walhook-bench run transient`): what walhook does around
// downtime, crashes and PostgreSQL restarts, for comparing one walhook build ("before") with
// another ("after"). walhook only; each uses the trial runner's controller hook to act on the
// relay, the receiver or the server mid-trial, and records what it did as trial disruptions.
//   catchup     a backlog built while walhook is down (in the slot) or while an endpoint is
//               down (pending in walhook.deliveries): how fast it drains, what it writes
//   crash-hung  kill -9 walhook four times (and restart PostgreSQL -m immediate once) while an
//               endpoint hangs: losses, duplicates per crash, slot lag
//   pg-restart  PostgreSQL restart -m fast under load (also with --record=all, so state-store
//               writes are in flight when the server stops) and idle: how long the server takes
//               to stop, and until walhook streams again

#include "bench/report.hpp"
#include "bench/scenarios.hpp"
#include "bench/trial.hpp"

namespace walhook::bench {

scenario_report catchup(trial_runner& runner, const scenario_options& options);
scenario_report crash_hung(trial_runner& runner, const scenario_options& options);
scenario_report pg_restart(trial_runner& runner, const scenario_options& options);

}  // namespace walhook::bench
