#include "common/time.hpp"

#include <fmt/format.h>

#include <charconv>
#include <ctime>

namespace walhook {
namespace {

constexpr std::int64_t pg_epoch_offset_us = 946'684'800LL * 1'000'000LL;  // 1970 → 2000

bool parse_int(std::string_view s, int& out) {
  // Digits only: from_chars would take a '-' and let "-1" through as an hour, year or offset.
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

}  // namespace

const real_clock& real_clock::instance() {
  static const real_clock clock;
  return clock;
}

std::string format_iso8601(system_clock::time_point t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::int64_t secs = us / 1'000'000;
  std::int64_t frac = us % 1'000'000;
  if (frac < 0) {
    frac += 1'000'000;
    secs -= 1;
  }
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

std::optional<sys_micros> parse_pg_timestamptz(std::string_view s) {
  // YYYY-MM-DD HH:MM:SS[.ffffff](+|-)HH[:MM[:SS]]
  if (s.size() < 22 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
      s[16] != ':')
    return std::nullopt;
  int year, mon, day, hour, min, sec;
  if (!parse_int(s.substr(0, 4), year) || !parse_int(s.substr(5, 2), mon) || !parse_int(s.substr(8, 2), day) ||
      !parse_int(s.substr(11, 2), hour) || !parse_int(s.substr(14, 2), min) || !parse_int(s.substr(17, 2), sec))
    return std::nullopt;
  std::size_t pos = 19;
  std::int64_t micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 6) {
        micros = micros * 10 + (s[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (; digits < 6; ++digits) micros *= 10;
  }
  if (pos >= s.size() || (s[pos] != '+' && s[pos] != '-')) return std::nullopt;
  int sign = s[pos] == '-' ? -1 : 1;
  ++pos;
  std::string_view tz = s.substr(pos);
  int oh = 0, om = 0, os = 0;
  if (tz.size() == 2) {
    if (!parse_int(tz, oh)) return std::nullopt;
  } else if (tz.size() == 5 && tz[2] == ':') {
    if (!parse_int(tz.substr(0, 2), oh) || !parse_int(tz.substr(3, 2), om)) return std::nullopt;
  } else if (tz.size() == 8 && tz[2] == ':' && tz[5] == ':') {
    if (!parse_int(tz.substr(0, 2), oh) || !parse_int(tz.substr(3, 2), om) || !parse_int(tz.substr(6, 2), os))
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  using namespace std::chrono;
  year_month_day ymd{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(mon)},
                     std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok() || hour > 23 || min > 59 || sec > 60) return std::nullopt;
  sys_days days{ymd};
  auto offset = seconds{sign * (oh * 3600 + om * 60 + os)};
  auto tp = time_point_cast<microseconds>(days) + hours{hour} + minutes{min} + seconds{sec} +
            microseconds{micros} - offset;
  return tp;
}

std::int64_t to_pg_epoch_micros(system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() - pg_epoch_offset_us;
}

system_clock::time_point from_pg_epoch_micros(std::int64_t us) {
  return system_clock::time_point{std::chrono::duration_cast<system_clock::duration>(
      std::chrono::microseconds{us + pg_epoch_offset_us})};
}

}  // namespace walhook

namespace walhook {
std::optional<std::string> pg_timestamptz_to_iso8601(std::string_view text) {
  auto t = parse_pg_timestamptz(text);
  if (!t) return std::nullopt;
  return format_iso8601(std::chrono::time_point_cast<system_clock::duration>(*t));
}
}  // namespace walhook
