#include "delivery/amqp_sink.hpp"

#include "delivery/amqp_connection.hpp"
#include "delivery/destination.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <list>
#include <map>
#include <mutex>

namespace walhook::delivery {

using amqp_detail::connection_worker;

/// Shared by the sink and nothing else; the workers own their connections.
struct amqp_sink::state {
  explicit state(broker_sink_options o) : options(std::move(o)) {}
  const broker_sink_options options;
  std::mutex mutex;  ///< guards the members below (forget/shutdown may come from any thread)
  bool shut_down = false;
  std::map<std::string, std::unique_ptr<connection_worker>> workers;  ///< by pool key
  /// Stopped workers whose threads may still be finishing a blocking call; joined when done
  /// (reap) or in the destructor, never on the caller's thread while they block.
  std::list<std::unique_ptr<connection_worker>> retired;

  void reap() {
    retired.remove_if([](const auto& w) { return w->finished(); });
  }
  void retire(std::unique_ptr<connection_worker> w, transport_error why) {
    w->stop(std::move(why));
    retired.push_back(std::move(w));
  }
  /// Queues `r` on the worker of `pool_key`, started on first use; false after shutdown.
  bool submit(const std::string& pool_key, amqp_detail::publish_request r) {
    std::lock_guard lock(mutex);
    if (shut_down) return false;
    reap();
    auto& w = workers[pool_key];
    if (!w) w = std::make_unique<connection_worker>(pool_key, options);
    w->submit(std::move(r));
    return true;
  }
};

amqp_sink::amqp_sink(boost::asio::any_io_executor, broker_sink_options options)
    : state_(std::make_shared<state>(std::move(options))) {}

amqp_sink::~amqp_sink() {
  shutdown();
  std::list<std::unique_ptr<connection_worker>> retired;
  {
    std::lock_guard lock(state_->mutex);
    retired.swap(state_->retired);
  }
  retired.clear();  // each worker's destructor joins its thread
}

boost::asio::awaitable<post_result> amqp_sink::async_post(const std::string&, const http_target&,
                                                          const http_request&) {
  co_return transport_error(transport_errc::sink_unavailable, "the AMQP sink publishes, it does not POST");
}

boost::asio::awaitable<post_result> amqp_sink::async_publish(const std::string& pool_key,
                                                             const broker_target& target,
                                                             const broker_message& message,
                                                             std::chrono::milliseconds deadline) {
  const auto* clock = state_->options.clock;
  const auto start = clock->steady_now();
  if (target.kind != sink_kind::amqp) co_return transport_error(transport_errc::sink_unavailable);
  auto w = std::make_shared<amqp_detail::waiter>(co_await boost::asio::this_coro::executor);
  w->timer.expires_after(deadline);
  if (!state_->submit(pool_key, {target, message, std::chrono::steady_clock::now() + deadline, w}))
    co_return transport_error(transport_errc::cancelled, "the AMQP sink shut down");
  // deliver() posts to this executor, so nothing can set the result between submit and here.
  if (!w->result) {
    boost::system::error_code ec;
    co_await w->timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
  if (!w->result)
    w->result = transport_error(transport_errc::timeout,
                                fmt::format("no confirm from the broker within {} ms", deadline.count()));
  auto r = *w->result;
  if (r) r->elapsed = std::chrono::duration_cast<std::chrono::microseconds>(clock->steady_now() - start);
  co_return r;
}

void amqp_sink::forget(const std::string& pool_key) {
  std::lock_guard lock(state_->mutex);
  auto it = state_->workers.find(pool_key);
  if (it == state_->workers.end()) return;
  state_->retire(std::move(it->second),
                 transport_error(transport_errc::broker_closed, "closed by walhook: the endpoint changed"));
  state_->workers.erase(it);
}

void amqp_sink::shutdown() {
  std::lock_guard lock(state_->mutex);
  state_->shut_down = true;
  for (auto& [key, w] : state_->workers)
    state_->retire(std::move(w), transport_error(transport_errc::cancelled, "the AMQP sink shut down"));
  state_->workers.clear();
}

void amqp_sink::cancel_all() {
  std::lock_guard lock(state_->mutex);
  for (auto& [key, w] : state_->workers)
    w->cancel(transport_error(transport_errc::cancelled, "walhook abandoned the attempt"));
}

}  // namespace walhook::delivery
