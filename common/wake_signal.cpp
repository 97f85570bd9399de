#include "common/wake_signal.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace walhook {
namespace asio = boost::asio;

struct wake_signal::timer {
  explicit timer(asio::any_io_executor ex) : t(std::move(ex)) {}
  asio::steady_timer t;
};

wake_signal::wake_signal(asio::any_io_executor ex) : timer_(std::make_unique<timer>(std::move(ex))) {}
wake_signal::~wake_signal() = default;

void wake_signal::notify() {
  pending_ = true;
  if (waiting_) timer_->t.cancel();
}

asio::awaitable<bool> wake_signal::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (!pending_) {
    waiting_ = true;
    timer_->t.expires_at(deadline);
    co_await timer_->t.async_wait(asio::as_tuple(asio::use_awaitable));
    waiting_ = false;
  }
  bool notified = pending_;
  pending_ = false;
  co_return notified;
}

}  // namespace walhook
