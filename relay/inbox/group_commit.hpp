#pragma once
// The ingest server's writes (docs/inbox.md, "Answered after COMMIT"): each verified request is
// one call of walhook.inbox_accept() (sql/migrations/010_inbox.sql), and the calls waiting at the
// same moment share one transaction — BEGIN, the calls, COMMIT, sent as one pipeline (libpq
// pipeline mode: one round trip, one WAL flush for the batch). A request hears its outcome only
// after the COMMIT's answer: no 2xx without a durable row.
//
// Batches form by themselves: while a session waits for its COMMIT (a WAL flush: 1–3 ms on a
// durable PostgreSQL), new requests queue and the next free session takes all of them, up to
// max_batch. `window` may hold a session a little longer to gather more (default 0).
//
// Load shedding: a request that waited longer than shed_after before its batch went out is
// answered `shed` (the server says 503 with Retry-After), as is one that finds max_queue requests
// already waiting: the sender retries later, well inside its own 3–30 s timeout, instead of
// timing out on a request that may or may not commit.
//
// Failure isolation: if a batch fails on a statement (a body PostgreSQL's jsonb refuses, say),
// it is rolled back and its calls are retried one transaction each, so one bad request cannot
// fail the others. A lost connection fails its batch (`failed`: 503; whether the COMMIT landed
// is unknown, and the sender's retry is then a duplicate or a first time, both answered 2xx).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace walhook::relay::inbox {

/// One verified request, as walhook.inbox_accept() takes it.
struct accept_call {
  std::string source;
  std::string event_id;
  std::string fingerprint;  ///< SHA-256 of the raw body, 32 raw bytes
  std::string event_type;
  std::optional<std::string> order_key;
  std::string headers_json;  ///< a JSON object: the headers kept with the row
  std::string body;          ///< the raw body (JSON; PostgreSQL stores it as jsonb in the outbox row)
  /// Kept as a string (data.body_text) rather than jsonb: set by the committer itself when jsonb
  /// refused the body (a \u0000, a number beyond numeric's range), so an authentic event is
  /// never lost for its JSON's sake.
  bool body_is_text = false;
};

enum class accept_outcome {
  accepted,   ///< new: committed (inbox row and outbox event)
  duplicate,  ///< the same id and body were committed before: committed nothing new
  conflict,   ///< the same id with another body: kept aside in walhook.inbox_key_reuse (committed)
  rejected,   ///< PostgreSQL refused this call alone (detail: its message): nothing committed
  unknown_source,  ///< the source was removed since the server read it: nothing committed
  shed,       ///< not tried: the queue was full or the wait too long
  failed,     ///< the database failed (connection lost, timeout): unknown whether it committed
};

struct accept_result {
  accept_outcome outcome = accept_outcome::failed;
  std::string detail;
};

struct group_commit_options {
  std::string database_url;
  int sessions = 2;                  ///< PostgreSQL sessions committing batches
  std::size_t max_batch = 256;       ///< calls per transaction at most
  std::chrono::microseconds window{0};  ///< extra wait for a batch to fill
  std::chrono::milliseconds shed_after{2000};
  std::size_t max_queue = 20000;
  std::chrono::milliseconds statement_timeout{3000};  ///< one pipeline's round trip at most
};

/// Counters since start (engine thread; /metrics).
struct group_commit_stats {
  std::uint64_t batches = 0;
  std::uint64_t calls = 0;
  std::uint64_t retried_alone = 0;  ///< calls retried in a transaction of their own
  std::size_t queued = 0;           ///< waiting now
  int sessions_up = 0;              ///< connected sessions now
};

class group_committer {
 public:
  /// Starts `options.sessions` sessions (they connect, and reconnect with a backoff of 100 ms
  /// doubling to 2 s, logging inbox.db_unavailable). Call from `ex`'s thread only.
  group_committer(boost::asio::any_io_executor ex, group_commit_options options);
  ~group_committer();
  group_committer(const group_committer&) = delete;
  group_committer& operator=(const group_committer&) = delete;

  /// Queues `call` and waits for its transaction's outcome: `shed` if no session took it within
  /// shed_after (a stalled or slow database), `failed` if its batch has no answer within
  /// statement_timeout + 1 s after that (so at most shed_after + statement_timeout + 1 s, 6 s by
  /// default). `failed` at once while every session's last connect failed (the database is
  /// down), `shed` at once with max_queue calls waiting.
  boost::asio::awaitable<accept_result> accept(accept_call call);
  group_commit_stats stats() const;
  /// Ends the sessions; queued and later calls get `failed`.
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay::inbox
