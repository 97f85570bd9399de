#include "bench/endpoint_scale.hpp"

#include "bench/admin_metrics.hpp"
#include "bench/proc_stats.hpp"
#include "bench/scenario_support.hpp"
#include "relay/demo/embedded_postgres.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

namespace walhook::bench {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

/// What a bad endpoint does in the bad variant (in the control run every endpoint answers at once).
enum class endpoint_kind { healthy, failing, slow, hung };
constexpr endpoint_kind bad_kinds[] = {endpoint_kind::failing, endpoint_kind::slow, endpoint_kind::hung};

const char* kind_name(endpoint_kind k) {
  switch (k) {
    case endpoint_kind::healthy: return "healthy";
    case endpoint_kind::failing: return "failing";
    case endpoint_kind::slow: return "slow";
    case endpoint_kind::hung: return "hung";
  }
  return "?";
}

std::string without_space(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

/// Names pg_stat_statements rows: the first needle found in the statement's text (whitespace
/// removed) wins. Needles avoid literals, which pg_stat_statements shows as $n; they come from
/// sql/statements/*.sql and from the bench's own queries.
struct statement_class {
  const char* label;
  const char* needle;
};
constexpr statement_class statement_classes[] = {
    {"bench", "walhook-bench"},          // this scenario's probes (tagged with a comment)
    {"bench", "pg_stat_replicationr"},   // the trial's sampler
    {"claim_due", "ASx(endpoint_idbigint,nint,orderedboolean)"},  // claim_due.sql
    {"next_due", "FROMunnest($1::bigint[])ASe(id)"},              // next_due.sql
    {"delivery_writes", "INSERTINTOwalhook.deliveriesASd"},       // upsert_deliveries.sql
    {"delivery_writes", "ordint,idbigint,endpoint_idbigint"},     // update_deliveries.sql
    {"health_writes", "INSERTINTOwalhook.endpoint_healthASh"},    // write_health.sql
    {"progress_writes", "INSERTINTOwalhook.slot_progressASp"},    // record_progress.sql
    {"application", "INSERTINTOwalhook.outbox"},                  // the generator's transaction
};
/// What the report shows per trial: calls and total execution time of each (and claim_due's rows);
/// "other" is every other statement of the trial's database (walhook's other reads and its
/// BEGIN/COMMITs, the polling relays' queries).
constexpr const char* reported_classes[] = {"claim_due", "next_due", "delivery_writes", "health_writes", "progress_writes", "other"};

struct statement_cost {
  double calls = 0, ms = 0, rows = 0;
};

/// What the probe gathers while a trial runs (on the bench's main thread, from the controller).
struct scale_probe {
  std::unique_ptr<relay::blocking_db> db;
  bool started = false;
  bool pgss = false;  ///< pg_stat_statements could be reset at the start
  std::string pgss_error;
  double next_sample_s = 0;
  int samples = 0;
  bool postgres_local = false;
  /// Backends of walhook's state connection(s): pid → (CPU s when first seen, latest CPU s).
  std::map<pid_t, std::pair<double, double>> state_cpu;
  std::vector<std::pair<double, long>> hwm;  ///< (s since the load started, walhook's VmHWM KiB)
  std::int64_t max_pending = 0, max_sending = 0, last_pending = -1, last_sending = -1;
  // walhook's gauges, scraped every 5 s while the load runs: attempts in flight in all and those
  // of the bad endpoints (their ids), deliveries waiting in memory.
  int admin_port = 0;
  std::vector<std::string> bad_in_flight_keys;  ///< walhook_endpoint_in_flight{endpoint="<id>"} of the bad endpoints
  int scrapes = 0;
  double in_flight_sum = 0, in_flight_max = 0, bad_in_flight_sum = 0, queued_max = 0;
  std::int64_t drain_end_us = 0;
};

void probe_sample(scale_probe& st, trial_control& c) {
  st.hwm.emplace_back(c.elapsed_s, c.relay.peak_rss_kib());
  try {
    if (!st.db) st.db = std::make_unique<relay::blocking_db>(c.conninfo, "walhook-bench-scale");
    if (st.postgres_local) {
      auto r = st.db->exec("SELECT pid FROM pg_stat_activity /* walhook-bench */ "
                           "WHERE datname = current_database() AND application_name LIKE 'walhook-state%'");
      for (int i = 0; i < r.rows(); ++i) {
        const auto pid = static_cast<pid_t>(std::stol(std::string(r.value(i, 0))));
        const double cpu = process_cpu_seconds(pid);
        if (cpu <= 0) continue;
        // Seen at the first sample: its CPU so far was spent before the load. Later: a new
        // connection (a reconnect), all of whose CPU belongs to the trial.
        auto [it, fresh] = st.state_cpu.try_emplace(pid, st.samples == 0 ? cpu : 0.0, cpu);
        if (!fresh) it->second.second = cpu;
      }
    }
    if (st.samples % 5 == 0 || c.final) {
      auto r = st.db->exec("SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'sending') "
                           "FROM walhook.deliveries /* walhook-bench */");
      st.last_pending = std::stoll(std::string(r.value(0, 0)));
      st.last_sending = std::stoll(std::string(r.value(0, 1)));
      st.max_pending = std::max(st.max_pending, st.last_pending);
      st.max_sending = std::max(st.max_sending, st.last_sending);
    }
  } catch (const std::exception&) {
    st.db.reset();  // a sample missed; reconnect at the next one
  }
  if (st.admin_port > 0 && st.samples % 5 == 0 && !c.final && c.relay.kind() == relay_kind::walhook) {
    auto m = scrape_metrics(st.admin_port);
    if (auto it = m.find("walhook_in_flight"); it != m.end()) {
      double bad = 0;
      for (const auto& k : st.bad_in_flight_keys)
        if (auto b = m.find(k); b != m.end()) bad += b->second;
      ++st.scrapes;
      st.in_flight_sum += it->second;
      st.in_flight_max = std::max(st.in_flight_max, it->second);
      st.bad_in_flight_sum += bad;
      if (auto q = m.find("walhook_queued"); q != m.end()) st.queued_max = std::max(st.queued_max, q->second);
    }
  }
  ++st.samples;
}

/// pg_stat_statements of the trial's database by class; empty if not available.
std::map<std::string, statement_cost> statement_costs(relay::blocking_db& db) {
  std::map<std::string, statement_cost> out;
  auto r = db.exec("SELECT query, calls, total_exec_time, rows FROM pg_stat_statements /* walhook-bench */ "
                   "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())");
  for (int i = 0; i < r.rows(); ++i) {
    const std::string text = without_space(r.value(i, 0));
    std::string label = "other";
    for (const auto& sc : statement_classes)
      if (text.find(sc.needle) != std::string::npos) {
        label = sc.label;
        break;
      }
    auto& cost = out[label];
    cost.calls += std::strtod(std::string(r.value(i, 1)).c_str(), nullptr);
    cost.ms += std::strtod(std::string(r.value(i, 2)).c_str(), nullptr);
    cost.rows += std::strtod(std::string(r.value(i, 3)).c_str(), nullptr);
  }
  return out;
}

}  // namespace

std::vector<std::string> endpoint_scale_cluster_settings() { return {"shared_preload_libraries=pg_stat_statements"}; }

scenario_report endpoint_scale(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "endpoint-scale";
  std::vector<relay_kind> relays;
  if (o.relays_given) relays = o.relays;
  else relays = {relay_kind::walhook};  // walhook is what this scenario is about; --relay adds the others

  const int tenants = std::max(1, o.scale_tenants);
  const int per_tenant = std::max(1, o.scale_endpoints_per_tenant);
  const int fanout = std::clamp(o.scale_fanout, 1, per_tenant);
  if (per_tenant % fanout != 0)
    throw std::runtime_error("--scale-fanout must divide --scale-endpoints-per-tenant");
  const int n = tenants * per_tenant;
  const int types = per_tenant / fanout;  // endpoint l of a tenant takes event type l mod types
  const int bad = static_cast<int>(std::llround(std::clamp(o.scale_bad, 0.0, 1.0) * n));

  // Bad endpoints spread evenly over the endpoints (0, n/bad, 2n/bad, …: with the defaults the
  // first endpoint of every tenant), a third of each kind in turn.
  std::vector<endpoint_kind> kinds(static_cast<std::size_t>(n), endpoint_kind::healthy);
  int count[4] = {0, 0, 0, 0};
  for (int j = 0; j < bad; ++j) {
    const auto i = static_cast<std::size_t>(static_cast<long long>(j) * n / bad);
    kinds[i] = bad_kinds[j % 3];
  }
  for (auto k : kinds) ++count[static_cast<int>(k)];

  std::vector<std::string> event_types;
  if (types == 1) event_types = {"order.created"};
  else
    for (int t = 0; t < types; ++t) event_types.push_back(fmt::format("order.type-{}", t));

  const int admin_port = relay::free_tcp_port();
  const std::int64_t warmup_us = o.warmup.count() * 1000, measure_us = o.scale_measure.count() * 1000;
  const std::string bad_variant =
      fmt::format("{} endpoints, {} bad ({} × 500, {} × {:.1f} s, {} × hung)", thousands(n), thousands(bad),
                  count[static_cast<int>(endpoint_kind::failing)], count[static_cast<int>(endpoint_kind::slow)],
                  static_cast<double>(o.scale_slow.count()) / 1000.0, count[static_cast<int>(endpoint_kind::hung)]);
  const std::string control_variant = fmt::format("{} endpoints, all answer at once (control)", thousands(n));

  auto make = [&](bool with_bad) {
    workload w;
    w.variant = with_bad ? bad_variant : control_variant;
    w.warmup = o.warmup;
    w.schedule = {{o.warmup + o.scale_measure, o.scale_rate}};
    w.payload_bytes = o.payload_bytes;
    w.connections = o.connections;
    w.tenants = tenants;
    w.event_types = event_types;
    for (int i = 0; i < n; ++i) {
      endpoint_spec e;
      e.path = fmt::format("/ep/{}", i);
      e.tenant = static_cast<std::size_t>(i / per_tenant);
      if (types > 1) e.event_type = static_cast<std::size_t>((i % per_tenant) % types);
      e.max_concurrency = o.max_concurrency;
      const auto k = kinds[static_cast<std::size_t>(i)];
      e.measured = k == endpoint_kind::healthy;  // the healthy set is the same in both variants
      if (with_bad && k == endpoint_kind::failing) e.behaviour.status = 500;
      if (with_bad && k == endpoint_kind::slow) e.behaviour.delay = o.scale_slow;
      if (with_bad && k == endpoint_kind::hung) e.behaviour.never = true;
      w.endpoints.push_back(e);
    }
    w.drain = 30s;
    if (admin_port > 0) w.walhook_args = {fmt::format("--admin-listen=127.0.0.1:{}", admin_port)};
    return w;
  };
  std::vector<workload> ws{make(true)};
  if (o.scale_control) ws.push_back(make(false));

  auto make_control = [&](const workload& w) -> controller {
    auto st = std::make_shared<scale_probe>();
    std::unordered_map<std::string, endpoint_kind> kind_of;
    for (int i = 0; i < n; ++i)
      if (kinds[static_cast<std::size_t>(i)] != endpoint_kind::healthy)
        kind_of.emplace(w.endpoints[static_cast<std::size_t>(i)].path, kinds[static_cast<std::size_t>(i)]);
    const bool bad_variant_run = w.variant == bad_variant;
    return [st, kind_of = std::move(kind_of), bad_variant_run, admin_port, warmup_us, measure_us](trial_control& c) {
      if (!st->started) {
        st->started = true;
        st->postgres_local = c.cluster.postmaster_pid() > 0;
        st->admin_port = admin_port;
        for (const auto& e : c.endpoints)
          if (kind_of.contains(e.path)) st->bad_in_flight_keys.push_back(fmt::format("walhook_endpoint_in_flight{{endpoint=\"{}\"}}", e.id));
        try {
          st->db = std::make_unique<relay::blocking_db>(c.conninfo, "walhook-bench-scale");
          st->db->exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements /* walhook-bench */");
          st->db->exec("SELECT pg_stat_statements_reset() /* walhook-bench */");
          st->pgss = true;
        } catch (const std::exception& e) {
          st->pgss_error = e.what();
        }
      }
      if (!c.final) {
        if (c.elapsed_s >= st->next_sample_s) {
          probe_sample(*st, c);
          st->next_sample_s += 1.0;
        }
        return;
      }
      st->drain_end_us = system_now_us();
      probe_sample(*st, c);
      auto& x = c.result.extra;
      x["drain_ended_at_s"] = static_cast<double>(st->drain_end_us - c.result.start_us) / 1e6;
      if (st->scrapes > 0) {
        // The process-wide cap on attempts in flight (--max-in-flight) is shared by all endpoints.
        x["walhook_in_flight_mean"] = st->in_flight_sum / st->scrapes;
        x["walhook_in_flight_max"] = st->in_flight_max;
        x["walhook_in_flight_bad_endpoints_mean"] = st->bad_in_flight_sum / st->scrapes;
        x["walhook_queued_max"] = st->queued_max;
      }

      // Memory as the run goes on: walhook's peak RSS after a third, two thirds and all of it.
      const double load_s = static_cast<double>(warmup_us + measure_us) / 1e6;
      auto hwm_at = [&](double t_s) {
        long v = 0;
        for (const auto& [t, kib] : st->hwm)
          if (t <= t_s) v = std::max(v, kib);
        return static_cast<double>(v) / 1024.0;
      };
      if (c.relay.kind() == relay_kind::walhook) {
        x["rss_walhook_mib_at_1_3"] = hwm_at(load_s / 3);
        x["rss_walhook_mib_at_2_3"] = hwm_at(2 * load_s / 3);
        x["rss_walhook_mib_at_end"] = static_cast<double>(c.result.rss_relay_kib) / 1024.0;
      }

      // The receiver's view: deliveries to every endpoint, attempts per kind of endpoint.
      const auto requests = c.receiver.requests();
      const std::int64_t from_us = c.result.start_us + warmup_us, to_us = from_us + measure_us;
      std::unordered_set<std::string> seen;
      seen.reserve(requests.size() * 2);
      std::int64_t ok_all = 0, ok_window = 0;
      std::map<endpoint_kind, std::int64_t> attempts, ok;
      for (const auto& q : requests) {
        auto k = kind_of.find(q.path);
        const endpoint_kind kind = k == kind_of.end() ? endpoint_kind::healthy : k->second;
        ++attempts[kind];
        if (q.status < 200 || q.status >= 300 || !seen.insert(q.webhook_id + " " + q.path).second) continue;
        ++ok[kind];
        ++ok_all;
        if (q.received_at_us >= from_us && q.received_at_us < to_us) ++ok_window;
      }
      x["deliveries_per_s_all_endpoints"] = static_cast<double>(ok_window) * 1e6 / static_cast<double>(measure_us);
      x["deliveries_all_endpoints"] = static_cast<double>(ok_all);
      x["attempts_all_endpoints"] = static_cast<double>(requests.size());
      if (bad_variant_run)
        for (auto kind : bad_kinds) {
          x[fmt::format("bad_{}_attempts", kind_name(kind))] = static_cast<double>(attempts[kind]);
          if (kind == endpoint_kind::slow) x["bad_slow_delivered"] = static_cast<double>(ok[kind]);
          std::size_t peak = 0;
          for (const auto& [path, kk] : kind_of)
            if (kk == kind) peak = std::max(peak, c.receiver.max_concurrent(path));
          if (kind != endpoint_kind::failing) x[fmt::format("bad_{}_peak_concurrency", kind_name(kind))] = static_cast<double>(peak);
        }

      // CPU per delivery (load + drain; deliveries to every endpoint, warm-up included alike).
      const double per = ok_all > 0 ? 1e6 / static_cast<double>(ok_all) : 0;
      x["cpu_relay_us_per_delivery"] = c.result.cpu_relay * per;
      x["cpu_relay_us_per_attempt"] = requests.empty() ? 0 : c.result.cpu_relay * 1e6 / static_cast<double>(requests.size());
      x["cpu_postgres_us_per_delivery"] = c.result.cpu_postgres >= 0 ? c.result.cpu_postgres * per : -1;

      // walhook's state connection's backend(s): every claim, write and read walhook sends.
      if (st->postgres_local && c.relay.kind() == relay_kind::walhook) {
        double cpu = 0;
        for (const auto& [pid, v] : st->state_cpu) cpu += v.second - v.first;
        x["state_backend_cpu_s"] = cpu;
        x["state_backend_cpu_us_per_delivery"] = cpu * per;
      }
      if (c.relay.kind() == relay_kind::walhook) {
        x["deliveries_table_pending_max"] = static_cast<double>(st->max_pending);
        x["deliveries_table_pending_at_end"] = static_cast<double>(st->last_pending);
        x["deliveries_table_sending_max"] = static_cast<double>(st->max_sending);
      }

      // The statements' cost, PostgreSQL-side.
      if (st->pgss && st->db) {
        try {
          auto costs = statement_costs(*st->db);
          for (const char* label : reported_classes) {
            const auto& cost = costs[label];
            x[fmt::format("pgss_{}_calls", label)] = cost.calls;
            x[fmt::format("pgss_{}_ms", label)] = cost.ms;
          }
          x["pgss_claim_due_rows"] = costs["claim_due"].rows;
          x["pgss_application_ms"] = costs["application"].ms;
        } catch (const std::exception& e) {
          st->pgss_error = e.what();
        }
      }
      if (!st->pgss_error.empty())
        c.result.notes.push_back("pg_stat_statements not available (statement costs not reported): " + st->pgss_error);

      // walhook's own counters.
      if (c.relay.kind() == relay_kind::walhook && admin_port > 0) {
        auto m = scrape_metrics(admin_port);
        if (m.empty()) c.result.notes.push_back(fmt::format("/metrics on 127.0.0.1:{} could not be read", admin_port));
        for (const char* name : {"claimed", "spilled", "failed_attempts", "marked_sending", "dead", "attempts", "delivered"})
          if (auto it = m.find(fmt::format("walhook_{}_total", name)); it != m.end()) x[fmt::format("metrics_{}", name)] = it->second;
      }
      st->db.reset();  // before the trial drops its database
    };
  };
  run_all(r, runner, o, ws, relays, make_control);

  for (auto& t : r.trials) {
    // One figure for the bad endpoints' peak concurrency (above) instead of one per endpoint.
    std::erase_if(t.extra, [](const auto& kv) { return kv.first.rfind("peak_concurrency:", 0) == 0; });
    // The healthy endpoints' tail in the first and the last third of the measured window: does
    // it grow as the bad endpoints' work piles up in walhook.deliveries? A delivery that never
    // arrived counts as drain end − commit (a lower bound), as in the trial's own percentiles.
    const std::int64_t from = t.start_us + warmup_us, third = measure_us / 3;
    const auto drain_end_us = t.start_us + static_cast<std::int64_t>(extra_or(t, "drain_ended_at_s", 0) * 1e6);
    for (int part : {0, 2}) {
      std::vector<double> ms;
      std::size_t missing = 0;
      for (const auto& ob : t.observations) {
        if (ob.scheduled_us < from + part * third || ob.scheduled_us >= from + (part + 1) * third) continue;
        if (ob.receipt_us < 0) ++missing;
        ms.push_back(static_cast<double>((ob.receipt_us >= 0 ? ob.receipt_us : drain_end_us) - ob.commit_us) / 1000.0);
      }
      auto s = summarize(std::move(ms), missing);
      const std::string which = part == 0 ? "first_third" : "last_third";
      t.extra["healthy_p99_ms_" + which] = s.p99;
      t.extra["healthy_undelivered_" + which] = static_cast<double>(missing);
    }
  }

  auto groups = group_trials(r);
  for (auto kind : relays) {
    const auto* with = find_group(groups, bad_variant, to_string(kind));
    const auto* without = find_group(groups, control_variant, to_string(kind));
    if (!with) continue;
    auto p = [](const trial_group& g, double latency_stats::*m) {
      return median_of(g, [m](const trial_result& t) { return t.commit_to_receipt.*m; });
    };
    const double p50 = p(*with, &latency_stats::p50), p99 = p(*with, &latency_stats::p99);
    std::string line = fmt::format("{}: {} healthy endpoints' p50 {:.2f} ms, p99 {:.2f} ms with {} bad", to_string(kind),
                                   thousands(count[0]), p50, p99, thousands(bad));
    if (without) {
      const double c50 = p(*without, &latency_stats::p50), c99 = p(*without, &latency_stats::p99);
      line += fmt::format(" vs {:.2f} / {:.2f} ms when all answer at once: p99 {:.2f}× (noisy-neighbour's target ≤ 1.2×: {})", c50,
                          c99, p99 / std::max(c99, 1e-6), met(p99 <= 1.2 * c99));
    }
    line += fmt::format("; p99 in the first / last third of the run {:.2f} / {:.2f} ms ({:.0f} / {:.0f} never delivered)",
                        median_extra(*with, "healthy_p99_ms_first_third"), median_extra(*with, "healthy_p99_ms_last_third"),
                        median_extra(*with, "healthy_undelivered_first_third"), median_extra(*with, "healthy_undelivered_last_third"));
    if (median_extra(*with, "walhook_in_flight_mean") >= 0)
      line += fmt::format("; walhook's attempts in flight {:.0f} on average (max {:.0f}), {:.0f} of them to bad endpoints",
                          median_extra(*with, "walhook_in_flight_mean"), median_extra(*with, "walhook_in_flight_max"),
                          median_extra(*with, "walhook_in_flight_bad_endpoints_mean"));
    r.findings.push_back(line);
    for (const auto* g : {with, without}) {
      if (!g) continue;
      std::string cost = fmt::format(
          "{} / {}: {:.0f} deliveries/s to all endpoints; relay CPU {:.0f} µs per delivery ({:.0f} per attempt), PostgreSQL {:.0f} "
          "µs per delivery",
          g->variant, g->relay, median_extra(*g, "deliveries_per_s_all_endpoints"), median_extra(*g, "cpu_relay_us_per_delivery"),
          median_extra(*g, "cpu_relay_us_per_attempt"), median_extra(*g, "cpu_postgres_us_per_delivery"));
      if (g->relay == "walhook")
        cost += fmt::format("; peak RSS {:.0f} MiB after a third of the load, {:.0f} after two thirds, {:.0f} at the end",
                            median_extra(*g, "rss_walhook_mib_at_1_3"), median_extra(*g, "rss_walhook_mib_at_2_3"),
                            median_extra(*g, "rss_walhook_mib_at_end"));
      r.findings.push_back(cost);
      if (g->relay != "walhook") continue;
      std::string claims = fmt::format("{} / walhook, claim loop: ", g->variant);
      if (median_extra(*g, "pgss_claim_due_calls") >= 0)
        claims += fmt::format(
            "{:.0f} claim queries ({:.0f} rows) taking {:.0f} ms in all ({:.2f} ms each), {:.0f} due-time queries taking {:.0f} ms; "
            "delivery writes {:.0f} calls, {:.0f} ms (pg_stat_statements, execution time); ",
            median_extra(*g, "pgss_claim_due_calls"), median_extra(*g, "pgss_claim_due_rows"), median_extra(*g, "pgss_claim_due_ms"),
            median_extra(*g, "pgss_claim_due_ms") / std::max(1.0, median_extra(*g, "pgss_claim_due_calls")),
            median_extra(*g, "pgss_next_due_calls"), median_extra(*g, "pgss_next_due_ms"),
            median_extra(*g, "pgss_delivery_writes_calls"), median_extra(*g, "pgss_delivery_writes_ms"));
      claims += fmt::format("state connection's backend {:.2f} CPU-s ({:.0f} µs per delivery); walsender {:.2f} CPU-s; "
                            "walhook.deliveries: {:.0f} pending at most, {:.0f} at the end",
                            median_extra(*g, "state_backend_cpu_s"), median_extra(*g, "state_backend_cpu_us_per_delivery"),
                            median_of(*g, [](const trial_result& t) { return t.cpu_walsender; }),
                            median_extra(*g, "deliveries_table_pending_max"), median_extra(*g, "deliveries_table_pending_at_end"));
      r.findings.push_back(claims);
    }
  }
  return r;
}

}  // namespace walhook::bench
