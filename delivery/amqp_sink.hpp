#pragma once
// The RabbitMQ sink: publishes broker_messages over AMQP 0-9-1 with publisher confirms
// (docs/brokers.md, "RabbitMQ (AMQP 0-9-1)"). rabbitmq-c does the wire work; its calls block
// and a connection is not thread-safe, so each connection (one per pool key = endpoint) is
// owned by a worker thread of its own (delivery/amqp_connection.hpp) and never touched by the
// engine's thread. Results come back to the caller's executor with asio::post.

#include "delivery/broker_sink.hpp"
#include "delivery/transport.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace walhook::delivery {

/// AMQP 0-9-1 publishes with confirms (amqp:// and amqps://), one connection and one worker
/// thread per pool key (a thread that sleeps in poll() while idle; endpoints are few, and an
/// endpoint's blocking connect or login never holds another endpoint's). Each connection
/// carries up to options.max_unconfirmed publishes in flight on one confirm-mode channel.
///
/// Outcomes (transport_errc, detail = the broker's words): Basic.Ack → status 200;
/// Basic.Nack → broker_nacked; Basic.Return of the mandatory publish → broker_unroutable
/// ("312 NO_ROUTE"); connection.blocked → broker_blocked ("low on memory"), for pending and new
/// publishes while it lasts; a channel or connection closed by the broker (404 no exchange,
/// 403 login refused, 530 no vhost) → broker_refused with its reply text; the connection lost
/// with publishes unconfirmed → broker_closed; the deadline first → timeout (a late confirm is
/// dropped: the event is retried and the consumer dedupes on message_id).
///
/// Thread affinity: async_publish on one executor (the engine's); forget, shutdown and
/// cancel_all from anywhere. The destructor joins the worker threads (each stops within about
/// a second, or at the end of a blocking connect it is in, bounded by that call's deadline).
class amqp_sink final : public transport {
 public:
  amqp_sink(boost::asio::any_io_executor ex, broker_sink_options options);
  ~amqp_sink() override;
  amqp_sink(const amqp_sink&) = delete;
  amqp_sink& operator=(const amqp_sink&) = delete;

  /// Not an HTTP transport: transport_errc::sink_unavailable.
  boost::asio::awaitable<post_result> async_post(const std::string& pool_key, const http_target& target,
                                                 const http_request& request) override;
  /// Publishes `message` to target.exchange with routing key message.subject (mandatory, delivery
  /// mode 2, content type application/json, message_id, timestamp, headers table) and completes
  /// on the broker's confirm, its refusal, or `deadline` (transport_errc::timeout). target.kind
  /// must be sink_kind::amqp.
  boost::asio::awaitable<post_result> async_publish(const std::string& pool_key, const broker_target& target,
                                                    const broker_message& message,
                                                    std::chrono::milliseconds deadline) override;
  /// Closes this pool key's connection (its unconfirmed publishes end with broker_closed).
  void forget(const std::string& pool_key) override;
  /// Ends every pending publish with cancelled and closes every connection; later calls fail so.
  void shutdown() override;
  /// Ends every pending publish with cancelled and closes every connection; later calls work.
  void cancel_all() override;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace walhook::delivery
