#include "delivery/policy.hpp"

#include "delivery/url.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

namespace walhook::delivery {
using namespace std::chrono;

namespace {

std::string transport_error_text(const transport_error& e) { return cap_text(e.text()); }

int month_index(std::string_view m) {
  static constexpr std::array<std::string_view, 12> names{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == m) return static_cast<int>(i) + 1;
  return 0;
}

bool to_int(std::string_view s, int& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

bool parse_clock(std::string_view s, int& h, int& m, int& sec) {
  return s.size() == 8 && s[2] == ':' && s[5] == ':' && to_int(s.substr(0, 2), h) && to_int(s.substr(3, 2), m) &&
         to_int(s.substr(6, 2), sec) && h < 24 && m < 60 && sec <= 60;
}

// Seconds, not system_clock's nanoseconds: a date far in the future or past (year 9999, year 1)
// must not overflow.
std::optional<sys_seconds> make_time(int year, int month, int day, int h, int m, int s) {
  year_month_day ymd{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                     std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return std::nullopt;
  return sys_days{ymd} + hours{h} + minutes{m} + seconds{s};
}

std::vector<std::string_view> split_spaces(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// HTTP-date (RFC 9110 §5.6.7): IMF-fixdate, obsolete RFC 850 and asctime forms. `now` places
// RFC 850's two-digit year.
std::optional<sys_seconds> parse_http_date(std::string_view v, sys_time now) {
  auto parts = split_spaces(v);
  int day = 0, year = 0, h = 0, m = 0, s = 0;
  if (parts.size() == 6 && parts[0].size() == 4 && parts[0][3] == ',' && parts[5] == "GMT") {
    // Sun, 06 Nov 1994 08:49:37 GMT
    int mon = month_index(parts[2]);
    if (!mon || parts[1].size() != 2 || !to_int(parts[1], day) || parts[3].size() != 4 || !to_int(parts[3], year) ||
        !parse_clock(parts[4], h, m, s))
      return std::nullopt;
    return make_time(year, mon, day, h, m, s);
  }
  if (parts.size() == 4 && parts[0].ends_with(',') && parts[3] == "GMT") {
    // Sunday, 06-Nov-94 08:49:37 GMT
    auto d = parts[1];
    if (d.size() != 9 || d[2] != '-' || d[6] != '-') return std::nullopt;
    int mon = month_index(d.substr(3, 3));
    int yy = 0;
    if (!mon || !to_int(d.substr(0, 2), day) || !to_int(d.substr(7, 2), yy) || !parse_clock(parts[2], h, m, s))
      return std::nullopt;
    // RFC 9110: a two-digit year more than 50 years ahead is the most recent past year with
    // those digits (a fixed pivot misreads e.g. "70" as 1970 from 2020 on).
    const int now_year = static_cast<int>(year_month_day{floor<days>(now)}.year());
    year = now_year - now_year % 100 + yy;
    if (year > now_year + 50) year -= 100;
    else if (year <= now_year - 50) year += 100;
    return make_time(year, mon, day, h, m, s);
  }
  if (parts.size() == 5) {
    // Sun Nov  6 08:49:37 1994
    int mon = month_index(parts[1]);
    if (!mon || parts[2].size() > 2 || !to_int(parts[2], day) || !parse_clock(parts[3], h, m, s) ||
        parts[4].size() != 4 || !to_int(parts[4], year))
      return std::nullopt;
    return make_time(year, mon, day, h, m, s);
  }
  return std::nullopt;
}

}  // namespace

std::optional<seconds> parse_retry_after(std::string_view value, sys_time now) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // Leading zeros are still 1*DIGIT; only the significant digits decide on saturation.
    while (value.size() > 1 && value.front() == '0') value.remove_prefix(1);
    if (value.size() > 10) return seconds{std::numeric_limits<std::int32_t>::max()};
    long long n = 0;
    std::from_chars(value.data(), value.data() + value.size(), n);
    return seconds{n};
  }
  auto at = parse_http_date(value, now);
  if (!at) return std::nullopt;
  const auto now_s = floor<seconds>(now);
  if (*at <= now_s) return seconds{0};
  const auto delay = *at - now_s;  // = ceil(at - now): `at` is whole seconds
  return std::min(delay, seconds{std::numeric_limits<std::int32_t>::max()});
}

attempt_outcome classify(const post_result& response, sys_time now,
                         const retry_policy& policy) {
  attempt_outcome out;
  if (!response) {
    const auto& ec = response.error();
    out.kind = ec == transport_errc::bad_message ? verdict::dead : verdict::retry;
    out.error = transport_error_text(ec);
    // A broker's alarm is a pause for the whole destination, like a 503 with Retry-After.
    if (ec == transport_errc::broker_blocked) out.retry_after = std::min(broker_blocked_pause, policy.retry_after_max);
    return out;
  }
  const http_response& r = *response;
  out.status = static_cast<int>(r.status);
  if (r.status >= 200 && r.status < 300) {
    out.kind = verdict::delivered;
    return out;
  }
  if (r.status == 410) {
    out.kind = verdict::gone;
    out.error = "HTTP 410 Gone: endpoint disabled";
    return out;
  }
  if (r.status == 413) {
    out.kind = verdict::dead;
    out.error = "HTTP 413 Payload Too Large";
    return out;
  }
  out.kind = verdict::retry;
  if (r.status >= 300 && r.status < 400) {
    out.error = r.location.empty() ? fmt::format("HTTP {} redirect not followed", r.status)
                                   : fmt::format("HTTP {} redirect to {} not followed", r.status,
                                                 redact_url(r.location));
  } else {
    out.error = fmt::format("HTTP {}", r.status);
  }
  if (!r.retry_after.empty()) {
    if (auto d = parse_retry_after(r.retry_after, now)) out.retry_after = std::min(*d, policy.retry_after_max);
  }
  return out;
}

milliseconds backoff_delay(int failures, const retry_policy& policy, double unit_random) {
  failures = std::max(failures, 1);
  unit_random = std::clamp(unit_random, 0.0, std::nextafter(1.0, 0.0));
  // base · 2^(n−1), computed in double to avoid overflow, then capped.
  double d = static_cast<double>(duration_cast<milliseconds>(policy.backoff_base).count()) *
             std::pow(2.0, static_cast<double>(failures - 1));
  double cap = static_cast<double>(duration_cast<milliseconds>(policy.backoff_max).count());
  d = std::min(d, cap);
  // Integer halves: in double, half + nextafter(1, 0) · half rounds up to d itself, and the
  // jitter must stay in [0, d − d/2).
  const auto whole = static_cast<std::int64_t>(d);
  const std::int64_t fixed = whole / 2;
  const std::int64_t span = whole - fixed;
  auto jitter = static_cast<std::int64_t>(unit_random * static_cast<double>(span));
  if (span > 0 && jitter >= span) jitter = span - 1;
  return milliseconds{std::max<std::int64_t>(fixed + jitter, 1)};
}

retry_decision next_attempt(int attempts_made, sys_time now, std::optional<sys_time> event_created_at,
                            std::optional<seconds> retry_after, const retry_policy& policy, double unit_random) {
  retry_decision out;
  if (attempts_made >= policy.max_attempts) {
    out.give_up = true;
    out.reason = fmt::format("gave up after {} attempts", attempts_made);
    return out;
  }
  if (event_created_at && now - *event_created_at >= policy.max_age) {
    out.give_up = true;
    out.reason = fmt::format("gave up: event older than {} h", duration_cast<hours>(policy.max_age).count());
    return out;
  }
  auto delay = backoff_delay(attempts_made, policy, unit_random);
  if (retry_after) delay = std::max<milliseconds>(delay, std::min(*retry_after, policy.retry_after_max));
  out.next_attempt_at = now + delay;
  return out;
}

retry_decision scheduled_attempt(int failures, sys_time now, std::span<const milliseconds> schedule,
                                 std::optional<seconds> retry_after, const retry_policy& policy, double unit_random) {
  retry_decision out;
  if (failures > static_cast<int>(schedule.size())) {
    out.give_up = true;
    out.reason = fmt::format("quarantined after {} failed attempts (the retry schedule is spent)", failures);
    return out;
  }
  const auto step = schedule[static_cast<std::size_t>(std::max(failures, 1) - 1)];
  auto delay = duration_cast<milliseconds>(step * (0.9 + 0.2 * unit_random));
  if (retry_after) delay = std::max<milliseconds>(delay, std::min(*retry_after, policy.retry_after_max));
  out.next_attempt_at = now + delay;
  return out;
}

milliseconds deferral_delay(int deferrals, std::optional<seconds> retry_after, const retry_policy& policy,
                            double unit_random) {
  if (retry_after) return std::min(*retry_after, policy.retry_after_max);
  const milliseconds step = std::min<milliseconds>(milliseconds{1000LL << std::clamp(deferrals - 1, 0, 6)}, seconds{60});
  return duration_cast<milliseconds>(step * (0.8 + 0.4 * unit_random));
}

}  // namespace walhook::delivery
