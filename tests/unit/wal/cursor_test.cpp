#include "wal/cursor.hpp"

#include "tests/unit/wal/wal_test_support.hpp"
#include "wal/errc.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <set>
#include <string>

using walhook::wal::cursor;
using walhook::wal::errc;
using walhook::wal::test::from_hex;

TEST_CASE("cursor reads big-endian integers") {
  auto data = from_hex("01" "0203" "04050607" "08090a0b0c0d0e0f");
  cursor c(data);
  CHECK(c.read_u8() == 0x01);
  CHECK(c.read_u16() == 0x0203);
  CHECK(c.read_u32() == 0x04050607u);
  CHECK(c.read_u64() == 0x08090A0B0C0D0E0FULL);
  CHECK(c.ok());
  CHECK(c.at_end());
  CHECK(c.position() == 15);
}

TEST_CASE("cursor signed reads are two's complement") {
  auto data = from_hex("fffe" "ffffffff" "8000000000000000");
  cursor c(data);
  CHECK(c.read_i16() == -2);
  CHECK(c.read_i32() == -1);
  CHECK(c.read_i64() == std::numeric_limits<std::int64_t>::min());
  CHECK(c.ok());
}

TEST_CASE("cursor short read fails, returns zero and stays failed") {
  auto data = from_hex("aabbcc");
  cursor c(data);
  CHECK(c.read_u32() == 0);
  CHECK_FALSE(c.ok());
  CHECK(c.remaining() == 0);
  CHECK(c.at_end());
  // The three bytes are still there, but a failed cursor reads nothing more.
  CHECK(c.read_u8() == 0);
  CHECK(c.read_cstr().empty());
  CHECK(c.rest().empty());
  CHECK_FALSE(c.ok());
}

TEST_CASE("cursor reads every width up to the exact end and not one byte further") {
  auto data = from_hex("0102030405060708");
  {
    cursor c(data);
    CHECK(c.read_u64() == 0x0102030405060708ULL);
    CHECK(c.ok());
    CHECK(c.read_u8() == 0);
    CHECK_FALSE(c.ok());
  }
  {
    cursor c{std::span(data).first(7)};
    CHECK(c.read_u64() == 0);
    CHECK_FALSE(c.ok());
  }
  {
    cursor c{std::span(data).first(1)};
    CHECK(c.read_u16() == 0);
    CHECK_FALSE(c.ok());
  }
}

TEST_CASE("cursor on an empty buffer") {
  cursor c(std::span<const std::byte>{});
  CHECK(c.at_end());
  CHECK(c.ok());
  CHECK(c.read_bytes(0).empty());
  CHECK(c.ok());
  CHECK(c.read_u8() == 0);
  CHECK_FALSE(c.ok());
}

TEST_CASE("cursor read_cstr stops at the NUL and needs one") {
  auto data = from_hex("6869" "00" "00" "6f6b");  // "hi\0" "\0" "ok" (no NUL)
  cursor c(data);
  CHECK(c.read_cstr() == "hi");
  CHECK(c.position() == 3);
  CHECK(c.read_cstr() == "");
  CHECK(c.position() == 4);
  CHECK(c.ok());
  CHECK(c.read_cstr() == "");
  CHECK_FALSE(c.ok());
}

TEST_CASE("cursor read_bytes copies exactly n bytes, NULs included") {
  auto data = from_hex("00ff41" "42");
  cursor c(data);
  CHECK(c.read_bytes(3) == std::string("\0\xff" "A", 3));
  CHECK(c.remaining() == 1);
  CHECK(c.read_bytes(2).empty());
  CHECK_FALSE(c.ok());
}

TEST_CASE("cursor read_bytes with a huge length fails without allocating it") {
  auto data = from_hex("0102");
  cursor c(data);
  CHECK(c.read_bytes(std::numeric_limits<std::size_t>::max()).empty());
  CHECK_FALSE(c.ok());
}

TEST_CASE("cursor rest returns the unread bytes and consumes them") {
  auto data = from_hex("0a0b0c");
  cursor c(data);
  c.read_u8();
  auto r = c.rest();
  REQUIRE(r.size() == 2);
  CHECK(r.data() == data.data() + 1);  // no copy
  CHECK(c.at_end());
  CHECK(c.ok());
  CHECK(c.rest().empty());
}

TEST_CASE("wal errc is an error_code enum of category walhook.wal with distinct messages") {
  boost::system::error_code ec = errc::truncated;
  CHECK(ec == errc::truncated);
  CHECK(ec != errc::trailing_bytes);
  CHECK(std::string(ec.category().name()) == "walhook.wal");
  CHECK(ec.message().find("truncated") != std::string::npos);
  std::set<std::string> messages;
  for (int i = static_cast<int>(errc::truncated); i <= static_cast<int>(errc::not_logical); ++i) {
    auto m = make_error_code(static_cast<errc>(i)).message();
    CHECK_FALSE(m.empty());
    messages.insert(m);
  }
  CHECK(messages.size() == static_cast<std::size_t>(errc::not_logical));
  CHECK(make_error_code(static_cast<errc>(999)).message().find("999") != std::string::npos);
}
