#include "bench/policies.hpp"

#include "delivery/job.hpp"
#include "delivery/rate_limit.hpp"
#include "relay/core/payload_filter.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace walhook::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// A webhook body of about `bytes` bytes: the fields the filters read, then filler.
std::string body_of(std::size_t bytes, int amount, const char* currency) {
  delivery::event ev;
  ev.id = "0b5e1c2a-0000-4000-8000-000000000001";
  ev.type = "order.paid";
  ev.created_at = "2026-12-03T10:00:00.000000Z";
  std::string payload = fmt::format(
      R"({{"order_id": 7, "amount": {}, "currency": "{}", "customer": {{"id": "c_42", "country": "FR", "tier": "gold"}},)"
      R"( "tags": ["new", "vip"], "items": [{{"sku": "A-1", "qty": 2}}, {{"sku": "B-7", "qty": 1}}], "note": ")",
      amount, currency);
  while (payload.size() + 200 < bytes) payload += "lorem ipsum ";
  payload += "\"}";
  ev.payload = payload;
  return delivery::make_body(ev);
}

/// ns per matches() call, median of `runs` runs of `n` calls alternating two bodies.
double filter_ns(const relay::payload_filter& f, const std::string& a, const std::string& b, int n, int runs,
                 std::size_t& matched) {
  std::vector<double> per_run;
  for (int r = 0; r < runs; ++r) {
    matched = 0;
    const auto t = clock_type::now();
    for (int i = 0; i < n; ++i) matched += f.matches(i % 2 ? a : b) ? 1 : 0;
    per_run.push_back(std::chrono::duration<double, std::nano>(clock_type::now() - t).count() / n);
  }
  return median(per_run);
}

void filter_report(int n, int runs) {
  const auto yes = body_of(1024, 150, "EUR");
  const auto no = body_of(1024, 50, "GBP");
  struct row {
    const char* what;
    const char* filter;
  };
  const std::vector<row> rows{
      {"1 clause (equality)", R"({"data.currency": "EUR"})"},
      {"5 clauses", R"({"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]}, "type": "order.paid",)"
                    R"( "data.customer.country": {"$ne": "US"}, "data.tags": "vip"})"},
      {"5 clauses, one deep in an array", R"({"data.amount": {"$gte": 100, "$lt": 100000}, "data.items.1.sku": "B-7",)"
                                          R"( "data.customer.tier": {"$in": ["gold", "platinum"]}, "data.note": {"$exists": true}})"},
  };
  std::cout << fmt::format("## Payload filter\n\nBodies of {} and {} bytes (the webhook body: id, type, timestamp, "
                           "data), alternating one that matches and one that does not; {} evaluations a run, median of "
                           "{} runs. Each evaluation parses the body (simdjson DOM) and walks the paths.\n\n",
                           yes.size(), no.size(), n, runs);
  std::cout << "| filter | ns per event | matched |\n|---|---:|---:|\n";
  for (const auto& r : rows) {
    std::string why;
    auto f = relay::payload_filter::compile(r.filter, &why);
    if (!f) throw std::runtime_error(std::string("bench filter does not compile: ") + why);
    std::size_t matched = 0;
    const double ns = filter_ns(*f, yes, no, n, runs, matched);
    std::cout << fmt::format("| {} | {:.0f} | {} of {} |\n", r.what, ns, matched, n);
  }
  std::cout << "\n";
}

/// Starts as soon as the limiter allows, waiting on an Asio steady_timer as walhook's dispatcher
/// does; returns the real start times.
std::vector<clock_type::time_point> limited_starts(delivery::rate r, int burst, std::chrono::milliseconds run) {
  boost::asio::io_context ioc;
  boost::asio::steady_timer timer(ioc);
  delivery::rate_limiter limiter(r, burst);
  std::vector<clock_type::time_point> starts;
  const auto end = clock_type::now() + run;
  for (;;) {
    auto now = clock_type::now();
    if (now >= end) break;
    while (limiter.available_at(now) <= now) {
      limiter.started(now);
      starts.push_back(now);
    }
    timer.expires_at(std::min(end, limiter.available_at(now)));
    timer.wait();
  }
  return starts;
}

std::size_t most_in_window(const std::vector<clock_type::time_point>& at, clock_type::duration window) {
  std::size_t best = 0;
  for (std::size_t i = 0, j = 0; i < at.size(); ++i) {
    while (at[i] - at[j] >= window) ++j;
    best = std::max(best, i - j + 1);
  }
  return best;
}

void rate_report(std::chrono::milliseconds run) {
  std::cout << fmt::format("## Rate limiter\n\nThe limiter on the real clock, woken by an Asio steady_timer as "
                           "walhook's dispatcher is (rate_loop); a caller that always has work, for {:.0f} s per "
                           "row. \"Most in any window\" slides over every start (half-open windows).\n\n",
                           std::chrono::duration<double>(run).count());
  std::cout << "| --max-rate | --rate-burst | starts | starts per s of the run | most in any 1 s | most in any 100 ms | "
               "wake-up lateness p99 |\n|---|---:|---:|---:|---:|---:|---:|\n";
  struct row {
    const char* rate;
    int burst;
  };
  for (const auto& r : std::vector<row>{{"20/s", 0}, {"20/s", 1}, {"1000/s", 0}, {"1000/s", 10}, {"100000/s", 0}}) {
    const auto limit = *delivery::parse_rate(r.rate);
    const auto starts = limited_starts(limit, r.burst, run);
    const double secs = std::chrono::duration<double>(run).count();
    // Lateness: how long after the moment it was allowed each start came (the spacing's error).
    std::vector<double> late_us;
    delivery::rate_limiter replay(limit, r.burst);
    for (std::size_t k = 0; k < starts.size(); ++k) {
      // The earliest moment the k-th start was allowed, given the starts before it.
      const auto allowed = k == 0 ? starts[0] : replay.available_at(starts[k - 1]);
      late_us.push_back(std::chrono::duration<double, std::micro>(starts[k] - allowed).count());
      replay.started(starts[k]);
    }
    std::sort(late_us.begin(), late_us.end());
    const double p99 = late_us.empty() ? 0 : late_us[late_us.size() * 99 / 100];
    std::cout << fmt::format("| {} | {} | {} | {:.1f} | {} | {} | {:.0f} µs |\n", r.rate,
                             r.burst ? std::to_string(r.burst) : std::string("(rate)"), starts.size(),
                             static_cast<double>(starts.size()) / secs,
                             most_in_window(starts, std::chrono::seconds(1)),
                             most_in_window(starts, std::chrono::milliseconds(100)), p99);
  }
  std::cout << "\n";
}

}  // namespace

void add_policies_command(CLI::App& app) {
  struct options {
    int evaluations = 200000;
    int runs = 5;
    double rate_seconds = 5;
  };
  auto o = std::make_shared<options>();
  auto* c = app.add_subcommand("policies",
                               "Payload filter cost per event and the rate limiter's precision (prints Markdown)");
  c->add_option("--evaluations", o->evaluations, "Filter evaluations per run")->capture_default_str();
  c->add_option("--runs", o->runs, "Runs (the report shows medians)")->capture_default_str()->check(CLI::Range(1, 100));
  c->add_option("--rate-seconds", o->rate_seconds, "Seconds per rate-limiter row")->capture_default_str();
  c->callback([o] {
    std::cout << "# walhook-bench policies\n\n";
    filter_report(o->evaluations, o->runs);
    rate_report(std::chrono::milliseconds(static_cast<long long>(o->rate_seconds * 1000)));
  });
}

}  // namespace walhook::bench
