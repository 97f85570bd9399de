#pragma once
// The baseline walhook replaces: the classic polling outbox relay, built into the harness
// (`--relay polling`), and its LISTEN/NOTIFY-woken variant (`--relay notify`).
//
//  * The application writes one bench.deliveries row per matching endpoint in the same
//    transaction as its outbox row (insert_sql(): one statement, so one round trip).
//  * N workers, each with its own connection. A worker polls for endpoints with due rows, then
//    per endpoint, in one transaction: takes one of the endpoint's max_concurrency slots with
//    pg_try_advisory_xact_lock(endpoint_id, slot) — the per-endpoint concurrency limit —
//    reserves up to `batch` due rows with FOR UPDATE SKIP LOCKED, delivers them one at a time,
//    marks them delivered or reschedules them, and commits (releasing slot and rows).
//  * A worker that found nothing sleeps `idle_interval` (500 ms). The notify variant adds a
//    statement-level trigger on bench.deliveries that NOTIFYs once per endpoint that got rows
//    (payload: the endpoint id); one listener connection queues the endpoint and wakes one idle
//    worker, which goes straight to that endpoint's reservation without polling (the 500 ms
//    poll stays as a safety net, and a worker still polls once before going idle).
//  * Same HTTP client (delivery::http_client), Standard Webhooks signing, body, retry/backoff
//    and circuit-breaker rules (delivery/policy.hpp, delivery/breaker.hpp) as walhook.
//  * Broker endpoints (nats://…, amqp://…, the bench's broker scenarios): the same claim loop,
//    but the batch's rows are published at once through walhook's own broker sinks
//    (delivery::nats_sink, delivery::amqp_sink behind delivery::sink_router: the same message,
//    headers, signature and message id as walhook), every confirmation awaited together, then the batch is marked in one UPDATE —
//    the pipelined relay a careful team would write, not one round trip per row.
//
// Runs its own io_context on one thread (like walhook); start() and stop() are called from the
// bench's main thread.

#include "delivery/breaker.hpp"
#include "delivery/broker_sink.hpp"
#include "delivery/http_client.hpp"
#include "delivery/policy.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <pthread.h>
#include <string>
#include <thread>

namespace walhook::bench {

struct polling_options {
  std::string conninfo;
  bool notify = false;                          ///< LISTEN/NOTIFY-woken variant
  int workers = 16;                             ///< worker connections (a shared pool, as in classic relays)
  int batch = 10;                               ///< rows reserved per endpoint and transaction
  std::chrono::milliseconds idle_interval{500}; ///< poll period when a worker found nothing
  delivery::http_client_options http;  ///< total_deadline is also the broker confirmation deadline
  delivery::broker_sink_options broker;
  delivery::retry_policy retry;
  delivery::breaker_policy breaker;
};

struct polling_stats {
  std::uint64_t polls = 0;          ///< "which endpoints have due rows" queries
  std::uint64_t empty_polls = 0;    ///< polls after which the worker went idle
  std::uint64_t batches = 0;        ///< reservation transactions that got rows
  std::uint64_t busy_slots = 0;     ///< reservations that found every slot of the endpoint taken (or no row)
  std::uint64_t attempts = 0;       ///< HTTP requests and broker publishes
  std::uint64_t delivered = 0;
  std::uint64_t failed = 0;
  std::uint64_t notifications = 0;
  std::uint64_t errors = 0;         ///< database errors (the worker reconnects)
};

class polling_relay {
 public:
  /// bench.deliveries and its due-work index (run once in a fresh database after walhook migrate).
  static std::string schema_sql();
  /// The NOTIFY trigger of the notify variant.
  static std::string notify_schema_sql();
  /// The application's transaction: outbox rows + their deliveries rows, one statement.
  static std::string insert_sql();

  explicit polling_relay(polling_options options);
  ~polling_relay();
  polling_relay(const polling_relay&) = delete;
  polling_relay& operator=(const polling_relay&) = delete;

  /// Loads the endpoints (blocking) and starts the workers on their own thread.
  void start();
  /// Every worker is connected (and the listener listens).
  bool ready() const;
  /// Stops polling, lets batches in flight finish (bounded by the HTTP deadline), joins.
  void stop();
  /// CPU seconds of the relay's thread.
  double cpu_seconds() const;
  polling_stats stats() const;
  std::string first_error() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
  std::thread thread_;
  pthread_t thread_handle_{};
  double final_cpu_ = -1;
};

}  // namespace walhook::bench
