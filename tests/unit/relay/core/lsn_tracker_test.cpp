// The flush-LSN tracker (relay/core/lsn_tracker.hpp, docs/architecture.md, Invariants, 2, and Pitfalls): hand-made
// sequences, then a seeded model-based test.

#include "relay/core/lsn_tracker.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

using walhook::relay::lsn_tracker;
using walhook::lsn;

namespace {

std::uint64_t confirmed(const lsn_tracker& t) { return t.confirmable().value(); }

}  // namespace

TEST_CASE("lsn_tracker: settled — committed with nothing held (or gone); before its Commit a transaction may hold more") {
  lsn_tracker t;
  auto a = t.begin();
  t.hold(a);
  t.release(a);
  CHECK_FALSE(t.settled(a));  // its Commit has not come: more deliveries of it may
  t.hold(a);
  t.commit(a, lsn{100});
  CHECK_FALSE(t.settled(a));  // one still held
  auto b = t.begin();
  t.hold(b);
  t.commit(b, lsn{200});
  t.release(b);
  CHECK(t.settled(b));  // committed, nothing held — though a, before it, is not done
  t.release(a);
  CHECK(t.settled(a));  // and gone
  CHECK(t.settled(t.begin_detached()));
}

TEST_CASE("lsn_tracker: nothing is confirmable at first (never 0 as a real position)") {
  lsn_tracker t;
  CHECK(confirmed(t) == 0);
  CHECK_FALSE(t.confirmable().valid());
  CHECK(t.open_transactions() == 0);
  CHECK(t.held() == 0);
}

TEST_CASE("lsn_tracker: a transaction without deliveries is confirmable at its Commit's end LSN") {
  lsn_tracker t;
  auto a = t.begin();
  CHECK(a != 0);
  CHECK(t.open_transactions() == 1);
  CHECK(confirmed(t) == 0);  // open: nothing yet
  t.commit(a, lsn{0x1000});
  CHECK(confirmed(t) == 0x1000);
  CHECK(t.open_transactions() == 0);
}

TEST_CASE("lsn_tracker: a transaction is confirmable only once every delivery it holds is released") {
  lsn_tracker t;
  auto a = t.begin();
  t.hold(a);
  t.hold(a);
  t.hold(a);
  CHECK(t.held() == 3);
  t.commit(a, lsn{0x2000});
  CHECK(confirmed(t) == 0);
  t.release(a);
  t.release(a);
  CHECK(confirmed(t) == 0);
  CHECK(t.held() == 1);
  t.release(a);
  CHECK(confirmed(t) == 0x2000);
  CHECK(t.held() == 0);
  CHECK(t.open_transactions() == 0);
}

TEST_CASE("lsn_tracker: releases before Commit do not confirm an uncommitted transaction") {
  lsn_tracker t;
  auto a = t.begin();
  t.hold(a);
  t.release(a);  // delivered before the Commit message arrived
  CHECK(confirmed(t) == 0);
  CHECK(t.open_transactions() == 1);
  t.commit(a, lsn{0x3000});
  CHECK(confirmed(t) == 0x3000);
}

TEST_CASE("lsn_tracker: never past a held delivery — only contiguous completed transactions count") {
  lsn_tracker t;
  auto a = t.begin();
  t.hold(a);
  t.commit(a, lsn{100});
  auto b = t.begin();
  t.commit(b, lsn{200});
  auto c = t.begin();
  t.hold(c);
  t.commit(c, lsn{300});
  auto d = t.begin();
  t.commit(d, lsn{400});
  CHECK(confirmed(t) == 0);  // b and d are done, but a holds everything behind it
  CHECK(t.open_transactions() == 4);

  t.release(a);
  CHECK(confirmed(t) == 200);  // a and b; c still holds
  CHECK(t.open_transactions() == 2);

  t.release(c);
  CHECK(confirmed(t) == 400);
  CHECK(t.open_transactions() == 0);
}

TEST_CASE("lsn_tracker: an uncommitted earlier transaction blocks later committed ones") {
  lsn_tracker t;
  auto a = t.begin();
  auto b = t.begin();
  t.commit(b, lsn{200});
  CHECK(confirmed(t) == 0);
  t.commit(a, lsn{100});
  CHECK(confirmed(t) == 200);
}

TEST_CASE("lsn_tracker: a keepalive's WAL end is confirmable only when nothing is open") {
  lsn_tracker t;
  t.keepalive(lsn{500});
  CHECK(confirmed(t) == 500);  // idle outbox on a busy database still advances

  auto a = t.begin();
  t.keepalive(lsn{900});
  CHECK(confirmed(t) == 500);  // a is open: its rows may be before 900
  t.hold(a);
  t.commit(a, lsn{700});
  t.keepalive(lsn{900});
  CHECK(confirmed(t) == 500);  // a is committed but a delivery is outstanding
  t.release(a);
  CHECK(confirmed(t) == 700);
  t.keepalive(lsn{900});
  CHECK(confirmed(t) == 900);
}

TEST_CASE("lsn_tracker: confirmed_by_transactions moves with streamed transactions, never with keepalives") {
  lsn_tracker t;
  t.keepalive(lsn{500});
  CHECK(t.confirmable().value() == 500);
  CHECK(t.confirmed_by_transactions().value() == 0);  // only walhook's own writes moved the WAL end
  auto a = t.begin();
  t.hold(a);
  t.commit(a, lsn{700});
  CHECK(t.confirmed_by_transactions().value() == 0);  // a delivery is outstanding
  t.release(a);
  CHECK(t.confirmed_by_transactions().value() == 700);
  t.keepalive(lsn{900});
  CHECK(t.confirmable().value() == 900);
  CHECK(t.confirmed_by_transactions().value() == 700);
  t.restart_at(lsn{2000});  // a new slot: its start is where streamed history begins
  CHECK(t.confirmed_by_transactions().value() == 2000);
}

TEST_CASE("lsn_tracker: the confirmable position never goes backwards") {
  lsn_tracker t;
  t.keepalive(lsn{1000});
  t.keepalive(lsn{800});
  CHECK(confirmed(t) == 1000);
  auto a = t.begin();
  t.commit(a, lsn{900});  // a replayed transaction below what was already confirmed
  CHECK(confirmed(t) == 1000);
  t.keepalive(lsn{0});
  CHECK(confirmed(t) == 1000);
  auto b = t.begin();
  t.commit(b, lsn{0});
  CHECK(confirmed(t) == 1000);
}

TEST_CASE("lsn_tracker: releases and holds of unknown tickets are ignored, and never underflow") {
  lsn_tracker t;
  t.release(0);
  t.release(42);
  t.hold(0);
  t.hold(42);
  CHECK(t.held() == 0);

  auto a = t.begin();
  t.hold(a);
  t.release(a);
  t.release(a);  // one release too many
  CHECK(t.held() == 0);
  auto b = t.begin();
  t.hold(b);
  t.release(a);  // a has nothing held: must not touch b
  CHECK(t.held() == 1);
  t.commit(a, lsn{10});
  t.commit(b, lsn{20});
  CHECK(confirmed(t) == 10);
  t.release(b);
  CHECK(confirmed(t) == 20);
  // a and b are gone: late calls with their tickets change nothing.
  t.release(a);
  t.hold(b);
  t.commit(b, lsn{999});
  CHECK(t.held() == 0);
  CHECK(confirmed(t) == 20);
}

TEST_CASE("lsn_tracker: tickets are distinct and increasing") {
  lsn_tracker t;
  auto a = t.begin();
  t.commit(a, lsn{1});
  auto b = t.begin();
  auto c = t.begin();
  CHECK(b > a);
  CHECK(c > b);
  t.reset();
  auto d = t.begin();
  CHECK(d > c);
}

TEST_CASE("lsn_tracker: reset() forgets open transactions and ignores their late releases") {
  lsn_tracker t;
  auto a = t.begin();
  t.commit(a, lsn{100});
  auto b = t.begin();
  t.hold(b);
  t.hold(b);
  t.commit(b, lsn{200});
  auto c = t.begin();  // never committed: the connection dropped
  t.hold(c);
  CHECK(confirmed(t) == 100);

  t.reset();  // the stream restarts from the confirmed position; b and c will be sent again
  CHECK(confirmed(t) == 100);
  CHECK(t.open_transactions() == 0);
  CHECK(t.held() == 0);

  auto b2 = t.begin();  // b again
  t.hold(b2);
  // Late releases of the forgotten tickets (deliveries finishing after the reconnect).
  t.release(b);
  t.release(b);
  t.release(c);
  CHECK(t.held() == 1);
  t.commit(b2, lsn{200});
  CHECK(confirmed(t) == 100);
  t.commit(c, lsn{300});  // late commit of a forgotten ticket
  CHECK(confirmed(t) == 100);
  t.release(b2);
  CHECK(confirmed(t) == 200);
}

TEST_CASE("lsn_tracker: keepalive after reset with nothing open advances") {
  lsn_tracker t;
  auto a = t.begin();
  t.hold(a);
  t.reset();
  t.keepalive(lsn{50});
  CHECK(confirmed(t) == 50);
}

TEST_CASE("lsn_tracker: random begin/hold/release/commit/keepalive/reset sequences match a model") {
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

    struct txn {
      lsn_tracker::ticket ticket;
      std::uint64_t end = 0;
      int outstanding = 0;
      bool committed = false;
    };
    lsn_tracker t;
    std::deque<txn> open;                    // model of the tracker's open transactions, in order
    std::vector<lsn_tracker::ticket> stale;  // tickets forgotten by reset or already confirmed
    std::uint64_t wal = 16;                  // increasing WAL position
    std::uint64_t expected = 0;
    std::uint64_t previous = 0;
    txn* streaming = nullptr;  // the transaction whose rows are being read (begin … commit)

    for (int step = 0; step < 2000; ++step) {
      CAPTURE(step);
      int op = pick(0, 99);
      if (op < 15 && !streaming) {
        open.push_back({t.begin(), 0, 0, false});
        streaming = &open.back();
      } else if (op < 35 && streaming) {
        t.hold(streaming->ticket);
        ++streaming->outstanding;
      } else if (op < 45 && streaming) {
        wal += static_cast<std::uint64_t>(pick(1, 500));
        streaming->end = wal;
        streaming->committed = true;
        t.commit(streaming->ticket, lsn{wal});
        streaming = nullptr;
      } else if (op < 80) {
        // A delivery finishes: release a random held ticket (or a stale one).
        std::vector<txn*> holders;
        for (auto& x : open)
          if (x.outstanding > 0) holders.push_back(&x);
        if (!holders.empty() && pick(0, 9) != 0) {
          txn* x = holders[static_cast<std::size_t>(pick(0, static_cast<int>(holders.size()) - 1))];
          --x->outstanding;
          t.release(x->ticket);
        } else if (!stale.empty()) {
          t.release(stale[static_cast<std::size_t>(pick(0, static_cast<int>(stale.size()) - 1))]);
        }
      } else if (op < 95) {
        wal += static_cast<std::uint64_t>(pick(0, 300));
        t.keepalive(lsn{wal});
        if (open.empty()) expected = std::max(expected, wal);
      } else if (op < 97) {
        for (auto& x : open) stale.push_back(x.ticket);
        open.clear();
        streaming = nullptr;
        t.reset();
      }
      // Model: pop the completed prefix.
      while (!open.empty() && open.front().committed && open.front().outstanding == 0) {
        expected = std::max(expected, open.front().end);
        stale.push_back(open.front().ticket);
        open.pop_front();
      }
      // pop_front invalidates nothing else in a deque, but `streaming` points at the back, which
      // is never committed, so it is never popped.
      std::uint64_t held = 0;
      for (const auto& x : open) held += static_cast<std::uint64_t>(x.outstanding);

      REQUIRE(confirmed(t) == expected);
      REQUIRE(t.open_transactions() == open.size());
      REQUIRE(t.held() == held);
      REQUIRE(confirmed(t) >= previous);  // never backwards
      // Never past a transaction that still holds a delivery or has not committed.
      for (const auto& x : open)
        if (x.committed) REQUIRE(x.end > confirmed(t));
      previous = confirmed(t);
    }
  }
}

TEST_CASE("detached tickets (backfills) count their deliveries and never hold the confirmable position") {
  lsn_tracker t;
  auto backfill = t.begin_detached();
  t.hold(backfill);
  t.hold(backfill);
  auto txn = t.begin();
  t.hold(txn);
  t.commit(txn, lsn{0x200});
  t.release(txn);
  CHECK(t.confirmable() == lsn{0x200});  // the backfill's two deliveries do not hold it
  CHECK(t.detached_outstanding(backfill) == 2);
  t.release(backfill);
  t.release(backfill);
  t.release(backfill);  // one release too many is ignored
  CHECK(t.detached_outstanding(backfill) == 0);
  t.end_detached(backfill);
  t.release(backfill);  // after the end (a session ended): a no-op
  CHECK(t.detached_outstanding(backfill) == 0);
  // A new slot: the confirmed position starts over, even lower.
  t.restart_at(lsn{0x100});
  CHECK(t.confirmable() == lsn{0x100});
  CHECK(t.open_transactions() == 0);
}
