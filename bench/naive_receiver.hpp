#pragma once
// The `ingest` scenario's naive baseline (bench/ingest.hpp): the webhook receiver a team writes
// first. One Beast thread reads requests; each is handed to a small pool of worker threads, each
// with its own blocking libpq connection, which for that request
//   1. verifies the Standard Webhooks signature (delivery::verify, 300 s tolerance),
//   2. INSERT INTO bench_naive.inbox … ON CONFLICT (event_id) DO NOTHING — one statement, its
//      own transaction (autocommit: one WAL flush per request),
//   3. if the row is new, "processes" the event in the request (sleeps `handler`),
// and only then answers 200 {"status":"accepted"|"duplicate"} (401 bad signature, 500 database
// error). No group commit, no queue: the worker is busy for the whole request.
//
// Runs in the bench process on its own threads (their CPU is cpu_seconds()).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace walhook::bench {

struct naive_options {
  std::string conninfo;
  std::string secret;                            ///< whsec_… the sender signs with
  int workers = 8;                               ///< worker threads = PostgreSQL connections
  std::chrono::microseconds handler{2000};       ///< "processing" of a new event, in the request
};

class naive_receiver {
 public:
  /// Creates bench_naive.inbox, connects the workers, listens on 127.0.0.1 (a free port) and
  /// starts serving. Throws std::runtime_error if the database or the socket fails.
  explicit naive_receiver(naive_options options);
  ~naive_receiver();
  naive_receiver(const naive_receiver&) = delete;
  naive_receiver& operator=(const naive_receiver&) = delete;

  unsigned short port() const;
  /// CPU seconds of its threads (the Beast thread and the workers) so far; call before stop().
  double cpu_seconds() const;
  /// Events "processed" (new rows whose handler ran).
  std::int64_t processed() const;
  /// Closes the listener and the connections; waits for the threads. Idempotent.
  void stop();

  /// The table it writes (event_id text primary key, body jsonb, received_at).
  static constexpr const char* table = "bench_naive.inbox";

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace walhook::bench
