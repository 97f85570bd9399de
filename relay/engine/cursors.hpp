#pragma once
// Outbox cursors (docs/decisions.md, "The outbox as a log"; sql/migrations/007): an endpoint that
// cannot take its events as they stream — failing, paused by its breaker or an operator,
// disabled, or slower than the stream — stops costing a walhook.deliveries row per event. It
// leaves the stream: walhook records which transactions are handled for it (a cursor: the
// transactions visible in a snapshot, plus a list of xids), skips its deliveries in the stream,
// and later reads what it is owed back from walhook.outbox, a window at a time, at the pace it
// takes them; when a window comes back smaller than a page, it rejoins the stream.
//
//   stream ──(follow(): its delivery would be written pending for a reason of the endpoint's)──► entering
//   entering ──(the cursor row is durable: the skipped deliveries' tickets go)──► following
//   following ──(windows read back from the outbox; one smaller than a page, read while the
//                stream waits)──► rejoined ──(that window done, the row deleted, the stream past
//                the window's insert position)──► stream
//
// Invariants: a transaction is covered only once each of its deliveries to the endpoint is
// delivered or durable in walhook.deliveries (the cursor is written behind those writes, in the
// state store's one queue); a skipped delivery holds its transaction's LSN ticket until the
// cursor that owes it is durable; nothing is read back before it committed (a window is a
// snapshot). A crash re-reads from the durable cursor: duplicates, never a gap.
//
// Single-threaded, on the engine's executor.

#include "common/lsn.hpp"
#include "common/time.hpp"
#include "common/wake_signal.hpp"
#include "delivery/job.hpp"
#include "delivery/policy.hpp"
#include "relay/core/lsn_tracker.hpp"
#include "relay/core/routing_epoch.hpp"
#include "relay/core/snapshot.hpp"
#include "relay/engine/dispatcher.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace walhook::sql {
class state_store;
struct text_rows;
}

namespace walhook::relay {

class endpoint_directory;
class slot_recovery;

struct cursor_stats {
  std::uint64_t entered = 0;      ///< endpoints that left the stream
  std::uint64_t rejoined = 0;     ///< endpoints that came back to it
  std::uint64_t skipped = 0;      ///< stream deliveries skipped (owed or covered)
  std::uint64_t drained = 0;      ///< deliveries read back from the outbox
  std::uint64_t windows = 0;      ///< pages read
  std::uint64_t writes = 0;       ///< cursor rows written
  std::uint64_t given_up = 0;     ///< ranges ended dead (a cursor past the give-up age)
  std::uint64_t given_up_events = 0;  ///< outbox rows in them
};

/// One cursor-mode endpoint, for /metrics and status.
struct cursor_view {
  std::int64_t endpoint_id = 0;
  std::string phase;  ///< entering | following | rejoining
  std::uint64_t drained = 0;
  double lag_seconds = 0;  ///< since the position its cursor covers was current
};

class outbox_cursors {
 public:
  outbox_cursors(boost::asio::any_io_executor ex, sql::state_store& store, lsn_tracker& tracker,
                 endpoint_directory& directory, dispatcher& deliveries, slot_recovery& recovery,
                 const clock_source& clock);

  /// The stream passed `end`: a Commit (of transaction `xid`, whose outbox rows are of `tenant` —
  /// "" if of several, nullptr if it inserted none), or a keepalive outside a transaction.
  void streamed(std::uint32_t xid, const std::string* tenant, lsn end);

  /// skips(), follow() and handled(), for the dispatcher (dispatcher::set_cursor_hooks).
  dispatcher::cursor_hooks hooks();

  /// A new delivery from the stream: taken (its ticket released, or held until the cursor is
  /// durable) if its endpoint follows the outbox, or is rejoining and the final window covers it.
  bool skips(delivery::job& j);
  /// A delivery that would be written pending for a reason of its endpoint's (`reason`): taken
  /// if its endpoint follows (or can start to follow) the outbox and its transaction is not
  /// covered already. A drained one is taken only back into its open window.
  follow_result follow(delivery::job& j, std::string_view reason);

  /// A stream delivery of the endpoint was handled (delivered, merged away or written): if the
  /// endpoint's cursor owes its transaction, reading it back skips this event.
  void handled(std::int64_t endpoint_id, const delivery::event& ev);

  /// The endpoint's event types or filter changed in the stream (`before`: as it was): if it
  /// follows the outbox, the transactions committed before the change that its cursor owes are
  /// read back under `before`'s routing, as the stream would have routed them.
  void routing_changed(const endpoint& before);

  /// A rejoin's final page is being read: reading the slot waits (one query).
  bool holds_stream() const { return holding_; }
  /// Cursors whose position has not moved for `age` end what they owe dead as one range.
  void give_up_after(std::chrono::hours age) { give_up_after_ = age; }
  /// The retry policy: a failing endpoint's cursor reads back one event after its backoff.
  void retry_policy(const delivery::retry_policy& p) { backoff_ = p; }
  /// Whether endpoints may leave the stream (walhook run --behind cursor); cursors loaded from
  /// the table drain and rejoin either way.
  void allow_entering(bool allow) { allow_entering_ = allow; }

  /// Session start: this shard's cursors from walhook.endpoint_cursors, and the delivered
  /// snapshot recorded with the slot's position (`delivered`, pg_snapshot text).
  boost::asio::awaitable<boost::system::error_code> start_session(const std::optional<std::string>& delivered);
  /// Session end: in-memory state goes (the stream and the windows are read again).
  void end_session();
  /// A stop, once the attempts ended: each cursor's progress is written (then end_session()).
  void flush();
  /// The drain: while `active()`, windows for following endpoints that can take work.
  boost::asio::awaitable<void> run(std::function<bool()> active);
  /// A drained delivery finished: its window may be done.
  void wake();

  const cursor_stats& stats() const { return stats_; }
  std::vector<cursor_view> views() const;
  bool follows(std::int64_t endpoint_id) const { return states_.contains(endpoint_id); }

 private:
  enum class phase { entering, following, rejoined };
  struct window {
    lsn_tracker::ticket ticket = 0;
    pg_snapshot snapshot;
    std::string snapshot_text;
    lsn insert_lsn;
    std::int64_t last_seq = 0;
    bool full = false;
    bool final = false;
    std::optional<std::int64_t> min_dropped_seq;
    std::uint64_t deliveries = 0;
    steady_time read_at{};
  };
  struct state {
    phase ph = phase::entering;
    std::string reason;
    std::string tenant_id;  ///< the endpoint's when the cursor began: an id reused by another tenant is not it
    pg_snapshot covered;
    std::string covered_text;
    std::vector<std::uint64_t> also;  ///< sorted
    bool durable = false;
    bool write_issued = false;
    std::vector<lsn_tracker::ticket> held;        ///< skipped before the cursor was durable
    std::unordered_set<std::uint32_t> dropped;    ///< entering: xids of deliveries taken
    lsn dropped_from;                             ///< entering: the oldest taken delivery's commit LSN
    std::optional<pg_snapshot> window_snapshot;   ///< a paged window's, between pages
    std::string window_text;
    std::int64_t window_after = 0;
    /// Pages read and not yet done, oldest first: the next page is read while earlier ones are
    /// sent (its endpoint has room), so a drain is a stream of pages, not one at a time.
    std::deque<window> open;
    std::optional<std::int64_t> min_dropped_seq;  ///< of the open pages: the first that went back
    bool small_last = false;  ///< the last window was smaller than a page: the next one may be final
    std::uint64_t drained_unwritten = 0;
    std::uint64_t drained_total = 0;
    bool dirty = false;
    std::uint64_t writes_in_flight = 0;  ///< cursor writes queued, not yet durable
    steady_time last_write{};
    steady_time covered_at{};  ///< when what `covered` shows was current (entering: the first skip)
    pg_snapshot rejoin_snapshot;
    lsn rejoin_until;
    bool deleted = false;  ///< rejoined: the row's delete is durable
    std::uint64_t skipped_while_reading = 0;  ///< stream deliveries skipped while a page was read
    /// Events of transactions it owes that the stream handled for the endpoint before the rest
    /// was taken (one transaction, part sent): read back, they are not sent again. In memory
    /// only: after a crash they are (duplicates, never a gap).
    std::unordered_set<std::string> sent;
    /// The routing before each change streamed while it followed the outbox, oldest first: a
    /// transaction the first one holds is routed with it (relay/core/routing_epoch.hpp).
    std::vector<routing_epoch> epochs;
  };

  bool covers(const state& s, std::uint32_t xid) const;
  /// The endpoint's cursor state; a state of an endpoint gone, or of its id's previous tenant, is dropped.
  state* find(std::int64_t endpoint_id);
  void take(state& s, delivery::job& j);
  void issue_entry_write(std::int64_t endpoint_id);
  void write_cursor(std::int64_t endpoint_id, state& s);
  boost::asio::awaitable<void> read_window(std::int64_t endpoint_id, std::size_t limit);
  /// The page's rows routed to the endpoint become its deliveries, holding the window's ticket.
  /// Returns the rows read (routed or not).
  std::size_t submit_page(std::int64_t endpoint_id, const sql::text_rows& page, window& w);
  /// Whether the event read back (of transaction `xid`) is the endpoint's: as routed when it
  /// committed (an epoch of `s` holding it), else as routed now. `why`: a body the filter cannot read.
  bool owed(const state& s, std::int64_t endpoint_id, const delivery::event& ev, std::uint32_t xid,
            std::optional<std::string_view> body, std::string& why) const;
  /// The routing changes noted for an endpoint that had no cursor (recent_routing_) that its
  /// deliveries still in memory may have been routed with; taken by a cursor it enters.
  std::vector<routing_epoch> take_recent_routing(std::int64_t endpoint_id);
  void finish_window(std::int64_t endpoint_id, state& s);
  /// The pages done in order: the cursor moves past them (or, after a delivery went back, to just
  /// before it once every page is done).
  void finish_pages(state& s);
  std::size_t page_size(std::int64_t endpoint_id, const state& s) const;
  /// Every 5 s: cursors past the give-up age, with nothing of theirs in flight, end what they owe
  /// dead as one range and move to the current snapshot.
  boost::asio::awaitable<void> give_up_stale();

  boost::asio::any_io_executor executor_;
  sql::state_store& store_;
  lsn_tracker& tracker_;
  endpoint_directory& directory_;
  dispatcher& deliveries_;
  slot_recovery& recovery_;
  const clock_source& clock_;
  std::unordered_map<std::int64_t, state> states_;
  /// Routing changes of endpoints without a cursor, kept until the delivered snapshot shows what
  /// they hold (their deliveries are then handled; checked at each change, 1024 at most): one
  /// entering the outbox after the change owes transactions of before it, routed in memory with
  /// the routing before.
  std::unordered_map<std::int64_t, std::vector<routing_epoch>> recent_routing_;
  /// Transactions streamed this session with outbox rows (xid, tenant), trimmed to those not
  /// visible in the newest delivered snapshot: the candidates of an entering cursor's `also`.
  std::deque<std::pair<std::uint32_t, std::string>> streamed_;
  lsn streamed_until_;  ///< end LSN of the last Commit streamed
  bool holding_ = false;
  bool allow_entering_ = true;
  std::chrono::hours give_up_after_{72};
  delivery::retry_policy backoff_;
  steady_time last_give_up_check_{};
  bool woken_ = false;
  wake_signal wake_;
  cursor_stats stats_;
};

}  // namespace walhook::relay
