// The async libpq connection against a real server: timeouts in the middle of a command close
// the connection (it cannot be reused) instead of wedging every later query; a caller cancelled
// with any cancellation type stops waiting at once; a multi-host URL whose first host never
// answers still reaches the next one (failover).

#include "common/pg_connection.hpp"
#include "tests/harness/harness.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

TEST_CASE("a query whose caller accepts total cancellation ends when it is cancelled, not at its timeout") {
  // What a claim does at shutdown (relay/engine/dispatcher_claims.cpp): its loop accepts `total`
  // cancellation and the engine emits it. The query answers within 300 ms; its timeout is 60 s.
  // The wait must end with the cancellation (errc::cancelled) — it used to swallow it, see the
  // answer, and then wait out the timeout while holding the connection.
  auto& pg = test::cluster();
  asio::io_context ioc;
  pg::connection conn(ioc.get_executor());
  std::optional<boost::system::result<pg::query_result>> outcome;
  auto query = [&]() -> asio::awaitable<void> {
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    if (co_await conn.async_connect(pg.url(), 10s)) co_return;
    outcome = co_await conn.async_exec("SELECT pg_sleep(0.3)", pg::params{}, 60s);
  };
  asio::cancellation_signal signal;
  asio::co_spawn(ioc, query(), asio::bind_cancellation_slot(signal.slot(), [](std::exception_ptr) {}));
  asio::steady_timer later(ioc);
  bool emitted = false;
  // Once connected, the coroutine is waiting for the query's answer: cancel its caller.
  std::function<void()> poll = [&] {
    later.expires_after(20ms);
    later.async_wait([&](boost::system::error_code) {
      if (conn.is_open() && !outcome) {
        signal.emit(asio::cancellation_type::total);
        emitted = true;
        return;
      }
      if (!outcome) poll();
    });
  };
  poll();
  const auto started = std::chrono::steady_clock::now();
  ioc.run_for(90s);
  const auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE(emitted);
  REQUIRE(outcome.has_value());
  CHECK(outcome->error() == pg::errc::cancelled);
  CHECK(waited < 30s);  // ends with the cancellation, long before the 60 s timeout
  CHECK_FALSE(conn.is_open());  // mid-command: not reusable
}

TEST_CASE("a first host that accepts TCP but never answers does not keep a multi-host URL from the next host") {
  auto& pg = test::cluster();
  // A listener nobody accepts from: the kernel completes the handshake, libpq sends its startup
  // packet and nothing ever answers — a hung server, as a dead machine behind a live address is.
  int hung = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(hung >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(hung, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(hung, 16) == 0);
  REQUIRE(::getsockname(hung, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int hung_port = ntohs(addr.sin_port);

  asio::io_context ioc;
  pg::connection conn(ioc.get_executor());
  auto connect = [&](const std::string& url, std::chrono::milliseconds timeout) {
    auto f = asio::co_spawn(ioc, conn.async_connect(url, timeout, {{"application_name", "it_pg_connection"}}),
                            asio::use_future);
    auto began = std::chrono::steady_clock::now();
    ioc.run();
    ioc.restart();
    auto ec = f.get();
    return std::pair{ec, std::chrono::steady_clock::now() - began};
  };
  // The URL's connect_timeout bounds each host, as libpq does in blocking mode.
  auto [ec, took] = connect(fmt::format("postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?"
                                        "target_session_attrs=read-write&connect_timeout=2", hung_port, pg.port()),
                            10s);
  CHECK_FALSE(ec);
  CHECK(conn.is_open());
  CHECK(took >= 1900ms);
  CHECK(took < 5s);
  // Without one, each host gets an equal share of the deadline.
  std::tie(ec, took) =
      connect(fmt::format("postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres", hung_port, pg.port()), 3s);
  CHECK_FALSE(ec);
  CHECK(took >= 1400ms);
  CHECK(took < 3s);
  // Every host failing: each one's reason.
  std::tie(ec, took) = connect(fmt::format("postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres", hung_port,
                                           relay::free_tcp_port()), 1s);
  CHECK(ec);
  CHECK(conn.last_error().find("timed out") != std::string::npos);
  CHECK(conn.last_error().find("refused") != std::string::npos);
  ::close(hung);
}
