#pragma once
// Owns spawned coroutines, so none is fire-and-forget (Beast's task_group in its
// advanced_server_flex_awaitable example is the model). Every task gets its own cancellation
// signal; emit() sends one cancellation type to all of them; async_wait() waits until they are
// all done. Shutdown is two-phase:
//
//   group.emit(total);   co_await group.async_wait(now + grace);   // ask: stop when you can
//   group.emit(terminal); co_await group.async_wait();              // insist
//
// What "total" means is each task's choice: loops and idle reads enable total cancellation
// (asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation())) and stop;
// delivery attempts keep the default (terminal only) and finish within their deadline.
//
// Thread affinity: one executor; every call from it. The group's state lives until its last
// task finished, so destroying the group while tasks run is safe (it emits terminal first).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace walhook {

class task_group {
 public:
  explicit task_group(boost::asio::any_io_executor ex);
  ~task_group();
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  /// Starts `task` on the group's executor. An exception escaping it is logged with `name`
  /// (a task ended by cancellation is not an error) and never rethrown.
  void spawn(boost::asio::awaitable<void> task, std::string name);

  /// Sends `type` to every running task's cancellation slot.
  void emit(boost::asio::cancellation_type type);

  /// Waits until no task runs or `deadline` passes; true if none runs.
  boost::asio::awaitable<bool> async_wait(
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

  /// Tasks still running.
  std::size_t size() const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace walhook
