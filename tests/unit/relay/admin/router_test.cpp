// relay/admin/router.hpp as a table: which route a method and a target name, or the answer
// without one (400 a bad id, 405 another method, 404 no such route), in the order the router
// checks them.

#include "relay/admin/router.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

using namespace walhook::relay;

namespace {

const std::string uuid = "00000000-0000-4000-8000-000000000001";

/// A route, or the status of the answer without one (0 for a route).
struct outcome {
  std::optional<api_route> route;
  unsigned status = 0;
};

outcome routed(const char* method, const std::string& target) {
  auto r = route_of(method, target);
  if (auto* route = std::get_if<api_route>(&r)) return {*route, 0};
  return {std::nullopt, std::get<api_response>(r).status};
}

api_route to(route_kind kind, std::int64_t id = 0, std::string arg = {}) {
  return {.kind = kind, .endpoint_id = id, .arg = std::move(arg)};
}

}  // namespace

TEST_CASE("route_of: the table of routes") {
  struct row {
    const char* method;
    std::string target;
    std::optional<api_route> route;
    unsigned status;
  };
  const row rows[] = {
      {"GET", "/api/overview", to(route_kind::overview), 0},
      {"HEAD", "/api/overview", to(route_kind::overview), 0},
      {"GET", "/api/overview?x=1", to(route_kind::overview), 0},
      {"POST", "/api/overview", std::nullopt, 405},
      {"GET", "/api/endpoints", to(route_kind::endpoints), 0},
      {"GET", "/api/endpoints/", to(route_kind::endpoints), 0},
      {"DELETE", "/api/endpoints", std::nullopt, 405},
      {"GET", "/api/endpoints/7", to(route_kind::endpoint, 7), 0},
      {"POST", "/api/endpoints/7", std::nullopt, 405},
      {"GET", "/api/endpoints/0", std::nullopt, 400},
      {"GET", "/api/endpoints/-3", std::nullopt, 400},
      {"GET", "/api/endpoints/7x", std::nullopt, 400},
      {"POST", "/api/endpoints/x/pause", std::nullopt, 400},  // the id first
      {"GET", "/api/endpoints/x/y/z", std::nullopt, 400},
      {"POST", "/api/endpoints/7/pause", to(route_kind::endpoint_status, 7, "pause"), 0},
      {"POST", "/api/endpoints/7/resume", to(route_kind::endpoint_status, 7, "resume"), 0},
      {"POST", "/api/endpoints/7/enable", to(route_kind::endpoint_status, 7, "enable"), 0},
      {"POST", "/api/endpoints/7/disable", to(route_kind::endpoint_status, 7, "disable"), 0},
      {"GET", "/api/endpoints/7/pause", std::nullopt, 405},
      {"POST", "/api/endpoints/7/replay", to(route_kind::replay, 7), 0},
      {"GET", "/api/endpoints/7/replay", std::nullopt, 405},
      {"POST", "/api/endpoints/7/remove", std::nullopt, 404},
      {"POST", "/api/endpoints/7/pause/now", std::nullopt, 404},
      {"GET", "/api/events/" + uuid, to(route_kind::event, 0, uuid), 0},
      {"GET", "/api/events/not-a-uuid", std::nullopt, 400},
      {"POST", "/api/events/not-a-uuid", std::nullopt, 405},  // the method first
      {"POST", "/api/deliveries/resend", to(route_kind::resend), 0},
      {"GET", "/api/deliveries/resend", std::nullopt, 405},
      {"POST", "/api/deliveries", std::nullopt, 404},
      {"GET", "/api/sources", to(route_kind::sources), 0},
      {"POST", "/api/sources", std::nullopt, 405},
      {"GET", "/api/sources/shop-eu_2", to(route_kind::source, 0, "shop-eu_2"), 0},
      {"HEAD", "/api/sources/shop", to(route_kind::source, 0, "shop"), 0},
      {"GET", "/api/sources/Shop", std::nullopt, 400},      // names are lower case
      {"GET", "/api/sources/-shop", std::nullopt, 400},     // and start with a letter or digit
      {"GET", "/api/sources/sh%20op", std::nullopt, 400},   // never decoded into another name
      {"GET", "/api/sources/" + std::string(64, 'a'), std::nullopt, 400},
      {"POST", "/api/sources/shop", std::nullopt, 405},
      {"GET", "/api/sources/shop/x", std::nullopt, 404},
      {"GET", "/api/", std::nullopt, 404},
      {"GET", "/api/nothing", std::nullopt, 404},
  };
  for (const auto& r : rows) {
    CAPTURE(r.method);
    CAPTURE(r.target);
    const auto got = routed(r.method, r.target);
    CHECK(got.route == r.route);
    CHECK(got.status == r.status);
  }
}

TEST_CASE("route_of: the answers without a route say why") {
  auto body = [](const char* method, const char* target) {
    return std::get<api_response>(route_of(method, target)).body;
  };
  CHECK(body("POST", "/api/overview") == R"({"error":"use GET here"})");
  CHECK(body("GET", "/api/endpoints/7/pause") == R"({"error":"use POST here"})");
  CHECK(body("GET", "/api/endpoints/abc") == R"({"error":"not an endpoint id: abc"})");
  CHECK(body("GET", "/api/events/abc") == R"j({"error":"not an event id (a UUID): abc"})j");
  CHECK(body("GET", "/api/sources/A") == R"j({"error":"not a source name: A"})j");
  CHECK(body("GET", "/api/nothing") == R"j({"error":"no such API route (docs/api.md)"})j");
}

TEST_CASE("segments_of: the path's segments, the query string dropped") {
  CHECK(segments_of("/api/endpoints/3?x=/y") == std::vector<std::string>{"api", "endpoints", "3"});
  CHECK(segments_of("/api//overview/") == std::vector<std::string>{"api", "overview"});
  CHECK(segments_of("/").empty());
}

TEST_CASE("route_of: GET /api/endpoints pages: ?limit from 1 to 1000 (default 100), ?after a cursor; 400 otherwise") {
  using walhook::relay::operations::endpoint_page_key;
  auto page = [](const std::string& target) { return std::get<api_route>(route_of("GET", target)).page; };
  auto status = [](const std::string& target) {
    auto r = route_of("GET", target);
    return std::holds_alternative<api_response>(r) ? std::get<api_response>(r).status : 0u;
  };
  CHECK(page("/api/endpoints").limit == 100);
  CHECK_FALSE(page("/api/endpoints").after);
  CHECK(page("/api/endpoints?limit=1").limit == 1);
  CHECK(page("/api/endpoints?limit=1000").limit == 1000);
  CHECK(page("/api/endpoints?other=x&limit=7").limit == 7);  // other members are ignored
  const endpoint_page_key key{.since_us = 1764561600123456, .failures = 3, .dead = 2, .id = 41};
  CHECK(page("/api/endpoints?after=" + page_cursor(key)).after == key);
  CHECK(page("/api/endpoints?limit=5&after=" + page_cursor(key)).limit == 5);
  for (const char* bad : {"?limit=0", "?limit=1001", "?limit=-1", "?limit=abc", "?limit=", "?limit=10x", "?limit=1e3",
                          "?limit=99999999999999999999", "?after=", "?after=x", "?after=1.2.3", "?after=1.2.3.4.5",
                          "?after=1.2.3.0", "?after=n.-1.0.4", "?after=1..3.4", "?after=1.2.3.4x"}) {
    CAPTURE(bad);
    CHECK(status(std::string("/api/endpoints") + bad) == 400);
  }
  CHECK(status("/api/endpoints?limit=0") == 400);
  CHECK(std::get<api_response>(route_of("GET", "/api/endpoints?limit=5000")).body.find("from 1 to 1000") != std::string::npos);
  CHECK(status("/api/endpoints/7?limit=0") == 0);  // one endpoint has no pages
  CHECK(status("/api/overview?limit=0") == 0);
}

TEST_CASE("page cursors round-trip, an endpoint without a pending age included") {
  using walhook::relay::operations::endpoint_page_key;
  for (const endpoint_page_key& key :
       {endpoint_page_key{.since_us = std::numeric_limits<std::int64_t>::max(), .failures = 0, .dead = 0, .id = 1},
        endpoint_page_key{.since_us = 0, .failures = 5, .dead = 9, .id = 9223372036854775807},
        endpoint_page_key{.since_us = -86400000000, .failures = 1, .dead = 0, .id = 2}}) {
    const auto text = page_cursor(key);
    CAPTURE(text);
    CHECK(parse_page_cursor(text) == key);
  }
  CHECK(page_cursor({.since_us = std::numeric_limits<std::int64_t>::max(), .failures = 0, .dead = 1, .id = 3}) == "n.0.1.3");
}
