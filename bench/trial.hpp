#pragma once
// One trial: a fresh database, one relay, the receiver, the open-loop load for a schedule, then
// the drain; what was committed is joined with what was received to give latencies,
// throughput, duplicates and losses, next to CPU, memory and slot-lag samples.

#include "bench/database.hpp"
#include "bench/load_generator.hpp"
#include "bench/relay_driver.hpp"
#include "bench/sink.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace walhook::bench {

/// What a trial offers: the schedule, the transactions, and the endpoints.
struct workload {
  std::string variant;                     ///< label within the scenario, e.g. "1000 ev/s"
  std::vector<rate_step> schedule;         ///< the warm-up is the first `warmup` of it
  std::chrono::milliseconds warmup{2000};  ///< excluded from the statistics
  int rows_per_commit = 1;
  std::size_t payload_bytes = 256;
  int tenants = 8;
  /// Event types of the generated events, round-robin within each tenant (see
  /// generator_options::event_types); endpoint_spec::event_type picks one of them.
  std::vector<std::string> event_types{"order.created"};
  int connections = 4;
  std::vector<endpoint_spec> endpoints;
  std::chrono::milliseconds drain{15000};  ///< after the schedule: wait this long at most for stragglers
  std::string watch_path;                  ///< endpoint whose pending rows are sampled, "" for none
  bool drain_all = true;                   ///< wait for the drain (false: stop when the schedule ends)
  /// Start the relay (and wait until it is ready) before the load. false: the controller starts
  /// it (trial_control::relay.start()), e.g. to build a backlog in the slot first.
  bool start_relay = true;
  /// Extra `walhook run` flags for this workload, each as one "--flag=value" argument; a flag the
  /// user also gave with --walhook-arg is left out (the user's value wins).
  std::vector<std::string> walhook_args;
  /// walhook only: this many walhook processes, one per shard (driver_options::shards); 1: one
  /// unsharded walhook.
  int shards = 1;
  /// Where endpoints deliver: the HTTP receiver, or a broker (make_sink): endpoints' URLs are
  /// the sink's, and the polling relays publish there too.
  delivery::sink_kind destination = delivery::sink_kind::http;
};

/// Settings that hold for every trial of a bench run.
struct bench_settings {
  std::string walhook_binary;
  std::string log_dir;                          ///< walhook logs, one per trial
  std::chrono::milliseconds deadline{5000};     ///< HTTP deadline (walhook --deadline-ms and the baselines)
  std::vector<std::string> walhook_args;
  int poll_workers = 16;
  int poll_batch = 10;
  std::chrono::milliseconds poll_interval{500};
  bool verbose = true;
};

struct latency_stats {
  std::size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
  /// Samples that are lower bounds (never delivered: drain end − commit).
  std::size_t lower_bounds = 0;
};
latency_stats summarize(std::vector<double> ms, std::size_t lower_bounds = 0);

/// One measured delivery: an (event, endpoint) pair a measured endpoint had to receive.
struct delivery_obs {
  std::int64_t scheduled_us = 0;
  std::int64_t commit_us = 0;
  std::int64_t receipt_us = -1;  ///< first 2xx receipt, −1 if never
  std::uint32_t endpoint = 0;    ///< index into workload::endpoints
};

struct sample_point {
  double t_s = 0;                    ///< seconds since the generator started
  std::int64_t backlog = 0;          ///< deliveries committed − distinct 2xx answers received
  /// pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn); −1: no slot. With several slots
  /// (shards) this and the two below are the worst slot's (the oldest confirmed_flush_lsn).
  std::int64_t slot_lag_bytes = -1;
  std::int64_t sent_lag_bytes = -1;  ///< … − the walsender's sent_lsn: WAL not yet decoded and sent; −1: no slot
  std::int64_t pending = -1;         ///< pending rows of the watched endpoint; −1: not sampled
  std::int64_t wal_lsn = -1;         ///< pg_current_wal_lsn() as bytes since 0/0; −1: not sampled
  std::int64_t confirmed_lsn = -1;   ///< the slot's confirmed_flush_lsn as bytes since 0/0; −1: no slot
  /// Age of the oldest WAL the slot has not confirmed: now − when the server's WAL position
  /// passed confirmed_flush_lsn (interpolated between samples); 0 when nothing is unconfirmed,
  /// −1 unknown. Computed after the trial (slot_lag_seconds).
  double slot_lag_s = -1;
};

/// Fills sample_point::slot_lag_s of every sample from the absolute LSNs, and returns the largest.
double slot_lag_seconds(std::vector<sample_point>& samples);

/// Something a scenario did to the system during a trial (kill -9, a PostgreSQL restart, an
/// endpoint switched back to 200) and what it measured about it, in the order measured.
struct disruption {
  std::string what;  ///< "kill -9 walhook", "PostgreSQL restart -m fast", …
  double at_s = 0;   ///< seconds since the load started
  std::vector<std::pair<std::string, double>> figures;  ///< e.g. {"stop_s", 61.2}; units in the name
  void set(const std::string& key, double value);       ///< adds or replaces a figure
};

struct trial_result {
  std::string scenario, variant, relay;
  int run = 0;
  double offered_events_per_s = 0;  ///< of the measured window
  double window_s = 0;
  std::int64_t txns = 0, events = 0, failed_txns = 0, late_txns = 0;
  std::int64_t expected = 0;     ///< measured deliveries of events in the window
  std::int64_t delivered = 0;    ///< … received with a 2xx
  std::int64_t undelivered = 0;  ///< … not received by the end of the drain
  std::int64_t duplicates = 0;   ///< extra 2xx receipts of an (event, endpoint) already received, all endpoints
  std::int64_t delivered_total = 0;  ///< measured 2xx deliveries over the whole trial (warm-up and drain included)
  std::int64_t non_2xx = 0;      ///< requests answered with an error (or never)
  std::int64_t unknown = 0;      ///< requests for events the generator does not know
  double committed_per_s = 0;    ///< events committed in the window / window
  double delivered_per_s = 0;    ///< measured 2xx receipts in the window / window
  latency_stats commit_to_receipt;     ///< receipt − commit time of the event's transaction
  latency_stats scheduled_to_receipt;  ///< receipt − the transaction's open-loop due time
  std::vector<double> latencies_ms;    ///< commit-to-receipt samples of the window (for the CDF)
  std::vector<delivery_obs> observations;  ///< every measured delivery (not serialized)
  bool server_commit_times = false;
  // Resources over the load + drain.
  double cpu_relay = 0, cpu_postgres = 0, cpu_receiver = 0, cpu_generator = 0, cpu_machine_other = 0;
  double cpu_elapsed_s = 0;
  /// The slot's walsender (part of cpu_postgres; with shards, every slot's walsender), its CPU
  /// since it started; −1: no slot.
  double cpu_walsender = -1;
  long rss_relay_kib = 0, rss_postgres_kib = 0, rss_bench_kib = 0;
  std::int64_t max_slot_lag_bytes = -1;
  std::int64_t max_sent_lag_bytes = -1;
  double max_slot_lag_s = -1;  ///< largest sample_point::slot_lag_s; −1: no slot
  /// Outbox rows of the generator's tenants that the generator does not know: their COMMIT
  /// succeeded on the server but the client saw an error (the connection died on the way, e.g.
  /// in a PostgreSQL restart). Deliveries of them count as unknown, not as duplicates.
  std::int64_t in_doubt_events = 0;
  std::vector<disruption> disruptions;
  std::int64_t max_backlog = 0;
  std::vector<sample_point> samples;
  std::int64_t start_us = 0;  ///< generator start (system clock µs)
  std::map<std::string, double> extra;  ///< scenario-specific figures
  std::vector<std::string> notes;
};

/// Called about every 50 ms while the schedule runs, on the bench's main thread. It may block
/// (kill and restart the relay, restart the server): the generator and the sampler run on their
/// own threads meanwhile. An exception ends the schedule; the trial carries on with the drain
/// and records it in the notes.
struct trial_control {
  load_generator& generator;
  sink& receiver;
  relay_driver& relay;
  trial_result& result;
  bench_cluster& cluster;
  const std::string& conninfo;                   ///< the trial's database
  const std::vector<endpoint_spec>& endpoints;   ///< as created (ids and secrets filled in)
  double elapsed_s = 0;
  bool stop = false;   ///< set to end the schedule early
  bool final = false;  ///< the last call, after the drain (the receiver still runs)
};
using controller = std::function<void(trial_control&)>;

class trial_runner {
 public:
  trial_runner(bench_cluster& cluster, bench_settings settings);

  trial_result run(const std::string& scenario, const workload& w, relay_kind kind, int run_index,
                   const controller& control = {});

  bench_cluster& cluster() { return cluster_; }
  const bench_settings& settings() const { return settings_; }

 private:
  bench_cluster& cluster_;
  bench_settings settings_;
  int sequence_ = 0;
};

/// Endpoints "/ep/0" … for `count` endpoints, `fanout` per tenant (endpoint i → tenant i / fanout).
std::vector<endpoint_spec> make_endpoints(int count, int fanout, int max_concurrency = 4);

}  // namespace walhook::bench
