// relay/admin/metrics_cache.hpp: a flood of scrapes costs one computation (one database query)
// per freshness interval; a scrape that finds the text stale has it computed and waits for it,
// while the scrapes meanwhile get the previous text and start no second query.

#include "relay/admin/metrics_cache.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

using namespace walhook::relay;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

/// A stand-in for engine::metrics_text(): "v1", "v2", …; while `blocked`, it waits on `gate`
/// (a query stuck behind a lock) until the test cancels the gate.
struct fake_metrics {
  explicit fake_metrics(asio::io_context& ioc) : gate(ioc, asio::steady_timer::time_point::max()) {}
  asio::steady_timer gate;
  bool blocked = false;
  int calls = 0;
  asio::awaitable<std::string> compute() {
    const int n = ++calls;
    if (blocked) co_await gate.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return "v" + std::to_string(n);
  }
};

/// Starts `n` scrapes at once; their answers land in `out` as they finish.
void scrape(asio::io_context& ioc, metrics_cache& cache, int n, std::vector<std::string>& out) {
  for (int i = 0; i < n; ++i)
    asio::co_spawn(ioc, [&cache, &out]() -> asio::awaitable<void> { out.push_back(co_await cache.text()); },
                   asio::detached);
}

void settle(asio::io_context& ioc) {
  ioc.restart();
  ioc.poll();
}

}  // namespace

TEST_CASE("metrics_cache: 100 scrapes at once, and 100 more within the interval, compute once") {
  asio::io_context ioc;
  fake_metrics m(ioc);
  metrics_cache cache(ioc.get_executor(), [&m] { return m.compute(); }, 1h);
  std::vector<std::string> got;
  scrape(ioc, cache, 100, got);
  settle(ioc);
  REQUIRE(got.size() == 100);
  for (const auto& t : got) CHECK(t == "v1");  // the first ones waited for the first text
  scrape(ioc, cache, 100, got);
  settle(ioc);
  CHECK(got.size() == 200);
  CHECK(got.back() == "v1");
  CHECK(m.calls == 1);
  CHECK(cache.computations() == 1);
}

TEST_CASE("metrics_cache: a stale text is computed again for the scrape that finds it; the others get the last one") {
  asio::io_context ioc;
  fake_metrics m(ioc);
  metrics_cache cache(ioc.get_executor(), [&m] { return m.compute(); }, 0ms);  // always stale
  std::vector<std::string> got;
  scrape(ioc, cache, 1, got);
  settle(ioc);
  REQUIRE(got == std::vector<std::string>{"v1"});
  // The database is stuck: the scrape that found the text stale waits for its query; the 50
  // after it answer at once, from the last text, and start no second query.
  m.blocked = true;
  scrape(ioc, cache, 1, got);
  settle(ioc);
  CHECK(got.size() == 1);  // it waits
  scrape(ioc, cache, 50, got);
  settle(ioc);
  CHECK(got.size() == 51);
  CHECK(got.back() == "v1");
  CHECK(m.calls == 2);
  CHECK(cache.computations() == 2);
  // The query ends: the waiting scrape gets its text; the next stale one computes again.
  m.blocked = false;
  m.gate.cancel();
  settle(ioc);
  CHECK(got.size() == 52);
  CHECK(got.back() == "v2");
  scrape(ioc, cache, 1, got);
  settle(ioc);
  CHECK(got.back() == "v3");
  CHECK(m.calls == 3);
}

TEST_CASE("metrics_cache: stop() cancels a computation that hangs; scrapes waiting for a first text end") {
  asio::io_context ioc;
  fake_metrics m(ioc);
  m.blocked = true;
  std::vector<std::string> got;
  {
    metrics_cache cache(ioc.get_executor(), [&m] { return m.compute(); }, 1s);
    scrape(ioc, cache, 3, got);
    settle(ioc);
    CHECK(got.empty());  // nothing to serve yet: they wait
    CHECK(m.calls == 1);
    cache.stop();
    settle(ioc);
    CHECK(got.size() == 3);  // they ended, with whatever there was
    scrape(ioc, cache, 1, got);
    settle(ioc);
    CHECK(got.size() == 4);
  }
  ioc.restart();
  ioc.run_for(100ms);
  CHECK(m.calls == 1);  // no computation after stop()
}
