// common/task_group.hpp and common/wake_signal.hpp: two-phase cancellation (total, then
// terminal), waiting for every task, no lost wakeup. Driven by polling the io_context; nothing
// sleeps.

#include "common/task_group.hpp"
#include "common/wake_signal.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using walhook::task_group;
using walhook::wake_signal;

namespace {

void poll(asio::io_context& ioc) {
  ioc.poll();
  ioc.restart();
}

/// Waits forever (until cancelled); records how it ended.
asio::awaitable<void> waiter(std::vector<std::string>& log, std::string name, bool accepts_total) {
  if (accepts_total) co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::steady_clock::time_point::max());
  auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  log.push_back(name + (ec == asio::error::operation_aborted ? " cancelled" : " woke"));
}

}  // namespace

TEST_CASE("task_group: total cancellation reaches tasks that accept it; terminal reaches the rest") {
  asio::io_context ioc;
  task_group group(ioc.get_executor());
  std::vector<std::string> log;
  group.spawn(waiter(log, "loop", true), "loop");
  group.spawn(waiter(log, "attempt", false), "attempt");
  poll(ioc);
  CHECK(group.size() == 2);
  group.emit(asio::cancellation_type::total);
  poll(ioc);
  CHECK(log == std::vector<std::string>{"loop cancelled"});
  CHECK(group.size() == 1);  // the attempt keeps going
  group.emit(asio::cancellation_type::terminal);
  poll(ioc);
  CHECK(log == std::vector<std::string>{"loop cancelled", "attempt cancelled"});
  CHECK(group.size() == 0);
}

TEST_CASE("task_group: async_wait returns when the last task ends, or at its deadline") {
  asio::io_context ioc;
  task_group group(ioc.get_executor());
  std::vector<std::string> log;
  group.spawn(waiter(log, "a", true), "a");
  std::optional<bool> all_done;
  asio::co_spawn(ioc, group.async_wait(), [&](std::exception_ptr, bool done) { all_done = done; });
  poll(ioc);
  CHECK_FALSE(all_done.has_value());
  group.emit(asio::cancellation_type::total);
  poll(ioc);
  REQUIRE(all_done.has_value());
  CHECK(*all_done);

  group.spawn(waiter(log, "b", false), "b");
  std::optional<bool> timed_out;
  asio::co_spawn(ioc, group.async_wait(std::chrono::steady_clock::now()), [&](std::exception_ptr, bool done) { timed_out = done; });
  for (int i = 0; i < 10 && !timed_out; ++i) poll(ioc);
  REQUIRE(timed_out.has_value());
  CHECK_FALSE(*timed_out);  // b still runs
  group.emit(asio::cancellation_type::terminal);
  poll(ioc);
  CHECK(group.size() == 0);
}

TEST_CASE("task_group: an exception ends only its own task") {
  asio::io_context ioc;
  task_group group(ioc.get_executor());
  std::vector<std::string> log;
  group.spawn([]() -> asio::awaitable<void> {
    throw std::runtime_error("boom");
    co_return;
  }(), "thrower");
  group.spawn(waiter(log, "other", true), "other");
  poll(ioc);
  CHECK(group.size() == 1);
  group.emit(asio::cancellation_type::total);
  poll(ioc);
  CHECK(group.size() == 0);
}

TEST_CASE("wake_signal: a notify before the wait is not lost; a wait without one times out") {
  asio::io_context ioc;
  wake_signal wake(ioc.get_executor());
  wake.notify();
  CHECK(wake.pending());
  std::optional<bool> first;
  asio::co_spawn(ioc, wake.wait_until(std::chrono::steady_clock::time_point::max()), [&](std::exception_ptr, bool n) { first = n; });
  poll(ioc);
  REQUIRE(first.has_value());
  CHECK(*first);
  CHECK_FALSE(wake.pending());

  std::optional<bool> second;
  asio::co_spawn(ioc, wake.wait_until(std::chrono::steady_clock::time_point::max()), [&](std::exception_ptr, bool n) { second = n; });
  poll(ioc);
  CHECK_FALSE(second.has_value());  // waiting
  wake.notify();
  poll(ioc);
  REQUIRE(second.has_value());
  CHECK(*second);

  std::optional<bool> third;
  asio::co_spawn(ioc, wake.wait_until(std::chrono::steady_clock::now()), [&](std::exception_ptr, bool n) { third = n; });
  for (int i = 0; i < 10 && !third; ++i) poll(ioc);
  REQUIRE(third.has_value());
  CHECK_FALSE(*third);
}
