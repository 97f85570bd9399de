#include "wal/relation_cache.hpp"

#include "tests/unit/wal/wal_test_support.hpp"
#include "wal/errc.hpp"

#include <doctest/doctest.h>

namespace pg = walhook::wal::pgoutput;
using walhook::wal::errc;
using walhook::wal::relation_cache;

namespace {

pg::relation items_v1() {
  return {16396, "public", "items", 'd', {{1, "id", 23, -1}, {0, "name", 25, -1}}};
}
pg::relation items_v2() {  // after ALTER TABLE items ADD COLUMN note text
  return {16396, "public", "items", 'd', {{1, "id", 23, -1}, {0, "name", 25, -1}, {0, "note", 25, -1}}};
}
pg::tuple row(std::size_t columns) { return pg::tuple(columns, {pg::value_kind::text, "x"}); }

}  // namespace

TEST_CASE("relation_cache stores, replaces and forgets relations") {
  relation_cache cache;
  CHECK(cache.find(16396) == nullptr);
  cache.apply(items_v1());
  REQUIRE(cache.find(16396) != nullptr);
  CHECK(*cache.find(16396) == items_v1());
  CHECK(cache.size() == 1);
  cache.apply(items_v2());  // the latest Relation message wins
  CHECK(cache.find(16396)->columns.size() == 3);
  CHECK(cache.size() == 1);
  cache.apply({16400, "shop", "orders", 'f', {}});
  CHECK(cache.size() == 2);
  CHECK(cache.find(16400)->schema == "shop");
  cache.clear();
  CHECK(cache.size() == 0);
  CHECK(cache.find(16396) == nullptr);
}

TEST_CASE("relation_cache::column_index finds columns by exact name") {
  auto rel = items_v2();
  CHECK(relation_cache::column_index(rel, "id") == 0u);
  CHECK(relation_cache::column_index(rel, "note") == 2u);
  CHECK_FALSE(relation_cache::column_index(rel, "NOTE").has_value());
  CHECK_FALSE(relation_cache::column_index(rel, "missing").has_value());
  CHECK_FALSE(relation_cache::column_index(pg::relation{}, "id").has_value());
}

TEST_CASE("relation_cache::observe applies Relations and checks rows against them") {
  relation_cache cache;
  // A row before its Relation is a protocol error, not a skip.
  CHECK(cache.observe(pg::insert{16396, row(2)}) == errc::unknown_relation);
  CHECK(cache.observe(pg::truncate{0, {16396}}) == errc::unknown_relation);
  CHECK(cache.observe(pg::begin{}) == boost::system::error_code{});
  CHECK(cache.size() == 0);

  CHECK(cache.observe(items_v1()) == boost::system::error_code{});
  CHECK(cache.size() == 1);
  CHECK(cache.observe(pg::insert{16396, row(2)}) == boost::system::error_code{});
  CHECK(cache.observe(pg::insert{16396, row(3)}) == errc::column_mismatch);
  CHECK(cache.observe(pg::update{16396, row(2), std::nullopt, row(2)}) == boost::system::error_code{});
  CHECK(cache.observe(pg::update{16396, row(1), std::nullopt, row(2)}) == errc::column_mismatch);
  CHECK(cache.observe(pg::update{16396, std::nullopt, row(2), row(1)}) == errc::column_mismatch);
  CHECK(cache.observe(pg::delete_{16396, row(2), std::nullopt}) == boost::system::error_code{});
  CHECK(cache.observe(pg::delete_{16396, std::nullopt, row(4)}) == errc::column_mismatch);
  CHECK(cache.observe(pg::delete_{99999, row(2), std::nullopt}) == errc::unknown_relation);
  CHECK(cache.observe(pg::truncate{0, {16396, 99999}}) == errc::unknown_relation);
  CHECK(cache.observe(pg::truncate{3, {16396}}) == boost::system::error_code{});

  // After the table gains a column, rows decode against the new shape.
  CHECK(cache.observe(items_v2()) == boost::system::error_code{});
  CHECK(cache.observe(pg::insert{16396, row(2)}) == errc::column_mismatch);
  CHECK(cache.observe(pg::insert{16396, row(3)}) == boost::system::error_code{});

  // On reconnect the cache is cleared: rows need a fresh Relation.
  cache.clear();
  CHECK(cache.observe(pg::insert{16396, row(3)}) == errc::unknown_relation);
}
