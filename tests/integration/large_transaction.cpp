// One transaction with 100,000 outbox rows (issue 3): delivered completely while walhook's
// memory stays bounded, and the server never drops the stream for wal_sender_timeout while
// walhook is busy. The endpoints keep up, so reading waits for their full queues
// (back-pressure) and nothing is written back (issue 8; it spilled most rows before). Keeping
// up means a full queue (1,000) drains within half of --max-wait-ms: with the default 1 s that
// takes 2,000 deliveries/s per endpoint, which a loaded 2-core machine misses at times (79,735
// rows spilled, once), so the test runs with --max-wait-ms 10000 (≥ 200/s keeps up).

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <set>

using namespace walhook;
using namespace std::chrono_literals;

TEST_CASE("a 100,000-row transaction is delivered completely with bounded memory") {
  test::scenario s("large");
  auto& db = s.db;
  auto& rcv = s.rcv;
  // A short wal_sender_timeout: a relay that stops answering while busy would be cut off.
  db.exec("ALTER SYSTEM SET wal_sender_timeout = '5s'");
  db.exec("SELECT pg_reload_conf()");
  rcv->keep_bodies(false);
  test::add_endpoint(db, "big", rcv->url("/a"), delivery::generate_secret(), {}, 16);
  test::add_endpoint(db, "big", rcv->url("/b"), delivery::generate_secret(), {}, 16);

  auto walhook = s.start_walhook({"--max-wait-ms", "10000"});
  REQUIRE(test::eventually([&] { return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = 'large'") == "t"; }, 20s));

  db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload) "
          "SELECT 'big', 'bulk.row', jsonb_build_object('n', g, 'pad', repeat('p', 100)) FROM generate_series(1, 100000) g");
  std::string commit_lsn = test::query_value(db, "SELECT pg_current_wal_lsn()");

  long peak_kib = 0;
  auto done = [&] {
    peak_kib = std::max(peak_kib, walhook.peak_rss_kib());
    return rcv->count("/a") >= 100000 && rcv->count("/b") >= 100000;
  };
  auto started = std::chrono::steady_clock::now();
  bool complete = test::eventually(done, 600s, 250ms);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  peak_kib = std::max(peak_kib, walhook.peak_rss_kib());
  if (!complete) MESSAGE(walhook.log());
  REQUIRE(complete);

  // Exactly the 100,000 events, each to both endpoints.
  std::set<std::string> a, b;
  for (auto& r : rcv->requests()) {
    if (r.status != 200) continue;
    (r.path == "/a" ? a : b).insert(r.webhook_id);
  }
  CHECK(a.size() == 100000);
  CHECK(b.size() == 100000);

  pg::params p{commit_lsn};
  CHECK(test::eventually([&] { return test::query_value(db, "SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'large'", p) == "t"; }, 30s));
  CHECK(walhook.count_in_log("\"replication.stream_ended\"") == 0);  // never cut off by wal_sender_timeout
  CHECK(walhook.count_in_log("\"replication.streaming\"") == 1);
  MESSAGE(fmt::format("100,000-row transaction × 2 endpoints: delivered in {:.1f} s ({:.0f} deliveries/s), walhook peak "
                      "RSS {:.1f} MiB, spilled rows {}",
                      seconds, 200000 / seconds, peak_kib / 1024.0,
                      test::query_value(db, "SELECT count(*) FROM walhook.deliveries")));
  CHECK(peak_kib < 256 * 1024);  // bounded: queues are capped, reading waits for them
  CHECK(test::query_value(db, "SELECT count(*) FROM walhook.deliveries") == "0");

  db.exec("ALTER SYSTEM RESET wal_sender_timeout");
  db.exec("SELECT pg_reload_conf()");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("large events are bounded by bytes, not only by count: 300 events of 900 KB stay within --max-queue-bytes") {
  test::scenario s("large_bytes");
  auto& db = s.db;
  auto& rcv = s.rcv;
  rcv->keep_bodies(false);
  relay::receiver_behaviour slow;
  slow.delay = 20ms;  // 4 at a time: ~200 events/s, slower than walhook reads them
  rcv->set_behaviour("/a", slow);
  test::add_endpoint(db, "big", rcv->url("/a"), delivery::generate_secret());
  // --max-wait-ms 10000 as above: the endpoint keeps up (~200/s, a queue of ~35 events) on any machine.
  auto walhook = s.start_walhook({"--max-queue-bytes", "32MiB", "--max-wait-ms", "10000"});
  REQUIRE(test::eventually([&] { return test::query_value(db, "SELECT active FROM pg_replication_slots WHERE slot_name = 'large_bytes'") == "t"; }, 20s));
  const long baseline_kib = walhook.peak_rss_kib();
  // 300 × ~900 KB in one transaction: the count caps (1,000 per endpoint) would hold all of them.
  db.exec("INSERT INTO walhook.outbox (tenant_id, event_type, payload) "
          "SELECT 'big', 'bulk.row', jsonb_build_object('n', g, 'pad', repeat(md5(g::text), 28000)) "
          "FROM generate_series(1, 300) g");
  long peak_kib = 0;
  REQUIRE(test::eventually([&] {
    peak_kib = std::max(peak_kib, walhook.peak_rss_kib());
    return rcv->count("/a") >= 300;
  }, 120s, 50ms));
  MESSAGE(fmt::format("300 events of 900 KB with --max-queue-bytes 32MiB: walhook peak RSS {:.1f} MiB (at start {:.1f} MiB)",
                      peak_kib / 1024.0, baseline_kib / 1024.0));
  // 300 events are ~540 MB of payload and body; the budget keeps ~32 MiB of them in memory.
  CHECK(peak_kib - baseline_kib < 128 * 1024);
  CHECK(test::query_value(db, "SELECT count(*) FROM walhook.deliveries") == "0");  // waited, never spilled
  CHECK(walhook.stop() == 0);
}
