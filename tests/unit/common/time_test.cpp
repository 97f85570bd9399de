// Time formats (common/time.hpp): PostgreSQL's timestamptz text, ISO 8601 output, the
// replication protocol's 2000-based epoch. Fixed time points only; no clock is read.

#include "common/time.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

using namespace walhook;
using namespace std::chrono_literals;
using std::chrono::sys_days;

namespace {

/// Microseconds since the Unix epoch of a parsed timestamptz, or -1 if it did not parse.
std::int64_t parsed_us(std::string_view text) {
  auto t = parse_pg_timestamptz(text);
  return t ? t->time_since_epoch().count() : -1;
}

std::int64_t us_of(sys_days day, std::chrono::microseconds since_midnight = {}) {
  return std::chrono::duration_cast<std::chrono::microseconds>(day.time_since_epoch() + since_midnight).count();
}

constexpr auto nov30 = std::chrono::year{2026} / 11 / 30;

}  // namespace

// ---------------------------------------------------------------------------------------------
// parse_pg_timestamptz

TEST_CASE("parse_pg_timestamptz: UTC with and without fractional seconds") {
  const auto base = us_of(sys_days{nov30}, 3h + 23min + 51s);
  CHECK(parsed_us("2026-11-30 03:23:51+00") == base);
  CHECK(parsed_us("2026-11-30 03:23:51.123456+00") == base + 123456);
  CHECK(parsed_us("2026-11-30 03:23:51.000001+00") == base + 1);
  CHECK(parsed_us("2026-11-30 03:23:51.999999+00") == base + 999999);
  CHECK(parsed_us("2026-11-30T03:23:51+00") == base);  // ISO 'T' separator
  CHECK(parsed_us("1970-01-01 00:00:00+00") == 0);
}

TEST_CASE("parse_pg_timestamptz: 1 to 6 fractional digits scale to microseconds; more are truncated") {
  const auto base = us_of(sys_days{nov30}, 3h + 23min + 51s);
  CHECK(parsed_us("2026-11-30 03:23:51.5+00") == base + 500000);
  CHECK(parsed_us("2026-11-30 03:23:51.12+00") == base + 120000);
  CHECK(parsed_us("2026-11-30 03:23:51.123+00") == base + 123000);
  CHECK(parsed_us("2026-11-30 03:23:51.1234+00") == base + 123400);
  CHECK(parsed_us("2026-11-30 03:23:51.12345+00") == base + 123450);
  CHECK(parsed_us("2026-11-30 03:23:51.123456+00") == base + 123456);
  CHECK(parsed_us("2026-11-30 03:23:51.1234567+00") == base + 123456);
  CHECK(parsed_us("2026-11-30 03:23:51.123456999+00") == base + 123456);
  CHECK(parsed_us("2026-11-30 03:23:51.05+00") == base + 50000);
  CHECK(parsed_us("2026-11-30 03:23:51.000000+00") == base);
}

TEST_CASE("parse_pg_timestamptz: offsets in hours, hours:minutes and hours:minutes:seconds") {
  const auto utc = us_of(sys_days{nov30}, 3h + 23min + 51s);
  CHECK(parsed_us("2026-11-30 03:23:51+05:30") == utc - us_of(sys_days{}, 5h + 30min));
  CHECK(parsed_us("2026-11-30 03:23:51-08") == utc + us_of(sys_days{}, 8h));
  CHECK(parsed_us("2026-11-30 03:23:51+14") == utc - us_of(sys_days{}, 14h));
  CHECK(parsed_us("2026-11-30 03:23:51-09:30") == utc + us_of(sys_days{}, 9h + 30min));
  CHECK(parsed_us("2026-11-30 03:23:51+00:00") == utc);
  CHECK(parsed_us("2026-11-30 03:23:51-00") == utc);
  // LMT offsets with seconds, as PostgreSQL prints for old dates (e.g. Europe/Amsterdam +00:19:32).
  CHECK(parsed_us("1900-01-01 00:00:00+00:19:32") == us_of(sys_days{std::chrono::year{1900} / 1 / 1}) -
                                                          us_of(sys_days{}, 19min + 32s));
  CHECK(parsed_us("2026-11-30 03:23:51.25-08") == utc + us_of(sys_days{}, 8h) + 250000);
}

TEST_CASE("parse_pg_timestamptz: offsets move across day, month and year boundaries") {
  CHECK(parsed_us("2026-01-01 02:00:00+05:30") == us_of(sys_days{std::chrono::year{2025} / 12 / 31}, 20h + 30min));
  CHECK(parsed_us("2026-12-31 20:00:00-08") == us_of(sys_days{std::chrono::year{2027} / 1 / 1}, 4h));
  CHECK(parsed_us("2024-02-29 12:00:00+00") == us_of(sys_days{std::chrono::year{2024} / 2 / 29}, 12h));
}

TEST_CASE("parse_pg_timestamptz: invalid input is nullopt") {
  for (std::string_view bad : {
           "",
           "infinity",
           "-infinity",
           "2026-11-30",
           "2026-11-30 03:23:51",           // no offset (a timestamp without time zone)
           "2026-11-30 03:23:51Z",          // not PostgreSQL's form
           "2026-11-30 03:23:51 +00",
           "2026-11-30 03:23:51+0",
           "2026-11-30 03:23:51+000",
           "2026-11-30 03:23:51+0530",
           "2026-11-30 03:23:51+05:3",
           "2026-11-30 03:23:51+05:30:",
           "2026-11-30 03:23:51+05:30:1",
           "2026-11-30 03:23:51+ab",
           "2026-11-30 03:23:51+00 ",
           "2026-11-30 03:23:51+00 BC",
           "2026-11-30 03:23:51.+00",       // a dot without digits
           "2026-11-30 03:23:51.12x+00",
           "2026-11-30 03:23:51,5+00",
           "2026-13-01 00:00:00+00",        // month 13
           "2026-00-01 00:00:00+00",
           "2026-02-29 00:00:00+00",        // not a leap year
           "2026-04-31 00:00:00+00",
           "2026-11-00 00:00:00+00",
           "2026-11-30 24:00:00+00",
           "2026-11-30 03:60:00+00",
           "2026-11-30 03:23:61+00",
           "2026/11/30 03:23:51+00",
           "2026-11-30_03:23:51+00",
           "26-11-30 03:23:51+00000",
           "20261130 03:23:51+00000",
           "abcd-11-30 03:23:51+00",
           // Signs inside fields are not digits.
           "2026-11-30 -1:23:51+00",
           "2026-11-30 03:-1:51+00",
           "2026-11-30 03:23:-1+00",
           "2026--1-30 03:23:51+00",
           "-001-11-30 03:23:51+00",
           "2026-11-30 03:23:51+-1",
           "2026-11-30 03:23:51+-5:30",
           "2026-11-30 03:23:51+05:-1",
           "2026-11-30 03:23:51+05:30:-1",
       }) {
    CAPTURE(bad);
    CHECK_FALSE(parse_pg_timestamptz(bad).has_value());
  }
}

// ---------------------------------------------------------------------------------------------
// format_iso8601, pg_timestamptz_to_iso8601

TEST_CASE("format_iso8601: UTC with exactly six fractional digits") {
  CHECK(format_iso8601(system_clock::time_point{}) == "1970-01-01T00:00:00.000000Z");
  CHECK(format_iso8601(sys_days{nov30} + 3h + 23min + 51s + 123456us) == "2026-11-30T03:23:51.123456Z");
  CHECK(format_iso8601(sys_days{nov30} + 1us) == "2026-11-30T00:00:00.000001Z");
  CHECK(format_iso8601(sys_days{std::chrono::year{2024} / 2 / 29} + 23h + 59min + 59s + 999999us) ==
        "2024-02-29T23:59:59.999999Z");
  CHECK(format_iso8601(sys_days{std::chrono::year{2000} / 1 / 1}) == "2000-01-01T00:00:00.000000Z");
}

TEST_CASE("format_iso8601: sub-microsecond precision is truncated, never rounded up") {
  CHECK(format_iso8601(sys_days{nov30} + 999ns) == "2026-11-30T00:00:00.000000Z");
  CHECK(format_iso8601(sys_days{nov30} + 1us + 999ns) == "2026-11-30T00:00:00.000001Z");
  CHECK(format_iso8601(sys_days{nov30} - 1us + 999ns) == "2026-11-29T23:59:59.999999Z");
}

TEST_CASE("format_iso8601: times before 1970") {
  CHECK(format_iso8601(system_clock::time_point{} - 1us) == "1969-12-31T23:59:59.999999Z");
  CHECK(format_iso8601(system_clock::time_point{} - 1s) == "1969-12-31T23:59:59.000000Z");
  CHECK(format_iso8601(sys_days{std::chrono::year{1900} / 1 / 1} + 500ms) == "1900-01-01T00:00:00.500000Z");
}

TEST_CASE("pg_timestamptz_to_iso8601: PostgreSQL text to ISO 8601 UTC") {
  CHECK(pg_timestamptz_to_iso8601("2026-11-30 03:23:51.123456+00") == "2026-11-30T03:23:51.123456Z");
  CHECK(pg_timestamptz_to_iso8601("2026-11-30 03:23:51+05:30") == "2026-11-29T21:53:51.000000Z");
  CHECK(pg_timestamptz_to_iso8601("2026-11-30 23:59:59.5-08") == "2026-12-01T07:59:59.500000Z");
  CHECK_FALSE(pg_timestamptz_to_iso8601("infinity"));
  CHECK_FALSE(pg_timestamptz_to_iso8601(""));
}

TEST_CASE("pg_timestamptz_to_iso8601: every year RFC 3339 can express is exact, the rest say why") {
  // Outside 1678–2262 a nanosecond system_clock wraps: these are rendered from microseconds.
  CHECK(pg_timestamptz_to_iso8601("0001-01-01 00:00:00+00") == "0001-01-01T00:00:00.000000Z");
  CHECK(pg_timestamptz_to_iso8601("1500-06-15 12:00:00.25+00") == "1500-06-15T12:00:00.250000Z");
  CHECK(pg_timestamptz_to_iso8601("1677-09-21 00:12:43.145224+00") == "1677-09-21T00:12:43.145224Z");
  CHECK(pg_timestamptz_to_iso8601("2262-04-11 23:47:16.854776+00") == "2262-04-11T23:47:16.854776Z");
  CHECK(pg_timestamptz_to_iso8601("2300-01-01 00:00:00+00") == "2300-01-01T00:00:00.000000Z");
  CHECK(pg_timestamptz_to_iso8601("9999-12-31 23:59:59.999999+00") == "9999-12-31T23:59:59.999999Z");
  struct refused {
    const char* pg;
    const char* reason;
  };
  for (auto r : {refused{"infinity", "finite"}, refused{"-infinity", "finite"},
                 refused{"10000-01-01 00:00:00+00", "0001-9999"}, refused{"0001-01-01 00:00:00+00 BC", "0001-9999"},
                 refused{"0044-03-15 12:00:00+00 BC", "0001-9999"},
                 refused{"0001-01-01 00:00:00+01", "0001-9999"},   // 0000-12-31T23:00Z
                 refused{"9999-12-31 23:00:00-05", "0001-9999"},   // 10000-01-01T04:00Z
                 refused{"yesterday", "not a timestamptz"}}) {
    CAPTURE(r.pg);
    std::string why;
    CHECK_FALSE(pg_timestamptz_to_iso8601(r.pg, &why));
    CHECK(why.find(r.reason) != std::string::npos);
    CHECK(why.find("created_at") != std::string::npos);
  }
}

TEST_CASE("parse_pg_timestamptz reads walhook's own RFC 3339 form back") {
  CHECK(parse_pg_timestamptz("2026-11-30T03:23:51.123456Z") == sys_days{nov30} + 3h + 23min + 51s + 123456us);
  CHECK(parse_pg_timestamptz("0001-01-01T00:00:00.000000Z") == sys_days{std::chrono::year{1} / 1 / 1});
}

TEST_CASE("clamp_to_system_clock: far times are clamped to a century around now, never wrapped") {
  const auto now = system_clock::time_point{} + 1'800'000'000s;
  const auto year1 = sys_micros{sys_days{std::chrono::year{1} / 1 / 1}};
  const auto year9999 = sys_micros{sys_days{std::chrono::year{9999} / 12 / 31}};
  CHECK(clamp_to_system_clock(year1, now) < now - std::chrono::years{99});
  CHECK(clamp_to_system_clock(year1, now) >= now - std::chrono::years{101});
  CHECK(clamp_to_system_clock(year9999, now) > now + std::chrono::years{99});
  CHECK(clamp_to_system_clock(year9999, now) <= now + std::chrono::years{101});
  const auto near = sys_micros{std::chrono::time_point_cast<std::chrono::microseconds>(now)} + 5s;
  CHECK(clamp_to_system_clock(near, now) == now + 5s);
}

TEST_CASE("parse then format round-trips every microsecond digit position") {
  for (std::int64_t us : {0LL, 1LL, 9LL, 10LL, 99LL, 100LL, 999LL, 1000LL, 99999LL, 100000LL, 999999LL}) {
    CAPTURE(us);
    auto t = sys_days{nov30} + std::chrono::microseconds{us};
    auto iso = format_iso8601(t);
    std::string pg = iso.substr(0, 10) + " " + iso.substr(11, 15) + "+00";
    CHECK(pg_timestamptz_to_iso8601(pg) == iso);
  }
}

// ---------------------------------------------------------------------------------------------
// Epochs

TEST_CASE("PostgreSQL epoch microseconds and Unix seconds") {
  const auto y2k = sys_days{std::chrono::year{2000} / 1 / 1};
  CHECK(to_pg_epoch_micros(y2k) == 0);
  CHECK(to_pg_epoch_micros(y2k + 1s) == 1'000'000);
  CHECK(to_pg_epoch_micros(system_clock::time_point{}) == -946'684'800'000'000LL);
  CHECK(from_pg_epoch_micros(0) == y2k);
  CHECK(from_pg_epoch_micros(-946'684'800'000'000LL) == system_clock::time_point{});
  const auto t = sys_days{nov30} + 3h + 23min + 51s + 123456us;
  CHECK(from_pg_epoch_micros(to_pg_epoch_micros(t)) == t);
  CHECK(unix_seconds(system_clock::time_point{}) == 0);
  CHECK(unix_seconds(y2k) == 946'684'800);
  CHECK(unix_seconds(y2k + 999ms) == 946'684'800);
}
