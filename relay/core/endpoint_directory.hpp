#pragma once
// The endpoints walhook follows (from walhook.endpoints, through the replication stream) with
// the tenant index the router uses and each endpoint's circuit-breaker state. Pure: no I/O; the
// engine applies what each change returns (spill queued work, forget pooled connections, look
// for pending rows).
//
// Single-threaded.

#include "delivery/breaker.hpp"
#include "relay/core/rows.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace walhook::relay {

/// What apply(), remove() or replace_all() changed for one endpoint.
struct endpoint_change {
  std::int64_t id = 0;
  bool added = false;        ///< not known before
  bool removed = false;      ///< gone: its queued work has nowhere to go
  bool url_changed = false;  ///< its pooled connections lead elsewhere now (its URL or target changed)
  bool deactivated = false;  ///< was active, is paused or disabled (or removed): queued work leaves memory
  bool activated = false;    ///< was paused or disabled (or new), is active: its breaker closes, look for pending rows
  bool operator==(const endpoint_change&) const = default;
};

class endpoint_directory {
 public:
  /// Adds or replaces an endpoint (an Insert or Update of walhook.endpoints).
  endpoint_change apply(endpoint e);
  /// Removes one (session start: not in the table any more); nullopt if it was not known.
  std::optional<endpoint_change> remove(std::int64_t id);
  /// A removal read from the stream: the endpoint stays findable for the work routed to it
  /// before, but route() no longer returns it and its breaker state goes. False if not known.
  bool retire(std::int64_t id);
  /// The whole table read at session start: applies each row, removes the endpoints not in it.
  std::vector<endpoint_change> replace_all(std::vector<endpoint> all);

  const endpoint* find(std::int64_t id) const;
  std::size_t size() const { return endpoints_.size(); }
  /// Every known endpoint id (unordered).
  std::vector<std::int64_t> ids() const;

  /// The router (docs/architecture.md, Data flow): ids of the endpoints of `tenant_id` subscribed to `event_type`,
  /// in the order they were added. With `direct` (outbox.endpoint_id, migration 006): that
  /// endpoint only, if it is known, not retired and of `tenant_id`, whatever its event types.
  /// With `xid` (the event's transaction, 32-bit; 0: unknown), not the endpoints created after
  /// that transaction committed (endpoint::exists_for): an event replayed late — catch-up, a
  /// backfill, `walhook recover`, a cursor — goes where it would have gone at its commit.
  /// With `body` (the webhook body), not the endpoints whose payload filter it does not match
  /// (endpoint::filter) — their ids go to `filtering->filtered` — nor those whose filter cannot
  /// read it (payload_filter::result::unreadable): those go to `filtering->unreadable` with the
  /// reason, for the caller to end dead. A direct route has no filter.
  struct filtering {
    std::vector<std::int64_t> filtered;
    std::vector<std::pair<std::int64_t, std::string>> unreadable;
  };
  std::vector<std::int64_t> route(std::string_view tenant_id, std::string_view event_type,
                                  std::optional<std::int64_t> direct = std::nullopt, std::uint32_t xid = 0,
                                  std::optional<std::string_view> body = std::nullopt,
                                  filtering* filtering_out = nullptr) const;

  /// The breaker state of an endpoint (closed if none was recorded).
  delivery::breaker_state health(std::int64_t id) const;
  /// Sets it (after an attempt, or loaded from walhook.endpoint_health).
  void set_health(std::int64_t id, const delivery::breaker_state& s);
  /// Closes the breaker (operator resume/enable). True if there was state to forget.
  bool reset_health(std::int64_t id);
  /// Forgets every breaker state (session start, before loading them).
  void clear_health() { health_.clear(); }

 private:
  void index(const endpoint& e);
  void unindex(const endpoint& e);

  std::unordered_map<std::int64_t, endpoint> endpoints_;
  std::unordered_map<std::string, std::vector<std::int64_t>> tenants_;
  std::unordered_map<std::int64_t, delivery::breaker_state> health_;
};

}  // namespace walhook::relay
