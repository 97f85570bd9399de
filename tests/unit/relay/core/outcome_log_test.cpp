// The in-memory outcome log (relay/core/outcome_log.hpp): hand-made cases, then a seeded model-based
// test against a plain vector of everything added (the ring must equal its last `capacity`).

#include "relay/core/outcome_log.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

using walhook::relay::outcome_entry;
using walhook::relay::outcome_log;
using namespace std::chrono_literals;

namespace {

/// A UUID (as outbox ids are) for a short test name: the log keeps ids as their 16 bytes.
std::string uuid_of(const std::string& name) {
  char out[37];
  std::snprintf(out, sizeof out, "00000000-0000-4000-8000-%012llx",
                static_cast<unsigned long long>(std::hash<std::string>{}(name) & 0xffffffffffffULL));
  return out;
}

outcome_entry entry(const std::string& event, std::int64_t endpoint, int attempt, int seconds = 0) {
  outcome_entry e;
  e.event_id = uuid_of(event);
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
  auto e1 = log.of_event(uuid_of("e1"));
  REQUIRE(e1.size() == 3);
  CHECK(e1[0].attempt == 1);
  CHECK(e1[0].endpoint_id == 1);
  CHECK(e1[1].attempt == 2);
  CHECK(e1[1].result == "delivered");
  CHECK(e1[2].endpoint_id == 2);
  CHECK(log.of_event("nope").empty());
  auto ep2 = log.of_endpoint(2, 50);
  REQUIRE(ep2.size() == 2);
  CHECK(ep2[0].event_id == uuid_of("e1"));  // newest first
  CHECK(ep2[1].event_id == uuid_of("e2"));
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
  auto a = log.of_event(uuid_of("a"));
  REQUIRE(a.size() == 1);
  CHECK(a[0].attempt == 2);
  CHECK(log.oldest() == std::chrono::system_clock::time_point{} + 2s);
  log.add(entry("d", 1, 1, 5));
  log.add(entry("e", 1, 1, 6));
  CHECK(log.of_event(uuid_of("a")).empty());
  CHECK(log.of_event(uuid_of("b")).empty());
  CHECK(log.of_endpoint(1, 10).size() == 3);
}

TEST_CASE("outcome_log: an entry comes back as it went in; ids are UUIDs in either case") {
  outcome_log log(4);
  outcome_entry e;
  e.event_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  e.endpoint_id = 42;
  e.at = std::chrono::system_clock::time_point{} + 1234567us;
  e.attempt = 3;
  e.http_status = 429;
  e.outcome = "4xx";
  e.result = "dead";
  e.duration_s = 0.25;
  log.add(e);
  auto got = log.of_event("0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B");
  REQUIRE(got.size() == 1);
  CHECK(got[0].event_id == e.event_id);
  CHECK(got[0].endpoint_id == 42);
  CHECK(got[0].at == e.at);
  CHECK(got[0].attempt == 3);
  CHECK(got[0].http_status == 429);
  CHECK(got[0].outcome == "4xx");
  CHECK(got[0].result == "dead");
  CHECK(got[0].duration_s == doctest::Approx(0.25));
  // An id that is no UUID is not recorded (outbox ids always are).
  outcome_entry odd = e;
  odd.event_id = "not-a-uuid";
  log.add(odd);
  CHECK(log.size() == 1);
  CHECK(log.of_event("not-a-uuid").empty());
}

TEST_CASE("outcome_log: capacity 0 keeps nothing") {
  outcome_log log(0);
  log.add(entry("a", 1, 1));
  CHECK(log.size() == 0);
  CHECK(log.of_event(uuid_of("a")).empty());
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
      const std::string probe = uuid_of("ev" + std::to_string(rng() % 25));
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
