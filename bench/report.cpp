#include "bench/report.hpp"

#include "common/json_writer.hpp"
#include "relay/demo/embedded_postgres.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

namespace walhook::bench {
namespace fs = std::filesystem;

namespace {

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string ms(double v) {
  if (v < 10) return fmt::format("{:.2f}", v);
  if (v < 1000) return fmt::format("{:.1f}", v);
  return fmt::format("{:.0f}", v);
}

std::string num(double v, int decimals = 0) { return fmt::format("{:.{}f}", v, decimals); }

std::string mib(double kib) { return kib > 0 ? fmt::format("{:.0f}", kib / 1024.0) : "—"; }

/// A percentile is only a lower bound when undelivered samples reach into its rank.
std::string pct(const trial_group& g, double q, const std::function<double(const latency_stats&)>& f) {
  double v = median_of(g, [&](const trial_result& t) { return f(t.commit_to_receipt); });
  bool bound = false;
  for (const auto* t : g.runs) {
    const auto& s = t->commit_to_receipt;
    if (s.lower_bounds > 0 && static_cast<double>(s.n) * (1.0 - q) < static_cast<double>(s.lower_bounds) + 1) bound = true;
  }
  return (bound ? "≥ " : "") + ms(v);
}

/// Figure names of every disruption of the scenario, in first-seen order.
std::vector<std::string> disruption_keys(const scenario_report& r) {
  std::vector<std::string> keys;
  for (const auto& t : r.trials)
    for (const auto& d : t.disruptions)
      for (const auto& [k, v] : d.figures)
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

std::set<std::string> extra_keys(const scenario_report& r) {
  std::set<std::string> keys;
  for (const auto& t : r.trials)
    for (const auto& [k, v] : t.extra) keys.insert(k);
  return keys;
}

void write_stats(json_writer& j, const char* key, const latency_stats& s) {
  j.key(key).begin_object();
  j.field("n", static_cast<std::int64_t>(s.n));
  j.key("p50").number(s.p50);
  j.key("p90").number(s.p90);
  j.key("p99").number(s.p99);
  j.key("p99_9").number(s.p999);
  j.key("max").number(s.max);
  j.key("mean").number(s.mean);
  j.field("lower_bounds", static_cast<std::int64_t>(s.lower_bounds));
  j.end_object();
}

void write_trial(json_writer& j, const trial_result& t) {
  j.begin_object();
  j.field("variant", t.variant).field("relay", t.relay).field("run", t.run + 1);
  j.key("offered_events_per_s").number(t.offered_events_per_s);
  j.key("window_s").number(t.window_s);
  j.field("transactions", t.txns).field("events", t.events).field("failed_transactions", t.failed_txns);
  j.field("late_transactions", t.late_txns);
  j.field("expected_deliveries", t.expected).field("delivered", t.delivered).field("undelivered", t.undelivered);
  j.field("delivered_total", t.delivered_total);
  j.field("duplicates", t.duplicates).field("non_2xx", t.non_2xx).field("unknown", t.unknown);
  j.key("committed_events_per_s").number(t.committed_per_s);
  j.key("delivered_per_s").number(t.delivered_per_s);
  j.field("server_commit_timestamps", t.server_commit_times);
  write_stats(j, "commit_to_receipt_ms", t.commit_to_receipt);
  write_stats(j, "scheduled_to_receipt_ms", t.scheduled_to_receipt);
  j.key("cpu_seconds").begin_object();
  j.key("relay").number(t.cpu_relay);
  j.key("postgres").number(t.cpu_postgres);
  j.key("receiver").number(t.cpu_receiver);
  j.key("generator").number(t.cpu_generator);
  j.key("walsender").number(t.cpu_walsender);
  j.key("other_load").number(t.cpu_machine_other);
  j.key("elapsed").number(t.cpu_elapsed_s);
  j.end_object();
  j.key("peak_rss_kib").begin_object();
  j.field("relay", static_cast<std::int64_t>(t.rss_relay_kib));
  j.field("postgres", static_cast<std::int64_t>(t.rss_postgres_kib));
  j.field("bench_process", static_cast<std::int64_t>(t.rss_bench_kib));
  j.end_object();
  j.field("max_slot_lag_bytes", t.max_slot_lag_bytes).field("max_sent_lag_bytes", t.max_sent_lag_bytes);
  j.key("max_slot_lag_s").number(t.max_slot_lag_s);
  j.field("max_backlog", t.max_backlog);
  j.field("in_doubt_events", t.in_doubt_events);
  j.key("disruptions").begin_array();
  for (const auto& d : t.disruptions) {
    j.begin_object().field("what", d.what);
    j.key("at_s").number(d.at_s);
    for (const auto& [k, v] : d.figures) j.key(k).number(v);
    j.end_object();
  }
  j.end_array();
  j.key("extra").begin_object();
  for (const auto& [k, v] : t.extra) j.key(k).number(v);
  j.end_object();
  j.key("notes").begin_array();
  for (const auto& n : t.notes) j.string(n);
  j.end_array();
  // Time series, at most ~400 points.
  std::size_t step = std::max<std::size_t>(1, t.samples.size() / 400);
  j.key("samples").begin_array();
  for (std::size_t i = 0; i < t.samples.size(); i += step) {
    const auto& s = t.samples[i];
    j.begin_object();
    j.key("t_s").number(s.t_s);
    j.field("backlog", s.backlog).field("slot_lag_bytes", s.slot_lag_bytes).field("unsent_bytes", s.sent_lag_bytes);
    j.key("slot_lag_s").number(s.slot_lag_s);
    j.field("watched_pending", s.pending);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

/// Runs a gnuplot script in `dir` (the scripts use paths relative to the results directory).
std::string run_gnuplot(const std::string& dir, const std::string& script) {
  std::string out;
  int rc = relay::run_process({"gnuplot", script}, "", out, dir);
  if (rc != 0) return "gnuplot failed (" + std::to_string(rc) + "): " + out;
  return {};
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double median_of(const trial_group& g, const std::function<double(const trial_result&)>& f) {
  std::vector<double> v;
  for (const auto* t : g.runs) v.push_back(f(*t));
  return median(v);
}

std::vector<trial_group> group_trials(const scenario_report& r) {
  std::vector<trial_group> out;
  for (const auto& t : r.trials) {
    auto it = std::find_if(out.begin(), out.end(), [&](const trial_group& g) { return g.variant == t.variant && g.relay == t.relay; });
    if (it == out.end()) {
      out.push_back({t.variant, t.relay, {}});
      it = out.end() - 1;
    }
    it->runs.push_back(&t);
  }
  return out;
}

std::string markdown_machine(const scenario_report& r) {
  const auto& m = r.machine;
  return fmt::format(
      "| | |\n|---|---|\n| CPU | {} × {} |\n| RAM | {} MiB |\n| kernel | {} |\n| database | {} |\n"
      "| walhook | `{}`{} |\n| load average (1/5/15 min) | before {}, after {} |\n| started / finished | {} / {} |\n",
      m.cpus, m.cpu_model, m.memory_mib, m.kernel, r.database, r.walhook_binary,
      r.walhook_version.empty() ? "" : " (" + r.walhook_version + ")", r.load_before, r.load_after, r.started_at,
      r.finished_at);
}

std::string markdown_tables(const scenario_report& r) {
  auto groups = group_trials(r);
  std::string md = r.headline_markdown.empty() ? std::string() : r.headline_markdown + "\n";
  md += r.latency_note.empty()
            ? "Latency is commit-to-receipt (receipt time at the receiver − commit time of the event's transaction, same "
              "host clock), medians over runs of each run's percentile; ≥ marks percentiles reached by deliveries that "
              "never arrived (counted as drain end − commit).\n\n"
            : r.latency_note + " Medians over runs of each run's percentile; ≥ marks percentiles reached by requests "
                               "never answered (counted as drain end − due time).\n\n";
  md += "| variant | relay | runs | offered ev/s | committed ev/s | delivered/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | "
        "sched→receipt p99 ms | undelivered | duplicates |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : groups) {
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", g.variant, g.relay, g.runs.size(),
        num(median_of(g, [](const trial_result& t) { return t.offered_events_per_s; })),
        num(median_of(g, [](const trial_result& t) { return t.committed_per_s; })),
        num(median_of(g, [](const trial_result& t) { return t.delivered_per_s; })),
        pct(g, 0.5, [](const latency_stats& s) { return s.p50; }), pct(g, 0.9, [](const latency_stats& s) { return s.p90; }),
        pct(g, 0.99, [](const latency_stats& s) { return s.p99; }),
        pct(g, 0.999, [](const latency_stats& s) { return s.p999; }), pct(g, 1.0, [](const latency_stats& s) { return s.max; }),
        ms(median_of(g, [](const trial_result& t) { return t.scheduled_to_receipt.p99; })),
        num(median_of(g, [](const trial_result& t) { return static_cast<double>(t.undelivered); })),
        num(median_of(g, [](const trial_result& t) { return static_cast<double>(t.duplicates); })));
  }
  md += "\nResources over load + drain (medians): CPU seconds per process (PostgreSQL: the whole server, its "
        "walsender in parentheses); \"other load\": CPU the rest of the machine used meanwhile (other people's builds "
        "and tests; approximate); CPU per 1,000 deliveries of relay + PostgreSQL (the application's inserts "
        "included); peak resident memory; the largest slot lag (and the part the walsender had not sent yet) and "
        "delivery backlog, sampled every 250 ms; slot lag in seconds is the age of the oldest WAL the slot had not "
        "confirmed (from the sampled LSNs). The polling relays run inside the bench process (their CPU is their "
        "thread's; their memory is the bench's).\n\n";
  md += "| variant | relay | CPU relay s | CPU PostgreSQL s (walsender) | CPU receiver s | CPU generator s | other load s | "
        "relay+PG CPU ms / 1k deliveries | RSS relay MiB | RSS PostgreSQL MiB | max slot lag MiB (unsent) | max slot lag s | "
        "max backlog |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : groups) {
    double per_k = median_of(g, [](const trial_result& t) {
      return t.delivered_total > 0 ? (t.cpu_relay + std::max(0.0, t.cpu_postgres)) * 1e6 / static_cast<double>(t.delivered_total) : 0;
    });
    double lag = median_of(g, [](const trial_result& t) { return static_cast<double>(t.max_slot_lag_bytes); });
    double unsent = median_of(g, [](const trial_result& t) { return static_cast<double>(t.max_sent_lag_bytes); });
    double walsender = median_of(g, [](const trial_result& t) { return t.cpu_walsender; });
    // A difference of independently sampled counters: slightly negative means none.
    double other = median_of(g, [](const trial_result& t) { return t.cpu_machine_other; });
    double lag_s = median_of(g, [](const trial_result& t) { return t.max_slot_lag_s; });
    const double rss_relay = median_of(g, [](const trial_result& t) { return static_cast<double>(t.rss_relay_kib); });
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", g.variant, g.relay,
                      num(median_of(g, [](const trial_result& t) { return t.cpu_relay; }), 2),
                      num(median_of(g, [](const trial_result& t) { return t.cpu_postgres; }), 2) +
                          (walsender >= 0 ? " (" + num(walsender, 2) + ")" : ""),
                      num(median_of(g, [](const trial_result& t) { return t.cpu_receiver; }), 2),
                      num(median_of(g, [](const trial_result& t) { return t.cpu_generator; }), 2),
                      other < 0.05 ? std::string("≈0") : num(other, 2), num(per_k, 1),
                      g.relay == "walhook" || rss_relay > 0 ? mib(rss_relay) : "(in bench)",
                      mib(median_of(g, [](const trial_result& t) { return static_cast<double>(t.rss_postgres_kib); })),
                      lag >= 0 ? fmt::format("{:.2f} ({:.2f})", lag / 1048576.0, std::max(0.0, unsent) / 1048576.0) : "—",
                      lag_s >= 0 ? num(lag_s, 2) : "—",
                      num(median_of(g, [](const trial_result& t) { return static_cast<double>(t.max_backlog); })));
  }
  if (std::any_of(r.trials.begin(), r.trials.end(), [](const trial_result& t) { return !t.disruptions.empty(); })) {
    const auto dkeys = disruption_keys(r);
    md += "\nWhat the scenario did during each run, and what it measured about each step (every run, not medians; "
          "times in seconds since the load started):\n\n| variant | relay | run | # | what | at s |";
    std::string rule = "|---|---|---|---|---|---|";
    for (const auto& k : dkeys) {
      md += " " + k + " |";
      rule += "---|";
    }
    md += "\n" + rule + "\n";
    for (const auto& t : r.trials)
      for (std::size_t i = 0; i < t.disruptions.size(); ++i) {
        const auto& d = t.disruptions[i];
        md += fmt::format("| {} | {} | {} | {} | {} | {:.2f} |", t.variant, t.relay, t.run + 1, i + 1, d.what, d.at_s);
        for (const auto& k : dkeys) {
          auto it = std::find_if(d.figures.begin(), d.figures.end(), [&](const auto& f) { return f.first == k; });
          md += it == d.figures.end() ? " — |" : " " + (std::abs(it->second) >= 100 ? num(it->second) : num(it->second, 2)) + " |";
        }
        md += "\n";
      }
  }
  // Scenario figures: one table per set of groups with the same figures (variants of one
  // scenario can measure different things); with many figures, one row per figure.
  auto figure = [](const trial_group& g, const std::string& k) -> std::string {
    std::vector<double> v;
    for (const auto* t : g.runs)
      if (auto it = t->extra.find(k); it != t->extra.end()) v.push_back(it->second);
    if (v.empty()) return "—";
    const double m = median(v);
    return std::abs(m) >= 100 ? num(m) : num(m, 2);
  };
  std::vector<std::pair<std::set<std::string>, std::vector<const trial_group*>>> tables;
  for (const auto& g : groups) {
    std::set<std::string> keys;
    for (const auto* t : g.runs)
      for (const auto& [k, v] : t->extra) keys.insert(k);
    if (keys.empty()) continue;
    auto it = std::find_if(tables.begin(), tables.end(), [&](const auto& x) { return x.first == keys; });
    if (it == tables.end()) tables.push_back({keys, {&g}});
    else it->second.push_back(&g);
  }
  for (const auto& [keys, members] : tables) {
    md += "\nScenario figures (medians over runs):\n\n";
    if (keys.size() <= 8) {
      md += "| variant | relay | runs |";
      std::string rule = "|---|---|---|";
      for (const auto& k : keys) {
        md += " " + k + " |";
        rule += "---|";
      }
      md += "\n" + rule + "\n";
      for (const auto* g : members) {
        md += fmt::format("| {} | {} | {} |", g->variant, g->relay, g->runs.size());
        for (const auto& k : keys) md += " " + figure(*g, k) + " |";
        md += "\n";
      }
    } else {
      md += "| figure |";
      std::string rule = "|---|";
      for (const auto* g : members) {
        md += fmt::format(" {} / {} ({} run{}) |", g->variant, g->relay, g->runs.size(), g->runs.size() == 1 ? "" : "s");
        rule += "---|";
      }
      md += "\n" + rule + "\n";
      for (const auto& k : keys) {
        md += "| " + k + " |";
        for (const auto* g : members) md += " " + figure(*g, k) + " |";
        md += "\n";
      }
    }
  }
  if (!r.findings.empty()) {
    md += "\n";
    for (const auto& f : r.findings) md += "* " + f + "\n";
  }
  bool any_notes = false;
  for (const auto& t : r.trials) any_notes = any_notes || !t.notes.empty();
  if (any_notes) {
    md += "\n<details><summary>Per-run notes</summary>\n\n";
    for (const auto& t : r.trials)
      for (const auto& n : t.notes) md += fmt::format("* {} / {} run {}: {}\n", t.variant, t.relay, t.run + 1, n);
    md += "\n</details>\n";
  }
  return md;
}

std::vector<std::string> write_reports(const scenario_report& r, const std::string& dir) {
  std::vector<std::string> written;
  fs::create_directories(dir);
  fs::create_directories(dir + "/data");
  const std::string base = dir + "/" + r.scenario;

  // JSON.
  {
    json_writer j;
    j.begin_object();
    j.field("scenario", r.scenario).field("command", r.command);
    j.key("machine").begin_object();
    j.field("cpus", static_cast<std::int64_t>(r.machine.cpus)).field("cpu_model", r.machine.cpu_model);
    j.field("memory_mib", static_cast<std::int64_t>(r.machine.memory_mib)).field("kernel", r.machine.kernel);
    j.end_object();
    j.field("database", r.database).field("walhook_binary", r.walhook_binary).field("walhook_version", r.walhook_version);
    j.field("started_at", r.started_at).field("finished_at", r.finished_at);
    j.field("load_before", r.load_before).field("load_after", r.load_after);
    j.key("findings").begin_array();
    for (const auto& f : r.findings) j.string(f);
    j.end_array();
    j.key("medians").begin_array();
    for (const auto& g : group_trials(r)) {
      j.begin_object().field("variant", g.variant).field("relay", g.relay).field("runs", static_cast<std::int64_t>(g.runs.size()));
      auto m = [&](const char* k, const std::function<double(const trial_result&)>& f) { j.key(k).number(median_of(g, f)); };
      m("delivered_per_s", [](const trial_result& t) { return t.delivered_per_s; });
      m("p50_ms", [](const trial_result& t) { return t.commit_to_receipt.p50; });
      m("p90_ms", [](const trial_result& t) { return t.commit_to_receipt.p90; });
      m("p99_ms", [](const trial_result& t) { return t.commit_to_receipt.p99; });
      m("p99_9_ms", [](const trial_result& t) { return t.commit_to_receipt.p999; });
      m("max_ms", [](const trial_result& t) { return t.commit_to_receipt.max; });
      m("scheduled_p99_ms", [](const trial_result& t) { return t.scheduled_to_receipt.p99; });
      m("undelivered", [](const trial_result& t) { return static_cast<double>(t.undelivered); });
      m("duplicates", [](const trial_result& t) { return static_cast<double>(t.duplicates); });
      m("cpu_relay_s", [](const trial_result& t) { return t.cpu_relay; });
      m("cpu_postgres_s", [](const trial_result& t) { return t.cpu_postgres; });
      m("cpu_receiver_s", [](const trial_result& t) { return t.cpu_receiver; });
      m("cpu_generator_s", [](const trial_result& t) { return t.cpu_generator; });
      m("rss_relay_kib", [](const trial_result& t) { return static_cast<double>(t.rss_relay_kib); });
      m("rss_postgres_kib", [](const trial_result& t) { return static_cast<double>(t.rss_postgres_kib); });
      m("max_slot_lag_bytes", [](const trial_result& t) { return static_cast<double>(t.max_slot_lag_bytes); });
      m("max_slot_lag_s", [](const trial_result& t) { return t.max_slot_lag_s; });
      m("max_sent_lag_bytes", [](const trial_result& t) { return static_cast<double>(t.max_sent_lag_bytes); });
      m("cpu_walsender_s", [](const trial_result& t) { return t.cpu_walsender; });
      m("max_backlog", [](const trial_result& t) { return static_cast<double>(t.max_backlog); });
      j.key("extra").begin_object();
      for (const auto& k : extra_keys(r)) {
        std::vector<double> v;
        for (const auto* t : g.runs)
          if (auto it = t->extra.find(k); it != t->extra.end()) v.push_back(it->second);
        if (!v.empty()) j.key(k).number(median(v));
      }
      j.end_object();
      j.end_object();
    }
    j.end_array();
    j.key("trials").begin_array();
    for (const auto& t : r.trials) write_trial(j, t);
    j.end_array();
    j.end_object();
    std::ofstream(base + ".json") << j.str() << "\n";
    written.push_back(base + ".json");
  }

  // Markdown.
  {
    std::ofstream md(base + ".md");
    md << "# walhook-bench: " << r.scenario << "\n\n`" << r.command << "`\n\n" << markdown_machine(r) << "\n"
       << markdown_tables(r);
    md << "\n![latency CDF](" << r.scenario << "-cdf.png)\n";
    md << "\n![backlog and slot lag over time](" << r.scenario << "-timeline.png)\n";
    for (const auto& p : r.plots) md << "\n![" << p.title << "](" << r.scenario << "-" << p.name << ".png)\n";
    written.push_back(base + ".md");
  }

  // Plots: pooled commit-to-receipt CDF per group; backlog and slot lag of each group's first run.
  auto groups = group_trials(r);
  std::string cdf_plots, backlog_plots, lag_plots;
  bool any_lag = false;
  int color = 0;
  for (const auto& g : groups) {
    ++color;  // the same colour for a group in every panel
    const std::string rel = fmt::format("data/{}-{}-{}", r.scenario, slug(g.variant), g.relay);
    const std::string stem = dir + "/" + rel;
    const std::string title = groups.size() > 1 && !g.variant.empty() ? g.relay + ", " + g.variant : g.relay;
    std::vector<double> pooled;
    for (const auto* t : g.runs) pooled.insert(pooled.end(), t->latencies_ms.begin(), t->latencies_ms.end());
    std::sort(pooled.begin(), pooled.end());
    if (!pooled.empty()) {
      std::ofstream out(stem + ".cdf");
      out << "# commit-to-receipt ms, fraction of deliveries at or below (pooled over runs)\n";
      const std::size_t n = pooled.size();
      std::size_t last = n;
      auto emit = [&](std::size_t i) {
        if (i == last) return;
        last = i;
        out << fmt::format("{:.4f} {:.6f}\n", std::max(pooled[i], 0.001), static_cast<double>(i + 1) / static_cast<double>(n));
      };
      for (int k = 0; k < 1000; ++k) emit(std::min(n - 1, n * static_cast<std::size_t>(k) / 1000));
      for (double q : {0.999, 0.9995, 0.9999})
        emit(std::min(n - 1, static_cast<std::size_t>(q * static_cast<double>(n))));
      emit(n - 1);
      cdf_plots += fmt::format("{}'{}' using 1:2 with lines lw 2 lc {} title '{}'", cdf_plots.empty() ? "" : ", ", rel + ".cdf",
                               color, title);
    }
    const auto* first = g.runs.front();
    if (!first->samples.empty()) {
      std::ofstream out(stem + ".timeline");
      out << "# seconds since load start, backlog (deliveries), slot lag (MiB, -1: none), watched endpoint pending rows, "
             "WAL not yet sent by the walsender (MiB, -1: none)\n";
      for (const auto& s : first->samples)
        out << fmt::format("{:.3f} {} {:.3f} {} {:.3f}\n", s.t_s, s.backlog,
                           s.slot_lag_bytes >= 0 ? static_cast<double>(s.slot_lag_bytes) / 1048576.0 : -1.0, s.pending,
                           s.sent_lag_bytes >= 0 ? static_cast<double>(s.sent_lag_bytes) / 1048576.0 : -1.0);
      backlog_plots += fmt::format("{}'{}' using 1:2 with lines lw 2 lc {} title '{}'", backlog_plots.empty() ? "" : ", ",
                                   rel + ".timeline", color, title);
      if (first->max_slot_lag_bytes >= 0) {
        any_lag = true;
        lag_plots += fmt::format("{}'{}' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc {} title '{} (unconfirmed)', "
                                 "'{}' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc {} title '{} (not yet sent)'",
                                 lag_plots.empty() ? "" : ", ", rel + ".timeline", color, title, rel + ".timeline", color, title);
      }
    }
  }
  if (!cdf_plots.empty()) {
    std::ofstream gp(base + "-cdf.gp");
    gp << "set terminal pngcairo size 1000,620 font 'sans,10'\n"
       << "set output '" << r.scenario << "-cdf.png'\n"
       << "set title 'walhook-bench " << r.scenario << ": "
       << (r.latency_note.empty() ? "commit-to-receipt latency" : "latency (as in the report)") << " CDF (" << r.machine.cpus
       << " CPUs, pooled over runs)'\n"
       << "set logscale x\nset xlabel 'latency (ms, log scale)'\nset ylabel 'fraction of deliveries'\n"
       << "set yrange [0:1.001]\nset grid xtics ytics mxtics\nset key bottom right\n"
       << "set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 2 lc rgb 'gray'\n"
       << "set label 'p99' at graph 0.01, first 0.975 tc rgb 'gray'\n"
       << "plot " << cdf_plots << "\n";
    gp.close();
    if (auto err = run_gnuplot(dir, r.scenario + "-cdf.gp"); err.empty()) written.push_back(base + "-cdf.png");
    else written.push_back("(" + err + ")");
  }
  if (!backlog_plots.empty()) {
    std::ofstream gp(base + "-timeline.gp");
    gp << "set terminal pngcairo size 1000," << (any_lag ? 820 : 480) << " font 'sans,10'\n"
       << "set output '" << r.scenario << "-timeline.png'\n"
       << (any_lag ? "set multiplot layout 2,1 title 'walhook-bench " + r.scenario + " (first run of each)'\n" : "")
       << "set grid\nset key top left\nset xlabel 'seconds since the load started'\n"
       << "set ylabel '" << (r.backlog_label.empty() ? "backlog (deliveries committed − received)" : r.backlog_label) << "'\n"
       << (any_lag ? "" : "set title 'walhook-bench " + r.scenario + ": " + (r.backlog_label.empty() ? "delivery backlog" : r.backlog_label) + " (first run of each)'\n")
       << "plot " << backlog_plots << "\n";
    if (any_lag) gp << "set ylabel 'slot lag (MiB)'\nplot " << lag_plots << "\nunset multiplot\n";
    gp.close();
    if (auto err = run_gnuplot(dir, r.scenario + "-timeline.gp"); err.empty()) written.push_back(base + "-timeline.png");
    else written.push_back("(" + err + ")");
  }
  for (const auto& p : r.plots) {
    const std::string data = "data/" + r.scenario + "-" + p.name + ".dat", stem = r.scenario + "-" + p.name;
    std::ofstream(dir + "/" + data) << p.data;
    std::ofstream gp(dir + "/" + stem + ".gp");
    gp << "set terminal pngcairo size 1200,520 font 'sans,10'\nset output '" << stem << ".png'\ndatafile = '" << data << "'\n"
       << p.script;
    gp.close();
    if (auto err = run_gnuplot(dir, stem + ".gp"); err.empty()) written.push_back(dir + "/" + stem + ".png");
    else written.push_back("(" + err + ")");
  }
  return written;
}

}  // namespace walhook::bench
