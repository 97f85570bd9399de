#include "bench/load_generator.hpp"

#include "bench/proc_stats.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace walhook::bench {
namespace {

std::int64_t system_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// An array literal element (jsonb[] or text[]): the text in double quotes, `"` and `\` escaped.
void append_array_element(std::string& out, std::string_view json) {
  out += '"';
  for (char c : json) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string tenant_name(std::size_t i) { return fmt::format("tenant-{}", i); }

struct load_generator::worker_result {
  std::vector<txn_record> txns;
  std::vector<event_record> events;
  double cpu_seconds = 0;
  std::string error;
};

load_generator::load_generator(generator_options options) : options_(std::move(options)) {
  options_.rows_per_commit = std::max(1, options_.rows_per_commit);
  options_.tenants = std::max(1, options_.tenants);
  options_.connections = std::max(1, options_.connections);
  if (options_.event_types.empty()) options_.event_types = {"order.created"};
  for (const auto& s : options_.schedule) {
    step_first_txn_.push_back(total_txns_);
    total_duration_ += s.duration;
    double txns = s.events_per_second / options_.rows_per_commit * static_cast<double>(s.duration.count()) / 1000.0;
    total_txns_ += static_cast<std::int64_t>(std::llround(txns));
  }
  step_first_txn_.push_back(total_txns_);
}

load_generator::~load_generator() {
  stop();
  join();
}

std::int64_t load_generator::due_offset_us(std::int64_t k) const {
  std::int64_t step_start_us = 0;
  for (std::size_t i = 0; i < options_.schedule.size(); ++i) {
    const auto& s = options_.schedule[i];
    if (k < step_first_txn_[i + 1] || i + 1 == options_.schedule.size()) {
      double interval_us = 1e6 * options_.rows_per_commit / s.events_per_second;
      return step_start_us + static_cast<std::int64_t>(interval_us * static_cast<double>(k - step_first_txn_[i]));
    }
    step_start_us += s.duration.count() * 1000;
  }
  return 0;
}

void load_generator::start() {
  for (int i = 0; i < options_.connections; ++i) {
    auto r = std::make_shared<worker_result>();
    results_.push_back(r);
    threads_.emplace_back([this, i, r] { run(i, r); });
  }
  // Connections first, so connecting does not eat into the schedule.
  while (connected_.load() < options_.connections && finished_threads_.load() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  start_steady_ = std::chrono::steady_clock::now();
  start_us_ = system_us();
  go_ = true;
}

void load_generator::stop() { stop_ = true; }

bool load_generator::finished() const {
  if (finished_threads_.load() != options_.connections) return false;
  // Threads end after the last transaction; an idle tail of the schedule still has to pass.
  return stop_ || !go_ || std::chrono::steady_clock::now() >= start_steady_ + total_duration_;
}

void load_generator::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  if (results_.empty()) return;
  // Merge in scheduled order.
  std::size_t n_txns = 0, n_events = 0;
  for (auto& r : results_) {
    n_txns += r->txns.size();
    n_events += r->events.size();
    cpu_seconds_ += r->cpu_seconds;
    if (first_error_.empty()) first_error_ = r->error;
  }
  std::vector<std::pair<std::size_t, std::size_t>> order;  // (worker, txn index)
  order.reserve(n_txns);
  for (std::size_t w = 0; w < results_.size(); ++w)
    for (std::size_t t = 0; t < results_[w]->txns.size(); ++t) order.emplace_back(w, t);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) {
    return results_[a.first]->txns[a.second].scheduled_us < results_[b.first]->txns[b.second].scheduled_us;
  });
  txns_.reserve(n_txns);
  events_.reserve(n_events);
  for (auto [w, t] : order) {
    txn_record rec = results_[w]->txns[t];
    auto first = rec.first_event;
    rec.first_event = static_cast<std::uint32_t>(events_.size());
    for (std::uint32_t e = 0; e < rec.rows; ++e) {
      event_record ev = results_[w]->events[first + e];
      ev.txn = static_cast<std::uint32_t>(txns_.size());
      events_.push_back(ev);
    }
    txns_.push_back(rec);
  }
  results_.clear();
}

void load_generator::run(int index, std::shared_ptr<worker_result> out) {
  const std::string stmt = "walhook_bench_insert";
  std::unique_ptr<relay::blocking_db> db;
  auto connect = [&] {
    db = std::make_unique<relay::blocking_db>(options_.conninfo, fmt::format("walhook-bench-generator-{}", index));
    PGresult* r = PQprepare(db->native(), stmt.c_str(), options_.insert_sql.c_str(), 3, nullptr);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    std::string err = ok ? "" : relay::one_line(PQresultErrorMessage(r));
    PQclear(r);
    if (!ok) throw std::runtime_error("prepare: " + err);
  };
  try {
    connect();
  } catch (const std::exception& e) {
    out->error = e.what();
    ++finished_threads_;
    return;
  }
  ++connected_;
  while (!go_ && !stop_) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  const int rows = options_.rows_per_commit;
  const std::string pad(options_.payload_bytes > 40 ? options_.payload_bytes - 40 : 1, 'x');
  const std::size_t types = options_.event_types.size();
  std::unordered_map<std::string_view, std::uint16_t> type_of;
  for (std::size_t t = 0; t < types; ++t) type_of.emplace(options_.event_types[t], static_cast<std::uint16_t>(t));
  std::string tenants_param, payloads_param, types_param, payload;
  while (!stop_) {
    std::int64_t k = next_.fetch_add(1);
    if (k >= total_txns_) break;
    auto due = start_steady_ + std::chrono::microseconds(due_offset_us(k));
    // Sleep in short slices so stop() is honoured quickly.
    for (auto now = std::chrono::steady_clock::now(); now < due && !stop_; now = std::chrono::steady_clock::now())
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(due - now, std::chrono::milliseconds(20)));
    if (stop_) break;

    tenants_param = "{";
    payloads_param = "{";
    types_param = "{";
    for (int j = 0; j < rows; ++j) {
      std::int64_t g = k * rows + j;
      auto tenant = static_cast<std::uint32_t>(g % options_.tenants);
      auto type = static_cast<std::size_t>((g / options_.tenants) % static_cast<std::int64_t>(types));
      if (j) {
        tenants_param += ',';
        payloads_param += ',';
        types_param += ',';
      }
      tenants_param += tenant_name(tenant);
      append_array_element(types_param, options_.event_types[type]);
      payload = fmt::format(R"({{"n":{},"kind":"bench","pad":"{}"}})", g, pad);
      append_array_element(payloads_param, payload);
    }
    tenants_param += '}';
    payloads_param += '}';
    types_param += '}';

    txn_record rec;
    rec.scheduled_us = start_us_ + due_offset_us(k);
    rec.sent_us = system_us();
    if (rec.sent_us - rec.scheduled_us > 1000) ++late_;
    try {
      if (!db) connect();
      const char* values[3] = {tenants_param.c_str(), payloads_param.c_str(), types_param.c_str()};
      PGresult* r = PQexecPrepared(db->native(), stmt.c_str(), 3, values, nullptr, nullptr, 0);
      rec.acked_us = system_us();
      if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        std::string err = relay::one_line(PQresultErrorMessage(r));
        PQclear(r);
        throw std::runtime_error(err);
      }
      rec.first_event = static_cast<std::uint32_t>(out->events.size());
      rec.rows = static_cast<std::uint32_t>(PQntuples(r));
      std::int64_t deliveries = 0;
      for (int i = 0; i < PQntuples(r); ++i) {
        event_record ev;
        const char* id = PQgetvalue(r, i, 0);
        if (PQgetlength(r, i, 0) == 36) std::memcpy(ev.id.data(), id, 36);
        const char* tenant = PQgetvalue(r, i, 1);
        ev.tenant = static_cast<std::uint32_t>(std::strtoul(tenant + std::strlen("tenant-"), nullptr, 10));
        if (auto t = type_of.find(std::string_view(PQgetvalue(r, i, 2))); t != type_of.end()) ev.type = t->second;
        ev.commit_us = rec.acked_us;
        if (auto route = route_index(ev.tenant, ev.type, types); route < options_.deliveries_per_route.size())
          deliveries += options_.deliveries_per_route[route];
        out->events.push_back(ev);
      }
      PQclear(r);
      out->txns.push_back(rec);
      committed_events_ += rec.rows;
      committed_deliveries_ += deliveries;
      ++ended_;
    } catch (const std::exception& e) {
      // The server went away or refused: count it, reconnect, carry on with the schedule.
      if (out->error.empty()) out->error = e.what();
      ++failed_;
      ++ended_;
      db.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  out->cpu_seconds = this_thread_cpu_seconds();
  ++finished_threads_;
}

}  // namespace walhook::bench
