// The state store's SQL against a real PostgreSQL (docs/architecture.md, Schema; issue 3/4): batched upserts keyed
// by (endpoint, event), merges by merge key (in one batch and across batches, never back to an
// older event), no regression of delivered rows, superseded failures, fair claims, stale
// 'sending' rows, progress.

#include "common/time.hpp"
#include "sql/state_store.hpp"
#include "tests/harness/harness.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <doctest/doctest.h>

#include <boost/asio/detached.hpp>

#include <map>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

struct fixture {
  explicit fixture(const std::string& name) : url(test::fresh_database(name)), db(url) {
    sql::state_store_options o;
    o.conninfo = url;
    store = std::make_unique<sql::state_store>(ioc.get_executor(), o);
    asio::co_spawn(ioc, store->run(), asio::detached);
  }
  ~fixture() {
    store->stop(std::chrono::steady_clock::now() + 5s);
    ioc.run_for(5s);
  }
  /// Runs the io_context until every queued write is committed.
  void flush() {
    for (int i = 0; i < 500 && store->backlog() > 0; ++i) ioc.run_for(10ms);
    REQUIRE(store->backlog() == 0);
  }
  template <class T>
  T run(asio::awaitable<T> a) {
    auto f = asio::co_spawn(ioc, std::move(a), asio::use_future);
    while (f.wait_for(0s) != std::future_status::ready) ioc.run_for(5ms);
    return f.get();
  }
  std::string event(const std::string& tenant = "t") {
    pg::params p{tenant, "x", "{}"};
    return test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", p);
  }
  std::string value(const std::string& sql, const pg::params& p = {}) { return test::query_value(db, sql, p); }
  sql::upsert_delivery pending(const std::string& event_id, std::uint64_t lsn, std::optional<std::string> key = {},
                               std::int64_t endpoint = 1) {
    sql::upsert_delivery u;
    u.endpoint_id = endpoint;
    u.event_id = event_id;
    u.merge_key = std::move(key);
    u.event_created_at = "2026-11-30T00:00:00Z";
    u.commit_lsn = walhook::lsn{lsn};
    u.outcome.status = sql::delivery_status::pending;
    u.outcome.next_attempt_in = std::chrono::milliseconds{0};
    return u;
  }

  asio::io_context ioc;
  std::string url;
  relay::blocking_db db;
  std::unique_ptr<sql::state_store> store;
};

}  // namespace

TEST_CASE("upserts are keyed by (endpoint, event), batched, and never regress a delivered row") {
  fixture f("ss_upsert");
  std::string e = f.event();
  int durable = 0;
  f.store->enqueue(f.pending(e, 100), [&] { ++durable; });
  f.flush();
  CHECK(durable == 1);
  CHECK(f.value("SELECT status || ' ' || attempts FROM walhook.deliveries") == "pending 0");
  // The same event again (a redelivery after a crash) maps onto the row.
  auto again = f.pending(e, 100);
  again.outcome.attempts = 1;
  f.store->enqueue(again);
  f.flush();
  CHECK(f.value("SELECT count(*) || ' ' || max(attempts) FROM walhook.deliveries") == "1 1");
  auto done = f.pending(e, 100);
  done.outcome.status = sql::delivery_status::delivered;
  f.store->enqueue(done);
  f.flush();
  CHECK(f.value("SELECT status || ' ' || (delivered_at IS NOT NULL) FROM walhook.deliveries") == "delivered true");
  f.store->enqueue(f.pending(e, 100));  // a late pending never regresses it
  f.flush();
  CHECK(f.value("SELECT status FROM walhook.deliveries") == "delivered");
  // Many writes commit as few batches.
  auto before = f.store->batches_committed();
  for (int i = 0; i < 2000; ++i) f.store->enqueue(f.pending(f.event(), 200 + static_cast<std::uint64_t>(i), std::nullopt, 2));
  f.flush();
  CHECK(f.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = 2") == "2000");
  CHECK(f.store->batches_committed() - before <= 3);
}

TEST_CASE("merge: newest event per (endpoint, merge key) wins, within and across batches, never an older one") {
  fixture f("ss_merge");
  std::vector<std::string> ev;
  for (int i = 0; i < 6; ++i) ev.push_back(f.event());
  // One batch with three versions of one entity: only the newest is written.
  f.store->enqueue(f.pending(ev[0], 10, "k"));
  f.store->enqueue(f.pending(ev[1], 20, "k"));
  f.store->enqueue(f.pending(ev[2], 30, "k"));
  f.flush();
  CHECK(f.value("SELECT event_id::text FROM walhook.deliveries WHERE merge_key = 'k'") == ev[2]);
  // A later batch with a newer version replaces it in place.
  f.store->enqueue(f.pending(ev[3], 40, "k"));
  f.flush();
  CHECK(f.value("SELECT event_id::text || ' ' || merged_count FROM walhook.deliveries WHERE merge_key = 'k'") == ev[3] + " 1");
  // An older version arriving later (a failure persisted after a newer spill) is merged away.
  f.store->enqueue(f.pending(ev[4], 35, "k"));
  f.flush();
  CHECK(f.value("SELECT count(*) FROM walhook.deliveries WHERE merge_key = 'k'") == "1");
  CHECK(f.value("SELECT event_id::text FROM walhook.deliveries WHERE merge_key = 'k'") == ev[3]);
  // Other endpoints and keyless events (facts) never merge.
  f.store->enqueue(f.pending(ev[5], 50, "k", 2));
  f.store->enqueue(f.pending(ev[0], 10, std::nullopt, 3));
  f.store->enqueue(f.pending(ev[1], 20, std::nullopt, 3));
  f.flush();
  CHECK(f.value("SELECT count(*) FROM walhook.deliveries") == "4");
}

TEST_CASE("claims are fair per endpoint, move rows to sending, and failures merge into newer pending rows") {
  fixture f("ss_claim");
  for (int i = 0; i < 50; ++i) f.store->enqueue(f.pending(f.event(), 100 + static_cast<std::uint64_t>(i), std::nullopt, 1));
  for (int i = 0; i < 3; ++i) f.store->enqueue(f.pending(f.event(), 200 + static_cast<std::uint64_t>(i), std::nullopt, 2));
  f.flush();
  auto claimed = f.run(f.store->claim_due({{1, 4, false}, {2, 4, false}}));
  REQUIRE(claimed.has_value());
  std::map<std::int64_t, int> per_endpoint;
  for (auto& c : *claimed) {
    ++per_endpoint[c.endpoint_id];
    CHECK_FALSE(c.event_missing);
    CHECK(c.payload == "{}");
    CHECK(pg_timestamptz_to_iso8601(c.event_created_at).has_value());  // PostgreSQL's text, readable
  }
  CHECK(per_endpoint[1] == 4);  // the big backlog does not starve the small one
  CHECK(per_endpoint[2] == 3);
  CHECK(f.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'sending'") == "7");

  // A claimed (sending) delivery with a merge key fails while a newer one is pending: it goes.
  std::string old_event = f.event(), new_event = f.event();
  f.store->enqueue(f.pending(old_event, 300, "entity", 3));
  f.flush();
  auto c3 = f.run(f.store->claim_due({{3, 1, false}}));
  REQUIRE(c3.has_value());
  REQUIRE(c3->size() == 1);
  f.store->enqueue(f.pending(new_event, 310, "entity", 3));  // newer version while the old is in flight
  f.flush();
  CHECK(f.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = 3") == "2");
  sql::update_delivery failed;
  failed.row_id = c3->front().row_id;
  failed.outcome.status = sql::delivery_status::pending;
  failed.outcome.attempts = 1;
  failed.outcome.next_attempt_in = std::chrono::milliseconds{30000};
  f.store->enqueue(failed);
  f.flush();
  CHECK(f.value("SELECT count(*) || ' ' || max(event_id::text) FROM walhook.deliveries WHERE endpoint_id = 3") == "1 " + new_event);

  // Stale 'sending' rows (a crashed process) go back to pending.
  auto reset = f.run(f.store->reset_stale_sending(0s, {}));
  REQUIRE(reset.has_value());
  CHECK(*reset == 7);
  CHECK(f.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'sending'") == "0");
}

TEST_CASE("aggregate-ordered claims: the oldest of each aggregate only, none while one is being sent") {
  fixture f("ss_order");
  auto with_agg = [&](std::uint64_t lsn, const std::string& agg) {
    auto u = f.pending(f.event(), lsn, std::nullopt, 1);
    u.aggregate_id = agg;
    return u;
  };
  f.store->enqueue(with_agg(10, "A"));
  f.store->enqueue(with_agg(20, "A"));
  f.store->enqueue(with_agg(15, "B"));
  f.store->enqueue(with_agg(25, "B"));
  f.flush();
  auto first = f.run(f.store->claim_due({{1, 10, true}}));
  REQUIRE(first.has_value());
  std::set<std::uint64_t> lsns;
  for (auto& c : *first) lsns.insert(c.commit_lsn.value());
  CHECK(lsns == std::set<std::uint64_t>{10, 15});
  auto second = f.run(f.store->claim_due({{1, 10, true}}));  // A and B are both in flight
  REQUIRE(second.has_value());
  CHECK(second->empty());
}

TEST_CASE("slot progress is recorded and only moves forward; a delivered snapshot stays until a newer one") {
  fixture f("ss_progress");
  f.store->enqueue(sql::progress_write{"s", "sys1", walhook::lsn{1000}, "100:105:101"});
  f.store->enqueue(sql::progress_write{"s", "sys1", walhook::lsn{900}, {}});
  f.flush();
  auto p = f.run(f.store->load_progress("s"));
  REQUIRE(p.has_value());
  CHECK(p->confirmed == walhook::lsn{1000});
  CHECK(p->system_id == "sys1");
  CHECK(p->has_delivered_snapshot);
  auto snapshot = [&] { return f.value("SELECT delivered_snapshot::text FROM walhook.slot_progress WHERE slot_name = 's'"); };
  CHECK(snapshot() == "100:105:101");
  f.store->enqueue(sql::progress_write{"s", "sys1", walhook::lsn{800}, {}});
  f.flush();
  CHECK(f.run(f.store->load_progress("s"))->confirmed == walhook::lsn{1000});
  CHECK(snapshot() == "100:105:101");
  // Another cluster (a restored copy) starts its own record, even at a lower position.
  f.store->enqueue(sql::progress_write{"s", "sys2", walhook::lsn{500}, {}});
  f.flush();
  p = f.run(f.store->load_progress("s"));
  CHECK(p->confirmed == walhook::lsn{500});
  CHECK(p->system_id == "sys2");
  CHECK(!p->has_delivered_snapshot);  // the other cluster's snapshot means nothing here
  CHECK(!f.run(f.store->load_progress("other"))->confirmed.valid());
  // A write of a timeline this server does not write (the old primary's, retried on a promoted
  // standby) is not recorded; one of its own timeline (a fresh cluster's is 1) is.
  f.store->enqueue(sql::progress_write{"s", "sys2", walhook::lsn{9000}, "200:205:", 7});
  f.flush();
  CHECK(f.run(f.store->load_progress("s"))->confirmed == walhook::lsn{500});
  CHECK(snapshot().empty());
  f.store->enqueue(sql::progress_write{"s", "sys2", walhook::lsn{600}, "200:205:", 1});
  f.flush();
  CHECK(f.run(f.store->load_progress("s"))->confirmed == walhook::lsn{600});
  CHECK(snapshot() == "200:205:");
}

TEST_CASE("an attempt recorded 'sending' owns its row: its outcome lands by (endpoint, event); a stale reset spares owned rows") {
  fixture f("ss_sending");
  std::string a = f.event(), b = f.event(), c = f.event();
  auto mark = [&](const std::string& e, std::optional<std::string> key = {}) {
    auto u = f.pending(e, 100, std::move(key), 4);
    u.outcome.status = sql::delivery_status::sending;
    u.outcome.attempts = 0;
    return u;
  };
  f.store->enqueue(mark(a));
  f.store->enqueue(mark(b));
  f.flush();
  CHECK(f.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = 4 AND status = 'sending'") == "2");
  // The attempt on `a` succeeds: the row it owns becomes delivered.
  sql::update_delivery done;
  done.key = {4, a};
  done.outcome.status = sql::delivery_status::delivered;
  done.outcome.attempts = 1;
  done.outcome.last_attempt_at = std::chrono::system_clock::now();
  f.store->enqueue(done);
  f.flush();
  pg::params pa{a};
  CHECK(f.value("SELECT status || ' ' || attempts || ' ' || (delivered_at IS NOT NULL) FROM walhook.deliveries WHERE event_id = $1", pa) ==
        "delivered 1 true");
  // A late failure of the same delivery never regresses it.
  sql::update_delivery late = done;
  late.outcome.status = sql::delivery_status::pending;
  f.store->enqueue(late);
  f.flush();
  CHECK(f.value("SELECT status FROM walhook.deliveries WHERE event_id = $1", pa) == "delivered");

  // A crashed process's 'sending' rows go back to pending — but not those this process still owns.
  f.store->enqueue(mark(c));
  f.flush();
  auto reset = f.run(f.store->reset_stale_sending(0s, {sql::delivery_key{4, b}}));
  REQUIRE(reset.has_value());
  CHECK(*reset == 1);
  pg::params pb{b}, pc{c};
  CHECK(f.value("SELECT status FROM walhook.deliveries WHERE event_id = $1", pb) == "sending");
  CHECK(f.value("SELECT status FROM walhook.deliveries WHERE event_id = $1", pc) == "pending");

  // A marked state update that fails while a newer pending one holds its merge key is merged away.
  std::string older = f.event(), newer = f.event();
  f.store->enqueue(mark(older, "entity"));
  f.store->enqueue(f.pending(newer, 200, "entity", 4));
  f.flush();
  sql::update_delivery failed;
  failed.key = {4, older};
  failed.outcome.status = sql::delivery_status::pending;
  failed.outcome.attempts = 1;
  failed.outcome.next_attempt_in = std::chrono::milliseconds{30000};
  f.store->enqueue(failed);
  f.flush();
  CHECK(f.value("SELECT string_agg(event_id::text, ',') FROM walhook.deliveries WHERE endpoint_id = 4 AND merge_key = 'entity'") == newer);
}

TEST_CASE("a mark never takes over a row another attempt is sending, and never a delivered one") {
  fixture f("ss_mark_conflict");
  std::string e = f.event();
  f.store->enqueue(f.pending(e, 100, std::nullopt, 5));
  f.flush();
  auto claimed = f.run(f.store->claim_due({{5, 1, false}}));
  REQUIRE(claimed.has_value());
  REQUIRE(claimed->size() == 1);  // the row is 'sending' for a claimed attempt
  auto u = f.pending(e, 100, std::nullopt, 5);
  u.outcome.status = sql::delivery_status::sending;
  u.outcome.attempts = 7;
  f.store->enqueue(u);  // a stream redelivery of the same event, marked while it runs
  f.flush();
  pg::params p{e};
  CHECK(f.value("SELECT status || ' ' || attempts FROM walhook.deliveries WHERE event_id = $1", p) == "sending 0");
}

TEST_CASE("merge through marks: the newer event's state survives, whichever attempt fails first") {
  fixture f("ss_mark_merge");
  auto mark = [&](const std::string& e, std::uint64_t lsn, std::string key = "entity") {
    auto u = f.pending(e, lsn, std::move(key), 6);
    u.outcome.status = sql::delivery_status::sending;
    u.outcome.attempts = 0;
    return u;
  };
  auto fail = [&](const std::string& e) {
    sql::update_delivery u;
    u.key = {6, e};
    u.outcome.status = sql::delivery_status::pending;
    u.outcome.attempts = 1;
    u.outcome.next_attempt_in = std::chrono::milliseconds{30000};
    u.outcome.last_error = "HTTP 503";
    return u;
  };
  // v1 then v2 of one entity, both attempts running past the hold bound (marked 'sending').
  std::string v1 = f.event(), v2 = f.event();
  f.store->enqueue(mark(v1, 100));
  f.store->enqueue(mark(v2, 200));
  f.flush();
  f.store->enqueue(fail(v1));  // the older fails first and waits as pending…
  f.flush();
  f.store->enqueue(fail(v2));  // …then the newer fails: it must carry the entity's state
  f.flush();
  CHECK(f.value("SELECT string_agg(event_id::text || ':' || status, ',') FROM walhook.deliveries WHERE endpoint_id = 6") ==
        v2 + ":pending");

  // The other order: the newer fails first, the older after it is merged away.
  std::string w1 = f.event(), w2 = f.event();
  f.store->enqueue(mark(w1, 300));
  f.store->enqueue(mark(w2, 400));
  f.flush();
  f.store->enqueue(fail(w2));
  f.flush();
  f.store->enqueue(fail(w1));
  f.flush();
  CHECK(f.value("SELECT string_agg(event_id::text, ',') FROM walhook.deliveries WHERE endpoint_id = 6 AND status = 'pending'") ==
        w2);

  // A stale 'sending' row newer than the pending row holding its key replaces it, never the reverse.
  std::string x1 = f.event(), x2 = f.event();
  f.store->enqueue(f.pending(x1, 500, "other", 6));
  f.store->enqueue(mark(x2, 600, "other"));
  f.flush();
  pg::params key{"other"};
  auto reset = f.run(f.store->reset_stale_sending(0s, {}));
  REQUIRE(reset.has_value());
  CHECK(f.value("SELECT string_agg(event_id::text || ':' || status, ',') FROM walhook.deliveries WHERE merge_key = $1", key) ==
        x2 + ":pending");
}
