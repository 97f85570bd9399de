#pragma once
// The value types the delivery side works on: an outbox event and one delivery of it to one
// endpoint (a job), whether it came fresh from the replication stream or was claimed back from
// walhook.deliveries for a retry.

#include "common/lsn.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace walhook::delivery {

/// One outbox event, immutable once built and shared by all its deliveries (fan-out).
struct event {
  std::string id;         ///< outbox.id (uuid text): webhook-id, stable across retries
  std::string tenant_id;
  std::string type;       ///< outbox.event_type
  std::string created_at; ///< outbox.created_at, ISO 8601 UTC ("2026-11-30T03:23:51.123456Z")
  /// outbox.stored_at (migration 008) as PostgreSQL prints it: walhook's own clock of the event,
  /// which the application cannot set. An event's age (retries' give-up) counts from it, never
  /// from created_at. Empty: unknown (an older schema): the age counts from when walhook read it.
  std::string stored_at;
  std::optional<std::string> aggregate_id;
  /// outbox.aggregate_type (migration 009): the kind of aggregate ("order", Debezium's
  /// aggregatetype); broker subjects and routing keys may be templated from it. Empty: none.
  std::optional<std::string> aggregate_type;
  std::optional<std::string> merge_key;
  /// outbox.traceparent (migration 012): the W3C traceparent of the transaction that produced the
  /// event, as stored (delivery/trace_context.hpp decides whether it is sent). Empty: none.
  std::optional<std::string> traceparent;
  std::string payload;    ///< outbox.payload as PostgreSQL prints the jsonb, byte for byte
  lsn commit_lsn;          ///< end LSN of the committing transaction (merge order); invalid if unknown
  /// outbox.endpoint_id (migration 006): the direct route — only this endpoint gets the event
  /// (if it is of the event's tenant), whatever its event types. Empty: by tenant and type.
  std::optional<std::int64_t> endpoint_id;
  /// The inserting transaction's 32-bit xid (pgoutput Begin) for a streamed event; 0 for one
  /// read back from the table. Tells an outbox cursor whether it covers the event.
  std::uint32_t xid = 0;
  std::int64_t seq = 0;   ///< outbox.seq for an event read back by an outbox cursor; 0 otherwise
  std::string body;       ///< the request body, built once: {"id","type","timestamp","data"}
};

/// Builds the webhook body {"id":…,"type":…,"timestamp":…,"data":<payload>} (docs/architecture.md, Delivery contract).
/// `payload` must be valid JSON text; it is embedded unchanged.
std::string make_body(const event& ev);

/// The bytes of events alive in memory — queued, in flight, or waiting for a write — counted
/// once per event however many endpoints share it (fan-out). track() wraps an event in a
/// shared_ptr whose deleter takes its bytes off the count; the count outlives the budget, so an
/// event released late is still taken off. Single-threaded.
class event_budget {
 public:
  /// The event, shared and counted: its body and payload bytes.
  std::shared_ptr<const event> track(event ev);
  /// Bytes of tracked events still alive.
  std::size_t bytes() const { return *bytes_; }

 private:
  std::shared_ptr<std::size_t> bytes_ = std::make_shared<std::size_t>(0);
};

/// One delivery of one event to one endpoint.
struct job {
  std::shared_ptr<const event> ev;
  std::int64_t endpoint_id = 0;
  std::optional<std::int64_t> row_id;  ///< walhook.deliveries.id once persisted; nullopt = memory only
  int attempts = 0;                    ///< attempts already made (persisted count)
  int deferrals = 0;                   ///< of those, answers that deferred it (migration 011)
  std::uint64_t ticket = 0;            ///< LSN tracker ticket this job still holds; 0 = none
  /// Recorded as 'sending' in walhook.deliveries while its attempt ran past the hold bound (so
  /// its ticket could be released): its outcome updates that row.
  bool marked = false;
  /// Its attempt ran past the hold bound: it counts against scheduler_limits::max_slow_in_flight,
  /// not max_in_flight (scheduler::park()).
  bool parked = false;
  /// Read back from the outbox by the endpoint's cursor (relay/engine/cursors.hpp): `ticket` is
  /// its window's, and the cursor moves past it once it is done.
  bool drained = false;
  std::chrono::steady_clock::time_point enqueued_at{};
};

}  // namespace walhook::delivery
