#pragma once
// The seam between the engine's delivery side and PostgreSQL (Redpanda's abstract_client is the
// model): queue writes that become durable later, claim persisted work back, ask when more is
// due. sql::state_store is the real one; tests/support/fake_store.hpp is the one the engine's
// unit tests drive by hand.

#include "common/lsn.hpp"
#include "sql/writes.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace walhook::sql {

/// A persisted delivery claimed for an attempt (its row is now 'sending'), with its event.
struct claimed_delivery {
  std::int64_t row_id = 0;
  std::int64_t endpoint_id = 0;
  int attempts = 0;
  int deferrals = 0;  ///< deliveries.deferrals (migration 011)
  std::string event_id;
  std::optional<std::string> merge_key;
  std::optional<std::string> aggregate_id;
  lsn commit_lsn;
  bool event_missing = false;  ///< the outbox row is gone (deleted or truncated)
  std::string tenant_id;
  std::string event_type;
  std::string event_created_at;  ///< outbox.created_at as PostgreSQL prints it (DateStyle ISO), or RFC 3339
  std::string payload;
  std::string event_stored_at;  ///< outbox.stored_at as PostgreSQL prints it (migration 008)
  std::optional<std::string> aggregate_type;  ///< outbox.aggregate_type (migration 009)
  /// outbox.rejected (migration 009): the row is one an outbox bridge could not map, never sent.
  std::optional<std::string> rejected;
  std::optional<std::string> traceparent;  ///< outbox.traceparent (migration 012)
};

/// How many due deliveries to claim for one endpoint, and whether it is ordered by aggregate.
struct claim_quota {
  std::int64_t endpoint_id = 0;
  int limit = 0;
  bool aggregate_ordering = false;
  bool operator==(const claim_quota&) const = default;
};

/// When an endpoint's earliest pending delivery is due, by the server's clock (≤ 0: now).
struct due_time {
  std::int64_t endpoint_id = 0;
  std::chrono::milliseconds in{0};
};

class store {
 public:
  using durable_callback = std::function<void()>;
  virtual ~store() = default;

  /// Queues a write; `on_durable` runs on the store's executor once its batch committed. Writes
  /// commit in the order they were queued; nothing queued is dropped.
  virtual void enqueue(write w, durable_callback on_durable = {}) = 0;
  /// Writes queued and not yet committed.
  virtual std::size_t backlog() const = 0;

  /// Claims due pending deliveries (status → 'sending') within the quotas, earliest first per
  /// endpoint; for aggregate-ordered endpoints only the oldest delivery of each aggregate, and
  /// none while another of that aggregate is being sent. Errors: pg::errc.
  virtual boost::asio::awaitable<boost::system::result<std::vector<claimed_delivery>>> claim_due(
      std::vector<claim_quota> quotas) = 0;

  /// For each of these endpoints that has pending deliveries: when its earliest one is due.
  /// Endpoints without pending deliveries are absent from the answer. Errors: pg::errc.
  virtual boost::asio::awaitable<boost::system::result<std::vector<due_time>>> next_due(
      std::vector<std::int64_t> endpoint_ids) = 0;
};

}  // namespace walhook::sql
