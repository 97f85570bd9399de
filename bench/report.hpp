#pragma once
// Results of a scenario: every trial, grouped by (variant, relay) with the median of each
// figure over the runs, written as a markdown table (<scenario>.md), a JSON document
// (<scenario>.json) and gnuplot PNGs (<scenario>-cdf.png: commit-to-receipt latency CDF;
// <scenario>-timeline.png: backlog and slot lag over time) under the results directory.

#include "bench/proc_stats.hpp"
#include "bench/trial.hpp"

#include <functional>
#include <string>
#include <vector>

namespace walhook::bench {

struct scenario_report {
  std::string scenario;
  std::string command;          ///< the command line that produced it
  machine_description machine;
  std::string database;         ///< bench_cluster::description()
  std::string walhook_binary;
  std::string walhook_version;  ///< git describe of the source tree, if known
  std::string started_at, finished_at;  ///< ISO 8601
  std::string load_before, load_after;  ///< /proc/loadavg
  std::vector<trial_result> trials;
  /// Scenario-level lines for the summary (ratios against targets, the ladder, …).
  std::vector<std::string> findings;
  /// What the latency columns measure, when not commit-to-receipt (replaces the generic sentence).
  std::string latency_note;
  /// The timeline's y label for trial_result::samples' backlog, when it is not deliveries.
  std::string backlog_label;
  /// A scenario's own markdown (its headline table), printed before the generic tables.
  std::string headline_markdown;
  /// A scenario's own plots, besides the CDF and the timeline: <scenario>-<name>.png, drawn by
  /// `script` (gnuplot commands; the terminal and output are set, and `datafile` names the file
  /// written from `data`, data/<scenario>-<name>.dat).
  struct plot {
    std::string name, title, data, script;
  };
  std::vector<plot> plots;
};

/// The trials of one (variant, relay), in run order.
struct trial_group {
  std::string variant, relay;
  std::vector<const trial_result*> runs;
};
std::vector<trial_group> group_trials(const scenario_report& r);

double median(std::vector<double> v);
/// Median over a group's runs of one figure.
double median_of(const trial_group& g, const std::function<double(const trial_result&)>& f);

/// The markdown section of a scenario (no machine description).
std::string markdown_tables(const scenario_report& r);
/// Writes <dir>/<scenario>.md, <scenario>.json and the PNGs (when gnuplot is installed).
/// Returns the files written.
std::vector<std::string> write_reports(const scenario_report& r, const std::string& dir);
/// The machine and database description as markdown.
std::string markdown_machine(const scenario_report& r);

}  // namespace walhook::bench
