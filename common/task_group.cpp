#include "common/task_group.hpp"

#include "common/log.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <list>

namespace walhook {
namespace asio = boost::asio;

struct task_group::state {
  explicit state(asio::any_io_executor ex) : executor(std::move(ex)) {}
  struct task {
    asio::cancellation_signal signal;
    std::string name;
  };
  asio::any_io_executor executor;
  std::list<task> tasks;
  std::list<asio::steady_timer*> waiters;  ///< woken when the last task ends

  void finished(std::list<task>::iterator it, std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const boost::system::system_error& err) {
        // Awaiting an operation after cancellation throws operation_aborted: a normal end.
        if (err.code() != asio::error::operation_aborted)
          log::error("task.failed", {{"task", it->name}, {"error", err.what()}});
      } catch (const std::exception& err) {
        log::error("task.failed", {{"task", it->name}, {"error", err.what()}});
      }
    }
    tasks.erase(it);
    if (tasks.empty())
      for (auto* w : waiters) w->cancel();
  }
};

task_group::task_group(asio::any_io_executor ex) : state_(std::make_shared<state>(std::move(ex))) {}

task_group::~task_group() { emit(asio::cancellation_type::terminal); }

void task_group::spawn(asio::awaitable<void> task, std::string name) {
  auto& st = *state_;
  auto it = st.tasks.emplace(st.tasks.end());
  it->name = std::move(name);
  asio::co_spawn(st.executor, std::move(task),
                 asio::bind_cancellation_slot(it->signal.slot(), [s = state_, it](std::exception_ptr e) {
                   s->finished(it, e);
                 }));
}

void task_group::emit(asio::cancellation_type type) {
  for (auto& t : state_->tasks) t.signal.emit(type);
}

asio::awaitable<bool> task_group::async_wait(std::chrono::steady_clock::time_point deadline) {
  auto s = state_;
  if (s->tasks.empty()) co_return true;
  asio::steady_timer timer(s->executor, deadline);
  auto it = s->waiters.insert(s->waiters.end(), &timer);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  s->waiters.erase(it);
  co_return s->tasks.empty();
}

std::size_t task_group::size() const { return state_->tasks.size(); }

}  // namespace walhook
