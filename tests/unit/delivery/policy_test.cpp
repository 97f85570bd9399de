// Delivery rules (delivery/policy.hpp, docs/architecture.md, Rules): classification of an attempt, Retry-After,
// backoff with jitter, give-up limits. Time is a fixed fake `now`; randomness is a parameter.

#include "delivery/policy.hpp"

#include <doctest/doctest.h>

#include <boost/system/errc.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <system_error>

using namespace walhook::delivery;
using namespace std::chrono_literals;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::sys_days;
using std::chrono::January;
using std::chrono::March;
using std::chrono::November;

namespace {

// 2026-01-15 12:00:00 UTC, a Thursday.
const sys_time now = sys_days{2026y / January / 15} + 12h;
const double just_below_one = std::nextafter(1.0, 0.0);

attempt_outcome classify_status(unsigned status, std::string retry_after = "", std::string location = "",
                                const retry_policy& policy = {}) {
  http_response r;
  r.status = status;
  r.retry_after = std::move(retry_after);
  r.location = std::move(location);
  return classify(boost::system::result<http_response>(r), now, policy);
}

attempt_outcome classify_error(boost::system::error_code ec) {
  return classify(boost::system::result<http_response>(ec), now);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// min(max, base · 2^(n−1)) in ms, computed without overflow.
std::int64_t capped_delay_ms(int failures, const retry_policy& p) {
  std::int64_t cap = p.backoff_max.count();
  std::int64_t d = p.backoff_base.count();
  for (int i = 1; i < failures && d < cap; ++i) d *= 2;
  return std::min(d, cap);
}

std::optional<std::int64_t> retry_after_s(std::string_view value, sys_time at = now) {
  auto d = parse_retry_after(value, at);
  if (!d) return std::nullopt;
  return d->count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// classify

TEST_CASE("classify: 2xx is delivered with no error") {
  for (unsigned status : {200u, 201u, 202u, 204u, 299u}) {
    CAPTURE(status);
    auto o = classify_status(status);
    CHECK(o.kind == verdict::delivered);
    CHECK(o.status == static_cast<int>(status));
    CHECK(o.error.empty());
  }
}

TEST_CASE("classify: 3xx is a failure to retry; redirects are not followed and Location is reported") {
  for (unsigned status : {300u, 301u, 302u, 303u, 307u, 308u}) {
    CAPTURE(status);
    auto o = classify_status(status, "", "https://elsewhere.example/hook?x=1");
    CHECK(o.kind == verdict::retry);
    CHECK(o.status == static_cast<int>(status));
    CHECK(contains(o.error, std::to_string(status)));
    CHECK(contains(o.error, "https://elsewhere.example/hook?***"));  // the query redacted
    CHECK(contains(o.error, "not followed"));

    auto bare = classify_status(status);
    CHECK(bare.kind == verdict::retry);
    CHECK(contains(bare.error, std::to_string(status)));
    CHECK(contains(bare.error, "redirect"));
    CHECK_FALSE(contains(bare.error, " to "));
  }
}

TEST_CASE("classify: a hostile Location never puts its secrets or its size into last_error") {
  const std::string secret = "t0ps3cret";
  const std::string locations[] = {
      "https://elsewhere.example/hook?token=" + secret,
      "https://user:" + secret + "@elsewhere.example/hook",
      "https://elsewhere.example/" + std::string(8000, 'p') + "?token=" + secret,
  };
  for (const auto& location : locations) {
    CAPTURE(location.substr(0, 60));
    const auto o = classify_status(302, "", location);
    CHECK(contains(o.error, "elsewhere.example"));
    CHECK_FALSE(contains(o.error, secret));
    CHECK(o.error.size() <= max_shown_url + 64);
  }
}

TEST_CASE("classify: 410 Gone disables the endpoint, 413 is dead at once") {
  auto gone = classify_status(410);
  CHECK(gone.kind == verdict::gone);
  CHECK(gone.status == 410);
  CHECK(contains(gone.error, "410"));

  auto too_large = classify_status(413);
  CHECK(too_large.kind == verdict::dead);
  CHECK(too_large.status == 413);
  CHECK(contains(too_large.error, "413"));
}

TEST_CASE("classify: 429, 5xx and every other 4xx are retried") {
  for (unsigned status : {400u, 401u, 403u, 404u, 405u, 408u, 409u, 411u, 412u, 414u, 415u, 422u, 429u, 451u, 499u,
                          500u, 501u, 502u, 503u, 504u, 599u}) {
    CAPTURE(status);
    auto o = classify_status(status);
    CHECK(o.kind == verdict::retry);
    CHECK(o.status == static_cast<int>(status));
    CHECK(o.error == "HTTP " + std::to_string(status));
    CHECK_FALSE(o.retry_after.has_value());
  }
}

TEST_CASE("classify: statuses outside 2xx–5xx are failures, not successes") {
  for (unsigned status : {100u, 101u, 199u, 600u, 999u}) {
    CAPTURE(status);
    auto o = classify_status(status);
    CHECK(o.kind == verdict::retry);
    CHECK_FALSE(o.error.empty());
  }
}

TEST_CASE("classify: transport errors are retried, each with a distinct readable message") {
  std::set<std::string> messages;
  for (auto e : {transport_errc::invalid_url, transport_errc::resolve_failed, transport_errc::address_blocked,
                 transport_errc::connect_failed, transport_errc::tls_failed, transport_errc::write_failed,
                 transport_errc::read_failed, transport_errc::protocol_error, transport_errc::timeout,
                 transport_errc::cancelled}) {
    auto ec = make_error_code(e);
    CAPTURE(ec.message());
    auto o = classify_error(ec);
    CHECK(o.kind == verdict::retry);
    CHECK(o.status == 0);
    CHECK(o.error == ec.message());
    CHECK(o.error.size() > 10);
    CHECK_FALSE(contains(o.error, "unknown"));
    CHECK_FALSE(o.retry_after.has_value());
    messages.insert(o.error);
  }
  CHECK(messages.size() == 10);

  auto other = classify_error(boost::system::errc::make_error_code(boost::system::errc::connection_reset));
  CHECK(other.kind == verdict::retry);
  CHECK(other.status == 0);
  CHECK_FALSE(other.error.empty());
}

TEST_CASE("classify: Retry-After is captured in both forms and capped at retry_after_max") {
  auto secs = classify_status(429, "120");
  CHECK(secs.kind == verdict::retry);
  REQUIRE(secs.retry_after);
  CHECK(*secs.retry_after == 120s);

  auto date = classify_status(503, "Thu, 15 Jan 2026 12:05:00 GMT");
  REQUIRE(date.retry_after);
  CHECK(*date.retry_after == 300s);

  auto huge = classify_status(503, "86400");
  REQUIRE(huge.retry_after);
  CHECK(*huge.retry_after == 6h);

  auto far_date = classify_status(429, "Fri, 15 Jan 2027 12:00:00 GMT");
  REQUIRE(far_date.retry_after);
  CHECK(*far_date.retry_after == 6h);

  retry_policy tight;
  tight.retry_after_max = 60s;
  auto capped = classify_status(429, "120", "", tight);
  REQUIRE(capped.retry_after);
  CHECK(*capped.retry_after == 60s);

  auto redirect = classify_status(307, "30", "https://x.example/");
  REQUIRE(redirect.retry_after);
  CHECK(*redirect.retry_after == 30s);

  auto invalid = classify_status(503, "soon");
  CHECK(invalid.kind == verdict::retry);
  CHECK_FALSE(invalid.retry_after.has_value());

  auto absent = classify_status(503);
  CHECK_FALSE(absent.retry_after.has_value());
}

// ---------------------------------------------------------------------------------------------
// parse_retry_after (RFC 9110 §10.2.3, HTTP-date §5.6.7)

TEST_CASE("parse_retry_after: delay-seconds") {
  CHECK(retry_after_s("0") == 0);
  CHECK(retry_after_s("1") == 1);
  CHECK(retry_after_s("120") == 120);
  CHECK(retry_after_s("21600") == 21600);
  CHECK(retry_after_s("4294967295") == 4294967295LL);
  CHECK(retry_after_s("007") == 7);
  // 1*DIGIT: leading zeros do not make a number bigger.
  CHECK(retry_after_s("00000000000030") == 30);
  CHECK(retry_after_s("000000000000000") == 0);
  // Absurdly long values saturate instead of overflowing.
  auto big = retry_after_s("99999999999999999999999999");
  REQUIRE(big);
  CHECK(*big >= std::numeric_limits<std::int32_t>::max());
}

TEST_CASE("parse_retry_after: surrounding whitespace is ignored") {
  CHECK(retry_after_s(" 120") == 120);
  CHECK(retry_after_s("120 ") == 120);
  CHECK(retry_after_s("\t 120 \t") == 120);
  CHECK(retry_after_s("  Thu, 15 Jan 2026 12:00:10 GMT  ") == 10);
}

TEST_CASE("parse_retry_after: invalid values are nullopt") {
  for (std::string_view bad :
       {"", " ", "\t", "-1", "+5", "1.5", "1e3", "12a", "a12", "0x10", "1 2", "soon", "GMT",
        "Thu, 15 Jan 2026 12:00:10",             // no GMT
        "Thu, 15 Jan 2026 12:00:10 UTC",         // only GMT
        "Thu, 15 Jan 2026 12:00:10 +0000",
        "Thu, 32 Jan 2026 12:00:10 GMT",         // no such day
        "Thu, 29 Feb 2026 12:00:10 GMT",         // not a leap year
        "Thu, 15 Foo 2026 12:00:10 GMT",         // no such month
        "Thu, 15 jan 2026 12:00:10 GMT",         // month names are case-sensitive
        "Thu, 15 Jan 2026 24:00:10 GMT",         // hour out of range
        "Thu, 15 Jan 2026 12:60:10 GMT",
        "Thu, 15 Jan 2026 12:00:61 GMT",
        "Thu, 15 Jan 2026 12:00 GMT",            // no seconds
        "Thu, 5 Jan 2026 12:00:10 GMT",          // IMF-fixdate has a 2-digit day
        "Thu, 15 Jan 26 12:00:10 GMT",           // and a 4-digit year
        "Thursday, 15-Jan-2026 12:00:10 GMT",    // RFC 850 has a 2-digit year
        "Thursday, 15 Jan 26 12:00:10 GMT",
        "Thursday, 15-Jan-26 12:00:10",
        "Thu Jan 15 12:00:10",                   // asctime without year
        "Thu Jan 155 12:00:10 2026",
        "Thu Foo 15 12:00:10 2026",
        "Thu Jan 15 12:00:10 26"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_retry_after(bad, now).has_value());
  }
}

TEST_CASE("parse_retry_after: the three HTTP-date forms of RFC 9110's example") {
  // RFC 9110 §5.6.7: Sun, 06 Nov 1994 08:49:37 GMT in its three forms.
  const sys_time before = sys_days{1994y / November / 6} + 8h + 49min;  // 37 s earlier
  CHECK(retry_after_s("Sun, 06 Nov 1994 08:49:37 GMT", before) == 37);
  CHECK(retry_after_s("Sunday, 06-Nov-94 08:49:37 GMT", before) == 37);
  CHECK(retry_after_s("Sun Nov  6 08:49:37 1994", before) == 37);
  CHECK(retry_after_s("Sun Nov 6 08:49:37 1994", before) == 37);
  CHECK(retry_after_s("Sun Nov 06 08:49:37 1994", before) == 37);
}

TEST_CASE("parse_retry_after: HTTP-dates give the delay from now; past and present dates give 0") {
  CHECK(retry_after_s("Thu, 15 Jan 2026 12:00:00 GMT") == 0);   // now
  CHECK(retry_after_s("Thu, 15 Jan 2026 11:59:59 GMT") == 0);   // a second ago
  CHECK(retry_after_s("Thu, 01 Jan 1970 00:00:00 GMT") == 0);
  CHECK(retry_after_s("Thu, 15 Jan 2026 12:00:01 GMT") == 1);
  CHECK(retry_after_s("Fri, 16 Jan 2026 12:00:00 GMT") == 86400);
  CHECK(retry_after_s("Sun, 01 Mar 2026 00:00:00 GMT") ==
        duration_cast<seconds>(sys_days{2026y / March / 1} - now).count());
  CHECK(retry_after_s("Thu Jan 15 13:00:00 2026") == 3600);
  CHECK(retry_after_s("Thursday, 15-Jan-26 12:30:00 GMT") == 1800);
  // The leap day of a leap year exists.
  CHECK(retry_after_s("Thu, 29 Feb 2028 00:00:00 GMT").has_value());
}

TEST_CASE("parse_retry_after: a fractional second until the date rounds up") {
  const sys_time almost = now + 500ms;
  CHECK(retry_after_s("Thu, 15 Jan 2026 12:00:01 GMT", almost) == 1);
  CHECK(retry_after_s("Thu, 15 Jan 2026 12:00:10 GMT", almost) == 10);
  CHECK(retry_after_s("Thu, 15 Jan 2026 12:00:00 GMT", almost) == 0);
}

TEST_CASE("parse_retry_after: RFC 850 two-digit years follow RFC 9110's 50-year rule") {
  // now = 2026. "26" is this year; "70" is 2070 (44 years ahead, not 1970); "80" would be 54 years
  // ahead, so it is the most recent past year ending in 80: 1980 → already past → 0.
  CHECK(retry_after_s("Thursday, 15-Jan-26 12:00:05 GMT") == 5);
  CHECK(retry_after_s("Tuesday, 01-Jan-30 00:00:00 GMT") ==
        duration_cast<seconds>(sys_days{2030y / January / 1} - now).count());
  CHECK(retry_after_s("Tuesday, 01-Jan-70 00:00:00 GMT") ==
        duration_cast<seconds>(sys_days{2070y / January / 1} - now).count());
  CHECK(retry_after_s("Tuesday, 01-Jan-80 00:00:00 GMT") == 0);
  CHECK(retry_after_s("Friday, 31-Dec-99 23:59:59 GMT") == 0);
  CHECK(retry_after_s("Saturday, 01-Jan-00 00:00:00 GMT") == 0);
  // Seen from 1994 (the RFC's own example), "94" is 1994 and "00" is 2000.
  const sys_time in_1994 = sys_days{1994y / November / 6};
  CHECK(retry_after_s("Sunday, 06-Nov-94 00:00:10 GMT", in_1994) == 10);
  CHECK(retry_after_s("Saturday, 01-Jan-00 00:00:00 GMT", in_1994) ==
        duration_cast<seconds>(sys_days{2000y / January / 1} - in_1994).count());
}

// ---------------------------------------------------------------------------------------------
// backoff_delay

TEST_CASE("backoff_delay: defaults are min(6 h, 30 s · 2^(n−1)), half fixed and half random") {
  const retry_policy p;
  CHECK(backoff_delay(1, p, 0.0) == 15'000ms);
  CHECK(backoff_delay(1, p, 0.5) == 22'500ms);
  CHECK(backoff_delay(2, p, 0.0) == 30'000ms);
  CHECK(backoff_delay(3, p, 0.0) == 60'000ms);
  CHECK(backoff_delay(10, p, 0.0) == milliseconds{30'000 * 512 / 2});
  // 30 s · 2^10 = 8.5 h > 6 h: capped from the 11th failure on.
  CHECK(backoff_delay(11, p, 0.0) == 3h);
  CHECK(backoff_delay(20, p, 0.0) == 3h);
  CHECK(backoff_delay(20, p, 0.5) == 4h + 30min);
}

TEST_CASE("backoff_delay: the result is in [d/2, d) for every n and random value") {
  retry_policy small;
  small.backoff_base = 1000ms;
  small.backoff_max = 5000ms;
  retry_policy odd;
  odd.backoff_base = 3ms;
  odd.backoff_max = 1001ms;
  for (const retry_policy& p : {retry_policy{}, small, odd}) {
    for (int n = 1; n <= 80; ++n) {
      const std::int64_t d = capped_delay_ms(n, p);
      for (double r : {0.0, 1e-12, 0.25, 0.5, 0.75, 0.999999, just_below_one}) {
        CAPTURE(n);
        CAPTURE(r);
        CAPTURE(d);
        auto got = backoff_delay(n, p, r).count();
        CHECK(got >= d / 2);
        CHECK(got < d);
      }
      CHECK(backoff_delay(n, p, 0.0).count() == d / 2);
    }
  }
  CHECK(capped_delay_ms(3, small) == 4000);
  CHECK(capped_delay_ms(4, small) == 5000);
}

TEST_CASE("backoff_delay: the top edge of unit_random stays below the capped delay") {
  const retry_policy p;
  CHECK(backoff_delay(1, p, just_below_one) < 30'000ms);
  CHECK(backoff_delay(1, p, just_below_one) >= 29'999ms);
  CHECK(backoff_delay(50, p, just_below_one) < 6h);
  CHECK(backoff_delay(50, p, just_below_one) >= 6h - 1ms);
}

TEST_CASE("backoff_delay: grows with n, then stays at the cap for huge n") {
  const retry_policy p;
  milliseconds previous{0};
  for (int n = 1; n <= 11; ++n) {
    auto d = backoff_delay(n, p, 0.0);
    CHECK(d > previous);
    previous = d;
  }
  for (int n : {12, 30, 63, 64, 100, 1024, 100000, std::numeric_limits<int>::max()}) {
    CAPTURE(n);
    CHECK(backoff_delay(n, p, 0.0) == 3h);
    CHECK(backoff_delay(n, p, just_below_one) < 6h);
    CHECK(backoff_delay(n, p, just_below_one) > 5h);
  }
}

TEST_CASE("backoff_delay: out-of-range inputs are clamped") {
  const retry_policy p;
  // n < 1 behaves like the first failure.
  CHECK(backoff_delay(0, p, 0.0) == 15'000ms);
  CHECK(backoff_delay(-7, p, 0.0) == 15'000ms);
  CHECK(backoff_delay(std::numeric_limits<int>::min(), p, 0.0) == 15'000ms);
  // unit_random outside [0, 1) is clamped into it.
  CHECK(backoff_delay(1, p, -1.0) == 15'000ms);
  CHECK(backoff_delay(1, p, 1.0) < 30'000ms);
  CHECK(backoff_delay(1, p, 1.0) >= 29'999ms);
  CHECK(backoff_delay(1, p, 1e9) < 30'000ms);
}

TEST_CASE("backoff_delay: never an immediate retry") {
  retry_policy tiny;
  tiny.backoff_base = 1ms;
  tiny.backoff_max = 1ms;
  CHECK(backoff_delay(1, tiny, 0.0) == 1ms);
  CHECK(backoff_delay(1, tiny, just_below_one) == 1ms);
  retry_policy zero;
  zero.backoff_base = 0ms;
  zero.backoff_max = 0ms;
  CHECK(backoff_delay(1, zero, 0.0) == 1ms);
  CHECK(backoff_delay(5, zero, 0.5) == 1ms);
}

TEST_CASE("backoff_delay: seeded uniform randomness fills [d/2, d) evenly") {
  const retry_policy p;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int n = 1; n <= 12; ++n) {
    const std::int64_t d = capped_delay_ms(n, p);
    int low_half = 0;
    const int samples = 2000;
    for (int i = 0; i < samples; ++i) {
      auto got = backoff_delay(n, p, unit(rng)).count();
      REQUIRE(got >= d / 2);
      REQUIRE(got < d);
      if (got < d / 2 + d / 4) ++low_half;
    }
    CAPTURE(n);
    CHECK(low_half > samples * 4 / 10);
    CHECK(low_half < samples * 6 / 10);
  }
}

// ---------------------------------------------------------------------------------------------
// next_attempt

TEST_CASE("next_attempt: schedules at now + backoff while under the limits") {
  const retry_policy p;
  for (int attempts = 1; attempts < 20; ++attempts) {
    CAPTURE(attempts);
    auto d = next_attempt(attempts, now, now - 1h, std::nullopt, p, 0.25);
    CHECK_FALSE(d.give_up);
    CHECK(d.reason.empty());
    CHECK(d.next_attempt_at == now + backoff_delay(attempts, p, 0.25));
    CHECK(d.next_attempt_at > now);
  }
}

TEST_CASE("next_attempt: gives up at max_attempts") {
  const retry_policy p;
  auto last = next_attempt(19, now, now, std::nullopt, p, 0.0);
  CHECK_FALSE(last.give_up);
  for (int attempts : {20, 21, 1000}) {
    CAPTURE(attempts);
    auto d = next_attempt(attempts, now, now, std::nullopt, p, 0.0);
    CHECK(d.give_up);
    CHECK(contains(d.reason, std::to_string(attempts)));
    CHECK(contains(d.reason, "attempts"));
  }
  retry_policy three;
  three.max_attempts = 3;
  CHECK_FALSE(next_attempt(2, now, now, std::nullopt, three, 0.0).give_up);
  CHECK(next_attempt(3, now, now, std::nullopt, three, 0.0).give_up);
}

TEST_CASE("next_attempt: gives up once the event is max_age old") {
  const retry_policy p;
  CHECK_FALSE(next_attempt(1, now, now - 72h + 1s, std::nullopt, p, 0.0).give_up);
  auto at_limit = next_attempt(1, now, now - 72h, std::nullopt, p, 0.0);
  CHECK(at_limit.give_up);
  CHECK(contains(at_limit.reason, "72"));
  CHECK(next_attempt(1, now, now - 30 * 24h, std::nullopt, p, 0.0).give_up);
  // Unknown creation time: only the attempt limit applies. A creation time in the future
  // (clock skew) is not old.
  CHECK_FALSE(next_attempt(1, now, std::nullopt, std::nullopt, p, 0.0).give_up);
  CHECK_FALSE(next_attempt(1, now, now + 1h, std::nullopt, p, 0.0).give_up);

  retry_policy short_lived;
  short_lived.max_age = 10min;
  CHECK_FALSE(next_attempt(1, now, now - 9min, std::nullopt, short_lived, 0.0).give_up);
  CHECK(next_attempt(1, now, now - 10min, std::nullopt, short_lived, 0.0).give_up);
}

TEST_CASE("next_attempt: Retry-After is a floor, never a way to retry sooner") {
  const retry_policy p;
  // 1st failure: backoff 15..30 s.
  auto shorter = next_attempt(1, now, now, seconds{5}, p, 0.0);
  CHECK(shorter.next_attempt_at == now + 15s);
  auto zero = next_attempt(1, now, now, seconds{0}, p, 0.0);
  CHECK(zero.next_attempt_at == now + 15s);
  auto longer = next_attempt(1, now, now, seconds{3600}, p, 0.0);
  CHECK(longer.next_attempt_at == now + 1h);
  // 11th failure: backoff 3..6 h dominates a short Retry-After.
  auto late = next_attempt(11, now, now, seconds{60}, p, 0.0);
  CHECK(late.next_attempt_at == now + 3h);
}

TEST_CASE("next_attempt: Retry-After and backoff are both capped") {
  const retry_policy p;
  auto capped = next_attempt(1, now, now, seconds{48 * 3600}, p, 0.0);
  CHECK_FALSE(capped.give_up);
  CHECK(capped.next_attempt_at == now + 6h);

  retry_policy tight;
  tight.retry_after_max = 120s;
  auto tight_capped = next_attempt(1, now, now, seconds{3600}, tight, 0.0);
  CHECK(tight_capped.next_attempt_at == now + 120s);

  for (int attempts = 1; attempts < 20; ++attempts) {
    auto d = next_attempt(attempts, now, now, seconds{std::numeric_limits<std::int32_t>::max()}, p, just_below_one);
    CHECK(d.next_attempt_at <= now + 6h);
  }
}

TEST_CASE("next_attempt: the attempt limit is checked before the age limit") {
  const retry_policy p;
  auto d = next_attempt(20, now, now - 100h, std::nullopt, p, 0.0);
  CHECK(d.give_up);
  CHECK(contains(d.reason, "20 attempts"));
}

TEST_CASE("parse_retry_after: dates far in the future or past are clamped, never overflowed") {
  // A nanosecond system_clock spans 1678–2262 only: these used to wrap (seen by UBSan).
  CHECK(retry_after_s("Fri, 31 Dec 9999 23:59:59 GMT") == std::numeric_limits<std::int32_t>::max());
  CHECK(retry_after_s("Fri, 31 Dec 2300 23:59:59 GMT") == std::numeric_limits<std::int32_t>::max());
  CHECK(retry_after_s("Mon, 01 Jan 0001 00:00:00 GMT") == 0);
  CHECK(retry_after_s("Sat, 01 Jan 1500 00:00:00 GMT") == 0);
  CHECK(retry_after_s("Fri Dec 31 23:59:59 9999") == std::numeric_limits<std::int32_t>::max());
}
