#include "wal/copy_both.hpp"

#include "tests/unit/wal/wal_test_support.hpp"
#include "wal/cursor.hpp"
#include "wal/errc.hpp"
#include "wal/pgoutput.hpp"

#include <doctest/doctest.h>

using walhook::wal::errc;
using walhook::lsn;
using walhook::wal::parse_server_message;
using walhook::wal::primary_keepalive;
using walhook::wal::standby_status_update;
using walhook::wal::xlog_data;
using walhook::wal::test::builder;
using walhook::wal::test::bytes;

TEST_CASE("XLogData: header fields, and data is the payload in place") {
  auto payload = walhook::wal::test::load_fixture("basic.txt").at(0).data;  // a real Begin
  auto frame = builder{}.ch('w').u64(0x1'00000010ULL).u64(0x1'00000F00ULL).u64(757479845678901ULL).get();
  frame.insert(frame.end(), payload.begin(), payload.end());

  auto r = parse_server_message(frame);
  REQUIRE(r.has_value());
  REQUIRE(std::holds_alternative<xlog_data>(*r));
  const auto& x = std::get<xlog_data>(*r);
  CHECK(x.wal_start == lsn{0x1'00000010ULL});
  CHECK(x.wal_end == lsn{0x1'00000F00ULL});
  CHECK(x.send_time_us == 757479845678901);
  CHECK(x.data.size() == payload.size());
  CHECK(x.data.data() == frame.data() + 25);  // 1 + 3 × Int64: no copy
  CHECK(std::equal(x.data.begin(), x.data.end(), payload.begin()));
  // And the payload decodes as what it is.
  auto decoded = walhook::wal::pgoutput::decode(x.data);
  REQUIRE(decoded.has_value());
  CHECK(std::holds_alternative<walhook::wal::pgoutput::begin>(*decoded));
}

TEST_CASE("XLogData with no payload parses to empty data") {
  auto r = parse_server_message(builder{}.ch('w').u64(1).u64(2).u64(3).get());
  REQUIRE(r.has_value());
  CHECK(std::get<xlog_data>(*r).data.empty());
}

TEST_CASE("XLogData shorter than its header is truncated") {
  auto frame = builder{}.ch('w').u64(1).u64(2).u64(3).get();
  for (std::size_t len = 0; len < frame.size(); ++len) {
    CAPTURE(len);
    auto r = parse_server_message(std::span(frame).first(len));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error() == errc::truncated);
  }
}

TEST_CASE("primary keepalive: fields and reply flag") {
  auto r = parse_server_message(builder{}.ch('k').u64(0x16'B374D848ULL).u64(99).u8(1).get());
  REQUIRE(r.has_value());
  CHECK(std::get<primary_keepalive>(*r) == primary_keepalive{lsn{0x16'B374D848ULL}, 99, true});
  auto quiet = parse_server_message(builder{}.ch('k').u64(5).u64(6).u8(0).get());
  REQUIRE(quiet.has_value());
  CHECK(std::get<primary_keepalive>(*quiet) == primary_keepalive{lsn{5}, 6, false});
}

TEST_CASE("primary keepalive: truncation and trailing bytes") {
  auto frame = builder{}.ch('k').u64(1).u64(2).u8(0).get();
  REQUIRE(frame.size() == 18);
  for (std::size_t len = 0; len < frame.size(); ++len) {
    CAPTURE(len);
    auto r = parse_server_message(std::span(frame).first(len));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error() == errc::truncated);
  }
  frame.push_back(std::byte{0});
  auto r = parse_server_message(frame);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error() == errc::trailing_bytes);
}

TEST_CASE("unknown CopyData types are errors") {
  for (char type : {'r', 'x', 'B', '\0'}) {
    CAPTURE(type);
    auto r = parse_server_message(builder{}.ch(type).u64(1).u64(2).u8(0).get());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error() == errc::unknown_message_type);
  }
}

TEST_CASE("standby status update: 34 bytes laid out as in the protocol docs") {
  auto msg = standby_status_update(lsn{0x0102030405060708ULL}, lsn{0x1112131415161718ULL}, lsn{0x2122232425262728ULL},
                                   0x3132333435363738LL, true);
  static_assert(std::tuple_size_v<decltype(msg)> == 34);
  bytes expected = walhook::wal::test::from_hex(
      "72"                  // 'r'
      "0102030405060708"    // written
      "1112131415161718"    // flushed
      "2122232425262728"    // applied
      "3132333435363738"    // client time
      "01");                // reply requested
  CHECK(bytes(msg.begin(), msg.end()) == expected);
}

TEST_CASE("standby status update round-trips through the cursor") {
  for (bool reply : {false, true}) {
    CAPTURE(reply);
    auto msg = standby_status_update(lsn{0x16'B374D848ULL}, lsn{0x16'B374D000ULL}, lsn{}, -1, reply);
    walhook::wal::cursor c(msg);
    CHECK(c.read_u8() == 'r');
    CHECK(c.read_u64() == 0x16'B374D848ULL);
    CHECK(c.read_u64() == 0x16'B374D000ULL);
    CHECK(c.read_u64() == 0);
    CHECK(c.read_i64() == -1);
    CHECK(c.read_u8() == (reply ? 1 : 0));
    CHECK(c.ok());
    CHECK(c.at_end());
  }
}
