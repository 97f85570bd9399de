#include "bench/scenarios.hpp"

#include "bench/brokers.hpp"
#include "bench/endpoint_scale.hpp"
#include "bench/ingest.hpp"
#include "bench/scenario_support.hpp"
#include "bench/shards.hpp"
#include "bench/transient.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace walhook::bench {

std::string rate_label(double r) {
  return r >= 1000 && std::fmod(r, 1000) == 0 ? fmt::format("{},000 ev/s", static_cast<int>(r / 1000))
                                              : fmt::format("{:.0f} ev/s", r);
}

const trial_group* find_group(const std::vector<trial_group>& groups, const std::string& variant, const std::string& relay) {
  for (const auto& g : groups)
    if (g.variant == variant && g.relay == relay) return &g;
  return nullptr;
}

std::string met(bool ok) { return ok ? "**met**" : "**missed**"; }

std::int64_t system_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string thousands(double n) {
  auto v = static_cast<long long>(std::llround(n));
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

double extra_or(const trial_result& t, const std::string& key, double fallback) {
  auto it = t.extra.find(key);
  return it == t.extra.end() ? fallback : it->second;
}

double median_extra(const trial_group& g, const std::string& key) {
  return median_of(g, [&](const trial_result& t) { return extra_or(t, key); });
}

void run_all(scenario_report& report, trial_runner& runner, const scenario_options& o, const std::vector<workload>& ws,
             const std::vector<relay_kind>& relays, const std::function<controller(const workload&)>& make_control) {
  for (int run = 0; run < o.runs; ++run)
    for (const auto& w : ws)
      for (auto kind : relays) {
        try {
          report.trials.push_back(runner.run(report.scenario, w, kind, run, make_control ? make_control(w) : controller{}));
        } catch (const std::exception& e) {
          std::cerr << "\n  trial failed: " << e.what() << "\n";
          report.findings.push_back(fmt::format("{} / {} run {} failed: {}", w.variant, to_string(kind), run + 1, e.what()));
        }
      }
}

workload base_workload(const scenario_options& o, double rate, int endpoints, int fanout) {
  workload w;
  w.variant = rate_label(rate);
  w.warmup = o.warmup;
  w.schedule = {{o.warmup + o.measure, rate}};
  w.payload_bytes = o.payload_bytes;
  w.connections = o.connections;
  w.endpoints = make_endpoints(endpoints, fanout, o.max_concurrency);
  w.tenants = std::max(1, endpoints / std::max(1, fanout));
  return w;
}

workload ladder_workload(const scenario_options& o) {
  workload w;
  w.variant = fmt::format("ladder, {} rows/commit", o.max_rows_per_commit);
  w.rows_per_commit = o.max_rows_per_commit;
  w.payload_bytes = o.payload_bytes;
  w.connections = o.connections;
  w.endpoints = make_endpoints(8, 1, o.max_concurrency);
  w.tenants = 8;
  for (double rate : o.ladder) w.schedule.push_back({o.step, rate});
  w.warmup = std::chrono::milliseconds(0);
  w.drain = std::chrono::milliseconds(5000);
  return w;
}

// The stopping rule, evaluated at each step's end. A step is sustained when
//   * the application's commits kept to the schedule (≥ 90 % of the step's events), and
//   * the relay kept up: the average backlog of the step's second half is no more than
//     5 % of the step's events above the first half's (deliveries ≥ ~95 % of commits once the
//     relay's own pipeline is full — a polling relay always holds ~interval/2 of backlog), and
//     no more than 1 s of the rate behind.
controller ladder_controller(const std::vector<double>& ladder, std::chrono::milliseconds step) {
  struct state {
    std::size_t step = 0;
    std::int64_t committed_at_start = 0;
    std::int64_t delivered_at_start = 0;
    double half_sum[2] = {0, 0};
    int half_n[2] = {0, 0};
    double best = 0;
    bool generator_bound = false;
    std::vector<std::string> log;
  };
  auto st = std::make_shared<state>();
  const double step_s = static_cast<double>(step.count()) / 1000.0;
  return [st, step_s, ladder](trial_control& c) {
    if (c.final) {
      c.result.extra["max_sustained_events_per_s"] = st->best;
      c.result.extra["generator_bound"] = st->generator_bound ? 1 : 0;
      c.result.notes.push_back("ladder: " + fmt::format("{}", fmt::join(st->log, "; ")));
      return;
    }
    if (st->step >= ladder.size()) return;
    const std::int64_t committed = c.generator.committed_deliveries();
    const std::int64_t delivered = c.receiver.answered_ok();
    const std::int64_t backlog = committed - delivered;
    const double step_start = step_s * static_cast<double>(st->step);
    if (c.elapsed_s < step_start + step_s) {
      int half = c.elapsed_s < step_start + step_s / 2 ? 0 : 1;
      st->half_sum[half] += static_cast<double>(backlog);
      ++st->half_n[half];
      return;
    }
    const double rate = ladder[st->step];
    const double committed_rate = static_cast<double>(committed - st->committed_at_start) / step_s;
    const double delivered_rate = static_cast<double>(delivered - st->delivered_at_start) / step_s;
    const double first = st->half_n[0] ? st->half_sum[0] / st->half_n[0] : 0;
    const double second = st->half_n[1] ? st->half_sum[1] / st->half_n[1] : static_cast<double>(backlog);
    const bool gen_ok = committed_rate >= 0.9 * rate;
    const bool relay_ok = second - first <= 0.05 * rate * step_s && second <= rate;
    st->log.push_back(fmt::format("{:.0f}/s: committed {:.0f}/s, delivered {:.0f}/s, mean backlog {:.0f} → {:.0f}{}", rate,
                                  committed_rate, delivered_rate, first, second,
                                  !relay_ok ? " (relay fell behind)"
                                  : !gen_ok ? " (commits fell behind the schedule: database saturated)"
                                            : ""));
    if (gen_ok && relay_ok) st->best = rate;
    if (!gen_ok && relay_ok) st->generator_bound = true;
    if (!gen_ok || !relay_ok) c.stop = true;
    st->committed_at_start = committed;
    st->delivered_at_start = delivered;
    st->half_sum[0] = st->half_sum[1] = 0;
    st->half_n[0] = st->half_n[1] = 0;
    ++st->step;
  };
}

void latency_at_max(scenario_report& r, const std::string& variant, const std::vector<double>& ladder,
                    std::chrono::milliseconds step) {
  for (auto& t : r.trials) {
    if (t.variant != variant) continue;
    double best = t.extra["max_sustained_events_per_s"];
    std::int64_t from = t.start_us, to = t.start_us;
    for (double rate : ladder) {
      to = from + step.count() * 1000;
      if (rate == best) break;
      from = to;
    }
    std::vector<double> lat;
    for (const auto& ob : t.observations)
      if (ob.scheduled_us >= from && ob.scheduled_us < to && ob.receipt_us >= 0)
        lat.push_back(static_cast<double>(ob.receipt_us - ob.commit_us) / 1000.0);
    auto s = summarize(lat);
    t.extra["p50_at_max_ms"] = s.p50;
    t.extra["p99_at_max_ms"] = s.p99;
  }
}

namespace {

using std::chrono::milliseconds;



// ------------------------------------------------------------------ steady, fanout, custom

void latency_findings(scenario_report& r, const std::string& variant, bool targets) {
  auto groups = group_trials(r);
  const auto* wh = find_group(groups, variant, "walhook");
  const auto* po = find_group(groups, variant, "polling");
  const auto* no = find_group(groups, variant, "notify");
  auto p = [](const trial_group* g, double latency_stats::*m) {
    return median_of(*g, [m](const trial_result& t) { return t.commit_to_receipt.*m; });
  };
  if (wh) {
    double p50 = p(wh, &latency_stats::p50), p99 = p(wh, &latency_stats::p99);
    r.findings.push_back(fmt::format("{}: walhook p50 {:.2f} ms, p99 {:.2f} ms{}", variant, p50, p99,
                                     targets ? fmt::format(" (target p50 ≤ 2 ms: {}; p99 ≤ 10 ms: {})", met(p50 <= 2), met(p99 <= 10))
                                             : ""));
    if (po) {
      double ratio = p(po, &latency_stats::p50) / std::max(p50, 1e-6);
      r.findings.push_back(fmt::format("{}: polling p50 {:.1f} ms = {:.0f}× walhook's{}", variant, p(po, &latency_stats::p50), ratio,
                                       targets ? fmt::format(" (target ≥ 50×: {})", met(ratio >= 50)) : ""));
    }
    if (no) {
      double np99 = p(no, &latency_stats::p99);
      r.findings.push_back(fmt::format("{}: LISTEN/NOTIFY p50 {:.2f} ms, p99 {:.2f} ms vs walhook p99 {:.2f} ms{}", variant,
                                       p(no, &latency_stats::p50), np99, p99,
                                       targets ? fmt::format(" (target walhook p99 lower: {})", met(p99 < np99)) : ""));
    }
  }
}

scenario_report steady(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "steady";
  std::vector<workload> ws;
  for (double rate : o.steady_rates) ws.push_back(base_workload(o, rate, 8, 1));
  run_all(r, runner, o, ws, o.relays);
  for (const auto& w : ws) latency_findings(r, w.variant, w.schedule.front().events_per_second == 1000);
  return r;
}

scenario_report fanout(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "fanout";
  auto w = base_workload(o, o.fanout_rate, o.fanout, o.fanout);
  w.variant = fmt::format("{} × {} endpoints", rate_label(o.fanout_rate), o.fanout);
  run_all(r, runner, o, {w}, o.relays);
  latency_findings(r, w.variant, false);
  return r;
}

scenario_report custom(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "custom";
  auto w = base_workload(o, o.rate, o.endpoints, o.custom_fanout);
  w.rows_per_commit = o.rows_per_commit;
  if (o.tenants > 0) w.tenants = o.tenants;
  endpoint_behaviour b;
  const std::string& s = o.behaviour;
  if (s == "never") b.never = true;
  else if (s.rfind("delay:", 0) == 0) b.delay = milliseconds(std::stol(s.substr(6)));
  else if (s.rfind("error:", 0) == 0) b.error_rate = std::stod(s.substr(6));
  else if (s != "immediate") throw std::runtime_error("--behaviour: immediate, delay:MS, error:RATE or never");
  for (auto& e : w.endpoints) {
    e.behaviour = b;
    if (b.never) e.measured = false;
  }
  w.variant = fmt::format("{}, {} rows/commit, {} endpoints, fan-out {}, {}", rate_label(o.rate), o.rows_per_commit,
                          o.endpoints, o.custom_fanout, o.behaviour);
  run_all(r, runner, o, {w}, o.relays);
  latency_findings(r, w.variant, false);
  return r;
}

// ------------------------------------------------------------------ max

scenario_report max(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "max";
  const workload w = ladder_workload(o);
  run_all(r, runner, o, {w}, o.relays, [&](const workload&) { return ladder_controller(o.ladder, o.step); });
  latency_at_max(r, w.variant, o.ladder, o.step);
  auto groups = group_trials(r);
  auto best = [&](const std::string& relay) {
    const auto* g = find_group(groups, w.variant, relay);
    return g ? median_of(*g, [](const trial_result& t) { return t.extra.at("max_sustained_events_per_s"); }) : -1.0;
  };
  double wh = best("walhook"), po = best("polling"), no = best("notify");
  for (const auto& g : groups) {
    bool bound = median_of(g, [](const trial_result& t) { return t.extra.at("generator_bound"); }) > 0;
    r.findings.push_back(fmt::format("{}: highest sustained rate {:.0f} events/s = deliveries/s (median){}", g.relay,
                                     median_of(g, [](const trial_result& t) { return t.extra.at("max_sustained_events_per_s"); }),
                                     bound ? " — then the application's commits fell behind the schedule while the relay still kept up: the "
                                             "database, shared by application and relay, was the limit"
                                           : ""));
  }
  if (wh > 0) r.findings.push_back(fmt::format("walhook ≥ 10,000 deliveries/s: {}", met(wh >= 10000)));
  if (wh > 0 && po > 0) r.findings.push_back(fmt::format("walhook / polling = {:.1f}× (target ≥ 3×: {})", wh / po, met(wh >= 3 * po)));
  if (wh > 0 && no > 0) r.findings.push_back(fmt::format("walhook / LISTEN/NOTIFY = {:.1f}×", wh / no));
  return r;
}

// ------------------------------------------------------------------ noisy-neighbour

scenario_report noisy_neighbour(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "noisy-neighbour";
  const int n = o.noisy_healthy + 1;
  auto make = [&](bool slow) {
    workload w;
    w.variant = slow ? "with the slow endpoint" : "without (all answer at once)";
    w.warmup = o.warmup;
    w.schedule = {{o.warmup + o.noisy_measure, o.noisy_rate}};
    w.payload_bytes = o.payload_bytes;
    w.connections = o.connections;
    w.endpoints = make_endpoints(n, 1, o.max_concurrency);
    w.tenants = n;
    auto& s = w.endpoints.back();
    s.measured = false;  // the healthy set is the same 16 endpoints in both variants
    if (slow) s.behaviour.never = true;  // answers after longer than the deadline (never, within it)
    w.watch_path = s.path;
    w.drain = milliseconds(15000);
    return w;
  };
  std::vector<workload> ws{make(true), make(false)};
  const std::string slow_path = ws.front().watch_path;
  auto control = [slow_path](const workload&) -> controller {
    return [slow_path](trial_control& c) {
      if (!c.final) return;
      std::int64_t requests = 0;
      for (const auto& req : c.receiver.requests())
        if (req.path == slow_path) ++requests;
      c.result.extra["slow_requests"] = static_cast<double>(requests);
    };
  };
  run_all(r, runner, o, ws, o.relays, control);
  for (auto& t : r.trials) {
    std::int64_t first = -1, last = -1;
    for (const auto& s : t.samples)
      if (s.pending >= 0) {
        if (first < 0) first = s.pending;
        last = s.pending;
      }
    if (last >= 0) t.extra["slow_pending_rows_at_end"] = static_cast<double>(last);
  }
  auto groups = group_trials(r);
  const std::string peak_key = "peak_concurrency:" + slow_path;
  for (auto kind : o.relays) {
    const auto* with = find_group(groups, ws[0].variant, to_string(kind));
    const auto* without = find_group(groups, ws[1].variant, to_string(kind));
    if (!with || !without) continue;
    double a = median_of(*with, [](const trial_result& t) { return t.commit_to_receipt.p99; });
    double b = median_of(*without, [](const trial_result& t) { return t.commit_to_receipt.p99; });
    double peak = 0;
    for (const auto* t : with->runs)
      if (auto it = t->extra.find(peak_key); it != t->extra.end()) peak = std::max(peak, it->second);
    r.findings.push_back(fmt::format(
        "{}: healthy endpoints' p99 {:.2f} ms with the slow endpoint vs {:.2f} ms without = {:.2f}× (target ≤ 1.2×: {}); slow "
        "endpoint's peak concurrent requests {:.0f} (limit {}: {})",
        to_string(kind), a, b, a / std::max(b, 1e-6), met(a <= 1.2 * b), peak, o.max_concurrency, met(peak <= o.max_concurrency)));
  }
  return r;
}

// ------------------------------------------------------------------ recovery

scenario_report recovery(trial_runner& runner, const scenario_options& o) {
  scenario_report r;
  r.scenario = "recovery";
  auto w = base_workload(o, o.recovery_rate, 8, 1);
  const milliseconds total = o.kill_after + o.down + milliseconds(8000);
  w.schedule = {{total, o.recovery_rate}};
  w.variant = fmt::format("{}, kill -9 at {:.0f} s, down {:.1f} s", rate_label(o.recovery_rate),
                          static_cast<double>(o.kill_after.count()) / 1000.0, static_cast<double>(o.down.count()) / 1000.0);
  w.drain = milliseconds(20000);
  auto control = [&o](const workload&) -> controller {
    struct state {
      bool killed = false;
      std::int64_t kill_us = 0, restart_us = 0;
    };
    auto st = std::make_shared<state>();
    return [st, &o](trial_control& c) {
      auto now_us = [] {
        return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
      };
      if (!c.final && !st->killed && c.elapsed_s * 1000 >= static_cast<double>(o.kill_after.count())) {
        st->killed = true;
        c.relay.kill9();
        st->kill_us = now_us();
        std::this_thread::sleep_for(o.down);
        st->restart_us = now_us();
        c.relay.start();
        return;
      }
      if (!c.final || !st->killed) return;
      // Deliveries resume: the first request the receiver reads after the restart.
      std::int64_t first = -1;
      for (const auto& req : c.receiver.requests())
        if (req.received_at_us > st->restart_us && (first < 0 || req.received_at_us < first)) first = req.received_at_us;
      c.result.extra["resume_ms"] = first > 0 ? static_cast<double>(first - st->restart_us) / 1000.0 : -1;
      c.result.extra["kill_at_s"] = static_cast<double>(st->kill_us - c.result.start_us) / 1e6;
      c.result.extra["restart_at_s"] = static_cast<double>(st->restart_us - c.result.start_us) / 1e6;
    };
  };
  std::vector<relay_kind> relays;
  for (auto k : o.relays)
    if (k == relay_kind::walhook) relays.push_back(k);
  if (relays.empty()) {
    r.findings.push_back("recovery runs walhook only (kill -9 of the walhook process)");
    return r;
  }
  run_all(r, runner, o, {w}, relays, control);
  for (auto& t : r.trials) {
    // Caught up: the first sample after the restart with the backlog back under 50 ms of load.
    double restart = t.extra["restart_at_s"];
    double caught = -1;
    for (const auto& s : t.samples)
      if (s.t_s > restart && s.backlog <= static_cast<std::int64_t>(o.recovery_rate * 0.05)) {
        caught = s.t_s;
        break;
      }
    t.extra["caught_up_ms"] = caught > 0 ? (caught - restart) * 1000 : -1;
    std::int64_t lost = 0;
    for (const auto& ob : t.observations)
      if (ob.receipt_us < 0) ++lost;
    t.extra["lost"] = static_cast<double>(lost);
    t.extra["duplicates"] = static_cast<double>(t.duplicates);
  }
  auto groups = group_trials(r);
  for (const auto& g : groups) {
    double resume = median_of(g, [](const trial_result& t) { return t.extra.at("resume_ms"); });
    r.findings.push_back(fmt::format(
        "{}: deliveries resumed {:.0f} ms after the restart (target ≤ 2,000 ms: {}), caught up after {:.0f} ms; duplicates {:.0f}, "
        "lost {:.0f} (medians of {} runs)",
        g.relay, resume, met(resume >= 0 && resume <= 2000), median_of(g, [](const trial_result& t) { return t.extra.at("caught_up_ms"); }),
        median_of(g, [](const trial_result& t) { return t.extra.at("duplicates"); }),
        median_of(g, [](const trial_result& t) { return t.extra.at("lost"); }), g.runs.size()));
  }
  return r;
}

}  // namespace

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> names{"steady",  "max",        "fanout",     "noisy-neighbour", "recovery",
                                              "custom",  "catchup",    "crash-hung", "pg-restart", "endpoint-scale",
                                              "shards",  "nats",       "amqp",       "ingest"};
  return names;
}

const std::vector<std::string>& suite_scenarios(const std::string& suite) {
  static const std::vector<std::string> all{"steady", "max", "fanout", "noisy-neighbour", "recovery"};
  static const std::vector<std::string> transient{"catchup", "crash-hung", "pg-restart"};
  static const std::vector<std::string> none;
  return suite == "all" ? all : suite == "transient" ? transient : none;
}

scenario_report run_scenario(const std::string& name, trial_runner& runner, const scenario_options& options) {
  if (name == "steady") return steady(runner, options);
  if (name == "max") return max(runner, options);
  if (name == "fanout") return fanout(runner, options);
  if (name == "noisy-neighbour") return noisy_neighbour(runner, options);
  if (name == "recovery") return recovery(runner, options);
  if (name == "custom") return custom(runner, options);
  if (name == "catchup") return catchup(runner, options);
  if (name == "crash-hung") return crash_hung(runner, options);
  if (name == "pg-restart") return pg_restart(runner, options);
  if (name == "endpoint-scale") return endpoint_scale(runner, options);
  if (name == "shards") return shards(runner, options);
  if (name == "nats") return broker_scenario(runner, options, delivery::sink_kind::nats);
  if (name == "amqp") return broker_scenario(runner, options, delivery::sink_kind::amqp);
  if (name == "ingest") return ingest_scenario(runner, options);
  throw std::runtime_error("unknown scenario: " + name);
}

}  // namespace walhook::bench
