// The in-memory outcome log (relay/outcome_log.hpp): hand-made cases, then a seeded model-based
// test against a plain vector of everything added (the ring must equal its last `capacity`).

#include "relay/outcome_log.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using walhook::relay::outcome_entry;
using walhook::relay::outcome_log;
using namespace std::chrono_literals;

namespace {

outcome_entry entry(std::string event, std::int64_t endpoint, int attempt, int seconds = 0) {
  outcome_entry e;
  e.event_id = std::move(event);
  e.endpoint_id = endpoint;
  e.at = std::chrono::system_clock::time_point{} + std::chrono::seconds{seconds};
  e.attempt = attempt;
  e.http_status = attempt == 1 ? 503 : 200;
  e.outcome = attempt == 1 ? "5xx" : "2xx";
  e.result = attempt == 1 ? "retry" : "delivered";
  return e;
}

}  // namespace

TEST_CASE("outcome_log: an event's entries oldest first, an endpoint's newest first") {
  outcome_log log(10);
  CHECK(log.size() == 0);
  CHECK(log.oldest() == std::chrono::system_clock::time_point{});
  log.add(entry("e1", 1, 1, 10));
  log.add(entry("e2", 2, 1, 11));
  log.add(entry("e1", 1, 2, 12));
  log.add(entry("e1", 2, 1, 13));
  auto e1 = log.of_event("e1");
  REQUIRE(e1.size() == 3);
  CHECK(e1[0].attempt == 1);
  CHECK(e1[0].endpoint_id == 1);
  CHECK(e1[1].attempt == 2);
  CHECK(e1[1].result == "delivered");
  CHECK(e1[2].endpoint_id == 2);
  CHECK(log.of_event("nope").empty());
  auto ep2 = log.of_endpoint(2, 50);
  REQUIRE(ep2.size() == 2);
  CHECK(ep2[0].event_id == "e1");  // newest first
  CHECK(ep2[1].event_id == "e2");
  CHECK(log.of_endpoint(2, 1).size() == 1);
  CHECK(log.oldest() == std::chrono::system_clock::time_point{} + 10s);
}

TEST_CASE("outcome_log: the oldest entries go when it is full, index included") {
  outcome_log log(3);
  log.add(entry("a", 1, 1, 1));
  log.add(entry("b", 1, 1, 2));
  log.add(entry("a", 1, 2, 3));
  log.add(entry("c", 1, 1, 4));  // the first "a" goes
  CHECK(log.size() == 3);
  CHECK(log.capacity() == 3);
  auto a = log.of_event("a");
  REQUIRE(a.size() == 1);
  CHECK(a[0].attempt == 2);
  CHECK(log.oldest() == std::chrono::system_clock::time_point{} + 2s);
  log.add(entry("d", 1, 1, 5));
  log.add(entry("e", 1, 1, 6));
  CHECK(log.of_event("a").empty());
  CHECK(log.of_event("b").empty());
  CHECK(log.of_endpoint(1, 10).size() == 3);
}

TEST_CASE("outcome_log: capacity 0 keeps nothing") {
  outcome_log log(0);
  log.add(entry("a", 1, 1));
  CHECK(log.size() == 0);
  CHECK(log.of_event("a").empty());
}

TEST_CASE("outcome_log: model-based, seeds x steps") {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const std::size_t capacity = 1 + rng() % 40;
    outcome_log log(capacity);
    std::vector<outcome_entry> all;
    for (int step = 0; step < 400; ++step) {
      auto e = entry("ev" + std::to_string(rng() % 25), static_cast<std::int64_t>(rng() % 4), step, step);
      all.push_back(e);
      log.add(e);
      const std::size_t kept = std::min(capacity, all.size());
      REQUIRE(log.size() == kept);
      const std::vector<outcome_entry> model(all.end() - static_cast<std::ptrdiff_t>(kept), all.end());
      CHECK(log.oldest() == model.front().at);
      const std::string probe = "ev" + std::to_string(rng() % 25);
      std::vector<int> want, got;
      for (const auto& m : model)
        if (m.event_id == probe) want.push_back(m.attempt);
      for (const auto& g : log.of_event(probe)) got.push_back(g.attempt);
      CHECK(got == want);
      const auto endpoint = static_cast<std::int64_t>(rng() % 4);
      const std::size_t limit = rng() % 10;
      std::vector<int> want_ep, got_ep;
      for (auto it = model.rbegin(); it != model.rend() && want_ep.size() < limit; ++it)
        if (it->endpoint_id == endpoint) want_ep.push_back(it->attempt);
      for (const auto& g : log.of_endpoint(endpoint, limit)) got_ep.push_back(g.attempt);
      CHECK(got_ep == want_ep);
    }
  }
}
