#pragma once
// Internal to delivery/amqp_sink.cpp: one AMQP 0-9-1 connection and the worker thread that owns
// it. rabbitmq-c's calls block and its connection state is not thread-safe, so everything that
// touches `conn_` runs on that thread; the engine only queues requests (submit) and is told the
// outcome through a waiter posted to its executor.
//
// Protocol references: AMQP 0-9-1 specification (basic.publish, basic.return, channel.close,
// connection.close) and RabbitMQ's extensions: publisher confirms (confirm.select, basic.ack /
// basic.nack with `multiple`), connection.blocked / connection.unblocked
// (https://www.rabbitmq.com/docs/confirms, https://www.rabbitmq.com/docs/connection-blocked).

#include "delivery/broker_sink.hpp"
#include "delivery/destination.hpp"
#include "delivery/transport.hpp"

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

struct amqp_connection_state_t_;
struct amqp_frame_t_;

namespace walhook::delivery::amqp_detail {

/// The caller's side of one publish. `timer` (armed with the deadline) and `result` are touched
/// on the caller's executor only: the worker posts the outcome there (deliver()).
struct waiter {
  explicit waiter(boost::asio::any_io_executor ex) : timer(std::move(ex)) {}
  boost::asio::steady_timer timer;
  std::optional<post_result> result;  ///< set once: the first outcome wins (a late confirm is dropped)
};

/// Posts `r` to the waiter's executor; there it becomes the result unless one is already set,
/// and wakes the waiting coroutine. Callable from any thread.
void deliver(const std::shared_ptr<waiter>& w, post_result r);

/// One publish queued for a worker. The deadline is on the real steady clock (socket timeouts).
struct publish_request {
  broker_target target;
  broker_message message;
  std::chrono::steady_clock::time_point deadline;
  std::shared_ptr<waiter> w;
};

/// One connection (one pool key) and its thread. Thread-safe entry points: submit, cancel,
/// stop, finished; everything else runs on the worker thread.
class connection_worker {
 public:
  connection_worker(std::string name, const broker_sink_options& options);
  ~connection_worker();  ///< stop(cancelled) and join
  connection_worker(const connection_worker&) = delete;
  connection_worker& operator=(const connection_worker&) = delete;

  /// Queues a publish; the worker connects if it must and publishes within its window.
  void submit(publish_request r);
  /// Ends queued and unconfirmed publishes with `why` and closes the connection; the worker
  /// keeps running (the next publish reconnects).
  void cancel(transport_error why);
  /// cancel(why), then the thread exits; join() waits for it.
  void stop(transport_error why);
  /// The thread has exited (join() will not block).
  bool finished() const { return finished_.load(); }
  void join();

 private:
  /// A publish sent and not yet confirmed, by delivery tag.
  struct unconfirmed {
    std::string message_id;
    std::shared_ptr<waiter> w;
    std::optional<std::string> returned;  ///< the Basic.Return's words, if the broker returned it
  };
  /// A Basic.Return being read: its method, then a content header (the message_id), then body frames.
  struct return_in_progress {
    std::string why;
    std::string message_id;
    std::uint64_t body_left = 0;
    bool have_header = false;
  };

  void run();
  bool take_commands();
  void connect(std::chrono::steady_clock::time_point deadline);
  transport_error open_and_login(const std::string& address, std::chrono::steady_clock::time_point deadline);
  void publish_queued();
  bool publish_one(publish_request& r);
  void read_frames();
  void on_frame(const amqp_frame_t_& f);
  void on_method(const amqp_frame_t_& f);
  void on_confirm(std::uint64_t tag, bool multiple, bool ack);
  void on_return_done();
  void wait_for_work();
  void fail_unconfirmed(const transport_error& why);
  void fail_queued(const transport_error& why);
  /// fail_unconfirmed(why) and close the connection: `polite` with connection.close (bounded by
  /// close_timeout), else the socket is just dropped (it is broken already).
  void drop(const transport_error& why, bool polite = true);
  void close_connection(bool polite);

  const std::string name_;  ///< the pool key (endpoint id); the AMQP connection_name is "walhook endpoint " + name_
  const broker_sink_options options_;
  int wake_fd_ = -1;  ///< eventfd: submit/cancel/stop wake the worker out of poll()

  std::mutex mutex_;  ///< guards inbox_, cancel_, stop_
  std::deque<publish_request> inbox_;
  std::optional<transport_error> cancel_;
  bool stop_ = false;
  std::atomic<bool> finished_{false};

  // Worker thread only.
  std::deque<publish_request> queued_;
  amqp_connection_state_t_* conn_ = nullptr;
  broker_target conn_target_;  ///< what conn_ was opened for (exchange and subject unused)
  std::uint64_t next_tag_ = 1;
  std::map<std::uint64_t, unconfirmed> unconfirmed_;
  std::optional<return_in_progress> return_;
  std::optional<std::string> blocked_;  ///< connection.blocked's reason while the broker blocks us

  std::thread thread_;
};

}  // namespace walhook::delivery::amqp_detail
