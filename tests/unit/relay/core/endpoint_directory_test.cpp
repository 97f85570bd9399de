// relay/core/endpoint_directory.hpp: what each change returns, the router, breaker state.

#include "delivery/signing.hpp"
#include "relay/core/endpoint_directory.hpp"

#include <doctest/doctest.h>

using namespace walhook;
using namespace walhook::relay;

namespace {
endpoint make(std::int64_t id, std::string tenant, std::optional<std::vector<std::string>> types = {}) {
  endpoint e;
  e.id = id;
  e.tenant_id = std::move(tenant);
  e.url = "https://h.example/" + std::to_string(id);
  e.secret = delivery::generate_secret();
  e.event_types = std::move(types);
  resolve_endpoint(e);
  return e;
}
}  // namespace

TEST_CASE("endpoint_directory: route by tenant and event type, in the order endpoints were added") {
  endpoint_directory d;
  d.apply(make(3, "acme"));
  d.apply(make(1, "acme", std::vector<std::string>{"order.paid"}));
  d.apply(make(2, "other"));
  CHECK(d.route("acme", "order.paid") == std::vector<std::int64_t>{3, 1});
  CHECK(d.route("acme", "order.shipped") == std::vector<std::int64_t>{3});
  CHECK(d.route("nobody", "order.paid").empty());
  // Moving an endpoint to another tenant moves it in the index.
  d.apply(make(3, "other"));
  CHECK(d.route("acme", "order.paid") == std::vector<std::int64_t>{1});
  CHECK(d.route("other", "x") == std::vector<std::int64_t>{2, 3});
}

TEST_CASE("endpoint_directory: changes say what the engine must do") {
  endpoint_directory d;
  auto added = d.apply(make(1, "t"));
  CHECK(added.added);
  CHECK(added.activated);
  auto same = d.apply(make(1, "t"));
  CHECK(same == endpoint_change{1, false, false, false, false, false});
  auto moved = make(1, "t");
  moved.url = "https://elsewhere.example/";
  CHECK(d.apply(moved).url_changed);
  auto paused = moved;
  paused.status = endpoint_status::paused;
  auto p = d.apply(paused);
  CHECK(p.deactivated);
  CHECK_FALSE(p.activated);
  delivery::breaker_state failing;
  failing.consecutive_failures = 7;
  d.set_health(1, failing);
  auto resumed = d.apply(moved);
  CHECK(resumed.activated);
  CHECK(d.health(1).consecutive_failures == 0);  // an operator's resume closes the breaker
  auto gone = d.remove(1);
  REQUIRE(gone.has_value());
  CHECK(gone->removed);
  CHECK(gone->deactivated);
  CHECK_FALSE(d.remove(1).has_value());
  CHECK(d.find(1) == nullptr);
}

TEST_CASE("endpoint_directory: replace_all removes what the table no longer has; clear removes all") {
  endpoint_directory d;
  d.apply(make(1, "t"));
  d.apply(make(2, "t"));
  auto changes = d.replace_all({make(2, "t"), make(3, "u")});
  int removed = 0, added = 0;
  for (const auto& c : changes) {
    removed += c.removed;
    added += c.added;
  }
  CHECK(removed == 1);
  CHECK(added == 1);
  CHECK(d.find(1) == nullptr);
  CHECK(d.size() == 2);
  CHECK(d.replace_all({}).size() == 2);
  CHECK(d.size() == 0);
  CHECK(d.route("t", "x").empty());
}

TEST_CASE("endpoint_directory: a retired endpoint is still found for its work, never routed, its breaker gone") {
  endpoint_directory d;
  d.apply(make(1, "t"));
  d.apply(make(2, "t"));
  delivery::breaker_state s;
  s.consecutive_failures = 3;
  d.set_health(1, s);
  CHECK(d.retire(1));
  CHECK_FALSE(d.retire(9));
  REQUIRE(d.find(1) != nullptr);
  CHECK(d.find(1)->retired);
  CHECK(d.route("t", "x") == std::vector<std::int64_t>{2});
  CHECK(d.health(1) == delivery::breaker_state{});
  // Created again with the same id — from the stream, built on the cached (retired) copy: a
  // live endpoint again.
  auto again = *d.find(1);
  d.apply(again);
  CHECK_FALSE(d.find(1)->retired);
  CHECK(d.route("t", "x").size() == 2);
  auto gone = d.remove(1);
  REQUIRE(gone.has_value());
  CHECK(gone->removed);
}

TEST_CASE("endpoint_directory: breaker state per endpoint, closed by default, reset on request") {
  endpoint_directory d;
  CHECK(d.health(9) == delivery::breaker_state{});
  delivery::breaker_state s;
  s.consecutive_failures = 3;
  d.set_health(9, s);
  CHECK(d.health(9).consecutive_failures == 3);
  CHECK(d.reset_health(9));
  CHECK_FALSE(d.reset_health(9));
}

TEST_CASE("endpoint_directory: a direct route (outbox.endpoint_id) is that endpoint only, if live and of the tenant") {
  endpoint_directory d;
  d.apply(make(1, "acme", std::vector<std::string>{"order.paid"}));
  d.apply(make(2, "acme"));
  d.apply(make(3, "other"));
  // Whatever its event types; never the tenant's other endpoints.
  CHECK(d.route("acme", "walhook.endpoint.disabled", 1) == std::vector<std::int64_t>{1});
  CHECK(d.route("acme", "order.paid", 2) == std::vector<std::int64_t>{2});
  CHECK(d.route("acme", "x", 3).empty());   // another tenant's endpoint
  CHECK(d.route("acme", "x", 99).empty());  // unknown
  REQUIRE(d.retire(2));
  CHECK(d.route("acme", "x", 2).empty());   // removed in the stream
}
