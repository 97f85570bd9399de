// The routing an endpoint had before a change (relay/core/routing_epoch.hpp): which transactions
// it holds, what it routes, and its JSON form (walhook.endpoint_cursors.routing) round trip.

#include "relay/core/routing_epoch.hpp"
#include "relay/core/rows.hpp"

#include <doctest/doctest.h>

using namespace walhook::relay;

namespace {

routing_epoch sample() {
  endpoint e;
  e.event_types = std::vector<std::string>{"order.paid", "order \"odd\""};
  e.policies.filter = R"({"data.id": 9007199254740993, "data.kind": {"$in": ["a", "é"]}})";
  e.filter = payload_filter::compile(*e.policies.filter).value();
  auto snap = pg_snapshot::parse("100:110:104,106").value();
  return routing_epoch::of(e, snap, "100:110:104,106", {112, 111});
}

}  // namespace

TEST_CASE("routing_epoch: holds the transactions its snapshot shows and those listed, none other") {
  const auto r = sample();
  CHECK(r.holds(99));        // before xmin: committed
  CHECK(r.holds(105));       // between, not in progress
  CHECK_FALSE(r.holds(104));  // in progress then
  CHECK_FALSE(r.holds(110));  // at xmax: not yet
  CHECK(r.holds(111));       // streamed before the change, listed
  CHECK(r.holds(112));
  CHECK_FALSE(r.holds(113));
}

TEST_CASE("routing_epoch: routes by the event types and filter it had; an unreadable body is routed with the reason") {
  const auto r = sample();
  std::string why;
  CHECK(r.routes("order.paid", R"({"data": {"id": 9007199254740993, "kind": "a"}})", &why));
  CHECK_FALSE(r.routes("order.paid", R"({"data": {"id": 9007199254740992, "kind": "a"}})", &why));  // exact
  CHECK_FALSE(r.routes("order.refunded", R"({"data": {"id": 9007199254740993, "kind": "a"}})", &why));
  CHECK(r.routes("order.paid", std::nullopt, &why));  // a row that cannot become a body: by type
  why.clear();
  CHECK(r.routes("order.paid", R"({"data": {"id": 1e400, "kind": "a"}})", &why));
  CHECK_FALSE(why.empty());
  routing_epoch all;  // no types, no filter: everything
  CHECK(all.routes("anything", R"({})", nullptr));
}

TEST_CASE("routing_epoch: the JSON form round-trips exactly; a malformed one is refused with the reason") {
  std::vector<routing_epoch> epochs{sample(), routing_epoch{}};
  epochs[1].before = pg_snapshot::parse("5:5:").value();
  epochs[1].before_text = "5:5:";
  const auto json = routing_epochs_json(epochs);
  auto back = parse_routing_epochs(json);
  REQUIRE(back.has_value());
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].event_types == epochs[0].event_types);
  CHECK((*back)[0].filter_text == epochs[0].filter_text);  // the text as stored, not re-serialized
  CHECK((*back)[0].before_text == "100:110:104,106");
  CHECK((*back)[0].before_also == std::vector<std::uint64_t>{111, 112});
  CHECK((*back)[0].filter.has_value());
  CHECK_FALSE((*back)[1].event_types.has_value());
  CHECK_FALSE((*back)[1].filter.has_value());
  CHECK(routing_epochs_json(*back) == json);

  std::string why;
  for (const char* bad : {"{}", "[{}]", R"([{"before": "x"}])", R"([{"before": "1:1:", "filter": "{\"$bad\": 1}"}])",
                          R"([{"before": "1:1:", "before_also": ["7"]}])", "not json"}) {
    INFO(bad);
    why.clear();
    CHECK_FALSE(parse_routing_epochs(bad, &why).has_value());
    CHECK(why.rfind("routing: ", 0) == 0);
  }
}

TEST_CASE("routing_epoch: shown_by — a later snapshot shows every transaction it holds, or it stays") {
  const auto r = sample();  // before 100:110:104,106, also 111, 112
  auto snap = [](const char* t) { return pg_snapshot::parse(t).value(); };
  CHECK(r.shown_by(snap("113:113:")));
  CHECK(r.shown_by(snap("104:120:104,106,115")));   // still in progress then: not held either
  CHECK_FALSE(r.shown_by(snap("104:120:105")));     // 105 committed before the change, not shown
  CHECK_FALSE(r.shown_by(snap("100:112:104,106")));  // 111 listed, 112 not shown
  CHECK_FALSE(r.shown_by(snap("90:100:")));          // older than the change
}
