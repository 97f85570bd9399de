#pragma once
// What each message of the replication stream means to walhook (docs/architecture.md, Data flow):
// Begin/Commit/keepalives go to the LSN tracker; outbox Inserts become events, routed to the
// tenant's endpoints and handed to the dispatcher, each delivery holding its transaction's
// ticket; changes of walhook.endpoints update the endpoint directory in commit order with the
// events; walhook's logical messages wake an endpoint's pending deliveries.
//
// Rows are decoded against the Relation message they came with on this connection
// (wal::relation_cache), never the live catalog. Single-threaded.

#include "common/lsn.hpp"
#include "relay/core/endpoint_directory.hpp"
#include "relay/core/lsn_tracker.hpp"
#include "relay/engine/dispatcher.hpp"
#include "wal/relation_cache.hpp"
#include "wal/replication_stream.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <optional>
#include <utility>

namespace walhook::relay {

class stream_handler {
 public:
  stream_handler(lsn_tracker& tracker, endpoint_directory& directory, dispatcher& deliveries, const clock_source& clock)
      : tracker_(tracker), directory_(directory), deliveries_(deliveries), clock_(clock) {}

  /// One message or keepalive. Errors (wal::errc): a row for an unknown relation or one that does
  /// not match its Relation — a protocol error: the session ends and the stream restarts.
  boost::system::error_code handle(const wal::stream_event& ev);
  /// A new session: Relation messages and open transactions of the old one are forgotten.
  void reset();
  /// An outbox row, from the stream or a backfill (relay/engine/recovery.hpp): becomes an event routed
  /// to the tenant's endpoints, each delivery holding `ticket`; a malformed one's deliveries are
  /// recorded dead with the reason. `commit_lsn` orders merges. Returns the deliveries made.
  /// `xid`: the streamed transaction's (0 for a backfill).
  std::size_t deliver_row(const row_view& row, lsn commit_lsn, lsn_tracker::ticket ticket, std::uint32_t xid = 0);
  /// Called at each Commit — its xid, the tenant of its outbox rows ("" if several; nullptr if it
  /// inserted none), its end LSN — and at each keepalive outside a transaction (xid 0, nullptr,
  /// the keepalive's position): the outbox cursors' record of what was streamed.
  void on_streamed(std::function<void(std::uint32_t, const std::string*, lsn)> f) { streamed_ = std::move(f); }
  /// An endpoint's event types or filter changed (an Update of walhook.endpoints); `before`: as it was.
  void on_routing_changed(std::function<void(const endpoint& before)> f) { routing_changed_ = std::move(f); }

  /// Between a Begin and its Commit.
  bool in_transaction() const { return current_ticket_ != 0; }
  std::uint64_t events() const { return events_; }                  ///< outbox rows read
  std::uint64_t malformed_rows() const { return malformed_rows_; }  ///< outbox rows that could not become events
  /// How long the oldest transaction not yet acknowledged has waited, seconds (slot lag).
  double lag_seconds();

 private:
  using error_code = boost::system::error_code;
  error_code on_message(const wal::pgoutput::begin& b);
  error_code on_message(const wal::pgoutput::commit& c);
  error_code on_message(const wal::pgoutput::relation& r);
  error_code on_message(const wal::pgoutput::insert& m);
  error_code on_message(const wal::pgoutput::update& m);
  error_code on_message(const wal::pgoutput::delete_& m);
  error_code on_message(const wal::pgoutput::truncate& m);
  error_code on_message(const wal::pgoutput::origin&) { return {}; }
  error_code on_message(const wal::pgoutput::type&) { return {}; }
  error_code on_message(const wal::pgoutput::logical_message& m);
  void apply_endpoint(const row_view& row, const row_view* old_row = nullptr);
  void remove_endpoint(const row_view& row);

  lsn_tracker& tracker_;
  endpoint_directory& directory_;
  dispatcher& deliveries_;
  const clock_source& clock_;
  wal::relation_cache relations_;
  std::optional<std::uint32_t> outbox_oid_;
  std::optional<std::uint32_t> endpoints_oid_;
  lsn_tracker::ticket current_ticket_ = 0;
  lsn current_final_lsn_;
  std::uint32_t current_xid_ = 0;
  std::optional<std::string> current_tenant_;  ///< of the open transaction's outbox rows ("" if several)
  /// walhook.endpoints rows the open transaction inserted or updated: an operator's "resume:<id>"
  /// counts only together with its own change of that row (which the application cannot write).
  std::vector<std::int64_t> changed_endpoints_;
  std::function<void(std::uint32_t, const std::string*, lsn)> streamed_;
  std::function<void(const endpoint&)> routing_changed_;
  std::uint64_t events_ = 0;
  std::uint64_t malformed_rows_ = 0;
  std::deque<std::pair<lsn_tracker::ticket, std::chrono::steady_clock::time_point>> open_since_;
};

/// An endpoint id column as a number (the stream and the table give text); nullopt if absent.
std::optional<std::int64_t> endpoint_id_of(const row_view& row);

}  // namespace walhook::relay
