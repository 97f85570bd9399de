// The docs name only metrics walhook exports, and docs/architecture.md names every one: the
// names are taken from relay::render_prometheus of a snapshot with every field set (so every
// family is printed), and compared with each `walhook_…` / `process_…` word of the repository's
// markdown, of the alert rules (compose/prometheus/rules.yml) and of the Grafana dashboard
// (compose/grafana/walhook.json). A failure names the file, its line and the word.

#include "relay/core/metrics.hpp"
#include "relay/inbox/ingest_metrics.hpp"
#include "tests/docs/markdown.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::relay;
using namespace walhook::test::docs;

namespace {

/// A snapshot in which every optional part is present, so render_prometheus prints every family.
metrics_snapshot every_family() {
  metrics_snapshot s;
  s.streaming = true;  // the leader's series (oldest pending age) are printed only while streaming
  s.slot_wal_status = "reserved";
  s.slot_safe_wal_size = 1;
  s.slot_retained_bytes = 1;
  s.delivery.latency[0].observe(0.001);
  endpoint_metrics e;
  e.id = 1;
  e.oldest_pending_age_s = 1.0;
  e.counters.attempts[0] = 1;
  e.status = "active";  // the leader's endpoint states
  s.endpoints.push_back(e);
  s.process = process_metrics{.cpu_seconds = 1, .resident_bytes = 1, .virtual_bytes = 1, .start_time_seconds = 1,
                              .open_fds = 1.0, .max_fds = 1.0};
  return s;
}

struct exported {
  std::set<std::string> families;  ///< from `# TYPE name type`
  std::set<std::string> samples;   ///< sample names, e.g. walhook_attempt_duration_seconds_bucket
};

exported exported_names() {
  exported out;
  // walhook run's families, and walhook ingest's (its own /metrics).
  std::istringstream text(render_prometheus(every_family()) +
                          inbox::render_ingest_metrics({{{"s", "accepted"}, 1}}, inbox::group_commit_stats{}));
  for (std::string line; std::getline(text, line);) {
    if (line.starts_with("# TYPE ")) {
      out.families.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (!line.starts_with("#")) {
      out.samples.insert(line.substr(0, line.find_first_of("{ ")));
    }
  }
  return out;
}

/// `walhook_…` words of the docs that are not metrics: sql/roles.sql's roles, the endpoints'
/// publication, a field of the bench's workloads, an outbox bridge's trigger (migration 009).
/// (Placeholders such as `walhook_K_of_N` or `walhook_relay_<room>`, prefixes such as `process_*`
/// and file names are skipped anyway.)
const std::set<std::string> not_metrics{"walhook_migrator",  "walhook_relay", "walhook_app",     "walhook_admin",
                                        "walhook_endpoints", "walhook_args",  "process_metrics", "walhook_outbox_bridge",
                                        "walhook_ingest"};
/// Beginnings of CMake target names (walhook_relay_core, walhook_link_check_cli, …): not metrics.
const std::vector<std::string> not_metric_prefixes{"walhook_relay_", "walhook_link_check", "walhook_test",
                                                   "walhook_it_",    "walhook_options",    "walhook_bench"};

/// A metric-like word of a doc and its line.
struct named {
  std::string word;
  int line = 0;
};

std::vector<named> metric_words(const std::string& text) {
  static const std::regex word(R"((^|[^A-Za-z0-9_./-])((walhook|process)_[A-Za-z0-9_]*))");
  std::vector<named> out;
  for (std::sregex_iterator it(text.begin(), text.end(), word), end; it != end; ++it) {
    const std::string w = (*it)[2];
    const auto after = static_cast<std::size_t>(it->position(2) + it->length(2));
    const char next = after < text.size() ? text[after] : '\n';
    const bool placeholder = next == '<' || w.ends_with("_") ||
                             std::any_of(w.begin(), w.end(), [](unsigned char c) { return std::isupper(c); });
    const bool file_name = next == '.' && after + 1 < text.size() && std::isalpha(static_cast<unsigned char>(text[after + 1]));
    const bool target = std::any_of(not_metric_prefixes.begin(), not_metric_prefixes.end(),
                                    [&](const std::string& p) { return w.starts_with(p); });
    if (placeholder || file_name || target || not_metrics.contains(w)) continue;
    const auto line = 1 + std::count(text.begin(), text.begin() + it->position(2), '\n');
    out.push_back({w, static_cast<int>(line)});
  }
  return out;
}

}  // namespace

TEST_CASE("every metric the docs name is one walhook exports") {
  const auto names = exported_names();
  REQUIRE(names.families.size() > 40);
  int checked = 0;
  for (const auto& path : markdown_paths()) {
    const auto doc = read_markdown(path);
    for (const auto& [w, line] : metric_words(doc.text)) {
      ++checked;
      if (!names.families.contains(w) && !names.samples.contains(w))
        FAIL_CHECK(doc.path << ":" << line << ": `" << w
                            << "` is not a metric walhook exports (relay::render_prometheus prints no such family), "
                               "nor a name tests/docs/metrics_test.cpp lists as not a metric");
    }
  }
  MESSAGE(checked, " metric names checked");
  CHECK(checked > 40);
}

TEST_CASE("docs/architecture.md names every metric walhook exports") {
  const auto doc = read_markdown("docs/architecture.md");
  std::set<std::string> named_there;
  for (const auto& [w, _] : metric_words(doc.text)) named_there.insert(w);
  for (const auto& family : exported_names().families)
    if (!named_there.contains(family))
      FAIL_CHECK(doc.path << ": `" << family << "` is exported on /metrics but not described (section Metrics)");
}

TEST_CASE("the alert rules and the Grafana dashboard name only metrics walhook exports, and recorded series the rules define") {
  const auto names = exported_names();
  const auto rules = read_markdown("compose/prometheus/rules.yml");
  const auto dashboard = read_markdown("compose/grafana/walhook.json");
  // Recorded series (level:metric:operations) are the rules' own.
  std::set<std::string> recorded;
  static const std::regex record(R"(record:\s*([A-Za-z0-9_:]+))");
  for (std::sregex_iterator it(rules.text.begin(), rules.text.end(), record), end; it != end; ++it) recorded.insert((*it)[1]);
  CHECK(recorded.size() >= 4);
  static const std::regex series(R"((^|[^A-Za-z0-9_:])((walhook|process)[A-Za-z0-9_]*(:[A-Za-z0-9_:]+)?))");
  int checked = 0;
  for (const auto* file : {&rules, &dashboard}) {
    const std::string& text = file->text;
    for (std::sregex_iterator it(text.begin(), text.end(), series), end; it != end; ++it) {
      const std::string w = (*it)[2];
      const auto after = static_cast<std::size_t>(it->position(2) + it->length(2));
      // Prose ("walhook status", "process"), files and tables ("walhook.outbox").
      if (w.find_first_of("_:") == std::string::npos || (after < text.size() && (text[after] == '.' || text[after] == '/')))
        continue;
      const auto line = 1 + std::count(text.begin(), text.begin() + it->position(2), '\n');
      ++checked;
      const bool known = w.find(':') != std::string::npos ? recorded.contains(w)
                                                           : names.families.contains(w) || names.samples.contains(w);
      if (!known)
        FAIL_CHECK(file->path << ":" << line << ": `" << w << "` is neither a metric walhook exports nor a series "
                              << "compose/prometheus/rules.yml records");
    }
  }
  MESSAGE(checked, " series names checked");
  CHECK(checked > 30);
}
