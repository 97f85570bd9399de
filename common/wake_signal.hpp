#pragma once
// A wake-up for one waiting coroutine that is never lost: notify() made while nobody waits
// makes the next wait return at once. Replaces "requested"/"waiting" flag pairs next to a timer.
//
// Thread affinity: one executor.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>

namespace walhook {

class wake_signal {
 public:
  explicit wake_signal(boost::asio::any_io_executor ex);
  ~wake_signal();
  wake_signal(const wake_signal&) = delete;
  wake_signal& operator=(const wake_signal&) = delete;

  /// Wakes the waiter, or the next one to wait.
  void notify();
  /// Whether a notify() is waiting to be consumed.
  bool pending() const { return pending_; }

  /// Returns at notify() (at once if one is pending), at `deadline`, or when the awaiting
  /// coroutine is cancelled. True if it was notified; the notification is consumed.
  boost::asio::awaitable<bool> wait_until(std::chrono::steady_clock::time_point deadline);

 private:
  struct timer;
  std::unique_ptr<timer> timer_;
  bool pending_ = false;
  bool waiting_ = false;
};

}  // namespace walhook
