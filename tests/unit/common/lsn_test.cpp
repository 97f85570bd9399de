#include "common/lsn.hpp"


#include <doctest/doctest.h>

using walhook::lsn;

TEST_CASE("lsn parses the pg_lsn text form into high and low 32 bits") {
  auto l = lsn::parse("16/B374D848");
  REQUIRE(l.has_value());
  CHECK(l->value() == 0x16'B374D848ULL);
  CHECK(lsn::parse("0/1")->value() == 1);
  CHECK(lsn::parse("1/0")->value() == 0x1'00000000ULL);
  CHECK(lsn::parse("FFFFFFFF/FFFFFFFF")->value() == ~0ULL);
  // Lower-case and zero-padded components are accepted, as pg_lsn_in accepts them.
  CHECK(lsn::parse("16/b374d848")->value() == 0x16'B374D848ULL);
  CHECK(lsn::parse("00000016/0000000A")->value() == 0x16'0000000AULL);
}

TEST_CASE("lsn 0/0 is InvalidXLogRecPtr") {
  auto zero = lsn::parse("0/0");
  REQUIRE(zero.has_value());
  CHECK(zero->value() == 0);
  CHECK_FALSE(zero->valid());
  CHECK_FALSE(lsn{}.valid());
  CHECK(lsn{1}.valid());
  CHECK(lsn{}.to_string() == "0/0");
}

TEST_CASE("lsn formats as upper-case hex without padding") {
  CHECK(lsn{0x16'B374D848ULL}.to_string() == "16/B374D848");
  CHECK(lsn{0xABCDEF0}.to_string() == "0/ABCDEF0");
  CHECK(lsn{0x1'00000000ULL}.to_string() == "1/0");
  CHECK(lsn{~0ULL}.to_string() == "FFFFFFFF/FFFFFFFF");
}

TEST_CASE("lsn round-trips through text") {
  for (std::uint64_t v : {0ULL, 1ULL, 0xFFFFFFFFULL, 0x1'00000000ULL, 0x0123'4567'89AB'CDEFULL, ~0ULL}) {
    CAPTURE(v);
    auto back = lsn::parse(lsn{v}.to_string());
    REQUIRE(back.has_value());
    CHECK(back->value() == v);
  }
}

TEST_CASE("lsn rejects malformed text") {
  for (const char* bad : {"", "/", "0", "0/", "/0", "1//2", "1/2/3", "G/0", "0/G", "123456789/0", "0/123456789",
                          "000000001/0", "0/000000001",  // 9 digits even if the value fits
                          "0x1/0", "+1/0", "-1/0", " 1/0", "1/0 ", "1 /0", "1/ 0", "1/0\n", "16-B374D848"}) {
    CAPTURE(bad);
    CHECK_FALSE(lsn::parse(bad).has_value());
  }
  // Embedded NUL: the string_view carries it, parsing must not stop there and accept.
  CHECK_FALSE(lsn::parse(std::string_view("1/0\0", 4)).has_value());
}

TEST_CASE("lsn orders by position and bytes_between never underflows") {
  lsn a{100};
  lsn b{40};
  CHECK(b < a);
  CHECK(a == lsn{100});
  CHECK(walhook::bytes_between(a, b) == 60);
  CHECK(walhook::bytes_between(b, a) == 0);
  CHECK(walhook::bytes_between(a, a) == 0);
  CHECK(*lsn::parse("1/0") > *lsn::parse("0/FFFFFFFF"));
  CHECK(walhook::bytes_between(*lsn::parse("1/0"), *lsn::parse("0/FFFFFFFF")) == 1);
}
