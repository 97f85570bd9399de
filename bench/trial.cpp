#include "bench/trial.hpp"

#include "bench/proc_stats.hpp"
#include "delivery/signing.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cmath>
#include <iostream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <unistd.h>

namespace walhook::bench {
namespace {

std::int64_t system_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A text[] literal of slot names (plain identifiers), "" for none.
std::string text_array(const std::vector<std::string>& v) {
  if (v.empty()) return {};
  std::string a = "{";
  for (const auto& x : v) a += (a.size() > 1 ? "," : "") + x;
  return a + "}";
}

/// Samples backlog, slot lag, the watched endpoint's pending rows and PostgreSQL's memory.
/// Reconnects when the server went away (a scenario restarted it).
class sampler {
 public:
  sampler(std::string conninfo, std::vector<std::string> slots, std::string pending_sql, std::int64_t watched_endpoint,
          const bench_cluster& cluster, const load_generator& gen, const sink& snk)
      : conninfo_(std::move(conninfo)), slots_(std::move(slots)), slots_array_(text_array(slots_)),
        pending_sql_(std::move(pending_sql)),
        watched_(watched_endpoint), cluster_(cluster), gen_(gen), sink_(snk),
        db_(std::make_unique<relay::blocking_db>(conninfo_, "walhook-bench-sampler")) {}
  ~sampler() { stop(); }

  void start(std::int64_t t0_us) {
    t0_us_ = t0_us;
    thread_ = std::thread([this] { loop(); });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  const std::vector<sample_point>& samples() const { return samples_; }
  /// CPU seconds of the slot's walsender(s) as last seen; −1 if none was seen.
  double walsender_cpu() const {
    if (walsender_cpu_.empty()) return -1;
    double s = 0;
    for (const auto& [pid, cpu] : walsender_cpu_) s += cpu;
    return s;
  }
  long peak_postgres_kib() const { return peak_pg_; }

 private:
  void loop() {
    int tick = 0;
    while (!stop_) {
      sample_point s;
      s.t_s = static_cast<double>(system_us() - t0_us_) / 1e6;
      s.backlog = gen_.committed_deliveries() - sink_.answered_ok();
      try {
        if (!db_) db_ = std::make_unique<relay::blocking_db>(conninfo_, "walhook-bench-sampler");
        if (!slots_array_.empty()) {
          // One row per slot (shards: one per shard); the sample keeps the worst slot's lag.
          pg::params p{slots_array_};
          auto r = db_->exec("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint, "
                             "pg_wal_lsn_diff(pg_current_wal_lsn(), r.sent_lsn)::bigint, s.active_pid, "
                             "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, "
                             "pg_wal_lsn_diff(s.confirmed_flush_lsn, '0/0')::bigint "
                             "FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid "
                             "WHERE s.slot_name = ANY ($1::text[])", p);
          for (int row = 0; row < r.rows(); ++row) {
            auto value = [&](int col) { return static_cast<std::int64_t>(std::stoll(std::string(r.value(row, col)))); };
            if (!r.is_null(row, 0)) s.slot_lag_bytes = std::max(s.slot_lag_bytes, value(0));
            if (!r.is_null(row, 1)) s.sent_lag_bytes = std::max(s.sent_lag_bytes, value(1));
            if (!r.is_null(row, 2)) {
              // The walsender's CPU: the latest value of every walsender the slots had.
              pid_t ws = static_cast<pid_t>(value(2));
              double cpu = process_cpu_seconds(ws);
              if (cpu > 0) walsender_cpu_[ws] = cpu;
            }
            if (!r.is_null(row, 3)) s.wal_lsn = std::max(s.wal_lsn, value(3));
            if (!r.is_null(row, 4)) s.confirmed_lsn = s.confirmed_lsn < 0 ? value(4) : std::min(s.confirmed_lsn, value(4));
          }
        }
        if (watched_ > 0 && tick % 4 == 0) {
          pg::params p{std::to_string(watched_)};
          auto r = db_->exec(pending_sql_, p);
          if (r.rows() == 1) s.pending = std::stoll(std::string(r.value(0, 0)));
        }
      } catch (const std::exception&) {
        // A sample missed (server busy or restarting) is not a failure of the trial; a
        // connection the server closed is opened again at the next sample.
        if (db_ && PQstatus(db_->native()) != CONNECTION_OK) db_.reset();
      }
      if (const pid_t pm = cluster_.postmaster_pid(); tick % 4 == 0 && pm > 0)
        peak_pg_ = std::max(peak_pg_, tree_rss_kib(pm));
      samples_.push_back(s);
      ++tick;
      for (int i = 0; i < 25 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::string conninfo_;
  std::vector<std::string> slots_;
  std::string slots_array_;  ///< slots_ as a text[] literal, "" when there is none
  std::string pending_sql_;
  std::int64_t watched_;
  const bench_cluster& cluster_;
  const load_generator& gen_;
  const sink& sink_;
  std::unique_ptr<relay::blocking_db> db_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::int64_t t0_us_ = 0;
  std::vector<sample_point> samples_;
  std::map<pid_t, double> walsender_cpu_;
  long peak_pg_ = 0;
};

std::string database_name(const std::string& scenario, int sequence) {
  std::string s = "walhook_bench_";
  for (char c : scenario) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s + "_" + std::to_string(sequence);
}

}  // namespace

double slot_lag_seconds(std::vector<sample_point>& samples) {
  // (time, WAL position) of every sample that has one; the WAL position only grows.
  std::vector<std::pair<double, std::int64_t>> wal;
  for (const auto& s : samples)
    if (s.wal_lsn >= 0 && (wal.empty() || s.wal_lsn >= wal.back().second)) wal.emplace_back(s.t_s, s.wal_lsn);
  double worst = -1;
  for (auto& s : samples) {
    if (s.wal_lsn < 0 || s.confirmed_lsn < 0) continue;
    if (s.confirmed_lsn >= s.wal_lsn) {
      s.slot_lag_s = 0;
    } else {
      // The first sample whose WAL position was past the confirmed one: the unconfirmed WAL
      // began between it and the one before (interpolated on the LSN).
      auto it = std::upper_bound(wal.begin(), wal.end(), s.confirmed_lsn,
                                 [](std::int64_t lsn, const std::pair<double, std::int64_t>& w) { return lsn < w.second; });
      // Past every sample's position: not seen yet (0). Before the first sample's: unconfirmed
      // since before the trial's first sample, so the age is a lower bound.
      double since = it == wal.end() ? s.t_s : it->first;
      if (it != wal.begin() && it != wal.end()) {
        const auto& before = *(it - 1);  // before.second ≤ confirmed_lsn < it->second
        const double span = static_cast<double>(it->second - before.second);
        since = before.first + (it->first - before.first) * static_cast<double>(s.confirmed_lsn - before.second) / span;
      }
      s.slot_lag_s = std::max(0.0, s.t_s - since);
    }
    worst = std::max(worst, s.slot_lag_s);
  }
  return worst;
}

void disruption::set(const std::string& key, double value) {
  for (auto& [k, v] : figures)
    if (k == key) {
      v = value;
      return;
    }
  figures.emplace_back(key, value);
}

latency_stats summarize(std::vector<double> ms, std::size_t lower_bounds) {
  latency_stats s;
  s.n = ms.size();
  s.lower_bounds = lower_bounds;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  // Nearest-rank percentiles.
  auto at = [&](double q) {
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(ms.size())));
    return ms[std::min(ms.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  s.p50 = at(0.50);
  s.p90 = at(0.90);
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  s.max = ms.back();
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean = sum / static_cast<double>(ms.size());
  return s;
}

std::vector<endpoint_spec> make_endpoints(int count, int fanout, int max_concurrency) {
  std::vector<endpoint_spec> out;
  for (int i = 0; i < count; ++i) {
    endpoint_spec e;
    e.path = fmt::format("/ep/{}", i);
    e.tenant = static_cast<std::size_t>(i / std::max(1, fanout));
    e.max_concurrency = max_concurrency;
    out.push_back(e);
  }
  return out;
}

trial_runner::trial_runner(bench_cluster& cluster, bench_settings settings)
    : cluster_(cluster), settings_(std::move(settings)) {}

trial_result trial_runner::run(const std::string& scenario, const workload& w, relay_kind kind, int run_index,
                               const controller& control) {
  trial_result res;
  res.scenario = scenario;
  res.variant = w.variant;
  res.relay = to_string(kind);
  res.run = run_index;
  const std::string name = database_name(scenario, ++sequence_);
  if (settings_.verbose)
    std::cerr << fmt::format("[{}] {} / {} / {} run {} …", load_average(), scenario, w.variant, res.relay, run_index + 1)
              << std::flush;

  const std::string conninfo = cluster_.create_database(name);
  driver_options dopt;
  dopt.walhook_binary = settings_.walhook_binary;
  dopt.walhook_args = settings_.walhook_args;
  {
    // The workload's flags, except those the user gave with --walhook-arg (theirs win).
    auto flag_name = [](const std::string& a) { return a.substr(0, a.find('=')); };
    std::unordered_set<std::string> given;
    for (const auto& a : settings_.walhook_args)
      if (a.rfind("--", 0) == 0) given.insert(flag_name(a));
    for (const auto& a : w.walhook_args)
      if (!given.contains(flag_name(a))) dopt.walhook_args.push_back(a);
  }
  dopt.deadline = settings_.deadline;
  dopt.poll_workers = settings_.poll_workers;
  dopt.poll_batch = settings_.poll_batch;
  dopt.poll_interval = settings_.poll_interval;
  dopt.log_path = settings_.log_dir + "/" + name + "-walhook.log";
  dopt.shards = std::max(1, w.shards);
  ::unlink(dopt.log_path.c_str());
  auto driver = make_driver(kind, dopt);
  driver->prepare(conninfo, name);

  // Endpoints and the receiver.
  auto endpoints = w.endpoints;
  auto snk = make_sink(w.destination);
  const std::size_t n_tenants = static_cast<std::size_t>(std::max(1, w.tenants));
  const std::vector<std::string> event_types = w.event_types.empty() ? std::vector<std::string>{"order.created"} : w.event_types;
  const std::size_t n_types = event_types.size();
  // The routes (tenant, event type) each endpoint receives.
  auto routes_of = [&](const endpoint_spec& e) {
    std::vector<std::size_t> out;
    if (e.tenant >= n_tenants) return out;
    for (std::size_t t = 0; t < n_types; ++t)
      if (!e.event_type || *e.event_type == t) out.push_back(route_index(e.tenant, t, n_types));
    return out;
  };
  std::vector<int> deliveries_per_route(n_tenants * n_types, 0);
  std::int64_t watched_id = 0;
  {
    relay::blocking_db db(conninfo, "walhook-bench");
    db.exec("BEGIN");  // one commit (one WAL flush) for all of them, however many
    for (auto& e : endpoints) {
      e.secret = delivery::generate_secret();
      pg::params p{e.tenant_id.empty() ? tenant_name(e.tenant) : e.tenant_id, snk->url(e.path), e.secret,
                   std::to_string(e.max_concurrency),
                   e.event_type && *e.event_type < n_types ? std::optional<std::string>("{\"" + event_types[*e.event_type] + "\"}")
                                                           : std::nullopt};
      auto r = db.exec("INSERT INTO walhook.endpoints (tenant_id, url, secret, max_concurrency, event_types) "
                       "VALUES ($1, $2, $3, $4::int, $5::text[]) RETURNING id", p);
      e.id = std::stoll(std::string(r.value(0, 0)));
      snk->configure(e);
      if (e.behaviour.can_succeed())
        for (auto route : routes_of(e)) ++deliveries_per_route[route];
      if (e.path == w.watch_path) watched_id = e.id;
    }
    db.exec("COMMIT");
    try {
      db.exec("CHECKPOINT");  // start every trial from a clean shared-buffer state
    } catch (const relay::cli_error&) {
    }
  }

  if (w.start_relay) {
    driver->start();
    if (!driver->wait_ready(std::chrono::seconds(30))) {
      std::string why = driver->errors();
      driver->stop();
      cluster_.drop_database(name);
      throw std::runtime_error(fmt::format("{} did not become ready: {}", res.relay, why));
    }
  }

  generator_options gopt;
  gopt.conninfo = conninfo;
  gopt.insert_sql = driver->insert_sql();
  gopt.schedule = w.schedule;
  gopt.rows_per_commit = w.rows_per_commit;
  gopt.payload_bytes = w.payload_bytes;
  gopt.tenants = w.tenants;
  gopt.event_types = event_types;
  gopt.deliveries_per_route = deliveries_per_route;
  gopt.connections = w.connections;
  load_generator gen(gopt);

  // Resource counters at the start of the load (PostgreSQL's across restarts of the server).
  const bool pg_local = cluster_.postgres_cpu_seconds() >= 0;
  const double relay0 = driver->cpu_seconds();
  const double pg0 = pg_local ? cluster_.postgres_cpu_seconds() : 0;
  const double recv0 = snk->cpu_seconds();
  const double broker0 = snk->broker_cpu_seconds();
  const double self0 = process_cpu_seconds(::getpid());
  const double walhook_proc0 = kind == relay_kind::walhook ? relay0 : 0;
  const double machine0 = machine_busy_seconds();
  const auto wall0 = std::chrono::steady_clock::now();

  gen.start();
  res.start_us = gen.start_us();
  sampler samp(conninfo, driver->slots(), driver->pending_sql(), watched_id, cluster_, gen, *snk);
  samp.start(res.start_us);
  auto call_control = [&](bool final) {
    trial_control c{gen, *snk, *driver, res, cluster_, conninfo, endpoints,
                    static_cast<double>(system_us() - res.start_us) / 1e6};
    c.final = final;
    try {
      control(c);
    } catch (const std::exception& e) {
      res.notes.push_back(fmt::format("scenario control failed at {:.1f} s: {}", c.elapsed_s, e.what()));
      if (settings_.verbose) std::cerr << "\n  scenario control failed: " << e.what() << "\n";
      c.stop = true;
    }
    return c.stop;
  };

  std::int64_t schedule_ms = 0;
  for (const auto& s : w.schedule) schedule_ms += s.duration.count();
  std::int64_t window_end_us = res.start_us + schedule_ms * 1000;
  bool stopped_early = false;
  while (!gen.finished()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (control) {
      if (call_control(false) && !stopped_early) {
        stopped_early = true;
        window_end_us = system_us();
        gen.stop();
      }
    }
  }
  gen.join();

  // Drain: until every delivery the measured endpoints must get has arrived, or the timeout.
  auto drain_until = std::chrono::steady_clock::now() + w.drain;
  while (w.drain_all && std::chrono::steady_clock::now() < drain_until) {
    if (snk->answered_ok() >= gen.committed_deliveries()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::int64_t drain_end_us = system_us();

  // Resources at the end.
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  res.cpu_elapsed_s = wall;
  res.cpu_relay = driver->cpu_seconds() - relay0;
  res.cpu_postgres = pg_local ? cluster_.postgres_cpu_seconds() - pg0 : -1;
  res.cpu_receiver = snk->cpu_seconds() - recv0;
  res.cpu_generator = gen.cpu_seconds();
  const double self = process_cpu_seconds(::getpid()) - self0;
  const double walhook_proc = kind == relay_kind::walhook ? driver->cpu_seconds() - walhook_proc0 : 0;
  const double broker_cpu = broker0 >= 0 ? snk->broker_cpu_seconds() - broker0 : 0;
  if (broker0 >= 0) res.extra["cpu_broker_s"] = broker_cpu;
  res.cpu_machine_other =
      (machine_busy_seconds() - machine0) - self - walhook_proc - std::max(0.0, res.cpu_postgres) - broker_cpu;
  res.rss_relay_kib = driver->peak_rss_kib();
  res.rss_bench_kib = peak_rss_kib(::getpid());
  samp.stop();
  res.rss_postgres_kib = samp.peak_postgres_kib();
  res.samples = samp.samples();
  res.max_slot_lag_s = slot_lag_seconds(res.samples);
  res.cpu_walsender = samp.walsender_cpu();
  for (const auto& s : res.samples) {
    res.max_backlog = std::max(res.max_backlog, s.backlog);
    res.max_slot_lag_bytes = std::max(res.max_slot_lag_bytes, s.slot_lag_bytes);
    res.max_sent_lag_bytes = std::max(res.max_sent_lag_bytes, s.sent_lag_bytes);
  }
  // A last call after the drain (scenarios read the receiver's final state here).
  if (control) call_control(true);

  driver->stop();
  if (auto n = driver->notes(); !n.empty()) res.notes.push_back(n);
  if (auto e = driver->errors(); !e.empty()) res.notes.push_back("relay errors: " + e);
  if (!gen.first_error().empty()) res.notes.push_back("generator: " + gen.first_error());
  for (const auto& e : endpoints)
    if (!e.measured) res.extra["peak_concurrency:" + e.path] = static_cast<double>(snk->max_concurrent(e.path));

  // What the relay wrote to its delivery table (walhook: only what did not succeed at once).
  try {
    relay::blocking_db db(conninfo, "walhook-bench");
    auto r = db.exec(driver->rows_written_sql());
    res.extra["delivery_rows_written"] = std::stod(std::string(r.value(0, 0)));
  } catch (const std::exception&) {
  }

  // Commit times from the server when it keeps them.
  auto& events = gen.events();
  std::unordered_map<std::string_view, std::uint32_t> by_id;
  by_id.reserve(events.size() * 2);
  for (std::uint32_t i = 0; i < events.size(); ++i) by_id.emplace(events[i].id_view(), i);
  {
    // Outbox rows of the generator's tenants it does not know are commits it saw fail.
    relay::blocking_db db(conninfo, "walhook-bench");
    pg::params p{std::to_string(std::max(1, w.tenants))};
    auto r = db.exec(cluster_.commit_timestamps()
                         ? "SELECT id::text, (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint "
                           "FROM walhook.outbox WHERE tenant_id = ANY (SELECT 'tenant-' || g FROM generate_series(0, $1::int - 1) g)"
                         : "SELECT id::text, NULL::bigint "
                           "FROM walhook.outbox WHERE tenant_id = ANY (SELECT 'tenant-' || g FROM generate_series(0, $1::int - 1) g)",
                     p);
    std::size_t found = 0;
    for (int i = 0; i < r.rows(); ++i) {
      auto it = by_id.find(r.value(i, 0));
      if (it == by_id.end()) {
        ++res.in_doubt_events;
        continue;
      }
      if (r.is_null(i, 1)) continue;
      events[it->second].commit_us = std::stoll(std::string(r.value(i, 1)));
      ++found;
    }
    res.server_commit_times = cluster_.commit_timestamps() && found == events.size();
    if (res.in_doubt_events > 0)
      res.notes.push_back(fmt::format("{} events committed although the generator saw their COMMIT fail (in doubt: "
                                      "the connection died on the way); their deliveries count as unknown",
                                      res.in_doubt_events));
  }

  // Join commits with receipts.
  const auto requests = snk->requests();
  if (auto n = snk->notes(); !n.empty()) res.notes.push_back(n);
  snk->stop();
  std::unordered_map<std::string, std::uint32_t> endpoint_of;
  for (std::uint32_t i = 0; i < endpoints.size(); ++i) endpoint_of[endpoints[i].path] = i;
  std::vector<std::vector<std::uint32_t>> measured_of_route(n_tenants * n_types);
  for (std::uint32_t i = 0; i < endpoints.size(); ++i)
    if (endpoints[i].measured)
      for (auto route : routes_of(endpoints[i])) measured_of_route[route].push_back(i);
  const std::uint64_t n_ep = endpoints.size();
  std::unordered_map<std::uint64_t, std::int64_t> first_receipt;
  first_receipt.reserve(requests.size() * 2);
  for (const auto& r : requests) {
    auto ep = endpoint_of.find(r.path);
    auto ev = by_id.find(r.webhook_id);
    if (ep == endpoint_of.end() || ev == by_id.end()) {
      ++res.unknown;
      continue;
    }
    if (r.status < 200 || r.status >= 300) {
      ++res.non_2xx;
      continue;
    }
    auto [it, fresh] = first_receipt.emplace(std::uint64_t{ev->second} * n_ep + ep->second, r.received_at_us);
    if (!fresh) {
      ++res.duplicates;
      it->second = std::min(it->second, r.received_at_us);
    }
  }

  const auto& txns = gen.txns();
  const std::int64_t window_start_us = res.start_us + w.warmup.count() * 1000;
  res.window_s = static_cast<double>(window_end_us - window_start_us) / 1e6;
  res.txns = static_cast<std::int64_t>(txns.size());
  res.events = static_cast<std::int64_t>(events.size());
  res.failed_txns = gen.failed_transactions();
  res.late_txns = gen.late_transactions();
  res.offered_events_per_s = 0;
  {
    // Offered load of the window: the schedule's events in it.
    std::int64_t t = 0;
    double offered = 0;
    for (const auto& s : w.schedule) {
      std::int64_t a = std::max<std::int64_t>(t, w.warmup.count()), b = std::min<std::int64_t>(t + s.duration.count(), (window_end_us - res.start_us) / 1000);
      if (b > a) offered += s.events_per_second * static_cast<double>(b - a) / 1000.0;
      t += s.duration.count();
    }
    res.offered_events_per_s = res.window_s > 0 ? offered / res.window_s : 0;
  }
  std::vector<double> c2r, s2r;
  std::size_t lower = 0;
  std::int64_t committed_in_window = 0, delivered_in_window = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& ev = events[i];
    const auto& tx = txns[ev.txn];
    const bool in_window = tx.scheduled_us >= window_start_us && tx.scheduled_us < window_end_us;
    if (ev.commit_us >= window_start_us && ev.commit_us < window_end_us) ++committed_in_window;
    const std::size_t route = route_index(ev.tenant, ev.type, n_types);
    if (ev.tenant >= n_tenants || route >= measured_of_route.size()) continue;
    for (std::uint32_t ep : measured_of_route[route]) {
      delivery_obs o;
      o.scheduled_us = tx.scheduled_us;
      o.commit_us = ev.commit_us;
      o.endpoint = ep;
      auto it = first_receipt.find(i * n_ep + ep);
      if (it != first_receipt.end()) {
        o.receipt_us = it->second;
        ++res.delivered_total;
      }
      if (o.receipt_us >= window_start_us && o.receipt_us < window_end_us) ++delivered_in_window;
      res.observations.push_back(o);
      if (!in_window) continue;
      ++res.expected;
      if (o.receipt_us >= 0) {
        ++res.delivered;
        c2r.push_back(static_cast<double>(o.receipt_us - o.commit_us) / 1000.0);
        s2r.push_back(static_cast<double>(o.receipt_us - o.scheduled_us) / 1000.0);
      } else {
        ++res.undelivered;
        ++lower;
        c2r.push_back(static_cast<double>(drain_end_us - o.commit_us) / 1000.0);
        s2r.push_back(static_cast<double>(drain_end_us - o.scheduled_us) / 1000.0);
      }
    }
  }
  res.committed_per_s = res.window_s > 0 ? static_cast<double>(committed_in_window) / res.window_s : 0;
  res.delivered_per_s = res.window_s > 0 ? static_cast<double>(delivered_in_window) / res.window_s : 0;
  res.latencies_ms = c2r;
  res.commit_to_receipt = summarize(std::move(c2r), lower);
  res.scheduled_to_receipt = summarize(std::move(s2r), lower);

  cluster_.drop_database(name);
  if (settings_.verbose)
    std::cerr << fmt::format(" p50 {:.2f} ms, p99 {:.2f} ms, {:.0f} deliveries/s, {} undelivered, {} duplicates\n",
                             res.commit_to_receipt.p50, res.commit_to_receipt.p99, res.delivered_per_s, res.undelivered,
                             res.duplicates);
  return res;
}

}  // namespace walhook::bench
