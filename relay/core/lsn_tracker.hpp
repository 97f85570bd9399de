#pragma once
// Decides the flush LSN walhook may acknowledge (docs/architecture.md, Invariants, 2, and Pitfalls).
//
// Every transaction read from the slot gets a ticket at Begin; each of its deliveries holds the
// ticket until it is delivered or persisted in walhook.deliveries (release()). At Commit the
// transaction learns its end LSN. The confirmable position is the end LSN of the newest
// transaction such that it and every earlier one are committed with nothing held — never a
// row's LSN, never past work in flight, never 0. With nothing open at all, the WAL end of a
// keepalive is confirmable too, so a quiet outbox on a busy database does not retain WAL.
//
// Pure and single-threaded.

#include "common/lsn.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>

namespace walhook::relay {

class lsn_tracker {
 public:
  using ticket = std::uint64_t;  ///< 0 is "no ticket"

  /// A transaction began (pgoutput Begin). Returns its ticket.
  ticket begin();
  /// One more delivery of the transaction is outstanding.
  void hold(ticket t);
  /// One delivery of the transaction is done (delivered, persisted, or merged away).
  void release(ticket t);
  /// The transaction's Commit arrived: its end LSN is what completing it confirms.
  void commit(ticket t, walhook::lsn end_lsn);
  /// A keepalive reported the server's WAL end.
  void keepalive(walhook::lsn wal_end);
  /// Forgets open transactions (the stream restarts; they will be sent again). Confirmed stays.
  void reset();
  /// reset(), and the confirmed position becomes `start`: a new slot starts a new history.
  void restart_at(walhook::lsn start);

  /// Detached tickets, for deliveries that are in no transaction of the stream (a backfill from
  /// the outbox): held and released like the others, they never hold the confirmable position
  /// back; detached_outstanding() says when all of one's deliveries are done.
  ticket begin_detached();
  static bool is_detached(ticket t) { return (t & detached_bit) != 0; }
  std::uint64_t detached_outstanding(ticket t) const;
  void end_detached(ticket t);

  /// The flush LSN that may be acknowledged now (0 until something is confirmable).
  walhook::lsn confirmable() const { return confirmed_; }
  /// The end LSN of the newest streamed transaction that is confirmable (or the start a new slot
  /// restarted at): what confirmable() is apart from keepalives. On a database where nothing
  /// walhook streams happens, only keepalives move confirmable() — past walhook's own writes.
  walhook::lsn confirmed_by_transactions() const { return confirmed_by_transactions_; }
  /// Transactions not yet confirmable (open, or waiting for deliveries).
  std::size_t open_transactions() const { return txns_.size(); }
  /// Ticket of the oldest transaction not yet confirmable, 0 if none.
  ticket oldest_open() const { return txns_.empty() ? 0 : first_; }
  /// The (stream) transaction is committed with no delivery outstanding, or no longer open: no
  /// delivery of it is, or can still be, held.
  bool settled(ticket t) const;
  /// Deliveries held across all open transactions.
  std::uint64_t held() const { return held_; }

 private:
  struct txn {
    walhook::lsn end_lsn;
    std::uint64_t outstanding = 0;
    bool committed = false;
  };
  txn* find(ticket t);
  const txn* find(ticket t) const;
  void advance();
  static constexpr ticket detached_bit = ticket{1} << 63;

  std::map<ticket, std::uint64_t> detached_;  ///< detached ticket → deliveries outstanding
  ticket next_detached_ = detached_bit;
  std::deque<txn> txns_;
  ticket first_ = 1;  ///< ticket of txns_.front()
  ticket next_ = 1;
  std::uint64_t held_ = 0;
  walhook::lsn confirmed_;
  walhook::lsn confirmed_by_transactions_;
};

}  // namespace walhook::relay
