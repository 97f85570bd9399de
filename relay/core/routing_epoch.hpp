#pragma once
// An endpoint's routing before a change (docs/endpoint-policies.md, "Changing a filter"): while
// an endpoint follows the outbox by cursor (relay/engine/cursors.hpp), its events are routed when
// they are read back, not when they commit. The stream routes each event with the event types and
// filter the endpoint had when the event committed; a cursor must too. So when an endpoint's
// event types or filter change while it follows the outbox, its cursor keeps what it had before,
// with the transactions that committed before the change — visible in `before` (a pg_snapshot),
// or listed in `before_also` (xid8) — and routes those with it. Kept in the cursor's row
// (walhook.endpoint_cursors.routing, migration 013) until the cursor covers them.
//
// Pure.

#include "relay/core/payload_filter.hpp"
#include "relay/core/snapshot.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay {

struct endpoint;

struct routing_epoch {
  std::optional<std::vector<std::string>> event_types;  ///< nullopt: all types
  std::optional<std::string> filter_text;               ///< as stored (walhook.endpoints.filter)
  std::optional<payload_filter> filter;                 ///< compiled from filter_text
  pg_snapshot before;
  std::string before_text;                ///< `before` as pg_snapshot text
  std::vector<std::uint64_t> before_also;  ///< sorted xid8

  /// The event types and filter of `e` (as it was), for the transactions `before` and `also` show.
  static routing_epoch of(const endpoint& e, const pg_snapshot& before, std::string before_text,
                          std::vector<std::uint64_t> also);
  /// Whether the transaction `xid` (32-bit) committed before the change.
  bool holds(std::uint32_t xid) const;
  /// Whether every transaction it holds is visible in `s` (a later snapshot that shows them all:
  /// a cursor covering `s` owes none of them, so the epoch can go). Conservative: false when
  /// that would take more than a million ids to tell.
  bool shown_by(const pg_snapshot& s) const;
  /// Whether an event of `event_type` with webhook body `body` was routed to the endpoint then
  /// (no body: an outbox row that cannot become one, routed by type alone, as the stream does).
  /// A body the filter cannot read (payload_filter::result::unreadable) is routed, with `why`
  /// set: it ends dead with the reason, as the stream does.
  bool routes(std::string_view event_type, std::optional<std::string_view> body, std::string* why) const;
};

/// The epochs as a JSON array (walhook.endpoint_cursors.routing):
/// [{"event_types": [..] | null, "filter": "<text>" | null, "before": "<pg_snapshot>", "before_also": [xid8, ..]}].
std::string routing_epochs_json(const std::vector<routing_epoch>& epochs);
/// Parses routing_epochs_json(); an error (std::errc::invalid_argument, `why` says what) if the
/// text is not that shape or a filter no longer compiles.
boost::system::result<std::vector<routing_epoch>> parse_routing_epochs(std::string_view json, std::string* why = nullptr);

}  // namespace walhook::relay
