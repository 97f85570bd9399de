#include "common/async_mutex.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace walhook {
namespace asio = boost::asio;

struct async_mutex::waiter {
  explicit waiter(asio::any_io_executor ex) : timer(ex, asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
};

async_mutex::async_mutex(asio::any_io_executor ex) : ex_(std::move(ex)) {}
async_mutex::~async_mutex() = default;

asio::awaitable<void> async_mutex::lock() {
  if (!locked_) {
    locked_ = true;
    co_return;
  }
  auto w = std::make_shared<waiter>(ex_);
  waiters_.push_back(w);
  // unlock() hands the mutex over by cancelling our timer; locked_ stays true.
  co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

void async_mutex::unlock() {
  if (waiters_.empty()) {
    locked_ = false;
    return;
  }
  auto next = waiters_.front();
  waiters_.pop_front();
  next->timer.cancel();
}

asio::awaitable<async_mutex::guard> async_mutex::scoped_lock() {
  co_await lock();
  co_return guard(this);
}

}  // namespace walhook
