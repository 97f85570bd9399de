#include "common/time.hpp"

#include <fmt/format.h>

#include <algorithm>
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

std::optional<std::string> format_iso8601_exact(sys_micros t) {
  using namespace std::chrono;
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  if (ymd.year() < year{1} || ymd.year() > year{9999}) return std::nullopt;
  const hh_mm_ss<microseconds> hms{t - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
}

system_clock::time_point clamp_to_system_clock(sys_micros t, system_clock::time_point now) {
  using namespace std::chrono;
  const auto centre = time_point_cast<microseconds>(now);
  const auto span = duration_cast<microseconds>(years{100});
  const auto clamped = std::clamp(t, centre - span, centre + span);
  return time_point_cast<system_clock::duration>(clamped);
}

std::optional<sys_micros> parse_pg_timestamptz(std::string_view s) {
  // YYYY-MM-DD HH:MM:SS[.ffffff](+|-)HH[:MM[:SS]], or …Z
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
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
  bool utc = pos + 1 == s.size() && s[pos] == 'Z' && s[10] == 'T';  // RFC 3339, as walhook writes it
  if (!utc && (pos >= s.size() || (s[pos] != '+' && s[pos] != '-'))) return std::nullopt;
  int sign = s[pos] == '-' ? -1 : 1;
  ++pos;
  std::string_view tz = s.substr(pos);
  int oh = 0, om = 0, os = 0;
  if (utc) {
  } else if (tz.size() == 2) {
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
std::optional<std::string> pg_timestamptz_to_iso8601(std::string_view text, std::string* why) {
  auto say = [&](std::string reason) -> std::optional<std::string> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const std::string shown(text.substr(0, 64));
  if (text == "infinity" || text == "-infinity")
    return say("created_at is " + shown + ": an event time must be finite");
  if (text.ends_with(" BC") || (text.size() > 4 && text[0] >= '0' && text[0] <= '9' && text.find('-') > 4))
    return say("created_at " + shown + " is outside the years 0001-9999 that RFC 3339 can express");
  auto t = parse_pg_timestamptz(text);
  if (!t) return say("created_at is not a timestamptz walhook can read: " + shown);
  auto iso = format_iso8601_exact(*t);
  // A time zone offset can move a year-1 or year-9999 time across the edge.
  if (!iso) return say("created_at " + shown + " is outside the years 0001-9999 that RFC 3339 can express");
  return iso;
}
}  // namespace walhook
