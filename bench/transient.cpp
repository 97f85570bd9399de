#include "bench/transient.hpp"

#include "bench/scenario_support.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace walhook::bench {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

double seconds(milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }
double seconds_between(std::int64_t from_us, std::int64_t to_us) { return static_cast<double>(to_us - from_us) / 1e6; }

/// The transient scenarios act on the walhook process: the other relays are left out.
std::vector<relay_kind> walhook_only(const scenario_options& o, scenario_report& r) {
  std::vector<relay_kind> relays;
  for (auto k : o.relays)
    if (k == relay_kind::walhook) relays.push_back(k);
  if (relays.empty()) r.findings.push_back(r.scenario + " runs walhook only (add walhook to --relay)");
  return relays;
}

/// The slot's active_pid, 0 when inactive or unknown (server down).
int slot_active_pid(const std::string& conninfo, const std::string& slot) {
  try {
    relay::blocking_db db(conninfo, "walhook-bench-control");
    pg::params p{slot};
    auto r = db.exec("SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 AND active", p);
    return r.rows() == 1 && !r.is_null(0, 0) ? std::stoi(std::string(r.value(0, 0))) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

/// Waits until a walsender other than `previous_pid` has the slot active (walhook streams
/// again), checking every 10 ms; reconnects while the server is not there. Returns the system
/// clock µs it was seen, −1 on timeout.
std::int64_t wait_streaming(const std::string& conninfo, const std::string& slot, int previous_pid, milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<relay::blocking_db> db;
  pg::params p{slot};
  while (std::chrono::steady_clock::now() < until) {
    try {
      if (!db) db = std::make_unique<relay::blocking_db>(conninfo, "walhook-bench-control");
      auto r = db->exec("SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 AND active", p);
      if (r.rows() == 1 && !r.is_null(0, 0) && std::stoi(std::string(r.value(0, 0))) != previous_pid) return system_now_us();
    } catch (const std::exception&) {
      db.reset();
    }
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

/// Commit-to-receipt of the measured deliveries whose commit falls in [from_us, to_us).
latency_stats window_latency(const trial_result& t, std::int64_t from_us, std::int64_t to_us) {
  std::vector<double> ms;
  std::size_t missing = 0;
  for (const auto& ob : t.observations) {
    if (ob.commit_us < from_us || ob.commit_us >= to_us) continue;
    if (ob.receipt_us < 0) ++missing;
    else ms.push_back(static_cast<double>(ob.receipt_us - ob.commit_us) / 1000.0);
  }
  auto s = summarize(std::move(ms));
  s.lower_bounds = missing;  // not delivered at all: left out of the percentiles, counted here
  return s;
}

/// Each duplicate 2xx receipt on `paths` (an (event, path) already answered 2xx) is charged to
/// the latest disruption that began before it arrived; index −1 (before the first) goes to
/// `before`. Returns the count per disruption.
std::vector<std::int64_t> duplicates_by_disruption(std::vector<relay::received_request> requests,
                                                   const std::unordered_set<std::string>& paths,
                                                   const std::vector<std::int64_t>& began_us, std::int64_t& before) {
  std::sort(requests.begin(), requests.end(),
            [](const auto& a, const auto& b) { return a.received_at_us < b.received_at_us; });
  std::unordered_set<std::string> seen;
  seen.reserve(requests.size() * 2);
  std::vector<std::int64_t> out(began_us.size(), 0);
  before = 0;
  for (const auto& r : requests) {
    if (r.status < 200 || r.status >= 300 || !paths.contains(r.path)) continue;
    if (seen.insert(r.webhook_id + " " + r.path).second) continue;
    auto it = std::upper_bound(began_us.begin(), began_us.end(), r.received_at_us);
    if (it == began_us.begin()) ++before;
    else ++out[static_cast<std::size_t>(it - began_us.begin() - 1)];
  }
  return out;
}

/// "a / b / c" of one figure over a group's runs (every run, for figures too few to median well).
std::string per_run(const trial_group& g, const std::function<double(const trial_result&)>& f, int decimals = 0) {
  std::vector<std::string> parts;
  for (const auto* t : g.runs) parts.push_back(fmt::format("{:.{}f}", f(*t), decimals));
  return fmt::format("{}", fmt::join(parts, " / "));
}

/// How long a trial waits after the load for the deliveries still due: long, because an old
/// walhook can stall for tens of seconds after a PostgreSQL restart and "lost" must mean lost,
/// not late. The drain ends as soon as everything has arrived.
constexpr milliseconds drain_bound{120000};

/// Seconds from the end of the load until the last measured delivery first arrived (−1: none).
double last_delivery_after_load_s(const trial_result& t, const workload& w) {
  const std::int64_t load_end_us = t.start_us + w.warmup.count() * 1000 + static_cast<std::int64_t>(t.window_s * 1e6);
  std::int64_t last = -1;
  for (const auto& ob : t.observations) last = std::max(last, ob.receipt_us);
  return last < 0 ? -1 : std::max(0.0, seconds_between(load_end_us, last));
}

// ------------------------------------------------------------------ catchup: from the slot

void catchup_from_slot(scenario_report& r, trial_runner& runner, const scenario_options& o, const std::vector<relay_kind>& relays) {
  const double down_s = seconds(o.catchup_down);
  const double live = o.catchup_live_rate;
  workload w;
  w.variant = fmt::format("from the slot: {} at {} while walhook is down {:.0f} s, then {} live",
                          thousands(o.catchup_rate * down_s) + " events", rate_label(o.catchup_rate), down_s, rate_label(live));
  w.warmup = 0ms;  // every event counts: the backlog is the point
  w.schedule = {{o.catchup_down, o.catchup_rate}, {o.catchup_max, live}};
  w.payload_bytes = o.payload_bytes;
  w.connections = o.catchup_connections;
  w.endpoints = make_endpoints(8, 1, o.max_concurrency);
  if (o.catchup_delay_max_ms > 0) {
    for (std::size_t i = 0; i < 7; ++i)
      w.endpoints[i].behaviour.delay = std::chrono::milliseconds(
          o.catchup_delay_min_ms + static_cast<int>(i) * (o.catchup_delay_max_ms - o.catchup_delay_min_ms) / 6);
    w.variant += fmt::format(", endpoints 0-6 answering in {}-{} ms", o.catchup_delay_min_ms, o.catchup_delay_max_ms);
  }
  w.tenants = 8;
  w.start_relay = false;  // `walhook migrate` made the slot; walhook runs once the backlog is in it
  w.drain = 15000ms;

  // Transactions of the backlog step (the generator's own rounding).
  const auto backlog_txns = static_cast<std::int64_t>(std::llround(o.catchup_rate * down_s));
  auto make_control = [down_s, live, backlog_txns](const workload&) -> controller {
    struct state {
      std::int64_t start_us = 0, caught_us = 0;
      double backlog_events = 0;
    };
    auto st = std::make_shared<state>();
    return [st, down_s, live, backlog_txns](trial_control& c) {
      const std::int64_t now = system_now_us();
      if (c.final) {
        if (st->start_us) c.result.extra["walhook_started_at_s"] = seconds_between(c.result.start_us, st->start_us);
        return;
      }
      if (!st->start_us) {
        // Once the whole backlog is in the slot: a database-bound generator commits it late, and
        // the drain must not be paced by the generator.
        if (c.elapsed_s < down_s || c.generator.ended_transactions() < backlog_txns) return;
        st->backlog_events = static_cast<double>(c.generator.committed_events());
        st->start_us = system_now_us();
        c.relay.start();
        const bool ready = c.relay.wait_ready(30s);
        disruption d{"walhook run started on the slot's backlog", seconds_between(c.result.start_us, st->start_us), {}};
        d.set("backlog_events_committed", st->backlog_events);
        d.set("slot_active_after_start_s", ready ? seconds_between(st->start_us, system_now_us()) : -1);
        c.result.disruptions.push_back(d);
        return;
      }
      // Caught up: the receiver has (nearly: 50 ms of live load) everything committed so far.
      const auto behind = c.generator.committed_deliveries() - c.receiver.answered_ok();
      if (!st->caught_us) {
        if (behind > static_cast<std::int64_t>(live * 0.05)) return;
        st->caught_us = now;
      }
      // With live load, watch it a little longer after the backlog is gone.
      if (live <= 0 || now - st->caught_us >= 3'000'000) c.stop = true;
    };
  };
  const std::size_t first_trial = r.trials.size();
  run_all(r, runner, o, {w}, relays, make_control);

  for (std::size_t i = first_trial; i < r.trials.size(); ++i) {
    auto& t = r.trials[i];
    if (t.variant != w.variant) continue;
    const double started_at = extra_or(t, "walhook_started_at_s");
    const std::int64_t start_us = t.start_us + static_cast<std::int64_t>(started_at * 1e6);
    const std::int64_t backlog_end_us = t.start_us + o.catchup_down.count() * 1000;
    std::int64_t n = 0, received = 0, lost = 0, first = std::numeric_limits<std::int64_t>::max(), last = 0;
    std::int64_t first_commit = std::numeric_limits<std::int64_t>::max(), last_commit = 0;
    for (const auto& ob : t.observations) {
      if (ob.receipt_us < 0) ++lost;
      if (ob.scheduled_us >= backlog_end_us) continue;  // live load after the restart
      ++n;
      first_commit = std::min(first_commit, ob.commit_us);
      last_commit = std::max(last_commit, ob.commit_us);
      if (ob.receipt_us < 0) continue;
      ++received;
      first = std::min(first, ob.receipt_us);
      last = std::max(last, ob.receipt_us);
    }
    t.extra["backlog_deliveries"] = static_cast<double>(n);
    t.extra["backlog_committed_per_s"] = last_commit > first_commit ? static_cast<double>(n) / seconds_between(first_commit, last_commit) : 0;
    t.extra["lost"] = static_cast<double>(lost);
    t.extra["duplicates"] = static_cast<double>(t.duplicates);
    if (started_at < 0 || received == 0) continue;
    t.extra["first_delivery_after_start_s"] = seconds_between(start_us, first);
    t.extra["drain_per_s"] = last > first ? static_cast<double>(received) / seconds_between(first, last) : 0;
    t.extra["caught_up_after_start_s"] = received == n ? seconds_between(start_us, last) : -1;
    // The uninvolved tenant (endpoint 7, fast): its live events' latency while the others drain.
    std::vector<double> live_ms;
    for (const auto& ob : t.observations)
      if (ob.endpoint == 7 && ob.scheduled_us >= start_us && ob.receipt_us >= 0)
        live_ms.push_back(static_cast<double>(ob.receipt_us - ob.commit_us) / 1000.0);
    if (!live_ms.empty()) {
      const auto s = summarize(live_ms);
      t.extra["uninvolved_live_p50_ms"] = s.p50;
      t.extra["uninvolved_live_p99_ms"] = s.p99;
      t.extra["uninvolved_live_n"] = static_cast<double>(s.n);
    }
  }

  auto groups = group_trials(r);
  const auto* g = find_group(groups, w.variant, "walhook");
  if (!g) return;
  const double rate = median_extra(*g, "drain_per_s"), rows = median_extra(*g, "delivery_rows_written");
  const double lost = median_extra(*g, "lost");
  r.findings.push_back(fmt::format(
      "from the slot: first delivery {:.2f} s after `walhook run` started, backlog of {} deliveries drained at {} "
      "deliveries/s (target ≥ 15,000: {}), caught up {:.1f} s after the start; rows written to walhook.deliveries {} "
      "(target 0: {}); duplicates {:.0f}, lost {:.0f} (must be 0: {}) — medians of {} run(s); drain rate per run: {}",
      median_extra(*g, "first_delivery_after_start_s"), thousands(median_extra(*g, "backlog_deliveries")), thousands(rate),
      met(rate >= 15000), median_extra(*g, "caught_up_after_start_s"), thousands(rows), met(rows == 0),
      median_extra(*g, "duplicates"), lost, met(lost == 0), g->runs.size(),
      per_run(*g, [](const trial_result& t) { return extra_or(t, "drain_per_s"); })));
  if (median_extra(*g, "uninvolved_live_n") > 0)
    r.findings.push_back(fmt::format(
        "from the slot: the fast endpoint's events committed after walhook started (the uninvolved tenant, {:.0f} "
        "deliveries): p50 / p99 {:.1f} / {:.1f} ms (target p99 ≤ 1 s: {}); WAL walhook wrote is in the rows above",
        median_extra(*g, "uninvolved_live_n"), median_extra(*g, "uninvolved_live_p50_ms"),
        median_extra(*g, "uninvolved_live_p99_ms"), met(median_extra(*g, "uninvolved_live_p99_ms") <= 1000)));
  const double committed = median_extra(*g, "backlog_committed_per_s");
  if (committed < 0.95 * o.catchup_rate)
    r.findings.push_back(fmt::format("from the slot: the generator committed the backlog at only {} events/s of the {} asked "
                                     "(database-bound on this machine): the backlog took longer to build (walhook started once "
                                     "all of it was committed), its size is the same",
                                     thousands(committed), thousands(o.catchup_rate)));
}

// ------------------------------------------------------------------ catchup: from the table

void catchup_from_table(scenario_report& r, trial_runner& runner, const scenario_options& o, const std::vector<relay_kind>& relays) {
  const int backlog = o.catchup_backlog;
  const int txns = std::max(1, o.catchup_backlog_txns);
  const double live = o.catchup_table_live_rate;
  const milliseconds baseline = 5000ms;  // healthy latency before the backlog, after the warm-up
  workload w;
  w.variant = fmt::format("from the table: {} pending for a down endpoint, {} live over 4 healthy", thousands(backlog),
                          rate_label(live));
  w.warmup = o.warmup;
  w.schedule = {{o.warmup + baseline + 2 * o.catchup_max + 10000ms, live}};  // ended by the controller
  w.payload_bytes = o.payload_bytes;
  w.connections = o.connections;
  w.endpoints = make_endpoints(4, 1, o.max_concurrency);
  w.tenants = 4;
  endpoint_spec down;
  down.path = "/ep/down";
  down.tenant = 4;  // no generated events: only the SQL backlog
  down.tenant_id = "down";
  down.max_concurrency = o.max_concurrency;
  down.behaviour.status = 503;
  down.measured = false;
  w.endpoints.push_back(down);
  w.watch_path = down.path;
  // Short breaker and backoff, so the endpoint is paused at once and everything spills as
  // pending, and comes back within 2 s of the switch (user --walhook-arg flags win).
  w.walhook_args = {"--breaker-pause-s=1", "--breaker-max-pause-s=2", "--backoff-base-ms=500", "--backoff-max-ms=2000"};
  w.drain = 15000ms;

  const std::int64_t payload_pad = static_cast<std::int64_t>(o.payload_bytes > 40 ? o.payload_bytes - 40 : 1);
  auto make_control = [=, &o](const workload&) -> controller {
    struct state {
      int phase = 0;  // 0 baseline, 1 piling up, 2 draining, 3 done
      std::int64_t insert_us = 0, inserted_us = 0, switch_us = 0, drained_us = 0, last_poll_us = 0;
      std::int64_t pending = 0;
      bool cursor = false;          // the down endpoint follows the outbox by cursor (issue 18)
      std::string wal_at_insert;    // pg_current_wal_lsn() before the backlog's INSERTs
      std::unique_ptr<relay::blocking_db> db;
    };
    auto st = std::make_shared<state>();
    return [=, &o](trial_control& c) {
      const std::int64_t now = system_now_us();
      std::int64_t down_id = 0;
      for (const auto& e : c.endpoints)
        if (e.path == down.path) down_id = e.id;
      if (c.final) {
        // The down endpoint's receipts: the first 2xx, and when the backlog-th distinct event got one.
        std::unordered_map<std::string, std::int64_t> first_ok;
        std::int64_t first = std::numeric_limits<std::int64_t>::max(), requests = 0, errors = 0, dups = 0;
        for (const auto& q : c.receiver.requests()) {
          if (q.path != down.path) continue;
          ++requests;
          if (q.status < 200 || q.status >= 300) {
            ++errors;
            continue;
          }
          first = std::min(first, q.received_at_us);
          auto [it, fresh] = first_ok.emplace(q.webhook_id, q.received_at_us);
          if (!fresh) {
            ++dups;
            it->second = std::min(it->second, q.received_at_us);
          }
        }
        std::vector<std::int64_t> times;
        for (const auto& [id, us] : first_ok) times.push_back(us);
        std::sort(times.begin(), times.end());
        auto& x = c.result.extra;
        x["down_requests"] = static_cast<double>(requests);
        x["down_non_2xx"] = static_cast<double>(errors);
        x["down_duplicates"] = static_cast<double>(dups);
        x["down_delivered"] = static_cast<double>(times.size());
        x["pending_at_switch"] = static_cast<double>(st->pending);
        x["down_cursor_at_switch"] = st->cursor ? 1.0 : 0.0;
        if (st->insert_us) x["backlog_inserted_at_s"] = seconds_between(c.result.start_us, st->insert_us);
        if (st->switch_us) x["switched_at_s"] = seconds_between(c.result.start_us, st->switch_us);
        if (!times.empty() && st->switch_us) {
          const std::int64_t last = times[std::min(times.size(), static_cast<std::size_t>(backlog)) - 1];
          x["first_2xx_at_s"] = seconds_between(c.result.start_us, first);
          x["backlog_drained_at_s"] = seconds_between(c.result.start_us, last);
          x["first_2xx_after_switch_s"] = seconds_between(st->switch_us, first);
          x["drain_s"] = seconds_between(first, last);
          x["switch_to_drained_s"] = seconds_between(st->switch_us, last);
          x["drain_per_s"] = last > first ? static_cast<double>(std::min<std::size_t>(times.size(), backlog)) / seconds_between(first, last) : 0;
        }
        try {
          relay::blocking_db db(c.conninfo, "walhook-bench-control");
          pg::params p{std::to_string(down_id)};
          x["down_pending_rows_at_end"] = std::stod(std::string(db.exec(c.relay.pending_sql(), p).value(0, 0)));
          if (c.relay.kind() == relay_kind::walhook)  // every row walhook wrote for it (any status)
            x["down_rows_at_end"] = std::stod(std::string(
                db.exec("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1::bigint", p).value(0, 0)));
        } catch (const std::exception&) {
        }
        return;
      }
      if (st->phase == 0) {
        if (c.elapsed_s < seconds(o.warmup + baseline)) return;
        // The backlog: big multi-row INSERTs for tenant "down", committed as fast as the server can.
        st->insert_us = now;
        relay::blocking_db db(c.conninfo, "walhook-bench-backlog");
        st->wal_at_insert = std::string(db.exec("SELECT pg_current_wal_lsn()::text").value(0, 0));
        const int per_txn = (backlog + txns - 1) / txns;
        for (int i = 0, from = 0; i < txns && from < backlog; ++i, from += per_txn) {
          pg::params p{down.tenant_id, std::to_string(from), std::to_string(std::min(backlog, from + per_txn) - 1),
                       std::to_string(payload_pad)};
          db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload) "
                  "SELECT $1, 'order.created', jsonb_build_object('n', g, 'kind', 'backlog', 'pad', repeat('x', $4::int)) "
                  "FROM generate_series($2::int, $3::int) g",
                  p);
        }
        st->inserted_us = system_now_us();
        disruption d{fmt::format("backlog: {} rows for tenant down in {} transactions (endpoint answers 503)", thousands(backlog), txns),
                     seconds_between(c.result.start_us, st->insert_us), {}};
        d.set("insert_s", seconds_between(st->insert_us, st->inserted_us));
        c.result.disruptions.push_back(d);
        st->phase = 1;
        return;
      }
      if (st->phase == 1) {
        if (now - st->last_poll_us < 250'000) return;
        st->last_poll_us = now;
        try {
          if (!st->db) st->db = std::make_unique<relay::blocking_db>(c.conninfo, "walhook-bench-control");
          pg::params p{std::to_string(down_id)};
          st->pending = std::stoll(std::string(st->db->exec(c.relay.pending_sql(), p).value(0, 0)));
          // walhook since issue 18: the down endpoint's backlog is owed by its outbox cursor, not pending.
          if (st->db->exec("SELECT to_regclass('walhook.endpoint_cursors') IS NOT NULL").value(0, 0) == "t")
            st->cursor = st->db->exec("SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1::bigint", p)
                             .value(0, 0) == "1";
        } catch (const std::exception&) {
          st->db.reset();
        }
        const bool full = st->pending >= backlog || (st->cursor && now - st->inserted_us > 2'000'000);
        const bool timed_out = now - st->insert_us > o.catchup_max.count() * 1000;
        if (!full && !timed_out) return;
        if (timed_out)
          c.result.notes.push_back(fmt::format("only {} of {} deliveries were pending for the down endpoint after {:.0f} s; "
                                               "switched it to 200 anyway", st->pending, backlog, seconds(o.catchup_max)));
        c.receiver.set_status(down.path, 200);
        st->switch_us = system_now_us();
        disruption d{"the down endpoint answers 200 again", seconds_between(c.result.start_us, st->switch_us), {}};
        d.set("pile_up_s", seconds_between(st->insert_us, st->switch_us));
        d.set("pending_rows", static_cast<double>(st->pending));
        try {  // WAL written while the backlog piled up (the INSERTs, the healthy traffic, walhook's writes)
          relay::blocking_db db(c.conninfo, "walhook-bench-control");
          pg::params p{st->wal_at_insert};
          const double bytes = std::stod(std::string(db.exec("SELECT pg_current_wal_lsn() - $1::pg_lsn", p).value(0, 0)));
          d.set("wal_bytes_pile_up", bytes);
          c.result.extra["wal_bytes_pile_up"] = bytes;
          c.result.extra["pile_up_s"] = seconds_between(st->insert_us, st->switch_us);
        } catch (const std::exception&) {
        }
        c.result.disruptions.push_back(d);
        st->db.reset();
        st->phase = 2;
        return;
      }
      if (st->phase == 2) {
        const bool drained = c.receiver.answered_ok(down.path) >= backlog;
        if (!drained && now - st->switch_us < 2 * o.catchup_max.count() * 1000) return;
        if (!drained)
          c.result.notes.push_back(fmt::format("the down endpoint had {} of {} deliveries {:.0f} s after the switch",
                                               c.receiver.answered_ok(down.path), backlog, 2 * seconds(o.catchup_max)));
        st->drained_us = now;
        st->phase = 3;
        return;
      }
      // The healthy endpoints' load a little longer, then the drain.
      if (now - st->drained_us >= 2'000'000) c.stop = true;
    };
  };
  const std::size_t first_trial = r.trials.size();
  run_all(r, runner, o, {w}, relays, make_control);

  for (std::size_t i = first_trial; i < r.trials.size(); ++i) {
    auto& t = r.trials[i];
    if (t.variant != w.variant) continue;
    auto at = [&](const char* key) { return t.start_us + static_cast<std::int64_t>(extra_or(t, key, 0) * 1e6); };
    auto put = [&](const std::string& name, const latency_stats& s) {
      t.extra["healthy_p50_" + name + "_ms"] = s.p50;
      t.extra["healthy_p99_" + name + "_ms"] = s.p99;
    };
    put("before", window_latency(t, t.start_us + o.warmup.count() * 1000, at("backlog_inserted_at_s")));
    if (t.extra.contains("switched_at_s")) put("pileup", window_latency(t, at("backlog_inserted_at_s"), at("switched_at_s")));
    if (t.extra.contains("first_2xx_at_s")) put("drain", window_latency(t, at("first_2xx_at_s"), at("backlog_drained_at_s") + 1));
    std::int64_t lost = 0;
    for (const auto& ob : t.observations)
      if (ob.receipt_us < 0) ++lost;
    t.extra["healthy_lost"] = static_cast<double>(lost);
  }

  auto groups = group_trials(r);
  const auto* g = find_group(groups, w.variant, "walhook");
  if (!g) return;
  const double rate = median_extra(*g, "drain_per_s");
  const double b50 = median_extra(*g, "healthy_p50_before_ms"), b99 = median_extra(*g, "healthy_p99_before_ms");
  const double d50 = median_extra(*g, "healthy_p50_drain_ms"), d99 = median_extra(*g, "healthy_p99_drain_ms");
  const bool kept = d99 >= 0 && (d99 <= 1.2 * b99 || d99 <= b99 + 1.0);
  r.findings.push_back(fmt::format(
      "from the table: {} deliveries of a down endpoint ({:.0f} rows written for it, {} of WAL while they piled up for {:.1f} s; "
      "{}) drained at {} deliveries/s from the first 2xx (target ≥ 10,000: {}), in {:.1f} s "
      "(first 2xx {:.2f} s after the switch to 200; {:.0f} rows still pending at the end); healthy endpoints' p50 / p99 "
      "{:.2f} / {:.2f} ms before the backlog, {:.2f} / {:.2f} ms while it piled up, {:.2f} / {:.2f} ms during the drain "
      "(target: they keep their latency, p99 within 1.2× or 1 ms of before: {}) — medians of {} run(s); drain rate per run: {}",
      thousands(median_extra(*g, "down_delivered")), median_extra(*g, "down_rows_at_end"),
      fmt::format("{:.1f} MB", median_extra(*g, "wal_bytes_pile_up") / 1e6), median_extra(*g, "pile_up_s"),
      median_extra(*g, "down_cursor_at_switch") > 0.5 ? "it followed the outbox by cursor" : "they went through walhook.deliveries",
      thousands(rate), met(rate >= 10000), median_extra(*g, "drain_s"),
      median_extra(*g, "first_2xx_after_switch_s"), median_extra(*g, "down_pending_rows_at_end"), b50, b99,
      median_extra(*g, "healthy_p50_pileup_ms"), median_extra(*g, "healthy_p99_pileup_ms"), d50, d99, met(kept), g->runs.size(),
      per_run(*g, [](const trial_result& t) { return extra_or(t, "drain_per_s"); })));
  const double pending = median_extra(*g, "pending_at_switch");
  if (pending < backlog)
    r.findings.push_back(fmt::format("from the table: only {} deliveries were pending when the endpoint was switched to 200 "
                                     "(waited up to {:.0f} s for {})", thousands(pending), seconds(o.catchup_max), thousands(backlog)));
}

// ------------------------------------------------------------------ crash-hung

/// One planned action of crash-hung: kill -9 walhook, or restart PostgreSQL -m immediate.
struct crash_action {
  bool postgres = false;
  milliseconds at{0};  ///< since the load started
};

std::vector<crash_action> crash_plan(const scenario_options& o, bool pg_restart) {
  std::vector<crash_action> plan;
  for (int i = 1; i <= o.crash_kills; ++i) plan.push_back({false, o.crash_interval * i});
  if (pg_restart) {
    // Halfway between the middle kills (between kill 2 and 3 of 4).
    const int k = std::max(1, o.crash_kills / 2);
    plan.push_back({true, o.crash_interval * k + o.crash_interval / 2});
  }
  std::sort(plan.begin(), plan.end(), [](const auto& a, const auto& b) { return a.at < b.at; });
  return plan;
}

scenario_report crash_hung_report(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "crash-hung";
  auto relays = walhook_only(o, r);
  if (relays.empty()) return r;
  const bool embedded = runner.cluster().embedded();
  if (!embedded)
    r.findings.push_back("the variants with a PostgreSQL restart were skipped: they restart the server, which only the "
                         "throwaway cluster allows (run without --database-url)");

  struct variant {
    std::string name;
    bool hung, pg;
  };
  std::vector<variant> variants;
  const std::string kills = fmt::format("kill -9 ×{}", o.crash_kills);
  if (embedded) variants.push_back({kills + " + PostgreSQL restart -m immediate, hung endpoint", true, true});
  variants.push_back({kills + ", hung endpoint", true, false});
  if (embedded) variants.push_back({kills + " + PostgreSQL restart -m immediate, no hung endpoint (control)", false, true});

  std::vector<workload> ws;
  for (const auto& v : variants) {
    workload w;
    w.variant = v.name;
    w.warmup = o.warmup;
    // The load runs --crash-measure-s, longer when the crashes took longer than planned (a slow
    // PostgreSQL restart): the controller ends it once the last crash is 2 s behind.
    w.schedule = {{o.crash_measure + 180000ms, o.crash_rate}};
    w.payload_bytes = o.payload_bytes;
    w.connections = o.connections;
    const int n = v.hung ? 4 : 3;
    w.endpoints = make_endpoints(n, n, o.max_concurrency);  // one tenant: every event to every endpoint
    w.tenants = 1;
    if (v.hung) {
      auto& hung = w.endpoints.back();
      hung.behaviour.never = true;  // accepts, reads the request, never answers
      hung.measured = false;
      w.watch_path = hung.path;
    }
    w.drain = drain_bound;
    ws.push_back(w);
  }
  const auto last_action = crash_plan(o, true).back().at;
  if (last_action >= o.crash_measure)
    r.findings.push_back(fmt::format("note: the last planned crash at {:.1f} s is after --crash-measure-s {:.0f}: the load "
                                     "went on until 2 s after it", seconds(last_action), seconds(o.crash_measure)));

  auto make_control = [&o, &variants](const workload& w) -> controller {
    const auto& v = *std::find_if(variants.begin(), variants.end(), [&](const variant& x) { return x.name == w.variant; });
    struct state {
      std::vector<crash_action> plan;
      std::size_t next = 0;
      std::int64_t last_end_us = 0;                                ///< when the latest crash was over (walhook streamed)
      std::vector<std::int64_t> began_us;                          ///< per disruption
      std::vector<std::pair<std::int64_t, std::int64_t>> windows;  ///< from the crash until 1 s after walhook streams again
    };
    auto st = std::make_shared<state>();
    st->plan = crash_plan(o, v.pg);
    return [st, &o](trial_control& c) {
      if (c.final) {
        std::unordered_set<std::string> healthy;
        for (const auto& e : c.endpoints)
          if (e.measured) healthy.insert(e.path);
        std::int64_t before = 0;
        auto dups = duplicates_by_disruption(c.receiver.requests(), healthy, st->began_us, before);
        double worst_kill = 0;
        for (std::size_t i = 0; i < dups.size() && i < c.result.disruptions.size(); ++i) {
          c.result.disruptions[i].set("duplicates", static_cast<double>(dups[i]));
          if (c.result.disruptions[i].what.rfind("kill", 0) == 0) worst_kill = std::max(worst_kill, static_cast<double>(dups[i]));
        }
        c.result.extra["duplicates_before_first_crash"] = static_cast<double>(before);
        c.result.extra["duplicates_max_per_kill"] = worst_kill;
        // Slot lag outside the crash windows: what walhook itself holds back while it runs.
        double lag_s = -1, lag_bytes = -1;
        for (const auto& s : c.result.samples) {
          const auto at = c.result.start_us + static_cast<std::int64_t>(s.t_s * 1e6);
          bool inside = false;
          for (const auto& [a, b] : st->windows) inside = inside || (at >= a && at <= b);
          if (inside) continue;
          lag_s = std::max(lag_s, s.slot_lag_s);
          lag_bytes = std::max(lag_bytes, static_cast<double>(s.slot_lag_bytes));
        }
        c.result.extra["max_slot_lag_s_outside_crashes"] = lag_s;
        c.result.extra["max_slot_lag_bytes_outside_crashes"] = lag_bytes;
        return;
      }
      const std::int64_t now = system_now_us();
      if (st->next >= st->plan.size()) {
        if (c.elapsed_s >= seconds(o.crash_measure) && now >= st->last_end_us + 2'000'000) c.stop = true;
        return;
      }
      // As planned, but never sooner than half an interval after the previous crash was over
      // (a PostgreSQL restart can take longer than the plan allows).
      const double due_s = std::max(seconds(st->plan[st->next].at),
                                    st->last_end_us ? seconds_between(c.result.start_us, st->last_end_us) + seconds(o.crash_interval) / 2 : 0);
      if (c.elapsed_s < due_s) return;
      const auto action = st->plan[st->next++];
      const std::string slot = c.relay.slot();
      const int previous = slot_active_pid(c.conninfo, slot);
      const std::int64_t t0 = system_now_us();
      disruption d;
      d.at_s = seconds_between(c.result.start_us, t0);
      std::int64_t streaming = -1;
      if (!action.postgres) {
        d.what = fmt::format("kill -9 walhook, restarted after {:.1f} s", seconds(o.crash_down));
        c.relay.kill9();
        std::this_thread::sleep_for(o.crash_down);
        const std::int64_t t1 = system_now_us();
        c.relay.start();
        streaming = wait_streaming(c.conninfo, slot, previous, 30s);
        d.set("down_s", seconds_between(t0, t1));
        d.set("streaming_after_restart_s", streaming > 0 ? seconds_between(t1, streaming) : -1);
      } else {
        d.what = "PostgreSQL restart -m immediate";
        const std::int64_t failed0 = c.generator.failed_transactions();
        c.cluster.stop_server("immediate");
        const std::int64_t t1 = system_now_us();
        if (!c.cluster.start_server()) throw std::runtime_error("PostgreSQL did not start again after -m immediate");
        const std::int64_t t2 = system_now_us();
        streaming = wait_streaming(c.conninfo, slot, 0, 60s);
        d.set("stop_s", seconds_between(t0, t1));
        d.set("start_s", seconds_between(t1, t2));
        d.set("streaming_after_accepting_s", streaming > 0 ? seconds_between(t2, streaming) : -1);
        d.set("failed_commits", static_cast<double>(c.generator.failed_transactions() - failed0));
      }
      st->began_us.push_back(t0);
      st->last_end_us = streaming > 0 ? streaming : system_now_us();
      st->windows.emplace_back(t0, st->last_end_us + 1'000'000);
      c.result.disruptions.push_back(d);
    };
  };
  run_all(r, runner, o, ws, relays, make_control);

  const double deliveries_per_s = o.crash_rate * 3;  // to the 3 healthy endpoints
  const double bound = 3.0 * o.max_concurrency + deliveries_per_s * 0.25;
  for (auto& t : r.trials) {
    t.extra["load_s"] = seconds(o.warmup) + t.window_s;
    t.extra["last_delivery_after_load_s"] = last_delivery_after_load_s(t, ws.front());
    std::int64_t received = 0;
    for (const auto& ob : t.observations)
      if (ob.receipt_us >= 0) ++received;
    t.extra["expected_pairs"] = static_cast<double>(t.observations.size());
    t.extra["received_pairs"] = static_cast<double>(received);
    t.extra["lost"] = static_cast<double>(static_cast<std::int64_t>(t.observations.size()) - received);
    t.extra["duplicates"] = static_cast<double>(t.duplicates);
  }
  auto groups = group_trials(r);
  for (const auto& v : variants) {
    const auto* g = find_group(groups, v.name, "walhook");
    if (!g) continue;
    const double lost = median_extra(*g, "lost"), worst = median_extra(*g, "duplicates_max_per_kill");
    const double lag_s = median_extra(*g, "max_slot_lag_s_outside_crashes");
    // Duplicates of each disruption of the first run, in order.
    std::vector<std::string> per;
    for (const auto& d : g->runs.front()->disruptions) {
      auto it = std::find_if(d.figures.begin(), d.figures.end(), [](const auto& f) { return f.first == "duplicates"; });
      per.push_back(fmt::format("{} {}", d.what.rfind("kill", 0) == 0 ? "kill" : "PG restart",
                                it == d.figures.end() ? std::string("?") : thousands(it->second)));
    }
    r.findings.push_back(fmt::format(
        "{}: {} (event, endpoint) pairs expected on the 3 healthy endpoints over {:.0f} s of load, {} received, lost {:.0f} "
        "(not received {:.0f} s after the load; must be 0: {}; the last delivery came {:.1f} s after the load); "
        "duplicate 2xx deliveries {} in total (runs: {}; first run by crash: {}); worst kill {} (target ≤ {:.0f} = {}×{} in "
        "flight + 250 ms of {:.0f} deliveries/s: {}); max slot lag {:.2f} s / {:.2f} MiB over the run, {:.2f} s outside the "
        "crash windows (kill or PostgreSQL stop until 1 s after walhook streams again; target ≤ 1 s: {})",
        v.name, thousands(median_extra(*g, "expected_pairs")), median_extra(*g, "load_s"), thousands(median_extra(*g, "received_pairs")),
        lost, seconds(drain_bound), met(lost == 0), median_extra(*g, "last_delivery_after_load_s"), thousands(median_extra(*g, "duplicates")), per_run(*g, [](const trial_result& t) { return static_cast<double>(t.duplicates); }),
        fmt::join(per, ", "), thousands(worst), bound, 3, o.max_concurrency, deliveries_per_s, met(worst <= bound),
        median_of(*g, [](const trial_result& t) { return t.max_slot_lag_s; }),
        median_of(*g, [](const trial_result& t) { return static_cast<double>(t.max_slot_lag_bytes); }) / 1048576.0, lag_s,
        met(lag_s >= 0 && lag_s <= 1.0)));
  }
  return r;
}

// ------------------------------------------------------------------ pg-restart

scenario_report pg_restart_report(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "pg-restart";
  auto relays = walhook_only(o, r);
  if (relays.empty()) return r;
  if (!runner.cluster().embedded()) {
    r.findings.push_back("pg-restart skipped: it restarts PostgreSQL, which only the throwaway cluster allows (run without "
                         "--database-url)");
    return r;
  }
  struct variant {
    workload w;
    int restarts = 1;
    bool idle = false;
  };
  auto make = [&](double rate, int restarts, bool record_all) {
    variant v;
    v.restarts = restarts;
    v.idle = rate <= 0;
    auto& w = v.w;
    w.variant = v.idle ? fmt::format("idle, {} × restart -m {}", restarts, o.restart_mode)
                       : fmt::format("{}, {} × restart -m {}{}", rate_label(rate), restarts, o.restart_mode,
                                     record_all ? ", --record=all (state-store writes in flight)" : "");
    w.warmup = o.warmup;
    // Ended by the controller after the last restart; the bound allows 2 min per restart.
    w.schedule = {{o.warmup + (o.restart_streaming + 120000ms) * (restarts + 1), rate}};
    w.payload_bytes = o.payload_bytes;
    w.connections = o.connections;
    w.endpoints = make_endpoints(2, 1, o.max_concurrency);
    w.tenants = 2;
    w.drain = drain_bound;
    // Every delivery written to walhook.deliveries: the state store has writes outstanding when
    // a fast shutdown terminates walhook's sessions, which is when the walsender waits for a
    // confirmation that does not come (wal_sender_timeout).
    if (record_all) w.walhook_args = {"--record=all"};
    return v;
  };
  // The --record=all variant restarts as often as the main one: whether the stop hangs depends on
  // what is in flight at that instant (with walhook 81e449c: 0.2 s and 61 s in one run).
  const std::vector<variant> variants{make(o.restart_rate, o.restarts, false), make(o.restart_rate, o.restarts, true),
                                      make(0, 1, false)};
  std::vector<workload> ws;
  for (const auto& v : variants) ws.push_back(v.w);
  auto make_control = [&o, &variants](const workload& w) -> controller {
    const int restarts =
        std::find_if(variants.begin(), variants.end(), [&](const variant& v) { return v.w.variant == w.variant; })->restarts;
    struct state {
      int done = 0;
      std::int64_t next_us = 0, stop_us = 0;
      std::vector<std::int64_t> began_us, accepting_us;
    };
    auto st = std::make_shared<state>();
    return [st, restarts, &o](trial_control& c) {
      const std::int64_t now = system_now_us();
      if (c.final) {
        const auto requests = c.receiver.requests();
        for (std::size_t i = 0; i < st->accepting_us.size() && i < c.result.disruptions.size(); ++i) {
          std::int64_t first = std::numeric_limits<std::int64_t>::max();
          for (const auto& q : requests)
            if (q.received_at_us >= st->accepting_us[i] && q.received_at_us < first) first = q.received_at_us;
          if (first != std::numeric_limits<std::int64_t>::max())
            c.result.disruptions[i].set("first_delivery_after_accepting_s", seconds_between(st->accepting_us[i], first));
        }
        std::unordered_set<std::string> paths;
        for (const auto& e : c.endpoints) paths.insert(e.path);
        std::int64_t before = 0;
        auto dups = duplicates_by_disruption(requests, paths, st->began_us, before);
        for (std::size_t i = 0; i < dups.size() && i < c.result.disruptions.size(); ++i)
          c.result.disruptions[i].set("duplicates", static_cast<double>(dups[i]));
        c.result.extra["duplicates_before_first_restart"] = static_cast<double>(before);
        return;
      }
      if (!st->next_us) st->next_us = c.result.start_us + (o.warmup + o.restart_streaming).count() * 1000;
      if (st->stop_us) {
        if (now >= st->stop_us) c.stop = true;
        return;
      }
      if (st->done >= restarts || now < st->next_us) return;
      const std::string slot = c.relay.slot();
      const std::int64_t failed0 = c.generator.failed_transactions();
      const std::int64_t t0 = system_now_us();
      c.cluster.stop_server(o.restart_mode);
      const std::int64_t t1 = system_now_us();
      if (!c.cluster.start_server()) throw std::runtime_error("PostgreSQL did not start again");
      const std::int64_t t2 = system_now_us();
      const std::int64_t streaming = wait_streaming(c.conninfo, slot, 0, 120s);
      disruption d{fmt::format("PostgreSQL restart -m {}", o.restart_mode), seconds_between(c.result.start_us, t0), {}};
      d.set("stop_s", seconds_between(t0, t1));
      d.set("start_s", seconds_between(t1, t2));
      d.set("restart_s", seconds_between(t0, t2));
      d.set("slot_active_after_accepting_s", streaming > 0 ? seconds_between(t2, streaming) : -1);
      d.set("failed_commits", static_cast<double>(c.generator.failed_transactions() - failed0));
      c.result.disruptions.push_back(d);
      st->began_us.push_back(t0);
      st->accepting_us.push_back(t2);
      ++st->done;
      st->next_us = (streaming > 0 ? streaming : system_now_us()) + o.restart_streaming.count() * 1000;
      if (st->done >= restarts) st->stop_us = st->next_us;
    };
  };
  run_all(r, runner, o, ws, relays, make_control);

  for (auto& t : r.trials) {
    std::int64_t lost = 0;
    for (const auto& ob : t.observations)
      if (ob.receipt_us < 0) ++lost;
    t.extra["lost"] = static_cast<double>(lost);
    t.extra["duplicates"] = static_cast<double>(t.duplicates);
    t.extra["failed_commits"] = static_cast<double>(t.failed_txns);
    t.extra["load_s"] = seconds(o.warmup) + t.window_s;
  }
  auto groups = group_trials(r);
  for (const auto& v : variants) {
    const auto& w = v.w;
    const auto* g = find_group(groups, w.variant, "walhook");
    if (!g) continue;
    const bool idle = v.idle;
    for (const auto* t : g->runs)
      for (std::size_t i = 0; i < t->disruptions.size(); ++i) {
        const auto& d = t->disruptions[i];
        auto fig = [&](const char* key) {
          auto it = std::find_if(d.figures.begin(), d.figures.end(), [&](const auto& f) { return f.first == key; });
          return it == d.figures.end() ? -1.0 : it->second;
        };
        const double restart = fig("restart_s"), active = fig("slot_active_after_accepting_s");
        const double first = fig("first_delivery_after_accepting_s");
        r.findings.push_back(fmt::format(
            "{} run {}, restart {}: the server took {:.2f} s to stop and {:.2f} s to start = {:.2f} s (target < 2 s: {}); "
            "walhook streamed again {:.2f} s after it accepted connections{} (target ≤ 1 s: {})",
            idle ? "walhook idle (reference)" : w.variant, t->run + 1, i + 1, fig("stop_s"), fig("start_s"), restart,
            met(restart >= 0 && restart < 2), active,
            first >= 0 ? fmt::format(", first delivery after {:.2f} s", first) : std::string(idle ? " (no load: no delivery)" : ", no delivery after it"),
            met(active >= 0 && active <= 1 && (idle || (first >= 0 && first <= 1)))));
      }
    if (!idle) {
      const double lost = median_extra(*g, "lost");
      r.findings.push_back(fmt::format("{}: over the whole run ({:.0f} s of load) {} duplicates, lost {:.0f} (not received {:.0f} s "
                                       "after the load; must be 0: {}), {} commits failed while the server was stopping or down "
                                       "— medians of {} run(s)",
                                       w.variant, median_extra(*g, "load_s"), thousands(median_extra(*g, "duplicates")), lost,
                                       seconds(drain_bound), met(lost == 0), thousands(median_extra(*g, "failed_commits")),
                                       g->runs.size()));
    }
  }
  return r;
}

}  // namespace

scenario_report catchup(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "catchup";
  auto relays = walhook_only(o, r);
  if (relays.empty()) return r;
  for (const auto& from : o.catchup_from) {
    if (from == "slot") catchup_from_slot(r, runner, o, relays);
    else if (from == "table") catchup_from_table(r, runner, o, relays);
    else throw std::runtime_error("--catchup-from: slot or table, not " + from);
  }
  return r;
}

scenario_report crash_hung(trial_runner& runner, const scenario_options& o) { return crash_hung_report(runner, o); }
scenario_report pg_restart(trial_runner& runner, const scenario_options& o) { return pg_restart_report(runner, o); }

}  // namespace walhook::bench
