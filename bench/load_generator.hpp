#pragma once
// The open-loop load generator: commits outbox events at a target rate, as applications would,
// from several connections (one thread each, blocking libpq, one prepared statement per
// transaction).
//
// Open loop (no coordinated omission): transaction k is *scheduled* at a fixed time computed
// from the rate schedule alone; a connection that falls behind sends late, and the lateness
// shows in the scheduled-to-receipt latency instead of silently lowering the offered load.
// Transactions are handed out through a shared counter, so one slow connection does not hold
// back the others.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace walhook::bench {

/// A stretch of the schedule at one rate. A rate of 0 is an idle stretch: nothing is committed,
/// and the schedule still lasts until its end (scenarios act on the relay or the server then).
struct rate_step {
  std::chrono::milliseconds duration{0};
  double events_per_second = 0;
};

struct generator_options {
  std::string conninfo;
  /// The transaction's one statement: $1 text[] tenant ids, $2 jsonb[] payloads, $3 text[] event
  /// types (one element per row); returns one row per event (id uuid, tenant_id text, event_type
  /// text). See relay_driver::insert_sql.
  std::string insert_sql;
  std::vector<rate_step> schedule;
  int rows_per_commit = 1;
  std::size_t payload_bytes = 256;
  int tenants = 1;                    ///< tenant-0 … tenant-(n−1), events round-robin
  /// Event types, round-robin within each tenant: event g has tenant g mod tenants and type
  /// (g / tenants) mod types, so every (tenant, type) pair gets the same share.
  std::vector<std::string> event_types{"order.created"};
  /// Deliveries one event of each route is expected to produce (endpoints that can answer 2xx),
  /// indexed by route_index(tenant, type), for the live backlog counter.
  std::vector<int> deliveries_per_route;
  int connections = 4;
};

/// One committed transaction.
struct txn_record {
  std::int64_t scheduled_us = 0;  ///< system clock µs: when it was due (open-loop schedule)
  std::int64_t sent_us = 0;       ///< when the statement was sent
  std::int64_t acked_us = 0;      ///< when COMMIT's answer arrived
  std::uint32_t first_event = 0;  ///< index into events()
  std::uint32_t rows = 0;
};

/// One committed event.
struct event_record {
  std::array<char, 36> id{};      ///< uuid text
  std::uint32_t tenant = 0;
  std::uint32_t txn = 0;          ///< index into txns()
  std::uint16_t type = 0;         ///< index into generator_options::event_types
  std::int64_t commit_us = 0;     ///< server commit timestamp (filled in later), else acked_us
  std::string_view id_view() const { return {id.data(), id.size()}; }
};

/// "tenant-<i>"
std::string tenant_name(std::size_t i);
/// Index of (tenant, event type) into generator_options::deliveries_per_route.
inline std::size_t route_index(std::size_t tenant, std::size_t type, std::size_t types) { return tenant * types + type; }

class load_generator {
 public:
  explicit load_generator(generator_options options);
  ~load_generator();
  load_generator(const load_generator&) = delete;
  load_generator& operator=(const load_generator&) = delete;

  /// Connects every connection (blocking) and starts the schedule now.
  void start();
  /// Stops scheduling new transactions (those in progress finish).
  void stop();
  /// Waits for the threads (after the schedule ended or stop()).
  void join();
  /// Every transaction was sent and the schedule's time is over (or stop() was called).
  bool finished() const;

  /// System-clock µs of the schedule's start (the first transaction's due time).
  std::int64_t start_us() const { return start_us_; }
  /// Live counters (any thread).
  std::int64_t committed_events() const { return committed_events_.load(); }
  std::int64_t committed_deliveries() const { return committed_deliveries_.load(); }
  std::int64_t failed_transactions() const { return failed_.load(); }
  /// Transactions that have ended so far, committed or failed.
  std::int64_t ended_transactions() const { return ended_.load(); }
  /// How many transactions were sent later than 1 ms after their due time (generator-bound).
  std::int64_t late_transactions() const { return late_.load(); }
  /// Transactions of the whole schedule.
  std::int64_t scheduled_transactions() const { return total_txns_; }

  /// After join(): every committed transaction and event (merged from all connections).
  const std::vector<txn_record>& txns() const { return txns_; }
  std::vector<event_record>& events() { return events_; }
  /// CPU seconds of the generator's threads (client side only), valid after join().
  double cpu_seconds() const { return cpu_seconds_; }
  /// First error message, if any transaction failed.
  const std::string& first_error() const { return first_error_; }

  /// Due time of transaction k, µs after the start.
  std::int64_t due_offset_us(std::int64_t k) const;

 private:
  struct worker_result;
  void run(int index, std::shared_ptr<worker_result> out);

  generator_options options_;
  std::vector<std::int64_t> step_first_txn_;  ///< first transaction number of each step
  std::int64_t total_txns_ = 0;
  std::chrono::milliseconds total_duration_{0};  ///< of the whole schedule, idle steps included
  std::int64_t start_us_ = 0;
  std::chrono::steady_clock::time_point start_steady_{};
  std::atomic<std::int64_t> next_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> go_{false};
  std::atomic<int> finished_threads_{0};
  std::atomic<int> connected_{0};
  std::atomic<std::int64_t> committed_events_{0};
  std::atomic<std::int64_t> committed_deliveries_{0};
  std::atomic<std::int64_t> failed_{0};
  std::atomic<std::int64_t> ended_{0};
  std::atomic<std::int64_t> late_{0};
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<worker_result>> results_;
  std::vector<txn_record> txns_;
  std::vector<event_record> events_;
  double cpu_seconds_ = 0;
  std::string first_error_;
};

}  // namespace walhook::bench
