// Malformed pgoutput input: every failure is an error value (wal::errc), never UB or a skip.

#include "wal/pgoutput.hpp"

#include "tests/unit/wal/wal_test_support.hpp"
#include "wal/errc.hpp"

#include <doctest/doctest.h>

#include <random>

namespace pg = walhook::wal::pgoutput;
using walhook::wal::errc;
using walhook::lsn;
using walhook::wal::test::builder;
using walhook::wal::test::bytes;
using walhook::wal::test::decode_ok;
using walhook::wal::test::load_fixture;

namespace {

boost::system::error_code decode_error(const bytes& data) {
  auto r = pg::decode(data);
  return r ? boost::system::error_code{} : r.error();
}

// Insert into relation 16396 of one text column "abc" (proto v1: no xid).
builder insert_abc() { return builder{}.ch('I').u32(16396).ch('N').u16(1).ch('t').u32(3).raw("abc"); }

}  // namespace

TEST_CASE("hand-built messages decode to the values written") {
  SUBCASE("Begin with high LSN bits and a negative (pre-2000) time") {
    auto m = decode_ok(builder{}.ch('B').u64(0x16'B374D848ULL).u64(static_cast<std::uint64_t>(-5)).u32(4000000000u).get());
    CHECK(std::get<pg::begin>(m) == pg::begin{lsn{0x16'B374D848ULL}, -5, 4000000000u});
  }
  SUBCASE("Commit keeps its flags byte") {
    auto m = decode_ok(builder{}.ch('C').u8(0).u64(10).u64(20).u64(30).get());
    CHECK(std::get<pg::commit>(m) == pg::commit{0, lsn{10}, lsn{20}, 30});
  }
  SUBCASE("Relation in pg_catalog (empty namespace) with no columns") {
    auto m = decode_ok(builder{}.ch('R').u32(1259).cstr("").cstr("pg_class").ch('n').u16(0).get());
    CHECK(std::get<pg::relation>(m) == pg::relation{1259, "", "pg_class", 'n', {}});
  }
  SUBCASE("Update with key tuple, Delete with old tuple") {
    auto m = decode_ok(
        builder{}.ch('U').u32(7).ch('K').u16(1).ch('t').u32(1).raw("1").ch('N').u16(1).ch('t').u32(1).raw("2").get());
    auto upd = std::get<pg::update>(m);
    CHECK(upd.key_tuple == std::optional<pg::tuple>(pg::tuple{{pg::value_kind::text, "1"}}));
    CHECK(upd.new_tuple == pg::tuple{{pg::value_kind::text, "2"}});
    auto d = decode_ok(builder{}.ch('D').u32(7).ch('O').u16(2).ch('n').ch('u').get());
    auto del = std::get<pg::delete_>(d);
    CHECK_FALSE(del.key_tuple.has_value());
    CHECK(del.old_tuple == std::optional<pg::tuple>(pg::tuple{{pg::value_kind::null, ""}, {pg::value_kind::unchanged_toast, ""}}));
  }
  SUBCASE("empty text value, empty tuple, empty message content, truncate of nothing") {
    auto m = decode_ok(builder{}.ch('I').u32(1).ch('N').u16(1).ch('t').u32(0).get());
    CHECK(std::get<pg::insert>(m).new_tuple == pg::tuple{{pg::value_kind::text, ""}});
    CHECK(std::get<pg::insert>(decode_ok(builder{}.ch('I').u32(1).ch('N').u16(0).get())).new_tuple.empty());
    auto msg = decode_ok(builder{}.ch('M').u8(0).u64(5).cstr("p").u32(0).get());
    CHECK(std::get<pg::logical_message>(msg) == pg::logical_message{0, lsn{5}, "p", ""});
    CHECK(std::get<pg::truncate>(decode_ok(builder{}.ch('T').u32(0).u8(0).get())).relation_oids.empty());
  }
  SUBCASE("Origin and Type") {
    CHECK(std::get<pg::origin>(decode_ok(builder{}.ch('O').u64(42).cstr("node_a").get())) == pg::origin{lsn{42}, "node_a"});
    CHECK(std::get<pg::type>(decode_ok(builder{}.ch('Y').u32(16500).cstr("s").cstr("mood").get())) ==
          pg::type{16500, "s", "mood"});
  }
}

TEST_CASE("empty input is truncated") { CHECK(decode_error({}) == errc::truncated); }

TEST_CASE("unknown message types are errors") {
  // Includes the protocol-2+ streaming and two-phase messages walhook never requests, and the
  // CopyBoth framing bytes, which are not pgoutput messages.
  for (char type : {'Z', 'A', 'S', 'E', 'c', 'P', 'K', 'r', 'b', 'w', 'k', 'N', 'i', '\0', '\xff'}) {
    CAPTURE(type);
    CHECK(decode_error(builder{}.ch(type).u64(1).u64(2).u64(3).get()) == errc::unknown_message_type);
  }
}

TEST_CASE("bad TupleData kinds are errors") {
  for (char kind : {'x', 'N', 'T', '\0', 'U'}) {
    CAPTURE(kind);
    CHECK(decode_error(builder{}.ch('I').u32(1).ch('N').u16(1).ch(kind).u32(0).get()) == errc::bad_tuple_kind);
  }
  // The second column is the bad one: the first must not hide it.
  CHECK(decode_error(builder{}.ch('I').u32(1).ch('N').u16(2).ch('n').ch('?').get()) == errc::bad_tuple_kind);
  // In a key tuple of an Update too.
  CHECK(decode_error(builder{}.ch('U').u32(1).ch('K').u16(1).ch('z').ch('N').u16(0).get()) == errc::bad_tuple_kind);
}

TEST_CASE("bad tuple markers are errors") {
  CHECK(decode_error(builder{}.ch('I').u32(1).ch('K').u16(0).get()) == errc::bad_tuple_marker);
  CHECK(decode_error(builder{}.ch('I').u32(1).ch('O').u16(0).get()) == errc::bad_tuple_marker);
  CHECK(decode_error(builder{}.ch('U').u32(1).ch('X').u16(0).get()) == errc::bad_tuple_marker);
  // After the old key only 'N' may follow.
  CHECK(decode_error(builder{}.ch('U').u32(1).ch('K').u16(0).ch('K').u16(0).get()) == errc::bad_tuple_marker);
  CHECK(decode_error(builder{}.ch('U').u32(1).ch('O').u16(0).ch('O').u16(0).get()) == errc::bad_tuple_marker);
  // A delete carries 'K' or 'O', never a new tuple.
  CHECK(decode_error(builder{}.ch('D').u32(1).ch('N').u16(0).get()) == errc::bad_tuple_marker);
}

TEST_CASE("trailing bytes after a complete message are rejected") {
  auto extra = [](builder b) { return b.u8(0).get(); };
  CHECK(decode_error(extra(insert_abc())) == errc::trailing_bytes);
  CHECK(decode_error(extra(builder{}.ch('B').u64(1).u64(2).u32(3))) == errc::trailing_bytes);
  CHECK(decode_error(extra(builder{}.ch('C').u8(0).u64(1).u64(2).u64(3))) == errc::trailing_bytes);
  CHECK(decode_error(extra(builder{}.ch('T').u32(1).u8(0).u32(5))) == errc::trailing_bytes);
  // Fewer columns announced than sent: the rest is trailing, not silently ignored.
  CHECK(decode_error(builder{}.ch('I').u32(1).ch('N').u16(1).ch('n').ch('n').get()) == errc::trailing_bytes);
  for (const auto& file : walhook::wal::test::fixture_files()) {
    for (const auto& m : load_fixture(file)) {
      CAPTURE(m.name);
      auto longer = m.data;
      longer.push_back(std::byte{'N'});
      CHECK(decode_error(longer) == errc::trailing_bytes);
    }
  }
}

TEST_CASE("every prefix of every captured message is truncated") {
  std::size_t prefixes = 0;
  for (const auto& file : walhook::wal::test::fixture_files()) {
    CAPTURE(file);
    for (const auto& m : load_fixture(file)) {
      CAPTURE(m.name);
      REQUIRE(pg::decode(m.data).has_value());
      for (std::size_t len = 0; len < m.data.size(); ++len) {
        CAPTURE(len);
        auto r = pg::decode(std::span(m.data).first(len));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error() == errc::truncated);
        ++prefixes;
      }
    }
  }
  CHECK(prefixes > 1000);
}

TEST_CASE("lengths larger than the message are truncated, not allocated") {
  // A text value claiming 4 GiB − 1 bytes with three present.
  CHECK(decode_error(builder{}.ch('I').u32(1).ch('N').u16(1).ch('t').u32(0xFFFFFFFFu).raw("abc").get()) ==
        errc::truncated);
  CHECK(decode_error(builder{}.ch('I').u32(1).ch('N').u16(1).ch('b').u32(0x80000000u).get()) == errc::truncated);
  // 65535 columns announced, one present.
  CHECK(decode_error(builder{}.ch('I').u32(1).ch('N').u16(0xFFFF).ch('n').get()) == errc::truncated);
  CHECK(decode_error(builder{}.ch('R').u32(1).cstr("s").cstr("t").ch('d').u16(0xFFFF).get()) == errc::truncated);
  // 4 billion relations announced, two present.
  CHECK(decode_error(builder{}.ch('T').u32(0xFFFFFFFFu).u8(0).u32(1).u32(2).get()) == errc::truncated);
  CHECK(decode_error(builder{}.ch('M').u8(1).u64(1).cstr("p").u32(0xFFFFFFFFu).raw("x").get()) == errc::truncated);
  // A string without its NUL.
  CHECK(decode_error(builder{}.ch('O').u64(1).raw("no terminator").get()) == errc::truncated);
}

TEST_CASE("mutated captured messages never crash and fail only with decoder errors") {
  // Every byte of every captured message replaced by a few values; run under ASan/UBSan
  // (WALHOOK_SANITIZE) this is the decoder's memory-safety check.
  const std::vector<boost::system::error_code> allowed = {errc::truncated, errc::unknown_message_type,
                                                         errc::bad_tuple_kind, errc::bad_tuple_marker,
                                                         errc::trailing_bytes};
  std::size_t decoded = 0;
  std::size_t failed = 0;
  for (const auto& file : walhook::wal::test::fixture_files()) {
    for (const auto& m : load_fixture(file)) {
      for (std::size_t i = 0; i < m.data.size(); ++i) {
        for (std::uint8_t v : {0x00, 0x01, 0x4e, 0x7f, 0x80, 0xff}) {
          auto mutated = m.data;
          mutated[i] = std::byte{v};
          auto r = pg::decode(mutated);
          if (r) {
            ++decoded;
          } else {
            ++failed;
            CHECK(std::find(allowed.begin(), allowed.end(), r.error()) != allowed.end());
          }
        }
      }
    }
  }
  CHECK(decoded > 0);  // most single-byte changes inside values still decode
  CHECK(failed > 0);
}

TEST_CASE("random garbage never crashes the decoder") {
  std::mt19937 rng(20240102);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> size(0, 64);
  std::size_t failed = 0;
  for (int round = 0; round < 20000; ++round) {
    bytes data(static_cast<std::size_t>(size(rng)));
    for (auto& b : data) b = static_cast<std::byte>(byte(rng));
    auto r = pg::decode(data);
    if (!r) {
      ++failed;
      CHECK(&r.error().category() == &walhook::wal::category());
    }
  }
  CHECK(failed > 19000);  // random bytes are almost never a valid message
}
