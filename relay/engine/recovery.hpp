#pragma once
// Slot loss and backfills (docs/decisions.md, "Slot loss"; sql/migrations/005_slot_recovery.sql).
//
// A slot that is missing or invalidated once walhook has recorded progress for it is an
// incident, never a silent new start: the incident is recorded (walhook.recoveries, with the last
// delivered snapshot as the lower bound), the slot is created again exporting its snapshot, and
// that snapshot becomes the incident's upper bound. The outbox rows between the two are then
// backfilled through the normal path — routed, merged, signed, retried exactly like streamed
// events, with the same webhook-ids — before the new slot is read, so each endpoint still sees
// them first. Operator backfills (`walhook recover --since`) run the same way while streaming.
//
// A backfill's deliveries hold a detached LSN-tracker ticket (they are in no streamed
// transaction); it is marked done once all of them are delivered or written to
// walhook.deliveries. A crash or a session end before that runs it again (duplicates, never a
// gap). The delivered snapshot itself advances while streaming: a snapshot is taken every
// 0.5 s with the WAL insert position right after it, and recorded with the slot's progress
// once the acknowledged position passes that position (candidates()).
//
// Single-threaded, on the engine's executor.

#include "common/lsn.hpp"
#include "common/time.hpp"
#include "relay/core/lsn_tracker.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace walhook::sql {
class state_store;
struct recovery;
}  // namespace walhook::sql
namespace walhook::wal {
class replication_stream;
}

namespace walhook::relay {

class dispatcher;
class stream_handler;

class slot_recovery {
 public:
  slot_recovery(sql::state_store& store, wal::replication_stream& stream, lsn_tracker& tracker,
                stream_handler& handler, dispatcher& deliveries, std::string slot);

  /// Session start, after stream.async_open() returned `opened`: when the slot is missing or
  /// invalidated (or a replacement was interrupted by a crash), records the incident, creates the
  /// slot again and records its snapshot. Returns an error if the session cannot go on.
  boost::asio::awaitable<boost::system::error_code> prepare_slot(boost::system::error_code opened);
  /// The slot was created by prepare_slot() this session, starting at this consistent point.
  std::optional<lsn> created_at() const { return created_at_; }

  /// Feeds the open backfills not fed yet this session, oldest first. `before_streaming`: the
  /// stream is started but not read, so waits keep its status updates going (async_hold);
  /// otherwise plain timers. Stops early (returning an error) when `keep_going` turns false.
  boost::asio::awaitable<boost::system::error_code> feed(bool before_streaming, std::function<bool()> keep_going);
  /// Marks done the fed backfills whose deliveries are all done.
  boost::asio::awaitable<void> finish();
  /// While the session streams (`active`): finish() every 200 ms, and feed `walhook recover`'s
  /// requests (looked for every 2 s). A task of its own, so a long backfill never delays the
  /// engine's housekeeping.
  boost::asio::awaitable<void> run(std::function<bool()> active);
  /// The session ended: backfills not finished run again in the next one.
  void end_session();

  /// Reads a candidate delivered snapshot (every 0.5 s while streaming).
  boost::asio::awaitable<void> sample_snapshot();
  /// A candidate delivered snapshot (pg_snapshot text) and the WAL insert position read after it.
  void add_candidate(std::string snapshot, lsn insert_position);
  /// A stop with nothing open and nothing unwritten: one last candidate, kept only once the stream
  /// has passed its insert position — the server is asked for keepalives (reply requested) for
  /// at most a second; a transaction arriving meanwhile ends the wait (it is streamed again
  /// after the restart). `confirm` passes the tracker's position to the stream. Then a slot lost
  /// while walhook is down, or `walhook reshard`, backfills almost nothing twice.
  boost::asio::awaitable<void> final_snapshot(std::function<void()> confirm);
  /// The newest candidate whose position `confirmed` has passed (older ones are dropped); empty
  /// if none.
  std::optional<std::string> take_delivered(lsn confirmed);
  /// A delivered snapshot known at session start (walhook.slot_progress): every transaction
  /// visible in it was handled before anything this session streams.
  void seed_delivered(std::optional<std::string> snapshot) { last_taken_ = std::move(snapshot); }
  /// The newest snapshot every transaction visible in which committed before `bound` (a
  /// candidate whose insert position is at or before it), or else the last delivered one; empty
  /// if there is none. An outbox cursor's lower bound (relay/engine/cursors.hpp).
  std::optional<std::string> snapshot_before(lsn bound) const;
  /// The last delivered snapshot (taken, or seeded at session start).
  const std::optional<std::string>& last_delivered() const { return last_taken_; }

  std::uint64_t incidents() const { return incidents_; }
  std::uint64_t events_backfilled() const { return events_backfilled_; }
  std::size_t backfills_running() const { return fed_.size(); }

 private:
  struct running {
    lsn_tracker::ticket ticket = 0;
    std::string reason;
    std::int64_t events = 0;
    std::int64_t deliveries = 0;
    steady_clock::time_point started{};
  };
  boost::asio::awaitable<boost::system::error_code> feed_one(const sql::recovery& r, bool before_streaming,
                                                             const std::function<bool()>& keep_going);
  boost::asio::awaitable<void> wait_a_little(bool before_streaming);

  sql::state_store& store_;
  wal::replication_stream& stream_;
  lsn_tracker& tracker_;
  stream_handler& handler_;
  dispatcher& deliveries_;
  std::string slot_;
  std::optional<lsn> created_at_;
  std::map<std::int64_t, running> fed_;  ///< backfill id → its deliveries' ticket and counts
  std::deque<std::pair<std::string, lsn>> candidates_;
  std::optional<std::string> last_taken_;
  std::uint64_t incidents_ = 0;
  std::uint64_t events_backfilled_ = 0;
};

}  // namespace walhook::relay
