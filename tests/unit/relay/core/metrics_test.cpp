// relay/core/metrics.hpp: the Prometheus text of a snapshot, checked line by line and by parsing it
// as the text exposition format; the /proc/self/stat parser.

#include "relay/core/metrics.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <regex>
#include <set>

using namespace walhook;
using namespace walhook::relay;
using delivery::outcome_class;

namespace {

std::size_t index_of(outcome_class c) { return static_cast<std::size_t>(c); }

/// One sample line of the text format: name, labels (name → unescaped value), value.
struct sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

/// Parses `{a="x",b="y\"z"}` (after the metric name); false if malformed.
bool parse_labels(const std::string& text, std::size_t& i, std::vector<std::pair<std::string, std::string>>& out) {
  static const std::regex label_name("[a-zA-Z_][a-zA-Z0-9_]*");
  if (i >= text.size() || text[i] != '{') return true;
  ++i;
  while (i < text.size() && text[i] != '}') {
    auto eq = text.find('=', i);
    if (eq == std::string::npos) return false;
    std::string name = text.substr(i, eq - i);
    if (!std::regex_match(name, label_name)) return false;
    i = eq + 1;
    if (i >= text.size() || text[i] != '"') return false;
    ++i;
    std::string value;
    for (;; ++i) {
      if (i >= text.size()) return false;
      char c = text[i];
      if (c == '"') break;
      if (c == '\n') return false;
      if (c == '\\') {
        if (++i >= text.size()) return false;
        char e = text[i];
        if (e == 'n') value += '\n';
        else if (e == '\\' || e == '"') value += e;
        else return false;  // the only escapes the format has
      } else {
        value += c;
      }
    }
    ++i;  // the closing quote
    out.emplace_back(std::move(name), std::move(value));
    if (i < text.size() && text[i] == ',') ++i;
    else if (i >= text.size() || text[i] != '}') return false;
  }
  if (i >= text.size()) return false;
  ++i;  // '}'
  return true;
}

/// A parsed exposition: families in order with their TYPE, and their samples. Fails the test on
/// any line that is not valid text format 0.0.4, a HELP or TYPE given twice or after the
/// family's samples, or a sample of a family that is not the current one (samples must follow
/// their family's header, without interleaving).
struct exposition {
  std::vector<std::string> order;
  std::map<std::string, std::string> type;
  std::map<std::string, std::vector<sample>> samples;

  explicit exposition(const std::string& text) {
    static const std::regex metric_name("[a-zA-Z_:][a-zA-Z0-9_:]*");
    REQUIRE(!text.empty());
    REQUIRE(text.back() == '\n');
    std::set<std::string> helped, closed, series;
    std::string current;
    for (std::size_t at = 0; at < text.size();) {
      auto nl = text.find('\n', at);
      std::string line = text.substr(at, nl - at);
      at = nl + 1;
      CAPTURE(line);
      REQUIRE(!line.empty());
      if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
        auto rest = line.substr(7);
        auto sp = rest.find(' ');
        REQUIRE(sp != std::string::npos);
        auto name = rest.substr(0, sp);
        REQUIRE(std::regex_match(name, metric_name));
        REQUIRE(!closed.contains(name));  // a family's header comes once, before its samples
        if (name != current) {
          if (!current.empty()) closed.insert(current);
          current = name;
          order.push_back(name);
        }
        if (line[2] == 'H') {
          REQUIRE(helped.insert(name).second);
        } else {
          auto t = rest.substr(sp + 1);
          REQUIRE((t == "counter" || t == "gauge" || t == "histogram" || t == "summary" || t == "untyped"));
          REQUIRE(type.emplace(name, t).second);
        }
        continue;
      }
      REQUIRE(line[0] != '#');
      sample s;
      std::size_t i = 0;
      while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
      s.name = line.substr(0, i);
      REQUIRE(std::regex_match(s.name, metric_name));
      REQUIRE(parse_labels(line, i, s.labels));
      REQUIRE(i < line.size());
      REQUIRE(line[i] == ' ');
      auto value = line.substr(i + 1);
      REQUIRE(!value.empty());
      REQUIRE(value.find(' ') == std::string::npos);  // no timestamps here
      if (value == "+Inf") s.value = std::numeric_limits<double>::infinity();
      else {
        std::size_t used = 0;
        s.value = std::stod(value, &used);
        REQUIRE(used == value.size());
      }
      // The sample belongs to the current family: its name, or a histogram's _bucket/_sum/_count.
      REQUIRE(!current.empty());
      bool ours = s.name == current;
      if (type[current] == "histogram")
        ours = s.name == current + "_bucket" || s.name == current + "_sum" || s.name == current + "_count";
      REQUIRE(ours);
      REQUIRE(type.contains(current));
      REQUIRE(helped.contains(current));
      std::string key = s.name;
      for (auto& [k, v] : s.labels) key += "|" + k + "=" + v;
      REQUIRE(series.insert(key).second);  // no series twice
      samples[current].push_back(std::move(s));
    }
  }

  bool has_family(const std::string& name) const { return type.contains(name); }
  /// Whether the family `name` has at least one sample.
  bool has_sample(const std::string& name) const {
    auto it = samples.find(name);
    return it != samples.end() && !it->second.empty();
  }
  /// The value of the series `name` with exactly these labels, if present.
  std::optional<double> value(const std::string& family, const std::string& name,
                              const std::vector<std::pair<std::string, std::string>>& labels = {}) const {
    auto it = samples.find(family);
    if (it == samples.end()) return std::nullopt;
    for (const auto& s : it->second)
      if (s.name == name && s.labels == labels) return s.value;
    return std::nullopt;
  }
};

metrics_snapshot example() {
  metrics_snapshot s;
  s.events = 12;
  s.delivery.delivered = 10;
  s.delivery.marked_sending = 2;
  auto& ok = s.delivery.latency[index_of(outcome_class::success)];
  ok.counts[0] = 3;       // ≤ 5 ms
  ok.counts[4] = 2;       // ≤ 100 ms
  ok.counts.back() = 1;   // > 10 s
  ok.sum_s = 11.5;
  auto& timeouts = s.delivery.latency[index_of(outcome_class::timeout)];
  timeouts.counts[10] = 4;  // ≤ 10 s
  timeouts.sum_s = 40;
  s.streaming = true;
  s.writes_refused = 3;
  s.event_bytes = 1048576;
  s.confirmed = lsn{0x1000};
  s.received = lsn{0x1800};
  endpoint_counters first;
  first.attempts[index_of(outcome_class::server)] = 4;
  first.attempts[index_of(outcome_class::success)] = 6;
  first.delivered = 6;
  first.dead = 1;
  s.endpoints = {{1, 5, 2, 30.5, first, std::nullopt, 0}, {2, 0, 0, std::nullopt, {}, std::nullopt, 0}};
  s.endpoints[0].status = "paused_by_breaker";
  s.endpoints[0].consecutive_failures = 20;
  s.endpoints[1].status = "active";
  s.slot_wal_status = "unreserved";
  s.slot_retained_bytes = 1 << 20;
  s.slot_safe_wal_size = -4096;
  s.version = "0.1.0";
  s.commit = "abc1234";
  s.process = process_metrics{.cpu_seconds = 1.25,
                              .resident_bytes = 4096.0 * 100,
                              .virtual_bytes = 1e9,
                              .start_time_seconds = 1.7e9,
                              .open_fds = 12,
                              .max_fds = 1024};
  return s;
}

}  // namespace

TEST_CASE("render_prometheus: counters, gauges, per-endpoint series and a cumulative histogram per outcome class") {
  auto text = render_prometheus(example());
  auto has = [&](const std::string& line) {
    CAPTURE(line);
    CHECK(text.find(line + "\n") != std::string::npos);
  };
  auto lacks = [&](const std::string& part) {
    CAPTURE(part);
    CHECK(text.find(part) == std::string::npos);
  };
  has("# TYPE walhook_events_total counter");
  has("walhook_events_total 12");
  has("walhook_delivered_total 10");
  has("walhook_marked_sending_total 2");
  has("walhook_streaming 1");
  has("walhook_writes_refused_total 3");
  has("walhook_event_bytes 1048576");
  has("walhook_slot_wal_status{status=\"reserved\"} 0");
  has("walhook_slot_wal_status{status=\"unreserved\"} 1");
  has("walhook_slot_retained_wal_bytes 1048576");
  has("walhook_slot_safe_wal_size_bytes -4096");
  has("walhook_confirmed_lsn 4096");
  has("walhook_slot_lag_bytes 2048");
  has("# TYPE walhook_attempt_duration_seconds histogram");
  has("walhook_attempt_duration_seconds_bucket{outcome=\"2xx\",le=\"0.005\"} 3");
  has("walhook_attempt_duration_seconds_bucket{outcome=\"2xx\",le=\"0.05\"} 3");
  has("walhook_attempt_duration_seconds_bucket{outcome=\"2xx\",le=\"0.1\"} 5");
  has("walhook_attempt_duration_seconds_bucket{outcome=\"2xx\",le=\"10\"} 5");
  has("walhook_attempt_duration_seconds_bucket{outcome=\"2xx\",le=\"+Inf\"} 6");
  has("walhook_attempt_duration_seconds_count{outcome=\"2xx\"} 6");
  has("walhook_attempt_duration_seconds_sum{outcome=\"2xx\"} 11.5");
  has("walhook_attempt_duration_seconds_bucket{outcome=\"timeout\",le=\"5\"} 0");
  has("walhook_attempt_duration_seconds_bucket{outcome=\"timeout\",le=\"10\"} 4");
  has("walhook_attempt_duration_seconds_count{outcome=\"timeout\"} 4");
  lacks("outcome=\"5xx\",le=");  // no attempt of that class: no histogram series for it
  has("walhook_endpoint_queued{endpoint=\"1\"} 5");
  has("walhook_endpoint_in_flight{endpoint=\"1\"} 2");
  has("walhook_endpoint_oldest_pending_age_seconds{endpoint=\"1\"} 30.5");
  lacks("walhook_endpoint_oldest_pending_age_seconds{endpoint=\"2\"}");
  // One series per endpoint, its current status; the breaker's count.
  has("walhook_endpoint_status{endpoint=\"1\",status=\"paused_by_breaker\"} 1");
  has("walhook_endpoint_status{endpoint=\"2\",status=\"active\"} 1");
  lacks("walhook_endpoint_status{endpoint=\"1\",status=\"active\"}");
  has("walhook_endpoint_consecutive_failures{endpoint=\"1\"} 20");
  has("walhook_endpoint_consecutive_failures{endpoint=\"2\"} 0");
  // Per endpoint and outcome: only the non-zero pairs.
  has("walhook_endpoint_attempts_total{endpoint=\"1\",sink=\"http\",outcome=\"5xx\"} 4");
  has("walhook_endpoint_attempts_total{endpoint=\"1\",sink=\"http\",outcome=\"2xx\"} 6");
  lacks("walhook_endpoint_attempts_total{endpoint=\"1\",sink=\"http\",outcome=\"4xx\"}");
  lacks("walhook_endpoint_attempts_total{endpoint=\"2\"");
  // Delivered and dead for every endpoint in the directory, zero included (rate() works from the start).
  has("walhook_endpoint_delivered_total{endpoint=\"1\"} 6");
  has("walhook_endpoint_dead_total{endpoint=\"1\"} 1");
  has("walhook_endpoint_delivered_total{endpoint=\"2\"} 0");
  has("walhook_endpoint_dead_total{endpoint=\"2\"} 0");
  has("walhook_build_info{version=\"0.1.0\",commit=\"abc1234\"} 1");
  has("process_cpu_seconds_total 1.25");
  has("# TYPE process_cpu_seconds_total counter");
  has("process_resident_memory_bytes 409600");
  has("process_virtual_memory_bytes 1000000000");
  has("process_start_time_seconds 1700000000");
  has("process_open_fds 12");
  has("process_max_fds 1024");
  // The HELP text states the bound.
  CHECK(text.find("at most endpoints x 15") != std::string::npos);
}

TEST_CASE("render_prometheus: the output is valid text exposition, each histogram consistent") {
  auto s = example();
  // A version with the characters the format escapes must still parse, and come back as it was.
  s.version = "0.1.0 \"rc\\1\"\nx";
  auto text = render_prometheus(s);
  exposition e(text);
  CHECK(e.order.size() >= 35);
  CHECK(e.type.at("walhook_endpoint_attempts_total") == "counter");
  CHECK(e.type.at("walhook_attempt_duration_seconds") == "histogram");
  CHECK(e.type.at("walhook_build_info") == "gauge");
  CHECK(e.value("walhook_build_info", "walhook_build_info", {{"version", s.version}, {"commit", "abc1234"}}) == 1);
  CHECK(e.value("walhook_endpoint_attempts_total", "walhook_endpoint_attempts_total",
                {{"endpoint", "1"}, {"sink", "http"}, {"outcome", "5xx"}}) == 4);
  // Each class's histogram: buckets cumulative and non-decreasing in le, +Inf == _count, and the
  // classes' counts add up to what was observed.
  std::map<std::string, std::vector<std::pair<double, double>>> buckets;
  std::map<std::string, double> counts;
  for (const auto& smp : e.samples.at("walhook_attempt_duration_seconds")) {
    std::map<std::string, std::string> l(smp.labels.begin(), smp.labels.end());
    REQUIRE(l.contains("outcome"));
    if (smp.name.ends_with("_bucket")) {
      REQUIRE(l.contains("le"));
      double le = l["le"] == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(l["le"]);
      buckets[l["outcome"]].emplace_back(le, smp.value);
    } else if (smp.name.ends_with("_count")) {
      counts[l["outcome"]] = smp.value;
    }
  }
  CHECK(buckets.size() == 2);
  double total = 0;
  for (auto& [outcome, b] : buckets) {
    CAPTURE(outcome);
    REQUIRE(b.size() == latency_histogram::bounds.size() + 1);
    for (std::size_t i = 1; i < b.size(); ++i) {
      CHECK(b[i].first > b[i - 1].first);
      CHECK(b[i].second >= b[i - 1].second);
    }
    CHECK(b.back().first == std::numeric_limits<double>::infinity());
    CHECK(b.back().second == counts.at(outcome));
    total += counts.at(outcome);
  }
  CHECK(total == 6 + 4);
}

TEST_CASE("render_prometheus: a standby exports no oldest-pending series, and no slot WAL it was not given") {
  auto s = example();
  s.streaming = false;
  s.slot_wal_status.reset();
  s.slot_retained_bytes.reset();
  s.slot_safe_wal_size.reset();
  auto text = render_prometheus(s);
  exposition e(text);
  CHECK(e.value("walhook_streaming", "walhook_streaming") == 0);
  CHECK(!e.has_family("walhook_endpoint_oldest_pending_age_seconds"));
  CHECK(!e.has_family("walhook_slot_wal_status"));
  // The engine gives a standby's endpoints no status (its directory is not current): no series.
  auto standby = s;
  for (auto& ep : standby.endpoints) ep.status.reset();
  exposition es(render_prometheus(standby));
  CHECK(!es.has_sample("walhook_endpoint_status"));
  CHECK(!es.has_sample("walhook_endpoint_consecutive_failures"));
  CHECK(!e.has_family("walhook_slot_retained_wal_bytes"));
  // Its own counters, build and process metrics stay.
  CHECK(e.value("walhook_endpoint_attempts_total", "walhook_endpoint_attempts_total",
                {{"endpoint", "1"}, {"sink", "http"}, {"outcome", "2xx"}}) == 6);
  CHECK(e.has_family("walhook_build_info"));
  CHECK(e.has_family("process_cpu_seconds_total"));
}

TEST_CASE("render_prometheus: with nothing counted yet, families have no samples but still parse") {
  metrics_snapshot s;
  s.version = "0.1.0";
  s.commit = "unknown";
  exposition e(render_prometheus(s));
  CHECK(e.has_family("walhook_attempt_duration_seconds"));
  CHECK(!e.samples.contains("walhook_attempt_duration_seconds"));
  CHECK(!e.samples.contains("walhook_endpoint_attempts_total"));
  CHECK(!e.has_family("process_cpu_seconds_total"));  // not read: not printed
  CHECK(e.value("walhook_build_info", "walhook_build_info", {{"version", "0.1.0"}, {"commit", "unknown"}}) == 1);
}

TEST_CASE("escape_label_value: backslash, double quote and newline") {
  CHECK(escape_label_value("plain 0.1.0") == "plain 0.1.0");
  CHECK(escape_label_value("a\"b") == "a\\\"b");
  CHECK(escape_label_value("a\\b") == "a\\\\b");
  CHECK(escape_label_value("a\nb") == "a\\nb");
  CHECK(escape_label_value("\\\"\n") == "\\\\\\\"\\n");
}

TEST_CASE("parse_proc_stat: the fields proc(5) numbers, after a command with spaces and parentheses") {
  // 52 fields as Linux 6 writes them; comm "(my (walhook) 2)".
  const std::string stat =
      "4242 (my (walhook) 2) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 3 0 123400 987654321 2500 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
  auto m = parse_proc_stat(stat, 100, 4096, 1'700'000'000);
  REQUIRE(m);
  CHECK(m->cpu_seconds == doctest::Approx(3.0));              // (250 + 50) / 100
  CHECK(m->start_time_seconds == doctest::Approx(1'700'001'234));  // btime + 123400 / 100
  CHECK(m->virtual_bytes == 987654321);
  CHECK(m->resident_bytes == 2500.0 * 4096);
  // Truncated anywhere before rss, or not a number: no value rather than a wrong one.
  auto rss_at = stat.find(" 2500 ");
  for (std::size_t cut = 0; cut <= rss_at; cut += 7) {
    CAPTURE(cut);
    CHECK(!parse_proc_stat(stat.substr(0, cut), 100, 4096, 0));
  }
  std::string bad = stat;
  bad.replace(bad.find(" 250 "), 5, " 2x0 ");
  CHECK(!parse_proc_stat(bad, 100, 4096, 0));
}
