#pragma once
// A FIFO mutex for coroutines on one executor: lets several coroutines share a resource that
// allows one operation at a time (a libpq connection) without blocking the thread.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <deque>
#include <memory>

namespace boost::asio {
template <typename Clock, typename WaitTraits, typename Executor>
class basic_waitable_timer;
}

namespace walhook {

class async_mutex {
 public:
  explicit async_mutex(boost::asio::any_io_executor ex);
  ~async_mutex();
  async_mutex(const async_mutex&) = delete;
  async_mutex& operator=(const async_mutex&) = delete;

  /// Waits until the mutex is ours (first come, first served).
  boost::asio::awaitable<void> lock();
  /// Hands the mutex to the next waiter, or frees it.
  void unlock();

  /// Unlocks on destruction; move-only.
  class guard {
   public:
    explicit guard(async_mutex* m) : m_(m) {}
    guard(guard&& o) noexcept : m_(o.m_) { o.m_ = nullptr; }
    guard& operator=(guard&& o) noexcept {
      if (this != &o) {
        release();
        m_ = o.m_;
        o.m_ = nullptr;
      }
      return *this;
    }
    ~guard() { release(); }
    void release() {
      if (m_) m_->unlock();
      m_ = nullptr;
    }

   private:
    async_mutex* m_;
  };
  /// lock() wrapped in a guard.
  boost::asio::awaitable<guard> scoped_lock();

 private:
  struct waiter;
  boost::asio::any_io_executor ex_;
  bool locked_ = false;
  std::deque<std::shared_ptr<waiter>> waiters_;
};

}  // namespace walhook
