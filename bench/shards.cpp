#include "bench/shards.hpp"

#include "bench/admin_metrics.hpp"
#include "bench/proc_stats.hpp"
#include "bench/scenario_support.hpp"
#include "relay/core/shard.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace walhook::bench {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

std::string shard_label(int n) { return n == 1 ? "1 shard (unsharded)" : fmt::format("{} shards", n); }

/// The shard of every tenant (tenant-0 … tenant-(tenants−1)) with `n` shards, asked from
/// PostgreSQL with walhook's own predicate (relay::shard_predicate, the publications' row filter).
std::vector<int> tenant_shards(relay::blocking_db& db, int tenants, int n) {
  std::vector<int> out(static_cast<std::size_t>(tenants), -1);
  for (int k = 0; k < n; ++k) {
    auto r = db.exec(fmt::format("SELECT g FROM generate_series(0, $1::int - 1) AS g /* walhook-bench */ WHERE {}",
                                 relay::shard_predicate({k, n}, "('tenant-' || g)")),
                     pg::params{std::to_string(tenants)});
    for (int i = 0; i < r.rows(); ++i) out[static_cast<std::size_t>(std::stoi(std::string(r.value(i, 0))))] = k;
  }
  if (std::find(out.begin(), out.end(), -1) != out.end())
    throw std::runtime_error(fmt::format("a tenant belongs to none of the {} shards", n));
  return out;
}

/// The PostgreSQL backends whose CPU the probe tells apart (pg_stat_activity's backend_type and
/// application_name). CPU of the server that none of them accounts for (the postmaster, processes
/// that came and went between two samples) is "unattributed".
constexpr const char* backend_roles[] = {"walsenders", "walhook_state", "walhook_other", "generator", "bench", "autovacuum",
                                         "background", "other"};

std::string role_of(std::string_view backend_type, std::string_view application) {
  if (backend_type == "walsender") return "walsenders";
  if (application.starts_with("walhook-state")) return "walhook_state";  // claims, writes, progress, reads
  if (application.starts_with("walhook-bench-generator")) return "generator";  // the application's inserts
  if (application.starts_with("walhook-bench")) return "bench";
  if (application.starts_with("walhook")) return "walhook_other";  // the leadership lock's session
  if (backend_type.starts_with("autovacuum")) return "autovacuum";
  if (backend_type == "checkpointer" || backend_type == "background writer" || backend_type == "walwriter") return "background";
  return "other";
}

/// One PostgreSQL backend as the probe saw it.
struct backend_cpu {
  std::string role;
  int shard = -1;     ///< walsenders: the shard whose slot it streams
  double base = 0;    ///< its CPU s when first seen if that was at the load's start, else 0 (it started during the trial)
  double latest = 0;  ///< its CPU s at the latest sample
};

/// What the probe gathers while a trial runs (on the bench's main thread, from the controller).
struct shard_probe {
  bool started = false;
  bool postgres_local = false;
  std::unique_ptr<relay::blocking_db> db;
  std::vector<std::string> slots;  ///< shard K's slot at K
  std::map<pid_t, backend_cpu> backends;
  std::vector<double> walhook_cpu0;  ///< every walhook process's CPU at the load's start
  double next_sample_s = 0;
  int samples = 0;
  double load_at_start = -1;
  // backlog
  bool relay_started = false;
  std::int64_t relay_start_us = 0;
  double backlog_events = 0;
};

/// Reads the CPU of every backend of the server (/proc/<pid>/stat utime + stime), each
/// walsender with the shard of its slot (pg_replication_slots.active_pid).
void sample_backends(shard_probe& st, trial_control& c) {
  if (!st.postgres_local) return;
  try {
    if (!st.db) st.db = std::make_unique<relay::blocking_db>(c.conninfo, "walhook-bench-shards");
    auto r = st.db->exec("SELECT a.pid, coalesce(a.backend_type, ''), coalesce(a.application_name, ''), coalesce(s.slot_name, '') "
                         "FROM pg_stat_activity a LEFT JOIN pg_replication_slots s ON s.active_pid = a.pid /* walhook-bench */");
    for (int i = 0; i < r.rows(); ++i) {
      const auto pid = static_cast<pid_t>(std::stol(std::string(r.value(i, 0))));
      const double cpu = process_cpu_seconds(pid);
      if (cpu <= 0) continue;
      auto [b, fresh] = st.backends.try_emplace(pid);
      if (fresh) {
        b->second.role = role_of(r.value(i, 1), r.value(i, 2));
        b->second.base = st.samples == 0 ? cpu : 0.0;
      }
      b->second.latest = cpu;
      const std::string slot(r.value(i, 3));
      if (auto it = std::find(st.slots.begin(), st.slots.end(), slot); it != st.slots.end() && !slot.empty())
        b->second.shard = static_cast<int>(it - st.slots.begin());
    }
  } catch (const std::exception&) {
    st.db.reset();  // a sample missed; reconnect at the next one
  }
  ++st.samples;
}

struct shard_set {
  std::unordered_set<long long> endpoints;  ///< ids of the shard's tenants' endpoints
  std::int64_t events = 0;                  ///< events committed for its tenants
  std::int64_t received = 0;                ///< distinct 2xx deliveries to its endpoints
};

/// The final reading: walsender and walhook CPU, memory, and every shard's own view (/metrics)
/// against what it should have had.
void final_figures(shard_probe& st, trial_control& c, const std::vector<int>& shard_of_tenant) {
  sample_backends(st, c);  // walhook still streams: the walsenders are alive
  auto& x = c.result.extra;
  const int n = static_cast<int>(st.slots.size());
  const double events = static_cast<double>(c.generator.committed_events());
  x["shards"] = n;
  x["load_average_1min_at_start"] = st.load_at_start;
  if (st.relay_started) {
    x["walhook_started_at_s"] = static_cast<double>(st.relay_start_us - c.result.start_us) / 1e6;
    x["backlog_events"] = st.backlog_events;
  }

  // What each shard should have: its tenants' endpoints and events, and what its endpoints got.
  std::vector<shard_set> want(static_cast<std::size_t>(n));
  std::unordered_map<std::string, int> shard_of_path;
  for (const auto& e : c.endpoints) {
    const int k = e.tenant < shard_of_tenant.size() ? shard_of_tenant[e.tenant] : -1;
    if (k < 0 || k >= n) continue;
    want[static_cast<std::size_t>(k)].endpoints.insert(e.id);
    shard_of_path[e.path] = k;
  }
  for (const auto& ev : c.generator.events())
    if (ev.tenant < shard_of_tenant.size()) ++want[static_cast<std::size_t>(shard_of_tenant[ev.tenant])].events;
  std::unordered_set<std::string> seen;
  std::int64_t delivered = 0;
  for (const auto& q : c.receiver.requests()) {
    if (q.status < 200 || q.status >= 300 || !seen.insert(q.webhook_id + " " + q.path).second) continue;
    ++delivered;
    if (auto it = shard_of_path.find(q.path); it != shard_of_path.end()) ++want[static_cast<std::size_t>(it->second)].received;
  }

  // PostgreSQL's backends: the walsenders per shard, and the rest by role.
  double walsender_total = 0;
  if (st.postgres_local) {
    std::map<std::string, double> by_role;
    std::vector<double> shard_cpu(static_cast<std::size_t>(n), 0);
    std::vector<int> shard_pids(static_cast<std::size_t>(n), 0);
    for (const auto& [pid, b] : st.backends) {
      by_role[b.role] += b.latest - b.base;
      if (b.role == "walsenders" && b.shard >= 0 && b.shard < n) {
        shard_cpu[static_cast<std::size_t>(b.shard)] += b.latest - b.base;
        ++shard_pids[static_cast<std::size_t>(b.shard)];
      }
    }
    for (int k = 0; k < n; ++k) {
      walsender_total += shard_cpu[static_cast<std::size_t>(k)];
      x[fmt::format("shard{}_walsender_cpu_s", k)] = shard_cpu[static_cast<std::size_t>(k)];
      x[fmt::format("shard{}_walsender_pids", k)] = shard_pids[static_cast<std::size_t>(k)];  // > 1: it reconnected
    }
    x["walsender_cpu_s_total"] = walsender_total;
    if (events > 0) {
      x["walsender_cpu_us_per_event_each"] = walsender_total / n / events * 1e6;  // mean over the walsenders
      x["walsender_cpu_us_per_event_total"] = walsender_total / events * 1e6;
    }
    double attributed = 0;
    for (const char* role : backend_roles) {
      x[fmt::format("pg_cpu_s_{}", role)] = by_role[role];
      attributed += by_role[role];
    }
    if (c.result.cpu_postgres >= 0) {
      x["pg_cpu_s_unattributed"] = c.result.cpu_postgres - attributed;
      if (events > 0) x["postgres_cpu_us_per_event"] = c.result.cpu_postgres / events * 1e6;
    }
  } else {
    c.result.notes.push_back("walsender CPU not measured: the server is not on this host");
  }

  // walhook processes.
  const auto procs = c.relay.processes();
  double walhook_total = 0, rss_max = 0;
  for (std::size_t k = 0; k < procs.size(); ++k) {
    const double cpu = procs[k].cpu_s - (k < st.walhook_cpu0.size() ? st.walhook_cpu0[k] : 0);
    walhook_total += cpu;
    const double rss = static_cast<double>(procs[k].peak_rss_kib) / 1024.0;
    rss_max = std::max(rss_max, rss);
    x[fmt::format("shard{}_walhook_cpu_s", k)] = cpu;
    x[fmt::format("shard{}_walhook_peak_rss_mib", k)] = rss;
  }
  x["walhook_cpu_s_total"] = walhook_total;
  x["walhook_peak_rss_mib_max"] = rss_max;
  x["deliveries_all"] = static_cast<double>(delivered);
  if (delivered > 0) x["walhook_cpu_us_per_delivery"] = walhook_total / static_cast<double>(delivered) * 1e6;

  // Every shard's own view against what it should have had.
  int wrong = 0;
  std::int64_t foreign_total = 0, missing_total = 0, read_total = 0, read_off = 0;
  for (int k = 0; k < n && static_cast<std::size_t>(k) < procs.size(); ++k) {
    const auto& w = want[static_cast<std::size_t>(k)];
    x[fmt::format("shard{}_tenants", k)] =
        static_cast<double>(std::count(shard_of_tenant.begin(), shard_of_tenant.end(), k));
    x[fmt::format("shard{}_events_committed", k)] = static_cast<double>(w.events);
    x[fmt::format("shard{}_received", k)] = static_cast<double>(w.received);
    const int port = admin_port_from_log(procs[static_cast<std::size_t>(k)].log_path);
    const auto m = port > 0 ? scrape_metrics(port) : std::map<std::string, double>{};
    if (m.empty()) {
      c.result.notes.push_back(fmt::format("shard {}: /metrics could not be read (port {})", k, port));
      ++wrong;
      continue;
    }
    auto counter = [&](const char* name) {
      auto it = m.find(name);
      return it == m.end() ? -1.0 : it->second;
    };
    const double read = counter("walhook_events_total"), sent = counter("walhook_delivered_total");
    x[fmt::format("shard{}_events_read", k)] = read;
    x[fmt::format("shard{}_delivered_by_walhook", k)] = sent;
    x[fmt::format("shard{}_sessions", k)] = counter("walhook_sessions_total");
    // Work that did not go through memory alone: spilled to walhook.deliveries (a queue that would
    // wait past --max-wait-ms), attempts recorded `sending` (past --max-hold-ms), claimed back.
    for (const char* name : {"spilled", "marked_sending", "claimed", "failed_attempts", "dead"}) {
      const double v = counter(fmt::format("walhook_{}_total", name).c_str());
      x[fmt::format("shard{}_{}", k, name)] = v;
      if (v > 0) x[fmt::format("{}_total", name)] += v;
    }
    read_total += static_cast<std::int64_t>(read);
    read_off += std::llabs(static_cast<std::int64_t>(read) - w.events);
    // The endpoints it knows: the labels of walhook_endpoint_queued{endpoint="<id>"}.
    const std::string prefix = "walhook_endpoint_queued{endpoint=\"";
    std::unordered_set<long long> known;
    for (const auto& [name, v] : m)
      if (name.rfind(prefix, 0) == 0) known.insert(std::atoll(name.c_str() + prefix.size()));
    std::int64_t foreign = 0, missing = 0;
    for (auto id : known) foreign += w.endpoints.contains(id) ? 0 : 1;
    for (auto id : w.endpoints) missing += known.contains(id) ? 0 : 1;
    foreign_total += foreign;
    missing_total += missing;
    const bool ok = static_cast<std::int64_t>(read) == w.events && foreign == 0 && missing == 0 &&
                    static_cast<std::int64_t>(sent) >= w.events;
    if (!ok) {
      ++wrong;
      c.result.notes.push_back(fmt::format(
          "shard {} of {}: read {:.0f} events from its slot for {} of its tenants' events committed, delivered {:.0f}, knows {} "
          "endpoints of which {} are another shard's, {} of its {} endpoints unknown to it",
          k, n, read, w.events, sent, known.size(), foreign, missing, w.endpoints.size()));
    }
  }
  for (const char* name : {"spilled", "marked_sending", "claimed", "failed_attempts", "dead"})
    x.try_emplace(fmt::format("{}_total", name), 0.0);
  x["shards_wrong"] = wrong;
  x["events_read_total"] = static_cast<double>(read_total);
  x["events_read_off_total"] = static_cast<double>(read_off);  ///< Σ |events read − its tenants' events|
  x["foreign_endpoints_total"] = static_cast<double>(foreign_total);
  x["missing_endpoints_total"] = static_cast<double>(missing_total);
}

/// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return -1;
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

scenario_report shards(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "shards";
  if (std::find(o.relays.begin(), o.relays.end(), relay_kind::walhook) == o.relays.end()) {
    r.findings.push_back("shards runs walhook only (add walhook to --relay)");
    return r;
  }
  std::vector<int> counts;
  for (int n : o.shard_counts)
    if (n >= 1 && n <= relay::max_shards && std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
  if (counts.empty()) throw std::runtime_error(fmt::format("--shard-counts: 1 to {}", relay::max_shards));
  const bool steady = std::find(o.shard_variants.begin(), o.shard_variants.end(), "steady") != o.shard_variants.end();
  const bool backlog = std::find(o.shard_variants.begin(), o.shard_variants.end(), "backlog") != o.shard_variants.end();
  const int tenants = std::max(1, o.shard_tenants);
  const int rpc = std::max(1, o.shard_backlog_rows_per_commit);
  const double backlog_s = static_cast<double>(o.shard_backlog) / std::max(1.0, o.shard_backlog_rate);
  const auto backlog_step = milliseconds(static_cast<long long>(std::ceil(backlog_s * 1000)));
  // Transactions of the backlog step (the generator's own rounding).
  const auto backlog_txns = static_cast<std::int64_t>(
      std::llround(o.shard_backlog_rate / rpc * static_cast<double>(backlog_step.count()) / 1000.0));
  const std::int64_t warmup_us = o.warmup.count() * 1000, measure_us = o.shard_measure.count() * 1000;

  // Per shard count: the workloads and which shard each tenant is on (filled in by the first
  // trial, from the server).
  struct layout {
    int shards = 1;
    std::string steady_variant, backlog_variant;
    std::vector<int> shard_of_tenant;
  };
  auto layouts = std::make_shared<std::map<int, layout>>();
  std::vector<workload> ws;
  std::map<std::string, int> shards_of_variant;
  for (int n : counts) {
    auto& l = (*layouts)[n];
    l.shards = n;
    workload base;
    base.payload_bytes = o.payload_bytes;
    base.tenants = tenants;
    base.endpoints = make_endpoints(tenants, 1, o.max_concurrency);  // one per tenant, answering at once
    base.shards = n;
    base.walhook_args = {"--admin-listen=127.0.0.1:0"};  // every shard's /metrics (its port is in its log)
    base.drain = 15s;
    if (steady) {
      workload w = base;
      l.steady_variant = w.variant = fmt::format("steady {}, {}", rate_label(o.shard_rate), shard_label(n));
      w.warmup = o.warmup;
      w.schedule = {{o.warmup + o.shard_measure, o.shard_rate}};
      w.connections = o.connections;
      ws.push_back(w);
      shards_of_variant[w.variant] = n;
    }
    if (backlog) {
      workload w = base;
      l.backlog_variant = w.variant = fmt::format("backlog {}, {}", thousands(o.shard_backlog), shard_label(n));
      w.warmup = 0ms;  // every event counts: the backlog is the point
      w.schedule = {{backlog_step, o.shard_backlog_rate}, {60s, 0}};  // the controller ends it once drained
      w.rows_per_commit = rpc;
      w.connections = o.shard_backlog_connections;
      w.start_relay = false;  // the slots hold the backlog; every shard starts once it is committed
      ws.push_back(w);
      shards_of_variant[w.variant] = n;
    }
  }

  auto make_control = [&](const workload& w) -> controller {
    auto st = std::make_shared<shard_probe>();
    const bool is_backlog = !w.start_relay;
    const int n = w.shards;
    const double backlog_wait_s = backlog_s;
    return [st, layouts, n, is_backlog, backlog_wait_s, backlog_txns, tenants](trial_control& c) {
      auto& l = layouts->at(n);
      if (!st->started) {
        st->started = true;
        st->load_at_start = std::strtod(load_average().c_str(), nullptr);  // the 1-minute figure
        st->postgres_local = c.cluster.postmaster_pid() > 0;
        st->slots = c.relay.slots();
        for (const auto& p : c.relay.processes()) st->walhook_cpu0.push_back(p.cpu_s);
        if (l.shard_of_tenant.empty()) {
          relay::blocking_db db(c.conninfo, "walhook-bench-shards");
          l.shard_of_tenant = tenant_shards(db, tenants, n);
        }
      }
      if (c.final) {
        final_figures(*st, c, l.shard_of_tenant);
        st->db.reset();  // before the trial drops its database
        return;
      }
      if (c.elapsed_s >= st->next_sample_s) {
        sample_backends(*st, c);
        st->next_sample_s += 1.0;
      }
      if (!is_backlog) return;
      if (!st->relay_started) {
        // Once the whole backlog is in the slots (a database-bound generator commits it late):
        // every shard at once.
        if (c.elapsed_s < backlog_wait_s || c.generator.ended_transactions() < backlog_txns) return;
        st->relay_started = true;
        st->backlog_events = static_cast<double>(c.generator.committed_events());
        st->relay_start_us = system_now_us();
        c.relay.start();
        const bool ready = c.relay.wait_ready(30s);
        disruption d{fmt::format("{} started on the slots' backlog", n == 1 ? "walhook run" : fmt::format("{} × walhook run --shard K/{}", n, n)),
                     static_cast<double>(st->relay_start_us - c.result.start_us) / 1e6,
                     {}};
        d.set("backlog_events_committed", st->backlog_events);
        d.set("all_slots_active_after_s", ready ? static_cast<double>(system_now_us() - st->relay_start_us) / 1e6 : -1);
        c.result.disruptions.push_back(d);
        sample_backends(*st, c);  // first sight of the walsenders: all their CPU is the drain's
        return;
      }
      if (c.receiver.answered_ok() >= c.generator.committed_deliveries()) c.stop = true;  // drained
    };
  };
  run_all(r, runner, o, ws, {relay_kind::walhook}, make_control);

  // Per trial: latency per shard (steady), the drain (backlog), losses.
  for (auto& t : r.trials) {
    auto sv = shards_of_variant.find(t.variant);
    if (sv == shards_of_variant.end()) continue;
    const auto& l = layouts->at(sv->second);
    const int n = l.shards;
    std::int64_t lost = 0;
    for (const auto& ob : t.observations) lost += ob.receipt_us < 0 ? 1 : 0;
    t.extra["lost"] = static_cast<double>(lost);
    t.extra["duplicates"] = static_cast<double>(t.duplicates);
    if (l.shard_of_tenant.empty()) continue;
    auto shard_of_endpoint = [&](std::uint32_t ep) {
      return ep < l.shard_of_tenant.size() ? l.shard_of_tenant[ep] : -1;  // endpoint i is tenant i's
    };
    if (t.variant == l.steady_variant) {
      const std::int64_t from = t.start_us + warmup_us, to = from + measure_us;
      std::vector<std::vector<double>> ms(static_cast<std::size_t>(n));
      for (const auto& ob : t.observations) {
        const int k = shard_of_endpoint(ob.endpoint);
        if (k < 0 || ob.receipt_us < 0 || ob.scheduled_us < from || ob.scheduled_us >= to) continue;
        ms[static_cast<std::size_t>(k)].push_back(static_cast<double>(ob.receipt_us - ob.commit_us) / 1000.0);
      }
      double worst_p99 = 0;
      for (int k = 0; k < n; ++k) {
        auto& v = ms[static_cast<std::size_t>(k)];
        std::sort(v.begin(), v.end());
        t.extra[fmt::format("shard{}_p50_ms", k)] = percentile(v, 0.5);
        t.extra[fmt::format("shard{}_p99_ms", k)] = percentile(v, 0.99);
        worst_p99 = std::max(worst_p99, percentile(v, 0.99));
      }
      t.extra["worst_shard_p99_ms"] = worst_p99;
    } else if (t.variant == l.backlog_variant) {
      const double started_at = extra_or(t, "walhook_started_at_s");
      if (started_at < 0) continue;
      const std::int64_t start_us = t.start_us + static_cast<std::int64_t>(started_at * 1e6);
      std::int64_t received = 0, first = std::numeric_limits<std::int64_t>::max(), last = 0;
      std::vector<std::int64_t> last_of(static_cast<std::size_t>(n), 0);
      for (const auto& ob : t.observations) {
        if (ob.receipt_us < 0) continue;
        ++received;
        first = std::min(first, ob.receipt_us);
        last = std::max(last, ob.receipt_us);
        const int k = shard_of_endpoint(ob.endpoint);
        if (k >= 0) last_of[static_cast<std::size_t>(k)] = std::max(last_of[static_cast<std::size_t>(k)], ob.receipt_us);
      }
      if (received == 0) continue;
      const double drain_s = static_cast<double>(last - start_us) / 1e6;
      t.extra["backlog_deliveries"] = static_cast<double>(t.observations.size());
      t.extra["first_delivery_after_start_s"] = static_cast<double>(first - start_us) / 1e6;
      t.extra["drained_after_start_s"] = lost == 0 ? drain_s : -1;
      t.extra["drain_per_s_from_start"] = drain_s > 0 ? static_cast<double>(received) / drain_s : 0;
      t.extra["drain_per_s_first_to_last"] = last > first ? static_cast<double>(received) * 1e6 / static_cast<double>(last - first) : 0;
      for (int k = 0; k < n; ++k)
        t.extra[fmt::format("shard{}_drained_after_start_s", k)] =
            last_of[static_cast<std::size_t>(k)] > 0 ? static_cast<double>(last_of[static_cast<std::size_t>(k)] - start_us) / 1e6 : -1;
    }
  }

  // The headline table: one column per shard count.
  auto groups = group_trials(r);
  auto group_of = [&](const std::string& variant) { return find_group(groups, variant, "walhook"); };
  auto fig = [](const trial_group* g, const std::string& key, int decimals) -> std::string {
    if (!g) return "—";
    const double v = median_extra(*g, key);
    return v < 0 ? "—" : decimals < 0 ? thousands(v) : fmt::format("{:.{}f}", v, decimals);
  };
  auto lat = [](const trial_group* g, double latency_stats::*m) -> std::string {
    if (!g) return "—";
    return fmt::format("{:.2f}", median_of(*g, [m](const trial_result& t) { return t.commit_to_receipt.*m; }));
  };
  auto med = [](const trial_group* g, const std::function<double(const trial_result&)>& f, int decimals) -> std::string {
    if (!g) return "—";
    const double v = median_of(*g, f);
    return decimals < 0 ? thousands(v) : fmt::format("{:.{}f}", v, decimals);
  };
  auto range = [](const trial_group* g, const std::string& key) -> std::string {
    if (!g) return "—";
    double lo = std::numeric_limits<double>::max(), hi = -1;
    for (const auto* t : g->runs) {
      const double v = extra_or(*t, key);
      if (v < 0) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    return hi < 0 ? "—" : fmt::format("{:.1f}–{:.1f}", lo, hi);
  };
  std::string md = "| | " + fmt::format("{}", fmt::join([&] {
                     std::vector<std::string> h;
                     for (int n : counts) h.push_back(shard_label(n));
                     return h;
                   }(), " | ")) + " |\n|---|";
  for (std::size_t i = 0; i < counts.size(); ++i) md += "---|";
  md += "\n";
  auto row = [&](const std::string& label, const std::function<std::string(const layout&)>& cell) {
    md += "| " + label + " |";
    for (int n : counts) md += " " + cell(layouts->at(n)) + " |";
    md += "\n";
  };
  row("tenants per shard", [&](const layout& l) {
    if (l.shard_of_tenant.empty()) return std::string("—");
    std::vector<int> per(static_cast<std::size_t>(l.shards), 0);
    for (int k : l.shard_of_tenant) ++per[static_cast<std::size_t>(k)];
    return fmt::format("{}", fmt::join(per, " / "));
  });
  if (steady) {
    const std::string s = fmt::format("steady {}: ", rate_label(o.shard_rate));
    row(s + "commit-to-receipt p50 / p99 ms", [&](const layout& l) {
      const auto* g = group_of(l.steady_variant);
      return lat(g, &latency_stats::p50) + " / " + lat(g, &latency_stats::p99);
    });
    row(s + "p99 of the slowest shard ms", [&](const layout& l) { return fig(group_of(l.steady_variant), "worst_shard_p99_ms", 2); });
    row(s + "deliveries/s", [&](const layout& l) {
      return med(group_of(l.steady_variant), [](const trial_result& t) { return t.delivered_per_s; }, -1);
    });
  }
  if (backlog) {
    const std::string b = fmt::format("backlog {}: ", thousands(o.shard_backlog));
    row(b + "time from start to the last delivery s", [&](const layout& l) { return fig(group_of(l.backlog_variant), "drained_after_start_s", 2); });
    row(b + "deliveries/s from start", [&](const layout& l) { return fig(group_of(l.backlog_variant), "drain_per_s_from_start", -1); });
    row(b + "deliveries/s first to last", [&](const layout& l) { return fig(group_of(l.backlog_variant), "drain_per_s_first_to_last", -1); });
  }
  for (const auto* which : {"steady", "backlog"}) {
    const bool is_steady = std::string(which) == "steady";
    if (is_steady ? !steady : !backlog) continue;
    auto v = [&](const layout& l) { return group_of(is_steady ? l.steady_variant : l.backlog_variant); };
    const std::string p = std::string(which) + ": ";
    row(p + "CPU per event, each walsender µs", [&](const layout& l) { return fig(v(l), "walsender_cpu_us_per_event_each", 1); });
    row(p + "CPU per event, all walsenders µs", [&](const layout& l) { return fig(v(l), "walsender_cpu_us_per_event_total", 1); });
    row(p + "walsender CPU-s, each shard", [&](const layout& l) {
      const auto* g = v(l);
      if (!g) return std::string("—");
      std::vector<std::string> parts;
      for (int k = 0; k < l.shards; ++k) parts.push_back(fig(g, fmt::format("shard{}_walsender_cpu_s", k), 2));
      return fmt::format("{}", fmt::join(parts, " / "));
    });
    row(p + "walsender CPU-s, all", [&](const layout& l) { return fig(v(l), "walsender_cpu_s_total", 2); });
    row(p + "PostgreSQL CPU-s: whole server = walsenders + walhook's state / lock sessions + generator + autovacuum + "
                "background + other (bench probes, unattributed)",
        [&](const layout& l) {
          const auto* g = v(l);
          return fmt::format("{} = {} + {} / {} + {} + {} + {} + {}", med(g, [](const trial_result& t) { return t.cpu_postgres; }, 2),
                             fig(g, "walsender_cpu_s_total", 2), fig(g, "pg_cpu_s_walhook_state", 2), fig(g, "pg_cpu_s_walhook_other", 2),
                             fig(g, "pg_cpu_s_generator", 2), fig(g, "pg_cpu_s_autovacuum", 2), fig(g, "pg_cpu_s_background", 2),
                             med(g, [](const trial_result& t) {
                               return extra_or(t, "pg_cpu_s_other", 0) + extra_or(t, "pg_cpu_s_bench", 0) +
                                      extra_or(t, "pg_cpu_s_unattributed", 0);
                             }, 2));
        });
    row(p + "walhook CPU per delivery µs (all processes)", [&](const layout& l) { return fig(v(l), "walhook_cpu_us_per_delivery", 0); });
    row(p + "walhook CPU-s, all processes", [&](const layout& l) { return fig(v(l), "walhook_cpu_s_total", 2); });
    row(p + "walhook peak RSS per process MiB", [&](const layout& l) {
      const auto* g = v(l);
      if (!g) return std::string("—");
      std::vector<std::string> parts;
      for (int k = 0; k < l.shards; ++k) parts.push_back(fig(g, fmt::format("shard{}_walhook_peak_rss_mib", k), 0));
      return fmt::format("{}", fmt::join(parts, " / "));
    });
    row(p + "rows written to walhook.deliveries / spilled / attempts marked sending / claimed", [&](const layout& l) {
      const auto* g = v(l);
      return fig(g, "delivery_rows_written", -1) + " / " + fig(g, "spilled_total", -1) + " / " + fig(g, "marked_sending_total", -1) +
             " / " + fig(g, "claimed_total", -1);
    });
    row(p + "other load CPU-s", [&](const layout& l) {
      return med(v(l), [](const trial_result& t) { return t.cpu_machine_other; }, 1);
    });
    row(p + "load average (1 min) at the start, runs", [&](const layout& l) { return range(v(l), "load_average_1min_at_start"); });
    row(p + "shards wrong / Σ abs(events read − its tenants' events) / foreign endpoints known / lost / duplicates", [&](const layout& l) {
      const auto* g = v(l);
      if (!g) return std::string("—");
      double wrong = 0, off = 0, foreign = 0, lost = 0, dup = 0;
      for (const auto* t : g->runs) {  // sums over runs: any of them is a finding
        wrong += extra_or(*t, "shards_wrong", 0);
        off += extra_or(*t, "events_read_off_total", 0);
        foreign += extra_or(*t, "foreign_endpoints_total", 0);
        lost += extra_or(*t, "lost", 0);
        dup += extra_or(*t, "duplicates", 0);
      }
      return fmt::format("{:.0f} / {:.0f} / {:.0f} / {:.0f} / {:.0f}", wrong, off, foreign, lost, dup);
    });
  }
  r.headline_markdown =
      "Medians over runs (the last row: sums over all runs). Every walsender decodes all the WAL and evaluates its "
      "publication's row filter on every outbox row: \"CPU per event\" is its CPU (utime + stime of the walsender "
      "backend, /proc, load start → drain end) divided by every event committed in the trial, not only its shard's. "
      "1 shard is one unsharded walhook (publications without a row filter).\n\n" +
      md;

  // The plot: walsender CPU per event (each, all) for both workloads, walhook CPU per delivery.
  {
    auto value = [&](const std::string& variant, const std::string& key) {
      const auto* g = variant.empty() ? nullptr : group_of(variant);
      const double v = g ? median_extra(*g, key) : -1;
      return v < 0 ? std::string("NaN") : fmt::format("{:.2f}", v);
    };
    std::string data = "# shards, walsender CPU µs per event (steady: each, all; backlog: each, all), walhook CPU µs per delivery "
                       "(steady, backlog); medians over runs\n";
    for (int n : counts) {
      const auto& l = layouts->at(n);
      data += fmt::format("\"{} shard{}\" {} {} {} {} {} {}\n", n, n == 1 ? "" : "s", value(l.steady_variant, "walsender_cpu_us_per_event_each"),
                          value(l.steady_variant, "walsender_cpu_us_per_event_total"),
                          value(l.backlog_variant, "walsender_cpu_us_per_event_each"),
                          value(l.backlog_variant, "walsender_cpu_us_per_event_total"),
                          value(l.steady_variant, "walhook_cpu_us_per_delivery"), value(l.backlog_variant, "walhook_cpu_us_per_delivery"));
    }
    const std::string steady_title = fmt::format("steady {}, 1 row per transaction", rate_label(o.shard_rate));
    const std::string backlog_title = fmt::format("backlog of {}, {} rows per transaction", thousands(o.shard_backlog), rpc);
    std::string script = fmt::format(
        "set style data histogram\nset style histogram cluster gap 1\nset style fill solid 0.85 border -1\nset boxwidth 0.9\n"
        "set grid ytics\nset key top left\nset yrange [0:*]\nset xlabel 'walhook processes (1 per shard)'\n"
        "set multiplot layout 1,{} title 'walhook-bench shards: CPU per event with 1 walhook per shard ({} CPUs, medians of runs)'\n"
        "set ylabel 'walsender CPU per event of the whole stream (µs)'\n",
        1 + (steady ? 1 : 0) + (backlog ? 1 : 0), describe_machine().cpus);
    if (steady)
      script += fmt::format("set title '{}'\nplot datafile using 2:xtic(1) title 'each walsender' lc 1, '' using 3 title 'all walsenders' lc 2\n",
                            steady_title);
    if (backlog)
      script += fmt::format("set title '{}'\nplot datafile using 4:xtic(1) title 'each walsender' lc 1, '' using 5 title 'all walsenders' lc 2\n",
                            backlog_title);
    script += "set title 'walhook, all processes'\nset ylabel 'walhook CPU per delivery (µs)'\nplot datafile";
    if (steady) script += " using 6:xtic(1) title 'steady' lc 3";
    if (steady && backlog) script += ", ''";
    if (backlog) script += " using 7:xtic(1) title 'backlog' lc 4";
    script += "\nunset multiplot\n";
    r.plots.push_back({"cpu", "walsender and walhook CPU per event by shard count", data, script});
  }

  // Findings: the cost of shards, plainly.
  const int base_n = counts.front();
  for (const auto* which : {"steady", "backlog"}) {
    const bool is_steady = std::string(which) == "steady";
    if (is_steady ? !steady : !backlog) continue;
    auto v = [&](int n) {
      const auto& l = layouts->at(n);
      return group_of(is_steady ? l.steady_variant : l.backlog_variant);
    };
    const auto* g0 = v(base_n);
    if (!g0) continue;
    const double each0 = median_extra(*g0, "walsender_cpu_us_per_event_each");
    const double total0 = median_extra(*g0, "walsender_cpu_s_total");
    for (int n : counts) {
      const auto* g = v(n);
      if (!g) continue;
      std::string line = fmt::format(
          "{} / {}: each walsender {:.1f} µs of CPU per event of the whole stream, all {} together {:.1f} µs ({:.2f} CPU-s)", which,
          shard_label(n), median_extra(*g, "walsender_cpu_us_per_event_each"), n,
          median_extra(*g, "walsender_cpu_us_per_event_total"), median_extra(*g, "walsender_cpu_s_total"));
      if (n != base_n && total0 > 0)
        line += fmt::format(" = {:.2f}× the walsender CPU of {} (each walsender {:.2f}× as much as the one of {})",
                            median_extra(*g, "walsender_cpu_s_total") / total0, shard_label(base_n),
                            median_extra(*g, "walsender_cpu_us_per_event_each") / std::max(each0, 1e-9), shard_label(base_n));
      line += fmt::format("; walhook {:.0f} µs per delivery over {} process{}, peak RSS ≤ {:.0f} MiB each; rows written to "
                          "walhook.deliveries {} ({} spilled: waited in memory past --max-wait-ms; runs {})",
                          median_extra(*g, "walhook_cpu_us_per_delivery"), n, n == 1 ? "" : "es",
                          median_extra(*g, "walhook_peak_rss_mib_max"), thousands(median_extra(*g, "delivery_rows_written")),
                          thousands(median_extra(*g, "spilled_total")), [&] {
                            std::vector<std::string> p;
                            for (const auto* t : g->runs) p.push_back(thousands(extra_or(*t, "spilled_total")));
                            return fmt::format("{}", fmt::join(p, " / "));
                          }());
      if (is_steady)
        line += fmt::format("; p50 / p99 {:.2f} / {:.2f} ms (slowest shard's p99 {:.2f})",
                            median_of(*g, [](const trial_result& t) { return t.commit_to_receipt.p50; }),
                            median_of(*g, [](const trial_result& t) { return t.commit_to_receipt.p99; }),
                            median_extra(*g, "worst_shard_p99_ms"));
      else
        line += fmt::format("; backlog drained {:.2f} s after start ({} deliveries/s; runs {})",
                            median_extra(*g, "drained_after_start_s"), thousands(median_extra(*g, "drain_per_s_from_start")),
                            [&] {
                              std::vector<std::string> p;
                              for (const auto* t : g->runs) p.push_back(thousands(extra_or(*t, "drain_per_s_from_start")));
                              return fmt::format("{}", fmt::join(p, " / "));
                            }());
      r.findings.push_back(line);
    }
  }
  // Correctness, stated whatever it is.
  double wrong = 0, off = 0, foreign = 0, lost = 0, dup = 0;
  for (const auto& t : r.trials) {
    wrong += extra_or(t, "shards_wrong", 0);
    off += extra_or(t, "events_read_off_total", 0);
    foreign += extra_or(t, "foreign_endpoints_total", 0);
    lost += extra_or(t, "lost", 0);
    dup += extra_or(t, "duplicates", 0);
  }
  r.findings.push_back(fmt::format(
      "over all {} trials: {:.0f} shard(s) whose events read, endpoints known or deliveries differ from their tenants' (must be 0: "
      "{}); events read off by {:.0f}; {:.0f} foreign endpoints; {:.0f} lost, {:.0f} duplicate deliveries",
      r.trials.size(), wrong, met(wrong == 0), off, foreign, lost, dup));
  r.findings.push_back(fmt::format(
      "{} CPUs on this machine: with N shards, N walhooks + N walsenders + PostgreSQL + the generator + the receiver "
      "(one thread) share them, so throughput cannot scale with N here; the walsender cost per shard and the latency are "
      "what these runs show. Each walhook sizes its memory queues (--max-queue-total) and its wait bound (--max-wait-ms) "
      "as if it were alone: co-located shards hold N times as much in memory while sharing the same CPU",
      describe_machine().cpus));
  return r;
}

}  // namespace walhook::bench
