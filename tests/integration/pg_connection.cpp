// The async libpq connection against a real server: timeouts in the middle of a command close
// the connection (it cannot be reused) instead of wedging every later query.

#include "common/pg_connection.hpp"
#include "tests/harness/harness.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <doctest/doctest.h>

using namespace walhook;
using namespace std::chrono_literals;
namespace asio = boost::asio;

TEST_CASE("a query that outlives its deadline closes the connection; reconnecting works") {
  auto& pg = test::cluster();
  asio::io_context ioc;
  pg::connection conn(ioc.get_executor());
  auto run = [&](auto awaitable) {
    auto f = asio::co_spawn(ioc, std::move(awaitable), asio::use_future);
    ioc.run();
    ioc.restart();
    return f.get();
  };
  REQUIRE_FALSE(run(conn.async_connect(pg.url(), 10s)));
  auto slow = run(conn.async_exec("SELECT pg_sleep(5)", pg::params{}, 200ms));
  CHECK(slow.error() == pg::errc::timeout);
  CHECK_FALSE(conn.is_open());  // the command is still running on the server: not reusable
  auto after = run(conn.async_exec("SELECT 1", pg::params{}, 5s));
  CHECK(after.error() == pg::errc::not_connected);
  REQUIRE_FALSE(run(conn.async_connect(pg.url(), 10s)));
  auto again = run(conn.async_exec("SELECT 41 + 1", pg::params{}, 5s));
  REQUIRE(again.has_value());
  CHECK(again->value(0, 0) == "42");
  // A server error is a value and leaves the connection usable.
  auto bad = run(conn.async_exec("SELECT 1/0", pg::params{}, 5s));
  CHECK(bad.error() == pg::errc::query_failed);
  CHECK(conn.last_sqlstate() == "22012");
  CHECK(conn.is_open());
  auto pipeline = run(conn.async_pipeline(std::vector<pg::statement>{{"SELECT 1", {}}, {"SELECT $1::int * 2", {"21"}}}, 5s));
  REQUIRE(pipeline.has_value());
  CHECK((*pipeline)[1].value(0, 0) == "42");
}
