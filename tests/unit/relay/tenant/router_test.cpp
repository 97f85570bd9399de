// relay/tenant/router.hpp: the routes of the tenant API, the refusals without one, the query of
// GET /v1/events and its cursor; and relay/tenant/rate_limit.hpp's buckets.

#include "relay/operations/tenants.hpp"
#include "relay/tenant/rate_limit.hpp"
#include "relay/tenant/router.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace walhook::relay;
using namespace walhook::relay::tenant;
using namespace std::chrono_literals;

namespace {

route routed(std::string_view method, std::string_view target) {
  auto r = route_of(method, target);
  REQUIRE(std::holds_alternative<route>(r));
  return std::get<route>(r);
}

unsigned refused(std::string_view method, std::string_view target) {
  auto r = route_of(method, target);
  REQUIRE(std::holds_alternative<api_response>(r));
  return std::get<api_response>(r).status;
}

}  // namespace

TEST_CASE("tenant routes: each of the table, with what the path carries") {
  CHECK(routed("GET", "/v1/events?since=2026-01-01T00:00:00Z").kind == route_kind::events);
  CHECK(routed("HEAD", "/v1/events").kind == route_kind::events);
  auto e = routed("GET", "/v1/events/0b8f2a52-4c1e-4d0a-9a59-5f7b0e3b2c11");
  CHECK(e.kind == route_kind::event);
  CHECK(e.event_id == "0b8f2a52-4c1e-4d0a-9a59-5f7b0e3b2c11");
  CHECK_FALSE(e.changes);
  auto p = routed("PATCH", "/v1/endpoints/42");
  CHECK(p.kind == route_kind::update_endpoint);
  CHECK(p.endpoint_id == 42);
  CHECK(p.changes);
  CHECK(routed("POST", "/v1/endpoints/7/rotate-secret").kind == route_kind::rotate_secret);
  CHECK(routed("GET", "/v1/endpoints/7/deliveries?status=dead").kind == route_kind::deliveries);
  CHECK_FALSE(routed("GET", "/v1/endpoints/7/deliveries").changes);
  for (const auto& spec : routes()) CHECK(spec.changes == (spec.method != "GET"));
}

TEST_CASE("tenant routes: 404, 405 naming the methods, 400 for ids") {
  CHECK(refused("GET", "/v1/nothing") == 404);
  CHECK(refused("GET", "/api/overview") == 404);
  CHECK(refused("GET", "/v1/endpoints/7/pause") == 405);
  CHECK(std::get<api_response>(route_of("PUT", "/v1/endpoints/7")).body.find("GET, PATCH, DELETE") != std::string::npos);
  CHECK(refused("GET", "/v1/endpoints/0") == 400);
  CHECK(refused("GET", "/v1/endpoints/-3") == 400);
  CHECK(refused("GET", "/v1/endpoints/3x") == 400);
  CHECK(refused("GET", "/v1/endpoints/99999999999999999999") == 400);
  CHECK(refused("GET", "/v1/events/not-a-uuid") == 400);
}

TEST_CASE("GET /v1/events: the query, its refusals, and the cursor") {
  auto q = std::get<events_query>(events_query_of("/v1/events?since=2026-01-01T00:00:00Z&type=a,%20b&type=c&limit=5"));
  CHECK(q.since == "2026-01-01T00:00:00Z");
  CHECK(q.types == std::vector<std::string>{"a", "b", "c"});
  CHECK(q.limit == 5);
  CHECK_FALSE(q.cursor);
  CHECK(std::get<events_query>(events_query_of("/v1/events")).limit == 100);
  CHECK(std::holds_alternative<api_response>(events_query_of("/v1/events?limit=0")));
  CHECK(std::holds_alternative<api_response>(events_query_of("/v1/events?limit=1001")));
  CHECK(std::holds_alternative<api_response>(events_query_of("/v1/events?sinse=x")));  // misspelt: refused, not ignored
  CHECK(std::holds_alternative<api_response>(events_query_of("/v1/events?cursor=abc")));
  // since and until are RFC 3339: PostgreSQL's relative words would move between pages.
  for (const auto* t : {"2026-12-01", "2026-12-01T10:00:00Z", "2026-12-01T10:00:00.123456+05:45", "2026-12-01%2010:00:00-01"})
    CHECK(std::holds_alternative<events_query>(events_query_of(std::string("/v1/events?since=") + t)));
  for (const auto* t : {"now", "today", "yesterday", "epoch", "infinity", "2026-12-01%20now", "2026-12-01T10:00%20Europe/Paris",
                        "26-12-01", "2026/12/01"}) {
    CHECK(std::holds_alternative<api_response>(events_query_of(std::string("/v1/events?since=") + t)));
    CHECK(std::holds_alternative<api_response>(events_query_of(std::string("/v1/events?until=") + t)));
  }
  CHECK(std::holds_alternative<events_query>(events_query_of("/v1/events?")));  // an empty query
  // An offset's "+" sent unencoded reads as a space: it is taken for the "+" it was.
  CHECK(std::get<events_query>(events_query_of("/v1/events?since=2026-12-04T21:00:00+05:45")).since == "2026-12-04T21:00:00+05:45");
  CHECK(std::get<events_query>(events_query_of("/v1/events?until=2026-12-04%2021:00:00+05")).until == "2026-12-04 21:00:00+05");

  // A next_cursor: the view's snapshots, the position in it, the reading's filters.
  const auto digest = filters_digest(q);
  CHECK(digest.size() == 16);
  CHECK(filters_digest(std::get<events_query>(events_query_of("/v1/events?since=2026-01-01T00:00:00Z&type=a,b,c&limit=9"))) ==
        digest);  // the same filters, another limit
  CHECK(filters_digest(std::get<events_query>(events_query_of("/v1/events?since=2026-01-01T00:00:00Z&type=a,b"))) != digest);
  CHECK(filters_digest(std::get<events_query>(events_query_of("/v1/events?until=2026-01-01T00:00:00Z&type=a,b,c"))) != digest);
  const events_cursor_state next{"740:745:741,743", "750:760:750,755,759",
                                 std::pair{std::string("2026-12-03 22:15:39.123456+00"), std::int64_t{1234}}, digest,
                                 "7301234567890123456.0000000A"};
  const auto c = events_cursor(next);
  CHECK(c.find_first_of("+/=") == std::string::npos);
  auto state = parse_events_cursor(c);
  REQUIRE(state.has_value());
  CHECK(*state == next);
  auto via_query = std::get<events_query>(events_query_of("/v1/events?cursor=" + c));
  CHECK(via_query.cursor == state);
  CHECK(snapshot_xmax(next.lower) == 745);
  CHECK(snapshot_xip_array(next.lower) == "{741,743}");
  CHECK(snapshot_xip_array("750:750:") == "{}");
  // A resume_cursor: the view it follows, no snapshot of its own, no position.
  const events_cursor_state resume{"750:760:750,755,759", "", std::nullopt, digest, "42.00000001"};
  CHECK(parse_events_cursor(events_cursor(resume)) == resume);
  // A cursor of walhook before the history (c2) is still read, with none.
  auto c2 = parse_events_cursor(operations::base64url_encode(fmt::format("c2|750:760:750,755,759||||{}", digest)));
  REQUIRE(c2.has_value());
  CHECK(c2->history.empty());
  CHECK(c2->lower == resume.lower);
  CHECK(parse_events_cursor(events_cursor({"", "750:760:", std::pair{std::string("2026-01-01"), std::int64_t{1}}, digest, "1.00000001"}))
            .has_value());
  // PostgreSQL's far-off timestamps are positions too.
  CHECK(parse_events_cursor(events_cursor({"", "750:760:", std::pair{std::string("0044-03-15 00:00:00+00 BC"), std::int64_t{1}}, digest, "1.00000001"}))
            .has_value());

  // Forged cursors are no cursors: SQL in the timestamp, a seq that is not positive, snapshots
  // PostgreSQL would refuse (xmin after xmax, an xip outside [xmin, xmax) or out of order, xmin
  // 0, text, past 2^63 - 1), a resume holding a position, a next_cursor without one, a digest
  // that is not one, the old format.
  const auto forged = [&](std::string lower, std::string upper, std::string at, std::int64_t seq, std::string filters = {},
                          std::string history = "1.00000001") {
    return parse_events_cursor(events_cursor({std::move(lower), std::move(upper),
                                              at.empty() ? std::nullopt : std::optional(std::pair{at, seq}),
                                              filters.empty() ? digest : filters, std::move(history)}));
  };
  CHECK(forged("", "1:2:", "2026-01-01", 1).has_value());
  CHECK_FALSE(forged("", "1:2:", "2026-01-01'; DROP TABLE x; --", 1));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 0));
  CHECK_FALSE(forged("", "5:2:", "2026-01-01", 1));
  CHECK_FALSE(forged("", "5:9:4", "2026-01-01", 1));
  CHECK_FALSE(forged("", "5:9:9", "2026-01-01", 1));
  CHECK_FALSE(forged("", "5:9:7,6", "2026-01-01", 1));
  CHECK_FALSE(forged("", "5:9:6,", "2026-01-01", 1));
  CHECK_FALSE(forged("", "0:9:", "2026-01-01", 1));
  CHECK_FALSE(forged("", "5:9:'x'", "2026-01-01", 1));
  CHECK_FALSE(forged("", "9223372036854775808:9223372036854775809:", "2026-01-01", 1));
  CHECK_FALSE(forged("5:9:", "", "2026-01-01", 1));
  CHECK_FALSE(forged("", "5:9:", "", 0));
  CHECK_FALSE(forged("", "", "", 0));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, "not hex digits!!"));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, "abc"));
  CHECK(forged("", "5:9:6,7,7", "2026-01-01", 1).has_value());
  // A history is digits, a dot and a timeline's 8 hex digits; nothing else (c3 always has one).
  CHECK(forged("", "1:2:", "2026-01-01", 1, {}, "7301234567890123456.FFFFFFFF").has_value());
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, {}, ""));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, {}, ".00000001"));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, {}, "1.0000001"));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, {}, "1.0000000g"));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, {}, "1'--.00000001"));
  CHECK_FALSE(forged("", "1:2:", "2026-01-01", 1, {}, "1.00000001|x"));  // repeats pass, as PostgreSQL lets them
  CHECK_FALSE(parse_events_cursor(operations::base64url_encode("c1|2026-01-01|1")));
  CHECK_FALSE(parse_events_cursor(""));
  CHECK_FALSE(parse_events_cursor(std::string(7000, 'A')));
}

TEST_CASE("bounded_snapshot: a long snapshot becomes an earlier one that shows nothing more") {
  CHECK(bounded_snapshot("100:200:120,150", 2000) == "100:200:120,150");
  CHECK(bounded_snapshot("100:200:120,150,170", 15) == "100:170:120,150");
  CHECK(bounded_snapshot("100:200:120,150,170", 11) == "100:150:120");
  CHECK(bounded_snapshot("100:200:120,150,170", 10) == "100:120:");
  // 500 writers busy at once, 10-digit xids: the view keeps the first ones and ends below the
  // first left out; the text fits, and it is a snapshot the cursor parser (PostgreSQL's rules)
  // takes.
  std::string xip;
  for (int i = 0; i < 500; ++i) xip += fmt::format("{}{}", i ? "," : "", 4000000000LL + 7 * i);
  const auto text = fmt::format("4000000000:4000009999:{}", xip);
  const auto bounded = bounded_snapshot(text, view_snapshot_max);
  CHECK(bounded.size() <= view_snapshot_max);
  CHECK(bounded.size() > view_snapshot_max - 12);
  CHECK(bounded.starts_with("4000000000:"));
  const auto xmax = snapshot_xmax(bounded);
  CHECK(xmax > 4000000000ULL);
  CHECK((xmax - 4000000000ULL) % 7 == 0);  // one of the xips
  CHECK(xip.starts_with(std::string(bounded.substr(bounded.rfind(':') + 1))));
  const auto cursor = events_cursor({bounded, bounded, std::pair{std::string("2026-12-03 22:15:39.123456+00"), std::int64_t{1}},
                                     "0123456789abcdef", "18446744073709551615.FFFFFFFF"});
  CHECK(parse_events_cursor(cursor).has_value());  // two bounded snapshots fit a cursor
}

TEST_CASE("next_view: a reading's next view never shows less than the previous one") {
  CHECK(next_view("100:200:120,150", "") == "100:200:120,150");
  CHECK(next_view("100:200:120,150", "90:150:95") == "100:200:120,150");
  // 400 writers busy: the view is cut at the first xid that does not fit the cursor. Were that
  // cut below the previous view's xmax (the previous view showed the transactions between the
  // two), the previous view is taken again: nothing is shown twice, and the rest comes once the
  // busy ones end.
  std::string xip;
  for (int i = 0; i < 400; ++i) xip += fmt::format("{}{}", i ? "," : "", 1000000 + i);
  const auto busy = fmt::format("1000000:1000500:{}", xip);
  const auto cut = bounded_snapshot(busy, view_snapshot_max);
  REQUIRE(snapshot_xmax(cut) < 1000400);
  CHECK(next_view(busy, "1000000:1000100:") == cut);
  CHECK(next_view(busy, "1000000:1000399:") == "1000000:1000399:");
}

TEST_CASE("GET …/deliveries: status and limit") {
  auto q = std::get<deliveries_query>(deliveries_query_of("/v1/endpoints/1/deliveries?status=dead&limit=7"));
  CHECK(q.status == "dead");
  CHECK(q.limit == 7);
  CHECK(std::holds_alternative<api_response>(deliveries_query_of("/v1/endpoints/1/deliveries?status=lost")));
  CHECK(std::holds_alternative<api_response>(deliveries_query_of("/v1/endpoints/1/deliveries?limit=501")));
}

TEST_CASE("rate limiter: a burst, then the rate; Retry-After in whole seconds; keys apart") {
  rate_limiter limiter(2.0, 3.0);  // 2 per second, 3 at once
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  CHECK_FALSE(limiter.take("a", t0));
  CHECK_FALSE(limiter.take("a", t0));
  CHECK_FALSE(limiter.take("a", t0));
  auto wait = limiter.take("a", t0);
  REQUIRE(wait);
  CHECK(*wait == 1s);
  CHECK_FALSE(limiter.take("b", t0));  // another token has its own bucket
  CHECK_FALSE(limiter.take("a", t0 + 500ms));  // one refilled
  CHECK(limiter.take("a", t0 + 500ms));
  rate_limiter slow(0.1, 1.0);  // one per ten seconds
  CHECK_FALSE(slow.take("a", t0));
  CHECK(*slow.take("a", t0) == 10s);
}
